/*
 * core/util/util.h - small string and buffer helpers.
 */
#ifndef AKS_CORE_UTIL_UTIL_H
#define AKS_CORE_UTIL_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include "internal.h"

/* A growable byte buffer, always NUL-terminated. */
typedef struct aks_buf {
	char *data;
	size_t len;
	size_t cap;
} aks_buf;

#define AKS_BUF_INIT                                                                               \
	{                                                                                          \
		NULL, 0, 0                                                                         \
	}

int aks__buf_append(aks_buf *b, const void *data, size_t len);
int aks__buf_printf(aks_buf *b, const char *fmt, ...) AKS_PRINTF(2, 3);
int aks__buf_puts(aks_buf *b, const char *s);
/* Takes the buffer's memory (never NULL: "" for an empty buffer) or NULL on ENOMEM. */
char *aks__buf_steal(aks_buf *b);
void aks__buf_free(aks_buf *b);

/* A growing NULL-terminated list of malloc'd strings ({NULL, 0, 0} is empty). */
typedef struct aks_strv {
	char **v;
	size_t n, cap;
} aks_strv;

/* Appends a copy of s: AKS_OK, or AKS_ENOMEM (the list is unchanged). */
int aks__strv_push(aks_strv *l, const char *s);

/* Edit distance, for "did you mean" suggestions. */
size_t aks__levenshtein(const char *a, const char *b);

/* Renders a NULL-terminated list like Python's repr of a list of str: ['a', 'b']. */
char *aks__py_list_repr(const char *const *items);

#endif /* AKS_CORE_UTIL_UTIL_H */
