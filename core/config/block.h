/*
 * core/config/block.h - a plugin's config block, validated against the
 * schema its descriptor declares.
 */
#ifndef AKS_CORE_CONFIG_BLOCK_H
#define AKS_CORE_CONFIG_BLOCK_H

#include "config/yaml_tree.h"
#include "internal.h"

/*
 * Validates `block` (a mapping, or NULL/null for an empty block) against the
 * descriptor's schema and builds the typed config. `label` names the block
 * in messages, e.g. "local_subprocess".
 */
int aks__config_build(const aks_plugin_descriptor *desc, const aks_node *block, const char *label,
                      aks_config **out, aks_error **err);

/* Settings the host gives a plugin from elsewhere in the config (a transport's queue URLs,
 * transport.h): sets `key` when the plugin's schema declares it with that type (nothing when
 * it does not, or when value is NULL). AKS_ECONFIG, naming `source`, when the block set the key
 * itself. */
int aks__config_fill_string(aks_config *cfg, const char *key, const char *value, const char *source,
                            aks_error **err);
int aks__config_fill_double(aks_config *cfg, const char *key, double value, const char *source,
                            aks_error **err);

/* The accessors of the host services table. */
int aks__config_string(const aks_config *cfg, const char *key, const char **out);
int aks__config_bool(const aks_config *cfg, const char *key, bool *out);
int aks__config_int(const aks_config *cfg, const char *key, int64_t *out);
int aks__config_double(const aks_config *cfg, const char *key, double *out);
int aks__config_list(const aks_config *cfg, const char *key, const char *const **out);
int aks__config_map(const aks_config *cfg, const char *key, const char *const **out);
int aks__config_json(const aks_config *cfg, const char *key, const char **out);

/* The i-th key of a schema array (entries may be larger than ours). */
const aks_config_key *aks__schema_key(const aks_config_key *keys, size_t i);
const char *aks__config_type_name(uint32_t type);

/* Checks a plugin's declared schema: entry sizes, unique names, known types,
 * and that every default converts to its key's type. `file` is for messages. */
int aks__schema_check(const aks_plugin_descriptor *desc, const char *file, aks_error **err);
#endif /* AKS_CORE_CONFIG_BLOCK_H */
