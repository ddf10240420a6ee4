/*
 * core/mcp/mcp_catalog.c - what `tools/list` offers: the runtime's eight tools as MCP tools,
 * with annotations, the shape of each result (outputSchema) and, for `language` and
 * `profile`, the values the configuration allows (enum).
 *
 * The catalog is built once, by the first server, and kept until the process exits: it
 * depends only on the configuration, of which a process has one, so every server of the
 * process (one per stdio client, one per HTTP session) shares it rather than rendering it
 * again. Readers only deep-copy it, which changes nothing in it, so they need no lock once it
 * is built.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "mcp.h"

/*
 * The shape of each tool's result when it is not an error (docs/tools.md "Results"): what
 * structuredContent holds, so a client can check it. Keys a result may gain later are not
 * refused (no additionalProperties: false). An error result ({"error": ...}) carries no
 * structuredContent (mcp_server.c, call_result), so no schema describes it.
 */
#define STR         "{\"type\":\"string\"}"
#define STR_OR_NULL "{\"type\":[\"string\",\"null\"]}"
#define SESSION     "\"sandbox_session_id\":" STR
#define NOTICE      "\"notice\":" STR
#define CUTS                                                                                       \
	"\"truncated\":{\"type\":\"object\",\"description\":\"each cut field with its full "       \
	"length in characters\",\"additionalProperties\":{\"type\":\"integer\"}}"

static const char run_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"stdout\":" STR ",\"stderr\":" STR ",\"exit_code\":{\"type\":\"integer\"}," SESSION "," NOTICE
    "," CUTS ",\"task_id\":" STR ",\"status\":{\"type\":\"string\",\"enum\":[\"pending\"]}"
    "},\"oneOf\":[{\"required\":[\"stdout\",\"stderr\",\"exit_code\",\"sandbox_session_id\"]},"
    "{\"required\":[\"task_id\",\"status\",\"sandbox_session_id\"]}]}";

static const struct {
	const char *tool;
	const char *schema;
} output_schemas[] = {
    {"run_code", run_schema},
    {"run_command", run_schema},
    {"write_sandbox_file", "{\"type\":\"object\",\"properties\":{\"path\":" STR
                           ",\"written\":{\"type\":\"boolean\"}," SESSION "," NOTICE
                           "},\"required\":[\"path\",\"written\",\"sandbox_session_id\"]}"},
    {"read_sandbox_file",
     "{\"type\":\"object\",\"properties\":{\"path\":" STR ",\"content\":" STR "," SESSION "," NOTICE
     "," CUTS "},\"required\":[\"path\",\"content\",\"sandbox_session_id\"]}"},
    {"check_sandbox_task",
     "{\"type\":\"object\",\"properties\":{\"task_id\":" STR ",\"status\":{\"type\":\"string\","
     "\"enum\":[\"pending\",\"succeeded\",\"failed\",\"timed_out\",\"unknown\"]}," SESSION
     "," NOTICE ",\"result\":{\"type\":\"object\",\"properties\":{\"stdout\":" STR
     ",\"stderr\":" STR ",\"exit_code\":{\"type\":[\"integer\",\"null\"]},\"error\":" STR_OR_NULL
     ",\"notice\":" STR_OR_NULL "," CUTS "}}},\"required\":[\"task_id\",\"status\"]}"},
    {"list_sandbox_sessions",
     "{\"type\":\"object\",\"properties\":{\"sessions\":{\"type\":\"array\",\"items\":{"
     "\"type\":\"object\",\"properties\":{" SESSION ",\"name\":" STR_OR_NULL ",\"profile\":" STR
     ",\"status\":{\"type\":\"string\",\"enum\":[\"active\",\"closed\"]},"
     "\"last_used_at\":{\"type\":\"number\"},\"egress_refused\":{\"type\":\"integer\"}},"
     "\"required\":[\"sandbox_session_id\",\"name\",\"profile\",\"status\",\"last_used_at\"]}}},"
     "\"required\":[\"sessions\"]}"},
    {"new_sandbox_session",
     "{\"type\":\"object\",\"properties\":{" SESSION ",\"name\":" STR_OR_NULL ",\"profile\":" STR
     "},\"required\":[\"sandbox_session_id\",\"name\",\"profile\"]}"},
    {"destroy_sandbox_session",
     "{\"type\":\"object\",\"properties\":{" SESSION ",\"destroyed\":{\"type\":\"boolean\"}},"
     "\"required\":[\"sandbox_session_id\",\"destroyed\"]}"},
};

/* Tool hints for clients (MCP tool annotations; defaults are the cautious ones: destructive,
 * open world). */
static struct json_object *annotations(const char *tool)
{
	static const struct {
		const char *name;
		bool read_only, destructive, idempotent, open_world;
	} hints[] = {
	    {"run_code", false, true, false, true},
	    {"run_command", false, true, false, true},
	    {"write_sandbox_file", false, true, true, false},
	    {"read_sandbox_file", true, false, true, false},
	    {"check_sandbox_task", true, false, true, false},
	    {"list_sandbox_sessions", true, false, true, false},
	    {"new_sandbox_session", false, false, false, false},
	    {"destroy_sandbox_session", false, true, true, false},
	};
	for (size_t i = 0; i < sizeof(hints) / sizeof(hints[0]); i++) {
		if (strcmp(hints[i].name, tool) != 0)
			continue;
		struct json_object *a = json_object_new_object();
		json_object_object_add(a, "readOnlyHint",
		                       json_object_new_boolean(hints[i].read_only));
		if (!hints[i].read_only) {
			json_object_object_add(a, "destructiveHint",
			                       json_object_new_boolean(hints[i].destructive));
			json_object_object_add(a, "idempotentHint",
			                       json_object_new_boolean(hints[i].idempotent));
		}
		json_object_object_add(a, "openWorldHint",
		                       json_object_new_boolean(hints[i].open_world));
		return a;
	}
	return NULL;
}

static struct json_object *output_schema(const char *tool)
{
	for (size_t i = 0; i < sizeof(output_schemas) / sizeof(output_schemas[0]); i++)
		if (strcmp(output_schemas[i].tool, tool) == 0)
			return json_tokener_parse(output_schemas[i].schema);
	return NULL;
}

/* Adds s to the array unless it is there already. */
static void add_unique(struct json_object *array, const char *s)
{
	for (size_t i = 0; i < json_object_array_length(array); i++)
		if (strcmp(json_object_get_string(json_object_array_get_idx(array, i)), s) == 0)
			return;
	json_object_array_add(array, json_object_new_string(s));
}

/* The configured profiles' names, then null (the argument may be omitted or null). */
static struct json_object *profile_enum(const aks_settings *settings)
{
	struct json_object *names = json_object_new_array();
	size_t n = aks_settings_get_profile_count(settings);
	for (size_t i = 0; i < n; i++)
		add_unique(names, aks_profile_get_name(aks_settings_get_profile(settings, i)));
	json_object_array_add(names, NULL);
	return names;
}

/* Every language some profile's provider runs (the providers are opened when the
 * configuration loads). NULL when they are not: a disabled sandbox, which lists no tools. */
static struct json_object *language_enum(const aks_settings *settings)
{
	struct json_object *langs = json_object_new_array();
	size_t n = aks_settings_get_profile_count(settings);
	for (size_t i = 0; i < n; i++) {
		const aks_provider *prov =
		    aks_profile_get_provider(aks_settings_get_profile(settings, i));
		const aks_capabilities *caps = prov ? aks_provider_get_capabilities(prov) : NULL;
		if (!caps || !caps->languages) {
			json_object_put(langs);
			return NULL;
		}
		for (size_t k = 0; caps->languages[k]; k++)
			add_unique(langs, caps->languages[k]);
	}
	if (json_object_array_length(langs) == 0) {
		json_object_put(langs);
		return NULL;
	}
	return langs;
}

/* `enum` on the named property of an inputSchema, if it has that property. */
static void add_enum(struct json_object *input_schema, const char *property,
                     struct json_object *values)
{
	struct json_object *props = NULL, *prop = NULL, *copy = NULL;
	if (values && json_object_object_get_ex(input_schema, "properties", &props) &&
	    json_object_object_get_ex(props, property, &prop) &&
	    json_object_deep_copy(values, &copy, NULL) == 0)
		json_object_object_add(prop, "enum", copy);
}

static pthread_mutex_t catalog_lock = PTHREAD_MUTEX_INITIALIZER;
static struct json_object *catalog_tools; /* the tools/list array, every tool */

/* At exit, so a leak checker sees the catalog returned like everything else. */
__attribute__((destructor)) static void catalog_at_exit(void)
{
	json_object_put(catalog_tools);
	catalog_tools = NULL;
}

/* The runtime's schemas ({name, description, parameters}) as MCP tools. NULL when out of
 * memory. */
static struct json_object *catalog_build(aks_runtime *rt, const aks_settings *settings)
{
	char *schemas = aks_runtime_tool_schemas(rt);
	struct json_object *list = schemas ? json_tokener_parse(schemas) : NULL;
	free(schemas);
	if (!list || !json_object_is_type(list, json_type_array)) {
		json_object_put(list);
		return NULL;
	}
	struct json_object *profiles = profile_enum(settings), *languages = language_enum(settings);
	size_t n = json_object_array_length(list);
	struct json_object *tools = json_object_new_array();
	bool ok = tools && profiles;
	for (size_t i = 0; ok && i < n; i++) {
		struct json_object *t = json_object_array_get_idx(list, i), *v, *copy = NULL;
		ok = json_object_object_get_ex(t, "name", &v) &&
		     json_object_object_get_ex(t, "parameters", NULL);
		if (!ok)
			break;
		const char *name = json_object_get_string(v);
		struct json_object *tool = json_object_new_object();
		json_object_object_add(tool, "name", json_object_new_string(name));
		if (json_object_object_get_ex(t, "description", &v))
			json_object_object_add(tool, "description", json_object_get(v));
		json_object_object_get_ex(t, "parameters", &v);
		ok = json_object_deep_copy(v, &copy, NULL) == 0;
		if (ok) {
			add_enum(copy, "profile", profiles);
			add_enum(copy, "language", languages);
			json_object_object_add(tool, "inputSchema", copy);
		}
		struct json_object *out = output_schema(name);
		if (out)
			json_object_object_add(tool, "outputSchema", out);
		struct json_object *a = annotations(name);
		if (a)
			json_object_object_add(tool, "annotations", a);
		json_object_array_add(tools, tool);
	}
	json_object_put(profiles);
	json_object_put(languages);
	json_object_put(list);
	if (!ok) {
		json_object_put(tools);
		return NULL;
	}
	return tools;
}

int aks__mcp_catalog_ensure(aks_runtime *rt, const aks_settings *settings)
{
	pthread_mutex_lock(&catalog_lock);
	if (!catalog_tools)
		catalog_tools = catalog_build(rt, settings);
	int rc = catalog_tools ? AKS_OK : AKS_ENOMEM;
	pthread_mutex_unlock(&catalog_lock);
	return rc;
}

bool aks__mcp_catalog_has(const char *name)
{
	for (size_t i = 0; catalog_tools && i < json_object_array_length(catalog_tools); i++) {
		struct json_object *v = NULL;
		json_object_object_get_ex(json_object_array_get_idx(catalog_tools, i), "name", &v);
		if (strcmp(json_object_get_string(v), name) == 0)
			return true;
	}
	return false;
}

struct json_object *aks__mcp_catalog_tools(bool with_output_schemas)
{
	struct json_object *tools = NULL;
	if (!catalog_tools || json_object_deep_copy(catalog_tools, &tools, NULL) != 0)
		return json_object_new_array();
	for (size_t i = 0; !with_output_schemas && i < json_object_array_length(tools); i++)
		json_object_object_del(json_object_array_get_idx(tools, i), "outputSchema");
	return tools;
}
