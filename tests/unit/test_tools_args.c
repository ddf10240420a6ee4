/* Unit tests: what the tools refuse in their arguments before anything runs, through
 * aks_runtime_call_tool on a local_subprocess profile — NUL characters in strings handed on
 * as C strings (while a file's content keeps every byte), and identifiers longer than their
 * bound; and what destroy_sandbox_session answers for a session it did not destroy. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <aksandbox/aksandbox.h>

static const char *const no_env[] = {NULL};

typedef struct fixture {
	char dir[64];
	aks_settings *settings;
	aks_runtime *rt;
} fixture;

static int setup(void **state)
{
	fixture *fx = calloc(1, sizeof(*fx));
	if (!fx)
		return -1;
	strcpy(fx->dir, "/tmp/aks-tool-args-XXXXXX");
	if (!mkdtemp(fx->dir))
		return -1;
	char cfg[128], state_dir[128];
	snprintf(cfg, sizeof(cfg), "%s/config.yaml", fx->dir);
	snprintf(state_dir, sizeof(state_dir), "%s/state", fx->dir);
	FILE *f = fopen(cfg, "w");
	if (!f)
		return -1;
	fprintf(f,
	        "sandbox:\n"
	        "  enabled: true\n"
	        "  broker: {flavor: embedded}\n"
	        "  profiles:\n"
	        "    default: {type: local_subprocess, local_subprocess: {workdir: %s/boxes}}\n",
	        fx->dir);
	if (fclose(f) != 0)
		return -1;
	aks_error *err = NULL;
	if (aks_settings_load(cfg, no_env, &fx->settings, &err) < 0 ||
	    aks_runtime_open(fx->settings, state_dir, &fx->rt, &err) < 0) {
		fprintf(stderr, "setup: %s\n", aks_error_message(err));
		aks_error_free(err);
		return -1;
	}
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	fixture *fx = *state;
	aks_runtime_close(fx->rt);
	aks_settings_free(fx->settings);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx->dir);
	int rc = system(cmd);
	free(fx);
	return rc == 0 ? 0 : -1;
}

/* The tool's JSON (never NULL). */
static char *call(fixture *fx, const char *tool, const char *args)
{
	aks_tool_context ctx;
	aks_tool_context_init(&ctx, "conv-a", NULL);
	char *out = NULL;
	aks_error *err = NULL;
	if (aks_runtime_call_tool(fx->rt, tool, args, &ctx, &out, &err) != AKS_OK)
		fail_msg("%s: %s", tool, aks_error_message(err));
	assert_non_null(out);
	return out;
}

static void expect(fixture *fx, const char *tool, const char *args, const char *want)
{
	char *got = call(fx, tool, args);
	assert_string_equal(got, want);
	free(got);
}

/* The number of entries in the sandboxes' directory: 0 while nothing was ever run. */
static int sandboxes(fixture *fx)
{
	char cmd[200];
	snprintf(
	    cmd, sizeof(cmd),
	    "n=$(find '%s/boxes' -mindepth 1 -maxdepth 1 -type d 2>/dev/null | wc -l); exit $n",
	    fx->dir);
	int rc = system(cmd);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void test_nul_refused(void **state)
{
	fixture *fx = *state;
	/* Cut at the NUL, this ran `echo `: now nothing runs. */
	expect(fx, "run_command", "{\"command\": \"echo \\u0000; id\"}",
	       "{\"error\": \"run_command: argument 'command' must not contain NUL characters "
	       "(U+0000)\", \"sandbox_session_id\": \"\"}");
	expect(fx, "run_code", "{\"code\": \"print(1)\\u0000import os\"}",
	       "{\"error\": \"run_code: argument 'code' must not contain NUL characters "
	       "(U+0000)\", \"sandbox_session_id\": \"\"}");
	expect(fx, "run_code", "{\"code\": \"1\", \"language\": \"python\\u0000x\"}",
	       "{\"error\": \"run_code: argument 'language' must not contain NUL characters "
	       "(U+0000)\", \"sandbox_session_id\": \"\"}");
	/* Cut, this wrote the file `a`. */
	expect(fx, "write_sandbox_file", "{\"path\": \"a\\u0000b\", \"content\": \"x\"}",
	       "{\"error\": \"write_sandbox_file: argument 'path' must not contain NUL "
	       "characters (U+0000)\", \"sandbox_session_id\": \"\"}");
	expect(fx, "read_sandbox_file", "{\"path\": \"/etc/passwd\\u0000.txt\"}",
	       "{\"error\": \"read_sandbox_file: argument 'path' must not contain NUL characters "
	       "(U+0000)\", \"sandbox_session_id\": \"\"}");
	expect(fx, "run_command",
	       "{\"command\": \"true\", \"sandbox_session_id\": \"default:default\\u0000x\"}",
	       "{\"error\": \"run_command: argument 'sandbox_session_id' must not contain NUL "
	       "characters (U+0000)\", \"sandbox_session_id\": \"default:default\"}");
	expect(fx, "run_command", "{\"command\": \"true\", \"profile\": \"default\\u0000x\"}",
	       "{\"error\": \"run_command: argument 'profile' must not contain NUL characters "
	       "(U+0000)\", \"sandbox_session_id\": \"\"}");
	expect(fx, "new_sandbox_session", "{\"name\": \"uv\\u0000project\"}",
	       "{\"error\": \"new_sandbox_session: argument 'name' must not contain NUL "
	       "characters (U+0000)\", \"sandbox_session_id\": \"\"}");
	expect(fx, "check_sandbox_task", "{\"task_id\": \"t\\u0000\"}",
	       "{\"error\": \"check_sandbox_task: argument 'task_id' must not contain NUL "
	       "characters (U+0000)\", \"sandbox_session_id\": \"\"}");
	expect(fx, "destroy_sandbox_session", "{\"sandbox_session_id\": \"\\u0000\"}",
	       "{\"error\": \"destroy_sandbox_session: argument 'sandbox_session_id' must not "
	       "contain NUL characters (U+0000)\", \"sandbox_session_id\": \"\"}");
	/* None of it made a session or a sandbox. */
	expect(fx, "list_sandbox_sessions", NULL, "{\"sessions\": []}");
	assert_int_equal(sandboxes(fx), 0);
}

/* A file's content is carried with its length: NUL bytes are written as they are. */
static void test_nul_in_content_kept(void **state)
{
	fixture *fx = *state;
	expect(fx, "write_sandbox_file", "{\"path\": \"x.bin\", \"content\": \"a\\u0000b\"}",
	       "{\"path\": \"x.bin\", \"written\": true, \"sandbox_session_id\": "
	       "\"default:default\"}");
	expect(fx, "run_command", "{\"command\": \"od -An -tx1 x.bin | tr -d ' '\"}",
	       "{\"stdout\": \"610062\\n\", \"stderr\": \"\", \"exit_code\": 0, "
	       "\"sandbox_session_id\": \"default:default\"}");
	expect(fx, "read_sandbox_file", "{\"path\": \"x.bin\"}",
	       "{\"path\": \"x.bin\", \"content\": \"a\\u0000b\", \"sandbox_session_id\": "
	       "\"default:default\"}");
}

/* A JSON object {"<key>": "xxx...x"} with a value of n bytes, plus `more` members. */
static char *long_arg(const char *key, size_t n, const char *more)
{
	char *json = malloc(n + strlen(key) + strlen(more) + 16);
	assert_non_null(json);
	size_t at = (size_t)sprintf(json, "{\"%s\": \"", key);
	memset(json + at, 'x', n);
	sprintf(json + at + n, "\"%s}", more);
	return json;
}

/* The error a too long argument gets, or (want NULL) that it gets none of that kind. */
static void expect_bound(fixture *fx, const char *tool, const char *key, size_t n, const char *more,
                         const char *want)
{
	char *args = long_arg(key, n, more);
	char *got = call(fx, tool, args);
	if (want)
		assert_non_null(strstr(got, want));
	else if (strstr(got, "bytes long"))
		fail_msg("%s %s of %zu bytes refused: %s", tool, key, n, got);
	free(got);
	free(args);
}

/* Identifiers have a documented bound: 256 bytes (a session or task id is a state store key),
 * 128 for a profile name (as in the config). */
static void test_identifiers_bounded(void **state)
{
	fixture *fx = *state;
	expect_bound(fx, "new_sandbox_session", "name", 100 * 1024, "",
	             "{\"error\": \"new_sandbox_session: argument 'name' is 102400 bytes long; the "
	             "limit is 256 bytes\", \"sandbox_session_id\": \"\"}");
	expect_bound(fx, "new_sandbox_session", "name", 257, "",
	             "argument 'name' is 257 bytes long; the limit is 256 bytes");
	expect_bound(fx, "new_sandbox_session", "name", 256, "", NULL);
	expect_bound(fx, "run_command", "sandbox_session_id", 257, ", \"command\": \"true\"",
	             "run_command: argument 'sandbox_session_id' is 257 bytes long; the limit is "
	             "256 bytes");
	expect_bound(fx, "destroy_sandbox_session", "sandbox_session_id", 4096, "",
	             "argument 'sandbox_session_id' is 4096 bytes long; the limit is 256 bytes");
	expect_bound(fx, "check_sandbox_task", "task_id", 257, "",
	             "check_sandbox_task: argument 'task_id' is 257 bytes long; the limit is 256 "
	             "bytes");
	expect_bound(fx, "run_code", "language", 257, ", \"code\": \"1\"",
	             "run_code: argument 'language' is 257 bytes long; the limit is 256 bytes");
	expect_bound(fx, "run_command", "profile", 129, ", \"command\": \"true\"",
	             "run_command: argument 'profile' is 129 bytes long; the limit is 128 bytes");
	expect_bound(fx, "run_command", "profile", 128, ", \"command\": \"true\"", NULL);
	/* Only the session of the 256-byte name was made. */
	char *list = call(fx, "list_sandbox_sessions", NULL);
	assert_non_null(strstr(list, "\"name\": \"xxxx"));
	assert_null(strstr(list, "}, {"));
	free(list);
	/* Code, commands and paths have no such bound. */
	expect_bound(fx, "run_command", "command", 100 * 1024, "", NULL);
}

/* destroy_sandbox_session says whether it destroyed anything: an id that never existed
 * keeps the result's shape (no error: the call is idempotent) with destroyed false. */
static void test_destroy_unknown_session(void **state)
{
	fixture *fx = *state;
	expect(fx, "destroy_sandbox_session", "{\"sandbox_session_id\": \"never-made\"}",
	       "{\"sandbox_session_id\": \"never-made\", \"destroyed\": false}");
	/* The default session before its first use has nothing to destroy either... */
	expect(fx, "destroy_sandbox_session", "{\"sandbox_session_id\": \"default:default\"}",
	       "{\"sandbox_session_id\": \"default:default\", \"destroyed\": false}");
	/* ... and once used, it has. */
	free(call(fx, "run_command", "{\"command\": \"true\"}"));
	assert_int_equal(sandboxes(fx), 1);
	expect(fx, "destroy_sandbox_session", "{\"sandbox_session_id\": \"default:default\"}",
	       "{\"sandbox_session_id\": \"default:default\", \"destroyed\": true}");
	assert_int_equal(sandboxes(fx), 0);
	/* Another conversation's session is not this one's to destroy. */
	char *made = call(fx, "new_sandbox_session", "{}");
	char id[33] = {0};
	assert_int_equal(sscanf(made, "{\"sandbox_session_id\": \"%32[0-9a-f]\"", id), 1);
	free(made);
	aks_tool_context ctx;
	aks_tool_context_init(&ctx, "conv-b", NULL);
	char args[96], want[160], *out = NULL;
	snprintf(args, sizeof(args), "{\"sandbox_session_id\": \"%s\"}", id);
	assert_int_equal(
	    aks_runtime_call_tool(fx->rt, "destroy_sandbox_session", args, &ctx, &out, NULL),
	    AKS_OK);
	snprintf(want, sizeof(want), "{\"sandbox_session_id\": \"%s\", \"destroyed\": false}", id);
	assert_string_equal(out, want);
	free(out);
	snprintf(want, sizeof(want), "{\"sandbox_session_id\": \"%s\", \"destroyed\": true}", id);
	expect(fx, "destroy_sandbox_session", args, want);
}

/* An absolute path is refused by both file tools, before any sandbox is made, and nothing is
 * written under the workspace (the original wrote "/tmp/x" to "<workspace>/tmp/x", where a
 * command reading /tmp/x does not look). A relative path still works, and a command sees the
 * file at it. */
static void test_absolute_path_refused(void **state)
{
	fixture *fx = *state;
	/* An absolute path of this test's own (a shared one such as /tmp/x may exist already). */
	char abs[96], why[512], want[768], args[256];
	snprintf(abs, sizeof(abs), "%s/abs/x", fx->dir);
	snprintf(why, sizeof(why),
	         "path '%s' is absolute; the file tools reach only the sandbox's "
	         "workspace and take paths relative to it (the working directory of "
	         "run_command and run_code): use a relative path, and run_command to move "
	         "a file elsewhere",
	         abs);
	snprintf(want, sizeof(want),
	         "{\"error\": \"write_sandbox_file: %s\", "
	         "\"sandbox_session_id\": \"\"}",
	         why);
	snprintf(args, sizeof(args), "{\"path\": \"%s\", \"content\": \"x\"}", abs);
	expect(fx, "write_sandbox_file", args, want);
	snprintf(want, sizeof(want),
	         "{\"error\": \"read_sandbox_file: %s\", "
	         "\"sandbox_session_id\": \"default:default\"}",
	         why);
	snprintf(args, sizeof(args),
	         "{\"path\": \"%s\", \"sandbox_session_id\": \"default:default\"}", abs);
	expect(fx, "read_sandbox_file", args, want);
	assert_int_equal(sandboxes(fx), 0);
	expect(fx, "write_sandbox_file", "{\"path\": \"abs/x\", \"content\": \"rel\"}",
	       "{\"path\": \"abs/x\", \"written\": true, \"sandbox_session_id\": "
	       "\"default:default\"}");
	snprintf(args, sizeof(args), "{\"command\": \"cat abs/x; test -e %s || echo ' none'\"}",
	         abs);
	char *got = call(fx, "run_command", args);
	assert_non_null(strstr(got, "\"stdout\": \"rel none\\n\""));
	free(got);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_nul_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_nul_in_content_kept, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_identifiers_bounded, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_destroy_unknown_session, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_absolute_path_refused, setup, teardown),
	};
	return cmocka_run_group_tests_name("tools_args", tests, NULL, NULL);
}
