/*
 * sdk/check/check.h - shared state and helpers of aksandbox-plugin-check, the
 * provider contract suite (the seeds' SandboxProviderContract) as a program.
 *
 * The checks run in order in one process and share what the earlier ones set
 * up (the loaded plugin, its config block, the provider instance). When a gate
 * (the plugin loads, the instance opens) fails, what needs it is reported once as
 * not run; a check that cannot prove its point here is NOT VERIFIED; a broken
 * plugin never passes by omission.
 */
#ifndef AKS_CHECK_CHECK_H
#define AKS_CHECK_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include <aksandbox/aksandbox.h>

#include "harness.h"

/* Every sandbox call gets this many seconds. */
#define AKS_CHECK_CALL_TIMEOUT 30

/* The program the seeds' suite expects to fail: an undefined name in Python,
 * so it exits non-zero on real backends too. */
#define AKS_CHECK_FAIL_MARKER "__nonzero_exit__"

/* The key no schema declares. */
#define AKS_CHECK_UNKNOWN_KEY "definitely_not_a_key"

struct aks_check_state {
	const char *plugin_path;  /* as given, with "./" added when it had no '/' */
	const char *config_path;  /* NULL: the default block */
	int kind;                 /* the plugin's kind: which suite runs (main.c) */
	const aks_plugin *plugin; /* set by check_plugin_loads */
	aks_config *config;       /* set by check_provider_opens */
	aks_provider *provider;   /* set by check_provider_opens */
	double ack_wait;          /* --ack-wait: the transport's ack wait, seconds; 0 unknown */
};

extern struct aks_check_state aks_check;

/* ---- checks (each an aks_check_case: harness.h) ---- */
void aks_check_plugin_loads(void);
void aks_check_exports_only_entry(void);
void aks_check_descriptor_is_valid(void);
void aks_check_unknown_config_key_is_refused(void);
void aks_check_provider_opens(void);
void aks_check_execute_python(void);
void aks_check_declared_languages_run(void);
void aks_check_undeclared_language(void);
void aks_check_honesty_shell(void);
void aks_check_honesty_files(void);
void aks_check_file_paths(void);
void aks_check_honesty_package_install(void);
void aks_check_program_failure_is_result(void);
void aks_check_close_is_idempotent(void);
void aks_check_destroy_is_idempotent(void);
void aks_check_attach_honesty(void);
void aks_check_deadline_and_cancel_are_honoured(void);
void aks_check_child_world(void);
void aks_check_policy_network(void);
void aks_check_policy_resources(void);
void aks_check_policy_filesystem(void);
void aks_check_stateful(void);
void aks_check_provider_reopens(void);

/* The store contract (checks_store.c), for plugins of kind AKS_PLUGIN_STORE. */
void aks_check_store_opens(void);
void aks_check_store_round_trip(void);
void aks_check_store_failed_update_writes_nothing(void);
void aks_check_store_names_apart(void);
void aks_check_store_namespaces(void);
void aks_check_store_updates_are_atomic(void);
void aks_check_store_lock(void);
void aks_check_store_expiring_records(void);
void aks_check_store_reopens(void);
/* Closes the store if a check failed before store_reopens. */
void aks_check_store_close(void);

/* The transport contract (checks_transport.c), for plugins of kind AKS_PLUGIN_TRANSPORT. */
void aks_check_transport_opens(void);
void aks_check_transport_queues(void);
void aks_check_transport_round_trip(void);
void aks_check_transport_no_group(void);
void aks_check_transport_fetch_waits(void);
void aks_check_transport_cancellation(void);
void aks_check_transport_nack_redelivers(void);
void aks_check_transport_close_redelivers(void);
void aks_check_transport_ack_wait_redelivers(void);
void aks_check_transport_in_progress(void);
void aks_check_transport_depth(void);
void aks_check_transport_group_fifo(void);
void aks_check_transport_groups_in_parallel(void);
void aks_check_transport_dedup(void);
void aks_check_transport_dead_letter(void);
void aks_check_transport_reopens(void);
/* The transport suite's teardown: stops its threads and closes its consumers. */
void aks_check_transport_teardown(void);
/* Closes the transport if a check failed before transport_reopens. */
void aks_check_transport_close(void);

/* ---- helpers (scratch.c) ----
 * Objects a check creates are tracked so that the check's teardown releases
 * them even when an assertion jumps out of the check half-way. */
void aks_check_teardown(void);

/* The plugin and the provider instance, or fail the check naming the earlier
 * check that should have set them up. */
const aks_plugin *aks_check_need_plugin(void);
aks_provider *aks_check_need_provider(void);

/* A new sandbox, tracked: closed and destroyed by the teardown. */
aks_sandbox *aks_check_create(void);
/* Tracks a sandbox made without aks_check_create (and its id, for the teardown). */
void aks_check_track(aks_sandbox *sb);
/* Attaches to `id` and tracks the handle; returns the status (the handle is
 * stored in *out on success, and the error, if any, in *err). */
int aks_check_attach(const char *id, aks_sandbox **out, aks_error **err);
/* Closes a tracked handle now. */
void aks_check_close(aks_sandbox *sb);
/* Tracks a result (may be NULL) so the teardown frees it. */
aks_result *aks_check_keep(aks_result *r);
/* Tracks a copy of a sandbox id for the teardown to destroy. */
const char *aks_check_keep_id(const char *id);

/* A new file holding `content`, readable by anyone, in a new directory of this machine's
 * temporary directory; the teardown removes both. Returns its path. */
const char *aks_check_plant(const char *content);

/* Fails unless rc == want; the message names the call, both statuses and
 * the error's message. Frees err either way. */
void aks_check_expect(const char *what, int rc, int want, aks_error *err);

/* A call context with the suite's deadline and the default policy. */
void aks_check_call(aks_call *call);

#endif /* AKS_CHECK_CHECK_H */
