/*
 * Fuzz target: the nats transport's header codec (plugins/nats/codec.c). A consumer unescapes
 * the header names and values of every delivered message, and any publisher on the stream
 * writes those. The input is a header name or value as it could arrive (up to its first NUL:
 * a header cannot hold one). Checks: the unescapes give NULL or a string whose length is what
 * the escapes in the input imply (no NUL slipped in); whatever is escaped unescapes to itself,
 * a key escape holds only header-name bytes, and a value escape starts with '=' and holds no
 * control byte; the partition of a group stays below the partition count. Aborts when a
 * property fails.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nats_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

static void check_round_trip(const char *s)
{
	char *key = aks_nats_escape_key(s);
	CHECK(key);
	for (const char *p = key; *p; p++)
		CHECK((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' ||
		      *p == '-' || *p == '%');
	char *back = aks_nats_unescape(key);
	CHECK(back && strcmp(back, s) == 0);
	free(back);
	free(key);

	char *value = aks_nats_escape_value(s);
	CHECK(value && value[0] == '=');
	for (const unsigned char *p = (const unsigned char *)value; *p; p++)
		CHECK(*p >= 0x20 && *p < 0x7f);
	back = aks_nats_unescape_value(value);
	CHECK(back && strcmp(back, s) == 0);
	free(back);
	free(value);
}

/* What aks_nats_unescape(s) must give when it accepts s: one byte per escape of three. */
static size_t unescaped_length(const char *s)
{
	size_t n = 0;
	for (; *s; s++, n++)
		if (*s == '%' && s[1] && s[2])
			s += 2;
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';

	char *u = aks_nats_unescape(s);
	if (u) {
		CHECK(strlen(u) == unescaped_length(s));
		check_round_trip(u);
	}
	free(u);
	u = aks_nats_unescape_value(s);
	CHECK(!u || s[0] == '=');
	free(u);
	check_round_trip(s);

	unsigned partitions = size ? data[0] : 0;
	unsigned p = aks_nats_partition(s, partitions);
	CHECK(partitions ? p < partitions : p == 0);
	free(s);
	return 0;
}
