/*
 * plugins/kubernetes/k8s_util.c - errors without the host, growing buffers,
 * base64 and whole-file reads, shared by every layer of the plugin. Base64
 * and the path rule are plugins/common/libaks-container's, worded here.
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

#include "aks_container.h"
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

char *k8s_b64_decode(const char *s, size_t n, size_t *out_len)
{
	return aks_ctr_b64_decode(s, n, out_len);
}

char *k8s_b64_encode(const void *data, size_t len)
{
	return aks_ctr_b64_encode(data, len);
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
	int rc = aks_ctr_wspath(path, out);
	char why[AKS_CTR_WSPATH_WHY_BUF];
	if (rc != AKS_OK)
		return k8s_err_set(e, rc, "%s", aks_ctr_wspath_why(rc, path, why, sizeof(why)));
	return AKS_OK;
}
