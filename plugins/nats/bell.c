/*
 * plugins/nats/bell.c - the doorbell: a wake-up hint for idle consumers.
 *
 * Fetching polls (consumer.c): an idle consumer pauses 1 ms, doubling to 32
 * ms, between scans, so a message sent to an idle queue waited on average
 * half a pause before anyone pulled it. After each successful JetStream
 * publish, send also publishes an empty core-NATS message on the queue's bell
 * subject, "_AKS.bell.<stream>". Every transport with consumers of that queue
 * holds one core subscription on it; its callback bumps the eventfd of each
 * of the queue's consumers in this transport, and an idle fetch waits in
 * poll() on that eventfd (and the call's cancel fd) for at most its current
 * pause, so a bell ends the pause at once and every idle consumer of the
 * queue scans again (they race for the pull; the losers go back to waiting).
 *
 * The bell is only a hint: nothing depends on it for correctness. A lost
 * bell (core NATS is at-most-once), a sender without bells (an older
 * version, or doorbell: false) or a reconnect costs only the old latency,
 * because the pause still ends after at most 32 ms. The guarantees
 * (MaxAckPending 1 per partition, at-least-once, de-duplication) are the
 * server's, untouched.
 *
 * A bell must never be stored: if any stream on the server captures the bell
 * subject (an operator's stream on "_AKS.>" or ">", or a queue prefix under
 * "_AKS.bell"), every bell would become a stored message. init therefore
 * asks the server which streams capture the subject, and leaves the bell of
 * that queue off (with a warning) when any does, or when it cannot tell.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "nats_internal.h"

/* "_AKS" is outside any subject a queue's stream captures unless a prefix
 * starts with it; init checks every stream anyway (see above). */
#define NT_BELL_PREFIX "_AKS.bell."

/*
 * The closure of the bell subscription's callbacks, which libnats runs on the
 * subscription's own thread: it lives until the on-complete callback (after
 * the last message callback) has run. fini waits for that; when it does not
 * come in time the block is left to that callback to free.
 */
struct nt_bell {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	char subject[sizeof(NT_BELL_PREFIX) + 256];
	natsSubscription *sub; /* made at the first consumer_open of the queue */
	int *fds;              /* eventfds of the queue's open consumers */
	size_t nfds, cap;
	bool completed; /* the on-complete callback ran */
	bool orphaned;  /* fini gave up waiting: the on-complete callback frees */
};

static void bell_free(struct nt_bell *b)
{
	if (!b)
		return;
	pthread_mutex_destroy(&b->mu);
	pthread_cond_destroy(&b->cv);
	free(b->fds);
	free(b);
}

/* ---- the callbacks (libnats' thread) ------------------------------------------------ */

static void on_bell(natsConnection *nc, natsSubscription *sub, natsMsg *m, void *closure)
{
	(void)nc;
	(void)sub;
	struct nt_bell *b = closure;
	natsMsg_Destroy(m);
	uint64_t one = 1;
	pthread_mutex_lock(&b->mu);
	/* A full counter (never, in practice) or any error only loses a hint. */
	for (size_t i = 0; i < b->nfds; i++)
		(void)!write(b->fds[i], &one, sizeof(one));
	pthread_mutex_unlock(&b->mu);
}

static void on_complete(void *closure)
{
	struct nt_bell *b = closure;
	pthread_mutex_lock(&b->mu);
	bool orphaned = b->orphaned;
	b->completed = true;
	pthread_cond_signal(&b->cv);
	pthread_mutex_unlock(&b->mu);
	if (orphaned)
		bell_free(b);
}

/* ---- init and fini ---------------------------------------------------------------- */

/*
 * Whether any stream on the server captures subject: $JS.API.STREAM.NAMES
 * with a subject filter answers the names of the streams whose subjects
 * overlap it. 1 captured, 0 free, -1 unknown (no answer, or one not
 * understood).
 */
static int subject_captured(aks_transport_impl *t, const char *subject)
{
	char body[sizeof(((struct nt_bell *)0)->subject) + 32];
	int len = snprintf(body, sizeof(body), "{\"subject\":\"%s\"}", subject);
	natsMsg *reply = NULL;
	natsStatus s = natsConnection_Request(&reply, t->nc, "$JS.API.STREAM.NAMES", body, len,
	                                      nt_request_ms(t));
	if (s != NATS_OK)
		return -1;
	const char *data = natsMsg_GetData(reply);
	int rc = -1;
	/* {"type":"...stream_names_response","total":N,...,"streams":[...] | null} */
	const char *streams = data ? strstr(data, "\"streams\":") : NULL;
	if (data && !strstr(data, "\"error\"") && streams) {
		streams += strlen("\"streams\":");
		while (*streams == ' ')
			streams++;
		if (strncmp(streams, "null", 4) == 0)
			rc = 0;
		else if (*streams == '[')
			rc = streams[1] == ']' ? 0 : 1;
	}
	natsMsg_Destroy(reply);
	return rc;
}

void nt_bell_init(aks_transport_impl *t)
{
	if (!t->doorbell)
		return;
	for (int i = 0; i < NT_QUEUES; i++) {
		struct nt_queue *q = &t->q[i];
		char subject[sizeof(((struct nt_bell *)0)->subject)];
		snprintf(subject, sizeof(subject), NT_BELL_PREFIX "%s", q->stream);
		int captured = subject_captured(t, subject);
		if (captured != 0) {
			t->host->log(AKS_LOG_WARNING, NT_NAME,
			             "doorbell of the %s queue off: %s; idle consumers poll "
			             "(up to 32 ms)",
			             q->name,
			             captured > 0 ? "a stream captures its subject, which would "
			                            "store every bell"
			                          : "cannot tell whether a stream captures its "
			                            "subject");
			continue;
		}
		struct nt_bell *b = calloc(1, sizeof(*b));
		if (!b)
			continue; /* a hint: fetching polls without it */
		pthread_mutex_init(&b->mu, NULL);
		pthread_cond_init(&b->cv, NULL);
		memcpy(b->subject, subject, sizeof(b->subject));
		q->bell = b;
	}
}

void nt_bell_fini(aks_transport_impl *t)
{
	for (int i = 0; i < NT_QUEUES; i++) {
		struct nt_bell *b = t->q[i].bell;
		t->q[i].bell = NULL;
		if (!b)
			continue;
		if (!b->sub) {
			bell_free(b);
			continue;
		}
		/* Closed (here, or already by a closed connection): the on-complete
		 * callback follows the last message callback. */
		natsSubscription_Unsubscribe(b->sub);
		natsSubscription_Destroy(b->sub);
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 5;
		pthread_mutex_lock(&b->mu);
		while (!b->completed)
			if (pthread_cond_timedwait(&b->cv, &b->mu, &until) != 0)
				break;
		bool completed = b->completed;
		b->orphaned = !completed;
		pthread_mutex_unlock(&b->mu);
		if (completed)
			bell_free(b);
	}
}

/* ---- senders and consumers ----------------------------------------------------------- */

void nt_bell_ring(aks_transport_impl *t, struct nt_queue *q)
{
	/* Core NATS, no payload, not awaited: a lost bell costs one pause. */
	if (q->bell)
		natsConnection_Publish(t->nc, q->bell->subject, NULL, 0);
}

int nt_bell_join(aks_transport_impl *t, struct nt_queue *q)
{
	struct nt_bell *b = q->bell;
	if (!b)
		return -1;
	int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (fd < 0)
		return -1;
	pthread_mutex_lock(&b->mu);
	natsStatus s = NATS_OK;
	if (!b->sub) {
		s = natsConnection_Subscribe(&b->sub, t->nc, b->subject, on_bell, b);
		if (s == NATS_OK)
			s = natsSubscription_SetOnCompleteCB(b->sub, on_complete, b);
		if (s != NATS_OK && b->sub) {
			/* No on-complete callback is set: no callback may outlive this. */
			natsSubscription_Unsubscribe(b->sub);
			natsSubscription_Destroy(b->sub);
		}
		if (s != NATS_OK)
			b->sub = NULL;
	}
	if (s == NATS_OK && b->nfds == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 4;
		int *fds = realloc(b->fds, cap * sizeof(*fds));
		if (fds) {
			b->fds = fds;
			b->cap = cap;
		} else {
			s = NATS_NO_MEMORY;
		}
	}
	if (s == NATS_OK)
		b->fds[b->nfds++] = fd;
	pthread_mutex_unlock(&b->mu);
	if (s != NATS_OK) {
		t->host->log(AKS_LOG_WARNING, NT_NAME,
		             "no doorbell for a consumer of %s (%s): it polls (up to 32 ms)",
		             q->stream, nt_error_text(s));
		close(fd);
		return -1;
	}
	return fd;
}

void nt_bell_leave(struct nt_queue *q, int fd)
{
	struct nt_bell *b = q->bell;
	if (fd < 0)
		return;
	if (b) {
		pthread_mutex_lock(&b->mu);
		for (size_t i = 0; i < b->nfds; i++)
			if (b->fds[i] == fd) {
				b->fds[i] = b->fds[--b->nfds];
				break;
			}
		pthread_mutex_unlock(&b->mu);
	}
	close(fd);
}

void nt_bell_clear(int fd)
{
	uint64_t count;
	if (fd >= 0)
		while (read(fd, &count, sizeof(count)) == (ssize_t)sizeof(count))
			;
}
