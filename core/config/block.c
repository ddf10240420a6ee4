/*
 * core/config/block.c - typed, validated plugin config blocks.
 *
 * The host checks a profile's provider block against the plugin's declared
 * schema before the plugin sees it: unknown keys (with a suggestion), wrong
 * types and missing required keys are refused with file, line and column.
 * Defaults are YAML text in the schema and go through the same conversion, so
 * a default can never have a type its key does not.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "config/block.h"
#include "util/util.h"

typedef struct config_value {
	const aks_config_key *key;
	bool explicit_value; /* set in the block rather than defaulted */
	char *str;           /* STRING (may be NULL), JSON */
	bool boolean;
	int64_t integer;
	double number;
	char **strings; /* STRING_LIST: items; STRING_MAP: key, value pairs; NULL-terminated */
} config_value;

struct aks_config {
	char *label;
	config_value *values;
	size_t count;
};

const aks_config_key *aks__schema_key(const aks_config_key *keys, size_t i)
{
	if (!keys)
		return NULL;
	size_t stride = keys[0].struct_size;
	return (const aks_config_key *)((const char *)keys + i * stride);
}

const char *aks__config_type_name(uint32_t type)
{
	switch (type) {
	case AKS_CONFIG_STRING:
		return "string";
	case AKS_CONFIG_BOOL:
		return "boolean";
	case AKS_CONFIG_INT:
		return "integer";
	case AKS_CONFIG_DOUBLE:
		return "number";
	case AKS_CONFIG_STRING_LIST:
		return "list of strings";
	case AKS_CONFIG_STRING_MAP:
		return "mapping of strings";
	case AKS_CONFIG_JSON:
		return "any value";
	default:
		return "unknown type";
	}
}

static const char *node_kind_name(const aks_node *n)
{
	if (aks__node_is_null(n))
		return "null";
	switch (n->kind) {
	case AKS_NODE_SCALAR:
		return "a scalar";
	case AKS_NODE_SEQUENCE:
		return "a list";
	case AKS_NODE_MAPPING:
		return "a mapping";
	}
	return "a value";
}

static void value_clear(config_value *v)
{
	free(v->str);
	aks__strv_free(v->strings);
	v->str = NULL;
	v->strings = NULL;
}

/* Where a value came from, for messages: "file:line:col: " or "". */
#define POS_FMT     "%s: "
#define POS_ARGS(n) aks__node_where((n), (char[AKS_NODE_WHERE_SIZE]){0}, AKS_NODE_WHERE_SIZE)

static int type_error(const aks_node *n, const char *label, const aks_config_key *key,
                      aks_error **err)
{
	return aks__error_set(err, AKS_ECONFIG, POS_FMT "%s.%s: expected %s, got %s", POS_ARGS(n),
	                      label, key->name, aks__config_type_name(key->type),
	                      node_kind_name(n));
}

static bool parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On"};
	static const char *const no[] = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off"};
	for (size_t i = 0; i < sizeof(yes) / sizeof(*yes); i++) {
		if (strcmp(s, yes[i]) == 0) {
			*out = true;
			return true;
		}
		if (strcmp(s, no[i]) == 0) {
			*out = false;
			return true;
		}
	}
	return false;
}

static char **strings_from_node(const aks_node *n)
{
	size_t count = n ? n->count : 0;
	char **v = calloc(count + 1, sizeof(*v));
	if (!v)
		return NULL;
	for (size_t i = 0; i < count; i++) {
		if (!(v[i] = strdup(n->items[i]->value))) {
			aks__strv_free(v);
			return NULL;
		}
	}
	return v;
}

/* YAML node to json-c, keeping plain scalars' YAML types. */
static struct json_object *node_to_json(const aks_node *n)
{
	if (aks__node_is_null(n))
		return NULL;
	if (n->kind == AKS_NODE_SCALAR) {
		if (n->plain) {
			bool b;
			char *end;
			if (parse_bool(n->value, &b))
				return json_object_new_boolean(b);
			errno = 0;
			long long ll = strtoll(n->value, &end, 10);
			if (!*end && errno == 0)
				return json_object_new_int64(ll);
			double d = strtod(n->value, &end);
			if (!*end && errno == 0 && isfinite(d))
				return json_object_new_double(d);
		}
		return json_object_new_string(n->value);
	}
	struct json_object *o =
	    n->kind == AKS_NODE_MAPPING ? json_object_new_object() : json_object_new_array();
	if (!o)
		return NULL;
	if (n->kind == AKS_NODE_MAPPING) {
		for (size_t i = 0; i + 1 < n->count; i += 2)
			json_object_object_add(o, n->items[i]->value,
			                       node_to_json(n->items[i + 1]));
	} else {
		for (size_t i = 0; i < n->count; i++)
			json_object_array_add(o, node_to_json(n->items[i]));
	}
	return o;
}

/* Converts node `n` into `v` according to v->key->type. */
static int convert(const aks_node *n, const char *label, config_value *v, aks_error **err)
{
	const aks_config_key *key = v->key;
	bool null = aks__node_is_null(n);
	char *end = NULL;
	switch (key->type) {
	case AKS_CONFIG_STRING:
		if (null)
			return AKS_OK;
		if (n->kind != AKS_NODE_SCALAR)
			return type_error(n, label, key, err);
		if (!(v->str = strdup(n->value)))
			return aks__error_set(err, AKS_ENOMEM, "out of memory");
		return AKS_OK;
	case AKS_CONFIG_BOOL:
		if (null || n->kind != AKS_NODE_SCALAR || !parse_bool(n->value, &v->boolean))
			return type_error(n, label, key, err);
		return AKS_OK;
	case AKS_CONFIG_INT:
		if (null || n->kind != AKS_NODE_SCALAR)
			return type_error(n, label, key, err);
		errno = 0;
		v->integer = strtoll(n->value, &end, 10);
		if (!*n->value || *end || errno)
			return aks__error_set(err, AKS_ECONFIG,
			                      POS_FMT "%s.%s: '%s' is not an integer", POS_ARGS(n),
			                      label, key->name, n->value);
		return AKS_OK;
	case AKS_CONFIG_DOUBLE:
		if (null || n->kind != AKS_NODE_SCALAR)
			return type_error(n, label, key, err);
		errno = 0;
		v->number = strtod(n->value, &end);
		if (!*n->value || *end || errno || !isfinite(v->number))
			return aks__error_set(err, AKS_ECONFIG,
			                      POS_FMT "%s.%s: '%s' is not a number", POS_ARGS(n),
			                      label, key->name, n->value);
		return AKS_OK;
	case AKS_CONFIG_STRING_LIST:
	case AKS_CONFIG_STRING_MAP: {
		aks_node_kind want =
		    key->type == AKS_CONFIG_STRING_LIST ? AKS_NODE_SEQUENCE : AKS_NODE_MAPPING;
		if (!null && n->kind != want)
			return type_error(n, label, key, err);
		for (size_t i = 0; !null && i < n->count; i++) {
			const aks_node *item = n->items[i];
			if (item->kind != AKS_NODE_SCALAR || aks__node_is_null(item))
				return aks__error_set(err, AKS_ECONFIG,
				                      POS_FMT
				                      "%s.%s: every %s must be a string, got %s",
				                      POS_ARGS(item), label, key->name,
				                      want == AKS_NODE_SEQUENCE ? "item" : "value",
				                      node_kind_name(item));
		}
		if (!(v->strings = strings_from_node(null ? NULL : n)))
			return aks__error_set(err, AKS_ENOMEM, "out of memory");
		return AKS_OK;
	}
	case AKS_CONFIG_JSON: {
		struct json_object *j = node_to_json(n);
		const char *text = json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN);
		v->str = strdup(text ? text : "null");
		json_object_put(j);
		if (!v->str)
			return aks__error_set(err, AKS_ENOMEM, "out of memory");
		return AKS_OK;
	}
	default:
		return aks__error_set(err, AKS_ECONFIG,
		                      "%s.%s: the plugin declares an unknown type %u", label,
		                      key->name, key->type);
	}
}

static const char *suggest(const aks_config_key *keys, const char *name)
{
	const char *best = NULL;
	size_t best_d = 3; /* suggest only close matches */
	for (size_t i = 0; keys && aks__schema_key(keys, i)->name; i++) {
		const char *cand = aks__schema_key(keys, i)->name;
		size_t d = aks__levenshtein(name, cand);
		if (d < best_d) {
			best_d = d;
			best = cand;
		}
	}
	return best;
}

static char *known_keys(const aks_config_key *keys)
{
	aks_buf b = AKS_BUF_INIT;
	for (size_t i = 0; keys && aks__schema_key(keys, i)->name; i++)
		aks__buf_printf(&b, "%s%s", i ? ", " : "", aks__schema_key(keys, i)->name);
	if (!b.len)
		aks__buf_puts(&b, "none");
	return aks__buf_steal(&b);
}

static int unknown_key(const aks_node *k, const char *label, const aks_config_key *keys,
                       aks_error **err)
{
	const char *hint = suggest(keys, k->value);
	aks_autofree char *known = known_keys(keys);
	if (hint)
		return aks__error_set(err, AKS_ECONFIG,
		                      POS_FMT
		                      "unknown key '%s' in the %s block; did you mean '%s'?",
		                      POS_ARGS(k), k->value, label, hint);
	return aks__error_set(err, AKS_ECONFIG,
	                      POS_FMT "unknown key '%s' in the %s block (known keys: %s)",
	                      POS_ARGS(k), k->value, label, known ? known : "?");
}

int aks__config_build(const aks_plugin_descriptor *desc, const aks_node *block, const char *label,
                      aks_config **out, aks_error **err)
{
	const aks_config_key *keys = desc->config_keys;
	if (block && !aks__node_is_null(block) && block->kind != AKS_NODE_MAPPING)
		return aks__error_set(err, AKS_ECONFIG,
		                      POS_FMT "the %s block must be a mapping, got %s",
		                      POS_ARGS(block), label, node_kind_name(block));
	if (aks__node_is_null(block))
		block = NULL;

	/* Unknown keys first: a typo is the likeliest mistake. */
	for (size_t i = 0; block && i + 1 < block->count; i += 2) {
		const aks_node *k = block->items[i];
		bool known = false;
		for (size_t j = 0; keys && aks__schema_key(keys, j)->name && !known; j++)
			known = strcmp(aks__schema_key(keys, j)->name, k->value) == 0;
		if (!known)
			return unknown_key(k, label, keys, err);
	}

	size_t count = 0;
	while (keys && aks__schema_key(keys, count)->name)
		count++;
	aks_config *cfg = calloc(1, sizeof(*cfg));
	if (!cfg || !(cfg->label = strdup(label)) ||
	    (count && !(cfg->values = calloc(count, sizeof(*cfg->values))))) {
		aks_config_free(cfg);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	cfg->count = count;
	int rc = AKS_OK;
	for (size_t i = 0; i < count && rc == AKS_OK; i++) {
		config_value *v = &cfg->values[i];
		v->key = aks__schema_key(keys, i);
		const aks_node *given = aks__node_get(block, v->key->name);
		if (given) {
			v->explicit_value = true;
			rc = convert(given, label, v, err);
			continue;
		}
		if (v->key->required) {
			if (block)
				rc = aks__error_set(err, AKS_ECONFIG,
				                    POS_FMT
				                    "the %s block is missing the required key '%s'",
				                    POS_ARGS(block), label, v->key->name);
			else
				rc = aks__error_set(err, AKS_ECONFIG,
				                    "the %s block is missing the required key '%s'",
				                    label, v->key->name);
			continue;
		}
		/* The default is YAML text; convert it like a value. */
		aks_node *def = NULL;
		const char *text = v->key->default_value ? v->key->default_value : "null";
		aks_autofree char *where = NULL;
		if (asprintf(&where, "default of %s.%s", desc->name, v->key->name) < 0) {
			where = NULL;
			rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
			continue;
		}
		rc = aks__yaml_parse(text, strlen(text), where, &def, err);
		if (rc == AKS_OK)
			rc = convert(def, label, v, err);
		aks__node_free(def);
	}
	if (rc < 0) {
		aks_config_free(cfg);
		return rc;
	}
	*out = cfg;
	return AKS_OK;
}

/* The value of a schema key `key` of the given type that the block left unset, for the host
 * to fill; NULL when the schema has no such key. AKS_ECONFIG when the block set it. */
static int fillable(aks_config *cfg, const char *key, uint32_t type, const char *source,
                    config_value **out, aks_error **err)
{
	*out = NULL;
	for (size_t i = 0; cfg && i < cfg->count; i++) {
		config_value *v = &cfg->values[i];
		if (strcmp(v->key->name, key) != 0 || v->key->type != type)
			continue;
		if (v->explicit_value)
			return aks__error_set(
			    err, AKS_ECONFIG,
			    "%s.%s is set by the host from %s: remove it from the "
			    "block",
			    cfg->label, key, source);
		*out = v;
	}
	return AKS_OK;
}

int aks__config_fill_string(aks_config *cfg, const char *key, const char *value, const char *source,
                            aks_error **err)
{
	config_value *v = NULL;
	int rc = fillable(cfg, key, AKS_CONFIG_STRING, source, &v, err);
	if (rc < 0 || !v || !value) /* not given: the schema's default stays */
		return rc;
	char *copy = value ? strdup(value) : NULL;
	if (value && !copy)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	value_clear(v);
	v->str = copy;
	return AKS_OK;
}

int aks__config_fill_double(aks_config *cfg, const char *key, double value, const char *source,
                            aks_error **err)
{
	config_value *v = NULL;
	int rc = fillable(cfg, key, AKS_CONFIG_DOUBLE, source, &v, err);
	if (rc == AKS_OK && v)
		v->number = value;
	return rc;
}

AKS_EXPORT void aks_config_free(aks_config *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < cfg->count; i++)
		value_clear(&cfg->values[i]);
	free(cfg->values);
	free(cfg->label);
	free(cfg);
}

static const config_value *lookup(const aks_config *cfg, const char *key, uint32_t type)
{
	for (size_t i = 0; cfg && key && i < cfg->count; i++)
		if (strcmp(cfg->values[i].key->name, key) == 0)
			return cfg->values[i].key->type == type ? &cfg->values[i] : NULL;
	return NULL;
}

int aks__config_string(const aks_config *cfg, const char *key, const char **out)
{
	const config_value *v = lookup(cfg, key, AKS_CONFIG_STRING);
	if (!v)
		return AKS_EINVAL;
	*out = v->str;
	return AKS_OK;
}

int aks__config_bool(const aks_config *cfg, const char *key, bool *out)
{
	const config_value *v = lookup(cfg, key, AKS_CONFIG_BOOL);
	if (!v)
		return AKS_EINVAL;
	*out = v->boolean;
	return AKS_OK;
}

int aks__config_int(const aks_config *cfg, const char *key, int64_t *out)
{
	const config_value *v = lookup(cfg, key, AKS_CONFIG_INT);
	if (!v)
		return AKS_EINVAL;
	*out = v->integer;
	return AKS_OK;
}

int aks__config_double(const aks_config *cfg, const char *key, double *out)
{
	const config_value *v = lookup(cfg, key, AKS_CONFIG_DOUBLE);
	if (!v)
		return AKS_EINVAL;
	*out = v->number;
	return AKS_OK;
}

int aks__config_list(const aks_config *cfg, const char *key, const char *const **out)
{
	const config_value *v = lookup(cfg, key, AKS_CONFIG_STRING_LIST);
	if (!v)
		return AKS_EINVAL;
	*out = (const char *const *)v->strings;
	return AKS_OK;
}

int aks__config_map(const aks_config *cfg, const char *key, const char *const **out)
{
	const config_value *v = lookup(cfg, key, AKS_CONFIG_STRING_MAP);
	if (!v)
		return AKS_EINVAL;
	*out = (const char *const *)v->strings;
	return AKS_OK;
}

int aks__config_json(const aks_config *cfg, const char *key, const char **out)
{
	const config_value *v = lookup(cfg, key, AKS_CONFIG_JSON);
	if (!v)
		return AKS_EINVAL;
	*out = v->str;
	return AKS_OK;
}

int aks__schema_check(const aks_plugin_descriptor *desc, const char *file, aks_error **err)
{
	const aks_config_key *keys = desc->config_keys;
	if (!keys)
		return AKS_OK;
	if (keys[0].struct_version < 1 || keys[0].struct_size < sizeof(aks_config_key))
		return aks__error_set(
		    err, AKS_EPLUGIN,
		    "plugin '%s': config schema entries have version %u and size %u "
		    "(expected version >= 1 and size >= %zu)",
		    file, keys[0].struct_version, keys[0].struct_size, sizeof(aks_config_key));
	for (size_t i = 0; aks__schema_key(keys, i)->name; i++) {
		const aks_config_key *k = aks__schema_key(keys, i);
		if (!*k->name)
			return aks__error_set(err, AKS_EPLUGIN,
			                      "plugin '%s': config key %zu has an empty name", file,
			                      i);
		for (size_t j = 0; j < i; j++)
			if (strcmp(aks__schema_key(keys, j)->name, k->name) == 0)
				return aks__error_set(
				    err, AKS_EPLUGIN,
				    "plugin '%s': config key '%s' is declared twice", file,
				    k->name);
		if (k->type < AKS_CONFIG_STRING || k->type > AKS_CONFIG_JSON)
			return aks__error_set(err, AKS_EPLUGIN,
			                      "plugin '%s': config key '%s' has unknown type %u",
			                      file, k->name, k->type);
		if (k->required)
			continue;
		const char *text = k->default_value ? k->default_value : "null";
		aks_node *def = NULL;
		config_value v = {.key = k};
		aks_error *e = NULL;
		int rc = aks__yaml_parse(text, strlen(text), "default", &def, &e);
		if (rc == AKS_OK)
			rc = convert(def, desc->name ? desc->name : "plugin", &v, &e);
		aks__node_free(def);
		value_clear(&v);
		if (rc < 0) {
			rc = aks__error_set(err, AKS_EPLUGIN,
			                    "plugin '%s': the default of config key '%s' (%s) is "
			                    "not a valid %s: %s",
			                    file, k->name, text, aks__config_type_name(k->type),
			                    aks_error_message(e));
			aks_error_free(e);
			return rc;
		}
	}
	return AKS_OK;
}
