/*
 * plugins/common/aks_container.h - code shared by the providers that run
 * sandboxes as containers (docker, kubernetes): the reference's workspace
 * path rule, one-file tars in memory and out of an archive, API error messages,
 * base64, libcurl's global state, and the script that kills an exec's processes.
 *
 * A static convenience library (libaks-container): each plugin links its own
 * hidden copy, so no plugin depends on another at run time. It links nothing
 * itself; tar_mem.c needs libarchive, api_message.c json-c and curl_global.c
 * libcurl, which both plugins link already. Functions return aks_status codes and leave the
 * wording of errors to the plugin, except where the host API is passed in.
 */
#ifndef AKS_CONTAINER_H
#define AKS_CONTAINER_H

#include <stdbool.h>
#include <stddef.h>

#include <aksandbox/plugin.h>

/* Where an agent's files live inside the container. */
#define AKS_CTR_WORKSPACE "/workspace"

/* ---- the path rule (wspath.c) ---- */

/*
 * The reference's rule: strip the leading '/', join to /workspace, normalise
 * lexically like posixpath.normpath, and refuse anything that is not
 * /workspace or below it. On success *out is the malloc'd absolute path
 * ("/workspace" for the root itself). Returns AKS_OK, AKS_EINVAL (no path),
 * AKS_ENOMEM or AKS_EPOLICY (escapes); *out is NULL on failure.
 */
int aks_ctr_wspath(const char *path, char **out);

/* `path` as the escape message names it: without its leading '/'. */
const char *aks_ctr_wspath_rel(const char *path);

/* Is the absolute path p /workspace or below it (no normalisation)? */
bool aks_ctr_in_workspace(const char *p);

/* ---- tars in memory (tar_mem.c; libarchive) ---- */

struct archive;

/*
 * A pax-restricted tar, in memory, of one regular file named `rel` (mode
 * 0644, mtime now) holding data[0..len); with `parents`, an entry (0755) for
 * each of its parent directories comes first. Returns 0 with *out malloc'd
 * (NUL-terminated past *out_len) or -1 (out of memory or libarchive failed).
 */
int aks_ctr_tar_file(const char *rel, const void *data, size_t len, bool parents, char **out,
                     size_t *out_len);
/* The same with the file's mode (an executable: 0755). */
int aks_ctr_tar_file_mode(const char *rel, const void *data, size_t len, bool parents,
                          unsigned mode, char **out, size_t *out_len);

/* What aks_ctr_tar_read_file() returns when libarchive fails: never an
 * aks_status; archive_error_string() says why. */
#define AKS_CTR_BADTAR 1

/*
 * Reads the opened archive `a` up to its first regular file and writes that
 * file to `out` as the file `path` (result_add_file, then result_write of
 * each block, and of zeros for the holes of a sparse file). Returns AKS_OK;
 * AKS_ENOTFOUND (set in *err) when the archive holds no regular file; a host
 * error (set in *err); or AKS_CTR_BADTAR, with nothing set, when libarchive
 * fails or the blocks go back.
 */
int aks_ctr_tar_read_file(const aks_host_api *host, struct archive *a, const char *path,
                          aks_result *out, aks_error **err);

/* ---- API error answers (api_message.c; json-c) ---- */

/*
 * What an API server's error answer says: the "message" string of a JSON object body (the
 * Docker Engine's error, a Kubernetes Status) when it is not empty, else the body itself as
 * text (up to a NUL, its first 500 bytes, without trailing newlines), else "HTTP status
 * <status>". body holds len bytes (NULL: none). Returns a malloc'd string that is never
 * empty, NULL only when out of memory.
 */
char *aks_ctr_api_message(const char *body, size_t len, long status);

/* ---- base64 (b64.c) ---- */

/* Decodes n chars of standard or URL-safe base64; whitespace is skipped, and
 * anything else that is not base64 (data after '=' too) gives NULL. The
 * result is malloc'd and NUL-terminated; *out_len (if given) its length. */
char *aks_ctr_b64_decode(const char *s, size_t n, size_t *out_len);

/* Standard base64 with padding, malloc'd and NUL-terminated; NULL when out
 * of memory. */
char *aks_ctr_b64_encode(const void *data, size_t len);

/* ---- libcurl's global state (curl_global.c) ---- */

/* curl_global_init() on the first acquire, curl_global_cleanup() after the
 * last release: counted so that each provider instance can hold it. The
 * count is the linking plugin's own (each has its copy of this library). */
bool aks_ctr_curl_acquire(void);
void aks_ctr_curl_release(void);

/* ---- killing an exec's processes (kill_script.c) ---- */

/* Each exec runs with AKS_CTR_MARKER_VAR=<32 random hex digits> in its
 * environment; `/bin/sh -c aks_ctr_kill_script sh <marker>` then kills every
 * process that carries it, retrying while any remain (exit 0), and gives up
 * with exit 1 after 200 sweeps. */
#define AKS_CTR_MARKER_VAR "AKS_EXEC_ID"
extern const char aks_ctr_kill_script[];

#endif
