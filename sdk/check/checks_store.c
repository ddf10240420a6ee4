/*
 * sdk/check/checks_store.c - the store contract (<aksandbox/store.h>) as checks: a store
 * plugin's operation table is driven directly, with the host's services table, the way
 * the host drives it. Every check works in namespaces of its own (a random run id in the
 * name), so a store that already holds data (a shared Redis) is never touched outside
 * them, and removes what it wrote.
 */
#include "config.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <aksandbox/store.h>

#include "check.h"

static struct {
	const aks_store_ops *ops;
	aks_store_impl *impl;
	char run[24]; /* this run's namespace prefix */
	char *buf;    /* the last value read: module-owned, so a failing check leaks nothing */
	size_t cap;
} st;

static const aks_store_ops *store_ops(void)
{
	const aks_plugin_descriptor *d = aks_plugin_get_descriptor(aks_check_need_plugin());
	return d->ops;
}

static aks_store_impl *need_store(void)
{
	if (!st.impl)
		aks_check_fail("the store is not open (see the check store_opens)");
	return st.impl;
}

/* "<run>:<name>": a namespace of this run. */
static const char *ns(const char *name, char *buf, size_t size)
{
	snprintf(buf, size, "%s:%s", st.run, name);
	return buf;
}

/* ---- transaction functions ---- */

typedef struct put_ctx {
	const char *value;
	size_t len;
	int action;
	int calls;
} put_ctx;

static int put_fn(void *ctx, const char *value, size_t len, int *action, const char **nv,
                  size_t *nlen, aks_error **err)
{
	(void)value, (void)len, (void)err;
	put_ctx *p = ctx;
	p->calls++;
	*action = p->action;
	*nv = p->value;
	*nlen = p->len;
	return AKS_OK;
}

static int put(const char *n, const char *key, const void *value, size_t len)
{
	put_ctx p = {value, len, AKS_STORE_PUT, 0};
	aks_error *err = NULL;
	int rc = st.ops->update(need_store(), n, key, put_fn, &p, &err);
	aks_check_expect("update (put)", rc, AKS_OK, err);
	return rc;
}

static void del(const char *n, const char *key)
{
	put_ctx p = {NULL, 0, AKS_STORE_DELETE, 0};
	aks_error *err = NULL;
	aks_check_expect("update (delete)", st.ops->update(need_store(), n, key, put_fn, &p, &err),
	                 AKS_OK, err);
}

typedef struct got {
	char *value; /* st.buf: valid until the next read */
	size_t len;
	int count;
	char keys[16][300];
} got;

static int take(void *ctx, const char *key, const char *value, size_t len)
{
	got *g = ctx;
	if (g->count < 16)
		snprintf(g->keys[g->count], sizeof(g->keys[0]), "%s", key);
	g->count++;
	if (len + 1 > st.cap) {
		char *p = realloc(st.buf, len + 1);
		if (!p)
			return AKS_ENOMEM;
		st.buf = p;
		st.cap = len + 1;
	}
	g->value = st.buf;
	memcpy(g->value, value, len);
	g->value[len] = '\0';
	g->len = len;
	return AKS_OK;
}

/* get: AKS_OK with the value in g, or the status. */
static int get(const char *n, const char *key, got *g)
{
	memset(g, 0, sizeof(*g));
	aks_error *err = NULL;
	int rc = st.ops->get(need_store(), n, key, take, g, &err);
	if (rc != AKS_OK && rc != AKS_ENOTFOUND)
		aks_check_expect("get", rc, AKS_OK, err);
	aks_error_free(err);
	return rc;
}

/* ---- the checks ---- */

void aks_check_store_opens(void)
{
	aks_check_need_plugin();
	st.ops = store_ops();
	unsigned char r[8];
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		aks_check_fail("cannot read random bytes");
	snprintf(st.run, sizeof(st.run), "aks-check-%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2],
	         r[3], r[4], r[5]);
	aks_error *err = NULL;
	int rc = aks_check.config_path
	             ? aks_config_load_block(aks_check.plugin, aks_check.config_path,
	                                     &aks_check.config, &err)
	             : aks_config_default_block(aks_check.plugin, &aks_check.config, &err);
	aks_check_expect(aks_check.config_path ? "loading the config block"
	                                       : "building the default config block",
	                 rc, AKS_OK, err);
	err = NULL;
	rc = st.ops->init(aks_host_services(), aks_check.config, &st.impl, &err);
	if (rc != AKS_OK)
		st.impl = NULL;
	aks_check_expect("the store's init", rc, AKS_OK, err);
}

/* Values are bytes: NUL and 0xFF survive; KEEP keeps, DELETE deletes, get of a missing
 * record is AKS_ENOTFOUND without calling back. */
void aks_check_store_round_trip(void)
{
	char n[64];
	static const char bytes[] = {'{', 0, (char)0xFF, '\n', '}'};
	ns("rt", n, sizeof(n));
	got g;
	if (get(n, "k", &g) != AKS_ENOTFOUND || g.count != 0)
		aks_check_fail("get of a record never written did not return AKS_ENOTFOUND");
	put(n, "k", bytes, sizeof(bytes));
	if (get(n, "k", &g) != AKS_OK || g.len != sizeof(bytes) || memcmp(g.value, bytes, g.len))
		aks_check_fail(
		    "get did not return the exact bytes written (NUL and 0xFF included)");
	put_ctx keep = {"x", 1, AKS_STORE_KEEP, 0};
	aks_error *err = NULL;
	aks_check_expect("update (keep)", st.ops->update(st.impl, n, "k", put_fn, &keep, &err),
	                 AKS_OK, err);
	if (get(n, "k", &g) != AKS_OK || g.len != sizeof(bytes))
		aks_check_fail("AKS_STORE_KEEP changed the record");
	del(n, "k");
	if (get(n, "k", &g) != AKS_ENOTFOUND)
		aks_check_fail("a deleted record is still there");
	del(n, "k"); /* deleting what is absent is fine */
}

static int failing_fn(void *ctx, const char *value, size_t len, int *action, const char **nv,
                      size_t *nlen, aks_error **err)
{
	(void)ctx, (void)value, (void)len, (void)nlen;
	*action = AKS_STORE_PUT;
	*nv = "changed";
	return aks_host_services()->error_set(err, AKS_EPOLICY, "refused by the function");
}

/* A function's error is passed back unchanged and nothing is written. */
void aks_check_store_failed_update_writes_nothing(void)
{
	char n[64];
	ns("fail", n, sizeof(n));
	put(n, "k", "before", 6);
	aks_error *err = NULL;
	int rc = st.ops->update(st.impl, n, "k", failing_fn, NULL, &err);
	if (rc != AKS_EPOLICY || !err)
		aks_check_fail(
		    "update returned %d (want the function's AKS_EPOLICY, with its error)", rc);
	aks_error_free(err);
	got g;
	if (get(n, "k", &g) != AKS_OK || g.len != 6 || memcmp(g.value, "before", 6) != 0)
		aks_check_fail("a failed update changed the record");
	del(n, "k");
}

/* Distinct names stay distinct, whatever bytes they hold, and a scan sees its own namespace
 * and key prefix only. */
void aks_check_store_names_apart(void)
{
	char a[300], b[300], c[300], longn[300];
	ns("x", a, sizeof(a));
	ns("x:y", b, sizeof(b));
	ns("x2", c, sizeof(c));
	put(a, "y:z", "1", 1);
	put(b, "z", "2", 1);
	put(c, "y:z", "3", 1);
	put(a, "*?[]\\ %/..", "4", 1);
	int keep = (int)strlen(st.run) + 1;
	snprintf(longn, sizeof(longn), "%s:%0*d", st.run, AKS_STORE_NAME_MAX - keep, 7);
	put(longn, "k", "5", 1);
	const struct {
		const char *n, *k, *v;
	} want[] = {{a, "y:z", "1"},
	            {b, "z", "2"},
	            {c, "y:z", "3"},
	            {a, "*?[]\\ %/..", "4"},
	            {longn, "k", "5"}};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		got g;
		if (get(want[i].n, want[i].k, &g) != AKS_OK || g.len != 1 ||
		    g.value[0] != want[i].v[0])
			aks_check_fail("record '%s' of '%s' does not read back as written",
			               want[i].k, want[i].n);
	}
	got g = {0};
	aks_error *err = NULL;
	aks_check_expect("scan", st.ops->scan(st.impl, a, "y", take, &g, &err), AKS_OK, err);
	if (g.count != 1 || strcmp(g.keys[0], "y:z") != 0)
		aks_check_fail("scan of '%s' with prefix 'y' saw %d records (want exactly 'y:z')",
		               a, g.count);
	memset(&g, 0, sizeof(g));
	aks_check_expect("scan", st.ops->scan(st.impl, a, "", take, &g, &err), AKS_OK, err);
	if (g.count != 2)
		aks_check_fail("scan of '%s' saw %d records (want 2: none of '%s' or '%s')", a,
		               g.count, b, c);
	del(a, "y:z");
	del(b, "z");
	del(c, "y:z");
	del(a, "*?[]\\ %/..");
	del(longn, "k");
}

typedef struct names {
	int ours;
	char first[64];
} names;

static int note_ns(void *ctx, const char *name)
{
	names *n = ctx;
	if (strncmp(name, st.run, strlen(st.run)) == 0) {
		if (!n->ours++)
			snprintf(n->first, sizeof(n->first), "%s", name);
	}
	return AKS_OK;
}

/* namespaces lists a namespace while it has a record, and not once its last record went. */
void aks_check_store_namespaces(void)
{
	char n[64];
	ns("listed", n, sizeof(n));
	put(n, "k", "v", 1);
	names seen = {0};
	aks_error *err = NULL;
	aks_check_expect("namespaces", st.ops->namespaces(st.impl, note_ns, &seen, &err), AKS_OK,
	                 err);
	if (seen.ours != 1 || strcmp(seen.first, n) != 0)
		aks_check_fail("namespaces listed %d of this run's namespaces (want exactly '%s')",
		               seen.ours, n);
	del(n, "k");
	memset(&seen, 0, sizeof(seen));
	aks_check_expect("namespaces", st.ops->namespaces(st.impl, note_ns, &seen, &err), AKS_OK,
	                 err);
	if (seen.ours != 0)
		aks_check_fail("namespaces still lists '%s' after its last record was deleted",
		               seen.first);
}

/* ---- atomicity ---- */

#define THREADS 8
#define ROUNDS  100

static int incr_fn(void *ctx, const char *value, size_t len, int *action, const char **nv,
                   size_t *nlen, aks_error **err)
{
	(void)err;
	char *buf = ctx; /* this thread's, reused by every run of the function */
	long v = 0;
	if (value) {
		char tmp[32];
		snprintf(tmp, sizeof(tmp), "%.*s", (int)(len < 31 ? len : 31), value);
		v = strtol(tmp, NULL, 10);
	}
	snprintf(buf, 32, "%ld", v + 1);
	*action = AKS_STORE_PUT;
	*nv = buf;
	*nlen = strlen(buf);
	return AKS_OK;
}

typedef struct counter_arg {
	const char *ns;
	int failures;
} counter_arg;

static void *count_up(void *arg)
{
	counter_arg *c = arg;
	char buf[32];
	for (int i = 0; i < ROUNDS; i++) {
		aks_error *err = NULL;
		if (st.ops->update(st.impl, c->ns, "counter", incr_fn, buf, &err) != AKS_OK)
			c->failures++;
		aks_error_free(err);
	}
	return NULL;
}

/* Concurrent read-modify-writes of one record lose nothing. */
void aks_check_store_updates_are_atomic(void)
{
	char n[64];
	ns("atomic", n, sizeof(n));
	need_store();
	pthread_t th[THREADS];
	counter_arg args[THREADS];
	for (int i = 0; i < THREADS; i++) {
		args[i] = (counter_arg){n, 0};
		if (pthread_create(&th[i], NULL, count_up, &args[i]) != 0)
			aks_check_fail("cannot start a thread");
	}
	int failures = 0;
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		failures += args[i].failures;
	}
	got g;
	long total = get(n, "counter", &g) == AKS_OK ? strtol(g.value, NULL, 10) : -1;
	del(n, "counter");
	if (failures)
		aks_check_fail("%d of %d updates failed", failures, THREADS * ROUNDS);
	if (total != THREADS * ROUNDS)
		aks_check_fail(
		    "%d threads made %d increments of one record; it holds %ld: updates were "
		    "lost",
		    THREADS, THREADS * ROUNDS, total);
}

/* ---- named locks ---- */

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A held lock keeps a second taker out until its deadline (AKS_ETIMEOUT) or its
 * cancellation (AKS_ECANCELLED), and lets it in once released. */
void aks_check_store_lock(void)
{
	char n[64];
	ns("lock", n, sizeof(n));
	aks_store_lock *held = NULL, *second = NULL;
	aks_error *err = NULL;
	aks_call call;
	aks_call_init(&call, 5, NULL, NULL, NULL);
	aks_check_expect("lock", st.ops->lock(need_store(), n, "L", &call, &held, &err), AKS_OK,
	                 err);
	err = NULL;
	aks_call_init(&call, 0.3, NULL, NULL, NULL);
	double t0 = mono();
	int rc = st.ops->lock(st.impl, n, "L", &call, &second, &err);
	double waited = mono() - t0;
	aks_error_free(err);
	err = NULL;
	if (rc == AKS_OK)
		st.ops->unlock(st.impl, second);
	if (rc != AKS_ETIMEOUT) {
		st.ops->unlock(st.impl, held);
		aks_check_fail("a second lock of a held name returned %d (want AKS_ETIMEOUT at its "
		               "deadline)",
		               rc);
	}
	if (waited < 0.25 || waited > 10) {
		st.ops->unlock(st.impl, held);
		aks_check_fail("the lock wait ended after %.2fs; its deadline was 0.3s", waited);
	}
	aks_cancel *cancel = NULL;
	aks_check_expect("aks_cancel_new", aks_cancel_new(&cancel, &err), AKS_OK, err);
	err = NULL;
	aks_cancel_trigger(cancel);
	aks_call_init(&call, 30, NULL, NULL, cancel);
	t0 = mono();
	rc = st.ops->lock(st.impl, n, "L", &call, &second, &err);
	waited = mono() - t0;
	aks_error_free(err);
	err = NULL;
	aks_cancel_free(cancel);
	if (rc == AKS_OK)
		st.ops->unlock(st.impl, second);
	if (rc != AKS_ECANCELLED || waited > 10) {
		st.ops->unlock(st.impl, held);
		aks_check_fail(
		    "a cancelled lock wait returned %d after %.2fs (want AKS_ECANCELLED, "
		    "promptly)",
		    rc, waited);
	}
	st.ops->unlock(st.impl, held);
	aks_call_init(&call, 5, NULL, NULL, NULL);
	aks_check_expect("lock after unlock", st.ops->lock(st.impl, n, "L", &call, &second, &err),
	                 AKS_OK, err);
	st.ops->unlock(st.impl, second);
}

/* put_expiring, when the store has it: the record reads back, then goes by itself. */
void aks_check_store_expiring_records(void)
{
	need_store();
	bool has = st.ops->struct_size >=
	               offsetof(aks_store_ops, put_expiring) + sizeof(st.ops->put_expiring) &&
	           st.ops->put_expiring;
	if (!has)
		return; /* optional: the store just cannot serve as a response store */
	char n[64];
	ns("ttl", n, sizeof(n));
	aks_error *err = NULL;
	aks_check_expect("put_expiring", st.ops->put_expiring(st.impl, n, "r", "rec", 3, 1, &err),
	                 AKS_OK, err);
	got g;
	if (get(n, "r", &g) != AKS_OK || g.len != 3)
		aks_check_fail("a record written with put_expiring does not read back");
	double t0 = mono();
	while (get(n, "r", &g) == AKS_OK) {
		if (mono() - t0 > 10)
			aks_check_fail(
			    "a record with a time to live of 1s is still there after 10s");
		usleep(100 * 1000);
	}
}

/* After every other check: the store closes, and opens and closes again. */
void aks_check_store_reopens(void)
{
	need_store();
	if (st.ops->fini)
		st.ops->fini(st.impl);
	st.impl = NULL;
	aks_store_impl *again = NULL;
	aks_error *err = NULL;
	aks_check_expect("the store's init (again)",
	                 st.ops->init(aks_host_services(), aks_check.config, &again, &err), AKS_OK,
	                 err);
	if (st.ops->fini)
		st.ops->fini(again);
}

void aks_check_store_close(void)
{
	free(st.buf);
	st.buf = NULL;
	st.cap = 0;
	if (st.impl && st.ops && st.ops->fini)
		st.ops->fini(st.impl);
	st.impl = NULL;
}
