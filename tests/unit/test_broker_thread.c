/* Unit tests: the thread broker (reference §5.4) and the idle reaper (§11
 * item 9), through aks_runtime_call_tool and aks_runtime_reap with the
 * local_subprocess provider — promotion to tasks and their outcomes in the
 * store, seen from another runtime; sessions running in parallel; closing
 * with work in flight; and sandboxes destroyed for idleness. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "core/session/broker_thread.h"
#include "core/session/manager.h"

static const char *const no_env[] = {NULL};

typedef struct fixture {
	char dir[64];
	char cfg[128];
	char state[128];
	aks_settings *settings;
	aks_runtime *rt;
} fixture;

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int write_config(fixture *fx, const char *flavor, const char *wait)
{
	FILE *f = fopen(fx->cfg, "w");
	if (!f)
		return -1;
	fprintf(f,
	        "sandbox:\n"
	        "  enabled: true\n"
	        "  default_profile: local\n"
	        "  broker: {flavor: %s, wait_timeout: %s}\n"
	        "  profiles:\n"
	        "    local: {type: local_subprocess, local_subprocess: {workdir: %s/boxes}}\n"
	        "    short: {type: local_subprocess, policy: {timeout: 0.5},\n"
	        "            local_subprocess: {workdir: %s/boxes}}\n"
	        "    idle: {type: local_subprocess, idle_timeout: 1,\n"
	        "           local_subprocess: {workdir: %s/boxes}}\n",
	        flavor, wait, fx->dir, fx->dir, fx->dir);
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

static int setup_with(void **state, const char *flavor, const char *wait)
{
	fixture *fx = calloc(1, sizeof(*fx));
	if (!fx)
		return -1;
	strcpy(fx->dir, "/tmp/aks-broker-XXXXXX");
	if (!mkdtemp(fx->dir))
		return -1;
	snprintf(fx->cfg, sizeof(fx->cfg), "%s/config.yaml", fx->dir);
	snprintf(fx->state, sizeof(fx->state), "%s/state", fx->dir);
	if (write_config(fx, flavor, wait) < 0 || open_runtime(fx, &fx->settings, &fx->rt) < 0)
		return -1;
	*state = fx;
	return 0;
}

static int setup_wait0(void **state)
{
	return setup_with(state, "thread", "0");
}

/* Long enough for a quick command even on a loaded machine, short next to the slow one. */
static int setup_wait_short(void **state)
{
	return setup_with(state, "thread", "2");
}

static int setup_wait_long(void **state)
{
	return setup_with(state, "thread", "30");
}

static int setup_embedded(void **state)
{
	return setup_with(state, "embedded", "0");
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

static char *call_in(aks_runtime *rt, const char *conv, const char *tool, const char *args)
{
	aks_tool_context ctx;
	aks_tool_context_init(&ctx, conv, NULL);
	char *out = NULL;
	aks_error *err = NULL;
	if (aks_runtime_call_tool(rt, tool, args, &ctx, &out, &err) != AKS_OK)
		fail_msg("%s: %s", tool, aks_error_message(err));
	assert_non_null(out);
	return out;
}

static struct json_object *parse(const char *json)
{
	struct json_object *o = json_tokener_parse(json);
	if (!o)
		fail_msg("not JSON: %s", json);
	return o;
}

/* A string member at a path of keys ("a", "b", NULL), copied; NULL if absent. */
static char *str_at(const char *json, const char *key, const char *sub)
{
	struct json_object *o = parse(json), *v = json_object_object_get(o, key);
	if (sub)
		v = json_object_object_get(v, sub);
	char *s = v && json_object_is_type(v, json_type_string) ? strdup(json_object_get_string(v))
	                                                        : NULL;
	json_object_put(o);
	return s;
}

/* result.exit_code of a task JSON, or -1000 when absent or null. */
static int exit_code_of(const char *json)
{
	struct json_object *o = parse(json);
	struct json_object *v =
	    json_object_object_get(json_object_object_get(o, "result"), "exit_code");
	int code = v && json_object_is_type(v, json_type_int) ? json_object_get_int(v) : -1000;
	json_object_put(o);
	return code;
}

/* Submits, expects a promotion, returns the task id. */
static char *promote(aks_runtime *rt, const char *conv, const char *tool, const char *args)
{
	char *got = call_in(rt, conv, tool, args);
	char *status = str_at(got, "status", NULL), *task = str_at(got, "task_id", NULL);
	if (!status || strcmp(status, "pending") != 0 || !task)
		fail_msg("not promoted: %s", got);
	char *sid = str_at(got, "sandbox_session_id", NULL);
	assert_string_equal(sid, "default:local");
	assert_int_equal(strlen(task), 32);
	free(sid);
	free(status);
	free(got);
	return task;
}

/* Polls check_sandbox_task until it is no longer pending (at most `secs`). */
static char *await_task(aks_runtime *rt, const char *conv, const char *task, double secs)
{
	char args[128];
	snprintf(args, sizeof(args), "{\"task_id\": \"%s\"}", task);
	double end = mono() + secs;
	for (;;) {
		char *got = call_in(rt, conv, "check_sandbox_task", args);
		char *status = str_at(got, "status", NULL);
		bool pending = status && strcmp(status, "pending") == 0;
		free(status);
		if (!pending)
			return got;
		if (mono() > end)
			fail_msg("task %s still pending after %gs: %s", task, secs, got);
		free(got);
		usleep(20000);
	}
}

static void assert_status(const char *json, const char *want)
{
	char *status = str_at(json, "status", NULL);
	if (!status || strcmp(status, want) != 0)
		fail_msg("want status %s: %s", want, json);
	free(status);
}

static bool exists(const char *path)
{
	struct stat sb;
	return stat(path, &sb) == 0;
}

/* ---- promotion ---- */

static void test_wait_zero_promotes(void **state)
{
	fixture *fx = *state;
	char *task = promote(fx->rt, "conv-a", "run_command", "{\"command\": \"echo hi\"}");
	char *got = await_task(fx->rt, "conv-a", task, 10);
	assert_status(got, "succeeded");
	char *out = str_at(got, "result", "stdout"), *sid = str_at(got, "sandbox_session_id", NULL);
	assert_string_equal(out, "hi\n");
	assert_string_equal(sid, "default:local");
	assert_int_equal(exit_code_of(got), 0);
	free(out);
	free(sid);
	free(got);
	free(task);
	/* run_code promotes too */
	task = promote(fx->rt, "conv-a", "run_code", "{\"code\": \"print(6 * 7)\"}");
	got = await_task(fx->rt, "conv-a", task, 10);
	out = str_at(got, "result", "stdout");
	assert_string_equal(out, "42\n");
	free(out);
	free(got);
	free(task);
	/* file tools never promote: they report what really happened */
	got = call_in(fx->rt, "conv-a", "write_sandbox_file",
	              "{\"path\": \"f.txt\", \"content\": \"data\"}");
	assert_string_equal(got, "{\"path\": \"f.txt\", \"written\": true, "
	                         "\"sandbox_session_id\": \"default:local\"}");
	free(got);
	got = call_in(fx->rt, "conv-a", "read_sandbox_file", "{\"path\": \"f.txt\"}");
	assert_string_equal(got, "{\"path\": \"f.txt\", \"content\": \"data\", "
	                         "\"sandbox_session_id\": \"default:local\"}");
	free(got);
	/* an unknown task */
	got = call_in(fx->rt, "conv-a", "check_sandbox_task", "{\"task_id\": \"nope\"}");
	assert_string_equal(got, "{\"task_id\": \"nope\", \"status\": \"unknown\"}");
	free(got);
}

static void test_promote_then_complete(void **state)
{
	fixture *fx = *state;
	/* quick work finishes within the wait and is answered directly */
	char *got = call_in(fx->rt, "conv-a", "run_command", "{\"command\": \"echo quick\"}");
	assert_string_equal(got, "{\"stdout\": \"quick\\n\", \"stderr\": \"\", \"exit_code\": 0, "
	                         "\"sandbox_session_id\": \"default:local\"}");
	free(got);
	double t0 = mono();
	char *task = promote(fx->rt, "conv-a", "run_command",
	                     "{\"command\": \"sleep 8; echo done > done.txt; echo done\"}");
	double waited = mono() - t0;
	if (waited > 7) /* the wait is 2 s; the work takes 8 s */
		fail_msg("promotion came after %.1fs: the caller waited for the work", waited);
	char args[128];
	snprintf(args, sizeof(args), "{\"task_id\": \"%s\"}", task);
	got = call_in(fx->rt, "conv-a", "check_sandbox_task", args);
	char want[256];
	snprintf(want, sizeof(want),
	         "{\"task_id\": \"%s\", \"status\": \"pending\", \"sandbox_session_id\": "
	         "\"default:local\"}",
	         task);
	assert_string_equal(got, want);
	free(got);
	got = await_task(fx->rt, "conv-a", task, 15);
	assert_status(got, "succeeded");
	char *out = str_at(got, "result", "stdout");
	assert_string_equal(out, "done\n");
	free(out);
	free(got);
	/* the promoted run used the session's sandbox, which was recorded */
	got = call_in(fx->rt, "conv-a", "run_command", "{\"command\": \"cat done.txt\"}");
	assert_non_null(strstr(got, "\"stdout\": \"done\\n\""));
	free(got);
	free(task);
}

static void test_failing_task(void **state)
{
	fixture *fx = *state;
	char *task =
	    promote(fx->rt, "conv-a", "run_command", "{\"command\": \"echo oops >&2; exit 3\"}");
	char *got = await_task(fx->rt, "conv-a", task, 10);
	/* a failing program is a result (§2.4): the task succeeded, its exit code is 3 */
	assert_status(got, "succeeded");
	assert_int_equal(exit_code_of(got), 3);
	char *err = str_at(got, "result", "stderr");
	assert_string_equal(err, "oops\n");
	free(err);
	free(got);
	free(task);
}

static void test_timed_out_task(void **state)
{
	fixture *fx = *state;
	char *got = call_in(fx->rt, "conv-a", "run_command",
	                    "{\"command\": \"sleep 5\", \"profile\": \"short\"}");
	char *task = str_at(got, "task_id", NULL);
	assert_non_null(task);
	free(got);
	got = await_task(fx->rt, "conv-a", task, 10);
	assert_status(got, "timed_out");
	char *error = str_at(got, "result", "error");
	assert_non_null(error);
	assert_non_null(strstr(error, "exceeded timeout"));
	assert_int_equal(exit_code_of(got), -1000); /* no result: exit_code null */
	free(error);
	free(got);
	free(task);
}

/* ---- parallelism ---- */

typedef struct sleeper {
	aks_runtime *rt;
	const char *conv;
	char *out;
} sleeper;

static void *sleep_one(void *arg)
{
	sleeper *s = arg;
	aks_tool_context ctx;
	aks_tool_context_init(&ctx, s->conv, NULL);
	aks_runtime_call_tool(s->rt, "run_command", "{\"command\": \"sleep 1; echo slept\"}", &ctx,
	                      &s->out, NULL);
	return NULL;
}

static void test_parallel_sessions(void **state)
{
	fixture *fx = *state;
	/* warm up: the sandboxes exist before the timing */
	const char *convs[] = {"conv-x", "conv-y", "conv-z"};
	for (int i = 0; i < 3; i++)
		free(call_in(fx->rt, convs[i], "run_command", "{\"command\": \"true\"}"));
	double t0 = mono();
	sleeper one = {fx->rt, "conv-x", NULL};
	sleep_one(&one);
	double single = mono() - t0;
	assert_non_null(strstr(one.out, "slept"));
	free(one.out);

	sleeper two[2] = {{fx->rt, "conv-y", NULL}, {fx->rt, "conv-z", NULL}};
	pthread_t th[2];
	t0 = mono();
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, sleep_one, &two[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	double both = mono() - t0;
	for (int i = 0; i < 2; i++) {
		assert_non_null(two[i].out);
		assert_non_null(strstr(two[i].out, "slept"));
		free(two[i].out);
	}
	if (!(both < 1.8 * single))
		fail_msg("two sessions took %.3fs, one took %.3fs: not parallel", both, single);
}

/* One busy session cannot take the whole pool: its queued runs wait in the queue, not on
 * workers blocked on its lock, so another session's call runs at once. Five runs of 0.4 s
 * on one session (more than the pool's four workers), then one quick call on another
 * session: it must come back while the first session still has most of its runs ahead
 * (with workers blocked on the lock it would wait for two or three of them). */
typedef struct busy_run {
	aks_runtime *rt;
	int *finished;
	pthread_mutex_t *mu;
} busy_run;

static void *busy_one(void *arg)
{
	busy_run *b = arg;
	aks_tool_context ctx;
	aks_tool_context_init(&ctx, "conv-busy", NULL);
	char *out = NULL;
	aks_runtime_call_tool(b->rt, "run_command", "{\"command\": \"sleep 0.4\"}", &ctx, &out,
	                      NULL);
	free(out);
	pthread_mutex_lock(b->mu);
	(*b->finished)++;
	pthread_mutex_unlock(b->mu);
	return NULL;
}

static void test_busy_session_leaves_workers(void **state)
{
	fixture *fx = *state;
	free(call_in(fx->rt, "conv-busy", "run_command", "{\"command\": \"true\"}"));
	free(call_in(fx->rt, "conv-quick", "run_command", "{\"command\": \"true\"}"));
	int finished = 0;
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	busy_run b = {fx->rt, &finished, &mu};
	pthread_t th[5];
	for (int i = 0; i < 5; i++)
		assert_int_equal(pthread_create(&th[i], NULL, busy_one, &b), 0);
	usleep(150 * 1000); /* all five are queued or running */
	char *out = call_in(fx->rt, "conv-quick", "run_command", "{\"command\": \"echo quick\"}");
	pthread_mutex_lock(&mu);
	int done_when_quick = finished;
	pthread_mutex_unlock(&mu);
	assert_non_null(strstr(out, "quick"));
	free(out);
	for (int i = 0; i < 5; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(finished, 5);
	if (done_when_quick > 1)
		fail_msg("the quick call waited for %d runs of the busy session", done_when_quick);
}

/* destroy_sandbox_session waits for the session's running execution instead of
 * pulling the sandbox from under it: the run completes with its output, and
 * only then is the session gone. */
static void test_destroy_waits_for_execution(void **state)
{
	fixture *fx = *state;
	free(call_in(fx->rt, "conv-d", "run_command", "{\"command\": \"true\"}"));
	sleeper run = {fx->rt, "conv-d", NULL};
	pthread_t th;
	double t0 = mono();
	assert_int_equal(pthread_create(&th, NULL, sleep_one, &run), 0);
	struct timespec pause = {0, 200 * 1000000L};
	nanosleep(&pause, NULL);
	char *destroyed = call_in(fx->rt, "conv-d", "destroy_sandbox_session",
	                          "{\"sandbox_session_id\": \"default:local\"}");
	double destroy_done = mono() - t0;
	pthread_join(th, NULL);
	assert_string_equal(destroyed,
	                    "{\"sandbox_session_id\": \"default:local\", \"destroyed\": true}");
	free(destroyed);
	assert_non_null(run.out);
	if (!strstr(run.out, "slept"))
		fail_msg("the execution was cut short by the destroy: %s", run.out);
	free(run.out);
	/* The destroy returned only after the one-second run had finished. */
	if (destroy_done < 0.9)
		fail_msg("destroy returned after %.3fs, before the run it should wait for",
		         destroy_done);
	char *list = call_in(fx->rt, "conv-d", "list_sandbox_sessions", "{}");
	assert_string_equal(list, "{\"sessions\": []}");
	free(list);
}

/* ---- the store, seen from elsewhere ---- */

static void test_task_from_other_runtime(void **state)
{
	fixture *fx = *state;
	char *task = promote(fx->rt, "conv-a", "run_command", "{\"command\": \"echo far\"}");
	aks_settings *s2 = NULL;
	aks_runtime *rt2 = NULL;
	assert_int_equal(open_runtime(fx, &s2, &rt2), 0);
	char *got = await_task(rt2, "conv-a", task, 10);
	assert_status(got, "succeeded");
	char *out = str_at(got, "result", "stdout");
	assert_string_equal(out, "far\n");
	free(out);
	free(got);
	/* another conversation does not see it */
	char args[128];
	snprintf(args, sizeof(args), "{\"task_id\": \"%s\"}", task);
	got = call_in(rt2, "conv-b", "check_sandbox_task", args);
	assert_non_null(strstr(got, "\"status\": \"unknown\""));
	free(got);
	aks_runtime_close(rt2);
	aks_settings_free(s2);
	free(task);
}

static void test_close_drains(void **state)
{
	fixture *fx = *state;
	char marker[160];
	snprintf(marker, sizeof(marker), "%s/marker", fx->dir);
	char args[320];
	snprintf(args, sizeof(args), "{\"command\": \"sleep 1; echo x > %s; echo ok\"}", marker);
	char *task = promote(fx->rt, "conv-a", "run_command", args);
	double t0 = mono();
	aks_runtime_close(fx->rt); /* waits for the running task, then joins */
	fx->rt = NULL;
	double took = mono() - t0;
	assert_true(exists(marker)); /* the work was finished, not abandoned */
	assert_true(took < 4.0);
	aks_settings *s2 = NULL;
	assert_int_equal(open_runtime(fx, &s2, &fx->rt), 0);
	char *got = await_task(fx->rt, "conv-a", task, 1);
	assert_status(got, "succeeded");
	free(got);
	aks_runtime_close(fx->rt);
	aks_settings_free(s2);
	fx->rt = NULL;
	free(task);
}

static void test_close_cancels_after_grace(void **state)
{
	fixture *fx = *state;
	char *task = promote(fx->rt, "conv-a", "run_command", "{\"command\": \"sleep 60\"}");
	usleep(200000);
	double t0 = mono();
	aks_runtime_close(fx->rt);
	fx->rt = NULL;
	double took = mono() - t0;
	/* the grace period, then the cancelled run ends promptly */
	assert_true(took >= AKS_BROKER_CLOSE_GRACE - 0.5);
	assert_true(took < AKS_BROKER_CLOSE_GRACE + 5);
	aks_settings *s2 = NULL;
	assert_int_equal(open_runtime(fx, &s2, &fx->rt), 0);
	char *got = await_task(fx->rt, "conv-a", task, 1);
	assert_status(got, "failed"); /* terminal, never pending forever */
	free(got);
	aks_runtime_close(fx->rt);
	aks_settings_free(s2);
	fx->rt = NULL;
	free(task);
}

static void test_embedded_never_promotes(void **state)
{
	fixture *fx = *state;
	char *got = call_in(fx->rt, "conv-a", "run_command", "{\"command\": \"echo inline\"}");
	assert_string_equal(got, "{\"stdout\": \"inline\\n\", \"stderr\": \"\", \"exit_code\": 0, "
	                         "\"sandbox_session_id\": \"default:local\"}");
	free(got);
}

/* ---- the idle reaper ---- */

static void test_reap(void **state)
{
	fixture *fx = *state;
	const char *args = "{\"command\": \"echo state > s.txt\", \"profile\": \"idle\"}";
	free(call_in(fx->rt, "conv-a", "run_command", args));
	free(call_in(fx->rt, "conv-b", "run_command", args));
	aks_state_store *st = NULL;
	assert_int_equal(aks__store_open(fx->state, &st, NULL), AKS_OK);
	aks_session_rec a, b;
	assert_int_equal(aks__sessions_find_in(st, "conv-a", "default:idle", &a, NULL), AKS_OK);
	assert_int_equal(aks__sessions_find_in(st, "conv-b", "default:idle", &b, NULL), AKS_OK);
	char *dir_a = strdup(a.sandbox_id), *dir_b = strdup(b.sandbox_id);
	assert_true(exists(dir_a) && exists(dir_b));
	aks__session_clear(&b);
	/* conv-a's session was last used 5 s ago (idle_timeout is 1 s) */
	a.last_used_at -= 5;
	assert_int_equal(aks__sessions_save(st, "conv-a", &a, NULL), AKS_OK);
	/* a session of a profile no longer configured: left alone */
	char gone_dir[160];
	snprintf(gone_dir, sizeof(gone_dir), "%s/gone-box", fx->dir);
	assert_int_equal(mkdir(gone_dir, 0700), 0);
	aks_session_rec g = {.id = strdup("default:gone"),
	                     .profile = strdup("gone"),
	                     .provider_type = strdup("local_subprocess"),
	                     .sandbox_id = strdup(gone_dir)};
	assert_int_equal(aks__sessions_save(st, "conv-a", &g, NULL), AKS_OK);
	aks__session_clear(&g);

	aks_error *err = NULL;
	assert_int_equal(aks_runtime_reap(fx->rt, &err), AKS_OK);
	assert_false(exists(dir_a)); /* destroyed */
	assert_true(exists(dir_b));  /* fresh: untouched */
	assert_true(exists(gone_dir));
	aks__session_clear(&a);
	assert_int_equal(aks__sessions_find_in(st, "conv-a", "default:idle", &a, NULL), AKS_OK);
	assert_null(a.sandbox_id); /* the session stays, without a sandbox */
	assert_false(a.closed);
	assert_non_null(a.reset_notice);
	aks__session_clear(&a);
	assert_int_equal(aks__sessions_find_in(st, "conv-b", "default:idle", &b, NULL), AKS_OK);
	assert_string_equal(b.sandbox_id, dir_b);
	aks__session_clear(&b);

	/* the next call starts clean and says so; the one after does not */
	char *got = call_in(fx->rt, "conv-a", "run_command",
	                    "{\"command\": \"cat s.txt 2>/dev/null; echo $?\", \"profile\": "
	                    "\"idle\"}");
	assert_string_equal(got, "{\"stdout\": \"1\\n\", \"stderr\": \"\", \"exit_code\": 0, "
	                         "\"sandbox_session_id\": \"default:idle\", \"notice\": \"sandbox "
	                         "session 'default:idle' was idle for more than 1s and has been "
	                         "reset; its previous workspace state was discarded\"}");
	free(got);
	got = call_in(fx->rt, "conv-a", "run_command",
	              "{\"command\": \"true\", \"profile\": \"idle\"}");
	assert_null(strstr(got, "notice"));
	free(got);
	/* reaping again right away destroys nothing */
	assert_int_equal(aks__sessions_find_in(st, "conv-a", "default:idle", &a, NULL), AKS_OK);
	char *dir_a2 = strdup(a.sandbox_id);
	aks__session_clear(&a);
	assert_int_equal(aks_runtime_reap(fx->rt, NULL), AKS_OK);
	assert_true(exists(dir_a2));
	free(dir_a2);
	free(dir_a);
	free(dir_b);
	aks__store_close(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_wait_zero_promotes, setup_wait0, teardown),
	    cmocka_unit_test_setup_teardown(test_promote_then_complete, setup_wait_short, teardown),
	    cmocka_unit_test_setup_teardown(test_failing_task, setup_wait0, teardown),
	    cmocka_unit_test_setup_teardown(test_timed_out_task, setup_wait0, teardown),
	    cmocka_unit_test_setup_teardown(test_parallel_sessions, setup_wait_long, teardown),
	    cmocka_unit_test_setup_teardown(test_busy_session_leaves_workers, setup_wait_long,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_destroy_waits_for_execution, setup_wait_long,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_task_from_other_runtime, setup_wait0, teardown),
	    cmocka_unit_test_setup_teardown(test_close_drains, setup_wait0, teardown),
	    cmocka_unit_test_setup_teardown(test_close_cancels_after_grace, setup_wait0, teardown),
	    cmocka_unit_test_setup_teardown(test_embedded_never_promotes, setup_embedded, teardown),
	    cmocka_unit_test_setup_teardown(test_reap, setup_wait_long, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
