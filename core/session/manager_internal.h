/*
 * core/session/manager_internal.h - what the manager's files share: manager.c (the entry
 * points and a stored session's call), manager_thread.c (the thread broker's jobs) and
 * manager_queue.c (the queue flavor). Internal to those files.
 */
#ifndef AKS_CORE_SESSION_MANAGER_INTERNAL_H
#define AKS_CORE_SESSION_MANAGER_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>

#include "queue/client.h"
#include "session/broker_thread.h"
#include "session/manager.h"
#include "session/owner.h"

typedef struct aks_mgr_flavor aks_mgr_flavor;

struct aks_manager {
	aks_settings *settings;
	aks_state_store *store;
	aks_owner *owner; /* what store owns: the labels and claims of what is created */
	const aks_mgr_flavor *flavor; /* broker.flavor, chosen once by aks__manager_new */
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

/* A stored session's call (per_session, per_runtime), under the session's lock from the
 * lookup to the write-back (manager.c). A flavor's run_stored updates s, dirty and notice. */
typedef struct stored_run {
	submit_state *st;
	aks_session_rec s;    /* as loaded, then as it is to be written back */
	bool existed;         /* the session has a record, or must get one now */
	bool dirty;           /* s differs from its record */
	double recorded_used; /* last_used_at as the record holds it (0: no record yet) */
	char *notice; /* to tell the agent (malloc'd): idle reset, the reaper's, a recreate */
} stored_run;

/*
 * A broker flavor: where and how the manager's operations run. One instance per flavor
 * (manager.c), picked at aks__manager_new, so no entry point tests the flavor by name.
 */
struct aks_mgr_flavor {
	const char *name;
	/* Hands a prepared submission to where it runs and waits as the flavor does (inline:
	 * aks__mgr_execute; the thread pool: a job that may be promoted). *principal (what
	 * st->principal points into) may be taken over; else the caller frees it. */
	int (*dispatch)(submit_state *st, aks_resolved_principal **principal, aks_mgr_outcome *out,
	                aks_error **err);
	/* per_call: a sandbox made for the one operation and destroyed after it. */
	int (*run_ephemeral)(submit_state *st, aks_mgr_outcome *out, aks_error **err);
	/* A stored session's operation, the session locked and loaded in r->s. */
	int (*run_stored)(stored_run *r, aks_mgr_outcome *out, aks_error **err);
	/* The session's sandbox goes (destroy_sandbox_session, the idle reset on touch); s ends
	 * closed with no sandbox_id. p NULL: a profile no longer configured (nothing destroyed). */
	void (*destroy)(aks_manager *m, const aks_profile *p, const char *conversation,
	                aks_session_rec *s);
	/* check_sandbox_task's own answer, or AKS_ENOTFOUND (no error set) to let the state
	 * store answer. NULL: the state store always answers. */
	int (*task)(aks_manager *m, const char *conversation, const char *task_id, char **out,
	            aks_error **err);
	bool reaps; /* the idle reaper destroys this process's idle sandboxes */
};

/* ---- manager.c ---- */

/* A prepared submission's operation, on whatever thread runs it: the flavor's
 * run_ephemeral, or the stored session's call. */
int aks__mgr_execute(submit_state *st, aks_mgr_outcome *out, aks_error **err);

/* How long an execution waits before it becomes a task: the caller's choice
 * (aks_tool_context.wait_timeout), else broker.wait_timeout; -1 for the whole run. */
double aks__mgr_exec_wait(const submit_state *st);

/* ---- manager_thread.c ---- */

/*
 * The thread broker's dispatch (§5.4): the operation runs on the pool. Executions wait up to
 * broker.wait_timeout seconds (0: promoted at once) and are otherwise promoted to a task;
 * file operations wait for their outcome, so they never report what did not happen (§11
 * item 2).
 */
int aks__mgr_thread_dispatch(submit_state *st, aks_resolved_principal **principal,
                             aks_mgr_outcome *out, aks_error **err);

/* ---- manager_queue.c ---- */

/* per_call under the queue flavor: the worker creates and destroys the sandbox. */
int aks__mgr_queue_ephemeral(submit_state *st, aks_mgr_outcome *out, aks_error **err);

/*
 * A stored session's operation under the queue flavor (its run_stored): sends it, waits, and
 * folds the completion's session into r->s (the sandbox the worker used, §11 item 1). AKS_OK
 * with out->result (NULL for uploads), or with out->task_id when an execution is still
 * running after wait_timeout (it is recorded as a pending task); a file operation is never
 * promoted: past its wait it is an AKS_ETIMEOUT error saying it may still take effect. Once
 * the request has left, r->existed is set whatever the outcome: a worker may make a sandbox
 * for the session.
 */
int aks__mgr_queue_stored(stored_run *r, aks_mgr_outcome *out, aks_error **err);

/* Sends a destroy of the session's sandbox to the workers (fire-and-forget, ordered after the
 * session's earlier operations); s is left closed with no sandbox_id. Failures are logged. */
void aks__mgr_queue_destroy(aks_manager *m, const aks_profile *p, const char *conversation,
                            aks_session_rec *s);

/*
 * check_sandbox_task under the queue flavor. A pending task whose completion has arrived is
 * made terminal in the state store first (its session takes the sandbox the worker left,
 * when that is the newer news); then AKS_ENOTFOUND lets the state store answer for the tasks
 * it knows. A task it has no record of (submitted from a host with another state store) is
 * answered from the response store when the completion is there and belongs to the
 * conversation.
 */
int aks__mgr_queue_task(aks_manager *m, const char *conversation, const char *task_id, char **out,
                        aks_error **err);

#endif /* AKS_CORE_SESSION_MANAGER_INTERNAL_H */
