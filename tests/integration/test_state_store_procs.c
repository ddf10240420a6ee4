/* Integration tests: the state store across real processes (fork, no exec): many processes
 * with threads updating one namespace lose nothing; a writer SIGKILLed at random moments
 * leaves the old or the new document, never a torn one; a lock dies with its holder.
 *
 * Knobs (environment): AKS_STORE_PROCS (default 50), AKS_STORE_CRASH_ROUNDS (default 80),
 * AKS_STORE_SEED (random seed; printed either way). */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
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

#include "core/state_store.h"

static char base[512];
static char store_dir[600];

static int env_int(const char *name, int def)
{
	const char *v = getenv(name);
	return v && *v ? atoi(v) : def;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
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
	nftw(base, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
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

/* ---- 1. no lost update: many processes, threads in each ---- */

#define THREADS    3
#define PER_THREAD 8

static int incr_append(json_object *doc, bool *changed, void *ctx, aks_error **err)
{
	(void)err;
	json_object *n = NULL, *list = NULL;
	int64_t v = json_object_object_get_ex(doc, "n", &n) ? json_object_get_int64(n) : 0;
	json_object_object_add(doc, "n", json_object_new_int64(v + 1));
	if (!json_object_object_get_ex(doc, "list", &list)) {
		list = json_object_new_array();
		json_object_object_add(doc, "list", list);
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
	for (int i = 0; i < PER_THREAD; i++) {
		char tag[48];
		snprintf(tag, sizeof(tag), "p%d-t%d-%d", w->proc, w->thread, i);
		aks_error *err = NULL;
		if (aks__store_update(w->s, "counter", incr_append, tag, &err) != AKS_OK) {
			fprintf(stderr, "# update: %s\n", aks_error_message(err));
			w->failures++;
		}
		aks_error_free(err);
		err = NULL;
		/* Snapshots never go backwards. */
		json_object *doc = NULL;
		if (aks__store_read(w->s, "counter", &doc, &err) != AKS_OK) {
			fprintf(stderr, "# read: %s\n", aks_error_message(err));
			w->failures++;
		} else {
			int64_t n = json_object_get_int64(json_object_object_get(doc, "n"));
			if (n < last_seen + 1)
				w->failures++;
			last_seen = n;
		}
		json_object_put(doc);
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
	json_object *doc = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks__store_read(s, "counter", &doc, &err), AKS_OK);
	int total = procs * THREADS * PER_THREAD;
	assert_int_equal(json_object_get_int64(json_object_object_get(doc, "n")), total);
	json_object *list = json_object_object_get(doc, "list");
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
	json_object_put(doc);
	aks__store_close(s);
	print_message("# %d processes x %d threads x %d updates: counter %d, every entry once\n",
	              procs, THREADS, PER_THREAD, total);
}

/* ---- 2. no lost update while the namespace keeps emptying (lock files removed) ---- */

#define CHURN_PROCS   16
#define CHURN_THREADS 2
#define CHURN_OPS     23

typedef struct drain_ctx {
	json_object *taken; /* an array, filled by the transaction */
} drain_ctx;

static int append_token(json_object *doc, bool *changed, void *ctx, aks_error **err)
{
	(void)err;
	json_object *list = NULL;
	if (!json_object_object_get_ex(doc, "tokens", &list)) {
		list = json_object_new_array();
		json_object_object_add(doc, "tokens", list);
	}
	json_object_array_add(list, json_object_new_string(ctx));
	*changed = true;
	return AKS_OK;
}

/* Takes every token out and leaves the document empty: the store removes its files. */
static int drain(json_object *doc, bool *changed, void *ctx, aks_error **err)
{
	(void)err;
	drain_ctx *d = ctx;
	json_object *list = NULL;
	if (json_object_object_get_ex(doc, "tokens", &list)) {
		for (size_t i = 0; i < json_object_array_length(list); i++)
			json_object_array_add(d->taken,
			                      json_object_get(json_object_array_get_idx(list, i)));
	}
	json_object_object_del(doc, "tokens");
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
			rc = aks__store_update(w->s, "churn", drain, &d, &err);
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
			rc = aks__store_update(w->s, "churn", append_token, tag, &err);
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

static void test_emptying_namespace_loses_nothing(void **state)
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
	/* Every token is either still in the document or was drained by exactly one process. */
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
	json_object *doc = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks__store_read(s, "churn", &doc, &err), AKS_OK);
	lists[CHURN_PROCS] = json_object_object_get(doc, "tokens");
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
	json_object_put(doc);
	aks__store_close(s);
	free(seen);
	print_message("# %d tokens: %d drained by the namespace's emptying, the rest in place\n",
	              total, drained_total);
}

/* ---- 3. crash safety: SIGKILL at random moments while writing large documents ---- */

/* The state after generation g: every fourth one is the emptied namespace (removal path),
 * the others a document whose size and content are functions of g. */
static bool gen_empty(int64_t g)
{
	return g % 4 == 3;
}

static size_t blob_len(int64_t g)
{
	return (size_t)(256 * 1024 + (g % 5) * 192 * 1024);
}

static char blob_char(int64_t g)
{
	return (char)('a' + g % 26);
}

static int write_gen(json_object *doc, bool *changed, void *ctx, aks_error **err)
{
	(void)err;
	int64_t g = *(int64_t *)ctx;
	json_object_object_del(doc, "gen");
	json_object_object_del(doc, "blob");
	if (!gen_empty(g)) {
		size_t n = blob_len(g);
		char *b = malloc(n);
		memset(b, blob_char(g), n);
		json_object_object_add(doc, "gen", json_object_new_int64(g));
		json_object_object_add(doc, "blob", json_object_new_string_len(b, (int)n));
		free(b);
	}
	*changed = true;
	return AKS_OK;
}

/* Writes generation base+1, base+2, ... forever, reporting each one once it is committed. */
static void crash_writer(int64_t base_gen, int report_fd)
{
	aks_state_store *s = open_store();
	if (!s)
		_exit(2);
	for (int64_t g = base_gen + 1;; g++) {
		aks_error *err = NULL;
		if (aks__store_update(s, "big", write_gen, &g, &err) != AKS_OK) {
			fprintf(stderr, "# writer: %s\n", aks_error_message(err));
			_exit(3);
		}
		if (write(report_fd, &g, sizeof(g)) != sizeof(g))
			_exit(4);
	}
}

/* Which generation the stored state is, given that it must be c or c + 1. */
static int64_t check_state(aks_state_store *s, int64_t c)
{
	json_object *doc = NULL;
	aks_error *err = NULL;
	int rc = aks__store_read(s, "big", &doc, &err);
	if (rc != AKS_OK)
		fail_msg("after a kill the store does not read: %s", aks_error_message(err));
	int64_t g = -1;
	if (json_object_object_length(doc) == 0) {
		if (gen_empty(c))
			g = c;
		else if (gen_empty(c + 1))
			g = c + 1;
		else
			fail_msg("empty document after generation %lld", (long long)c);
	} else {
		json_object *gj = NULL, *bj = NULL;
		assert_true(json_object_object_get_ex(doc, "gen", &gj));
		assert_true(json_object_object_get_ex(doc, "blob", &bj));
		g = json_object_get_int64(gj);
		if (g != c && g != c + 1)
			fail_msg("generation %lld stored, expected %lld or %lld", (long long)g,
			         (long long)c, (long long)c + 1);
		assert_false(gen_empty(g));
		size_t n = (size_t)json_object_get_string_len(bj);
		const char *b = json_object_get_string(bj);
		assert_int_equal(n, blob_len(g));
		for (size_t i = 0; i < n; i++) {
			if (b[i] != blob_char(g))
				fail_msg("generation %lld: byte %zu is wrong", (long long)g, i);
		}
	}
	json_object_put(doc);
	return g;
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
	int64_t g = 0;
	assert_int_equal(aks__store_update(s, "big", write_gen, &g, &err), AKS_OK);
	assert_int_equal(check_state(s, 0), 0);
	char tmp[700];
	snprintf(tmp, sizeof(tmp), "%s/ns/big.tmp", store_dir);
	int left_tmp = 0, at_next = 0, progressed = 0, empties = 0;
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
		ssize_t n;
		while ((n = read(fds[0], &v, sizeof(v))) == sizeof(v))
			c = v;
		close(fds[0]);
		if (access(tmp, F_OK) == 0)
			left_tmp++;
		int64_t now = check_state(s, c);
		at_next += now == c + 1;
		progressed += now > g;
		if (now == g && max_delay_us < 4000000)
			max_delay_us += max_delay_us / 2;
		else if (now > g + 2 && max_delay_us > 40000)
			max_delay_us -= max_delay_us / 4;
		empties += gen_empty(now);
		g = now;
		/* The namespace's files are the document, its lock and perhaps a dead temporary. */
		char dir[700];
		snprintf(dir, sizeof(dir), "%s/ns", store_dir);
		DIR *d = opendir(dir);
		struct dirent *de;
		while ((de = readdir(d))) {
			if (de->d_name[0] != '.' && strcmp(de->d_name, "big.json") &&
			    strcmp(de->d_name, "big.lock") && strcmp(de->d_name, "big.tmp"))
				fail_msg("unexpected file %s", de->d_name);
		}
		closedir(d);
	}
	/* The kills did land mid-write, and the writers did get work done. */
	print_message("# %d kills: %d left a temporary behind, %d landed after the rename "
	              "but before the report, %d left the namespace empty; generation %lld\n",
	              r, left_tmp, at_next, empties, (long long)g);
	assert_true(left_tmp > 0);
	assert_true(progressed >= 10);
	/* And the store carries on: the next transaction cleans up and commits. */
	int64_t next = g + 1;
	assert_int_equal(aks__store_update(s, "big", write_gen, &next, &err), AKS_OK);
	assert_int_equal(check_state(s, next), next);
	assert_int_equal(access(tmp, F_OK), -1);
	aks__store_close(s);
}

/* ---- 4. a lock dies with the process holding it ---- */

static int hold_forever(json_object *doc, bool *changed, void *ctx, aks_error **err)
{
	(void)err;
	json_object_object_add(doc, "uncommitted", json_object_new_boolean(1));
	*changed = true;
	int fd = *(int *)ctx;
	if (write(fd, "L", 1) != 1)
		_exit(5);
	for (;;)
		pause();
	return AKS_OK;
}

static int mark(json_object *doc, bool *changed, void *ctx, aks_error **err)
{
	(void)ctx;
	(void)err;
	json_object_object_add(doc, "after", json_object_new_boolean(1));
	*changed = true;
	return AKS_OK;
}

typedef struct waiter {
	aks_state_store *s;
	int done_fd; /* written when the transaction returns */
	int rc;
} waiter;

static void *waiter_thread(void *arg)
{
	waiter *w = arg;
	w->rc = aks__store_update(w->s, "held", mark, NULL, NULL);
	if (write(w->done_fd, "D", 1) != 1)
		w->rc = -100;
	return NULL;
}

static bool readable_within(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	return poll(&p, 1, ms) == 1;
}

static void test_lock_dies_with_holder(void **state)
{
	(void)state;
	aks_state_store *s = open_store();
	assert_non_null(s);
	aks_error *err = NULL;
	assert_int_equal(aks__store_update(s, "held", incr_append, "before", &err), AKS_OK);
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
		aks__store_update(cs, "held", hold_forever, &held[1], NULL);
		_exit(6);
	}
	close(held[1]);
	assert_true(readable_within(held[0], 10000)); /* the child holds the lock */
	pthread_t t;
	waiter w = {.s = s, .done_fd = done[1]};
	assert_int_equal(pthread_create(&t, NULL, waiter_thread, &w), 0);
	/* Blocked while the holder lives (reads too would be: they take a shared lock). */
	assert_false(readable_within(done[0], 500));
	kill(pid, SIGKILL);
	int st = wait_child(pid);
	assert_true(WIFSIGNALED(st));
	assert_true(readable_within(done[0], 10000));
	pthread_join(t, NULL);
	assert_int_equal(w.rc, AKS_OK);
	/* The holder's change died with it; the waiter's landed on the old document. */
	json_object *doc = NULL;
	assert_int_equal(aks__store_read(s, "held", &doc, &err), AKS_OK);
	assert_string_equal(json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN),
	                    "{\"n\":1,\"list\":[\"before\"],\"after\":true}");
	json_object_put(doc);
	close(held[0]);
	close(done[0]);
	close(done[1]);
	aks__store_close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_processes_lose_no_update, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_emptying_namespace_loses_nothing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sigkill_mid_write, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lock_dies_with_holder, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
