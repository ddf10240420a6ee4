/*
 * core/mcp/mcp_rpc.c - JSON-RPC 2.0 messages for the MCP server: one input
 * line to a classified message, the response builders, and the protocol
 * revisions spoken. Stateless, so the fuzz target can drive it directly.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp.h"
#include "util/json_fix.h"

/* Newest first. 2025-03-26 and 2024-11-05 differ from 2025-11-25 in nothing
 * this server uses except structuredContent (and batches, which 2025-03-26
 * allowed and we do not accept: see docs/mcp.md). */
const char *const aks__mcp_legacy_versions[] = {AKS_MCP_LEGACY_LATEST, "2025-06-18", "2025-03-26",
                                                "2024-11-05", NULL};

const char *aks__mcp_negotiate(const char *requested)
{
	for (size_t i = 0; requested && aks__mcp_legacy_versions[i]; i++) {
		if (strcmp(requested, aks__mcp_legacy_versions[i]) == 0)
			return aks__mcp_legacy_versions[i];
	}
	return AKS_MCP_LEGACY_LATEST;
}

bool aks__mcp_has_structured_content(const char *version)
{
	/* Revisions are dates: later ones sort after earlier ones. */
	return version && strcmp(version, "2025-06-18") >= 0;
}

struct json_object *aks__mcp_supported_versions(void)
{
	struct json_object *list = json_object_new_array();
	if (!list)
		return NULL;
	json_object_array_add(list, json_object_new_string(AKS_MCP_MODERN_VERSION));
	for (size_t i = 0; aks__mcp_legacy_versions[i]; i++)
		json_object_array_add(list, json_object_new_string(aks__mcp_legacy_versions[i]));
	return list;
}

static void invalid(aks__mcp_message *msg, int code, const char *fmt, ...) AKS_PRINTF(3, 4);
static void invalid(aks__mcp_message *msg, int code, const char *fmt, ...)
{
	va_list ap;
	msg->kind = AKS_MCP_MSG_INVALID;
	msg->error_code = code;
	va_start(ap, fmt);
	vsnprintf(msg->error_message, sizeof(msg->error_message), fmt, ap);
	va_end(ap);
}

bool aks__mcp_id_valid(struct json_object *id)
{
	/* MCP: "string | number", never null. */
	return id && (json_object_is_type(id, json_type_string) ||
	              json_object_is_type(id, json_type_int) ||
	              json_object_is_type(id, json_type_double));
}

bool aks__mcp_id_equal(struct json_object *a, struct json_object *b)
{
	if (!aks__mcp_id_valid(a) || !aks__mcp_id_valid(b))
		return false;
	bool sa = json_object_is_type(a, json_type_string);
	bool sb = json_object_is_type(b, json_type_string);
	if (sa != sb)
		return false;
	if (sa)
		return json_object_get_string_len(a) == json_object_get_string_len(b) &&
		       memcmp(json_object_get_string(a), json_object_get_string(b),
		              (size_t)json_object_get_string_len(a)) == 0;
	if (json_object_is_type(a, json_type_int) && json_object_is_type(b, json_type_int))
		return json_object_get_int64(a) == json_object_get_int64(b);
	return json_object_get_double(a) == json_object_get_double(b);
}

/* Only JSON whitespace in [p, end). */
static bool blank(const char *p, const char *end)
{
	for (; p < end; p++) {
		if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
			return false;
	}
	return true;
}

static struct json_object *parse_json(const char *line, size_t len, char *why, size_t why_size)
{
	/* An embedded NUL cannot be part of a JSON text. */
	if (memchr(line, '\0', len)) {
		snprintf(why, why_size, "a NUL byte in the message");
		return NULL;
	}
	char *fixed = NULL; /* json_fix.h: json-c misreads some surrogate pairs */
	size_t fixed_len = 0;
	struct json_tokener *tok = aks__json_fix_surrogates(line, len, &fixed, &fixed_len) == 0
	                               ? json_tokener_new()
	                               : NULL;
	if (!tok) {
		snprintf(why, why_size, "out of memory");
		return NULL;
	}
	if (fixed) {
		line = fixed;
		len = fixed_len;
	}
	/* Strict: no comments, single quotes or NaN; and valid UTF-8 only. */
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	struct json_object *root = json_tokener_parse_ex(tok, line, (int)len);
	enum json_tokener_error jerr = json_tokener_get_error(tok);
	size_t end = json_tokener_get_parse_end(tok);
	if (jerr == json_tokener_continue) {
		snprintf(why, why_size, "incomplete JSON");
	} else if (jerr != json_tokener_success) {
		snprintf(why, why_size, "%s", json_tokener_error_desc(jerr));
	} else if (!blank(line + end, line + len)) {
		/* Two documents on one line, or trailing garbage. */
		snprintf(why, why_size, "text after the JSON value");
		json_object_put(root);
		root = NULL;
	}
	json_tokener_free(tok);
	free(fixed);
	if (jerr != json_tokener_success) {
		json_object_put(root);
		return NULL;
	}
	return root;
}

void aks__mcp_parse(const char *line, size_t len, aks__mcp_message *msg)
{
	memset(msg, 0, sizeof(*msg));
	char why[96] = "";
	if (len > (size_t)0x7fffffff) {
		invalid(msg, AKS_MCP_INVALID_REQUEST, "Invalid Request: message too large");
		return;
	}
	msg->root = parse_json(line, len, why, sizeof(why));
	if (!msg->root) {
		invalid(msg, AKS_MCP_PARSE_ERROR, "Parse error: %s", why);
		return;
	}
	struct json_object *root = msg->root;
	if (json_object_is_type(root, json_type_array)) {
		/* JSON-RPC batches: MCP 2025-06-18 dropped them, 2026-07-28 has none. */
		invalid(msg, AKS_MCP_INVALID_REQUEST,
		        "Invalid Request: JSON-RPC batches are not supported; send one message "
		        "per line");
		return;
	}
	if (!json_object_is_type(root, json_type_object)) {
		invalid(msg, AKS_MCP_INVALID_REQUEST,
		        "Invalid Request: not a JSON-RPC message object");
		return;
	}
	struct json_object *v = NULL, *id = NULL, *method = NULL;
	bool has_id = json_object_object_get_ex(root, "id", &id);
	if (has_id && aks__mcp_id_valid(id))
		msg->id = id;
	if (!json_object_object_get_ex(root, "jsonrpc", &v) ||
	    !json_object_is_type(v, json_type_string) ||
	    strcmp(json_object_get_string(v), "2.0") != 0) {
		invalid(msg, AKS_MCP_INVALID_REQUEST,
		        "Invalid Request: \"jsonrpc\" must be \"2.0\"");
		return;
	}
	if (!json_object_object_get_ex(root, "method", &method)) {
		if (json_object_object_get_ex(root, "result", NULL) ||
		    json_object_object_get_ex(root, "error", NULL)) {
			msg->kind = AKS_MCP_MSG_RESPONSE;
			return;
		}
		invalid(msg, AKS_MCP_INVALID_REQUEST, "Invalid Request: no \"method\"");
		return;
	}
	if (!json_object_is_type(method, json_type_string)) {
		invalid(msg, AKS_MCP_INVALID_REQUEST,
		        "Invalid Request: \"method\" must be a string");
		return;
	}
	if (has_id && !msg->id) {
		invalid(msg, AKS_MCP_INVALID_REQUEST,
		        "Invalid Request: \"id\" must be a string or a number");
		return;
	}
	msg->method = json_object_get_string(method);
	msg->method_len = (size_t)json_object_get_string_len(method);
	msg->kind = has_id ? AKS_MCP_MSG_REQUEST : AKS_MCP_MSG_NOTIFICATION;
	if (json_object_object_get_ex(root, "params", &v) && v) {
		if (json_object_is_type(v, json_type_object)) {
			msg->params = v;
		} else if (has_id) {
			invalid(msg, AKS_MCP_INVALID_PARAMS,
			        "Invalid params: \"params\" must be an object");
		}
		/* A notification with unusable params is acted on as if it had
		 * none: there is no one to tell. */
	}
}

void aks__mcp_message_clear(aks__mcp_message *msg)
{
	json_object_put(msg->root);
	memset(msg, 0, sizeof(*msg));
}

static struct json_object *envelope(struct json_object *id)
{
	struct json_object *o = json_object_new_object();
	if (!o)
		return NULL;
	struct json_object *copy = NULL;
	if (aks__mcp_id_valid(id) && json_object_deep_copy(id, &copy, NULL) != 0)
		copy = NULL;
	json_object_object_add(o, "jsonrpc", json_object_new_string("2.0"));
	json_object_object_add(o, "id", copy); /* NULL: null */
	return o;
}

struct json_object *aks__mcp_error(struct json_object *id, int code, const char *message,
                                   struct json_object *data)
{
	struct json_object *o = envelope(id), *e = json_object_new_object();
	if (!o || !e) {
		json_object_put(o);
		json_object_put(e);
		json_object_put(data);
		return NULL;
	}
	json_object_object_add(e, "code", json_object_new_int(code));
	json_object_object_add(e, "message", json_object_new_string(message));
	if (data)
		json_object_object_add(e, "data", data);
	json_object_object_add(o, "error", e);
	return o;
}

struct json_object *aks__mcp_result(struct json_object *id, struct json_object *result)
{
	struct json_object *o = envelope(id);
	if (!o || !result) {
		json_object_put(o);
		json_object_put(result);
		return NULL;
	}
	json_object_object_add(o, "result", result);
	return o;
}

char *aks__mcp_serialize(struct json_object *msg, size_t *len)
{
	size_t n = 0;
	/* PLAIN: no newline inside (control characters are escaped anyway). */
	const char *text = json_object_to_json_string_length(
	    msg, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &n);
	if (!text)
		return NULL;
	char *line = malloc(n + 2);
	if (!line)
		return NULL;
	memcpy(line, text, n);
	line[n] = '\n';
	line[n + 1] = '\0';
	*len = n + 1;
	return line;
}
