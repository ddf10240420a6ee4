/*
 * abi_major.so - trips the loader's ABI major check: the descriptor claims
 * AKS_ABI_MAJOR + 1 (a plugin from a future, incompatible SDK). The loader must
 * refuse it with both versions in the message.
 */
#include "broken.h"

static const aks_plugin_descriptor descriptor =
    BROKEN_DESCRIPTOR(AKS_DESCRIPTOR_VERSION, sizeof(aks_plugin_descriptor), AKS_ABI_MAJOR + 1,
                      AKS_ABI_MINOR, AKS_PLUGIN_PROVIDER, "abi_major", "MIT", &broken_provider_ops);

BROKEN_ENTRY(&descriptor);
