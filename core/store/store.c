/*
 * core/store/store.c - the state store as the core sees it: a store plugin, or the built-in file
 * store, holding JSON objects. Parsing, the size and depth bounds, and the refusal of calls
 * from inside a transaction live here, once, whatever store keeps the bytes.
 */
#include "config.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "plugin/host_api.h"
#include "store/file_io.h"
#include "store/store.h"
#include "util/util.h"

struct aks_state_store {
	const char *name; /* "file" or the plugin's name */
	const aks_store_ops *ops;
	aks_store_impl *impl;
	bool is_file;
	size_t max_doc;
	/* Threads inside a transaction on this handle, to refuse nested calls (they could
	 * wait for a lock their own thread holds). */
	pthread_mutex_t mu;
	pthread_t *active;
	size_t n_active, cap_active;
};

static int store_new(const char *name, const aks_store_ops *ops, aks_state_store **out,
                     aks_error **err)
{
	aks_state_store *s = calloc(1, sizeof(*s));
	if (!s)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	if (pthread_mutex_init(&s->mu, NULL) != 0) {
		free(s);
		return aks__error_set(err, AKS_ENOMEM, "state store: cannot create a mutex");
	}
	s->name = name;
	s->ops = ops;
	s->max_doc = AKS_STORE_MAX_DOC_SIZE;
	*out = s;
	return AKS_OK;
}

int aks__store_open(const char *dir, aks_state_store **out, aks_error **err)
{
	*out = NULL;
	aks_state_store *s = NULL;
	int rc = store_new("file", &aks__file_store_ops, &s, err);
	if (rc == AKS_OK)
		rc = aks__file_store_new(dir, &s->impl, err);
	if (rc < 0) {
		aks__store_close(s);
		return rc;
	}
	s->is_file = true;
	*out = s;
	return AKS_OK;
}

int aks__store_open_desc(const aks_plugin_descriptor *d, const aks_config *config,
                         aks_state_store **out, aks_error **err)
{
	*out = NULL;
	if (!d)
		return aks__error_set(err, AKS_EINVAL, "state store: no plugin");
	if (d->kind != AKS_PLUGIN_STORE)
		return aks__error_set(err, AKS_EPLUGIN, "plugin '%s' is not a store", d->name);
	const aks_store_ops *ops = d->ops; /* the loader checked every slot is set */
	aks_state_store *s = NULL;
	int rc = store_new(d->name, ops, &s, err);
	if (rc == AKS_OK)
		rc = ops->init(aks__host_api(), config, &s->impl, err);
	if (rc < 0) {
		if (err && !*err)
			aks__error_set(err, rc, "store plugin '%s' failed to start", d->name);
		if (s)
			s->impl = NULL;
		aks__store_close(s);
		return rc;
	}
	*out = s;
	return AKS_OK;
}

int aks__store_open_plugin(const aks_plugin *plugin, const aks_config *config,
                           aks_state_store **out, aks_error **err)
{
	*out = NULL;
	const aks_plugin_descriptor *d = aks_plugin_get_descriptor(plugin);
	if (!d)
		return aks__error_set(err, AKS_EINVAL, "state store: no plugin");
	return aks__store_open_desc(d, config, out, err);
}

void aks__store_close(aks_state_store *s)
{
	if (!s)
		return;
	if (s->impl && s->ops->fini)
		s->ops->fini(s->impl);
	pthread_mutex_destroy(&s->mu);
	free(s->active);
	free(s);
}

const char *aks__store_name(const aks_state_store *s)
{
	return s->name;
}

const char *aks__store_dir(const aks_state_store *s)
{
	return s->is_file ? aks__file_store_dir(s->impl) : NULL;
}

int aks__store_set_volatile(aks_state_store *s, const char *ns, const char *key_prefix,
                            aks_error **err)
{
	if (!s->is_file)
		return AKS_OK;
	return aks__file_store_set_volatile(s->impl, ns, key_prefix) == AKS_OK
	           ? AKS_OK
	           : aks__error_set(err, AKS_ENOMEM, "out of memory");
}

void aks__store_set_max_doc_size(aks_state_store *s, size_t bytes)
{
	/* json-c measures what it parses in int. */
	if (bytes > 0)
		s->max_doc = bytes < INT32_MAX ? bytes : INT32_MAX - 1;
}

/* ---- refusing nested calls ---- */

static int enter(aks_state_store *s, aks_error **err)
{
	pthread_t self = pthread_self();
	int rc = AKS_OK;
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->n_active; i++) {
		if (pthread_equal(s->active[i], self)) {
			rc = aks__error_set(
			    err, AKS_EINVAL,
			    "state store: a call from inside a transaction could wait "
			    "for a lock its own thread holds");
			goto out;
		}
	}
	if (s->n_active == s->cap_active) {
		size_t cap = s->cap_active ? s->cap_active * 2 : 8;
		pthread_t *p = realloc(s->active, cap * sizeof(*p));
		if (!p) {
			rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
			goto out;
		}
		s->active = p;
		s->cap_active = cap;
	}
	s->active[s->n_active++] = self;
out:
	pthread_mutex_unlock(&s->mu);
	return rc;
}

/* True when the calling thread is inside a transaction on this handle. */
static bool inside(aks_state_store *s)
{
	pthread_t self = pthread_self();
	bool found = false;
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->n_active && !found; i++)
		found = pthread_equal(s->active[i], self);
	pthread_mutex_unlock(&s->mu);
	return found;
}

static void leave(aks_state_store *s)
{
	pthread_t self = pthread_self();
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->n_active; i++) {
		if (pthread_equal(s->active[i], self)) {
			s->active[i] = s->active[--s->n_active];
			break;
		}
	}
	pthread_mutex_unlock(&s->mu);
}

/* The namespace, and the key unless `key_too` is false (scan). */
static int check_names(const char *ns, const char *key, bool key_too, aks_error **err)
{
	int rc = aks__store_name_check("namespace", ns, err);
	return rc == AKS_OK && key_too ? aks__store_name_check("key", key, err) : rc;
}

/* ---- JSON in and out ---- */

/* Parses a stored value; *why says what is wrong with a corrupt one. */
static int parse(aks_state_store *s, const char *data, size_t len, json_object **out,
                 const char **why)
{
	*out = NULL;
	*why = NULL;
	if (len > s->max_doc) {
		*why = "it is larger than the size limit on a record";
		return AKS_ELIMIT;
	}
	json_tokener *tok = json_tokener_new_ex(AKS_STORE_MAX_DEPTH);
	if (!tok)
		return AKS_ENOMEM;
	json_object *o = json_tokener_parse_ex(tok, data, (int)len);
	enum json_tokener_error jerr = json_tokener_get_error(tok);
	size_t end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (jerr == json_tokener_continue || (jerr == json_tokener_success && !o))
		*why = "it ends early";
	else if (jerr != json_tokener_success)
		*why = json_tokener_error_desc(jerr);
	else if (!json_object_is_type(o, json_type_object))
		*why = "it is not a JSON object";
	for (size_t i = end; !*why && i < len; i++) {
		char c = data[i]; /* not strchr: it would find a NUL byte */
		if (c != ' ' && c != '\t' && c != '\r' && c != '\n')
			*why = "there is more after the record";
	}
	if (*why) {
		json_object_put(o);
		return AKS_EIO;
	}
	*out = o;
	return AKS_OK;
}

static int corrupt(aks_state_store *s, int rc, const char *ns, const char *key, const char *why,
                   aks_error **err)
{
	if (rc == AKS_ENOMEM)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	/* Never discard state silently: the record stays for a person to look at. */
	return aks__error_set(err, rc,
	                      "state store '%s': the record '%s' of '%s' is unreadable (%s); it "
	                      "was left as it is: remove it to start that record afresh",
	                      s->name, key, ns, why);
}

/* Serializes rec, refusing what is over the size bound or would not parse back. */
static int serialize(aks_state_store *s, const char *ns, const char *key, json_object *rec,
                     const char **text, size_t *len, aks_error **err)
{
	*text = json_object_to_json_string_length(
	    rec, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, len);
	if (!*text)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	if (*len + 1 > s->max_doc || *len > INT32_MAX)
		return aks__error_set(
		    err, AKS_ELIMIT,
		    "state store: the record '%s' of '%s' would be %zu bytes, over "
		    "the %zu-byte limit; nothing was written",
		    key, ns, *len + 1, s->max_doc);
	/* Read it back with the reader's own settings: what cannot be loaded is not written. */
	json_tokener *tok = json_tokener_new_ex(AKS_STORE_MAX_DEPTH);
	if (!tok)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	json_object *back = json_tokener_parse_ex(tok, *text, (int)*len);
	enum json_tokener_error jerr = json_tokener_get_error(tok);
	json_tokener_free(tok);
	/* json-c's writer ignores a failed allocation of its buffer and goes on without the
	 * piece it could not append: the text may not parse, or parse as another record (a key
	 * cut short, the sandbox id lost). Only the record itself is written. */
	bool whole = back && json_object_equal(back, rec);
	json_object_put(back);
	if (jerr == json_tokener_error_depth)
		return aks__error_set(err, AKS_ELIMIT,
		                      "state store: the record '%s' of '%s' nests deeper than %d "
		                      "levels; nothing was written",
		                      key, ns, AKS_STORE_MAX_DEPTH);
	/* Beyond the depth bound, what json-c writes it reads: any other difference is a piece
	 * its writer (or reader) could not allocate. */
	if (!whole)
		return aks__error_set(err, AKS_ENOMEM,
		                      "state store: out of memory writing the record '%s' of '%s' "
		                      "(it would not read back%s%s); nothing was written",
		                      key, ns, jerr == json_tokener_success ? "" : ": ",
		                      jerr == json_tokener_success ? ""
		                                                   : json_tokener_error_desc(jerr));
	return AKS_OK;
}

/* ---- transactions ---- */

void aks__store_clear_record(json_object *rec)
{
	struct json_object_iterator it = json_object_iter_begin(rec);
	struct json_object_iterator end = json_object_iter_end(rec);
	while (!json_object_iter_equal(&it, &end)) {
		const char *key = json_object_iter_peek_name(&it);
		json_object_iter_next(&it); /* before the entry it points at goes */
		json_object_object_del(rec, key);
	}
}

typedef struct txn_ctx {
	aks_state_store *s;
	const char *ns, *key;
	aks_store_json_fn fn;
	void *ctx;
	json_object *rec; /* owns the text handed to the store; freed after update returns */
} txn_ctx;

static int txn_bytes(void *ctx, const char *value, size_t len, int *action, const char **new_value,
                     size_t *new_len, aks_error **err)
{
	txn_ctx *t = ctx;
	json_object_put(t->rec); /* a store may run the function again (an optimistic retry) */
	t->rec = NULL;
	*action = AKS_STORE_KEEP;
	const char *why = NULL;
	int rc = value ? parse(t->s, value, len, &t->rec, &why) : AKS_OK;
	if (rc < 0)
		return corrupt(t->s, rc, t->ns, t->key, why, err);
	if (!t->rec && !(t->rec = json_object_new_object()))
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	bool changed = false;
	rc = t->fn(t->rec, &changed, t->ctx, err);
	if (rc != AKS_OK || !changed)
		return rc;
	if (json_object_object_length(t->rec) == 0) {
		*action = AKS_STORE_DELETE;
		return AKS_OK;
	}
	rc = serialize(t->s, t->ns, t->key, t->rec, new_value, new_len, err);
	if (rc == AKS_OK)
		*action = AKS_STORE_PUT;
	return rc;
}

int aks__store_update(aks_state_store *s, const char *ns, const char *key, aks_store_json_fn fn,
                      void *ctx, aks_error **err)
{
	if (!s || !fn)
		return aks__error_set(err, AKS_EINVAL, "state store: no store or no function");
	int rc = check_names(ns, key, true, err);
	if (rc == AKS_OK)
		rc = enter(s, err);
	if (rc < 0)
		return rc;
	txn_ctx t = {s, ns, key, fn, ctx, NULL};
	rc = s->ops->update(s->impl, ns, key, txn_bytes, &t, err);
	json_object_put(t.rec);
	leave(s);
	return rc;
}

bool aks__store_can_expire(const aks_state_store *s)
{
	const aks_store_ops *ops = s->ops;
	return ops->struct_size >=
	           offsetof(aks_store_ops, put_expiring) + sizeof(ops->put_expiring) &&
	       ops->put_expiring;
}

int aks__store_put_expiring(aks_state_store *s, const char *ns, const char *key, json_object *rec,
                            int64_t ttl_seconds, aks_error **err)
{
	if (!s || !rec || ttl_seconds <= 0)
		return aks__error_set(err, AKS_EINVAL, "state store: no store, record or ttl");
	if (!aks__store_can_expire(s))
		return aks__error_set(err, AKS_ECAPABILITY,
		                      "state store '%s' cannot expire records", s->name);
	int rc = check_names(ns, key, true, err);
	const char *text = NULL;
	size_t len = 0;
	if (rc == AKS_OK)
		rc = serialize(s, ns, key, rec, &text, &len, err);
	if (rc == AKS_OK)
		rc = enter(s, err);
	if (rc < 0)
		return rc;
	rc = s->ops->put_expiring(s->impl, ns, key, text, len, ttl_seconds, err);
	leave(s);
	if (rc < 0 && err && !*err)
		aks__error_set(err, rc, "state store '%s': cannot write the record '%s' of '%s'",
		               s->name, key, ns);
	return rc;
}

static int clear_fn(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)ctx;
	(void)err;
	*changed = json_object_object_length(rec) > 0;
	aks__store_clear_record(rec);
	return AKS_OK;
}

int aks__store_delete(aks_state_store *s, const char *ns, const char *key, aks_error **err)
{
	return aks__store_update(s, ns, key, clear_fn, NULL, err);
}

/* ---- reading ---- */

typedef struct get_ctx {
	aks_state_store *s;
	const char *ns;
	json_object *rec;
	aks_error **err;
} get_ctx;

static int take_record(void *ctx, const char *key, const char *value, size_t len)
{
	get_ctx *g = ctx;
	const char *why = NULL;
	int rc = parse(g->s, value, len, &g->rec, &why);
	return rc < 0 ? corrupt(g->s, rc, g->ns, key, why, g->err) : AKS_OK;
}

int aks__store_get(aks_state_store *s, const char *ns, const char *key, json_object **out,
                   aks_error **err)
{
	*out = NULL;
	if (!s)
		return aks__error_set(err, AKS_EINVAL, "state store: no store");
	int rc = check_names(ns, key, true, err);
	if (rc == AKS_OK)
		rc = enter(s, err);
	if (rc < 0)
		return rc;
	get_ctx g = {s, ns, NULL, err};
	rc = s->ops->get(s->impl, ns, key, take_record, &g, err);
	leave(s);
	if (rc == AKS_OK && !g.rec) /* a store that returned OK without calling back */
		rc = AKS_ENOTFOUND;
	if (rc == AKS_OK)
		*out = g.rec;
	else
		json_object_put(g.rec);
	return rc;
}

typedef struct scan_ctx {
	aks_state_store *s;
	const char *ns;
	aks_store_each_fn each;
	void *ctx;
} scan_ctx;

static int scan_record(void *ctx, const char *key, const char *value, size_t len)
{
	scan_ctx *c = ctx;
	json_object *rec = NULL;
	const char *why = NULL;
	int rc = parse(c->s, value, len, &rec, &why);
	if (rc == AKS_ENOMEM)
		return rc;
	if (rc < 0) {
		aks__log(AKS_LOG_WARNING, "sandbox",
		         "state store '%s': skipping the unreadable record '%s' of '%s' (%s)",
		         c->s->name, key, c->ns, why);
		return AKS_OK;
	}
	rc = c->each(c->ctx, key, rec);
	json_object_put(rec);
	return rc;
}

int aks__store_scan(aks_state_store *s, const char *ns, const char *prefix, aks_store_each_fn each,
                    void *ctx, aks_error **err)
{
	if (!s || !each)
		return aks__error_set(err, AKS_EINVAL, "state store: no store or no function");
	int rc = check_names(ns, NULL, false, err);
	if (rc == AKS_OK)
		rc = enter(s, err);
	if (rc < 0)
		return rc;
	scan_ctx c = {s, ns, each, ctx};
	rc = s->ops->scan(s->impl, ns, prefix ? prefix : "", scan_record, &c, err);
	leave(s);
	if (rc == AKS_ENOMEM && err && !*err)
		aks__error_set(err, AKS_ENOMEM, "out of memory");
	return rc;
}

static int add_name(void *ctx, const char *ns)
{
	return aks__strv_push(ctx, ns);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int aks__store_list(aks_state_store *s, char ***out, aks_error **err)
{
	*out = NULL;
	if (!s)
		return aks__error_set(err, AKS_EINVAL, "state store: no store");
	aks_strv l = {NULL, 0, 0};
	int rc = enter(s, err);
	if (rc < 0)
		return rc;
	rc = s->ops->namespaces(s->impl, add_name, &l, err);
	leave(s);
	if (rc == AKS_OK && !l.v && !(l.v = calloc(1, sizeof(*l.v))))
		rc = AKS_ENOMEM; /* an empty list is still a list */
	if (rc < 0) {
		aks__store_free_names(l.v);
		return rc == AKS_ENOMEM && err && !*err ? aks__error_set(err, rc, "out of memory")
		                                        : rc;
	}
	qsort(l.v, l.n, sizeof(*l.v), cmp_names);
	*out = l.v;
	return AKS_OK;
}

void aks__store_free_names(char **names)
{
	aks__strv_free(names);
}

/* ---- named locks ---- */

int aks__store_lock(aks_state_store *s, const char *ns, const char *key, const aks_call *call,
                    aks_store_lock **out, aks_error **err)
{
	*out = NULL;
	int rc = check_names(ns, key, true, err);
	if (rc < 0)
		return rc;
	if (inside(s))
		return aks__error_set(err, AKS_EINVAL,
		                      "state store: a lock taken from inside a transaction could "
		                      "wait for ever");
	rc = s->ops->lock(s->impl, ns, key, call, out, err);
	if (rc == AKS_OK && !*out)
		rc = aks__error_set(err, AKS_EPLUGIN, "store '%s' returned no lock", s->name);
	return rc;
}

void aks__store_unlock(aks_state_store *s, aks_store_lock *lock)
{
	if (s && lock)
		s->ops->unlock(s->impl, lock);
}
