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

#include "aks_agent.h"
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

/* The directory of a file to write, created beneath the sandbox directory, and the file's
 * base name in it: *dfd (the caller closes it) and *rel (the caller frees it; *base points
 * into it). */
static int prepare_write(aks_sandbox_impl *sb, const char *path, int *dfd, char **rel,
                         const char **base, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	int rc = resolve(sb, path, rel, err);
	if (rc != AKS_OK)
		return rc;
	if (!**rel) {
		free(*rel);
		return host->error_set(err, AKS_EINVAL,
		                       "path '%s' names the sandbox working directory, not a file",
		                       path);
	}
	/* rel has no trailing '/', so the base name is never empty. */
	char *slash = strrchr(*rel, '/');
	*base = slash ? slash + 1 : *rel;
	int rootfd;
	if ((rc = open_root(sb, &rootfd, err)) != AKS_OK) {
		free(*rel);
		return rc;
	}
	if (slash)
		*slash = '\0';
	*dfd = aks_fs_mkdirs_beneath(rootfd, slash ? *rel : "", 0777);
	if (slash)
		*slash = '/';
	close(rootfd);
	if (*dfd >= 0)
		return AKS_OK;
	if (*dfd == -ELOOP || *dfd == -EXDEV)
		rc = escapes(host, path, err);
	else if (*dfd == -ENOTDIR || *dfd == -EEXIST)
		rc = host->error_set(err, AKS_EINVAL,
		                     "cannot write '%s': a parent is not a directory", path);
	else
		rc = host->error_set(err, AKS_EIO, "cannot create the directories of '%s': %s",
		                     path, strerror(-*dfd));
	free(*rel);
	return rc;
}

int ls_upload_file(aks_sandbox_impl *sb, const char *path, const void *data, size_t len,
                   const aks_call *call, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	if (!path || (!data && len))
		return host->error_set(err, AKS_EINVAL, "upload_file: no path or no data");
	int dfd;
	char *rel;
	const char *base;
	int rc = prepare_write(sb, path, &dfd, &rel, &base, err);
	if (rc != AKS_OK)
		return rc;
	/* The checks stay ours (the same errors either way); then the agent writes and verifies
	 * size and hash, or ls_write_file writes beneath the directory. */
	struct stat st;
	bool isdir = fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
	close(dfd);
	char *abs = isdir ? NULL : join(sb->dir, rel);
	free(rel);
	if (isdir)
		return host->error_set(err, AKS_EINVAL, "cannot write '%s': it is a directory",
		                       path);
	if (!abs)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	rc = aks_agent_upload(sb->agent, path, abs, data, len, call, err);
	free(abs);
	return rc;
}

int ls_write_file(aks_sandbox_impl *sb, const char *path, const void *data, size_t len,
                  aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	int dfd;
	char *rel;
	const char *base;
	int rc = prepare_write(sb, path, &dfd, &rel, &base, err);
	if (rc != AKS_OK)
		return rc;
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

/* Opens path for reading beneath the sandbox directory: *fd of a regular file, and *rel
 * (the caller frees it). */
static int open_file(aks_sandbox_impl *sb, const char *path, int *fd, char **rel, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	int rc = resolve(sb, path, rel, err);
	if (rc != AKS_OK)
		return rc;
	int rootfd;
	if ((rc = open_root(sb, &rootfd, err)) != AKS_OK) {
		free(*rel);
		return rc;
	}
	/* O_NONBLOCK: a FIFO planted under the name must not hang us. */
	*fd = aks_fs_open_beneath(rootfd, *rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
	close(rootfd);
	struct stat st;
	if (*fd >= 0 && fstat(*fd, &st) == 0 && S_ISREG(st.st_mode))
		return AKS_OK;
	free(*rel);
	if (*fd >= 0) {
		close(*fd);
		return not_found(host, path, err);
	}
	int e = *fd;
	return e == -ELOOP || e == -EXDEV ? escapes(host, path, err)
	       : e == -ENOENT || e == -ENOTDIR || e == -EISDIR || e == -ENXIO
	           ? not_found(host, path, err)
	           : host->error_set(err, AKS_EIO, "cannot open '%s': %s", path, strerror(-e));
}

int ls_download_file(aks_sandbox_impl *sb, const char *path, const aks_call *call, aks_result *out,
                     aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	if (!path)
		return host->error_set(err, AKS_EINVAL, "download_file: no path");
	int fd;
	char *rel;
	int rc = open_file(sb, path, &fd, &rel, err);
	if (rc != AKS_OK)
		return rc;
	/* Found and checked here; the agent reads it and verifies size and hash, or
	 * ls_read_file does. */
	close(fd);
	char *abs = join(sb->dir, rel);
	free(rel);
	if (!abs)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	rc = aks_agent_download(sb->agent, path, abs, call, out, err);
	free(abs);
	return rc;
}

int ls_read_file(aks_sandbox_impl *sb, const char *path, aks_result *out, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	int fd;
	char *rel;
	int rc = open_file(sb, path, &fd, &rel, err);
	if (rc != AKS_OK)
		return rc;
	free(rel);
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
