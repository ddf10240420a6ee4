/*
 * tests/bench/bench_mcp.c - what MCP costs on top of the tool API: one run_command
 * {"command": "true"} as a tools/call round trip to a long-lived `aksandbox mcp` process
 * (JSON-RPC over its stdin/stdout pipes, as an MCP client does it), against the same call
 * through the C API (aks_runtime_call_tool) in this process.
 *
 *   bench_mcp [-n N] AKSANDBOX DIR
 *
 * AKSANDBOX is the aksandbox binary; DIR an empty scratch directory for the two configs,
 * state directories and sandboxes (same profile: local_subprocess, per_session, the thread
 * broker). N calls of each, interleaved, after a warm-up; medians, p90s and the ratio.
 * Figures are measured in this run only and never judged.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <aksandbox/aksandbox.h>

#include "bench_util.h"

#define PROG "bench_mcp"

static void die(const char *what)
{
	fprintf(stderr, PROG ": %s: %s\n", what, strerror(errno));
	exit(1);
}

/* DIR/name/{config.yaml,state,sandboxes}; returns the config's path. */
static void write_config(const char *dir, const char *name, char *config, size_t size, char *state,
                         size_t state_size)
{
	char base[2048], boxes[2100];
	snprintf(base, sizeof(base), "%s/%s", dir, name);
	snprintf(boxes, sizeof(boxes), "%s/sandboxes", base);
	snprintf(config, size, "%s/config.yaml", base);
	snprintf(state, state_size, "%s/state", base);
	if ((mkdir(base, 0700) < 0 && errno != EEXIST) ||
	    (mkdir(boxes, 0700) < 0 && errno != EEXIST))
		die(boxes);
	FILE *f = fopen(config, "w");
	if (!f)
		die(config);
	fprintf(f,
	        "sandbox:\n"
	        "  enabled: true\n"
	        "  profiles:\n"
	        "    default:\n"
	        "      type: local_subprocess\n"
	        "      scope: per_session\n"
	        "      local_subprocess: {workdir: \"%s\"}\n",
	        boxes);
	fclose(f);
}

/* ---- the C API ------------------------------------------------------------------- */

struct capi {
	aks_settings *settings;
	aks_runtime *rt;
	aks_tool_context ctx;
};

static int64_t capi_call(struct capi *c)
{
	char *json = NULL;
	aks_error *err = NULL;
	int64_t t0 = bench_now_ns();
	if (aks_runtime_call_tool(c->rt, "run_command", "{\"command\": \"true\"}", &c->ctx, &json,
	                          &err) < 0)
		bench_die(PROG, "run_command", err);
	int64_t t = bench_now_ns() - t0;
	if (!strstr(json, "\"exit_code\": 0")) {
		fprintf(stderr, PROG ": C API run_command true: %s\n", json);
		exit(1);
	}
	free(json);
	return t;
}

/* ---- the MCP server ----------------------------------------------------------------- */

struct mcp {
	pid_t pid;
	FILE *in;  /* the server's stdin */
	FILE *out; /* the server's stdout */
	char *line;
	size_t cap;
	long next_id;
};

static void mcp_start(struct mcp *m, const char *aks, const char *config, const char *state)
{
	int to[2], from[2];
	if (pipe(to) < 0 || pipe(from) < 0)
		die("pipe");
	m->pid = fork();
	if (m->pid < 0)
		die("fork");
	if (m->pid == 0) {
		dup2(to[0], 0);
		dup2(from[1], 1);
		close(to[0]);
		close(to[1]);
		close(from[0]);
		close(from[1]);
		setenv("AKS_STATE_DIR", state, 1);
		unsetenv("AKSANDBOX_CONVERSATION");
		if (!freopen("/dev/null", "w", stderr))
			_exit(127);
		execl(aks, aks, "-c", config, "mcp", "--conversation", "bench", (char *)NULL);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	m->in = fdopen(to[1], "w");
	m->out = fdopen(from[0], "r");
	if (!m->in || !m->out)
		die("fdopen");
}

/* Sends one line and reads one line back. */
static const char *mcp_roundtrip(struct mcp *m, const char *request)
{
	if (fputs(request, m->in) < 0 || fputc('\n', m->in) < 0 || fflush(m->in) < 0)
		die("write to aksandbox mcp");
	if (getline(&m->line, &m->cap, m->out) < 0) {
		fprintf(stderr, PROG ": aksandbox mcp closed its output\n");
		exit(1);
	}
	return m->line;
}

static int64_t mcp_call(struct mcp *m)
{
	char req[256];
	snprintf(req, sizeof(req),
	         "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"tools/call\",\"params\":{\"name\":"
	         "\"run_command\",\"arguments\":{\"command\":\"true\"}}}",
	         ++m->next_id);
	int64_t t0 = bench_now_ns();
	const char *resp = mcp_roundtrip(m, req);
	int64_t t = bench_now_ns() - t0;
	if (!strstr(resp, "exit_code\\\": 0") || !strstr(resp, "\"isError\":false")) {
		fprintf(stderr, PROG ": MCP run_command true: %s", resp);
		exit(1);
	}
	return t;
}

static void mcp_stop(struct mcp *m)
{
	int status;
	fclose(m->in); /* end of input: the server exits */
	if (waitpid(m->pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, PROG ": aksandbox mcp did not exit 0\n");
		exit(1);
	}
	fclose(m->out);
	free(m->line);
}

int main(int argc, char *argv[])
{
	size_t n = 200;
	int opt;
	while ((opt = getopt(argc, argv, "n:")) != -1) {
		if (opt == 'n' && atol(optarg) > 0) {
			n = (size_t)atol(optarg);
		} else {
			fprintf(stderr, "usage: " PROG " [-n N] AKSANDBOX DIR\n");
			return 2;
		}
	}
	if (argc - optind != 2) {
		fprintf(stderr, "usage: " PROG " [-n N] AKSANDBOX DIR\n");
		return 2;
	}
	const char *aks = argv[optind], *dir = argv[optind + 1];
	char config[2200], state[2200];
	aks_error *err = NULL;
	signal(SIGPIPE, SIG_IGN);

	struct capi c;
	write_config(dir, "capi", config, sizeof(config), state, sizeof(state));
	if (aks_settings_load(config, NULL, &c.settings, &err) < 0)
		bench_die(PROG, "settings", err);
	if (aks_runtime_open(c.settings, state, &c.rt, &err) < 0)
		bench_die(PROG, "runtime", err);
	aks_tool_context_init(&c.ctx, "bench", NULL);

	struct mcp m = {0};
	write_config(dir, "mcp", config, sizeof(config), state, sizeof(state));
	mcp_start(&m, aks, config, state);
	const char *init = mcp_roundtrip(
	    &m, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
	        "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":"
	        "\"bench\",\"version\":\"1\"}}}");
	if (!strstr(init, "\"protocolVersion\":\"2025-11-25\"")) {
		fprintf(stderr, PROG ": initialize: %s", init);
		return 1;
	}
	fputs("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n", m.in);

	int64_t *tc = calloc(n, sizeof(int64_t)), *tm = calloc(n, sizeof(int64_t));
	if (!tc || !tm)
		die("calloc");
	/* Warm-up: the first call creates each session's sandbox. */
	for (int i = 0; i < 5; i++) {
		capi_call(&c);
		mcp_call(&m);
	}
	for (size_t i = 0; i < n; i++) {
		if (i & 1) {
			tc[i] = capi_call(&c);
			tm[i] = mcp_call(&m);
		} else {
			tm[i] = mcp_call(&m);
			tc[i] = capi_call(&c);
		}
	}
	mcp_stop(&m);
	aks_runtime_close(c.rt);
	aks_settings_free(c.settings);

	double mc = bench_median_ms(tc, n), mm = bench_median_ms(tm, n);
	printf("MCP: run_command {\"command\": \"true\"}, %zu calls each, interleaved "
	       "(median, p90 in ms)\n",
	       n);
	printf("  %-52s %8.3f %8.3f\n", "C API: aks_runtime_call_tool", mc,
	       bench_percentile_ms(tc, n, 0.9));
	printf("  %-52s %8.3f %8.3f\n", "MCP: tools/call to one aksandbox mcp process", mm,
	       bench_percentile_ms(tm, n, 0.9));
	printf("  ratio MCP / C API: %.2fx   MCP overhead: %.3f ms per call\n", mm / mc, mm - mc);
	free(tc);
	free(tm);
	return 0;
}
