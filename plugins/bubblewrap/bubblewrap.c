/*
 * plugins/bubblewrap/bubblewrap.c - the descriptor, the provider instance and the sandbox
 * lifecycle (create, attach, destroy, close).
 *
 * A sandbox is a workspace directory on this host, ak-bwrap-XXXXXX under `workdir` (its path
 * is the sandbox id), and the confinement its programs run under: bwrap's namespaces and
 * filesystem view (bw_view.c), a seccomp filter (bw_seccomp.c), Landlock (applied by the
 * agent) and a cgroup named after the directory (bw_cgroup.c). Operations run through
 * aksandbox-agent started inside bwrap, or one bwrap per call. See docs/plugins/bubblewrap.md.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdlib.h>
#include <string.h>

#include <aksandbox/plugin.h>
#include <aksandbox/provider.h>

#include "aks_agent.h"
#include "aks_hostdir.h"
#include "bw_internal.h"

#ifndef BW_VERSION
#error "BW_VERSION must be defined (the package version)"
#endif

/* ---- descriptor ---------------------------------------------------------------------------- */

static const char *const bw_languages[] = {"python", "bash", NULL};

/* The class's: what every instance can do. An instance on a host where no cgroup can be made
 * enforces no cpu or memory limit, and says so (instance_capabilities). */
const aks_capabilities bw_capabilities = {
    AKS_CAPABILITIES_INIT,
    .isolation = AKS_ISOLATION_OS_POLICY,
    .languages = bw_languages,
    .shell = true,
    .files = true,
    .package_install = false,
    .stateful = false,
    .attach = true,
    .provisions = true,
    .attaches_external = false,
    .principal_user = false,
    .policy_network = true,
    .policy_filesystem = true,
    .policy_resources = false,
};

static const aks_config_key bw_config_keys[] = {
    AKS_CONFIG_KEY("workdir", AKS_CONFIG_STRING, false, NULL,
                   "base directory for the sandboxes' workspace directories on this host "
                   "(created with parents); null = $TMPDIR or /tmp"),
    AKS_CONFIG_KEY("workspace", AKS_CONFIG_STRING, false, "/workspace",
                   "where the workspace is inside the sandbox (read-write; programs start there)"),
    AKS_CONFIG_KEY("bwrap", AKS_CONFIG_STRING, false, "bwrap",
                   "the bwrap program: a path, or a name looked up in PATH"),
    AKS_CONFIG_KEY("python", AKS_CONFIG_STRING, false, "python3",
                   "Python interpreter for language python, looked up in the sandbox's PATH"),
    AKS_CONFIG_KEY("env_passthrough", AKS_CONFIG_STRING_LIST, false, "[]",
                   "host environment variables copied into the sandbox's minimal environment"),
    AKS_CONFIG_KEY("env", AKS_CONFIG_STRING_MAP, false, "{}",
                   "extra environment variables for the sandbox (override everything else)"),
    AKS_CONFIG_KEY("agent", AKS_CONFIG_STRING, false, NULL,
                   "the aksandbox-agent program to run operations through inside bwrap "
                   "(stateful Python, Landlock); null = the installed one, false = none"),
    AKS_CONFIG_KEY("landlock", AKS_CONFIG_STRING, false, "required",
                   "required: the kernel's Landlock confines every program to the sandbox's "
                   "paths (refused at start where the kernel has none); off: mounts only"),
    AKS_CONFIG_KEY("cgroup_parent", AKS_CONFIG_STRING, false, NULL,
                   "the cgroup (relative to each hierarchy's root) under which sandboxes' "
                   "cgroups are made; null = the default (docs/plugins/bubblewrap.md)"),
    AKS_CONFIG_KEY("pids_max", AKS_CONFIG_INT, false, "512",
                   "the most tasks a sandbox may run at once, where cgroups are usable"),
    AKS_CONFIG_KEY("etc", AKS_CONFIG_STRING_LIST, false,
                   "[passwd, group, hosts, host.conf, nsswitch.conf, resolv.conf, gai.conf, "
                   "ld.so.cache, ld.so.conf, ld.so.conf.d, localtime, timezone, alternatives, "
                   "ssl/certs, ca-certificates, ca-certificates.conf, os-release, "
                   "debian_version, bash.bashrc, profile, inputrc, mime.types, protocols, "
                   "services, locale.alias, python3, python3.11, terminfo]",
                   "the entries of the host's /etc a sandbox sees, read-only (never shadow, "
                   "sudoers, ssh or ssl/private)"),
    AKS_CONFIG_END,
};

/* ---- handles ------------------------------------------------------------------------------- */

static void free_handle(aks_sandbox_impl *sb)
{
	if (!sb)
		return;
	aks_agent_session_free(sb->agent);
	aks__strv_free(sb->read_binds);
	aks__strv_free(sb->write_binds);
	free(sb->cgroup);
	free(sb->dir);
	free(sb);
}

static int new_handle(aks_provider_impl *prov, const char *dir, const aks_call *call,
                      aks_sandbox_impl **out, aks_error **err)
{
	const aks_host_api *host = prov->host;
	aks_sandbox_impl *sb = calloc(1, sizeof(*sb));
	if (!sb || !(sb->dir = strdup(dir))) {
		free(sb);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	sb->prov = prov;
	const char *slash = strrchr(sb->dir, '/');
	if (!(sb->cgroup = strdup(slash ? slash + 1 : sb->dir))) {
		free_handle(sb);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	int rc = bw_view_policy(sb, call ? call->policy : NULL, err);
	char **env = rc == AKS_OK ? bw_env_build(sb) : NULL;
	if (rc == AKS_OK && !env)
		rc = host->error_set(err, AKS_ENOMEM, "out of memory");
	if (rc == AKS_OK) {
		/* The agent starts in the workspace with the sandbox's environment as its own;
		 * every program it starts gets exactly that environment too. */
		const aks_policy *pol = call ? call->policy : NULL;
		aks_agent_session_opts o = {
		    .id = sb->dir,
		    .cwd = prov->workspace,
		    .env = (const char *const *)env,
		    .env_clear = true,
		    /* no network of its own (--unshare-net): the agent's proxy is the way out */
		    .egress_proxy = pol && pol->network_egress == AKS_EGRESS_ALLOWLIST,
		    .network_allow = pol ? pol->network_allow : NULL};
		rc = aks_agent_session_new(prov->agent, &bw_agent_ops, sb, &o, &sb->agent, err);
	}
	aks__strv_free(env);
	if (rc != AKS_OK) {
		free_handle(sb);
		return rc;
	}
	*out = sb;
	return AKS_OK;
}

/* ---- provider instance ----------------------------------------------------------------------- */

static void bw_fini(aks_provider_impl *prov)
{
	if (!prov)
		return;
	bw_config_free(prov);
	free(prov);
}

static int bw_init(const aks_host_api *host, const aks_config *config, aks_provider_impl **out,
                   aks_error **err)
{
	aks_provider_impl *prov = calloc(1, sizeof(*prov));
	if (!prov)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	prov->host = host;
	prov->seccomp_fd = -1;
	int rc = bw_config_read(prov, config, err);
	if (rc != AKS_OK) {
		bw_fini(prov);
		return rc;
	}
	*out = prov;
	return AKS_OK;
}

static const aks_capabilities *bw_instance_capabilities(const aks_provider_impl *prov)
{
	return &prov->caps;
}

static const char *bw_instance_description(const aks_provider_impl *prov)
{
	return prov->description;
}

/* ---- lifecycle ------------------------------------------------------------------------------- */

static int bw_create(aks_provider_impl *prov, const aks_call *call, aks_sandbox_impl **out,
                     aks_error **err)
{
	const aks_host_api *host = prov->host;
	char *base = NULL, *dir = NULL;
	int rc = aks_hostdir_base(host, prov->workdir, &base, err);
	if (rc == AKS_OK)
		rc = aks_hostdir_make(host, base, BW_PREFIX, &dir, err);
	free(base);
	if (rc != AKS_OK)
		return rc;
	rc = aks_hostdir_labels_write(host, dir, call->labels, err);
	if (rc == AKS_OK)
		rc = new_handle(prov, dir, call, out, err);
	if (rc != AKS_OK) {
		if (prov->cgroups) {
			const char *slash = strrchr(dir, '/');
			bw_cgroup_remove(prov->cgroups, slash + 1);
		}
		aks_hostdir_remove(host, BW_NAME, BW_PREFIX, dir);
	}
	free(dir);
	return rc;
}

static int bw_attach(aks_provider_impl *prov, const char *sandbox_id, const aks_call *call,
                     aks_sandbox_impl **out, aks_error **err)
{
	int rc = aks_hostdir_check(prov->host, sandbox_id, err);
	return rc != AKS_OK ? rc : new_handle(prov, sandbox_id, call, out, err);
}

/* Kills what still runs in the sandbox's cgroup and removes it, then the directory; only
 * what create made (aks_hostdir_remove): destroy is idempotent. */
static int bw_destroy(aks_provider_impl *prov, const char *sandbox_id, const aks_call *call,
                      aks_error **err)
{
	(void)call;
	(void)err;
	if (!sandbox_id || !*sandbox_id)
		return AKS_OK;
	const char *slash = strrchr(sandbox_id, '/');
	const char *name = slash ? slash + 1 : sandbox_id;
	if (prov->cgroups && strncmp(name, BW_PREFIX, strlen(BW_PREFIX)) == 0 &&
	    bw_cgroup_remove(prov->cgroups, name) < 0)
		prov->host->log(AKS_LOG_WARNING, BW_NAME, "destroy: cannot remove the cgroup %s",
		                name);
	aks_hostdir_remove(prov->host, BW_NAME, BW_PREFIX, sandbox_id);
	return AKS_OK;
}

static int bw_list_sandboxes(aks_provider_impl *prov, const char *label_key,
                             const char *label_value, const aks_call *call, aks_sandbox_list_fn fn,
                             void *ctx, aks_error **err)
{
	(void)call;
	char *base = NULL;
	int rc = aks_hostdir_base(prov->host, prov->workdir, &base, err);
	if (rc == AKS_OK)
		rc = aks_hostdir_labels_list(prov->host, BW_NAME, BW_PREFIX, base, label_key,
		                             label_value, fn, ctx, err);
	free(base);
	return rc;
}

/* ---- sandbox handle ----------------------------------------------------------------------------
 */

static const char *bw_id(const aks_sandbox_impl *sb)
{
	return sb->dir;
}

/* Stops the handle's agent (and what it runs); the directory stays for a later attach. */
static void bw_close(aks_sandbox_impl *sb)
{
	free_handle(sb);
}

static const aks_sandbox_ops bw_sandbox_ops = {
    AKS_SANDBOX_OPS_INIT,
    .id = bw_id,
    .execute_code = bw_execute_code,
    .execute_command = bw_execute_command,
    .upload_file = bw_upload_file,
    .download_file = bw_download_file,
    .install_packages = NULL,
    .close = bw_close,
};

static const aks_provider_ops bw_provider_ops = {
    AKS_PROVIDER_OPS_INIT,
    .capabilities = &bw_capabilities,
    .init = bw_init,
    .fini = bw_fini,
    .instance_capabilities = bw_instance_capabilities,
    .instance_description = bw_instance_description,
    .create = bw_create,
    .attach = bw_attach,
    .destroy = bw_destroy,
    .sandbox = &bw_sandbox_ops,
    .list_sandboxes = bw_list_sandboxes,
};

AKS_PLUGIN_DEFINE(AKS_PLUGIN_PROVIDER, BW_NAME, BW_VERSION, "Apache-2.0",
                  "confines each sandbox with bubblewrap (namespaces, a read-only system view, "
                  "seccomp, Landlock, cgroups): OS-level isolation without a daemon",
                  bw_config_keys, &bw_provider_ops);
