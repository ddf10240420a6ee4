/*
 * tests/plugins/stubs-check.c - the stub providers (tests/plugins/stubs/)
 * declare exactly the config schemas of reference section 2.10 and the
 * capabilities of the section 8.0 matrix, report the real providers'
 * instance overrides, and refuse to run anything.
 *
 * Each stub is loaded by path from the build tree, configured from YAML files
 * through aks_config_load_block() and instantiated with aks_provider_open().
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <aksandbox/aksandbox.h>

/* The host's own accessors, to read back what the stub's config block holds. */
#include "core/config/block.h"

/* ---- expectations ------------------------------------------------------------------ */

typedef struct key_spec {
	const char *name;
	uint32_t type;
	const char *default_value; /* YAML text, NULL for null */
} key_spec;

typedef struct caps_spec {
	uint32_t isolation;
	bool shell, files, package_install, stateful, attach, provisions, attaches_external,
	    principal_user, policy_network, policy_filesystem, policy_resources,
	    policy_network_allowlist;
} caps_spec;

typedef struct stub_spec {
	const char *name;
	const key_spec *keys;
	caps_spec caps;
} stub_spec;

#define S AKS_CONFIG_STRING
static const key_spec docker_keys[] = {{"image", S, "python:3.12-slim"},
                                       {"runtime", S, "docker"},
                                       {"attach_to", S, NULL},
                                       {NULL, 0, NULL}};
static const key_spec kubernetes_keys[] = {{"namespace", S, "default"},
                                           {"image", S, "python:3.12-slim"},
                                           {"attach_to", S, NULL},
                                           {"kubeconfig", S, NULL},
                                           {"service_account", S, NULL},
                                           {"image_pull_secrets", AKS_CONFIG_STRING_LIST, "[]"},
                                           {"labels", AKS_CONFIG_STRING_MAP, "{}"},
                                           {"node_selector", AKS_CONFIG_STRING_MAP, "{}"},
                                           {"env", AKS_CONFIG_STRING_MAP, "{}"},
                                           {"security_context", AKS_CONFIG_JSON, "{}"},
                                           {"container_security_context", AKS_CONFIG_JSON, "{}"},
                                           {"network_policy", AKS_CONFIG_BOOL, "false"},
                                           {"create_timeout", AKS_CONFIG_DOUBLE, "120.0"},
                                           {NULL, 0, NULL}};
static const key_spec e2b_keys[] = {
    {"api_key_env", S, "E2B_API_KEY"}, {"template", S, "base"}, {NULL, 0, NULL}};
static const key_spec daytona_keys[] = {{"api_key_env", S, "DAYTONA_API_KEY"},
                                        {"target", S, NULL},
                                        {"image", S, NULL},
                                        {"snapshot", S, NULL},
                                        {"env_vars", AKS_CONFIG_STRING_MAP, "{}"},
                                        {NULL, 0, NULL}};
static const key_spec ec2_ssm_keys[] = {
    {"region", S, NULL}, {"attach_to", S, NULL}, {NULL, 0, NULL}};
#undef S

/* Columns of the section 8.0 matrix:
 * isolation, shell, files, package_install, stateful, attach, provisions,
 * attaches_external, principal_user, policy_network, policy_filesystem,
 * policy_resources. */
static const stub_spec stubs[] = {
    {"docker", docker_keys, {AKS_ISOLATION_CONTAINER, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0}},
    {"kubernetes", kubernetes_keys, {AKS_ISOLATION_CONTAINER, 1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 0}},
    {"e2b", e2b_keys, {AKS_ISOLATION_MICRO_VM, 1, 1, 1, 1, 1, 1, 0, 0, 1, 0, 0, 1}},
    {"daytona", daytona_keys, {AKS_ISOLATION_CONTAINER, 1, 1, 1, 0, 1, 1, 0, 0, 1, 0, 1, 1}},
    {"ec2_ssm", ec2_ssm_keys, {AKS_ISOLATION_NONE, 1, 0, 0, 0, 1, 0, 1, 1, 0, 0, 0, 0}},
};
#define STUB_COUNT (sizeof(stubs) / sizeof(stubs[0]))

/* ---- helpers --------------------------------------------------------------------- */

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	int n = vasprintf(&s, fmt, ap);
	va_end(ap);
	assert_true(n >= 0);
	return s;
}

static const aks_plugin *load_stub(const char *name)
{
	const char *builddir = getenv("AKS_TEST_BUILDDIR");
	assert_non_null(builddir);
	char *path = xasprintf("%s/tests/plugins/stubs/.libs/%s.so", builddir, name);
	const aks_plugin *plugin = NULL;
	aks_error *err = NULL;
	int rc = aks_plugin_load(path, AKS_PLUGIN_PROVIDER, &plugin, &err);
	if (rc != AKS_OK)
		fail_msg("loading %s: %s", path, aks_error_message(err));
	free(path);
	return plugin;
}

/* Writes `yaml` to a temporary file and builds the stub's config from it. */
static int config_from(const aks_plugin *plugin, const char *yaml, aks_config **out,
                       aks_error **err)
{
	char path[] = "/tmp/aks-stubs-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	size_t len = strlen(yaml);
	assert_int_equal(write(fd, yaml, len), (ssize_t)len);
	assert_int_equal(close(fd), 0);
	int rc = aks_config_load_block(plugin, path, out, err);
	unlink(path);
	return rc;
}

static aks_provider *open_with(const aks_plugin *plugin, const char *yaml, aks_config **cfg)
{
	aks_error *err = NULL;
	if (config_from(plugin, yaml, cfg, &err) != AKS_OK)
		fail_msg("config '%s': %s", yaml, aks_error_message(err));
	aks_provider *prov = NULL;
	if (aks_provider_open(plugin, *cfg, &prov, &err) != AKS_OK)
		fail_msg("open with '%s': %s", yaml, aks_error_message(err));
	return prov;
}

static void assert_caps(const aks_capabilities *c, const caps_spec *want)
{
	assert_non_null(c);
	assert_int_equal(c->isolation, want->isolation);
	assert_non_null(c->languages);
	assert_string_equal(c->languages[0], "python");
	assert_null(c->languages[1]);
	assert_int_equal(c->shell, want->shell);
	assert_int_equal(c->files, want->files);
	assert_int_equal(c->package_install, want->package_install);
	assert_int_equal(c->stateful, want->stateful);
	assert_int_equal(c->attach, want->attach);
	assert_int_equal(c->provisions, want->provisions);
	assert_int_equal(c->attaches_external, want->attaches_external);
	assert_int_equal(c->principal_user, want->principal_user);
	assert_int_equal(c->policy_network, want->policy_network);
	assert_int_equal(c->policy_filesystem, want->policy_filesystem);
	assert_int_equal(c->policy_resources, want->policy_resources);
	assert_int_equal(c->policy_network_allowlist, want->policy_network_allowlist);
}

/* ---- per-stub tests (state: the stub_spec) ------------------------------------------ */

/* The descriptor: name, summary and the schema, key for key. */
static void test_descriptor(void **state)
{
	const stub_spec *s = *state;
	const aks_plugin_descriptor *d = aks_plugin_get_descriptor(load_stub(s->name));
	assert_int_equal(d->kind, AKS_PLUGIN_PROVIDER);
	assert_string_equal(d->name, s->name);
	char *summary = xasprintf("test stub of the %s provider", s->name);
	assert_string_equal(d->summary, summary);
	free(summary);
	size_t i = 0;
	for (; s->keys[i].name; i++) {
		const aks_config_key *k = &d->config_keys[i];
		assert_non_null(k->name);
		assert_string_equal(k->name, s->keys[i].name);
		assert_int_equal(k->type, s->keys[i].type);
		assert_false(k->required);
		if (s->keys[i].default_value)
			assert_string_equal(k->default_value, s->keys[i].default_value);
		else
			assert_null(k->default_value);
	}
	assert_null(d->config_keys[i].name); /* no keys beyond the reference's */
}

/* An empty block: every key answers its default, with its type. */
static void test_defaults(void **state)
{
	const stub_spec *s = *state;
	const aks_plugin *plugin = load_stub(s->name);
	aks_config *cfg = NULL;
	aks_provider *prov = open_with(plugin, "{}\n", &cfg);
	for (size_t i = 0; s->keys[i].name; i++) {
		const key_spec *k = &s->keys[i];
		const char *str = NULL;
		const char *const *v = NULL;
		bool b = true;
		double dbl = 0;
		switch (k->type) {
		case AKS_CONFIG_STRING:
			assert_int_equal(aks__config_string(cfg, k->name, &str), AKS_OK);
			if (k->default_value)
				assert_string_equal(str, k->default_value);
			else
				assert_null(str);
			break;
		case AKS_CONFIG_STRING_LIST:
			assert_int_equal(aks__config_list(cfg, k->name, &v), AKS_OK);
			assert_null(v[0]);
			break;
		case AKS_CONFIG_STRING_MAP:
			assert_int_equal(aks__config_map(cfg, k->name, &v), AKS_OK);
			assert_null(v[0]);
			break;
		case AKS_CONFIG_JSON:
			assert_int_equal(aks__config_json(cfg, k->name, &str), AKS_OK);
			assert_string_equal(str, "{}");
			break;
		case AKS_CONFIG_BOOL:
			assert_int_equal(aks__config_bool(cfg, k->name, &b), AKS_OK);
			assert_false(b);
			break;
		case AKS_CONFIG_DOUBLE:
			assert_int_equal(aks__config_double(cfg, k->name, &dbl), AKS_OK);
			assert_true(dbl == 120.0);
			break;
		default:
			fail_msg("unexpected type %u for %s", k->type, k->name);
		}
	}
	/* Without overrides the instance reports the class's capabilities. */
	assert_caps(aks_plugin_get_capabilities(plugin), &s->caps);
	assert_caps(aks_provider_get_capabilities(prov), &s->caps);
	aks_provider_close(prov);
	aks_config_free(cfg);
}

/* A key the reference does not define is refused, naming the key. */
static void test_unknown_key(void **state)
{
	const stub_spec *s = *state;
	const aks_plugin *plugin = load_stub(s->name);
	aks_config *cfg = NULL;
	aks_error *err = NULL;
	assert_int_equal(config_from(plugin, "imagee: x\n", &cfg, &err), AKS_ECONFIG);
	assert_null(cfg);
	assert_non_null(strstr(aks_error_message(err), "imagee"));
	aks_error_free(err);
}

/* create and attach say what the stub is; destroy is idempotent. */
static void test_refusals(void **state)
{
	const stub_spec *s = *state;
	const aks_plugin *plugin = load_stub(s->name);
	aks_config *cfg = NULL;
	aks_provider *prov = open_with(plugin, "{}\n", &cfg);
	char *msg = xasprintf("%s is a test stub: it cannot run sandboxes", s->name);
	aks_call call;
	aks_call_init(&call, 5, NULL, NULL, NULL);
	aks_sandbox *sb = NULL;
	aks_error *err = NULL;

	int rc = aks_provider_create(prov, &call, &sb, &err);
	assert_null(sb);
	if (s->caps.provisions) {
		assert_int_equal(rc, AKS_EPROVISION);
		assert_non_null(strstr(aks_error_message(err), msg));
	} else {
		assert_int_equal(rc, AKS_ECAPABILITY); /* the host refuses before the stub */
	}
	aks_error_free(err);
	err = NULL;

	assert_int_equal(aks_provider_attach(prov, "abc", &call, &sb, &err), AKS_EPROVISION);
	assert_null(sb);
	assert_non_null(strstr(aks_error_message(err), msg));
	aks_error_free(err);
	err = NULL;

	assert_int_equal(aks_provider_destroy(prov, "abc", &call, &err), AKS_OK);
	assert_int_equal(aks_provider_destroy(prov, "abc", &call, &err), AKS_OK);
	assert_null(err);
	free(msg);
	aks_provider_close(prov);
	aks_config_free(cfg);
}

/* ---- the instance overrides and daytona's own check --------------------------------- */

static const stub_spec *spec(const char *name)
{
	for (size_t i = 0; i < STUB_COUNT; i++)
		if (strcmp(stubs[i].name, name) == 0)
			return &stubs[i];
	fail_msg("no stub %s", name);
	return NULL;
}

static void test_docker_runsc(void **state)
{
	const aks_plugin *plugin = load_stub("docker");
	caps_spec want = spec("docker")->caps;

	/* runsc is gVisor: the instance is syscall_filter, everything else unchanged. */
	aks_config *cfg = NULL;
	aks_provider *prov = open_with(plugin, "runtime: runsc\n", &cfg);
	want.isolation = AKS_ISOLATION_SYSCALL_FILTER;
	assert_caps(aks_provider_get_capabilities(prov), &want);
	/* The class stays what it was. */
	assert_int_equal(aks_plugin_get_capabilities(plugin)->isolation, AKS_ISOLATION_CONTAINER);
	aks_provider_close(prov);
	aks_config_free(cfg);

	/* Any other runtime is a plain container. */
	prov = open_with(plugin, "runtime: nvidia\nimage: python:3.11\n", &cfg);
	want.isolation = AKS_ISOLATION_CONTAINER;
	assert_caps(aks_provider_get_capabilities(prov), &want);
	aks_provider_close(prov);
	aks_config_free(cfg);
}

static void test_kubernetes_network_policy(void **state)
{
	const aks_plugin *plugin = load_stub("kubernetes");
	caps_spec want = spec("kubernetes")->caps;

	/* From a whole config.yaml, as a profile's provider block. */
	aks_config *cfg = NULL;
	aks_provider *prov = open_with(plugin,
	                               "sandbox:\n"
	                               "  profiles:\n"
	                               "    k8s:\n"
	                               "      type: kubernetes\n"
	                               "      kubernetes:\n"
	                               "        namespace: sandboxes\n"
	                               "        network_policy: true\n",
	                               &cfg);
	want.policy_network = want.policy_network_allowlist = true;
	assert_caps(aks_provider_get_capabilities(prov), &want);
	assert_false(aks_plugin_get_capabilities(plugin)->policy_network);
	const char *ns = NULL;
	assert_int_equal(aks__config_string(cfg, "namespace", &ns), AKS_OK);
	assert_string_equal(ns, "sandboxes");
	aks_provider_close(prov);
	aks_config_free(cfg);

	prov = open_with(plugin, "network_policy: false\n", &cfg);
	want.policy_network = want.policy_network_allowlist = false;
	assert_caps(aks_provider_get_capabilities(prov), &want);
	aks_provider_close(prov);
	aks_config_free(cfg);
}

static void test_kubernetes_types(void **state)
{
	const aks_plugin *plugin = load_stub("kubernetes");
	aks_config *cfg = NULL;
	aks_provider *prov = open_with(plugin,
	                               "image_pull_secrets: [regcred]\n"
	                               "labels: {team: ml}\n"
	                               "security_context: {runAsNonRoot: true}\n"
	                               "create_timeout: 30\n",
	                               &cfg);
	const char *const *v = NULL;
	assert_int_equal(aks__config_list(cfg, "image_pull_secrets", &v), AKS_OK);
	assert_string_equal(v[0], "regcred");
	assert_null(v[1]);
	assert_int_equal(aks__config_map(cfg, "labels", &v), AKS_OK);
	assert_string_equal(v[0], "team");
	assert_string_equal(v[1], "ml");
	const char *json = NULL;
	assert_int_equal(aks__config_json(cfg, "security_context", &json), AKS_OK);
	assert_non_null(strstr(json, "runAsNonRoot"));
	double t = 0;
	assert_int_equal(aks__config_double(cfg, "create_timeout", &t), AKS_OK);
	assert_true(t == 30.0);
	aks_provider_close(prov);
	aks_config_free(cfg);

	/* network_policy is a bool: a string is refused at load. */
	aks_error *err = NULL;
	assert_int_equal(config_from(plugin, "network_policy: sometimes\n", &cfg, &err),
	                 AKS_ECONFIG);
	assert_non_null(strstr(aks_error_message(err), "network_policy"));
	aks_error_free(err);
}

static void test_daytona_image_and_snapshot(void **state)
{
	const aks_plugin *plugin = load_stub("daytona");
	aks_config *cfg = NULL;
	aks_error *err = NULL;
	assert_int_equal(config_from(plugin, "image: python:3.12\nsnapshot: snap-1\n", &cfg, &err),
	                 AKS_OK);
	aks_provider *prov = NULL;
	assert_int_equal(aks_provider_open(plugin, cfg, &prov, &err), AKS_ECONFIG);
	assert_null(prov);
	assert_int_equal(aks_error_code(err), AKS_ECONFIG);
	assert_non_null(strstr(aks_error_message(err),
	                       "daytona config sets both 'image' and 'snapshot'; they are "
	                       "mutually exclusive \xe2\x80\x94 pick one"));
	aks_error_free(err);
	aks_config_free(cfg);

	/* Either one alone is fine. */
	prov = open_with(plugin, "image: python:3.12\n", &cfg);
	aks_provider_close(prov);
	aks_config_free(cfg);
	prov = open_with(plugin, "snapshot: snap-1\nenv_vars: {A: b}\n", &cfg);
	aks_provider_close(prov);
	aks_config_free(cfg);
}

int main(void)
{
	static const char *const kinds[] = {"descriptor", "defaults", "unknown key", "refusals"};
	static const CMUnitTestFunction funcs[] = {test_descriptor, test_defaults, test_unknown_key,
	                                           test_refusals};
	enum { PER = sizeof(funcs) / sizeof(funcs[0]), EXTRA = 4 };
	struct CMUnitTest tests[STUB_COUNT * PER + EXTRA];
	char *names[STUB_COUNT * PER];
	size_t n = 0;
	for (size_t i = 0; i < STUB_COUNT; i++)
		for (size_t j = 0; j < PER; j++) {
			names[n] = xasprintf("%s: %s", stubs[i].name, kinds[j]);
			tests[n] =
			    (struct CMUnitTest){names[n], funcs[j], NULL, NULL, (void *)&stubs[i]};
			n++;
		}
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_docker_runsc);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_kubernetes_network_policy);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_kubernetes_types);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_daytona_image_and_snapshot);
	int rc = _cmocka_run_group_tests("stubs", tests, n, NULL, NULL);
	for (size_t i = 0; i < STUB_COUNT * PER; i++)
		free(names[i]);
	return rc;
}
