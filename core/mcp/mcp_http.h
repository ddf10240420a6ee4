/*
 * core/mcp/mcp_http.h - the Streamable HTTP transport's pieces (internal to core/mcp/).
 *
 *  - mcp_http_state.c: sessions (one aks__mcp_server each, named by Mcp-Session-Id) and
 *    the streams of their requests (every message a request causes, kept with sequence
 *    numbers so a client that lost the connection resumes with Last-Event-ID).
 *  - mcp_http.c: the listening socket, libmicrohttpd, and the HTTP side of each method.
 *  - mcp_http_parse.c: the header values the transport reads itself (fuzzed).
 *  - mcp_http_auth.c: bearer tokens through the principal resolver, and the
 *    protected-resource metadata.
 *
 * Locking: one mutex (http_state.mu) guards the session table, the reference counts and
 * every stream. It is never held while calling into a server (aks__mcp_server_*), since a
 * server writes into streams from its call threads holding its own write lock.
 */
#ifndef AKS_CORE_MCP_MCP_HTTP_H
#define AKS_CORE_MCP_MCP_HTTP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "mcp.h"

/* One message a request caused: a JSON-RPC line without its newline. */
struct http_event {
	char *data;
	size_t len;
};

/* The messages of one POSTed request, in order; event n (from 1) has id "<id>-<n>". */
struct http_stream {
	struct http_session *session;
	uint64_t id;
	struct http_event *events;
	size_t count, cap;
	bool done;         /* the server has said its last word for the request */
	bool reading;      /* a connection is streaming it now */
	unsigned reader;   /* which one: a resumption takes the stream over (reader++) */
	time_t done_at;    /* when it became done: kept a while for resumption */
	pthread_cond_t cv; /* a message came, or it is done */
	struct http_stream *next;
};

struct http_session {
	struct http_state *state;
	char id[33]; /* 128 random bits, hex: the Mcp-Session-Id */
	aks__mcp_server *server;
	pthread_mutex_t dispatch; /* one message into the server at a time */
	bool closed;              /* deleted or shut down: takes no message (dispatch held) */
	char *owner;              /* the subject of the user who opened it; NULL: no auth */
	bool listed;              /* in the table (until it ends) */
	bool stateless;           /* one 2026-07-28 request's: no id a client could name */
	unsigned refs;            /* the table's, and one per HTTP request using it */
	time_t last_used;
	uint64_t next_stream;
	struct http_stream *streams;
	struct http_session *next;
};

struct http_state {
	pthread_mutex_t mu;
	aks__mcp_options server_options; /* each session's, with write/route_done set here */
	struct http_session *sessions;
	size_t session_count, max_sessions;
	unsigned idle_seconds; /* a session unused this long (and idle) ends */
	unsigned keep_seconds; /* a finished stream stays resumable this long */
	bool stopping;
};

/* The server options are copied (the strings in them stay the caller's). */
void aks__http_state_init(struct http_state *st, const aks__mcp_options *server_options,
                          size_t max_sessions, unsigned idle_seconds);
/* Ends every session (cancelling what runs); a session still used by a request is freed
 * when that request lets it go. */
void aks__http_state_clear(struct http_state *st);
/* After the last request is gone. */
void aks__http_state_destroy(struct http_state *st);

/* A new session in the table with a reference for the caller: an initialize's, or one
 * stateless request's (ended with aks__http_session_end when the request is done, which
 * cancels what it still runs). NULL when out of memory or the table is full (*full). */
struct http_session *aks__http_session_new(struct http_state *st, bool stateless, const char *owner,
                                           bool *full);
/* The session (not a stateless one) with this id and owner (NULL: none), with a reference
 * for the caller; NULL: none such. */
struct http_session *aks__http_session_find(struct http_state *st, const char *id,
                                            const char *owner);
void aks__http_session_unref(struct http_session *s);
/* Takes a session out of the table and cancels its calls (a DELETE). */
void aks__http_session_end(struct http_session *s);
/*
 * Hands one message to the session's server (a tools/call runs with `attributes`, see
 * aks__mcp_server_handle). For a request, returns its new stream
 * (owned by the session); NULL for anything else, or when the session is closed
 * (*closed) or out of memory.
 */
struct http_stream *aks__http_session_handle(struct http_session *s, const char *body, size_t len,
                                             bool is_request, const char *const *attributes,
                                             bool *closed);
/* The stream of this session with this id, or NULL. Caller holds st->mu. */
struct http_stream *aks__http_stream_find_locked(struct http_session *s, uint64_t id);
/* Removes and frees a done stream nobody reads (its answer went out as JSON). */
void aks__http_stream_drop(struct http_stream *stream);

/* ---- bearer authentication (mcp_http_auth.c) ------------------------------------------ */

struct http_auth {
	aks_resolver *resolver; /* NULL: no authentication */
	const char *attribute;  /* the resolver's token attribute */
	const char *conversation, *agent;
	const char *const *servers; /* authorization servers, for the metadata */
	char *resource;             /* this server's URL as clients know it */
	char *metadata_url;         /* where its protected-resource metadata is */
};

enum { AKS_HTTP_AUTH_OK = 0, AKS_HTTP_AUTH_MISSING = 1, AKS_HTTP_AUTH_INVALID = 2 };

/* From the transport's options and the URL it listens on; -1 when out of memory. */
int aks__http_auth_init(struct http_auth *a, const aks__mcp_http_options *opt, const char *url);
void aks__http_auth_clear(struct http_auth *a);
/* Whether a request path is the protected-resource metadata's (with or without the
 * resource's path after it). */
bool aks__http_auth_is_metadata_path(const char *url);
/* The metadata document (JSON, malloc'ed; NULL when out of memory). */
char *aks__http_auth_metadata(const struct http_auth *a);
/*
 * Checks an Authorization header value (NULL: none): AKS_HTTP_AUTH_OK with the user's
 * subject and the token (both malloc'ed), or MISSING / INVALID with the reason in `why`
 * (never the token).
 */
int aks__http_auth_check(const struct http_auth *a, const char *authorization, char **subject,
                         char **token, char *why, size_t why_size);
/* The WWW-Authenticate value for a 401 (malloc'ed; NULL when out of memory). */
char *aks__http_auth_challenge(const struct http_auth *a, int outcome, const char *why);

/* ---- header values (mcp_http_parse.c): what a client sends, checked ---------------- */

/* Whether an Origin ("scheme://host[:port]") names this machine: localhost, 127.0.0.1 or
 * [::1], in any letter case, on any port. */
bool aks__mcp_http_loopback_origin(const char *origin);
/* A Last-Event-ID "<stream>-<seq>" (decimal, nothing else); false for anything else. */
bool aks__mcp_http_parse_event_id(const char *text, uint64_t *stream, uint64_t *seq);

/* Ends idle sessions and forgets old streams; returns the calls still running. */
size_t aks__http_state_sweep(struct http_state *st);

#endif /* AKS_CORE_MCP_MCP_HTTP_H */
