/*
 * tests/bench/bench_ec2_ssm.c - the ec2_ssm provider's per-call cost against the fake AWS
 * service (tests/fakes/aws), for run.sh to set beside the official AWS SDK for JavaScript
 * (@aws-sdk/client-ssm) doing the same against the same fake in the same run
 * (tests/integration/ec2_ssm/ec2_ssm_bench.mjs):
 *
 *  command: one execute_command("true") on an instance attached to (the plugin is
 *           attach-only): SendCommand with AWS-RunShellScript, then GetCommandInvocation
 *           read until the command ends, first after 100 ms, the wait doubling up to
 *           poll_interval (0.05 s here, its least: every read 50 ms after the last).
 *
 * Prints "ec2_ssm-plugin command median <ms> ms p90 <ms> ms", which run.sh reads. Usage:
 * bench_ec2_ssm [-n N] (samples, default 50). The fake comes from the environment
 * (AWS_ENDPOINT_URL_SSM or AWS_ENDPOINT_URL, the key pair, AWS_REGION), as fake-aws.sh
 * exports it and run.sh starts it; it registers the instance attached to.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "bench_util.h"

static const char *prog = "bench_ec2_ssm";

/* the instance fake-aws.sh registers */
#define INSTANCE "i-0123456789abcdef0"

int main(int argc, char **argv)
{
	size_t n = 50;
	for (int opt; (opt = getopt(argc, argv, "n:")) != -1;)
		if (opt == 'n')
			n = (size_t)strtoul(optarg, NULL, 10);
	/* never the real AWS: without the fake's URL the plugin would take the region's */
	if (n == 0 || (!getenv("AWS_ENDPOINT_URL_SSM") && !getenv("AWS_ENDPOINT_URL"))) {
		fprintf(stderr,
		        "usage: %s [-n N]  (with AWS_ENDPOINT_URL_SSM or AWS_ENDPOINT_URL "
		        "naming the fake AWS service: run through tests/bench/run.sh)\n",
		        prog);
		return 2;
	}
	aks_config *config = NULL;
	/* the poll_interval ec2_ssm_bench.mjs polls with too */
	aks_provider *prov = bench_open_provider(
	    prog, "ec2_ssm", "    attach_to: " INSTANCE "\n    poll_interval: 0.05\n", &config);
	aks_sandbox *sb = bench_attach(prog, prov, INSTANCE);
	int64_t *cmd = calloc(n, sizeof(*cmd));
	if (!cmd)
		return 1;
	aks_error *err = NULL;
	aks_call call;
	/* one untimed warm-up: the connection opened */
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
		if (i > 0)
			cmd[i - 1] = t1 - t0;
	}
	double median = bench_median_ms(cmd, n); /* sorts cmd */
	printf("ec2_ssm-plugin command median %.2f ms p90 %.2f ms\n", median,
	       bench_percentile_ms(cmd, n, 0.9));
	aks_sandbox_close(sb); /* attached: the instance is not ours to destroy */
	aks_provider_close(prov);
	aks_config_free(config);
	free(cmd);
	return 0;
}
