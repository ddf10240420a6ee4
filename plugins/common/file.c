/*
 * plugins/common/file.c - reading a whole small file (aks_file.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aks_buf.h"
#include "aks_file.h"

char *aks__file_read(const char *path, size_t max, size_t *len)
{
	/* O_NONBLOCK: opening a FIFO waits for a writer; a regular file reads the same. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return NULL;
	struct stat st;
	int failure = fstat(fd, &st) != 0 ? errno : !S_ISREG(st.st_mode) ? EINVAL : 0;
	aks_buf b = AKS_BUF_INIT;
	char chunk[16384];
	while (!failure) {
		ssize_t n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			failure = errno;
		else if (b.len + (size_t)n > max)
			failure = EFBIG;
		else if (aks__buf_append(&b, chunk, (size_t)n) != 0) /* n == 0: "" if empty */
			failure = ENOMEM;
		else if (n == 0)
			break;
	}
	close(fd);
	if (failure) {
		aks__buf_free(&b);
		errno = failure;
		return NULL;
	}
	if (len)
		*len = b.len;
	return aks__buf_steal(&b);
}
