/*
 * plugins/kubernetes/k8s_pure.h - the kubernetes plugin's host-free layers (libk8s-pure):
 *   k8s_util.c       errors without the host, whole-file reads
 *   k8s_kubeconfig.c where the API server is and how to authenticate (libyaml)
 *   k8s_manifest.c   the Pod and NetworkPolicy objects we create (json-c)
 *   k8s_channel.c    the exec WebSocket's channel framing and status
 *
 * A header apart from k8s_internal.h (which the rest of the plugin includes, and which
 * includes this one) for a reason: nothing declared here touches the host table, libcurl or
 * libwebsockets, so the unit tests and fuzz targets link these layers without the core, a
 * network or a cluster. Keep it that way.
 */
#ifndef K8S_PURE_H
#define K8S_PURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include <aksandbox/plugin.h>
#include <aksandbox/provider.h>

#include "aks_buf.h"

#define K8S_NAME      "kubernetes"
#define K8S_WORKSPACE "/workspace"
/* Where aksandbox-agent is placed in the pods we create: an emptyDir of its own, so a
 * read-only root filesystem does not matter and a restarted container still has it. */
#define K8S_AGENT_DIR "/.aksandbox"
/* Pods are K8S_POD_PREFIX + 12 hex digits, as the reference. */
#define K8S_POD_PREFIX    "ak-sandbox-"
#define K8S_MANAGED_BY    "agent-kernel"
#define K8S_LABEL_SANDBOX "agentkernel.io/sandbox"
#define K8S_LABEL_NAME    "agentkernel.io/sandbox-name"
/* The in-cluster service-account directory. */
#define K8S_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/* ---- errors without the host (k8s_util.c) ----------------------------------------- */

typedef struct k8s_err {
	int code; /* aks_status */
	char msg[1024];
} k8s_err;

/* Stores the first error only; returns code. */
int k8s_err_set(k8s_err *e, int code, const char *fmt, ...) AKS_PRINTF(3, 4);

/* Buffers are aks_buf (plugins/common/aks_buf.h). */

/* The reference's path rule: the absolute container path for an agent's
 * path (a leading '/' means the workspace), normalised lexically, or
 * AKS_EPOLICY when it escapes K8S_WORKSPACE. */
int k8s_safe_path(const char *path, char **out, k8s_err *e);

/* ---- connection configuration (k8s_kubeconfig.c) ----------------------------------- */

typedef struct k8s_blob {
	char *data; /* NUL-terminated past len; NULL when absent */
	size_t len;
} k8s_blob;

typedef struct k8s_conn_cfg {
	char *source;     /* "kubeconfig /path (context 'x')" or "in-cluster configuration" */
	char *server;     /* https://host:port[/prefix], no trailing '/' */
	char *namespace;  /* the context's namespace, or NULL */
	k8s_blob ca;      /* PEM bundle; absent = the system's CAs */
	k8s_blob cert;    /* client certificate, PEM */
	k8s_blob key;     /* its key, PEM */
	char *token;      /* bearer token */
	char *token_file; /* re-read on every connection (rotated service-account tokens) */
	char *tls_server_name;
	bool insecure; /* insecure-skip-tls-verify */
} k8s_conn_cfg;

/*
 * Parses kubeconfig text. `path` names the file in messages and anchors its
 * relative paths; `context` selects a context (NULL: current-context).
 * Referenced files (certificate-authority, client-certificate, client-key,
 * tokenFile) are read here, so a missing one is a clear error now.
 */
int k8s_kubeconfig_parse(const char *text, size_t len, const char *path, const char *context,
                         k8s_conn_cfg *out, k8s_err *e);
/*
 * Finds and loads the configuration: `configured` (the plugin's kubeconfig
 * key); else, in a pod (KUBERNETES_SERVICE_HOST set and a service-account
 * token under sa_dir, NULL = K8S_SA_DIR), the in-cluster configuration; else
 * the first entry of KUBECONFIG, else ~/.kube/config.
 */
int k8s_conn_cfg_load(const char *configured, const char *context, const char *sa_dir,
                      k8s_conn_cfg *out, k8s_err *e);
void k8s_conn_cfg_free(k8s_conn_cfg *c);
/* The bearer token for the next connection (token_file re-read), or NULL.
 * The caller frees it. */
char *k8s_conn_token(const k8s_conn_cfg *c);

/* ---- manifests (k8s_manifest.c) ---------------------------------------------------- */

typedef struct k8s_pod_params {
	const char *name;
	const char *namespace;
	const char *image;
	const char *image_pull_policy;          /* NULL: the cluster's default */
	const char *const *labels;              /* key, value pairs */
	const char *const *node_selector;       /* key, value pairs */
	const char *const *env;                 /* key, value pairs */
	const char *service_account;            /* NULL: none */
	const char *const *image_pull_secrets;  /* names */
	const char *security_context;           /* JSON object text (pod level), NULL or {} */
	const char *container_security_context; /* JSON object text, overlays the defaults */
	int64_t max_lifetime;                   /* activeDeadlineSeconds; 0 = none */
	bool agent_dir; /* an emptyDir at K8S_AGENT_DIR for aksandbox-agent */
} k8s_pod_params;

/* Whether a filesystem policy is set (any fs list non-empty). */
bool k8s_fs_policy(const aks_policy *p);
/* The Pod object. NULL with *e set (a malformed overlay, out of memory). */
json_object *k8s_pod_manifest(const k8s_pod_params *pp, const aks_policy *pol, k8s_err *e);

/* Called with the dropped domain entries (strict=false). */
typedef void (*k8s_warn_fn)(void *ctx, const char *msg);
/*
 * The NetworkPolicy for the policy's egress, or NULL with *e->code == AKS_OK
 * when none is needed (egress allow, or no policy). Domain entries are refused
 * under strict (AKS_EPOLICY), else dropped with a warning.
 */
json_object *k8s_netpol_manifest(const char *name, const char *namespace, const aks_policy *pol,
                                 k8s_warn_fn warn, void *warn_ctx, k8s_err *e);
/* Python's str(ip_network(s, strict=False)) into out (64 bytes), or false. */
bool k8s_cidr_normalize(const char *s, char *out, size_t outlen);
/* Python's str(float): the shortest text that reads back as v, with ".0" for integers. */
void k8s_format_cpu(double v, char *out, size_t outlen);

/* ---- the exec channel protocol (k8s_channel.c) ------------------------------------ */

#define K8S_PROTO_V5 "v5.channel.k8s.io"
#define K8S_PROTO_V4 "v4.channel.k8s.io"

enum {
	K8S_CH_STDIN = 0,
	K8S_CH_STDOUT = 1,
	K8S_CH_STDERR = 2,
	K8S_CH_ERROR = 3,
	K8S_CH_RESIZE = 4,
	K8S_CH_CLOSE = 255
};

/* Receives stdout (1) and stderr (2) bytes; returns false to stop. */
typedef bool (*k8s_out_fn)(void *ctx, int channel, const char *data, size_t len);

/*
 * Demultiplexes received WebSocket messages. A message may arrive in
 * fragments: feed every fragment, `first` marking a message's first. The
 * first byte of a message is its channel. The status (channel 3) is kept up
 * to K8S_STATUS_MAX bytes; stdout and stderr go to `out`.
 */
#define K8S_STATUS_MAX 65536
typedef struct k8s_demux {
	k8s_out_fn out;
	void *ctx;
	int channel; /* of the message being received; -1 before its first byte */
	aks_buf status;
	bool status_truncated;
	bool stopped; /* out returned false */
	uint64_t bytes[3];
} k8s_demux;

void k8s_demux_init(k8s_demux *d, k8s_out_fn out, void *ctx);
void k8s_demux_feed(k8s_demux *d, const void *data, size_t len, bool first);
void k8s_demux_fini(k8s_demux *d);

/*
 * Turns the status channel's text into an exit code: Success -> 0;
 * NonZeroExitCode with an ExitCode cause -> n. Anything else (another
 * failure, no status at all, unparsable text) is an error whose message is
 * the server's (AKS_ERROR), with the status text in the message.
 */
int k8s_status_exit_code(const char *status, size_t len, int *exit_code, k8s_err *e);

/* Frames one message: channel byte then payload, into a fresh buffer with
 * `pre` bytes of headroom before it (LWS_PRE for lws_write). */
unsigned char *k8s_frame(int channel, const void *data, size_t len, size_t pre, size_t *framed_len);

/* ---- a pod's state (k8s_pod.c) ------------------------------------------------------ */

typedef enum k8s_pod_state {
	K8S_POD_PENDING, /* on its way: scheduled, pulling, creating, or a phase we do not know */
	K8S_POD_RUNNING, /* phase Running and not being deleted */
	K8S_POD_ENDED,   /* being deleted, or phase Succeeded or Failed: it will not run again */
} k8s_pod_state;

/* What a pod object (a GET of the pod, any JSON) says. detail (when not NULL) gets what keeps
 * it from running: its container's waiting reason, else the last condition's message, else
 * the phase, else "unknown". */
k8s_pod_state k8s_pod_state_of(json_object *pod, char *detail, size_t len);

#endif /* K8S_PURE_H */
