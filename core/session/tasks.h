/*
 * core/session/tasks.h - promoted executions (the reference's SandboxTask, §2.6),
 * kept as records of the conversation's namespace in the store, key "task:<id>":
 *   {task_id, sandbox_session_id, profile, status, submitted_at, consumed, notice,
 *    result_summary}
 * so that check_sandbox_task answers from the store, from any process.
 * Internal API (aks__ names).
 */
#ifndef AKS_CORE_SESSION_TASKS_H
#define AKS_CORE_SESSION_TASKS_H

#include "internal.h"
#include "store/store.h"

struct json_object;

/* Tasks kept per conversation: past this, recording a task drops the
 * oldest finished ones (pending ones are never dropped). */
#define AKS_TASKS_MAX 1024

/* Records a new pending task. */
int aks__task_record_pending(aks_state_store *st, const char *conversation, const char *task_id,
                             const char *session_id, const char *profile, double submitted_at,
                             aks_error **err);

/* Makes a recorded task terminal: status (succeeded, failed, timed_out), its
 * notice (may be NULL) and result_summary (taken over, even on failure). A
 * task no longer recorded is left alone. */
int aks__task_record_done(aks_state_store *st, const char *conversation, const char *task_id,
                          const char *status, const char *notice, struct json_object *summary,
                          aks_error **err);

/* A recorded task's status ("pending", ...), session id and profile (each malloc'd; pass NULL
 * for what is not wanted). AKS_ENOTFOUND (no error set) when the conversation has no such
 * task. */
int aks__task_lookup(aks_state_store *st, const char *conversation, const char *task_id,
                     char **status, char **session_id, char **profile, aks_error **err);

/* check_sandbox_task's JSON for the task in the conversation: its status and
 * session, with "result" once terminal; {"task_id", "status": "unknown"} when
 * there is no such task. */
int aks__task_json(aks_state_store *st, const char *conversation, const char *task_id, char **out,
                   aks_error **err);

#endif /* AKS_CORE_SESSION_TASKS_H */
