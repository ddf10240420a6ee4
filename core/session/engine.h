/*
 * core/session/engine.h - what runs one operation on a sandbox, shared by the in-process brokers
 * (manager.c) and the queue worker (worker_engine.c): acquiring the session's sandbox with
 * self-heal (reference §5.2 step 6), the operation under the policy's timeout, the backend
 * destroy, and the notices those steps tell the agent. Internal API (aks__ names).
 */
#ifndef AKS_CORE_SESSION_ENGINE_H
#define AKS_CORE_SESSION_ENGINE_H

#include <stdbool.h>

#include "internal.h"
#include "session/manager.h"
#include "session/sessions.h"

bool aks__engine_is_attached(const aks_profile *p);

/* The reference's operation name ("execute_code", ...) of an AKS_MGR_* op. */
const char *aks__engine_op_name(int op);

/*
 * Attach-or-create with self-heal: s->sandbox_id is attached when set (an attached profile's
 * attach_to when not); a managed sandbox that is gone is cleaned up with destroy and created
 * anew (*recreated); a gone attached environment is an AKS_EGONE error, never provisioned.
 */
int aks__engine_acquire(const aks_profile *p, const aks_session_rec *s, const aks_call *call,
                        aks_sandbox **out, bool *recreated, bool *cached, aks_error **err);
/* With `cached` non-NULL, acquire first takes the handle this process kept for the session's
 * sandbox (core/plugin/handle_cache.h: its agent, Python session and connections live on), without
 * asking the backend; *cached then says so, and a caller whose operation fails with
 * AKS_EGONE on it releases it and acquires again (cached NULL) to self-heal as above.
 * aks__engine_release gives the handle back after the operation (closed if the operation
 * found the sandbox gone), for the session's next call; the profile's idle_timeout bounds
 * how long it is kept. */
void aks__engine_release(const aks_profile *p, aks_sandbox *sb, int op_rc);

/* The operation (§5.2's table) under call's deadline; a timeout is the reference's
 * "sandbox operation '<op>' exceeded timeout <t>s". */
int aks__engine_run_op(aks_sandbox *sb, const aks_mgr_request *req, const aks_call *call,
                       aks_result **out, aks_error **err);

/*
 * Backend destroy shared by destroy, idle reset, per_call and the sweep: best effort, logged,
 * never an error; attached environments (and p NULL: a profile no longer configured) are never
 * destroyed. The session always ends closed with no sandbox_id. Like the original, it acts as
 * the plain "agent" principal under the default policy.
 */
void aks__engine_destroy(const aks_profile *p, aks_session_rec *s);
/* The backend part alone, for a sandbox no session record holds yet. */
void aks__engine_destroy_sandbox(const aks_profile *p, const char *sandbox_id);

/* The notices (malloc'd; NULL on ENOMEM): an idle reset of session `id`, and a sandbox that
 * was gone and has been recreated empty. */
char *aks__engine_idle_notice(const aks_profile *p, const char *id);
char *aks__engine_recreated_notice(const char *id);

#endif /* AKS_CORE_SESSION_ENGINE_H */
