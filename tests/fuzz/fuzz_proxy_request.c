/*
 * Fuzz target: what a sandbox's program sends the agent's egress proxy first
 * (agent/proxy_request.c): an HTTP proxy request head, or a SOCKS5 greeting and request.
 * Each parser sees the input whole and every prefix of it (as the bytes arrive); aborts when:
 *   - a prefix is decided (OK or BAD) and a longer one decides otherwise, or differently;
 *   - a decision comes after more than PROXY_HEAD_MAX bytes, or none comes at that size;
 *   - OK names no host, a port outside 1..65535, consumes more than it was given, or (plain
 *     HTTP) gives a head that is not origin-form, lacks `Connection: close`, or keeps a
 *     Proxy-* header.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent/proto.h"
#include "agent/proxy_request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

static void check_ok(const proxy_request *r, size_t n)
{
	CHECK(r->host[0] && strlen(r->host) < sizeof(r->host));
	CHECK(r->port >= 1 && r->port <= 65535);
	CHECK(r->consumed > 0 && r->consumed <= n);
	if (r->kind == AKS_AGENT_NET_HTTP) {
		CHECK(r->head && r->head_len >= 4);
		const char *sp = memchr(r->head, ' ', r->head_len);
		CHECK(sp && sp[1] == '/');
		CHECK(memcmp(r->head + r->head_len - 4, "\r\n\r\n", 4) == 0);
		CHECK(memmem(r->head, r->head_len, "\r\nConnection: close\r\n", 21));
		for (size_t i = 0; i + 8 < r->head_len; i++)
			CHECK(!(r->head[i] == '\n' &&
			        strncasecmp(r->head + i + 1, "proxy-", 6) == 0));
	} else {
		CHECK(!r->head);
	}
}

/* Feeds prefixes of growing length: the first decision must hold for every longer one. */
static void prefixes(const uint8_t *data, size_t size, int which)
{
	int decided = PROXY_MORE;
	proxy_request first;
	memset(&first, 0, sizeof(first));
	size_t step = size > 4096 ? size / 512 : 1;
	for (size_t n = 0; n <= size;
	     n = n == size ? size + 1 : (n + step > size ? size : n + step)) {
		proxy_request r;
		size_t used = 0;
		int rc;
		if (which == 0)
			rc = proxy_http_parse(data, n, &r);
		else if (which == 1)
			rc = proxy_socks_greeting(data, n, &used);
		else
			rc = proxy_socks_request(data, n, &r);
		if (which == 1) {
			CHECK(rc != PROXY_OK || (used >= 3 && used <= n));
			memset(&r, 0, sizeof(r));
		} else if (rc == PROXY_OK) {
			check_ok(&r, n);
		}
		if (decided != PROXY_MORE) {
			CHECK(rc == decided);
			if (which != 1 && rc == PROXY_OK)
				CHECK(strcmp(r.host, first.host) == 0 && r.port == first.port &&
				      r.consumed == first.consumed);
		} else if (rc != PROXY_MORE) {
			decided = rc;
			first = r;
			first.head = NULL;
		}
		if (which == 0 && n >= PROXY_HEAD_MAX)
			CHECK(rc != PROXY_MORE);
		if (which != 1)
			proxy_request_clear(&r);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 2 * PROXY_HEAD_MAX)
		size = 2 * PROXY_HEAD_MAX;
	prefixes(data, size, 0);
	prefixes(data, size, 1);
	prefixes(data, size, 2);
	return 0;
}
