/*
 * plugins/bubblewrap/bw_exec.c - execute_code and execute_command, and the
 * per-call way: one bwrap per call, supervised (plugins/common/aks_proc.h), in the sandbox's
 * cgroup. A timeout or cancellation kills the whole tree: the supervisor kills bwrap and
 * everything under it, and bwrap's pid namespace takes whatever is left with its init.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aks_agent.h"
#include "aks_hostdir.h"
#include "aks_hostrun.h"
#include "bw_internal.h"
#include "bw_seccomp.h"

/* Linux refuses a single argument of 32 pages or more (MAX_ARG_STRLEN), and per call the
 * code travels as one argument (`bash -c <code>`): say so plainly. */
#define BW_MAX_ARG 131071

/* ---- the cgroup ------------------------------------------------------------------------- */

int bw_cgroup_enter(aks_sandbox_impl *sb, int *fds, size_t *n, aks_error **err)
{
	const aks_provider_impl *prov = sb->prov;
	*n = 0;
	if (!prov->cgroups)
		return AKS_OK;
	bw_limits lim = {.cpu = sb->cpu, .memory_mb = sb->memory_mb, .pids = prov->pids_max};
	char why[BW_CGROUP_WHY_SIZE];
	if (bw_cgroup_create(prov->cgroups, sb->cgroup, &lim, why, sizeof(why)) < 0)
		return prov->host->error_set(err, AKS_EPROVISION, "bubblewrap: cgroup: %s", why);
	int rc = bw_cgroup_open_procs(prov->cgroups, sb->cgroup, fds, n);
	if (rc < 0)
		return prov->host->error_set(err, AKS_EPROVISION,
		                             "bubblewrap: cannot enter the cgroup %s: %s",
		                             sb->cgroup, strerror(-rc));
	return AKS_OK;
}

/* ---- running ----------------------------------------------------------------------------- */

/* One supervised bwrap running argv in the sandbox. */
static int run(aks_sandbox_impl *sb, const char *const *argv, const char *what,
               const aks_call *call, aks_result *out, aks_error **err)
{
	const aks_provider_impl *prov = sb->prov;
	const aks_host_api *host = prov->host;
	for (const char *const *a = argv; *a; a++)
		if (strlen(*a) > BW_MAX_ARG)
			return host->error_set(
			    err, AKS_ELIMIT,
			    "the %s is %zu bytes; without the agent bubblewrap "
			    "passes it as one argument, which Linux limits to %d "
			    "bytes",
			    what, strlen(*a), BW_MAX_ARG);
	int rc = aks_hostdir_check(host, sb->dir, err);
	if (rc != AKS_OK)
		return rc;
	const char *agent =
	    aks_agent_program_enabled(prov->agent) ? aks_agent_program_path(prov->agent) : NULL;
	aks_strv cmd = {NULL, 0, 0};
	char **env = bw_env_build(sb);
	if (!env || bw_view_argv(sb, agent, false, argv, &cmd) != AKS_OK) {
		aks__strv_free(env);
		aks__strv_free(cmd.v);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	int join[BW_CGROUP_MAX_FDS];
	size_t njoin = 0;
	int sfd = -1;
	rc = bw_cgroup_enter(sb, join, &njoin, err);
	if (rc == AKS_OK && (sfd = bw_seccomp_reopen(prov->seccomp_fd)) < 0)
		rc = host->error_set(err, AKS_EIO, "bubblewrap: cannot read the seccomp filter: %s",
		                     strerror(-sfd));
	if (rc == AKS_OK) {
		/* (bwrap's own working directory: the workspace on this host, so a sandbox
		 * removed meanwhile fails to start) */
		aks_hostrun_spec spec = {.argv = (const char *const *)cmd.v,
		                         .envp = (const char *const *)env,
		                         .cwd = sb->dir,
		                         .subject = "bwrap",
		                         .provider = BW_NAME,
		                         .pass_fd = sfd,
		                         .join_fds = join,
		                         .n_join = njoin};
		rc = aks_hostrun(host, &spec, call, out, err);
	}
	if (sfd >= 0)
		close(sfd);
	bw_cgroup_close_fds(join, njoin);
	aks__strv_free(env);
	aks__strv_free(cmd.v);
	return rc;
}

/* The interpreter of a language, or NULL for one this provider does not run. */
static const char *interpreter(const aks_sandbox_impl *sb, const char *language)
{
	if (strcmp(language, "python") == 0)
		return sb->prov->python;
	return strcmp(language, "bash") == 0 ? "bash" : NULL;
}

int bw_run_code(aks_sandbox_impl *sb, const char *code, const char *language, const aks_call *call,
                aks_result *out, aks_error **err)
{
	const char *argv[] = {interpreter(sb, language), "-c", code, NULL};
	return run(sb, argv, "code", call, out, err);
}

int bw_run_command(aks_sandbox_impl *sb, const char *command, const aks_call *call, aks_result *out,
                   aks_error **err)
{
	const char *argv[] = {"bash", "-c", command, NULL};
	return run(sb, argv, "command", call, out, err);
}

/* ---- the operations ----------------------------------------------------------------------- */

/* The memory limit's kills so far (-1: no limit, or unknown). */
static int64_t oom_kills(const aks_sandbox_impl *sb)
{
	if (!sb->prov->cgroups || sb->memory_mb <= 0)
		return -1;
	return bw_cgroup_oom_kills(sb->prov->cgroups, sb->cgroup);
}

/* A program the memory limit killed is said to have been, on its result: its exit status
 * alone (137) does not say why. */
static int tell_oom(aks_sandbox_impl *sb, int64_t before, aks_result *out, int rc)
{
	int64_t after = before >= 0 ? oom_kills(sb) : -1;
	if (after > before && out) {
		char notice[160];
		snprintf(notice, sizeof(notice),
		         "the sandbox's memory limit (memory_mb %lld) killed a process of this run",
		         (long long)sb->memory_mb);
		sb->prov->host->result_set_notice(out, notice);
	}
	return rc;
}

int bw_execute_code(aks_sandbox_impl *sb, const char *code, const char *language,
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
		                       "bubblewrap does not support capability: language:%s",
		                       language);
	int rc = aks_hostdir_check(host, sb->dir, err);
	if (rc != AKS_OK)
		return rc;
	int64_t before = oom_kills(sb);
	return tell_oom(sb, before, out,
	                aks_agent_execute_code(sb->agent, code, language, interp, call, out, err));
}

int bw_execute_command(aks_sandbox_impl *sb, const char *command, const aks_call *call,
                       aks_result *out, aks_error **err)
{
	if (!command)
		return sb->prov->host->error_set(err, AKS_EINVAL, "execute_command: no command");
	int rc = aks_hostdir_check(sb->prov->host, sb->dir, err);
	if (rc != AKS_OK)
		return rc;
	int64_t before = oom_kills(sb);
	return tell_oom(sb, before, out,
	                aks_agent_execute_command(sb->agent, command, call, out, err));
}
