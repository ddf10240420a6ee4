/*
 * core/session/owner.h - what a state store owns, so nothing it created is ever orphaned.
 *
 * Every store has an owner id (32 hex), minted on first use in its reserved namespace
 * AKS_STORE_NS_OWNER. Before a provider creates a sandbox, the host writes a *claim* there
 * (which process is creating, since when) and hands the provider two labels for what it
 * makes: the owner id and the claim's token. Once a session record holds the sandbox (or the
 * sandbox is destroyed again) the claim goes. A host killed in between leaves a labelled
 * sandbox that no record holds and whose claim is dead: aks__owner_gc finds it through the
 * provider's list_sandboxes and destroys it. It never touches what carries another owner's
 * label, what carries none (attached environments, anything made before the labels), or a
 * sandbox whose creator is still alive.
 *
 * A claim is alive while its process is (same machine: the same boot and pid namespace, so
 * the pid and its start time say it), or, seen from another machine, for
 * AKS_OWNER_CLAIM_MAX_AGE seconds. Internal API (aks__ names); docs/gc.md.
 */
#ifndef AKS_CORE_SESSION_OWNER_H
#define AKS_CORE_SESSION_OWNER_H

#include <stdbool.h>

#include "internal.h"
#include "store/store.h"

struct json_object;

/* The store's own records: the owner id ("store") and the claims ("claim:<token>"). */
#define AKS_STORE_NS_OWNER "@owner"
/* How long a claim made on another machine counts as alive. */
#define AKS_OWNER_CLAIM_MAX_AGE 3600.0

typedef struct aks_owner aks_owner;
typedef struct aks_owner_claim aks_owner_claim;

/* The owner of `store` (borrowed; it must outlive the owner). No I/O. */
int aks__owner_new(aks_state_store *store, aks_owner **out, aks_error **err);
void aks__owner_free(aks_owner *o);
/* The store o owns (borrowed). */
aks_state_store *aks__owner_store(aks_owner *o);
/* fn(ctx) is called, on the taking thread, each time this process takes a sandbox from one
 * of o's warm pools (the background refill's wake-up); fn NULL: no more calls. o NULL is
 * fine. */
void aks__owner_on_pool_take(aks_owner *o, void (*fn)(void *ctx), void *ctx);
void aks__owner_pool_taken(aks_owner *o);

/* Writes a claim for a sandbox about to be created for `profile`: *out holds the labels the
 * provider's create must get (aks__owner_claim_labels). Mints the owner id on first use. */
int aks__owner_claim(aks_owner *o, const char *profile, aks_owner_claim **out, aks_error **err);
const char *const *aks__owner_claim_labels(const aks_owner_claim *c);
/* The claimed sandbox is recorded, destroyed, or was never made: the claim record goes
 * (failures are logged: a stale claim protects nothing once its process is gone). Frees c;
 * NULL is fine. */
void aks__owner_release(aks_owner_claim *c);
/*
 * aks_provider_create for profile p, claimed in o first and given the claim's labels (o NULL:
 * unclaimed and unlabelled). On success *claim (NULL without o) is the caller's to release
 * once the sandbox is recorded or destroyed; on failure nothing is left claimed. For the
 * tests of what a host killed between create and record leaves behind: with
 * AKSANDBOX_TEST_DIE_AFTER_CREATE in its environment, the process SIGKILLs itself right
 * after the create.
 */
int aks__owner_create(aks_owner *o, const aks_profile *p, const aks_call *call, aks_sandbox **out,
                      aks_owner_claim **claim, aks_error **err);
/* Frees c and leaves its record, for the garbage collector to judge. */
void aks__owner_claim_free(aks_owner_claim *c);

/*
 * One collection. Every configured profile that provisions (attached ones never do) has its
 * provider list the sandboxes labelled with this store's owner id; each one that no record of
 * the store holds (a "session:" record's sandbox_id, in any namespace: the state store's
 * sessions or a worker's inventory) and no live claim protects is destroyed (listed only, with
 * dry_run). Dead claims are removed. *report (the caller's) says what happened:
 *   {"owner": id|null, "dry_run": b, "removed": [{"profile", "sandbox_id"}],
 *    "failed": [{"profile", "sandbox_id", "error"}], "kept": n, "in_creation": n,
 *    "not_listed": [{"profile", "reason"}], "claims_cleared": n}
 * A provider that cannot list, or fails to, is reported, not an error; reading the store is.
 */
int aks__owner_gc(aks_owner *o, aks_settings *settings, bool dry_run, struct json_object **report,
                  aks_error **err);

/* Logs what a background collection did (rc and e: its failure; report: its outcome), as
 * `component`: nothing when it removed and failed nothing, or when the flavor does not
 * collect (AKS_ECAPABILITY). */
void aks__owner_gc_log(const char *component, int rc, struct json_object *report,
                       const aks_error *e);

#endif /* AKS_CORE_SESSION_OWNER_H */
