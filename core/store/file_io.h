/*
 * core/store/file_io.h - file-descriptor helpers private to the state store (file_*.c):
 * whole reads and writes, fsync and locks, each retried on EINTR.
 * They return 0 or -errno and never touch errno-less state.
 */
#ifndef AKS_CORE_STORE_FILE_IO_H
#define AKS_CORE_STORE_FILE_IO_H

#include <stdbool.h>
#include <stddef.h>

#include "internal.h"

/* Reads fd to its end, keeping at most `max` bytes: *data is NUL-terminated (malloc'd) and
 * *len its length; *over is set if the file holds more than `max` bytes (then *data is NULL). */
int aks__state_read_all(int fd, size_t max, char **data, size_t *len, bool *over);
/* Writes all of buf. */
int aks__state_write_all(int fd, const void *buf, size_t len);
/* fsync, retried on EINTR. */
int aks__state_fsync(int fd);
/* Waits for a lock on the whole file, exclusive or shared, owned by the open file description
 * (not the process): see file_io.c. */
int aks__state_lock(int fd, bool exclusive);
/* mkdir -p with mode 0700 for every directory it creates. */
int aks__state_mkdirs(const char *path);

/* ---- the built-in file store (file_store.c, file_list.c) ---- */

#include <aksandbox/store.h>

/* The file store's operations (its descriptor is in store.h). */
extern const aks_store_ops aks__file_store_ops;
/* Opens a file store in `dir` (NULL: the default state directory). */
int aks__file_store_new(const char *dir, aks_store_impl **out, aks_error **err);
/* The directory it lives in, as given or resolved. */
const char *aks__file_store_dir(const aks_store_impl *fs);
/* The records of namespace ns whose keys start with key_prefix are written and removed
 * without fsync (atomic still, durable only as far as the page cache is): for records that
 * lose nothing when a crash takes them (aks__store_set_volatile). One namespace and prefix
 * per handle; call before the handle is shared between threads. AKS_OK or AKS_ENOMEM. */
int aks__file_store_set_volatile(aks_store_impl *fs, const char *ns, const char *key_prefix);

/* A record's (or, with key NULL, a namespace's) place under ns/: the path's components and
 * the directories opened so far. */
#define AKS_FS_MAX_LEVELS 8
typedef struct aks_fs_path {
	char *rel;                     /* the path under ns/, for messages */
	char *comp[AKS_FS_MAX_LEVELS]; /* components; the last names the files (or the ns dir) */
	int ncomp;
	int fds[AKS_FS_MAX_LEVELS]; /* fds[i]: the directory holding comp[i]; fds[0] = ns/ */
} aks_fs_path;

int aks__fs_path_init(aks_store_impl *fs, const char *ns, const char *key, aks_fs_path *p,
                      aks_error **err);
void aks__fs_path_free(aks_fs_path *p);
/* Opens the directories holding comp[0..upto]; 0, or -errno (-ENOENT: one is missing). */
int aks__fs_walk(aks_fs_path *p, int upto, bool create);
/* The largest record the file store reads. */
size_t aks__fs_max_record(void);

/* scan and namespaces (file_list.c). */
int aks__fs_scan(aks_store_impl *fs, const char *ns, const char *prefix, aks_store_record_fn fn,
                 void *ctx, aks_error **err);
int aks__fs_namespaces(aks_store_impl *fs, aks_store_name_fn fn, void *ctx, aks_error **err);
int aks__fs_ns_fd(const aks_store_impl *fs);

#endif /* AKS_CORE_STORE_FILE_IO_H */
