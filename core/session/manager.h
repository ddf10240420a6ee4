/*
 * core/session/manager.h - the execution manager (reference §4) with the embedded
 * broker and its worker (§5.2-5.3) folded in: profile and session
 * resolution, idle reset, self-heal, the gates and the provider calls.
 *
 * Every operation on a stored session (per_session, per_runtime) runs under
 * that session's lock, a flock(2) on its own lock file under the state
 * directory, from the lookup to the write-back. The lock excludes other
 * threads (each call opens the file anew, and flock locks belong to the open
 * file) and other processes, so no race creates two sandboxes for one
 * session and destroy is serialised with executions.
 *
 * Brokers (one strategy per flavor, chosen when the manager is made:
 * manager_internal.h): `flavor: thread` (the default) runs every operation on
 * the thread broker's pool (broker_thread.h). run_code and run_command wait up
 * to broker.wait_timeout seconds and are then promoted to a task recorded in
 * the conversation's store document (tasks.h), whose outcome the worker writes
 * there when the run ends; file operations wait without a bound. `embedded`
 * runs inline and never promotes; `queue` sends the work to the worker fleet
 * (manager_queue.c). Any other flavor names a broker plugin, which this build
 * cannot load: every operation is refused. Both in-process flavors run the
 * operation itself through the engine (engine.h), as the queue worker does.
 * Internal API (aks__ names).
 */
#ifndef AKS_CORE_SESSION_MANAGER_H
#define AKS_CORE_SESSION_MANAGER_H

#include "internal.h"
#include "plugin/result.h"
#include "session/sessions.h"
#include "store/store.h"

typedef struct aks_manager aks_manager;

typedef enum aks_mgr_wait {
	AKS_MGR_WAIT_CONFIGURED = 0, /* broker.wait_timeout */
	AKS_MGR_WAIT_SECONDS,        /* wait_seconds */
	AKS_MGR_WAIT_UNTIL_DONE      /* the whole run */
} aks_mgr_wait;

/* Who is calling: the conversation (namespace) and what the resolver needs. */
typedef struct aks_mgr_caller {
	const char *conversation;      /* non-empty, not starting with '@' */
	const char *agent;             /* NULL: "agent" */
	const char *const *attributes; /* NULL-terminated key, value pairs, or NULL */
	aks_cancel *cancel;            /* NULL: not cancellable */
	aks_mgr_wait wait_mode;        /* how long an execution waits before it is a task */
	double wait_seconds;           /* for AKS_MGR_WAIT_SECONDS */
} aks_mgr_caller;

typedef enum aks_mgr_op {
	AKS_MGR_EXECUTE_CODE,
	AKS_MGR_EXECUTE_COMMAND,
	AKS_MGR_UPLOAD,
	AKS_MGR_DOWNLOAD
} aks_mgr_op;

typedef struct aks_mgr_request {
	int op;                 /* aks_mgr_op */
	const char *code;       /* EXECUTE_CODE */
	const char *language;   /* EXECUTE_CODE; NULL: "python" */
	const char *command;    /* EXECUTE_COMMAND */
	const char *path;       /* UPLOAD, DOWNLOAD */
	const void *data;       /* UPLOAD */
	size_t len;             /* UPLOAD */
	const char *profile;    /* NULL: the session's, or the default profile */
	const char *session_id; /* NULL: the default session; "" is an (unknown) explicit id */
	/* EXECUTE_*: the output tap (result.h) the operation's result streams to while it runs
	 * in this process (borrowed; a thread-broker job takes its own reference). The queue
	 * flavor runs operations in workers and ignores it. NULL: none. */
	aks_output_tap *output;
} aks_mgr_request;

typedef struct aks_mgr_outcome {
	aks_result *result; /* executions and downloads; NULL for uploads */
	char *session_id;   /* the id to echo: "" for per_call, whose ids are never reusable */
	char *notice;       /* idle reset or self-heal; also set on result when it had none */
	char *task_id;      /* set when the execution was promoted: result is then NULL */
} aks_mgr_outcome;

void aks__mgr_outcome_clear(aks_mgr_outcome *o);

/* The manager over loaded settings (borrowed) and an open store (borrowed). */
int aks__manager_new(aks_settings *settings, aks_state_store *store, aks_manager **out,
                     aks_error **err);
void aks__manager_free(aks_manager *m);

/* AKS_EINVAL unless `conversation` is a usable conversation id. */
int aks__manager_check_conversation(const char *conversation, aks_error **err);

/* execute / upload / download (§4.4). On failure *out holds only the session_id the call
 * used, when one was resolved; clear it either way. */
int aks__manager_submit(aks_manager *m, const aks_mgr_caller *caller, const aks_mgr_request *req,
                        aks_mgr_outcome *out, aks_error **err);

/* check_sandbox_task (§3.5, §4.5): the task's JSON from the store, so it
 * answers for tasks promoted by any process on the same state directory. */
int aks__manager_task(aks_manager *m, const aks_mgr_caller *caller, const char *task_id, char **out,
                      aks_error **err);

/*
 * The idle reaper (§11 item 9): every stored session of a configured,
 * managed profile that has a sandbox and has been idle longer than its
 * profile's idle_timeout loses its sandbox (destroyed under the session's
 * lock); the session stays, with a reset notice its next call reports.
 * Sessions of profiles no longer configured are left alone (logged once per
 * manager); attached profiles are never touched. *reaped (may be NULL): how
 * many sandboxes were destroyed. Errors reading one namespace are logged and
 * skipped; only a failure to list the store is returned.
 */
int aks__manager_reap(aks_manager *m, size_t *reaped, aks_error **err);

/* The garbage collector over the manager's state store (session/owner.h: aks__owner_gc).
 * AKS_ECAPABILITY for the queue flavor, whose sandboxes its workers create and collect. */
struct json_object;
/* The owner of what this manager's flavor creates in this process (NULL: the queue flavor's
 * workers create, not this process). */
typedef struct aks_owner aks_owner;
aks_owner *aks__manager_owner(aks_manager *m);
int aks__manager_gc(aks_manager *m, bool dry_run, struct json_object **report, aks_error **err);
/* Fills every pooled profile's warm pool (session/pool.h): *report is the array of their
 * fill reports ([] when no profile pools). AKS_ECAPABILITY under the queue flavor. */
int aks__manager_fill_pools(aks_manager *m, struct json_object **report, aks_error **err);

/* destroy_sandbox_session (§4.6): idempotent; never calls the provider for an
 * attached profile. AKS_ENOTFOUND (err unset) when no session has that id. */
int aks__manager_destroy_session(aks_manager *m, const aks_mgr_caller *caller, const char *id,
                                 aks_error **err);

/* new_sandbox_session (§4.3). */
int aks__manager_new_session(aks_manager *m, const aks_mgr_caller *caller, const char *profile,
                             const char *name, aks_session_rec *out, aks_error **err);

/* list_sandbox_sessions: the conversation's, then the per_runtime ones. */
int aks__manager_list_sessions(aks_manager *m, const aks_mgr_caller *caller, aks_session_rec **out,
                               size_t *count, aks_error **err);

#endif /* AKS_CORE_SESSION_MANAGER_H */
