/*
 * plugins/daytona/daytona_api.c - a sandbox's life on Daytona's control plane, as the
 * official SDK drives it: create (POST /sandbox), then wait for it to be started (GET
 * /sandbox/{id}); attach (GET, and POST /sandbox/{id}/start when Daytona stopped it for
 * idleness); delete (DELETE /sandbox/{id}); list by label (GET /sandbox?labels=). Also the
 * headers of every request and the wording of Daytona's error answers.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <arpa/inet.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aks_http.h"
#include "aks_json.h"
#include "daytona_internal.h"

/* The image when resources force the image path and none is configured (the reference's). */
#define DEFAULT_IMAGE "python:3.12-slim"
/* The language label the SDK sets, which the toolbox's code-run reads. */
#define LANGUAGE_LABEL "code-toolbox-language"
/* Polling a starting sandbox: the first pause, doubling up to the last. */
#define POLL_FIRST_MS 100
#define POLL_MAX_MS   1000
/* How long a clean-up after a failed create may take. */
#define CLEANUP_MS 10000

/* ---- requests and answers ---- */

int dt_headers(aks_provider_impl *prov, bool toolbox, const char *content_type,
               struct curl_slist **out, aks_error **err)
{
	const aks_host_api *host = prov->host;
	*out = NULL;
	const char *key = getenv(prov->api_key_env);
	if (!key || !*key)
		return host->error_set(err, AKS_ECONFIG,
		                       "daytona provider requires the %s environment variable",
		                       prov->api_key_env);
	if (!aks_cloud_header_safe(key))
		return host->error_set(err, AKS_ECONFIG,
		                       "the %s environment variable holds control characters: not "
		                       "a Daytona API key",
		                       prov->api_key_env);
	char *bearer = NULL;
	if (asprintf(&bearer, "Bearer %s", key) < 0)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	struct curl_slist *h = NULL;
	bool ok = aks_cloud_header_add(&h, "Authorization", bearer) &&
	          aks_cloud_header_add(&h, "Accept", "application/json") &&
	          (!content_type || aks_cloud_header_add(&h, "Content-Type", content_type)) &&
	          /* a session command's raw log with its streams' markers, which the plugin
	           * splits (daytona_wire.h), whatever the toolbox's version */
	          (!toolbox || aks_cloud_header_add(&h, "X-Daytona-Split-Output", "true")) &&
	          aks_cloud_no_expect(&h);
	memset(bearer, 0, strlen(bearer));
	free(bearer);
	if (!ok)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	*out = h;
	return AKS_OK;
}

char *dt_api_url(aks_provider_impl *prov, const char *path)
{
	char *url = NULL;
	return asprintf(&url, "%s%s", prov->api_url, path) < 0 ? NULL : url;
}

char *dt_toolbox_url(aks_sandbox_impl *sb, const char *path)
{
	char *url = NULL;
	return asprintf(&url, "%s%s", sb->toolbox_url, path) < 0 ? NULL : url;
}

int dt_gone(aks_provider_impl *prov, const char *id, aks_error **err)
{
	return prov->host->error_set(err, AKS_EGONE, "daytona sandbox '%s' no longer exists", id);
}

int dt_answer_error(aks_provider_impl *prov, const aks_cloud_req *r, const char *id, int code,
                    aks_error **err)
{
	const aks_host_api *host = prov->host;
	if (id && r->status == 404)
		return dt_gone(prov, id, err);
	char *msg = aks_ctr_http_message(r->resp.data, r->resp.len, r->status);
	int rc;
	if (r->status == 401 || r->status == 403)
		rc = host->error_set(err, AKS_EPROVISION,
		                     "daytona: cannot %s: Daytona refused the API key in %s (HTTP "
		                     "%ld: %s); check the key and its permissions",
		                     r->what, prov->api_key_env, r->status, msg ? msg : "?");
	else if (r->status == 429)
		rc =
		    host->error_set(err, AKS_EPROVISION,
		                    "daytona: cannot %s: Daytona's rate limit or quota was reached "
		                    "(HTTP 429: %s), and still was after waiting and trying again",
		                    r->what, msg ? msg : "?");
	else
		rc = host->error_set(err, code, "daytona: cannot %s: %s (HTTP %ld)", r->what,
		                     msg ? msg : "?", r->status);
	free(msg);
	return rc;
}

json_object *dt_answer_object(aks_provider_impl *prov, const aks_cloud_req *r, aks_error **err)
{
	json_object *o = r->resp.len ? json_tokener_parse(r->resp.data) : NULL;
	if (json_object_is_type(o, json_type_object))
		return o;
	json_object_put(o);
	prov->host->error_set(err, AKS_EPROVISION,
	                      "daytona: cannot %s: the answer (HTTP %ld) is not a JSON object",
	                      r->what, r->status);
	return NULL;
}

int dt_request(aks_provider_impl *prov, aks_cloud_req *r, json_object *body, const char *id,
               const aks_call *call, json_object **out, aks_error **err)
{
	struct curl_slist *h = NULL;
	int rc = dt_headers(prov, r->service, body ? "application/json" : NULL, &h, err);
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
	if (rc == AKS_OK && out) {
		*out = NULL;
		if (r->status < 200 || r->status >= 300)
			rc = dt_answer_error(prov, r, id, AKS_EPROVISION, err);
		else if (!(*out = dt_answer_object(prov, r, err)))
			rc = AKS_EPROVISION;
	}
	return rc;
}

/* A control-plane URL with the sandbox id in it: /sandbox/<id><suffix>. */
static char *sandbox_url(aks_provider_impl *prov, const char *id, const char *suffix)
{
	char *escaped = aks_cloud_escape(id), *path = NULL, *url = NULL;
	if (escaped && asprintf(&path, "/sandbox/%s%s", escaped, suffix) >= 0)
		url = dt_api_url(prov, path);
	free(escaped);
	free(path);
	return url;
}

/* ---- the handle ---- */

void dt_sandbox_free(aks_sandbox_impl *sb)
{
	if (!sb)
		return;
	pthread_mutex_destroy(&sb->session_lock);
	free(sb->id);
	free(sb->toolbox_url);
	free(sb->session);
	free(sb);
}

/* The toolbox proxy URL of a sandbox: the answer's toolboxProxyUrl, else asked for (GET
 * /sandbox/{id}/toolbox-proxy-url), as the SDK does. malloc'd in *out. */
static int toolbox_proxy(aks_provider_impl *prov, json_object *dto, const char *id,
                         const aks_call *call, char **out, aks_error **err)
{
	const aks_host_api *host = prov->host;
	const char *url = aks__jstr(dto, "toolboxProxyUrl");
	json_object *answer = NULL;
	int rc = AKS_OK;
	if (!url || !*url) {
		char *req_url = sandbox_url(prov, id, "/toolbox-proxy-url");
		char what[160];
		snprintf(what, sizeof(what), "find the toolbox of sandbox '%.100s'", id);
		aks_cloud_req r = {
		    .what = what, .method = "GET", .url = req_url, .retry = AKS_CLOUD_RETRY_SAFE};
		rc = req_url ? dt_request(prov, &r, NULL, id, call, &answer, err)
		             : host->error_set(err, AKS_ENOMEM, "out of memory");
		url = aks__jstr(answer, "url");
		if (rc == AKS_OK && (!url || !*url))
			rc = host->error_set(err, AKS_EPROVISION,
			                     "daytona: cannot %s: the answer names no URL", what);
		aks_cloud_req_free(&r);
		free(req_url);
	}
	if (rc == AKS_OK && strncmp(url, "https://", 8) != 0 && strncmp(url, "http://", 7) != 0)
		rc = host->error_set(err, AKS_EPROVISION,
		                     "daytona: sandbox '%s' has a toolbox URL that is not http(s)",
		                     id);
	if (rc == AKS_OK) {
		size_t n = strlen(url);
		while (n && url[n - 1] == '/')
			n--;
		char *escaped = aks_cloud_escape(id);
		if (!escaped || asprintf(out, "%.*s/%s", (int)n, url, escaped) < 0) {
			*out = NULL;
			rc = host->error_set(err, AKS_ENOMEM, "out of memory");
		}
		free(escaped);
	}
	json_object_put(answer);
	return rc;
}

static int handle_from(aks_provider_impl *prov, json_object *dto, const char *id,
                       const aks_call *call, aks_sandbox_impl **out, aks_error **err)
{
	aks_sandbox_impl *sb = calloc(1, sizeof(*sb));
	if (!sb)
		return prov->host->error_set(err, AKS_ENOMEM, "out of memory");
	pthread_mutex_init(&sb->session_lock, NULL);
	sb->prov = prov;
	int rc = (sb->id = strdup(id)) ? toolbox_proxy(prov, dto, id, call, &sb->toolbox_url, err)
	                               : prov->host->error_set(err, AKS_ENOMEM, "out of memory");
	if (rc != AKS_OK) {
		dt_sandbox_free(sb);
		return rc;
	}
	*out = sb;
	return AKS_OK;
}

/* ---- states ---- */

typedef enum dt_state {
	DT_STARTED,
	DT_WAIT,  /* on its way to started (creating, starting, pulling, building...) */
	DT_START, /* at rest (stopped, archived, paused): start it */
	DT_DEAD   /* destroyed, being destroyed, or failed */
} dt_state;

static dt_state state_of(const char *s)
{
	if (!s)
		return DT_WAIT;
	if (strcmp(s, "started") == 0)
		return DT_STARTED;
	if (strcmp(s, "stopped") == 0 || strcmp(s, "archived") == 0 || strcmp(s, "paused") == 0)
		return DT_START;
	if (strcmp(s, "destroyed") == 0 || strcmp(s, "destroying") == 0 ||
	    strcmp(s, "error") == 0 || strcmp(s, "build_failed") == 0)
		return DT_DEAD;
	return DT_WAIT; /* creating, starting, restoring, stopping, archiving, resuming... */
}

/* GET /sandbox/{id}: the DTO in *out. 404 is AKS_EGONE. */
static int get_sandbox(aks_provider_impl *prov, const char *id, const aks_call *call,
                       json_object **out, aks_error **err)
{
	char *url = sandbox_url(prov, id, "");
	if (!url)
		return prov->host->error_set(err, AKS_ENOMEM, "out of memory");
	char what[160];
	snprintf(what, sizeof(what), "look up sandbox '%.100s'", id);
	aks_cloud_req r = {
	    .what = what, .method = "GET", .url = url, .retry = AKS_CLOUD_RETRY_SAFE};
	int rc = dt_request(prov, &r, NULL, id, call, out, err);
	aks_cloud_req_free(&r);
	free(url);
	return rc;
}

/* The failure of a sandbox in state `state`, with Daytona's reason. */
static int dead_error(aks_provider_impl *prov, json_object *dto, const char *id, const char *doing,
                      aks_error **err)
{
	const char *state = aks__jstr(dto, "state");
	const char *reason = aks__jstr(dto, "errorReason");
	if (state && (strcmp(state, "destroyed") == 0 || strcmp(state, "destroying") == 0))
		return dt_gone(prov, id, err);
	return prov->host->error_set(
	    err, AKS_EPROVISION, "daytona: sandbox '%s' failed %s: state %s%s%s", id, doing,
	    state ? state : "?", reason && *reason ? ": " : "", reason && *reason ? reason : "");
}

/* POST /sandbox/{id}/start: Daytona starts a stopped (or archived, or paused) sandbox again,
 * its files as they were. */
static int post_start(aks_provider_impl *prov, const char *id, const char *was,
                      const aks_call *call, aks_error **err)
{
	const aks_host_api *host = prov->host;
	char *url = sandbox_url(prov, id, "/start");
	char what[160];
	snprintf(what, sizeof(what), "start sandbox '%.100s' again", id);
	aks_cloud_req r = {
	    .what = what, .method = "POST", .url = url, .retry = AKS_CLOUD_RETRY_SAFE};
	int rc = url ? dt_request(prov, &r, NULL, id, call, NULL, err)
	             : host->error_set(err, AKS_ENOMEM, "out of memory");
	if (rc == AKS_OK && (r.status < 200 || r.status >= 300))
		rc = dt_answer_error(prov, &r, id, AKS_EPROVISION, err);
	if (rc == AKS_OK)
		host->log(AKS_LOG_INFO, DAYTONA_NAME, "sandbox '%s' was %s: started again", id,
		          was ? was : "stopped");
	aks_cloud_req_free(&r);
	free(url);
	return rc;
}

/*
 * Waits for the sandbox to be started, polling its state within the call's deadline; dto is
 * the answer in hand (consumed; the last one read comes back in *last). With may_start, a
 * sandbox at rest (stopped for idleness, archived, paused) is started again, once.
 */
static int wait_started(aks_provider_impl *prov, const char *id, json_object *dto,
                        const aks_call *call, const char *doing, bool may_start, json_object **last,
                        aks_error **err)
{
	long pause = POLL_FIRST_MS;
	int rc = AKS_OK;
	for (;;) {
		dt_state s = state_of(aks__jstr(dto, "state"));
		if (s == DT_STARTED)
			break;
		if (s == DT_DEAD) {
			rc = dead_error(prov, dto, id, doing, err);
			break;
		}
		if (s == DT_START && may_start) {
			may_start = false;
			if ((rc = post_start(prov, id, aks__jstr(dto, "state"), call, err)) !=
			    AKS_OK)
				break;
		} else if ((rc = aks_cloud_pause(&prov->cloud, call, pause, err)) != AKS_OK) {
			break;
		} else {
			pause = pause * 2 > POLL_MAX_MS ? POLL_MAX_MS : pause * 2;
		}
		json_object_put(dto);
		dto = NULL;
		if ((rc = get_sandbox(prov, id, call, &dto, err)) != AKS_OK)
			break;
	}
	if (rc == AKS_ETIMEOUT)
		prov->host->log(AKS_LOG_WARNING, DAYTONA_NAME,
		                "sandbox '%s' was not started within the call's deadline", id);
	*last = dto;
	return rc;
}

/* ---- create ---- */

static int add_string(json_object *o, const char *key, const char *value)
{
	json_object *v = json_object_new_string(value);
	if (v && json_object_object_add(o, key, v) == 0)
		return 0;
	json_object_put(v);
	return -1;
}

static int add_int(json_object *o, const char *key, int64_t value)
{
	json_object *v = json_object_new_int64(value);
	if (v && json_object_object_add(o, key, v) == 0)
		return 0;
	json_object_put(v);
	return -1;
}

/* The labels Daytona keeps with the sandbox: the language (which the toolbox's code-run
 * reads), the labels the host gives (what list finds it by) and whom it is for. */
static json_object *create_labels(const aks_call *call)
{
	json_object *m = json_object_new_object();
	int bad = !m || add_string(m, LANGUAGE_LABEL, "python");
#if AKS_TARGET_ABI_MINOR >= 1
	for (const char *const *kv = call ? call->labels : NULL; !bad && kv && kv[0] && kv[1];
	     kv += 2)
		bad = add_string(m, kv[0], kv[1]);
#endif
#if AKS_TARGET_ABI_MINOR >= 2
	for (const char *const *kv = call ? call->context : NULL; !bad && kv && kv[0] && kv[1];
	     kv += 2) {
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

/* An allow-list entry as Daytona takes it: an IPv4 CIDR (a bare address is its /32), in
 * buf; false when it is something else (a name, IPv6, a port). */
static bool cidr_of(const char *entry, char *buf, size_t len)
{
	char addr[INET_ADDRSTRLEN + 4];
	const char *slash = strchr(entry, '/');
	size_t an = slash ? (size_t)(slash - entry) : strlen(entry);
	if (an == 0 || an >= INET_ADDRSTRLEN)
		return false;
	memcpy(addr, entry, an);
	addr[an] = '\0';
	struct in_addr in;
	if (inet_pton(AF_INET, addr, &in) != 1)
		return false;
	long bits = 32;
	if (slash) {
		char *end;
		if (!slash[1] || slash[1] == '+' || slash[1] == '-')
			return false;
		bits = strtol(slash + 1, &end, 10);
		if (*end || bits < 0 || bits > 32)
			return false;
	}
	return snprintf(buf, len, "%s/%ld", addr, bits) < (int)len;
}

/* The network part of the create body: deny blocks all; an allowlist becomes Daytona's CIDR
 * allow list. An entry Daytona cannot take (a domain) is refused under strict; otherwise it
 * is left out (what it allowed stays blocked) with a warning. */
static int add_network(aks_provider_impl *prov, json_object *body, const aks_policy *policy,
                       aks_error **err)
{
	const aks_host_api *host = prov->host;
	if (!policy || policy->network_egress == AKS_EGRESS_ALLOW)
		return AKS_OK;
	if (policy->network_egress == AKS_EGRESS_DENY)
		return json_object_object_add(body, "networkBlockAll", json_object_new_boolean(1))
		           ? host->error_set(err, AKS_ENOMEM, "out of memory")
		           : AKS_OK;
	aks_buf list = AKS_BUF_INIT;
	for (const char *const *e = policy->network_allow; e && *e; e++) {
		char cidr[INET_ADDRSTRLEN + 8];
		if (!cidr_of(*e, cidr, sizeof(cidr))) {
			if (policy->strict) {
				aks__buf_free(&list);
				return host->error_set(
				    err, AKS_EPOLICY,
				    "daytona: network_allow entry '%.200s' is not an "
				    "IPv4 CIDR: Daytona's allow list takes CIDRs only "
				    "(such as 203.0.113.0/24), so it cannot be enforced",
				    *e);
			}
			host->log(
			    AKS_LOG_WARNING, DAYTONA_NAME,
			    "network_allow entry '%.200s' is not an IPv4 CIDR, which Daytona's "
			    "allow list takes: left out (what it names stays blocked)",
			    *e);
			continue;
		}
		if ((list.len && aks__buf_append(&list, ",", 1) != AKS_OK) ||
		    aks__buf_append(&list, cidr, strlen(cidr)) != AKS_OK) {
			aks__buf_free(&list);
			return host->error_set(err, AKS_ENOMEM, "out of memory");
		}
	}
	int bad;
	if (list.len)
		bad = add_string(body, "networkAllowList", list.data);
	else /* nothing Daytona can take is allowed: nothing is */
		bad = json_object_object_add(body, "networkBlockAll", json_object_new_boolean(1));
	aks__buf_free(&list);
	return bad ? host->error_set(err, AKS_ENOMEM, "out of memory") : AKS_OK;
}

/*
 * Daytona sizes a sandbox in whole cores and whole GiB: a limit between them is rounded up,
 * as the reference rounds it (cpu 1.5 asks for 2 cores, 512 MB for 1 GiB), which is a
 * looser limit than the profile's. Under strict that is a limit not enforced, so it is
 * refused, saying what Daytona would give; otherwise it is rounded, with a warning.
 */
static int check_granularity(aks_provider_impl *prov, const aks_policy *policy, aks_error **err)
{
	const aks_host_api *host = prov->host;
	double cores = policy->cpu > 0 ? fmax(1, ceil(policy->cpu)) : 0;
	double gib = policy->memory_mb > 0 ? fmax(1, ceil((double)policy->memory_mb / 1024.0)) : 0;
	bool cpu_loose = policy->cpu > 0 && cores != policy->cpu;
	bool mem_loose = policy->memory_mb > 0 && gib * 1024 != (double)policy->memory_mb;
	if (!cpu_loose && !mem_loose)
		return AKS_OK;
	char would[200], cpu_part[80] = "", mem_part[80] = "";
	if (cpu_loose)
		snprintf(cpu_part, sizeof(cpu_part), "cpu %g would be %g core%s", policy->cpu,
		         cores, cores == 1 ? "" : "s");
	if (mem_loose)
		snprintf(mem_part, sizeof(mem_part), "memory_mb %lld would be %g GiB",
		         (long long)policy->memory_mb, gib);
	snprintf(would, sizeof(would), "%s%s%s", cpu_part, cpu_loose && mem_loose ? ", " : "",
	         mem_part);
	if (policy->strict)
		return host->error_set(err, AKS_EPOLICY,
		                       "daytona sizes sandboxes in whole cores and whole GiB, so "
		                       "this limit cannot be enforced as set (%s): set cpu to a "
		                       "whole number and memory_mb to a multiple of 1024, or "
		                       "strict: false to round up",
		                       would);
	host->log(AKS_LOG_WARNING, DAYTONA_NAME, "rounded up to Daytona's whole cores and GiB: %s",
	          would);
	return AKS_OK;
}

/* The image or snapshot, and the resources, as the reference maps them. */
static int add_source(aks_provider_impl *prov, json_object *body, const aks_policy *policy,
                      aks_error **err)
{
	const aks_host_api *host = prov->host;
	bool resources = policy && (policy->cpu > 0 || policy->memory_mb > 0);
	if (resources && prov->snapshot)
		return host->error_set(err, AKS_ECONFIG,
		                       "daytona: cpu/memory limits require an image-based sandbox, "
		                       "but this profile pins a 'snapshot'; use 'image' instead of "
		                       "'snapshot', or drop the cpu/memory policy");
	int rc = resources ? check_granularity(prov, policy, err) : AKS_OK;
	if (rc != AKS_OK)
		return rc;
	int bad = 0;
	if (prov->image || resources) {
		/* the SDK's Image.base(image): a Dockerfile of one FROM line */
		char *dockerfile = NULL;
		if (asprintf(&dockerfile, "FROM %s\n", prov->image ? prov->image : DEFAULT_IMAGE) <
		    0)
			dockerfile = NULL;
		json_object *build = json_object_new_object();
		bad = !dockerfile || !build || add_string(build, "dockerfileContent", dockerfile) ||
		      json_object_object_add(body, "buildInfo", build);
		if (bad && json_object_object_get(body, "buildInfo") != build)
			json_object_put(build);
		free(dockerfile);
		if (!bad && policy->cpu > 0)
			bad = add_int(body, "cpu", (int64_t)fmax(1, ceil(policy->cpu)));
		if (!bad && policy->memory_mb > 0)
			bad = add_int(body, "memory",
			              (int64_t)fmax(1, ceil((double)policy->memory_mb / 1024.0)));
	} else if (prov->snapshot) {
		bad = add_string(body, "snapshot", prov->snapshot);
	}
	return bad ? host->error_set(err, AKS_ENOMEM, "out of memory") : AKS_OK;
}

/* Deletes a sandbox create made but could not hand over, within a short deadline of its
 * own (the call's may be over): nothing is left behind on Daytona. */
static void delete_quietly(aks_provider_impl *prov, const char *id)
{
	const aks_host_api *host = prov->host;
	aks_call cleanup = {.struct_version = AKS_CALL_VERSION,
	                    .struct_size = sizeof(aks_call),
	                    .deadline_ms = host->now_ms() + CLEANUP_MS};
	aks_error *e = NULL;
	if (dt_sandbox_delete(prov, id, &cleanup, &e) != AKS_OK)
		host->log(AKS_LOG_WARNING, DAYTONA_NAME,
		          "sandbox '%s' could not be deleted after a failed create: %s", id,
		          e ? host->error_message(e) : "?");
	if (e)
		host->error_free(e);
}

int dt_sandbox_create(aks_provider_impl *prov, const aks_call *call, aks_sandbox_impl **out,
                      aks_error **err)
{
	const aks_host_api *host = prov->host;
	const aks_policy *policy = call ? call->policy : NULL;
	double idle = call_idle(call);
	/* Daytona stops an idle sandbox after whole minutes: the profile's idle_timeout, at
	 * least one (the reference's max(1, ceil(idle_timeout / 60))) */
	int64_t minutes = idle > 0 ? (int64_t)fmax(1, ceil(idle / 60.0)) : 0;
	json_object *body = json_object_new_object(), *labels = create_labels(call);
	json_object *env = prov->env ? json_object_get(prov->env) : json_object_new_object();
	int rc = AKS_OK;
	/* each add takes its value; a value not added is put here */
	bool labels_in = body && labels && json_object_object_add(body, "labels", labels) == 0;
	bool env_in = labels_in && env && json_object_object_add(body, "env", env) == 0;
	if (!labels_in)
		json_object_put(labels);
	if (!env_in)
		json_object_put(env);
	if (!env_in || (prov->target && add_string(body, "target", prov->target)) ||
	    (minutes > 0 && add_int(body, "autoStopInterval", minutes)))
		rc = host->error_set(err, AKS_ENOMEM, "out of memory");
	if (rc == AKS_OK)
		rc = add_source(prov, body, policy, err);
	if (rc == AKS_OK)
		rc = add_network(prov, body, policy, err);
	char *url = rc == AKS_OK ? dt_api_url(prov, "/sandbox") : NULL;
	if (rc == AKS_OK && !url)
		rc = host->error_set(err, AKS_ENOMEM, "out of memory");
	char what[200];
	snprintf(what, sizeof(what), "create a sandbox from %s '%.100s'",
	         prov->snapshot ? "snapshot"
	         : prov->image  ? "image"
	                        : "the default snapshot",
	         prov->snapshot ? prov->snapshot
	         : prov->image  ? prov->image
	                        : "");
	if (!prov->snapshot && !prov->image)
		snprintf(what, sizeof(what), "create a sandbox from Daytona's default snapshot");
	/* never sent twice: a create that reached Daytona made a sandbox */
	aks_cloud_req r = {
	    .what = what, .method = "POST", .url = url, .retry = AKS_CLOUD_RETRY_UNSENT};
	json_object *dto = NULL, *last = NULL;
	if (rc == AKS_OK)
		rc = dt_request(prov, &r, body, NULL, call, &dto, err);
	const char *id = rc == AKS_OK ? aks__jstr(dto, "id") : NULL;
	char *kept_id = id && *id ? strdup(id) : NULL;
	if (rc == AKS_OK && !kept_id)
		rc = id && *id
		         ? host->error_set(err, AKS_ENOMEM, "out of memory")
		         : host->error_set(err, AKS_EPROVISION,
		                           "daytona: cannot %s: the answer names no sandbox", what);
	if (rc == AKS_OK) {
		rc = wait_started(prov, kept_id, dto, call, "to start", false, &last, err);
		dto = NULL;
	}
	if (rc == AKS_OK)
		rc = handle_from(prov, last, kept_id, call, out, err);
	if (rc != AKS_OK && kept_id)
		delete_quietly(prov, kept_id);
	free(kept_id);
	json_object_put(dto);
	json_object_put(last);
	json_object_put(body);
	aks_cloud_req_free(&r);
	free(url);
	return rc;
}

/* ---- a toolbox that does not answer for its sandbox ---- */

bool dt_from_daemon(const aks_cloud_req *r)
{
	json_object *o = r->resp.len ? json_tokener_parse(r->resp.data) : NULL;
	const char *source = aks__jstr(o, "source");
	bool daemon = source && strcmp(source, "DAYTONA_DAEMON") == 0;
	json_object_put(o);
	return daemon;
}

int dt_toolbox_failed(aks_sandbox_impl *sb, const aks_cloud_req *r, const aks_call *call, int code,
                      bool *again, aks_error **err)
{
	aks_provider_impl *prov = sb->prov;
	*again = false;
	/* the daemon itself answered (a missing file, a bad request): its answer stands */
	bool about_sandbox = r->status == 400 || r->status == 401 || r->status == 403 ||
	                     r->status == 404 || r->status == 409 || r->status == 502 ||
	                     r->status == 503;
	if (!about_sandbox || dt_from_daemon(r))
		return dt_answer_error(prov, r, NULL, code, err);
	json_object *dto = NULL;
	int rc = get_sandbox(prov, sb->id, call, &dto, err);
	if (rc != AKS_OK) {
		json_object_put(dto);
		return rc; /* AKS_EGONE when Daytona no longer has it */
	}
	switch (state_of(aks__jstr(dto, "state"))) {
	case DT_DEAD:
		rc = dt_gone(prov, sb->id, err);
		break;
	case DT_START: /* stopped for idleness while the handle was open: started again */
	case DT_WAIT: {
		json_object *last = NULL;
		rc = wait_started(prov, sb->id, dto, call, "to start again", true, &last, err);
		dto = last;
		*again = rc == AKS_OK;
		break;
	}
	case DT_STARTED: /* the sandbox runs: the answer was about the request */
		rc = dt_answer_error(prov, r, NULL, code, err);
		break;
	}
	json_object_put(dto);
	return rc;
}

/* ---- attach, delete ---- */

int dt_sandbox_attach(aks_provider_impl *prov, const char *id, const aks_call *call,
                      aks_sandbox_impl **out, aks_error **err)
{
	json_object *dto = NULL, *last = NULL;
	int rc = get_sandbox(prov, id, call, &dto, err);
	/* failed or being destroyed: as good as gone (the host makes a new one) */
	if (rc == AKS_OK && state_of(aks__jstr(dto, "state")) == DT_DEAD)
		rc = dt_gone(prov, id, err);
	/* stopped for idleness (auto-stop): started again, its files as they were */
	if (rc == AKS_OK) {
		rc = wait_started(prov, id, dto, call, "to start again", true, &last, err);
		dto = NULL;
	}
	if (rc == AKS_OK)
		rc = handle_from(prov, last, id, call, out, err);
	json_object_put(dto);
	json_object_put(last);
	return rc;
}

int dt_sandbox_delete(aks_provider_impl *prov, const char *id, const aks_call *call,
                      aks_error **err)
{
	char *url = sandbox_url(prov, id, "");
	if (!url)
		return prov->host->error_set(err, AKS_ENOMEM, "out of memory");
	char what[160];
	snprintf(what, sizeof(what), "delete sandbox '%.100s'", id);
	aks_cloud_req r = {
	    .what = what, .method = "DELETE", .url = url, .retry = AKS_CLOUD_RETRY_SAFE};
	int rc = dt_request(prov, &r, NULL, NULL, call, NULL, err);
	if (rc == AKS_OK && r.status != 404 && (r.status < 200 || r.status >= 300))
		rc = dt_answer_error(prov, &r, NULL, AKS_EPROVISION, err);
	aks_cloud_req_free(&r);
	free(url);
	return rc; /* 404: already gone, which is what was asked */
}

/* ---- list ---- */

/* Sandboxes per page of a listing; the next page is named by the answer's nextCursor. */
#define PAGE_LIMIT 100
/* The most pages read: 100,000 sandboxes of one host's label. */
#define PAGES_MAX 1000

/* Calls fn for each sandbox of one page that carries key=value; the next cursor in *next
 * (malloc'd; NULL: the last page). */
static int list_page(aks_provider_impl *prov, json_object *answer, const char *key,
                     const char *value, aks_sandbox_list_fn fn, void *ctx, char **next,
                     aks_error **err)
{
	json_object *items = aks__jget(answer, "items");
	if (!json_object_is_type(items, json_type_array))
		return prov->host->error_set(
		    err, AKS_EPROVISION,
		    "daytona: cannot list the sandboxes: the answer has no "
		    "list of items");
	int rc = AKS_OK;
	size_t n = json_object_array_length(items);
	for (size_t i = 0; rc == AKS_OK && i < n; i++) {
		json_object *s = json_object_array_get_idx(items, i);
		const char *id = aks__jstr(s, "id");
		const char *have = aks__jstr(aks__jget(s, "labels"), key);
		/* the service filtered already; checked again, as nothing else may be deleted */
		if (!id || !have || strcmp(have, value) != 0)
			continue;
		const char *labels[] = {key, value, NULL};
		rc = fn(ctx, id, labels);
	}
	const char *cursor = aks__jstr(answer, "nextCursor");
	*next = rc == AKS_OK && cursor && *cursor ? strdup(cursor) : NULL;
	return rc;
}

int dt_sandbox_list(aks_provider_impl *prov, const char *key, const char *value,
                    const aks_call *call, aks_sandbox_list_fn fn, void *ctx, aks_error **err)
{
	const aks_host_api *host = prov->host;
	/* the SDK's query: labels=<a JSON object>, urlencoded */
	json_object *filter = json_object_new_object();
	char *query =
	    filter && !add_string(filter, key, value)
	        ? aks_cloud_escape(json_object_to_json_string_ext(filter, JSON_C_TO_STRING_PLAIN))
	        : NULL;
	json_object_put(filter);
	if (!query)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	int rc = AKS_OK;
	char *cursor = NULL;
	for (int page = 0; rc == AKS_OK && page < PAGES_MAX; page++) {
		char *escaped = cursor ? aks_cloud_escape(cursor) : NULL, *path = NULL, *url = NULL;
		if ((!cursor || escaped) &&
		    asprintf(&path, "/sandbox?labels=%s&limit=%d%s%s", query, PAGE_LIMIT,
		             cursor ? "&cursor=" : "", cursor ? escaped : "") >= 0)
			url = dt_api_url(prov, path);
		free(escaped);
		free(path);
		free(cursor);
		cursor = NULL;
		if (!url) {
			rc = host->error_set(err, AKS_ENOMEM, "out of memory");
			break;
		}
		aks_cloud_req r = {.what = "list the sandboxes",
		                   .method = "GET",
		                   .url = url,
		                   .retry = AKS_CLOUD_RETRY_SAFE,
		                   .resp_max = 16u << 20};
		json_object *answer = NULL;
		rc = dt_request(prov, &r, NULL, NULL, call, &answer, err);
		if (rc == AKS_OK)
			rc = list_page(prov, answer, key, value, fn, ctx, &cursor, err);
		json_object_put(answer);
		aks_cloud_req_free(&r);
		free(url);
		if (!cursor)
			break;
	}
	free(cursor);
	free(query);
	return rc;
}
