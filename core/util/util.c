/*
 * core/util/util.c - small string and buffer helpers.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

static int buf_reserve(aks_buf *b, size_t extra)
{
	if (extra > SIZE_MAX - b->len - 1)
		return AKS_ENOMEM;
	size_t need = b->len + extra + 1;
	if (need <= b->cap)
		return AKS_OK;
	size_t cap = b->cap ? b->cap : 64;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	char *p = realloc(b->data, cap);
	if (!p)
		return AKS_ENOMEM;
	b->data = p;
	b->cap = cap;
	return AKS_OK;
}

int aks__buf_append(aks_buf *b, const void *data, size_t len)
{
	if (buf_reserve(b, len) < 0)
		return AKS_ENOMEM;
	if (len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
	return AKS_OK;
}

int aks__buf_puts(aks_buf *b, const char *s)
{
	return aks__buf_append(b, s, strlen(s));
}

int aks__buf_printf(aks_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || buf_reserve(b, (size_t)n) < 0)
		return AKS_ENOMEM;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return AKS_OK;
}

char *aks__buf_steal(aks_buf *b)
{
	if (!b->data) {
		if (buf_reserve(b, 0) < 0)
			return NULL;
		b->data[0] = '\0';
	}
	char *p = b->data;
	b->data = NULL;
	b->len = b->cap = 0;
	return p;
}

void aks__buf_free(aks_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

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

int aks__strv_push(aks_strv *l, const char *s)
{
	if (l->n + 1 >= l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		char **p = realloc(l->v, cap * sizeof(*p));
		if (!p)
			return AKS_ENOMEM;
		l->v = p;
		l->cap = cap;
	}
	if (!(l->v[l->n] = strdup(s)))
		return AKS_ENOMEM;
	l->v[++l->n] = NULL;
	return AKS_OK;
}
