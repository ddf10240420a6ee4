/*
 * core/cli/cmd_providers.c - `aksandbox providers [--json]`: every plugin on
 * the search path, with its descriptor, capabilities and config schema.
 *
 * The listing is informational: a file that fails to load is shown with its
 * error, and the exit status stays 0 (1 only when the output cannot be
 * written).
 */
#include "config.h"

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "cli.h"

/* True when a plugin-provided struct is large enough to hold `member`: the
 * host reads only what the plugin's struct_size covers. */
#define HAS_FIELD(ptr, type, member)                                                               \
	((ptr)->struct_size >= offsetof(type, member) + sizeof(((type *)0)->member))

static const char *kind_name(uint32_t kind)
{
	switch (kind) {
	case AKS_PLUGIN_PROVIDER:
		return "provider";
	case AKS_PLUGIN_TRANSPORT:
		return "transport";
	case AKS_PLUGIN_STORE:
		return "store";
	case AKS_PLUGIN_RESOLVER:
		return "resolver";
	default:
		return "unknown";
	}
}

static const char *config_type_name(uint32_t type)
{
	static const char *const names[] = {NULL,     "string",      "bool",       "int",
	                                    "double", "string_list", "string_map", "json"};
	return type > 0 && type < sizeof(names) / sizeof(names[0]) ? names[type] : "unknown";
}

/* The boolean capabilities, in the seeds' order. */
static const struct {
	const char *name;
	size_t offset;
} capability_flags[] = {
    {"shell", offsetof(aks_capabilities, shell)},
    {"files", offsetof(aks_capabilities, files)},
    {"package_install", offsetof(aks_capabilities, package_install)},
    {"stateful", offsetof(aks_capabilities, stateful)},
    {"attach", offsetof(aks_capabilities, attach)},
    {"provisions", offsetof(aks_capabilities, provisions)},
    {"attaches_external", offsetof(aks_capabilities, attaches_external)},
    {"principal_user", offsetof(aks_capabilities, principal_user)},
    {"policy_network", offsetof(aks_capabilities, policy_network)},
    {"policy_filesystem", offsetof(aks_capabilities, policy_filesystem)},
    {"policy_resources", offsetof(aks_capabilities, policy_resources)},
    {"policy_network_allowlist", offsetof(aks_capabilities, policy_network_allowlist)},
    {"egress_proxy", offsetof(aks_capabilities, egress_proxy)},
};
#define N_FLAGS (sizeof(capability_flags) / sizeof(capability_flags[0]))

/* -1 when the plugin's struct is too small to hold the flag. */
static int capability_flag(const aks_capabilities *caps, size_t i)
{
	size_t off = capability_flags[i].offset;
	if (caps->struct_size < off + sizeof(bool))
		return -1;
	return *(const bool *)((const char *)caps + off);
}

/* The config keys array is laid out with the plugin's struct size. */
static const aks_config_key *config_key_at(const aks_config_key *keys, size_t i)
{
	return (const aks_config_key *)((const char *)keys + i * keys->struct_size);
}

static bool config_key_valid(const aks_config_key *k)
{
	return k->struct_size >= offsetof(aks_config_key, help) && k->name;
}

static const char *key_help(const aks_config_key *k)
{
	return HAS_FIELD(k, aks_config_key, help) && k->help ? k->help : "";
}

static const char *or_empty(const char *s)
{
	return s ? s : "";
}

/* ---- human output ---------------------------------------------------------------- */

static void print_config_keys(FILE *f, const aks_config_key *keys)
{
	int w_name = 4, w_type = 4, w_default = 7;
	size_t n = 0;

	if (!keys || !config_key_valid(keys)) {
		fprintf(f, "  config keys:  (none)\n");
		return;
	}
	for (; config_key_valid(config_key_at(keys, n)); n++) {
		const aks_config_key *k = config_key_at(keys, n);
		int len = (int)strlen(k->name);
		w_name = len > w_name ? len : w_name;
		len = (int)strlen(config_type_name(k->type));
		w_type = len > w_type ? len : w_type;
		len =
		    k->required ? 10 : (int)strlen(k->default_value ? k->default_value : "(none)");
		w_default = len > w_default ? len : w_default;
	}
	fprintf(f, "  config keys:\n");
	fprintf(f, "    %-*s  %-*s  %-*s  %s\n", w_name, "NAME", w_type, "TYPE", w_default,
	        "DEFAULT", "DESCRIPTION");
	for (size_t i = 0; i < n; i++) {
		const aks_config_key *k = config_key_at(keys, i);
		const char *def =
		    k->required ? "(required)" : (k->default_value ? k->default_value : "(none)");
		fprintf(f, "    %-*s  %-*s  %-*s  %s\n", w_name, k->name, w_type,
		        config_type_name(k->type), w_default, def, key_help(k));
	}
}

static void print_capabilities(FILE *f, const aks_capabilities *caps)
{
	fprintf(f, "  isolation:    %s\n", aks_isolation_name(caps->isolation));
	fprintf(f, "  languages:   ");
	for (const char *const *l = caps->languages; l && *l; l++)
		fprintf(f, "%s %s", l == caps->languages ? "" : ",", *l);
	fprintf(f, "\n  capabilities:");
	int shown = 0;
	for (size_t i = 0; i < N_FLAGS; i++) {
		if (capability_flag(caps, i) == 1)
			fprintf(f, "%s %s", shown++ ? "," : "", capability_flags[i].name);
	}
	fprintf(f, "%s\n", shown ? "" : " (none)");
}

static void print_plugin(FILE *f, const char *file, const aks_plugin *plugin)
{
	const aks_plugin_descriptor *d = aks_plugin_get_descriptor(plugin);
	fprintf(f, "%s %s (%s, %s, plugin ABI %u.%u)\n", d->name, or_empty(d->version),
	        kind_name(d->kind), d->license ? d->license : "no license given", d->abi_major,
	        d->abi_minor);
	if (d->summary && *d->summary)
		fprintf(f, "  %s\n", d->summary);
	fprintf(f, "  file:         %s\n",
	        aks_plugin_get_file(plugin) ? aks_plugin_get_file(plugin) : file);
	const aks_capabilities *caps = aks_plugin_get_capabilities(plugin);
	if (caps)
		print_capabilities(f, caps);
	print_config_keys(f, d->config_keys);
}

/* ---- JSON output ----------------------------------------------------------------- */

static json_object *json_string_or_null(const char *s)
{
	return s ? json_object_new_string(s) : NULL;
}

static json_object *capabilities_json(const aks_capabilities *caps)
{
	json_object *o = json_object_new_object();
	json_object *langs = json_object_new_array();
	json_object_object_add(o, "isolation",
	                       json_object_new_string(aks_isolation_name(caps->isolation)));
	for (const char *const *l = caps->languages; l && *l; l++)
		json_object_array_add(langs, json_object_new_string(*l));
	json_object_object_add(o, "languages", langs);
	for (size_t i = 0; i < N_FLAGS; i++) {
		int v = capability_flag(caps, i);
		json_object_object_add(o, capability_flags[i].name,
		                       v < 0 ? NULL : json_object_new_boolean(v));
	}
	return o;
}

static json_object *config_keys_json(const aks_config_key *keys)
{
	json_object *a = json_object_new_array();
	for (size_t i = 0; keys && config_key_valid(config_key_at(keys, i)); i++) {
		const aks_config_key *k = config_key_at(keys, i);
		json_object *o = json_object_new_object();
		json_object_object_add(o, "name", json_object_new_string(k->name));
		json_object_object_add(o, "type",
		                       json_object_new_string(config_type_name(k->type)));
		json_object_object_add(o, "required", json_object_new_boolean(k->required));
		json_object_object_add(o, "default", json_string_or_null(k->default_value));
		json_object_object_add(o, "help", json_object_new_string(key_help(k)));
		json_object_array_add(a, o);
	}
	return a;
}

static json_object *plugin_json(const char *file, const aks_plugin *plugin)
{
	const aks_plugin_descriptor *d = aks_plugin_get_descriptor(plugin);
	const aks_capabilities *caps = aks_plugin_get_capabilities(plugin);
	const char *path = aks_plugin_get_file(plugin);
	json_object *o = json_object_new_object();
	json_object *abi = json_object_new_object();

	json_object_object_add(o, "file", json_object_new_string(path ? path : file));
	json_object_object_add(o, "loaded", json_object_new_boolean(1));
	json_object_object_add(o, "name", json_object_new_string(d->name));
	json_object_object_add(o, "kind", json_object_new_string(kind_name(d->kind)));
	json_object_object_add(o, "version", json_string_or_null(d->version));
	json_object_object_add(o, "license", json_string_or_null(d->license));
	json_object_object_add(o, "summary", json_string_or_null(d->summary));
	json_object_object_add(abi, "major", json_object_new_int((int)d->abi_major));
	json_object_object_add(abi, "minor", json_object_new_int((int)d->abi_minor));
	json_object_object_add(o, "abi", abi);
	json_object_object_add(o, "capabilities", caps ? capabilities_json(caps) : NULL);
	json_object_object_add(o, "config_keys", config_keys_json(d->config_keys));
	return o;
}

static json_object *failure_json(const char *file, const aks_error *error)
{
	json_object *o = json_object_new_object();
	json_object *e = json_object_new_object();
	int code = error ? aks_error_code(error) : AKS_EPLUGIN;
	json_object_object_add(o, "file", json_object_new_string(file));
	json_object_object_add(o, "loaded", json_object_new_boolean(0));
	json_object_object_add(e, "code", json_object_new_int(code));
	json_object_object_add(e, "type", json_string_or_null(aks_error_type_name(code)));
	json_object_object_add(
	    e, "message",
	    json_object_new_string(error ? aks_error_message(error) : aks_strerror(code)));
	json_object_object_add(o, "error", e);
	return o;
}

/* ---- the walk ------------------------------------------------------------------------ */

struct listing {
	FILE *out;
	json_object *plugins; /* --json: the array being filled; NULL for text */
	size_t count;
};

static int visit(const char *file, const aks_plugin *plugin, const aks_error *error, void *userdata)
{
	struct listing *ls = userdata;

	if (ls->plugins) {
		json_object_array_add(ls->plugins, plugin ? plugin_json(file, plugin)
		                                          : failure_json(file, error));
	} else {
		if (ls->count > 0)
			fputc('\n', ls->out);
		if (plugin)
			print_plugin(ls->out, file, plugin);
		else
			fprintf(ls->out, "%s: cannot load: %s\n", file,
			        error ? aks_error_message(error) : "unknown error");
	}
	ls->count++;
	return 0;
}

static int list_plugins(bool as_json)
{
	struct listing ls = {.out = stdout};
	json_object *doc = NULL;

	if (as_json) {
		doc = json_object_new_object();
		ls.plugins = json_object_new_array();
		json_object_object_add(doc, "plugin_dir", json_object_new_string(aks_plugin_dir()));
		json_object_object_add(doc, "plugins", ls.plugins);
	}
	aks_plugin_foreach(visit, &ls);

	if (doc) {
		fputs(json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PRETTY |
		                                              JSON_C_TO_STRING_SPACED |
		                                              JSON_C_TO_STRING_NOSLASHESCAPE),
		      stdout);
		fputc('\n', stdout);
		json_object_put(doc);
	} else if (ls.count == 0) {
		const char *path = getenv("AKS_PLUGIN_PATH");
		printf("no plugins found on the search path (AKS_PLUGIN_PATH='%s', then %s)\n",
		       path ? path : "", aks_plugin_dir());
	}
	if (fflush(stdout) != 0 || ferror(stdout)) {
		cli_warn("providers: cannot write the listing");
		return CLI_EXIT_FAILURE;
	}
	return CLI_EXIT_OK;
}

int cli_cmd_providers(int argc, char *argv[])
{
	static const struct option options[] = {
	    {"help", no_argument, NULL, 'h'},
	    {"json", no_argument, NULL, 'j'},
	    {NULL, 0, NULL, 0},
	};
	bool as_json = false;
	int c;

	opterr = 0;
	optind = 0;
	while ((c = getopt_long(argc, argv, "+:hj", options, NULL)) != -1) {
		switch (c) {
		case 'h':
			cli_print_help(argv[0]);
			return CLI_EXIT_OK;
		case 'j':
			as_json = true;
			break;
		default:
			return cli_option_error(argc, argv, c);
		}
	}
	if (optind < argc) {
		cli_warn("providers: unexpected argument '%s'", argv[optind]);
		cli_usage_hint(argv[0]);
		return CLI_EXIT_USAGE;
	}
	return list_plugins(as_json);
}
