/*
 * Mixed_Case.so - a valid provider whose name breaks the name rule (lowercase letters, digits
 * and '_'): its file name matches, so only the rule itself can refuse it, by path too.
 */
#include "broken.h"

static const aks_sandbox_ops sandbox_ops = {
    .struct_version = AKS_SANDBOX_OPS_VERSION,
    .struct_size = sizeof(aks_sandbox_ops),
    .id = broken_id,
    .execute_code = broken_execute_code,
    .close = broken_close,
};

static const aks_provider_ops ops = {
    .struct_version = AKS_PROVIDER_OPS_VERSION,
    .struct_size = sizeof(aks_provider_ops),
    .capabilities = &broken_capabilities,
    .init = broken_init,
    .fini = broken_fini,
    .create = broken_create,
    .destroy = broken_destroy,
    .sandbox = &sandbox_ops,
};

AKS_PLUGIN_DEFINE(AKS_PLUGIN_PROVIDER, "Mixed_Case", "1.0", "MIT",
                  "deliberately broken test plugin", NULL, &ops);
