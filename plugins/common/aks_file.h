/*
 * plugins/common/aks_file.h - a whole small file read into memory: a kubeconfig, a token,
 * the agent program. Only a regular file is read (after symlinks): a FIFO or a device put
 * where a file was expected is refused at once, never waited on.
 */
#ifndef AKS_COMMON_FILE_H
#define AKS_COMMON_FILE_H

#include <stddef.h>

/* The bytes of path (malloc'd, with a NUL past *len), at most max of them; NULL with errno
 * set otherwise: EINVAL for what is not a regular file, EFBIG past max, ENOMEM, or open's
 * and read's own. */
char *aks__file_read(const char *path, size_t max, size_t *len);

#endif /* AKS_COMMON_FILE_H */
