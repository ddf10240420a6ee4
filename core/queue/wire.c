/*
 * core/queue/wire.c - the queue broker's wire format: requests, completions and completion
 * records as JSON (reference §2.9, §5.6, §5.7).
 */
#include "config.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "aks_base64.h"
#include "plugin/result.h"
#include "queue/wire.h"
#include "tools/json.h"
#include "util/json_build.h"
#include "util/json_fix.h"
#include "util/util.h"

/* The deepest nesting a message may have; provider_data is the deep part. */
#define WIRE_MAX_DEPTH 64

static const char *const op_names[] = {"execute_code", "execute_command", "install_packages",
                                       "upload_file",  "download_file",   "destroy"};
static const char *const status_names[] = {"succeeded", "failed", "timed_out"};
static const char *const egress_names[] = {"allow", "deny", "allowlist"};

const char *aks__wire_op_name(int op)
{
	return op >= 0 && op <= AKS_WIRE_DESTROY ? op_names[op] : "unknown";
}

const char *aks__wire_status_name(int status)
{
	return status >= 0 && status <= AKS_WIRE_TIMED_OUT ? status_names[status] : "failed";
}

static int name_index(const char *const *names, size_t n, const char *name)
{
	for (size_t i = 0; name && i < n; i++)
		if (strcmp(names[i], name) == 0)
			return (int)i;
	return -1;
}

/* ---- error classes across the wire ---- */

static const struct {
	int code;
	const char *name;
} error_types[] = {
    {AKS_ECONFIG, "SandboxConfigError"},
    {AKS_ECAPABILITY, "SandboxCapabilityError"},
    {AKS_EPOLICY, "SandboxPolicyError"},
    {AKS_ETIMEOUT, "SandboxTimeoutError"},
    {AKS_EPROVISION, "SandboxProvisionError"},
    {AKS_EGONE, "SandboxGoneError"},
    {AKS_ESESSION_NOT_FOUND, "SandboxSessionNotFoundError"},
    {AKS_EBROKER, "ExecutionBrokerError"},
    /* Beyond the reference's errors module: the FileNotFoundError its providers raise for a
     * missing file, and classes of our own. A reference client maps them to
     * ExecutionBrokerError; ours keeps the type, so a missing file stays "not found" across
     * the wire. */
    {AKS_ENOTFOUND, "FileNotFoundError"},
    {AKS_ELIMIT, "SandboxLimitError"},
    {AKS_ECANCELLED, "SandboxCancelledError"},
    {AKS_EPLUGIN, "SandboxPluginError"},
};

const char *aks__wire_error_type(int code)
{
	for (size_t i = 0; i < sizeof(error_types) / sizeof(error_types[0]); i++)
		if (error_types[i].code == code)
			return error_types[i].name;
	return "SandboxError";
}

int aks__wire_error_code(const char *error_type)
{
	for (size_t i = 0; error_type && i < sizeof(error_types) / sizeof(error_types[0]); i++)
		if (strcmp(error_types[i].name, error_type) == 0)
			return error_types[i].code;
	if (error_type && strcmp(error_type, "SandboxError") == 0)
		return AKS_ERROR;
	return AKS_EBROKER; /* only the reference's own classes are honoured */
}

/* ---- building JSON ---- */

/* Every builder notes a failed allocation in *oom (util/json_build.h); the encoders check it
 * once, so no message leaves with a member silently null. */

static struct json_object *strv_json(const char *const *v, bool *oom)
{
	struct json_object *a = aks__jnew(json_object_new_array(), oom);
	for (size_t i = 0; a && v && v[i]; i++)
		aks__jappend(a, json_object_new_string(v[i]), oom);
	return a;
}

static struct json_object *principal_json(const aks_principal *p, bool *oom)
{
	struct json_object *o = aks__jnew(json_object_new_object(), oom);
	struct json_object *creds = aks__jnew(json_object_new_object(), oom);
	aks__jset(o, "mode",
	          json_object_new_string(p->mode == AKS_IDENTITY_USER ? "user" : "agent"), oom);
	aks__jset(o, "subject", json_object_new_string(p->subject ? p->subject : ""), oom);
	for (size_t i = 0; p->credentials && p->credentials[i] && p->credentials[i + 1]; i += 2)
		aks__jset(creds, p->credentials[i], json_object_new_string(p->credentials[i + 1]),
		          oom);
	aks__jset(o, "credentials", creds, oom);
	aks__jset(o, "groups", strv_json(p->groups, oom), oom);
	return o;
}

static struct json_object *policy_json(const aks_policy *p, bool *oom)
{
	struct json_object *o = aks__jnew(json_object_new_object(), oom);
	aks__jset(
	    o, "network_egress",
	    json_object_new_string(egress_names[p->network_egress <= 2 ? p->network_egress : 0]),
	    oom);
	aks__jset(o, "network_allow", strv_json(p->network_allow, oom), oom);
	aks__jset(o, "fs_allow_read", strv_json(p->fs_allow_read, oom), oom);
	aks__jset(o, "fs_allow_write", strv_json(p->fs_allow_write, oom), oom);
	if (p->cpu > 0)
		aks__jset(o, "cpu", json_object_new_double(p->cpu), oom);
	else
		aks__jset_null(o, "cpu", oom);
	if (p->memory_mb > 0)
		aks__jset(o, "memory_mb", json_object_new_int64(p->memory_mb), oom);
	else
		aks__jset_null(o, "memory_mb", oom);
	aks__jset(o, "timeout", json_object_new_double(p->timeout), oom);
	aks__jset(o, "strict", json_object_new_boolean(p->strict), oom);
	return o;
}

/* base64 of data as a JSON string. */
static struct json_object *base64_json(const unsigned char *data, size_t len, bool *oom)
{
	char *b64 =
	    aks__base64_encode(data ? data : (const unsigned char *)"", len, AKS_BASE64_STD);
	struct json_object *s = b64 ? json_object_new_string(b64) : NULL;
	free(b64);
	return aks__jnew(s, oom);
}

static struct json_object *payload_json(const aks_wire_request *r, bool *oom)
{
	struct json_object *o = aks__jnew(json_object_new_object(), oom);
	switch (r->op) {
	case AKS_WIRE_EXECUTE_CODE:
		aks__jset(o, "code", json_object_new_string(r->code ? r->code : ""), oom);
		aks__jset(o, "language",
		          json_object_new_string(r->language ? r->language : "python"), oom);
		break;
	case AKS_WIRE_EXECUTE_COMMAND:
		aks__jset(o, "command", json_object_new_string(r->command ? r->command : ""), oom);
		break;
	case AKS_WIRE_INSTALL_PACKAGES:
		aks__jset(o, "packages", strv_json((const char *const *)r->packages, oom), oom);
		break;
	case AKS_WIRE_UPLOAD_FILE:
		aks__jset(o, "path", json_object_new_string(r->path ? r->path : ""), oom);
		aks__jset(o, "content", base64_json(r->content, r->content_len, oom), oom);
		break;
	case AKS_WIRE_DOWNLOAD_FILE:
		aks__jset(o, "path", json_object_new_string(r->path ? r->path : ""), oom);
		break;
	default:
		break;
	}
	return o;
}

/* o as JSON text, and o put; NULL when it is incomplete or out of memory. */
static char *dump_complete(struct json_object *o, bool oom)
{
	char *text = oom ? NULL : aks__json_dumps(o);
	json_object_put(o);
	return text;
}

char *aks__wire_request_encode(const aks_wire_request *r)
{
	bool oom = false;
	struct json_object *o = aks__jnew(json_object_new_object(), &oom);
	aks__jset(o, "task_id", json_object_new_string(r->task_id ? r->task_id : ""), &oom);
	aks__jset(o, "operation", json_object_new_string(aks__wire_op_name(r->op)), &oom);
	aks__jset(o, "payload", payload_json(r, &oom), &oom);
	aks__jset(o, "profile", json_object_new_string(r->profile ? r->profile : ""), &oom);
	aks__jset(o, "principal", principal_json(&r->principal, &oom), &oom);
	aks__jset(o, "policy", policy_json(&r->policy, &oom), &oom);
	aks__jset(o, "sandbox_session", aks__session_to_json(&r->session), &oom);
	aks__jset(o, "ak_session_id",
	          json_object_new_string(r->ak_session_id ? r->ak_session_id : ""), &oom);
	aks__jset(o, "agent", json_object_new_string(r->agent ? r->agent : "agent"), &oom);
	if (r->has_wait_deadline)
		aks__jset(o, "wait_deadline", json_object_new_double(r->wait_deadline), &oom);
	else
		aks__jset_null(o, "wait_deadline", &oom);
	return dump_complete(o, oom);
}

/* ---- reading JSON, strictly ---- */

typedef struct reader {
	aks_error **err;
	const char *what; /* "request" or "completion", for messages */
	int rc;
} reader;

static int bad(reader *rd, const char *fmt, ...) AKS_PRINTF(2, 3);
static int bad(reader *rd, const char *fmt, ...)
{
	if (rd->rc == AKS_OK) {
		char msg[256];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		rd->rc = aks__error_set(rd->err, AKS_EINVAL, "malformed %s: %s", rd->what, msg);
	}
	return rd->rc;
}

static void out_of_memory(reader *rd)
{
	if (rd->rc == AKS_OK)
		rd->rc = aks__error_set(rd->err, AKS_ENOMEM, "out of memory");
}

static struct json_object *member(reader *rd, struct json_object *o, const char *key,
                                  json_type type, bool required)
{
	struct json_object *v = NULL;
	if (rd->rc != AKS_OK)
		return NULL;
	if (!json_object_object_get_ex(o, key, &v) || !v) {
		if (required)
			bad(rd, "'%s' is missing", key);
		return NULL;
	}
	if (!json_object_is_type(v, type)) {
		bad(rd, "'%s' has the wrong type", key);
		return NULL;
	}
	return v;
}

/* Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing past U+10FFFF. */
static bool valid_utf8(const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		unsigned char c = s[i];
		size_t len = c < 0x80             ? 1
		             : (c & 0xE0) == 0xC0 ? 2
		             : (c & 0xF0) == 0xE0 ? 3
		             : (c & 0xF8) == 0xF0 ? 4
		                                  : 0;
		if (!len || i + len > n)
			return false;
		uint32_t cp = len == 1 ? c : c & (0x7F >> len);
		for (size_t k = 1; k < len; k++) {
			if ((s[i + k] & 0xC0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + k] & 0x3F);
		}
		static const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
		if (cp < least[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
			return false;
		i += len;
	}
	return true;
}

static bool utf8_str(const char *s)
{
	return !s || valid_utf8((const unsigned char *)s, strlen(s));
}

/* A session read with aks__session_from_json: its strings must be UTF-8 too. */
static bool session_utf8(const aks_session_rec *s)
{
	return utf8_str(s->id) && utf8_str(s->name) && utf8_str(s->profile) &&
	       utf8_str(s->provider_type) && utf8_str(s->sandbox_id) && utf8_str(s->reset_notice);
}

/* A JSON string with a NUL character inside: as a C string it would end there. */
static bool string_has_nul(struct json_object *s)
{
	return memchr(json_object_get_string(s), '\0', (size_t)json_object_get_string_len(s));
}

/*
 * The key of the first string under `o` (at any depth; an array's items go by the array's
 * key) that holds a NUL character, or NULL. Every string of a request becomes a C string on
 * the worker (a command, a path, a package, a group, a credential, the session's fields),
 * where a NUL would cut it short without a word; file contents travel as base64.
 */
static const char *nul_member(struct json_object *o, const char *key)
{
	const char *found = NULL;
	switch (json_object_get_type(o)) {
	case json_type_string:
		return string_has_nul(o) ? key : NULL;
	case json_type_object: {
		json_object_object_foreach(o, k, v)
		{
			if ((found = nul_member(v, k)))
				return found;
		}
		return NULL;
	}
	case json_type_array:
		for (size_t i = 0; !found && i < json_object_array_length(o); i++)
			found = nul_member(json_object_array_get_idx(o, i), key);
		return found;
	default:
		return NULL;
	}
}

/* A request's or a completion's sandbox_session. */
static void read_session(reader *rd, struct json_object *o, aks_session_rec *s)
{
	int rc = aks__session_from_json(o, s, NULL);
	if (rc == AKS_ENOMEM)
		out_of_memory(rd);
	else if (rc != AKS_OK)
		bad(rd, "%s", "'sandbox_session' lacks its id or profile");
	else if (!session_utf8(s))
		bad(rd, "%s", "'sandbox_session' holds a string that is not valid UTF-8");
}

static char *dup_string(reader *rd, struct json_object *o, const char *key, bool required)
{
	struct json_object *v = member(rd, o, key, json_type_string, required);
	if (!v)
		return NULL;
	if (string_has_nul(v)) {
		bad(rd, "'%s' contains a NUL character", key);
		return NULL;
	}
	char *s = strndup(json_object_get_string(v), (size_t)json_object_get_string_len(v));
	if (!s && rd->rc == AKS_OK)
		rd->rc = aks__error_set(rd->err, AKS_ENOMEM, "out of memory");
	/* Carried on as it came, never "repaired": a command must not change on the way. */
	if (s && !valid_utf8((const unsigned char *)s, strlen(s))) {
		free(s);
		bad(rd, "'%s' is not valid UTF-8", key);
		return NULL;
	}
	return s;
}

static char **dup_strv(reader *rd, struct json_object *o, const char *key)
{
	struct json_object *a = member(rd, o, key, json_type_array, false);
	size_t n = a ? json_object_array_length(a) : 0;
	char **v = calloc(n + 1, sizeof(*v));
	if (!v) {
		out_of_memory(rd);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		struct json_object *e = json_object_array_get_idx(a, i);
		if (!json_object_is_type(e, json_type_string)) {
			bad(rd, "'%s' must be a list of strings", key);
			break;
		}
		if (!(v[i] = strdup(json_object_get_string(e)))) {
			out_of_memory(rd);
			break;
		}
		if (!valid_utf8((const unsigned char *)v[i], strlen(v[i]))) {
			bad(rd, "'%s' holds a string that is not valid UTF-8", key);
			break;
		}
	}
	return v;
}

static double get_number(reader *rd, struct json_object *o, const char *key, bool *present)
{
	struct json_object *v = NULL;
	*present = false;
	if (rd->rc != AKS_OK || !json_object_object_get_ex(o, key, &v) || !v)
		return 0;
	if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int)) {
		bad(rd, "'%s' must be a number", key);
		return 0;
	}
	*present = true;
	return json_object_get_double(v);
}

static struct json_object *parse(reader *rd, const char *json, size_t len)
{
	if (len > INT32_MAX) {
		bad(rd, "%s", "it is too large");
		return NULL;
	}
	aks_autofree char *fixed = NULL; /* json_fix.h: json-c misreads some surrogate pairs */
	size_t fixed_len = 0;
	json_tokener *tok = aks__json_fix_surrogates(json, len, &fixed, &fixed_len) == 0
	                        ? json_tokener_new_ex(WIRE_MAX_DEPTH)
	                        : NULL;
	if (!tok) {
		rd->rc = aks__error_set(rd->err, AKS_ENOMEM, "out of memory");
		return NULL;
	}
	if (fixed) {
		json = fixed;
		len = fixed_len;
	}
	struct json_object *o = json_tokener_parse_ex(tok, json, (int)len);
	enum json_tokener_error jerr = json_tokener_get_error(tok);
	size_t end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (jerr != json_tokener_success || !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		bad(rd, "%s",
		    jerr != json_tokener_success ? json_tokener_error_desc(jerr)
		                                 : "not a JSON object");
		return NULL;
	}
	for (size_t i = end; i < len; i++) {
		if (json[i] != ' ' && json[i] != '\n' && json[i] != '\r' && json[i] != '\t') {
			json_object_put(o);
			bad(rd, "%s", "there is more after the JSON object");
			return NULL;
		}
	}
	return o;
}

void aks__wire_request_free(aks_wire_request *r)
{
	if (!r)
		return;
	free(r->task_id);
	free(r->code);
	free(r->language);
	free(r->command);
	aks__strv_free(r->packages);
	free(r->path);
	free(r->content);
	free(r->profile);
	free(r->subject);
	aks__strv_free(r->groups);
	aks__strv_free(r->credentials);
	aks__strv_free(r->network_allow);
	aks__strv_free(r->fs_allow_read);
	aks__strv_free(r->fs_allow_write);
	aks__session_clear(&r->session);
	free(r->ak_session_id);
	free(r->agent);
	free(r);
}

static void read_payload(reader *rd, struct json_object *p, aks_wire_request *r)
{
	switch (r->op) {
	case AKS_WIRE_EXECUTE_CODE:
		r->code = dup_string(rd, p, "code", true);
		r->language = dup_string(rd, p, "language", false);
		break;
	case AKS_WIRE_EXECUTE_COMMAND:
		r->command = dup_string(rd, p, "command", true);
		break;
	case AKS_WIRE_INSTALL_PACKAGES:
		r->packages = dup_strv(rd, p, "packages");
		break;
	case AKS_WIRE_UPLOAD_FILE: {
		r->path = dup_string(rd, p, "path", true);
		struct json_object *c = member(rd, p, "content", json_type_string, true);
		if (c) {
			int e = aks__base64_decode(json_object_get_string(c),
			                           (size_t)json_object_get_string_len(c),
			                           AKS_BASE64_STD, &r->content, &r->content_len);
			if (e == AKS_ENOMEM)
				rd->rc = aks__error_set(rd->err, AKS_ENOMEM, "out of memory");
			else if (e != AKS_OK)
				bad(rd, "'%s' is not standard base64", "content");
		}
		break;
	}
	case AKS_WIRE_DOWNLOAD_FILE:
		r->path = dup_string(rd, p, "path", true);
		break;
	default:
		break;
	}
}

static void read_principal(reader *rd, struct json_object *p, aks_wire_request *r)
{
	char *mode = dup_string(rd, p, "mode", false);
	if (mode && strcmp(mode, "agent") != 0 && strcmp(mode, "user") != 0)
		bad(rd, "principal mode '%s' is neither agent nor user", mode);
	uint32_t user = mode && !strcmp(mode, "user") ? AKS_IDENTITY_USER : AKS_IDENTITY_AGENT;
	free(mode);
	r->subject = dup_string(rd, p, "subject", true);
	r->groups = dup_strv(rd, p, "groups");
	struct json_object *creds = member(rd, p, "credentials", json_type_object, false);
	size_t n = creds ? (size_t)json_object_object_length(creds) : 0, k = 0;
	r->credentials = calloc(2 * n + 1, sizeof(char *));
	if (!r->credentials) {
		out_of_memory(rd);
		return;
	}
	if (creds) {
		json_object_object_foreach(creds, key, val)
		{
			if (!json_object_is_type(val, json_type_string)) {
				bad(rd, "credential '%s' must be a string", key);
				return;
			}
			/* one by one: the vector is freed up to its first NULL */
			if (!(r->credentials[k] = strdup(key)) ||
			    !(r->credentials[++k] = strdup(json_object_get_string(val)))) {
				out_of_memory(rd);
				return;
			}
			k++;
			if (!utf8_str(r->credentials[k - 2]) || !utf8_str(r->credentials[k - 1])) {
				bad(rd, "credential '%s' is not valid UTF-8", "(name withheld)");
				return;
			}
		}
	}
	aks_principal_init(&r->principal, r->subject ? r->subject : "agent");
	r->principal.mode = user;
	r->principal.groups = (const char *const *)r->groups;
	r->principal.credentials = (const char *const *)r->credentials;
}

static void read_policy(reader *rd, struct json_object *p, aks_wire_request *r)
{
	aks_policy_init(&r->policy);
	char *egress = dup_string(rd, p, "network_egress", false);
	int e = egress ? name_index(egress_names, 3, egress) : 0;
	if (e < 0)
		bad(rd, "network_egress '%s' is not allow, deny or allowlist", egress);
	free(egress);
	r->policy.network_egress = (uint32_t)(e < 0 ? 0 : e);
	r->network_allow = dup_strv(rd, p, "network_allow");
	r->fs_allow_read = dup_strv(rd, p, "fs_allow_read");
	r->fs_allow_write = dup_strv(rd, p, "fs_allow_write");
	r->policy.network_allow = (const char *const *)r->network_allow;
	r->policy.fs_allow_read = (const char *const *)r->fs_allow_read;
	r->policy.fs_allow_write = (const char *const *)r->fs_allow_write;
	bool present;
	double cpu = get_number(rd, p, "cpu", &present);
	if (present && cpu <= 0)
		bad(rd, "'%s' must be positive", "cpu");
	r->policy.cpu = present ? cpu : 0;
	double mem = get_number(rd, p, "memory_mb", &present);
	if (present && (mem < 1 || mem > 1e12))
		bad(rd, "'%s' must be a positive number of MiB", "memory_mb");
	r->policy.memory_mb = present ? (int64_t)mem : 0;
	double timeout = get_number(rd, p, "timeout", &present);
	if (present && !(timeout > 0 && timeout < 1e9))
		bad(rd, "'%s' must be a positive number of seconds", "timeout");
	if (present)
		r->policy.timeout = timeout;
	struct json_object *strict = member(rd, p, "strict", json_type_boolean, false);
	if (strict)
		r->policy.strict = json_object_get_boolean(strict);
}

int aks__wire_request_decode(const char *json, size_t len, aks_wire_request **out, aks_error **err)
{
	*out = NULL;
	reader rd = {err, "request", AKS_OK};
	struct json_object *o = parse(&rd, json, len);
	if (!o)
		return rd.rc;
	const char *nul_key = nul_member(o, "request");
	if (nul_key) {
		bad(&rd, "'%s' contains a NUL character", nul_key);
		json_object_put(o);
		return rd.rc;
	}
	aks_wire_request *r = calloc(1, sizeof(*r));
	if (!r) {
		json_object_put(o);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	r->task_id = dup_string(&rd, o, "task_id", true);
	char *op = dup_string(&rd, o, "operation", true);
	r->op = op ? name_index(op_names, 6, op) : -1;
	if (op && r->op < 0)
		bad(&rd, "unknown operation '%s'", op);
	free(op);
	struct json_object *payload = member(&rd, o, "payload", json_type_object, false);
	if (rd.rc == AKS_OK)
		read_payload(&rd, payload ? payload : o, r);
	r->profile = dup_string(&rd, o, "profile", true);
	struct json_object *p = member(&rd, o, "principal", json_type_object, true);
	if (p)
		read_principal(&rd, p, r);
	p = member(&rd, o, "policy", json_type_object, true);
	if (p)
		read_policy(&rd, p, r);
	p = member(&rd, o, "sandbox_session", json_type_object, true);
	if (p)
		read_session(&rd, p, &r->session);
	r->ak_session_id = dup_string(&rd, o, "ak_session_id", false);
	r->agent = dup_string(&rd, o, "agent", false);
	r->wait_deadline = get_number(&rd, o, "wait_deadline", &r->has_wait_deadline);
	json_object_put(o);
	if (rd.rc == AKS_OK && ((!r->ak_session_id && !(r->ak_session_id = strdup(""))) ||
	                        (!r->agent && !(r->agent = strdup("agent")))))
		rd.rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
	if (rd.rc != AKS_OK) {
		aks__wire_request_free(r);
		return rd.rc;
	}
	*out = r;
	return AKS_OK;
}

/* ---- completions ---- */

static struct json_object *result_json(const aks_result *res, const char *session_id, bool *oom)
{
	struct json_object *o = aks__jnew(json_object_new_object(), oom);
	size_t n = 0;
	const char *s = aks_result_get_stdout(res, &n);
	aks__jset(o, "stdout", json_object_new_string_len(s ? s : "", (int)n), oom);
	s = aks_result_get_stderr(res, &n);
	aks__jset(o, "stderr", json_object_new_string_len(s ? s : "", (int)n), oom);
	aks__jset(o, "exit_code", json_object_new_int(aks_result_get_exit_code(res)), oom);
	struct json_object *files = aks__jnew(json_object_new_array(), oom);
	for (size_t i = 0; files && i < aks_result_get_file_count(res); i++) {
		const char *path = NULL, *mime = NULL;
		size_t len = 0;
		const unsigned char *data = aks_result_get_file(res, i, &path, &mime, &len);
		struct json_object *f = aks__jnew(json_object_new_object(), oom);
		aks__jset(f, "path", json_object_new_string(path ? path : ""), oom);
		aks__jset(f, "content", base64_json(data, len, oom), oom);
		aks__jset_str_or_null(f, "mime_type", mime, oom);
		aks__jappend(files, f, oom);
	}
	aks__jset(o, "output_files", files, oom);
	aks__jset(o, "sandbox_session_id", json_object_new_string(session_id ? session_id : ""),
	          oom);
	aks__jset_str_or_null(o, "notice", aks_result_get_notice(res), oom);
	/* The provider's own JSON object (the host checked it when it was set). */
	const char *pd = aks_result_get_provider_data(res);
	aks__jset(o, "provider_data", pd ? json_tokener_parse(pd) : json_object_new_object(), oom);
	return o;
}

struct json_object *aks__wire_completion_json(const aks_wire_completion *c)
{
	bool oom = false;
	struct json_object *o = aks__jnew(json_object_new_object(), &oom);
	aks__jset(o, "task_id", json_object_new_string(c->task_id ? c->task_id : ""), &oom);
	aks__jset(o, "status", json_object_new_string(aks__wire_status_name(c->status)), &oom);
	if (c->result)
		aks__jset(o, "result", result_json(c->result, c->session.id, &oom), &oom);
	else
		aks__jset_null(o, "result", &oom);
	aks__jset_null(o, "result_ref", &oom);
	aks__jset_str_or_null(o, "error", c->error, &oom);
	aks__jset_str_or_null(o, "error_type", c->error_type, &oom);
	aks__jset(o, "sandbox_session", aks__session_to_json(&c->session), &oom);
	if (oom) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

char *aks__wire_record_encode(const aks_wire_completion *c, const char *conversation)
{
	static const int codes[] = {200, 500, 504};
	bool oom = false;
	struct json_object *body = aks__jnew(aks__wire_completion_json(c), &oom);
	struct json_object *o = body ? aks__jnew(json_object_new_object(), &oom) : NULL;
	aks__jset(o, "request_id", json_object_new_string(c->task_id ? c->task_id : ""), &oom);
	aks__jset(o, "session_id", json_object_new_string(conversation ? conversation : ""), &oom);
	aks__jset(o, "status_code",
	          json_object_new_int(codes[c->status >= 0 && c->status <= 2 ? c->status : 1]),
	          &oom);
	aks__jset(o, "body", body, &oom);
	return dump_complete(o, oom);
}

void aks__wire_completion_free(aks_wire_completion *c)
{
	if (!c)
		return;
	free(c->task_id);
	aks_result_free(c->result);
	free(c->error);
	free(c->error_type);
	aks__session_clear(&c->session);
	free(c);
}

static aks_result *read_result(reader *rd, struct json_object *o)
{
	aks_result *r = aks__result_new(AKS_DEFAULT_STREAM_CAP, AKS_DEFAULT_FILE_CAP);
	if (!r) {
		out_of_memory(rd);
		return NULL;
	}
	const char *streams[] = {"stdout", "stderr"};
	for (int i = 0; i < 2; i++) {
		struct json_object *v = member(rd, o, streams[i], json_type_string, false);
		if (v && aks__result_write(r, i + 1, json_object_get_string(v),
		                           (size_t)json_object_get_string_len(v), NULL) < 0)
			out_of_memory(rd);
	}
	struct json_object *code = member(rd, o, "exit_code", json_type_int, false);
	if (code)
		aks__result_set_exit_code(r, json_object_get_int(code));
	struct json_object *files = member(rd, o, "output_files", json_type_array, false);
	for (size_t i = 0; files && rd->rc == AKS_OK && i < json_object_array_length(files); i++) {
		struct json_object *f = json_object_array_get_idx(files, i);
		if (!json_object_is_type(f, json_type_object)) {
			bad(rd, "%s", "'output_files' must hold objects");
			break;
		}
		char *path = dup_string(rd, f, "path", true);
		char *mime = dup_string(rd, f, "mime_type", false);
		struct json_object *c = member(rd, f, "content", json_type_string, true);
		unsigned char *data = NULL;
		size_t len = 0;
		int e = c ? aks__base64_decode(json_object_get_string(c),
		                               (size_t)json_object_get_string_len(c),
		                               AKS_BASE64_STD, &data, &len)
		          : AKS_OK;
		int kept = e || rd->rc != AKS_OK ? AKS_OK : aks__result_add_file(r, path, mime);
		if (kept == AKS_OK && !e && rd->rc == AKS_OK)
			kept = aks__result_write(r, AKS_STREAM_FILE, data, len, NULL);
		if (e == AKS_EINVAL)
			bad(rd, "'%s' of an output file is not standard base64", "content");
		else if (e || kept == AKS_ENOMEM)
			out_of_memory(rd);
		else if (kept != AKS_OK)
			bad(rd, "%s", "an output file is too large to keep");
		free(path);
		free(mime);
		free(data);
	}
	char *notice = dup_string(rd, o, "notice", false);
	if (notice && aks__result_set_notice(r, notice) < 0)
		out_of_memory(rd);
	free(notice);
	struct json_object *pd = member(rd, o, "provider_data", json_type_object, false);
	const char *pd_text = pd && json_object_object_length(pd) > 0
	                          ? aks__jtext_whole(pd, JSON_C_TO_STRING_PLAIN, WIRE_MAX_DEPTH)
	                          : "";
	if (!pd_text || (*pd_text && aks__result_set_provider_data(r, pd_text) < 0))
		out_of_memory(rd);
	if (rd->rc != AKS_OK) {
		aks_result_free(r);
		return NULL;
	}
	return r;
}

int aks__wire_completion_decode(const char *json, size_t len, aks_wire_completion **out,
                                aks_error **err)
{
	*out = NULL;
	reader rd = {err, "completion", AKS_OK};
	struct json_object *doc = parse(&rd, json, len);
	if (!doc)
		return rd.rc;
	/* A whole record, or the completion alone. */
	struct json_object *o = NULL;
	if (!json_object_object_get_ex(doc, "body", &o))
		o = doc;
	else if (!json_object_is_type(o, json_type_object))
		o = NULL, bad(&rd, "'%s' must be an object", "body");
	aks_wire_completion *c = calloc(1, sizeof(*c));
	if (!c) {
		json_object_put(doc);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	if (o) {
		c->task_id = dup_string(&rd, o, "task_id", true);
		char *status = dup_string(&rd, o, "status", true);
		c->status = status ? name_index(status_names, 3, status) : -1;
		if (status && c->status < 0)
			bad(&rd, "unknown status '%s'", status);
		free(status);
		struct json_object *res = member(&rd, o, "result", json_type_object, false);
		if (res)
			c->result = read_result(&rd, res);
		c->error = dup_string(&rd, o, "error", false);
		c->error_type = dup_string(&rd, o, "error_type", false);
		struct json_object *s = member(&rd, o, "sandbox_session", json_type_object, true);
		if (s)
			read_session(&rd, s, &c->session);
	}
	json_object_put(doc);
	if (rd.rc != AKS_OK) {
		aks__wire_completion_free(c);
		return rd.rc;
	}
	*out = c;
	return AKS_OK;
}
