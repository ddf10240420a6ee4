/*
 * fake-provider.c - pins the behaviour of the fake provider that other tests
 * rely on (reference section 9), through the public API, and drives one
 * instance from many threads at once to show that it is thread-safe.
 *
 * The fake is found by name on AKS_PLUGIN_PATH, as every test finds it.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <aksandbox/aksandbox.h>

#define THREADS 8
#define ROUNDS  200

static aks_provider *prov;

static int open_fake(void **state)
{
	const aks_plugin *plugin = NULL;
	aks_error *err = NULL;

	(void)state;
	if (aks_plugin_load("fake", AKS_PLUGIN_PROVIDER, &plugin, &err) != AKS_OK) {
		fprintf(stderr, "# cannot load the fake: %s\n", aks_error_message(err));
		aks_error_free(err);
		return -1;
	}
	if (aks_provider_open(plugin, NULL, &prov, &err) != AKS_OK) {
		fprintf(stderr, "# cannot open the fake: %s\n", aks_error_message(err));
		aks_error_free(err);
		return -1;
	}
	return 0;
}

static int close_fake(void **state)
{
	(void)state;
	aks_provider_close(prov);
	return 0;
}

static aks_call *call_of(aks_call *call)
{
	aks_call_init(call, 30, NULL, NULL, NULL);
	return call;
}

static aks_sandbox *create(void)
{
	aks_sandbox *sb = NULL;
	aks_call call;

	assert_int_equal(aks_provider_create(prov, call_of(&call), &sb, NULL), AKS_OK);
	assert_non_null(sb);
	return sb;
}

static void destroy(const char *id)
{
	aks_call call;

	assert_int_equal(aks_provider_destroy(prov, id, call_of(&call), NULL), AKS_OK);
}

static void test_capabilities(void **state)
{
	(void)state;
	const aks_capabilities *c = aks_provider_get_capabilities(prov);
	assert_int_equal(c->isolation, AKS_ISOLATION_NONE);
	assert_string_equal(c->languages[0], "python");
	assert_string_equal(c->languages[1], "bash");
	assert_null(c->languages[2]);
	assert_true(c->shell && c->files && c->stateful && c->attach && c->provisions);
	assert_false(c->package_install || c->attaches_external || c->principal_user);
	assert_false(c->policy_network || c->policy_filesystem || c->policy_resources);
}

static void test_id_is_uuid4_hex(void **state)
{
	(void)state;
	aks_sandbox *a = create(), *b = create();
	const char *id = aks_sandbox_get_id(a);

	assert_int_equal(strlen(id), 32);
	assert_int_equal(strspn(id, "0123456789abcdef"), 32);
	assert_int_equal(id[12], '4');           /* version */
	assert_non_null(strchr("89ab", id[16])); /* variant */
	assert_string_not_equal(id, aks_sandbox_get_id(b));
	char ida[64], idb[64];
	snprintf(ida, sizeof(ida), "%s", id);
	snprintf(idb, sizeof(idb), "%s", aks_sandbox_get_id(b));
	aks_sandbox_close(a);
	aks_sandbox_close(b);
	destroy(ida);
	destroy(idb);
}

static void test_execute_echoes(void **state)
{
	(void)state;
	aks_sandbox *sb = create();
	aks_result *r = NULL;
	aks_call call;

	assert_int_equal(
	    aks_sandbox_execute_code(sb, "print(1)", "python", call_of(&call), &r, NULL), AKS_OK);
	assert_string_equal(aks_result_get_stdout(r, NULL), "print(1)");
	assert_int_equal(aks_result_get_exit_code(r), 0);
	aks_result_free(r);
	assert_int_equal(aks_sandbox_execute_code(sb, "echo $0", "bash", call_of(&call), &r, NULL),
	                 AKS_OK);
	assert_string_equal(aks_result_get_stdout(r, NULL), "echo $0");
	aks_result_free(r);
	assert_int_equal(aks_sandbox_execute_command(sb, "ls -l", call_of(&call), &r, NULL),
	                 AKS_OK);
	assert_string_equal(aks_result_get_stdout(r, NULL), "ls -l");
	assert_int_equal(aks_result_get_exit_code(r), 0);
	aks_result_free(r);
	r = NULL;
	assert_int_equal(aks_sandbox_execute_code(sb, "x", "ruby", call_of(&call), &r, NULL),
	                 AKS_ECAPABILITY);
	assert_null(r);
	aks_sandbox_close(sb);
}

static void test_marker_fails_the_program(void **state)
{
	(void)state;
	aks_sandbox *sb = create();
	aks_result *r = NULL;
	aks_call call;

	assert_int_equal(aks_sandbox_execute_code(sb, "x = 1\n__nonzero_exit__\n", "python",
	                                          call_of(&call), &r, NULL),
	                 AKS_OK);
	assert_int_equal(aks_result_get_exit_code(r), 1);
	assert_string_equal(aks_result_get_stderr(r, NULL), "simulated non-zero exit");
	assert_string_equal(aks_result_get_stdout(r, NULL), "");
	aks_result_free(r);
	assert_int_equal(
	    aks_sandbox_execute_command(sb, "false __nonzero_exit__", call_of(&call), &r, NULL),
	    AKS_OK);
	assert_int_equal(aks_result_get_exit_code(r), 1);
	aks_result_free(r);
	aks_sandbox_close(sb);
}

static void test_files(void **state)
{
	(void)state;
	aks_sandbox *a = create(), *b = create();
	aks_result *r = NULL;
	aks_error *err = NULL;
	aks_call call;
	size_t len;

	assert_int_equal(aks_sandbox_upload_file(a, "d/x.bin", "\0\1\2", 3, call_of(&call), NULL),
	                 AKS_OK);
	assert_int_equal(aks_sandbox_upload_file(a, "d/x.bin", "new", 3, call_of(&call), NULL),
	                 AKS_OK); /* replaces */
	assert_int_equal(aks_sandbox_download_file(a, "d/x.bin", call_of(&call), &r, NULL), AKS_OK);
	assert_int_equal(aks_result_get_file_count(r), 1);
	const unsigned char *data = aks_result_get_file(r, 0, NULL, NULL, &len);
	assert_int_equal(len, 3);
	assert_memory_equal(data, "new", 3);
	aks_result_free(r);
	r = NULL;
	/* Files belong to their sandbox. */
	assert_int_equal(aks_sandbox_download_file(b, "d/x.bin", call_of(&call), &r, &err),
	                 AKS_ENOTFOUND);
	assert_null(r);
	assert_non_null(strstr(aks_error_message(err), "d/x.bin"));
	aks_error_free(err);
	err = NULL;
	assert_int_equal(aks_sandbox_upload_file(a, "../up", "x", 1, call_of(&call), NULL),
	                 AKS_EPOLICY);
	assert_int_equal(aks_sandbox_upload_file(a, "/etc/x", "x", 1, call_of(&call), NULL),
	                 AKS_EPOLICY);
	/* install_packages is not implemented: the host refuses it. */
	static const char *const pkgs[] = {"x", NULL};
	assert_int_equal(aks_sandbox_install_packages(a, pkgs, call_of(&call), &r, NULL),
	                 AKS_ECAPABILITY);
	aks_sandbox_close(a);
	aks_sandbox_close(b);
}

static void test_attach_and_destroy(void **state)
{
	(void)state;
	aks_sandbox *sb = create(), *again = NULL;
	aks_error *err = NULL;
	aks_result *r = NULL;
	aks_call call;
	char id[64];

	snprintf(id, sizeof(id), "%s", aks_sandbox_get_id(sb));
	assert_int_equal(aks_sandbox_upload_file(sb, "f", "kept", 4, call_of(&call), NULL), AKS_OK);
	aks_sandbox_close(sb);
	/* Attach returns the same sandbox, state and all (stateful). */
	assert_int_equal(aks_provider_attach(prov, id, call_of(&call), &again, NULL), AKS_OK);
	assert_string_equal(aks_sandbox_get_id(again), id);
	assert_int_equal(aks_sandbox_download_file(again, "f", call_of(&call), &r, NULL), AKS_OK);
	aks_result_free(r);
	r = NULL;
	/* Destroy while a handle is open: the handle answers gone. */
	destroy(id);
	assert_int_equal(aks_sandbox_execute_code(again, "x", "python", call_of(&call), &r, NULL),
	                 AKS_EGONE);
	aks_result_free(r);
	aks_sandbox_close(again);
	destroy(id);
	destroy("never-existed");
	again = NULL;
	assert_int_equal(aks_provider_attach(prov, id, call_of(&call), &again, &err), AKS_EGONE);
	assert_null(again);
	assert_non_null(strstr(aks_error_message(err), id));
	aks_error_free(err);
}

/* The vanish marker loses the sandbox under the operation, as a backend deleting it would:
 * the operation and every later attach answer gone; another sandbox is untouched. */
static void test_vanish_marker(void **state)
{
	(void)state;
	aks_sandbox *sb = create(), *other = create(), *again = NULL;
	aks_result *r = NULL;
	aks_call call;
	char id[64];

	snprintf(id, sizeof(id), "%s", aks_sandbox_get_id(sb));
	assert_int_equal(
	    aks_sandbox_execute_command(sb, "echo __vanish__", call_of(&call), &r, NULL),
	    AKS_EGONE);
	assert_null(r);
	assert_int_equal(aks_sandbox_execute_command(sb, "echo", call_of(&call), &r, NULL),
	                 AKS_EGONE);
	assert_int_equal(aks_provider_attach(prov, id, call_of(&call), &again, NULL), AKS_EGONE);
	assert_null(again);
	assert_int_equal(aks_sandbox_execute_command(other, "still", call_of(&call), &r, NULL),
	                 AKS_OK);
	aks_result_free(r);
	aks_sandbox_close(sb);
	destroy(aks_sandbox_get_id(other));
	aks_sandbox_close(other);
}

/* Each thread works on its own sandboxes and also destroys the sandbox the
 * previous thread created last, so handles die under other threads' feet. */
struct worker {
	pthread_t thread;
	int index;
	int failures;
	char why[256];
};

static struct worker workers[THREADS];
static pthread_mutex_t ids_lock = PTHREAD_MUTEX_INITIALIZER;
static char shared_ids[THREADS][64];

static void *work(void *arg)
{
	struct worker *w = arg;
	char code[64], id[64];
	aks_call call;

	for (int i = 0; i < ROUNDS && !w->failures; i++) {
		aks_sandbox *sb = NULL, *again = NULL;
		aks_result *r = NULL;

		if (aks_provider_create(prov, call_of(&call), &sb, NULL) != AKS_OK) {
			w->failures++;
			snprintf(w->why, sizeof(w->why), "create failed");
			break;
		}
		snprintf(id, sizeof(id), "%s", aks_sandbox_get_id(sb));
		snprintf(code, sizeof(code), "print(%d, %d)", w->index, i);
		if (aks_sandbox_upload_file(sb, "n", code, strlen(code), call_of(&call), NULL) !=
		        AKS_OK ||
		    aks_sandbox_execute_code(sb, code, "python", call_of(&call), &r, NULL) !=
		        AKS_OK ||
		    strcmp(aks_result_get_stdout(r, NULL), code) != 0) {
			w->failures++;
			snprintf(w->why, sizeof(w->why), "round %d: upload or execute failed", i);
		}
		aks_result_free(r);
		r = NULL;
		if (aks_provider_attach(prov, id, call_of(&call), &again, NULL) == AKS_OK) {
			size_t len = 0;
			const unsigned char *data = NULL;
			if (aks_sandbox_download_file(again, "n", call_of(&call), &r, NULL) ==
			    AKS_OK)
				data = aks_result_get_file(r, 0, NULL, NULL, &len);
			if (!data || len != strlen(code) || memcmp(data, code, len) != 0) {
				w->failures++;
				snprintf(w->why, sizeof(w->why), "round %d: wrong file content", i);
			}
			aks_result_free(r);
			aks_sandbox_close(again);
		} else {
			w->failures++;
			snprintf(w->why, sizeof(w->why), "round %d: attach to own sandbox failed",
			         i);
		}
		aks_sandbox_close(sb);

		/* Publish this id, and destroy the neighbour's latest. */
		char victim[64];
		pthread_mutex_lock(&ids_lock);
		snprintf(shared_ids[w->index], sizeof(shared_ids[0]), "%s", id);
		snprintf(victim, sizeof(victim), "%s", shared_ids[(w->index + 1) % THREADS]);
		pthread_mutex_unlock(&ids_lock);
		if (victim[0] &&
		    aks_provider_destroy(prov, victim, call_of(&call), NULL) != AKS_OK) {
			w->failures++;
			snprintf(w->why, sizeof(w->why), "round %d: destroy failed", i);
		}
		if (aks_provider_destroy(prov, id, call_of(&call), NULL) != AKS_OK) {
			w->failures++;
			snprintf(w->why, sizeof(w->why), "round %d: destroy of own failed", i);
		}
	}
	return NULL;
}

static void test_threads(void **state)
{
	(void)state;
	for (int i = 0; i < THREADS; i++) {
		workers[i].index = i;
		assert_int_equal(pthread_create(&workers[i].thread, NULL, work, &workers[i]), 0);
	}
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_join(workers[i].thread, NULL), 0);
	for (int i = 0; i < THREADS; i++)
		if (workers[i].failures)
			fail_msg("thread %d: %s", i, workers[i].why);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_capabilities),   cmocka_unit_test(test_id_is_uuid4_hex),
	    cmocka_unit_test(test_execute_echoes), cmocka_unit_test(test_marker_fails_the_program),
	    cmocka_unit_test(test_files),          cmocka_unit_test(test_attach_and_destroy),
	    cmocka_unit_test(test_vanish_marker),  cmocka_unit_test(test_threads),
	};
	return cmocka_run_group_tests_name("fake-provider", tests, open_fake, close_fake);
}
