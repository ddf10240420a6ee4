/*
 * core/session/manager.c - profiles, sessions and the provider calls behind the tools
 * (reference §4 and the embedded broker's worker, §5.2-5.3): the entry points, a stored
 * session's call under its lock, and the broker flavors (manager_internal.h), one of which
 * each manager is given when it is made.
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
#include "session/pool.h"
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

/* ---- operations in this process (embedded and thread): engine.c ---- */

static void engine_op_of(const submit_state *st, bool keep_handle, aks_engine_op *op)
{
	*op = (aks_engine_op){.profile = st->profile,
	                      .req = st->req,
	                      .principal = st->principal,
	                      .conversation = st->caller->conversation,
	                      .cancel = st->caller->cancel,
	                      .keep_handle = keep_handle,
	                      .owner = st->m->owner};
}

/* per_call: a sandbox created and destroyed around the operation, even when it fails. Its
 * handle is its own (closed after the operation), since the sandbox never serves again. */
static int run_ephemeral_here(submit_state *st, aks_mgr_outcome *out, aks_error **err)
{
	char id[33];
	int rc = aks__uuid4_hex(id, err);
	if (rc < 0)
		return rc;
	aks_session_rec s = {.id = id};
	aks_engine_op op;
	aks_engine_outcome done;
	engine_op_of(st, false, &op);
	rc = aks__engine_run(&op, &s, &done, err);
	out->result = done.result;
	free(done.notice); /* a new sandbox has no earlier state to have lost */
	aks__engine_destroy(st->profile, &s);
	aks__owner_release(done.claim);
	/* The ephemeral id is never echoed: nothing could ever find it again. */
	if (rc == AKS_OK && !(out->session_id = strdup("")))
		rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
	return rc;
}

/* The engine's record hook: the session's new sandbox is saved before it is used. */
static int record_sandbox(void *ctx, const aks_session_rec *s, aks_error **err)
{
	stored_run *r = ctx;
	int rc = aks__sessions_save(r->st->m->store, r->st->ns, s, err);
	r->dirty = rc < 0; /* saved: the record is s now */
	if (rc == AKS_OK)
		r->recorded_used = s->last_used_at;
	return rc;
}

/*
 * Whether a call that changed nothing but the session's last use must write its record.
 * Not when the record's last use is younger than a hundredth of the idle timeout (at most
 * TOUCH_SLACK_MAX seconds): a burst of calls then costs one store write, not one each (two
 * fsyncs in the file store). What that gives up is bounded: the record's last use lags
 * the real one by less than that slack, so an idle reset (here or by a reaper) comes at
 * 99% of the idle timeout at the earliest, and `sessions` shows a last use that much older.
 */
#define TOUCH_SLACK_MAX 5.0
static bool touch_due(const stored_run *r)
{
	double slack = (double)aks_profile_get_idle_timeout(r->st->profile) / 100.0;
	if (slack > TOUCH_SLACK_MAX)
		slack = TOUCH_SLACK_MAX;
	return r->recorded_used == 0 || r->s.last_used_at - r->recorded_used >= slack;
}

/* A stored session's operation on the session's sandbox, kept handles and self-heal
 * included (aks__engine_run). */
static int run_stored_here(stored_run *r, aks_mgr_outcome *out, aks_error **err)
{
	aks_engine_op op;
	aks_engine_outcome done;
	engine_op_of(r->st, true, &op);
	op.record = record_sandbox;
	op.record_ctx = r;
	int rc = aks__engine_run(&op, &r->s, &done, err);
	out->result = done.result;
	if (done.notice) {
		/* The recreate is the news: an empty sandbox says more than an idle reset. */
		free(r->notice);
		r->notice = done.notice;
	}
	r->dirty = r->dirty || done.changed || (done.ran && touch_due(r));
	return rc;
}

static void destroy_here(aks_manager *m, const aks_profile *p, const char *conversation,
                         aks_session_rec *s)
{
	(void)m;
	(void)conversation;
	aks__engine_destroy(p, s);
}

/* ---- a stored session's call (per_session, per_runtime) ---- */

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
	st->m->flavor->destroy(st->m, p, st->caller->conversation, s);
	s->closed = false;
	s->created_at = now;
	char *notice = aks__engine_idle_notice(p, s->id);
	*fail = notice == NULL;
	return notice;
}

/* The session's record into r->s, or a new default session; an explicit id that names no
 * session is AKS_ESESSION_NOT_FOUND. */
static int load_session(stored_run *r, double now, aks_error **err)
{
	const submit_state *st = r->st;
	int rc = aks__sessions_find_in(st->m->store, st->ns, st->id, &r->s, err);
	r->existed = rc == AKS_OK;
	r->recorded_used = r->existed ? r->s.last_used_at : 0;
	if (rc != AKS_ENOTFOUND)
		return rc;
	if (st->explicit_id)
		return aks__error_set(err, AKS_ESESSION_NOT_FOUND, "unknown sandbox session '%s'",
		                      st->id);
	return new_default_session(st->profile, st->id, now, &r->s, err);
}

/* What the call will tell the agent about its workspace: an idle reset it makes now, else
 * the notice the reaper left; then the session is touched. */
static int open_notice(stored_run *r, double now, aks_error **err)
{
	bool fail;
	r->notice = idle_reset(r->st, &r->s, now, &fail);
	r->dirty = r->notice != NULL;
	if (fail || (!r->notice && r->s.reset_notice && !(r->notice = strdup(r->s.reset_notice))))
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	r->s.last_used_at = now;
	return AKS_OK;
}

/* After a successful run: the notice goes on the outcome and the session's id is echoed.
 * A run still going on (a task) leaves the notice for a call that shows a result. */
static int tell_notice(stored_run *r, aks_mgr_outcome *out, aks_error **err)
{
	int rc = AKS_OK;
	if (out->task_id) {
		if (r->notice && !r->s.reset_notice) {
			r->s.reset_notice = aks_steal(&r->notice);
			r->dirty = true;
		}
	} else if ((rc = set_notice(out, r->notice, err)) == AKS_OK && r->s.reset_notice) {
		/* The reaper's notice has been told: it is not told again. */
		free(r->s.reset_notice);
		r->s.reset_notice = NULL;
		r->dirty = true;
	}
	if (rc == AKS_OK && !(out->session_id = strdup(r->st->id)))
		rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
	return rc;
}

/* The session's record follows r->s when it changed. Best effort: a failure is logged. */
static void write_back(stored_run *r, int rc)
{
	if (rc < 0 && r->notice && !r->s.reset_notice) {
		/* The call failed, so the agent was not told its workspace was reset: keep the
		 * notice for the session's next successful call instead of losing it. */
		r->s.reset_notice = aks_steal(&r->notice);
		r->dirty = true;
	}
	if (!r->dirty || !(r->existed || r->s.sandbox_id))
		return;
	aks_error *e = NULL;
	if (aks__sessions_save(r->st->m->store, r->st->ns, &r->s, &e) < 0)
		aks__log(AKS_LOG_WARNING, "sandbox", "cannot save sandbox session '%s': %s",
		         r->st->id, aks_error_message(e));
	aks_error_free(e);
}

/* The stored session, under its lock from lookup to write-back; the flavor runs it. */
static int submit_stored(submit_state *st, aks_mgr_outcome *out, aks_error **err)
{
	aks_store_lock *lk = NULL;
	int rc = lock_session(st->m, st->ns, st->id, st->caller->cancel, &lk, err);
	if (rc < 0)
		return rc;
	stored_run r = {.st = st};
	double now = aks__epoch_now();
	rc = load_session(&r, now, err);
	if (rc == AKS_OK) {
		rc = open_notice(&r, now, err);
		if (rc == AKS_OK)
			rc = st->m->flavor->run_stored(&r, out, err);
		if (rc == AKS_OK)
			rc = tell_notice(&r, out, err);
		write_back(&r, rc);
		free(r.notice);
		aks__session_clear(&r.s);
	}
	unlock_session(st->m, lk);
	return rc;
}

int aks__mgr_execute(submit_state *st, aks_mgr_outcome *out, aks_error **err)
{
	if (st->ephemeral)
		return st->m->flavor->run_ephemeral(st, out, err);
	return submit_stored(st, out, err);
}

/* ---- the broker flavors ---- */

/* embedded and queue: the submission runs on the caller's thread (the queue flavor's own
 * wait is in manager_queue.c); the principal stays the caller's. */
static int dispatch_inline(submit_state *st, aks_resolved_principal **principal,
                           aks_mgr_outcome *out, aks_error **err)
{
	(void)principal;
	return aks__mgr_execute(st, out, err);
}

/* `embedded` runs inline and never promotes. */
static const aks_mgr_flavor embedded_flavor = {
    .name = "embedded",
    .dispatch = dispatch_inline,
    .run_ephemeral = run_ephemeral_here,
    .run_stored = run_stored_here,
    .destroy = destroy_here,
    .reaps = true,
};

/* `thread` (the default) runs on the pool (manager_thread.c). */
static const aks_mgr_flavor thread_flavor = {
    .name = "thread",
    .dispatch = aks__mgr_thread_dispatch,
    .run_ephemeral = run_ephemeral_here,
    .run_stored = run_stored_here,
    .destroy = destroy_here,
    .reaps = true,
};

/* `queue` sends the work to the worker fleet (manager_queue.c), whose sandboxes are the
 * workers' to reap (their idle sweep). */
static const aks_mgr_flavor queue_flavor = {
    .name = "queue",
    .dispatch = dispatch_inline,
    .run_ephemeral = aks__mgr_queue_ephemeral,
    .run_stored = aks__mgr_queue_stored,
    .destroy = aks__mgr_queue_destroy,
    .task = aks__mgr_queue_task,
    .reaps = false,
};

static const aks_mgr_flavor *flavor_named(const char *name)
{
	static const aks_mgr_flavor *const built_in[] = {&thread_flavor, &embedded_flavor,
	                                                 &queue_flavor};
	for (size_t i = 0; i < sizeof(built_in) / sizeof(*built_in); i++)
		if (strcmp(name, built_in[i]->name) == 0)
			return built_in[i];
	return NULL; /* the settings accept no other (broker plugins are refused at load) */
}

int aks__manager_new(aks_settings *settings, aks_state_store *store, aks_manager **out,
                     aks_error **err)
{
	aks_manager *m = calloc(1, sizeof(*m));
	if (!m)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	m->settings = settings;
	m->store = store;
	m->flavor = flavor_named(aks_settings_get_broker_flavor(settings));
	if (!m->flavor) {
		free(m);
		return aks__error_set(err, AKS_EINVAL, "unknown broker flavor '%s'",
		                      aks_settings_get_broker_flavor(settings));
	}
	int rc = aks__owner_new(store, &m->owner, err);
	if (rc < 0) {
		free(m);
		return rc;
	}
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
	aks__owner_free(m->owner);
	pthread_mutex_destroy(&m->mu);
	for (size_t i = 0; i < m->n_unconfigured; i++)
		free(m->unconfigured[i]);
	free(m->unconfigured);
	free(m);
}

/* ---- submission ---- */

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

/* The profile (§4.4 step 2): an explicit id that names a session binds its profile. */
static int resolve_profile(aks_manager *m, const aks_mgr_caller *caller, const aks_mgr_request *req,
                           aks_profile **out, aks_error **err)
{
	const char *profile_name = req->profile;
	aks_session_rec found = {0};
	int rc = AKS_OK;
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
	if (rc == AKS_OK)
		rc = aks_settings_find_profile(m->settings, profile_name, out, err);
	aks__session_clear(&found);
	return rc;
}

/* The gates, fail closed, before any provider call: the resolver's principal (into
 * *principal, the caller's to free), then the profile's principal and policy checks. */
static int pass_gates(submit_state *st, aks_resolved_principal **principal, aks_error **err)
{
	const aks_mgr_caller *caller = st->caller;
	aks_resolve_request rr;
	aks_resolve_request_init(&rr, caller->conversation, caller->agent ? caller->agent : "agent",
	                         caller->attributes);
	int rc =
	    aks_resolver_resolve(aks_settings_get_resolver(st->m->settings), &rr, principal, err);
	if (rc < 0)
		return rc;
	st->principal = aks_resolved_principal_get(*principal);
	rc = aks_profile_check_principal(st->profile, st->principal, err);
	if (rc == AKS_OK)
		rc = aks_profile_check_policy(st->profile, err);
	return rc;
}

/* Where the session lives: nowhere for per_call, else its namespace and id (*def: the
 * default session's id when none was named, the caller's to free). */
static int place_session(submit_state *st, char **def, aks_error **err)
{
	const char *named = st->req->session_id;
	*def = NULL;
	if (aks_profile_get_scope(st->profile) == AKS_SCOPE_PER_CALL) {
		/* per_call never stores a session, so no explicit id can name one (the original
		 * silently ignored it, §11 item 3). */
		st->ephemeral = true;
		if (named)
			return aks__error_set(err, AKS_ESESSION_NOT_FOUND,
			                      "unknown sandbox session '%s'", named);
		return AKS_OK;
	}
	st->ns = aks__session_ns(st->profile, st->caller->conversation);
	st->id = named;
	st->explicit_id = named != NULL;
	if (named)
		return AKS_OK;
	if (asprintf(def, "default:%s", aks_profile_get_name(st->profile)) < 0) {
		*def = NULL;
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	st->id = *def;
	return AKS_OK;
}

double aks__mgr_exec_wait(const submit_state *st)
{
	switch (st->caller->wait_mode) {
	case AKS_MGR_WAIT_SECONDS:
		return st->caller->wait_seconds;
	case AKS_MGR_WAIT_UNTIL_DONE:
		return -1;
	case AKS_MGR_WAIT_CONFIGURED:
		break;
	}
	return aks_settings_get_wait_timeout(st->m->settings);
}

int aks__manager_submit(aks_manager *m, const aks_mgr_caller *caller, const aks_mgr_request *req,
                        aks_mgr_outcome *out, aks_error **err)
{
	memset(out, 0, sizeof(*out));
	submit_state st = {.m = m, .caller = caller, .req = req};
	int rc = aks__manager_check_conversation(caller->conversation, err);
	if (rc == AKS_OK)
		rc = check_request(req, err);
	if (rc == AKS_OK)
		rc = resolve_profile(m, caller, req, &st.profile, err);
	if (rc < 0)
		return rc;
	aks_resolved_principal *principal = NULL;
	aks_autofree char *def = NULL;
	/* The session first, so that a refusal by a gate still names it. */
	rc = place_session(&st, &def, err);
	if (rc == AKS_OK)
		rc = pass_gates(&st, &principal, err);
	if (rc == AKS_OK)
		rc = m->flavor->dispatch(&st, &principal, out, err);
	aks_resolved_principal_free(principal);
	if (rc < 0) {
		aks__mgr_outcome_clear(out);
		/* Every result carries the session the call used (the guidance says so), a
		 * failure too: a timeout on the default session echoes "default:<profile>". */
		if (st.id && !st.ephemeral && !(out->session_id = strdup(st.id)))
			aks__log(AKS_LOG_ERROR, "sandbox", "out of memory");
	}
	return rc;
}

/* ---- destroy, new, list ---- */

int aks__manager_destroy_session(aks_manager *m, const aks_mgr_caller *caller, const char *id,
                                 aks_error **err)
{
	int rc = aks__manager_check_conversation(caller->conversation, err);
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
			m->flavor->destroy(m, p, caller->conversation, &s);
			rc = aks__sessions_remove(m->store, nss[i], id, err);
			aks__session_clear(&s);
		} else if (rc == AKS_ENOTFOUND) {
			rc = AKS_OK;
		}
		unlock_session(m, lk);
		return rc;
	}
	return AKS_ENOTFOUND; /* no session by that id: nothing to destroy (err left unset) */
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
	if (m->flavor->task) {
		rc = m->flavor->task(m, caller->conversation, task_id, out, err);
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
		if (notice)
			aks__log(AKS_LOG_INFO, "sandbox",
			         "idle reaper: destroying sandbox %s of session '%s'", s.sandbox_id,
			         s.id);
		/* A sandbox the backend would not destroy now (a bad credential, an outage) stays
		 * recorded and the next pass tries again: forgotten, it would keep running with
		 * only `aksandbox gc` to find it. */
		if (notice && aks__engine_destroy_sandbox(p, s.sandbox_id, NULL) < 0) {
			aks__log(
			    AKS_LOG_WARNING, "sandbox",
			    "idle reaper: sandbox %s of session '%s' stays recorded; the next pass "
			    "tries again",
			    s.sandbox_id, s.id);
			free(notice);
			notice = NULL;
		}
		if (notice) {
			free(s.sandbox_id);
			s.sandbox_id = NULL;
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

aks_owner *aks__manager_owner(aks_manager *m)
{
	return m && m->flavor->reaps ? m->owner : NULL;
}

int aks__manager_gc(aks_manager *m, bool dry_run, struct json_object **report, aks_error **err)
{
	*report = NULL;
	if (!m->flavor->reaps)
		return aks__error_set(
		    err, AKS_ECAPABILITY,
		    "broker flavor '%s': the sandboxes are the workers' to collect "
		    "(each `aksandbox worker` collects those of its response store)",
		    m->flavor->name);
	return aks__owner_gc(m->owner, m->settings, dry_run, report, err);
}

int aks__manager_fill_pools(aks_manager *m, struct json_object **report, aks_error **err)
{
	*report = NULL;
	if (!m->flavor->reaps)
		return aks__error_set(err, AKS_ECAPABILITY,
		                      "broker flavor '%s': the workers create the sandboxes, and "
		                      "they keep no pools",
		                      m->flavor->name);
	json_object *all = json_object_new_array();
	if (!all)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	size_t count = aks_settings_get_profile_count(m->settings);
	for (size_t i = 0; i < count; i++) {
		aks_profile *p = aks_settings_get_profile(m->settings, i);
		if (!aks__pool_enabled(p))
			continue;
		json_object *one = NULL;
		int rc = aks__pool_fill(m->owner, p, &one, err);
		if (rc < 0) {
			json_object_put(all);
			return rc;
		}
		if (json_object_array_add(all, one) < 0) {
			json_object_put(one);
			json_object_put(all);
			return aks__error_set(err, AKS_ENOMEM, "out of memory");
		}
	}
	*report = all;
	return AKS_OK;
}

int aks__manager_reap(aks_manager *m, size_t *reaped, aks_error **err)
{
	if (reaped)
		*reaped = 0;
	if (!m->flavor->reaps)
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
