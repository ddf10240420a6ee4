/*
 * abi_minor.so - trips the loader's ABI minor check: the descriptor claims
 * AKS_ABI_MINOR + 1 (built against a newer SDK than the host's), which the host
 * must refuse with both versions in the message.
 */
#include "broken.h"

static const aks_plugin_descriptor descriptor = BROKEN_DESCRIPTOR(
    AKS_DESCRIPTOR_VERSION, sizeof(aks_plugin_descriptor), AKS_ABI_MAJOR, AKS_ABI_MINOR + 1,
    AKS_PLUGIN_PROVIDER, "abi_minor", "MIT", &broken_provider_ops);

BROKEN_ENTRY(&descriptor);
