/*
 * tests/bench/bench_bwrap.c - the bubblewrap provider's cost, against local_subprocess (no
 * isolation) and docker, measured in the same run:
 *
 *  exec:  one execute_command("true") in an existing sandbox: bubblewrap through
 *         aksandbox-agent, bubblewrap with one bwrap per call, and local_subprocess through
 *         aksandbox-agent (the same agent, unconfined), interleaved;
 *  first: a new sandbox's first command (create + execute_command("true")) and its whole
 *         life (+ destroy): bubblewrap through the agent, local_subprocess through the agent,
 *         and docker through the agent (runc, the test image), interleaved.
 *
 * Usage: bench_bwrap [-n N] [-m M] [-a AGENT] [IMAGE]  (N exec samples, default 100; M
 * first-command samples, default 10; AGENT the build's aksandbox-agent; IMAGE docker's,
 * default aksandbox-test:bookworm). Needs bwrap, and the Docker Engine with the image when
 * the docker plugin is on the plugin path: its absence fails the run rather than skipping.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"

static const char *prog = "bench_bwrap";

static void report(const char *what, int64_t *v, size_t n)
{
	double med = bench_median_ms(v, n);
	printf("  %-58s %9.3f ms  (p10 %.3f, p90 %.3f)\n", what, med,
	       bench_percentile_ms(v, n, 0.1), bench_percentile_ms(v, n, 0.9));
}

/* One execute_command("true") on sb: ns. */
static int64_t run_true(aks_sandbox *sb)
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

/* create + first command into *first, + destroy into *whole. */
static void first_command(aks_provider *prov, int64_t *first, int64_t *whole)
{
	int64_t t0 = bench_now_ns();
	aks_sandbox *sb = bench_create(prog, prov, NULL);
	run_true(sb);
	*first = bench_now_ns() - t0;
	bench_destroy(prog, prov, sb);
	*whole = bench_now_ns() - t0;
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
	char block[4200];
	aks_config *c_bw = NULL, *c_pc = NULL, *c_ls = NULL, *c_dk = NULL;
	snprintf(block, sizeof(block), "    agent: %s\n    landlock: required\n", agent);
	aks_provider *bw = bench_open_provider(prog, "bubblewrap", block, &c_bw);
	aks_provider *pc = bench_open_provider(prog, "bubblewrap",
	                                       "    agent: false\n    landlock: 'off'\n", &c_pc);
	snprintf(block, sizeof(block), "    agent: %s\n", agent);
	aks_provider *ls = bench_open_provider(prog, "local_subprocess", block, &c_ls);
	snprintf(block, sizeof(block),
	         "    image: %s\n    pull: false\n    agent: %s\n"
	         "    labels: {io.aksandbox.test: bench}\n",
	         image, agent);
	aks_provider *dk = bench_open_provider(prog, "docker", block, &c_dk);
	printf("bubblewrap: %s\n", aks_provider_get_description(bw));

	/* one command in an existing sandbox */
	aks_sandbox *s_bw = bench_create(prog, bw, NULL), *s_pc = bench_create(prog, pc, NULL),
	            *s_ls = bench_create(prog, ls, NULL);
	for (int i = 0; i < 3; i++) { /* warm-up: the agents start on the first operation */
		run_true(s_bw);
		run_true(s_pc);
		run_true(s_ls);
	}
	int64_t *e_bw = calloc(n, sizeof(int64_t)), *e_pc = calloc(n, sizeof(int64_t)),
	        *e_ls = calloc(n, sizeof(int64_t));
	for (size_t i = 0; i < n; i++) { /* interleaved, rotating, so drift affects all alike */
		for (size_t k = 0; k < 3; k++)
			switch ((i + k) % 3) {
			case 0:
				e_bw[i] = run_true(s_bw);
				break;
			case 1:
				e_pc[i] = run_true(s_pc);
				break;
			default:
				e_ls[i] = run_true(s_ls);
			}
	}
	printf("bubblewrap: one command (true) in an existing sandbox, %zu samples each\n", n);
	double bwm = bench_median_ms(e_bw, n), pcm = bench_median_ms(e_pc, n),
	       lsm = bench_median_ms(e_ls, n);
	report("bubblewrap through aksandbox-agent", e_bw, n);
	report("bubblewrap, one bwrap per call", e_pc, n);
	report("local_subprocess through aksandbox-agent (no isolation)", e_ls, n);
	printf("  bubblewrap agent / local_subprocess agent: %.3fx;  per call / agent: %.2fx\n",
	       bwm / lsm, pcm / bwm);
	bench_destroy(prog, bw, s_bw);
	bench_destroy(prog, pc, s_pc);
	bench_destroy(prog, ls, s_ls);

	/* a new sandbox's first command */
	int64_t *f_bw = calloc(m, sizeof(int64_t)), *w_bw = calloc(m, sizeof(int64_t)),
	        *f_ls = calloc(m, sizeof(int64_t)), *w_ls = calloc(m, sizeof(int64_t)),
	        *f_dk = calloc(m, sizeof(int64_t)), *w_dk = calloc(m, sizeof(int64_t));
	int64_t skip, skip2;
	first_command(dk, &skip, &skip2); /* warm-up: docker's first container */
	for (size_t i = 0; i < m; i++) {
		first_command(bw, &f_bw[i], &w_bw[i]);
		first_command(ls, &f_ls[i], &w_ls[i]);
		first_command(dk, &f_dk[i], &w_dk[i]);
	}
	printf("bubblewrap: a new sandbox's first command (create + true), %zu samples each\n", m);
	double fb = bench_median_ms(f_bw, m), fl = bench_median_ms(f_ls, m),
	       fd = bench_median_ms(f_dk, m);
	report("bubblewrap through aksandbox-agent", f_bw, m);
	report("local_subprocess through aksandbox-agent", f_ls, m);
	report("docker (runc) through aksandbox-agent", f_dk, m);
	report("bubblewrap: create + true + destroy", w_bw, m);
	report("docker: create + true + destroy", w_dk, m);
	printf("  bubblewrap / docker: %.3fx;  bubblewrap / local_subprocess: %.2fx\n", fb / fd,
	       fb / fl);

	free(e_bw), free(e_pc), free(e_ls);
	free(f_bw), free(w_bw), free(f_ls), free(w_ls), free(f_dk), free(w_dk);
	aks_provider_close(bw), aks_provider_close(pc), aks_provider_close(ls);
	aks_provider_close(dk);
	aks_config_free(c_bw), aks_config_free(c_pc), aks_config_free(c_ls), aks_config_free(c_dk);
	return 0;
}
