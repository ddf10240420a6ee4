/*
 * plugins/kubernetes/k8s_agent.c - what this provider tells the shared agent module
 * (plugins/common/agent/aks_agent.h): how aksandbox-agent is placed in a pod and how its
 * stream is opened and closed, and the operations' entry points. The lifecycle (start, fall
 * back, restart, notices) and the operations over the agent are the module's.
 *
 * Placement: one exec puts the program in the pod (the file on stdin; pods we create have an
 * emptyDir at /.aksandbox for it, which a read-only root does not affect and which survives
 * a restart of the container), named after its hash so another build never runs an old copy.
 * The stream: one long-lived exec WebSocket (k8s_stream.c) with the handle's identity.
 * Where the agent cannot run (another CPU architecture, no writable place where a program
 * may run, it does not start) operations run one exec per call (k8s_exec.c, k8s_files.c).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/sha256.h"
#include "aks_agent.h"
#include "aks_container.h"
#include "k8s_internal.h"

/* Placement and start get their own budget (keeping the call's cancellation): the first
 * operation's timeout is for the operation. */
#define SETUP_MS (60 * 1000)
/* An agent idle this long is pinged before use: a kill or a container restart since may
 * not have reached the stream yet. */
#define PING_IDLE_MS 1000
/* An agent idle this long first has its pod looked up: a pod deleted by force is gone from
 * the API at once, while its container (and the agent's stream into it) lingers for
 * seconds. Per call, the exec itself finds it gone; through a kept agent only this does, so
 * the core self-heals instead of running in a dying pod. */
#define POD_CHECK_IDLE_MS 100
#define DOWNLOAD_MAX      (512u << 20)

/* ---- placement ------------------------------------------------------------------------------ */

/* Whether "$f" is this build's copy: its size, and its SHA-256 ($h) where the pod has
 * sha256sum (coreutils, busybox). The sandbox's root may have overwritten it, with
 * something of the same size even; a copy that is not ours is placed again, never run. */
#define OURS_SH                                                                                    \
	"ours() { [ -x \"$1\" ] && [ \"$(wc -c < \"$1\" 2>/dev/null)\" = \"$s\" ] && "             \
	"{ ! command -v sha256sum >/dev/null 2>&1 || "                                             \
	"[ \"$(sha256sum < \"$1\" | cut -c1-64)\" = \"$h\" ]; }; }; "

/* Prints the machine, then "found PATH" for a copy of this agent already in place. An
 * attached pod whose container restarted lost the /workspace made at attach: made again. */
static const char probe_script[] =
    "mkdir -p " K8S_WORKSPACE " 2>/dev/null; "
    "uname -m 2>/dev/null || echo unknown; n=$1; s=$2; h=$3; shift 3; " OURS_SH
    "for d in \"$@\"; do f=\"$d/$n\"; "
    "if ours \"$f\"; then echo \"found $f\"; exit 0; fi; done; echo missing";

/* Reads the agent (exactly $2 bytes: no end of input needed, so v4 works) into the first
 * of the directories where it can be written and then run. (The scripts travel in the exec
 * URL, whose length the API server bounds: the hash is checked by the probe only.) */
static const char place_script[] =
    "n=$1; s=$2; shift 3; src=; "
    "for d in \"$@\"; do mkdir -p \"$d\" 2>/dev/null || continue; t=\"$d/.$n.$$\"; "
    "if [ -n \"$src\" ]; then cp \"$src\" \"$t\" 2>/dev/null || { rm -f \"$t\"; continue; }; "
    "elif ! head -c \"$s\" > \"$t\" 2>/dev/null; then rm -f \"$t\"; continue; fi; "
    "if [ \"$(wc -c < \"$t\")\" != \"$s\" ]; then rm -f \"$t\"; echo \"the copy in $d is "
    "short\"; exit 4; fi; "
    "chmod 755 \"$t\" && mv -f \"$t\" \"$d/$n\" || { rm -f \"$t\"; continue; }; "
    "src=\"$d/$n\"; if \"$src\" --version >/dev/null 2>&1; then echo \"placed $src\"; exit 0; "
    "fi; done; echo \"no writable place where a program may run among $*\"; exit 5";

/* Where a pod we created has its emptyDir; attached pods get what they offer. */
static const char *const created_dirs[] = {"/.aksandbox", "/tmp/.aksandbox", NULL};
static const char *const attached_dirs[] = {"/tmp/.aksandbox", "/var/tmp/.aksandbox", "/.aksandbox",
                                            NULL};

/* argv: sh -c SCRIPT sh NAME SIZE SHA256 DIR... */
static const char **script_argv(const aks_sandbox_impl *sb, const char *script, char *size,
                                const char *hash)
{
	const aks_agent_program *prog = sb->prov->agent;
	const char *const *dirs = sb->external ? attached_dirs : created_dirs;
	size_t nd = 0;
	while (dirs[nd])
		nd++;
	const char **argv = calloc(nd + 8, sizeof(*argv));
	if (!argv)
		return NULL;
	size_t k = 0;
	argv[k++] = "/bin/sh";
	argv[k++] = "-c";
	argv[k++] = script;
	argv[k++] = "sh";
	argv[k++] = aks_agent_program_name(prog);
	argv[k++] = size;
	argv[k++] = hash;
	for (size_t i = 0; i < nd; i++)
		argv[k++] = dirs[i];
	return argv;
}

typedef enum { PLACED, NOT_PLACED, PLACE_ERROR } place_outcome;

/*
 * Finds or puts the agent in the pod. PLACED with *path (malloc'd); NOT_PLACED with *why
 * (the fallback's reason); PLACE_ERROR when the exec itself failed (the pod is gone, the
 * identity may not exec, ...): that is the operation's error, as it would be per call.
 */
static place_outcome place(aks_sandbox_impl *sb, const aks_call *call, char **path, char **why,
                           aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	const aks_agent_program *prog = sb->prov->agent;
	const aks_elf_info *elf = aks_agent_program_elf(prog);
	size_t agent_size;
	const void *agent_data = aks_agent_program_data(prog, &agent_size);
	char size[32], hash[2 * AKS_SHA256_LEN + 1];
	snprintf(size, sizeof(size), "%zu", agent_size);
	const uint8_t *sum = aks_agent_program_sha256(prog);
	for (int i = 0; i < AKS_SHA256_LEN; i++)
		snprintf(hash + 2 * i, 3, "%02x", sum[i]);
	*why = NULL;
	const char **argv = script_argv(sb, probe_script, size, hash);
	if (!argv) {
		host->error_set(err, AKS_ENOMEM, "out of memory");
		return PLACE_ERROR;
	}
	aks_buf out = {0}, errb = {0};
	k8s_exec_opts o = {.argv = argv,
	                   .workdir = "/",
	                   .capture = &out,
	                   .capture_err = &errb,
	                   .capture_max = 65536};
	int code = -1;
	int rc = k8s_exec(sb, &o, call, &code, err);
	free(argv);
	place_outcome res = PLACE_ERROR;
	if (rc != AKS_OK)
		goto out;
	aks__buf_rtrim(&out, "\r\n ");
	char *nl = out.data ? strchr(out.data, '\n') : NULL;
	if (code != 0 || !nl) {
		aks__buf_rtrim(&errb, "\r\n ");
		if (asprintf(why, "the probe failed (exit %d: %s)", code,
		             errb.len ? errb.data : "no output") < 0)
			*why = NULL;
		res = NOT_PLACED;
		goto out;
	}
	*nl = '\0';
	const char *machine = out.data, *rest = nl + 1;
	if (!aks_elf_runs_on(elf, machine)) {
		if (asprintf(why, "the agent is built for %s and the pod's node is %s", elf->uname,
		             machine) < 0)
			*why = NULL;
		res = NOT_PLACED;
		goto out;
	}
	if (strncmp(rest, "found ", 6) == 0) {
		*path = strdup(rest + 6);
		res = *path ? PLACED : PLACE_ERROR;
		if (!*path)
			host->error_set(err, AKS_ENOMEM, "out of memory");
		goto out;
	}
	/* not there: copy it in */
	aks__buf_free(&out);
	aks__buf_free(&errb);
	argv = script_argv(sb, place_script, size, hash);
	if (!argv) {
		host->error_set(err, AKS_ENOMEM, "out of memory");
		goto out;
	}
	k8s_exec_opts po = {.argv = argv,
	                    .workdir = "/",
	                    .stdin_data = agent_data,
	                    .stdin_len = agent_size,
	                    .capture = &out,
	                    .capture_err = &errb,
	                    .capture_max = 65536};
	rc = k8s_exec(sb, &po, call, &code, err);
	free(argv);
	if (rc != AKS_OK)
		goto out;
	aks__buf_rtrim(&out, "\r\n ");
	if (code == 0 && out.data && strncmp(out.data, "placed ", 7) == 0) {
		*path = strdup(out.data + 7);
		res = *path ? PLACED : PLACE_ERROR;
		if (!*path)
			host->error_set(err, AKS_ENOMEM, "out of memory");
		goto out;
	}
	aks__buf_rtrim(&errb, "\r\n ");
	if (asprintf(why, "%s", out.len ? out.data : errb.len ? errb.data : "placement failed") < 0)
		*why = NULL;
	res = NOT_PLACED;
out:
	aks__buf_free(&out);
	aks__buf_free(&errb);
	if (res == NOT_PLACED && !*why)
		host->error_set(err, AKS_ENOMEM, "out of memory");
	return res == NOT_PLACED && !*why ? PLACE_ERROR : res;
}

/* ---- start, stop, ensure ------------------------------------------------------------------ */

/* ---- the module's table -------------------------------------------------------------------- */

/* The probe finds this build's copy (by its name and size) or places one: always checked. */
static int k8s_agent_place(void *vsb, bool look_again, const aks_call *call, char **path,
                           bool *verified, char **why, aks_error **err)
{
	(void)look_again;
	aks_sandbox_impl *sb = vsb;
	*verified = true;
	place_outcome po = place(sb, call, path, why, err);
	if (po == PLACE_ERROR)
		return err && *err ? sb->prov->host->error_code(*err) : AKS_ERROR;
	return AKS_OK;
}

static int k8s_agent_open(void *vsb, const char *path, const char *const *args,
                          const aks_call *call, void **stream, int *rfd, int *wfd, char **why,
                          aks_error **err)
{
	(void)why;
	const char *argv[8] = {path};
	for (size_t i = 0; args && args[i] && i + 2 < sizeof(argv) / sizeof(argv[0]); i++)
		argv[i + 1] = args[i];
	k8s_stream *s = NULL;
	int rc = k8s_stream_open(vsb, argv, call, &s, rfd, wfd, err);
	*stream = s;
	return rc;
}

static void k8s_agent_close(void *vsb, void *stream, char *said, size_t len)
{
	(void)vsb;
	k8s_stream_close(stream, said, len);
}

static int k8s_agent_check(void *vsb, const aks_call *call, aks_error **err)
{
	return k8s_pod_check(vsb, call, err);
}

static int per_call_code(void *sb, const char *code, const char *language, const aks_call *call,
                         aks_result *out, aks_error **err)
{
	return k8s_execute_code(sb, code, language, call, out, err);
}

static int per_call_command(void *sb, const char *command, const aks_call *call, aks_result *out,
                            aks_error **err)
{
	return k8s_execute_command(sb, command, call, out, err);
}

static int per_call_argv(void *sb, const char *const *argv, const aks_call *call, aks_result *out,
                         aks_error **err)
{
	return k8s_run_argv(sb, argv, call, out, err);
}

static int per_call_upload(void *sb, const char *path, const char *cpath, const void *data,
                           size_t len, const aks_call *call, aks_error **err)
{
	(void)cpath;
	return k8s_upload_file(sb, path, data, len, call, err);
}

static int per_call_download(void *sb, const char *path, const char *cpath, const aks_call *call,
                             aks_result *out, aks_error **err)
{
	(void)cpath;
	return k8s_download_file(sb, path, call, out, err);
}

const aks_agent_ops k8s_agent_ops = {
    .noun = "pod",
    .timeout_subject = "kubernetes exec",
    .shell = "/bin/sh",
    .setup_ms = SETUP_MS,
    /* the pod outlives the host process: so does its agent, and the Python state */
    .resident = true,
    .ping_idle_ms = PING_IDLE_MS,
    .check_idle_ms = POD_CHECK_IDLE_MS,
    .file_mode = 0644,
    .download_max = DOWNLOAD_MAX,
    .place = k8s_agent_place,
    .open = k8s_agent_open,
    .close = k8s_agent_close,
    .check = k8s_agent_check,
    .execute_code = per_call_code,
    .execute_command = per_call_command,
    .install_packages = per_call_argv,
    .upload = per_call_upload,
    .download = per_call_download,
};

/* ---- the operations: through the handle's agent session, or per call ------------------------ */

int k8s_op_execute_code(aks_sandbox_impl *sb, const char *code, const char *language,
                        const aks_call *call, aks_result *out, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	if (!language)
		language = "python";
	if (strcmp(language, "python") != 0)
		return host->error_set(err, AKS_ECAPABILITY,
		                       "kubernetes does not support capability: language:%s",
		                       language);
	return aks_agent_execute_code(sb->agent, code, language, sb->prov->python, call, out, err);
}

int k8s_op_execute_command(aks_sandbox_impl *sb, const char *command, const aks_call *call,
                           aks_result *out, aks_error **err)
{
	return aks_agent_execute_command(sb->agent, command, call, out, err);
}

int k8s_op_install_packages(aks_sandbox_impl *sb, const char *const *packages, const aks_call *call,
                            aks_result *out, aks_error **err)
{
	return aks_agent_install_packages(sb->agent, sb->prov->python, packages, call, out, err);
}

int k8s_op_upload_file(aks_sandbox_impl *sb, const char *path, const void *data, size_t len,
                       const aks_call *call, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	if (!path || (!data && len))
		return host->error_set(err, AKS_EINVAL, "upload_file: no path or no data");
	char *cpath = NULL;
	int rc = k8s_sandbox_path(sb, path, &cpath, err);
	if (rc != AKS_OK)
		return rc;
	if (strcmp(cpath, K8S_WORKSPACE) == 0)
		rc = host->error_set(err, AKS_EINVAL, "path '%s' names %s, not a file", path,
		                     K8S_WORKSPACE);
	else
		rc = aks_agent_upload(sb->agent, path, cpath, data, len, call, err);
	free(cpath);
	return rc;
}

int k8s_op_download_file(aks_sandbox_impl *sb, const char *path, const aks_call *call,
                         aks_result *out, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	if (!path)
		return host->error_set(err, AKS_EINVAL, "download_file: no path");
	char *cpath = NULL;
	int rc = k8s_sandbox_path(sb, path, &cpath, err);
	if (rc != AKS_OK)
		return rc;
	/* The agent reads only a regular file (after symlinks), as the per-call path's
	 * `[ -f ]`: a directory or a FIFO is not found, and never opened for reading. */
	rc = aks_agent_download(sb->agent, path, cpath, call, out, err);
	free(cpath);
	return rc;
}
