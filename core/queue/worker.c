/*
 * core/queue/worker.c - the queue worker's runtime (reference §5.6): consumer loops on the input
 * and output queues, the permanent-failure paths, completion truncation, the idle sweep's
 * timer and a clean shutdown. What one request does is the engine's business (worker_engine.c),
 * reached only through the config's process and sweep callbacks.
 *
 * Threads. Each consumer loop is one thread that owns one transport consumer: the transport
 * contract gives a consumer to the thread that opened it, so fetch, ack, nack, dead_letter,
 * in_progress and close are all called from that thread. A request's `process` runs on a
 * helper thread of its own while the consumer thread supervises it: every HEARTBEAT_MS it
 * tells the transport the fetched messages are still being worked on (in_progress, when the
 * transport has it), so an execution longer than the ack wait is not redelivered to a second
 * worker; and when a stop's grace runs out it triggers the request's cancel. Calling
 * in_progress from the helper thread instead would break the one-thread consumer contract,
 * and running process on the consumer thread would leave nobody to send the heartbeat.
 *
 * No per-session lock map (reference §11 item 7). The reference serialises a session inside
 * one worker with an OS-thread lock per session that is never pruned. Here the transport's
 * per-group FIFO (at most one message of a group in flight, fleet-wide) already serialises a
 * session's requests, and the engine takes the store's named session lock for the span of an
 * operation; the runtime keeps no per-session state at all, so nothing grows with the number
 * of sessions.
 *
 * Stopping. A stop ends the fetching (the fetch's cancellation cuts its wait short, and no
 * fetch waits more than FETCH_SLICE_MS anyway); fetched messages not started yet go back to
 * the transport at once; a running request has the grace to finish, have its completion sent
 * and be acked; past the grace its cancel is triggered, its completion (if any) discarded and
 * its message nacked for redelivery. process must honour its cancel: a thread cannot be
 * killed, so the stop waits for it to return.
 *
 * The session inventory is kept by the engine, not by the output loop as in the reference: the
 * engine writes it before process returns, so before the request is acked, and per-group FIFO
 * delivers the session's next request only after that ack. The next operation of a session
 * therefore always sees the inventory its predecessor left; the output loop only persists
 * completion records.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "plugin/result.h"
#include "queue/worker.h"
#include "session/sessions.h"
#include "tools/json.h"
#include "util/json_fix.h"
#include "util/util.h"

#define LOG "worker"

/* The longest a fetch waits, so that a stop is noticed within about a second even by a
 * transport that does not honour the fetch's cancellation (the reference's slice cap). */
#define FETCH_SLICE_MS 1000
/* The pause after a failed fetch (reference: 5 s); a stop cuts it short. */
#define FETCH_RETRY_MS 5000
/* How often a running request's messages are reported in progress: well inside any ack wait
 * an operator would set (a second is one small message per running request). */
#define HEARTBEAT_MS 1000
/* The bound on one send of a completion record. */
#define SEND_TIMEOUT_S 30.0
/* Redelivery delays: after a request that could not be decoded, run or answered (a retry
 * soon, which reaches the permanent-failure path after max receives), and after a response
 * store failure (a short backoff for the store to come back). */
#define NACK_RETRY_S 1.0
#define NACK_STORE_S 2.0

/* ---- the worker ---- */

typedef struct loop {
	aks_worker *w;
	bool input;   /* AKS_QUEUE_INPUT, else AKS_QUEUE_OUTPUT */
	size_t index; /* in w->loops and w->quiet */
	pthread_t thread;
	bool started;
	/* set by the thread once it tried to open its consumer */
	int open_rc;
	aks_error *open_err;
	aks_queue_consumer *consumer;
	aks_message **batch; /* cfg.batch_size slots */
	bool *settled;
	size_t n;       /* messages in the current batch */
	bool heartbeat; /* the transport has in_progress (until it says otherwise) */
	/* For health: when the loop was last seen working (a fetch returned, a running request's
	 * supervision woke), and whether its last fetch failed. */
	atomic_int_least64_t alive_ms;
	atomic_bool fetch_failing;
} loop;

struct aks_worker {
	aks_worker_config cfg;
	pthread_mutex_t mu;  /* everything below that is not atomic */
	pthread_cond_t cond; /* CLOCK_MONOTONIC; stop, job completion, start-up */
	atomic_bool stopping;
	int64_t cancel_at_ms;    /* when stopping: in-flight requests are cancelled then */
	aks_cancel *stop_cancel; /* triggered by a stop: cuts fetch waits short */
	size_t opened;           /* loops done trying to open their consumer */
	/* `once`: see note_quiet() */
	uint64_t epoch;
	unsigned busy;
	int64_t not_before_ms;
	uint64_t *quiet;
	loop *loops;
	size_t nloops;
	pthread_t sweeper;
	bool sweeper_started;
	pthread_mutex_t join_mu;
	bool joined;
	atomic_uint_least64_t requests, request_failures, nacks, stored, store_failures,
	    dead_lettered;
	atomic_uint in_flight;     /* requests whose process runs now */
	atomic_bool store_failing; /* the last completion record could not be stored */
};

/* Waits on w->cond (w->mu held) until deadline_ms on aks__now_ms's clock at the latest. */
static void wait_until(aks_worker *w, int64_t deadline_ms)
{
	if (deadline_ms < 0)
		deadline_ms = 0;
	struct timespec ts = {.tv_sec = deadline_ms / 1000,
	                      .tv_nsec = (long)(deadline_ms % 1000) * 1000000L};
	pthread_cond_timedwait(&w->cond, &w->mu, &ts);
}

static const char *msg_text(const aks_error *e)
{
	return e ? aks_error_message(e) : "unknown error";
}

/* w->mu held. */
static void stop_locked(aks_worker *w, double grace)
{
	if (!(grace > 0))
		grace = 0;
	if (grace > 1e9)
		grace = 1e9;
	int64_t at = aks__now_ms() + (int64_t)(grace * 1000.0);
	if (!atomic_load(&w->stopping) || at < w->cancel_at_ms)
		w->cancel_at_ms = at; /* a second stop may only shorten the grace */
	atomic_store(&w->stopping, true);
	pthread_cond_broadcast(&w->cond);
}

void aks__worker_stop(aks_worker *w, double grace)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	stop_locked(w, grace);
	pthread_mutex_unlock(&w->mu);
	aks_cancel_trigger(w->stop_cancel);
}

void aks__worker_get_stats(aks_worker *w, aks_worker_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!w)
		return;
	out->requests = atomic_load(&w->requests);
	out->request_failures = atomic_load(&w->request_failures);
	out->nacks = atomic_load(&w->nacks);
	out->stored = atomic_load(&w->stored);
	out->store_failures = atomic_load(&w->store_failures);
	out->dead_lettered = atomic_load(&w->dead_lettered);
	out->in_flight = atomic_load(&w->in_flight);
	out->stopping = atomic_load(&w->stopping);
	out->store_failing = atomic_load(&w->store_failing) ||
	                     (w->cfg.store_waits && w->cfg.store_waits(w->cfg.ctx) > 0);
	int64_t now = aks__now_ms(), stalest = now;
	for (size_t k = 0; k < w->nloops; k++) {
		if (atomic_load(&w->loops[k].fetch_failing))
			out->fetch_failing++;
		int64_t seen = atomic_load(&w->loops[k].alive_ms);
		if (seen < stalest)
			stalest = seen;
	}
	out->stalest_loop_ms = now - stalest;
}

/* ---- settling ---- */

static const char *queue_of(const loop *l)
{
	return l->input ? AKS_QUEUE_INPUT : AKS_QUEUE_OUTPUT;
}

static const char *msg_id(const aks_message *m)
{
	return m->message_id ? m->message_id : "?";
}

static void ack(loop *l, size_t i)
{
	aks_error *e = NULL;
	if (aks__consumer_ack(l->consumer, l->batch[i], &e) < 0)
		aks__log(AKS_LOG_WARNING, LOG,
		         "cannot ack message %s on the %s queue (it will be delivered again): %s",
		         msg_id(l->batch[i]), queue_of(l), msg_text(e));
	aks_error_free(e);
	l->settled[i] = true;
}

static void nack(loop *l, size_t i, double delay_s)
{
	aks_worker *w = l->w;
	aks_error *e = NULL;
	if (aks__consumer_nack(l->consumer, l->batch[i], delay_s, &e) < 0)
		aks__log(AKS_LOG_WARNING, LOG,
		         "cannot nack message %s on the %s queue (it will be delivered again after "
		         "the transport's ack wait): %s",
		         msg_id(l->batch[i]), queue_of(l), msg_text(e));
	aks_error_free(e);
	l->settled[i] = true;
	atomic_fetch_add(&w->nacks, 1);
	/* `once` must not call the queues drained while a nacked message waits to come back. */
	int64_t back = aks__now_ms() + (int64_t)(delay_s * 1000.0) + FETCH_SLICE_MS;
	pthread_mutex_lock(&w->mu);
	if (back > w->not_before_ms)
		w->not_before_ms = back;
	pthread_mutex_unlock(&w->mu);
}

static void dead_letter(loop *l, size_t i)
{
	aks_error *e = NULL;
	if (aks__consumer_dead_letter(l->consumer, l->batch[i], &e) < 0)
		aks__log(AKS_LOG_WARNING, LOG, "cannot dead-letter message %s on the %s queue: %s",
		         msg_id(l->batch[i]), queue_of(l), msg_text(e));
	aks_error_free(e);
	l->settled[i] = true;
	atomic_fetch_add(&l->w->dead_lettered, 1);
}

/* Hands a message back for another worker (or this one, later): it was not done. */
static void hand_back(loop *l, size_t i)
{
	nack(l, i, 0);
}

/* ---- sending completion records ---- */

static int send_record(aks_worker *w, const char *task_id, const char *record, aks_error **err)
{
	const char *attrs[] = {"request_id", task_id, NULL};
	/* Output records need no group: each is stored under its own key, in any order. The
	 * dedup id drops a second record of the same task (a re-execution after a lost ack). */
	aks_message msg = {
	    .struct_version = AKS_MESSAGE_VERSION,
	    .struct_size = sizeof(msg),
	    .body = record,
	    .body_len = strlen(record),
	    .attributes = attrs,
	    .group_id = NULL,
	    .dedup_id = task_id,
	};
	aks_call call;
	aks_call_init(&call, SEND_TIMEOUT_S, NULL, NULL, NULL);
	return aks__transport_send(w->cfg.transport, AKS_QUEUE_OUTPUT, &msg, &call, err);
}

/* The reference's placeholder for a request that cannot be decoded. */
static int placeholder_session(aks_session_rec *s, const char *task_id)
{
	memset(s, 0, sizeof(*s));
	s->id = strdup(task_id);
	s->profile = strdup("unknown");
	s->provider_type = strdup("unknown");
	s->created_at = s->last_used_at = aks__epoch_now();
	if (!s->id || !s->profile || !s->provider_type) {
		aks__session_clear(s);
		return AKS_ENOMEM;
	}
	return AKS_OK;
}

/* A failed completion with ExecutionBrokerError and `error` (copied); takes task_id and
 * session (both malloc'd) even on failure. NULL on ENOMEM. */
static aks_wire_completion *failed_completion(char *task_id, aks_session_rec *session,
                                              const char *error)
{
	aks_wire_completion *c = calloc(1, sizeof(*c));
	if (!c) {
		free(task_id);
		aks__session_clear(session);
		return NULL;
	}
	c->task_id = task_id;
	c->session = *session;
	memset(session, 0, sizeof(*session));
	c->status = AKS_WIRE_FAILED;
	if (!c->task_id || !(c->error = strdup(error)) ||
	    !(c->error_type = strdup(aks__wire_error_type(AKS_EBROKER)))) {
		aks__wire_completion_free(c);
		return NULL;
	}
	return c;
}

/* ---- the request loop ---- */

/* The request permanent-failure path: a `failed` record for whatever task can be named, then
 * the message is dead-lettered. */
static void request_permanent_failure(loop *l, size_t i)
{
	aks_worker *w = l->w;
	aks_message *m = l->batch[i];
	aks_wire_request *req = NULL;
	aks_error *e = NULL;
	char *task_id = NULL, *conversation = NULL;
	aks_session_rec session;
	memset(&session, 0, sizeof(session));
	int rc = aks__wire_request_decode(m->body, m->body_len, &req, &e);
	const char *attr = aks__message_attribute(m, "request_id");
	if (rc == AKS_OK) {
		task_id = aks_steal(&req->task_id);
		conversation = aks_steal(&req->ak_session_id);
		session = req->session;
		memset(&req->session, 0, sizeof(req->session));
		aks__wire_request_free(req);
	} else if (rc != AKS_ENOMEM && (!attr || !*attr)) {
		aks__log(AKS_LOG_ERROR, LOG,
		         "Dropping undecodable sandbox request with no request_id attribute "
		         "(message %s, %" PRIu32 " deliveries): %s",
		         msg_id(m), m->receive_count, msg_text(e));
		aks_error_free(e);
		dead_letter(l, i);
		return;
	} else if (rc != AKS_ENOMEM && (task_id = strdup(attr)) &&
	           (conversation = strdup("unknown"))) {
		placeholder_session(&session, attr);
	}
	aks_error_free(e);
	e = NULL;
	aks_wire_completion *c = NULL;
	char *record = NULL;
	if (task_id && conversation && session.id) {
		char error[96];
		snprintf(error, sizeof(error),
		         "sandbox execution failed after %" PRIu32 " deliveries", m->receive_count);
		char *tid = strdup(task_id);
		c = tid ? failed_completion(tid, &session, error) : NULL;
		record = c ? aks__wire_record_encode(c, conversation) : NULL;
	}
	aks__session_clear(&session);
	if (!record) {
		aks__log(AKS_LOG_ERROR, LOG,
		         "out of memory recording the failure of sandbox request %s; it goes back",
		         task_id ? task_id : "?");
		nack(l, i, NACK_RETRY_S);
	} else if (send_record(w, task_id, record, &e) < 0) {
		/* Unlike the reference, which dead-letters anyway, the message goes back: the
		 * failed record is sent on a later delivery, and the task never stays pending. */
		aks__log(AKS_LOG_ERROR, LOG,
		         "cannot send the failure record of sandbox request %s (it goes back): %s",
		         task_id, msg_text(e));
		nack(l, i, NACK_RETRY_S);
	} else {
		aks__log(AKS_LOG_ERROR, LOG,
		         "sandbox request %s failed after %" PRIu32
		         " deliveries; recorded as failed and dead-lettered",
		         task_id, m->receive_count);
		atomic_fetch_add(&w->request_failures, 1);
		dead_letter(l, i);
	}
	aks_error_free(e);
	aks__wire_completion_free(c);
	free(record);
	free(task_id);
	free(conversation);
}

typedef struct job {
	aks_worker *w;
	const aks_wire_request *req;
	aks_cancel *cancel;
	aks_wire_completion *out;
	int rc;
	bool done; /* under w->mu */
} job;

static void *job_main(void *arg)
{
	job *j = arg;
	aks_wire_completion *c = NULL;
	int rc = j->w->cfg.process(j->w->cfg.ctx, j->req, j->cancel, &c);
	pthread_mutex_lock(&j->w->mu);
	j->out = c;
	j->rc = rc;
	j->done = true;
	pthread_cond_broadcast(&j->w->cond);
	pthread_mutex_unlock(&j->w->mu);
	return NULL;
}

/* Tells the transport that the batch's unsettled messages from `from` on are still being
 * worked on. Consumer thread only. */
static void heartbeat(loop *l, size_t from)
{
	for (size_t i = from; l->heartbeat && i < l->n; i++) {
		if (l->settled[i])
			continue;
		aks_error *e = NULL;
		int rc = aks__consumer_in_progress(l->consumer, l->batch[i], &e);
		if (rc == AKS_ECAPABILITY && !e)
			l->heartbeat = false; /* the transport has no in_progress */
		else if (rc < 0)
			aks__log(AKS_LOG_WARNING, LOG,
			         "cannot report message %s in progress (it may be delivered again "
			         "after the ack wait): %s",
			         msg_id(l->batch[i]), msg_text(e));
		aks_error_free(e);
	}
}

/* Runs process on a helper thread and supervises it (see the file comment). AKS_OK with
 * *out, AKS_ECANCELLED when a stop's grace ran out and the request was cancelled (its
 * completion, if any, is discarded), or a negative code. */
static int run_process(loop *l, size_t i, const aks_wire_request *req, aks_wire_completion **out)
{
	aks_worker *w = l->w;
	*out = NULL;
	job j = {.w = w, .req = req};
	aks_error *e = NULL;
	if (aks_cancel_new(&j.cancel, &e) < 0) {
		aks__log(AKS_LOG_ERROR, LOG, "%s", msg_text(e));
		aks_error_free(e);
		return AKS_ENOMEM;
	}
	/* Counted before the thread starts: the request may be running before this thread
	 * runs again, and a monitor must never see it running and not in flight. */
	atomic_fetch_add(&w->in_flight, 1);
	pthread_t helper;
	int err = pthread_create(&helper, NULL, job_main, &j);
	if (err) {
		atomic_fetch_sub(&w->in_flight, 1);
		aks__log(AKS_LOG_ERROR, LOG, "cannot start a thread for sandbox request %s: %s",
		         req->task_id, strerror(err));
		aks_cancel_free(j.cancel);
		return AKS_EIO;
	}
	bool cancelled = false;
	int64_t next_beat = aks__now_ms() + HEARTBEAT_MS;
	pthread_mutex_lock(&w->mu);
	while (!j.done) {
		int64_t now = aks__now_ms();
		atomic_store(&l->alive_ms, now);
		bool stopping = atomic_load(&w->stopping);
		if (stopping && !cancelled && now >= w->cancel_at_ms) {
			aks__log(
			    AKS_LOG_WARNING, LOG,
			    "the stop's grace ran out: cancelling sandbox request %s, which goes "
			    "back to the queue",
			    req->task_id);
			aks_cancel_trigger(j.cancel);
			cancelled = true;
			continue;
		}
		if (now >= next_beat) {
			pthread_mutex_unlock(&w->mu);
			heartbeat(l, i);
			pthread_mutex_lock(&w->mu);
			next_beat = aks__now_ms() + HEARTBEAT_MS;
			continue;
		}
		int64_t deadline = next_beat;
		if (stopping && !cancelled && w->cancel_at_ms < deadline)
			deadline = w->cancel_at_ms;
		wait_until(w, deadline);
	}
	pthread_mutex_unlock(&w->mu);
	pthread_join(helper, NULL);
	atomic_fetch_sub(&w->in_flight, 1);
	aks_cancel_free(j.cancel);
	if (cancelled) {
		aks__wire_completion_free(j.out);
		return AKS_ECANCELLED;
	}
	if (j.rc < 0 || !j.out) {
		aks__wire_completion_free(j.out);
		return j.rc < 0 ? j.rc : AKS_ERROR;
	}
	*out = j.out;
	return AKS_OK;
}

static void handle_request(loop *l, size_t i)
{
	aks_worker *w = l->w;
	aks_message *m = l->batch[i];
	if (m->receive_count > w->cfg.input_max_receive) {
		request_permanent_failure(l, i);
		return;
	}
	aks_wire_request *req = NULL;
	aks_error *e = NULL;
	if (aks__wire_request_decode(m->body, m->body_len, &req, &e) < 0) {
		/* Never dropped here: after max receives it takes the permanent-failure path. */
		const char *id = aks__message_attribute(m, "request_id");
		aks__log(AKS_LOG_WARNING, LOG,
		         "cannot decode sandbox request %s (message %s, delivery %" PRIu32
		         "): %s; it goes back to the queue",
		         id ? id : "(no request_id)", msg_id(m), m->receive_count, msg_text(e));
		aks_error_free(e);
		nack(l, i, NACK_RETRY_S);
		return;
	}
	aks_wire_completion *c = NULL;
	int rc = run_process(l, i, req, &c);
	char *record = NULL;
	if (rc == AKS_ECANCELLED) {
		hand_back(l, i);
	} else if (rc < 0) {
		aks__log(AKS_LOG_ERROR, LOG,
		         "sandbox request %s could not run (%s); it goes back to the queue",
		         req->task_id, aks_strerror(rc));
		nack(l, i, NACK_RETRY_S);
	} else {
		bool over = false;
		aks__worker_truncate(c, req->ak_session_id, w->cfg.inline_payload_max_bytes, &over);
		record = aks__wire_record_encode(c, req->ak_session_id);
		if (!record) {
			aks__log(
			    AKS_LOG_ERROR, LOG,
			    "out of memory encoding the completion of sandbox request %s; it goes "
			    "back to the queue",
			    req->task_id);
			nack(l, i, NACK_RETRY_S);
		} else if (send_record(w, req->task_id, record, &e) < 0) {
			/* At-least-once, as the reference: the redelivery runs it again. */
			aks__log(
			    AKS_LOG_ERROR, LOG,
			    "cannot send the completion of sandbox request %s (it goes back to the "
			    "queue and will run again): %s",
			    req->task_id, msg_text(e));
			nack(l, i, NACK_RETRY_S);
		} else {
			atomic_fetch_add(&w->requests, 1);
			ack(l, i);
		}
	}
	aks_error_free(e);
	free(record);
	aks__wire_completion_free(c);
	aks__wire_request_free(req);
}

/* ---- the output loop ---- */

/* Parses a completion record: a JSON object with request_id (a non-empty string, the task of
 * its completion body), session_id (a string), status_code (an integer) and body (a valid
 * completion). *rec is the caller's; *id points into it. */
static int parse_record(const aks_message *m, struct json_object **rec, const char **id,
                        aks_error **err)
{
	*rec = NULL;
	*id = NULL;
	if (m->body_len > (size_t)INT32_MAX)
		return aks__error_set(err, AKS_EINVAL, "the record is too large to parse");
	const char *text = m->body;
	size_t len = m->body_len;
	aks_autofree char *fixed = NULL; /* json_fix.h: json-c misreads some surrogate pairs */
	size_t fixed_len = 0;
	struct json_tokener *tok = aks__json_fix_surrogates(text, len, &fixed, &fixed_len) == 0
	                               ? json_tokener_new_ex(AKS_STORE_MAX_DEPTH)
	                               : NULL;
	if (!tok)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	if (fixed) {
		text = fixed;
		len = fixed_len;
	}
	struct json_object *o = json_tokener_parse_ex(tok, text, (int)len);
	bool whole = o && json_tokener_get_error(tok) == json_tokener_success &&
	             json_tokener_get_parse_end(tok) == len;
	json_tokener_free(tok);
	struct json_object *rid = NULL, *sid = NULL, *code = NULL, *body = NULL;
	if (!whole || !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		return aks__error_set(err, AKS_EINVAL, "the record is not a JSON object");
	}
	if (!json_object_object_get_ex(o, "request_id", &rid) ||
	    !json_object_is_type(rid, json_type_string) || json_object_get_string_len(rid) == 0 ||
	    !json_object_object_get_ex(o, "session_id", &sid) ||
	    !json_object_is_type(sid, json_type_string) ||
	    !json_object_object_get_ex(o, "status_code", &code) ||
	    !json_object_is_type(code, json_type_int) ||
	    !json_object_object_get_ex(o, "body", &body) ||
	    !json_object_is_type(body, json_type_object)) {
		json_object_put(o);
		return aks__error_set(
		    err, AKS_EINVAL,
		    "the record lacks request_id, session_id, status_code or body");
	}
	/* The agent decodes the body when it reads the record: refuse what it could not. */
	aks_wire_completion *c = NULL;
	int rc = aks__wire_completion_decode(m->body, m->body_len, &c, err);
	if (rc == AKS_OK && strcmp(c->task_id, json_object_get_string(rid)) != 0)
		rc = aks__error_set(err, AKS_EINVAL,
		                    "the record's request_id is not its body's task_id");
	aks__wire_completion_free(c);
	if (rc < 0) {
		json_object_put(o);
		return rc;
	}
	*rec = o;
	*id = json_object_get_string(rid);
	return AKS_OK;
}

/* Best effort (reference §11 item 21): a completion that could not be stored would leave its
 * task pending forever; store a terminal failed record for it instead, unless a record is
 * already there. */
static void store_terminal_failure(aks_worker *w, const aks_message *m, const char *id,
                                   struct json_object *parsed)
{
	struct json_object *existing = NULL;
	aks_error *e = NULL;
	int rc = aks__store_get(w->cfg.responses, AKS_QUEUE_NS, id, &existing, &e);
	json_object_put(existing);
	if (rc == AKS_OK) {
		aks_error_free(e);
		return;
	}
	aks_error_free(e);
	e = NULL;
	/* The session and conversation of the record if it has them, else the placeholders. */
	aks_session_rec session;
	memset(&session, 0, sizeof(session));
	aks_wire_completion *orig = NULL;
	if (aks__wire_completion_decode(m->body, m->body_len, &orig, NULL) == AKS_OK) {
		session = orig->session;
		memset(&orig->session, 0, sizeof(orig->session));
		aks__wire_completion_free(orig);
	} else if (placeholder_session(&session, id) < 0) {
		return;
	}
	struct json_object *sid = NULL;
	const char *conversation = "unknown";
	if (parsed && json_object_object_get_ex(parsed, "session_id", &sid) &&
	    json_object_is_type(sid, json_type_string))
		conversation = json_object_get_string(sid);
	char error[128];
	snprintf(error, sizeof(error),
	         "sandbox execution finished but its completion could not be stored after %" PRIu32
	         " deliveries",
	         m->receive_count);
	char *tid = strdup(id);
	aks_wire_completion *c = tid ? failed_completion(tid, &session, error) : NULL;
	aks__session_clear(&session);
	char *record = c ? aks__wire_record_encode(c, conversation) : NULL;
	struct json_object *rec = record ? json_tokener_parse(record) : NULL;
	if (!rec)
		rc = aks__error_set(&e, AKS_ENOMEM, "out of memory");
	else
		rc = aks__store_put_expiring(w->cfg.responses, AKS_QUEUE_NS, id, rec,
		                             w->cfg.response_ttl, &e);
	if (rc < 0) {
		aks__log(AKS_LOG_ERROR, LOG,
		         "cannot store a failed record for request %s either; it stays pending: %s",
		         id, msg_text(e));
	} else {
		atomic_store(&w->store_failing, false); /* it answers: that record is stored */
		aks__log(AKS_LOG_WARNING, LOG, "request %s recorded as failed", id);
	}
	aks_error_free(e);
	json_object_put(rec);
	free(record);
	aks__wire_completion_free(c);
}

static void completion_permanent_failure(loop *l, size_t i)
{
	aks_message *m = l->batch[i];
	const char *id = aks__message_attribute(m, "request_id");
	struct json_object *parsed = NULL;
	if (m->body_len <= (size_t)INT32_MAX) {
		struct json_tokener *tok = json_tokener_new_ex(AKS_STORE_MAX_DEPTH);
		parsed = tok ? json_tokener_parse_ex(tok, m->body, (int)m->body_len) : NULL;
		json_tokener_free(tok);
		if (parsed && !json_object_is_type(parsed, json_type_object)) {
			json_object_put(parsed);
			parsed = NULL;
		}
	}
	struct json_object *rid = NULL;
	if ((!id || !*id) && parsed && json_object_object_get_ex(parsed, "request_id", &rid) &&
	    json_object_is_type(rid, json_type_string) && json_object_get_string_len(rid) > 0)
		id = json_object_get_string(rid);
	if (id && !*id)
		id = NULL;
	aks__log(AKS_LOG_ERROR, LOG,
	         "giving up on the completion record of request %s after %" PRIu32
	         " deliveries: it is dead-lettered",
	         id ? id : "<undecodable message>", m->receive_count);
	if (id)
		store_terminal_failure(l->w, m, id, parsed);
	json_object_put(parsed);
	dead_letter(l, i);
}

static void handle_completion(loop *l, size_t i)
{
	aks_worker *w = l->w;
	aks_message *m = l->batch[i];
	if (m->receive_count > w->cfg.output_max_receive) {
		completion_permanent_failure(l, i);
		return;
	}
	struct json_object *rec = NULL;
	const char *id = NULL;
	aks_error *e = NULL;
	if (parse_record(m, &rec, &id, &e) < 0) {
		const char *attr = aks__message_attribute(m, "request_id");
		aks__log(AKS_LOG_WARNING, LOG,
		         "cannot parse the completion record of request %s (message %s, delivery "
		         "%" PRIu32 "): %s; it goes back to the queue",
		         attr ? attr : "(no request_id)", msg_id(m), m->receive_count, msg_text(e));
		aks_error_free(e);
		nack(l, i, NACK_RETRY_S);
		return;
	}
	/* Stored verbatim under its task id. A failure only retries the store: the sandbox
	 * operation itself never runs again. */
	if (aks__store_put_expiring(w->cfg.responses, AKS_QUEUE_NS, id, rec, w->cfg.response_ttl,
	                            &e) < 0) {
		atomic_store(&w->store_failing, true);
		atomic_fetch_add(&w->store_failures, 1);
		aks__log(AKS_LOG_WARNING, LOG,
		         "cannot store the completion record of request %s (delivery %" PRIu32
		         "; retrying): %s",
		         id, m->receive_count, msg_text(e));
		nack(l, i, NACK_STORE_S);
	} else {
		atomic_fetch_add(&w->stored, 1);
		atomic_store(&w->store_failing, false);
		ack(l, i);
	}
	aks_error_free(e);
	json_object_put(rec);
}

/* ---- the consumer loops ---- */

/*
 * The store is failing (health) until a record is stored. When the last record that failed
 * was dead-lettered and no other comes, nothing would store one: an idle output loop then
 * writes a small expiring record of its own, so that a store that answers again makes the
 * worker ready again without waiting for the next operation. A write, not a read: a store
 * can answer reads and still refuse writes. Only a store failure counted since the probe
 * began keeps the state failing.
 */
#define STORE_PROBE_TTL_S 60

static void probe_store(loop *l)
{
	aks_worker *w = l->w;
	if (l->input || !atomic_load(&w->store_failing))
		return;
	uint64_t failures = atomic_load(&w->store_failures);
	struct json_object *rec = json_object_new_object();
	aks_error *e = NULL;
	int rc =
	    rec ? aks__store_put_expiring(w->cfg.responses, AKS_QUEUE_NS, AKS_QUEUE_STORE_PROBE_KEY,
	                                  rec, STORE_PROBE_TTL_S, &e)
	        : AKS_ENOMEM;
	json_object_put(rec);
	aks_error_free(e);
	if (rc == AKS_OK && atomic_load(&w->store_failures) == failures &&
	    atomic_exchange(&w->store_failing, false))
		aks__log(AKS_LOG_INFO, LOG, "the response store answers again");
}

/*
 * `once`: the worker stops by itself when the queues are drained. Precisely: every loop
 * (input and output alike) completed an empty fetch that started in the current epoch, no
 * loop holds a message, and no message this worker nacked is still waiting for its
 * redelivery. The epoch advances whenever a fetch returns messages and whenever a loop has
 * settled its batch (a request's completion is sent before its batch is settled), so an
 * empty fetch counts only if it began after the last message this worker saw was done with:
 * an output loop's empty fetch that ran before an input loop sent a record does not count.
 * Messages sent by others while the worker drains may be handed back when it stops.
 * w->mu held.
 */
static void note_quiet(aks_worker *w, loop *l, uint64_t start_epoch)
{
	if (!w->cfg.once)
		return;
	w->quiet[l->index] = start_epoch == w->epoch ? start_epoch : 0;
	if (w->busy || aks__now_ms() < w->not_before_ms || atomic_load(&w->stopping))
		return;
	for (size_t k = 0; k < w->nloops; k++)
		if (w->quiet[k] != w->epoch)
			return;
	aks__log(AKS_LOG_INFO, LOG, "both queues are drained; the worker stops (--once)");
	stop_locked(w, 0);
	aks_cancel_trigger(w->stop_cancel);
}

static void run_loop(loop *l)
{
	aks_worker *w = l->w;
	aks_call call;
	aks_call_init(&call, 0, NULL, NULL, w->stop_cancel);
	while (!atomic_load(&w->stopping)) {
		pthread_mutex_lock(&w->mu);
		uint64_t start_epoch = w->epoch;
		pthread_mutex_unlock(&w->mu);
		aks_error *e = NULL;
		size_t n = 0;
		int rc = aks__consumer_fetch(l->consumer, l->batch, w->cfg.batch_size, &n,
		                             FETCH_SLICE_MS, &call, &e);
		atomic_store(&l->alive_ms, aks__now_ms());
		atomic_store(&l->fetch_failing, rc < 0);
		if (rc < 0) {
			aks__log(AKS_LOG_WARNING, LOG,
			         "fetch on the %s queue failed (retrying in %d s): %s", queue_of(l),
			         FETCH_RETRY_MS / 1000, msg_text(e));
			aks_error_free(e);
			pthread_mutex_lock(&w->mu);
			w->quiet[l->index] = 0;
			int64_t until = aks__now_ms() + FETCH_RETRY_MS;
			while (!atomic_load(&w->stopping) && aks__now_ms() < until)
				wait_until(w, until);
			pthread_mutex_unlock(&w->mu);
			continue;
		}
		pthread_mutex_lock(&w->mu);
		if (n == 0) {
			note_quiet(w, l, start_epoch);
			pthread_mutex_unlock(&w->mu);
			probe_store(l);
			continue;
		}
		w->epoch++;
		w->busy++;
		pthread_mutex_unlock(&w->mu);
		l->n = n;
		for (size_t i = 0; i < n; i++)
			l->settled[i] = false;
		for (size_t i = 0; i < n; i++) {
			if (atomic_load(&w->stopping))
				hand_back(l, i); /* not started: another worker will run it */
			else if (l->input)
				handle_request(l, i);
			else
				handle_completion(l, i);
		}
		l->n = 0;
		pthread_mutex_lock(&w->mu);
		w->epoch++;
		w->busy--;
		pthread_mutex_unlock(&w->mu);
	}
}

static void *loop_main(void *arg)
{
	loop *l = arg;
	aks_worker *w = l->w;
	aks_error *e = NULL;
	int rc = aks__consumer_open(w->cfg.transport, queue_of(l), &l->consumer, &e);
	pthread_mutex_lock(&w->mu);
	l->open_rc = rc;
	l->open_err = e;
	w->opened++;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->mu);
	if (rc < 0)
		return NULL;
	run_loop(l);
	aks__consumer_close(l->consumer); /* hands back anything unsettled */
	l->consumer = NULL;
	return NULL;
}

/* ---- the idle sweep ---- */

static void *sweep_main(void *arg)
{
	aks_worker *w = arg;
	int64_t period = (int64_t)(w->cfg.sweep_interval * 1000.0);
	if (period < 1)
		period = 1;
	pthread_mutex_lock(&w->mu);
	for (;;) {
		int64_t at = aks__now_ms() + period;
		while (!atomic_load(&w->stopping) && aks__now_ms() < at)
			wait_until(w, at);
		if (atomic_load(&w->stopping))
			break;
		pthread_mutex_unlock(&w->mu);
		size_t destroyed = 0;
		aks_error *e = NULL;
		/* A failed pass is retried at the next interval. */
		if (w->cfg.sweep(w->cfg.ctx, &destroyed, &e) < 0)
			aks__log(AKS_LOG_WARNING, LOG, "the idle-session sweep failed: %s",
			         msg_text(e));
		else if (destroyed)
			aks__log(AKS_LOG_INFO, LOG,
			         "the idle-session sweep destroyed %zu sandbox(es)", destroyed);
		aks_error_free(e);
		pthread_mutex_lock(&w->mu);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* ---- start, wait, free ---- */

static int check_config(const aks_worker_config *c, aks_error **err)
{
	if (!c || !c->transport || !c->responses || !c->process)
		return aks__error_set(
		    err, AKS_EINVAL,
		    "worker: a transport, a response store and process are required");
	if (c->input_consumers < 1 || c->output_consumers < 1 || c->batch_size < 1)
		return aks__error_set(
		    err, AKS_EINVAL,
		    "worker: at least one consumer per queue and a batch of at least "
		    "one message are required");
	if (c->input_consumers > 1024 || c->output_consumers > 1024 || c->batch_size > 1024)
		return aks__error_set(
		    err, AKS_EINVAL,
		    "worker: at most 1024 consumers per queue and 1024 messages per "
		    "batch");
	if (c->input_max_receive < 1 || c->output_max_receive < 1)
		return aks__error_set(err, AKS_EINVAL, "worker: max receive counts must be >= 1");
	if (c->inline_payload_max_bytes <= 0 || c->response_ttl <= 0)
		return aks__error_set(
		    err, AKS_EINVAL,
		    "worker: inline_payload_max_bytes and response_ttl must be > 0");
	if (c->sweep && !(c->sweep_interval > 0))
		return aks__error_set(err, AKS_EINVAL, "worker: sweep_interval must be > 0");
	if (!aks__store_can_expire(c->responses))
		return aks__error_set(
		    err, AKS_ECONFIG,
		    "the response store '%s' cannot expire records, which the queue "
		    "broker needs",
		    aks__store_name(c->responses));
	return AKS_OK;
}

static void join_all(aks_worker *w)
{
	pthread_mutex_lock(&w->join_mu);
	if (!w->joined) {
		for (size_t k = 0; k < w->nloops; k++)
			if (w->loops[k].started)
				pthread_join(w->loops[k].thread, NULL);
		if (w->sweeper_started)
			pthread_join(w->sweeper, NULL);
		w->joined = true;
	}
	pthread_mutex_unlock(&w->join_mu);
}

static void destroy(aks_worker *w)
{
	for (size_t k = 0; k < w->nloops; k++) {
		free(w->loops[k].batch);
		free(w->loops[k].settled);
		aks_error_free(w->loops[k].open_err);
	}
	free(w->loops);
	free(w->quiet);
	aks_cancel_free(w->stop_cancel);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->mu);
	pthread_mutex_destroy(&w->join_mu);
	free(w);
}

int aks__worker_start(const aks_worker_config *config, aks_worker **out, aks_error **err)
{
	*out = NULL;
	int rc = check_config(config, err);
	if (rc < 0)
		return rc;
	aks_worker *w = calloc(1, sizeof(*w));
	if (!w)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	w->cfg = *config;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* aks__now_ms's clock */
	pthread_cond_init(&w->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&w->mu, NULL);
	pthread_mutex_init(&w->join_mu, NULL);
	atomic_init(&w->stopping, false);
	w->epoch = 1; /* quiet[k] == 0: no empty fetch in any epoch yet */
	w->nloops = (size_t)config->input_consumers + config->output_consumers;
	w->loops = calloc(w->nloops, sizeof(*w->loops));
	w->quiet = calloc(w->nloops, sizeof(*w->quiet));
	rc = w->loops && w->quiet ? aks_cancel_new(&w->stop_cancel, err)
	                          : aks__error_set(err, AKS_ENOMEM, "out of memory");
	for (size_t k = 0; rc == AKS_OK && k < w->nloops; k++) {
		loop *l = &w->loops[k];
		l->w = w;
		l->index = k;
		l->input = k < config->input_consumers;
		l->heartbeat = true;
		atomic_init(&l->alive_ms, aks__now_ms());
		atomic_init(&l->fetch_failing, false);
		l->batch = calloc(config->batch_size, sizeof(*l->batch));
		l->settled = calloc(config->batch_size, sizeof(*l->settled));
		if (!l->batch || !l->settled)
			rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	if (rc < 0) {
		destroy(w);
		return rc;
	}
	/* Each loop opens its consumer on its own thread; start waits for them all so that a
	 * transport that cannot serve a queue fails the start rather than a thread. */
	size_t started = 0;
	for (size_t k = 0; k < w->nloops; k++) {
		int e = pthread_create(&w->loops[k].thread, NULL, loop_main, &w->loops[k]);
		if (e) {
			rc = aks__error_set(err, AKS_EIO,
			                    "worker: cannot start a consumer thread: %s",
			                    strerror(e));
			break;
		}
		w->loops[k].started = true;
		started++;
	}
	pthread_mutex_lock(&w->mu);
	while (w->opened < started)
		pthread_cond_wait(&w->cond, &w->mu);
	for (size_t k = 0; rc == AKS_OK && k < started; k++)
		if (w->loops[k].open_rc < 0) {
			loop *l = &w->loops[k];
			rc = l->open_rc;
			if (err && !*err) {
				*err = l->open_err;
				l->open_err = NULL;
			}
		}
	pthread_mutex_unlock(&w->mu);
	if (rc == AKS_OK && config->sweep) {
		int e = pthread_create(&w->sweeper, NULL, sweep_main, w);
		if (e)
			rc = aks__error_set(
			    err, AKS_EIO, "worker: cannot start the sweep thread: %s", strerror(e));
		else
			w->sweeper_started = true;
	}
	if (rc < 0) {
		aks__worker_stop(w, 0);
		join_all(w);
		destroy(w);
		return rc;
	}
	*out = w;
	return AKS_OK;
}

int aks__worker_wait(aks_worker *w, aks_error **err)
{
	(void)err; /* after a successful start every loop error is logged and retried */
	if (!w)
		return AKS_OK;
	join_all(w);
	return AKS_OK;
}

void aks__worker_free(aks_worker *w)
{
	if (!w)
		return;
	aks__worker_stop(w, 0);
	join_all(w);
	destroy(w);
}
