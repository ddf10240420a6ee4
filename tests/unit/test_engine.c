/* Unit tests: aks__engine_run (core/session/engine.h), the one function through which both
 * the in-process brokers and the queue worker run an operation in a session. Over the fake
 * provider: a new sandbox is recorded (through the caller's hook) once, before it is used; a
 * kept handle serves the next operation; a kept handle whose sandbox went away is retried
 * after a normal acquire, which recreates it with the notice - exactly once, even when the
 * retry's sandbox goes away too; a failing record destroys the sandbox it could not record;
 * a handle that is not to be kept is closed; a gone attached environment is an error, never
 * provisioned; and the request's output tap is what the execution streams to.
 *
 * Effects are observed through the fake's create_log and destroy_log (one id a line), the
 * record hook's calls and the provider's handle cache. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/plugin/handle_cache.h"
#include "core/plugin/result.h"
#include "core/session/engine.h"

static const char *const no_env[] = {NULL};

typedef struct fixture {
	char dir[64];
	aks_settings *settings;
	aks_profile *managed, *attached;
	aks_principal principal;
	/* the record hook's view */
	int records;
	char recorded[64];
	int record_fails; /* an error code to fail with, or 0 */
} fixture;

static int setup(void **state)
{
	fixture *fx = calloc(1, sizeof(*fx));
	if (!fx)
		return -1;
	strcpy(fx->dir, "/tmp/aks-engine-XXXXXX");
	if (!mkdtemp(fx->dir))
		return -1;
	char cfg[128];
	snprintf(cfg, sizeof(cfg), "%s/config.yaml", fx->dir);
	FILE *f = fopen(cfg, "w");
	if (!f)
		return -1;
	fprintf(f,
	        "sandbox:\n"
	        "  enabled: true\n"
	        "  default_profile: p\n"
	        "  profiles:\n"
	        "    p: {type: fake, fake: {create_log: %s/creates.log, destroy_log: "
	        "%s/destroys.log}}\n"
	        "    ext: {type: fake, environment: attached,\n"
	        "          fake: {attaches_external: true, attach_to: ext-1}}\n",
	        fx->dir, fx->dir);
	aks_error *err = NULL;
	if (fclose(f) != 0 || aks_settings_load(cfg, no_env, &fx->settings, &err) < 0 ||
	    aks_settings_find_profile(fx->settings, "p", &fx->managed, &err) < 0 ||
	    aks_settings_find_profile(fx->settings, "ext", &fx->attached, &err) < 0) {
		fprintf(stderr, "setup: %s\n", err ? aks_error_message(err) : "config");
		aks_error_free(err);
		return -1;
	}
	aks_principal_init(&fx->principal, "agent");
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	fixture *fx = *state;
	aks_settings_free(fx->settings);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx->dir);
	int rc = system(cmd);
	free(fx);
	return rc == 0 ? 0 : -1;
}

static int record(void *ctx, const aks_session_rec *s, aks_error **err)
{
	fixture *fx = ctx;
	fx->records++;
	assert_non_null(s->sandbox_id);
	assert_false(s->closed);
	snprintf(fx->recorded, sizeof(fx->recorded), "%s", s->sandbox_id);
	if (fx->record_fails)
		return aks__error_set(err, fx->record_fails, "the test's record fails");
	return AKS_OK;
}

/* Runs `command` in session s of profile p through the engine. */
static int run(fixture *fx, const aks_profile *p, aks_session_rec *s, const char *command,
               bool keep_handle, aks_output_tap *tap, aks_engine_outcome *out, aks_error **err)
{
	aks_mgr_request req = {.op = AKS_MGR_EXECUTE_COMMAND, .command = command, .output = tap};
	aks_engine_op op = {.profile = p,
	                    .req = &req,
	                    .principal = &fx->principal,
	                    .keep_handle = keep_handle,
	                    .record = record,
	                    .record_ctx = fx};
	return aks__engine_run(&op, s, out, err);
}

static size_t log_lines(const fixture *fx, const char *name)
{
	char path[128];
	snprintf(path, sizeof(path), "%s/%s", fx->dir, name);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = 0;
	for (int c; (c = fgetc(f)) != EOF;)
		n += c == '\n';
	fclose(f);
	return n;
}

static bool log_has(const fixture *fx, const char *name, const char *id)
{
	char path[128], line[128];
	snprintf(path, sizeof(path), "%s/%s", fx->dir, name);
	FILE *f = fopen(path, "r");
	bool found = false;
	while (f && !found && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		found = strcmp(line, id) == 0;
	}
	if (f)
		fclose(f);
	return found;
}

static size_t kept_handles(const aks_profile *p)
{
	return aks__handle_cache_size(aks__provider_handles(aks_profile_get_provider(p)));
}

static const char *stdout_of(const aks_result *r)
{
	size_t n = 0;
	return aks_result_get_stdout(r, &n);
}

/* Runs `command` and expects it to succeed; the outcome's result and notice are freed. */
static void run_ok(fixture *fx, aks_session_rec *s, const char *command, aks_engine_outcome *out)
{
	aks_error *err = NULL;
	int rc = run(fx, fx->managed, s, command, true, NULL, out, &err);
	if (rc != AKS_OK)
		fail_msg("%s: %s", command, aks_error_message(err));
	assert_non_null(out->result);
	assert_string_equal(stdout_of(out->result), command);
	assert_true(out->ran);
	aks_result_free(out->result);
	free(out->notice);
	out->result = NULL;
	out->notice = NULL;
}

/* A new sandbox is recorded once, before use; the kept handle serves the next operation. */
static void test_records_once_then_keeps(void **state)
{
	fixture *fx = *state;
	aks_session_rec s = {.id = "s1"};
	aks_engine_outcome out;
	run_ok(fx, &s, "one", &out);
	assert_int_equal(fx->records, 1);
	assert_non_null(s.sandbox_id);
	assert_string_equal(s.sandbox_id, fx->recorded);
	assert_false(s.closed);
	assert_true(s.last_used_at > 0);
	assert_false(out.reacquired);
	assert_int_equal(kept_handles(fx->managed), 1);
	char *first = strdup(s.sandbox_id);
	run_ok(fx, &s, "two", &out);
	assert_string_equal(s.sandbox_id, first);
	assert_int_equal(fx->records, 1); /* the same sandbox: nothing new to record */
	assert_int_equal(log_lines(fx, "creates.log"), 1);
	assert_false(out.reacquired);
	free(first);
	aks__engine_destroy(fx->managed, &s);
	assert_int_equal(kept_handles(fx->managed), 0);
}

/* The kept handle's sandbox is deleted behind this process's back: the operation is run
 * again after a normal acquire, which recreates the sandbox and says so. */
static void test_kept_handle_gone_self_heals(void **state)
{
	fixture *fx = *state;
	aks_session_rec s = {.id = "s1"};
	aks_engine_outcome out;
	run_ok(fx, &s, "one", &out);
	char *old = strdup(s.sandbox_id);
	aks_call call;
	aks_call_init(&call, 10, NULL, NULL, NULL);
	assert_int_equal(
	    aks_provider_destroy(aks_profile_get_provider(fx->managed), old, &call, NULL), AKS_OK);
	assert_int_equal(kept_handles(fx->managed), 1); /* the cache does not know */
	aks_error *err = NULL;
	assert_int_equal(run(fx, fx->managed, &s, "two", true, NULL, &out, &err), AKS_OK);
	assert_null(err);
	assert_true(out.reacquired);
	assert_true(out.ran);
	assert_string_equal(stdout_of(out.result), "two");
	assert_non_null(out.notice);
	assert_non_null(strstr(out.notice, "no longer existed and was recreated empty"));
	assert_null(aks_result_get_notice(out.result)); /* the caller places it */
	assert_string_not_equal(s.sandbox_id, old);
	assert_int_equal(fx->records, 2);
	assert_string_equal(fx->recorded, s.sandbox_id);
	assert_int_equal(log_lines(fx, "creates.log"), 2);
	aks_result_free(out.result);
	free(out.notice);
	free(old);
	aks__engine_destroy(fx->managed, &s);
}

/* The retry's own sandbox goes away under it too: its failure is the answer. One retry, one
 * new sandbox, never a loop. */
static void test_retried_exactly_once(void **state)
{
	fixture *fx = *state;
	aks_session_rec s = {.id = "s1"};
	aks_engine_outcome out;
	run_ok(fx, &s, "one", &out);
	aks_error *err = NULL;
	assert_int_equal(run(fx, fx->managed, &s, "__vanish__", true, NULL, &out, &err), AKS_EGONE);
	assert_non_null(err);
	assert_non_null(strstr(aks_error_message(err), "was destroyed"));
	assert_true(out.reacquired);
	assert_true(out.ran);
	assert_null(out.result);
	assert_non_null(out.notice); /* what the retry recreated is told even on failure */
	assert_int_equal(log_lines(fx, "creates.log"), 2);
	assert_int_equal(fx->records, 2); /* the retry's sandbox was recorded before use */
	assert_string_equal(fx->recorded, s.sandbox_id);
	assert_int_equal(kept_handles(fx->managed), 0); /* a gone sandbox's handle is closed */
	free(out.notice);
	aks_error_free(err);
	aks__engine_destroy(fx->managed, &s);
}

/* A sandbox that cannot be recorded is destroyed, and the operation never runs. */
static void test_record_failure_destroys(void **state)
{
	fixture *fx = *state;
	fx->record_fails = AKS_EIO;
	aks_session_rec s = {.id = "s1"};
	aks_engine_outcome out;
	aks_error *err = NULL;
	assert_int_equal(run(fx, fx->managed, &s, "one", true, NULL, &out, &err), AKS_EIO);
	assert_string_equal(aks_error_message(err), "the test's record fails");
	assert_false(out.ran);
	assert_null(out.result);
	assert_null(s.sandbox_id);
	assert_true(s.closed);
	assert_int_equal(log_lines(fx, "creates.log"), 1);
	assert_true(log_has(fx, "destroys.log", fx->recorded));
	assert_int_equal(kept_handles(fx->managed), 0);
	aks_error_free(err);
}

/* keep_handle false (the manager's per_call): the handle is the operation's own. */
static void test_own_handle_closed(void **state)
{
	fixture *fx = *state;
	aks_session_rec s = {.id = "s1"};
	aks_engine_outcome out;
	aks_error *err = NULL;
	assert_int_equal(run(fx, fx->managed, &s, "one", false, NULL, &out, &err), AKS_OK);
	assert_int_equal(kept_handles(fx->managed), 0);
	assert_non_null(s.sandbox_id);
	aks_result_free(out.result);
	aks__engine_destroy(fx->managed, &s);
	assert_true(log_has(fx, "destroys.log", fx->recorded));
}

/* A gone attached environment is an error, never a reason to provision one. */
static void test_attached_gone_is_error(void **state)
{
	fixture *fx = *state;
	aks_call call;
	aks_call_init(&call, 10, NULL, NULL, NULL);
	assert_int_equal(
	    aks_provider_destroy(aks_profile_get_provider(fx->attached), "ext-1", &call, NULL),
	    AKS_OK);
	aks_session_rec s = {.id = "s1"};
	aks_engine_outcome out;
	aks_error *err = NULL;
	assert_int_equal(run(fx, fx->attached, &s, "one", true, NULL, &out, &err), AKS_EGONE);
	assert_non_null(strstr(aks_error_message(err), "never provisioned by the framework"));
	assert_false(out.ran);
	assert_null(out.notice);
	assert_int_equal(fx->records, 0);
	aks_error_free(err);
}

typedef struct tapped {
	char seen[64];
	size_t n;
} tapped;

static void on_output(void *userdata, int stream, const void *data, size_t len)
{
	tapped *t = userdata;
	assert_int_equal(stream, AKS_STREAM_STDOUT);
	if (t->n + len < sizeof(t->seen)) {
		memcpy(t->seen + t->n, data, len);
		t->n += len;
	}
}

/* The request's tap is what the execution streams to; a later call without one is not. */
static void test_tap_is_the_requests(void **state)
{
	fixture *fx = *state;
	tapped t = {{0}, 0};
	aks_output_tap *tap = aks__output_tap_new(on_output, &t);
	assert_non_null(tap);
	aks_session_rec s = {.id = "s1"};
	aks_engine_outcome out;
	aks_error *err = NULL;
	assert_int_equal(run(fx, fx->managed, &s, "streamed", true, tap, &out, &err), AKS_OK);
	assert_string_equal(t.seen, "streamed");
	aks_result_free(out.result);
	assert_int_equal(run(fx, fx->managed, &s, "quiet", true, NULL, &out, &err), AKS_OK);
	assert_string_equal(t.seen, "streamed");
	aks_result_free(out.result);
	aks__output_tap_detach(tap);
	aks__output_tap_unref(tap);
	aks__engine_destroy(fx->managed, &s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_records_once_then_keeps, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_kept_handle_gone_self_heals, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_retried_exactly_once, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_record_failure_destroys, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_own_handle_closed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_attached_gone_is_error, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tap_is_the_requests, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
