/*
 * core/cli/runtime.c - the profiles the CLI runs on: config.yaml's sandbox:
 * block (from -c FILE, $AKSANDBOX_CONFIG or the default locations; see
 * cli_find_config), or, when there is no file at all, the embedded
 * default: one profile, `default`, the local_subprocess provider in process.
 *
 * Every request passes the same gates as in any other host: the principal
 * gate (the configured resolver decides who the CLI acts as) and the policy
 * gate (strict profiles whose provider cannot enforce their policy are
 * refused; strict: false warns once).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* The agent name the CLI resolves its principal as. */
#define CLI_AGENT "aksandbox-cli"

const char *cli_config_path;

struct cli_runtime {
	aks_settings *settings;
	aks_runtime *runtime; /* opened with the first profile */
	cli_profile profile;
	aks_resolved_principal *principal;
};

int cli_runtime_open(cli_runtime **out, cli_error *err)
{
	cli_runtime *rt = calloc(1, sizeof(*rt));
	if (!rt)
		return cli_error_set(err, AKS_ENOMEM, "out of memory");
	char *file = cli_find_config();
	aks_error *e = NULL;
	int rc = aks_settings_load(file, NULL, &rt->settings, &e);
	free(file);
	if (rc < 0) {
		free(rt);
		return cli_error_take(err, rc, e);
	}
	*out = rt;
	return AKS_OK;
}

int cli_runtime_get_profile(cli_runtime *rt, const char *name, const cli_profile **out,
                            cli_error *err)
{
	aks_profile *profile = NULL;
	aks_error *e = NULL;
	int rc = aks_settings_find_profile(rt->settings, name, &profile, &e);
	if (rc < 0)
		return cli_error_take(err, rc, e);
	aks_resolve_request request;
	aks_resolve_request_init(&request, "", CLI_AGENT, NULL);
	aks_resolved_principal_free(rt->principal);
	rt->principal = NULL;
	rc = aks_resolver_resolve(aks_settings_get_resolver(rt->settings), &request, &rt->principal,
	                          &e);
	if (rc == AKS_OK)
		rc = aks_profile_check_principal(profile, aks_resolved_principal_get(rt->principal),
		                                 &e);
	if (rc == AKS_OK)
		rc = aks_profile_check_policy(profile, &e);
	if (rc < 0)
		return cli_error_take(err, rc, e);
	rt->profile.name = aks_profile_get_name(profile);
	rt->profile.provider = aks_profile_get_provider(profile);
	rt->profile.policy = aks_profile_get_policy(profile);
	rt->profile.principal = aks_resolved_principal_get(rt->principal);
	rt->profile.scope = CLI_SCOPE_PER_CALL;
	rt->profile.profile = profile;
	if (!rt->runtime && aks_settings_is_enabled(rt->settings) &&
	    aks_runtime_open(rt->settings, NULL, &rt->runtime, &e) < 0) {
		cli_warn("warning: the sandbox is not claimed in the state store (%s): if this "
		         "process is killed, `aksandbox gc` cannot find it",
		         aks_error_message(e));
		aks_error_free(e);
		e = NULL;
	}
	rt->profile.runtime = rt->runtime;
	*out = &rt->profile;
	return AKS_OK;
}

void cli_runtime_close(cli_runtime *rt)
{
	if (!rt)
		return;
	aks_resolved_principal_free(rt->principal);
	aks_runtime_close(rt->runtime);
	aks_settings_free(rt->settings);
	free(rt);
}
