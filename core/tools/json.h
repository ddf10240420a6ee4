/*
 * core/tools/json.h - the pure text layer of the eight agent tools: a JSON
 * writer in the original's format, visible truncation, each tool's result
 * shape, the system-prompt guidance, the argument schemas and their validator.
 * Nothing here executes anything; the manager calls these to speak JSON.
 *
 * Every function returning `char *` returns malloc'ed text the caller frees,
 * or NULL when memory ran out.
 */
#ifndef AKS_CORE_TOOLS_JSON_H
#define AKS_CORE_TOOLS_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

struct json_object;

/* ---- the writer (json.c) ------------------------------------------------ */

/*
 * `obj` as Python's json.dumps(obj) with default arguments writes it (the
 * original's tool results are exactly that): separators ", " and ": ", key
 * order as inserted, everything outside printable ASCII escaped (\uXXXX in
 * lowercase hex, surrogate pairs above U+FFFF, \n \r \t \b \f \" \\ short),
 * invalid UTF-8 in strings rendered as U+FFFD first, floats as Python's repr,
 * NaN/Infinity as Python writes them. A NULL obj is "null".
 */
char *aks__json_dumps(struct json_object *obj);

/* A double as Python's repr(float) writes it, into buf (at least 32 bytes). */
void aks__json_format_double(double value, char *buf, size_t size);

/* ---- text and truncation (json.c) --------------------------------------- */

/*
 * Text as the agent sees it: the bytes decoded as UTF-8 the way Python's
 * decode(errors="replace") does (each maximal invalid subsequence becomes one
 * U+FFFD), then cut to the first max_chars characters.
 */
typedef struct aks_cut_text {
	char *text;     /* valid UTF-8, NUL-terminated; may hold NUL characters */
	size_t len;     /* bytes of text */
	size_t chars;   /* characters in text */
	uint64_t total; /* characters in the whole input, see aks__truncate_chars */
} aks_cut_text;

/* True when characters were cut from the text. */
static inline bool aks__cut_text_is_cut(const aks_cut_text *t)
{
	return t->total > t->chars;
}

/*
 * Decodes and bounds `utf8` (len bytes, need not be valid UTF-8) into *out.
 * `dropped_bytes` is how many bytes followed the given ones but were never
 * kept (the host's per-stream byte cap): they were not decoded, so each counts
 * as one character in out->total, which is then an upper bound (n bytes never
 * decode to more than n characters); an incomplete sequence at the very end
 * of the kept bytes is then the cap's doing and is counted the same way rather
 * than shown as U+FFFD. Returns AKS_OK or AKS_ENOMEM (out is then zeroed).
 */
int aks__truncate_chars(const char *utf8, size_t len, size_t max_chars, uint64_t dropped_bytes,
                        aks_cut_text *out);
void aks__cut_text_free(aks_cut_text *t);

/* ---- result shapes (json.c) ------------------------------------------------
 *
 * Truncation is visible (the original cut silently): a result whose text was
 * cut carries, as its last key, "truncated": {"<field>": <full length in
 * characters>, ...}, naming only the fields that were cut (stdout, stderr,
 * content). The fields themselves hold the first max_chars characters, so a
 * client reading the original's keys sees what it always saw; a result with
 * nothing cut is byte for byte the original's.
 */

/* One output stream of an execution: the kept bytes and how many the host's
 * byte cap dropped after them. */
typedef struct aks_tool_stream {
	const char *data;
	size_t len;
	uint64_t dropped;
} aks_tool_stream;

typedef struct aks_tool_output {
	aks_tool_stream out; /* stdout */
	aks_tool_stream err; /* stderr */
	int exit_code;
	const char *notice; /* NULL: none */
} aks_tool_output;

/* Fills *o from a result record (borrowing its buffers and notice). */
void aks__tool_output_from_result(const aks_result *r, aks_tool_output *o);

/* run_code / run_command finished: {stdout, stderr, exit_code,
 * sandbox_session_id[, notice][, truncated]}. */
char *aks__tool_json_run(const aks_tool_output *o, const char *session_id, size_t max_chars);
/* Promoted to a task: {task_id, status: "pending", sandbox_session_id[, notice]}. */
char *aks__tool_json_pending(const char *task_id, const char *session_id, const char *notice);
/* write_sandbox_file: {path, written: true, sandbox_session_id[, notice]}; the
 * notice says the write landed in a reset or recreated sandbox. */
char *aks__tool_json_written(const char *path, const char *session_id, const char *notice);
/* read_sandbox_file: {path, content, sandbox_session_id[, truncated]}; the
 * content is decoded as UTF-8 with replacement and bounded. */
char *aks__tool_json_read(const char *path, const void *content, size_t len, uint64_t dropped,
                          const char *session_id, const char *notice, size_t max_chars);

/*
 * A finished task's bounded outcome (the original's result_summary):
 * {stdout, stderr, exit_code, error, notice[, truncated]}. `o` NULL (the task
 * produced no result): stdout and stderr "", exit_code null. error and notice
 * NULL: null. A new json-c object (refcount 1) for the state store to keep;
 * check_sandbox_task nests it as it is.
 */
struct json_object *aks__tool_summary_new(const aks_tool_output *o, const char *error,
                                          const char *notice, size_t max_chars);

/* check_sandbox_task, a task the manager does not know: {task_id, status: "unknown"}. */
char *aks__tool_json_task_unknown(const char *task_id);
/* check_sandbox_task: {task_id, status, sandbox_session_id[, result]}; summary
 * (borrowed) is the terminal outcome, NULL while the task is pending. */
char *aks__tool_json_task(const char *task_id, const char *status, const char *session_id,
                          struct json_object *summary);

typedef struct aks_tool_session_row {
	const char *sandbox_session_id;
	const char *name; /* NULL: null */
	const char *profile;
	const char *status;  /* "active" or "closed" */
	double last_used_at; /* epoch seconds */
	unsigned egress_refused;
} aks_tool_session_row;

/* list_sandbox_sessions: {"sessions": [{sandbox_session_id, name, profile,
 * status, last_used_at}, ...]}, and egress_refused in a row once its egress policy has
 * refused a connection (the reference has no allowlist to count for). */
char *aks__tool_json_sessions(const aks_tool_session_row *rows, size_t count);
/* new_sandbox_session: {sandbox_session_id, name, profile} (name NULL: null). */
char *aks__tool_json_new_session(const char *session_id, const char *name, const char *profile);
/* destroy_sandbox_session: {sandbox_session_id, destroyed}; destroyed is false when there was
 * no session by that id (never made, or destroyed already): nothing was destroyed. */
char *aks__tool_json_destroyed(const char *session_id, bool destroyed);
/* Any failure: {error, sandbox_session_id} (session_id NULL: ""). */
char *aks__tool_json_error(const char *message, const char *session_id);
/* The capability is off: {"error": "sandbox capability is disabled"}. */
char *aks__tool_json_disabled(void);

/* ---- the system-prompt guidance (guidance.c) ------------------------------ */

typedef struct aks_guidance_profile {
	const char *name;
	const char *type;     /* the profile's type: a plugin name or a path */
	const char *scope;    /* "per_session", "per_call" or "per_runtime" */
	bool attached;        /* environment: attached */
	bool isolation_known; /* the profile's provider instance is loaded: */
	uint32_t isolation;   /* its AKS_ISOLATION_* tier */
} aks_guidance_profile;

/*
 * The guidance section (the original's run_code description, joined into the
 * agent's system prompt): newline-separated lines, no blank line, no trailing
 * newline, profiles listed in the order given.
 */
char *aks__tool_guidance(const aks_guidance_profile *profiles, size_t count,
                         const char *default_profile, size_t max_chars);
/* The same, from loaded settings. */
char *aks__tool_guidance_from_settings(const aks_settings *settings);
/* The name of an aks_scope ("per_session", ...). */
const char *aks__scope_name(int scope);

/* ---- tools, schemas and argument validation (schema.c) ------------------- */

/* The eight tools, in the original's fixed order. */
typedef enum aks_tool_id {
	AKS_TOOL_RUN_CODE,
	AKS_TOOL_RUN_COMMAND,
	AKS_TOOL_WRITE_SANDBOX_FILE,
	AKS_TOOL_READ_SANDBOX_FILE,
	AKS_TOOL_CHECK_SANDBOX_TASK,
	AKS_TOOL_LIST_SANDBOX_SESSIONS,
	AKS_TOOL_NEW_SANDBOX_SESSION,
	AKS_TOOL_DESTROY_SANDBOX_SESSION,
	AKS_TOOL_COUNT
} aks_tool_id;

/* The tool's name (NULL for an id out of range). */
const char *aks__tool_name(int tool);
/* Its one-line description. */
const char *aks__tool_description(int tool);
/* The id of a tool name, or -1. */
int aks__tool_find(const char *name);
/*
 * The JSON Schema (draft 2020-12) of the tool's arguments: {type: "object",
 * properties, required, additionalProperties: false}. A new json-c object, or
 * NULL for an id out of range or on ENOMEM.
 */
struct json_object *aks__tool_schema(int tool);
/*
 * Checks an arguments object against the tool's schema: an object (NULL
 * counts as {}), no unknown key, each value of its type, every required key
 * present, no NUL character in a string but write_sandbox_file's content
 * (the others are handed on as C strings). AKS_EINVAL with a message such
 * as "run_code: argument 'code' is required" otherwise.
 */
int aks__tool_validate_args(int tool, struct json_object *args, aks_error **err);

#endif /* AKS_CORE_TOOLS_JSON_H */
