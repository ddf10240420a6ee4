/* Unit tests: config.yaml's sandbox: block — defaults, sugar, overrides, every
 * validation error with its location, the environment matrix, the gates. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <aksandbox/aksandbox.h>

#include "settings_fixture.h"

static void test_defaults(void **state)
{
	(void)state;
	aks_settings *s = load_ok("other_section: {kept: out}\n");
	assert_false(aks_settings_is_enabled(s));
	assert_string_equal(aks_settings_get_default_profile(s), "default");
	assert_int_equal(aks_settings_get_tool_output_max_chars(s), 8000);
	assert_string_equal(aks_settings_get_broker_flavor(s), "thread");
	assert_true(aks_settings_get_wait_timeout(s) == 60.0);
	assert_int_equal(aks_settings_get_profile_count(s), 0);
	assert_string_equal(aks_settings_get_resolver_type(s), "agent");
	assert_true(aks_settings_agent_allowed(s, "anyone"));
	aks_settings_free(s);
}

/* Sections of other programs are parsed, not built: what YAML allows there (anchors and
 * aliases, a key set twice, deep nesting) is theirs to judge; broken YAML still fails. */
static void test_foreign_sections_skipped(void **state)
{
	(void)state;
	aks_settings *s =
	    load_ok("defaults: &d {retries: 3}\n"
	            "agent:\n  <<: *d\n  name: a\n  name: b\n"
	            "deep: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
	            "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n"
	            "sandbox:\n  enabled: false\n  default_profile: mine\n");
	assert_string_equal(aks_settings_get_default_profile(s), "mine");
	aks_settings_free(s);
	char *msg = load_err("other: [1, 2\nsandbox: {}\n");
	assert_non_null(strstr(msg, "config.yaml:"));
	assert_non_null(strstr(msg, "invalid YAML"));
	free(msg);
	EXPECT_ERROR("other: 1\nsandbox: {}\nsandbox: {}\n",
	             "config.yaml:3:1: duplicate key 'sandbox' (first set at line 2)");
}

/* fs_allow entries are pieces of this host a sandbox may be shown: absolute, plain, never in
 * nor holding a place of secrets; refused at load with the entry's position. */
static void test_fs_allow_paths(void **state)
{
	(void)state;
	static const struct {
		const char *entry, *says;
	} bad[] = {
	    {"data", "'data' is not an absolute path"},
	    {"/srv/../etc", "has a '.' or '..' component"},
	    {"/", "is the whole filesystem"},
	    {"/root/project", "is in /root, a place of secrets"},
	    {"/etc", "holds /etc/shadow"},
	    {"/etc/ssh/ssh_host_ed25519_key", "is in /etc/ssh"},
	    {"/home/alice", "holds /home/*/.ssh"},
	    {"/home/alice/.ssh/id_ed25519", "is in /home/*/.ssh"},
	    {"/var/run/docker.sock", "is in /var/run/docker.sock"},
	    {"/proc/1/environ", "is in /proc"},
	    {"/var/lib", "holds /var/lib/aksandbox"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		for (int write = 0; write < 2; write++) {
			char yaml[512];
			snprintf(yaml, sizeof(yaml),
			         "sandbox:\n  profiles:\n    p:\n      type: local_subprocess\n"
			         "      policy: {strict: false, %s: [/usr/share, '%s']}\n",
			         write ? "fs_allow_write" : "fs_allow_read", bad[i].entry);
			char *msg = load_err(yaml);
			if (!strstr(msg, bad[i].says) || !strstr(msg, "config.yaml:5:"))
				fail_msg("%s: %s", bad[i].entry, msg);
			free(msg);
		}
	aks_settings *s =
	    load_ok("sandbox:\n  profiles:\n    p:\n      type: local_subprocess\n"
	            "      policy: {strict: false, fs_allow_read: [/usr/share, /srv/data,"
	            " /home/alice/project], fs_allow_write: [/workspace, /tmp]}\n");
	aks_settings_free(s);
}

/* network_allow entries are egress rules: each is checked at load, whatever network_egress
 * is, and a bad one is reported at its own line and column; good ones load as written. */
static void test_network_allow_entries(void **state)
{
	(void)state;
	static const struct {
		const char *entry, *says;
	} bad[] = {
	    {"https://pypi.org", "'https://pypi.org' is a URL: drop the scheme and give the host "
	                         "alone (pypi.org)"},
	    {"10.0.0.1/8", "'10.0.0.1/8' has host bits set: did you mean 10.0.0.0/8?"},
	    {"*.com", "'*.com' is too broad: a wildcard needs a suffix of at least two labels "
	              "(*.example.com)"},
	    {"pypi.org:0", "'pypi.org:0' has a bad port '0': a port is 1 to 65535"},
	    {"pypi.org/simple", "'pypi.org/simple' has a path: an entry is a host, not a URL; "
	                        "give pypi.org"},
	    {"", "an empty entry: give a domain (pypi.org), a wildcard (*.example.com), or an "
	         "address or CIDR (10.0.0.0/8)"},
	};
	static const char *const egress[] = {"allow", "deny", "allowlist"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		for (size_t e = 0; e < 3; e++) {
			char yaml[512], want[512];
			snprintf(
			    yaml, sizeof(yaml),
			    "sandbox:\n  profiles:\n    p:\n      type: local_subprocess\n"
			    "      policy:\n        strict: false\n        network_egress: %s\n"
			    "        network_allow:\n          - pypi.org\n          - '%s'\n",
			    egress[e], bad[i].entry);
			snprintf(want, sizeof(want),
			         "config.yaml:10:13: sandbox.profiles.p.policy.network_allow: %s",
			         bad[i].says);
			char *msg = load_err(yaml);
			assert_string_equal(msg, want);
			free(msg);
		}
	/* flow style: the entry's own column */
	EXPECT_ERROR("sandbox:\n  profiles:\n    p:\n      type: local_subprocess\n"
	             "      policy: {strict: false, network_allow: [pypi.org, 'b\xc3\xbc"
	             "cher.de']}\n",
	             "config.yaml:5:57: sandbox.profiles.p.policy.network_allow: 'b\xc3\xbc"
	             "cher.de' is not ASCII: give an internationalized domain name in its "
	             "punycode (IDNA) form, with xn-- labels (idn2 prints it)");
	/* a NUL would have cut the entry short */
	EXPECT_ERROR("sandbox:\n  profiles:\n    p:\n      type: local_subprocess\n"
	             "      policy: {network_allow: [\"pypi.org\\0.evil.test\"]}\n",
	             "config.yaml:5:32: a NUL character (\\0) in a value");
	/* the environment's overrides are checked the same way */
	const char *const env[] = {
	    "AK_SANDBOX__PROFILES__P__POLICY__NETWORK_ALLOW=[pypi.org, \"[::1]:0\"]", NULL};
	char *msg = load_err_env("sandbox:\n  profiles:\n    p:\n      type: local_subprocess\n"
	                         "      policy: {strict: false}\n",
	                         env, AKS_ECONFIG);
	assert_string_equal(msg, "environment variable AK_SANDBOX__PROFILES__P__POLICY__NETWORK_"
	                         "ALLOW: sandbox.profiles.p.policy.network_allow: '[::1]:0' has a "
	                         "bad port '0': a port is 1 to 65535");
	free(msg);
	const char *const good_env[] = {
	    "AK_SANDBOX__PROFILES__P__POLICY__NETWORK_ALLOW=[\"*.github.com:443\"]", NULL};
	aks_settings *s = load_ok_env("sandbox:\n  enabled: true\n  profiles:\n    p:\n"
	                              "      type: local_subprocess\n      local_subprocess: {}\n"
	                              "      policy: {strict: false}\n",
	                              good_env);
	aks_profile *p = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_settings_find_profile(s, "p", &p, &err), AKS_OK);
	assert_string_equal(aks_profile_get_policy(p)->network_allow[0], "*.github.com:443");
	aks_settings_free(s);
	/* every form loads, kept as written */
	s = load_ok("sandbox:\n  enabled: true\n  profiles:\n    p:\n      type: local_subprocess\n"
	            "      policy:\n        strict: false\n        network_egress: allowlist\n"
	            "        network_allow: [pypi.org, API.GitHub.com., '*.github.com:443', "
	            "10.0.0.0/8, '2001:db8::/32', 192.168.1.5, '::1', '10.0.0.0/8:5432', "
	            "'[2001:db8::1]:443', '[2001:db8::/32]:443', localhost]\n"
	            "      local_subprocess: {}\n");
	assert_int_equal(aks_settings_find_profile(s, "p", &p, &err), AKS_OK);
	const char *const *allow = aks_profile_get_policy(p)->network_allow;
	assert_string_equal(allow[1], "API.GitHub.com.");
	assert_string_equal(allow[8], "[2001:db8::1]:443");
	assert_string_equal(allow[10], "localhost");
	assert_null(allow[11]);
	aks_settings_free(s);
}

static void test_embedded_default(void **state)
{
	(void)state;
	aks_settings *s = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_settings_load(NULL, no_env, &s, &err), AKS_OK);
	assert_true(aks_settings_is_enabled(s));
	assert_null(aks_settings_get_file(s));
	/* the seeds' default broker: a call longer than wait_timeout becomes a task */
	assert_string_equal(aks_settings_get_broker_flavor(s), "thread");
	aks_profile *p = NULL;
	assert_int_equal(aks_settings_find_profile(s, NULL, &p, &err), AKS_OK);
	assert_string_equal(aks_profile_get_name(p), "default");
	assert_string_equal(aks_profile_get_type(p), "local_subprocess");
	assert_non_null(aks_profile_get_provider(p));
	aks_settings_free(s);
}

static void test_sugar(void **state)
{
	(void)state;
	aks_settings *s = load_ok("sandbox:\n"
	                          "  enabled: true\n"
	                          "  default_profile: main\n"
	                          "  type: local_subprocess\n"
	                          "  scope: per_call\n"
	                          "  local_subprocess: {workdir: /tmp}\n");
	assert_int_equal(aks_settings_get_profile_count(s), 1);
	aks_profile *p = aks_settings_get_profile(s, 0);
	assert_string_equal(aks_profile_get_name(p), "main");
	assert_int_equal(aks_profile_get_scope(p), AKS_SCOPE_PER_CALL);
	assert_int_equal(aks_profile_get_environment(p), AKS_ENV_MANAGED);
	assert_int_equal(aks_profile_get_idle_timeout(p), 1800);
	aks_settings_free(s);
	/* An explicit profiles map always wins over the sugar. */
	s = load_ok("sandbox:\n"
	            "  enabled: true\n"
	            "  type: local_subprocess\n"
	            "  local_subprocess: {}\n"
	            "  profiles:\n"
	            "    only: {type: local_subprocess, local_subprocess: {}}\n");
	assert_int_equal(aks_settings_get_profile_count(s), 1);
	assert_string_equal(aks_profile_get_name(aks_settings_get_profile(s, 0)), "only");
	aks_settings_free(s);
}

static void test_profile_defaults_and_values(void **state)
{
	(void)state;
	aks_settings *s = load_ok("sandbox:\n"
	                          "  enabled: true\n"
	                          "  agents: [coder, analyst]\n"
	                          "  tool_output_max_chars: 4000\n"
	                          "  broker: {flavor: embedded, wait_timeout: 0}\n"
	                          "  profiles:\n"
	                          "    plain: {type: local_subprocess, local_subprocess: {}}\n"
	                          "    tuned:\n"
	                          "      type: local_subprocess\n"
	                          "      scope: per_runtime\n"
	                          "      idle_timeout: 60\n"
	                          "      identity: {mode: agent}\n"
	                          "      params: {a: 1}\n"
	                          "      policy:\n"
	                          "        network_egress: allowlist\n"
	                          "        network_allow: [example.com, 10.0.0.0/8]\n"
	                          "        fs_allow_read: [/data]\n"
	                          "        cpu: 1.5\n"
	                          "        memory_mb: 256\n"
	                          "        timeout: 5\n"
	                          "        strict: false\n"
	                          "      local_subprocess: {}\n");
	assert_true(aks_settings_agent_allowed(s, "coder"));
	assert_false(aks_settings_agent_allowed(s, "writer"));
	assert_true(aks_settings_agent_allowed(s, NULL));
	assert_int_equal(aks_settings_get_tool_output_max_chars(s), 4000);
	assert_true(aks_settings_get_wait_timeout(s) == 0.0);
	aks_profile *plain = NULL, *tuned = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_settings_find_profile(s, "plain", &plain, &err), AKS_OK);
	const aks_policy *pol = aks_profile_get_policy(plain);
	assert_int_equal(aks_profile_get_scope(plain), AKS_SCOPE_PER_SESSION);
	assert_int_equal(pol->network_egress, AKS_EGRESS_ALLOW);
	assert_true(pol->timeout == 120.0);
	assert_true(pol->strict);
	assert_null(pol->network_allow[0]);
	assert_string_equal(aks_profile_get_params(plain), "{}");
	assert_int_equal(aks_settings_find_profile(s, "tuned", &tuned, &err), AKS_OK);
	pol = aks_profile_get_policy(tuned);
	assert_int_equal(aks_profile_get_scope(tuned), AKS_SCOPE_PER_RUNTIME);
	assert_int_equal(aks_profile_get_idle_timeout(tuned), 60);
	assert_int_equal(pol->network_egress, AKS_EGRESS_ALLOWLIST);
	assert_string_equal(pol->network_allow[1], "10.0.0.0/8");
	assert_string_equal(pol->fs_allow_read[0], "/data");
	assert_true(pol->cpu == 1.5);
	assert_int_equal(pol->memory_mb, 256);
	assert_true(pol->timeout == 5.0);
	assert_false(pol->strict);
	assert_string_equal(aks_profile_get_params(tuned), "{\"a\":1}");
	assert_int_equal(aks_profile_get_unenforced(tuned),
	                 AKS_POLICY_NETWORK | AKS_POLICY_FILESYSTEM | AKS_POLICY_RESOURCES);
	aks_settings_free(s);
}

static void test_unknown_profile(void **state)
{
	(void)state;
	aks_settings *s = load_ok("sandbox:\n  enabled: true\n  type: local_subprocess\n"
	                          "  local_subprocess: {}\n");
	aks_profile *p = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_settings_find_profile(s, "x", &p, &err), AKS_ECONFIG);
	assert_string_equal(aks_error_message(err),
	                    "unknown sandbox profile 'x'; configured profiles: ['default']");
	aks_error_free(err);
	aks_settings_free(s);
	s = load_ok("sandbox: {enabled: false}\n");
	err = NULL;
	assert_int_equal(aks_settings_find_profile(s, NULL, &p, &err), AKS_ECONFIG);
	assert_string_equal(aks_error_message(err), "sandbox capability is disabled");
	aks_error_free(err);
	aks_settings_free(s);
}

static void test_key_and_type_errors(void **state)
{
	(void)state;
	EXPECT_ERROR("sandbox:\n  enabeld: true\n",
	             "config.yaml:2:3: unknown key 'sandbox.enabeld'; did you mean 'enabled'?");
	EXPECT_ERROR("sandbox:\n  enabled: maybe\n",
	             "config.yaml:2:12: sandbox.enabled: 'maybe' is not a boolean (true or false)");
	EXPECT_ERROR("sandbox: [1]\n", "config.yaml:1:10: sandbox: expected a mapping, got a list");
	EXPECT_ERROR("sandbox:\n  tool_output_max_chars: 0\n",
	             "config.yaml:2:26: sandbox.tool_output_max_chars: must be at least 1, got 0");
	EXPECT_ERROR("sandbox:\n  agents: coder\n",
	             "config.yaml:2:11: sandbox.agents: expected a list of strings, got a scalar");
	EXPECT_ERROR(
	    "sandbox:\n  broker: {flavor: fast}\n",
	    "config.yaml:2:20: sandbox.broker.flavor: unknown sandbox broker flavor 'fast'; "
	    "expected one of ['embedded', 'queue', 'thread']");
	EXPECT_ERROR("sandbox:\n  broker: {wait_timeout: -1}\n",
	             "config.yaml:2:26: sandbox.broker.wait_timeout: must be at least 0, got -1");
	EXPECT_ERROR("sandbox:\n  broker: {flavor: queue}\n",
	             "config.yaml:2:20: sandbox.broker.flavor 'queue' requires the "
	             "sandbox.broker.queue block");
	EXPECT_ERROR("sandbox:\n  broker:\n    queue: {input: {}}\n",
	             "config.yaml:3:12: sandbox.broker.queue.type: is required when the block is "
	             "declared (in_memory, nats, kafka, sqs, or a plugin)");
	/* the pairing rule (reference §5.5), located at the store's type */
	EXPECT_ERROR(
	    "sandbox:\n  broker:\n    flavor: queue\n    queue: {type: in_memory}\n"
	    "    response_store: {type: redis}\n",
	    "config.yaml:5:28: the in_memory sandbox transport and the in_memory response "
	    "store are only valid together (the single-process test topology); pair a broker "
	    "transport (sqs/kafka/nats) with a shared response store (redis/valkey/dynamodb)");
	EXPECT_ERROR("sandbox:\n  broker:\n    flavor: queue\n    queue: {type: in_memory}\n"
	             "    response_store: {type: in_memory}\n  profiles:\n"
	             "    p: {type: local_subprocess, pool: {size: 1}}\n",
	             "config.yaml:7:39: sandbox.profiles.p.pool: under sandbox.broker.flavor: "
	             "queue the workers create the sandboxes, and they do not fill pools");
}

static void test_profile_errors(void **state)
{
	(void)state;
	const char *head = "sandbox:\n  enabled: true\n  profiles:\n    p:\n";
	char yaml[1024];
#define PROFILE(body) (snprintf(yaml, sizeof(yaml), "%s%s", head, body), yaml)
	EXPECT_ERROR(PROFILE("      type: local_subprocess\n      scope: per_turn\n"
	                     "      local_subprocess: {}\n"),
	             "config.yaml:6:14: sandbox.profiles.p.scope: 'per_turn' is not one of: "
	             "per_session, per_call, per_runtime");
	EXPECT_ERROR(PROFILE("      type: local_subprocess\n      environment: owned\n"
	                     "      local_subprocess: {}\n"),
	             "config.yaml:6:20: sandbox.profiles.p.environment: 'owned' is not one of: "
	             "managed, attached");
	EXPECT_ERROR(PROFILE("      type: local_subprocess\n      identity: {mode: admin}\n"
	                     "      local_subprocess: {}\n"),
	             "config.yaml:6:24: sandbox.profiles.p.identity.mode: 'admin' is not one of: "
	             "agent, user");
	EXPECT_ERROR(
	    PROFILE("      type: local_subprocess\n      policy: {network_egress: block}\n"
	            "      local_subprocess: {}\n"),
	    "config.yaml:6:32: sandbox.profiles.p.policy.network_egress: 'block' is not one "
	    "of: allow, deny, allowlist");
	EXPECT_ERROR(PROFILE("      type: local_subprocess\n      policy: {timeout: -5}\n"
	                     "      local_subprocess: {}\n"),
	             "config.yaml:6:25: sandbox.profiles.p.policy.timeout: must be greater than 0, "
	             "got -5");
	EXPECT_ERROR(
	    PROFILE("      type: local_subprocess\n      policy: {memory_mb: 0}\n"
	            "      local_subprocess: {}\n"),
	    "config.yaml:6:27: sandbox.profiles.p.policy.memory_mb: must be greater than 0, "
	    "got 0");
	EXPECT_ERROR(
	    PROFILE("      type: local_subprocess\n      idle_timeout: 0\n"
	            "      local_subprocess: {}\n"),
	    "config.yaml:6:21: sandbox.profiles.p.idle_timeout: must be greater than 0, got 0");
	EXPECT_ERROR(
	    PROFILE("      type: local_subprocess\n      polcy: {}\n"
	            "      local_subprocess: {}\n"),
	    "config.yaml:6:7: unknown key 'sandbox.profiles.p.polcy'; did you mean 'policy'?");
	EXPECT_ERROR(
	    PROFILE("      scope: per_call\n"),
	    "config.yaml:5:7: sandbox.profiles.p.type: is required: a provider plugin name "
	    "(e.g. local_subprocess) or a path to a .so");
	EXPECT_ERROR(PROFILE("      type: local_subprocess\n"),
	             "config.yaml:5:13: sandbox profile 'p' selects built-in provider "
	             "'local_subprocess' but its 'local_subprocess' config block is missing");
	/* a misspelt provider block: the original's block names are suggested */
	EXPECT_ERROR(PROFILE("      type: local_subprocess\n      local_subprocess: {}\n"
	                     "      dokcer: {image: x}\n"),
	             "config.yaml:7:7: unknown key 'sandbox.profiles.p.dokcer'; did you mean "
	             "'docker'?");
	EXPECT_ERROR(
	    PROFILE("      type: local_subprocess\n      local_subprocess: {wrkdir: /x}\n"),
	    "config.yaml:6:26: unknown key 'wrkdir' in the "
	    "sandbox.profiles.p.local_subprocess block; did you mean 'workdir'?");
	EXPECT_ERROR(
	    PROFILE("      type: local_subprocess\n      local_subprocess: {env: [a]}\n"),
	    "config.yaml:6:31: sandbox.profiles.p.local_subprocess.env: expected mapping of "
	    "strings, got a list");
	/* pool: a size and a max_idle in bounds, and only where a pool can be what it says */
	EXPECT_ERROR(PROFILE("      type: local_subprocess\n      pool: {size: 2, mx_idle: 5}\n"
	                     "      local_subprocess: {}\n"),
	             "config.yaml:6:23: unknown key 'sandbox.profiles.p.pool.mx_idle'; did you "
	             "mean 'max_idle'?");
	EXPECT_ERROR(PROFILE("      type: local_subprocess\n      pool: {size: 1.5}\n"
	                     "      local_subprocess: {}\n"),
	             "config.yaml:6:20: sandbox.profiles.p.pool.size: '1.5' is not a whole number");
	EXPECT_ERROR(PROFILE("      type: local_subprocess\n      pool: {size: 65}\n"
	                     "      local_subprocess: {}\n"),
	             "config.yaml:6:20: sandbox.profiles.p.pool.size: must be at most 64, got 65");
	EXPECT_ERROR(PROFILE("      type: local_subprocess\n      pool: {size: 1, max_idle: 0}\n"
	                     "      local_subprocess: {}\n"),
	             "config.yaml:6:33: sandbox.profiles.p.pool.max_idle: must be greater than 0, "
	             "got 0");
	EXPECT_ERROR(PROFILE("      type: local_subprocess\n      identity: {mode: user}\n"
	                     "      pool: {size: 1}\n      local_subprocess: {}\n"),
	             "config.yaml:7:13: sandbox.profiles.p.pool: a user-identity profile cannot "
	             "pool: a sandbox made ahead belongs to no user yet, and would go to whichever "
	             "user asked first");
	char *msg = load_err_env(PROFILE("      type: acme_cloud\n"), no_env, AKS_EPLUGIN);
	assert_non_null(strstr(msg, "config.yaml:5:13: sandbox.profiles.p.type: plugin "
	                            "'acme_cloud' not found; searched: "));
	free(msg);
#undef PROFILE
}

/* An instance that declares a capability it has no operation for is refused when it opens
 * (the loader checks the declared table; this is the instance's own). */
static void test_instance_capability_without_slot(void **state)
{
	(void)state;
	char *msg = load_err_env("sandbox:\n  enabled: true\n  type: fake\n"
	                         "  fake: {claim_package_install: true}\n",
	                         no_env, AKS_EPLUGIN);
	assert_string_equal(msg, "config.yaml:3:9: sandbox profile 'default': provider 'fake' "
	                         "failed to start: plugin 'fake' declares the package_install "
	                         "capability but has no 'install_packages' operation; implement "
	                         "it or do not declare package_install");
	free(msg);
}

/* A plugin's own check of its block is reported where the value it names is written. */
static void test_plugin_error_located(void **state)
{
	(void)state;
	EXPECT_ERROR("sandbox:\n  enabled: true\n  profiles:\n    p:\n"
	             "      type: local_subprocess\n      local_subprocess:\n"
	             "        env:\n          GOOD: x\n          \"BAD=1\": y\n",
	             "config.yaml:9:11: sandbox profile 'p': provider 'local_subprocess' failed "
	             "to start: local_subprocess: env: 'BAD=1' is not a variable name");
	/* The same through the single-backend sugar, in flow style. */
	EXPECT_ERROR("sandbox:\n  enabled: true\n  type: local_subprocess\n"
	             "  local_subprocess: {env_passthrough: [HOME], env: {A: b, =x: c}}\n",
	             "config.yaml:4:59: sandbox profile 'default': provider 'local_subprocess' "
	             "failed to start: local_subprocess: env: '=x' is not a variable name");
	/* A message quoting no value of the block stays at the type line. */
	EXPECT_ERROR("sandbox:\n  enabled: true\n  profiles:\n    p:\n"
	             "      type: local_subprocess\n      local_subprocess: {python: ''}\n",
	             "config.yaml:5:13: sandbox profile 'p': provider 'local_subprocess' failed "
	             "to start: local_subprocess: python must not be empty");
}

/* A profile name is at most 128 bytes: its default session's id must fit a store key. */
static void test_profile_name_bounded(void **state)
{
	(void)state;
	char name[160], yaml[512];
	memset(name, 'p', 129);
	name[129] = '\0';
	snprintf(yaml, sizeof(yaml),
	         "sandbox:\n  profiles:\n    %s: {type: local_subprocess, local_subprocess: {}}\n",
	         name);
	EXPECT_ERROR(yaml,
	             "config.yaml:3:5: the profile name 'pppppppppppppppppppppppppppppppp...' "
	             "is 129 bytes long; the limit is 128 bytes");
	/* The single-backend sugar names its profile after default_profile. */
	snprintf(yaml, sizeof(yaml),
	         "sandbox:\n  default_profile: %s\n  type: local_subprocess\n"
	         "  local_subprocess: {}\n",
	         name);
	EXPECT_ERROR(yaml,
	             "config.yaml:2:20: the profile name 'pppppppppppppppppppppppppppppppp...' "
	             "is 129 bytes long; the limit is 128 bytes");
	name[128] = '\0';
	snprintf(yaml, sizeof(yaml),
	         "sandbox:\n  profiles:\n    %s: {type: local_subprocess, local_subprocess: {}}\n",
	         name);
	aks_settings *s = load_ok(yaml);
	assert_int_equal(aks_settings_get_profile_count(s), 1);
	aks_settings_free(s);
}

static void test_disabled_is_inert(void **state)
{
	(void)state;
	/* Nothing is loaded for a disabled sandbox: an absent plugin is no error. */
	aks_settings *s = load_ok("sandbox:\n  enabled: false\n  profiles:\n"
	                          "    p: {type: acme_cloud}\n");
	assert_int_equal(aks_settings_get_profile_count(s), 1);
	assert_null(aks_profile_get_provider(aks_settings_get_profile(s, 0)));
	aks_settings_free(s);
}

static void test_env_overrides(void **state)
{
	(void)state;
	const char *const env[] = {"AK_SANDBOX__ENABLED=true",
	                           "AK_SANDBOX__BROKER__FLAVOR=embedded",
	                           "AK_SANDBOX__TOOL_OUTPUT_MAX_CHARS=4000",
	                           "AK_SANDBOX__AGENTS=[coder]",
	                           "AK_SANDBOX__PROFILES__WORK__POLICY__TIMEOUT=5",
	                           "UNRELATED=1",
	                           NULL};
	aks_settings *s = load_ok_env("sandbox:\n  enabled: false\n  profiles:\n"
	                              "    Work: {type: local_subprocess, local_subprocess: {}}\n",
	                              env);
	assert_true(aks_settings_is_enabled(s));
	assert_string_equal(aks_settings_get_broker_flavor(s), "embedded");
	assert_int_equal(aks_settings_get_tool_output_max_chars(s), 4000);
	assert_false(aks_settings_agent_allowed(s, "writer"));
	aks_profile *p = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_settings_find_profile(s, "Work", &p, &err), AKS_OK);
	assert_true(aks_profile_get_policy(p)->timeout == 5.0);
	aks_settings_free(s);

	const char *const bad[] = {"AK_SANDBOX__BROKER__WAIT_TIMEOUT=soon", NULL};
	char *msg = load_err_env("sandbox: {}\n", bad, AKS_ECONFIG);
	assert_string_equal(msg, "environment variable AK_SANDBOX__BROKER__WAIT_TIMEOUT: "
	                         "sandbox.broker.wait_timeout: 'soon' is not a number");
	free(msg);
	const char *const typo[] = {"AK_SANDBOX__ENABLD=true", NULL};
	msg = load_err_env("sandbox: {}\n", typo, AKS_ECONFIG);
	assert_string_equal(msg, "environment variable AK_SANDBOX__ENABLD: unknown key "
	                         "'sandbox.enabld'; did you mean 'enabled'?");
	free(msg);
}

static void test_environment_matrix(void **state)
{
	(void)state;
	const char *head = "sandbox:\n  enabled: true\n  profiles:\n    p:\n";
	char yaml[1024];
#define PROFILE(body) (snprintf(yaml, sizeof(yaml), "%s%s", head, body), yaml)
	EXPECT_ERROR(
	    PROFILE("      type: local_subprocess\n      environment: attached\n"
	            "      local_subprocess: {}\n"),
	    "config.yaml:6:20: sandbox profile 'p' declares environment: attached, but "
	    "provider 'local_subprocess' cannot attach to an existing environment; it only "
	    "provisions managed sandboxes");
	EXPECT_ERROR(PROFILE("      type: docker\n      environment: attached\n"
	                     "      pool: {size: 1}\n      docker: {attach_to: c1}\n"),
	             "config.yaml:7:13: sandbox.profiles.p.pool: an attached environment is never "
	             "created, so there is nothing to pool");
	EXPECT_ERROR(PROFILE("      type: docker\n      environment: attached\n      docker: {}\n"),
	             "config.yaml:6:20: sandbox profile 'p' declares environment: attached but no "
	             "attach_to target is configured");
	EXPECT_ERROR(
	    PROFILE("      type: ec2_ssm\n      ec2_ssm: {attach_to: i-0123}\n"),
	    "config.yaml:5:13: sandbox profile 'p' selects attach-only provider 'ec2_ssm', "
	    "which cannot provision managed sandboxes; set environment: attached (and "
	    "attach_to) to deliberately connect to an existing environment");
	EXPECT_ERROR(PROFILE("      type: docker\n      docker: {attach_to: c1}\n"),
	             "config.yaml:5:13: sandbox profile 'p' sets attach_to but environment is "
	             "'managed'; set environment: attached to deliberately connect to an existing "
	             "environment, or remove attach_to");
	aks_settings *s = load_ok(PROFILE("      type: docker\n      environment: attached\n"
	                                  "      docker: {attach_to: c1}\n"));
	assert_string_equal(aks_profile_get_attach_to(aks_settings_get_profile(s, 0)), "c1");
	aks_settings_free(s);
	s = load_ok(PROFILE("      type: ec2_ssm\n      environment: attached\n"
	                    "      ec2_ssm: {attach_to: i-0123}\n"));
	aks_settings_free(s);
#undef PROFILE
}

/* Runs `fn` with stderr sent to a file; returns what was written. */
static char *capture_stderr(void (*fn)(void *), void *arg)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/stderr.txt", settings_dir);
	fflush(stderr);
	int saved = dup(2), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	dup2(fd, 2);
	fn(arg);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(fd);
	FILE *f = fopen(path, "r");
	char *text = calloc(1, 65536);
	size_t n = fread(text, 1, 65535, f);
	text[n] = '\0';
	fclose(f);
	unlink(path);
	return text;
}

static void ten_checks(void *arg)
{
	for (int i = 0; i < 10; i++) {
		aks_error *err = NULL;
		assert_int_equal(aks_profile_check_policy(arg, &err), AKS_OK);
	}
}

static void test_policy_gate(void **state)
{
	(void)state;
	aks_log_set_level(AKS_LOG_WARNING);
	aks_settings *s =
	    load_ok("sandbox:\n  enabled: true\n  profiles:\n"
	            "    strict: {type: local_subprocess, local_subprocess: {},\n"
	            "             policy: {network_egress: deny, memory_mb: 64}}\n"
	            "    lenient: {type: local_subprocess, local_subprocess: {},\n"
	            "              policy: {network_egress: deny, strict: false}}\n"
	            "    timeout_only: {type: local_subprocess, local_subprocess: {},\n"
	            "                   policy: {timeout: 1}}\n");
	aks_profile *p = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_settings_find_profile(s, "strict", &p, &err), AKS_OK);
	assert_int_equal(aks_profile_check_policy(p, &err), AKS_EPOLICY);
	assert_string_equal(aks_error_message(err),
	                    "provider 'local_subprocess' cannot enforce policy dimensions "
	                    "['network_egress', 'resources'] (strict); relax the policy or set "
	                    "strict=false");
	aks_error_free(err);
	err = NULL;
	/* timeout is always enforceable: never refused. */
	assert_int_equal(aks_settings_find_profile(s, "timeout_only", &p, &err), AKS_OK);
	assert_int_equal(aks_profile_check_policy(p, &err), AKS_OK);
	/* strict: false passes, with exactly one warning over many calls. */
	assert_int_equal(aks_settings_find_profile(s, "lenient", &p, &err), AKS_OK);
	char *text = capture_stderr(ten_checks, p);
	const char *warning =
	    "Sandbox provider local_subprocess (profile lenient) cannot enforce "
	    "policy dimensions ['network_egress']; proceeding because strict=false";
	const char *first = strstr(text, warning);
	assert_non_null(first);
	assert_null(strstr(first + 1, warning));
	free(text);
	aks_settings_free(s);

	/* An egress allowlist needs policy_network_allowlist, not only policy_network:
	 * docker enforces deny but no allowlist; e2b enforces both. */
	s = load_ok(
	    "sandbox:\n  enabled: true\n  profiles:\n"
	    "    dk_allow: {type: docker, docker: {},\n"
	    "               policy: {network_egress: allowlist, network_allow: [pypi.org]}}\n"
	    "    dk_deny: {type: docker, docker: {}, policy: {network_egress: deny}}\n"
	    "    e2b_allow: {type: e2b, e2b: {},\n"
	    "                policy: {network_egress: allowlist, network_allow: [pypi.org]}}\n");
	assert_int_equal(aks_settings_find_profile(s, "dk_allow", &p, &err), AKS_OK);
	assert_int_equal(aks_profile_check_policy(p, &err), AKS_EPOLICY);
	assert_string_equal(aks_error_message(err),
	                    "provider 'docker' cannot enforce policy dimensions "
	                    "['network_egress'] (strict); relax the policy or set strict=false");
	aks_error_free(err);
	err = NULL;
	assert_int_equal(aks_settings_find_profile(s, "dk_deny", &p, &err), AKS_OK);
	assert_int_equal(aks_profile_check_policy(p, &err), AKS_OK);
	assert_int_equal(aks_settings_find_profile(s, "e2b_allow", &p, &err), AKS_OK);
	assert_int_equal(aks_profile_check_policy(p, &err), AKS_OK);
	aks_settings_free(s);
	aks_log_set_level(AKS_LOG_ERROR);
}

static void test_principal_gate(void **state)
{
	(void)state;
	aks_settings *s = load_ok("sandbox:\n  enabled: true\n  profiles:\n"
	                          "    local: {type: local_subprocess, local_subprocess: {},\n"
	                          "            identity: {mode: user}}\n"
	                          "    cluster: {type: kubernetes, kubernetes: {},\n"
	                          "              identity: {mode: user}}\n"
	                          "    agent: {type: kubernetes, kubernetes: {}}\n");
	aks_principal agent, user;
	aks_principal_init(&agent, "coder");
	aks_principal_init(&user, "alice");
	user.mode = AKS_IDENTITY_USER;
	aks_profile *p = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_settings_find_profile(s, "local", &p, &err), AKS_OK);
	assert_int_equal(aks_profile_check_principal(p, &user, &err), AKS_ECAPABILITY);
	assert_string_equal(aks_error_message(err),
	                    "local_subprocess does not support capability: principal_user");
	aks_error_free(err);
	err = NULL;
	assert_int_equal(aks_settings_find_profile(s, "cluster", &p, &err), AKS_OK);
	assert_int_equal(aks_profile_check_principal(p, &agent, &err), AKS_EPOLICY);
	assert_string_equal(
	    aks_error_message(err),
	    "profile 'cluster' requires user identity, but the resolver returned an "
	    "agent-mode principal; no user identity is available on the session");
	aks_error_free(err);
	err = NULL;
	assert_int_equal(aks_profile_check_principal(p, &user, &err), AKS_OK);
	assert_int_equal(aks_settings_find_profile(s, "agent", &p, &err), AKS_OK);
	assert_int_equal(aks_profile_check_principal(p, &agent, &err), AKS_OK);
	/* The built-in resolver gives the agent's own identity. */
	aks_resolve_request req;
	aks_resolve_request_init(&req, "conv-1", "coder", NULL);
	aks_resolved_principal *rp = NULL;
	assert_int_equal(aks_resolver_resolve(aks_settings_get_resolver(s), &req, &rp, &err),
	                 AKS_OK);
	assert_int_equal(aks_resolved_principal_get(rp)->mode, AKS_IDENTITY_AGENT);
	assert_string_equal(aks_resolved_principal_get(rp)->subject, "coder");
	aks_resolved_principal_free(rp);
	aks_settings_free(s);
}

static void test_instance_capabilities_decide(void **state)
{
	(void)state;
	/* kubernetes enforces egress only when network_policy: true asserts the CNI does. */
	aks_settings *s = load_ok("sandbox:\n  enabled: true\n  profiles:\n"
	                          "    off: {type: kubernetes, kubernetes: {},\n"
	                          "          policy: {network_egress: deny}}\n"
	                          "    on: {type: kubernetes, kubernetes: {network_policy: true},\n"
	                          "         policy: {network_egress: deny}}\n");
	aks_profile *p = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_settings_find_profile(s, "off", &p, &err), AKS_OK);
	assert_int_equal(aks_profile_get_unenforced(p), AKS_POLICY_NETWORK);
	assert_int_equal(aks_profile_check_policy(p, &err), AKS_EPOLICY);
	aks_error_free(err);
	err = NULL;
	assert_int_equal(aks_settings_find_profile(s, "on", &p, &err), AKS_OK);
	assert_int_equal(aks_profile_get_unenforced(p), 0);
	assert_int_equal(aks_profile_check_policy(p, &err), AKS_OK);
	aks_settings_free(s);
}

/* ---- finding the file ---- */

typedef struct skipped {
	char paths[4][PATH_MAX];
	int n;
} skipped;

static void note_skipped(void *userdata, const char *path)
{
	skipped *sk = userdata;
	if (sk->n < 4)
		snprintf(sk->paths[sk->n++], PATH_MAX, "%s", path);
}

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* A config.yaml at a default place without a sandbox: mapping (none, a list, not a mapping at
 * all) is skipped, by its absolute path, and the search goes on; a broken one is taken (its
 * error must be seen); one with the mapping is taken; -c and $AKSANDBOX_CONFIG are taken as
 * they are. */
static void test_locate_skips_foreign_files(void **state)
{
	(void)state;
	char dir[] = "/tmp/aks-locate-XXXXXX", old_cwd[PATH_MAX], xdg[64], ours[128];
	assert_non_null(mkdtemp(dir));
	assert_non_null(getcwd(old_cwd, sizeof(old_cwd)));
	assert_int_equal(chdir(dir), 0);
	const char *old_xdg = getenv("XDG_CONFIG_HOME"), *old_env = getenv("AKSANDBOX_CONFIG");
	char *saved_xdg = old_xdg ? strdup(old_xdg) : NULL,
	     *saved_env = old_env ? strdup(old_env) : NULL;
	unsetenv("AKSANDBOX_CONFIG");
	snprintf(xdg, sizeof(xdg), "%s/xdg", dir);
	setenv("XDG_CONFIG_HOME", xdg, 1);
	snprintf(ours, sizeof(ours), "%s/aksandbox", xdg);
	assert_int_equal(mkdir(xdg, 0700), 0);
	assert_int_equal(mkdir(ours, 0700), 0);
	snprintf(ours, sizeof(ours), "%s/aksandbox/config.yaml", xdg);
	put(ours, "sandbox:\n  enabled: false\n");
	char local[64];
	snprintf(local, sizeof(local), "%s/config.yaml", dir);

	static const char *const foreign[] = {"name: my-project\nlayers: [a, b]\n",
	                                      "sandbox:\n  - not ours\n", "sandbox: yes\n",
	                                      "- a list\n"};
	for (size_t i = 0; i < sizeof(foreign) / sizeof(foreign[0]); i++) {
		put("config.yaml", foreign[i]);
		skipped sk = {.n = 0};
		char *got = aks_settings_locate(NULL, note_skipped, &sk);
		assert_non_null(got);
		assert_string_equal(got, ours);
		assert_int_equal(sk.n, 1);
		assert_string_equal(sk.paths[0], local);
		free(got);
		got = aks_settings_find_file(NULL); /* the same, logged */
		assert_string_equal(got, ours);
		free(got);
	}
	/* Not well-formed: taken, so loading it reports where it breaks. */
	put("config.yaml", "sandbox: {enabled: [\n");
	skipped sk = {.n = 0};
	char *got = aks_settings_locate(NULL, note_skipped, &sk);
	assert_string_equal(got, "config.yaml");
	assert_int_equal(sk.n, 0);
	free(got);
	put("config.yaml", "sandbox:\n  enabled: true\n");
	got = aks_settings_locate(NULL, note_skipped, &sk);
	assert_string_equal(got, "config.yaml");
	free(got);
	/* What is asked for by name is never second-guessed. */
	put("config.yaml", "other: 1\n");
	got = aks_settings_locate("config.yaml", note_skipped, &sk);
	assert_string_equal(got, "config.yaml");
	free(got);
	setenv("AKSANDBOX_CONFIG", "config.yaml", 1);
	got = aks_settings_locate(NULL, note_skipped, &sk);
	assert_string_equal(got, "config.yaml");
	free(got);
	assert_int_equal(sk.n, 0);
	/* Nothing of ours anywhere (no /etc file either on a test machine that has one is
	 * not assumed): the skipped files are all named. */
	unsetenv("AKSANDBOX_CONFIG");
	put(ours, "sandbox: []\n");
	got = aks_settings_locate(NULL, note_skipped, &sk);
	assert_true(sk.n >= 2);
	assert_string_equal(sk.paths[0], local);
	assert_string_equal(sk.paths[1], ours);
	assert_true(got == NULL || strcmp(got, "/etc/aksandbox/config.yaml") == 0);
	free(got);

	if (saved_xdg)
		setenv("XDG_CONFIG_HOME", saved_xdg, 1);
	else
		unsetenv("XDG_CONFIG_HOME");
	if (saved_env)
		setenv("AKSANDBOX_CONFIG", saved_env, 1);
	free(saved_xdg);
	free(saved_env);
	assert_int_equal(chdir(old_cwd), 0);
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_foreign_sections_skipped),
	    cmocka_unit_test(test_embedded_default),
	    cmocka_unit_test(test_locate_skips_foreign_files),
	    cmocka_unit_test(test_sugar),
	    cmocka_unit_test(test_profile_defaults_and_values),
	    cmocka_unit_test(test_unknown_profile),
	    cmocka_unit_test(test_key_and_type_errors),
	    cmocka_unit_test(test_profile_errors),
	    cmocka_unit_test(test_plugin_error_located),
	    cmocka_unit_test(test_instance_capability_without_slot),
	    cmocka_unit_test(test_profile_name_bounded),
	    cmocka_unit_test(test_disabled_is_inert),
	    cmocka_unit_test(test_env_overrides),
	    cmocka_unit_test(test_environment_matrix),
	    cmocka_unit_test(test_fs_allow_paths),
	    cmocka_unit_test(test_network_allow_entries),
	    cmocka_unit_test(test_policy_gate),
	    cmocka_unit_test(test_principal_gate),
	    cmocka_unit_test(test_instance_capabilities_decide),
	};
	return cmocka_run_group_tests_name("settings", tests, settings_setup, settings_teardown);
}
