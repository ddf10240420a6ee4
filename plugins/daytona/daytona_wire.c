/*
 * plugins/daytona/daytona_wire.c - a toolbox session command's answer read (daytona_wire.h).
 */
#include <stdint.h>
#include <string.h>

#include <json-c/json.h>

#include "aks_json.h"
#include "daytona_wire.h"

#define MARKER_LEN 3

/* The stream a marker at s (n bytes left) names: 1 stdout, 2 stderr, 0 none. */
static int marker_at(const char *s, size_t n)
{
	if (n < MARKER_LEN)
		return 0;
	for (int stream = 1; stream <= 2; stream++)
		if (s[0] == stream && s[1] == stream && s[2] == stream)
			return stream;
	return 0;
}

bool dt_demux(const char *log, size_t len, aks_buf *out, aks_buf *err)
{
	aks_buf *to = out;
	size_t start = 0, i = 0;
	while (i < len) {
		int stream = marker_at(log + i, len - i);
		if (!stream) {
			i++;
			continue;
		}
		if (i > start && aks__buf_append(to, log + start, i - start) != AKS_OK)
			return false;
		to = stream == 1 ? out : err;
		i += MARKER_LEN;
		start = i;
	}
	return len == start || aks__buf_append(to, log + start, len - start) == AKS_OK;
}

/* A string member's value and length (json-c keeps NULs in strings); NULL when it is not a
 * string (absent, null). */
static const char *member(json_object *o, const char *key, size_t *len)
{
	json_object *v = aks__jget(o, key);
	if (!json_object_is_type(v, json_type_string))
		return NULL;
	*len = (size_t)json_object_get_string_len(v);
	return json_object_get_string(v);
}

void dt_exec_answer_free(dt_exec_answer *a)
{
	aks__buf_free(&a->out);
	aks__buf_free(&a->err);
}

bool dt_exec_answer_parse(const char *json, size_t len, dt_exec_answer *a, const char **why)
{
	a->exit_code = -1;
	json_tokener *tok = len <= INT32_MAX ? json_tokener_new() : NULL;
	json_object *root = tok ? json_tokener_parse_ex(tok, json, (int)len) : NULL;
	/* one whole object, and nothing after it but white space */
	size_t end = tok && json_tokener_get_error(tok) == json_tokener_success
	                 ? json_tokener_get_parse_end(tok)
	                 : 0;
	while (end && end < len && strchr(" \t\r\n", json[end]) && json[end])
		end++;
	bool whole = end == len && json_object_is_type(root, json_type_object);
	bool no_memory = !tok && len <= INT32_MAX;
	json_tokener_free(tok);
	if (!whole) {
		json_object_put(root);
		*why = no_memory ? "out of memory" : "not a JSON object";
		return false;
	}
	json_object *code = aks__jget(root, "exitCode");
	if (json_object_is_type(code, json_type_int)) {
		int64_t c = json_object_get_int64(code);
		a->exit_code = c < -1 || c > 255 ? -1 : (int)c;
	}
	size_t on = 0, en = 0, rn = 0;
	const char *so = member(root, "stdout", &on), *se = member(root, "stderr", &en);
	const char *raw = member(root, "output", &rn);
	bool ok;
	if (so || se) /* split by the toolbox */
		ok = (!so || aks__buf_append(&a->out, so, on) == AKS_OK) &&
		     (!se || aks__buf_append(&a->err, se, en) == AKS_OK);
	else /* the raw log, split here; without markers all of it is stdout */
		ok = !raw || dt_demux(raw, rn, &a->out, &a->err);
	json_object_put(root);
	if (!ok) {
		dt_exec_answer_free(a);
		*why = "out of memory";
	}
	return ok;
}
