/*
 * old_struct.so - trips the loader's struct version/size check: the descriptor
 * says struct_version 0 and struct_size 8 (only the two header fields). The
 * remaining fields hold valid values on purpose, so only a loader that honours
 * struct_version and struct_size refuses it.
 */
#include "broken.h"

static const aks_plugin_descriptor descriptor =
    BROKEN_DESCRIPTOR(0, 8, AKS_ABI_MAJOR, AKS_ABI_MINOR, AKS_PLUGIN_PROVIDER, "old_struct", "MIT",
                      &broken_provider_ops);

BROKEN_ENTRY(&descriptor);
