/*
 * core/cli/worker_probe.h - the verdicts of `aksandbox worker --metrics`'s probes on a
 * worker's status (worker_metrics.c serves them; test_worker checks them on a real worker).
 */
#ifndef AKS_CORE_CLI_WORKER_PROBE_H
#define AKS_CORE_CLI_WORKER_PROBE_H

#include <stdbool.h>
#include <stddef.h>

#include <aksandbox/aksandbox.h>

/* A consumer fetches at least every second or two and a running operation's supervision
 * wakes every second: five minutes unseen is stuck, not busy. */
#define CLI_WORKER_STUCK_AFTER_S 300.0

/* /healthz: true unless a consumer of a running worker has not been seen working for more
 * than stuck_after_s. /readyz: true while the consumers are open, every last fetch
 * succeeded, the response store answers and no stop drains the worker. Either way `why`
 * gets the one-line answer ("ok", "ready", or the reason), cut to `size`. */
bool cli_worker_live(const aks_worker_status *s, double stuck_after_s, char *why, size_t size);
bool cli_worker_ready(const aks_worker_status *s, char *why, size_t size);

#endif /* AKS_CORE_CLI_WORKER_PROBE_H */
