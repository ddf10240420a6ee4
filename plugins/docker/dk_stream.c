/*
 * plugins/docker/dk_stream.c - one exec's stdio as a pair of plain file descriptors, for
 * aksandbox-agent's client (plugins/common/agent/agent_client.c), which wants fds.
 *
 * POST /exec/{id}/start with `Connection: Upgrade` and `Upgrade: tcp` hijacks the HTTP
 * connection (101): from then on what we send is the program's stdin, raw, and what we
 * receive is its stdout and stderr multiplexed in frames (8-byte headers, no TTY). libcurl
 * makes the connection (unix socket, TCP or TLS, as every other request: CONNECT_ONLY) and
 * then only moves bytes (curl_easy_send/recv); the request and the response head are ours.
 *
 * A pump thread joins that connection to two socketpairs: what the client writes goes to
 * the program's stdin; stdout frames are unwrapped into the client's read end; stderr
 * frames go to the log (and the first bytes are kept for an error message). Every fd the
 * pump touches is non-blocking and each direction has a bounded buffer, so neither side
 * can block the other and memory stays bounded whatever the program prints.
 *
 * End: when the client closes its write end the pump half-closes the connection
 * (shutdown(SHUT_WR); the engine then closes the program's stdin, and the agent exits),
 * and ends when the engine closes the stream, which happens when the program has exited.
 * TLS has no half-close: there the pump closes the connection, which the engine also
 * turns into the end of stdin.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dk_internal.h"

#define UP_CAP   (64 * 1024)  /* client -> program */
#define DOWN_CAP (256 * 1024) /* program -> client, unwrapped */
#define RX_MAX   (64 * 1024)  /* one recv */
#define HEAD_MAX 16384        /* the HTTP response head */
#define ERR_KEEP 512          /* stderr bytes kept for messages */

struct dk_stream {
	const aks_provider_impl *prov;
	char *what; /* "container X", for the log */
	CURL *easy;
	curl_socket_t sock;
	int up_r;   /* the pump reads the client's bytes here */
	int down_w; /* and writes the program's stdout here */
	int stop[2];
	int done[2];
	pthread_t thread;
	bool started;
	dk_demux frames;
	/* bytes that came with the response head */
	unsigned char *early;
	size_t early_len;
	/* buffers */
	unsigned char up[UP_CAP];
	size_t up_len;
	unsigned char down[DOWN_CAP];
	size_t down_len;
	/* stderr: one line for the log at a time, the first bytes for messages */
	pthread_mutex_t mu;
	char line[1024];
	size_t line_len;
	char err_head[ERR_KEEP + 1];
	size_t err_len;
	char out_head[ERR_KEEP + 1]; /* the first stdout bytes: an engine's error lands there */
	size_t out_len;
};

/* ---- small helpers ------------------------------------------------------------------ */

static void set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Waits for sock to be ready for `events` until the call's deadline or its cancellation.
 * AKS_OK when ready; AKS_ETIMEOUT or AKS_ECANCELLED. */
static int wait_sock(const aks_provider_impl *prov, curl_socket_t sock, short events,
                     const aks_call *call, int64_t deadline, aks_error **err)
{
	const aks_host_api *host = prov->host;
	int cfd =
	    call && AKS_HOST_HAS(host, cancel_fd) && host->cancel_fd ? host->cancel_fd(call) : -1;
	for (;;) {
		if (call && host->cancelled && host->cancelled(call))
			return host->error_set(err, AKS_ECANCELLED, "the call was cancelled");
		int64_t left = deadline - host->now_ms();
		if (left <= 0)
			return host->error_set(err, AKS_ETIMEOUT, "docker exceeded timeout %gs",
			                       call ? call->timeout : 0.0);
		struct pollfd pf[2] = {{sock, events, 0}, {cfd, POLLIN, 0}};
		int n = poll(pf, cfd >= 0 ? 2 : 1, left > 1000 ? 1000 : (int)left);
		if (n < 0 && errno != EINTR)
			return host->error_set(err, AKS_EIO, "docker: poll failed: %s",
			                       strerror(errno));
		if (n > 0 && pf[0].revents)
			return AKS_OK;
	}
}

static int64_t deadline_of(const aks_provider_impl *prov, const aks_call *call)
{
	int64_t d = prov->host->now_ms() + 30000;
	if (call && call->deadline_ms > 0 && call->deadline_ms < d)
		d = call->deadline_ms;
	return d;
}

/* ---- the handshake ------------------------------------------------------------------- */

static int connect_only(dk_stream *s, aks_error **err)
{
	const aks_host_api *host = s->prov->host;
	const dk_endpoint *ep = &s->prov->ep;
	char errbuf[CURL_ERROR_SIZE] = "";
	if (!(s->easy = curl_easy_init()))
		return host->error_set(err, AKS_ENOMEM, "cannot create a libcurl handle");
	curl_easy_setopt(s->easy, CURLOPT_URL, ep->base_url);
	if (ep->unix_path)
		curl_easy_setopt(s->easy, CURLOPT_UNIX_SOCKET_PATH, ep->unix_path);
	if (ep->tls) {
		curl_easy_setopt(s->easy, CURLOPT_SSL_VERIFYPEER, ep->tls_verify ? 1L : 0L);
		curl_easy_setopt(s->easy, CURLOPT_SSL_VERIFYHOST, ep->tls_verify ? 2L : 0L);
		if (ep->ca)
			curl_easy_setopt(s->easy, CURLOPT_CAINFO, ep->ca);
		if (ep->cert)
			curl_easy_setopt(s->easy, CURLOPT_SSLCERT, ep->cert);
		if (ep->key)
			curl_easy_setopt(s->easy, CURLOPT_SSLKEY, ep->key);
	}
	curl_easy_setopt(s->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(s->easy, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(s->easy, CURLOPT_CONNECT_ONLY, 1L);
	curl_easy_setopt(s->easy, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	CURLcode cc = curl_easy_perform(s->easy);
	curl_easy_setopt(s->easy, CURLOPT_ERRORBUFFER, NULL);
	if (cc != CURLE_OK)
		return host->error_set(
		    err, AKS_EPROVISION,
		    "cannot reach the Docker Engine at %s: %s (is dockerd running? start it with "
		    "`dockerd` or `systemctl start docker`, or set DOCKER_HOST)",
		    ep->display, errbuf[0] ? errbuf : curl_easy_strerror(cc));
	curl_socket_t sock = CURL_SOCKET_BAD;
	if (curl_easy_getinfo(s->easy, CURLINFO_ACTIVESOCKET, &sock) != CURLE_OK ||
	    sock == CURL_SOCKET_BAD)
		return host->error_set(err, AKS_ERROR, "docker: libcurl gave no socket");
	s->sock = sock;
	return AKS_OK;
}

static int send_all(dk_stream *s, const char *data, size_t len, const aks_call *call,
                    int64_t deadline, aks_error **err)
{
	while (len) {
		size_t n = 0;
		CURLcode cc = curl_easy_send(s->easy, data, len, &n);
		if (cc == CURLE_AGAIN) {
			int rc = wait_sock(s->prov, s->sock, POLLOUT, call, deadline, err);
			if (rc != AKS_OK)
				return rc;
			continue;
		}
		if (cc != CURLE_OK)
			return s->prov->host->error_set(err, AKS_EPROVISION,
			                                "docker: cannot send to the engine: %s",
			                                curl_easy_strerror(cc));
		data += n;
		len -= n;
	}
	return AKS_OK;
}

/* Reads until the connection closes, `want` bytes are in b, or the deadline. */
static void read_body(dk_stream *s, aks_buf *b, size_t want, int64_t deadline)
{
	char tmp[4096];
	while (b->len < want && b->len < HEAD_MAX) {
		size_t n = 0;
		CURLcode cc = curl_easy_recv(s->easy, tmp, sizeof(tmp), &n);
		if (cc == CURLE_AGAIN) {
			if (wait_sock(s->prov, s->sock, POLLIN, NULL, deadline, NULL) != AKS_OK)
				return;
			continue;
		}
		if (cc != CURLE_OK || n == 0 || aks__buf_append(b, tmp, n) != AKS_OK)
			return;
	}
}

/* Sends the upgrade request and reads the response head. AKS_OK on 101 (or a 200 that
 * streams, from engines that do not upgrade), with bytes past the head kept. */
static int handshake(dk_stream *s, const char *exec_id, const char *container, const aks_call *call,
                     aks_error **err)
{
	const aks_host_api *host = s->prov->host;
	const char *hostpart = strstr(s->prov->ep.base_url, "://");
	hostpart = hostpart ? hostpart + 3 : "localhost";
	static const char body[] = "{\"Detach\":false,\"Tty\":false}";
	char *req = NULL;
	int n = asprintf(&req,
	                 "POST " DK_API "/exec/%s/start HTTP/1.1\r\n"
	                 "Host: %s\r\n"
	                 "User-Agent: aksandbox\r\n"
	                 "Content-Type: application/json\r\n"
	                 "Connection: Upgrade\r\n"
	                 "Upgrade: tcp\r\n"
	                 "Content-Length: %zu\r\n"
	                 "\r\n%s",
	                 exec_id, hostpart, sizeof(body) - 1, body);
	if (n < 0)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	int64_t deadline = deadline_of(s->prov, call);
	int rc = send_all(s, req, (size_t)n, call, deadline, err);
	free(req);
	if (rc != AKS_OK)
		return rc;
	aks_buf head = {0};
	dk_head h;
	while (!dk_head_parse(head.data, head.len, &h)) {
		if (head.len > HEAD_MAX) {
			rc =
			    host->error_set(err, AKS_EPROVISION,
			                    "docker: the engine's answer to exec start has no end");
			goto out;
		}
		char tmp[4096];
		size_t got = 0;
		CURLcode cc = curl_easy_recv(s->easy, tmp, sizeof(tmp), &got);
		if (cc == CURLE_AGAIN) {
			rc = wait_sock(s->prov, s->sock, POLLIN, call, deadline, err);
			if (rc != AKS_OK)
				goto out;
			continue;
		}
		if (cc != CURLE_OK || got == 0) {
			rc = host->error_set(err, AKS_EPROVISION,
			                     "docker: the engine closed the exec stream of '%s' "
			                     "before answering",
			                     container);
			goto out;
		}
		if (aks__buf_append(&head, tmp, got) != AKS_OK) {
			rc = host->error_set(err, AKS_ENOMEM, "out of memory");
			goto out;
		}
	}
	if (h.status == 101 || h.status == 200) {
		s->early_len = head.len - h.len;
		if (s->early_len && !(s->early = malloc(s->early_len))) {
			rc = host->error_set(err, AKS_ENOMEM, "out of memory");
			goto out;
		}
		if (s->early_len)
			memcpy(s->early, head.data + h.len, s->early_len);
		goto out;
	}
	/* An error: its body (JSON with a message) as far as it came. */
	size_t want = h.body_len <= SIZE_MAX - h.len ? h.len + h.body_len : SIZE_MAX;
	read_body(s, &head, want, host->now_ms() + 2000);
	dk_req r = {.status = h.status};
	r.resp.data = head.data + h.len;
	r.resp.len = head.len - h.len;
	char *msg = dk_engine_message(&r);
	if (h.status == 404 && strstr(msg, "No such container"))
		rc = dk_gone(host, container, err);
	else
		rc = host->error_set(err, AKS_EPROVISION, "docker: cannot start an execution: %s",
		                     msg);
	free(msg);
out:
	aks__buf_free(&head);
	return rc;
}

/* ---- the pump ------------------------------------------------------------------------------ */

static void log_line(dk_stream *s)
{
	if (!s->line_len)
		return;
	s->line[s->line_len] = '\0';
	s->prov->host->log(AKS_LOG_WARNING, DK_NAME, "aksandbox-agent in %s: %s", s->what, s->line);
	s->line_len = 0;
}

static void on_stderr(dk_stream *s, const unsigned char *p, size_t n)
{
	pthread_mutex_lock(&s->mu);
	size_t keep = ERR_KEEP - s->err_len < n ? ERR_KEEP - s->err_len : n;
	memcpy(s->err_head + s->err_len, p, keep);
	s->err_len += keep;
	s->err_head[s->err_len] = '\0';
	pthread_mutex_unlock(&s->mu);
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '\n' || p[i] == '\r') {
			log_line(s);
			continue;
		}
		if (s->line_len == sizeof(s->line) - 1)
			log_line(s);
		s->line[s->line_len++] = (char)p[i];
	}
}

/* One frame's bytes: stdout into the down buffer (the caller of dk_demux_feed left room for
 * all it feeds), stderr to the log, anything else dropped. */
static void on_frame(void *ctx, int stream, const unsigned char *p, size_t n)
{
	dk_stream *s = ctx;
	if (stream == 2) {
		on_stderr(s, p, n);
		return;
	}
	if (stream != 1 && stream != 0)
		return;
	if (s->out_len < ERR_KEEP) {
		size_t k = ERR_KEEP - s->out_len < n ? ERR_KEEP - s->out_len : n;
		pthread_mutex_lock(&s->mu);
		memcpy(s->out_head + s->out_len, p, k);
		s->out_len += k;
		pthread_mutex_unlock(&s->mu);
	}
	memcpy(s->down + s->down_len, p, n);
	s->down_len += n;
}

static void shift(unsigned char *buf, size_t *len, size_t used)
{
	memmove(buf, buf + used, *len - used);
	*len -= used;
}

static void *pump_main(void *arg)
{
	dk_stream *s = arg;
	bool up_eof = false, sock_eof = false, wr_closed = false, down_broken = false;
	unsigned char *rx = malloc(RX_MAX);
	if (!rx)
		goto out;
	if (s->early_len) {
		dk_demux_feed(&s->frames, s->early, s->early_len); /* at most HEAD_MAX: fits */
		free(s->early);
		s->early = NULL;
		s->early_len = 0;
	}
	for (;;) {
		bool progress;
		do {
			progress = false;
			if (!up_eof && s->up_len < UP_CAP) {
				ssize_t n = read(s->up_r, s->up + s->up_len, UP_CAP - s->up_len);
				if (n > 0) {
					s->up_len += (size_t)n;
					progress = true;
				} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
					up_eof = true;
					progress = true;
				}
			}
			if (s->up_len && !sock_eof && !wr_closed) {
				size_t n = 0;
				CURLcode cc = curl_easy_send(s->easy, s->up, s->up_len, &n);
				if (cc == CURLE_OK && n) {
					shift(s->up, &s->up_len, n);
					progress = true;
				} else if (cc != CURLE_AGAIN && cc != CURLE_OK) {
					sock_eof = true; /* the connection broke */
					s->up_len = 0;
				}
			}
			if (up_eof && !s->up_len && !wr_closed) {
				wr_closed = true;
				if (s->prov->ep.tls)
					goto out; /* no half-close in TLS: closing ends stdin */
				shutdown(s->sock, SHUT_WR);
			}
			if (!sock_eof && DOWN_CAP - s->down_len >= RX_MAX) {
				size_t n = 0;
				CURLcode cc = curl_easy_recv(s->easy, rx, RX_MAX, &n);
				if (cc == CURLE_OK && n) {
					dk_demux_feed(&s->frames, rx, n);
					progress = true;
				} else if (cc != CURLE_AGAIN) {
					sock_eof = true;
					progress = true;
				}
			}
			if (s->down_len && !down_broken) {
				ssize_t n = send(s->down_w, s->down, s->down_len,
				                 MSG_NOSIGNAL | MSG_DONTWAIT);
				if (n > 0) {
					shift(s->down, &s->down_len, (size_t)n);
					progress = true;
				} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
					down_broken = true; /* the client is gone: drop output */
				}
			}
			if (down_broken)
				s->down_len = 0;
		} while (progress);
		if (sock_eof && !s->down_len)
			break;
		struct pollfd pf[4];
		nfds_t np = 0;
		pf[np++] = (struct pollfd){s->stop[0], POLLIN, 0};
		if (!up_eof && s->up_len < UP_CAP)
			pf[np++] = (struct pollfd){s->up_r, POLLIN, 0};
		short ev = 0;
		if (!sock_eof && DOWN_CAP - s->down_len >= RX_MAX)
			ev |= POLLIN;
		if (!sock_eof && s->up_len && !wr_closed)
			ev |= POLLOUT;
		if (ev)
			pf[np++] = (struct pollfd){s->sock, ev, 0};
		if (s->down_len && !down_broken)
			pf[np++] = (struct pollfd){s->down_w, POLLOUT, 0};
		if (poll(pf, np, -1) < 0 && errno != EINTR)
			break;
		if (pf[0].revents)
			break;
	}
out:
	free(rx);
	pthread_mutex_lock(&s->mu);
	log_line(s);
	pthread_mutex_unlock(&s->mu);
	/* EOF for the client: the agent is gone. Its write end breaks too, so a writer
	 * blocked on a full buffer wakes up (EPIPE) instead of waiting for nobody. */
	close_fd(&s->up_r);
	close_fd(&s->down_w);
	ssize_t w = write(s->done[1], "x", 1);
	(void)w;
	return NULL;
}

/* ---- open and close ---------------------------------------------------------------------- */

/* What the program said: its stderr, else its first output when that is not the agent's
 * (an engine that cannot run the program writes its error there), on one line. */
static void said(dk_stream *s, char *buf, size_t len)
{
	const char *src = s->err_len ? s->err_head : "";
	size_t n = s->err_len;
	if (!n && s->out_len &&
	    !(s->out_head[0] == 'A' && (s->out_len < 2 || s->out_head[1] == 'K'))) {
		src = s->out_head;
		n = s->out_len;
	}
	size_t o = 0;
	for (size_t i = 0; i < n && o + 1 < len; i++) {
		unsigned char ch = (unsigned char)src[i];
		buf[o++] = ch == '\n' || ch == '\r' || ch == '\t'
		               ? ' '
		               : (ch < 32 || ch == 127 ? '?' : (char)ch);
	}
	while (o && buf[o - 1] == ' ')
		o--;
	buf[o] = '\0';
}

void dk_stream_close(dk_stream *s, int wait_ms, char *stderr_buf, size_t stderr_len)
{
	if (!s)
		return;
	if (s->started) {
		struct pollfd pf = {s->done[0], POLLIN, 0};
		if (poll(&pf, 1, wait_ms) <= 0) {
			ssize_t w = write(s->stop[1], "x", 1);
			(void)w;
		}
		pthread_join(s->thread, NULL);
	}
	if (stderr_buf && stderr_len)
		said(s, stderr_buf, stderr_len);
	if (s->easy)
		curl_easy_cleanup(s->easy);
	close_fd(&s->up_r);
	close_fd(&s->down_w);
	for (int i = 0; i < 2; i++) {
		close_fd(&s->stop[i]);
		close_fd(&s->done[i]);
	}
	free(s->early);
	free(s->what);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

int dk_stream_open(const aks_provider_impl *prov, const char *container, const char *exec_id,
                   const aks_call *call, dk_stream **out, int *rfd, int *wfd, aks_error **err)
{
	const aks_host_api *host = prov->host;
	*out = NULL;
	*rfd = *wfd = -1;
	dk_stream *s = calloc(1, sizeof(*s));
	if (!s)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	s->prov = prov;
	s->sock = CURL_SOCKET_BAD;
	s->up_r = s->down_w = -1;
	s->stop[0] = s->stop[1] = s->done[0] = s->done[1] = -1;
	dk_demux_init(&s->frames, on_frame, s);
	pthread_mutex_init(&s->mu, NULL);
	int rc = AKS_OK;
	if (asprintf(&s->what, "container '%s'", container) < 0) {
		s->what = NULL;
		rc = host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	if (rc == AKS_OK)
		rc = connect_only(s, err);
	if (rc == AKS_OK)
		rc = handshake(s, exec_id, container, call, err);
	int up[2] = {-1, -1}, down[2] = {-1, -1};
	if (rc == AKS_OK && (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, up) < 0 ||
	                     socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, down) < 0 ||
	                     pipe2(s->stop, O_CLOEXEC) < 0 || pipe2(s->done, O_CLOEXEC) < 0))
		rc = host->error_set(err, AKS_EIO, "docker: cannot create a socket pair: %s",
		                     strerror(errno));
	if (rc == AKS_OK) {
		/* The client's ends: it writes up[0] and reads down[0]. */
		s->up_r = up[1];
		s->down_w = down[1];
		up[1] = down[1] = -1;
		set_nonblock(s->up_r);
		set_nonblock(s->down_w);
		if (pthread_create(&s->thread, NULL, pump_main, s) != 0)
			rc = host->error_set(err, AKS_EIO, "docker: cannot start a thread");
		else
			s->started = true;
	}
	if (rc != AKS_OK) {
		close_fd(&up[0]);
		close_fd(&up[1]);
		close_fd(&down[0]);
		close_fd(&down[1]);
		dk_stream_close(s, 0, NULL, 0);
		return rc;
	}
	*rfd = down[0];
	*wfd = up[0];
	*out = s;
	return AKS_OK;
}
