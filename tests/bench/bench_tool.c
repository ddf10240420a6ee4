/*
 * tests/bench/bench_tool.c - what the tool layer (aks_runtime_call_tool) costs, against the
 * bare operating-system operations it wraps, and what idle sessions cost the host.
 *
 *   bench_tool call [-n N] DIR       one run_command {"command": "true"} through the C API,
 *                                    with the thread broker and with the embedded one,
 *                                    against a bare fork/exec+wait of /bin/true and of
 *                                    `bash -c true`; N of each, interleaved; medians, p90s
 *                                    and ratios.
 *   bench_tool sessions [-n N] DIR   in this (fresh) process: N sessions, each with a
 *                                    sandbox; the process's RSS before and after, the
 *                                    store's size on disk, list_sandbox_sessions' time; then
 *                                    every session destroyed and the sandboxes counted.
 *
 * DIR is an empty scratch directory: configs, state directories and the sandboxes (the
 * local_subprocess workdir) all go under it, so nothing else is touched. Figures are
 * measured in this run only and never judged. Uses only the public API.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <aksandbox/aksandbox.h>

#include "bench_util.h"

/* ---- a runtime over a scratch config ---------------------------------------------------- */

struct host {
	aks_settings *settings;
	aks_runtime *rt;
	aks_tool_context ctx;
	char sandboxes[4096]; /* the local_subprocess workdir */
};

/* One per_session local_subprocess profile, with `flavor`, all under dir/name/. */
static void host_open(struct host *h, const char *dir, const char *name, const char *flavor)
{
	char base[2048], config[2100], state[2100];
	aks_error *err = NULL;
	snprintf(base, sizeof(base), "%s/%s", dir, name);
	snprintf(h->sandboxes, sizeof(h->sandboxes), "%s/sandboxes", base);
	snprintf(config, sizeof(config), "%s/config.yaml", base);
	snprintf(state, sizeof(state), "%s/state", base);
	if ((mkdir(base, 0700) < 0 && errno != EEXIST) ||
	    (mkdir(h->sandboxes, 0700) < 0 && errno != EEXIST)) {
		fprintf(stderr, "bench_tool: cannot create %s: %s\n", h->sandboxes,
		        strerror(errno));
		exit(1);
	}
	FILE *f = fopen(config, "w");
	if (!f) {
		fprintf(stderr, "bench_tool: cannot write %s: %s\n", config, strerror(errno));
		exit(1);
	}
	fprintf(f,
	        "sandbox:\n"
	        "  enabled: true\n"
	        "  default_profile: ws\n"
	        "  profiles:\n"
	        "    ws:\n"
	        "      type: local_subprocess\n"
	        "      scope: per_session\n"
	        "      local_subprocess: {workdir: \"%s\"}\n"
	        "  broker:\n"
	        "    flavor: %s\n",
	        h->sandboxes, flavor);
	fclose(f);
	if (aks_settings_load(config, NULL, &h->settings, &err) < 0)
		bench_die("bench_tool", "settings", err);
	if (aks_runtime_open(h->settings, state, &h->rt, &err) < 0)
		bench_die("bench_tool", "runtime", err);
	aks_tool_context_init(&h->ctx, "bench", NULL);
}

static void host_close(struct host *h)
{
	aks_runtime_close(h->rt);
	aks_settings_free(h->settings);
}

/* Calls a tool; exits with the JSON when it reports an error. Returns the JSON (free()). */
static char *call(struct host *h, const char *tool, const char *args)
{
	char *json = NULL;
	aks_error *err = NULL;
	if (aks_runtime_call_tool(h->rt, tool, args, &h->ctx, &json, &err) < 0)
		bench_die("bench_tool", tool, err);
	if (strncmp(json, "{\"error\"", 8) == 0) {
		fprintf(stderr, "bench_tool: %s %s: %s\n", tool, args ? args : "", json);
		exit(1);
	}
	return json;
}

/* One run_command `true`; the time, or exits when it did not run and exit 0. */
static int64_t time_run(struct host *h, const char *args)
{
	int64_t t0 = bench_now_ns();
	char *json = call(h, "run_command", args);
	int64_t t = bench_now_ns() - t0;
	if (!strstr(json, "\"exit_code\": 0")) {
		fprintf(stderr, "bench_tool: run_command true: %s\n", json);
		exit(1);
	}
	free(json);
	return t;
}

/* Entries of a directory (not . and ..); -1 when it cannot be read. */
static long count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	long n = 0;
	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(d);
	return n;
}

/* fork + execv + waitpid; exits when the program did not exit 0. */
static int64_t time_spawn(char *const argv[])
{
	int64_t t = bench_time_spawn(argv);
	if (t < 0) {
		fprintf(stderr, "bench_tool: %s failed\n", argv[0]);
		exit(1);
	}
	return t;
}

/* ---- call --------------------------------------------------------------------------- */

#define VARIANTS 4

static int bench_call(size_t n, const char *dir)
{
	static const char *const labels[VARIANTS] = {
	    "fork/exec /bin/true + wait",
	    "fork/exec bash -c true + wait",
	    "run_command true (broker: thread)",
	    "run_command true (broker: embedded)",
	};
	const char *args = "{\"command\": \"true\"}";
	const char *bash = bench_find_bash();
	struct host thread, embedded;
	int64_t *t[VARIANTS];

	if (!bash) {
		fprintf(stderr, "bench_tool: bash not found\n");
		return 1;
	}
	host_open(&thread, dir, "thread", "thread");
	host_open(&embedded, dir, "embedded", "embedded");
	char *true_argv[] = {"/bin/true", NULL};
	char *bash_argv[] = {(char *)bash, "-c", "true", NULL};
	for (int v = 0; v < VARIANTS; v++) {
		if (!(t[v] = calloc(n, sizeof(int64_t)))) {
			fprintf(stderr, "bench_tool: out of memory\n");
			return 1;
		}
	}
	/* Warm up outside the figures: the first call creates the session's sandbox (and
	 * starts the pool's threads); caches and the dynamic loader settle. */
	for (int i = 0; i < 5; i++) {
		time_spawn(true_argv);
		time_spawn(bash_argv);
		time_run(&thread, args);
		time_run(&embedded, args);
	}
	for (size_t i = 0; i < n; i++) {
		/* Rotate the order so no variant always runs right after another. */
		for (size_t k = 0; k < VARIANTS; k++) {
			switch ((i + k) % VARIANTS) {
			case 0:
				t[0][i] = time_spawn(true_argv);
				break;
			case 1:
				t[1][i] = time_spawn(bash_argv);
				break;
			case 2:
				t[2][i] = time_run(&thread, args);
				break;
			default:
				t[3][i] = time_run(&embedded, args);
				break;
			}
		}
	}
	double m[VARIANTS];
	printf("One run_command `true` through the C API: %zu runs of each, interleaved "
	       "(median, p90 in ms)\n",
	       n);
	for (int v = 0; v < VARIANTS; v++) {
		m[v] = bench_median_ms(t[v], n);
		printf("  %-44s %8.3f %8.3f\n", labels[v], m[v], bench_percentile_ms(t[v], n, 0.9));
		free(t[v]);
	}
	printf("  ratio thread / bare /bin/true:             %6.2fx\n", m[2] / m[0]);
	printf("  ratio thread / bare bash -c true:          %6.2fx\n", m[2] / m[1]);
	printf("  ratio embedded / bare bash -c true:        %6.2fx\n", m[3] / m[1]);
	printf("  overhead over bash -c true: thread %.3f ms, embedded %.3f ms\n", m[2] - m[1],
	       m[3] - m[1]);
	printf("  the pool's cost (thread - embedded):       %6.3f ms\n", m[2] - m[3]);

	/* Leave nothing behind: destroy each session's sandbox, then check. */
	free(call(&thread, "destroy_sandbox_session", "{\"sandbox_session_id\": \"default:ws\"}"));
	free(
	    call(&embedded, "destroy_sandbox_session", "{\"sandbox_session_id\": \"default:ws\"}"));
	long left = count_entries(thread.sandboxes) + count_entries(embedded.sandboxes);
	host_close(&thread);
	host_close(&embedded);
	if (left != 0) {
		fprintf(stderr, "bench_tool: %ld sandbox directories left behind\n", left);
		return 1;
	}
	return 0;
}

/* ---- sessions ----------------------------------------------------------------------- */

struct mem {
	long hwm, rss; /* KiB */
};

static struct mem mem_now(void)
{
	struct mem m = {-1, -1};
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");
	while (f && fgets(line, sizeof(line), f)) {
		sscanf(line, "VmHWM: %ld", &m.hwm);
		sscanf(line, "VmRSS: %ld", &m.rss);
	}
	if (f)
		fclose(f);
	return m;
}

static struct {
	long long bytes, blocks, files;
} du;

static int du_visit(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)path, (void)ftw;
	if (flag == FTW_F) {
		du.bytes += st->st_size;
		du.files++;
	}
	du.blocks += st->st_blocks;
	return 0;
}

static void print_mem(const char *what, struct mem m)
{
	printf("  %-44s %8ld KiB current %8ld KiB peak\n", what, m.rss, m.hwm);
}

static int bench_sessions(size_t n, const char *dir)
{
	struct host h;
	struct rlimit rl;
	char args[256], state[4200];

	/* Sandboxes may hold descriptors; let the process use what it is allowed. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	char **ids = calloc(n, sizeof(char *));
	if (!ids) {
		fprintf(stderr, "bench_tool: out of memory\n");
		return 1;
	}
	struct mem m0 = mem_now();
	host_open(&h, dir, "sessions", "thread");
	snprintf(state, sizeof(state), "%s/sessions/state", dir);
	/* One call first, so that the baseline includes the pool, the plugin's first sandbox
	 * and the store's first record: what follows is the sessions' own cost. */
	time_run(&h, "{\"command\": \"true\"}");
	/* A call's cost while the conversation has one session, to compare with the same call
	 * once it has n: one record per session should keep it flat. */
	enum { STEADY = 50 };
	int64_t t_alone = bench_now_ns();
	for (int i = 0; i < STEADY; i++)
		time_run(&h, "{\"command\": \"true\"}");
	t_alone = bench_now_ns() - t_alone;
	struct mem m1 = mem_now();
	long fds1 = count_entries("/proc/self/fd");

	int64_t t0 = bench_now_ns();
	for (size_t i = 0; i < n; i++) {
		char *json = call(&h, "new_sandbox_session", "{}");
		const char *key = "\"sandbox_session_id\": \"";
		const char *p = strstr(json, key);
		if (p) {
			p += strlen(key);
			ids[i] = strndup(p, strcspn(p, "\""));
		}
		free(json);
		if (!ids[i]) {
			fprintf(stderr, "bench_tool: no session id\n");
			return 1;
		}
	}
	int64_t t_new = bench_now_ns() - t0;
	t0 = bench_now_ns();
	for (size_t i = 0; i < n; i++) {
		snprintf(args, sizeof(args),
		         "{\"command\": \"true\", \"sandbox_session_id\": \"%s\"}", ids[i]);
		time_run(&h, args);
	}
	int64_t t_run = bench_now_ns() - t0;
	int64_t t_crowd = bench_now_ns();
	for (int i = 0; i < STEADY; i++)
		time_run(&h, "{\"command\": \"true\"}");
	t_crowd = bench_now_ns() - t_crowd;
	struct mem m2 = mem_now();
	long fds2 = count_entries("/proc/self/fd");
	long sandboxes = count_entries(h.sandboxes);

	memset(&du, 0, sizeof(du));
	nftw(state, du_visit, 16, FTW_PHYS);

	enum { LISTS = 21 };
	int64_t t_list[LISTS];
	size_t listed = 0, list_len = 0;
	for (int i = 0; i < LISTS; i++) {
		t0 = bench_now_ns();
		char *json = call(&h, "list_sandbox_sessions", NULL);
		t_list[i] = bench_now_ns() - t0;
		listed = 0;
		for (const char *p = json; (p = strstr(p, "\"sandbox_session_id\"")); p++)
			listed++;
		list_len = strlen(json);
		free(json);
	}
	double m_list = bench_median_ms(t_list, LISTS);

	printf("%zu idle sessions, each with a sandbox, in one process (broker: thread)\n", n);
	print_mem("process start", m0);
	print_mem("runtime open, one call made (baseline)", m1);
	print_mem("after the sessions", m2);
	printf("  per session: %.1f KiB current, %.1f KiB peak; open descriptors %ld -> %ld\n",
	       (double)(m2.rss - m1.rss) / (double)n, (double)(m2.hwm - m1.hwm) / (double)n, fds1,
	       fds2);
	printf("  new_sandbox_session: %.3f ms each (mean); first run_command: %.3f ms each "
	       "(mean)\n",
	       (double)t_new / 1e6 / (double)n, (double)t_run / 1e6 / (double)n);
	printf("  run_command on the default session: %.3f ms (mean) with 1 session, %.3f ms with "
	       "%zu (ratio %.2f)\n",
	       (double)t_alone / 1e6 / STEADY, (double)t_crowd / 1e6 / STEADY, n + 1,
	       (double)t_crowd / (double)t_alone);
	printf("  sandbox directories: %ld\n", sandboxes);
	printf("  store on disk: state directory %lld files, %lld bytes, %lld KiB allocated\n",
	       du.files, du.bytes, du.blocks / 2);
	printf("  list_sandbox_sessions: median %.3f ms, p90 %.3f ms (%d calls; %zu sessions "
	       "listed, %zu bytes of JSON)\n",
	       m_list, bench_percentile_ms(t_list, LISTS, 0.9), LISTS, listed, list_len);

	/* Clean up: every sandbox destroyed, and checked. */
	t0 = bench_now_ns();
	for (size_t i = 0; i < n; i++) {
		snprintf(args, sizeof(args), "{\"sandbox_session_id\": \"%s\"}", ids[i]);
		free(call(&h, "destroy_sandbox_session", args));
		free(ids[i]);
	}
	int64_t t_destroy = bench_now_ns() - t0;
	free(call(&h, "destroy_sandbox_session", "{\"sandbox_session_id\": \"default:ws\"}"));
	free(ids);
	struct mem m3 = mem_now();
	long left = count_entries(h.sandboxes);
	print_mem("after destroying them", m3);
	printf("  destroy_sandbox_session: %.3f ms each (mean); sandbox directories left: %ld\n",
	       (double)t_destroy / 1e6 / (double)n, left);
	host_close(&h);
	if (sandboxes != (long)n + 1 || left != 0) {
		fprintf(stderr,
		        "bench_tool: expected %zu sandboxes, then none; saw %ld, then %ld\n", n + 1,
		        sandboxes, left);
		return 1;
	}
	return 0;
}

/* ---- main --------------------------------------------------------------------------- */

int main(int argc, char *argv[])
{
	size_t n = 0;
	int i = 2;
	if (argc >= 4 && strcmp(argv[2], "-n") == 0) {
		n = strtoul(argv[3], NULL, 10);
		i = 4;
	}
	if (argc == i + 1 && strcmp(argv[1], "call") == 0)
		return bench_call(n ? n : 200, argv[i]);
	if (argc == i + 1 && strcmp(argv[1], "sessions") == 0)
		return bench_sessions(n ? n : 1000, argv[i]);
	fprintf(stderr, "usage: bench_tool call|sessions [-n N] DIR\n");
	return 2;
}
