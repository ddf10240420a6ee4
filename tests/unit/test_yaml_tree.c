/* Unit tests: YAML text to aks_node trees, with positions and clear errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/config/yaml_tree.h"

static aks_node *parse_ok(const char *text)
{
	aks_node *root = NULL;
	aks_error *err = NULL;
	int rc = aks__yaml_parse(text, strlen(text), "t.yaml", &root, &err);
	if (rc != AKS_OK)
		fail_msg("unexpected error: %s", aks_error_message(err));
	assert_null(err);
	return root;
}

static char *parse_err(const char *text, int code)
{
	aks_node *root = NULL;
	aks_error *err = NULL;
	int rc = aks__yaml_parse(text, strlen(text), "t.yaml", &root, &err);
	assert_int_equal(rc, code);
	assert_null(root);
	assert_non_null(err);
	char *msg = strdup(aks_error_message(err));
	aks_error_free(err);
	return msg;
}

static void test_mapping_with_positions(void **state)
{
	(void)state;
	aks_node *root = parse_ok("sandbox:\n  enabled: true\n  name: 'x'\n  list: [a, b]\n");
	const aks_node *sb = aks__node_get(root, "sandbox");
	assert_non_null(sb);
	assert_int_equal(sb->kind, AKS_NODE_MAPPING);
	const aks_node *enabled = aks__node_get(sb, "enabled");
	assert_string_equal(enabled->value, "true");
	assert_true(enabled->plain);
	assert_int_equal(enabled->line, 2);
	assert_int_equal(enabled->column, 12);
	const aks_node *name = aks__node_get(sb, "name");
	assert_false(name->plain);
	const aks_node *list = aks__node_get(sb, "list");
	assert_int_equal(list->kind, AKS_NODE_SEQUENCE);
	assert_int_equal(list->count, 2);
	assert_string_equal(list->items[1]->value, "b");
	assert_string_equal(list->file, "t.yaml");
	aks__node_free(root);
}

static void test_nulls(void **state)
{
	(void)state;
	aks_node *root = parse_ok("a: null\nb: ~\nc:\nd: 'null'\ne: \"\"\n");
	assert_true(aks__node_is_null(aks__node_get(root, "a")));
	assert_true(aks__node_is_null(aks__node_get(root, "b")));
	assert_true(aks__node_is_null(aks__node_get(root, "c")));
	assert_false(aks__node_is_null(aks__node_get(root, "d")));
	assert_false(aks__node_is_null(aks__node_get(root, "e")));
	assert_true(aks__node_is_null(aks__node_get(root, "missing")));
	aks__node_free(root);
}

static void test_empty_document_is_empty_mapping(void **state)
{
	(void)state;
	aks_node *root = parse_ok("");
	assert_int_equal(root->kind, AKS_NODE_MAPPING);
	assert_int_equal(root->count, 0);
	aks__node_free(root);
	root = parse_ok("# only a comment\n");
	assert_int_equal(root->kind, AKS_NODE_MAPPING);
	aks__node_free(root);
}

static void test_syntax_error_has_position(void **state)
{
	(void)state;
	char *msg = parse_err("a: [1, 2\nb: c\n", AKS_ECONFIG);
	assert_non_null(strstr(msg, "t.yaml:"));
	assert_non_null(strstr(msg, "invalid YAML"));
	free(msg);
}

static void test_duplicate_key(void **state)
{
	(void)state;
	char *msg = parse_err("a: 1\nb: 2\na: 3\n", AKS_ECONFIG);
	assert_string_equal(msg, "t.yaml:3:1: duplicate key 'a' (first set at line 1)");
	free(msg);
}

static void test_alias_refused(void **state)
{
	(void)state;
	char *msg = parse_err("a: &x [1]\nb: *x\n", AKS_ECONFIG);
	assert_string_equal(msg, "t.yaml:2:4: YAML aliases (*name) are not supported");
	free(msg);
}

static void test_non_scalar_key(void **state)
{
	(void)state;
	char *msg = parse_err("? [a]\n: 1\n", AKS_ECONFIG);
	assert_non_null(strstr(msg, "mapping keys must be scalars"));
	free(msg);
}

static void test_depth_limit(void **state)
{
	(void)state;
	char deep[400];
	size_t n = 0;
	for (int i = 0; i < 100; i++)
		deep[n++] = '[';
	for (int i = 0; i < 100; i++)
		deep[n++] = ']';
	deep[n] = '\0';
	char *msg = parse_err(deep, AKS_ECONFIG);
	assert_non_null(strstr(msg, "nesting deeper than 64 levels"));
	free(msg);
}

static void test_two_documents_refused(void **state)
{
	(void)state;
	char *msg = parse_err("a: 1\n---\nb: 2\n", AKS_ECONFIG);
	assert_non_null(strstr(msg, "only one YAML document is allowed"));
	free(msg);
}

static void test_missing_file(void **state)
{
	(void)state;
	aks_node *root = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks__yaml_load_file("/nonexistent/config.yaml", &root, &err),
	                 AKS_ENOTFOUND);
	assert_string_equal(aks_error_message(err),
	                    "cannot open '/nonexistent/config.yaml': No such file or directory");
	aks_error_free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_mapping_with_positions),
	    cmocka_unit_test(test_nulls),
	    cmocka_unit_test(test_empty_document_is_empty_mapping),
	    cmocka_unit_test(test_syntax_error_has_position),
	    cmocka_unit_test(test_duplicate_key),
	    cmocka_unit_test(test_alias_refused),
	    cmocka_unit_test(test_non_scalar_key),
	    cmocka_unit_test(test_depth_limit),
	    cmocka_unit_test(test_two_documents_refused),
	    cmocka_unit_test(test_missing_file),
	};
	return cmocka_run_group_tests_name("yaml_tree", tests, NULL, NULL);
}
