/*
 * no_license.so - trips the loader's required-strings check: the descriptor's
 * license is NULL (packagers need an SPDX identifier for every plugin).
 */
#include "broken.h"

static const aks_plugin_descriptor descriptor =
    BROKEN_DESCRIPTOR(AKS_DESCRIPTOR_VERSION, sizeof(aks_plugin_descriptor), AKS_ABI_MAJOR,
                      AKS_ABI_MINOR, AKS_PLUGIN_PROVIDER, "no_license", NULL, &broken_provider_ops);

BROKEN_ENTRY(&descriptor);
