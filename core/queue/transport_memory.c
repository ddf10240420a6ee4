/*
 * core/queue/transport_memory.c - the built-in in_memory transport: both queues live in this
 * process, for the single-process test topology (reference §5.5, paired with the in_memory
 * response store). It gives every guarantee of <aksandbox/transport.h>:
 *
 *  - Each queue is one list, oldest first, under the transport's mutex. A message stays in it
 *    until it is acked or dead-lettered; while a consumer holds it, it is "in flight" with a
 *    lease that ends ack_wait seconds after the delivery (or after in_progress). A lease that
 *    ran out, a nack and a consumer_close give the message back; its next delivery counts one
 *    more receive.
 *  - Per-group FIFO, one in flight per group: only the oldest message of a group (its head)
 *    is ever delivered, and it stays the head until it is acked or dead-lettered. Messages
 *    without a group are delivered whenever they are not in flight.
 *  - De-duplication: the dedup ids sent within the last dedup_window seconds, in a hash set
 *    with a FIFO for expiry; a repeat is accepted and dropped.
 *
 * A delivery is a small object of the consumer's own (the aks_message the host sees), which
 * shares the message's immutable bytes by reference count. So a copy redelivered elsewhere
 * after its lease ran out never changes the stale copy under its holder, and a late settle
 * is recognised: it only settles the message when no other delivery holds it.
 *
 * Waiting: a fetch that finds nothing sleeps in poll(2) on its consumer's eventfd and the
 * call's cancellation fd, until the earliest time something could become deliverable (a
 * lease or nack delay ending) or its wait ends. A condition variable cannot also wake on the
 * cancellation fd, hence the eventfd. Whatever may make a message deliverable (send, ack,
 * dead_letter, nack, close) writes to the eventfds of the waiting consumers; a new timer
 * earlier than a waiter's wake-up time does too. Nothing polls on a fixed period.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "queue/transport.h"
#include "util/util.h"

#define MT_NAME "in_memory"
/* Hash buckets for the groups and the dedup ids of one queue: the test topology holds a few
 * hundred of each at most; chains stay short. */
#define MT_BUCKETS 256
/* The longest configurable ack_wait or dedup_window, seconds (keeps ms arithmetic safe). */
#define MT_MAX_SECONDS 1e9

typedef struct mt_msg mt_msg;
typedef struct mt_group mt_group;
typedef struct mt_delivery mt_delivery;

/* A queued message. Its bytes never change after send, so deliveries share them. */
struct mt_msg {
	char *body;
	size_t body_len;
	char **attrs; /* NULL-terminated key, value pairs */
	char *group_id, *dedup_id;
	char id[24];
	mt_group *group;     /* NULL: no group */
	uint32_t deliveries; /* so far */
	int64_t visible_at;  /* not delivered before this (a nack's delay), ms */
	int64_t lease_until; /* while held: the lease ends, ms */
	mt_delivery *holder; /* the delivery that holds it; NULL: not in flight */
	unsigned refs;       /* the queue's (while queued) and one per delivery */
	bool queued;         /* in the queue: not acked or dead-lettered yet */
	mt_msg *prev, *next; /* the queue, oldest first */
	mt_msg *gnext;       /* the next message of its group */
};

struct mt_group {
	char *id;
	mt_msg *head, *tail; /* the group's messages in the queue, oldest first */
	mt_group *next;      /* hash chain */
};

typedef struct mt_dedup {
	char *id;
	int64_t until;
	struct mt_dedup *next;  /* hash chain */
	struct mt_dedup *older; /* expiry FIFO, towards the newest */
} mt_dedup;

typedef struct mt_queue {
	const char *name;
	mt_msg *head, *tail;
	mt_group *groups[MT_BUCKETS];
	mt_dedup *dedup[MT_BUCKETS];
	mt_dedup *dedup_first, *dedup_last; /* oldest, newest */
	aks_consumer *waiters;              /* consumers asleep in fetch */
} mt_queue;

struct aks_transport_impl {
	const aks_host_api *host;
	pthread_mutex_t mu;
	int64_t ack_wait_ms, dedup_ms;
	mt_queue q[2];
	uint64_t seq;
	uint64_t dead_lettered;
	unsigned consumers;
};

/* One delivery of a message to a consumer: the host's aks_message. */
struct mt_delivery {
	aks_message m; /* first: the host's pointer is ours */
	mt_msg *msg;
	mt_delivery *next; /* the consumer's unsettled deliveries */
};

struct aks_consumer {
	aks_transport_impl *t;
	mt_queue *q;
	int wake_fd;         /* eventfd: something may be deliverable */
	int64_t wake_at;     /* while asleep: when it wakes by itself (INT64_MAX: never) */
	aks_consumer *wnext; /* the queue's waiters */
	mt_delivery *held;
};

/* ---- helpers ------------------------------------------------------------------------- */

static unsigned hash_str(const char *s)
{
	uint32_t h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h % MT_BUCKETS;
}

static int64_t seconds_to_ms(double s)
{
	return (int64_t)(s * 1000.0 + 0.5);
}

static int64_t add_ms(int64_t a, int64_t b)
{
	return a > INT64_MAX - b ? INT64_MAX : a + b;
}

static int queue_index(const char *queue)
{
	if (queue && strcmp(queue, AKS_QUEUE_INPUT) == 0)
		return 0;
	if (queue && strcmp(queue, AKS_QUEUE_OUTPUT) == 0)
		return 1;
	return -1;
}

static void wake(aks_consumer *c)
{
	uint64_t one = 1;
	ssize_t n = write(c->wake_fd, &one, sizeof(one));
	(void)n; /* a full counter still reads as readable */
}

/* Something may have become deliverable: every waiter looks again. */
static void wake_all(mt_queue *q)
{
	for (aks_consumer *w = q->waiters; w; w = w->wnext)
		wake(w);
}

/* Something becomes deliverable at `at` (a lease or a nack delay ending): the waiters that
 * would sleep past it look again, to sleep until then. */
static void timer_added(mt_queue *q, int64_t at)
{
	for (aks_consumer *w = q->waiters; w; w = w->wnext)
		if (w->wake_at > at)
			wake(w);
}

static void msg_free(mt_msg *m)
{
	aks__strv_free(m->attrs);
	free(m->body);
	free(m->group_id);
	free(m->dedup_id);
	free(m);
}

static void msg_unref(mt_msg *m)
{
	if (--m->refs == 0)
		msg_free(m);
}

static mt_group *group_find(mt_queue *q, const char *id, bool create)
{
	unsigned b = hash_str(id);
	for (mt_group *g = q->groups[b]; g; g = g->next)
		if (strcmp(g->id, id) == 0)
			return g;
	if (!create)
		return NULL;
	mt_group *g = calloc(1, sizeof(*g));
	if (!g || !(g->id = strdup(id))) {
		free(g);
		return NULL;
	}
	g->next = q->groups[b];
	q->groups[b] = g;
	return g;
}

static void group_drop(mt_queue *q, mt_group *g)
{
	for (mt_group **pp = &q->groups[hash_str(g->id)]; *pp; pp = &(*pp)->next)
		if (*pp == g) {
			*pp = g->next;
			break;
		}
	free(g->id);
	free(g);
}

/* Takes a message out of the queue for good (acked or dead-lettered). It is always its
 * group's head: only heads are delivered, and a head stays one until it leaves. */
static void msg_remove(mt_queue *q, mt_msg *m)
{
	if (m->prev)
		m->prev->next = m->next;
	else
		q->head = m->next;
	if (m->next)
		m->next->prev = m->prev;
	else
		q->tail = m->prev;
	mt_group *g = m->group;
	if (g) {
		mt_msg **pp = &g->head;
		while (*pp && *pp != m)
			pp = &(*pp)->gnext;
		if (*pp)
			*pp = m->gnext;
		if (g->tail == m) {
			g->tail = NULL;
			for (mt_msg *x = g->head; x; x = x->gnext)
				g->tail = x;
		}
		if (!g->head)
			group_drop(q, g);
		m->group = NULL;
	}
	m->queued = false;
	m->holder = NULL;
	msg_unref(m);
}

static void dedup_expire(mt_queue *q, int64_t now)
{
	while (q->dedup_first && q->dedup_first->until <= now) {
		mt_dedup *d = q->dedup_first;
		q->dedup_first = d->older;
		if (!q->dedup_first)
			q->dedup_last = NULL;
		for (mt_dedup **pp = &q->dedup[hash_str(d->id)]; *pp; pp = &(*pp)->next)
			if (*pp == d) {
				*pp = d->next;
				break;
			}
		free(d->id);
		free(d);
	}
}

static bool dedup_seen(mt_queue *q, const char *id)
{
	for (mt_dedup *d = q->dedup[hash_str(id)]; d; d = d->next)
		if (strcmp(d->id, id) == 0)
			return true;
	return false;
}

/* Remembers a dedup id until `until`; the window is constant, so the FIFO stays sorted. */
static int dedup_add(mt_queue *q, const char *id, int64_t until)
{
	mt_dedup *d = calloc(1, sizeof(*d));
	if (!d || !(d->id = strdup(id))) {
		free(d);
		return -1;
	}
	d->until = until;
	unsigned b = hash_str(id);
	d->next = q->dedup[b];
	q->dedup[b] = d;
	if (q->dedup_last)
		q->dedup_last->older = d;
	else
		q->dedup_first = d;
	q->dedup_last = d;
	return 0;
}

/* ---- init and fini ------------------------------------------------------------------- */

static int mt_init(const aks_host_api *host, const aks_config *config, aks_transport_impl **out,
                   aks_error **err)
{
	double ack_wait = 300, dedup_window = 300;
	if (config && (host->config_double(config, "ack_wait", &ack_wait) != AKS_OK ||
	               host->config_double(config, "dedup_window", &dedup_window) != AKS_OK))
		return host->error_set(err, AKS_ECONFIG, MT_NAME ": cannot read the config block");
	if (!(ack_wait >= 0.001) || ack_wait > MT_MAX_SECONDS)
		return host->error_set(err, AKS_ECONFIG,
		                       MT_NAME ": ack_wait must be a number of seconds >= 0.001, "
		                               "not %g",
		                       ack_wait);
	if (!(dedup_window >= 0) || dedup_window > MT_MAX_SECONDS)
		return host->error_set(err, AKS_ECONFIG,
		                       MT_NAME ": dedup_window must be a number of seconds >= 0, "
		                               "not %g",
		                       dedup_window);
	aks_transport_impl *t = calloc(1, sizeof(*t));
	if (!t)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	if (pthread_mutex_init(&t->mu, NULL) != 0) {
		free(t);
		return host->error_set(err, AKS_ENOMEM, MT_NAME ": cannot create a mutex");
	}
	t->host = host;
	t->ack_wait_ms = seconds_to_ms(ack_wait);
	t->dedup_ms = seconds_to_ms(dedup_window);
	t->q[0].name = AKS_QUEUE_INPUT;
	t->q[1].name = AKS_QUEUE_OUTPUT;
	*out = t;
	return AKS_OK;
}

static void mt_fini(aks_transport_impl *t)
{
	if (!t)
		return;
	if (t->consumers)
		t->host->log(AKS_LOG_WARNING, MT_NAME,
		             "closed with %u consumer(s) still open; their messages are lost",
		             t->consumers);
	for (int i = 0; i < 2; i++) {
		mt_queue *q = &t->q[i];
		for (mt_msg *m = q->head, *next; m; m = next) {
			next = m->next;
			/* A delivery of a consumer left open keeps its message (and leaks with
			 * it): never free under it. */
			m->queued = false;
			m->group = NULL;
			msg_unref(m);
		}
		q->head = q->tail = NULL;
		for (unsigned b = 0; b < MT_BUCKETS; b++)
			while (q->groups[b])
				group_drop(q, q->groups[b]);
		dedup_expire(q, INT64_MAX);
	}
	pthread_mutex_destroy(&t->mu);
	free(t);
}

/* ---- send ---------------------------------------------------------------------------- */

static int copy_attrs(const char *const *src, char ***out)
{
	size_t n = 0;
	while (src && src[n] && src[n + 1])
		n += 2;
	char **a = calloc(n + 1, sizeof(*a));
	if (!a)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (!(a[i] = strdup(src[i]))) {
			aks__strv_free(a);
			return -1;
		}
	*out = a;
	return 0;
}

static mt_msg *msg_copy(const aks_message *src)
{
	mt_msg *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->body_len = src->body_len;
	m->body = malloc(src->body_len + 1);
	if (m->body) {
		if (src->body_len)
			memcpy(m->body, src->body, src->body_len);
		m->body[src->body_len] = '\0';
	}
	bool ok = m->body && copy_attrs(src->attributes, &m->attrs) == 0;
	if (ok && src->group_id)
		ok = (m->group_id = strdup(src->group_id)) != NULL;
	if (ok && src->dedup_id)
		ok = (m->dedup_id = strdup(src->dedup_id)) != NULL;
	if (!ok) {
		msg_free(m);
		return NULL;
	}
	return m;
}

static int mt_send(aks_transport_impl *t, const char *queue, const aks_message *msg,
                   const aks_call *call, aks_error **err)
{
	const aks_host_api *h = t->host;
	int qi = queue_index(queue);
	if (qi < 0)
		return h->error_set(err, AKS_EINVAL, MT_NAME ": unknown queue '%s'",
		                    queue ? queue : "(null)");
	if (!msg || (!msg->body && msg->body_len))
		return h->error_set(err, AKS_EINVAL, MT_NAME ": send: bad message");
	if (call && h->cancelled(call))
		return h->error_set(err, AKS_ECANCELLED, MT_NAME ": send cancelled");
	if (call && call->deadline_ms > 0 && h->now_ms() >= call->deadline_ms)
		return h->error_set(err, AKS_ETIMEOUT, MT_NAME ": send: the deadline has passed");
	/* Copy outside the mutex; a duplicate's copy is simply freed. */
	mt_msg *m = msg_copy(msg);
	if (!m)
		return h->error_set(err, AKS_ENOMEM, "out of memory");
	mt_queue *q = &t->q[qi];
	pthread_mutex_lock(&t->mu);
	int64_t now = h->now_ms();
	dedup_expire(q, now);
	bool dedup = m->dedup_id && t->dedup_ms > 0;
	if (dedup && dedup_seen(q, m->dedup_id)) {
		h->log(AKS_LOG_DEBUG, MT_NAME, "duplicate of dedup id '%s' on queue %s dropped",
		       m->dedup_id, q->name);
		pthread_mutex_unlock(&t->mu);
		msg_free(m);
		return AKS_OK;
	}
	if (m->group_id)
		m->group = group_find(q, m->group_id, true);
	if ((m->group_id && !m->group) ||
	    (dedup && dedup_add(q, m->dedup_id, add_ms(now, t->dedup_ms)) < 0)) {
		if (m->group && !m->group->head)
			group_drop(q, m->group); /* created for this message only */
		pthread_mutex_unlock(&t->mu);
		msg_free(m);
		return h->error_set(err, AKS_ENOMEM, "out of memory");
	}
	snprintf(m->id, sizeof(m->id), "%llu", (unsigned long long)++t->seq);
	m->visible_at = now;
	m->queued = true;
	m->refs = 1;
	m->prev = q->tail;
	if (q->tail)
		q->tail->next = m;
	else
		q->head = m;
	q->tail = m;
	if (m->group) {
		if (m->group->tail)
			m->group->tail->gnext = m;
		else
			m->group->head = m;
		m->group->tail = m;
	}
	wake_all(q);
	pthread_mutex_unlock(&t->mu);
	return AKS_OK;
}

/* ---- consumers ----------------------------------------------------------------------- */

static int mt_consumer_open(aks_transport_impl *t, const char *queue, aks_consumer **out,
                            aks_error **err)
{
	const aks_host_api *h = t->host;
	int qi = queue_index(queue);
	if (qi < 0)
		return h->error_set(err, AKS_EINVAL, MT_NAME ": unknown queue '%s'",
		                    queue ? queue : "(null)");
	aks_consumer *c = calloc(1, sizeof(*c));
	if (!c)
		return h->error_set(err, AKS_ENOMEM, "out of memory");
	c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->wake_fd < 0) {
		int e = errno;
		free(c);
		return h->error_set(err, AKS_EIO, MT_NAME ": cannot create an eventfd: %s",
		                    strerror(e));
	}
	c->t = t;
	c->q = &t->q[qi];
	pthread_mutex_lock(&t->mu);
	t->consumers++;
	pthread_mutex_unlock(&t->mu);
	*out = c;
	return AKS_OK;
}

/* Gives a held message back to the queue, deliverable at once. */
static void hand_back(mt_queue *q, mt_msg *m)
{
	m->holder = NULL;
	wake_all(q);
}

static void mt_consumer_close(aks_consumer *c)
{
	if (!c)
		return;
	aks_transport_impl *t = c->t;
	pthread_mutex_lock(&t->mu);
	while (c->held) {
		mt_delivery *d = c->held;
		c->held = d->next;
		if (d->msg->holder == d)
			hand_back(c->q, d->msg);
		msg_unref(d->msg);
		free(d);
	}
	t->consumers--;
	pthread_mutex_unlock(&t->mu);
	close(c->wake_fd);
	free(c);
}

/* Hands out up to max - *n deliverable messages, oldest first; ends leases that ran out on
 * the way. Returns the earliest time at which a message not deliverable now could become so
 * (INT64_MAX: none). Called with the mutex held. */
static int64_t collect(aks_consumer *c, aks_message **out, size_t max, size_t *n, int64_t now,
                       int *rc, aks_error **err)
{
	aks_transport_impl *t = c->t;
	int64_t next = INT64_MAX;
	for (mt_msg *m = c->q->head; m; m = m->next) {
		if (m->holder && m->lease_until <= now) {
			m->holder = NULL; /* its holder's copy is stale from now on */
			t->host->log(
			    AKS_LOG_DEBUG, MT_NAME,
			    "message %s on queue %s not settled within ack_wait: redelivering",
			    m->id, c->q->name);
			wake_all(c->q); /* for when this fetch has no room left for it */
		}
		if (m->holder) {
			if (m->lease_until < next)
				next = m->lease_until;
			continue;
		}
		if (m->group && m->group->head != m)
			continue;
		if (m->visible_at > now) {
			if (m->visible_at < next)
				next = m->visible_at;
			continue;
		}
		if (*n >= max)
			break; /* full: this fetch will not wait, so the next event is moot */
		mt_delivery *d = calloc(1, sizeof(*d));
		if (!d) {
			*rc = t->host->error_set(err, AKS_ENOMEM, "out of memory");
			break;
		}
		m->deliveries++;
		m->holder = d;
		m->lease_until = add_ms(now, t->ack_wait_ms);
		m->refs++;
		d->msg = m;
		d->m.struct_version = AKS_MESSAGE_VERSION;
		d->m.struct_size = sizeof(aks_message);
		d->m.body = m->body;
		d->m.body_len = m->body_len;
		d->m.attributes = (const char *const *)m->attrs;
		d->m.group_id = m->group_id;
		d->m.dedup_id = m->dedup_id;
		d->m.receive_count = m->deliveries;
		d->m.message_id = m->id;
		d->next = c->held;
		c->held = d;
		out[(*n)++] = &d->m;
		timer_added(c->q, m->lease_until); /* a waiter must look again when it ends */
	}
	return next;
}

static void waiter_add(aks_consumer *c, int64_t wake_at)
{
	c->wake_at = wake_at;
	c->wnext = c->q->waiters;
	c->q->waiters = c;
}

static void waiter_remove(aks_consumer *c)
{
	for (aks_consumer **pp = &c->q->waiters; *pp; pp = &(*pp)->wnext)
		if (*pp == c) {
			*pp = c->wnext;
			break;
		}
	c->wnext = NULL;
}

static int mt_fetch(aks_consumer *c, aks_message **out, size_t max, size_t *n, int64_t wait_ms,
                    const aks_call *call, aks_error **err)
{
	aks_transport_impl *t = c->t;
	const aks_host_api *h = t->host;
	if (!out || !n || max < 1)
		return h->error_set(err, AKS_EINVAL, MT_NAME ": fetch: bad arguments");
	*n = 0;
	int64_t deadline = add_ms(h->now_ms(), wait_ms > 0 ? wait_ms : 0);
	if (call && call->deadline_ms > 0 && call->deadline_ms < deadline)
		deadline = call->deadline_ms;
	int cancel_fd = call ? h->cancel_fd(call) : -1;
	int rc = AKS_OK;
	pthread_mutex_lock(&t->mu);
	for (;;) {
		int64_t now = h->now_ms();
		int64_t next = collect(c, out, max, n, now, &rc, err);
		if (*n > 0 || rc < 0 || now >= deadline || (call && h->cancelled(call)))
			break;
		int64_t until = next < deadline ? next : deadline;
		/* Register before letting go of the mutex: a wake-up from then on stays in the
		 * eventfd's counter until poll sees it. */
		waiter_add(c, until);
		pthread_mutex_unlock(&t->mu);
		int64_t ms = until - now;
		if (ms < 1)
			ms = 1; /* never poll's "forever" */
		struct pollfd pfd[2] = {{c->wake_fd, POLLIN, 0}, {cancel_fd, POLLIN, 0}};
		poll(pfd, cancel_fd >= 0 ? 2 : 1, ms > INT32_MAX ? INT32_MAX : (int)ms);
		uint64_t count;
		ssize_t got = read(c->wake_fd, &count, sizeof(count));
		(void)got; /* EAGAIN: nothing to drain */
		pthread_mutex_lock(&t->mu);
		waiter_remove(c);
	}
	pthread_mutex_unlock(&t->mu);
	/* What was handed out stays handed out even after a failure (the caller settles it). */
	return *n > 0 ? AKS_OK : rc;
}

/* ---- settlement ---------------------------------------------------------------------- */

/* Unlinks msg from the consumer's unsettled deliveries; NULL if it is not one of them. */
static mt_delivery *take_held(aks_consumer *c, aks_message *msg)
{
	for (mt_delivery **pp = &c->held; *pp; pp = &(*pp)->next)
		if (&(*pp)->m == msg) {
			mt_delivery *d = *pp;
			*pp = d->next;
			return d;
		}
	return NULL;
}

static int not_held(aks_consumer *c, const char *what, aks_error **err)
{
	return c->t->host->error_set(
	    err, AKS_EINVAL, MT_NAME ": %s: not an unsettled message of this consumer", what);
}

/* Whether a settle by d may act on its message: d holds it, or d's lease ran out and nobody
 * else took it since (the late settle of the contract: the work was done after all). */
static bool may_settle(const mt_delivery *d)
{
	const mt_msg *m = d->msg;
	return m->queued && (m->holder == d || !m->holder);
}

/* ack and dead_letter: the message leaves the queue for good. */
static int finish(aks_consumer *c, aks_message *msg, bool dead, aks_error **err)
{
	aks_transport_impl *t = c->t;
	pthread_mutex_lock(&t->mu);
	mt_delivery *d = take_held(c, msg);
	if (!d) {
		pthread_mutex_unlock(&t->mu);
		return not_held(c, dead ? "dead_letter" : "ack", err);
	}
	mt_msg *m = d->msg;
	if (may_settle(d)) {
		if (dead) {
			t->dead_lettered++;
			t->host->log(
			    AKS_LOG_WARNING, MT_NAME,
			    "message %s of queue %s (group %s) dead-lettered after %u "
			    "deliveries: dropped, never redelivered (%llu dead-lettered so "
			    "far)",
			    m->id, c->q->name, m->group_id ? m->group_id : "-", d->m.receive_count,
			    (unsigned long long)t->dead_lettered);
		}
		msg_remove(c->q, m);
		wake_all(c->q); /* the group's next message, if any, is deliverable now */
	} else {
		t->host->log(AKS_LOG_DEBUG, MT_NAME,
		             "late %s of message %s on queue %s ignored: redelivered meanwhile",
		             dead ? "dead_letter" : "ack", m->id, c->q->name);
	}
	msg_unref(m);
	free(d);
	pthread_mutex_unlock(&t->mu);
	return AKS_OK;
}

static int mt_ack(aks_consumer *c, aks_message *msg, aks_error **err)
{
	return finish(c, msg, false, err);
}

static int mt_dead_letter(aks_consumer *c, aks_message *msg, aks_error **err)
{
	return finish(c, msg, true, err);
}

static int mt_nack(aks_consumer *c, aks_message *msg, double delay_s, aks_error **err)
{
	aks_transport_impl *t = c->t;
	pthread_mutex_lock(&t->mu);
	mt_delivery *d = take_held(c, msg);
	if (!d) {
		pthread_mutex_unlock(&t->mu);
		return not_held(c, "nack", err);
	}
	mt_msg *m = d->msg;
	/* Only the holder's nack counts: a stale copy's would delay a message already
	 * waiting for (or in) its redelivery. */
	if (m->queued && m->holder == d) {
		int64_t now = t->host->now_ms();
		if (!(delay_s > 0))
			delay_s = 0;
		if (delay_s > MT_MAX_SECONDS)
			delay_s = MT_MAX_SECONDS;
		m->visible_at = add_ms(now, seconds_to_ms(delay_s));
		m->holder = NULL;
		if (m->visible_at <= now)
			wake_all(c->q);
		else
			timer_added(c->q, m->visible_at);
	}
	msg_unref(m);
	free(d);
	pthread_mutex_unlock(&t->mu);
	return AKS_OK;
}

static int mt_in_progress(aks_consumer *c, aks_message *msg, aks_error **err)
{
	aks_transport_impl *t = c->t;
	int rc = AKS_OK;
	pthread_mutex_lock(&t->mu);
	mt_delivery *d = c->held;
	while (d && &d->m != msg)
		d = d->next;
	if (!d) {
		pthread_mutex_unlock(&t->mu);
		return not_held(c, "in_progress", err);
	}
	mt_msg *m = d->msg;
	int64_t now = t->host->now_ms();
	if (m->holder == d && m->lease_until <= now)
		m->holder = NULL; /* ran out: handled below like any lapsed lease */
	if (m->queued && m->holder == d) {
		m->lease_until = add_ms(now, t->ack_wait_ms);
	} else if (m->queued && !m->holder && m->deliveries == d->m.receive_count &&
	           m->visible_at <= now) {
		/* The lease lapsed but nobody took the message since: this holder takes it back. */
		m->holder = d;
		m->lease_until = add_ms(now, t->ack_wait_ms);
		timer_added(c->q, m->lease_until);
	} else {
		rc = t->host->error_set(err, AKS_EBROKER,
		                        MT_NAME ": in_progress of message %s on queue %s: its "
		                                "ack_wait ran out and it was %s",
		                        m->id, c->q->name,
		                        m->queued ? "redelivered" : "settled elsewhere");
	}
	pthread_mutex_unlock(&t->mu);
	return rc;
}

/* Every queued message no consumer holds: sent and not fetched yet, or handed back (a nack's
 * delay included). A walk of the list: the test topology queues a few hundred at most. */
static int mt_depth(aks_transport_impl *t, const char *queue, uint64_t *waiting, aks_error **err)
{
	int qi = queue_index(queue);
	if (qi < 0)
		return t->host->error_set(err, AKS_EINVAL, MT_NAME ": unknown queue '%s'",
		                          queue ? queue : "(null)");
	uint64_t n = 0;
	pthread_mutex_lock(&t->mu);
	int64_t now = t->host->now_ms();
	for (const mt_msg *m = t->q[qi].head; m; m = m->next)
		if (!m->holder || m->lease_until <= now) /* a lapsed lease is handed back */
			n++;
	pthread_mutex_unlock(&t->mu);
	*waiting = n;
	return AKS_OK;
}

/* ---- descriptor ---------------------------------------------------------------------- */

static const aks_transport_ops mt_ops = {
    .struct_version = AKS_TRANSPORT_OPS_VERSION,
    .struct_size = sizeof(aks_transport_ops),
    .init = mt_init,
    .fini = mt_fini,
    .send = mt_send,
    .consumer_open = mt_consumer_open,
    .fetch = mt_fetch,
    .ack = mt_ack,
    .nack = mt_nack,
    .dead_letter = mt_dead_letter,
    .consumer_close = mt_consumer_close,
    .in_progress = mt_in_progress,
    .depth = mt_depth,
};

static const aks_config_key mt_keys[] = {
    AKS_CONFIG_KEY("ack_wait", AKS_CONFIG_DOUBLE, false, "300",
                   "seconds a fetched message may stay unsettled before it is redelivered"),
    AKS_CONFIG_KEY("dedup_window", AKS_CONFIG_DOUBLE, false, "300",
                   "seconds during which a second send with the same dedup_id is dropped"),
    AKS_CONFIG_END,
};

const aks_plugin_descriptor aks__memory_transport_descriptor = {
    AKS_DESCRIPTOR_VERSION,
    sizeof(aks_plugin_descriptor),
    AKS_ABI_MAJOR,
    AKS_ABI_MINOR,
    AKS_PLUGIN_TRANSPORT,
    MT_NAME,
    PACKAGE_VERSION,
    "Apache-2.0",
    "the built-in queue transport for the single-process test topology: both queues in this "
    "process, per-group FIFO, redelivery after ack_wait, de-duplication",
    mt_keys,
    &mt_ops,
    {NULL, NULL, NULL, NULL},
};
