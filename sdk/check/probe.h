/*
 * sdk/check/probe.h - writes the config block used to check that a plugin's
 * schema refuses unknown keys.
 */
#ifndef AKS_CHECK_PROBE_H
#define AKS_CHECK_PROBE_H

#include <stddef.h>

/*
 * Writes a bare config block for plugin `name` to a new temporary file: the
 * block from `config_path` (found as aks_config_load_block finds it; NULL
 * means an empty block) plus `key: 1`. Stores the file's path in `path_out`
 * (at least `path_size` bytes); the caller unlinks it. On failure returns -1
 * and writes the reason to `why`.
 */
int aks_check_write_probe(const char *config_path, const char *name, const char *key,
                          char *path_out, size_t path_size, char *why, size_t why_size);

#endif /* AKS_CHECK_PROBE_H */
