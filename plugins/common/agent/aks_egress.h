/*
 * plugins/common/agent/aks_egress.h - the host's side of the egress proxy: the policy's
 * `network_allow` enforced on every connection a sandbox's programs make through
 * aksandbox-agent's proxy (docs/agent-protocol.md, "Egress"; docs/security.md).
 *
 * The sandbox has no network of its own, so the host is the only way out, and it decides:
 * the destination is checked against the entries, the host resolves names itself (a sandbox
 * cannot say which address a name has), addresses in private, loopback, link-local and
 * metadata ranges are refused unless a CIDR entry inside that range allows them, and the
 * first bytes a program sends must name the destination it asked for (TLS SNI, HTTP Host).
 * Every connection is logged with its verdict (logfmt, "egress allowed" / "egress refused").
 *
 * Part of libaks-agent. One per agent connection; it runs a thread of its own for the
 * relay and a short-lived thread per connection being opened (names resolve and connects
 * block), at most AKS_AGENT_NET_MAX of them.
 */
#ifndef AKS_COMMON_EGRESS_H
#define AKS_COMMON_EGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <aksandbox/provider.h>

#include "aks_agent_client.h"
#include "aks_netrule.h"

typedef struct aks_egress_relay aks_egress_relay;

typedef struct aks_egress_opts {
	const char *provider;     /* prefixes the log lines ("docker") */
	const char *sandbox_id;   /* for the audit log */
	const char *const *allow; /* the policy's network_allow, NULL-terminated */
} aks_egress_opts;

/*
 * Starts the agent's proxy (NET_LISTEN) and serves it. The entries were checked when the
 * config loaded; one that does not parse here is AKS_ECONFIG all the same. An agent without
 * the proxy (an older build) is AKS_EPOLICY: the allowlist cannot be enforced, and the
 * sandbox stays without any network. The test-only name map AKS_TEST_EGRESS_RESOLVE
 * ("name=addr,...", like curl --resolve) is read here.
 */
int aks_egress_start(const aks_host_api *host, aks_agent *conn, const aks_egress_opts *o,
                     const aks_call *call, aks_egress_relay **out, aks_error **err);
/* Stops serving (every stream ends; connections being opened are waited for) and frees.
 * Call it before aks__agent_free of the connection. NULL: nothing. */
void aks_egress_stop(aks_egress_relay *e);
/* Connections refused so far (by policy, or by their first bytes). */
unsigned aks_egress_refused(const aks_egress_relay *e);
/* The same, and the refusals after the first `since` in buf: "dest (why)", the latest few
 * joined by "; ". */
unsigned aks_egress_refused_since(const aks_egress_relay *e, unsigned since, char *buf, size_t len);
/* Whom the audit log names from now on: call's principal and its context's conversation
 * and sandbox session (the handle's current call; NULL: nobody). */
void aks_egress_set_caller(aks_egress_relay *e, const aks_call *call);

/* ---- the decisions, without sockets (egress_decide.c), for the relay and the tests ---- */

/*
 * Whether a stream to host:port may open, and where to: 0 with the addresses to try in
 * out[0..*n) and the entry that allowed it in rule; else an AKS_AGENT_NC_* code (POLICY,
 * RESOLVE) with why. kind AKS_AGENT_NET_HTTP: head is the request's head, whose Host must
 * name the same destination.
 */
uint32_t aks__egress_decide(const aks_netrules *rules, const aks_netmap *map, const char *host,
                            unsigned port, int kind, const uint8_t *head, size_t head_len,
                            struct sockaddr_storage *out, size_t max, size_t *n, char *rule,
                            size_t rulelen, char *why, size_t whylen);
/*
 * The first bytes a program sent on a stream to target:port: 1 when they may go (a TLS
 * ClientHello whose SNI is the target or absent, an HTTP head whose Host is the target, or
 * another protocol), 0 when more bytes are needed (eof: no more will come, so decide on
 * these), -1 with why when they name another destination or cannot be read.
 */
int aks__egress_first_bytes(const char *target, unsigned port, const uint8_t *p, size_t n, bool eof,
                            char *why, size_t whylen);

#endif /* AKS_COMMON_EGRESS_H */
