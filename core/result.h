/*
 * core/result.h - the host-owned result record a provider fills.
 */
#ifndef AKS_CORE_RESULT_H
#define AKS_CORE_RESULT_H

#include "internal.h"

/* A result that keeps at most stream_cap bytes of stdout and of stderr, and
 * accepts downloaded files of at most file_cap bytes. */
aks_result *aks__result_new(size_t stream_cap, size_t file_cap);

int aks__result_write(aks_result *r, int stream, const void *data, size_t len, aks_error **err);
void aks__result_set_exit_code(aks_result *r, int exit_code);
void aks__result_set_timed_out(aks_result *r);
int aks__result_set_notice(aks_result *r, const char *notice);
int aks__result_add_file(aks_result *r, const char *path, const char *mime_type);
int aks__result_set_provider_data(aks_result *r, const char *json_object);

/* ---- cutting a finished result down (the queue worker's record truncation) ---- */

/* Keeps the first max_chars characters of stdout or stderr (AKS_STREAM_STDOUT/STDERR), cut
 * at a character boundary; an invalid UTF-8 sequence counts as one character and becomes
 * U+FFFD, as the record's JSON encoding shows it anyway. The stream's total is unchanged, so
 * the result still says it was truncated. AKS_OK, AKS_EINVAL or AKS_ENOMEM (nothing
 * changed). */
int aks__result_truncate_stream(aks_result *r, int stream, size_t max_chars);
/* Drops the last downloaded file; false when there was none. */
bool aks__result_drop_last_file(aks_result *r);

#endif /* AKS_CORE_RESULT_H */
