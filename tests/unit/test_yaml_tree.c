/* Unit tests: YAML text to aks_node trees, with positions and clear errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

/* Text that is not UTF-8 is refused at the first byte that breaks it; columns count
 * characters, as libyaml's do. */
static void test_invalid_utf8_located(void **state)
{
	(void)state;
	char *msg = parse_err("a: 1\nb: 2\nc: 3\nd: \"caf\xe9\"\n", AKS_ECONFIG);
	assert_string_equal(msg, "t.yaml:4:8: invalid UTF-8 (byte 0xE9): the text must be UTF-8");
	free(msg);
	/* A valid two-byte character before it is one column; CR LF ends a line once. */
	msg = parse_err("a: 1\r\nb: \xc3\xa9\xff\n", AKS_ECONFIG);
	assert_string_equal(msg, "t.yaml:2:5: invalid UTF-8 (byte 0xFF): the text must be UTF-8");
	free(msg);
	/* An overlong form and an encoded surrogate are not UTF-8 either. */
	msg = parse_err("a: \xc0\x80\n", AKS_ECONFIG);
	assert_string_equal(msg, "t.yaml:1:4: invalid UTF-8 (byte 0xC0): the text must be UTF-8");
	free(msg);
	msg = parse_err("x: y\na: \xed\xa0\x80\n", AKS_ECONFIG);
	assert_string_equal(msg, "t.yaml:2:4: invalid UTF-8 (byte 0xED): the text must be UTF-8");
	free(msg);
	/* A sequence cut short by the end of the text. */
	msg = parse_err("a: \xe2\x82", AKS_ECONFIG);
	assert_string_equal(msg, "t.yaml:1:4: invalid UTF-8 (byte 0xE2): the text must be UTF-8");
	free(msg);
	aks__node_free(parse_ok("a: \"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"\n"));
}

/* Characters YAML does not allow (libyaml reports them as a byte offset) are located too. */
static void test_control_character_located(void **state)
{
	(void)state;
	char *msg = parse_err("a: 1\nb: 2\nc: 3\nd: \"\xc3\xa9\x01\"\n", AKS_ECONFIG);
	assert_string_equal(
	    msg, "t.yaml:4:6: invalid YAML: control characters are not allowed (U+0001)");
	free(msg);
	aks_node *root = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks__yaml_parse("a: 1\nb: x\0y\n", 12, "t.yaml", &root, &err),
	                 AKS_ECONFIG);
	assert_string_equal(
	    aks_error_message(err),
	    "t.yaml:2:5: invalid YAML: control characters are not allowed (U+0000)");
	aks_error_free(err);
	assert_null(root);
	/* The "\0" escape of a quoted scalar too: the value would end there, silently. */
	msg = parse_err("a: 1\nb: [x, \"pypi.org\\0.evil.test\"]\n", AKS_ECONFIG);
	assert_string_equal(msg, "t.yaml:2:8: a NUL character (\\0) in a value");
	free(msg);
	msg = parse_err("\"k\\0\": 1\n", AKS_ECONFIG);
	assert_string_equal(msg, "t.yaml:1:1: a NUL character (\\0) in a value");
	free(msg);
}

static void test_duplicate_key(void **state)
{
	(void)state;
	char *msg = parse_err("a: 1\nb: 2\na: 3\n", AKS_ECONFIG);
	assert_string_equal(msg, "t.yaml:3:1: duplicate key 'a' (first set at line 1)");
	free(msg);
}

static void test_duplicate_key_earliest_repetition(void **state)
{
	(void)state;
	/* 'b' repeats before 'a' does: the reader meets that one first. */
	char *msg = parse_err("a: 1\nb: 2\nb: 3\na: 4\n", AKS_ECONFIG);
	assert_string_equal(msg, "t.yaml:3:1: duplicate key 'b' (first set at line 2)");
	free(msg);
	msg = parse_err("x:\n  k: 1\n  k: 2\n  k: 3\n", AKS_ECONFIG);
	assert_string_equal(msg, "t.yaml:3:3: duplicate key 'k' (first set at line 2)");
	free(msg);
	msg = parse_err("{z: 1, a: 2, z: 3}\n", AKS_ECONFIG);
	assert_string_equal(msg, "t.yaml:1:14: duplicate key 'z' (first set at line 1)");
	free(msg);
}

/* "big:\n  key0: 0\n  key1: 1\n..." with n keys. */
static char *many_keys(size_t n, size_t *len)
{
	size_t cap = 16 + n * 32, used = 0;
	char *text = malloc(cap);
	assert_non_null(text);
	used += (size_t)snprintf(text, cap, "big:\n");
	for (size_t i = 0; i < n; i++)
		used += (size_t)snprintf(text + used, cap - used, "  key%zu: %zu\n", i, i);
	*len = used;
	return text;
}

static double cpu_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU seconds to parse `text` into a tree and free it. */
static double parse_cost(const char *text, size_t len, size_t keys)
{
	double start = cpu_seconds();
	aks_node *root = NULL;
	aks_error *err = NULL;
	if (aks__yaml_parse(text, len, "big.yaml", &root, &err) != AKS_OK)
		fail_msg("unexpected error: %s", aks_error_message(err));
	assert_int_equal(aks__node_pairs(aks__node_get(root, "big")), keys);
	aks__node_free(root);
	return cpu_seconds() - start;
}

/*
 * A mapping of 4n keys costs about 4 times one of n, not 16: the cost grows linearly (every
 * key is still checked for uniqueness). Measured in the same run, the least disturbed of
 * three interleaved samples each, so the ratio holds on a slow or busy machine where a time
 * limit would not.
 */
static void test_many_keys_linear(void **state)
{
	(void)state;
	const size_t n = 20000;
	size_t small_len, big_len;
	char *small = many_keys(n, &small_len), *big = many_keys(4 * n, &big_len);
	double best_small = 1e9, best_big = 1e9;
	for (int i = 0; i < 3; i++) {
		double t = parse_cost(small, small_len, n);
		best_small = t < best_small ? t : best_small;
		t = parse_cost(big, big_len, 4 * n);
		best_big = t < best_big ? t : best_big;
	}
	double ratio = best_big / (best_small > 1e-6 ? best_small : 1e-6);
	print_message("%zu keys: %.1f ms, %zu keys: %.1f ms, ratio %.2f (quadratic: 16)\n", n,
	              best_small * 1e3, 4 * n, best_big * 1e3, ratio);
	assert_true(ratio < 8);
	free(small);
	free(big);
}

/* A caller reading one section gets only it; the others are parsed, not built, so their
 * content obeys none of the tree's rules. */
static void test_sections_skipped(void **state)
{
	(void)state;
	static const char *const sandbox_only[] = {"sandbox", NULL};
	const char *text = "other:\n  a: &x [1]\n  b: *x\n  a: 2\n"
	                   "sandbox:\n  enabled: true\n"
	                   "more: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
	                   "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n";
	aks_node *root = NULL;
	aks_error *err = NULL;
	if (aks__yaml_parse_sections(text, strlen(text), "t.yaml", sandbox_only, &root, &err) !=
	    AKS_OK)
		fail_msg("unexpected error: %s", aks_error_message(err));
	assert_int_equal(aks__node_pairs(root), 1);
	const aks_node *sb = aks__node_get(root, "sandbox");
	assert_non_null(sb);
	assert_string_equal(aks__node_get(sb, "enabled")->value, "true");
	assert_int_equal(aks__node_get(sb, "enabled")->line, 6);
	aks__node_free(root);
	root = NULL;

	/* The section read keeps every rule, and a skipped one must still be YAML. */
	const char *dup = "other: {a: 1}\nsandbox:\n  k: 1\n  k: 2\n";
	assert_int_equal(
	    aks__yaml_parse_sections(dup, strlen(dup), "t.yaml", sandbox_only, &root, &err),
	    AKS_ECONFIG);
	assert_string_equal(aks_error_message(err),
	                    "t.yaml:4:3: duplicate key 'k' (first set at line 3)");
	aks_error_free(err);
	err = NULL;
	const char *bad = "other: [1, 2\nsandbox: {}\n";
	assert_int_equal(
	    aks__yaml_parse_sections(bad, strlen(bad), "t.yaml", sandbox_only, &root, &err),
	    AKS_ECONFIG);
	assert_non_null(strstr(aks_error_message(err), "invalid YAML"));
	aks_error_free(err);
	assert_null(root);
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

static char *load_err_path(const char *path)
{
	aks_node *root = NULL;
	aks_error *err = NULL;
	/* A FIFO used to block the open until a writer came: never wait for one here. */
	alarm(10);
	int rc = aks__yaml_load_file(path, &root, &err);
	alarm(0);
	assert_int_equal(rc, AKS_ECONFIG);
	assert_null(root);
	char *msg = strdup(aks_error_message(err));
	aks_error_free(err);
	return msg;
}

/* Only a regular file is read: a FIFO, a directory or a device is refused by name. */
static void test_not_a_regular_file(void **state)
{
	(void)state;
	char dir[] = "/tmp/aks-yaml-XXXXXX", fifo[64], expected[160];
	assert_non_null(mkdtemp(dir));
	snprintf(fifo, sizeof(fifo), "%s/config.yaml", dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	char *msg = load_err_path(fifo);
	snprintf(expected, sizeof(expected), "'%s' is a FIFO: a config file must be a regular file",
	         fifo);
	assert_string_equal(msg, expected);
	free(msg);
	unlink(fifo);

	msg = load_err_path(dir);
	snprintf(expected, sizeof(expected),
	         "'%s' is a directory: a config file must be a regular file", dir);
	assert_string_equal(msg, expected);
	free(msg);
	rmdir(dir);

	msg = load_err_path("/dev/zero");
	assert_string_equal(
	    msg, "'/dev/zero' is a character device: a config file must be a regular file");
	free(msg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_mapping_with_positions),
	    cmocka_unit_test(test_nulls),
	    cmocka_unit_test(test_empty_document_is_empty_mapping),
	    cmocka_unit_test(test_syntax_error_has_position),
	    cmocka_unit_test(test_invalid_utf8_located),
	    cmocka_unit_test(test_control_character_located),
	    cmocka_unit_test(test_duplicate_key),
	    cmocka_unit_test(test_duplicate_key_earliest_repetition),
	    cmocka_unit_test(test_many_keys_linear),
	    cmocka_unit_test(test_sections_skipped),
	    cmocka_unit_test(test_alias_refused),
	    cmocka_unit_test(test_non_scalar_key),
	    cmocka_unit_test(test_depth_limit),
	    cmocka_unit_test(test_two_documents_refused),
	    cmocka_unit_test(test_missing_file),
	    cmocka_unit_test(test_not_a_regular_file),
	};
	return cmocka_run_group_tests_name("yaml_tree", tests, NULL, NULL);
}
