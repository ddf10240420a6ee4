/*
 * core/store/file_ns.c - namespace and key names to paths under the file store's ns/ directory
 * and back.
 *
 * Names are caller-supplied bytes, so they never reach the file system as they are: the
 * encoding keeps [a-z0-9_-] and writes every other byte as "%xx". Uppercase letters are
 * escaped too, so that "A" and "a" stay apart even on a case-folding directory.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "store/store.h"
#include "util/util.h"

static bool plain_byte(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

int aks__store_name_check(const char *what, const char *name, aks_error **err)
{
	if (!name || !*name)
		return aks__error_set(err, AKS_EINVAL, "state store: the %s is empty", what);
	size_t len = strnlen(name, AKS_STORE_NAME_MAX + 1);
	if (len > AKS_STORE_NAME_MAX)
		return aks__error_set(err, AKS_EINVAL,
		                      "state store: the %s is %zu bytes long; the limit is %d",
		                      what, strlen(name), AKS_STORE_NAME_MAX);
	return AKS_OK;
}

char *aks__store_name_path(const char *ns)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = strlen(ns);
	/* Worst case: every byte escaped, plus one '+' and one '/' per chunk boundary. */
	char *enc = malloc(3 * n + 1);
	if (!enc)
		return NULL;
	size_t e = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)ns[i];
		if (plain_byte(c)) {
			enc[e++] = (char)c;
		} else {
			enc[e++] = '%';
			enc[e++] = hex[c >> 4];
			enc[e++] = hex[c & 15];
		}
	}
	size_t chunks = e ? (e + AKS_STORE_NS_CHUNK - 1) / AKS_STORE_NS_CHUNK : 1;
	char *path = malloc(e + 2 * (chunks - 1) + 1);
	if (!path) {
		free(enc);
		return NULL;
	}
	size_t p = 0;
	for (size_t off = 0; off < e; off += AKS_STORE_NS_CHUNK) {
		size_t take = e - off < AKS_STORE_NS_CHUNK ? e - off : AKS_STORE_NS_CHUNK;
		memcpy(path + p, enc + off, take);
		p += take;
		if (off + take < e) {
			path[p++] = '+';
			path[p++] = '/';
		}
	}
	path[p] = '\0';
	free(enc);
	return path;
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1; /* uppercase hex is not canonical */
}

int aks__store_name_from_path(const char *path, char **out)
{
	*out = NULL;
	size_t n = strlen(path);
	/* Join the chunks first: a boundary may fall inside an escape. */
	char *enc = malloc(n + 1), *ns = malloc(n + 1);
	if (!enc || !ns) {
		free(enc);
		free(ns);
		return AKS_ENOMEM;
	}
	size_t e = 0;
	for (size_t i = 0; i < n; i++) {
		if (path[i] == '+' && path[i + 1] == '/')
			i++; /* a chunk boundary; where it sits is checked below */
		else
			enc[e++] = path[i];
	}
	size_t o = 0;
	for (size_t i = 0; i < e;) {
		unsigned char c = (unsigned char)enc[i];
		if (plain_byte(c)) {
			ns[o++] = (char)c;
			i++;
		} else if (c == '%' && i + 2 < e) {
			int hi = hex_value(enc[i + 1]), lo = hex_value(enc[i + 2]);
			int b = hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
			if (b <= 0 || plain_byte((unsigned char)b))
				goto bad; /* NUL, or a byte that should not have been escaped */
			ns[o++] = (char)b;
			i += 3;
		} else {
			goto bad;
		}
	}
	ns[o] = '\0';
	if (aks__store_name_check("name", ns, NULL) < 0)
		goto bad;
	/* Chunk boundaries must sit exactly where the encoder puts them. */
	char *canon = aks__store_name_path(ns);
	if (!canon) {
		free(enc);
		free(ns);
		return AKS_ENOMEM;
	}
	bool same = strcmp(canon, path) == 0;
	free(canon);
	if (!same)
		goto bad;
	free(enc);
	*out = ns;
	return AKS_OK;
bad:
	free(enc);
	free(ns);
	return AKS_EINVAL;
}
