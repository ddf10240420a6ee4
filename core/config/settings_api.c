/*
 * core/config/settings_api.c - loading config.yaml, finding it, reading profiles, and
 * the two fail-closed gates every request passes (principal, policy).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/env.h"
#include "config/settings.h"
#include "config/yaml_tree.h"
#include "util/util.h"

extern char **environ;

/* What runs when there is no config file at all: the local_subprocess provider, with the
 * seeds' default broker (thread: a call longer than wait_timeout becomes a task). */
static const char embedded_default[] = "sandbox:\n"
                                       "  enabled: true\n"
                                       "  type: local_subprocess\n"
                                       "  local_subprocess: {}\n";

/*
 * Whether a file found at a default location is ours: it has a `sandbox:` mapping. A client
 * that starts servers in a project's folder (as Claude Code does) must not have that
 * project's own config.yaml taken for ours, turn the sandbox off or stop the server. A file
 * that is not well-formed YAML counts as ours, so its error is reported: whoever meant to
 * configure aksandbox there learns why, rather than getting the next location's config.
 */
static bool is_aksandbox_config(const char *path)
{
	static const char *const sections[] = {"sandbox", NULL};
	aks_node *root = NULL;
	aks_error *e = NULL;
	if (aks__yaml_load_file_sections(path, sections, &root, &e) < 0) {
		aks_error_free(e);
		return true;
	}
	const aks_node *sb =
	    root && root->kind == AKS_NODE_MAPPING ? aks__node_get(root, "sandbox") : NULL;
	bool ours = sb && sb->kind == AKS_NODE_MAPPING;
	aks__node_free(root);
	return ours;
}

/* path (malloc'ed, taken) when it exists and is ours; else NULL, after telling on_skip of a
 * file that exists and is not. */
static char *candidate(char *path, aks_settings_skip_fn on_skip, void *userdata)
{
	if (!path || access(path, F_OK) != 0) {
		free(path);
		return NULL;
	}
	if (is_aksandbox_config(path))
		return path;
	if (on_skip) {
		char *abs = realpath(path, NULL);
		on_skip(userdata, abs ? abs : path);
		free(abs);
	}
	free(path);
	return NULL;
}

AKS_EXPORT char *aks_settings_locate(const char *explicit_path, aks_settings_skip_fn on_skip,
                                     void *userdata)
{
	if (explicit_path)
		return strdup(explicit_path);
	const char *env = getenv("AKSANDBOX_CONFIG");
	if (env && *env)
		return strdup(env);
	char *path = candidate(strdup("config.yaml"), on_skip, userdata);
	if (path)
		return path;
	const char *xdg = getenv("XDG_CONFIG_HOME");
	const char *home = getenv("HOME");
	if (xdg && *xdg) {
		if (asprintf(&path, "%s/aksandbox/config.yaml", xdg) < 0)
			path = NULL;
	} else if (home && *home) {
		if (asprintf(&path, "%s/.config/aksandbox/config.yaml", home) < 0)
			path = NULL;
	}
	if ((path = candidate(path, on_skip, userdata)))
		return path;
	return candidate(strdup("/etc/aksandbox/config.yaml"), on_skip, userdata);
}

static void log_skipped(void *userdata, const char *path)
{
	(void)userdata;
	aks__log(AKS_LOG_WARNING, "config",
	         "ignoring %s: it has no sandbox: mapping, so it is not an aksandbox configuration",
	         path);
}

AKS_EXPORT char *aks_settings_find_file(const char *explicit_path)
{
	return aks_settings_locate(explicit_path, log_skipped, NULL);
}

AKS_EXPORT int aks_settings_load(const char *path, const char *const *envp, aks_settings **out,
                                 aks_error **err)
{
	if (!out)
		return aks__error_set(err, AKS_EINVAL, "aks_settings_load: no output");
	/* Only `sandbox:` is ours: the other sections are parsed, not built. */
	static const char *const sections[] = {"sandbox", NULL};
	aks_node *root = NULL;
	int rc = path ? aks__yaml_load_file_sections(path, sections, &root, err)
	              : aks__yaml_parse(embedded_default, sizeof(embedded_default) - 1,
	                                "<embedded default>", &root, err);
	if (rc < 0)
		return rc;
	rc = aks__config_apply_env(&root, envp ? envp : (const char *const *)environ, err);
	if (rc == AKS_OK)
		rc = aks__settings_from_tree(root, path, out, err);
	aks__node_free(root);
	return rc;
}

AKS_EXPORT const char *aks_settings_get_file(const aks_settings *s)
{
	return s ? s->file : NULL;
}

AKS_EXPORT bool aks_settings_is_enabled(const aks_settings *s)
{
	return s && s->enabled;
}

AKS_EXPORT const char *aks_settings_get_default_profile(const aks_settings *s)
{
	return s ? s->default_profile : NULL;
}

AKS_EXPORT int64_t aks_settings_get_tool_output_max_chars(const aks_settings *s)
{
	return s ? s->tool_output_max_chars : 0;
}

AKS_EXPORT const char *aks_settings_get_broker_flavor(const aks_settings *s)
{
	return s ? s->broker.flavor : NULL;
}

AKS_EXPORT double aks_settings_get_wait_timeout(const aks_settings *s)
{
	return s ? s->broker.wait_timeout : 0;
}

AKS_EXPORT bool aks_settings_agent_allowed(const aks_settings *s, const char *agent)
{
	if (!s || !agent || !s->agents)
		return true; /* no filter, or an anonymous caller */
	for (size_t i = 0; s->agents[i]; i++)
		if (strcmp(s->agents[i], agent) == 0)
			return true;
	return false;
}

AKS_EXPORT aks_resolver *aks_settings_get_resolver(const aks_settings *s)
{
	return s ? s->resolver : NULL;
}

AKS_EXPORT const char *aks_settings_get_resolver_type(const aks_settings *s)
{
	return s && s->resolver_type ? s->resolver_type : "agent";
}

AKS_EXPORT size_t aks_settings_get_profile_count(const aks_settings *s)
{
	return s ? s->profile_count : 0;
}

AKS_EXPORT aks_profile *aks_settings_get_profile(const aks_settings *s, size_t index)
{
	return s && index < s->profile_count ? s->profiles[index] : NULL;
}

static int compare_names(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

AKS_EXPORT int aks_settings_find_profile(const aks_settings *s, const char *name, aks_profile **out,
                                         aks_error **err)
{
	if (!s || !out)
		return aks__error_set(err, AKS_EINVAL,
		                      "aks_settings_find_profile: missing argument");
	if (!s->enabled)
		return aks__error_set(err, AKS_ECONFIG, "sandbox capability is disabled");
	if (!name)
		name = s->default_profile;
	for (size_t i = 0; i < s->profile_count; i++) {
		if (strcmp(s->profiles[i]->name, name) == 0) {
			*out = s->profiles[i];
			return AKS_OK;
		}
	}
	const char **names = calloc(s->profile_count + 1, sizeof(*names));
	if (!names)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	for (size_t i = 0; i < s->profile_count; i++)
		names[i] = s->profiles[i]->name;
	/* Sorted, as the original renders them. */
	qsort(names, s->profile_count, sizeof(*names), compare_names);
	char *list = aks__py_list_repr(names);
	free(names);
	int rc = aks__error_set(err, AKS_ECONFIG,
	                        "unknown sandbox profile '%s'; configured profiles: %s", name,
	                        list ? list : "[]");
	free(list);
	return rc;
}

AKS_EXPORT const char *aks_profile_get_name(const aks_profile *p)
{
	return p ? p->name : NULL;
}

AKS_EXPORT const char *aks_profile_get_type(const aks_profile *p)
{
	return p ? p->type : NULL;
}

AKS_EXPORT int aks_profile_get_scope(const aks_profile *p)
{
	return p ? p->scope : AKS_SCOPE_PER_SESSION;
}

AKS_EXPORT int aks_profile_get_environment(const aks_profile *p)
{
	return p ? p->environment : AKS_ENV_MANAGED;
}

AKS_EXPORT int64_t aks_profile_get_idle_timeout(const aks_profile *p)
{
	return p ? p->idle_timeout : 0;
}

AKS_EXPORT int aks_profile_get_pool_size(const aks_profile *p)
{
	return p && p->environment != AKS_ENV_ATTACHED ? p->pool_size : 0;
}

AKS_EXPORT double aks_profile_get_pool_max_idle(const aks_profile *p)
{
	return p ? p->pool_max_idle : 0;
}

AKS_EXPORT int aks_profile_get_identity_mode(const aks_profile *p)
{
	return p ? p->identity_mode : AKS_IDENTITY_AGENT;
}

AKS_EXPORT const aks_policy *aks_profile_get_policy(const aks_profile *p)
{
	return p ? &p->policy : NULL;
}

AKS_EXPORT const char *aks_profile_get_attach_to(const aks_profile *p)
{
	return p ? p->attach_to : NULL;
}

AKS_EXPORT const char *aks_profile_get_params(const aks_profile *p)
{
	return p ? p->params_json : NULL;
}

AKS_EXPORT aks_provider *aks_profile_get_provider(const aks_profile *p)
{
	return p ? p->provider : NULL;
}

AKS_EXPORT unsigned aks_profile_get_unenforced(const aks_profile *p)
{
	return p ? p->unenforced : 0;
}

AKS_EXPORT int aks_profile_check_policy(aks_profile *p, aks_error **err)
{
	if (!p || !p->provider)
		return aks__error_set(err, AKS_EINVAL, "aks_profile_check_policy: no provider");
	/* Recomputed on every request: the instance decides, and timeout never counts. */
	unsigned mask =
	    aks__policy_unenforced(&p->policy, aks_provider_get_capabilities(p->provider));
	if (!mask)
		return AKS_OK;
	char *dims = aks__dims_repr(mask);
	const char *provider = aks_plugin_get_descriptor(p->plugin)->name;
	int rc = AKS_OK;
	if (p->policy.strict)
		rc = aks__error_set(
		    err, AKS_EPOLICY,
		    "provider '%s' cannot enforce policy dimensions %s (strict); relax the "
		    "policy or set strict=false",
		    provider, dims ? dims : "[]");
	else if (!atomic_exchange(&p->warned, true))
		aks__log(AKS_LOG_WARNING, "policy",
		         "Sandbox provider %s (profile %s) cannot enforce policy dimensions %s; "
		         "proceeding because strict=false",
		         provider, p->name, dims ? dims : "[]");
	free(dims);
	return rc;
}

AKS_EXPORT int aks_profile_check_principal(const aks_profile *p, const aks_principal *principal,
                                           aks_error **err)
{
	if (!p || !p->provider)
		return aks__error_set(err, AKS_EINVAL, "aks_profile_check_principal: no provider");
	if (p->identity_mode != AKS_IDENTITY_USER)
		return AKS_OK;
	if (!aks_provider_get_capabilities(p->provider)->principal_user)
		return aks__error_set(err, AKS_ECAPABILITY,
		                      "%s does not support capability: principal_user",
		                      aks_plugin_get_descriptor(p->plugin)->name);
	/* The caller's principal may be of an older, smaller layout. */
	aks_principal mine;
	int rc = principal ? aks__principal_import(&mine, principal, err) : AKS_OK;
	if (rc < 0)
		return rc;
	if (!principal || mine.mode != AKS_IDENTITY_USER)
		return aks__error_set(
		    err, AKS_EPOLICY,
		    "profile '%s' requires user identity, but the resolver returned an "
		    "agent-mode principal; no user identity is available on the session",
		    p->name);
	return AKS_OK;
}

AKS_EXPORT size_t aks_settings_get_warning_count(const aks_settings *s)
{
	return s ? s->warning_count : 0;
}

AKS_EXPORT const char *aks_settings_get_warning(const aks_settings *s, size_t index)
{
	return s && index < s->warning_count ? s->warnings[index] : NULL;
}

AKS_EXPORT size_t aks_profile_get_inactive_block_count(const aks_profile *p)
{
	return p ? p->inactive_count : 0;
}

AKS_EXPORT const char *aks_profile_get_inactive_block(const aks_profile *p, size_t index,
                                                      int *state, const char **detail)
{
	if (!p || index >= p->inactive_count)
		return NULL;
	if (state)
		*state = p->inactive[index].state;
	if (detail)
		*detail = p->inactive[index].detail;
	return p->inactive[index].name;
}
