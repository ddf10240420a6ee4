/* Unit tests: provider and sandbox wrappers over the fake provider — the one
 * place where undeclared capabilities become errors, bounded results, ids. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aksandbox/aksandbox.h>

typedef struct fixture {
	aks_provider *prov;
	aks_sandbox *sb;
	aks_call call;
} fixture;

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	const aks_plugin *plugin = NULL;
	aks_error *err = NULL;
	if (aks_plugin_load("fake", AKS_PLUGIN_PROVIDER, &plugin, &err) < 0 ||
	    aks_provider_open(plugin, NULL, &f->prov, &err) < 0) {
		fprintf(stderr, "setup: %s\n", aks_error_message(err));
		aks_error_free(err);
		free(f);
		return -1;
	}
	aks_call_init(&f->call, 10, NULL, NULL, NULL);
	if (aks_provider_create(f->prov, &f->call, &f->sb, &err) < 0)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;
	aks_sandbox_close(f->sb);
	aks_provider_close(f->prov);
	free(f);
	return 0;
}

static void test_execute_code_default_python(void **state)
{
	fixture *f = *state;
	aks_result *r = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_sandbox_execute_code(f->sb, "print('hi')", NULL, &f->call, &r, &err),
	                 AKS_OK);
	assert_string_equal(aks_result_get_stdout(r, NULL), "print('hi')");
	assert_int_equal(aks_result_get_exit_code(r), 0);
	aks_result_free(r);
}

static void test_failing_program_is_a_result(void **state)
{
	fixture *f = *state;
	aks_result *r = NULL;
	aks_error *err = NULL;
	assert_int_equal(
	    aks_sandbox_execute_code(f->sb, "__nonzero_exit__", "python", &f->call, &r, &err),
	    AKS_OK);
	assert_null(err);
	assert_int_equal(aks_result_get_exit_code(r), 1);
	assert_string_equal(aks_result_get_stderr(r, NULL), "simulated non-zero exit");
	aks_result_free(r);
}

static void test_undeclared_language(void **state)
{
	fixture *f = *state;
	aks_result *r = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_sandbox_execute_code(f->sb, "puts 1", "ruby", &f->call, &r, &err),
	                 AKS_ECAPABILITY);
	assert_null(r);
	assert_string_equal(aks_error_message(err),
	                    "fake does not support capability: language:ruby");
	aks_error_free(err);
}

static void test_null_slot_is_capability_error(void **state)
{
	fixture *f = *state;
	aks_result *r = NULL;
	aks_error *err = NULL;
	const char *const pkgs[] = {"pip-noop", NULL};
	assert_int_equal(aks_sandbox_install_packages(f->sb, pkgs, &f->call, &r, &err),
	                 AKS_ECAPABILITY);
	assert_null(r);
	assert_string_equal(aks_error_message(err),
	                    "fake does not support capability: package_install");
	aks_error_free(err);
}

static void test_files_round_trip(void **state)
{
	fixture *f = *state;
	aks_result *r = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_sandbox_upload_file(f->sb, "f.txt", "da\0ta", 5, &f->call, &err),
	                 AKS_OK);
	assert_int_equal(aks_sandbox_download_file(f->sb, "f.txt", &f->call, &r, &err), AKS_OK);
	size_t len = 0;
	const char *path = NULL;
	const unsigned char *data = aks_result_get_file(r, 0, &path, NULL, &len);
	assert_int_equal(len, 5);
	assert_memory_equal(data, "da\0ta", 5);
	assert_string_equal(path, "f.txt");
	aks_result_free(r);
	r = NULL;
	assert_int_equal(aks_sandbox_download_file(f->sb, "missing.txt", &f->call, &r, &err),
	                 AKS_ENOTFOUND);
	assert_null(r);
	assert_non_null(err);
	aks_error_free(err);
}

static void test_stream_cap(void **state)
{
	fixture *f = *state;
	aks_provider_set_limits(f->prov, 4, 1024);
	aks_result *r = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_sandbox_execute_code(f->sb, "0123456789", NULL, &f->call, &r, &err),
	                 AKS_OK);
	size_t len = 0;
	assert_string_equal(aks_result_get_stdout(r, &len), "0123");
	assert_int_equal(aks_result_get_stream_total(r, AKS_STREAM_STDOUT), 10);
	assert_true(aks_result_is_truncated(r, AKS_STREAM_STDOUT));
	aks_result_free(r);
	aks_provider_set_limits(f->prov, AKS_DEFAULT_STREAM_CAP, AKS_DEFAULT_FILE_CAP);
}

static void test_attach_and_destroy(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	const char *id = aks_sandbox_get_id(f->sb);
	assert_int_equal(strlen(id), 32);
	aks_sandbox *again = NULL;
	assert_int_equal(aks_provider_attach(f->prov, id, &f->call, &again, &err), AKS_OK);
	assert_string_equal(aks_sandbox_get_id(again), id);
	aks_sandbox_close(again);
	assert_int_equal(aks_provider_attach(f->prov, "nonexistent-id", &f->call, &again, &err),
	                 AKS_EGONE);
	aks_error_free(err);
	err = NULL;
	assert_int_equal(aks_provider_destroy(f->prov, "unknown-sandbox-id", &f->call, &err),
	                 AKS_OK);
}

static void test_argument_errors(void **state)
{
	fixture *f = *state;
	aks_result *r = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_sandbox_execute_code(f->sb, NULL, NULL, &f->call, &r, &err),
	                 AKS_EINVAL);
	assert_string_equal(aks_error_message(err), "aks_sandbox_execute_code: missing argument");
	aks_error_free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_execute_code_default_python, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_failing_program_is_a_result, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_undeclared_language, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_null_slot_is_capability_error, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_files_round_trip, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stream_cap, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_attach_and_destroy, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_argument_errors, setup, teardown),
	};
	return cmocka_run_group_tests_name("provider", tests, NULL, NULL);
}
