/*
 * core/config/env.h - AK_SANDBOX__... environment overrides onto a config tree.
 *
 * The same variables the original system reads (pydantic-settings with the
 * prefix AK_, the nested delimiter __, case-insensitive), so deployments
 * written for it keep working. The rules, with examples, are in
 * docs/configuration-env.md.
 */
#ifndef AKS_CORE_CONFIG_ENV_H
#define AKS_CORE_CONFIG_ENV_H

#include "config/yaml_tree.h"
#include "internal.h"

/* The most AK_SANDBOX__ variables applied at once; more is refused. */
#define AKS_CONFIG_ENV_MAX_VARS 1024

/*
 * Applies the AK_SANDBOX__... variables of `envp` (NULL-terminated "NAME=value"
 * strings, e.g. `(const char *const *)environ`; NULL means none) onto the document
 * `*root`, under its top-level key `sandbox`. `*root` must be a mapping, NULL
 * (a new mapping is created) or a null scalar (the document `~`, which becomes a
 * mapping).
 *
 * Every node created from a variable has `file` = the variable's name (owned by
 * the node or an ancestor) and line = column = 0, so aks__node_where() names the
 * variable.
 *
 * Returns AKS_OK or AKS_ECONFIG (AKS_ENOMEM) with a message starting with
 * "environment variable <NAME>: ". Mistakes in the variables themselves (names,
 * values, counts, depth) are found before the tree is touched; a conflict with
 * the tree (a path through a scalar) can leave *root partly overridden, still a
 * valid tree for aks__node_free(), never to be used as a configuration.
 */
int aks__config_apply_env(aks_node **root, const char *const *envp, aks_error **err);

#endif /* AKS_CORE_CONFIG_ENV_H */
