/*
 * tests/unit/alloc_fail.h - a test-only allocator that fails one chosen allocation.
 *
 * alloc_fail.c defines malloc, calloc, realloc, reallocarray, free, strdup and strndup in the
 * test program itself. A definition in the executable comes first in the dynamic linker's
 * lookup order, so every allocation of the process goes through it: the core's, libc's own
 * (strdup, asprintf, open_memstream, getline: glibc supports a replaced malloc and calls it),
 * libyaml's, json-c's, and those of the plugins the test loads. Each forwards to the next
 * definition (dlsym RTLD_NEXT): libc's allocator in a plain build, AddressSanitizer's in the
 * ASan build (whose strdup and strndup interceptors would otherwise allocate past us), so
 * the sanitizers and valgrind see every block as usual.
 *
 * While armed, allocations are counted (in this process, on every thread) and the n-th one
 * fails (NULL, errno ENOMEM). Every block allocated while armed is recorded until it is
 * freed: what is still recorded when the window closes was leaked by the code under test.
 *
 * Some allocations are spared, counted apart and never failed: what a thread does before its
 * start routine runs (glibc's and AddressSanitizer's set-up of it: the program's
 * pthread_create starts every thread through a routine that marks it running), the test's own
 * checks (alloc_fail_spare), and, with json-c before 0.17, the allocations inside
 * json_tokener_parse_ex and its two callers, which that json-c does not survive (a crash on a
 * NULL key, members dropped with success reported; fixed by json-c's commit 9e6acc9).
 */
#ifndef AKS_TEST_ALLOC_FAIL_H
#define AKS_TEST_ALLOC_FAIL_H

#include <stdbool.h>
#include <stddef.h>

typedef struct alloc_window {
	unsigned long allocations; /* allocation calls while armed, the failed one included */
	bool failed;               /* the n-th one came and failed */
	size_t live;               /* blocks allocated while armed and not freed since */
	unsigned long spared;      /* allocations neither counted nor failed (see alloc_fail.c) */
} alloc_window;

/* Opens a window: from now on the n-th allocation fails (n = 0: none fails, count only). */
void alloc_fail_arm(unsigned long n);
/* On this thread, spares (neither counts nor fails) the allocations made between
 * alloc_fail_spare(true) and alloc_fail_spare(false): the test's own work inside a window.
 * Nests. */
void alloc_fail_spare(bool on);
/* Stops counting, failing and recording, but still notes the frees of the blocks recorded:
 * for a clean-up after the code under test, which may free what it left behind. */
void alloc_fail_freeze(void);
/* Closes the window and says what happened in it. */
alloc_window alloc_fail_disarm(void);
/* Calls fn(ptr, size, site, ctx) for each block still recorded from the last window (the
 * leaks), at most max of them; site is the address the allocation was called from. */
void alloc_fail_each_live(void (*fn)(void *ptr, size_t size, const void *site, void *ctx),
                          void *ctx, size_t max);

#endif /* AKS_TEST_ALLOC_FAIL_H */
