/*
 * core/tasks.c - promoted executions in the state store.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "tasks.h"
#include "tools_json.h"

static struct json_object *tasks_of(struct json_object *doc, bool create)
{
	struct json_object *t = json_object_object_get(doc, "tasks");
	if (t && json_object_is_type(t, json_type_object))
		return t;
	if (!create)
		return NULL;
	t = json_object_new_object();
	if (t)
		json_object_object_add(doc, "tasks", t);
	return t;
}

static const char *str_member(struct json_object *o, const char *key)
{
	struct json_object *v = json_object_object_get(o, key);
	return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

/* Drops the oldest finished tasks while there are AKS_TASKS_MAX or more. */
static void evict(struct json_object *tasks)
{
	while (json_object_object_length(tasks) >= AKS_TASKS_MAX) {
		const char *oldest = NULL;
		double when = 0;
		json_object_object_foreach(tasks, key, t)
		{
			const char *status = str_member(t, "status");
			double at =
			    json_object_get_double(json_object_object_get(t, "submitted_at"));
			if (status && strcmp(status, "pending") != 0 && (!oldest || at < when)) {
				oldest = key;
				when = at;
			}
		}
		if (!oldest)
			return;
		json_object_object_del(tasks, oldest);
	}
}

typedef struct pending_ctx {
	const char *task_id, *session_id, *profile;
	double submitted_at;
} pending_ctx;

static int pending_txn(struct json_object *doc, bool *changed, void *ctx, aks_error **err)
{
	pending_ctx *c = ctx;
	struct json_object *tasks = tasks_of(doc, true), *t = json_object_new_object();
	if (!tasks || !t) {
		json_object_put(t);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	evict(tasks);
	json_object_object_add(t, "task_id", json_object_new_string(c->task_id));
	json_object_object_add(t, "sandbox_session_id", json_object_new_string(c->session_id));
	json_object_object_add(t, "profile", json_object_new_string(c->profile));
	json_object_object_add(t, "status", json_object_new_string("pending"));
	json_object_object_add(t, "submitted_at", json_object_new_double(c->submitted_at));
	json_object_object_add(t, "consumed", json_object_new_boolean(false));
	json_object_object_add(t, "notice", NULL);
	json_object_object_add(t, "result_summary", NULL);
	json_object_object_add(tasks, c->task_id, t);
	*changed = true;
	return AKS_OK;
}

int aks__task_record_pending(aks_state_store *st, const char *conversation, const char *task_id,
                             const char *session_id, const char *profile, double submitted_at,
                             aks_error **err)
{
	pending_ctx c = {task_id, session_id, profile, submitted_at};
	return aks__store_update(st, conversation, pending_txn, &c, err);
}

typedef struct done_ctx {
	const char *task_id, *status, *notice;
	struct json_object *summary;
} done_ctx;

static int done_txn(struct json_object *doc, bool *changed, void *ctx, aks_error **err)
{
	(void)err;
	done_ctx *c = ctx;
	struct json_object *tasks = tasks_of(doc, false);
	struct json_object *t = tasks ? json_object_object_get(tasks, c->task_id) : NULL;
	if (!t || !json_object_is_type(t, json_type_object))
		return AKS_OK;
	json_object_object_add(t, "status", json_object_new_string(c->status));
	json_object_object_add(t, "notice", c->notice ? json_object_new_string(c->notice) : NULL);
	json_object_object_add(t, "result_summary", json_object_get(c->summary));
	*changed = true;
	return AKS_OK;
}

int aks__task_record_done(aks_state_store *st, const char *conversation, const char *task_id,
                          const char *status, const char *notice, struct json_object *summary,
                          aks_error **err)
{
	done_ctx c = {task_id, status, notice, summary};
	int rc = aks__store_update(st, conversation, done_txn, &c, err);
	json_object_put(summary);
	return rc;
}

int aks__task_json(aks_state_store *st, const char *conversation, const char *task_id, char **out,
                   aks_error **err)
{
	struct json_object *doc = NULL;
	int rc = aks__store_read(st, conversation, &doc, err);
	if (rc < 0)
		return rc;
	struct json_object *tasks = tasks_of(doc, false);
	struct json_object *t = tasks && task_id ? json_object_object_get(tasks, task_id) : NULL;
	const char *status = t ? str_member(t, "status") : NULL;
	if (!status) {
		*out = aks__tool_json_task_unknown(task_id ? task_id : "");
	} else {
		struct json_object *summary = json_object_object_get(t, "result_summary");
		const char *sid = str_member(t, "sandbox_session_id");
		*out = aks__tool_json_task(task_id, status, sid ? sid : "",
		                           strcmp(status, "pending") != 0 &&
		                                   json_object_is_type(summary, json_type_object)
		                               ? summary
		                               : NULL);
	}
	json_object_put(doc);
	return *out ? AKS_OK : aks__error_set(err, AKS_ENOMEM, "out of memory");
}
