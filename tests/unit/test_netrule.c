/* Unit tests: network_allow entries as egress rules (plugins/common/aks_netrule.h): every
 * entry form and every class of error with its message, name and address matching, the
 * special address ranges and what opens them, the test name map and resolving. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "aks_netrule.h"

/* ---- helpers ---- */

static aks_netrules *rules_of(const char *const *entries)
{
	aks_netrules *r = NULL;
	size_t bad = 99;
	char msg[512] = "";
	if (aks_netrules_parse(entries, &r, &bad, msg, sizeof(msg)) != 0)
		fail_msg("entry %zu refused: %s", bad, msg);
	assert_non_null(r);
	return r;
}

#define RULES(...) rules_of((const char *const[]){__VA_ARGS__, NULL})

/* An address (IPv4 or IPv6 text) as a sockaddr. */
static struct sockaddr_storage addr(const char *ip)
{
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof(ss));
	struct sockaddr_in *in = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, ip, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
	} else {
		if (inet_pton(AF_INET6, ip, &in6->sin6_addr) != 1)
			fail_msg("bad address in the test: %s", ip);
		in6->sin6_family = AF_INET6;
	}
	return ss;
}

#define SA(ss) ((const struct sockaddr *)&(ss))

static bool allow_addr(const aks_netrules *r, const char *ip, unsigned port, const char **rule)
{
	struct sockaddr_storage ss = addr(ip);
	return aks_netrules_allow_addr(r, SA(ss), port, rule);
}

static bool allow_special(const aks_netrules *r, const char *ip, unsigned port)
{
	struct sockaddr_storage ss = addr(ip);
	return aks_netrules_allow_special(r, SA(ss), port, NULL);
}

static const char *special(const char *ip)
{
	struct sockaddr_storage ss = addr(ip);
	return aks_netaddr_special(SA(ss));
}

/* ---- entries ---- */

/* Every form of entry is accepted, alone and together. */
static void test_entry_forms(void **state)
{
	(void)state;
	static const char *const good[] = {
	    "pypi.org",
	    "API.GitHub.com.",
	    "localhost",
	    "*.github.com",
	    "*.github.com.",
	    "xn--bcher-kva.de",
	    "a-b.c0m",
	    "10.0.0.0/8",
	    "2001:db8::/32",
	    "192.168.1.5",
	    "::1",
	    "pypi.org:443",
	    "*.github.com:443",
	    "10.0.0.0/8:5432",
	    "192.168.1.5:65535",
	    "[2001:db8::1]:443",
	    "[2001:db8::/32]:443",
	    "[::1]",
	    "2001:db8::1:443", /* an IPv6 address: without brackets there is no port */
	    "::ffff:10.0.0.0/104",
	    "0.0.0.0/0",
	    "::/0",
	    "localhost:1",
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.com",
	    NULL,
	};
	char buf[512];
	for (size_t i = 0; good[i]; i++) {
		const char *why = aks_netrule_problem(good[i], buf, sizeof(buf));
		if (why)
			fail_msg("%s: %s", good[i], why);
	}
	/* 253 characters, the most: 3 labels of 63, a dot each, 61 more */
	char longest[254];
	memset(longest, 'a', 253);
	longest[63] = longest[127] = longest[191] = '.';
	longest[253] = '\0';
	assert_null(aks_netrule_problem(longest, buf, sizeof(buf)));
	aks_netrules *r = NULL;
	assert_int_equal(aks_netrules_parse(good, &r, NULL, NULL, 0), 0);
	assert_int_equal(aks_netrules_count(r), sizeof(good) / sizeof(good[0]) - 1);
	aks_netrules_free(r);
}

/* Every class of error: a message that quotes the entry, says what is wrong and, where it
 * can, what was meant; no trailing period; and aks_netrules_parse says the same. */
static void test_entry_errors(void **state)
{
	(void)state;
	static const struct {
		const char *entry, *says;
	} bad[] = {
	    {"", "an empty entry: give a domain (pypi.org), a wildcard (*.example.com), or an "
	         "address or CIDR (10.0.0.0/8)"},
	    {"https://pypi.org", "'https://pypi.org' is a URL: drop the scheme and give the host "
	                         "alone (pypi.org)"},
	    {"https://user@pypi.org:443/simple", "give the host alone (pypi.org:443)"},
	    {"file:///etc", "is a URL: an entry is a host, without a scheme"},
	    {"pypi.org/simple", "'pypi.org/simple' has a path: an entry is a host, not a URL; "
	                        "give pypi.org"},
	    {"pypi.org:443/simple", "has a path: an entry is a host, not a URL; give pypi.org:443"},
	    {"*.github.com/x", "has a path: an entry is a host, not a URL; give *.github.com"},
	    {"pypi.org./simple", "'pypi.org./simple' has a path: an entry is a host, not a URL; "
	                         "give pypi.org"},
	    {"/simple", "'/simple' has a path: an entry is a host, not a URL"},
	    {"a..b/x", "'a..b/x' has a path: an entry is a host, not a URL"},
	    {"https://a_b.test/", "'https://a_b.test/' is a URL: an entry is a host, without a "
	                          "scheme"},
	    {"pypi .org", "'pypi .org' holds whitespace"},
	    {" pypi.org", "holds whitespace"},
	    {"pypi.org\n", "'pypi.org\\x0a' holds whitespace"},
	    {"pypi\x01.org", "'pypi\\x01.org' holds a control character"},
	    {"b\xc3\xbc"
	     "cher.de",
	     "is not ASCII: give an internationalized domain name in its punycode (IDNA) form, "
	     "with xn-- labels (idn2 prints it)"},
	    {"pypi.org\xff", "is not ASCII"},
	    {"pypi.org:", "has an empty port"},
	    {"pypi.org:0", "has a bad port '0': a port is 1 to 65535"},
	    {"pypi.org:65536", "has a bad port '65536'"},
	    {"pypi.org:https", "has a bad port 'https'"},
	    {"pypi.org:-1", "has a bad port '-1'"},
	    {"10.0.0.0/8:0", "has a bad port '0'"},
	    {"[::1]:99999", "has a bad port '99999'"},
	    {"10.0.0.0/33", "'10.0.0.0/33' has a bad CIDR prefix '/33': an IPv4 prefix is 0 to 32"},
	    {"2001:db8::/129", "has a bad CIDR prefix '/129': an IPv6 prefix is 0 to 128"},
	    {"10.0.0.0/", "has a bad CIDR prefix '/'"},
	    {"10.0.0.0/8x", "has a bad CIDR prefix '/8x'"},
	    {"10.0.0.0/-8", "has a bad CIDR prefix '/-8'"},
	    {"10.0.0.1/8", "'10.0.0.1/8' has host bits set: did you mean 10.0.0.0/8?"},
	    {"10.0.0.1/8:5432", "has host bits set: did you mean 10.0.0.0/8:5432?"},
	    {"192.168.1.1/16", "did you mean 192.168.0.0/16?"},
	    {"2001:db8::1/32", "did you mean 2001:db8::/32?"},
	    {"[2001:db8::1/32]:443", "did you mean [2001:db8::/32]:443?"},
	    {"::ffff:10.0.0.1/104", "did you mean 10.0.0.0/8?"},
	    {"*", "'*' is too broad: a wildcard needs a suffix of at least two labels "
	          "(*.example.com)"},
	    {"*.com", "is too broad"},
	    {"*.com.", "is too broad"},
	    {"*.com:443", "is too broad"},
	    {"a.*.com", "has a '*' that is not the whole first label"},
	    {"*foo.com", "has a '*' that is not a whole label"},
	    {"**.example.com", "has a '*' that is not a whole label"},
	    {"*.*.example.com", "has a '*' that is not the whole first label"},
	    {"a..b", "is not a valid domain: it has an empty label"},
	    {".pypi.org", "it has an empty label"},
	    {"pypi.org..", "it has an empty label"},
	    {".", "it has no label"},
	    {"-pypi.org", "it has a label that starts with '-'"},
	    {"pypi-.org", "it has a label that ends with '-'"},
	    {"pypi.org-", "it has a label that ends with '-'"},
	    {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.com",
	     "it has a label longer than 63 characters"},
	    {"a_b.example.com", "it has '_', which no host name holds"},
	    {"user@pypi.org", "it has '@'"},
	    {"*.a_b.com", "is not a valid wildcard: it has '_'"},
	    {"127.1", "'127.1' is an IPv4 address in a non-standard form (the resolver reads "
	              "it as 127.0.0.1)"},
	    {"0x7f000001", "reads it as 127.0.0.1"},
	    {"010.0.0.1", "reads it as 8.0.0.1"},
	    {"010.0.0.0/8", "reads it as 8.0.0.0"},
	    {"256.1.1.1", "'256.1.1.1' is not an IPv4 address"},
	    {"256.1.1.1:80", "has '256.1.1.1', which is not an IPv4 address"},
	    {"1.2.3.4.5", "is not an IPv4 address"},
	    {"10.0.0/8", "reads it as 10.0.0.0"},
	    {"::/0:443", "has a bad CIDR prefix '/0:443': an IPv6 prefix is 0 to 128 (an IPv6 CIDR "
	                 "with a port is written in brackets: [2001:db8::/32]:443)"},
	    {"*.1.2.3", "is not a valid wildcard: its suffix is not a domain"},
	    {"*.0x7f.1", "is not a valid wildcard: its suffix is not a domain"},
	    {"example.123", "no domain's last label is all digits"},
	    {"10.0.0.1.", "has a dot after an address: give 10.0.0.1"},
	    {"2001:db8:::1", "'2001:db8:::1' is not an IPv6 address (an IPv6 entry "
	                     "with a port is written in brackets: [2001:db8::1]:443)"},
	    {"fe80::1%eth0", "has an IPv6 zone index"},
	    {"pypi.org:443:80", "has more than one ':'"},
	    {"[10.0.0.1]:80", "has brackets, which are for IPv6 addresses only: give 10.0.0.1:80"},
	    {"[10.0.0.0/8]", "has brackets, which are for IPv6 addresses only: give 10.0.0.0/8"},
	    {"[10.0.0.1/8]", "'[10.0.0.1/8]' has brackets, which are for IPv6 addresses only"},
	    {"10.0.0.1.:443", "has a dot after an address: give 10.0.0.1:443"},
	    {"[pypi.org]", "has brackets, which hold an IPv6 address or CIDR only"},
	    {"[]", "has brackets"},
	    {"[::1", "has '[' without ']'"},
	    {"[::1]x", "has text after ']'"},
	    {"[::1]/64", "has text after ']'"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char buf[512], msg[512];
		const char *why = aks_netrule_problem(bad[i].entry, buf, sizeof(buf));
		if (!why)
			fail_msg("accepted: '%s'", bad[i].entry);
		if (!strstr(why, bad[i].says))
			fail_msg("'%s': %s\n   wanted: %s", bad[i].entry, why, bad[i].says);
		if (why[strlen(why) - 1] == '.')
			fail_msg("trailing period: %s", why);
		/* the message names the entry (escaped) */
		if (bad[i].entry[0] && why[0] != '\'')
			fail_msg("does not quote the entry: %s", why);
		/* parse: the same message, the index of the first bad entry */
		const char *list[] = {"pypi.org", "10.0.0.0/8", bad[i].entry, "bad entry", NULL};
		aks_netrules *r = (aks_netrules *)1;
		size_t at = 99;
		assert_int_equal(aks_netrules_parse(list, &r, &at, msg, sizeof(msg)), -1);
		assert_null(r);
		assert_int_equal(at, 2);
		assert_string_equal(msg, why);
	}
	/* a long entry is quoted cut, its problem still said */
	char big[600], buf[512];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	const char *why = aks_netrule_problem(big, buf, sizeof(buf));
	assert_non_null(why);
	assert_non_null(strstr(why, "...' is not a valid domain: it is longer than 253"));
	/* a suggestion is always a valid entry, or there is none */
	assert_string_equal(aks_netrule_problem("[10.0.0.1/8]", buf, sizeof(buf)),
	                    "'[10.0.0.1/8]' has brackets, which are for IPv6 addresses only");
	assert_string_equal(aks_netrule_problem("a..b/x", buf, sizeof(buf)),
	                    "'a..b/x' has a path: an entry is a host, not a URL");
	/* a path after a long host: no suggestion rather than a cut one */
	memset(big, 'a', 100);
	memcpy(big + 100, ".test/x", 8);
	why = aks_netrule_problem(big, buf, sizeof(buf));
	assert_non_null(why);
	assert_non_null(strstr(why, "...' has a path: an entry is a host, not a URL"));
	assert_null(strstr(why, "give"));
	/* 254 characters is one too many */
	memset(big, 'a', 254);
	big[63] = big[127] = big[191] = '.';
	big[254] = '\0';
	assert_non_null(aks_netrule_problem(big, buf, sizeof(buf)));
	/* without a buffer a problem is still reported */
	assert_non_null(aks_netrule_problem("a..b", NULL, 0));
	assert_null(aks_netrule_problem("pypi.org", NULL, 0));
	/* a message cut to a small buffer stays a string */
	char tiny[8];
	assert_ptr_equal(aks_netrule_problem("a..b", tiny, sizeof(tiny)), tiny);
	assert_int_equal(strlen(tiny), 7);
}

/* NULL or no entries: nothing allowed; a bad entry fails the whole list. */
static void test_parse_lists(void **state)
{
	(void)state;
	aks_netrules *r = NULL;
	assert_int_equal(aks_netrules_parse(NULL, &r, NULL, NULL, 0), 0);
	assert_int_equal(aks_netrules_count(r), 0);
	assert_false(aks_netrules_allow_name(r, "pypi.org", 443, NULL));
	struct sockaddr_storage ss = addr("8.8.8.8");
	assert_false(aks_netrules_allow_addr(r, SA(ss), 53, NULL));
	aks_netrules_free(r);
	const char *none[] = {NULL};
	assert_int_equal(aks_netrules_parse(none, &r, NULL, NULL, 0), 0);
	assert_int_equal(aks_netrules_count(r), 0);
	aks_netrules_free(r);
	const char *first_bad[] = {"*", "pypi.org", NULL};
	size_t at = 99;
	char msg[512];
	assert_int_equal(aks_netrules_parse(first_bad, &r, &at, msg, sizeof(msg)), -1);
	assert_int_equal(at, 0);
	assert_string_equal(msg, "'*' is too broad: a wildcard needs a suffix of at least two "
	                         "labels (*.example.com)");
	assert_int_equal(aks_netrules_count(NULL), 0);
	aks_netrules_free(NULL);
}

/* ---- matching ---- */

static void test_match_names(void **state)
{
	(void)state;
	aks_netrules *r = RULES("pypi.org", "*.github.com", "API.Example.COM.", "localhost",
	                        "files.example:8443", "*.internal.example:443", "10.0.0.0/8");
	const char *rule = NULL;
	assert_true(aks_netrules_allow_name(r, "pypi.org", 443, &rule));
	assert_string_equal(rule, "pypi.org");
	/* case and one trailing dot do not matter, on either side */
	assert_true(aks_netrules_allow_name(r, "PyPI.Org.", 80, NULL));
	assert_true(aks_netrules_allow_name(r, "api.example.com", 443, &rule));
	assert_string_equal(rule, "API.Example.COM.");
	assert_false(aks_netrules_allow_name(r, "pypi.org..", 443, NULL));
	/* an exact domain is that name only */
	assert_false(aks_netrules_allow_name(r, "www.pypi.org", 443, NULL));
	assert_false(aks_netrules_allow_name(r, "pypi.org.evil.test", 443, NULL));
	assert_false(aks_netrules_allow_name(r, "xpypi.org", 443, NULL));
	/* a wildcard: anything strictly beneath, never the apex */
	assert_true(aks_netrules_allow_name(r, "api.github.com", 443, &rule));
	assert_string_equal(rule, "*.github.com");
	assert_true(aks_netrules_allow_name(r, "a.b.github.com", 22, NULL));
	assert_false(aks_netrules_allow_name(r, "github.com", 443, NULL));
	assert_false(aks_netrules_allow_name(r, "evilgithub.com", 443, NULL));
	assert_false(aks_netrules_allow_name(r, "github.com.evil.test", 443, NULL));
	/* a single label matches only itself */
	assert_true(aks_netrules_allow_name(r, "localhost", 8080, NULL));
	assert_false(aks_netrules_allow_name(r, "localhost.localdomain", 8080, NULL));
	/* ports */
	assert_true(aks_netrules_allow_name(r, "files.example", 8443, &rule));
	assert_string_equal(rule, "files.example:8443");
	assert_false(aks_netrules_allow_name(r, "files.example", 443, NULL));
	assert_true(aks_netrules_allow_name(r, "x.internal.example", 443, NULL));
	assert_false(aks_netrules_allow_name(r, "x.internal.example", 80, NULL));
	assert_false(aks_netrules_allow_name(r, "internal.example", 443, NULL));
	assert_false(aks_netrules_allow_name(r, "pypi.org", 0, NULL));
	assert_false(aks_netrules_allow_name(r, "pypi.org", 65536, NULL));
	/* never an IP literal, never a CIDR entry, never an invalid name */
	assert_false(aks_netrules_allow_name(r, "10.0.0.1", 443, NULL));
	assert_false(aks_netrules_allow_name(r, "0x0a000001", 443, NULL));
	assert_false(aks_netrules_allow_name(r, "a..github.com", 443, NULL));
	assert_false(aks_netrules_allow_name(r, "x_y.github.com", 443, NULL));
	assert_false(aks_netrules_allow_name(r, NULL, 443, NULL));
	assert_false(aks_netrules_allow_name(NULL, "pypi.org", 443, NULL));
	aks_netrules_free(r);
}

static void test_match_addrs(void **state)
{
	(void)state;
	aks_netrules *r = RULES("10.0.0.0/8", "192.168.1.5", "2001:db8::/32", "[2001:db9::1]:443",
	                        "::ffff:172.16.0.0/108", "93.184.216.0/24:80", "pypi.org");
	const char *rule = NULL;
	assert_true(allow_addr(r, "10.1.2.3", 5432, &rule));
	assert_string_equal(rule, "10.0.0.0/8");
	assert_false(allow_addr(r, "11.0.0.1", 443, NULL));
	assert_true(allow_addr(r, "192.168.1.5", 22, &rule));
	assert_string_equal(rule, "192.168.1.5");
	assert_false(allow_addr(r, "192.168.1.6", 22, NULL));
	assert_true(allow_addr(r, "2001:db8::5", 443, NULL));
	assert_true(allow_addr(r, "2001:db8:ffff::5", 443, NULL));
	assert_false(allow_addr(r, "2001:db7::5", 443, NULL));
	assert_true(allow_addr(r, "2001:db9::1", 443, &rule));
	assert_string_equal(rule, "[2001:db9::1]:443");
	assert_false(allow_addr(r, "2001:db9::1", 80, NULL));
	assert_false(allow_addr(r, "2001:db9::2", 443, NULL));
	/* an IPv4-mapped address is its IPv4 one; a mapped entry is an IPv4 one */
	assert_true(allow_addr(r, "::ffff:10.1.1.1", 443, &rule));
	assert_string_equal(rule, "10.0.0.0/8");
	assert_true(allow_addr(r, "172.16.9.9", 443, &rule));
	assert_string_equal(rule, "::ffff:172.16.0.0/108");
	assert_true(allow_addr(r, "172.31.0.1", 443, NULL));
	assert_false(allow_addr(r, "172.32.0.1", 443, NULL));
	/* a NAT64 address is an IPv6 one */
	assert_false(allow_addr(r, "64:ff9b::a01:101", 443, NULL));
	assert_true(allow_addr(r, "93.184.216.34", 80, NULL));
	assert_false(allow_addr(r, "93.184.216.34", 443, NULL));
	assert_false(allow_addr(r, "10.1.2.3", 0, NULL));
	/* neither IPv4 nor IPv6 */
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	assert_false(aks_netrules_allow_addr(r, (const struct sockaddr *)&un, 80, NULL));
	assert_false(aks_netrules_allow_addr(r, NULL, 80, NULL));
	assert_null(aks_netaddr_special((const struct sockaddr *)&un));
	assert_null(aks_netaddr_special(NULL));
	aks_netrules_free(r);
	/* 0.0.0.0/0 and ::/0: every address of their family */
	r = RULES("0.0.0.0/0", "[::/0]:443");
	assert_true(allow_addr(r, "8.8.8.8", 53, NULL));
	assert_true(allow_addr(r, "2606:4700::1", 443, NULL));
	assert_false(allow_addr(r, "2606:4700::1", 80, NULL));
	aks_netrules_free(r);
}

/* ---- special ranges ---- */

static void test_special_ranges(void **state)
{
	(void)state;
	static const struct {
		const char *ip, *label; /* NULL: an ordinary address */
	} cases[] = {
	    {"8.8.8.8", NULL},
	    {"93.184.216.34", NULL},
	    {"127.0.0.1", "loopback"},
	    {"127.255.255.254", "loopback"},
	    {"10.9.9.9", "private"},
	    {"172.16.0.1", "private"},
	    {"172.31.255.255", "private"},
	    {"172.32.0.1", NULL},
	    {"192.168.1.1", "private"},
	    {"169.254.169.254", "metadata"},
	    {"169.254.170.2", "metadata"},
	    {"100.100.100.200", "metadata"},
	    {"169.254.1.1", "link-local"},
	    {"100.64.0.1", "shared (CGNAT)"},
	    {"100.127.255.255", "shared (CGNAT)"},
	    {"100.128.0.1", NULL},
	    {"0.0.0.0", "unspecified"},
	    {"0.1.2.3", "reserved"},
	    {"255.255.255.255", "broadcast"},
	    {"224.0.0.1", "multicast"},
	    {"239.255.255.250", "multicast"},
	    {"240.0.0.1", "reserved"},
	    {"192.0.0.8", "reserved"},
	    {"192.88.99.1", "reserved"},
	    {"192.0.2.1", "documentation"},
	    {"198.51.100.1", "documentation"},
	    {"203.0.113.1", "documentation"},
	    {"198.18.0.1", "benchmarking"},
	    {"198.19.255.255", "benchmarking"},
	    {"198.20.0.1", NULL},
	    {"::", "unspecified"},
	    {"::1", "loopback"},
	    {"fe80::1", "link-local"},
	    {"febf::1", "link-local"},
	    {"fec0::1", "site-local"},
	    {"fc00::1", "unique-local"},
	    {"fd12:3456::1", "unique-local"},
	    {"fd00:ec2::254", "metadata"},
	    {"fd00:ec2::253", "unique-local"},
	    {"ff02::1", "multicast"},
	    {"2001:db8::1", "documentation"},
	    {"3fff::1", "documentation"},
	    {"2001::1", "reserved"},
	    {"100::1", "reserved"},
	    {"::7f00:1", "reserved"},
	    {"4000::1", "reserved"},
	    {"e000::1", "reserved"},
	    {"2606:4700::1", NULL},
	    {"2a00:1450::1", NULL},
	    /* IPv4-mapped, NAT64 and 6to4: what the embedded IPv4 address is */
	    {"::ffff:127.0.0.1", "loopback"},
	    {"::ffff:169.254.169.254", "metadata"},
	    {"::ffff:8.8.8.8", NULL},
	    {"64:ff9b::7f00:1", "loopback"},
	    {"64:ff9b::a9fe:a9fe", "metadata"},
	    {"64:ff9b::c0a8:101", "private"},
	    {"64:ff9b::808:808", NULL},
	    {"64:ff9b:1::1", "reserved"},
	    {"2002:7f00:1::", "loopback"},
	    {"2002:a00:1::1", "private"},
	    {"2002:a9fe:a9fe::1", "metadata"},
	    {"2002:808:808::1", NULL},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *got = special(cases[i].ip);
		if (!cases[i].label != !got || (got && strcmp(got, cases[i].label) != 0))
			fail_msg("%s: %s, wanted %s", cases[i].ip, got ? got : "(ordinary)",
			         cases[i].label ? cases[i].label : "(ordinary)");
	}
}

/* A special address opens only to an entry wholly inside its special range. */
static void test_allow_special(void **state)
{
	(void)state;
	/* everything: no special range */
	aks_netrules *r = RULES("0.0.0.0/0", "::/0");
	assert_true(allow_addr(r, "127.0.0.1", 80, NULL));
	assert_false(allow_special(r, "127.0.0.1", 80));
	assert_false(allow_special(r, "169.254.169.254", 80));
	assert_false(allow_special(r, "10.1.1.1", 80));
	assert_false(allow_special(r, "::1", 80));
	assert_false(allow_special(r, "fd00:ec2::254", 80));
	assert_false(allow_special(r, "::ffff:127.0.0.1", 80));
	/* an ordinary address is not "explicitly allowed": there is nothing to open */
	assert_false(allow_special(r, "8.8.8.8", 80));
	aks_netrules_free(r);

	r = RULES("127.0.0.1/32");
	const char *rule = NULL;
	struct sockaddr_storage lo = addr("127.0.0.1");
	assert_true(aks_netrules_allow_special(r, SA(lo), 80, &rule));
	assert_string_equal(rule, "127.0.0.1/32");
	assert_false(allow_special(r, "127.0.0.2", 80));
	/* an IPv4-mapped address is its IPv4 one */
	assert_true(allow_special(r, "::ffff:127.0.0.1", 80));
	/* a NAT64 address opens to an IPv6 entry inside the image of the range only */
	assert_false(allow_special(r, "64:ff9b::7f00:1", 80));
	aks_netrules_free(r);
	r = RULES("64:ff9b::7f00:1", "64:ff9b::/96");
	assert_true(allow_special(r, "64:ff9b::7f00:1", 80));
	assert_false(allow_special(r, "64:ff9b::7f00:2", 80));
	aks_netrules_free(r);
	r = RULES("2002:a00::/24");
	assert_true(allow_special(r, "2002:a01:203::1", 80));
	assert_false(allow_special(r, "2002:c0a8:101::1", 80));
	aks_netrules_free(r);

	/* a private range opens itself, not another */
	r = RULES("10.0.0.0/8");
	assert_true(allow_special(r, "10.9.9.9", 80));
	assert_false(allow_special(r, "192.168.1.1", 80));
	assert_false(allow_special(r, "172.16.0.1", 80));
	aks_netrules_free(r);
	r = RULES("10.1.2.3");
	assert_true(allow_special(r, "10.1.2.3", 80));
	assert_false(allow_special(r, "10.1.2.4", 80));
	aks_netrules_free(r);
	/* larger than the range: opens nothing in it */
	r = RULES("10.0.0.0/7", "172.0.0.0/8", "192.168.0.0/15");
	assert_false(allow_special(r, "10.9.9.9", 80));
	assert_false(allow_special(r, "172.16.0.1", 80));
	assert_false(allow_special(r, "192.168.1.1", 80));
	aks_netrules_free(r);

	/* the metadata addresses: only their own /32 (or /128) */
	r = RULES("169.254.0.0/16", "100.64.0.0/10", "fc00::/7");
	assert_true(allow_special(r, "169.254.1.1", 80));
	assert_false(allow_special(r, "169.254.169.254", 80));
	assert_false(allow_special(r, "169.254.170.2", 80));
	assert_true(allow_special(r, "100.64.0.1", 80));
	assert_false(allow_special(r, "100.100.100.200", 80));
	assert_true(allow_special(r, "fd00::1", 80));
	assert_false(allow_special(r, "fd00:ec2::254", 80));
	aks_netrules_free(r);
	r = RULES("169.254.169.254/32", "fd00:ec2::254");
	assert_true(allow_special(r, "169.254.169.254", 80));
	assert_true(allow_special(r, "fd00:ec2::254", 80));
	assert_false(allow_special(r, "169.254.169.253", 80));
	aks_netrules_free(r);

	/* ports */
	r = RULES("127.0.0.1/32:8080", "[::1]:8080");
	assert_true(allow_special(r, "127.0.0.1", 8080));
	assert_false(allow_special(r, "127.0.0.1", 80));
	assert_true(allow_special(r, "::1", 8080));
	assert_false(allow_special(r, "::1", 80));
	aks_netrules_free(r);

	/* a domain entry opens no address */
	r = RULES("localhost", "*.internal.example");
	assert_false(allow_special(r, "127.0.0.1", 80));
	aks_netrules_free(r);
}

/* ---- names ---- */

static void test_normalize(void **state)
{
	(void)state;
	static const struct {
		const char *in, *out; /* NULL: refused */
	} cases[] = {
	    {"Pypi.ORG.", "pypi.org"},
	    {"localhost", "localhost"},
	    {"xn--bcher-kva.de", "xn--bcher-kva.de"},
	    {"10.0.0.1", "10.0.0.1"},
	    {"10.0.0.1.", "10.0.0.1"},
	    {"2001:DB8:0::1", "2001:db8::1"},
	    {"[2001:db8::1]", "2001:db8::1"},
	    {"::FFFF:10.0.0.1", "::ffff:10.0.0.1"},
	    {"", NULL},
	    {".", NULL},
	    {"a..b", NULL},
	    {"pypi.org..", NULL},
	    {"-a.b", NULL},
	    {"a_b.c", NULL},
	    {"b\xc3\xbc"
	     "cher.de",
	     NULL},
	    {"pypi.org ", NULL},
	    {"127.1", NULL},
	    {"0x7f000001", NULL},
	    {"2130706433", NULL},
	    {"010.0.0.1", NULL},
	    {"1.2.3", NULL},
	    {"example.123", NULL},
	    {"[10.0.0.1]", NULL},
	    {"[pypi.org]", NULL},
	    {"fe80::1%eth0", NULL},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char out[256] = "x";
		int rc = aks_netname_normalize(cases[i].in, out, sizeof(out));
		if (!cases[i].out && rc == 0)
			fail_msg("'%s' accepted as '%s'", cases[i].in, out);
		if (cases[i].out && (rc != 0 || strcmp(out, cases[i].out) != 0))
			fail_msg("'%s': %d '%s', wanted '%s'", cases[i].in, rc, out, cases[i].out);
	}
	char small[8];
	assert_int_equal(aks_netname_normalize("pypi.org", small, sizeof(small)), -1);
	assert_int_equal(aks_netname_normalize("pypi.or", small, sizeof(small)), 0);
	assert_string_equal(small, "pypi.or");
	assert_int_equal(aks_netname_normalize(NULL, small, sizeof(small)), -1);
}

/* ---- the test name map ---- */

static void test_netmap(void **state)
{
	(void)state;
	aks_netmap *m = NULL;
	char msg[256] = "";
	assert_int_equal(aks_netmap_parse("allowed.test=127.0.0.1,allowed.test=::1,"
	                                  "Other.Test.=[2001:db8::5],localhost=10.1.1.1",
	                                  &m, msg, sizeof(msg)),
	                 0);
	struct sockaddr_storage out[4];
	size_t n = 99;
	/* several addresses for one name, in order, with the port */
	assert_int_equal(aks_netresolve(m, "allowed.test", 8443, out, 4, &n, msg, sizeof(msg)), 0);
	assert_int_equal(n, 2);
	const struct sockaddr_in *in = (const struct sockaddr_in *)&out[0];
	const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&out[1];
	assert_int_equal(in->sin_family, AF_INET);
	assert_int_equal(ntohs(in->sin_port), 8443);
	assert_int_equal(ntohl(in->sin_addr.s_addr), 0x7f000001);
	assert_int_equal(in6->sin6_family, AF_INET6);
	assert_int_equal(ntohs(in6->sin6_port), 8443);
	assert_true(IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr));
	/* at most max */
	assert_int_equal(aks_netresolve(m, "allowed.test", 80, out, 1, &n, msg, sizeof(msg)), 0);
	assert_int_equal(n, 1);
	/* names normalized on both sides */
	assert_int_equal(aks_netresolve(m, "OTHER.test.", 80, out, 4, &n, msg, sizeof(msg)), 0);
	assert_int_equal(n, 1);
	assert_string_equal(aks_netaddr_special(SA(out[0])), "documentation");
	/* the map wins over the resolver: localhost is 10.1.1.1 only */
	assert_int_equal(aks_netresolve(m, "localhost", 80, out, 4, &n, msg, sizeof(msg)), 0);
	assert_int_equal(n, 1);
	in = (const struct sockaddr_in *)&out[0];
	assert_int_equal(ntohl(in->sin_addr.s_addr), 0x0a010101);
	aks_netmap_free(m);

	/* NULL and "" are empty maps */
	assert_int_equal(aks_netmap_parse(NULL, &m, msg, sizeof(msg)), 0);
	aks_netmap_free(m);
	assert_int_equal(aks_netmap_parse("", &m, msg, sizeof(msg)), 0);
	aks_netmap_free(m);

	static const struct {
		const char *spec, *says;
	} bad[] = {
	    {"noequals", "'noequals' is not name=address"},
	    {"a.test=127.0.0.1,", "'' is not name=address"},
	    {"a.test=", "'a.test=' does not map to an IPv4 or IPv6 address"},
	    {"=127.0.0.1", "'=127.0.0.1' does not map a host name"},
	    {"a.test=pypi.org", "does not map to an IPv4 or IPv6 address"},
	    {"a.test=300.1.1.1", "does not map to an IPv4 or IPv6 address"},
	    {"10.0.0.1=127.0.0.1", "does not map a host name"},
	    {"a..b=127.0.0.1", "does not map a host name"},
	    {"ok.test=::1,a\x01=::1", "'a\\x01=::1' does not map a host name"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		m = (aks_netmap *)1;
		if (aks_netmap_parse(bad[i].spec, &m, msg, sizeof(msg)) != -1)
			fail_msg("accepted: %s", bad[i].spec);
		assert_null(m);
		if (!strstr(msg, bad[i].says))
			fail_msg("%s: %s\n   wanted: %s", bad[i].spec, msg, bad[i].says);
	}
}

/* An IP literal resolves to itself, without the resolver; a name that is not one (or an
 * address in a form inet_aton would read) is refused before any lookup. */
static void test_resolve(void **state)
{
	(void)state;
	struct sockaddr_storage out[8];
	size_t n = 99;
	char msg[256];
	assert_int_equal(aks_netresolve(NULL, "127.0.0.1", 8080, out, 8, &n, msg, sizeof(msg)), 0);
	assert_int_equal(n, 1);
	const struct sockaddr_in *in = (const struct sockaddr_in *)&out[0];
	assert_int_equal(in->sin_family, AF_INET);
	assert_int_equal(ntohs(in->sin_port), 8080);
	assert_int_equal(ntohl(in->sin_addr.s_addr), 0x7f000001);
	assert_int_equal(aks_netresolve(NULL, "[::1]", 443, out, 8, &n, msg, sizeof(msg)), 0);
	assert_int_equal(n, 1);
	assert_int_equal(out[0].ss_family, AF_INET6);
	assert_int_equal(aks_netresolve(NULL, "::1", 443, out, 0, &n, msg, sizeof(msg)), 0);
	assert_int_equal(n, 0);
	assert_int_equal(aks_netresolve(NULL, "0x7f000001", 80, out, 8, &n, msg, sizeof(msg)), -1);
	assert_string_equal(msg, "cannot resolve '0x7f000001': not a host name or IP address");
	assert_int_equal(aks_netresolve(NULL, "a..b", 80, out, 8, &n, msg, sizeof(msg)), -1);
	assert_int_equal(n, 0);
	assert_int_equal(aks_netresolve(NULL, "a\nb", 80, out, 8, &n, msg, sizeof(msg)), -1);
	assert_string_equal(msg, "cannot resolve 'a\\x0ab': not a host name or IP address");
	/* through the resolver: localhost is a loopback address wherever it resolves */
	int rc = aks_netresolve(NULL, "localhost", 5432, out, 8, &n, msg, sizeof(msg));
	if (rc == 0) {
		assert_true(n >= 1);
		for (size_t i = 0; i < n; i++) {
			assert_string_equal(aks_netaddr_special(SA(out[i])), "loopback");
			unsigned port = out[i].ss_family == AF_INET
			                    ? ntohs(((struct sockaddr_in *)&out[i])->sin_port)
			                    : ntohs(((struct sockaddr_in6 *)&out[i])->sin6_port);
			assert_int_equal(port, 5432);
		}
	} else {
		assert_non_null(strstr(msg, "cannot resolve 'localhost': "));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_entry_forms),   cmocka_unit_test(test_entry_errors),
	    cmocka_unit_test(test_parse_lists),   cmocka_unit_test(test_match_names),
	    cmocka_unit_test(test_match_addrs),   cmocka_unit_test(test_special_ranges),
	    cmocka_unit_test(test_allow_special), cmocka_unit_test(test_normalize),
	    cmocka_unit_test(test_netmap),        cmocka_unit_test(test_resolve),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
