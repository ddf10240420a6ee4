/*
 * core/util/json_build.h - building a json-c object without losing a failed allocation.
 *
 * json-c's constructors return NULL when memory runs out, and json_object_object_add() takes
 * a NULL value for a JSON null: a builder that nests constructors in add() writes a record
 * with members silently null (a stored session without its sandbox id), and a NULL object
 * makes add() fail an assertion. These note every failure in one flag instead, which the
 * builder checks once at the end (then puts what it built and reports AKS_ENOMEM):
 *
 *	bool oom = false;
 *	json_object *o = aks__jnew(json_object_new_object(), &oom);
 *	aks__jset(o, "id", json_object_new_string(id), &oom);
 *	aks__jset_null(o, "name", &oom);
 *	if (oom) { json_object_put(o); return NULL; }
 *
 * aks__jset and aks__jappend take the value's reference in every case (put on failure), and
 * treat a NULL value as a failed constructor; a JSON null is added with aks__jset_null.
 * Header-only (static inline), like json_fix.h.
 */
#ifndef AKS_CORE_UTIL_JSON_BUILD_H
#define AKS_CORE_UTIL_JSON_BUILD_H

#include <stdbool.h>

#include <json-c/json.h>

/* v, noting in *oom when it is NULL (its constructor failed). */
static inline struct json_object *aks__jnew(struct json_object *v, bool *oom)
{
	if (!v)
		*oom = true;
	return v;
}

/* o[key] = v; a NULL o or v, or a failed insertion, is noted in *oom (and v put). */
static inline void aks__jset(struct json_object *o, const char *key, struct json_object *v,
                             bool *oom)
{
	if (!o || !v || json_object_object_add(o, key, v) < 0) {
		json_object_put(v);
		*oom = true;
	}
}

/* o[key] = null. */
static inline void aks__jset_null(struct json_object *o, const char *key, bool *oom)
{
	if (!o || json_object_object_add(o, key, NULL) < 0)
		*oom = true;
}

/* o[key] = s as a string, or null when s is NULL. */
static inline void aks__jset_str_or_null(struct json_object *o, const char *key, const char *s,
                                         bool *oom)
{
	if (s)
		aks__jset(o, key, json_object_new_string(s), oom);
	else
		aks__jset_null(o, key, oom);
}

/* Appends v to the array a; like aks__jset. */
static inline void aks__jappend(struct json_object *a, struct json_object *v, bool *oom)
{
	if (!a || !v || json_object_array_add(a, v) < 0) {
		json_object_put(v);
		*oom = true;
	}
}

/*
 * o as json-c writes it (json_object_to_json_string_ext with flags), or NULL when that text
 * does not read back as o: json-c's writer ignores a failed allocation of its buffer and goes
 * on without the piece, so the text may be cut or parse as something else. max_depth: the
 * deepest nesting the reader is to accept (o's own). The text is o's (freed with it).
 */
static inline const char *aks__jtext_whole(struct json_object *o, int flags, int max_depth)
{
	size_t len = 0;
	const char *text = json_object_to_json_string_length(o, flags, &len);
	json_tokener *tok = text ? json_tokener_new_ex(max_depth) : NULL;
	struct json_object *back = tok ? json_tokener_parse_ex(tok, text, (int)len) : NULL;
	bool whole = back && json_tokener_get_error(tok) == json_tokener_success &&
	             json_object_equal(back, o);
	json_object_put(back);
	if (tok)
		json_tokener_free(tok);
	return whole ? text : NULL;
}

#endif /* AKS_CORE_UTIL_JSON_BUILD_H */
