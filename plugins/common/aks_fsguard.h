/*
 * plugins/common/aks_fsguard.h - reach files inside a workspace directory
 * without letting an agent-supplied path escape it.
 *
 * Two steps, so the answer is both well defined and race-free:
 *  1. aks_fs_resolve() says what a path means: like realpath(), it resolves
 *     "..", "." and every symlink that exists (the rest lexically), and refuses
 *     a result outside the workspace. Its output is a relative path with no
 *     symlink, "." or ".." in it.
 *  2. aks_fs_open_beneath() and aks_fs_mkdirs_beneath() then open that path
 *     from a descriptor of the workspace following no symlink at all
 *     (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
 *     or, where openat2 is missing, one openat(O_NOFOLLOW) per component). A
 *     symlink planted between the two steps makes the open fail with ELOOP;
 *     it can never lead outside.
 *
 * All functions return 0 or a descriptor on success and a negative errno on
 * failure; -EXDEV means "escapes the workspace". Thread-safe; no global state.
 */
#ifndef AKS_FSGUARD_H
#define AKS_FSGUARD_H

#include <stddef.h>
#include <sys/types.h>

/*
 * Resolves the agent's `path` inside the directory `root`. Leading '/' are
 * stripped first, so "/etc/passwd" means "<root>/etc/passwd". On success
 * *rel_out is a malloc'd relative path ("" for the root itself). Errors:
 * -EXDEV escape, -ELOOP too many symlinks, -ENOENT (or other) root unusable,
 * -ENOMEM.
 */
int aks_fs_resolve(const char *root, const char *path, char **rel_out);

/* Opens `rel` (from aks_fs_resolve) beneath the directory rootfd, following
 * no symlink; O_CLOEXEC and O_NOFOLLOW are added. Returns a descriptor or
 * -errno (-ELOOP when a component is a symlink). */
int aks_fs_open_beneath(int rootfd, const char *rel, int flags, mode_t mode);

/* Creates the directories of `rel_dir` beneath rootfd as needed (mode before
 * umask), following no symlink, and returns a descriptor of the last one. */
int aks_fs_mkdirs_beneath(int rootfd, const char *rel_dir, mode_t mode);

/* Writes `name` in the directory dirfd atomically: a temporary file in the
 * same directory, then rename() over the name (which replaces a symlink
 * rather than following it). */
int aks_fs_write_atomic(int dirfd, const char *name, const void *data, size_t len, mode_t mode);

/* mkdir -p (mode before umask). */
int aks_fs_mkdir_p(const char *path, mode_t mode);

/* rm -rf of the directory `path`, never following a symlink (a symlink is
 * removed, not its target). Best effort: returns the first error met. */
int aks_fs_remove_tree(const char *path);

#endif /* AKS_FSGUARD_H */
