/*
 * plugins/kubernetes/k8s_stream.c - one long-lived exec WebSocket (the one aksandbox-agent
 * runs in) bridged to a pair of sockets, so that plugins/common/agent/agent_client.c, which wants
 * two file descriptors, can talk through it.
 *
 * Three parties share a stream:
 *  - the service thread owns the libwebsockets context (created, serviced and destroyed on
 *    it alone: libwebsockets is not thread-safe). It writes what arrives on channel 1 into
 *    the client's read socket (blocking: the client's reader always drains, it never waits
 *    on anything but its socket), logs channel 2 and keeps its start for close,
 *    keeps channel 3 (the status: the program ended), and sends the queued stdin bytes
 *    on channel 0 when the socket is writable;
 *  - the pump thread reads the client's write socket into that queue (bounded: it waits
 *    while the queue is full) and wakes the service thread with lws_cancel_service(), the
 *    one libwebsockets call that is safe from another thread;
 *  - the caller: open waits for the connection, close ends it.
 * When the client closes its write socket the pump sees EOF and the service thread closes
 * the program's stdin: channel 255 on v5.channel.k8s.io; on v4, which cannot half-close,
 * it closes the connection, which makes the kubelet close the program's stdin. The agent
 * then kills what it runs and exits.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libwebsockets.h>

#include "k8s_internal.h"

#define QUEUE_MAX  (4u << 20) /* stdin bytes waiting for the WebSocket */
#define SEND_CHUNK 65536      /* stdin bytes per message */
#define TICK_US    200000     /* the service loop looks at its flags at least this often */
#define OPEN_MS    15000      /* the handshake's bound when the call has no deadline */
#define CLOSE_MS   3000       /* how long close waits for the server to end the stream */
#define LOG_MAX    400

struct k8s_stream {
	aks_sandbox_impl *sb;
	const aks_host_api *host;
	char *path;                 /* the exec URL's path */
	struct curl_slist *headers; /* token, impersonation: the handle's identity */
	k8s_url u;
	struct lws_context *ctx;
	void *tls; /* ctx's client SSL_CTX */
	struct lws *wsi;
	pthread_t service, pump;
	bool service_started, pump_started;
	int cl_in;  /* our end of the client's write socket: the pump reads it */
	int cl_out; /* our end of the client's read socket: the service thread writes it */
	k8s_demux dm;

	pthread_mutex_t mu; /* everything below */
	pthread_cond_t cv;
	unsigned char *q; /* stdin bytes not yet sent */
	size_t qlen, qcap;
	bool in_eof;     /* the client closed its write socket */
	bool stop;       /* close() was called */
	bool stop_force; /* close() waited long enough */
	bool established, failed, ended, v5, sent_close;
	int http_status;
	char why[256];
	char proto[64];
	/* the start of the program's stderr (the service thread's alone until close joins
	 * it): a relay that cannot reach or start the agent says why there */
	char said[LOG_MAX];
	size_t said_len;
};

/* ---- the service thread's side ------------------------------------------------------------ */

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static bool on_output(void *ctx, int channel, const char *data, size_t len)
{
	k8s_stream *s = ctx;
	if (channel == K8S_CH_STDOUT) {
		/* a client gone away is not an error of the stream: drop the rest */
		if (s->cl_out >= 0 && write_all(s->cl_out, data, len) < 0) {
			close(s->cl_out);
			s->cl_out = -1;
		}
		return true;
	}
	/* the agent's own stderr: its complaints, for the operator, and for the reason of a
	 * start that failed */
	size_t keep = sizeof(s->said) - s->said_len < len ? sizeof(s->said) - s->said_len : len;
	memcpy(s->said + s->said_len, data, keep);
	s->said_len += keep;
	char line[LOG_MAX + 1];
	size_t n = len < LOG_MAX ? len : LOG_MAX;
	memcpy(line, data, n);
	line[n] = '\0';
	while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = '\0';
	if (n)
		s->host->log(AKS_LOG_INFO, K8S_NAME, "aksandbox-agent in pod '%s': %s", s->sb->id,
		             line);
	return true;
}

/* The program ended or the connection broke: the client reads EOF. */
static void ended(k8s_stream *s)
{
	pthread_mutex_lock(&s->mu);
	s->ended = true;
	s->wsi = NULL;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	if (s->cl_out >= 0) {
		close(s->cl_out);
		s->cl_out = -1;
	}
}

static int send_some(k8s_stream *s, struct lws *wsi)
{
	pthread_mutex_lock(&s->mu);
	size_t n = s->qlen < SEND_CHUNK ? s->qlen : SEND_CHUNK;
	bool close_now = !n && (s->in_eof || s->stop) && !s->sent_close;
	unsigned char *f = NULL;
	size_t flen = 0;
	if (n)
		f = k8s_frame(K8S_CH_STDIN, s->q, n, LWS_PRE, &flen);
	if (f) {
		memmove(s->q, s->q + n, s->qlen - n);
		s->qlen -= n;
		pthread_cond_broadcast(&s->cv); /* room for the pump */
	}
	bool more = s->qlen > 0 || ((s->in_eof || s->stop) && !s->sent_close);
	if (close_now)
		s->sent_close = true;
	bool v5 = s->v5;
	pthread_mutex_unlock(&s->mu);
	if (n && !f)
		return -1;
	if (f) {
		int w = lws_write(wsi, f + LWS_PRE, flen, LWS_WRITE_BINARY);
		free(f);
		if (w < (int)flen)
			return -1;
	}
	if (close_now) {
		if (!v5)
			return -1; /* v4 cannot half-close: closing the connection closes stdin */
		unsigned char *c = k8s_frame(K8S_CH_CLOSE, "\0", 1, LWS_PRE, &flen);
		if (!c)
			return -1;
		int w = lws_write(wsi, c + LWS_PRE, flen, LWS_WRITE_BINARY);
		free(c);
		if (w < (int)flen)
			return -1;
		return 0;
	}
	if (more)
		lws_callback_on_writable(wsi);
	return 0;
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                    size_t len)
{
	k8s_stream *s = user;
	if (reason == LWS_CALLBACK_EVENT_WAIT_CANCELLED) {
		/* another thread queued bytes, saw EOF or wants the stream closed */
		s = lws_context_user(lws_get_context(wsi));
		if (s && s->wsi)
			lws_callback_on_writable(s->wsi);
		return 0;
	}
	if (!s)
		return 0;
	switch (reason) {
	case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER: {
		unsigned char **p = in;
		if (k8s_lws_add_headers(wsi, s->headers, p, *p + len) < 0)
			return -1;
		break;
	}
	case LWS_CALLBACK_CLIENT_FILTER_PRE_ESTABLISH:
		if (lws_hdr_copy(wsi, s->proto, sizeof(s->proto), WSI_TOKEN_PROTOCOL) < 0)
			s->proto[0] = '\0';
		break;
	case LWS_CALLBACK_CLIENT_ESTABLISHED:
		pthread_mutex_lock(&s->mu);
		s->wsi = wsi;
		s->established = true;
		s->v5 = strcmp(s->proto, K8S_PROTO_V5) == 0;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
		lws_set_timer_usecs(wsi, TICK_US);
		lws_callback_on_writable(wsi);
		break;
	case LWS_CALLBACK_CLIENT_WRITEABLE:
		return send_some(s, wsi);
	case LWS_CALLBACK_CLIENT_RECEIVE:
		k8s_demux_feed(&s->dm, in, len, lws_is_first_fragment(wsi));
		break;
	case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
		pthread_mutex_lock(&s->mu);
		s->failed = true;
		s->http_status = (int)lws_http_client_http_response(wsi);
		snprintf(s->why, sizeof(s->why), "%s", in ? (const char *)in : "connection failed");
		pthread_mutex_unlock(&s->mu);
		ended(s);
		break;
	case LWS_CALLBACK_TIMER:
		lws_set_timer_usecs(wsi, TICK_US);
		break;
	case LWS_CALLBACK_CLIENT_CLOSED:
	case LWS_CALLBACK_WSI_DESTROY:
		ended(s);
		break;
	default:
		break;
	}
	return 0;
}

static const struct lws_protocols protocols[] = {
    {"aks-k8s-agent", callback, 0, 65536, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

static void *service_main(void *arg)
{
	k8s_stream *s = arg;
	/* a write to a client socket closed under us must fail, not kill the host */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	const k8s_conn_cfg *cc = &s->sb->prov->conn;
	aks_error *e = NULL;
	void *tls = NULL;
	struct lws_context *made = k8s_lws_context_new(s->sb->prov, protocols, s, &tls, &e);
	pthread_mutex_lock(&s->mu);
	s->ctx = made;
	s->tls = tls;
	pthread_mutex_unlock(&s->mu);
	if (!made) {
		pthread_mutex_lock(&s->mu);
		s->failed = true;
		snprintf(s->why, sizeof(s->why), "%s",
		         e ? s->host->error_message(e) : "cannot set up libwebsockets");
		pthread_mutex_unlock(&s->mu);
		if (e)
			s->host->error_free(e);
		ended(s);
		return NULL;
	}
	struct lws_client_connect_info ci;
	memset(&ci, 0, sizeof(ci));
	ci.context = s->ctx;
	ci.address = s->u.host;
	ci.port = s->u.port;
	ci.path = s->path;
	ci.host = cc->tls_server_name ? cc->tls_server_name : s->u.host;
	ci.origin = ci.host;
	ci.protocol = K8S_PROTO_V5 "," K8S_PROTO_V4;
	ci.local_protocol_name = protocols[0].name;
	ci.userdata = s;
	if (s->u.tls) {
		ci.ssl_connection = LCCSCF_USE_SSL;
		if (cc->insecure)
			ci.ssl_connection |= LCCSCF_ALLOW_SELFSIGNED |
			                     LCCSCF_SKIP_SERVER_CERT_HOSTNAME_CHECK |
			                     LCCSCF_ALLOW_EXPIRED | LCCSCF_ALLOW_INSECURE;
	}
	struct lws *w = NULL;
	ci.pwsi = &w;
	if (!lws_client_connect_via_info(&ci)) {
		pthread_mutex_lock(&s->mu);
		if (!s->failed) {
			s->failed = true;
			snprintf(s->why, sizeof(s->why), "cannot open the exec connection to %s",
			         cc->server);
		}
		pthread_mutex_unlock(&s->mu);
		ended(s);
	}
	for (;;) {
		pthread_mutex_lock(&s->mu);
		bool done = s->ended || s->failed;
		bool force = s->stop_force;
		struct lws *live = s->wsi;
		pthread_mutex_unlock(&s->mu);
		if (done)
			break;
		if (force) {
			/* the server did not end it in time: drop the connection now, and let
			 * no callback reach the stream any more */
			if (live) {
				lws_set_wsi_user(live, NULL);
				lws_set_timeout(live, PENDING_TIMEOUT_CLOSE_SEND, LWS_TO_KILL_SYNC);
			}
			ended(s);
			break;
		}
		if (lws_service(s->ctx, 0) < 0) {
			ended(s);
			break;
		}
	}
	/* destroyed on the thread that made and serviced it (libwebsockets is not thread-safe);
	 * the others wake it only under the lock, while it exists */
	pthread_mutex_lock(&s->mu);
	struct lws_context *ctx = s->ctx;
	s->ctx = NULL;
	tls = s->tls;
	s->tls = NULL;
	pthread_mutex_unlock(&s->mu);
	k8s_lws_context_free(ctx, tls);
	return NULL;
}

/* ---- the pump ------------------------------------------------------------------------------- */

static void *pump_main(void *arg)
{
	k8s_stream *s = arg;
	char *buf = malloc(SEND_CHUNK);
	for (;;) {
		ssize_t n = buf ? read(s->cl_in, buf, SEND_CHUNK) : 0;
		if (n < 0 && errno == EINTR)
			continue;
		pthread_mutex_lock(&s->mu);
		if (n <= 0) {
			s->in_eof = true;
			if (s->ctx)
				lws_cancel_service(s->ctx);
			pthread_mutex_unlock(&s->mu);
			break;
		}
		while (s->qlen >= QUEUE_MAX && !s->ended && !s->stop)
			pthread_cond_wait(&s->cv, &s->mu);
		bool drop = s->ended || s->stop; /* nobody to send it to any more */
		if (!drop && s->qlen + (size_t)n > s->qcap) {
			size_t cap = s->qcap ? s->qcap : SEND_CHUNK;
			while (cap < s->qlen + (size_t)n)
				cap *= 2;
			unsigned char *q = realloc(s->q, cap);
			if (q) {
				s->q = q;
				s->qcap = cap;
			} else {
				drop = true;
			}
		}
		if (!drop) {
			memcpy(s->q + s->qlen, buf, (size_t)n);
			s->qlen += (size_t)n;
			if (s->ctx)
				lws_cancel_service(s->ctx);
		}
		pthread_mutex_unlock(&s->mu);
	}
	free(buf);
	return NULL;
}

/* ---- open and close -------------------------------------------------------------------------- */

static void stream_free(k8s_stream *s)
{
	if (s->ctx || s->tls) /* the service thread never ran */
		k8s_lws_context_free(s->ctx, s->tls);
	if (s->cl_in >= 0)
		close(s->cl_in);
	if (s->cl_out >= 0)
		close(s->cl_out);
	k8s_demux_fini(&s->dm);
	curl_slist_free_all(s->headers);
	free(s->path);
	free(s->q);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
}

static void timespec_at(struct timespec *ts, int64_t ms_from_now)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms_from_now / 1000;
	ts->tv_nsec += (long)(ms_from_now % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

void k8s_stream_close(k8s_stream *s, char *said, size_t len)
{
	if (said && len)
		said[0] = '\0';
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	if (s->service_started) {
		/* closing the stdin (or, on v4, the connection) makes the program end and the
		 * server end the stream; wait for that a little, then force it */
		struct timespec ts;
		timespec_at(&ts, CLOSE_MS);
		pthread_mutex_lock(&s->mu);
		while (!s->ended) {
			if (s->ctx)
				lws_cancel_service(s->ctx);
			struct timespec step;
			timespec_at(&step, 50);
			pthread_cond_timedwait(&s->cv, &s->mu, &step);
			struct timespec now;
			clock_gettime(CLOCK_MONOTONIC, &now);
			if (now.tv_sec > ts.tv_sec ||
			    (now.tv_sec == ts.tv_sec && now.tv_nsec >= ts.tv_nsec))
				break;
		}
		s->stop_force = true;
		pthread_mutex_unlock(&s->mu);
		/* the loop looks at stop_force at least every tick */
		pthread_join(s->service, NULL);
	}
	if (s->pump_started) {
		/* it ends at the client's EOF; shutting our end down makes sure */
		shutdown(s->cl_in, SHUT_RDWR);
		pthread_join(s->pump, NULL);
	}
	if (said && len) { /* the service thread is gone: said[] is ours to read */
		size_t n = s->said_len < len - 1 ? s->said_len : len - 1;
		memcpy(said, s->said, n);
		said[n] = '\0';
	}
	stream_free(s);
}

const char *k8s_stream_protocol(const k8s_stream *s)
{
	return s->proto;
}

int k8s_stream_open(aks_sandbox_impl *sb, const char *const *argv, const aks_call *call,
                    k8s_stream **out, int *rfd, int *wfd, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	*out = NULL;
	*rfd = *wfd = -1;
	k8s_stream *s = calloc(1, sizeof(*s));
	if (!s)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	s->sb = sb;
	s->host = host;
	s->cl_in = s->cl_out = -1;
	pthread_mutex_init(&s->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cv, &ca);
	pthread_condattr_destroy(&ca);
	k8s_demux_init(&s->dm, on_output, s);
	if (!k8s_parse_server(sb->prov->conn.server, &s->u)) {
		stream_free(s);
		return host->error_set(err, AKS_ECONFIG, "kubernetes: cannot use server '%s'",
		                       sb->prov->conn.server);
	}
	char *epath = k8s_exec_path(sb, argv, true);
	bool ok = epath && asprintf(&s->path, "%s%s", s->u.prefix, epath) >= 0;
	free(epath);
	if (!ok)
		s->path = NULL;
	if (ok)
		s->headers = k8s_auth_headers(sb->client, &ok);
	int in[2] = {-1, -1}, outp[2] = {-1, -1};
	if (ok && (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) < 0 ||
	           socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, outp) < 0)) {
		int e = errno;
		if (in[0] >= 0) {
			close(in[0]);
			close(in[1]);
		}
		stream_free(s);
		return host->error_set(err, AKS_EIO, "cannot create a socket pair: %s",
		                       strerror(e));
	}
	if (!ok) {
		stream_free(s);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	s->cl_in = in[0];
	s->cl_out = outp[0];
	if (pthread_create(&s->service, NULL, service_main, s) != 0) {
		close(in[1]);
		close(outp[1]);
		stream_free(s);
		return host->error_set(err, AKS_EIO, "cannot start the exec stream's thread");
	}
	s->service_started = true;
	/* the handshake, under the call's deadline */
	int64_t now = host->now_ms();
	int64_t until = call && call->deadline_ms > 0 ? call->deadline_ms : now + OPEN_MS;
	struct timespec ts;
	timespec_at(&ts, until > now ? until - now : 0);
	pthread_mutex_lock(&s->mu);
	while (!s->established && !s->failed && !s->ended)
		if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT)
			break;
	bool up = s->established && !s->failed;
	char why[300];
	snprintf(why, sizeof(why), "%s (HTTP %d)", s->why[0] ? s->why : "timed out",
	         s->http_status);
	pthread_mutex_unlock(&s->mu);
	if (!up) {
		close(in[1]);
		close(outp[1]);
		k8s_stream_close(s, NULL, 0);
		return host->error_set(err, AKS_EPROVISION,
		                       "kubernetes: cannot open the agent's exec stream into pod "
		                       "'%s': %s",
		                       sb->id, why);
	}
	if (pthread_create(&s->pump, NULL, pump_main, s) != 0) {
		close(in[1]);
		close(outp[1]);
		k8s_stream_close(s, NULL, 0);
		return host->error_set(err, AKS_EIO, "cannot start the exec stream's thread");
	}
	s->pump_started = true;
	host->log(AKS_LOG_DEBUG, K8S_NAME, "agent stream into pod '%s' over %s", sb->id,
	          s->proto[0] ? s->proto : "(no subprotocol)");
	*out = s;
	*rfd = outp[1];
	*wfd = in[1];
	return AKS_OK;
}
