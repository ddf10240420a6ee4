/*
 * plugins/e2b/e2b_wire.c - Connect's enveloped stream, envd's process events and the code
 * interpreter's lines, decoded; see e2b_wire.h.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aks_base64.h"
#include "aks_json.h"
#include "e2b_wire.h"

/* ---- Connect's enveloped stream ---- */

/* An envelope: one byte of flags, the message's length (4 bytes, big-endian), the message. */
#define ENVELOPE_HEAD 5

static bool envelope_bad(e2b_envelopes *d, const char *why)
{
	d->failed = true;
	snprintf(d->why, sizeof(d->why), "%s", why);
	return false;
}

bool e2b_envelopes_feed(e2b_envelopes *d, const char *data, size_t len, e2b_envelope_fn fn,
                        void *ctx)
{
	if (d->failed)
		return false;
	if (aks__buf_append(&d->pending, data, len) != AKS_OK)
		return envelope_bad(d, "out of memory");
	size_t at = 0;
	bool go_on = true;
	while (go_on && d->pending.len - at >= ENVELOPE_HEAD) {
		const unsigned char *h = (const unsigned char *)d->pending.data + at;
		uint32_t n =
		    (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4];
		if (h[0] & E2B_ENVELOPE_COMPRESSED)
			return envelope_bad(d, "a compressed message, which was not asked for");
		if (n > E2B_WIRE_MESSAGE_MAX)
			return envelope_bad(d, "a message longer than 4 MiB");
		if (d->pending.len - at - ENVELOPE_HEAD < n)
			break;
		/* the message in place, NUL-terminated for the JSON parser: the byte after it
		 * is saved and put back (the buffer always has its own NUL at the end) */
		char *msg = d->pending.data + at + ENVELOPE_HEAD;
		char saved = msg[n];
		msg[n] = '\0';
		go_on = fn(ctx, h[0], msg, n);
		msg[n] = saved;
		at += ENVELOPE_HEAD + n;
	}
	/* what is left moves to the front */
	memmove(d->pending.data, d->pending.data + at, d->pending.len - at);
	aks__buf_truncate(&d->pending, d->pending.len - at);
	return go_on;
}

bool e2b_envelopes_clean_end(const e2b_envelopes *d)
{
	return !d->failed && d->pending.len == 0;
}

void e2b_envelopes_free(e2b_envelopes *d)
{
	aks__buf_free(&d->pending);
}

/* ---- JSON ---- */

/* The JSON object in text[0..len); NULL when it is not one. */
static json_object *parse_object(const char *text, size_t len)
{
	if (len > INT_MAX)
		return NULL;
	json_tokener *tok = json_tokener_new();
	if (!tok)
		return NULL;
	json_object *o = json_tokener_parse_ex(tok, text, (int)len);
	size_t end = json_tokener_get_parse_end(tok);
	while (end < len && strchr(" \t\r\n", text[end]) && text[end])
		end++; /* whitespace after the value (a line's carriage return) */
	bool whole = json_tokener_get_error(tok) == json_tokener_success && end == len;
	json_tokener_free(tok);
	if (!whole || !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

/* A protobuf JSON field: lowerCamelCase as Connect writes it, or the proto name. */
static json_object *field(json_object *o, const char *camel, const char *proto)
{
	json_object *v = aks__jget(o, camel);
	return v ? v : aks__jget(o, proto);
}

/* A protobuf JSON integer: a number, or a number in a string (64-bit fields). */
static bool int_field(json_object *v, int64_t lo, int64_t hi, int64_t *out)
{
	if (!v) {
		*out = 0; /* proto3 leaves zero out */
		return true;
	}
	int64_t n;
	if (json_object_is_type(v, json_type_int)) {
		n = json_object_get_int64(v);
	} else if (json_object_is_type(v, json_type_string)) {
		const char *s = json_object_get_string(v);
		char *end;
		n = strtoll(s, &end, 10);
		if (!*s || *end)
			return false;
	} else {
		return false;
	}
	if (n < lo || n > hi)
		return false;
	*out = n;
	return true;
}

/* An optional string field: absent is NULL, anything but a string is malformed. */
static bool string_field(json_object *o, const char *name, const char **out)
{
	json_object *v = aks__jget(o, name);
	*out = NULL;
	if (!v)
		return true;
	if (!json_object_is_type(v, json_type_string))
		return false;
	*out = json_object_get_string(v);
	return true;
}

/* ---- envd's process events ---- */

static bool event_data(json_object *data, e2b_event *ev, const char **why)
{
	json_object *out = aks__jget(data, "stdout"), *err = aks__jget(data, "stderr");
	json_object *chunk = out ? out : err;
	if (!chunk) {
		ev->kind = E2B_EVENT_OTHER; /* pty output: never asked for */
		return true;
	}
	if (!json_object_is_type(chunk, json_type_string)) {
		*why = "output that is not a string";
		return false;
	}
	ev->kind = out ? E2B_EVENT_STDOUT : E2B_EVENT_STDERR;
	const char *b64 = json_object_get_string(chunk);
	if (aks__base64_decode(b64, strlen(b64), AKS_BASE64_LOOSE, &ev->data, &ev->data_len) !=
	    AKS_OK) {
		*why = "output that is not base64";
		return false;
	}
	return true;
}

static bool event_end(json_object *end, e2b_event *ev, const char **why)
{
	int64_t code;
	json_object *exited = aks__jget(end, "exited");
	if (!int_field(field(end, "exitCode", "exit_code"), INT32_MIN, INT32_MAX, &code) ||
	    (exited && !json_object_is_type(exited, json_type_boolean)) ||
	    !string_field(end, "status", &ev->status) || !string_field(end, "error", &ev->error)) {
		*why = "an end event with fields of the wrong type";
		return false;
	}
	ev->kind = E2B_EVENT_END;
	ev->exit_code = (int)code;
	ev->exited = exited && json_object_get_boolean(exited);
	return true;
}

bool e2b_event_parse(const char *json, size_t len, e2b_event *ev, json_object **root,
                     const char **why)
{
	memset(ev, 0, sizeof(*ev));
	*root = parse_object(json, len);
	json_object *event = aks__jget(*root, "event");
	if (!event || !json_object_is_type(event, json_type_object)) {
		*why = *root ? "a message without an event" : "a message that is not a JSON object";
		json_object_put(*root);
		*root = NULL;
		return false;
	}
	json_object *v;
	bool ok = true;
	*why = NULL;
	if ((v = aks__jget(event, "start"))) {
		int64_t pid;
		ok = int_field(field(v, "pid", "pid"), 0, UINT32_MAX, &pid);
		ev->kind = E2B_EVENT_START;
		ev->pid = (uint32_t)pid;
		if (!ok)
			*why = "a start event without a process id";
	} else if ((v = aks__jget(event, "data"))) {
		ok = event_data(v, ev, why);
	} else if ((v = aks__jget(event, "end"))) {
		ok = event_end(v, ev, why);
	} else if (aks__jget(event, "keepalive")) {
		ev->kind = E2B_EVENT_KEEPALIVE;
	} else {
		ev->kind = E2B_EVENT_OTHER;
	}
	if (!ok) {
		free(ev->data);
		ev->data = NULL;
		json_object_put(*root);
		*root = NULL;
	}
	return ok;
}

bool e2b_end_parse(const char *json, size_t len, json_object **root, const char **code,
                   const char **message)
{
	*code = *message = NULL;
	*root = parse_object(json, len);
	if (!*root)
		return false;
	json_object *error = aks__jget(*root, "error");
	if (!error)
		return true;
	if (!json_object_is_type(error, json_type_object) || !string_field(error, "code", code) ||
	    !string_field(error, "message", message) || !*code) {
		json_object_put(*root);
		*root = NULL;
		*code = *message = NULL;
		return false;
	}
	return true;
}

/* ---- the code interpreter's lines ---- */

bool e2b_lines_feed(e2b_lines *d, const char *data, size_t len, e2b_line_fn fn, void *ctx)
{
	if (d->failed)
		return false;
	bool go_on = true;
	while (go_on && len) {
		const char *nl = memchr(data, '\n', len);
		size_t n = nl ? (size_t)(nl - data) : len;
		if (d->pending.len + n > E2B_WIRE_MESSAGE_MAX) {
			d->failed = true;
			snprintf(d->why, sizeof(d->why), "a line longer than 4 MiB");
			return false;
		}
		if (aks__buf_append(&d->pending, data, n) != AKS_OK) {
			d->failed = true;
			snprintf(d->why, sizeof(d->why), "out of memory");
			return false;
		}
		data += n;
		len -= n;
		if (!nl)
			break;
		data++;
		len--;
		if (d->pending.len)
			go_on = fn(ctx, d->pending.data, d->pending.len);
		aks__buf_truncate(&d->pending, 0);
	}
	return go_on;
}

bool e2b_lines_finish(e2b_lines *d, e2b_line_fn fn, void *ctx)
{
	if (d->failed || d->pending.len == 0)
		return !d->failed;
	bool go_on = fn(ctx, d->pending.data, d->pending.len);
	aks__buf_truncate(&d->pending, 0);
	return go_on;
}

void e2b_lines_free(e2b_lines *d)
{
	aks__buf_free(&d->pending);
}

bool e2b_output_parse(const char *line, size_t len, e2b_output *out, json_object **root)
{
	memset(out, 0, sizeof(*out));
	*root = parse_object(line, len);
	const char *type = aks__jstr(*root, "type");
	bool ok = type != NULL;
	if (ok && (strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0)) {
		json_object *text = aks__jget(*root, "text");
		ok = text && json_object_is_type(text, json_type_string);
		if (ok) {
			out->kind = type[3] == 'o' ? E2B_OUTPUT_STDOUT : E2B_OUTPUT_STDERR;
			out->text = json_object_get_string(text);
			out->text_len = (size_t)json_object_get_string_len(text);
		}
	} else if (ok && strcmp(type, "error") == 0) {
		out->kind = E2B_OUTPUT_ERROR;
		ok = string_field(*root, "name", &out->name) &&
		     string_field(*root, "value", &out->value) &&
		     string_field(*root, "traceback", &out->traceback);
	} else if (ok && strcmp(type, "end_of_execution") == 0) {
		out->kind = E2B_OUTPUT_END;
	} else if (ok) {
		out->kind = E2B_OUTPUT_OTHER;
	}
	if (!ok) {
		json_object_put(*root);
		*root = NULL;
	}
	return ok;
}
