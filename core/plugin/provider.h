/*
 * core/plugin/provider.h - the core's own calls into a provider, beside the public ones
 * (sdk/include/aksandbox/provider.h) that they share their checks with.
 *
 * The public aks_sandbox_execute_code/command are these with no output tap. The engine
 * (core/session/engine.c) passes the request's tap explicitly, so live output reaches the
 * caller of exactly the operation that produces it, on whatever thread runs it. Internal API
 * (aks__ names).
 */
#ifndef AKS_CORE_PLUGIN_PROVIDER_H
#define AKS_CORE_PLUGIN_PROVIDER_H

#include "internal.h"
#include "plugin/result.h"

/* aks_sandbox_execute_code whose result streams to `tap` (NULL: none) while it runs. */
int aks__sandbox_execute_code(aks_sandbox *sb, const char *code, const char *language,
                              const aks_call *call, aks_output_tap *tap, aks_result **out,
                              aks_error **err);
/* aks_sandbox_execute_command whose result streams to `tap` (NULL: none) while it runs. */
int aks__sandbox_execute_command(aks_sandbox *sb, const char *command, const aks_call *call,
                                 aks_output_tap *tap, aks_result **out, aks_error **err);

/* Host data that goes with a handle (the creation claim of a sandbox made outside any
 * session): free_fn(data) runs at aks_sandbox_close unless it was detached first. */
void aks__sandbox_attach(aks_sandbox *sb, void *data, void (*free_fn)(void *data));
void *aks__sandbox_detach(aks_sandbox *sb);

/* Whether the provider can list what it created (its list_sandboxes slot). */
bool aks__provider_can_list(const aks_provider *prov);
/* The provider's list_sandboxes under `call` (AKS_ECAPABILITY when it has none). */
int aks__provider_list_sandboxes(aks_provider *prov, const char *label_key, const char *label_value,
                                 const aks_call *call, aks_sandbox_list_fn fn, void *ctx,
                                 aks_error **err);

#endif /* AKS_CORE_PLUGIN_PROVIDER_H */
