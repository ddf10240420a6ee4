/*
 * plugins/common/b64.c - base64 for the container providers (kubeconfig
 * data, the WebSocket handshake, Docker's path-stat header); see
 * aks_container.h. Plugins cannot link the core's copy.
 */
#include <stdint.h>
#include <stdlib.h>

#include "aks_container.h"

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

char *aks_ctr_b64_decode(const char *s, size_t n, size_t *out_len)
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

char *aks_ctr_b64_encode(const void *data, size_t len)
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
