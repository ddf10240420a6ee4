/*
 * core/store/file_io.c - file-descriptor helpers for the state store, retried on EINTR.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/file_io.h"

int aks__state_read_all(int fd, size_t max, char **data, size_t *len, bool *over)
{
	*data = NULL;
	*len = 0;
	*over = false;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (st.st_size < 0 || (unsigned long long)st.st_size > max) {
		*over = true;
		return 0;
	}
	/* The size is a hint only: read until EOF, and one byte past `max` to see an overrun. */
	size_t cap = (size_t)st.st_size + 1, n = 0;
	char *buf = malloc(cap + 1);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (n == cap) {
			if (n > max) {
				free(buf);
				*over = true;
				return 0;
			}
			size_t ncap = cap * 2 > max + 1 ? max + 1 : cap * 2;
			char *p = realloc(buf, ncap + 1);
			if (!p) {
				free(buf);
				return -ENOMEM;
			}
			buf = p;
			cap = ncap;
		}
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			free(buf);
			return -e;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n > max) {
		free(buf);
		*over = true;
		return 0;
	}
	buf[n] = '\0';
	*data = buf;
	*len = n;
	return 0;
}

int aks__state_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		if (w == 0)
			return -EIO;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

int aks__state_fsync(int fd)
{
	while (fsync(fd) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	return 0;
}

/*
 * flock(2) on a descriptor that each transaction opens afresh. Such a lock belongs to the open
 * file description, not to the process, so two threads of one process exclude each other
 * exactly as two processes do, and it dies with the last descriptor: a killed process cannot
 * leave it behind. Classic POSIX record locks (F_SETLKW) would be wrong here: they belong to
 * the process, so its threads would all "hold" the lock at once, and closing any descriptor of
 * the file would drop it. Open-file-description record locks (F_OFD_SETLKW) are equivalent to
 * flock for this, but valgrind (3.19) does not know that they block: a waiting thread keeps
 * valgrind's global lock and the program hangs, so check-valgrind could not run the store.
 * On NFS, Linux emulates flock with whole-file record locks, which are still honoured.
 */
int aks__state_lock(int fd, bool exclusive)
{
	while (flock(fd, exclusive ? LOCK_EX : LOCK_SH) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	return 0;
}

int aks__state_mkdirs(const char *path)
{
	size_t n = strlen(path);
	char *p = malloc(n + 1);
	if (!p)
		return -ENOMEM;
	memcpy(p, path, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (p[i] != '/' && p[i] != '\0')
			continue;
		if (p[i - 1] == '/')
			continue; /* "//" */
		char saved = p[i];
		p[i] = '\0';
		if (mkdir(p, 0700) < 0 && errno != EEXIST) {
			int e = errno;
			free(p);
			return -e;
		}
		p[i] = saved;
	}
	free(p);
	return 0;
}
