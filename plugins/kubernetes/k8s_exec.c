/*
 * plugins/kubernetes/k8s_exec.c - executions through the API server's exec
 * WebSocket, with libwebsockets.
 *
 * GET /api/v1/namespaces/{ns}/pods/{pod}/exec?command=...&stdout=true&...
 * upgraded to a WebSocket. We offer v5.channel.k8s.io first (whose channel
 * 255 half-closes stdin) and v4.channel.k8s.io, which servers before 1.30
 * pick; the channel layer (k8s_channel.c) does the framing and reads the
 * exit code from the status on channel 3.
 *
 * Timeouts. An exec cannot be killed through the API. Every execution runs
 * under a wrapper that puts AKS_EXEC_ID=<128 random bits> in its
 * environment, which its children inherit; on expiry (or cancellation) a
 * second exec walks /proc and SIGKILLs every process whose environment holds
 * that marker, until none is left. It needs only sh and cat in the image,
 * not pkill (the docker plugin does the same).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libwebsockets.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "aks_container.h"
#include "k8s_internal.h"

#define MARKER_VAR AKS_CTR_MARKER_VAR
/* The request line carries the command: an argument at most this long once
 * percent-encoded travels in the URL; a longer program text is sent on stdin
 * instead. Through libwebsockets 4.1 an exec URL of about 2 KiB is answered 400
 * by the API server (the same URL from curl is not), so the budget leaves the
 * rest of the URL (the path, the wrapper, the marker) room under that. */
#define MAX_URL_ARG 1024
#define HDR_BUF     (1u << 20)
#define STDIN_CHUNK 32768
#define TICK_US     100000

/* $1 the marker, $2 the working directory, then the command. */
const char k8s_exec_wrapper[] = MARKER_VAR "=$1; export " MARKER_VAR "; cd \"$2\" || exit 127; "
                                           "shift 2; exec \"$@\"";

/* ---- libwebsockets' log, routed to the host's ------------------------------------------ */

static const aks_host_api *log_host;

static void lws_log(int level, const char *line)
{
	if (!log_host)
		return;
	char buf[512];
	snprintf(buf, sizeof(buf), "%s", line);
	size_t n = strlen(buf);
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = '\0';
	log_host->log(level == LLL_ERR ? AKS_LOG_INFO : AKS_LOG_DEBUG, K8S_NAME,
	              "libwebsockets: %s", buf);
}

/* ---- one exec session -------------------------------------------------------------------- */

typedef struct xs {
	aks_sandbox_impl *sb;
	const k8s_exec_opts *o;
	k8s_demux dm;
	struct curl_slist *headers; /* "Name: value" */
	struct lws *wsi;
	size_t stdin_off;
	bool want_stdin, stdin_done, v5;
	bool established, closed, failed, capture_over;
	int http_status;
	char proto[64];
	char why[256];
} xs;

static bool on_output(void *ctx, int channel, const char *data, size_t len)
{
	xs *x = ctx;
	const k8s_exec_opts *o = x->o;
	aks_buf *cap = channel == K8S_CH_STDOUT ? o->capture : o->capture_err;
	if (cap) {
		if (cap->len + len > o->capture_max) {
			x->capture_over = true;
			return false;
		}
		return aks__buf_append(cap, data, len) == AKS_OK;
	}
	if (o->out) /* the host bounds and counts what it keeps */
		x->sb->prov->host->result_write(
		    o->out, channel == K8S_CH_STDERR ? AKS_STREAM_STDERR : AKS_STREAM_STDOUT, data,
		    len, NULL);
	return true;
}

int k8s_lws_add_headers(struct lws *wsi, struct curl_slist *headers, unsigned char **p,
                        unsigned char *end)
{
	for (struct curl_slist *h = headers; h; h = h->next) {
		const char *colon = strchr(h->data, ':');
		if (!colon)
			continue;
		char name[64];
		size_t n = (size_t)(colon - h->data);
		if (n + 2 > sizeof(name))
			continue;
		for (size_t i = 0; i < n; i++) /* lws wants "name:" in lower case */
			name[i] = (char)(h->data[i] >= 'A' && h->data[i] <= 'Z' ? h->data[i] + 32
			                                                        : h->data[i]);
		name[n] = ':';
		name[n + 1] = '\0';
		const char *v = colon + 1;
		while (*v == ' ')
			v++;
		if (lws_add_http_header_by_name(wsi, (const unsigned char *)name,
		                                (const unsigned char *)v, (int)strlen(v), p, end))
			return -1;
	}
	return 0;
}

static int send_stdin(xs *x, struct lws *wsi)
{
	const k8s_exec_opts *o = x->o;
	if (x->stdin_done)
		return 0;
	size_t left = o->stdin_len - x->stdin_off;
	size_t n = left < STDIN_CHUNK ? left : STDIN_CHUNK, flen = 0;
	unsigned char *f;
	if (n)
		f = k8s_frame(K8S_CH_STDIN, (const char *)o->stdin_data + x->stdin_off, n, LWS_PRE,
		              &flen);
	else if (x->v5) /* all sent: close our stdin, the program sees EOF */
		f = k8s_frame(K8S_CH_CLOSE, "\0", 1, LWS_PRE, &flen);
	else {
		x->stdin_done = true;
		return 0;
	}
	if (!f)
		return -1;
	int w = lws_write(wsi, f + LWS_PRE, flen, LWS_WRITE_BINARY);
	free(f);
	if (w < (int)flen)
		return -1;
	if (n)
		x->stdin_off += n;
	else
		x->stdin_done = true;
	lws_callback_on_writable(wsi);
	return 0;
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                    size_t len)
{
	xs *x = user;
	if (!x) /* protocol-wide events, or a connection whose exec has returned */
		return 0;
	switch (reason) {
	case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER: {
		x->wsi = wsi;
		unsigned char **p = in;
		if (k8s_lws_add_headers(wsi, x->headers, p, *p + len) < 0)
			return -1;
		break;
	}
	case LWS_CALLBACK_CLIENT_FILTER_PRE_ESTABLISH:
		/* the server's answer headers are still there: which subprotocol it chose */
		if (lws_hdr_copy(wsi, x->proto, sizeof(x->proto), WSI_TOKEN_PROTOCOL) < 0)
			x->proto[0] = '\0';
		break;
	case LWS_CALLBACK_CLIENT_ESTABLISHED:
		x->established = true;
		x->v5 = strcmp(x->proto, K8S_PROTO_V5) == 0;
		x->sb->prov->host->log(AKS_LOG_DEBUG, K8S_NAME, "exec into pod '%s' over %s",
		                       x->sb->id, x->proto[0] ? x->proto : "(no subprotocol)");
		if (x->want_stdin)
			lws_callback_on_writable(wsi);
		break;
	case LWS_CALLBACK_CLIENT_WRITEABLE:
		if (x->want_stdin && send_stdin(x, wsi) < 0)
			return -1;
		break;
	case LWS_CALLBACK_CLIENT_RECEIVE:
		k8s_demux_feed(&x->dm, in, len, lws_is_first_fragment(wsi));
		break;
	case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
		x->failed = true;
		x->wsi = NULL;
		x->http_status = (int)lws_http_client_http_response(wsi);
		snprintf(x->why, sizeof(x->why), "%s", in ? (const char *)in : "connection failed");
		break;
	case LWS_CALLBACK_CLIENT_CLOSED:
		x->closed = true;
		break;
	case LWS_CALLBACK_TIMER:
		lws_set_timer_usecs(wsi, TICK_US);
		break;
	case LWS_CALLBACK_WSI_DESTROY:
		x->closed = true;
		x->wsi = NULL;
		break;
	default:
		break;
	}
	return 0;
}

static const struct lws_protocols protocols[] = {
    {"aks-k8s-exec", callback, 0, 65536, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

/* ---- the client TLS context -------------------------------------------------------------- */

/*
 * We make the client SSL_CTX ourselves and hand it to libwebsockets as provided_client_ssl_ctx
 * (which it never frees), rather than let it make one from client_ssl_ca_mem & co. Why:
 * libwebsockets 4.1 (Debian 12) finds the SSL_CTX it made for a context, at destroy time,
 * through an SSL_CTX ex_data index that every lws_create_context() allocates anew into one
 * process-wide variable (fixed in 4.2: "openssl: acquire ex indexes once for multicontext",
 * warmcat/libwebsockets#2178). A context destroyed after another one was created looks under
 * the newer index, finds nothing and leaks its SSL_CTX whole (about 23 KB: the CA store, the
 * client key, their cached Montgomery contexts). We always have several contexts alive at once:
 * a handle's per-call one and its agent stream's, other handles' on other threads.
 */
static int load_ca(X509_STORE *store, const k8s_blob *b)
{
	BIO *bio = BIO_new_mem_buf(b->data, (int)b->len);
	if (!bio)
		return -1;
	int n = 0;
	X509 *x;
	while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL))) {
		if (X509_STORE_add_cert(store, x) == 1)
			n++;
		X509_free(x);
	}
	ERR_clear_error(); /* the end of the bundle reads as an error */
	BIO_free(bio);
	return n > 0 ? 0 : -1;
}

static int load_client_cert(SSL_CTX *tls, const k8s_conn_cfg *cc)
{
	int rc = -1;
	BIO *cb = BIO_new_mem_buf(cc->cert.data, (int)cc->cert.len);
	BIO *kb = cc->key.data ? BIO_new_mem_buf(cc->key.data, (int)cc->key.len) : NULL;
	X509 *leaf = cb ? PEM_read_bio_X509(cb, NULL, NULL, NULL) : NULL;
	EVP_PKEY *key = kb ? PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL) : NULL;
	if (!leaf || !key || SSL_CTX_use_certificate(tls, leaf) != 1)
		goto out;
	/* intermediates after the leaf go with it */
	X509 *x;
	while ((x = PEM_read_bio_X509(cb, NULL, NULL, NULL)))
		if (SSL_CTX_add0_chain_cert(tls, x) != 1)
			X509_free(x);
	if (SSL_CTX_use_PrivateKey(tls, key) == 1 && SSL_CTX_check_private_key(tls) == 1)
		rc = 0;
out:
	ERR_clear_error();
	X509_free(leaf);
	EVP_PKEY_free(key);
	BIO_free(cb);
	BIO_free(kb);
	return rc;
}

/* What libwebsockets would have made from the same material (its options and modes). */
static SSL_CTX *tls_client_ctx_new(const k8s_conn_cfg *cc)
{
	SSL_CTX *tls = SSL_CTX_new(TLS_client_method());
	if (!tls)
		return NULL;
	SSL_CTX_set_options(tls, SSL_OP_NO_COMPRESSION);
	SSL_CTX_set_mode(tls, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
	bool ok;
	if (cc->ca.data) /* the kubeconfig's CAs only, like libwebsockets */
		ok = load_ca(SSL_CTX_get_cert_store(tls), &cc->ca) == 0;
	else
		ok = SSL_CTX_set_default_verify_paths(tls) == 1;
	if (ok && cc->cert.data)
		ok = load_client_cert(tls, cc) == 0;
	ERR_clear_error();
	if (!ok) {
		SSL_CTX_free(tls);
		return NULL;
	}
	return tls;
}

/* ---- the context (one per sandbox handle: calls on a handle never overlap) ----------------- */

struct lws_context *k8s_lws_context_new(aks_provider_impl *prov, const struct lws_protocols *protos,
                                        void *user, void **tls, aks_error **err)
{
	const aks_host_api *host = prov->host;
	const k8s_conn_cfg *cc = &prov->conn;
	*tls = NULL;
	log_host = host;
	lws_set_log_level(LLL_ERR | LLL_WARN, lws_log);
	struct lws_context_creation_info info;
	memset(&info, 0, sizeof(info));
	info.port = CONTEXT_PORT_NO_LISTEN;
	info.protocols = protos;
	info.user = user;
	info.gid = (gid_t)-1;
	info.uid = (uid_t)-1;
	info.max_http_header_data2 = HDR_BUF;
	info.pt_serv_buf_size = HDR_BUF;
	info.connect_timeout_secs = 10;
	info.fd_limit_per_thread = 16;
	SSL_CTX *made = NULL;
	if (strncmp(cc->server, "https://", 8) == 0) {
		made = tls_client_ctx_new(cc);
		if (!made)
			goto fail;
		info.options = LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
		info.provided_client_ssl_ctx = made;
	}
	/* plain http: no TLS at all (without the option libwebsockets sets none up) */
	struct lws_context *ctx = lws_create_context(&info);
	if (!ctx) {
		SSL_CTX_free(made);
		goto fail;
	}
	*tls = made;
	return ctx;
fail:
	host->error_set(err, AKS_EPROVISION,
	                "kubernetes: cannot set up the exec client (libwebsockets); the TLS "
	                "material of %s may be unusable",
	                cc->source);
	return NULL;
}

void k8s_lws_context_free(struct lws_context *ctx, void *tls)
{
	if (ctx)
		lws_context_destroy(ctx);
	SSL_CTX_free(tls); /* after: the context's connections used it until then */
}

static struct lws_context *context_for(aks_sandbox_impl *sb, aks_error **err)
{
	if (!sb->exec_ctx)
		sb->exec_ctx = k8s_lws_context_new(sb->prov, protocols, NULL, &sb->exec_tls, err);
	return sb->exec_ctx;
}

void k8s_exec_ctx_free(aks_sandbox_impl *sb)
{
	k8s_lws_context_free(sb->exec_ctx, sb->exec_tls);
	sb->exec_ctx = NULL;
	sb->exec_tls = NULL;
}

bool k8s_parse_server(const char *s, k8s_url *u)
{
	memset(u, 0, sizeof(*u));
	if (strncmp(s, "https://", 8) == 0) {
		u->tls = true;
		s += 8;
	} else if (strncmp(s, "http://", 7) == 0) {
		s += 7;
	} else {
		return false;
	}
	size_t hl = strcspn(s, "/");
	const char *hostport = s, *rest = s + hl;
	const char *colon = NULL;
	if (*hostport == '[') {
		const char *rb = memchr(hostport, ']', hl);
		if (!rb)
			return false;
		snprintf(u->host, sizeof(u->host), "%.*s", (int)(rb - hostport - 1), hostport + 1);
		colon = rb[1] == ':' ? rb + 1 : NULL;
	} else {
		colon = memchr(hostport, ':', hl);
		size_t n = colon ? (size_t)(colon - hostport) : hl;
		snprintf(u->host, sizeof(u->host), "%.*s", (int)n, hostport);
	}
	u->port = colon ? atoi(colon + 1) : (u->tls ? 443 : 80);
	snprintf(u->prefix, sizeof(u->prefix), "%s", rest);
	return u->host[0] && u->port > 0 && u->port < 65536;
}

char *k8s_exec_path(aks_sandbox_impl *sb, const char *const *argv, bool with_stdin)
{
	aks_buf b = AKS_BUF_INIT;
	char *ns = k8s_escape(sb->ns), *pod = k8s_escape(sb->pod);
	bool ok = ns && pod &&
	          aks__buf_printf(&b, "/api/v1/namespaces/%s/pods/%s/exec?%s", ns, pod,
	                          sb->external ? "" : "container=sandbox&") == AKS_OK;
	for (const char *const *a = argv; ok && *a; a++) {
		char *e = k8s_escape(*a);
		ok = e && aks__buf_printf(&b, "command=%s&", e) == AKS_OK;
		free(e);
	}
	ok = ok && aks__buf_puts(&b, with_stdin ? "stdin=true&stdout=true&stderr=true&tty=false"
	                                        : "stdout=true&stderr=true&tty=false") == AKS_OK;
	free(ns);
	free(pod);
	if (!ok) {
		aks__buf_free(&b);
		return NULL;
	}
	return aks__buf_steal(&b);
}

/* After a failed upgrade: the same URL as a plain GET makes the API server
 * say why (a 403 Status naming the missing verb), which the WebSocket
 * handshake does not surface. */
static int explain_handshake(aks_sandbox_impl *sb, const char *path, xs *x, const aks_call *call,
                             aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	k8s_req r = {.method = "GET", .path = path};
	aks_error *e = NULL;
	int rc = k8s_request(sb->client, &r, call, &e);
	if (rc == AKS_OK && (r.status == 401 || r.status == 403)) {
		char what[300];
		snprintf(what, sizeof(what), "exec into pod '%s'", sb->id);
		rc = k8s_api_error(sb->client, &r, AKS_EPROVISION, what, err);
		if (r.status == 403)
			host->log(AKS_LOG_INFO, K8S_NAME,
			          "exec over WebSocket needs RBAC 'get' (and on newer servers "
			          "'create') on pods/exec");
	} else if (rc == AKS_OK && r.status == 404) {
		rc = k8s_gone(host, sb->id, "no longer exists", err);
	} else if (rc == AKS_OK && (x->http_status == 401 || x->http_status == 403)) {
		rc = host->error_set(
		    err, AKS_EPROVISION,
		    "kubernetes: exec into pod '%s' failed during the WebSocket handshake (%s, "
		    "HTTP "
		    "%d); check that the caller's RBAC grants both 'create' and 'get' on pods/exec",
		    sb->id, x->why, x->http_status);
	} else if (rc == AKS_OK) {
		rc = host->error_set(err, AKS_EPROVISION,
		                     "kubernetes: exec into pod '%s' failed during the WebSocket "
		                     "handshake (%s, HTTP %d)",
		                     sb->id, x->why, x->http_status);
	} else {
		if (err && !*err) {
			*err = e;
			e = NULL;
		}
	}
	if (e)
		host->error_free(e);
	k8s_req_free(&r);
	return rc;
}

void k8s_random_hex(char *out, size_t nbytes)
{
	unsigned char raw[32];
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	ssize_t got = fd >= 0 ? read(fd, raw, nbytes) : -1;
	if (fd >= 0)
		close(fd);
	if (got != (ssize_t)nbytes) /* never in practice; still unique enough per process */
		for (size_t i = 0; i < nbytes; i++)
			raw[i] = (unsigned char)(rand() ^ (int)time(NULL) ^ (int)i);
	for (size_t i = 0; i < nbytes; i++)
		sprintf(out + 2 * i, "%02x", raw[i]);
}

/* One WebSocket exec of argv (already wrapped). */
static int ws_exec(aks_sandbox_impl *sb, const char *const *argv, const k8s_exec_opts *o,
                   const aks_call *call, int *exit_code, bool *timed_out, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	const k8s_conn_cfg *cc = &sb->prov->conn;
	*timed_out = false;
	*exit_code = -1;
	struct lws_context *ctx = context_for(sb, err);
	if (!ctx)
		return AKS_EPROVISION;
	k8s_url u;
	if (!k8s_parse_server(cc->server, &u))
		return host->error_set(err, AKS_ECONFIG, "kubernetes: cannot use server '%s'",
		                       cc->server);
	bool with_stdin = o->stdin_data != NULL;
	char *epath = k8s_exec_path(sb, argv, with_stdin), *full = NULL;
	if (!epath || asprintf(&full, "%s%s", u.prefix, epath) < 0) {
		free(epath);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	xs x = {.sb = sb, .o = o, .want_stdin = with_stdin};
	k8s_demux_init(&x.dm, on_output, &x);
	bool ok = true;
	x.headers = k8s_auth_headers(sb->client, &ok);
	int rc = AKS_OK;
	if (!ok) {
		rc = host->error_set(err, AKS_ENOMEM, "out of memory");
		goto out;
	}
	struct lws_client_connect_info ci;
	memset(&ci, 0, sizeof(ci));
	ci.context = ctx;
	ci.address = u.host;
	ci.port = u.port;
	ci.path = full;
	ci.host = cc->tls_server_name ? cc->tls_server_name : u.host;
	ci.origin = ci.host;
	ci.protocol = K8S_PROTO_V5 "," K8S_PROTO_V4;
	ci.local_protocol_name = protocols[0].name;
	ci.userdata = &x;
	if (u.tls) {
		ci.ssl_connection = LCCSCF_USE_SSL;
		if (cc->insecure)
			ci.ssl_connection |= LCCSCF_ALLOW_SELFSIGNED |
			                     LCCSCF_SKIP_SERVER_CERT_HOSTNAME_CHECK |
			                     LCCSCF_ALLOW_EXPIRED | LCCSCF_ALLOW_INSECURE;
	}
	ci.pwsi = &x.wsi;
	if (!lws_client_connect_via_info(&ci) && !x.failed) {
		rc = host->error_set(err, AKS_EPROVISION,
		                     "kubernetes: cannot open the exec connection to %s",
		                     cc->server);
		goto out;
	}
	if (x.wsi)
		lws_set_timer_usecs(x.wsi, TICK_US);
	while (!x.closed && !x.failed) {
		if (call && ((host->cancelled && host->cancelled(call)) ||
		             (call->deadline_ms > 0 && host->now_ms() >= call->deadline_ms))) {
			*timed_out = true;
			break;
		}
		if (x.dm.stopped && x.capture_over)
			break;
		if (lws_service(ctx, 0) < 0)
			break;
	}
	if (x.wsi && !x.closed) {
		/* leave nothing half-open on the context; outside any callback of
		 * this wsi, so it may close at once (an asynchronous close would
		 * wait for the next event, which may be long) */
		struct lws *w = x.wsi;
		lws_set_wsi_user(w, NULL); /* it must not call back into this frame */
		x.wsi = NULL;
		lws_set_timeout(w, PENDING_TIMEOUT_CLOSE_SEND, LWS_TO_KILL_SYNC);
	}
	if (*timed_out) {
		rc = call && host->cancelled && host->cancelled(call) ? AKS_ECANCELLED
		                                                      : AKS_ETIMEOUT;
		goto out;
	}
	if (x.failed && !x.established) {
		rc = explain_handshake(sb, full, &x, call, err);
		goto out;
	}
	if (x.capture_over) {
		rc = host->error_set(err, AKS_ELIMIT,
		                     "kubernetes: the output is larger than %zu bytes",
		                     o->capture_max);
		goto out;
	}
	k8s_err ke = {0};
	rc = k8s_status_exit_code(x.dm.status.data, x.dm.status.len, exit_code, &ke);
	if (rc != AKS_OK) {
		/* the pod went away under us, or the container is not running */
		rc = host->error_set(err, AKS_EPROVISION, "kubernetes: exec into pod '%s': %s",
		                     sb->id, ke.msg);
	}
out:
	curl_slist_free_all(x.headers);
	k8s_demux_fini(&x.dm);
	free(full);
	free(epath);
	return rc;
}

/* Kills every process carrying the marker, with its own short deadline. */
static void kill_marked(aks_sandbox_impl *sb, const char *marker)
{
	const aks_host_api *host = sb->prov->host;
	aks_call quick = {AKS_CALL_INIT, .deadline_ms = host->now_ms() + 15000, .timeout = 15};
	const char *argv[] = {"/bin/sh", "-c", aks_ctr_kill_script, "sh", marker, NULL};
	k8s_exec_opts o = {.argv = argv};
	aks_error *e = NULL;
	int code = -1;
	bool to = false;
	int rc = ws_exec(sb, argv, &o, &quick, &code, &to, &e);
	if (rc != AKS_OK || code != 0)
		host->log(AKS_LOG_WARNING, K8S_NAME,
		          "cannot kill a timed-out execution in pod '%s' (processes of it may "
		          "survive): %s",
		          sb->id,
		          e    ? host->error_message(e)
		          : to ? "timed out"
		               : "the sweep failed");
	if (e)
		host->error_free(e);
}

int k8s_exec(aks_sandbox_impl *sb, const k8s_exec_opts *o, const aks_call *call, int *exit_code,
             aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	*exit_code = -1;
	if (call && host->cancelled && host->cancelled(call)) {
		if (o->out)
			host->result_set_timed_out(o->out);
		return host->error_set(err, AKS_ECANCELLED,
		                       "execution cancelled before it started");
	}
	size_t n = 0;
	while (o->argv[n])
		n++;
	const char **argv = calloc(n + 7, sizeof(*argv));
	if (!argv)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	char marker[33];
	k8s_random_hex(marker, 16);
	size_t k = 0;
	argv[k++] = "/bin/sh";
	argv[k++] = "-c";
	argv[k++] = k8s_exec_wrapper;
	argv[k++] = "sh";
	argv[k++] = marker;
	argv[k++] = o->workdir ? o->workdir : K8S_WORKSPACE;
	for (size_t i = 0; i < n; i++)
		argv[k++] = o->argv[i];
	bool timed_out = false;
	int rc = ws_exec(sb, argv, o, call, exit_code, &timed_out, err);
	free(argv);
	if (timed_out) {
		kill_marked(sb, marker);
		if (o->out) {
			host->result_set_exit_code(o->out, -1);
			host->result_set_timed_out(o->out);
		}
		if (rc == AKS_ECANCELLED)
			return host->error_set(err, rc, "kubernetes exec was cancelled");
		return host->error_set(err, AKS_ETIMEOUT, "kubernetes exec exceeded timeout %gs",
		                       call ? call->timeout : 0.0);
	}
	if (rc == AKS_OK && o->out)
		host->result_set_exit_code(o->out, *exit_code);
	return rc;
}

/* ---- the sandbox operations ------------------------------------------------------------------ */

/* A program text too long for the URL travels on stdin: the shell reads
 * exactly its length (no EOF needed, so v4 works) and runs it. */
static int run_text(aks_sandbox_impl *sb, const char *interp_flag_script, const char *text,
                    const aks_call *call, aks_result *out, aks_error **err)
{
	size_t len = strlen(text);
	char script[256];
	snprintf(script, sizeof(script), "c=$(head -c %zu; echo x); c=${c%%x}; %s", len,
	         interp_flag_script);
	const char *argv[] = {"/bin/sh", "-c", script, "sh", sb->prov->python, NULL};
	k8s_exec_opts o = {.argv = argv, .stdin_data = text, .stdin_len = len, .out = out};
	int code = -1;
	return k8s_exec(sb, &o, call, &code, err);
}

int k8s_execute_code(aks_sandbox_impl *sb, const char *code, const char *language,
                     const aks_call *call, aks_result *out, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	if (!language)
		language = "python";
	if (!code)
		return host->error_set(err, AKS_EINVAL, "execute_code: no code");
	if (strcmp(language, "python") != 0)
		return host->error_set(err, AKS_ECAPABILITY,
		                       "kubernetes does not support capability: language:%s",
		                       language);
	if (k8s_escaped_len(code) > MAX_URL_ARG)
		return run_text(sb, "exec \"$1\" -c \"$c\"", code, call, out, err);
	const char *argv[] = {sb->prov->python, "-c", code, NULL};
	k8s_exec_opts o = {.argv = argv, .out = out};
	int ec = -1;
	return k8s_exec(sb, &o, call, &ec, err);
}

int k8s_execute_command(aks_sandbox_impl *sb, const char *command, const aks_call *call,
                        aks_result *out, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	if (!command)
		return host->error_set(err, AKS_EINVAL, "execute_command: no command");
	if (k8s_escaped_len(command) > MAX_URL_ARG)
		return run_text(sb, "exec /bin/sh -c \"$c\"", command, call, out, err);
	const char *argv[] = {"/bin/sh", "-c", command, NULL};
	k8s_exec_opts o = {.argv = argv, .out = out};
	int ec = -1;
	return k8s_exec(sb, &o, call, &ec, err);
}

int k8s_run_argv(aks_sandbox_impl *sb, const char *const *argv, const aks_call *call,
                 aks_result *out, aks_error **err)
{
	k8s_exec_opts o = {.argv = argv, .out = out};
	int ec = -1;
	return k8s_exec(sb, &o, call, &ec, err);
}
