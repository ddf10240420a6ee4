/*
 * plugins/common/aks_netrule.h - a profile's network_allow entries as egress rules, and the
 * decisions the host makes with them for a proxied connection (issue 22). A sandbox has no
 * network of its own: a proxy inside it forwards each connection to the host, and the host
 * decides here, from the entries alone, whether the destination is allowed. Pure and libc
 * only, so the config loader, the host connector, the tests and the fuzz targets share one
 * reading of an entry.
 *
 * An entry is one of
 *   pypi.org, API.GitHub.com.   a domain: LDH labels of 1 to 63 characters, at most 253 in
 *                               all, matched without regard to case, one trailing dot
 *                               dropped; a single label (localhost) matches only itself
 *   *.github.com                every name strictly beneath the suffix (not github.com); the
 *                               suffix has at least two labels
 *   10.0.0.0/8, 2001:db8::/32   a CIDR, with no host bits set; a bare address is a /32 or
 *   192.168.1.5, ::1            /128; an IPv4-mapped IPv6 CIDR is read as its IPv4 one
 * each with an optional :port (1 to 65535; none: every port): pypi.org:443,
 * 10.0.0.0/8:5432, and an IPv6 entry with a port in brackets: [2001:db8::1]:443,
 * [2001:db8::/32]:443 (an IPv6 entry without brackets has no port).
 */
#ifndef AKS_COMMON_NETRULE_H
#define AKS_COMMON_NETRULE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

typedef struct aks_netrules aks_netrules;

/*
 * Parses every entry (NULL-terminated; entries NULL or empty: no entries, so nothing is
 * allowed). Returns 0 with *out set, or -1 with *bad (when not NULL) the index of the first
 * bad entry and msg (when not NULL) the message aks_netrule_problem() gives for it, or "out
 * of memory" with *bad the count. All or nothing: a list with one bad entry is refused whole,
 * because a rule silently dropped would be a hole or an outage nobody asked for.
 */
int aks_netrules_parse(const char *const *entries, aks_netrules **out, size_t *bad, char *msg,
                       size_t msglen);

/*
 * Why entry is not a network_allow entry, or NULL when it is one. The message (in buf, len
 * bytes; 512 is enough) quotes the entry, escaped when it holds control characters, says what
 * is wrong and, where it can tell, what was meant; it has no trailing period. The config
 * loader calls this for every entry so a mistake is reported at load with its file, line and
 * column, not when a sandbox first connects.
 */
const char *aks_netrule_problem(const char *entry, char *buf, size_t len);

void aks_netrules_free(aks_netrules *r);

/* How many rules r holds (0 for NULL). */
size_t aks_netrules_count(const aks_netrules *r);

/*
 * A destination name as the rules see it, in out (cap bytes; 256 is enough): a host name in
 * lowercase with one trailing dot dropped, or an IP literal in its canonical text (inet_ntop;
 * an IPv6 one may come in brackets). Returns 0, or -1 when in is neither, or out is too
 * small. A name whose last label is all digits, or that inet_aton() would read as an address
 * (127.1, 0x7f000001, 010.0.0.1), is refused: the resolver would turn it into an address
 * that no name rule was written for.
 */
int aks_netname_normalize(const char *in, char *out, size_t cap);

/*
 * Whether the destination NAME on port (1 to 65535) is allowed by a domain or wildcard entry
 * (never by a CIDR entry: the name is checked before it is resolved). name is normalized
 * again here, so case and one trailing dot do not matter; an IP literal or an invalid name is
 * never allowed. On allow, *rule (when rule is not NULL) points at the matching entry's text
 * as given, valid while r lives, for the log line that says why a connection was let through.
 */
bool aks_netrules_allow_name(const aks_netrules *r, const char *name, unsigned port,
                             const char **rule);

/*
 * Whether the address sa (a struct sockaddr_in or sockaddr_in6; an IPv4-mapped IPv6 address is
 * treated as its IPv4 one) on port is inside a CIDR entry. IPv6 entries match IPv6 addresses
 * only; NAT64 (64:ff9b::/96) and 6to4 addresses are IPv6 addresses here. *rule as above.
 * A special address (aks_netaddr_special) needs aks_netrules_allow_special as well.
 */
bool aks_netrules_allow_addr(const aks_netrules *r, const struct sockaddr *sa, unsigned port,
                             const char **rule);

/*
 * The special range sa lies in, or NULL for an ordinary public address (and for NULL or a
 * family other than AF_INET and AF_INET6): "metadata" (169.254.169.254, 169.254.170.2,
 * 100.100.100.200, fd00:ec2::254; checked before their link-local and shared ranges),
 * "loopback", "private", "link-local", "shared (CGNAT)", "unspecified", "broadcast",
 * "multicast", "documentation", "benchmarking", "unique-local", "site-local", "reserved"
 * (0.0.0.0/8, 192.0.0.0/24, 192.88.99.0/24, 240.0.0.0/4, ::/8, 100::/64, 2001::/23,
 * 64:ff9b:1::/48, and every IPv6 address outside 2000::/3 not named above). An IPv4-mapped
 * (::ffff:0:0/96), NAT64 (64:ff9b::/96) or 6to4 (2002::/16) address is what its embedded IPv4
 * address is. A name that resolves to one of these must not open, say, the cloud's metadata
 * service or the host's loopback just because the name was allowed.
 */
const char *aks_netaddr_special(const struct sockaddr *sa);

/*
 * Whether sa, an address in a special range, is explicitly allowed on port: a CIDR entry
 * with a matching port contains it AND lies wholly inside that special range (10.0.0.0/8 or
 * 10.1.2.3 opens private 10.x; 127.0.0.1/32 that loopback address; 169.254.169.254/32 the
 * metadata address, which 169.254.0.0/16 does not; 0.0.0.0/0 and ::/0 open no special range).
 * For a NAT64 or 6to4 address the range is the embedded IPv4 range's image in that prefix,
 * and only an IPv6 entry inside it opens it. False for an ordinary address: call it when
 * aks_netaddr_special() flags one. *rule as above.
 */
bool aks_netrules_allow_special(const aks_netrules *r, const struct sockaddr *sa, unsigned port,
                                const char **rule);

/*
 * A name map for tests, like curl's --resolve: the host connector reads it from the
 * environment variable AKS_TEST_EGRESS_RESOLVE, so the tests can aim allowed names at local
 * servers without touching DNS.
 */
typedef struct aks_netmap aks_netmap;

/*
 * "name=addr[,name=addr...]": addr IPv4 or IPv6 (brackets allowed); a name may appear several
 * times for several addresses. NULL or "" is an empty map. Returns 0 with *out set, or -1 with
 * msg naming the item.
 */
int aks_netmap_parse(const char *spec, aks_netmap **out, char *msg, size_t msglen);

void aks_netmap_free(aks_netmap *m);

/*
 * Resolves name (normalized as aks_netname_normalize does; anything else is refused) for port:
 * from the map when it has the name (and only from it then), an IP literal as itself, else
 * getaddrinfo (AF_UNSPEC, SOCK_STREAM, AI_ADDRCONFIG). Fills up to max addresses, with port set,
 * into out[] and their count into *n. Returns 0, or -1 with msg ("cannot resolve 'x': ...",
 * gai_strerror's text when the resolver failed). m may be NULL.
 */
int aks_netresolve(const aks_netmap *m, const char *name, unsigned port,
                   struct sockaddr_storage *out, size_t max, size_t *n, char *msg, size_t msglen);

#endif /* AKS_COMMON_NETRULE_H */
