/*
 * core/session/engine.c - acquiring a session's sandbox, running one operation on it and destroying
 * it: the steps every broker shares (see engine.h).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/handle_cache.h"
#include "plugin/result.h"
#include "session/engine.h"
#include "tools/json.h"
#include "util/util.h"

/* Passes a library error on to the caller's err, or frees it. */
static int pass_error(aks_error **err, int rc, aks_error *e)
{
	if (err && !*err)
		*err = e;
	else
		aks_error_free(e);
	return rc;
}

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
void aks__engine_destroy_sandbox(const aks_profile *p, const char *sandbox_id)
{
	if (!sandbox_id || !p || aks__engine_is_attached(p))
		return;
	/* A handle kept for it goes first: its agent must not outlive the sandbox. */
	aks__handle_cache_drop(aks__provider_handles(aks_profile_get_provider(p)), sandbox_id);
	aks_principal principal;
	aks_policy policy;
	aks_call call;
	aks_principal_init(&principal, "agent");
	aks_policy_init(&policy);
	aks_call_init(&call, policy.timeout, &policy, &principal, NULL);
	aks_error *e = NULL;
	if (aks_provider_destroy(aks_profile_get_provider(p), sandbox_id, &call, &e) < 0)
		aks__log(AKS_LOG_WARNING, "sandbox", "Error destroying sandbox %s: %s", sandbox_id,
		         aks_error_message(e));
	aks_error_free(e);
}

void aks__engine_destroy(const aks_profile *p, aks_session_rec *s)
{
	aks__engine_destroy_sandbox(p, s->sandbox_id);
	free(s->sandbox_id);
	s->sandbox_id = NULL;
	s->closed = true;
}

/*
 * Attach-or-create with self-heal (§5.2 step 6). For an attached profile,
 * "create" means attaching to attach_to; a vanished attached environment is
 * an error, never a reason to provision one.
 */
int aks__engine_acquire(const aks_profile *p, const aks_session_rec *s, const aks_call *call,
                        aks_sandbox **out, bool *recreated, bool *cached, aks_error **err)
{
	aks_provider *prov = aks_profile_get_provider(p);
	bool attached = aks__engine_is_attached(p);
	const char *target = s->sandbox_id ? s->sandbox_id
	                     : attached    ? aks_profile_get_attach_to(p)
	                                   : NULL;
	*recreated = false;
	if (cached) {
		*cached = false;
		if (target &&
		    (*out = aks__handle_cache_take(aks__provider_handles(prov), target))) {
			*cached = true;
			return AKS_OK;
		}
	}
	if (target) {
		aks_error *e = NULL;
		int rc = aks_provider_attach(prov, target, call, out, &e);
		if (rc != AKS_EGONE)
			return rc < 0 ? pass_error(err, rc, e) : rc;
		aks_error_free(e);
		if (attached)
			return aks__error_set(
			    err, AKS_EGONE,
			    "attached environment '%s' (profile '%s') is unreachable; "
			    "not recreating — attached environments are never "
			    "provisioned by the framework",
			    target, aks_profile_get_name(p));
		aks__log(AKS_LOG_INFO, "sandbox",
		         "sandbox %s of session '%s' no longer exists; creating a new one", target,
		         s->id);
		/* What the vanished sandbox may have left (a docker workspace volume, say) is
		 * the provider's to clean: destroy is idempotent, so a gone id is fine. */
		aks_error *gone = NULL;
		if (aks_provider_destroy(prov, target, call, &gone) < 0)
			aks__log(AKS_LOG_INFO, "sandbox", "cleaning up vanished sandbox %s: %s",
			         target, aks_error_message(gone));
		aks_error_free(gone);
		*recreated = true;
	}
	return aks_provider_create(prov, call, out, err);
}

void aks__engine_release(const aks_profile *p, aks_sandbox *sb, int op_rc)
{
	if (!sb)
		return;
	if (op_rc == AKS_EGONE) {
		aks_sandbox_close(sb); /* the sandbox went away under it */
		return;
	}
	/* Past the profile's idle_timeout the session's next call resets the sandbox anyway. */
	int64_t idle = aks_profile_get_idle_timeout(p);
	aks__handle_cache_put(aks__provider_handles(aks_profile_get_provider(p)), sb,
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

/* The operation itself (§5.2's table), under the call's deadline. */
int aks__engine_run_op(aks_sandbox *sb, const aks_mgr_request *req, const aks_call *call,
                       aks_result **out, aks_error **err)
{
	aks_error *e = NULL;
	int rc;
	*out = NULL;
	switch (req->op) {
	case AKS_MGR_EXECUTE_CODE:
		/* The result the call makes on this thread streams to the request's tap. */
		aks__result_tap_next(req->output);
		rc = aks_sandbox_execute_code(
		    sb, req->code, req->language ? req->language : "python", call, out, &e);
		aks__result_tap_next(NULL);
		break;
	case AKS_MGR_EXECUTE_COMMAND:
		aks__result_tap_next(req->output);
		rc = aks_sandbox_execute_command(sb, req->command, call, out, &e);
		aks__result_tap_next(NULL);
		break;
	case AKS_MGR_UPLOAD:
		rc = aks_sandbox_upload_file(sb, req->path, req->data, req->len, call, &e);
		break;
	default:
		rc = aks_sandbox_download_file(sb, req->path, call, out, &e);
		break;
	}
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
	return pass_error(err, rc, e);
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
