/*
 * core/state_file.h - file-descriptor helpers private to the state store (state_*.c):
 * whole reads and writes, fsync and locks, each retried on EINTR.
 * They return 0 or -errno and never touch errno-less state.
 */
#ifndef AKS_CORE_STATE_FILE_H
#define AKS_CORE_STATE_FILE_H

#include <stdbool.h>
#include <stddef.h>

/* Reads fd to its end, keeping at most `max` bytes: *data is NUL-terminated (malloc'd) and
 * *len its length; *over is set if the file holds more than `max` bytes (then *data is NULL). */
int aks__state_read_all(int fd, size_t max, char **data, size_t *len, bool *over);
/* Writes all of buf. */
int aks__state_write_all(int fd, const void *buf, size_t len);
/* fsync, retried on EINTR. */
int aks__state_fsync(int fd);
/* Waits for a lock on the whole file, exclusive or shared, owned by the open file description
 * (not the process): see state_file.c. */
int aks__state_lock(int fd, bool exclusive);
/* mkdir -p with mode 0700 for every directory it creates. */
int aks__state_mkdirs(const char *path);

/* The store's open descriptor of its ns/ directory (state_store.c), for state_list.c. */
struct aks_state_store;
int aks__store_ns_fd(const struct aks_state_store *s);

#endif /* AKS_CORE_STATE_FILE_H */
