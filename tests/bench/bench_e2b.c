/*
 * tests/bench/bench_e2b.c - the e2b provider's per-call cost against the fake E2B service
 * (tests/fakes/e2b), for run.sh to set beside the official JS SDK doing the same against the
 * same fake in the same run (tests/integration/e2b/e2b_bench.mjs):
 *
 *  command: one execute_command("true") in an existing sandbox (a Connect stream to envd:
 *           Start, the start, output and end events);
 *  file:    a 1 MiB round trip: upload_file then download_file of the same bytes (each with
 *           the path resolved in the sandbox first, as the plugin's path rule does).
 *
 * Prints one line per figure, "e2b-plugin <what> median <ms> ms p90 <ms> ms", which run.sh
 * reads. Usage: bench_e2b [-n N] (samples of each, default 50). The fake comes from the
 * environment (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY), as run.sh starts it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"

static const char *prog = "bench_e2b";

static void report(const char *what, int64_t *v, size_t n)
{
	double median = bench_median_ms(v, n); /* sorts v */
	printf("e2b-plugin %s median %.2f ms p90 %.2f ms\n", what, median,
	       bench_percentile_ms(v, n, 0.9));
}

int main(int argc, char **argv)
{
	size_t n = 50;
	for (int opt; (opt = getopt(argc, argv, "n:")) != -1;)
		if (opt == 'n')
			n = (size_t)strtoul(optarg, NULL, 10);
	if (n == 0 || !getenv("E2B_API_URL")) {
		fprintf(stderr,
		        "usage: %s [-n N]  (with E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY "
		        "naming the fake E2B service: run through tests/bench/run.sh)\n",
		        prog);
		return 2;
	}
	aks_config *config = NULL;
	aks_provider *prov = bench_open_provider(prog, "e2b", "    template: base\n", &config);
	aks_sandbox *sb = bench_create(prog, prov, NULL);
	size_t size = 1u << 20;
	unsigned char *data = malloc(size);
	int64_t *cmd = calloc(n, sizeof(*cmd)), *file = calloc(n, sizeof(*file));
	if (!data || !cmd || !file)
		return 1;
	for (size_t i = 0; i < size; i++)
		data[i] = (unsigned char)(i * 7 + i / 251);
	aks_error *err = NULL;
	aks_call call;
	/* one untimed warm-up of each: connections opened, the interpreter's first fork done */
	for (size_t i = 0; i <= n; i++) {
		aks_call_init(&call, 60, NULL, NULL, NULL);
		aks_result *r = NULL;
		int64_t t0 = bench_now_ns();
		if (aks_sandbox_execute_command(sb, "true", &call, &r, &err) != AKS_OK)
			bench_die(prog, "execute_command", err);
		int64_t t1 = bench_now_ns();
		if (aks_result_get_exit_code(r) != 0) {
			fprintf(stderr, "%s: true exited %d\n", prog, aks_result_get_exit_code(r));
			return 1;
		}
		aks_result_free(r);
		r = NULL;
		if (aks_sandbox_upload_file(sb, "bench.bin", data, size, &call, &err) != AKS_OK)
			bench_die(prog, "upload_file", err);
		if (aks_sandbox_download_file(sb, "bench.bin", &call, &r, &err) != AKS_OK)
			bench_die(prog, "download_file", err);
		int64_t t2 = bench_now_ns();
		size_t got = 0;
		const unsigned char *bytes = aks_result_get_file(r, 0, NULL, NULL, &got);
		if (got != size || memcmp(bytes, data, size) != 0) {
			fprintf(stderr,
			        "%s: the file came back with %zu bytes, not the ones sent\n", prog,
			        got);
			return 1;
		}
		aks_result_free(r);
		if (i > 0) {
			cmd[i - 1] = t1 - t0;
			file[i - 1] = t2 - t1;
		}
	}
	report("run_command-true", cmd, n);
	report("file-1MiB-round-trip", file, n);
	bench_destroy(prog, prov, sb);
	aks_provider_close(prov);
	aks_config_free(config);
	free(data);
	free(cmd);
	free(file);
	return 0;
}
