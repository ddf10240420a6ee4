/*
 * aksandbox/resolver.h - the principal resolver contract.
 *
 * A resolver plugin's descriptor has kind AKS_PLUGIN_RESOLVER and its `ops`
 * points at a static const aks_resolver_ops. A resolver maps who is calling
 * (the conversation, the agent, and identity attributes the embedding program
 * supplies, such as a signed token) to the principal sandboxed code runs as.
 *
 * Fail closed: a resolver that cannot verify what it was given returns an
 * error (AKS_EPOLICY), never a weaker principal. When no user identity was
 * supplied at all it returns an agent-mode principal; profiles that demand
 * identity.mode: user then refuse the request.
 *
 * Threading: resolve() may be called from several threads at once.
 * Ownership: see plugin.h. The principal is built through host->principal_*.
 */
#ifndef AKSANDBOX_RESOLVER_H
#define AKSANDBOX_RESOLVER_H

#include <stdint.h>

#include <aksandbox/common.h>
#include <aksandbox/plugin.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AKS_RESOLVE_REQUEST_VERSION 1

/* What the host knows about a call. Everything is borrowed for the call. */
typedef struct aks_resolve_request {
	uint32_t struct_version;       /* AKS_RESOLVE_REQUEST_VERSION */
	uint32_t struct_size;          /* sizeof(aks_resolve_request) */
	const char *conversation_id;   /* never NULL; may be "" */
	const char *agent;             /* the agent name; "agent" when none */
	const char *const *attributes; /* NULL-terminated key, value pairs from the caller */
} aks_resolve_request;

#define AKS_RESOLVE_REQUEST_INIT                                                                   \
	.struct_version = AKS_RESOLVE_REQUEST_VERSION, .struct_size = sizeof(aks_resolve_request)

/* Completed privately by each resolver plugin. */
typedef struct aks_resolver_impl aks_resolver_impl;

#define AKS_RESOLVER_OPS_VERSION 1

typedef struct aks_resolver_ops {
	uint32_t struct_version; /* AKS_RESOLVER_OPS_VERSION */
	uint32_t struct_size;    /* sizeof(aks_resolver_ops) */

	/* Mandatory. Builds the resolver from its validated config block. */
	int (*init)(const aks_host_api *host, const aks_config *config, aks_resolver_impl **out,
	            aks_error **err);

	/* Optional. */
	void (*fini)(aks_resolver_impl *resolver);

	/* Mandatory. Fills `out` with host->principal_set() (once) and
	 * host->principal_add_group() / principal_add_credential(). */
	int (*resolve)(aks_resolver_impl *resolver, const aks_resolve_request *request,
	               aks_principal_builder *out, aks_error **err);
} aks_resolver_ops;

#define AKS_RESOLVER_OPS_INIT                                                                      \
	.struct_version = AKS_RESOLVER_OPS_VERSION, .struct_size = sizeof(aks_resolver_ops)

#ifdef __cplusplus
}
#endif

#endif /* AKSANDBOX_RESOLVER_H */
