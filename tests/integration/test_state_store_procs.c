/* Integration tests: the state store (records named by namespace and key, in the built-in
 * file store) across real processes (fork, no exec; each child opens its own handle): many
 * processes with threads updating the same record and records of their own lose nothing; a
 * record that keeps being deleted (its directory with it) loses nothing; a writer SIGKILLed
 * at random moments during a long stream of updates to several records leaves each record
 * old or new, never torn; an update lock and a named lock die with their holder, and the
 * named lock excludes processes.
 *
 * Knobs (environment): AKS_STORE_PROCS (default 50), AKS_STORE_CRASH_ROUNDS (default 80),
 * AKS_STORE_SEED (random seed; printed either way). */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "core/store/store.h"
#include "tests/unit/rm_tree.h"

static char base[512];
static char store_dir[600];

static int env_int(const char *name, int def)
{
	const char *v = getenv(name);
	return v && *v ? atoi(v) : def;
}

static int setup(void **state)
{
	(void)state;
	const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(base, sizeof(base), "%s/aks-store-procs-XXXXXX", tmp);
	assert_non_null(mkdtemp(base));
	snprintf(store_dir, sizeof(store_dir), "%s/state", base);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	rm_tree(base);
	return 0;
}

static aks_state_store *open_store(void)
{
	aks_state_store *s = NULL;
	aks_error *err = NULL;
	if (aks__store_open(store_dir, &s, &err) != AKS_OK) {
		fprintf(stderr, "# open: %s\n", aks_error_message(err));
		aks_error_free(err);
		return NULL;
	}
	return s;
}

/* Children wait here until the parent closes the pipe, so that they all start together. */
static void barrier_wait(int fd)
{
	char c;
	while (read(fd, &c, 1) < 0 && errno == EINTR)
		;
	close(fd);
}

static int wait_child(pid_t pid)
{
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return st;
}

/* Every file and directory under ns/ (for leftovers): lock files, temporaries, empty
 * directories. Counts what it finds; `odd` gets the first names that are not records. */
typedef struct census {
	int json, lock, tmp, mutex, other, empty_dirs;
	char odd[256];
} census;

static void census_dir(const char *path, census *c, bool top)
{
	DIR *d = opendir(path);
	if (!d)
		fail_msg("cannot list %s: %s", path, strerror(errno));
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		n++;
		char sub[1200];
		snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
		struct stat st;
		if (lstat(sub, &st) < 0)
			fail_msg("lstat %s: %s", sub, strerror(errno));
		if (S_ISDIR(st.st_mode)) {
			census_dir(sub, c, false);
			continue;
		}
		size_t len = strlen(de->d_name);
		const char *dot = strrchr(de->d_name, '.');
		if (dot && !strcmp(dot, ".json"))
			c->json++;
		else if (dot && !strcmp(dot, ".lock"))
			c->lock++;
		else if (dot && !strcmp(dot, ".tmp"))
			c->tmp++;
		else if (dot && !strcmp(dot, ".mutex"))
			c->mutex++;
		else
			c->other++;
		if (!dot || strcmp(dot, ".json"))
			snprintf(c->odd + strlen(c->odd), sizeof(c->odd) - strlen(c->odd), "%.*s ",
			         (int)(len < 40 ? len : 40), de->d_name);
	}
	closedir(d);
	if (n == 0 && !top)
		c->empty_dirs++;
}

static census take_census(void)
{
	census c;
	memset(&c, 0, sizeof(c));
	char ns[700];
	snprintf(ns, sizeof(ns), "%s/ns", store_dir);
	census_dir(ns, &c, true);
	return c;
}

/* Only records under ns/: no lock file, temporary or empty directory left behind. */
static void assert_clean(int records)
{
	census c = take_census();
	if (c.json != records || c.lock || c.tmp || c.mutex || c.other || c.empty_dirs)
		fail_msg(
		    "ns/ holds %d records (expected %d), %d .lock, %d .tmp, %d .mutex, %d other, "
		    "%d empty directories: %s",
		    c.json, records, c.lock, c.tmp, c.mutex, c.other, c.empty_dirs, c.odd);
}

/* "n" of a record, -1 when absent. */
static int64_t get_n(aks_state_store *s, const char *ns, const char *key)
{
	json_object *rec = NULL;
	aks_error *err = NULL;
	int rc = aks__store_get(s, ns, key, &rec, &err);
	if (rc == AKS_ENOTFOUND)
		return -1;
	if (rc != AKS_OK)
		fail_msg("get %s/%s: %s", ns, key, aks_error_message(err));
	int64_t n = json_object_get_int64(json_object_object_get(rec, "n"));
	json_object_put(rec);
	return n;
}

static int incr(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)ctx;
	(void)err;
	json_object *n = NULL;
	int64_t v = json_object_object_get_ex(rec, "n", &n) ? json_object_get_int64(n) : 0;
	json_object_object_add(rec, "n", json_object_new_int64(v + 1));
	*changed = true;
	return AKS_OK;
}

/* ---- 1. no lost update: many processes, threads in each, one record and many ---- */

#define THREADS    3
#define PER_THREAD 8

static int incr_append(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)err;
	json_object *n = NULL, *list = NULL;
	int64_t v = json_object_object_get_ex(rec, "n", &n) ? json_object_get_int64(n) : 0;
	json_object_object_add(rec, "n", json_object_new_int64(v + 1));
	if (!json_object_object_get_ex(rec, "list", &list)) {
		list = json_object_new_array();
		json_object_object_add(rec, "list", list);
	}
	json_object_array_add(list, json_object_new_string(ctx));
	*changed = true;
	return AKS_OK;
}

typedef struct counter_worker {
	aks_state_store *s;
	int proc, thread, failures;
} counter_worker;

static void *counter_thread(void *arg)
{
	counter_worker *w = arg;
	int64_t last_seen = 0;
	char own[32];
	snprintf(own, sizeof(own), "proc-%d", w->proc);
	for (int i = 0; i < PER_THREAD; i++) {
		char tag[48];
		snprintf(tag, sizeof(tag), "p%d-t%d-%d", w->proc, w->thread, i);
		aks_error *err = NULL;
		/* The record every process changes, and the one its own threads share. */
		if (aks__store_update(w->s, "shared", "counter", incr_append, tag, &err) !=
		        AKS_OK ||
		    aks__store_update(w->s, "shared", own, incr, NULL, &err) != AKS_OK) {
			fprintf(stderr, "# update: %s\n", aks_error_message(err));
			w->failures++;
		}
		aks_error_free(err);
		err = NULL;
		/* Reads take no lock, yet never see a value go backwards. */
		json_object *rec = NULL;
		if (aks__store_get(w->s, "shared", "counter", &rec, &err) != AKS_OK) {
			fprintf(stderr, "# get: %s\n", aks_error_message(err));
			w->failures++;
		} else {
			int64_t n = json_object_get_int64(json_object_object_get(rec, "n"));
			if (n < last_seen + 1)
				w->failures++;
			last_seen = n;
		}
		json_object_put(rec);
		aks_error_free(err);
	}
	return NULL;
}

static int counter_child(int proc)
{
	aks_state_store *s = open_store();
	if (!s)
		return 1;
	pthread_t t[THREADS];
	counter_worker w[THREADS];
	for (int i = 0; i < THREADS; i++) {
		w[i] = (counter_worker){.s = s, .proc = proc, .thread = i};
		if (pthread_create(&t[i], NULL, counter_thread, &w[i]) != 0)
			return 1;
	}
	int failures = 0;
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		failures += w[i].failures;
	}
	aks__store_close(s);
	return failures ? 1 : 0;
}

static int count_record(void *ctx, const char *key, json_object *rec)
{
	(void)key;
	(void)rec;
	(*(int *)ctx)++;
	return AKS_OK;
}

static void test_processes_lose_no_update(void **state)
{
	(void)state;
	int procs = env_int("AKS_STORE_PROCS", 50);
	int gate[2];
	assert_int_equal(pipe(gate), 0);
	pid_t *pids = calloc((size_t)procs, sizeof(*pids));
	for (int p = 0; p < procs; p++) {
		pids[p] = fork();
		assert_true(pids[p] >= 0);
		if (pids[p] == 0) {
			close(gate[1]);
			barrier_wait(gate[0]);
			free(pids); /* the parent's; keeps a valgrind run of the child clean */
			_exit(counter_child(p));
		}
	}
	close(gate[0]);
	close(gate[1]); /* go */
	for (int p = 0; p < procs; p++) {
		int st = wait_child(pids[p]);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			fail_msg("child %d ended with status 0x%x", p, st);
	}
	free(pids);

	aks_state_store *s = open_store();
	assert_non_null(s);
	json_object *rec = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks__store_get(s, "shared", "counter", &rec, &err), AKS_OK);
	int total = procs * THREADS * PER_THREAD;
	assert_int_equal(json_object_get_int64(json_object_object_get(rec, "n")), total);
	json_object *list = json_object_object_get(rec, "list");
	assert_int_equal(json_object_array_length(list), total);
	char *seen = calloc((size_t)total, 1);
	for (size_t i = 0; i < json_object_array_length(list); i++) {
		int p = -1, t = -1, k = -1;
		assert_int_equal(sscanf(json_object_get_string(json_object_array_get_idx(list, i)),
		                        "p%d-t%d-%d", &p, &t, &k),
		                 3);
		assert_in_range(p, 0, procs - 1);
		assert_in_range(t, 0, THREADS - 1);
		assert_in_range(k, 0, PER_THREAD - 1);
		int idx = (p * THREADS + t) * PER_THREAD + k;
		if (seen[idx]++)
			fail_msg("entry p%d-t%d-%d appears twice", p, t, k);
	}
	/* Each thread's entries are in the order it made them. */
	int *next = calloc((size_t)(procs * THREADS), sizeof(int));
	for (size_t i = 0; i < json_object_array_length(list); i++) {
		int p, t, k;
		sscanf(json_object_get_string(json_object_array_get_idx(list, i)), "p%d-t%d-%d", &p,
		       &t, &k);
		assert_int_equal(k, next[p * THREADS + t]++);
	}
	free(next);
	free(seen);
	json_object_put(rec);
	/* Each process's own record: every one of its threads' increments. */
	for (int p = 0; p < procs; p++) {
		char own[32];
		snprintf(own, sizeof(own), "proc-%d", p);
		assert_int_equal(get_n(s, "shared", own), THREADS * PER_THREAD);
	}
	int records = 0;
	assert_int_equal(aks__store_scan(s, "shared", "", count_record, &records, &err), AKS_OK);
	assert_int_equal(records, procs + 1);
	aks__store_close(s);
	assert_clean(procs + 1);
	print_message("# %d processes x %d threads x %d updates: counter %d, every entry once; "
	              "%d records of their own exact\n",
	              procs, THREADS, PER_THREAD, total, procs);
}

/* ---- 2. no lost update while the record keeps being deleted (its directory with it) ---- */

#define CHURN_PROCS   16
#define CHURN_THREADS 2
#define CHURN_OPS     23

typedef struct drain_ctx {
	json_object *taken; /* an array, filled by the transaction */
} drain_ctx;

static int append_token(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)err;
	json_object *list = NULL;
	if (!json_object_object_get_ex(rec, "tokens", &list)) {
		list = json_object_new_array();
		json_object_object_add(rec, "tokens", list);
	}
	json_object_array_add(list, json_object_new_string(ctx));
	*changed = true;
	return AKS_OK;
}

/* Takes every token out and leaves the record empty: the store deletes it, and with it the
 * namespace's directory, which holds nothing else. */
static int drain(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)err;
	drain_ctx *d = ctx;
	json_object *list = NULL;
	if (json_object_object_get_ex(rec, "tokens", &list)) {
		for (size_t i = 0; i < json_object_array_length(list); i++)
			json_object_array_add(d->taken,
			                      json_object_get(json_object_array_get_idx(list, i)));
	}
	json_object_object_del(rec, "tokens");
	*changed = true;
	return AKS_OK;
}

typedef struct churn_worker {
	aks_state_store *s;
	int proc, thread, failures;
	json_object *drained;
} churn_worker;

static void *churn_thread(void *arg)
{
	churn_worker *w = arg;
	for (int i = 0; i < CHURN_OPS; i++) {
		aks_error *err = NULL;
		int rc;
		if (i % 4 == 3) {
			drain_ctx d = {json_object_new_array()};
			rc = aks__store_update(w->s, "churn", "tokens", drain, &d, &err);
			/* Only a committed drain took the tokens. */
			for (size_t k = 0; rc == AKS_OK && k < json_object_array_length(d.taken);
			     k++)
				json_object_array_add(
				    w->drained,
				    json_object_get(json_object_array_get_idx(d.taken, k)));
			json_object_put(d.taken);
		} else {
			char tag[48];
			snprintf(tag, sizeof(tag), "c%d-t%d-%d", w->proc, w->thread, i);
			rc = aks__store_update(w->s, "churn", "tokens", append_token, tag, &err);
		}
		if (rc != AKS_OK) {
			fprintf(stderr, "# churn: %s\n", aks_error_message(err));
			w->failures++;
		}
		aks_error_free(err);
	}
	return NULL;
}

static int churn_child(int proc)
{
	aks_state_store *s = open_store();
	if (!s)
		return 1;
	pthread_t t[CHURN_THREADS];
	churn_worker w[CHURN_THREADS];
	json_object *drained = json_object_new_array();
	for (int i = 0; i < CHURN_THREADS; i++) {
		w[i] = (churn_worker){
		    .s = s, .proc = proc, .thread = i, .drained = json_object_new_array()};
		if (pthread_create(&t[i], NULL, churn_thread, &w[i]) != 0)
			return 1;
	}
	int failures = 0;
	for (int i = 0; i < CHURN_THREADS; i++) {
		pthread_join(t[i], NULL);
		failures += w[i].failures;
		for (size_t k = 0; k < json_object_array_length(w[i].drained); k++)
			json_object_array_add(
			    drained, json_object_get(json_object_array_get_idx(w[i].drained, k)));
		json_object_put(w[i].drained);
	}
	aks__store_close(s);
	/* What this process took out, for the parent to account for. */
	char path[600];
	snprintf(path, sizeof(path), "%s/drained-%d.json", base, proc);
	if (json_object_to_file(path, drained) < 0)
		failures++;
	json_object_put(drained);
	return failures ? 1 : 0;
}

static void test_deleted_record_loses_nothing(void **state)
{
	(void)state;
	int gate[2];
	assert_int_equal(pipe(gate), 0);
	pid_t pids[CHURN_PROCS];
	for (int p = 0; p < CHURN_PROCS; p++) {
		pids[p] = fork();
		assert_true(pids[p] >= 0);
		if (pids[p] == 0) {
			close(gate[1]);
			barrier_wait(gate[0]);
			_exit(churn_child(p));
		}
	}
	close(gate[0]);
	close(gate[1]);
	for (int p = 0; p < CHURN_PROCS; p++) {
		int st = wait_child(pids[p]);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			fail_msg("child %d ended with status 0x%x", p, st);
	}
	/* Every token is either still in the record or was drained by exactly one process. */
	int per_thread = CHURN_OPS - CHURN_OPS / 4;
	int total = CHURN_PROCS * CHURN_THREADS * per_thread;
	char *seen = calloc((size_t)total, 1);
	int count = 0, drained_total = 0;
	json_object *lists[CHURN_PROCS + 1];
	for (int p = 0; p < CHURN_PROCS; p++) {
		char path[600];
		snprintf(path, sizeof(path), "%s/drained-%d.json", base, p);
		lists[p] = json_object_from_file(path);
		assert_non_null(lists[p]);
		drained_total += (int)json_object_array_length(lists[p]);
	}
	aks_state_store *s = open_store();
	json_object *rec = NULL;
	aks_error *err = NULL;
	int rc = aks__store_get(s, "churn", "tokens", &rec, &err);
	assert_true(rc == AKS_OK || rc == AKS_ENOTFOUND);
	lists[CHURN_PROCS] = rec ? json_object_object_get(rec, "tokens") : NULL;
	for (int p = 0; p <= CHURN_PROCS; p++) {
		for (size_t i = 0; lists[p] && i < json_object_array_length(lists[p]); i++) {
			int c, t, k;
			assert_int_equal(
			    sscanf(json_object_get_string(json_object_array_get_idx(lists[p], i)),
			           "c%d-t%d-%d", &c, &t, &k),
			    3);
			int idx = (c * CHURN_THREADS + t) * per_thread + (k - k / 4);
			assert_in_range(idx, 0, total - 1);
			if (seen[idx]++)
				fail_msg("token c%d-t%d-%d counted twice", c, t, k);
			count++;
		}
		if (p < CHURN_PROCS)
			json_object_put(lists[p]);
	}
	assert_int_equal(count, total);
	assert_true(drained_total > 0);
	json_object_put(rec);
	aks__store_close(s);
	free(seen);
	/* No lock file or temporary left, and the directory only if the record is there. */
	assert_clean(rc == AKS_OK ? 1 : 0);
	print_message("# %d tokens: %d drained by deleting the record, the rest in place\n", total,
	              drained_total);
}

/* ---- 3. crash safety: SIGKILL at random moments during a stream of large updates ---- */

/* Step k of the stream writes record R(k) = "r<k % RECORDS>". Every fourth step deletes its
 * record (the removal path); the others write a record whose size and content are functions
 * of k. */
#define RECORDS 3

static bool step_deletes(int64_t k)
{
	return k % 4 == 3;
}

static size_t blob_len(int64_t k)
{
	return (size_t)(256 * 1024 + (k % 5) * 192 * 1024);
}

static char blob_char(int64_t k)
{
	return (char)('a' + k % 26);
}

static void record_key(int64_t k, char key[8])
{
	snprintf(key, 8, "r%d", (int)(k % RECORDS));
}

static int write_step(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)err;
	int64_t k = *(int64_t *)ctx;
	aks__store_clear_record(rec);
	if (!step_deletes(k)) {
		size_t n = blob_len(k);
		char *b = malloc(n);
		memset(b, blob_char(k), n);
		json_object_object_add(rec, "step", json_object_new_int64(k));
		json_object_object_add(rec, "blob", json_object_new_string_len(b, (int)n));
		free(b);
	}
	*changed = true;
	return AKS_OK;
}

/* Runs steps from+1, from+2, ... forever, reporting each one once it is committed. */
static void crash_writer(int64_t from, int report_fd)
{
	aks_state_store *s = open_store();
	if (!s)
		_exit(2);
	for (int64_t k = from + 1;; k++) {
		aks_error *err = NULL;
		char key[8];
		record_key(k, key);
		if (aks__store_update(s, "big", key, write_step, &k, &err) != AKS_OK) {
			fprintf(stderr, "# writer: %s\n", aks_error_message(err));
			_exit(3);
		}
		if (write(report_fd, &k, sizeof(k)) != sizeof(k))
			_exit(4);
	}
}

/* The step whose value a record holds, given that it must be `old` or (when >= 0) `next`;
 * checked byte for byte. */
static int64_t check_record(aks_state_store *s, int64_t old, int64_t next)
{
	char key[8];
	record_key(old, key);
	json_object *rec = NULL;
	aks_error *err = NULL;
	int rc = aks__store_get(s, "big", key, &rec, &err);
	if (rc != AKS_OK && rc != AKS_ENOTFOUND)
		fail_msg("after a kill, record %s does not read: %s", key, aks_error_message(err));
	int64_t k = -1;
	if (rc == AKS_ENOTFOUND) {
		if (step_deletes(old))
			k = old;
		else if (next >= 0 && step_deletes(next))
			k = next;
		else
			fail_msg("record %s is absent after step %lld", key, (long long)old);
	} else {
		json_object *kj = NULL, *bj = NULL;
		assert_true(json_object_object_get_ex(rec, "step", &kj));
		assert_true(json_object_object_get_ex(rec, "blob", &bj));
		assert_int_equal(json_object_object_length(rec), 2);
		k = json_object_get_int64(kj);
		if (k != old && k != next)
			fail_msg("record %s holds step %lld, expected %lld or %lld", key,
			         (long long)k, (long long)old, (long long)next);
		assert_false(step_deletes(k));
		size_t n = (size_t)json_object_get_string_len(bj);
		const char *b = json_object_get_string(bj);
		assert_int_equal(n, blob_len(k));
		for (size_t i = 0; i < n; i++) {
			if (b[i] != blob_char(k))
				fail_msg("step %lld: byte %zu is wrong", (long long)k, i);
		}
	}
	json_object_put(rec);
	return k;
}

/* A scan delivers whole records only: each one's blob is its step's, byte for byte. */
typedef struct scan_check {
	int64_t steps[RECORDS];
	int count;
} scan_check;

static int check_scanned(void *ctx, const char *key, json_object *rec)
{
	scan_check *c = ctx;
	int64_t k = json_object_get_int64(json_object_object_get(rec, "step"));
	json_object *bj = json_object_object_get(rec, "blob");
	const char *b = json_object_get_string(bj);
	size_t n = (size_t)json_object_get_string_len(bj);
	char want[8];
	record_key(k, want);
	if (strcmp(key, want) != 0 || n != blob_len(k) || b[0] != blob_char(k) ||
	    b[n - 1] != blob_char(k) || memchr(b, blob_char(k) == 'a' ? 'b' : 'a', n))
		fail_msg("scan: record %s is torn or misplaced (step %lld)", key, (long long)k);
	c->steps[k % RECORDS] = k;
	c->count++;
	return AKS_OK;
}

/* Checks every record after the writer reported step c as its last; returns the last step
 * actually committed (c, or c + 1 when the kill came between commit and report). */
static int64_t check_state(aks_state_store *s, int64_t c)
{
	int64_t done = c, got[RECORDS];
	int present = 0;
	for (int64_t k = c - RECORDS + 1; k <= c; k++) {
		/* Record R(k) last got step k, unless step c + 1 (same record) may have landed. */
		bool next_is_same = (c + 1) % RECORDS == k % RECORDS;
		int64_t g = check_record(s, k, next_is_same ? c + 1 : -1);
		if (g == c + 1)
			done = c + 1;
		got[k % RECORDS] = g;
		present += !step_deletes(g);
	}
	/* A scan sees the same records, whole. */
	scan_check sc = {.count = 0};
	aks_error *err = NULL;
	if (aks__store_scan(s, "big", "", check_scanned, &sc, &err) != AKS_OK)
		fail_msg("scan after a kill: %s", aks_error_message(err));
	assert_int_equal(sc.count, present);
	for (int i = 0; i < RECORDS; i++) {
		if (!step_deletes(got[i]))
			assert_int_equal(sc.steps[i], got[i]);
	}
	return done;
}

static void test_sigkill_mid_write(void **state)
{
	(void)state;
	int rounds = env_int("AKS_STORE_CRASH_ROUNDS", 80);
	unsigned seed = (unsigned)env_int("AKS_STORE_SEED", (int)(time(NULL) ^ getpid()));
	print_message("# seed %u (AKS_STORE_SEED)\n", seed);
	srand(seed);
	aks_state_store *s = open_store();
	assert_non_null(s);
	aks_error *err = NULL;
	/* Steps 0 .. RECORDS-1 here, so that every record has a defined value. */
	int64_t g;
	for (g = 0; g < RECORDS; g++) {
		char key[8];
		record_key(g, key);
		assert_int_equal(aks__store_update(s, "big", key, write_step, &g, &err), AKS_OK);
	}
	g = RECORDS - 1;
	assert_int_equal(check_state(s, g), g);
	char dir[700];
	snprintf(dir, sizeof(dir), "%s/ns/big.d", store_dir);
	int left_tmp = 0, left_lock = 0, at_next = 0, progressed = 0, deleted = 0;
	/* Kills come within max_delay_us of the start; it grows while writers make no progress
	 * (a slow or loaded machine, valgrind), so that kills keep landing mid-write. */
	int max_delay_us = 40000;
	/* Past `rounds`, go on (up to five times as many) until kills have been seen to land
	 * mid-write and writers have made progress, so that the test cannot pass vacuously on a
	 * machine where the timing happens to be off. */
	int r;
	for (r = 0; r < rounds || ((left_tmp == 0 || progressed < 10) && r < 5 * rounds); r++) {
		int fds[2];
		assert_int_equal(pipe(fds), 0);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			close(fds[0]);
			crash_writer(g, fds[1]);
		}
		close(fds[1]);
		usleep((useconds_t)(rand() % max_delay_us));
		kill(pid, SIGKILL);
		int st = wait_child(pid);
		if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
			fail_msg("round %d: the writer ended by itself (status 0x%x)", r, st);
		int64_t c = g, v;
		while (read(fds[0], &v, sizeof(v)) == sizeof(v))
			c = v;
		close(fds[0]);
		/* What the kills left beside the records: lock files and temporaries (the one of
		 * the step in progress, and older ones of records not updated since), at most one
		 * of each per record, and nothing else. */
		DIR *d = opendir(dir);
		assert_non_null(d);
		struct dirent *de;
		int tmps = 0, locks = 0;
		while ((de = readdir(d))) {
			const char *n = de->d_name;
			if (n[0] == '.')
				continue;
			if (n[0] != 'r' || n[1] < '0' || n[1] >= '0' + RECORDS ||
			    (strcmp(n + 2, ".json") && strcmp(n + 2, ".lock") &&
			     strcmp(n + 2, ".tmp")))
				fail_msg("unexpected file %s", n);
			tmps += !strcmp(n + 2, ".tmp");
			locks += !strcmp(n + 2, ".lock");
		}
		closedir(d);
		assert_in_range(tmps, 0, RECORDS);
		assert_in_range(locks, 0, RECORDS);
		left_tmp += tmps > 0;
		left_lock += locks > 0;
		int64_t now = check_state(s, c);
		at_next += now == c + 1;
		progressed += now > g;
		if (now == g && max_delay_us < 4000000)
			max_delay_us += max_delay_us / 2;
		else if (now > g + 2 && max_delay_us > 40000)
			max_delay_us -= max_delay_us / 4;
		deleted += step_deletes(now);
		g = now;
	}
	/* The kills did land mid-write, and the writers did get work done. */
	print_message(
	    "# %d kills: after %d a temporary was left, after %d a lock file; %d landed after "
	    "the rename but before the report, %d right after a deletion; step %lld\n",
	    r, left_tmp, left_lock, at_next, deleted, (long long)g);
	assert_true(left_tmp > 0);
	assert_true(progressed >= 10);
	/* And the store carries on: the next update of each record cleans up and commits. */
	for (int i = 0; i < RECORDS; i++) {
		int64_t next = g + 1;
		char key[8];
		record_key(next, key);
		assert_int_equal(aks__store_update(s, "big", key, write_step, &next, &err), AKS_OK);
		g = next;
	}
	assert_int_equal(check_state(s, g), g);
	aks__store_close(s);
	census cs = take_census();
	assert_int_equal(cs.tmp, 0);
	assert_int_equal(cs.lock, 0);
	assert_int_equal(cs.other, 0);
	assert_int_equal(cs.empty_dirs, 0);
}

/* ---- 4. the update lock dies with the process holding it ---- */

static int hold_forever(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)err;
	json_object_object_add(rec, "uncommitted", json_object_new_boolean(1));
	*changed = true;
	int fd = *(int *)ctx;
	if (write(fd, "L", 1) != 1)
		_exit(5);
	for (;;)
		pause();
	return AKS_OK;
}

static int mark(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)ctx;
	(void)err;
	json_object_object_add(rec, "after", json_object_new_boolean(1));
	*changed = true;
	return AKS_OK;
}

typedef struct waiter {
	aks_state_store *s;
	int done_fd; /* written when the call returns */
	int rc;
	bool named;         /* wait for the named lock rather than update the record */
	aks_store_lock *lk; /* the named lock, once taken */
} waiter;

static void *waiter_thread(void *arg)
{
	waiter *w = arg;
	if (w->named)
		w->rc = aks__store_lock(w->s, "held", "session:x", NULL, &w->lk, NULL);
	else
		w->rc = aks__store_update(w->s, "held", "session:x", mark, NULL, NULL);
	if (write(w->done_fd, "D", 1) != 1)
		w->rc = -100;
	return NULL;
}

static bool readable_within(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	return poll(&p, 1, ms) == 1;
}

static void test_update_lock_dies_with_holder(void **state)
{
	(void)state;
	aks_state_store *s = open_store();
	assert_non_null(s);
	aks_error *err = NULL;
	assert_int_equal(aks__store_update(s, "held", "session:x", incr_append, "before", &err),
	                 AKS_OK);
	int held[2], done[2];
	assert_int_equal(pipe(held), 0);
	assert_int_equal(pipe(done), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(held[0]);
		aks_state_store *cs = open_store();
		if (!cs)
			_exit(2);
		aks__store_update(cs, "held", "session:x", hold_forever, &held[1], NULL);
		_exit(6);
	}
	close(held[1]);
	assert_true(readable_within(held[0], 10000)); /* the child holds the lock */
	pthread_t t;
	waiter w = {.s = s, .done_fd = done[1]};
	assert_int_equal(pthread_create(&t, NULL, waiter_thread, &w), 0);
	/* Blocked while the holder lives... */
	assert_false(readable_within(done[0], 500));
	/* ...but reads take no lock: they see the last committed value at once, and so do
	 * updates of the namespace's other records. */
	json_object *rec = NULL;
	assert_int_equal(aks__store_get(s, "held", "session:x", &rec, &err), AKS_OK);
	assert_string_equal(json_object_to_json_string_ext(rec, JSON_C_TO_STRING_PLAIN),
	                    "{\"n\":1,\"list\":[\"before\"]}");
	json_object_put(rec);
	assert_int_equal(aks__store_update(s, "held", "session:y", incr, NULL, &err), AKS_OK);
	kill(pid, SIGKILL);
	int st = wait_child(pid);
	assert_true(WIFSIGNALED(st));
	assert_true(readable_within(done[0], 10000));
	pthread_join(t, NULL);
	assert_int_equal(w.rc, AKS_OK);
	/* The holder's change died with it; the waiter's landed on the old record. */
	assert_int_equal(aks__store_get(s, "held", "session:x", &rec, &err), AKS_OK);
	assert_string_equal(json_object_to_json_string_ext(rec, JSON_C_TO_STRING_PLAIN),
	                    "{\"n\":1,\"list\":[\"before\"],\"after\":true}");
	json_object_put(rec);
	close(held[0]);
	close(done[0]);
	close(done[1]);
	aks__store_close(s);
	/* The waiter took over the dead holder's lock file, and removed it on release. */
	assert_clean(2);
}

/* ---- 5. the named lock across processes ---- */

#define LOCK_PROCS 6
#define LOCK_ITERS 10

/* Under the named lock, a read and a write in two separate transactions: safe only if the
 * lock excludes every other process doing the same. */
static int set_n(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)err;
	json_object_object_add(rec, "n", json_object_new_int64(*(int64_t *)ctx));
	*changed = true;
	return AKS_OK;
}

static int lock_child(int proc)
{
	aks_state_store *s = open_store();
	if (!s)
		return 1;
	int failures = 0;
	for (int i = 0; i < LOCK_ITERS; i++) {
		aks_store_lock *lk = NULL;
		aks_error *err = NULL;
		aks_call call;
		aks_call_init(&call, 60.0, NULL, NULL, NULL);
		/* Half the waits with a deadline (polling), half without (blocking). */
		if (aks__store_lock(s, "conv", "session:a", (i + proc) % 2 ? &call : NULL, &lk,
		                    &err) != AKS_OK) {
			fprintf(stderr, "# lock: %s\n", aks_error_message(err));
			aks_error_free(err);
			failures++;
			continue;
		}
		json_object *rec = NULL;
		int64_t n = 0;
		int rc = aks__store_get(s, "conv", "session:a", &rec, &err);
		if (rc == AKS_OK)
			n = json_object_get_int64(json_object_object_get(rec, "n"));
		else if (rc != AKS_ENOTFOUND)
			failures++;
		json_object_put(rec);
		usleep(2000);
		n++;
		if (aks__store_update(s, "conv", "session:a", set_n, &n, &err) != AKS_OK)
			failures++;
		aks__store_unlock(s, lk);
		aks_error_free(err);
	}
	aks__store_close(s);
	return failures ? 1 : 0;
}

static void test_named_lock_across_processes(void **state)
{
	(void)state;
	int gate[2];
	assert_int_equal(pipe(gate), 0);
	pid_t pids[LOCK_PROCS];
	for (int p = 0; p < LOCK_PROCS; p++) {
		pids[p] = fork();
		assert_true(pids[p] >= 0);
		if (pids[p] == 0) {
			close(gate[1]);
			barrier_wait(gate[0]);
			_exit(lock_child(p));
		}
	}
	close(gate[0]);
	close(gate[1]);
	for (int p = 0; p < LOCK_PROCS; p++) {
		int st = wait_child(pids[p]);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			fail_msg("child %d ended with status 0x%x", p, st);
	}
	aks_state_store *s = open_store();
	assert_non_null(s);
	assert_int_equal(get_n(s, "conv", "session:a"), LOCK_PROCS * LOCK_ITERS);
	aks__store_close(s);
	assert_clean(1);
	print_message("# %d processes x %d read-then-write under the named lock: none lost\n",
	              LOCK_PROCS, LOCK_ITERS);
}

static void test_named_lock_dies_with_holder(void **state)
{
	(void)state;
	aks_state_store *s = open_store();
	assert_non_null(s);
	int held[2], done[2];
	assert_int_equal(pipe(held), 0);
	assert_int_equal(pipe(done), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(held[0]);
		aks_state_store *cs = open_store();
		aks_store_lock *lk = NULL;
		if (!cs || aks__store_lock(cs, "held", "session:x", NULL, &lk, NULL) != AKS_OK)
			_exit(2);
		if (write(held[1], "L", 1) != 1)
			_exit(5);
		for (;;)
			pause();
	}
	close(held[1]);
	assert_true(readable_within(held[0], 10000)); /* the child holds the lock */
	/* Another process's wait with a deadline ends with AKS_ETIMEOUT. */
	aks_call call;
	aks_call_init(&call, 0.3, NULL, NULL, NULL);
	aks_store_lock *lk = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks__store_lock(s, "held", "session:x", &call, &lk, &err), AKS_ETIMEOUT);
	assert_null(lk);
	aks_error_free(err);
	err = NULL;
	/* A wait without one blocks while the holder lives and ends when it is killed. */
	pthread_t t;
	waiter w = {.s = s, .done_fd = done[1], .named = true};
	assert_int_equal(pthread_create(&t, NULL, waiter_thread, &w), 0);
	assert_false(readable_within(done[0], 500));
	/* The lock is not the record: updates of the same name go on meanwhile. */
	assert_int_equal(aks__store_update(s, "held", "session:x", incr, NULL, &err), AKS_OK);
	kill(pid, SIGKILL);
	int st = wait_child(pid);
	assert_true(WIFSIGNALED(st));
	assert_true(readable_within(done[0], 10000));
	pthread_join(t, NULL);
	assert_int_equal(w.rc, AKS_OK);
	assert_non_null(w.lk);
	aks__store_unlock(s, w.lk);
	close(held[0]);
	close(done[0]);
	close(done[1]);
	aks__store_close(s);
	assert_clean(1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_processes_lose_no_update, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_deleted_record_loses_nothing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sigkill_mid_write, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_update_lock_dies_with_holder, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_named_lock_across_processes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_named_lock_dies_with_holder, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
