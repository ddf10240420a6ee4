/*
 * plugins/daytona/daytona_internal.h - the daytona provider's pieces: the instance and
 * sandbox handles (daytona.c), the control plane's sandbox lifecycle and the requests' headers
 * and error answers (daytona_api.c), commands, code and packages through the sandbox's
 * toolbox (daytona_exec.c), files through the toolbox (daytona_files.c).
 *
 * Where requests go, as the official SDK sends them: the control plane at api_url
 * (https://app.daytona.io/api) with the API key as a bearer token; a sandbox's toolbox at
 * <toolboxProxyUrl>/<sandbox id>, the proxy URL the control plane names for the sandbox, with
 * the same token.
 */
#ifndef DAYTONA_INTERNAL_H
#define DAYTONA_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include <aksandbox/plugin.h>
#include <aksandbox/provider.h>

#include "aks_buf.h"
#include "aks_cloud.h"

#define DAYTONA_NAME "daytona"
/* The sandbox user's home (Daytona's user "daytona"): where commands start and the files of
 * the file tools live. */
#define DAYTONA_HOME "/home/daytona"

struct aks_provider_impl {
	const aks_host_api *host;
	char *image;    /* NULL: the snapshot path */
	char *snapshot; /* NULL: Daytona's default snapshot (unless image or resources) */
	char *target;   /* NULL: the organisation's default */
	char *api_key_env;
	char *api_url;    /* without a trailing '/' */
	json_object *env; /* env_vars: an object of strings (NULL: none) */
	aks_cloud cloud;  /* the HTTP client */
	char *description;
};

struct aks_sandbox_impl {
	aks_provider_impl *prov;
	char *id;
	char *toolbox_url; /* <toolboxProxyUrl>/<id>, without a trailing '/' */
	/* the toolbox session commands run in (created at the first; NULL: none yet), and the
	 * lock that keeps it to one command at a time */
	char *session;
	pthread_mutex_t session_lock;
};

/* ---- requests and answers (daytona_api.c) ---- */

/* The headers of every request: the API key as a bearer token, read from the environment
 * now (never kept), content_type when not NULL, and for the toolbox the request for session
 * logs with their streams' markers. AKS_ECONFIG when the variable is not set. Free with
 * aks_cloud_headers_free (it wipes the key). */
int dt_headers(aks_provider_impl *prov, bool toolbox, const char *content_type,
               struct curl_slist **out, aks_error **err);
/* Sends r with the headers (content type JSON when r has a body) and body as JSON (NULL:
 * none); the answer's JSON object or array in *out when out is not NULL and the answer is a
 * success. An answer that is not a success is AKS_OK with r->status for the caller to judge
 * when out is NULL; with out, it is the error dt_answer_error makes. */
int dt_request(aks_provider_impl *prov, aks_cloud_req *r, json_object *body, const char *id,
               const aks_call *call, json_object **out, aks_error **err);
/* A URL of the control plane (api_url + path) or of the sandbox's toolbox (+ path);
 * malloc'd, NULL when out of memory. */
char *dt_api_url(aks_provider_impl *prov, const char *path);
char *dt_toolbox_url(aks_sandbox_impl *sb, const char *path);
/*
 * The error for an answer that is not a success, worded around r->what: 401/403 say the key
 * was refused, 429 the rate limit, 404 AKS_EGONE ("daytona sandbox '<id>' no longer exists")
 * when id is set, else the answer's message and status with `code`.
 */
int dt_answer_error(aks_provider_impl *prov, const aks_cloud_req *r, const char *id, int code,
                    aks_error **err);
int dt_gone(aks_provider_impl *prov, const char *id, aks_error **err);
/* Whether the toolbox's daemon itself gave the answer (its errors say source
 * DAYTONA_DAEMON), rather than the proxy in front of it. */
bool dt_from_daemon(const aks_cloud_req *r);
/*
 * After a toolbox answer that is not a success: when the proxy rather than the daemon
 * answered, the sandbox is looked up: gone (AKS_EGONE); stopped for idleness while the handle
 * was open, or on its way up (started again and waited for: AKS_OK with *again, send the
 * request again); running (the answer's own error, with code). A daemon's answer is its own
 * error, with code.
 */
int dt_toolbox_failed(aks_sandbox_impl *sb, const aks_cloud_req *r, const aks_call *call, int code,
                      bool *again, aks_error **err);
/* The JSON object of a successful answer, or NULL: "not JSON" set in *err. */
json_object *dt_answer_object(aks_provider_impl *prov, const aks_cloud_req *r, aks_error **err);

/* ---- the control plane (daytona_api.c) ---- */

int dt_sandbox_create(aks_provider_impl *prov, const aks_call *call, aks_sandbox_impl **out,
                      aks_error **err);
int dt_sandbox_attach(aks_provider_impl *prov, const char *id, const aks_call *call,
                      aks_sandbox_impl **out, aks_error **err);
int dt_sandbox_delete(aks_provider_impl *prov, const char *id, const aks_call *call,
                      aks_error **err);
int dt_sandbox_list(aks_provider_impl *prov, const char *key, const char *value,
                    const aks_call *call, aks_sandbox_list_fn fn, void *ctx, aks_error **err);
void dt_sandbox_free(aks_sandbox_impl *sb);

/* ---- execution (daytona_exec.c) and files (daytona_files.c) ---- */

int dt_execute_command(aks_sandbox_impl *sb, const char *command, const aks_call *call,
                       aks_result *out, aks_error **err);
int dt_execute_code(aks_sandbox_impl *sb, const char *code, const char *language,
                    const aks_call *call, aks_result *out, aks_error **err);
int dt_install_packages(aks_sandbox_impl *sb, const char *const *packages, const aks_call *call,
                        aks_result *out, aks_error **err);
int dt_upload_file(aks_sandbox_impl *sb, const char *path, const void *data, size_t len,
                   const aks_call *call, aks_error **err);
int dt_download_file(aks_sandbox_impl *sb, const char *path, const aks_call *call, aks_result *out,
                     aks_error **err);

/* Runs the shell command line in the sandbox's toolbox session; its stdout into capture
 * (bounded: for short answers) and its exit code in *exit_code. */
int dt_run_capture(aks_sandbox_impl *sb, const char *line, const char *what, const aks_call *call,
                   aks_buf *capture, int *exit_code, aks_error **err);
/* Deletes the handle's toolbox session, if any (its processes end with it). */
void dt_session_end(aks_sandbox_impl *sb, const aks_call *call);

#endif /* DAYTONA_INTERNAL_H */
