/* Unit tests: plugin resolution, loading and validation, one deliberately
 * broken plugin per failure mode (tests/plugins/broken/), each with its exact
 * message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/internal.h"

static char broken_dir[1024];
static char fake_dir[1024];
static char tmp_dir[256];

static int setup(void **state)
{
	(void)state;
	const char *build = getenv("AKS_TEST_BUILDDIR");
	if (!build)
		return -1;
	snprintf(broken_dir, sizeof(broken_dir), "%s/tests/plugins/broken/.libs", build);
	snprintf(fake_dir, sizeof(fake_dir), "%s/tests/plugins/fake/.libs", build);
	char *real = realpath(broken_dir, NULL);
	if (!real)
		return -1;
	snprintf(broken_dir, sizeof(broken_dir), "%s", real);
	free(real);
	real = realpath(fake_dir, NULL);
	if (!real)
		return -1;
	snprintf(fake_dir, sizeof(fake_dir), "%s", real);
	free(real);
	snprintf(tmp_dir, sizeof(tmp_dir), "/tmp/aks-loader-XXXXXX");
	return mkdtemp(tmp_dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp_dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Loads `type` expecting failure `code`; returns the message (caller frees). */
static char *load_err(const char *type, int kind, int code)
{
	const aks_plugin *p = NULL;
	aks_error *err = NULL;
	int rc = aks_plugin_load(type, kind, &p, &err);
	if (rc != code)
		fail_msg("loading %s: expected %d, got %d (%s)", type, code, rc,
		         err ? aks_error_message(err) : "no error");
	assert_null(p);
	char *msg = strdup(aks_error_message(err));
	aks_error_free(err);
	return msg;
}

static char *broken(const char *name)
{
	static char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s.so", broken_dir, name);
	return path;
}

/* `expected` with every "%s" replaced by the plugin's path. */
static void expect_broken(const char *name, const char *expected_template)
{
	char *path = broken(name);
	char expected[4 * PATH_MAX] = "";
	size_t used = 0;
	for (const char *t = expected_template; *t && used + PATH_MAX < sizeof(expected);) {
		if (t[0] == '%' && t[1] == 's') {
			used +=
			    (size_t)snprintf(expected + used, sizeof(expected) - used, "%s", path);
			t += 2;
		} else {
			expected[used++] = *t++;
			expected[used] = '\0';
		}
	}
	char *msg = load_err(path, AKS_PLUGIN_PROVIDER, AKS_EPLUGIN);
	assert_string_equal(msg, expected);
	free(msg);
}

static void test_not_found_names_package(void **state)
{
	(void)state;
	setenv("AKS_PLUGIN_PATH", "/nonexistent/a:/nonexistent/b", 1);
	setenv("AKS_PLUGIN_SYSTEM_DIR", "/nonexistent/system", 1);
	char *msg = load_err("docker", AKS_PLUGIN_PROVIDER, AKS_EPLUGIN);
	assert_string_equal(msg, "plugin 'docker' not found; searched: /nonexistent/a/docker.so, "
	                         "/nonexistent/b/docker.so, /nonexistent/system/docker.so; it is "
	                         "shipped in the package 'aksandbox-plugin-docker': install it");
	free(msg);
	msg = load_err("ec2_ssm", AKS_PLUGIN_PROVIDER, AKS_EPLUGIN);
	assert_non_null(strstr(msg, "'aksandbox-plugin-ec2-ssm'"));
	free(msg);
	/* every in-tree kind, not only providers */
	msg = load_err("signed_token", AKS_PLUGIN_RESOLVER, AKS_EPLUGIN);
	assert_non_null(strstr(msg, "'aksandbox-plugin-signed-token'"));
	free(msg);
	msg = load_err("redis", AKS_PLUGIN_STORE, AKS_EPLUGIN);
	assert_non_null(strstr(msg, "'aksandbox-plugin-redis'"));
	free(msg);
	/* valkey.so ships beside redis.so, built from the same sources */
	msg = load_err("valkey", AKS_PLUGIN_STORE, AKS_EPLUGIN);
	assert_non_null(strstr(msg, "plugin 'valkey' not found"));
	assert_non_null(strstr(msg, "'aksandbox-plugin-redis'"));
	free(msg);
	msg = load_err("acme_cloud", AKS_PLUGIN_PROVIDER, AKS_EPLUGIN);
	assert_non_null(strstr(msg, "plugin 'acme_cloud' not found; searched: "
	                            "/nonexistent/a/acme_cloud.so"));
	assert_non_null(strstr(msg, "add its directory to AKS_PLUGIN_PATH, or give the path to the "
	                            ".so"));
	free(msg);
	setenv("AKS_PLUGIN_PATH", "", 1);
	setenv("AKS_PLUGIN_SYSTEM_DIR", "", 1);
	msg = load_err("docker", AKS_PLUGIN_PROVIDER, AKS_EPLUGIN);
	assert_non_null(strstr(msg, "searched: no directories"));
	free(msg);
}

static void test_bad_names_and_paths(void **state)
{
	(void)state;
	char *msg = load_err("Docker!", AKS_PLUGIN_PROVIDER, AKS_ECONFIG);
	assert_string_equal(msg,
	                    "'Docker!' is neither a plugin name (lowercase letters, digits and "
	                    "'_') nor a path to a .so");
	free(msg);
	msg = load_err("/nonexistent/x.so", AKS_PLUGIN_PROVIDER, AKS_EPLUGIN);
	assert_string_equal(msg,
	                    "plugin file '/nonexistent/x.so' not found: No such file or directory");
	free(msg);
	const aks_plugin *p = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_plugin_load(NULL, 0, &p, &err), AKS_EINVAL);
	aks_error_free(err);
}

static void test_no_entry(void **state)
{
	(void)state;
	expect_broken("no_entry",
	              "'%s' is not an aksandbox plugin: it does not export aks_plugin_entry");
}

static void test_null_entry(void **state)
{
	(void)state;
	expect_broken("null_entry", "plugin '%s': aks_plugin_entry() returned no descriptor");
}

/* The broken fixtures are built for this SDK's minor (abi_minor for one more): the words
 * follow it. */
static void test_abi_major(void **state)
{
	(void)state;
	char want[300];
	snprintf(want, sizeof(want),
	         "plugin '%%s' was built for plugin ABI 2.%d, but this host implements ABI 1.%d; "
	         "rebuild it against aksandbox-sdk 1.x",
	         AKS_ABI_MINOR, AKS_ABI_MINOR);
	expect_broken("abi_major", want);
}

/* What loading `path` writes to stderr (the loader logs there), with the load's status.
 * The text lives until the next call. */
static const char *load_stderr(const char *path, int *rc)
{
	FILE *tmp = tmpfile();
	assert_non_null(tmp);
	fflush(stderr);
	int saved = dup(2);
	dup2(fileno(tmp), 2);
	const aks_plugin *p = NULL;
	aks_error *err = NULL;
	*rc = aks_plugin_load(path, AKS_PLUGIN_PROVIDER, &p, &err);
	aks_error_free(err);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	static char text[4096]; /* static: a failed assertion leaks nothing */
	rewind(tmp);
	size_t n = fread(text, 1, sizeof(text) - 1, tmp);
	text[n] = '\0';
	fclose(tmp);
	return text;
}

/* A plugin exporting more than its entry point loads, with a warning naming what. */
static void test_extra_exports_warned(void **state)
{
	(void)state;
	int rc;
	const char *text = load_stderr(broken("extra_export"), &rc);
	assert_int_equal(rc, AKS_OK);
	assert_non_null(strstr(text, "plugin 'extra_export'"));
	assert_non_null(strstr(text, "exports 2 symbols besides aks_plugin_entry"));
	assert_non_null(strstr(text, "extra_export_leaked_helper"));
	assert_non_null(strstr(text, "extra_export_leaked_table"));
	assert_non_null(strstr(text, "-fvisibility=hidden"));
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/fake.so", fake_dir);
	text = load_stderr(path, &rc);
	assert_int_equal(rc, AKS_OK);
	assert_null(strstr(text, "besides aks_plugin_entry"));
}

static void test_abi_minor(void **state)
{
	(void)state;
	char want[300];
	snprintf(want, sizeof(want),
	         "plugin '%%s' needs plugin ABI 1.%d, but this host implements ABI 1.%d; upgrade "
	         "aksandbox or rebuild the plugin against this SDK",
	         AKS_ABI_MINOR + 1, AKS_ABI_MINOR);
	expect_broken("abi_minor", want);
}

static void test_old_struct(void **state)
{
	(void)state;
	expect_broken("old_struct", "plugin '%s': descriptor has version 0 and size 8 (expected "
	                            "version >= 1 and size >= 104); rebuild it against the "
	                            "aksandbox SDK");
}

static void test_required_fields(void **state)
{
	(void)state;
	expect_broken("no_name", "plugin '%s': descriptor has no name");
	expect_broken("no_license", "plugin '%s': descriptor has no license");
}

static void test_name_mismatch(void **state)
{
	(void)state;
	expect_broken("name_mismatch", "plugin file '%s' declares the name 'something_else'; a "
	                               "plugin's name must match its file name ('name_mismatch')");
}

static void test_wrong_kind(void **state)
{
	(void)state;
	expect_broken("transport_kind", "plugin 'transport_kind' (%s) is a transport plugin, but a "
	                                "provider plugin is needed here");
	/* The same file loads when any kind is acceptable. */
	const aks_plugin *p = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_plugin_load(broken("transport_kind"), 0, &p, &err), AKS_OK);
	assert_int_equal(aks_plugin_get_descriptor(p)->kind, AKS_PLUGIN_TRANSPORT);
	assert_null(aks_plugin_get_capabilities(p));
}

static void test_missing_library(void **state)
{
	(void)state;
	char *path = broken("missing_dep");
	char *msg = load_err(path, AKS_PLUGIN_PROVIDER, AKS_EPLUGIN);
	char prefix[PATH_MAX + 64];
	snprintf(prefix, sizeof(prefix), "cannot load plugin '%s': ", path);
	assert_memory_equal(msg, prefix, strlen(prefix));
	assert_non_null(strstr(msg, "libaks-test-gone.so"));
	assert_non_null(strstr(msg, "cannot open shared object file"));
	char hint[PATH_MAX + 128];
	snprintf(hint, sizeof(hint),
	         "; a shared library the plugin needs is missing: install it (check with 'ldd %s')",
	         path);
	assert_non_null(strstr(msg, hint));
	free(msg);
}

static void test_undefined_symbol(void **state)
{
	(void)state;
	char *path = broken("undefined_symbol");
	char *msg = load_err(path, AKS_PLUGIN_PROVIDER, AKS_EPLUGIN);
	assert_non_null(strstr(msg, "undefined symbol"));
	assert_non_null(strstr(msg, "it was built against another version of a library, or without "
	                            "-no-undefined"));
	free(msg);
}

static void test_missing_mandatory_op(void **state)
{
	(void)state;
	expect_broken("no_execute_code",
	              "plugin '%s': provider is missing the mandatory operation 'execute_code'");
}

/* A declared capability with no operation behind it is refused, naming both. */
static void test_declared_without_slot(void **state)
{
	(void)state;
	expect_broken("declared_no_slot",
	              "plugin '%s' declares the package_install capability but has no "
	              "'install_packages' operation; implement it or do not declare "
	              "package_install");
}

/* The name rule holds whatever the path: a file Mixed_Case.so declaring "Mixed_Case". */
static void test_name_rule_by_path(void **state)
{
	(void)state;
	expect_broken("Mixed_Case", "plugin '%s' declares the name 'Mixed_Case', which is not a "
	                            "plugin name: lowercase letters, digits and '_', at most 64");
}

/* Every slot of a store is mandatory; the loader names the first one missing, before any
 * plugin code runs. */
static void test_store_missing_op(void **state)
{
	(void)state;
	char *path = broken("store_no_lock");
	char *msg = load_err(path, AKS_PLUGIN_STORE, AKS_EPLUGIN);
	char expected[PATH_MAX + 128];
	snprintf(expected, sizeof(expected),
	         "plugin '%s': store is missing the mandatory operation 'lock'", path);
	assert_string_equal(msg, expected);
	free(msg);
}

static void test_no_python(void **state)
{
	(void)state;
	expect_broken("no_python",
	              "plugin '%s': provider does not declare the mandatory language 'python'");
}

static void copy_file(const char *from, const char *to, mode_t mode)
{
	char cmd[3 * PATH_MAX];
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", from, to);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(chmod(to, mode), 0);
}

static void test_group_writable_refused(void **state)
{
	(void)state;
	char dir[512], path[PATH_MAX + 16], src[PATH_MAX + 16];
	snprintf(dir, sizeof(dir), "%s/writable", tmp_dir);
	mkdir(dir, 0755);
	snprintf(path, sizeof(path), "%s/fake.so", dir);
	snprintf(src, sizeof(src), "%s/fake.so", fake_dir);
	copy_file(src, path, 0666);
	char *msg = load_err(path, AKS_PLUGIN_PROVIDER, AKS_EPLUGIN);
	char expected[3 * PATH_MAX];
	snprintf(expected, sizeof(expected),
	         "refusing to load plugin '%s': it is writable by group or others (mode 0666); run "
	         "'chmod go-w %s'",
	         path, path);
	assert_string_equal(msg, expected);
	free(msg);
}

static void test_search_order_and_reuse(void **state)
{
	(void)state;
	char a[512], b[512], src[PATH_MAX + 16], dst[PATH_MAX + 16], env[1100];
	snprintf(a, sizeof(a), "%s/a", tmp_dir);
	snprintf(b, sizeof(b), "%s/b", tmp_dir);
	mkdir(a, 0755);
	mkdir(b, 0755);
	snprintf(src, sizeof(src), "%s/fake.so", fake_dir);
	snprintf(dst, sizeof(dst), "%s/fake.so", a);
	copy_file(src, dst, 0755);
	snprintf(dst, sizeof(dst), "%s/fake.so", b);
	copy_file(src, dst, 0755);
	snprintf(env, sizeof(env), "%s:%s", b, a);
	setenv("AKS_PLUGIN_PATH", env, 1);
	setenv("AKS_PLUGIN_SYSTEM_DIR", "", 1);

	const aks_plugin *first = NULL, *again = NULL, *by_path = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_plugin_load("fake", AKS_PLUGIN_PROVIDER, &first, &err), AKS_OK);
	/* The first directory of AKS_PLUGIN_PATH wins. */
	assert_string_equal(aks_plugin_get_file(first), dst);
	assert_int_equal(aks_plugin_load("fake", AKS_PLUGIN_PROVIDER, &again, &err), AKS_OK);
	assert_ptr_equal(first, again);
	assert_int_equal(aks_plugin_load(dst, AKS_PLUGIN_PROVIDER, &by_path, &err), AKS_OK);
	assert_ptr_equal(first, by_path);
	assert_string_equal(aks_plugin_get_descriptor(first)->name, "fake");
	assert_non_null(aks_plugin_get_capabilities(first));
}

typedef struct visit_log {
	int count;
	int fake;
	char first_fake[PATH_MAX];
} visit_log;

static int visit(const char *file, const aks_plugin *plugin, const aks_error *error, void *data)
{
	visit_log *log = data;
	log->count++;
	if (plugin && strcmp(aks_plugin_get_descriptor(plugin)->name, "fake") == 0) {
		if (!log->fake++)
			snprintf(log->first_fake, sizeof(log->first_fake), "%s", file);
	}
	(void)error;
	return 0;
}

static void test_foreach_skips_shadowed(void **state)
{
	(void)state;
	char a[512], b[512], env[1100], expected[PATH_MAX + 16];
	snprintf(a, sizeof(a), "%s/a", tmp_dir);
	snprintf(b, sizeof(b), "%s/b", tmp_dir);
	snprintf(env, sizeof(env), "%s:%s", a, b);
	setenv("AKS_PLUGIN_PATH", env, 1);
	setenv("AKS_PLUGIN_SYSTEM_DIR", "", 1);
	visit_log log = {0};
	assert_int_equal(aks_plugin_foreach(visit, &log), 0);
	assert_int_equal(log.fake, 1);
	assert_int_equal(log.count, 1);
	snprintf(expected, sizeof(expected), "%s/fake.so", a);
	assert_string_equal(log.first_fake, expected);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_not_found_names_package),
	    cmocka_unit_test(test_bad_names_and_paths),
	    cmocka_unit_test(test_no_entry),
	    cmocka_unit_test(test_null_entry),
	    cmocka_unit_test(test_abi_major),
	    cmocka_unit_test(test_abi_minor),
	    cmocka_unit_test(test_extra_exports_warned),
	    cmocka_unit_test(test_old_struct),
	    cmocka_unit_test(test_required_fields),
	    cmocka_unit_test(test_name_mismatch),
	    cmocka_unit_test(test_wrong_kind),
	    cmocka_unit_test(test_missing_library),
	    cmocka_unit_test(test_undefined_symbol),
	    cmocka_unit_test(test_missing_mandatory_op),
	    cmocka_unit_test(test_declared_without_slot),
	    cmocka_unit_test(test_name_rule_by_path),
	    cmocka_unit_test(test_store_missing_op),
	    cmocka_unit_test(test_no_python),
	    cmocka_unit_test(test_group_writable_refused),
	    cmocka_unit_test(test_search_order_and_reuse),
	    cmocka_unit_test(test_foreach_skips_shadowed),
	};
	return cmocka_run_group_tests_name("loader", tests, setup, teardown);
}
