/*
 * plugins/common/cloud_http.c - the cloud providers' HTTP client (aks_cloud.h): requests on
 * a multi handle under the call's deadline, retries with backoff where the request's kind
 * allows, transport failures worded once.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "aks_cloud.h"
#include "aks_curl.h"

/* The most tries of one request, and the first pause between two (doubling, at most
 * BACKOFF_MAX_MS; a Retry-After up to RETRY_AFTER_MAX_S is honoured instead). */
#define TRIES_MAX         5
#define BACKOFF_FIRST_MS  250
#define BACKOFF_MAX_MS    4000
#define RETRY_AFTER_MAX_S 10
/* A kept answer's bound when the request names none: control-plane answers are small. */
#define RESP_MAX_DEFAULT (1u << 20)

/* ---- the client ---- */

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *ctx)
{
	(void)h;
	(void)access;
	aks_cloud *c = ctx;
	pthread_mutex_lock(&c->locks[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *ctx)
{
	(void)h;
	aks_cloud *c = ctx;
	pthread_mutex_unlock(&c->locks[data]);
}

int aks_cloud_init(aks_cloud *c, const aks_host_api *host, const char *who, const char *ca_file,
                   long connect_timeout_ms, aks_error **err)
{
	c->host = host;
	c->who = who;
	c->connect_timeout_ms = connect_timeout_ms;
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&c->locks[i], NULL);
	pthread_mutex_init(&c->idle_lock, NULL);
	c->idle_count = 0;
	c->locks_made = true;
	if (ca_file && !(c->ca_file = strdup(ca_file)))
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	c->curl_held = aks_ctr_curl_acquire();
	c->share = c->curl_held ? curl_share_init() : NULL;
	if (!c->share)
		return host->error_set(err, AKS_ERROR, "%s: libcurl cannot be initialised", who);
	curl_share_setopt(c->share, CURLSHOPT_LOCKFUNC, share_lock);
	curl_share_setopt(c->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
	curl_share_setopt(c->share, CURLSHOPT_USERDATA, c);
	curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
	curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	return AKS_OK;
}

bool aks_cloud_setting(const aks_host_api *host, const aks_config *cfg, const char *key,
                       const char *env, const char *def, char **out)
{
	const char *v = NULL;
	host->config_string(cfg, key, &v);
	if (!v || !*v)
		v = env ? getenv(env) : NULL;
	if (!v || !*v)
		v = def;
	*out = v ? strdup(v) : NULL;
	return !v || *out;
}

int aks_cloud_configure(aks_cloud *c, const aks_host_api *host, const aks_config *cfg,
                        const char *who, aks_error **err)
{
	double connect_timeout = 10;
	host->config_double(cfg, "connect_timeout", &connect_timeout);
	const char *ca_file = NULL;
	host->config_string(cfg, "ca_file", &ca_file);
	if (ca_file && !*ca_file)
		ca_file = NULL;
	if (!(connect_timeout > 0) || connect_timeout > 3600)
		return host->error_set(err, AKS_ECONFIG,
		                       "%s: connect_timeout must be more than 0 and at most 3600 "
		                       "seconds",
		                       who);
	if (ca_file && access(ca_file, R_OK) != 0)
		return host->error_set(err, AKS_ECONFIG, "%s: ca_file '%s' cannot be read", who,
		                       ca_file);
	return aks_cloud_init(c, host, who, ca_file, (long)(connect_timeout * 1000), err);
}

void aks_cloud_fini(aks_cloud *c)
{
	if (c->share)
		curl_share_cleanup(c->share);
	c->share = NULL;
	if (c->locks_made) {
		for (size_t i = 0; i < c->idle_count; i++)
			curl_multi_cleanup(c->idle[i]);
		c->idle_count = 0;
		pthread_mutex_destroy(&c->idle_lock);
		for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
			pthread_mutex_destroy(&c->locks[i]);
	}
	c->locks_made = false;
	if (c->curl_held)
		aks_ctr_curl_release();
	c->curl_held = false;
	free(c->ca_file);
	c->ca_file = NULL;
}

/* ---- headers and URLs ---- */

void aks_cloud_headers_free(struct curl_slist *h)
{
	for (struct curl_slist *i = h; i; i = i->next)
		memset(i->data, 0, strlen(i->data));
	curl_slist_free_all(h);
}

bool aks_cloud_header_add(struct curl_slist **h, const char *name, const char *value)
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
		aks_cloud_headers_free(*h);
		*h = NULL;
		return false;
	}
	*h = t;
	return true;
}

bool aks_cloud_no_expect(struct curl_slist **h)
{
	struct curl_slist *t = curl_slist_append(*h, "Expect:");
	if (!t) {
		aks_cloud_headers_free(*h);
		*h = NULL;
		return false;
	}
	*h = t;
	return true;
}

bool aks_cloud_header_safe(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	return true;
}

char *aks_cloud_escape(const char *s)
{
	char *c = curl_easy_escape(NULL, s, 0), *o = c ? strdup(c) : NULL;
	curl_free(c);
	return o;
}

int aks_cloud_check_url(const aks_host_api *host, const char *who, const char *key, char *url,
                        aks_error **err)
{
	if (!url)
		return AKS_OK;
	if (strncmp(url, "https://", 8) != 0 && strncmp(url, "http://", 7) != 0)
		return host->error_set(err, AKS_ECONFIG,
		                       "%s: %s '%s' is not an http:// or https:// URL", who, key,
		                       url);
	size_t n = strlen(url);
	while (n > 8 && url[n - 1] == '/')
		url[--n] = '\0';
	return AKS_OK;
}

/* ---- one request ---- */

static size_t on_body(char *data, size_t size, size_t nmemb, void *ctx)
{
	aks_cloud_req *r = ctx;
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

/* A header line's value when its name is `name` (case-insensitive), trimmed; NULL else. */
static const char *header_value(const char *data, size_t n, const char *name, size_t *vn)
{
	size_t nl = strlen(name);
	if (n <= nl || data[nl] != ':' || strncasecmp(data, name, nl) != 0)
		return NULL;
	const char *v = data + nl + 1;
	size_t len = n - nl - 1;
	while (len && (*v == ' ' || *v == '\t'))
		v++, len--;
	while (len && (v[len - 1] == '\r' || v[len - 1] == '\n' || v[len - 1] == ' '))
		len--;
	*vn = len;
	return v;
}

/* Headers: the status line (the body callback needs the status before the first byte of
 * a body), Retry-After and the header the request wants. */
static size_t on_header(char *data, size_t size, size_t nmemb, void *ctx)
{
	aks_cloud_req *r = ctx;
	size_t n = size * nmemb, vn = 0;
	const char *v;
	if (n > 5 && strncmp(data, "HTTP/", 5) == 0) {
		const char *sp = memchr(data, ' ', n);
		r->status = sp ? strtol(sp + 1, NULL, 10) : 0;
		r->retry_after_s = 0;
		r->captured[0] = '\0';
	} else if ((v = header_value(data, n, "Retry-After", &vn))) {
		char line[64];
		snprintf(line, sizeof(line), "%.*s", (int)(vn < 63 ? vn : 63), v);
		long s = strtol(line, NULL, 10); /* an HTTP date is not honoured: backoff instead */
		r->retry_after_s = s > 0 ? s : 0;
	} else if (r->capture_header && (v = header_value(data, n, r->capture_header, &vn)) &&
	           vn < sizeof(r->captured)) {
		snprintf(r->captured, sizeof(r->captured), "%.*s", (int)vn, v);
	}
	return n;
}

/* false when the request cannot be made as asked: a libcurl that cannot sign (before 7.75) */
static bool set_options(aks_cloud *c, CURL *e, aks_cloud_req *r, curl_mime *mime)
{
	curl_easy_setopt(e, CURLOPT_URL, r->url);
	curl_easy_setopt(e, CURLOPT_SHARE, c->share);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, c->connect_timeout_ms);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->headers);
	/* TCP keepalive: a long command's answer is quiet until the command ends */
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(e, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	if (c->ca_file)
		curl_easy_setopt(e, CURLOPT_CAINFO, c->ca_file);
	if (r->aws_sigv4) { /* libcurl signs the request, its custom headers included */
#if LIBCURL_VERSION_NUM >= 0x074b00
		if (curl_easy_setopt(e, CURLOPT_AWS_SIGV4, r->aws_sigv4) != CURLE_OK)
			return false; /* never sent unsigned */
		curl_easy_setopt(e, CURLOPT_USERNAME, r->aws_key_id);
		curl_easy_setopt(e, CURLOPT_PASSWORD, r->aws_secret);
#else
		return false;
#endif
	}
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
	return true;
}

/* A multi handle for one request: an idle one (with the connections its last requests left
 * open), else a new one. */
static CURLM *multi_take(aks_cloud *c)
{
	CURLM *m = NULL;
	pthread_mutex_lock(&c->idle_lock);
	if (c->idle_count > 0)
		m = c->idle[--c->idle_count];
	pthread_mutex_unlock(&c->idle_lock);
	return m ? m : curl_multi_init();
}

/* Keeps m (and its connections) for the next request, or cleans it up when enough are kept. */
static void multi_put(aks_cloud *c, CURLM *m)
{
	if (!m)
		return;
	pthread_mutex_lock(&c->idle_lock);
	bool kept = c->idle_count < AKS_CLOUD_IDLE_MAX;
	if (kept)
		c->idle[c->idle_count++] = m;
	pthread_mutex_unlock(&c->idle_lock);
	if (!kept)
		curl_multi_cleanup(m);
}

/* One try: AKS_OK with r->result and r->status set, or the call's end. */
static int send_once(aks_cloud *c, aks_cloud_req *r, const aks_call *call, aks_error **err)
{
	const aks_host_api *host = c->host;
	r->status = 0;
	r->result = CURLE_OK;
	r->errbuf[0] = '\0';
	r->retry_after_s = 0;
	r->captured[0] = '\0';
	aks__buf_truncate(&r->resp, 0);
	CURLM *multi = multi_take(c);
	CURL *e = curl_easy_init();
	int rc = AKS_OK;
	curl_mime *mime = NULL;
	if (!multi || !e) {
		rc = host->error_set(err, AKS_ENOMEM, "out of memory");
		goto out;
	}
	if (r->form_file) { /* the body as a form's part "file", named by form_file */
		curl_mimepart *part = (mime = curl_mime_init(e)) ? curl_mime_addpart(mime) : NULL;
		if (!part || curl_mime_name(part, "file") != CURLE_OK ||
		    curl_mime_filename(part, r->form_file) != CURLE_OK ||
		    curl_mime_data(part, r->body ? r->body : "", r->body ? r->body_len : 0) !=
		        CURLE_OK) {
			rc = host->error_set(err, AKS_ENOMEM, "out of memory");
			goto out;
		}
	}
	if (!set_options(c, e, r, mime)) {
		rc = host->error_set(err, AKS_ERROR,
		                     "%s: cannot %s: this libcurl cannot sign AWS requests "
		                     "(CURLOPT_AWS_SIGV4 needs libcurl 7.75 or later)",
		                     c->who, r->what);
		goto out;
	}
	if (curl_multi_add_handle(multi, e) != CURLM_OK) {
		rc = host->error_set(err, AKS_ERROR, "libcurl refused a request");
		goto out;
	}
	rc = aks_ctr_multi_run(host, multi, call, c->who, &r->result, err);
	long status = 0;
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
	r->status = status;
	curl_multi_remove_handle(multi, e);
out:
	if (e)
		curl_easy_cleanup(e);
	curl_mime_free(mime);
	multi_put(c, multi);
	return rc;
}

/* Whether a failed try may be sent again. */
static bool may_retry(const aks_cloud_req *r)
{
	if (r->retry == AKS_CLOUD_RETRY_NEVER || r->sunk || r->sink_stopped)
		return false;
	if (r->result == CURLE_COULDNT_CONNECT)
		return true; /* nothing reached the server */
	if (r->result == CURLE_OK && r->status == 429)
		return true; /* refused before anything was done */
	if (r->retry != AKS_CLOUD_RETRY_SAFE)
		return false;
	if (r->result == CURLE_SEND_ERROR || r->result == CURLE_RECV_ERROR ||
	    r->result == CURLE_GOT_NOTHING || r->result == CURLE_PARTIAL_FILE)
		return true;
	return r->result == CURLE_OK && (r->status == 500 || r->status == 503 || r->status == 504 ||
	                                 (r->status == 502 && !r->service));
}

int aks_cloud_pause(aks_cloud *c, const aks_call *call, long ms, aks_error **err)
{
	const aks_host_api *host = c->host;
	int cfd =
	    call && AKS_HOST_HAS(host, cancel_fd) && host->cancel_fd ? host->cancel_fd(call) : -1;
	int64_t until = host->now_ms() + ms;
	for (;;) {
		int rc = aks_ctr_call_check(host, call, c->who, err);
		if (rc != AKS_OK)
			return rc;
		int64_t left = until - host->now_ms();
		if (left <= 0)
			return AKS_OK;
		struct pollfd p = {cfd, POLLIN, 0};
		poll(cfd >= 0 ? &p : NULL, cfd >= 0 ? 1 : 0, left > 1000 ? 1000 : (int)left);
	}
}

int aks_cloud_http(aks_cloud *c, aks_cloud_req *r, const aks_call *call, aks_error **err)
{
	const aks_host_api *host = c->host;
	long backoff = BACKOFF_FIRST_MS;
	for (int try = 1;; try++) {
		int rc = send_once(c, r, call, err);
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
		host->log(AKS_LOG_DEBUG, c->who, "%s: try %d of %d failed (%s); again in %ld ms",
		          r->what, try, TRIES_MAX,
		          r->result != CURLE_OK ? curl_easy_strerror(r->result) : "busy", wait);
		if ((rc = aks_cloud_pause(c, call, wait, err)) != AKS_OK)
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
		    "%s: cannot %s: the server's certificate cannot be verified: "
		    "%s (ca_file sets the CA bundle)",
		    c->who, r->what, why);
	case CURLE_OPERATION_TIMEDOUT:
		return host->error_set(err, AKS_EPROVISION,
		                       "%s: cannot %s: no connection within %ld ms: %s", c->who,
		                       r->what, c->connect_timeout_ms, why);
	default:
		return host->error_set(err, AKS_EPROVISION, "%s: cannot %s: %s", c->who, r->what,
		                       why);
	}
}

void aks_cloud_req_free(aks_cloud_req *r)
{
	aks__buf_free(&r->resp);
}

/* ---- downloads into a result ---- */

bool aks_cloud_file_sink_write(void *ctx, const char *data, size_t len)
{
	aks_cloud_file_sink *s = ctx;
	const aks_host_api *host = s->host;
	if (!s->added) {
		if ((s->rc = host->result_add_file(s->out, s->path, NULL)) != AKS_OK)
			return false;
		s->added = true;
	}
	s->rc = host->result_write(s->out, AKS_STREAM_FILE, data, len, &s->err);
	return s->rc == AKS_OK;
}

int aks_cloud_file_sink_end(aks_cloud_file_sink *s, aks_error **err)
{
	const aks_host_api *host = s->host;
	int rc = AKS_OK;
	if (s->rc != AKS_OK)
		rc = s->err ? host->error_set(err, s->rc, "%s", host->error_message(s->err))
		            : host->error_set(err, s->rc, "cannot keep '%s'", s->path);
	else if (!s->added && (rc = host->result_add_file(s->out, s->path, NULL)) != AKS_OK)
		rc = host->error_set(err, rc, "out of memory");
	aks_cloud_file_sink_free(s);
	return rc;
}

void aks_cloud_file_sink_free(aks_cloud_file_sink *s)
{
	if (s->err)
		s->host->error_free(s->err);
	s->err = NULL;
}
