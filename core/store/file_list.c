/*
 * core/store/file_list.c - the file store's directory walks: the records of a namespace (scan)
 * and the namespaces that have records.
 *
 * No locks: values are only ever renamed into place or unlinked, so each one read is a value
 * some update left. Names that are not canonical encodings (lock and temporary files,
 * anything put there by something else) are skipped.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/file_io.h"
#include "store/store.h"

/* Levels of chunk directories a canonical path can have. */
#define MAX_DIR_DEPTH ((3 * AKS_STORE_NAME_MAX + AKS_STORE_NS_CHUNK - 1) / AKS_STORE_NS_CHUNK - 1)

static bool ends_with(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);
	return n > k && memcmp(s + n - k, suffix, k) == 0;
}

/* What a walk does with the entries it meets. */
typedef struct walker {
	const char *leaf_suffix; /* ".json" for records, ".d" for namespaces */
	/* Called for each canonical name; 0 goes on, non-zero stops the walk. */
	int (*visit)(struct walker *w, int dirfd, const char *entry, const char *name);
	aks_store_impl *fs;
	aks_store_record_fn record_fn;
	aks_store_name_fn name_fn;
	void *ctx;
	const char *prefix;
	aks_error **err;
	int stopped; /* the callback's non-zero return */
} walker;

/* 0, -errno, or 1 when a callback stopped the walk. `path` is dirfd's path below the walk's
 * root, with a trailing '/'. */
static int walk_dir(walker *w, int dirfd, const char *path, int depth)
{
	/* A fresh open file description: its own read position, whatever other threads do. */
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		return -e;
	}
	int rc = 0;
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(d);
		if (!de) {
			rc = -errno;
			break;
		}
		const char *name = de->d_name;
		size_t n = strlen(name);
		char *full = NULL;
		if (ends_with(name, n, w->leaf_suffix)) {
			size_t k = n - strlen(w->leaf_suffix);
			if (asprintf(&full, "%s%.*s", path, (int)k, name) < 0) {
				rc = -ENOMEM;
				break;
			}
			char *decoded = NULL;
			int r = aks__store_name_from_path(full, &decoded);
			free(full);
			if (r == AKS_ENOMEM) {
				rc = -ENOMEM;
				break;
			}
			if (r == AKS_OK)
				rc = w->visit(w, dirfd, name, decoded);
			free(decoded);
			if (rc)
				break;
		} else if (ends_with(name, n, "+") && depth < MAX_DIR_DEPTH &&
		           (de->d_type == DT_DIR || de->d_type == DT_UNKNOWN)) {
			int sub =
			    openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0) {
				if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP)
					continue; /* removed meanwhile, or not ours */
				rc = -errno;
				break;
			}
			if (asprintf(&full, "%s%s/", path, name) < 0) {
				close(sub);
				rc = -ENOMEM;
				break;
			}
			rc = walk_dir(w, sub, full, depth + 1);
			free(full);
			close(sub);
			if (rc == -ENOENT)
				rc = 0; /* the directory emptied and went away while we read it */
			if (rc)
				break;
		}
	}
	closedir(d);
	return rc;
}

/* ---- scan ---- */

static int visit_record(walker *w, int dirfd, const char *entry, const char *key)
{
	if (strncmp(key, w->prefix, strlen(w->prefix)) != 0)
		return 0;
	int fd = openat(dirfd, entry, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0 && (errno == ENOENT || errno == ELOOP || errno == ENXIO))
		return 0; /* deleted since the directory was read, or a symlink: never ours */
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd); /* a directory or a FIFO under a record's name: not a record */
		return 0;
	}
	char *data = NULL;
	size_t len = 0;
	bool over = false;
	int e = -aks__state_read_all(fd, aks__fs_max_record(), &data, &len, &over);
	close(fd);
	if (e)
		return -e;
	if (over)
		return 0; /* get() of that key explains; a listing goes on without it */
	int r = w->record_fn(w->ctx, key, data, len);
	free(data);
	if (r) {
		w->stopped = r;
		return 1;
	}
	return 0;
}

int aks__fs_scan(aks_store_impl *fs, const char *ns, const char *prefix, aks_store_record_fn fn,
                 void *ctx, aks_error **err)
{
	aks_fs_path p;
	int rc = aks__fs_path_init(fs, ns, NULL, &p, err);
	if (rc < 0) {
		aks__fs_path_free(&p);
		return rc;
	}
	/* The namespace's own directory too: p.ncomp levels. Absent: no records. */
	int e = aks__fs_walk(&p, p.ncomp, false);
	walker w = {".json", visit_record, fs, fn, NULL, ctx, prefix ? prefix : "", err, 0};
	if (e == 0)
		e = walk_dir(&w, p.fds[p.ncomp], "", 0);
	aks__fs_path_free(&p);
	if (w.stopped)
		return w.stopped;
	if (e == -ENOENT || e >= 0)
		return AKS_OK;
	if (e == -ENOMEM)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	return aks__error_set(err, AKS_EIO,
	                      "state store: cannot list the records of '%s' in %s/ns: %s", ns,
	                      aks__file_store_dir(fs), strerror(-e));
}

/* ---- namespaces ---- */

/* Stops a walk at the first record. */
static int found_record(walker *w, int dirfd, const char *entry, const char *key)
{
	(void)w, (void)dirfd, (void)entry, (void)key;
	return 1;
}

/* 1 when the namespace directory `entry` holds a record (not just lock files, a leftover
 * temporary file, or nothing): only such namespaces are listed. 0 when it does not (or
 * went away, or is not a directory of ours), else -errno: a namespace that cannot be
 * read is an error, not silently absent from the listing (the reaper would skip it). */
static int has_record(int dirfd, const char *entry)
{
	int fd = openat(dirfd, entry, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR || errno == ELOOP ? 0 : -errno;
	walker w = {".json", found_record, NULL, NULL, NULL, NULL, "", NULL, 0};
	int rc = walk_dir(&w, fd, "", 0);
	close(fd);
	return rc == -ENOENT ? 0 : rc;
}

static int visit_ns(walker *w, int dirfd, const char *entry, const char *ns)
{
	int has = has_record(dirfd, entry);
	if (has <= 0)
		return has;
	int r = w->name_fn(w->ctx, ns);
	if (r) {
		w->stopped = r;
		return 1;
	}
	return 0;
}

int aks__fs_namespaces(aks_store_impl *fs, aks_store_name_fn fn, void *ctx, aks_error **err)
{
	walker w = {".d", visit_ns, fs, NULL, fn, ctx, "", err, 0};
	/* Through the store's own descriptor, not its path (see aks__file_store_new). */
	int e = -walk_dir(&w, aks__fs_ns_fd(fs), "", 0);
	if (w.stopped)
		return w.stopped;
	if (e < 0)
		e = 0; /* 1: stopped, handled above */
	if (e == ENOMEM)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	if (e)
		return aks__error_set(err, AKS_EIO, "state store: cannot list %s/ns: %s",
		                      aks__file_store_dir(fs), strerror(e));
	return AKS_OK;
}
