/*
 * plugins/local_subprocess/ls_agent.c - running a sandbox's operations through
 * aksandbox-agent (docs/agent-protocol.md).
 *
 * Each sandbox handle starts one agent, a child of this host talking over two pipes, with
 * the sandbox directory as its working directory and the sandbox's environment as its own.
 * Commands, code and file transfers are requests to it; Python code runs in its persistent
 * session, so state survives between calls (the `stateful` capability). The host-side
 * client is core/agent_client.c compiled into this plugin, reaching the host only through
 * the aks_host_api table.
 *
 * The agent exits when its input closes (it kills what it runs first), so closing the
 * handle, or this host dying, ends it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent_client.h"
#include "ls_internal.h"

/* How long close waits for the agent to exit on its own before killing it. */
#define LS_AGENT_EXIT_MS 2000

static int start_process(aks_sandbox_impl *sb, int *rfd, int *wfd, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	/* Everything the child needs is prepared before fork: a multithreaded host's child
	 * may only make async-signal-safe calls. */
	char **env = ls_env_build(sb->prov, sb->dir);
	if (!env)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	int to_agent[2], from_agent[2];
	if (pipe2(to_agent, O_CLOEXEC) < 0) {
		ls_env_free(env);
		return host->error_set(err, AKS_EIO, "cannot create a pipe: %s", strerror(errno));
	}
	if (pipe2(from_agent, O_CLOEXEC) < 0) {
		int e = errno;
		close(to_agent[0]);
		close(to_agent[1]);
		ls_env_free(env);
		return host->error_set(err, AKS_EIO, "cannot create a pipe: %s", strerror(e));
	}
	/* --kill-leftovers: a call ends with its program and leaves nothing running, as on the
	 * per-call path. */
	char *const argv[] = {sb->prov->agent, "--kill-leftovers", NULL};
	pid_t pid = fork();
	if (pid == 0) {
		if (chdir(sb->dir) < 0 || dup2(to_agent[0], 0) < 0 || dup2(from_agent[1], 1) < 0)
			_exit(127);
		execve(sb->prov->agent, argv, env);
		_exit(127);
	}
	int e = errno;
	ls_env_free(env);
	close(to_agent[0]);
	close(from_agent[1]);
	if (pid < 0) {
		close(to_agent[1]);
		close(from_agent[0]);
		return host->error_set(err, AKS_EIO, "cannot start %s: %s", sb->prov->agent,
		                       strerror(e));
	}
	sb->agent_pid = pid;
	*rfd = from_agent[0];
	*wfd = to_agent[1];
	return AKS_OK;
}

/* Reaps the agent, killing it if it does not exit in time. */
static void reap(pid_t pid)
{
	for (int waited = 0; waited < LS_AGENT_EXIT_MS; waited += 10) {
		pid_t r = waitpid(pid, NULL, WNOHANG);
		if (r == pid || (r < 0 && errno != EINTR))
			return;
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

void ls_agent_stop(aks_sandbox_impl *sb)
{
	if (sb->agent) {
		aks__agent_free(sb->agent);
		sb->agent = NULL;
	}
	if (sb->agent_pid > 0) {
		reap(sb->agent_pid);
		sb->agent_pid = 0;
	}
}

int ls_agent_start(aks_sandbox_impl *sb, const aks_call *call, aks_error **err)
{
	int rfd = -1, wfd = -1;
	int rc = start_process(sb, &rfd, &wfd, err);
	if (rc != AKS_OK)
		return rc;
	rc = aks__agent_start(sb->prov->host, rfd, wfd, call, &sb->agent, err);
	if (rc != AKS_OK) {
		sb->agent = NULL;
		ls_agent_stop(sb);
	}
	return rc;
}

int ls_agent_ensure(aks_sandbox_impl *sb, const aks_call *call, aks_error **err)
{
	/* The exit is seen by waitpid at once; the broken stream only when the client's
	 * reader thread gets to it. */
	if (sb->agent && aks__agent_alive(sb->agent)) {
		pid_t r = waitpid(sb->agent_pid, NULL, WNOHANG);
		if (r <= 0) /* running, or not ours to wait for (a host that reaps itself) */
			return AKS_OK;
		if (r == sb->agent_pid)
			sb->agent_pid = 0; /* reaped */
	}
	sb->prov->host->log(AKS_LOG_WARNING, LS_NAME,
	                    "the agent of sandbox '%s' is gone; starting another (the Python "
	                    "session's state is lost)",
	                    sb->dir);
	ls_agent_stop(sb);
	return ls_agent_start(sb, call, err);
}

int ls_agent_exec(aks_sandbox_impl *sb, const char *const *argv, const char *python_code,
                  const aks_call *call, aks_result *out, aks_error **err)
{
	int rc = ls_agent_ensure(sb, call, err);
	if (rc != AKS_OK)
		return rc;
	char **env = ls_env_build(sb->prov, sb->dir);
	if (!env)
		return sb->prov->host->error_set(err, AKS_ENOMEM, "out of memory");
	aks_agent_spawn spec = {
	    .cwd = sb->dir,
	    .env = (const char *const *)env,
	    .env_clear = true,
	};
	if (python_code) {
		spec.code = python_code;
		spec.language = "python";
		spec.session = "default";
	} else {
		spec.argv = argv;
	}
	aks_agent_exit ex;
	rc = aks__agent_exec(sb->agent, &spec, out, call, &ex, err);
	ls_env_free(env);
	if (rc == AKS_ETIMEOUT && err && *err) {
		/* The same words as the per-call path. */
		sb->prov->host->error_free(*err);
		*err = NULL;
		rc = sb->prov->host->error_set(err, AKS_ETIMEOUT, "subprocess exceeded timeout %gs",
		                               call ? call->timeout : 0.0);
	}
	return rc;
}

int ls_agent_write(aks_sandbox_impl *sb, const char *abs_path, const void *data, size_t len,
                   const aks_call *call, aks_error **err)
{
	int rc = ls_agent_ensure(sb, call, err);
	if (rc != AKS_OK)
		return rc;
	return aks__agent_write_file(sb->agent, abs_path, data, len, 0666, call, err);
}

int ls_agent_read(aks_sandbox_impl *sb, const char *abs_path, const char *name,
                  const aks_call *call, aks_result *out, aks_error **err)
{
	int rc = ls_agent_ensure(sb, call, err);
	if (rc != AKS_OK)
		return rc;
	bool refused;
	return aks__agent_read_into(sb->agent, abs_path, UINT64_MAX, out, name, call, &refused,
	                            err);
}
