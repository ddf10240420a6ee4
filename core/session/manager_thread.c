/*
 * core/session/manager_thread.c - the manager under `flavor: thread` (reference §5.4): each
 * submission is a job on the thread broker's pool (broker_thread.h). The submitter waits up
 * to broker.wait_timeout for an execution, then leaves it running as a task whose outcome
 * the job records in the state store when it ends; file operations are waited for.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "plugin/result.h"
#include "session/broker_thread.h"
#include "session/manager_internal.h"
#include "session/tasks.h"
#include "tools/json.h"
#include "util/util.h"

/* A submission handed to the pool: it owns copies of everything it uses,
 * because a promoted job outlives the caller's arguments and cancel token. */
typedef struct mgr_job {
	submit_state st;
	aks_mgr_caller caller;
	aks_mgr_request req;
	aks_resolved_principal *principal;
	aks_cancel *cancel; /* the job's own; the caller's is relayed while it waits */
	char *conversation, *ns, *id, *code, *language, *command, *path, *data;
	char task_id[33];
	double submitted_at;
	aks_mgr_outcome out;
	int rc;
	aks_error *err;
} mgr_job;

static void job_free(void *ctx)
{
	mgr_job *j = ctx;
	aks_resolved_principal_free(j->principal);
	aks_cancel_free(j->cancel);
	free(j->conversation);
	free(j->ns);
	free(j->id);
	free(j->code);
	free(j->language);
	free(j->command);
	free(j->path);
	free(j->data);
	aks__output_tap_unref(j->req.output);
	aks__mgr_outcome_clear(&j->out);
	aks_error_free(j->err);
	free(j);
}

static void job_run(void *ctx)
{
	mgr_job *j = ctx;
	j->rc = aks__mgr_execute(&j->st, &j->out, &j->err);
}

static const char *job_session_id(const mgr_job *j)
{
	return j->st.ephemeral ? "" : j->id; /* per_call ids are never echoed */
}

static int job_promote(void *ctx)
{
	mgr_job *j = ctx;
	aks_error *e = NULL;
	int rc =
	    aks__task_record_pending(j->st.m->store, j->conversation, j->task_id, job_session_id(j),
	                             aks_profile_get_name(j->st.profile), j->submitted_at, &e);
	if (rc < 0)
		aks__log(AKS_LOG_WARNING, "sandbox",
		         "cannot record sandbox task %s (%s); waiting for the operation instead",
		         j->task_id, aks_error_message(e));
	aks_error_free(e);
	return rc;
}

/* The promoted run has ended: its outcome goes to the store (§4.5). */
static void job_promoted_done(void *ctx)
{
	mgr_job *j = ctx;
	const char *status = j->rc == AKS_OK         ? "succeeded"
	                     : j->rc == AKS_ETIMEOUT ? "timed_out"
	                                             : "failed";
	aks_tool_output to;
	if (j->out.result)
		aks__tool_output_from_result(j->out.result, &to);
	const char *error = j->rc == AKS_OK ? NULL
	                    : j->err        ? aks_error_message(j->err)
	                                    : "sandbox operation failed";
	struct json_object *summary = aks__tool_summary_new(
	    j->out.result ? &to : NULL, error, j->out.notice,
	    (size_t)aks_settings_get_tool_output_max_chars(j->st.m->settings));
	aks_error *e = NULL;
	if (!summary)
		aks__error_set(&e, AKS_ENOMEM, "out of memory");
	if (!summary || aks__task_record_done(j->st.m->store, j->conversation, j->task_id, status,
	                                      j->out.notice, summary, &e) < 0)
		aks__log(AKS_LOG_WARNING, "sandbox",
		         "cannot record the outcome of sandbox task %s: %s", j->task_id,
		         aks_error_message(e));
	aks_error_free(e);
}

static void job_cancel(void *ctx)
{
	aks_cancel_trigger(((mgr_job *)ctx)->cancel);
}

static const aks_broker_ops job_ops = {
    .run = job_run,
    .promote = job_promote,
    .promoted_done = job_promoted_done,
    .cancel = job_cancel,
    .free = job_free,
};

static int dup_opt(char **dst, const char *src)
{
	*dst = NULL;
	return !src || (*dst = strdup(src)) ? 0 : -1;
}

/* Copies a prepared submission into a job that owns everything it uses. */
static int job_new(const submit_state *st, aks_resolved_principal **principal, mgr_job **out,
                   aks_error **err)
{
	mgr_job *j = calloc(1, sizeof(*j));
	if (!j)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	const aks_mgr_request *r = st->req;
	int rc = aks_cancel_new(&j->cancel, err);
	if (rc == AKS_OK)
		rc = aks__uuid4_hex(j->task_id, err);
	if (rc < 0) {
		job_free(j);
		return rc;
	}
	if (dup_opt(&j->conversation, st->caller->conversation) < 0 ||
	    dup_opt(&j->ns, st->ns) < 0 || dup_opt(&j->id, st->id) < 0 ||
	    dup_opt(&j->code, r->code) < 0 || dup_opt(&j->language, r->language) < 0 ||
	    dup_opt(&j->command, r->command) < 0 || dup_opt(&j->path, r->path) < 0 ||
	    (r->data && !(j->data = malloc(r->len + 1)))) {
		job_free(j);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	if (r->data)
		memcpy(j->data, r->data, r->len);
	j->req = (aks_mgr_request){.op = r->op,
	                           .code = j->code,
	                           .language = j->language,
	                           .command = j->command,
	                           .path = j->path,
	                           .data = j->data,
	                           .len = r->len,
	                           /* A promoted run outlives the caller's reference. */
	                           .output = aks__output_tap_ref(r->output)};
	j->caller = (aks_mgr_caller){.conversation = j->conversation, .cancel = j->cancel};
	j->st = *st;
	j->st.caller = &j->caller;
	j->st.req = &j->req;
	j->st.ns = j->ns;
	j->st.id = j->id;
	j->principal = *principal; /* the job owns the principal st points into */
	*principal = NULL;
	j->submitted_at = aks__epoch_now();
	*out = j;
	return AKS_OK;
}

/* The manager's pool, started on first use. */
static int pool_of(aks_manager *m, aks_broker_pool **out, aks_error **err)
{
	int rc = AKS_OK;
	pthread_mutex_lock(&m->mu);
	if (!m->pool)
		rc = aks__broker_pool_new(AKS_BROKER_THREADS, &m->pool, err);
	*out = m->pool;
	pthread_mutex_unlock(&m->mu);
	return rc;
}

/* The outcome of a job that ran to its end while the submitter waited; frees the job. */
static int take_job_outcome(mgr_job *j, aks_mgr_outcome *out, aks_error **err)
{
	*out = j->out;
	memset(&j->out, 0, sizeof(j->out));
	int rc = j->rc;
	if (rc < 0) {
		rc = aks__error_pass(err, rc, j->err);
		j->err = NULL;
	}
	job_free(j);
	return rc;
}

int aks__mgr_thread_dispatch(submit_state *st, aks_resolved_principal **principal,
                             aks_mgr_outcome *out, aks_error **err)
{
	aks_manager *m = st->m;
	aks_broker_pool *pool = NULL;
	mgr_job *j = NULL;
	int rc = pool_of(m, &pool, err);
	if (rc < 0 || (rc = job_new(st, principal, &j, err)) < 0)
		return rc;
	bool exec = st->req->op == AKS_MGR_EXECUTE_CODE || st->req->op == AKS_MGR_EXECUTE_COMMAND;
	double wait = exec ? aks__mgr_exec_wait(st) : -1;
	/* What the pending answer needs, before the pool may free the job. */
	char task_id[33];
	memcpy(task_id, j->task_id, sizeof(task_id));
	aks_autofree char *echo = strdup(job_session_id(j));
	/* One session's jobs run in order, one at a time; per_call ones need no order. The
	 * length prefix keeps ("a/b", "c") and ("a", "b/c") apart. */
	aks_autofree char *key = NULL;
	if (!echo ||
	    (!st->ephemeral && asprintf(&key, "%zu:%s/%s", strlen(st->ns), st->ns, st->id) < 0)) {
		key = NULL;
		job_free(j);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	rc = aks__broker_submit(pool, &job_ops, j, key, wait, st->caller->cancel, err);
	if (rc < 0) {
		job_free(j);
		return rc;
	}
	if (rc == 0)
		return take_job_outcome(j, out, err);
	/* promoted: the pool owns the job now */
	if (!(out->task_id = strdup(task_id)) || !(out->session_id = strdup(echo)))
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	return AKS_OK;
}
