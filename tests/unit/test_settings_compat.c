/* Unit tests: configs written for the original load unchanged (issue 17) — provider blocks
 * for other types are inactive, not errors, and still checked against their own plugins; the
 * type switched by AK_SANDBOX__TYPE; extra broker keys warned; broker plugins refused at load;
 * the seeds' default broker; bring-your-own providers' params validated by their schemas. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aksandbox/aksandbox.h>

#include "settings_fixture.h"

static const char head[] = "sandbox:\n  enabled: true\n  profiles:\n    p:\n"
                           "      type: local_subprocess\n      local_subprocess: {}\n";

static bool starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static aks_profile *profile_named(aks_settings *s, const char *name)
{
	aks_profile *p = NULL;
	aks_error *err = NULL;
	if (aks_settings_find_profile(s, name, &p, &err) != AKS_OK)
		fail_msg("%s", aks_error_message(err));
	return p;
}

/* The inactive block `name` of p: its state, and its detail in *detail. */
static int block_state(const aks_profile *p, const char *name, const char **detail)
{
	for (size_t i = 0; i < aks_profile_get_inactive_block_count(p); i++) {
		int state = -1;
		const char *got = aks_profile_get_inactive_block(p, i, &state, detail);
		if (strcmp(got, name) == 0)
			return state;
	}
	fail_msg("no inactive block '%s'", name);
	return -1;
}

/* The original ignores a block for another type; we accept it, check it with its plugin. */
static void test_inactive_blocks_load(void **state)
{
	(void)state;
	char yaml[1024];
	snprintf(yaml, sizeof(yaml),
	         "%s      docker: {image: 'python:3.12-slim', runtime: runsc}\n"
	         "      e2b: {template: base}\n"
	         "      bedrock_agentcore: {region: us-east-1}\n"
	         "      fake: {create_delay: 0}\n",
	         head);
	aks_settings *s = load_ok(yaml);
	aks_profile *p = profile_named(s, "p");
	assert_string_equal(aks_profile_get_type(p), "local_subprocess");
	assert_int_equal(aks_profile_get_inactive_block_count(p), 4);
	const char *detail = NULL;
	assert_int_equal(block_state(p, "docker", &detail), AKS_BLOCK_VALID);
	assert_non_null(strstr(detail, "/docker.so"));
	assert_int_equal(block_state(p, "e2b", &detail), AKS_BLOCK_VALID);
	/* a third party's installed provider: its block is one too */
	assert_int_equal(block_state(p, "fake", &detail), AKS_BLOCK_VALID);
	assert_non_null(strstr(detail, "/fake.so"));
	/* no plugin ships for bedrock_agentcore: accepted, not checked, and says why */
	assert_int_equal(block_state(p, "bedrock_agentcore", &detail), AKS_BLOCK_UNCHECKED);
	assert_non_null(strstr(detail, "plugin 'bedrock_agentcore' not found"));
	assert_int_equal(aks_settings_get_warning_count(s), 0);
	assert_null(aks_settings_get_warning(s, 0));
	assert_null(aks_profile_get_inactive_block(p, 4, NULL, NULL));
	/* the active block is not among them */
	for (size_t i = 0; i < aks_profile_get_inactive_block_count(p); i++)
		assert_string_not_equal(aks_profile_get_inactive_block(p, i, NULL, NULL),
		                        "local_subprocess");
	aks_settings_free(s);
}

/* A typo in a dormant block is a warning with its place, and the load goes on. */
static void test_inactive_block_typo_warned(void **state)
{
	(void)state;
	char yaml[1024];
	snprintf(yaml, sizeof(yaml), "%s      docker: {imagee: x}\n", head);
	aks_settings *s = load_ok(yaml);
	aks_profile *p = profile_named(s, "p");
	const char *detail = NULL;
	assert_int_equal(block_state(p, "docker", &detail), AKS_BLOCK_INVALID);
	char want[PATH_MAX + 512];
	snprintf(want, sizeof(want),
	         "%s:7:16: unknown key 'imagee' in the sandbox.profiles.p.docker block; did you "
	         "mean 'image'?",
	         config_path);
	assert_string_equal(detail, want);
	assert_int_equal(aks_settings_get_warning_count(s), 1);
	const char *warning = aks_settings_get_warning(s, 0);
	assert_true(starts_with(warning, want));
	assert_non_null(strstr(warning, "an inactive block"));
	/* the profile works all the same */
	assert_non_null(aks_profile_get_provider(p));
	aks_settings_free(s);
}

/* What is neither a profile key nor a provider's block is still refused. */
static void test_unknown_keys_refused(void **state)
{
	(void)state;
	char yaml[1024];
	snprintf(yaml, sizeof(yaml), "%s      acme_cloud: {}\n", head);
	char *msg = load_err(yaml);
	assert_true(starts_with(msg, "config.yaml:7:7: unknown key 'sandbox.profiles.p.acme_cloud' "
	                             "(known keys: type, scope,"));
	free(msg);
	/* an installed plugin that is no provider cannot be any profile's block */
	snprintf(yaml, sizeof(yaml), "%s      memstore: {}\n", head);
	msg = load_err(yaml);
	assert_true(starts_with(msg, "config.yaml:7:7: sandbox.profiles.p.memstore: 'memstore' is "
	                             "a store plugin ("));
	assert_non_null(strstr(msg, "not a provider: no profile type can use this block"));
	free(msg);
}

/* One file, a block per backend, the backend chosen per deployment by AK_SANDBOX__TYPE. */
static void test_type_switched_by_env(void **state)
{
	(void)state;
	const char *yaml = "sandbox:\n  enabled: true\n  type: local_subprocess\n"
	                   "  local_subprocess: {}\n  docker: {image: 'python:3.12-slim'}\n"
	                   "  kubernetes: {namespace: sandboxes}\n";
	aks_settings *s = load_ok(yaml);
	aks_profile *p = profile_named(s, NULL);
	assert_string_equal(aks_profile_get_type(p), "local_subprocess");
	assert_int_equal(aks_profile_get_inactive_block_count(p), 2);
	assert_int_equal(block_state(p, "docker", NULL), AKS_BLOCK_VALID);
	assert_int_equal(block_state(p, "kubernetes", NULL), AKS_BLOCK_VALID);
	aks_settings_free(s);

	const char *const to_docker[] = {"AK_SANDBOX__TYPE=docker", NULL};
	s = load_ok_env(yaml, to_docker);
	p = profile_named(s, NULL);
	assert_string_equal(aks_profile_get_type(p), "docker");
	assert_string_equal(
	    aks_plugin_get_descriptor(aks_provider_get_plugin(aks_profile_get_provider(p)))->name,
	    "docker");
	assert_int_equal(aks_profile_get_inactive_block_count(p), 2);
	assert_int_equal(block_state(p, "local_subprocess", NULL), AKS_BLOCK_VALID);
	assert_int_equal(block_state(p, "kubernetes", NULL), AKS_BLOCK_VALID);
	aks_settings_free(s);

	/* switched to a type whose block the file lacks: the original's message */
	const char *const to_e2b[] = {"AK_SANDBOX__TYPE=e2b", NULL};
	char *msg = load_err_env(yaml, to_e2b, AKS_ECONFIG);
	assert_string_equal(msg, "environment variable AK_SANDBOX__TYPE: sandbox profile 'default' "
	                         "selects built-in provider 'e2b' but its 'e2b' config block is "
	                         "missing");
	free(msg);
}

/* The sugar's resolver block (`principal_resolver: NAME` reads `NAME:`) is not inactive. */
static void test_resolver_block_not_inactive(void **state)
{
	(void)state;
	setenv("AKS_COMPAT_TEST_SECRET", "a-secret-for-tests", 1);
	aks_settings *s = load_ok("sandbox:\n  enabled: true\n  type: local_subprocess\n"
	                          "  local_subprocess: {}\n  principal_resolver: signed_token\n"
	                          "  signed_token: {secret_env: AKS_COMPAT_TEST_SECRET}\n"
	                          "  docker: {}\n");
	aks_profile *p = profile_named(s, NULL);
	assert_int_equal(aks_profile_get_inactive_block_count(p), 1);
	assert_string_equal(aks_profile_get_inactive_block(p, 0, NULL, NULL), "docker");
	aks_settings_free(s);
	unsetenv("AKS_COMPAT_TEST_SECRET");
}

/* A disabled sandbox loads no plugin: its inactive blocks are listed, unchecked. */
static void test_disabled_blocks_unchecked(void **state)
{
	(void)state;
	aks_settings *s = load_ok("sandbox:\n  type: local_subprocess\n  local_subprocess: {}\n"
	                          "  docker: {imagee: typo}\n");
	aks_profile *p = aks_settings_get_profile(s, 0);
	const char *detail = NULL;
	assert_int_equal(block_state(p, "docker", &detail), AKS_BLOCK_UNCHECKED);
	assert_string_equal(detail, "the sandbox is disabled: no plugin is loaded");
	assert_int_equal(aks_settings_get_warning_count(s), 0);
	aks_settings_free(s);
}

/* The original allows extra keys in sandbox.broker: warned (with a suggestion), not refused;
 * its removed keys pass silently. */
static void test_broker_extra_keys_warned(void **state)
{
	(void)state;
	aks_settings *s = load_ok("sandbox:\n  broker:\n    wait_timout: 3\n    tracing: on\n"
	                          "    request_queue_url: https://sqs.example/q\n"
	                          "    object_store_bucket: b\n");
	assert_int_equal(aks_settings_get_warning_count(s), 2);
	char want[PATH_MAX + 512];
	snprintf(want, sizeof(want),
	         "%s:3:5: unknown key 'sandbox.broker.wait_timout' is ignored; did you mean "
	         "'wait_timeout'?",
	         config_path);
	assert_string_equal(aks_settings_get_warning(s, 0), want);
	snprintf(want, sizeof(want), "%s:4:5: unknown key 'sandbox.broker.tracing' is ignored",
	         config_path);
	assert_true(starts_with(aks_settings_get_warning(s, 1), want));
	/* ignored means ignored: the misspelt value did not set wait_timeout */
	assert_true(aks_settings_get_wait_timeout(s) == 60.0);
	aks_settings_free(s);
	/* elsewhere an unknown key is still an error */
	char *msg = load_err("sandbox:\n  broker:\n    queue: {type: nats, inptu: {}}\n");
	assert_string_equal(msg, "config.yaml:3:25: unknown key 'sandbox.broker.queue.inptu'; did "
	                         "you mean 'input'?");
	free(msg);
}

/* A broker plugin (the original's dotted path) is refused when the file loads, not at the
 * first call. */
static void test_broker_plugin_refused_at_load(void **state)
{
	(void)state;
	char *msg = load_err("sandbox:\n  broker: {flavor: /opt/acme/broker.so}\n");
	assert_string_equal(
	    msg, "config.yaml:2:20: sandbox.broker.flavor: '/opt/acme/broker.so': broker plugins "
	         "are not supported by this build; use flavor 'thread', 'embedded' or 'queue' (a "
	         "queue transport or response store may be a plugin: see "
	         "sandbox.broker.queue.type)");
	free(msg);
	msg = load_err("sandbox:\n  enabled: false\n  broker: {flavor: acme.brokers.Fast}\n");
	assert_non_null(strstr(msg, "config.yaml:3:20: sandbox.broker.flavor: "
	                            "'acme.brokers.Fast': broker plugins are not supported"));
	free(msg);
}

/* A bring-your-own provider reads `params`, validated against its own schema. */
static void test_params_validated(void **state)
{
	(void)state;
	const char *pre = "sandbox:\n  enabled: true\n  profiles:\n    p:\n      type: fake\n";
	char yaml[1024];
	snprintf(yaml, sizeof(yaml), "%s      params: {create_delay: 0.25, attach_to: null}\n",
	         pre);
	aks_settings *s = load_ok(yaml);
	aks_profile *p = profile_named(s, "p");
	assert_string_equal(aks_profile_get_params(p),
	                    "{\"create_delay\":0.25,\"attach_to\":null}");
	aks_settings_free(s);
	snprintf(yaml, sizeof(yaml), "%s      params: {create_dealy: 1}\n", pre);
	char *msg = load_err(yaml);
	assert_string_equal(msg, "config.yaml:6:16: unknown key 'create_dealy' in the "
	                         "sandbox.profiles.p.params block; did you mean 'create_delay'?");
	free(msg);
	snprintf(yaml, sizeof(yaml), "%s      params: {create_delay: soon}\n", pre);
	msg = load_err(yaml);
	assert_non_null(strstr(msg, "config.yaml:6:30: sandbox.profiles.p.params.create_delay: "
	                            "'soon' is not a number"));
	free(msg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_inactive_blocks_load),
	    cmocka_unit_test(test_inactive_block_typo_warned),
	    cmocka_unit_test(test_unknown_keys_refused),
	    cmocka_unit_test(test_type_switched_by_env),
	    cmocka_unit_test(test_resolver_block_not_inactive),
	    cmocka_unit_test(test_disabled_blocks_unchecked),
	    cmocka_unit_test(test_broker_extra_keys_warned),
	    cmocka_unit_test(test_broker_plugin_refused_at_load),
	    cmocka_unit_test(test_params_validated),
	};
	return cmocka_run_group_tests_name("settings_compat", tests, settings_setup,
	                                   settings_teardown);
}
