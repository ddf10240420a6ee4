/*
 * sdk/check/main.c - aksandbox-plugin-check [--json] [--ack-wait S] PLUGIN.so [config.yaml]
 *
 * Runs the contract suite of the plugin's kind (provider, store or transport) against one plugin
 * file and exits with 0 when no check failed, 1 when any did, 2 on a usage error. The
 * report is TAP, or one JSON document with --json (harness.h).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

// clang-format off
#define CHECK(name) {#name, aks_check_##name, false}
#define GATE(name) {#name, aks_check_##name, true}
// clang-format on

/* The checks run in this order; later ones use what earlier ones set up. */
static const struct aks_check_case provider_checks[] = {
    GATE(plugin_loads),
    CHECK(exports_only_entry),
    CHECK(descriptor_is_valid),
    CHECK(unknown_config_key_is_refused),
    GATE(provider_opens),
    CHECK(execute_python),
    CHECK(declared_languages_run),
    CHECK(undeclared_language),
    CHECK(honesty_shell),
    CHECK(honesty_files),
    CHECK(file_paths),
    CHECK(honesty_package_install),
    CHECK(program_failure_is_result),
    CHECK(close_is_idempotent),
    CHECK(destroy_is_idempotent),
    CHECK(attach_honesty),
    CHECK(deadline_and_cancel_are_honoured),
    CHECK(child_world),
    CHECK(policy_network),
    CHECK(policy_resources),
    CHECK(policy_filesystem),
    CHECK(stateful),
    CHECK(provider_reopens),
};

static const struct aks_check_case store_checks[] = {
    GATE(plugin_loads),
    CHECK(exports_only_entry),
    CHECK(descriptor_is_valid),
    CHECK(unknown_config_key_is_refused),
    GATE(store_opens),
    CHECK(store_round_trip),
    CHECK(store_failed_update_writes_nothing),
    CHECK(store_names_apart),
    CHECK(store_namespaces),
    CHECK(store_updates_are_atomic),
    CHECK(store_lock),
    CHECK(store_expiring_records),
    CHECK(store_reopens),
};

static const struct aks_check_case transport_checks[] = {
    GATE(plugin_loads),
    CHECK(exports_only_entry),
    CHECK(descriptor_is_valid),
    CHECK(unknown_config_key_is_refused),
    GATE(transport_opens),
    CHECK(transport_queues),
    CHECK(transport_round_trip),
    CHECK(transport_no_group),
    CHECK(transport_fetch_waits),
    CHECK(transport_cancellation),
    CHECK(transport_nack_redelivers),
    CHECK(transport_close_redelivers),
    CHECK(transport_ack_wait_redelivers),
    CHECK(transport_in_progress),
    CHECK(transport_depth),
    CHECK(transport_group_fifo),
    CHECK(transport_groups_in_parallel),
    CHECK(transport_dedup),
    CHECK(transport_dead_letter),
    CHECK(transport_reopens),
};

_Static_assert(sizeof(store_checks) <= sizeof(provider_checks) &&
                   sizeof(transport_checks) <= sizeof(provider_checks),
               "proofs[] holds any suite");

static void usage(FILE *f)
{
	fprintf(f, "usage: aksandbox-plugin-check [--json] [--record] [--ack-wait SECONDS]\n"
	           "                              PLUGIN.so [config.yaml]\n"
	           "\n"
	           "Runs the aksandbox contract suite of PLUGIN.so's kind (provider, store or\n"
	           "transport) against it, configured with the plugin's block from config.yaml\n"
	           "(a whole config.yaml or the bare block), or with its defaults. Prints TAP,\n"
	           "or one JSON document with --json. With --record, a provider's results become\n"
	           "this machine's proof of what that instance enforces, which `aksandbox check`\n"
	           "reports. --ack-wait gives a transport's configured ack wait (visibility\n"
	           "timeout), which its redelivery and in_progress checks wait out; without it\n"
	           "they are not verified. A transport's queues must be reserved for testing:\n"
	           "the suite acks messages it did not send. Exits 0 when no check fails.\n");
}

/* Records the run's results as the proof of a new instance of the checked configuration
 * (the run's own instance was closed by provider_reopens). */
static int record(const struct aks_check_case *cases, const int *proofs, size_t count)
{
	const char *names[64];
	int results[64];
	size_t n = 0;
	for (size_t i = 0; i < count && n < 64; i++) {
		if (proofs[i] == AKS_PROOF_NONE)
			continue;
		names[n] = cases[i].name;
		results[n++] = proofs[i];
	}
	aks_provider *prov = NULL;
	aks_error *err = NULL;
	int rc = aks_check.plugin && aks_check.config
	             ? aks_provider_open(aks_check.plugin, aks_check.config, &prov, &err)
	             : AKS_EINVAL;
	if (rc == AKS_OK)
		rc = aks_provider_record_proof(prov, names, results, n, &err);
	if (prov)
		aks_provider_close(prov);
	if (rc == AKS_OK)
		fprintf(stderr,
		        "aksandbox-plugin-check: recorded %zu results as this machine's "
		        "proof of %s\n",
		        n, aks_check.plugin_path);
	else
		fprintf(stderr, "aksandbox-plugin-check: cannot record the results: %s\n",
		        err ? aks_error_message(err) : "the instance never opened");
	aks_error_free(err);
	return rc;
}

int main(int argc, char **argv)
{
	static char path[4096];
	enum aks_check_format format = AKS_CHECK_TAP;

	if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		usage(stdout);
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("aksandbox-plugin-check %s (plugin ABI %d.%d)\n", aks_version(),
		       AKS_ABI_MAJOR, AKS_ABI_MINOR);
		return 0;
	}
	int first = 1;
	bool save = false;
	for (; first < argc; first++) {
		if (strcmp(argv[first], "--json") == 0)
			format = AKS_CHECK_JSON;
		else if (strcmp(argv[first], "--record") == 0)
			save = true;
		else if (strcmp(argv[first], "--ack-wait") == 0 && first + 1 < argc) {
			char *end = NULL;
			aks_check.ack_wait = strtod(argv[++first], &end);
			if (!*argv[first] || *end || !(aks_check.ack_wait > 0) ||
			    aks_check.ack_wait > 3600) {
				fprintf(stderr, "aksandbox-plugin-check: --ack-wait takes seconds, "
				                "more than 0 and at most 3600\n");
				return 2;
			}
		} else
			break;
	}
	int left = argc - first;
	if (left < 1 || left > 2 || !*argv[first] || argv[first][0] == '-') {
		usage(stderr);
		return 2;
	}
	/* A bare name would be searched on the plugin path; the suite checks
	 * exactly the file it was given. */
	const char *file = argv[first];
	int n = snprintf(path, sizeof(path), "%s%s", strchr(file, '/') ? "" : "./", file);
	if (n < 0 || (size_t)n >= sizeof(path)) {
		fprintf(stderr, "aksandbox-plugin-check: path too long\n");
		return 2;
	}
	aks_check.plugin_path = path;
	aks_check.config_path = left == 2 ? argv[first + 1] : NULL;

	/* Which contract: the plugin's kind decides (a file that does not load at all
	 * gets the provider suite, whose first check says why). */
	const aks_plugin *peek = NULL;
	aks_error *err = NULL;
	aks_check.kind = AKS_PLUGIN_PROVIDER;
	if (aks_plugin_load(path, 0, &peek, &err) == AKS_OK &&
	    (aks_plugin_get_descriptor(peek)->kind == AKS_PLUGIN_STORE ||
	     aks_plugin_get_descriptor(peek)->kind == AKS_PLUGIN_TRANSPORT))
		aks_check.kind = (int)aks_plugin_get_descriptor(peek)->kind;
	aks_error_free(err);

	bool store = aks_check.kind == AKS_PLUGIN_STORE;
	bool transport = aks_check.kind == AKS_PLUGIN_TRANSPORT;
	int proofs[sizeof(provider_checks) / sizeof(*provider_checks)];
	size_t failed =
	    transport ? aks_check_run("aksandbox-plugin-check (transport)", path, transport_checks,
	                              sizeof(transport_checks) / sizeof(*transport_checks),
	                              aks_check_transport_teardown, format, proofs)
	    : store   ? aks_check_run("aksandbox-plugin-check (store)", path, store_checks,
	                              sizeof(store_checks) / sizeof(*store_checks),
	                              aks_check_teardown, format, proofs)
	              : aks_check_run("aksandbox-plugin-check", path, provider_checks,
	                              sizeof(provider_checks) / sizeof(*provider_checks),
	                              aks_check_teardown, format, proofs);
	int recorded = AKS_OK;
	if (save && !store && !transport)
		recorded = record(provider_checks, proofs,
		                  sizeof(provider_checks) / sizeof(*provider_checks));

	/* The instance is still open when a check failed before the last one. */
	if (aks_check.provider)
		aks_provider_close(aks_check.provider);
	aks_check_store_close();
	aks_check_transport_close();
	aks_config_free(aks_check.config);
	return failed || recorded != AKS_OK ? 1 : 0;
}
