/*
 * contract_liar.so - loads cleanly but breaks four rules of the provider
 * contract that no loader can see, so that aksandbox-plugin-check has
 * something to catch (tests/plugins/runner-rejects.test expects exactly these
 * four checks to fail and every other check to pass):
 *
 *   honesty_package_install    declares package_install, then refuses it
 *   program_failure_is_result  reports a failing program as an error
 *   destroy_is_idempotent      destroy of an unknown id is an error
 *   attach_honesty             attach of an unknown id is not AKS_EGONE
 *
 * Everything else is the fake provider's.
 */
#define FAKE_PLUGIN_NAME "contract_liar"
#define FAKE_NO_DESCRIPTOR
#include "../fake/fake.c"

static const aks_capabilities liar_capabilities = {
    .struct_version = AKS_CAPABILITIES_VERSION,
    .struct_size = sizeof(aks_capabilities),
    .isolation = AKS_ISOLATION_NONE,
    .languages = fake_languages,
    .shell = true,
    .files = true,
    .package_install = true, /* the lie */
    .stateful = true,
    .attach = true,
    .provisions = true,
};

static int liar_install_packages(aks_sandbox_impl *sb, const char *const *packages,
                                 const aks_call *call, aks_result *out, aks_error **err)
{
	return sb->prov->host->error_set(err, AKS_ECAPABILITY, "no packages here after all");
}

static int liar_execute_code(aks_sandbox_impl *sb, const char *code, const char *language,
                             const aks_call *call, aks_result *out, aks_error **err)
{
	if (strstr(code, FAKE_FAIL_MARKER))
		return sb->prov->host->error_set(err, AKS_ERROR, "the program failed");
	return fake_execute_code(sb, code, language, call, out, err);
}

static int liar_attach(aks_provider_impl *prov, const char *sandbox_id, const aks_call *call,
                       aks_sandbox_impl **out, aks_error **err)
{
	int rc = fake_attach(prov, sandbox_id, call, out, err);
	if (rc == AKS_EGONE && err && *err) {
		prov->host->error_free(*err);
		*err = NULL;
		return prov->host->error_set(err, AKS_EPROVISION, "cannot attach '%s'", sandbox_id);
	}
	return rc;
}

static int liar_destroy(aks_provider_impl *prov, const char *sandbox_id, const aks_call *call,
                        aks_error **err)
{
	bool known;

	pthread_mutex_lock(&prov->lock);
	known = fake_box_find(prov, sandbox_id) != NULL;
	pthread_mutex_unlock(&prov->lock);
	if (!known)
		return prov->host->error_set(err, AKS_ENOTFOUND, "no sandbox '%s'", sandbox_id);
	return fake_destroy(prov, sandbox_id, call, err);
}

static const aks_sandbox_ops liar_sandbox_ops = {
    .struct_version = AKS_SANDBOX_OPS_VERSION,
    .struct_size = sizeof(aks_sandbox_ops),
    .id = fake_sandbox_id,
    .execute_code = liar_execute_code,
    .execute_command = fake_execute_command,
    .upload_file = fake_upload_file,
    .download_file = fake_download_file,
    .install_packages = liar_install_packages,
    .close = fake_close,
};

static const aks_provider_ops liar_provider_ops = {
    .struct_version = AKS_PROVIDER_OPS_VERSION,
    .struct_size = sizeof(aks_provider_ops),
    .capabilities = &liar_capabilities,
    .init = fake_init,
    .fini = fake_fini,
    .create = fake_create,
    .attach = liar_attach,
    .destroy = liar_destroy,
    .sandbox = &liar_sandbox_ops,
};

AKS_PLUGIN_DEFINE(AKS_PLUGIN_PROVIDER, "contract_liar", "1.0", "Apache-2.0",
                  "breaks the provider contract on purpose (tests only)", NULL, &liar_provider_ops);
