/*
 * core/util/legacy_init.c - the initialisers as binaries built before the sized ones call them.
 *
 * Until the *_init_sized functions, aksandbox.h declared aks_call_init and the others as plain
 * functions, and a program compiled against it calls those symbols with a struct of that
 * header's layout. The header now makes the names macros; these definitions keep the symbols,
 * each writing exactly the layout of the header its callers were built with. Those sizes are
 * frozen: when a struct grows, its entry point here must not (docs/abi.md).
 */
#include "config.h"

#include "util/sized.h"

/* The layouts of that header, by their last field. */
#define POLICY_SIZE_1         AKS__SIZE_THROUGH(aks_policy, strict)
#define PRINCIPAL_SIZE_1      AKS__SIZE_THROUGH(aks_principal, credentials)
#define CALL_SIZE_1           AKS__SIZE_THROUGH(aks_call, host_private)
#define REQUEST_SIZE_1        AKS__SIZE_THROUGH(aks_resolve_request, attributes)
#define TOOL_CONTEXT_SIZE_2   AKS__SIZE_THROUGH(aks_tool_context, output_userdata)
#define WORKER_OPTIONS_SIZE_1 AKS__SIZE_THROUGH(aks_worker_options, stop_grace)

/* Parenthesised names: the macros of the same names must not expand here. */

AKS_EXPORT void(aks_policy_init)(aks_policy *policy)
{
	aks_policy_init_sized(policy, POLICY_SIZE_1);
}

AKS_EXPORT void(aks_principal_init)(aks_principal *principal, const char *subject)
{
	aks_principal_init_sized(principal, PRINCIPAL_SIZE_1, subject);
}

AKS_EXPORT void(aks_call_init)(aks_call *call, double timeout, const aks_policy *policy,
                               const aks_principal *principal, aks_cancel *cancel)
{
	aks_call_init_sized(call, CALL_SIZE_1, timeout, policy, principal, cancel);
}

AKS_EXPORT void(aks_resolve_request_init)(aks_resolve_request *request, const char *conversation_id,
                                          const char *agent, const char *const *attributes)
{
	aks_resolve_request_init_sized(request, REQUEST_SIZE_1, conversation_id, agent, attributes);
}

/* Version 2: the symbol's callers built against version 1 (a development header, never
 * released) already got version 2 written; nothing tells the two apart. */
AKS_EXPORT void(aks_tool_context_init)(aks_tool_context *ctx, const char *conversation_id,
                                       const char *agent)
{
	aks_tool_context_init_sized(ctx, TOOL_CONTEXT_SIZE_2, conversation_id, agent);
}

AKS_EXPORT void(aks_worker_options_init)(aks_worker_options *opts)
{
	aks_worker_options_init_sized(opts, WORKER_OPTIONS_SIZE_1);
}
