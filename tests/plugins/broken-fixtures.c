/*
 * broken-fixtures.c - proves that each deliberately broken test plugin is
 * broken in exactly the way its name says, and otherwise valid, using only
 * dlopen() and the SDK headers (no aksandbox code). The loader's own tests
 * then show that the loader catches each one; this test makes sure they
 * would fail for the right reason.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include <aksandbox/plugin.h>
#include <aksandbox/provider.h>

static char path_buf[4096];

/* The build-tree path of a test plugin (or helper library) in broken/. */
static const char *broken_path(const char *file)
{
	const char *top = getenv("AKS_TEST_BUILDDIR");

	if (!top || !*top)
		fail_msg("AKS_TEST_BUILDDIR is not set (run this test with make check)");
	snprintf(path_buf, sizeof(path_buf), "%s/tests/plugins/broken/.libs/%s", top, file);
	return path_buf;
}

static void *open_plugin(const char *name, int mode)
{
	char file[256];

	snprintf(file, sizeof(file), "%s.so", name);
	void *h = dlopen(broken_path(file), mode | RTLD_LOCAL);
	if (!h)
		fail_msg("dlopen(%s): %s", path_buf, dlerror());
	return h;
}

static const aks_plugin_descriptor *entry_of(void *h)
{
	aks_plugin_entry_fn entry;
	void *sym = dlsym(h, "aks_plugin_entry");

	if (!sym)
		fail_msg("no aks_plugin_entry: %s", dlerror());
	memcpy(&entry, &sym, sizeof(entry));
	return entry();
}

static bool has_python(const aks_capabilities *c)
{
	for (const char *const *l = c->languages; l && *l; l++)
		if (strcmp(*l, "python") == 0)
			return true;
	return false;
}

/* Every field the loader checks, against what a valid plugin named `name`
 * built with this SDK holds; `broken` names the one field allowed to differ. */
static void assert_valid_except(const aks_plugin_descriptor *d, const char *name,
                                const char *broken)
{
	assert_non_null(d);
	if (strcmp(broken, "struct") != 0) {
		assert_int_equal(d->struct_version, AKS_DESCRIPTOR_VERSION);
		assert_int_equal(d->struct_size, sizeof(aks_plugin_descriptor));
	}
	if (strcmp(broken, "abi_major") != 0)
		assert_int_equal(d->abi_major, AKS_ABI_MAJOR);
	if (strcmp(broken, "abi_minor") != 0)
		assert_int_equal(d->abi_minor, AKS_ABI_MINOR);
	if (strcmp(broken, "kind") != 0)
		assert_int_equal(d->kind, AKS_PLUGIN_PROVIDER);
	if (strcmp(broken, "name") != 0)
		assert_string_equal(d->name, name);
	if (strcmp(broken, "license") != 0)
		assert_non_null(d->license);
	assert_non_null(d->version);
	assert_non_null(d->summary);
	assert_non_null(d->ops);
	if (strcmp(broken, "kind") == 0)
		return; /* ops is not a provider table */

	const aks_provider_ops *ops = d->ops;
	assert_non_null(ops->capabilities);
	assert_non_null(ops->init);
	assert_non_null(ops->create);
	assert_non_null(ops->destroy);
	assert_non_null(ops->sandbox);
	assert_non_null(ops->sandbox->id);
	assert_non_null(ops->sandbox->close);
	if (strcmp(broken, "execute_code") != 0)
		assert_non_null(ops->sandbox->execute_code);
	if (strcmp(broken, "python") != 0)
		assert_true(has_python(ops->capabilities));
}

static void test_no_entry(void **state)
{
	(void)state;
	void *h = open_plugin("no_entry", RTLD_NOW);
	assert_null(dlsym(h, "aks_plugin_entry"));
	/* It does export a near miss, which holds a valid descriptor. */
	void *sym = dlsym(h, "aks_plugin_entrypoint");
	assert_non_null(sym);
	aks_plugin_entry_fn entry;
	memcpy(&entry, &sym, sizeof(entry));
	assert_valid_except(entry(), "no_entry", "");
	dlclose(h);
}

static void test_null_entry(void **state)
{
	(void)state;
	void *h = open_plugin("null_entry", RTLD_NOW);
	assert_null(entry_of(h));
	dlclose(h);
}

static void test_abi_major(void **state)
{
	(void)state;
	void *h = open_plugin("abi_major", RTLD_NOW);
	const aks_plugin_descriptor *d = entry_of(h);
	assert_valid_except(d, "abi_major", "abi_major");
	assert_int_equal(d->abi_major, AKS_ABI_MAJOR + 1);
	dlclose(h);
}

static void test_abi_minor(void **state)
{
	(void)state;
	void *h = open_plugin("abi_minor", RTLD_NOW);
	const aks_plugin_descriptor *d = entry_of(h);
	assert_valid_except(d, "abi_minor", "abi_minor");
	assert_int_equal(d->abi_minor, AKS_ABI_MINOR + 1);
	dlclose(h);
}

static void test_old_struct(void **state)
{
	(void)state;
	void *h = open_plugin("old_struct", RTLD_NOW);
	const aks_plugin_descriptor *d = entry_of(h);
	assert_valid_except(d, "old_struct", "struct");
	assert_int_equal(d->struct_version, 0);
	assert_int_equal(d->struct_size, 8);
	dlclose(h);
}

static void test_no_name(void **state)
{
	(void)state;
	void *h = open_plugin("no_name", RTLD_NOW);
	const aks_plugin_descriptor *d = entry_of(h);
	assert_valid_except(d, NULL, "name");
	assert_null(d->name);
	dlclose(h);
}

static void test_no_license(void **state)
{
	(void)state;
	void *h = open_plugin("no_license", RTLD_NOW);
	const aks_plugin_descriptor *d = entry_of(h);
	assert_valid_except(d, "no_license", "license");
	assert_null(d->license);
	dlclose(h);
}

static void test_name_mismatch(void **state)
{
	(void)state;
	void *h = open_plugin("name_mismatch", RTLD_NOW);
	assert_valid_except(entry_of(h), "something_else", "");
	dlclose(h);
}

static void test_transport_kind(void **state)
{
	(void)state;
	void *h = open_plugin("transport_kind", RTLD_NOW);
	const aks_plugin_descriptor *d = entry_of(h);
	assert_valid_except(d, "transport_kind", "kind");
	assert_int_equal(d->kind, AKS_PLUGIN_TRANSPORT);
	dlclose(h);
}

static void test_missing_dep(void **state)
{
	struct stat st;

	(void)state;
	/* The helper was built; it is only out of the dynamic linker's reach. */
	assert_int_equal(stat(broken_path("libaks-test-gone.so"), &st), 0);
	void *h = dlopen(broken_path("missing_dep.so"), RTLD_NOW | RTLD_LOCAL);
	if (h) {
		dlclose(h);
		fail_msg("missing_dep.so loaded: libaks-test-gone.so was found");
	}
	const char *why = dlerror();
	assert_non_null(why);
	assert_non_null(strstr(why, "libaks-test-gone.so"));
	assert_non_null(strstr(why, "cannot open shared object file"));
}

static void test_undefined_symbol(void **state)
{
	(void)state;
	void *h = dlopen(broken_path("undefined_symbol.so"), RTLD_NOW | RTLD_LOCAL);
	if (h) {
		dlclose(h);
		fail_msg("undefined_symbol.so loaded with RTLD_NOW");
	}
	const char *why = dlerror();
	assert_non_null(why);
	assert_non_null(strstr(why, "undefined symbol"));
	assert_non_null(strstr(why, "aks_test_symbol_that_does_not_exist"));
	/* Resolved lazily it loads, and is otherwise valid. */
	h = open_plugin("undefined_symbol", RTLD_LAZY);
	assert_valid_except(entry_of(h), "undefined_symbol", "");
	dlclose(h);
}

static void test_no_execute_code(void **state)
{
	(void)state;
	void *h = open_plugin("no_execute_code", RTLD_NOW);
	const aks_plugin_descriptor *d = entry_of(h);
	assert_valid_except(d, "no_execute_code", "execute_code");
	assert_null(((const aks_provider_ops *)d->ops)->sandbox->execute_code);
	dlclose(h);
}

static void test_no_python(void **state)
{
	(void)state;
	void *h = open_plugin("no_python", RTLD_NOW);
	const aks_plugin_descriptor *d = entry_of(h);
	assert_valid_except(d, "no_python", "python");
	assert_false(has_python(((const aks_provider_ops *)d->ops)->capabilities));
	dlclose(h);
}

static void test_extra_export(void **state)
{
	(void)state;
	void *h = open_plugin("extra_export", RTLD_NOW);
	assert_valid_except(entry_of(h), "extra_export", "");
	assert_non_null(dlsym(h, "extra_export_leaked_helper"));
	assert_non_null(dlsym(h, "extra_export_leaked_table"));
	dlclose(h);
}

static void test_declared_no_slot(void **state)
{
	(void)state;
	void *h = open_plugin("declared_no_slot", RTLD_NOW);
	const aks_plugin_descriptor *d = entry_of(h);
	assert_valid_except(d, "declared_no_slot", "");
	const aks_provider_ops *ops = d->ops;
	assert_true(ops->capabilities->package_install);
	assert_null(ops->sandbox->install_packages);
	dlclose(h);
}

static void test_mixed_case(void **state)
{
	(void)state;
	void *h = open_plugin("Mixed_Case", RTLD_NOW);
	assert_valid_except(entry_of(h), "Mixed_Case", ""); /* valid but for its name's case */
	dlclose(h);
}

static void test_contract_liar(void **state)
{
	(void)state;
	void *h = open_plugin("contract_liar", RTLD_NOW);
	const aks_plugin_descriptor *d = entry_of(h);
	assert_valid_except(d, "contract_liar", "");
	const aks_provider_ops *ops = d->ops;
	/* The lie must be invisible to a loader: declared and slot present. */
	assert_true(ops->capabilities->package_install);
	assert_non_null(ops->sandbox->install_packages);
	assert_null(dlsym(h, "fake_execute_code")); /* the rest stays hidden */
	dlclose(h);
}

static void test_leaky_child(void **state)
{
	(void)state;
	void *h = open_plugin("leaky_child", RTLD_NOW);
	const aks_plugin_descriptor *d = entry_of(h);
	assert_valid_except(d, "leaky_child", "");
	/* A loader sees a valid provider: the leak is in what its programs get. */
	const aks_provider_ops *ops = d->ops;
	assert_non_null(ops->sandbox->execute_code);
	assert_null(dlsym(h, "leaky_run"));
	dlclose(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_no_entry),         cmocka_unit_test(test_null_entry),
	    cmocka_unit_test(test_abi_major),        cmocka_unit_test(test_abi_minor),
	    cmocka_unit_test(test_old_struct),       cmocka_unit_test(test_no_name),
	    cmocka_unit_test(test_no_license),       cmocka_unit_test(test_name_mismatch),
	    cmocka_unit_test(test_transport_kind),   cmocka_unit_test(test_missing_dep),
	    cmocka_unit_test(test_undefined_symbol), cmocka_unit_test(test_no_execute_code),
	    cmocka_unit_test(test_no_python),        cmocka_unit_test(test_extra_export),
	    cmocka_unit_test(test_contract_liar),    cmocka_unit_test(test_leaky_child),
	    cmocka_unit_test(test_declared_no_slot), cmocka_unit_test(test_mixed_case),
	};
	return cmocka_run_group_tests_name("broken-fixtures", tests, NULL, NULL);
}
