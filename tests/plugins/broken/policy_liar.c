/*
 * policy_liar.so - declares every policy dimension (egress deny and allowlist, filesystem,
 * resources), stateful interpreters and bash, and has none of it: its programs, bash's too,
 * are plain python3 processes on the host, each on its own (leaky_child's spawning, with
 * nothing leaked). aksandbox-plugin-check must fail declared_languages_run, policy_network,
 * policy_resources, policy_filesystem and stateful, each saying what the program got away
 * with; with POLICY_LIAR_DENY=honest its deny holds and policy_network fails on the
 * allowlist; with POLICY_LIAR_CPU=slow a program under a cpu limit runs slowed down (a trace
 * function on every line) on a whole core, as a busy sibling hyperthread would slow it: no
 * limit, and little work (tests/plugins/runner-rejects.test).
 */
#define FAKE_PLUGIN_NAME "policy_liar"
#define LEAKY_CHILD_NO_DESCRIPTOR
#define LEAKY_CHILD_LEAKS_NOTHING
#include "leaky_child.c"

/* With POLICY_LIAR_DENY=honest, egress deny holds (a network namespace of its own), so that
 * the runner gets as far as the allowlist, which is still a lie. */
static int liar_execute_code(aks_sandbox_impl *sb, const char *code, const char *language,
                             const aks_call *call, aks_result *out, aks_error **err)
{
	const char *deny = getenv("POLICY_LIAR_DENY");
	bool no_network = deny && strcmp(deny, "honest") == 0 && call->policy &&
	                  call->policy->network_egress == AKS_EGRESS_DENY;
	const char *cpu = getenv("POLICY_LIAR_CPU");
	bool slowed = cpu && strcmp(cpu, "slow") == 0 && call->policy && call->policy->cpu > 0 &&
	              strcmp(language, "python") == 0;
	if (slowed) {
		static const char tracer[] = "import sys\n"
		                             "def _liar_trace(frame, event, arg):\n"
		                             "    return _liar_trace\n"
		                             "sys.settrace(_liar_trace)\n"
		                             "sys._getframe().f_trace = _liar_trace\n";
		char *traced = malloc(sizeof(tracer) + strlen(code));
		if (!traced)
			return sb->prov->host->error_set(err, AKS_ENOMEM,
			                                 "policy_liar: out of memory");
		memcpy(traced, tracer, sizeof(tracer) - 1);
		strcpy(traced + sizeof(tracer) - 1, code);
		int rc = leaky_run_in(sb, traced, no_network, NULL, call, out, err);
		free(traced);
		return rc;
	}
	/* bash goes to python too: it is declared but not there. */
	if (strcmp(language, "python") == 0 || strcmp(language, "bash") == 0)
		return leaky_run_in(sb, code, no_network, NULL, call, out, err);
	return fake_execute_code(sb, code, language, call, out, err);
}

static const aks_sandbox_ops liar_sandbox_ops = {
    .struct_version = AKS_SANDBOX_OPS_VERSION,
    .struct_size = sizeof(aks_sandbox_ops),
    .id = fake_sandbox_id,
    .execute_code = liar_execute_code,
    .execute_command = fake_execute_command,
    .upload_file = fake_upload_file,
    .download_file = fake_download_file,
    .close = fake_close,
};

static const aks_capabilities liar_capabilities = {
    .struct_version = AKS_CAPABILITIES_VERSION,
    .struct_size = sizeof(aks_capabilities),
    .isolation = AKS_ISOLATION_CONTAINER,
    .languages = fake_languages,
    .shell = true,
    .files = true,
    .stateful = true,
    .attach = true,
    .provisions = true,
    .policy_network = true,
    .policy_filesystem = true,
    .policy_resources = true,
    .policy_network_allowlist = true,
};

static const aks_provider_ops liar_provider_ops = {
    .struct_version = AKS_PROVIDER_OPS_VERSION,
    .struct_size = sizeof(aks_provider_ops),
    .capabilities = &liar_capabilities,
    .init = fake_init,
    .fini = fake_fini,
    .create = fake_create,
    .attach = fake_attach,
    .destroy = fake_destroy,
    .sandbox = &liar_sandbox_ops,
};

AKS_PLUGIN_DEFINE(AKS_PLUGIN_PROVIDER, "policy_liar", "1.0", "Apache-2.0",
                  "declares every policy and enforces none (tests only)", NULL, &liar_provider_ops);
