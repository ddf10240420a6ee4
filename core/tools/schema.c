/*
 * core/tools/schema.c - the eight tools' names, descriptions and argument
 * schemas, and the validator that holds arguments to those schemas. One table
 * feeds both, so what a framework binds and what the host accepts cannot
 * drift apart.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include <json-c/json.h>

#include <aksandbox/store.h>

#include "config/settings.h"
#include "tools/json.h"
#include "util/util.h"

/* What an argument's string may hold. */
typedef enum arg_kind {
	/* Text handed on as a C string (code, a command, a path): a NUL would cut it short
	 * without a word, so one is refused. */
	ARG_TEXT,
	/* Bytes handed on with their length (a file's content): anything goes, NUL included. */
	ARG_BYTES,
	/* Text that names something (a session, a task, a language, a session's name): at most
	 * AKS_TOOL_ID_MAX bytes, so a stray megabyte is refused rather than stored and echoed. */
	ARG_ID,
	/* A profile's name: at most AKS_PROFILE_NAME_MAX bytes, as in the config. */
	ARG_PROFILE
} arg_kind;

/* Session and task ids are state store keys: they can be no longer than one. */
#define AKS_TOOL_ID_MAX AKS_STORE_NAME_MAX

typedef struct tool_arg {
	const char *name;
	arg_kind kind;
	bool nullable; /* every argument is a string; these also take null (= omitted) */
	bool required;
	const char *default_value; /* a string default, or NULL */
	const char *description;
} tool_arg;

#define MAX_ARGS 4

typedef struct tool_def {
	const char *name;
	const char *description;
	tool_arg args[MAX_ARGS + 1]; /* ends with a NULL name */
} tool_def;

#define SESSION_ARG                                                                                \
	{                                                                                          \
		"sandbox_session_id", ARG_ID, true, false, NULL,                                   \
		    "reuse an existing sandbox session; omit for the default session"              \
	}
#define PROFILE_ARG                                                                                \
	{                                                                                          \
		"profile", ARG_PROFILE, true, false, NULL,                                         \
		    "workload profile; omit for the configured default"                            \
	}

/* In the original's fixed order (aks_tool_id). */
static const tool_def tools[AKS_TOOL_COUNT] = {
    {"run_code",
     "Run code in the sandbox; returns stdout, stderr and exit_code, or a pending task_id when "
     "the run outlasts the wait.",
     {{"code", ARG_TEXT, false, true, NULL, "the source code to run"},
      {"language", ARG_ID, false, false, "python", "the language of the code"},
      SESSION_ARG,
      PROFILE_ARG}},
    {"run_command",
     "Run a shell command in the sandbox; returns stdout, stderr and exit_code, or a pending "
     "task_id when the run outlasts the wait.",
     {{"command", ARG_TEXT, false, true, NULL, "the shell command to run"},
      SESSION_ARG,
      PROFILE_ARG}},
    {"write_sandbox_file",
     "Write a UTF-8 text file into the sandbox workspace.",
     {{"path", ARG_TEXT, false, true, NULL, "the file's path in the sandbox workspace"},
      {"content", ARG_BYTES, false, true, NULL, "the text to write"},
      SESSION_ARG,
      PROFILE_ARG}},
    {"read_sandbox_file",
     "Read a UTF-8 text file from the sandbox workspace.",
     {{"path", ARG_TEXT, false, true, NULL, "the file's path in the sandbox workspace"},
      SESSION_ARG,
      PROFILE_ARG}},
    {"check_sandbox_task",
     "Poll a long-running execution that returned status 'pending'; a finished task's outcome "
     "is under \"result\".",
     {{"task_id", ARG_ID, false, true, NULL, "the task_id that the pending result gave"}}},
    {"list_sandbox_sessions",
     "List the sandbox sessions this conversation can use (id, name, profile, status).",
     {{NULL, ARG_TEXT, false, false, NULL, NULL}}},
    {"new_sandbox_session",
     "Create a fresh, empty sandbox session with a short descriptive name; returns its "
     "sandbox_session_id.",
     {{"name", ARG_ID, true, false, NULL,
       "a short descriptive name for the session, such as \"uv-project\""},
      PROFILE_ARG}},
    {"destroy_sandbox_session",
     "Destroy a sandbox session and its sandbox.",
     {{"sandbox_session_id", ARG_ID, false, true, NULL,
       "the id of the sandbox session to destroy"}}},
};

const char *aks__tool_name(int tool)
{
	return tool >= 0 && tool < AKS_TOOL_COUNT ? tools[tool].name : NULL;
}

const char *aks__tool_description(int tool)
{
	return tool >= 0 && tool < AKS_TOOL_COUNT ? tools[tool].description : NULL;
}

int aks__tool_find(const char *name)
{
	for (int i = 0; name && i < AKS_TOOL_COUNT; i++)
		if (strcmp(tools[i].name, name) == 0)
			return i;
	return -1;
}

static bool add(struct json_object *o, const char *key, struct json_object *v)
{
	if (!v)
		return false;
	if (json_object_object_add(o, key, v) != 0) {
		json_object_put(v);
		return false;
	}
	return true;
}

static struct json_object *arg_schema(const tool_arg *a)
{
	struct json_object *o = json_object_new_object(), *type = NULL;
	if (!o)
		return NULL;
	if (a->nullable) {
		type = json_object_new_array();
		if (type && (json_object_array_add(type, json_object_new_string("string")) != 0 ||
		             json_object_array_add(type, json_object_new_string("null")) != 0)) {
			json_object_put(type);
			type = NULL;
		}
	} else {
		type = json_object_new_string("string");
	}
	bool ok =
	    add(o, "type", type) && add(o, "description", json_object_new_string(a->description));
	if (ok && a->default_value)
		ok = add(o, "default", json_object_new_string(a->default_value));
	else if (ok && a->nullable)
		ok = json_object_object_add(o, "default", NULL) == 0;
	if (!ok) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

struct json_object *aks__tool_schema(int tool)
{
	if (tool < 0 || tool >= AKS_TOOL_COUNT)
		return NULL;
	struct json_object *schema = json_object_new_object();
	struct json_object *props = json_object_new_object(), *required = json_object_new_array();
	bool ok = schema && props && required;
	for (const tool_arg *a = tools[tool].args; ok && a->name; a++) {
		ok = add(props, a->name, arg_schema(a));
		if (ok && a->required) {
			struct json_object *n = json_object_new_string(a->name);
			ok = n && json_object_array_add(required, n) == 0;
			if (!ok)
				json_object_put(n);
		}
	}
	ok = ok && add(schema, "type", json_object_new_string("object"));
	if (ok) {
		ok = add(schema, "properties", props);
		props = NULL;
	}
	if (ok) {
		ok = add(schema, "required", required);
		required = NULL;
	}
	ok = ok && add(schema, "additionalProperties", json_object_new_boolean(0));
	json_object_put(props);
	json_object_put(required);
	if (!ok) {
		json_object_put(schema);
		return NULL;
	}
	return schema;
}

/* The closest argument name to an unknown one, if it is a likely typo. */
static const char *suggest(const tool_def *t, const char *key)
{
	const char *best = NULL;
	size_t best_d = 3;
	if (strlen(key) > 64) /* not a typo of any name here, and keeps the cost bounded */
		return NULL;
	for (const tool_arg *a = t->args; a->name; a++) {
		size_t d = aks__levenshtein(key, a->name);
		if (d < best_d) {
			best_d = d;
			best = a->name;
		}
	}
	return best;
}

static int unknown_argument(const tool_def *t, const char *key, aks_error **err)
{
	const char *hint = suggest(t, key);
	if (hint)
		return aks__error_set(err, AKS_EINVAL,
		                      "%s: unknown argument '%s'; did you mean '%s'?", t->name, key,
		                      hint);
	if (!t->args[0].name)
		return aks__error_set(err, AKS_EINVAL,
		                      "%s: unknown argument '%s' (%s takes no arguments)", t->name,
		                      key, t->name);
	aks_buf known = AKS_BUF_INIT;
	for (const tool_arg *a = t->args; a->name; a++)
		aks__buf_printf(&known, "%s%s", a == t->args ? "" : ", ", a->name);
	int rc = aks__error_set(err, AKS_EINVAL, "%s: unknown argument '%s' (arguments: %s)",
	                        t->name, key, known.data ? known.data : "?");
	aks__buf_free(&known);
	return rc;
}

/* The longest string an argument of this kind may be, in bytes. */
static size_t kind_max_len(arg_kind kind)
{
	switch (kind) {
	case ARG_ID:
		return AKS_TOOL_ID_MAX;
	case ARG_PROFILE:
		return AKS_PROFILE_NAME_MAX;
	default:
		return SIZE_MAX;
	}
}

/* What a string argument may hold, by its kind. */
static int check_string(const tool_def *t, const tool_arg *a, struct json_object *val,
                        aks_error **err)
{
	size_t len = (size_t)json_object_get_string_len(val);
	if (a->kind != ARG_BYTES && memchr(json_object_get_string(val), '\0', len))
		return aks__error_set(err, AKS_EINVAL,
		                      "%s: argument '%s' must not contain NUL characters (U+0000)",
		                      t->name, a->name);
	if (len > kind_max_len(a->kind))
		return aks__error_set(err, AKS_EINVAL,
		                      "%s: argument '%s' is %zu bytes long; the limit is %zu bytes",
		                      t->name, a->name, len, kind_max_len(a->kind));
	return AKS_OK;
}

int aks__tool_validate_args(int tool, struct json_object *args, aks_error **err)
{
	if (tool < 0 || tool >= AKS_TOOL_COUNT)
		return aks__error_set(err, AKS_EINVAL, "unknown tool #%d", tool);
	const tool_def *t = &tools[tool];
	if (args && !json_object_is_type(args, json_type_object))
		return aks__error_set(err, AKS_EINVAL, "%s: the arguments must be a JSON object",
		                      t->name);
	if (args) {
		json_object_object_foreach(args, key, val)
		{
			const tool_arg *a = t->args;
			while (a->name && strcmp(a->name, key) != 0)
				a++;
			if (!a->name)
				return unknown_argument(t, key, err);
			if (json_object_is_type(val, json_type_string)) {
				int rc = check_string(t, a, val, err);
				if (rc < 0)
					return rc;
				continue;
			}
			if (a->nullable && json_object_is_type(val, json_type_null))
				continue;
			return aks__error_set(err, AKS_EINVAL,
			                      "%s: argument '%s' must be a string%s", t->name, key,
			                      a->nullable ? " or null" : "");
		}
	}
	for (const tool_arg *a = t->args; a->name; a++) {
		struct json_object *val = NULL;
		if (a->required && !(args && json_object_object_get_ex(args, a->name, &val)))
			return aks__error_set(err, AKS_EINVAL, "%s: argument '%s' is required",
			                      t->name, a->name);
	}
	return AKS_OK;
}
