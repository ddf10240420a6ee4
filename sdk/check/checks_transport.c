/*
 * sdk/check/checks_transport.c - the transport contract (<aksandbox/transport.h>) as checks:
 * a transport plugin's operation table is driven directly, with the host's services table,
 * the way the host's queue worker drives it (core/queue/transport.c, worker.c).
 *
 * The queues may hold messages the suite did not send. Every message it sends carries the
 * attribute aks_check = "<run>-<check>" and, when grouped, a group "<run>-<check>-<n>", where
 * <run> is random per run: a check looks only at its own messages, and acks whatever else it
 * fetches out of its way (counted in the check's notes). Acking destroys those messages, so
 * the suite must be pointed at queues reserved for testing. Each check drains what it sent.
 *
 * Timing. Nothing sleeps for a fixed time when it can poll until a deadline instead. A
 * delivery that must come may take TC_MARGIN_S past its time, plus the ack wait when it is
 * known: a transport may lose a delivery on its way to the consumer and only redeliver it
 * after the ack wait (nats-server does, rarely). A delivery that must not come is watched
 * for TC_WATCH_S. The ack wait is the transport's configuration, which the runner cannot
 * read in general: --ack-wait gives it (aks_check.ack_wait), and the checks that must wait it
 * out are NOT VERIFIED without it.
 *
 * Two checks need consumers on two threads (the contract gives a consumer to the thread that
 * opened it): an agent is a thread that owns one consumer and runs the jobs the checks'
 * thread posts to it, which alone may fail a check.
 */
#include "config.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <aksandbox/transport.h>

#include "check.h"

/* How late past its time a delivery may come (a remote broker, a long poll's rounding). */
#define TC_MARGIN_S 5.0
/* How long a check watches for a delivery that must not come. */
#define TC_WATCH_S 1.0
/* The longest single fetch: a transport that ignores cancellation still ends a pick soon. */
#define TC_SLICE_MS 1000
/* How long an agent's job may take past its own window before it counts as hung. */
#define TC_HUNG_S 60.0
/* The key of the attribute that marks the suite's messages. */
#define TC_MARK "aks_check"

/* A consumer and what it set aside; used only by the thread that opened it. */
typedef struct tc {
	aks_consumer *c;
	unsigned foreign; /* messages of other runs, acked out of the way */
	unsigned strays;  /* this run's messages of other checks, acked */
	char why[768];    /* the last failure, for the checks' thread to report */
} tc;

enum job { JOB_PICK, JOB_ACK, JOB_QUIT };

/* A thread owning one consumer (see above). posted/finished count jobs; the checks'
 * thread posts the next one only once the last has finished. */
typedef struct agent {
	char name;
	pthread_t thread;
	bool started, lost; /* lost: its job hung, the thread was left behind */
	const char *queue;
	tc k;
	unsigned posted, finished;
	enum job job;
	const char *tag;
	double window_s;
	aks_cancel *stop; /* the running pick's; owned here */
	aks_message *msg; /* JOB_ACK's message; JOB_PICK's result */
	int rc;
	double at; /* when the job finished */
} agent;

static pthread_mutex_t ag_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ag_cv = PTHREAD_COND_INITIALIZER;

static struct {
	const aks_transport_ops *ops;
	aks_transport_impl *impl;
	char run[32];
	tc mains[4]; /* the checks' thread's consumers, closed by the teardown */
	bool main_open[4];
	agent agents[2];
	bool abandoned; /* an agent hung: fini must not run under its consumer */
	unsigned foreign, strays;
} tr;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* How long a delivery that must come may take past its time (see the file's comment). */
static double window_s(void)
{
	return TC_MARGIN_S + aks_check.ack_wait;
}

/* The watch, shorter than the ack wait when that is short, so that a held message is not
 * redelivered (legitimately) while it is watched. */
static double watch_s(void)
{
	double w = aks_check.ack_wait * 0.4;
	return aks_check.ack_wait > 0 && w < TC_WATCH_S ? w : TC_WATCH_S;
}

/* How long, from `since` (when a message was delivered and held), a delivery that must come
 * while it is held may take: short of the ack wait, after which the held one comes back. */
static double held_window_s(double since)
{
	double w = window_s();
	if (aks_check.ack_wait > 0 && since + aks_check.ack_wait * 0.8 - now_s() < w)
		w = since + aks_check.ack_wait * 0.8 - now_s();
	return w > 0 ? w : 0;
}

static aks_transport_impl *need_transport(void)
{
	if (!tr.impl)
		aks_check_fail("the transport is not open (see the check transport_opens)");
	return tr.impl;
}

static bool has_slot(size_t end)
{
	return tr.ops->struct_size >= end;
}
#define HAS_OP(name)                                                                               \
	(has_slot(offsetof(aks_transport_ops, name) + sizeof(tr.ops->name)) && tr.ops->name)

/* ---- messages ---------------------------------------------------------------------- */

static void group_name(char *buf, size_t size, const char *tag, int n)
{
	snprintf(buf, size, "%s-%s-%d", tr.run, tag, n);
}

static const char *attribute(const aks_message *m, const char *key)
{
	for (const char *const *a = m->attributes; a && a[0] && a[1]; a += 2)
		if (strcmp(a[0], key) == 0)
			return a[1];
	return NULL;
}

enum whose { FOREIGN, STRAY, OURS };

/* Whose a fetched message is: the running check's (`tag`; NULL: none), another check's of
 * this run, or not this run's. The group decides too, so that a transport that loses attributes
 * still gets its grouped messages recognised (and the round trip says what it lost). */
static enum whose classify(const aks_message *m, const char *tag)
{
	char want[96];
	snprintf(want, sizeof(want), "%s-%s", tr.run, tag ? tag : "");
	size_t wl = strlen(want), rl = strlen(tr.run);
	const char *mark = attribute(m, TC_MARK);
	const char *g = m->group_id;
	if (tag &&
	    ((mark && strcmp(mark, want) == 0) || (g && strncmp(g, want, wl) == 0 && g[wl] == '-')))
		return OURS;
	if ((mark && strncmp(mark, tr.run, rl) == 0) || (g && strncmp(g, tr.run, rl) == 0))
		return STRAY;
	return FOREIGN;
}

static bool body_is(const aks_message *m, const char *s)
{
	return m->body_len == strlen(s) && memcmp(m->body, s, m->body_len) == 0;
}

/* The body for a message: printable bytes as they are, anything else as "?". */
static const char *shown(const aks_message *m, char *buf, size_t size)
{
	size_t n = m->body_len < size - 1 ? m->body_len : size - 1;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)m->body[i];
		buf[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	buf[n] = '\0';
	return buf;
}

typedef struct out_msg {
	const char *queue, *tag;
	int group; /* 0: no group */
	const char *dedup;
	const char *body;         /* NULL: the tag */
	size_t len;               /* of body; 0: strlen */
	const char *const *extra; /* more attributes, NULL-terminated pairs */
} out_msg;

static int send_raw(const out_msg *o, const aks_call *call, aks_error **err)
{
	char mark[96], group[128] = "";
	const char *attrs[24] = {TC_MARK, mark};
	size_t n = 2;
	snprintf(mark, sizeof(mark), "%s-%s", tr.run, o->tag);
	for (const char *const *a = o->extra; a && a[0] && a[1] && n < 20; a += 2) {
		attrs[n++] = a[0];
		attrs[n++] = a[1];
	}
	attrs[n] = NULL;
	if (o->group)
		group_name(group, sizeof(group), o->tag, o->group);
	const char *body = o->body ? o->body : o->tag;
	aks_message m = {AKS_MESSAGE_INIT,
	                 .body = body,
	                 .body_len = o->len ? o->len : strlen(body),
	                 .attributes = attrs,
	                 .group_id = o->group ? group : NULL,
	                 .dedup_id = o->dedup};
	aks_call fallback;
	if (!call) {
		aks_check_call(&fallback);
		call = &fallback;
	}
	return tr.ops->send(need_transport(), o->queue, &m, call, err);
}

static void send_ok(const out_msg *o)
{
	aks_error *err = NULL;
	aks_check_expect("send", send_raw(o, NULL, &err), AKS_OK, err);
}

/* Sends `body` as a message of `tag` in group n (0: none) on the input queue. */
static void send_simple(const char *tag, int group, const char *body)
{
	send_ok(&(out_msg){.queue = AKS_QUEUE_INPUT, .tag = tag, .group = group, .body = body});
}

/* ---- consumers (any thread; no check may fail here) ------------------------------------ */

static int failed(tc *k, int rc, aks_error *err, const char *what)
{
	snprintf(k->why, sizeof(k->why), "%s returned %s (%d)%s%s", what, aks_strerror(rc), rc,
	         err ? ": " : "", err ? aks_error_message(err) : "");
	aks_error_free(err);
	return rc < 0 ? rc : AKS_EPLUGIN;
}

static int tc_open(tc *k, const char *queue)
{
	aks_error *err = NULL;
	memset(k, 0, sizeof(*k));
	int rc = tr.ops->consumer_open(tr.impl, queue, &k->c, &err);
	if (rc == AKS_OK && !k->c)
		return failed(k, AKS_EPLUGIN, err, "consumer_open (AKS_OK but no consumer)");
	if (rc != AKS_OK) {
		k->c = NULL;
		return failed(k, rc, err, "consumer_open");
	}
	aks_error_free(err);
	return AKS_OK;
}

static void tc_close(tc *k)
{
	if (k->c)
		tr.ops->consumer_close(k->c);
	k->c = NULL;
	__atomic_fetch_add(&tr.foreign, k->foreign, __ATOMIC_RELAXED);
	__atomic_fetch_add(&tr.strays, k->strays, __ATOMIC_RELAXED);
	k->foreign = k->strays = 0;
}

/* The shape the host checks every fetched message for (core/queue/transport.c). */
static int malformed(tc *k, const aks_message *m)
{
	const char *bad =
	    !m               ? "a NULL message"
	    : !m->body       ? "a message with a NULL body"
	    : !m->attributes ? "a message with NULL attributes"
	    : m->struct_version != AKS_MESSAGE_VERSION || m->struct_size < sizeof(aks_message)
	        ? "a message with a wrong struct_version or struct_size"
	        : NULL;
	if (bad)
		snprintf(k->why, sizeof(k->why), "fetch returned %s", bad);
	return bad ? AKS_EPLUGIN : AKS_OK;
}

/*
 * Fetches from k until a message of `tag` comes (1, the message in *out), `window` seconds
 * pass or stop is triggered (0), or a call fails (< 0, k->why says how). Messages of other
 * runs and of other checks are acked out of the way and counted.
 */
static int pick(tc *k, const char *tag, double window, aks_cancel *stop, aks_message **out)
{
	double until = now_s() + window;
	aks_call call;
	aks_call_init(&call, 0, NULL, NULL, stop);
	*out = NULL;
	for (;;) {
		double left = until - now_s();
		if (left <= 0 || (stop && aks_cancel_is_triggered(stop)))
			return 0;
		int64_t wait = (int64_t)(left * 1000.0);
		aks_message *got[1] = {NULL};
		size_t n = 0;
		aks_error *err = NULL;
		int rc = tr.ops->fetch(k->c, got, 1, &n, wait < TC_SLICE_MS ? wait : TC_SLICE_MS,
		                       &call, &err);
		if (rc < 0)
			return failed(k, rc, err, "fetch");
		aks_error_free(err);
		if (n > 1) {
			snprintf(k->why, sizeof(k->why), "fetch returned %zu messages for max 1",
			         n);
			return AKS_EPLUGIN;
		}
		if (n == 0)
			continue;
		if (malformed(k, got[0]) < 0)
			return AKS_EPLUGIN;
		enum whose who = classify(got[0], tag);
		if (who == OURS) {
			*out = got[0];
			return 1;
		}
		if (who == FOREIGN)
			k->foreign++;
		else
			k->strays++;
		if ((rc = tr.ops->ack(k->c, got[0], &err)) < 0)
			return failed(k, rc, err, "ack (of a message not of this check)");
		aks_error_free(err);
	}
}

/* ---- the checks' thread's consumers ------------------------------------------------------ */

static tc *open_main(const char *queue)
{
	need_transport();
	for (size_t i = 0; i < sizeof(tr.mains) / sizeof(tr.mains[0]); i++) {
		if (tr.main_open[i])
			continue;
		tc *k = &tr.mains[i];
		if (tc_open(k, queue) < 0)
			aks_check_fail("%s (queue '%s')", k->why, queue);
		tr.main_open[i] = true;
		return k;
	}
	aks_check_fail("internal error: too many consumers");
}

static void close_main(tc *k)
{
	tc_close(k);
	tr.main_open[k - tr.mains] = false;
}

/* A message of `tag` within `window` seconds, or the check fails naming `what`. */
static aks_message *expect_msg(tc *k, const char *tag, double window, const char *what)
{
	aks_message *m = NULL;
	int rc = pick(k, tag, window, NULL, &m);
	if (rc < 0)
		aks_check_fail("%s", k->why);
	if (rc == 0)
		aks_check_fail("%s was not delivered within %.1fs", what, window);
	return m;
}

static void settle(tc *k, aks_message *m, const char *how, double delay)
{
	aks_error *err = NULL;
	int rc = strcmp(how, "ack") == 0    ? tr.ops->ack(k->c, m, &err)
	         : strcmp(how, "nack") == 0 ? tr.ops->nack(k->c, m, delay, &err)
	                                    : tr.ops->dead_letter(k->c, m, &err);
	aks_check_expect(how, rc, AKS_OK, err);
}

/*
 * Fails unless m was delivered `want` times. More is allowed when the wait since the last
 * settlement leaves room for the extra deliveries to have been lost on their way and
 * redelivered after the ack wait (see the file's comment), and noted.
 */
static void expect_count(const aks_message *m, uint32_t want, double waited, const char *what)
{
	uint32_t got = m->receive_count;
	if (got == want)
		return;
	double extra = got > want ? (double)(got - want) : 0;
	if (extra > 0 && aks_check.ack_wait > 0 && waited >= extra * aks_check.ack_wait * 0.8) {
		aks_check_note("%s: receive_count %u, not %u: %u deliveries never reached a "
		               "consumer and expired after the ack wait (%.1fs waited)",
		               what, got, want, got - want, waited);
		return;
	}
	aks_check_fail("%s: receive_count is %u (want %u)", what, got, want);
}

/* ---- agents ---------------------------------------------------------------------------- */

static void *agent_main(void *arg)
{
	agent *a = arg;
	int rc = tc_open(&a->k, a->queue);
	pthread_mutex_lock(&ag_mu);
	a->rc = rc;
	a->finished++;
	pthread_cond_broadcast(&ag_cv);
	while (rc == AKS_OK) {
		while (a->finished == a->posted)
			pthread_cond_wait(&ag_cv, &ag_mu);
		enum job job = a->job;
		pthread_mutex_unlock(&ag_mu);
		aks_message *m = NULL;
		if (job == JOB_PICK) {
			rc = pick(&a->k, a->tag, a->window_s, a->stop, &m);
		} else if (job == JOB_ACK) {
			aks_error *err = NULL;
			rc = tr.ops->ack(a->k.c, a->msg, &err);
			if (rc < 0)
				failed(&a->k, rc, err, "ack");
			else
				aks_error_free(err);
		} else {
			tc_close(&a->k);
		}
		pthread_mutex_lock(&ag_mu);
		a->msg = m;
		a->rc = rc;
		a->at = now_s();
		a->finished++;
		pthread_cond_broadcast(&ag_cv);
		if (job == JOB_QUIT)
			break;
		rc = AKS_OK;
	}
	pthread_mutex_unlock(&ag_mu);
	return NULL;
}

static bool agent_idle(const agent *a)
{
	return a->finished == a->posted;
}

/* Waits (ag_mu held) until a's job finished, or `limit` seconds; false on the timeout. */
static bool agent_wait_locked(agent *a, double limit)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)limit + 1;
	while (!agent_idle(a))
		if (pthread_cond_timedwait(&ag_cv, &ag_mu, &until) != 0)
			return agent_idle(a);
	return true;
}

/* Waits for a's job, or fails the check (and leaves the hung thread behind). */
static int agent_wait(agent *a, double limit)
{
	pthread_mutex_lock(&ag_mu);
	bool done = agent_wait_locked(a, limit);
	if (!done)
		a->lost = true;
	int rc = a->rc;
	pthread_mutex_unlock(&ag_mu);
	if (!done)
		aks_check_fail("consumer %c: a call did not return within %.0fs", a->name, limit);
	return rc;
}

static agent *agent_start(int i, const char *queue)
{
	agent *a = &tr.agents[i];
	need_transport();
	memset(a, 0, sizeof(*a));
	a->name = (char)('A' + i);
	a->queue = queue;
	a->posted = 1; /* the open */
	if (pthread_create(&a->thread, NULL, agent_main, a) != 0)
		aks_check_fail("cannot start a thread");
	a->started = true;
	if (agent_wait(a, TC_HUNG_S) < 0)
		aks_check_fail("consumer %c: %s", a->name, a->k.why);
	return a;
}

static void agent_post(agent *a, enum job job)
{
	pthread_mutex_lock(&ag_mu);
	a->job = job;
	a->posted++;
	pthread_cond_broadcast(&ag_cv);
	pthread_mutex_unlock(&ag_mu);
}

static void agent_pick(agent *a, const char *tag, double window)
{
	aks_cancel_free(a->stop);
	a->stop = NULL;
	aks_error *err = NULL;
	aks_check_expect("aks_cancel_new", aks_cancel_new(&a->stop, &err), AKS_OK, err);
	a->tag = tag;
	a->window_s = window;
	agent_post(a, JOB_PICK);
}

static void agent_ack(agent *a, aks_message *m)
{
	a->msg = m;
	agent_post(a, JOB_ACK);
	if (agent_wait(a, TC_HUNG_S) < 0)
		aks_check_fail("consumer %c: %s", a->name, a->k.why);
}

static void agent_stop(agent *a)
{
	if (!a->started)
		return;
	pthread_mutex_lock(&ag_mu);
	if (a->stop)
		aks_cancel_trigger(a->stop);
	bool idle = !a->lost && agent_wait_locked(a, TC_HUNG_S);
	pthread_mutex_unlock(&ag_mu);
	if (idle && a->k.c) {
		agent_post(a, JOB_QUIT);
		pthread_mutex_lock(&ag_mu);
		idle = agent_wait_locked(a, TC_HUNG_S);
		pthread_mutex_unlock(&ag_mu);
	}
	if (idle) {
		pthread_join(a->thread, NULL);
		aks_cancel_free(a->stop);
	} else {
		/* Its consumer is still open: the transport must outlive it. */
		pthread_detach(a->thread);
		tr.abandoned = true;
	}
	a->stop = NULL;
	a->started = false;
}

/* ---- the checks ------------------------------------------------------------------------ */

void aks_check_transport_opens(void)
{
	const aks_plugin_descriptor *d = aks_plugin_get_descriptor(aks_check_need_plugin());
	tr.ops = d->ops;
	unsigned char r[6];
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		aks_check_fail("cannot read random bytes");
	snprintf(tr.run, sizeof(tr.run), "akc%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3],
	         r[4], r[5]);
	aks_error *err = NULL;
	int rc = aks_check.config_path
	             ? aks_config_load_block(aks_check.plugin, aks_check.config_path,
	                                     &aks_check.config, &err)
	             : aks_config_default_block(aks_check.plugin, &aks_check.config, &err);
	aks_check_expect(aks_check.config_path ? "loading the config block"
	                                       : "building the default config block",
	                 rc, AKS_OK, err);
	err = NULL;
	rc = tr.ops->init(aks_host_services(), aks_check.config, &tr.impl, &err);
	if (rc != AKS_OK)
		tr.impl = NULL;
	aks_check_expect("the transport's init", rc, AKS_OK, err);
	if (!tr.impl)
		aks_check_fail("init returned AKS_OK but no transport");
	aks_check_note("run id %s; optional operations: dead_letter %s, in_progress %s, "
	               "depth %s; ack wait %s",
	               tr.run, HAS_OP(dead_letter) ? "yes" : "no",
	               HAS_OP(in_progress) ? "yes" : "no", HAS_OP(depth) ? "yes" : "no",
	               aks_check.ack_wait > 0 ? "given (--ack-wait)" : "unknown (no --ack-wait)");
}

/* Both queues carry messages, apart from each other; an unknown queue is an error. */
void aks_check_transport_queues(void)
{
	aks_error *err = NULL;
	int rc =
	    send_raw(&(out_msg){.queue = "no-such-queue", .tag = "queues", .group = 9}, NULL, &err);
	aks_error_free(err);
	err = NULL;
	if (rc >= 0)
		aks_check_fail("send to the unknown queue 'no-such-queue' returned %d (want an "
		               "error)",
		               rc);
	aks_consumer *c = NULL;
	rc = tr.ops->consumer_open(tr.impl, "no-such-queue", &c, &err);
	aks_error_free(err);
	if (rc >= 0) {
		if (c)
			tr.ops->consumer_close(c);
		aks_check_fail("consumer_open of the unknown queue 'no-such-queue' returned %d "
		               "(want an error)",
		               rc);
	}
	send_ok(&(out_msg){.queue = AKS_QUEUE_INPUT, .tag = "queues", .group = 1, .body = "in"});
	send_ok(&(out_msg){.queue = AKS_QUEUE_OUTPUT, .tag = "queues", .group = 2, .body = "out"});
	tc *in = open_main(AKS_QUEUE_INPUT), *out = open_main(AKS_QUEUE_OUTPUT);
	char b[64];
	aks_message *m =
	    expect_msg(out, "queues", window_s(), "a message sent to the output queue");
	if (!body_is(m, "out"))
		aks_check_fail("the output queue delivered '%s' (want 'out': the queues are not "
		               "apart)",
		               shown(m, b, sizeof(b)));
	settle(out, m, "ack", 0);
	m = expect_msg(in, "queues", window_s(), "a message sent to the input queue");
	if (!body_is(m, "in"))
		aks_check_fail(
		    "the input queue delivered '%s' (want 'in': the queues are not apart)",
		    shown(m, b, sizeof(b)));
	settle(in, m, "ack", 0);
}

/* Fails unless every attribute sent comes back with its value; notes any extra. */
static void expect_attributes(const aks_message *m, const char *const *sent)
{
	size_t have = 0, want = 0;
	for (const char *const *a = m->attributes; a[0] && a[1]; a += 2)
		have++;
	for (const char *const *a = sent; a[0]; a += 2) {
		want++;
		const char *v = attribute(m, a[0]);
		if (!v)
			aks_check_fail("attribute '%s' was lost (%zu came back)", a[0], have);
		if (strcmp(v, a[1]) != 0)
			aks_check_fail("attribute '%s' came back as '%s' (sent '%s')", a[0], v,
			               a[1]);
	}
	if (have > want)
		aks_check_note("%zu attributes came back besides the %zu sent", have - want, want);
}

/* Body bytes (all 256 values, NUL and 0x80-0xFF included), attributes and the group come
 * back exactly; the message has an id and receive_count 1. */
void aks_check_transport_round_trip(void)
{
	char body[256 + 4], mark[96], group[128], request[96];
	for (int i = 0; i < 256; i++)
		body[i] = (char)(unsigned char)((i * 7 + 3) & 0xff); /* a permutation: every byte */
	memcpy(body + 256, "\0end", 4);
	snprintf(mark, sizeof(mark), "%s-rt", tr.run);
	snprintf(request, sizeof(request), "%s-request", tr.run);
	const char *extra[] = {"request_id", request, "Mixed_Case-key.2",
	                       "caf\xc3\xa9 = 1; \"two\" %41 \xf0\x9f\x98\x80  a:b", NULL};
	const char *sent[] = {TC_MARK, mark, extra[0], extra[1], extra[2], extra[3], NULL};
	tc *k = open_main(AKS_QUEUE_INPUT);
	double t0 = now_s();
	send_ok(&(out_msg){.queue = AKS_QUEUE_INPUT,
	                   .tag = "rt",
	                   .group = 1,
	                   .body = body,
	                   .len = sizeof(body),
	                   .extra = extra});
	aks_message *m = expect_msg(k, "rt", window_s(), "the message sent");
	if (m->body_len != sizeof(body) || memcmp(m->body, body, sizeof(body)) != 0)
		aks_check_fail(
		    "the body came back as %zu bytes, not the exact %zu sent (every byte "
		    "value, NUL and 0x80-0xFF included)",
		    m->body_len, sizeof(body));
	expect_attributes(m, sent);
	group_name(group, sizeof(group), "rt", 1);
	if (!m->group_id || strcmp(m->group_id, group) != 0)
		aks_check_fail("group_id came back as '%s' (sent '%s')",
		               m->group_id ? m->group_id : "(null)", group);
	if (!m->message_id || !*m->message_id)
		aks_check_fail("a fetched message has no message_id");
	expect_count(m, 1, now_s() - t0, "the first delivery");
	settle(k, m, "ack", 0);
}

/* Messages without a group come back without one, with distinct ids, and are not limited
 * to one in flight. */
void aks_check_transport_no_group(void)
{
	tc *k = open_main(AKS_QUEUE_INPUT);
	send_simple("nogroup", 0, "first");
	send_simple("nogroup", 0, "second");
	aks_message *a = expect_msg(k, "nogroup", window_s(), "the first message without a group");
	double since = now_s();
	aks_message *b = NULL;
	int rc = pick(k, "nogroup", held_window_s(since), NULL, &b);
	if (rc < 0)
		aks_check_fail("%s", k->why);
	if (rc == 0 || body_is(a, "first") == body_is(b, "first"))
		aks_check_fail("while a message without a group was in flight, the other one sent "
		               "without a group %s: messages without a group must have no limit",
		               rc == 0 ? "was not delivered"
		                       : "did not come (the held one came again)");
	if (a->group_id || b->group_id)
		aks_check_fail("a message sent without a group came back with group '%s'",
		               a->group_id ? a->group_id : b->group_id);
	if (a->message_id && b->message_id && strcmp(a->message_id, b->message_id) == 0)
		aks_check_fail("two messages have the same message_id '%s'", a->message_id);
	settle(k, a, "ack", 0);
	settle(k, b, "ack", 0);
}

/* One fetch of up to 4 messages: *n and how long it took; messages are set aside. */
static double timed_fetch(tc *k, int64_t wait_ms, aks_cancel *cancel, size_t *n, int *rc_out)
{
	aks_message *got[4] = {NULL};
	aks_call call;
	aks_call_init(&call, 0, NULL, NULL, cancel);
	aks_error *err = NULL;
	double t0 = now_s();
	int rc = tr.ops->fetch(k->c, got, 4, n, wait_ms, &call, &err);
	double took = now_s() - t0;
	if (rc_out)
		*rc_out = rc;
	if (rc < 0 && rc != AKS_ECANCELLED) {
		failed(k, rc, err, "fetch");
		aks_check_fail("%s", k->why);
	}
	aks_error_free(err);
	if (rc < 0)
		*n = 0;
	if (*n > 4)
		aks_check_fail("fetch returned %zu messages for max 4", *n);
	for (size_t i = 0; i < *n; i++) {
		if (malformed(k, got[i]) < 0)
			aks_check_fail("%s", k->why);
		if (classify(got[i], NULL) == FOREIGN)
			k->foreign++;
		else
			k->strays++;
		settle(k, got[i], "ack", 0);
	}
	return took;
}

/* An empty fetch waits about wait_ms and returns *n = 0; wait_ms 0 does not wait. A queue
 * that holds others' messages is emptied first (a few tries). */
void aks_check_transport_fetch_waits(void)
{
	tc *k = open_main(AKS_QUEUE_OUTPUT);
	size_t n = 1;
	double took = 0;
	for (int i = 0; i < 5 && n > 0; i++)
		took = timed_fetch(k, 1000, NULL, &n, NULL);
	if (n > 0)
		aks_check_fail("the output queue never came up empty: point the suite at queues "
		               "reserved for testing");
	if (took < 0.5)
		aks_check_fail("an empty fetch with wait_ms 1000 returned after %.3fs: it does not "
		               "wait (the host would spin)",
		               took);
	if (took > 1.0 + 3.0)
		aks_check_fail("an empty fetch with wait_ms 1000 returned after %.1fs", took);
	double zero = timed_fetch(k, 0, NULL, &n, NULL);
	if (n == 0 && zero > 3.0)
		aks_check_fail("an empty fetch with wait_ms 0 returned after %.1fs", zero);
	aks_check_note("empty fetch: wait_ms 1000 took %.2fs, wait_ms 0 took %.2fs", took, zero);
}

static void *trigger_later(void *arg)
{
	usleep(300 * 1000);
	aks_cancel_trigger(arg);
	return NULL;
}

/* A cancelled fetch returns early, with what it has; send refuses a cancelled call and a
 * passed deadline. */
void aks_check_transport_cancellation(void)
{
	tc *k = open_main(AKS_QUEUE_OUTPUT);
	aks_cancel *cancel = NULL;
	aks_error *err = NULL;
	aks_check_expect("aks_cancel_new", aks_cancel_new(&cancel, &err), AKS_OK, err);
	pthread_t th;
	if (pthread_create(&th, NULL, trigger_later, cancel) != 0) {
		aks_cancel_free(cancel);
		aks_check_fail("cannot start a thread");
	}
	size_t n = 0;
	int rc = 0;
	double took = timed_fetch(k, 20000, cancel, &n, &rc);
	pthread_join(th, NULL);
	double again = timed_fetch(k, 20000, cancel, &n, NULL); /* already cancelled */
	/* send with the cancelled call */
	aks_call call;
	aks_call_init(&call, 0, NULL, NULL, cancel);
	int sent = send_raw(&(out_msg){.queue = AKS_QUEUE_OUTPUT, .tag = "cancel", .group = 1},
	                    &call, &err);
	aks_error_free(err);
	err = NULL;
	aks_cancel_free(cancel);
	if (took > 0.3 + 3.0)
		aks_check_fail("a fetch with wait_ms 20000 cancelled after 0.3s returned after "
		               "%.1fs",
		               took);
	if (again > 3.0)
		aks_check_fail("a fetch with an already cancelled call returned after %.1fs",
		               again);
	if (rc == AKS_ECANCELLED)
		aks_check_note("the cancelled fetch returned AKS_ECANCELLED; the contract asks for "
		               "AKS_OK with what it has (the host logs a failed fetch)");
	/* send past the deadline */
	aks_call_init(&call, 0.001, NULL, NULL, NULL);
	usleep(20 * 1000);
	int late = send_raw(&(out_msg){.queue = AKS_QUEUE_OUTPUT, .tag = "cancel", .group = 2},
	                    &call, &err);
	aks_error_free(err);
	if (sent == AKS_OK || late == AKS_OK) {
		aks_message *m = NULL;
		while (pick(k, "cancel", 1.0, NULL, &m) == 1)
			settle(k, m, "ack", 0);
	}
	if (sent != AKS_ECANCELLED)
		aks_check_fail("send with a cancelled call returned %s (%d), want AKS_ECANCELLED",
		               sent == AKS_OK ? "success" : aks_strerror(sent), sent);
	if (late != AKS_ETIMEOUT)
		aks_check_fail("send after its call's deadline returned %s (%d), want AKS_ETIMEOUT",
		               late == AKS_OK ? "success" : aks_strerror(late), late);
	aks_check_note("the cancelled fetch returned after %.2fs", took);
}

/* nack(1 s): redelivered after about a second, with receive_count one higher. */
void aks_check_transport_nack_redelivers(void)
{
	tc *k = open_main(AKS_QUEUE_INPUT);
	double t0 = now_s();
	send_simple("nack", 1, "again");
	aks_message *m = expect_msg(k, "nack", window_s(), "the message sent");
	expect_count(m, 1, now_s() - t0, "the first delivery");
	uint32_t count = m->receive_count;
	const double delay = 1.0;
	settle(k, m, "nack", delay);
	t0 = now_s();
	m = expect_msg(k, "nack", delay + window_s(), "the nacked message");
	double at = now_s() - t0;
	if (!body_is(m, "again"))
		aks_check_fail("a message other than the nacked one came back");
	if (at < delay * 0.5)
		aks_check_fail("nack(%.1f) was redelivered after %.2fs: the delay was not honoured",
		               delay, at);
	expect_count(m, count + 1, at - delay, "after a nack");
	aks_check_note("nack(%.1f): redelivered after %.2fs", delay, at);
	settle(k, m, "ack", 0);
}

/* A consumer closed with a message unsettled: the message comes back, receive_count one
 * higher, at the latest after the ack wait. */
void aks_check_transport_close_redelivers(void)
{
	tc *first = open_main(AKS_QUEUE_INPUT);
	double t0 = now_s();
	send_simple("close", 1, "left");
	aks_message *m = expect_msg(first, "close", window_s(), "the message sent");
	expect_count(m, 1, now_s() - t0, "the first delivery");
	uint32_t count = m->receive_count;
	close_main(first);
	t0 = now_s();
	tc *second = open_main(AKS_QUEUE_INPUT);
	double limit = aks_check.ack_wait > 0 ? aks_check.ack_wait + window_s() : TC_MARGIN_S;
	int rc = pick(second, "close", limit, NULL, &m);
	double at = now_s() - t0;
	if (rc < 0)
		aks_check_fail("%s", second->why);
	if (rc == 0 && aks_check.ack_wait > 0)
		aks_check_fail("a message left unsettled by a closed consumer was not redelivered "
		               "within %.1fs (ack wait %gs)",
		               limit, aks_check.ack_wait);
	if (rc == 0) {
		aks_check_note("NOT VERIFIED: transport_close_redelivers: the message was not "
		               "redelivered within %.0fs, and without --ack-wait the suite cannot "
		               "wait out the transport's ack wait",
		               limit);
		aks_check_skip();
	}
	expect_count(m, count + 1, at - aks_check.ack_wait, "after the consumer closed");
	aks_check_note("redelivered %.2fs after the consumer closed", at);
	settle(second, m, "ack", 0);
}

static void need_ack_wait(const char *check)
{
	if (aks_check.ack_wait > 0)
		return;
	aks_check_note("NOT VERIFIED: %s: the transport's ack wait is unknown; run with "
	               "--ack-wait SECONDS (its configured ack wait)",
	               check);
	aks_check_skip();
}

/* A message held unsettled past the ack wait is redelivered to another consumer, not
 * before the ack wait, with receive_count one higher. */
void aks_check_transport_ack_wait_redelivers(void)
{
	need_ack_wait("transport_ack_wait_redelivers");
	const double wait = aks_check.ack_wait;
	tc *holder = open_main(AKS_QUEUE_INPUT), *other = open_main(AKS_QUEUE_INPUT);
	double t0 = now_s();
	send_simple("ackwait", 1, "held");
	aks_message *m = expect_msg(holder, "ackwait", window_s(), "the message sent");
	expect_count(m, 1, now_s() - t0, "the first delivery");
	uint32_t count = m->receive_count;
	t0 = now_s();
	aks_message *again =
	    expect_msg(other, "ackwait", wait + window_s(), "a message held past the ack wait");
	double at = now_s() - t0;
	/* The delivery was a little before t0: allow for it. */
	if (at < wait * 0.9 - 0.25)
		aks_check_fail(
		    "a held message was redelivered %.2fs after its delivery, before the "
		    "ack wait (%gs): two copies were in flight",
		    at, wait);
	expect_count(again, count + 1, at - wait, "after the ack wait");
	aks_check_note("redelivered %.2fs after delivery (ack wait %gs)", at, wait);
	settle(other, again, "ack", 0);
}

/* in_progress restarts the ack wait: a message held for twice the ack wait with
 * in_progress calls is not redelivered. */
void aks_check_transport_in_progress(void)
{
	need_transport();
	if (!HAS_OP(in_progress)) {
		aks_check_note("NOT VERIFIED: transport_in_progress: the transport has no "
		               "in_progress (optional): an execution longer than its ack wait is "
		               "redelivered");
		aks_check_skip();
	}
	need_ack_wait("transport_in_progress");
	const double wait = aks_check.ack_wait, every = wait / 3, hold = 2 * wait + 0.5;
	tc *holder = open_main(AKS_QUEUE_INPUT), *other = open_main(AKS_QUEUE_INPUT);
	send_simple("inprog", 1, "long");
	aks_message *m = expect_msg(holder, "inprog", window_s(), "the message sent");
	double t0 = now_s(), last = t0;
	int calls = 0;
	while (now_s() - t0 < hold) {
		if (now_s() - last >= every) {
			aks_error *err = NULL;
			aks_check_expect("in_progress", tr.ops->in_progress(holder->c, m, &err),
			                 AKS_OK, err);
			last = now_s();
			calls++;
		}
		double until = last + every < t0 + hold ? last + every : t0 + hold;
		aks_message *copy = NULL;
		int rc = pick(other, "inprog", until - now_s(), NULL, &copy);
		if (rc < 0)
			aks_check_fail("%s", other->why);
		if (rc == 1)
			aks_check_fail("a message kept in progress (%d calls, one every %.2fs) was "
			               "redelivered %.2fs after delivery (ack wait %gs)",
			               calls, every, now_s() - t0, wait);
	}
	settle(holder, m, "ack", 0);
	aks_check_note("held %.1fs (ack wait %gs) with %d in_progress calls, not redelivered", hold,
	               wait, calls);
}

/* Polls depth of `queue` until it counts `want` or `window` seconds pass (a service may count
 * late, as SQS's approximate count does); returns the last count. */
static uint64_t depth_reaches(const char *queue, uint64_t want, double window)
{
	double until = now_s() + window;
	useconds_t pause = 10 * 1000;
	for (;;) {
		uint64_t n = UINT64_MAX;
		aks_error *err = NULL;
		aks_check_expect("depth", tr.ops->depth(tr.impl, queue, &n, &err), AKS_OK, err);
		if (n == want || now_s() + pause / 1e6 > until)
			return n;
		usleep(pause);
		if (pause < 250 * 1000)
			pause *= 2;
	}
}

/* Empties k's queue of what earlier runs or checks left, with fetches that do not wait. */
static void drain(tc *k)
{
	size_t n = 1;
	for (int i = 0; i < 5 && n > 0; i++)
		timed_fetch(k, 0, NULL, &n, NULL);
}

/* depth counts what waits on a queue: 0 when empty; 3 once two messages of a group and one
 * without are sent, the other queue's unchanged; 2 while one of them is held; 0 once all are
 * acked. An unknown queue is an error. */
void aks_check_transport_depth(void)
{
	need_transport();
	if (!HAS_OP(depth)) {
		aks_check_note("NOT VERIFIED: transport_depth: the transport has no depth "
		               "(optional): a worker exports no queue depth for an autoscaler");
		aks_check_skip();
	}
	uint64_t n = 0;
	aks_error *err = NULL;
	int rc = tr.ops->depth(tr.impl, "no-such-queue", &n, &err);
	aks_error_free(err);
	if (rc >= 0)
		aks_check_fail("depth of the unknown queue 'no-such-queue' returned %d (want an "
		               "error)",
		               rc);
	tc *in = open_main(AKS_QUEUE_INPUT), *out = open_main(AKS_QUEUE_OUTPUT);
	drain(in);
	drain(out);
	const char *names[] = {AKS_QUEUE_INPUT, AKS_QUEUE_OUTPUT};
	for (int i = 0; i < 2; i++)
		if ((n = depth_reaches(names[i], 0, TC_MARGIN_S)) != 0)
			aks_check_fail(
			    "the empty %s queue's depth is %llu after %.0fs (want 0; the "
			    "suite needs queues reserved for testing)",
			    names[i], (unsigned long long)n, TC_MARGIN_S);
	double t0 = now_s();
	send_simple("depth", 1, "first");
	send_simple("depth", 1, "second");
	send_simple("depth", 0, "free");
	if ((n = depth_reaches(AKS_QUEUE_INPUT, 3, TC_MARGIN_S)) != 3)
		aks_check_fail(
		    "the input queue's depth is %llu %.0fs after 3 messages were sent to "
		    "it (want 3)",
		    (unsigned long long)n, TC_MARGIN_S);
	double counted = now_s() - t0;
	if ((n = depth_reaches(AKS_QUEUE_OUTPUT, 0, 0)) != 0)
		aks_check_fail("the output queue's depth is %llu after messages were sent to the "
		               "input queue only (want 0: the queues are not apart)",
		               (unsigned long long)n);
	aks_message *held = expect_msg(in, "depth", window_s(), "a message sent");
	double since = now_s();
	if ((n = depth_reaches(AKS_QUEUE_INPUT, 2, held_window_s(since))) != 2)
		aks_check_fail("the input queue's depth is %llu while one of its 3 messages is "
		               "held (want 2)",
		               (unsigned long long)n);
	settle(in, held, "ack", 0);
	for (int left = 2; left > 0; left--)
		settle(in, expect_msg(in, "depth", window_s(), "a message sent"), "ack", 0);
	t0 = now_s();
	if ((n = depth_reaches(AKS_QUEUE_INPUT, 0, TC_MARGIN_S)) != 0)
		aks_check_fail("the input queue's depth is %llu %.0fs after its messages were "
		               "acked (want 0)",
		               (unsigned long long)n, TC_MARGIN_S);
	aks_check_note("3 sent counted after %.2fs, 2 with one held, 0 after the acks after %.2fs",
	               counted, now_s() - t0);
}

/* Runs a pick on both agents at once: exactly one gets the next message of `tag`; the
 * other must get nothing while that message stays unsettled (watched for watch_s). Returns
 * the winner, its message in *out. */
static agent *race(agent *ag[2], const char *tag, const char *what, aks_message **out)
{
	for (int j = 0; j < 2; j++)
		agent_pick(ag[j], tag, window_s());
	agent *won = NULL, *lost = NULL;
	pthread_mutex_lock(&ag_mu);
	for (;;) {
		bool done0 = agent_idle(ag[0]), done1 = agent_idle(ag[1]);
		/* Both may have ended with a message: the first to get one holds it. */
		for (int j = 0; j < 2; j++)
			if (agent_idle(ag[j]) && ag[j]->rc != 0 && (!won || ag[j]->at < won->at))
				won = ag[j], lost = ag[1 - j];
		if (won || (done0 && done1))
			break;
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 1;
		pthread_cond_timedwait(&ag_cv, &ag_mu, &until);
	}
	pthread_mutex_unlock(&ag_mu);
	if (won && won->rc < 0)
		aks_check_fail("consumer %c: %s", won->name, won->k.why);
	if (!won)
		aks_check_fail("%s was not delivered within %.1fs", what, window_s());
	/* The loser watches on while the winner holds the message. */
	double watch = watch_s();
	pthread_mutex_lock(&ag_mu);
	bool running = !agent_idle(lost);
	pthread_mutex_unlock(&ag_mu);
	if (!running && lost->rc != 0) {
		/* It ended with a message (or an error) of its own: judged below. */
	} else if (running) {
		double end = won->at + watch;
		pthread_mutex_lock(&ag_mu);
		while (!agent_idle(lost) && now_s() < end) {
			struct timespec until;
			clock_gettime(CLOCK_REALTIME, &until);
			double left = end - now_s();
			until.tv_nsec += (long)(left * 1e9);
			until.tv_sec += until.tv_nsec / 1000000000L;
			until.tv_nsec %= 1000000000L;
			pthread_cond_timedwait(&ag_cv, &ag_mu, &until);
		}
		pthread_mutex_unlock(&ag_mu);
		aks_cancel_trigger(lost->stop);
	} else {
		agent_pick(lost, tag, watch);
	}
	int rc = agent_wait(lost, TC_HUNG_S);
	if (rc < 0)
		aks_check_fail("consumer %c: %s", lost->name, lost->k.why);
	if (rc == 1) {
		char b1[48], b2[48];
		aks_check_fail("consumer %c got '%s' of the group while '%s' was unsettled at "
		               "consumer %c: more than one message of a group in flight",
		               lost->name, shown(lost->msg, b1, sizeof(b1)),
		               shown(won->msg, b2, sizeof(b2)), won->name);
	}
	*out = won->msg;
	return won;
}

/* Per-group FIFO, one message in flight per group across consumers on two threads: while a
 * message of the group is unsettled the other consumer gets nothing of it; after the ack
 * the next one comes, in order. */
void aks_check_transport_group_fifo(void)
{
	enum { N = 4 };
	agent *ag[2] = {agent_start(0, AKS_QUEUE_INPUT), agent_start(1, AKS_QUEUE_INPUT)};
	char body[16], b[48], what[64];
	for (int i = 1; i <= N; i++) {
		snprintf(body, sizeof(body), "fifo %d", i);
		send_simple("fifo", 1, body);
	}
	int wins[2] = {0, 0};
	for (int i = 1; i <= N; i++) {
		aks_message *m = NULL;
		snprintf(what, sizeof(what), "message %d of the group", i);
		agent *w = race(ag, "fifo", what, &m);
		snprintf(body, sizeof(body), "fifo %d", i);
		if (!body_is(m, body))
			aks_check_fail("'%s' came as message %d of the group: order lost",
			               shown(m, b, sizeof(b)), i);
		wins[w->name - 'A']++;
		agent_ack(w, m);
	}
	aks_check_note("%d messages of one group in order, each alone in flight (watched %.1fs "
	               "each); consumer A got %d, B %d",
	               N, watch_s(), wins[0], wins[1]);
}

/* Groups are independent: while a message of one group is in flight, another group's
 * message is delivered (one of several groups, as a transport may map groups onto a fixed
 * number of lanes). */
void aks_check_transport_groups_in_parallel(void)
{
	enum { OTHERS = 4 };
	agent *a = agent_start(0, AKS_QUEUE_INPUT), *b = agent_start(1, AKS_QUEUE_INPUT);
	send_simple("par", 1, "first group");
	agent_pick(a, "par", window_s());
	if (agent_wait(a, window_s() + TC_HUNG_S) != 1)
		aks_check_fail("consumer A: %s",
		               a->rc < 0 ? a->k.why : "the first group's message never came");
	aks_message *held = a->msg;
	double since = a->at;
	for (int g = 2; g <= OTHERS + 1; g++)
		send_simple("par", g, "other group");
	double t0 = now_s();
	agent_pick(b, "par", held_window_s(since));
	int rc = agent_wait(b, window_s() + TC_HUNG_S);
	if (rc < 0)
		aks_check_fail("consumer B: %s", b->k.why);
	if (rc == 0 || !body_is(b->msg, "other group"))
		aks_check_fail(
		    "while one group's message was in flight, no message of %d other "
		    "groups %s: groups are not delivered in parallel",
		    OTHERS, rc == 0 ? "was delivered" : "came (the held one came again instead)");
	aks_check_note("another group's message (%s) came %.2fs after it was sent, while the "
	               "first group's was in flight",
	               b->msg->group_id ? b->msg->group_id : "?", b->at - t0);
	agent_ack(b, b->msg);
	agent_ack(a, held);
	for (int left = OTHERS - 1; left > 0; left--) {
		agent_pick(a, "par", window_s());
		if (agent_wait(a, window_s() + TC_HUNG_S) != 1)
			aks_check_fail("consumer A: %s",
			               a->rc < 0 ? a->k.why : "a sent message never came");
		agent_ack(a, a->msg);
	}
}

/* A second send with the same dedup_id is accepted and dropped: behind it in the group, the
 * next message (another dedup id) comes right after the first. */
void aks_check_transport_dedup(void)
{
	char d1[96], d2[96], b[48];
	snprintf(d1, sizeof(d1), "%s-dedup-1", tr.run);
	snprintf(d2, sizeof(d2), "%s-dedup-2", tr.run);
	send_ok(&(out_msg){
	    .queue = AKS_QUEUE_INPUT, .tag = "dedup", .group = 1, .dedup = d1, .body = "original"});
	aks_error *err = NULL;
	aks_check_expect("a second send with the same dedup_id",
	                 send_raw(&(out_msg){.queue = AKS_QUEUE_INPUT,
	                                     .tag = "dedup",
	                                     .group = 1,
	                                     .dedup = d1,
	                                     .body = "duplicate"},
	                          NULL, &err),
	                 AKS_OK, err);
	send_ok(&(out_msg){
	    .queue = AKS_QUEUE_INPUT, .tag = "dedup", .group = 1, .dedup = d2, .body = "next"});
	tc *k = open_main(AKS_QUEUE_INPUT);
	aks_message *m = expect_msg(k, "dedup", window_s(), "the first message");
	if (!body_is(m, "original"))
		aks_check_fail("'%s' came first (want 'original')", shown(m, b, sizeof(b)));
	settle(k, m, "ack", 0);
	m = expect_msg(k, "dedup", window_s(), "the message after the duplicate");
	bool dup = body_is(m, "duplicate");
	if (!body_is(m, "next")) {
		settle(k, m, "ack", 0);
		if (dup) {
			aks_message *n = NULL;
			if (pick(k, "dedup", window_s(), NULL, &n) == 1)
				settle(k, n, "ack", 0);
			aks_check_fail("a second send with the same dedup_id was delivered");
		}
		aks_check_fail("'%s' came second (want 'next')", shown(m, b, sizeof(b)));
	}
	settle(k, m, "ack", 0);
}

/* dead_letter: the message is settled (the group's next one comes) and never comes back,
 * past the ack wait; nor does the acked one. */
void aks_check_transport_dead_letter(void)
{
	need_transport();
	if (!HAS_OP(dead_letter)) {
		aks_check_note("NOT VERIFIED: transport_dead_letter: the transport has no "
		               "dead_letter (optional): the host acks instead");
		aks_check_skip();
	}
	tc *k = open_main(AKS_QUEUE_INPUT);
	send_simple("dead", 1, "doomed");
	send_simple("dead", 1, "next");
	char b[48];
	aks_message *m = expect_msg(k, "dead", window_s(), "the first message");
	if (!body_is(m, "doomed"))
		aks_check_fail("'%s' came first (want 'doomed')", shown(m, b, sizeof(b)));
	settle(k, m, "dead_letter", 0);
	double t0 = now_s();
	m = expect_msg(k, "dead", window_s(), "the group's message after the dead-lettered one");
	if (!body_is(m, "next"))
		aks_check_fail("'%s' came after dead_letter (want 'next': a dead-lettered message "
		               "was redelivered)",
		               shown(m, b, sizeof(b)));
	settle(k, m, "ack", 0);
	double watch = aks_check.ack_wait > 0 ? aks_check.ack_wait + 1.0 : 2 * TC_WATCH_S;
	double left = t0 + watch - now_s();
	if (left > 0 && pick(k, "dead", left, NULL, &m) == 1) {
		bool doomed = body_is(m, "doomed");
		settle(k, m, "ack", 0);
		aks_check_fail("%s came back %.2fs after it was settled",
		               doomed ? "a dead-lettered message" : "an acked message",
		               now_s() - t0);
	}
	if (aks_check.ack_wait <= 0)
		aks_check_note("watched %.1fs for a redelivery; without --ack-wait, one after the "
		               "ack wait is not excluded",
		               watch);
}

/* The transport closes; one opened anew delivers what was sent before (durably stored). */
void aks_check_transport_reopens(void)
{
	need_transport();
	send_simple("reopen", 1, "kept");
	if (tr.ops->fini)
		tr.ops->fini(tr.impl);
	tr.impl = NULL;
	aks_error *err = NULL;
	int rc = tr.ops->init(aks_host_services(), aks_check.config, &tr.impl, &err);
	if (rc != AKS_OK)
		tr.impl = NULL;
	aks_check_expect("the transport's init (again)", rc, AKS_OK, err);
	tc *k = open_main(AKS_QUEUE_INPUT);
	aks_message *m =
	    expect_msg(k, "reopen", window_s(), "a message sent before the transport was closed");
	if (!body_is(m, "kept"))
		aks_check_fail("the message sent before the reopen came back changed");
	settle(k, m, "ack", 0);
	close_main(k);
	if (tr.ops->fini)
		tr.ops->fini(tr.impl);
	tr.impl = NULL;
}

/* ---- teardown --------------------------------------------------------------------------- */

/* Stops the agents and closes every consumer. */
static void release(void)
{
	for (size_t i = 0; i < sizeof(tr.agents) / sizeof(tr.agents[0]); i++)
		agent_stop(&tr.agents[i]);
	for (size_t i = 0; i < sizeof(tr.mains) / sizeof(tr.mains[0]); i++)
		if (tr.main_open[i])
			close_main(&tr.mains[i]);
}

void aks_check_transport_teardown(void)
{
	release();
	if (tr.foreign)
		aks_check_note("acked %u message%s not sent by this run out of the way: the suite "
		               "must run on queues reserved for testing",
		               tr.foreign, tr.foreign == 1 ? "" : "s");
	if (tr.strays)
		aks_check_note("acked %u message%s left by an earlier check of this run", tr.strays,
		               tr.strays == 1 ? "" : "s");
	tr.foreign = tr.strays = 0;
}

void aks_check_transport_close(void)
{
	release();
	if (tr.impl && tr.ops && tr.ops->fini && !tr.abandoned)
		tr.ops->fini(tr.impl);
	tr.impl = NULL;
}
