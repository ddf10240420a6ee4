/*
 * plugins/sqs/sqs_consumer.c - consumers of the sqs transport: ReceiveMessage (long polling),
 * and settling a message with DeleteMessage (ack, dead_letter) or ChangeMessageVisibility
 * (nack, in_progress, close).
 *
 * One message of a group at a time. A FIFO queue never hands out a group's next message while
 * one is in flight, but one ReceiveMessage may return several messages of the same group at
 * once, in order. The contract allows the host at most one in flight per group, so a
 * consumer holds the later ones back (they stay invisible to every other consumer, their
 * visibility kept up) and hands each out once its predecessor is settled. A nack lets the
 * group's held messages go with it, so the nacked one comes back first; SQS counts their
 * receive again, as it does for every message a closing consumer lets go.
 *
 * Visibility is the ack wait: ReceiveMessage asks for visibility_timeout, and in_progress
 * restores it once half of it has passed (the worker calls in_progress every second; SQS
 * bills every request, so most of those calls send nothing).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aks_json.h"
#include "sqs_internal.h"

struct aks_consumer {
	aks_transport_impl *t;
	int qi;
	sqs_lists lists; /* in flight with the host, and held back (sqs_hold.c) */
};

static int oom(aks_consumer *c, aks_error **err)
{
	return c->t->host->error_set(err, AKS_ENOMEM, "out of memory");
}

int sqs_consumer_open(aks_transport_impl *t, const char *queue, aks_consumer **out, aks_error **err)
{
	*out = NULL;
	int qi = sqs_queue_index(queue);
	if (qi < 0)
		return t->host->error_set(err, AKS_EINVAL, SQS_NAME ": no queue '%s'",
		                          queue ? queue : "(null)");
	int rc = sqs_ready(t, qi, NULL, err);
	if (rc != AKS_OK)
		return rc;
	aks_consumer *c = calloc(1, sizeof(*c));
	if (!c)
		return t->host->error_set(err, AKS_ENOMEM, "out of memory");
	c->t = t;
	c->qi = qi;
	c->lists.held_count = &t->q[qi].held;
	*out = c;
	return AKS_OK;
}

/* ChangeMessageVisibility of m to `seconds` from now. */
static int set_visibility(aks_consumer *c, sqs_msg *m, int seconds, aks_aws_fault *fault,
                          aks_error **err)
{
	aks_transport_impl *t = c->t;
	json_object *body = json_object_new_object(), *out = NULL;
	if (!body ||
	    json_object_object_add(body, "ReceiptHandle", json_object_new_string(m->receipt)) ||
	    json_object_object_add(body, "VisibilityTimeout", json_object_new_int(seconds))) {
		json_object_put(body);
		return oom(c, err);
	}
	aks_call call;
	sqs_request_call(t, NULL, 0, &call);
	int64_t sent = t->host->now_ms();
	aks_aws_fault local;
	int rc = sqs_call(t, c->qi, "change a message's visibility", "ChangeMessageVisibility",
	                  body, AKS_CLOUD_RETRY_SAFE, &call, &out, fault ? fault : &local, err);
	json_object_put(body);
	json_object_put(out);
	if (rc == AKS_OK)
		m->visible_at_ms = sent + (int64_t)seconds * 1000;
	return rc;
}

/* Restores m's visibility once half of it has passed. */
static int keep_invisible(aks_consumer *c, sqs_msg *m, aks_error **err)
{
	int64_t half = (int64_t)c->t->visibility_s * 500;
	if (m->visible_at_ms - c->t->host->now_ms() > half)
		return AKS_OK;
	return set_visibility(c, m, c->t->visibility_s, NULL, err);
}

/* Lets m go (visible again at once), best effort, and frees it. */
static void release(aks_consumer *c, sqs_msg *m)
{
	aks_error *e = NULL;
	aks_aws_fault fault;
	/* MessageNotInflight: its visibility ran out already, it is back on the queue */
	if (set_visibility(c, m, 0, &fault, &e) != AKS_OK &&
	    strcmp(fault.code, "MessageNotInflight") != 0)
		c->t->host->log(AKS_LOG_WARNING, SQS_NAME,
		                "could not hand message %s back (it comes back when its visibility "
		                "runs out): %s",
		                m->message_id ? m->message_id : "?", c->t->host->error_message(e));
	c->t->host->error_free(e);
	sqs_msg_free(m);
}

/* A message that cannot be ours (sqs_decode refused it) would block its group for good:
 * it is deleted, loudly. */
static void drop_foreign(aks_consumer *c, json_object *m, const char *why)
{
	aks_transport_impl *t = c->t;
	const char *id = aks__jstr(m, "MessageId"), *receipt = aks__jstr(m, "ReceiptHandle");
	t->host->log(AKS_LOG_ERROR, SQS_NAME,
	             "deleting message %s of the %s queue: it is not one this transport sent (%s)",
	             id ? id : "?", t->q[c->qi].name, why);
	if (!receipt)
		return;
	json_object *body = json_object_new_object(), *out = NULL;
	if (!body ||
	    json_object_object_add(body, "ReceiptHandle", json_object_new_string(receipt))) {
		json_object_put(body);
		return;
	}
	aks_call call;
	sqs_request_call(t, NULL, 0, &call);
	aks_aws_fault fault;
	aks_error *e = NULL;
	sqs_call(t, c->qi, "delete a message", "DeleteMessage", body, AKS_CLOUD_RETRY_SAFE, &call,
	         &out, &fault, &e);
	t->host->error_free(e);
	json_object_put(body);
	json_object_put(out);
}

static json_object *receive_request(aks_consumer *c, size_t max, int wait_s)
{
	json_object *body = json_object_new_object(), *sys = json_object_new_array(),
	            *names = json_object_new_array();
	bool ok = body && sys && names;
	static const char *const wanted[] = {"ApproximateReceiveCount", "MessageGroupId",
	                                     "MessageDeduplicationId", NULL};
	for (int i = 0; ok && wanted[i]; i++)
		ok = json_object_array_add(sys, json_object_new_string(wanted[i])) == 0;
	ok = ok && json_object_array_add(names, json_object_new_string("All")) == 0;
	if (ok) {
		ok = !json_object_object_add(body, "MessageSystemAttributeNames", sys);
		sys = NULL;
	}
	if (ok) {
		ok = !json_object_object_add(body, "MessageAttributeNames", names);
		names = NULL;
	}
	ok = ok &&
	     !json_object_object_add(body, "MaxNumberOfMessages", json_object_new_int((int)max)) &&
	     !json_object_object_add(body, "WaitTimeSeconds", json_object_new_int(wait_s)) &&
	     !json_object_object_add(body, "VisibilityTimeout",
	                             json_object_new_int(c->t->visibility_s));
	json_object_put(sys);
	json_object_put(names);
	if (!ok) {
		json_object_put(body);
		return NULL;
	}
	return body;
}

/* One ReceiveMessage: each message handed out (while out has room and its group is free) or
 * held back. */
static int receive(aks_consumer *c, aks_message **out, size_t max, size_t *n, int wait_s,
                   aks_error **err)
{
	aks_transport_impl *t = c->t;
	size_t want = max - *n;
	json_object *body = receive_request(c, want > SQS_MAX_BATCH ? SQS_MAX_BATCH : want, wait_s);
	if (!body)
		return oom(c, err);
	aks_call rcall;
	sqs_request_call(t, NULL, (int64_t)wait_s * 1000, &rcall); /* not cancellable (above) */
	int64_t sent = t->host->now_ms();
	json_object *answer = NULL;
	aks_aws_fault fault;
	/* sent again only when it never left: a lost answer's messages come back after their
	 * visibility runs out, counted once more */
	int rc = sqs_call(t, c->qi, "receive messages", "ReceiveMessage", body,
	                  AKS_CLOUD_RETRY_UNSENT, &rcall, &answer, &fault, err);
	json_object_put(body);
	if (rc != AKS_OK)
		return rc;
	json_object *list = aks__jget(answer, "Messages");
	size_t count =
	    json_object_is_type(list, json_type_array) ? json_object_array_length(list) : 0;
	for (size_t i = 0; i < count; i++) {
		json_object *jm = json_object_array_get_idx(list, i);
		sqs_msg *m = NULL;
		aks_error *e = NULL;
		int d = sqs_decode(t->host, jm, &m, &e);
		if (d == AKS_EBROKER)
			drop_foreign(c, jm, t->host->error_message(e));
		t->host->error_free(e);
		if (d == AKS_ENOMEM) {
			rc = oom(c, err);
			break;
		}
		if (d != AKS_OK)
			continue;
		m->visible_at_ms = sent + (int64_t)t->visibility_s * 1000;
		sqs_hand_out_or_hold(&c->lists, m, out, max, n);
	}
	json_object_put(answer);
	return rc;
}

int sqs_fetch(aks_consumer *c, aks_message **out, size_t max, size_t *n, int64_t wait_ms,
              const aks_call *call, aks_error **err)
{
	aks_transport_impl *t = c->t;
	*n = 0;
	if (max == 0)
		return t->host->error_set(err, AKS_EINVAL, SQS_NAME ": fetch of no messages");
	/* held messages first: those whose group has nothing in flight now, their visibility
	 * topped up as they start */
	sqs_hand_out_held(&c->lists, out, max, n);
	for (size_t i = 0; i < *n; i++) {
		sqs_msg *m = (sqs_msg *)out[i];
		aks_error *e = NULL;
		if (keep_invisible(c, m, &e) != AKS_OK)
			t->host->log(AKS_LOG_WARNING, SQS_NAME,
			             "could not extend the visibility of held message %s: %s",
			             m->message_id ? m->message_id : "?",
			             t->host->error_message(e));
		t->host->error_free(e);
	}
	if (*n == max)
		return AKS_OK;
	/* A receive is never cut short: SQS may have handed it messages already, which an
	 * aborted request would leave invisible for the whole visibility timeout. So the wait is
	 * spent in long polls of at most a second, the cancellation looked at between them (a
	 * stopping worker waits a second at most). SQS waits in whole seconds: a wait under one
	 * polls once, then sleeps out the rest, which a cancellation does cut short. */
	int64_t start = t->host->now_ms(), end = start + (wait_ms > 0 ? wait_ms : 0);
	int rc = AKS_OK;
	do {
		int64_t left = end - t->host->now_ms();
		int wait_s = *n > 0 || left < 1000 ? 0 : 1;
		if ((rc = receive(c, out, max, n, wait_s, err)) != AKS_OK || *n > 0)
			return rc;
		if (call && t->host->cancelled(call))
			return AKS_OK; /* early, with what it has: nothing */
		left = end - t->host->now_ms();
		if (left > 0 && left < 1000) {
			aks_error *e = NULL;
			aks_cloud_pause(&t->cloud, call, (long)left, &e);
			t->host->error_free(e);
			return AKS_OK;
		}
	} while (end - t->host->now_ms() > 0);
	return rc;
}

/* Takes m off the in-flight list: AKS_EINVAL when it is not this consumer's. */
static int take(aks_consumer *c, aks_message *msg, sqs_msg **out, aks_error **err)
{
	sqs_msg *m = msg ? sqs_settle(&c->lists, msg) : NULL;
	if (!m)
		return c->t->host->error_set(err, AKS_EINVAL,
		                             SQS_NAME ": settling a message this consumer does not "
		                                      "hold");
	*out = m;
	return AKS_OK;
}

static int delete_msg(aks_consumer *c, sqs_msg *m, aks_error **err)
{
	aks_transport_impl *t = c->t;
	json_object *body = json_object_new_object(), *out = NULL;
	if (!body ||
	    json_object_object_add(body, "ReceiptHandle", json_object_new_string(m->receipt))) {
		json_object_put(body);
		return oom(c, err);
	}
	aks_call call;
	sqs_request_call(t, NULL, 0, &call);
	aks_aws_fault fault;
	aks_error *e = NULL;
	int rc = sqs_call(t, c->qi, "delete a message", "DeleteMessage", body, AKS_CLOUD_RETRY_SAFE,
	                  &call, &out, &fault, &e);
	json_object_put(body);
	json_object_put(out);
	if (rc != AKS_OK && (strcmp(fault.code, "ReceiptHandleIsInvalid") == 0 ||
	                     strcmp(fault.code, "InvalidParameterValue") == 0)) {
		t->host->error_free(e);
		return t->host->error_set(err, AKS_EBROKER,
		                          SQS_NAME
		                          ": message %s was settled after its visibility "
		                          "ran out (visibility_timeout %d s): it may be delivered "
		                          "again",
		                          m->message_id ? m->message_id : "?", t->visibility_s);
	}
	if (rc != AKS_OK) {
		if (err && !*err)
			*err = e;
		else
			t->host->error_free(e);
	}
	return rc;
}

int sqs_ack(aks_consumer *c, aks_message *msg, aks_error **err)
{
	sqs_msg *m = NULL;
	int rc = take(c, msg, &m, err);
	if (rc != AKS_OK)
		return rc;
	rc = delete_msg(c, m, err);
	sqs_msg_free(m);
	return rc;
}

int sqs_dead_letter(aks_consumer *c, aks_message *msg, aks_error **err)
{
	sqs_msg *m = NULL;
	int rc = take(c, msg, &m, err);
	if (rc != AKS_OK)
		return rc;
	/* the host has recorded the permanent failure; SQS's own dead-letter queue (a redrive
	 * policy on the queue) is for messages a worker never settles */
	c->t->host->log(AKS_LOG_WARNING, SQS_NAME,
	                "message %s failed for good after %u deliveries: deleted from the %s "
	                "queue",
	                m->message_id ? m->message_id : "?", m->m.receive_count,
	                c->t->q[c->qi].name);
	rc = delete_msg(c, m, err);
	sqs_msg_free(m);
	return rc;
}

int sqs_nack(aks_consumer *c, aks_message *msg, double delay_s, aks_error **err)
{
	sqs_msg *m = NULL;
	int rc = take(c, msg, &m, err);
	if (rc != AKS_OK)
		return rc;
	if (!(delay_s > 0))
		delay_s = c->t->retry_backoff;
	double d = ceil(delay_s);
	int seconds = d > SQS_MAX_VISIBILITY ? SQS_MAX_VISIBILITY : (int)d;
	rc = set_visibility(c, m, seconds, NULL, err);
	/* the group's held messages go too, so that this one, the oldest, comes back first */
	for (sqs_msg *h = sqs_release_group(&c->lists, m), *next; h; h = next) {
		next = h->next;
		release(c, h);
	}
	sqs_msg_free(m);
	return rc;
}

int sqs_in_progress(aks_consumer *c, aks_message *msg, aks_error **err)
{
	sqs_msg *m = (sqs_msg *)msg;
	if (!sqs_holds(&c->lists, msg))
		return c->t->host->error_set(err, AKS_EINVAL,
		                             SQS_NAME ": in_progress of a message this consumer "
		                                      "does not hold");
	int rc = keep_invisible(c, m, err);
	/* held messages wait behind it: keep them invisible too */
	for (sqs_msg *h = c->lists.held; h && rc == AKS_OK; h = h->next) {
		aks_error *e = NULL;
		if (keep_invisible(c, h, &e) != AKS_OK)
			c->t->host->log(AKS_LOG_WARNING, SQS_NAME,
			                "could not extend the visibility of held message %s: %s",
			                h->message_id ? h->message_id : "?",
			                c->t->host->error_message(e));
		c->t->host->error_free(e);
	}
	return rc;
}

void sqs_consumer_close(aks_consumer *c)
{
	if (!c)
		return;
	/* unsettled and held messages are let go at once rather than after their visibility */
	for (sqs_msg *m = c->lists.inflight, *next; m; m = next) {
		next = m->next;
		release(c, m);
	}
	for (sqs_msg *m = sqs_release_held(&c->lists), *next; m; m = next) {
		next = m->next;
		release(c, m);
	}
	free(c);
}
