/*
 * plugins/local_subprocess/ls_labels.c - the labels of a sandbox directory, so that the host's
 * garbage collector can find the directories its killed processes left (list_sandboxes).
 *
 * They live beside the directory, in "<dir>.labels", one "key=value" line each: not inside
 * the workspace, where the sandbox's own files are. (This provider isolates nothing, so code
 * in a sandbox can change them anyway; all it can do with that is hide its own directory from
 * the collector, or hand it to another store's.)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aks_file.h"
#include "ls_internal.h"

#define LABELS_SUFFIX ".labels"
#define LABELS_MAX    4096 /* bytes of one labels file */
#define LABELS_PAIRS  16   /* key, value pairs read from one */

static char *labels_path(const char *dir)
{
	char *path = NULL;
	return asprintf(&path, "%s" LABELS_SUFFIX, dir) < 0 ? NULL : path;
}

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

int ls_labels_write(aks_provider_impl *prov, const char *dir, const char *const *labels,
                    aks_error **err)
{
	const aks_host_api *host = prov->host;
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

void ls_labels_remove(aks_provider_impl *prov, const char *dir)
{
	char *path = labels_path(dir);
	struct stat st;
	if (path && lstat(path, &st) == 0 && S_ISREG(st.st_mode) && unlink(path) < 0)
		prov->host->log(AKS_LOG_WARNING, LS_NAME, "destroy: cannot remove '%s': %s", path,
		                strerror(errno));
	free(path);
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

/* One directory entry: a labels file of ours that carries key=value is reported. */
static int list_one(aks_provider_impl *prov, int dfd, const char *base, const char *name,
                    const char *key, const char *value, aks_sandbox_list_fn fn, void *ctx)
{
	size_t nlen = strlen(name), slen = strlen(LABELS_SUFFIX);
	if (strncmp(name, LS_PREFIX, strlen(LS_PREFIX)) != 0 || nlen <= slen ||
	    strcmp(name + nlen - slen, LABELS_SUFFIX) != 0)
		return AKS_OK;
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
		return AKS_OK;
	char *path = NULL;
	if (asprintf(&path, "%s/%s", strcmp(base, "/") == 0 ? "" : base, name) < 0)
		return AKS_ENOMEM;
	size_t len;
	char *text = aks__file_read(path, LABELS_MAX, &len);
	if (!text) {
		if (errno == ENOMEM) {
			free(path);
			return AKS_ENOMEM;
		}
		/* Gone meanwhile (destroyed), or not ours to read: nothing to report. */
		prov->host->log(AKS_LOG_DEBUG, LS_NAME, "list: skipping '%s': %s", path,
		                strerror(errno));
		free(path);
		return AKS_OK;
	}
	const char *pairs[2 * LABELS_PAIRS + 1];
	size_t n = parse(text, pairs);
	bool match = false;
	for (size_t i = 0; i < n; i++)
		match = match ||
		        (strcmp(pairs[2 * i], key) == 0 && strcmp(pairs[2 * i + 1], value) == 0);
	int rc = AKS_OK;
	if (match) {
		path[strlen(path) - slen] = '\0'; /* the sandbox id: its directory */
		rc = fn(ctx, path, pairs);
	}
	free(text);
	free(path);
	return rc;
}

int ls_labels_list(aks_provider_impl *prov, const char *base, const char *key, const char *value,
                   aks_sandbox_list_fn fn, void *ctx, aks_error **err)
{
	DIR *d = opendir(base);
	if (!d)
		return prov->host->error_set(err, AKS_EIO, "cannot list '%s': %s", base,
		                             strerror(errno));
	int rc = AKS_OK;
	struct dirent *ent;
	while (rc == AKS_OK && (errno = 0, ent = readdir(d)))
		rc = list_one(prov, dirfd(d), base, ent->d_name, key, value, fn, ctx);
	int e = errno;
	closedir(d);
	if (rc == AKS_OK && e)
		return prov->host->error_set(err, AKS_EIO, "cannot list '%s': %s", base,
		                             strerror(e));
	if (rc == AKS_ENOMEM)
		return prov->host->error_set(err, AKS_ENOMEM, "out of memory");
	return rc;
}
