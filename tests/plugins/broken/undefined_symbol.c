/*
 * undefined_symbol.so - trips the loader's dlopen(RTLD_NOW) failure path for an
 * unresolved symbol: it calls aks_test_symbol_that_does_not_exist(), which no
 * library defines. It is linked without -no-undefined so the link succeeds;
 * dlopen with RTLD_NOW then fails with "undefined symbol".
 */
#include "broken.h"

int aks_test_symbol_that_does_not_exist(void);

static int undefined_symbol_init(const aks_host_api *host, const aks_config *config,
                                 aks_provider_impl **out, aks_error **err)
{
	if (aks_test_symbol_that_does_not_exist() != 0)
		return host->error_set(err, AKS_ERROR, "unreachable");
	return broken_init(host, config, out, err);
}

static const aks_provider_ops ops = {
    .struct_version = AKS_PROVIDER_OPS_VERSION,
    .struct_size = sizeof(aks_provider_ops),
    .capabilities = &broken_capabilities,
    .init = undefined_symbol_init,
    .fini = broken_fini,
    .create = broken_create,
    .destroy = broken_destroy,
    .sandbox = &broken_sandbox_ops,
};

AKS_PLUGIN_DEFINE(AKS_PLUGIN_PROVIDER, "undefined_symbol", "1.0", "MIT",
                  "deliberately broken test plugin", NULL, &ops);
