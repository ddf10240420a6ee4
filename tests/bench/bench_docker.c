/*
 * tests/bench/bench_docker.c - the docker provider's cost, against the same
 * work done without it, measured in the same run:
 *
 *  exec:  one execute_command("true") in an existing sandbox, through
 *         aksandbox-agent (one request on the handle's agent stream) and with
 *         agent: false (the plugin's three Engine API calls), against the same
 *         three bare API calls made here with libcurl over the same socket
 *         (exec create, exec start, exec inspect), and against
 *         `docker exec <id> true` (the CLI);
 *  first: a new sandbox's first command (create + execute + destroy), with and
 *         without the agent, against `docker run --rm <image> true`;
 *  tool:  run_command true through the tool layer (aks_runtime_call_tool) in an
 *         existing session of a per_session docker profile with the agent and
 *         of one with agent: false, against `docker exec <id> true`, and a new
 *         session's first run_command. The core closes the sandbox handle after
 *         every call, so there each call starts (and ends) its own agent.
 *
 * Usage: bench_docker [-n N] [-m M] [-a AGENT] [IMAGE]   (N exec samples,
 * default 100; M first-command samples, default 10; AGENT the static
 * aksandbox-agent, default $AKS_TEST_BUILDDIR/agent/aksandbox-agent). Needs the
 * Docker Engine on /var/run/docker.sock and the image (default
 * aksandbox-test:bookworm).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "bench_util.h"

static const char *prog = "bench_docker";

/* ---- the bare Engine API ------------------------------------------------------------ */

typedef struct body {
	char buf[8192];
	size_t len;
} body;

static size_t collect(char *data, size_t size, size_t nmemb, void *ctx)
{
	body *b = ctx;
	size_t n = size * nmemb;
	size_t room = sizeof(b->buf) - 1 - b->len;
	memcpy(b->buf + b->len, data, n < room ? n : room);
	b->len += n < room ? n : room;
	b->buf[b->len] = '\0';
	return n;
}

static long bare(CURL *c, const char *method, const char *path, const char *json, body *b)
{
	char url[512];
	snprintf(url, sizeof(url), "http://localhost/v1.41%s", path);
	curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, "/var/run/docker.sock");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	if (strcmp(method, "POST") == 0) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, json ? json : "");
	}
	b->len = 0;
	b->buf[0] = '\0';
	long status = 0;
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(h);
	return status;
}

/* exec create + start + inspect of `true`, as the plugin does; ns or -1. */
static int64_t bare_exec(CURL *c, const char *container)
{
	int64_t t0 = bench_now_ns();
	body b;
	char path[256];
	snprintf(path, sizeof(path), "/containers/%s/exec", container);
	if (bare(c, "POST", path,
	         "{\"AttachStdout\":true,\"AttachStderr\":true,\"Tty\":false,\"Cmd\":[\"/bin/sh\","
	         "\"-c\",\"true\"],\"WorkingDir\":\"/workspace\"}",
	         &b) != 201)
		return -1;
	const char *id = strstr(b.buf, "\"Id\":\"");
	if (!id)
		return -1;
	char eid[80];
	snprintf(eid, sizeof(eid), "%.64s", id + 6);
	snprintf(path, sizeof(path), "/exec/%s/start", eid);
	if (bare(c, "POST", path, "{\"Detach\":false,\"Tty\":false}", &b) != 200)
		return -1;
	snprintf(path, sizeof(path), "/exec/%s/json", eid);
	if (bare(c, "GET", path, NULL, &b) != 200 || !strstr(b.buf, "\"ExitCode\":0"))
		return -1;
	return bench_now_ns() - t0;
}

/* ---- the plugin --------------------------------------------------------------------- */

static aks_provider *open_docker(const char *image, const char *agent, aks_config **config)
{
	aks_error *err = NULL;
	const aks_plugin *plugin = NULL;
	if (aks_plugin_load("docker", AKS_PLUGIN_PROVIDER, &plugin, &err) != AKS_OK)
		bench_die(prog, "loading docker.so", err);
	char yaml_path[] = "/tmp/bench-docker-XXXXXX";
	int fd = mkstemp(yaml_path);
	FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
	if (!f) {
		perror(yaml_path);
		exit(1);
	}
	fprintf(f,
	        "sandbox:\n  enabled: true\n  type: docker\n  docker:\n    image: %s\n"
	        "    pull: false\n    agent: %s\n    labels: {io.aksandbox.test: bench}\n",
	        image, agent);
	fclose(f);
	if (aks_config_load_block(plugin, yaml_path, config, &err) != AKS_OK)
		bench_die(prog, "loading the config", err);
	unlink(yaml_path);
	aks_provider *prov = NULL;
	if (aks_provider_open(plugin, *config, &prov, &err) != AKS_OK)
		bench_die(prog, "opening the provider", err);
	return prov;
}

static void report(const char *what, int64_t *v, size_t n)
{
	double med = bench_median_ms(v, n);
	printf("  %-56s %9.3f ms  (p10 %.3f, p90 %.3f)\n", what, med,
	       bench_percentile_ms(v, n, 0.1), bench_percentile_ms(v, n, 0.9));
}

/* One execute_command("true") on sb: ns. */
static int64_t plugin_true(aks_sandbox *sb)
{
	aks_call call;
	aks_call_init(&call, 120, NULL, NULL, NULL);
	aks_error *err = NULL;
	aks_result *r = NULL;
	int64_t t0 = bench_now_ns();
	if (aks_sandbox_execute_command(sb, "true", &call, &r, &err) != AKS_OK)
		bench_die(prog, "execute_command", err);
	int64_t t = bench_now_ns() - t0;
	if (aks_result_get_exit_code(r) != 0) {
		fprintf(stderr, "%s: true exited with %d\n", prog, aks_result_get_exit_code(r));
		exit(1);
	}
	aks_result_free(r);
	return t;
}

/* ---- the tool layer ------------------------------------------------------------------- */

static char *tool(aks_runtime *rt, const aks_tool_context *ctx, const char *name, const char *args)
{
	return bench_tool(prog, rt, ctx, name, args);
}

static void bench_tools(const char *image, const char *agent, const char *cli_container, size_t n,
                        size_t m, double docker_run_ms)
{
	char *yaml = NULL;
	if (asprintf(&yaml,
	             "sandbox:\n  enabled: true\n  default_profile: box\n  profiles:\n"
	             "    box:\n      type: docker\n      scope: per_session\n"
	             "      docker: {image: %s, pull: false, agent: %s, "
	             "labels: {io.aksandbox.test: bench}}\n"
	             "    boxpc:\n      type: docker\n      scope: per_session\n"
	             "      docker: {image: %s, pull: false, agent: false, "
	             "labels: {io.aksandbox.test: bench}}\n"
	             "    boxpool:\n      type: docker\n      pool: {size: 1}\n"
	             "      docker: {image: %s, pull: false, agent: %s, "
	             "labels: {io.aksandbox.test: bench}}\n",
	             image, agent, image, image, agent) < 0) {
		fprintf(stderr, "%s: out of memory\n", prog);
		exit(1);
	}
	bench_runtime b;
	bench_runtime_open(prog, yaml, &b);
	free(yaml);
	aks_runtime *rt = b.rt;
	aks_tool_context ctx;
	aks_tool_context_init(&ctx, "bench", NULL);
	const char *args_agent = "{\"command\": \"true\"}";
	const char *args_pc = "{\"command\": \"true\", \"profile\": \"boxpc\"}";
	/* creates the default sessions */
	for (int i = 0; i < 4; i++) {
		free(tool(rt, &ctx, "run_command", args_agent));
		free(tool(rt, &ctx, "run_command", args_pc));
	}
	int64_t *va = calloc(n, sizeof(int64_t)), *vp = calloc(n, sizeof(int64_t)),
	        *vc = calloc(n, sizeof(int64_t)), *first = calloc(m, sizeof(int64_t)),
	        *pooled = calloc(m, sizeof(int64_t));
	size_t ncli = n < 30 ? n : 30;
	char *docker_exec[] = {"/usr/bin/docker", "exec", (char *)cli_container, "true", NULL};
	for (size_t i = 0; i < n; i++) {
		int64_t t0 = bench_now_ns();
		free(tool(rt, &ctx, "run_command", args_agent));
		va[i] = bench_now_ns() - t0;
		t0 = bench_now_ns();
		free(tool(rt, &ctx, "run_command", args_pc));
		vp[i] = bench_now_ns() - t0;
		if (i < ncli && (vc[i] = bench_time_spawn(docker_exec)) < 0) {
			fprintf(stderr, "%s: docker exec failed\n", prog);
			exit(1);
		}
	}
	for (size_t i = 0; i < m; i++) {
		char *json = tool(rt, &ctx, "new_sandbox_session", NULL);
		const char *p = strstr(json, "\"sandbox_session_id\": \"");
		if (!p) {
			fprintf(stderr, "%s: new_sandbox_session: %s\n", prog, json);
			exit(1);
		}
		char sid[128];
		snprintf(sid, sizeof(sid), "%.*s", (int)strcspn(p + 23, "\""), p + 23);
		free(json);
		char a[256];
		snprintf(a, sizeof(a), "{\"command\": \"true\", \"sandbox_session_id\": \"%s\"}",
		         sid);
		int64_t t0 = bench_now_ns();
		free(tool(rt, &ctx, "run_command", a));
		first[i] = bench_now_ns() - t0;
		snprintf(a, sizeof(a), "{\"sandbox_session_id\": \"%s\"}", sid);
		free(tool(rt, &ctx, "destroy_sandbox_session", a));
	}
	/* The same with a warm pool (filled between samples, untimed, as a host's background
	 * refill does while the agent thinks). */
	for (size_t i = 0; i < m; i++)
		pooled[i] = bench_pooled_first(prog, rt, &ctx, "boxpool");
	free(
	    tool(rt, &ctx, "destroy_sandbox_session", "{\"sandbox_session_id\": \"default:box\"}"));
	free(tool(rt, &ctx, "destroy_sandbox_session",
	          "{\"sandbox_session_id\": \"default:boxpc\"}"));
	printf("docker: through the tool layer (aks_runtime_call_tool, thread broker; the core "
	       "keeps the session's handle between calls)\n");
	double a = bench_median_ms(va, n), pc = bench_median_ms(vp, n),
	       d = bench_median_ms(vc, ncli);
	report("run_command true, existing session, agent", va, n);
	report("run_command true, existing session, agent: false", vp, n);
	report("docker exec <id> true (CLI; fewer samples)", vc, ncli);
	report("a new session's first run_command (creates; agent)", first, m);
	report("the same with a warm pool (pool: {size: 1})", pooled, m);
	printf("  first run_command with a pool / docker run --rm: %.3fx; without: %.3fx\n",
	       bench_median_ms(pooled, m) / docker_run_ms,
	       bench_median_ms(first, m) / docker_run_ms);
	printf("  agent / docker exec: %.3fx;  agent: false / docker exec: %.3fx;  agent / "
	       "agent: false: %.3fx\n",
	       a / d, pc / d, a / pc);
	bench_runtime_close(prog, &b);
	free(va);
	free(vp);
	free(vc);
	free(first);
	free(pooled);
}

/* create + first command (+ destroy) on prov: into first[i] and whole[i]. */
static void first_command(aks_provider *prov, int64_t *first, int64_t *whole)
{
	aks_call call;
	aks_call_init(&call, 120, NULL, NULL, NULL);
	aks_error *err = NULL;
	aks_sandbox *sb = NULL;
	int64_t t0 = bench_now_ns();
	if (aks_provider_create(prov, &call, &sb, &err) != AKS_OK)
		bench_die(prog, "create", err);
	aks_result *r = NULL;
	if (aks_sandbox_execute_command(sb, "true", &call, &r, &err) != AKS_OK)
		bench_die(prog, "execute_command", err);
	*first = bench_now_ns() - t0;
	aks_result_free(r);
	char *sid = strdup(aks_sandbox_get_id(sb));
	aks_sandbox_close(sb);
	if (aks_provider_destroy(prov, sid, &call, &err) != AKS_OK)
		bench_die(prog, "destroy", err);
	*whole = bench_now_ns() - t0;
	free(sid);
}

int main(int argc, char **argv)
{
	size_t n = 100, m = 10;
	const char *agent = NULL;
	int opt;
	while ((opt = getopt(argc, argv, "n:m:a:")) != -1) {
		if (opt == 'n')
			n = (size_t)atol(optarg);
		else if (opt == 'm')
			m = (size_t)atol(optarg);
		else if (opt == 'a')
			agent = optarg;
		else {
			fprintf(stderr, "usage: %s [-n N] [-m M] [-a AGENT] [IMAGE]\n", prog);
			return 2;
		}
	}
	const char *image = optind < argc ? argv[optind] : "aksandbox-test:bookworm";
	if (n < 2 || m < 2) {
		fprintf(stderr, "%s: -n and -m must be at least 2\n", prog);
		return 2;
	}
	char agent_buf[4096];
	if (!agent) {
		const char *b = getenv("AKS_TEST_BUILDDIR");
		snprintf(agent_buf, sizeof(agent_buf), "%s/agent/aksandbox-agent", b ? b : ".");
		agent = agent_buf;
	}
	if (access(agent, X_OK) != 0) {
		fprintf(stderr, "%s: no aksandbox-agent at %s (give -a AGENT)\n", prog, agent);
		return 1;
	}
	aks_config *cfg_a = NULL, *cfg_p = NULL;
	aks_provider *prov_a = open_docker(image, agent, &cfg_a);
	aks_provider *prov_p = open_docker(image, "false", &cfg_p);
	printf("docker: %s\n", aks_provider_get_description(prov_a));
	aks_error *err = NULL;
	aks_call call;
	aks_call_init(&call, 120, NULL, NULL, NULL);
	aks_sandbox *sa = NULL, *sp = NULL;
	if (aks_provider_create(prov_a, &call, &sa, &err) != AKS_OK ||
	    aks_provider_create(prov_p, &call, &sp, &err) != AKS_OK)
		bench_die(prog, "create", err);
	char *ida = strdup(aks_sandbox_get_id(sa)), *idp = strdup(aks_sandbox_get_id(sp));
	curl_global_init(CURL_GLOBAL_ALL);
	CURL *c = curl_easy_init();

	int64_t *plug_a = calloc(n, sizeof(int64_t)), *plug_p = calloc(n, sizeof(int64_t)),
	        *api = calloc(n, sizeof(int64_t)), *cli = calloc(n, sizeof(int64_t));
	/* warm-up: the agent starts on the first operation */
	for (int i = 0; i < 3; i++) {
		plugin_true(sa);
		plugin_true(sp);
		if (bare_exec(c, idp) < 0) {
			fprintf(stderr, "%s: the bare Engine API exec failed\n", prog);
			return 1;
		}
	}
	if (!aks_provider_get_capabilities(prov_a)->stateful) {
		fprintf(stderr, "%s: the agent is not in use: %s\n", prog,
		        aks_provider_get_description(prov_a));
		return 1;
	}
	/* interleaved, so drift affects all alike */
	size_t ncli = n < 30 ? n : 30;
	char *docker_exec[] = {"/usr/bin/docker", "exec", idp, "true", NULL};
	for (size_t i = 0; i < n; i++) {
		plug_a[i] = plugin_true(sa);
		plug_p[i] = plugin_true(sp);
		if ((api[i] = bare_exec(c, idp)) < 0) {
			fprintf(stderr, "%s: the bare Engine API exec failed\n", prog);
			return 1;
		}
		if (i < ncli && (cli[i] = bench_time_spawn(docker_exec)) < 0) {
			fprintf(stderr, "%s: docker exec failed\n", prog);
			return 1;
		}
	}
	printf("docker: one command (true) in an existing sandbox, image %s\n", image);
	double pa = bench_median_ms(plug_a, n), pp = bench_median_ms(plug_p, n),
	       a = bench_median_ms(api, n), d = bench_median_ms(cli, ncli);
	report("plugin execute_command through aksandbox-agent", plug_a, n);
	report("plugin execute_command, agent: false (3 API calls)", plug_p, n);
	report("bare Engine API: exec create + start + inspect", api, n);
	report("docker exec <id> true (CLI; fewer samples)", cli, ncli);
	printf("  agent / docker exec: %.3fx;  agent: false / docker exec: %.3fx;  agent / agent: "
	       "false: %.3fx\n",
	       pa / d, pp / d, pa / pp);
	printf("  agent: false / bare API: %.2fx (%+.3f ms)\n", pp / a, pp - a);

	aks_sandbox_close(sa);
	aks_sandbox_close(sp);
	if (aks_provider_destroy(prov_a, ida, &call, &err) != AKS_OK)
		bench_die(prog, "destroy", err);

	/* a new sandbox's first command */
	int64_t *first_a = calloc(m, sizeof(int64_t)), *whole_a = calloc(m, sizeof(int64_t)),
	        *first_p = calloc(m, sizeof(int64_t)), *whole_p = calloc(m, sizeof(int64_t)),
	        *run = calloc(m, sizeof(int64_t));
	char *docker_run[] = {"/usr/bin/docker", "run", "--rm", (char *)image, "true", NULL};
	for (size_t i = 0; i < m; i++) {
		first_command(prov_a, &first_a[i], &whole_a[i]);
		first_command(prov_p, &first_p[i], &whole_p[i]);
		if ((run[i] = bench_time_spawn(docker_run)) < 0) {
			fprintf(stderr, "%s: docker run failed\n", prog);
			return 1;
		}
	}
	printf("docker: a new sandbox's first command (true)\n");
	double fa = bench_median_ms(first_a, m), fp = bench_median_ms(first_p, m),
	       rr = bench_median_ms(run, m);
	report("plugin create + execute_command, agent", first_a, m);
	report("plugin create + execute_command, agent: false", first_p, m);
	report("the same + destroy, agent", whole_a, m);
	report("the same + destroy, agent: false", whole_p, m);
	report("docker run --rm <image> true (CLI)", run, m);
	printf("  first command / docker run: agent %.2fx, agent: false %.2fx\n", fa / rr, fp / rr);

	/* the CLI's samples in the tool section use the per-call sandbox, still running */
	bench_tools(image, agent, idp, n, m, rr);
	if (aks_provider_destroy(prov_p, idp, &call, &err) != AKS_OK)
		bench_die(prog, "destroy", err);

	curl_easy_cleanup(c);
	curl_global_cleanup();
	free(plug_a);
	free(plug_p);
	free(api);
	free(cli);
	free(first_a);
	free(whole_a);
	free(first_p);
	free(whole_p);
	free(run);
	free(ida);
	free(idp);
	aks_provider_close(prov_a);
	aks_provider_close(prov_p);
	aks_config_free(cfg_a);
	aks_config_free(cfg_p);
	return 0;
}
