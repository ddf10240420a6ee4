/*
 * plugins/common/aks_wspath.h - the reference's workspace path rule (a caller's path joined
 * to a root directory, normalised, and refused when it leaves the root), for the providers
 * whose sandboxes have their files under one directory: /workspace in the containers
 * (aks_ctr_*), the home directory of an E2B sandbox. Part of libaks-util (wspath.c): libc
 * only.
 */
#ifndef AKS_WSPATH_H
#define AKS_WSPATH_H

#include <stdbool.h>
#include <stddef.h>

#include <aksandbox/common.h>

/*
 * The rule under root (an absolute path without a trailing '/'): strip path's leading '/',
 * join it to root, normalise lexically like posixpath.normpath, and refuse anything that is
 * not root or below it. On success *out is the malloc'd absolute path (root itself for the
 * root). Returns AKS_OK, AKS_EINVAL (no path), AKS_ENOMEM, AKS_EPOLICY (escapes) or
 * AKS_ELIMIT (the path, without its leading '/', is longer than AKS_CTR_PATH_MAX less root
 * and a '/', or a name in it longer than AKS_CTR_NAME_MAX); *out is NULL on failure.
 */
int aks_wspath(const char *root, const char *path, char **out);

/* Is the absolute path p root or below it (no normalisation)? */
bool aks_wspath_in_root(const char *root, const char *p);

/* The message for a failure of aks_wspath(root, path), as aks_ctr_wspath_why words it. */
const char *aks_wspath_why(const char *root, int rc, const char *path, char *buf, size_t len);

/* Where an agent's files live inside the container. */
#define AKS_CTR_WORKSPACE "/workspace"

/* ---- the rule under /workspace, the containers' workspace ---- */

/*
 * The reference's rule: strip the leading '/', join to /workspace, normalise
 * lexically like posixpath.normpath, and refuse anything that is not
 * /workspace or below it. On success *out is the malloc'd absolute path
 * ("/workspace" for the root itself). Returns AKS_OK, AKS_EINVAL (no path),
 * AKS_ENOMEM, AKS_EPOLICY (escapes) or AKS_ELIMIT (the path, without its leading '/', is
 * longer than AKS_CTR_PATH_MAX less "/workspace/", or a name in it longer than
 * AKS_CTR_NAME_MAX); *out is NULL on failure.
 */
int aks_ctr_wspath(const char *path, char **out);

/*
 * The longest container path the rule accepts, in bytes, and the longest name in it; longer
 * is AKS_ELIMIT, before anything is asked of an engine. The Docker Engine resolves a
 * container path on the host under its data root (the container's overlay directory, 96
 * bytes with the default /var/lib/docker, so that 3,999 was the longest it took), within the
 * host's PATH_MAX of 4096: 3 KiB leaves room for a data root of about 1 KiB. NAME_MAX is
 * every file system's.
 */
#define AKS_CTR_PATH_MAX 3072
#define AKS_CTR_NAME_MAX 255

/* `path` as the escape message names it: without its leading '/'. */
const char *aks_ctr_wspath_rel(const char *path);

/* How much of a caller's path (or of any text a caller controls) a message shows, and the
 * buffer aks_ctr_shown needs for it. */
#define AKS_CTR_SHOWN_MAX 96
#define AKS_CTR_SHOWN_BUF (AKS_CTR_SHOWN_MAX + 4)

/*
 * s for a message: s itself when it has at most max bytes, else its first bytes (cut where a
 * UTF-8 character begins, so the message stays valid UTF-8) and "...", in buf (len >= max +
 * 4). Returns s or buf.
 */
const char *aks_ctr_shown(const char *s, size_t max, char *buf, size_t len);

/* The message for a failure of aks_ctr_wspath(path): "path 'P' escapes /workspace", "path
 * 'P' is N bytes: a sandbox path has at most 3061 below /workspace/", "path 'P' has a name
 * of N bytes: at most 255", "no path" or "out of memory", P shown as aks_ctr_shown does
 * with AKS_CTR_SHOWN_MAX. Into buf (AKS_CTR_WSPATH_WHY_BUF bytes). */
#define AKS_CTR_WSPATH_WHY_BUF (AKS_CTR_SHOWN_BUF + 128)
const char *aks_ctr_wspath_why(int rc, const char *path, char *buf, size_t len);

/* Is the absolute path p /workspace or below it (no normalisation)? */
bool aks_ctr_in_workspace(const char *p);

#endif /* AKS_WSPATH_H */
