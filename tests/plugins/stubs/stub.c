/*
 * stub.c - stand-ins for the providers that do not exist yet (docker,
 * kubernetes, e2b, daytona, ec2_ssm), so the config loader can be tested
 * against their real config schemas (reference section 2.10, "Provider
 * blocks") and capabilities (section 8.0).
 *
 * Built once per name with -DSTUB_<NAME>. Each stub declares its schema and
 * capabilities honestly, reports the instance overrides of the real provider
 * (docker with runtime runsc is syscall_filter; kubernetes with
 * network_policy: true enforces egress) and runs nothing: create, attach and
 * execution are AKS_EPROVISION, destroy is idempotent and succeeds.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <aksandbox/plugin.h>
#include <aksandbox/provider.h>

static const char *const stub_languages[] = {"python", NULL};

/* Capability rows of the matrix, in aks_capabilities order from `shell`. */
#define STUB_CAPS(iso, shell_, files_, pkg, stateful_, attach_, prov, ext, user, net, fs, res,     \
                  allow)                                                                           \
	{                                                                                          \
		.struct_version = AKS_CAPABILITIES_VERSION,                                        \
		.struct_size = sizeof(aks_capabilities), .isolation = (iso),                       \
		.languages = stub_languages, .shell = (shell_), .files = (files_),                 \
		.package_install = (pkg), .stateful = (stateful_), .attach = (attach_),            \
		.provisions = (prov), .attaches_external = (ext), .principal_user = (user),        \
		.policy_network = (net), .policy_filesystem = (fs), .policy_resources = (res),     \
		.policy_network_allowlist = (allow),                                               \
	}

#if defined(STUB_DOCKER)
#define STUB_NAME "docker"
static const aks_config_key stub_keys[] = {
    AKS_CONFIG_KEY("image", AKS_CONFIG_STRING, false, "python:3.12-slim", "container image"),
    AKS_CONFIG_KEY("runtime", AKS_CONFIG_STRING, false, "docker",
                   "OCI runtime (runsc: gVisor, syscall_filter isolation)"),
    AKS_CONFIG_KEY("attach_to", AKS_CONFIG_STRING, false, NULL,
                   "existing container id (environment: attached)"),
    AKS_CONFIG_END,
};
static const aks_capabilities stub_caps =
    STUB_CAPS(AKS_ISOLATION_CONTAINER, true, true, true, false, true, true, true, false, true, true,
              true, false); /* egress deny only */
#elif defined(STUB_KUBERNETES)
#define STUB_NAME "kubernetes"
static const aks_config_key stub_keys[] = {
    AKS_CONFIG_KEY("namespace", AKS_CONFIG_STRING, false, "default", "namespace of the pods"),
    AKS_CONFIG_KEY("image", AKS_CONFIG_STRING, false, "python:3.12-slim", "container image"),
    AKS_CONFIG_KEY("attach_to", AKS_CONFIG_STRING, false, NULL,
                   "<namespace>/<pod> or a bare pod name (environment: attached)"),
    AKS_CONFIG_KEY("kubeconfig", AKS_CONFIG_STRING, false, NULL,
                   "kubeconfig path; null = in-cluster, then the default kubeconfig"),
    AKS_CONFIG_KEY("service_account", AKS_CONFIG_STRING, false, NULL, "pod service account"),
    AKS_CONFIG_KEY("image_pull_secrets", AKS_CONFIG_STRING_LIST, false, "[]",
                   "names of image pull secrets"),
    AKS_CONFIG_KEY("labels", AKS_CONFIG_STRING_MAP, false, "{}", "pod labels"),
    AKS_CONFIG_KEY("node_selector", AKS_CONFIG_STRING_MAP, false, "{}", "pod node selector"),
    AKS_CONFIG_KEY("env", AKS_CONFIG_STRING_MAP, false, "{}", "container environment"),
    AKS_CONFIG_KEY("security_context", AKS_CONFIG_JSON, false, "{}",
                   "pod-level security context overlay"),
    AKS_CONFIG_KEY("container_security_context", AKS_CONFIG_JSON, false, "{}",
                   "container-level security context overlay"),
    AKS_CONFIG_KEY("network_policy", AKS_CONFIG_BOOL, false, "false",
                   "create a NetworkPolicy per pod (enforces egress)"),
    AKS_CONFIG_KEY("create_timeout", AKS_CONFIG_DOUBLE, false, "120.0",
                   "seconds to wait for a pod to run"),
    AKS_CONFIG_END,
};
static const aks_capabilities stub_caps =
    STUB_CAPS(AKS_ISOLATION_CONTAINER, true, true, true, false, true, true, true, true, false, true,
              true, false); /* network: per instance, with network_policy */
#elif defined(STUB_E2B)
#define STUB_NAME "e2b"
static const aks_config_key stub_keys[] = {
    AKS_CONFIG_KEY("api_key_env", AKS_CONFIG_STRING, false, "E2B_API_KEY",
                   "environment variable holding the API key"),
    AKS_CONFIG_KEY("template", AKS_CONFIG_STRING, false, "base", "sandbox template"),
    AKS_CONFIG_END,
};
static const aks_capabilities stub_caps =
    STUB_CAPS(AKS_ISOLATION_MICRO_VM, true, true, true, true, true, true, false, false, true, false,
              false, true); /* allow_out lists */
#elif defined(STUB_DAYTONA)
#define STUB_NAME "daytona"
static const aks_config_key stub_keys[] = {
    AKS_CONFIG_KEY("api_key_env", AKS_CONFIG_STRING, false, "DAYTONA_API_KEY",
                   "environment variable holding the API key"),
    AKS_CONFIG_KEY("target", AKS_CONFIG_STRING, false, NULL, "region"),
    AKS_CONFIG_KEY("image", AKS_CONFIG_STRING, false, NULL, "image (exclusive with snapshot)"),
    AKS_CONFIG_KEY("snapshot", AKS_CONFIG_STRING, false, NULL, "snapshot (exclusive with image)"),
    AKS_CONFIG_KEY("env_vars", AKS_CONFIG_STRING_MAP, false, "{}", "sandbox environment"),
    AKS_CONFIG_END,
};
static const aks_capabilities stub_caps =
    STUB_CAPS(AKS_ISOLATION_CONTAINER, true, true, true, false, true, true, false, false, true,
              false, true, true); /* network_allow_list */
#elif defined(STUB_EC2_SSM)
#define STUB_NAME "ec2_ssm"
static const aks_config_key stub_keys[] = {
    AKS_CONFIG_KEY("region", AKS_CONFIG_STRING, false, NULL,
                   "AWS region; null = the default chain"),
    AKS_CONFIG_KEY("attach_to", AKS_CONFIG_STRING, false, NULL, "EC2 instance id"),
    AKS_CONFIG_END,
};
static const aks_capabilities stub_caps =
    STUB_CAPS(AKS_ISOLATION_NONE, true, false, false, false, true, false, true, true, false, false,
              false, false);
#else
#error "define one of STUB_DOCKER, STUB_KUBERNETES, STUB_E2B, STUB_DAYTONA, STUB_EC2_SSM"
#endif

#define STUB_REFUSAL STUB_NAME " is a test stub: it cannot run sandboxes"

struct aks_provider_impl {
	const aks_host_api *host;
	aks_capabilities caps; /* the instance's, after the overrides */
};

struct aks_sandbox_impl {
	char unused;
};

#if defined(STUB_DAYTONA)
static bool is_set(const aks_host_api *host, const aks_config *cfg, const char *key)
{
	const char *v = NULL;
	return host->config_string(cfg, key, &v) == AKS_OK && v != NULL;
}
#endif

static int stub_init(const aks_host_api *host, const aks_config *config, aks_provider_impl **out,
                     aks_error **err)
{
#if defined(STUB_DAYTONA)
	if (is_set(host, config, "image") && is_set(host, config, "snapshot"))
		return host->error_set(err, AKS_ECONFIG,
		                       "daytona config sets both 'image' and 'snapshot'; they are "
		                       "mutually exclusive \u2014 pick one");
#endif
	aks_provider_impl *p = calloc(1, sizeof(*p));
	if (!p)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	p->host = host;
	p->caps = stub_caps;
#if defined(STUB_DOCKER)
	const char *runtime = NULL;
	if (host->config_string(config, "runtime", &runtime) == AKS_OK && runtime &&
	    strcmp(runtime, "runsc") == 0)
		p->caps.isolation = AKS_ISOLATION_SYSCALL_FILTER;
#elif defined(STUB_KUBERNETES)
	bool network_policy = false;
	if (host->config_bool(config, "network_policy", &network_policy) == AKS_OK &&
	    network_policy)
		p->caps.policy_network = p->caps.policy_network_allowlist = true; /* CIDRs */
#endif
	*out = p;
	return AKS_OK;
}

static void stub_fini(aks_provider_impl *p)
{
	free(p);
}

static const aks_capabilities *stub_instance_caps(const aks_provider_impl *p)
{
	return &p->caps;
}

static int stub_create(aks_provider_impl *p, const aks_call *call, aks_sandbox_impl **out,
                       aks_error **err)
{
	return p->host->error_set(err, AKS_EPROVISION, STUB_REFUSAL);
}

static int stub_attach(aks_provider_impl *p, const char *id, const aks_call *call,
                       aks_sandbox_impl **out, aks_error **err)
{
	return p->host->error_set(err, AKS_EPROVISION, STUB_REFUSAL);
}

static int stub_destroy(aks_provider_impl *p, const char *id, const aks_call *call, aks_error **err)
{
	return AKS_OK; /* nothing was ever created: every id is already gone */
}

/* No sandbox handle can exist, so these are never called; they answer honestly
 * anyway. */
static const char *stub_id(const aks_sandbox_impl *sb)
{
	return "";
}

static int stub_execute_code(aks_sandbox_impl *sb, const char *code, const char *language,
                             const aks_call *call, aks_result *out, aks_error **err)
{
	return AKS_EPROVISION;
}

static int stub_execute_command(aks_sandbox_impl *sb, const char *command, const aks_call *call,
                                aks_result *out, aks_error **err)
{
	return AKS_EPROVISION;
}

/* The slots of what the stubs declare: the loader refuses a capability without its
 * operation. They run nothing (this is a stub). */
static int stub_upload_file(aks_sandbox_impl *sb, const char *path, const void *data, size_t len,
                            const aks_call *call, aks_error **err)
{
	return AKS_EPROVISION;
}

static int stub_download_file(aks_sandbox_impl *sb, const char *path, const aks_call *call,
                              aks_result *out, aks_error **err)
{
	return AKS_EPROVISION;
}

static int stub_install_packages(aks_sandbox_impl *sb, const char *const *packages,
                                 const aks_call *call, aks_result *out, aks_error **err)
{
	return AKS_EPROVISION;
}

static void stub_close(aks_sandbox_impl *sb)
{
}

static const aks_sandbox_ops stub_sandbox_ops = {
    .struct_version = AKS_SANDBOX_OPS_VERSION,
    .struct_size = sizeof(aks_sandbox_ops),
    .id = stub_id,
    .execute_code = stub_execute_code,
    .execute_command = stub_execute_command,
    .upload_file = stub_upload_file,
    .download_file = stub_download_file,
    .install_packages = stub_install_packages,
    .close = stub_close,
};

static const aks_provider_ops stub_ops = {
    .struct_version = AKS_PROVIDER_OPS_VERSION,
    .struct_size = sizeof(aks_provider_ops),
    .capabilities = &stub_caps,
    .init = stub_init,
    .fini = stub_fini,
    .instance_capabilities = stub_instance_caps,
    .create = stub_create,
    .attach = stub_attach,
    .destroy = stub_destroy,
    .sandbox = &stub_sandbox_ops,
};

AKS_PLUGIN_DEFINE(AKS_PLUGIN_PROVIDER, STUB_NAME, "0", "Apache-2.0",
                  "test stub of the " STUB_NAME " provider", stub_keys, &stub_ops);
