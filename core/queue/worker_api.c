/*
 * core/queue/worker_api.c - aks_worker_run and aks_worker_check: the queue worker as a process
 * runs it (`aksandbox worker`), over the engine and runtime of worker.h.
 */
#include "config.h"

#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "config/settings.h"
#include "queue/transport.h"
#include "queue/worker.h"
#include "session/owner.h"
#include "store/store.h"
#include "util/cancel.h"
#include "util/sized.h"

#define DEFAULT_STOP_GRACE 30.0

static void options_defaults(aks_worker_options *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->struct_version = AKS_WORKER_OPTIONS_VERSION;
	opts->struct_size = sizeof(*opts);
	opts->stop_grace = DEFAULT_STOP_GRACE;
}

AKS_EXPORT void aks_worker_options_init_sized(aks_worker_options *opts, size_t size)
{
	aks_worker_options full;
	options_defaults(&full);
	aks__sized_write(opts, size, &full, sizeof(full));
}

/* The reference's startup fail-fasts (§5.6), and one of ours: in_memory queues live inside
 * one process, so a worker process would serve nobody. */
static int check_settings(aks_settings *s, aks_error **err)
{
	if (!s)
		return aks__error_set(err, AKS_EINVAL, "aks_worker_run: no settings");
	if (!s->enabled)
		return aks__error_set(err, AKS_ECONFIG,
		                      "the queue worker requires sandbox.enabled: true");
	if (strcmp(s->broker.flavor, "queue") != 0)
		return aks__error_set(
		    err, AKS_ECONFIG,
		    "the queue worker requires sandbox.broker.flavor 'queue' (got "
		    "'%s')",
		    s->broker.flavor);
	if (s->queue_desc == &aks__memory_transport_descriptor)
		return aks__error_set(
		    err, AKS_ECONFIG,
		    "sandbox.broker.queue.type 'in_memory' reaches no other process, so a worker "
		    "process would serve nobody (an agent with the in_memory pair runs its own "
		    "worker threads); configure a broker transport such as nats with a shared "
		    "response store such as redis");
	if (!s->queue_desc || !s->response_desc)
		return aks__error_set(err, AKS_ECONFIG,
		                      "the queue worker has no transport or response store");
	return AKS_OK;
}

typedef struct worker_process {
	aks_transport *transport;
	aks_state_store *responses;
	aks_worker_engine *engine;
} worker_process;

static void close_all(worker_process *wp)
{
	aks__worker_engine_free(wp->engine);
	aks__store_close(wp->responses);
	aks__transport_close(wp->transport);
}

static int open_all(aks_settings *s, worker_process *wp, aks_error **err)
{
	memset(wp, 0, sizeof(*wp));
	int rc = check_settings(s, err);
	if (rc == AKS_OK)
		rc = aks__transport_open(s->queue_desc, s->queue_block, &wp->transport, err);
	if (rc == AKS_OK)
		rc = aks__store_open_desc(s->response_desc, s->response_block, &wp->responses, err);
	if (rc == AKS_OK)
		rc = aks__worker_engine_new(s, wp->responses, &wp->engine, err);
	if (rc < 0)
		close_all(wp);
	return rc;
}

/* Both queues can be consumed and the store read: what a supervisor's health check asks. */
static int probe(worker_process *wp, aks_error **err)
{
	static const char *const queues[] = {AKS_QUEUE_INPUT, AKS_QUEUE_OUTPUT};
	for (size_t i = 0; i < 2; i++) {
		aks_queue_consumer *c = NULL;
		int rc = aks__consumer_open(wp->transport, queues[i], &c, err);
		if (rc < 0)
			return rc;
		aks__consumer_close(c);
	}
	struct json_object *rec = NULL;
	int rc = aks__store_get(wp->responses, AKS_QUEUE_NS, "health:probe", &rec, err);
	json_object_put(rec);
	return rc == AKS_ENOTFOUND ? AKS_OK : rc;
}

AKS_EXPORT int aks_worker_check(aks_settings *settings, aks_error **err)
{
	worker_process wp;
	int rc = open_all(settings, &wp, err);
	if (rc == AKS_OK)
		rc = probe(&wp, err);
	close_all(&wp);
	return rc;
}

static int engine_process(void *ctx, const aks_wire_request *req, aks_cancel *cancel,
                          aks_wire_completion **out)
{
	return aks__worker_engine_process(ctx, req, cancel, out);
}

/* The idle sweep, then the garbage collector over the inventory (docs/gc.md): what a worker
 * killed between create and record left behind. The collector's failures are logged only. */
static int engine_sweep(void *ctx, size_t *destroyed, aks_error **err)
{
	int rc = aks__worker_engine_sweep(ctx, destroyed, err);
	json_object *report = NULL;
	aks_error *e = NULL;
	int grc = aks__worker_engine_gc(ctx, false, &report, &e);
	aks__owner_gc_log("worker", grc, report, e);
	json_object_put(report);
	aks_error_free(e);
	return rc;
}

static unsigned engine_store_waits(void *ctx)
{
	return aks__worker_engine_store_waits(ctx);
}

/* Turns `stop` into aks__worker_stop, until the worker ends by itself (`done`). */
typedef struct stop_watch {
	aks_worker *worker;
	aks_cancel *stop;
	double grace;
	int done[2]; /* a pipe: written when the worker has ended */
} stop_watch;

static void *watch_stop(void *arg)
{
	stop_watch *sw = arg;
	aks_call call;
	aks_call_init(&call, 0, NULL, NULL, sw->stop);
	struct pollfd p[2] = {{.fd = sw->done[0], .events = POLLIN},
	                      {.fd = sw->stop ? aks__call_cancel_fd(&call) : -1, .events = POLLIN}};
	for (;;) {
		if (poll(p, 2, -1) < 0)
			continue; /* EINTR */
		if (p[0].revents)
			return NULL;
		if (p[1].revents || aks_cancel_is_triggered(sw->stop)) {
			aks__log(AKS_LOG_INFO, "worker", "stopping: finishing in-flight work");
			aks__worker_stop(sw->worker, sw->grace);
			return NULL;
		}
	}
}

int aks__worker_options_read(aks_worker_options *out, const aks_worker_options *opts,
                             aks_error **err)
{
	options_defaults(out);
	if (opts) {
		int rc = aks__sized_read(out, sizeof(*out), opts, "aks_worker_options", err);
		if (rc < 0)
			return rc;
	}
	if (out->stop_grace <= 0)
		out->stop_grace = DEFAULT_STOP_GRACE;
	return AKS_OK;
}

AKS_EXPORT int aks_worker_run(aks_settings *settings, const aks_worker_options *opts,
                              aks_cancel *stop, aks_error **err)
{
	aks_worker_options o;
	int rc = aks__worker_options_read(&o, opts, err);
	if (rc < 0)
		return rc;
	worker_process wp;
	rc = open_all(settings, &wp, err);
	if (rc < 0)
		return rc;
	const aks_broker_settings *b = &settings->broker;
	aks_worker_config wc = {
	    .transport = wp.transport,
	    .responses = wp.responses,
	    .process = engine_process,
	    .sweep = engine_sweep,
	    .store_waits = engine_store_waits,
	    .ctx = wp.engine,
	    .input_consumers = b->input_consumers,
	    .output_consumers = b->output_consumers,
	    .input_max_receive = b->input_max_receive,
	    .output_max_receive = b->output_max_receive,
	    .batch_size = b->batch_size,
	    .inline_payload_max_bytes = b->inline_payload_max_bytes,
	    .response_ttl = b->response_ttl,
	    .sweep_interval = b->sweep_interval,
	    .once = o.once,
	};
	stop_watch sw = {.stop = stop, .grace = o.stop_grace, .done = {-1, -1}};
	if (pipe(sw.done) < 0) {
		close_all(&wp);
		return aks__error_set(err, AKS_EIO, "cannot create a pipe for the worker");
	}
	rc = aks__worker_start(&wc, &sw.worker, err);
	pthread_t watcher;
	bool watching = false;
	if (rc == AKS_OK) {
		aks__log(
		    AKS_LOG_INFO, "worker",
		    "queue worker started: transport '%s', response store '%s', %u+%u consumers",
		    aks__transport_name(wp.transport), aks__store_name(wp.responses),
		    b->input_consumers, b->output_consumers);
		aks__worker_monitor_attach(o.monitor, sw.worker, wp.transport, b->input_consumers,
		                           b->output_consumers);
		watching = pthread_create(&watcher, NULL, watch_stop, &sw) == 0;
		if (!watching) /* no way to hear `stop`: do not run deaf */
			aks__worker_stop(sw.worker, o.stop_grace);
		rc = aks__worker_wait(sw.worker, err);
		aks__worker_monitor_detach(o.monitor);
		if (rc == AKS_OK && !watching)
			rc = aks__error_set(err, AKS_ENOMEM,
			                    "cannot start the worker's stop watcher");
	}
	if (watching) {
		char one = 1;
		if (write(sw.done[1], &one, 1) < 0) {
			/* the watcher then only ends with `stop`; nothing better to do */
		}
		pthread_join(watcher, NULL);
	}
	aks__worker_free(sw.worker);
	close(sw.done[0]);
	close(sw.done[1]);
	close_all(&wp);
	return rc;
}
