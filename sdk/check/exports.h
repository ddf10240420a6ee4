/*
 * sdk/check/exports.h - what a loaded plugin exports, read from its dynamic
 * symbol table in memory.
 */
#ifndef AKS_CHECK_EXPORTS_H
#define AKS_CHECK_EXPORTS_H

#include <stdbool.h>
#include <stddef.h>

/* The defined global and weak function and object symbols of a shared
 * object, in dynamic symbol table order. */
struct aks_check_exports {
	char **names;
	size_t count;
};

/*
 * Reads the exports of `file`, which must already be loaded in this process
 * (it is looked up with RTLD_NOLOAD, never loaded again). On failure returns
 * -1 and writes the reason to `why`.
 */
int aks_check_exports_read(const char *file, struct aks_check_exports *out, char *why,
                           size_t why_size);
bool aks_check_exports_has(const struct aks_check_exports *ex, const char *name);
void aks_check_exports_free(struct aks_check_exports *ex);

#endif /* AKS_CHECK_EXPORTS_H */
