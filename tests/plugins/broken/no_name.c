/*
 * no_name.so - trips the loader's required-strings check: the descriptor's
 * name is NULL.
 */
#include "broken.h"

static const aks_plugin_descriptor descriptor =
    BROKEN_DESCRIPTOR(AKS_DESCRIPTOR_VERSION, sizeof(aks_plugin_descriptor), AKS_ABI_MAJOR,
                      AKS_ABI_MINOR, AKS_PLUGIN_PROVIDER, NULL, "MIT", &broken_provider_ops);

BROKEN_ENTRY(&descriptor);
