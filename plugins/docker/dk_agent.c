/*
 * plugins/docker/dk_agent.c - what this provider tells the shared agent module
 * (plugins/common/agent/aks_agent.h; docs/plugins/docker.md "Through aksandbox-agent"): how
 * the agent is placed in a container and how its stream is opened and closed. The lifecycle
 * (start, fall back, restart, notices) and the operations over the agent are the module's.
 *
 * Placement: the agent (a static program, read and checked at init) is copied into the
 * container at DK_AGENT_PATH with the archive API (a tar made here, mode 0755): at create
 * between container create and start (so a runtime whose root filesystem does not see
 * host-side writes after start, gVisor, sees it), and by the module before it starts the
 * agent on a handle that finds it missing (attach, attach_to, after a restart). A read-only
 * root (the filesystem policy) has a volume of ours mounted at DK_AGENT_DIR instead. An image
 * of another architecture than the agent's is not tried.
 *
 * The stream: one exec of the agent per sandbox handle, its stdio hijacked (dk_stream.c).
 * Closing it closes the agent's stdin: the agent sees EOF, kills everything it runs, exits.
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
#include <time.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "agent/sha256.h"
#include "aks_agent.h"
#include "aks_base64.h"
#include "aks_container.h"
#include "aks_json.h"
#include "dk_internal.h"

/* The engine has the HELLO answered, or not, well before this: what close waits for the
 * agent to end its output after its stdin closed. */
#define DK_AGENT_EXIT_MS 3000

/* ---- placement ------------------------------------------------------------------------------ */

static bool ring_has(aks_provider_impl *prov, char (*ring)[144], size_t n, const char *key)
{
	bool has = false;
	pthread_mutex_lock(&prov->agent_mu);
	for (size_t i = 0; i < n && !has; i++)
		has = strcmp(ring[i], key) == 0;
	pthread_mutex_unlock(&prov->agent_mu);
	return has;
}

static void ring_add(aks_provider_impl *prov, char (*ring)[144], size_t n, unsigned *next,
                     const char *key)
{
	if (strlen(key) >= sizeof(ring[0]) || ring_has(prov, ring, n, key))
		return;
	pthread_mutex_lock(&prov->agent_mu);
	snprintf(ring[*next % n], sizeof(ring[0]), "%s", key);
	*next = (*next + 1) % n;
	pthread_mutex_unlock(&prov->agent_mu);
}

static void ring_del(aks_provider_impl *prov, char (*ring)[144], size_t n, const char *key)
{
	pthread_mutex_lock(&prov->agent_mu);
	for (size_t i = 0; i < n; i++)
		if (strcmp(ring[i], key) == 0)
			ring[i][0] = '\0';
	pthread_mutex_unlock(&prov->agent_mu);
}

#define N_ARCH   DK_ARCH_RING
#define N_PLACED DK_PLACED_RING

static int get_json(dk_conn *c, const char *path, const aks_call *call, long *status,
                    json_object **out, aks_error **err)
{
	dk_req r = {.method = "GET", .path = path};
	int rc = dk_request(c, &r, call, err);
	*out = NULL;
	*status = r.status;
	if (rc == AKS_OK && r.status == 200)
		*out = dk_resp_json(&r);
	dk_req_free(&r);
	return rc;
}

/* The image's architecture against the agent's; *why set on a mismatch. image: the
 * container's image when known (a container we just created from the configured one),
 * else NULL: read from the container. */
static int check_arch(dk_conn *c, const char *id, const char *image, const aks_call *call,
                      char **why, aks_error **err)
{
	aks_provider_impl *prov = (aks_provider_impl *)c->prov;
	const char *agent_arch = aks_agent_program_elf(prov->agent)->oci;
	char path[320];
	long status = 0;
	json_object *info = NULL, *img = NULL;
	int rc = AKS_OK;
	if (!image) {
		snprintf(path, sizeof(path), "/containers/%s/json", id);
		rc = get_json(c, path, call, &status, &info, err);
		if (rc == AKS_OK && status == 404)
			rc = dk_gone(prov->host, id, err);
		image = json_object_get_string(aks__jget(info, "Image"));
	}
	if (rc == AKS_OK && image && !ring_has(prov, prov->arch_ok, N_ARCH, image)) {
		char *q = dk_escape(image);
		if (!q)
			rc = prov->host->error_set(err, AKS_ENOMEM, "out of memory");
		else
			snprintf(path, sizeof(path), "/images/%s/json", q);
		free(q);
		if (rc == AKS_OK)
			rc = get_json(c, path, call, &status, &img, err);
		const char *arch = json_object_get_string(aks__jget(img, "Architecture"));
		if (rc == AKS_OK && arch && *arch && strcmp(arch, agent_arch) != 0) {
			if (asprintf(why,
			             "the image of container '%s' is for architecture %s, "
			             "aksandbox-agent %s for %s",
			             id, arch, aks_agent_program_path(prov->agent), agent_arch) < 0)
				*why = NULL;
			/* every container made from the configured image: no use trying again */
			else if (strcmp(image, prov->image) == 0)
				aks_agent_program_unusable(prov->agent, *why);
		} else if (rc == AKS_OK && arch && *arch) {
			ring_add(prov, prov->arch_ok, N_ARCH, &prov->arch_ok_next, image);
		}
	}
	json_object_put(img);
	json_object_put(info);
	return rc;
}

/* HEAD .../archive: *exists, and the size and Go file mode from the path-stat header. */
static int stat_path(dk_conn *c, const char *id, const char *cpath, const aks_call *call,
                     bool *exists, int64_t *size, uint32_t *mode, aks_error **err)
{
	const aks_host_api *host = c->prov->host;
	char path[512];
	snprintf(path, sizeof(path), "/containers/%s/archive?path=%s", id, cpath);
	dk_req r = {.method = "HEAD", .path = path};
	int rc = dk_request(c, &r, call, err);
	*exists = false;
	*size = -1;
	*mode = 0;
	if (rc == AKS_OK && r.status == 200 && r.path_stat) {
		dk_path_stat ps;
		if (dk_parse_path_stat(r.path_stat, &ps) != AKS_OK)
			rc = host->error_set(err, AKS_ENOMEM, "out of memory");
		free(ps.link);
		*exists = true;
		*size = ps.size;
		*mode = ps.mode;
	} else if (rc == AKS_OK && r.status == 404) {
		char *msg = dk_engine_message(&r);
		if (strstr(msg, "No such container"))
			rc = dk_gone(host, id, err);
		free(msg);
	}
	dk_req_free(&r);
	return rc;
}

/* Whether the copy at DK_AGENT_PATH is this build's: its bytes, fetched with the archive
 * API, hashed against the program's. The sandbox's own root may have overwritten it (with
 * something of the same size, even); a copy that is not ours is never started. */
static int copy_is_ours(dk_conn *c, const char *id, const aks_call *call, bool *ours,
                        aks_error **err)
{
	aks_provider_impl *prov = (aks_provider_impl *)c->prov;
	*ours = false;
	char path[320];
	snprintf(path, sizeof(path), "/containers/%s/archive?path=" DK_AGENT_PATH, id);
	dk_req r = {.method = "GET", .path = path};
	int rc = dk_request(c, &r, call, err);
	struct archive *a = rc == AKS_OK && r.status == 200 ? archive_read_new() : NULL;
	struct archive_entry *e;
	if (a && archive_read_support_format_tar(a) == ARCHIVE_OK &&
	    archive_read_open_memory(a, r.resp.data, r.resp.len) == ARCHIVE_OK &&
	    archive_read_next_header(a, &e) == ARCHIVE_OK) {
		aks_sha256 h;
		aks__sha256_init(&h);
		char buf[16384];
		la_ssize_t n;
		while ((n = archive_read_data(a, buf, sizeof(buf))) > 0)
			aks__sha256_update(&h, buf, (size_t)n);
		uint8_t got[AKS_SHA256_LEN];
		aks__sha256_final(&h, got);
		*ours =
		    n == 0 && memcmp(got, aks_agent_program_sha256(prov->agent), sizeof(got)) == 0;
	}
	if (a)
		archive_read_free(a);
	dk_req_free(&r);
	return rc;
}

/* PUT the agent: into DK_AGENT_DIR (in_dir) or the directory and the program into /. */
static int put_agent(dk_conn *c, const char *id, bool in_dir, const aks_call *call, char **why,
                     aks_error **err)
{
	aks_provider_impl *prov = (aks_provider_impl *)c->prov;
	const aks_host_api *host = prov->host;
	size_t size;
	const void *bin = aks_agent_program_data(prov->agent, &size);
	aks_buf tar = {0};
	if (aks_ctr_tar_file_mode(in_dir ? DK_AGENT_NAME : DK_AGENT_DIR_REL "/" DK_AGENT_NAME, bin,
	                          size, !in_dir, 0755, &tar.data, &tar.len) < 0)
		return host->error_set(err, AKS_ENOMEM, "cannot make a tar of aksandbox-agent");
	tar.cap = tar.len + 1;
	char path[320];
	snprintf(path, sizeof(path), "/containers/%s/archive?path=%s", id,
	         in_dir ? DK_AGENT_DIR : "/");
	dk_req r = {.method = "PUT",
	            .path = path,
	            .content_type = "application/x-tar",
	            .body = tar.data,
	            .body_len = tar.len};
	int rc = dk_request(c, &r, call, err);
	if (rc == AKS_OK && r.status != 200) {
		char *msg = dk_engine_message(&r);
		if (r.status == 404 && strstr(msg, "No such container"))
			rc = dk_gone(host, id, err);
		else if (asprintf(why, "cannot place aksandbox-agent in container '%s': %s", id,
		                  msg) < 0)
			*why = NULL;
		free(msg);
	}
	dk_req_free(&r);
	aks__buf_free(&tar);
	if (rc == AKS_OK && !*why)
		ring_add(prov, prov->placed, N_PLACED, &prov->placed_next, id);
	return rc;
}

static int dk_agent_place(dk_conn *c, const char *id, const aks_call *call, char **why,
                          aks_error **err)
{
	aks_provider_impl *prov = (aks_provider_impl *)c->prov;
	*why = NULL;
	if (ring_has(prov, prov->placed, N_PLACED, id))
		return AKS_OK; /* checked by an earlier handle of this process */
	int rc = check_arch(c, id, NULL, call, why, err);
	if (rc != AKS_OK || *why)
		return rc;
	bool exists;
	int64_t size;
	uint32_t mode;
	rc = stat_path(c, id, DK_AGENT_PATH, call, &exists, &size, &mode, err);
	if (rc != AKS_OK)
		return rc;
	size_t agent_size;
	aks_agent_program_data(prov->agent, &agent_size);
	bool ours = false;
	if (exists && size == (int64_t)agent_size && !(mode & GO_MODE_DIR) && (mode & 0100) &&
	    (rc = copy_is_ours(c, id, call, &ours, err)) != AKS_OK)
		return rc;
	if (ours) { /* there already, this build's */
		ring_add(prov, prov->placed, N_PLACED, &prov->placed_next, id);
		return AKS_OK;
	}
	if (exists) /* another build's; of the same size but other bytes: changed inside */
		prov->host->log(
		    size == (int64_t)agent_size ? AKS_LOG_WARNING : AKS_LOG_INFO, DK_NAME,
		    "the aksandbox-agent in container '%s' is not this build's%s: placing "
		    "it again",
		    id, size == (int64_t)agent_size ? " (changed inside the sandbox?)" : "");
	/* Into the directory when it exists (a volume of ours under a read-only root), else
	 * the directory and the program into /. */
	rc = stat_path(c, id, DK_AGENT_DIR, call, &exists, &size, &mode, err);
	if (rc != AKS_OK)
		return rc;
	return put_agent(c, id, exists && (mode & GO_MODE_DIR), call, why, err);
}

int dk_agent_place_new(dk_conn *c, const char *id, bool into_dir, const aks_call *call, char **why,
                       aks_error **err)
{
	*why = NULL;
	int rc = check_arch(c, id, c->prov->image, call, why, err);
	if (rc != AKS_OK || *why)
		return rc;
	return put_agent(c, id, into_dir, call, why, err);
}

/* ---- the module's table --------------------------------------------------------------------- */

static int dk_agent_place_slot(void *vsb, bool look_again, const aks_call *call, char **path,
                               bool *verified, char **why, aks_error **err)
{
	aks_sandbox_impl *sb = vsb;
	aks_provider_impl *prov = sb->prov;
	if (look_again)
		ring_del(prov, prov->placed, N_PLACED, sb->id);
	/* Known from an earlier handle (or the create): trusted, but looked at again if the
	 * start fails (a container recreated under the same name, say). */
	*verified = !ring_has(prov, prov->placed, N_PLACED, sb->id);
	int rc = dk_agent_place(&sb->conn, sb->id, call, why, err);
	if (rc == AKS_OK && !*why && !(*path = strdup(DK_AGENT_PATH)))
		rc = prov->host->error_set(err, AKS_ENOMEM, "out of memory");
	return rc;
}

static int dk_agent_open(void *vsb, const char *path, const char *const *args, const aks_call *call,
                         void **stream, int *rfd, int *wfd, char **why, aks_error **err)
{
	aks_sandbox_impl *sb = vsb;
	const aks_host_api *host = sb->prov->host;
	const char *argv[8] = {path};
	for (size_t i = 0; args && args[i] && i + 2 < sizeof(argv) / sizeof(argv[0]); i++)
		argv[i + 1] = args[i];
	char *exec_id = NULL;
	int rc = dk_exec_create(sb, argv, NULL, DK_WORKSPACE, true, call, &exec_id, err);
	if (rc != AKS_OK)
		return rc;
	aks_error *e = NULL;
	dk_stream *st = NULL;
	rc = dk_stream_open(sb->prov, sb->id, exec_id, call, &st, rfd, wfd, &e);
	free(exec_id);
	*stream = st;
	if (rc == AKS_OK || rc == AKS_EGONE || rc == AKS_ETIMEOUT || rc == AKS_ECANCELLED ||
	    rc == AKS_ENOMEM) {
		if (err && !*err)
			*err = e;
		else if (e)
			host->error_free(e);
		return rc;
	}
	/* The engine would not hijack the connection (a proxy in between, say): per call still
	 * works. */
	if (asprintf(why, "cannot stream to aksandbox-agent in container '%s': %s", sb->id,
	             e ? host->error_message(e) : "?") < 0)
		*why = NULL;
	if (e)
		host->error_free(e);
	return *why ? AKS_OK : host->error_set(err, AKS_ENOMEM, "out of memory");
}

static void dk_agent_close(void *vsb, void *stream, char *said, size_t len)
{
	(void)vsb;
	/* a short wait when the caller wants to hear why it did not start */
	dk_stream_close(stream, said ? 1000 : DK_AGENT_EXIT_MS, said, len);
}

/* The container's existence, asked after the agent's stream broke. */
static int dk_agent_check(void *vsb, const aks_call *call, aks_error **err)
{
	aks_sandbox_impl *sb = vsb;
	const aks_host_api *host = sb->prov->host;
	char path[320];
	snprintf(path, sizeof(path), "/containers/%s/json", sb->id);
	long status = 0;
	json_object *info = NULL;
	int rc = get_json(&sb->conn, path, call, &status, &info, err);
	if (rc == AKS_OK && status == 404)
		rc = dk_gone(host, sb->id, err);
	json_object *state = aks__jget(info, "State");
	if (rc == AKS_OK && state && !json_object_get_boolean(aks__jget(state, "Running"))) {
		/* gVisor's whole sandbox is what its memory limit kills: exit 137, often with no
		 * OOMKilled flag (the cgroup killed the sandbox, not a process in it) */
		int code = json_object_get_int(aks__jget(state, "ExitCode"));
		bool oom = json_object_get_boolean(aks__jget(state, "OOMKilled")) || code == 137;
		rc = host->error_set(
		    err, AKS_EIO, "container '%s' stopped (exit code %d%s)", sb->id, code,
		    oom ? ": killed, most likely for going over its memory limit" : "");
	}
	json_object_put(info);
	return rc;
}

static int per_call_code(void *sb, const char *code, const char *language, const aks_call *call,
                         aks_result *out, aks_error **err)
{
	return dk_run_code(sb, code, language, call, out, err);
}

static int per_call_command(void *sb, const char *command, const aks_call *call, aks_result *out,
                            aks_error **err)
{
	return dk_run_command(sb, command, call, out, err);
}

static int per_call_argv(void *sb, const char *const *argv, const aks_call *call, aks_result *out,
                         aks_error **err)
{
	return dk_run_argv(sb, argv, call, out, err);
}

const aks_agent_ops dk_agent_ops = {
    .noun = "container",
    .timeout_subject = "docker exec",
    .shell = "/bin/sh",
    /* the container outlives the host process: so does its agent, and the Python state */
    .resident = true,
    .file_mode = 0644,
    /* gVisor's exec stream does not end when its container dies: ask the engine */
    .check_idle_ms = 1000,
    .watch_ms = 2000,
    .place = dk_agent_place_slot,
    .open = dk_agent_open,
    .close = dk_agent_close,
    .check = dk_agent_check,
    .execute_code = per_call_code,
    .execute_command = per_call_command,
    .install_packages = per_call_argv,
    .upload = dk_put_file,
    .download = dk_get_file,
};
