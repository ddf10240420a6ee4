/*
 * no_entry.so - trips the loader's entry-point lookup: the plugin exports no
 * aks_plugin_entry (only a misspelt aks_plugin_entrypoint), so dlsym() fails
 * and the loader must refuse it with a message naming the missing symbol.
 */
#include "broken.h"

static const aks_plugin_descriptor descriptor =
    BROKEN_DESCRIPTOR(AKS_DESCRIPTOR_VERSION, sizeof(aks_plugin_descriptor), AKS_ABI_MAJOR,
                      AKS_ABI_MINOR, AKS_PLUGIN_PROVIDER, "no_entry", "MIT", &broken_provider_ops);

AKS_EXPORT const aks_plugin_descriptor *aks_plugin_entrypoint(void);
AKS_EXPORT const aks_plugin_descriptor *aks_plugin_entrypoint(void)
{
	return &descriptor;
}
