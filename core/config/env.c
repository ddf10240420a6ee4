/*
 * core/config/env.c - AK_SANDBOX__... environment overrides onto a config tree.
 *
 * Two phases: every variable is checked and its value parsed before the tree
 * is touched, so a mistake in the environment never leaves half an override
 * behind; then the overrides are applied in sorted order.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "config/env.h"
#include "util/util.h"

/* The variables' names are matched in lowercase, as pydantic-settings does. */
#define ENV_BLOCK      "ak_sandbox"
#define ENV_PREFIX     "ak_sandbox__"
#define ENV_PREFIX_LEN (sizeof(ENV_PREFIX) - 1)
#define ENV_DELIM      "__"

typedef struct override {
	char *name;         /* as written in the environment */
	char *key;          /* lowercased name: the sort key */
	const char *value;  /* after the '=' (borrowed from envp); NULL if there is none */
	char *path;         /* lowercased keys under `sandbox`, NUL-separated */
	const char **parts; /* into path */
	size_t nparts;
	aks_node *tree; /* a parsed flow value, or NULL for a plain scalar */
} override;

typedef struct override_list {
	override *items;
	size_t count;
} override_list;

static void overrides_free(override_list *l)
{
	for (size_t i = 0; i < l->count; i++) {
		free(l->items[i].name);
		free(l->items[i].key);
		free(l->items[i].path);
		free(l->items[i].parts);
		aks__node_free(l->items[i].tree);
	}
	free(l->items);
}

/* ASCII only: names are compared the same way whatever the locale. */
static char ascii_lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

static char *lower_dup(const char *s, size_t len)
{
	char *d = malloc(len + 1);
	if (!d)
		return NULL;
	for (size_t i = 0; i < len; i++)
		d[i] = ascii_lower(s[i]);
	d[len] = '\0';
	return d;
}

static bool equal_ci(const char *a, const char *b)
{
	for (; *a && *b; a++, b++)
		if (ascii_lower(*a) != ascii_lower(*b))
			return false;
	return *a == *b;
}

static int oom(aks_error **err)
{
	return aks__error_set(err, AKS_ENOMEM, "out of memory applying environment overrides");
}

/* Takes the entries that are ours (AK_SANDBOX and AK_SANDBOX__*, any case) out of envp. */
static int collect(const char *const *envp, override_list *l, aks_error **err)
{
	size_t cap = 0;
	for (const char *const *e = envp; e && *e; e++) {
		const char *eq = strchr(*e, '=');
		size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
		if (len < sizeof(ENV_BLOCK) - 1)
			continue;
		char *key = lower_dup(*e, len);
		if (!key)
			return oom(err);
		if (strcmp(key, ENV_BLOCK) != 0 && strncmp(key, ENV_PREFIX, ENV_PREFIX_LEN) != 0) {
			free(key);
			continue;
		}
		if (l->count == AKS_CONFIG_ENV_MAX_VARS) {
			free(key);
			return aks__error_set(err, AKS_ECONFIG,
			                      "more than %d AK_SANDBOX__ environment variables",
			                      AKS_CONFIG_ENV_MAX_VARS);
		}
		if (l->count == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			override *items = realloc(l->items, ncap * sizeof(*items));
			if (!items) {
				free(key);
				return oom(err);
			}
			l->items = items;
			cap = ncap;
		}
		override *o = &l->items[l->count++];
		memset(o, 0, sizeof(*o));
		o->key = key;
		o->value = eq ? eq + 1 : NULL;
		if (!(o->name = strndup(*e, len)))
			return oom(err);
	}
	return AKS_OK;
}

static int compare_overrides(const void *a, const void *b)
{
	const override *x = a, *y = b;
	int c = strcmp(x->key, y->key);
	return c ? c : strcmp(x->name, y->name);
}

/* Splits the name after the prefix into lowercase keys; refuses empty ones. */
static int split_path(override *o, aks_error **err)
{
	const char *rest = o->key + ENV_PREFIX_LEN;
	size_t n = 1;
	for (const char *p = strstr(rest, ENV_DELIM); p; p = strstr(p + 2, ENV_DELIM))
		n++;
	/* The value sits at depth n + 1 (the root is 0, `sandbox` is 1). */
	if (n + 1 > AKS_YAML_MAX_DEPTH)
		return aks__error_set(err, AKS_ECONFIG,
		                      "environment variable %s: nesting deeper than %d levels",
		                      o->name, AKS_YAML_MAX_DEPTH);
	if (!(o->path = strdup(rest)) || !(o->parts = calloc(n, sizeof(*o->parts))))
		return oom(err);
	char *p = o->path;
	for (size_t i = 0; i < n; i++) {
		char *end = strstr(p, ENV_DELIM);
		if (end) {
			end[0] = '\0';
			end[1] = '\0';
		}
		if (!*p)
			return aks__error_set(
			    err, AKS_ECONFIG,
			    "environment variable %s: empty key in the name (nested "
			    "keys are separated by '__', e.g. "
			    "AK_SANDBOX__BROKER__FLAVOR)",
			    o->name);
		o->parts[i] = p;
		p = end ? end + 2 : p + strlen(p);
	}
	o->nparts = n;
	return AKS_OK;
}

/* Points every node of a parsed value at the variable (line 0) and returns its height. */
static unsigned resource_tree(aks_node *n, const char *file)
{
	unsigned height = 0;
	n->file = file;
	n->line = 0;
	n->column = 0;
	for (size_t i = 0; i < n->count; i++) {
		unsigned h = resource_tree(n->items[i], file) + 1;
		if (h > height)
			height = h;
	}
	return height;
}

/* A value starting with '[' or '{' is YAML flow (JSON is a subset); anything else is
 * one plain scalar, taken verbatim when it is applied. */
static int parse_value(override *o, aks_error **err)
{
	const char *v = o->value;
	while (*v == ' ')
		v++;
	if (*v != '[' && *v != '{')
		return AKS_OK;
	aks_error *perr = NULL;
	int rc = aks__yaml_parse(o->value, strlen(o->value), "value", &o->tree, &perr);
	if (rc < 0) {
		aks__error_prefix(perr, "environment variable %s", o->name);
		if (err && !*err)
			*err = perr;
		else
			aks_error_free(perr);
		return rc;
	}
	char *file = strdup(o->name);
	if (!file)
		return oom(err);
	free(o->tree->owned_file);
	o->tree->owned_file = file;
	unsigned height = resource_tree(o->tree, file);
	if (o->nparts + 1 + height > AKS_YAML_MAX_DEPTH)
		return aks__error_set(err, AKS_ECONFIG,
		                      "environment variable %s: nesting deeper than %d levels",
		                      o->name, AKS_YAML_MAX_DEPTH);
	return AKS_OK;
}

static int check_override(const override *prev, override *o, aks_error **err)
{
	if (strcmp(o->key, ENV_BLOCK) == 0)
		return aks__error_set(
		    err, AKS_ECONFIG,
		    "environment variable %s: the whole sandbox block cannot be set "
		    "at once; set its keys one by one, e.g. AK_SANDBOX__ENABLED=true",
		    o->name);
	if (!o->value)
		return aks__error_set(err, AKS_ECONFIG,
		                      "environment variable %s: no '=' in the entry", o->name);
	if (prev && strcmp(prev->key, o->key) == 0) {
		if (strcmp(prev->name, o->name) == 0)
			return aks__error_set(
			    err, AKS_ECONFIG,
			    "environment variable %s: set twice in the environment", o->name);
		return aks__error_set(err, AKS_ECONFIG,
		                      "environment variables %s and %s: both set the same key "
		                      "(names are case-insensitive)",
		                      prev->name, o->name);
	}
	int rc = split_path(o, err);
	if (rc < 0)
		return rc;
	return parse_value(o, err);
}

/* A node made by the variable `var`: it owns its copy of the name. */
static aks_node *env_node(aks_node_kind kind, const char *var, const char *value)
{
	aks_node *n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->kind = kind;
	n->owned_file = strdup(var);
	n->file = n->owned_file;
	if (value) {
		n->value = strdup(value);
		n->plain = true;
	}
	if (!n->owned_file || (value && !n->value)) {
		aks__node_free(n);
		return NULL;
	}
	return n;
}

static int map_add(aks_node *map, aks_node *key, aks_node *value)
{
	aks_node **items = realloc(map->items, (map->count + 2) * sizeof(*items));
	if (!items)
		return AKS_ENOMEM;
	map->items = items;
	items[map->count++] = key;
	items[map->count++] = value;
	return AKS_OK;
}

static const char *kind_name(const aks_node *n)
{
	switch (n->kind) {
	case AKS_NODE_SCALAR:
		return "a scalar";
	case AKS_NODE_SEQUENCE:
		return "a list";
	case AKS_NODE_MAPPING:
		return "a mapping";
	}
	return "a node";
}

/*
 * Finds `part` among the keys of `map`: exactly for the top-level `sandbox` (the
 * loader reads only that spelling, so overrides put under `Sandbox` would vanish),
 * case-insensitively below it. *index is the key's index, or map->count if absent.
 */
static int find_key(const aks_node *map, const char *part, bool exact, const override *o,
                    const aks_buf *where, size_t *index, aks_error **err)
{
	*index = map->count;
	for (size_t i = 0; i + 1 < map->count; i += 2) {
		const char *k = map->items[i]->value;
		if (exact ? strcmp(k, part) != 0 : !equal_ci(k, part))
			continue;
		if (*index != map->count)
			return aks__error_set(
			    err, AKS_ECONFIG,
			    "environment variable %s: '%s' has both '%s' and '%s', "
			    "which differ only in case; rename one",
			    o->name, where->data ? where->data : "the document",
			    map->items[*index]->value, k);
		*index = i;
	}
	return AKS_OK;
}

/* The node the variable sets: its parsed flow value or a plain scalar. */
static aks_node *take_value(override *o)
{
	if (o->tree)
		return aks_steal(&o->tree);
	return env_node(AKS_NODE_SCALAR, o->name, o->value);
}

/* Walks (and makes) the path of `o` under `sandbox` and puts its value at the end.
 * `where` collects the path as written in the tree, for messages. */
static int apply_one(aks_node *root, override *o, aks_buf *where, aks_error **err)
{
	aks_node *map = root;
	where->len = 0;
	if (where->data)
		where->data[0] = '\0';
	for (size_t i = 0; i <= o->nparts; i++) {
		const char *part = i == 0 ? "sandbox" : o->parts[i - 1];
		bool last = i == o->nparts;
		size_t at;
		int rc = find_key(map, part, i == 0, o, where, &at, err);
		if (rc < 0)
			return rc;
		if (at == map->count) {
			/* A missing key is created in lowercase, with an empty mapping below it
			 * unless it is the end of the path. */
			aks_node *key = env_node(AKS_NODE_SCALAR, o->name, part);
			aks_node *value =
			    last ? take_value(o) : env_node(AKS_NODE_MAPPING, o->name, NULL);
			if (!key || !value || map_add(map, key, value) < 0) {
				aks__node_free(key);
				aks__node_free(value);
				return oom(err);
			}
			map = value;
			continue;
		}
		if ((i > 0 && aks__buf_puts(where, ".") < 0) ||
		    aks__buf_puts(where, map->items[at]->value) < 0)
			return oom(err);
		aks_node **slot = &map->items[at + 1];
		if (last) {
			/* The override replaces whatever was there, lists and mappings included. */
			aks_node *value = take_value(o);
			if (!value)
				return oom(err);
			aks__node_free(*slot);
			*slot = value;
		} else if (aks__node_is_null(*slot)) {
			/* `broker:` with nothing after it: the variable gives it its first key. */
			aks_node *m = env_node(AKS_NODE_MAPPING, o->name, NULL);
			if (!m)
				return oom(err);
			aks__node_free(*slot);
			*slot = m;
		} else if ((*slot)->kind != AKS_NODE_MAPPING) {
			return aks__error_set(err, AKS_ECONFIG,
			                      "environment variable %s: '%s' is %s, not a mapping",
			                      o->name, where->data, kind_name(*slot));
		}
		map = *slot;
	}
	return AKS_OK;
}

/* NULL and the document `~` become an empty mapping, so the caller always has one. */
static int ensure_root(aks_node **root, aks_error **err)
{
	aks_node *r = *root;
	if (!r) {
		if (!(r = calloc(1, sizeof(*r))))
			return oom(err);
		r->kind = AKS_NODE_MAPPING;
		r->file = ""; /* aks__node_where(): "the environment" */
		*root = r;
	} else if (r->kind == AKS_NODE_SCALAR && aks__node_is_null(r)) {
		free(r->value);
		r->value = NULL;
		r->plain = false;
		r->kind = AKS_NODE_MAPPING;
	}
	return AKS_OK;
}

int aks__config_apply_env(aks_node **root, const char *const *envp, aks_error **err)
{
	if (!root)
		return aks__error_set(err, AKS_EINVAL, "no document to apply overrides to");
	override_list l = {NULL, 0};
	int rc = collect(envp, &l, err);
	if (rc == AKS_OK && l.count > 0)
		qsort(l.items, l.count, sizeof(*l.items), compare_overrides);
	for (size_t i = 0; rc == AKS_OK && i < l.count; i++)
		rc = check_override(i ? &l.items[i - 1] : NULL, &l.items[i], err);
	if (rc == AKS_OK)
		rc = ensure_root(root, err);
	if (rc == AKS_OK && l.count > 0 && (*root)->kind != AKS_NODE_MAPPING) {
		char at[AKS_NODE_WHERE_SIZE];
		rc = aks__error_set(
		    err, AKS_ECONFIG,
		    "environment variable %s: the document (%s) is %s, not a mapping",
		    l.items[0].name, aks__node_where(*root, at, sizeof(at)), kind_name(*root));
	}
	/* Sorted by name, a variable comes after every shorter one naming a prefix of its
	 * path, so AK_SANDBOX__BROKER__FLAVOR refines what AK_SANDBOX__BROKER set. */
	aks_buf where = AKS_BUF_INIT;
	for (size_t i = 0; rc == AKS_OK && i < l.count; i++)
		rc = apply_one(*root, &l.items[i], &where, err);
	aks__buf_free(&where);
	overrides_free(&l);
	return rc;
}
