/*
 * plugins/common/fsguard.c - workspace path guard; see aks_fsguard.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* pipe2, getdents64, close_range, openat2: Linux-only code */
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<linux/openat2.h>)
#include <linux/openat2.h> /* struct open_how, RESOLVE_* (Linux 5.6) */
#endif
#endif

#include "aks_buf.h"
#include "aks_fsguard.h"

#define MAX_SYMLINKS 40 /* as the kernel's MAXSYMLINKS */

/* ---- resolve --------------------------------------------------------------- */

/* A growable string. */
static char *read_link(const char *path, size_t hint)
{
	size_t cap = hint + 1 > 64 ? hint + 1 : 64;
	for (;;) {
		char *buf = malloc(cap);
		if (!buf)
			return NULL;
		ssize_t n = readlink(path, buf, cap);
		if (n < 0) {
			free(buf);
			return NULL;
		}
		if ((size_t)n < cap) {
			buf[n] = '\0';
			return buf;
		}
		free(buf);
		if (cap > (size_t)1 << 20)
			return NULL;
		cap *= 2;
	}
}

/*
 * The walk keeps `res`, an absolute path with no trailing slash ("" is "/"),
 * and `todo`, the part of the path still to resolve. A symlink's target is
 * pushed in front of what remains, as the kernel does.
 */
int aks_fs_resolve(const char *root, const char *path, char **rel_out)
{
	*rel_out = NULL;
	char *croot = realpath(root, NULL);
	if (!croot)
		return -errno;
	if (strcmp(croot, "/") == 0)
		croot[0] = '\0';

	int rc = 0;
	int links = 0;
	aks_buf res = AKS_BUF_INIT;
	char *todo = NULL;
	if (aks__buf_puts(&res, croot) != AKS_OK || !(todo = strdup(path))) {
		rc = -ENOMEM;
		goto out;
	}
	const char *p = todo;
	while (*p == '/') /* "/etc/passwd" means <root>/etc/passwd */
		p++;

	while (*p) {
		const char *end = strchr(p, '/');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		const char *next = end ? end + 1 : p + n;
		if (n == 0 || (n == 1 && p[0] == '.')) {
			p = next;
			continue;
		}
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			char *slash = strrchr(res.data, '/');
			aks__buf_truncate(&res, slash ? (size_t)(slash - res.data) : 0);
			p = next;
			continue;
		}
		size_t keep = res.len;
		if (aks__buf_puts(&res, "/") != AKS_OK || aks__buf_append(&res, p, n) != AKS_OK) {
			rc = -ENOMEM;
			goto out;
		}
		struct stat st;
		if (lstat(res.data, &st) == 0 && S_ISLNK(st.st_mode)) {
			if (++links > MAX_SYMLINKS) {
				rc = -ELOOP;
				goto out;
			}
			char *target = read_link(res.data, (size_t)st.st_size);
			if (!target) {
				rc = errno == ENOMEM ? -ENOMEM : -EIO;
				goto out;
			}
			/* New todo: target + "/" + the rest. */
			size_t tl = strlen(target), rl = strlen(next);
			char *nt = malloc(tl + 1 + rl + 1);
			if (!nt) {
				free(target);
				rc = -ENOMEM;
				goto out;
			}
			memcpy(nt, target, tl);
			nt[tl] = '/';
			memcpy(nt + tl + 1, next, rl + 1);
			free(target);
			free(todo);
			todo = nt;
			p = todo;
			/* A relative target resolves from the link's directory, an
			 * absolute one from the real root. */
			aks__buf_truncate(&res, todo[0] == '/' ? 0 : keep);
			continue;
		}
		/* Not a symlink, or missing (then the rest is taken lexically, as
		 * realpath(3) in non-strict mode and Python's os.path.realpath do). */
		p = next;
	}

	size_t rl = strlen(croot);
	if (strncmp(res.data, croot, rl) != 0 || (res.data[rl] != '\0' && res.data[rl] != '/')) {
		rc = -EXDEV;
		goto out;
	}
	const char *rel = res.data[rl] == '/' ? res.data + rl + 1 : "";
	if (!(*rel_out = strdup(rel)))
		rc = -ENOMEM;
out:
	free(todo);
	aks__buf_free(&res);
	free(croot);
	return rc;
}

/* ---- open without following symlinks ---------------------------------------- */

/* ELOOP or ENOTDIR from an O_NOFOLLOW open: say ELOOP when it was a symlink. */
static int nofollow_error(int dirfd, const char *name, int e)
{
	struct stat st;
	if ((e == ENOTDIR || e == ELOOP) && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISLNK(st.st_mode))
		return -ELOOP;
	return -e;
}

/* Copies the next component at *cursor into buf and advances; false at the
 * end or on error (*err set). */
static bool component(const char **cursor, char *buf, size_t cap, int *err)
{
	const char *p = *cursor;
	while (*p == '/')
		p++;
	if (!*p)
		return false;
	const char *end = strchr(p, '/');
	size_t n = end ? (size_t)(end - p) : strlen(p);
	if (n >= cap) {
		*err = -ENAMETOOLONG;
		return false;
	}
	memcpy(buf, p, n);
	buf[n] = '\0';
	*cursor = p + n;
	if (strcmp(buf, "..") == 0 || strcmp(buf, ".") == 0) {
		*err = -EXDEV; /* aks_fs_resolve never produces these */
		return false;
	}
	return true;
}

static bool more_components(const char *cursor)
{
	while (*cursor == '/')
		cursor++;
	return *cursor != '\0';
}

/* One openat(O_NOFOLLOW) per component. With create_dirs, missing
 * directories are made on the way (the last component included). */
static int walk_open(int rootfd, const char *rel, int flags, mode_t mode, bool create_dirs)
{
	char name[NAME_MAX + 1];
	int err = 0;
	int fd = fcntl(rootfd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	const char *cur = rel;
	while (component(&cur, name, sizeof(name), &err)) {
		bool last = !more_components(cur);
		int nfd;
		if (last && !create_dirs) {
			nfd = openat(fd, name, flags | O_CLOEXEC | O_NOFOLLOW, mode);
		} else {
			if (create_dirs && mkdirat(fd, name, mode) < 0 && errno != EEXIST) {
				int e = errno;
				close(fd);
				return -e;
			}
			nfd = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (nfd < 0) {
			int e = nofollow_error(fd, name, errno);
			close(fd);
			return e;
		}
		close(fd);
		fd = nfd;
		if (last)
			return fd;
	}
	if (err) {
		close(fd);
		return err;
	}
	/* rel named the root itself. */
	if (create_dirs)
		return fd;
	int nfd = openat(fd, ".", flags | O_CLOEXEC, mode);
	int e = errno;
	close(fd);
	return nfd >= 0 ? nfd : -e;
}

int aks_fs_open_beneath(int rootfd, const char *rel, int flags, mode_t mode)
{
#if defined(SYS_openat2) && defined(RESOLVE_BENEATH) && !defined(AKS_FSGUARD_FORCE_WALK)
	struct open_how how;
	memset(&how, 0, sizeof(how));
	how.flags = (uint64_t)(unsigned)(flags | O_CLOEXEC | O_NOFOLLOW);
	how.mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0;
	how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
	long fd = syscall(SYS_openat2, rootfd, rel[0] ? rel : ".", &how, sizeof(how));
	if (fd >= 0)
		return (int)fd;
	/* ENOSYS: kernel before 5.6; EPERM: a seccomp filter that refuses it.
	 * Both leave the component walk, which is just as safe. */
	if (errno != ENOSYS && errno != EPERM && errno != E2BIG)
		return -errno;
#endif
	return walk_open(rootfd, rel, flags, mode, false);
}

int aks_fs_mkdirs_beneath(int rootfd, const char *rel_dir, mode_t mode)
{
	return walk_open(rootfd, rel_dir, 0, mode, true);
}

/* ---- atomic write ------------------------------------------------------------ */

static uint64_t tmp_suffix(void)
{
	static uint64_t counter; /* only varies the name; races are harmless */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t n = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
	uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^
	             ((uint64_t)getpid() << 40) ^ (n * 0x9e3779b97f4a7c15ULL);
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

int aks_fs_write_atomic(int dirfd, const char *name, const void *data, size_t len, mode_t mode)
{
	char tmp[64];
	int fd = -1;
	for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
		/* Short and fixed-length, so a 255-byte target name still fits. */
		snprintf(tmp, sizeof(tmp), ".aks-upload-%016llx", (unsigned long long)tmp_suffix());
		fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
		if (fd < 0 && errno != EEXIST)
			return -errno;
	}
	if (fd < 0)
		return -EEXIST;
	const unsigned char *p = data;
	size_t left = len;
	int rc = 0;
	while (left) {
		ssize_t n = write(fd, p, left);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			break;
		}
		p += n;
		left -= (size_t)n;
	}
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
		rc = -errno;
	if (rc < 0)
		unlinkat(dirfd, tmp, 0);
	return rc;
}

/* ---- mkdir -p and rm -rf -------------------------------------------------------- */

int aks_fs_mkdir_p(const char *path, mode_t mode)
{
	char *copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	int rc = 0;
	for (char *p = copy + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char saved = *p;
		*p = '\0';
		if (mkdir(copy, mode) < 0 && errno != EEXIST) {
			rc = -errno;
			break;
		}
		*p = saved;
		if (!saved)
			break;
	}
	if (rc == 0) {
		struct stat st;
		if (stat(path, &st) < 0)
			rc = -errno;
		else if (!S_ISDIR(st.st_mode))
			rc = -ENOTDIR;
	}
	free(copy);
	return rc;
}

typedef struct name_list {
	char **names;
	size_t len, cap;
} name_list;

static int names_push(name_list *l, const char *name)
{
	if (l->len == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		char **n = realloc(l->names, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		l->names = n;
		l->cap = cap;
	}
	if (!(l->names[l->len] = strdup(name)))
		return -ENOMEM;
	l->len++;
	return 0;
}

static void names_free(name_list *l)
{
	for (size_t i = 0; i < l->len; i++)
		free(l->names[i]);
	free(l->names);
	memset(l, 0, sizeof(*l));
}

/* Empties the directory dfd (consumed). Subdirectories are collected and
 * the listing closed before descending, so each level costs one descriptor
 * and no directory stream. */
static int empty_dir(int dfd)
{
	int first_err = 0;
	for (int pass = 0; pass < 3; pass++) {
		int lfd = fcntl(dfd, F_DUPFD_CLOEXEC, 0);
		DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
		if (!d) {
			if (lfd >= 0)
				close(lfd);
			first_err = first_err ? first_err : -errno;
			break;
		}
		name_list subdirs = {0};
		bool removed_any = false;
		struct dirent *e;
		while ((e = readdir(d))) {
			if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
				continue;
			if (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN) {
				if (unlinkat(dfd, e->d_name, 0) == 0)
					removed_any = true;
				else if (!first_err)
					first_err = -errno;
				continue;
			}
			if (names_push(&subdirs, e->d_name) < 0 && !first_err)
				first_err = -ENOMEM;
		}
		closedir(d);
		for (size_t i = 0; i < subdirs.len; i++) {
			const char *name = subdirs.names[i];
			int sfd =
			    openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sfd < 0) {
				/* Not a directory after all (DT_UNKNOWN, or a symlink). */
				if (unlinkat(dfd, name, 0) == 0)
					removed_any = true;
				else if (!first_err)
					first_err = -errno;
				continue;
			}
			int rc = empty_dir(sfd);
			if (rc < 0 && !first_err)
				first_err = rc;
			if (unlinkat(dfd, name, AT_REMOVEDIR) == 0)
				removed_any = true;
			else if (!first_err)
				first_err = -errno;
		}
		names_free(&subdirs);
		/* Entries removed while listing may hide others; look again
		 * while progress is made. */
		if (!removed_any)
			break;
		first_err = 0;
	}
	close(dfd);
	return first_err;
}

int aks_fs_remove_tree(const char *path)
{
	int dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	int rc = empty_dir(dfd);
	if (rmdir(path) < 0 && rc == 0)
		rc = -errno;
	return rc;
}
