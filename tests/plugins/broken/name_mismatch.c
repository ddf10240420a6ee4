/*
 * name_mismatch.so - trips the loader's name check: the descriptor declares the
 * name "something_else", which is not the file's base name.
 */
#include "broken.h"

static const aks_plugin_descriptor descriptor = BROKEN_DESCRIPTOR(
    AKS_DESCRIPTOR_VERSION, sizeof(aks_plugin_descriptor), AKS_ABI_MAJOR, AKS_ABI_MINOR,
    AKS_PLUGIN_PROVIDER, "something_else", "MIT", &broken_provider_ops);

BROKEN_ENTRY(&descriptor);
