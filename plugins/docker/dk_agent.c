/*
 * plugins/docker/dk_agent.c - running a sandbox's operations through aksandbox-agent
 * (docs/agent-protocol.md, docs/plugins/docker.md "Through aksandbox-agent").
 *
 * Placement: the agent (a static program, checked at init: ELF, its architecture, no
 * interpreter) is copied into the container at DK_AGENT_PATH with the archive API (a tar
 * made here, mode 0755): at create between container create and start (so a runtime whose
 * root filesystem does not see host-side writes after start, gVisor, sees it), and before
 * starting it on a handle that finds it missing (attach, attach_to, after a restart). A
 * read-only root (the filesystem policy) has a volume of ours mounted at DK_AGENT_DIR
 * instead. An image of another architecture than the agent's is not tried.
 *
 * The stream: one exec of the agent per sandbox handle, started lazily by the first
 * operation, its stdio hijacked (dk_stream.c) and handed to the agent client
 * (core/agent_client.c, compiled into this plugin). Closing the handle closes the stream:
 * the agent sees EOF, kills everything it runs and exits.
 *
 * Fallback: when the agent cannot be placed or does not start (no HELLO), the handle runs
 * every operation the per-call way (dk_exec.c, dk_files.c); the first time, a warning, and
 * from then on the instance's description says so and `stateful` is no longer claimed.
 *
 * Restart: an operation that finds the stream broken (the container restarted, the agent
 * was killed) places the agent again if it is missing, starts it, and puts a notice on its
 * result: the Python session's state is gone.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <elf.h>
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

#include "agent_client.h"
#include "aks_container.h"
#include "dk_internal.h"

#ifndef DK_AGENT_DEFAULT
#error "DK_AGENT_DEFAULT must be defined (the installed aksandbox-agent)"
#endif

/* How long close waits for the agent to end its output after its stdin closed. */
#define DK_AGENT_EXIT_MS 3000
/* How long the agent has to answer HELLO (at most; the call's deadline may be sooner). */
#define DK_AGENT_HELLO_MS 10000
#define DK_AGENT_MAX_SIZE (64 * 1024 * 1024)

static const char lost_notice[] =
    "the sandbox's aksandbox-agent was restarted (the container restarted or the agent was "
    "killed): the Python session's state from earlier calls is lost";

/* ---- the program on the host: config time ------------------------------------------------ */

/* Docker's name (the image's Architecture) for an ELF machine. */
static const char *docker_arch(unsigned machine, bool is64)
{
	switch (machine) {
	case EM_X86_64:
		return "amd64";
	case EM_386:
		return "386";
	case EM_AARCH64:
		return "arm64";
	case EM_ARM:
		return "arm";
	case EM_PPC64:
		return "ppc64le";
	case EM_S390:
		return is64 ? "s390x" : "s390";
	case EM_RISCV:
		return is64 ? "riscv64" : "riscv32";
	default:
		return NULL;
	}
}

/* Reads the ELF header of path: its architecture and whether it needs an interpreter
 * (dynamic linking, which the host's libraries satisfy but a container's need not). NULL
 * when fine; otherwise why it cannot run in a container. */
static const char *inspect_elf(const char *path, char *arch, size_t archlen, size_t *size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return "it cannot be opened";
	struct stat st;
	unsigned char id[EI_NIDENT];
	const char *why = NULL;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > DK_AGENT_MAX_SIZE) {
		why = "it is not a regular file of a sensible size";
		goto out;
	}
	*size = (size_t)st.st_size;
	if (pread(fd, id, sizeof(id), 0) != (ssize_t)sizeof(id) ||
	    memcmp(id, ELFMAG, SELFMAG) != 0) {
		why = "it is not an ELF executable";
		goto out;
	}
	const unsigned char host_data =
	    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB;
	if (id[EI_DATA] != host_data) {
		/* Another byte order than ours: we cannot read on, and it surely is built for
		 * another engine; let the image's architecture decide (unknown here). */
		snprintf(arch, archlen, "%s", "");
		goto out;
	}
	bool is64 = id[EI_CLASS] == ELFCLASS64;
	unsigned machine, phnum;
	uint64_t phoff, phentsize;
	if (is64) {
		Elf64_Ehdr eh;
		if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh)) {
			why = "its ELF header is truncated";
			goto out;
		}
		machine = eh.e_machine, phnum = eh.e_phnum, phoff = eh.e_phoff,
		phentsize = eh.e_phentsize;
	} else {
		Elf32_Ehdr eh;
		if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh)) {
			why = "its ELF header is truncated";
			goto out;
		}
		machine = eh.e_machine, phnum = eh.e_phnum, phoff = eh.e_phoff,
		phentsize = eh.e_phentsize;
	}
	const char *a = docker_arch(machine, is64);
	snprintf(arch, archlen, "%s", a ? a : "");
	for (unsigned i = 0; i < phnum && !why; i++) {
		uint32_t type = 0;
		if (pread(fd, &type, sizeof(type), (off_t)(phoff + i * phentsize)) !=
		    (ssize_t)sizeof(type)) {
			why = "its program headers are truncated";
			break;
		}
		if (type == PT_INTERP)
			why = "it is dynamically linked (it needs the host's libraries; use the "
			      "static "
			      "aksandbox-agent)";
	}
out:
	close(fd);
	return why;
}

int dk_agent_config(aks_provider_impl *prov, const char *agent, aks_error **err)
{
	const aks_host_api *host = prov->host;
	bool installed = access(DK_AGENT_DEFAULT, X_OK) == 0;
	if (!agent) {
		/* The installed agent, when there is one; otherwise the per-call path. */
		if (installed)
			agent = DK_AGENT_DEFAULT;
	} else if (strcmp(agent, "false") == 0) {
		agent = NULL;
	} else if (agent[0] != '/' || access(agent, X_OK) != 0) {
		return host->error_set(err, AKS_ECONFIG,
		                       "docker: agent: '%s' is not an executable absolute path "
		                       "(false disables the agent)",
		                       agent);
	}
	int n;
	if (!agent) {
		n = asprintf(&prov->desc_agent, "one docker exec per call (agent disabled%s)",
		             installed ? "" : " or not installed");
		if (n < 0)
			prov->desc_agent = NULL;
		return n < 0 ? host->error_set(err, AKS_ENOMEM, "out of memory") : AKS_OK;
	}
	if (!(prov->agent = strdup(agent)))
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	const char *why =
	    inspect_elf(agent, prov->agent_arch, sizeof(prov->agent_arch), &prov->agent_size);
	n = asprintf(&prov->desc_agent,
	             "through aksandbox-agent %s, one per sandbox handle (placed at " DK_AGENT_PATH
	             "%s); one docker exec per call where it cannot be placed or started",
	             agent,
	             strcmp(prov->python, "python3") == 0
	                 ? ", Python in its persistent session"
	                 : "; python is not python3: Python runs per call");
	if (n < 0) {
		prov->desc_agent = NULL;
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	if (why) {
		char *reason = NULL;
		if (asprintf(&reason, "aksandbox-agent %s cannot run in a container: %s", agent,
		             why) < 0)
			return host->error_set(err, AKS_ENOMEM, "out of memory");
		dk_agent_unusable(prov, reason);
		free(reason);
	}
	return AKS_OK;
}

void dk_agent_unusable(aks_provider_impl *prov, const char *reason)
{
	pthread_mutex_lock(&prov->agent_mu);
	bool first = !prov->desc_fallback;
	if (first && asprintf(&prov->desc_fallback, "one docker exec per call: %s", reason) < 0)
		prov->desc_fallback = NULL;
	if (prov->desc_fallback) {
		__atomic_store_n(&prov->agent_unusable, 1, __ATOMIC_RELEASE);
		/* The host holds the pointer to caps: the flag changes in place. */
		__atomic_store_n(&prov->caps.stateful, false, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&prov->agent_mu);
	prov->host->log(first ? AKS_LOG_WARNING : AKS_LOG_INFO, DK_NAME,
	                "%s; running operations with one docker exec per call", reason);
}

bool dk_agent_usable(const aks_provider_impl *prov)
{
	return prov->agent && !__atomic_load_n(&prov->agent_unusable, __ATOMIC_ACQUIRE);
}

const char *dk_agent_description(const aks_provider_impl *prov)
{
	return prov->agent && __atomic_load_n(&prov->agent_unusable, __ATOMIC_ACQUIRE)
	           ? prov->desc_fallback
	           : prov->desc_agent;
}

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

static json_object *jget(json_object *o, const char *key)
{
	json_object *v = NULL;
	return o && json_object_object_get_ex(o, key, &v) ? v : NULL;
}

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
	if (!prov->agent_arch[0])
		return AKS_OK; /* unknown to us: the start will tell */
	char path[320];
	long status = 0;
	json_object *info = NULL, *img = NULL;
	int rc = AKS_OK;
	if (!image) {
		snprintf(path, sizeof(path), "/containers/%s/json", id);
		rc = get_json(c, path, call, &status, &info, err);
		if (rc == AKS_OK && status == 404)
			rc = dk_gone(prov->host, id, err);
		image = json_object_get_string(jget(info, "Image"));
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
		const char *arch = json_object_get_string(jget(img, "Architecture"));
		if (rc == AKS_OK && arch && *arch && strcmp(arch, prov->agent_arch) != 0) {
			if (asprintf(why,
			             "the image of container '%s' is for architecture %s, "
			             "aksandbox-agent %s for %s",
			             id, arch, prov->agent, prov->agent_arch) < 0)
				*why = NULL;
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
		char *js = aks_ctr_b64_decode(r.path_stat, strlen(r.path_stat), NULL);
		json_object *j = js ? json_tokener_parse(js) : NULL;
		free(js);
		*exists = true;
		*size = json_object_get_int64(jget(j, "size"));
		*mode = (uint32_t)json_object_get_int64(jget(j, "mode"));
		json_object_put(j);
	} else if (rc == AKS_OK && r.status == 404) {
		char *msg = dk_engine_message(&r);
		if (strstr(msg, "No such container"))
			rc = dk_gone(host, id, err);
		free(msg);
	}
	dk_req_free(&r);
	return rc;
}

static la_ssize_t tar_write(struct archive *a, void *ctx, const void *buf, size_t len)
{
	(void)a;
	return dk_buf_add(ctx, buf, len) == 0 ? (la_ssize_t)len : -1;
}

/* A tar of the agent (mode 0755) named `name`, after a directory entry `dir` if given. */
static int agent_tar(const char *agent, const char *dir, const char *name, dk_buf *out)
{
	int fd = open(agent, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	struct stat st;
	char *bin = NULL;
	int ok = fstat(fd, &st) == 0 && st.st_size <= DK_AGENT_MAX_SIZE &&
	         (bin = malloc((size_t)st.st_size + 1)) != NULL;
	size_t got = 0;
	while (ok && got < (size_t)st.st_size) {
		ssize_t n = read(fd, bin + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			ok = 0;
		else
			got += (size_t)n;
	}
	close(fd);
	struct archive *a = ok ? archive_write_new() : NULL;
	struct archive_entry *e = a ? archive_entry_new() : NULL;
	ok = e && archive_write_set_format_pax_restricted(a) == ARCHIVE_OK &&
	     archive_write_set_bytes_in_last_block(a, 1) == ARCHIVE_OK &&
	     archive_write_open(a, out, NULL, tar_write, NULL) == ARCHIVE_OK;
	time_t now = time(NULL);
	if (ok && dir) {
		archive_entry_set_pathname(e, dir);
		archive_entry_set_filetype(e, AE_IFDIR);
		archive_entry_set_perm(e, 0755);
		archive_entry_set_mtime(e, now, 0);
		ok = archive_write_header(a, e) == ARCHIVE_OK;
	}
	if (ok) {
		archive_entry_clear(e);
		archive_entry_set_pathname(e, name);
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_perm(e, 0755);
		archive_entry_set_size(e, (la_int64_t)got);
		archive_entry_set_mtime(e, now, 0);
		ok = archive_write_header(a, e) == ARCHIVE_OK &&
		     archive_write_data(a, bin, got) == (la_ssize_t)got;
	}
	if (a) {
		ok = archive_write_close(a) == ARCHIVE_OK && ok;
		archive_write_free(a);
	}
	if (e)
		archive_entry_free(e);
	free(bin);
	return ok ? 0 : -1;
}

#define GO_MODE_DIR (1u << 31)

/* PUT the agent: into DK_AGENT_DIR (in_dir) or the directory and the program into /. */
static int put_agent(dk_conn *c, const char *id, bool in_dir, const aks_call *call, char **why,
                     aks_error **err)
{
	aks_provider_impl *prov = (aks_provider_impl *)c->prov;
	const aks_host_api *host = prov->host;
	dk_buf tar = {0};
	if (agent_tar(prov->agent, in_dir ? NULL : DK_AGENT_DIR_REL,
	              in_dir ? DK_AGENT_NAME : DK_AGENT_DIR_REL "/" DK_AGENT_NAME, &tar) < 0) {
		dk_buf_free(&tar);
		if (asprintf(why, "cannot read %s or make a tar of it", prov->agent) < 0)
			*why = NULL;
		return AKS_OK;
	}
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
	dk_buf_free(&tar);
	if (rc == AKS_OK && !*why)
		ring_add(prov, prov->placed, N_PLACED, &prov->placed_next, id);
	return rc;
}

int dk_agent_place(dk_conn *c, const char *id, const aks_call *call, char **why, aks_error **err)
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
	if (exists && size == (int64_t)prov->agent_size && !(mode & GO_MODE_DIR) && (mode & 0100)) {
		/* there already (this build's, as far as its size tells) */
		ring_add(prov, prov->placed, N_PLACED, &prov->placed_next, id);
		return AKS_OK;
	}
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

/* ---- the stream ------------------------------------------------------------------------------ */

void dk_agent_stop(aks_sandbox_impl *sb)
{
	if (sb->agent) {
		/* closes the write side first: the agent sees EOF and exits */
		aks__agent_free(sb->agent);
		sb->agent = NULL;
	}
	if (sb->stream) {
		dk_stream_close(sb->stream, DK_AGENT_EXIT_MS, NULL, 0);
		sb->stream = NULL;
	}
}

static void fall_back(aks_sandbox_impl *sb, const char *why)
{
	dk_agent_stop(sb);
	sb->agent_mode = DK_AGENT_FALLBACK;
	dk_agent_unusable(sb->prov, why ? why : "aksandbox-agent cannot be used (out of memory)");
}

static bool call_over(const aks_host_api *host, const aks_call *call)
{
	return call && ((host->cancelled && host->cancelled(call)) ||
	                (call->deadline_ms > 0 && host->now_ms() >= call->deadline_ms));
}

/* Starts the placed agent: AKS_OK with sb->agent, or AKS_OK with *why (fallback), or the
 * call's own failure. */
static int launch(aks_sandbox_impl *sb, const aks_call *call, char **why, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	const char *argv[] = {DK_AGENT_PATH, NULL};
	char *exec_id = NULL;
	int rc = dk_exec_create(sb, argv, NULL, DK_WORKSPACE, true, call, &exec_id, err);
	if (rc != AKS_OK)
		return rc;
	int rfd = -1, wfd = -1;
	aks_error *e = NULL;
	rc = dk_stream_open(sb->prov, sb->id, exec_id, call, &sb->stream, &rfd, &wfd, &e);
	free(exec_id);
	if (rc != AKS_OK && rc != AKS_EGONE && rc != AKS_ETIMEOUT && rc != AKS_ECANCELLED &&
	    rc != AKS_ENOMEM) {
		/* The engine would not hijack the connection (a proxy in between, say): per
		 * call still works. */
		if (asprintf(why, "cannot stream to aksandbox-agent in container '%s': %s", sb->id,
		             e ? host->error_message(e) : "?") < 0)
			*why = NULL;
		if (e)
			host->error_free(e);
		return AKS_OK;
	}
	if (rc != AKS_OK) {
		if (err && !*err)
			*err = e;
		else if (e)
			host->error_free(e);
		return rc;
	}
	aks_call hello = {AKS_CALL_VERSION, sizeof(aks_call), 0, 0, NULL, NULL, NULL};
	if (call)
		hello = *call;
	int64_t limit = host->now_ms() + DK_AGENT_HELLO_MS;
	if (!hello.deadline_ms || hello.deadline_ms > limit)
		hello.deadline_ms = limit;
	rc = aks__agent_start(host, rfd, wfd, &hello, &sb->agent, &e);
	if (rc == AKS_OK)
		return AKS_OK;
	sb->agent = NULL;
	if (call_over(host, call)) {
		if (e)
			host->error_free(e);
		dk_agent_stop(sb);
		if (host->cancelled && host->cancelled(call))
			return host->error_set(err, AKS_ECANCELLED, "docker exec was cancelled");
		return host->error_set(err, AKS_ETIMEOUT, "docker exec exceeded timeout %gs",
		                       call->timeout);
	}
	/* What the program said on stderr, when it said anything, is the better reason. */
	char said[512] = "";
	dk_stream_close(sb->stream, 1000, said, sizeof(said));
	sb->stream = NULL;
	if (asprintf(why, "aksandbox-agent did not start in container '%s': %s", sb->id,
	             said[0] ? said : (e ? host->error_message(e) : "no answer")) < 0)
		*why = NULL;
	if (e)
		host->error_free(e);
	return AKS_OK;
}

/* Places (when needed) and starts the agent. */
static int start(aks_sandbox_impl *sb, const aks_call *call, aks_error **err)
{
	char *why = NULL;
	int rc = AKS_OK;
	/* Known from an earlier handle: trusted, but looked at again if the start fails (a
	 * container recreated under the same name, say). */
	bool cached = !sb->agent_placed && ring_has(sb->prov, sb->prov->placed, N_PLACED, sb->id);
	if (!sb->agent_placed) {
		rc = dk_agent_place(&sb->conn, sb->id, call, &why, err);
		sb->agent_placed = rc == AKS_OK && !why;
	}
	if (rc == AKS_OK && !why)
		rc = launch(sb, call, &why, err);
	if (rc == AKS_OK && why && cached) {
		free(why);
		why = NULL;
		ring_del(sb->prov, sb->prov->placed, N_PLACED, sb->id);
		rc = dk_agent_place(&sb->conn, sb->id, call, &why, err);
		if (rc == AKS_OK && !why)
			rc = launch(sb, call, &why, err);
	}
	if (rc == AKS_OK && why) {
		fall_back(sb, why);
		free(why);
		return AKS_OK;
	}
	if (rc == AKS_OK)
		sb->agent_mode = DK_AGENT_UP;
	return rc;
}

int dk_agent_ensure(aks_sandbox_impl *sb, const aks_call *call, aks_error **err)
{
	if (sb->agent_mode == DK_AGENT_OFF || sb->agent_mode == DK_AGENT_FALLBACK)
		return AKS_OK;
	if (!dk_agent_usable(sb->prov)) {
		sb->agent_mode = DK_AGENT_FALLBACK;
		return AKS_OK;
	}
	if (sb->agent && aks__agent_alive(sb->agent))
		return AKS_OK;
	if (sb->agent_mode == DK_AGENT_UP) {
		sb->prov->host->log(AKS_LOG_WARNING, DK_NAME,
		                    "the aksandbox-agent of container '%s' is gone (the container "
		                    "restarted or the agent was killed); starting it again (the "
		                    "Python session's state is lost)",
		                    sb->id);
		dk_agent_stop(sb);
		sb->state_lost = true;
		/* look again: a restart may have lost it */
		sb->agent_placed = false;
		ring_del(sb->prov, sb->prov->placed, N_PLACED, sb->id);
		sb->agent_mode = DK_AGENT_IDLE;
	}
	return start(sb, call, err);
}

/* The notice of a restart goes on the first result after it. */
static void put_notice(aks_sandbox_impl *sb, aks_result *out)
{
	if (sb->state_lost && out) {
		sb->prov->host->result_set_notice(out, lost_notice);
		sb->state_lost = false;
	}
}

/* An agent request failed with AKS_EGONE: the stream broke under it. The container may be
 * gone (that error), else it is an I/O failure of this call: the next call restarts the
 * agent. AKS_EGONE must not escape otherwise, since the core reads it as a vanished
 * sandbox. */
static int broke(aks_sandbox_impl *sb, const char *what, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	char msg[512];
	snprintf(msg, sizeof(msg), "%s", err && *err ? host->error_message(*err) : "");
	if (err && *err) {
		host->error_free(*err);
		*err = NULL;
	}
	char path[320];
	snprintf(path, sizeof(path), "/containers/%s/json", sb->id);
	dk_req r = {.method = "GET", .path = path};
	aks_call quick = {
	    AKS_CALL_VERSION, sizeof(aks_call), host->now_ms() + 10000, 10, NULL, NULL, NULL};
	int rc = dk_request(&sb->conn, &r, &quick, NULL);
	bool gone = rc == AKS_OK && r.status == 404;
	dk_req_free(&r);
	if (gone)
		return dk_gone(host, sb->id, err);
	return host->error_set(err, AKS_EIO,
	                       "docker: %s: the connection to aksandbox-agent in container '%s' "
	                       "broke during the call (%s); the next call starts it again",
	                       what, sb->id, msg);
}

/* ---- operations ------------------------------------------------------------------------------ */

int dk_agent_exec(aks_sandbox_impl *sb, const char *const *argv, const char *python_code,
                  const char *workdir, const aks_call *call, aks_result *out, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	aks_agent_spawn spec = {.cwd = workdir};
	if (python_code) {
		spec.code = python_code;
		spec.language = "python";
		spec.session = "default";
	} else {
		spec.argv = argv;
	}
	aks_agent_exit ex;
	int rc = aks__agent_exec(sb->agent, &spec, out, call, &ex, err);
	if (rc == AKS_ETIMEOUT || rc == AKS_ECANCELLED) {
		/* The same outcome and words as the per-call path. */
		if (err && *err) {
			host->error_free(*err);
			*err = NULL;
		}
		host->result_set_exit_code(out, -1);
		host->result_set_timed_out(out);
		rc = rc == AKS_ECANCELLED
		         ? host->error_set(err, rc, "docker exec was cancelled")
		         : host->error_set(err, rc, "docker exec exceeded timeout %gs",
		                           call ? call->timeout : 0.0);
	} else if (rc == AKS_EGONE) {
		rc = broke(sb, "execution", err);
	}
	put_notice(sb, out);
	return rc;
}

int dk_agent_write(aks_sandbox_impl *sb, const char *cpath, const char *path, const void *data,
                   size_t len, const aks_call *call, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	aks_error *e = NULL;
	int rc = aks__agent_write_file(sb->agent, cpath, data, len, 0644, call, &e);
	if (rc == AKS_OK)
		return AKS_OK;
	if (rc == AKS_EGONE) {
		if (err && !*err) {
			*err = e;
			e = NULL;
		}
		rc = broke(sb, "upload", err);
	} else if (rc == AKS_ETIMEOUT) {
		rc = host->error_set(err, rc, "docker exceeded timeout %gs",
		                     call ? call->timeout : 0.0);
	} else if (rc == AKS_ECANCELLED) {
		rc = host->error_set(err, rc, "the call was cancelled");
	} else {
		const char *m = e ? host->error_message(e) : "failed";
		if (strncmp(m, "agent: ", 7) == 0)
			m += 7;
		rc = host->error_set(err, rc == AKS_ELIMIT ? AKS_ELIMIT : AKS_EIO,
		                     "docker: cannot write '%s': %s", path, m);
	}
	if (e)
		host->error_free(e);
	return rc;
}

int dk_agent_read(aks_sandbox_impl *sb, const char *cpath, const char *path, const aks_call *call,
                  aks_result *out, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	aks_error *e = NULL;
	bool refused;
	int rc = aks__agent_read_into(sb->agent, cpath, UINT64_MAX, out, path, call, &refused, &e);
	if (refused) {
		if (err && !*err) {
			*err = e;
			e = NULL;
		}
	} else if (rc == AKS_ENOTFOUND) {
		rc =
		    host->error_set(err, AKS_ENOTFOUND, "file '%s' not found in the sandbox", path);
	} else if (rc == AKS_EGONE) {
		if (err && !*err) {
			*err = e;
			e = NULL;
		}
		rc = broke(sb, "download", err);
	} else if (rc == AKS_ETIMEOUT) {
		rc = host->error_set(err, rc, "docker exceeded timeout %gs",
		                     call ? call->timeout : 0.0);
	} else if (rc == AKS_ECANCELLED) {
		rc = host->error_set(err, rc, "the call was cancelled");
	} else if (rc != AKS_OK) {
		const char *m = e ? host->error_message(e) : "failed";
		if (strncmp(m, "agent: ", 7) == 0)
			m += 7;
		rc = host->error_set(err, AKS_EIO, "docker: cannot read '%s': %s", path, m);
	}
	if (e)
		host->error_free(e);
	put_notice(sb, out);
	return rc;
}
