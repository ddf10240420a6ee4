/*
 * core/mcp/mcp_http_state.c - the Streamable HTTP transport's sessions and streams.
 *
 * A session is one aks__mcp_server, made at `initialize` and named by a random
 * Mcp-Session-Id. Each request POSTed to it gets a stream: the server's route for that
 * request, where its progress notifications and its response land, numbered from 1.
 * A connection reads a stream as server-sent events; a client that lost the connection
 * reads it again from where it was (Last-Event-ID), and the call goes on meanwhile: a
 * dropped connection is not a cancellation (MCP says so).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "mcp_http.h"

/* Streams a session keeps at most for resumption; the oldest finished ones go first. */
#define MAX_STREAMS_KEPT 64
/* How long a finished stream stays resumable. */
#define STREAM_KEEP_SECONDS 300

/* ---- the server's callbacks: its messages land in the request's stream ----------- */

static int http_write(void *userdata, void *route, const char *line, size_t len)
{
	struct http_state *st = userdata;
	struct http_stream *stream = route;
	if (!stream)
		return 0; /* nothing routes here: an answer to a notification (none exists) */
	while (len > 0 && line[len - 1] == '\n')
		len--;
	char *copy = malloc(len + 1);
	if (!copy)
		return 0; /* lost, as a full pipe would lose it; the call goes on */
	memcpy(copy, line, len);
	copy[len] = '\0';
	pthread_mutex_lock(&st->mu);
	if (stream->count == stream->cap) {
		size_t cap = stream->cap ? stream->cap * 2 : 4;
		struct http_event *ev = realloc(stream->events, cap * sizeof(*ev));
		if (!ev) {
			pthread_mutex_unlock(&st->mu);
			free(copy);
			return 0;
		}
		stream->events = ev;
		stream->cap = cap;
	}
	stream->events[stream->count++] = (struct http_event){.data = copy, .len = len};
	pthread_cond_broadcast(&stream->cv);
	pthread_mutex_unlock(&st->mu);
	return 0;
}

static void http_route_done(void *userdata, void *route)
{
	struct http_state *st = userdata;
	struct http_stream *stream = route;
	pthread_mutex_lock(&st->mu);
	stream->done = true;
	stream->done_at = time(NULL);
	pthread_cond_broadcast(&stream->cv);
	pthread_mutex_unlock(&st->mu);
}

/* ---- state ------------------------------------------------------------------------ */

void aks__http_state_init(struct http_state *st, const aks__mcp_options *server_options,
                          size_t max_sessions, unsigned idle_seconds)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_init(&st->mu, NULL);
	st->server_options = *server_options;
	st->server_options.write = http_write;
	st->server_options.route_done = http_route_done;
	st->server_options.write_data = st;
	st->max_sessions = max_sessions;
	st->idle_seconds = idle_seconds;
	st->keep_seconds = STREAM_KEEP_SECONDS;
}

static void stream_free(struct http_stream *stream)
{
	for (size_t i = 0; i < stream->count; i++)
		free(stream->events[i].data);
	free(stream->events);
	pthread_cond_destroy(&stream->cv);
	free(stream);
}

static void session_free(struct http_session *s)
{
	/* First the server: its calls are cancelled and joined, so nothing writes into the
	 * streams any more. */
	aks__mcp_server_free(s->server);
	while (s->streams) {
		struct http_stream *next = s->streams->next;
		stream_free(s->streams);
		s->streams = next;
	}
	pthread_mutex_destroy(&s->dispatch);
	free(s->owner);
	free(s);
}

/* Stops a session taking messages and cancels its calls; their streams end. Two threads
 * may close it at once (a DELETE or a dropped stateless request, and the stop): the
 * dispatch lock makes the second wait for the first's shutdown, never repeat it. */
static void session_close(struct http_session *s)
{
	pthread_mutex_lock(&s->dispatch);
	if (!s->closed) {
		s->closed = true;
		aks__mcp_server_shutdown(s->server);
	}
	pthread_mutex_unlock(&s->dispatch);
}

void aks__http_state_clear(struct http_state *st)
{
	pthread_mutex_lock(&st->mu);
	st->stopping = true;
	struct http_session *list = st->sessions;
	st->sessions = NULL;
	st->session_count = 0;
	for (struct http_session *s = list; s; s = s->next) {
		s->listed = false;
		for (struct http_stream *t = s->streams; t; t = t->next)
			pthread_cond_broadcast(&t->cv);
	}
	pthread_mutex_unlock(&st->mu);
	while (list) {
		struct http_session *next = list->next;
		session_close(list);
		aks__http_session_unref(list);
		list = next;
	}
}

void aks__http_state_destroy(struct http_state *st)
{
	pthread_mutex_destroy(&st->mu);
}

/* ---- sessions ---------------------------------------------------------------------- */

static int random_id(char out[33])
{
	unsigned char b[16];
	size_t got = 0;
	while (got < sizeof(b)) {
		ssize_t n = getrandom(b + got, sizeof(b) - got, 0);
		if (n < 0 && errno != EINTR)
			return -1;
		if (n > 0)
			got += (size_t)n;
	}
	for (size_t i = 0; i < sizeof(b); i++)
		snprintf(out + 2 * i, 3, "%02x", b[i]);
	return 0;
}

struct http_session *aks__http_session_new(struct http_state *st, bool stateless, const char *owner,
                                           bool *full)
{
	*full = false;
	pthread_mutex_lock(&st->mu);
	bool room = st->session_count < st->max_sessions;
	pthread_mutex_unlock(&st->mu);
	if (!room)
		aks__http_state_sweep(st); /* idle ones may make room */
	struct http_session *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->state = st;
	s->stateless = stateless;
	s->refs = 1;
	s->last_used = time(NULL);
	s->next_stream = 1;
	pthread_mutex_init(&s->dispatch, NULL);
	/* A user's sessions act in a conversation of their own. */
	aks__mcp_options opt = st->server_options;
	char *conversation = NULL;
	if (owner && asprintf(&conversation, "%s:%s", opt.conversation_id, owner) < 0)
		conversation = NULL;
	if (conversation)
		opt.conversation_id = conversation;
	s->owner = owner ? strdup(owner) : NULL;
	int rc = (owner && (!conversation || !s->owner)) || random_id(s->id) < 0
	             ? AKS_ENOMEM
	             : aks__mcp_server_new(&opt, &s->server);
	free(conversation);
	if (rc != AKS_OK) {
		session_free(s);
		return NULL;
	}
	pthread_mutex_lock(&st->mu);
	if (st->stopping || st->session_count >= st->max_sessions) {
		pthread_mutex_unlock(&st->mu);
		*full = true;
		session_free(s);
		return NULL;
	}
	s->listed = true;
	s->refs++;
	s->next = st->sessions;
	st->sessions = s;
	st->session_count++;
	pthread_mutex_unlock(&st->mu);
	return s;
}

/* Whether a client's id is this session's, in time that does not depend on where they
 * differ: the id is what lets a client into the session. */
static bool id_matches(const struct http_session *s, const char *id, size_t len, const char *owner)
{
	/* Another user's session is no session to this one. */
	if (s->stateless || len != sizeof(s->id) - 1 || !s->owner != !owner ||
	    (owner && strcmp(s->owner, owner) != 0))
		return false;
	unsigned char diff = 0;
	for (size_t i = 0; i < len; i++)
		diff |= (unsigned char)(s->id[i] ^ id[i]);
	return diff == 0;
}

struct http_session *aks__http_session_find(struct http_state *st, const char *id,
                                            const char *owner)
{
	size_t len = strlen(id);
	pthread_mutex_lock(&st->mu);
	struct http_session *s = st->sessions;
	while (s && !id_matches(s, id, len, owner))
		s = s->next;
	if (s) {
		s->refs++;
		s->last_used = time(NULL);
	}
	pthread_mutex_unlock(&st->mu);
	return s;
}

void aks__http_session_unref(struct http_session *s)
{
	struct http_state *st = s->state;
	pthread_mutex_lock(&st->mu);
	bool last = --s->refs == 0;
	pthread_mutex_unlock(&st->mu);
	if (last)
		session_free(s);
}

/* Takes s out of the table (st->mu held); false if it was not in it. */
static bool unlist_locked(struct http_session *s)
{
	struct http_state *st = s->state;
	if (!s->listed)
		return false;
	for (struct http_session **p = &st->sessions; *p; p = &(*p)->next) {
		if (*p == s) {
			*p = s->next;
			break;
		}
	}
	s->listed = false;
	st->session_count--;
	return true;
}

void aks__http_session_end(struct http_session *s)
{
	pthread_mutex_lock(&s->state->mu);
	bool was_listed = unlist_locked(s);
	pthread_mutex_unlock(&s->state->mu);
	session_close(s);
	if (was_listed)
		aks__http_session_unref(s); /* the table's reference */
}

struct http_stream *aks__http_session_handle(struct http_session *s, const char *body, size_t len,
                                             bool is_request, const char *const *attributes,
                                             bool *closed)
{
	struct http_state *st = s->state;
	struct http_stream *stream = NULL;
	*closed = false;
	if (is_request) {
		stream = calloc(1, sizeof(*stream));
		if (!stream)
			return NULL;
		stream->session = s;
		pthread_cond_init(&stream->cv, NULL);
		pthread_mutex_lock(&st->mu);
		stream->id = s->next_stream++;
		stream->next = s->streams;
		s->streams = stream;
		s->last_used = time(NULL);
		pthread_mutex_unlock(&st->mu);
	}
	pthread_mutex_lock(&s->dispatch);
	if (s->closed)
		*closed = true;
	else
		aks__mcp_server_handle(s->server, body, len, stream, attributes);
	pthread_mutex_unlock(&s->dispatch);
	if (*closed && stream) {
		aks__http_stream_drop(stream);
		stream = NULL;
	}
	return stream;
}

struct http_stream *aks__http_stream_find_locked(struct http_session *s, uint64_t id)
{
	struct http_stream *t = s->streams;
	while (t && t->id != id)
		t = t->next;
	return t;
}

/* Unlinks a stream from its session (st->mu held). */
static void stream_unlink_locked(struct http_stream *stream)
{
	for (struct http_stream **p = &stream->session->streams; *p; p = &(*p)->next) {
		if (*p == stream) {
			*p = stream->next;
			return;
		}
	}
}

void aks__http_stream_drop(struct http_stream *stream)
{
	struct http_state *st = stream->session->state;
	pthread_mutex_lock(&st->mu);
	stream_unlink_locked(stream);
	pthread_mutex_unlock(&st->mu);
	stream_free(stream);
}

/* Forgets finished streams nobody reads that are old, or past the number kept (st->mu
 * held); returns the streams still running. */
static size_t prune_streams_locked(struct http_session *s, time_t now)
{
	size_t kept = 0, running = 0;
	struct http_stream **p = &s->streams; /* newest first */
	while (*p) {
		struct http_stream *t = *p;
		running += !t->done;
		kept++;
		if (t->done && !t->reading &&
		    (now - t->done_at > (time_t)s->state->keep_seconds ||
		     kept > MAX_STREAMS_KEPT)) {
			*p = t->next;
			stream_free(t);
			kept--;
			continue;
		}
		p = &t->next;
	}
	return running;
}

size_t aks__http_state_sweep(struct http_state *st)
{
	time_t now = time(NULL);
	size_t running = 0;
	struct http_session *ended = NULL;
	pthread_mutex_lock(&st->mu);
	struct http_session **p = &st->sessions;
	while (*p) {
		struct http_session *s = *p;
		size_t r = prune_streams_locked(s, now);
		running += r;
		/* Idle: no call running, no request using it, unused for idle_seconds. */
		if (r == 0 && s->refs == 1 && now - s->last_used > (time_t)st->idle_seconds) {
			*p = s->next;
			s->listed = false;
			st->session_count--;
			s->next = ended;
			ended = s;
			continue;
		}
		p = &s->next;
	}
	pthread_mutex_unlock(&st->mu);
	while (ended) {
		struct http_session *next = ended->next;
		session_close(ended);
		aks__http_session_unref(ended);
		ended = next;
	}
	return running;
}
