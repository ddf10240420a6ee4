/*
 * tests/bench/bench_exec.c - in-process costs of the core, measured against
 * the bare operating-system operations they wrap.
 *
 *   bench_exec exec [-n N]   one local execution: aks_sandbox_execute_command
 *                            (sb, "true") on a sandbox created once, against a
 *                            bare fork/exec+wait of /bin/true and of
 *                            `bash -c true` (what local_subprocess spawns),
 *                            N of each, interleaved; medians and ratios.
 *   bench_exec load [-n N]   loading every plugin on the search path, each
 *                            with aks_plugin_load(name) in a fresh process
 *                            (N processes), and one aks_plugin_foreach walk in
 *                            a fresh process; medians.
 *
 * It prints figures measured in this run only and never judges them: the
 * numbers depend on the machine. Uses only the public API.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <aksandbox/aksandbox.h>

#include "bench_util.h"

#define MAX_PLUGINS 128

/* ---- exec ----------------------------------------------------------------------- */

static int64_t time_provider(aks_sandbox *sb)
{
	aks_result *res = NULL;
	aks_error *err = NULL;
	aks_call call;
	int64_t t0 = bench_now_ns();
	aks_call_init(&call, 60, NULL, NULL, NULL);
	int rc = aks_sandbox_execute_command(sb, "true", &call, &res, &err);
	int64_t t = bench_now_ns() - t0;
	if (rc < 0)
		bench_die("bench_exec", "execute_command", err);
	int code = aks_result_get_exit_code(res);
	aks_result_free(res);
	return code == 0 ? t : -1;
}

static int bench_exec(size_t n)
{
	const aks_plugin *plugin = NULL;
	aks_config *config = NULL;
	aks_provider *prov = NULL;
	aks_sandbox *sb = NULL;
	aks_error *err = NULL;
	aks_call call;
	const char *bash = bench_find_bash();

	if (!bash) {
		fprintf(stderr, "bench_exec: bash not found\n");
		return 1;
	}
	if (aks_plugin_load("local_subprocess", AKS_PLUGIN_PROVIDER, &plugin, &err) < 0)
		bench_die("bench_exec", "load local_subprocess", err);
	if (aks_config_default_block(plugin, &config, &err) < 0)
		bench_die("bench_exec", "config", err);
	if (aks_provider_open(plugin, config, &prov, &err) < 0)
		bench_die("bench_exec", "open", err);
	aks_call_init(&call, 60, NULL, NULL, NULL);
	if (aks_provider_create(prov, &call, &sb, &err) < 0)
		bench_die("bench_exec", "create", err);

	char *true_argv[] = {"/bin/true", NULL};
	char *bash_argv[] = {(char *)bash, "-c", "true", NULL};
	int64_t *t_true = calloc(n, sizeof(int64_t));
	int64_t *t_bash = calloc(n, sizeof(int64_t));
	int64_t *t_prov = calloc(n, sizeof(int64_t));
	if (!t_true || !t_bash || !t_prov) {
		fprintf(stderr, "bench_exec: out of memory\n");
		return 1;
	}
	/* Warm up caches (page cache, dynamic loader) outside the figures. */
	for (int i = 0; i < 5; i++) {
		bench_time_spawn(true_argv);
		bench_time_spawn(bash_argv);
		time_provider(sb);
	}
	for (size_t i = 0; i < n; i++) {
		/* Rotate the order so no variant always runs right after another. */
		for (size_t k = 0; k < 3; k++) {
			switch ((i + k) % 3) {
			case 0:
				t_true[i] = bench_time_spawn(true_argv);
				break;
			case 1:
				t_bash[i] = bench_time_spawn(bash_argv);
				break;
			default:
				t_prov[i] = time_provider(sb);
				break;
			}
		}
		if (t_true[i] < 0 || t_bash[i] < 0 || t_prov[i] < 0) {
			fprintf(stderr, "bench_exec: a run of `true` failed\n");
			return 1;
		}
	}
	double m_true = bench_median_ms(t_true, n), m_bash = bench_median_ms(t_bash, n);
	double m_prov = bench_median_ms(t_prov, n);
	printf("One execution of `true`: %zu runs of each, interleaved (median, p90 in ms)\n", n);
	printf("  %-44s %8.3f %8.3f\n", "fork/exec /bin/true + wait", m_true,
	       bench_percentile_ms(t_true, n, 0.9));
	printf("  %-44s %8.3f %8.3f\n", "fork/exec bash -c true + wait", m_bash,
	       bench_percentile_ms(t_bash, n, 0.9));
	printf("  %-44s %8.3f %8.3f\n", "aks_sandbox_execute_command(sb, \"true\")", m_prov,
	       bench_percentile_ms(t_prov, n, 0.9));
	printf("  ratio execute_command / bare /bin/true:    %6.2fx\n", m_prov / m_true);
	printf("  ratio execute_command / bare bash -c true: %6.2fx\n", m_prov / m_bash);
	printf("  overhead over bash -c true:                %6.3f ms\n", m_prov - m_bash);

	free(t_true);
	free(t_bash);
	free(t_prov);
	char *id = strdup(aks_sandbox_get_id(sb));
	aks_sandbox_close(sb);
	aks_call_init(&call, 60, NULL, NULL, NULL);
	if (id && aks_provider_destroy(prov, id, &call, &err) < 0)
		bench_die("bench_exec", "destroy", err);
	free(id);
	aks_provider_close(prov);
	aks_config_free(config);
	return 0;
}

/* ---- load ------------------------------------------------------------------------ */

struct names {
	char *v[MAX_PLUGINS];
	size_t n;
};

static void add_dir(struct names *names, const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	if (!d)
		return;
	while ((e = readdir(d)) && names->n < MAX_PLUGINS) {
		size_t len = strlen(e->d_name);
		if (len < 4 || strcmp(e->d_name + len - 3, ".so") != 0)
			continue;
		char *name = strndup(e->d_name, len - 3);
		bool seen = false;
		for (size_t i = 0; name && i < names->n; i++)
			seen = seen || strcmp(names->v[i], name) == 0;
		if (!name || seen) {
			free(name);
			continue;
		}
		names->v[names->n++] = name;
	}
	closedir(d);
}

/* The plugin names on the search path, found without loading anything. */
static void find_names(struct names *names)
{
	const char *path = getenv("AKS_PLUGIN_PATH");
	const char *system_dir = getenv("AKS_PLUGIN_SYSTEM_DIR");
	char *copy = strdup(path ? path : ""), *save = NULL;
	for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save))
		add_dir(names, d);
	free(copy);
	if (!system_dir)
		system_dir = aks_plugin_dir();
	if (*system_dir)
		add_dir(names, system_dir);
}

/* Child: one fresh process, each plugin loaded once. Prints "name ns ok|fail". */
static int load_once(void)
{
	struct names names = {0};
	int64_t total = 0;
	find_names(&names);
	for (size_t i = 0; i < names.n; i++) {
		const aks_plugin *plugin = NULL;
		aks_error *err = NULL;
		int64_t t0 = bench_now_ns();
		int rc = aks_plugin_load(names.v[i], 0, &plugin, &err);
		int64_t t = bench_now_ns() - t0;
		total += t;
		printf("%s %" PRId64 " %s\n", names.v[i], t, rc < 0 ? "fail" : "ok");
		aks_error_free(err);
		free(names.v[i]);
	}
	printf("*all %" PRId64 " ok\n", total);
	return 0;
}

static int count_visit(const char *file, const aks_plugin *plugin, const aks_error *error,
                       void *userdata)
{
	++*(size_t *)userdata;
	return 0;
}

/* Child: one aks_plugin_foreach walk in a fresh process. */
static int foreach_once(void)
{
	size_t count = 0;
	int64_t t0 = bench_now_ns();
	aks_plugin_foreach(count_visit, &count);
	printf("*foreach %" PRId64 " ok\n", bench_now_ns() - t0);
	return 0;
}

struct series {
	char name[128];
	bool failed;
	int64_t *t;
	size_t n;
};

static struct series *series_get(struct series *s, size_t *count, const char *name, size_t cap)
{
	for (size_t i = 0; i < *count; i++) {
		if (strcmp(s[i].name, name) == 0)
			return &s[i];
	}
	if (*count >= MAX_PLUGINS + 2)
		return NULL;
	struct series *x = &s[(*count)++];
	snprintf(x->name, sizeof(x->name), "%s", name);
	x->t = calloc(cap, sizeof(int64_t));
	return x->t ? x : NULL;
}

/* Runs this program with `mode` in a fresh process and collects its lines. */
static int run_child(const char *mode, struct series *s, size_t *count, size_t cap)
{
	int fds[2];
	if (pipe(fds) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		close(fds[0]);
		close(fds[1]);
		execl("/proc/self/exe", "bench_exec", mode, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	FILE *f = fdopen(fds[0], "r");
	char line[512], name[128], status[8];
	int64_t ns;
	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%127s %" SCNd64 " %7s", name, &ns, status) != 3)
			continue;
		struct series *x = series_get(s, count, name, cap);
		if (!x)
			continue;
		x->failed = x->failed || strcmp(status, "ok") != 0;
		x->t[x->n++] = ns;
	}
	if (f)
		fclose(f);
	int st = 0;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static int bench_load(size_t n)
{
	struct series s[MAX_PLUGINS + 2];
	size_t count = 0;
	memset(s, 0, sizeof(s));
	for (size_t i = 0; i < n; i++) {
		if (run_child("load-once", s, &count, n) < 0 ||
		    run_child("foreach-once", s, &count, n) < 0) {
			fprintf(stderr, "bench_exec: a measuring process failed\n");
			return 1;
		}
	}
	printf("Plugin loading in a fresh process: %zu processes (median, p90 in ms)\n", n);
	for (size_t i = 0; i < count; i++) {
		const char *label = s[i].name;
		char buf[200];
		if (strcmp(label, "*all") == 0)
			label = "every plugin, aks_plugin_load each (sum)";
		else if (strcmp(label, "*foreach") == 0)
			label = "aks_plugin_foreach (scan + load all)";
		else {
			snprintf(buf, sizeof(buf), "aks_plugin_load(\"%.100s\")%s", s[i].name,
			         s[i].failed ? " [fails to load]" : "");
			label = buf;
		}
		double m = bench_median_ms(s[i].t, s[i].n);
		printf("  %-44s %8.3f %8.3f\n", label, m, bench_percentile_ms(s[i].t, s[i].n, 0.9));
		free(s[i].t);
	}
	return 0;
}

/* ---- main -------------------------------------------------------------------------- */

/* Peak resident size (KiB) of a command, from wait4(). The child is a fork of
 * this small program until it execs, so both measurements carry the same
 * small offset; compare differences. Output goes to /dev/null. */
static int rss_of(char *argv[])
{
	pid_t pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		if (null >= 0) {
			dup2(null, 1);
			dup2(null, 2);
		}
		execv(argv[0], argv);
		_exit(127);
	}
	int status = 0;
	struct rusage ru;
	if (wait4(pid, &status, 0, &ru) < 0)
		return 1;
	printf("%ld\n", ru.ru_maxrss);
	return 0;
}

int main(int argc, char *argv[])
{
	if (argc >= 3 && strcmp(argv[1], "rss") == 0)
		return rss_of(argv + 2);
	size_t n = 0;
	if (argc >= 4 && strcmp(argv[2], "-n") == 0)
		n = strtoul(argv[3], NULL, 10);
	if (argc == 2 && strcmp(argv[1], "load-once") == 0)
		return load_once();
	if (argc == 2 && strcmp(argv[1], "foreach-once") == 0)
		return foreach_once();
	if (argc >= 2 && strcmp(argv[1], "exec") == 0)
		return bench_exec(n ? n : 200);
	if (argc >= 2 && strcmp(argv[1], "load") == 0)
		return bench_load(n ? n : 30);
	fprintf(stderr, "usage: bench_exec exec|load [-n N] | rss PROGRAM [ARG...]\n");
	return 2;
}
