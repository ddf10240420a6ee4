/* Unit tests: AK_SANDBOX__... environment overrides onto a YAML config tree. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/config/env.h"
#include "core/config/yaml_tree.h"
#include "core/util/util.h"

static aks_node *doc(const char *text)
{
	aks_node *root = NULL;
	aks_error *err = NULL;
	if (aks__yaml_parse(text, strlen(text), "config.yaml", &root, &err) != AKS_OK)
		fail_msg("unexpected parse error: %s", aks_error_message(err));
	return root;
}

static void apply_ok(aks_node **root, const char *const *envp)
{
	aks_error *err = NULL;
	int rc = aks__config_apply_env(root, envp, &err);
	if (rc != AKS_OK)
		fail_msg("unexpected error %d: %s", rc, aks_error_message(err));
	assert_null(err);
	assert_non_null(*root);
}

/* Applies envp, expects `code` and returns the message (caller frees). */
static char *apply_err(aks_node **root, const char *const *envp, int code)
{
	aks_error *err = NULL;
	int rc = aks__config_apply_env(root, envp, &err);
	assert_int_equal(rc, code);
	assert_non_null(err);
	assert_int_equal(aks_error_code(err), code);
	char *msg = strdup(aks_error_message(err));
	aks_error_free(err);
	return msg;
}

static void expect_err(aks_node **root, const char *const *envp, const char *message)
{
	char *msg = apply_err(root, envp, AKS_ECONFIG);
	assert_string_equal(msg, message);
	free(msg);
}

/* The node at a dotted path of exact keys, or NULL. */
static const aks_node *at(const aks_node *root, const char *path)
{
	char *copy = strdup(path), *save = NULL;
	const aks_node *n = root;
	for (char *k = strtok_r(copy, ".", &save); k && n; k = strtok_r(NULL, ".", &save))
		n = aks__node_get(n, k);
	free(copy);
	return n;
}

/* A compact rendering: {k: v}, [a, b], plain scalars bare, quoted ones in '', nulls ~. */
static void dump_into(const aks_node *n, aks_buf *b)
{
	switch (n->kind) {
	case AKS_NODE_SCALAR:
		if (n->plain && !*n->value)
			aks__buf_puts(b, "~");
		else if (n->plain)
			aks__buf_puts(b, n->value);
		else
			aks__buf_printf(b, "'%s'", n->value);
		return;
	case AKS_NODE_SEQUENCE:
		aks__buf_puts(b, "[");
		for (size_t i = 0; i < n->count; i++) {
			aks__buf_puts(b, i ? ", " : "");
			dump_into(n->items[i], b);
		}
		aks__buf_puts(b, "]");
		return;
	case AKS_NODE_MAPPING:
		aks__buf_puts(b, "{");
		for (size_t i = 0; i + 1 < n->count; i += 2) {
			aks__buf_puts(b, i ? ", " : "");
			dump_into(n->items[i], b);
			aks__buf_puts(b, ": ");
			dump_into(n->items[i + 1], b);
		}
		aks__buf_puts(b, "}");
		return;
	}
}

static void assert_tree(const aks_node *n, const char *expected)
{
	aks_buf b = AKS_BUF_INIT;
	dump_into(n, &b);
	assert_string_equal(b.data, expected);
	aks__buf_free(&b);
}

static const char *where(const aks_node *n)
{
	static char buf[AKS_NODE_WHERE_SIZE];
	return aks__node_where(n, buf, sizeof(buf));
}

/* Every node of a subtree (keys included) was made by the variable `name`. */
static void assert_from_env(const aks_node *n, const char *name)
{
	assert_int_equal(n->line, 0);
	assert_int_equal(n->column, 0);
	assert_non_null(n->file);
	assert_string_equal(n->file, name);
	for (size_t i = 0; i < n->count; i++)
		assert_from_env(n->items[i], name);
}

static void test_scalar_replaces_value(void **state)
{
	(void)state;
	aks_node *root = doc("sandbox:\n  enabled: false\n  default_profile: main\n");
	const char *env[] = {"AK_SANDBOX__ENABLED=true", NULL};
	apply_ok(&root, env);
	assert_tree(root, "{sandbox: {enabled: true, default_profile: main}}");
	const aks_node *v = at(root, "sandbox.enabled");
	assert_true(v->plain);
	assert_from_env(v, "AK_SANDBOX__ENABLED");
	assert_string_equal(where(v), "environment variable AK_SANDBOX__ENABLED");
	/* The key stays where the file wrote it; its neighbour is untouched. */
	assert_string_equal(where(root->items[1]->items[0]), "config.yaml:2:3");
	assert_string_equal(where(at(root, "sandbox.default_profile")), "config.yaml:3:20");
	aks__node_free(root);
}

static void test_scalar_values_verbatim(void **state)
{
	(void)state;
	aks_node *root = NULL;
	const char *env[] = {"AK_SANDBOX__DEFAULT_PROFILE=a: b # not a comment",
	                     "AK_SANDBOX__TOOL_OUTPUT_MAX_CHARS=4000",
	                     "AK_SANDBOX__PRINCIPAL_RESOLVER=",
	                     "AK_SANDBOX__TYPE=  'quoted' ",
	                     "AK_SANDBOX__SCOPE=x=y",
	                     "AK_SANDBOX__ENVIRONMENT=null",
	                     NULL};
	apply_ok(&root, env);
	const aks_node *v = at(root, "sandbox.default_profile");
	assert_string_equal(v->value, "a: b # not a comment");
	assert_true(v->plain);
	assert_string_equal(at(root, "sandbox.tool_output_max_chars")->value, "4000");
	/* An empty value is the empty plain scalar: null. */
	v = at(root, "sandbox.principal_resolver");
	assert_int_equal(v->kind, AKS_NODE_SCALAR);
	assert_string_equal(v->value, "");
	assert_true(aks__node_is_null(v));
	/* Quotes are part of the text: only '[' and '{' values are parsed. */
	assert_string_equal(at(root, "sandbox.type")->value, "  'quoted' ");
	assert_string_equal(at(root, "sandbox.scope")->value, "x=y");
	assert_true(aks__node_is_null(at(root, "sandbox.environment")));
	aks__node_free(root);
}

static void test_nested_creation(void **state)
{
	(void)state;
	aks_node *root = doc("sandbox:\n  enabled: true\n");
	const char *name = "AK_SANDBOX__PROFILES__WORKSPACE__POLICY__TIMEOUT";
	const char *env[] = {"AK_SANDBOX__PROFILES__WORKSPACE__POLICY__TIMEOUT=5", NULL};
	apply_ok(&root, env);
	assert_tree(root,
	            "{sandbox: {enabled: true, profiles: {workspace: {policy: {timeout: 5}}}}}");
	/* Every created node, intermediate mappings and keys included, names the variable. */
	const aks_node *sb = at(root, "sandbox");
	assert_string_equal(where(sb), "config.yaml:2:3");
	assert_from_env(sb->items[2], name);
	assert_from_env(sb->items[3], name);
	assert_true(sb->items[2]->plain);
	aks__node_free(root);
}

static void test_existing_key_matched_case_insensitively(void **state)
{
	(void)state;
	aks_node *root = doc("sandbox:\n"
	                     "  profiles:\n"
	                     "    Workspace:\n"
	                     "      type: docker\n"
	                     "      policy:\n"
	                     "        timeout: 30\n"
	                     "        max_memory_mb: 512\n");
	const char *env[] = {"AK_SANDBOX__PROFILES__WORKSPACE__POLICY__TIMEOUT=5",
	                     "ak_sandbox__Profiles__workspace__TYPE=e2b", NULL};
	apply_ok(&root, env);
	assert_tree(root, "{sandbox: {profiles: {Workspace: {type: e2b, "
	                  "policy: {timeout: 5, max_memory_mb: 512}}}}}");
	assert_string_equal(
	    where(at(root, "sandbox.profiles.Workspace.policy.timeout")),
	    "environment variable AK_SANDBOX__PROFILES__WORKSPACE__POLICY__TIMEOUT");
	assert_string_equal(where(at(root, "sandbox.profiles.Workspace.type")),
	                    "environment variable ak_sandbox__Profiles__workspace__TYPE");
	assert_string_equal(where(at(root, "sandbox.profiles.Workspace.policy.max_memory_mb")),
	                    "config.yaml:7:24");
	aks__node_free(root);
}

static void test_top_level_key_is_exact(void **state)
{
	(void)state;
	/* The loader reads only `sandbox`; an override must not land in `Sandbox`. */
	aks_node *root = doc("Sandbox:\n  enabled: false\n");
	const char *env[] = {"AK_SANDBOX__ENABLED=true", NULL};
	apply_ok(&root, env);
	assert_tree(root, "{Sandbox: {enabled: false}, sandbox: {enabled: true}}");
	aks__node_free(root);
}

static void test_ambiguous_key(void **state)
{
	(void)state;
	aks_node *root = doc("sandbox:\n  profiles:\n    Work: {type: a}\n    work: {type: b}\n");
	const char *env[] = {"AK_SANDBOX__PROFILES__WORK__TYPE=c", NULL};
	expect_err(&root, env,
	           "environment variable AK_SANDBOX__PROFILES__WORK__TYPE: 'sandbox.profiles' has "
	           "both 'Work' and 'work', which differ only in case; rename one");
	assert_tree(root, "{sandbox: {profiles: {Work: {type: a}, work: {type: b}}}}");
	aks__node_free(root);
}

static void test_list_value(void **state)
{
	(void)state;
	aks_node *root = doc("sandbox:\n  agents: [a, b, c]\n");
	const char *env[] = {"AK_SANDBOX__AGENTS=[\"coder\", \"analyst\"]", NULL};
	apply_ok(&root, env);
	/* The list replaces the list entirely; the items are the quoted strings. */
	assert_tree(root, "{sandbox: {agents: ['coder', 'analyst']}}");
	const aks_node *agents = at(root, "sandbox.agents");
	assert_int_equal(agents->kind, AKS_NODE_SEQUENCE);
	assert_from_env(agents, "AK_SANDBOX__AGENTS");
	assert_string_equal(where(agents->items[1]), "environment variable AK_SANDBOX__AGENTS");
	aks__node_free(root);

	root = NULL;
	const char *env2[] = {"AK_SANDBOX__AGENTS=   []", NULL};
	apply_ok(&root, env2);
	assert_tree(root, "{sandbox: {agents: []}}");
	aks__node_free(root);
}

static void test_mapping_value(void **state)
{
	(void)state;
	aks_node *root = doc("sandbox:\n  broker:\n    flavor: redis\n    redis_url: r\n");
	const char *env[] = {
	    "AK_SANDBOX__BROKER={\"flavor\": \"embedded\", \"queue\": {\"max\": 3, \"on\": true}}",
	    NULL};
	apply_ok(&root, env);
	/* A mapping replaces the mapping: redis_url is gone. JSON is YAML flow. */
	assert_tree(root, "{sandbox: {broker: {'flavor': 'embedded', "
	                  "'queue': {'max': 3, 'on': true}}}}");
	assert_from_env(at(root, "sandbox.broker"), "AK_SANDBOX__BROKER");
	aks__node_free(root);
}

static void test_bad_flow_value(void **state)
{
	(void)state;
	aks_node *root = doc("sandbox:\n  enabled: false\n");
	/* A valid variable sorted before the bad one is not applied either. */
	const char *env[] = {"AK_SANDBOX__AGENTS=[\"coder\", ", "AK_SANDBOX__ABC=1", NULL};
	/* Positions are within the value; libyaml puts its end at line 2, column 1. */
	expect_err(&root, env,
	           "environment variable AK_SANDBOX__AGENTS: value:2:1: invalid YAML: did not find "
	           "expected node content while parsing a flow node");
	assert_tree(root, "{sandbox: {enabled: false}}");
	const char *env1[] = {"AK_SANDBOX__BROKER={a: [1, 2}", NULL};
	expect_err(
	    &root, env1,
	    "environment variable AK_SANDBOX__BROKER: value:1:10: invalid YAML: did not find "
	    "expected ',' or ']' while parsing a flow sequence");
	/* Text after the flow value is not silently dropped. */
	const char *env1b[] = {"AK_SANDBOX__AGENTS=[a] b", NULL};
	expect_err(&root, env1b,
	           "environment variable AK_SANDBOX__AGENTS: value:1:5: invalid YAML: did not find "
	           "expected <document start>");
	const char *env2[] = {"AK_SANDBOX__BROKER={a: 1, a: 2}", NULL};
	expect_err(&root, env2,
	           "environment variable AK_SANDBOX__BROKER: value:1:8: duplicate key 'a' (first "
	           "set at line 1)");
	const char *env3[] = {"AK_SANDBOX__BROKER={a: *x}", NULL};
	expect_err(&root, env3,
	           "environment variable AK_SANDBOX__BROKER: value:1:5: YAML aliases (*name) are "
	           "not supported");
	assert_tree(root, "{sandbox: {enabled: false}}");
	aks__node_free(root);
}

static void test_scalar_or_list_intermediate(void **state)
{
	(void)state;
	aks_node *root = doc("sandbox:\n  x: 1\n  agents: [a]\n  broker: 'null'\n");
	const char *env[] = {"AK_SANDBOX__X__Y=2", NULL};
	expect_err(&root, env,
	           "environment variable AK_SANDBOX__X__Y: 'sandbox.x' is a scalar, not a mapping");
	const char *env2[] = {"AK_SANDBOX__AGENTS__0=b", NULL};
	expect_err(&root, env2,
	           "environment variable AK_SANDBOX__AGENTS__0: 'sandbox.agents' is a list, not a "
	           "mapping");
	/* A quoted 'null' is a string, not null. */
	const char *env3[] = {"AK_SANDBOX__BROKER__FLAVOR=embedded", NULL};
	expect_err(&root, env3,
	           "environment variable AK_SANDBOX__BROKER__FLAVOR: 'sandbox.broker' is a scalar, "
	           "not a mapping");
	assert_tree(root, "{sandbox: {x: 1, agents: [a], broker: 'null'}}");
	aks__node_free(root);

	root = doc("sandbox: 5\n");
	const char *env4[] = {"AK_SANDBOX__ENABLED=true", NULL};
	expect_err(
	    &root, env4,
	    "environment variable AK_SANDBOX__ENABLED: 'sandbox' is a scalar, not a mapping");
	aks__node_free(root);

	/* The path keeps the spelling the file used. */
	root = doc("sandbox:\n  Profiles:\n    Main: 3\n");
	const char *env5[] = {"AK_SANDBOX__PROFILES__MAIN__TYPE=docker", NULL};
	expect_err(&root, env5,
	           "environment variable AK_SANDBOX__PROFILES__MAIN__TYPE: 'sandbox.Profiles.Main' "
	           "is a scalar, not a mapping");
	aks__node_free(root);
}

static void test_null_intermediate_becomes_mapping(void **state)
{
	(void)state;
	aks_node *root = doc("sandbox:\n  broker:\n  profiles: ~\n");
	const char *env[] = {"AK_SANDBOX__BROKER__FLAVOR=embedded",
	                     "AK_SANDBOX__PROFILES__MAIN__TYPE=local_subprocess", NULL};
	apply_ok(&root, env);
	assert_tree(root, "{sandbox: {broker: {flavor: embedded}, "
	                  "profiles: {main: {type: local_subprocess}}}}");
	assert_from_env(at(root, "sandbox.broker"), "AK_SANDBOX__BROKER__FLAVOR");
	assert_from_env(at(root, "sandbox.profiles"), "AK_SANDBOX__PROFILES__MAIN__TYPE");
	aks__node_free(root);

	root = doc("sandbox:\n");
	const char *env2[] = {"AK_SANDBOX__ENABLED=true", NULL};
	apply_ok(&root, env2);
	assert_tree(root, "{sandbox: {enabled: true}}");
	aks__node_free(root);
}

static void test_empty_parts(void **state)
{
	(void)state;
	static const char *const cases[][2] = {
	    {"AK_SANDBOX____X=1", "AK_SANDBOX____X"},
	    {"AK_SANDBOX__X__=1", "AK_SANDBOX__X__"},
	    {"AK_SANDBOX__X____Y=1", "AK_SANDBOX__X____Y"},
	    {"AK_SANDBOX__=1", "AK_SANDBOX__"},
	    {"AK_SANDBOX_____X=1", "AK_SANDBOX_____X"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		aks_node *root = NULL;
		const char *env[] = {cases[i][0], NULL};
		char expected[256];
		snprintf(
		    expected, sizeof(expected),
		    "environment variable %s: empty key in the name (nested keys are separated "
		    "by '__', e.g. AK_SANDBOX__BROKER__FLAVOR)",
		    cases[i][1]);
		expect_err(&root, env, expected);
		/* Nothing was created. */
		assert_null(root);
	}
	/* A third underscore belongs to the key (as in pydantic-settings). */
	aks_node *root = NULL;
	const char *env[] = {"AK_SANDBOX___X___Y=1", NULL};
	apply_ok(&root, env);
	assert_tree(root, "{sandbox: {_x: {_y: 1}}}");
	aks__node_free(root);
}

static void test_whole_block_refused(void **state)
{
	(void)state;
	const char *names[] = {"AK_SANDBOX={\"enabled\": true}", "ak_sandbox=x", NULL};
	const char *messages[] = {
	    "environment variable AK_SANDBOX: the whole sandbox block cannot be set at once; set "
	    "its keys one by one, e.g. AK_SANDBOX__ENABLED=true",
	    "environment variable ak_sandbox: the whole sandbox block cannot be set at once; set "
	    "its keys one by one, e.g. AK_SANDBOX__ENABLED=true"};
	for (size_t i = 0; names[i]; i++) {
		aks_node *root = doc("sandbox:\n  enabled: false\n");
		const char *env[] = {names[i], NULL};
		expect_err(&root, env, messages[i]);
		assert_tree(root, "{sandbox: {enabled: false}}");
		aks__node_free(root);
	}
}

static void test_other_variables_ignored(void **state)
{
	(void)state;
	aks_node *root = doc("sandbox:\n  enabled: false\n");
	const char *env[] = {"PATH=/usr/bin",
	                     "AK_SANDBOXES=1",
	                     "AK_SANDBOX_ENABLED=true",
	                     "AK_LLM__MODEL=x",
	                     "XAK_SANDBOX__ENABLED=true",
	                     "NO_EQUALS_SIGN",
	                     "AK_SANDBO",
	                     "=",
	                     "",
	                     NULL};
	apply_ok(&root, env);
	assert_tree(root, "{sandbox: {enabled: false}}");
	aks__node_free(root);
	/* No variables at all, and a NULL envp. */
	root = doc("sandbox:\n  enabled: false\n");
	const char *none[] = {NULL};
	apply_ok(&root, none);
	apply_ok(&root, NULL);
	assert_tree(root, "{sandbox: {enabled: false}}");
	aks__node_free(root);
}

static void test_entry_without_value(void **state)
{
	(void)state;
	aks_node *root = NULL;
	const char *env[] = {"AK_SANDBOX__ENABLED", NULL};
	expect_err(&root, env, "environment variable AK_SANDBOX__ENABLED: no '=' in the entry");
	assert_null(root);
}

static void test_ordering_parent_then_child(void **state)
{
	(void)state;
	/* Whatever the order in envp, the shorter name applies first, the longer refines it. */
	const char *forward[] = {"AK_SANDBOX__BROKER={flavor: redis, redis_url: r}",
	                         "AK_SANDBOX__BROKER__FLAVOR=embedded", NULL};
	const char *backward[] = {"AK_SANDBOX__BROKER__FLAVOR=embedded",
	                          "AK_SANDBOX__BROKER={flavor: redis, redis_url: r}", NULL};
	const char *const *orders[] = {forward, backward};
	for (size_t i = 0; i < 2; i++) {
		aks_node *root = doc("sandbox:\n  broker:\n    flavor: x\n    other: y\n");
		apply_ok(&root, orders[i]);
		assert_tree(root, "{sandbox: {broker: {flavor: embedded, redis_url: r}}}");
		assert_string_equal(where(at(root, "sandbox.broker.flavor")),
		                    "environment variable AK_SANDBOX__BROKER__FLAVOR");
		assert_string_equal(where(at(root, "sandbox.broker.redis_url")),
		                    "environment variable AK_SANDBOX__BROKER");
		aks__node_free(root);
	}
	/* A parent set to a scalar cannot be refined, in either order. */
	const char *clash[] = {"AK_SANDBOX__BROKER__FLAVOR=embedded", "AK_SANDBOX__BROKER=redis",
	                       NULL};
	aks_node *root = NULL;
	expect_err(&root, clash,
	           "environment variable AK_SANDBOX__BROKER__FLAVOR: 'sandbox.broker' is a scalar, "
	           "not a mapping");
	aks__node_free(root);
	/* A parent set to null (empty) becomes a mapping for the child. */
	const char *nulled[] = {"AK_SANDBOX__BROKER__FLAVOR=embedded", "AK_SANDBOX__BROKER=", NULL};
	root = NULL;
	apply_ok(&root, nulled);
	assert_tree(root, "{sandbox: {broker: {flavor: embedded}}}");
	assert_from_env(at(root, "sandbox.broker"), "AK_SANDBOX__BROKER__FLAVOR");
	aks__node_free(root);
}

static void test_same_key_twice(void **state)
{
	(void)state;
	aks_node *root = NULL;
	const char *env[] = {"AK_SANDBOX__ENABLED=true", "ak_sandbox__enabled=false", NULL};
	expect_err(
	    &root, env,
	    "environment variables AK_SANDBOX__ENABLED and ak_sandbox__enabled: both set the "
	    "same key (names are case-insensitive)");
	assert_null(root);
	const char *env2[] = {"AK_SANDBOX__ENABLED=true", "AK_SANDBOX__ENABLED=false", NULL};
	expect_err(&root, env2,
	           "environment variable AK_SANDBOX__ENABLED: set twice in the environment");
	assert_null(root);
}

static void test_where(void **state)
{
	(void)state;
	aks_node *root = doc("sandbox:\n  enabled: false\n");
	assert_string_equal(where(at(root, "sandbox.enabled")), "config.yaml:2:12");
	assert_string_equal(where(NULL), "<unknown>");
	char small[8];
	assert_string_equal(aks__node_where(at(root, "sandbox.enabled"), small, sizeof(small)),
	                    "config.");
	assert_string_equal(aks__node_where(root, small, 0), "");
	aks__node_free(root);

	root = NULL;
	const char *env[] = {"AK_SANDBOX__ENABLED=true", NULL};
	apply_ok(&root, env);
	assert_string_equal(where(root), "the environment");
	assert_string_equal(where(at(root, "sandbox")), "environment variable AK_SANDBOX__ENABLED");
	/* A message starts with it. */
	char buf[AKS_NODE_WHERE_SIZE], msg[256];
	snprintf(msg, sizeof(msg), "%s: expected a boolean",
	         aks__node_where(at(root, "sandbox.enabled"), buf, sizeof(buf)));
	assert_string_equal(msg, "environment variable AK_SANDBOX__ENABLED: expected a boolean");
	aks__node_free(root);
}

static void test_null_and_empty_roots(void **state)
{
	(void)state;
	/* NULL with nothing to apply: an empty mapping. */
	aks_node *root = NULL;
	apply_ok(&root, NULL);
	assert_int_equal(root->kind, AKS_NODE_MAPPING);
	assert_int_equal(root->count, 0);
	aks__node_free(root);

	/* The empty document, and the document `~`, take the overrides. */
	const char *texts[] = {"", "# nothing\n", "~\n", "null"};
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		root = doc(texts[i]);
		const char *env[] = {"AK_SANDBOX__ENABLED=true", NULL};
		apply_ok(&root, env);
		assert_tree(root, "{sandbox: {enabled: true}}");
		assert_string_equal(where(root), "config.yaml:1:1");
		aks__node_free(root);
	}

	/* A document that is a list cannot take them. */
	root = doc("- a\n- b\n");
	const char *env[] = {"AK_SANDBOX__ENABLED=true", NULL};
	expect_err(&root, env,
	           "environment variable AK_SANDBOX__ENABLED: the document (config.yaml:1:1) is a "
	           "list, not a mapping");
	assert_tree(root, "[a, b]");
	/* Without overrides it is left for the validator to report. */
	apply_ok(&root, NULL);
	assert_tree(root, "[a, b]");
	aks__node_free(root);

	/* No document pointer at all. */
	aks_error *err = NULL;
	assert_int_equal(aks__config_apply_env(NULL, NULL, &err), AKS_EINVAL);
	assert_string_equal(aks_error_message(err), "no document to apply overrides to");
	aks_error_free(err);
}

static void test_replaced_subtrees_free_cleanly(void **state)
{
	(void)state;
	/* An env-made subtree replaced by a later variable, then re-read: under ASan and
	 * valgrind this shows no node borrows a name from a freed one. */
	aks_node *root = doc("sandbox:\n  profiles:\n    main:\n      docker: {image: x}\n");
	const char *env[] = {"AK_SANDBOX__PROFILES={\"main\": {\"docker\": {\"image\": \"y\"}}}",
	                     "AK_SANDBOX__PROFILES__MAIN={docker: {image: z}, type: docker}",
	                     "AK_SANDBOX__PROFILES__MAIN__DOCKER__IMAGE=w",
	                     "AK_SANDBOX__PROFILES__MAIN__DOCKER__MEM=", NULL};
	apply_ok(&root, env);
	assert_tree(root, "{sandbox: {profiles: {'main': {docker: {image: w, mem: ~}, "
	                  "type: docker}}}}");
	const aks_node *profiles = at(root, "sandbox.profiles");
	assert_string_equal(where(profiles), "environment variable AK_SANDBOX__PROFILES");
	assert_string_equal(where(profiles->items[0]), "environment variable AK_SANDBOX__PROFILES");
	const aks_node *main_profile = profiles->items[1];
	assert_string_equal(where(main_profile), "environment variable AK_SANDBOX__PROFILES__MAIN");
	assert_string_equal(where(at(main_profile, "type")),
	                    "environment variable AK_SANDBOX__PROFILES__MAIN");
	assert_string_equal(where(at(main_profile, "docker.image")),
	                    "environment variable AK_SANDBOX__PROFILES__MAIN__DOCKER__IMAGE");
	assert_string_equal(where(at(main_profile, "docker.mem")),
	                    "environment variable AK_SANDBOX__PROFILES__MAIN__DOCKER__MEM");
	aks__node_free(root);
}

/* "AK_SANDBOX__K__K...__K=value" with `parts` keys. */
static char *deep_var(size_t parts, const char *value)
{
	aks_buf b = AKS_BUF_INIT;
	aks__buf_puts(&b, "AK_SANDBOX");
	for (size_t i = 0; i < parts; i++)
		aks__buf_puts(&b, "__K");
	aks__buf_printf(&b, "=%s", value);
	return aks__buf_steal(&b);
}

static size_t depth_of(const aks_node *n)
{
	size_t d = 0;
	for (size_t i = 0; i < n->count; i++) {
		size_t c = depth_of(n->items[i]) + 1;
		if (c > d)
			d = c;
	}
	return d;
}

static void test_depth_limit(void **state)
{
	(void)state;
	/* The root is depth 0 and `sandbox` 1, so 63 keys put a scalar at the limit. */
	char *ok = deep_var(AKS_YAML_MAX_DEPTH - 1, "1");
	char *ok_list = deep_var(AKS_YAML_MAX_DEPTH - 2, "[1]");
	const char *env_ok[] = {ok, NULL};
	const char *env_ok_list[] = {ok_list, NULL};
	aks_node *root = NULL;
	apply_ok(&root, env_ok);
	assert_int_equal(depth_of(root), AKS_YAML_MAX_DEPTH);
	aks__node_free(root);
	root = NULL;
	apply_ok(&root, env_ok_list);
	assert_int_equal(depth_of(root), AKS_YAML_MAX_DEPTH);
	aks__node_free(root);
	free(ok);
	free(ok_list);

	char *deep = deep_var(AKS_YAML_MAX_DEPTH, "1");
	char *deep_list = deep_var(AKS_YAML_MAX_DEPTH - 1, "[1]");
	const char *envs[][2] = {{deep, NULL}, {deep_list, NULL}};
	for (size_t i = 0; i < 2; i++) {
		char *name = strndup(envs[i][0], strcspn(envs[i][0], "="));
		char expected[512];
		snprintf(expected, sizeof(expected),
		         "environment variable %s: nesting deeper than %d levels", name,
		         AKS_YAML_MAX_DEPTH);
		root = NULL;
		expect_err(&root, envs[i], expected);
		assert_null(root);
		free(name);
	}
	free(deep);
	free(deep_list);
}

static void test_variable_count_limit(void **state)
{
	(void)state;
	size_t n = AKS_CONFIG_ENV_MAX_VARS + 1;
	char **vars = calloc(n + 1, sizeof(*vars));
	for (size_t i = 0; i < n; i++)
		assert_true(asprintf(&vars[i], "AK_SANDBOX__PARAMS__P%zu=%zu", i, i) > 0);
	/* Exactly the limit applies. */
	char *last = vars[n - 1];
	vars[n - 1] = NULL;
	aks_node *root = NULL;
	apply_ok(&root, (const char *const *)vars);
	assert_int_equal(aks__node_pairs(at(root, "sandbox.params")), AKS_CONFIG_ENV_MAX_VARS);
	assert_string_equal(at(root, "sandbox.params.p1023")->value, "1023");
	aks__node_free(root);
	/* One more is refused; other variables do not count. */
	vars[n - 1] = last;
	root = NULL;
	char expected[128];
	snprintf(expected, sizeof(expected), "more than %d AK_SANDBOX__ environment variables",
	         AKS_CONFIG_ENV_MAX_VARS);
	expect_err(&root, (const char *const *)vars, expected);
	assert_null(root);
	for (size_t i = 0; i < n; i++)
		free(vars[i]);
	free(vars);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_scalar_replaces_value),
	    cmocka_unit_test(test_scalar_values_verbatim),
	    cmocka_unit_test(test_nested_creation),
	    cmocka_unit_test(test_existing_key_matched_case_insensitively),
	    cmocka_unit_test(test_top_level_key_is_exact),
	    cmocka_unit_test(test_ambiguous_key),
	    cmocka_unit_test(test_list_value),
	    cmocka_unit_test(test_mapping_value),
	    cmocka_unit_test(test_bad_flow_value),
	    cmocka_unit_test(test_scalar_or_list_intermediate),
	    cmocka_unit_test(test_null_intermediate_becomes_mapping),
	    cmocka_unit_test(test_empty_parts),
	    cmocka_unit_test(test_whole_block_refused),
	    cmocka_unit_test(test_other_variables_ignored),
	    cmocka_unit_test(test_entry_without_value),
	    cmocka_unit_test(test_ordering_parent_then_child),
	    cmocka_unit_test(test_same_key_twice),
	    cmocka_unit_test(test_where),
	    cmocka_unit_test(test_null_and_empty_roots),
	    cmocka_unit_test(test_replaced_subtrees_free_cleanly),
	    cmocka_unit_test(test_depth_limit),
	    cmocka_unit_test(test_variable_count_limit),
	};
	return cmocka_run_group_tests_name("config_env", tests, NULL, NULL);
}
