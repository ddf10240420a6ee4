/* Unit tests: sandbox sessions in the state store — minting, lookup, listing,
 * removal, scopes, and isolation between conversations. */
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

#include <json-c/json.h>

#include "core/session/sessions.h"

static char dir[] = "/tmp/aks-sessions-XXXXXX";
static const char *const no_env[] = {NULL};

typedef struct fixture {
	aks_state_store *store;
	aks_settings *settings;
} fixture;

static int setup(void **state)
{
	if (!mkdtemp(dir))
		return -1;
	char cfg[256], store[256];
	snprintf(cfg, sizeof(cfg), "%s/config.yaml", dir);
	snprintf(store, sizeof(store), "%s/state", dir);
	FILE *f = fopen(cfg, "w");
	if (!f)
		return -1;
	fputs("sandbox:\n"
	      "  enabled: true\n"
	      "  default_profile: work\n"
	      "  profiles:\n"
	      "    work: {type: local_subprocess, local_subprocess: {}}\n"
	      "    scratch: {type: local_subprocess, scope: per_call, local_subprocess: {}}\n"
	      "    shared: {type: local_subprocess, scope: per_runtime, local_subprocess: {}}\n",
	      f);
	fclose(f);
	fixture *fx = calloc(1, sizeof(*fx));
	aks_error *err = NULL;
	if (aks_settings_load(cfg, no_env, &fx->settings, &err) < 0 ||
	    aks__store_open(store, &fx->store, &err) < 0) {
		fprintf(stderr, "setup: %s\n", aks_error_message(err));
		return -1;
	}
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	fixture *fx = *state;
	aks__store_close(fx->store);
	aks_settings_free(fx->settings);
	free(fx);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_uuid4(void **state)
{
	(void)state;
	char a[33], b[33];
	assert_int_equal(aks__uuid4_hex(a, NULL), AKS_OK);
	assert_int_equal(aks__uuid4_hex(b, NULL), AKS_OK);
	assert_int_equal(strlen(a), 32);
	assert_int_equal(strspn(a, "0123456789abcdef"), 32);
	assert_int_equal(a[12], '4');
	assert_string_not_equal(a, b);
}

/* The record's JSON keeps the tally of egress refusals, and a record without one (the
 * reference's, or one whose policy refused nothing) reads as 0 and is written without it. */
static void test_egress_refused_round_trip(void **state)
{
	(void)state;
	aks_session_rec r = {.id = "default:p", .profile = "p", .egress_refused = 7};
	struct json_object *o = aks__session_to_json(&r);
	assert_non_null(o);
	assert_int_equal(json_object_get_int(json_object_object_get(o, "egress_refused")), 7);
	aks_session_rec back;
	assert_int_equal(aks__session_from_json(o, &back, NULL), AKS_OK);
	assert_int_equal(back.egress_refused, 7);
	aks__session_clear(&back);
	json_object_put(o);
	r.egress_refused = 0;
	o = aks__session_to_json(&r);
	assert_null(json_object_object_get(o, "egress_refused"));
	assert_int_equal(aks__session_from_json(o, &back, NULL), AKS_OK);
	assert_int_equal(back.egress_refused, 0);
	aks__session_clear(&back);
	json_object_put(o);
}

static void test_new_find_list_remove(void **state)
{
	fixture *fx = *state;
	aks_session_rec rec, found;
	aks_error *err = NULL;
	assert_int_equal(
	    aks__sessions_new(fx->store, fx->settings, "conv-a", NULL, "uv-project", &rec, &err),
	    AKS_OK);
	assert_int_equal(strlen(rec.id), 32);
	assert_string_equal(rec.profile, "work");
	assert_string_equal(rec.provider_type, "local_subprocess");
	assert_null(rec.sandbox_id);
	assert_false(rec.closed);
	assert_int_equal(aks__sessions_find(fx->store, "conv-a", rec.id, &found, &err), AKS_OK);
	assert_string_equal(found.name, "uv-project");
	assert_true(found.created_at == rec.created_at);
	aks__session_clear(&found);

	aks_session_rec *list = NULL;
	size_t count = 0;
	assert_int_equal(aks__sessions_list(fx->store, "conv-a", &list, &count, &err), AKS_OK);
	assert_int_equal(count, 1);
	assert_string_equal(list[0].id, rec.id);
	aks__session_clear(&list[0]);
	free(list);

	assert_int_equal(aks__sessions_remove(fx->store, "conv-a", rec.id, &err), AKS_OK);
	assert_int_equal(aks__sessions_find(fx->store, "conv-a", rec.id, &found, &err),
	                 AKS_ENOTFOUND);
	/* Removing again is a no-op. */
	assert_int_equal(aks__sessions_remove(fx->store, "conv-a", rec.id, &err), AKS_OK);
	aks__session_clear(&rec);
}

static void test_conversations_are_isolated(void **state)
{
	fixture *fx = *state;
	aks_session_rec rec, found;
	aks_error *err = NULL;
	assert_int_equal(
	    aks__sessions_new(fx->store, fx->settings, "conv-a", "work", NULL, &rec, &err), AKS_OK);
	assert_int_equal(aks__sessions_find(fx->store, "conv-b", rec.id, &found, &err),
	                 AKS_ENOTFOUND);
	aks_session_rec *list = NULL;
	size_t count = 0;
	assert_int_equal(aks__sessions_list(fx->store, "conv-b", &list, &count, &err), AKS_OK);
	assert_int_equal(count, 0);
	free(list);
	aks__sessions_remove(fx->store, "conv-a", rec.id, &err);
	aks__session_clear(&rec);
}

static void test_runtime_sessions_are_shared(void **state)
{
	fixture *fx = *state;
	aks_profile *shared = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_settings_find_profile(fx->settings, "shared", &shared, &err), AKS_OK);
	const char *ns = aks__session_ns(shared, "conv-a");
	assert_string_equal(ns, AKS_STORE_NS_RUNTIME);
	aks_session_rec rec = {.id = "default:shared",
	                       .profile = "shared",
	                       .provider_type = "local_subprocess",
	                       .created_at = 1,
	                       .last_used_at = 1};
	assert_int_equal(aks__sessions_save(fx->store, ns, &rec, &err), AKS_OK);
	aks_session_rec found;
	assert_int_equal(aks__sessions_find(fx->store, "conv-b", "default:shared", &found, &err),
	                 AKS_OK);
	assert_string_equal(found.profile, "shared");
	aks__session_clear(&found);
	aks_session_rec *list = NULL;
	size_t count = 0;
	assert_int_equal(aks__sessions_list(fx->store, "conv-z", &list, &count, &err), AKS_OK);
	assert_int_equal(count, 1);
	assert_string_equal(list[0].id, "default:shared");
	aks__session_clear(&list[0]);
	free(list);
	assert_int_equal(aks__sessions_remove(fx->store, ns, "default:shared", &err), AKS_OK);
}

static void test_only_per_session_profiles_mint(void **state)
{
	fixture *fx = *state;
	aks_session_rec rec;
	aks_error *err = NULL;
	assert_int_equal(
	    aks__sessions_new(fx->store, fx->settings, "conv-a", "shared", NULL, &rec, &err),
	    AKS_ECONFIG);
	assert_string_equal(
	    aks_error_message(err),
	    "cannot mint a new sandbox session for profile 'shared': scope "
	    "'per_runtime' does not support explicit sessions (per_call is ephemeral "
	    "per execution; per_runtime is a single shared session)");
	aks_error_free(err);
	err = NULL;
	assert_int_equal(
	    aks__sessions_new(fx->store, fx->settings, "conv-a", "scratch", NULL, &rec, &err),
	    AKS_ECONFIG);
	assert_non_null(strstr(aks_error_message(err), "scope 'per_call'"));
	aks_error_free(err);
	err = NULL;
	assert_int_equal(
	    aks__sessions_new(fx->store, fx->settings, "conv-a", "nope", NULL, &rec, &err),
	    AKS_ECONFIG);
	assert_string_equal(aks_error_message(err), "unknown sandbox profile 'nope'; configured "
	                                            "profiles: ['scratch', 'shared', 'work']");
	aks_error_free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_uuid4),
	    cmocka_unit_test(test_egress_refused_round_trip),
	    cmocka_unit_test(test_new_find_list_remove),
	    cmocka_unit_test(test_conversations_are_isolated),
	    cmocka_unit_test(test_runtime_sessions_are_shared),
	    cmocka_unit_test(test_only_per_session_profiles_mint),
	};
	return cmocka_run_group_tests_name("sessions", tests, setup, teardown);
}
