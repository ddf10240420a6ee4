/*
 * core/tools/guidance.c - the system-prompt guidance that tells an agent how
 * to use the sandbox tools (reference §3.9), built from the configured
 * profiles. The text lives here once; tests pin the phrases agents and the
 * original's tests rely on ("[Sandbox execution]", "never invent one",
 * "\"notice\"", "environment attached", "NO persistent shell",
 * "cd /app && ./run.sh", "truncated at N characters").
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tools/json.h"
#include "util/util.h"

/* The fixed lines before the profile list, in order. No line may be empty:
 * the guidance joins into a system prompt that must hold no blank line. */
static const char *const head[] = {
    "[Sandbox execution]",
    "You have a sandbox where you can run code you write, run shell commands, and read or "
    "write files in its workspace. Prefer running real code over working results out "
    "yourself, and report the sandbox's actual output.",
    "Available tools:",
    "- run_code(code, language, sandbox_session_id, profile): run code (language defaults to "
    "python); returns stdout, stderr, exit_code.",
    "- run_command(command, sandbox_session_id, profile): run a shell command; returns stdout, "
    "stderr, exit_code.",
    "- write_sandbox_file(path, content, sandbox_session_id, profile): write a text file into "
    "the workspace.",
    "- read_sandbox_file(path, sandbox_session_id, profile): read a text file from the "
    "workspace.",
    "- check_sandbox_task(task_id): poll a long-running execution that returned status "
    "'pending'.",
    "- list_sandbox_sessions(): list the sandbox sessions available to you (id, name, "
    "profile).",
    "- new_sandbox_session(name, profile): create a fresh, empty session with a short "
    "descriptive name (such as \"uv-project\"); returns its sandbox_session_id.",
    "- destroy_sandbox_session(sandbox_session_id): destroy a session and its sandbox.",
    "File paths are relative to the workspace, which is also the directory commands and code "
    "run in; an absolute path is refused.",
    "Every result includes a sandbox_session_id. Sandbox state (files, the workspace) persists "
    "per id: pass the id again to continue where you left off, or omit it to use the default "
    "session.",
    "Session ids are assigned by the system; never invent one. Give each session you create a "
    "name. To return to an earlier environment, find it with list_sandbox_sessions and pass "
    "its id. Check that listing before creating a session, so that you never duplicate an "
    "environment.",
    "If a result contains an \"error\" field, the operation FAILED: report the error to the "
    "user, and never describe a failed or unattempted operation as done.",
    "If a result contains a \"notice\" field (for example, the sandbox was reset after an idle "
    "timeout and its workspace was discarded), tell the user before continuing.",
    "Once a task has finished, check_sandbox_task also returns its bounded outcome under "
    "\"result\" (stdout, stderr, exit_code, error, notice).",
    "Available workload profiles (pass as profile=):",
};

static const char attached_suffix[] =
    ", environment attached (connects to an existing system; never reset or destroyed)";

/* ec2_ssm runs every command through SSM as its own process. The set of such
 * types is read from the configuration alone, so no provider is loaded to
 * render the guidance. */
static const char no_shell_suffix[] =
    ". NO persistent shell: each command runs as its own process, so a working-directory "
    "change or `sudo su` does not carry over to the next command; chain state-dependent steps "
    "in one command, for example cd /app && ./run.sh";

/* What a profile's isolation tier means for the agent, after ", isolation". A profile with
 * none must not be taken for a sandbox: its code runs on the host. */
static const char *isolation_words(const aks_guidance_profile *p)
{
	if (!p->isolation_known)
		return NULL; /* said nowhere rather than guessed */
	if (p->isolation == AKS_ISOLATION_NONE)
		return "none (NOT isolated: code runs directly on its host, with the rights of its "
		       "user)";
	return aks_isolation_name(p->isolation);
}

static bool has_no_persistent_shell(const char *type)
{
	if (!type)
		return false;
	/* The plugin by name, or by a path to its .so. */
	const char *base = strrchr(type, '/');
	base = base ? base + 1 : type;
	return strcmp(type, "ec2_ssm") == 0 || (base != type && strcmp(base, "ec2_ssm.so") == 0);
}

char *aks__tool_guidance(const aks_guidance_profile *profiles, size_t count,
                         const char *default_profile, size_t max_chars)
{
	aks_buf b = AKS_BUF_INIT;
	int rc = AKS_OK;
	for (size_t i = 0; i < sizeof(head) / sizeof(head[0]); i++)
		rc |= aks__buf_printf(&b, "%s\n", head[i]);
	for (size_t i = 0; i < count; i++) {
		const aks_guidance_profile *p = &profiles[i];
		bool is_default =
		    default_profile && p->name && strcmp(p->name, default_profile) == 0;
		const char *isolation = isolation_words(p);
		rc |= aks__buf_printf(&b, "- '%s'%s: provider '%s', scope %s%s%s%s%s\n",
		                      p->name ? p->name : "", is_default ? " (default)" : "",
		                      p->type ? p->type : "", p->scope ? p->scope : "per_session",
		                      isolation ? ", isolation " : "", isolation ? isolation : "",
		                      p->attached ? attached_suffix : "",
		                      has_no_persistent_shell(p->type) ? no_shell_suffix : "");
	}
	if (count == 0)
		rc |= aks__buf_puts(&b, "- (none configured)\n");
	rc |= aks__buf_printf(&b, "stdout/stderr and file reads are truncated at %zu characters.\n",
	                      max_chars);
	rc |= aks__buf_puts(&b, "When output was cut, the result says so: its \"truncated\" field "
	                        "gives the full length in characters of each cut field, of which "
	                        "only the beginning is shown.");
	if (rc != AKS_OK) {
		aks__buf_free(&b);
		return NULL;
	}
	return aks__buf_steal(&b);
}

const char *aks__scope_name(int scope)
{
	switch (scope) {
	case AKS_SCOPE_PER_SESSION:
		return "per_session";
	case AKS_SCOPE_PER_CALL:
		return "per_call";
	case AKS_SCOPE_PER_RUNTIME:
		return "per_runtime";
	}
	return "per_session";
}

char *aks__tool_guidance_from_settings(const aks_settings *settings)
{
	size_t count = aks_settings_get_profile_count(settings);
	aks_guidance_profile *list = calloc(count ? count : 1, sizeof(*list));
	if (!list)
		return NULL;
	for (size_t i = 0; i < count; i++) {
		const aks_profile *p = aks_settings_get_profile(settings, i);
		list[i].name = aks_profile_get_name(p);
		list[i].type = aks_profile_get_type(p);
		list[i].scope = aks__scope_name(aks_profile_get_scope(p));
		list[i].attached = aks_profile_get_environment(p) == AKS_ENV_ATTACHED;
		/* the instance's, once its provider is loaded (a disabled sandbox loads none) */
		const aks_provider *prov = aks_profile_get_provider(p);
		const aks_capabilities *caps = prov ? aks_provider_get_capabilities(prov) : NULL;
		list[i].isolation_known = caps != NULL;
		list[i].isolation = caps ? caps->isolation : 0;
	}
	int64_t max = aks_settings_get_tool_output_max_chars(settings);
	char *text = aks__tool_guidance(list, count, aks_settings_get_default_profile(settings),
	                                max > 0 ? (size_t)max : 0);
	free(list);
	return text;
}
