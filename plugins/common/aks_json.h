/*
 * plugins/common/aks_json.h - walking json-c objects from outside (API answers, status
 * texts) without a NULL check at every step: each getter takes NULL and gives NULL, so
 * aks__jget(aks__jget(o, "a"), "b") is safe whatever o is.
 *
 * Header only (static inline), for the plugins that link json-c; nothing to link.
 */
#ifndef AKS_JSON_H
#define AKS_JSON_H

#include <json-c/json.h>

/* The member `key` of o; NULL when o is NULL or not an object, when it has no such member,
 * or when the member is JSON null. */
static inline json_object *aks__jget(json_object *o, const char *key)
{
	json_object *v = NULL;
	return o && json_object_object_get_ex(o, key, &v) ? v : NULL;
}

/* The member `key` of o when it is a string (borrowed from o), else NULL. */
static inline const char *aks__jstr(json_object *o, const char *key)
{
	json_object *v = aks__jget(o, key);
	return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

#endif /* AKS_JSON_H */
