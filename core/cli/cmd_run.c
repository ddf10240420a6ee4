/*
 * core/cli/cmd_run.c - `aksandbox run` and `aksandbox code`: one execution.
 *
 * Two paths:
 *  - by default, a fresh sandbox (create, execute, destroy) straight through
 *    the provider: the program's stdout and stderr are written to ours byte
 *    for byte, --timeout bounds the execution, and its exit code becomes ours.
 *  - with --session ID or --persist, the run_command / run_code tool in a
 *    session of the conversation (--conversation), kept in the state
 *    directory so successive invocations share the sandbox. The tool's
 *    result is JSON, so the output is text (UTF-8, invalid bytes replaced,
 *    cut at tool_output_max_chars) and the timeout is the profile's policy
 *    timeout: the tool API has no per-call timeout, so --timeout is refused
 *    there rather than silently ignored.
 *
 * Everything the CLI itself says goes to stderr, prefixed "aksandbox: ", after
 * the program's output.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "cli.h"

/* Create and destroy are not covered by the execution timeout (as in the
 * seeds), but must not hang forever either. */
#define CLI_PROVISION_TIMEOUT 300.0
#define CLI_DESTROY_TIMEOUT   60.0

/* The largest piece of code `aksandbox code` reads. */
#define CLI_CODE_MAX ((size_t)64 << 20)

struct exec_request {
	const char *profile; /* NULL: the default profile */
	double timeout;      /* seconds; < 0: the profile's; 0: none */
	const char *command; /* run */
	const char *code;    /* code */
	const char *language;
	const char *session; /* --session ID: an explicit sandbox_session_id */
	bool persist;        /* --persist (or --session): through the tool API */
};

/* ---- signals ------------------------------------------------------------------ */

/* The handler only triggers the call's cancellation token (async-signal-safe);
 * the provider then kills the program tree and the call returns. */
static aks_cancel *volatile signal_cancel;
static volatile sig_atomic_t signal_caught;

static void on_signal(int signo)
{
	if (!signal_caught)
		signal_caught = signo;
	aks_cancel_trigger(signal_cancel);
}

static const int cancel_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define N_CANCEL_SIGNALS (sizeof(cancel_signals) / sizeof(cancel_signals[0]))
static struct sigaction saved_actions[N_CANCEL_SIGNALS];

static void catch_signals(aks_cancel *cancel)
{
	struct sigaction sa;

	signal_cancel = cancel;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigfillset(&sa.sa_mask);
	/* A second signal of the same kind takes the default action, so a
	 * cancellation that hangs can still be interrupted. */
	sa.sa_flags = SA_RESETHAND;
	for (size_t i = 0; i < N_CANCEL_SIGNALS; i++)
		sigaction(cancel_signals[i], &sa, &saved_actions[i]);
}

/* Once the call is over there is nothing left to cancel: signals act as they
 * did before (the default: terminate), and the token can be freed. */
static void restore_signals(void)
{
	for (size_t i = 0; i < N_CANCEL_SIGNALS; i++)
		sigaction(cancel_signals[i], &saved_actions[i], NULL);
	signal_cancel = NULL;
}

/* ---- output ------------------------------------------------------------------- */

static const char *stream_name(int stream)
{
	return stream == AKS_STREAM_STDOUT ? "stdout" : "stderr";
}

/* Writes one stream of the result to `fd`. Returns 0 or an errno value. */
static int write_stream(const aks_result *res, int stream, int fd)
{
	size_t len = 0;
	const char *data = stream == AKS_STREAM_STDOUT ? aks_result_get_stdout(res, &len)
	                                               : aks_result_get_stderr(res, &len);
	if (data && len > 0 && cli_write_all(fd, data, len) < 0)
		return errno;
	return 0;
}

/* Prints the program's output and what the CLI has to say about it. Returns 0,
 * or the errno of a failed write to stdout. */
static int print_result(const aks_result *res)
{
	/* Writing to a closed pipe must not kill us before we report; the
	 * program has already finished, so the disposition is not inherited. */
	signal(SIGPIPE, SIG_IGN);
	int out_errno = write_stream(res, AKS_STREAM_STDOUT, STDOUT_FILENO);
	(void)write_stream(res, AKS_STREAM_STDERR, STDERR_FILENO);

	static const int streams[] = {AKS_STREAM_STDOUT, AKS_STREAM_STDERR};
	for (size_t i = 0; i < 2; i++) {
		int s = streams[i];
		if (!aks_result_is_truncated(res, s))
			continue;
		size_t kept = 0;
		if (s == AKS_STREAM_STDOUT)
			aks_result_get_stdout(res, &kept);
		else
			aks_result_get_stderr(res, &kept);
		cli_warn("%s was cut: kept %zu of %llu bytes", stream_name(s), kept,
		         (unsigned long long)aks_result_get_stream_total(res, s));
	}
	const char *notice = aks_result_get_notice(res);
	if (notice && *notice)
		cli_warn("notice: %s", notice);
	return out_errno;
}

/* The program's exit code as our exit status. Providers report a program
 * killed by signal N as 128 + N, as the shell does; a code that cannot be an
 * exit status (-1: the provider could not tell) must still read as failure. */
static int exit_status_of(int code)
{
	return code >= 0 && code <= 255 ? code : 255;
}

/* ---- one execution -------------------------------------------------------------- */

static int run_call(const cli_profile *prof, aks_sandbox *sb, const struct exec_request *req,
                    aks_cancel *cancel, aks_result **res, cli_error *err)
{
	aks_policy policy = *prof->policy;
	aks_call call;
	aks_error *e = NULL;
	int rc;

	if (req->timeout >= 0)
		policy.timeout = req->timeout;
	aks_call_init(&call, policy.timeout, &policy, prof->principal, cancel);
	if (req->command)
		rc = aks_sandbox_execute_command(sb, req->command, &call, res, &e);
	else
		rc = aks_sandbox_execute_code(sb, req->code, req->language, &call, res, &e);
	if (rc < 0)
		cli_error_take(err, rc, e);
	return rc;
}

/* Destroys the sandbox whatever happened before; a failure is only reported,
 * since the program's result is what the caller asked for. */
static void destroy_sandbox(const cli_profile *prof, aks_sandbox *sb)
{
	char *id = strdup(aks_sandbox_get_id(sb));
	if (!id) {
		aks_sandbox_close(sb);
		cli_warn("warning: out of memory; the sandbox was not destroyed");
		return;
	}
	aks_call call;
	aks_error *e = NULL;
	aks_call_init(&call, CLI_DESTROY_TIMEOUT, prof->policy, prof->principal, NULL);
	int rc;
	if (prof->runtime) {
		rc = aks_runtime_destroy_sandbox(prof->runtime, prof->profile, sb, &call, &e);
	} else {
		aks_sandbox_close(sb);
		rc = aks_provider_destroy(prof->provider, id, &call, &e);
	}
	if (rc < 0) {
		cli_warn("warning: could not destroy sandbox %s: %s", id,
		         e ? aks_error_message(e) : "unknown error");
		aks_error_free(e);
	}
	free(id);
}

static int execute(const struct exec_request *req)
{
	cli_runtime *rt = NULL;
	const cli_profile *prof = NULL;
	aks_cancel *cancel = NULL;
	aks_sandbox *sb = NULL;
	aks_result *res = NULL;
	aks_error *e = NULL;
	cli_error err = {0};
	int rc, status;

	rc = cli_runtime_open(&rt, &err);
	if (rc == AKS_OK)
		rc = cli_runtime_get_profile(rt, req->profile, &prof, &err);
	if (rc == AKS_OK) {
		rc = aks_cancel_new(&cancel, &e);
		if (rc < 0)
			cli_error_take(&err, rc, e);
	}
	if (rc == AKS_OK) {
		aks_call call;
		catch_signals(cancel);
		aks_call_init(&call, CLI_PROVISION_TIMEOUT, prof->policy, prof->principal, cancel);
		rc = prof->runtime
		         ? aks_runtime_create_sandbox(prof->runtime, prof->profile, &call, &sb, &e)
		         : aks_provider_create(prof->provider, &call, &sb, &e);
		if (rc < 0)
			cli_error_take(&err, rc, e);
	}
	if (rc == AKS_OK) {
		rc = run_call(prof, sb, req, cancel, &res, &err);
		destroy_sandbox(prof, sb);
	}
	if (cancel)
		restore_signals();

	status = CLI_EXIT_ERROR;
	if (res) {
		int out_errno = print_result(res);
		if (rc == AKS_OK)
			status = exit_status_of(aks_result_get_exit_code(res));
		if (out_errno == EPIPE) {
			status = CLI_EXIT_SIGNAL + SIGPIPE;
		} else if (out_errno) {
			cli_warn("cannot write the program's stdout: %s", strerror(out_errno));
			status = CLI_EXIT_ERROR;
		}
		aks_result_free(res);
	}
	if (rc < 0) {
		cli_error_print(&err);
		status = rc == AKS_ETIMEOUT ? CLI_EXIT_TIMEOUT : CLI_EXIT_ERROR;
	}
	if (signal_caught)
		status = CLI_EXIT_SIGNAL + signal_caught;

	aks_cancel_free(cancel);
	cli_runtime_close(rt);
	return status;
}

/* ---- in a session, through the tool API ---------------------------------------- */

/* How often a promoted execution is polled (check_sandbox_task). */
#define CLI_TASK_POLL_NS 50000000L

static const char *json_str(struct json_object *o, const char *key)
{
	struct json_object *v = json_object_object_get(o, key);
	return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

/* The tool's arguments for this request (malloc'ed), or NULL. */
static char *session_args(const struct exec_request *req)
{
	struct json_object *a = json_object_new_object();
	if (!a)
		return NULL;
	bool ok = true;
	if (req->command)
		ok =
		    json_object_object_add(a, "command", json_object_new_string(req->command)) == 0;
	else
		ok = json_object_object_add(a, "code", json_object_new_string(req->code)) == 0 &&
		     json_object_object_add(a, "language", json_object_new_string(req->language)) ==
		         0;
	if (ok && req->session)
		ok = json_object_object_add(a, "sandbox_session_id",
		                            json_object_new_string(req->session)) == 0;
	if (ok && req->profile)
		ok =
		    json_object_object_add(a, "profile", json_object_new_string(req->profile)) == 0;
	const char *text = ok ? json_object_to_json_string_ext(a, JSON_C_TO_STRING_PLAIN) : NULL;
	char *copy = text ? strdup(text) : NULL;
	json_object_put(a);
	return copy;
}

/* Calls a tool; the parsed result in *out, or an exit status after reporting. */
static int call_tool(cli_tool_host *h, const char *tool, const char *args, aks_cancel *cancel,
                     struct json_object **out)
{
	aks_tool_context ctx;
	aks_tool_context_init(&ctx, cli_get_conversation(), cli_agent);
	ctx.cancel = cancel;
	char *json = NULL;
	aks_error *e = NULL;
	int rc = aks_runtime_call_tool(h->rt, tool, args, &ctx, &json, &e);
	if (rc < 0) {
		cli_error err;
		cli_error_take(&err, rc, e);
		cli_error_print(&err);
		return rc == AKS_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_ERROR;
	}
	*out = json_tokener_parse(json);
	free(json);
	if (!*out || !json_object_is_type(*out, json_type_object)) {
		json_object_put(*out);
		cli_warn("%s: the tool's result is not a JSON object", tool);
		return CLI_EXIT_ERROR;
	}
	return -1;
}

/* Writes one text field of a run result to fd; 0 or an errno value. */
static int write_field(struct json_object *res, const char *key, int fd)
{
	struct json_object *v = json_object_object_get(res, key);
	if (!v || !json_object_is_type(v, json_type_string))
		return 0;
	int len = json_object_get_string_len(v);
	if (len > 0 && cli_write_all(fd, json_object_get_string(v), (size_t)len) < 0)
		return errno;
	return 0;
}

/* The number of UTF-8 characters in a string. */
static size_t utf8_chars(const char *s)
{
	size_t n = 0;
	for (; s && *s; s++)
		n += ((unsigned char)*s & 0xC0) != 0x80;
	return n;
}

/*
 * Prints a run result ({stdout, stderr, exit_code, notice?, truncated?}, or a
 * task's "result" with "error") and returns the exit status.
 */
static int print_tool_result(struct json_object *res)
{
	signal(SIGPIPE, SIG_IGN); /* as in print_result */
	int out_errno = write_field(res, "stdout", STDOUT_FILENO);
	(void)write_field(res, "stderr", STDERR_FILENO);

	struct json_object *cuts = json_object_object_get(res, "truncated");
	static const char *const streams[] = {"stdout", "stderr"};
	for (size_t i = 0; cuts && i < 2; i++) {
		struct json_object *total = json_object_object_get(cuts, streams[i]);
		if (total)
			cli_warn("%s was cut: kept %zu of %lld characters (tool_output_max_chars)",
			         streams[i], utf8_chars(json_str(res, streams[i])),
			         (long long)json_object_get_int64(total));
	}
	const char *notice = json_str(res, "notice");
	if (notice && *notice)
		cli_warn("notice: %s", notice);

	const char *error = json_str(res, "error");
	struct json_object *code = json_object_object_get(res, "exit_code");
	int status;
	if (error) {
		cli_warn("%s", error);
		status = CLI_EXIT_ERROR;
	} else if (!code || !json_object_is_type(code, json_type_int)) {
		cli_warn("the tool's result has no exit code");
		status = CLI_EXIT_ERROR;
	} else {
		status = exit_status_of(json_object_get_int(code));
	}
	if (out_errno == EPIPE) {
		status = CLI_EXIT_SIGNAL + SIGPIPE;
	} else if (out_errno) {
		cli_warn("cannot write the program's stdout: %s", strerror(out_errno));
		status = CLI_EXIT_ERROR;
	}
	return status;
}

/*
 * A promoted execution ({"task_id", "status": "pending"}): polls
 * check_sandbox_task until it ends, and replaces *res with the final task.
 * Returns -1 to go on, or an exit status.
 */
static int wait_task(cli_tool_host *h, struct json_object **res)
{
	const char *id = json_str(*res, "task_id");
	char *args = NULL;
	struct json_object *a = json_object_new_object();
	if (a && json_object_object_add(a, "task_id", json_object_new_string(id ? id : "")) == 0)
		args = strdup(json_object_to_json_string_ext(a, JSON_C_TO_STRING_PLAIN));
	json_object_put(a);
	if (!args) {
		cli_warn("out of memory");
		return CLI_EXIT_ERROR;
	}
	int status = -1;
	for (;;) {
		const char *st = json_str(*res, "status");
		if (!st || strcmp(st, "pending") != 0)
			break;
		if (signal_caught) {
			/* The tool API cannot cancel a promoted task; say so. */
			cli_warn("task %s is left running in the sandbox", id);
			status = CLI_EXIT_SIGNAL + signal_caught;
			break;
		}
		struct timespec ts = {0, CLI_TASK_POLL_NS};
		nanosleep(&ts, NULL);
		struct json_object *next = NULL;
		status = call_tool(h, "check_sandbox_task", args, NULL, &next);
		if (status >= 0)
			break;
		json_object_put(*res);
		*res = next;
	}
	free(args);
	return status;
}

static int execute_in_session(const struct exec_request *req)
{
	cli_tool_host h;
	aks_cancel *cancel = NULL;
	aks_error *e = NULL;
	struct json_object *res = NULL;
	int status;

	if (cli_tool_host_open(&h) < 0)
		return CLI_EXIT_ERROR;
	char *args = session_args(req);
	if (!args) {
		cli_warn("out of memory");
		cli_tool_host_close(&h);
		return CLI_EXIT_ERROR;
	}
	int rc = aks_cancel_new(&cancel, &e);
	if (rc < 0) {
		cli_error err;
		cli_error_take(&err, rc, e);
		cli_error_print(&err);
		free(args);
		cli_tool_host_close(&h);
		return CLI_EXIT_ERROR;
	}
	catch_signals(cancel);
	status = call_tool(&h, req->command ? "run_command" : "run_code", args, cancel, &res);
	if (status < 0 && json_object_object_get(res, "task_id"))
		status = wait_task(&h, &res);
	restore_signals();

	if (status < 0) {
		const char *error = json_str(res, "error");
		struct json_object *final = json_object_object_get(res, "result");
		if (error) {
			cli_warn("%s", error);
			status = CLI_EXIT_ERROR;
		} else if (json_object_object_get(res, "task_id")) {
			/* A finished task: its bounded result, when it has one. */
			if (final && json_object_is_type(final, json_type_object)) {
				status = print_tool_result(final);
			} else {
				cli_warn("task %s ended with status '%s' and no result",
				         json_str(res, "task_id"), json_str(res, "status"));
				status = CLI_EXIT_ERROR;
			}
		} else {
			status = print_tool_result(res);
		}
	}
	if (signal_caught)
		status = CLI_EXIT_SIGNAL + signal_caught;
	json_object_put(res);
	aks_cancel_free(cancel);
	free(args);
	cli_tool_host_close(&h);
	return status;
}

/* ---- option parsing ----------------------------------------------------------------- */

enum {
	OPT_HELP = 'h',
	OPT_LANGUAGE = 'l',
	OPT_PROFILE = 'p',
	OPT_SESSION = 's',
	OPT_TIMEOUT = 't',
	OPT_PERSIST = 256
};

static const struct option exec_options[] = {
    {"help", no_argument, NULL, OPT_HELP},
    {"language", required_argument, NULL, OPT_LANGUAGE},
    {"profile", required_argument, NULL, OPT_PROFILE},
    {"session", required_argument, NULL, OPT_SESSION},
    {"persist", no_argument, NULL, OPT_PERSIST},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {NULL, 0, NULL, 0},
};

static int usage_error(const char *command, const char *fmt, ...) AKS_PRINTF(2, 3);
static int usage_error(const char *command, const char *fmt, ...)
{
	char text[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	cli_warn("%s: %s", command, text);
	cli_usage_hint(command);
	return CLI_EXIT_USAGE;
}

static bool parse_timeout(const char *s, double *out)
{
	char *end = NULL;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < 0)
		return false;
	*out = v;
	return true;
}

/*
 * Parses the options shared by run and code. `optstring` selects which are
 * accepted. Returns -1 to go on, or an exit status.
 */
static int parse_exec_options(int argc, char *argv[], const char *optstring,
                              struct exec_request *req)
{
	const char *command = argv[0];
	int c;

	opterr = 0; /* our own messages, with the command's name */
	optind = 0; /* full re-initialisation (GNU): main() parsed before us */
	while ((c = getopt_long(argc, argv, optstring, exec_options, NULL)) != -1) {
		switch (c) {
		case OPT_HELP:
			cli_print_help(command);
			return CLI_EXIT_OK;
		case OPT_LANGUAGE:
			req->language = optarg;
			break;
		case OPT_PROFILE:
			req->profile = optarg;
			break;
		case OPT_SESSION:
			req->session = optarg;
			req->persist = true;
			break;
		case OPT_PERSIST:
			req->persist = true;
			break;
		case OPT_TIMEOUT:
			if (!parse_timeout(optarg, &req->timeout))
				return usage_error(
				    command, "invalid timeout '%s': expected seconds >= 0", optarg);
			break;
		default:
			return cli_option_error(argc, argv, c);
		}
	}
	if (req->persist && req->timeout >= 0)
		return usage_error(command, "%s",
		                   "--timeout cannot be used with --session or --persist: "
		                   "executions in a session use the profile's policy timeout");
	return -1;
}

static int run_request(const struct exec_request *req)
{
	return req->persist ? execute_in_session(req) : execute(req);
}

int cli_cmd_run(int argc, char *argv[])
{
	struct exec_request req = {.timeout = -1};
	int rc = parse_exec_options(argc, argv, "+:hp:s:t:", &req);
	if (rc >= 0)
		return rc;
	if (optind >= argc)
		return usage_error(argv[0], "%s", "missing the command to run");

	char *command = cli_shell_join(argc - optind, argv + optind);
	if (!command) {
		cli_warn("out of memory");
		return CLI_EXIT_ERROR;
	}
	req.command = command;
	rc = run_request(&req);
	free(command);
	return rc;
}

/* Reads all of `fd` into a NUL-terminated buffer. */
static char *read_all(int fd, size_t *len, cli_error *err)
{
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	if (!buf) {
		cli_error_set(err, AKS_ENOMEM, "out of memory");
		return NULL;
	}
	for (;;) {
		if (cap - n < 2) {
			if (cap >= CLI_CODE_MAX) {
				cli_error_set(err, AKS_ELIMIT, "the code is larger than %zu bytes",
				              CLI_CODE_MAX);
				free(buf);
				return NULL;
			}
			char *bigger = realloc(buf, cap * 2);
			if (!bigger) {
				cli_error_set(err, AKS_ENOMEM, "out of memory");
				free(buf);
				return NULL;
			}
			buf = bigger;
			cap *= 2;
		}
		ssize_t r = read(fd, buf + n, cap - n - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			cli_error_set(err, AKS_EIO, "%s", strerror(errno));
			free(buf);
			return NULL;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	buf[n] = '\0';
	*len = n;
	return buf;
}

static char *read_code(const char *file, cli_error *err)
{
	bool from_stdin = !file || strcmp(file, "-") == 0;
	const char *name = from_stdin ? "standard input" : file;
	int fd = from_stdin ? STDIN_FILENO : open(file, O_RDONLY | O_CLOEXEC);
	size_t len = 0;

	if (fd < 0) {
		cli_error_set(err, AKS_EIO, "cannot open %s: %s", file, strerror(errno));
		return NULL;
	}
	char *code = read_all(fd, &len, err);
	if (!from_stdin)
		close(fd);
	if (!code) {
		char why[sizeof(err->message)];
		snprintf(why, sizeof(why), "%s", err->message);
		cli_error_set(err, err->code, "cannot read %s: %s", name, why);
		return NULL;
	}
	if (strlen(code) != len) {
		cli_error_set(err, AKS_EINVAL, "cannot run %s: the code contains a NUL byte", name);
		free(code);
		return NULL;
	}
	return code;
}

int cli_cmd_code(int argc, char *argv[])
{
	struct exec_request req = {.timeout = -1, .language = "python"};
	int rc = parse_exec_options(argc, argv, "+:hl:p:s:t:", &req);
	if (rc >= 0)
		return rc;
	if (argc - optind > 1)
		return usage_error(argv[0], "unexpected argument '%s'", argv[optind + 1]);

	cli_error err = {0};
	char *code = read_code(optind < argc ? argv[optind] : NULL, &err);
	if (!code) {
		cli_error_print(&err);
		return CLI_EXIT_ERROR;
	}
	req.code = code;
	rc = run_request(&req);
	free(code);
	return rc;
}
