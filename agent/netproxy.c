/*
 * agent/netproxy.c - the egress proxy inside the sandbox (docs/agent-protocol.md, "Egress").
 *
 * The sandbox has no network of its own. On NET_LISTEN the agent listens on 127.0.0.1 (an
 * ephemeral port, so several agents of one sandbox never collide) as an HTTP proxy (CONNECT,
 * and plain requests in absolute form) and a SOCKS5 proxy on the same port, told apart by
 * the first byte, and puts HTTP_PROXY and friends into the environment of everything it
 * runs. Each connection a program makes becomes a stream to the host (NET_OPEN); the host
 * checks the destination against the policy, resolves and connects, and the agent relays.
 * Nothing here decides anything: a subverted agent gains nothing the host would not allow.
 *
 * Memory is bounded: at most AKS_AGENT_NET_MAX streams (further connections are closed at
 * once), each holding at most its request head (16 KiB) and the host's unacknowledged bytes
 * (the window NET_LISTEN set); reading from programs stops, as for their output, while the frames
 * waiting for the host pass AGENT_OUT_SOFT.
 */
#include "agent.h"
#include "proxy_request.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A program that connects must finish its request head (or SOCKS handshake) by then. */
#define NET_HEAD_MS 30000

/* NC_DRAIN: the proxy's last answer (or the host's last bytes) go out; NC_LINGER: then what
 * the program still sends is read and dropped for a moment, so closing does not reset the
 * connection before the program has read the answer. */
enum { NC_FREE = 0, NC_HEAD, NC_SOCKS_REQUEST, NC_WAIT, NC_RELAY, NC_DRAIN, NC_LINGER };
#define NET_LINGER_MS 2000

typedef struct netconn {
	int state;
	int fd;
	uint32_t id;
	int kind;
	int64_t deadline; /* NC_HEAD, NC_SOCKS_REQUEST, NC_LINGER */
	uint8_t *in;      /* the head so far; after it, the bytes held until NET_OPENED */
	size_t in_len;
	char reply[640]; /* the proxy's own answer, written before any byte of the host's */
	size_t reply_len, reply_off;
	uint8_t *q; /* the host's bytes for the program */
	size_t q_len, q_off, q_cap;
	int64_t credit;         /* bytes the host still accepts from us */
	uint64_t host_unacked;  /* bytes the host sent that we have not credited back */
	uint32_t owed;          /* of those, written to the program: credit to send */
	bool rd_eof;            /* the program finished sending (NET_EOF sent) */
	bool host_eof, wr_shut; /* the host finished; the program's side shut after the queue */
	conn *host;             /* the connection the stream was opened toward (NC_WAIT on) */
} netconn;

static char *net_env[16];

/* ---- helpers ---- */

static netconn *find_conn(agent *a, uint32_t id)
{
	if (!a->net || !(id & AKS_AGENT_NET_ID))
		return NULL;
	for (int i = 0; i < AKS_AGENT_NET_MAX; i++)
		if (a->net[i].state >= NC_HEAD && a->net[i].state <= NC_RELAY && a->net[i].id == id)
			return &a->net[i];
	return NULL;
}

static void free_conn(netconn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->in);
	free(c->q);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}

/* Closes with a reset, so the program sees the connection fail, not end. */
static void reset_conn(netconn *c)
{
	struct linger lg = {1, 0};
	if (c->fd >= 0)
		setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	free_conn(c);
}

static void send_close(netconn *c, uint32_t code, const char *msg)
{
	size_t s =
	    aks__agent_frame_begin(&c->host->out, AKS_AGENT_NET_CLOSE, AKS_AGENT_FLAG_END, c->id);
	aks__agent_put_u32(&c->host->out, AKS_AGENT_T_NET_CODE, code);
	if (msg)
		aks__agent_put_str(&c->host->out, AKS_AGENT_T_MESSAGE, msg);
	aks__agent_frame_end(&c->host->out, s);
}

/* Appends to the proxy's own answer (a SOCKS reply may follow the greeting's). */
static void set_reply(netconn *c, const void *data, size_t n)
{
	size_t pending = c->reply_len - c->reply_off;
	memmove(c->reply, c->reply + c->reply_off, pending);
	if (n > sizeof(c->reply) - pending)
		n = sizeof(c->reply) - pending;
	memcpy(c->reply + pending, data, n);
	c->reply_len = pending + n;
	c->reply_off = 0;
}

static const char *reason_phrase(int status)
{
	switch (status) {
	case 400:
		return "Bad Request";
	case 403:
		return "Forbidden";
	case 405:
		return "Method Not Allowed";
	case 431:
		return "Request Header Fields Too Large";
	case 501:
		return "Not Implemented";
	case 503:
		return "Service Unavailable";
	case 504:
		return "Gateway Timeout";
	default:
		return "Bad Gateway";
	}
}

/* An HTTP answer of the proxy's own, then the connection ends (NC_DRAIN). */
static void http_answer(netconn *c, int status, const char *msg)
{
	char body[420];
	int blen = snprintf(body, sizeof(body), "aksandbox egress proxy: %s\n", msg);
	if (blen < 0 || (size_t)blen >= sizeof(body))
		blen = (int)sizeof(body) - 1;
	for (int i = 0; i < blen - 1; i++)
		if ((unsigned char)body[i] < ' ' || (unsigned char)body[i] == 0x7f)
			body[i] = ' ';
	char head[sizeof(c->reply)];
	int n = snprintf(head, sizeof(head),
	                 "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
	                 "Connection: close\r\nContent-Length: %d\r\n\r\n%.*s",
	                 status, reason_phrase(status), blen, blen, body);
	set_reply(c, head, n < 0 ? 0 : (size_t)n);
	c->state = NC_DRAIN;
}

static void socks_answer(netconn *c, uint8_t code)
{
	const uint8_t r[10] = {5, code, 0, 1, 0, 0, 0, 0, 0, 0};
	set_reply(c, r, sizeof(r));
	c->state = code == 0 ? c->state : NC_DRAIN;
}

static int http_status_of(uint32_t code)
{
	switch (code) {
	case AKS_AGENT_NC_POLICY:
		return 403;
	case AKS_AGENT_NC_TIMEOUT:
		return 504;
	case AKS_AGENT_NC_LIMIT:
		return 503;
	default:
		return 502;
	}
}

static uint8_t socks_code_of(uint32_t code)
{
	switch (code) {
	case AKS_AGENT_NC_POLICY:
		return 2; /* not allowed by ruleset */
	case AKS_AGENT_NC_RESOLVE:
	case AKS_AGENT_NC_UNREACHABLE:
		return 4; /* host unreachable */
	case AKS_AGENT_NC_REFUSED:
		return 5;
	case AKS_AGENT_NC_TIMEOUT:
		return 6;
	default:
		return 1;
	}
}

static void drop_in(netconn *c, size_t n)
{
	memmove(c->in, c->in + n, c->in_len - n);
	c->in_len -= n;
}

/* ---- listening ---- */

static void put_env(size_t *n, const char *name, const char *value)
{
	char buf[96];
	snprintf(buf, sizeof(buf), "%s=%s", name, value);
	free(net_env[*n]);
	net_env[*n] = strdup(buf);
	if (net_env[*n]) {
		setenv(name, value, 1); /* for what inherits the agent's environment */
		(*n)++;
	}
}

void netproxy_listen(conn *hc, const aks_agent_frame *f)
{
	agent *a = hc->ag;
	if (a->net_fd < 0) {
		/* The window both sides hold to: the host's, within bounds. */
		uint32_t window = AKS_AGENT_NET_WINDOW;
		agent_get_u32(f, AKS_AGENT_T_WINDOW, &window);
		a->net_window = window < AKS_AGENT_CHUNK ? AKS_AGENT_CHUNK
		                : window > 16u << 20     ? 16u << 20
		                                         : window;
		if (!a->net) {
			a->net = calloc(AKS_AGENT_NET_MAX, sizeof(*a->net));
			for (int i = 0; a->net && i < AKS_AGENT_NET_MAX; i++)
				a->net[i].fd = -1;
		}
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		struct sockaddr_in sin = {.sin_family = AF_INET,
		                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		socklen_t len = sizeof(sin);
		if (!a->net || fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
		    listen(fd, 128) < 0 || getsockname(fd, (struct sockaddr *)&sin, &len) < 0) {
			int e = a->net ? errno : ENOMEM;
			if (fd >= 0)
				close(fd);
			conn_send_error(hc, f->id, f->type, AKS_AGENT_E_IO,
			                "cannot listen on 127.0.0.1: %s", strerror(e));
			return;
		}
		a->net_fd = agent_track_fd(fd, true);
		a->net_port = ntohs(sin.sin_port);
		char http[48], socks[48];
		snprintf(http, sizeof(http), "http://127.0.0.1:%u", a->net_port);
		snprintf(socks, sizeof(socks), "socks5h://127.0.0.1:%u", a->net_port);
		size_t n = 0;
		static const char *const http_vars[] = {
		    "http_proxy",  "HTTP_PROXY",       "https_proxy",
		    "HTTPS_PROXY", "npm_config_proxy", "npm_config_https_proxy",
		    NULL};
		for (size_t i = 0; http_vars[i]; i++)
			put_env(&n, http_vars[i], http);
		put_env(&n, "all_proxy", socks);
		put_env(&n, "ALL_PROXY", socks);
		put_env(&n, "no_proxy", "localhost,127.0.0.1,::1");
		put_env(&n, "NO_PROXY", "localhost,127.0.0.1,::1");
		net_env[n] = NULL;
	}
	/* New streams go to the host that asked last (a resident agent's latest host); the
	 * port stays, so what runs keeps its proxy settings across hosts. */
	hc->net_listened = true;
	a->net_host = hc;
	size_t s =
	    aks__agent_frame_begin(&hc->out, AKS_AGENT_NET_LISTENING, AKS_AGENT_FLAG_END, f->id);
	aks__agent_put_u32(&hc->out, AKS_AGENT_T_PORT, a->net_port);
	aks__agent_put_u32(&hc->out, AKS_AGENT_T_WINDOW, a->net_window);
	aks__agent_frame_end(&hc->out, s);
}

char *const *netproxy_env(const agent *a)
{
	return a->net_fd >= 0 ? net_env : NULL;
}

static void accept_conns(agent *a, int64_t now)
{
	for (;;) {
		int fd = accept4(a->net_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		netconn *c = NULL;
		for (int i = 0; i < AKS_AGENT_NET_MAX && !c; i++)
			if (a->net[i].state == NC_FREE)
				c = &a->net[i];
		if (!c) {
			/* Refused at once, never a hang: the program sees a reset. */
			struct linger lg = {1, 0};
			setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
			close(fd);
			continue;
		}
		memset(c, 0, sizeof(*c));
		c->fd = agent_track_fd(fd, true);
		c->state = NC_HEAD;
		c->deadline = now + NET_HEAD_MS;
		c->in = malloc(PROXY_HEAD_MAX);
		if (!c->in)
			free_conn(c);
	}
}

/* ---- a program's request ---- */

static void open_stream(agent *a, netconn *c, const proxy_request *r)
{
	if (!a->net_host) {
		/* A resident agent between hosts: nobody can decide, so nothing goes out. */
		if (r->kind == AKS_AGENT_NET_SOCKS)
			socks_answer(c, 1);
		else
			http_answer(c, 503, "no host is connected to decide this connection");
		return;
	}
	c->host = a->net_host;
	c->kind = r->kind;
	c->id = AKS_AGENT_NET_ID | (a->net_next++ & ~AKS_AGENT_NET_ID);
	size_t s = aks__agent_frame_begin(&c->host->out, AKS_AGENT_NET_OPEN, 0, c->id);
	aks__agent_put_str(&c->host->out, AKS_AGENT_T_HOST, r->host);
	aks__agent_put_u32(&c->host->out, AKS_AGENT_T_PORT, r->port);
	aks__agent_put_u32(&c->host->out, AKS_AGENT_T_NET_KIND, (uint32_t)r->kind);
	if (r->head)
		aks__agent_put_bytes(&c->host->out, AKS_AGENT_T_DATA, r->head, r->head_len);
	aks__agent_frame_end(&c->host->out, s);
	drop_in(c, r->consumed);
	c->state = NC_WAIT;
}

static void parse_head(agent *a, netconn *c)
{
	proxy_request r;
	memset(&r, 0, sizeof(r));
	int rc;
	if (c->state == NC_HEAD && c->in_len && c->in[0] == 5) {
		size_t used = 0;
		rc = proxy_socks_greeting(c->in, c->in_len, &used);
		if (rc == PROXY_MORE)
			return;
		if (rc == PROXY_BAD) {
			const uint8_t no[2] = {5, 0xff};
			set_reply(c, no, 2);
			c->state = NC_DRAIN;
			return;
		}
		const uint8_t yes[2] = {5, 0};
		set_reply(c, yes, 2);
		drop_in(c, used);
		c->state = NC_SOCKS_REQUEST;
	}
	if (c->state == NC_SOCKS_REQUEST) {
		rc = proxy_socks_request(c->in, c->in_len, &r);
		if (rc == PROXY_BAD) {
			socks_answer(c, (uint8_t)r.status);
		} else if (rc == PROXY_OK) {
			open_stream(a, c, &r);
		}
		return;
	}
	if (c->state != NC_HEAD)
		return;
	rc = proxy_http_parse(c->in, c->in_len, &r);
	if (rc == PROXY_BAD)
		http_answer(c, r.status, r.why);
	else if (rc == PROXY_OK)
		open_stream(a, c, &r);
	proxy_request_clear(&r);
}

/* ---- frames from the host ---- */

static void get_message(const aks_agent_frame *f, char *buf, size_t cap)
{
	aks_agent_tlv it;
	aks__agent_tlv_init(&it, f);
	uint16_t tag;
	const uint8_t *v;
	uint32_t n;
	buf[0] = '\0';
	while (aks__agent_tlv_next(&it, &tag, &v, &n) > 0)
		if (tag == AKS_AGENT_T_MESSAGE) {
			size_t k = n < cap - 1 ? n : cap - 1;
			memcpy(buf, v, k);
			buf[k] = '\0';
		}
}

static void send_data(agent *a, netconn *c, const void *data, size_t n)
{
	aks__agent_frame_data(&c->host->out, AKS_AGENT_NET_DATA, 0, c->id, data, n);
	c->credit -= (int64_t)n;
}

static void on_opened(agent *a, netconn *c)
{
	if (c->state != NC_WAIT) {
		send_close(c, AKS_AGENT_NC_PROTOCOL, "NET_OPENED for a stream already open");
		reset_conn(c);
		return;
	}
	c->state = NC_RELAY;
	c->credit = a->net_window;
	if (c->kind == AKS_AGENT_NET_CONNECT) {
		static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
		set_reply(c, ok, sizeof(ok) - 1);
	} else if (c->kind == AKS_AGENT_NET_SOCKS) {
		socks_answer(c, 0);
	}
	/* What the program sent after its head (a body; an eager ClientHello). */
	if (c->in_len)
		send_data(a, c, c->in, c->in_len);
	free(c->in);
	c->in = NULL;
	c->in_len = 0;
}

static void on_data(agent *a, netconn *c, const aks_agent_frame *f)
{
	if (c->state != NC_RELAY || c->host_eof || c->host_unacked + f->len > a->net_window) {
		send_close(c, AKS_AGENT_NC_PROTOCOL,
		           c->state != NC_RELAY ? "NET_DATA before NET_OPENED"
		                                : "NET_DATA past the stream's credit or its EOF");
		reset_conn(c);
		return;
	}
	if (c->q_off && c->q_len + f->len > c->q_cap) {
		memmove(c->q, c->q + c->q_off, c->q_len - c->q_off);
		c->q_len -= c->q_off;
		c->q_off = 0;
	}
	if (c->q_len + f->len > c->q_cap) {
		size_t cap = c->q_cap ? c->q_cap : AKS_AGENT_CHUNK;
		while (cap < c->q_len + f->len)
			cap *= 2;
		uint8_t *q = realloc(c->q, cap);
		if (!q) {
			send_close(c, AKS_AGENT_NC_RESET, "the agent is out of memory");
			reset_conn(c);
			return;
		}
		c->q = q;
		c->q_cap = cap;
	}
	memcpy(c->q + c->q_len, f->payload, f->len);
	c->q_len += f->len;
	c->host_unacked += f->len;
}

void netproxy_frame(conn *hc, const aks_agent_frame *f)
{
	agent *a = hc->ag;
	netconn *c = find_conn(a, f->id);
	if (!c || c->host != hc)
		return; /* a stream that just ended on our side: its frames race the close */
	uint32_t v = 0;
	switch (f->type) {
	case AKS_AGENT_NET_OPENED:
		on_opened(a, c);
		return;
	case AKS_AGENT_NET_DATA:
		on_data(a, c, f);
		return;
	case AKS_AGENT_NET_CREDIT:
		if (agent_get_u32(f, AKS_AGENT_T_BYTES, &v) && c->credit < ((int64_t)1 << 40))
			c->credit += v;
		return;
	case AKS_AGENT_NET_EOF:
		c->host_eof = true;
		return;
	case AKS_AGENT_NET_CLOSE: {
		char msg[400];
		get_message(f, msg, sizeof(msg));
		uint32_t code = AKS_AGENT_NC_RESET;
		agent_get_u32(f, AKS_AGENT_T_NET_CODE, &code);
		if (c->state == NC_WAIT) {
			/* A refusal: the program gets the proxy's answer saying why. */
			if (c->kind == AKS_AGENT_NET_SOCKS)
				socks_answer(c, socks_code_of(code));
			else
				http_answer(c, http_status_of(code),
				            msg[0] ? msg : "the connection failed");
		} else if (code == AKS_AGENT_NC_DONE) {
			c->host_eof = true;
			c->state = NC_DRAIN; /* what the host sent still reaches the program */
		} else {
			reset_conn(c);
		}
		return;
	}
	}
}

/* ---- the loop's part ---- */

size_t netproxy_add_fds(agent *a, struct pollfd *pfd, size_t max, int64_t now, int *timeout)
{
	if (a->net_fd < 0)
		return 0;
	size_t n = 0;
	if (n < max) {
		pfd[n].fd = a->net_fd;
		pfd[n].events = POLLIN;
		pfd[n].revents = 0;
		n++;
	}
	for (int i = 0; i < AKS_AGENT_NET_MAX && n < max; i++) {
		netconn *c = &a->net[i];
		short ev = 0;
		switch (c->state) {
		case NC_HEAD:
		case NC_SOCKS_REQUEST:
			if (now >= c->deadline) {
				free_conn(c); /* never said what it wanted */
				continue;
			}
			if (timeout && (*timeout < 0 || c->deadline - now < *timeout))
				*timeout = (int)(c->deadline - now);
			ev = c->in_len < PROXY_HEAD_MAX ? POLLIN : 0;
			if (c->reply_off < c->reply_len)
				ev |= POLLOUT;
			break;
		case NC_RELAY:
			if (!c->rd_eof && c->credit > 0 &&
			    aks__agent_buf_pending(&c->host->out) < AGENT_OUT_SOFT)
				ev |= POLLIN;
			if (c->reply_off < c->reply_len || c->q_off < c->q_len)
				ev |= POLLOUT;
			break;
		case NC_DRAIN:
			ev = POLLOUT;
			break;
		case NC_LINGER:
			if (now >= c->deadline) {
				free_conn(c);
				continue;
			}
			if (timeout && (*timeout < 0 || c->deadline - now < *timeout))
				*timeout = (int)(c->deadline - now);
			ev = POLLIN;
			break;
		default:
			continue;
		}
		pfd[n].fd = c->fd;
		pfd[n].events = ev;
		pfd[n].revents = 0;
		n++;
	}
	return n;
}

static uint8_t net_chunk[AKS_AGENT_CHUNK];

/* Reads what the program sends: its head, or data for the host. False when the connection
 * is gone (freed). */
static bool on_readable(agent *a, netconn *c)
{
	if (c->state == NC_LINGER) {
		ssize_t r = read(c->fd, net_chunk, sizeof(net_chunk));
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
			free_conn(c);
		return r > 0 || (r < 0 && (errno == EAGAIN || errno == EINTR));
	}
	if (c->state == NC_HEAD || c->state == NC_SOCKS_REQUEST) {
		ssize_t r = read(c->fd, c->in + c->in_len, PROXY_HEAD_MAX - c->in_len);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			return true;
		if (r <= 0) {
			free_conn(c);
			return false;
		}
		c->in_len += (size_t)r;
		parse_head(a, c);
		return true;
	}
	size_t want =
	    c->credit < (int64_t)sizeof(net_chunk) ? (size_t)c->credit : sizeof(net_chunk);
	ssize_t r = read(c->fd, net_chunk, want);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return true;
	if (r < 0) {
		send_close(c, AKS_AGENT_NC_RESET, "the program reset the connection");
		free_conn(c);
		return false;
	}
	if (r == 0) {
		c->rd_eof = true;
		size_t s = aks__agent_frame_begin(&c->host->out, AKS_AGENT_NET_EOF, 0, c->id);
		aks__agent_frame_end(&c->host->out, s);
		return true;
	}
	send_data(a, c, net_chunk, (size_t)r);
	return true;
}

/* Writes the proxy's answer, then the host's bytes. False when the connection is gone. */
static bool on_writable(agent *a, netconn *c)
{
	while (c->reply_off < c->reply_len) {
		ssize_t w = write(c->fd, c->reply + c->reply_off, c->reply_len - c->reply_off);
		if (w < 0 && (errno == EAGAIN || errno == EINTR))
			return true;
		if (w <= 0)
			goto gone;
		c->reply_off += (size_t)w;
	}
	while (c->q_off < c->q_len) {
		ssize_t w = write(c->fd, c->q + c->q_off, c->q_len - c->q_off);
		if (w < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		if (w <= 0)
			goto gone;
		c->q_off += (size_t)w;
		c->owed += (uint32_t)w;
	}
	if (c->q_off == c->q_len)
		c->q_off = c->q_len = 0;
	if (c->owed && c->state == NC_RELAY &&
	    (c->owed >= a->net_window / 4 || (c->q_len == 0 && !c->host_eof))) {
		size_t s = aks__agent_frame_begin(&c->host->out, AKS_AGENT_NET_CREDIT, 0, c->id);
		aks__agent_put_u32(&c->host->out, AKS_AGENT_T_BYTES, c->owed);
		aks__agent_frame_end(&c->host->out, s);
		c->host_unacked -= c->owed;
		c->owed = 0;
	}
	return true;
gone:
	if (c->state == NC_RELAY)
		send_close(c, AKS_AGENT_NC_RESET, "the program closed the connection");
	free_conn(c);
	return false;
}

void netproxy_events(agent *a, struct pollfd *pfd, size_t n)
{
	if (a->net_fd < 0 || n == 0)
		return;
	if (pfd[0].revents & POLLIN)
		accept_conns(a, agent_now_ms());
	for (size_t k = 1; k < n; k++) {
		netconn *c = NULL;
		for (int i = 0; i < AKS_AGENT_NET_MAX && !c; i++)
			if (a->net[i].state != NC_FREE && a->net[i].fd == pfd[k].fd)
				c = &a->net[i];
		if (!c || !pfd[k].revents)
			continue;
		short ev = pfd[k].revents;
		if ((ev & POLLOUT) && !on_writable(a, c))
			continue;
		if ((ev & (POLLIN | POLLHUP | POLLERR)) && (pfd[k].events & POLLIN) &&
		    !on_readable(a, c))
			continue;
		if ((ev & (POLLHUP | POLLERR)) && !(pfd[k].events & POLLIN) && !(ev & POLLOUT)) {
			/* Gone while we were not reading from it (no credit): it cannot take our
			 * bytes either. */
			if (c->state == NC_RELAY)
				send_close(c, AKS_AGENT_NC_RESET,
				           "the program closed the connection");
			free_conn(c);
			continue;
		}
	}
	/* Streams that are done: both sides finished and everything delivered. */
	for (int i = 0; i < AKS_AGENT_NET_MAX; i++) {
		netconn *c = &a->net[i];
		bool flushed = c->reply_off == c->reply_len && c->q_off == c->q_len;
		if (c->state == NC_RELAY && c->host_eof && flushed && !c->wr_shut) {
			shutdown(c->fd, SHUT_WR);
			c->wr_shut = true;
		}
		if (c->state == NC_RELAY && c->rd_eof && c->wr_shut) {
			send_close(c, AKS_AGENT_NC_DONE, NULL);
			free_conn(c);
		} else if (c->state == NC_DRAIN && flushed) {
			shutdown(c->fd, SHUT_WR);
			c->state = NC_LINGER;
			c->deadline = agent_now_ms() + NET_LINGER_MS;
		}
	}
}

void netproxy_conn_closed(agent *a, conn *hc)
{
	hc->net_listened = false;
	for (int i = 0; a->net && i < AKS_AGENT_NET_MAX; i++)
		if (a->net[i].state != NC_FREE && a->net[i].host == hc)
			reset_conn(&a->net[i]); /* the program sees its connection fail */
	if (a->net_host != hc)
		return;
	a->net_host = NULL;
	for (conn *o = a->conns; o; o = o->next)
		if (o != hc && o->net_listened)
			a->net_host = o;
}

void netproxy_close_all(agent *a)
{
	if (a->net)
		for (int i = 0; i < AKS_AGENT_NET_MAX; i++)
			if (a->net[i].state != NC_FREE)
				free_conn(&a->net[i]);
	free(a->net);
	a->net = NULL;
	if (a->net_fd >= 0)
		close(a->net_fd);
	a->net_fd = -1;
	for (size_t i = 0; i < sizeof(net_env) / sizeof(net_env[0]); i++) {
		free(net_env[i]);
		net_env[i] = NULL;
	}
}
