/*
 * tests/unit/test_daytona_wire.c - the daytona plugin's reading of a toolbox session
 * command's answer (plugins/daytona/daytona_wire.c): the streams as the toolbox split them,
 * the raw log's markers split here, a merged output, the exit code, and what is not an
 * answer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "daytona_wire.h"

static void parse_ok(const char *json, int code, const char *out, size_t out_len, const char *err,
                     size_t err_len)
{
	dt_exec_answer a = {0};
	const char *why = NULL;
	assert_true(dt_exec_answer_parse(json, strlen(json), &a, &why));
	assert_int_equal(a.exit_code, code);
	assert_int_equal(a.out.len, out_len);
	assert_int_equal(a.err.len, err_len);
	if (out_len)
		assert_memory_equal(a.out.data, out, out_len);
	if (err_len)
		assert_memory_equal(a.err.data, err, err_len);
	dt_exec_answer_free(&a);
}

static void test_split_by_the_toolbox(void **state)
{
	(void)state;
	parse_ok("{\"cmdId\":\"c\",\"exitCode\":3,\"stdout\":\"out\\n\",\"stderr\":\"err\\n\","
	         "\"output\":\"\\u0001\\u0001\\u0001out\\n\\u0002\\u0002\\u0002err\\n\"}",
	         3, "out\n", 4, "err\n", 4);
	/* one stream null: the other as given */
	parse_ok("{\"exitCode\":0,\"stdout\":\"x\",\"stderr\":null}", 0, "x", 1, "", 0);
}

static void test_raw_log_split_here(void **state)
{
	(void)state;
	/* chunks in turn, each after its stream's marker */
	parse_ok(
	    "{\"exitCode\":1,\"stdout\":null,\"stderr\":null,\"output\":"
	    "\"\\u0001\\u0001\\u0001one \\u0002\\u0002\\u0002bad\\n\\u0001\\u0001\\u0001two\\n\"}",
	    1, "one two\n", 8, "bad\n", 4);
	/* bytes before any marker are stdout's; a lone 0x01 or two are data */
	parse_ok("{\"exitCode\":0,\"output\":\"pre\\u0001\\u0001x\\u0002\\u0002\\u0002e\"}", 0,
	         "pre\x01\x01x", 6, "e", 1);
	/* a marker cut at the end is data */
	parse_ok("{\"exitCode\":0,\"output\":\"a\\u0002\\u0002\"}", 0, "a\x02\x02", 3, "", 0);
	/* NULs survive */
	parse_ok("{\"exitCode\":0,\"output\":\"\\u0001\\u0001\\u0001a\\u0000b\"}", 0, "a\0b", 3, "",
	         0);
}

static void test_merged_output(void **state)
{
	(void)state;
	/* an older toolbox: no markers, all of it stdout */
	parse_ok("{\"cmdId\":\"c\",\"exitCode\":2,\"output\":\"both\\n\"}", 2, "both\n", 5, "", 0);
	/* no exit code: the reference's -1; out of a shell's range: -1 too */
	parse_ok("{\"output\":\"\"}", -1, "", 0, "", 0);
	parse_ok("{\"exitCode\":99999}", -1, "", 0, "", 0);
	parse_ok("{\"exitCode\":\"3\"}", -1, "", 0, "", 0);
	/* white space after the object */
	parse_ok("{\"exitCode\":0}\n", 0, "", 0, "", 0);
}

static void test_not_an_answer(void **state)
{
	(void)state;
	const char *bad[] = {"",
	                     "[]",
	                     "null",
	                     "{\"exitCode\":0",
	                     "{\"exitCode\":0}x",
	                     "{\"exitCode\":0}{}",
	                     "\"str\"",
	                     "<html>502</html>"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		dt_exec_answer a = {0};
		const char *why = NULL;
		assert_false(dt_exec_answer_parse(bad[i], strlen(bad[i]), &a, &why));
		assert_string_equal(why, "not a JSON object");
		assert_int_equal(a.out.len + a.err.len, 0);
	}
	/* the length given, not a NUL, bounds it */
	dt_exec_answer a = {0};
	const char *why = NULL;
	assert_false(dt_exec_answer_parse("{\"exitCode\":0}", 5, &a, &why));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_split_by_the_toolbox),
	    cmocka_unit_test(test_raw_log_split_here),
	    cmocka_unit_test(test_merged_output),
	    cmocka_unit_test(test_not_an_answer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
