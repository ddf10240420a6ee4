/*
 * plugins/docker/dk_files.c - upload_file and download_file through the
 * archive API (PUT and GET /containers/{id}/archive, tar bodies built and
 * read with libarchive).
 *
 * The path rule is the reference's: strip the leading '/', normalise
 * /workspace/<path> lexically, and refuse anything that is not /workspace or
 * below it (AKS_EPOLICY). The engine resolves symbolic links inside the
 * container's root, so a link under /workspace could still lead elsewhere in
 * the container: before touching a path we stat each existing component
 * (HEAD .../archive, whose X-Docker-Container-Path-Stat header reports a
 * link's resolved target) and refuse a link whose target leaves /workspace.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <archive.h>

#include "aks_agent.h"
#include "aks_base64.h"
#include "aks_container.h"
#include "dk_internal.h"

/* ---- the path rule ----------------------------------------------------------------- */

int dk_safe_path(const aks_host_api *host, const char *path, char **out, aks_error **err)
{
	int rc = aks_ctr_wspath(path, out);
	char why[AKS_CTR_WSPATH_WHY_BUF];
	if (rc != AKS_OK)
		return host->error_set(err, rc, "%s",
		                       aks_ctr_wspath_why(rc, path, why, sizeof(why)));
	return AKS_OK;
}

/* A caller's path as messages show it: bounded (aks_ctr_shown). */
#define SHOWN(path, buf) aks_ctr_shown((path), AKS_CTR_SHOWN_MAX, (buf), sizeof(buf))

/* ---- stat through HEAD .../archive ---------------------------------------------------- */

typedef struct pstat {
	bool exists;
	uint32_t mode; /* Go's os.FileMode */
	char *link;    /* resolved target of a symlink */
} pstat;

static int stat_path(aks_sandbox_impl *sb, const char *cpath, const aks_call *call, pstat *st,
                     aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	memset(st, 0, sizeof(*st));
	char *q = dk_escape(cpath), *path = NULL;
	if (!q || asprintf(&path, "/containers/%s/archive?path=%s", sb->id, q) < 0) {
		free(q);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	free(q);
	dk_req r = {.method = "HEAD", .path = path};
	int rc = dk_request(&sb->conn, &r, call, err);
	free(path);
	if (rc == AKS_OK) {
		if (r.status == 200 && r.path_stat) {
			dk_path_stat ps;
			if (dk_parse_path_stat(r.path_stat, &ps) != AKS_OK)
				rc = host->error_set(err, AKS_ENOMEM, "out of memory");
			st->exists = true;
			st->mode = ps.mode;
			st->link = ps.link;
		} else if (r.status == 404) {
			/* the path, or the container: tell them apart */
			char *msg = dk_engine_message(&r);
			if (strstr(msg, "No such container"))
				rc = dk_gone(host, sb->id, err);
			free(msg);
		} else if (r.status != 200) {
			char *msg = dk_engine_message(&r);
			char shown[AKS_CTR_SHOWN_BUF];
			rc = host->error_set(err, AKS_EIO, "docker: cannot stat '%s': %s",
			                     SHOWN(cpath, shown), msg);
			free(msg);
		}
	}
	dk_req_free(&r);
	return rc;
}

/* Walks the existing components of cpath (below /workspace) and refuses a
 * symbolic link that leads outside. On success *final is the last
 * component's stat, with link resolved, and *existing (if asked) the length of
 * the longest prefix of cpath that exists. */
static int check_links(aks_sandbox_impl *sb, const char *agent_path, const char *cpath,
                       const aks_call *call, pstat *final, size_t *existing, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	memset(final, 0, sizeof(*final));
	size_t start = strlen(DK_WORKSPACE);
	if (existing)
		*existing = start;
	size_t n = strlen(cpath);
	char *prefix = strdup(cpath);
	if (!prefix)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	int rc = AKS_OK;
	for (size_t i = start + 1; i <= n; i++) {
		if (i < n && cpath[i] != '/')
			continue;
		prefix[i] = '\0';
		pstat st;
		rc = stat_path(sb, prefix, call, &st, err);
		prefix[i] = cpath[i];
		if (rc != AKS_OK)
			break;
		bool last = i == n;
		if (st.exists && (st.mode & GO_MODE_SYMLINK) && !aks_ctr_in_workspace(st.link)) {
			free(st.link);
			char shown[AKS_CTR_SHOWN_BUF];
			rc = host->error_set(err, AKS_EPOLICY,
			                     "path '%s' escapes %s through a symbolic link",
			                     SHOWN(agent_path, shown), DK_WORKSPACE);
			break;
		}
		if (st.exists && existing)
			*existing = i;
		if (last) {
			*final = st;
			break;
		}
		free(st.link);
		if (!st.exists)
			break; /* nothing below it exists either */
	}
	free(prefix);
	return rc;
}

/* ---- upload ------------------------------------------------------------------------------- */

int dk_upload_file(aks_sandbox_impl *sb, const char *path, const void *data, size_t len,
                   const aks_call *call, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	char shown[AKS_CTR_SHOWN_BUF];
	if (!path || (!data && len))
		return host->error_set(err, AKS_EINVAL, "upload_file: no path or no data");
	char *cpath = NULL;
	int rc = dk_safe_path(host, path, &cpath, err);
	if (rc != AKS_OK)
		return rc;
	if (strcmp(cpath, DK_WORKSPACE) == 0) {
		free(cpath);
		return host->error_set(err, AKS_EINVAL, "path '%s' names %s, not a file",
		                       SHOWN(path, shown), DK_WORKSPACE);
	}
	pstat st;
	size_t existing = 0;
	rc = check_links(sb, path, cpath, call, &st, &existing, err);
	free(st.link);
	/* for dk_put_file: what exists below /workspace/ */
	sb->upload_existing = existing > sizeof(DK_WORKSPACE) ? existing - sizeof(DK_WORKSPACE) : 0;
	if (rc == AKS_OK && st.exists && (st.mode & GO_MODE_DIR))
		rc = host->error_set(err, AKS_EINVAL, "cannot write '%s': it is a directory",
		                     SHOWN(path, shown));
	/* The checks above are the same either way; then the agent writes the file and
	 * verifies its size and SHA-256, or dk_put_file does with the archive API. */
	if (rc == AKS_OK)
		rc = aks_agent_upload(sb->agent, path, cpath, data, len, call, err);
	free(cpath);
	return rc;
}

int dk_put_file(void *vsb, const char *path, const char *cpath, const void *data, size_t len,
                const aks_call *call, aks_error **err)
{
	aks_sandbox_impl *sb = vsb;
	const aks_host_api *host = sb->prov->host;
	char shown[AKS_CTR_SHOWN_BUF];
	aks_buf tar = {0};
	/* The file and the directories it needs are the containers' user's (the engine would
	 * make missing directories root's, which a user other than root could not write);
	 * the directories that exist are left as they are. */
	aks_ctr_tar_opts o = {
	    .uid = sb->prov->uid, .gid = sb->prov->gid, .existing = sb->upload_existing};
	if (aks_ctr_tar_file_opts(cpath + sizeof(DK_WORKSPACE), data, len, &o, &tar.data,
	                          &tar.len) < 0)
		return host->error_set(err, AKS_ENOMEM, "cannot build the tar for '%s'",
		                       SHOWN(path, shown));
	tar.cap = tar.len + 1;
	char reqpath[320];
	snprintf(reqpath, sizeof(reqpath), "/containers/%s/archive?path=" DK_WORKSPACE, sb->id);
	dk_req r = {.method = "PUT",
	            .path = reqpath,
	            .content_type = "application/x-tar",
	            .body = tar.data,
	            .body_len = tar.len};
	int rc = dk_request(&sb->conn, &r, call, err);
	if (rc == AKS_OK && r.status != 200) {
		char *msg = dk_engine_message(&r);
		if (r.status == 404 && strstr(msg, "No such container"))
			rc = dk_gone(host, sb->id, err);
		else
			rc = host->error_set(err, r.status == 403 ? AKS_EPOLICY : AKS_EIO,
			                     "docker: cannot write '%s': %s", SHOWN(path, shown),
			                     msg);
		free(msg);
	}
	dk_req_free(&r);
	aks__buf_free(&tar);
	return rc;
}

/* ---- download ----------------------------------------------------------------------------------
 */

typedef struct tar_src {
	aks_sandbox_impl *sb;
	dk_req *r;
	const aks_call *call;
	aks_error **err;
	int rc;
	bool started; /* the first block may have come with the status line */
} tar_src;

/* libarchive pulls; we pump libcurl until a block arrives. */
static la_ssize_t tar_read(struct archive *a, void *ctx, const void **buf)
{
	(void)a;
	tar_src *s = ctx;
	if (s->started)
		s->r->resp.len = 0; /* libarchive is done with the previous block */
	s->started = true;
	while (!s->r->resp.len && !s->r->done) {
		s->rc = dk_pump(&s->sb->conn, s->r, s->call, s->err);
		if (s->rc != AKS_OK)
			return -1;
	}
	if (s->r->done && s->r->result != CURLE_OK && !s->r->resp.len) {
		s->rc = dk_unreachable(s->sb->prov, s->r, s->err);
		return -1;
	}
	*buf = s->r->resp.data;
	return (la_ssize_t)s->r->resp.len;
}

static int not_found(const aks_host_api *host, const char *path, aks_error **err)
{
	char shown[AKS_CTR_SHOWN_BUF];
	return host->error_set(err, AKS_ENOTFOUND, "file '%s' not found in the sandbox",
	                       SHOWN(path, shown));
}

int dk_download_file(aks_sandbox_impl *sb, const char *path, const aks_call *call, aks_result *out,
                     aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	if (!path)
		return host->error_set(err, AKS_EINVAL, "download_file: no path");
	char *cpath = NULL;
	int rc = dk_safe_path(host, path, &cpath, err);
	if (rc != AKS_OK)
		return rc;
	pstat st;
	rc = check_links(sb, path, cpath, call, &st, NULL, err);
	if (rc == AKS_OK && st.exists && (st.mode & GO_MODE_SYMLINK)) {
		/* read the target (inside /workspace: checked), if it is a file */
		free(cpath);
		cpath = st.link;
		st.link = NULL;
		rc = stat_path(sb, cpath, call, &st, err);
	}
	free(st.link);
	if (rc == AKS_OK && (!st.exists || (st.mode & GO_MODE_TYPE)))
		rc = not_found(host, path, err);
	/* it reads and checks size and SHA-256, or dk_get_file reads a tar */
	if (rc == AKS_OK)
		rc = aks_agent_download(sb->agent, path, cpath, call, out, err);
	free(cpath);
	return rc;
}

int dk_get_file(void *vsb, const char *path, const char *cpath, const aks_call *call,
                aks_result *out, aks_error **err)
{
	aks_sandbox_impl *sb = vsb;
	const aks_host_api *host = sb->prov->host;
	char shown[AKS_CTR_SHOWN_BUF];
	char *q = dk_escape(cpath), *reqpath = NULL;
	if (!q || asprintf(&reqpath, "/containers/%s/archive?path=%s", sb->id, q) < 0) {
		free(q);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	free(q);
	dk_req r = {.method = "GET", .path = reqpath};
	int rc = dk_begin(&sb->conn, &r, err);
	/* Wait for the status line. */
	long status = 0;
	while (rc == AKS_OK && !r.done && !r.resp.len && !status) {
		rc = dk_pump(&sb->conn, &r, call, err);
		curl_easy_getinfo(sb->conn.easy, CURLINFO_RESPONSE_CODE, &status);
	}
	if (rc == AKS_OK && r.done && r.result != CURLE_OK)
		rc = dk_unreachable(sb->prov, &r, err);
	if (rc == AKS_OK && status != 200) {
		/* an error body: read it whole */
		while (rc == AKS_OK && !r.done)
			rc = dk_pump(&sb->conn, &r, call, err);
		if (rc == AKS_OK) {
			r.status = status;
			char *msg = dk_engine_message(&r);
			if (status == 404 && strstr(msg, "No such container"))
				rc = dk_gone(host, sb->id, err);
			else if (status == 404)
				rc = not_found(host, path, err);
			else
				rc = host->error_set(err, AKS_EIO, "docker: cannot read '%s': %s",
				                     SHOWN(path, shown), msg);
			free(msg);
		}
	}
	if (rc == AKS_OK) {
		tar_src src = {sb, &r, call, err, AKS_OK, false};
		struct archive *a = archive_read_new();
		if (!a) {
			rc = host->error_set(err, AKS_ENOMEM, "out of memory");
		} else {
			archive_read_support_format_tar(a);
			rc = archive_read_open(a, &src, NULL, tar_read, NULL) == ARCHIVE_OK
			         ? aks_ctr_tar_read_file(host, a, path, out, err)
			         : AKS_CTR_BADTAR;
			if (rc == AKS_CTR_BADTAR) /* a failed read has set its own error */
				rc = src.rc != AKS_OK
				         ? src.rc
				         : host->error_set(
				               err, AKS_EIO, "docker: bad tar for '%s': %s",
				               SHOWN(path, shown), archive_error_string(a));
			archive_read_free(a);
		}
	}
	dk_end(&sb->conn, &r);
	dk_req_free(&r);
	free(reqpath);
	return rc;
}
