/*
 * core/cli/worker_probe.c - the verdicts of `aksandbox worker --metrics`'s /healthz and
 * /readyz, from the worker's status alone: a probe asks neither the transport nor the store
 * anything (docs/queue.md, "Metrics and probes").
 */
#include "config.h"

#include <stdio.h>

#include "worker_probe.h"

bool cli_worker_live(const aks_worker_status *s, double stuck_after_s, char *why, size_t size)
{
	if (s->running && s->stalest_consumer_s > stuck_after_s) {
		snprintf(why, size, "stuck: a consumer has not been seen working for %.0f s",
		         s->stalest_consumer_s);
		return false;
	}
	snprintf(why, size, "ok");
	return true;
}

bool cli_worker_ready(const aks_worker_status *s, char *why, size_t size)
{
	if (!s->running)
		snprintf(why, size, "not running: starting, or ended");
	else if (s->stopping)
		snprintf(why, size, "stopping: in-flight operations are finishing");
	else if (s->fetch_failing)
		snprintf(why, size,
		         "%u of %u consumers cannot fetch: the transport does not answer",
		         s->fetch_failing, s->input_consumers + s->output_consumers);
	else if (s->store_failing)
		snprintf(why, size,
		         "the response store does not answer: completions and operations wait for "
		         "it (retrying)");
	else {
		snprintf(why, size, "ready");
		return true;
	}
	return false;
}
