/* Unit tests: the queue worker's runtime (core/queue/worker.c, reference §5.6) over the built-in
 * in_memory transport and response store, with a stand-in for the engine: the round trip of
 * a request to its stored record, per-group order under several consumers, both
 * permanent-failure paths, store failures retried without re-running the operation, record
 * truncation step by step, stopping within and past the grace, `once`, the sweep timer, and
 * garbage that must never crash the loops. Then the real engine (worker_core.c) over
 * local_subprocess: the worker's own policy and gates decide, never the copy a request
 * carries, and the idle sweep leaves alone a session whose lock is held, or that became busy
 * while the sweep waited for it. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "core/cli/worker_probe.h"
#include "core/config/block.h"
#include "core/config/yaml_tree.h"
#include "core/plugin/result.h"
#include "core/queue/transport.h"
#include "core/queue/wire.h"
#include "core/queue/worker.h"
#include "core/session/sessions.h"
#include "core/store/memory_store.h"
#include "core/store/store.h"
#include "core/tools/json.h"

#define WAIT_MS 20000 /* the longest any test waits for a record (valgrind is slow) */

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* ---- a store that fails on demand: the in_memory store with put_expiring wrapped ---- */

static atomic_bool puts_block;  /* a put waits (up to a minute) while this is true */
static atomic_int puts_to_fail; /* records; a probe is refused while this is above 0 */
static atomic_int put_calls;    /* records */
static atomic_int probe_calls;  /* the worker's store probes */
static aks_store_ops failing_ops;
static aks_plugin_descriptor failing_desc;

static int failing_put(aks_store_impl *store, const char *ns, const char *key, const char *value,
                       size_t len, int64_t ttl, aks_error **err)
{
	bool probe = strcmp(key, AKS_QUEUE_STORE_PROBE_KEY) == 0;
	atomic_fetch_add(probe ? &probe_calls : &put_calls, 1);
	for (int i = 0; i < 6000 && atomic_load(&puts_block); i++)
		sleep_ms(10);
	if (probe ? atomic_load(&puts_to_fail) > 0 : atomic_fetch_sub(&puts_to_fail, 1) > 0)
		return aks__error_set(err, AKS_EIO, "test store: put_expiring refused");
	const aks_store_ops *real = aks__memory_store_descriptor.ops;
	return real->put_expiring(store, ns, key, value, len, ttl, err);
}

static const aks_plugin_descriptor *failing_store(int failures)
{
	failing_desc = aks__memory_store_descriptor;
	failing_ops = *(const aks_store_ops *)aks__memory_store_descriptor.ops;
	failing_ops.put_expiring = failing_put;
	failing_desc.ops = &failing_ops;
	atomic_store(&puts_to_fail, failures);
	atomic_store(&puts_block, false);
	atomic_store(&put_calls, 0);
	atomic_store(&probe_calls, 0);
	return &failing_desc;
}

/* ---- a store that reports the locks taken: the in_memory store with lock wrapped ---- */

static atomic_int lock_calls;
static atomic_int last_lock_rc;
static aks_store_ops watching_ops;
static aks_plugin_descriptor watching_desc;

static int watching_lock(aks_store_impl *store, const char *ns, const char *key,
                         const aks_call *call, aks_store_lock **out, aks_error **err)
{
	atomic_fetch_add(&lock_calls, 1);
	const aks_store_ops *real = aks__memory_store_descriptor.ops;
	int rc = real->lock(store, ns, key, call, out, err);
	atomic_store(&last_lock_rc, rc);
	return rc;
}

static const aks_plugin_descriptor *watching_store(void)
{
	watching_desc = aks__memory_store_descriptor;
	watching_ops = *(const aks_store_ops *)aks__memory_store_descriptor.ops;
	watching_ops.lock = watching_lock;
	watching_desc.ops = &watching_ops;
	atomic_store(&lock_calls, 0);
	atomic_store(&last_lock_rc, 1);
	return &watching_desc;
}

/* ---- fixture: a transport and a response store ---- */

typedef struct fixture {
	aks_node *yaml;
	aks_config *tcfg;
	aks_transport *t;
	aks_state_store *store;
} fixture;

static void fixture_open_with(fixture *f, const aks_plugin_descriptor *store_desc, const char *yaml)
{
	memset(f, 0, sizeof(*f));
	aks_error *err = NULL;
	assert_int_equal(aks__yaml_parse(yaml, strlen(yaml), "test", &f->yaml, &err), AKS_OK);
	assert_int_equal(aks__config_build(&aks__memory_transport_descriptor, f->yaml, "in_memory",
	                                   &f->tcfg, &err),
	                 AKS_OK);
	assert_int_equal(
	    aks__transport_open(&aks__memory_transport_descriptor, f->tcfg, &f->t, &err), AKS_OK);
	assert_int_equal(
	    aks__store_open_desc(store_desc ? store_desc : &aks__memory_store_descriptor, NULL,
	                         &f->store, &err),
	    AKS_OK);
}

static void fixture_open(fixture *f, const aks_plugin_descriptor *store_desc)
{
	fixture_open_with(f, store_desc, "ack_wait: 300\ndedup_window: 300\n");
}

static void fixture_close(fixture *f)
{
	aks__store_close(f->store);
	aks__transport_close(f->t);
	aks_config_free(f->tcfg);
	aks__node_free(f->yaml);
}

static void send_raw(aks_transport *t, const char *queue, const char *body, size_t len,
                     const char *request_id, const char *group)
{
	const char *with[] = {"request_id", request_id, NULL};
	const char *none[] = {NULL};
	aks_message m = {AKS_MESSAGE_VERSION,
	                 sizeof(m),
	                 body,
	                 len,
	                 request_id ? with : none,
	                 group,
	                 NULL,
	                 0,
	                 NULL};
	aks_error *err = NULL;
	assert_int_equal(aks__transport_send(t, queue, &m, NULL, &err), AKS_OK);
}

/* A request as the queue client sends it: group = the sandbox session, dedup = the task. */
static void send_request(aks_transport *t, const char *task, const char *session, const char *code)
{
	char body[4096];
	snprintf(body, sizeof(body),
	         "{\"task_id\": \"%s\", \"operation\": \"execute_code\", \"payload\": {\"code\": "
	         "\"%s\", \"language\": \"python\"}, \"profile\": \"p\", \"principal\": "
	         "{\"subject\": \"a\"}, \"policy\": {}, \"sandbox_session\": "
	         "{\"sandbox_session_id\": \"%s\", \"profile\": \"p\"}, \"ak_session_id\": "
	         "\"conv-%s\", \"agent\": \"agent\"}",
	         task, code, session, session);
	const char *attrs[] = {"request_id", task, NULL};
	aks_message m = {
	    AKS_MESSAGE_VERSION, sizeof(m), body, strlen(body), attrs, session, task, 0, NULL};
	aks_error *err = NULL;
	assert_int_equal(aks__transport_send(t, AKS_QUEUE_INPUT, &m, NULL, &err), AKS_OK);
}

/* The record stored for `id`, waiting up to ms for it; NULL if none came. */
static struct json_object *wait_record(aks_state_store *s, const char *id, int ms)
{
	int64_t end = aks__now_ms() + ms;
	for (;;) {
		struct json_object *o = NULL;
		aks_error *e = NULL;
		int rc = aks__store_get(s, AKS_QUEUE_NS, id, &o, &e);
		aks_error_free(e);
		if (rc == AKS_OK)
			return o;
		if (aks__now_ms() > end)
			return NULL;
		sleep_ms(5);
	}
}

static bool has_record(aks_state_store *s, const char *id)
{
	struct json_object *o = NULL;
	int rc = aks__store_get(s, AKS_QUEUE_NS, id, &o, NULL);
	json_object_put(o);
	return rc == AKS_OK;
}

static const char *jstr(struct json_object *o, const char *path1, const char *path2)
{
	struct json_object *v = NULL;
	if (!json_object_object_get_ex(o, path1, &v))
		return NULL;
	if (path2 && !json_object_object_get_ex(v, path2, &v))
		return NULL;
	return json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

static int jint(struct json_object *o, const char *key)
{
	struct json_object *v = NULL;
	return json_object_object_get_ex(o, key, &v) ? json_object_get_int(v) : -1;
}

static size_t count_records(aks_state_store *s);

/* ---- the engine's stand-in ---- */

#define GROUPS    4
#define PER_GROUP 64

typedef struct proc_state {
	pthread_mutex_t mu;
	atomic_int calls;
	int in_flight, max_in_flight;
	int group_in_flight[GROUPS];
	bool group_overlap;
	char order[GROUPS][PER_GROUP][16];
	int order_n[GROUPS];
	int delay_ms;
	bool block_until_cancel;
	atomic_bool started, saw_cancel;
} proc_state;

static void proc_init(proc_state *p)
{
	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->mu, NULL);
}

static void proc_fini(proc_state *p)
{
	pthread_mutex_destroy(&p->mu);
}

/* Sessions are named "g<digit>"; anything else has no group index. */
static int group_of(const aks_wire_request *req)
{
	const char *id = req->session.id;
	return id && id[0] == 'g' && id[1] >= '0' && id[1] < '0' + GROUPS && !id[2] ? id[1] - '0'
	                                                                            : -1;
}

/* "fail" completes as failed, "slow" as timed out, anything else succeeds with stdout
 * "ran:<code>". */
static int fake_process(void *ctx, const aks_wire_request *req, aks_cancel *cancel,
                        aks_wire_completion **out)
{
	proc_state *p = ctx;
	atomic_fetch_add(&p->calls, 1);
	int g = group_of(req);
	pthread_mutex_lock(&p->mu);
	if (++p->in_flight > p->max_in_flight)
		p->max_in_flight = p->in_flight;
	if (g >= 0) {
		if (p->group_in_flight[g]++ > 0)
			p->group_overlap = true;
		if (p->order_n[g] < PER_GROUP)
			snprintf(p->order[g][p->order_n[g]++], 16, "%s", req->task_id);
	}
	pthread_mutex_unlock(&p->mu);
	atomic_store(&p->started, true);
	if (p->block_until_cancel) {
		while (!aks_cancel_is_triggered(cancel))
			sleep_ms(2);
		atomic_store(&p->saw_cancel, true);
	} else {
		int64_t until = aks__now_ms() + p->delay_ms;
		while (aks__now_ms() < until && !aks_cancel_is_triggered(cancel))
			sleep_ms(1);
		if (aks_cancel_is_triggered(cancel))
			atomic_store(&p->saw_cancel, true);
	}
	pthread_mutex_lock(&p->mu);
	p->in_flight--;
	if (g >= 0)
		p->group_in_flight[g]--;
	pthread_mutex_unlock(&p->mu);

	aks_wire_completion *c = calloc(1, sizeof(*c));
	if (!c)
		return AKS_ENOMEM;
	c->task_id = strdup(req->task_id);
	c->session.id = strdup(req->session.id);
	c->session.profile = strdup(req->session.profile);
	c->session.sandbox_id = strdup("sb-1");
	if (strcmp(req->code, "fail") == 0) {
		c->status = AKS_WIRE_FAILED;
		c->error = strdup("boom");
		c->error_type = strdup("SandboxProvisionError");
	} else if (strcmp(req->code, "slow") == 0) {
		c->status = AKS_WIRE_TIMED_OUT;
		c->error = strdup("too slow");
		c->error_type = strdup("SandboxTimeoutError");
	} else {
		c->status = AKS_WIRE_SUCCEEDED;
		c->result = aks__result_new(1 << 20, 1 << 20);
		aks__result_write(c->result, AKS_STREAM_STDOUT, "ran:", 4, NULL);
		aks__result_write(c->result, AKS_STREAM_STDOUT, req->code, strlen(req->code), NULL);
	}
	*out = c;
	return AKS_OK;
}

static aks_worker_config base_config(fixture *f, proc_state *p)
{
	aks_worker_config c = {
	    .transport = f->t,
	    .responses = f->store,
	    .process = fake_process,
	    .ctx = p,
	    .input_consumers = 1,
	    .output_consumers = 1,
	    .input_max_receive = 3,
	    .output_max_receive = 3,
	    .batch_size = 1,
	    .inline_payload_max_bytes = 1 << 20,
	    .response_ttl = 3600,
	};
	return c;
}

static aks_worker *start(const aks_worker_config *c)
{
	aks_worker *w = NULL;
	aks_error *err = NULL;
	int rc = aks__worker_start(c, &w, &err);
	if (rc != AKS_OK)
		fail_msg("worker start: %s", err ? aks_error_message(err) : "?");
	return w;
}

static void stop_and_free(aks_worker *w, double grace)
{
	aks__worker_stop(w, grace);
	assert_int_equal(aks__worker_wait(w, NULL), AKS_OK);
	aks__worker_free(w);
}

/* ---- round trip ---- */

static void test_round_trip(void **state)
{
	(void)state;
	fixture f;
	fixture_open(&f, NULL);
	proc_state p;
	proc_init(&p);
	aks_worker_config c = base_config(&f, &p);
	aks_worker *w = start(&c);
	send_request(f.t, "t-ok", "g0", "hello");
	send_request(f.t, "t-fail", "g1", "fail");
	send_request(f.t, "t-slow", "g2", "slow");

	struct json_object *r = wait_record(f.store, "t-ok", WAIT_MS);
	assert_non_null(r);
	assert_string_equal(jstr(r, "request_id", NULL), "t-ok");
	assert_string_equal(jstr(r, "session_id", NULL), "conv-g0");
	assert_int_equal(jint(r, "status_code"), 200);
	struct json_object *body = NULL;
	assert_true(json_object_object_get_ex(r, "body", &body));
	assert_string_equal(jstr(body, "status", NULL), "succeeded");
	assert_string_equal(jstr(body, "result", "stdout"), "ran:hello");
	assert_string_equal(jstr(body, "sandbox_session", "sandbox_id"), "sb-1");
	json_object_put(r);

	r = wait_record(f.store, "t-fail", WAIT_MS);
	assert_non_null(r);
	assert_int_equal(jint(r, "status_code"), 500);
	assert_string_equal(jstr(r, "body", "error"), "boom");
	assert_string_equal(jstr(r, "body", "error_type"), "SandboxProvisionError");
	json_object_put(r);
	r = wait_record(f.store, "t-slow", WAIT_MS);
	assert_non_null(r);
	assert_int_equal(jint(r, "status_code"), 504);
	json_object_put(r);

	stop_and_free(w, 5);
	assert_int_equal(atomic_load(&p.calls), 3);
	proc_fini(&p);
	fixture_close(&f);
}

/* ---- per-group order, one at a time, several consumers ---- */

static void test_group_order(void **state)
{
	(void)state;
	fixture f;
	fixture_open(&f, NULL);
	proc_state p;
	proc_init(&p);
	p.delay_ms = 5;
	aks_worker_config c = base_config(&f, &p);
	c.input_consumers = 4;
	c.output_consumers = 2;
	aks_worker *w = start(&c);
	enum { N = 10 };
	char ids[GROUPS][N][16];
	for (int i = 0; i < N; i++)
		for (int g = 0; g < GROUPS; g++) {
			char session[4] = {'g', (char)('0' + g), 0, 0};
			snprintf(ids[g][i], 16, "t%d-%02d", g, i);
			send_request(f.t, ids[g][i], session, "x");
		}
	for (int g = 0; g < GROUPS; g++)
		for (int i = 0; i < N; i++) {
			struct json_object *r = wait_record(f.store, ids[g][i], WAIT_MS);
			assert_non_null(r);
			json_object_put(r);
		}
	stop_and_free(w, 5);
	assert_int_equal(atomic_load(&p.calls), GROUPS * N);
	assert_false(p.group_overlap);     /* never two requests of one session at once */
	assert_true(p.max_in_flight >= 2); /* but sessions ran side by side */
	for (int g = 0; g < GROUPS; g++) {
		assert_int_equal(p.order_n[g], N);
		for (int i = 0; i < N; i++)
			assert_string_equal(p.order[g][i], ids[g][i]);
	}
	proc_fini(&p);
	fixture_close(&f);
}

/* ---- the request permanent-failure path ---- */

static void test_request_permanent_failure(void **state)
{
	(void)state;
	fixture f;
	fixture_open(&f, NULL);
	proc_state p;
	proc_init(&p);
	aks_worker_config c = base_config(&f, &p);
	c.input_max_receive = 2;
	aks_worker *w = start(&c);
	const char *garbage = "{\"task_id\": \"t-bad\", \"operation\": \"teleport\"}";
	send_raw(f.t, AKS_QUEUE_INPUT, garbage, strlen(garbage), "t-bad", "g0");

	struct json_object *r = wait_record(f.store, "t-bad", WAIT_MS);
	assert_non_null(r);
	assert_int_equal(jint(r, "status_code"), 500);
	assert_string_equal(jstr(r, "session_id", NULL), "unknown");
	assert_string_equal(jstr(r, "body", "status"), "failed");
	/* two deliveries were nacked, the third took the permanent path */
	assert_string_equal(jstr(r, "body", "error"),
	                    "sandbox execution failed after 3 deliveries");
	assert_string_equal(jstr(r, "body", "error_type"), "ExecutionBrokerError");
	struct json_object *body = NULL;
	assert_true(json_object_object_get_ex(r, "body", &body));
	assert_string_equal(jstr(body, "sandbox_session", "sandbox_session_id"), "t-bad");
	assert_string_equal(jstr(body, "sandbox_session", "profile"), "unknown");
	assert_string_equal(jstr(body, "sandbox_session", "provider_type"), "unknown");
	json_object_put(r);
	stop_and_free(w, 5);
	assert_int_equal(atomic_load(&p.calls), 0);
	proc_fini(&p);
	fixture_close(&f);
}

/* A decodable request whose execution keeps failing to be answered also ends failed, with its
 * own session and conversation: here every delivery comes back past max receives. */
static void test_request_permanent_failure_decodable(void **state)
{
	(void)state;
	fixture f;
	fixture_open(&f, NULL);
	proc_state p;
	proc_init(&p);
	aks_worker_config c = base_config(&f, &p);
	c.input_max_receive = 1;
	/* First delivery: taken by a consumer that hands it back unprocessed. */
	aks_queue_consumer *qc = NULL;
	aks_error *err = NULL;
	send_request(f.t, "t-re", "g3", "x");
	assert_int_equal(aks__consumer_open(f.t, AKS_QUEUE_INPUT, &qc, &err), AKS_OK);
	aks_message *m = NULL;
	size_t n = 0;
	assert_int_equal(aks__consumer_fetch(qc, &m, 1, &n, 1000, NULL, &err), AKS_OK);
	assert_int_equal(n, 1);
	assert_int_equal(aks__consumer_nack(qc, m, 0, &err), AKS_OK);
	aks__consumer_close(qc);

	aks_worker *w = start(&c);
	struct json_object *r = wait_record(f.store, "t-re", WAIT_MS);
	assert_non_null(r);
	assert_int_equal(jint(r, "status_code"), 500);
	assert_string_equal(jstr(r, "session_id", NULL), "conv-g3");
	assert_string_equal(jstr(r, "body", "error"),
	                    "sandbox execution failed after 2 deliveries");
	struct json_object *body = NULL;
	assert_true(json_object_object_get_ex(r, "body", &body));
	assert_string_equal(jstr(body, "sandbox_session", "sandbox_session_id"), "g3");
	json_object_put(r);
	stop_and_free(w, 5);
	assert_int_equal(atomic_load(&p.calls), 0);
	proc_fini(&p);
	fixture_close(&f);
}

static void test_undecodable_without_id(void **state)
{
	(void)state;
	fixture f;
	fixture_open(&f, NULL);
	proc_state p;
	proc_init(&p);
	aks_worker_config c = base_config(&f, &p);
	c.input_max_receive = 1;
	aks_worker *w = start(&c);
	send_raw(f.t, AKS_QUEUE_INPUT, "not json", 8, NULL, NULL);
	int64_t end = aks__now_ms() + WAIT_MS;
	aks_worker_stats st;
	do {
		sleep_ms(10);
		aks__worker_get_stats(w, &st);
	} while (st.dead_lettered == 0 && aks__now_ms() < end);
	assert_int_equal(st.dead_lettered, 1);
	assert_int_equal(st.request_failures, 0);
	assert_int_equal(st.nacks, 1); /* the first delivery went back */
	sleep_ms(200);
	stop_and_free(w, 5);
	assert_int_equal(count_records(f.store), 0);
	assert_int_equal(atomic_load(&p.calls), 0);
	proc_fini(&p);
	fixture_close(&f);
}

/* ---- the output loop ---- */

static void test_store_failure_retried(void **state)
{
	(void)state;
	fixture f;
	fixture_open(&f, failing_store(2));
	proc_state p;
	proc_init(&p);
	aks_worker_config c = base_config(&f, &p);
	aks_worker *w = start(&c);
	send_request(f.t, "t-store", "g0", "hi");
	struct json_object *r = wait_record(f.store, "t-store", WAIT_MS);
	assert_non_null(r);
	assert_int_equal(jint(r, "status_code"), 200);
	assert_string_equal(jstr(r, "body", "status"), "succeeded");
	json_object_put(r);
	aks_worker_stats st;
	aks__worker_get_stats(w, &st);
	stop_and_free(w, 5);
	assert_int_equal(atomic_load(&p.calls), 1); /* the operation ran once */
	assert_int_equal(atomic_load(&put_calls), 3);
	assert_int_equal(st.store_failures, 2);
	assert_int_equal(st.stored, 1);
	assert_int_equal(st.requests, 1);
	proc_fini(&p);
	fixture_close(&f);
}

/* What the engine would say of requests waiting for the store (worker_config.store_waits). */
static atomic_uint waits_for_store;
static unsigned report_store_waits(void *ctx)
{
	(void)ctx;
	return atomic_load(&waits_for_store);
}

static aks_worker_status read_status(aks_worker_monitor *m);

static aks_worker_status status_when(aks_worker_monitor *m, bool store_failing)
{
	aks_worker_status s;
	int64_t end = aks__now_ms() + WAIT_MS;
	do {
		assert_int_equal(aks_worker_monitor_read(m, &s, false, NULL), AKS_OK);
		if (s.store_failing == store_failing)
			break;
		sleep_ms(10);
	} while (aks__now_ms() < end);
	return s;
}

/* The store is failing, for health (/readyz), from the first completion record it could not
 * store until one is stored, and while a request waits for the store; not before, not
 * after. */
static void test_store_failing(void **state)
{
	(void)state;
	aks_worker_monitor *m = NULL;
	assert_int_equal(aks_worker_monitor_new(&m, NULL), AKS_OK);
	fixture f;
	fixture_open(&f, failing_store(1 << 20));
	proc_state p;
	proc_init(&p);
	aks_worker_config c = base_config(&f, &p);
	c.store_waits = report_store_waits;
	atomic_store(&waits_for_store, 0);
	aks_worker *w = start(&c);
	aks__worker_monitor_attach(m, w, f.t, 1, 1);
	aks_worker_status s = read_status(m);
	assert_true(s.running);
	assert_false(s.store_failing);

	send_request(f.t, "t-sf", "g0", "hi");
	s = status_when(m, true);
	assert_true(s.store_failing);
	assert_true(s.store_failures >= 1);
	assert_int_equal(s.completions_stored, 0);
	atomic_store(&puts_to_fail, 0); /* the store answers again: the retry stores it */
	struct json_object *r = wait_record(f.store, "t-sf", WAIT_MS);
	assert_non_null(r);
	json_object_put(r);
	s = status_when(m, false);
	assert_false(s.store_failing);
	assert_int_equal(s.completions_stored, 1);

	atomic_store(&waits_for_store, 2); /* two requests wait for their session's lock */
	assert_true(read_status(m).store_failing);
	atomic_store(&waits_for_store, 0);
	assert_false(read_status(m).store_failing);

	aks__worker_monitor_detach(m);
	stop_and_free(w, 5);
	assert_int_equal(atomic_load(&p.calls), 1); /* the operation ran once */
	aks_worker_monitor_free(m);
	proc_fini(&p);
	fixture_close(&f);
}

/* A completion record dead-lettered after failed stores, and no other operation: the store
 * stays failing while it refuses writes, and turns healthy by itself once it takes them
 * (an idle output loop writes a probe record), not at the next operation. */
static void test_store_failing_idle_recovery(void **state)
{
	(void)state;
	aks_worker_monitor *m = NULL;
	assert_int_equal(aks_worker_monitor_new(&m, NULL), AKS_OK);
	fixture f;
	fixture_open(&f, failing_store(1 << 20));
	proc_state p;
	proc_init(&p);
	aks_worker_config c = base_config(&f, &p);
	c.output_max_receive = 1;
	aks_worker *w = start(&c);
	aks__worker_monitor_attach(m, w, f.t, 1, 1);
	send_request(f.t, "t-dl", "g0", "hi");
	aks_worker_status s;
	int64_t end = aks__now_ms() + WAIT_MS;
	while ((s = read_status(m)).dead_lettered == 0 && aks__now_ms() < end)
		sleep_ms(10);
	assert_int_equal(s.dead_lettered, 1);
	sleep_ms(2500); /* idle output fetches, each probing a store that still refuses */
	s = read_status(m);
	assert_true(s.store_failing);
	assert_int_equal(atomic_load(&put_calls), 2); /* the first delivery, the failed record */
	assert_true(atomic_load(&probe_calls) >= 1);

	atomic_store(&puts_to_fail, 0); /* the store takes writes again; no operation comes */
	s = status_when(m, false);
	assert_false(s.store_failing);
	assert_false(has_record(f.store, "t-dl")); /* dead-lettered: nothing was stored for it */
	assert_int_equal(s.completions_stored, 0);

	aks__worker_monitor_detach(m);
	stop_and_free(w, 5);
	assert_int_equal(atomic_load(&p.calls), 1);
	aks_worker_monitor_free(m);
	proc_fini(&p);
	fixture_close(&f);
}

/* /healthz: a consumer that hangs (here the output loop, in a store write that does not
 * return) goes unseen for longer and longer, and liveness turns "stuck" past its bound (the
 * CLI's is five minutes; the verdict takes it as a parameter); once the write returns, the
 * worker is live again. */
static void test_stuck_consumer_not_live(void **state)
{
	(void)state;
	aks_worker_monitor *m = NULL;
	assert_int_equal(aks_worker_monitor_new(&m, NULL), AKS_OK);
	fixture f;
	fixture_open(&f, failing_store(0));
	atomic_store(&puts_block, true);
	proc_state p;
	proc_init(&p);
	aks_worker_config c = base_config(&f, &p);
	aks_worker *w = start(&c);
	aks__worker_monitor_attach(m, w, f.t, 1, 1);
	char why[160];
	aks_worker_status s = read_status(m);
	assert_true(cli_worker_live(&s, 1.0, why, sizeof(why)));
	assert_string_equal(why, "ok");

	send_request(f.t, "t-hang", "g0", "hi");
	int64_t end = aks__now_ms() + WAIT_MS;
	while (atomic_load(&put_calls) == 0 && aks__now_ms() < end)
		sleep_ms(10);
	assert_int_equal(atomic_load(&put_calls), 1); /* the output loop is in the write */
	sleep_ms(1600);
	s = read_status(m);
	assert_true(s.stalest_consumer_s >= 1.5);
	assert_false(cli_worker_live(&s, 1.0, why, sizeof(why)));
	char expect[96];
	snprintf(expect, sizeof(expect), "stuck: a consumer has not been seen working for %.0f s",
	         s.stalest_consumer_s);
	assert_string_equal(why, expect);
	assert_true(cli_worker_live(&s, CLI_WORKER_STUCK_AFTER_S, why, sizeof(why)));

	atomic_store(&puts_block, false);
	struct json_object *r = wait_record(f.store, "t-hang", WAIT_MS);
	assert_non_null(r);
	json_object_put(r);
	end = aks__now_ms() + WAIT_MS; /* a fetch returns within about a second */
	while (!cli_worker_live((s = read_status(m), &s), 1.5, why, sizeof(why)) &&
	       aks__now_ms() < end)
		sleep_ms(10);
	assert_string_equal(why, "ok");

	aks__worker_monitor_detach(m);
	stop_and_free(w, 5);
	aks_worker_monitor_free(m);
	proc_fini(&p);
	fixture_close(&f);
}

/* /readyz's verdicts and reasons, in their order of precedence. */
static void test_ready_verdicts(void **state)
{
	(void)state;
	char why[160];
	aks_worker_status s = {
	    .struct_size = sizeof(s), .input_consumers = 2, .output_consumers = 1};
	assert_false(cli_worker_ready(&s, why, sizeof(why)));
	assert_string_equal(why, "not running: starting, or ended");
	assert_true(cli_worker_live(&s, 0, why, sizeof(why))); /* nothing runs to be stuck */
	s.running = true;
	s.stopping = s.store_failing = true;
	s.fetch_failing = 1;
	assert_false(cli_worker_ready(&s, why, sizeof(why)));
	assert_string_equal(why, "stopping: in-flight operations are finishing");
	s.stopping = false;
	assert_false(cli_worker_ready(&s, why, sizeof(why)));
	assert_string_equal(why, "1 of 3 consumers cannot fetch: the transport does not answer");
	s.fetch_failing = 0;
	assert_false(cli_worker_ready(&s, why, sizeof(why)));
	assert_string_equal(why, "the response store does not answer: completions and "
	                         "operations wait for it (retrying)");
	s.store_failing = false;
	assert_true(cli_worker_ready(&s, why, sizeof(why)));
	assert_string_equal(why, "ready");
	char small[6];
	assert_true(cli_worker_ready(&s, small, sizeof(small)));
	assert_string_equal(small, "ready");
	assert_false(
	    cli_worker_live(&(aks_worker_status){.running = true, .stalest_consumer_s = 301},
	                    CLI_WORKER_STUCK_AFTER_S, small, sizeof(small)));
	assert_string_equal(small, "stuck");
}

/* §11 item 21: a record that can never be stored leaves a terminal failed record instead of
 * a task pending forever. */
static void test_output_permanent_failure(void **state)
{
	(void)state;
	fixture f;
	fixture_open(&f, failing_store(1));
	proc_state p;
	proc_init(&p);
	aks_worker_config c = base_config(&f, &p);
	c.output_max_receive = 1;
	aks_worker *w = start(&c);
	send_request(f.t, "t-lost", "g2", "hi");
	struct json_object *r = wait_record(f.store, "t-lost", WAIT_MS);
	assert_non_null(r);
	assert_int_equal(jint(r, "status_code"), 500);
	assert_string_equal(jstr(r, "session_id", NULL), "conv-g2");
	assert_string_equal(jstr(r, "body", "error"),
	                    "sandbox execution finished but its completion could not be stored "
	                    "after 2 deliveries");
	assert_string_equal(jstr(r, "body", "error_type"), "ExecutionBrokerError");
	struct json_object *body = NULL;
	assert_true(json_object_object_get_ex(r, "body", &body));
	assert_string_equal(jstr(body, "sandbox_session", "sandbox_session_id"), "g2");
	assert_string_equal(jstr(body, "sandbox_session", "sandbox_id"), "sb-1");
	json_object_put(r);
	int64_t end = aks__now_ms() + WAIT_MS;
	aks_worker_stats st;
	do {
		sleep_ms(10);
		aks__worker_get_stats(w, &st);
	} while (st.dead_lettered == 0 && aks__now_ms() < end);
	stop_and_free(w, 5);
	assert_int_equal(st.dead_lettered, 1);
	assert_false(st.store_failing); /* the failed record was stored: the store answers */
	assert_int_equal(st.stored, 0);
	assert_int_equal(atomic_load(&p.calls), 1);
	proc_fini(&p);
	fixture_close(&f);
}

/* ---- truncation ---- */

static const char NOTICE_FMT[] = "output truncated to fit the %lld-byte record limit; rerun "
                                 "with a file redirection to keep full output";

static aks_wire_completion *completion(void)
{
	aks_wire_completion *c = calloc(1, sizeof(*c));
	c->task_id = strdup("t-trunc");
	c->status = AKS_WIRE_SUCCEEDED;
	c->session.id = strdup("s");
	c->session.profile = strdup("p");
	c->result = aks__result_new(1 << 20, 1 << 20);
	return c;
}

static void put_stream(aks_wire_completion *c, int stream, const char *unit, size_t times)
{
	for (size_t i = 0; i < times; i++)
		assert_int_equal(aks__result_write(c->result, stream, unit, strlen(unit), NULL),
		                 AKS_OK);
}

static int64_t rec_size(const aks_wire_completion *c)
{
	char *s = aks__wire_record_encode(c, "conv");
	assert_non_null(s);
	int64_t n = (int64_t)strlen(s);
	free(s);
	return n;
}

static char *notice_for(int64_t limit, const char *old)
{
	char buf[512], *out = NULL;
	snprintf(buf, sizeof(buf), NOTICE_FMT, (long long)limit);
	if (old)
		assert_true(asprintf(&out, "%s; %s", old, buf) > 0);
	else
		out = strdup(buf);
	return out;
}

static void test_truncate_fits(void **state)
{
	(void)state;
	aks_wire_completion *c = completion();
	put_stream(c, AKS_STREAM_STDOUT, "hello", 1);
	bool over = true;
	assert_false(aks__worker_truncate(c, "conv", rec_size(c), &over));
	assert_false(over);
	assert_null(aks_result_get_notice(c->result));
	size_t n = 0;
	assert_string_equal(aks_result_get_stdout(c->result, &n), "hello");
	aks__wire_completion_free(c);
}

/* The notice is joined to an old one and provider_data goes, nothing else. */
static void test_truncate_provider_data(void **state)
{
	(void)state;
	char pd[3000];
	snprintf(pd, sizeof(pd), "{\"big\": \"%0*d\"}", 2000, 0);
	aks_wire_completion *c = completion();
	put_stream(c, AKS_STREAM_STDOUT, "hello", 200);
	assert_int_equal(aks__result_set_provider_data(c->result, pd), AKS_OK);
	assert_int_equal(aks__result_set_notice(c->result, "earlier"), AKS_OK);
	/* The size once notice is added and provider_data is gone (4 digits of limit). */
	aks_wire_completion *e = completion();
	put_stream(e, AKS_STREAM_STDOUT, "hello", 200);
	char *nt = notice_for(9999, "earlier");
	aks__result_set_notice(e->result, nt);
	free(nt);
	int64_t limit = rec_size(e);
	assert_true(limit >= 1000 && limit <= 9999);
	aks__wire_completion_free(e);

	bool over = true;
	assert_true(aks__worker_truncate(c, "conv", limit, &over));
	assert_false(over);
	nt = notice_for(limit, "earlier");
	assert_string_equal(aks_result_get_notice(c->result), nt);
	free(nt);
	assert_null(aks_result_get_provider_data(c->result));
	size_t n = 0;
	aks_result_get_stdout(c->result, &n);
	assert_int_equal(n, 1000); /* untouched */
	assert_int_equal(rec_size(c), limit);
	aks__wire_completion_free(c);
}

static void add_file(aks_wire_completion *c, const char *path, size_t size)
{
	char *data = malloc(size);
	memset(data, 'z', size);
	assert_int_equal(aks__result_add_file(c->result, path, "text/plain"), AKS_OK);
	assert_int_equal(aks__result_write(c->result, AKS_STREAM_FILE, data, size, NULL), AKS_OK);
	free(data);
}

/* Files go from the end, one at a time, and only as many as needed. */
static void test_truncate_files(void **state)
{
	(void)state;
	aks_wire_completion *c = completion();
	put_stream(c, AKS_STREAM_STDOUT, "out", 1);
	add_file(c, "f0", 600);
	add_file(c, "f1", 600);
	add_file(c, "f2", 600);
	aks_wire_completion *e = completion();
	put_stream(e, AKS_STREAM_STDOUT, "out", 1);
	add_file(e, "f0", 600);
	char *nt = notice_for(9999, NULL);
	aks__result_set_notice(e->result, nt);
	free(nt);
	int64_t limit = rec_size(e);
	assert_true(limit >= 1000 && limit <= 9999);
	aks__wire_completion_free(e);

	bool over = true;
	assert_true(aks__worker_truncate(c, "conv", limit, &over));
	assert_false(over);
	assert_int_equal(aks_result_get_file_count(c->result), 1);
	const char *path = NULL;
	aks_result_get_file(c->result, 0, &path, NULL, NULL);
	assert_string_equal(path, "f0");
	size_t n = 0;
	assert_string_equal(aks_result_get_stdout(c->result, &n), "out");
	nt = notice_for(limit, NULL);
	assert_string_equal(aks_result_get_notice(c->result), nt);
	free(nt);
	aks__wire_completion_free(c);
}

/* The longer stream is cut by the overshoot; a tie cuts stdout; the result is exact. */
static void test_truncate_streams(void **state)
{
	(void)state;
	/* stderr longer: it alone is cut, by exactly the overshoot (ASCII: a byte a character) */
	aks_wire_completion *c = completion();
	put_stream(c, AKS_STREAM_STDOUT, "a", 600);
	put_stream(c, AKS_STREAM_STDERR, "b", 700);
	char *nt = notice_for(9999, NULL);
	aks_wire_completion *e = completion();
	put_stream(e, AKS_STREAM_STDOUT, "a", 600);
	put_stream(e, AKS_STREAM_STDERR, "b", 700);
	aks__result_set_notice(e->result, nt);
	int64_t with_notice = rec_size(e);
	aks__wire_completion_free(e);
	int64_t limit = with_notice - 150; /* below the size without the notice too */
	assert_true(limit < rec_size(c));
	assert_true(limit >= 1000 && limit <= 9999);
	bool over = true;
	assert_true(aks__worker_truncate(c, "conv", limit, &over));
	assert_false(over);
	size_t no = 0, ne = 0;
	aks_result_get_stdout(c->result, &no);
	aks_result_get_stderr(c->result, &ne);
	assert_int_equal(no, 600);
	assert_int_equal(ne, 550);
	assert_int_equal(rec_size(c), limit);
	assert_true(aks_result_is_truncated(c->result, AKS_STREAM_STDERR));
	aks__wire_completion_free(c);

	/* a tie: stdout is cut */
	c = completion();
	put_stream(c, AKS_STREAM_STDOUT, "x", 400);
	put_stream(c, AKS_STREAM_STDERR, "y", 400);
	e = completion();
	put_stream(e, AKS_STREAM_STDOUT, "x", 400);
	put_stream(e, AKS_STREAM_STDERR, "y", 400);
	aks__result_set_notice(e->result, nt);
	limit = rec_size(e) - 150;
	aks__wire_completion_free(e);
	assert_true(limit >= 1000 && limit <= 9999);
	assert_true(aks__worker_truncate(c, "conv", limit, &over));
	assert_false(over);
	aks_result_get_stdout(c->result, &no);
	aks_result_get_stderr(c->result, &ne);
	assert_int_equal(no, 250);
	assert_int_equal(ne, 400);
	aks__wire_completion_free(c);

	/* the overshoot empties the longer stream, then the loop takes the other one */
	c = completion();
	char big_error[1001];
	memset(big_error, 'E', 1000);
	big_error[1000] = 0;
	c->error = strdup(big_error); /* fixed ballast: the streams suffice, it stays whole */
	put_stream(c, AKS_STREAM_STDOUT, "x", 500);
	put_stream(c, AKS_STREAM_STDERR, "y", 700);
	e = completion();
	e->error = strdup(big_error);
	put_stream(e, AKS_STREAM_STDOUT, "x", 300);
	aks__result_set_notice(e->result, nt);
	limit = rec_size(e); /* room for 300 characters of output */
	aks__wire_completion_free(e);
	assert_true(limit >= 1000 && limit <= 9999);
	assert_true(aks__worker_truncate(c, "conv", limit, &over));
	assert_false(over);
	aks_result_get_stdout(c->result, &no);
	aks_result_get_stderr(c->result, &ne);
	assert_int_equal(ne, 0);   /* 700 - (900 overshoot) -> 0 */
	assert_int_equal(no, 300); /* then 500 - 200 */
	assert_string_equal(c->error, big_error);
	assert_int_equal(rec_size(c), limit);
	aks__wire_completion_free(c);
	free(nt);

	/* more overshoot than both streams hold: both emptied, still over */
	c = completion();
	put_stream(c, AKS_STREAM_STDOUT, "x", 10);
	put_stream(c, AKS_STREAM_STDERR, "y", 100);
	limit = 300; /* the empty record alone is larger */
	assert_true(aks__worker_truncate(c, "conv", limit, &over));
	assert_true(over);
	aks_result_get_stdout(c->result, &no);
	aks_result_get_stderr(c->result, &ne);
	assert_int_equal(no, 0);
	assert_int_equal(ne, 0);
	aks__wire_completion_free(c);
}

/* True when cut is a prefix of orig that ends at a character boundary of orig. */
static bool clean_prefix(const char *orig, size_t olen, const char *cut, size_t clen)
{
	if (clen > olen || memcmp(orig, cut, clen) != 0)
		return false;
	return clen == olen || ((unsigned char)orig[clen] & 0xC0) != 0x80;
}

/* Characters are counted and never split: "é" is 2 bytes of UTF-8 and 6 of the record's
 * JSON (\u00e9), so cutting `overshoot` characters frees more than enough: the reference
 * cuts characters by the byte overshoot, and so does this. */
static void test_truncate_utf8(void **state)
{
	(void)state;
	const char *units[] = {"\xc3\xa9", "a\xe2\x82\xac", "\xf0\x9f\x98\x80z"};
	for (size_t u = 0; u < 3; u++) {
		aks_wire_completion *c = completion();
		put_stream(c, AKS_STREAM_STDOUT, units[u], 300);
		size_t olen = 0;
		char *orig = strdup(aks_result_get_stdout(c->result, &olen));
		aks_wire_completion *e = completion();
		put_stream(e, AKS_STREAM_STDOUT, units[u], 300);
		char *nt = notice_for(9999, NULL);
		aks__result_set_notice(e->result, nt);
		free(nt);
		int64_t limit = rec_size(e) - 161;
		aks__wire_completion_free(e);
		assert_true(limit >= 1000 && limit <= 9999);
		bool over = true;
		assert_true(aks__worker_truncate(c, "conv", limit, &over));
		assert_false(over);
		size_t clen = 0;
		const char *cut = aks_result_get_stdout(c->result, &clen);
		assert_true(clean_prefix(orig, olen, cut, clen));
		assert_true(clen < olen);
		assert_true(rec_size(c) <= limit);
		/* exactly 161 characters went (the overshoot in bytes): count the rest */
		size_t chars = 0;
		for (size_t i = 0; i < clen; i++)
			chars += ((unsigned char)cut[i] & 0xC0) != 0x80;
		size_t ochars = 0;
		for (size_t i = 0; i < olen; i++)
			ochars += ((unsigned char)orig[i] & 0xC0) != 0x80;
		assert_int_equal(chars, ochars - 161);
		free(orig);
		aks__wire_completion_free(c);
	}
}

static void test_truncate_error(void **state)
{
	(void)state;
	aks_wire_completion *c = completion();
	aks_result_free(c->result);
	c->result = NULL;
	c->status = AKS_WIRE_FAILED;
	c->error = malloc(501);
	memset(c->error, 'E', 500);
	c->error[500] = 0;
	int64_t limit = rec_size(c) - 100;
	bool over = true;
	assert_true(aks__worker_truncate(c, "conv", limit, &over));
	assert_false(over);
	char expect[600];
	memset(expect, 'E', 385);
	strcpy(expect + 385, " ...[truncated]");
	assert_string_equal(c->error, expect);
	assert_true(rec_size(c) <= limit);
	aks__wire_completion_free(c);

	/* after the result's steps, the error too when still over */
	c = completion();
	char long_error[401];
	memset(long_error, 'r', 400);
	long_error[400] = 0;
	c->error = strdup(long_error);
	put_stream(c, AKS_STREAM_STDOUT, "o", 5);
	limit = rec_size(c) - 5; /* the notice then adds more than the streams can give */
	assert_true(aks__worker_truncate(c, "conv", limit, &over));
	assert_false(over);
	size_t n = 0;
	aks_result_get_stdout(c->result, &n);
	assert_int_equal(n, 0);
	size_t el = strlen(c->error);
	assert_true(el > 15 && el < 400);
	assert_string_equal(c->error + el - 15, " ...[truncated]");
	assert_memory_equal(c->error, long_error, el - 15);
	assert_int_equal(rec_size(c), limit); /* ASCII: exact */
	aks__wire_completion_free(c);
}

/* A completion far over the limit is cut in the worker before it is sent. */
static void test_truncate_in_loop(void **state)
{
	(void)state;
	fixture f;
	fixture_open(&f, NULL);
	proc_state p;
	proc_init(&p);
	aks_worker_config c = base_config(&f, &p);
	c.inline_payload_max_bytes = 1000;
	aks_worker *w = start(&c);
	char code[2001];
	memset(code, 'q', 2000);
	code[2000] = 0;
	send_request(f.t, "t-big", "g0", code);
	struct json_object *r = wait_record(f.store, "t-big", WAIT_MS);
	assert_non_null(r);
	char *text = aks__json_dumps(r); /* the record as it was measured */
	assert_true(strlen(text) <= 1000);
	free(text);
	char *nt = notice_for(1000, NULL);
	struct json_object *body = json_object_object_get(r, "body");
	const char *notice = jstr(body, "result", "notice");
	assert_non_null(notice);
	assert_string_equal(notice, nt);
	free(nt);
	const char *out = jstr(body, "result", "stdout");
	assert_non_null(out);
	assert_true(strncmp(out, "ran:qqq", 7) == 0 && strlen(out) < 1000);
	json_object_put(r);
	stop_and_free(w, 5);
	proc_fini(&p);
	fixture_close(&f);
}

/* ---- the heartbeat ---- */

/* An execution longer than the transport's ack wait is not delivered to a second consumer:
 * the worker reports it in progress every second (so this test takes about 4 s). */
static void test_heartbeat_keeps_lease(void **state)
{
	(void)state;
	fixture f;
	fixture_open_with(&f, NULL, "ack_wait: 2\ndedup_window: 300\n");
	proc_state p;
	proc_init(&p);
	p.delay_ms = 3500;
	aks_worker_config c = base_config(&f, &p);
	c.input_consumers = 2;
	aks_worker *w = start(&c);
	send_request(f.t, "t-long", "g0", "x");
	struct json_object *r = wait_record(f.store, "t-long", 40000);
	assert_non_null(r);
	assert_int_equal(jint(r, "status_code"), 200);
	json_object_put(r);
	sleep_ms(200);
	aks_worker_stats st;
	aks__worker_get_stats(w, &st);
	stop_and_free(w, 5);
	assert_int_equal(atomic_load(&p.calls), 1); /* without the heartbeat: 2, at 2 s */
	assert_false(p.group_overlap);
	assert_int_equal(st.requests, 1);
	assert_int_equal(st.nacks, 0);
	proc_fini(&p);
	fixture_close(&f);
}

/* ---- stopping ---- */

static void wait_started(proc_state *p)
{
	int64_t end = aks__now_ms() + WAIT_MS;
	while (!atomic_load(&p->started) && aks__now_ms() < end)
		sleep_ms(2);
	assert_true(atomic_load(&p->started));
}

static void test_stop_within_grace(void **state)
{
	(void)state;
	fixture f;
	fixture_open(&f, NULL);
	proc_state p;
	proc_init(&p);
	p.delay_ms = 400;
	aks_worker_config c = base_config(&f, &p);
	aks_worker *w = start(&c);
	send_request(f.t, "t-grace", "g0", "x");
	wait_started(&p);
	aks__worker_stop(w, 10);
	aks__worker_stop(w, 20); /* idempotent; never lengthens the grace */
	assert_int_equal(aks__worker_wait(w, NULL), AKS_OK);
	aks_worker_stats st;
	aks__worker_get_stats(w, &st);
	aks__worker_free(w);
	assert_false(atomic_load(&p.saw_cancel));
	assert_int_equal(st.requests, 1);
	/* its completion was sent before the request was acked; a new worker stores it */
	proc_state p2;
	proc_init(&p2);
	c = base_config(&f, &p2);
	w = start(&c);
	struct json_object *r = wait_record(f.store, "t-grace", WAIT_MS);
	assert_non_null(r);
	assert_int_equal(jint(r, "status_code"), 200);
	json_object_put(r);
	stop_and_free(w, 5);
	assert_int_equal(atomic_load(&p2.calls), 0); /* acked: never run again */
	proc_fini(&p);
	proc_fini(&p2);
	fixture_close(&f);
}

static aks_worker_status read_status(aks_worker_monitor *m)
{
	aks_worker_status s;
	aks_error *err = NULL;
	assert_int_equal(aks_worker_monitor_read(m, &s, true, &err), AKS_OK);
	assert_int_equal(s.struct_size, sizeof(s));
	return s;
}

/* The monitor reads what the worker does: nothing before it runs; then its consumers, a
 * running request in flight while the transport counts the one queued behind it; the
 * counters after; stopping while a stop drains the running one; nothing once detached. */
static void test_monitor(void **state)
{
	(void)state;
	aks_worker_monitor *m = NULL;
	assert_int_equal(aks_worker_monitor_new(&m, NULL), AKS_OK);
	aks_worker_status s = read_status(m);
	assert_false(s.running);
	assert_int_equal(s.in_flight, 0);
	assert_true(s.input_depth == -1 && s.output_depth == -1);

	fixture f;
	fixture_open(&f, NULL);
	proc_state p;
	proc_init(&p);
	p.delay_ms = 1200; /* the reads below happen well inside it, under valgrind too */
	aks_worker_config c = base_config(&f, &p);
	aks_worker *w = start(&c);
	aks__worker_monitor_attach(m, w, f.t, 1, 1);
	send_request(f.t, "t-m1", "g0", "x");
	send_request(f.t, "t-m2", "g1", "y"); /* waits: one input consumer */
	wait_started(&p);
	s = read_status(m);
	assert_true(s.running);
	assert_false(s.stopping);
	assert_int_equal(s.input_consumers, 1);
	assert_int_equal(s.output_consumers, 1);
	assert_int_equal(s.in_flight, 1);
	assert_int_equal(s.input_depth, 1);
	assert_int_equal(s.fetch_failing, 0);
	assert_true(s.stalest_consumer_s >= 0 && s.stalest_consumer_s < 5);
	aks_worker_status probe; /* without counting the queues */
	assert_int_equal(aks_worker_monitor_read(m, &probe, false, NULL), AKS_OK);
	assert_true(probe.running && probe.in_flight == 1);
	assert_true(probe.input_depth == -1 && probe.output_depth == -1);
	/* A request counts once its completion is sent, which the output loop may store before
	 * the request loop counts it: wait for both. */
	int64_t end = aks__now_ms() + WAIT_MS;
	while (((s = read_status(m)).completions_stored < 2 || s.requests < 2) &&
	       aks__now_ms() < end)
		sleep_ms(10);
	assert_int_equal(s.requests, 2);
	assert_int_equal(s.completions_stored, 2);
	assert_int_equal(s.in_flight, 0);
	assert_int_equal(s.input_depth, 0);
	assert_int_equal(s.output_depth, 0);

	atomic_store(&p.started, false);
	send_request(f.t, "t-m3", "g2", "z");
	wait_started(&p);
	aks__worker_stop(w, 10);
	s = read_status(m);
	assert_true(s.running && s.stopping);
	assert_int_equal(s.in_flight, 1);
	assert_int_equal(aks__worker_wait(w, NULL), AKS_OK);
	aks__worker_monitor_detach(m);
	aks__worker_free(w);
	s = read_status(m);
	assert_false(s.running);
	assert_int_equal(s.requests, 0);
	aks_worker_monitor_free(m);
	proc_fini(&p);
	fixture_close(&f);
}

static void test_stop_past_grace(void **state)
{
	(void)state;
	fixture f;
	fixture_open(&f, NULL);
	proc_state p;
	proc_init(&p);
	p.block_until_cancel = true;
	aks_worker_config c = base_config(&f, &p);
	aks_worker *w = start(&c);
	send_request(f.t, "t-cut", "g0", "x");
	wait_started(&p);
	int64_t t0 = aks__now_ms();
	aks__worker_stop(w, 0.3);
	assert_int_equal(aks__worker_wait(w, NULL), AKS_OK);
	assert_true(aks__now_ms() - t0 >= 290);
	aks_worker_stats st;
	aks__worker_get_stats(w, &st);
	aks__worker_free(w);
	assert_true(atomic_load(&p.saw_cancel));
	assert_int_equal(st.requests, 0);
	assert_int_equal(st.nacks, 1);
	assert_false(has_record(f.store, "t-cut"));

	/* handed back: a new worker runs it */
	proc_state p2;
	proc_init(&p2);
	c = base_config(&f, &p2);
	w = start(&c);
	struct json_object *r = wait_record(f.store, "t-cut", WAIT_MS);
	assert_non_null(r);
	assert_int_equal(jint(r, "status_code"), 200);
	json_object_put(r);
	stop_and_free(w, 5);
	assert_int_equal(atomic_load(&p2.calls), 1);
	proc_fini(&p);
	proc_fini(&p2);
	fixture_close(&f);
}

/* ---- once ---- */

typedef struct watchdog {
	aks_worker *w;
	atomic_bool done, fired;
} watchdog;

static void *watchdog_main(void *arg)
{
	watchdog *d = arg;
	for (int i = 0; i < 60000 / 10 && !atomic_load(&d->done); i++)
		sleep_ms(10);
	if (!atomic_load(&d->done)) {
		atomic_store(&d->fired, true);
		aks__worker_stop(d->w, 0);
	}
	return NULL;
}

static void test_once_drains(void **state)
{
	(void)state;
	fixture f;
	fixture_open(&f, NULL);
	proc_state p;
	proc_init(&p);
	p.delay_ms = 20;
	aks_worker_config c = base_config(&f, &p);
	c.once = true;
	c.input_consumers = 2;
	c.output_consumers = 2;
	char ids[6][16];
	for (int i = 0; i < 6; i++) {
		snprintf(ids[i], sizeof(ids[i]), "t-once-%d", i);
		send_request(f.t, ids[i], i % 2 ? "g1" : "g0", "x");
	}
	aks_worker *w = start(&c);
	watchdog d = {.w = w};
	pthread_t th;
	pthread_create(&th, NULL, watchdog_main, &d);
	assert_int_equal(aks__worker_wait(w, NULL), AKS_OK); /* returns by itself */
	atomic_store(&d.done, true);
	pthread_join(th, NULL);
	assert_false(atomic_load(&d.fired));
	aks__worker_free(w);
	assert_int_equal(atomic_load(&p.calls), 6);
	for (int i = 0; i < 6; i++)
		assert_true(has_record(f.store, ids[i])); /* the output queue was drained too */
	proc_fini(&p);
	fixture_close(&f);
}

/* ---- the sweep ---- */

static atomic_int sweeps;

static int counting_sweep(void *ctx, size_t *destroyed, aks_error **err)
{
	(void)ctx;
	*destroyed = 1;
	if (atomic_fetch_add(&sweeps, 1) == 0)
		return aks__error_set(err, AKS_EIO, "the first pass fails");
	return AKS_OK;
}

static void test_sweep_interval(void **state)
{
	(void)state;
	fixture f;
	fixture_open(&f, NULL);
	proc_state p;
	proc_init(&p);
	aks_worker_config c = base_config(&f, &p);
	c.sweep = counting_sweep;
	c.sweep_interval = 0.2;
	atomic_store(&sweeps, 0);
	aks_worker *w = start(&c);
	sleep_ms(100);
	assert_int_equal(atomic_load(&sweeps), 0); /* the first pass waits one interval */
	sleep_ms(950);
	int n = atomic_load(&sweeps);
	/* ~5 passes in 1.05 s; the failed first pass did not stop the timer */
	assert_true(n >= 3 && n <= 6);
	int64_t t0 = aks__now_ms();
	stop_and_free(w, 5);
	assert_true(aks__now_ms() - t0 < 1500); /* the wait is interruptible */
	n = atomic_load(&sweeps);
	sleep_ms(450);
	assert_int_equal(atomic_load(&sweeps), n);
	proc_fini(&p);
	fixture_close(&f);
}

/* ---- start-up refusals ---- */

static void test_start_refusals(void **state)
{
	(void)state;
	fixture f;
	fixture_open(&f, NULL);
	proc_state p;
	proc_init(&p);
	aks_worker_config c = base_config(&f, &p);
	aks_worker *w = NULL;
	aks_error *err = NULL;
	c.batch_size = 0;
	assert_int_equal(aks__worker_start(&c, &w, &err), AKS_EINVAL);
	assert_null(w);
	aks_error_free(err);
	err = NULL;
	c = base_config(&f, &p);
	c.output_consumers = 0;
	assert_int_equal(aks__worker_start(&c, &w, &err), AKS_EINVAL);
	aks_error_free(err);
	err = NULL;
	/* a response store that cannot expire records */
	char dir[] = "/tmp/aks-worker-test-XXXXXX";
	assert_non_null(mkdtemp(dir));
	aks_state_store *file = NULL;
	assert_int_equal(aks__store_open(dir, &file, &err), AKS_OK);
	c = base_config(&f, &p);
	c.responses = file;
	assert_int_equal(aks__worker_start(&c, &w, &err), AKS_ECONFIG);
	assert_non_null(strstr(aks_error_message(err), "expire"));
	aks_error_free(err);
	aks__store_close(file);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	proc_fini(&p);
	fixture_close(&f);
}

/* ---- garbage never crashes the loops ---- */

static int count_each(void *ctx, const char *key, struct json_object *rec)
{
	(void)key;
	(void)rec;
	(*(size_t *)ctx)++;
	return 0;
}

static size_t count_records(aks_state_store *s)
{
	size_t n = 0;
	assert_int_equal(aks__store_scan(s, AKS_QUEUE_NS, "", count_each, &n, NULL), AKS_OK);
	return n;
}

static size_t garbage(unsigned *seed, int k, char *buf, size_t cap)
{
	static const char *const shapes[] = {
	    "",
	    "{",
	    "null",
	    "[]",
	    "{\"task_id\": 5}",
	    "{\"request_id\": \"x\", \"session_id\": \"s\", \"status_code\": 200, \"body\": []}",
	    "{\"request_id\": \"x\", \"session_id\": \"s\", \"status_code\": 200, \"body\": "
	    "{\"task_id\": \"x\", \"status\": \"exploded\"}}",
	    "{\"request_id\": \"\", \"session_id\": 1, \"status_code\": \"200\", \"body\": {}}",
	    "{\"task_id\": \"t\", \"operation\": \"upload_file\", \"payload\": {\"path\": \"p\", "
	    "\"content\": \"!!notbase64\"}, \"profile\": \"p\", \"principal\": {\"subject\": "
	    "\"a\"}, \"policy\": {}, \"sandbox_session\": {\"sandbox_session_id\": \"s\", "
	    "\"profile\": \"p\"}}",
	    "{\"a\": 1} trailing",
	    "\"\\ud800\"",
	    "1e999999",
	};
	size_t nshapes = sizeof(shapes) / sizeof(shapes[0]);
	size_t len;
	if (k % 4 == 0) {
		len = (size_t)(rand_r(seed) % (int)cap);
		for (size_t i = 0; i < len; i++)
			buf[i] = (char)(rand_r(seed) & 0xFF);
	} else if (k % 4 == 1) {
		/* deep nesting */
		len = cap - 1;
		for (size_t i = 0; i < len; i++)
			buf[i] = i < len / 2 ? '[' : ']';
	} else {
		const char *s = shapes[(size_t)rand_r(seed) % nshapes];
		len = strlen(s);
		memcpy(buf, s, len);
		/* and a random byte flipped now and then, a NUL included */
		if (len && k % 3 == 0)
			buf[(size_t)rand_r(seed) % len] = (char)(rand_r(seed) & 0xFF);
	}
	return len;
}

static void test_garbage_never_crashes(void **state)
{
	(void)state;
	fixture f;
	fixture_open(&f, NULL);
	proc_state p;
	proc_init(&p);
	aks_worker_config c = base_config(&f, &p);
	c.input_max_receive = 1;
	c.output_max_receive = 1;
	c.input_consumers = 2;
	c.output_consumers = 2;
	c.batch_size = 3;
	c.once = true;
	unsigned seed = 7;
	enum { N = 24 };
	char buf[3000], id[32], grp[32];
	for (int k = 0; k < N; k++) {
		size_t len = garbage(&seed, k, buf, sizeof(buf));
		snprintf(id, sizeof(id), "gi%d", k);
		snprintf(grp, sizeof(grp), "grp%d", k);
		send_raw(f.t, AKS_QUEUE_INPUT, buf, len, k % 2 ? id : NULL, k % 3 ? grp : NULL);
		len = garbage(&seed, k + 1, buf, sizeof(buf));
		snprintf(id, sizeof(id), "go%d", k);
		send_raw(f.t, AKS_QUEUE_OUTPUT, buf, len, k % 2 ? id : NULL, NULL);
	}
	aks_worker *w = start(&c);
	watchdog d = {.w = w};
	pthread_t th;
	pthread_create(&th, NULL, watchdog_main, &d);
	assert_int_equal(aks__worker_wait(w, NULL), AKS_OK);
	atomic_store(&d.done, true);
	pthread_join(th, NULL);
	assert_false(atomic_load(&d.fired));
	aks_worker_stats st;
	aks__worker_get_stats(w, &st);
	aks__worker_free(w);
	assert_int_equal(atomic_load(&p.calls), 0);
	/* every message of either queue ended dead-lettered; nothing is left behind */
	assert_int_equal(st.dead_lettered, 2 * N);
	assert_int_equal(st.request_failures, N / 2);
	/* the ones with a request id got a terminal failed record */
	for (int k = 1; k < N; k += 2) {
		snprintf(id, sizeof(id), "gi%d", k);
		struct json_object *r = wait_record(f.store, id, 0);
		assert_non_null(r);
		assert_int_equal(jint(r, "status_code"), 500);
		json_object_put(r);
		snprintf(id, sizeof(id), "go%d", k);
		r = wait_record(f.store, id, 0);
		assert_non_null(r);
		assert_int_equal(jint(r, "status_code"), 500);
		json_object_put(r);
	}
	/* plus one for "x", the request_id inside some garbage records */
	assert_int_equal(count_records(f.store), N + (has_record(f.store, "x") ? 1 : 0));
	aks_queue_consumer *qc = NULL;
	aks_message *m[4];
	size_t n = 0;
	assert_int_equal(aks__consumer_open(f.t, AKS_QUEUE_INPUT, &qc, NULL), AKS_OK);
	assert_int_equal(aks__consumer_fetch(qc, m, 4, &n, 0, NULL, NULL), AKS_OK);
	assert_int_equal(n, 0);
	aks__consumer_close(qc);
	proc_fini(&p);
	fixture_close(&f);
}

/* ---- the engine: the worker's own policy, and the sweep against a busy session ---- */

/* The real engine (worker_core.c) over settings loaded from a file, with local_subprocess
 * sandboxes under dir/boxes and an in_memory response store. `strict` picks the worker's
 * profiles: strict, "p" times out at 1 s and "gated" refuses a network policy the provider
 * cannot enforce (strict: true); loose, "p" allows 60 s and "gated" has strict: false. */
typedef struct eng_fixture {
	char dir[64];
	char boxes[96];
	aks_settings *settings;
	aks_state_store *store;
	aks_worker_engine *e;
} eng_fixture;

static void eng_open_with(eng_fixture *x, const char *dir, bool strict,
                          const aks_plugin_descriptor *store_desc)
{
	memset(x, 0, sizeof(*x));
	snprintf(x->dir, sizeof(x->dir), "%s", dir);
	snprintf(x->boxes, sizeof(x->boxes), "%s/boxes", dir);
	char cfg[128];
	snprintf(cfg, sizeof(cfg), "%s/%s.yaml", dir, strict ? "strict" : "loose");
	FILE *f = fopen(cfg, "w");
	assert_non_null(f);
	fprintf(f,
	        "sandbox:\n"
	        "  enabled: true\n"
	        "  default_profile: p\n"
	        "  broker:\n"
	        "    flavor: queue\n"
	        "    queue: {type: in_memory}\n"
	        "    response_store: {type: in_memory}\n"
	        "  profiles:\n"
	        "    p: {type: local_subprocess, idle_timeout: 60, policy: {timeout: %s},\n"
	        "        local_subprocess: {workdir: %s}}\n"
	        "    gated: {type: local_subprocess, policy: {network_egress: deny, strict: %s},\n"
	        "            local_subprocess: {workdir: %s}}\n",
	        strict ? "1" : "60", x->boxes, strict ? "true" : "false", x->boxes);
	assert_int_equal(fclose(f), 0);
	static const char *const no_env[] = {NULL};
	aks_error *err = NULL;
	if (aks_settings_load(cfg, no_env, &x->settings, &err) < 0)
		fail_msg("settings: %s", aks_error_message(err));
	assert_int_equal(aks__store_open_desc(store_desc, NULL, &x->store, &err), AKS_OK);
	assert_int_equal(aks__worker_engine_new(x->settings, x->store, &x->e, &err), AKS_OK);
}

static void eng_open(eng_fixture *x, const char *dir, bool strict)
{
	eng_open_with(x, dir, strict, &aks__memory_store_descriptor);
}

static void eng_close(eng_fixture *x)
{
	aks__worker_engine_free(x->e);
	aks__store_close(x->store);
	aks_settings_free(x->settings);
}

static char *make_tmpdir(void)
{
	char *dir = strdup("/tmp/aks-worker-engine-XXXXXX");
	assert_non_null(dir);
	assert_non_null(mkdtemp(dir));
	return dir;
}

static void remove_tree(const char *dir)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

static bool is_dir(const char *path)
{
	struct stat st;
	return path && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* How many sandboxes (ak-sandbox-*) exist under the fixture's boxes directory. */
static int count_sandboxes(const eng_fixture *x)
{
	DIR *d = opendir(x->boxes);
	if (!d)
		return 0; /* local_subprocess makes it on the first create */
	int n = 0;
	/* Directories only: each one's "<dir>.labels" beside it is not another sandbox. */
	for (struct dirent *de; (de = readdir(d));)
		n += strncmp(de->d_name, "ak-sandbox-", 11) == 0 && de->d_type == DT_DIR;
	closedir(d);
	return n;
}

/* The request as the queue client would send it, through the real decoder. It carries the
 * loosest policy the wire can say: any egress, no strictness, 60 s. */
static const char *const LOOSE_POLICY =
    "{\"network_egress\": \"allow\", \"network_allow\": [], \"fs_allow_read\": [], "
    "\"fs_allow_write\": [], \"timeout\": 60, \"strict\": false}";

static aks_wire_request *wire_command(const char *task, const char *profile,
                                      const char *session_profile, const char *conv,
                                      const char *command)
{
	char body[2048];
	snprintf(body, sizeof(body),
	         "{\"task_id\": \"%s\", \"operation\": \"execute_command\", \"payload\": "
	         "{\"command\": \"%s\"}, \"profile\": \"%s\", \"principal\": {\"mode\": \"agent\", "
	         "\"subject\": \"a\"}, \"policy\": %s, \"sandbox_session\": "
	         "{\"sandbox_session_id\": \"default:p\", \"profile\": \"%s\"}, \"ak_session_id\": "
	         "\"%s\", \"agent\": \"agent\"}",
	         task, command, profile, LOOSE_POLICY, session_profile, conv);
	aks_wire_request *r = NULL;
	aks_error *err = NULL;
	if (aks__wire_request_decode(body, strlen(body), &r, &err) != AKS_OK)
		fail_msg("decode: %s", aks_error_message(err));
	/* the loose copy really is on the request */
	assert_true(r->policy.timeout == 60);
	assert_false(r->policy.strict);
	assert_int_equal(r->policy.network_egress, AKS_EGRESS_ALLOW);
	return r;
}

/* Runs a request through the engine; *ms: how long it took. */
static aks_wire_completion *eng_run(eng_fixture *x, aks_wire_request *r, int64_t *ms)
{
	aks_wire_completion *c = NULL;
	int64_t t0 = aks__now_ms();
	assert_int_equal(aks__worker_engine_process(x->e, r, NULL, &c), AKS_OK);
	if (ms)
		*ms = aks__now_ms() - t0;
	assert_non_null(c);
	aks__wire_request_free(r);
	return c;
}

static const char *stdout_of(const aks_wire_completion *c)
{
	size_t n = 0;
	return c->result ? aks_result_get_stdout(c->result, &n) : NULL;
}

/* The inventory record of session "default:p" in `conv`, or NULL. */
static struct json_object *inventory_of(eng_fixture *x, const char *conv)
{
	char *skey = aks__queue_session_key(conv, "default:p");
	char ikey[256];
	snprintf(ikey, sizeof(ikey), "%s%s", AKS_QUEUE_INVENTORY_PREFIX, skey);
	free(skey);
	struct json_object *o = NULL;
	return aks__store_get(x->store, AKS_QUEUE_NS, ikey, &o, NULL) == AKS_OK ? o : NULL;
}

/* The collector over the response store: the inventory is what records a worker's
 * sandboxes, so one it holds is kept and one it lost (a worker killed between the create and
 * the inventory write) is destroyed. */
static void test_engine_gc(void **state)
{
	(void)state;
	char *dir = make_tmpdir();
	eng_fixture x;
	eng_open(&x, dir, false);
	aks__wire_completion_free(eng_run(&x, wire_command("t-1", "p", "p", "c-1", "true"), NULL));
	aks__wire_completion_free(eng_run(&x, wire_command("t-2", "p", "p", "c-2", "true"), NULL));
	assert_int_equal(count_sandboxes(&x), 2);
	struct json_object *report = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks__worker_engine_gc(x.e, false, &report, &err), AKS_OK);
	assert_int_equal(json_object_get_int(json_object_object_get(report, "kept")), 2);
	assert_int_equal(json_object_array_length(json_object_object_get(report, "removed")), 0);
	json_object_put(report);
	/* c-2's inventory record lost: its sandbox is an orphan */
	char *skey = aks__queue_session_key("c-2", "default:p");
	char ikey[256];
	snprintf(ikey, sizeof(ikey), "%s%s", AKS_QUEUE_INVENTORY_PREFIX, skey);
	free(skey);
	assert_int_equal(aks__store_delete(x.store, AKS_QUEUE_NS, ikey, &err), AKS_OK);
	assert_int_equal(aks__worker_engine_gc(x.e, false, &report, &err), AKS_OK);
	assert_int_equal(json_object_get_int(json_object_object_get(report, "kept")), 1);
	assert_int_equal(json_object_array_length(json_object_object_get(report, "removed")), 1);
	json_object_put(report);
	assert_int_equal(count_sandboxes(&x), 1);
	struct json_object *inv = inventory_of(&x, "c-1");
	assert_non_null(inv); /* c-1 keeps its sandbox */
	json_object_put(inv);
	eng_close(&x);
	remove_tree(dir);
	free(dir);
}

/*
 * The worker enforces its own profile's policy; the copy a request carries (here the
 * loosest: 60 s, any egress, strict false) changes nothing. With the strict worker a 3 s
 * command times out after ~1 s and the strict network gate refuses before any sandbox is
 * made; the loosened worker runs the very same requests to completion (the control). A
 * request cannot name a profile the worker lacks, nor make its session's profile field
 * stand in for one.
 */
static void test_engine_own_policy(void **state)
{
	(void)state;
	char *dir = make_tmpdir();
	eng_fixture x;
	eng_open(&x, dir, true);

	/* the timeout: the worker's 1 s, not the request's 60 s */
	int64_t ms = 0;
	aks_wire_completion *c =
	    eng_run(&x, wire_command("t-1", "p", "p", "conv-1", "sleep 3; echo late"), &ms);
	assert_int_equal(c->status, AKS_WIRE_TIMED_OUT);
	assert_string_equal(c->error_type, "SandboxTimeoutError");
	assert_string_equal(c->error, "sandbox operation 'execute_command' exceeded timeout 1.0s");
	assert_null(c->result);
	assert_true(ms >= 900 && ms < 2500);
	aks__wire_completion_free(c);

	/* the strict gate: refused, with the gate's message, and nothing provisioned */
	int boxes = count_sandboxes(&x);
	c = eng_run(&x, wire_command("t-2", "gated", "gated", "conv-2", "echo ok"), NULL);
	assert_int_equal(c->status, AKS_WIRE_FAILED);
	assert_string_equal(c->error_type, "SandboxPolicyError");
	assert_non_null(strstr(c->error, "cannot enforce policy dimensions"));
	assert_non_null(strstr(c->error, "(strict)"));
	assert_null(c->result);
	assert_null(c->session.sandbox_id);
	aks__wire_completion_free(c);
	assert_int_equal(count_sandboxes(&x), boxes);
	assert_null(inventory_of(&x, "conv-2"));

	/* a profile the worker does not have: a clear error, whatever the session says */
	c = eng_run(&x, wire_command("t-3", "ghost", "p", "conv-3", "echo ok"), NULL);
	assert_int_equal(c->status, AKS_WIRE_FAILED);
	assert_string_equal(c->error_type, "SandboxConfigError");
	assert_string_equal(c->error,
	                    "unknown sandbox profile 'ghost'; configured profiles: ['gated', 'p']");
	assert_string_equal(c->task_id, "t-3");
	assert_null(c->session.sandbox_id);
	aks__wire_completion_free(c);
	assert_int_equal(count_sandboxes(&x), boxes);
	assert_null(inventory_of(&x, "conv-3"));

	/* the session's profile field picks nothing: "p" runs, and the inventory names "p" (the
	 * profile a sweep will destroy it with) */
	c = eng_run(&x, wire_command("t-4", "p", "ghost", "conv-4", "echo ran"), NULL);
	assert_int_equal(c->status, AKS_WIRE_SUCCEEDED);
	assert_string_equal(stdout_of(c), "ran\n");
	assert_true(is_dir(c->session.sandbox_id));
	struct json_object *inv = inventory_of(&x, "conv-4");
	assert_non_null(inv);
	assert_string_equal(jstr(inv, "body", "profile"), "p");
	assert_string_equal(jstr(inv, "body", "sandbox_id"), c->session.sandbox_id);
	json_object_put(inv);
	aks__wire_completion_free(c);
	eng_close(&x);

	/* the control: the same requests on a worker whose profiles are loosened */
	eng_open(&x, dir, false);
	c = eng_run(&x, wire_command("t-1", "p", "p", "conv-1", "sleep 3; echo late"), &ms);
	assert_int_equal(c->status, AKS_WIRE_SUCCEEDED);
	assert_string_equal(stdout_of(c), "late\n");
	assert_true(ms >= 2900);
	aks__wire_completion_free(c);
	boxes = count_sandboxes(&x);
	c = eng_run(&x, wire_command("t-2", "gated", "gated", "conv-2", "echo ok"), NULL);
	assert_int_equal(c->status, AKS_WIRE_SUCCEEDED);
	assert_string_equal(stdout_of(c), "ok\n");
	assert_true(is_dir(c->session.sandbox_id));
	aks__wire_completion_free(c);
	assert_int_equal(count_sandboxes(&x), boxes + 1);
	assert_non_null(inv = inventory_of(&x, "conv-2"));
	json_object_put(inv);
	eng_close(&x);
	remove_tree(dir);
	free(dir);
}

static size_t sweep_now(eng_fixture *x, int64_t *ms)
{
	size_t destroyed = 99;
	aks_error *err = NULL;
	int64_t t0 = aks__now_ms();
	if (aks__worker_engine_sweep(x->e, &destroyed, &err) != AKS_OK)
		fail_msg("sweep: %s", aks_error_message(err));
	if (ms)
		*ms = aks__now_ms() - t0;
	return destroyed;
}

/*
 * The idle sweep leaves a session alone while another worker holds its lock (the lock every
 * operation takes, in the response store), and reclaims it once the lock is free: the
 * sandbox's directory stays, then goes, and so does its inventory record.
 */
static void test_engine_sweep_skips_busy(void **state)
{
	(void)state;
	char *dir = make_tmpdir();
	eng_fixture x;
	eng_open(&x, dir, true);
	aks_wire_completion *c =
	    eng_run(&x, wire_command("t-s", "p", "p", "conv-s", "echo hi"), NULL);
	assert_int_equal(c->status, AKS_WIRE_SUCCEEDED);
	char *sandbox = strdup(c->session.sandbox_id);
	aks__wire_completion_free(c);
	assert_true(is_dir(sandbox));

	char *skey = aks__queue_session_key("conv-s", "default:p");
	char ikey[256];
	snprintf(ikey, sizeof(ikey), "%s%s", AKS_QUEUE_INVENTORY_PREFIX, skey);
	free(skey);
	struct json_object *rec = NULL;
	assert_int_equal(aks__store_get(x.store, AKS_QUEUE_NS, ikey, &rec, NULL), AKS_OK);
	assert_string_equal(jstr(rec, "body", "sandbox_id"), sandbox);

	/* fresh: not a candidate */
	assert_int_equal(sweep_now(&x, NULL), 0);
	assert_true(is_dir(sandbox));

	/* idle for an hour (its idle_timeout is 60 s) */
	struct json_object *body = json_object_object_get(rec, "body");
	json_object_object_add(body, "last_used_at",
	                       json_object_new_double(aks__epoch_now() - 3600));
	assert_int_equal(aks__store_put_expiring(x.store, AKS_QUEUE_NS, ikey, rec, 3600, NULL),
	                 AKS_OK);
	json_object_put(rec);

	/* another worker is running an operation of the session: it holds the lock */
	aks_store_lock *lk = NULL;
	assert_int_equal(aks__store_lock(x.store, AKS_QUEUE_NS, ikey, NULL, &lk, NULL), AKS_OK);
	int64_t ms = 0;
	assert_int_equal(sweep_now(&x, &ms), 0);
	assert_true(ms >= 450); /* it did try the lock, and waited for it */
	assert_true(is_dir(sandbox));
	assert_true(has_record(x.store, ikey));

	/* the lock is free: the next pass reclaims it */
	aks__store_unlock(x.store, lk);
	assert_int_equal(sweep_now(&x, NULL), 1);
	assert_false(is_dir(sandbox));
	assert_false(has_record(x.store, ikey));
	assert_int_equal(count_sandboxes(&x), 0);
	assert_int_equal(sweep_now(&x, NULL), 0); /* and only once */

	free(sandbox);
	eng_close(&x);
	remove_tree(dir);
	free(dir);
}

typedef struct sweep_thread {
	eng_fixture *x;
	int rc;
	size_t destroyed;
} sweep_thread;

/* A sweep on a thread of its own (no cmocka assertions off the main thread). */
static void *sweep_main(void *arg)
{
	sweep_thread *t = arg;
	t->rc = aks__worker_engine_sweep(t->x->e, &t->destroyed, NULL);
	return NULL;
}

/*
 * The session is busy when the sweep scans it: the sweep finds it idle, then waits for its
 * lock while the operation finishes and records its new last use. Once it has the lock the
 * sweep must look again and leave the now fresh session alone.
 */
static void test_engine_sweep_rechecks_under_lock(void **state)
{
	(void)state;
	char *dir = make_tmpdir();
	eng_fixture x;
	eng_open_with(&x, dir, true, watching_store());
	aks_wire_completion *c =
	    eng_run(&x, wire_command("t-r", "p", "p", "conv-r", "echo hi"), NULL);
	assert_int_equal(c->status, AKS_WIRE_SUCCEEDED);
	char *sandbox = strdup(c->session.sandbox_id);
	aks__wire_completion_free(c);
	assert_true(is_dir(sandbox));

	char *skey = aks__queue_session_key("conv-r", "default:p");
	char ikey[256];
	snprintf(ikey, sizeof(ikey), "%s%s", AKS_QUEUE_INVENTORY_PREFIX, skey);
	free(skey);
	struct json_object *rec = NULL;
	assert_int_equal(aks__store_get(x.store, AKS_QUEUE_NS, ikey, &rec, NULL), AKS_OK);
	struct json_object *body = json_object_object_get(rec, "body");
	json_object_object_add(body, "last_used_at",
	                       json_object_new_double(aks__epoch_now() - 3600));
	assert_int_equal(aks__store_put_expiring(x.store, AKS_QUEUE_NS, ikey, rec, 3600, NULL),
	                 AKS_OK);

	/* the operation holds the lock; the sweep scans (idle!) and goes for the lock */
	aks_store_lock *lk = NULL;
	assert_int_equal(aks__store_lock(x.store, AKS_QUEUE_NS, ikey, NULL, &lk, NULL), AKS_OK);
	int before = atomic_load(&lock_calls);
	atomic_store(&last_lock_rc, 1);
	sweep_thread t = {&x, -1, 99};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, sweep_main, &t), 0);
	int64_t end = aks__now_ms() + WAIT_MS;
	while (atomic_load(&lock_calls) == before && aks__now_ms() < end)
		sleep_ms(1);
	assert_int_equal(atomic_load(&lock_calls), before + 1);
	/* the operation ends: it records its last use, then lets go */
	json_object_object_add(body, "last_used_at", json_object_new_double(aks__epoch_now()));
	assert_int_equal(aks__store_put_expiring(x.store, AKS_QUEUE_NS, ikey, rec, 3600, NULL),
	                 AKS_OK);
	json_object_put(rec);
	aks__store_unlock(x.store, lk);
	pthread_join(th, NULL);
	/* the sweep got the lock (within its wait) and looked again */
	assert_int_equal(t.rc, AKS_OK);
	assert_int_equal(atomic_load(&last_lock_rc), AKS_OK);
	assert_int_equal(t.destroyed, 0);
	assert_true(is_dir(sandbox));
	assert_true(has_record(x.store, ikey));

	free(sandbox);
	eng_close(&x);
	remove_tree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_truncate_fits),
	    cmocka_unit_test(test_truncate_provider_data),
	    cmocka_unit_test(test_truncate_files),
	    cmocka_unit_test(test_truncate_streams),
	    cmocka_unit_test(test_truncate_utf8),
	    cmocka_unit_test(test_truncate_error),
	    cmocka_unit_test(test_start_refusals),
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_truncate_in_loop),
	    cmocka_unit_test(test_group_order),
	    cmocka_unit_test(test_request_permanent_failure),
	    cmocka_unit_test(test_request_permanent_failure_decodable),
	    cmocka_unit_test(test_undecodable_without_id),
	    cmocka_unit_test(test_store_failure_retried),
	    cmocka_unit_test(test_store_failing),
	    cmocka_unit_test(test_store_failing_idle_recovery),
	    cmocka_unit_test(test_stuck_consumer_not_live),
	    cmocka_unit_test(test_ready_verdicts),
	    cmocka_unit_test(test_output_permanent_failure),
	    cmocka_unit_test(test_stop_within_grace),
	    cmocka_unit_test(test_stop_past_grace),
	    cmocka_unit_test(test_once_drains),
	    cmocka_unit_test(test_sweep_interval),
	    cmocka_unit_test(test_monitor),
	    cmocka_unit_test(test_garbage_never_crashes),
	    cmocka_unit_test(test_heartbeat_keeps_lease),
	    cmocka_unit_test(test_engine_own_policy),
	    cmocka_unit_test(test_engine_gc),
	    cmocka_unit_test(test_engine_sweep_skips_busy),
	    cmocka_unit_test(test_engine_sweep_rechecks_under_lock),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
