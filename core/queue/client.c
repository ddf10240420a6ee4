/*
 * core/queue/client.c - the queue broker's client: submit, poll, unwrap (reference §5.5).
 */
#include "config.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "config/settings.h"
#include "queue/client.h"
#include "queue/transport.h"
#include "queue/worker.h"
#include "store/store.h"
#include "tools/json.h"
#include "util/cancel.h"

/* The first pause between reads of the response store while a call waits (ms). */
#define FIRST_POLL_MS 2
/* How long closing lets the in-process worker finish what it runs (seconds). */
#define EMBEDDED_STOP_GRACE 5.0

struct aks_queue_client {
	aks_settings *settings;
	aks_transport *transport;
	aks_state_store *responses;
	/* in_memory only: the worker serving this process */
	aks_worker_engine *engine;
	aks_worker *worker;
};

static int engine_process(void *ctx, const aks_wire_request *req, aks_cancel *cancel,
                          aks_wire_completion **out)
{
	return aks__worker_engine_process(ctx, req, cancel, out);
}

static int engine_sweep(void *ctx, size_t *destroyed, aks_error **err)
{
	return aks__worker_engine_sweep(ctx, destroyed, err);
}

/* The single-process topology: the in_memory queues reach no other process, so this one
 * serves them itself. */
static int start_embedded_worker(aks_queue_client *qc, aks_error **err)
{
	const aks_broker_settings *b = &qc->settings->broker;
	int rc = aks__worker_engine_new(qc->settings, qc->responses, &qc->engine, err);
	if (rc < 0)
		return rc;
	aks_worker_config wc = {
	    .transport = qc->transport,
	    .responses = qc->responses,
	    .process = engine_process,
	    .sweep = engine_sweep,
	    .ctx = qc->engine,
	    .input_consumers = b->input_consumers,
	    .output_consumers = b->output_consumers,
	    .input_max_receive = b->input_max_receive,
	    .output_max_receive = b->output_max_receive,
	    .batch_size = b->batch_size,
	    .inline_payload_max_bytes = b->inline_payload_max_bytes,
	    .response_ttl = b->response_ttl,
	    .sweep_interval = b->sweep_interval,
	};
	return aks__worker_start(&wc, &qc->worker, err);
}

int aks__queue_client_new(aks_settings *settings, aks_queue_client **out, aks_error **err)
{
	*out = NULL;
	if (!settings->queue_desc || !settings->response_desc)
		return aks__error_set(
		    err, AKS_ECONFIG,
		    "sandbox.broker.flavor 'queue' has no transport or response store "
		    "(is the sandbox enabled?)");
	aks_queue_client *qc = calloc(1, sizeof(*qc));
	if (!qc)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	qc->settings = settings;
	int rc =
	    aks__transport_open(settings->queue_desc, settings->queue_block, &qc->transport, err);
	if (rc == AKS_OK)
		rc = aks__store_open_desc(settings->response_desc, settings->response_block,
		                          &qc->responses, err);
	if (rc == AKS_OK && settings->queue_desc == &aks__memory_transport_descriptor)
		rc = start_embedded_worker(qc, err);
	if (rc < 0) {
		aks__queue_client_free(qc);
		return rc;
	}
	*out = qc;
	return AKS_OK;
}

void aks__queue_client_free(aks_queue_client *qc)
{
	if (!qc)
		return;
	if (qc->worker) {
		aks__worker_stop(qc->worker, EMBEDDED_STOP_GRACE);
		aks_error *e = NULL;
		if (aks__worker_wait(qc->worker, &e) < 0)
			aks__log(AKS_LOG_WARNING, "sandbox", "in-process queue worker: %s",
			         aks_error_message(e));
		aks_error_free(e);
		aks__worker_free(qc->worker);
	}
	aks__worker_engine_free(qc->engine);
	aks__store_close(qc->responses);
	aks__transport_close(qc->transport);
	free(qc);
}

/* ---- submit ---- */

/* Sleeps up to ms, or until the caller cancels: true when cancelled. */
static bool nap(aks_cancel *cancel, int64_t ms)
{
	aks_call call;
	aks_call_init(&call, 0, NULL, NULL, cancel);
	int fd = cancel ? aks__call_cancel_fd(&call) : -1;
	struct pollfd p = {.fd = fd, .events = POLLIN};
	poll(fd >= 0 ? &p : NULL, fd >= 0 ? 1 : 0, (int)(ms > 0 ? ms : 0));
	return cancel && aks_cancel_is_triggered(cancel);
}

/* One read of the response store. AKS_OK with *out, AKS_ENOTFOUND, or an error. */
static int read_completion(aks_queue_client *qc, const char *task_id, const char *conversation,
                           aks_wire_completion **out, aks_error **err)
{
	*out = NULL;
	struct json_object *rec = NULL;
	int rc = aks__store_get(qc->responses, AKS_QUEUE_NS, task_id, &rec, err);
	if (rc < 0)
		return rc;
	const char *owner = json_object_get_string(json_object_object_get(rec, "session_id"));
	if (conversation && (!owner || strcmp(owner, conversation) != 0)) {
		json_object_put(rec);
		return AKS_ENOTFOUND; /* another conversation's task is not this one's to see */
	}
	size_t len = 0;
	const char *text = json_object_to_json_string_length(rec, JSON_C_TO_STRING_PLAIN, &len);
	rc = text ? aks__wire_completion_decode(text, len, out, err)
	          : aks__error_set(err, AKS_ENOMEM, "out of memory");
	json_object_put(rec);
	if (rc < 0 && rc != AKS_ENOMEM && err && *err)
		aks__error_prefix(*err, "the completion record of sandbox task %s is unreadable",
		                  task_id);
	return rc;
}

int aks__queue_client_submit(aks_queue_client *qc, const aks_wire_request *req, const char *group,
                             double wait, aks_cancel *cancel, aks_wire_completion **out,
                             aks_error **err)
{
	*out = NULL;
	const aks_broker_settings *b = &qc->settings->broker;
	char a[32], c[32];
	if (b->worker_timeout_ceiling > 0 && req->policy.timeout > b->worker_timeout_ceiling) {
		aks__json_format_double(req->policy.timeout, a, sizeof(a));
		aks__json_format_double(b->worker_timeout_ceiling, c, sizeof(c));
		return aks__error_set(err, AKS_EPOLICY,
		                      "policy timeout %ss exceeds the provisioned worker's timeout "
		                      "ceiling (sandbox.broker.worker_timeout_ceiling=%ss)",
		                      a, c);
	}
	aks_autofree char *body = aks__wire_request_encode(req);
	if (!body)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	size_t size = strlen(body);
	if ((int64_t)size > b->inline_payload_max_bytes)
		return aks__error_set(err, AKS_EBROKER,
		                      "serialized %s request is %zu bytes, over "
		                      "sandbox.broker.inline_payload_max_bytes=%lld; write large "
		                      "inputs in smaller pieces or raise the limit",
		                      aks__wire_op_name(req->op), size,
		                      (long long)b->inline_payload_max_bytes);
	const char *attributes[] = {"request_id", req->task_id, NULL};
	aks_message msg = {
	    .struct_version = AKS_MESSAGE_VERSION,
	    .struct_size = sizeof(msg),
	    .body = body,
	    .body_len = size,
	    .attributes = attributes,
	    .group_id = group,
	    .dedup_id = req->task_id,
	};
	aks_call call;
	aks_call_init(&call, 0, NULL, NULL, cancel);
	int rc = aks__transport_send(qc->transport, AKS_QUEUE_INPUT, &msg, &call, err);
	if (rc < 0)
		return rc;
	if (wait <= 0)
		return 1;
	/* Poll the store until the deadline (never get-and-delete: the TTL cleans up). */
	/* The first reads come quickly (most operations are short) and the pause doubles up to
	 * wait_poll_interval, which bounds the store's load from a long wait. */
	int64_t interval = (int64_t)(b->wait_poll_interval * 1000.0);
	int64_t pause = interval < FIRST_POLL_MS ? interval : FIRST_POLL_MS;
	int64_t deadline = aks__now_ms() + (int64_t)(wait * 1000.0);
	for (bool warned = false;;) {
		aks_error *e = NULL;
		rc = read_completion(qc, req->task_id, NULL, out, &e);
		if (rc == AKS_OK || rc == AKS_ENOMEM) {
			aks_error_free(e);
			return rc == AKS_OK ? AKS_OK : aks__error_set(err, rc, "out of memory");
		}
		if (rc != AKS_ENOTFOUND && !warned) { /* once per call, not once per poll */
			aks__log(AKS_LOG_WARNING, "sandbox",
			         "reading the completion of sandbox task %s: %s (polling on)",
			         req->task_id, aks_error_message(e));
			warned = true;
		}
		aks_error_free(e);
		int64_t left = deadline - aks__now_ms();
		if (left <= 0)
			return 1;
		if (nap(cancel, left < pause ? left : pause))
			return 1; /* the caller stopped waiting; the work goes on as a task */
		pause = pause * 2 < interval ? pause * 2 : interval;
	}
}

int aks__queue_client_result(aks_queue_client *qc, const char *task_id, const char *conversation,
                             aks_wire_completion **out, aks_error **err)
{
	return read_completion(qc, task_id, conversation, out, err);
}

int aks__queue_completion_outcome(const aks_wire_completion *c, aks_error **err)
{
	switch (c->status) {
	case AKS_WIRE_SUCCEEDED:
		return AKS_OK;
	case AKS_WIRE_TIMED_OUT:
		return aks__error_set(err, AKS_ETIMEOUT, "%s",
		                      c->error ? c->error : "sandbox execution timed out");
	default: {
		int code = aks__wire_error_code(c->error_type);
		if (code >= 0)
			code = AKS_EBROKER;
		return aks__error_set(err, code, "%s",
		                      c->error ? c->error : "sandbox execution failed");
	}
	}
}
