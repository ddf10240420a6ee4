/*
 * tests/unit/alloc_fail.c - the test-only allocator of alloc_fail.h.
 *
 * Linked into one test program only (tests/unit/test_alloc_fail), never into the library.
 * The real allocator is looked up lazily with dlsym(RTLD_NEXT); dlsym itself may allocate,
 * so the allocations made while that lookup runs come from a small static arena (never
 * freed, never failed).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "alloc_fail.h"

/* The allocation functions must be seen by every library of the process (the build hides
 * symbols by default, and the program is linked with -export-dynamic). */
#define VISIBLE __attribute__((visibility("default")))

/* ---- the real allocator ---- */

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);

static _Alignas(16) unsigned char arena[16384];
static size_t arena_used;
static int resolving;

static bool in_arena(const void *p)
{
	return (const unsigned char *)p >= arena &&
	       (const unsigned char *)p < arena + sizeof(arena);
}

static void *arena_alloc(size_t n)
{
	size_t at = (arena_used + 15) & ~(size_t)15;
	if (n > sizeof(arena) - at)
		return NULL;
	arena_used = at + n;
	return arena + at;
}

static void resolve(void)
{
	if (real_free || resolving)
		return;
	resolving = 1;
	real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
	real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
	real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
	real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
	resolving = 0;
	if (!real_malloc || !real_calloc || !real_realloc || !real_free)
		abort();
}

/* ---- the window ---- */

static atomic_bool armed;
static atomic_ulong counter;
static unsigned long fail_at;
static atomic_bool fired;
static atomic_ulong spared_count;
static _Thread_local int sparing; /* inside a library that cannot take a failure */
/* Set on the arming thread, and on every thread pthread_create starts once its start routine
 * runs: what comes before (glibc's and AddressSanitizer's own set-up of the thread, which
 * aborts when an allocation fails) is spared. */
static _Thread_local bool thread_running;
static bool trap; /* ALLOC_FAIL_TRAP set: SIGTRAP at the failing allocation, for a debugger */

/* After fork the child is another process: it neither counts nor fails. */
static void child_after_fork(void)
{
	atomic_store(&armed, false);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void register_atfork(void)
{
	pthread_atfork(NULL, NULL, child_after_fork);
}

/* Whether this allocation is the one to fail. */
static bool fail_this_one(void)
{
	if (!atomic_load_explicit(&armed, memory_order_relaxed))
		return false;
	if (sparing || !thread_running) {
		atomic_fetch_add(&spared_count, 1);
		return false;
	}
	unsigned long k = atomic_fetch_add(&counter, 1) + 1;
	if (k != fail_at)
		return false;
	atomic_store(&fired, true);
	if (trap)
		raise(SIGTRAP);
	return true;
}

/* ---- the record of live blocks ---- */

/* Open addressing, linear probing, tombstones; a spin lock (the allocator cannot take a
 * mutex that may allocate). A slot counts only in the generation it was filled in, so a new
 * window starts empty without clearing the table. Sized for far more blocks than a scenario
 * keeps at once; a full table aborts rather than miss a leak. */
#define SLOTS     (1u << 17)
#define TOMBSTONE ((void *)1)

typedef struct slot {
	void *ptr;
	size_t size;
	const void *site; /* the allocation's caller */
	unsigned gen;
} slot;

static slot slots[SLOTS];
static unsigned gen;
static size_t live_count;
static atomic_flag table_lock = ATOMIC_FLAG_INIT;
static atomic_bool recording; /* new blocks are recorded */
static atomic_bool watching;  /* freed blocks are forgotten */

static void lock_table(void)
{
	while (atomic_flag_test_and_set_explicit(&table_lock, memory_order_acquire))
		;
}

static void unlock_table(void)
{
	atomic_flag_clear_explicit(&table_lock, memory_order_release);
}

static size_t slot_of(const void *p)
{
	uint64_t h = (uint64_t)(uintptr_t)p;
	h ^= h >> 17;
	h *= 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 40) & (SLOTS - 1);
}

static bool in_use(const slot *s)
{
	return s->gen == gen && s->ptr;
}

static void record(void *p, size_t size, const void *site)
{
	if (!p || !atomic_load_explicit(&recording, memory_order_relaxed))
		return;
	lock_table();
	size_t i = slot_of(p), n = 0;
	while (n < SLOTS && in_use(&slots[i]) && slots[i].ptr != TOMBSTONE)
		i = (i + 1) & (SLOTS - 1), n++;
	if (n == SLOTS)
		abort();
	slots[i] = (slot){p, size, site, gen};
	live_count++;
	unlock_table();
}

/* Forgets p; true when it was recorded. */
static bool forget(void *p)
{
	if (!p || !atomic_load_explicit(&watching, memory_order_relaxed))
		return false;
	bool found = false;
	lock_table();
	for (size_t i = slot_of(p), n = 0; n < SLOTS && in_use(&slots[i]);
	     i = (i + 1) & (SLOTS - 1), n++)
		if (slots[i].ptr == p) {
			slots[i].ptr = TOMBSTONE;
			live_count--;
			found = true;
			break;
		}
	unlock_table();
	return found;
}

void alloc_fail_arm(unsigned long n)
{
	resolve();
	pthread_once(&atfork_once, register_atfork);
	lock_table();
	gen++;
	live_count = 0;
	unlock_table();
	fail_at = n;
	trap = getenv("ALLOC_FAIL_TRAP") != NULL;
	thread_running = true;
	atomic_store(&fired, false);
	atomic_store(&counter, 0);
	atomic_store(&spared_count, 0);
	atomic_store(&watching, true);
	atomic_store(&recording, true);
	atomic_store(&armed, true);
}

void alloc_fail_spare(bool on)
{
	sparing += on ? 1 : -1;
}

void alloc_fail_freeze(void)
{
	atomic_store(&armed, false);
	atomic_store(&recording, false);
}

alloc_window alloc_fail_disarm(void)
{
	alloc_fail_freeze();
	atomic_store(&watching, false);
	lock_table();
	alloc_window w = {atomic_load(&counter), atomic_load(&fired), live_count,
	                  atomic_load(&spared_count)};
	unlock_table();
	return w;
}

void alloc_fail_each_live(void (*fn)(void *ptr, size_t size, const void *site, void *ctx),
                          void *ctx, size_t max)
{
	for (size_t i = 0; i < SLOTS && max; i++)
		if (in_use(&slots[i]) && slots[i].ptr != TOMBSTONE) {
			fn(slots[i].ptr, slots[i].size, slots[i].site, ctx);
			max--;
		}
}

/* ---- the allocator ---- */

/* The allocation functions, each with the address it was called from (for the report of a
 * leak: strdup and strndup pass their own caller's). */
static void *malloc_from(size_t n, const void *site)
{
	resolve();
	if (resolving)
		return arena_alloc(n);
	if (fail_this_one()) {
		errno = ENOMEM;
		return NULL;
	}
	void *p = real_malloc(n);
	record(p, n, site);
	return p;
}

VISIBLE void *malloc(size_t n)
{
	return malloc_from(n, __builtin_return_address(0));
}

VISIBLE void *calloc(size_t n, size_t size)
{
	resolve();
	if (resolving) {
		if (size && n > SIZE_MAX / size)
			return NULL;
		void *p = arena_alloc(n * size);
		if (p)
			memset(p, 0, n * size);
		return p;
	}
	if (fail_this_one()) {
		errno = ENOMEM;
		return NULL;
	}
	void *p = real_calloc(n, size);
	record(p, n * size, __builtin_return_address(0));
	return p;
}

VISIBLE void free(void *p)
{
	if (!p || in_arena(p))
		return;
	resolve();
	forget(p);
	real_free(p);
}

static void *realloc_from(void *p, size_t n, const void *site)
{
	if (!p)
		return malloc_from(n, site);
	if (in_arena(p)) { /* an arena block grows into a real one */
		size_t room = (size_t)(arena + sizeof(arena) - (unsigned char *)p);
		void *q = malloc_from(n, site);
		if (q)
			memcpy(q, p, n < room ? n : room);
		return q;
	}
	resolve();
	if (n == 0) { /* glibc frees the block */
		forget(p);
		return real_realloc(p, 0);
	}
	if (fail_this_one()) {
		errno = ENOMEM;
		return NULL;
	}
	/* A block from before the window stays unrecorded when it moves: it is not the
	 * window's to leak. */
	bool was_recorded = forget(p);
	void *q = real_realloc(p, n);
	if (was_recorded)
		record(q ? q : p, n, site); /* the real allocator failed: p is still there */
	return q;
}

VISIBLE void *realloc(void *p, size_t n)
{
	return realloc_from(p, n, __builtin_return_address(0));
}

VISIBLE void *reallocarray(void *p, size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc_from(p, n * size, __builtin_return_address(0));
}

VISIBLE char *strdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = malloc_from(n, __builtin_return_address(0));
	return d ? memcpy(d, s, n) : NULL;
}

VISIBLE char *strndup(const char *s, size_t max)
{
	size_t n = strnlen(s, max);
	char *d = malloc_from(n + 1, __builtin_return_address(0));
	if (!d)
		return NULL;
	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

/* ---- libraries that cannot take a failure ---- */

/* json-c before 0.17 does not handle a failed allocation inside json_tokener_parse_ex (its
 * commit 9e6acc9, "json_tokener_parse_ex: handle out of memory errors", in 0.17): it passes
 * a NULL key on (a crash), drops a member whose insertion failed, or returns NULL, and
 * reports success in each case. A failure there tests that json-c, not the code calling it,
 * so with such a json-c the allocations of a parse are spared: not counted, never failed
 * (alloc_window.spared says how many). The core's own calls come here (the program defines
 * the function); json-c's internal ones (json_tokener_parse) too, through its PLT. */
#define JSON_C_SPARES (json_c_version_num() < 0x001100)

VISIBLE struct json_object *json_tokener_parse_ex(struct json_tokener *tok, const char *str,
                                                  int len)
{
	static struct json_object *(*real)(struct json_tokener *, const char *, int);
	if (!real)
		real = (struct json_object * (*)(struct json_tokener *, const char *, int))
		    dlsym(RTLD_NEXT, "json_tokener_parse_ex");
	bool spare = JSON_C_SPARES;
	sparing += spare;
	struct json_object *o = real(tok, str, len);
	sparing -= spare;
	return o;
}

/* json-c calls its own json_tokener_parse_ex directly from these two. */
VISIBLE struct json_object *json_tokener_parse_verbose(const char *str,
                                                       enum json_tokener_error *error)
{
	static struct json_object *(*real)(const char *, enum json_tokener_error *);
	if (!real)
		real = (struct json_object * (*)(const char *, enum json_tokener_error *))
		    dlsym(RTLD_NEXT, "json_tokener_parse_verbose");
	bool spare = JSON_C_SPARES;
	sparing += spare;
	struct json_object *o = real(str, error);
	sparing -= spare;
	return o;
}

VISIBLE struct json_object *json_tokener_parse(const char *str)
{
	enum json_tokener_error error;
	return json_tokener_parse_verbose(str, &error);
}

/* ---- threads ---- */

typedef struct thread_start {
	void *(*fn)(void *);
	void *arg;
} thread_start;

static void *run_thread(void *p)
{
	thread_start start = *(thread_start *)p;
	free(p);
	thread_running = true;
	return start.fn(start.arg);
}

/* Threads start through run_thread, which marks them running. The start block is allocated
 * like any other (a failure is pthread_create's EAGAIN). */
VISIBLE int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
	if (!real)
		real = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *),
		                void *))dlsym(RTLD_NEXT, "pthread_create");
	thread_start *start = malloc(sizeof(*start));
	if (!start)
		return EAGAIN;
	start->fn = fn;
	start->arg = arg;
	int rc = real(t, attr, run_thread, start);
	if (rc != 0)
		free(start);
	return rc;
}
