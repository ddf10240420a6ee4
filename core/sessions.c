/*
 * core/sessions.c - sandbox sessions in the state store.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <json-c/json.h>

#include "sessions.h"
#include "util.h"

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

static struct json_object *rec_to_json(const aks_session_rec *r)
{
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "sandbox_session_id", json_object_new_string(r->id));
	json_object_object_add(o, "name", r->name ? json_object_new_string(r->name) : NULL);
	json_object_object_add(o, "profile", json_object_new_string(r->profile));
	json_object_object_add(o, "provider_type",
	                       json_object_new_string(r->provider_type ? r->provider_type : ""));
	json_object_object_add(o, "sandbox_id",
	                       r->sandbox_id ? json_object_new_string(r->sandbox_id) : NULL);
	json_object_object_add(o, "created_at", json_object_new_double(r->created_at));
	json_object_object_add(o, "last_used_at", json_object_new_double(r->last_used_at));
	json_object_object_add(o, "status", json_object_new_string(r->closed ? "closed" : "active"));
	/* Only while there is one: records without it read as they always did. */
	if (r->reset_notice)
		json_object_object_add(o, "reset_notice", json_object_new_string(r->reset_notice));
	return o;
}

static char *dup_member(struct json_object *o, const char *key)
{
	struct json_object *v = json_object_object_get(o, key);
	return v && json_object_is_type(v, json_type_string) ? strdup(json_object_get_string(v))
	                                                     : NULL;
}

static int rec_from_json(struct json_object *o, aks_session_rec *r, aks_error **err)
{
	memset(r, 0, sizeof(*r));
	r->id = dup_member(o, "sandbox_session_id");
	r->name = dup_member(o, "name");
	r->profile = dup_member(o, "profile");
	r->provider_type = dup_member(o, "provider_type");
	r->sandbox_id = dup_member(o, "sandbox_id");
	r->reset_notice = dup_member(o, "reset_notice");
	r->created_at = json_object_get_double(json_object_object_get(o, "created_at"));
	r->last_used_at = json_object_get_double(json_object_object_get(o, "last_used_at"));
	const char *status = json_object_get_string(json_object_object_get(o, "status"));
	r->closed = status && strcmp(status, "closed") == 0;
	if (!r->id || !r->profile) {
		aks__session_clear(r);
		return aks__error_set(err, AKS_EIO, "a stored session record is incomplete");
	}
	return AKS_OK;
}

/* The "sessions" object of a document, created when asked. */
static struct json_object *sessions_of(struct json_object *doc, bool create)
{
	struct json_object *s = json_object_object_get(doc, "sessions");
	if (!s && create) {
		s = json_object_new_object();
		json_object_object_add(doc, "sessions", s);
	}
	return s;
}

/* ---- transactions ---- */

struct save_ctx {
	const aks_session_rec *rec;
};

static int save_txn(struct json_object *doc, bool *changed, void *ctx, aks_error **err)
{
	const struct save_ctx *c = ctx;
	struct json_object *s = sessions_of(doc, true), *o = rec_to_json(c->rec);
	if (!s || !o) {
		json_object_put(o);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	json_object_object_add(s, c->rec->id, o);
	*changed = true;
	return AKS_OK;
}

int aks__sessions_save(aks_state_store *st, const char *ns, const aks_session_rec *rec,
                       aks_error **err)
{
	struct save_ctx c = {rec};
	return aks__store_update(st, ns, save_txn, &c, err);
}

static int remove_txn(struct json_object *doc, bool *changed, void *ctx, aks_error **err)
{
	(void)err;
	struct json_object *s = sessions_of(doc, false);
	if (s && json_object_object_get_ex(s, ctx, NULL)) {
		json_object_object_del(s, ctx);
		if (json_object_object_length(s) == 0)
			json_object_object_del(doc, "sessions");
		*changed = true;
	}
	return AKS_OK;
}

int aks__sessions_remove(aks_state_store *st, const char *ns, const char *id, aks_error **err)
{
	return aks__store_update(st, ns, remove_txn, (void *)id, err);
}

static int find_in(aks_state_store *st, const char *ns, const char *id, aks_session_rec *out,
                   aks_error **err)
{
	struct json_object *doc = NULL;
	int rc = aks__store_read(st, ns, &doc, err);
	if (rc < 0)
		return rc;
	struct json_object *o = json_object_object_get(sessions_of(doc, false), id);
	rc = o ? rec_from_json(o, out, err) : AKS_ENOTFOUND;
	json_object_put(doc);
	return rc;
}

int aks__sessions_find_in(aks_state_store *st, const char *ns, const char *id,
                          aks_session_rec *out, aks_error **err)
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
		return aks__error_set(err, AKS_ECONFIG,
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

static int list_ns(aks_state_store *st, const char *ns, aks_session_rec **out, size_t *count,
                   aks_error **err)
{
	struct json_object *doc = NULL;
	int rc = aks__store_read(st, ns, &doc, err);
	if (rc < 0)
		return rc;
	struct json_object *s = sessions_of(doc, false);
	size_t n = s ? (size_t)json_object_object_length(s) : 0;
	aks_session_rec *grown = n ? realloc(*out, (*count + n) * sizeof(**out)) : *out;
	if (n && !grown) {
		json_object_put(doc);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	*out = grown;
	if (s) {
		json_object_object_foreach(s, key, val)
		{
			(void)key;
			if (rec_from_json(val, &(*out)[*count], NULL) < 0)
				continue; /* an incomplete record is skipped, not fatal to listing */
			(*count)++;
		}
	}
	json_object_put(doc);
	return AKS_OK;
}

int aks__sessions_list(aks_state_store *st, const char *conversation, aks_session_rec **out,
                       size_t *count, aks_error **err)
{
	*out = NULL;
	*count = 0;
	int rc = list_ns(st, conversation, out, count, err);
	if (rc == AKS_OK)
		rc = list_ns(st, AKS_STORE_NS_RUNTIME, out, count, err);
	if (rc < 0) {
		for (size_t i = 0; i < *count; i++)
			aks__session_clear(&(*out)[i]);
		free(*out);
		*out = NULL;
		*count = 0;
	}
	return rc;
}
