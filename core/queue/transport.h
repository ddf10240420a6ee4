/*
 * core/queue/transport.h - a queue transport as the core uses it: a transport plugin
 * (<aksandbox/transport.h>) or the built-in in_memory one, behind one handle that checks the
 * plugin's answers, names the transport in every error and falls back where a slot is
 * optional (dead_letter without one acks; in_progress without one is AKS_ENOTSUP).
 *
 * Threading is the plugin contract's: send from any thread; a consumer belongs to the thread
 * that opened it. Internal API (aks__ names).
 */
#ifndef AKS_CORE_QUEUE_TRANSPORT_H
#define AKS_CORE_QUEUE_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include <aksandbox/transport.h>

#include "internal.h"

typedef struct aks_transport aks_transport;
typedef struct aks_queue_consumer aks_queue_consumer;

/* The built-in in_memory transport ("in_memory"; its config keys: ack_wait, dedup_window,
 * seconds): both queues live in this process, for the single-process test topology. */
extern const aks_plugin_descriptor aks__memory_transport_descriptor;

/* Opens the transport a descriptor names (a loaded plugin's or the built-in's) with its
 * validated config block (borrowed: it must outlive the transport). */
int aks__transport_open(const aks_plugin_descriptor *d, const aks_config *config,
                        aks_transport **out, aks_error **err);
/* Closes it; every consumer must have been closed first. NULL is a no-op. */
void aks__transport_close(aks_transport *t);
/* "in_memory", or the plugin's name. */
const char *aks__transport_name(const aks_transport *t);

/* Sends one message (borrowed for the call) to AKS_QUEUE_INPUT or AKS_QUEUE_OUTPUT. */
int aks__transport_send(aks_transport *t, const char *queue, const aks_message *msg,
                        const aks_call *call, aks_error **err);

int aks__consumer_open(aks_transport *t, const char *queue, aks_queue_consumer **out,
                       aks_error **err);
/* Up to `max` messages in out[0..*n-1], waiting up to wait_ms; each is settled exactly once
 * with ack, nack or dead_letter (or left to consumer_close, which hands it back). */
int aks__consumer_fetch(aks_queue_consumer *c, aks_message **out, size_t max, size_t *n,
                        int64_t wait_ms, const aks_call *call, aks_error **err);
int aks__consumer_ack(aks_queue_consumer *c, aks_message *msg, aks_error **err);
int aks__consumer_nack(aks_queue_consumer *c, aks_message *msg, double delay_s, aks_error **err);
/* The transport's dead_letter, or an ack when it has none. */
int aks__consumer_dead_letter(aks_queue_consumer *c, aks_message *msg, aks_error **err);
/* Restarts the message's ack wait; AKS_ECAPABILITY (no error set) when the transport cannot. */
int aks__consumer_in_progress(aks_queue_consumer *c, aks_message *msg, aks_error **err);
/* NULL is a no-op. */
void aks__consumer_close(aks_queue_consumer *c);

/* How many messages wait on `queue` (<aksandbox/transport.h>: depth); AKS_ECAPABILITY (no
 * error set) when the transport cannot say. */
int aks__transport_depth(aks_transport *t, const char *queue, uint64_t *waiting, aks_error **err);

/* The value of attribute `key` of a message, or NULL. */
const char *aks__message_attribute(const aks_message *msg, const char *key);

#endif /* AKS_CORE_QUEUE_TRANSPORT_H */
