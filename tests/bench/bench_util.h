/*
 * tests/bench/bench_util.h - timing helpers shared by the benchmark programs.
 */
#ifndef AKS_BENCH_UTIL_H
#define AKS_BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include <aksandbox/aksandbox.h>

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t bench_now_ns(void);
/* The median of v in milliseconds; sorts v in place. */
double bench_median_ms(int64_t *v, size_t n);
/* The p-quantile (0..1) of sorted samples, in milliseconds. */
double bench_percentile_ms(const int64_t *sorted, size_t n, double p);
/* fork + execv + waitpid: nanoseconds, or -1 when the program did not exit 0. */
int64_t bench_time_spawn(char *const argv[]);
/* The first bash found, or NULL. */
const char *bench_find_bash(void);
/* Prints "<prog>: <what>: <error>", frees the error and exits 1. */
void bench_die(const char *prog, const char *what, aks_error *err) __attribute__((noreturn));

#endif /* AKS_BENCH_UTIL_H */
