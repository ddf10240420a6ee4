/*
 * sdk/check/main.c - aksandbox-plugin-check PLUGIN.so [config.yaml]
 *
 * Runs the provider contract suite against one plugin file and exits with 0
 * when every check passed, 1 when any failed, 2 on a usage error. Output is
 * cmocka's (TAP with CMOCKA_MESSAGE_OUTPUT=TAP).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* A check named as its function without the aks_check_ prefix, with the
 * teardown that releases whatever it left behind. */
// clang-format off
#define CHECK(name) {#name, aks_check_##name, NULL, aks_check_teardown, NULL}
// clang-format on

static void usage(FILE *f)
{
	fprintf(f, "usage: aksandbox-plugin-check PLUGIN.so [config.yaml]\n"
	           "\n"
	           "Runs the aksandbox contract suite of PLUGIN.so's kind (provider or store)\n"
	           "against it, configured\n"
	           "with the plugin's block from config.yaml (a whole config.yaml or the bare\n"
	           "block), or with its defaults. Exits 0 when every check passes.\n");
}

int main(int argc, char **argv)
{
	static char path[4096];

	if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		usage(stdout);
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("aksandbox-plugin-check %s (plugin ABI %d.%d)\n", aks_version(),
		       AKS_ABI_MAJOR, AKS_ABI_MINOR);
		return 0;
	}
	if (argc < 2 || argc > 3 || !*argv[1]) {
		usage(stderr);
		return 2;
	}
	/* A bare name would be searched on the plugin path; the suite checks
	 * exactly the file it was given. */
	int n = snprintf(path, sizeof(path), "%s%s", strchr(argv[1], '/') ? "" : "./", argv[1]);
	if (n < 0 || (size_t)n >= sizeof(path)) {
		fprintf(stderr, "aksandbox-plugin-check: path too long\n");
		return 2;
	}
	aks_check.plugin_path = path;
	aks_check.config_path = argc == 3 ? argv[2] : NULL;

	/* Which contract: the plugin's kind decides (a file that does not load at all
	 * gets the provider suite, whose first check says why). */
	const aks_plugin *peek = NULL;
	aks_error *err = NULL;
	aks_check.kind = AKS_PLUGIN_PROVIDER;
	if (aks_plugin_load(path, 0, &peek, &err) == AKS_OK &&
	    aks_plugin_get_descriptor(peek)->kind == AKS_PLUGIN_STORE)
		aks_check.kind = AKS_PLUGIN_STORE;
	aks_error_free(err);

	/* The checks run in this order; later ones use what earlier ones set up. */
	const struct CMUnitTest provider_checks[] = {
	    CHECK(plugin_loads),
	    CHECK(exports_only_entry),
	    CHECK(descriptor_is_valid),
	    CHECK(unknown_config_key_is_refused),
	    CHECK(provider_opens),
	    CHECK(execute_python),
	    CHECK(undeclared_language),
	    CHECK(honesty_shell),
	    CHECK(honesty_files),
	    CHECK(honesty_package_install),
	    CHECK(program_failure_is_result),
	    CHECK(close_is_idempotent),
	    CHECK(destroy_is_idempotent),
	    CHECK(attach_honesty),
	    CHECK(deadline_and_cancel_are_honoured),
	    CHECK(child_world),
	    CHECK(provider_reopens),
	};
	const struct CMUnitTest store_checks[] = {
	    CHECK(plugin_loads),
	    CHECK(exports_only_entry),
	    CHECK(descriptor_is_valid),
	    CHECK(unknown_config_key_is_refused),
	    CHECK(store_opens),
	    CHECK(store_round_trip),
	    CHECK(store_failed_update_writes_nothing),
	    CHECK(store_names_apart),
	    CHECK(store_namespaces),
	    CHECK(store_updates_are_atomic),
	    CHECK(store_lock),
	    CHECK(store_expiring_records),
	    CHECK(store_reopens),
	};
	int failed = aks_check.kind == AKS_PLUGIN_STORE
	                 ? cmocka_run_group_tests_name("aksandbox-plugin-check (store)",
	                                               store_checks, NULL, NULL)
	                 : cmocka_run_group_tests_name("aksandbox-plugin-check", provider_checks,
	                                               NULL, NULL);

	/* The instance is still open when a check failed before the last one. */
	if (aks_check.provider)
		aks_provider_close(aks_check.provider);
	aks_check_store_close();
	aks_config_free(aks_check.config);
	return failed ? 1 : 0;
}
