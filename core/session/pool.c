/*
 * core/session/pool.c - warm pools: fill, take and count a profile's sandboxes created ahead
 * (see pool.h).
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "config/settings.h"
#include "plugin/handle_cache.h"
#include "plugin/provider.h"
#include "session/engine.h"
#include "session/pool.h"
#include "util/json_build.h"
#include "util/util.h"

bool aks__pool_enabled(const aks_profile *p)
{
	return p && p->pool_size > 0 && !aks__engine_is_attached(p);
}

int aks__profile_pool_size(const aks_profile *p)
{
	return aks__pool_enabled(p) ? p->pool_size : 0;
}

double aks__profile_pool_max_idle(const aks_profile *p)
{
	return p ? p->pool_max_idle : 0;
}

/* One pool record, as a scan found it. */
typedef struct pooled {
	char *key;
	double created_at;
} pooled;

typedef struct pool_scan {
	const char *profile;
	pooled *v;
	size_t n, cap;
} pool_scan;

static int note_pooled(void *ctx, const char *key, json_object *rec)
{
	pool_scan *sc = ctx;
	const char *profile = json_object_get_string(json_object_object_get(rec, "profile"));
	/* "pool:a:" is also the start of profile "a:b"'s keys: the record says whose it is. */
	if (!profile || strcmp(profile, sc->profile) != 0 ||
	    !json_object_is_type(json_object_object_get(rec, "sandbox_id"), json_type_string))
		return AKS_OK;
	if (sc->n == sc->cap) {
		size_t cap = sc->cap ? sc->cap * 2 : 8;
		pooled *grown = realloc(sc->v, cap * sizeof(*grown));
		if (!grown)
			return AKS_ENOMEM;
		sc->v = grown;
		sc->cap = cap;
	}
	if (!(sc->v[sc->n].key = strdup(key)))
		return AKS_ENOMEM;
	sc->v[sc->n++].created_at =
	    json_object_get_double(json_object_object_get(rec, "created_at"));
	return AKS_OK;
}

static int by_age(const void *a, const void *b)
{
	double x = ((const pooled *)a)->created_at, y = ((const pooled *)b)->created_at;
	return (x > y) - (x < y);
}

static void scan_free(pool_scan *sc)
{
	for (size_t i = 0; i < sc->n; i++)
		free(sc->v[i].key);
	free(sc->v);
}

/* p's pool records, oldest first. */
static int scan_pool(aks_owner *o, const aks_profile *p, pool_scan *sc, aks_error **err)
{
	char prefix[AKS_STORE_NAME_MAX + 1];
	memset(sc, 0, sizeof(*sc));
	sc->profile = aks_profile_get_name(p);
	if ((size_t)snprintf(prefix, sizeof(prefix), AKS_POOL_KEY_PREFIX "%s:", sc->profile) >=
	    sizeof(prefix) - 32)
		return aks__error_set(err, AKS_EINVAL, "pool '%s': the profile's name is too long",
		                      sc->profile);
	int rc =
	    aks__store_scan(aks__owner_store(o), AKS_STORE_NS_POOL, prefix, note_pooled, sc, err);
	if (rc == AKS_ENOMEM && err && !*err)
		aks__error_set(err, AKS_ENOMEM, "out of memory");
	if (rc < 0) {
		scan_free(sc);
		memset(sc, 0, sizeof(*sc));
		return rc;
	}
	if (sc->n)
		qsort(sc->v, sc->n, sizeof(*sc->v), by_age);
	return AKS_OK;
}

/* The take: the record, if it is still there, is deleted and its sandbox id kept. */
static int take_fn(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	char **sandbox_id = ctx;
	const char *sid = json_object_get_string(json_object_object_get(rec, "sandbox_id"));
	if (!sid)
		return AKS_ENOTFOUND; /* another taker was first */
	if (!(*sandbox_id = strdup(sid)))
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	aks__store_clear_record(rec);
	*changed = true;
	return AKS_OK;
}

/* Takes the record `key`: AKS_OK with *sandbox_id, or AKS_ENOTFOUND when it was gone. */
static int take_key(aks_owner *o, const char *key, char **sandbox_id, aks_error **err)
{
	*sandbox_id = NULL;
	int rc = aks__store_update(aks__owner_store(o), AKS_STORE_NS_POOL, key, take_fn, sandbox_id,
	                           err);
	if (rc < 0) {
		free(*sandbox_id);
		*sandbox_id = NULL;
	}
	return rc;
}

int aks__pool_take(aks_owner *o, const aks_profile *p, char **sandbox_id, aks_error **err)
{
	*sandbox_id = NULL;
	if (!o || !aks__pool_enabled(p))
		return AKS_OK;
	pool_scan sc;
	int rc = scan_pool(o, p, &sc, err);
	double now = aks__epoch_now();
	for (size_t i = 0; rc == AKS_OK && !*sandbox_id && i < sc.n; i++) {
		if (now - sc.v[i].created_at >= p->pool_max_idle)
			continue; /* the filler's to replace */
		rc = take_key(o, sc.v[i].key, sandbox_id, err);
		if (rc == AKS_ENOTFOUND)
			rc = AKS_OK;
	}
	scan_free(&sc);
	if (*sandbox_id)
		aks__owner_pool_taken(o);
	return rc;
}

int aks__pool_count(aks_owner *o, const aks_profile *p, aks_error **err)
{
	if (!o || !aks__pool_enabled(p))
		return 0;
	pool_scan sc;
	int rc = scan_pool(o, p, &sc, err);
	if (rc < 0)
		return rc;
	double now = aks__epoch_now();
	int fresh = 0;
	for (size_t i = 0; i < sc.n; i++)
		fresh += now - sc.v[i].created_at < p->pool_max_idle;
	scan_free(&sc);
	return fresh;
}

typedef struct record_ctx {
	const char *profile, *sandbox_id;
	double created_at;
} record_ctx;

static int record_fn(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	const record_ctx *r = ctx;
	bool oom = false;
	aks__jset(rec, "profile", json_object_new_string(r->profile), &oom);
	aks__jset(rec, "sandbox_id", json_object_new_string(r->sandbox_id), &oom);
	aks__jset(rec, "created_at", json_object_new_double(r->created_at), &oom);
	if (oom)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	*changed = true;
	return AKS_OK;
}

/*
 * A new pooled sandbox runs `true` before it is offered. That starts what its operations go
 * through (the aksandbox-agent: resident in docker and kubernetes, with the handle in
 * bubblewrap and local_subprocess), so a session's first call pays for neither, and it proves
 * the sandbox runs commands at all before a session is given it. A provider without a shell
 * is offered as created.
 */
static int warm_up(const aks_profile *p, aks_sandbox *sb, const aks_call *call, aks_error **err)
{
	const aks_capabilities *caps = aks_provider_get_capabilities(aks_profile_get_provider(p));
	if (!caps || !caps->shell)
		return AKS_OK;
	aks_result *r = NULL;
	aks_error *e = NULL;
	int rc = aks__sandbox_execute_command(sb, "true", call, NULL, &r, &e);
	int code = rc == AKS_OK ? aks_result_get_exit_code(r) : 0;
	aks_result_free(r);
	if (rc < 0) {
		rc = aks__error_set(err, rc, "a new sandbox failed its first command: %s",
		                    e ? aks_error_message(e) : aks_strerror(rc));
		aks_error_free(e);
		return rc;
	}
	if (code != 0)
		return aks__error_set(err, AKS_EPROVISION,
		                      "a new sandbox's first command, `true`, exited with %d",
		                      code);
	return AKS_OK;
}

/* One more sandbox for p's pool: created with p's policy (claimed and labelled), warmed up,
 * recorded, and its claim released. A sandbox that cannot be warmed up or recorded is
 * destroyed. The handle is kept (core/plugin/handle_cache.h) for as long as the sandbox may
 * stay pooled: a session of this process that takes it uses it as it is, agent connected. */
static int add_one(aks_owner *o, const aks_profile *p, aks_error **err)
{
	aks_principal principal;
	aks_policy ignored;
	aks_call call;
	aks__engine_housekeeping_call(&principal, &ignored, &call);
	/* The profile's own policy, as a session's first call would create it. */
	const aks_policy *policy = aks_profile_get_policy(p);
	aks_call_init(&call, policy->timeout, policy, &principal, NULL);
	call.idle_timeout = (double)aks_profile_get_idle_timeout(p);
	char token[33], key[AKS_STORE_NAME_MAX + 1];
	int rc = aks__uuid4_hex(token, err);
	if (rc < 0)
		return rc;
	if ((size_t)snprintf(key, sizeof(key), AKS_POOL_KEY_PREFIX "%s:%s", aks_profile_get_name(p),
	                     token) >= sizeof(key))
		return aks__error_set(err, AKS_EINVAL, "pool '%s': the profile's name is too long",
		                      aks_profile_get_name(p));
	aks_sandbox *sb = NULL;
	aks_owner_claim *claim = NULL;
	if ((rc = aks__owner_create(o, p, &call, &sb, &claim, err)) < 0)
		return rc;
	record_ctx r = {aks_profile_get_name(p), strdup(aks_sandbox_get_id(sb)), aks__epoch_now()};
	if (!r.sandbox_id)
		rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
	if (rc == AKS_OK) { /* with a whole timeout of its own, as a session's call has */
		aks_call_init(&call, policy->timeout, policy, &principal, NULL);
		call.idle_timeout = (double)aks_profile_get_idle_timeout(p);
		rc = warm_up(p, sb, &call, err);
	}
	if (rc == AKS_OK)
		rc = aks__store_update(aks__owner_store(o), AKS_STORE_NS_POOL, key, record_fn, &r,
		                       err);
	aks_provider *prov = aks_profile_get_provider(p);
	if (rc == AKS_OK) {
		aks__handle_cache_put(aks__provider_handles(prov), sb,
		                      (int64_t)(p->pool_max_idle * 1000.0));
	} else if (r.sandbox_id) {
		aks_sandbox_close(sb); /* before its sandbox goes: its agent must not outlive it */
		aks__engine_destroy_sandbox(p, r.sandbox_id, NULL);
	} else {
		aks__owner_claim_free(claim); /* no id to destroy it by: gc finds it */
		claim = NULL;
		aks_sandbox_close(sb);
	}
	aks__owner_release(claim);
	free((char *)r.sandbox_id);
	return rc;
}

/* One fill per profile at a time in this process: two would both see it short. */
static pthread_mutex_t fill_mu = PTHREAD_MUTEX_INITIALIZER;

static int fill_locked(aks_owner *o, const aks_profile *p, json_object *report, aks_error **err)
{
	json_object *failed = json_object_object_get(report, "failed");
	pool_scan sc;
	int rc = scan_pool(o, p, &sc, err);
	if (rc < 0)
		return rc;
	double now = aks__epoch_now();
	int fresh = 0, replaced = 0, created = 0;
	for (size_t i = 0; rc == AKS_OK && i < sc.n; i++) {
		if (now - sc.v[i].created_at < p->pool_max_idle) {
			fresh++;
			continue;
		}
		char *sid = NULL;
		rc = take_key(o, sc.v[i].key, &sid, err);
		if (rc == AKS_OK) {
			aks__log(AKS_LOG_INFO, "sandbox",
			         "pool '%s': replacing sandbox %s, idle for more than %gs",
			         aks_profile_get_name(p), sid, p->pool_max_idle);
			aks__engine_destroy_sandbox(p, sid, NULL);
			replaced++;
		}
		if (rc == AKS_ENOTFOUND)
			rc = AKS_OK; /* taken meanwhile */
		free(sid);
	}
	scan_free(&sc);
	for (int i = fresh; rc == AKS_OK && i < p->pool_size; i++) {
		aks_error *e = NULL;
		int one = add_one(o, p, &e);
		if (one == AKS_OK) {
			created++;
			continue;
		}
		aks__log(AKS_LOG_WARNING, "sandbox", "pool '%s': cannot create a sandbox: %s",
		         aks_profile_get_name(p), e ? aks_error_message(e) : aks_strerror(one));
		bool oom = false;
		aks__jappend(failed, json_object_new_string(e ? aks_error_message(e) : ""), &oom);
		aks_error_free(e);
		if (oom)
			rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
		break; /* a backend that failed once fails the next: the next fill tries again */
	}
	bool oom = false;
	aks__jset(report, "ready", json_object_new_int(fresh + created), &oom);
	aks__jset(report, "created", json_object_new_int(created), &oom);
	aks__jset(report, "replaced", json_object_new_int(replaced), &oom);
	if (oom && rc == AKS_OK)
		rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
	return rc;
}

int aks__pool_fill(aks_owner *o, const aks_profile *p, json_object **report, aks_error **err)
{
	*report = NULL;
	if (!o)
		return aks__error_set(err, AKS_EINVAL, "pool: no state store owner");
	bool oom = false;
	json_object *r = aks__jnew(json_object_new_object(), &oom);
	aks__jset(r, "profile", json_object_new_string(aks_profile_get_name(p)), &oom);
	aks__jset(r, "size", json_object_new_int(aks__pool_enabled(p) ? p->pool_size : 0), &oom);
	aks__jset(r, "failed", json_object_new_array(), &oom);
	if (oom) {
		json_object_put(r);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	int rc = AKS_OK;
	if (aks__pool_enabled(p)) {
		pthread_mutex_lock(&fill_mu);
		rc = fill_locked(o, p, r, err);
		pthread_mutex_unlock(&fill_mu);
	}
	if (rc < 0) {
		json_object_put(r);
		return rc;
	}
	*report = r;
	return AKS_OK;
}
