/* Unit tests: choosing the state store in config.yaml (`sandbox.state_store`) — the built-in
 * file store with its `dir`, a store plugin (tests/plugins/memstore) that the tools then use
 * for every session and task, and the errors a wrong choice gets, with file, line and
 * column. */
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
#include <sys/stat.h>
#include <unistd.h>

#include <aksandbox/aksandbox.h>

static const char *const no_env[] = {NULL};

typedef struct fixture {
	char dir[64];
	char cfg[128];
	char state[128];
} fixture;

static int setup(void **state)
{
	fixture *fx = calloc(1, sizeof(*fx));
	if (!fx)
		return -1;
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/aks-store-select-XXXXXX");
	if (!mkdtemp(fx->dir)) {
		free(fx);
		return -1;
	}
	snprintf(fx->cfg, sizeof(fx->cfg), "%s/config.yaml", fx->dir);
	snprintf(fx->state, sizeof(fx->state), "%s/state", fx->dir);
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	fixture *fx = *state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx->dir);
	int rc = system(cmd);
	free(fx);
	return rc == 0 ? 0 : -1;
}

static void write_config(const fixture *fx, const char *store_yaml)
{
	FILE *f = fopen(fx->cfg, "w");
	assert_non_null(f);
	fprintf(f,
	        "sandbox:\n"
	        "  enabled: true\n"
	        "  default_profile: local\n"
	        "%s"
	        "  profiles:\n"
	        "    local: {type: local_subprocess, local_subprocess: {workdir: %s/boxes}}\n",
	        store_yaml, fx->dir);
	assert_int_equal(fclose(f), 0);
}

static char *load_error(const fixture *fx)
{
	aks_settings *s = NULL;
	aks_error *err = NULL;
	assert_true(aks_settings_load(fx->cfg, no_env, &s, &err) < 0);
	assert_null(s);
	char *msg = strdup(aks_error_message(err));
	aks_error_free(err);
	return msg;
}

static char *call(aks_runtime *rt, const char *tool, const char *args)
{
	aks_tool_context ctx;
	aks_tool_context_init(&ctx, "conv-store", NULL);
	char *out = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_runtime_call_tool(rt, tool, args, &ctx, &out, &err), AKS_OK);
	assert_non_null(out);
	return out;
}

/* Files (not directories) anywhere under dir. */
static int count_files(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		char path[512];
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		struct stat st;
		if (lstat(path, &st) == 0)
			n += S_ISDIR(st.st_mode) ? count_files(path) : 1;
	}
	closedir(d);
	return n;
}

/* A store plugin keeps the sessions: a file written in one call is read in the next (the
 * same session found again through the plugin), the session is listed, and nothing at all
 * is written to the state directory. */
static void test_plugin_store_holds_sessions(void **state)
{
	fixture *fx = *state;
	write_config(fx, "  state_store: {type: memstore, memstore: {label: test}}\n");
	aks_settings *s = NULL;
	aks_runtime *rt = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_settings_load(fx->cfg, no_env, &s, &err), AKS_OK);
	assert_int_equal(aks_runtime_open(s, fx->state, &rt, &err), AKS_OK);
	free(
	    call(rt, "write_sandbox_file", "{\"path\": \"kept.txt\", \"content\": \"in memory\"}"));
	char *out = call(rt, "read_sandbox_file", "{\"path\": \"kept.txt\"}");
	assert_non_null(strstr(out, "in memory"));
	free(out);
	out = call(rt, "list_sandbox_sessions", NULL);
	assert_non_null(strstr(out, "default:local"));
	free(out);
	aks_runtime_close(rt);
	aks_settings_free(s);
	assert_int_equal(count_files(fx->state), 0);
}

/* The file store's `dir` puts the records there (the runtime's own argument is NULL). */
static void test_file_store_dir(void **state)
{
	fixture *fx = *state;
	char yaml[256];
	snprintf(yaml, sizeof(yaml), "  state_store: {type: file, file: {dir: %s/chosen}}\n",
	         fx->dir);
	write_config(fx, yaml);
	aks_settings *s = NULL;
	aks_runtime *rt = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_settings_load(fx->cfg, no_env, &s, &err), AKS_OK);
	assert_int_equal(aks_runtime_open(s, NULL, &rt, &err), AKS_OK);
	free(call(rt, "run_command", "{\"command\": \"true\"}"));
	aks_runtime_close(rt);
	aks_settings_free(s);
	char chosen[160];
	snprintf(chosen, sizeof(chosen), "%s/chosen/ns", fx->dir);
	assert_true(count_files(chosen) > 0);
}

static void test_unknown_store_key(void **state)
{
	fixture *fx = *state;
	write_config(fx, "  state_store: {type: memstore, memstore: {lable: x}}\n");
	char *msg = load_error(fx);
	char want[256];
	snprintf(want, sizeof(want), "%s:4:", fx->cfg);
	assert_memory_equal(msg, want, strlen(want));
	assert_non_null(strstr(msg, "lable"));
	assert_non_null(strstr(msg, "label")); /* the suggestion */
	free(msg);
}

static void test_not_a_store(void **state)
{
	fixture *fx = *state;
	write_config(fx, "  state_store: local_subprocess\n");
	char *msg = load_error(fx);
	assert_non_null(strstr(msg, "sandbox.state_store"));
	assert_non_null(strstr(msg, "is a provider plugin, but a store plugin is needed here"));
	free(msg);
}

static void test_missing_store(void **state)
{
	fixture *fx = *state;
	write_config(fx, "  state_store: {type: no_such_store}\n");
	char *msg = load_error(fx);
	char want[256];
	snprintf(want, sizeof(want), "%s:4:", fx->cfg);
	assert_memory_equal(msg, want, strlen(want));
	assert_non_null(strstr(msg, "no_such_store"));
	free(msg);
}

static void test_store_block_needs_type(void **state)
{
	fixture *fx = *state;
	write_config(fx, "  state_store: {memstore: {label: x}}\n");
	char *msg = load_error(fx);
	assert_non_null(strstr(msg, "sandbox.state_store.type: is required"));
	free(msg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_plugin_store_holds_sessions, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_file_store_dir, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unknown_store_key, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_not_a_store, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_missing_store, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_store_block_needs_type, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
