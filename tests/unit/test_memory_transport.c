/* Unit tests: the built-in in_memory transport (core/queue/transport_memory.c), driven through its
 * aks_transport_ops with the host's services table, as the queue broker drives a transport.
 * Each test proves one guarantee of <aksandbox/transport.h>: per-group FIFO with one message
 * in flight per group under concurrent consumers, groups in parallel, redelivery after
 * ack_wait and after a nack's delay, de-duplication, dead-lettering, hand-back on close,
 * in_progress, and a fetch that sleeps until woken (by a send, a close or a cancellation). */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <aksandbox/transport.h>

#include "core/config/block.h"
#include "core/config/yaml_tree.h"
#include "core/plugin/host_api.h"
#include "core/queue/transport.h"

/* ---- a host whose log the tests can read ------------------------------------------------ */

static aks_host_api g_host;
static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_warning[1024]; /* the last warning logged */

static void capture_log(int level, const char *plugin, const char *fmt, ...)
{
	(void)plugin;
	if (level != AKS_LOG_WARNING)
		return;
	va_list ap;
	va_start(ap, fmt);
	pthread_mutex_lock(&g_log_mu);
	vsnprintf(g_warning, sizeof(g_warning), fmt, ap);
	pthread_mutex_unlock(&g_log_mu);
	va_end(ap);
}

static const aks_host_api *host(void)
{
	if (!g_host.struct_size) {
		g_host = *aks__host_api();
		g_host.log = capture_log;
	}
	return &g_host;
}

static void last_warning(char *buf, size_t size)
{
	pthread_mutex_lock(&g_log_mu);
	snprintf(buf, size, "%s", g_warning);
	g_warning[0] = '\0';
	pthread_mutex_unlock(&g_log_mu);
}

/* ---- helpers ------------------------------------------------------------------------- */

static const aks_transport_ops *ops(void)
{
	return aks__memory_transport_descriptor.ops;
}

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	while (nanosleep(&ts, &ts) != 0)
		;
}

/* Builds the config block from YAML (a mapping, or "" for the defaults) the way the host
 * does, against the descriptor's schema. */
static int build_config(const char *yaml, aks_config **out, aks_error **err)
{
	aks_node *root = NULL;
	int rc = AKS_OK;
	if (*yaml)
		rc = aks__yaml_parse(yaml, strlen(yaml), "config.yaml", &root, err);
	if (rc == AKS_OK)
		rc = aks__config_build(&aks__memory_transport_descriptor, root, "in_memory", out,
		                       err);
	aks__node_free(root);
	return rc;
}

static aks_transport_impl *open_t(const char *yaml)
{
	aks_config *cfg = NULL;
	aks_error *err = NULL;
	if (build_config(yaml, &cfg, &err) != AKS_OK)
		fail_msg("config: %s", aks_error_message(err));
	aks_transport_impl *t = NULL;
	int rc = ops()->init(host(), cfg, &t, &err);
	aks_config_free(cfg); /* the transport keeps nothing of it */
	if (rc != AKS_OK)
		fail_msg("init: %s", aks_error_message(err));
	return t;
}

static aks_consumer *consumer(aks_transport_impl *t, const char *queue)
{
	aks_consumer *c = NULL;
	aks_error *err = NULL;
	if (ops()->consumer_open(t, queue, &c, &err) != AKS_OK)
		fail_msg("consumer_open: %s", aks_error_message(err));
	return c;
}

static void send_msg(aks_transport_impl *t, const char *queue, const char *body, const char *group,
                     const char *dedup)
{
	static const char *const attrs[] = {"request_id", "r-1", "kind", "test", NULL};
	aks_message m = {
	    AKS_MESSAGE_VERSION, sizeof(m), body, strlen(body), attrs, group, dedup, 0, NULL};
	aks_error *err = NULL;
	if (ops()->send(t, queue, &m, NULL, &err) != AKS_OK)
		fail_msg("send: %s", aks_error_message(err));
}

/* Fetches at most max, waiting up to wait_ms. */
static size_t fetch(aks_consumer *c, aks_message **out, size_t max, int64_t wait_ms)
{
	size_t n = 99;
	aks_error *err = NULL;
	if (ops()->fetch(c, out, max, &n, wait_ms, NULL, &err) != AKS_OK)
		fail_msg("fetch: %s", aks_error_message(err));
	assert_true(n <= max);
	return n;
}

static aks_message *fetch_one(aks_consumer *c, int64_t wait_ms)
{
	aks_message *m = NULL;
	return fetch(c, &m, 1, wait_ms) ? m : NULL;
}

static void ack(aks_consumer *c, aks_message *m)
{
	aks_error *err = NULL;
	if (ops()->ack(c, m, &err) != AKS_OK)
		fail_msg("ack: %s", aks_error_message(err));
}

static void assert_body(const aks_message *m, const char *body)
{
	assert_non_null(m);
	assert_int_equal(m->body_len, strlen(body));
	assert_memory_equal(m->body, body, strlen(body));
}

/* ---- the basics ------------------------------------------------------------------------ */

/* What is sent comes out as it went in (bytes, attributes, group, dedup id), once, on its
 * own queue only; an acked message never comes back, even past ack_wait. */
static void test_round_trip(void **state)
{
	(void)state;
	aks_transport_impl *t = open_t("ack_wait: 0.2\n");
	aks_consumer *in = consumer(t, AKS_QUEUE_INPUT);
	aks_consumer *out = consumer(t, AKS_QUEUE_OUTPUT);

	static const char bin[] = "a\0b\xff";
	static const char *const attrs[] = {"request_id", "task-7", "k", "", NULL};
	aks_message m = {AKS_MESSAGE_VERSION,
	                 sizeof(m),
	                 bin,
	                 sizeof(bin) - 1,
	                 attrs,
	                 "sess-1",
	                 "task-7",
	                 0,
	                 NULL};
	aks_error *err = NULL;
	assert_int_equal(ops()->send(t, AKS_QUEUE_INPUT, &m, NULL, &err), AKS_OK);
	send_msg(t, AKS_QUEUE_OUTPUT, "completion", NULL, NULL);

	aks_message *got = fetch_one(in, 0);
	assert_non_null(got);
	assert_int_equal(got->struct_version, AKS_MESSAGE_VERSION);
	assert_int_equal(got->struct_size, sizeof(aks_message));
	assert_int_equal(got->body_len, 4);
	assert_memory_equal(got->body, bin, 4);
	assert_string_equal(got->attributes[0], "request_id");
	assert_string_equal(got->attributes[1], "task-7");
	assert_string_equal(got->attributes[2], "k");
	assert_string_equal(got->attributes[3], "");
	assert_null(got->attributes[4]);
	assert_string_equal(got->group_id, "sess-1");
	assert_string_equal(got->dedup_id, "task-7");
	assert_int_equal(got->receive_count, 1);
	assert_non_null(got->message_id);
	assert_null(fetch_one(in, 0)); /* one message in the input queue, and it is held */
	ack(in, got);

	aks_message *done = fetch_one(out, 0);
	assert_body(done, "completion");
	assert_null(done->group_id);
	assert_null(done->dedup_id);
	assert_int_equal(done->attributes[1][0], 'r');
	ack(out, done);

	/* Acked means gone: nothing comes back after the ack wait. */
	double t0 = mono();
	assert_null(fetch_one(in, 500));
	assert_null(fetch_one(out, 0));
	assert_true(mono() - t0 >= 0.45); /* and the fetch did wait */

	/* A message with no attributes gets an empty list, never NULL. */
	aks_message bare = {AKS_MESSAGE_VERSION, sizeof(bare), "", 0, NULL, NULL, NULL, 0, NULL};
	assert_int_equal(ops()->send(t, AKS_QUEUE_INPUT, &bare, NULL, &err), AKS_OK);
	got = fetch_one(in, 0);
	assert_non_null(got);
	assert_non_null(got->attributes);
	assert_null(got->attributes[0]);
	assert_int_equal(got->body_len, 0);
	ack(in, got);

	ops()->consumer_close(in);
	ops()->consumer_close(out);
	ops()->fini(t);
}

/* Bad arguments and foreign or already settled messages are refused. */
static void test_errors(void **state)
{
	(void)state;
	aks_config *cfg = NULL;
	aks_error *err = NULL;
	aks_transport_impl *t = NULL;
	const char *bad[] = {"ack_wait: 0\n", "ack_wait: -1\n", "dedup_window: -0.5\n"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(build_config(bad[i], &cfg, &err), AKS_OK);
		assert_int_equal(ops()->init(host(), cfg, &t, &err), AKS_ECONFIG);
		assert_non_null(strstr(aks_error_message(err), "in_memory"));
		aks_error_free(err);
		err = NULL;
		aks_config_free(cfg);
	}
	/* An unknown key is the schema's business: refused before init. */
	assert_int_equal(build_config("ackwait: 1\n", &cfg, &err), AKS_ECONFIG);
	aks_error_free(err);
	err = NULL;

	t = open_t("");
	aks_consumer *c = NULL;
	assert_int_equal(ops()->consumer_open(t, "elsewhere", &c, &err), AKS_EINVAL);
	aks_error_free(err);
	err = NULL;
	aks_message m = {AKS_MESSAGE_VERSION, sizeof(m), "x", 1, NULL, NULL, NULL, 0, NULL};
	assert_int_equal(ops()->send(t, "elsewhere", &m, NULL, &err), AKS_EINVAL);
	aks_error_free(err);
	err = NULL;

	c = consumer(t, AKS_QUEUE_INPUT);
	aks_consumer *other = consumer(t, AKS_QUEUE_INPUT);
	send_msg(t, AKS_QUEUE_INPUT, "one", NULL, NULL);
	aks_message *got = fetch_one(c, 0);
	assert_non_null(got);
	aks_message foreign = *got;
	assert_int_equal(ops()->ack(c, &foreign, &err), AKS_EINVAL);
	aks_error_free(err);
	err = NULL;
	assert_int_equal(ops()->ack(other, got, &err), AKS_EINVAL); /* not that consumer's */
	aks_error_free(err);
	err = NULL;
	ack(c, got);
	assert_int_equal(ops()->nack(c, got, 0, &err), AKS_EINVAL); /* settled already */
	aks_error_free(err);
	err = NULL;
	size_t n = 0;
	aks_message *out[1];
	assert_int_equal(ops()->fetch(c, out, 0, &n, 0, NULL, &err), AKS_EINVAL);
	aks_error_free(err);
	ops()->consumer_close(c);
	ops()->consumer_close(other);
	ops()->fini(t);
}

/* ---- groups ---------------------------------------------------------------------------- */

/* A group's next message waits for its predecessor's ack, whichever consumer asks, while
 * other groups and ungrouped messages (no order, no limit) are delivered meanwhile. */
static void test_group_serial_and_parallel(void **state)
{
	(void)state;
	aks_transport_impl *t = open_t("");
	aks_consumer *a = consumer(t, AKS_QUEUE_INPUT);
	aks_consumer *b = consumer(t, AKS_QUEUE_INPUT);
	send_msg(t, AKS_QUEUE_INPUT, "g1-1", "g1", NULL);
	send_msg(t, AKS_QUEUE_INPUT, "g1-2", "g1", NULL);
	send_msg(t, AKS_QUEUE_INPUT, "g2-1", "g2", NULL);
	send_msg(t, AKS_QUEUE_INPUT, "u-1", NULL, NULL);
	send_msg(t, AKS_QUEUE_INPUT, "u-2", NULL, NULL);
	send_msg(t, AKS_QUEUE_INPUT, "u-3", NULL, NULL);

	/* One batch: the head of each group, and every ungrouped message. */
	aks_message *got[8];
	assert_int_equal(fetch(a, got, 8, 0), 5);
	const char *want[] = {"g1-1", "g2-1", "u-1", "u-2", "u-3"};
	for (int i = 0; i < 5; i++)
		assert_body(got[i], want[i]);
	/* g1-2 stays behind g1-1 for every consumer. */
	aks_message *none[8];
	assert_int_equal(fetch(b, none, 8, 100), 0);
	/* Settling the others releases nothing of g1. */
	for (int i = 1; i < 5; i++)
		ack(a, got[i]);
	assert_int_equal(fetch(b, none, 8, 0), 0);
	ack(a, got[0]);
	aks_message *next = fetch_one(b, 0);
	assert_body(next, "g1-2");
	assert_int_equal(next->receive_count, 1);
	ack(b, next);
	assert_null(fetch_one(a, 0));
	ops()->consumer_close(a);
	ops()->consumer_close(b);
	ops()->fini(t);
}

#define FIFO_THREADS 4
#define FIFO_GROUPS  8
#define FIFO_PER     40
#define FIFO_LOOSE   40 /* ungrouped messages */

typedef struct fifo_state {
	aks_transport_impl *t;
	atomic_int inflight[FIFO_GROUPS]; /* held by some consumer right now */
	int next[FIFO_GROUPS];            /* the sequence number due next (under inflight) */
	atomic_int done;
	atomic_int violations, out_of_order, errors;
	atomic_int busy_groups, max_busy_groups;
} fifo_state;

static void *fifo_worker(void *arg)
{
	fifo_state *s = arg;
	aks_consumer *c = NULL;
	aks_error *err = NULL;
	if (ops()->consumer_open(s->t, AKS_QUEUE_INPUT, &c, &err) != AKS_OK) {
		atomic_fetch_add(&s->errors, 1);
		aks_error_free(err);
		return NULL;
	}
	const int total = FIFO_GROUPS * FIFO_PER + FIFO_LOOSE;
	unsigned seed = (unsigned)(uintptr_t)&c;
	double give_up = mono() + 60;
	while (atomic_load(&s->done) < total && mono() < give_up) {
		aks_message *got[3];
		size_t n = 0;
		if (ops()->fetch(c, got, 3, &n, 50, NULL, &err) != AKS_OK) {
			atomic_fetch_add(&s->errors, 1);
			aks_error_free(err);
			err = NULL;
			continue;
		}
		/* Everything in the batch is in flight from now until its ack. */
		int g[3];
		for (size_t i = 0; i < n; i++) {
			g[i] = got[i]->group_id ? atoi(got[i]->group_id + 1) : -1;
			if (g[i] < 0)
				continue;
			if (atomic_exchange(&s->inflight[g[i]], 1) != 0)
				atomic_fetch_add(&s->violations, 1);
			int busy = atomic_fetch_add(&s->busy_groups, 1) + 1;
			int seen = atomic_load(&s->max_busy_groups);
			while (busy > seen &&
			       !atomic_compare_exchange_weak(&s->max_busy_groups, &seen, busy))
				;
		}
		for (size_t i = 0; i < n; i++) {
			if (g[i] >= 0) {
				char body[32];
				snprintf(body, sizeof(body), "%.*s", (int)got[i]->body_len,
				         got[i]->body);
				int seq = atoi(strchr(body, ':') + 1);
				if (seq != s->next[g[i]])
					atomic_fetch_add(&s->out_of_order, 1);
				s->next[g[i]] = seq + 1;
			}
			usleep(200 + (unsigned)(rand_r(&seed) % 300)); /* the "execution" */
			if (g[i] >= 0) {
				atomic_fetch_sub(&s->busy_groups, 1);
				atomic_store(&s->inflight[g[i]], 0);
			}
			if (ops()->ack(c, got[i], &err) != AKS_OK) {
				atomic_fetch_add(&s->errors, 1);
				aks_error_free(err);
				err = NULL;
			}
			atomic_fetch_add(&s->done, 1);
		}
	}
	ops()->consumer_close(c);
	return NULL;
}

/* Four consumer threads drain eight groups sent interleaved: each group's messages come in
 * order and never two at once (checked at every fetch), several groups are in flight at the
 * same time, and nothing is lost or delivered twice. */
static void test_fifo_under_concurrency(void **state)
{
	(void)state;
	fifo_state *s = calloc(1, sizeof(*s));
	assert_non_null(s);
	s->t = open_t("");
	pthread_t th[FIFO_THREADS];
	/* Half is queued before the consumers start, half while they run. */
	int sent = 0, loose = 0;
	for (int pass = 0; pass < 2; pass++) {
		for (int i = pass * FIFO_PER / 2; i < (pass + 1) * FIFO_PER / 2; i++) {
			for (int g = 0; g < FIFO_GROUPS; g++) {
				char body[32], group[8];
				snprintf(group, sizeof(group), "g%d", g);
				snprintf(body, sizeof(body), "%s:%d", group, i);
				send_msg(s->t, AKS_QUEUE_INPUT, body, group, NULL);
				sent++;
			}
			if (loose < FIFO_LOOSE) {
				send_msg(s->t, AKS_QUEUE_INPUT, "loose:0", NULL, NULL);
				loose++;
			}
		}
		if (pass == 0)
			for (int i = 0; i < FIFO_THREADS; i++)
				assert_int_equal(pthread_create(&th[i], NULL, fifo_worker, s), 0);
	}
	assert_int_equal(loose, FIFO_LOOSE);
	for (int i = 0; i < FIFO_THREADS; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(atomic_load(&s->errors), 0);
	assert_int_equal(atomic_load(&s->violations), 0);
	assert_int_equal(atomic_load(&s->out_of_order), 0);
	assert_int_equal(atomic_load(&s->done), sent + FIFO_LOOSE);
	for (int g = 0; g < FIFO_GROUPS; g++)
		assert_int_equal(s->next[g], FIFO_PER); /* every one, each once */
	/* Different groups did run in parallel. */
	assert_true(atomic_load(&s->max_busy_groups) >= 2);
	print_message("# at most %d groups in flight at once\n", atomic_load(&s->max_busy_groups));
	/* Nothing left over. */
	aks_consumer *c = consumer(s->t, AKS_QUEUE_INPUT);
	assert_null(fetch_one(c, 0));
	ops()->consumer_close(c);
	ops()->fini(s->t);
	free(s);
}

/* ---- redelivery ------------------------------------------------------------------------ */

/* A message not settled within ack_wait is delivered again, to a consumer that was asleep
 * in fetch (woken at the lease's end, not at its own wait's end), with receive_count 2; its
 * group stays blocked meanwhile. The stale holder's late ack does not settle the new copy. */
static void test_redelivery_after_ack_wait(void **state)
{
	(void)state;
	aks_transport_impl *t = open_t("ack_wait: 0.3\n");
	aks_consumer *a = consumer(t, AKS_QUEUE_INPUT);
	aks_consumer *b = consumer(t, AKS_QUEUE_INPUT);
	send_msg(t, AKS_QUEUE_INPUT, "first", "s", NULL);
	send_msg(t, AKS_QUEUE_INPUT, "second", "s", NULL);
	double t0 = mono();
	aks_message *m1 = fetch_one(a, 0);
	assert_body(m1, "first");
	assert_int_equal(m1->receive_count, 1);

	aks_message *m2 = fetch_one(b, 5000);
	double waited = mono() - t0;
	assert_body(m2, "first"); /* not "second": the group is still blocked */
	assert_int_equal(m2->receive_count, 2);
	assert_string_equal(m2->message_id, m1->message_id);
	assert_true(waited >= 0.28);
	assert_true(waited < 2.0);

	/* The stale copy is still readable, unchanged, and its late ack is harmless. */
	assert_body(m1, "first");
	assert_int_equal(m1->receive_count, 1);
	ack(a, m1);
	assert_null(fetch_one(a, 0)); /* "second" still waits for b's copy */
	ack(b, m2);
	aks_message *m3 = fetch_one(a, 0);
	assert_body(m3, "second");
	assert_int_equal(m3->receive_count, 1);

	/* A lease that ran out with nobody fetching since: the holder's late ack still counts
	 * (the work was done), so the message is not redelivered. */
	sleep_s(0.4);
	ack(a, m3);
	assert_null(fetch_one(b, 500));
	ops()->consumer_close(a);
	ops()->consumer_close(b);
	ops()->fini(t);
}

/* A nack redelivers after its delay (not before), with receive_count one higher; a group's
 * head waiting out its delay keeps the group's next message back. */
static void test_nack_delay(void **state)
{
	(void)state;
	aks_transport_impl *t = open_t("");
	aks_consumer *c = consumer(t, AKS_QUEUE_INPUT);
	send_msg(t, AKS_QUEUE_INPUT, "head", "g", NULL);
	send_msg(t, AKS_QUEUE_INPUT, "tail", "g", NULL);
	aks_message *m = fetch_one(c, 0);
	assert_body(m, "head");
	aks_error *err = NULL;
	double t0 = mono();
	assert_int_equal(ops()->nack(c, m, 0.4, &err), AKS_OK);
	assert_null(fetch_one(c, 0)); /* neither the head (delayed) nor the tail (behind it) */
	m = fetch_one(c, 5000);
	double waited = mono() - t0;
	assert_body(m, "head");
	assert_int_equal(m->receive_count, 2);
	assert_true(waited >= 0.38);
	assert_true(waited < 2.0);
	/* No delay: at once. */
	assert_int_equal(ops()->nack(c, m, 0, &err), AKS_OK);
	m = fetch_one(c, 0);
	assert_body(m, "head");
	assert_int_equal(m->receive_count, 3);
	ack(c, m);
	m = fetch_one(c, 0);
	assert_body(m, "tail");
	assert_int_equal(m->receive_count, 1);
	ack(c, m);
	ops()->consumer_close(c);
	ops()->fini(t);
}

typedef struct waiter_arg {
	aks_transport_impl *t;
	aks_consumer *c; /* opened by the thread itself */
	const aks_call *call;
	int64_t wait_ms;
	double started, returned;
	size_t n;
	char body[32];
	int rc;
} waiter_arg;

/* Opens a consumer, fetches one message waiting up to wait_ms, acks it, closes. */
static void *fetch_waiter(void *p)
{
	waiter_arg *w = p;
	aks_error *err = NULL;
	w->rc = ops()->consumer_open(w->t, AKS_QUEUE_INPUT, &w->c, &err);
	if (w->rc == AKS_OK) {
		aks_message *m = NULL;
		w->started = mono();
		w->rc = ops()->fetch(w->c, &m, 1, &w->n, w->wait_ms, w->call, &err);
		w->returned = mono();
		if (w->rc == AKS_OK && w->n == 1) {
			snprintf(w->body, sizeof(w->body), "%.*s", (int)m->body_len, m->body);
			w->rc = ops()->ack(w->c, m, &err);
		}
		ops()->consumer_close(w->c);
	}
	aks_error_free(err);
	return NULL;
}

/* in_progress restarts the lease: a message worked on for longer than ack_wait is not
 * redelivered to a consumer waiting in fetch all along while its holder keeps saying so;
 * one whose lease ran out and was redelivered cannot be claimed back. */
static void test_in_progress(void **state)
{
	(void)state;
	aks_transport_impl *t = open_t("ack_wait: 0.4\n");
	aks_consumer *a = consumer(t, AKS_QUEUE_INPUT);
	send_msg(t, AKS_QUEUE_INPUT, "long", "g", NULL);
	aks_message *m = fetch_one(a, 0);
	assert_non_null(m);
	waiter_arg w = {.t = t, .wait_ms = 1300};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, fetch_waiter, &w), 0);
	aks_error *err = NULL;
	for (int i = 0; i < 6; i++) { /* 1.2 s in all, 3 times ack_wait */
		sleep_s(0.2);
		assert_int_equal(ops()->in_progress(a, m, &err), AKS_OK);
	}
	ack(a, m);
	pthread_join(th, NULL);
	assert_int_equal(w.rc, AKS_OK);
	assert_int_equal(w.n, 0); /* it never got the message */

	aks_consumer *b = consumer(t, AKS_QUEUE_INPUT);
	send_msg(t, AKS_QUEUE_INPUT, "lapsed", "g", NULL);
	m = fetch_one(a, 0);
	assert_non_null(m);
	aks_message *again = fetch_one(b, 2000); /* after the lease ran out */
	assert_non_null(again);
	assert_int_equal(again->receive_count, 2);
	assert_int_equal(ops()->in_progress(a, m, &err), AKS_EBROKER);
	aks_error_free(err);
	err = NULL;
	assert_int_equal(ops()->in_progress(b, again, &err), AKS_OK);
	ack(a, m); /* late: ignored, b holds it */
	assert_null(fetch_one(a, 0));
	ack(b, again);
	ops()->consumer_close(a);
	ops()->consumer_close(b);
	ops()->fini(t);
}

/* ---- dedup, dead letter, close ---------------------------------------------------------- */

/* A second send with the same dedup id within the window is accepted and dropped, even once
 * the first was acked; after the window, the id is new again. Other ids and messages without
 * one are never dropped. */
static void test_dedup(void **state)
{
	(void)state;
	aks_transport_impl *t = open_t("dedup_window: 0.5\n");
	aks_consumer *c = consumer(t, AKS_QUEUE_INPUT);
	send_msg(t, AKS_QUEUE_INPUT, "one", "g", "task-1");
	send_msg(t, AKS_QUEUE_INPUT, "one again", "g", "task-1");
	send_msg(t, AKS_QUEUE_INPUT, "two", "g", "task-2");
	send_msg(t, AKS_QUEUE_INPUT, "plain", NULL, NULL);
	send_msg(t, AKS_QUEUE_INPUT, "plain", NULL, NULL);
	aks_message *got[8];
	assert_int_equal(fetch(c, got, 8, 0), 3); /* one, plain, plain */
	assert_body(got[0], "one");
	for (int i = 0; i < 3; i++)
		ack(c, got[i]);
	send_msg(t, AKS_QUEUE_INPUT, "one late", "g", "task-1"); /* acked, still in the window */
	aks_message *m = fetch_one(c, 0);
	assert_body(m, "two");
	ack(c, m);
	assert_null(fetch_one(c, 0));
	sleep_s(0.6);
	send_msg(t, AKS_QUEUE_INPUT, "one after", "g", "task-1");
	m = fetch_one(c, 0);
	assert_body(m, "one after");
	ack(c, m);
	ops()->consumer_close(c);
	ops()->fini(t);

	/* dedup_window 0: no de-duplication. */
	t = open_t("dedup_window: 0\n");
	c = consumer(t, AKS_QUEUE_INPUT);
	send_msg(t, AKS_QUEUE_INPUT, "x", NULL, "same");
	send_msg(t, AKS_QUEUE_INPUT, "y", NULL, "same");
	assert_int_equal(fetch(c, got, 8, 0), 2);
	ack(c, got[0]);
	ack(c, got[1]);
	ops()->consumer_close(c);
	ops()->fini(t);
}

/* A dead-lettered message is gone for good (not redelivered past ack_wait), is counted, and
 * unblocks its group. */
static void test_dead_letter(void **state)
{
	(void)state;
	aks_transport_impl *t = open_t("ack_wait: 0.2\n");
	aks_consumer *c = consumer(t, AKS_QUEUE_INPUT);
	send_msg(t, AKS_QUEUE_INPUT, "poison", "g", NULL);
	send_msg(t, AKS_QUEUE_INPUT, "next", "g", NULL);
	send_msg(t, AKS_QUEUE_INPUT, "poison 2", NULL, NULL);
	char warning[1024];
	last_warning(warning, sizeof(warning));
	aks_message *got[4];
	assert_int_equal(fetch(c, got, 4, 0), 2); /* poison, poison 2 */
	aks_error *err = NULL;
	assert_int_equal(ops()->dead_letter(c, got[0], &err), AKS_OK);
	last_warning(warning, sizeof(warning));
	assert_non_null(strstr(warning, "dead-lettered"));
	assert_non_null(strstr(warning, "(1 dead-lettered so far)"));
	assert_int_equal(ops()->dead_letter(c, got[1], &err), AKS_OK);
	last_warning(warning, sizeof(warning));
	assert_non_null(strstr(warning, "(2 dead-lettered so far)"));
	aks_message *m = fetch_one(c, 0);
	assert_body(m, "next");
	assert_int_equal(m->receive_count, 1);
	ack(c, m);
	assert_null(fetch_one(c, 600)); /* three ack waits: nothing comes back */
	ops()->consumer_close(c);
	ops()->fini(t);
}

/* Closing a consumer hands its unsettled messages back at once (no ack_wait: the default
 * 300 s), which wakes a consumer asleep in fetch. */
static void test_close_hands_back(void **state)
{
	(void)state;
	aks_transport_impl *t = open_t("");
	aks_consumer *a = consumer(t, AKS_QUEUE_INPUT);
	send_msg(t, AKS_QUEUE_INPUT, "held", "g", NULL);
	send_msg(t, AKS_QUEUE_INPUT, "behind", "g", NULL);
	aks_message *m = fetch_one(a, 0);
	assert_body(m, "held");

	waiter_arg w = {.t = t, .wait_ms = 10000};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, fetch_waiter, &w), 0);
	sleep_s(0.3);
	double closed = mono();
	ops()->consumer_close(a);
	pthread_join(th, NULL);
	assert_int_equal(w.rc, AKS_OK);
	assert_int_equal(w.n, 1);
	assert_string_equal(w.body, "held");
	assert_true(w.returned - closed < 1.0); /* woken by the close, not its 10 s wait */

	aks_consumer *b = consumer(t, AKS_QUEUE_INPUT);
	m = fetch_one(b, 0);
	assert_body(m, "behind");
	/* And a plain close-then-refetch: receive_count goes up. */
	ops()->consumer_close(b);
	b = consumer(t, AKS_QUEUE_INPUT);
	m = fetch_one(b, 0);
	assert_body(m, "behind");
	assert_int_equal(m->receive_count, 2);
	ack(b, m);
	ops()->consumer_close(b);
	ops()->fini(t);
}

static uint64_t depth_of(aks_transport_impl *t, const char *queue)
{
	uint64_t n = 999;
	aks_error *err = NULL;
	if (ops()->depth(t, queue, &n, &err) != AKS_OK)
		fail_msg("depth: %s", aks_error_message(err));
	return n;
}

/* depth counts what waits on a queue: sent and not fetched, or handed back (a nack, a lapsed
 * lease); not what a consumer holds, nor what was acked; each queue on its own. */
static void test_depth(void **state)
{
	(void)state;
	aks_transport_impl *t = open_t("{ack_wait: 0.3}");
	aks_consumer *c = consumer(t, AKS_QUEUE_INPUT);
	assert_int_equal(depth_of(t, AKS_QUEUE_INPUT), 0);
	send_msg(t, AKS_QUEUE_INPUT, "one", "g", NULL);
	send_msg(t, AKS_QUEUE_INPUT, "two", "g", NULL);
	send_msg(t, AKS_QUEUE_INPUT, "free", NULL, NULL);
	send_msg(t, AKS_QUEUE_OUTPUT, "out", NULL, NULL);
	assert_int_equal(depth_of(t, AKS_QUEUE_INPUT), 3);
	assert_int_equal(depth_of(t, AKS_QUEUE_OUTPUT), 1);
	aks_message *m = fetch_one(c, 0);
	assert_body(m, "one");
	assert_int_equal(depth_of(t, AKS_QUEUE_INPUT), 2); /* "one" is in flight */
	aks_error *err = NULL;
	assert_int_equal(ops()->nack(c, m, 10, &err), AKS_OK);
	assert_int_equal(depth_of(t, AKS_QUEUE_INPUT), 3); /* handed back, with its delay */
	m = fetch_one(c, 0);
	assert_body(m, "free");
	assert_int_equal(depth_of(t, AKS_QUEUE_INPUT), 2);
	sleep_s(0.4); /* its lease lapses: it waits again */
	assert_int_equal(depth_of(t, AKS_QUEUE_INPUT), 3);
	m = fetch_one(c, 0);
	assert_body(m, "free");
	ack(c, m);
	assert_int_equal(depth_of(t, AKS_QUEUE_INPUT), 2);
	assert_int_equal(ops()->depth(t, "no-such-queue", &(uint64_t){0}, &err), AKS_EINVAL);
	assert_non_null(strstr(aks_error_message(err), "no-such-queue"));
	aks_error_free(err);
	ops()->consumer_close(c);
	ops()->fini(t);
}

/* ---- waiting ---------------------------------------------------------------------------- */

static void *cancel_later(void *p)
{
	sleep_s(0.3);
	aks_cancel_trigger(p);
	return NULL;
}

/* A fetch sleeps until a message comes (woken by the send), returns with nothing when its
 * wait ends or its call is cancelled, and promptly in each case. */
static void test_fetch_wakes_and_cancels(void **state)
{
	(void)state;
	aks_transport_impl *t = open_t("");

	/* Woken by a send. */
	waiter_arg w = {.t = t, .wait_ms = 10000};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, fetch_waiter, &w), 0);
	sleep_s(0.3);
	double sent = mono();
	send_msg(t, AKS_QUEUE_INPUT, "wake up", "g", NULL);
	pthread_join(th, NULL);
	assert_int_equal(w.rc, AKS_OK);
	assert_int_equal(w.n, 1);
	assert_string_equal(w.body, "wake up");
	assert_true(w.returned - sent < 1.0);

	/* Cancelled while asleep. */
	aks_cancel *cancel = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_cancel_new(&cancel, &err), AKS_OK);
	aks_call call;
	aks_call_init(&call, 60, NULL, NULL, cancel);
	waiter_arg w2 = {.t = t, .wait_ms = 20000, .call = &call};
	pthread_t canceller;
	assert_int_equal(pthread_create(&th, NULL, fetch_waiter, &w2), 0);
	assert_int_equal(pthread_create(&canceller, NULL, cancel_later, cancel), 0);
	pthread_join(th, NULL);
	pthread_join(canceller, NULL);
	assert_int_equal(w2.rc, AKS_OK);
	assert_int_equal(w2.n, 0);
	assert_true(w2.returned - w2.started >= 0.25);
	assert_true(w2.returned - w2.started < 2.0);

	/* Already cancelled: no wait at all, and a send on a cancelled call is refused. */
	aks_consumer *c = consumer(t, AKS_QUEUE_INPUT);
	aks_message *out[1];
	size_t n = 9;
	double t0 = mono();
	assert_int_equal(ops()->fetch(c, out, 1, &n, 20000, &call, &err), AKS_OK);
	assert_int_equal(n, 0);
	assert_true(mono() - t0 < 1.0);
	aks_message m = {AKS_MESSAGE_VERSION, sizeof(m), "x", 1, NULL, NULL, NULL, 0, NULL};
	assert_int_equal(ops()->send(t, AKS_QUEUE_INPUT, &m, &call, &err), AKS_ECANCELLED);
	aks_error_free(err);
	err = NULL;
	aks_cancel_free(cancel);

	/* Its own wait ends: nothing, after about wait_ms. */
	t0 = mono();
	assert_int_equal(fetch(c, out, 1, 300), 0);
	double waited = mono() - t0;
	assert_true(waited >= 0.28 && waited < 2.0);
	ops()->consumer_close(c);
	ops()->fini(t);
}

int main(void)
{
	/* A wait that never ends is a failure, not a hung test run (generous for valgrind). */
	alarm(300);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_group_serial_and_parallel),
	    cmocka_unit_test(test_fifo_under_concurrency),
	    cmocka_unit_test(test_redelivery_after_ack_wait),
	    cmocka_unit_test(test_nack_delay),
	    cmocka_unit_test(test_in_progress),
	    cmocka_unit_test(test_dedup),
	    cmocka_unit_test(test_dead_letter),
	    cmocka_unit_test(test_close_hands_back),
	    cmocka_unit_test(test_depth),
	    cmocka_unit_test(test_fetch_wakes_and_cancels),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
