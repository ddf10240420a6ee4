/*
 * plugins/daytona/daytona.c - the daytona provider: sandboxes are containers on Daytona (or
 * a self-hosted Daytona), created from an image or a snapshot over Daytona's control plane
 * and driven through the toolbox inside them, as the official SDK drives them
 * (daytona_internal.h says where each request goes).
 *
 * Isolation container; not stateful (each command and each run of code starts afresh);
 * shell, files and package install; egress deny and IPv4 CIDR allowlists through Daytona's
 * network settings; cpu and memory as Daytona's resources (whole cores, whole GiB). The API
 * key is read from the environment on every request and goes nowhere but its header.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daytona_internal.h"

#ifndef DAYTONA_VERSION
#define DAYTONA_VERSION "0"
#endif

/* Daytona's own control plane, as the SDK defaults to it. */
#define DAYTONA_DEFAULT_API_URL "https://app.daytona.io/api"

static const char *const daytona_languages[] = {"python", NULL};

static const aks_capabilities daytona_caps = {
    AKS_CAPABILITIES_INIT,
    .isolation = AKS_ISOLATION_CONTAINER,
    .languages = daytona_languages,
    .shell = true,
    .files = true,
    .package_install = true,
    .stateful = false,
    .attach = true,
    .provisions = true,
    .attaches_external = false,
    .principal_user = false,
    .policy_network = true,
    .policy_filesystem = false,
    .policy_resources = true,
    .policy_network_allowlist = true,
    .egress_proxy = false,
};

static const aks_config_key daytona_keys[] = {
    AKS_CONFIG_KEY("image", AKS_CONFIG_STRING, false, NULL,
                   "container image of the sandbox (exclusive with snapshot)"),
    AKS_CONFIG_KEY("snapshot", AKS_CONFIG_STRING, false, NULL,
                   "Daytona snapshot of the sandbox (exclusive with image); neither = "
                   "Daytona's default snapshot"),
    AKS_CONFIG_KEY("env_vars", AKS_CONFIG_STRING_MAP, false, "{}",
                   "environment variables set in the sandbox"),
    AKS_CONFIG_KEY("target", AKS_CONFIG_STRING, false, NULL,
                   "Daytona target (region); null = $DAYTONA_TARGET, else the "
                   "organisation's default"),
    AKS_CONFIG_KEY("api_key_env", AKS_CONFIG_STRING, false, "DAYTONA_API_KEY",
                   "environment variable holding the API key (read on every request)"),
    AKS_CONFIG_KEY("api_url", AKS_CONFIG_STRING, false, NULL,
                   "the control plane; null = $DAYTONA_API_URL, else "
                   "https://app.daytona.io/api (set it for a self-hosted Daytona)"),
    AKS_CLOUD_CONFIG_KEYS,
    AKS_CONFIG_END,
};

/* ---- the instance ---- */

static void daytona_fini(aks_provider_impl *prov)
{
	if (!prov)
		return;
	aks_cloud_fini(&prov->cloud);
	free(prov->image);
	free(prov->snapshot);
	free(prov->target);
	free(prov->api_key_env);
	free(prov->api_url);
	json_object_put(prov->env);
	free(prov->description);
	free(prov);
}

/* env_vars as the JSON object the create body carries; NULL in *out when empty. */
static int env_object(const aks_host_api *host, const aks_config *cfg, json_object **out,
                      aks_error **err)
{
	const char *const *kv = NULL;
	*out = NULL;
	host->config_map(cfg, "env_vars", &kv);
	if (!kv || !kv[0])
		return AKS_OK;
	json_object *o = json_object_new_object();
	for (; o && kv[0] && kv[1]; kv += 2) {
		json_object *v = json_object_new_string(kv[1]);
		if (!v || json_object_object_add(o, kv[0], v)) {
			json_object_put(v);
			json_object_put(o);
			o = NULL;
		}
	}
	if (!o)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	*out = o;
	return AKS_OK;
}

static int daytona_init(const aks_host_api *host, const aks_config *cfg, aks_provider_impl **out,
                        aks_error **err)
{
	aks_provider_impl *prov = calloc(1, sizeof(*prov));
	if (!prov)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	prov->host = host;
	int rc = AKS_OK;
	if (!aks_cloud_setting(host, cfg, "image", NULL, NULL, &prov->image) ||
	    !aks_cloud_setting(host, cfg, "snapshot", NULL, NULL, &prov->snapshot) ||
	    !aks_cloud_setting(host, cfg, "target", "DAYTONA_TARGET", NULL, &prov->target) ||
	    !aks_cloud_setting(host, cfg, "api_key_env", NULL, "DAYTONA_API_KEY",
	                       &prov->api_key_env) ||
	    !aks_cloud_setting(host, cfg, "api_url", "DAYTONA_API_URL", DAYTONA_DEFAULT_API_URL,
	                       &prov->api_url)) {
		rc = host->error_set(err, AKS_ENOMEM, "out of memory");
	} else if (prov->image && prov->snapshot) {
		rc = host->error_set(err, AKS_ECONFIG,
		                     "daytona config sets both 'image' and 'snapshot'; they are "
		                     "mutually exclusive \u2014 pick one");
	} else if (!*prov->api_key_env) {
		rc = host->error_set(err, AKS_ECONFIG, "daytona: api_key_env must not be empty");
	} else if ((rc = aks_cloud_check_url(host, DAYTONA_NAME, "api_url", prov->api_url, err)) ==
	               AKS_OK &&
	           (rc = env_object(host, cfg, &prov->env, err)) == AKS_OK) {
		rc = aks_cloud_configure(&prov->cloud, host, cfg, DAYTONA_NAME, err);
	}
	if (rc != AKS_OK) {
		daytona_fini(prov);
		return rc;
	}
	*out = prov;
	return AKS_OK;
}

static const char *daytona_description(const aks_provider_impl *prov)
{
	aks_provider_impl *p = (aks_provider_impl *)prov;
	if (!p->description &&
	    asprintf(&p->description,
	             "Daytona sandboxes from %s%s%s through %s; commands (stdout and stderr apart) "
	             "and files through the sandbox's toolbox, Python through its code-run (one "
	             "merged output); egress allowlists are Daytona's IPv4 CIDR lists",
	             prov->snapshot ? "snapshot '"
	             : prov->image  ? "image '"
	                            : "Daytona's default snapshot",
	             prov->snapshot ? prov->snapshot
	             : prov->image  ? prov->image
	                            : "",
	             prov->snapshot || prov->image ? "'" : "", prov->api_url) < 0)
		p->description = NULL;
	return p->description ? p->description : "";
}

/* ---- lifecycle ---- */

static int daytona_create(aks_provider_impl *prov, const aks_call *call, aks_sandbox_impl **out,
                          aks_error **err)
{
	return dt_sandbox_create(prov, call, out, err);
}

static int daytona_attach(aks_provider_impl *prov, const char *id, const aks_call *call,
                          aks_sandbox_impl **out, aks_error **err)
{
	return dt_sandbox_attach(prov, id, call, out, err);
}

static int daytona_destroy(aks_provider_impl *prov, const char *id, const aks_call *call,
                           aks_error **err)
{
	return dt_sandbox_delete(prov, id, call, err);
}

static int daytona_list(aks_provider_impl *prov, const char *key, const char *value,
                        const aks_call *call, aks_sandbox_list_fn fn, void *ctx, aks_error **err)
{
	return dt_sandbox_list(prov, key, value, call, fn, ctx, err);
}

/* ---- the sandbox handle ---- */

static const char *daytona_id(const aks_sandbox_impl *sb)
{
	return sb->id;
}

static void daytona_close(aks_sandbox_impl *sb)
{
	/* the sandbox lives on (Daytona's auto-stop reclaims it); its session, a shell in it,
	 * does not */
	dt_session_end(sb, NULL);
	dt_sandbox_free(sb);
}

static const aks_sandbox_ops daytona_sandbox_ops = {
    AKS_SANDBOX_OPS_INIT,
    .id = daytona_id,
    .execute_code = dt_execute_code,
    .execute_command = dt_execute_command,
    .upload_file = dt_upload_file,
    .download_file = dt_download_file,
    .install_packages = dt_install_packages,
    .close = daytona_close,
};

static const aks_provider_ops daytona_ops = {
    AKS_PROVIDER_OPS_INIT,
    .capabilities = &daytona_caps,
    .init = daytona_init,
    .fini = daytona_fini,
    .create = daytona_create,
    .attach = daytona_attach,
    .destroy = daytona_destroy,
    .sandbox = &daytona_sandbox_ops,
    .instance_description = daytona_description,
    .list_sandboxes = daytona_list,
};

AKS_PLUGIN_DEFINE(AKS_PLUGIN_PROVIDER, DAYTONA_NAME, DAYTONA_VERSION, "Apache-2.0",
                  "containers on Daytona (or a self-hosted Daytona)", daytona_keys, &daytona_ops);
