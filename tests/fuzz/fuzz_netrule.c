/*
 * Fuzz target: network_allow entries and the decisions made with them
 * (plugins/common/netrule.c). The input, split on '\n', is a list of entries (at most 64; an
 * entry ends at a NUL, as a C string does); names are the entries themselves and variations
 * of them, addresses are the entries' own (when they start with one) and windows of the
 * input's bytes as IPv4, IPv6, IPv4-mapped and NAT64 addresses; ports come from the input.
 * The input, with '\n' as ',', is also a test name map. Checks: aks_netrules_parse agrees
 * with aks_netrule_problem (the index of the first bad entry and its message) and holds one
 * rule per entry; a message is non-empty, has no trailing period and fits its buffer;
 * aks_netname_normalize's output is lowercase and normalizes to itself; a match names one of
 * the entries' texts; allow_name refuses what normalize refuses and IP literals;
 * allow_special implies a special address and allow_addr; 0.0.0.0/0 and ::/0 added to the
 * list change no allow_special answer; every name a parsed map holds resolves from the map
 * alone. Aborts when a property fails.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "aks_netrule.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

#define MAX_ENTRIES 64

/* A message: non-empty, no trailing period, and never cut by the buffer (512 bytes is
 * enough, the header says: entries are quoted cut, escaped). */
static void check_message(const char *msg, size_t cap)
{
	size_t len = strnlen(msg, cap);
	CHECK(len > 0 && len < cap - 1);
	CHECK(msg[len - 1] != '.');
}

/* Whether text is one of the entries (the rules keep copies). */
static bool is_entry(const char *text, char *const *entries, size_t n)
{
	for (size_t i = 0; text && i < n; i++)
		if (strcmp(entries[i], text) == 0)
			return true;
	return false;
}

static void check_name(const aks_netrules *r, char *const *entries, size_t n, const char *name,
                       unsigned port)
{
	char norm[256];
	const char *rule = NULL;
	bool ok = aks_netname_normalize(name, norm, sizeof(norm)) == 0;
	if (ok) {
		char again[256];
		for (const char *p = norm; *p; p++)
			CHECK(!(*p >= 'A' && *p <= 'Z'));
		CHECK(aks_netname_normalize(norm, again, sizeof(again)) == 0);
		CHECK(strcmp(norm, again) == 0);
	}
	bool allowed = aks_netrules_allow_name(r, name, port, &rule);
	if (allowed) {
		unsigned char a[16];
		CHECK(ok);
		CHECK(!strchr(norm, ':') && inet_pton(AF_INET, norm, a) != 1);
		CHECK(is_entry(rule, entries, n));
		CHECK(port >= 1 && port <= 65535);
		/* the normalized name is allowed alike */
		CHECK(aks_netrules_allow_name(r, norm, port, NULL));
	}
}

static void check_addr(const aks_netrules *r, const aks_netrules *wide, char *const *entries,
                       size_t n, const struct sockaddr *sa, unsigned port)
{
	const char *rule = NULL, *special_rule = NULL;
	bool addr = aks_netrules_allow_addr(r, sa, port, &rule);
	bool special = aks_netrules_allow_special(r, sa, port, &special_rule);
	if (addr)
		CHECK(is_entry(rule, entries, n));
	if (special) {
		CHECK(aks_netaddr_special(sa));
		CHECK(is_entry(special_rule, entries, n));
		CHECK(addr);
	}
	/* everything, added: no special range opens that was not open */
	CHECK(aks_netrules_allow_special(wide, sa, port, NULL) == special);
	CHECK(aks_netrules_allow_addr(wide, sa, port, NULL) == (port >= 1 && port <= 65535));
}

static void check_v4(const aks_netrules *r, const aks_netrules *wide, char *const *entries,
                     size_t n, const unsigned char v4[4], unsigned port)
{
	struct sockaddr_in in;
	memset(&in, 0, sizeof(in));
	in.sin_family = AF_INET;
	memcpy(&in.sin_addr, v4, 4);
	check_addr(r, wide, entries, n, (const struct sockaddr *)&in, port);
	/* IPv4-mapped: the same answers; NAT64: the same special range */
	struct sockaddr_in6 in6;
	memset(&in6, 0, sizeof(in6));
	in6.sin6_family = AF_INET6;
	in6.sin6_addr.s6_addr[10] = in6.sin6_addr.s6_addr[11] = 0xff;
	memcpy(in6.sin6_addr.s6_addr + 12, v4, 4);
	const struct sockaddr *m = (const struct sockaddr *)&in6;
	const struct sockaddr *s = (const struct sockaddr *)&in;
	check_addr(r, wide, entries, n, m, port);
	CHECK(aks_netrules_allow_addr(r, m, port, NULL) ==
	      aks_netrules_allow_addr(r, s, port, NULL));
	CHECK(aks_netrules_allow_special(r, m, port, NULL) ==
	      aks_netrules_allow_special(r, s, port, NULL));
	const char *label = aks_netaddr_special(s), *mapped = aks_netaddr_special(m);
	CHECK(!label == !mapped && (!label || strcmp(label, mapped) == 0));
	memset(in6.sin6_addr.s6_addr, 0, 12);
	in6.sin6_addr.s6_addr[1] = 0x64;
	in6.sin6_addr.s6_addr[2] = 0xff;
	in6.sin6_addr.s6_addr[3] = 0x9b;
	const char *nat64 = aks_netaddr_special(m);
	CHECK(!label == !nat64 && (!label || strcmp(label, nat64) == 0));
	check_addr(r, wide, entries, n, m, port);
}

static void check_v6(const aks_netrules *r, const aks_netrules *wide, char *const *entries,
                     size_t n, const unsigned char v6[16], unsigned port)
{
	struct sockaddr_in6 in6;
	memset(&in6, 0, sizeof(in6));
	in6.sin6_family = AF_INET6;
	memcpy(&in6.sin6_addr, v6, 16);
	check_addr(r, wide, entries, n, (const struct sockaddr *)&in6, port);
}

/* The address an entry starts with (before '/' or ':port', in brackets or not), if any. */
static void entry_address(const aks_netrules *r, const aks_netrules *wide, char *const *entries,
                          size_t n, const char *e, unsigned port)
{
	char t[64];
	const char *s = e[0] == '[' ? e + 1 : e;
	size_t len = strcspn(s, e[0] == '[' ? "/]" : "/");
	if (len >= sizeof(t))
		return;
	memcpy(t, s, len);
	t[len] = '\0';
	unsigned char a[16];
	if (inet_pton(AF_INET, t, a) == 1) {
		check_v4(r, wide, entries, n, a, port);
		a[3] ^= 1;
		check_v4(r, wide, entries, n, a, port);
	} else if (inet_pton(AF_INET6, t, a) == 1) {
		check_v6(r, wide, entries, n, a, port);
		a[15] ^= 1;
		check_v6(r, wide, entries, n, a, port);
	}
}

/* The test name map: the input with '\n' as ','; every name of a parsed map resolves from it. */
static void check_map(const uint8_t *data, size_t size)
{
	char *spec = strndup((const char *)data, size);
	CHECK(spec);
	for (char *p = spec; *p; p++)
		if (*p == '\n')
			*p = ',';
	aks_netmap *m = NULL;
	char msg[512];
	if (aks_netmap_parse(spec, &m, msg, sizeof(msg)) != 0) {
		CHECK(!m);
		check_message(msg, sizeof(msg));
		free(spec);
		return;
	}
	for (char *item = strtok(spec, ","); item; item = strtok(NULL, ",")) {
		char *eq = strchr(item, '=');
		CHECK(eq);
		*eq = '\0';
		struct sockaddr_storage out[4];
		size_t got = 99;
		CHECK(aks_netresolve(m, item, 443, out, 4, &got, msg, sizeof(msg)) == 0);
		CHECK(got >= 1 && got <= 4);
		for (size_t i = 0; i < got; i++)
			CHECK(out[i].ss_family == AF_INET || out[i].ss_family == AF_INET6);
	}
	aks_netmap_free(m);
	free(spec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 4096)
		return 0;
	char *entries[MAX_ENTRIES + 3];
	size_t n = 0;
	for (size_t at = 0; at <= size && n < MAX_ENTRIES;) {
		const uint8_t *nl = memchr(data + at, '\n', size - at);
		size_t len = nl ? (size_t)(nl - (data + at)) : size - at;
		CHECK(entries[n++] = strndup((const char *)data + at, len));
		at += len + 1;
	}
	entries[n] = NULL;

	/* parse agrees with problem */
	char msg[512], buf[512];
	size_t first_bad = n, bad = 99;
	const char *first_why = NULL;
	for (size_t i = 0; i < n; i++) {
		const char *why = aks_netrule_problem(entries[i], buf, sizeof(buf));
		if (why) {
			check_message(why, sizeof(buf));
			CHECK(why == buf && !strchr(why, '\n'));
			if (first_bad == n) {
				first_bad = i;
				first_why = strdup(why);
				CHECK(first_why);
			}
		} else {
			/* an accepted entry parses alone */
			const char *one[] = {entries[i], NULL};
			aks_netrules *alone = NULL;
			CHECK(aks_netrules_parse(one, &alone, NULL, NULL, 0) == 0);
			CHECK(aks_netrules_count(alone) == 1);
			aks_netrules_free(alone);
		}
	}
	aks_netrules *r = NULL;
	int rc = aks_netrules_parse((const char *const *)entries, &r, &bad, msg, sizeof(msg));
	if (first_bad < n) {
		CHECK(rc == -1 && !r && bad == first_bad && strcmp(msg, first_why) == 0);
		free((void *)first_why);
		/* match against the good entries only */
		size_t k = 0;
		for (size_t i = 0; i < n; i++)
			if (!aks_netrule_problem(entries[i], buf, sizeof(buf)))
				entries[k++] = entries[i];
			else
				free(entries[i]);
		n = k;
		entries[n] = NULL;
		CHECK(aks_netrules_parse((const char *const *)entries, &r, NULL, NULL, 0) == 0);
	} else {
		CHECK(rc == 0 && r);
	}
	CHECK(aks_netrules_count(r) == n);
	const char *with_all[MAX_ENTRIES + 3];
	memcpy(with_all, entries, n * sizeof(*entries));
	with_all[n] = "0.0.0.0/0";
	with_all[n + 1] = "::/0";
	with_all[n + 2] = NULL;
	aks_netrules *wide = NULL;
	CHECK(aks_netrules_parse(with_all, &wide, NULL, NULL, 0) == 0);

	/* ports: common ones and two from the input */
	unsigned ports[5] = {0, 443, 65535, 1, 80};
	if (size >= 2)
		ports[3] = (unsigned)data[0] << 8 | data[1];
	if (size >= 4)
		ports[4] = (unsigned)data[2] << 8 | data[3];

	/* names: each entry, beneath it, its suffix after the first dot, with a trailing dot */
	for (size_t i = 0; i < n; i++) {
		char name[600];
		const char *e = entries[i];
		const char *colon = strrchr(e, ':');
		size_t len = colon && !strchr(e, '[') && colon == strchr(e, ':')
		                 ? (size_t)(colon - e)
		                 : strlen(e);
		if (len > 500)
			continue;
		for (size_t p = 0; p < 5; p++) {
			memcpy(name, e, len);
			name[len] = '\0';
			check_name(r, entries, n, name, ports[p]);
			if (name[0] == '*')
				name[0] = 'x';
			check_name(r, entries, n, name, ports[p]);
			memcpy(name, "a.", 2);
			memcpy(name + 2, e, len);
			name[len + 2] = '\0';
			check_name(r, entries, n, name, ports[p]);
			const char *dot = memchr(e, '.', len);
			if (dot) {
				size_t rest = len - (size_t)(dot + 1 - e);
				memcpy(name, dot + 1, rest);
				name[rest] = '\0';
				check_name(r, entries, n, name, ports[p]);
			}
			memcpy(name, e, len);
			memcpy(name + len, ".", 2);
			check_name(r, entries, n, name, ports[p]);
			entry_address(r, wide, entries, n, e, ports[p]);
		}
	}
	/* addresses: windows of the input */
	for (size_t at = 0; at + 4 <= size && at < 64; at += 4)
		for (size_t p = 0; p < 5; p++)
			check_v4(r, wide, entries, n, data + at, ports[p]);
	for (size_t at = 0; at + 16 <= size && at < 128; at += 16)
		for (size_t p = 0; p < 5; p++)
			check_v6(r, wide, entries, n, data + at, ports[p]);
	CHECK(!aks_netrules_allow_addr(r, NULL, 443, NULL));
	CHECK(!aks_netaddr_special(NULL));

	aks_netrules_free(wide);
	aks_netrules_free(r);
	for (size_t i = 0; i < n; i++)
		free(entries[i]);
	check_map(data, size);
	return 0;
}
