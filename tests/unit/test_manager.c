/* Unit tests: the manager behind the eight tools, through aks_runtime_call_tool —
 * the reference's JSON shapes and messages, each scope, sessions kept across
 * runtimes on one state directory, idle reset, self-heal, the gates, isolation
 * between conversations, the per-session lock, and bad arguments. */
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "core/session/manager.h"

static const char *const no_env[] = {NULL};

typedef struct fixture {
	char dir[64];
	char cfg[128];
	char state[128];
	aks_settings *settings;
	aks_runtime *rt;
} fixture;

static int write_config(fixture *fx, bool enabled)
{
	FILE *f = fopen(fx->cfg, "w");
	if (!f)
		return -1;
	fprintf(f,
	        "sandbox:\n"
	        "  enabled: %s\n"
	        "  default_profile: default\n"
	        "  profiles:\n"
	        "    default: {type: fake, fake: {destroy_log: %s/destroys.log}}\n"
	        "    local: {type: local_subprocess, local_subprocess: {workdir: %s/boxes}}\n"
	        "    eph: {type: local_subprocess, scope: per_call,\n"
	        "          local_subprocess: {workdir: %s/boxes}}\n"
	        "    shared: {type: local_subprocess, scope: per_runtime,\n"
	        "             local_subprocess: {workdir: %s/boxes}}\n"
	        "    idle: {type: local_subprocess, idle_timeout: 10,\n"
	        "           local_subprocess: {workdir: %s/boxes}}\n"
	        "    strictp: {type: fake, fake: {}, policy: {network_egress: deny}}\n"
	        "    slow: {type: local_subprocess, policy: {timeout: 0.5},\n"
	        "           local_subprocess: {workdir: %s/boxes}}\n"
	        "    quick: {type: local_subprocess, idle_timeout: 1,\n"
	        "            local_subprocess: {workdir: %s/boxes}}\n"
	        "    ext: {type: fake, environment: attached, idle_timeout: 1,\n"
	        "          fake: {attaches_external: true, attach_to: ext-1}}\n"
	        "    sluggish: {type: fake, policy: {timeout: 0.3}, fake: {create_delay: 30}}\n"
	        "    lazy: {type: local_subprocess, idle_timeout: 600,\n"
	        "           local_subprocess: {workdir: %s/boxes}}\n"
	        "    refusing: {type: fake, idle_timeout: 1,\n"
	        "               fake: {destroy_log: %s/destroys.log, destroy_refused_while: "
	        "%s/refuse}}\n",
	        enabled ? "true" : "false", fx->dir, fx->dir, fx->dir, fx->dir, fx->dir, fx->dir,
	        fx->dir, fx->dir, fx->dir, fx->dir);
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

static int teardown(void **state);

static int setup_with(void **state, bool enabled)
{
	fixture *fx = calloc(1, sizeof(*fx));
	if (!fx)
		return -1;
	strcpy(fx->dir, "/tmp/aks-manager-XXXXXX");
	if (!mkdtemp(fx->dir)) {
		free(fx);
		return -1;
	}
	snprintf(fx->cfg, sizeof(fx->cfg), "%s/config.yaml", fx->dir);
	snprintf(fx->state, sizeof(fx->state), "%s/state", fx->dir);
	*state = fx;
	if (write_config(fx, enabled) < 0 || open_runtime(fx, &fx->settings, &fx->rt) < 0) {
		teardown(state); /* cmocka does not run it after a failed setup */
		return -1;
	}
	return 0;
}

static int setup(void **state)
{
	return setup_with(state, true);
}

static int setup_disabled(void **state)
{
	return setup_with(state, false);
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

/* A string member of a JSON text (copied), or NULL. */
static char *member(const char *json, const char *key)
{
	struct json_object *o = json_tokener_parse(json), *v = NULL;
	char *s = NULL;
	if (o && json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string))
		s = strdup(json_object_get_string(v));
	json_object_put(o);
	return s;
}

static aks_state_store *open_store(fixture *fx)
{
	aks_state_store *st = NULL;
	assert_int_equal(aks__store_open(fx->state, &st, NULL), AKS_OK);
	return st;
}

static bool exists(const char *path)
{
	struct stat sb;
	return stat(path, &sb) == 0;
}

/* ---- §3.1 and the default session ---- */

static void test_contract(void **state)
{
	fixture *fx = *state;
	expect(fx, "run_code", "{\"code\": \"print('hi')\"}",
	       "{\"stdout\": \"print('hi')\", \"stderr\": \"\", \"exit_code\": 0, "
	       "\"sandbox_session_id\": \"default:default\"}");
	expect(fx, "run_command", "{\"command\": \"echo x\"}",
	       "{\"stdout\": \"echo x\", \"stderr\": \"\", \"exit_code\": 0, "
	       "\"sandbox_session_id\": \"default:default\"}");
	/* the default session was stored once, with its sandbox */
	aks_state_store *st = open_store(fx);
	aks_session_rec s;
	assert_int_equal(aks__sessions_find_in(st, "conv-a", "default:default", &s, NULL), AKS_OK);
	assert_non_null(s.sandbox_id);
	assert_string_equal(s.profile, "default");
	aks__session_clear(&s);
	aks__store_close(st);
}

static void test_default_session_files(void **state)
{
	fixture *fx = *state;
	expect(fx, "write_sandbox_file", "{\"path\": \"a.txt\", \"content\": \"hello\"}",
	       "{\"path\": \"a.txt\", \"written\": true, \"sandbox_session_id\": "
	       "\"default:default\"}");
	expect(fx, "read_sandbox_file", "{\"path\": \"a.txt\"}",
	       "{\"path\": \"a.txt\", \"content\": \"hello\", \"sandbox_session_id\": "
	       "\"default:default\"}");
	/* a missing file is an error, not empty content */
	char *got = call(fx, "read_sandbox_file", "{\"path\": \"missing.txt\"}");
	assert_non_null(strstr(got, "\"error\": "));
	/* an error names the session the call used, as every result does */
	assert_non_null(strstr(got, "\"sandbox_session_id\": \"default:default\""));
	free(got);
}

/* Two runtimes on one state directory (two CLI processes): the second sees
 * the first's default session and its files; destroy removes the sandbox. */
static void test_persist_across_runtimes(void **state)
{
	fixture *fx = *state;
	expect(fx, "write_sandbox_file",
	       "{\"path\": \"notes/n.txt\", \"content\": \"kept\", \"profile\": \"local\"}",
	       "{\"path\": \"notes/n.txt\", \"written\": true, \"sandbox_session_id\": "
	       "\"default:local\"}");
	aks_runtime_close(fx->rt);
	aks_settings_free(fx->settings);
	fx->rt = NULL;
	fx->settings = NULL;
	assert_int_equal(open_runtime(fx, &fx->settings, &fx->rt), 0);
	expect(fx, "read_sandbox_file", "{\"path\": \"notes/n.txt\", \"profile\": \"local\"}",
	       "{\"path\": \"notes/n.txt\", \"content\": \"kept\", \"sandbox_session_id\": "
	       "\"default:local\"}");
	char *pwd = call(fx, "run_command", "{\"command\": \"pwd\", \"profile\": \"local\"}");
	char *dir = member(pwd, "stdout");
	assert_non_null(dir);
	dir[strcspn(dir, "\n")] = '\0';
	assert_true(exists(dir));
	expect(fx, "destroy_sandbox_session", "{\"sandbox_session_id\": \"default:local\"}",
	       "{\"sandbox_session_id\": \"default:local\", \"destroyed\": true}");
	assert_false(exists(dir));
	/* reset: the next call starts clean */
	char *got =
	    call(fx, "read_sandbox_file", "{\"path\": \"notes/n.txt\", \"profile\": \"local\"}");
	assert_non_null(strstr(got, "\"error\": "));
	free(got);
	free(dir);
	free(pwd);
}

/* ---- explicit sessions ---- */

static void test_new_list_destroy(void **state)
{
	fixture *fx = *state;
	char *made = call(fx, "new_sandbox_session", "{\"name\": \"uv-project\"}");
	char *id = member(made, "sandbox_session_id");
	assert_non_null(id);
	assert_int_equal(strlen(id), 32);
	char want[512];
	snprintf(
	    want, sizeof(want),
	    "{\"sandbox_session_id\": \"%s\", \"name\": \"uv-project\", \"profile\": \"default\"}",
	    id);
	assert_string_equal(made, want);

	char args[256];
	snprintf(args, sizeof(args), "{\"code\": \"1\", \"sandbox_session_id\": \"%s\"}", id);
	snprintf(want, sizeof(want),
	         "{\"stdout\": \"1\", \"stderr\": \"\", \"exit_code\": 0, \"sandbox_session_id\": "
	         "\"%s\"}",
	         id);
	expect(fx, "run_code", args, want);

	char *list = call(fx, "list_sandbox_sessions", NULL);
	snprintf(want, sizeof(want),
	         "{\"sessions\": [{\"sandbox_session_id\": \"%s\", \"name\": \"uv-project\", "
	         "\"profile\": \"default\", \"status\": \"active\", \"last_used_at\": ",
	         id);
	assert_memory_equal(list, want, strlen(want));
	free(list);

	snprintf(args, sizeof(args), "{\"sandbox_session_id\": \"%s\"}", id);
	snprintf(want, sizeof(want), "{\"sandbox_session_id\": \"%s\", \"destroyed\": true}", id);
	expect(fx, "destroy_sandbox_session", args, want);
	expect(fx, "list_sandbox_sessions", "{}", "{\"sessions\": []}");
	/* Idempotent, and truthful: this second call destroys nothing. */
	snprintf(want, sizeof(want), "{\"sandbox_session_id\": \"%s\", \"destroyed\": false}", id);
	expect(fx, "destroy_sandbox_session", args, want);

	snprintf(args, sizeof(args), "{\"code\": \"1\", \"sandbox_session_id\": \"%s\"}", id);
	snprintf(want, sizeof(want),
	         "{\"error\": \"unknown sandbox session '%s'\", \"sandbox_session_id\": \"%s\"}",
	         id, id);
	expect(fx, "run_code", args, want);
	free(id);
	free(made);

	expect(
	    fx, "new_sandbox_session", "{\"profile\": \"shared\"}",
	    "{\"error\": \"cannot mint a new sandbox session for profile 'shared': scope "
	    "'per_runtime' does not support explicit sessions (per_call is ephemeral per "
	    "execution; per_runtime is a single shared session)\", \"sandbox_session_id\": \"\"}");
}

static void test_unknown_session_and_profile(void **state)
{
	fixture *fx = *state;
	expect(fx, "run_code", "{\"code\": \"1\", \"sandbox_session_id\": \"\"}",
	       "{\"error\": \"unknown sandbox session ''\", \"sandbox_session_id\": \"\"}");
	expect(fx, "run_code", "{\"code\": \"1\", \"sandbox_session_id\": \"nope\"}",
	       "{\"error\": \"unknown sandbox session 'nope'\", \"sandbox_session_id\": \"nope\"}");
	expect(fx, "run_code", "{\"code\": \"1\", \"profile\": \"x\"}",
	       "{\"error\": \"unknown sandbox profile 'x'; configured profiles: ['default', 'eph', "
	       "'ext', 'idle', 'lazy', 'local', 'quick', 'refusing', 'shared', 'slow', 'sluggish', "
	       "'strictp']\", "
	       "\"sandbox_session_id\": \"\"}");
	/* a miss creates nothing */
	expect(fx, "list_sandbox_sessions", NULL, "{\"sessions\": []}");
}

static void test_profile_mismatch(void **state)
{
	fixture *fx = *state;
	char *made = call(fx, "new_sandbox_session", "{\"name\": \"a\"}");
	char *id = member(made, "sandbox_session_id");
	char args[256], want[512];
	snprintf(args, sizeof(args),
	         "{\"code\": \"1\", \"sandbox_session_id\": \"%s\", \"profile\": \"local\"}", id);
	snprintf(want, sizeof(want),
	         "{\"error\": \"sandbox session '%s' belongs to profile 'default', but profile "
	         "'local' was requested; omit profile to reuse a session\", "
	         "\"sandbox_session_id\": \"%s\"}",
	         id, id);
	expect(fx, "run_code", args, want);
	/* naming its own profile is fine */
	snprintf(args, sizeof(args),
	         "{\"code\": \"1\", \"sandbox_session_id\": \"%s\", \"profile\": \"default\"}", id);
	char *got = call(fx, "run_code", args);
	assert_null(strstr(got, "\"error\""));
	free(got);
	free(id);
	free(made);
}

/* ---- scopes ---- */

static void test_per_call(void **state)
{
	fixture *fx = *state;
	char *got = call(fx, "run_command", "{\"command\": \"pwd\", \"profile\": \"eph\"}");
	char *dir = member(got, "stdout");
	assert_non_null(dir);
	dir[strcspn(dir, "\n")] = '\0';
	assert_non_null(strstr(dir, "/boxes/"));
	assert_false(exists(dir)); /* destroyed after the call */
	/* the ephemeral id is not handed out */
	assert_non_null(strstr(got, "\"sandbox_session_id\": \"\""));
	free(got);
	free(dir);
	/* every call is a fresh sandbox */
	got = call(fx, "write_sandbox_file",
	           "{\"path\": \"f\", \"content\": \"x\", \"profile\": \"eph\"}");
	assert_string_equal(got,
	                    "{\"path\": \"f\", \"written\": true, \"sandbox_session_id\": \"\"}");
	free(got);
	got = call(fx, "read_sandbox_file", "{\"path\": \"f\", \"profile\": \"eph\"}");
	assert_non_null(strstr(got, "\"error\": "));
	free(got);
	/* a failing call still tears its sandbox down */
	got = call(fx, "read_sandbox_file", "{\"path\": \"f\", \"profile\": \"eph\"}");
	free(got);
	char boxes[160];
	snprintf(boxes, sizeof(boxes), "%s/boxes", fx->dir);
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A '%s')\"", boxes);
	assert_int_equal(system(cmd), 0);
	/* nothing is stored, and an explicit id cannot name a per_call session */
	expect(fx, "list_sandbox_sessions", NULL, "{\"sessions\": []}");
	expect(fx, "run_code",
	       "{\"code\": \"1\", \"profile\": \"eph\", \"sandbox_session_id\": \"z\"}",
	       "{\"error\": \"unknown sandbox session 'z'\", \"sandbox_session_id\": \"z\"}");
}

static void test_per_runtime_shared(void **state)
{
	fixture *fx = *state;
	char *got =
	    call_in(fx->rt, "conv-a", "write_sandbox_file",
	            "{\"path\": \"s.txt\", \"content\": \"both\", \"profile\": \"shared\"}");
	assert_string_equal(got, "{\"path\": \"s.txt\", \"written\": true, \"sandbox_session_id\": "
	                         "\"default:shared\"}");
	free(got);
	got = call_in(fx->rt, "conv-b", "read_sandbox_file",
	              "{\"path\": \"s.txt\", \"profile\": \"shared\"}");
	assert_string_equal(got, "{\"path\": \"s.txt\", \"content\": \"both\", "
	                         "\"sandbox_session_id\": \"default:shared\"}");
	free(got);
	/* by id too, from another conversation, and listed for it */
	got = call_in(fx->rt, "conv-c", "read_sandbox_file",
	              "{\"path\": \"s.txt\", \"sandbox_session_id\": \"default:shared\"}");
	assert_non_null(strstr(got, "\"content\": \"both\""));
	free(got);
	got = call_in(fx->rt, "conv-c", "list_sandbox_sessions", NULL);
	assert_non_null(strstr(got, "\"sandbox_session_id\": \"default:shared\""));
	free(got);
	aks_state_store *st = open_store(fx);
	aks_session_rec s;
	assert_int_equal(
	    aks__sessions_find_in(st, AKS_STORE_NS_RUNTIME, "default:shared", &s, NULL), AKS_OK);
	aks__session_clear(&s);
	assert_int_equal(aks__sessions_find_in(st, "conv-a", "default:shared", &s, NULL),
	                 AKS_ENOTFOUND);
	aks__store_close(st);
}

static void test_conversation_isolation(void **state)
{
	fixture *fx = *state;
	char *made = call_in(fx->rt, "conv-a", "new_sandbox_session", "{\"profile\": \"local\"}");
	char *id = member(made, "sandbox_session_id");
	char args[256], want[512];
	snprintf(args, sizeof(args),
	         "{\"path\": \"secret\", \"content\": \"a's\", \"sandbox_session_id\": \"%s\"}",
	         id);
	free(call_in(fx->rt, "conv-a", "write_sandbox_file", args));
	snprintf(args, sizeof(args), "{\"path\": \"secret\", \"sandbox_session_id\": \"%s\"}", id);
	snprintf(want, sizeof(want),
	         "{\"error\": \"unknown sandbox session '%s'\", \"sandbox_session_id\": \"%s\"}",
	         id, id);
	char *got = call_in(fx->rt, "conv-b", "read_sandbox_file", args);
	assert_string_equal(got, want);
	free(got);
	/* B's destroy is a no-op on A's session */
	snprintf(args, sizeof(args), "{\"sandbox_session_id\": \"%s\"}", id);
	free(call_in(fx->rt, "conv-b", "destroy_sandbox_session", args));
	got = call_in(fx->rt, "conv-b", "list_sandbox_sessions", NULL);
	assert_string_equal(got, "{\"sessions\": []}");
	free(got);
	snprintf(args, sizeof(args), "{\"path\": \"secret\", \"sandbox_session_id\": \"%s\"}", id);
	got = call_in(fx->rt, "conv-a", "read_sandbox_file", args);
	assert_non_null(strstr(got, "\"content\": \"a's\""));
	free(got);
	free(id);
	free(made);
}

/* ---- idle reset and self-heal ---- */

static void test_idle_reset(void **state)
{
	fixture *fx = *state;
	free(call(fx, "write_sandbox_file",
	          "{\"path\": \"w\", \"content\": \"old\", \"profile\": \"idle\"}"));
	aks_state_store *st = open_store(fx);
	aks_session_rec s;
	assert_int_equal(aks__sessions_find_in(st, "conv-a", "default:idle", &s, NULL), AKS_OK);
	char *old_dir = strdup(s.sandbox_id);
	assert_true(exists(old_dir));
	/* within the timeout: no reset */
	s.last_used_at -= 9;
	assert_int_equal(aks__sessions_save(st, "conv-a", &s, NULL), AKS_OK);
	char *got = call(fx, "read_sandbox_file", "{\"path\": \"w\", \"profile\": \"idle\"}");
	assert_non_null(strstr(got, "\"content\": \"old\""));
	free(got);
	aks__session_clear(&s);
	/* idle for longer: reset with the managed notice, the old sandbox destroyed */
	assert_int_equal(aks__sessions_find_in(st, "conv-a", "default:idle", &s, NULL), AKS_OK);
	s.last_used_at -= 10.5;
	assert_int_equal(aks__sessions_save(st, "conv-a", &s, NULL), AKS_OK);
	aks__session_clear(&s);
	expect(fx, "run_command",
	       "{\"command\": \"cat w 2>/dev/null; echo $?\", \"profile\": \"idle\"}",
	       "{\"stdout\": \"1\\n\", \"stderr\": \"\", \"exit_code\": 0, \"sandbox_session_id\": "
	       "\"default:idle\", \"notice\": \"sandbox session 'default:idle' was idle for more "
	       "than 10s and has been reset; its previous workspace state was discarded\"}");
	assert_false(exists(old_dir));
	/* the next call has no notice */
	got = call(fx, "run_command", "{\"command\": \"true\", \"profile\": \"idle\"}");
	assert_null(strstr(got, "notice"));
	free(got);
	free(old_dir);
	aks__store_close(st);
}

/* A reset whose call fails is still told: the error has the reference's shape (no notice),
 * and the session's next successful call carries the notice, once. */
static void test_reset_notice_survives_error(void **state)
{
	fixture *fx = *state;
	free(call(fx, "write_sandbox_file",
	          "{\"path\": \"w\", \"content\": \"old\", \"profile\": \"idle\"}"));
	aks_state_store *st = open_store(fx);
	aks_session_rec s;
	assert_int_equal(aks__sessions_find_in(st, "conv-a", "default:idle", &s, NULL), AKS_OK);
	s.last_used_at -= 10.5;
	assert_int_equal(aks__sessions_save(st, "conv-a", &s, NULL), AKS_OK);
	aks__session_clear(&s);
	/* the reset happens, then the read fails: the file went with the old workspace */
	char *got = call(fx, "read_sandbox_file", "{\"path\": \"w\", \"profile\": \"idle\"}");
	assert_non_null(strstr(got, "\"error\": "));
	assert_null(strstr(got, "notice"));
	free(got);
	got = call(fx, "run_command", "{\"command\": \"true\", \"profile\": \"idle\"}");
	assert_non_null(strstr(got,
	                       "\"notice\": \"sandbox session 'default:idle' was idle for more "
	                       "than 10s and has been reset"));
	free(got);
	got = call(fx, "run_command", "{\"command\": \"true\", \"profile\": \"idle\"}");
	assert_null(strstr(got, "notice"));
	free(got);
	aks__store_close(st);
}

/* §11 item 5: creating a sandbox is bounded by the profile's timeout too. A backend that
 * would take 30 s to create is given up at the 0.3 s deadline, the agent gets a timeout
 * error, and no session is left pointing at a sandbox that never came. */
static void test_slow_create_times_out(void **state)
{
	fixture *fx = *state;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	char *got = call(fx, "run_command", "{\"command\": \"true\", \"profile\": \"sluggish\"}");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	assert_non_null(strstr(got, "\"error\": "));
	assert_non_null(strstr(got, "timed out"));
	free(got);
	/* nowhere near the 30 s the backend wanted (loose: this machine is noisy) */
	if (took > 10)
		fail_msg("create took %.1fs: the deadline was not passed to it", took);
	expect(fx, "list_sandbox_sessions", NULL, "{\"sessions\": []}");
}

static void test_self_heal(void **state)
{
	fixture *fx = *state;
	free(call(fx, "run_code", "{\"code\": \"1\"}"));
	aks_state_store *st = open_store(fx);
	aks_session_rec s;
	assert_int_equal(aks__sessions_find_in(st, "conv-a", "default:default", &s, NULL), AKS_OK);
	aks_profile *p = NULL;
	assert_int_equal(aks_settings_find_profile(fx->settings, "default", &p, NULL), AKS_OK);
	aks_call c;
	aks_call_init(&c, 10, NULL, NULL, NULL);
	assert_int_equal(aks_provider_destroy(aks_profile_get_provider(p), s.sandbox_id, &c, NULL),
	                 AKS_OK);
	expect(fx, "run_code", "{\"code\": \"2\"}",
	       "{\"stdout\": \"2\", \"stderr\": \"\", \"exit_code\": 0, \"sandbox_session_id\": "
	       "\"default:default\", \"notice\": \"the sandbox behind session 'default:default' no "
	       "longer existed and was recreated empty; its previous workspace state is gone\"}");
	aks_session_rec s2;
	assert_int_equal(aks__sessions_find_in(st, "conv-a", "default:default", &s2, NULL), AKS_OK);
	assert_non_null(s2.sandbox_id);
	assert_string_not_equal(s.sandbox_id, s2.sandbox_id);
	/* The core told the provider to clean up after the vanished sandbox: the old id was
	 * destroyed twice, by the test above and by the core's recreation. */
	char path[256], line[128];
	snprintf(path, sizeof(path), "%s/destroys.log", fx->dir);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	int old_id = 0;
	while (fgets(line, sizeof(line), f))
		old_id += strncmp(line, s.sandbox_id, strlen(s.sandbox_id)) == 0;
	fclose(f);
	assert_int_equal(old_id, 2);
	aks__session_clear(&s);
	aks__session_clear(&s2);
	aks__store_close(st);
}

/* Moves a stored session's last use `seconds` into the past. */
static void age_session(fixture *fx, const char *id, double seconds)
{
	aks_state_store *st = open_store(fx);
	aks_session_rec s;
	assert_int_equal(aks__sessions_find_in(st, "conv-a", id, &s, NULL), AKS_OK);
	s.last_used_at -= seconds;
	assert_int_equal(aks__sessions_save(st, "conv-a", &s, NULL), AKS_OK);
	aks__session_clear(&s);
	aks__store_close(st);
}

/* The session's last use as its record holds it. */
static double recorded_use(fixture *fx, const char *id)
{
	aks_state_store *st = open_store(fx);
	aks_session_rec s;
	assert_int_equal(aks__sessions_find_in(st, "conv-a", id, &s, NULL), AKS_OK);
	double used = s.last_used_at;
	aks__session_clear(&s);
	aks__store_close(st);
	return used;
}

/* A call that changes nothing but the last use writes the record only once it is a
 * hundredth of the idle timeout old (600 s: 5 s at most); an older one is written again. */
static void test_touch_is_throttled(void **state)
{
	fixture *fx = *state;
	free(call(fx, "run_command", "{\"command\": \"true\", \"profile\": \"lazy\"}"));
	double first = recorded_use(fx, "default:lazy");
	assert_true(first > 0);
	for (int i = 0; i < 3; i++) {
		char *got =
		    call(fx, "run_command", "{\"command\": \"echo hi\", \"profile\": \"lazy\"}");
		assert_non_null(strstr(got, "\"stdout\": \"hi\\n\""));
		free(got);
	}
	assert_true(recorded_use(fx, "default:lazy") == first);
	/* Five seconds and more since the recorded use: the next call records its own. */
	age_session(fx, "default:lazy", 6);
	free(call(fx, "run_command", "{\"command\": \"true\", \"profile\": \"lazy\"}"));
	assert_true(recorded_use(fx, "default:lazy") >= first);
}

/* write_sandbox_file says when the write landed in a reset or recreated sandbox. */
static void test_write_notice(void **state)
{
	fixture *fx = *state;
	free(call(fx, "write_sandbox_file",
	          "{\"path\": \"w\", \"content\": \"old\", \"profile\": \"idle\"}"));
	age_session(fx, "default:idle", 10.5);
	expect(
	    fx, "write_sandbox_file",
	    "{\"path\": \"w\", \"content\": \"new\", \"profile\": \"idle\"}",
	    "{\"path\": \"w\", \"written\": true, \"sandbox_session_id\": \"default:idle\", "
	    "\"notice\": \"sandbox session 'default:idle' was idle for more than 10s and has been "
	    "reset; its previous workspace state was discarded\"}");
	/* once only */
	expect(fx, "write_sandbox_file",
	       "{\"path\": \"w\", \"content\": \"newer\", \"profile\": \"idle\"}",
	       "{\"path\": \"w\", \"written\": true, \"sandbox_session_id\": "
	       "\"default:idle\"}");
	/* self-heal: the sandbox vanished behind the session's back */
	free(call(fx, "write_sandbox_file", "{\"path\": \"a\", \"content\": \"1\"}"));
	aks_state_store *st = open_store(fx);
	aks_session_rec s;
	assert_int_equal(aks__sessions_find_in(st, "conv-a", "default:default", &s, NULL), AKS_OK);
	aks_profile *p = NULL;
	assert_int_equal(aks_settings_find_profile(fx->settings, "default", &p, NULL), AKS_OK);
	aks_call c;
	aks_call_init(&c, 10, NULL, NULL, NULL);
	assert_int_equal(aks_provider_destroy(aks_profile_get_provider(p), s.sandbox_id, &c, NULL),
	                 AKS_OK);
	aks__session_clear(&s);
	aks__store_close(st);
	expect(fx, "write_sandbox_file", "{\"path\": \"a\", \"content\": \"2\"}",
	       "{\"path\": \"a\", \"written\": true, \"sandbox_session_id\": "
	       "\"default:default\", \"notice\": \"the sandbox behind session 'default:default' no "
	       "longer existed and was recreated empty; its previous workspace state is gone\"}");
}

/*
 * An attached profile (the fake's "ext-1"): the idle reset drops only the
 * binding, with the attached notice; neither the reset, the reaper nor
 * destroy_sandbox_session destroys the environment, whose files survive.
 */
static void test_attached_idle(void **state)
{
	fixture *fx = *state;
	expect(fx, "write_sandbox_file",
	       "{\"path\": \"keep\", \"content\": \"env\", \"profile\": \"ext\"}",
	       "{\"path\": \"keep\", \"written\": true, \"sandbox_session_id\": \"default:ext\"}");
	aks_state_store *st = open_store(fx);
	aks_session_rec s;
	assert_int_equal(aks__sessions_find_in(st, "conv-a", "default:ext", &s, NULL), AKS_OK);
	assert_string_equal(s.sandbox_id, "ext-1");
	aks__session_clear(&s);
	age_session(fx, "default:ext", 1.5);
	/* the reaper leaves attached sessions alone */
	assert_int_equal(aks_runtime_reap(fx->rt, NULL), AKS_OK);
	assert_int_equal(aks__sessions_find_in(st, "conv-a", "default:ext", &s, NULL), AKS_OK);
	assert_string_equal(s.sandbox_id, "ext-1");
	assert_null(s.reset_notice);
	aks__session_clear(&s);
	expect(
	    fx, "run_code", "{\"code\": \"x\", \"profile\": \"ext\"}",
	    "{\"stdout\": \"x\", \"stderr\": \"\", \"exit_code\": 0, \"sandbox_session_id\": "
	    "\"default:ext\", \"notice\": \"sandbox session 'default:ext' was idle for more than "
	    "1s and its binding was reset; the attached environment itself is untouched\"}");
	/* untouched indeed: rebound to ext-1, the file still there */
	assert_int_equal(aks__sessions_find_in(st, "conv-a", "default:ext", &s, NULL), AKS_OK);
	assert_string_equal(s.sandbox_id, "ext-1");
	aks__session_clear(&s);
	expect(fx, "read_sandbox_file", "{\"path\": \"keep\", \"profile\": \"ext\"}",
	       "{\"path\": \"keep\", \"content\": \"env\", \"sandbox_session_id\": "
	       "\"default:ext\"}");
	/* destroy forgets the session but never destroys the environment */
	free(call(fx, "destroy_sandbox_session", "{\"sandbox_session_id\": \"default:ext\"}"));
	assert_int_equal(aks__sessions_find_in(st, "conv-a", "default:ext", &s, NULL),
	                 AKS_ENOTFOUND);
	expect(fx, "read_sandbox_file", "{\"path\": \"keep\", \"profile\": \"ext\"}",
	       "{\"path\": \"keep\", \"content\": \"env\", \"sandbox_session_id\": "
	       "\"default:ext\"}");
	/* the check above can fail: once the environment is destroyed, attaching fails */
	aks_profile *p = NULL;
	assert_int_equal(aks_settings_find_profile(fx->settings, "ext", &p, NULL), AKS_OK);
	aks_call c;
	aks_call_init(&c, 10, NULL, NULL, NULL);
	assert_int_equal(aks_provider_destroy(aks_profile_get_provider(p), "ext-1", &c, NULL),
	                 AKS_OK);
	char *got = call(fx, "read_sandbox_file", "{\"path\": \"keep\", \"profile\": \"ext\"}");
	assert_non_null(strstr(got, "attached environment 'ext-1' (profile 'ext') is unreachable"));
	free(got);
	aks__store_close(st);
}

/* ---- the background reaper ---- */

/* A session idle past its timeout loses its sandbox with no call touching it. */
static void test_background_reaper(void **state)
{
	fixture *fx = *state;
	char *got = call(fx, "run_command", "{\"command\": \"pwd\", \"profile\": \"quick\"}");
	char *dir = member(got, "stdout");
	free(got);
	assert_non_null(dir);
	dir[strcspn(dir, "\n")] = '\0';
	assert_true(exists(dir));
	aks_error *err = NULL;
	assert_int_equal(aks_runtime_start_reaper(fx->rt, 0.2, &err), AKS_OK);
	assert_int_equal(aks_runtime_start_reaper(fx->rt, 0.2, &err), AKS_EINVAL);
	aks_error_free(err);
	int64_t t0 = aks__now_ms();
	while (exists(dir) && aks__now_ms() - t0 < 10000)
		usleep(50000);
	assert_false(exists(dir));
	/* idle_timeout is 1 s, strictly exceeded: not reaped early */
	assert_true(aks__now_ms() - t0 >= 500);
	free(dir);
	/* the session stays, and its next call says what happened */
	expect(
	    fx, "write_sandbox_file",
	    "{\"path\": \"f\", \"content\": \"x\", \"profile\": \"quick\"}",
	    "{\"path\": \"f\", \"written\": true, \"sandbox_session_id\": \"default:quick\", "
	    "\"notice\": \"sandbox session 'default:quick' was idle for more than 1s and has been "
	    "reset; its previous workspace state was discarded\"}");
}

/* How many times destroys.log lists `id`. */
static int destroys_of(fixture *fx, const char *id)
{
	char path[256], line[128];
	snprintf(path, sizeof(path), "%s/destroys.log", fx->dir);
	FILE *f = fopen(path, "r");
	int n = 0;
	while (f && fgets(line, sizeof(line), f))
		n += strncmp(line, id, strlen(id)) == 0 && line[strlen(id)] == '\n';
	if (f)
		fclose(f);
	return n;
}

/* The session's recorded sandbox (copied), or NULL. */
static char *recorded_sandbox(fixture *fx, const char *id)
{
	aks_state_store *st = open_store(fx);
	aks_session_rec s;
	assert_int_equal(aks__sessions_find_in(st, "conv-a", id, &s, NULL), AKS_OK);
	char *sandbox = s.sandbox_id ? strdup(s.sandbox_id) : NULL;
	aks__session_clear(&s);
	aks__store_close(st);
	return sandbox;
}

/* A sandbox the backend refuses to destroy stays recorded, so a later pass destroys it:
 * forgotten, it would run on with only `aksandbox gc` to find it. */
static void test_reaper_keeps_refused(void **state)
{
	fixture *fx = *state;
	free(call(fx, "run_command", "{\"command\": \"true\", \"profile\": \"refusing\"}"));
	char *box = recorded_sandbox(fx, "default:refusing");
	assert_non_null(box);
	char refuse[128];
	snprintf(refuse, sizeof(refuse), "%s/refuse", fx->dir);
	FILE *f = fopen(refuse, "w");
	assert_non_null(f);
	fclose(f);
	age_session(fx, "default:refusing", 5);
	assert_int_equal(aks_runtime_reap(fx->rt, NULL), AKS_OK);
	char *kept = recorded_sandbox(fx, "default:refusing");
	assert_non_null(kept);
	assert_string_equal(kept, box);
	assert_int_equal(destroys_of(fx, box), 0);
	/* The backend takes the destroy again: the next pass destroys it and forgets it. */
	assert_int_equal(unlink(refuse), 0);
	assert_int_equal(aks_runtime_reap(fx->rt, NULL), AKS_OK);
	assert_null(recorded_sandbox(fx, "default:refusing"));
	assert_int_equal(destroys_of(fx, box), 1);
	expect(fx, "run_command", "{\"command\": \"true\", \"profile\": \"refusing\"}",
	       "{\"stdout\": \"true\", \"stderr\": \"\", \"exit_code\": 0, "
	       "\"sandbox_session_id\": \"default:refusing\", \"notice\": \"sandbox session "
	       "'default:refusing' was idle for more than 1s and has been reset; its previous "
	       "workspace state was discarded\"}");
	free(kept);
	free(box);
}

static void test_reaper_close_is_prompt(void **state)
{
	fixture *fx = *state;
	aks_error *err = NULL;
	assert_int_equal(aks_runtime_start_reaper(fx->rt, 0, &err), AKS_EINVAL);
	aks_error_free(err);
	err = NULL;
	assert_int_equal(aks_runtime_start_reaper(fx->rt, -1, &err), AKS_EINVAL);
	aks_error_free(err);
	err = NULL;
	assert_int_equal(aks_runtime_start_reaper(NULL, 1, &err), AKS_EINVAL);
	aks_error_free(err);
	assert_int_equal(aks_runtime_start_reaper(fx->rt, 5, NULL), AKS_OK);
	usleep(100000); /* the thread is in its timed wait */
	int64_t t0 = aks__now_ms();
	aks_runtime_close(fx->rt);
	fx->rt = NULL;
	assert_true(aks__now_ms() - t0 < 1000);
}

/* ---- gates, arguments, API misuse ---- */

static void test_policy_gate(void **state)
{
	fixture *fx = *state;
	expect(fx, "run_code", "{\"code\": \"1\", \"profile\": \"strictp\"}",
	       "{\"error\": \"provider 'fake' cannot enforce policy dimensions ['network_egress'] "
	       "(strict); relax the policy or set strict=false\", \"sandbox_session_id\": "
	       "\"default:strictp\"}");
	/* refused before anything was created or stored */
	expect(fx, "list_sandbox_sessions", NULL, "{\"sessions\": []}");
}

/* The execution runs under policy.timeout; the session keeps its sandbox. */
static void test_timeout(void **state)
{
	fixture *fx = *state;
	free(call(fx, "write_sandbox_file",
	          "{\"path\": \"k\", \"content\": \"v\", \"profile\": \"slow\"}"));
	int64_t t0 = aks__now_ms();
	expect(fx, "run_command", "{\"command\": \"sleep 30\", \"profile\": \"slow\"}",
	       "{\"error\": \"sandbox operation 'execute_command' exceeded timeout 0.5s\", "
	       "\"sandbox_session_id\": \"default:slow\"}");
	assert_true(aks__now_ms() - t0 < 10000);
	char *got = call(fx, "read_sandbox_file", "{\"path\": \"k\", \"profile\": \"slow\"}");
	assert_non_null(strstr(got, "\"content\": \"v\""));
	free(got);
}

static void test_bad_arguments(void **state)
{
	fixture *fx = *state;
	expect(
	    fx, "run_code", "{}",
	    "{\"error\": \"run_code: argument 'code' is required\", \"sandbox_session_id\": \"\"}");
	char *got = call(fx, "run_code", "{\"code\": 1, \"sandbox_session_id\": \"s\"}");
	assert_non_null(strstr(got, "run_code: argument 'code' must be a string"));
	assert_non_null(strstr(got, "\"sandbox_session_id\": \"s\"}"));
	free(got);
	got = call(fx, "run_code", "{\"code\": ");
	assert_non_null(strstr(got, "{\"error\": \"run_code: the arguments are not valid JSON"));
	free(got);
	got = call(fx, "run_code", "{\"code\": \"1\"} x");
	assert_non_null(strstr(got, "not valid JSON"));
	free(got);
	got = call(fx, "run_code", "[]");
	assert_non_null(strstr(got, "\"error\""));
	free(got);
	expect(fx, "rm_rf", "{}",
	       "{\"error\": \"unknown tool 'rm_rf'\", \"sandbox_session_id\": \"\"}");
	expect(fx, "check_sandbox_task", "{\"task_id\": \"t1\"}",
	       "{\"task_id\": \"t1\", \"status\": \"unknown\"}");
	/* nothing ran */
	expect(fx, "list_sandbox_sessions", NULL, "{\"sessions\": []}");
}

static void test_api_misuse(void **state)
{
	fixture *fx = *state;
	aks_tool_context ctx;
	char *out = (char *)"unchanged";
	aks_error *err = NULL;
	aks_tool_context_init(&ctx, "@runtime", NULL);
	assert_int_equal(
	    aks_runtime_call_tool(fx->rt, "list_sandbox_sessions", NULL, &ctx, &out, &err),
	    AKS_EINVAL);
	assert_null(out);
	assert_non_null(strstr(aks_error_message(err), "reserved"));
	aks_error_free(err);
	err = NULL;
	aks_tool_context_init(&ctx, "", NULL);
	assert_int_equal(
	    aks_runtime_call_tool(fx->rt, "run_code", "{\"code\": \"1\"}", &ctx, &out, &err),
	    AKS_EINVAL);
	aks_error_free(err);
	err = NULL;
	assert_int_equal(aks_runtime_call_tool(fx->rt, "run_code", NULL, NULL, &out, &err),
	                 AKS_EINVAL);
	aks_error_free(err);
}

static void test_disabled(void **state)
{
	fixture *fx = *state;
	expect(fx, "run_code", "{\"code\": \"1\"}",
	       "{\"error\": \"sandbox capability is disabled\"}");
	expect(fx, "list_sandbox_sessions", NULL,
	       "{\"error\": \"sandbox capability is disabled\"}");
	char *g = aks_runtime_guidance(fx->rt, NULL);
	assert_string_equal(g, "");
	free(g);
	assert_false(exists(fx->state)); /* no state touched */
}

static void test_schemas_and_guidance(void **state)
{
	fixture *fx = *state;
	char *text = aks_runtime_tool_schemas(fx->rt);
	struct json_object *arr = json_tokener_parse(text);
	assert_true(json_object_is_type(arr, json_type_array));
	assert_int_equal(json_object_array_length(arr), 8);
	static const char *const names[] = {"run_code",
	                                    "run_command",
	                                    "write_sandbox_file",
	                                    "read_sandbox_file",
	                                    "check_sandbox_task",
	                                    "list_sandbox_sessions",
	                                    "new_sandbox_session",
	                                    "destroy_sandbox_session"};
	for (size_t i = 0; i < 8; i++) {
		struct json_object *t = json_object_array_get_idx(arr, i), *v;
		assert_true(json_object_object_get_ex(t, "name", &v));
		assert_string_equal(json_object_get_string(v), names[i]);
		assert_true(json_object_object_get_ex(t, "parameters", &v));
		assert_true(json_object_is_type(v, json_type_object));
	}
	json_object_put(arr);
	free(text);
	char *g = aks_runtime_guidance(fx->rt, "anyone");
	assert_memory_equal(g, "[Sandbox execution]\n", 20);
	/* the loaded instance's isolation, which for fake is none: said plainly */
	assert_non_null(strstr(g, "- 'default' (default): provider 'fake', scope per_session, "
	                          "isolation none (NOT isolated: code runs directly on its "
	                          "host, with the rights of its user)\n"));
	assert_null(strstr(g, "isolated sandbox"));
	free(g);
}

/* ---- the per-session lock ---- */

struct racer {
	aks_runtime *rt;
	char *out;
};

static void *race(void *arg)
{
	struct racer *r = arg;
	aks_tool_context ctx;
	aks_tool_context_init(&ctx, "conv-race", NULL);
	aks_runtime_call_tool(r->rt, "run_command",
	                      "{\"command\": \"pwd\", \"profile\": \"local\"}", &ctx, &r->out,
	                      NULL);
	return NULL;
}

/* ---- gc: which creation claims protect a sandbox (docs/gc.md) ---- */

/* The one claim record's path (NULL when there is not exactly one); malloc'd. */
static char *claim_file(fixture *fx)
{
	char cmd[256], line[512] = "";
	snprintf(cmd, sizeof(cmd), "ls '%s/ns/%%40owner.d/' | grep '^claim'", fx->state);
	FILE *p = popen(cmd, "r");
	int lines = 0;
	while (p && fgets(line, sizeof(line), p))
		lines++;
	if (p)
		pclose(p);
	if (lines != 1)
		return NULL;
	line[strcspn(line, "\n")] = '\0';
	char *path = NULL;
	return asprintf(&path, "%s/ns/%%40owner.d/%s", fx->state, line) < 0 ? NULL : path;
}

/* Replaces the claim record: made on `machine` by `pid`, `age` seconds ago. */
static void forge_claim(fixture *fx, const char *machine, long pid, double age)
{
	char *path = claim_file(fx);
	assert_non_null(path);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f,
	        "{\"profile\": \"local\", \"machine\": \"%s\", \"pid\": %ld, \"pid_start\": \"1\", "
	        "\"created_at\": %.3f}",
	        machine, pid, (double)time(NULL) - age);
	assert_int_equal(fclose(f), 0);
	free(path);
}

/* gc's report member as an integer (a list: its length). */
static int64_t gc_member(aks_runtime *rt, const char *key, char **json)
{
	char *text = NULL;
	aks_error *e = NULL;
	if (aks_runtime_gc(rt, false, &text, &e) < 0)
		fail_msg("gc: %s", aks_error_message(e));
	json_object *r = json_tokener_parse(text);
	json_object *v = json_object_object_get(r, key);
	int64_t n = json_object_is_type(v, json_type_array) ? (int64_t)json_object_array_length(v)
	                                                    : json_object_get_int64(v);
	json_object_put(r);
	if (json)
		*json = text;
	else
		free(text);
	return n;
}

static aks_sandbox *claimed_sandbox(fixture *fx, aks_profile **p)
{
	aks_error *e = NULL;
	assert_int_equal(aks_settings_find_profile(fx->settings, "local", p, &e), 0);
	aks_call call;
	aks_call_init(&call, 30, aks_profile_get_policy(*p), NULL, NULL);
	aks_sandbox *sb = NULL;
	if (aks_runtime_create_sandbox(fx->rt, *p, &call, &sb, &e) < 0)
		fail_msg("create: %s", aks_error_message(e));
	return sb;
}

static void test_gc_claims(void **state)
{
	fixture *fx = *state;
	aks_profile *p = NULL;
	aks_sandbox *sb = claimed_sandbox(fx, &p);
	char *dir = strdup(aks_sandbox_get_id(sb));
	/* Alive here: its creator is this process. */
	char *json = NULL;
	assert_int_equal(gc_member(fx->rt, "in_creation", &json), 1);
	/* The fake provider cannot list what it makes: said, never guessed at. */
	assert_non_null(strstr(json, "\"profile\": \"default\", \"reason\": \"its provider cannot "
	                             "list the sandboxes it created\""));
	free(json);
	assert_true(exists(dir));
	/* Another machine's claim counts for an hour... */
	forge_claim(fx, "another-machine/1", 1, 60);
	assert_int_equal(gc_member(fx->rt, "in_creation", NULL), 1);
	assert_true(exists(dir));
	/* ... and no longer. */
	forge_claim(fx, "another-machine/1", 1, 7200);
	assert_int_equal(gc_member(fx->rt, "removed", NULL), 1);
	assert_false(exists(dir));
	assert_null(claim_file(fx)); /* the dead claim is cleared */
	aks_call call;
	aks_call_init(&call, 30, NULL, NULL, NULL);
	aks_error *e = NULL;
	assert_int_equal(aks_runtime_destroy_sandbox(fx->rt, p, sb, &call, &e), 0); /* idempotent */
	free(dir);

	/* On this machine a pid decides at once: a process that has exited... */
	sb = claimed_sandbox(fx, &p);
	dir = strdup(aks_sandbox_get_id(sb));
	char *path = claim_file(fx);
	assert_non_null(path);
	FILE *f = fopen(path, "r");
	char rec[1024] = "";
	assert_non_null(f);
	assert_true(fgets(rec, sizeof(rec), f) != NULL);
	fclose(f);
	free(path);
	json_object *r = json_tokener_parse(rec);
	char machine[128];
	snprintf(machine, sizeof(machine), "%s",
	         json_object_get_string(json_object_object_get(r, "machine")));
	json_object_put(r);
	pid_t child = fork();
	if (child == 0)
		_exit(0);
	assert_true(child > 0);
	waitpid(child, NULL, 0);
	forge_claim(fx, machine, (long)child, 0);
	assert_int_equal(gc_member(fx->rt, "removed", NULL), 1);
	assert_false(exists(dir));
	assert_int_equal(aks_runtime_destroy_sandbox(fx->rt, p, sb, &call, &e), 0);
	free(dir);

	/* ... and so does a live pid whose start time is another process's (a reused pid). */
	sb = claimed_sandbox(fx, &p);
	dir = strdup(aks_sandbox_get_id(sb));
	forge_claim(fx, machine, (long)getpid(), 0); /* pid_start "1": not this process's */
	assert_int_equal(gc_member(fx->rt, "removed", NULL), 1);
	assert_false(exists(dir));
	assert_int_equal(aks_runtime_destroy_sandbox(fx->rt, p, sb, &call, &e), 0);
	free(dir);
	/* A clean destroy releases its claim: nothing is left for gc. */
	sb = claimed_sandbox(fx, &p);
	assert_non_null(path = claim_file(fx));
	free(path);
	assert_int_equal(aks_runtime_destroy_sandbox(fx->rt, p, sb, &call, &e), 0);
	assert_null(claim_file(fx));
}

/* The background reaper collects too: a sandbox whose creator died goes without a call. */
static void test_reaper_collects(void **state)
{
	fixture *fx = *state;
	aks_profile *p = NULL;
	aks_sandbox *sb = claimed_sandbox(fx, &p);
	char *dir = strdup(aks_sandbox_get_id(sb));
	forge_claim(fx, "another-machine/1", 1, 7200); /* its creator, long gone */
	aks_error *e = NULL;
	assert_int_equal(aks_runtime_start_reaper(fx->rt, 0.1, &e), 0);
	for (int i = 0; i < 100 && exists(dir); i++)
		usleep(50000);
	assert_false(exists(dir));
	aks_call call;
	aks_call_init(&call, 30, NULL, NULL, NULL);
	assert_int_equal(aks_runtime_destroy_sandbox(fx->rt, p, sb, &call, &e), 0);
	free(dir);
}

/* Eight first calls at once on one default session (half through a second
 * runtime, as another process would): exactly one sandbox is created. */
static void test_one_sandbox_per_session(void **state)
{
	fixture *fx = *state;
	aks_settings *s2 = NULL;
	aks_runtime *rt2 = NULL;
	assert_int_equal(open_runtime(fx, &s2, &rt2), 0);
	struct racer r[8];
	pthread_t th[8];
	for (int i = 0; i < 8; i++) {
		r[i] = (struct racer){i % 2 ? rt2 : fx->rt, NULL};
		assert_int_equal(pthread_create(&th[i], NULL, race, &r[i]), 0);
	}
	for (int i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
	char *first = member(r[0].out, "stdout");
	assert_non_null(first);
	for (int i = 0; i < 8; i++) {
		char *o = member(r[i].out, "stdout");
		assert_non_null(o);
		assert_string_equal(o, first);
		free(o);
		free(r[i].out);
	}
	free(first);
	char cmd[256];
	snprintf(cmd, sizeof(cmd),
	         "test \"$(find '%s/boxes' -mindepth 1 -maxdepth 1 -type d | wc -l)\" -eq 1",
	         fx->dir);
	assert_int_equal(system(cmd), 0);
	aks_runtime_close(rt2);
	aks_settings_free(s2);
}

int main(void)
{
	aks_log_set_level(AKS_LOG_ERROR);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_contract, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_default_session_files, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_persist_across_runtimes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_new_list_destroy, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unknown_session_and_profile, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_profile_mismatch, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_per_call, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_per_runtime_shared, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_conversation_isolation, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reset_notice_survives_error, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_slow_create_times_out, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_idle_reset, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_touch_is_throttled, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_self_heal, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_write_notice, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_attached_idle, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_background_reaper, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reaper_close_is_prompt, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reaper_keeps_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_policy_gate, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_api_misuse, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_disabled, setup_disabled, teardown),
	    cmocka_unit_test_setup_teardown(test_schemas_and_guidance, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_one_sandbox_per_session, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_gc_claims, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reaper_collects, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
