/*
 * core/session/manager_queue.c - the manager under `flavor: queue` (reference §5.5, with §11 items
 * 1, 2 and 6 fixed): operations leave as requests for the worker fleet, completions come back
 * through the response store, and the session a completion carries is written back so the
 * next call finds the sandbox the worker made.
 *
 * The agent side keeps what it always keeps (sessions and tasks in its state store, the
 * session lock, the idle reset on touch); the sandboxes themselves are the workers'. An idle
 * reset or destroy_sandbox_session therefore sends a destroy request, which per-group FIFO
 * orders after the session's earlier operations.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "config/settings.h"
#include "plugin/result.h"
#include "queue/worker.h"
#include "session/engine.h"
#include "session/manager_internal.h"
#include "session/tasks.h"
#include "tools/json.h"
#include "util/util.h"

/* How much longer than its policy timeout a file operation waits for its completion before
 * it is reported as not done (seconds): the queue's own latency. */
#define FILE_OP_MARGIN 30.0

static int queue_client(aks_manager *m, aks_queue_client **out, aks_error **err)
{
	int rc = AKS_OK;
	pthread_mutex_lock(&m->mu);
	if (!m->queue)
		rc = aks__queue_client_new(m->settings, &m->queue, err);
	*out = m->queue;
	pthread_mutex_unlock(&m->mu);
	return rc;
}

static int wire_op(int mgr_op)
{
	switch (mgr_op) {
	case AKS_MGR_EXECUTE_CODE:
		return AKS_WIRE_EXECUTE_CODE;
	case AKS_MGR_EXECUTE_COMMAND:
		return AKS_WIRE_EXECUTE_COMMAND;
	case AKS_MGR_UPLOAD:
		return AKS_WIRE_UPLOAD_FILE;
	default:
		return AKS_WIRE_DOWNLOAD_FILE;
	}
}

/* A request made of borrowed parts, only ever encoded (never freed). */
static void wire_fill(aks_wire_request *r, char *task_id, int op, const aks_profile *p,
                      const aks_principal *principal, const aks_session_rec *s,
                      const char *conversation, const char *agent, const aks_mgr_request *req)
{
	memset(r, 0, sizeof(*r));
	r->task_id = task_id;
	r->op = op;
	if (req) {
		r->code = (char *)req->code;
		r->language = (char *)(req->language ? req->language : "python");
		r->command = (char *)req->command;
		r->path = (char *)req->path;
		r->content = (unsigned char *)req->data;
		r->content_len = req->len;
	}
	r->profile = (char *)aks_profile_get_name(p);
	r->principal = *principal;
	r->policy = *aks_profile_get_policy(p);
	r->session = *s;
	r->ak_session_id = (char *)conversation;
	r->agent = (char *)(agent ? agent : "agent");
}

/* The session's group on the queue (NULL for none: per_call), into *key (malloc'd). */
static int session_group(const char *ns, const char *id, char **key, aks_error **err)
{
	*key = NULL;
	if (!ns)
		return AKS_OK;
	if (!(*key = aks__queue_session_key(ns, id)))
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	return AKS_OK;
}

/* How long a call waits for its completion: executions wait_timeout or the caller's wait
 * (then they are tasks); file operations, and executions whose caller waits for the whole
 * run, long enough to finish: file operations are never promoted (§11 item 2). */
static double op_wait(const submit_state *st)
{
	double wait = aks_settings_get_wait_timeout(st->m->settings);
	bool exec = st->req->op == AKS_MGR_EXECUTE_CODE || st->req->op == AKS_MGR_EXECUTE_COMMAND;
	if (exec && (wait = aks__mgr_exec_wait(st)) >= 0)
		return wait;
	double needed = aks_profile_get_policy(st->profile)->timeout + FILE_OP_MARGIN;
	return needed > wait ? needed : wait;
}

/* The completion's result and error as the call's outcome. */
static int take_outcome(submit_state *st, aks_wire_completion *c, aks_mgr_outcome *out,
                        aks_error **err)
{
	int rc = aks__queue_completion_outcome(c, err);
	if (rc < 0)
		return rc;
	int op = st->req->op;
	if (op == AKS_MGR_UPLOAD)
		return AKS_OK; /* uploads have no result to show */
	if (!c->result)        /* the reference crashed here (§11 item 22) */
		return aks__error_set(err, AKS_EBROKER,
		                      "sandbox task %s succeeded without a result; nothing to show",
		                      c->task_id);
	if (op == AKS_MGR_DOWNLOAD && aks_result_get_file_count(c->result) < 1)
		return aks__error_set(err, AKS_EBROKER,
		                      "sandbox task %s read no file from the sandbox", c->task_id);
	out->result = c->result;
	c->result = NULL;
	return AKS_OK;
}

/* A file operation whose completion did not come in time: not done as far as anyone knows. */
static int file_op_late(submit_state *st, const char *task_id, double wait, aks_error **err)
{
	char t[32];
	aks__json_format_double(wait, t, sizeof(t));
	return aks__error_set(err, AKS_ETIMEOUT,
	                      "%s of '%s' did not complete within %ss; it is queued or running as "
	                      "sandbox task %s and may still take effect: check the file before "
	                      "relying on it",
	                      st->req->op == AKS_MGR_UPLOAD ? "write_sandbox_file"
	                                                    : "read_sandbox_file",
	                      st->req->path, t, task_id);
}

/* Sends the operation and waits; *done is its completion, or NULL when it is still running
 * (then *task_id names it). */
static int send_and_wait(submit_state *st, const char *ns, const aks_session_rec *s,
                         char task_id[33], aks_wire_completion **done, bool *sent, aks_error **err)
{
	*done = NULL;
	*sent = false;
	aks_queue_client *qc = NULL;
	int rc = queue_client(st->m, &qc, err);
	if (rc == AKS_OK)
		rc = aks__uuid4_hex(task_id, err);
	aks_autofree char *group = NULL;
	if (rc == AKS_OK)
		rc = session_group(ns, s->id, &group, err);
	if (rc < 0)
		return rc;
	aks_wire_request r;
	wire_fill(&r, task_id, wire_op(st->req->op), st->profile, st->principal, s,
	          st->caller->conversation, st->caller->agent, st->req);
	rc = aks__queue_client_submit(qc, &r, group, op_wait(st), st->caller->cancel, done, err);
	*sent = rc >= 0;
	return rc == 1 ? AKS_OK : rc;
}

int aks__mgr_queue_ephemeral(submit_state *st, aks_mgr_outcome *out, aks_error **err)
{
	char id[33], task_id[33];
	int rc = aks__uuid4_hex(id, err);
	if (rc < 0)
		return rc;
	double now = aks__epoch_now();
	aks_session_rec s = {.id = id,
	                     .profile = (char *)aks_profile_get_name(st->profile),
	                     .provider_type = (char *)aks_profile_get_type(st->profile),
	                     .created_at = now,
	                     .last_used_at = now};
	aks_wire_completion *c = NULL;
	bool sent;
	rc = send_and_wait(st, NULL, &s, task_id, &c, &sent, err);
	if (rc < 0)
		return rc;
	bool exec = st->req->op == AKS_MGR_EXECUTE_CODE || st->req->op == AKS_MGR_EXECUTE_COMMAND;
	if (!c && !exec)
		return file_op_late(st, task_id, op_wait(st), err);
	if (!c) {
		rc = aks__task_record_pending(st->m->store, st->caller->conversation, task_id, "",
		                              aks_profile_get_name(st->profile), now, err);
		if (rc == AKS_OK && !(out->task_id = strdup(task_id)))
			rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
	} else {
		rc = take_outcome(st, c, out, err);
	}
	aks__wire_completion_free(c);
	/* The ephemeral id is never echoed: nothing could ever find it again. */
	if (rc == AKS_OK && !(out->session_id = strdup("")))
		rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
	return rc;
}

/* The worker's view of the session after the operation becomes ours. */
static int fold_session(aks_session_rec *s, const aks_session_rec *done)
{
	char *sid = NULL;
	if (done->sandbox_id && !(sid = strdup(done->sandbox_id)))
		return AKS_ENOMEM;
	free(s->sandbox_id);
	s->sandbox_id = sid;
	s->closed = done->closed;
	if (done->last_used_at > s->last_used_at)
		s->last_used_at = done->last_used_at;
	return AKS_OK;
}

static int queue_run(submit_state *st, aks_session_rec *s, aks_mgr_outcome *out, bool *sent,
                     aks_error **err)
{
	char task_id[33];
	aks_wire_completion *c = NULL;
	int rc = send_and_wait(st, st->ns, s, task_id, &c, sent, err);
	if (rc < 0)
		return rc;
	bool exec = st->req->op == AKS_MGR_EXECUTE_CODE || st->req->op == AKS_MGR_EXECUTE_COMMAND;
	if (!c && !exec)
		return file_op_late(st, task_id, op_wait(st), err);
	if (!c) {
		rc = aks__task_record_pending(st->m->store, st->caller->conversation, task_id,
		                              st->id, aks_profile_get_name(st->profile),
		                              s->last_used_at, err);
		if (rc == AKS_OK && !(out->task_id = strdup(task_id)))
			rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
		return rc;
	}
	/* Whatever the status: a failed operation may still have made a sandbox (§11 item 6). */
	rc = fold_session(s, &c->session) < 0 ? aks__error_set(err, AKS_ENOMEM, "out of memory")
	                                      : take_outcome(st, c, out, err);
	aks__wire_completion_free(c);
	return rc;
}

int aks__mgr_queue_stored(stored_run *r, aks_mgr_outcome *out, aks_error **err)
{
	bool sent;
	int rc = queue_run(r->st, &r->s, out, &sent, err);
	r->dirty = true;
	/* Once a request has left, a worker may make a sandbox for the session whatever this
	 * call's outcome (still running, a file operation past its wait): the session is
	 * recorded even with no sandbox yet, so it is listed and a later completion has a
	 * session to leave its sandbox in. */
	r->existed = r->existed || sent;
	return rc;
}

void aks__mgr_queue_destroy(aks_manager *m, const aks_profile *p, const char *conversation,
                            aks_session_rec *s)
{
	if (!p) {
		aks__engine_destroy(NULL, s); /* no profile, no workers to ask: only forgotten */
		return;
	}
	aks_queue_client *qc = NULL;
	aks_error *e = NULL;
	char task_id[33];
	int rc = queue_client(m, &qc, &e);
	if (rc == AKS_OK)
		rc = aks__uuid4_hex(task_id, &e);
	const char *ns = aks__session_ns(p, conversation);
	aks_autofree char *group = NULL;
	if (rc == AKS_OK)
		rc = session_group(ns, s->id, &group, &e);
	if (rc == AKS_OK) {
		/* Like the original's destroy, it acts as the plain agent. */
		aks_principal agent;
		aks_principal_init(&agent, "agent");
		aks_wire_request r;
		aks_wire_completion *none = NULL;
		wire_fill(&r, task_id, AKS_WIRE_DESTROY, p, &agent, s, conversation, "agent", NULL);
		rc = aks__queue_client_submit(qc, &r, group, 0, NULL, &none, &e);
		aks__wire_completion_free(none);
	}
	if (rc < 0)
		aks__log(AKS_LOG_WARNING, "sandbox",
		         "cannot send the destroy of sandbox %s (session '%s') to the workers: %s; "
		         "their idle sweep will reclaim it",
		         s->sandbox_id ? s->sandbox_id : "(none)", s->id, aks_error_message(e));
	aks_error_free(e);
	free(s->sandbox_id);
	s->sandbox_id = NULL;
	s->closed = true;
}

/* ---- check_sandbox_task ---- */

static struct json_object *summary_of(aks_manager *m, const aks_wire_completion *c)
{
	aks_tool_output to;
	if (c->result)
		aks__tool_output_from_result(c->result, &to);
	const char *error = c->status == AKS_WIRE_SUCCEEDED ? NULL
	                    : c->error                      ? c->error
	                                                    : "sandbox operation failed";
	return aks__tool_summary_new(c->result ? &to : NULL, error,
	                             c->result ? aks_result_get_notice(c->result) : NULL,
	                             (size_t)aks_settings_get_tool_output_max_chars(m->settings));
}

/* The session a finished task ran on takes the sandbox it left, unless a later operation
 * already told the session something newer. Best effort: logged. */
static void fold_task_session(aks_manager *m, const char *conversation, const char *profile,
                              const aks_wire_completion *c)
{
	aks_profile *p = NULL;
	if (!profile || !c->session.id ||
	    aks_settings_find_profile(m->settings, profile, &p, NULL) < 0 ||
	    aks_profile_get_scope(p) == AKS_SCOPE_PER_CALL)
		return;
	const char *ns = aks__session_ns(p, conversation);
	aks_store_lock *lk = NULL;
	aks_error *e = NULL;
	aks_autofree char *key = NULL;
	if (asprintf(&key, "session:%s", c->session.id) < 0) {
		key = NULL;
		return;
	}
	if (aks__store_lock(m->store, ns, key, NULL, &lk, &e) == AKS_OK) {
		aks_session_rec s;
		if (aks__sessions_find_in(m->store, ns, c->session.id, &s, NULL) == AKS_OK) {
			if (c->session.last_used_at >= s.last_used_at &&
			    (fold_session(&s, &c->session) < 0 ||
			     aks__sessions_save(m->store, ns, &s, &e) < 0))
				aks__log(AKS_LOG_WARNING, "sandbox",
				         "cannot save sandbox session '%s': %s", s.id,
				         e ? aks_error_message(e) : "out of memory");
			aks__session_clear(&s);
		}
		aks__store_unlock(m->store, lk);
	}
	aks_error_free(e);
}

/* A pending task whose completion has arrived is made terminal in the state store, and its
 * session takes the sandbox the worker left (when that is the newer news). No-op otherwise. */
static int resolve_task(aks_manager *m, const char *conversation, const char *task_id,
                        aks_error **err)
{
	aks_autofree char *status = NULL, *profile = NULL;
	int rc = aks__task_lookup(m->store, conversation, task_id, &status, NULL, &profile, err);
	if (rc == AKS_ENOTFOUND || (rc == AKS_OK && strcmp(status, "pending") != 0))
		return AKS_OK;
	aks_queue_client *qc = NULL;
	if (rc == AKS_OK)
		rc = queue_client(m, &qc, err);
	aks_wire_completion *c = NULL;
	if (rc == AKS_OK)
		rc = aks__queue_client_result(qc, task_id, conversation, &c, err);
	if (rc == AKS_ENOTFOUND)
		return AKS_OK; /* still pending */
	if (rc < 0)
		return rc;
	fold_task_session(m, conversation, profile, c);
	struct json_object *summary = summary_of(m, c);
	rc = summary ? aks__task_record_done(
	                   m->store, conversation, task_id, aks__wire_status_name(c->status),
	                   c->result ? aks_result_get_notice(c->result) : NULL, summary, err)
	             : aks__error_set(err, AKS_ENOMEM, "out of memory");
	aks__wire_completion_free(c);
	return rc;
}

/* A task this state store has no record of (submitted from a host with another state
 * store): answered from the response store when the completion is there and belongs to the
 * conversation; AKS_ENOTFOUND (no error set) otherwise, and for tasks the state store does
 * know (they are answered from it). */
static int task_direct(aks_manager *m, const char *conversation, const char *task_id, char **out,
                       aks_error **err)
{
	*out = NULL;
	int rc = aks__task_lookup(m->store, conversation, task_id, NULL, NULL, NULL, err);
	if (rc == AKS_OK)
		return AKS_ENOTFOUND; /* known here: the state store answers */
	if (rc != AKS_ENOTFOUND)
		return rc;
	aks_queue_client *qc = NULL;
	aks_wire_completion *c = NULL;
	rc = queue_client(m, &qc, err);
	if (rc == AKS_OK)
		rc = aks__queue_client_result(qc, task_id, conversation, &c, err);
	if (rc < 0)
		return rc;
	struct json_object *summary = summary_of(m, c);
	if (summary)
		*out = aks__tool_json_task(task_id, aks__wire_status_name(c->status),
		                           c->session.id ? c->session.id : "", summary);
	json_object_put(summary);
	aks__wire_completion_free(c);
	return *out ? AKS_OK : aks__error_set(err, AKS_ENOMEM, "out of memory");
}

int aks__mgr_queue_task(aks_manager *m, const char *conversation, const char *task_id, char **out,
                        aks_error **err)
{
	/* A pending task's completion may be waiting in the response store. */
	int rc = resolve_task(m, conversation, task_id, err);
	if (rc == AKS_OK)
		rc = task_direct(m, conversation, task_id, out, err);
	return rc;
}
