/*
 * core/mcp/mcp.h - `aksandbox mcp`: the eight tools as a Model Context
 * Protocol server over newline-delimited JSON-RPC 2.0 (stdio). Internal to
 * the aksandbox program; built on the public embedding API and json-c only.
 *
 * The pieces:
 *  - mcp_rpc.c: one input line to a classified message (request,
 *    notification, response, or invalid with its JSON-RPC error code), the
 *    response builders and the protocol revisions we speak. No state.
 *  - mcp_server.c: the protocol state (legacy initialize or stateless
 *    requests), dispatch, and the tools/call threads with their cancel tokens.
 *  - mcp_catalog.c: the tools as tools/list offers them (one catalog per
 *    process).
 *  - mcp_loop.c: reading a file descriptor into bounded lines.
 *
 * Two eras of MCP are served by one process, as the 2026-07-28 revision
 * allows ("dual-era"): a client that opens with `initialize` (revisions
 * 2025-11-25 and earlier) gets a session; a request that carries
 * `_meta["io.modelcontextprotocol/protocolVersion"]` (2026-07-28) is served
 * statelessly.
 */
#ifndef AKS_CORE_MCP_MCP_H
#define AKS_CORE_MCP_MCP_H

#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include <json-c/json.h>

#include <aksandbox/aksandbox.h>

/* ---- JSON-RPC and MCP constants ------------------------------------------------ */

#define AKS_MCP_PARSE_ERROR      (-32700)
#define AKS_MCP_INVALID_REQUEST  (-32600)
#define AKS_MCP_METHOD_NOT_FOUND (-32601)
#define AKS_MCP_INVALID_PARAMS   (-32602)
#define AKS_MCP_INTERNAL_ERROR   (-32603)
/* Implementation-defined (-32000..-32019): too many tool calls in flight. */
#define AKS_MCP_SERVER_BUSY (-32000)
/* 2026-07-28: the request's protocol version is not one we serve. */
#define AKS_MCP_UNSUPPORTED_VERSION (-32022)

/* The modern (stateless) revision, and the newest handshake-based one. */
#define AKS_MCP_MODERN_VERSION "2026-07-28"
#define AKS_MCP_LEGACY_LATEST  "2025-11-25"

/* The largest input line (one message) read; longer lines are refused. */
#define AKS_MCP_DEFAULT_MAX_LINE ((size_t)4 << 20)
/* The default wait before a call without a progressToken becomes a pending task: below the
 * 60 s request timeout of the official SDKs and of common clients, so the pending answer
 * reaches the model before the client gives up. */
#define AKS_MCP_DEFAULT_WAIT_TIMEOUT 45.0
#define AKS_MCP_WAIT_NONE            (-1.0)
/* A call with a progressToken that prints nothing hears "still running" this often. */
#define AKS_MCP_DEFAULT_HEARTBEAT_MS 10000u
/* The default bound on concurrent tools/call executions. */
#define AKS_MCP_DEFAULT_MAX_CALLS 16

#define AKS_MCP_META_VERSION      "io.modelcontextprotocol/protocolVersion"
#define AKS_MCP_META_CAPABILITIES "io.modelcontextprotocol/clientCapabilities"
#define AKS_MCP_META_SERVER_INFO  "io.modelcontextprotocol/serverInfo"

/* ---- messages (mcp_rpc.c) ------------------------------------------------------ */

typedef enum aks__mcp_kind {
	AKS_MCP_MSG_INVALID = 0, /* answer error_code with id (may be NULL) */
	AKS_MCP_MSG_REQUEST,
	AKS_MCP_MSG_NOTIFICATION,
	AKS_MCP_MSG_RESPONSE /* from the client: we send no requests, so ignored */
} aks__mcp_kind;

typedef struct aks__mcp_message {
	aks__mcp_kind kind;
	struct json_object *root;   /* owned: the parsed document */
	struct json_object *id;     /* borrowed from root; NULL: none or unusable */
	const char *method;         /* borrowed */
	size_t method_len;          /* may exceed strlen(method): "\u0000" is valid JSON */
	struct json_object *params; /* borrowed; NULL when absent */
	int error_code;             /* for AKS_MCP_MSG_INVALID */
	char error_message[160];
} aks__mcp_message;

/*
 * Classifies one line (no newline; it may hold NULs). Never fails: anything
 * that is not a single JSON-RPC 2.0 request, notification or response is
 * AKS_MCP_MSG_INVALID with -32700 (not JSON) or -32600 (a batch, or not a
 * valid message). Params that are present must be an object (-32602 for a
 * request). Clear with aks__mcp_message_clear().
 */
void aks__mcp_parse(const char *line, size_t len, aks__mcp_message *msg);
void aks__mcp_message_clear(aks__mcp_message *msg);

/* Whether a value may serve as a request id (a string or a number). */
bool aks__mcp_id_valid(struct json_object *id);
/* Ids compare equal by type and value (1 and "1" differ). */
bool aks__mcp_id_equal(struct json_object *a, struct json_object *b);

/* {"jsonrpc": "2.0", "id": id|null, "error": {code, message[, data]}};
 * id is copied, data (may be NULL) is taken. NULL when out of memory. */
struct json_object *aks__mcp_error(struct json_object *id, int code, const char *message,
                                   struct json_object *data);
/* {"jsonrpc": "2.0", "id": id, "result": result}; result is taken. */
struct json_object *aks__mcp_result(struct json_object *id, struct json_object *result);
/* One line of output: compact JSON, '/' unescaped, then '\n' (malloc'ed). */
char *aks__mcp_serialize(struct json_object *msg, size_t *len);

/* Handshake negotiation: the requested revision if we speak it, else the
 * newest handshake-based one. */
const char *aks__mcp_negotiate(const char *requested);
/* The handshake-based revisions we speak, newest first, NULL-terminated. */
extern const char *const aks__mcp_legacy_versions[];
/* Whether a negotiated revision has structuredContent (2025-06-18 on). */
bool aks__mcp_has_structured_content(const char *version);
/* ["2026-07-28", "2025-11-25", ...]: every revision, newest first. */
struct json_object *aks__mcp_supported_versions(void);

/* ---- the tool catalog (mcp_catalog.c) -------------------------------------------- */

/* Builds the process's catalog once (later calls return at once): AKS_OK or AKS_ENOMEM. */
int aks__mcp_catalog_ensure(aks_runtime *rt, const aks_settings *settings);
/* Whether a tool of that name is in the catalog. */
bool aks__mcp_catalog_has(const char *name);
/* A copy of the tools/list array; outputSchema only when asked for (the revisions with
 * structuredContent). Never NULL: an empty array when the catalog is not built. */
struct json_object *aks__mcp_catalog_tools(bool output_schemas);

/* ---- the server (mcp_server.c) ------------------------------------------------- */

/* Writes one whole message line (with its '\n'); 0, or -1 when the peer is
 * gone. Called with the server's write lock held: one line at a time. `route` is
 * what the transport handed in with the request this message answers or reports on
 * (aks__mcp_server_handle); NULL on stdio. */
typedef int (*aks__mcp_write_fn)(void *userdata, void *route, const char *line, size_t len);
/* Nothing more will be written for the request handed in with `route`: its response
 * went out, or it was cancelled and gets none. Called exactly once per non-NULL route,
 * from the thread that wrote last for it, with no lock held. */
typedef void (*aks__mcp_route_done_fn)(void *userdata, void *route);

typedef struct aks__mcp_options {
	aks_runtime *rt;              /* borrowed */
	const aks_settings *settings; /* borrowed: the agents filter */
	const char *conversation_id;  /* copied */
	const char *agent;            /* copied; may be NULL */
	size_t max_calls;             /* 0: AKS_MCP_DEFAULT_MAX_CALLS */
	/* Seconds a run_code or run_command without a progressToken waits before it answers
	 * with a pending task (aks_tool_context.wait_timeout): 0, the smaller of
	 * AKS_MCP_DEFAULT_WAIT_TIMEOUT and broker.wait_timeout; AKS_MCP_WAIT_NONE, a task at
	 * once. One with a progressToken waits for the whole run, with a "still running"
	 * notification after each heartbeat_ms without one (0: AKS_MCP_DEFAULT_HEARTBEAT_MS). */
	double wait_timeout;
	unsigned heartbeat_ms;
	aks__mcp_write_fn write;
	aks__mcp_route_done_fn route_done; /* may be NULL (stdio) */
	void *write_data;
} aks__mcp_options;

typedef struct aks__mcp_server aks__mcp_server;

/* AKS_OK, or AKS_ENOMEM. */
int aks__mcp_server_new(const aks__mcp_options *opt, aks__mcp_server **out);
/* Handles one input line (without its newline). Requests other than
 * tools/call are answered before it returns; a tools/call runs on a thread
 * of its own and answers when done. */
void aks__mcp_server_handle_line(aks__mcp_server *s, const char *line, size_t len);
/* The same for a transport that routes each request's messages (HTTP): whatever the
 * message causes is written with `route`, then route_done(route) follows, once. A
 * tools/call it starts runs with `attributes` (key, value pairs for the principal
 * resolver, NULL-terminated, copied; NULL: none), such as the caller's bearer token.
 * Calls on one server must not overlap (the transport serializes them). */
void aks__mcp_server_handle(aks__mcp_server *s, const char *line, size_t len, void *route,
                            const char *const *attributes);
/* The tools/call executions in flight. */
size_t aks__mcp_server_calls_running(aks__mcp_server *s);
/* A line of more than `limit` bytes was discarded unread: answers -32600. */
void aks__mcp_server_handle_oversized(aks__mcp_server *s, size_t limit);
/* Joins the tools/call threads that have finished. */
void aks__mcp_server_reap(aks__mcp_server *s);
/* Cancels every call in flight (their programs are killed) and joins them. */
void aks__mcp_server_shutdown(aks__mcp_server *s);
/* Whether writing to the peer has failed (time to stop). */
bool aks__mcp_server_peer_gone(aks__mcp_server *s);
/* Shuts down first if needed. */
void aks__mcp_server_free(aks__mcp_server *s);

/* ---- the Streamable HTTP transport (mcp_http.c, mcp_http_state.c) -------------- */

/* Defaults of the HTTP transport's bounds. */
#define AKS_MCP_HTTP_MAX_CONNECTIONS 256u
#define AKS_MCP_HTTP_MAX_SESSIONS    1024u
#define AKS_MCP_HTTP_SESSION_IDLE    3600u /* seconds */
#define AKS_MCP_HTTP_DRAIN           10u   /* seconds, at SIGTERM */

typedef struct aks__mcp_http_options {
	aks__mcp_options
	    server;           /* each session's server (its write callbacks are the transport's) */
	const char *listen;   /* "[HOST:]PORT" (HOST: 127.0.0.1), "[V6]:PORT" or "unix:PATH" */
	const char *tls_cert; /* PEM files: both or neither */
	const char *tls_key;
	const char *const *allowed_origins; /* beyond loopback ones; NULL-terminated; may be NULL */
	size_t max_body;                    /* 0: AKS_MCP_DEFAULT_MAX_LINE */
	unsigned max_connections;           /* 0: the defaults above */
	size_t max_sessions;
	unsigned session_idle_seconds;
	unsigned drain_seconds; /* calls running at *stop get this long before they are cancelled */
	unsigned keepalive_seconds;          /* a silent stream's comment; 0: 15 */
	unsigned connection_timeout_seconds; /* an idle connection closes; 0: 60 */
	/* Bearer authentication, when `resolver` is set: every request to the endpoint carries
	 * "Authorization: Bearer TOKEN", which the resolver (given it as the attribute
	 * token_attribute) must resolve to a user principal, or the answer is 401. That user
	 * owns the sessions they open (another user's session id is unknown to them), their
	 * calls carry the token to the runtime's resolver, and their conversation is
	 * "<server.conversation_id>:<subject>". Non-loopback addresses are allowed then. */
	aks_resolver *resolver;
	const char *token_attribute; /* NULL: "token" */
	const char *resource_url;    /* the metadata's "resource"; NULL: the URL */
	const char *const
	    *authorization_servers; /* for the metadata; NULL-terminated; may be NULL */
} aks__mcp_http_options;

/* Serves until *stop; 0, or -1 when it could not start (said on stderr). */
int aks__mcp_http_serve(const aks__mcp_http_options *opt, volatile sig_atomic_t *stop);

/* One diagnostic line on stderr, "aksandbox: mcp: ..." (never stdout: it carries the
 * stdio transport's messages). */
void aks__mcp_log(const char *fmt, ...) AKS_PRINTF(1, 2);
void aks__mcp_vlog(const char *fmt, va_list ap) AKS_PRINTF(1, 0);

/* ---- the read loop (mcp_loop.c) ------------------------------------------------ */

/*
 * Reads `fd` until end of file, an error, the peer going away or *stop,
 * handing each line (at most max_line bytes; longer ones are discarded
 * through their newline and refused) to the server. A '\r' before the
 * newline is dropped and blank lines are skipped. Returns 0 at end of file
 * or *stop, -1 on a read error (errno set). Does not shut the server down.
 */
int aks__mcp_serve_fd(aks__mcp_server *s, int fd, size_t max_line, volatile sig_atomic_t *stop);

#endif /* AKS_CORE_MCP_MCP_H */
