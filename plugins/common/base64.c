/*
 * plugins/common/base64.c - base64 in every variant the tree uses (aks_base64.h). libc only.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "aks_base64.h"

static const char std_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char url_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

char *aks__base64_encode(const void *data, size_t len, unsigned flags)
{
	const char *abc = flags & AKS_BASE64_URL ? url_alphabet : std_alphabet;
	bool pad = !(flags & AKS_BASE64_NOPAD);
	const unsigned char *in = data;
	if (len > (SIZE_MAX - 1) / 4 * 3 - 2)
		return NULL;
	char *out = malloc((len + 2) / 3 * 4 + 1), *o = out;
	if (!out)
		return NULL;
	size_t i = 0;
	for (; i + 3 <= len; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
		*o++ = abc[v >> 18];
		*o++ = abc[(v >> 12) & 63];
		*o++ = abc[(v >> 6) & 63];
		*o++ = abc[v & 63];
	}
	if (i < len) { /* one or two bytes left: two or three characters, then the padding */
		bool two = i + 1 < len;
		uint32_t v = (uint32_t)in[i] << 16 | (two ? (uint32_t)in[i + 1] << 8 : 0);
		*o++ = abc[v >> 18];
		*o++ = abc[(v >> 12) & 63];
		if (two)
			*o++ = abc[(v >> 6) & 63];
		else if (pad)
			*o++ = '=';
		if (pad)
			*o++ = '=';
	}
	*o = '\0';
	return out;
}

/* 0..63 for a character of the variant's alphabet (either one when loose), else -1. */
static int value_of(unsigned char c, unsigned flags)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	bool loose = flags & AKS_BASE64_LOOSE;
	bool std = loose || !(flags & AKS_BASE64_URL);
	bool url = loose || (flags & AKS_BASE64_URL);
	if ((c == '+' && std) || (c == '-' && url))
		return 62;
	if ((c == '/' && std) || (c == '_' && url))
		return 63;
	return -1;
}

/* Strict decoding's shape: how many characters come before the padding, or false when the
 * length or the padding cannot be the variant's. */
static bool strict_data_len(const char *text, size_t len, unsigned flags, size_t *data_len)
{
	size_t n = len;
	if (!(flags & AKS_BASE64_NOPAD)) {
		if (len % 4 != 0)
			return false;
		for (int k = 0; k < 2 && n && text[n - 1] == '='; k++)
			n--;
	}
	*data_len = n;
	return n % 4 != 1; /* one character holds 6 bits: no whole byte */
}

static bool is_space(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

size_t aks__base64_decoded_max(size_t len)
{
	return len / 4 * 3 + 2;
}

int aks__base64_decode_to(const char *text, size_t len, unsigned flags, unsigned char *out,
                          size_t *out_len)
{
	bool loose = flags & AKS_BASE64_LOOSE;
	*out_len = 0;
	size_t n = len;
	if (!loose && !strict_data_len(text, len, flags, &n))
		return AKS_EINVAL;
	uint32_t acc = 0; /* the bits not yet output: fewer than 8 between characters */
	int bits = 0;
	size_t o = 0;
	bool padded = false; /* loose: an '=' came */
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)text[i];
		if (loose && is_space(c))
			continue;
		if (loose && c == '=') {
			padded = true;
			continue;
		}
		int v = value_of(c, flags);
		if (v < 0 || padded) /* strict: any '=' left here is misplaced */
			return AKS_EINVAL;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	if (!loose && acc != 0) /* canonical: the bits past the last byte are zero */
		return AKS_EINVAL;
	*out_len = o;
	return AKS_OK;
}

int aks__base64_decode(const char *text, size_t len, unsigned flags, unsigned char **out,
                       size_t *out_len)
{
	*out = NULL;
	*out_len = 0;
	unsigned char *buf = malloc(aks__base64_decoded_max(len) + 1);
	if (!buf)
		return AKS_ENOMEM;
	size_t n = 0;
	int rc = aks__base64_decode_to(text, len, flags, buf, &n);
	if (rc != AKS_OK) {
		free(buf);
		return rc;
	}
	buf[n] = '\0';
	*out = buf;
	*out_len = n;
	return AKS_OK;
}
