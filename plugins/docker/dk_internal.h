/*
 * plugins/docker/dk_internal.h - shared by the docker plugin's files.
 *
 * The plugin speaks the Docker Engine API (version DK_API) over HTTP with
 * libcurl: a unix socket, or TCP with optional TLS, found as the docker CLI
 * finds it (DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH).
 */
#ifndef DK_INTERNAL_H
#define DK_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include <aksandbox/plugin.h>
#include <aksandbox/provider.h>

#include "aks_buf.h"
#include "aks_container.h"

#define DK_NAME      "docker"
#define DK_API       "/v1.41"
#define DK_WORKSPACE "/workspace"
/* Every container and volume we create carries this label (value "1"). */
#define DK_LABEL "io.aksandbox.sandbox"
/* Container names are DK_ID_PREFIX + 32 hex digits; the name is the sandbox id. */
#define DK_ID_PREFIX     "aks-"
#define DK_VOLUME_SUFFIX "-workspace"
/* aksandbox-agent's place in every container (dk_agent.c). Under a read-only root a volume
 * <name>DK_AGENT_VOLUME_SUFFIX of ours is mounted at DK_AGENT_DIR to hold it. */
#define DK_AGENT_DIR_REL       ".aksandbox"
#define DK_AGENT_DIR           "/" DK_AGENT_DIR_REL
#define DK_AGENT_NAME          "aksandbox-agent"
#define DK_AGENT_PATH          DK_AGENT_DIR "/" DK_AGENT_NAME
#define DK_AGENT_VOLUME_SUFFIX "-aksandbox"

/* The file modes the archive API reports (Go's os.FileMode bits). */
#define GO_MODE_DIR     (1u << 31)
#define GO_MODE_SYMLINK (1u << 27)
/* Anything but a regular file: directory, symlink, device, FIFO, socket, ... */
#define GO_MODE_TYPE                                                                               \
	(GO_MODE_DIR | GO_MODE_SYMLINK | (1u << 26) | (1u << 25) | (1u << 24) | (1u << 21) |       \
	 (1u << 19))

/* Tasks (processes and threads) a container may hold by default (pids_limit): room for a
 * build, a test runner or a thread pool; a small share of a host's pid space (32768 by
 * default), so a fork bomb stops at its container. The least accepted leaves room for the
 * container's own processes (docker-init, sleep, the agent and its supervisor, a shell). */
#define DK_PIDS_DEFAULT 512
#define DK_PIDS_MIN     16
#define DK_PIDS_MAX     4194304 /* the kernel's PID_MAX_LIMIT */
/* Under gVisor the container's host tasks are the Sentry's, which needs about 14 for each
 * process it runs (measured on the ptrace platform) and dies when it cannot get one: the
 * host cgroup's backstop above what gVisor's own limit allows (add_pids_limit in docker.c). */
#define DK_GVISOR_HOST_TASKS(n) ((n)*16 + 256)

#define DK_ARCH_RING   8  /* images checked, per provider instance */
#define DK_PLACED_RING 32 /* containers with the agent in place */

typedef struct aks_agent_program aks_agent_program;
typedef struct aks_agent_session aks_agent_session;
typedef struct aks_agent_ops aks_agent_ops;
typedef struct dk_stream dk_stream;

/* Where the engine is. Resolved at init from the config and environment;
 * nothing connects until the first call. */
typedef struct dk_endpoint {
	char *display;   /* DOCKER_HOST form, for messages */
	char *base_url;  /* http://localhost or http(s)://host:port */
	char *unix_path; /* NULL for TCP */
	bool tls, tls_verify;
	char *ca, *cert, *key; /* NULL when the file does not exist */
} dk_endpoint;

struct aks_provider_impl {
	const aks_host_api *host;
	char *image;
	char *runtime; /* NULL: the engine's default */
	char *attach_to;
	char *python;
	char **labels; /* NULL-terminated key, value pairs */
	char **env;    /* "KEY=VALUE" strings, NULL-terminated */
	bool pull;
	bool gvisor;           /* runtime runsc */
	int64_t pids_limit;    /* 0: none of ours */
	char *user;            /* "UID:GID" the containers run as; NULL: the image's user */
	unsigned uid, gid;     /* of user (0:0 without it) */
	aks_capabilities caps; /* the instance's (stateful: cleared in place by aks_agent.h) */
	dk_endpoint ep;
	aks_agent_program *agent; /* aksandbox-agent (disabled: every operation per call) */
	pthread_mutex_t agent_mu; /* the caches below */
	/* What this process has already checked (so a new handle on a known sandbox starts
	 * its agent without asking the engine again): images whose architecture matches the
	 * agent's, containers where the agent is in place. Small rings. */
	char arch_ok[DK_ARCH_RING][144];
	unsigned arch_ok_next;
	char placed[DK_PLACED_RING][144];
	unsigned placed_next;
	aks_ctr_desc
	    desc; /* the "runs" line: the agent module's, and how containers are confined */
};

/* One connection context: a multi handle (the connection cache) and an easy
 * handle, reused call after call. Never shared between threads. */
typedef struct dk_conn {
	const aks_provider_impl *prov;
	CURLM *multi;
	CURL *easy;
} dk_conn;

struct aks_sandbox_impl {
	aks_provider_impl *prov;
	char *id;      /* container name (ours) or the attach_to id */
	bool external; /* attach_to: never created by us */
	dk_conn conn;
	aks_agent_session *agent; /* runs the operations, through the agent or per call */
	/* How much of the current upload's container path exists (dk_upload_file found it
	 * out): dk_put_file makes the directories below it, owned by the containers' user. */
	size_t upload_existing;
};

/* ---- HTTP (dk_http.c) ------------------------------------------------------- */

/* Receives the response body; returns false to abort the transfer. */
typedef bool (*dk_sink_fn)(void *ctx, const char *data, size_t len);

typedef struct dk_req {
	const char *method;       /* GET, POST, PUT, DELETE, HEAD */
	const char *path;         /* after DK_API, with its query, already escaped */
	const char *content_type; /* of body; NULL: application/json */
	const void *body;
	size_t body_len;
	dk_sink_fn sink; /* NULL: the body is collected in resp */
	void *sink_ctx;
	/* out */
	long status;
	aks_buf resp;
	char *path_stat; /* X-Docker-Container-Path-Stat, if sent */
	/* private */
	struct curl_slist *headers;
	char errbuf[CURL_ERROR_SIZE];
	bool active, done, aborted;
	CURLcode result;
} dk_req;

int dk_endpoint_init(dk_endpoint *ep, const char *configured_host, const aks_host_api *host,
                     aks_error **err);
void dk_endpoint_fini(dk_endpoint *ep);

int dk_conn_init(dk_conn *c, const aks_provider_impl *prov, aks_error **err);
void dk_conn_fini(dk_conn *c);

/* One whole request under the call's deadline and cancellation. AKS_OK when
 * an HTTP response came (whatever its status); AKS_ETIMEOUT, AKS_ECANCELLED,
 * or AKS_EPROVISION when the engine cannot be reached. */
int dk_request(dk_conn *c, dk_req *r, const aks_call *call, aks_error **err);
/* The same in steps, for consumers that pull the body (tar reading). */
int dk_begin(dk_conn *c, dk_req *r, aks_error **err);
int dk_pump(dk_conn *c, dk_req *r, const aks_call *call, aks_error **err);
void dk_end(dk_conn *c, dk_req *r);
void dk_req_free(dk_req *r);

/* Percent-encodes s for a URL path segment or query value. */
char *dk_escape(const char *s);
/* Random hex (2 * nbytes digits) into out (2 * nbytes + 1 bytes). */
int dk_random_hex(char *out, size_t nbytes);
/* The error for an unreachable engine. */
int dk_unreachable(const aks_provider_impl *prov, const dk_req *r, aks_error **err);

/* ---- what the engine sends, read without I/O (dk_parse.c) ---------------------------- */

/* A non-TTY exec's output: frames of an 8-byte header (the stream: 0 stdin, 1 stdout,
 * 2 stderr, 3 the engine's own error; three zero bytes; a big-endian 32-bit length) and that
 * many payload bytes, cut into whatever pieces the connection delivers. */
typedef void (*dk_frame_fn)(void *ctx, int stream, const unsigned char *data, size_t len);
typedef struct dk_demux {
	dk_frame_fn fn;
	void *ctx;
	unsigned char hdr[8];
	size_t hlen;      /* header bytes seen so far */
	size_t remaining; /* payload bytes of the current frame still to come */
	int stream;       /* the current frame's */
} dk_demux;

void dk_demux_init(dk_demux *d, dk_frame_fn fn, void *ctx);
/* Hands every payload byte in data[0..len) to fn exactly once, in order, with its frame's
 * stream (never zero bytes); keeps a header cut by the piece's end for the next piece. */
void dk_demux_feed(dk_demux *d, const void *data, size_t len);

/* The head of an HTTP answer (to an upgraded exec start). */
typedef struct dk_head {
	int status;      /* 100..599, or 0 when the status line is not one */
	size_t len;      /* the head's bytes, its empty line included: the body starts there */
	size_t body_len; /* Content-Length; SIZE_MAX when not given or not a number */
} dk_head;
/* False while data[0..len) holds no whole head yet; then *h says what it says (read from
 * the head alone, whatever follows). */
bool dk_head_parse(const char *data, size_t len, dk_head *h);

/* True for a name the engine could accept as a container id or name. */
bool dk_valid_ref(const char *s);
/* r->resp as JSON (NULL if it is not). The caller puts it. */
json_object *dk_resp_json(const dk_req *r);
/* The engine's error message from a response body ({"message": ...}), or the
 * body itself; never NULL. The caller frees it. */
char *dk_engine_message(const dk_req *r);
/* The id in an exec create answer (a valid ref): AKS_OK with *id (the caller frees it),
 * AKS_ERROR when there is none, AKS_ENOMEM. */
int dk_parse_exec_id(const dk_req *r, char **id);
/* What an exec inspect answer says: whether it still runs, and its exit code once it does
 * not (-1 when not known). */
void dk_parse_exec_state(const dk_req *r, bool *running, int *exit_code);
/* X-Docker-Container-Path-Stat: base64 of {"size": ..., "mode": ..., "linkTarget": ...}. */
typedef struct dk_path_stat {
	int64_t size;
	uint32_t mode; /* Go's os.FileMode */
	char *link;    /* a symlink's resolved target (malloc'd); NULL for none */
} dk_path_stat;
/* Fills *st from the header (zeros for what it does not say). AKS_OK or AKS_ENOMEM (then
 * st->link is NULL: the caller must not take the path for a plain one). */
int dk_parse_path_stat(const char *header, dk_path_stat *st);
/* A 200 answer to an image pull can still fail: its progress stream then holds a line
 * {"error": ...}. *failed says whether it does; returns its message (malloc'd; NULL when
 * out of memory), NULL when not failed. */
char *dk_parse_pull_error(const dk_req *r, bool *failed);

/* ---- docker.c ------------------------------------------------------------------ */

/* dk_list.c: the provider's list_sandboxes. */
int dk_list_sandboxes(aks_provider_impl *prov, const char *label_key, const char *label_value,
                      const aks_call *call, aks_sandbox_list_fn fn, void *ctx, aks_error **err);

int dk_gone(const aks_host_api *host, const char *id, aks_error **err);
/* Starts a stopped (or unpauses a paused) container; AKS_EGONE when gone. */
int dk_ensure_running(dk_conn *c, const char *id, const aks_call *call, aks_error **err);

/* ---- dk_exec.c ------------------------------------------------------------------ */

/* The operations: through the handle's agent session, or per call. */
int dk_execute_code(aks_sandbox_impl *sb, const char *code, const char *language,
                    const aks_call *call, aks_result *out, aks_error **err);
int dk_execute_command(aks_sandbox_impl *sb, const char *command, const aks_call *call,
                       aks_result *out, aks_error **err);
int dk_install_packages(aks_sandbox_impl *sb, const char *const *packages, const aks_call *call,
                        aks_result *out, aks_error **err);
/* The per-call way: one docker exec each. */
int dk_run_code(aks_sandbox_impl *sb, const char *code, const char *language, const aks_call *call,
                aks_result *out, aks_error **err);
int dk_run_command(aks_sandbox_impl *sb, const char *command, const aks_call *call, aks_result *out,
                   aks_error **err);
int dk_run_argv(aks_sandbox_impl *sb, const char *const *argv, const aks_call *call,
                aks_result *out, aks_error **err);
/* POST /containers/{id}/exec: argv in workdir, stdout and stderr attached (and stdin with
 * attach_stdin), no TTY, with AKS_EXEC_ID=marker when marker is set. A container stopped
 * behind our back is started once. */
int dk_exec_create(aks_sandbox_impl *sb, const char *const *argv, const char *marker,
                   const char *workdir, bool attach_stdin, const aks_call *call, char **exec_id,
                   aks_error **err);
/* Runs argv in the container from /, output to `out` (NULL: discarded), and reports
 * its exit code in *exit_code. Used by the plugin itself (mkdir). */
int dk_exec_argv(aks_sandbox_impl *sb, const char *const *argv, const aks_call *call,
                 aks_result *out, int *exit_code, aks_error **err);

/* ---- dk_files.c ------------------------------------------------------------------ */

int dk_upload_file(aks_sandbox_impl *sb, const char *path, const void *data, size_t len,
                   const aks_call *call, aks_error **err);
int dk_download_file(aks_sandbox_impl *sb, const char *path, const aks_call *call, aks_result *out,
                     aks_error **err);
/* The per-call way, with the archive API: cpath is the checked container path. */
int dk_put_file(void *sb, const char *path, const char *cpath, const void *data, size_t len,
                const aks_call *call, aks_error **err);
int dk_get_file(void *sb, const char *path, const char *cpath, const aks_call *call,
                aks_result *out, aks_error **err);
/* The reference's path rule: the absolute container path for an agent's
 * path, or AKS_EPOLICY when it escapes DK_WORKSPACE. */
int dk_safe_path(const aks_host_api *host, const char *path, char **out, aks_error **err);

/* ---- dk_stream.c: an exec's stdio as two fds ------------------------------------------ */

/* Starts exec_id (created with stdin attached) on a hijacked connection and returns the
 * client's ends: *rfd reads the program's stdout, *wfd writes its stdin (closing it ends
 * stdin). stderr goes to the log. */
int dk_stream_open(const aks_provider_impl *prov, const char *container, const char *exec_id,
                   const aks_call *call, dk_stream **out, int *rfd, int *wfd, aks_error **err);
/* After the client closed its ends: waits up to wait_ms for the program to end its output,
 * then tears down; what it said (stderr, or unframed first output) goes to stderr_buf. */
void dk_stream_close(dk_stream *s, int wait_ms, char *stderr_buf, size_t stderr_len);

/* ---- dk_agent.c: aksandbox-agent's placement and stream -------------------------------- */

/* The agent module's table for this provider (plugins/common/agent/aks_agent.h). */
extern const aks_agent_ops dk_agent_ops;
/* Copies the agent into a container just created from the configured image (not started):
 * AKS_OK with *why NULL when it is there, or with *why (malloc'd) when it cannot be; else
 * the engine's failure. into_dir: a volume of ours is mounted at DK_AGENT_DIR. */
int dk_agent_place_new(dk_conn *c, const char *id, bool into_dir, const aks_call *call, char **why,
                       aks_error **err);

#endif /* DK_INTERNAL_H */
