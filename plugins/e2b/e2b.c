/*
 * plugins/e2b/e2b.c - the e2b provider: sandboxes are Firecracker micro-VMs on E2B (or a
 * self-hosted service that speaks E2B's API), created from a template over E2B's control
 * plane and driven through the services inside them, as the official SDKs drive them
 * (e2b_internal.h says where each request goes).
 *
 * Isolation micro_vm; stateful (the code interpreter's kernel keeps Python's state); shell,
 * files and package install; egress deny and allowlists through E2B's network rules. cpu and
 * memory are the template's: not enforceable per profile, so not declared. The API key is
 * read from the environment on every request and goes nowhere but its header.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aks_http.h"
#include "e2b_internal.h"

#ifndef E2B_VERSION
#define E2B_VERSION "0"
#endif

/* E2B's own domain, as the SDKs default to it. */
#define E2B_DEFAULT_DOMAIN "e2b.app"

static const char *const e2b_languages[] = {"python", NULL};

static const aks_capabilities e2b_caps = {
    AKS_CAPABILITIES_INIT,
    .isolation = AKS_ISOLATION_MICRO_VM,
    .languages = e2b_languages,
    .shell = true,
    .files = true,
    .package_install = true,
    .stateful = true,
    .attach = true,
    .provisions = true,
    .attaches_external = false,
    .principal_user = false,
    .policy_network = true,
    .policy_filesystem = false,
    .policy_resources = false,
    .policy_network_allowlist = true,
    .egress_proxy = false,
};

static const aks_config_key e2b_keys[] = {
    AKS_CONFIG_KEY("template", AKS_CONFIG_STRING, false, "base", "E2B sandbox template"),
    AKS_CONFIG_KEY("api_key_env", AKS_CONFIG_STRING, false, "E2B_API_KEY",
                   "environment variable holding the API key (read on every request)"),
    AKS_CONFIG_KEY("domain", AKS_CONFIG_STRING, false, NULL,
                   "E2B's domain; null = $E2B_DOMAIN, else e2b.app"),
    AKS_CONFIG_KEY("api_url", AKS_CONFIG_STRING, false, NULL,
                   "the control plane; null = $E2B_API_URL, else https://api.<domain>"),
    AKS_CONFIG_KEY("sandbox_url", AKS_CONFIG_STRING, false, NULL,
                   "every sandbox's services at one URL; null = $E2B_SANDBOX_URL, else "
                   "https://<port>-<sandbox>.<domain>"),
    AKS_CLOUD_CONFIG_KEYS,
    AKS_CONFIG_END,
};

/* ---- the instance ---- */

static void e2b_fini(aks_provider_impl *prov)
{
	if (!prov)
		return;
	aks_cloud_fini(&prov->cloud);
	free(prov->template_id);
	free(prov->api_key_env);
	free(prov->api_url);
	free(prov->domain);
	free(prov->sandbox_url);
	free(prov->description);
	free(prov);
}

static int e2b_init(const aks_host_api *host, const aks_config *cfg, aks_provider_impl **out,
                    aks_error **err)
{
	aks_provider_impl *prov = calloc(1, sizeof(*prov));
	if (!prov)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	prov->host = host;
	int rc = AKS_OK;
	if (!aks_cloud_setting(host, cfg, "template", NULL, "base", &prov->template_id) ||
	    !aks_cloud_setting(host, cfg, "api_key_env", NULL, "E2B_API_KEY", &prov->api_key_env) ||
	    !aks_cloud_setting(host, cfg, "domain", "E2B_DOMAIN", E2B_DEFAULT_DOMAIN,
	                       &prov->domain) ||
	    !aks_cloud_setting(host, cfg, "api_url", "E2B_API_URL", NULL, &prov->api_url) ||
	    !aks_cloud_setting(host, cfg, "sandbox_url", "E2B_SANDBOX_URL", NULL,
	                       &prov->sandbox_url) ||
	    (!prov->api_url && asprintf(&prov->api_url, "https://api.%s", prov->domain) < 0 &&
	     !(prov->api_url = NULL))) {
		rc = host->error_set(err, AKS_ENOMEM, "out of memory");
	} else if (!*prov->template_id) {
		rc = host->error_set(err, AKS_ECONFIG, "e2b: template must not be empty");
	} else if ((rc = aks_cloud_check_url(host, E2B_NAME, "api_url", prov->api_url, err)) ==
	               AKS_OK &&
	           (rc = aks_cloud_check_url(host, E2B_NAME, "sandbox_url", prov->sandbox_url,
	                                     err)) == AKS_OK) {
		rc = aks_cloud_configure(&prov->cloud, host, cfg, E2B_NAME, err);
	}
	if (rc != AKS_OK) {
		e2b_fini(prov);
		return rc;
	}
	*out = prov;
	return AKS_OK;
}

static const char *e2b_description(const aks_provider_impl *prov)
{
	aks_provider_impl *p = (aks_provider_impl *)prov;
	if (!p->description &&
	    asprintf(&p->description,
	             "E2B template '%s' through %s; commands and files through envd, Python "
	             "through the code interpreter, at %s; egress rules are E2B's (domains only "
	             "for HTTP on 80 and TLS on 443, by Host and SNI; UDP by address only; DNS "
	             "stays open)",
	             prov->template_id, prov->api_url,
	             prov->sandbox_url ? prov->sandbox_url : "https://<port>-<sandbox>.<domain>") <
	        0)
		p->description = NULL;
	return p->description ? p->description : "";
}

/* ---- lifecycle ---- */

static int e2b_create(aks_provider_impl *prov, const aks_call *call, aks_sandbox_impl **out,
                      aks_error **err)
{
	return e2b_sandbox_create(prov, call, out, err);
}

static int e2b_attach(aks_provider_impl *prov, const char *id, const aks_call *call,
                      aks_sandbox_impl **out, aks_error **err)
{
	return e2b_sandbox_connect(prov, id, call, out, err);
}

static int e2b_destroy(aks_provider_impl *prov, const char *id, const aks_call *call,
                       aks_error **err)
{
	return e2b_sandbox_kill(prov, id, call, err);
}

static int e2b_list(aks_provider_impl *prov, const char *key, const char *value,
                    const aks_call *call, aks_sandbox_list_fn fn, void *ctx, aks_error **err)
{
	return e2b_sandbox_list(prov, key, value, call, fn, ctx, err);
}

/* ---- the sandbox handle ---- */

static const char *e2b_id(const aks_sandbox_impl *sb)
{
	return sb->id;
}

static void e2b_close(aks_sandbox_impl *sb)
{
	e2b_sandbox_free(sb); /* the sandbox lives on: E2B's timeout reclaims it */
}

static const aks_sandbox_ops e2b_sandbox_ops = {
    AKS_SANDBOX_OPS_INIT,
    .id = e2b_id,
    .execute_code = e2b_execute_code,
    .execute_command = e2b_execute_command,
    .upload_file = e2b_upload_file,
    .download_file = e2b_download_file,
    .install_packages = e2b_install_packages,
    .close = e2b_close,
};

static const aks_provider_ops e2b_ops = {
    AKS_PROVIDER_OPS_INIT,
    .capabilities = &e2b_caps,
    .init = e2b_init,
    .fini = e2b_fini,
    .create = e2b_create,
    .attach = e2b_attach,
    .destroy = e2b_destroy,
    .sandbox = &e2b_sandbox_ops,
    .instance_description = e2b_description,
    .list_sandboxes = e2b_list,
};

AKS_PLUGIN_DEFINE(AKS_PLUGIN_PROVIDER, E2B_NAME, E2B_VERSION, "Apache-2.0",
                  "Firecracker micro-VMs on E2B (or an E2B-compatible service)", e2b_keys,
                  &e2b_ops);
