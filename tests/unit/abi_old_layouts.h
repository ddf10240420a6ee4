/*
 * tests/unit/abi_old_layouts.h - the SDK's versioned structs as an older, smaller header lays
 * them out, for tests of a caller built against that header.
 *
 * Each is the current struct without its last fields: the shape every one of them has to a
 * program compiled before fields were appended (docs/abi.md). aks_tool_context really had
 * such a version (1, before on_output); the others stand for the day they grow. Field for
 * field the same types and order as the current struct, so each is a prefix of it (the
 * static assertions in the test check that).
 */
#ifndef AKS_TESTS_UNIT_ABI_OLD_LAYOUTS_H
#define AKS_TESTS_UNIT_ABI_OLD_LAYOUTS_H

#include <stdbool.h>
#include <stdint.h>

#include <aksandbox/aksandbox.h>

/* aks_policy without cpu, memory_mb, timeout and strict. */
typedef struct old_policy {
	uint32_t struct_version;
	uint32_t struct_size;
	uint32_t network_egress;
	const char *const *network_allow;
	const char *const *fs_allow_read;
	const char *const *fs_allow_write;
} old_policy;

/* aks_principal without credentials. */
typedef struct old_principal {
	uint32_t struct_version;
	uint32_t struct_size;
	uint32_t mode;
	const char *subject;
	const char *const *groups;
} old_principal;

/* aks_call without host_private (the cancellation token). */
typedef struct old_call {
	uint32_t struct_version;
	uint32_t struct_size;
	int64_t deadline_ms;
	double timeout;
	const aks_principal *principal;
	const aks_policy *policy;
} old_call;

/* aks_resolve_request without attributes. */
typedef struct old_resolve_request {
	uint32_t struct_version;
	uint32_t struct_size;
	const char *conversation_id;
	const char *agent;
} old_resolve_request;

/* aks_tool_context version 1: without on_output and output_userdata. */
typedef struct old_tool_context {
	uint32_t struct_version;
	uint32_t struct_size;
	const char *conversation_id;
	const char *agent;
	const char *const *attributes;
	aks_cancel *cancel;
} old_tool_context;

/* aks_worker_options without stop_grace. */
typedef struct old_worker_options {
	uint32_t struct_version;
	uint32_t struct_size;
	bool once;
} old_worker_options;

/* aks_worker_options before ABI 1.5 appended monitor. */
typedef struct old_worker_options_1_4 {
	uint32_t struct_version;
	uint32_t struct_size;
	bool once;
	double stop_grace;
} old_worker_options_1_4;

/* aks_worker_status as it was before store_failing was appended: it ended at the depths. */
typedef struct old_worker_status {
	uint32_t struct_version;
	uint32_t struct_size;
	bool running, stopping;
	unsigned input_consumers, output_consumers, in_flight, fetch_failing;
	double stalest_consumer_s;
	uint64_t requests, request_failures, nacks, dead_lettered, completions_stored,
	    store_failures;
	int64_t input_depth, output_depth;
} old_worker_status;

#endif /* AKS_TESTS_UNIT_ABI_OLD_LAYOUTS_H */
