/*
 * plugins/common/hostdir.c - sandbox directories on this host: where they are made, how they
 * are removed, and their labels (aks_hostdir.h).
 *
 * The labels live beside the directory, not inside the workspace where the sandbox's own
 * files are. A provider that isolates nothing (local_subprocess) lets code in a sandbox change
 * them anyway; all it can do with that is hide its own directory from the collector, or hand
 * it to another store's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aks_buf.h"
#include "aks_file.h"
#include "aks_fsguard.h"
#include "aks_hostdir.h"

#define LABELS_SUFFIX ".labels"
#define LABELS_MAX    4096 /* bytes of one labels file */
#define LABELS_PAIRS  16   /* key, value pairs read from one */

static bool is_dir(const char *path)
{
	struct stat st;
	return path && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int aks_hostdir_gone(const aks_host_api *host, const char *dir, aks_error **err)
{
	return host->error_set(err, AKS_EGONE, "sandbox working directory '%s' no longer exists",
	                       dir);
}

int aks_hostdir_check(const aks_host_api *host, const char *dir, aks_error **err)
{
	return is_dir(dir) ? AKS_OK : aks_hostdir_gone(host, dir ? dir : "", err);
}

int aks_hostdir_base(const aks_host_api *host, const char *workdir, char **out, aks_error **err)
{
	const char *base = workdir;
	if (base) {
		int rc = aks_fs_mkdir_p(base, 0777);
		if (rc < 0)
			return host->error_set(err, AKS_EPROVISION,
			                       "cannot create workdir '%s': %s", base,
			                       strerror(-rc));
	} else {
		base = getenv("TMPDIR");
		if (!base || !is_dir(base))
			base = "/tmp";
	}
	/* An absolute, canonical id, so attach works from any working directory. */
	if (!(*out = realpath(base, NULL)))
		return host->error_set(err, AKS_EPROVISION, "cannot use '%s' for sandboxes: %s",
		                       base, strerror(errno));
	return AKS_OK;
}

int aks_hostdir_make(const aks_host_api *host, const char *base, const char *prefix, char **dir,
                     aks_error **err)
{
	char *path = NULL;
	if (asprintf(&path, "%s/%sXXXXXX", strcmp(base, "/") == 0 ? "" : base, prefix) < 0)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	if (!mkdtemp(path)) {
		int e = errno;
		free(path);
		return host->error_set(err, AKS_EPROVISION,
		                       "cannot create a sandbox directory in '%s': %s", base,
		                       strerror(e));
	}
	*dir = path;
	return AKS_OK;
}

static char *labels_path(const char *dir)
{
	char *path = NULL;
	return asprintf(&path, "%s" LABELS_SUFFIX, dir) < 0 ? NULL : path;
}

void aks_hostdir_remove(const aks_host_api *host, const char *provider, const char *prefix,
                        const char *dir)
{
	if (!dir || !*dir)
		return;
	char *path = strdup(dir);
	if (!path) {
		host->log(AKS_LOG_WARNING, provider, "destroy: out of memory");
		return;
	}
	size_t len = strlen(path);
	while (len > 1 && path[len - 1] == '/')
		path[--len] = '\0';
	const char *slash = strrchr(path, '/');
	const char *name = slash ? slash + 1 : path;
	if (strncmp(name, prefix, strlen(prefix)) != 0) {
		free(path);
		return;
	}
	struct stat st;
	if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		int rc = aks_fs_remove_tree(path);
		if (rc < 0) /* ignored, as the original does, but not silently */
			host->log(AKS_LOG_WARNING, provider,
			          "destroy: could not remove all of '%s': %s", path, strerror(-rc));
	}
	/* The labels after the directory: it is listed until it is gone. */
	char *labels = labels_path(path);
	if (labels && lstat(labels, &st) == 0 && S_ISREG(st.st_mode) && unlink(labels) < 0)
		host->log(AKS_LOG_WARNING, provider, "destroy: cannot remove '%s': %s", labels,
		          strerror(errno));
	free(labels);
	free(path);
}

/* ---- labels ---------------------------------------------------------------------------- */

/* The host's labels are [A-Za-z0-9._-]; anything else would break the line format. */
static bool plain(const char *s)
{
	if (!s || !*s)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '.' || *s == '_' || *s == '-'))
			return false;
	return true;
}

int aks_hostdir_labels_write(const aks_host_api *host, const char *dir, const char *const *labels,
                             aks_error **err)
{
	if (!labels || !labels[0])
		return AKS_OK;
	aks_buf text = {0};
	for (const char *const *kv = labels; kv[0] && kv[1]; kv += 2) {
		if (!plain(kv[0]) || !plain(kv[1])) {
			aks__buf_free(&text);
			return host->error_set(err, AKS_EINVAL, "label '%s' is not [A-Za-z0-9._-]",
			                       kv[0]);
		}
		if (aks__buf_printf(&text, "%s=%s\n", kv[0], kv[1]) < 0) {
			aks__buf_free(&text);
			return host->error_set(err, AKS_ENOMEM, "out of memory");
		}
	}
	char *path = labels_path(dir);
	int fd = path ? open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600) : -1;
	int e = errno;
	bool ok = fd >= 0 && write(fd, text.data, text.len) == (ssize_t)text.len;
	if (fd >= 0 && !ok)
		e = errno ? errno : EIO;
	if (fd >= 0 && close(fd) < 0 && ok) {
		ok = false;
		e = errno;
	}
	int rc = AKS_OK;
	if (!path)
		rc = host->error_set(err, AKS_ENOMEM, "out of memory");
	else if (!ok)
		rc = host->error_set(err, AKS_EPROVISION, "cannot write the labels '%s': %s", path,
		                     strerror(e));
	free(path);
	aks__buf_free(&text);
	return rc;
}

/* The pairs of one labels file (pointers into text, which is cut up in place); *n pairs. */
static size_t parse(char *text, const char **pairs)
{
	size_t n = 0;
	for (char *line = text; line && *line && n < LABELS_PAIRS;) {
		char *end = strchr(line, '\n');
		if (end)
			*end = '\0';
		char *eq = strchr(line, '=');
		if (eq) {
			*eq = '\0';
			pairs[2 * n] = line;
			pairs[2 * n + 1] = eq + 1;
			n++;
		}
		line = end ? end + 1 : NULL;
	}
	pairs[2 * n] = NULL;
	return n;
}

typedef struct list_ctx {
	const aks_host_api *host;
	const char *provider, *prefix, *base, *key, *value;
	aks_sandbox_list_fn fn;
	void *ctx;
} list_ctx;

/* One directory entry: a labels file of ours that carries key=value is reported. */
static int list_one(const list_ctx *l, int dfd, const char *name)
{
	size_t nlen = strlen(name), slen = strlen(LABELS_SUFFIX);
	if (strncmp(name, l->prefix, strlen(l->prefix)) != 0 || nlen <= slen ||
	    strcmp(name + nlen - slen, LABELS_SUFFIX) != 0)
		return AKS_OK;
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
		return AKS_OK;
	char *path = NULL;
	if (asprintf(&path, "%s/%s", strcmp(l->base, "/") == 0 ? "" : l->base, name) < 0)
		return AKS_ENOMEM;
	size_t len;
	char *text = aks__file_read(path, LABELS_MAX, &len);
	if (!text) {
		if (errno == ENOMEM) {
			free(path);
			return AKS_ENOMEM;
		}
		/* Gone meanwhile (destroyed), or not ours to read: nothing to report. */
		l->host->log(AKS_LOG_DEBUG, l->provider, "list: skipping '%s': %s", path,
		             strerror(errno));
		free(path);
		return AKS_OK;
	}
	const char *pairs[2 * LABELS_PAIRS + 1];
	size_t n = parse(text, pairs);
	bool match = false;
	for (size_t i = 0; i < n; i++)
		match = match || (strcmp(pairs[2 * i], l->key) == 0 &&
		                  strcmp(pairs[2 * i + 1], l->value) == 0);
	int rc = AKS_OK;
	if (match) {
		path[strlen(path) - slen] = '\0'; /* the sandbox id: its directory */
		rc = l->fn(l->ctx, path, pairs);
	}
	free(text);
	free(path);
	return rc;
}

int aks_hostdir_labels_list(const aks_host_api *host, const char *provider, const char *prefix,
                            const char *base, const char *key, const char *value,
                            aks_sandbox_list_fn fn, void *ctx, aks_error **err)
{
	list_ctx l = {host, provider, prefix, base, key, value, fn, ctx};
	DIR *d = opendir(base);
	if (!d)
		return host->error_set(err, AKS_EIO, "cannot list '%s': %s", base, strerror(errno));
	int rc = AKS_OK;
	struct dirent *ent;
	while (rc == AKS_OK && (errno = 0, ent = readdir(d)))
		rc = list_one(&l, dirfd(d), ent->d_name);
	int e = errno;
	closedir(d);
	if (rc == AKS_OK && e)
		return host->error_set(err, AKS_EIO, "cannot list '%s': %s", base, strerror(e));
	if (rc == AKS_ENOMEM)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	return rc;
}
