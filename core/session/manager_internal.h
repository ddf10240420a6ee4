/*
 * core/session/manager_internal.h - what manager.c shares with manager_queue.c, the manager's queue
 * flavor. Internal to those two files.
 */
#ifndef AKS_CORE_SESSION_MANAGER_INTERNAL_H
#define AKS_CORE_SESSION_MANAGER_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>

#include "queue/client.h"
#include "session/broker_thread.h"
#include "session/manager.h"

struct aks_manager {
	aks_settings *settings;
	aks_state_store *store;
	bool threaded;      /* broker.flavor: thread */
	bool queued;        /* broker.flavor: queue (manager_queue.c) */
	bool remote;        /* a broker plugin, which this build cannot run: refused, never run
	                     * here instead (see broker_missing) */
	pthread_mutex_t mu; /* guards pool and queue (made on first use) and the memo below */
	aks_broker_pool *pool;
	aks_queue_client *queue;
	char **unconfigured; /* profiles the reaper has warned about */
	size_t n_unconfigured;
};

/* One submission, resolved: profile, principal and where its session lives. */
typedef struct submit_state {
	aks_manager *m;
	const aks_mgr_caller *caller;
	const aks_mgr_request *req;
	aks_profile *profile;
	const aks_principal *principal;
	bool ephemeral;   /* per_call */
	const char *ns;   /* otherwise: the session's namespace, */
	const char *id;   /* its id, */
	bool explicit_id; /* and whether the caller named it */
} submit_state;

/* ---- manager_queue.c ---- */

/* per_call under the queue flavor: the worker creates and destroys the sandbox. */
int aks__mgr_queue_ephemeral(submit_state *st, aks_mgr_outcome *out, aks_error **err);

/*
 * A stored session's operation under the queue flavor, called with the session locked and
 * loaded in *s: sends it, waits, and folds the completion's session into *s (the sandbox the
 * worker used, §11 item 1). AKS_OK with out->result (NULL for uploads), or with out->task_id
 * when an execution is still running after wait_timeout (it is recorded as a pending task);
 * a file operation is never promoted: past its wait it is an AKS_ETIMEOUT error saying it may
 * still take effect. *sent says whether the request left (then a worker may make a sandbox
 * for the session, whatever the outcome here).
 */
int aks__mgr_queue_run(submit_state *st, aks_session_rec *s, aks_mgr_outcome *out, bool *sent,
                       aks_error **err);

/* Sends a destroy of the session's sandbox to the workers (fire-and-forget, ordered after the
 * session's earlier operations); s is left closed with no sandbox_id. Failures are logged. */
void aks__mgr_queue_destroy(aks_manager *m, const aks_profile *p, const char *conversation,
                            aks_session_rec *s);

/* A pending task whose completion has arrived is made terminal in the state store, and its
 * session takes the sandbox the worker left (when that is the newer news). No-op otherwise. */
int aks__mgr_queue_resolve_task(aks_manager *m, const char *conversation, const char *task_id,
                                aks_error **err);

/* check_sandbox_task for a task this state store has no record of (it was submitted from a
 * host with another state store): answered from the response store when the completion is
 * there and belongs to the conversation; AKS_ENOTFOUND (no error set) otherwise, and for
 * tasks the state store does know (they are answered from it). */
int aks__mgr_queue_task_direct(aks_manager *m, const char *conversation, const char *task_id,
                               char **out, aks_error **err);

#endif /* AKS_CORE_SESSION_MANAGER_INTERNAL_H */
