/*
 * plugins/kubernetes/k8s_util.c - errors without the host, growing buffers,
 * base64 and whole-file reads, shared by every layer of the plugin.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "k8s_internal.h"

int k8s_err_set(k8s_err *e, int code, const char *fmt, ...)
{
	if (e && e->code == AKS_OK) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
		va_end(ap);
		e->code = code;
	}
	return code;
}

int k8s_buf_add(k8s_buf *b, const void *data, size_t len)
{
	if (b->len + len + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		while (cap < b->len + len + 1)
			cap *= 2;
		char *d = realloc(b->data, cap);
		if (!d)
			return -1;
		b->data = d;
		b->cap = cap;
	}
	if (len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
	return 0;
}

void k8s_buf_free(k8s_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

static int b64val(int ch)
{
	if (ch >= 'A' && ch <= 'Z')
		return ch - 'A';
	if (ch >= 'a' && ch <= 'z')
		return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9')
		return ch - '0' + 52;
	if (ch == '+' || ch == '-')
		return 62;
	if (ch == '/' || ch == '_')
		return 63;
	return -1;
}

char *k8s_b64_decode(const char *s, size_t n, size_t *out_len)
{
	char *o = malloc(n / 4 * 3 + 4), *p = o;
	if (!o)
		return NULL;
	uint32_t acc = 0;
	int bits = 0;
	bool pad = false;
	for (size_t i = 0; i < n; i++) {
		int ch = (unsigned char)s[i];
		if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t')
			continue;
		if (ch == '=') {
			pad = true;
			continue;
		}
		int v = b64val(ch);
		if (v < 0 || pad) { /* data after padding is not base64 either */
			free(o);
			return NULL;
		}
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			*p++ = (char)(acc >> bits & 0xff);
		}
	}
	*p = '\0';
	if (out_len)
		*out_len = (size_t)(p - o);
	return o;
}

char *k8s_b64_encode(const void *data, size_t len)
{
	static const char tab[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *in = data;
	char *o = malloc((len + 2) / 3 * 4 + 1), *p = o;
	if (!o)
		return NULL;
	size_t i = 0;
	for (; i + 2 < len; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
		*p++ = tab[v >> 18 & 63];
		*p++ = tab[v >> 12 & 63];
		*p++ = tab[v >> 6 & 63];
		*p++ = tab[v & 63];
	}
	if (i < len) {
		uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < len ? (uint32_t)in[i + 1] << 8 : 0);
		*p++ = tab[v >> 18 & 63];
		*p++ = tab[v >> 12 & 63];
		*p++ = i + 1 < len ? tab[v >> 6 & 63] : '=';
		*p++ = '=';
	}
	*p = '\0';
	return o;
}

char *k8s_read_file(const char *path, size_t max, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct stat st;
	if (fstat(fd, &st) != 0) {
		int saved = errno;
		close(fd);
		errno = saved;
		return NULL;
	}
	if (S_ISDIR(st.st_mode)) {
		close(fd);
		errno = EISDIR;
		return NULL;
	}
	k8s_buf b = {0};
	char chunk[8192];
	for (;;) {
		ssize_t n = read(fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 ||
		    (n > 0 && (b.len + (size_t)n > max || k8s_buf_add(&b, chunk, (size_t)n) < 0))) {
			int saved = n < 0 ? errno : EFBIG;
			close(fd);
			k8s_buf_free(&b);
			errno = saved;
			return NULL;
		}
		if (n == 0)
			break;
	}
	close(fd);
	if (!b.data && k8s_buf_add(&b, "", 0) < 0) {
		errno = ENOMEM;
		return NULL;
	}
	if (len)
		*len = b.len;
	return b.data;
}

int k8s_safe_path(const char *path, char **out, k8s_err *e)
{
	*out = NULL;
	if (!path)
		return k8s_err_set(e, AKS_EINVAL, "no path");
	/* K8S_WORKSPACE "/" + path, normalised like posixpath.normpath */
	while (*path == '/')
		path++;
	size_t n = strlen(path);
	char *joined = malloc(sizeof(K8S_WORKSPACE "/") + n);
	char *res = malloc(sizeof(K8S_WORKSPACE "/") + n + 1);
	if (!joined || !res) {
		free(joined);
		free(res);
		return k8s_err_set(e, AKS_ENOMEM, "out of memory");
	}
	sprintf(joined, K8S_WORKSPACE "/%s", path);
	size_t len = 0;
	for (char *save = NULL, *c = strtok_r(joined, "/", &save); c;
	     c = strtok_r(NULL, "/", &save)) {
		if (strcmp(c, ".") == 0)
			continue;
		if (strcmp(c, "..") == 0) {
			while (len && res[len - 1] != '/')
				len--;
			if (len)
				len--;
			continue;
		}
		res[len++] = '/';
		size_t cl = strlen(c);
		memcpy(res + len, c, cl);
		len += cl;
	}
	res[len] = '\0';
	free(joined);
	if (strcmp(res, K8S_WORKSPACE) != 0 &&
	    strncmp(res, K8S_WORKSPACE "/", sizeof(K8S_WORKSPACE)) != 0) {
		free(res);
		return k8s_err_set(e, AKS_EPOLICY, "path '%s' escapes %s", path, K8S_WORKSPACE);
	}
	*out = res;
	return AKS_OK;
}
