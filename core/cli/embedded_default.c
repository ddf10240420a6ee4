/*
 * core/cli/embedded_default.c - the runtime the CLI uses when no config file
 * is given: one profile, `default`, backed by the local_subprocess provider in
 * process, scope per_call, with the seeds' default policy (timeout 120 s).
 *
 * The provider goes through the normal loader (search path, ABI checks) and
 * gets its config block from the schema defaults, exactly as a config file
 * naming `type: local_subprocess` with an empty block would.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define DEFAULT_PROFILE  "default"
#define DEFAULT_PROVIDER "local_subprocess"
/* The principal the CLI acts as (agent mode). */
#define CLI_SUBJECT "aksandbox-cli"

struct cli_runtime {
	cli_profile profile;
	aks_policy policy;
	aks_principal principal;
	aks_config *config; /* must outlive the provider */
};

int cli_runtime_open_default(cli_runtime **out, cli_error *err)
{
	cli_runtime *rt = calloc(1, sizeof(*rt));
	if (!rt)
		return cli_error_set(err, AKS_ENOMEM, "out of memory");
	aks_policy_init(&rt->policy);
	aks_principal_init(&rt->principal, CLI_SUBJECT);
	rt->profile.name = DEFAULT_PROFILE;
	rt->profile.policy = &rt->policy;
	rt->profile.principal = &rt->principal;
	rt->profile.scope = CLI_SCOPE_PER_CALL;
	*out = rt;
	return AKS_OK;
}

/* Loads the plugin and opens the provider the first time it is needed. */
static int open_provider(cli_runtime *rt, cli_error *err)
{
	const aks_plugin *plugin = NULL;
	aks_error *e = NULL;
	int rc;

	if (rt->profile.provider)
		return AKS_OK;
	rc = aks_plugin_load(DEFAULT_PROVIDER, AKS_PLUGIN_PROVIDER, &plugin, &e);
	if (rc < 0)
		return cli_error_take(err, rc, e);
	rc = aks_config_default_block(plugin, &rt->config, &e);
	if (rc < 0)
		return cli_error_take(err, rc, e);
	rc = aks_provider_open(plugin, rt->config, &rt->profile.provider, &e);
	if (rc < 0) {
		rt->profile.provider = NULL;
		return cli_error_take(err, rc, e);
	}
	return AKS_OK;
}

int cli_runtime_get_profile(cli_runtime *rt, const char *name, const cli_profile **out,
                            cli_error *err)
{
	if (name && strcmp(name, DEFAULT_PROFILE) != 0) {
		/* The seeds' wording, so agents see the same text everywhere. */
		return cli_error_set(err, AKS_ECONFIG,
		                     "unknown sandbox profile '%s'; configured profiles: ['%s']",
		                     name, DEFAULT_PROFILE);
	}
	int rc = open_provider(rt, err);
	if (rc < 0)
		return rc;
	*out = &rt->profile;
	return AKS_OK;
}

void cli_runtime_close(cli_runtime *rt)
{
	if (!rt)
		return;
	if (rt->profile.provider)
		aks_provider_close(rt->profile.provider);
	if (rt->config)
		aks_config_free(rt->config);
	free(rt);
}
