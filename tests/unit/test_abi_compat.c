/*
 * Unit tests: callers built against an older, smaller layout of a versioned struct
 * (abi_old_layouts.h) and against the current one, with this library.
 *
 * Each old struct sits between guard bytes of poison, as in a caller's memory: its
 * initialiser, called with the caller's size, must write no byte past it, and the core,
 * handed the struct, must read none of the poison past it either, but the defaults of the
 * fields the caller's layout lacks. The poison makes such a read visible: a pointer made of
 * it faults when followed, a number made of it is no default. The fake provider's
 * "__describe_call__" command prints every field of the call a plugin is handed.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include <aksandbox/aksandbox.h>

#include "abi_old_layouts.h"
#include "queue/worker.h"

/* Each old layout is a prefix of the current one: same fields, same places, fewer. */
#define SAME_FIELD(old, cur, f)                                                                    \
	_Static_assert(offsetof(old, f) == offsetof(cur, f) &&                                     \
	                   sizeof(((old *)0)->f) == sizeof(((cur *)0)->f),                         \
	               #old "." #f " is where " #cur " has it")
SAME_FIELD(old_policy, aks_policy, struct_size);
SAME_FIELD(old_policy, aks_policy, network_egress);
SAME_FIELD(old_policy, aks_policy, fs_allow_write);
_Static_assert(sizeof(old_policy) < sizeof(aks_policy), "old policy is smaller");
SAME_FIELD(old_principal, aks_principal, mode);
SAME_FIELD(old_principal, aks_principal, groups);
_Static_assert(sizeof(old_principal) < sizeof(aks_principal), "old principal is smaller");
SAME_FIELD(old_call, aks_call, deadline_ms);
SAME_FIELD(old_call, aks_call, timeout);
SAME_FIELD(old_call, aks_call, principal);
SAME_FIELD(old_call, aks_call, policy);
_Static_assert(sizeof(old_call) < sizeof(aks_call), "old call is smaller");
SAME_FIELD(old_resolve_request, aks_resolve_request, agent);
_Static_assert(sizeof(old_resolve_request) < sizeof(aks_resolve_request), "old request");
SAME_FIELD(old_tool_context, aks_tool_context, cancel);
_Static_assert(sizeof(old_tool_context) == offsetof(aks_tool_context, on_output),
               "version 1 ends where on_output starts");
SAME_FIELD(old_worker_options, aks_worker_options, once);
_Static_assert(sizeof(old_worker_options) < sizeof(aks_worker_options), "old options");
SAME_FIELD(old_worker_options_1_4, aks_worker_options, stop_grace);
SAME_FIELD(old_worker_status, aks_worker_status, output_depth);
_Static_assert(sizeof(old_worker_status) == offsetof(aks_worker_status, store_failing),
               "the first worker status ends where store_failing starts");
_Static_assert(sizeof(old_worker_options_1_4) == offsetof(aks_worker_options, monitor),
               "the 1.4 options end where monitor starts");

/* ---- guarded structs ---- */

#define GUARD  64
#define POISON 0xa5

/* A struct with poison on either side; the struct starts as poison too (GUARDED_INIT). */
#define GUARDED(type)                                                                              \
	struct {                                                                                   \
		unsigned char before[GUARD];                                                       \
		type s;                                                                            \
		unsigned char after[GUARD];                                                        \
	}
#define GUARDED_INIT(g) memset(&(g), POISON, sizeof(g))

static void assert_poison(const unsigned char *p, size_t n, const char *where)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != POISON)
			fail_msg("byte %zu %s the struct was written (0x%02x)", i, where, p[i]);
}

/* Nothing before or after the struct was written. `after` follows `s` directly. */
#define assert_guards(g)                                                                           \
	do {                                                                                       \
		assert_int_equal(offsetof(__typeof__(g), after),                                   \
		                 offsetof(__typeof__(g), s) + sizeof((g).s));                      \
		assert_poison((g).before, GUARD, "before");                                        \
		assert_poison((g).after, GUARD, "past");                                           \
	} while (0)

/* ---- initialisers ---- */

static void test_init_old_layouts(void **state)
{
	(void)state;
	GUARDED(old_policy) pol;
	GUARDED_INIT(pol);
	aks_policy_init_sized((aks_policy *)&pol.s, sizeof(pol.s));
	assert_guards(pol);
	assert_int_equal(pol.s.struct_version, AKS_POLICY_VERSION);
	assert_int_equal(pol.s.struct_size, sizeof(pol.s));
	assert_int_equal(pol.s.network_egress, AKS_EGRESS_ALLOW);
	assert_null(pol.s.network_allow[0]);
	assert_null(pol.s.fs_allow_write[0]);

	GUARDED(old_principal) who;
	GUARDED_INIT(who);
	aks_principal_init_sized((aks_principal *)&who.s, sizeof(who.s), "alice");
	assert_guards(who);
	assert_int_equal(who.s.struct_size, sizeof(who.s));
	assert_int_equal(who.s.mode, AKS_IDENTITY_AGENT);
	assert_string_equal(who.s.subject, "alice");
	assert_null(who.s.groups[0]);

	aks_cancel *cancel = NULL;
	assert_int_equal(aks_cancel_new(&cancel, NULL), AKS_OK);
	GUARDED(old_call) call;
	GUARDED_INIT(call);
	aks_call_init_sized((aks_call *)&call.s, sizeof(call.s), 5, NULL, NULL, cancel);
	assert_guards(call); /* the token had nowhere to go */
	assert_int_equal(call.s.struct_version, AKS_CALL_VERSION);
	assert_int_equal(call.s.struct_size, sizeof(call.s));
	assert_true(call.s.deadline_ms > 0);
	assert_true(call.s.timeout == 5.0);
	assert_non_null(call.s.policy);
	assert_non_null(call.s.principal);
	aks_cancel_free(cancel);

	GUARDED(old_resolve_request) req;
	GUARDED_INIT(req);
	aks_resolve_request_init_sized((aks_resolve_request *)&req.s, sizeof(req.s), "conv-1",
	                               "coder", NULL);
	assert_guards(req);
	assert_int_equal(req.s.struct_size, sizeof(req.s));
	assert_string_equal(req.s.conversation_id, "conv-1");
	assert_string_equal(req.s.agent, "coder");

	GUARDED(old_tool_context) ctx;
	GUARDED_INIT(ctx);
	aks_tool_context_init_sized((aks_tool_context *)&ctx.s, sizeof(ctx.s), "conv-1", "coder");
	assert_guards(ctx);
	assert_int_equal(ctx.s.struct_version, AKS_TOOL_CONTEXT_VERSION);
	assert_int_equal(ctx.s.struct_size, sizeof(ctx.s));
	assert_string_equal(ctx.s.conversation_id, "conv-1");
	assert_null(ctx.s.attributes);
	assert_null(ctx.s.cancel);

	GUARDED(old_worker_options) opts;
	GUARDED_INIT(opts);
	aks_worker_options_init_sized((aks_worker_options *)&opts.s, sizeof(opts.s));
	assert_guards(opts);
	assert_int_equal(opts.s.struct_size, sizeof(opts.s));
	assert_false(opts.s.once);
}

/* The normal case: the macros, on this header's structs, fill every field. */
static void test_init_current_layouts(void **state)
{
	(void)state;
	GUARDED(aks_policy) pol;
	GUARDED_INIT(pol);
	aks_policy_init(&pol.s);
	assert_guards(pol);
	assert_int_equal(pol.s.struct_size, sizeof(aks_policy));
	assert_true(pol.s.strict);
	assert_true(pol.s.timeout == 120.0);
	assert_true(pol.s.cpu == 0 && pol.s.memory_mb == 0);

	GUARDED(aks_principal) who;
	GUARDED_INIT(who);
	aks_principal_init(&who.s, NULL);
	assert_guards(who);
	assert_int_equal(who.s.struct_size, sizeof(aks_principal));
	assert_string_equal(who.s.subject, "agent");
	assert_null(who.s.credentials[0]);

	GUARDED(aks_call) call;
	GUARDED_INIT(call);
	aks_call_init(&call.s, 0, &pol.s, &who.s, NULL);
	assert_guards(call);
	assert_int_equal(call.s.struct_size, sizeof(aks_call));
	assert_int_equal(call.s.deadline_ms, 0);
	assert_ptr_equal(call.s.policy, &pol.s);
	assert_ptr_equal(call.s.principal, &who.s);
	assert_null(call.s.host_private);

	GUARDED(aks_resolve_request) req;
	GUARDED_INIT(req);
	aks_resolve_request_init(&req.s, NULL, "", NULL);
	assert_guards(req);
	assert_int_equal(req.s.struct_size, sizeof(aks_resolve_request));
	assert_string_equal(req.s.conversation_id, "");
	assert_string_equal(req.s.agent, "agent");
	assert_null(req.s.attributes[0]);

	GUARDED(aks_tool_context) ctx;
	GUARDED_INIT(ctx);
	aks_tool_context_init(&ctx.s, "conv-1", NULL);
	assert_guards(ctx);
	assert_int_equal(ctx.s.struct_size, sizeof(aks_tool_context));
	assert_null(ctx.s.on_output);
	assert_null(ctx.s.output_userdata);

	GUARDED(aks_worker_options) opts;
	GUARDED_INIT(opts);
	aks_worker_options_init(&opts.s);
	assert_guards(opts);
	assert_int_equal(opts.s.struct_size, sizeof(aks_worker_options));
	assert_true(opts.s.stop_grace == 30.0);
}

/* A caller built against a newer header: the fields this library does not know are zeroed,
 * and struct_size says only ours were filled in. */
static void test_init_newer_layout(void **state)
{
	(void)state;
	typedef struct newer_policy {
		aks_policy known;
		unsigned char future[24];
	} newer_policy;
	GUARDED(newer_policy) pol;
	GUARDED_INIT(pol);
	aks_policy_init_sized((aks_policy *)&pol.s, sizeof(pol.s));
	assert_guards(pol);
	assert_int_equal(pol.s.known.struct_size, sizeof(aks_policy));
	assert_true(pol.s.known.strict);
	for (size_t i = 0; i < sizeof(pol.s.future); i++)
		assert_int_equal(pol.s.future[i], 0);
}

/* A size that cannot hold the header gets nothing written at all. */
static void test_init_size_below_header(void **state)
{
	(void)state;
	GUARDED(aks_call) call;
	GUARDED_INIT(call);
	aks_call_init_sized(&call.s, 4, 1, NULL, NULL, NULL);
	assert_poison((const unsigned char *)&call, sizeof(call), "in or around");
}

/*
 * The symbols binaries built against the header before the sized initialisers call: each
 * writes that header's layout, which is today's. (When a struct grows, these still write
 * the old size: this test then needs the old layout, not the new one.)
 */
static void test_entry_points_of_old_binaries(void **state)
{
	(void)state;
	GUARDED(aks_policy) pol;
	GUARDED_INIT(pol);
	(aks_policy_init)(&pol.s);
	assert_guards(pol);
	assert_int_equal(pol.s.struct_size, sizeof(aks_policy));
	assert_true(pol.s.strict);

	GUARDED(aks_principal) who;
	GUARDED_INIT(who);
	(aks_principal_init)(&who.s, "bob");
	assert_guards(who);
	assert_int_equal(who.s.struct_size, sizeof(aks_principal));
	assert_string_equal(who.s.subject, "bob");

	GUARDED(aks_call) call;
	GUARDED_INIT(call);
	(aks_call_init)(&call.s, 2, NULL, NULL, NULL);
	assert_guards(call);
	/* ABI 1.0's layout, frozen: it ended at host_private (labels came in 1.1). */
	assert_int_equal(call.s.struct_size, offsetof(aks_call, labels));
	assert_true(call.s.timeout == 2.0);
	assert_null(call.s.host_private);

	GUARDED(aks_resolve_request) req;
	GUARDED_INIT(req);
	(aks_resolve_request_init)(&req.s, "c", "a", NULL);
	assert_guards(req);
	assert_int_equal(req.s.struct_size, sizeof(aks_resolve_request));

	GUARDED(aks_tool_context) ctx;
	GUARDED_INIT(ctx);
	(aks_tool_context_init)(&ctx.s, "c", "a");
	assert_guards(ctx);
	/* Version 2's layout, frozen: it ended at output_userdata (wait_timeout came in 3). */
	assert_int_equal(ctx.s.struct_size, offsetof(aks_tool_context, wait_timeout));
	assert_null(ctx.s.on_output);

	GUARDED(aks_worker_options) opts;
	GUARDED_INIT(opts);
	(aks_worker_options_init)(&opts.s);
	assert_guards(opts);
	/* Version 1's first layout, frozen: it ended at stop_grace (monitor came with ABI 1.5). */
	assert_int_equal(opts.s.struct_size, offsetof(aks_worker_options, monitor));
}

/* ---- the core, handed old structs ---- */

typedef struct provider_fixture {
	aks_provider *prov;
} provider_fixture;

static int provider_setup(void **state)
{
	provider_fixture *f = calloc(1, sizeof(*f));
	const aks_plugin *plugin = NULL;
	aks_error *err = NULL;
	if (!f || aks_plugin_load("fake", AKS_PLUGIN_PROVIDER, &plugin, &err) < 0 ||
	    aks_provider_open(plugin, NULL, &f->prov, &err) < 0) {
		fprintf(stderr, "setup: %s\n", err ? aks_error_message(err) : "out of memory");
		aks_error_free(err);
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int provider_teardown(void **state)
{
	provider_fixture *f = *state;
	aks_provider_close(f->prov);
	free(f);
	return 0;
}

/* What the fake provider was handed, as it prints it (fake_describe_call). */
static char *describe(aks_sandbox *sb, const aks_call *call)
{
	aks_result *r = NULL;
	aks_error *err = NULL;
	int rc = aks_sandbox_execute_command(sb, "__describe_call__", call, &r, &err);
	if (rc != AKS_OK)
		fail_msg("describe: %s", aks_error_message(err));
	char *text = strdup(aks_result_get_stdout(r, NULL));
	aks_result_free(r);
	return text;
}

static char *expected_description(double timeout, const char *deadline, const char *cancellable,
                                  unsigned egress, size_t allow, double cpu, long long memory_mb,
                                  double policy_timeout, const char *strict, unsigned mode,
                                  const char *subject, size_t groups, size_t credentials)
{
	char *text = NULL;
	int n = asprintf(&text,
	                 "call: size=%zu timeout=%g deadline=%s cancellable=%s\n"
	                 "policy: size=%zu egress=%u allow=%zu read=0 write=0 cpu=%g "
	                 "memory_mb=%lld timeout=%g strict=%s\n"
	                 "principal: size=%zu mode=%u subject=%s groups=%zu credentials=%zu\n",
	                 sizeof(aks_call), timeout, deadline, cancellable, sizeof(aks_policy),
	                 egress, allow, cpu, memory_mb, policy_timeout, strict,
	                 sizeof(aks_principal), mode, subject, groups, credentials);
	assert_true(n > 0);
	return text;
}

static void test_old_call_with_provider(void **state)
{
	provider_fixture *f = *state;
	aks_error *err = NULL;
	/* Each of the three with poison past it: the call's cancel token, the policy's cpu,
	 * memory, timeout and strict, the principal's credentials list. */
	GUARDED(old_policy) pol;
	GUARDED_INIT(pol);
	aks_policy_init_sized((aks_policy *)&pol.s, sizeof(pol.s));
	pol.s.network_egress = AKS_EGRESS_DENY;
	GUARDED(old_principal) who;
	GUARDED_INIT(who);
	aks_principal_init_sized((aks_principal *)&who.s, sizeof(who.s), "alice");
	who.s.mode = AKS_IDENTITY_USER;
	GUARDED(old_call) call;
	GUARDED_INIT(call);
	aks_call_init_sized((aks_call *)&call.s, sizeof(call.s), 30, (const aks_policy *)&pol.s,
	                    (const aks_principal *)&who.s, NULL);
	const aks_call *c = (const aks_call *)&call.s;

	aks_sandbox *sb = NULL;
	assert_int_equal(aks_provider_create(f->prov, c, &sb, &err), AKS_OK);
	/* The plugin got the host's layout: the caller's fields, and the defaults where the
	 * caller's structs end. */
	char *got = describe(sb, c);
	char *want = expected_description(30, "yes", "no", AKS_EGRESS_DENY, 0, 0, 0, 120, "yes",
	                                  AKS_IDENTITY_USER, "alice", 0, 0);
	assert_string_equal(got, want);
	free(got);
	free(want);

	/* Every other operation takes the old call too. */
	aks_result *r = NULL;
	assert_int_equal(aks_sandbox_upload_file(sb, "a.txt", "hi", 2, c, &err), AKS_OK);
	assert_int_equal(aks_sandbox_download_file(sb, "a.txt", c, &r, &err), AKS_OK);
	aks_result_free(r);
	assert_int_equal(aks_sandbox_execute_code(sb, "print(1)", NULL, c, &r, &err), AKS_OK);
	assert_string_equal(aks_result_get_stdout(r, NULL), "print(1)");
	aks_result_free(r);
	char *id = strdup(aks_sandbox_get_id(sb));
	aks_sandbox_close(sb);
	assert_int_equal(aks_provider_attach(f->prov, id, c, &sb, &err), AKS_OK);
	aks_sandbox_close(sb);
	assert_int_equal(aks_provider_destroy(f->prov, id, c, &err), AKS_OK);
	free(id);
	assert_null(err);
	/* Nor did the core write into the caller's memory. */
	assert_guards(pol);
	assert_guards(who);
	assert_guards(call);
}

/* The normal case: every field of this header's structs reaches the plugin. */
static void test_current_call_with_provider(void **state)
{
	provider_fixture *f = *state;
	aks_error *err = NULL;
	static const char *const allow[] = {"example.com", "10.0.0.0/8", NULL};
	static const char *const groups[] = {"dev", NULL};
	static const char *const creds[] = {"role", "arn:x", NULL};
	aks_policy pol;
	aks_policy_init(&pol);
	pol.network_egress = AKS_EGRESS_ALLOWLIST;
	pol.network_allow = allow;
	pol.cpu = 1.5;
	pol.memory_mb = 512;
	pol.timeout = 9;
	pol.strict = false;
	aks_principal who;
	aks_principal_init(&who, "bob");
	who.groups = groups;
	who.credentials = creds;
	aks_cancel *cancel = NULL;
	assert_int_equal(aks_cancel_new(&cancel, &err), AKS_OK);
	aks_call call;
	aks_call_init(&call, 0, &pol, &who, cancel);

	aks_sandbox *sb = NULL;
	assert_int_equal(aks_provider_create(f->prov, &call, &sb, &err), AKS_OK);
	char *got = describe(sb, &call);
	char *want = expected_description(0, "no", "yes", AKS_EGRESS_ALLOWLIST, 2, 1.5, 512, 9,
	                                  "no", AKS_IDENTITY_AGENT, "bob", 1, 2);
	assert_string_equal(got, want);
	free(got);
	free(want);
	/* No policy or principal at all: the defaults. */
	aks_call_init(&call, 0, NULL, NULL, NULL);
	got = describe(sb, &call);
	want = expected_description(0, "no", "no", AKS_EGRESS_ALLOW, 0, 0, 0, 120, "yes",
	                            AKS_IDENTITY_AGENT, "agent", 0, 0);
	assert_string_equal(got, want);
	free(got);
	free(want);
	char *id = strdup(aks_sandbox_get_id(sb));
	aks_sandbox_close(sb);
	assert_int_equal(aks_provider_destroy(f->prov, id, &call, &err), AKS_OK);
	free(id);
	aks_cancel_free(cancel);
}

/* A struct no initialiser wrote is refused, naming it, before the plugin sees it. */
static void test_unwritten_call_refused(void **state)
{
	provider_fixture *f = *state;
	aks_error *err = NULL;
	aks_sandbox *sb = NULL;
	aks_call zero;
	memset(&zero, 0, sizeof(zero));
	assert_int_equal(aks_provider_create(f->prov, &zero, &sb, &err), AKS_EINVAL);
	assert_string_equal(aks_error_message(err),
	                    "aks_call has struct_version 0 and struct_size 0: initialise it with "
	                    "aks_call_init");
	aks_error_free(err);
	err = NULL;

	aks_policy pol;
	memset(&pol, 0, sizeof(pol));
	aks_call call;
	aks_call_init(&call, 0, &pol, NULL, NULL);
	assert_int_equal(aks_provider_create(f->prov, &call, &sb, &err), AKS_EINVAL);
	assert_string_equal(aks_error_message(err),
	                    "aks_policy has struct_version 0 and struct_size 0: initialise it "
	                    "with aks_policy_init");
	aks_error_free(err);
}

/* ---- the tools runtime, the gates, the resolver, the worker ---- */

static void remove_tree(const char *dir)
{
	char *cmd = NULL;
	assert_true(asprintf(&cmd, "rm -rf '%s'", dir) > 0);
	assert_int_equal(system(cmd), 0);
	free(cmd);
}

static aks_settings *load_settings(const char *dir, const char *yaml)
{
	char *path = NULL;
	assert_true(asprintf(&path, "%s/config.yaml", dir) > 0);
	FILE *fp = fopen(path, "w");
	assert_non_null(fp);
	fputs(yaml, fp);
	assert_int_equal(fclose(fp), 0);
	static const char *const no_env[] = {NULL};
	aks_settings *s = NULL;
	aks_error *err = NULL;
	if (aks_settings_load(path, no_env, &s, &err) < 0)
		fail_msg("settings: %s", aks_error_message(err));
	free(path);
	return s;
}

static void test_old_tool_context_with_runtime(void **state)
{
	(void)state;
	char dir[] = "/tmp/aks-abi-XXXXXX";
	assert_non_null(mkdtemp(dir));
	aks_settings *s = load_settings(dir, "sandbox:\n"
	                                     "  enabled: true\n"
	                                     "  profiles:\n"
	                                     "    default: {type: fake, fake: {}}\n");
	aks_runtime *rt = NULL;
	aks_error *err = NULL;
	char *state_dir = NULL;
	assert_true(asprintf(&state_dir, "%s/state", dir) > 0);
	assert_int_equal(aks_runtime_open(s, state_dir, &rt, &err), AKS_OK);

	/* Poison where on_output would be: calling it would jump into it. */
	GUARDED(old_tool_context) ctx;
	GUARDED_INIT(ctx);
	aks_tool_context_init_sized((aks_tool_context *)&ctx.s, sizeof(ctx.s), "conv-abi", "coder");
	char *json = NULL;
	assert_int_equal(aks_runtime_call_tool(rt, "run_command", "{\"command\": \"echo old\"}",
	                                       (const aks_tool_context *)&ctx.s, &json, &err),
	                 AKS_OK);
	json_object *o = json_tokener_parse(json);
	json_object *out = NULL;
	assert_true(json_object_object_get_ex(o, "stdout", &out));
	assert_string_equal(json_object_get_string(out), "echo old");
	json_object_put(o);
	free(json);
	assert_guards(ctx);

	aks_runtime_close(rt);
	aks_settings_free(s);
	free(state_dir);
	remove_tree(dir);
}

static void test_old_principal_at_the_gate(void **state)
{
	(void)state;
	char dir[] = "/tmp/aks-abi-XXXXXX";
	assert_non_null(mkdtemp(dir));
	/* The kubernetes stand-in enforces user identity and needs no cluster. */
	const char *build = getenv("AKS_TEST_BUILDDIR");
	assert_non_null(build);
	char *yaml = NULL;
	assert_true(asprintf(&yaml,
	                     "sandbox:\n"
	                     "  enabled: true\n"
	                     "  profiles:\n"
	                     "    cluster: {type: %s/tests/plugins/stubs/.libs/kubernetes.so,\n"
	                     "              kubernetes: {}, identity: {mode: user}}\n",
	                     build) > 0);
	aks_settings *s = load_settings(dir, yaml);
	free(yaml);
	aks_profile *p = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_settings_find_profile(s, "cluster", &p, &err), AKS_OK);
	GUARDED(old_principal) who;
	GUARDED_INIT(who);
	aks_principal_init_sized((aks_principal *)&who.s, sizeof(who.s), "alice");
	who.s.mode = AKS_IDENTITY_USER;
	assert_int_equal(aks_profile_check_principal(p, (const aks_principal *)&who.s, &err),
	                 AKS_OK);
	assert_guards(who);
	/* A principal that ends before its mode is an agent one, the default, even when the
	 * bytes past it would read as a user mode. */
	typedef struct header_only {
		uint32_t struct_version, struct_size;
	} header_only;
	GUARDED(header_only) header;
	GUARDED_INIT(header);
	header.s.struct_version = AKS_PRINCIPAL_VERSION;
	header.s.struct_size = sizeof(header.s);
	uint32_t user = AKS_IDENTITY_USER;
	memcpy(header.after + offsetof(aks_principal, mode) - sizeof(header.s), &user,
	       sizeof(user));
	assert_int_equal(aks_profile_check_principal(p, (const aks_principal *)&header.s, &err),
	                 AKS_EPOLICY);
	aks_error_free(err);
	aks_settings_free(s);
	remove_tree(dir);
}

static void test_old_request_with_resolver(void **state)
{
	(void)state;
	const aks_plugin *plugin = NULL;
	aks_error *err = NULL;
	if (aks_plugin_load("signed_token", AKS_PLUGIN_RESOLVER, &plugin, &err) < 0) {
		aks_error_free(err);
		skip(); /* built only with libcrypto */
	}
	assert_int_equal(setenv("AKS_IDENTITY_SECRET", "0123456789abcdef0123456789abcdef", 1), 0);
	aks_resolver *resolver = NULL;
	assert_int_equal(aks_resolver_open(plugin, NULL, &resolver, &err), AKS_OK);
	/* Poison where the attributes would be: the resolver walks that list. */
	GUARDED(old_resolve_request) req;
	GUARDED_INIT(req);
	aks_resolve_request_init_sized((aks_resolve_request *)&req.s, sizeof(req.s), "conv-1",
	                               "coder", NULL);
	aks_resolved_principal *rp = NULL;
	assert_int_equal(
	    aks_resolver_resolve(resolver, (const aks_resolve_request *)&req.s, &rp, &err), AKS_OK);
	/* No attributes, so no token: the agent's own principal. */
	assert_int_equal(aks_resolved_principal_get(rp)->mode, AKS_IDENTITY_AGENT);
	assert_string_equal(aks_resolved_principal_get(rp)->subject, "coder");
	aks_resolved_principal_free(rp);
	assert_guards(req);
	aks_resolver_close(resolver);
	unsetenv("AKS_IDENTITY_SECRET");
}

static void test_old_worker_options(void **state)
{
	(void)state;
	GUARDED(old_worker_options) opts;
	GUARDED_INIT(opts);
	aks_worker_options_init_sized((aks_worker_options *)&opts.s, sizeof(opts.s));
	opts.s.once = true;
	aks_worker_options o;
	assert_int_equal(aks__worker_options_read(&o, (const aks_worker_options *)&opts.s, NULL),
	                 AKS_OK);
	assert_true(o.once);               /* the caller's */
	assert_true(o.stop_grace == 30.0); /* the default, not the poison past the struct */
	assert_guards(opts);

	assert_int_equal(aks__worker_options_read(&o, NULL, NULL), AKS_OK);
	assert_false(o.once);
	aks_worker_options zero;
	memset(&zero, 0, sizeof(zero));
	aks_error *err = NULL;
	assert_int_equal(aks__worker_options_read(&o, &zero, &err), AKS_EINVAL);
	aks_error_free(err);

	/* A program built before the monitor: its grace is read, the monitor is none (not the
	 * poison past its struct). */
	GUARDED(old_worker_options_1_4) opts14;
	GUARDED_INIT(opts14);
	aks_worker_options_init_sized((aks_worker_options *)&opts14.s, sizeof(opts14.s));
	assert_int_equal(opts14.s.struct_size, sizeof(opts14.s));
	opts14.s.stop_grace = 7;
	assert_int_equal(aks__worker_options_read(&o, (const aks_worker_options *)&opts14.s, NULL),
	                 AKS_OK);
	assert_true(o.stop_grace == 7.0);
	assert_null(o.monitor);
	assert_guards(opts14);
}

/* A monitor read into the status as a program built before store_failing has it: that
 * struct is filled, its size stamped, nothing past it written. */
static void test_old_worker_status(void **state)
{
	(void)state;
	aks_worker_monitor *m = NULL;
	assert_int_equal(aks_worker_monitor_new(&m, NULL), AKS_OK);
	GUARDED(old_worker_status) st;
	GUARDED_INIT(st);
	assert_int_equal(
	    aks_worker_monitor_read_sized(m, (aks_worker_status *)&st.s, sizeof(st.s), false, NULL),
	    AKS_OK);
	assert_int_equal(st.s.struct_size, sizeof(st.s));
	assert_int_equal(st.s.struct_version, AKS_WORKER_STATUS_VERSION);
	assert_false(st.s.running);
	assert_true(st.s.input_depth == -1 && st.s.output_depth == -1);
	assert_guards(st);
	aks_worker_monitor_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_init_old_layouts),
	    cmocka_unit_test(test_init_current_layouts),
	    cmocka_unit_test(test_init_newer_layout),
	    cmocka_unit_test(test_init_size_below_header),
	    cmocka_unit_test(test_entry_points_of_old_binaries),
	    cmocka_unit_test_setup_teardown(test_old_call_with_provider, provider_setup,
	                                    provider_teardown),
	    cmocka_unit_test_setup_teardown(test_current_call_with_provider, provider_setup,
	                                    provider_teardown),
	    cmocka_unit_test_setup_teardown(test_unwritten_call_refused, provider_setup,
	                                    provider_teardown),
	    cmocka_unit_test(test_old_tool_context_with_runtime),
	    cmocka_unit_test(test_old_principal_at_the_gate),
	    cmocka_unit_test(test_old_request_with_resolver),
	    cmocka_unit_test(test_old_worker_options),
	    cmocka_unit_test(test_old_worker_status),
	};
	return cmocka_run_group_tests_name("abi_compat", tests, NULL, NULL);
}
