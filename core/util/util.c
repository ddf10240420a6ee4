/*
 * core/util/util.c - small string helpers of the core's own.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

size_t aks__levenshtein(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la > 64 || lb > 64)
		return (size_t)-1; /* not a typo of each other; skip the work */
	size_t row[65];
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
			size_t best = diag + cost;
			if (row[j] + 1 < best)
				best = row[j] + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

char *aks__py_list_repr(const char *const *items)
{
	aks_buf b = AKS_BUF_INIT;
	int rc = aks__buf_puts(&b, "[");
	for (size_t i = 0; rc == AKS_OK && items && items[i]; i++)
		rc = aks__buf_printf(&b, "%s'%s'", i ? ", " : "", items[i]);
	if (rc == AKS_OK)
		rc = aks__buf_puts(&b, "]");
	if (rc != AKS_OK) {
		aks__buf_free(&b);
		return NULL;
	}
	return aks__buf_steal(&b);
}
