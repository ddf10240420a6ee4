/*
 * core/session/engine.h - "run this operation in this session": the one place that acquires
 * a session's sandbox (kept handle, attach, or create, with self-heal: reference §5.2 step
 * 6), records a new sandbox before using it, runs the operation under the policy's timeout,
 * retries once when a kept handle's sandbox went away, and gives the handle back. Both the
 * in-process brokers (core/session/manager.c) and the queue worker
 * (core/queue/worker_engine.c) run operations through aks__engine_run; what differs between
 * them (where the session lives, how it is locked and written back, how the outcome is
 * told) stays with them. Also here: the backend destroy and the notices. Internal API
 * (aks__ names).
 */
#ifndef AKS_CORE_SESSION_ENGINE_H
#define AKS_CORE_SESSION_ENGINE_H

#include <stdbool.h>

#include "internal.h"
#include "session/manager.h"
#include "session/owner.h"
#include "session/sessions.h"

bool aks__engine_is_attached(const aks_profile *p);

/* The reference's operation name ("execute_code", ...) of an AKS_MGR_* op. */
const char *aks__engine_op_name(int op);

/*
 * Persists s, whose sandbox_id has just changed to the sandbox the engine is about to use,
 * wherever its caller keeps sessions (the state store, the worker's inventory). AKS_OK, or
 * an error that fails the call before the operation runs.
 */
typedef int (*aks_engine_record_fn)(void *ctx, const aks_session_rec *s, aks_error **err);

/* One operation to run (everything borrowed for the call). */
typedef struct aks_engine_op {
	const aks_profile *profile;
	const aks_mgr_request *req; /* the operation; req->output: its tap (NULL: none) */
	const aks_principal *principal;
	const char *conversation; /* for the provider's logs (call->context); NULL: none */
	aks_cancel *cancel;       /* NULL: not cancellable */
	/* Take the handle this process kept for the session's sandbox (core/plugin/
	 * handle_cache.h), and give it back afterwards. false: attach or create a handle of its
	 * own and close it after the operation (the manager's per_call). */
	bool keep_handle;
	aks_engine_record_fn record; /* NULL: the session is kept nowhere (per_call) */
	void *record_ctx;
	/* The store that will hold what is created (session/owner.h): a create is claimed in it
	 * first and labelled with it. NULL: created unlabelled, which gc never finds. */
	aks_owner *owner;
} aks_engine_op;

/* What aks__engine_run tells its caller, whatever it returns. */
typedef struct aks_engine_outcome {
	aks_result *result; /* the caller's: executions and downloads that succeeded; else NULL */
	/* The notice of a sandbox that was gone and has been recreated empty (malloc'd, the
	 * caller's; NULL when nothing was recreated). It is on neither the result nor s: the
	 * caller decides who is told (the manager keeps it for a later call when this one
	 * fails). */
	char *notice;
	bool ran;        /* the operation was run; s->last_used_at is when it ended */
	bool changed;    /* s changed beyond last_used_at (its egress_refused tally) */
	bool reacquired; /* a kept handle's sandbox was gone: acquired again, ran again (once) */
	/* Without op->record (per_call): the claim of the sandbox created for the call, which the
	 * caller releases (aks__owner_release) once it has destroyed the sandbox, so that a crash
	 * before leaves it to gc. NULL when nothing was created. */
	aks_owner_claim *claim;
} aks_engine_outcome;

/*
 * Runs op in the session *s. The contract:
 *
 *  - The caller holds the session's lock (its state store's, or the worker's in the response
 *    store) from before it loaded *s until after it writes *s back; the engine takes no lock
 *    and writes no session record itself but through op->record.
 *  - s->sandbox_id names the sandbox the session has (NULL: none; an attached profile then
 *    means its attach_to). Acquiring may give another one (recreated after it was found
 *    gone, or created): then s->sandbox_id takes the new id, s->closed is cleared, and
 *    op->record is called before the operation runs, so that no failure after it leaves the
 *    new sandbox unrecorded. A create is claimed in op->owner before it starts and the claim
 *    released once op->record has succeeded (out->claim when there is no record), so a crash
 *    in between leaves a sandbox that gc collects. A failing record fails the call; the new
 *    sandbox is then destroyed and s left closed with no sandbox_id.
 *  - A gone managed sandbox is cleaned up and created anew (out->notice says so); a gone
 *    attached environment is an AKS_EGONE error, never provisioned.
 *  - The operation gets the policy's whole timeout (a timeout is the reference's
 *    "sandbox operation '<op>' exceeded timeout <t>s"). When it fails with AKS_EGONE on a
 *    kept handle (its sandbox was deleted behind this process's back), the handle is closed,
 *    the error dropped, and the session's sandbox acquired again without the cache and the
 *    operation run once more (out->reacquired): exactly one retry, since the second attempt
 *    never uses a kept handle.
 *  - After the operation the handle is given back (or closed: see keep_handle, and when the
 *    operation found the sandbox gone) and s->last_used_at is set to now (out->ran).
 *
 * Returns the operation's status, or the failure of acquire or record before it.
 * *out is filled in every case (zeroed first); the caller frees out->result and out->notice.
 */
int aks__engine_run(const aks_engine_op *op, aks_session_rec *s, aks_engine_outcome *out,
                    aks_error **err);

/*
 * Backend destroy shared by destroy, idle reset, per_call and the sweep: best effort, logged,
 * never an error; attached environments (and p NULL: a profile no longer configured) are never
 * destroyed. The handle kept for the sandbox is closed first. The session always ends closed
 * with no sandbox_id. Like the original, it acts as the plain "agent" principal under the
 * default policy.
 */
void aks__engine_destroy(const aks_profile *p, aks_session_rec *s);
/* The call the backend's housekeeping runs under (a destroy outside any operation, the
 * collector's listings): the plain "agent" principal, the default policy and its timeout. */
/*
 * A new sandbox for profile p: one of its warm pool when it has one ready (session/pool.h;
 * *claim is then NULL: the pool's record was its protection, and the caller records it or
 * destroys it), else aks__owner_create's (claimed in owner's store, labelled). A pooled one
 * this process filled comes as the handle it kept, its agent already connected.
 */
int aks__engine_new_sandbox(aks_owner *owner, const aks_profile *p, const aks_call *call,
                            aks_sandbox **out, aks_owner_claim **claim, aks_error **err);
void aks__engine_housekeeping_call(aks_principal *principal, aks_policy *policy, aks_call *call);
/* The backend part alone, for a sandbox no session record holds (yet): the provider's status,
 * its error in *err (may be NULL) besides the log. */
int aks__engine_destroy_sandbox(const aks_profile *p, const char *sandbox_id, aks_error **err);

/* The notices (malloc'd; NULL on ENOMEM): an idle reset of session `id`, and a sandbox that
 * was gone and has been recreated empty. */
char *aks__engine_idle_notice(const aks_profile *p, const char *id);
char *aks__engine_recreated_notice(const char *id);

#endif /* AKS_CORE_SESSION_ENGINE_H */
