/*
 * Fuzz target: the whole config loader, as `aksandbox` runs it on an
 * untrusted config.yaml and environment. The input is YAML text, optionally
 * followed by a line "%%ENV" and then one NAME=value environment entry per
 * line, applied as AK_SANDBOX__ overrides before validation.
 *
 * Plugins are looked up nowhere (AKS_PLUGIN_PATH and the system directory are
 * empty), so an enabled profile fails fast with "not found" instead of
 * running plugin code.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/config/env.h"
#include "core/config/settings.h"
#include "core/config/yaml_tree.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ENV 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int once;
	if (!once) {
		setenv("AKS_PLUGIN_PATH", "", 1);
		setenv("AKS_PLUGIN_SYSTEM_DIR", "", 1);
		aks_log_set_level(-1);
		once = 1;
	}
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	size_t yaml_len = strlen(text); /* an embedded NUL ends the document */
	const char *env[MAX_ENV + 1] = {NULL};
	char *marker = strstr(text, "\n%%ENV\n");
	if (marker) {
		yaml_len = (size_t)(marker - text);
		size_t n = 0;
		for (char *line = strtok(marker + 7, "\n"); line && n < MAX_ENV;
		     line = strtok(NULL, "\n"))
			env[n++] = line;
	}
	aks_node *root = NULL;
	aks_error *err = NULL;
	if (aks__yaml_parse(text, yaml_len, "fuzz.yaml", &root, &err) == AKS_OK &&
	    aks__config_apply_env(&root, env, &err) == AKS_OK) {
		aks_settings *s = NULL;
		if (aks__settings_from_tree(root, "fuzz.yaml", &s, &err) == AKS_OK)
			aks_settings_free(s);
	}
	aks__node_free(root);
	aks_error_free(err);
	free(text);
	return 0;
}
