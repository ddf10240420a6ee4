/*
 * plugins/common/netrule.c - network_allow entries as egress rules, the special address
 * ranges and the test name map (aks_netrule.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aks_netrule.h"
#include "aks_text.h"

#define NAME_MAX_LEN 253 /* a domain's text, without the trailing dot */
#define QUOTE_MAX    80  /* bytes of an entry quoted in a message */

enum rule_kind { RULE_NAME, RULE_WILDCARD, RULE_CIDR };

struct rule {
	enum rule_kind kind;
	unsigned port;               /* 0: every port */
	char name[NAME_MAX_LEN + 1]; /* RULE_NAME: the name; RULE_WILDCARD: the suffix */
	int family;                  /* RULE_CIDR: AF_INET or AF_INET6 */
	unsigned char addr[16];      /* RULE_CIDR: the network, host bits clear */
	unsigned bits;               /* RULE_CIDR: the prefix length */
	char *text;                  /* the entry as given */
};

struct aks_netrules {
	size_t count;
	struct rule *rules;
};

/* ---- characters (ASCII, whatever the locale) ---- */

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static char lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

static size_t count_char(const char *s, char c)
{
	size_t n = 0;
	for (; *s; s++)
		n += *s == c;
	return n;
}

/* ---- messages ---- */

/* s[0..len) escaped for a message, cut at QUOTE_MAX bytes with "..." after. */
static void quote(char *dst, size_t cap, const char *s, size_t len)
{
	size_t take = len > QUOTE_MAX ? QUOTE_MAX : len;
	size_t n = aks__text_printable(dst, cap, s, take);
	if (take < len && n + 4 <= cap)
		memcpy(dst + n, "...", 4);
}

/* buf := "'ENTRY' " and the rest; a fixed text when there is no buffer. Returns the message. */
static const char *say(char *buf, size_t len, const char *entry, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static const char *say(char *buf, size_t len, const char *entry, const char *fmt, ...)
{
	if (!buf || !len)
		return "is not a valid network_allow entry";
	char q[QUOTE_MAX * 4 + 8], rest[512];
	quote(q, sizeof(q), entry, strlen(entry));
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rest, sizeof(rest), fmt, ap);
	va_end(ap);
	snprintf(buf, len, "'%s' %s", q, rest);
	return buf;
}

/* ---- names ---- */

/*
 * Why s[0..len) is not a host name, or NULL with its lowercase form in out (at least
 * NAME_MAX_LEN + 1 bytes): LDH labels of 1 to 63 characters, at most 253 in all, one
 * trailing dot dropped. The reason is a phrase to follow "it" ("has an empty label").
 */
static const char *name_problem(const char *s, size_t len, char *out, char *why, size_t whylen)
{
	if (len && s[len - 1] == '.')
		len--;
	if (!len)
		return "has no label";
	if (len > NAME_MAX_LEN)
		return "is longer than 253 characters, the most a domain has";
	size_t label = 0;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (c == '.') {
			if (!label)
				return "has an empty label";
			if (s[i - 1] == '-')
				return "has a label that ends with '-'";
			label = 0;
		} else if (is_alpha(c) || is_digit(c) || c == '-') {
			if (c == '-' && !label)
				return "has a label that starts with '-'";
			if (++label > 63)
				return "has a label longer than 63 characters";
		} else {
			unsigned char u = (unsigned char)c;
			if (u > 0x20 && u < 0x7f)
				snprintf(why, whylen,
				         "has '%c', which no host name holds (letters, digits, '-' "
				         "and '.' only)",
				         c);
			else
				snprintf(why, whylen,
				         "has the byte 0x%02x, which no host name holds (letters, "
				         "digits, '-' and '.' only)",
				         u);
			return why;
		}
		out[i] = lower(c);
	}
	if (!label)
		return "has an empty label";
	if (s[len - 1] == '-')
		return "has a label that ends with '-'";
	out[len] = '\0';
	return NULL;
}

/* Whether a valid name's last label is all digits: no domain's is, so it is an address. */
static bool numeric_last_label(const char *name)
{
	const char *last = strrchr(name, '.');
	last = last ? last + 1 : name;
	return last[strspn(last, "0123456789")] == '\0';
}

/* Whether inet_aton() reads name as an address (127.1, 0x7f000001, 010.0.0.1): the
 * resolver would, so it is not a name. a gets what it reads. */
static bool aton_reads(const char *name, struct in_addr *a)
{
	return inet_aton(name, a) != 0;
}

/* ---- addresses ---- */

/* s[0..len) as an IPv4 dotted quad or an IPv6 address (inet_pton, strict): its family, or 0. */
static int parse_ip(const char *s, size_t len, unsigned char a[16])
{
	char t[64];
	memset(a, 0, 16);
	if (!len || len >= sizeof(t))
		return 0;
	memcpy(t, s, len);
	t[len] = '\0';
	if (inet_pton(AF_INET, t, a) == 1)
		return AF_INET;
	if (inet_pton(AF_INET6, t, a) == 1)
		return AF_INET6;
	memset(a, 0, 16);
	return 0;
}

static const unsigned char mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

/* An IPv4-mapped IPv6 address (a prefix of at least 96 bits when bits is not NULL) as its
 * IPv4 one; the family it is then. */
static int unmap(int family, unsigned char a[16], unsigned *bits)
{
	if (family != AF_INET6 || memcmp(a, mapped_prefix, 12) != 0 || (bits && *bits < 96))
		return family;
	memmove(a, a + 12, 4);
	memset(a + 4, 0, 12);
	if (bits)
		*bits -= 96;
	return AF_INET;
}

/* Whether a's first bits bits equal net's. */
static bool in_prefix(const unsigned char *a, const unsigned char *net, unsigned bits)
{
	unsigned whole = bits / 8, rest = bits % 8;
	if (memcmp(a, net, whole) != 0)
		return false;
	if (!rest)
		return true;
	unsigned char mask = (unsigned char)(0xff << (8 - rest));
	return (a[whole] & mask) == (net[whole] & mask);
}

/* Clears a's bits after the first bits (of 16 bytes). */
static void clear_host_bits(unsigned char a[16], unsigned bits)
{
	for (unsigned i = 0; i < 16; i++) {
		unsigned keep = bits > i * 8 ? bits - i * 8 : 0;
		if (keep < 8)
			a[i] &= (unsigned char)(0xff << (8 - keep));
	}
}

/* The text of an entry for that network, as the user would write it. */
static void cidr_text(char *out, size_t cap, int family, const unsigned char *a, unsigned bits,
                      unsigned port)
{
	char s[INET6_ADDRSTRLEN] = "";
	inet_ntop(family, a, s, sizeof(s));
	if (!port)
		snprintf(out, cap, "%s/%u", s, bits);
	else if (family == AF_INET)
		snprintf(out, cap, "%s/%u:%u", s, bits, port);
	else
		snprintf(out, cap, "[%s/%u]:%u", s, bits, port);
}

/* The address of sa, IPv4-mapped made IPv4: its family, or 0. */
static int addr_of(const struct sockaddr *sa, unsigned char a[16])
{
	memset(a, 0, 16);
	if (!sa)
		return 0;
	if (sa->sa_family == AF_INET) {
		struct sockaddr_in in;
		memcpy(&in, sa, sizeof(in));
		memcpy(a, &in.sin_addr, 4);
		return AF_INET;
	}
	if (sa->sa_family == AF_INET6) {
		struct sockaddr_in6 in6;
		memcpy(&in6, sa, sizeof(in6));
		memcpy(a, &in6.sin6_addr, 16);
		return unmap(AF_INET6, a, NULL);
	}
	return 0;
}

/* ---- entries ---- */

/* s[0..len) as a port, 1 to 65535. */
static bool parse_port(const char *s, size_t len, unsigned *port)
{
	unsigned v = 0;
	if (!len || len > 5)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (!is_digit(s[i]))
			return false;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v < 1 || v > 65535)
		return false;
	*port = v;
	return true;
}

/* s[0..len) as a prefix length, 0 to max. */
static bool parse_bits(const char *s, size_t len, unsigned max, unsigned *bits)
{
	unsigned v = 0;
	if (!len || len > 3)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (!is_digit(s[i]))
			return false;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v > max)
		return false;
	*bits = v;
	return true;
}

/* Whether s[0..len), which is no address, was meant as one: it holds a ':', only digits and
 * dots, or inet_aton reads it. */
static bool meant_as_address(const char *s, size_t len)
{
	char t[64];
	struct in_addr a;
	if (memchr(s, ':', len))
		return true;
	size_t i = 0;
	while (i < len && (is_digit(s[i]) || s[i] == '.'))
		i++;
	if (i == len)
		return true;
	if (len >= sizeof(t))
		return false;
	memcpy(t, s, len);
	t[len] = '\0';
	return aton_reads(t, &a);
}

/* The message for s[0..len) meant as an address but not one, in entry e. */
static const char *address_problem(const char *e, const char *s, size_t len, char *buf, size_t blen)
{
	char q[QUOTE_MAX * 4 + 8], part[QUOTE_MAX * 4 + 32], t[64], read[INET_ADDRSTRLEN] = "";
	struct in_addr a;
	quote(q, sizeof(q), s, len);
	/* "is ..." when the part is the whole entry, "has 'part', which is ..." otherwise */
	bool whole = s == e && !e[len];
	if (whole)
		snprintf(part, sizeof(part), "is");
	else
		snprintf(part, sizeof(part), "has '%s', which is", q);
	if (memchr(s, ':', len))
		return say(buf, blen, e,
		           "%s not an IPv6 address (an IPv6 entry with a port is written in "
		           "brackets: [2001:db8::1]:443)",
		           part);
	if (len < sizeof(t)) {
		memcpy(t, s, len);
		t[len] = '\0';
		if (aton_reads(t, &a)) {
			inet_ntop(AF_INET, &a, read, sizeof(read));
			return say(
			    buf, blen, e,
			    "%s an IPv4 address in a non-standard form (the resolver reads it "
			    "as %s): write a dotted quad, four decimal numbers 0 to 255 "
			    "without leading zeros",
			    part, read);
		}
	}
	return say(buf, blen, e,
	           "%s not an IPv4 address (a dotted quad: four decimal numbers 0 to 255 without "
	           "leading zeros), and no domain's last label is all digits",
	           part);
}

static const char *entry_problem(const char *e, struct rule *r, char *buf, size_t len);

/* What to suggest instead of e: s[0..n) with one trailing dot dropped (the same name, and the
 * message ends without a period), into out, when that is itself a valid entry and short
 * enough to show whole; false otherwise (a wrong or cut suggestion is worse than none, and
 * "a.." would leave "a.", a valid name that would end the message with a period). */
static bool suggestion(const char *s, size_t n, char *out, size_t cap)
{
	struct rule r;
	if (n && s[n - 1] == '.')
		n--;
	if (!n || s[n - 1] == '.' || n > QUOTE_MAX || n >= cap)
		return false;
	memcpy(out, s, n);
	out[n] = '\0';
	return !entry_problem(out, &r, NULL, 0);
}

/* What to suggest for host[0..hlen) with :port[0..plen) when port is not NULL (see
 * suggestion()): into out. */
static bool suggest_host_port(const char *host, size_t hlen, const char *port, size_t plen,
                              char *out, size_t cap)
{
	char t[QUOTE_MAX + 2];
	if (hlen + (port ? plen + 1 : 0) >= sizeof(t))
		return false;
	memcpy(t, host, hlen);
	size_t n = hlen;
	if (port) {
		t[n++] = ':';
		memcpy(t + n, port, plen);
		n += plen;
	}
	t[n] = '\0';
	return suggestion(t, n, out, cap);
}

/* An entry with a path; e[0..keep) is what comes before it. */
static const char *has_path(char *buf, size_t len, const char *e, size_t keep)
{
	char s[QUOTE_MAX + 1];
	if (!suggestion(e, keep, s, sizeof(s)))
		return say(buf, len, e, "has a path: an entry is a host, not a URL");
	return say(buf, len, e, "has a path: an entry is a host, not a URL; give %s", s);
}

static const char *too_broad(char *buf, size_t len, const char *e)
{
	return say(buf, len, e,
	           "is too broad: a wildcard needs a suffix of at least two labels "
	           "(*.example.com)");
}

/* Why e is not an entry, or NULL with its rule in *r (not its text). */
static const char *entry_problem(const char *e, struct rule *r, char *buf, size_t len)
{
	char why[200];
	memset(r, 0, sizeof(*r));
	size_t n = strlen(e);
	if (!n) {
		if (!buf || !len)
			return "an empty entry";
		snprintf(buf, len,
		         "an empty entry: give a domain (pypi.org), a wildcard (*.example.com), or "
		         "an address or CIDR (10.0.0.0/8)");
		return buf;
	}
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)e[i] >= 0x80)
			return say(
			    buf, len, e,
			    "is not ASCII: give an internationalized domain name in its punycode "
			    "(IDNA) form, with xn-- labels (idn2 prints it)");
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)e[i];
		if (c == ' ' || (c >= '\t' && c <= '\r'))
			return say(buf, len, e,
			           "holds whitespace: an entry is one domain, wildcard, address or "
			           "CIDR, with nothing around it");
		if (c < 0x20 || c == 0x7f)
			return say(buf, len, e, "holds a control character");
	}
	const char *scheme = strstr(e, "://");
	if (scheme) {
		const char *h = scheme + 3;
		size_t hl = strcspn(h, "/?#");
		const char *at = memrchr(h, '@', hl);
		if (at) {
			hl -= (size_t)(at + 1 - h);
			h = at + 1;
		}
		char s[QUOTE_MAX + 1];
		if (suggestion(h, hl, s, sizeof(s)))
			return say(buf, len, e,
			           "is a URL: drop the scheme and give the host alone (%s)", s);
		return say(buf, len, e, "is a URL: an entry is a host, without a scheme");
	}

	/* host[0..hlen) and port[0..plen) */
	const char *host = e, *port = NULL;
	size_t hlen = n, plen = 0;
	bool bracket = false;
	if (e[0] == '[') {
		const char *close = strchr(e, ']');
		if (!close)
			return say(buf, len, e, "has '[' without ']'");
		bracket = true;
		host = e + 1;
		hlen = (size_t)(close - host);
		if (close[1] == ':') {
			port = close + 2;
			plen = strlen(port);
		} else if (close[1]) {
			return say(buf, len, e,
			           "has text after ']': only :port may follow an IPv6 address in "
			           "brackets");
		}
	} else {
		size_t colons = count_char(e, ':');
		if (colons >= 2 && strchr(e, '%'))
			return say(buf, len, e,
			           "has an IPv6 zone index (%%...): an entry names no network "
			           "interface");
		if (colons >= 2 && e[strspn(e, "0123456789abcdefABCDEF:./")] != '\0')
			return say(
			    buf, len, e,
			    "has more than one ':' (an IPv6 address with a port is written in "
			    "brackets: [2001:db8::1]:443)");
		if (colons == 1) {
			const char *c = strchr(e, ':');
			hlen = (size_t)(c - e);
			port = c + 1;
			plen = strlen(port);
		}
	}
	if (port && memchr(port, '/', plen))
		return has_path(buf, len, e, (size_t)(port + strcspn(port, "/") - e));
	if (port && !plen)
		return say(buf, len, e,
		           "has an empty port: give 1 to 65535 after the ':', or no ':' for every "
		           "port");
	if (port && !parse_port(port, plen, &r->port)) {
		char q[QUOTE_MAX * 4 + 8];
		quote(q, sizeof(q), port, plen);
		return say(buf, len, e, "has a bad port '%s': a port is 1 to 65535", q);
	}

	/* an address or CIDR */
	const char *slash = memchr(host, '/', hlen);
	size_t alen = slash ? (size_t)(slash - host) : hlen;
	unsigned char a[16];
	int family = parse_ip(host, alen, a);
	if (slash && !family) {
		if (alen && meant_as_address(host, alen))
			return address_problem(e, host, alen, buf, len);
		if (bracket)
			return say(buf, len, e,
			           "has brackets, which hold an IPv6 address or CIDR only");
		return has_path(buf, len, e, (size_t)(slash - e));
	}
	if (bracket && family != AF_INET6) {
		char give[QUOTE_MAX + 1];
		if (family == AF_INET &&
		    suggest_host_port(host, hlen, port, plen, give, sizeof(give)))
			return say(buf, len, e,
			           "has brackets, which are for IPv6 addresses only: give %s",
			           give);
		if (family == AF_INET)
			return say(buf, len, e, "has brackets, which are for IPv6 addresses only");
		return say(buf, len, e, "has brackets, which hold an IPv6 address or CIDR only");
	}
	if (family) {
		unsigned max = family == AF_INET ? 32 : 128, bits = max;
		if (slash) {
			const char *p = slash + 1;
			size_t pl = hlen - alen - 1;
			if (!parse_bits(p, pl, max, &bits)) {
				char q[QUOTE_MAX * 4 + 8];
				quote(q, sizeof(q), p, pl);
				bool port_like = family == AF_INET6 && memchr(p, ':', pl);
				return say(buf, len, e,
				           "has a bad CIDR prefix '/%s': an %s prefix is 0 to %u%s",
				           q, family == AF_INET ? "IPv4" : "IPv6", max,
				           port_like ? " (an IPv6 CIDR with a port is written in "
				                       "brackets: [2001:db8::/32]:443)"
				                     : "");
			}
		}
		family = unmap(family, a, &bits);
		unsigned char net[16];
		memcpy(net, a, 16);
		clear_host_bits(net, bits);
		if (memcmp(net, a, 16) != 0) {
			char want[96];
			cidr_text(want, sizeof(want), family, net, bits, r->port);
			return say(buf, len, e, "has host bits set: did you mean %s?", want);
		}
		r->kind = RULE_CIDR;
		r->family = family;
		memcpy(r->addr, a, 16);
		r->bits = bits;
		return NULL;
	}
	if (memchr(host, ':', hlen))
		return address_problem(e, host, hlen, buf, len);
	if (hlen > 1 && host[hlen - 1] == '.' && parse_ip(host, hlen - 1, a)) {
		char give[QUOTE_MAX + 1];
		if (suggest_host_port(host, hlen - 1, port, plen, give, sizeof(give)))
			return say(buf, len, e, "has a dot after an address: give %s", give);
		return say(buf, len, e, "has a dot after an address");
	}

	/* a domain or a wildcard */
	bool wild = false;
	if (host[0] == '*') {
		if (hlen == 1)
			return too_broad(buf, len, e);
		if (host[1] != '.')
			return say(buf, len, e,
			           "has a '*' that is not a whole label: a wildcard is written "
			           "*.example.com");
		wild = true;
		host += 2;
		hlen -= 2;
	}
	if (memchr(host, '*', hlen))
		return say(buf, len, e,
		           "has a '*' that is not the whole first label: a wildcard is written "
		           "*.example.com");
	const char *bad = name_problem(host, hlen, r->name, why, sizeof(why));
	if (bad)
		return say(buf, len, e, "is not a valid %s: it %s", wild ? "wildcard" : "domain",
		           bad);
	struct in_addr ignored;
	bool numeric = numeric_last_label(r->name) || aton_reads(r->name, &ignored);
	if (numeric && wild)
		return say(buf, len, e,
		           "is not a valid wildcard: its suffix is not a domain (no domain's last "
		           "label is all digits; addresses are matched by CIDR: 10.0.0.0/8)");
	if (numeric)
		return address_problem(e, host, hlen && host[hlen - 1] == '.' ? hlen - 1 : hlen,
		                       buf, len);
	if (wild && !strchr(r->name, '.'))
		return too_broad(buf, len, e);
	r->kind = wild ? RULE_WILDCARD : RULE_NAME;
	return NULL;
}

const char *aks_netrule_problem(const char *entry, char *buf, size_t len)
{
	struct rule r;
	if (!entry)
		return "no entry";
	return entry_problem(entry, &r, buf, len);
}

void aks_netrules_free(aks_netrules *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->count; i++)
		free(r->rules[i].text);
	free(r->rules);
	free(r);
}

int aks_netrules_parse(const char *const *entries, aks_netrules **out, size_t *bad, char *msg,
                       size_t msglen)
{
	size_t count = 0;
	*out = NULL;
	while (entries && entries[count])
		count++;
	aks_netrules *r = calloc(1, sizeof(*r));
	if (r && count && !(r->rules = calloc(count, sizeof(*r->rules)))) {
		free(r);
		r = NULL;
	}
	for (size_t i = 0; r && i < count; i++) {
		const char *why = entry_problem(entries[i], &r->rules[i], msg, msglen);
		if (why) {
			if (msg && msglen && why != msg)
				snprintf(msg, msglen, "%s", why);
			if (bad)
				*bad = i;
			aks_netrules_free(r);
			return -1;
		}
		if (!(r->rules[i].text = strdup(entries[i]))) {
			aks_netrules_free(r);
			r = NULL;
			break;
		}
		r->count = i + 1;
	}
	if (!r) {
		if (bad)
			*bad = count;
		if (msg && msglen)
			snprintf(msg, msglen, "out of memory");
		return -1;
	}
	*out = r;
	return 0;
}

size_t aks_netrules_count(const aks_netrules *r)
{
	return r ? r->count : 0;
}

/* ---- matching ---- */

int aks_netname_normalize(const char *in, char *out, size_t cap)
{
	unsigned char a[16];
	char text[INET6_ADDRSTRLEN], name[NAME_MAX_LEN + 1], why[200];
	if (!in || !out || !cap)
		return -1;
	size_t len = strlen(in);
	int family = 0;
	if (len >= 2 && in[0] == '[' && in[len - 1] == ']') {
		if ((family = parse_ip(in + 1, len - 2, a)) != AF_INET6)
			return -1;
	} else if (!(family = parse_ip(in, len, a)) && len && in[len - 1] == '.' &&
	           parse_ip(in, len - 1, a) == AF_INET) {
		family = AF_INET;
	}
	const char *result = text;
	if (family) {
		if (!inet_ntop(family, a, text, sizeof(text)))
			return -1;
	} else {
		struct in_addr ignored;
		if (name_problem(in, len, name, why, sizeof(why)) || numeric_last_label(name) ||
		    aton_reads(name, &ignored))
			return -1;
		result = name;
	}
	size_t rl = strlen(result);
	if (rl >= cap)
		return -1;
	memcpy(out, result, rl + 1);
	return 0;
}

static bool port_matches(const struct rule *r, unsigned port)
{
	return port >= 1 && port <= 65535 && (!r->port || r->port == port);
}

bool aks_netrules_allow_name(const aks_netrules *r, const char *name, unsigned port,
                             const char **rule)
{
	char n[NAME_MAX_LEN + 1];
	unsigned char a[16];
	if (!r || !name || aks_netname_normalize(name, n, sizeof(n)) != 0 || strchr(n, ':') ||
	    parse_ip(n, strlen(n), a))
		return false;
	size_t nl = strlen(n);
	for (size_t i = 0; i < r->count; i++) {
		const struct rule *x = &r->rules[i];
		if (!port_matches(x, port))
			continue;
		size_t sl = strlen(x->name);
		bool hit = x->kind == RULE_NAME
		               ? strcmp(n, x->name) == 0
		               : x->kind == RULE_WILDCARD && nl > sl + 1 && n[nl - sl - 1] == '.' &&
		                     strcmp(n + nl - sl, x->name) == 0;
		if (hit) {
			if (rule)
				*rule = x->text;
			return true;
		}
	}
	return false;
}

bool aks_netrules_allow_addr(const aks_netrules *r, const struct sockaddr *sa, unsigned port,
                             const char **rule)
{
	unsigned char a[16];
	int family = addr_of(sa, a);
	if (!r || !family)
		return false;
	for (size_t i = 0; i < r->count; i++) {
		const struct rule *x = &r->rules[i];
		if (x->kind == RULE_CIDR && x->family == family && port_matches(x, port) &&
		    in_prefix(a, x->addr, x->bits)) {
			if (rule)
				*rule = x->text;
			return true;
		}
	}
	return false;
}

/* ---- special ranges ---- */

enum embed { EMBED_NONE, EMBED_NAT64, EMBED_6TO4 };

struct special {
	unsigned char net[16];
	unsigned bits;
	const char *label;
	enum embed embed; /* an IPv6 range that is what the IPv4 address it holds is */
};

/* First match wins: the metadata addresses before their link-local and shared ranges, the
 * specific before the general. */
static const struct special special4[] = {
    {{169, 254, 169, 254}, 32, "metadata", EMBED_NONE},
    {{169, 254, 170, 2}, 32, "metadata", EMBED_NONE},
    {{100, 100, 100, 200}, 32, "metadata", EMBED_NONE},
    {{255, 255, 255, 255}, 32, "broadcast", EMBED_NONE},
    {{0, 0, 0, 0}, 32, "unspecified", EMBED_NONE},
    {{0, 0, 0, 0}, 8, "reserved", EMBED_NONE},
    {{10, 0, 0, 0}, 8, "private", EMBED_NONE},
    {{100, 64, 0, 0}, 10, "shared (CGNAT)", EMBED_NONE},
    {{127, 0, 0, 0}, 8, "loopback", EMBED_NONE},
    {{169, 254, 0, 0}, 16, "link-local", EMBED_NONE},
    {{172, 16, 0, 0}, 12, "private", EMBED_NONE},
    {{192, 0, 0, 0}, 24, "reserved", EMBED_NONE},
    {{192, 0, 2, 0}, 24, "documentation", EMBED_NONE},
    {{192, 88, 99, 0}, 24, "reserved", EMBED_NONE},
    {{192, 168, 0, 0}, 16, "private", EMBED_NONE},
    {{198, 18, 0, 0}, 15, "benchmarking", EMBED_NONE},
    {{198, 51, 100, 0}, 24, "documentation", EMBED_NONE},
    {{203, 0, 113, 0}, 24, "documentation", EMBED_NONE},
    {{224, 0, 0, 0}, 4, "multicast", EMBED_NONE},
    {{240, 0, 0, 0}, 4, "reserved", EMBED_NONE},
};

/* IPv4-mapped addresses never get here: they are IPv4 ones by then. */
static const struct special special6[] = {
    {{0xfd, 0x00, 0x0e, 0xc2, [14] = 0x02, [15] = 0x54}, 128, "metadata", EMBED_NONE},
    {{0}, 128, "unspecified", EMBED_NONE},
    {{[15] = 1}, 128, "loopback", EMBED_NONE},
    {{0x00, 0x64, 0xff, 0x9b}, 96, NULL, EMBED_NAT64},
    {{0x00, 0x64, 0xff, 0x9b, 0x00, 0x01}, 48, "reserved", EMBED_NONE},
    {{0}, 8, "reserved", EMBED_NONE},
    {{0x01, 0x00}, 64, "reserved", EMBED_NONE},
    {{0x20, 0x01, 0x0d, 0xb8}, 32, "documentation", EMBED_NONE},
    {{0x20, 0x01}, 23, "reserved", EMBED_NONE},
    {{0x20, 0x02}, 16, NULL, EMBED_6TO4},
    {{0x3f, 0xff}, 20, "documentation", EMBED_NONE},
    {{0xfc}, 7, "unique-local", EMBED_NONE},
    {{0xfe, 0x80}, 10, "link-local", EMBED_NONE},
    {{0xfe, 0xc0}, 10, "site-local", EMBED_NONE},
    {{0xff}, 8, "multicast", EMBED_NONE},
};

/* The special range address a (of family, IPv4-mapped made IPv4) lies in: its label, and
 * the range in net and *bits; NULL for an ordinary address. */
static const char *special_range(int family, const unsigned char *a, unsigned char net[16],
                                 unsigned *bits)
{
	if (family == AF_INET) {
		for (size_t i = 0; i < sizeof(special4) / sizeof(special4[0]); i++)
			if (in_prefix(a, special4[i].net, special4[i].bits)) {
				memcpy(net, special4[i].net, 16);
				*bits = special4[i].bits;
				return special4[i].label;
			}
		return NULL;
	}
	for (size_t i = 0; i < sizeof(special6) / sizeof(special6[0]); i++) {
		const struct special *s = &special6[i];
		if (!in_prefix(a, s->net, s->bits))
			continue;
		if (s->embed == EMBED_NONE) {
			memcpy(net, s->net, 16);
			*bits = s->bits;
			return s->label;
		}
		/* the embedded IPv4 address's range, placed where that address sits */
		size_t at = s->embed == EMBED_NAT64 ? 12 : 2;
		unsigned char v4net[16];
		unsigned v4bits;
		const char *label = special_range(AF_INET, a + at, v4net, &v4bits);
		if (!label)
			return NULL;
		memcpy(net, s->net, 16);
		memcpy(net + at, v4net, 4);
		*bits = s->bits + v4bits;
		return label;
	}
	static const unsigned char global[16] = {0x20};
	if (!in_prefix(a, global, 3)) {
		/* unassigned: the /3 the address is in lies wholly outside 2000::/3 */
		memset(net, 0, 16);
		net[0] = a[0] & 0xe0;
		*bits = 3;
		return "reserved";
	}
	return NULL;
}

const char *aks_netaddr_special(const struct sockaddr *sa)
{
	unsigned char a[16], net[16];
	unsigned bits;
	int family = addr_of(sa, a);
	return family ? special_range(family, a, net, &bits) : NULL;
}

bool aks_netrules_allow_special(const aks_netrules *r, const struct sockaddr *sa, unsigned port,
                                const char **rule)
{
	unsigned char a[16], net[16];
	unsigned bits;
	int family = addr_of(sa, a);
	if (!r || !family || !special_range(family, a, net, &bits))
		return false;
	for (size_t i = 0; i < r->count; i++) {
		const struct rule *x = &r->rules[i];
		if (x->kind == RULE_CIDR && x->family == family && port_matches(x, port) &&
		    in_prefix(a, x->addr, x->bits) && x->bits >= bits &&
		    in_prefix(x->addr, net, bits)) {
			if (rule)
				*rule = x->text;
			return true;
		}
	}
	return false;
}

/* ---- the test name map ---- */

struct map_item {
	char name[NAME_MAX_LEN + 1];
	int family;
	unsigned char addr[16];
};

struct aks_netmap {
	size_t count;
	struct map_item *items;
};

void aks_netmap_free(aks_netmap *m)
{
	if (!m)
		return;
	free(m->items);
	free(m);
}

static int map_fail(aks_netmap *m, char *msg, size_t msglen, const char *item, size_t len,
                    const char *what)
{
	aks_netmap_free(m);
	if (msg && msglen) {
		char q[QUOTE_MAX * 4 + 8];
		quote(q, sizeof(q), item, len);
		snprintf(msg, msglen, "'%s' %s", q, what);
	}
	return -1;
}

int aks_netmap_parse(const char *spec, aks_netmap **out, char *msg, size_t msglen)
{
	*out = NULL;
	size_t items = spec && *spec ? count_char(spec, ',') + 1 : 0;
	aks_netmap *m = calloc(1, sizeof(*m));
	if (!m || !(m->items = calloc(items ? items : 1, sizeof(*m->items)))) {
		free(m);
		if (msg && msglen)
			snprintf(msg, msglen, "out of memory");
		return -1;
	}
	const char *p = spec;
	for (size_t i = 0; i < items; i++) {
		size_t l = strcspn(p, ",");
		const char *eq = memchr(p, '=', l);
		if (!eq)
			return map_fail(m, msg, msglen, p, l, "is not name=address");
		char name[NAME_MAX_LEN + 2], norm[NAME_MAX_LEN + 1];
		size_t nl = (size_t)(eq - p);
		unsigned char a[16];
		if (nl >= sizeof(name))
			return map_fail(m, msg, msglen, p, l, "has a name that is too long");
		memcpy(name, p, nl);
		name[nl] = '\0';
		if (aks_netname_normalize(name, norm, sizeof(norm)) != 0 || strchr(norm, ':') ||
		    parse_ip(norm, strlen(norm), a))
			return map_fail(m, msg, msglen, p, l, "does not map a host name");
		const char *addr = eq + 1;
		size_t al = l - nl - 1;
		if (al >= 2 && addr[0] == '[' && addr[al - 1] == ']') {
			addr++;
			al -= 2;
		}
		struct map_item *it = &m->items[m->count];
		if (!(it->family = parse_ip(addr, al, it->addr)))
			return map_fail(m, msg, msglen, p, l,
			                "does not map to an IPv4 or IPv6 address");
		memcpy(it->name, norm, strlen(norm) + 1);
		m->count++;
		p += l + (p[l] == ',');
	}
	*out = m;
	return 0;
}

/* Sets the port of an AF_INET or AF_INET6 address. */
static void set_port(struct sockaddr_storage *ss, unsigned port)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
	else
		((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
}

static void fill(struct sockaddr_storage *ss, int family, const unsigned char *a, unsigned port)
{
	memset(ss, 0, sizeof(*ss));
	if (family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;
		in->sin_family = AF_INET;
		memcpy(&in->sin_addr, a, 4);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
		in6->sin6_family = AF_INET6;
		memcpy(&in6->sin6_addr, a, 16);
	}
	set_port(ss, port);
}

int aks_netresolve(const aks_netmap *m, const char *name, unsigned port,
                   struct sockaddr_storage *out, size_t max, size_t *n, char *msg, size_t msglen)
{
	char norm[NAME_MAX_LEN + 1], q[QUOTE_MAX * 4 + 8];
	unsigned char a[16];
	*n = 0;
	quote(q, sizeof(q), name ? name : "", name ? strlen(name) : 0);
	if (!name || aks_netname_normalize(name, norm, sizeof(norm)) != 0 || port > 65535) {
		if (msg && msglen)
			snprintf(msg, msglen, "cannot resolve '%s': %s", q,
			         port > 65535 ? "the port is above 65535"
			                      : "not a host name or IP address");
		return -1;
	}
	bool mapped = false;
	for (size_t i = 0; m && i < m->count; i++)
		if (strcmp(m->items[i].name, norm) == 0) {
			mapped = true;
			if (*n < max)
				fill(&out[(*n)++], m->items[i].family, m->items[i].addr, port);
		}
	if (mapped)
		return 0;
	int family = parse_ip(norm, strlen(norm), a);
	if (family) {
		if (max)
			fill(&out[(*n)++], family, a, port);
		return 0;
	}
	struct addrinfo hints, *res = NULL;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_ADDRCONFIG;
	int rc = getaddrinfo(norm, NULL, &hints, &res);
	if (rc != 0) {
		if (msg && msglen)
			snprintf(msg, msglen, "cannot resolve '%s': %s", q,
			         rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
		return -1;
	}
	for (const struct addrinfo *ai = res; ai && *n < max; ai = ai->ai_next) {
		if ((ai->ai_family != AF_INET && ai->ai_family != AF_INET6) ||
		    ai->ai_addrlen > sizeof(*out))
			continue;
		memset(&out[*n], 0, sizeof(*out));
		memcpy(&out[*n], ai->ai_addr, ai->ai_addrlen);
		set_port(&out[(*n)++], port);
	}
	freeaddrinfo(res);
	if (!*n && max) {
		if (msg && msglen)
			snprintf(msg, msglen, "cannot resolve '%s': no IPv4 or IPv6 address", q);
		return -1;
	}
	return 0;
}
