/*
 * plugins/common/hostdir_files.c - the files of a sandbox directory, reached from the host
 * (aks_hostdir.h).
 *
 * A path is first resolved inside the directory like realpath() (symlinks included); a result
 * outside it is AKS_EPOLICY. The file is then opened from a descriptor of the directory
 * following no symlink at all, so a symlink swapped in between cannot lead outside either
 * (aks_fsguard.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aks_fsguard.h"
#include "aks_hostdir.h"

#define READ_CHUNK (64 * 1024)

static int escapes(const aks_host_api *host, const char *path, aks_error **err)
{
	return host->error_set(err, AKS_EPOLICY, "path '%s' escapes the sandbox working directory",
	                       path);
}

static int not_found(const aks_host_api *host, const char *path, aks_error **err)
{
	return host->error_set(err, AKS_ENOTFOUND, "file '%s' not found in the sandbox", path);
}

/* aks_fs_resolve() errors as aksandbox errors. */
static int resolve(const aks_host_api *host, const char *dir, const char *path, char **rel,
                   aks_error **err)
{
	int rc = aks_fs_resolve(dir, path, rel);
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
		return aks_hostdir_gone(host, dir, err);
	default:
		return host->error_set(err, AKS_EIO, "cannot resolve path '%s': %s", path,
		                       strerror(-rc));
	}
}

static int open_root(const aks_host_api *host, const char *dir, int *fd, aks_error **err)
{
	*fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (*fd >= 0)
		return AKS_OK;
	if (errno == ENOENT || errno == ENOTDIR)
		return aks_hostdir_gone(host, dir, err);
	return host->error_set(err, AKS_EIO, "cannot open '%s': %s", dir, strerror(errno));
}

/* The directory of a file to write, created beneath dir, and the file's base name in it:
 * *dfd (the caller closes it) and *rel (the caller frees it; *base points into it). */
static int prepare_write(const aks_host_api *host, const char *dir, const char *path, int *dfd,
                         char **rel, const char **base, aks_error **err)
{
	int rc = resolve(host, dir, path, rel, err);
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
	if ((rc = open_root(host, dir, &rootfd, err)) != AKS_OK) {
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

int aks_hostdir_prepare_upload(const aks_host_api *host, const char *dir, const char *path,
                               char **rel, aks_error **err)
{
	if (!path)
		return host->error_set(err, AKS_EINVAL, "upload_file: no path or no data");
	int dfd;
	const char *base;
	int rc = prepare_write(host, dir, path, &dfd, rel, &base, err);
	if (rc != AKS_OK)
		return rc;
	struct stat st;
	bool isdir = fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
	close(dfd);
	if (!isdir)
		return AKS_OK;
	free(*rel);
	*rel = NULL;
	return host->error_set(err, AKS_EINVAL, "cannot write '%s': it is a directory", path);
}

int aks_hostdir_write(const aks_host_api *host, const char *dir, const char *path, const void *data,
                      size_t len, aks_error **err)
{
	int dfd;
	char *rel;
	const char *base;
	int rc = prepare_write(host, dir, path, &dfd, &rel, &base, err);
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

/* Opens path for reading beneath dir: *fd of a regular file, and *rel (the caller frees
 * it). */
static int open_file(const aks_host_api *host, const char *dir, const char *path, int *fd,
                     char **rel, aks_error **err)
{
	int rc = resolve(host, dir, path, rel, err);
	if (rc != AKS_OK)
		return rc;
	int rootfd;
	if ((rc = open_root(host, dir, &rootfd, err)) != AKS_OK) {
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
	*rel = NULL;
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

int aks_hostdir_prepare_download(const aks_host_api *host, const char *dir, const char *path,
                                 char **rel, aks_error **err)
{
	if (!path)
		return host->error_set(err, AKS_EINVAL, "download_file: no path");
	int fd;
	int rc = open_file(host, dir, path, &fd, rel, err);
	if (rc == AKS_OK)
		close(fd);
	return rc;
}

int aks_hostdir_read(const aks_host_api *host, const char *dir, const char *path, aks_result *out,
                     aks_error **err)
{
	int fd;
	char *rel;
	int rc = open_file(host, dir, path, &fd, &rel, err);
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
