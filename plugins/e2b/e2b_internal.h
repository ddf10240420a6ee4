/*
 * plugins/e2b/e2b_internal.h - the e2b provider's pieces: the instance and sandbox handles
 * (e2b.c), the headers, URLs and error answers of E2B's requests (e2b_http.c), the control
 * plane's sandbox lifecycle (e2b_api.c), commands through envd's process API and Python
 * through the code interpreter (e2b_exec.c), files through envd (e2b_files.c).
 *
 * Where requests go, as the official SDKs send them: the control plane at api_url
 * (https://api.<domain>) with the API key in X-API-KEY; a sandbox's services at
 * https://<port>-<sandbox id>.<sandbox domain>, or all of them at sandbox_url when set, with
 * E2b-Sandbox-Id and E2b-Sandbox-Port naming the sandbox and the service (envd 49983, the
 * code interpreter 49999) and envd's access token in X-Access-Token.
 */
#ifndef E2B_INTERNAL_H
#define E2B_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <curl/curl.h>
#include <json-c/json.h>

#include <aksandbox/plugin.h>
#include <aksandbox/provider.h>

#include "aks_buf.h"
#include "aks_cloud.h"

#define E2B_NAME             "e2b"
#define E2B_ENVD_PORT        49983
#define E2B_INTERPRETER_PORT 49999
/* The sandbox's user's home: where commands start and the files of the file tools live. */
#define E2B_HOME "/home/user"

struct aks_provider_impl {
	const aks_host_api *host;
	char *template_id;
	char *api_key_env;
	char *api_url;     /* without a trailing '/' */
	char *domain;      /* the sandboxes' domain unless create names another */
	char *sandbox_url; /* every sandbox's services at one URL; NULL: per sandbox and port */
	aks_cloud cloud;   /* the HTTP client: CA bundle, connect timeout, shared connections */
	char *description;
};

struct aks_sandbox_impl {
	aks_provider_impl *prov;
	char *id;
	char *domain;       /* the sandbox's own, or NULL: the provider's */
	char *envd_version; /* "0.0.0" when the service said none */
	char *access_token; /* envd's X-Access-Token; NULL: none */
	double timeout;     /* E2B's timeout we keep: the profile's idle_timeout (0: E2B's) */
	int64_t refreshed_ms;
};

/* ---- HTTP (e2b_http.c; requests go through the shared client, aks_cloud.h) ---- */

/* The control plane's headers: the API key, read from the environment now (never kept),
 * and JSON. AKS_ECONFIG when the variable is not set. Free with e2b_headers_free (it wipes
 * the key). */
int e2b_api_headers(aks_provider_impl *prov, struct curl_slist **out, aks_error **err);
/* A sandbox service's headers (sandbox id, port, access token, envd's user for old envd),
 * plus content_type when not NULL. */
int e2b_sandbox_headers(aks_sandbox_impl *sb, int port, const char *content_type,
                        struct curl_slist **out, aks_error **err);

/* A URL of the control plane (api_url + path) or of a sandbox service (+ path); malloc'd,
 * NULL when out of memory. */
char *e2b_api_url(aks_provider_impl *prov, const char *path);
char *e2b_sandbox_url(aks_sandbox_impl *sb, int port, const char *path);

/*
 * The error for a control-plane or service answer that is not a success, worded around
 * what: 401/403 say the key (or the access token) was refused, 429 the rate limit, 404
 * AKS_EGONE ("e2b sandbox '<id>' no longer exists") when id is set, else the answer's
 * message and status. Returns the code set (AKS_EPROVISION, AKS_EGONE or `code` for the
 * rest).
 */
int e2b_answer_error(aks_provider_impl *prov, const aks_cloud_req *r, const char *id, int code,
                     aks_error **err);
int e2b_gone(aks_provider_impl *prov, const char *id, aks_error **err);

/* ---- the control plane (e2b_api.c) ---- */

int e2b_sandbox_create(aks_provider_impl *prov, const aks_call *call, aks_sandbox_impl **out,
                       aks_error **err);
int e2b_sandbox_connect(aks_provider_impl *prov, const char *id, const aks_call *call,
                        aks_sandbox_impl **out, aks_error **err);
int e2b_sandbox_kill(aks_provider_impl *prov, const char *id, const aks_call *call,
                     aks_error **err);
int e2b_sandbox_list(aks_provider_impl *prov, const char *key, const char *value,
                     const aks_call *call, aks_sandbox_list_fn fn, void *ctx, aks_error **err);
/* Keeps the sandbox alive for its timeout from now, when the last refresh was long enough
 * ago (a tenth of the timeout): E2B's timeout counts from the last refresh, so the sandbox
 * ends the profile's idle_timeout after its last use, as every other provider's does. */
int e2b_sandbox_touch(aks_sandbox_impl *sb, const aks_call *call, aks_error **err);
void e2b_sandbox_free(aks_sandbox_impl *sb);

/* ---- execution (e2b_exec.c) and files (e2b_files.c) ---- */

int e2b_execute_command(aks_sandbox_impl *sb, const char *command, const aks_call *call,
                        aks_result *out, aks_error **err);
int e2b_execute_code(aks_sandbox_impl *sb, const char *code, const char *language,
                     const aks_call *call, aks_result *out, aks_error **err);
int e2b_install_packages(aks_sandbox_impl *sb, const char *const *packages, const aks_call *call,
                         aks_result *out, aks_error **err);
int e2b_upload_file(aks_sandbox_impl *sb, const char *path, const void *data, size_t len,
                    const aks_call *call, aks_error **err);
int e2b_download_file(aks_sandbox_impl *sb, const char *path, const aks_call *call, aks_result *out,
                      aks_error **err);

/* Runs argv in the sandbox as execute_command does, its stdout into out (bounded by the
 * stream's message bound only: for short answers), its exit code in *exit_code. */
int e2b_run_capture(aks_sandbox_impl *sb, const char *const *argv, const char *what,
                    const aks_call *call, aks_buf *out, int *exit_code, aks_error **err);

/* Compares dotted versions ("0.4.0"): <0, 0, >0. */
int e2b_version_cmp(const char *a, const char *b);

#endif /* E2B_INTERNAL_H */
