/*
 * core/state_list.c - listing the namespaces that have a document, for a reaper.
 *
 * A directory walk, without locks: documents are only ever renamed into place or unlinked,
 * so each one seen is a namespace that had a document at some instant of the walk. Files
 * that are not the canonical name of a namespace (lock and temporary files, anything put
 * there by something else) are skipped.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "state_file.h"
#include "state_store.h"

typedef struct name_list {
	char **v;
	size_t n, cap;
} name_list;

static int add_name(name_list *l, char *name)
{
	if (l->n + 1 >= l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		char **p = realloc(l->v, cap * sizeof(*p));
		if (!p)
			return AKS_ENOMEM;
		l->v = p;
		l->cap = cap;
	}
	l->v[l->n++] = name;
	l->v[l->n] = NULL;
	return AKS_OK;
}

static bool ends_with(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);
	return n > k && memcmp(s + n - k, suffix, k) == 0;
}

/* Levels of chunk directories a canonical path can have. */
#define MAX_DIR_DEPTH ((3 * AKS_STORE_NS_MAX + AKS_STORE_NS_CHUNK - 1) / AKS_STORE_NS_CHUNK - 1)

/* Returns 0 or -errno (ENOMEM included). `prefix` is the path of dirfd under ns/. */
static int walk_dir(int dirfd, const char *prefix, int depth, name_list *l)
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
		char *path = NULL;
		if (ends_with(name, n, ".json")) {
			if (asprintf(&path, "%s%.*s", prefix, (int)(n - 5), name) < 0) {
				rc = -ENOMEM;
				break;
			}
			char *ns = NULL;
			int r = aks__store_ns_from_path(path, &ns);
			free(path);
			if (r == AKS_ENOMEM || (r == AKS_OK && add_name(l, ns) < 0)) {
				free(ns);
				rc = -ENOMEM;
				break;
			}
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
			if (asprintf(&path, "%s%s/", prefix, name) < 0) {
				close(sub);
				rc = -ENOMEM;
				break;
			}
			rc = walk_dir(sub, path, depth + 1, l);
			free(path);
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

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int aks__store_list(aks_state_store *s, char ***out, aks_error **err)
{
	*out = NULL;
	if (!s)
		return aks__error_set(err, AKS_EINVAL, "state store: no store");
	name_list l = {NULL, 0, 0};
	/* Through the store's own descriptor, not its path (see aks__store_open). */
	int e = -walk_dir(aks__store_ns_fd(s), "", 0, &l);
	if (!e && !l.v && !(l.v = calloc(1, sizeof(*l.v))))
		e = ENOMEM; /* an empty list is still a list */
	if (e) {
		aks__store_free_names(l.v);
		if (e == ENOMEM)
			return aks__error_set(err, AKS_ENOMEM, "out of memory");
		return aks__error_set(err, AKS_EIO, "state store: cannot list %s/ns: %s",
		                      aks__store_dir(s), strerror(e));
	}
	qsort(l.v, l.n, sizeof(*l.v), cmp_names);
	*out = l.v;
	return AKS_OK;
}

void aks__store_free_names(char **names)
{
	if (!names)
		return;
	for (char **p = names; *p; p++)
		free(*p);
	free(names);
}
