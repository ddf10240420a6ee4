/* Unit tests: the built-in in_memory store (core/store/memory_store.c), driven through its
 * aks_store_ops with the host's services table, as the host drives a store. Covers the store
 * contract of <aksandbox/store.h> (the checks of sdk/check/checks_store.c, which need a
 * loaded .so, are repeated here): update/get/scan/namespaces, names kept apart, atomic
 * updates under threads, lock exclusion, lock timeout and cancellation, and put_expiring with
 * real expiry. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <aksandbox/store.h>

#include "core/config/block.h"
#include "core/plugin/host_api.h"
#include "core/store/memory_store.h"

/* ---- helpers ------------------------------------------------------------------------- */

static const aks_store_ops *ops(void)
{
	return aks__memory_store_descriptor.ops;
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

static int setup(void **state)
{
	/* The block as the host builds it: the descriptor declares no keys. */
	aks_config *cfg = NULL;
	aks_error *err = NULL;
	if (aks__config_build(&aks__memory_store_descriptor, NULL, "in_memory", &cfg, &err) !=
	    AKS_OK)
		fail_msg("config: %s", aks_error_message(err));
	aks_store_impl *s = NULL;
	int rc = ops()->init(aks__host_api(), cfg, &s, &err);
	aks_config_free(cfg);
	if (rc != AKS_OK)
		fail_msg("init: %s", aks_error_message(err));
	*state = s;
	return 0;
}

static int teardown(void **state)
{
	ops()->fini(*state);
	return 0;
}

typedef struct put_ctx {
	const char *value;
	size_t len;
	int action;
	int rc;
	/* what the function saw */
	bool saw_value;
	char seen[64];
	size_t seen_len;
} put_ctx;

static int txn(void *ctx, const char *value, size_t len, int *action, const char **nv, size_t *nlen,
               aks_error **err)
{
	put_ctx *p = ctx;
	p->saw_value = value != NULL;
	p->seen_len = len;
	if (value)
		memcpy(p->seen, value, len < sizeof(p->seen) ? len : sizeof(p->seen));
	if (p->rc)
		return aks__host_api()->error_set(err, p->rc, "the function says no");
	*action = p->action;
	*nv = p->value;
	*nlen = p->len;
	return AKS_OK;
}

static void put(aks_store_impl *s, const char *ns, const char *key, const char *value, size_t len)
{
	put_ctx p = {value, len, AKS_STORE_PUT, 0, false, "", 0};
	aks_error *err = NULL;
	if (ops()->update(s, ns, key, txn, &p, &err) != AKS_OK)
		fail_msg("update: %s", aks_error_message(err));
}

static void del(aks_store_impl *s, const char *ns, const char *key)
{
	put_ctx p = {NULL, 0, AKS_STORE_DELETE, 0, false, "", 0};
	aks_error *err = NULL;
	if (ops()->update(s, ns, key, txn, &p, &err) != AKS_OK)
		fail_msg("update: %s", aks_error_message(err));
}

typedef struct got {
	int calls;
	char value[256];
	size_t len;
} got;

static int take(void *ctx, const char *key, const char *value, size_t len)
{
	(void)key;
	got *g = ctx;
	g->calls++;
	g->len = len;
	memcpy(g->value, value, len < sizeof(g->value) ? len : sizeof(g->value));
	return AKS_OK;
}

static int get(aks_store_impl *s, const char *ns, const char *key, got *g)
{
	memset(g, 0, sizeof(*g));
	aks_error *err = NULL;
	int rc = ops()->get(s, ns, key, take, g, &err);
	if (rc == AKS_ENOTFOUND)
		assert_null(err);
	aks_error_free(err);
	return rc;
}

/* Collects the keys a scan delivers, sorted, space-separated. */
typedef struct keys {
	char *list[64];
	int n;
} keys;

static int note_key(void *ctx, const char *key, const char *value, size_t len)
{
	(void)value;
	(void)len;
	keys *k = ctx;
	if (k->n < 64)
		k->list[k->n++] = strdup(key);
	return AKS_OK;
}

static int note_name(void *ctx, const char *name)
{
	return note_key(ctx, name, NULL, 0);
}

static int cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *joined(keys *k)
{
	static char buf[1024];
	qsort(k->list, (size_t)k->n, sizeof(char *), cmp);
	buf[0] = '\0';
	for (int i = 0; i < k->n; i++) {
		strncat(buf, k->list[i], sizeof(buf) - strlen(buf) - 2);
		strcat(buf, " ");
		free(k->list[i]);
	}
	k->n = 0;
	return buf;
}

static char *scan(aks_store_impl *s, const char *ns, const char *prefix)
{
	keys k = {.n = 0};
	aks_error *err = NULL;
	if (ops()->scan(s, ns, prefix, note_key, &k, &err) != AKS_OK)
		fail_msg("scan: %s", aks_error_message(err));
	return joined(&k);
}

static char *namespaces(aks_store_impl *s)
{
	keys k = {.n = 0};
	aks_error *err = NULL;
	if (ops()->namespaces(s, note_name, &k, &err) != AKS_OK)
		fail_msg("namespaces: %s", aks_error_message(err));
	return joined(&k);
}

typedef struct stop_ctx {
	int calls;
} stop_ctx;

static int stop_at_first(void *ctx, const char *key, const char *value, size_t len)
{
	(void)key;
	(void)value;
	(void)len;
	((stop_ctx *)ctx)->calls++;
	return 42;
}

/* ---- records ---------------------------------------------------------------------------- */

/* An update sees the current bytes and writes, keeps or deletes; get reads back exactly what
 * was written (binary-safe); a failing function writes nothing and its code comes back. */
static void test_round_trip(void **state)
{
	aks_store_impl *s = *state;
	got g;
	assert_int_equal(get(s, "ns", "k", &g), AKS_ENOTFOUND);
	assert_int_equal(g.calls, 0);

	/* KEEP of an absent record leaves it absent. */
	put_ctx keep = {NULL, 0, AKS_STORE_KEEP, 0, true, "", 0};
	aks_error *err = NULL;
	assert_int_equal(ops()->update(s, "ns", "k", txn, &keep, &err), AKS_OK);
	assert_false(keep.saw_value);
	assert_int_equal(get(s, "ns", "k", &g), AKS_ENOTFOUND);

	put(s, "ns", "k", "a\0b", 3);
	assert_int_equal(get(s, "ns", "k", &g), AKS_OK);
	assert_int_equal(g.calls, 1);
	assert_int_equal(g.len, 3);
	assert_memory_equal(g.value, "a\0b", 3);

	/* The function sees the current value. */
	put_ctx p = {"next", 4, AKS_STORE_PUT, 0, false, "", 0};
	assert_int_equal(ops()->update(s, "ns", "k", txn, &p, &err), AKS_OK);
	assert_true(p.saw_value);
	assert_int_equal(p.seen_len, 3);
	assert_memory_equal(p.seen, "a\0b", 3);

	/* A failing function: its code and error, nothing written. */
	put_ctx no = {"never", 5, AKS_STORE_PUT, AKS_EPOLICY, false, "", 0};
	assert_int_equal(ops()->update(s, "ns", "k", txn, &no, &err), AKS_EPOLICY);
	assert_non_null(err);
	assert_string_equal(aks_error_message(err), "the function says no");
	aks_error_free(err);
	err = NULL;
	assert_int_equal(get(s, "ns", "k", &g), AKS_OK);
	assert_int_equal(g.len, 4);
	assert_memory_equal(g.value, "next", 4);

	/* An empty value is a value. */
	put(s, "ns", "empty", "", 0);
	assert_int_equal(get(s, "ns", "empty", &g), AKS_OK);
	assert_int_equal(g.len, 0);

	/* get returns the callback's code as is. */
	stop_ctx st = {0};
	assert_int_equal(ops()->get(s, "ns", "k", stop_at_first, &st, &err), 42);
	assert_int_equal(st.calls, 1);

	del(s, "ns", "k");
	del(s, "ns", "k"); /* absent is fine */
	del(s, "ns", "empty");
	assert_int_equal(get(s, "ns", "k", &g), AKS_ENOTFOUND);
	assert_string_equal(namespaces(s), "");
}

/* Distinct names stay distinct whatever their bytes; a scan sees its namespace and prefix
 * only; names out of bounds are refused. */
static void test_names_and_scan(void **state)
{
	aks_store_impl *s = *state;
	char longn[AKS_STORE_NAME_MAX + 2];
	memset(longn, 'n', AKS_STORE_NAME_MAX);
	longn[AKS_STORE_NAME_MAX] = '\0';
	put(s, "x", "y:z", "1", 1);
	put(s, "x:y", "z", "2", 1);
	put(s, "x2", "y:z", "3", 1);
	put(s, "x", "*?[]\\ %/..", "4", 1);
	put(s, "x", "yy", "5", 1);
	put(s, longn, longn, "6", 1);
	got g;
	assert_int_equal(get(s, "x:y", "z", &g), AKS_OK);
	assert_int_equal(g.value[0], '2');
	assert_int_equal(get(s, "x", "z", &g), AKS_ENOTFOUND);
	assert_int_equal(get(s, longn, longn, &g), AKS_OK);
	assert_int_equal(g.value[0], '6');
	assert_string_equal(scan(s, "x", "y"), "y:z yy ");
	assert_string_equal(scan(s, "x", "y:"), "y:z ");
	assert_string_equal(scan(s, "x", ""), "*?[]\\ %/.. y:z yy ");
	assert_string_equal(scan(s, "x", "y:z!"), "");
	assert_string_equal(scan(s, "nothing", ""), "");

	longn[AKS_STORE_NAME_MAX] = 'n';
	longn[AKS_STORE_NAME_MAX + 1] = '\0';
	aks_error *err = NULL;
	put_ctx p = {"v", 1, AKS_STORE_PUT, 0, false, "", 0};
	assert_int_equal(ops()->update(s, longn, "k", txn, &p, &err), AKS_EINVAL);
	aks_error_free(err);
	err = NULL;
	assert_int_equal(ops()->update(s, "ns", "", txn, &p, &err), AKS_EINVAL);
	aks_error_free(err);
	err = NULL;
	assert_int_equal(ops()->put_expiring(s, "", "k", "v", 1, 5, &err), AKS_EINVAL);
	aks_error_free(err);
	err = NULL;
	assert_int_equal(ops()->put_expiring(s, "ns", "k", "v", 1, 0, &err), AKS_EINVAL);
	aks_error_free(err);
}

/* A callback may call the store (no mutex held), and its non-zero return ends the scan. */
static int reenter(void *ctx, const char *key, const char *value, size_t len)
{
	(void)value;
	(void)len;
	aks_store_impl *s = ctx;
	got g;
	if (get(s, "re", key, &g) != AKS_OK)
		return AKS_ERROR;
	put(s, "re-copy", key, g.value, g.len);
	return AKS_OK;
}

static void test_callbacks(void **state)
{
	aks_store_impl *s = *state;
	put(s, "re", "a", "1", 1);
	put(s, "re", "b", "2", 1);
	aks_error *err = NULL;
	assert_int_equal(ops()->scan(s, "re", "", reenter, s, &err), AKS_OK);
	assert_string_equal(scan(s, "re-copy", ""), "a b ");
	stop_ctx st = {0};
	assert_int_equal(ops()->scan(s, "re", "", stop_at_first, &st, &err), 42);
	assert_int_equal(st.calls, 1);
	del(s, "re", "a");
	del(s, "re", "b");
	del(s, "re-copy", "a");
	del(s, "re-copy", "b");
}

/* namespaces lists a namespace while it has a record, and not once its last one went. */
static void test_namespaces(void **state)
{
	aks_store_impl *s = *state;
	assert_string_equal(namespaces(s), "");
	put(s, "conv-1", "k", "v", 1);
	put(s, "conv-1", "k2", "v", 1);
	put(s, "@runtime", "k", "v", 1);
	assert_string_equal(namespaces(s), "@runtime conv-1 ");
	del(s, "conv-1", "k");
	assert_string_equal(namespaces(s), "@runtime conv-1 ");
	del(s, "conv-1", "k2");
	assert_string_equal(namespaces(s), "@runtime ");
	del(s, "@runtime", "k");
	assert_string_equal(namespaces(s), "");
}

#define THREADS 8
#define ROUNDS  300

static int incr(void *ctx, const char *value, size_t len, int *action, const char **nv,
                size_t *nlen, aks_error **err)
{
	(void)err;
	char *buf = ctx;
	long v = 0;
	if (value) {
		char tmp[32];
		snprintf(tmp, sizeof(tmp), "%.*s", (int)(len < 31 ? len : 31), value);
		v = strtol(tmp, NULL, 10);
	}
	sched_yield(); /* widen the read-modify-write window */
	snprintf(buf, 32, "%ld", v + 1);
	*action = AKS_STORE_PUT;
	*nv = buf;
	*nlen = strlen(buf);
	return AKS_OK;
}

typedef struct counter_arg {
	aks_store_impl *s;
	atomic_int failures;
} counter_arg;

static void *count_up(void *arg)
{
	counter_arg *c = arg;
	char buf[32];
	for (int i = 0; i < ROUNDS; i++) {
		aks_error *err = NULL;
		if (ops()->update(c->s, "atomic", "counter", incr, buf, &err) != AKS_OK)
			atomic_fetch_add(&c->failures, 1);
		aks_error_free(err);
	}
	return NULL;
}

/* Concurrent read-modify-writes of one record lose nothing. */
static void test_updates_are_atomic(void **state)
{
	counter_arg c = {.s = *state};
	atomic_init(&c.failures, 0);
	pthread_t th[THREADS];
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, count_up, &c), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(atomic_load(&c.failures), 0);
	got g;
	assert_int_equal(get(c.s, "atomic", "counter", &g), AKS_OK);
	g.value[g.len] = '\0';
	assert_int_equal(strtol(g.value, NULL, 10), THREADS * ROUNDS);
	del(c.s, "atomic", "counter");
}

/* ---- locks ------------------------------------------------------------------------------ */

typedef struct lock_arg {
	aks_store_impl *s;
	atomic_int holders, max_holders, failures;
	long total; /* changed only under the lock, without atomics */
} lock_arg;

static void *lock_loop(void *arg)
{
	lock_arg *a = arg;
	for (int i = 0; i < 100; i++) {
		aks_call call;
		aks_call_init(&call, 30, NULL, NULL, NULL);
		aks_store_lock *lk = NULL;
		aks_error *err = NULL;
		if (ops()->lock(a->s, "sess", "L", &call, &lk, &err) != AKS_OK) {
			atomic_fetch_add(&a->failures, 1);
			aks_error_free(err);
			continue;
		}
		int now = atomic_fetch_add(&a->holders, 1) + 1;
		int seen = atomic_load(&a->max_holders);
		while (now > seen && !atomic_compare_exchange_weak(&a->max_holders, &seen, now))
			;
		long v = a->total;
		usleep(50);
		a->total = v + 1;
		atomic_fetch_sub(&a->holders, 1);
		ops()->unlock(a->s, lk);
	}
	return NULL;
}

/* A named lock admits one holder at a time across threads (and other names are free
 * meanwhile); a waiter gets it promptly once it is released. */
static void test_lock_exclusion(void **state)
{
	lock_arg a = {.s = *state};
	pthread_t th[4];
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&th[i], NULL, lock_loop, &a), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(atomic_load(&a.failures), 0);
	assert_int_equal(atomic_load(&a.max_holders), 1);
	assert_int_equal(a.total, 400);

	aks_store_impl *s = *state;
	aks_call call;
	aks_call_init(&call, 5, NULL, NULL, NULL);
	aks_store_lock *held = NULL, *other = NULL, *again = NULL;
	aks_error *err = NULL;
	assert_int_equal(ops()->lock(s, "sess", "L", &call, &held, &err), AKS_OK);
	/* Another name, or the same key in another namespace: not blocked. */
	assert_int_equal(ops()->lock(s, "sess", "M", &call, &other, &err), AKS_OK);
	ops()->unlock(s, other);
	assert_int_equal(ops()->lock(s, "sess2", "L", &call, &other, &err), AKS_OK);
	ops()->unlock(s, other);
	/* Locks are not records. */
	assert_string_equal(namespaces(s), "");
	ops()->unlock(s, held);
	assert_int_equal(ops()->lock(s, "sess", "L", &call, &again, &err), AKS_OK);
	ops()->unlock(s, again);
}

typedef struct release_arg {
	aks_store_impl *s;
	aks_store_lock *lk;
	aks_cancel *cancel;
	double at;
} release_arg;

static void *release_later(void *p)
{
	release_arg *r = p;
	sleep_s(0.3);
	r->at = mono();
	if (r->cancel)
		aks_cancel_trigger(r->cancel);
	else
		ops()->unlock(r->s, r->lk);
	return NULL;
}

/* A wait for a held lock ends with AKS_ETIMEOUT at the call's deadline, with
 * AKS_ECANCELLED when the call is cancelled (at once, while asleep), and with the lock when
 * the holder lets go (at once, not at some polling tick). */
static void test_lock_timeout_and_cancel(void **state)
{
	aks_store_impl *s = *state;
	aks_call call;
	aks_call_init(&call, 5, NULL, NULL, NULL);
	aks_store_lock *held = NULL, *second = NULL;
	aks_error *err = NULL;
	assert_int_equal(ops()->lock(s, "n", "L", &call, &held, &err), AKS_OK);

	aks_call_init(&call, 0.3, NULL, NULL, NULL);
	double t0 = mono();
	assert_int_equal(ops()->lock(s, "n", "L", &call, &second, &err), AKS_ETIMEOUT);
	double waited = mono() - t0;
	assert_non_null(strstr(aks_error_message(err), "timed out"));
	aks_error_free(err);
	err = NULL;
	assert_true(waited >= 0.28 && waited < 3.0);

	/* Cancelled while asleep. */
	aks_cancel *cancel = NULL;
	assert_int_equal(aks_cancel_new(&cancel, &err), AKS_OK);
	aks_call_init(&call, 30, NULL, NULL, cancel);
	release_arg r = {s, NULL, cancel, 0};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, release_later, &r), 0);
	assert_int_equal(ops()->lock(s, "n", "L", &call, &second, &err), AKS_ECANCELLED);
	double done = mono();
	pthread_join(th, NULL);
	aks_error_free(err);
	err = NULL;
	assert_true(done - r.at < 1.0);
	/* Already cancelled: no wait. */
	t0 = mono();
	assert_int_equal(ops()->lock(s, "n", "L", &call, &second, &err), AKS_ECANCELLED);
	aks_error_free(err);
	err = NULL;
	assert_true(mono() - t0 < 1.0);
	aks_cancel_free(cancel);

	/* Released while a waiter sleeps (no deadline at all): it gets the lock at once. */
	release_arg rel = {s, held, NULL, 0};
	assert_int_equal(pthread_create(&th, NULL, release_later, &rel), 0);
	assert_int_equal(ops()->lock(s, "n", "L", NULL, &second, &err), AKS_OK);
	done = mono();
	pthread_join(th, NULL);
	assert_true(done - rel.at < 1.0);
	ops()->unlock(s, second);
}

/* ---- expiry ----------------------------------------------------------------------------- */

/* put_expiring: the record reads back, then is gone by itself for get, scan, namespaces and
 * update once its time to live has passed; a later update writes a lasting record. */
static void test_put_expiring(void **state)
{
	aks_store_impl *s = *state;
	aks_error *err = NULL;
	assert_non_null(ops()->put_expiring);
	assert_int_equal(ops()->put_expiring(s, "resp", "r1", "rec\0ord", 7, 1, &err), AKS_OK);
	assert_int_equal(ops()->put_expiring(s, "resp", "r2", "x", 1, 1, &err), AKS_OK);
	assert_int_equal(ops()->put_expiring(s, "resp", "long", "y", 1, 3600, &err), AKS_OK);
	assert_int_equal(ops()->put_expiring(s, "gone", "only", "z", 1, 1, &err), AKS_OK);
	put(s, "resp", "plain", "p", 1);
	got g;
	assert_int_equal(get(s, "resp", "r1", &g), AKS_OK);
	assert_int_equal(g.len, 7);
	assert_memory_equal(g.value, "rec\0ord", 7);
	assert_string_equal(scan(s, "resp", "r"), "r1 r2 ");
	assert_string_equal(namespaces(s), "gone resp ");
	/* Replacing keeps it expiring; a transaction over it writes a lasting record. */
	assert_int_equal(ops()->put_expiring(s, "resp", "r2", "xx", 2, 1, &err), AKS_OK);
	put_ctx p = {"lasting", 7, AKS_STORE_PUT, 0, false, "", 0};
	assert_int_equal(ops()->put_expiring(s, "resp", "made-lasting", "t", 1, 1, &err), AKS_OK);
	assert_int_equal(ops()->update(s, "resp", "made-lasting", txn, &p, &err), AKS_OK);
	assert_true(p.saw_value);

	sleep_s(1.1);
	assert_int_equal(get(s, "resp", "r1", &g), AKS_ENOTFOUND);
	assert_string_equal(scan(s, "resp", ""), "long made-lasting plain ");
	assert_string_equal(namespaces(s), "resp "); /* "gone" held expired records only */
	put_ctx seen = {NULL, 0, AKS_STORE_KEEP, 0, true, "", 0};
	assert_int_equal(ops()->update(s, "resp", "r2", txn, &seen, &err), AKS_OK);
	assert_false(seen.saw_value); /* the transaction sees it absent */
	assert_int_equal(get(s, "resp", "made-lasting", &g), AKS_OK);
	assert_int_equal(g.len, 7);
	/* Expired records nobody reads again go too (the sweep on a write); fini frees the rest,
	 * which valgrind checks. */
	assert_int_equal(ops()->put_expiring(s, "other", "k", "v", 1, 1, &err), AKS_OK);
	del(s, "resp", "plain");
	del(s, "resp", "made-lasting");
}

int main(void)
{
	/* A wait that never ends is a failure, not a hung test run (generous for valgrind). */
	alarm(300);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_names_and_scan, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_callbacks, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_namespaces, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_updates_are_atomic, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lock_exclusion, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lock_timeout_and_cancel, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_put_expiring, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
