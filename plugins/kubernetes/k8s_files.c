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

#include <archive.h>

#include "aks_container.h"
#include "k8s_internal.h"

#define NOT_FOUND_EXIT 44
#define DOWNLOAD_MAX   (512u << 20)
#define STDERR_MAX     65536

int k8s_sandbox_path(aks_sandbox_impl *sb, const char *path, char **cpath, aks_error **err)
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
	int rc = k8s_sandbox_path(sb, path, &cpath, err);
	if (rc != AKS_OK)
		return rc;
	if (strcmp(cpath, K8S_WORKSPACE) == 0) {
		free(cpath);
		return host->error_set(err, AKS_EINVAL, "path '%s' names %s, not a file", path,
		                       K8S_WORKSPACE);
	}
	aks_buf tar = {0};
	if (aks_ctr_tar_file(cpath + sizeof(K8S_WORKSPACE), data, len, true, &tar.data, &tar.len) <
	    0) {
		free(cpath);
		aks__buf_free(&tar);
		return host->error_set(err, AKS_ENOMEM, "cannot build the tar for '%s'", path);
	}
	tar.cap = tar.len + 1;
	free(cpath);
	char script[128];
	snprintf(script, sizeof(script), "head -c %zu | tar -xf -", tar.len);
	const char *argv[] = {"/bin/sh", "-c", script, NULL};
	aks_buf errb = {0};
	k8s_exec_opts o = {.argv = argv,
	                   .stdin_data = tar.data,
	                   .stdin_len = tar.len,
	                   .capture_err = &errb,
	                   .capture_max = STDERR_MAX};
	int code = -1;
	rc = k8s_exec(sb, &o, call, &code, err);
	if (rc == AKS_OK && code != 0) {
		aks__buf_rtrim(&errb, "\r\n");
		rc = host->error_set(err, AKS_EIO, "upload of '%s' to pod '%s' failed: %s", path,
		                     sb->id, errb.len ? errb.data : "tar exited non-zero");
	}
	aks__buf_free(&errb);
	aks__buf_free(&tar);
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
	int rc = k8s_sandbox_path(sb, path, &cpath, err);
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
	aks_buf tar = {0}, errb = {0};
	k8s_exec_opts o = {
	    .argv = argv, .capture = &tar, .capture_err = &errb, .capture_max = DOWNLOAD_MAX};
	int code = -1;
	rc = k8s_exec(sb, &o, call, &code, err);
	free(rel);
	if (rc == AKS_OK && code == NOT_FOUND_EXIT)
		rc = not_found(host, path, err);
	else if (rc == AKS_OK && code != 0) {
		aks__buf_rtrim(&errb, "\r\n");
		rc = host->error_set(err, AKS_EIO, "download of '%s' from pod '%s' failed: %s",
		                     path, sb->id, errb.len ? errb.data : "tar exited non-zero");
	}
	struct archive *a = rc == AKS_OK ? archive_read_new() : NULL;
	if (rc == AKS_OK && !a)
		rc = host->error_set(err, AKS_ENOMEM, "out of memory");
	if (a) {
		archive_read_support_format_tar(a);
		rc = archive_read_open_memory(a, tar.data ? tar.data : "", tar.len) == ARCHIVE_OK
		         ? aks_ctr_tar_read_file(host, a, path, out, err)
		         : AKS_CTR_BADTAR;
		if (rc == AKS_CTR_BADTAR)
			rc = host->error_set(err, AKS_EIO, "kubernetes: bad tar for '%s': %s", path,
			                     archive_error_string(a));
		archive_read_free(a);
	}
	aks__buf_free(&tar);
	aks__buf_free(&errb);
	return rc;
}
