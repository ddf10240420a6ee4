/*
 * plugins/redis/rd_keys.c - Redis key names for records and locks, their glob patterns for
 * SCAN, and the random tokens that name lock owners and update commits.
 *
 * A record is "<prefix>r:<n>:<ns>:<key>" where n is the decimal byte length of ns: the length
 * keeps (ns "a:b", key "c") apart from (ns "a", key "b:c"), whatever bytes the names hold.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aks_text.h"
#include "rd_internal.h"

void rd_key_ns(const aks_store_impl *s, char kind, const char *ns, aks_buf *b)
{
	char head[32];
	int n = snprintf(head, sizeof(head), "%c:%zu:", kind, strlen(ns));
	aks__buf_append(b, s->prefix, s->prefix_len);
	aks__buf_append(b, head, (size_t)n);
	aks__buf_puts(b, ns);
	aks__buf_append(b, ":", 1);
}

void rd_key(const aks_store_impl *s, char kind, const char *ns, const char *key, aks_buf *b)
{
	rd_key_ns(s, kind, ns, b);
	aks__buf_puts(b, key);
}

void rd_glob_escape(aks_buf *b, const char *text, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		char c = text[i];
		if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\')
			aks__buf_append(b, "\\", 1);
		aks__buf_append(b, &c, 1);
	}
}

bool rd_key_parse(const aks_store_impl *s, const char *name, size_t len, char **ns,
                  const char **key)
{
	*ns = NULL;
	*key = NULL;
	if (len < s->prefix_len + 2 || memcmp(name, s->prefix, s->prefix_len) != 0 ||
	    memcmp(name + s->prefix_len, "r:", 2) != 0)
		return false;
	const char *p = name + s->prefix_len + 2, *end = name + len;
	size_t n = 0;
	const char *digits = p;
	while (p < end && *p >= '0' && *p <= '9' && p - digits < 4)
		n = n * 10 + (size_t)(*p++ - '0');
	if (p == digits || (*digits == '0') || p >= end || *p != ':')
		return false;
	p++;
	/* ns, ':', then a key of 1..AKS_STORE_NAME_MAX bytes; no NUL anywhere. */
	if (n < 1 || n > AKS_STORE_NAME_MAX || (size_t)(end - p) < n + 2 || p[n] != ':')
		return false;
	size_t klen = (size_t)(end - p) - n - 1;
	if (klen > AKS_STORE_NAME_MAX || memchr(p, '\0', (size_t)(end - p)))
		return false;
	char *copy = malloc((size_t)(end - p) + 1);
	if (!copy)
		return false;
	memcpy(copy, p, (size_t)(end - p));
	copy[end - p] = '\0';
	copy[n] = '\0';
	*ns = copy;
	*key = copy + n + 1;
	return true;
}

int rd_token(char out[33])
{
	return aks__random_hex(out, 16) ? 0 : -1;
}
