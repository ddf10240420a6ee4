/*
 * plugins/e2b/e2b_http.c - what E2B's requests need beyond the shared client (aks_cloud.h):
 * their headers (the API key, read from the environment for each request; a sandbox's id,
 * port and access token), their URLs, and the wording of E2B's error answers.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aks_http.h"
#include "e2b_internal.h"

/* ---- headers and URLs ---- */

int e2b_api_headers(aks_provider_impl *prov, struct curl_slist **out, aks_error **err)
{
	const aks_host_api *host = prov->host;
	*out = NULL;
	const char *key = getenv(prov->api_key_env);
	if (!key || !*key)
		return host->error_set(err, AKS_ECONFIG,
		                       "e2b provider requires the %s environment variable",
		                       prov->api_key_env);
	if (!aks_cloud_header_safe(key))
		return host->error_set(err, AKS_ECONFIG,
		                       "the %s environment variable holds control characters: not "
		                       "an E2B API key",
		                       prov->api_key_env);
	struct curl_slist *h = NULL;
	if (!aks_cloud_header_add(&h, "X-API-KEY", key) ||
	    !aks_cloud_header_add(&h, "Accept", "application/json") ||
	    !aks_cloud_header_add(&h, "Content-Type", "application/json") ||
	    !aks_cloud_no_expect(&h))
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	*out = h;
	return AKS_OK;
}

int e2b_sandbox_headers(aks_sandbox_impl *sb, int port, const char *content_type,
                        struct curl_slist **out, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	char port_text[16];
	snprintf(port_text, sizeof(port_text), "%d", port);
	struct curl_slist *h = NULL;
	bool ok =
	    aks_cloud_header_add(&h, "E2b-Sandbox-Id", sb->id) &&
	    aks_cloud_header_add(&h, "E2b-Sandbox-Port", port_text) &&
	    (!sb->access_token || aks_cloud_header_add(&h, "X-Access-Token", sb->access_token)) &&
	    (!content_type || aks_cloud_header_add(&h, "Content-Type", content_type)) &&
	    aks_cloud_no_expect(&h) &&
	    /* envd before 0.4.0 needs the user named; later ones take their default */
	    (port != E2B_ENVD_PORT || e2b_version_cmp(sb->envd_version, "0.4.0") >= 0 ||
	     aks_cloud_header_add(&h, "Authorization", "Basic dXNlcjo=")); /* "user:" */
	if (!ok)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	*out = h;
	return AKS_OK;
}

char *e2b_api_url(aks_provider_impl *prov, const char *path)
{
	char *url = NULL;
	return asprintf(&url, "%s%s", prov->api_url, path) < 0 ? NULL : url;
}

char *e2b_sandbox_url(aks_sandbox_impl *sb, int port, const char *path)
{
	const aks_provider_impl *prov = sb->prov;
	char *url = NULL;
	int n = prov->sandbox_url ? asprintf(&url, "%s%s", prov->sandbox_url, path)
	                          : asprintf(&url, "https://%d-%s.%s%s", port, sb->id,
	                                     sb->domain ? sb->domain : prov->domain, path);
	return n < 0 ? NULL : url;
}

int e2b_version_cmp(const char *a, const char *b)
{
	while (*a || *b) {
		char *ea, *eb;
		unsigned long x = strtoul(a, &ea, 10), y = strtoul(b, &eb, 10);
		if (x != y)
			return x < y ? -1 : 1;
		a = *ea == '.' ? ea + 1 : ea + strlen(ea);
		b = *eb == '.' ? eb + 1 : eb + strlen(eb);
	}
	return 0;
}

/* ---- answers ---- */

int e2b_gone(aks_provider_impl *prov, const char *id, aks_error **err)
{
	return prov->host->error_set(err, AKS_EGONE, "e2b sandbox '%s' no longer exists", id);
}

int e2b_answer_error(aks_provider_impl *prov, const aks_cloud_req *r, const char *id, int code,
                     aks_error **err)
{
	const aks_host_api *host = prov->host;
	if (id && (r->status == 404 || (r->service && r->status == 502)))
		return e2b_gone(prov, id, err);
	char *msg = aks_ctr_http_message(r->resp.data, r->resp.len, r->status);
	int rc;
	if ((r->status == 401 || r->status == 403) && r->service)
		rc = host->error_set(err, AKS_EPROVISION,
		                     "e2b: cannot %s: the sandbox refused its access token (HTTP "
		                     "%ld: %s)",
		                     r->what, r->status, msg ? msg : "?");
	else if (r->status == 401 || r->status == 403)
		rc =
		    host->error_set(err, AKS_EPROVISION,
		                    "e2b: cannot %s: E2B refused the API key in %s (HTTP %ld: %s); "
		                    "check the key",
		                    r->what, prov->api_key_env, r->status, msg ? msg : "?");
	else if (r->status == 429)
		rc =
		    host->error_set(err, AKS_EPROVISION,
		                    "e2b: cannot %s: E2B's rate limit or sandbox quota was reached "
		                    "(HTTP 429: %s), and still was after waiting and trying again",
		                    r->what, msg ? msg : "?");
	else
		rc = host->error_set(err, code, "e2b: cannot %s: %s (HTTP %ld)", r->what,
		                     msg ? msg : "?", r->status);
	free(msg);
	return rc;
}
