/*
 * plugins/nats/provision.c - the JetStream objects the transport needs: one
 * stream per queue and one durable pull consumer per partition. With
 * auto_provision they are created when missing; without it a missing one is
 * an error saying how to create it. An existing durable that would break the
 * one-in-flight-per-group guarantee (MaxAckPending other than 1, another
 * filter subject, no explicit acks) is always an error.
 */
#include <stdio.h>
#include <string.h>

#include "nats_internal.h"

#define NS_PER_S 1000000000.0

static int64_t seconds_ns(double s)
{
	return (int64_t)(s * NS_PER_S);
}

/* JetStream missing altogether answers "no responders" or "not enabled". */
static bool jetstream_missing(natsStatus s, jsErrCode code)
{
	return s == NATS_NO_RESPONDERS || code == JSNotEnabledErr ||
	       code == JSNotEnabledForAccountErr;
}

static int jetstream_error(aks_transport_impl *t, aks_error **err)
{
	return t->host->error_set(err, AKS_EBROKER,
	                          NT_NAME
	                          ": JetStream is not enabled on the NATS server at %s "
	                          "(start nats-server with -js, or enable jetstream in its config)",
	                          t->url);
}

static int ensure_stream(aks_transport_impl *t, struct nt_queue *q, aks_error **err)
{
	const aks_host_api *h = t->host;
	jsStreamInfo *si = NULL;
	jsErrCode code = 0;
	jsOptions jo;
	jsOptions_Init(&jo);
	jo.Wait = nt_request_ms(t);
	natsStatus s = js_GetStreamInfo(&si, t->js, q->stream, &jo, &code);
	if (s == NATS_OK) {
		if (si && si->Config &&
		    si->Config->Duplicates < seconds_ns(t->duplicate_window) / 2)
			h->log(
			    AKS_LOG_WARNING, NT_NAME,
			    "stream %s de-duplicates over %.0f s only (duplicate_window is %g s)",
			    q->stream, (double)si->Config->Duplicates / NS_PER_S,
			    t->duplicate_window);
		jsStreamInfo_Destroy(si);
		return AKS_OK;
	}
	if (jetstream_missing(s, code))
		return jetstream_error(t, err);
	if (code != JSStreamNotFoundErr && s != NATS_NOT_FOUND)
		return h->error_set(err, AKS_EBROKER,
		                    NT_NAME ": cannot look up stream %s on %s: %s", q->stream,
		                    t->url, nt_error_text(s));
	if (!t->auto_provision)
		return h->error_set(
		    err, AKS_EBROKER,
		    NT_NAME
		    ": the %s queue's stream %s does not exist on %s; create it (nats stream "
		    "add %s --subjects '%s.>' --storage file --retention work --dupe-window "
		    "%gs --max-age %gs --defaults) or set auto_provision: true",
		    q->name, q->stream, t->url, q->stream, q->prefix, t->duplicate_window,
		    t->max_age);

	char subject[512];
	snprintf(subject, sizeof(subject), "%s.>", q->prefix);
	const char *subjects[] = {subject};
	jsStreamConfig sc;
	jsStreamConfig_Init(&sc);
	sc.Name = q->stream;
	sc.Subjects = subjects;
	sc.SubjectsLen = 1;
	sc.Storage = js_FileStorage;
	/* Work queue: a message is removed once acked (or terminated); every
	 * durable filters its own partition, which a work queue requires. */
	sc.Retention = js_WorkQueuePolicy;
	sc.Duplicates = seconds_ns(t->duplicate_window);
	sc.MaxAge = seconds_ns(t->max_age);
	code = 0;
	s = js_AddStream(&si, t->js, &sc, &jo, &code);
	if (s != NATS_OK && code != JSStreamNameExistErr)
		return h->error_set(err, AKS_EBROKER, NT_NAME ": cannot create stream %s on %s: %s",
		                    q->stream, t->url, nt_error_text(s));
	jsStreamInfo_Destroy(si);
	h->log(AKS_LOG_INFO, NT_NAME, "created stream %s (subjects %s)", q->stream, subject);
	return AKS_OK;
}

int nt_ensure_streams(aks_transport_impl *t, aks_error **err)
{
	for (int i = 0; i < NT_QUEUES; i++) {
		int rc = ensure_stream(t, &t->q[i], err);
		if (rc < 0)
			return rc;
	}
	return AKS_OK;
}

/* An existing durable must hold the properties the guarantees rest on. */
static int check_consumer(aks_transport_impl *t, const struct nt_queue *q, const char *durable,
                          const char *filter, const jsConsumerInfo *ci, aks_error **err)
{
	const jsConsumerConfig *cc = ci ? ci->Config : NULL;
	if (!cc)
		return AKS_OK;
	const char *why = NULL;
	if (cc->MaxAckPending != 1)
		why = "max_ack_pending must be 1 (one message in flight per partition)";
	else if (!cc->FilterSubject || strcmp(cc->FilterSubject, filter) != 0)
		why = "its filter subject must be the partition subject";
	else if (cc->AckPolicy != js_AckExplicit)
		why = "its ack policy must be explicit";
	else if (cc->DeliverSubject && *cc->DeliverSubject)
		why = "it must be a pull consumer";
	if (why)
		return t->host->error_set(err, AKS_EBROKER,
		                          NT_NAME
		                          ": consumer %s of stream %s on %s does not fit: %s "
		                          "(filter %s); delete it, or let auto_provision create it",
		                          durable, q->stream, t->url, why, filter);
	if (cc->AckWait != seconds_ns(t->ack_wait))
		t->host->log(AKS_LOG_WARNING, NT_NAME,
		             "consumer %s redelivers after %g s, not ack_wait %g s", durable,
		             (double)cc->AckWait / NS_PER_S, t->ack_wait);
	return AKS_OK;
}

static int ensure_consumer(aks_transport_impl *t, struct nt_queue *q, unsigned p, aks_error **err)
{
	const aks_host_api *h = t->host;
	char durable[300], filter[512];
	nt_durable_name(q, p, durable, sizeof(durable));
	snprintf(filter, sizeof(filter), "%s.%u", q->prefix, p);
	jsOptions jo;
	jsOptions_Init(&jo);
	jo.Wait = nt_request_ms(t);
	jsConsumerInfo *ci = NULL;
	jsErrCode code = 0;
	natsStatus s = js_GetConsumerInfo(&ci, t->js, q->stream, durable, &jo, &code);
	if (s == NATS_OK) {
		int rc = check_consumer(t, q, durable, filter, ci, err);
		jsConsumerInfo_Destroy(ci);
		return rc;
	}
	if (jetstream_missing(s, code))
		return jetstream_error(t, err);
	if (code == JSStreamNotFoundErr)
		return h->error_set(err, AKS_EBROKER, NT_NAME ": stream %s vanished from %s",
		                    q->stream, t->url);
	if (code != JSConsumerNotFoundErr && s != NATS_NOT_FOUND)
		return h->error_set(err, AKS_EBROKER,
		                    NT_NAME ": cannot look up consumer %s of stream %s on %s: %s",
		                    durable, q->stream, t->url, nt_error_text(s));
	if (!t->auto_provision)
		return h->error_set(
		    err, AKS_EBROKER,
		    NT_NAME
		    ": consumer %s of stream %s does not exist on %s; create one durable pull "
		    "consumer per partition (nats consumer add %s %s --pull --filter %s --ack "
		    "explicit --max-pending 1 --wait %gs --deliver all --max-deliver=-1 "
		    "--replay instant --defaults, for partitions 0..%u) or set "
		    "auto_provision: true",
		    durable, q->stream, t->url, q->stream, durable, filter, t->ack_wait,
		    t->partitions - 1);

	jsConsumerConfig cc;
	jsConsumerConfig_Init(&cc);
	cc.Durable = durable;
	cc.AckPolicy = js_AckExplicit;
	cc.AckWait = seconds_ns(t->ack_wait);
	cc.MaxAckPending = 1; /* the whole per-group guarantee */
	cc.FilterSubject = filter;
	cc.DeliverPolicy = js_DeliverAll;
	cc.MaxDeliver = -1; /* the host counts deliveries (max_receive_count) */
	code = 0;
	s = js_AddConsumer(&ci, t->js, q->stream, &cc, &jo, &code);
	if (s != NATS_OK)
		return h->error_set(err, AKS_EBROKER,
		                    NT_NAME ": cannot create consumer %s of stream %s on %s: %s",
		                    durable, q->stream, t->url, nt_error_text(s));
	/* Another process may have created it first with other settings. */
	int rc = check_consumer(t, q, durable, filter, ci, err);
	jsConsumerInfo_Destroy(ci);
	return rc;
}

int nt_ensure_consumers(aks_transport_impl *t, struct nt_queue *q, aks_error **err)
{
	pthread_mutex_lock(&t->lock);
	int rc = AKS_OK;
	for (unsigned p = 0; !q->consumers_ok && p < t->partitions && rc == AKS_OK; p++)
		rc = ensure_consumer(t, q, p, err);
	if (rc == AKS_OK && !q->consumers_ok) {
		q->consumers_ok = true;
		if (t->auto_provision)
			t->host->log(AKS_LOG_DEBUG, NT_NAME, "%u durable consumers of %s ready",
			             t->partitions, q->stream);
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}
