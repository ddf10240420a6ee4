/*
 * plugins/e2b/e2b_exec.c - running in an E2B sandbox as the official SDKs do: commands and
 * package installs through envd's process API (process.Process/Start, a Connect server
 * stream in the JSON codec, its output written to the result as it arrives), Python through
 * the code interpreter's /execute (lines of JSON, one persistent kernel per sandbox, so
 * state carries over). A deadline or a cancellation stops the work in the sandbox too: the
 * process gets SIGKILL through envd (SendSignal), then every process the run started,
 * detached ones included, is killed by the marker in its environment (aks_killscript.h, as
 * docker's and kubernetes' execs are), and the kernel is restarted.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aks_base64.h"
#include "aks_json.h"
#include "aks_killscript.h"
#include "aks_text.h"
#include "e2b_internal.h"
#include "e2b_wire.h"

/* How long the clean-up after a deadline (the kill, the kernel's restart) may take. */
#define CLEANUP_TIMEOUT_MS 10000
/* How long a probe of the kernel after a deadline may take before it is restarted. */
#define KERNEL_PROBE_MS 3000
/* The keepalive interval envd is asked for (seconds), as the SDK asks. */
#define KEEPALIVE_S "50"

/* A call for the clean-up after the operation's own call ended: its own short deadline. */
static void cleanup_call(const aks_host_api *host, const aks_call *call, aks_call *out)
{
	memset(out, 0, sizeof(*out));
	out->struct_version = AKS_CALL_VERSION;
	out->struct_size = sizeof(*out);
	out->deadline_ms = host->now_ms() + CLEANUP_TIMEOUT_MS;
	out->timeout = CLEANUP_TIMEOUT_MS / 1000.0;
	out->policy = call ? call->policy : NULL;
	out->principal = call ? call->principal : NULL;
#if AKS_TARGET_ABI_MINOR >= 3
	if (call && call->struct_size >= offsetof(aks_call, idle_timeout) + sizeof(double))
		out->idle_timeout = call->idle_timeout;
#endif
}

/* ---- envd's process API ---- */

typedef struct run_state {
	aks_sandbox_impl *sb;
	aks_result *out;
	aks_buf *capture; /* instead of out: stdout kept here (stderr dropped) */
	e2b_envelopes env;
	uint32_t pid;
	bool started, ended;
	int exit_code;
	const char *failure; /* what was wrong with the stream */
	char end_error[256]; /* the end-of-stream error, "code: message" */
	int write_rc;
} run_state;

/* "signal: killed" and the like, as Go's ProcessState says it: 128 + the signal's number. */
static int signal_exit(const char *status)
{
	static const struct {
		const char *name;
		int sig;
	} names[] = {{"killed", SIGKILL},
	             {"terminated", SIGTERM},
	             {"interrupt", SIGINT},
	             {"hangup", SIGHUP},
	             {"aborted", SIGABRT},
	             {"segmentation fault", SIGSEGV},
	             {"broken pipe", SIGPIPE},
	             {"quit", SIGQUIT},
	             {"bus error", SIGBUS},
	             {"floating point exception", SIGFPE},
	             {"user defined signal 1", SIGUSR1},
	             {"user defined signal 2", SIGUSR2},
	             {"alarm clock", SIGALRM}};
	if (!status || strncmp(status, "signal: ", 8) != 0)
		return -1;
	const char *n = status + 8;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strncmp(n, names[i].name, strlen(names[i].name)) == 0)
			return 128 + names[i].sig;
	return 128 + SIGKILL; /* a signal by a name not listed: killed all the same */
}

static bool on_event(void *ctx, unsigned flags, const char *json, size_t len)
{
	run_state *st = ctx;
	const aks_host_api *host = st->sb->prov->host;
	if (flags & E2B_ENVELOPE_END_STREAM) {
		json_object *root;
		const char *code, *message;
		if (!e2b_end_parse(json, len, &root, &code, &message)) {
			st->failure = "a malformed end of stream";
			return false;
		}
		if (code)
			snprintf(st->end_error, sizeof(st->end_error), "%s: %s", code,
			         message ? message : "");
		json_object_put(root);
		return true;
	}
	e2b_event ev;
	json_object *root;
	const char *why;
	if (!e2b_event_parse(json, len, &ev, &root, &why)) {
		st->failure = why;
		return false;
	}
	switch (ev.kind) {
	case E2B_EVENT_START:
		st->pid = ev.pid;
		st->started = true;
		break;
	case E2B_EVENT_STDOUT:
	case E2B_EVENT_STDERR:
		if (st->capture && ev.kind == E2B_EVENT_STDOUT)
			aks__buf_append(st->capture, ev.data, ev.data_len);
		else if (st->out && ev.data_len)
			st->write_rc = host->result_write(
			    st->out,
			    ev.kind == E2B_EVENT_STDOUT ? AKS_STREAM_STDOUT : AKS_STREAM_STDERR,
			    ev.data, ev.data_len, NULL);
		break;
	case E2B_EVENT_END: {
		st->ended = true;
		int sig = ev.exited ? -1 : signal_exit(ev.status);
		st->exit_code = sig >= 0 ? sig : ev.exit_code & 0xff;
		break;
	}
	default:
		break;
	}
	free(ev.data);
	json_object_put(root);
	return true;
}

static bool sink_events(void *ctx, const char *data, size_t len)
{
	run_state *st = ctx;
	if (e2b_envelopes_feed(&st->env, data, len, on_event, st))
		return true;
	if (!st->failure)
		st->failure = st->env.failed ? st->env.why : "out of memory";
	return false;
}

/* 32 random hex digits: a run's marker. false when the kernel has no randomness to give. */
static bool random_marker(char out[33])
{
	return aks__random_hex(out, 16);
}

/* The Start request's body: one envelope holding the StartRequest; the marker (NULL: none)
 * in the process's environment. */
static int start_body(const char *const *argv, const char *marker, aks_buf *body)
{
	json_object *req = json_object_new_object(), *proc = json_object_new_object(),
	            *args = json_object_new_array(), *envs = json_object_new_object();
	int bad = !req || !proc || !args || !envs;
	if (!bad && marker)
		bad = json_object_object_add(envs, AKS_CTR_MARKER_VAR,
		                             json_object_new_string(marker));
	for (size_t i = 1; !bad && argv[i]; i++)
		bad = json_object_array_add(args, json_object_new_string(argv[i]));
	if (!bad) {
		json_object_object_add(proc, "cmd", json_object_new_string(argv[0]));
		json_object_object_add(proc, "args", args);
		args = NULL;
		json_object_object_add(proc, "envs", envs);
		envs = NULL;
		json_object_object_add(proc, "cwd", json_object_new_string(E2B_HOME));
		json_object_object_add(req, "process", proc);
		proc = NULL;
		json_object_object_add(req, "stdin", json_object_new_boolean(0));
		const char *text = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
		size_t n = strlen(text);
		unsigned char head[5] = {0, (unsigned char)(n >> 24), (unsigned char)(n >> 16),
		                         (unsigned char)(n >> 8), (unsigned char)n};
		aks__buf_append(body, head, sizeof(head));
		aks__buf_append(body, text, n);
		bad = body->failed;
	}
	json_object_put(envs);
	json_object_put(args);
	json_object_put(proc);
	json_object_put(req);
	return bad ? AKS_ENOMEM : AKS_OK;
}

/* A unary Connect call to envd (SendSignal): AKS_OK on a 2xx answer. */
static int envd_unary(aks_sandbox_impl *sb, const char *method, json_object *body, const char *what,
                      const aks_call *call, aks_error **err)
{
	aks_provider_impl *prov = sb->prov;
	struct curl_slist *h = NULL;
	char *url = e2b_sandbox_url(sb, E2B_ENVD_PORT, method);
	int rc = url ? e2b_sandbox_headers(sb, E2B_ENVD_PORT, "application/json", &h, err)
	             : prov->host->error_set(err, AKS_ENOMEM, "out of memory");
	if (rc != AKS_OK) {
		free(url);
		return rc;
	}
	struct curl_slist *t = curl_slist_append(h, "Connect-Protocol-Version: 1");
	h = t ? t : h;
	const char *text = json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN);
	aks_cloud_req r = {.what = what,
	                   .method = "POST",
	                   .url = url,
	                   .service = true,
	                   .headers = h,
	                   .body = text,
	                   .body_len = strlen(text),
	                   .retry = AKS_CLOUD_RETRY_SAFE};
	rc = aks_cloud_http(&prov->cloud, &r, call, err);
	if (rc == AKS_OK && (r.status < 200 || r.status >= 300))
		rc = e2b_answer_error(prov, &r, sb->id, AKS_EPROVISION, err);
	aks_cloud_req_free(&r);
	aks_cloud_headers_free(h);
	free(url);
	return rc;
}

static int run_process(aks_sandbox_impl *sb, const char *const *argv, const char *what,
                       const aks_call *call, aks_result *out, aks_buf *capture, int *exit_code,
                       aks_error **err);

/* SIGKILL to the process envd started, after the call that ran it ended, then to every
 * process that carries the run's marker (what it started, detached or not). Logged when it
 * cannot be done: the caller's error says what happened to the call. */
static void kill_process(aks_sandbox_impl *sb, uint32_t pid, const char *marker,
                         const aks_call *call)
{
	const aks_host_api *host = sb->prov->host;
	aks_call c;
	cleanup_call(host, call, &c);
	json_object *body = json_object_new_object(), *sel = json_object_new_object();
	if (!body || !sel) {
		json_object_put(body);
		json_object_put(sel);
		return;
	}
	json_object_object_add(sel, "pid", json_object_new_int64(pid));
	json_object_object_add(body, "process", sel);
	json_object_object_add(body, "signal", json_object_new_string("SIGNAL_SIGKILL"));
	aks_error *e = NULL;
	char what[96];
	snprintf(what, sizeof(what), "kill process %u in sandbox", pid);
	if (envd_unary(sb, "/process.Process/SendSignal", body, what, &c, &e) != AKS_OK)
		host->log(AKS_LOG_WARNING, E2B_NAME, "sandbox %s: %s", sb->id,
		          e ? host->error_message(e) : "cannot kill the process");
	if (e)
		host->error_free(e);
	e = NULL;
	json_object_put(body);
	/* the script exits 0 once no process carries the marker (itself does not) */
	const char *argv[] = {"/bin/sh", "-c", aks_ctr_kill_script, "sh", marker, NULL};
	aks_buf ignored = AKS_BUF_INIT;
	int code = -1;
	if (run_process(sb, argv, "kill the run's processes", &c, NULL, &ignored, &code, &e) !=
	        AKS_OK ||
	    code != 0)
		host->log(AKS_LOG_WARNING, E2B_NAME,
		          "sandbox %s: the processes of a run may outlive it: %s", sb->id,
		          e ? host->error_message(e) : "the kill script did not finish");
	if (e)
		host->error_free(e);
	aks__buf_free(&ignored);
}

/* Runs argv (argv[0] the program) in the sandbox; out gets its output and exit code, or
 * capture its stdout and *exit_code its exit code. */
static int run_process(aks_sandbox_impl *sb, const char *const *argv, const char *what,
                       const aks_call *call, aks_result *out, aks_buf *capture, int *exit_code,
                       aks_error **err)
{
	aks_provider_impl *prov = sb->prov;
	const aks_host_api *host = prov->host;
	int rc = e2b_sandbox_touch(sb, call, err);
	if (rc != AKS_OK)
		return rc;
	/* a run that is itself a clean-up (capture without out) needs no marker of its own */
	char marker[33];
	bool marked = out || !capture;
	if (marked && !random_marker(marker))
		return host->error_set(err, AKS_EIO, "e2b: no random bytes for a run's marker");
	aks_buf body = AKS_BUF_INIT;
	struct curl_slist *h = NULL;
	char *url = e2b_sandbox_url(sb, E2B_ENVD_PORT, "/process.Process/Start");
	if (!url || start_body(argv, marked ? marker : NULL, &body) != AKS_OK) {
		free(url);
		aks__buf_free(&body);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	if ((rc = e2b_sandbox_headers(sb, E2B_ENVD_PORT, "application/connect+json", &h, err)) !=
	    AKS_OK) {
		free(url);
		aks__buf_free(&body);
		return rc;
	}
	struct curl_slist *t = curl_slist_append(h, "Connect-Protocol-Version: 1");
	h = t ? t : h;
	if ((t = curl_slist_append(h, "Keepalive-Ping-Interval: " KEEPALIVE_S)))
		h = t;
	run_state st = {.sb = sb, .out = out, .capture = capture};
	aks_cloud_req r = {.what = what,
	                   .method = "POST",
	                   .url = url,
	                   .service = true,
	                   .headers = h,
	                   .body = body.data,
	                   .body_len = body.len,
	                   .retry = AKS_CLOUD_RETRY_NEVER,
	                   .sink = sink_events,
	                   .sink_ctx = &st};
	rc = aks_cloud_http(&prov->cloud, &r, call, err);
	if (rc == AKS_OK && (r.status < 200 || r.status >= 300)) {
		rc = e2b_answer_error(prov, &r, sb->id, AKS_EPROVISION, err);
	} else if (rc == AKS_OK && st.failure) {
		rc = host->error_set(err, AKS_EPROVISION, "e2b: cannot %s: envd sent %s", what,
		                     st.failure);
	} else if (rc == AKS_OK && st.end_error[0] && !st.ended) {
		/* "unavailable" is how envd's proxy says the sandbox is not running */
		rc = strncmp(st.end_error, "unavailable:", 12) == 0
		         ? e2b_gone(prov, sb->id, err)
		         : host->error_set(err, AKS_EPROVISION, "e2b: cannot %s: %s", what,
		                           st.end_error);
	} else if (rc == AKS_OK && !st.ended) {
		rc = host->error_set(err, AKS_EPROVISION,
		                     "e2b: cannot %s: the output stream ended before the command "
		                     "did (the connection to the sandbox broke)",
		                     what);
	}
	/* whatever ended the call early, the process does not outlive it */
	if (rc != AKS_OK && st.started && !st.ended && marked)
		kill_process(sb, st.pid, marker, call);
	if (rc == AKS_ETIMEOUT)
		host->result_set_timed_out(out);
	if (rc == AKS_OK)
		host->result_set_exit_code(out, st.exit_code);
	if (rc == AKS_OK && capture && capture->failed)
		rc = host->error_set(err, AKS_ENOMEM, "out of memory");
	if (exit_code)
		*exit_code = st.exit_code;
	e2b_envelopes_free(&st.env);
	aks_cloud_req_free(&r);
	aks_cloud_headers_free(h);
	aks__buf_free(&body);
	free(url);
	return rc;
}

int e2b_execute_command(aks_sandbox_impl *sb, const char *command, const aks_call *call,
                        aks_result *out, aks_error **err)
{
	/* as commands.run starts it: a login shell, so the template's profile sets PATH */
	const char *argv[] = {"/bin/bash", "-l", "-c", command, NULL};
	return run_process(sb, argv, "run a command", call, out, NULL, NULL, err);
}

int e2b_install_packages(aks_sandbox_impl *sb, const char *const *packages, const aks_call *call,
                         aks_result *out, aks_error **err)
{
	/* pip install with the names as arguments: no shell ever reads them */
	size_t n = 0;
	while (packages && packages[n])
		n++;
	const char **argv = calloc(n + 6, sizeof(*argv));
	if (!argv)
		return sb->prov->host->error_set(err, AKS_ENOMEM, "out of memory");
	size_t k = 0;
	argv[k++] = "/bin/bash";
	argv[k++] = "-l";
	argv[k++] = "-c";
	argv[k++] = "exec pip install \"$@\"";
	argv[k++] = "pip";
	for (size_t i = 0; i < n; i++)
		argv[k++] = packages[i];
	int rc = run_process(sb, argv, "install packages", call, out, NULL, NULL, err);
	free(argv);
	return rc;
}

int e2b_run_capture(aks_sandbox_impl *sb, const char *const *argv, const char *what,
                    const aks_call *call, aks_buf *out, int *exit_code, aks_error **err)
{
	return run_process(sb, argv, what, call, NULL, out, exit_code, err);
}

/* ---- the code interpreter ---- */

typedef struct code_state {
	aks_sandbox_impl *sb;
	aks_result *out;
	e2b_lines lines;
	bool stderr_open; /* stderr has output that does not end with a line break */
	char *error;      /* "Name: value" of the execution's error */
	const char *failure;
} code_state;

static bool on_line(void *ctx, const char *line, size_t len)
{
	code_state *st = ctx;
	const aks_host_api *host = st->sb->prov->host;
	e2b_output o;
	json_object *root;
	if (!e2b_output_parse(line, len, &o, &root)) {
		st->failure = "a line that is not an output message";
		return false;
	}
	if ((o.kind == E2B_OUTPUT_STDOUT || o.kind == E2B_OUTPUT_STDERR) && o.text_len) {
		bool is_err = o.kind == E2B_OUTPUT_STDERR;
		if (is_err)
			st->stderr_open = o.text[o.text_len - 1] != '\n';
		if (st->out)
			host->result_write(st->out, is_err ? AKS_STREAM_STDERR : AKS_STREAM_STDOUT,
			                   o.text, o.text_len, NULL);
	} else if (o.kind == E2B_OUTPUT_ERROR && !st->error) {
		if (asprintf(&st->error, "%s: %s", o.name ? o.name : "Error",
		             o.value ? o.value : "") < 0)
			st->error = NULL;
	}
	json_object_put(root);
	return true;
}

static bool sink_lines(void *ctx, const char *data, size_t len)
{
	code_state *st = ctx;
	if (e2b_lines_feed(&st->lines, data, len, on_line, st))
		return true;
	if (!st->failure)
		st->failure = st->lines.failed ? st->lines.why : "out of memory";
	return false;
}

/* A kernel that an interrupt did not free is restarted, so the code stops and the
 * sandbox's next run_code is not queued behind it. Its variables go with it; the result
 * says so. */
static void restart_kernel(aks_sandbox_impl *sb, const aks_call *call, aks_result *out)
{
	aks_provider_impl *prov = sb->prov;
	const aks_host_api *host = prov->host;
	aks_call c;
	cleanup_call(host, call, &c);
	struct curl_slist *h = NULL;
	aks_error *e = NULL;
	char *url = e2b_sandbox_url(sb, E2B_INTERPRETER_PORT, "/contexts");
	aks_cloud_req r = {.what = "list the code interpreter's contexts",
	                   .method = "GET",
	                   .url = url,
	                   .service = true,
	                   .retry = AKS_CLOUD_RETRY_SAFE};
	json_object *list = NULL;
	const char *id = NULL;
	int rc = url ? e2b_sandbox_headers(sb, E2B_INTERPRETER_PORT, NULL, &h, &e) : AKS_ENOMEM;
	if (rc == AKS_OK) {
		r.headers = h;
		rc = aks_cloud_http(&prov->cloud, &r, &c, &e);
	}
	if (rc == AKS_OK && r.status >= 200 && r.status < 300 && r.resp.len)
		list = json_tokener_parse(r.resp.data);
	size_t n = json_object_is_type(list, json_type_array) ? json_object_array_length(list) : 0;
	for (size_t i = 0; i < n && !id; i++) {
		json_object *ctx = json_object_array_get_idx(list, i);
		const char *lang = aks__jstr(ctx, "language");
		if (lang && strcmp(lang, "python") == 0)
			id = aks__jstr(ctx, "id");
	}
	char *escaped = id ? aks_cloud_escape(id) : NULL, *path = NULL, *restart = NULL;
	if (escaped && asprintf(&path, "/contexts/%s/restart", escaped) >= 0)
		restart = e2b_sandbox_url(sb, E2B_INTERPRETER_PORT, path);
	bool done = false;
	if (restart) {
		aks_cloud_req_free(&r);
		r = (aks_cloud_req){.what = "restart the Python kernel",
		                    .method = "POST",
		                    .url = restart,
		                    .service = true,
		                    .headers = h,
		                    .retry = AKS_CLOUD_RETRY_SAFE};
		done = aks_cloud_http(&prov->cloud, &r, &c, &e) == AKS_OK && r.status >= 200 &&
		       r.status < 300;
	}
	if (done)
		host->result_set_notice(out, "the Python session was restarted to stop the code: "
		                             "its variables and imports are gone");
	else
		host->log(AKS_LOG_WARNING, E2B_NAME,
		          "sandbox %s: cannot restart the Python kernel after a deadline%s%s",
		          sb->id, e ? ": " : "", e ? host->error_message(e) : "");
	if (e)
		host->error_free(e);
	json_object_put(list);
	aks_cloud_req_free(&r);
	aks_cloud_headers_free(h);
	free(escaped);
	free(path);
	free(restart);
	free(url);
}

/* Runs code in the sandbox's kernel; out (NULL: none) gets its output and exit code. */
static int execute(aks_sandbox_impl *sb, const char *code, const aks_call *call, aks_result *out,
                   aks_error **err)
{
	aks_provider_impl *prov = sb->prov;
	const aks_host_api *host = prov->host;
	int rc;
	json_object *body = json_object_new_object();
	struct curl_slist *h = NULL;
	char *url = e2b_sandbox_url(sb, E2B_INTERPRETER_PORT, "/execute");
	if (!body || !url || json_object_object_add(body, "code", json_object_new_string(code))) {
		json_object_put(body);
		free(url);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	if ((rc = e2b_sandbox_headers(sb, E2B_INTERPRETER_PORT, "application/json", &h, err)) !=
	    AKS_OK) {
		json_object_put(body);
		free(url);
		return rc;
	}
	const char *text = json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN);
	code_state st = {.sb = sb, .out = out};
	aks_cloud_req r = {.what = "run code",
	                   .method = "POST",
	                   .url = url,
	                   .service = true,
	                   .headers = h,
	                   .body = text,
	                   .body_len = strlen(text),
	                   .retry = AKS_CLOUD_RETRY_NEVER,
	                   .sink = sink_lines,
	                   .sink_ctx = &st};
	rc = aks_cloud_http(&prov->cloud, &r, call, err);
	if (rc == AKS_OK && (r.status < 200 || r.status >= 300))
		rc = e2b_answer_error(prov, &r, sb->id, AKS_EPROVISION, err);
	else if (rc == AKS_OK && !e2b_lines_finish(&st.lines, on_line, &st))
		rc = host->error_set(err, AKS_EPROVISION,
		                     "e2b: cannot run code: the interpreter sent "
		                     "%s",
		                     st.failure ? st.failure : "a bad line");
	else if (rc == AKS_OK && st.failure)
		rc = host->error_set(err, AKS_EPROVISION,
		                     "e2b: cannot run code: the interpreter sent %s", st.failure);
	if (rc == AKS_OK) {
		/* the reference's mapping: the error's "Name: value" after stderr, on a line of
		 * its own, exit 1 */
		if (st.error) {
			if (st.stderr_open)
				host->result_write(out, AKS_STREAM_STDERR, "\n", 1, NULL);
			host->result_write(out, AKS_STREAM_STDERR, st.error, strlen(st.error),
			                   NULL);
		}
		host->result_set_exit_code(out, st.error ? 1 : 0);
	}
	free(st.error);
	e2b_lines_free(&st.lines);
	aks_cloud_req_free(&r);
	aks_cloud_headers_free(h);
	json_object_put(body);
	free(url);
	return rc;
}

/*
 * After a deadline or a cancellation, whether the kernel is free: the code interpreter
 * interrupts an execution whose client left (as a KeyboardInterrupt), keeping the kernel's
 * variables, so a short probe normally answers at once. Code that ignores the interrupt
 * keeps the kernel busy, and every later run_code would queue behind it: then the kernel
 * is restarted, and the result says its variables are gone.
 */
static void free_kernel(aks_sandbox_impl *sb, const aks_call *call, aks_result *out)
{
	const aks_host_api *host = sb->prov->host;
	aks_call probe;
	cleanup_call(host, call, &probe);
	probe.deadline_ms = host->now_ms() + KERNEL_PROBE_MS;
	probe.timeout = KERNEL_PROBE_MS / 1000.0;
	aks_error *e = NULL;
	if (execute(sb, "pass", &probe, NULL, &e) != AKS_OK)
		restart_kernel(sb, call, out);
	if (e)
		host->error_free(e);
}

int e2b_execute_code(aks_sandbox_impl *sb, const char *code, const char *language,
                     const aks_call *call, aks_result *out, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	if (!language || strcmp(language, "python") != 0)
		return host->error_set(err, AKS_ECAPABILITY,
		                       "e2b runs code in python only, not '%s'",
		                       language ? language : "");
	int rc = e2b_sandbox_touch(sb, call, err);
	if (rc == AKS_OK)
		rc = execute(sb, code, call, out, err);
	if (rc == AKS_ETIMEOUT || rc == AKS_ECANCELLED) {
		free_kernel(sb, call, out);
		if (rc == AKS_ETIMEOUT)
			host->result_set_timed_out(out);
	}
	return rc;
}
