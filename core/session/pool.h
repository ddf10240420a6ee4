/*
 * core/session/pool.h - warm pools: sandboxes created ahead, with their profile's policy, for
 * the profile's new sessions (`pool: {size: N, max_idle: S}`, docs/pools.md).
 *
 * A pooled sandbox is created like any other (claimed in the state store's owner and
 * labelled with it, session/owner.h), then recorded in the store's reserved namespace
 * AKS_STORE_NS_POOL as "pool:<profile>:<token>" = {"profile", "sandbox_id", "created_at"},
 * and its claim released. A new session takes one by deleting its record in a transaction:
 * a record is deleted once, so two processes or hosts sharing the store never take the same
 * sandbox. Between the take and the session's record a killed host leaves a labelled
 * sandbox that nothing records and no claim protects, which gc removes; gc never removes a
 * sandbox the pool records. Internal API (aks__ names).
 */
#ifndef AKS_CORE_SESSION_POOL_H
#define AKS_CORE_SESSION_POOL_H

#include <stdbool.h>

#include "internal.h"
#include "session/owner.h"

struct json_object;

/* The store's pool records, and their keys' prefix. */
#define AKS_STORE_NS_POOL   "@pool"
#define AKS_POOL_KEY_PREFIX "pool:"

/* Whether p keeps a pool, and of how many sandboxes. */
bool aks__pool_enabled(const aks_profile *p);
int aks__profile_pool_size(const aks_profile *p);
double aks__profile_pool_max_idle(const aks_profile *p);

/*
 * Takes one sandbox of p's pool in o's store: *sandbox_id (malloc'd, the caller's) is the
 * oldest that is younger than max_idle, or NULL when there is none (not an error). Taken,
 * it is no longer the pool's: the caller records it or destroys it.
 */
int aks__pool_take(aks_owner *o, const aks_profile *p, char **sandbox_id, aks_error **err);

/*
 * Brings p's pool to its size: pooled sandboxes older than max_idle are taken and destroyed,
 * and the missing ones created with p's policy and recorded. *report (the caller's):
 *   {"profile", "size", "ready", "created", "replaced", "failed": [error message, ...]}
 * A failed create is reported, not an error (the next fill tries again); reading or writing
 * the store is. Only one fill of a profile runs at a time in a process.
 */
int aks__pool_fill(aks_owner *o, const aks_profile *p, struct json_object **report,
                   aks_error **err);

/* How many sandboxes p's pool holds now (younger than max_idle), or a negative status. */
int aks__pool_count(aks_owner *o, const aks_profile *p, aks_error **err);

#endif /* AKS_CORE_SESSION_POOL_H */
