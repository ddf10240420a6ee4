/*
 * core/config/settings.c - config.yaml's `sandbox:` block into a typed model.
 *
 * Everything is checked when the file is loaded, not on first use: every key
 * and type, every range and enumeration, each profile's provider plugin (found
 * and loaded), its provider block (against the plugin's declared schema), and
 * the managed/attached matrix (against the instance's capabilities). Each
 * error names where the value came from (file:line:column, or the environment
 * variable that set it) and the key path. Other top-level keys of the file
 * belong to other parts of an agent runtime and are ignored.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "aks_netrule.h"
#include "config/block.h"
#include "config/settings.h"
#include "plugin/loader.h"
#include "queue/transport.h"
#include "store/memory_store.h"
#include "store/store.h"
#include "util/util.h"

_Static_assert(sizeof("default:") - 1 + AKS_PROFILE_NAME_MAX <= AKS_STORE_NAME_MAX,
               "a profile's default session id must fit a state store key");

/* ---- locations and messages ---------------------------------------------- */

/* "file:line:col" or "environment variable NAME" (config when unknown). */
static const char *where(const aks_node *n, char *buf, size_t size)
{
	if (!n) {
		snprintf(buf, size, "config");
		return buf;
	}
	return aks__node_where(n, buf, size);
}

static int fail(aks_error **err, const aks_node *n, const char *path, const char *fmt, ...)
    AKS_PRINTF(4, 5);
static int fail(aks_error **err, const aks_node *n, const char *path, const char *fmt, ...)
{
	char pos[AKS_NODE_WHERE_SIZE], msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (path)
		return aks__error_set(err, AKS_ECONFIG, "%s: %s: %s", where(n, pos, sizeof(pos)),
		                      path, msg);
	return aks__error_set(err, AKS_ECONFIG, "%s: %s", where(n, pos, sizeof(pos)), msg);
}

static const char *kind_name(const aks_node *n)
{
	if (aks__node_is_null(n))
		return "null";
	return n->kind == AKS_NODE_SCALAR     ? "a scalar"
	       : n->kind == AKS_NODE_SEQUENCE ? "a list"
	                                      : "a mapping";
}

/* path + "." + key, in a caller buffer. */
static const char *join(char *buf, size_t size, const char *path, const char *key)
{
	/* Key paths are short; a pathological one is cut, never overflowed. */
	size_t lp = strlen(path), lk = strlen(key);
	if (lp > size - 2)
		lp = size - 2;
	memmove(buf, path, lp);
	buf[lp] = '.';
	if (lk > size - lp - 2)
		lk = size - lp - 2;
	memcpy(buf + lp + 1, key, lk);
	buf[lp + 1 + lk] = '\0';
	return buf;
}

/* Keys of `map` not in `known` (NULL-terminated) are unknown, unless `extra` accepts them
 * (provider blocks). */
typedef bool (*key_filter)(const char *key, void *ctx);

static bool key_known(const char *key, const char *const *known, key_filter extra, void *ctx)
{
	if (extra && extra(key, ctx))
		return true;
	for (size_t j = 0; known[j]; j++)
		if (strcmp(known[j], key) == 0)
			return true;
	return false;
}

/* "unknown key 'path.k'<note>; did you mean 'x'?" (or the known keys), located; NULL on
 * ENOMEM. */
static char *unknown_key_message(const aks_node *k, const char *path, const char *const *known,
                                 const char *note)
{
	char pos[AKS_NODE_WHERE_SIZE];
	const char *best = NULL;
	size_t best_d = 3;
	for (size_t j = 0; known[j]; j++) {
		size_t d = aks__levenshtein(k->value, known[j]);
		if (d < best_d) {
			best_d = d;
			best = known[j];
		}
	}
	aks_buf msg = AKS_BUF_INIT;
	aks__buf_printf(&msg, "%s: unknown key '%s.%s'%s", where(k, pos, sizeof(pos)), path,
	                k->value, note);
	if (best) {
		aks__buf_printf(&msg, "; did you mean '%s'?", best);
	} else {
		aks__buf_puts(&msg, " (known keys: ");
		for (size_t j = 0; known[j]; j++)
			aks__buf_printf(&msg, "%s%s", j ? ", " : "", known[j]);
		aks__buf_puts(&msg, ")");
	}
	return msg.data; /* NULL when the buffer could not grow */
}

/* Refuses an unknown key, suggesting the closest known one. */
static int check_keys(const aks_node *map, const char *path, const char *const *known,
                      key_filter extra, void *ctx, aks_error **err)
{
	for (size_t i = 0; map && i + 1 < map->count; i += 2) {
		const aks_node *k = map->items[i];
		if (key_known(k->value, known, extra, ctx))
			continue;
		aks_autofree char *msg = unknown_key_message(k, path, known, "");
		if (!msg)
			return aks__error_set(err, AKS_ENOMEM, "out of memory");
		return aks__error_set(err, AKS_ECONFIG, "%s", msg);
	}
	return AKS_OK;
}

/* Where the original allows extra keys: each unknown one is a warning, not an error. */
static int warn_keys(aks_settings *s, const aks_node *map, const char *path,
                     const char *const *known, key_filter extra, aks_error **err)
{
	for (size_t i = 0; map && i + 1 < map->count; i += 2) {
		const aks_node *k = map->items[i];
		if (key_known(k->value, known, extra, NULL))
			continue;
		aks_autofree char *msg = unknown_key_message(k, path, known, " is ignored");
		if (!msg || aks__settings_warn(s, "%s", msg) < 0)
			return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	return AKS_OK;
}

static int get_map(const aks_node *parent, const char *key, const char *path, const aks_node **out,
                   aks_error **err)
{
	const aks_node *n = aks__node_get(parent, key);
	*out = NULL;
	if (aks__node_is_null(n))
		return AKS_OK;
	if (n->kind != AKS_NODE_MAPPING)
		return fail(err, n, path, "expected a mapping, got %s", kind_name(n));
	*out = n;
	return AKS_OK;
}

static int get_bool(const aks_node *map, const char *key, const char *path, bool *out,
                    aks_error **err)
{
	const aks_node *n = aks__node_get(map, key);
	if (!n)
		return AKS_OK;
	static const char *const yes[] = {"true", "True", "TRUE", "yes", "on", NULL};
	static const char *const no[] = {"false", "False", "FALSE", "no", "off", NULL};
	for (size_t i = 0; n->kind == AKS_NODE_SCALAR && yes[i]; i++) {
		if (strcmp(n->value, yes[i]) == 0) {
			*out = true;
			return AKS_OK;
		}
		if (strcmp(n->value, no[i]) == 0) {
			*out = false;
			return AKS_OK;
		}
	}
	if (n->kind == AKS_NODE_SCALAR && !aks__node_is_null(n))
		return fail(err, n, path, "'%s' is not a boolean (true or false)", n->value);
	return fail(err, n, path, "expected a boolean, got %s", kind_name(n));
}

/* Numbers: `nullable` lets null mean "unset" (*is_set false). `min` with
 * `min_exclusive` is the range. */
static int get_number(const aks_node *map, const char *key, const char *path, bool integer,
                      double min, bool min_exclusive, bool nullable, double *out, bool *is_set,
                      aks_error **err)
{
	const aks_node *n = aks__node_get(map, key);
	if (!n)
		return AKS_OK;
	if (aks__node_is_null(n)) {
		if (nullable) {
			if (is_set)
				*is_set = false;
			return AKS_OK;
		}
		return fail(err, n, path, "expected a number, got null");
	}
	if (n->kind != AKS_NODE_SCALAR)
		return fail(err, n, path, "expected a number, got %s", kind_name(n));
	char *end = NULL;
	errno = 0;
	double v = strtod(n->value, &end);
	if (!*n->value || *end || errno || !isfinite(v))
		return fail(err, n, path, "'%s' is not a number", n->value);
	if (integer && v != floor(v))
		return fail(err, n, path, "'%s' is not a whole number", n->value);
	if (min_exclusive ? v <= min : v < min)
		return fail(err, n, path, "must be %s %g, got %s",
		            min_exclusive ? "greater than" : "at least", min, n->value);
	*out = v;
	if (is_set)
		*is_set = true;
	return AKS_OK;
}

static int get_string(const aks_node *map, const char *key, const char *path, bool nullable,
                      char **out, aks_error **err)
{
	const aks_node *n = aks__node_get(map, key);
	if (!n)
		return AKS_OK;
	if (aks__node_is_null(n)) {
		if (!nullable)
			return fail(err, n, path, "expected a string, got null");
		free(*out);
		*out = NULL;
		return AKS_OK;
	}
	if (n->kind != AKS_NODE_SCALAR)
		return fail(err, n, path, "expected a string, got %s", kind_name(n));
	char *copy = strdup(n->value);
	if (!copy)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	free(*out);
	*out = copy;
	return AKS_OK;
}

/* One of `values` (NULL-terminated); *out is its index. */
static int get_enum(const aks_node *map, const char *key, const char *path,
                    const char *const *values, int *out, aks_error **err)
{
	const aks_node *n = aks__node_get(map, key);
	if (!n)
		return AKS_OK;
	if (n->kind == AKS_NODE_SCALAR && !aks__node_is_null(n)) {
		for (int i = 0; values[i]; i++) {
			if (strcmp(values[i], n->value) == 0) {
				*out = i;
				return AKS_OK;
			}
		}
	}
	aks_buf list = AKS_BUF_INIT;
	for (size_t j = 0; values[j]; j++)
		aks__buf_printf(&list, "%s%s", j ? ", " : "", values[j]);
	int rc = n->kind == AKS_NODE_SCALAR && !aks__node_is_null(n)
	             ? fail(err, n, path, "'%s' is not one of: %s", n->value, list.data)
	             : fail(err, n, path, "expected one of: %s; got %s", list.data, kind_name(n));
	aks__buf_free(&list);
	return rc;
}

/* A list of strings; null or absent is the empty list unless `null_is_null`. */
static int get_string_list(const aks_node *map, const char *key, const char *path,
                           bool null_is_null, char ***out, aks_error **err)
{
	const aks_node *n = aks__node_get(map, key);
	if (!n)
		return AKS_OK;
	if (aks__node_is_null(n) && null_is_null) {
		aks__strv_free(*out);
		*out = NULL;
		return AKS_OK;
	}
	size_t count = aks__node_is_null(n) ? 0 : n->count;
	if (!aks__node_is_null(n) && n->kind != AKS_NODE_SEQUENCE)
		return fail(err, n, path, "expected a list of strings, got %s", kind_name(n));
	char **v = calloc(count + 1, sizeof(*v));
	if (!v)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	for (size_t i = 0; i < count; i++) {
		const aks_node *item = n->items[i];
		if (item->kind != AKS_NODE_SCALAR || aks__node_is_null(item)) {
			aks__strv_free(v);
			return fail(err, item, path, "every item must be a string, got %s",
			            kind_name(item));
		}
		if (!(v[i] = strdup(item->value))) {
			aks__strv_free(v);
			return aks__error_set(err, AKS_ENOMEM, "out of memory");
		}
	}
	aks__strv_free(*out);
	*out = v;
	return AKS_OK;
}

/* A subtree as JSON text (plain scalars keep their YAML types). */
static struct json_object *to_json(const aks_node *n)
{
	if (aks__node_is_null(n))
		return NULL;
	if (n->kind == AKS_NODE_SCALAR) {
		if (n->plain) {
			char *end;
			if (!strcmp(n->value, "true") || !strcmp(n->value, "false"))
				return json_object_new_boolean(n->value[0] == 't');
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
	for (size_t i = 0; o && i < n->count; i += n->kind == AKS_NODE_MAPPING ? 2 : 1) {
		if (n->kind == AKS_NODE_MAPPING)
			json_object_object_add(o, n->items[i]->value, to_json(n->items[i + 1]));
		else
			json_object_array_add(o, to_json(n->items[i]));
	}
	return o;
}

static char *json_text(const aks_node *n, const char *if_null)
{
	if (aks__node_is_null(n))
		return if_null ? strdup(if_null) : NULL;
	struct json_object *j = to_json(n);
	const char *text = json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN);
	char *copy = strdup(text ? text : "null");
	json_object_put(j);
	return copy;
}

/* ---- the model -------------------------------------------------------------- */

static const char *const scope_names[] = {"per_session", "per_call", "per_runtime", NULL};
static const char *const environment_names[] = {"managed", "attached", NULL};
static const char *const identity_names[] = {"agent", "user", NULL};
static const char *const egress_names[] = {"allow", "deny", "allowlist", NULL};

static void profile_free(aks_profile *p)
{
	if (!p)
		return;
	aks_provider_close(p->provider);
	aks_config_free(p->block);
	aks__inactive_blocks_free(p);
	free(p->name);
	free(p->type);
	aks__strv_free(p->network_allow);
	aks__strv_free(p->fs_allow_read);
	aks__strv_free(p->fs_allow_write);
	free(p->params_json);
	free(p->attach_to);
	free(p);
}

AKS_EXPORT void aks_settings_free(aks_settings *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->profile_count; i++)
		profile_free(s->profiles[i]);
	free(s->profiles);
	aks_resolver_close(s->resolver);
	aks_config_free(s->resolver_block);
	free(s->resolver_type);
	aks_config_free(s->store_block);
	free(s->store_type);
	aks_config_free(s->queue_block);
	aks_config_free(s->response_block);
	free(s->file);
	aks__strv_free(s->agents);
	free(s->default_profile);
	free(s->broker.flavor);
	free(s->broker.queue_json);
	free(s->broker.response_store_json);
	aks__strv_free(s->warnings);
	free(s);
}

unsigned aks__policy_unenforced(const aks_policy *policy, const aks_capabilities *caps)
{
	unsigned mask = 0;
	if (policy->network_egress != AKS_EGRESS_ALLOW && !caps->policy_network)
		mask |= AKS_DIM_NETWORK;
	/* Read only from a table large enough to hold it: older ones lack it (and then
	 * enforce no allowlist). */
	bool allowlist = caps->struct_size >= offsetof(aks_capabilities, policy_network_allowlist) +
	                                          sizeof(caps->policy_network_allowlist) &&
	                 caps->policy_network_allowlist;
	if (policy->network_egress == AKS_EGRESS_ALLOWLIST && !allowlist)
		mask |= AKS_DIM_NETWORK;
	bool fs = (policy->fs_allow_read && policy->fs_allow_read[0]) ||
	          (policy->fs_allow_write && policy->fs_allow_write[0]);
	if (fs && !caps->policy_filesystem)
		mask |= AKS_DIM_FILESYSTEM;
	if ((policy->cpu > 0 || policy->memory_mb > 0) && !caps->policy_resources)
		mask |= AKS_DIM_RESOURCES;
	return mask;
}

char *aks__dims_repr(unsigned mask)
{
	const char *names[4];
	size_t n = 0;
	if (mask & AKS_DIM_NETWORK)
		names[n++] = "network_egress";
	if (mask & AKS_DIM_FILESYSTEM)
		names[n++] = "filesystem";
	if (mask & AKS_DIM_RESOURCES)
		names[n++] = "resources";
	names[n] = NULL;
	return aks__py_list_repr(names);
}

/* ---- broker ---- */

static bool type_names_block(const char *type, const char *key);

/* A queue or store block may also hold the options of its type's plugin, under the
 * plugin's name (`type: mytransport` with a `mytransport:` block). */
static bool own_block_key(const char *key, void *ctx)
{
	const aks_node *type = ctx;
	if (!type || type->kind != AKS_NODE_SCALAR || aks__node_is_null(type))
		return false;
	return type_names_block(type->value, key);
}

static int parse_queue_block(const aks_node *q, const char *path, aks_broker_settings *b,
                             aks_error **err)
{
	static const char *const keys[] = {"type",  "input", "output", "batch_size", "in_memory",
	                                   "kafka", "nats",  "sqs",    NULL};
	static const char *const io_keys[] = {"url", "max_receive_count", "no_of_consumers", NULL};
	char sub[256];
	int rc = check_keys(q, path, keys, own_block_key, (void *)aks__node_get(q, "type"), err);
	if (rc < 0)
		return rc;
	const aks_node *type = aks__node_get(q, "type");
	if (aks__node_is_null(type) || type->kind != AKS_NODE_SCALAR)
		return fail(
		    err, type ? type : q, join(sub, sizeof(sub), path, "type"),
		    "is required when the block is declared (in_memory, nats, kafka, sqs, or a "
		    "plugin)");
	for (int i = 0; i < 2; i++) {
		const char *name = i ? "output" : "input";
		const aks_node *io = NULL;
		char iopath[256];
		join(iopath, sizeof(iopath), path, name);
		if ((rc = get_map(q, name, iopath, &io, err)) < 0 ||
		    (rc = check_keys(io, iopath, io_keys, NULL, NULL, err)) < 0)
			return rc;
		unsigned *max_receive = i ? &b->output_max_receive : &b->input_max_receive;
		unsigned *consumers = i ? &b->output_consumers : &b->input_consumers;
		double receive = *max_receive, threads = *consumers;
		if ((rc = get_number(io, "max_receive_count",
		                     join(sub, sizeof(sub), iopath, "max_receive_count"), true, 1,
		                     false, false, &receive, NULL, err)) < 0 ||
		    (rc = get_number(io, "no_of_consumers",
		                     join(sub, sizeof(sub), iopath, "no_of_consumers"), true, 1,
		                     false, false, &threads, NULL, err)) < 0)
			return rc;
		if (receive > 1000 || threads > 256)
			return fail(
			    err, io, iopath,
			    "max_receive_count is at most 1000 and no_of_consumers at most 256");
		*max_receive = (unsigned)receive;
		*consumers = (unsigned)threads;
	}
	double v = 0;
	bool set = false;
	if ((rc = get_number(q, "batch_size", join(sub, sizeof(sub), path, "batch_size"), true, 1,
	                     false, true, &v, &set, err)) < 0)
		return rc;
	if (set && v > 100)
		return fail(err, aks__node_get(q, "batch_size"), sub, "is at most 100");
	b->batch_size = set ? (unsigned)v : 1;
	for (int i = 0; i < 4; i++) {
		const char *name = (const char *[]){"in_memory", "kafka", "nats", "sqs"}[i];
		const aks_node *m = NULL;
		if ((rc = get_map(q, name, join(sub, sizeof(sub), path, name), &m, err)) < 0)
			return rc;
	}
	return AKS_OK;
}

static int parse_store_block(const aks_node *st, const char *path, aks_error **err)
{
	static const char *const keys[] = {"type",   "retry_count", "delay",     "redis",
	                                   "valkey", "dynamodb",    "in_memory", NULL};
	char sub[256];
	int rc = check_keys(st, path, keys, own_block_key, (void *)aks__node_get(st, "type"), err);
	if (rc < 0)
		return rc;
	const aks_node *type = aks__node_get(st, "type");
	if (aks__node_is_null(type) || type->kind != AKS_NODE_SCALAR)
		return fail(err, type ? type : st, join(sub, sizeof(sub), path, "type"),
		            "is required when the block is declared (in_memory, redis, valkey, "
		            "dynamodb, or a plugin)");
	double v = 0;
	if ((rc = get_number(st, "retry_count", join(sub, sizeof(sub), path, "retry_count"), true,
	                     0, false, false, &v, NULL, err)) < 0 ||
	    (rc = get_number(st, "delay", join(sub, sizeof(sub), path, "delay"), false, 0, false,
	                     false, &v, NULL, err)) < 0)
		return rc;
	for (int i = 0; i < 4; i++) {
		const char *name = (const char *[]){"redis", "valkey", "dynamodb", "in_memory"}[i];
		const aks_node *m = NULL;
		if ((rc = get_map(st, name, join(sub, sizeof(sub), path, name), &m, err)) < 0)
			return rc;
	}
	return AKS_OK;
}

static bool removed_broker_key(const char *key, void *ctx)
{
	(void)ctx;
	/* Keys the original dropped; accepted so old configs still load. */
	return strcmp(key, "request_queue_url") == 0 || strcmp(key, "object_store_bucket") == 0;
}

static int parse_broker(aks_settings *s, const aks_node *sb, aks_error **err)
{
	aks_broker_settings *b = &s->broker;
	static const char *const keys[] = {"flavor",
	                                   "wait_timeout",
	                                   "wait_poll_interval",
	                                   "inline_payload_max_bytes",
	                                   "response_ttl",
	                                   "sweep_interval",
	                                   "worker_timeout_ceiling",
	                                   "queue",
	                                   "response_store",
	                                   NULL};
	const char *path = "sandbox.broker";
	char sub[256];
	const aks_node *n = NULL;
	int rc = get_map(sb, "broker", path, &n, err);
	/* The original allows extra keys here: an unknown one is a warning. */
	if (rc < 0 || (rc = warn_keys(s, n, path, keys, removed_broker_key, err)) < 0)
		return rc;
	if ((rc = get_string(n, "flavor", join(sub, sizeof(sub), path, "flavor"), false, &b->flavor,
	                     err)) < 0)
		return rc;
	/* The original's dotted path to a broker class has no counterpart here: this build
	 * defines no broker plugin kind. Refused now, not at the first call, and nothing runs
	 * in this process instead of where the operator meant it to. */
	if (strchr(b->flavor, '/') || strchr(b->flavor, '.'))
		return fail(err, aks__node_get(n, "flavor"), sub,
		            "'%s': broker plugins are not supported by this build; use flavor "
		            "'thread', 'embedded' or 'queue' (a queue transport or response store "
		            "may be a plugin: see sandbox.broker.queue.type)",
		            b->flavor);
	if (strcmp(b->flavor, "embedded") && strcmp(b->flavor, "thread") &&
	    strcmp(b->flavor, "queue"))
		return fail(err, aks__node_get(n, "flavor"), sub,
		            "unknown sandbox broker flavor '%s'; expected one of ['embedded', "
		            "'queue', 'thread']",
		            b->flavor);
	double v;
	bool set;
	if ((rc = get_number(n, "wait_timeout", join(sub, sizeof(sub), path, "wait_timeout"), false,
	                     0, false, false, &b->wait_timeout, NULL, err)) < 0 ||
	    (rc = get_number(n, "wait_poll_interval",
	                     join(sub, sizeof(sub), path, "wait_poll_interval"), false, 0, true,
	                     false, &b->wait_poll_interval, NULL, err)) < 0 ||
	    (rc = get_number(n, "sweep_interval", join(sub, sizeof(sub), path, "sweep_interval"),
	                     false, 0, true, false, &b->sweep_interval, NULL, err)) < 0)
		return rc;
	v = (double)b->inline_payload_max_bytes;
	if ((rc = get_number(n, "inline_payload_max_bytes",
	                     join(sub, sizeof(sub), path, "inline_payload_max_bytes"), true, 1024,
	                     false, false, &v, NULL, err)) < 0)
		return rc;
	b->inline_payload_max_bytes = (int64_t)v;
	v = (double)b->response_ttl;
	if ((rc = get_number(n, "response_ttl", join(sub, sizeof(sub), path, "response_ttl"), true,
	                     1, false, false, &v, NULL, err)) < 0)
		return rc;
	b->response_ttl = (int64_t)v;
	v = 0;
	set = false;
	if ((rc = get_number(n, "worker_timeout_ceiling",
	                     join(sub, sizeof(sub), path, "worker_timeout_ceiling"), false, 0, true,
	                     true, &v, &set, err)) < 0)
		return rc;
	b->worker_timeout_ceiling = set ? v : 0;
	const aks_node *q = NULL, *st = NULL;
	char qpath[64] = "sandbox.broker.queue", spath[64] = "sandbox.broker.response_store";
	if ((rc = get_map(n, "queue", qpath, &q, err)) < 0 ||
	    (q && (rc = parse_queue_block(q, qpath, b, err)) < 0) ||
	    (rc = get_map(n, "response_store", spath, &st, err)) < 0 ||
	    (st && (rc = parse_store_block(st, spath, err)) < 0))
		return rc;
	if (strcmp(b->flavor, "queue") == 0) {
		if (!q)
			return fail(err, aks__node_get(n, "flavor"), NULL,
			            "sandbox.broker.flavor 'queue' requires the "
			            "sandbox.broker.queue block");
		if (!st)
			return fail(err, aks__node_get(n, "flavor"), NULL,
			            "sandbox.broker.flavor 'queue' requires the "
			            "sandbox.broker.response_store block");
	}
	if ((q && !(b->queue_json = json_text(q, NULL))) ||
	    (st && !(b->response_store_json = json_text(st, NULL))))
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	return AKS_OK;
}

/* ---- profiles ---- */

/* With the original's provider blocks, so that a misspelt one gets a suggestion. */
static const char *const profile_keys[] = {"type",
                                           "scope",
                                           "environment",
                                           "idle_timeout",
                                           "identity",
                                           "policy",
                                           "params",
                                           "pool",
                                           AKS_BUILTIN_PROVIDER_BLOCKS,
                                           NULL};

/* A pool holds at most this many sandboxes per profile. */
#define POOL_MAX_SIZE 64

/*
 * `pool: {size: N, max_idle: S}`: N sandboxes created ahead for the profile's new sessions
 * (core/session/pool.h). Refused where it cannot be what it says: an attached profile creates
 * nothing; a user-identity profile would hand a sandbox made before anyone asked to whoever
 * asks first (pools are not per principal); under the queue broker the workers create the
 * sandboxes, and they do not fill pools.
 */
static int parse_pool(const aks_settings *s, const aks_node *pn, const char *path, aks_profile *p,
                      aks_error **err)
{
	char ppath[300], sub[340];
	const aks_node *pool = NULL;
	static const char *const pool_keys[] = {"size", "max_idle", NULL};
	double size = 0, max_idle = 600;
	int rc = get_map(pn, "pool", join(ppath, sizeof(ppath), path, "pool"), &pool, err);
	if (rc == AKS_OK)
		rc = check_keys(pool, ppath, pool_keys, NULL, NULL, err);
	if (rc == AKS_OK)
		rc = get_number(pool, "size", join(sub, sizeof(sub), ppath, "size"), true, 0, false,
		                false, &size, NULL, err);
	if (rc == AKS_OK)
		rc = get_number(pool, "max_idle", join(sub, sizeof(sub), ppath, "max_idle"), false,
		                0, true, false, &max_idle, NULL, err);
	if (rc < 0 || !pool)
		return rc;
	if (size > POOL_MAX_SIZE)
		return fail(err, aks__node_get(pool, "size"), join(sub, sizeof(sub), ppath, "size"),
		            "must be at most %d, got %g", POOL_MAX_SIZE, size);
	const char *why = NULL;
	if (size > 0 && p->environment == AKS_ENV_ATTACHED)
		why = "an attached environment is never created, so there is nothing to pool";
	else if (size > 0 && p->identity_mode == AKS_IDENTITY_USER)
		why =
		    "a user-identity profile cannot pool: a sandbox made ahead belongs to no user "
		    "yet, and would go to whichever user asked first";
	else if (size > 0 && strcmp(s->broker.flavor, "queue") == 0)
		why = "under sandbox.broker.flavor: queue the workers create the sandboxes, and "
		      "they do not fill pools";
	if (why)
		return fail(err, pool, ppath, "%s", why);
	p->pool_size = (int)size;
	p->pool_max_idle = max_idle;
	return AKS_OK;
}

/* The types whose plugins' blocks a mapping may hold besides its own keys. */
struct block_names {
	const char *own;      /* this profile's (or the sugar's) type */
	const char *resolver; /* top level: `principal_resolver: TYPE` */
};

/* A block for the profile's own type, the sugar's resolver, or another installed provider
 * (an inactive block). */
static bool provider_block_key(const char *key, void *ctx)
{
	const struct block_names *names = ctx;
	return (names && names->own && type_names_block(names->own, key)) ||
	       (names && names->resolver && type_names_block(names->resolver, key)) ||
	       aks__is_provider_block_name(key);
}

/* The plugin name a `type` stands for: itself, or a path's base name less ".so"; its
 * start in type, and its length. */
static const char *plugin_name_of(const char *type, size_t *len)
{
	const char *base = strrchr(type, '/');
	base = base ? base + 1 : type;
	*len = strlen(base);
	if (*len > 3 && strcmp(base + *len - 3, ".so") == 0)
		*len -= 3;
	return base;
}

/* That name, malloc'd (NULL on ENOMEM). */
static char *type_plugin_name(const char *type)
{
	size_t len;
	const char *name = plugin_name_of(type, &len);
	return strndup(name, len);
}

/* Whether `key` is that name (nothing to allocate: a key filter cannot report ENOMEM). */
static bool type_names_block(const char *type, const char *key)
{
	size_t len;
	const char *name = plugin_name_of(type, &len);
	return strlen(key) == len && strncmp(name, key, len) == 0;
}

/* Every entry of an fs_allow list is a path a sandbox may be shown (policy_paths.c). */
static int check_fs_paths(const aks_node *pn, const char *key, const char *path, aks_error **err)
{
	const aks_node *n = aks__node_get(pn, key);
	for (size_t i = 0; n && !aks__node_is_null(n) && i < n->count; i++) {
		char buf[256];
		const char *why = aks__policy_path_problem(n->items[i]->value, buf, sizeof(buf));
		if (why)
			return fail(err, n->items[i], path, "'%s' %s", n->items[i]->value, why);
	}
	return AKS_OK;
}

/* Every network_allow entry is an egress rule the host will enforce (aks_netrule.h),
 * whatever network_egress is, so a mistake shows at load and not at a sandbox's first
 * connection. */
static int check_net_entries(const aks_node *pn, const char *path, aks_error **err)
{
	const aks_node *n = aks__node_get(pn, "network_allow");
	for (size_t i = 0; n && !aks__node_is_null(n) && i < n->count; i++) {
		char buf[512];
		const char *why = aks_netrule_problem(n->items[i]->value, buf, sizeof(buf));
		if (why)
			return fail(err, n->items[i], path, "%s", why);
	}
	return AKS_OK;
}

static int parse_policy(const aks_node *pn, const char *path, aks_profile *p, aks_error **err)
{
	static const char *const keys[] = {"network_egress", "network_allow", "fs_allow_read",
	                                   "fs_allow_write", "cpu",           "memory_mb",
	                                   "timeout",        "strict",        NULL};
	char sub[320];
	int rc = check_keys(pn, path, keys, NULL, NULL, err);
	int egress = AKS_EGRESS_ALLOW;
	double cpu = 0, memory = 0;
	bool strict = true;
	if (rc < 0 ||
	    (rc = get_enum(pn, "network_egress", join(sub, sizeof(sub), path, "network_egress"),
	                   egress_names, &egress, err)) < 0 ||
	    (rc =
	         get_string_list(pn, "network_allow", join(sub, sizeof(sub), path, "network_allow"),
	                         false, &p->network_allow, err)) < 0 ||
	    (rc = check_net_entries(pn, join(sub, sizeof(sub), path, "network_allow"), err)) < 0 ||
	    (rc =
	         get_string_list(pn, "fs_allow_read", join(sub, sizeof(sub), path, "fs_allow_read"),
	                         false, &p->fs_allow_read, err)) < 0 ||
	    (rc = get_string_list(pn, "fs_allow_write",
	                          join(sub, sizeof(sub), path, "fs_allow_write"), false,
	                          &p->fs_allow_write, err)) < 0 ||
	    (rc = check_fs_paths(pn, "fs_allow_read", join(sub, sizeof(sub), path, "fs_allow_read"),
	                         err)) < 0 ||
	    (rc = check_fs_paths(pn, "fs_allow_write",
	                         join(sub, sizeof(sub), path, "fs_allow_write"), err)) < 0 ||
	    (rc = get_number(pn, "cpu", join(sub, sizeof(sub), path, "cpu"), false, 0, true, true,
	                     &cpu, NULL, err)) < 0 ||
	    (rc = get_number(pn, "memory_mb", join(sub, sizeof(sub), path, "memory_mb"), true, 0,
	                     true, true, &memory, NULL, err)) < 0 ||
	    (rc = get_number(pn, "timeout", join(sub, sizeof(sub), path, "timeout"), false, 0, true,
	                     false, &p->policy.timeout, NULL, err)) < 0 ||
	    (rc = get_bool(pn, "strict", join(sub, sizeof(sub), path, "strict"), &strict, err)) < 0)
		return rc;
	p->policy.network_egress = (uint32_t)egress;
	p->policy.cpu = cpu;
	p->policy.memory_mb = (int64_t)memory;
	p->policy.strict = strict;
	p->policy.network_allow = (const char *const *)p->network_allow;
	p->policy.fs_allow_read = (const char *const *)p->fs_allow_read;
	p->policy.fs_allow_write = (const char *const *)p->fs_allow_write;
	return AKS_OK;
}

/* The environment matrix of the reference (§6.1), against the instance's
 * capabilities. */
static int check_environment(const aks_profile *p, const aks_node *at, aks_error **err)
{
	const aks_capabilities *caps = aks_provider_get_capabilities(p->provider);
	const char *cls = aks_plugin_get_descriptor(p->plugin)->name;
	if (p->environment == AKS_ENV_ATTACHED) {
		if (!caps->attaches_external)
			return fail(
			    err, at, NULL,
			    "sandbox profile '%s' declares environment: attached, but provider "
			    "'%s' "
			    "cannot attach to an existing environment; it only provisions managed "
			    "sandboxes",
			    p->name, cls);
		if (!p->attach_to || !*p->attach_to)
			return fail(
			    err, at, NULL,
			    "sandbox profile '%s' declares environment: attached but no attach_to "
			    "target is configured",
			    p->name);
		return AKS_OK;
	}
	if (!caps->provisions)
		return fail(
		    err, at, NULL,
		    "sandbox profile '%s' selects attach-only provider '%s', which cannot "
		    "provision managed sandboxes; set environment: attached (and attach_to) to "
		    "deliberately connect to an existing environment",
		    p->name, p->type);
	if (p->attach_to && *p->attach_to)
		return fail(
		    err, at, NULL,
		    "sandbox profile '%s' sets attach_to but environment is 'managed'; set "
		    "environment: attached to deliberately connect to an existing environment, "
		    "or remove attach_to",
		    p->name);
	return AKS_OK;
}

/* Loads the plugin, validates its block and opens the instance. */
static int bind_provider(aks_profile *p, const aks_node *pn, const char *path, aks_error **err)
{
	char sub[320], pos[AKS_NODE_WHERE_SIZE];
	const aks_node *type_node = aks__node_get(pn, "type");
	aks_error *e = NULL;
	int rc = aks_plugin_load(p->type, AKS_PLUGIN_PROVIDER, &p->plugin, &e);
	if (rc < 0) {
		rc = aks__error_set(err, rc, "%s: %s.type: %s", where(type_node, pos, sizeof(pos)),
		                    path, aks_error_message(e));
		aks_error_free(e);
		return rc;
	}
	const char *name = aks_plugin_get_descriptor(p->plugin)->name;
	const aks_node *block = aks__node_get(pn, name);
	const aks_node *params = aks__node_get(pn, "params");
	if (!block && aks__is_builtin_provider(name))
		return fail(
		    err, type_node, NULL,
		    "sandbox profile '%s' selects built-in provider '%s' but its '%s' config "
		    "block is missing",
		    p->name, name, name);
	if (!block && params && !aks__node_is_null(params))
		block = params; /* bring-your-own plugins read `params`, as in the original */
	else if (block && params && !aks__node_is_null(params) && !aks__is_builtin_provider(name))
		return fail(err, params, NULL,
		            "%s: set the plugin's options in either '%s' or 'params', not both",
		            path, name);
	rc = aks__config_build(aks_plugin_get_descriptor(p->plugin), block,
	                       join(sub, sizeof(sub), path, block == params ? "params" : name),
	                       &p->block, err);
	if (rc < 0)
		return rc;
	if (!(p->params_json = json_text(params, "{}")))
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	const char *attach_to = NULL;
	if (aks__config_string(p->block, "attach_to", &attach_to) == AKS_OK && attach_to)
		p->attach_to = strdup(attach_to);
	else if (params && aks__node_get(params, "attach_to") &&
	         aks__node_get(params, "attach_to")->kind == AKS_NODE_SCALAR &&
	         !aks__node_is_null(aks__node_get(params, "attach_to")))
		p->attach_to = strdup(aks__node_get(params, "attach_to")->value);
	rc = aks_provider_open(p->plugin, p->block, &p->provider, &e);
	if (rc < 0) {
		/* A plugin's own checks of its block come back as text: when that text quotes
		 * one value of the block ("env: 'A=B' is not a variable name"), that value is
		 * where the mistake is; otherwise the profile's type line. */
		const aks_node *at = aks__node_quoted_in(block, aks_error_message(e));
		rc = aks__error_set(err, rc,
		                    "%s: sandbox profile '%s': provider '%s' failed to start: %s",
		                    where(at ? at : type_node, pos, sizeof(pos)), p->name, name,
		                    aks_error_message(e));
		aks_error_free(e);
		return rc;
	}
	rc = check_environment(
	    p, aks__node_get(pn, "environment") ? aks__node_get(pn, "environment") : type_node,
	    err);
	if (rc < 0)
		return rc;
	p->unenforced =
	    aks__policy_unenforced(&p->policy, aks_provider_get_capabilities(p->provider));
	return AKS_OK;
}

/* A profile's name, `at` the node that gives it, is held to AKS_PROFILE_NAME_MAX. */
static int check_profile_name(const aks_node *at, const char *name, aks_error **err)
{
	size_t len = strlen(name);
	if (len <= AKS_PROFILE_NAME_MAX)
		return AKS_OK;
	return fail(err, at, NULL,
	            "the profile name '%.32s...' is %zu bytes long; the limit is %d bytes", name,
	            len, AKS_PROFILE_NAME_MAX);
}

/* The other provider blocks the profile's mapping holds: for the sugar, the sandbox block,
 * whose resolver block (`principal_resolver: NAME` reads `NAME:`) is not one. */
static int collect_inactive(aks_settings *s, aks_profile *p, const aks_node *pn, bool sugar,
                            const char *path, bool load, aks_error **err)
{
	aks_autofree char *own = type_plugin_name(p->type), *skip = NULL;
	const aks_node *resolver = sugar ? aks__node_get(pn, "principal_resolver") : NULL;
	bool named = resolver && resolver->kind == AKS_NODE_SCALAR && !aks__node_is_null(resolver);
	if (!own || (named && !(skip = type_plugin_name(resolver->value))))
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	const char *active = p->plugin ? aks_plugin_get_descriptor(p->plugin)->name : own;
	return aks__inactive_blocks_collect(s, p, pn, path, active, skip, load, err);
}

/* `sugar`: the node is the sandbox block itself, read only for type, scope,
 * environment and the provider blocks. */
static int parse_profile(aks_settings *s, const char *name, const aks_node *pn, bool sugar,
                         bool load, aks_profile **out, aks_error **err)
{
	char path[256], sub[320];
	if (sugar)
		snprintf(path, sizeof(path), "sandbox");
	else
		snprintf(path, sizeof(path), "sandbox.profiles.%s", name);
	if (!sugar && (aks__node_is_null(pn) || pn->kind != AKS_NODE_MAPPING))
		return fail(err, pn, path, "expected a mapping, got %s", kind_name(pn));
	aks_profile *p = calloc(1, sizeof(*p));
	if (!p || !(p->name = strdup(name))) {
		free(p);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	aks_policy_init(&p->policy);
	p->idle_timeout = 1800;
	atomic_init(&p->warned, false);
	int rc = AKS_OK;
	const aks_node *type = aks__node_get(pn, "type");
	if (aks__node_is_null(type) || type->kind != AKS_NODE_SCALAR || !*type->value)
		rc = fail(
		    err, type ? type : pn, join(sub, sizeof(sub), path, "type"),
		    "is required: a provider plugin name (e.g. local_subprocess) or a path to a "
		    ".so");
	else if (!(p->type = strdup(type->value)))
		rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
	struct block_names names = {p->type, NULL};
	if (rc == AKS_OK && !sugar)
		rc = check_keys(pn, path, profile_keys, provider_block_key, &names, err);
	double idle = (double)p->idle_timeout;
	const aks_node *identity = NULL, *policy = NULL;
	if (rc == AKS_OK)
		rc = get_enum(pn, "scope", join(sub, sizeof(sub), path, "scope"), scope_names,
		              &p->scope, err);
	if (rc == AKS_OK)
		rc = get_enum(pn, "environment", join(sub, sizeof(sub), path, "environment"),
		              environment_names, &p->environment, err);
	if (rc == AKS_OK && !sugar) {
		if ((rc = get_number(pn, "idle_timeout",
		                     join(sub, sizeof(sub), path, "idle_timeout"), true, 0, true,
		                     false, &idle, NULL, err)) == AKS_OK)
			p->idle_timeout = (int64_t)idle;
		char ipath[300];
		if (rc == AKS_OK)
			rc = get_map(pn, "identity", join(ipath, sizeof(ipath), path, "identity"),
			             &identity, err);
		static const char *const identity_keys[] = {"mode", NULL};
		if (rc == AKS_OK)
			rc = check_keys(identity, ipath, identity_keys, NULL, NULL, err);
		if (rc == AKS_OK)
			rc = get_enum(identity, "mode", join(sub, sizeof(sub), ipath, "mode"),
			              identity_names, &p->identity_mode, err);
		char ppath[300];
		if (rc == AKS_OK)
			rc = get_map(pn, "policy", join(ppath, sizeof(ppath), path, "policy"),
			             &policy, err);
		if (rc == AKS_OK)
			rc = parse_policy(policy, ppath, p, err);
		const aks_node *params = NULL;
		if (rc == AKS_OK)
			rc = get_map(pn, "params", join(sub, sizeof(sub), path, "params"), &params,
			             err);
		if (rc == AKS_OK)
			rc = parse_pool(s, pn, path, p, err);
	}
	if (rc == AKS_OK && !p->policy.network_allow) {
		/* Keep the policy's lists non-NULL even when the block omitted them. */
		if (!(p->network_allow = calloc(1, sizeof(char *))) ||
		    !(p->fs_allow_read =
		          p->fs_allow_read ? p->fs_allow_read : calloc(1, sizeof(char *))) ||
		    !(p->fs_allow_write =
		          p->fs_allow_write ? p->fs_allow_write : calloc(1, sizeof(char *))))
			rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
		p->policy.network_allow = (const char *const *)p->network_allow;
		p->policy.fs_allow_read = (const char *const *)p->fs_allow_read;
		p->policy.fs_allow_write = (const char *const *)p->fs_allow_write;
	}
	if (rc == AKS_OK && load)
		rc = bind_provider(p, pn, sugar ? "sandbox" : path, err);
	if (rc == AKS_OK)
		rc = collect_inactive(s, p, pn, sugar, sugar ? "sandbox" : path, load, err);
	if (rc < 0) {
		profile_free(p);
		return rc;
	}
	*out = p;
	return AKS_OK;
}

static int add_profile(aks_settings *s, aks_profile *p, aks_error **err)
{
	aks_profile **grown = realloc(s->profiles, (s->profile_count + 1) * sizeof(*grown));
	if (!grown) {
		profile_free(p);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	s->profiles = grown;
	grown[s->profile_count++] = p;
	return AKS_OK;
}

/* ---- plugins chosen by a top-level key (principal_resolver, state_store) ---- */

typedef struct plugin_choice {
	const char *key;     /* under sandbox. */
	int kind;            /* aks_plugin_kind */
	const char *what;    /* "a resolver plugin", for messages */
	const char *builtin; /* the built-in's name: null and this name select it */
	bool sugar;          /* `KEY: NAME` reads its options from sandbox.NAME */
	/* results */
	const aks_node *type;  /* the node naming it (NULL: the built-in by default) */
	const aks_node *block; /* its options, or NULL */
	bool is_builtin;
	const aks_plugin *plugin; /* loaded, when not the built-in and `load` */
} plugin_choice;

static int parse_plugin_choice(const aks_node *sb, bool load, plugin_choice *c, aks_error **err)
{
	char path[64], sub[256], pos[AKS_NODE_WHERE_SIZE];
	join(path, sizeof(path), "sandbox", c->key);
	const aks_node *n = aks__node_get(sb, c->key);
	c->type = n;
	c->is_builtin = true;
	if (aks__node_is_null(n)) {
		c->type = NULL;
		return AKS_OK;
	}
	if (n->kind == AKS_NODE_MAPPING) {
		/* {type: NAME, NAME: {...}}: the plugin with its own options. */
		c->type = aks__node_get(n, "type");
		if (aks__node_is_null(c->type) || c->type->kind != AKS_NODE_SCALAR)
			return fail(err, c->type ? c->type : n,
			            join(sub, sizeof(sub), path, "type"),
			            "is required: %s name or a path to a .so", c->what);
		char *own = type_plugin_name(c->type->value);
		const char *keys[] = {"type", own, NULL};
		int rc = own ? check_keys(n, path, keys, NULL, NULL, err)
		             : aks__error_set(err, AKS_ENOMEM, "out of memory");
		c->block = own ? aks__node_get(n, own) : NULL;
		free(own);
		if (rc < 0)
			return rc;
	} else if (n->kind != AKS_NODE_SCALAR) {
		return fail(err, n, path,
		            "expected %s name, a path, or a mapping with type; got %s", c->what,
		            kind_name(n));
	} else if (c->sugar) {
		char *own = type_plugin_name(n->value);
		if (!own)
			return aks__error_set(err, AKS_ENOMEM, "out of memory");
		c->block = aks__node_get(sb, own);
		free(own);
	}
	c->is_builtin = strcmp(c->type->value, c->builtin) == 0;
	if (c->is_builtin || !load)
		return AKS_OK;
	aks_error *e = NULL;
	int rc = aks_plugin_load(c->type->value, c->kind, &c->plugin, &e);
	if (rc < 0) {
		rc = aks__error_set(err, rc, "%s: %s: %s", where(c->type, pos, sizeof(pos)), path,
		                    aks_error_message(e));
		aks_error_free(e);
	}
	return rc;
}

/* ---- principal resolver ---- */

static int parse_resolver(aks_settings *s, const aks_node *sb, bool load, aks_error **err)
{
	plugin_choice c = {"principal_resolver",
	                   AKS_PLUGIN_RESOLVER,
	                   "a resolver plugin",
	                   "agent",
	                   true,
	                   NULL,
	                   NULL,
	                   false,
	                   NULL};
	int rc = parse_plugin_choice(sb, load, &c, err);
	if (rc < 0)
		return rc;
	if (c.is_builtin)
		return load ? aks_resolver_open_agent(&s->resolver, err) : AKS_OK;
	if (!(s->resolver_type = strdup(c.type->value)))
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	if (!load)
		return AKS_OK;
	s->resolver_plugin = c.plugin;
	const char *name = aks_plugin_get_descriptor(c.plugin)->name;
	char sub[256], pos[AKS_NODE_WHERE_SIZE];
	rc = aks__config_build(aks_plugin_get_descriptor(c.plugin), c.block,
	                       join(sub, sizeof(sub), "sandbox.principal_resolver", name),
	                       &s->resolver_block, err);
	if (rc < 0)
		return rc;
	aks_error *e = NULL;
	rc = aks_resolver_open(c.plugin, s->resolver_block, &s->resolver, &e);
	if (rc < 0) {
		rc = aks__error_set(err, rc, "%s: sandbox.principal_resolver: %s",
		                    where(c.type, pos, sizeof(pos)), aks_error_message(e));
		aks_error_free(e);
	}
	return rc;
}

/* ---- state store ---- */

/* Validates the choice and the block; the runtime opens the store (aks_runtime_open). */
static int parse_state_store(aks_settings *s, const aks_node *sb, bool load, aks_error **err)
{
	plugin_choice c = {
	    "state_store", AKS_PLUGIN_STORE, "a store plugin", "file", false, NULL, NULL, false,
	    NULL};
	int rc = parse_plugin_choice(sb, load, &c, err);
	if (rc < 0)
		return rc;
	if (c.type && !(s->store_type = strdup(c.type->value)))
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	if (!load)
		return AKS_OK;
	const aks_plugin_descriptor *d =
	    c.is_builtin ? &aks__file_store_descriptor : aks_plugin_get_descriptor(c.plugin);
	s->store_plugin = c.plugin;
	char sub[256];
	return aks__config_build(d, c.block, join(sub, sizeof(sub), "sandbox.state_store", d->name),
	                         &s->store_block, err);
}

/* ---- the queue broker's transport and response store ---- */

/* Loads the plugin a queue or store block's `type` names and builds its options block (the
 * block named after the plugin), located in the file on any error. */
static int load_block_plugin(const aks_node *block, const char *path, int kind,
                             const aks_plugin **plugin, aks_config **cfg, aks_error **err)
{
	const aks_node *type = aks__node_get(block, "type");
	char sub[256], pos[AKS_NODE_WHERE_SIZE];
	aks_error *e = NULL;
	int rc = aks_plugin_load(type->value, kind, plugin, &e);
	if (rc < 0) {
		rc = aks__error_set(err, rc, "%s: %s: %s", where(type, pos, sizeof(pos)),
		                    join(sub, sizeof(sub), path, "type"), aks_error_message(e));
		aks_error_free(e);
		return rc;
	}
	const aks_plugin_descriptor *d = aks_plugin_get_descriptor(*plugin);
	return aks__config_build(d, aks__node_get(block, d->name),
	                         join(sub, sizeof(sub), path, d->name), cfg, err);
}

/*
 * flavor: queue: the pairing rule (reference §5.5), then, for an enabled sandbox, the
 * transport and store plugins with their options checked here, at load, like a profile's
 * provider: a wrong key, a missing plugin or a store that cannot expire records is an error
 * with its place in the file, not a surprise on the first call.
 */
static int parse_queue_plugins(aks_settings *s, const aks_node *sb, bool load, aks_error **err)
{
	if (strcmp(s->broker.flavor, "queue") != 0)
		return AKS_OK;
	const aks_node *b = aks__node_get(sb, "broker");
	const aks_node *q = aks__node_get(b, "queue"), *st = aks__node_get(b, "response_store");
	const aks_node *qt = aks__node_get(q, "type"), *stt = aks__node_get(st, "type");
	bool q_mem = strcmp(qt->value, "in_memory") == 0,
	     st_mem = strcmp(stt->value, "in_memory") == 0;
	if (q_mem != st_mem)
		return fail(
		    err, q_mem ? stt : qt, NULL,
		    "the in_memory sandbox transport and the in_memory response store are only "
		    "valid together (the single-process test topology); pair a broker transport "
		    "(sqs/kafka/nats) with a shared response store (redis/valkey/dynamodb)");
	if (!load)
		return AKS_OK;
	if (q_mem) {
		/* The built-in pair: in-process queues with the `in_memory:` block's options. */
		s->queue_desc = &aks__memory_transport_descriptor;
		s->response_desc = &aks__memory_store_descriptor;
		int rc = aks__config_build(s->queue_desc, aks__node_get(q, "in_memory"),
		                           "sandbox.broker.queue.in_memory", &s->queue_block, err);
		if (rc == AKS_OK)
			rc = aks__config_build(s->response_desc, NULL,
			                       "sandbox.broker.response_store", &s->response_block,
			                       err);
		return rc;
	}
	int rc = load_block_plugin(q, "sandbox.broker.queue", AKS_PLUGIN_TRANSPORT,
	                           &s->queue_plugin, &s->queue_block, err);
	if (rc == AKS_OK)
		rc = load_block_plugin(st, "sandbox.broker.response_store", AKS_PLUGIN_STORE,
		                       &s->response_plugin, &s->response_block, err);
	if (rc < 0)
		return rc;
	s->queue_desc = aks_plugin_get_descriptor(s->queue_plugin);
	s->response_desc = aks_plugin_get_descriptor(s->response_plugin);
	const aks_store_ops *ops = s->response_desc->ops;
	if (ops->struct_size < offsetof(aks_store_ops, put_expiring) + sizeof(ops->put_expiring) ||
	    !ops->put_expiring)
		return fail(err, stt, "sandbox.broker.response_store.type",
		            "store '%s' cannot expire records (no put_expiring), which the queue "
		            "broker's response records need",
		            s->response_desc->name);
	return AKS_OK;
}

/*
 * What a transport plugin takes from outside its own block (transport.h, "Settings from the
 * queue block"): the queue URLs of input.url and output.url, the longest policy.timeout of the
 * profiles (0 when one has none), and the check of its max_message_bytes against
 * inline_payload_max_bytes, here at load rather than at the first oversized message.
 */
/* What a message carries beside the request or record that the inline cap bounds (its
 * attributes: the request id, an encoding marker). */
#define TRANSPORT_ATTRIBUTE_ROOM 1024

static int fill_transport_settings(aks_settings *s, const aks_node *sb, aks_error **err)
{
	if (!s->queue_plugin || !s->queue_block)
		return AKS_OK;
	const aks_node *b = aks__node_get(sb, "broker");
	const aks_node *q = aks__node_get(b, "queue");
	int rc = AKS_OK;
	for (int i = 0; i < 2 && rc == AKS_OK; i++) {
		const char *io = i ? "output" : "input";
		const aks_node *url = aks__node_get(aks__node_get(q, io), "url");
		char key[16], source[64];
		snprintf(key, sizeof(key), "%s_url", io);
		snprintf(source, sizeof(source), "sandbox.broker.queue.%s.url", io);
		bool set = url && url->kind == AKS_NODE_SCALAR && !aks__node_is_null(url);
		rc = aks__config_fill_string(s->queue_block, key, set ? url->value : NULL, source,
		                             err);
	}
	double longest = 0;
	bool unlimited = false;
	for (size_t i = 0; i < s->profile_count; i++) {
		double t = s->profiles[i]->policy.timeout;
		unlimited = unlimited || t <= 0;
		longest = t > longest ? t : longest;
	}
	if (rc == AKS_OK)
		rc = aks__config_fill_double(s->queue_block, "longest_timeout",
		                             unlimited ? 0 : longest,
		                             "the profiles' policy.timeout", err);
	int64_t max_bytes = 0;
	if (rc == AKS_OK &&
	    aks__config_int(s->queue_block, "max_message_bytes", &max_bytes) == AKS_OK &&
	    s->broker.inline_payload_max_bytes + TRANSPORT_ATTRIBUTE_ROOM > max_bytes) {
		const aks_node *n = aks__node_get(b, "inline_payload_max_bytes");
		return fail(err, n ? n : q, "sandbox.broker.inline_payload_max_bytes",
		            "%lld leaves no room in a %s message: the transport carries at most "
		            "max_message_bytes=%lld bytes, of which %d are kept for attributes; "
		            "lower it to %lld or less",
		            (long long)s->broker.inline_payload_max_bytes, s->queue_desc->name,
		            (long long)max_bytes, TRANSPORT_ATTRIBUTE_ROOM,
		            (long long)(max_bytes - TRANSPORT_ATTRIBUTE_ROOM));
	}
	return rc;
}

/* ---- the whole block ---- */

static const char *const sandbox_keys[] = {"enabled",
                                           "agents",
                                           "default_profile",
                                           "principal_resolver",
                                           "tool_output_max_chars",
                                           "broker",
                                           "profiles",
                                           "type",
                                           "scope",
                                           "environment",
                                           "state_store",
                                           AKS_BUILTIN_PROVIDER_BLOCKS,
                                           NULL};

int aks__settings_from_tree(const aks_node *root, const char *file, aks_settings **out,
                            aks_error **err)
{
	aks_settings *s = calloc(1, sizeof(*s));
	if (!s)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	s->default_profile = strdup("default");
	s->tool_output_max_chars = 8000;
	s->broker.flavor = strdup("thread");
	s->broker.wait_timeout = 60.0;
	s->broker.wait_poll_interval = 0.5;
	s->broker.inline_payload_max_bytes = 131072;
	s->broker.response_ttl = 86400;
	s->broker.sweep_interval = 300;
	s->broker.input_max_receive = 3;
	s->broker.output_max_receive = 3;
	s->broker.input_consumers = 5;
	s->broker.output_consumers = 2;
	s->broker.batch_size = 1;
	if (!s->default_profile || !s->broker.flavor || (file && !(s->file = strdup(file)))) {
		aks_settings_free(s);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	int rc = AKS_OK;
	const aks_node *sb = NULL;
	if (root && root->kind != AKS_NODE_MAPPING)
		rc = fail(err, root, NULL, "a config file must be a mapping, got %s",
		          kind_name(root));
	if (rc == AKS_OK)
		rc = get_map(root, "sandbox", "sandbox", &sb, err);

	/* The sugar's provider block is named after its type. */
	const aks_node *sugar_type = aks__node_get(sb, "type");
	const aks_node *resolver = aks__node_get(sb, "principal_resolver");
	struct block_names names = {
	    sugar_type && sugar_type->kind == AKS_NODE_SCALAR ? sugar_type->value : NULL,
	    resolver && resolver->kind == AKS_NODE_SCALAR && !aks__node_is_null(resolver)
	        ? resolver->value
	        : NULL};
	if (rc == AKS_OK)
		rc = check_keys(sb, "sandbox", sandbox_keys, provider_block_key, &names, err);
	double chars = (double)s->tool_output_max_chars;
	if (rc == AKS_OK)
		rc = get_bool(sb, "enabled", "sandbox.enabled", &s->enabled, err);
	if (rc == AKS_OK)
		rc = get_string_list(sb, "agents", "sandbox.agents", true, &s->agents, err);
	if (rc == AKS_OK)
		rc = get_string(sb, "default_profile", "sandbox.default_profile", false,
		                &s->default_profile, err);
	if (rc == AKS_OK &&
	    (rc = get_number(sb, "tool_output_max_chars", "sandbox.tool_output_max_chars", true, 1,
	                     false, false, &chars, NULL, err)) == AKS_OK)
		s->tool_output_max_chars = (int64_t)chars;
	if (rc == AKS_OK)
		rc = parse_broker(s, sb, err);
	/* Plugins are loaded only for an enabled sandbox: a disabled one is inert. */
	bool load = s->enabled;
	if (rc == AKS_OK)
		rc = parse_resolver(s, sb, load, err);
	if (rc == AKS_OK)
		rc = parse_state_store(s, sb, load, err);
	if (rc == AKS_OK)
		rc = parse_queue_plugins(s, sb, load, err);
	const aks_node *profiles = NULL;
	if (rc == AKS_OK)
		rc = get_map(sb, "profiles", "sandbox.profiles", &profiles, err);
	for (size_t i = 0; rc == AKS_OK && profiles && i + 1 < profiles->count; i += 2) {
		aks_profile *p = NULL;
		rc = check_profile_name(profiles->items[i], profiles->items[i]->value, err);
		if (rc == AKS_OK)
			rc = parse_profile(s, profiles->items[i]->value, profiles->items[i + 1],
			                   false, load, &p, err);
		if (rc == AKS_OK)
			rc = add_profile(s, p, err);
	}
	if (rc == AKS_OK && s->profile_count == 0 && !aks__node_is_null(sugar_type)) {
		/* Single-backend sugar: profiles[default_profile] from type and its block. */
		aks_profile *p = NULL;
		rc = check_profile_name(aks__node_get(sb, "default_profile"), s->default_profile,
		                        err);
		if (rc == AKS_OK)
			rc = parse_profile(s, s->default_profile, sb, true, load, &p, err);
		if (rc == AKS_OK)
			rc = add_profile(s, p, err);
	}
	if (rc == AKS_OK)
		rc = fill_transport_settings(s, sb, err);
	if (rc < 0) {
		aks_settings_free(s);
		return rc;
	}
	*out = s;
	return AKS_OK;
}
