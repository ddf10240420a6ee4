/*
 * core/util/base64.c - standard base64. None of the libraries the core links (libyaml, json-c)
 * offers it, and it is small enough not to pull in another one for.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "util/base64.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *aks__base64_encode(const void *data, size_t len)
{
	const unsigned char *in = data;
	if (len > (SIZE_MAX - 1) / 4 * 3 - 2)
		return NULL;
	char *out = malloc((len + 2) / 3 * 4 + 1), *o = out;
	if (!out)
		return NULL;
	size_t i = 0;
	for (; i + 3 <= len; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
		*o++ = alphabet[v >> 18];
		*o++ = alphabet[(v >> 12) & 63];
		*o++ = alphabet[(v >> 6) & 63];
		*o++ = alphabet[v & 63];
	}
	if (i < len) {
		uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < len ? (uint32_t)in[i + 1] << 8 : 0);
		*o++ = alphabet[v >> 18];
		*o++ = alphabet[(v >> 12) & 63];
		*o++ = i + 1 < len ? alphabet[(v >> 6) & 63] : '=';
		*o++ = '=';
	}
	*o = '\0';
	return out;
}

static int value_of(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

int aks__base64_decode(const char *text, size_t len, unsigned char **out, size_t *out_len)
{
	*out = NULL;
	*out_len = 0;
	if (len % 4 != 0)
		return -EINVAL;
	size_t pad = len && text[len - 1] == '=' ? (len >= 2 && text[len - 2] == '=' ? 2 : 1) : 0;
	size_t n = len / 4 * 3 - pad;
	unsigned char *buf = malloc(n + 1), *o = buf;
	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < len; i += 4) {
		bool last = i + 4 == len;
		int v[4];
		for (int k = 0; k < 4; k++) {
			v[k] = value_of((unsigned char)text[i + k]);
			/* '=' only as the padding of the last quantum */
			if (v[k] < 0 && !(last && text[i + k] == '=' && k >= 4 - (int)pad))
				goto bad;
		}
		uint32_t q = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 |
		             (uint32_t)(v[2] < 0 ? 0 : v[2]) << 6 | (uint32_t)(v[3] < 0 ? 0 : v[3]);
		*o++ = (unsigned char)(q >> 16);
		if (!last || pad < 2)
			*o++ = (unsigned char)(q >> 8);
		if (!last || pad < 1)
			*o++ = (unsigned char)q;
		/* canonical: the bits the padding hides are zero */
		if (last && ((pad == 1 && (q & 0xff)) || (pad == 2 && (q & 0xffff))))
			goto bad;
	}
	buf[n] = '\0';
	*out = buf;
	*out_len = n;
	return 0;
bad:
	free(buf);
	return -EINVAL;
}
