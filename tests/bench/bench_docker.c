/*
 * tests/bench/bench_docker.c - the docker provider's cost, against the same
 * work done without it, measured in the same run:
 *
 *  exec:  one execute_command("true") in an existing sandbox (the plugin's
 *         three Engine API calls), against the same three bare API calls made
 *         here with libcurl over the same socket (exec create, exec start,
 *         exec inspect), and against `docker exec <id> true` (the CLI);
 *  first: a new sandbox's first command (create + execute + destroy) against
 *         `docker run --rm <image> true`;
 *  tool:  the same two through the tool layer (aks_runtime_call_tool,
 *         run_command in an existing session, and a new session's first
 *         run_command), on a per_session docker profile.
 *
 * Usage: bench_docker [-n N] [-m M] [IMAGE]   (N exec samples, default 100;
 * M first-command samples, default 10). Needs the Docker Engine on
 * /var/run/docker.sock and the image (default aksandbox-test:bookworm).
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

static aks_provider *open_docker(const char *image, char *yaml_path)
{
	aks_error *err = NULL;
	const aks_plugin *plugin = NULL;
	if (aks_plugin_load("docker", AKS_PLUGIN_PROVIDER, &plugin, &err) != AKS_OK)
		bench_die(prog, "loading docker.so", err);
	FILE *f = fopen(yaml_path, "w");
	if (!f) {
		perror(yaml_path);
		exit(1);
	}
	fprintf(f,
	        "sandbox:\n  enabled: true\n  type: docker\n  docker:\n    image: %s\n"
	        "    pull: false\n    labels: {io.aksandbox.test: bench}\n",
	        image);
	fclose(f);
	static aks_config *config; /* lives as long as the provider, i.e. the run */
	if (aks_config_load_block(plugin, yaml_path, &config, &err) != AKS_OK)
		bench_die(prog, "loading the config", err);
	aks_provider *prov = NULL;
	if (aks_provider_open(plugin, config, &prov, &err) != AKS_OK)
		bench_die(prog, "opening the provider", err);
	return prov;
}

static void report(const char *what, int64_t *v, size_t n)
{
	double med = bench_median_ms(v, n);
	printf("  %-52s %9.3f ms  (p10 %.3f, p90 %.3f)\n", what, med,
	       bench_percentile_ms(v, n, 0.1), bench_percentile_ms(v, n, 0.9));
}

/* ---- the tool layer ------------------------------------------------------------------- */

static char *tool(aks_runtime *rt, const aks_tool_context *ctx, const char *name, const char *args)
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

static void bench_tools(const char *image, size_t n, size_t m)
{
	char dir[] = "/tmp/bench-docker-tool-XXXXXX";
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		exit(1);
	}
	char config[128], state[128], cmd[200];
	snprintf(config, sizeof(config), "%s/config.yaml", dir);
	snprintf(state, sizeof(state), "%s/state", dir);
	FILE *f = fopen(config, "w");
	if (!f) {
		perror(config);
		exit(1);
	}
	fprintf(f,
	        "sandbox:\n  enabled: true\n  default_profile: box\n  profiles:\n    box:\n"
	        "      type: docker\n      scope: per_session\n"
	        "      docker: {image: %s, pull: false, labels: {io.aksandbox.test: bench}}\n",
	        image);
	fclose(f);
	aks_error *err = NULL;
	aks_settings *settings = NULL;
	aks_runtime *rt = NULL;
	if (aks_settings_load(config, NULL, &settings, &err) < 0)
		bench_die(prog, "settings", err);
	if (aks_runtime_open(settings, state, &rt, &err) < 0)
		bench_die(prog, "runtime", err);
	aks_tool_context ctx;
	aks_tool_context_init(&ctx, "bench", NULL);
	const char *args = "{\"command\": \"true\"}";
	free(tool(rt, &ctx, "run_command", args)); /* creates the default session */
	for (int i = 0; i < 3; i++)
		free(tool(rt, &ctx, "run_command", args));
	int64_t *v = calloc(n, sizeof(int64_t)), *first = calloc(m, sizeof(int64_t));
	for (size_t i = 0; i < n; i++) {
		int64_t t0 = bench_now_ns();
		free(tool(rt, &ctx, "run_command", args));
		v[i] = bench_now_ns() - t0;
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
	free(
	    tool(rt, &ctx, "destroy_sandbox_session", "{\"sandbox_session_id\": \"default:box\"}"));
	printf("docker: through the tool layer (aks_runtime_call_tool, thread broker)\n");
	report("run_command true in an existing session", v, n);
	report("a new session's first run_command (creates)", first, m);
	aks_runtime_close(rt);
	aks_settings_free(settings);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "%s: cannot remove %s\n", prog, dir);
	free(v);
	free(first);
}

int main(int argc, char **argv)
{
	size_t n = 100, m = 10;
	int opt;
	while ((opt = getopt(argc, argv, "n:m:")) != -1) {
		if (opt == 'n')
			n = (size_t)atol(optarg);
		else if (opt == 'm')
			m = (size_t)atol(optarg);
		else {
			fprintf(stderr, "usage: %s [-n N] [-m M] [IMAGE]\n", prog);
			return 2;
		}
	}
	const char *image = optind < argc ? argv[optind] : "aksandbox-test:bookworm";
	if (n < 2 || m < 2) {
		fprintf(stderr, "%s: -n and -m must be at least 2\n", prog);
		return 2;
	}
	char yaml[] = "/tmp/bench-docker-XXXXXX";
	int fd = mkstemp(yaml);
	if (fd < 0) {
		perror("mkstemp");
		return 1;
	}
	close(fd);
	aks_provider *prov = open_docker(image, yaml);
	unlink(yaml);
	aks_error *err = NULL;
	aks_call call;
	aks_call_init(&call, 120, NULL, NULL, NULL);
	aks_sandbox *sb = NULL;
	if (aks_provider_create(prov, &call, &sb, &err) != AKS_OK)
		bench_die(prog, "create", err);
	char *id = strdup(aks_sandbox_get_id(sb));
	curl_global_init(CURL_GLOBAL_ALL);
	CURL *c = curl_easy_init();

	int64_t *plug = calloc(n, sizeof(int64_t)), *api = calloc(n, sizeof(int64_t)),
	        *cli = calloc(n, sizeof(int64_t));
	/* warm-up */
	for (int i = 0; i < 3; i++) {
		aks_result *r = NULL;
		if (aks_sandbox_execute_command(sb, "true", &call, &r, &err) != AKS_OK)
			bench_die(prog, "execute_command", err);
		aks_result_free(r);
		if (bare_exec(c, id) < 0) {
			fprintf(stderr, "%s: the bare Engine API exec failed\n", prog);
			return 1;
		}
	}
	/* interleaved, so drift affects both alike */
	size_t ncli = n < 30 ? n : 30;
	char *docker_exec[] = {"/usr/bin/docker", "exec", id, "true", NULL};
	for (size_t i = 0; i < n; i++) {
		int64_t t0 = bench_now_ns();
		aks_result *r = NULL;
		aks_call_init(&call, 120, NULL, NULL, NULL);
		if (aks_sandbox_execute_command(sb, "true", &call, &r, &err) != AKS_OK)
			bench_die(prog, "execute_command", err);
		plug[i] = bench_now_ns() - t0;
		if (aks_result_get_exit_code(r) != 0) {
			fprintf(stderr, "%s: true exited with %d\n", prog,
			        aks_result_get_exit_code(r));
			return 1;
		}
		aks_result_free(r);
		if ((api[i] = bare_exec(c, id)) < 0) {
			fprintf(stderr, "%s: the bare Engine API exec failed\n", prog);
			return 1;
		}
		if (i < ncli && (cli[i] = bench_time_spawn(docker_exec)) < 0) {
			fprintf(stderr, "%s: docker exec failed\n", prog);
			return 1;
		}
	}
	printf("docker: one command (true) in an existing sandbox, image %s\n", image);
	double p = bench_median_ms(plug, n), a = bench_median_ms(api, n),
	       d = bench_median_ms(cli, ncli);
	report("plugin execute_command (3 Engine API calls)", plug, n);
	report("bare Engine API: exec create + start + inspect", api, n);
	report("docker exec <id> true (CLI; fewer samples)", cli, ncli);
	printf("  plugin / bare API: %.2fx (%+.3f ms);  plugin / docker exec: %.2fx\n", p / a,
	       p - a, p / d);

	aks_sandbox_close(sb);
	if (aks_provider_destroy(prov, id, &call, &err) != AKS_OK)
		bench_die(prog, "destroy", err);

	/* a new sandbox's first command */
	int64_t *first = calloc(m, sizeof(int64_t)), *whole = calloc(m, sizeof(int64_t)),
	        *run = calloc(m, sizeof(int64_t));
	char *docker_run[] = {"/usr/bin/docker", "run", "--rm", (char *)image, "true", NULL};
	for (size_t i = 0; i < m; i++) {
		aks_call_init(&call, 120, NULL, NULL, NULL);
		int64_t t0 = bench_now_ns();
		if (aks_provider_create(prov, &call, &sb, &err) != AKS_OK)
			bench_die(prog, "create", err);
		aks_result *r = NULL;
		if (aks_sandbox_execute_command(sb, "true", &call, &r, &err) != AKS_OK)
			bench_die(prog, "execute_command", err);
		first[i] = bench_now_ns() - t0;
		aks_result_free(r);
		char *sid = strdup(aks_sandbox_get_id(sb));
		aks_sandbox_close(sb);
		if (aks_provider_destroy(prov, sid, &call, &err) != AKS_OK)
			bench_die(prog, "destroy", err);
		whole[i] = bench_now_ns() - t0;
		free(sid);
		if ((run[i] = bench_time_spawn(docker_run)) < 0) {
			fprintf(stderr, "%s: docker run failed\n", prog);
			return 1;
		}
	}
	printf("docker: a new sandbox's first command (true)\n");
	double f = bench_median_ms(first, m), w = bench_median_ms(whole, m),
	       rr = bench_median_ms(run, m);
	report("plugin create + execute_command", first, m);
	report("plugin create + execute_command + destroy", whole, m);
	report("docker run --rm <image> true (CLI)", run, m);
	printf("  first command / docker run: %.2fx;  with destroy: %.2fx\n", f / rr, w / rr);

	bench_tools(image, n, m);

	curl_easy_cleanup(c);
	curl_global_cleanup();
	free(plug);
	free(api);
	free(cli);
	free(first);
	free(whole);
	free(run);
	free(id);
	aks_provider_close(prov);
	return 0;
}
