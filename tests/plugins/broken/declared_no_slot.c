/*
 * declared_no_slot.so - trips the loader's honesty check: it declares the package_install
 * capability (which the host would advertise) but has no install_packages operation.
 */
#include "broken.h"

static const aks_capabilities capabilities = {
    .struct_version = AKS_CAPABILITIES_VERSION,
    .struct_size = sizeof(aks_capabilities),
    .isolation = AKS_ISOLATION_NONE,
    .languages = broken_languages,
    .package_install = true, /* the lie: no slot below */
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
    .sandbox = &broken_sandbox_ops, /* no install_packages */
};

AKS_PLUGIN_DEFINE(AKS_PLUGIN_PROVIDER, "declared_no_slot", "1.0", "MIT",
                  "deliberately broken test plugin", NULL, &ops);
