/*
 * core/session/tasks.c - promoted executions in the state store.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "session/tasks.h"
#include "tools/json.h"

/* The record key of a task: "task:<id>". NULL on ENOMEM. */
static char *task_key(const char *id)
{
	char *key = NULL;
	return asprintf(&key, "task:%s", id) < 0 ? NULL : key;
}

static const char *str_member(struct json_object *o, const char *key)
{
	struct json_object *v = json_object_object_get(o, key);
	return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

/* The finished tasks of a conversation, oldest first, to evict. */
typedef struct finished {
	char **keys;
	double *at;
	size_t n, cap, total;
} finished;

static int note_task(void *ctx, const char *key, struct json_object *t)
{
	finished *f = ctx;
	f->total++;
	const char *status = str_member(t, "status");
	if (!status || strcmp(status, "pending") == 0)
		return AKS_OK; /* pending tasks are never dropped */
	if (f->n == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 64;
		char **k = realloc(f->keys, cap * sizeof(*k));
		if (k)
			f->keys = k;
		double *a = k ? realloc(f->at, cap * sizeof(*a)) : NULL;
		if (!a)
			return AKS_ENOMEM;
		f->at = a;
		f->cap = cap;
	}
	if (!(f->keys[f->n] = strdup(key)))
		return AKS_ENOMEM;
	f->at[f->n++] = json_object_get_double(json_object_object_get(t, "submitted_at"));
	return AKS_OK;
}

static int drop_txn(struct json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)ctx;
	(void)err;
	const char *status = str_member(rec, "status");
	if (status && strcmp(status, "pending") != 0) {
		aks__store_clear_record(rec);
		*changed = true;
	}
	return AKS_OK;
}

/* Drops the oldest finished tasks while the conversation keeps AKS_TASKS_MAX or more. Best
 * effort: a failure leaves a few tasks too many, never loses a pending one. */
static void evict(aks_state_store *st, const char *conversation)
{
	finished f = {0};
	if (aks__store_scan(st, conversation, "task:", note_task, &f, NULL) == AKS_OK) {
		while (f.total >= AKS_TASKS_MAX && f.n > 0) {
			size_t oldest = 0;
			for (size_t i = 1; i < f.n; i++)
				if (f.at[i] < f.at[oldest])
					oldest = i;
			aks__store_update(st, conversation, f.keys[oldest], drop_txn, NULL, NULL);
			free(f.keys[oldest]);
			f.keys[oldest] = f.keys[--f.n];
			f.at[oldest] = f.at[f.n];
			f.total--;
		}
	}
	for (size_t i = 0; i < f.n; i++)
		free(f.keys[i]);
	free(f.keys);
	free(f.at);
}

typedef struct pending_ctx {
	const char *task_id, *session_id, *profile;
	double submitted_at;
} pending_ctx;

static int pending_txn(struct json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)err;
	pending_ctx *c = ctx;
	struct json_object *t = rec;
	json_object_object_add(t, "task_id", json_object_new_string(c->task_id));
	json_object_object_add(t, "sandbox_session_id", json_object_new_string(c->session_id));
	json_object_object_add(t, "profile", json_object_new_string(c->profile));
	json_object_object_add(t, "status", json_object_new_string("pending"));
	json_object_object_add(t, "submitted_at", json_object_new_double(c->submitted_at));
	json_object_object_add(t, "consumed", json_object_new_boolean(false));
	json_object_object_add(t, "notice", NULL);
	json_object_object_add(t, "result_summary", NULL);
	*changed = true;
	return AKS_OK;
}

int aks__task_record_pending(aks_state_store *st, const char *conversation, const char *task_id,
                             const char *session_id, const char *profile, double submitted_at,
                             aks_error **err)
{
	aks_autofree char *key = task_key(task_id);
	if (!key)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	evict(st, conversation);
	pending_ctx c = {task_id, session_id, profile, submitted_at};
	return aks__store_update(st, conversation, key, pending_txn, &c, err);
}

typedef struct done_ctx {
	const char *task_id, *status, *notice;
	struct json_object *summary;
} done_ctx;

static int done_txn(struct json_object *t, bool *changed, void *ctx, aks_error **err)
{
	(void)err;
	done_ctx *c = ctx;
	if (json_object_object_length(t) == 0)
		return AKS_OK; /* no longer recorded */
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
	aks_autofree char *key = task_key(task_id);
	done_ctx c = {task_id, status, notice, summary};
	int rc = key ? aks__store_update(st, conversation, key, done_txn, &c, err)
	             : aks__error_set(err, AKS_ENOMEM, "out of memory");
	json_object_put(summary);
	return rc;
}

static int dup_member(struct json_object *t, const char *key, char **out)
{
	if (!out)
		return AKS_OK;
	const char *v = str_member(t, key);
	*out = v ? strdup(v) : NULL;
	return !v || *out ? AKS_OK : AKS_ENOMEM;
}

int aks__task_lookup(aks_state_store *st, const char *conversation, const char *task_id,
                     char **status, char **session_id, char **profile, aks_error **err)
{
	char **outs[] = {status, session_id, profile};
	for (size_t i = 0; i < 3; i++)
		if (outs[i])
			*outs[i] = NULL;
	if (!task_id || !*task_id)
		return AKS_ENOTFOUND;
	aks_autofree char *key = task_key(task_id);
	if (!key)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	struct json_object *t = NULL;
	aks_error *e = NULL;
	int rc = aks__store_get(st, conversation, key, &t, &e);
	if (rc == AKS_EINVAL) /* a task id no store could hold names no task */
		rc = AKS_ENOTFOUND;
	if (rc < 0) {
		if (rc != AKS_ENOTFOUND && err && !*err) {
			*err = e;
			e = NULL;
		}
		aks_error_free(e);
		return rc;
	}
	if (!str_member(t, "status"))
		rc = AKS_ENOTFOUND;
	else if (dup_member(t, "status", status) < 0 ||
	         dup_member(t, "sandbox_session_id", session_id) < 0 ||
	         dup_member(t, "profile", profile) < 0)
		rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
	json_object_put(t);
	if (rc < 0)
		for (size_t i = 0; i < 3; i++)
			if (outs[i]) {
				free(*outs[i]);
				*outs[i] = NULL;
			}
	return rc;
}

int aks__task_json(aks_state_store *st, const char *conversation, const char *task_id, char **out,
                   aks_error **err)
{
	struct json_object *t = NULL;
	int rc = AKS_ENOTFOUND;
	if (task_id && *task_id) {
		aks_autofree char *key = task_key(task_id);
		if (!key)
			return aks__error_set(err, AKS_ENOMEM, "out of memory");
		rc = aks__store_get(st, conversation, key, &t, err);
		if (rc == AKS_EINVAL) { /* a task id no store could hold names no task */
			aks_error_free(err ? *err : NULL);
			if (err)
				*err = NULL;
			rc = AKS_ENOTFOUND;
		}
	}
	if (rc < 0 && rc != AKS_ENOTFOUND)
		return rc;
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
	json_object_put(t);
	return *out ? AKS_OK : aks__error_set(err, AKS_ENOMEM, "out of memory");
}
