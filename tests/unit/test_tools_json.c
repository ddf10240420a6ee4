/* Unit tests: the tools' text layer — the json.dumps-compatible writer, visible
 * truncation, every result shape of reference §3 byte for byte, the guidance
 * of §3.9, the argument schemas and their validator. The expected texts were
 * produced with Python's json.dumps where the original's format is at stake. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "core/plugin/result.h"
#include "core/tools/json.h"

/* Compares and frees a builder's output. */
#define ASSERT_JSON(expr, expected)                                                                \
	do {                                                                                       \
		char *got_ = (expr);                                                               \
		assert_non_null(got_);                                                             \
		assert_string_equal(got_, expected);                                               \
		free(got_);                                                                        \
	} while (0)

static char *dump_string(const char *s, size_t len)
{
	struct json_object *o = json_object_new_string_len(s, (int)len);
	char *text = aks__json_dumps(o);
	json_object_put(o);
	return text;
}

static char *dump_double(double d)
{
	char *buf = malloc(48);
	aks__json_format_double(d, buf, 48);
	return buf;
}

/* ---- the writer ---- */

static void test_writer_escapes(void **state)
{
	(void)state;
	char all[40];
	size_t n = 0;
	for (int c = 0; c < 0x20; c++)
		all[n++] = (char)c;
	memcpy(all + n, "\x7f\"\\/", 4);
	n += 4;
	/* json.dumps("".join(chr(i) for i in range(32)) + "\x7f\"\\/") */
	ASSERT_JSON(
	    dump_string(all, n),
	    "\"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000b\\f\\r"
	    "\\u000e\\u000f\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018"
	    "\\u0019\\u001a\\u001b\\u001c\\u001d\\u001e\\u001f\\u007f\\\"\\\\/\"");
	ASSERT_JSON(dump_string("", 0), "\"\"");
	ASSERT_JSON(dump_string("plain ASCII ~!", 14), "\"plain ASCII ~!\"");
}

static void test_writer_non_ascii(void **state)
{
	(void)state;
	/* json.dumps("h\u00e9llo \u20ac \U0001F600 \uffff \u0080 \U0010FFFF") */
	const char *s =
	    "h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80 \xef\xbf\xbf \xc2\x80 \xf4\x8f\xbf\xbf";
	ASSERT_JSON(dump_string(s, strlen(s)),
	            "\"h\\u00e9llo \\u20ac \\ud83d\\ude00 \\uffff \\u0080 \\udbff\\udfff\"");
}

static void test_writer_invalid_utf8(void **state)
{
	(void)state;
	/* json.dumps(b.decode("utf-8", "replace")) for each b: one U+FFFD per
	 * maximal invalid subpart, as Python does. */
	static const struct {
		const char *bytes;
		size_t len;
		const char *json;
	} cases[] = {
	    {"\xff", 1, "\"\\ufffd\""},
	    {"\xc3\x28", 2, "\"\\ufffd(\""},
	    {"a\xe2\x82", 3, "\"a\\ufffd\""},
	    {"\xc0\x80", 2, "\"\\ufffd\\ufffd\""},
	    {"\xed\xa0\x80", 3, "\"\\ufffd\\ufffd\\ufffd\""},
	    {"\xf4\x90\x80\x80", 4, "\"\\ufffd\\ufffd\\ufffd\\ufffd\""},
	    {"\xf0\x80\x80\x80", 4, "\"\\ufffd\\ufffd\\ufffd\\ufffd\""},
	    {"\xe2\x82"
	     "A",
	     3, "\"\\ufffdA\""},
	    {"\xf0\x9f\x98", 3, "\"\\ufffd\""},
	    {"a\0b", 3, "\"a\\u0000b\""},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ASSERT_JSON(dump_string(cases[i].bytes, cases[i].len), cases[i].json);
}

static void test_writer_floats(void **state)
{
	(void)state;
	/* repr(float) for each value, as json.dumps writes it. */
	static const struct {
		double value;
		const char *repr;
	} cases[] = {
	    {1.0, "1.0"},
	    {0.5, "0.5"},
	    {1700000000.123456, "1700000000.123456"},
	    {0.1, "0.1"},
	    {1e16, "1e+16"},
	    {1e-05, "1e-05"},
	    {0.0001, "0.0001"},
	    {123456789.0, "123456789.0"},
	    {-0.0, "-0.0"},
	    {0.0, "0.0"},
	    {1e22, "1e+22"},
	    {5e-324, "5e-324"},
	    {5.9604644775390625e-08, "5.960464477539063e-08"}, /* 2^-24: the lopsided case */
	    {1.7976931348623157e+308, "1.7976931348623157e+308"},
	    {100.0, "100.0"},
	    {1e15, "1000000000000000.0"},
	    {-1.5e-07, "-1.5e-07"},
	    {3.14159, "3.14159"},
	    {12345678901234567890.0, "1.2345678901234567e+19"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ASSERT_JSON(dump_double(cases[i].value), cases[i].repr);
	ASSERT_JSON(dump_double(NAN), "NaN");
	ASSERT_JSON(dump_double(INFINITY), "Infinity");
	ASSERT_JSON(dump_double(-INFINITY), "-Infinity");
	/* Through the writer, as a json-c double. */
	struct json_object *d = json_object_new_double(1700000000.123456);
	ASSERT_JSON(aks__json_dumps(d), "1700000000.123456");
	json_object_put(d);
}

static void test_writer_structure(void **state)
{
	(void)state;
	/* json.dumps({"z": 1, "a": [1, 2.5, True, False, None, {}, []], "\u00e9": {"k": "v"}}) */
	struct json_object *o = json_object_new_object(), *a = json_object_new_array(),
	                   *inner = json_object_new_object();
	json_object_object_add(o, "z", json_object_new_int(1));
	json_object_array_add(a, json_object_new_int(1));
	json_object_array_add(a, json_object_new_double(2.5));
	json_object_array_add(a, json_object_new_boolean(1));
	json_object_array_add(a, json_object_new_boolean(0));
	json_object_array_add(a, NULL);
	json_object_array_add(a, json_object_new_object());
	json_object_array_add(a, json_object_new_array());
	json_object_object_add(o, "a", a);
	json_object_object_add(inner, "k", json_object_new_string("v"));
	json_object_object_add(o, "\xc3\xa9", inner);
	ASSERT_JSON(
	    aks__json_dumps(o),
	    "{\"z\": 1, \"a\": [1, 2.5, true, false, null, {}, []], \"\\u00e9\": {\"k\": \"v\"}}");
	json_object_put(o);
	ASSERT_JSON(aks__json_dumps(NULL), "null");
	/* Integers at the edges of what json-c holds. */
	o = json_object_new_array();
	json_object_array_add(o, json_object_new_int64(INT64_MIN));
	json_object_array_add(o, json_object_new_int64(INT64_MAX));
	json_object_array_add(o, json_object_new_uint64(UINT64_MAX));
	json_object_array_add(o, json_object_new_int(-1));
	ASSERT_JSON(aks__json_dumps(o), "[-9223372036854775808, 9223372036854775807, "
	                                "18446744073709551615, -1]");
	json_object_put(o);
}

/* ---- truncation ---- */

static void check_cut(const char *in, size_t len, size_t max, uint64_t dropped, const char *want,
                      size_t want_len, size_t chars, uint64_t total)
{
	aks_cut_text t;
	assert_int_equal(aks__truncate_chars(in, len, max, dropped, &t), AKS_OK);
	assert_int_equal(t.len, want_len);
	assert_memory_equal(t.text, want, want_len);
	assert_int_equal(t.text[t.len], '\0');
	assert_int_equal(t.chars, chars);
	assert_int_equal(t.total, total);
	assert_int_equal(aks__cut_text_is_cut(&t), total > chars);
	aks__cut_text_free(&t);
}

static void test_truncate(void **state)
{
	(void)state;
	check_cut("hello", 5, 8000, 0, "hello", 5, 5, 5);
	check_cut("hello", 5, 5, 0, "hello", 5, 5, 5); /* at the limit: nothing cut */
	check_cut("hello", 5, 4, 0, "hell", 4, 4, 5);
	check_cut("hello", 5, 0, 0, "", 0, 0, 5);
	check_cut("", 0, 3, 0, "", 0, 0, 0);
	/* Characters, not bytes: "h\u00e9llo" cut to 2 keeps the whole é. */
	check_cut("h\xc3\xa9llo", 6, 2, 0, "h\xc3\xa9", 3, 2, 5);
	check_cut("h\xc3\xa9llo", 6, 1, 0, "h", 1, 1, 5);
	/* A 4-byte character on the boundary is kept whole or not at all. */
	check_cut("a\xf0\x9f\x98\x80"
	          "b",
	          6, 2, 0, "a\xf0\x9f\x98\x80", 5, 2, 3);
	check_cut("a\xf0\x9f\x98\x80"
	          "b",
	          6, 1, 0, "a", 1, 1, 3);
	/* Invalid bytes are U+FFFD first, then counted: one per maximal subpart. */
	check_cut("\xff\xfe"
	          "ab",
	          4, 1, 0, "\xef\xbf\xbd", 3, 1, 4);
	check_cut("\xe2\x82"
	          "A",
	          3, 5, 0,
	          "\xef\xbf\xbd"
	          "A",
	          4, 2, 2);
	check_cut("ab\xe2\x82", 4, 10, 0, "ab\xef\xbf\xbd", 5, 3, 3);
	/* NUL is a character like any other. */
	check_cut("a\0b", 3, 2, 0, "a\0", 2, 2, 3);
	/* Bytes the host's cap dropped count one character each... */
	check_cut("abc", 3, 8000, 10, "abc", 3, 3, 13);
	/* ...and a character the cap cut in two is dropped, not shown as U+FFFD. */
	check_cut("ab\xe2\x82", 4, 8000, 5, "ab", 2, 2, 9);
	check_cut("ab\xe2\x82", 4, 1, 5, "a", 1, 1, 9);
}

/* ---- result shapes (reference §3) ---- */

static aks_tool_output output(const char *out, const char *err, int exit_code, const char *notice)
{
	aks_tool_output o = {{out, strlen(out), 0}, {err, strlen(err), 0}, exit_code, notice};
	return o;
}

static void test_run_shapes(void **state)
{
	(void)state;
	/* The §3.1 test contract: the fake provider echoes the code. */
	aks_tool_output o = output("print('hi')", "", 0, NULL);
	ASSERT_JSON(aks__tool_json_run(&o, "default:default", 8000),
	            "{\"stdout\": \"print('hi')\", \"stderr\": \"\", \"exit_code\": 0, "
	            "\"sandbox_session_id\": \"default:default\"}");
	o = output("", "Traceback\n", 1,
	           "sandbox session 'default:default' was idle for more than "
	           "1800s and has been reset; its previous workspace state "
	           "was discarded");
	ASSERT_JSON(
	    aks__tool_json_run(&o, "default:default", 8000),
	    "{\"stdout\": \"\", \"stderr\": \"Traceback\\n\", \"exit_code\": 1, "
	    "\"sandbox_session_id\": \"default:default\", \"notice\": \"sandbox session "
	    "'default:default' was idle for more than 1800s and has been reset; its previous "
	    "workspace state was discarded\"}");
	o = output("x", "", -9, NULL);
	ASSERT_JSON(aks__tool_json_run(&o, "4f9c", 8000),
	            "{\"stdout\": \"x\", \"stderr\": \"\", \"exit_code\": -9, "
	            "\"sandbox_session_id\": \"4f9c\"}");
}

static void test_run_truncated(void **state)
{
	(void)state;
	/* Each stream bounded on its own; only the cut ones are named, last. */
	aks_tool_output o = output("h\xc3\xa9llo world", "ok", 0, NULL);
	ASSERT_JSON(aks__tool_json_run(&o, "s", 5),
	            "{\"stdout\": \"h\\u00e9llo\", \"stderr\": \"ok\", \"exit_code\": 0, "
	            "\"sandbox_session_id\": \"s\", \"truncated\": {\"stdout\": 11}}");
	o = output("abcdef", "ghijkl", 0, "n");
	ASSERT_JSON(aks__tool_json_run(&o, "s", 3),
	            "{\"stdout\": \"abc\", \"stderr\": \"ghi\", \"exit_code\": 0, "
	            "\"sandbox_session_id\": \"s\", \"notice\": \"n\", "
	            "\"truncated\": {\"stdout\": 6, \"stderr\": 6}}");
	/* The host's byte cap shows the same way, even when the kept part fits. */
	o = output("abc", "", 0, NULL);
	o.out.dropped = 4194304;
	ASSERT_JSON(aks__tool_json_run(&o, "s", 8000),
	            "{\"stdout\": \"abc\", \"stderr\": \"\", \"exit_code\": 0, "
	            "\"sandbox_session_id\": \"s\", \"truncated\": {\"stdout\": 4194307}}");
}

static void test_run_from_result(void **state)
{
	(void)state;
	/* A result record whose stdout outgrew its 10-byte cap. */
	aks_result *r = aks__result_new(10, 100);
	assert_int_equal(aks__result_write(r, AKS_STREAM_STDOUT, "0123456789abcdefghij", 20, NULL),
	                 AKS_OK);
	assert_int_equal(aks__result_write(r, AKS_STREAM_STDERR, "warn", 4, NULL), AKS_OK);
	aks__result_set_exit_code(r, 3);
	assert_int_equal(aks__result_set_notice(r, "recreated empty"), AKS_OK);
	aks_tool_output o;
	aks__tool_output_from_result(r, &o);
	assert_int_equal(o.out.len, 10);
	assert_int_equal(o.out.dropped, 10);
	assert_int_equal(o.err.dropped, 0);
	ASSERT_JSON(aks__tool_json_run(&o, "default:default", 8000),
	            "{\"stdout\": \"0123456789\", \"stderr\": \"warn\", \"exit_code\": 3, "
	            "\"sandbox_session_id\": \"default:default\", \"notice\": \"recreated empty\", "
	            "\"truncated\": {\"stdout\": 20}}");
	aks_result_free(r);
}

static void test_pending_and_files(void **state)
{
	(void)state;
	ASSERT_JSON(aks__tool_json_pending("0123abcd", "default:default", NULL),
	            "{\"task_id\": \"0123abcd\", \"status\": \"pending\", "
	            "\"sandbox_session_id\": \"default:default\"}");
	ASSERT_JSON(aks__tool_json_pending("0123abcd", "s1", "idle"),
	            "{\"task_id\": \"0123abcd\", \"status\": \"pending\", "
	            "\"sandbox_session_id\": \"s1\", \"notice\": \"idle\"}");
	ASSERT_JSON(aks__tool_json_written("notes/a.txt", "default:default", NULL),
	            "{\"path\": \"notes/a.txt\", \"written\": true, "
	            "\"sandbox_session_id\": \"default:default\"}");
	ASSERT_JSON(aks__tool_json_written("a.txt", "s1", "reset"),
	            "{\"path\": \"a.txt\", \"written\": true, "
	            "\"sandbox_session_id\": \"s1\", \"notice\": \"reset\"}");
	ASSERT_JSON(
	    aks__tool_json_read("a.txt", "h\xc3\xa9\xff", 4, 0, "default:default", NULL, 8000),
	    "{\"path\": \"a.txt\", \"content\": \"h\\u00e9\\ufffd\", "
	    "\"sandbox_session_id\": \"default:default\"}");
	ASSERT_JSON(aks__tool_json_read("a.txt", "", 0, 0, "s", NULL, 8000),
	            "{\"path\": \"a.txt\", \"content\": \"\", \"sandbox_session_id\": \"s\"}");
	ASSERT_JSON(aks__tool_json_read("big.txt", "line1\nline2\n", 12, 0, "s", NULL, 6),
	            "{\"path\": \"big.txt\", \"content\": \"line1\\n\", \"sandbox_session_id\": "
	            "\"s\", \"truncated\": {\"content\": 12}}");
	/* A recreated sandbox is never silent, on reads either. */
	ASSERT_JSON(aks__tool_json_read("a.txt", "x", 1, 0, "s", "recreated", 8000),
	            "{\"path\": \"a.txt\", \"content\": \"x\", \"sandbox_session_id\": \"s\", "
	            "\"notice\": \"recreated\"}");
}

static void test_task_shapes(void **state)
{
	(void)state;
	ASSERT_JSON(aks__tool_json_task_unknown("nope"),
	            "{\"task_id\": \"nope\", \"status\": \"unknown\"}");
	ASSERT_JSON(aks__tool_json_task("t1", "pending", "default:default", NULL),
	            "{\"task_id\": \"t1\", \"status\": \"pending\", "
	            "\"sandbox_session_id\": \"default:default\"}");
	aks_tool_output o = output("done\n", "", 0, NULL);
	struct json_object *summary = aks__tool_summary_new(&o, NULL, NULL, 8000);
	assert_non_null(summary);
	ASSERT_JSON(aks__tool_json_task("t1", "succeeded", "default:default", summary),
	            "{\"task_id\": \"t1\", \"status\": \"succeeded\", \"sandbox_session_id\": "
	            "\"default:default\", \"result\": {\"stdout\": \"done\\n\", \"stderr\": \"\", "
	            "\"exit_code\": 0, \"error\": null, \"notice\": null}}");
	/* The summary survives the state store: json-c text out and back. */
	struct json_object *back = json_tokener_parse(json_object_to_json_string(summary));
	assert_non_null(back);
	ASSERT_JSON(aks__tool_json_task("t1", "succeeded", "default:default", back),
	            "{\"task_id\": \"t1\", \"status\": \"succeeded\", \"sandbox_session_id\": "
	            "\"default:default\", \"result\": {\"stdout\": \"done\\n\", \"stderr\": \"\", "
	            "\"exit_code\": 0, \"error\": null, \"notice\": null}}");
	json_object_put(back);
	json_object_put(summary);
	/* A task that produced no result. */
	summary = aks__tool_summary_new(NULL, "execution exceeded its 120s timeout", "n", 8000);
	ASSERT_JSON(
	    aks__tool_json_task("t2", "timed_out", "s", summary),
	    "{\"task_id\": \"t2\", \"status\": \"timed_out\", \"sandbox_session_id\": \"s\", "
	    "\"result\": {\"stdout\": \"\", \"stderr\": \"\", \"exit_code\": null, "
	    "\"error\": \"execution exceeded its 120s timeout\", \"notice\": \"n\"}}");
	json_object_put(summary);
	/* The summary is bounded like any output, and says so. */
	o = output("0123456789", "e", 2, NULL);
	summary = aks__tool_summary_new(&o, NULL, NULL, 4);
	ASSERT_JSON(aks__tool_json_task("t3", "failed", "s", summary),
	            "{\"task_id\": \"t3\", \"status\": \"failed\", \"sandbox_session_id\": \"s\", "
	            "\"result\": {\"stdout\": \"0123\", \"stderr\": \"e\", \"exit_code\": 2, "
	            "\"error\": null, \"notice\": null, \"truncated\": {\"stdout\": 10}}}");
	json_object_put(summary);
}

static void test_session_shapes(void **state)
{
	(void)state;
	ASSERT_JSON(aks__tool_json_sessions(NULL, 0), "{\"sessions\": []}");
	const aks_tool_session_row rows[] = {
	    {"default:default", NULL, "default", "active", 1700000000.123456, 0},
	    {"9b2f0c1e4d5a4b6c8e7f0a1b2c3d4e5f", "uv-project", "default", "closed", 1700000100.0,
	     3},
	};
	ASSERT_JSON(aks__tool_json_sessions(rows, 2),
	            "{\"sessions\": [{\"sandbox_session_id\": \"default:default\", \"name\": null, "
	            "\"profile\": \"default\", \"status\": \"active\", \"last_used_at\": "
	            "1700000000.123456}, {\"sandbox_session_id\": "
	            "\"9b2f0c1e4d5a4b6c8e7f0a1b2c3d4e5f\", \"name\": \"uv-project\", \"profile\": "
	            "\"default\", \"status\": \"closed\", \"last_used_at\": 1700000100.0, "
	            "\"egress_refused\": 3}]}");
	ASSERT_JSON(aks__tool_json_new_session("9b2f", "uv-project", "default"),
	            "{\"sandbox_session_id\": \"9b2f\", \"name\": \"uv-project\", "
	            "\"profile\": \"default\"}");
	ASSERT_JSON(aks__tool_json_new_session("9b2f", NULL, "default"),
	            "{\"sandbox_session_id\": \"9b2f\", \"name\": null, \"profile\": \"default\"}");
	ASSERT_JSON(aks__tool_json_destroyed("default:default", true),
	            "{\"sandbox_session_id\": \"default:default\", \"destroyed\": true}");
	ASSERT_JSON(aks__tool_json_destroyed("nope", false),
	            "{\"sandbox_session_id\": \"nope\", \"destroyed\": false}");
}

static void test_error_shapes(void **state)
{
	(void)state;
	/* The §3.1 example. */
	ASSERT_JSON(
	    aks__tool_json_error("unknown sandbox profile 'x'; configured profiles: "
	                         "['default']",
	                         NULL),
	    "{\"error\": \"unknown sandbox profile 'x'; configured profiles: ['default']\", "
	    "\"sandbox_session_id\": \"\"}");
	ASSERT_JSON(
	    aks__tool_json_error("unknown sandbox session 'abc'", "abc"),
	    "{\"error\": \"unknown sandbox session 'abc'\", \"sandbox_session_id\": \"abc\"}");
	ASSERT_JSON(aks__tool_json_disabled(), "{\"error\": \"sandbox capability is disabled\"}");
}

/* ---- guidance (reference §3.9) ---- */

static const char guidance_head[] =
    "[Sandbox execution]\n"
    "You have a sandbox where you can run code you write, run shell commands, and read or "
    "write files in its workspace. Prefer running real code over working results out "
    "yourself, and report the sandbox's actual output.\n"
    "Available tools:\n"
    "- run_code(code, language, sandbox_session_id, profile): run code (language defaults to "
    "python); returns stdout, stderr, exit_code.\n"
    "- run_command(command, sandbox_session_id, profile): run a shell command; returns stdout, "
    "stderr, exit_code.\n"
    "- write_sandbox_file(path, content, sandbox_session_id, profile): write a text file into "
    "the workspace.\n"
    "- read_sandbox_file(path, sandbox_session_id, profile): read a text file from the "
    "workspace.\n"
    "- check_sandbox_task(task_id): poll a long-running execution that returned status "
    "'pending'.\n"
    "- list_sandbox_sessions(): list the sandbox sessions available to you (id, name, "
    "profile).\n"
    "- new_sandbox_session(name, profile): create a fresh, empty session with a short "
    "descriptive name (such as \"uv-project\"); returns its sandbox_session_id.\n"
    "- destroy_sandbox_session(sandbox_session_id): destroy a session and its sandbox.\n"
    "File paths are relative to the workspace, which is also the directory commands and code "
    "run in; an absolute path is refused.\n"
    "Every result includes a sandbox_session_id. Sandbox state (files, the workspace) persists "
    "per id: pass the id again to continue where you left off, or omit it to use the default "
    "session.\n"
    "Session ids are assigned by the system; never invent one. Give each session you create a "
    "name. To return to an earlier environment, find it with list_sandbox_sessions and pass "
    "its id. Check that listing before creating a session, so that you never duplicate an "
    "environment.\n"
    "If a result contains an \"error\" field, the operation FAILED: report the error to the "
    "user, and never describe a failed or unattempted operation as done.\n"
    "If a result contains a \"notice\" field (for example, the sandbox was reset after an idle "
    "timeout and its workspace was discarded), tell the user before continuing.\n"
    "Once a task has finished, check_sandbox_task also returns its bounded outcome under "
    "\"result\" (stdout, stderr, exit_code, error, notice).\n"
    "Available workload profiles (pass as profile=):\n";

static const char guidance_tail[] =
    "When output was cut, the result says so: its \"truncated\" field gives the full length in "
    "characters of each cut field, of which only the beginning is shown.";

static void assert_no_blank_line(const char *text)
{
	assert_true(text[0] != '\n');
	assert_null(strstr(text, "\n\n"));
	assert_true(text[strlen(text) - 1] != '\n');
}

static void test_guidance(void **state)
{
	(void)state;
	const aks_guidance_profile profiles[] = {
	    {"workspace", "local_subprocess", "per_session", false, true, AKS_ISOLATION_NONE},
	    {"scratch", "docker", "per_call", false, true, AKS_ISOLATION_CONTAINER},
	    {"ops", "ec2_ssm", "per_session", true, false, 0}, /* not loaded: not said */
	    {"db", "kubernetes", "per_runtime", true, true, AKS_ISOLATION_CONTAINER},
	};
	char *text = aks__tool_guidance(profiles, 4, "workspace", 8000);
	assert_non_null(text);
	char expected[8192];
	snprintf(
	    expected, sizeof(expected),
	    "%s"
	    "- 'workspace' (default): provider 'local_subprocess', scope per_session, isolation "
	    "none (NOT isolated: code runs directly on its host, with the rights of its user)\n"
	    "- 'scratch': provider 'docker', scope per_call, isolation container\n"
	    "- 'ops': provider 'ec2_ssm', scope per_session, environment attached (connects to "
	    "an existing system; never reset or destroyed). NO persistent shell: each command "
	    "runs as its own process, so a working-directory change or `sudo su` does not "
	    "carry over to the next command; chain state-dependent steps in one command, for "
	    "example cd /app && ./run.sh\n"
	    "- 'db': provider 'kubernetes', scope per_runtime, isolation container, environment "
	    "attached (connects to an existing system; never reset or destroyed)\n"
	    "stdout/stderr and file reads are truncated at 8000 characters.\n"
	    "%s",
	    guidance_head, guidance_tail);
	assert_string_equal(text, expected);
	assert_no_blank_line(text);
	/* The phrases the original's tests look for. */
	static const char *const phrases[] = {
	    "[Sandbox execution]\n",
	    "never invent one",
	    "\"notice\"",
	    "\"error\"",
	    "FAILED",
	    "environment attached",
	    "NO persistent shell",
	    "cd /app && ./run.sh",
	    "\"result\"",
	    "\"truncated\"",
	    "truncated at 8000 characters",
	    "Available workload profiles (pass as profile=):",
	};
	for (size_t i = 0; i < sizeof(phrases) / sizeof(phrases[0]); i++)
		assert_non_null(strstr(text, phrases[i]));
	free(text);
}

static void test_guidance_none_configured(void **state)
{
	(void)state;
	char *text = aks__tool_guidance(NULL, 0, "default", 250);
	char expected[8192];
	snprintf(expected, sizeof(expected),
	         "%s- (none configured)\nstdout/stderr and file reads are truncated at 250 "
	         "characters.\n%s",
	         guidance_head, guidance_tail);
	assert_string_equal(text, expected);
	assert_no_blank_line(text);
	assert_null(strstr(text, "NO persistent shell"));
	free(text);
}

static void test_guidance_ec2_ssm_by_path(void **state)
{
	(void)state;
	/* The warning follows the provider, named or given as a path; only that one. */
	const aks_guidance_profile profiles[] = {
	    {"a", "/opt/aks/ec2_ssm.so", "per_session", true, false, 0},
	    {"b", "ec2_ssm_v2", "per_session", true, false, 0},
	};
	char *text = aks__tool_guidance(profiles, 2, "a", 10);
	assert_non_null(strstr(text, "- 'a' (default): provider '/opt/aks/ec2_ssm.so', scope "
	                             "per_session, environment attached (connects to an existing "
	                             "system; never reset or destroyed). NO persistent shell:"));
	assert_non_null(strstr(text, "- 'b': provider 'ec2_ssm_v2', scope per_session, environment "
	                             "attached (connects to an existing system; never reset or "
	                             "destroyed)\n"));
	/* Exactly one warning. */
	const char *first = strstr(text, "NO persistent shell");
	assert_non_null(first);
	assert_null(strstr(first + 1, "NO persistent shell"));
	free(text);
}

static void test_guidance_from_settings(void **state)
{
	(void)state;
	/* The stub providers (ec2_ssm, ...) join the plugin path. */
	const char *build = getenv("AKS_TEST_BUILDDIR"), *path = getenv("AKS_PLUGIN_PATH");
	assert_non_null(build);
	char *joined = NULL;
	assert_true(asprintf(&joined, "%s/tests/plugins/stubs/.libs:%s", build, path ? path : "") >
	            0);
	setenv("AKS_PLUGIN_PATH", joined, 1);
	free(joined);
	char dir[] = "/tmp/aks-tools-json-XXXXXX", file[PATH_MAX];
	assert_non_null(mkdtemp(dir));
	snprintf(file, sizeof(file), "%s/config.yaml", dir);
	FILE *f = fopen(file, "w");
	assert_non_null(f);
	fputs("sandbox:\n"
	      "  enabled: true\n"
	      "  default_profile: work\n"
	      "  tool_output_max_chars: 123\n"
	      "  profiles:\n"
	      "    work: {type: local_subprocess, local_subprocess: {}}\n"
	      "    once: {type: local_subprocess, scope: per_call, local_subprocess: {}}\n"
	      "    ops:\n"
	      "      type: ec2_ssm\n"
	      "      environment: attached\n"
	      "      ec2_ssm: {attach_to: i-0123}\n",
	      f);
	fclose(f);
	aks_settings *s = NULL;
	aks_error *err = NULL;
	if (aks_settings_load(file, (const char *const[]){NULL}, &s, &err) != AKS_OK)
		fail_msg("unexpected error: %s", aks_error_message(err));
	char *text = aks__tool_guidance_from_settings(s);
	assert_non_null(text);
	assert_non_null(strstr(text, "Available workload profiles (pass as profile=):\n"
	                             "- 'work' (default): provider 'local_subprocess', scope "
	                             "per_session, isolation none (NOT isolated: code runs "
	                             "directly on its host, with the rights of its user)\n"
	                             "- 'once': provider 'local_subprocess', scope per_call, "
	                             "isolation none (NOT isolated: code runs directly on its "
	                             "host, with the rights of its user)\n"
	                             "- 'ops': provider 'ec2_ssm', scope per_session, isolation "
	                             "none (NOT isolated: code runs directly on its host, with the "
	                             "rights of its user), environment attached (connects to an "
	                             "existing system; never reset or destroyed). NO persistent "
	                             "shell: "));
	assert_non_null(strstr(text, "\nstdout/stderr and file reads are truncated at 123 "
	                             "characters.\n"));
	assert_no_blank_line(text);
	free(text);
	aks_settings_free(s);
	unlink(file);
	rmdir(dir);
}

/* ---- schemas and the validator ---- */

static void test_tool_table(void **state)
{
	(void)state;
	static const char *const names[] = {
	    "run_code",
	    "run_command",
	    "write_sandbox_file",
	    "read_sandbox_file",
	    "check_sandbox_task",
	    "list_sandbox_sessions",
	    "new_sandbox_session",
	    "destroy_sandbox_session",
	};
	assert_int_equal(AKS_TOOL_COUNT, 8);
	for (int i = 0; i < AKS_TOOL_COUNT; i++) {
		assert_string_equal(aks__tool_name(i), names[i]);
		assert_int_equal(aks__tool_find(names[i]), i);
		const char *d = aks__tool_description(i);
		assert_non_null(d);
		assert_true(strlen(d) > 10);
		assert_null(strchr(d, '\n')); /* one line */
	}
	assert_null(aks__tool_name(-1));
	assert_null(aks__tool_name(AKS_TOOL_COUNT));
	assert_null(aks__tool_description(AKS_TOOL_COUNT));
	assert_int_equal(aks__tool_find("run_cod"), -1);
	assert_int_equal(aks__tool_find(NULL), -1);
	assert_null(aks__tool_schema(AKS_TOOL_COUNT));
}

static void test_schemas(void **state)
{
	(void)state;
	struct json_object *schema = aks__tool_schema(AKS_TOOL_RUN_CODE);
	ASSERT_JSON(
	    aks__json_dumps(schema),
	    "{\"type\": \"object\", \"properties\": {"
	    "\"code\": {\"type\": \"string\", \"description\": \"the source code to run\"}, "
	    "\"language\": {\"type\": \"string\", \"description\": \"the language of the "
	    "code\", \"default\": \"python\"}, "
	    "\"sandbox_session_id\": {\"type\": [\"string\", \"null\"], \"description\": "
	    "\"reuse an existing sandbox session; omit for the default session\", "
	    "\"default\": null}, "
	    "\"profile\": {\"type\": [\"string\", \"null\"], \"description\": \"workload "
	    "profile; omit for the configured default\", \"default\": null}}, "
	    "\"required\": [\"code\"], \"additionalProperties\": false}");
	json_object_put(schema);
	schema = aks__tool_schema(AKS_TOOL_LIST_SANDBOX_SESSIONS);
	ASSERT_JSON(aks__json_dumps(schema), "{\"type\": \"object\", \"properties\": {}, "
	                                     "\"required\": [], \"additionalProperties\": false}");
	json_object_put(schema);
	schema = aks__tool_schema(AKS_TOOL_NEW_SANDBOX_SESSION);
	ASSERT_JSON(aks__json_dumps(json_object_object_get(schema, "properties")),
	            "{\"name\": {\"type\": [\"string\", \"null\"], \"description\": \"a short "
	            "descriptive name for the session, such as \\\"uv-project\\\"\", \"default\": "
	            "null}, \"profile\": {\"type\": [\"string\", \"null\"], \"description\": "
	            "\"workload profile; omit for the configured default\", \"default\": null}}");
	json_object_put(schema);
	/* Every schema: valid JSON (json-c reads back what the writer wrote), an
	 * object schema that refuses extra keys, and the required lists of §3. */
	static const char *const required[] = {
	    "[\"code\"]",
	    "[\"command\"]",
	    "[\"path\", \"content\"]",
	    "[\"path\"]",
	    "[\"task_id\"]",
	    "[]",
	    "[]",
	    "[\"sandbox_session_id\"]",
	};
	for (int i = 0; i < AKS_TOOL_COUNT; i++) {
		schema = aks__tool_schema(i);
		assert_non_null(schema);
		char *text = aks__json_dumps(schema);
		struct json_object *back = json_tokener_parse(text);
		assert_non_null(back);
		assert_true(json_object_equal(back, schema));
		assert_string_equal(json_object_get_string(json_object_object_get(back, "type")),
		                    "object");
		struct json_object *ap = NULL;
		assert_true(json_object_object_get_ex(back, "additionalProperties", &ap));
		assert_true(json_object_is_type(ap, json_type_boolean));
		assert_false(json_object_get_boolean(ap));
		ASSERT_JSON(aks__json_dumps(json_object_object_get(back, "required")), required[i]);
		json_object_put(back);
		free(text);
		json_object_put(schema);
	}
}

static char *validate(int tool, const char *args_json)
{
	struct json_object *args = args_json ? json_tokener_parse(args_json) : NULL;
	if (args_json && strcmp(args_json, "null") != 0)
		assert_non_null(args);
	aks_error *err = NULL;
	int rc = aks__tool_validate_args(tool, args, &err);
	json_object_put(args);
	if (rc == AKS_OK) {
		assert_null(err);
		return NULL;
	}
	assert_int_equal(rc, AKS_EINVAL);
	char *msg = strdup(aks_error_message(err));
	aks_error_free(err);
	return msg;
}

#define ASSERT_VALID(tool, json)            assert_null(validate(tool, json))
#define ASSERT_INVALID(tool, json, message) ASSERT_JSON(validate(tool, json), message)

static void test_validator(void **state)
{
	(void)state;
	ASSERT_VALID(AKS_TOOL_RUN_CODE, "{\"code\": \"print(1)\"}");
	ASSERT_VALID(AKS_TOOL_RUN_CODE, "{\"code\": \"\", \"language\": \"bash\", "
	                                "\"sandbox_session_id\": \"default:default\", "
	                                "\"profile\": \"default\"}");
	ASSERT_VALID(AKS_TOOL_RUN_CODE, "{\"code\": \"x\", \"sandbox_session_id\": null, "
	                                "\"profile\": null}");
	ASSERT_VALID(AKS_TOOL_RUN_COMMAND, "{\"command\": \"ls\"}");
	ASSERT_VALID(AKS_TOOL_WRITE_SANDBOX_FILE, "{\"path\": \"a\", \"content\": \"\"}");
	ASSERT_VALID(AKS_TOOL_READ_SANDBOX_FILE, "{\"path\": \"a\"}");
	ASSERT_VALID(AKS_TOOL_CHECK_SANDBOX_TASK, "{\"task_id\": \"t\"}");
	ASSERT_VALID(AKS_TOOL_LIST_SANDBOX_SESSIONS, "{}");
	ASSERT_VALID(AKS_TOOL_LIST_SANDBOX_SESSIONS, NULL); /* no arguments at all */
	ASSERT_VALID(AKS_TOOL_LIST_SANDBOX_SESSIONS, "null");
	ASSERT_VALID(AKS_TOOL_NEW_SANDBOX_SESSION, "{\"name\": null}");
	ASSERT_VALID(AKS_TOOL_NEW_SANDBOX_SESSION,
	             "{\"name\": \"uv-project\", \"profile\": \"p\"}");
	ASSERT_VALID(AKS_TOOL_DESTROY_SANDBOX_SESSION, "{\"sandbox_session_id\": \"\"}");

	ASSERT_INVALID(AKS_TOOL_RUN_CODE, "{}", "run_code: argument 'code' is required");
	ASSERT_INVALID(AKS_TOOL_RUN_CODE, NULL, "run_code: argument 'code' is required");
	ASSERT_INVALID(AKS_TOOL_RUN_CODE, "{\"code\": \"x\", \"language\": 3}",
	               "run_code: argument 'language' must be a string");
	ASSERT_INVALID(AKS_TOOL_RUN_CODE, "{\"code\": \"x\", \"language\": null}",
	               "run_code: argument 'language' must be a string");
	ASSERT_INVALID(AKS_TOOL_RUN_CODE, "{\"code\": null}",
	               "run_code: argument 'code' must be a string");
	ASSERT_INVALID(AKS_TOOL_RUN_CODE, "{\"code\": \"x\", \"profile\": [\"a\"]}",
	               "run_code: argument 'profile' must be a string or null");
	ASSERT_INVALID(AKS_TOOL_RUN_CODE, "{\"code\": \"x\", \"foo\": 1}",
	               "run_code: unknown argument 'foo' (arguments: code, language, "
	               "sandbox_session_id, profile)");
	ASSERT_INVALID(AKS_TOOL_RUN_CODE, "{\"cod\": \"x\"}",
	               "run_code: unknown argument 'cod'; did you mean 'code'?");
	ASSERT_INVALID(AKS_TOOL_RUN_CODE, "[\"print(1)\"]",
	               "run_code: the arguments must be a JSON object");
	ASSERT_INVALID(AKS_TOOL_RUN_CODE, "\"print(1)\"",
	               "run_code: the arguments must be a JSON object");
	ASSERT_INVALID(AKS_TOOL_WRITE_SANDBOX_FILE, "{\"path\": \"a\"}",
	               "write_sandbox_file: argument 'content' is required");
	ASSERT_INVALID(AKS_TOOL_WRITE_SANDBOX_FILE, "{\"path\": \"a\", \"content\": {\"x\": 1}}",
	               "write_sandbox_file: argument 'content' must be a string");
	ASSERT_INVALID(AKS_TOOL_CHECK_SANDBOX_TASK, "{\"task_id\": 7}",
	               "check_sandbox_task: argument 'task_id' must be a string");
	ASSERT_INVALID(AKS_TOOL_LIST_SANDBOX_SESSIONS, "{\"all\": true}",
	               "list_sandbox_sessions: unknown argument 'all' (list_sandbox_sessions takes "
	               "no arguments)");
	ASSERT_INVALID(AKS_TOOL_DESTROY_SANDBOX_SESSION, "{\"sandbox_session_id\": null}",
	               "destroy_sandbox_session: argument 'sandbox_session_id' must be a string");
	ASSERT_INVALID(AKS_TOOL_DESTROY_SANDBOX_SESSION, "{}",
	               "destroy_sandbox_session: argument 'sandbox_session_id' is required");
	ASSERT_INVALID(AKS_TOOL_COUNT, "{}", "unknown tool #8");
}

/* The validator and the schemas come from one table: whatever a schema lists
 * is accepted, whatever it requires is demanded. */
static void test_validator_matches_schemas(void **state)
{
	(void)state;
	for (int i = 0; i < AKS_TOOL_COUNT; i++) {
		struct json_object *schema = aks__tool_schema(i);
		struct json_object *props = json_object_object_get(schema, "properties");
		struct json_object *required = json_object_object_get(schema, "required");
		struct json_object *args = json_object_new_object();
		json_object_object_foreach(props, key, val)
		{
			(void)val;
			json_object_object_add(args, key, json_object_new_string("v"));
		}
		assert_int_equal(aks__tool_validate_args(i, args, NULL), AKS_OK);
		for (size_t r = 0; r < json_object_array_length(required); r++) {
			const char *name =
			    json_object_get_string(json_object_array_get_idx(required, r));
			struct json_object *fewer = json_object_new_object();
			json_object_object_foreach(args, k, v)
			{
				if (strcmp(k, name) != 0)
					json_object_object_add(fewer, k, json_object_get(v));
			}
			aks_error *err = NULL;
			assert_int_equal(aks__tool_validate_args(i, fewer, &err), AKS_EINVAL);
			char want[256];
			snprintf(want, sizeof(want), "%s: argument '%s' is required",
			         aks__tool_name(i), name);
			assert_string_equal(aks_error_message(err), want);
			aks_error_free(err);
			json_object_put(fewer);
		}
		json_object_put(args);
		json_object_put(schema);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_writer_escapes),
	    cmocka_unit_test(test_writer_non_ascii),
	    cmocka_unit_test(test_writer_invalid_utf8),
	    cmocka_unit_test(test_writer_floats),
	    cmocka_unit_test(test_writer_structure),
	    cmocka_unit_test(test_truncate),
	    cmocka_unit_test(test_run_shapes),
	    cmocka_unit_test(test_run_truncated),
	    cmocka_unit_test(test_run_from_result),
	    cmocka_unit_test(test_pending_and_files),
	    cmocka_unit_test(test_task_shapes),
	    cmocka_unit_test(test_session_shapes),
	    cmocka_unit_test(test_error_shapes),
	    cmocka_unit_test(test_guidance),
	    cmocka_unit_test(test_guidance_none_configured),
	    cmocka_unit_test(test_guidance_ec2_ssm_by_path),
	    cmocka_unit_test(test_guidance_from_settings),
	    cmocka_unit_test(test_tool_table),
	    cmocka_unit_test(test_schemas),
	    cmocka_unit_test(test_validator),
	    cmocka_unit_test(test_validator_matches_schemas),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
