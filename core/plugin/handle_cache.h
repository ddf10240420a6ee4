/*
 * core/plugin/handle_cache.h - open sandbox handles kept between the operations of one process.
 *
 * A handle can hold much more than an id: an aksandbox-agent running in the sandbox with its
 * Python session, a connection, threads. Closing it after every operation (as the original
 * does, reference §11 item 8) would throw all of that away at each tool call, so the engine
 * gives handles back here and takes them again at the session's next operation.
 *
 * One cache per provider instance (core/plugin/provider.c), keyed by sandbox id. `take` hands a
 * handle out exclusively (it leaves the cache while in use), so no two operations ever share
 * one. Handles idle past the age they were kept with, or beyond the cache's size (the least
 * recently used first), are closed. Handles are closed outside the lock: a close may wait for
 * an agent to exit. Thread-safe.
 */
#ifndef AKS_CORE_PLUGIN_HANDLE_CACHE_H
#define AKS_CORE_PLUGIN_HANDLE_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

typedef struct aks_handle_cache aks_handle_cache;

/* The most handles one provider instance keeps open between operations. */
#define AKS_HANDLE_CACHE_MAX 64

/* NULL when out of memory (the caller then works without a cache). */
aks_handle_cache *aks__handle_cache_new(size_t max_handles);
/* Closes every handle kept. */
void aks__handle_cache_free(aks_handle_cache *c);

/* The handle kept for sandbox_id, now the caller's; NULL when there is none. */
aks_sandbox *aks__handle_cache_take(aks_handle_cache *c, const char *sandbox_id);
/* Keeps sb (the caller's no longer) for at most max_idle_ms without use (<= 0: no limit but
 * the cache's size). A second handle on a sandbox already kept is closed instead. With no
 * cache (c NULL) the handle is closed. */
void aks__handle_cache_put(aks_handle_cache *c, aks_sandbox *sb, int64_t max_idle_ms);
/* Closes the handle kept for sandbox_id, if any (before the sandbox is destroyed). */
void aks__handle_cache_drop(aks_handle_cache *c, const char *sandbox_id);
/* How many handles are kept (for tests). */
size_t aks__handle_cache_size(aks_handle_cache *c);

/* The provider's cache (core/plugin/provider.c); NULL for none. */
aks_handle_cache *aks__provider_handles(aks_provider *prov);

#endif /* AKS_CORE_PLUGIN_HANDLE_CACHE_H */
