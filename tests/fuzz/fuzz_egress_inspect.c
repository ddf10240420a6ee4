/*
 * Fuzz target: the host's reading of the first bytes a sandbox program sends through a
 * proxied connection (plugins/common/egress_inspect.c), before any of them is forwarded. The
 * input is those bytes; it is fed whole, as growing prefixes (as a stream delivers it), and to
 * a smaller name buffer. Every call sees a copy of exactly the bytes it is given, so a read
 * past them is an overflow. Checks: never MORE with AKS_INSPECT_MAX bytes or more, and bytes
 * past that limit change nothing; a decision on a prefix is the decision (with the same name
 * and port) on every longer input; the name is NUL-terminated, lowercase, "" unless TLS or
 * HTTP, a name aks_netname_normalize leaves as it is (never an IP literal for TLS), and
 * non-empty for HTTP; the port is 0 unless HTTP; *why is set exactly for BAD; a name that
 * does not fit a smaller buffer makes BAD, one that does gives the same answer. Aborts when a
 * property fails.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "aks_egress_inspect.h"
#include "aks_netrule.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

struct answer {
	int rc;
	char name[256];
	unsigned port;
	const char *why;
};

/* One call on an exact copy of data[0..n), with a name buffer of cap bytes, checked. */
static struct answer ask(const uint8_t *data, size_t n, size_t cap)
{
	struct answer a;
	uint8_t *copy = malloc(n ? n : 1);
	CHECK(copy);
	memcpy(copy, data, n);
	memset(a.name, 0x5a, sizeof(a.name));
	a.port = 7;
	a.why = "unset";
	a.rc = aks_egress_inspect(copy, n, a.name, cap, &a.port, &a.why);
	free(copy);
	CHECK(a.rc >= AKS_INSPECT_MORE && a.rc <= AKS_INSPECT_BAD);
	CHECK(a.rc != AKS_INSPECT_MORE || n < AKS_INSPECT_MAX);
	CHECK(a.rc == AKS_INSPECT_BAD ? a.why && *a.why : !a.why);
	size_t len = strnlen(a.name, cap);
	CHECK(len < cap);
	for (size_t i = 0; i < len; i++)
		CHECK(!(a.name[i] >= 'A' && a.name[i] <= 'Z'));
	if (a.rc != AKS_INSPECT_TLS && a.rc != AKS_INSPECT_HTTP)
		CHECK(len == 0);
	if (a.rc != AKS_INSPECT_HTTP)
		CHECK(a.port == 0);
	CHECK(a.port <= 65535);
	if (len) {
		char again[256];
		CHECK(aks_netname_normalize(a.name, again, sizeof(again)) == 0);
		CHECK(strcmp(again, a.name) == 0);
	}
	if (a.rc == AKS_INSPECT_TLS)
		CHECK(!strchr(a.name, ':'));
	if (a.rc == AKS_INSPECT_HTTP)
		CHECK(len > 0);
	return a;
}

static bool same(const struct answer *a, const struct answer *b)
{
	return a->rc == b->rc && a->port == b->port && strcmp(a->name, b->name) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct answer whole = ask(data, size, 256);
	/* past the limit nothing is looked at */
	if (size > AKS_INSPECT_MAX) {
		struct answer cut = ask(data, AKS_INSPECT_MAX, 256);
		CHECK(same(&cut, &whole));
	}
	/* growing prefixes: MORE, then the decision for good. Every prefix of a short input,
	 * a spread of them for a long one. */
	size_t step = size <= 300 ? 1 : size / 97 + 1;
	bool decided = false;
	for (size_t k = 0; k < size; k += step) {
		struct answer part = ask(data, k, 256);
		if (part.rc == AKS_INSPECT_MORE) {
			CHECK(!decided);
			continue;
		}
		decided = true;
		CHECK(same(&part, &whole));
	}
	/* a smaller buffer for the name */
	size_t cap = size ? 1 + data[size - 1] % 24 : 1;
	struct answer small = ask(data, size, cap);
	if ((whole.rc == AKS_INSPECT_TLS || whole.rc == AKS_INSPECT_HTTP) &&
	    strlen(whole.name) >= cap)
		CHECK(small.rc == AKS_INSPECT_BAD);
	else
		CHECK(same(&small, &whole));
	return 0;
}
