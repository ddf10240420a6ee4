/*
 * policy_liar.so - declares every policy dimension (egress, filesystem, resources) and
 * stateful interpreters, and enforces none of them: its programs are plain python3
 * processes on the host, each on its own (leaky_child's spawning, with nothing leaked).
 * aksandbox-plugin-check must fail policy_network, policy_resources, policy_filesystem and
 * stateful, each saying what the program got away with (tests/plugins/runner-rejects.test).
 */
#define FAKE_PLUGIN_NAME "policy_liar"
#define LEAKY_CHILD_NO_DESCRIPTOR
#define LEAKY_CHILD_LEAKS_NOTHING
#include "leaky_child.c"

static int liar_execute_code(aks_sandbox_impl *sb, const char *code, const char *language,
                             const aks_call *call, aks_result *out, aks_error **err)
{
	if (strcmp(language, "python") == 0)
		return leaky_run(sb, code, call, out, err);
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
