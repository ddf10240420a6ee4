/*
 * plugins/daytona/daytona_files.c - the file tools through the toolbox's file endpoints, as
 * the official SDK uses them: GET /files/download?path= answers the file's bytes; POST
 * /files/upload-v2?path= takes them as the part "file" of a multipart form. Paths are the
 * workspace's, below /home/daytona (the sandbox user's home, where commands start): the same
 * rule as every provider's, so a path cannot leave it, by its name or through a symbolic link
 * (the sandbox resolves the path first, aks_wsresolve.h), and only a regular file is read or
 * written (a FIFO would block the toolbox).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aks_shquote.h"
#include "aks_wspath.h"
#include "aks_wsresolve.h"
#include "daytona_internal.h"

/* The absolute path in the sandbox for a caller's path, or the error. */
static int sandbox_path(aks_sandbox_impl *sb, const char *path, char **out, aks_error **err)
{
	int rc = aks_wspath(DAYTONA_HOME, path, out);
	if (rc == AKS_OK)
		return AKS_OK;
	char why[AKS_CTR_WSPATH_WHY_BUF];
	return sb->prov->host->error_set(err, rc, "%s",
	                                 aks_wspath_why(DAYTONA_HOME, rc, path, why, sizeof(why)));
}

/* Before a transfer: the absolute path (malloc'd in *abs) by the rule and as the sandbox
 * resolves it; a write's parent directories made. */
static int prepare(aks_sandbox_impl *sb, const char *path, bool write, const aks_call *call,
                   char **abs, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	int rc = sandbox_path(sb, path, abs, err);
	if (rc != AKS_OK)
		return rc;
	const char *argv[] = {"sh",         "-c", aks_wsresolve_script,   "resolve",
	                      DAYTONA_HOME, *abs, write ? "mkdir" : NULL, NULL};
	char *words = aks_shquote_argv(argv), *line = NULL;
	if (words && asprintf(&line, "%s </dev/null", words) < 0)
		line = NULL;
	free(words);
	aks_buf out = AKS_BUF_INIT;
	int code = 0;
	rc = line ? dt_run_capture(sb, line, "resolve a path", call, &out, &code, err)
	          : host->error_set(err, AKS_ENOMEM, "out of memory");
	if (rc == AKS_OK)
		rc = aks_wsresolve_judge(host, DAYTONA_NAME, DAYTONA_HOME, path,
		                         out.data ? out.data : "", code, err);
	aks__buf_free(&out);
	free(line);
	if (rc != AKS_OK) {
		free(*abs);
		*abs = NULL;
	}
	return rc;
}

/* A /files URL for an absolute sandbox path. */
static char *files_url(aks_sandbox_impl *sb, const char *endpoint, const char *abs)
{
	char *escaped = aks_cloud_escape(abs), *path = NULL, *url = NULL;
	if (escaped && asprintf(&path, "%s?path=%s", endpoint, escaped) >= 0)
		url = dt_toolbox_url(sb, path);
	free(escaped);
	free(path);
	return url;
}

int dt_upload_file(aks_sandbox_impl *sb, const char *path, const void *data, size_t len,
                   const aks_call *call, aks_error **err)
{
	aks_provider_impl *prov = sb->prov;
	const aks_host_api *host = prov->host;
	char *abs = NULL;
	int rc = prepare(sb, path, true, call, &abs, err);
	if (rc != AKS_OK)
		return rc;
	struct curl_slist *h = NULL;
	char *url = files_url(sb, "/files/upload-v2", abs);
	rc = url ? dt_headers(prov, true, NULL, &h, err)
	         : host->error_set(err, AKS_ENOMEM, "out of memory");
	char what[160];
	snprintf(what, sizeof(what), "write '%.100s'", abs);
	/* the same bytes to the same path: safe to send again */
	const char *name = strrchr(abs, '/');
	aks_cloud_req r = {.what = what,
	                   .method = "POST",
	                   .url = url,
	                   .service = true,
	                   .headers = h,
	                   .body = data,
	                   .body_len = len,
	                   .retry = AKS_CLOUD_RETRY_SAFE,
	                   .form_file = name && name[1] ? name + 1 : "file"};
	if (rc == AKS_OK)
		rc = aks_cloud_http(&prov->cloud, &r, call, err);
	bool again = false;
	if (rc == AKS_OK && (r.status < 200 || r.status >= 300))
		rc = dt_toolbox_failed(sb, &r, call, r.status == 507 ? AKS_ELIMIT : AKS_EIO, &again,
		                       err);
	/* the path was resolved in the running sandbox a moment ago: a restart between the two
	 * is not tried again, and said */
	if (rc == AKS_OK && again)
		rc = host->error_set(err, AKS_EIO,
		                     "daytona: cannot %s: the sandbox was stopped and is started "
		                     "again; try again",
		                     what);
	aks_cloud_req_free(&r);
	aks_cloud_headers_free(h);
	free(url);
	free(abs);
	return rc;
}

int dt_download_file(aks_sandbox_impl *sb, const char *path, const aks_call *call, aks_result *out,
                     aks_error **err)
{
	aks_provider_impl *prov = sb->prov;
	const aks_host_api *host = prov->host;
	char *abs = NULL;
	int rc = prepare(sb, path, false, call, &abs, err);
	if (rc != AKS_OK)
		return rc;
	struct curl_slist *h = NULL;
	char *url = files_url(sb, "/files/download", abs);
	rc = url ? dt_headers(prov, true, NULL, &h, err)
	         : host->error_set(err, AKS_ENOMEM, "out of memory");
	char what[160];
	snprintf(what, sizeof(what), "read '%.100s'", abs);
	aks_cloud_file_sink sink = {.host = host, .out = out, .path = path};
	bool again = false;
	aks_cloud_req r = {.what = what,
	                   .method = "GET",
	                   .url = url,
	                   .service = true,
	                   .headers = h,
	                   .retry = AKS_CLOUD_RETRY_SAFE,
	                   .sink = aks_cloud_file_sink_write,
	                   .sink_ctx = &sink};
	if (rc == AKS_OK)
		rc = aks_cloud_http(&prov->cloud, &r, call, err);
	if (rc == AKS_OK && r.status == 404 && dt_from_daemon(&r))
		rc = host->error_set(err, AKS_ENOTFOUND, "file not found: %s", path);
	else if (rc == AKS_OK && (r.status < 200 || r.status >= 300) &&
	         (rc = dt_toolbox_failed(sb, &r, call, AKS_EIO, &again, err)) == AKS_OK)
		rc = host->error_set(err, AKS_EIO,
		                     "daytona: cannot %s: the sandbox was stopped and is started "
		                     "again; try again",
		                     what);
	else if (rc == AKS_OK)
		rc = aks_cloud_file_sink_end(&sink, err);
	aks_cloud_file_sink_free(&sink);
	aks_cloud_req_free(&r);
	aks_cloud_headers_free(h);
	free(url);
	free(abs);
	return rc;
}
