/*
 * core/plugin/loader.h - finding, loading and validating plugins.
 */
#ifndef AKS_CORE_PLUGIN_LOADER_H
#define AKS_CORE_PLUGIN_LOADER_H

#include "internal.h"

/* "provider", "transport", ... for messages. */
const char *aks__plugin_kind_name(uint32_t kind);

/* The package that ships an in-tree plugin ("aksandbox-plugin-docker"), or NULL. */
const char *aks__plugin_package(const char *name, char *buf, size_t size);

/* AKS_EPLUGIN when `caps` declares a capability (shell, files, package_install) whose operation
 * `sb` lacks; `who` names the plugin in the message. The loader checks the declared table, the
 * host an instance's own (instance_capabilities). */
int aks__provider_slots_check(const char *who, const aks_capabilities *caps,
                              const aks_sandbox_ops *sb, aks_error **err);

/* Whether a plugin of that name is on the search path (found, not loaded): a config key may
 * name one. */
bool aks__plugin_installed(const char *name);

#endif /* AKS_CORE_PLUGIN_LOADER_H */
