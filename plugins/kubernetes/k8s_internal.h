/*
 * plugins/kubernetes/k8s_internal.h - shared by the kubernetes plugin's files.
 *
 * Layers, each in its own file and each testable on its own:
 *   k8s_util.c       errors without the host, whole-file reads
 *   k8s_kubeconfig.c where the API server is and how to authenticate (libyaml)
 *   k8s_manifest.c   the Pod and NetworkPolicy objects we create (json-c)
 *   k8s_channel.c    the exec WebSocket's channel framing and status
 *   k8s_pod.c        what a pod's status says
 *   k8s_rest.c       the REST client (libcurl), impersonation, API errors
 *   k8s_exec.c       exec over WebSocket (libwebsockets)
 *   k8s_stream.c     the agent's long-lived exec stream
 *   k8s_files.c      files as tar (libarchive) through exec
 *   k8s_agent.c      aksandbox-agent in the pod
 *   kubernetes.c     the descriptor, the instance and the sandbox lifecycle
 * The first five never touch the host table: they are declared in k8s_pure.h (included
 * here) and built as libk8s-pure, so unit tests and fuzz targets link them without the
 * core. This header adds the layers that need the host, libcurl and libwebsockets.
 */
#ifndef K8S_INTERNAL_H
#define K8S_INTERNAL_H

#include <pthread.h>

#include <curl/curl.h>

#include "aks_container.h"
#include "k8s_pure.h"

/* ---- the provider instance (kubernetes.c) ------------------------------------------- */

typedef struct k8s_client k8s_client;
typedef struct k8s_stream k8s_stream;
typedef struct aks_agent_program aks_agent_program;
typedef struct aks_agent_session aks_agent_session;
typedef struct aks_agent_ops aks_agent_ops;

struct aks_provider_impl {
	const aks_host_api *host;
	k8s_conn_cfg conn;
	/* config values: borrowed from the host's config, alive until fini */
	const char *namespace, *image, *image_pull_policy, *attach_to, *python;
	const char *service_account, *security_context, *container_security_context;
	const char *const *labels, *const *node_selector, *const *env, *const *image_pull_secrets;
	bool network_policy;
	double create_timeout;
	int64_t max_lifetime;
	aks_capabilities caps;    /* the instance's */
	aks_agent_program *agent; /* the aksandbox-agent placed in pods (disabled: per call) */
	aks_ctr_desc desc;        /* the "runs" line: the agent module's, and what pods enforce */
	pthread_mutex_t lock;     /* guards clients */
	k8s_client *clients;      /* one per identity, kept until fini */
};

struct aks_sandbox_impl {
	aks_provider_impl *prov;
	char *id; /* <namespace>/<pod> */
	char *ns, *pod;
	bool external;            /* attach_to: never created by us */
	k8s_client *client;       /* the principal's identity */
	void *exec_ctx;           /* the libwebsockets context, made on first exec */
	void *exec_tls;           /* its client SSL_CTX (https), ours to free after it */
	aks_agent_session *agent; /* runs the operations: through the agent or per call */
};

/* ---- REST (k8s_rest.c) ----------------------------------------------------------------- */

struct k8s_client {
	k8s_client *next;
	aks_provider_impl *prov;
	char *user;    /* NULL: the configured identity itself */
	char **groups; /* NULL-terminated */
	CURLSH *share; /* connections and TLS sessions, shared by this identity's requests */
	pthread_mutex_t locks[CURL_LOCK_DATA_LAST];
};

typedef struct k8s_req {
	const char *method; /* GET, POST, DELETE */
	const char *path;   /* /api/v1/..., escaped */
	const char *body;   /* JSON */
	size_t body_len;
	/* out */
	long status;
	aks_buf resp;
	CURLcode result;
	char errbuf[CURL_ERROR_SIZE];
} k8s_req;

/* The client of the call's principal (agent mode: the configured identity;
 * user mode: impersonation of credentials user/groups, else subject/groups). */
int k8s_client_for(aks_provider_impl *prov, const aks_principal *principal, k8s_client **out,
                   aks_error **err);
/* The configured identity's own client (destroy, cleanup). */
int k8s_client_own(aks_provider_impl *prov, k8s_client **out, aks_error **err);
void k8s_clients_free(aks_provider_impl *prov);
/* One request under the call's deadline and cancellation: AKS_OK when an HTTP
 * response came (any status); AKS_EPROVISION for an unreachable server or a
 * TLS failure, explained; AKS_ETIMEOUT, AKS_ECANCELLED. */
int k8s_request(k8s_client *c, k8s_req *r, const aks_call *call, aks_error **err);
void k8s_req_free(k8s_req *r);
json_object *k8s_resp_json(const k8s_req *r);
/* An error for a non-2xx answer: "<what>: <explanation>", with what a 401 or a
 * 403 means (the verb and resource the identity lacks). Returns code. */
int k8s_api_error(k8s_client *c, const k8s_req *r, int code, const char *what, aks_error **err);
/* The headers every request of this client carries (token, impersonation),
 * as "Name: value" strings; the caller frees the list. NULL on no memory. */
struct curl_slist *k8s_auth_headers(k8s_client *c, bool *ok);
char *k8s_escape(const char *s);
/* strlen(k8s_escape(s)), without making it. */
size_t k8s_escaped_len(const char *s);
/* "who" for messages: the impersonated user and groups, or the source. */
void k8s_client_who(const k8s_client *c, char *out, size_t len);

/* AKS_EGONE "sandbox pod 'ID' WHY" (the core's self-heal signal). */
/* k8s_list.c: the provider's list_sandboxes. */
int k8s_list_sandboxes(aks_provider_impl *prov, const char *label_key, const char *label_value,
                       const aks_call *call, aks_sandbox_list_fn fn, void *ctx, aks_error **err);

int k8s_gone(const aks_host_api *host, const char *id, const char *why, aks_error **err);

/* ---- exec (k8s_exec.c) ------------------------------------------------------------------ */

/* Runs argv in the sandbox's container from workdir: stdin (may be NULL)
 * is sent then half-closed (v5) or, on v4, the command must not need EOF;
 * stdout and stderr go to `out` (NULL: discarded) or, when capture is set,
 * stdout is kept there whole (bounded by capture_max). On the deadline or
 * cancellation every process of the execution is killed. */
typedef struct k8s_exec_opts {
	const char *const *argv;
	const char *workdir;
	const void *stdin_data;
	size_t stdin_len;
	aks_result *out;
	aks_buf *capture;     /* stdout here instead of out */
	aks_buf *capture_err; /* stderr here, bounded too */
	size_t capture_max;
	bool no_kill_wrapper; /* the kill sweep itself */
} k8s_exec_opts;

/* The reference's path rule (k8s_safe_path) with its message as the operation's error: the
 * canonical path in the container, malloc'ed (k8s_files.c). */
int k8s_sandbox_path(aks_sandbox_impl *sb, const char *path, char **cpath, aks_error **err);
/* Whether the handle's pod still exists and is not being deleted: AKS_OK, AKS_EGONE, or the
 * API's error (kubernetes.c). */
int k8s_pod_check(aks_sandbox_impl *sb, const aks_call *call, aks_error **err);
int k8s_exec(aks_sandbox_impl *sb, const k8s_exec_opts *o, const aks_call *call, int *exit_code,
             aks_error **err);
void k8s_exec_ctx_free(aks_sandbox_impl *sb);
int k8s_execute_code(aks_sandbox_impl *sb, const char *code, const char *language,
                     const aks_call *call, aks_result *out, aks_error **err);
int k8s_execute_command(aks_sandbox_impl *sb, const char *command, const aks_call *call,
                        aks_result *out, aks_error **err);
/* argv from the workspace, its output to out: install_packages' per-call way. */
int k8s_run_argv(aks_sandbox_impl *sb, const char *const *argv, const aks_call *call,
                 aks_result *out, aks_error **err);

/* Pieces of the exec client that the agent's long-lived stream (k8s_stream.c) shares. */
struct lws;
struct lws_context;
struct lws_protocols;
typedef struct k8s_url { /* scheme://host[:port][/prefix] */
	bool tls;
	char host[256];
	int port;
	char prefix[256];
} k8s_url;
extern const char k8s_exec_wrapper[]; /* sh -c: $1 marker, $2 workdir, then the command */
bool k8s_parse_server(const char *s, k8s_url *u);
char *k8s_exec_path(aks_sandbox_impl *sb, const char *const *argv, bool with_stdin);
/* A client context for the provider's server; *tls gets the client SSL_CTX it uses (NULL for
 * http), which k8s_lws_context_free frees after the context: libwebsockets 4.1 cannot be
 * trusted to free its own while other contexts exist (see k8s_exec.c). */
struct lws_context *k8s_lws_context_new(aks_provider_impl *prov, const struct lws_protocols *protos,
                                        void *user, void **tls, aks_error **err);
void k8s_lws_context_free(struct lws_context *ctx, void *tls);
int k8s_lws_add_headers(struct lws *wsi, struct curl_slist *headers, unsigned char **p,
                        unsigned char *end);
void k8s_random_hex(char *out, size_t nbytes);

/* ---- the agent's stream (k8s_stream.c) ------------------------------------------------ */

/* Opens one exec WebSocket running argv (with stdin) and bridges it to two sockets: the
 * bytes written to *wfd go to the program's stdin (channel 0), its stdout (channel 1)
 * comes out of *rfd, its stderr goes to the log, and the status (channel 3) ends the
 * stream. The libwebsockets loop runs on a thread of its own for the stream's life.
 * Closing *wfd closes the program's stdin (v5: channel 255; v4: the connection). */
int k8s_stream_open(aks_sandbox_impl *sb, const char *const *argv, const aks_call *call,
                    k8s_stream **out, int *rfd, int *wfd, aks_error **err);
/* Waits (a little) for the connection to end, forces it otherwise, and frees everything.
 * Call after the sockets' other ends are closed. said (len > 0) gets the start of what the
 * program wrote on stderr, NUL-terminated: raw bytes from the pod. */
void k8s_stream_close(k8s_stream *s, char *said, size_t len);
/* The protocol the server chose, "" before the connection. */
const char *k8s_stream_protocol(const k8s_stream *s);

/* ---- the agent (k8s_agent.c) ------------------------------------------------------------- */

/* The agent module's table for this provider (plugins/common/agent/aks_agent.h). */
extern const aks_agent_ops k8s_agent_ops;
/* The sandbox operations: through the agent when it is up, else per call. */
int k8s_op_execute_code(aks_sandbox_impl *sb, const char *code, const char *language,
                        const aks_call *call, aks_result *out, aks_error **err);
int k8s_op_execute_command(aks_sandbox_impl *sb, const char *command, const aks_call *call,
                           aks_result *out, aks_error **err);
int k8s_op_install_packages(aks_sandbox_impl *sb, const char *const *packages, const aks_call *call,
                            aks_result *out, aks_error **err);
int k8s_op_upload_file(aks_sandbox_impl *sb, const char *path, const void *data, size_t len,
                       const aks_call *call, aks_error **err);
int k8s_op_download_file(aks_sandbox_impl *sb, const char *path, const aks_call *call,
                         aks_result *out, aks_error **err);

/* ---- files (k8s_files.c) ----------------------------------------------------------------- */

int k8s_upload_file(aks_sandbox_impl *sb, const char *path, const void *data, size_t len,
                    const aks_call *call, aks_error **err);
int k8s_download_file(aks_sandbox_impl *sb, const char *path, const aks_call *call, aks_result *out,
                      aks_error **err);

#endif /* K8S_INTERNAL_H */
