/*
 * plugins/kubernetes/k8s_files.c - upload_file and download_file as tar
 * (libarchive) through exec. The exec channels are binary, so the tar
 * travels as it is, with no base64 layer:
 *
 *  - upload: a tar of the file (and its parent directories) on stdin, read
 *    by `head -c <size> | tar -xf -` in /workspace (head gives tar its end
 *    of input without a stdin half-close, which v4 lacks); the status is
 *    tar's;
 *  - download: `[ -f "$1" ] || exit 44; exec tar -chf - "$1"`: a missing
 *    file (or a directory) is a clear not-found rather than an empty
 *    archive (the original's section 11 item 12), and tar's own failure is
 *    its exit status, not that of a pipeline.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <archive.h>
#include <archive_entry.h>

#include "k8s_plugin.h"

#define NOT_FOUND_EXIT 44
#define DOWNLOAD_MAX   (512u << 20)
#define STDERR_MAX     65536

static la_ssize_t tar_write(struct archive *a, void *ctx, const void *buf, size_t len)
{
	(void)a;
	return k8s_buf_add(ctx, buf, len) == 0 ? (la_ssize_t)len : -1;
}

/* A tar of `data` named rel (relative to the workspace), its parents first. */
static int build_tar(const char *rel, const void *data, size_t len, k8s_buf *tar)
{
	struct archive *a = archive_write_new();
	if (!a)
		return -1;
	struct archive_entry *e = archive_entry_new();
	int ok = e && archive_write_set_format_pax_restricted(a) == ARCHIVE_OK &&
	         archive_write_set_bytes_in_last_block(a, 1) == ARCHIVE_OK &&
	         archive_write_open(a, tar, NULL, tar_write, NULL) == ARCHIVE_OK;
	time_t now = time(NULL);
	char *dir = strdup(rel);
	ok = ok && dir;
	for (char *slash = dir ? strchr(dir, '/') : NULL; ok && slash;
	     slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		archive_entry_clear(e);
		archive_entry_set_pathname(e, dir);
		archive_entry_set_filetype(e, AE_IFDIR);
		archive_entry_set_perm(e, 0755);
		archive_entry_set_mtime(e, now, 0);
		ok = archive_write_header(a, e) == ARCHIVE_OK;
		*slash = '/';
	}
	free(dir);
	if (ok) {
		archive_entry_clear(e);
		archive_entry_set_pathname(e, rel);
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_perm(e, 0644);
		archive_entry_set_size(e, (la_int64_t)len);
		archive_entry_set_mtime(e, now, 0);
		ok = archive_write_header(a, e) == ARCHIVE_OK;
		const char *p = data;
		size_t left = len;
		while (ok && left) {
			la_ssize_t w = archive_write_data(a, p, left);
			if (w <= 0)
				ok = 0;
			else
				p += w, left -= (size_t)w;
		}
		ok = ok && archive_write_close(a) == ARCHIVE_OK;
	}
	if (e)
		archive_entry_free(e);
	archive_write_free(a);
	return ok ? 0 : -1;
}

static void trim(k8s_buf *b)
{
	while (b->len && (b->data[b->len - 1] == '\n' || b->data[b->len - 1] == '\r'))
		b->data[--b->len] = '\0';
}

static int safe_path(aks_sandbox_impl *sb, const char *path, char **cpath, aks_error **err)
{
	k8s_err ke = {0};
	int rc = k8s_safe_path(path, cpath, &ke);
	if (rc != AKS_OK)
		return sb->prov->host->error_set(err, rc, "%s", ke.msg);
	return AKS_OK;
}

int k8s_upload_file(aks_sandbox_impl *sb, const char *path, const void *data, size_t len,
                    const aks_call *call, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	if (!path || (!data && len))
		return host->error_set(err, AKS_EINVAL, "upload_file: no path or no data");
	char *cpath = NULL;
	int rc = safe_path(sb, path, &cpath, err);
	if (rc != AKS_OK)
		return rc;
	if (strcmp(cpath, K8S_WORKSPACE) == 0) {
		free(cpath);
		return host->error_set(err, AKS_EINVAL, "path '%s' names %s, not a file", path,
		                       K8S_WORKSPACE);
	}
	k8s_buf tar = {0};
	if (build_tar(cpath + sizeof(K8S_WORKSPACE), data, len, &tar) < 0) {
		free(cpath);
		k8s_buf_free(&tar);
		return host->error_set(err, AKS_ENOMEM, "cannot build the tar for '%s'", path);
	}
	free(cpath);
	char script[128];
	snprintf(script, sizeof(script), "head -c %zu | tar -xf -", tar.len);
	const char *argv[] = {"/bin/sh", "-c", script, NULL};
	k8s_buf errb = {0};
	k8s_exec_opts o = {.argv = argv,
	                   .stdin_data = tar.data,
	                   .stdin_len = tar.len,
	                   .capture_err = &errb,
	                   .capture_max = STDERR_MAX};
	int code = -1;
	rc = k8s_exec(sb, &o, call, &code, err);
	if (rc == AKS_OK && code != 0) {
		trim(&errb);
		rc = host->error_set(err, AKS_EIO, "upload of '%s' to pod '%s' failed: %s", path,
		                     sb->id, errb.len ? errb.data : "tar exited non-zero");
	}
	k8s_buf_free(&errb);
	k8s_buf_free(&tar);
	return rc;
}

static int not_found(const aks_host_api *host, const char *path, aks_error **err)
{
	return host->error_set(err, AKS_ENOTFOUND, "file '%s' not found in the sandbox", path);
}

int k8s_download_file(aks_sandbox_impl *sb, const char *path, const aks_call *call, aks_result *out,
                      aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	if (!path)
		return host->error_set(err, AKS_EINVAL, "download_file: no path");
	char *cpath = NULL;
	int rc = safe_path(sb, path, &cpath, err);
	if (rc != AKS_OK)
		return rc;
	char *rel = NULL;
	if (asprintf(&rel, ".%s", cpath + strlen(K8S_WORKSPACE)) < 0) {
		free(cpath);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	free(cpath);
	char script[96];
	snprintf(script, sizeof(script), "[ -f \"$1\" ] || exit %d; exec tar -chf - \"$1\"",
	         NOT_FOUND_EXIT);
	const char *argv[] = {"/bin/sh", "-c", script, "sh", rel, NULL};
	k8s_buf tar = {0}, errb = {0};
	k8s_exec_opts o = {
	    .argv = argv, .capture = &tar, .capture_err = &errb, .capture_max = DOWNLOAD_MAX};
	int code = -1;
	rc = k8s_exec(sb, &o, call, &code, err);
	free(rel);
	if (rc == AKS_OK && code == NOT_FOUND_EXIT)
		rc = not_found(host, path, err);
	else if (rc == AKS_OK && code != 0) {
		trim(&errb);
		rc = host->error_set(err, AKS_EIO, "download of '%s' from pod '%s' failed: %s",
		                     path, sb->id, errb.len ? errb.data : "tar exited non-zero");
	}
	struct archive *a = rc == AKS_OK ? archive_read_new() : NULL;
	if (rc == AKS_OK && !a)
		rc = host->error_set(err, AKS_ENOMEM, "out of memory");
	if (a) {
		archive_read_support_format_tar(a);
		bool found = false;
		if (archive_read_open_memory(a, tar.data ? tar.data : "", tar.len) != ARCHIVE_OK)
			rc = host->error_set(err, AKS_EIO, "kubernetes: bad tar for '%s': %s", path,
			                     archive_error_string(a));
		struct archive_entry *e;
		while (rc == AKS_OK && !found) {
			int h = archive_read_next_header(a, &e);
			if (h == ARCHIVE_EOF)
				break;
			if (h != ARCHIVE_OK && h != ARCHIVE_WARN) {
				rc = host->error_set(err, AKS_EIO,
				                     "kubernetes: bad tar for '%s': %s", path,
				                     archive_error_string(a));
				break;
			}
			if (archive_entry_filetype(e) != AE_IFREG)
				continue;
			found = true;
			if ((rc = host->result_add_file(out, path, "application/octet-stream")) !=
			    AKS_OK) {
				rc = host->error_set(err, rc, "cannot add file '%s' to the result",
				                     path);
				break;
			}
			for (;;) {
				const void *blk;
				size_t blen;
				la_int64_t off;
				int d = archive_read_data_block(a, &blk, &blen, &off);
				if (d == ARCHIVE_EOF)
					break;
				if (d != ARCHIVE_OK && d != ARCHIVE_WARN) {
					rc = host->error_set(err, AKS_EIO,
					                     "kubernetes: bad tar for '%s': %s",
					                     path, archive_error_string(a));
					break;
				}
				/* past the host's file limit: AKS_ELIMIT with *err set */
				if (blen && (rc = host->result_write(out, AKS_STREAM_FILE, blk,
				                                     blen, err)) != AKS_OK)
					break;
			}
		}
		if (rc == AKS_OK && !found)
			rc = not_found(host, path, err);
		archive_read_free(a);
	}
	k8s_buf_free(&tar);
	k8s_buf_free(&errb);
	return rc;
}
