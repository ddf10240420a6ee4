/*
 * core/util/util.h - small string helpers of the core's own. The buffer and string list
 * (aks_buf, aks_strv) are plugins/common/aks_buf.h, included here for every core file.
 */
#ifndef AKS_CORE_UTIL_UTIL_H
#define AKS_CORE_UTIL_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include "aks_buf.h"
#include "internal.h"

/* Edit distance, for "did you mean" suggestions. */
size_t aks__levenshtein(const char *a, const char *b);

/* Renders a NULL-terminated list like Python's repr of a list of str: ['a', 'b']. */
char *aks__py_list_repr(const char *const *items);

#endif /* AKS_CORE_UTIL_UTIL_H */
