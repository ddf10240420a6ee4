/*
 * tests/unit/test_e2b_wire.c - the e2b plugin's decoding of what a sandbox's services send,
 * without a network: Connect envelopes whole and cut at every byte, envd's process events as
 * Connect's JSON writes them (proto3 leaves zeros out), the end of a stream with and without
 * an error, and the code interpreter's lines; each malformed or oversized input refused.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "e2b_wire.h"

/* ---- envelopes ---- */

static void envelope(aks_buf *b, unsigned flags, const char *json)
{
	size_t n = strlen(json);
	unsigned char head[5] = {(unsigned char)flags, (unsigned char)(n >> 24),
	                         (unsigned char)(n >> 16), (unsigned char)(n >> 8),
	                         (unsigned char)n};
	aks__buf_append(b, head, 5);
	aks__buf_append(b, json, n);
}

typedef struct seen {
	aks_buf log; /* "flags:json|" per envelope */
	int count;
	int stop_after;
} seen;

static bool record(void *ctx, unsigned flags, const char *json, size_t len)
{
	seen *s = ctx;
	assert_int_equal(json[len], '\0');
	aks__buf_printf(&s->log, "%u:%s|", flags, json);
	s->count++;
	return !(s->stop_after && s->count == s->stop_after);
}

static const char *stream_text(aks_buf *b)
{
	envelope(b, 0, "{\"event\":{\"start\":{\"pid\":42}}}");
	envelope(b, 0, "{\"event\":{\"data\":{\"stdout\":\"aGVsbG8K\"}}}");
	envelope(b, 0, "{}");
	envelope(b, E2B_ENVELOPE_END_STREAM, "{}");
	return "0:{\"event\":{\"start\":{\"pid\":42}}}|0:{\"event\":{\"data\":{\"stdout\":"
	       "\"aGVsbG8K\"}}}|0:{}|2:{}|";
}

static void test_envelopes_in_any_pieces(void **state)
{
	(void)state;
	aks_buf in = AKS_BUF_INIT;
	const char *want = stream_text(&in);
	/* whole, and cut in two at every byte */
	for (size_t cut = 0; cut <= in.len; cut++) {
		e2b_envelopes d = {0};
		seen s = {0};
		assert_true(e2b_envelopes_feed(&d, in.data, cut, record, &s));
		assert_true(e2b_envelopes_feed(&d, in.data + cut, in.len - cut, record, &s));
		assert_string_equal(s.log.data, want);
		assert_true(e2b_envelopes_clean_end(&d));
		e2b_envelopes_free(&d);
		aks__buf_free(&s.log);
	}
	/* a byte at a time */
	e2b_envelopes d = {0};
	seen s = {0};
	for (size_t i = 0; i < in.len; i++)
		assert_true(e2b_envelopes_feed(&d, in.data + i, 1, record, &s));
	assert_string_equal(s.log.data, want);
	e2b_envelopes_free(&d);
	aks__buf_free(&s.log);
	/* cut short: not a clean end */
	e2b_envelopes t = {0};
	seen u = {0};
	assert_true(e2b_envelopes_feed(&t, in.data, in.len - 1, record, &u));
	assert_false(e2b_envelopes_clean_end(&t));
	e2b_envelopes_free(&t);
	aks__buf_free(&u.log);
	aks__buf_free(&in);
}

static void test_envelopes_refused(void **state)
{
	(void)state;
	/* compressed: never asked for */
	aks_buf in = AKS_BUF_INIT;
	envelope(&in, E2B_ENVELOPE_COMPRESSED, "{}");
	e2b_envelopes d = {0};
	seen s = {0};
	assert_false(e2b_envelopes_feed(&d, in.data, in.len, record, &s));
	assert_int_equal(s.count, 0);
	assert_non_null(strstr(d.why, "compressed"));
	/* and nothing after it is read */
	assert_false(e2b_envelopes_feed(&d, "\0\0\0\0\2{}", 7, record, &s));
	assert_int_equal(s.count, 0);
	e2b_envelopes_free(&d);
	/* a length past the bound is refused from its head, before any of it arrives */
	e2b_envelopes big = {0};
	const char head[5] = {0, 0x7f, 0, 0, 0};
	assert_false(e2b_envelopes_feed(&big, head, 5, record, &s));
	assert_non_null(strstr(big.why, "4 MiB"));
	assert_true(big.pending.len <= 5);
	e2b_envelopes_free(&big);
	/* the callback stops the stream */
	aks_buf two = AKS_BUF_INIT;
	envelope(&two, 0, "{}");
	envelope(&two, 0, "{}");
	e2b_envelopes e = {0};
	seen one = {.stop_after = 1};
	assert_false(e2b_envelopes_feed(&e, two.data, two.len, record, &one));
	assert_int_equal(one.count, 1);
	e2b_envelopes_free(&e);
	aks__buf_free(&one.log);
	aks__buf_free(&two);
	aks__buf_free(&in);
	aks__buf_free(&s.log);
}

/* ---- process events ---- */

static void parse_ok(const char *json, e2b_event *ev, json_object **root)
{
	const char *why = NULL;
	if (!e2b_event_parse(json, strlen(json), ev, root, &why))
		fail_msg("refused %s: %s", json, why ? why : "?");
}

static void parse_bad(const char *json, const char *why_has)
{
	e2b_event ev;
	json_object *root = (json_object *)1;
	const char *why = NULL;
	assert_false(e2b_event_parse(json, strlen(json), &ev, &root, &why));
	assert_null(root);
	assert_null(ev.data);
	assert_non_null(why);
	if (!strstr(why, why_has))
		fail_msg("%s: '%s' does not say '%s'", json, why, why_has);
}

static void test_events(void **state)
{
	(void)state;
	e2b_event ev;
	json_object *root;
	parse_ok("{\"event\":{\"start\":{\"pid\":4242}}}", &ev, &root);
	assert_int_equal(ev.kind, E2B_EVENT_START);
	assert_int_equal(ev.pid, 4242);
	json_object_put(root);
	/* output is base64 of any bytes */
	parse_ok("{\"event\":{\"data\":{\"stderr\":\"AAEC/w==\"}}}", &ev, &root);
	assert_int_equal(ev.kind, E2B_EVENT_STDERR);
	assert_int_equal(ev.data_len, 4);
	assert_memory_equal(ev.data, "\0\1\2\377", 4);
	free(ev.data);
	json_object_put(root);
	/* proto3 leaves zeros out: exit 0 and exited false are absent */
	parse_ok("{\"event\":{\"end\":{\"exited\":true,\"status\":\"exit status 0\"}}}", &ev,
	         &root);
	assert_int_equal(ev.kind, E2B_EVENT_END);
	assert_int_equal(ev.exit_code, 0);
	assert_true(ev.exited);
	assert_string_equal(ev.status, "exit status 0");
	json_object_put(root);
	parse_ok("{\"event\":{\"end\":{\"exitCode\":-1,\"status\":\"signal: killed\"}}}", &ev,
	         &root);
	assert_int_equal(ev.exit_code, -1);
	assert_false(ev.exited);
	assert_string_equal(ev.status, "signal: killed");
	json_object_put(root);
	/* the proto name, and a 64-bit-style string number */
	parse_ok("{\"event\":{\"end\":{\"exit_code\":\"7\",\"exited\":true}}}", &ev, &root);
	assert_int_equal(ev.exit_code, 7);
	json_object_put(root);
	parse_ok("{\"event\":{\"keepalive\":{}}}", &ev, &root);
	assert_int_equal(ev.kind, E2B_EVENT_KEEPALIVE);
	json_object_put(root);
	/* kinds this client does not know are passed over, not refused */
	parse_ok("{\"event\":{\"data\":{\"pty\":\"eA==\"}}}", &ev, &root);
	assert_int_equal(ev.kind, E2B_EVENT_OTHER);
	assert_null(ev.data);
	json_object_put(root);
	parse_ok("{\"event\":{\"somethingNew\":{}}}", &ev, &root);
	assert_int_equal(ev.kind, E2B_EVENT_OTHER);
	json_object_put(root);

	parse_bad("not json", "not a JSON object");
	parse_bad("[1]", "not a JSON object");
	parse_bad("{\"event\":{\"start\":{}}} trailing", "not a JSON object");
	parse_bad("{}", "without an event");
	parse_bad("{\"event\":3}", "without an event");
	parse_bad("{\"event\":{\"start\":{\"pid\":-1}}}", "process id");
	parse_bad("{\"event\":{\"start\":{\"pid\":4294967296}}}", "process id");
	parse_bad("{\"event\":{\"data\":{\"stdout\":5}}}", "not a string");
	parse_bad("{\"event\":{\"data\":{\"stdout\":\"*not base64*\"}}}", "not base64");
	parse_bad("{\"event\":{\"end\":{\"exitCode\":1.5}}}", "wrong type");
	parse_bad("{\"event\":{\"end\":{\"exitCode\":4294967296}}}", "wrong type");
	parse_bad("{\"event\":{\"end\":{\"exited\":\"yes\"}}}", "wrong type");
	parse_bad("{\"event\":{\"end\":{\"status\":7}}}", "wrong type");
}

static void test_end_of_stream(void **state)
{
	(void)state;
	json_object *root;
	const char *code, *message;
	assert_true(e2b_end_parse("{}", 2, &root, &code, &message));
	assert_null(code);
	json_object_put(root);
	const char *e = "{\"error\":{\"code\":\"unavailable\",\"message\":\"sandbox not found\"}}";
	assert_true(e2b_end_parse(e, strlen(e), &root, &code, &message));
	assert_string_equal(code, "unavailable");
	assert_string_equal(message, "sandbox not found");
	json_object_put(root);
	const char *bad[] = {"", "[]", "{\"error\":1}", "{\"error\":{\"message\":\"no code\"}}",
	                     "{\"error\":{\"code\":1}}"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_false(e2b_end_parse(bad[i], strlen(bad[i]), &root, &code, &message));
		assert_null(root);
		assert_null(code);
	}
}

/* ---- the code interpreter's lines ---- */

static bool collect_line(void *ctx, const char *line, size_t len)
{
	aks_buf *b = ctx;
	assert_int_equal(line[len], '\0');
	aks__buf_printf(b, "[%s]", line);
	return true;
}

static void test_lines(void **state)
{
	(void)state;
	const char *in = "{\"a\":1}\n\n{\"b\":2}\r\n{\"c\"";
	for (size_t cut = 0; cut <= strlen(in); cut++) {
		e2b_lines d = {0};
		aks_buf got = AKS_BUF_INIT;
		assert_true(e2b_lines_feed(&d, in, cut, collect_line, &got));
		assert_true(e2b_lines_feed(&d, in + cut, strlen(in) - cut, collect_line, &got));
		assert_true(e2b_lines_feed(&d, ":3}", 3, collect_line, &got));
		assert_true(e2b_lines_finish(&d, collect_line, &got));
		/* the empty line skipped; the carriage return left for the JSON parser */
		assert_string_equal(got.data, "[{\"a\":1}][{\"b\":2}\r][{\"c\":3}]");
		e2b_lines_free(&d);
		aks__buf_free(&got);
	}
	/* a line without end is refused once past the bound, without keeping it all */
	e2b_lines d = {0};
	aks_buf got = AKS_BUF_INIT;
	char *chunk = malloc(1 << 20);
	memset(chunk, 'x', 1 << 20);
	bool ok = true;
	for (int i = 0; ok && i < 8; i++)
		ok = e2b_lines_feed(&d, chunk, 1 << 20, collect_line, &got);
	assert_false(ok);
	assert_true(d.failed);
	assert_true(d.pending.len <= E2B_WIRE_MESSAGE_MAX);
	assert_null(got.data);
	free(chunk);
	e2b_lines_free(&d);
}

static void test_outputs(void **state)
{
	(void)state;
	e2b_output o;
	json_object *root;
	const char *l = "{\"type\":\"stdout\",\"text\":\"42\\n\",\"timestamp\":1}\r";
	assert_true(e2b_output_parse(l, strlen(l), &o, &root));
	assert_int_equal(o.kind, E2B_OUTPUT_STDOUT);
	assert_int_equal(o.text_len, 3);
	assert_memory_equal(o.text, "42\n", 3);
	json_object_put(root);
	l = "{\"type\":\"stderr\",\"text\":\"a\\u0000b\"}";
	assert_true(e2b_output_parse(l, strlen(l), &o, &root));
	assert_int_equal(o.kind, E2B_OUTPUT_STDERR);
	assert_int_equal(o.text_len, 3); /* a NUL inside is kept */
	json_object_put(root);
	l = "{\"type\":\"error\",\"name\":\"NameError\",\"value\":\"name 'y' is not defined\","
	    "\"traceback\":\"...\"}";
	assert_true(e2b_output_parse(l, strlen(l), &o, &root));
	assert_int_equal(o.kind, E2B_OUTPUT_ERROR);
	assert_string_equal(o.name, "NameError");
	assert_string_equal(o.value, "name 'y' is not defined");
	json_object_put(root);
	l = "{\"type\":\"end_of_execution\"}";
	assert_true(e2b_output_parse(l, strlen(l), &o, &root));
	assert_int_equal(o.kind, E2B_OUTPUT_END);
	json_object_put(root);
	l = "{\"type\":\"result\",\"text\":\"2\",\"is_main_result\":true}";
	assert_true(e2b_output_parse(l, strlen(l), &o, &root));
	assert_int_equal(o.kind, E2B_OUTPUT_OTHER);
	json_object_put(root);
	const char *bad[] = {"nope",
	                     "{}",
	                     "{\"type\":1}",
	                     "{\"type\":\"stdout\"}",
	                     "{\"type\":\"stdout\",\"text\":[1]}",
	                     "{\"type\":\"error\",\"name\":3}"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		root = (json_object *)1;
		assert_false(e2b_output_parse(bad[i], strlen(bad[i]), &o, &root));
		assert_null(root);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_envelopes_in_any_pieces),
	    cmocka_unit_test(test_envelopes_refused),
	    cmocka_unit_test(test_events),
	    cmocka_unit_test(test_end_of_stream),
	    cmocka_unit_test(test_lines),
	    cmocka_unit_test(test_outputs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
