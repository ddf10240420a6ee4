/*
 * aksandbox/transport.h - the queue transport contract: how the queue broker
 * moves requests to a fleet of workers and completions back.
 *
 * A transport plugin's descriptor has kind AKS_PLUGIN_TRANSPORT and its `ops`
 * points at a static const aks_transport_ops. A transport serves two queues,
 * AKS_QUEUE_INPUT (requests, from agents to workers) and AKS_QUEUE_OUTPUT
 * (completion records, from workers to whoever stores them).
 *
 * Guarantees a transport must give (reference §5.6, "Transport contract"):
 *  - at-least-once delivery: a fetched message that is not acked within the
 *    transport's ack wait (or that is nacked) is delivered again, with
 *    receive_count one higher;
 *  - per-group FIFO with AT MOST ONE MESSAGE IN FLIGHT PER GROUP across every
 *    consumer of the queue, in every process: the next message of a group is
 *    not delivered until the previous one is acked or dead-lettered. This is
 *    what serialises one sandbox session across the worker fleet;
 *  - de-duplication by dedup_id within the transport's window: a second send
 *    with the same dedup_id is accepted and dropped;
 *  - a message without a group has no order and no limit.
 *
 * The host settles a message before the transport's ack wait passes (or says
 * it is still working on it with in_progress); past it the message may be
 * redelivered and in flight elsewhere, and a late settle may settle that copy.
 *
 * Settings from the queue block. A transport's config is its own block
 * (`sandbox.broker.queue.<name>`); a few settings live elsewhere, and the host
 * gives them to a transport whose config schema declares the key (with that
 * type), refusing a block that sets one itself:
 *  - `input_url`, `output_url` (string): the queue block's `input.url` and
 *    `output.url` (the original's sqs settings); unset there, the key keeps its
 *    schema default;
 *  - `longest_timeout` (number): the longest `policy.timeout` of the config's
 *    profiles in seconds, 0 when a profile has none: what the transport's ack
 *    wait must outlast (the worker also calls in_progress every second while
 *    a request runs);
 *  - `max_message_bytes` (integer, the transport's own key): the largest
 *    message it carries; the host checks at load that
 *    `sandbox.broker.inline_payload_max_bytes` leaves 1 KiB of it for
 *    attributes, and refuses the config otherwise.
 *
 * Threading: send may be called from any thread. A consumer belongs to the
 * thread that opened it: fetch, ack, nack, dead_letter and consumer_close are
 * called from that thread only. Consumers of one transport run in parallel.
 *
 * Ownership: see plugin.h. A message passed to send is borrowed for the call.
 * Messages returned by fetch belong to the plugin and stay valid until the
 * host settles each one exactly once (ack, nack or dead_letter) or closes the
 * consumer; the plugin frees them then.
 */
#ifndef AKSANDBOX_TRANSPORT_H
#define AKSANDBOX_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <aksandbox/common.h>
#include <aksandbox/plugin.h>
#include <aksandbox/provider.h> /* aks_call: deadline and cancellation */

#ifdef __cplusplus
extern "C" {
#endif

/* The two queues. */
#define AKS_QUEUE_INPUT  "input"
#define AKS_QUEUE_OUTPUT "output"

#define AKS_MESSAGE_VERSION 1

/* One message. Strings are NUL-terminated; the body is bytes (the host sends
 * UTF-8 JSON). */
typedef struct aks_message {
	uint32_t struct_version; /* AKS_MESSAGE_VERSION */
	uint32_t struct_size;    /* sizeof(aks_message) */
	const char *body;
	size_t body_len;
	const char *const *attributes; /* NULL-terminated key, value pairs; never NULL */
	const char *group_id;          /* NULL: no group */
	const char *dedup_id;          /* NULL: no de-duplication */
	uint32_t receive_count;        /* fetched: deliveries so far, 1 the first time */
	const char *message_id;        /* fetched: the transport's id; NULL on send */
} aks_message;

#define AKS_MESSAGE_INIT .struct_version = AKS_MESSAGE_VERSION, .struct_size = sizeof(aks_message)

/* Completed privately by each transport plugin. */
typedef struct aks_transport_impl aks_transport_impl;
typedef struct aks_consumer aks_consumer;

#define AKS_TRANSPORT_OPS_VERSION 1

typedef struct aks_transport_ops {
	uint32_t struct_version; /* AKS_TRANSPORT_OPS_VERSION */
	uint32_t struct_size;    /* sizeof(aks_transport_ops) */

	/* Mandatory. Builds the transport from its validated config block. */
	int (*init)(const aks_host_api *host, const aks_config *config, aks_transport_impl **out,
	            aks_error **err);
	/* Optional. Called once, after every consumer was closed. */
	void (*fini)(aks_transport_impl *t);

	/* Mandatory. Queues one message on `queue` (AKS_QUEUE_INPUT or
	 * AKS_QUEUE_OUTPUT) durably: once it returns AKS_OK the message survives
	 * the sender's death. Honours call's deadline and cancellation. */
	int (*send)(aks_transport_impl *t, const char *queue, const aks_message *msg,
	            const aks_call *call, aks_error **err);

	/* Mandatory. A consumer of `queue` for the calling thread. */
	int (*consumer_open)(aks_transport_impl *t, const char *queue, aks_consumer **out,
	                     aks_error **err);
	/* Mandatory. Waits up to wait_ms (0: do not wait) for messages and
	 * returns at most `max` (>= 1) of them in out[0..*n-1]; *n = 0 when none
	 * came. Returns early, with what it has, when call is cancelled. */
	int (*fetch)(aks_consumer *c, aks_message **out, size_t max, size_t *n, int64_t wait_ms,
	             const aks_call *call, aks_error **err);
	/* Mandatory. Settles a fetched message: done with it. */
	int (*ack)(aks_consumer *c, aks_message *msg, aks_error **err);
	/* Mandatory. Settles it for redelivery after about delay_s seconds. */
	int (*nack)(aks_consumer *c, aks_message *msg, double delay_s, aks_error **err);
	/* Optional (NULL: ack). Settles a message that failed for good: moved to
	 * a dead-letter place if the transport has one, and never redelivered. */
	int (*dead_letter)(aks_consumer *c, aks_message *msg, aks_error **err);
	/* Mandatory. Closes the consumer; unsettled messages will be redelivered. */
	void (*consumer_close)(aks_consumer *c);

	/* Optional (NULL: not supported). Still working on a fetched message:
	 * restarts its ack wait, so a long execution is not redelivered. */
	int (*in_progress)(aks_consumer *c, aks_message *msg, aks_error **err);

#if AKS_TARGET_ABI_MINOR >= 5
	/* Appended in ABI 1.5. Optional (NULL: not supported). How many messages wait on
	 * `queue` (AKS_QUEUE_INPUT or AKS_QUEUE_OUTPUT): sent and not yet fetched, or handed
	 * back, and not held by a consumer now. The service's own count where it keeps one
	 * (NATS's pending, SQS's approximate number of visible messages); a message handed back
	 * with a delay may count either way. For an operator's autoscaler (`aksandbox worker
	 * --metrics`), never for a decision of the host's. Called from any thread. */
	int (*depth)(aks_transport_impl *t, const char *queue, uint64_t *waiting, aks_error **err);
#endif
} aks_transport_ops;

#define AKS_TRANSPORT_OPS_INIT                                                                     \
	.struct_version = AKS_TRANSPORT_OPS_VERSION, .struct_size = sizeof(aks_transport_ops)

#ifdef __cplusplus
}
#endif

#endif /* AKSANDBOX_TRANSPORT_H */
