/*
 * core/session/engine.c - acquiring a session's sandbox, running one operation on it and destroying
 * it: the steps every broker shares (see engine.h).
 */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/handle_cache.h"
#include "plugin/provider.h"
#include "plugin/result.h"
#include "session/engine.h"
#include "session/pool.h"
#include "session/sessions.h"
#include "tools/json.h"
#include "util/util.h"

bool aks__engine_is_attached(const aks_profile *p)
{
	return p && aks_profile_get_environment(p) == AKS_ENV_ATTACHED;
}

/*
 * Backend destroy shared by destroy, idle reset and per_call (§4.6): best
 * effort, logged, never an error; attached environments are never destroyed.
 * The session always ends closed with no sandbox_id. Like the original, it
 * acts as the plain "agent" principal under the default policy.
 */
void aks__engine_housekeeping_call(aks_principal *principal, aks_policy *policy, aks_call *call)
{
	aks_principal_init(principal, "agent");
	aks_policy_init(policy);
	aks_call_init(call, policy->timeout, policy, principal, NULL);
}

int aks__engine_destroy_sandbox(const aks_profile *p, const char *sandbox_id, aks_error **err)
{
	if (!sandbox_id || !p || aks__engine_is_attached(p))
		return AKS_OK;
	/* A handle kept for it goes first: its agent must not outlive the sandbox. */
	aks__handle_cache_drop(aks__provider_handles(aks_profile_get_provider(p)), sandbox_id);
	aks_principal principal;
	aks_policy policy;
	aks_call call;
	aks__engine_housekeeping_call(&principal, &policy, &call);
	aks_error *e = NULL;
	int rc = aks_provider_destroy(aks_profile_get_provider(p), sandbox_id, &call, &e);
	if (rc < 0)
		aks__log(AKS_LOG_WARNING, "sandbox", "Error destroying sandbox %s: %s", sandbox_id,
		         aks_error_message(e));
	if (err && rc < 0)
		*err = e;
	else
		aks_error_free(e);
	return rc;
}

void aks__engine_destroy(const aks_profile *p, aks_session_rec *s)
{
	aks__engine_destroy_sandbox(p, s->sandbox_id, NULL);
	free(s->sandbox_id);
	s->sandbox_id = NULL;
	s->closed = true;
}

/*
 * The session's sandbox `target` is gone (§5.2 step 6): an attached environment is an error,
 * never provisioned; a managed sandbox's leftovers are cleaned up so a new one can be created.
 */
static int forget_gone(const aks_profile *p, const char *target, const char *why,
                       const char *session_id, const aks_call *call, aks_error **err)
{
	if (aks__engine_is_attached(p)) /* the reference's words, then the provider's reason */
		return aks__error_set(err, AKS_EGONE,
		                      "attached environment '%s' (profile '%s') is unreachable; "
		                      "not recreating — attached environments are never "
		                      "provisioned by the framework (%s)",
		                      target, aks_profile_get_name(p), why);
	aks__log(AKS_LOG_INFO, "sandbox",
	         "sandbox %s of session '%s' no longer exists; creating a new one", target,
	         session_id);
	/* What the vanished sandbox may have left (a docker workspace volume, say) is the
	 * provider's to clean: destroy is idempotent, so a gone id is fine. */
	aks_error *gone = NULL;
	if (aks_provider_destroy(aks_profile_get_provider(p), target, call, &gone) < 0)
		aks__log(AKS_LOG_INFO, "sandbox", "cleaning up vanished sandbox %s: %s", target,
		         aks_error_message(gone));
	aks_error_free(gone);
	return AKS_OK;
}

/*
 * A new sandbox from the profile's warm pool (session/pool.h): *out attached to the first
 * pooled one that still answers, or AKS_ENOTFOUND when the pool has none (or cannot be
 * read: the pool only saves time, so the caller creates one as without it). A pooled sandbox
 * that is gone is cleaned up and the next one tried. With `kept` non-NULL, one this process
 * filled is taken as its kept handle instead (*kept set), agent connected and unchecked: an
 * operation that finds it gone is retried as any kept handle's is (aks__engine_run).
 */
static int take_pooled(aks_owner *owner, const aks_profile *p, const aks_call *call,
                       aks_sandbox **out, bool *kept)
{
	if (!owner || !aks__pool_enabled(p))
		return AKS_ENOTFOUND;
	for (int tries = 0; tries <= aks__profile_pool_size(p); tries++) {
		char *sid = NULL;
		aks_error *e = NULL;
		int rc = aks__pool_take(owner, p, &sid, &e);
		if (rc < 0)
			aks__log(AKS_LOG_WARNING, "sandbox", "pool '%s': %s",
			         aks_profile_get_name(p),
			         e ? aks_error_message(e) : aks_strerror(rc));
		aks_error_free(e);
		if (!sid)
			return AKS_ENOTFOUND;
		/* Filled by this process, it has the handle, its agent connected: no attach. */
		aks_provider *prov = aks_profile_get_provider(p);
		if (kept && (*out = aks__handle_cache_take(aks__provider_handles(prov), sid))) {
			*kept = true;
			aks__log(AKS_LOG_DEBUG, "sandbox",
			         "pool '%s': took sandbox %s (kept handle)",
			         aks_profile_get_name(p), sid);
			free(sid);
			return AKS_OK;
		}
		e = NULL;
		rc = aks_provider_attach(prov, sid, call, out, &e);
		if (rc == AKS_OK) {
			aks__log(AKS_LOG_DEBUG, "sandbox", "pool '%s': took sandbox %s",
			         aks_profile_get_name(p), sid);
			free(sid);
			return AKS_OK;
		}
		aks__log(AKS_LOG_WARNING, "sandbox", "pool '%s': pooled sandbox %s: %s",
		         aks_profile_get_name(p), sid, e ? aks_error_message(e) : aks_strerror(rc));
		aks_error_free(e);
		aks__engine_destroy_sandbox(p, sid, NULL);
		free(sid);
	}
	return AKS_ENOTFOUND;
}

/* aks__engine_new_sandbox, with take_pooled's `kept`. */
static int new_sandbox(aks_owner *owner, const aks_profile *p, const aks_call *call,
                       aks_sandbox **out, aks_owner_claim **claim, bool *kept, aks_error **err)
{
	*claim = NULL;
	if (take_pooled(owner, p, call, out, kept) == AKS_OK)
		return AKS_OK;
	return aks__owner_create(owner, p, call, out, claim, err);
}

int aks__engine_new_sandbox(aks_owner *owner, const aks_profile *p, const aks_call *call,
                            aks_sandbox **out, aks_owner_claim **claim, aks_error **err)
{
	bool kept = false;
	return new_sandbox(owner, p, call, out, claim, &kept, err);
}

/*
 * Attach-or-create with self-heal: s->sandbox_id is attached when set (an attached
 * profile's attach_to when not); a gone one is forgotten and created anew (*recreated).
 * With `cached` non-NULL, the handle this process kept for the target is taken first,
 * without asking the backend (*cached then says so).
 */
static int acquire(const aks_engine_op *op, const aks_session_rec *s, const aks_call *call,
                   aks_sandbox **out, bool *recreated, bool *cached, aks_owner_claim **claim,
                   aks_error **err)
{
	const aks_profile *p = op->profile;
	aks_provider *prov = aks_profile_get_provider(p);
	*claim = NULL;
	const char *target = s->sandbox_id                ? s->sandbox_id
	                     : aks__engine_is_attached(p) ? aks_profile_get_attach_to(p)
	                                                  : NULL;
	*recreated = false;
	*out = NULL;
	if (cached && target &&
	    (*out = aks__handle_cache_take(aks__provider_handles(prov), target))) {
		*cached = true;
		return AKS_OK;
	}
	if (target) {
		aks_error *e = NULL;
		int rc = aks_provider_attach(prov, target, call, out, &e);
		if (rc != AKS_EGONE)
			return rc < 0 ? aks__error_pass(err, rc, e) : rc;
		rc = forget_gone(p, target, e ? aks_error_message(e) : "gone", s->id, call, err);
		aks_error_free(e);
		if (rc < 0)
			return rc;
		*recreated = true;
	}
	/* A pooled sandbox's kept handle is a kept handle like the session's own. */
	return new_sandbox(op->owner, p, call, out, claim, cached, err);
}

/* Gives a handle back after its operation: kept for the session's next call, or closed. */
static void give_back(const aks_engine_op *op, aks_sandbox *sb, int op_rc)
{
	if (!op->keep_handle || op_rc == AKS_EGONE) {
		aks_sandbox_close(sb); /* its own, or the sandbox went away under it */
		return;
	}
	/* Past the profile's idle_timeout the session's next call resets the sandbox anyway. */
	int64_t idle = aks_profile_get_idle_timeout(op->profile);
	aks__handle_cache_put(aks__provider_handles(aks_profile_get_provider(op->profile)), sb,
	                      idle > 0 ? idle * 1000 : 0);
}

const char *aks__engine_op_name(int op)
{
	switch (op) {
	case AKS_MGR_EXECUTE_CODE:
		return "execute_code";
	case AKS_MGR_EXECUTE_COMMAND:
		return "execute_command";
	case AKS_MGR_UPLOAD:
		return "upload_file";
	default:
		return "download_file";
	}
}

/* The operation itself (§5.2's table), under the call's deadline. *egress_refused: the
 * connections its result reports refused, failed or not. */
static int run_op(aks_sandbox *sb, const aks_mgr_request *req, const aks_call *call,
                  aks_result **out, unsigned *egress_refused, aks_error **err)
{
	aks_error *e = NULL;
	int rc;
	*out = NULL;
	*egress_refused = 0;
	switch (req->op) {
	case AKS_MGR_EXECUTE_CODE:
		rc = aks__sandbox_execute_code(sb, req->code,
		                               req->language ? req->language : "python", call,
		                               req->output, out, &e);
		break;
	case AKS_MGR_EXECUTE_COMMAND:
		rc = aks__sandbox_execute_command(sb, req->command, call, req->output, out, &e);
		break;
	case AKS_MGR_UPLOAD:
		rc = aks_sandbox_upload_file(sb, req->path, req->data, req->len, call, &e);
		break;
	default:
		rc = aks_sandbox_download_file(sb, req->path, call, out, &e);
		break;
	}
	*egress_refused = aks_result_get_egress_refused(*out);
	if (rc == AKS_OK)
		return rc;
	aks_result_free(*out); /* what a killed program printed is not shown */
	*out = NULL;
	if (rc == AKS_ETIMEOUT) {
		aks_error_free(e);
		char t[32];
		aks__json_format_double(call->timeout, t, sizeof(t));
		return aks__error_set(err, AKS_ETIMEOUT,
		                      "sandbox operation '%s' exceeded timeout %ss",
		                      aks__engine_op_name(req->op), t);
	}
	return aks__error_pass(err, rc, e);
}

/* ---- running one operation in a session (engine.h) ---- */

/* The call, with the context its provider logs and audits by (call->context): the
 * conversation and the sandbox session, in ctx (the call's; borrowed from op and s). */
static void prepare_call(const aks_engine_op *op, const aks_session_rec *s, aks_call *call,
                         const char *ctx[5])
{
	const aks_policy *policy = aks_profile_get_policy(op->profile);
	aks_call_init(call, policy->timeout, policy, op->principal, op->cancel);
	call->idle_timeout = (double)aks_profile_get_idle_timeout(op->profile);
	int n = 0;
	if (op->conversation) {
		ctx[n++] = AKS_CONTEXT_CONVERSATION;
		ctx[n++] = op->conversation;
	}
	ctx[n++] = AKS_CONTEXT_SESSION;
	ctx[n++] = s->id;
	ctx[n] = NULL;
	call->context = ctx;
}

/* s takes sb's id when it is a new sandbox, recorded before it is used. On failure sb is
 * closed, and a sandbox that could not be recorded is destroyed. */
static int adopt(const aks_engine_op *op, aks_session_rec *s, aks_sandbox *sb,
                 aks_owner_claim **claim, aks_error **err)
{
	const char *sid = aks_sandbox_get_id(sb);
	if (s->sandbox_id && strcmp(s->sandbox_id, sid) == 0)
		return AKS_OK;
	char *copy = strdup(sid);
	if (!copy) {
		/* Unrecorded, it would be left behind: destroyed by its id (the handle's, so
		 * first). */
		aks__engine_destroy_sandbox(op->profile, sid, NULL);
		aks_sandbox_close(sb);
		aks__owner_release(*claim);
		*claim = NULL;
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	free(s->sandbox_id);
	s->sandbox_id = copy;
	s->closed = false;
	if (!op->record)
		return AKS_OK; /* the claim protects it until the caller destroys it */
	int rc = op->record(op->record_ctx, s, err);
	if (rc < 0) {
		aks_sandbox_close(sb);
		aks__engine_destroy(op->profile, s);
	}
	/* Recorded, or destroyed: either way the claim has nothing left to protect. */
	aks__owner_release(*claim);
	*claim = NULL;
	return rc;
}

/* The session's sandbox, acquired (from the kept handles when use_cache) and adopted; the
 * recreated notice on out when it was made anew. On failure no handle is left open. */
static int take_sandbox(const aks_engine_op *op, aks_session_rec *s, bool use_cache,
                        aks_sandbox **sb, bool *cached, aks_engine_outcome *out, aks_error **err)
{
	aks_call call;
	const char *ctx[5];
	bool recreated;
	*cached = false;
	prepare_call(op, s, &call, ctx);
	aks_owner_claim *claim = NULL;
	int rc = acquire(op, s, &call, sb, &recreated, use_cache ? cached : NULL, &claim, err);
	if (rc == AKS_OK)
		rc = adopt(op, s, *sb, &claim, err);
	if (claim) /* per_call: the caller's until its destroy */
		out->claim = claim;
	if (rc < 0 || !recreated)
		return rc;
	free(out->notice);
	if (!(out->notice = aks__engine_recreated_notice(s->id))) {
		aks_sandbox_close(*sb);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	return AKS_OK;
}

/* One attempt. *gone_kept: it failed only because a kept handle's sandbox went away (then
 * the handle is closed, the error dropped and nothing else touched). */
static int run_once(const aks_engine_op *op, aks_session_rec *s, bool use_cache,
                    aks_engine_outcome *out, bool *gone_kept, aks_error **err)
{
	aks_sandbox *sb = NULL;
	bool cached, had_sandbox = s->sandbox_id != NULL;
	*gone_kept = false;
	int rc = take_sandbox(op, s, use_cache, &sb, &cached, out, err);
	if (rc < 0)
		return rc;
	aks_call call;
	const char *ctx[5];
	prepare_call(op, s, &call, ctx); /* the operation gets the whole timeout */
	unsigned refused;
	rc = run_op(sb, op->req, &call, &out->result, &refused, err);
	/* The session's tally, written back with it (`aksandbox sessions`: egress_refused) */
	s->egress_refused =
	    refused > UINT_MAX - s->egress_refused ? UINT_MAX : s->egress_refused + refused;
	out->changed = out->changed || refused > 0;
	if (rc == AKS_EGONE && cached) {
		aks_sandbox_close(sb);
		if (err && *err) {
			aks_error_free(*err);
			*err = NULL;
		}
		*gone_kept = true;
		if (!had_sandbox) { /* a pooled one, gone while pooled: the session gets another */
			free(s->sandbox_id);
			s->sandbox_id = NULL;
		}
		return rc;
	}
	/* §11 item 8 closed handles after every call; kept, the sandbox's agent and its Python
	 * session live on for the session's next call (core/plugin/handle_cache.h). */
	give_back(op, sb, rc);
	s->last_used_at = aks__epoch_now();
	out->ran = true;
	return rc;
}

int aks__engine_run(const aks_engine_op *op, aks_session_rec *s, aks_engine_outcome *out,
                    aks_error **err)
{
	memset(out, 0, sizeof(*out));
	bool gone_kept;
	int rc = run_once(op, s, op->keep_handle, out, &gone_kept, err);
	if (!gone_kept)
		return rc;
	/* The kept handle's sandbox went away behind this process's back (another process's
	 * destroy, a worker's sweep): ask the backend, which self-heals (a new sandbox and its
	 * notice), and run it there. Without the cache, so never more than once. */
	out->reacquired = true;
	return run_once(op, s, false, out, &gone_kept, err);
}

/* The notice of an idle reset (malloc'd; NULL on ENOMEM). */
char *aks__engine_idle_notice(const aks_profile *p, const char *id)
{
	long long idle = (long long)aks_profile_get_idle_timeout(p);
	char *notice = NULL;
	int n = aks__engine_is_attached(p)
	            ? asprintf(&notice,
	                       "sandbox session '%s' was idle for more than %llds and its binding "
	                       "was reset; the attached environment itself is untouched",
	                       id, idle)
	            : asprintf(&notice,
	                       "sandbox session '%s' was idle for more than %llds and has been "
	                       "reset; its previous workspace state was discarded",
	                       id, idle);
	return n < 0 ? NULL : notice;
}

char *aks__engine_recreated_notice(const char *id)
{
	char *notice = NULL;
	if (asprintf(&notice,
	             "the sandbox behind session '%s' no longer existed and was recreated empty; "
	             "its previous workspace state is gone",
	             id) < 0)
		return NULL;
	return notice;
}
