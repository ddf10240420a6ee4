/*
 * no_python.so - trips the loader's capability check: the declared languages
 * lack "python", which every provider must run.
 */
#include "broken.h"

static const char *const languages[] = {"bash", NULL};

static const aks_capabilities capabilities = {
    .struct_version = AKS_CAPABILITIES_VERSION,
    .struct_size = sizeof(aks_capabilities),
    .isolation = AKS_ISOLATION_NONE,
    .languages = languages,
    .shell = true,
    .provisions = true,
};

static const aks_provider_ops ops = {
    .struct_version = AKS_PROVIDER_OPS_VERSION,
    .struct_size = sizeof(aks_provider_ops),
    .capabilities = &capabilities,
    .init = broken_init,
    .fini = broken_fini,
    .create = broken_create,
    .destroy = broken_destroy,
    .sandbox = &broken_sandbox_ops,
};

AKS_PLUGIN_DEFINE(AKS_PLUGIN_PROVIDER, "no_python", "1.0", "MIT", "deliberately broken test plugin",
                  NULL, &ops);
