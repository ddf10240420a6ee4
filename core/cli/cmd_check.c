/*
 * core/cli/cmd_check.c - `aksandbox check [-c FILE] [--json]`: loads the
 * configuration as any host would (every error with its location) and
 * reports, for each profile, the plugin and its file, the isolation tier, and
 * for each policy dimension whether it is enforced, refused (strict) or only
 * warned about (strict: false), plus the identity rule. Exits 1 when the
 * configuration does not load or any profile would be refused.
 *
 * The report is built once as JSON; the text form is rendered from it, so the
 * two cannot disagree.
 */
#include "config.h"

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "cli.h"

static const char *scope_name(int scope)
{
	return scope == AKS_SCOPE_PER_CALL      ? "per_call"
	       : scope == AKS_SCOPE_PER_RUNTIME ? "per_runtime"
	                                        : "per_session";
}

/*
 * What backs an "enforced": the proof aksandbox-plugin-check --record left for this
 * instance on this machine ("proved", "disproved", "not_verified", with its date), or only
 * the plugin's word ("declared").
 */
static void add_proof(struct json_object *d, const aks_provider *prov, const char *check)
{
	static const char *const words[] = {"declared", "proved", "disproved", "not_verified"};
	int64_t at = 0;
	int proof = aks_provider_get_proof(prov, check, &at);
	json_object_object_add(d, "proof", json_object_new_string(words[proof]));
	if (proof != AKS_PROOF_NONE) {
		char day[32] = "";
		time_t t = (time_t)at;
		struct tm tm;
		if (gmtime_r(&t, &tm))
			strftime(day, sizeof(day), "%Y-%m-%d", &tm);
		json_object_object_add(d, "proof_date", json_object_new_string(day));
	}
}

/* One policy dimension: {value, status[, proof, proof_date]}. A declaration that
 * aksandbox-plugin-check found false is no enforcement: it goes into `disproved`, and the
 * profile is not ok (the host itself still goes by the declaration). */
struct verdict {
	struct json_object *refusals, *disproved;
};

static struct json_object *dimension(const char *value, bool set, bool enforceable, bool strict,
                                     struct verdict *v, const char *name, const aks_provider *prov,
                                     const char *check)
{
	struct json_object *d = json_object_new_object();
	json_object_object_add(d, "value", json_object_new_string(value));
	if (set && enforceable)
		add_proof(d, prov, check);
	struct json_object *proof = json_object_object_get(d, "proof");
	bool disproved = proof && !strcmp(json_object_get_string(proof), "disproved");
	const char *status = !set                        ? "default"
	                     : enforceable && !disproved ? "enforced"
	                     : disproved                 ? "disproved"
	                     : strict                    ? "refused"
	                                                 : "warned";
	json_object_object_add(d, "status", json_object_new_string(status));
	if (set && !enforceable && strict)
		json_object_array_add(v->refusals, json_object_new_string(name));
	if (disproved)
		json_object_array_add(v->disproved, json_object_new_string(name));
	return d;
}

static char *join_list(const char *const *items)
{
	size_t len = 1;
	for (size_t i = 0; items && items[i]; i++)
		len += strlen(items[i]) + 2;
	char *s = calloc(1, len);
	for (size_t i = 0; s && items && items[i]; i++) {
		if (i)
			strcat(s, ", ");
		strcat(s, items[i]);
	}
	return s;
}

/* [{"name": "docker", "state": "valid"|"unchecked"|"invalid", "detail": ...}] */
static struct json_object *inactive_report(const aks_profile *p)
{
	static const char *const states[] = {"valid", "unchecked", "invalid"};
	struct json_object *a = json_object_new_array();
	for (size_t i = 0; i < aks_profile_get_inactive_block_count(p); i++) {
		int state = 0;
		const char *detail = NULL;
		const char *name = aks_profile_get_inactive_block(p, i, &state, &detail);
		struct json_object *b = json_object_new_object();
		json_object_object_add(b, "name", json_object_new_string(name));
		json_object_object_add(
		    b, "state",
		    json_object_new_string(state >= 0 && state < 3 ? states[state] : "?"));
		json_object_object_add(b, "detail", json_object_new_string(detail ? detail : ""));
		json_object_array_add(a, b);
	}
	return a;
}

static struct json_object *profile_report(const aks_settings *settings, aks_profile *p)
{
	struct json_object *o = json_object_new_object();
	struct json_object *refusals = json_object_new_array();
	struct verdict v = {refusals, json_object_new_array()};
	const aks_provider *prov = aks_profile_get_provider(p);
	const aks_plugin *plugin = aks_provider_get_plugin(prov);
	const aks_plugin_descriptor *d = aks_plugin_get_descriptor(plugin);
	const aks_capabilities *caps = aks_provider_get_capabilities(prov);
	const aks_policy *pol = aks_profile_get_policy(p);
	char buf[256];

	json_object_object_add(o, "name", json_object_new_string(aks_profile_get_name(p)));
	json_object_object_add(
	    o, "default",
	    json_object_new_boolean(
	        !strcmp(aks_profile_get_name(p), aks_settings_get_default_profile(settings))));
	json_object_object_add(o, "type", json_object_new_string(aks_profile_get_type(p)));
	json_object_object_add(o, "plugin", json_object_new_string(d->name));
	json_object_object_add(o, "version", json_object_new_string(d->version));
	json_object_object_add(o, "file", json_object_new_string(aks_plugin_get_file(plugin)));
	struct json_object *can = json_object_new_array();
	for (const char *const *l = caps->languages; l && *l; l++)
		json_object_array_add(can, json_object_new_string(*l));
	json_object_object_add(o, "languages", can);
	can = json_object_new_array();
	const struct {
		const char *name;
		bool on;
	} flags[] = {{"shell", caps->shell},
	             {"files", caps->files},
	             {"package_install", caps->package_install},
	             {"stateful", caps->stateful},
	             {"attach", caps->attach}};
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		if (flags[i].on)
			json_object_array_add(can, json_object_new_string(flags[i].name));
	json_object_object_add(o, "capabilities", can);
	const char *runs = aks_provider_get_description(prov);
	if (*runs)
		json_object_object_add(o, "runs", json_object_new_string(runs));
	json_object_object_add(o, "isolation",
	                       json_object_new_string(aks_isolation_name(caps->isolation)));
	json_object_object_add(o, "scope",
	                       json_object_new_string(scope_name(aks_profile_get_scope(p))));
	json_object_object_add(
	    o, "environment",
	    json_object_new_string(aks_profile_get_environment(p) == AKS_ENV_ATTACHED ? "attached"
	                                                                              : "managed"));
	if (aks_profile_get_attach_to(p))
		json_object_object_add(o, "attach_to",
		                       json_object_new_string(aks_profile_get_attach_to(p)));
	json_object_object_add(o, "idle_timeout",
	                       json_object_new_int64(aks_profile_get_idle_timeout(p)));
	if (aks_profile_get_pool_size(p) > 0) {
		struct json_object *pool = json_object_new_object();
		json_object_object_add(pool, "size",
		                       json_object_new_int(aks_profile_get_pool_size(p)));
		json_object_object_add(pool, "max_idle",
		                       json_object_new_double(aks_profile_get_pool_max_idle(p)));
		json_object_object_add(o, "pool", pool);
	}

	struct json_object *policy = json_object_new_object();
	static const char *const egress[] = {"allow", "deny", "allowlist"};
	const char *eg = pol->network_egress < 3 ? egress[pol->network_egress] : "?";
	char *allow = join_list(pol->network_allow);
	if (pol->network_egress == AKS_EGRESS_ALLOWLIST && allow && *allow)
		snprintf(buf, sizeof(buf), "allowlist [%s]", allow);
	else
		snprintf(buf, sizeof(buf), "%s", eg);
	free(allow);
	/* An allowlist needs more than deny: the flag a table too old to hold reads as false. */
	bool allowlist = caps->struct_size >=
	                     offsetof(aks_capabilities, policy_network_allowlist) + sizeof(bool) &&
	                 caps->policy_network_allowlist;
	bool network =
	    caps->policy_network && (pol->network_egress != AKS_EGRESS_ALLOWLIST || allowlist);
	struct json_object *egress_dim =
	    dimension(buf, pol->network_egress != AKS_EGRESS_ALLOW, network, pol->strict, &v,
	              "network_egress", prov, "policy_network");
	/* How an allowlist is enforced: the agent's proxy with the host deciding, or the
	 * backend's own network rules. */
	if (pol->network_egress == AKS_EGRESS_ALLOWLIST && allowlist)
		json_object_object_add(
		    egress_dim, "mechanism",
		    json_object_new_string(caps->struct_size >=
		                                       offsetof(aks_capabilities, egress_proxy) +
		                                           sizeof(bool) &&
		                                   caps->egress_proxy
		                               ? "host proxy"
		                               : "provider"));
	json_object_object_add(policy, "network_egress", egress_dim);
	char *rd = join_list(pol->fs_allow_read), *wr = join_list(pol->fs_allow_write);
	bool fs = (rd && *rd) || (wr && *wr);
	snprintf(buf, sizeof(buf), fs ? "read [%s], write [%s]" : "provider default", rd ? rd : "",
	         wr ? wr : "");
	free(rd);
	free(wr);
	json_object_object_add(policy, "filesystem",
	                       dimension(buf, fs, caps->policy_filesystem, pol->strict, &v,
	                                 "filesystem", prov, "policy_filesystem"));
	bool res = pol->cpu > 0 || pol->memory_mb > 0;
	if (res)
		snprintf(buf, sizeof(buf), "cpu %s%g, memory %s%lld MB",
		         pol->cpu > 0 ? "" : "unset ", pol->cpu, pol->memory_mb > 0 ? "" : "unset ",
		         (long long)pol->memory_mb);
	else
		snprintf(buf, sizeof(buf), "unlimited");
	json_object_object_add(policy, "resources",
	                       dimension(buf, res, caps->policy_resources, pol->strict, &v,
	                                 "resources", prov, "policy_resources"));
	snprintf(buf, sizeof(buf), "%g s", pol->timeout);
	struct json_object *timeout = json_object_new_object();
	json_object_object_add(timeout, "value", json_object_new_string(buf));
	json_object_object_add(timeout, "status", json_object_new_string("enforced"));
	json_object_object_add(policy, "timeout", timeout);
	json_object_object_add(policy, "strict", json_object_new_boolean(pol->strict));
	json_object_object_add(o, "policy", policy);

	/* The identity rule: user mode needs a provider that enforces it and a
	 * resolver that can produce a user principal. */
	struct json_object *identity = json_object_new_object();
	bool user = aks_profile_get_identity_mode(p) == AKS_IDENTITY_USER;
	const char *status = "agent", *reason = NULL;
	if (user && !caps->principal_user) {
		status = "refused";
		reason = "the provider does not support user identity (principal_user)";
	} else if (user && !strcmp(aks_settings_get_resolver_type(settings), "agent")) {
		status = "refused";
		reason = "the built-in agent resolver never returns a user principal; configure "
		         "sandbox.principal_resolver";
	} else if (user) {
		status = "per request";
		reason = "each call needs a verified user identity from the resolver";
	}
	json_object_object_add(identity, "mode", json_object_new_string(user ? "user" : "agent"));
	json_object_object_add(identity, "status", json_object_new_string(status));
	if (reason)
		json_object_object_add(identity, "reason", json_object_new_string(reason));
	if (!strcmp(status, "refused"))
		json_object_array_add(refusals, json_object_new_string("identity"));
	json_object_object_add(o, "identity", identity);

	json_object_object_add(o, "inactive_blocks", inactive_report(p));
	json_object_object_add(o, "ok",
	                       json_object_new_boolean(json_object_array_length(refusals) == 0 &&
	                                               json_object_array_length(v.disproved) == 0));
	json_object_object_add(o, "refused", refusals);
	json_object_object_add(o, "disproved", v.disproved);
	return o;
}

static struct json_object *build_report(const aks_settings *s)
{
	struct json_object *r = json_object_new_object();
	const char *file = aks_settings_get_file(s);
	json_object_object_add(r, "config", file ? json_object_new_string(file) : NULL);
	json_object_object_add(r, "enabled", json_object_new_boolean(aks_settings_is_enabled(s)));
	json_object_object_add(r, "principal_resolver",
	                       json_object_new_string(aks_settings_get_resolver_type(s)));
	json_object_object_add(r, "default_profile",
	                       json_object_new_string(aks_settings_get_default_profile(s)));
	json_object_object_add(r, "broker_flavor",
	                       json_object_new_string(aks_settings_get_broker_flavor(s)));
	struct json_object *profiles = json_object_new_array();
	bool ok = true, default_found = aks_settings_get_profile_count(s) == 0;
	for (size_t i = 0; i < aks_settings_get_profile_count(s); i++) {
		aks_profile *p = aks_settings_get_profile(s, i);
		default_found |=
		    !strcmp(aks_profile_get_name(p), aks_settings_get_default_profile(s));
		if (!aks_settings_is_enabled(s)) {
			struct json_object *o = json_object_new_object();
			json_object_object_add(o, "name",
			                       json_object_new_string(aks_profile_get_name(p)));
			json_object_object_add(o, "type",
			                       json_object_new_string(aks_profile_get_type(p)));
			json_object_object_add(o, "inactive_blocks", inactive_report(p));
			json_object_array_add(profiles, o);
			continue;
		}
		struct json_object *o = profile_report(s, p);
		ok = ok && json_object_get_boolean(json_object_object_get(o, "ok"));
		json_object_array_add(profiles, o);
	}
	json_object_object_add(r, "profiles", profiles);
	struct json_object *warnings = json_object_new_array();
	for (size_t i = 0; i < aks_settings_get_warning_count(s); i++)
		json_object_array_add(warnings,
		                      json_object_new_string(aks_settings_get_warning(s, i)));
	if (!default_found) {
		char msg[512];
		snprintf(msg, sizeof(msg),
		         "default_profile '%s' is not a configured profile: calls that name no "
		         "profile will fail",
		         aks_settings_get_default_profile(s));
		json_object_array_add(warnings, json_object_new_string(msg));
	}
	json_object_object_add(r, "warnings", warnings);
	json_object_object_add(r, "ok", json_object_new_boolean(ok));
	return r;
}

static const char *str(struct json_object *o, const char *key)
{
	struct json_object *v = json_object_object_get(o, key);
	return v ? json_object_get_string(v) : "";
}

/* "  languages    python, bash" from a profile's array of strings. */
static void print_list(struct json_object *p, const char *name)
{
	struct json_object *a = json_object_object_get(p, name);
	printf("  %-12s ", name);
	for (size_t i = 0; i < json_object_array_length(a); i++)
		printf("%s%s", i ? ", " : "",
		       json_object_get_string(json_object_array_get_idx(a, i)));
	printf("%s\n", json_object_array_length(a) ? "" : "none");
}

static void print_dimension(struct json_object *policy, const char *name)
{
	struct json_object *d = json_object_object_get(policy, name);
	const char *status = str(d, "status");
	const char *proof = str(d, "proof");
	char note[256];
	if (!strcmp(name, "timeout"))
		snprintf(note, sizeof(note), "enforced (always)");
	else if (!strcmp(status, "default"))
		snprintf(note, sizeof(note), "not set");
	else if (!strcmp(status, "enforced") && !strcmp(proof, "proved"))
		snprintf(note, sizeof(note),
		         "enforced, proved here by aksandbox-plugin-check on %s",
		         str(d, "proof_date"));
	else if (!strcmp(status, "enforced") && !strcmp(proof, "not_verified"))
		snprintf(note, sizeof(note),
		         "enforced as the plugin declares; aksandbox-plugin-check could not verify "
		         "it here (%s)",
		         str(d, "proof_date"));
	else if (!strcmp(status, "enforced"))
		snprintf(note, sizeof(note),
		         "enforced as the plugin declares (not proved here: "
		         "aksandbox-plugin-check --record)");
	else if (!strcmp(status, "disproved"))
		snprintf(
		    note, sizeof(note),
		    "DISPROVED: the plugin declares it, but aksandbox-plugin-check found it not "
		    "enforced here on %s",
		    str(d, "proof_date"));
	else if (!strcmp(status, "refused"))
		snprintf(note, sizeof(note), "REFUSED: the provider cannot enforce it (strict)");
	else
		snprintf(note, sizeof(note),
		         "NOT ENFORCED: warned once and allowed (strict: false)");
	const char *mechanism = str(d, "mechanism");
	if (!strcmp(mechanism, "host proxy") && !strncmp(note, "enforced", 8)) {
		/* "enforced (host proxy) as the plugin declares ..." */
		static const char how[] = " (host proxy)";
		size_t len = strlen(note);
		if (len + sizeof(how) - 1 < sizeof(note)) {
			memmove(note + 8 + sizeof(how) - 1, note + 8, len - 8 + 1);
			memcpy(note + 8, how, sizeof(how) - 1);
		}
	}
	printf("    %-15s %-32s %s\n", name, str(d, "value"), note);
}

/* "  inactive     docker: valid for /usr/lib/.../docker.so" per inactive block. */
static void print_inactive(struct json_object *p)
{
	struct json_object *a = json_object_object_get(p, "inactive_blocks");
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		struct json_object *b = json_object_array_get_idx(a, i);
		const char *state = str(b, "state");
		printf("  inactive     %s block (the type does not use it): %s%s\n", str(b, "name"),
		       !strcmp(state, "valid")       ? "valid for "
		       : !strcmp(state, "unchecked") ? "not checked: "
		                                     : "INVALID: ",
		       str(b, "detail"));
	}
}

static void print_text(struct json_object *r)
{
	const char *config = str(r, "config");
	printf("config              %s\n", *config ? config : "(none found: the embedded default)");
	printf("sandbox             %s\n",
	       json_object_get_boolean(json_object_object_get(r, "enabled"))
	           ? "enabled"
	           : "disabled (inert: no plugin is loaded, no tool is offered)");
	printf("principal resolver  %s\n", str(r, "principal_resolver"));
	printf("broker              %s\n", str(r, "broker_flavor"));
	printf("default profile     %s\n", str(r, "default_profile"));
	struct json_object *profiles = json_object_object_get(r, "profiles");
	if (json_object_array_length(profiles) == 0)
		printf("\nno profiles configured\n");
	for (size_t i = 0; i < json_object_array_length(profiles); i++) {
		struct json_object *p = json_object_array_get_idx(profiles, i);
		printf("\nprofile '%s'%s\n", str(p, "name"),
		       json_object_get_boolean(json_object_object_get(p, "default")) ? " (default)"
		                                                                     : "");
		if (!json_object_object_get(p, "plugin")) {
			printf("  type         %s (not loaded: the sandbox is disabled)\n",
			       str(p, "type"));
			print_inactive(p);
			continue;
		}
		printf("  plugin       %s %s (%s)\n", str(p, "plugin"), str(p, "version"),
		       str(p, "file"));
		printf("  isolation    %s\n", str(p, "isolation"));
		print_list(p, "languages");
		print_list(p, "capabilities");
		if (json_object_object_get(p, "runs"))
			printf("  runs         %s\n", str(p, "runs"));
		printf("  lifecycle    scope %s, environment %s%s%s, idle_timeout %s s\n",
		       str(p, "scope"), str(p, "environment"),
		       json_object_object_get(p, "attach_to") ? ", attach_to " : "",
		       str(p, "attach_to"), str(p, "idle_timeout"));
		struct json_object *pool = json_object_object_get(p, "pool");
		if (pool)
			printf(
			    "  pool         %s sandboxes created ahead, replaced after %g s idle "
			    "(filled by `aksandbox pool` and `aksandbox mcp`)\n",
			    str(pool, "size"),
			    json_object_get_double(json_object_object_get(pool, "max_idle")));
		struct json_object *id = json_object_object_get(p, "identity");
		printf("  identity     %s", str(id, "mode"));
		if (json_object_object_get(id, "reason"))
			printf(": %s%s", !strcmp(str(id, "status"), "refused") ? "REFUSED: " : "",
			       str(id, "reason"));
		printf("\n  policy (strict: %s)\n",
		       json_object_get_boolean(
		           json_object_object_get(json_object_object_get(p, "policy"), "strict"))
		           ? "true"
		           : "false");
		struct json_object *policy = json_object_object_get(p, "policy");
		print_dimension(policy, "network_egress");
		print_dimension(policy, "filesystem");
		print_dimension(policy, "resources");
		print_dimension(policy, "timeout");
		print_inactive(p);
		struct json_object *refused = json_object_object_get(p, "refused");
		printf("  verdict      %s\n",
		       json_object_get_boolean(json_object_object_get(p, "ok")) ? "ok"
		       : json_object_array_length(refused)
		           ? "REFUSED: requests on this profile fail"
		           : "DISPROVED: the plugin does not enforce here what it declares; the "
		             "host goes by its word and runs requests: do not use this profile");
	}
	struct json_object *warnings = json_object_object_get(r, "warnings");
	for (size_t i = 0; i < json_object_array_length(warnings); i++)
		printf("\nwarning: %s\n",
		       json_object_get_string(json_object_array_get_idx(warnings, i)));
}

int cli_cmd_check(int argc, char *argv[])
{
	static const struct option options[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	bool json = false;
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:c:h", options, NULL)) != -1) {
		switch (c) {
		case 'c':
			cli_config_path = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			cli_print_help(argv[0]);
			return CLI_EXIT_OK;
		default:
			return cli_option_error(argc, argv, c);
		}
	}
	if (optind < argc) {
		cli_warn("check: unexpected argument '%s'", argv[optind]);
		cli_usage_hint("check");
		return CLI_EXIT_USAGE;
	}
	char *file = cli_find_config();
	aks_settings *settings = NULL;
	aks_error *err = NULL;
	int rc = aks_settings_load(file, NULL, &settings, &err);
	struct json_object *report;
	if (rc < 0) {
		report = json_object_new_object();
		json_object_object_add(report, "config",
		                       file ? json_object_new_string(file) : NULL);
		json_object_object_add(report, "ok", json_object_new_boolean(false));
		json_object_object_add(report, "error",
		                       json_object_new_string(aks_error_message(err)));
	} else {
		report = build_report(settings);
	}
	bool ok = json_object_get_boolean(json_object_object_get(report, "ok"));
	if (json)
		printf("%s\n", json_object_to_json_string_ext(report, JSON_C_TO_STRING_PRETTY |
		                                                          JSON_C_TO_STRING_SPACED));
	else if (rc < 0)
		cli_warn("%s", aks_error_message(err));
	else
		print_text(report);
	json_object_put(report);
	aks_error_free(err);
	aks_settings_free(settings);
	free(file);
	return ok ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}
