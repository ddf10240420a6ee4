/*
 * plugins/common/hostrun.c - a sandbox's programs on this host: their environment, and one
 * supervised program as a tool call's result (aks_hostrun.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "aks_buf.h"
#include "aks_hostrun.h"
#include "aks_proc.h"

/* ---- the environment --------------------------------------------------------------------- */

/* Sets name=value, replacing an earlier value of the same name. */
static bool env_set(aks_strv *e, const char *name, const char *value)
{
	char *entry = NULL;
	if (asprintf(&entry, "%s=%s", name, value) < 0)
		return false;
	size_t nl = strlen(name);
	for (size_t i = 0; i < e->n; i++)
		if (strncmp(e->v[i], name, nl) == 0 && e->v[i][nl] == '=') {
			free(e->v[i]);
			e->v[i] = entry;
			return true;
		}
	int rc = aks__strv_push(e, entry);
	free(entry);
	return rc == AKS_OK;
}

char **aks_hostrun_env(const char *home, const char *tmpdir, const char *pwd,
                       char *const *passthrough, char *const *env)
{
	aks_strv e = {NULL, 0, 0};
	bool ok = env_set(&e, "PATH", "/usr/local/bin:/usr/bin:/bin") &&
	          env_set(&e, "HOME", home) && env_set(&e, "TMPDIR", tmpdir) &&
	          env_set(&e, "LANG", "C.UTF-8") && env_set(&e, "PWD", pwd);
	for (char *const *n = passthrough; ok && n && *n; n++) {
		const char *v = getenv(*n);
		ok = !v || env_set(&e, *n, v);
	}
	for (char *const *kv = env; ok && kv && kv[0]; kv += 2)
		ok = env_set(&e, kv[0], kv[1]);
	if (!ok) {
		aks__strv_free(e.v);
		return NULL;
	}
	return e.v;
}

/* ---- one program --------------------------------------------------------------------------- */

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

int aks_hostrun(const aks_host_api *host, const aks_hostrun_spec *r, const aks_call *call,
                aks_result *out, aks_error **err)
{
	run_ctx ctx = {host, call, out, err, AKS_OK};
	if (on_cancelled(&ctx)) {
		host->result_set_timed_out(out);
		return host->error_set(err, AKS_ECANCELLED,
		                       "execution cancelled before it started");
	}
	aks_proc_spec spec = {
	    .argv = r->argv,
	    .envp = r->envp,
	    .cwd = r->cwd,
	    .deadline_ms = call ? call->deadline_ms : 0,
	    .cancel_fd =
	        AKS_HOST_HAS(host, cancel_fd) && host->cancel_fd ? host->cancel_fd(call) : -1,
	    .cancelled = on_cancelled,
	    .output = on_output,
	    .ctx = &ctx,
	    .pass_fd = r->pass_fd,
	    .join_fds = r->join_fds,
	    .n_join = r->n_join,
	};
	aks_proc_outcome oc;
	int rc = aks_proc_run(&spec, &oc);
	if (rc < 0)
		return host->error_set(err, AKS_EIO, "cannot start %s: %s", r->subject,
		                       strerror(-rc));
	/* A program killed at its deadline has no exit code of its own: -1, as on every
	 * provider. */
	bool killed = oc.end == AKS_PROC_TIMED_OUT || oc.end == AKS_PROC_CANCELLED;
	host->result_set_exit_code(out, killed ? -1 : oc.exit_code);
	switch (oc.end) {
	case AKS_PROC_TIMED_OUT:
		host->result_set_timed_out(out);
		return host->error_set(err, AKS_ETIMEOUT, "%s exceeded timeout %gs", r->subject,
		                       call ? call->timeout : 0.0);
	case AKS_PROC_CANCELLED:
		host->result_set_timed_out(out);
		return host->error_set(err, AKS_ECANCELLED, "%s was cancelled", r->subject);
	case AKS_PROC_ABORTED:
		/* result_write failed and filled *err already. */
		return ctx.write_rc != AKS_OK ? ctx.write_rc
		                              : host->error_set(err, AKS_ERROR, "output failed");
	default:
		if (!oc.status_known)
			host->log(
			    AKS_LOG_WARNING, r->provider,
			    "the supervisor of a %s in '%s' died before reporting (killed by the "
			    "program?); its exit code is unknown",
			    r->subject, r->cwd ? r->cwd : "?");
		return AKS_OK;
	}
}

/* ---- a child of this host ------------------------------------------------------------------ */

void aks_hostrun_reap(pid_t *pid, int grace_ms)
{
	if (*pid <= 0)
		return;
	/* Woken by the exit itself (a pidfd is readable once the process is a zombie), not by
	 * a polling nap that a child exiting at once paid in full; a 2 ms nap where pidfds are
	 * missing (kernels before 5.3). */
	int pidfd = (int)syscall(SYS_pidfd_open, *pid, 0);
	int64_t until = aks_proc_mono_ms() + grace_ms;
	while (*pid > 0) {
		pid_t r = waitpid(*pid, NULL, WNOHANG);
		if (r == *pid || (r < 0 && errno != EINTR)) {
			*pid = 0;
			break;
		}
		int64_t left = until - aks_proc_mono_ms();
		if (left <= 0)
			break;
		if (pidfd >= 0) {
			struct pollfd pf = {pidfd, POLLIN, 0};
			poll(&pf, 1, (int)left);
		} else {
			struct timespec ts = {0, 2 * 1000 * 1000};
			nanosleep(&ts, NULL);
		}
	}
	if (pidfd >= 0)
		close(pidfd);
	if (*pid > 0) {
		kill(*pid, SIGKILL);
		while (waitpid(*pid, NULL, 0) < 0 && errno == EINTR)
			;
		*pid = 0;
	}
}

bool aks_hostrun_running(pid_t *pid)
{
	if (*pid <= 0)
		return false;
	pid_t r = waitpid(*pid, NULL, WNOHANG);
	if (r == *pid)
		*pid = 0; /* reaped */
	return r <= 0;
}
