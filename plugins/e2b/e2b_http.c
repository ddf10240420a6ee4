/*
 * plugins/e2b/e2b_http.c - requests to E2B over libcurl: each on a multi handle, so it is
 * bounded by the call's deadline and wakes on its cancellation; sent again with backoff
 * after a failure that its kind allows (never a command twice); answers judged in one place.
 *
 * The API key is read from the environment for each request and lives only in its header
 * list, which is wiped before it is freed; no message ever quotes a header.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "aks_curl.h"
#include "aks_json.h"
#include "e2b_internal.h"

/* The most tries of one request, and the first pause between two (doubling, at most
 * BACKOFF_MAX_MS; a Retry-After up to RETRY_AFTER_MAX_S is honoured instead). */
#define TRIES_MAX         5
#define BACKOFF_FIRST_MS  250
#define BACKOFF_MAX_MS    4000
#define RETRY_AFTER_MAX_S 10
/* A kept answer's bound when the request names none: control-plane answers are small. */
#define RESP_MAX_DEFAULT (1u << 20)

/* ---- headers and URLs ---- */

void e2b_headers_free(struct curl_slist *h)
{
	for (struct curl_slist *i = h; i; i = i->next)
		memset(i->data, 0, strlen(i->data)); /* a key or a token may be in it */
	curl_slist_free_all(h);
}

/* Appends a "Name: value" header; false when out of memory (h is then freed). */
static bool header_add(struct curl_slist **h, const char *name, const char *value)
{
	char *line = NULL;
	if (asprintf(&line, "%s: %s", name, value) < 0)
		line = NULL;
	struct curl_slist *t = line ? curl_slist_append(*h, line) : NULL;
	if (line) {
		memset(line, 0, strlen(line));
		free(line);
	}
	if (!t) {
		e2b_headers_free(*h);
		*h = NULL;
		return false;
	}
	*h = t;
	return true;
}

/* Turns off libcurl's "Expect: 100-continue" for large bodies: a wait of a second on servers
 * that do not answer it, for nothing. */
static bool no_expect(struct curl_slist **h)
{
	struct curl_slist *t = curl_slist_append(*h, "Expect:");
	if (!t) {
		e2b_headers_free(*h);
		*h = NULL;
		return false;
	}
	*h = t;
	return true;
}

/* A header value cannot carry a line break or another control character. */
static bool header_safe(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	return true;
}

int e2b_api_headers(aks_provider_impl *prov, struct curl_slist **out, aks_error **err)
{
	const aks_host_api *host = prov->host;
	*out = NULL;
	const char *key = getenv(prov->api_key_env);
	if (!key || !*key)
		return host->error_set(err, AKS_ECONFIG,
		                       "e2b provider requires the %s environment variable",
		                       prov->api_key_env);
	if (!header_safe(key))
		return host->error_set(err, AKS_ECONFIG,
		                       "the %s environment variable holds control characters: not "
		                       "an E2B API key",
		                       prov->api_key_env);
	struct curl_slist *h = NULL;
	if (!header_add(&h, "X-API-KEY", key) || !header_add(&h, "Accept", "application/json") ||
	    !header_add(&h, "Content-Type", "application/json") || !no_expect(&h))
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
	bool ok = header_add(&h, "E2b-Sandbox-Id", sb->id) &&
	          header_add(&h, "E2b-Sandbox-Port", port_text) &&
	          (!sb->access_token || header_add(&h, "X-Access-Token", sb->access_token)) &&
	          (!content_type || header_add(&h, "Content-Type", content_type)) &&
	          no_expect(&h) &&
	          /* envd before 0.4.0 needs the user named; later ones take their default */
	          (port != E2B_ENVD_PORT || e2b_version_cmp(sb->envd_version, "0.4.0") >= 0 ||
	           header_add(&h, "Authorization", "Basic dXNlcjo=")); /* "user:" */
	if (!ok)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	*out = h;
	return AKS_OK;
}

char *e2b_escape(const char *s)
{
	/* libcurl's: every byte but RFC 3986's unreserved ones percent-encoded */
	char *c = curl_easy_escape(NULL, s, 0), *o = c ? strdup(c) : NULL;
	curl_free(c);
	return o;
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

/* ---- one request ---- */

static size_t on_body(char *data, size_t size, size_t nmemb, void *ctx)
{
	e2b_req *r = ctx;
	size_t n = size * nmemb;
	if (r->sink && r->status >= 200 && r->status < 300) {
		r->sunk = true;
		if (!r->sink(r->sink_ctx, data, n)) {
			r->sink_stopped = true;
			return 0;
		}
		return n;
	}
	size_t max = r->resp_max ? r->resp_max : RESP_MAX_DEFAULT;
	if (r->resp.len + n > max) /* past its bound: the rest is dropped, the answer kept */
		n = max - r->resp.len;
	if (n && aks__buf_append(&r->resp, data, n) != AKS_OK)
		return 0;
	return size * nmemb;
}

/* Headers: the status line (the body callback needs the status before the first byte of
 * a body) and Retry-After. */
static size_t on_header(char *data, size_t size, size_t nmemb, void *ctx)
{
	e2b_req *r = ctx;
	size_t n = size * nmemb;
	if (n > 5 && strncmp(data, "HTTP/", 5) == 0) {
		const char *sp = memchr(data, ' ', n);
		r->status = sp ? strtol(sp + 1, NULL, 10) : 0;
		r->retry_after_s = 0;
		r->next_token[0] = '\0';
	} else if (n > 12 && strncasecmp(data, "Retry-After:", 12) == 0) {
		char line[64];
		snprintf(line, sizeof(line), "%.*s", (int)(n - 12 < 63 ? n - 12 : 63), data + 12);
		long s = strtol(line, NULL, 10); /* an HTTP date is not honoured: backoff instead */
		r->retry_after_s = s > 0 ? s : 0;
	} else if (n > 13 && strncasecmp(data, "X-Next-Token:", 13) == 0) {
		const char *v = data + 13;
		size_t vn = n - 13;
		while (vn && (*v == ' ' || *v == '\t'))
			v++, vn--;
		while (vn && (v[vn - 1] == '\r' || v[vn - 1] == '\n' || v[vn - 1] == ' '))
			vn--;
		if (vn < sizeof(r->next_token))
			snprintf(r->next_token, sizeof(r->next_token), "%.*s", (int)vn, v);
	}
	return n;
}

static void set_options(aks_provider_impl *prov, CURL *e, e2b_req *r, curl_mime *mime)
{
	curl_easy_setopt(e, CURLOPT_URL, r->url);
	curl_easy_setopt(e, CURLOPT_SHARE, prov->share);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, prov->connect_timeout_ms);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->headers);
	/* TCP keepalive: a long command's stream is quiet between envd's keepalive events */
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(e, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	if (prov->ca_file)
		curl_easy_setopt(e, CURLOPT_CAINFO, prov->ca_file);
	if (strcmp(r->method, "GET") == 0) {
		curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
	} else if (r->form_file) {
		curl_easy_setopt(e, CURLOPT_MIMEPOST, mime);
	} else {
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r->method);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body ? (const char *)r->body : "");
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
		                 (curl_off_t)(r->body ? r->body_len : 0));
	}
}

/* One try: AKS_OK with r->result and r->status set, or the call's end. */
static int send_once(aks_provider_impl *prov, e2b_req *r, const aks_call *call, aks_error **err)
{
	const aks_host_api *host = prov->host;
	r->status = 0;
	r->result = CURLE_OK;
	r->errbuf[0] = '\0';
	r->retry_after_s = 0;
	aks__buf_truncate(&r->resp, 0);
	CURLM *multi = curl_multi_init();
	CURL *e = curl_easy_init();
	int rc = AKS_OK;
	curl_mime *mime = NULL;
	if (!multi || !e) {
		rc = host->error_set(err, AKS_ENOMEM, "out of memory");
		goto out;
	}
	/* an upload to an older envd: the body as a form's part "file", named by the path */
	if (r->form_file) {
		curl_mimepart *part = (mime = curl_mime_init(e)) ? curl_mime_addpart(mime) : NULL;
		if (!part || curl_mime_name(part, "file") != CURLE_OK ||
		    curl_mime_filename(part, r->form_file) != CURLE_OK ||
		    curl_mime_data(part, r->body ? r->body : "", r->body ? r->body_len : 0) !=
		        CURLE_OK) {
			rc = host->error_set(err, AKS_ENOMEM, "out of memory");
			goto out;
		}
	}
	set_options(prov, e, r, mime);
	if (curl_multi_add_handle(multi, e) != CURLM_OK) {
		rc = host->error_set(err, AKS_ERROR, "libcurl refused a request");
		goto out;
	}
	rc = aks_ctr_multi_run(host, multi, call, E2B_NAME, &r->result, err);
	long status = 0;
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
	r->status = status;
	curl_multi_remove_handle(multi, e);
out:
	if (e)
		curl_easy_cleanup(e);
	curl_mime_free(mime);
	if (multi)
		curl_multi_cleanup(multi);
	return rc;
}

/* Whether a failed try may be sent again. */
static bool may_retry(const e2b_req *r)
{
	if (r->retry == E2B_RETRY_NEVER || r->sunk || r->sink_stopped)
		return false;
	if (r->result == CURLE_COULDNT_CONNECT)
		return true; /* nothing reached the server */
	if (r->result == CURLE_OK && r->status == 429)
		return true; /* refused before anything was done */
	if (r->retry != E2B_RETRY_SAFE)
		return false;
	if (r->result == CURLE_SEND_ERROR || r->result == CURLE_RECV_ERROR ||
	    r->result == CURLE_GOT_NOTHING || r->result == CURLE_PARTIAL_FILE)
		return true;
	return r->result == CURLE_OK && (r->status == 500 || r->status == 503 || r->status == 504 ||
	                                 (r->status == 502 && !r->service));
}

/* Waits ms, or less: AKS_OK, or the call's end (which the wait notices at once). */
static int pause_ms(aks_provider_impl *prov, const aks_call *call, long ms, aks_error **err)
{
	const aks_host_api *host = prov->host;
	int cfd =
	    call && AKS_HOST_HAS(host, cancel_fd) && host->cancel_fd ? host->cancel_fd(call) : -1;
	int64_t until = host->now_ms() + ms;
	for (;;) {
		int rc = aks_ctr_call_check(host, call, E2B_NAME, err);
		if (rc != AKS_OK)
			return rc;
		int64_t left = until - host->now_ms();
		if (left <= 0)
			return AKS_OK;
		struct pollfd p = {cfd, POLLIN, 0};
		poll(cfd >= 0 ? &p : NULL, cfd >= 0 ? 1 : 0, left > 1000 ? 1000 : (int)left);
	}
}

int e2b_http(aks_provider_impl *prov, e2b_req *r, const aks_call *call, aks_error **err)
{
	const aks_host_api *host = prov->host;
	long backoff = BACKOFF_FIRST_MS;
	for (int try = 1;; try++) {
		int rc = send_once(prov, r, call, err);
		if (rc != AKS_OK)
			return rc;
		if (try == TRIES_MAX || !may_retry(r))
			break;
		long wait = r->retry_after_s > 0 && r->retry_after_s <= RETRY_AFTER_MAX_S
		                ? r->retry_after_s * 1000
		                : backoff;
		/* a pause the deadline would cut short is not taken: the last answer stands */
		if (call && call->deadline_ms > 0 && host->now_ms() + wait >= call->deadline_ms)
			break;
		host->log(AKS_LOG_DEBUG, E2B_NAME, "%s: try %d of %d failed (%s); again in %ld ms",
		          r->what, try, TRIES_MAX,
		          r->result != CURLE_OK ? curl_easy_strerror(r->result) : "busy", wait);
		if ((rc = pause_ms(prov, call, wait, err)) != AKS_OK)
			return rc;
		backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
	}
	if (r->result == CURLE_OK || (r->sink_stopped && r->result == CURLE_WRITE_ERROR))
		return AKS_OK;
	const char *why = r->errbuf[0] ? r->errbuf : curl_easy_strerror(r->result);
	switch (r->result) {
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CACERT_BADFILE:
		return host->error_set(
		    err, AKS_EPROVISION,
		    "e2b: cannot %s: the server's certificate cannot be verified: "
		    "%s (ca_file sets the CA bundle)",
		    r->what, why);
	case CURLE_OPERATION_TIMEDOUT:
		return host->error_set(err, AKS_EPROVISION,
		                       "e2b: cannot %s: no connection within %ld ms: %s", r->what,
		                       prov->connect_timeout_ms, why);
	default:
		return host->error_set(err, AKS_EPROVISION, "e2b: cannot %s: %s", r->what, why);
	}
}

void e2b_req_free(e2b_req *r)
{
	aks__buf_free(&r->resp);
}

/* ---- answers ---- */

int e2b_gone(aks_provider_impl *prov, const char *id, aks_error **err)
{
	return prov->host->error_set(err, AKS_EGONE, "e2b sandbox '%s' no longer exists", id);
}

int e2b_answer_error(aks_provider_impl *prov, const e2b_req *r, const char *id, int code,
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
