/*
 * core/session/sessions.c - sandbox sessions in the state store.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <json-c/json.h>

#include "session/sessions.h"
#include "util/json_build.h"
#include "util/util.h"

void aks__session_clear(aks_session_rec *s)
{
	if (!s)
		return;
	free(s->id);
	free(s->name);
	free(s->profile);
	free(s->provider_type);
	free(s->sandbox_id);
	free(s->reset_notice);
	memset(s, 0, sizeof(*s));
}

int aks__uuid4_hex(char out[33], aks_error **err)
{
	unsigned char b[16];
	size_t got = 0;
	while (got < sizeof(b)) {
		ssize_t n = getrandom(b + got, sizeof(b) - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return aks__error_set(err, AKS_EIO, "cannot read random bytes: %s",
			                      strerror(errno));
		got += (size_t)n;
	}
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
	for (size_t i = 0; i < sizeof(b); i++)
		snprintf(out + 2 * i, 3, "%02x", b[i]);
	return AKS_OK;
}

double aks__epoch_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)(ts.tv_nsec / 1000) / 1e6;
}

const char *aks__session_ns(const aks_profile *profile, const char *conversation)
{
	return profile && aks_profile_get_scope(profile) == AKS_SCOPE_PER_RUNTIME
	           ? AKS_STORE_NS_RUNTIME
	           : conversation;
}

/* ---- JSON <-> record ---- */

struct json_object *aks__session_to_json(const aks_session_rec *r)
{
	bool oom = false;
	struct json_object *o = aks__jnew(json_object_new_object(), &oom);
	aks__jset(o, "sandbox_session_id", json_object_new_string(r->id), &oom);
	aks__jset_str_or_null(o, "name", r->name, &oom);
	aks__jset(o, "profile", json_object_new_string(r->profile), &oom);
	aks__jset(o, "provider_type",
	          json_object_new_string(r->provider_type ? r->provider_type : ""), &oom);
	aks__jset_str_or_null(o, "sandbox_id", r->sandbox_id, &oom);
	aks__jset(o, "created_at", json_object_new_double(r->created_at), &oom);
	aks__jset(o, "last_used_at", json_object_new_double(r->last_used_at), &oom);
	aks__jset(o, "status", json_object_new_string(r->closed ? "closed" : "active"), &oom);
	/* Only while there is one: records without it read as they always did. */
	if (r->reset_notice)
		aks__jset(o, "reset_notice", json_object_new_string(r->reset_notice), &oom);
	if (r->egress_refused) /* likewise: only once its egress policy refused something */
		aks__jset(o, "egress_refused", json_object_new_int64(r->egress_refused), &oom);
	if (oom) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

/* A string member, copied: AKS_OK with *out NULL when it is absent (or not a string). */
static int dup_member(struct json_object *o, const char *key, char **out)
{
	struct json_object *v = json_object_object_get(o, key);
	*out = NULL;
	if (!v || !json_object_is_type(v, json_type_string))
		return AKS_OK;
	return (*out = strdup(json_object_get_string(v))) ? AKS_OK : AKS_ENOMEM;
}

int aks__session_from_json(struct json_object *o, aks_session_rec *r, aks_error **err)
{
	memset(r, 0, sizeof(*r));
	int rc = AKS_OK;
	if (dup_member(o, "sandbox_session_id", &r->id) || dup_member(o, "name", &r->name) ||
	    dup_member(o, "profile", &r->profile) ||
	    dup_member(o, "provider_type", &r->provider_type) ||
	    dup_member(o, "sandbox_id", &r->sandbox_id) ||
	    dup_member(o, "reset_notice", &r->reset_notice))
		rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
	else if (!r->id || !r->profile)
		rc = aks__error_set(err, AKS_EIO, "a stored session record is incomplete");
	if (rc != AKS_OK) {
		aks__session_clear(r);
		return rc;
	}
	r->created_at = json_object_get_double(json_object_object_get(o, "created_at"));
	r->last_used_at = json_object_get_double(json_object_object_get(o, "last_used_at"));
	const char *status = json_object_get_string(json_object_object_get(o, "status"));
	r->closed = status && strcmp(status, "closed") == 0;
	int64_t refused = json_object_get_int64(json_object_object_get(o, "egress_refused"));
	r->egress_refused = refused <= 0 ? 0 : refused >= UINT_MAX ? UINT_MAX : (unsigned)refused;
	return AKS_OK;
}

/* The record key of a session: "session:<id>". NULL on ENOMEM. */
static char *session_key(const char *id)
{
	char *key = NULL;
	return asprintf(&key, "session:%s", id) < 0 ? NULL : key;
}

/* ---- transactions ---- */

static int save_txn(struct json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	struct json_object *o = aks__session_to_json(ctx);
	if (!o)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	aks__store_clear_record(rec);
	int rc = AKS_OK;
	json_object_object_foreach(o, k, v)
	{
		if (json_object_object_add(rec, k, json_object_get(v)) < 0) {
			json_object_put(v);
			rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
			break;
		}
	}
	json_object_put(o);
	*changed = rc == AKS_OK;
	return rc;
}

int aks__sessions_save(aks_state_store *st, const char *ns, const aks_session_rec *rec,
                       aks_error **err)
{
	aks_autofree char *key = session_key(rec->id);
	if (!key)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	return aks__store_update(st, ns, key, save_txn, (void *)rec, err);
}

static int remove_txn(struct json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)ctx;
	(void)err;
	*changed = json_object_object_length(rec) > 0;
	aks__store_clear_record(rec);
	return AKS_OK;
}

int aks__sessions_remove(aks_state_store *st, const char *ns, const char *id, aks_error **err)
{
	aks_autofree char *key = session_key(id);
	if (!key)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	return aks__store_update(st, ns, key, remove_txn, NULL, err);
}

static int find_in(aks_state_store *st, const char *ns, const char *id, aks_session_rec *out,
                   aks_error **err)
{
	aks_autofree char *key = session_key(id);
	if (!key)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	struct json_object *rec = NULL;
	int rc = aks__store_get(st, ns, key, &rec, err);
	if (rc == AKS_OK)
		rc = aks__session_from_json(rec, out, err);
	json_object_put(rec);
	return rc;
}

int aks__sessions_find_in(aks_state_store *st, const char *ns, const char *id, aks_session_rec *out,
                          aks_error **err)
{
	return find_in(st, ns, id, out, err);
}

int aks__sessions_find(aks_state_store *st, const char *conversation, const char *id,
                       aks_session_rec *out, aks_error **err)
{
	/* The runtime namespace first, as the original's lookup does. */
	int rc = find_in(st, AKS_STORE_NS_RUNTIME, id, out, err);
	if (rc != AKS_ENOTFOUND)
		return rc;
	return find_in(st, conversation, id, out, err);
}

int aks__sessions_new(aks_state_store *st, const aks_settings *s, const char *conversation,
                      const char *profile_name, const char *name, aks_session_rec *out,
                      aks_error **err)
{
	aks_profile *p = NULL;
	int rc = aks_settings_find_profile(s, profile_name, &p, err);
	if (rc < 0)
		return rc;
	static const char *const scopes[] = {"per_session", "per_call", "per_runtime"};
	int scope = aks_profile_get_scope(p);
	if (scope != AKS_SCOPE_PER_SESSION)
		return aks__error_set(
		    err, AKS_ECONFIG,
		    "cannot mint a new sandbox session for profile '%s': scope '%s' "
		    "does not support explicit sessions (per_call is ephemeral per "
		    "execution; per_runtime is a single shared session)",
		    aks_profile_get_name(p), scopes[scope]);
	char id[33];
	if ((rc = aks__uuid4_hex(id, err)) < 0)
		return rc;
	memset(out, 0, sizeof(*out));
	out->id = strdup(id);
	out->name = name ? strdup(name) : NULL;
	out->profile = strdup(aks_profile_get_name(p));
	out->provider_type = strdup(aks_profile_get_type(p));
	out->created_at = out->last_used_at = aks__epoch_now();
	if (!out->id || (name && !out->name) || !out->profile || !out->provider_type) {
		aks__session_clear(out);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	rc = aks__sessions_save(st, conversation, out, err);
	if (rc < 0)
		aks__session_clear(out);
	return rc;
}

typedef struct list_ctx {
	aks_session_rec *v;
	size_t n, cap;
} list_ctx;

static int collect(void *ctx, const char *key, struct json_object *rec)
{
	(void)key;
	list_ctx *l = ctx;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		aks_session_rec *p = realloc(l->v, cap * sizeof(*p));
		if (!p)
			return AKS_ENOMEM;
		l->v = p;
		l->cap = cap;
	}
	if (aks__session_from_json(rec, &l->v[l->n], NULL) == AKS_OK)
		l->n++; /* an incomplete record is skipped, not fatal to listing */
	return AKS_OK;
}

/* Creation order, as the original's registry lists them. */
static int by_creation(const void *a, const void *b)
{
	const aks_session_rec *x = a, *y = b;
	if (x->created_at != y->created_at)
		return x->created_at < y->created_at ? -1 : 1;
	return strcmp(x->id, y->id);
}

static int list_ns(aks_state_store *st, const char *ns, list_ctx *l, aks_error **err)
{
	size_t first = l->n;
	int rc = aks__store_scan(st, ns, "session:", collect, l, err);
	if (rc == AKS_ENOMEM && err && !*err)
		rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
	if (rc == AKS_OK && l->n > first)
		qsort(l->v + first, l->n - first, sizeof(*l->v), by_creation);
	return rc;
}

int aks__sessions_list(aks_state_store *st, const char *conversation, aks_session_rec **out,
                       size_t *count, aks_error **err)
{
	list_ctx l = {NULL, 0, 0};
	int rc = list_ns(st, conversation, &l, err);
	if (rc == AKS_OK)
		rc = list_ns(st, AKS_STORE_NS_RUNTIME, &l, err);
	if (rc < 0) {
		for (size_t i = 0; i < l.n; i++)
			aks__session_clear(&l.v[i]);
		free(l.v);
		l.v = NULL;
		l.n = 0;
	}
	*out = l.v;
	*count = l.n;
	return rc;
}
