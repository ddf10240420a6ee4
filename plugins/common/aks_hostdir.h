/*
 * plugins/common/aks_hostdir.h - sandboxes that are directories on this host (local_subprocess,
 * bubblewrap): where they are made, how they are removed and found again, and the files in
 * them, reached from the host without letting a sandbox's path or symlink lead outside.
 *
 * A sandbox is a directory "<base>/<prefix>XXXXXX" (its path is the sandbox id); its labels
 * live beside it in "<dir>.labels", one "key=value" line each, outside the workspace, so that
 * the host's garbage collector finds the directories a killed process left (list_sandboxes).
 * Paths given to the file functions are the agent's: a leading '/' is stripped and the rest is
 * resolved inside the directory (aks_fsguard.h); a result outside it is AKS_EPOLICY.
 *
 * Part of libaks-proc (static and hidden in each plugin that links it). Errors go through the
 * host's error_set; nothing here keeps state.
 */
#ifndef AKS_HOSTDIR_H
#define AKS_HOSTDIR_H

#include <stddef.h>

#include <aksandbox/plugin.h>
#include <aksandbox/provider.h>

/* The directory sandboxes are made in, canonical (malloc'd): workdir (created with its
 * parents), else $TMPDIR, else /tmp. */
int aks_hostdir_base(const aks_host_api *host, const char *workdir, char **out, aks_error **err);
/* A new, empty sandbox directory "<base>/<prefix>XXXXXX" (mode 0700), its path in *dir. */
int aks_hostdir_make(const aks_host_api *host, const char *base, const char *prefix, char **dir,
                     aks_error **err);
/* Deletes a sandbox directory and its labels, and only what aks_hostdir_make made: a directory
 * (not a symlink to one) whose base name starts with prefix. Anything else, including an id
 * that no longer exists, is left alone: destroy is idempotent. A failure to remove is logged
 * under `provider`. */
void aks_hostdir_remove(const aks_host_api *host, const char *provider, const char *prefix,
                        const char *dir);
/* AKS_EGONE: "sandbox working directory '<dir>' no longer exists". */
int aks_hostdir_gone(const aks_host_api *host, const char *dir, aks_error **err);
/* AKS_OK while dir is a directory, else aks_hostdir_gone. */
int aks_hostdir_check(const aks_host_api *host, const char *dir, aks_error **err);

/* Writes the labels (NULL-terminated key, value pairs of [A-Za-z0-9._-]) beside dir. */
int aks_hostdir_labels_write(const aks_host_api *host, const char *dir, const char *const *labels,
                             aks_error **err);
/* Every sandbox directory of prefix under base whose labels carry key=value, to fn. */
int aks_hostdir_labels_list(const aks_host_api *host, const char *provider, const char *prefix,
                            const char *base, const char *key, const char *value,
                            aks_sandbox_list_fn fn, void *ctx, aks_error **err);

/*
 * The checks of an upload to path: resolved inside dir, its parent directories created
 * beneath dir, and not a directory itself. *rel (malloc'd) is the file's path relative to
 * dir, for the caller to hand to whoever writes it (the agent).
 */
int aks_hostdir_prepare_upload(const aks_host_api *host, const char *dir, const char *path,
                               char **rel, aks_error **err);
/* Writes path's file beneath dir, atomically (mode 0666 before the umask). */
int aks_hostdir_write(const aks_host_api *host, const char *dir, const char *path, const void *data,
                      size_t len, aks_error **err);
/* The checks of a download of path: a regular file inside dir (else AKS_ENOTFOUND, or
 * AKS_EPOLICY when it leads outside); *rel as for an upload. */
int aks_hostdir_prepare_download(const aks_host_api *host, const char *dir, const char *path,
                                 char **rel, aks_error **err);
/* Adds path's file beneath dir to out (result_add_file and its bytes). */
int aks_hostdir_read(const aks_host_api *host, const char *dir, const char *path, aks_result *out,
                     aks_error **err);

#endif /* AKS_HOSTDIR_H */
