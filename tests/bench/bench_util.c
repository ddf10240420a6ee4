/*
 * tests/bench/bench_util.c - timing helpers shared by the benchmark programs.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

int64_t bench_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

double bench_median_ms(int64_t *v, size_t n)
{
	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), cmp_i64);
	int64_t m = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	return (double)m / 1e6;
}

double bench_percentile_ms(const int64_t *sorted, size_t n, double p)
{
	return n ? (double)sorted[(size_t)((double)(n - 1) * p)] / 1e6 : 0;
}

int64_t bench_time_spawn(char *const argv[])
{
	int64_t t0 = bench_now_ns();
	pid_t pid = fork();
	if (pid == 0) {
		execv(argv[0], argv);
		_exit(127);
	}
	if (pid < 0)
		return -1;
	int st = 0;
	while (waitpid(pid, &st, 0) < 0) {
		if (errno != EINTR)
			return -1;
	}
	int64_t t = bench_now_ns() - t0;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? t : -1;
}

const char *bench_find_bash(void)
{
	static const char *const candidates[] = {"/bin/bash", "/usr/bin/bash", NULL};
	for (size_t i = 0; candidates[i]; i++) {
		if (access(candidates[i], X_OK) == 0)
			return candidates[i];
	}
	return NULL;
}

void bench_die(const char *prog, const char *what, aks_error *err)
{
	fprintf(stderr, "%s: %s: %s\n", prog, what, err ? aks_error_message(err) : "failed");
	aks_error_free(err);
	exit(1);
}

aks_provider *bench_open_provider(const char *prog, const char *plugin_name, const char *block,
                                  aks_config **config)
{
	const aks_plugin *plugin = NULL;
	aks_error *err = NULL;
	if (aks_plugin_load(plugin_name, AKS_PLUGIN_PROVIDER, &plugin, &err) != AKS_OK)
		bench_die(prog, plugin_name, err);
	char path[] = "/tmp/bench-provider-XXXXXX";
	int fd = mkstemp(path);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		perror(path);
		exit(1);
	}
	fprintf(f, "sandbox:\n  enabled: true\n  type: %s\n  %s:\n%s", plugin_name, plugin_name,
	        block);
	fclose(f);
	if (aks_config_load_block(plugin, path, config, &err) != AKS_OK)
		bench_die(prog, "loading the config", err);
	unlink(path);
	aks_provider *prov = NULL;
	if (aks_provider_open(plugin, *config, &prov, &err) != AKS_OK)
		bench_die(prog, plugin_name, err);
	return prov;
}

aks_sandbox *bench_create(const char *prog, aks_provider *prov, const aks_policy *policy)
{
	aks_call call;
	aks_call_init(&call, 600, policy, NULL, NULL);
	aks_error *err = NULL;
	aks_sandbox *sb = NULL;
	if (aks_provider_create(prov, &call, &sb, &err) != AKS_OK)
		bench_die(prog, "create", err);
	return sb;
}

void bench_destroy(const char *prog, aks_provider *prov, aks_sandbox *sb)
{
	aks_call call;
	aks_call_init(&call, 120, NULL, NULL, NULL);
	aks_error *err = NULL;
	char *id = strdup(aks_sandbox_get_id(sb));
	aks_sandbox_close(sb);
	if (aks_provider_destroy(prov, id, &call, &err) != AKS_OK)
		bench_die(prog, "destroy", err);
	free(id);
}

aks_sandbox *bench_attach(const char *prog, aks_provider *prov, const char *id)
{
	aks_call call;
	aks_call_init(&call, 120, NULL, NULL, NULL);
	aks_error *err = NULL;
	aks_sandbox *sb = NULL;
	if (aks_provider_attach(prov, id, &call, &sb, &err) != AKS_OK)
		bench_die(prog, "attach", err);
	return sb;
}

char *bench_tool(const char *prog, aks_runtime *rt, const aks_tool_context *ctx, const char *name,
                 const char *args)
{
	char *json = NULL;
	aks_error *err = NULL;
	if (aks_runtime_call_tool(rt, name, args, ctx, &json, &err) < 0)
		bench_die(prog, name, err);
	if (strncmp(json, "{\"error\"", 8) == 0 ||
	    (strcmp(name, "run_command") == 0 && !strstr(json, "\"exit_code\": 0"))) {
		fprintf(stderr, "%s: %s %s: %s\n", prog, name, args ? args : "", json);
		exit(1);
	}
	return json;
}

int64_t bench_pooled_first(const char *prog, aks_runtime *rt, const aks_tool_context *ctx,
                           const char *profile)
{
	char *report = NULL;
	aks_error *err = NULL;
	if (aks_runtime_fill_pools(rt, &report, &err) < 0)
		bench_die(prog, "fill the pools", err);
	free(report);
	char args[256];
	snprintf(args, sizeof(args), "{\"profile\": \"%s\"}", profile);
	char *json = bench_tool(prog, rt, ctx, "new_sandbox_session", args);
	const char *p = strstr(json, "\"sandbox_session_id\": \"");
	if (!p) {
		fprintf(stderr, "%s: new_sandbox_session: %s\n", prog, json);
		exit(1);
	}
	char sid[128];
	snprintf(sid, sizeof(sid), "%.*s", (int)strcspn(p + 23, "\""), p + 23);
	free(json);
	snprintf(args, sizeof(args), "{\"command\": \"true\", \"sandbox_session_id\": \"%s\"}",
	         sid);
	int64_t t0 = bench_now_ns();
	free(bench_tool(prog, rt, ctx, "run_command", args));
	int64_t t = bench_now_ns() - t0;
	snprintf(args, sizeof(args), "{\"sandbox_session_id\": \"%s\"}", sid);
	free(bench_tool(prog, rt, ctx, "destroy_sandbox_session", args));
	return t;
}

void bench_runtime_open(const char *prog, const char *yaml, bench_runtime *b)
{
	snprintf(b->dir, sizeof(b->dir), "/tmp/bench-runtime-XXXXXX");
	if (!mkdtemp(b->dir)) {
		perror("mkdtemp");
		exit(1);
	}
	char config[96], state[96];
	snprintf(config, sizeof(config), "%s/config.yaml", b->dir);
	snprintf(state, sizeof(state), "%s/state", b->dir);
	FILE *f = fopen(config, "w");
	if (!f || fputs(yaml, f) < 0 || fclose(f) != 0) {
		perror(config);
		exit(1);
	}
	aks_error *err = NULL;
	b->settings = NULL;
	b->rt = NULL;
	if (aks_settings_load(config, NULL, &b->settings, &err) < 0)
		bench_die(prog, "settings", err);
	if (aks_runtime_open(b->settings, state, &b->rt, &err) < 0)
		bench_die(prog, "runtime", err);
}

void bench_runtime_close(const char *prog, bench_runtime *b)
{
	aks_runtime_close(b->rt);
	aks_settings_free(b->settings);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", b->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "%s: cannot remove %s\n", prog, b->dir);
}
