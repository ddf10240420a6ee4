/* Unit tests: sandbox handles kept between a process's operations (core/plugin/handle_cache.h).
 *
 * The cache itself, over local_subprocess handles: take hands a handle out once, put keeps
 * it, a second handle on one sandbox is closed, the size limit closes the least recently
 * kept, an age limit closes idle ones, drop closes one. Then the tools through the build's
 * aksandbox-agent, where a kept handle is what makes a session stateful: `x = 41` then
 * `print(x + 1)` prints 42 in two run_code calls (and one interpreter answers both), a
 * sandbox deleted behind the kept handle's back is recreated with the notice, and
 * destroy_sandbox_session ends the agent. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include <aksandbox/aksandbox.h>

#include "core/plugin/handle_cache.h"

static const char *const no_env[] = {NULL};

typedef struct fixture {
	char dir[64];
	char cfg[128];
	char state[128];
	aks_settings *settings;
	aks_runtime *rt;
} fixture;

static const char *builddir(void)
{
	const char *b = getenv("AKS_TEST_BUILDDIR");
	return b && *b ? b : ".";
}

static int write_config(fixture *fx)
{
	FILE *f = fopen(fx->cfg, "w");
	if (!f)
		return -1;
	fprintf(f,
	        "sandbox:\n"
	        "  enabled: true\n"
	        "  type: local_subprocess\n"
	        "  local_subprocess:\n"
	        "    workdir: %s/sandboxes\n"
	        "    agent: %s/agent/aksandbox-agent\n"
	        "  broker: {flavor: thread}\n",
	        fx->dir, builddir());
	return fclose(f);
}

static int setup(void **state)
{
	fixture *fx = calloc(1, sizeof(*fx));
	if (!fx)
		return -1;
	strcpy(fx->dir, "/tmp/aks-handles-XXXXXX");
	if (!mkdtemp(fx->dir))
		return -1;
	snprintf(fx->cfg, sizeof(fx->cfg), "%s/config.yaml", fx->dir);
	snprintf(fx->state, sizeof(fx->state), "%s/state", fx->dir);
	aks_error *err = NULL;
	if (write_config(fx) < 0 || aks_settings_load(fx->cfg, no_env, &fx->settings, &err) < 0 ||
	    aks_runtime_open(fx->settings, fx->state, &fx->rt, &err) < 0) {
		fprintf(stderr, "setup: %s\n", err ? aks_error_message(err) : "config");
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
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", fx->dir);
	free(fx);
	return 0;
}

/* A local_subprocess provider of its own (per call: the cache does not care), for the cache
 * tests, in a directory under the fixture's. */
static aks_provider *open_provider(fixture *fx)
{
	(void)fx;
	aks_error *err = NULL;
	const aks_plugin *plugin = NULL;
	int rc = aks_plugin_load("local_subprocess", AKS_PLUGIN_PROVIDER, &plugin, &err);
	if (rc < 0)
		fail_msg("load: %s", aks_error_message(err));
	aks_provider *prov = NULL;
	rc = aks_provider_open(plugin, NULL, &prov, &err);
	if (rc < 0)
		fail_msg("open: %s", aks_error_message(err));
	return prov;
}

static aks_sandbox *new_sandbox(aks_provider *prov)
{
	aks_call call;
	aks_call_init(&call, 30, NULL, NULL, NULL);
	aks_sandbox *sb = NULL;
	aks_error *err = NULL;
	if (aks_provider_create(prov, &call, &sb, &err) < 0)
		fail_msg("create: %s", aks_error_message(err));
	return sb;
}

static void destroy_sandbox(aks_provider *prov, const char *id)
{
	aks_call call;
	aks_call_init(&call, 30, NULL, NULL, NULL);
	aks_error *err = NULL;
	if (aks_provider_destroy(prov, id, &call, &err) < 0)
		fail_msg("destroy: %s", aks_error_message(err));
}

/* ---- the cache ---- */

static void test_take_put_drop(void **state)
{
	fixture *fx = *state;
	aks_provider *prov = open_provider(fx);
	aks_handle_cache *c = aks__handle_cache_new(4);
	assert_non_null(c);
	aks_sandbox *a = new_sandbox(prov);
	char *id = strdup(aks_sandbox_get_id(a));
	assert_null(aks__handle_cache_take(c, id));
	aks__handle_cache_put(c, a, 0);
	assert_int_equal(aks__handle_cache_size(c), 1);
	/* handed out once: a second take finds nothing while it is in use */
	aks_sandbox *t = aks__handle_cache_take(c, id);
	assert_ptr_equal(t, a);
	assert_null(aks__handle_cache_take(c, id));
	assert_int_equal(aks__handle_cache_size(c), 0);
	aks__handle_cache_put(c, t, 0);
	/* a second handle on the same sandbox is closed, the first stays */
	aks_call call;
	aks_call_init(&call, 30, NULL, NULL, NULL);
	aks_sandbox *b = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_provider_attach(prov, id, &call, &b, &err), AKS_OK);
	aks__handle_cache_put(c, b, 0);
	assert_int_equal(aks__handle_cache_size(c), 1);
	assert_ptr_equal(aks__handle_cache_take(c, id), a);
	aks__handle_cache_put(c, a, 0);
	aks__handle_cache_drop(c, id);
	assert_int_equal(aks__handle_cache_size(c), 0);
	assert_null(aks__handle_cache_take(c, id));
	aks__handle_cache_free(c);
	destroy_sandbox(prov, id);
	free(id);
	/* every handle was closed: the provider finalises (it refuses with one open) */
	aks_provider_close(prov);
}

static void test_limits(void **state)
{
	fixture *fx = *state;
	aks_provider *prov = open_provider(fx);
	aks_handle_cache *c = aks__handle_cache_new(2);
	char *ids[3];
	for (int i = 0; i < 3; i++) {
		aks_sandbox *sb = new_sandbox(prov);
		ids[i] = strdup(aks_sandbox_get_id(sb));
		aks__handle_cache_put(c, sb, 0);
	}
	/* the least recently kept went over the size limit */
	assert_int_equal(aks__handle_cache_size(c), 2);
	assert_null(aks__handle_cache_take(c, ids[0]));
	aks_sandbox *sb = aks__handle_cache_take(c, ids[1]);
	assert_non_null(sb);
	/* an age limit: kept for 100 ms, gone after 300 */
	aks__handle_cache_put(c, sb, 100);
	usleep(300 * 1000);
	assert_null(aks__handle_cache_take(c, ids[1]));
	assert_int_equal(aks__handle_cache_size(c), 1); /* ids[2], no age limit */
	aks__handle_cache_free(c);
	for (int i = 0; i < 3; i++) {
		destroy_sandbox(prov, ids[i]);
		free(ids[i]);
	}
	aks_provider_close(prov);
}

/* ---- the tools through the agent ---- */

static struct json_object *call_tool(fixture *fx, const char *tool, const char *args)
{
	aks_tool_context ctx;
	aks_tool_context_init(&ctx, "conv-handles", NULL);
	char *out = NULL;
	aks_error *err = NULL;
	if (aks_runtime_call_tool(fx->rt, tool, args, &ctx, &out, &err) < 0)
		fail_msg("%s: %s", tool, aks_error_message(err));
	struct json_object *j = json_tokener_parse(out);
	if (!j)
		fail_msg("%s: not JSON: %s", tool, out);
	free(out);
	return j;
}

static const char *str(struct json_object *j, const char *key)
{
	struct json_object *v = json_object_object_get(j, key);
	return v ? json_object_get_string(v) : NULL;
}

static void test_stateful_across_tool_calls(void **state)
{
	fixture *fx = *state;
	struct json_object *r = call_tool(fx, "run_code",
	                                  "{\"code\": \"x = 41\\nimport os\\n"
	                                  "print(os.getpid())\"}");
	const char *pid1 = str(r, "stdout");
	assert_non_null(pid1);
	char first[32];
	snprintf(first, sizeof(first), "%s", pid1);
	json_object_put(r);
	r = call_tool(fx, "run_code", "{\"code\": \"print(x + 1)\\nprint(os.getpid())\"}");
	const char *out = str(r, "stdout");
	assert_non_null(out);
	/* the same interpreter answered: 42, and its pid again */
	char want[64];
	snprintf(want, sizeof(want), "42\n%s", first);
	assert_string_equal(out, want);
	json_object_put(r);
}

static bool pid_alive(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *end = strrchr(buf, ')');
	/* a zombie is gone: PID 1 may reap late */
	return end && end[1] == ' ' && end[2] != 'Z' && end[2] != 'X';
}

/* The agent's pid: the parent of the shell a command runs in is its run's supervisor, whose
 * parent is the agent. */
static pid_t agent_pid(fixture *fx, char *session, size_t len)
{
	struct json_object *r =
	    call_tool(fx, "run_command",
	              "{\"command\": \"cut -d' ' -f4 /proc/$(cut -d' ' -f4 /proc/$$/stat)/stat\"}");
	const char *out = str(r, "stdout");
	pid_t pid = out ? (pid_t)atoi(out) : 0;
	assert_non_null(str(r, "sandbox_session_id"));
	snprintf(session, len, "%s", str(r, "sandbox_session_id"));
	json_object_put(r);
	assert_true(pid > 1);
	char path[64], comm[64] = "";
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(comm, sizeof(comm), f));
	fclose(f);
	assert_string_equal(comm, "aksandbox-agent\n");
	return pid;
}

static void test_same_agent_and_destroy_ends_it(void **state)
{
	fixture *fx = *state;
	char session[128], args[256];
	pid_t a = agent_pid(fx, session, sizeof(session));
	assert_int_equal(agent_pid(fx, session, sizeof(session)), a); /* kept: the same agent */
	snprintf(args, sizeof(args), "{\"sandbox_session_id\": \"%s\"}", session);
	struct json_object *r = call_tool(fx, "destroy_sandbox_session", args);
	json_object_put(r);
	for (int i = 0; i < 100 && pid_alive(a); i++)
		usleep(50 * 1000);
	assert_false(pid_alive(a));
}

static void test_deleted_behind_its_back(void **state)
{
	fixture *fx = *state;
	struct json_object *r = call_tool(fx, "run_command", "{\"command\": \"pwd\"}");
	char dir[512];
	snprintf(dir, sizeof(dir), "%s", str(r, "stdout"));
	json_object_put(r);
	dir[strcspn(dir, "\n")] = '\0';
	assert_non_null(strstr(dir, "/sandboxes/ak-sandbox-"));
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	/* the kept handle's sandbox is gone: the call self-heals instead of failing */
	r = call_tool(fx, "run_command", "{\"command\": \"echo again; pwd\"}");
	const char *out = str(r, "stdout");
	assert_non_null(out);
	assert_true(strncmp(out, "again\n", 6) == 0);
	assert_null(strstr(out, dir));
	const char *notice = str(r, "notice");
	assert_non_null(notice);
	assert_non_null(strstr(notice, "no longer existed and was recreated"));
	json_object_put(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_take_put_drop, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stateful_across_tool_calls, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_same_agent_and_destroy_ends_it, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_deleted_behind_its_back, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
