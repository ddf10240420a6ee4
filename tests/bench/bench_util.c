/*
 * tests/bench/bench_util.c - timing helpers shared by the benchmark programs.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
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
