/*
 * core/plugin/exports.h - what a loaded plugin exports, read from its dynamic
 * symbol table in memory.
 */
#ifndef AKS_PLUGIN_EXPORTS_H
#define AKS_PLUGIN_EXPORTS_H

#include <stdbool.h>
#include <stddef.h>

/* The defined global and weak function and object symbols of a shared
 * object, in dynamic symbol table order. */
struct aks__plugin_exports {
	char **names;
	size_t count;
};

/*
 * Reads the exports of `file`, which must already be loaded in this process
 * (it is looked up with RTLD_NOLOAD, never loaded again). On failure returns
 * -1 and writes the reason to `why`.
 */
int aks__plugin_exports_read(const char *file, struct aks__plugin_exports *out, char *why,
                             size_t why_size);
bool aks__plugin_exports_has(const struct aks__plugin_exports *ex, const char *name);
void aks__plugin_exports_free(struct aks__plugin_exports *ex);

#endif /* AKS_PLUGIN_EXPORTS_H */
