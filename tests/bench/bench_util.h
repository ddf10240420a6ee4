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
/* A provider of plugin_name configured with the sugar block `block` (YAML, indented 4);
 * *config is the config to free after the provider. Exits on failure. */
aks_provider *bench_open_provider(const char *prog, const char *plugin_name, const char *block,
                                  aks_config **config);
/* create under policy (NULL: the default), and close + destroy. Exit on failure. */
aks_sandbox *bench_create(const char *prog, aks_provider *prov, const aks_policy *policy);
void bench_destroy(const char *prog, aks_provider *prov, aks_sandbox *sb);
/* Attaches to the existing environment `id` (an attach-only provider's: close the handle
 * after, nothing to destroy). Exits on failure. */
aks_sandbox *bench_attach(const char *prog, aks_provider *prov, const char *id);
/* Prints "<prog>: <what>: <error>", frees the error and exits 1. */
void bench_die(const char *prog, const char *what, aks_error *err) __attribute__((noreturn));
/* A runtime over the configuration `yaml`, written in a new temporary directory beside its
 * state directory; bench_runtime_close removes both. Exits with the reason on failure. */
typedef struct bench_runtime {
	char dir[64];
	aks_settings *settings;
	aks_runtime *rt;
} bench_runtime;
void bench_runtime_open(const char *prog, const char *yaml, bench_runtime *b);
void bench_runtime_close(const char *prog, bench_runtime *b);
/* A tool call through rt; exits with the reason on an error result (or a run_command whose
 * exit code is not 0). Returns the JSON (the caller's). */
char *bench_tool(const char *prog, aks_runtime *rt, const aks_tool_context *ctx, const char *name,
                 const char *args);
/* Fills rt's warm pools (untimed, as a host's background refill does between calls), then
 * times a new session of `profile`'s first run_command true; the session is destroyed. */
int64_t bench_pooled_first(const char *prog, aks_runtime *rt, const aks_tool_context *ctx,
                           const char *profile);

#endif /* AKS_BENCH_UTIL_H */
