/*
 * plugins/common/agent/egress_decide.c - what the host allows through the egress proxy (see
 * aks_egress.h): the destination against `network_allow`, the addresses the host resolves
 * against the special ranges, and the first bytes against the destination asked for.
 * Pure but for name resolution, so the tests drive every rule without a socket.
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "aks_egress.h"
#include "aks_egress_inspect.h"

#include "agent/proto.h"

static void copy_rule(char *rule, size_t rulelen, const char *what)
{
	if (rule && rulelen)
		snprintf(rule, rulelen, "%s", what ? what : "");
}

static const char *addr_text(const struct sockaddr *sa, char *buf, size_t len)
{
	const void *p = sa->sa_family == AF_INET6
	                    ? (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr
	                    : (const void *)&((const struct sockaddr_in *)sa)->sin_addr;
	if (!inet_ntop(sa->sa_family, p, buf, (socklen_t)len))
		snprintf(buf, len, "?");
	return buf;
}

/* An IP literal as a socket address with the port, or false. */
static bool literal(const char *host, unsigned port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	struct sockaddr_in *in = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)port);
		return true;
	}
	if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		return true;
	}
	return false;
}

/* A special address passes only through a CIDR entry inside its range; otherwise why says
 * "<address>, a <range> address" for the caller to put in its sentence. */
static bool special_ok(const aks_netrules *rules, const struct sockaddr *sa, unsigned port,
                       const char **rule, char *why, size_t whylen)
{
	const char *special = aks_netaddr_special(sa);
	if (!special || aks_netrules_allow_special(rules, sa, port, rule))
		return true;
	char a[INET6_ADDRSTRLEN];
	snprintf(why, whylen, "%s, a%s %s address", addr_text(sa, a, sizeof(a)),
	         strchr("aeiou", special[0]) ? "n" : "", special);
	return false;
}

#define SPECIAL_RULE "only a network_allow CIDR entry inside that range allows it"

/* Host names compare without case and without one trailing dot. */
static bool same_name(const char *a, const char *b)
{
	char na[256], nb[256];
	if (aks_netname_normalize(a, na, sizeof(na)) < 0 ||
	    aks_netname_normalize(b, nb, sizeof(nb)) < 0)
		return false;
	return strcmp(na, nb) == 0;
}

uint32_t aks__egress_decide(const aks_netrules *rules, const aks_netmap *map, const char *host,
                            unsigned port, int kind, const uint8_t *head, size_t head_len,
                            struct sockaddr_storage *out, size_t max, size_t *n, char *rule,
                            size_t rulelen, char *why, size_t whylen)
{
	*n = 0;
	copy_rule(rule, rulelen, NULL);
	char name[256];
	if (port == 0 || port > 65535) {
		snprintf(why, whylen, "port %u is not a TCP port", port);
		return AKS_AGENT_NC_POLICY;
	}
	if (kind == AKS_AGENT_NET_HTTP) {
		/* The Host a plain request names is where it goes: it must be the URL's. */
		char hname[256];
		unsigned hport = 0;
		const char *what = NULL;
		int k = aks_egress_inspect(head, head_len, hname, sizeof(hname), &hport, &what);
		if (k != AKS_INSPECT_HTTP) {
			snprintf(why, whylen, "the request head cannot be read (%s)",
			         what ? what : "not HTTP");
			return AKS_AGENT_NC_POLICY;
		}
		if (!same_name(hname, host) || (hport ? hport : 80) != port) {
			snprintf(why, whylen, "the request's Host '%s' is not the URL's host %s:%u",
			         hname, host, port);
			return AKS_AGENT_NC_POLICY;
		}
	}
	struct sockaddr_storage ss;
	const char *matched = NULL;
	if (literal(host, port, &ss)) {
		/* A special address says so, whatever entries there are. */
		if (!aks_netaddr_special((struct sockaddr *)&ss) &&
		    !aks_netrules_allow_addr(rules, (struct sockaddr *)&ss, port, &matched)) {
			snprintf(why, whylen, "no network_allow entry allows %s port %u", host,
			         port);
			return AKS_AGENT_NC_POLICY;
		}
		char what[160];
		if (!special_ok(rules, (struct sockaddr *)&ss, port, &matched, what,
		                sizeof(what))) {
			/* "169.254.169.254, a metadata address" read as "... is a metadata address"
			 */
			const char *comma = strchr(what, ',');
			snprintf(why, whylen, "%.*s is%s; " SPECIAL_RULE,
			         comma ? (int)(comma - what) : (int)strlen(what), what,
			         comma ? comma + 1 : "");
			return AKS_AGENT_NC_POLICY;
		}
		copy_rule(rule, rulelen, matched);
		if (max) {
			out[0] = ss;
			*n = 1;
		}
		return 0;
	}
	if (aks_netname_normalize(host, name, sizeof(name)) < 0) {
		snprintf(why, whylen, "'%.200s' is not a host name or an IP address", host);
		return AKS_AGENT_NC_POLICY;
	}
	if (!aks_netrules_allow_name(rules, name, port, &matched)) {
		snprintf(why, whylen, "no network_allow entry allows %s port %u", name, port);
		return AKS_AGENT_NC_POLICY;
	}
	copy_rule(rule, rulelen, matched);
	struct sockaddr_storage found[16];
	size_t nfound = 0;
	char msg[300];
	if (aks_netresolve(map, name, port, found, sizeof(found) / sizeof(found[0]), &nfound, msg,
	                   sizeof(msg)) < 0 ||
	    nfound == 0) {
		snprintf(why, whylen, "%s", nfound == 0 && !msg[0] ? "no address" : msg);
		return AKS_AGENT_NC_RESOLVE;
	}
	/* Every address must pass: a name must not lead into a private range. */
	for (size_t i = 0; i < nfound; i++) {
		const char *special_rule = NULL;
		if (!special_ok(rules, (struct sockaddr *)&found[i], port, &special_rule, msg,
		                sizeof(msg))) {
			snprintf(why, whylen, "%s resolves to %s; " SPECIAL_RULE, name, msg);
			*n = 0;
			return AKS_AGENT_NC_POLICY;
		}
		if (*n < max)
			out[(*n)++] = found[i];
	}
	return 0;
}

int aks__egress_first_bytes(const char *target, unsigned port, const uint8_t *p, size_t n, bool eof,
                            char *why, size_t whylen)
{
	char name[256];
	unsigned hport = 0;
	const char *what = NULL;
	int k = aks_egress_inspect(p, n, name, sizeof(name), &hport, &what);
	struct sockaddr_storage ss;
	bool target_is_address = literal(target, port, &ss);
	switch (k) {
	case AKS_INSPECT_MORE:
		if (!eof)
			return 0;
		return 1; /* it ended before it said anything we could read: nothing to check */
	case AKS_INSPECT_TLS:
		/* An address target was allowed by a CIDR entry: what it serves is its business. */
		if (!name[0] || target_is_address || same_name(name, target))
			return 1;
		snprintf(why, whylen, "the TLS server name '%s' is not the destination %s", name,
		         target);
		return -1;
	case AKS_INSPECT_HTTP:
		if ((same_name(name, target) || (target_is_address && strcmp(name, target) == 0)) &&
		    (hport == 0 || hport == port))
			return 1;
		snprintf(why, whylen, "the HTTP Host '%s' is not the destination %s:%u", name,
		         target, port);
		return -1;
	case AKS_INSPECT_OTHER:
		return 1;
	default:
		snprintf(why, whylen, "the first bytes cannot be checked: %s",
		         what ? what : "malformed");
		return -1;
	}
}
