/*
 * missing_dep.so - trips the loader's dlopen() failure path for a missing
 * dependency: it needs libaks-test-gone.so, which the dynamic linker cannot
 * find at run time (its recorded run path does not hold it), so dlopen() fails
 * with "libaks-test-gone.so: cannot open shared object file". The loader must
 * say that a missing dependency is the likely cause.
 */
#include "broken.h"

int aks_test_gone_answer(void);

/* Calls into the helper so that the linker keeps the dependency even with
 * --as-needed. */
static int missing_dep_init(const aks_host_api *host, const aks_config *config,
                            aks_provider_impl **out, aks_error **err)
{
	if (aks_test_gone_answer() != 42)
		return host->error_set(err, AKS_ERROR, "unreachable");
	return broken_init(host, config, out, err);
}

static const aks_provider_ops ops = {
    .struct_version = AKS_PROVIDER_OPS_VERSION,
    .struct_size = sizeof(aks_provider_ops),
    .capabilities = &broken_capabilities,
    .init = missing_dep_init,
    .fini = broken_fini,
    .create = broken_create,
    .destroy = broken_destroy,
    .sandbox = &broken_sandbox_ops,
};

AKS_PLUGIN_DEFINE(AKS_PLUGIN_PROVIDER, "missing_dep", "1.0", "MIT",
                  "deliberately broken test plugin", NULL, &ops);
