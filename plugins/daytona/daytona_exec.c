/*
 * plugins/daytona/daytona_exec.c - commands, Python and packages through the sandbox's
 * toolbox, as the official SDK drives it.
 *
 * Commands run in a toolbox session (POST /process/session, then POST
 * /process/session/{id}/exec without runAsync), whose answer carries stdout and stderr apart
 * and the exit code; each in a shell of its own started from the sandbox user's home, its
 * stdin /dev/null (the session's shell reads its commands from its own stdin), so nothing
 * one command changes reaches the next. One session per sandbox handle, made at its first
 * command; a command that outlives its deadline or is cancelled ends the session
 * (DELETE /process/session/{id}), which kills what it runs: the work stops in the sandbox.
 *
 * Python runs through the toolbox's code-run (POST /process/code-run), the reference's
 * process.code_run: one merged output, mapped as the reference maps it (stdout when the exit
 * code is 0, else stderr), with Daytona's own timeout set to what is left of the call's; a
 * cancelled run goes on in the sandbox until that timeout (the API has no way to stop it).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "aks_http.h"
#include "aks_json.h"
#include "aks_killscript.h"
#include "aks_shquote.h"
#include "daytona_internal.h"
#include "daytona_wire.h"

/* The toolbox answers a command's whole output as one JSON document: kept up to this (the
 * host keeps less of each stream and marks the rest truncated); past it, an error. */
#define ANSWER_MAX (64u << 20)
/* How long ending a session after a timeout or a cancellation may take. */
#define CLEANUP_MS 10000

/* ---- sessions ---- */

static bool random_hex(char *out, size_t bytes)
{
	unsigned char b[32];
	if (bytes > sizeof(b))
		return false;
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	bool ok = fd >= 0 && read(fd, b, bytes) == (ssize_t)bytes;
	if (fd >= 0)
		close(fd);
	for (size_t i = 0; ok && i < bytes; i++)
		snprintf(out + 2 * i, 3, "%02x", b[i]);
	return ok;
}

/* POST or DELETE of /process/session[/id]. *again (a POST's): the sandbox was stopped and is
 * started again, no session made: try again. */
static int session_request(aks_sandbox_impl *sb, const char *method, const char *sid,
                           const aks_call *call, bool *again, aks_error **err)
{
	aks_provider_impl *prov = sb->prov;
	const aks_host_api *host = prov->host;
	bool create = strcmp(method, "POST") == 0;
	char *url = NULL, *path = NULL;
	if (create || asprintf(&path, "/process/session/%s", sid) >= 0)
		url = dt_toolbox_url(sb, create ? "/process/session" : path);
	free(path);
	json_object *body = create ? json_object_new_object() : NULL;
	if (!url || (create && (!body || json_object_object_add(body, "sessionId",
	                                                        json_object_new_string(sid))))) {
		free(url);
		json_object_put(body);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	char what[160];
	snprintf(what, sizeof(what), "%s a toolbox session in sandbox '%.100s'",
	         create ? "open" : "end", sb->id);
	aks_cloud_req r = {.what = what,
	                   .method = method,
	                   .url = url,
	                   .service = true,
	                   .retry = create ? AKS_CLOUD_RETRY_UNSENT : AKS_CLOUD_RETRY_SAFE};
	int rc = dt_request(prov, &r, body, NULL, call, NULL, err);
	/* a session already gone is what a DELETE wants; a create refused by the proxy asks
	 * whether the sandbox is still there (and starts it again if it was stopped) */
	if (rc == AKS_OK && !(r.status >= 200 && r.status < 300) && create)
		rc = dt_toolbox_failed(sb, &r, call, AKS_EPROVISION, again, err);
	else if (rc == AKS_OK && !(r.status >= 200 && r.status < 300) && r.status != 404)
		rc = dt_answer_error(prov, &r, NULL, AKS_EPROVISION, err);
	aks_cloud_req_free(&r);
	json_object_put(body);
	free(url);
	return rc;
}

/* Ends session sid within a deadline of its own (the call's may be over). */
static void session_delete(aks_sandbox_impl *sb, const char *sid)
{
	const aks_host_api *host = sb->prov->host;
	aks_call cleanup = {.struct_version = AKS_CALL_VERSION,
	                    .struct_size = sizeof(aks_call),
	                    .deadline_ms = host->now_ms() + CLEANUP_MS};
	aks_error *e = NULL;
	bool again = false;
	if (session_request(sb, "DELETE", sid, &cleanup, &again, &e) != AKS_OK)
		host->log(AKS_LOG_WARNING, DAYTONA_NAME, "sandbox '%s': session %s not ended: %s",
		          sb->id, sid, e ? host->error_message(e) : "?");
	if (e)
		host->error_free(e);
}

void dt_session_end(aks_sandbox_impl *sb, const aks_call *call)
{
	(void)call;
	pthread_mutex_lock(&sb->session_lock);
	if (sb->session)
		session_delete(sb, sb->session);
	free(sb->session);
	sb->session = NULL;
	pthread_mutex_unlock(&sb->session_lock);
}

/* A session to run one command in, in *sid (malloc'd): the handle's own, held (*own true:
 * unlock when done), or, while another command holds it, one of this command's (deleted
 * after it). *again: none made, the sandbox was started again: try again. */
static int session_take(aks_sandbox_impl *sb, const aks_call *call, char **sid, bool *own,
                        bool *again, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	*again = false;
	*own = pthread_mutex_trylock(&sb->session_lock) == 0;
	if (*own && sb->session) {
		*sid = strdup(sb->session);
		if (*sid)
			return AKS_OK;
		pthread_mutex_unlock(&sb->session_lock);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	char name[4 + 33] = "aks-";
	if (!random_hex(name + 4, 16)) {
		if (*own)
			pthread_mutex_unlock(&sb->session_lock);
		return host->error_set(err, AKS_EIO,
		                       "daytona: no random bytes for a session's name");
	}
	int rc = session_request(sb, "POST", name, call, again, err);
	if (rc == AKS_OK && *again) {
		if (*own)
			pthread_mutex_unlock(&sb->session_lock);
		return AKS_OK;
	}
	*sid = rc == AKS_OK ? strdup(name) : NULL;
	if (rc == AKS_OK && !*sid)
		rc = host->error_set(err, AKS_ENOMEM, "out of memory");
	if (rc == AKS_OK && *own && !(sb->session = strdup(name)))
		rc = host->error_set(err, AKS_ENOMEM, "out of memory");
	if (rc != AKS_OK) {
		if (*sid)
			session_delete(sb, name);
		free(*sid);
		*sid = NULL;
		if (*own)
			pthread_mutex_unlock(&sb->session_lock);
	}
	return rc;
}

/* After a command: the handle's session is released, or kept no more when the command did
 * not end (broken: it is deleted, and the next command makes another); a command's own
 * session is deleted. */
static void session_give(aks_sandbox_impl *sb, char *sid, bool own, bool broken)
{
	if (!own || broken)
		session_delete(sb, sid);
	if (own) {
		if (broken) {
			free(sb->session);
			sb->session = NULL;
		}
		pthread_mutex_unlock(&sb->session_lock);
	}
	free(sid);
}

/* ---- one command ---- */

/* Writes what a command printed to out, or its stdout to capture. */
static int deliver(const aks_host_api *host, aks_result *out, aks_buf *capture, int stream,
                   const aks_buf *text, aks_error **err)
{
	if (!text->len)
		return AKS_OK;
	if (capture) {
		if (stream == AKS_STREAM_STDOUT &&
		    aks__buf_append(capture, text->data, text->len) != AKS_OK)
			return host->error_set(err, AKS_ENOMEM, "out of memory");
		return AKS_OK;
	}
	return host->result_write(out, stream, text->data, text->len, err);
}

/* A GET of a toolbox path under the session; the answer in r (freed by the caller). */
static int session_get(aks_sandbox_impl *sb, const char *sid, const char *suffix, const char *what,
                       const aks_call *call, aks_cloud_req *r, aks_error **err)
{
	char *path = NULL, *url = NULL;
	if (asprintf(&path, "/process/session/%s%s", sid, suffix) >= 0)
		url = dt_toolbox_url(sb, path);
	free(path);
	if (!url)
		return sb->prov->host->error_set(err, AKS_ENOMEM, "out of memory");
	*r = (aks_cloud_req){.what = what,
	                     .method = "GET",
	                     .url = url,
	                     .service = true,
	                     .retry = AKS_CLOUD_RETRY_SAFE,
	                     .resp_max = ANSWER_MAX + 1,
	                     .capture_header = "Content-Type"};
	int rc = dt_request(sb->prov, r, NULL, NULL, call, NULL, err);
	r->url = NULL;
	free(url);
	return rc;
}

/* Whether the daemon read a command's exit-code file between the shell's creating and writing
 * it (older daemons answer so instead of reading again). */
static bool half_written(const aks_cloud_req *r)
{
	char *msg = aks_ctr_http_message(r->resp.data, r->resp.len, r->status);
	bool race = msg && strstr(msg, "failed to convert exit code to int");
	free(msg);
	return race;
}

/* Whether an exec's answer is that race: the command ran to its end, its result is there to
 * be read. */
static bool exit_code_race(const aks_cloud_req *r)
{
	return r->status == 400 && dt_from_daemon(r) && half_written(r);
}

/*
 * After the race: the command is the session's newest with this command line (the session
 * runs one command at a time: it is this call's). Its exit code, once the daemon reads it
 * whole (GET .../command/{id}, again every 50 ms, within the deadline), and its output (GET
 * .../logs, the same streams as an exec's answer) make the result the exec would have given.
 */
static int race_result(aks_sandbox_impl *sb, const char *sid, const char *line,
                       const aks_call *call, dt_exec_answer *answer, aks_error **err)
{
	aks_provider_impl *prov = sb->prov;
	const aks_host_api *host = prov->host;
	aks_cloud_req r = {0};
	int rc = session_get(sb, sid, "", "read the toolbox session", call, &r, err);
	json_object *o = rc == AKS_OK && r.status == 200 ? dt_answer_object(prov, &r, err) : NULL;
	if (rc == AKS_OK && !o)
		rc = r.status == 200 ? AKS_EPROVISION
		                     : dt_answer_error(prov, &r, NULL, AKS_EPROVISION, err);
	aks_cloud_req_free(&r);
	char *cid = NULL;
	json_object *commands = aks__jget(o, "commands");
	for (size_t i = json_object_array_length(commands); rc == AKS_OK && i > 0 && !cid; i--) {
		json_object *c = json_object_array_get_idx(commands, i - 1);
		const char *text = aks__jstr(c, "command"), *id = aks__jstr(c, "id");
		if (text && id && strcmp(text, line) == 0 && !(cid = strdup(id)))
			rc = host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	json_object_put(o);
	if (rc == AKS_OK && !cid)
		rc = host->error_set(
		    err, AKS_EPROVISION,
		    "daytona: the toolbox lost a command's exit code, and its session "
		    "no longer lists the command");
	char *suffix = NULL;
	if (rc == AKS_OK && asprintf(&suffix, "/command/%s", cid) < 0) {
		suffix = NULL;
		rc = host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	int code = 0;
	bool have_code = false;
	while (rc == AKS_OK && !have_code) {
		rc = session_get(sb, sid, suffix, "read a command's exit code", call, &r, err);
		json_object *c =
		    rc == AKS_OK && r.status == 200 ? dt_answer_object(prov, &r, err) : NULL;
		json_object *v = aks__jget(c, "exitCode");
		if ((have_code = json_object_is_type(v, json_type_int)))
			code = json_object_get_int(v);
		if (rc == AKS_OK && r.status == 200 && !c)
			rc = AKS_EPROVISION; /* not JSON: said in *err */
		else if (rc == AKS_OK && r.status != 200 && !half_written(&r))
			rc = dt_answer_error(prov, &r, NULL, AKS_EPROVISION, err);
		json_object_put(c);
		aks_cloud_req_free(&r);
		if (rc == AKS_OK && !have_code) /* not yet written, or read half-written again */
			rc = aks_cloud_pause(&prov->cloud, call, 50, err);
	}
	char *logs = NULL;
	const char *why = NULL;
	if (rc == AKS_OK && asprintf(&logs, "%s/logs", suffix) < 0) {
		logs = NULL;
		rc = host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	if (rc == AKS_OK)
		rc = session_get(sb, sid, logs, "read a command's output", call, &r, err);
	if (rc == AKS_OK && r.status != 200)
		rc = dt_answer_error(prov, &r, NULL, AKS_EPROVISION, err);
	else if (rc == AKS_OK && r.resp.len > ANSWER_MAX)
		rc = host->error_set(err, AKS_ELIMIT,
		                     "daytona: a command's output is larger than %u MiB, and "
		                     "Daytona's toolbox answers it whole",
		                     ANSWER_MAX >> 20);
	/* JSON with the streams (a toolbox that splits them), or the raw log with its markers */
	else if (rc == AKS_OK && strncasecmp(r.captured, "application/json", 16) == 0 &&
	         !dt_exec_answer_parse(r.resp.data, r.resp.len, answer, &why))
		rc = host->error_set(err, AKS_EPROVISION,
		                     "daytona: cannot read a command's output: the answer is %s",
		                     why);
	else if (rc == AKS_OK && strncasecmp(r.captured, "application/json", 16) != 0 &&
	         !dt_demux(r.resp.data, r.resp.len, &answer->out, &answer->err))
		rc = host->error_set(err, AKS_ENOMEM, "out of memory");
	if (rc == AKS_OK)
		answer->exit_code = code;
	aks_cloud_req_free(&r);
	free(logs);
	free(suffix);
	free(cid);
	return rc;
}

/* How a try of a command ended, when it did not give a result. */
typedef enum try_end {
	TRY_DONE,  /* the result, or an error that stands */
	TRY_AGAIN, /* nothing ran: the session was gone, or the sandbox was started again */
} try_end;

/* Runs the command line in a session; out gets its output and exit code, or capture its
 * stdout and *exit_code its exit code. */
static int run_once(aks_sandbox_impl *sb, const char *line, const char *what, const aks_call *call,
                    aks_result *out, aks_buf *capture, int *exit_code, try_end *end,
                    aks_error **err)
{
	aks_provider_impl *prov = sb->prov;
	const aks_host_api *host = prov->host;
	char *sid = NULL;
	bool own = false, again = false;
	*end = TRY_DONE;
	int rc = session_take(sb, call, &sid, &own, &again, err);
	if (rc != AKS_OK || again) {
		*end = again ? TRY_AGAIN : TRY_DONE;
		return rc;
	}
	char *path = NULL, *url = NULL;
	if (asprintf(&path, "/process/session/%s/exec", sid) >= 0)
		url = dt_toolbox_url(sb, path);
	free(path);
	json_object *body = json_object_new_object();
	if (!url || !body ||
	    json_object_object_add(body, "command", json_object_new_string(line)) ||
	    json_object_object_add(body, "runAsync", json_object_new_boolean(0))) {
		free(url);
		json_object_put(body);
		session_give(sb, sid, own, false);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	/* never sent twice: a command that reached the sandbox ran */
	aks_cloud_req r = {.what = what,
	                   .method = "POST",
	                   .url = url,
	                   .service = true,
	                   .retry = AKS_CLOUD_RETRY_UNSENT,
	                   .resp_max = ANSWER_MAX + 1};
	dt_exec_answer answer = {0};
	const char *why = NULL;
	rc = dt_request(prov, &r, body, NULL, call, NULL, err);
	/* a command cut short by the deadline or a cancellation: its session ends, and what
	 * it ran with it */
	bool broken = rc != AKS_OK;
	if (rc == AKS_OK && r.resp.len > ANSWER_MAX) {
		rc = host->error_set(err, AKS_ELIMIT,
		                     "daytona: cannot %s: its output is larger than %u MiB, and "
		                     "Daytona's toolbox answers it whole",
		                     what, ANSWER_MAX >> 20);
	} else if (rc == AKS_OK && exit_code_race(&r)) {
		rc = race_result(sb, sid, line, call, &answer, err);
		broken = rc != AKS_OK;
	} else if (rc == AKS_OK && r.status == 404 && dt_from_daemon(&r)) {
		/* the session is gone (the sandbox was started again since it was made) */
		broken = true;
		*end = TRY_AGAIN;
	} else if (rc == AKS_OK && (r.status < 200 || r.status >= 300)) {
		broken = true;
		rc = dt_toolbox_failed(sb, &r, call, AKS_EPROVISION, &again, err);
		*end = again ? TRY_AGAIN : TRY_DONE;
	} else if (rc == AKS_OK && !dt_exec_answer_parse(r.resp.data, r.resp.len, &answer, &why)) {
		rc = host->error_set(err, AKS_EPROVISION, "daytona: cannot %s: the answer is %s",
		                     what, why);
	}
	if (rc == AKS_OK && *end == TRY_DONE && !broken) {
		rc = deliver(host, out, capture, AKS_STREAM_STDOUT, &answer.out, err);
		if (rc == AKS_OK)
			rc = deliver(host, out, capture, AKS_STREAM_STDERR, &answer.err, err);
		if (rc == AKS_OK && out)
			host->result_set_exit_code(out, answer.exit_code);
		if (exit_code)
			*exit_code = answer.exit_code;
	}
	session_give(sb, sid, own, broken);
	if (rc == AKS_ETIMEOUT && out)
		host->result_set_timed_out(out);
	dt_exec_answer_free(&answer);
	json_object_put(body);
	aks_cloud_req_free(&r);
	free(url);
	return rc;
}

/* Kills every process that carries the run's marker (what it started, detached from the
 * session or not), after the call that ran it ended: ending the session kills its process
 * group only. Logged when it cannot be done: the caller's error says what happened to the
 * call. */
static void kill_marked(aks_sandbox_impl *sb, const char *marker)
{
	const aks_host_api *host = sb->prov->host;
	aks_call cleanup = {.struct_version = AKS_CALL_VERSION,
	                    .struct_size = sizeof(aks_call),
	                    .deadline_ms = host->now_ms() + CLEANUP_MS};
	/* the script exits 0 once no process carries the marker (itself does not) */
	const char *argv[] = {"/bin/sh", "-c", aks_ctr_kill_script, "sh", marker, NULL};
	char *words = aks_shquote_argv(argv), *line = NULL;
	if (words && asprintf(&line, "%s </dev/null", words) < 0)
		line = NULL;
	free(words);
	aks_buf ignored = AKS_BUF_INIT;
	aks_error *e = NULL;
	int code = -1;
	try_end end = TRY_DONE;
	if (!line ||
	    run_once(sb, line, "kill the run's processes", &cleanup, NULL, &ignored, &code, &end,
	             &e) != AKS_OK ||
	    code != 0)
		host->log(AKS_LOG_WARNING, DAYTONA_NAME,
		          "sandbox %s: the processes of a run may outlive it: %s", sb->id,
		          e ? host->error_message(e) : "the kill script did not finish");
	if (e)
		host->error_free(e);
	aks__buf_free(&ignored);
	free(line);
}

/* Runs the command line (marked: its processes carry marker, NULL: none) in a session,
 * again once when nothing ran; a marked run cut short leaves nothing running. */
static int run_line(aks_sandbox_impl *sb, const char *line, const char *marker, const char *what,
                    const aks_call *call, aks_result *out, aks_buf *capture, int *exit_code,
                    aks_error **err)
{
	try_end end = TRY_DONE;
	int rc = run_once(sb, line, what, call, out, capture, exit_code, &end, err);
	if (rc == AKS_OK && end == TRY_AGAIN) /* once: the second answer stands */
		rc = run_once(sb, line, what, call, out, capture, exit_code, &end, err);
	if (rc == AKS_OK && end == TRY_AGAIN)
		rc = dt_gone(sb->prov, sb->id, err);
	if (marker && (rc == AKS_ETIMEOUT || rc == AKS_ECANCELLED || rc == AKS_EPROVISION))
		kill_marked(sb, marker);
	return rc;
}

/* A command line that runs argv's words in a shell of its own from the home, its stdin
 * /dev/null, the marker in its environment; malloc'd, NULL when out of memory. */
static char *command_line(const char *const *argv, const char *marker)
{
	char *words = aks_shquote_argv(argv), *line = NULL;
	if (words && asprintf(&line,
	                      "cd " DAYTONA_HOME " 2>/dev/null; " AKS_CTR_MARKER_VAR "=%s %s "
	                      "</dev/null",
	                      marker, words) < 0)
		line = NULL;
	free(words);
	return line;
}

/* Runs argv's words as a command line of their own, marked. */
static int run_words(aks_sandbox_impl *sb, const char *const *argv, const char *what,
                     const aks_call *call, aks_result *out, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	char marker[33];
	if (!random_hex(marker, 16))
		return host->error_set(err, AKS_EIO, "daytona: no random bytes for a run's marker");
	char *line = command_line(argv, marker);
	if (!line)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	int rc = run_line(sb, line, marker, what, call, out, NULL, NULL, err);
	free(line);
	return rc;
}

int dt_execute_command(aks_sandbox_impl *sb, const char *command, const aks_call *call,
                       aks_result *out, aks_error **err)
{
	const char *argv[] = {"bash", "-c", command, NULL};
	return run_words(sb, argv, "run a command", call, out, err);
}

int dt_install_packages(aks_sandbox_impl *sb, const char *const *packages, const aks_call *call,
                        aks_result *out, aks_error **err)
{
	/* the reference's pip install, each name one quoted word: no shell reads them */
	size_t n = 0;
	while (packages && packages[n])
		n++;
	const char **argv = calloc(n + 3, sizeof(*argv));
	if (!argv)
		return sb->prov->host->error_set(err, AKS_ENOMEM, "out of memory");
	argv[0] = "pip";
	argv[1] = "install";
	for (size_t i = 0; i < n; i++)
		argv[2 + i] = packages[i];
	int rc = run_words(sb, argv, "install packages", call, out, err);
	free(argv);
	return rc;
}

int dt_run_capture(aks_sandbox_impl *sb, const char *line, const char *what, const aks_call *call,
                   aks_buf *capture, int *exit_code, aks_error **err)
{
	return run_line(sb, line, NULL, what, call, NULL, capture, exit_code, err);
}

/* ---- Python ---- */

/* Daytona's timeout for a run: what is left of the call's, whole seconds, at least one; 0
 * (none) when the call has no deadline. */
static long code_timeout(const aks_host_api *host, const aks_call *call)
{
	if (!call || call->deadline_ms <= 0)
		return 0;
	double left = (double)(call->deadline_ms - host->now_ms()) / 1000.0;
	return left < 1 ? 1 : (long)ceil(left);
}

/* One try of code-run; *again: the sandbox was stopped and is started again, nothing ran. */
static int code_once(aks_sandbox_impl *sb, const char *code, const aks_call *call, aks_result *out,
                     bool *again, aks_error **err)
{
	aks_provider_impl *prov = sb->prov;
	const aks_host_api *host = prov->host;
	*again = false;
	char *url = dt_toolbox_url(sb, "/process/code-run");
	json_object *body = json_object_new_object();
	long timeout = code_timeout(host, call);
	if (!url || !body || json_object_object_add(body, "code", json_object_new_string(code)) ||
	    json_object_object_add(body, "language", json_object_new_string("python")) ||
	    (timeout > 0 &&
	     json_object_object_add(body, "timeout", json_object_new_int64(timeout)))) {
		free(url);
		json_object_put(body);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	aks_cloud_req r = {.what = "run code",
	                   .method = "POST",
	                   .url = url,
	                   .service = true,
	                   .retry = AKS_CLOUD_RETRY_UNSENT,
	                   .resp_max = ANSWER_MAX + 1};
	json_object *answer = NULL;
	int rc = dt_request(prov, &r, body, NULL, call, NULL, err);
	if (rc == AKS_OK && r.resp.len > ANSWER_MAX)
		rc = host->error_set(err, AKS_ELIMIT,
		                     "daytona: cannot run code: its output is larger than %u MiB, "
		                     "and Daytona's toolbox answers it whole",
		                     ANSWER_MAX >> 20);
	else if (rc == AKS_OK && (r.status < 200 || r.status >= 300))
		rc = dt_toolbox_failed(sb, &r, call, AKS_EPROVISION, again, err);
	else if (rc == AKS_OK && !(answer = dt_answer_object(prov, &r, err)))
		rc = AKS_EPROVISION;
	if (rc == AKS_OK && !*again) {
		/* the reference's mapping of the one merged output */
		json_object *code_v = aks__jget(answer, "exitCode");
		int exit_code =
		    json_object_is_type(code_v, json_type_int) ? json_object_get_int(code_v) : -1;
		json_object *result = aks__jget(answer, "result");
		if (json_object_is_type(result, json_type_string) &&
		    json_object_get_string_len(result) > 0)
			rc = host->result_write(
			    out, exit_code == 0 ? AKS_STREAM_STDOUT : AKS_STREAM_STDERR,
			    json_object_get_string(result),
			    (size_t)json_object_get_string_len(result), err);
		if (rc == AKS_OK)
			host->result_set_exit_code(out, exit_code);
	} else if (rc == AKS_ETIMEOUT) {
		host->result_set_timed_out(out);
	} else if (rc == AKS_ECANCELLED && err) {
		/* said in the error itself: the caller must not think the code stopped */
		if (*err)
			host->error_free(*err);
		*err = NULL;
		if (timeout > 0)
			host->error_set(
			    err, AKS_ECANCELLED,
			    "daytona: run_code was cancelled, but the code goes on in the "
			    "sandbox until Daytona's timeout (%ld s): code-run cannot stop it",
			    timeout);
		else
			host->error_set(
			    err, AKS_ECANCELLED,
			    "daytona: run_code was cancelled, but the code goes on in the "
			    "sandbox until it ends: code-run cannot stop it");
	}
	json_object_put(answer);
	json_object_put(body);
	aks_cloud_req_free(&r);
	free(url);
	return rc;
}

int dt_execute_code(aks_sandbox_impl *sb, const char *code, const char *language,
                    const aks_call *call, aks_result *out, aks_error **err)
{
	if (strcmp(language, "python") != 0)
		return sb->prov->host->error_set(err, AKS_EINVAL,
		                                 "daytona runs python only, not '%s'", language);
	bool again = false;
	int rc = code_once(sb, code, call, out, &again, err);
	if (rc == AKS_OK && again) /* once: the second answer stands */
		rc = code_once(sb, code, call, out, &again, err);
	if (rc == AKS_OK && again)
		rc = dt_gone(sb->prov, sb->id, err);
	return rc;
}
