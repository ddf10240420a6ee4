/*
 * core/queue/worker_monitor.c - aks_worker_monitor: the state of a running worker for other
 * threads (health probes, the metrics endpoint of `aksandbox worker --metrics`).
 *
 * aks_worker_run attaches its worker and transport while they live; a read takes the monitor's
 * mutex for its whole length, so the worker is never freed, nor the transport closed, under a
 * read that is still asking the transport for its queues' depth. A read that counts the
 * queues costs one depth request per queue (a round trip to the service for nats and sqs):
 * an autoscaler's scrape, every few seconds; a probe's read asks nothing of the transport.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "queue/worker.h"
#include "util/sized.h"

#define LOG "worker"

struct aks_worker_monitor {
	pthread_mutex_t mu;
	aks_worker *worker;       /* NULL: none runs */
	aks_transport *transport; /* the worker's */
	unsigned input_consumers, output_consumers;
	bool depth_failing[2]; /* per queue: so that a failure is logged once, and its end */
};

AKS_EXPORT int aks_worker_monitor_new(aks_worker_monitor **out, aks_error **err)
{
	*out = calloc(1, sizeof(**out));
	if (!*out)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	pthread_mutex_init(&(*out)->mu, NULL);
	return AKS_OK;
}

AKS_EXPORT void aks_worker_monitor_free(aks_worker_monitor *m)
{
	if (!m)
		return;
	pthread_mutex_destroy(&m->mu);
	free(m);
}

void aks__worker_monitor_attach(aks_worker_monitor *m, aks_worker *w, aks_transport *t,
                                unsigned input_consumers, unsigned output_consumers)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->mu);
	m->worker = w;
	m->transport = t;
	m->input_consumers = input_consumers;
	m->output_consumers = output_consumers;
	m->depth_failing[0] = m->depth_failing[1] = false;
	pthread_mutex_unlock(&m->mu);
}

void aks__worker_monitor_detach(aks_worker_monitor *m)
{
	aks__worker_monitor_attach(m, NULL, NULL, 0, 0);
}

/* The transport's count for one queue, or -1; a failure is logged when it starts and when it
 * ends, not at every scrape. m->mu held. */
static int64_t depth_of(aks_worker_monitor *m, size_t qi)
{
	static const char *const queues[] = {AKS_QUEUE_INPUT, AKS_QUEUE_OUTPUT};
	uint64_t n = 0;
	aks_error *e = NULL;
	int rc = aks__transport_depth(m->transport, queues[qi], &n, &e);
	if (rc == AKS_ECAPABILITY)
		return -1;
	if (rc < 0) {
		if (!m->depth_failing[qi])
			aks__log(AKS_LOG_WARNING, LOG,
			         "cannot count the messages waiting on the %s queue (the metric is "
			         "left out until it can): %s",
			         queues[qi], e ? aks_error_message(e) : aks_strerror(rc));
		m->depth_failing[qi] = true;
		aks_error_free(e);
		return -1;
	}
	if (m->depth_failing[qi])
		aks__log(AKS_LOG_INFO, LOG, "the %s queue's messages can be counted again",
		         queues[qi]);
	m->depth_failing[qi] = false;
	return n > INT64_MAX ? INT64_MAX : (int64_t)n;
}

AKS_EXPORT int aks_worker_monitor_read_sized(aks_worker_monitor *m, aks_worker_status *out,
                                             size_t size, bool count_queues, aks_error **err)
{
	if (!m || !out)
		return aks__error_set(err, AKS_EINVAL,
		                      "aks_worker_monitor_read: no monitor or status");
	aks_worker_status s;
	memset(&s, 0, sizeof(s));
	s.struct_version = AKS_WORKER_STATUS_VERSION;
	s.struct_size = sizeof(s);
	s.input_depth = s.output_depth = -1;
	pthread_mutex_lock(&m->mu);
	if (m->worker) {
		aks_worker_stats st;
		aks__worker_get_stats(m->worker, &st);
		s.running = true;
		s.stopping = st.stopping;
		s.input_consumers = m->input_consumers;
		s.output_consumers = m->output_consumers;
		s.in_flight = st.in_flight;
		s.fetch_failing = st.fetch_failing;
		s.stalest_consumer_s = (double)st.stalest_loop_ms / 1000.0;
		s.requests = st.requests;
		s.request_failures = st.request_failures;
		s.nacks = st.nacks;
		s.dead_lettered = st.dead_lettered;
		s.completions_stored = st.stored;
		s.store_failures = st.store_failures;
		s.store_failing = st.store_failing;
		if (count_queues) {
			s.input_depth = depth_of(m, 0);
			s.output_depth = depth_of(m, 1);
		}
	}
	pthread_mutex_unlock(&m->mu);
	aks__sized_write(out, size, &s, sizeof(s));
	return AKS_OK;
}
