/*
 * core/plugin/result.h - the host-owned result record a provider fills.
 */
#ifndef AKS_CORE_PLUGIN_RESULT_H
#define AKS_CORE_PLUGIN_RESULT_H

#include "internal.h"

/* A result that keeps at most stream_cap bytes of stdout and of stderr, and
 * accepts downloaded files of at most file_cap bytes. */
aks_result *aks__result_new(size_t stream_cap, size_t file_cap);

/* Keeps what fits under the cap, counts the rest; STDOUT and STDERR bytes go to the result's
 * output tap first, every one of them, kept or not (see below). May be called from any thread
 * (a plugin's reader thread), one writer at a time per result. */
int aks__result_write(aks_result *r, int stream, const void *data, size_t len, aks_error **err);
void aks__result_set_exit_code(aks_result *r, int exit_code);
void aks__result_set_timed_out(aks_result *r);
/* Adds to the count of connections an egress policy refused (saturating). */
void aks__result_add_egress_refused(aks_result *r, unsigned count);
void aks__result_add_unseen(aks_result *r, int stream, uint64_t bytes);
int aks__result_set_notice(aks_result *r, const char *notice);
int aks__result_add_file(aks_result *r, const char *path, const char *mime_type);
int aks__result_set_provider_data(aks_result *r, const char *json_object);

/* ---- streaming output while the operation runs ---- */

/*
 * An output tap: a callback that sees every stdout and stderr byte a provider writes into a
 * result, as it is written (aks__result_write calls it before returning, on whatever thread
 * wrote: often a plugin's reader thread). Refcounted, so a result that outlives its caller (a
 * promoted task's run goes on) never points at freed memory; detached under its lock, so
 * after aks__output_tap_detach returns the callback is not running and will never run again,
 * and later writes are dropped. Calls are serialised by that lock (one at a time, in write
 * order); the callback must not detach its own tap.
 */
typedef struct aks_output_tap aks_output_tap;
typedef void (*aks_output_tap_fn)(void *userdata, int stream, const void *data, size_t len);

/* A tap with one reference (NULL when out of memory). */
aks_output_tap *aks__output_tap_new(aks_output_tap_fn fn, void *userdata);
aks_output_tap *aks__output_tap_ref(aks_output_tap *tap); /* NULL-safe; returns tap */
void aks__output_tap_unref(aks_output_tap *tap);          /* NULL-safe */
/* Waits for a call in progress, then drops fn and userdata for good. NULL-safe. */
void aks__output_tap_detach(aks_output_tap *tap);

/* As aks__result_new, streaming to `tap` (NULL: none; the result takes its own reference):
 * what the core's execute calls make (core/plugin/provider.h) when the engine hands them the
 * request's tap. */
aks_result *aks__result_new_tapped(size_t stream_cap, size_t file_cap, aks_output_tap *tap);

/* ---- cutting a finished result down (the queue worker's record truncation) ---- */

/* Keeps the first max_chars characters of stdout or stderr (AKS_STREAM_STDOUT/STDERR), cut
 * at a character boundary; an invalid UTF-8 sequence counts as one character and becomes
 * U+FFFD, as the record's JSON encoding shows it anyway. The stream's total is unchanged, so
 * the result still says it was truncated. AKS_OK, AKS_EINVAL or AKS_ENOMEM (nothing
 * changed). */
int aks__result_truncate_stream(aks_result *r, int stream, size_t max_chars);
/* Drops the last downloaded file; false when there was none. */
bool aks__result_drop_last_file(aks_result *r);

#endif /* AKS_CORE_PLUGIN_RESULT_H */
