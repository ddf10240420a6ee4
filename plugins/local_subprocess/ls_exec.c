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
#include "aks_proc.h"
#include "ls_internal.h"

/* Linux refuses a single argument of 32 pages or more (MAX_ARG_STRLEN), and
 * the code travels as one argument (`bash -c <code>`). Say so plainly instead
 * of reporting "argument list too long" from the exec. */
#define LS_MAX_ARG 131071

/* ---- the child's environment ------------------------------------------------------ */

/* Sets name=value, replacing an earlier value of the same name. */
static int env_set(aks_strv *e, const char *name, const char *value)
{
	size_t nl = strlen(name), vl = strlen(value);
	char *entry = malloc(nl + 1 + vl + 1);
	if (!entry)
		return -1;
	memcpy(entry, name, nl);
	entry[nl] = '=';
	memcpy(entry + nl + 1, value, vl + 1);
	for (size_t i = 0; i < e->n; i++)
		if (strncmp(e->v[i], name, nl) == 0 && e->v[i][nl] == '=') {
			free(e->v[i]);
			e->v[i] = entry;
			return 0;
		}
	int rc = aks__strv_push(e, entry);
	free(entry);
	return rc == AKS_OK ? 0 : -1;
}

/* Defaults, then the host variables named in env_passthrough, then `env`. */
static int build_env(const aks_provider_impl *prov, const char *dir, aks_strv *e)
{
	if (env_set(e, "PATH", "/usr/local/bin:/usr/bin:/bin") < 0 || env_set(e, "HOME", dir) < 0 ||
	    env_set(e, "TMPDIR", dir) < 0 || env_set(e, "LANG", "C.UTF-8") < 0 ||
	    env_set(e, "PWD", dir) < 0)
		return -1;
	for (char *const *n = prov->env_passthrough; n && *n; n++) {
		const char *v = getenv(*n);
		if (v && env_set(e, *n, v) < 0)
			return -1;
	}
	for (char *const *kv = prov->env; kv && kv[0]; kv += 2)
		if (env_set(e, kv[0], kv[1]) < 0)
			return -1;
	return 0;
}

char **ls_env_build(const aks_provider_impl *prov, const char *dir)
{
	aks_strv e = {NULL, 0, 0};
	if (build_env(prov, dir, &e) < 0) {
		aks__strv_free(e.v);
		return NULL;
	}
	return e.v;
}

/* ---- running ------------------------------------------------------------------------- */

typedef struct run_ctx {
	const aks_host_api *host;
	const aks_call *call;
	aks_result *out;
	aks_error **err;
	int write_rc;
} run_ctx;

static int on_output(void *ctx, int stream, const void *data, size_t len)
{
	run_ctx *c = ctx;
	int s = stream == AKS_PROC_STDOUT ? AKS_STREAM_STDOUT : AKS_STREAM_STDERR;
	c->write_rc = c->host->result_write(c->out, s, data, len, c->err);
	return c->write_rc != AKS_OK;
}

static bool on_cancelled(void *ctx)
{
	run_ctx *c = ctx;
	return c->host->cancelled && c->host->cancelled(c->call);
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
	run_ctx ctx = {host, call, out, err, AKS_OK};
	if (on_cancelled(&ctx)) {
		host->result_set_timed_out(out);
		return host->error_set(err, AKS_ECANCELLED,
		                       "execution cancelled before it started");
	}

	char **env = ls_env_build(sb->prov, sb->dir);
	if (!env)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	aks_proc_spec spec = {
	    .argv = argv,
	    .envp = (const char *const *)env,
	    .cwd = sb->dir,
	    .deadline_ms = call ? call->deadline_ms : 0,
	    .cancel_fd =
	        AKS_HOST_HAS(host, cancel_fd) && host->cancel_fd ? host->cancel_fd(call) : -1,
	    .cancelled = on_cancelled,
	    .output = on_output,
	    .ctx = &ctx,
	};
	aks_proc_outcome oc;
	int rc = aks_proc_run(&spec, &oc);
	aks__strv_free(env);
	if (rc < 0)
		return host->error_set(err, AKS_EIO, "cannot start a subprocess: %s",
		                       strerror(-rc));

	/* A program killed at its deadline has no exit code of its own: -1, as on every
	 * provider. */
	bool killed = oc.end == AKS_PROC_TIMED_OUT || oc.end == AKS_PROC_CANCELLED;
	host->result_set_exit_code(out, killed ? -1 : oc.exit_code);
	switch (oc.end) {
	case AKS_PROC_TIMED_OUT:
		host->result_set_timed_out(out);
		return host->error_set(err, AKS_ETIMEOUT, "subprocess exceeded timeout %gs",
		                       call ? call->timeout : 0.0);
	case AKS_PROC_CANCELLED:
		host->result_set_timed_out(out);
		return host->error_set(err, AKS_ECANCELLED, "subprocess was cancelled");
	case AKS_PROC_ABORTED:
		/* result_write failed and filled *err already. */
		return ctx.write_rc != AKS_OK ? ctx.write_rc
		                              : host->error_set(err, AKS_ERROR, "output failed");
	default:
		if (!oc.status_known)
			host->log(AKS_LOG_WARNING, LS_NAME,
			          "the supervisor of a subprocess in '%s' died before reporting "
			          "(killed by the program?); its exit code is unknown",
			          sb->dir);
		return AKS_OK;
	}
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
