/* Unit tests: result records bound what they keep and count what they drop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/plugin/result.h"

static void test_streams_bounded(void **state)
{
	(void)state;
	aks_result *r = aks__result_new(10, 100);
	aks_error *err = NULL;
	assert_int_equal(aks__result_write(r, AKS_STREAM_STDOUT, "hello ", 6, &err), AKS_OK);
	assert_int_equal(aks__result_write(r, AKS_STREAM_STDOUT, "world, again", 12, &err), AKS_OK);
	assert_int_equal(aks__result_write(r, AKS_STREAM_STDERR, "e", 1, &err), AKS_OK);
	size_t len = 0;
	const char *out = aks_result_get_stdout(r, &len);
	assert_int_equal(len, 10);
	assert_memory_equal(out, "hello worl", 10);
	assert_int_equal(out[10], '\0');
	assert_int_equal(aks_result_get_stream_total(r, AKS_STREAM_STDOUT), 18);
	assert_true(aks_result_is_truncated(r, AKS_STREAM_STDOUT));
	assert_false(aks_result_is_truncated(r, AKS_STREAM_STDERR));
	assert_string_equal(aks_result_get_stderr(r, NULL), "e");
	aks_result_free(r);
}

static void test_binary_safe(void **state)
{
	(void)state;
	aks_result *r = aks__result_new(1024, 1024);
	unsigned char all[256];
	for (int i = 0; i < 256; i++)
		all[i] = (unsigned char)i;
	assert_int_equal(aks__result_write(r, AKS_STREAM_STDOUT, all, sizeof(all), NULL), AKS_OK);
	size_t len = 0;
	const char *out = aks_result_get_stdout(r, &len);
	assert_int_equal(len, 256);
	assert_memory_equal(out, all, 256);
	aks_result_free(r);
}

static void test_files_limited(void **state)
{
	(void)state;
	aks_result *r = aks__result_new(10, 8);
	aks_error *err = NULL;
	assert_int_equal(aks__result_write(r, AKS_STREAM_FILE, "x", 1, &err), AKS_EINVAL);
	aks_error_free(err);
	err = NULL;
	assert_int_equal(aks__result_add_file(r, "a.bin", NULL), AKS_OK);
	assert_int_equal(aks__result_write(r, AKS_STREAM_FILE, "12345", 5, &err), AKS_OK);
	assert_int_equal(aks__result_write(r, AKS_STREAM_FILE, "6789", 4, &err), AKS_ELIMIT);
	assert_string_equal(aks_error_message(err),
	                    "file 'a.bin' is larger than the 8-byte download limit");
	aks_error_free(err);
	const char *path = NULL, *mime = NULL;
	size_t len = 0;
	const unsigned char *data = aks_result_get_file(r, 0, &path, &mime, &len);
	assert_string_equal(path, "a.bin");
	assert_string_equal(mime, "application/octet-stream");
	assert_int_equal(len, 5);
	assert_memory_equal(data, "12345", 5);
	assert_null(aks_result_get_file(r, 1, NULL, NULL, NULL));
	aks_result_free(r);
}

static void test_metadata(void **state)
{
	(void)state;
	aks_result *r = aks__result_new(10, 10);
	assert_int_equal(aks_result_get_exit_code(r), 0);
	aks__result_set_exit_code(r, 3);
	assert_int_equal(aks_result_get_exit_code(r), 3);
	assert_false(aks_result_timed_out(r));
	aks__result_set_timed_out(r);
	assert_true(aks_result_timed_out(r));
	assert_null(aks_result_get_notice(r));
	assert_int_equal(aks__result_set_notice(r, "reset"), AKS_OK);
	assert_string_equal(aks_result_get_notice(r), "reset");
	assert_int_equal(aks__result_set_provider_data(r, "{\"pod\": \"p1\"}"), AKS_OK);
	assert_string_equal(aks_result_get_provider_data(r), "{\"pod\": \"p1\"}");
	/* Provider data must be a JSON object; anything else is refused and the old value kept. */
	assert_int_equal(aks__result_set_provider_data(r, "[1]"), AKS_EINVAL);
	assert_int_equal(aks__result_set_provider_data(r, "{bad"), AKS_EINVAL);
	assert_int_equal(aks__result_set_provider_data(r, "{} trailing"), AKS_EINVAL);
	assert_string_equal(aks_result_get_provider_data(r), "{\"pod\": \"p1\"}");
	aks_result_free(r);
	aks_result_free(NULL);
}

static void test_errors(void **state)
{
	(void)state;
	aks_error *err = NULL;
	assert_int_equal(aks__error_set(&err, AKS_EPOLICY, "path '%s' escapes", "../x"),
	                 AKS_EPOLICY);
	assert_int_equal(aks_error_code(err), AKS_EPOLICY);
	/* The first error wins: later ones do not overwrite it. */
	aks__error_set(&err, AKS_EIO, "second");
	assert_string_equal(aks_error_message(err), "path '../x' escapes");
	aks__error_prefix(err, "sandbox %d", 7);
	assert_string_equal(aks_error_message(err), "sandbox 7: path '../x' escapes");
	aks_error_free(err);
	assert_int_equal(aks__error_set(NULL, AKS_EIO, "dropped"), AKS_EIO);
	assert_string_equal(aks_error_type_name(AKS_EGONE), "SandboxGoneError");
	assert_string_equal(aks_strerror(AKS_ETIMEOUT), "timed out");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_streams_bounded), cmocka_unit_test(test_binary_safe),
	    cmocka_unit_test(test_files_limited),   cmocka_unit_test(test_metadata),
	    cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests_name("result", tests, NULL, NULL);
}
