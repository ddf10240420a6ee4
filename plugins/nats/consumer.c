/*
 * plugins/nats/consumer.c - consumers: fetch and settlement.
 *
 * A consumer (one per host thread) pulls from the durable of every partition
 * in turn, round-robin, one message at a time. Each pull is a JetStream "next
 * message" request for a batch of 1 with no_wait and a short expiry, sent to
 * a reply subject unique to that request on the consumer's own inbox; the
 * consumer waits for that request's one answer (a message, or a 404/408
 * status) before it sends the next. So a request never outlives its wait
 * (none can deliver into a consumer that is busy elsewhere) and a consumer
 * never holds messages the host has not asked for. The server gives each
 * partition's durable at most one unacked message (MaxAckPending 1): that,
 * not anything here, is what keeps one group to one message in flight across
 * every process.
 *
 * A delivery arrives under the message's own subject, not the request's reply
 * subject, so it cannot be matched to its request by subject: it is the
 * answer to the one request outstanding on the inbox. nats-server 2.9 also
 * drops, without a word, a request that expired while its partition was busy
 * when a message becomes available (nextWaiting), so an answer is awaited for
 * the expiry plus NT_ANSWER_GRACE_MS only. A consumer that gives up on a
 * request retires that inbox and subscribes a fresh one, so a late answer can
 * never be taken for the answer to a later request. A retired inbox stays
 * subscribed for a while: a message that still arrives there (the server was
 * merely slow) was delivered to this consumer, so the next fetch hands it out
 * first, after resetting its ack timer (+WPI), while it is young enough that
 * the ack wait cannot have run out; an older one is left to redelivery.
 *
 * The libnats pull-subscription API is not used because it abandons a request
 * at its client-side timeout and keeps the subscription, so a late delivery
 * lands in a later fetch, and because each of its subscriptions binds one
 * durable. Acks are therefore sent by hand to the message's reply subject
 * ($JS.ACK...), which is what natsMsg_Ack does too.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "aks_buf.h"
#include "nats_codec.h"
#include "nats_internal.h"

/* How long the server may hold a pull request on an empty or busy partition.
 * With no expiry a request on a busy partition would stay queued until the
 * partition frees up (and deliver then, to a consumer perhaps busy
 * elsewhere); with a long one each busy partition would stall the scan. */
#define NT_PULL_EXPIRES_NS 1000000LL
/* How long past the expiry an answer may take before the request counts as
 * silently dropped (see above). Giving up on a request that was only slow
 * costs little: its answer is collected from the retired inbox. */
#define NT_ANSWER_GRACE_MS 250
/* The pause between two scans that found nothing: doubles from the first to
 * the last while the queue stays idle, back to the first after a message. */
#define NT_IDLE_FIRST_MS 1
#define NT_IDLE_MAX_MS   32

struct nt_msg {
	aks_message m; /* first: the host's pointer is ours */
	natsMsg *nm;
	char **attrs; /* NULL-terminated key, value pairs */
	char *group;
	char *dedup;
	char id[24];
	struct nt_msg *next;
};

/* An inbox given up on (see above), kept to collect late deliveries. */
struct nt_retired {
	natsSubscription *sub;
	natsInbox *inbox;
	int64_t at_ms;
};
#define NT_RETIRED_MAX 4

struct aks_consumer {
	aks_transport_impl *t;
	struct nt_retired retired[NT_RETIRED_MAX]; /* oldest first */
	unsigned nretired;
	struct nt_queue *q;
	natsInbox *inbox;
	natsSubscription *sub;
	char **next_subject; /* per partition: $JS.API.CONSUMER.MSG.NEXT.<stream>.<durable> */
	unsigned rr;
	uint64_t seq;
	int64_t idle_ms;         /* the next pause between empty scans */
	unsigned char *nonempty; /* per partition: the stream holds messages of it */
	struct nt_msg *held;     /* handed to the host, not yet settled */
	int bell_fd;             /* readable on a bell of the queue (bell.c); -1: none */
};

/* ---- open and close ------------------------------------------------------------ */

static void free_msg(struct nt_msg *w)
{
	if (!w)
		return;
	aks__strv_free(w->attrs);
	free(w->group);
	free(w->dedup);
	natsMsg_Destroy(w->nm);
	free(w);
}

static bool is_delivery(natsMsg *m)
{
	const char *reply = natsMsg_GetReply(m);
	return reply && strncmp(reply, "$JS.ACK.", 8) == 0;
}

static void unsubscribe(natsSubscription *sub, natsInbox *inbox)
{
	if (sub) {
		natsSubscription_Unsubscribe(sub);
		natsSubscription_Destroy(sub);
	}
	natsInbox_Destroy(inbox);
}

/* Whether a delivery into retired inbox r may still be acted upon: it was
 * delivered at most the grace period before r was retired, so while this
 * holds its ack wait has not run out and no other copy can be in flight.
 * (JetStream settles by stream sequence: a settle of a stale copy would
 * settle the live one.) */
static bool retired_young(const aks_consumer *c, const struct nt_retired *r)
{
	int64_t age = c->t->host->now_ms() - r->at_ms + NT_ANSWER_GRACE_MS;
	return (double)age < c->t->ack_wait * 500.0;
}

/* Gives back, at once, what reached a retired inbox and was never handed
 * out (while that is still safe), then drops the inbox. */
static void drop_retired(aks_consumer *c, unsigned i)
{
	struct nt_retired *r = &c->retired[i];
	natsMsg *m = NULL;
	bool young = retired_young(c, r);
	while (natsSubscription_NextMsg(&m, r->sub, 0) == NATS_OK) {
		if (young && is_delivery(m))
			natsConnection_PublishString(c->t->nc, natsMsg_GetReply(m), "-NAK");
		natsMsg_Destroy(m);
	}
	unsubscribe(r->sub, r->inbox);
	memmove(&c->retired[i], &c->retired[i + 1], (c->nretired - i - 1) * sizeof(c->retired[0]));
	c->nretired--;
}

/* A fresh inbox "<_INBOX.nuid>.*"; each request answers on "<inbox>.<seq>".
 * The current one, if any, is retired. */
static natsStatus new_inbox(aks_consumer *c)
{
	if (c->sub) {
		if (c->nretired == NT_RETIRED_MAX)
			drop_retired(c, 0);
		c->retired[c->nretired++] =
		    (struct nt_retired){c->sub, c->inbox, c->t->host->now_ms()};
		c->sub = NULL;
		c->inbox = NULL;
	}
	char subject[256];
	natsStatus s = natsInbox_Create(&c->inbox);
	if (s == NATS_OK) {
		snprintf(subject, sizeof(subject), "%s.*", (const char *)c->inbox);
		s = natsConnection_SubscribeSync(&c->sub, c->t->nc, subject);
	}
	if (s == NATS_OK)
		s = natsSubscription_SetPendingLimits(c->sub, -1, -1);
	if (s != NATS_OK) {
		unsubscribe(c->sub, c->inbox);
		c->sub = NULL;
		c->inbox = NULL;
	}
	return s;
}

static void free_consumer(aks_consumer *c)
{
	if (!c)
		return;
	while (c->held) {
		struct nt_msg *w = c->held;
		c->held = w->next;
		free_msg(w);
	}
	while (c->nretired)
		drop_retired(c, 0);
	unsubscribe(c->sub, c->inbox);
	nt_bell_leave(c->q, c->bell_fd);
	for (unsigned p = 0; c->next_subject && p < c->t->partitions; p++)
		free(c->next_subject[p]);
	free(c->next_subject);
	free(c->nonempty);
	free(c);
}

int nt_consumer_open(aks_transport_impl *t, const char *queue, aks_consumer **out, aks_error **err)
{
	const aks_host_api *h = t->host;
	int qi = nt_queue_index(queue);
	if (qi < 0)
		return h->error_set(err, AKS_EINVAL, NT_NAME ": unknown queue '%s'",
		                    queue ? queue : "(null)");
	int rc = nt_ensure_consumers(t, &t->q[qi], err);
	if (rc < 0)
		return rc;
	aks_consumer *c = calloc(1, sizeof(*c));
	if (!c)
		return h->error_set(err, AKS_ENOMEM, "out of memory");
	c->t = t;
	c->q = &t->q[qi];
	c->bell_fd = -1;
	c->idle_ms = NT_IDLE_FIRST_MS;
	c->nonempty = calloc(t->partitions, 1);
	c->next_subject = calloc(t->partitions, sizeof(*c->next_subject));
	for (unsigned p = 0; c->next_subject && p < t->partitions; p++) {
		char durable[300];
		nt_durable_name(c->q, p, durable, sizeof(durable));
		size_t len = strlen(durable) + strlen(c->q->stream) + 64;
		if ((c->next_subject[p] = malloc(len)))
			snprintf(c->next_subject[p], len, "$JS.API.CONSUMER.MSG.NEXT.%s.%s",
			         c->q->stream, durable);
		else
			break;
	}
	if (!c->nonempty || !c->next_subject || !c->next_subject[t->partitions - 1]) {
		free_consumer(c);
		return h->error_set(err, AKS_ENOMEM, "out of memory");
	}
	natsStatus s = new_inbox(c);
	if (s != NATS_OK) {
		rc = h->error_set(err, AKS_EBROKER, NT_NAME ": cannot subscribe on %s: %s", t->url,
		                  nt_error_text(s));
		free_consumer(c);
		return rc;
	}
	c->bell_fd = nt_bell_join(t, c->q);
	/* Consumers start at different partitions, so that an idle fleet does not
	 * probe the partitions in lockstep. */
	c->rr = aks_nats_fnv1a((const char *)c->inbox) % t->partitions;
	*out = c;
	return AKS_OK;
}

void nt_consumer_close(aks_consumer *c)
{
	free_consumer(c);
}

/* ---- one pull ------------------------------------------------------------------------ */

/* Pulls at most one message from partition p: 1 with *out set, 0 when the
 * partition had none to give (empty, or its one message is in flight). */
static int pull_one(aks_consumer *c, unsigned p, natsMsg **out, aks_error **err)
{
	aks_transport_impl *t = c->t;
	const aks_host_api *h = t->host;
	if (natsConnection_Status(t->nc) != NATS_CONN_STATUS_CONNECTED)
		return h->error_set(
		    err, AKS_EBROKER,
		    NT_NAME ": not connected to the NATS server at %s (reconnecting)", t->url);
	natsStatus s = c->sub ? NATS_OK : new_inbox(c);
	if (s != NATS_OK)
		return h->error_set(err, AKS_EBROKER, NT_NAME ": cannot subscribe on %s: %s",
		                    t->url, nt_error_text(s));
	char reply[256], body[96];
	snprintf(reply, sizeof(reply), "%s.%llu", (const char *)c->inbox,
	         (unsigned long long)++c->seq);
	int len = snprintf(body, sizeof(body), "{\"batch\":1,\"expires\":%lld,\"no_wait\":true}",
	                   NT_PULL_EXPIRES_NS);
	s = natsConnection_PublishRequest(t->nc, c->next_subject[p], reply, body, len);
	if (s != NATS_OK)
		return h->error_set(err, AKS_EBROKER, NT_NAME ": pull request to %s failed: %s",
		                    t->url, nt_error_text(s));
	int64_t deadline = h->now_ms() + NT_PULL_EXPIRES_NS / 1000000 + NT_ANSWER_GRACE_MS;
	for (;;) {
		int64_t left = deadline - h->now_ms();
		natsMsg *m = NULL;
		s = left > 0 ? natsSubscription_NextMsg(&m, c->sub, left) : NATS_TIMEOUT;
		if (s == NATS_TIMEOUT) {
			/* Dropped by the server, or late: never reuse an inbox a late
			 * answer may still reach. */
			s = new_inbox(c);
			if (s != NATS_OK)
				return h->error_set(err, AKS_EBROKER,
				                    NT_NAME ": cannot renew the inbox on %s: %s",
				                    t->url, nt_error_text(s));
			return 0;
		}
		if (s != NATS_OK)
			return h->error_set(err, AKS_EBROKER,
			                    NT_NAME ": pull on %s from %s failed: %s", c->q->stream,
			                    t->url, nt_error_text(s));
		if (is_delivery(m)) {
			*out = m;
			return 1;
		}
		/* Statuses do come on the reply subject; an older one is stale. */
		if (strcmp(natsMsg_GetSubject(m), reply) != 0) {
			natsMsg_Destroy(m);
			continue;
		}
		const char *status = NULL, *desc = NULL;
		natsMsgHeader_Get(m, "Status", &status);
		natsMsgHeader_Get(m, "Description", &desc);
		/* 404 no messages, 408 expired or requests pending: nothing here. */
		if (status && strcmp(status, "404") != 0 && strcmp(status, "408") != 0)
			h->log(AKS_LOG_DEBUG, NT_NAME, "pull on %s: %s %s", c->next_subject[p],
			       status, desc ? desc : "");
		natsMsg_Destroy(m);
		return 0;
	}
}

/* ---- messages ----------------------------------------------------------------------- */

static char *header_value(natsMsg *m, const char *name)
{
	const char *v = NULL;
	if (natsMsgHeader_Get(m, name, &v) != NATS_OK || !v)
		return NULL;
	char *out = aks_nats_unescape_value(v);
	/* A foreign publisher's value, not escaped by us: keep it as it came. */
	return out ? out : strdup(v);
}

static int compare_pairs(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The attributes: every Aks-Attr-* header, unescaped, sorted by key. */
static int read_attributes(struct nt_msg *w)
{
	const char **keys = NULL;
	int count = 0;
	natsStatus s = natsMsgHeader_Keys(w->nm, &keys, &count);
	if (s == NATS_NOT_FOUND || count == 0) {
		free((void *)keys);
		return (w->attrs = calloc(1, sizeof(char *))) ? 0 : -1;
	}
	if (s != NATS_OK)
		return -1;
	size_t plen = strlen(AKS_NATS_ATTR_PREFIX), n = 0;
	w->attrs = calloc((size_t)count * 2 + 1, sizeof(char *));
	for (int i = 0; w->attrs && i < count; i++) {
		if (strncasecmp(keys[i], AKS_NATS_ATTR_PREFIX, plen) != 0)
			continue;
		char *key = aks_nats_unescape(keys[i] + plen);
		char *value = key ? header_value(w->nm, keys[i]) : NULL;
		if (!key || !value) {
			free(key);
			free(value);
			continue;
		}
		w->attrs[n++] = key;
		w->attrs[n++] = value;
	}
	free((void *)keys);
	if (!w->attrs)
		return -1;
	qsort(w->attrs, n / 2, 2 * sizeof(char *), compare_pairs);
	return 0;
}

static int wrap(aks_consumer *c, natsMsg *m, aks_message **out, aks_error **err)
{
	const aks_host_api *h = c->t->host;
	struct nt_msg *w = calloc(1, sizeof(*w));
	jsMsgMetaData *meta = NULL;
	if (!w) {
		natsMsg_Destroy(m);
		return h->error_set(err, AKS_ENOMEM, "out of memory");
	}
	w->nm = m;
	natsStatus s = natsMsg_GetMetaData(&meta, m);
	if (s != NATS_OK || read_attributes(w) < 0) {
		free_msg(w);
		jsMsgMetaData_Destroy(meta);
		return h->error_set(err, AKS_EBROKER,
		                    NT_NAME ": cannot read a delivered message: %s",
		                    s != NATS_OK ? nt_error_text(s) : "out of memory");
	}
	w->group = header_value(m, AKS_NATS_HDR_GROUP);
	w->dedup = header_value(m, AKS_NATS_HDR_DEDUP);
	snprintf(w->id, sizeof(w->id), "%llu", (unsigned long long)meta->Sequence.Stream);
	w->m.struct_version = AKS_MESSAGE_VERSION;
	w->m.struct_size = sizeof(aks_message);
	w->m.body = natsMsg_GetData(m);
	w->m.body_len = (size_t)natsMsg_GetDataLength(m);
	if (!w->m.body)
		w->m.body = "";
	w->m.attributes = (const char *const *)w->attrs;
	w->m.group_id = w->group;
	w->m.dedup_id = w->dedup;
	w->m.receive_count =
	    meta->NumDelivered > UINT32_MAX ? UINT32_MAX : (uint32_t)meta->NumDelivered;
	w->m.message_id = w->id;
	jsMsgMetaData_Destroy(meta);
	w->next = c->held;
	c->held = w;
	*out = &w->m;
	return AKS_OK;
}

/* Sleeps up to ms, waking early on a bell of the queue (a message was sent,
 * see bell.c) or on cancellation. poll ignores a negative fd. */
static void idle_wait(aks_consumer *c, int64_t ms, const aks_call *call)
{
	const aks_host_api *h = c->t->host;
	struct pollfd pfd[2] = {{.fd = c->bell_fd, .events = POLLIN},
	                        {.fd = call ? h->cancel_fd(call) : -1, .events = POLLIN}};
	poll(pfd, 2, (int)ms);
}

/*
 * Marks the partitions worth a pull: those whose subject holds messages in the
 * stream (one stream-info request with a subjects filter, instead of a pull
 * on every empty partition). In a work-queue stream, which auto_provision
 * creates, acked and terminated messages are gone, so an empty subject has
 * nothing to deliver. The mark is only a hint: when the request fails, or
 * the stream keeps acked messages (limits retention), every partition is
 * pulled, which is slower but just as correct. Returns how many are marked.
 *
 * The request waits no longer than the fetch would (deadline_ms; at least the
 * grace a pull's answer gets), not request_timeout: a server that stops
 * while the request is out leaves it unanswered (libnats fails a request
 * only at its timeout, even while reconnecting), and a fetch, or a worker's
 * stop waiting for it, must not hang on a hint for ten seconds.
 */
static unsigned mark_nonempty(aks_consumer *c, int64_t deadline_ms)
{
	aks_transport_impl *t = c->t;
	char filter[512];
	snprintf(filter, sizeof(filter), "%s.*", c->q->prefix);
	int64_t wait = deadline_ms - t->host->now_ms();
	if (wait < NT_ANSWER_GRACE_MS)
		wait = NT_ANSWER_GRACE_MS;
	if (wait > nt_request_ms(t))
		wait = nt_request_ms(t);
	jsOptions jo;
	jsOptions_Init(&jo);
	jo.Wait = wait;
	jo.Stream.Info.SubjectsFilter = filter;
	jsStreamInfo *si = NULL;
	jsErrCode code = 0;
	natsStatus s = js_GetStreamInfo(&si, t->js, c->q->stream, &jo, &code);
	if (s != NATS_OK || !si) {
		memset(c->nonempty, 1, t->partitions);
		return t->partitions;
	}
	memset(c->nonempty, 0, t->partitions);
	unsigned marked = 0;
	size_t plen = strlen(c->q->prefix);
	for (int i = 0; si->State.Subjects && i < si->State.Subjects->Count; i++) {
		const jsStreamStateSubject *e = &si->State.Subjects->List[i];
		char *end = NULL;
		if (!e->Subject || e->Msgs == 0 || strncmp(e->Subject, c->q->prefix, plen) != 0 ||
		    e->Subject[plen] != '.')
			continue;
		unsigned long p = strtoul(e->Subject + plen + 1, &end, 10);
		if (*end || p >= t->partitions || c->nonempty[p])
			continue;
		c->nonempty[p] = 1;
		marked++;
	}
	jsStreamInfo_Destroy(si);
	return marked;
}

/* Late deliveries into retired inboxes, first. One is safe to hand out while
 * its ack timer cannot have run out: it was delivered at most the grace
 * period before its inbox was retired. */
static int take_late(aks_consumer *c, aks_message **out, size_t max, size_t *n, aks_error **err)
{
	aks_transport_impl *t = c->t;
	for (unsigned i = 0; i < c->nretired;) {
		struct nt_retired *r = &c->retired[i];
		bool young = retired_young(c, r);
		natsMsg *m = NULL;
		while (*n < max && natsSubscription_NextMsg(&m, r->sub, 0) == NATS_OK) {
			if (!is_delivery(m) || !young) {
				natsMsg_Destroy(m); /* a status, or left to redelivery */
				continue;
			}
			natsConnection_PublishString(t->nc, natsMsg_GetReply(m), "+WPI");
			int rc = wrap(c, m, &out[*n], err);
			if (rc < 0)
				return rc;
			(*n)++;
		}
		/* Nothing that arrives from now on could be used. */
		if (!young)
			drop_retired(c, i);
		else
			i++;
	}
	return AKS_OK;
}

int nt_fetch(aks_consumer *c, aks_message **out, size_t max, size_t *n, int64_t wait_ms,
             const aks_call *call, aks_error **err)
{
	aks_transport_impl *t = c->t;
	const aks_host_api *h = t->host;
	if (!out || !n || max < 1)
		return h->error_set(err, AKS_EINVAL, NT_NAME ": fetch: bad arguments");
	*n = 0;
	int64_t deadline = h->now_ms() + (wait_ms > 0 ? wait_ms : 0);
	int rc;
	for (;;) {
		/* Bells rung before this scan are answered by it; one rung from now
		 * on ends the wait after it. */
		nt_bell_clear(c->bell_fd);
		rc = take_late(c, out, max, n, err);
		if (rc < 0 || *n > 0)
			return *n > 0 ? AKS_OK : rc;
		if (natsConnection_Status(t->nc) != NATS_CONN_STATUS_CONNECTED)
			return h->error_set(err, AKS_EBROKER,
			                    NT_NAME ": not connected to the NATS server at %s "
			                            "(reconnecting)",
			                    t->url);
		unsigned todo = mark_nonempty(c, deadline);
		for (unsigned i = 0; i < t->partitions && todo > 0 && *n < max; i++) {
			if (call && h->cancelled(call))
				return AKS_OK;
			unsigned p = c->rr;
			c->rr = (c->rr + 1) % t->partitions;
			if (!c->nonempty[p])
				continue;
			todo--;
			natsMsg *m = NULL;
			rc = pull_one(c, p, &m, err);
			if (rc == 1)
				rc = wrap(c, m, &out[*n], err);
			if (rc < 0)
				return *n > 0 ? AKS_OK
				              : rc; /* keep what was fetched; the error recurs */
			if (rc == AKS_OK && m)
				(*n)++;
		}
		if (*n > 0) {
			c->idle_ms = NT_IDLE_FIRST_MS;
			return AKS_OK;
		}
		if (call && h->cancelled(call))
			return AKS_OK;
		int64_t left = deadline - h->now_ms();
		if (left <= 0)
			return AKS_OK;
		idle_wait(c, left < c->idle_ms ? left : c->idle_ms, call);
		if (c->idle_ms < NT_IDLE_MAX_MS)
			c->idle_ms *= 2;
	}
}

/* ---- settlement --------------------------------------------------------------------- */

/* Unlinks msg from the consumer's held list; NULL if it is not one of ours. */
static struct nt_msg *take_held(aks_consumer *c, aks_message *msg)
{
	for (struct nt_msg **pp = &c->held; *pp; pp = &(*pp)->next)
		if (&(*pp)->m == msg) {
			struct nt_msg *w = *pp;
			*pp = w->next;
			return w;
		}
	return NULL;
}

/* Sends one ack-protocol body to the message's reply subject and waits for
 * the server's confirmation (AckSync), then frees the message. */
static int settle(aks_consumer *c, aks_message *msg, const char *body, const char *what,
                  aks_error **err)
{
	aks_transport_impl *t = c->t;
	const aks_host_api *h = t->host;
	struct nt_msg *w = msg ? take_held(c, msg) : NULL;
	if (!w)
		return h->error_set(err, AKS_EINVAL,
		                    NT_NAME ": %s: not an unsettled message of this consumer",
		                    what);
	natsMsg *reply = NULL;
	natsStatus s = natsConnection_RequestString(&reply, t->nc, natsMsg_GetReply(w->nm), body,
	                                            nt_request_ms(t));
	natsMsg_Destroy(reply);
	int rc = AKS_OK;
	if (s != NATS_OK)
		rc = h->error_set(err, AKS_EBROKER,
		                  NT_NAME
		                  ": %s of message %s (stream %s) on %s failed: %s; it will be "
		                  "redelivered after ack_wait",
		                  what, w->id, c->q->stream, t->url, nt_error_text(s));
	free_msg(w);
	return rc;
}

int nt_ack(aks_consumer *c, aks_message *msg, aks_error **err)
{
	return settle(c, msg, "+ACK", "ack", err);
}

int nt_nack(aks_consumer *c, aks_message *msg, double delay_s, aks_error **err)
{
	if (!(delay_s > 0))
		delay_s = c->t->retry_backoff;
	if (delay_s > 1e9)
		delay_s = 1e9;
	char body[64] = "-NAK";
	if (delay_s > 0)
		snprintf(body, sizeof(body), "-NAK {\"delay\":%lld}", (long long)(delay_s * 1e9));
	return settle(c, msg, body, "nack", err);
}

int nt_dead_letter(aks_consumer *c, aks_message *msg, aks_error **err)
{
	bool ours = false;
	for (struct nt_msg *w = c->held; w && !ours; w = w->next)
		ours = &w->m == msg;
	if (ours)
		c->t->host->log(AKS_LOG_WARNING, NT_NAME,
		                "message %s of stream %s (group %s) dead-lettered after %u "
		                "deliveries: terminated, never redelivered",
		                msg->message_id ? msg->message_id : "?", c->q->stream,
		                msg->group_id ? msg->group_id : "-", msg->receive_count);
	return settle(c, msg, "+TERM", "dead_letter", err);
}

/* Restarts the ack wait of a message still being worked on (+WPI); it stays unsettled. */
int nt_in_progress(aks_consumer *c, aks_message *msg, aks_error **err)
{
	aks_transport_impl *t = c->t;
	struct nt_msg *w = c->held;
	while (w && &w->m != msg)
		w = w->next;
	if (!w)
		return t->host->error_set(err, AKS_EINVAL,
		                          NT_NAME ": in_progress: not an unsettled message of this "
		                                  "consumer");
	natsMsg *reply = NULL;
	natsStatus s = natsConnection_RequestString(&reply, t->nc, natsMsg_GetReply(w->nm), "+WPI",
	                                            nt_request_ms(t));
	natsMsg_Destroy(reply);
	if (s != NATS_OK)
		return t->host->error_set(err, AKS_EBROKER,
		                          NT_NAME ": in_progress of message %s (stream %s) on %s "
		                                  "failed: %s",
		                          w->id, c->q->stream, t->url, nt_error_text(s));
	return AKS_OK;
}
