/*
 * plugins/common/aks_buf.h - the growable byte buffer and the string list that the whole
 * tree shares: the core, every plugin and aksandbox-agent.
 *
 * Part of libaks-util (plugins/common/Makefile.inc.am), which links nothing but libc: the
 * core links it inside libaksandbox, each plugin links its own hidden copy (no plugin depends
 * on another, or on the core, at run time), and the agent, a static program, compiles buf.c
 * in. Every name is aks__ and every build uses -fvisibility=hidden, so none of it is ever
 * exported.
 *
 * Functions that can fail return AKS_OK or AKS_ENOMEM (aksandbox/common.h).
 */
#ifndef AKS_BUF_H
#define AKS_BUF_H

#include <stdbool.h>
#include <stddef.h>

#include <aksandbox/common.h>

/*
 * A growable byte buffer. Once anything was added (even zero bytes) data is malloc'd and
 * always NUL-terminated at data[len], so text can be used as a C string directly; binary
 * data may hold NULs of its own. Zero-initialised ({0} or AKS_BUF_INIT) is empty.
 *
 * Failure is sticky, as in libgit2's git_str: the first append that cannot allocate sets
 * `failed`, leaves the contents as they were, and every later append does nothing and fails
 * too. A sequence of appends can therefore be checked once, at the end (`b.failed`), instead
 * of after each one; aks__buf_steal() of a failed buffer gives NULL.
 */
typedef struct aks_buf {
	char *data;
	size_t len;
	size_t cap;
	bool failed;
} aks_buf;

#define AKS_BUF_INIT                                                                               \
	{                                                                                          \
		NULL, 0, 0, false                                                                  \
	}

/* Makes room for `extra` more bytes past len (and the NUL), for callers that write into
 * data + len themselves; len is not changed. */
int aks__buf_reserve(aks_buf *b, size_t extra);
int aks__buf_append(aks_buf *b, const void *data, size_t len);
int aks__buf_puts(aks_buf *b, const char *s);
int aks__buf_printf(aks_buf *b, const char *fmt, ...) AKS_PRINTF(2, 3);
/* Cuts the contents to their first `len` bytes (nothing when len is not shorter). */
void aks__buf_truncate(aks_buf *b, size_t len);
/* Empties the buffer for reuse, keeping its memory; clears `failed`. */
void aks__buf_reset(aks_buf *b);
/* Drops trailing bytes that occur in `chars` ("\r\n": a line ending). */
void aks__buf_rtrim(aks_buf *b, const char *chars);
/* Takes the buffer's memory (never NULL: "" for an empty buffer) and leaves the buffer
 * empty; NULL (the buffer freed) when it failed or on ENOMEM. */
char *aks__buf_steal(aks_buf *b);
void aks__buf_free(aks_buf *b);

/* A growing NULL-terminated list of malloc'd strings ({NULL, 0, 0} is empty; v stays NULL
 * until the first push). The vector v is an ordinary one: free it with aks__strv_free(). */
typedef struct aks_strv {
	char **v;
	size_t n, cap;
} aks_strv;

/* Appends a copy of s: AKS_OK, or AKS_ENOMEM (the list is unchanged). */
int aks__strv_push(aks_strv *l, const char *s);
/* Appends s itself (malloc'd; the list owns it now): AKS_OK, or AKS_ENOMEM when s is NULL (a
 * failed copy) or the list cannot grow, s then freed and the list unchanged. */
int aks__strv_take(aks_strv *l, char *s);
/* Sorts the list (strcmp order) and drops repeated strings, freeing them. */
void aks__strv_sort_unique(aks_strv *l);

/* Frees a NULL-terminated vector of malloc'd strings and the vector itself; NULL is fine. */
void aks__strv_free(char **v);
/* A deep copy of a NULL-terminated vector (NULL copies as an empty vector), or NULL on
 * ENOMEM. */
char **aks__strv_dup(const char *const *v);

#endif /* AKS_BUF_H */
