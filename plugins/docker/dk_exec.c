/*
 * plugins/docker/dk_exec.c - executions: POST /containers/{id}/exec, then
 * POST /exec/{id}/start, whose non-TTY answer multiplexes stdout and stderr
 * in frames (an 8-byte header: stream type, three zero bytes, a big-endian
 * 32-bit length), then GET /exec/{id}/json for the exit code.
 *
 * Timeouts. Docker has no call that kills an exec. Every execution carries
 * AKS_EXEC_ID=<128 random bits> in its environment, which its children
 * inherit; on expiry (or cancellation) a second exec walks /proc and SIGKILLs
 * every process whose environment holds that marker, again and again until
 * none is left, so processes forked during the sweep are caught too. It needs
 * only a POSIX sh and cat in the image, not pkill.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aks_agent.h"
#include "aks_container.h"
#include "dk_internal.h"

/* Linux refuses a single argument of 32 pages or more (MAX_ARG_STRLEN), and
 * the code travels as one argument. */
#define DK_MAX_ARG 131071
#define MARKER_VAR AKS_CTR_MARKER_VAR

/* ---- the multiplexed stream ---------------------------------------------------------- */

typedef struct demux {
	const aks_host_api *host;
	dk_conn *conn;
	aks_result *out;    /* NULL: discard */
	int status_checked; /* 0 unknown, 1 a 200 stream, -1 an error body */
	aks_buf errbody;
	dk_demux frames;
} demux;

/* Stderr and the engine's own errors (stream 3) to the result's stderr, the rest to stdout. */
static void demux_frame(void *ctx, int stream, const unsigned char *data, size_t len)
{
	demux *d = ctx;
	if (d->out)
		/* never fails for stdout and stderr: the host counts what it drops */
		d->host->result_write(
		    d->out, stream == 2 || stream == 3 ? AKS_STREAM_STDERR : AKS_STREAM_STDOUT,
		    data, len, NULL);
}

static void demux_init(demux *d, const aks_host_api *host, dk_conn *conn, aks_result *out)
{
	memset(d, 0, sizeof(*d));
	d->host = host;
	d->conn = conn;
	d->out = out;
	dk_demux_init(&d->frames, demux_frame, d);
}

static bool demux_sink(void *ctx, const char *data, size_t len)
{
	demux *d = ctx;
	if (!d->status_checked) {
		long status = 0;
		curl_easy_getinfo(d->conn->easy, CURLINFO_RESPONSE_CODE, &status);
		d->status_checked = status == 200 || status == 101 ? 1 : -1;
	}
	if (d->status_checked < 0)
		return aks__buf_append(&d->errbody, data, len) == AKS_OK;
	dk_demux_feed(&d->frames, data, len);
	return true;
}

/* ---- one exec ------------------------------------------------------------------------- */

static int engine_error(const aks_host_api *host, int code, const char *what, const dk_req *r,
                        aks_error **err)
{
	char *msg = dk_engine_message(r);
	int rc = host->error_set(err, code, "docker: %s: %s", what, msg);
	free(msg);
	return rc;
}

int dk_exec_create(aks_sandbox_impl *sb, const char *const *argv, const char *marker,
                   const char *workdir, bool attach_stdin, const aks_call *call, char **exec_id,
                   aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	json_object *b = json_object_new_object();
	json_object_object_add(b, "AttachStdin", json_object_new_boolean(attach_stdin));
	json_object_object_add(b, "AttachStdout", json_object_new_boolean(1));
	json_object_object_add(b, "AttachStderr", json_object_new_boolean(1));
	json_object_object_add(b, "Tty", json_object_new_boolean(0));
	json_object *cmd = json_object_new_array();
	for (const char *const *a = argv; *a; a++)
		json_object_array_add(cmd, json_object_new_string(*a));
	json_object_object_add(b, "Cmd", cmd);
	json_object_object_add(b, "WorkingDir", json_object_new_string(workdir));
	if (marker) {
		char env[64];
		snprintf(env, sizeof(env), MARKER_VAR "=%s", marker);
		json_object *e = json_object_new_array();
		json_object_array_add(e, json_object_new_string(env));
		json_object_object_add(b, "Env", e);
	}
	char *path = NULL;
	if (asprintf(&path, "/containers/%s/exec", sb->id) < 0) {
		json_object_put(b);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	int rc = AKS_OK;
	for (int attempt = 0; attempt < 2; attempt++) {
		dk_req r = {.method = "POST", .path = path};
		r.body = json_object_to_json_string_ext(b, JSON_C_TO_STRING_PLAIN);
		r.body_len = strlen(r.body);
		rc = dk_request(&sb->conn, &r, call, err);
		if (rc == AKS_OK) {
			if (r.status == 201) {
				rc = dk_parse_exec_id(&r, exec_id);
				if (rc != AKS_OK)
					rc = host->error_set(
					    err, rc, "%s",
					    rc == AKS_ENOMEM
					        ? "out of memory"
					        : "docker: exec create answered without an Id");
			} else if (r.status == 404) {
				rc = dk_gone(host, sb->id, err);
			} else if (r.status == 409 && attempt == 0) {
				/* stopped or paused behind our back: bring it back once */
				dk_req_free(&r);
				rc = dk_ensure_running(&sb->conn, sb->id, call, err);
				if (rc != AKS_OK)
					break;
				continue;
			} else {
				rc = engine_error(host, AKS_EPROVISION, "cannot start an execution",
				                  &r, err);
			}
		}
		dk_req_free(&r);
		break;
	}
	free(path);
	json_object_put(b);
	return rc;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* GET /exec/{id}/json until it stops running (the stream can end a moment
 * before the engine records the exit). */
static int exec_exit_code(aks_sandbox_impl *sb, const char *exec_id, const aks_call *call,
                          int *exit_code, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	char path[160];
	snprintf(path, sizeof(path), "/exec/%s/json", exec_id);
	*exit_code = -1;
	for (int i = 0;; i++) {
		dk_req r = {.method = "GET", .path = path};
		int rc = dk_request(&sb->conn, &r, call, err);
		if (rc != AKS_OK) {
			dk_req_free(&r);
			return rc;
		}
		if (r.status != 200) {
			rc = engine_error(host, AKS_ERROR, "cannot read an execution's exit code",
			                  &r, err);
			dk_req_free(&r);
			return rc;
		}
		bool still;
		dk_parse_exec_state(&r, &still, exit_code);
		dk_req_free(&r);
		if (!still || i >= 500)
			return AKS_OK;
		sleep_ms(i < 20 ? 2 : 10);
	}
}

/* One sweep: an exec of aks_ctr_kill_script for the marker. */
static int sweep(aks_sandbox_impl *sb, const char *marker, const aks_call *quick, aks_error **e)
{
	const aks_host_api *host = sb->prov->host;
	const char *argv[] = {"/bin/sh", "-c", aks_ctr_kill_script, "sh", marker, NULL};
	char *exec_id = NULL;
	int rc = dk_exec_create(sb, argv, NULL, "/", false, quick, &exec_id, e);
	if (rc != AKS_OK)
		return rc;
	char path[160];
	snprintf(path, sizeof(path), "/exec/%s/start", exec_id);
	demux d;
	demux_init(&d, host, &sb->conn, NULL);
	dk_req r = {.method = "POST",
	            .path = path,
	            .body = "{\"Detach\":false,\"Tty\":false}",
	            .sink = demux_sink,
	            .sink_ctx = &d};
	r.body_len = strlen(r.body);
	rc = dk_request(&sb->conn, &r, quick, e);
	dk_req_free(&r);
	aks__buf_free(&d.errbody);
	int code = -1;
	if (rc == AKS_OK && (rc = exec_exit_code(sb, exec_id, quick, &code, e)) == AKS_OK &&
	    code != 0)
		rc = host->error_set(e, AKS_ERROR, "the kill sweep exited with %d", code);
	free(exec_id);
	return rc;
}

/* Whether the engine still reports the execution as running. */
static bool exec_running(aks_sandbox_impl *sb, const char *exec_id, const aks_call *quick)
{
	char path[160];
	snprintf(path, sizeof(path), "/exec/%s/json", exec_id);
	dk_req r = {.method = "GET", .path = path};
	bool running = false;
	int code;
	if (dk_request(&sb->conn, &r, quick, NULL) == AKS_OK && r.status == 200)
		dk_parse_exec_state(&r, &running, &code);
	dk_req_free(&r);
	return running;
}

/* Kills every process carrying the marker, with its own short deadline (the
 * call's has passed by now), sweeping again while the engine still reports
 * the execution running: its process may have started only after a sweep. */
static void kill_marked(aks_sandbox_impl *sb, const char *marker, const char *exec_id)
{
	const aks_host_api *host = sb->prov->host;
	aks_call quick = {AKS_CALL_INIT, .deadline_ms = host->now_ms() + 15000, .timeout = 15};
	aks_error *e = NULL;
	int rc = AKS_OK;
	for (int i = 0; i < 5; i++) {
		if ((rc = sweep(sb, marker, &quick, &e)) != AKS_OK)
			break;
		if (!exec_running(sb, exec_id, &quick))
			break;
		sleep_ms(50);
	}
	if (rc != AKS_OK)
		host->log(
		    AKS_LOG_WARNING, DK_NAME,
		    "cannot kill a timed-out execution in container '%s' (processes of it may "
		    "survive): %s",
		    sb->id, e ? host->error_message(e) : "unknown error");
	if (e)
		host->error_free(e);
}

static int run_argv(aks_sandbox_impl *sb, const char *const *argv, const char *workdir,
                    const aks_call *call, aks_result *out, int *exit_code, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	if (call && host->cancelled && host->cancelled(call)) {
		if (out)
			host->result_set_timed_out(out);
		return host->error_set(err, AKS_ECANCELLED,
		                       "execution cancelled before it started");
	}
	char marker[33];
	if (dk_random_hex(marker, 16) < 0)
		return host->error_set(err, AKS_EIO, "docker: cannot read /dev/urandom");
	char *exec_id = NULL;
	int rc = dk_exec_create(sb, argv, marker, workdir, false, call, &exec_id, err);
	if (rc != AKS_OK) {
		if ((rc == AKS_ETIMEOUT || rc == AKS_ECANCELLED) && out)
			host->result_set_timed_out(out);
		return rc;
	}
	char path[160];
	snprintf(path, sizeof(path), "/exec/%s/start", exec_id);
	demux d;
	demux_init(&d, host, &sb->conn, out);
	dk_req r = {.method = "POST",
	            .path = path,
	            .body = "{\"Detach\":false,\"Tty\":false}",
	            .sink = demux_sink,
	            .sink_ctx = &d};
	r.body_len = strlen(r.body);
	aks_error *e = NULL;
	rc = dk_request(&sb->conn, &r, call, &e);
	if (rc == AKS_ETIMEOUT || rc == AKS_ECANCELLED) {
		if (e)
			host->error_free(e);
		dk_req_free(&r);
		aks__buf_free(&d.errbody);
		kill_marked(sb, marker, exec_id);
		free(exec_id);
		if (out) {
			host->result_set_exit_code(out, -1);
			host->result_set_timed_out(out);
		}
		if (rc == AKS_ECANCELLED)
			return host->error_set(err, rc, "docker exec was cancelled");
		return host->error_set(err, rc, "docker exec exceeded timeout %gs",
		                       call ? call->timeout : 0.0);
	}
	if (e) {
		if (err && !*err)
			*err = e;
		else
			host->error_free(e);
	}
	if (rc == AKS_OK && d.status_checked < 0) {
		dk_req ereq = {.status = r.status, .resp = d.errbody};
		rc = r.status == 404 ? dk_gone(host, sb->id, err)
		                     : engine_error(host, AKS_EPROVISION, "cannot run an execution",
		                                    &ereq, err);
	}
	dk_req_free(&r);
	aks__buf_free(&d.errbody);
	if (rc == AKS_OK)
		rc = exec_exit_code(sb, exec_id, call, exit_code, err);
	free(exec_id);
	if (rc == AKS_OK && out)
		host->result_set_exit_code(out, *exit_code);
	else if ((rc == AKS_ETIMEOUT || rc == AKS_ECANCELLED) && out)
		host->result_set_timed_out(out);
	return rc;
}

int dk_exec_argv(aks_sandbox_impl *sb, const char *const *argv, const aks_call *call,
                 aks_result *out, int *exit_code, aks_error **err)
{
	return run_argv(sb, argv, "/", call, out, exit_code, err);
}

/* One docker exec per call: the per-call path (no agent, or one that cannot run). The
 * text travels as one argument. */
static int run(aks_sandbox_impl *sb, const char *const *argv, const char *what,
               const aks_call *call, aks_result *out, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	if (strlen(argv[2]) > DK_MAX_ARG)
		return host->error_set(err, AKS_ELIMIT,
		                       "the %s is %zu bytes; docker passes it as one argument, "
		                       "which Linux limits to %d bytes",
		                       what, strlen(argv[2]), DK_MAX_ARG);
	int code = -1;
	return run_argv(sb, argv, DK_WORKSPACE, call, out, &code, err);
}

int dk_run_code(aks_sandbox_impl *sb, const char *code, const char *language, const aks_call *call,
                aks_result *out, aks_error **err)
{
	(void)language; /* python: the only one (dk_execute_code) */
	const char *argv[] = {sb->prov->python, "-c", code, NULL};
	return run(sb, argv, "code", call, out, err);
}

int dk_run_command(aks_sandbox_impl *sb, const char *command, const aks_call *call, aks_result *out,
                   aks_error **err)
{
	const char *argv[] = {"/bin/sh", "-c", command, NULL};
	return run(sb, argv, "command", call, out, err);
}

int dk_run_argv(aks_sandbox_impl *sb, const char *const *argv, const aks_call *call,
                aks_result *out, aks_error **err)
{
	int code = -1;
	return run_argv(sb, argv, DK_WORKSPACE, call, out, &code, err);
}

/* ---- the operations: through the handle's agent session (aks_agent.h), or per call ------- */

int dk_execute_code(aks_sandbox_impl *sb, const char *code, const char *language,
                    const aks_call *call, aks_result *out, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	if (!language)
		language = "python";
	if (strcmp(language, "python") != 0)
		return host->error_set(err, AKS_ECAPABILITY,
		                       "docker does not support capability: language:%s", language);
	return aks_agent_execute_code(sb->agent, code, language, sb->prov->python, call, out, err);
}

int dk_execute_command(aks_sandbox_impl *sb, const char *command, const aks_call *call,
                       aks_result *out, aks_error **err)
{
	return aks_agent_execute_command(sb->agent, command, call, out, err);
}

int dk_install_packages(aks_sandbox_impl *sb, const char *const *packages, const aks_call *call,
                        aks_result *out, aks_error **err)
{
	return aks_agent_install_packages(sb->agent, sb->prov->python, packages, call, out, err);
}
