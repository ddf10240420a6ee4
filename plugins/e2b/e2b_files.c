/*
 * plugins/e2b/e2b_files.c - the file tools through envd's file endpoints, as the official
 * SDKs use them: GET /files?path= answers the file's bytes; POST /files?path= takes them, as
 * the body itself (application/octet-stream, envd 0.5.7 and later) or as the "file" part of
 * a multipart form (older envd); envd creates the parent directories. Paths are the
 * workspace's, below /home/user (the sandbox user's home, where commands start): the same
 * rule as every provider's, so a path cannot leave it, by its name or through a symbolic
 * link (the sandbox resolves the path first).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aks_wspath.h"
#include "aks_wsresolve.h"
#include "e2b_internal.h"

/* The first envd that takes an upload as the request's body. */
#define ENVD_OCTET_STREAM_UPLOAD "0.5.7"

/* The absolute path in the sandbox for a caller's path, or the error. */
static int sandbox_path(aks_sandbox_impl *sb, const char *path, char **out, aks_error **err)
{
	int rc = aks_wspath(E2B_HOME, path, out);
	if (rc == AKS_OK)
		return AKS_OK;
	char why[AKS_CTR_WSPATH_WHY_BUF];
	return sb->prov->host->error_set(err, rc, "%s",
	                                 aks_wspath_why(E2B_HOME, rc, path, why, sizeof(why)));
}

/* The path as the sandbox resolves it must still be below the home, and be a regular file
 * or nothing yet (aks_wsresolve.h). */
static int resolve_in_sandbox(aks_sandbox_impl *sb, const char *path, const char *abs,
                              const aks_call *call, aks_error **err)
{
	const char *argv[] = {"/bin/sh", "-c", aks_wsresolve_script, "resolve", E2B_HOME,
	                      abs,       NULL};
	aks_buf out = AKS_BUF_INIT;
	int code = 0;
	int rc = e2b_run_capture(sb, argv, "resolve a path", call, &out, &code, err);
	if (rc == AKS_OK)
		rc = aks_wsresolve_judge(sb->prov->host, E2B_NAME, E2B_HOME, path,
		                         out.data ? out.data : "", code, err);
	aks__buf_free(&out);
	return rc;
}

/* Before a transfer: the absolute path (malloc'd in *abs) by the rule and as the sandbox
 * resolves it, and E2B's timeout kept fresh. */
static int prepare(aks_sandbox_impl *sb, const char *path, const aks_call *call, char **abs,
                   aks_error **err)
{
	int rc = sandbox_path(sb, path, abs, err);
	if (rc == AKS_OK)
		rc = e2b_sandbox_touch(sb, call, err);
	if (rc == AKS_OK)
		rc = resolve_in_sandbox(sb, path, *abs, call, err);
	if (rc != AKS_OK) {
		free(*abs);
		*abs = NULL;
	}
	return rc;
}

/* The /files URL for an absolute sandbox path. */
static char *files_url(aks_sandbox_impl *sb, const char *abs)
{
	char *escaped = aks_cloud_escape(abs), *path = NULL, *url = NULL;
	/* envd before 0.4.0 needs the user named here too */
	bool user = e2b_version_cmp(sb->envd_version, "0.4.0") < 0;
	if (escaped &&
	    asprintf(&path, "/files?path=%s%s", escaped, user ? "&username=user" : "") >= 0)
		url = e2b_sandbox_url(sb, E2B_ENVD_PORT, path);
	free(escaped);
	free(path);
	return url;
}

int e2b_upload_file(aks_sandbox_impl *sb, const char *path, const void *data, size_t len,
                    const aks_call *call, aks_error **err)
{
	aks_provider_impl *prov = sb->prov;
	const aks_host_api *host = prov->host;
	char *abs = NULL;
	int rc = prepare(sb, path, call, &abs, err);
	if (rc != AKS_OK)
		return rc;
	bool octet = e2b_version_cmp(sb->envd_version, ENVD_OCTET_STREAM_UPLOAD) >= 0;
	struct curl_slist *h = NULL;
	char *url = files_url(sb, abs);
	rc = url ? e2b_sandbox_headers(sb, E2B_ENVD_PORT, octet ? "application/octet-stream" : NULL,
	                               &h, err)
	         : host->error_set(err, AKS_ENOMEM, "out of memory");
	char what[160];
	snprintf(what, sizeof(what), "write '%.100s'", abs);
	/* the same bytes to the same path: safe to send again */
	aks_cloud_req r = {.what = what,
	                   .method = "POST",
	                   .url = url,
	                   .service = true,
	                   .headers = h,
	                   .body = data,
	                   .body_len = len,
	                   .retry = AKS_CLOUD_RETRY_SAFE,
	                   .form_file = octet ? NULL : abs};
	if (rc == AKS_OK)
		rc = aks_cloud_http(&prov->cloud, &r, call, err);
	if (rc == AKS_OK && (r.status < 200 || r.status >= 300))
		rc =
		    e2b_answer_error(prov, &r, sb->id, r.status == 507 ? AKS_ELIMIT : AKS_EIO, err);
	aks_cloud_req_free(&r);
	aks_cloud_headers_free(h);
	free(url);
	free(abs);
	return rc;
}

int e2b_download_file(aks_sandbox_impl *sb, const char *path, const aks_call *call, aks_result *out,
                      aks_error **err)
{
	aks_provider_impl *prov = sb->prov;
	const aks_host_api *host = prov->host;
	char *abs = NULL;
	int rc = prepare(sb, path, call, &abs, err);
	if (rc != AKS_OK)
		return rc;
	struct curl_slist *h = NULL;
	char *url = files_url(sb, abs);
	rc = url ? e2b_sandbox_headers(sb, E2B_ENVD_PORT, NULL, &h, err)
	         : host->error_set(err, AKS_ENOMEM, "out of memory");
	char what[160];
	snprintf(what, sizeof(what), "read '%.100s'", abs);
	aks_cloud_file_sink sink = {.host = host, .out = out, .path = path};
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
	if (rc == AKS_OK && r.status == 404)
		rc = host->error_set(err, AKS_ENOTFOUND, "file not found: %s", path);
	else if (rc == AKS_OK && (r.status < 200 || r.status >= 300))
		rc = e2b_answer_error(prov, &r, sb->id, AKS_EIO, err);
	else if (rc == AKS_OK)
		rc = aks_cloud_file_sink_end(&sink, err);
	aks_cloud_file_sink_free(&sink);
	aks_cloud_req_free(&r);
	aks_cloud_headers_free(h);
	free(url);
	free(abs);
	return rc;
}
