/*
 * plugins/common/buf.c - the growable byte buffer and the string list (aks_buf.h). libc only.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aks_buf.h"

/* Capacity doubles from this, so a buffer built piece by piece reallocates O(log n) times. */
#define BUF_MIN_CAP 64

int aks__buf_reserve(aks_buf *b, size_t extra)
{
	if (b->failed)
		return AKS_ENOMEM;
	if (extra > SIZE_MAX - b->len - 1)
		goto fail;
	size_t need = b->len + extra + 1;
	if (need <= b->cap)
		return AKS_OK;
	size_t cap = b->cap ? b->cap : BUF_MIN_CAP;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	char *p = realloc(b->data, cap);
	if (!p)
		goto fail;
	b->data = p;
	b->cap = cap;
	return AKS_OK;
fail:
	b->failed = true;
	return AKS_ENOMEM;
}

int aks__buf_append(aks_buf *b, const void *data, size_t len)
{
	if (aks__buf_reserve(b, len) != AKS_OK)
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
	if (n < 0) { /* only an encoding error or an INT_MAX overflow get here */
		b->failed = true;
		return AKS_ENOMEM;
	}
	if (aks__buf_reserve(b, (size_t)n) != AKS_OK)
		return AKS_ENOMEM;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return AKS_OK;
}

void aks__buf_truncate(aks_buf *b, size_t len)
{
	if (len >= b->len)
		return;
	b->len = len;
	b->data[len] = '\0';
}

void aks__buf_reset(aks_buf *b)
{
	aks__buf_truncate(b, 0);
	b->failed = false;
}

void aks__buf_rtrim(aks_buf *b, const char *chars)
{
	size_t n = b->len;
	while (n && b->data[n - 1] != '\0' && strchr(chars, b->data[n - 1]))
		n--;
	aks__buf_truncate(b, n);
}

char *aks__buf_steal(aks_buf *b)
{
	if (!b->data && aks__buf_reserve(b, 0) == AKS_OK)
		b->data[0] = '\0';
	if (b->failed) {
		aks__buf_free(b);
		return NULL;
	}
	char *p = b->data;
	*b = (aks_buf)AKS_BUF_INIT;
	return p;
}

void aks__buf_free(aks_buf *b)
{
	free(b->data);
	*b = (aks_buf)AKS_BUF_INIT;
}

int aks__strv_push(aks_strv *l, const char *s)
{
	return aks__strv_take(l, strdup(s));
}

int aks__strv_take(aks_strv *l, char *s)
{
	if (!s)
		return AKS_ENOMEM;
	if (l->n + 1 >= l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		char **p = realloc(l->v, cap * sizeof(*p));
		if (!p) {
			free(s);
			return AKS_ENOMEM;
		}
		l->v = p;
		l->cap = cap;
	}
	l->v[l->n] = s;
	l->v[++l->n] = NULL;
	return AKS_OK;
}

static int strv_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void aks__strv_sort_unique(aks_strv *l)
{
	if (l->n < 2)
		return;
	qsort(l->v, l->n, sizeof(*l->v), strv_cmp);
	size_t k = 1;
	for (size_t i = 1; i < l->n; i++) {
		if (strcmp(l->v[i], l->v[k - 1]) == 0)
			free(l->v[i]);
		else
			l->v[k++] = l->v[i];
	}
	l->n = k;
	l->v[k] = NULL;
}

void aks__strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

char **aks__strv_dup(const char *const *v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	char **c = calloc(n + 1, sizeof(*c));
	for (size_t i = 0; c && i < n; i++)
		if (!(c[i] = strdup(v[i]))) {
			aks__strv_free(c);
			return NULL;
		}
	return c;
}
