/*
 * tests/unit/test_lease.c - the lease keeper (plugins/common/aks_lease.h): tracked locks
 * renewed periodically through copies, untrack, a lock freed during a renewal pass, stop
 * joining the thread with no renewal after, and the out-of-memory cases renew() is told of.
 *
 * A 30 ms lease (a pass every 10 ms) keeps the cases short; each waits for what it needs
 * with a generous bound rather than sleeping a fixed time, so a loaded machine slows it
 * without failing it. Linked with -Wl,--wrap=calloc so the snapshot's array can fail.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "aks_lease.h"

#define LEASE_MS 30
#define WAIT_MS  5000 /* the bound of every wait: far above the 10 ms a pass takes */
#define MAX_ID   8

void *__real_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size);

static atomic_int fail_callocs; /* how many of the next calloc calls fail */

void *__wrap_calloc(size_t n, size_t size)
{
	if (atomic_load(&fail_callocs) > 0) {
		atomic_fetch_sub(&fail_callocs, 1);
		return NULL;
	}
	return __real_calloc(n, size);
}

/* A store's lock, and its copy (a distinct type, so a copy passed as the original shows). */
typedef struct fake_lock {
	aks_lease_entry lease;
	int id;
} fake_lock;

typedef struct fake_copy {
	int id;
	const fake_lock *from;
} fake_copy;

/* What the keeper's thread did, read by the test under mu. Assertions cannot run on that
 * thread (cmocka's longjmp), so it counts what is wrong instead. */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int passes;
	int seen[MAX_ID];      /* renewals per lock id */
	int last_pass[MAX_ID]; /* the pass that last renewed it */
	int first_id;          /* the first copy of the last pass */
	int made, freed;
	int null_arrays, null_entries;
	size_t null_array_n;
	int fail_copy_id; /* copy() of this id runs out of memory */
	int bad;          /* a copy that was the original, or whose content changed */
	bool hold;        /* renew() waits while set */
	int in_renew, renew_done;
	int delay_ms; /* how long renew() takes */
} rec;

static void *copy_lock(const void *lock)
{
	const fake_lock *lk = lock;
	if (lk->id == rec.fail_copy_id)
		return NULL;
	fake_copy *c = malloc(sizeof(*c));
	if (c) {
		c->id = lk->id;
		c->from = lk;
		rec.made++; /* under the keeper's mutex: no other copy() runs */
	}
	return c;
}

static void free_copy(void *copy)
{
	pthread_mutex_lock(&rec.mu);
	rec.freed++;
	pthread_mutex_unlock(&rec.mu);
	free(copy);
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static void renew(void *ctx, void *const *copies, size_t n)
{
	pthread_mutex_lock(&rec.mu);
	if (ctx != &rec)
		rec.bad++;
	rec.in_renew++;
	pthread_cond_broadcast(&rec.cv);
	while (rec.hold)
		pthread_cond_wait(&rec.cv, &rec.mu);
	int delay = rec.delay_ms;
	pthread_mutex_unlock(&rec.mu);
	if (delay)
		sleep_ms(delay);
	pthread_mutex_lock(&rec.mu);
	rec.passes++;
	if (!copies) {
		rec.null_arrays++;
		rec.null_array_n = n;
	}
	for (size_t i = 0; copies && i < n; i++) {
		const fake_copy *c = copies[i];
		if (!c) {
			rec.null_entries++;
			continue;
		}
		/* The copy's own memory, never the original's (which may be freed by now). */
		if ((const void *)c == (const void *)c->from || c->id < 0 || c->id >= MAX_ID)
			rec.bad++;
		else {
			rec.seen[c->id]++;
			rec.last_pass[c->id] = rec.passes;
		}
		if (i == 0)
			rec.first_id = c->id;
	}
	rec.renew_done++;
	pthread_cond_broadcast(&rec.cv);
	pthread_mutex_unlock(&rec.mu);
}

static const aks_lease_ops ops = {copy_lock, free_copy, renew};

/* A keeper renewing locks 1 and 2 (2, tracked last, first in each pass). */
static void start_two(aks_lease_keeper *k, fake_lock *a, fake_lock *b)
{
	aks_lease_init(k, LEASE_MS, &ops, &rec);
	*a = (fake_lock){.id = 1};
	*b = (fake_lock){.id = 2};
	assert_int_equal(aks_lease_track(k, &a->lease, a), 0);
	assert_int_equal(aks_lease_track(k, &b->lease, b), 0);
}

/* Unlocks both, ends the keeper, and checks that every copy was a copy, and freed. */
static void end_two(aks_lease_keeper *k, fake_lock *a, fake_lock *b)
{
	aks_lease_untrack(k, &a->lease);
	aks_lease_untrack(k, &b->lease);
	aks_lease_fini(k);
	assert_int_equal(rec.bad, 0);
	assert_int_equal(rec.made, rec.freed);
}

static int setup(void **state)
{
	(void)state;
	memset(&rec, 0, sizeof(rec));
	pthread_mutex_init(&rec.mu, NULL);
	pthread_cond_init(&rec.cv, NULL);
	rec.fail_copy_id = -1;
	atomic_store(&fail_callocs, 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	pthread_mutex_destroy(&rec.mu);
	pthread_cond_destroy(&rec.cv);
	return 0;
}

/* Waits (bounded) until *counter reaches at least `want`. */
static bool wait_for(const int *counter, int want)
{
	for (int waited = 0; waited < WAIT_MS; waited++) {
		pthread_mutex_lock(&rec.mu);
		bool done = *counter >= want;
		pthread_mutex_unlock(&rec.mu);
		if (done)
			return true;
		sleep_ms(1);
	}
	return false;
}

static int get(const int *counter)
{
	pthread_mutex_lock(&rec.mu);
	int v = *counter;
	pthread_mutex_unlock(&rec.mu);
	return v;
}

static void test_renews_copies_periodically(void **state)
{
	(void)state;
	aks_lease_keeper k;
	fake_lock a, b;
	start_two(&k, &a, &b);
	assert_true(wait_for(&rec.passes, 3));
	end_two(&k, &a, &b);
	assert_true(rec.seen[1] >= 3);
	assert_true(rec.seen[2] >= 3);
	assert_int_equal(rec.first_id, 2); /* newest first */
}

static void test_untrack_stops_that_lock(void **state)
{
	(void)state;
	aks_lease_keeper k;
	fake_lock a, b;
	start_two(&k, &a, &b);
	assert_true(wait_for(&rec.passes, 1));
	aks_lease_untrack(&k, &a.lease);
	/* A pass whose snapshot came before the untrack may still be renewing a copy of it. */
	int p = get(&rec.passes);
	assert_true(wait_for(&rec.passes, p + 3));
	end_two(&k, &a, &b);
	assert_true(rec.last_pass[1] <= p + 1);
	assert_true(rec.last_pass[2] >= p + 3);
}

/* A holder unlocks and frees its lock while a pass renews it: the pass has its copy
 * (ASan and valgrind see any read of the freed lock). */
static void test_lock_freed_during_a_pass(void **state)
{
	(void)state;
	aks_lease_keeper k;
	aks_lease_init(&k, LEASE_MS, &ops, &rec);
	fake_lock *a = calloc(1, sizeof(*a));
	assert_non_null(a);
	a->id = 3;
	rec.hold = true;
	assert_int_equal(aks_lease_track(&k, &a->lease, a), 0);
	assert_true(wait_for(&rec.in_renew, 1));
	aks_lease_untrack(&k, &a->lease);
	a->id = -1; /* what a reuse of the memory would look like */
	free(a);
	pthread_mutex_lock(&rec.mu);
	rec.hold = false;
	pthread_cond_broadcast(&rec.cv);
	pthread_mutex_unlock(&rec.mu);
	assert_true(wait_for(&rec.renew_done, 1));
	aks_lease_fini(&k);
	assert_int_equal(rec.seen[3], 1);
	assert_int_equal(rec.bad, 0);
	assert_int_equal(rec.made, rec.freed);
}

/* Stop waits for the pass under way, then nothing renews, not even a lock tracked after. */
static void test_stop_joins_and_renews_no_more(void **state)
{
	(void)state;
	aks_lease_keeper k;
	aks_lease_init(&k, LEASE_MS, &ops, &rec);
	fake_lock a = {.id = 1}, b = {.id = 2};
	rec.delay_ms = 50;
	assert_int_equal(aks_lease_track(&k, &a.lease, &a), 0);
	assert_true(wait_for(&rec.in_renew, 1));
	aks_lease_stop(&k);
	int passes = get(&rec.passes);
	assert_int_equal(get(&rec.renew_done), get(&rec.in_renew));
	assert_true(passes >= 1);
	assert_int_equal(aks_lease_track(&k, &b.lease, &b), 0);
	sleep_ms(5 * LEASE_MS / 3);
	assert_int_equal(get(&rec.passes), passes);
	end_two(&k, &a, &b);
}

/* renew() is told which copies ran out of memory, and when the whole snapshot did. */
static void test_out_of_memory_reaches_renew(void **state)
{
	(void)state;
	aks_lease_keeper k;
	fake_lock a, b;
	rec.fail_copy_id = 1;
	start_two(&k, &a, &b);
	assert_true(wait_for(&rec.null_entries, 1));
	assert_true(wait_for(&rec.seen[2], 1));
	/* Only the keeper's thread calls calloc meanwhile (this one only sleeps and locks). */
	atomic_store(&fail_callocs, 1);
	assert_true(wait_for(&rec.null_arrays, 1));
	int passes = get(&rec.passes);
	assert_true(wait_for(&rec.passes, passes + 1)); /* and it carries on */
	end_two(&k, &a, &b);
	assert_int_equal(rec.null_array_n, 2);
	assert_int_equal(rec.seen[1], 0);
}

/* No lock ever taken: no thread, nothing renewed; a keeper never set up finishes as well. */
static void test_unused_and_zeroed_keepers(void **state)
{
	(void)state;
	aks_lease_keeper k;
	aks_lease_init(&k, LEASE_MS, &ops, &rec);
	sleep_ms(LEASE_MS);
	aks_lease_fini(&k);
	aks_lease_fini(&k); /* once more: nothing */
	aks_lease_keeper zero = {0};
	aks_lease_fini(&zero);
	assert_int_equal(rec.in_renew, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_renews_copies_periodically, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_untrack_stops_that_lock, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lock_freed_during_a_pass, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stop_joins_and_renews_no_more, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_out_of_memory_reaches_renew, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_unused_and_zeroed_keepers, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
