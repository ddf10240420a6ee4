/*
 * plugins/nats/nats_internal.h - the nats transport's shared state, between
 * transport.c (config, connection, send), provision.c (streams and durable
 * consumers), consumer.c (fetch and settlement) and bell.c (the doorbell).
 *
 * How a message maps onto NATS (partitions, header escaping) is nats_codec.h,
 * apart from this header because it needs no libnats: the transport's tests
 * compile codec.c to check the mapping without a server.
 */
#ifndef AKS_NATS_INTERNAL_H
#define AKS_NATS_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <nats/nats.h>

#include <aksandbox/plugin.h>
#include <aksandbox/provider.h>
#include <aksandbox/transport.h>

#define NT_NAME           "nats"
#define NT_MAX_PARTITIONS 1024

enum { NT_INPUT = 0, NT_OUTPUT = 1, NT_QUEUES = 2 };

struct nt_bell;

/* One queue: a stream and the durable consumer of each of its partitions. */
struct nt_queue {
	const char *name;     /* AKS_QUEUE_INPUT or AKS_QUEUE_OUTPUT */
	char *stream;         /* e.g. AGENT_REQUESTS */
	char *prefix;         /* e.g. chat.req: partition p is subject "chat.req.<p>" */
	bool consumers_ok;    /* every durable checked (or created); under lock */
	struct nt_bell *bell; /* the doorbell (bell.c); NULL when off for this queue */
};

struct aks_transport_impl {
	const aks_host_api *host;
	char *url;         /* as configured, any user:password@ shown as ***@: for messages */
	char *connect_url; /* as configured, until the connection is set up */
	unsigned partitions;
	double ack_wait, retry_backoff, duplicate_window, max_age, request_timeout;
	bool auto_provision;
	bool doorbell; /* ring and listen to the queues' bells (bell.c) */
	struct nt_queue q[NT_QUEUES];
	natsOptions *opts;
	natsConnection *nc;
	jsCtx *js;
	pthread_mutex_t lock;    /* consumers_ok */
	unsigned rr;             /* partitions for messages with neither group nor dedup id */
	struct nt_callbacks *cb; /* closure of the connection callbacks (transport.c) */
};

/* The last libnats error text for status s (thread-local in libnats). */
const char *nt_error_text(natsStatus s);
/* Milliseconds of request_timeout. */
int64_t nt_request_ms(const aks_transport_impl *t);
/* The queue index for a name, or -1. */
int nt_queue_index(const char *queue);

/* Durable consumer name of partition p: "<stream>_p<p>". */
void nt_durable_name(const struct nt_queue *q, unsigned p, char *buf, size_t size);

/* provision.c: the stream of every queue (at init) and the durables of one
 * queue (at the first consumer_open); creates them with auto_provision,
 * fails naming what is missing and how to create it otherwise. */
int nt_ensure_streams(aks_transport_impl *t, aks_error **err);
int nt_ensure_consumers(aks_transport_impl *t, struct nt_queue *q, aks_error **err);

/* bell.c: the doorbell, a core-NATS hint that wakes idle fetches early.
 * nt_bell_init (after the streams exist) sets up the queues whose bell
 * subject no stream captures; nt_bell_fini (before the connection closes)
 * ends them. nt_bell_ring follows a successful publish. nt_bell_join gives a
 * consumer an eventfd that becomes readable on each bell of its queue (-1:
 * none, the consumer just polls); nt_bell_leave closes it; nt_bell_clear
 * empties it before a scan, so a bell during the scan ends the next wait. */
void nt_bell_init(aks_transport_impl *t);
void nt_bell_fini(aks_transport_impl *t);
void nt_bell_ring(aks_transport_impl *t, struct nt_queue *q);
int nt_bell_join(aks_transport_impl *t, struct nt_queue *q);
void nt_bell_leave(struct nt_queue *q, int fd);
void nt_bell_clear(int fd);

/* consumer.c */
int nt_consumer_open(aks_transport_impl *t, const char *queue, aks_consumer **out, aks_error **err);
int nt_fetch(aks_consumer *c, aks_message **out, size_t max, size_t *n, int64_t wait_ms,
             const aks_call *call, aks_error **err);
int nt_ack(aks_consumer *c, aks_message *msg, aks_error **err);
int nt_nack(aks_consumer *c, aks_message *msg, double delay_s, aks_error **err);
int nt_dead_letter(aks_consumer *c, aks_message *msg, aks_error **err);
int nt_in_progress(aks_consumer *c, aks_message *msg, aks_error **err);
void nt_consumer_close(aks_consumer *c);

#endif /* AKS_NATS_INTERNAL_H */
