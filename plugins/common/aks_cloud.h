/*
 * plugins/common/aks_cloud.h - the HTTP client of the providers that drive a cloud service's
 * REST API with libcurl (e2b, daytona): each request on a multi handle, so it is bounded by
 * the call's deadline and wakes on its cancellation; sent again with backoff after a failure
 * that its kind allows (never a command twice); connections kept between requests, one TLS
 * session and name cache per provider instance; transport failures worded in one place. Each
 * provider judges the answers (statuses, bodies) itself: their wording is the service's. Part of
 * libaks-http (cloud_http.c); its users link libcurl.
 *
 * Secrets (API keys, tokens) live only in a request's header list, which
 * aks_cloud_headers_free wipes; no message ever quotes a header.
 */
#ifndef AKS_CLOUD_H
#define AKS_CLOUD_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <curl/curl.h>

#include <aksandbox/plugin.h>
#include <aksandbox/provider.h>

#include "aks_buf.h"

/* The most multi handles (and their connections) an instance keeps between requests: as
 * many requests as run at once at most reuse a connection each. */
#define AKS_CLOUD_IDLE_MAX 8

/* One provider instance's client. */
typedef struct aks_cloud {
	const aks_host_api *host;
	const char *who; /* the provider's name, for messages: "e2b" (static) */
	char *ca_file;   /* NULL: libcurl's default bundle */
	long connect_timeout_ms;
	CURLSH *share; /* TLS sessions and names of the instance's requests */
	pthread_mutex_t locks[CURL_LOCK_DATA_LAST];
	/* Connections live in multi handles, each used by one request at a time and kept here
	 * between requests: libcurl does not support a connection cache shared by concurrent
	 * threads (curl_share_setopt, CURL_LOCK_DATA_CONNECT). */
	pthread_mutex_t idle_lock;
	CURLM *idle[AKS_CLOUD_IDLE_MAX];
	size_t idle_count;
	bool curl_held;
	bool locks_made;
} aks_cloud;

/* Sets c up (libcurl's global state held, the share made); ca_file is copied (NULL: the
 * system's bundle). AKS_OK, or AKS_ENOMEM / AKS_ERROR set in *err; c is then cleaned by
 * aks_cloud_fini, which is safe on a zeroed or half-made c. */
int aks_cloud_init(aks_cloud *c, const aks_host_api *host, const char *who, const char *ca_file,
                   long connect_timeout_ms, aks_error **err);
void aks_cloud_fini(aks_cloud *c);

/* The config keys every cloud provider's block has, for its config_keys table. */
#define AKS_CLOUD_CONFIG_KEYS                                                                      \
	AKS_CONFIG_KEY("ca_file", AKS_CONFIG_STRING, false, NULL,                                  \
	               "CA bundle for TLS; null = the system's"),                                  \
	    AKS_CONFIG_KEY("connect_timeout", AKS_CONFIG_DOUBLE, false, "10",                      \
	                   "seconds to open a connection")

/* Reads those keys of the block and sets c up as aks_cloud_init does: AKS_ECONFIG "<who>:
 * ca_file '<f>' cannot be read" or "<who>: connect_timeout must be ...". */
int aks_cloud_configure(aks_cloud *c, const aks_host_api *host, const aks_config *cfg,
                        const char *who, aks_error **err);

/* A setting as the vendors' SDKs resolve theirs: the block's key, else the environment
 * variable env (NULL: none), else def (NULL: none); malloc'd in *out (NULL when none).
 * false when out of memory. */
bool aks_cloud_setting(const aks_host_api *host, const aks_config *cfg, const char *key,
                       const char *env, const char *def, char **out);

/* Which failures a request may be sent again after. */
typedef enum aks_cloud_retry {
	AKS_CLOUD_RETRY_NEVER = 0, /* running a command or code: never twice */
	AKS_CLOUD_RETRY_UNSENT,    /* 429 and connections that never opened: nothing was done */
	AKS_CLOUD_RETRY_SAFE       /* idempotent: also 5xx answers and connections that broke */
} aks_cloud_retry;

/* Receives a 2xx answer's body as it arrives. false stops the transfer (the sink keeps
 * why). */
typedef bool (*aks_cloud_sink_fn)(void *ctx, const char *data, size_t len);

typedef struct aks_cloud_req {
	const char *what;   /* for messages: "create a sandbox" */
	const char *method; /* GET, POST, PUT, DELETE */
	const char *url;
	bool service;               /* a sandbox's service: 502 is the sandbox gone, not retried */
	struct curl_slist *headers; /* borrowed */
	const void *body;           /* NULL: none */
	size_t body_len;
	/* the body sent as the part "file" of a multipart form, with this file name; NULL: as it
	 * is */
	const char *form_file;
	aks_cloud_retry retry;
	aks_cloud_sink_fn sink; /* NULL: the body is kept in resp, up to resp_max */
	void *sink_ctx;
	size_t resp_max;            /* 0: 1 MiB */
	const char *capture_header; /* an answer header whose value is wanted (NULL: none) */
	/* AWS Signature Version 4, by libcurl: "aws:amz:<region>:<service>", with the access key
	 * id as user and the secret key as password (borrowed; NULL: unsigned). */
	const char *aws_sigv4;
	const char *aws_key_id;
	const char *aws_secret;
	/* the answer */
	long status;
	aks_buf resp;
	bool sink_stopped;  /* the sink said stop */
	bool sunk;          /* the sink got bytes: the request is never sent again */
	long retry_after_s; /* the answer's Retry-After, in seconds (0: none) */
	char captured[256]; /* capture_header's value, or "" */
	CURLcode result;
	char errbuf[CURL_ERROR_SIZE];
} aks_cloud_req;

/* Sends r under call's deadline and cancellation, again after a failure r->retry allows
 * (backoff from 250 ms, doubling, at most 5 tries, within the deadline; a Retry-After of up
 * to 10 s is honoured). AKS_OK with r->status set for any answer (the caller judges it); a
 * transport failure is AKS_EPROVISION worded "<who>: cannot <what>: ..."; the deadline
 * AKS_ETIMEOUT; cancellation AKS_ECANCELLED. */
int aks_cloud_http(aks_cloud *c, aks_cloud_req *r, const aks_call *call, aks_error **err);
void aks_cloud_req_free(aks_cloud_req *r);

/* A download into a result: the sink (aks_cloud_file_sink_write, with the struct as its
 * context) adds the file `path` to out at the first bytes and writes each chunk as the file's;
 * aks_cloud_file_sink_end, after the request, says how it went. */
typedef struct aks_cloud_file_sink {
	const aks_host_api *host;
	aks_result *out;
	const char *path;
	bool added;
	int rc;
	aks_error *err;
} aks_cloud_file_sink;

bool aks_cloud_file_sink_write(void *ctx, const char *data, size_t len);
/* After a request whose sink s was, answered with AKS_OK and 2xx: AKS_OK (an empty file,
 * which no byte reached, added now), or the sink's failure (a result past its bounds, out of
 * memory) set in *err. Frees what s holds either way. */
int aks_cloud_file_sink_end(aks_cloud_file_sink *s, aks_error **err);
/* Frees what s holds when the request failed (its error is the one to report). */
void aks_cloud_file_sink_free(aks_cloud_file_sink *s);

/* Waits ms, or less: AKS_OK, or the call's end (which the wait notices at once). */
int aks_cloud_pause(aks_cloud *c, const aks_call *call, long ms, aks_error **err);

/* Appends a "Name: value" header; false when out of memory (*h is then freed and NULL). */
bool aks_cloud_header_add(struct curl_slist **h, const char *name, const char *value);
/* Turns off libcurl's "Expect: 100-continue" (a second's wait on servers that do not
 * answer it); false as aks_cloud_header_add. */
bool aks_cloud_no_expect(struct curl_slist **h);
/* Whether s can be a header's value: no line break or other control character. */
bool aks_cloud_header_safe(const char *s);
/* Frees a header list, wiping each line first (a key or a token may be in it). */
void aks_cloud_headers_free(struct curl_slist *h);

/* s percent-encoded for a URL's path or query (every byte but RFC 3986's unreserved ones);
 * malloc'd, NULL when out of memory. */
char *aks_cloud_escape(const char *s);

/* A base URL setting: http:// or https://, its trailing '/' removed in place. AKS_OK or
 * AKS_ECONFIG worded "<who>: <key> '<url>' is not an http:// or https:// URL". */
int aks_cloud_check_url(const aks_host_api *host, const char *who, const char *key, char *url,
                        aks_error **err);

#endif /* AKS_CLOUD_H */
