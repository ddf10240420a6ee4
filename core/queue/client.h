/*
 * core/queue/client.h - the queue broker's client side (reference §5.5): requests sent to
 * `aksandbox worker` processes through the configured transport, completions read back from
 * the shared response store. With the in_memory pair (the single-process topology) the
 * client also runs the worker itself, on threads of this process.
 * Internal API (aks__ names).
 */
#ifndef AKS_CORE_QUEUE_CLIENT_H
#define AKS_CORE_QUEUE_CLIENT_H

#include "internal.h"
#include "queue/wire.h"

typedef struct aks_queue_client aks_queue_client;

/* Opens the transport and the response store the settings name (borrowed settings). */
int aks__queue_client_new(aks_settings *settings, aks_queue_client **out, aks_error **err);
/* Stops an in-process worker (letting in-flight work finish briefly), closes everything. */
void aks__queue_client_free(aks_queue_client *qc);

/*
 * Submits a request (§5.5): the worker_timeout_ceiling and inline_payload_max_bytes guards
 * (nothing is sent when either refuses), the send to the input queue with `group` (NULL: none)
 * and the task id as dedup id, then a poll of the response store every wait_poll_interval for
 * up to `wait` seconds (0: none; the caller's cancel ends it early). Returns AKS_OK with the
 * completion in *out (the caller's), 1 when it is still pending, or an error.
 */
int aks__queue_client_submit(aks_queue_client *qc, const aks_wire_request *req, const char *group,
                             double wait, aks_cancel *cancel, aks_wire_completion **out,
                             aks_error **err);

/* The completion of a task, from the response store: AKS_OK with *out, or AKS_ENOTFOUND (no
 * error set) while there is none. Only a record sent for `conversation` is returned: another
 * conversation's task is not found. */
int aks__queue_client_result(aks_queue_client *qc, const char *task_id, const char *conversation,
                             aks_wire_completion **out, aks_error **err);

/* A completion's outcome as the agent sees it: AKS_OK for succeeded, else the error its
 * status and error_type name (timed_out: AKS_ETIMEOUT; failed: the typed error, or
 * AKS_EBROKER for a type this side does not know), with the reference's default texts. */
int aks__queue_completion_outcome(const aks_wire_completion *c, aks_error **err);

#endif /* AKS_CORE_QUEUE_CLIENT_H */
