/*
 * plugins/local_subprocess/local_subprocess.c - the descriptor, the provider
 * instance and the sandbox lifecycle (create, attach, destroy, close).
 *
 * A sandbox is a directory, ak-sandbox-XXXXXX, under `workdir` (or $TMPDIR,
 * or /tmp); its path is the sandbox id. Programs run as plain subprocesses of
 * this host, with NO isolation: this provider is for development and tests.
 * See docs/plugins/local_subprocess.md.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <aksandbox/plugin.h>
#include <aksandbox/provider.h>

#include "aks_agent.h"
#include "aks_hostdir.h"
#include "ls_internal.h"

#ifndef LS_VERSION
#error "LS_VERSION must be defined (the package version)"
#endif

/* ---- descriptor ---------------------------------------------------------------- */

static const char *const ls_languages[] = {"python", "bash", NULL};

/* Honest: no isolation and no policy enforcement, so the core refuses any
 * non-default policy under strict. */
static const aks_capabilities ls_capabilities = {
    .struct_version = AKS_CAPABILITIES_VERSION,
    .struct_size = sizeof(aks_capabilities),
    .isolation = AKS_ISOLATION_NONE,
    .languages = ls_languages,
    .shell = true,
    .files = true,
    .package_install = false,
    .stateful = false,
    .attach = true,
    .provisions = true,
    .attaches_external = false,
    .principal_user = false,
    .policy_network = false,
    .policy_filesystem = false,
    .policy_resources = false,
};

static const aks_config_key ls_config_keys[] = {
    AKS_CONFIG_KEY("workdir", AKS_CONFIG_STRING, false, NULL,
                   "base directory for sandbox directories (created with parents); "
                   "null = $TMPDIR or /tmp"),
    AKS_CONFIG_KEY("python", AKS_CONFIG_STRING, false, "python3",
                   "Python interpreter for language python, looked up in the child's PATH"),
    AKS_CONFIG_KEY("env_passthrough", AKS_CONFIG_STRING_LIST, false, "[]",
                   "host environment variables copied into the child's minimal environment"),
    AKS_CONFIG_KEY("env", AKS_CONFIG_STRING_MAP, false, "{}",
                   "extra environment variables for the child (override everything else)"),
    AKS_CONFIG_KEY("agent", AKS_CONFIG_STRING, false, NULL,
                   "the aksandbox-agent program to run operations through (stateful Python); "
                   "null = the installed one if present, false = none (a program per call)"),
    AKS_CONFIG_END,
};

/* ---- helpers -------------------------------------------------------------------- */

/* An environment variable name: non-empty, no '=' (and no NUL, by C). */
static bool valid_env_name(const char *name)
{
	return name && *name && !strchr(name, '=');
}

static int new_handle(aks_provider_impl *prov, const char *dir, aks_sandbox_impl **out,
                      aks_error **err)
{
	aks_sandbox_impl *sb = calloc(1, sizeof(*sb));
	char **env = ls_env_build(prov, dir);
	if (!sb || !env || !(sb->dir = strdup(dir))) {
		free(sb);
		aks__strv_free(env);
		return prov->host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	sb->prov = prov;
	/* The agent runs in the directory with the sandbox's environment as its own; every
	 * program it starts gets exactly that environment too. */
	aks_agent_session_opts o = {
	    .id = sb->dir, .cwd = sb->dir, .env = (const char *const *)env, .env_clear = true};
	int rc = aks_agent_session_new(prov->agent, &ls_agent_ops, sb, &o, &sb->agent, err);
	aks__strv_free(env);
	if (rc != AKS_OK) {
		free(sb->dir);
		free(sb);
		return rc;
	}
	*out = sb;
	return AKS_OK;
}

/* ---- provider instance -------------------------------------------------------------- */

static void ls_fini(aks_provider_impl *prov)
{
	if (!prov)
		return;
	free(prov->workdir);
	free(prov->python);
	aks_agent_program_free(prov->agent);
	aks__strv_free(prov->env_passthrough);
	aks__strv_free(prov->env);
	free(prov);
}

/*
 * No isolation, but two attacks need not be this easy: a program reading this host's
 * environment (its secrets) through /proc/<host>/environ, or writing forged replies into
 * its descriptors (an MCP server's stdout) through /proc/<host>/fd. Both need the host to
 * be dumpable to a process of the same user; a non-dumpable process's /proc entries belong
 * to root. As root nothing closes them (the programs run as root too, with CAP_SYS_PTRACE):
 * the description says so, and so does `aksandbox check`.
 */
static const char *close_host_proc(aks_provider_impl *prov)
{
	const char *how;
	if (geteuid() == 0)
		how = "; it runs as root, so its programs can read this host's memory, "
		      "environment and descriptors";
	else if (prctl(PR_SET_DUMPABLE, 0) == 0)
		how = "; this host's /proc entries are closed to its programs (not dumpable)";
	else
		how = "; this host's /proc entries could not be closed to its programs";
	if (geteuid() == 0)
		prov->host->log(AKS_LOG_WARNING, LS_NAME, "%s", how + 2);
	return how;
}

/* Checks and copies the validated config block. */
static int read_config(aks_provider_impl *prov, const aks_config *config, aks_error **err)
{
	const aks_host_api *host = prov->host;
	const char *workdir = NULL, *python = NULL, *agent = NULL;
	const char *const *pass = NULL, *const *env = NULL;
	if (host->config_string(config, "workdir", &workdir) != AKS_OK ||
	    host->config_string(config, "python", &python) != AKS_OK ||
	    host->config_list(config, "env_passthrough", &pass) != AKS_OK ||
	    host->config_map(config, "env", &env) != AKS_OK ||
	    host->config_string(config, "agent", &agent) != AKS_OK)
		return host->error_set(
		    err, AKS_ECONFIG, "local_subprocess: the host could not read the config block");
	if (!python)
		python = "python3";
	if (!*python)
		return host->error_set(err, AKS_ECONFIG,
		                       "local_subprocess: python must not be empty");
	for (const char *const *n = pass; n && *n; n++)
		if (!valid_env_name(*n))
			return host->error_set(err, AKS_ECONFIG,
			                       "local_subprocess: env_passthrough: '%s' is not a "
			                       "variable name",
			                       *n);
	for (const char *const *kv = env; kv && kv[0]; kv += 2)
		if (!valid_env_name(kv[0]) || !kv[1])
			return host->error_set(err, AKS_ECONFIG,
			                       "local_subprocess: env: '%s' is not a variable name",
			                       kv[0]);
	/* Not stateful: the agent (and its Python session) lives as long as the host process
	 * that holds the sandbox, so state does not outlive an `aksandbox tool` call or move
	 * between queue workers; it is kept between the calls of one long-lived host. */
	prov->caps = ls_capabilities;
	aks_agent_program_opts ao = {
	    .provider = LS_NAME,
	    .configured = agent,
	    .installed = LS_AGENT_DEFAULT,
	    .per_call = "a new program per call",
	    .python_session = strcmp(python, "python3") == 0,
	    .note = close_host_proc(prov),
	};
	int rc = aks_agent_program_open(host, &ao, &prov->agent, err);
	if (rc != AKS_OK)
		return rc;
	if ((workdir && *workdir && !(prov->workdir = strdup(workdir))) ||
	    !(prov->python = strdup(python)) || !(prov->env_passthrough = aks__strv_dup(pass)) ||
	    !(prov->env = aks__strv_dup(env)))
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	return AKS_OK;
}

static int ls_init(const aks_host_api *host, const aks_config *config, aks_provider_impl **out,
                   aks_error **err)
{
	aks_provider_impl *prov = calloc(1, sizeof(*prov));
	if (!prov)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	prov->host = host;
	int rc = read_config(prov, config, err);
	if (rc != AKS_OK) {
		ls_fini(prov);
		return rc;
	}
	host->log(AKS_LOG_WARNING, LS_NAME,
	          "local_subprocess provides NO isolation: development/test use only");
	*out = prov;
	return AKS_OK;
}

static const aks_capabilities *ls_instance_capabilities(const aks_provider_impl *prov)
{
	return &prov->caps;
}

static const char *ls_instance_description(const aks_provider_impl *prov)
{
	return aks_agent_program_description(prov->agent);
}

/* ---- lifecycle ------------------------------------------------------------------------ */

static int ls_create(aks_provider_impl *prov, const aks_call *call, aks_sandbox_impl **out,
                     aks_error **err)
{
	const aks_host_api *host = prov->host;
	char *base = NULL, *dir = NULL;
	int rc = aks_hostdir_base(host, prov->workdir, &base, err);
	if (rc == AKS_OK)
		rc = aks_hostdir_make(host, base, LS_PREFIX, &dir, err);
	free(base);
	if (rc != AKS_OK)
		return rc;
	rc = aks_hostdir_labels_write(host, dir, call->labels, err);
	if (rc == AKS_OK)
		rc = new_handle(prov, dir, out, err);
	if (rc != AKS_OK)
		aks_hostdir_remove(host, LS_NAME, LS_PREFIX, dir);
	free(dir);
	return rc;
}

static int ls_attach(aks_provider_impl *prov, const char *sandbox_id, const aks_call *call,
                     aks_sandbox_impl **out, aks_error **err)
{
	(void)call;
	int rc = aks_hostdir_check(prov->host, sandbox_id, err);
	return rc != AKS_OK ? rc : new_handle(prov, sandbox_id, out, err);
}

/* Deletes only what create() made (aks_hostdir_remove): destroy is idempotent. */
static int ls_destroy(aks_provider_impl *prov, const char *sandbox_id, const aks_call *call,
                      aks_error **err)
{
	(void)call;
	(void)err;
	aks_hostdir_remove(prov->host, LS_NAME, LS_PREFIX, sandbox_id);
	return AKS_OK;
}

static int ls_list_sandboxes(aks_provider_impl *prov, const char *label_key,
                             const char *label_value, const aks_call *call, aks_sandbox_list_fn fn,
                             void *ctx, aks_error **err)
{
	(void)call;
	char *base = NULL;
	int rc = aks_hostdir_base(prov->host, prov->workdir, &base, err);
	if (rc == AKS_OK)
		rc = aks_hostdir_labels_list(prov->host, LS_NAME, LS_PREFIX, base, label_key,
		                             label_value, fn, ctx, err);
	free(base);
	return rc;
}

/* ---- sandbox handle --------------------------------------------------------------------- */

static const char *ls_id(const aks_sandbox_impl *sb)
{
	return sb->dir;
}

/* Stops the handle's agent (and what it runs); the directory stays for a later attach. */
static void ls_close(aks_sandbox_impl *sb)
{
	if (!sb)
		return;
	aks_agent_session_free(sb->agent);
	free(sb->dir);
	free(sb);
}

static const aks_sandbox_ops ls_sandbox_ops = {
    .struct_version = AKS_SANDBOX_OPS_VERSION,
    .struct_size = sizeof(aks_sandbox_ops),
    .id = ls_id,
    .execute_code = ls_execute_code,
    .execute_command = ls_execute_command,
    .upload_file = ls_upload_file,
    .download_file = ls_download_file,
    .install_packages = NULL,
    .close = ls_close,
};

static const aks_provider_ops ls_provider_ops = {
    .struct_version = AKS_PROVIDER_OPS_VERSION,
    .struct_size = sizeof(aks_provider_ops),
    .capabilities = &ls_capabilities,
    .init = ls_init,
    .fini = ls_fini,
    .instance_capabilities = ls_instance_capabilities,
    .instance_description = ls_instance_description,
    .create = ls_create,
    .attach = ls_attach,
    .destroy = ls_destroy,
    .sandbox = &ls_sandbox_ops,
    .list_sandboxes = ls_list_sandboxes,
};

AKS_PLUGIN_DEFINE(AKS_PLUGIN_PROVIDER, LS_NAME, LS_VERSION, "Apache-2.0",
                  "runs code as local subprocesses in a temporary directory (NO isolation: "
                  "development and tests only)",
                  ls_config_keys, &ls_provider_ops);
