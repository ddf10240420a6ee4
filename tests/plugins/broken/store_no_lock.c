/*
 * store_no_lock.so - trips the loader's mandatory-slot check for stores: every
 * slot of a store is mandatory, and this one has no lock or unlock.
 */
#include <aksandbox/store.h>

#include "broken.h"

static int no_init(const aks_host_api *host, const aks_config *config, aks_store_impl **out,
                   aks_error **err)
{
	(void)host;
	(void)config;
	(void)out;
	(void)err;
	return AKS_ERROR;
}

static int no_update(aks_store_impl *s, const char *ns, const char *key, aks_store_txn_fn fn,
                     void *ctx, aks_error **err)
{
	(void)s, (void)ns, (void)key, (void)fn, (void)ctx, (void)err;
	return AKS_ERROR;
}

static int no_get(aks_store_impl *s, const char *ns, const char *key, aks_store_record_fn fn,
                  void *ctx, aks_error **err)
{
	(void)s, (void)ns, (void)key, (void)fn, (void)ctx, (void)err;
	return AKS_ERROR;
}

static int no_scan(aks_store_impl *s, const char *ns, const char *prefix, aks_store_record_fn fn,
                   void *ctx, aks_error **err)
{
	(void)s, (void)ns, (void)prefix, (void)fn, (void)ctx, (void)err;
	return AKS_ERROR;
}

static int no_namespaces(aks_store_impl *s, aks_store_name_fn fn, void *ctx, aks_error **err)
{
	(void)s, (void)fn, (void)ctx, (void)err;
	return AKS_ERROR;
}

static const aks_store_ops ops = {
    .struct_version = AKS_STORE_OPS_VERSION,
    .struct_size = sizeof(aks_store_ops),
    .init = no_init,
    .update = no_update,
    .get = no_get,
    .scan = no_scan,
    .namespaces = no_namespaces,
};

AKS_PLUGIN_DEFINE(AKS_PLUGIN_STORE, "store_no_lock", "1.0", "MIT",
                  "deliberately broken test plugin", NULL, &ops);
