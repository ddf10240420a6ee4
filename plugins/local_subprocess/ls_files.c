/*
 * plugins/local_subprocess/ls_files.c - upload_file and download_file.
 *
 * Paths are the agent's: a leading '/' is stripped and the rest is resolved
 * inside the sandbox directory like realpath() (symlinks included). A result
 * outside it is AKS_EPOLICY. The file is then opened from a descriptor of the
 * sandbox directory following no symlink at all, so a symlink swapped in
 * between cannot lead outside either (plugins/common/aks_fsguard.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aks_fsguard.h"
#include "ls_internal.h"

#define READ_CHUNK (64 * 1024)

/* dir/rel, or dir when rel is empty; NULL when out of memory. */
static char *join(const char *dir, const char *rel)
{
	char *s;
	if (asprintf(&s, "%s%s%s", dir, *rel ? "/" : "", rel) < 0)
		return NULL;
	return s;
}

static int escapes(const aks_host_api *host, const char *path, aks_error **err)
{
	return host->error_set(err, AKS_EPOLICY, "path '%s' escapes the sandbox working directory",
	                       path);
}

/* aks_fs_resolve() errors as aksandbox errors. */
static int resolve(aks_sandbox_impl *sb, const char *path, char **rel, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	int rc = aks_fs_resolve(sb->dir, path, rel);
	switch (rc) {
	case 0:
		return AKS_OK;
	case -EXDEV:
		return escapes(host, path, err);
	case -ELOOP:
		return host->error_set(err, AKS_EPOLICY,
		                       "path '%s' has too many levels of symbolic links", path);
	case -ENOMEM:
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	case -ENOENT:
	case -ENOTDIR:
		return ls_gone(host, sb->dir, err);
	default:
		return host->error_set(err, AKS_EIO, "cannot resolve path '%s': %s", path,
		                       strerror(-rc));
	}
}

static int open_root(aks_sandbox_impl *sb, int *fd, aks_error **err)
{
	*fd = open(sb->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (*fd >= 0)
		return AKS_OK;
	if (errno == ENOENT || errno == ENOTDIR)
		return ls_gone(sb->prov->host, sb->dir, err);
	return sb->prov->host->error_set(err, AKS_EIO, "cannot open '%s': %s", sb->dir,
	                                 strerror(errno));
}

int ls_upload_file(aks_sandbox_impl *sb, const char *path, const void *data, size_t len,
                   const aks_call *call, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	if (!path || (!data && len))
		return host->error_set(err, AKS_EINVAL, "upload_file: no path or no data");
	char *rel = NULL;
	int rc = resolve(sb, path, &rel, err);
	if (rc != AKS_OK)
		return rc;
	if (!*rel) {
		free(rel);
		return host->error_set(err, AKS_EINVAL,
		                       "path '%s' names the sandbox working directory, not a file",
		                       path);
	}
	/* rel has no trailing '/', so the base name is never empty. */
	char *slash = strrchr(rel, '/');
	const char *base = slash ? slash + 1 : rel;
	if (slash)
		*slash = '\0';
	const char *dir = slash ? rel : "";

	int rootfd;
	if ((rc = open_root(sb, &rootfd, err)) != AKS_OK) {
		free(rel);
		return rc;
	}
	int dfd = aks_fs_mkdirs_beneath(rootfd, dir, 0777);
	close(rootfd);
	if (dfd < 0) {
		if (dfd == -ELOOP || dfd == -EXDEV)
			rc = escapes(host, path, err);
		else if (dfd == -ENOTDIR || dfd == -EEXIST)
			rc =
			    host->error_set(err, AKS_EINVAL,
			                    "cannot write '%s': a parent is not a directory", path);
		else
			rc = host->error_set(err, AKS_EIO,
			                     "cannot create the directories of '%s': %s", path,
			                     strerror(-dfd));
		free(rel);
		return rc;
	}
	if (sb->prov->agent) {
		/* The checks above stay ours (same errors either way); the agent writes and
		 * verifies size and hash. */
		struct stat st;
		bool isdir =
		    fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
		close(dfd);
		if (isdir) {
			free(rel);
			return host->error_set(err, AKS_EINVAL,
			                       "cannot write '%s': it is a directory", path);
		}
		if (slash)
			*slash = '/';
		char *abs = join(sb->dir, rel);
		free(rel);
		if (!abs)
			return host->error_set(err, AKS_ENOMEM, "out of memory");
		rc = ls_agent_write(sb, abs, data, len, call, err);
		free(abs);
		return rc;
	}
	int wrc = aks_fs_write_atomic(dfd, base, data, len, 0666);
	close(dfd);
	free(rel);
	if (wrc == -EISDIR || wrc == -ENOTEMPTY || wrc == -EEXIST)
		return host->error_set(err, AKS_EINVAL, "cannot write '%s': it is a directory",
		                       path);
	if (wrc < 0)
		return host->error_set(err, AKS_EIO, "cannot write '%s': %s", path, strerror(-wrc));
	return AKS_OK;
}

static int not_found(const aks_host_api *host, const char *path, aks_error **err)
{
	return host->error_set(err, AKS_ENOTFOUND, "file '%s' not found in the sandbox", path);
}

int ls_download_file(aks_sandbox_impl *sb, const char *path, const aks_call *call, aks_result *out,
                     aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	if (!path)
		return host->error_set(err, AKS_EINVAL, "download_file: no path");
	char *rel = NULL;
	int rc = resolve(sb, path, &rel, err);
	if (rc != AKS_OK)
		return rc;
	int rootfd;
	if ((rc = open_root(sb, &rootfd, err)) != AKS_OK) {
		free(rel);
		return rc;
	}
	/* O_NONBLOCK: a FIFO planted under the name must not hang us. */
	int fd = aks_fs_open_beneath(rootfd, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
	close(rootfd);
	char *abs = sb->prov->agent ? join(sb->dir, rel) : NULL;
	free(rel);
	if (fd < 0) {
		free(abs);
		return fd == -ELOOP || fd == -EXDEV ? escapes(host, path, err)
		       : fd == -ENOENT || fd == -ENOTDIR || fd == -EISDIR || fd == -ENXIO
		           ? not_found(host, path, err)
		           : host->error_set(err, AKS_EIO, "cannot open '%s': %s", path,
		                             strerror(-fd));
	}

	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		free(abs);
		return not_found(host, path, err);
	}
	if (sb->prov->agent) {
		/* Found and checked here; the agent reads it and verifies size and hash. */
		close(fd);
		if (!abs)
			return host->error_set(err, AKS_ENOMEM, "out of memory");
		rc = ls_agent_read(sb, abs, path, call, out, err);
		free(abs);
		return rc;
	}
	char *buf = malloc(READ_CHUNK);
	if (!buf) {
		close(fd);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	rc = host->result_add_file(out, path, "application/octet-stream");
	if (rc != AKS_OK)
		rc = host->error_set(err, rc, "cannot add file '%s' to the result", path);
	while (rc == AKS_OK) {
		ssize_t n = read(fd, buf, READ_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = host->error_set(err, AKS_EIO, "cannot read '%s': %s", path,
			                     strerror(errno));
			break;
		}
		if (n == 0)
			break;
		/* Past the host's file limit this is AKS_ELIMIT, with *err set. */
		rc = host->result_write(out, AKS_STREAM_FILE, buf, (size_t)n, err);
	}
	free(buf);
	close(fd);
	return rc;
}
