/*
 * core/session/manager.c - profiles, sessions and the provider calls behind the tools
 * (reference §4 and the embedded broker's worker, §5.2-5.3).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "plugin/result.h"
#include "session/broker_thread.h"
#include "session/engine.h"
#include "session/manager.h"
#include "session/manager_internal.h"
#include "session/tasks.h"
#include "tools/json.h"
#include "util/util.h"

void aks__mgr_outcome_clear(aks_mgr_outcome *o)
{
	if (!o)
		return;
	aks_result_free(o->result);
	free(o->session_id);
	free(o->notice);
	free(o->task_id);
	memset(o, 0, sizeof(*o));
}

int aks__manager_new(aks_settings *settings, aks_state_store *store, aks_manager **out,
                     aks_error **err)
{
	aks_manager *m = calloc(1, sizeof(*m));
	if (!m)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	m->settings = settings;
	m->store = store;
	/* `thread` runs on the pool; `embedded` runs inline and never promotes. */
	const char *flavor = aks_settings_get_broker_flavor(settings);
	m->threaded = strcmp(flavor, "thread") == 0;
	m->queued = strcmp(flavor, "queue") == 0;
	m->remote = !m->threaded && !m->queued && strcmp(flavor, "embedded") != 0;
	pthread_mutex_init(&m->mu, NULL);
	*out = m;
	return AKS_OK;
}

void aks__manager_free(aks_manager *m)
{
	if (!m)
		return;
	/* First: running work still uses the store. */
	aks__broker_pool_free(m->pool);
	aks__queue_client_free(m->queue);
	pthread_mutex_destroy(&m->mu);
	for (size_t i = 0; i < m->n_unconfigured; i++)
		free(m->unconfigured[i]);
	free(m->unconfigured);
	free(m);
}

int aks__manager_check_conversation(const char *conversation, aks_error **err)
{
	if (!conversation || !*conversation)
		return aks__error_set(err, AKS_EINVAL, "a conversation id is required");
	/* '@' names are the store's reserved namespaces (AKS_STORE_NS_RUNTIME):
	 * a conversation called "@runtime" would otherwise own every
	 * per_runtime sandbox of the host. */
	if (conversation[0] == '@')
		return aks__error_set(err, AKS_EINVAL,
		                      "conversation id '%s' is reserved: ids starting with '@' "
		                      "name the store's own namespaces",
		                      conversation);
	return aks__store_name_check("conversation id", conversation, err);
}

/* Passes a library error on to the caller's err, or frees it. */
static int pass_error(aks_error **err, int rc, aks_error *e)
{
	if (err && !*err)
		*err = e;
	else
		aks_error_free(e);
	return rc;
}

/* ---- the per-session lock ---- */

/*
 * Takes the session's lock in the store, waiting for other threads and processes
 * (and, with a shared store, other hosts); `cancel` ends the wait. The lock's name
 * is the session's record key, in a space of its own.
 */
static int lock_session(aks_manager *m, const char *ns, const char *id, aks_cancel *cancel,
                        aks_store_lock **lk, aks_error **err)
{
	aks_autofree char *key = NULL;
	if (asprintf(&key, "session:%s", id) < 0) {
		key = NULL;
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	aks_call call;
	aks_call_init(&call, 0, NULL, NULL, cancel);
	int rc = aks__store_lock(m->store, ns, key, &call, lk, err);
	if (rc < 0 && rc != AKS_ECANCELLED && err && *err)
		aks__error_prefix(*err, "cannot lock sandbox session '%s'", id);
	return rc;
}

static void unlock_session(aks_manager *m, aks_store_lock *lk)
{
	aks__store_unlock(m->store, lk);
}

/* ---- provider calls: engine.c ---- */

/* Puts the manager's notice on the outcome (and on the result unless it has its own). */
static int set_notice(aks_mgr_outcome *out, const char *notice, aks_error **err)
{
	if (!notice)
		return AKS_OK;
	if (out->result && !aks_result_get_notice(out->result) &&
	    aks__result_set_notice(out->result, notice) < 0)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	const char *shown = out->result && aks_result_get_notice(out->result)
	                        ? aks_result_get_notice(out->result)
	                        : notice;
	if (!(out->notice = strdup(shown)))
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	return AKS_OK;
}

/* ---- submission ---- */

static void prepare_call(const submit_state *st, aks_call *call)
{
	const aks_policy *policy = aks_profile_get_policy(st->profile);
	aks_call_init(call, policy->timeout, policy, st->principal, st->caller->cancel);
}

/* per_call: a sandbox created and destroyed around the operation, even when it fails. */
static int submit_ephemeral(submit_state *st, aks_mgr_outcome *out, aks_error **err)
{
	char id[33];
	int rc = aks__uuid4_hex(id, err);
	if (rc < 0)
		return rc;
	aks_session_rec s = {.id = id};
	aks_sandbox *sb = NULL;
	bool recreated;
	aks_call call;
	prepare_call(st, &call);
	rc = aks__engine_acquire(st->profile, &s, &call, &sb, &recreated, NULL, err);
	if (rc < 0)
		return rc;
	s.sandbox_id = strdup(aks_sandbox_get_id(sb));
	if (!s.sandbox_id) {
		aks_sandbox_close(sb);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	prepare_call(st, &call); /* the operation gets the whole timeout */
	rc = aks__engine_run_op(sb, st->req, &call, &out->result, err);
	aks_sandbox_close(sb);
	aks__engine_destroy(st->profile, &s);
	/* The ephemeral id is never echoed: nothing could ever find it again. */
	if (rc == AKS_OK && !(out->session_id = strdup("")))
		rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
	return rc;
}

static int new_default_session(const aks_profile *p, const char *id, double now, aks_session_rec *s,
                               aks_error **err)
{
	memset(s, 0, sizeof(*s));
	s->id = strdup(id);
	s->profile = strdup(aks_profile_get_name(p));
	s->provider_type = strdup(aks_profile_get_type(p));
	s->created_at = s->last_used_at = now;
	if (!s->id || !s->profile || !s->provider_type) {
		aks__session_clear(s);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	return AKS_OK;
}

/* The idle reset on touch (§4.4 step 3); returns the notice or NULL. Under the queue
 * flavor the sandbox is the workers' to destroy: they get a destroy request, which reaches
 * them before the operation that follows. */
static char *idle_reset(const submit_state *st, aks_session_rec *s, double now, bool *fail)
{
	const aks_profile *p = st->profile;
	int64_t idle = aks_profile_get_idle_timeout(p);
	*fail = false;
	if (!s->sandbox_id || !(now - s->last_used_at > (double)idle))
		return NULL;
	if (st->m->queued)
		aks__mgr_queue_destroy(st->m, p, st->caller->conversation, s);
	else
		aks__engine_destroy(p, s);
	s->closed = false;
	s->created_at = now;
	char *notice = aks__engine_idle_notice(p, s->id);
	*fail = notice == NULL;
	return notice;
}

/* per_session and per_runtime: the stored session, under its lock from lookup to write-back. */
static int submit_stored(submit_state *st, const char *ns, const char *id, bool explicit_id,
                         aks_mgr_outcome *out, aks_error **err)
{
	aks_state_store *store = st->m->store;
	aks_store_lock *lk = NULL;
	int rc = lock_session(st->m, ns, id, st->caller->cancel, &lk, err);
	if (rc < 0)
		return rc;
	aks_session_rec s;
	double now = aks__epoch_now();
	rc = aks__sessions_find_in(store, ns, id, &s, err);
	bool existed = rc == AKS_OK;
	if (rc == AKS_ENOTFOUND)
		rc = explicit_id ? aks__error_set(err, AKS_ESESSION_NOT_FOUND,
		                                  "unknown sandbox session '%s'", id)
		                 : new_default_session(st->profile, id, now, &s, err);
	if (rc < 0) {
		unlock_session(st->m, lk);
		return rc;
	}
	bool fail;
	aks_autofree char *notice = idle_reset(st, &s, now, &fail);
	bool dirty = notice != NULL;
	if (fail) {
		rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
		goto done;
	}
	if (!notice && s.reset_notice && !(notice = strdup(s.reset_notice))) {
		rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
		goto done;
	}
	s.last_used_at = now;

	if (st->m->queued) {
		bool sent;
		rc = aks__mgr_queue_run(st, &s, out, &sent, err);
		dirty = true;
		/* Once a request has left, a worker may make a sandbox for the session whatever
		 * this call's outcome (still running, a file operation past its wait): the
		 * session is recorded even with no sandbox yet, so it is listed and a later
		 * completion has a session to leave its sandbox in. */
		existed = existed || sent;
		if (rc == AKS_OK && out->task_id) {
			/* Still running: the notice waits for a call that shows a result. */
			if (notice && !s.reset_notice) {
				s.reset_notice = notice;
				notice = NULL;
			}
			if (!(out->session_id = strdup(id)))
				rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
			goto done;
		}
		goto told;
	}
	aks_sandbox *sb = NULL;
	bool recreated, cached;
	bool use_cache = true;
	aks_call call;
again:
	prepare_call(st, &call);
	rc = aks__engine_acquire(st->profile, &s, &call, &sb, &recreated,
	                         use_cache ? &cached : NULL, err);
	if (rc < 0)
		goto done;
	if (!use_cache)
		cached = false;
	const char *sid = aks_sandbox_get_id(sb);
	if (!s.sandbox_id || strcmp(s.sandbox_id, sid) != 0) {
		/* Record the new sandbox before using it, so that no failure below
		 * (nor a crash) can leave it behind unrecorded. */
		char *copy = strdup(sid);
		if (!copy) {
			/* Unrecorded, it would be left behind (sid is the handle's: first). */
			aks__engine_destroy_sandbox(st->profile, sid);
			aks_sandbox_close(sb);
			rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
			goto done;
		}
		free(s.sandbox_id);
		s.sandbox_id = copy;
		s.closed = false;
		rc = aks__sessions_save(store, ns, &s, err);
		dirty = rc < 0;
		if (rc < 0) {
			aks_sandbox_close(sb);
			aks__engine_destroy(st->profile, &s);
			goto done;
		}
	}
	if (recreated) {
		free(notice);
		if (!(notice = aks__engine_recreated_notice(s.id))) {
			rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
			aks_sandbox_close(sb);
			goto done;
		}
	}
	prepare_call(st, &call); /* the operation gets the whole timeout */
	rc = aks__engine_run_op(sb, st->req, &call, &out->result, err);
	if (rc == AKS_EGONE && cached) {
		/* The kept handle's sandbox went away behind this process's back: ask the
		 * backend, which self-heals (a new sandbox and its notice), and run it there. */
		aks_sandbox_close(sb);
		if (err && *err) {
			aks_error_free(*err);
			*err = NULL;
		}
		use_cache = false;
		goto again;
	}
	/* §11 item 8 closed handles after every call; kept, the sandbox's agent and its Python
	 * session live on for the session's next call (core/plugin/handle_cache.h). */
	aks__engine_release(st->profile, sb, rc);
	s.last_used_at = aks__epoch_now();
	dirty = true;
told:
	if (rc == AKS_OK)
		rc = set_notice(out, notice, err);
	if (rc == AKS_OK) {
		/* The reaper's notice has been told: it is not told again. */
		free(s.reset_notice);
		s.reset_notice = NULL;
	}
	if (rc == AKS_OK && !(out->session_id = strdup(id)))
		rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
done:
	if (rc < 0 && notice && !s.reset_notice) {
		/* The call failed, so the agent was not told its workspace was reset: keep the
		 * notice for the session's next successful call instead of losing it. */
		s.reset_notice = notice;
		notice = NULL;
		dirty = true;
	}
	if (dirty && (existed || s.sandbox_id)) {
		aks_error *e = NULL;
		if (aks__sessions_save(store, ns, &s, &e) < 0)
			aks__log(AKS_LOG_WARNING, "sandbox", "cannot save sandbox session '%s': %s",
			         id, aks_error_message(e));
		aks_error_free(e);
	}
	aks__session_clear(&s);
	unlock_session(st->m, lk);
	return rc;
}

/* The operation on a prepared submission, on whatever thread runs it. */
static int execute(submit_state *st, aks_mgr_outcome *out, aks_error **err)
{
	if (st->ephemeral)
		return st->m->queued ? aks__mgr_queue_ephemeral(st, out, err)
		                     : submit_ephemeral(st, out, err);
	return submit_stored(st, st->ns, st->id, st->explicit_id, out, err);
}

/* ---- the thread broker's jobs ---- */

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
	j->rc = execute(&j->st, &j->out, &j->err);
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

/*
 * The thread broker (§5.4): the operation runs on the pool. Executions wait
 * up to broker.wait_timeout seconds (0: promoted at once) and are otherwise
 * promoted to a task; file operations wait for their outcome, so they never
 * report what did not happen (§11 item 2).
 */
static int submit_threaded(submit_state *st, aks_resolved_principal **principal,
                           aks_mgr_outcome *out, aks_error **err)
{
	aks_manager *m = st->m;
	int rc = AKS_OK;
	pthread_mutex_lock(&m->mu);
	if (!m->pool)
		rc = aks__broker_pool_new(AKS_BROKER_THREADS, &m->pool, err);
	aks_broker_pool *pool = m->pool;
	pthread_mutex_unlock(&m->mu);
	if (rc < 0)
		return rc;
	mgr_job *j = NULL;
	if ((rc = job_new(st, principal, &j, err)) < 0)
		return rc;
	bool exec = st->req->op == AKS_MGR_EXECUTE_CODE || st->req->op == AKS_MGR_EXECUTE_COMMAND;
	double wait = exec ? aks_settings_get_wait_timeout(m->settings) : -1;
	/* What the pending answer needs, before the pool may free the job. */
	char task_id[33];
	memcpy(task_id, j->task_id, sizeof(task_id));
	aks_autofree char *echo = strdup(job_session_id(j));
	if (!echo) {
		job_free(j);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	/* One session's jobs run in order, one at a time; per_call ones need no order. The
	 * length prefix keeps ("a/b", "c") and ("a", "b/c") apart. */
	aks_autofree char *key = NULL;
	if (!st->ephemeral && asprintf(&key, "%zu:%s/%s", strlen(st->ns), st->ns, st->id) < 0) {
		key = NULL;
		job_free(j);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	rc = aks__broker_submit(pool, &job_ops, j, key, wait, st->caller->cancel, err);
	if (rc < 0) {
		job_free(j);
		return rc;
	}
	if (rc == 1) { /* promoted: the pool owns the job now */
		if (!(out->task_id = strdup(task_id)) || !(out->session_id = strdup(echo)))
			return aks__error_set(err, AKS_ENOMEM, "out of memory");
		return AKS_OK;
	}
	*out = j->out;
	memset(&j->out, 0, sizeof(j->out));
	rc = j->rc;
	if (rc < 0) {
		rc = pass_error(err, rc, j->err);
		j->err = NULL;
	}
	job_free(j);
	return rc;
}

/*
 * A broker plugin (a flavor naming a .so) would run the work somewhere else; this build
 * cannot load one, and running the work in this process instead would put it where the
 * operator chose not to (and with credentials it should not need): refuse, saying so.
 */
static int broker_missing(const aks_manager *m, aks_error **err)
{
	if (!m->remote)
		return AKS_OK;
	return aks__error_set(
	    err, AKS_EBROKER,
	    "sandbox.broker.flavor '%s': broker plugins are not supported by this "
	    "build; nothing was run: use flavor 'thread', 'embedded' or 'queue'",
	    aks_settings_get_broker_flavor(m->settings));
}

static int check_request(const aks_mgr_request *req, aks_error **err)
{
	switch (req->op) {
	case AKS_MGR_EXECUTE_CODE:
		if (!req->code)
			return aks__error_set(err, AKS_EINVAL, "execute requires code or command");
		return AKS_OK;
	case AKS_MGR_EXECUTE_COMMAND:
		if (!req->command)
			return aks__error_set(err, AKS_EINVAL, "execute requires code or command");
		return AKS_OK;
	case AKS_MGR_UPLOAD:
	case AKS_MGR_DOWNLOAD:
		if (!req->path || (req->op == AKS_MGR_UPLOAD && !req->data && req->len))
			return aks__error_set(err, AKS_EINVAL, "a file operation requires a path");
		return AKS_OK;
	default:
		return aks__error_set(err, AKS_ECONFIG, "unknown sandbox operation: %d", req->op);
	}
}

int aks__manager_submit(aks_manager *m, const aks_mgr_caller *caller, const aks_mgr_request *req,
                        aks_mgr_outcome *out, aks_error **err)
{
	memset(out, 0, sizeof(*out));
	int rc = aks__manager_check_conversation(caller->conversation, err);
	if (rc == AKS_OK)
		rc = check_request(req, err);
	if (rc == AKS_OK)
		rc = broker_missing(m, err);
	if (rc < 0)
		return rc;

	/* Profile resolution (§4.4 step 2): an explicit id that names a session
	 * binds the profile. */
	const char *profile_name = req->profile;
	aks_session_rec found = {0};
	if (req->session_id) {
		rc = aks__sessions_find(m->store, caller->conversation, req->session_id, &found,
		                        err);
		if (rc == AKS_OK) {
			if (profile_name && strcmp(profile_name, found.profile) != 0)
				rc = aks__error_set(
				    err, AKS_ECONFIG,
				    "sandbox session '%s' belongs to profile '%s', but "
				    "profile '%s' was requested; omit profile to reuse a "
				    "session",
				    req->session_id, found.profile, profile_name);
			profile_name = found.profile;
		} else if (rc == AKS_ENOTFOUND) {
			rc = AKS_OK;
		}
	}
	submit_state st = {.m = m, .caller = caller, .req = req};
	if (rc == AKS_OK)
		rc = aks_settings_find_profile(m->settings, profile_name, &st.profile, err);
	aks__session_clear(&found);
	if (rc < 0)
		return rc;

	/* The gates, fail closed, before any provider call. */
	aks_resolve_request rr;
	aks_resolve_request_init(&rr, caller->conversation, caller->agent ? caller->agent : "agent",
	                         caller->attributes);
	aks_resolved_principal *principal = NULL;
	rc = aks_resolver_resolve(aks_settings_get_resolver(m->settings), &rr, &principal, err);
	if (rc < 0)
		return rc;
	st.principal = aks_resolved_principal_get(principal);
	rc = aks_profile_check_principal(st.profile, st.principal, err);
	if (rc == AKS_OK)
		rc = aks_profile_check_policy(st.profile, err);
	aks_autofree char *def = NULL;
	if (rc == AKS_OK) {
		if (aks_profile_get_scope(st.profile) == AKS_SCOPE_PER_CALL) {
			/* per_call never stores a session, so no explicit id can name
			 * one (the original silently ignored it, §11 item 3). */
			if (req->session_id)
				rc =
				    aks__error_set(err, AKS_ESESSION_NOT_FOUND,
				                   "unknown sandbox session '%s'", req->session_id);
			st.ephemeral = true;
		} else {
			st.ns = aks__session_ns(st.profile, caller->conversation);
			st.id = req->session_id;
			st.explicit_id = st.id != NULL;
			if (!st.id &&
			    asprintf(&def, "default:%s", aks_profile_get_name(st.profile)) < 0) {
				def = NULL;
				rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
			}
			if (!st.id)
				st.id = def;
		}
	}
	if (rc == AKS_OK)
		rc = m->threaded ? submit_threaded(&st, &principal, out, err)
		                 : execute(&st, out, err);
	aks_resolved_principal_free(principal);
	if (rc < 0)
		aks__mgr_outcome_clear(out);
	return rc;
}

/* ---- destroy, new, list ---- */

int aks__manager_destroy_session(aks_manager *m, const aks_mgr_caller *caller, const char *id,
                                 aks_error **err)
{
	int rc = aks__manager_check_conversation(caller->conversation, err);
	if (rc == AKS_OK)
		rc = broker_missing(m, err);
	if (rc < 0)
		return rc;
	if (!id)
		return aks__error_set(err, AKS_EINVAL, "a sandbox session id is required");
	/* Where the session lives: the runtime namespace first, as the lookup does. */
	const char *nss[] = {AKS_STORE_NS_RUNTIME, caller->conversation};
	for (size_t i = 0; i < 2; i++) {
		aks_session_rec s;
		rc = aks__sessions_find_in(m->store, nss[i], id, &s, err);
		if (rc == AKS_ENOTFOUND)
			continue;
		if (rc < 0)
			return rc;
		aks__session_clear(&s);
		/* Serialised with executions: wait for the session's lock, then
		 * read it again (it may have changed or gone meanwhile). */
		aks_store_lock *lk = NULL;
		if ((rc = lock_session(m, nss[i], id, caller->cancel, &lk, err)) < 0)
			return rc;
		rc = aks__sessions_find_in(m->store, nss[i], id, &s, err);
		if (rc == AKS_OK) {
			aks_profile *p = NULL;
			if (aks_settings_find_profile(m->settings, s.profile, &p, NULL) < 0) {
				if (s.sandbox_id)
					aks__log(AKS_LOG_WARNING, "sandbox",
					         "sandbox session '%s': profile '%s' is no longer "
					         "configured; its sandbox %s is left as it is",
					         id, s.profile, s.sandbox_id);
				p = NULL;
			}
			if (m->queued && p)
				aks__mgr_queue_destroy(m, p, caller->conversation, &s);
			else
				aks__engine_destroy(p, &s);
			rc = aks__sessions_remove(m->store, nss[i], id, err);
			aks__session_clear(&s);
		} else if (rc == AKS_ENOTFOUND) {
			rc = AKS_OK;
		}
		unlock_session(m, lk);
		return rc;
	}
	return AKS_OK; /* unknown ids are destroyed already */
}

int aks__manager_new_session(aks_manager *m, const aks_mgr_caller *caller, const char *profile,
                             const char *name, aks_session_rec *out, aks_error **err)
{
	int rc = aks__manager_check_conversation(caller->conversation, err);
	if (rc < 0)
		return rc;
	return aks__sessions_new(m->store, m->settings, caller->conversation, profile, name, out,
	                         err);
}

int aks__manager_list_sessions(aks_manager *m, const aks_mgr_caller *caller, aks_session_rec **out,
                               size_t *count, aks_error **err)
{
	int rc = aks__manager_check_conversation(caller->conversation, err);
	if (rc < 0)
		return rc;
	return aks__sessions_list(m->store, caller->conversation, out, count, err);
}

/* ---- check_sandbox_task ---- */

int aks__manager_task(aks_manager *m, const aks_mgr_caller *caller, const char *task_id, char **out,
                      aks_error **err)
{
	*out = NULL;
	int rc = aks__manager_check_conversation(caller->conversation, err);
	if (rc < 0)
		return rc;
	if (m->queued) {
		/* A pending task's completion may be waiting in the response store. */
		rc = aks__mgr_queue_resolve_task(m, caller->conversation, task_id, err);
		if (rc == AKS_OK)
			rc = aks__mgr_queue_task_direct(m, caller->conversation, task_id, out, err);
		if (rc != AKS_ENOTFOUND)
			return rc;
	}
	return aks__task_json(m->store, caller->conversation, task_id, out, err);
}

/* ---- the idle reaper ---- */

/* Logs, once per manager, that a profile's sessions are left alone. */
static void warn_unconfigured(aks_manager *m, const char *profile)
{
	pthread_mutex_lock(&m->mu);
	bool seen = false;
	for (size_t i = 0; i < m->n_unconfigured && !seen; i++)
		seen = strcmp(m->unconfigured[i], profile) == 0;
	if (!seen) {
		char **grown =
		    realloc(m->unconfigured, (m->n_unconfigured + 1) * sizeof(*m->unconfigured));
		if (grown) {
			m->unconfigured = grown;
			if ((grown[m->n_unconfigured] = strdup(profile)))
				m->n_unconfigured++;
		}
		aks__log(AKS_LOG_WARNING, "sandbox",
		         "idle reaper: profile '%s' is no longer configured; the sandboxes of its "
		         "sessions are left as they are",
		         profile);
	}
	pthread_mutex_unlock(&m->mu);
}

/* The profile of a session when the reaper may act on it, else NULL. */
static aks_profile *reapable(aks_manager *m, const aks_session_rec *s, double now)
{
	aks_profile *p = NULL;
	if (!s->sandbox_id)
		return NULL;
	if (aks_settings_find_profile(m->settings, s->profile, &p, NULL) < 0) {
		warn_unconfigured(m, s->profile);
		return NULL;
	}
	if (aks__engine_is_attached(p) ||
	    !(now - s->last_used_at > (double)aks_profile_get_idle_timeout(p)))
		return NULL;
	return p;
}

/* One session: checked, then checked again under its lock before the destroy. */
static bool reap_one(aks_manager *m, const char *ns, const char *id)
{
	aks_session_rec s;
	if (aks__sessions_find_in(m->store, ns, id, &s, NULL) != AKS_OK)
		return false;
	bool candidate = reapable(m, &s, aks__epoch_now()) != NULL;
	aks__session_clear(&s);
	if (!candidate)
		return false;
	aks_store_lock *lk = NULL;
	aks_error *e = NULL;
	if (lock_session(m, ns, id, NULL, &lk, &e) < 0) {
		aks__log(AKS_LOG_WARNING, "sandbox", "idle reaper: %s", aks_error_message(e));
		aks_error_free(e);
		return false;
	}
	bool reaped = false;
	if (aks__sessions_find_in(m->store, ns, id, &s, NULL) == AKS_OK) {
		aks_profile *p = reapable(m, &s, aks__epoch_now());
		char *notice = p ? aks__engine_idle_notice(p, s.id) : NULL;
		if (notice) {
			aks__log(AKS_LOG_INFO, "sandbox",
			         "idle reaper: destroying sandbox %s of session '%s'", s.sandbox_id,
			         s.id);
			aks__engine_destroy(p, &s);
			s.closed = false; /* the session stays usable: the next call starts clean */
			free(s.reset_notice);
			s.reset_notice = notice;
			if (aks__sessions_save(m->store, ns, &s, &e) < 0)
				aks__log(AKS_LOG_WARNING, "sandbox",
				         "idle reaper: cannot save sandbox session '%s': %s", id,
				         aks_error_message(e));
			aks_error_free(e);
			reaped = true;
		}
		aks__session_clear(&s);
	}
	unlock_session(m, lk);
	return reaped;
}

static int note_with_sandbox(void *ctx, const char *key, struct json_object *rec)
{
	(void)key;
	struct json_object *sid = json_object_object_get(rec, "sandbox_id");
	struct json_object *id = json_object_object_get(rec, "sandbox_session_id");
	if (!json_object_is_type(sid, json_type_string) ||
	    !json_object_is_type(id, json_type_string))
		return AKS_OK;
	return aks__strv_push(ctx, json_object_get_string(id));
}

/* The ids of a namespace's sessions that have a sandbox (NULL-terminated). */
static char **ids_with_sandbox(aks_manager *m, const char *ns)
{
	aks_strv l = {NULL, 0, 0};
	aks_error *e = NULL;
	int rc = aks__store_scan(m->store, ns, "session:", note_with_sandbox, &l, &e);
	if (rc < 0) {
		aks__log(AKS_LOG_WARNING, "sandbox", "idle reaper: %s",
		         e ? aks_error_message(e) : aks_strerror(rc));
		aks_error_free(e);
		aks__store_free_names(l.v);
		return NULL;
	}
	return l.v ? l.v : calloc(1, sizeof(char *));
}

int aks__manager_reap(aks_manager *m, size_t *reaped, aks_error **err)
{
	if (reaped)
		*reaped = 0;
	if (m->remote || m->queued)
		return AKS_OK; /* the backends are the workers' to reap (their idle sweep) */
	char **names = NULL;
	int rc = aks__store_list(m->store, &names, err);
	if (rc < 0)
		return rc;
	for (size_t i = 0; names[i]; i++) {
		char **ids = ids_with_sandbox(m, names[i]);
		for (size_t k = 0; ids && ids[k]; k++) {
			if (reap_one(m, names[i], ids[k]) && reaped)
				(*reaped)++;
			free(ids[k]);
		}
		free(ids);
	}
	aks__store_free_names(names);
	return AKS_OK;
}
