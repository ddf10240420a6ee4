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

/*
 * The path as the sandbox resolves it (links followed, missing parts kept, by realpath -m in
 * the sandbox) must still be below the home: a link in the workspace cannot take the file
 * tools out of it. The check and the transfer are two requests, so a program of the
 * sandbox's own that swaps a link between them can win that race, and reach what it could
 * read and write itself anyway: the micro-VM is the boundary (docs/plugins/e2b.md).
 */
static int resolve_in_sandbox(aks_sandbox_impl *sb, const char *path, const char *abs,
                              const aks_call *call, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	/* exit 3: the path names something that is not a regular file (a FIFO, a directory, a
	 * device), which envd would open and could block on: refused before any transfer */
	const char *argv[] = {"/bin/sh",
	                      "-c",
	                      "h=$(realpath -m -- \"$1\") && r=$(realpath -m -- \"$2\") || exit 1\n"
	                      "printf '%s\\n%s\\n' \"$h\" \"$r\"\n"
	                      "[ ! -e \"$r\" ] || [ -f \"$r\" ] || exit 3\n",
	                      "resolve",
	                      E2B_HOME,
	                      abs,
	                      NULL};
	aks_buf out = AKS_BUF_INIT;
	int code = 0;
	int rc = e2b_run_capture(sb, argv, "resolve a path", call, &out, &code, err);
	if (rc == AKS_OK) {
		/* two lines: the home as resolved, then the path */
		char *home = out.data ? out.data : "", *real = strchr(home, '\n');
		if (real)
			*real++ = '\0';
		size_t n = real ? strlen(real) : 0;
		if (n && real[n - 1] == '\n')
			real[n - 1] = '\0';
		char shown[AKS_CTR_SHOWN_BUF];
		const char *p = aks_ctr_shown(aks_ctr_wspath_rel(path), AKS_CTR_SHOWN_MAX, shown,
		                              sizeof(shown));
		if (code == 3 && real && *real && aks_wspath_in_root(home, real))
			rc =
			    host->error_set(err, AKS_EINVAL,
			                    "path '%s' is not a regular file (a directory, FIFO or "
			                    "device): the file tools read and write files only",
			                    p);
		else if (code == 3 && real && *real)
			rc = host->error_set(err, AKS_EPOLICY,
			                     "path '%s' escapes %s (through a symbolic link)", p,
			                     E2B_HOME);
		else if (code != 0 || !real || !*real || !*home)
			rc = host->error_set(
			    err, AKS_EIO,
			    "e2b: cannot resolve path '%s' in the sandbox (realpath "
			    "exited %d)",
			    p, code);
		else if (!aks_wspath_in_root(home, real))
			rc = host->error_set(err, AKS_EPOLICY,
			                     "path '%s' escapes %s (through a symbolic link)", p,
			                     E2B_HOME);
	}
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

typedef struct download_state {
	const aks_host_api *host;
	aks_result *out;
	const char *path;
	bool added;
	int rc;
	aks_error *err;
} download_state;

static bool sink_file(void *ctx, const char *data, size_t len)
{
	download_state *st = ctx;
	const aks_host_api *host = st->host;
	if (!st->added) {
		if ((st->rc = host->result_add_file(st->out, st->path, NULL)) != AKS_OK)
			return false;
		st->added = true;
	}
	st->rc = host->result_write(st->out, AKS_STREAM_FILE, data, len, &st->err);
	return st->rc == AKS_OK;
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
	download_state st = {.host = host, .out = out, .path = path};
	aks_cloud_req r = {.what = what,
	                   .method = "GET",
	                   .url = url,
	                   .service = true,
	                   .headers = h,
	                   .retry = AKS_CLOUD_RETRY_SAFE,
	                   .sink = sink_file,
	                   .sink_ctx = &st};
	if (rc == AKS_OK)
		rc = aks_cloud_http(&prov->cloud, &r, call, err);
	if (rc == AKS_OK && st.rc != AKS_OK) {
		rc = st.err ? host->error_set(err, st.rc, "%s", host->error_message(st.err))
		            : host->error_set(err, st.rc, "e2b: cannot keep '%s'", path);
	} else if (rc == AKS_OK && r.status == 404) {
		rc = host->error_set(err, AKS_ENOTFOUND, "file not found: %s", path);
	} else if (rc == AKS_OK && (r.status < 200 || r.status >= 300)) {
		rc = e2b_answer_error(prov, &r, sb->id, AKS_EIO, err);
	} else if (rc == AKS_OK && !st.added) { /* an empty file: no body to sink */
		rc = host->result_add_file(out, path, NULL);
		if (rc != AKS_OK)
			rc = host->error_set(err, rc, "out of memory");
	}
	if (st.err)
		host->error_free(st.err);
	aks_cloud_req_free(&r);
	aks_cloud_headers_free(h);
	free(url);
	free(abs);
	return rc;
}
