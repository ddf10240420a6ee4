/*
 * plugins/local_subprocess/ls_exec.c - execute_code and execute_command.
 *
 * Each execution is one supervised program (plugins/common/aks_proc.h): its
 * whole process tree is killed on timeout or cancellation, and whatever is
 * left of it when it exits is killed too, so no execution leaves a daemon
 * behind. The child gets a minimal environment, not the host's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "aks_agent.h"
#include "aks_hostdir.h"
#include "aks_hostrun.h"
#include "ls_internal.h"

/* Linux refuses a single argument of 32 pages or more (MAX_ARG_STRLEN), and
 * the code travels as one argument (`bash -c <code>`). Say so plainly instead
 * of reporting "argument list too long" from the exec. */
#define LS_MAX_ARG 131071

char **ls_env_build(const aks_provider_impl *prov, const char *dir)
{
	return aks_hostrun_env(dir, dir, dir, prov->env_passthrough, prov->env);
}

/* One supervised program per call: the per-call path (no agent, or one that cannot run). */
static int run(aks_sandbox_impl *sb, const char *const *argv, const char *what,
               const aks_call *call, aks_result *out, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	if (strlen(argv[2]) > LS_MAX_ARG)
		return host->error_set(err, AKS_ELIMIT,
		                       "the %s is %zu bytes; local_subprocess passes it as one "
		                       "argument, which Linux limits to %d bytes",
		                       what, strlen(argv[2]), LS_MAX_ARG);
	char **env = ls_env_build(sb->prov, sb->dir);
	if (!env)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	aks_hostrun_spec spec = {.argv = argv,
	                         .envp = (const char *const *)env,
	                         .cwd = sb->dir,
	                         .subject = "subprocess",
	                         .provider = LS_NAME};
	int rc = aks_hostrun(host, &spec, call, out, err);
	aks__strv_free(env);
	return rc;
}

/* The interpreter of a language, or NULL for one this provider does not run. */
static const char *interpreter(const aks_sandbox_impl *sb, const char *language)
{
	if (strcmp(language, "python") == 0)
		return sb->prov->python;
	return strcmp(language, "bash") == 0 ? "bash" : NULL;
}

static int gone_or_ok(aks_sandbox_impl *sb, aks_error **err)
{
	return aks_hostdir_check(sb->prov->host, sb->dir, err);
}

int ls_run_code(aks_sandbox_impl *sb, const char *code, const char *language, const aks_call *call,
                aks_result *out, aks_error **err)
{
	const char *argv[] = {interpreter(sb, language), "-c", code, NULL};
	return run(sb, argv, "code", call, out, err);
}

int ls_run_command(aks_sandbox_impl *sb, const char *command, const aks_call *call, aks_result *out,
                   aks_error **err)
{
	const char *argv[] = {"bash", "-c", command, NULL};
	return run(sb, argv, "command", call, out, err);
}

int ls_execute_code(aks_sandbox_impl *sb, const char *code, const char *language,
                    const aks_call *call, aks_result *out, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	if (!language)
		language = "python";
	if (!code)
		return host->error_set(err, AKS_EINVAL, "execute_code: no code");
	const char *interp = interpreter(sb, language);
	if (!interp)
		return host->error_set(err, AKS_ECAPABILITY,
		                       "local_subprocess does not support capability: language:%s",
		                       language);
	int rc = gone_or_ok(sb, err);
	return rc != AKS_OK
	           ? rc
	           : aks_agent_execute_code(sb->agent, code, language, interp, call, out, err);
}

int ls_execute_command(aks_sandbox_impl *sb, const char *command, const aks_call *call,
                       aks_result *out, aks_error **err)
{
	if (!command)
		return sb->prov->host->error_set(err, AKS_EINVAL, "execute_command: no command");
	int rc = gone_or_ok(sb, err);
	return rc != AKS_OK ? rc : aks_agent_execute_command(sb->agent, command, call, out, err);
}
