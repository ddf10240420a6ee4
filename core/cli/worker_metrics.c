/*
 * core/cli/worker_metrics.c - `aksandbox worker --metrics [HOST:]PORT`: the worker's state over
 * HTTP for a cluster's probes and an operator's autoscaler (docs/queue.md, "Metrics and
 * probes"):
 *
 *   GET /metrics  Prometheus text format 0.0.4: queue depth (as the transport counts it),
 *                 operations in flight, consumers, and the worker's counters;
 *   GET /healthz  liveness: 200 unless a consumer has not been seen working for
 *                 CLI_WORKER_STUCK_AFTER_S (worker_probe.h)
 *                 (it is stuck; a restart hands its messages to another worker);
 *   GET /readyz   readiness: 200 while the consumers are open, every last fetch succeeded,
 *                 the response store answers and no stop is draining the worker; 503 with
 *                 the reason otherwise.
 *
 * Everything it serves is read through the public aks_worker_monitor. It answers GET and HEAD
 * only, reads no request body and changes nothing, so, unlike `aksandbox mcp --listen`, it may
 * listen on any address: what it tells is counts. One thread (libmicrohttpd's internal
 * polling thread) serves a few connections at a time; a scrape asks the transport for each
 * queue's depth, a round trip to the service; a probe asks the transport and the store
 * nothing (its answer is the worker's own state: a transport outage shows as failing
 * fetches, a store outage as failing stores and operations waiting for their session's lock).
 */
#include "config.h"

#include <inttypes.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aks_buf.h"
#include "http_module.h"
#include "mcp/http_listen.h"
#include "worker_probe.h"

#define MAX_CONNECTIONS    16
#define CONNECTION_TIMEOUT 10 /* seconds */

struct cli_metrics {
	struct MHD_Daemon *mhd;
	aks_worker_monitor *monitor; /* borrowed */
};

/* One metric's HELP and TYPE lines. */
static void head(aks_buf *f, const char *name, const char *type, const char *help)
{
	aks__buf_printf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void render_metrics(aks_buf *f, const aks_worker_status *s)
{
	head(f, "aksandbox_worker_up", "gauge", "1 while the worker's consumers are open.");
	aks__buf_printf(f, "aksandbox_worker_up %d\n", s->running);
	head(f, "aksandbox_worker_stopping", "gauge",
	     "1 while a stop lets in-flight operations finish.");
	aks__buf_printf(f, "aksandbox_worker_stopping %d\n", s->stopping);
	head(f, "aksandbox_worker_consumers", "gauge", "Consumer threads per queue.");
	aks__buf_printf(f, "aksandbox_worker_consumers{queue=\"input\"} %u\n", s->input_consumers);
	aks__buf_printf(f, "aksandbox_worker_consumers{queue=\"output\"} %u\n",
	                s->output_consumers);
	head(f, "aksandbox_worker_in_flight", "gauge", "Operations this worker runs now.");
	aks__buf_printf(f, "aksandbox_worker_in_flight %u\n", s->in_flight);
	/* Left out, not reported as 0, when the transport cannot count: a scaler must not read
	 * an unknown backlog as an empty one. */
	head(f, "aksandbox_queue_depth", "gauge",
	     "Messages waiting on the queue, as the transport counts them (the same for every "
	     "worker of a fleet).");
	if (s->input_depth >= 0)
		aks__buf_printf(f, "aksandbox_queue_depth{queue=\"input\"} %" PRId64 "\n",
		                s->input_depth);
	if (s->output_depth >= 0)
		aks__buf_printf(f, "aksandbox_queue_depth{queue=\"output\"} %" PRId64 "\n",
		                s->output_depth);
	head(f, "aksandbox_worker_fetch_failing", "gauge",
	     "Consumers whose last fetch failed (the transport does not answer).");
	aks__buf_printf(f, "aksandbox_worker_fetch_failing %u\n", s->fetch_failing);
	head(f, "aksandbox_worker_store_failing", "gauge",
	     "1 while the response store does not answer (completions or operations wait for it).");
	aks__buf_printf(f, "aksandbox_worker_store_failing %d\n", s->store_failing);
	static const struct {
		const char *name, *help;
		size_t offset;
	} counters[] = {
	    {"aksandbox_worker_operations_total", "Operations run and their completions sent.",
	     offsetof(aks_worker_status, requests)},
	    {"aksandbox_worker_permanent_failures_total",
	     "Requests past max_receive_count, answered with a permanent failure.",
	     offsetof(aks_worker_status, request_failures)},
	    {"aksandbox_worker_redeliveries_total", "Messages handed back for redelivery.",
	     offsetof(aks_worker_status, nacks)},
	    {"aksandbox_worker_dead_lettered_total", "Messages dead-lettered.",
	     offsetof(aks_worker_status, dead_lettered)},
	    {"aksandbox_worker_completions_stored_total",
	     "Completion records stored in the response store.",
	     offsetof(aks_worker_status, completions_stored)},
	    {"aksandbox_worker_store_failures_total",
	     "Completion records the response store failed to store (each retried).",
	     offsetof(aks_worker_status, store_failures)},
	};
	for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
		uint64_t v;
		memcpy(&v, (const char *)s + counters[i].offset, sizeof(v));
		head(f, counters[i].name, "counter", counters[i].help);
		aks__buf_printf(f, "%s %" PRIu64 "\n", counters[i].name, v);
	}
}

/* A probe's verdict: 200 or 503, with the reason as the body. */
static unsigned probe(aks_buf *f, bool healthy, const char *why)
{
	aks__buf_printf(f, "%s\n", why);
	return healthy ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
                             char *body, size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
	(void)version;
	(void)upload_data;
	cli_metrics *m = cls;
	static int seen;
	if (!*con_cls) { /* the headers: answer once the request is complete */
		*con_cls = &seen;
		return MHD_YES;
	}
	if (*upload_data_size) { /* a body nobody asked for: dropped */
		*upload_data_size = 0;
		return MHD_YES;
	}
	aks_buf out = AKS_BUF_INIT, *f = &out;
	const char *type = "text/plain; charset=utf-8";
	unsigned status = MHD_HTTP_OK;
	aks_worker_status s;
	aks_error *e = NULL;
	char why[160];
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
		aks__buf_puts(f, "only GET and HEAD\n");
		status = MHD_HTTP_METHOD_NOT_ALLOWED;
	} else if (strcmp(url, "/metrics") != 0 && strcmp(url, "/healthz") != 0 &&
	           strcmp(url, "/readyz") != 0) {
		aks__buf_puts(f, "not found: /metrics, /healthz and /readyz are served\n");
		status = MHD_HTTP_NOT_FOUND;
	} else if (aks_worker_monitor_read(m->monitor, &s, strcmp(url, "/metrics") == 0, &e) < 0) {
		aks__buf_printf(f, "cannot read the worker's state: %s\n", aks_error_message(e));
		status = MHD_HTTP_INTERNAL_SERVER_ERROR;
		aks_error_free(e);
	} else if (strcmp(url, "/metrics") == 0) {
		render_metrics(f, &s);
		type = "text/plain; version=0.0.4; charset=utf-8";
	} else if (strcmp(url, "/healthz") == 0) {
		status =
		    probe(f, cli_worker_live(&s, CLI_WORKER_STUCK_AFTER_S, why, sizeof(why)), why);
	} else {
		status = probe(f, cli_worker_ready(&s, why, sizeof(why)), why);
	}
	size_t len = out.len;
	char *body = aks__buf_steal(&out);
	if (!body)
		return MHD_NO;
	return reply(c, status, type, body, len);
}

int cli_http_metrics_start(const char *spec, aks_worker_monitor *monitor, cli_metrics **out)
{
	*out = NULL;
	char err[512], bound[128];
	bool loopback;
	int fd =
	    aks__http_listen_tcp(spec, NULL, &loopback, bound, sizeof(bound), err, sizeof(err));
	if (fd < 0) {
		fprintf(stderr, "aksandbox: worker: --metrics: %s\n", err);
		return -1;
	}
	cli_metrics *m = calloc(1, sizeof(*m));
	if (!m) {
		close(fd);
		fprintf(stderr, "aksandbox: worker: --metrics: out of memory\n");
		return -1;
	}
	m->monitor = monitor;
	m->mhd = MHD_start_daemon(
	    MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG, 0, NULL, NULL,
	    on_request, m, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
	    (unsigned)MAX_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONNECTION_TIMEOUT,
	    MHD_OPTION_END);
	if (!m->mhd) {
		close(fd);
		free(m);
		fprintf(stderr,
		        "aksandbox: worker: --metrics: cannot start the HTTP server on %s\n",
		        bound);
		return -1;
	}
	/* Always said, as `aksandbox mcp --listen` says where it listens: with port 0 it is how
	 * the caller learns the port. */
	fprintf(stderr,
	        "aksandbox: worker: metrics on http://%s/metrics (probes: /healthz, /readyz)\n",
	        bound);
	*out = m;
	return 0;
}

void cli_http_metrics_stop(cli_metrics *m)
{
	if (!m)
		return;
	MHD_stop_daemon(m->mhd); /* closes the listening socket too */
	free(m);
}
