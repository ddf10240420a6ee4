/*
 * core/manager.c - profiles, sessions and the provider calls behind the tools
 * (reference §4 and the embedded broker's worker, §5.2-5.3).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "manager.h"
#include "result.h"
#include "tools_json.h"

struct aks_manager {
	aks_settings *settings;
	aks_state_store *store;
	char *lock_root; /* absolute: <store dir>/locks */
};

void aks__mgr_outcome_clear(aks_mgr_outcome *o)
{
	if (!o)
		return;
	aks_result_free(o->result);
	free(o->session_id);
	free(o->notice);
	memset(o, 0, sizeof(*o));
}

int aks__manager_new(aks_settings *settings, aks_state_store *store, aks_manager **out,
                     aks_error **err)
{
	aks_autofree char *dir = realpath(aks__store_dir(store), NULL);
	if (!dir)
		return aks__error_set(err, AKS_EIO, "cannot resolve the state directory '%s': %s",
		                      aks__store_dir(store), strerror(errno));
	aks_manager *m = calloc(1, sizeof(*m));
	if (!m || asprintf(&m->lock_root, "%s/locks", dir) < 0) {
		free(m);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	m->settings = settings;
	m->store = store;
	*out = m;
	return AKS_OK;
}

void aks__manager_free(aks_manager *m)
{
	if (!m)
		return;
	free(m->lock_root);
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
	return aks__store_ns_check(conversation, err);
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

char *aks__manager_lock_path(const aks_manager *m, const char *ns, const char *id)
{
	aks_autofree char *nsp = aks__store_ns_path(ns);
	aks_autofree char *idp = aks__store_ns_path(id);
	char *path = NULL;
	if (!nsp || !idp || asprintf(&path, "%s/%s/%s.lock", m->lock_root, nsp, idp) < 0)
		return NULL;
	return path;
}

/* Creates every missing directory above the last component of path. */
static int make_parents(const char *path)
{
	aks_autofree char *p = strdup(path);
	if (!p)
		return -ENOMEM;
	for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		if (mkdir(p, 0700) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	return 0;
}

typedef struct session_lock {
	int fd;
	char *path;
} session_lock;

/*
 * Takes the session's lock, waiting for other threads and processes. A
 * destroy unlinks the lock file while holding it, so a waiter that got the
 * lock on an unlinked file starts again on the current one.
 */
static int lock_session(aks_manager *m, const char *ns, const char *id, session_lock *lk,
                        aks_error **err)
{
	lk->fd = -1;
	lk->path = aks__manager_lock_path(m, ns, id);
	if (!lk->path)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	for (int made = 0;;) {
		int fd = open(lk->path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0 && errno == ENOENT && !made++) {
			int rc = make_parents(lk->path);
			if (rc == 0)
				continue;
			errno = -rc;
		}
		if (fd < 0)
			break;
		int rc;
		while ((rc = flock(fd, LOCK_EX)) < 0 && errno == EINTR)
			;
		struct stat held, now;
		if (rc == 0 && fstat(fd, &held) == 0 && stat(lk->path, &now) == 0 &&
		    held.st_dev == now.st_dev && held.st_ino == now.st_ino) {
			lk->fd = fd;
			return AKS_OK;
		}
		int e = errno;
		close(fd);
		if (rc < 0) {
			errno = e;
			break;
		}
		/* the file was replaced while we waited: lock the new one */
	}
	int e = errno;
	aks__error_set(err, AKS_EIO, "cannot lock sandbox session '%s' (%s): %s", id, lk->path,
	               strerror(e));
	free(lk->path);
	lk->path = NULL;
	return AKS_EIO;
}

/* Releases the lock; `remove` first unlinks the file (the session is gone). */
static void unlock_session(session_lock *lk, bool remove)
{
	if (lk->fd >= 0) {
		if (remove)
			unlink(lk->path);
		close(lk->fd); /* closing the only descriptor releases the flock */
	}
	free(lk->path);
	lk->fd = -1;
	lk->path = NULL;
}

/* ---- provider calls ---- */

static bool is_attached(const aks_profile *p)
{
	return p && aks_profile_get_environment(p) == AKS_ENV_ATTACHED;
}

/*
 * Backend destroy shared by destroy, idle reset and per_call (§4.6): best
 * effort, logged, never an error; attached environments are never destroyed.
 * The session always ends closed with no sandbox_id. Like the original, it
 * acts as the plain "agent" principal under the default policy.
 */
static void destroy_backend(const aks_profile *p, aks_session_rec *s)
{
	if (s->sandbox_id && p && !is_attached(p)) {
		aks_principal principal;
		aks_policy policy;
		aks_call call;
		aks_principal_init(&principal, "agent");
		aks_policy_init(&policy);
		aks_call_init(&call, policy.timeout, &policy, &principal, NULL);
		aks_error *e = NULL;
		if (aks_provider_destroy(aks_profile_get_provider(p), s->sandbox_id, &call, &e) < 0)
			aks__log(AKS_LOG_WARNING, "sandbox", "Error destroying sandbox %s: %s",
			         s->sandbox_id, aks_error_message(e));
		aks_error_free(e);
	}
	free(s->sandbox_id);
	s->sandbox_id = NULL;
	s->closed = true;
}

/*
 * Attach-or-create with self-heal (§5.2 step 6). For an attached profile,
 * "create" means attaching to attach_to; a vanished attached environment is
 * an error, never a reason to provision one.
 */
static int acquire(const aks_profile *p, const aks_session_rec *s, const aks_call *call,
                   aks_sandbox **out, bool *recreated, aks_error **err)
{
	aks_provider *prov = aks_profile_get_provider(p);
	bool attached = is_attached(p);
	const char *target = s->sandbox_id ? s->sandbox_id
	                     : attached    ? aks_profile_get_attach_to(p)
	                                   : NULL;
	*recreated = false;
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
		*recreated = true;
	}
	return aks_provider_create(prov, call, out, err);
}

static const char *op_name(int op)
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
static int run_op(aks_sandbox *sb, const aks_mgr_request *req, const aks_call *call,
                  aks_result **out, aks_error **err)
{
	aks_error *e = NULL;
	int rc;
	*out = NULL;
	switch (req->op) {
	case AKS_MGR_EXECUTE_CODE:
		rc = aks_sandbox_execute_code(
		    sb, req->code, req->language ? req->language : "python", call, out, &e);
		break;
	case AKS_MGR_EXECUTE_COMMAND:
		rc = aks_sandbox_execute_command(sb, req->command, call, out, &e);
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
		                      op_name(req->op), t);
	}
	return pass_error(err, rc, e);
}

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

typedef struct submit_state {
	aks_manager *m;
	const aks_mgr_caller *caller;
	const aks_mgr_request *req;
	aks_profile *profile;
	const aks_principal *principal;
} submit_state;

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
	rc = acquire(st->profile, &s, &call, &sb, &recreated, err);
	if (rc < 0)
		return rc;
	s.sandbox_id = strdup(aks_sandbox_get_id(sb));
	if (!s.sandbox_id) {
		aks_sandbox_close(sb);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	prepare_call(st, &call); /* the operation gets the whole timeout */
	rc = run_op(sb, st->req, &call, &out->result, err);
	aks_sandbox_close(sb);
	destroy_backend(st->profile, &s);
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

/* The idle reset on touch (§4.4 step 3); returns the notice or NULL. */
static char *idle_reset(const aks_profile *p, aks_session_rec *s, double now, bool *fail)
{
	int64_t idle = aks_profile_get_idle_timeout(p);
	*fail = false;
	if (!s->sandbox_id || !(now - s->last_used_at > (double)idle))
		return NULL;
	destroy_backend(p, s);
	s->closed = false;
	s->created_at = now;
	char *notice = NULL;
	int n = is_attached(p)
	            ? asprintf(&notice,
	                       "sandbox session '%s' was idle for more than %llds and its binding "
	                       "was reset; the attached environment itself is untouched",
	                       s->id, (long long)idle)
	            : asprintf(&notice,
	                       "sandbox session '%s' was idle for more than %llds and has been "
	                       "reset; its previous workspace state was discarded",
	                       s->id, (long long)idle);
	if (n < 0) {
		*fail = true;
		return NULL;
	}
	return notice;
}

/* per_session and per_runtime: the stored session, under its lock from lookup to write-back. */
static int submit_stored(submit_state *st, const char *ns, const char *id, bool explicit_id,
                         aks_mgr_outcome *out, aks_error **err)
{
	aks_state_store *store = st->m->store;
	session_lock lk;
	int rc = lock_session(st->m, ns, id, &lk, err);
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
		unlock_session(&lk, false);
		return rc;
	}
	bool fail;
	aks_autofree char *notice = idle_reset(st->profile, &s, now, &fail);
	bool dirty = notice != NULL;
	if (fail) {
		rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
		goto done;
	}
	s.last_used_at = now;

	aks_sandbox *sb = NULL;
	bool recreated;
	aks_call call;
	prepare_call(st, &call);
	rc = acquire(st->profile, &s, &call, &sb, &recreated, err);
	if (rc < 0)
		goto done;
	const char *sid = aks_sandbox_get_id(sb);
	if (!s.sandbox_id || strcmp(s.sandbox_id, sid) != 0) {
		/* Record the new sandbox before using it, so that no failure below
		 * (nor a crash) can leave it behind unrecorded. */
		free(s.sandbox_id);
		s.closed = false;
		if (!(s.sandbox_id = strdup(sid))) {
			rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
		} else {
			rc = aks__sessions_save(store, ns, &s, err);
			dirty = rc < 0;
		}
		if (rc < 0) {
			aks_sandbox_close(sb);
			destroy_backend(st->profile, &s);
			goto done;
		}
	}
	if (recreated) {
		free(notice);
		if (asprintf(&notice,
		             "the sandbox behind session '%s' no longer existed and was recreated "
		             "empty; its previous workspace state is gone",
		             s.id) < 0) {
			notice = NULL;
			rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
			aks_sandbox_close(sb);
			goto done;
		}
	}
	prepare_call(st, &call); /* the operation gets the whole timeout */
	rc = run_op(sb, st->req, &call, &out->result, err);
	aks_sandbox_close(sb); /* §11 item 8: handles are closed after every call */
	s.last_used_at = aks__epoch_now();
	dirty = true;
	if (rc == AKS_OK)
		rc = set_notice(out, notice, err);
	if (rc == AKS_OK && !(out->session_id = strdup(id)))
		rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
done:
	if (dirty && (existed || s.sandbox_id)) {
		aks_error *e = NULL;
		if (aks__sessions_save(store, ns, &s, &e) < 0)
			aks__log(AKS_LOG_WARNING, "sandbox", "cannot save sandbox session '%s': %s",
			         id, aks_error_message(e));
		aks_error_free(e);
	}
	aks__session_clear(&s);
	unlock_session(&lk, false);
	return rc;
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
	if (rc == AKS_OK) {
		int scope = aks_profile_get_scope(st.profile);
		if (scope == AKS_SCOPE_PER_CALL) {
			/* per_call never stores a session, so no explicit id can name
			 * one (the original silently ignored it, §11 item 3). */
			rc = req->session_id
			         ? aks__error_set(err, AKS_ESESSION_NOT_FOUND,
			                          "unknown sandbox session '%s'", req->session_id)
			         : submit_ephemeral(&st, out, err);
		} else {
			const char *ns = aks__session_ns(st.profile, caller->conversation);
			aks_autofree char *def = NULL;
			const char *id = req->session_id;
			if (!id &&
			    asprintf(&def, "default:%s", aks_profile_get_name(st.profile)) < 0)
				rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
			if (rc == AKS_OK)
				rc = submit_stored(&st, ns, id ? id : def, id != NULL, out, err);
		}
	}
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
		session_lock lk;
		if ((rc = lock_session(m, nss[i], id, &lk, err)) < 0)
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
			destroy_backend(p, &s);
			rc = aks__sessions_remove(m->store, nss[i], id, err);
			aks__session_clear(&s);
		} else if (rc == AKS_ENOTFOUND) {
			rc = AKS_OK;
		}
		unlock_session(&lk, rc == AKS_OK);
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
