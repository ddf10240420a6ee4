/*
 * plugins/e2b/e2b_api.c - a sandbox's life on E2B's control plane, as the official SDKs
 * drive it: create (POST /v2/sandboxes), connect by id (POST /v2/sandboxes/{id}/connect),
 * kill (DELETE /sandboxes/{id}), list by metadata (GET /v2/sandboxes), and the timeout kept
 * fresh (POST /sandboxes/{id}/timeout).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aks_json.h"
#include "e2b_internal.h"

/* Every address: what E2B's network rules take to deny all traffic but the allowed. */
#define ALL_TRAFFIC "0.0.0.0/0"
/* E2B's own default timeout (the SDK's 300 s), when the host gives none. */
#define DEFAULT_TIMEOUT_S 300
/* E2B keeps a sandbox at most a day (Pro tier; less on others, which it says in a 400). */
#define MAX_TIMEOUT_S 86400

void e2b_sandbox_free(aks_sandbox_impl *sb)
{
	if (!sb)
		return;
	free(sb->id);
	free(sb->domain);
	free(sb->envd_version);
	if (sb->access_token) {
		memset(sb->access_token, 0, strlen(sb->access_token));
		free(sb->access_token);
	}
	free(sb);
}

/* The profile's idle_timeout the host gave with the call; 0: none. */
static double call_idle(const aks_call *call)
{
#if AKS_TARGET_ABI_MINOR >= 3
	if (call && call->struct_size >= offsetof(aks_call, idle_timeout) + sizeof(double) &&
	    call->idle_timeout > 0)
		return call->idle_timeout;
#endif
	(void)call;
	return 0;
}

/* The timeout to ask for: the profile's idle_timeout, whole seconds, within E2B's bounds. */
static long timeout_of(const aks_call *call)
{
	double idle = call_idle(call);
	if (!(idle > 0))
		return DEFAULT_TIMEOUT_S;
	return idle > MAX_TIMEOUT_S ? MAX_TIMEOUT_S : (long)ceil(idle);
}

/* A sandbox handle from a create or connect answer. */
static int sandbox_from(aks_provider_impl *prov, json_object *answer, const char *want_id,
                        const aks_call *call, const char *what, aks_sandbox_impl **out,
                        aks_error **err)
{
	const aks_host_api *host = prov->host;
	const char *id = aks__jstr(answer, "sandboxID");
	const char *envd = aks__jstr(answer, "envdVersion");
	const char *token = aks__jstr(answer, "envdAccessToken");
	const char *domain = aks__jstr(answer, "domain");
	if (!id || !*id || (want_id && strcmp(id, want_id) != 0))
		return host->error_set(err, AKS_EPROVISION,
		                       "e2b: cannot %s: the answer names no sandbox%s", what,
		                       want_id ? " or another one" : "");
	/* the SDKs refuse envd before 0.1.0 (a template older than the API they speak) */
	if (envd && e2b_version_cmp(envd, "0.1.0") < 0)
		return host->error_set(err, AKS_EPROVISION,
		                       "e2b: sandbox '%s' runs envd %s, older than 0.1.0: rebuild "
		                       "the template with a current E2B",
		                       id, envd);
	aks_sandbox_impl *sb = calloc(1, sizeof(*sb));
	if (!sb)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	sb->prov = prov;
	sb->id = strdup(id);
	sb->envd_version = strdup(envd ? envd : "0.1.0");
	sb->domain = domain && *domain ? strdup(domain) : NULL;
	sb->access_token = token && *token ? strdup(token) : NULL;
	sb->timeout = (double)timeout_of(call);
	sb->refreshed_ms = host->now_ms();
	if (!sb->id || !sb->envd_version || (domain && *domain && !sb->domain) ||
	    (token && *token && !sb->access_token)) {
		e2b_sandbox_free(sb);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	*out = sb;
	return AKS_OK;
}

/* The JSON answer of a successful request, or the error it makes. */
static int answer_json(aks_provider_impl *prov, aks_cloud_req *r, const char *id, json_object **out,
                       aks_error **err)
{
	*out = NULL;
	if (r->status < 200 || r->status >= 300)
		return e2b_answer_error(prov, r, id, AKS_EPROVISION, err);
	*out = r->resp.len ? json_tokener_parse(r->resp.data) : NULL;
	if (!json_object_is_type(*out, json_type_object) &&
	    !json_object_is_type(*out, json_type_array)) {
		json_object_put(*out);
		*out = NULL;
		return prov->host->error_set(err, AKS_EPROVISION,
		                             "e2b: cannot %s: the answer (HTTP %ld) is not JSON",
		                             r->what, r->status);
	}
	return AKS_OK;
}

/* A JSON request to the control plane: the answer's object in *out (NULL for no body). */
static int api_call(aks_provider_impl *prov, aks_cloud_req *r, json_object *body, const char *id,
                    const aks_call *call, json_object **out, aks_error **err)
{
	struct curl_slist *h = NULL;
	int rc = e2b_api_headers(prov, &h, err);
	if (rc != AKS_OK)
		return rc;
	r->headers = h;
	if (body) {
		r->body = json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN);
		r->body_len = strlen(r->body);
	}
	rc = aks_cloud_http(&prov->cloud, r, call, err);
	aks_cloud_headers_free(h);
	r->headers = NULL;
	if (rc == AKS_OK && out)
		rc = answer_json(prov, r, id, out, err);
	return rc;
}

/* ---- create ---- */

static int add_string(json_object *o, const char *key, const char *value)
{
	json_object *v = json_object_new_string(value);
	return v && json_object_object_add(o, key, v) == 0 ? 0 : -1;
}

/* The metadata E2B keeps with the sandbox: the labels the host gives (what list finds it
 * by) and whom it is for, so an operator can tell it apart in E2B's dashboard. */
static json_object *create_metadata(const aks_call *call)
{
	json_object *m = json_object_new_object();
	int bad = !m;
#if AKS_TARGET_ABI_MINOR >= 1
	for (const char *const *kv = call->labels; !bad && kv && kv[0] && kv[1]; kv += 2)
		bad = add_string(m, kv[0], kv[1]);
#endif
#if AKS_TARGET_ABI_MINOR >= 2
	for (const char *const *kv = call->context; !bad && kv && kv[0] && kv[1]; kv += 2) {
		char key[64];
		snprintf(key, sizeof(key), "io.aksandbox.%s", kv[0]);
		bad = add_string(m, key, kv[1]);
	}
#endif
	if (bad) {
		json_object_put(m);
		return NULL;
	}
	return m;
}

/* The network part of the create body, from the egress policy. */
static int add_network(json_object *body, const aks_policy *policy)
{
	if (!policy || policy->network_egress == AKS_EGRESS_ALLOW)
		return 0;
	if (policy->network_egress == AKS_EGRESS_DENY)
		return json_object_object_add(body, "allow_internet_access",
		                              json_object_new_boolean(0));
	/* allowlist: the entries as given (E2B takes names and CIDRs), and everything else
	 * denied; an allowOut alone denies nothing */
	json_object *net = json_object_new_object(), *allow = json_object_new_array(),
	            *deny = json_object_new_array();
	int bad = !net || !allow || !deny;
	for (const char *const *e = policy->network_allow; !bad && e && *e; e++)
		bad = json_object_array_add(allow, json_object_new_string(*e));
	if (!bad)
		bad = json_object_array_add(deny, json_object_new_string(ALL_TRAFFIC));
	if (!bad) {
		json_object_object_add(net, "allowOut", allow);
		json_object_object_add(net, "denyOut", deny);
		return json_object_object_add(body, "network", net);
	}
	json_object_put(net);
	json_object_put(allow);
	json_object_put(deny);
	return -1;
}

int e2b_sandbox_create(aks_provider_impl *prov, const aks_call *call, aks_sandbox_impl **out,
                       aks_error **err)
{
	const aks_host_api *host = prov->host;
	/* cpu and memory: not declared, so the host refused them already under strict */
	const aks_policy *policy = call ? call->policy : NULL;
	json_object *body = json_object_new_object(), *metadata = create_metadata(call);
	if (!body || !metadata || add_string(body, "templateID", prov->template_id) ||
	    json_object_object_add(body, "metadata", metadata) ||
	    json_object_object_add(body, "timeout", json_object_new_int64(timeout_of(call))) ||
	    add_network(body, policy)) {
		if (!body || json_object_object_get(body, "metadata") != metadata)
			json_object_put(metadata);
		json_object_put(body);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	char *url = e2b_api_url(prov, "/v2/sandboxes");
	char what[160];
	snprintf(what, sizeof(what), "create a sandbox from template '%s'", prov->template_id);
	aks_cloud_req r = {
	    .what = what, .method = "POST", .url = url, .retry = AKS_CLOUD_RETRY_UNSENT};
	json_object *answer = NULL;
	int rc = url ? api_call(prov, &r, body, NULL, call, &answer, err)
	             : host->error_set(err, AKS_ENOMEM, "out of memory");
	if (rc == AKS_OK)
		rc = sandbox_from(prov, answer, NULL, call, what, out, err);
	json_object_put(answer);
	json_object_put(body);
	aks_cloud_req_free(&r);
	free(url);
	return rc;
}

/* ---- connect, kill, timeout ---- */

/* A control-plane path with the sandbox id in it: prefix, the id, suffix. */
static char *id_url(aks_provider_impl *prov, const char *prefix, const char *id, const char *suffix)
{
	char *escaped = aks_cloud_escape(id), *path = NULL, *url = NULL;
	if (escaped && asprintf(&path, "%s%s%s", prefix, escaped, suffix) >= 0)
		url = e2b_api_url(prov, path);
	free(escaped);
	free(path);
	return url;
}

int e2b_sandbox_connect(aks_provider_impl *prov, const char *id, const aks_call *call,
                        aks_sandbox_impl **out, aks_error **err)
{
	const aks_host_api *host = prov->host;
	char *url = id_url(prov, "/v2/sandboxes/", id, "/connect");
	json_object *body = json_object_new_object();
	if (!url || !body ||
	    json_object_object_add(body, "timeout", json_object_new_int64(timeout_of(call)))) {
		free(url);
		json_object_put(body);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	char what[160];
	snprintf(what, sizeof(what), "connect to sandbox '%.100s'", id);
	aks_cloud_req r = {
	    .what = what, .method = "POST", .url = url, .retry = AKS_CLOUD_RETRY_SAFE};
	json_object *answer = NULL;
	int rc = api_call(prov, &r, body, id, call, &answer, err);
	if (rc == AKS_OK)
		rc = sandbox_from(prov, answer, id, call, what, out, err);
	json_object_put(answer);
	json_object_put(body);
	aks_cloud_req_free(&r);
	free(url);
	return rc;
}

int e2b_sandbox_kill(aks_provider_impl *prov, const char *id, const aks_call *call, aks_error **err)
{
	const aks_host_api *host = prov->host;
	char *url = id_url(prov, "/sandboxes/", id, "");
	if (!url)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	char what[160];
	snprintf(what, sizeof(what), "kill sandbox '%.100s'", id);
	aks_cloud_req r = {
	    .what = what, .method = "DELETE", .url = url, .retry = AKS_CLOUD_RETRY_SAFE};
	int rc = api_call(prov, &r, NULL, NULL, call, NULL, err);
	if (rc == AKS_OK && r.status != 404 && (r.status < 200 || r.status >= 300))
		rc = e2b_answer_error(prov, &r, NULL, AKS_EPROVISION, err);
	aks_cloud_req_free(&r);
	free(url);
	return rc; /* 404: already gone, which is what was asked */
}

int e2b_sandbox_touch(aks_sandbox_impl *sb, const aks_call *call, aks_error **err)
{
	aks_provider_impl *prov = sb->prov;
	const aks_host_api *host = prov->host;
	/* a call without the profile's idle_timeout (a clean-up's) keeps the one we have */
	double want = call_idle(call) > 0 ? (double)timeout_of(call) : sb->timeout;
	int64_t now = host->now_ms();
	if (want == sb->timeout && (double)(now - sb->refreshed_ms) < want * 100.0)
		return AKS_OK; /* refreshed less than a tenth of the timeout ago */
	char *url = id_url(prov, "/sandboxes/", sb->id, "/timeout");
	json_object *body = json_object_new_object();
	if (!url || !body ||
	    json_object_object_add(body, "timeout", json_object_new_int64((int64_t)want))) {
		free(url);
		json_object_put(body);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	char what[160];
	snprintf(what, sizeof(what), "keep sandbox '%.100s' alive", sb->id);
	aks_cloud_req r = {
	    .what = what, .method = "POST", .url = url, .retry = AKS_CLOUD_RETRY_SAFE};
	int rc = api_call(prov, &r, body, NULL, call, NULL, err);
	if (rc == AKS_OK && (r.status < 200 || r.status >= 300))
		rc = e2b_answer_error(prov, &r, sb->id, AKS_EPROVISION, err);
	if (rc == AKS_OK) {
		sb->timeout = want;
		sb->refreshed_ms = now;
	}
	json_object_put(body);
	aks_cloud_req_free(&r);
	free(url);
	return rc;
}

/* ---- list ---- */

/* Sandboxes per page of a listing; the next page is named by the answer's X-Next-Token. */
#define PAGE_LIMIT 100
/* The most pages read: 100,000 sandboxes of one host's label. */
#define PAGES_MAX 1000

/* Calls fn for each sandbox of one page's answer that carries key=value. */
static int list_page(aks_provider_impl *prov, json_object *answer, const char *key,
                     const char *value, aks_sandbox_list_fn fn, void *ctx, aks_error **err)
{
	if (!json_object_is_type(answer, json_type_array))
		return prov->host->error_set(err, AKS_EPROVISION,
		                             "e2b: cannot list the sandboxes: the answer is not a "
		                             "list");
	int rc = AKS_OK;
	size_t n = json_object_array_length(answer);
	for (size_t i = 0; rc == AKS_OK && i < n; i++) {
		json_object *s = json_object_array_get_idx(answer, i);
		const char *id = aks__jstr(s, "sandboxID");
		const char *have = aks__jstr(aks__jget(s, "metadata"), key);
		/* the service filtered already; checked again, as nothing else may be destroyed */
		if (!id || !have || strcmp(have, value) != 0)
			continue;
		const char *labels[] = {key, value, NULL};
		rc = fn(ctx, id, labels);
	}
	return rc;
}

int e2b_sandbox_list(aks_provider_impl *prov, const char *key, const char *value,
                     const aks_call *call, aks_sandbox_list_fn fn, void *ctx, aks_error **err)
{
	const aks_host_api *host = prov->host;
	/* the SDK's query: metadata=<urlencoded key=value pairs>, itself urlencoded */
	char *k = aks_cloud_escape(key), *v = aks_cloud_escape(value), *pair = NULL, *query = NULL;
	if (k && v && asprintf(&pair, "%s=%s", k, v) >= 0)
		query = aks_cloud_escape(pair);
	free(k);
	free(v);
	free(pair);
	if (!query)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	int rc = AKS_OK;
	char token[sizeof(((aks_cloud_req *)0)->captured)] = "";
	for (int page = 0; rc == AKS_OK && page < PAGES_MAX; page++) {
		char *escaped = aks_cloud_escape(token), *path = NULL, *url = NULL;
		if (escaped && asprintf(&path, "/v2/sandboxes?metadata=%s&limit=%d%s%s", query,
		                        PAGE_LIMIT, *token ? "&nextToken=" : "", escaped) >= 0)
			url = e2b_api_url(prov, path);
		free(escaped);
		free(path);
		if (!url) {
			rc = host->error_set(err, AKS_ENOMEM, "out of memory");
			break;
		}
		aks_cloud_req r = {.what = "list the sandboxes",
		                   .method = "GET",
		                   .url = url,
		                   .retry = AKS_CLOUD_RETRY_SAFE,
		                   .resp_max = 16u << 20,
		                   .capture_header = "X-Next-Token"};
		json_object *answer = NULL;
		rc = api_call(prov, &r, NULL, NULL, call, &answer, err);
		if (rc == AKS_OK)
			rc = list_page(prov, answer, key, value, fn, ctx, err);
		snprintf(token, sizeof(token), "%s", r.captured);
		json_object_put(answer);
		aks_cloud_req_free(&r);
		free(url);
		if (!*token)
			break;
	}
	free(query);
	return rc;
}
