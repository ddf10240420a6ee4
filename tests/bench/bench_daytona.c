/*
 * tests/bench/bench_daytona.c - the daytona provider's per-call cost against the fake Daytona
 * service (tests/fakes/daytona), for run.sh to set beside the official JS SDK doing the same
 * against the same fake in the same run (tests/integration/daytona/daytona_bench.mjs):
 *
 *  command: one execute_command("true") in an existing sandbox (one exec in the toolbox
 *           session the handle keeps, made by the untimed first command);
 *  file:    a 1 MiB round trip: upload_file then download_file of the same bytes (each with
 *           the path resolved in the sandbox first, a session command, as the plugin's path
 *           rule does).
 *
 * Prints one line per figure, "daytona-plugin <what> median <ms> ms p90 <ms> ms", which
 * run.sh reads. Usage: bench_daytona [-n N] (samples of each, default 50). The fake comes from
 * the environment (DAYTONA_API_URL, DAYTONA_API_KEY), as run.sh starts it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"

static const char *prog = "bench_daytona";

static void report(const char *what, int64_t *v, size_t n)
{
	double median = bench_median_ms(v, n); /* sorts v */
	printf("daytona-plugin %s median %.2f ms p90 %.2f ms\n", what, median,
	       bench_percentile_ms(v, n, 0.9));
}

int main(int argc, char **argv)
{
	size_t n = 50;
	for (int opt; (opt = getopt(argc, argv, "n:")) != -1;)
		if (opt == 'n')
			n = (size_t)strtoul(optarg, NULL, 10);
	/* never the real Daytona: without the fake's URL the plugin would default to it */
	if (n == 0 || !getenv("DAYTONA_API_URL") || !getenv("DAYTONA_API_KEY")) {
		fprintf(stderr,
		        "usage: %s [-n N]  (with DAYTONA_API_URL and DAYTONA_API_KEY naming the "
		        "fake Daytona service: run through tests/bench/run.sh)\n",
		        prog);
		return 2;
	}
	aks_config *config = NULL;
	/* the image contract.yaml runs the plugin with; the SDK's bench creates the same */
	aks_provider *prov =
	    bench_open_provider(prog, "daytona", "    image: python:3.12-slim\n", &config);
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
	/* one untimed warm-up of each: the connection opened, the handle's session made */
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
