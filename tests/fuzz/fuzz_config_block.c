/*
 * Fuzz target: untrusted YAML through the config parser and the schema
 * validator (every key type), exactly as a config.yaml block is read.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/config/block.h"
#include "core/config/yaml_tree.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const aks_config_key keys[] = {
    AKS_CONFIG_KEY("s", AKS_CONFIG_STRING, false, "x", ""),
    AKS_CONFIG_KEY("b", AKS_CONFIG_BOOL, false, "false", ""),
    AKS_CONFIG_KEY("i", AKS_CONFIG_INT, false, "1", ""),
    AKS_CONFIG_KEY("d", AKS_CONFIG_DOUBLE, false, "1.5", ""),
    AKS_CONFIG_KEY("l", AKS_CONFIG_STRING_LIST, false, "[]", ""),
    AKS_CONFIG_KEY("m", AKS_CONFIG_STRING_MAP, false, "{}", ""),
    AKS_CONFIG_KEY("j", AKS_CONFIG_JSON, false, "{}", ""),
    AKS_CONFIG_END,
};

static const aks_plugin_descriptor desc = {AKS_DESCRIPTOR_VERSION,
                                           sizeof(aks_plugin_descriptor),
                                           AKS_ABI_MAJOR,
                                           AKS_ABI_MINOR,
                                           AKS_PLUGIN_PROVIDER,
                                           "fuzz",
                                           "1",
                                           "MIT",
                                           "fuzz",
                                           keys,
                                           NULL,
                                           {NULL, NULL, NULL, NULL}};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	aks_node *root = NULL;
	aks_error *err = NULL;
	if (aks__yaml_parse((const char *)data, size, "fuzz.yaml", &root, &err) == AKS_OK) {
		const aks_node *block = aks__node_get(root, "fuzz");
		aks_config *cfg = NULL;
		if (aks__config_build(&desc, block ? block : root, "fuzz", &cfg, &err) == AKS_OK) {
			const char *s;
			const char *const *v;
			aks__config_string(cfg, "s", &s);
			aks__config_list(cfg, "l", &v);
			aks__config_map(cfg, "m", &v);
			aks__config_json(cfg, "j", &s);
			aks_config_free(cfg);
		}
		aks__node_free(root);
	}
	aks_error_free(err);
	return 0;
}
