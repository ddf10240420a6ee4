/* Unit tests: the queue flavor's client side (reference §5.5, with §11 items 1, 2, 6, 21 and
 * 22 fixed) on the single-process topology (queue and response store both in_memory, the
 * worker on threads of this process), through the public tool API and the manager: a
 * synchronous result keeps its sandbox (also for a second runtime on the same state
 * directory), promotion and check_sandbox_task, tasks not leaking across conversations, the
 * ceiling and size guards, typed errors across the wire (compared with the thread flavor),
 * fire-and-forget destroy, the idle reset on touch, the workers' idle sweep, self-heal (its
 * retry happening once, in the worker and, under the thread flavor, in the manager), per_call,
 * binary file round trips, and failed operations that still record their sandbox.
 *
 * Effects are observed through the fake provider's create_log and destroy_log (one sandbox id
 * a line), local_subprocess workspace directories, and the state store's session records. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "core/plugin/result.h"
#include "core/session/manager.h"

#define WAIT_MS 20000 /* the longest any test waits for an effect (valgrind is slow) */

static const char *const no_env[] = {NULL};

typedef struct fixture {
	char dir[64];
	char cfg[128];
	char state[128];
	aks_settings *settings;
	aks_runtime *rt;
} fixture;

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/*
 * The configuration: `flavor` (queue or thread, same profiles), how long executions wait
 * before they become tasks, and the workers' sweep interval. The logs of the fake live in the
 * fixture's directory: creates.log / destroys.log, and events.log (both, in order) for
 * `ordered`.
 */
static int write_config(fixture *fx, const char *flavor, double wait, double sweep)
{
	FILE *f = fopen(fx->cfg, "w");
	if (!f)
		return -1;
	const char *d = fx->dir;
	fprintf(
	    f,
	    "sandbox:\n"
	    "  enabled: true\n"
	    "  default_profile: default\n"
	    "  broker:\n"
	    "    flavor: %s\n"
	    "    wait_timeout: %g\n"
	    "    wait_poll_interval: 0.02\n"
	    "    inline_payload_max_bytes: 2097152\n"
	    "    worker_timeout_ceiling: 200\n"
	    "    sweep_interval: %g\n"
	    "    queue: {type: in_memory}\n"
	    "    response_store: {type: in_memory}\n"
	    "  profiles:\n"
	    "    default: {type: fake, fake: {create_log: %s/creates.log,\n"
	    "              destroy_log: %s/destroys.log}}\n"
	    "    quick: {type: fake, idle_timeout: 1, fake: {create_log: %s/creates.log,\n"
	    "            destroy_log: %s/destroys.log}}\n"
	    "    ordered: {type: fake, idle_timeout: 1, fake: {create_log: %s/events.log,\n"
	    "              destroy_log: %s/events.log}}\n"
	    "    eph: {type: fake, scope: per_call, fake: {create_log: %s/creates.log,\n"
	    "          destroy_log: %s/destroys.log}}\n"
	    "    long: {type: fake, policy: {timeout: 300}, fake: {create_log: %s/creates.log}}\n"
	    "    lazy: {type: fake, fake: {create_delay: 1, create_log: %s/creates.log}}\n"
	    "    local: {type: local_subprocess, local_subprocess: {workdir: %s/boxes}}\n"
	    "    slow: {type: local_subprocess, policy: {timeout: 0.5},\n"
	    "           local_subprocess: {workdir: %s/boxes}}\n"
	    "    refusing: {type: fake, idle_timeout: 1, fake: {destroy_log: %s/destroys.log,\n"
	    "               destroy_refused_while: %s/refuse}}\n",
	    flavor, wait, sweep, d, d, d, d, d, d, d, d, d, d, d, d, d, d);
	return fclose(f);
}

static int open_runtime(fixture *fx, aks_settings **settings, aks_runtime **rt)
{
	aks_error *err = NULL;
	if (aks_settings_load(fx->cfg, no_env, settings, &err) < 0 ||
	    aks_runtime_open(*settings, fx->state, rt, &err) < 0) {
		fprintf(stderr, "setup: %s\n", aks_error_message(err));
		aks_error_free(err);
		return -1;
	}
	return 0;
}

static fixture *fixture_new(const char *flavor, double wait, double sweep)
{
	fixture *fx = calloc(1, sizeof(*fx));
	if (!fx)
		return NULL;
	strcpy(fx->dir, "/tmp/aks-queue-XXXXXX");
	if (!mkdtemp(fx->dir)) {
		free(fx);
		return NULL;
	}
	snprintf(fx->cfg, sizeof(fx->cfg), "%s/config.yaml", fx->dir);
	snprintf(fx->state, sizeof(fx->state), "%s/state", fx->dir);
	if (write_config(fx, flavor, wait, sweep) < 0 ||
	    open_runtime(fx, &fx->settings, &fx->rt) < 0) {
		free(fx);
		return NULL;
	}
	return fx;
}

static int fixture_free(fixture *fx)
{
	aks_runtime_close(fx->rt);
	aks_settings_free(fx->settings);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx->dir);
	int rc = system(cmd);
	free(fx);
	return rc == 0 ? 0 : -1;
}

/* Executions wait up to 20 s (plenty, even under valgrind): results are synchronous. */
static int setup(void **state)
{
	return (*state = fixture_new("queue", 20, 300)) ? 0 : -1;
}

/* Executions become tasks after 0.2 s. */
static int setup_promote(void **state)
{
	return (*state = fixture_new("queue", 0.2, 300)) ? 0 : -1;
}

/* The workers sweep idle sandboxes every 0.2 s. */
static int setup_sweep(void **state)
{
	return (*state = fixture_new("queue", 20, 0.2)) ? 0 : -1;
}

static int teardown(void **state)
{
	return fixture_free(*state);
}

/* ---- helpers ---- */

/* Calls a tool in `conv` and returns its JSON (never NULL). */
static char *call_in(aks_runtime *rt, const char *conv, const char *tool, const char *args)
{
	aks_tool_context ctx;
	aks_tool_context_init(&ctx, conv, NULL);
	char *out = NULL;
	aks_error *err = NULL;
	int rc = aks_runtime_call_tool(rt, tool, args, &ctx, &out, &err);
	if (rc != AKS_OK)
		fail_msg("%s: %s", tool, aks_error_message(err));
	assert_non_null(out);
	return out;
}

static char *call(fixture *fx, const char *tool, const char *args)
{
	return call_in(fx->rt, "conv-a", tool, args);
}

static void expect(fixture *fx, const char *tool, const char *args, const char *want)
{
	char *got = call(fx, tool, args);
	assert_string_equal(got, want);
	free(got);
}

/* A string member of a JSON text (copied), or NULL; `key` may be "a.b" for a nested one. */
static char *member(const char *json, const char *key)
{
	struct json_object *o = json_tokener_parse(json), *v = o;
	char *s = NULL;
	char path[64];
	snprintf(path, sizeof(path), "%s", key);
	for (char *part = strtok(path, "."); part && v; part = strtok(NULL, "."))
		if (!json_object_object_get_ex(v, part, &v))
			v = NULL;
	if (v && json_object_is_type(v, json_type_string))
		s = strdup(json_object_get_string(v));
	json_object_put(o);
	return s;
}

/* stdout up to its first newline (copied), asserting there is one. */
static char *first_line_of_stdout(const char *json)
{
	char *s = member(json, "stdout");
	if (!s)
		fail_msg("no stdout in %s", json);
	s[strcspn(s, "\n")] = '\0';
	return s;
}

/*
 * An execution's result, waiting for it when the call was promoted: the call's JSON when it
 * came back at once, else the "result" object of its task once check_sandbox_task says it
 * is done (stdout/stderr/exit_code/error/notice, like a result).
 */
static char *run_sync(aks_runtime *rt, const char *conv, const char *tool, const char *args)
{
	char *got = call_in(rt, conv, tool, args);
	char *task = member(got, "task_id");
	if (!task)
		return got;
	free(got);
	char targs[128];
	snprintf(targs, sizeof(targs), "{\"task_id\": \"%s\"}", task);
	free(task);
	int64_t end = aks__now_ms() + WAIT_MS;
	for (;;) {
		char *t = call_in(rt, conv, "check_sandbox_task", targs);
		char *status = member(t, "status");
		assert_non_null(status);
		bool pending = strcmp(status, "pending") == 0;
		free(status);
		if (!pending) {
			struct json_object *o = json_tokener_parse(t), *r = NULL;
			assert_true(json_object_object_get_ex(o, "result", &r));
			char *out =
			    strdup(json_object_to_json_string_ext(r, JSON_C_TO_STRING_SPACED));
			json_object_put(o);
			free(t);
			return out;
		}
		free(t);
		if (aks__now_ms() > end)
			fail_msg("task of %s still pending after %d ms", args, WAIT_MS);
		sleep_ms(50);
	}
}

/* The lines of a file (NULL-terminated, each malloc'd); an absent file has none. */
static char **lines_of(const char *path)
{
	size_t n = 0;
	char **v = calloc(1, sizeof(*v));
	FILE *f = fopen(path, "r");
	char buf[512];
	while (f && fgets(buf, sizeof(buf), f)) {
		buf[strcspn(buf, "\n")] = '\0';
		v = realloc(v, (n + 2) * sizeof(*v));
		v[n++] = strdup(buf);
		v[n] = NULL;
	}
	if (f)
		fclose(f);
	return v;
}

static void lines_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static size_t lines_count(char **v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	return n;
}

static char *log_path(fixture *fx, const char *name)
{
	static char path[3][160];
	static int turn;
	char *p = path[turn++ % 3];
	snprintf(p, sizeof(path[0]), "%s/%s", fx->dir, name);
	return p;
}

/* How many lines of the log `name` are `id`. */
static size_t log_has(fixture *fx, const char *name, const char *id)
{
	char **v = lines_of(log_path(fx, name));
	size_t k = 0;
	for (size_t i = 0; v[i]; i++)
		k += strcmp(v[i], id) == 0;
	lines_free(v);
	return k;
}

static size_t log_lines(fixture *fx, const char *name)
{
	char **v = lines_of(log_path(fx, name));
	size_t n = lines_count(v);
	lines_free(v);
	return n;
}

/* Waits until the log `name` has `id` (destroys are fire-and-forget); true if it came. */
static bool wait_log_has(fixture *fx, const char *name, const char *id, int ms)
{
	int64_t end = aks__now_ms() + ms;
	while (!log_has(fx, name, id)) {
		if (aks__now_ms() > end)
			return false;
		sleep_ms(20);
	}
	return true;
}

static aks_state_store *open_store(fixture *fx)
{
	aks_state_store *st = NULL;
	assert_int_equal(aks__store_open(fx->state, &st, NULL), AKS_OK);
	return st;
}

/* The sandbox id the state store records for a session (malloc'd), or NULL. */
static char *recorded_sandbox(fixture *fx, const char *ns, const char *id)
{
	aks_state_store *st = open_store(fx);
	aks_session_rec s;
	char *sid = NULL;
	if (aks__sessions_find_in(st, ns, id, &s, NULL) == AKS_OK) {
		sid = s.sandbox_id ? strdup(s.sandbox_id) : NULL;
		aks__session_clear(&s);
	}
	aks__store_close(st);
	return sid;
}

/* Makes a stored session look idle for `secs` more seconds. */
static void age_session(fixture *fx, const char *id, double secs)
{
	aks_state_store *st = open_store(fx);
	aks_session_rec s;
	assert_int_equal(aks__sessions_find_in(st, "conv-a", id, &s, NULL), AKS_OK);
	s.last_used_at -= secs;
	assert_int_equal(aks__sessions_save(st, "conv-a", &s, NULL), AKS_OK);
	aks__session_clear(&s);
	aks__store_close(st);
}

static bool exists(const char *path)
{
	struct stat sb;
	return stat(path, &sb) == 0;
}

/* How many local_subprocess workspaces exist. */
static size_t boxes(fixture *fx)
{
	char path[160];
	snprintf(path, sizeof(path), "%s/boxes", fx->dir);
	DIR *d = opendir(path);
	size_t n = 0;
	/* Directories only: each one's "<dir>.labels" beside it is not another workspace. */
	for (struct dirent *e; d && (e = readdir(d));)
		n += e->d_name[0] != '.' && e->d_type == DT_DIR;
	if (d)
		closedir(d);
	return n;
}

/* ---- 1. a synchronous result keeps its sandbox (§11 item 1) ---- */

static void test_sync_keeps_sandbox(void **state)
{
	fixture *fx = *state;
	expect(fx, "write_sandbox_file", "{\"path\": \"a.txt\", \"content\": \"one\"}",
	       "{\"path\": \"a.txt\", \"written\": true, \"sandbox_session_id\": "
	       "\"default:default\"}");
	expect(fx, "run_command", "{\"command\": \"echo x\"}",
	       "{\"stdout\": \"echo x\", \"stderr\": \"\", \"exit_code\": 0, "
	       "\"sandbox_session_id\": \"default:default\"}");
	expect(fx, "read_sandbox_file", "{\"path\": \"a.txt\"}",
	       "{\"path\": \"a.txt\", \"content\": \"one\", \"sandbox_session_id\": "
	       "\"default:default\"}");
	/* one sandbox made for the three calls, and it is the one the session records */
	char **created = lines_of(log_path(fx, "creates.log"));
	assert_int_equal(lines_count(created), 1);
	char *sid = recorded_sandbox(fx, "conv-a", "default:default");
	assert_non_null(sid);
	assert_string_equal(sid, created[0]);
	assert_int_equal(log_lines(fx, "destroys.log"), 0);
	free(sid);
	lines_free(created);
	char *list = call(fx, "list_sandbox_sessions", NULL);
	const char *want = "{\"sessions\": [{\"sandbox_session_id\": \"default:default\", "
	                   "\"name\": null, \"profile\": \"default\", \"status\": \"active\", "
	                   "\"last_used_at\": ";
	if (strncmp(list, want, strlen(want)) != 0)
		fail_msg("list: %s", list);
	assert_null(strstr(list + strlen(want), "sandbox_session_id")); /* just one */
	free(list);

	/* the same with a real workspace: a file written by one call is read by the next */
	free(call(fx, "run_command",
	          "{\"command\": \"echo kept > f; pwd\", \"profile\": \"local\"}"));
	char *got =
	    call(fx, "run_command", "{\"command\": \"cat f; pwd\", \"profile\": \"local\"}");
	char *out = member(got, "stdout");
	assert_non_null(out);
	assert_memory_equal(out, "kept\n", 5);
	free(out);
	free(got);
	assert_int_equal(boxes(fx), 1);
}

/* ---- 2. another runtime on the same state directory ("another process") ---- */

static void test_second_runtime_reuses(void **state)
{
	fixture *fx = *state;
	char *got = call(fx, "run_command",
	                 "{\"command\": \"echo from-one > n.txt; pwd\", \"profile\": \"local\"}");
	char *dir1 = first_line_of_stdout(got);
	free(got);
	assert_true(exists(dir1));
	aks_settings *s2 = NULL;
	aks_runtime *rt2 = NULL;
	assert_int_equal(open_runtime(fx, &s2, &rt2), 0);
	got =
	    call_in(rt2, "conv-a", "run_command", "{\"command\": \"pwd\", \"profile\": \"local\"}");
	char *dir2 = first_line_of_stdout(got);
	free(got);
	assert_string_equal(dir1, dir2);
	got = call_in(rt2, "conv-a", "read_sandbox_file",
	              "{\"path\": \"n.txt\", \"profile\": \"local\"}");
	assert_string_equal(got, "{\"path\": \"n.txt\", \"content\": \"from-one\\n\", "
	                         "\"sandbox_session_id\": \"default:local\"}");
	free(got);
	/* and back: what the second runtime writes, the first reads */
	free(call_in(rt2, "conv-a", "write_sandbox_file",
	             "{\"path\": \"m.txt\", \"content\": \"from-two\", \"profile\": \"local\"}"));
	aks_runtime_close(rt2);
	aks_settings_free(s2);
	got = call(fx, "read_sandbox_file", "{\"path\": \"m.txt\", \"profile\": \"local\"}");
	assert_non_null(strstr(got, "\"content\": \"from-two\""));
	free(got);
	assert_int_equal(boxes(fx), 1);
	free(dir1);
	free(dir2);
}

/* ---- 3. promotion and check_sandbox_task ---- */

static char *wait_task_done(fixture *fx, const char *conv, const char *task)
{
	char targs[128];
	snprintf(targs, sizeof(targs), "{\"task_id\": \"%s\"}", task);
	int64_t end = aks__now_ms() + WAIT_MS;
	for (;;) {
		char *t = call_in(fx->rt, conv, "check_sandbox_task", targs);
		char *status = member(t, "status");
		assert_non_null(status);
		bool pending = strcmp(status, "pending") == 0;
		free(status);
		if (!pending)
			return t;
		free(t);
		if (aks__now_ms() > end)
			fail_msg("task %s still pending after %d ms", task, WAIT_MS);
		sleep_ms(50);
	}
}

/* `got` (taken) is a pending task's answer, and the task then succeeds. */
static void expect_task_succeeds(fixture *fx, const char *conv, char *got)
{
	char *task = member(got, "task_id");
	if (!task)
		fail_msg("not promoted: %s", got);
	free(got);
	got = wait_task_done(fx, conv, task);
	assert_non_null(strstr(got, "\"status\": \"succeeded\""));
	free(got);
	free(task);
}

static void test_promotion(void **state)
{
	fixture *fx = *state;
	char *got = call(fx, "run_command",
	                 "{\"command\": \"sleep 1; echo done; pwd\", \"profile\": \"local\"}");
	char *task = member(got, "task_id");
	if (!task)
		fail_msg("not promoted: %s", got);
	char want[256];
	snprintf(want, sizeof(want),
	         "{\"task_id\": \"%s\", \"status\": \"pending\", \"sandbox_session_id\": "
	         "\"default:local\"}",
	         task);
	assert_string_equal(got, want);
	free(got);
	char targs[128];
	snprintf(targs, sizeof(targs), "{\"task_id\": \"%s\"}", task);
	got = call(fx, "check_sandbox_task", targs);
	assert_string_equal(got, want); /* the command sleeps for a second yet */
	free(got);

	/* A follow-up on the same session while the task runs: it waits its turn (one in flight
	 * per session) and finds the sandbox the task made through the workers' inventory, as
	 * the agent has not seen that task's completion. */
	char *follow = run_sync(fx->rt, "conv-a", "run_command",
	                        "{\"command\": \"pwd\", \"profile\": \"local\"}");
	got = wait_task_done(fx, "conv-a", task);
	assert_non_null(strstr(got, "\"status\": \"succeeded\""));
	char *out = member(got, "result.stdout");
	assert_non_null(out);
	assert_memory_equal(out, "done\n", 5);
	char *dir = strdup(out + 5);
	dir[strcspn(dir, "\n")] = '\0';
	assert_true(exists(dir));
	char *fout = member(follow, "stdout");
	assert_non_null(fout);
	fout[strcspn(fout, "\n")] = '\0';
	assert_string_equal(fout, dir); /* the SAME sandbox */
	assert_int_equal(boxes(fx), 1);
	/* and the session records it */
	char *sid = recorded_sandbox(fx, "conv-a", "default:local");
	assert_non_null(sid);
	assert_string_equal(sid, dir);
	free(sid);
	free(fout);
	free(follow);
	free(dir);
	free(out);
	free(got);
	free(task);
}

/* The first operation of a session is promoted and checked before any other call: the check
 * records the sandbox the task made on the session (the task's completion is the only news
 * of it), and the next call uses it. */
/* The caller's own wait (aks_tool_context.wait_timeout) on the queue flavor, whose
 * configured wait is 0.2 s here: the whole run gives the outcome, not a task; a longer wait
 * too; 0 is a task at once. */
static void test_caller_wait(void **state)
{
	fixture *fx = *state;
	const char *slow = "{\"command\": \"sleep 1; echo whole\", \"profile\": \"local\"}";
	double waits[] = {AKS_WAIT_UNTIL_DONE, 30};
	for (size_t i = 0; i < 2; i++) {
		aks_tool_context ctx;
		aks_tool_context_init(&ctx, "conv-wait", NULL);
		ctx.wait_timeout = waits[i];
		char *got = NULL;
		aks_error *err = NULL;
		assert_int_equal(
		    aks_runtime_call_tool(fx->rt, "run_command", slow, &ctx, &got, &err), AKS_OK);
		char *out = member(got, "stdout");
		if (!out)
			fail_msg("wait %g: no outcome: %s", waits[i], got);
		assert_string_equal(out, "whole\n");
		free(out);
		free(got);
	}
	aks_tool_context ctx;
	aks_tool_context_init(&ctx, "conv-wait", NULL);
	ctx.wait_timeout = 0;
	char *got = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_runtime_call_tool(fx->rt, "run_command",
	                                       "{\"command\": \"echo soon\", \"profile\": "
	                                       "\"local\"}",
	                                       &ctx, &got, &err),
	                 AKS_OK);
	expect_task_succeeds(fx, "conv-wait", got);
}

static void test_promoted_first_call_recorded(void **state)
{
	fixture *fx = *state;
	char *got =
	    call(fx, "run_command",
	         "{\"command\": \"sleep 1; echo x > marker; pwd\", \"profile\": \"local\"}");
	char *task = member(got, "task_id");
	if (!task)
		fail_msg("not promoted: %s", got);
	free(got);
	got = wait_task_done(fx, "conv-a", task);
	char *status = member(got, "status");
	assert_string_equal(status, "succeeded");
	char *dir = member(got, "result.stdout");
	assert_non_null(dir);
	dir[strcspn(dir, "\n")] = '\0';
	assert_true(exists(dir));
	/* after the check, the session record has the sandbox */
	char *sid = recorded_sandbox(fx, "conv-a", "default:local");
	if (!sid || strcmp(sid, dir) != 0)
		fail_msg("after check_sandbox_task the session 'default:local' records sandbox %s, "
		         "not the task's %s",
		         sid ? sid : "(no session or no sandbox)", dir);
	char *list = call(fx, "list_sandbox_sessions", NULL);
	assert_non_null(strstr(list, "\"sandbox_session_id\": \"default:local\""));
	free(list);
	char *next = run_sync(fx->rt, "conv-a", "run_command",
	                      "{\"command\": \"cat marker; pwd\", \"profile\": \"local\"}");
	char *nout = member(next, "stdout");
	assert_non_null(nout);
	char want[256];
	snprintf(want, sizeof(want), "x\n%s\n", dir);
	assert_string_equal(nout, want);
	assert_int_equal(boxes(fx), 1);
	free(nout);
	free(next);
	free(sid);
	free(dir);
	free(status);
	free(got);
	free(task);
}

/* §11 item 2: file operations are never promoted. With executions promoted after 0.2 s and a
 * backend that takes a second to create a sandbox, run_code becomes a task, but
 * write_sandbox_file and read_sandbox_file wait and tell what really happened. */
static void test_file_ops_not_promoted(void **state)
{
	fixture *fx = *state;
	expect(fx, "write_sandbox_file",
	       "{\"path\": \"f\", \"content\": \"landed\", \"profile\": \"lazy\"}",
	       "{\"path\": \"f\", \"written\": true, \"sandbox_session_id\": \"default:lazy\"}");
	assert_int_equal(log_lines(fx, "creates.log"), 1); /* it really was slow to create */
	expect(fx, "read_sandbox_file", "{\"path\": \"f\", \"profile\": \"lazy\"}",
	       "{\"path\": \"f\", \"content\": \"landed\", \"sandbox_session_id\": "
	       "\"default:lazy\"}");
	/* the same wait does promote an execution that needs a new sandbox */
	char *got =
	    call_in(fx->rt, "conv-b", "run_code", "{\"code\": \"1\", \"profile\": \"lazy\"}");
	expect_task_succeeds(fx, "conv-b", got);
}

/* ---- 4. a task is its conversation's only ---- */

static void test_task_not_leaked(void **state)
{
	fixture *fx = *state;
	char *got = call(fx, "run_command",
	                 "{\"command\": \"sleep 0.5; echo secret; touch ran\", \"profile\": "
	                 "\"local\"}");
	char *task = member(got, "task_id");
	if (!task)
		fail_msg("not promoted: %s", got);
	free(got);
	char targs[128], unknown[160];
	snprintf(targs, sizeof(targs), "{\"task_id\": \"%s\"}", task);
	snprintf(unknown, sizeof(unknown), "{\"task_id\": \"%s\", \"status\": \"unknown\"}", task);
	/* the command has run (its marker is there), so its completion is on its way to the
	 * response store: another conversation does not see it */
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "test -e \"$(ls -d '%s'/boxes/*/)ran\"", fx->dir);
	int64_t end = aks__now_ms() + WAIT_MS;
	while (system(cmd) != 0) {
		if (aks__now_ms() > end)
			fail_msg("the promoted command never ran");
		sleep_ms(50);
	}
	sleep_ms(500);
	got = call_in(fx->rt, "conv-b", "check_sandbox_task", targs);
	assert_string_equal(got, unknown);
	free(got);
	/* its own conversation does */
	got = wait_task_done(fx, "conv-a", task);
	assert_non_null(strstr(got, "\"status\": \"succeeded\""));
	assert_non_null(strstr(got, "secret"));
	free(got);
	/* Decisive: the completion is certainly in the response store now (it stays there until
	 * its TTL), and another conversation still gets "unknown". */
	got = call_in(fx->rt, "conv-b", "check_sandbox_task", targs);
	assert_string_equal(got, unknown);
	free(got);
	/* nor can it see or touch the session the task ran on */
	got = call_in(fx->rt, "conv-b", "list_sandbox_sessions", NULL);
	assert_string_equal(got, "{\"sessions\": []}");
	free(got);
	free(task);
}

/* ---- 5. the worker_timeout_ceiling guard ---- */

static void test_ceiling(void **state)
{
	fixture *fx = *state;
	const char *refusal =
	    "{\"error\": \"policy timeout 300.0s exceeds the provisioned worker's timeout ceiling "
	    "(sandbox.broker.worker_timeout_ceiling=200.0s)\", \"sandbox_session_id\": "
	    "\"default:long\"}";
	expect(fx, "run_code", "{\"code\": \"1\", \"profile\": \"long\"}", refusal);
	expect(fx, "write_sandbox_file",
	       "{\"path\": \"f\", \"content\": \"x\", \"profile\": \"long\"}", refusal);
	/* nothing ran: no sandbox made, no session stored */
	assert_int_equal(log_lines(fx, "creates.log"), 0);
	expect(fx, "list_sandbox_sessions", NULL, "{\"sessions\": []}");
}

/* ---- 6. the inline_payload_max_bytes guard ---- */

static void test_size_guard(void **state)
{
	fixture *fx = *state;
	size_t n = 2200000;
	char *args = malloc(n + 128);
	int k = sprintf(args, "{\"path\": \"big.bin\", \"content\": \"");
	memset(args + k, 'a', n);
	strcpy(args + k + n, "\"}");
	char *got = call(fx, "write_sandbox_file", args);
	const char *head = "{\"error\": \"serialized upload_file request is ";
	if (strncmp(got, head, strlen(head)) != 0)
		fail_msg("%.300s", got);
	assert_non_null(
	    strstr(got, " bytes, over sandbox.broker.inline_payload_max_bytes=2097152; "));
	assert_non_null(strstr(got, "\"sandbox_session_id\": \"default:default\"}"));
	free(got);
	/* the same for an execution */
	k = sprintf(args, "{\"code\": \"");
	memset(args + k, 'b', n);
	strcpy(args + k + n, "\"}");
	got = call(fx, "run_code", args);
	assert_non_null(strstr(got, "{\"error\": \"serialized execute_code request is "));
	free(got);
	free(args);
	/* nothing was sent: no sandbox made, no session stored, and the file is not there */
	assert_int_equal(log_lines(fx, "creates.log"), 0);
	expect(fx, "list_sandbox_sessions", NULL, "{\"sessions\": []}");
	got = call(fx, "read_sandbox_file", "{\"path\": \"big.bin\"}");
	assert_non_null(strstr(got, "\"error\": \"no such file: 'big.bin'\""));
	free(got);
}

/* ---- 7. typed errors across the wire ---- */

/* The calls whose errors are compared, in order, on a fresh state each flavor. */
static const char *const error_calls[][2] = {
    {"run_command", "{\"command\": \"sleep 30\", \"profile\": \"slow\"}"},
    {"read_sandbox_file", "{\"path\": \"missing.txt\"}"},
    {"read_sandbox_file", "{\"path\": \"/etc/passwd\"}"},
    {"write_sandbox_file", "{\"path\": \"../up\", \"content\": \"x\"}"},
    {"run_code", "{\"code\": \"1\", \"language\": \"cobol\"}"},
    {"run_code", "{\"code\": \"1\", \"sandbox_session_id\": \"nope\"}"},
    {"run_code", "{\"code\": \"1\", \"profile\": \"long\", \"sandbox_session_id\": "
                 "\"default:default\"}"},
};

/* Runs the cases below through a manager of fx's settings, noting in `wrong` each call
 * whose error code is not the one expected. */
static void check_codes(fixture *fx, const char *flavor, char *wrong, size_t size)
{
	aks_state_store *st = open_store(fx);
	aks_manager *m = NULL;
	assert_int_equal(aks__manager_new(fx->settings, st, &m, NULL), AKS_OK);
	aks_mgr_caller caller = {.conversation = "conv-codes"};
	struct {
		aks_mgr_request req;
		int code;
	} cases[] = {
	    {{.op = AKS_MGR_EXECUTE_COMMAND, .command = "sleep 30", .profile = "slow"},
	     AKS_ETIMEOUT},
	    {{.op = AKS_MGR_DOWNLOAD, .path = "missing.txt"}, AKS_ENOTFOUND},
	    {{.op = AKS_MGR_UPLOAD, .path = "/abs", .data = "x", .len = 1}, AKS_EPOLICY},
	    {{.op = AKS_MGR_EXECUTE_CODE, .code = "1", .language = "cobol"}, AKS_ECAPABILITY},
	    {{.op = AKS_MGR_EXECUTE_CODE, .code = "1", .session_id = "nope"},
	     AKS_ESESSION_NOT_FOUND},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		aks_mgr_outcome o;
		aks_error *err = NULL;
		int rc = aks__manager_submit(m, &caller, &cases[i].req, &o, &err);
		if (rc != cases[i].code || aks_error_code(err) != cases[i].code) {
			size_t k = strlen(wrong);
			snprintf(wrong + k, size - k, "\n  %s case %zu: %d, expected %d (%s)",
			         flavor, i, rc, cases[i].code, aks_error_message(err));
		}
		aks_error_free(err);
		aks__mgr_outcome_clear(&o);
	}
	aks__manager_free(m);
	aks__store_close(st);
}

static void test_typed_errors(void **state)
{
	fixture *fx = *state;
	fixture *th = fixture_new("thread", 20, 300);
	assert_non_null(th);
	size_t n = sizeof(error_calls) / sizeof(error_calls[0]);
	for (size_t i = 0; i < n; i++) {
		char *q = call(fx, error_calls[i][0], error_calls[i][1]);
		char *t = call(th, error_calls[i][0], error_calls[i][1]);
		if (strcmp(q, t) != 0)
			fail_msg("%s %s:\n  queue:  %s\n  thread: %s", error_calls[i][0],
			         error_calls[i][1], q, t);
		assert_non_null(strstr(q, "\"error\": "));
		if (i == 0)
			assert_string_equal(
			    q,
			    "{\"error\": \"sandbox operation 'execute_command' "
			    "exceeded timeout 0.5s\", \"sandbox_session_id\": \"default:slow\"}");
		if (i == 1)
			assert_string_equal(q, "{\"error\": \"no such file: 'missing.txt'\", "
			                       "\"sandbox_session_id\": \"default:default\"}");
		free(q);
		free(t);
	}
	/* and the codes themselves, as the manager returns them, on either flavor */
	char wrong[1024] = "";
	check_codes(th, "thread", wrong, sizeof(wrong));
	check_codes(fx, "queue", wrong, sizeof(wrong));
	assert_int_equal(fixture_free(th), 0);
	if (*wrong)
		fail_msg("error codes:%s", wrong);
}

/* ---- 8. destroy_sandbox_session sends the destroy ---- */

static void test_destroy(void **state)
{
	fixture *fx = *state;
	free(call(fx, "write_sandbox_file", "{\"path\": \"a\", \"content\": \"1\"}"));
	char *sid = recorded_sandbox(fx, "conv-a", "default:default");
	assert_non_null(sid);
	assert_int_equal(log_has(fx, "destroys.log", sid), 0);
	expect(fx, "destroy_sandbox_session", "{\"sandbox_session_id\": \"default:default\"}",
	       "{\"sandbox_session_id\": \"default:default\", \"destroyed\": true}");
	expect(fx, "list_sandbox_sessions", NULL, "{\"sessions\": []}");
	assert_true(wait_log_has(fx, "destroys.log", sid, WAIT_MS));
	/* the session starts over: a new sandbox, without the file */
	char *got = call(fx, "read_sandbox_file", "{\"path\": \"a\"}");
	assert_non_null(strstr(got, "no such file"));
	free(got);
	char **created = lines_of(log_path(fx, "creates.log"));
	assert_int_equal(lines_count(created), 2);
	assert_string_not_equal(created[1], sid);
	lines_free(created);
	free(sid);
}

/* ---- 9. the idle reset on touch ---- */

static void test_idle_reset(void **state)
{
	fixture *fx = *state;
	free(call(fx, "write_sandbox_file",
	          "{\"path\": \"w\", \"content\": \"old\", \"profile\": \"ordered\"}"));
	char *old = recorded_sandbox(fx, "conv-a", "default:ordered");
	assert_non_null(old);
	age_session(fx, "default:ordered", 1.5);
	expect(fx, "run_code", "{\"code\": \"2\", \"profile\": \"ordered\"}",
	       "{\"stdout\": \"2\", \"stderr\": \"\", \"exit_code\": 0, \"sandbox_session_id\": "
	       "\"default:ordered\", \"notice\": \"sandbox session 'default:ordered' was idle for "
	       "more than 1s and has been reset; its previous workspace state was discarded\"}");
	/* the old sandbox was destroyed before the new one was made: create A, destroy A,
	 * create B */
	assert_true(wait_log_has(fx, "events.log", old, WAIT_MS));
	char **ev = lines_of(log_path(fx, "events.log"));
	if (lines_count(ev) != 3)
		fail_msg("events: %zu lines", lines_count(ev));
	assert_string_equal(ev[0], old);
	assert_string_equal(ev[1], old);
	assert_string_not_equal(ev[2], old);
	char *now = recorded_sandbox(fx, "conv-a", "default:ordered");
	assert_non_null(now);
	assert_string_equal(now, ev[2]);
	lines_free(ev);
	free(now);
	free(old);
	/* the workspace is new, and the notice is told once */
	char *got = call(fx, "read_sandbox_file", "{\"path\": \"w\", \"profile\": \"ordered\"}");
	assert_non_null(strstr(got, "no such file"));
	free(got);
	got = call(fx, "run_code", "{\"code\": \"3\", \"profile\": \"ordered\"}");
	assert_null(strstr(got, "notice"));
	free(got);
}

/* ---- 10. the workers' idle sweep, and self-heal across the wire ---- */

static void test_sweep(void **state)
{
	fixture *fx = *state;
	int64_t t0 = aks__now_ms();
	free(call(fx, "write_sandbox_file",
	          "{\"path\": \"w\", \"content\": \"old\", \"profile\": \"quick\"}"));
	char *old = recorded_sandbox(fx, "conv-a", "default:quick");
	assert_non_null(old);
	/* untouched: the sweep destroys it, and not before its idle_timeout (1 s) */
	assert_true(wait_log_has(fx, "destroys.log", old, WAIT_MS));
	assert_true(aks__now_ms() - t0 >= 1000);
	assert_int_equal(log_has(fx, "destroys.log", old), 1);
	/* The next touch says the workspace is gone. It is past the idle timeout on the agent's
	 * side too, so the agent's own idle reset (§4.4) speaks first. */
	char *got = call(fx, "read_sandbox_file", "{\"path\": \"w\", \"profile\": \"quick\"}");
	assert_non_null(strstr(got, "no such file"));
	free(got);
	got = call(fx, "run_code", "{\"code\": \"2\", \"profile\": \"quick\"}");
	char *notice = member(got, "notice");
	if (!notice || (!strstr(notice, "no longer existed and was recreated empty") &&
	                !strstr(notice, "was idle for more than 1s and has been reset")))
		fail_msg("no recreation notice: %s", got);
	free(notice);
	free(got);
	char *now = recorded_sandbox(fx, "conv-a", "default:quick");
	assert_non_null(now);
	assert_string_not_equal(now, old);
	free(now);
	free(old);
}

/* The sweep destroys a sandbox while the agent's record of the session is still fresh (the
 * agent touched it later than the workers saw, e.g. a call refused before it was sent): the
 * next call finds the sandbox gone and the worker's self-heal notice comes back. */
static void test_sweep_recreated_notice(void **state)
{
	fixture *fx = *state;
	free(call(fx, "write_sandbox_file",
	          "{\"path\": \"w\", \"content\": \"old\", \"profile\": \"quick\"}"));
	char *old = recorded_sandbox(fx, "conv-a", "default:quick");
	assert_non_null(old);
	assert_true(wait_log_has(fx, "destroys.log", old, WAIT_MS));
	/* freshen the agent's record: last_used_at = now */
	aks_state_store *st = open_store(fx);
	aks_session_rec s;
	assert_int_equal(aks__sessions_find_in(st, "conv-a", "default:quick", &s, NULL), AKS_OK);
	s.last_used_at = aks__epoch_now();
	assert_int_equal(aks__sessions_save(st, "conv-a", &s, NULL), AKS_OK);
	aks__session_clear(&s);
	aks__store_close(st);
	expect(fx, "run_code", "{\"code\": \"2\", \"profile\": \"quick\"}",
	       "{\"stdout\": \"2\", \"stderr\": \"\", \"exit_code\": 0, \"sandbox_session_id\": "
	       "\"default:quick\", \"notice\": \"the sandbox behind session 'default:quick' no "
	       "longer existed and was recreated empty; its previous workspace state is gone\"}");
	char *now = recorded_sandbox(fx, "conv-a", "default:quick");
	assert_non_null(now);
	assert_string_not_equal(now, old);
	free(now);
	free(old);
}

/* A sandbox the backend refuses to destroy stays in the inventory, so a later pass destroys
 * it once the backend takes the destroy: forgotten, it would run on with only gc to find it. */
static void test_sweep_keeps_refused(void **state)
{
	fixture *fx = *state;
	char refuse[128];
	snprintf(refuse, sizeof(refuse), "%s/refuse", fx->dir);
	FILE *f = fopen(refuse, "w");
	assert_non_null(f);
	fclose(f);
	free(call(fx, "write_sandbox_file",
	          "{\"path\": \"w\", \"content\": \"x\", \"profile\": \"refusing\"}"));
	char *box = recorded_sandbox(fx, "conv-a", "default:refusing");
	assert_non_null(box);
	/* idle for 1 s, swept every 0.2 s: several passes have been refused by now */
	usleep(2500 * 1000);
	assert_int_equal(log_has(fx, "destroys.log", box), 0);
	assert_int_equal(unlink(refuse), 0);
	assert_true(wait_log_has(fx, "destroys.log", box, WAIT_MS));
	free(box);
}

/* A sandbox destroyed behind everyone's back: the worker recreates it and says so. */
static void test_self_heal(void **state)
{
	fixture *fx = *state;
	free(call(fx, "write_sandbox_file", "{\"path\": \"a\", \"content\": \"1\"}"));
	char *old = recorded_sandbox(fx, "conv-a", "default:default");
	assert_non_null(old);
	aks_profile *p = NULL;
	assert_int_equal(aks_settings_find_profile(fx->settings, "default", &p, NULL), AKS_OK);
	aks_call c;
	aks_call_init(&c, 10, NULL, NULL, NULL);
	assert_int_equal(aks_provider_destroy(aks_profile_get_provider(p), old, &c, NULL), AKS_OK);
	expect(fx, "run_code", "{\"code\": \"2\"}",
	       "{\"stdout\": \"2\", \"stderr\": \"\", \"exit_code\": 0, \"sandbox_session_id\": "
	       "\"default:default\", \"notice\": \"the sandbox behind session 'default:default' no "
	       "longer existed and was recreated empty; its previous workspace state is gone\"}");
	char *now = recorded_sandbox(fx, "conv-a", "default:default");
	assert_non_null(now);
	assert_string_not_equal(now, old);
	/* the next call keeps the new one, quietly */
	expect(fx, "run_code", "{\"code\": \"3\"}",
	       "{\"stdout\": \"3\", \"stderr\": \"\", \"exit_code\": 0, \"sandbox_session_id\": "
	       "\"default:default\"}");
	assert_int_equal(log_lines(fx, "creates.log"), 2);
	free(now);
	free(old);
}

/*
 * The retry after a kept handle's sandbox went away happens once, whoever runs the
 * operation: the worker (queue) and the manager itself (thread) both go through
 * aks__engine_run. The fake's vanish marker loses the sandbox under the operation, so the
 * kept handle fails, the normal acquire recreates the sandbox, and the retry loses that one
 * too: its error is the answer, with one new sandbox, not a loop. The retry's sandbox was
 * recorded, so the next call finds it gone and recreates it with the notice.
 */
static void self_heal_once(fixture *fx)
{
	free(call(fx, "run_code", "{\"code\": \"1\"}")); /* its handle is kept */
	assert_int_equal(log_lines(fx, "creates.log"), 1);
	char *got = call(fx, "run_code", "{\"code\": \"__vanish__\"}");
	char *error = member(got, "error");
	if (!error || !strstr(error, "was destroyed"))
		fail_msg("want the retry's gone error, got %s", got);
	free(error);
	free(got);
	assert_int_equal(log_lines(fx, "creates.log"), 2);
	got = call(fx, "run_code", "{\"code\": \"3\"}");
	char *notice = member(got, "notice");
	if (!notice || !strstr(notice, "no longer existed and was recreated empty"))
		fail_msg("want the recreated notice, got %s", got);
	free(notice);
	free(got);
	assert_int_equal(log_lines(fx, "creates.log"), 3);
}

static void test_self_heal_once_worker(void **state)
{
	self_heal_once(*state);
}

static void test_self_heal_once_manager(void **state)
{
	(void)state;
	fixture *fx = fixture_new("thread", 20, 300);
	assert_non_null(fx);
	self_heal_once(fx);
	assert_int_equal(fixture_free(fx), 0);
}

/* ---- 11. per_call under queue ---- */

static void test_per_call(void **state)
{
	fixture *fx = *state;
	expect(fx, "run_code", "{\"code\": \"1\", \"profile\": \"eph\"}",
	       "{\"stdout\": \"1\", \"stderr\": \"\", \"exit_code\": 0, \"sandbox_session_id\": "
	       "\"\"}");
	char **created = lines_of(log_path(fx, "creates.log"));
	assert_int_equal(lines_count(created), 1);
	/* the worker destroyed it after the call */
	assert_true(wait_log_has(fx, "destroys.log", created[0], WAIT_MS));
	expect(fx, "write_sandbox_file",
	       "{\"path\": \"f\", \"content\": \"x\", \"profile\": \"eph\"}",
	       "{\"path\": \"f\", \"written\": true, \"sandbox_session_id\": \"\"}");
	/* every call a fresh sandbox: the file is not there */
	char *got = call(fx, "read_sandbox_file", "{\"path\": \"f\", \"profile\": \"eph\"}");
	assert_non_null(strstr(got, "no such file"));
	free(got);
	lines_free(created);
	created = lines_of(log_path(fx, "creates.log"));
	assert_int_equal(lines_count(created), 3);
	for (size_t i = 0; i < 3; i++)
		assert_true(wait_log_has(fx, "destroys.log", created[i], WAIT_MS));
	lines_free(created);
	expect(fx, "list_sandbox_sessions", NULL, "{\"sessions\": []}");
	/* an explicit id cannot name a per_call session */
	expect(fx, "run_code",
	       "{\"code\": \"1\", \"profile\": \"eph\", \"sandbox_session_id\": \"z\"}",
	       "{\"error\": \"unknown sandbox session 'z'\", \"sandbox_session_id\": \"z\"}");
}

/* ---- 12. binary-safe files ---- */

static void round_trip(aks_manager *m, const char *profile, const char *path,
                       const unsigned char *data, size_t len)
{
	aks_mgr_caller caller = {.conversation = "conv-a"};
	aks_mgr_request up = {
	    .op = AKS_MGR_UPLOAD, .path = path, .data = data, .len = len, .profile = profile};
	aks_mgr_outcome o;
	aks_error *err = NULL;
	if (aks__manager_submit(m, &caller, &up, &o, &err) != AKS_OK)
		fail_msg("upload %s: %s", path, aks_error_message(err));
	aks__mgr_outcome_clear(&o);
	aks_mgr_request down = {.op = AKS_MGR_DOWNLOAD, .path = path, .profile = profile};
	if (aks__manager_submit(m, &caller, &down, &o, &err) != AKS_OK)
		fail_msg("download %s: %s", path, aks_error_message(err));
	assert_non_null(o.result);
	assert_int_equal(aks_result_get_file_count(o.result), 1);
	size_t got_len = 0;
	const unsigned char *got = aks_result_get_file(o.result, 0, NULL, NULL, &got_len);
	assert_int_equal(got_len, len);
	assert_memory_equal(got, data, len);
	aks__mgr_outcome_clear(&o);
}

static void test_binary_files(void **state)
{
	fixture *fx = *state;
	static const unsigned char bytes[] = {0x00, 0xFF, 0x80, 0x0A, 0x0D, 0xC8};
	size_t big_len = 1024 * 1024;
	unsigned char *big = malloc(big_len);
	assert_non_null(big);
	for (size_t got = 0; got < big_len;) {
		ssize_t r = getrandom(big + got, big_len - got, 0);
		assert_true(r > 0);
		got += (size_t)r;
	}
	aks_state_store *st = open_store(fx);
	aks_manager *m = NULL;
	assert_int_equal(aks__manager_new(fx->settings, st, &m, NULL), AKS_OK);
	round_trip(m, "default", "bin.dat", bytes, sizeof(bytes));
	round_trip(m, "default", "big.dat", big, big_len);
	round_trip(m, "local", "bin.dat", bytes, sizeof(bytes));
	round_trip(m, "local", "big.dat", big, big_len);
	round_trip(m, "default", "empty.dat", (const unsigned char *)"", 0);
	aks__manager_free(m);
	aks__store_close(st);
	/* what the workspace holds is those bytes */
	char *dir = recorded_sandbox(fx, "conv-a", "default:local");
	assert_non_null(dir);
	char path[512];
	snprintf(path, sizeof(path), "%s/bin.dat", dir);
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	unsigned char disk[16];
	assert_int_equal(fread(disk, 1, sizeof(disk), f), sizeof(bytes));
	fclose(f);
	assert_memory_equal(disk, bytes, sizeof(bytes));
	free(dir);
	free(big);
	/* and through the tool API, text with control characters comes back as it went */
	expect(fx, "write_sandbox_file", "{\"path\": \"t\", \"content\": \"a\\r\\n\\tb\\u00e9\"}",
	       "{\"path\": \"t\", \"written\": true, \"sandbox_session_id\": \"default:default\"}");
	expect(fx, "read_sandbox_file", "{\"path\": \"t\"}",
	       "{\"path\": \"t\", \"content\": \"a\\r\\n\\tb\\u00e9\", \"sandbox_session_id\": "
	       "\"default:default\"}");
}

/* ---- 13. a failed operation still records the sandbox it made (§11 item 6) ---- */

static void test_failed_op_records_sandbox(void **state)
{
	fixture *fx = *state;
	/* the fake creates the sandbox, then refuses the language */
	char *got = call(fx, "run_code", "{\"code\": \"1\", \"language\": \"cobol\"}");
	assert_non_null(strstr(got, "\"error\": "));
	assert_non_null(strstr(got, "cobol"));
	free(got);
	char **created = lines_of(log_path(fx, "creates.log"));
	assert_int_equal(lines_count(created), 1);
	char *sid = recorded_sandbox(fx, "conv-a", "default:default");
	if (!sid)
		fail_msg("the failed call's sandbox %s is not recorded on the session", created[0]);
	assert_string_equal(sid, created[0]);
	expect(fx, "run_code", "{\"code\": \"1\"}",
	       "{\"stdout\": \"1\", \"stderr\": \"\", \"exit_code\": 0, \"sandbox_session_id\": "
	       "\"default:default\"}");
	assert_int_equal(log_lines(fx, "creates.log"), 1); /* the same sandbox */
	free(sid);
	lines_free(created);

	/* a timed-out command on a fresh local session: its workspace is kept and reused */
	got = call(fx, "run_command",
	           "{\"command\": \"echo before > b; sleep 30\", \"profile\": "
	           "\"slow\"}");
	assert_non_null(strstr(got, "exceeded timeout 0.5s"));
	free(got);
	assert_int_equal(boxes(fx), 1);
	char *dir = recorded_sandbox(fx, "conv-a", "default:slow");
	assert_non_null(dir);
	got = call(fx, "run_command", "{\"command\": \"cat b; pwd\", \"profile\": \"slow\"}");
	char *out = member(got, "stdout");
	char want[256];
	snprintf(want, sizeof(want), "before\n%s\n", dir);
	assert_non_null(out);
	assert_string_equal(out, want);
	assert_int_equal(boxes(fx), 1);
	free(out);
	free(got);
	free(dir);
}

int main(void)
{
	aks_log_set_level(AKS_LOG_ERROR);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_sync_keeps_sandbox, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_second_runtime_reuses, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_promotion, setup_promote, teardown),
	    cmocka_unit_test_setup_teardown(test_caller_wait, setup_promote, teardown),
	    cmocka_unit_test_setup_teardown(test_promoted_first_call_recorded, setup_promote,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_file_ops_not_promoted, setup_promote, teardown),
	    cmocka_unit_test_setup_teardown(test_task_not_leaked, setup_promote, teardown),
	    cmocka_unit_test_setup_teardown(test_ceiling, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_size_guard, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_typed_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_destroy, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_idle_reset, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sweep, setup_sweep, teardown),
	    cmocka_unit_test_setup_teardown(test_sweep_recreated_notice, setup_sweep, teardown),
	    cmocka_unit_test_setup_teardown(test_sweep_keeps_refused, setup_sweep, teardown),
	    cmocka_unit_test_setup_teardown(test_self_heal, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_self_heal_once_worker, setup, teardown),
	    cmocka_unit_test(test_self_heal_once_manager),
	    cmocka_unit_test_setup_teardown(test_per_call, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_binary_files, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_failed_op_records_sandbox, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
