/*
 * plugins/nats/codec.c - escaping of attribute keys and values for NATS
 * headers (see codec.h).
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "nats_codec.h"

static const char hex[] = "0123456789abcdef";

static char *escape(const char *in, bool (*keep)(unsigned char))
{
	size_t len = strlen(in);
	char *out = malloc(len * 3 + 1);
	if (!out)
		return NULL;
	char *o = out;
	for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
		if (keep(*p)) {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	*o = '\0';
	return out;
}

static bool keep_in_key(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

/* Header values may not hold CR or LF; other controls and non-ASCII bytes are
 * escaped too, so the value survives any client's header handling. */
static bool keep_in_value(unsigned char c)
{
	return c >= 0x20 && c < 0x7f && c != '%';
}

char *aks_nats_escape_key(const char *in)
{
	return escape(in, keep_in_key);
}

char *aks_nats_escape_value(const char *in)
{
	/* A leading '=' so that no value is empty: libnats 3.4 misparses a
	 * header line with an empty value (it takes the next line as the value). */
	char *body = escape(in, keep_in_value);
	char *out = body ? malloc(strlen(body) + 2) : NULL;
	if (out) {
		out[0] = '=';
		strcpy(out + 1, body);
	}
	free(body);
	return out;
}

char *aks_nats_unescape_value(const char *in)
{
	return in[0] == '=' ? aks_nats_unescape(in + 1) : NULL;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

char *aks_nats_unescape(const char *in)
{
	char *out = malloc(strlen(in) + 1);
	if (!out)
		return NULL;
	char *o = out;
	for (const char *p = in; *p; p++) {
		if (*p != '%') {
			*o++ = *p;
			continue;
		}
		int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);
		if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
			free(out);
			return NULL;
		}
		*o++ = (char)(hi << 4 | lo);
		p += 2;
	}
	*o = '\0';
	return out;
}
