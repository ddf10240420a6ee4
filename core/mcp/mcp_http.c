/*
 * core/mcp/mcp_http.c - `aksandbox mcp --listen`: MCP's Streamable HTTP transport
 * (revisions 2025-03-26 to 2025-11-25, and 2026-07-28's stateless requests) on
 * libmicrohttpd, one thread per connection.
 *
 * One endpoint, /mcp:
 *  - POST carries one JSON-RPC message. A notification or a response gets 202. A request
 *    is handed to its session's server; an answer that is ready at once (everything but
 *    tools/call) comes back as application/json, a tools/call as server-sent events: a
 *    priming event with an id, then its progress notifications and its response, each
 *    with an id "<stream>-<n>" for Last-Event-ID. `initialize` opens a session and its
 *    answer carries the Mcp-Session-Id every later request must send; a 2026-07-28
 *    request (its revision in _meta) needs none and is served on its own.
 *  - GET with Last-Event-ID resumes a stream where the client lost it; GET without one
 *    is 405 (we send nothing unasked, so there is no standalone stream).
 *  - DELETE ends the session and cancels its calls.
 * Every request with an Origin header that is neither a loopback origin nor one allowed
 * with --allow-origin is refused (403), against DNS rebinding. Without bearer
 * authentication (mcp_http_auth.c) the socket binds to loopback or a unix socket only.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "http_listen.h"
#include "mcp_http.h"

#define ENDPOINT "/mcp"
/* A silent stream hears an SSE comment this often, so proxies and clients keep it
 * (default; aks__mcp_http_options.keepalive_seconds). */
#define KEEPALIVE_SECONDS 15
/* How often a waiting connection looks whether the server is stopping. */
#define WAKE_SECONDS 1
/* A connection that sends nothing for this long is closed (not a stream being read);
 * default, as above. */
#define CONNECTION_TIMEOUT_SECONDS 60
#define THREAD_STACK_SIZE          ((size_t)1 << 20)
#define MAX_PEM_BYTES              ((size_t)1 << 20)
/* A body over the bound is still read (and dropped) up to this many times the bound, so
 * the client hears 413 rather than a reset; past that the connection is closed. */
#define OVERSIZE_READ_FACTOR 16

struct http {
	struct http_state st;
	struct http_auth auth;
	struct MHD_Daemon *mhd;
	size_t max_body;
	unsigned keepalive_seconds;
	const char *const *origins;
	const char *unix_path; /* set when listening on a unix socket we made */
};

/* One HTTP request's state, from its headers until libmicrohttpd is done with it. */
struct request {
	struct http *h;
	char *body;
	size_t len, cap;
	struct http_session *session; /* a reference */
	struct http_stream *stream;   /* being read as events (reading set) */
	unsigned reader;              /* stream->reader when this request took it */
	uint64_t next_seq;
	bool too_big;          /* the body is over the bound: dropped as it comes */
	unsigned silent_waits; /* WAKE_SECONDS waits since the last event or keep-alive */
	int fd;                /* the connection's socket, to see a client hang up */
	char *subject;         /* the authenticated user (NULL without authentication) */
	char *token;           /* their bearer token, for the runtime's resolver */
	const char *attributes[3];
	char *out; /* event bytes formatted, not yet handed over */
	size_t out_len, out_off, out_cap;
};

/* ---- replies ------------------------------------------------------------------------- */

/* The one header a reply may carry besides its type (name NULL: none). */
struct extra_header {
	const char *name, *value;
};
#define NO_HEADER          ((struct extra_header){NULL, NULL})
#define ALLOW_HEADER(list) ((struct extra_header){MHD_HTTP_HEADER_ALLOW, (list)})
#define SESSION_HEADER(id) ((struct extra_header){"Mcp-Session-Id", (id)})

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
                             const char *body, size_t len, struct extra_header extra)
{
	struct MHD_Response *r =
	    MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	if (type)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (extra.name && extra.value)
		MHD_add_response_header(r, extra.name, extra.value);
	enum MHD_Result rc = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return rc;
}

/* An HTTP-level refusal, with a JSON-RPC error as its body (as MCP's servers answer). */
static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned status, int code,
                                   const char *message, struct extra_header extra)
{
	struct json_object *msg = aks__mcp_error(NULL, code, message, NULL);
	size_t len = 0;
	char *body = msg ? aks__mcp_serialize(msg, &len) : NULL;
	json_object_put(msg);
	enum MHD_Result rc =
	    reply(c, status, "application/json", body ? body : "", body ? len : 0, extra);
	free(body);
	return rc;
}

static const char *header(struct MHD_Connection *c, const char *name)
{
	return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

/* ---- checks on the headers -------------------------------------------------------------- */

static bool origin_allowed(const struct http *h, const char *origin)
{
	if (!origin || aks__mcp_http_loopback_origin(origin))
		return true;
	for (size_t i = 0; h->origins && h->origins[i]; i++)
		if (strcasecmp(h->origins[i], origin) == 0)
			return true;
	return false;
}

static bool version_known(const char *v)
{
	if (strcmp(v, AKS_MCP_MODERN_VERSION) == 0)
		return true;
	for (size_t i = 0; aks__mcp_legacy_versions[i]; i++)
		if (strcmp(v, aks__mcp_legacy_versions[i]) == 0)
			return true;
	return false;
}

static bool accepts(struct MHD_Connection *c, const char *type)
{
	const char *a = header(c, MHD_HTTP_HEADER_ACCEPT);
	return !a || strcasestr(a, type) || strstr(a, "*/*");
}

/* ---- server-sent events ------------------------------------------------------------------ */

static int out_append(struct request *r, const char *text, size_t len)
{
	if (r->out_len + len > r->out_cap) {
		size_t cap = r->out_len + len + 256;
		char *p = realloc(r->out, cap);
		if (!p)
			return -1;
		r->out = p;
		r->out_cap = cap;
	}
	memcpy(r->out + r->out_len, text, len);
	r->out_len += len;
	return 0;
}

/* "id: <stream>-<seq>\n[retry: ms\n]data: <message>\n\n" */
static int out_event(struct request *r, uint64_t seq, const char *data, size_t len, bool prime)
{
	char head[96];
	int n = snprintf(head, sizeof(head), "id: %" PRIu64 "-%" PRIu64 "\n%sdata: ", r->stream->id,
	                 seq, prime ? "retry: 1000\n" : "");
	return out_append(r, head, (size_t)n) || out_append(r, data, len) ||
	               out_append(r, "\n\n", 2)
	           ? -1
	           : 0;
}

/* Whether the client has closed its end: HTTP clients do not half-close, so a hang-up is
 * a client that is gone (seen here without waiting for a write to fail). */
static bool peer_hung_up(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLRDHUP};
	return fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* Waits on a stream for news, at most WAKE_SECONDS (st->mu held): true when none came. */
static bool wait_a_while(struct http_stream *t, struct http_state *st)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += WAKE_SECONDS;
	return pthread_cond_timedwait(&t->cv, &st->mu, &until) == ETIMEDOUT;
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct request *r = cls;
	struct http_state *st = &r->h->st;
	(void)pos;
	if (r->out_off == r->out_len) {
		r->out_off = r->out_len = 0;
		int rc = 0;
		pthread_mutex_lock(&st->mu);
		struct http_stream *t = r->stream;
		for (;;) {
			if (t->reader != r->reader) {
				/* The client resumed on another connection: that one reads now. */
				pthread_mutex_unlock(&st->mu);
				return MHD_CONTENT_READER_END_OF_STREAM;
			}
			if (r->next_seq <= t->count) {
				const struct http_event *ev = &t->events[r->next_seq - 1];
				r->silent_waits = 0;
				rc = out_event(r, r->next_seq, ev->data, ev->len, false);
				r->next_seq++;
				break;
			}
			if (t->done || st->stopping) {
				pthread_mutex_unlock(&st->mu);
				return MHD_CONTENT_READER_END_OF_STREAM;
			}
			if (!wait_a_while(t, st))
				continue;
			if (peer_hung_up(r->fd)) {
				pthread_mutex_unlock(&st->mu);
				return MHD_CONTENT_READER_END_WITH_ERROR;
			}
			if (++r->silent_waits * WAKE_SECONDS >= r->h->keepalive_seconds) {
				r->silent_waits = 0;
				rc = out_append(r, ": keep-alive\n\n", 14);
				break;
			}
		}
		pthread_mutex_unlock(&st->mu);
		if (rc < 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	size_t n = r->out_len - r->out_off;
	if (n > max)
		n = max;
	memcpy(buf, r->out + r->out_off, n);
	r->out_off += n;
	return (ssize_t)n;
}

/* Answers with the stream as events from next_seq on (the stream is marked read). */
static enum MHD_Result reply_events(struct request *r, struct MHD_Connection *c,
                                    struct http_stream *t, uint64_t next_seq, bool prime,
                                    const char *session_id)
{
	r->stream = t;
	r->reader = t->reader; /* taken by the caller, under the lock */
	r->next_seq = next_seq;
	const union MHD_ConnectionInfo *info =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	r->fd = info ? info->connect_fd : -1;
	if (prime && out_event(r, 0, "", 0, true) < 0)
		return MHD_NO;
	struct MHD_Response *resp =
	    MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 << 10, sse_read, r, NULL);
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	if (session_id)
		MHD_add_response_header(resp, "Mcp-Session-Id", session_id);
	enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	return rc;
}

/* ---- the methods ------------------------------------------------------------------------ */

/* Whether a request carries the 2026-07-28 revision in its _meta (served without a
 * session). */
static bool is_modern(const aks__mcp_message *m)
{
	struct json_object *meta = NULL;
	return m->params && json_object_object_get_ex(m->params, "_meta", &meta) &&
	       json_object_is_type(meta, json_type_object) &&
	       json_object_object_get_ex(meta, AKS_MCP_META_VERSION, NULL);
}

/* The session a POST goes to, with a reference in r->session; or an error was queued. */
static enum MHD_Result post_session(struct request *r, struct MHD_Connection *c,
                                    const aks__mcp_message *m, bool *ok)
{
	struct http *h = r->h;
	const char *sid = header(c, "Mcp-Session-Id");
	bool is_request = m->kind == AKS_MCP_MSG_REQUEST;
	bool full = false;
	*ok = false;
	if (is_request && strcmp(m->method, "initialize") == 0) {
		if (sid)
			return reply_error(c, MHD_HTTP_BAD_REQUEST, AKS_MCP_INVALID_REQUEST,
			                   "Bad Request: initialize opens a new session; send it "
			                   "without Mcp-Session-Id",
			                   NO_HEADER);
		r->session = aks__http_session_new(&h->st, false, r->subject, &full);
	} else if (sid) {
		r->session = aks__http_session_find(&h->st, sid, r->subject);
		if (!r->session)
			return reply_error(c, MHD_HTTP_NOT_FOUND, AKS_MCP_INVALID_REQUEST,
			                   "Session not found: it ended or never existed; "
			                   "initialize a new one",
			                   NO_HEADER);
	} else if (is_request && is_modern(m)) {
		r->session = aks__http_session_new(&h->st, true, r->subject, &full);
	} else {
		return reply_error(c, MHD_HTTP_BAD_REQUEST, AKS_MCP_INVALID_REQUEST,
		                   "Bad Request: Mcp-Session-Id header is required (send "
		                   "initialize first)",
		                   NO_HEADER);
	}
	if (!r->session)
		return full ? reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, AKS_MCP_SERVER_BUSY,
		                          "Server busy: too many sessions; end one (DELETE) or "
		                          "retry later",
		                          NO_HEADER)
		            : reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, AKS_MCP_INTERNAL_ERROR,
		                          "Internal error: cannot open a session", NO_HEADER);
	*ok = true;
	return MHD_YES;
}

/* Waits until a stream is done (the client takes no events): false when stopping. */
static bool wait_done(struct http_state *st, struct http_stream *t)
{
	pthread_mutex_lock(&st->mu);
	while (!t->done && !st->stopping)
		wait_a_while(t, st);
	bool done = t->done;
	pthread_mutex_unlock(&st->mu);
	return done;
}

static enum MHD_Result do_post(struct request *r, struct MHD_Connection *c)
{
	struct http *h = r->h;
	const char *type = header(c, MHD_HTTP_HEADER_CONTENT_TYPE);
	if (!type || strncasecmp(type, "application/json", 16) != 0)
		return reply_error(c, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, AKS_MCP_INVALID_REQUEST,
		                   "Unsupported Media Type: send Content-Type: application/json",
		                   NO_HEADER);
	if (!accepts(c, "application/json") && !accepts(c, "text/event-stream"))
		return reply_error(c, MHD_HTTP_NOT_ACCEPTABLE, AKS_MCP_INVALID_REQUEST,
		                   "Not Acceptable: accept application/json and text/event-stream",
		                   NO_HEADER);
	aks__mcp_message m;
	aks__mcp_parse(r->body ? r->body : "", r->len, &m);
	if (m.kind == AKS_MCP_MSG_INVALID) {
		struct json_object *err = aks__mcp_error(m.id, m.error_code, m.error_message, NULL);
		size_t len = 0;
		char *body = err ? aks__mcp_serialize(err, &len) : NULL;
		json_object_put(err);
		aks__mcp_message_clear(&m);
		enum MHD_Result rc = reply(c, MHD_HTTP_BAD_REQUEST, "application/json",
		                           body ? body : "", body ? len : 0, NO_HEADER);
		free(body);
		return rc;
	}
	bool ok;
	enum MHD_Result rc = post_session(r, c, &m, &ok);
	bool is_request = m.kind == AKS_MCP_MSG_REQUEST;
	aks__mcp_message_clear(&m);
	if (!ok)
		return rc;
	struct http_session *s = r->session;
	const char *sid = s->stateless ? NULL : s->id;
	bool closed = false;
	struct http_stream *t = aks__http_session_handle(s, r->body, r->len, is_request,
	                                                 r->token ? r->attributes : NULL, &closed);
	if (closed)
		return reply_error(c, MHD_HTTP_NOT_FOUND, AKS_MCP_INVALID_REQUEST,
		                   "Session not found: it has ended; initialize a new one",
		                   NO_HEADER);
	if (!is_request)
		return reply(c, MHD_HTTP_ACCEPTED, NULL, "", 0, SESSION_HEADER(sid));
	if (!t)
		return reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, AKS_MCP_INTERNAL_ERROR,
		                   "Internal error: out of memory", NO_HEADER);
	pthread_mutex_lock(&h->st.mu);
	bool done = t->done;
	if (!done && accepts(c, "text/event-stream")) {
		t->reading = true;
		t->reader++;
	}
	pthread_mutex_unlock(&h->st.mu);
	if (!done && t->reading)
		return reply_events(r, c, t, 1, true, sid);
	/* One JSON answer: the response, the last message (progress before it is dropped for
	 * a client that takes no events). */
	if (!wait_done(&h->st, t)) {
		aks__http_stream_drop(t);
		return reply_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, AKS_MCP_INTERNAL_ERROR,
		                   "Service Unavailable: the server is stopping", NO_HEADER);
	}
	pthread_mutex_lock(&h->st.mu);
	const struct http_event *last = t->count ? &t->events[t->count - 1] : NULL;
	rc = last ? reply(c, MHD_HTTP_OK, "application/json", last->data, last->len,
	                  SESSION_HEADER(sid))
	          : reply(c, MHD_HTTP_ACCEPTED, NULL, "", 0,
	                  SESSION_HEADER(sid)); /* cancelled: no answer */
	pthread_mutex_unlock(&h->st.mu);
	aks__http_stream_drop(t);
	return rc;
}

/* The session a GET or DELETE names, with a reference in r->session. */
static enum MHD_Result named_session(struct request *r, struct MHD_Connection *c, bool *ok)
{
	const char *sid = header(c, "Mcp-Session-Id");
	*ok = false;
	if (!sid)
		return reply_error(c, MHD_HTTP_BAD_REQUEST, AKS_MCP_INVALID_REQUEST,
		                   "Bad Request: Mcp-Session-Id header is required", NO_HEADER);
	r->session = aks__http_session_find(&r->h->st, sid, r->subject);
	if (!r->session)
		return reply_error(c, MHD_HTTP_NOT_FOUND, AKS_MCP_INVALID_REQUEST,
		                   "Session not found: it ended or never existed", NO_HEADER);
	*ok = true;
	return MHD_YES;
}

static enum MHD_Result do_get(struct request *r, struct MHD_Connection *c)
{
	const char *last = header(c, "Last-Event-ID");
	if (!last)
		return reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, AKS_MCP_INVALID_REQUEST,
		                   "Method Not Allowed: this server sends nothing unasked, so it "
		                   "has no stream to open; GET resumes one with Last-Event-ID",
		                   ALLOW_HEADER("POST, DELETE"));
	if (!accepts(c, "text/event-stream"))
		return reply_error(c, MHD_HTTP_NOT_ACCEPTABLE, AKS_MCP_INVALID_REQUEST,
		                   "Not Acceptable: resuming a stream answers text/event-stream",
		                   NO_HEADER);
	bool ok;
	enum MHD_Result rc = named_session(r, c, &ok);
	if (!ok)
		return rc;
	uint64_t stream_id = 0, seq = 0;
	bool parsed = aks__mcp_http_parse_event_id(last, &stream_id, &seq);
	struct http_state *st = &r->h->st;
	pthread_mutex_lock(&st->mu);
	struct http_stream *t = parsed ? aks__http_stream_find_locked(r->session, stream_id) : NULL;
	if (t && seq > t->count)
		t = NULL;
	if (t) {
		/* A connection that still reads it is one the client gave up on (it would not
		 * resume otherwise, and only it knows the session id): this one takes over. */
		t->reading = true;
		t->reader++;
		pthread_cond_broadcast(&t->cv);
	}
	pthread_mutex_unlock(&st->mu);
	if (!t)
		return reply_error(c, MHD_HTTP_NOT_FOUND, AKS_MCP_INVALID_REQUEST,
		                   "Not Found: no stream has that Last-Event-ID (it is unknown or "
		                   "was forgotten)",
		                   NO_HEADER);
	return reply_events(r, c, t, seq + 1, false, NULL);
}

static enum MHD_Result do_delete(struct request *r, struct MHD_Connection *c)
{
	bool ok;
	enum MHD_Result rc = named_session(r, c, &ok);
	if (!ok)
		return rc;
	aks__mcp_log("a session was ended by its client");
	aks__http_session_end(r->session);
	return reply(c, MHD_HTTP_OK, NULL, "", 0, NO_HEADER);
}

static enum MHD_Result too_large(const struct http *h, struct MHD_Connection *c)
{
	char message[96];
	snprintf(message, sizeof(message), "Content Too Large: a message is at most %zu MiB",
	         h->max_body >> 20);
	return reply_error(c, MHD_HTTP_CONTENT_TOO_LARGE, AKS_MCP_INVALID_REQUEST, message,
	                   NO_HEADER);
}

/* ---- authentication ---------------------------------------------------------------------- */

static enum MHD_Result reply_metadata(const struct http *h, struct MHD_Connection *c)
{
	char *doc = aks__http_auth_metadata(&h->auth);
	enum MHD_Result rc =
	    doc ? reply(c, MHD_HTTP_OK, "application/json", doc, strlen(doc), NO_HEADER)
	        : reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, AKS_MCP_INTERNAL_ERROR,
	                      "Internal error: out of memory", NO_HEADER);
	free(doc);
	return rc;
}

/* Checks the request's bearer token; on failure queues the 401 (with its challenge). */
static int authenticate(struct request *r, struct MHD_Connection *c)
{
	const struct http_auth *a = &r->h->auth;
	char why[256];
	int outcome = aks__http_auth_check(a, header(c, MHD_HTTP_HEADER_AUTHORIZATION), &r->subject,
	                                   &r->token, why, sizeof(why));
	if (outcome == AKS_HTTP_AUTH_OK) {
		r->attributes[0] = a->attribute;
		r->attributes[1] = r->token;
		return outcome;
	}
	char *challenge = aks__http_auth_challenge(a, outcome, why);
	reply_error(c, MHD_HTTP_UNAUTHORIZED, AKS_MCP_INVALID_REQUEST,
	            outcome == AKS_HTTP_AUTH_MISSING
	                ? "Unauthorized: send Authorization: Bearer TOKEN"
	                : "Unauthorized: the bearer token was refused",
	            (struct extra_header){MHD_HTTP_HEADER_WWW_AUTHENTICATE, challenge});
	free(challenge);
	return outcome;
}

/* ---- libmicrohttpd's callbacks ------------------------------------------------------------ */

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls)
{
	struct http *h = cls;
	struct request *r = *con_cls;
	(void)version;
	if (!r) {
		/* The headers are in: refuse what is wrong before any body is read. */
		r = calloc(1, sizeof(*r));
		if (!r)
			return MHD_NO;
		r->h = h;
		*con_cls = r;
		if (h->auth.resolver && aks__http_auth_is_metadata_path(url))
			return strcmp(method, "GET") == 0
			           ? reply_metadata(h, c)
			           : reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED,
			                         AKS_MCP_INVALID_REQUEST, "Method Not Allowed",
			                         ALLOW_HEADER("GET"));
		if (strcmp(url, ENDPOINT) != 0)
			return reply(c, MHD_HTTP_NOT_FOUND, "text/plain",
			             "Not Found: the MCP "
			             "endpoint is " ENDPOINT "\n",
			             sizeof("Not Found: the MCP endpoint is " ENDPOINT "\n") - 1,
			             NO_HEADER);
		if (!origin_allowed(h, header(c, "Origin")))
			return reply_error(c, MHD_HTTP_FORBIDDEN, AKS_MCP_INVALID_REQUEST,
			                   "Forbidden: this Origin may not use the server (see "
			                   "--allow-origin)",
			                   NO_HEADER);
		if (h->auth.resolver && authenticate(r, c) != AKS_HTTP_AUTH_OK)
			return MHD_YES; /* the 401 is queued */
		const char *v = header(c, "MCP-Protocol-Version");
		if (v && !version_known(v))
			return reply_error(c, MHD_HTTP_BAD_REQUEST, AKS_MCP_INVALID_REQUEST,
			                   "Bad Request: unsupported MCP-Protocol-Version",
			                   NO_HEADER);
		if (strcmp(method, "POST") != 0 && strcmp(method, "GET") != 0 &&
		    strcmp(method, "DELETE") != 0)
			return reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, AKS_MCP_INVALID_REQUEST,
			                   "Method Not Allowed", ALLOW_HEADER("GET, POST, DELETE"));
		const char *length = header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (length && strtoull(length, NULL, 10) > h->max_body * OVERSIZE_READ_FACTOR)
			return too_large(h, c);
		return MHD_YES;
	}
	if (*upload_size) {
		if (r->too_big || r->len + *upload_size > h->max_body) {
			/* Counted, not kept; r->len goes on counting what came. */
			r->too_big = true;
			r->len += *upload_size;
			*upload_size = 0;
			if (r->len <= h->max_body * OVERSIZE_READ_FACTOR)
				return MHD_YES;
			aks__mcp_log("a request body went past %zu MiB: its connection is closed "
			             "unanswered",
			             (h->max_body * OVERSIZE_READ_FACTOR) >> 20);
			return MHD_NO;
		}
		if (r->len + *upload_size > r->cap) {
			size_t cap = r->cap ? r->cap : 16 << 10;
			while (cap < r->len + *upload_size)
				cap *= 2;
			char *p = realloc(r->body, cap);
			if (!p)
				return MHD_NO;
			r->body = p;
			r->cap = cap;
		}
		memcpy(r->body + r->len, upload_data, *upload_size);
		r->len += *upload_size;
		*upload_size = 0;
		return MHD_YES;
	}
	if (r->too_big)
		return too_large(h, c);
	if (strcmp(method, "POST") == 0)
		return do_post(r, c);
	if (strcmp(method, "GET") == 0)
		return do_get(r, c);
	return do_delete(r, c);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
	struct http *h = cls;
	struct request *r = *con_cls;
	(void)c;
	(void)toe;
	if (!r)
		return;
	if (r->stream) {
		/* A client that went away may come back for the rest (Last-Event-ID). */
		pthread_mutex_lock(&h->st.mu);
		if (r->stream->reader == r->reader)
			r->stream->reading = false;
		pthread_mutex_unlock(&h->st.mu);
	}
	if (r->session) {
		/* A stateless request's session ends with it: nobody can name it again. */
		if (r->session->stateless)
			aks__http_session_end(r->session);
		aks__http_session_unref(r->session);
	}
	free(r->body);
	free(r->out);
	free(r->subject);
	free(r->token);
	free(r);
	*con_cls = NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) AKS_PRINTF(2, 0);
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	aks__mcp_vlog(fmt, ap);
}

/* ---- the listening socket ------------------------------------------------------------------ */

static int listen_unix(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "the socket path '%s' is too long", path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	struct stat sb;
	if (lstat(path, &sb) == 0) {
		/* A socket nobody listens on is a leftover; anything else is not ours to remove. */
		if (!S_ISSOCK(sb.st_mode) || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ||
		    errno != ECONNREFUSED) {
			snprintf(err, errlen, "'%s' exists and is %s", path,
			         S_ISSOCK(sb.st_mode) ? "in use" : "not a socket");
			close(fd);
			return -1;
		}
		unlink(path);
	}
	/* Only this user may connect (0600): whoever can reach the socket can run code. Nobody
	 * can connect before listen(), so the mode is right before anyone could. */
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(path, 0600) < 0 ||
	    listen(fd, 128) < 0) {
		snprintf(err, errlen, "cannot listen on '%s': %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* "[HOST:]PORT" or "[V6]:PORT"; the bound address goes to url. */
static int listen_tcp(const char *spec, bool tls, bool authenticated, char *url, size_t urlsize,
                      char *err, size_t errlen)
{
	bool loopback = false;
	char bound[INET6_ADDRSTRLEN + 16];
	int fd = aks__http_listen_tcp(
	    spec,
	    authenticated ? NULL
	                  : "without --auth, anyone who reaches the port could run programs; add "
	                    "--auth (bearer tokens through the principal resolver), or listen on "
	                    "127.0.0.1, [::1] or a unix socket",
	    &loopback, bound, sizeof(bound), err, errlen);
	if (fd < 0)
		return -1;
	if (!loopback && !tls)
		aks__mcp_log(
		    "warning: %.*s is reachable from other machines over plain HTTP: bearer "
		    "tokens cross the network in the clear unless a TLS proxy fronts it "
		    "(or use --tls-cert and --tls-key)",
		    (int)(strrchr(bound, ':') - bound), bound);
	snprintf(url, urlsize, "%s://%s" ENDPOINT, tls ? "https" : "http", bound);
	return fd;
}

static char *read_pem(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
		return NULL;
	}
	char *buf = malloc(MAX_PEM_BYTES + 1);
	size_t n = buf ? fread(buf, 1, MAX_PEM_BYTES + 1, f) : 0;
	bool bad = !buf || ferror(f) || n > MAX_PEM_BYTES;
	fclose(f);
	if (bad) {
		snprintf(err, errlen, "cannot read '%s' (at most 1 MiB of PEM)", path);
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	return buf;
}

/* ---- serving --------------------------------------------------------------------------- */

static void pause_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

int aks__mcp_http_serve(const aks__mcp_http_options *opt, volatile sig_atomic_t *stop)
{
	char err[512] = "", url[300];
	bool tls = opt->tls_cert || opt->tls_key;
	if (tls && !(opt->tls_cert && opt->tls_key)) {
		aks__mcp_log("TLS needs both a certificate (--tls-cert) and a key (--tls-key)");
		return -1;
	}
	if (tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
		aks__mcp_log("this libmicrohttpd was built without TLS");
		return -1;
	}
	char *cert = tls ? read_pem(opt->tls_cert, err, sizeof(err)) : NULL;
	char *key = tls && cert ? read_pem(opt->tls_key, err, sizeof(err)) : NULL;
	if (tls && !key) {
		aks__mcp_log("%s", err);
		free(cert);
		return -1;
	}
	struct http h = {.max_body = opt->max_body ? opt->max_body : AKS_MCP_DEFAULT_MAX_LINE,
	                 .keepalive_seconds =
	                     opt->keepalive_seconds ? opt->keepalive_seconds : KEEPALIVE_SECONDS,
	                 .origins = opt->allowed_origins};
	int fd;
	if (strncmp(opt->listen, "unix:", 5) == 0) {
		fd = listen_unix(opt->listen + 5, err, sizeof(err));
		snprintf(url, sizeof(url), "%s (endpoint " ENDPOINT ")", opt->listen);
		h.unix_path = opt->listen + 5;
	} else {
		fd = listen_tcp(opt->listen, tls, opt->resolver != NULL, url, sizeof(url), err,
		                sizeof(err));
	}
	if (fd < 0) {
		aks__mcp_log("--listen %s: %s", opt->listen, err);
		free(cert);
		free(key);
		return -1;
	}
	if (opt->resolver && aks__http_auth_init(&h.auth, opt, url) < 0) {
		aks__mcp_log("out of memory");
		close(fd);
		free(cert);
		free(key);
		return -1;
	}
	aks__http_state_init(
	    &h.st, &opt->server, opt->max_sessions ? opt->max_sessions : AKS_MCP_HTTP_MAX_SESSIONS,
	    opt->session_idle_seconds ? opt->session_idle_seconds : AKS_MCP_HTTP_SESSION_IDLE);
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD |
	                 MHD_USE_ITC | MHD_USE_ERROR_LOG | (tls ? MHD_USE_TLS : 0);
	unsigned max_conn =
	    opt->max_connections ? opt->max_connections : AKS_MCP_HTTP_MAX_CONNECTIONS;
	/* The logger first, so that libmicrohttpd's own complaints about the rest reach it. */
	struct MHD_OptionItem options[] = {
	    {MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)on_mhd_log, NULL},
	    {MHD_OPTION_LISTEN_SOCKET, fd, NULL},
	    {MHD_OPTION_CONNECTION_LIMIT, max_conn, NULL},
	    {MHD_OPTION_CONNECTION_TIMEOUT,
	     opt->connection_timeout_seconds ? opt->connection_timeout_seconds
	                                     : CONNECTION_TIMEOUT_SECONDS,
	     NULL},
	    {MHD_OPTION_THREAD_STACK_SIZE, (intptr_t)THREAD_STACK_SIZE, NULL},
	    {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, &h},
	    {tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, cert},
	    {MHD_OPTION_HTTPS_MEM_KEY, 0, key},
	    {MHD_OPTION_END, 0, NULL},
	};
	h.mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, &h, MHD_OPTION_ARRAY, options,
	                         MHD_OPTION_END);
	if (!h.mhd) {
		aks__mcp_log("--listen %s: the HTTP server did not start%s", opt->listen,
		             tls ? " (is the certificate and key pair valid PEM?)" : "");
		close(fd);
		if (h.unix_path)
			unlink(h.unix_path);
		aks__http_state_destroy(&h.st);
		aks__http_auth_clear(&h.auth);
		free(cert);
		free(key);
		return -1;
	}
	aks__mcp_log("listening on %s%s", url, opt->resolver ? " (bearer tokens required)" : "");
	if (opt->resolver)
		aks__mcp_log("protected-resource metadata: %s", h.auth.metadata_url);
	for (unsigned tick = 0; !*stop; tick++) {
		pause_ms(200);
		if (tick % 5 == 4)
			aks__http_state_sweep(&h.st);
	}
	/* Stop taking connections; let the calls that run finish for a while, then cancel
	 * them; then the connections end with their streams. */
	int listener = MHD_quiesce_daemon(h.mhd);
	if (listener >= 0)
		close(listener);
	unsigned drain = opt->drain_seconds;
	size_t running = aks__http_state_sweep(&h.st);
	if (running)
		aks__mcp_log("stopping: waiting up to %u s for %zu call(s) to finish", drain,
		             running);
	for (unsigned waited = 0; running && waited < drain * 10; waited++) {
		pause_ms(100);
		running = aks__http_state_sweep(&h.st);
	}
	if (running)
		aks__mcp_log("stopping: cancelling %zu call(s) still running", running);
	aks__http_state_clear(&h.st);
	MHD_stop_daemon(h.mhd);
	aks__http_state_destroy(&h.st);
	aks__http_auth_clear(&h.auth);
	if (h.unix_path)
		unlink(h.unix_path);
	free(cert);
	free(key);
	return 0;
}
