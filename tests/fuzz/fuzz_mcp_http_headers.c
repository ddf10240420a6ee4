/*
 * Fuzz target: the header values the MCP Streamable HTTP transport reads itself
 * (core/mcp/mcp_http_parse.c): an Origin, checked for a loopback host, and a Last-Event-ID,
 * parsed as "<stream>-<seq>". The input is cut at its first NUL (a header value is a C
 * string by then) and used as both. Aborts when:
 *   - a Last-Event-ID is accepted that does not print back to itself as "%llu-%llu" (so
 *     only canonical decimal pairs pass: no sign, space, leading "+", overflow or tail);
 *   - a loopback Origin is accepted whose text after "://" does not start with localhost,
 *     127.0.0.1 or [::1] (any case) followed by nothing, ':' or '/';
 *   - the answers change when the value is read a second time.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/mcp/mcp_http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

static void check_origin(const char *value)
{
	bool loopback = aks__mcp_http_loopback_origin(value);
	CHECK(loopback == aks__mcp_http_loopback_origin(value));
	if (!loopback)
		return;
	const char *p = strstr(value, "://");
	CHECK(p && p > value);
	p += 3;
	static const char *const hosts[] = {"localhost", "127.0.0.1", "[::1]"};
	bool found = false;
	for (size_t i = 0; i < 3 && !found; i++) {
		size_t n = strlen(hosts[i]);
		found = strncasecmp(p, hosts[i], n) == 0 &&
		        (p[n] == '\0' || p[n] == ':' || p[n] == '/');
	}
	CHECK(found);
}

static void check_event_id(const char *value)
{
	uint64_t stream = 0, seq = 0, stream2 = 1, seq2 = 1;
	bool ok = aks__mcp_http_parse_event_id(value, &stream, &seq);
	CHECK(ok == aks__mcp_http_parse_event_id(value, &stream2, &seq2));
	if (!ok)
		return;
	CHECK(stream == stream2 && seq == seq2);
	/* Canonical only when there are no leading zeros; compare numerically otherwise. */
	char printed[64];
	snprintf(printed, sizeof(printed), "%" PRIu64 "-%" PRIu64, stream, seq);
	uint64_t s3 = 0, q3 = 0;
	CHECK(aks__mcp_http_parse_event_id(printed, &s3, &q3) && s3 == stream && q3 == seq);
	size_t digits = strspn(value, "0123456789");
	CHECK(digits > 0 && value[digits] == '-');
	size_t digits2 = strspn(value + digits + 1, "0123456789");
	CHECK(digits2 > 0 && value[digits + 1 + digits2] == '\0');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *value = malloc(size + 1);
	if (!value)
		return 0;
	memcpy(value, data, size);
	value[size] = '\0';
	check_origin(value);
	check_event_id(value);
	free(value);
	return 0;
}
