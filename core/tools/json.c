/*
 * core/tools/json.c - the tools' JSON text: a writer that matches Python's
 * json.dumps byte for byte, the UTF-8 decoding and truncation the original
 * applies to program output, and each tool's result shape.
 */
#include "config.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "tools/json.h"
#include "util/util.h"

/* ---- UTF-8 ------------------------------------------------------------------ */

enum { UTF8_OK, UTF8_INVALID, UTF8_INCOMPLETE };

/*
 * Decodes the sequence at p (n > 0 bytes left). On UTF8_OK *cp is the code
 * point; otherwise the *used bytes are one maximal invalid subpart, which
 * Python's errors="replace" turns into a single U+FFFD (UTF8_INCOMPLETE: a
 * valid prefix that the end of the input cut short).
 */
static int utf8_decode(const unsigned char *p, size_t n, uint32_t *cp, size_t *used)
{
	unsigned char b = p[0];
	size_t need;
	unsigned char lo = 0x80, hi = 0xBF; /* the range of the second byte */
	uint32_t c;
	if (b < 0x80) {
		*cp = b;
		*used = 1;
		return UTF8_OK;
	} else if (b >= 0xC2 && b <= 0xDF) {
		need = 1;
		c = b & 0x1F;
	} else if (b >= 0xE0 && b <= 0xEF) {
		need = 2;
		c = b & 0x0F;
		if (b == 0xE0)
			lo = 0xA0; /* no overlong forms */
		else if (b == 0xED)
			hi = 0x9F; /* no surrogates */
	} else if (b >= 0xF0 && b <= 0xF4) {
		need = 3;
		c = b & 0x07;
		if (b == 0xF0)
			lo = 0x90;
		else if (b == 0xF4)
			hi = 0x8F; /* nothing above U+10FFFF */
	} else {
		*used = 1;
		return UTF8_INVALID;
	}
	for (size_t i = 1; i <= need; i++) {
		if (i >= n) {
			*used = i;
			return UTF8_INCOMPLETE;
		}
		unsigned char lo_i = i == 1 ? lo : 0x80, hi_i = i == 1 ? hi : 0xBF;
		if (p[i] < lo_i || p[i] > hi_i) {
			*used = i;
			return UTF8_INVALID;
		}
		c = (c << 6) | (p[i] & 0x3F);
	}
	*cp = c;
	*used = need + 1;
	return UTF8_OK;
}

static int utf8_encode(aks_buf *b, uint32_t cp)
{
	char s[4];
	size_t n;
	if (cp < 0x80) {
		s[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		s[0] = (char)(0xC0 | (cp >> 6));
		s[1] = (char)(0x80 | (cp & 0x3F));
		n = 2;
	} else if (cp < 0x10000) {
		s[0] = (char)(0xE0 | (cp >> 12));
		s[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		s[2] = (char)(0x80 | (cp & 0x3F));
		n = 3;
	} else {
		s[0] = (char)(0xF0 | (cp >> 18));
		s[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
		s[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
		s[3] = (char)(0x80 | (cp & 0x3F));
		n = 4;
	}
	return aks__buf_append(b, s, n);
}

/* ---- the writer ------------------------------------------------------------- */

/*
 * Python's repr(float): the shortest digit string that reads back as the same
 * double, laid out as Python does: positional when the decimal exponent is in
 * [-4, 16), with ".0" added to a whole number; otherwise d[.ddd]e±XX with at
 * least two exponent digits.
 *
 * The digits: for 1, 2, ... 17 significant digits, printf's correctly rounded
 * mantissa M (an integer, value ~ M x 10^e) is tried, and when it does not
 * read back, its neighbours M+1 and M-1: next to a power of two the interval
 * of decimals that read back is lopsided, so the nearest p-digit decimal can
 * miss while the one on the wider side hits (2^-24 is 5.960464477539063e-08,
 * not ...062). The first hit is the shortest, and of that length the nearest,
 * as Python's (David Gay's) algorithm picks. printf and strtod only see
 * strings without a decimal point, so the locale cannot change the result.
 */
static bool reads_back(unsigned long long m, int e, double want)
{
	char tmp[48];
	snprintf(tmp, sizeof(tmp), "%llue%d", m, e);
	return strtod(tmp, NULL) == want;
}

void aks__json_format_double(double value, char *buf, size_t size)
{
	if (isnan(value)) {
		snprintf(buf, size, "NaN");
		return;
	}
	if (isinf(value)) {
		snprintf(buf, size, "%s", value < 0 ? "-Infinity" : "Infinity");
		return;
	}
	if (value == 0) {
		snprintf(buf, size, "%s", signbit(value) ? "-0.0" : "0.0");
		return;
	}
	double mag = fabs(value);
	unsigned long long m = 0;
	int e = 0;
	for (int prec = 1; prec <= 17; prec++) {
		char tmp[48], digits[24];
		snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, mag);
		/* tmp is D[<point>DDD]e±XX: collect the digits and the exponent. */
		size_t nd = 0;
		const char *x = tmp;
		for (; *x && *x != 'e'; x++)
			if (*x >= '0' && *x <= '9')
				digits[nd++] = *x;
		digits[nd] = '\0';
		m = strtoull(digits, NULL, 10);
		e = atoi(x + 1) - (prec - 1);
		if (reads_back(m, e, mag))
			break;
		if (reads_back(m + 1, e, mag)) {
			m++;
			break;
		}
		if (m > 1 && reads_back(m - 1, e, mag)) {
			m--;
			break;
		}
	}
	char digits[24];
	size_t nd = (size_t)snprintf(digits, sizeof(digits), "%llu", m);
	int exp10 = e + (int)nd - 1; /* of the first digit */
	while (nd > 1 && digits[nd - 1] == '0')
		digits[--nd] = '\0';
	int decpt = exp10 + 1; /* value = 0.DIGITS x 10^decpt */
	char out[40];
	size_t n = 0;
#define PUT(c) (out[n++] = (c))
	if (value < 0)
		PUT('-');
	if (decpt > -4 && decpt <= 16) {
		if (decpt <= 0) {
			PUT('0');
			PUT('.');
			for (int i = decpt; i < 0; i++)
				PUT('0');
			for (size_t i = 0; i < nd; i++)
				PUT(digits[i]);
		} else {
			for (size_t i = 0; i < nd || i < (size_t)decpt; i++) {
				if (i == (size_t)decpt)
					PUT('.');
				PUT(i < nd ? digits[i] : '0');
			}
			if ((size_t)decpt >= nd) {
				PUT('.');
				PUT('0');
			}
		}
		out[n] = '\0';
	} else {
		PUT(digits[0]);
		if (nd > 1) {
			PUT('.');
			for (size_t i = 1; i < nd; i++)
				PUT(digits[i]);
		}
		snprintf(out + n, sizeof(out) - n, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
	}
#undef PUT
	snprintf(buf, size, "%s", out);
}

/* A JSON string literal with ensure_ascii escaping; invalid UTF-8 is U+FFFD. */
static int write_string(aks_buf *b, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	int rc = aks__buf_append(b, "\"", 1);
	size_t i = 0;
	while (rc == AKS_OK && i < len) {
		/* Runs of plain printable ASCII go out in one piece. */
		size_t run = i;
		while (run < len && p[run] >= 0x20 && p[run] < 0x7F && p[run] != '"' &&
		       p[run] != '\\')
			run++;
		if (run > i) {
			rc = aks__buf_append(b, p + i, run - i);
			i = run;
			continue;
		}
		uint32_t cp = 0xFFFD;
		size_t used;
		utf8_decode(p + i, len - i, &cp, &used); /* on failure cp stays U+FFFD */
		i += used;
		const char *esc = NULL;
		switch (cp) {
		case '"':
			esc = "\\\"";
			break;
		case '\\':
			esc = "\\\\";
			break;
		case '\n':
			esc = "\\n";
			break;
		case '\r':
			esc = "\\r";
			break;
		case '\t':
			esc = "\\t";
			break;
		case '\b':
			esc = "\\b";
			break;
		case '\f':
			esc = "\\f";
			break;
		}
		if (esc) {
			rc = aks__buf_puts(b, esc);
			continue;
		}
		uint32_t units[2] = {cp, 0};
		int count = 1;
		if (cp > 0xFFFF) {
			units[0] = 0xD800 | ((cp - 0x10000) >> 10);
			units[1] = 0xDC00 | ((cp - 0x10000) & 0x3FF);
			count = 2;
		}
		for (int u = 0; u < count && rc == AKS_OK; u++) {
			char e[6] = {'\\',
			             'u',
			             hex[(units[u] >> 12) & 0xF],
			             hex[(units[u] >> 8) & 0xF],
			             hex[(units[u] >> 4) & 0xF],
			             hex[units[u] & 0xF]};
			rc = aks__buf_append(b, e, sizeof(e));
		}
	}
	return rc == AKS_OK ? aks__buf_append(b, "\"", 1) : rc;
}

static int write_value(aks_buf *b, struct json_object *obj)
{
	char num[48];
	switch (json_object_get_type(obj)) {
	case json_type_null:
		return aks__buf_puts(b, "null");
	case json_type_boolean:
		return aks__buf_puts(b, json_object_get_boolean(obj) ? "true" : "false");
	case json_type_int: {
		int64_t v = json_object_get_int64(obj);
		/* json-c saturates a uint64 above INT64_MAX to INT64_MAX as int64. */
		if (v == INT64_MAX)
			return aks__buf_printf(b, "%" PRIu64, json_object_get_uint64(obj));
		return aks__buf_printf(b, "%" PRId64, v);
	}
	case json_type_double:
		aks__json_format_double(json_object_get_double(obj), num, sizeof(num));
		return aks__buf_puts(b, num);
	case json_type_string:
		return write_string(b, json_object_get_string(obj),
		                    (size_t)json_object_get_string_len(obj));
	case json_type_array: {
		size_t n = json_object_array_length(obj);
		int rc = aks__buf_puts(b, "[");
		for (size_t i = 0; i < n && rc == AKS_OK; i++) {
			if (i)
				rc = aks__buf_puts(b, ", ");
			if (rc == AKS_OK)
				rc = write_value(b, json_object_array_get_idx(obj, i));
		}
		return rc == AKS_OK ? aks__buf_puts(b, "]") : rc;
	}
	case json_type_object: {
		int rc = aks__buf_puts(b, "{");
		bool first = true;
		json_object_object_foreach(obj, key, val)
		{
			if (rc != AKS_OK)
				break;
			if (!first)
				rc = aks__buf_puts(b, ", ");
			first = false;
			if (rc == AKS_OK)
				rc = write_string(b, key, strlen(key));
			if (rc == AKS_OK)
				rc = aks__buf_puts(b, ": ");
			if (rc == AKS_OK)
				rc = write_value(b, val);
		}
		return rc == AKS_OK ? aks__buf_puts(b, "}") : rc;
	}
	}
	return aks__buf_puts(b, "null");
}

char *aks__json_dumps(struct json_object *obj)
{
	aks_buf b = AKS_BUF_INIT;
	if (write_value(&b, obj) != AKS_OK) {
		aks__buf_free(&b);
		return NULL;
	}
	return aks__buf_steal(&b);
}

/* ---- truncation ------------------------------------------------------------- */

int aks__truncate_chars(const char *utf8, size_t len, size_t max_chars, uint64_t dropped_bytes,
                        aks_cut_text *out)
{
	const unsigned char *p = (const unsigned char *)utf8;
	aks_buf b = AKS_BUF_INIT;
	size_t chars = 0, i = 0;
	uint64_t total = 0;
	int rc = AKS_OK;
	memset(out, 0, sizeof(*out));
	while (i < len && rc == AKS_OK) {
		uint32_t cp = 0xFFFD;
		size_t used;
		int st = utf8_decode(p + i, len - i, &cp, &used);
		if (st == UTF8_INCOMPLETE && dropped_bytes > 0) {
			/* The cap cut this character in two; its bytes count as dropped. */
			total += used;
			break;
		}
		i += used;
		total++;
		if (chars < max_chars) {
			rc = st == UTF8_OK && cp < 0x80 ? aks__buf_append(&b, p + i - used, 1)
			     : st == UTF8_OK            ? aks__buf_append(&b, p + i - used, used)
			                                : utf8_encode(&b, 0xFFFD);
			chars++;
		}
	}
	size_t text_len = b.len;
	char *text = rc == AKS_OK ? aks__buf_steal(&b) : NULL;
	if (!text) {
		aks__buf_free(&b);
		return AKS_ENOMEM;
	}
	text[text_len] = '\0'; /* aks__buf_steal leaves an empty buffer unterminated */
	out->text = text;
	out->len = text_len;
	out->chars = chars;
	out->total = total + dropped_bytes;
	return AKS_OK;
}

void aks__cut_text_free(aks_cut_text *t)
{
	if (!t)
		return;
	free(t->text);
	memset(t, 0, sizeof(*t));
}

/* ---- result shapes ---------------------------------------------------------- */

/* Adds key: v (taking it); false, with v released, on ENOMEM (v NULL). */
static bool add_obj(struct json_object *o, const char *key, struct json_object *v)
{
	if (!v)
		return false;
	if (json_object_object_add(o, key, v) != 0) {
		json_object_put(v);
		return false;
	}
	return true;
}

static bool add_null(struct json_object *o, const char *key)
{
	return json_object_object_add(o, key, NULL) == 0;
}

/* Adds key: string, or null for NULL. */
static bool add_str(struct json_object *o, const char *key, const char *value)
{
	return value ? add_obj(o, key, json_object_new_string(value)) : add_null(o, key);
}

/* Dumps and releases obj; NULL when building it failed (ok false) or on ENOMEM. */
static char *finish(struct json_object *obj, bool ok)
{
	char *text = ok && obj ? aks__json_dumps(obj) : NULL;
	json_object_put(obj);
	return text;
}

/* A bounded text field; records its full length in *cuts when it was cut. */
static bool add_text(struct json_object *o, const char *key, const char *data, size_t len,
                     uint64_t dropped, size_t max_chars, struct json_object **cuts)
{
	aks_cut_text t;
	if (aks__truncate_chars(data ? data : "", data ? len : 0, max_chars, dropped, &t) != AKS_OK)
		return false;
	bool ok =
	    t.len <= INT_MAX && add_obj(o, key, json_object_new_string_len(t.text, (int)t.len));
	if (ok && aks__cut_text_is_cut(&t)) {
		if (!*cuts)
			*cuts = json_object_new_object();
		ok = *cuts && add_obj(*cuts, key, json_object_new_int64((int64_t)t.total));
	}
	aks__cut_text_free(&t);
	return ok;
}

/* The "truncated" key, last, when something was cut (takes cuts). */
static bool add_cuts(struct json_object *o, struct json_object *cuts)
{
	return !cuts || add_obj(o, "truncated", cuts);
}

void aks__tool_output_from_result(const aks_result *r, aks_tool_output *o)
{
	memset(o, 0, sizeof(*o));
	o->out.data = aks_result_get_stdout(r, &o->out.len);
	o->err.data = aks_result_get_stderr(r, &o->err.len);
	uint64_t total = aks_result_get_stream_total(r, AKS_STREAM_STDOUT);
	o->out.dropped = total > o->out.len ? total - o->out.len : 0;
	total = aks_result_get_stream_total(r, AKS_STREAM_STDERR);
	o->err.dropped = total > o->err.len ? total - o->err.len : 0;
	o->exit_code = aks_result_get_exit_code(r);
	o->notice = aks_result_get_notice(r);
}

char *aks__tool_json_run(const aks_tool_output *o, const char *session_id, size_t max_chars)
{
	struct json_object *obj = json_object_new_object(), *cuts = NULL;
	bool ok =
	    obj &&
	    add_text(obj, "stdout", o->out.data, o->out.len, o->out.dropped, max_chars, &cuts) &&
	    add_text(obj, "stderr", o->err.data, o->err.len, o->err.dropped, max_chars, &cuts) &&
	    add_obj(obj, "exit_code", json_object_new_int(o->exit_code)) &&
	    add_str(obj, "sandbox_session_id", session_id ? session_id : "") &&
	    (!o->notice || add_str(obj, "notice", o->notice));
	if (ok)
		ok = add_cuts(obj, cuts);
	else
		json_object_put(cuts);
	return finish(obj, ok);
}

char *aks__tool_json_pending(const char *task_id, const char *session_id, const char *notice)
{
	struct json_object *obj = json_object_new_object();
	bool ok = obj && add_str(obj, "task_id", task_id) && add_str(obj, "status", "pending") &&
	          add_str(obj, "sandbox_session_id", session_id ? session_id : "") &&
	          (!notice || add_str(obj, "notice", notice));
	return finish(obj, ok);
}

char *aks__tool_json_written(const char *path, const char *session_id, const char *notice)
{
	struct json_object *obj = json_object_new_object();
	bool ok = obj && add_str(obj, "path", path) &&
	          add_obj(obj, "written", json_object_new_boolean(1)) &&
	          add_str(obj, "sandbox_session_id", session_id ? session_id : "") &&
	          (!notice || add_str(obj, "notice", notice));
	return finish(obj, ok);
}

char *aks__tool_json_read(const char *path, const void *content, size_t len, uint64_t dropped,
                          const char *session_id, const char *notice, size_t max_chars)
{
	struct json_object *obj = json_object_new_object(), *cuts = NULL;
	bool ok = obj && add_str(obj, "path", path) &&
	          add_text(obj, "content", content, len, dropped, max_chars, &cuts) &&
	          add_str(obj, "sandbox_session_id", session_id ? session_id : "") &&
	          (!notice || add_str(obj, "notice", notice));
	if (ok)
		ok = add_cuts(obj, cuts);
	else
		json_object_put(cuts);
	return finish(obj, ok);
}

struct json_object *aks__tool_summary_new(const aks_tool_output *o, const char *error,
                                          const char *notice, size_t max_chars)
{
	static const aks_tool_output none = {{NULL, 0, 0}, {NULL, 0, 0}, 0, NULL};
	const aks_tool_output *src = o ? o : &none;
	struct json_object *obj = json_object_new_object(), *cuts = NULL;
	bool ok = obj &&
	          add_text(obj, "stdout", src->out.data, src->out.len, src->out.dropped, max_chars,
	                   &cuts) &&
	          add_text(obj, "stderr", src->err.data, src->err.len, src->err.dropped, max_chars,
	                   &cuts) &&
	          (o ? add_obj(obj, "exit_code", json_object_new_int(o->exit_code))
	             : add_null(obj, "exit_code")) &&
	          add_str(obj, "error", error) && add_str(obj, "notice", notice);
	if (ok)
		ok = add_cuts(obj, cuts);
	else
		json_object_put(cuts);
	if (!ok) {
		json_object_put(obj);
		return NULL;
	}
	return obj;
}

char *aks__tool_json_task_unknown(const char *task_id)
{
	struct json_object *obj = json_object_new_object();
	bool ok = obj && add_str(obj, "task_id", task_id) && add_str(obj, "status", "unknown");
	return finish(obj, ok);
}

char *aks__tool_json_task(const char *task_id, const char *status, const char *session_id,
                          struct json_object *summary)
{
	struct json_object *obj = json_object_new_object();
	bool ok = obj && add_str(obj, "task_id", task_id) && add_str(obj, "status", status) &&
	          add_str(obj, "sandbox_session_id", session_id ? session_id : "") &&
	          (!summary || add_obj(obj, "result", json_object_get(summary)));
	return finish(obj, ok);
}

char *aks__tool_json_sessions(const aks_tool_session_row *rows, size_t count)
{
	struct json_object *obj = json_object_new_object(), *list = json_object_new_array();
	bool ok = obj && list;
	for (size_t i = 0; ok && i < count; i++) {
		struct json_object *row = json_object_new_object();
		ok =
		    row && add_str(row, "sandbox_session_id", rows[i].sandbox_session_id) &&
		    add_str(row, "name", rows[i].name) &&
		    add_str(row, "profile", rows[i].profile) &&
		    add_str(row, "status", rows[i].status) &&
		    add_obj(row, "last_used_at", json_object_new_double(rows[i].last_used_at)) &&
		    (!rows[i].egress_refused ||
		     add_obj(row, "egress_refused", json_object_new_int64(rows[i].egress_refused)));
		if (ok && json_object_array_add(list, row) != 0)
			ok = false;
		if (!ok)
			json_object_put(row);
	}
	if (ok) {
		ok = add_obj(obj, "sessions", list);
		list = NULL;
	}
	json_object_put(list);
	return finish(obj, ok);
}

char *aks__tool_json_new_session(const char *session_id, const char *name, const char *profile)
{
	struct json_object *obj = json_object_new_object();
	bool ok = obj && add_str(obj, "sandbox_session_id", session_id) &&
	          add_str(obj, "name", name) && add_str(obj, "profile", profile);
	return finish(obj, ok);
}

char *aks__tool_json_destroyed(const char *session_id, bool destroyed)
{
	struct json_object *obj = json_object_new_object();
	bool ok = obj && add_str(obj, "sandbox_session_id", session_id) &&
	          add_obj(obj, "destroyed", json_object_new_boolean(destroyed));
	return finish(obj, ok);
}

char *aks__tool_json_error(const char *message, const char *session_id)
{
	struct json_object *obj = json_object_new_object();
	bool ok = obj && add_str(obj, "error", message ? message : "") &&
	          add_str(obj, "sandbox_session_id", session_id ? session_id : "");
	return finish(obj, ok);
}

char *aks__tool_json_disabled(void)
{
	struct json_object *obj = json_object_new_object();
	bool ok = obj && add_str(obj, "error", "sandbox capability is disabled");
	return finish(obj, ok);
}
