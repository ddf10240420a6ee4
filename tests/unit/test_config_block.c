/* Unit tests: plugin config blocks validated against a declared schema. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/config/block.h"
#include "core/config/yaml_tree.h"

static const aks_config_key keys[] = {
    AKS_CONFIG_KEY("workdir", AKS_CONFIG_STRING, false, NULL, "base directory"),
    AKS_CONFIG_KEY("image", AKS_CONFIG_STRING, false, "python:3.12-slim", "image"),
    AKS_CONFIG_KEY("network_policy", AKS_CONFIG_BOOL, false, "false", "flag"),
    AKS_CONFIG_KEY("retries", AKS_CONFIG_INT, false, "3", "count"),
    AKS_CONFIG_KEY("create_timeout", AKS_CONFIG_DOUBLE, false, "120.0", "seconds"),
    AKS_CONFIG_KEY("env_passthrough", AKS_CONFIG_STRING_LIST, false, "[]", "names"),
    AKS_CONFIG_KEY("labels", AKS_CONFIG_STRING_MAP, false, "{}", "labels"),
    AKS_CONFIG_KEY("security_context", AKS_CONFIG_JSON, false, "{}", "overlay"),
    AKS_CONFIG_END,
};

static const aks_config_key required_keys[] = {
    AKS_CONFIG_KEY("attach_to", AKS_CONFIG_STRING, true, NULL, "target"),
    AKS_CONFIG_END,
};

static aks_plugin_descriptor desc = {AKS_DESCRIPTOR_VERSION,
                                     sizeof(aks_plugin_descriptor),
                                     AKS_ABI_MAJOR,
                                     AKS_ABI_MINOR,
                                     AKS_PLUGIN_PROVIDER,
                                     "demo",
                                     "1.0",
                                     "MIT",
                                     "demo",
                                     keys,
                                     NULL,
                                     {NULL, NULL, NULL, NULL}};

static int build(const aks_plugin_descriptor *d, const char *yaml, aks_config **out,
                 aks_error **err)
{
	aks_node *root = NULL;
	int rc = aks__yaml_parse(yaml, strlen(yaml), "config.yaml", &root, err);
	if (rc < 0)
		return rc;
	rc = aks__config_build(d, aks__node_get(root, "demo"), "demo", out, err);
	aks__node_free(root);
	return rc;
}

static char *build_err(const aks_plugin_descriptor *d, const char *yaml)
{
	aks_config *cfg = NULL;
	aks_error *err = NULL;
	assert_int_equal(build(d, yaml, &cfg, &err), AKS_ECONFIG);
	assert_null(cfg);
	char *msg = strdup(aks_error_message(err));
	aks_error_free(err);
	return msg;
}

static void test_defaults(void **state)
{
	(void)state;
	aks_config *cfg = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks__config_build(&desc, NULL, "demo", &cfg, &err), AKS_OK);
	const char *s = "unset";
	assert_int_equal(aks__config_string(cfg, "workdir", &s), AKS_OK);
	assert_null(s);
	assert_int_equal(aks__config_string(cfg, "image", &s), AKS_OK);
	assert_string_equal(s, "python:3.12-slim");
	bool b = true;
	assert_int_equal(aks__config_bool(cfg, "network_policy", &b), AKS_OK);
	assert_false(b);
	int64_t i = 0;
	assert_int_equal(aks__config_int(cfg, "retries", &i), AKS_OK);
	assert_int_equal(i, 3);
	double d = 0;
	assert_int_equal(aks__config_double(cfg, "create_timeout", &d), AKS_OK);
	assert_true(d == 120.0);
	const char *const *list = NULL;
	assert_int_equal(aks__config_list(cfg, "env_passthrough", &list), AKS_OK);
	assert_non_null(list);
	assert_null(list[0]);
	assert_int_equal(aks__config_map(cfg, "labels", &list), AKS_OK);
	assert_null(list[0]);
	assert_int_equal(aks__config_json(cfg, "security_context", &s), AKS_OK);
	assert_string_equal(s, "{}");
	aks_config_free(cfg);
}

static void test_values(void **state)
{
	(void)state;
	aks_config *cfg = NULL;
	aks_error *err = NULL;
	int rc =
	    build(&desc,
	          "demo:\n"
	          "  workdir: /tmp/w\n"
	          "  network_policy: yes\n"
	          "  retries: -7\n"
	          "  create_timeout: 2.5\n"
	          "  env_passthrough: [HOME, 'LANG']\n"
	          "  labels: {team: core, tier: '1'}\n"
	          "  security_context: {runAsUser: 1000, readOnly: true, caps: [a], n: null}\n",
	          &cfg, &err);
	if (rc)
		fail_msg("%s", aks_error_message(err));
	const char *s = NULL;
	aks__config_string(cfg, "workdir", &s);
	assert_string_equal(s, "/tmp/w");
	bool b = false;
	aks__config_bool(cfg, "network_policy", &b);
	assert_true(b);
	int64_t i = 0;
	aks__config_int(cfg, "retries", &i);
	assert_int_equal(i, -7);
	const char *const *list = NULL;
	aks__config_list(cfg, "env_passthrough", &list);
	assert_string_equal(list[0], "HOME");
	assert_string_equal(list[1], "LANG");
	assert_null(list[2]);
	aks__config_map(cfg, "labels", &list);
	assert_string_equal(list[0], "team");
	assert_string_equal(list[1], "core");
	assert_string_equal(list[2], "tier");
	assert_string_equal(list[3], "1");
	assert_null(list[4]);
	aks__config_json(cfg, "security_context", &s);
	assert_string_equal(s,
	                    "{\"runAsUser\":1000,\"readOnly\":true,\"caps\":[\"a\"],\"n\":null}");
	aks_config_free(cfg);
}

static void test_unknown_key_suggests(void **state)
{
	(void)state;
	char *msg = build_err(&desc, "demo:\n  wrkdir: /x\n");
	assert_string_equal(msg, "config.yaml:2:3: unknown key 'wrkdir' in the demo block; did you "
	                         "mean 'workdir'?");
	free(msg);
	msg = build_err(&desc, "demo:\n  image: x\n  zzzzzzzz: 1\n");
	assert_string_equal(msg, "config.yaml:3:3: unknown key 'zzzzzzzz' in the demo block (known "
	                         "keys: workdir, image, network_policy, retries, create_timeout, "
	                         "env_passthrough, labels, security_context)");
	free(msg);
}

static void test_type_errors(void **state)
{
	(void)state;
	char *msg = build_err(&desc, "demo:\n  workdir: {a: 1}\n");
	assert_string_equal(msg, "config.yaml:2:12: demo.workdir: expected string, got a mapping");
	free(msg);
	msg = build_err(&desc, "demo:\n  network_policy: maybe\n");
	assert_string_equal(
	    msg, "config.yaml:2:19: demo.network_policy: expected boolean, got a scalar");
	free(msg);
	msg = build_err(&desc, "demo:\n  retries: 3.5\n");
	assert_string_equal(msg, "config.yaml:2:12: demo.retries: '3.5' is not an integer");
	free(msg);
	msg = build_err(&desc, "demo:\n  create_timeout: soon\n");
	assert_string_equal(msg, "config.yaml:2:19: demo.create_timeout: 'soon' is not a number");
	free(msg);
	msg = build_err(&desc, "demo:\n  env_passthrough: HOME\n");
	assert_string_equal(msg,
	                    "config.yaml:2:20: demo.env_passthrough: expected list of strings, got "
	                    "a scalar");
	free(msg);
	msg = build_err(&desc, "demo:\n  env_passthrough: [[a]]\n");
	assert_string_equal(msg, "config.yaml:2:21: demo.env_passthrough: every item must be a "
	                         "string, got a list");
	free(msg);
	msg = build_err(&desc, "demo: [1]\n");
	assert_string_equal(msg, "config.yaml:1:7: the demo block must be a mapping, got a list");
	free(msg);
}

static void test_required(void **state)
{
	(void)state;
	aks_plugin_descriptor d = desc;
	d.config_keys = required_keys;
	char *msg = build_err(&d, "demo: {}\n");
	assert_string_equal(
	    msg, "config.yaml:1:7: the demo block is missing the required key 'attach_to'");
	free(msg);
	aks_config *cfg = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks__config_build(&d, NULL, "demo", &cfg, &err), AKS_ECONFIG);
	assert_string_equal(aks_error_message(err),
	                    "the demo block is missing the required key 'attach_to'");
	aks_error_free(err);
}

static void test_accessor_type_mismatch(void **state)
{
	(void)state;
	aks_config *cfg = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks__config_build(&desc, NULL, "demo", &cfg, &err), AKS_OK);
	bool b;
	const char *s;
	assert_int_equal(aks__config_bool(cfg, "image", &b), AKS_EINVAL);
	assert_int_equal(aks__config_string(cfg, "nope", &s), AKS_EINVAL);
	aks_config_free(cfg);
}

static void test_schema_check(void **state)
{
	(void)state;
	aks_error *err = NULL;
	assert_int_equal(aks__schema_check(&desc, "demo.so", &err), AKS_OK);
	static const aks_config_key bad_default[] = {
	    AKS_CONFIG_KEY("n", AKS_CONFIG_INT, false, "many", "count"), AKS_CONFIG_END};
	aks_plugin_descriptor d = desc;
	d.config_keys = bad_default;
	assert_int_equal(aks__schema_check(&d, "demo.so", &err), AKS_EPLUGIN);
	assert_string_equal(aks_error_message(err),
	                    "plugin 'demo.so': the default of config key 'n' (many) is not a valid "
	                    "integer: default:1:1: demo.n: 'many' is not an integer");
	aks_error_free(err);
	err = NULL;
	static const aks_config_key twice[] = {AKS_CONFIG_KEY("n", AKS_CONFIG_INT, false, "1", ""),
	                                       AKS_CONFIG_KEY("n", AKS_CONFIG_INT, false, "1", ""),
	                                       AKS_CONFIG_END};
	d.config_keys = twice;
	assert_int_equal(aks__schema_check(&d, "demo.so", &err), AKS_EPLUGIN);
	assert_string_equal(aks_error_message(err),
	                    "plugin 'demo.so': config key 'n' is declared twice");
	aks_error_free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_values),
	    cmocka_unit_test(test_unknown_key_suggests),
	    cmocka_unit_test(test_type_errors),
	    cmocka_unit_test(test_required),
	    cmocka_unit_test(test_accessor_type_mismatch),
	    cmocka_unit_test(test_schema_check),
	};
	return cmocka_run_group_tests_name("config_block", tests, NULL, NULL);
}
