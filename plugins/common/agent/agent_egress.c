/*
 * plugins/common/agent/agent_egress.c - the relay behind aksandbox-agent's egress proxy (see
 * aks_egress.h). Threads:
 *   - the connection's reader hands the NET_* frames of each stream to on_net_frame, which
 *     only records them (it must not block, and must not send);
 *   - an opener thread per new stream decides (egress_decide.c), resolves and connects;
 *   - the relay thread sends every frame to the agent and moves bytes between the agent's
 *     streams and the sockets it connected, under credit both ways.
 * The lock is never held while writing to the agent: the reader may need it to drain the
 * agent, which is what lets a blocked write go on.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aks_egress.h"
#include "aks_egress_inspect.h"

#include "agent/proto.h"

/* How long the host tries to connect to a destination (every address together). */
#define CONNECT_MS 10000

enum { S_OPENING, S_RELAY, S_DEAD };

typedef struct estream {
	struct estream *next;
	struct aks_egress_relay *e;
	uint32_t id;
	int state;
	int kind;
	char host[256];
	unsigned port;
	uint8_t *head; /* AKS_AGENT_NET_HTTP: the request head, checked before connecting */
	size_t head_len;
	int64_t started;
	/* the opener's verdict */
	bool opener_running;
	int fd;
	uint32_t code; /* AKS_AGENT_NC_*: 0 while allowed */
	char why[320];
	char rule[260];
	char addr[INET6_ADDRSTRLEN + 8];
	bool refused; /* by policy: counted and logged as a refusal */
	/* agent -> destination */
	bool inspected;
	uint8_t *up;
	size_t up_len, up_off, up_cap;
	size_t head_unsent;     /* the head's bytes at the front of up: never the agent's credit */
	uint64_t agent_unacked; /* bytes the agent sent that we have not credited back */
	uint32_t up_owed;       /* of those, written to the destination */
	bool agent_eof, up_shut;
	/* destination -> agent */
	int64_t credit;
	bool down_eof;
	/* the end */
	bool agent_closed; /* NET_CLOSE from the agent: no frame back */
	bool close_sent;
	uint64_t bytes_out, bytes_in;
} estream;

struct aks_egress_relay {
	const aks_host_api *host;
	aks_agent *conn;
	aks_netrules *rules;
	aks_netmap *map;
	char provider[32];
	char sandbox[128];
	/* whom the current call is for (aks_egress_set_caller), as logfmt values */
	char principal[160];
	char conversation[160];
	char session[160];
	pthread_mutex_t mu;
	pthread_cond_t cv;
	estream *streams;
	unsigned nstreams;
	unsigned openers;
	unsigned refused;
	char recent[4][200]; /* the latest refusals, refused % 4 the next slot */
	bool stopping;
	int wake[2];  /* wakes the relay thread */
	int abort[2]; /* readable once stopping: cuts the openers' connects short */
	pthread_t relay;
	bool relay_started;
	uint8_t chunk[AKS_AGENT_CHUNK]; /* the relay's read buffer */
};

static void wake(aks_egress_relay *e)
{
	ssize_t w = write(e->wake[1], "x", 1);
	(void)w; /* a full pipe already wakes it */
}

static estream *find_stream(aks_egress_relay *e, uint32_t id)
{
	for (estream *s = e->streams; s; s = s->next)
		if (s->id == id && s->state != S_DEAD)
			return s;
	return NULL;
}

/* Marks a stream over with a code for the agent (unless the agent ended it). */
static void fail(estream *s, uint32_t code, bool refused, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail(estream *s, uint32_t code, bool refused, const char *fmt, ...)
{
	if (s->state == S_DEAD)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->why, sizeof(s->why), fmt, ap);
	va_end(ap);
	s->code = code;
	s->refused = refused;
	if (!s->opener_running)
		s->state = S_DEAD; /* else the opener's end sees the code and frees it */
}

/* ---- the reader's side: record, wake ---- */

static void *opener_main(void *arg);

static void on_open(aks_egress_relay *e, const aks_agent_frame *f)
{
	estream *s = calloc(1, sizeof(*s));
	if (!s)
		return; /* the agent's stream waits; it ends with the connection */
	s->e = e;
	s->id = f->id;
	s->fd = -1;
	s->state = S_OPENING;
	s->started = e->host->now_ms();
	s->next = e->streams;
	e->streams = s;
	e->nstreams++;
	aks_agent_tlv it;
	aks__agent_tlv_init(&it, f);
	uint16_t tag;
	const uint8_t *v;
	uint32_t n;
	bool bad = false;
	while (aks__agent_tlv_next(&it, &tag, &v, &n) > 0) {
		if (tag == AKS_AGENT_T_HOST) {
			if (n == 0 || n >= sizeof(s->host) || memchr(v, 0, n))
				bad = true;
			else
				memcpy(s->host, v, n);
		} else if (tag == AKS_AGENT_T_PORT && n == 4) {
			s->port = aks__agent_get32(v);
		} else if (tag == AKS_AGENT_T_NET_KIND && n == 4) {
			s->kind = (int)aks__agent_get32(v);
		} else if (tag == AKS_AGENT_T_DATA && !s->head && n) {
			s->head = malloc(n);
			if (s->head) {
				memcpy(s->head, v, n);
				s->head_len = n;
			}
		}
	}
	if (bad || !s->host[0] || s->kind < AKS_AGENT_NET_CONNECT ||
	    s->kind > AKS_AGENT_NET_SOCKS || (s->kind == AKS_AGENT_NET_HTTP && !s->head)) {
		fail(s, AKS_AGENT_NC_PROTOCOL, false, "a malformed NET_OPEN");
		return;
	}
	if (e->openers >= AKS_AGENT_NET_MAX || e->nstreams > 2 * AKS_AGENT_NET_MAX) {
		fail(s, AKS_AGENT_NC_LIMIT, false, "more than %d connections being opened at once",
		     AKS_AGENT_NET_MAX);
		return;
	}
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_t t;
	s->opener_running = true;
	e->openers++;
	if (pthread_create(&t, &attr, opener_main, s) != 0) {
		s->opener_running = false;
		e->openers--;
		fail(s, AKS_AGENT_NC_LIMIT, false, "cannot start a thread to connect");
	}
	pthread_attr_destroy(&attr);
}

static void append_up(estream *s, const uint8_t *p, size_t n)
{
	if (s->up_off && s->up_len + n > s->up_cap) {
		memmove(s->up, s->up + s->up_off, s->up_len - s->up_off);
		s->up_len -= s->up_off;
		s->up_off = 0;
	}
	if (s->up_len + n > s->up_cap) {
		size_t cap = s->up_cap ? s->up_cap : AKS_AGENT_CHUNK;
		while (cap < s->up_len + n)
			cap *= 2;
		uint8_t *up = realloc(s->up, cap);
		if (!up) {
			fail(s, AKS_AGENT_NC_RESET, false, "out of memory");
			return;
		}
		s->up = up;
		s->up_cap = cap;
	}
	memcpy(s->up + s->up_len, p, n);
	s->up_len += n;
}

static void on_net_frame(void *ud, const aks_agent_frame *f)
{
	aks_egress_relay *e = ud;
	pthread_mutex_lock(&e->mu);
	if (e->stopping)
		goto out;
	if (f->type == AKS_AGENT_NET_OPEN) {
		if (!find_stream(e, f->id))
			on_open(e, f);
		goto out;
	}
	estream *s = find_stream(e, f->id);
	if (!s)
		goto out; /* a stream we ended: its frames race our close */
	switch (f->type) {
	case AKS_AGENT_NET_DATA:
		if (s->state != S_RELAY)
			fail(s, AKS_AGENT_NC_PROTOCOL, false,
			     "the agent sent bytes before the stream opened");
		else if (s->agent_eof)
			fail(s, AKS_AGENT_NC_PROTOCOL, false, "the agent sent bytes after its EOF");
		else if (s->agent_unacked + f->len > AKS_AGENT_NET_WINDOW)
			fail(s, AKS_AGENT_NC_PROTOCOL, false,
			     "the agent sent %u bytes past the stream's credit (%llu "
			     "unacknowledged)",
			     f->len, (unsigned long long)s->agent_unacked);
		else {
			append_up(s, f->payload, f->len);
			s->agent_unacked += f->len;
		}
		break;
	case AKS_AGENT_NET_CREDIT: {
		aks_agent_tlv it;
		aks__agent_tlv_init(&it, f);
		uint16_t tag;
		const uint8_t *v;
		uint32_t n;
		while (aks__agent_tlv_next(&it, &tag, &v, &n) > 0)
			if (tag == AKS_AGENT_T_BYTES && n == 4 && s->credit < ((int64_t)1 << 40))
				s->credit += aks__agent_get32(v);
		break;
	}
	case AKS_AGENT_NET_EOF:
		s->agent_eof = true;
		break;
	case AKS_AGENT_NET_CLOSE:
		s->agent_closed = true;
		if (!s->opener_running)
			s->state = S_DEAD;
		break;
	}
out:
	pthread_mutex_unlock(&e->mu);
	wake(e);
}

/* ---- the opener: decide, resolve, connect ---- */

static int connect_one(aks_egress_relay *e, const struct sockaddr_storage *ss, int64_t deadline,
                       uint32_t *code, char *why, size_t whylen)
{
	socklen_t len =
	    ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		*code = AKS_AGENT_NC_UNREACHABLE;
		snprintf(why, whylen, "socket: %s", strerror(errno));
		return -1;
	}
	int err = 0;
	if (connect(fd, (const struct sockaddr *)ss, len) < 0) {
		err = errno;
		if (err == EINPROGRESS) {
			for (;;) {
				int64_t left = deadline - e->host->now_ms();
				struct pollfd pf[2] = {{fd, POLLOUT, 0}, {e->abort[0], POLLIN, 0}};
				int r = left > 0 ? poll(pf, 2, (int)left) : 0;
				if (r < 0 && errno == EINTR)
					continue;
				if (r <= 0 || pf[1].revents) {
					err = ETIMEDOUT;
					break;
				}
				socklen_t elen = sizeof(err);
				getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen);
				break;
			}
		}
	}
	if (err) {
		close(fd);
		*code = err == ETIMEDOUT      ? AKS_AGENT_NC_TIMEOUT
		        : err == ECONNREFUSED ? AKS_AGENT_NC_REFUSED
		                              : AKS_AGENT_NC_UNREACHABLE;
		snprintf(why, whylen, "%s", strerror(err));
		return -1;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static const char *text_of(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	const void *p = ss->ss_family == AF_INET6
	                    ? (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr
	                    : (const void *)&((const struct sockaddr_in *)ss)->sin_addr;
	if (!inet_ntop(ss->ss_family, p, buf, (socklen_t)len))
		snprintf(buf, len, "?");
	return buf;
}

static void *opener_main(void *arg)
{
	estream *s = arg;
	aks_egress_relay *e = s->e;
	struct sockaddr_storage addrs[16];
	size_t n = 0;
	char why[320] = "", rule[260] = "", addr[INET6_ADDRSTRLEN] = "";
	uint32_t code =
	    aks__egress_decide(e->rules, e->map, s->host, s->port, s->kind, s->head, s->head_len,
	                       addrs, 16, &n, rule, sizeof(rule), why, sizeof(why));
	int fd = -1;
	if (code == 0) {
		int64_t deadline = e->host->now_ms() + CONNECT_MS;
		char last[200] = "";
		for (size_t i = 0; i < n && fd < 0; i++) {
			fd = connect_one(e, &addrs[i], deadline, &code, last, sizeof(last));
			text_of(&addrs[i], addr, sizeof(addr));
		}
		if (fd < 0)
			snprintf(why, sizeof(why), "cannot connect to %s port %u (%s): %s", s->host,
			         s->port, addr, last);
		else
			code = 0;
	}
	pthread_mutex_lock(&e->mu);
	s->opener_running = false;
	e->openers--;
	snprintf(s->rule, sizeof(s->rule), "%s", rule);
	snprintf(s->addr, sizeof(s->addr), "%s", addr);
	if (s->state == S_DEAD || s->agent_closed || e->stopping) {
		if (fd >= 0)
			close(fd);
		s->state = S_DEAD;
	} else if (code) {
		s->refused = code == AKS_AGENT_NC_POLICY;
		s->code = code;
		snprintf(s->why, sizeof(s->why), "%s", why);
		s->state = S_DEAD;
	} else if (s->code) {
		close(fd); /* failed while opening (a protocol error) */
		s->state = S_DEAD;
	} else {
		s->fd = fd;
	}
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
	wake(e);
	return NULL;
}

/* ---- the relay thread ---- */

static void put_close(aks_agent_buf *b, estream *s)
{
	if (s->agent_closed || s->close_sent)
		return;
	size_t f = aks__agent_frame_begin(b, AKS_AGENT_NET_CLOSE, AKS_AGENT_FLAG_END, s->id);
	aks__agent_put_u32(b, AKS_AGENT_T_NET_CODE, s->code ? s->code : AKS_AGENT_NC_RESET);
	if (s->why[0])
		aks__agent_put_str(b, AKS_AGENT_T_MESSAGE, s->why);
	aks__agent_frame_end(b, f);
	s->close_sent = true;
}

/* One logfmt line per connection, when it ends. */
static void audit(aks_egress_relay *e, const estream *s)
{
	bool allowed = !s->refused && s->code == 0;
	bool refused = s->refused;
	char dest[300];
	snprintf(dest, sizeof(dest), strchr(s->host, ':') ? "[%s]:%u" : "%s:%u", s->host, s->port);
	e->host->log(refused ? AKS_LOG_WARNING : AKS_LOG_INFO, e->provider,
	             "egress %s sandbox=%s session=%s conversation=%s principal=%s dest=%s addr=%s "
	             "rule=\"%s\" bytes_out=%llu bytes_in=%llu ms=%lld%s%s%s",
	             refused   ? "refused"
	             : allowed ? "allowed"
	                       : "failed",
	             e->sandbox, e->session, e->conversation, e->principal, dest,
	             s->addr[0] ? s->addr : "-", s->rule, (unsigned long long)s->bytes_out,
	             (unsigned long long)s->bytes_in, (long long)(e->host->now_ms() - s->started),
	             s->why[0] ? " reason=\"" : "", s->why, s->why[0] ? "\"" : "");
}

static void free_stream(estream *s)
{
	if (s->fd >= 0)
		close(s->fd);
	free(s->head);
	free(s->up);
	free(s);
}

/* What a stream needs done before the next poll; frames go to b. Called with mu held. */
static void step(aks_egress_relay *e, estream *s, aks_agent_buf *b)
{
	if (s->state == S_OPENING && !s->opener_running && s->fd >= 0) {
		s->state = S_RELAY;
		s->credit = AKS_AGENT_NET_WINDOW;
		size_t f = aks__agent_frame_begin(b, AKS_AGENT_NET_OPENED, 0, s->id);
		aks__agent_put_str(b, AKS_AGENT_T_ADDRESS, s->addr);
		aks__agent_frame_end(b, f);
		if (s->head) {
			/* Checked before connecting: it goes first, as it is. */
			append_up(s, s->head, s->head_len);
			s->head_unsent = s->head_len;
			s->inspected = true;
		}
	}
	if (s->state != S_RELAY)
		return;
	if (!s->inspected && (s->up_len > s->up_off || s->agent_eof)) {
		char why[320];
		int r =
		    aks__egress_first_bytes(s->host, s->port, s->up + s->up_off,
		                            s->up_len - s->up_off, s->agent_eof, why, sizeof(why));
		if (r < 0) {
			fail(s, AKS_AGENT_NC_POLICY, true, "%s", why);
			return;
		}
		s->inspected = r > 0;
	}
	if (s->inspected && s->agent_eof && s->up_off == s->up_len && !s->up_shut) {
		shutdown(s->fd, SHUT_WR);
		s->up_shut = true;
	}
	if (s->up_owed && (s->up_owed >= AKS_AGENT_NET_WINDOW / 4 || s->up_off == s->up_len)) {
		size_t f = aks__agent_frame_begin(b, AKS_AGENT_NET_CREDIT, 0, s->id);
		aks__agent_put_u32(b, AKS_AGENT_T_BYTES, s->up_owed);
		aks__agent_frame_end(b, f);
		s->agent_unacked -= s->up_owed;
		s->up_owed = 0;
	}
}

/* Moves bytes for the socket's events; frames go to b. Called with mu held. */
static void pump(aks_egress_relay *e, estream *s, short revents, aks_agent_buf *b)
{
	if ((revents & POLLOUT) && s->inspected) {
		while (s->up_off < s->up_len) {
			ssize_t w =
			    send(s->fd, s->up + s->up_off, s->up_len - s->up_off, MSG_NOSIGNAL);
			if (w < 0 && (errno == EAGAIN || errno == EINTR))
				break;
			if (w <= 0) {
				fail(s, AKS_AGENT_NC_RESET, false,
				     "the destination closed the connection");
				return;
			}
			size_t head = (size_t)w < s->head_unsent ? (size_t)w : s->head_unsent;
			s->head_unsent -= head;
			s->up_off += (size_t)w;
			s->up_owed += (uint32_t)((size_t)w - head);
			s->bytes_out += (uint64_t)w;
		}
		if (s->up_off == s->up_len)
			s->up_off = s->up_len = 0;
	}
	/* What the destination has, up to the credit: several frames go out in one write. */
	for (int i = 0;
	     i < 8 && (revents & (POLLIN | POLLHUP | POLLERR)) && !s->down_eof && s->credit > 0;
	     i++) {
		uint8_t *chunk = e->chunk;
		size_t want = s->credit < AKS_AGENT_CHUNK ? (size_t)s->credit : AKS_AGENT_CHUNK;
		ssize_t r = recv(s->fd, chunk, want, 0);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (r < 0) {
			fail(s, AKS_AGENT_NC_RESET, false, "the destination reset the connection");
			return;
		}
		if (r == 0) {
			s->down_eof = true;
			size_t f = aks__agent_frame_begin(b, AKS_AGENT_NET_EOF, 0, s->id);
			aks__agent_frame_end(b, f);
			return;
		}
		aks__agent_frame_data(b, AKS_AGENT_NET_DATA, 0, s->id, chunk, (size_t)r);
		s->credit -= r;
		s->bytes_in += (uint64_t)r;
	}
}

static void *relay_main(void *arg)
{
	aks_egress_relay *e = arg;
	struct pollfd pfd[1 + 2 * AKS_AGENT_NET_MAX + 8];
	estream *who[sizeof(pfd) / sizeof(pfd[0])];
	aks_agent_buf b = {0};
	for (;;) {
		pthread_mutex_lock(&e->mu);
		if (e->stopping) {
			pthread_mutex_unlock(&e->mu);
			break;
		}
		/* Streams to act on, then the dead ones: their close, their audit line. */
		estream **pp = &e->streams;
		while (*pp) {
			estream *s = *pp;
			step(e, s, &b);
			if (s->state == S_DEAD && !s->opener_running) {
				put_close(&b, s);
				if (s->refused) {
					snprintf(e->recent[e->refused % 4], sizeof(e->recent[0]),
					         "%.80s:%u (%.100s)", s->host, s->port, s->why);
					e->refused++;
				}
				audit(e, s);
				*pp = s->next;
				e->nstreams--;
				free_stream(s);
				continue;
			}
			pp = &s->next;
		}
		nfds_t n = 0;
		pfd[n] = (struct pollfd){e->wake[0], POLLIN, 0};
		who[n++] = NULL;
		for (estream *s = e->streams; s && n < sizeof(pfd) / sizeof(pfd[0]); s = s->next) {
			if (s->state != S_RELAY)
				continue;
			short ev = 0;
			if (!s->down_eof && s->credit > 0)
				ev |= POLLIN;
			if (s->inspected && s->up_off < s->up_len)
				ev |= POLLOUT;
			if (!ev)
				continue;
			pfd[n] = (struct pollfd){s->fd, ev, 0};
			who[n++] = s;
		}
		pthread_mutex_unlock(&e->mu);
		if (aks__agent_buf_pending(&b)) {
			if (aks__agent_send_frames(e->conn, &b, NULL) != AKS_OK) {
				/* The agent is gone: nothing more to relay. */
				aks__agent_buf_free(&b);
				memset(&b, 0, sizeof(b));
				pthread_mutex_lock(&e->mu);
				for (estream *s = e->streams; s; s = s->next)
					if (s->state != S_DEAD) {
						s->agent_closed = true;
						if (!s->opener_running)
							s->state = S_DEAD;
					}
				pthread_mutex_unlock(&e->mu);
				continue;
			}
			aks__agent_buf_free(&b);
			memset(&b, 0, sizeof(b));
			continue; /* sending took time: look again before sleeping */
		}
		if (poll(pfd, n, -1) < 0 && errno != EINTR)
			break;
		if (pfd[0].revents) {
			char drain[64];
			while (read(e->wake[0], drain, sizeof(drain)) > 0)
				;
		}
		pthread_mutex_lock(&e->mu);
		for (nfds_t i = 1; i < n; i++)
			if (pfd[i].revents && who[i]->state == S_RELAY)
				pump(e, who[i], pfd[i].revents, &b);
		pthread_mutex_unlock(&e->mu);
	}
	aks__agent_buf_free(&b);
	return NULL;
}

/* ---- the handle ---- */

int aks_egress_start(const aks_host_api *host, aks_agent *conn, const aks_egress_opts *o,
                     const aks_call *call, aks_egress_relay **out, aks_error **err)
{
	*out = NULL;
	if (!(aks__agent_features(conn) & AKS_AGENT_FEATURE_EGRESS))
		return host->error_set(err, AKS_EPOLICY,
		                       "%s: this aksandbox-agent has no egress proxy (an older "
		                       "build?), so network_allow cannot be enforced",
		                       o->provider);
	aks_egress_relay *e = calloc(1, sizeof(*e));
	if (!e)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	e->host = host;
	e->conn = conn;
	e->wake[0] = e->wake[1] = e->abort[0] = e->abort[1] = -1;
	snprintf(e->provider, sizeof(e->provider), "%s", o->provider ? o->provider : "egress");
	snprintf(e->sandbox, sizeof(e->sandbox), "%s", o->sandbox_id ? o->sandbox_id : "-");
	pthread_mutex_init(&e->mu, NULL);
	pthread_cond_init(&e->cv, NULL);
	aks_egress_set_caller(e, call);
	char msg[300];
	size_t bad = 0;
	int rc = AKS_OK;
	if (aks_netrules_parse(o->allow, &e->rules, &bad, msg, sizeof(msg)) < 0) {
		rc = host->error_set(err, AKS_ECONFIG, "%s: network_allow: %s", e->provider, msg);
		goto fail;
	}
	const char *map = getenv("AKS_TEST_EGRESS_RESOLVE");
	if (map && *map && aks_netmap_parse(map, &e->map, msg, sizeof(msg)) < 0) {
		rc = host->error_set(err, AKS_ECONFIG, "AKS_TEST_EGRESS_RESOLVE: %s", msg);
		goto fail;
	}
	if (pipe2(e->wake, O_CLOEXEC | O_NONBLOCK) < 0 || pipe2(e->abort, O_CLOEXEC) < 0) {
		rc = host->error_set(err, AKS_EIO, "cannot create a pipe: %s", strerror(errno));
		goto fail;
	}
	aks__agent_set_net_handler(conn, on_net_frame, e);
	unsigned port = 0;
	rc = aks__agent_net_listen(conn, AKS_AGENT_NET_WINDOW, call, &port, err);
	if (rc != AKS_OK) {
		aks__agent_set_net_handler(conn, NULL, NULL);
		goto fail;
	}
	if (pthread_create(&e->relay, NULL, relay_main, e) != 0) {
		aks__agent_set_net_handler(conn, NULL, NULL);
		rc = host->error_set(err, AKS_EIO, "cannot start the egress relay thread");
		goto fail;
	}
	e->relay_started = true;
	host->log(AKS_LOG_DEBUG, e->provider,
	          "egress proxy of sandbox %s on 127.0.0.1:%u inside, %zu network_allow entries",
	          e->sandbox, port, aks_netrules_count(e->rules));
	*out = e;
	return AKS_OK;
fail:
	aks_egress_stop(e);
	return rc;
}

void aks_egress_stop(aks_egress_relay *e)
{
	if (!e)
		return;
	if (e->conn)
		aks__agent_set_net_handler(e->conn, NULL, NULL);
	pthread_mutex_lock(&e->mu);
	e->stopping = true;
	pthread_mutex_unlock(&e->mu);
	if (e->abort[1] >= 0) {
		close(e->abort[1]); /* the openers' connects end at once */
		e->abort[1] = -1;
	}
	if (e->wake[1] >= 0)
		wake(e);
	if (e->relay_started)
		pthread_join(e->relay, NULL);
	pthread_mutex_lock(&e->mu);
	while (e->openers > 0)
		pthread_cond_wait(&e->cv, &e->mu);
	pthread_mutex_unlock(&e->mu);
	while (e->streams) {
		estream *s = e->streams;
		e->streams = s->next;
		if (s->state != S_DEAD && !s->code)
			snprintf(s->why, sizeof(s->why), "the sandbox handle closed");
		audit(e, s);
		free_stream(s);
	}
	for (int i = 0; i < 2; i++) {
		if (e->wake[i] >= 0)
			close(e->wake[i]);
		if (e->abort[i] >= 0)
			close(e->abort[i]);
	}
	aks_netrules_free(e->rules);
	aks_netmap_free(e->map);
	pthread_mutex_destroy(&e->mu);
	pthread_cond_destroy(&e->cv);
	free(e);
}

unsigned aks_egress_refused(const aks_egress_relay *e)
{
	aks_egress_relay *m = (aks_egress_relay *)e;
	pthread_mutex_lock(&m->mu);
	unsigned n = m->refused;
	pthread_mutex_unlock(&m->mu);
	return n;
}

unsigned aks_egress_refused_since(const aks_egress_relay *e, unsigned since, char *buf, size_t len)
{
	aks_egress_relay *m = (aks_egress_relay *)e;
	pthread_mutex_lock(&m->mu);
	unsigned n = m->refused;
	size_t used = 0;
	buf[0] = '\0';
	unsigned first = n - since > 4 ? n - 4 : since;
	for (unsigned i = first; i < n && used < len; i++) {
		int k = snprintf(buf + used, len - used, "%s%s", i > first ? "; " : "",
		                 m->recent[i % 4]);
		used += k > 0 ? (size_t)k : 0;
	}
	pthread_mutex_unlock(&m->mu);
	return n;
}

/* v as one logfmt value in out: "-" for none, quoted when it holds a space, '=' or '"', and
 * a '"' in it written as '\'', so that a principal or conversation id cannot forge a field of
 * the line. (The host's logger escapes control characters and backslashes itself.) */
static void logfmt_value(char *out, size_t len, const char *v)
{
	if (!v || !*v) {
		snprintf(out, len, "-");
		return;
	}
	bool quote = strpbrk(v, " =\"") != NULL;
	size_t n = 0;
	if (quote)
		out[n++] = '"';
	for (const char *p = v; *p && n + 2 < len; p++)
		out[n++] = *p == '"' ? '\'' : *p;
	if (quote)
		out[n++] = '"';
	out[n] = '\0';
}

static const char *context_of(const aks_call *call, const char *key)
{
	for (const char *const *kv = call ? call->context : NULL; kv && kv[0] && kv[1]; kv += 2)
		if (strcmp(kv[0], key) == 0)
			return kv[1];
	return NULL;
}

void aks_egress_set_caller(aks_egress_relay *e, const aks_call *call)
{
	const char *principal =
	    call && call->principal && call->principal->subject ? call->principal->subject : NULL;
	pthread_mutex_lock(&e->mu);
	logfmt_value(e->principal, sizeof(e->principal), principal);
	logfmt_value(e->conversation, sizeof(e->conversation),
	             context_of(call, AKS_CONTEXT_CONVERSATION));
	logfmt_value(e->session, sizeof(e->session), context_of(call, AKS_CONTEXT_SESSION));
	pthread_mutex_unlock(&e->mu);
}
