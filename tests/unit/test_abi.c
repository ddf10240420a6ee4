/* ABI tests: the layout of every transparent SDK struct is frozen for ABI 1.
 * A change here that is not an append breaks every plugin built before it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <aksandbox/aksandbox.h>
#include <aksandbox/transport.h>

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(offsetof(aks_plugin_descriptor, abi_major) == 8, "descriptor layout");
_Static_assert(offsetof(aks_plugin_descriptor, kind) == 16, "descriptor layout");
_Static_assert(offsetof(aks_plugin_descriptor, name) == 24, "descriptor layout");
_Static_assert(offsetof(aks_plugin_descriptor, ops) == 64, "descriptor layout");
_Static_assert(sizeof(aks_plugin_descriptor) == 104, "descriptor size");
_Static_assert(sizeof(aks_config_key) == 40, "config key size");
_Static_assert(offsetof(aks_capabilities, languages) == 16, "capabilities layout");
_Static_assert(sizeof(aks_capabilities) == 40, "capabilities size");
_Static_assert(sizeof(aks_policy) == 72, "policy size");
_Static_assert(sizeof(aks_principal) == 40, "principal size");
/* ABI 1.0 ended at host_private, 48 bytes; labels was appended in 1.1, context in 1.2,
 * idle_timeout in 1.3. */
_Static_assert(offsetof(aks_call, labels) == 48, "call layout");
_Static_assert(offsetof(aks_call, context) == 56, "call layout");
_Static_assert(offsetof(aks_call, idle_timeout) == 64, "call layout");
_Static_assert(sizeof(aks_call) == 72, "call size");
_Static_assert(sizeof(aks_resolve_request) == 32, "resolve request size");
/* Version 1 ended at `cancel`, 40 bytes; version 2 at output_userdata, 56. */
_Static_assert(offsetof(aks_tool_context, on_output) == 40, "tool context layout");
_Static_assert(offsetof(aks_tool_context, wait_timeout) == 56, "tool context layout");
_Static_assert(sizeof(aks_tool_context) == 64, "tool context size");
/* monitor was appended with ABI 1.5. */
_Static_assert(offsetof(aks_worker_options, monitor) == 24, "worker options layout");
_Static_assert(sizeof(aks_worker_options) == 32, "worker options size");
/* The depths ended the first layout (104 bytes); store_failing was appended after them. */
_Static_assert(offsetof(aks_worker_status, store_failing) == 104, "worker status layout");
_Static_assert(sizeof(aks_worker_status) == 112, "worker status size");
_Static_assert(offsetof(aks_provider_ops, capabilities) == 8, "provider ops layout");
/* The 1.0 table was 72 bytes; instance_description was appended after it. */
_Static_assert(AKS_PROVIDER_OPS_MIN_SIZE == 72, "provider ops size before the append");
/* list_sandboxes was appended in 1.1. */
_Static_assert(offsetof(aks_provider_ops, list_sandboxes) == 80, "provider ops layout");
_Static_assert(sizeof(aks_provider_ops) == 88, "provider ops size");
_Static_assert(sizeof(aks_sandbox_ops) == 64, "sandbox ops size");
_Static_assert(offsetof(aks_host_api, log) == 8, "host api layout");
/* 24 slots in 1.0 and 1.1; result_add_egress_refused was appended in 1.2. */
_Static_assert(offsetof(aks_host_api, result_add_egress_refused) == 8 + 24 * sizeof(void *),
               "host api layout");
/* result_add_unseen was appended in 1.4. */
_Static_assert(offsetof(aks_host_api, result_add_unseen) == 8 + 25 * sizeof(void *),
               "host api layout");
_Static_assert(sizeof(aks_host_api) == 8 + 26 * sizeof(void *), "host api size");
/* 10 slots in 1.0 to 1.4; depth was appended in 1.5. */
_Static_assert(offsetof(aks_transport_ops, in_progress) == 8 + 9 * sizeof(void *),
               "transport ops layout");
_Static_assert(offsetof(aks_transport_ops, depth) == 8 + 10 * sizeof(void *),
               "transport ops layout");
_Static_assert(sizeof(aks_transport_ops) == 8 + 11 * sizeof(void *), "transport ops size");
#endif

/* Status codes are append-only and never renumbered. */
_Static_assert(AKS_ECONFIG == -2 && AKS_EGONE == -7 && AKS_EIO == -16, "status codes");

static void test_struct_headers_first(void **state)
{
	(void)state;
	/* Every transparent struct starts with version then size. */
	assert_int_equal(offsetof(aks_plugin_descriptor, struct_size), 4);
	assert_int_equal(offsetof(aks_capabilities, struct_size), 4);
	assert_int_equal(offsetof(aks_policy, struct_size), 4);
	assert_int_equal(offsetof(aks_principal, struct_size), 4);
	assert_int_equal(offsetof(aks_call, struct_size), 4);
	assert_int_equal(offsetof(aks_provider_ops, struct_size), 4);
	assert_int_equal(offsetof(aks_sandbox_ops, struct_size), 4);
	assert_int_equal(offsetof(aks_host_api, struct_size), 4);
	assert_int_equal(offsetof(aks_config_key, struct_size), 4);
	assert_int_equal(offsetof(aks_resolve_request, struct_size), 4);
	assert_int_equal(offsetof(aks_tool_context, struct_size), 4);
	assert_int_equal(offsetof(aks_worker_options, struct_size), 4);
}

static void test_initialisers_fill_headers(void **state)
{
	(void)state;
	aks_policy p;
	aks_policy_init(&p);
	assert_int_equal(p.struct_version, AKS_POLICY_VERSION);
	assert_int_equal(p.struct_size, sizeof(p));
	assert_true(p.strict);
	assert_true(p.timeout == 120.0);
	aks_principal pr;
	aks_principal_init(&pr, "contract-agent");
	assert_string_equal(pr.subject, "contract-agent");
	aks_call c;
	aks_call_init(&c, 1.5, NULL, NULL, NULL);
	assert_int_equal(c.struct_size, sizeof(c));
	assert_true(c.deadline_ms > 0);
	assert_non_null(c.policy);
	assert_non_null(c.principal);
	aks_call_init(&c, 0, NULL, NULL, NULL);
	assert_int_equal(c.deadline_ms, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_struct_headers_first),
	    cmocka_unit_test(test_initialisers_fill_headers),
	};
	return cmocka_run_group_tests_name("abi", tests, NULL, NULL);
}
