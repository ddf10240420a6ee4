/*
 * plugins/local_subprocess/ls_agent.c - what this provider tells the shared agent module
 * (plugins/common/agent/aks_agent.h): the agent is not placed anywhere (it runs as it is,
 * a child of this host over two pipes, in the sandbox directory with the sandbox's
 * environment), the directory's existence says whether the sandbox is there, and the
 * per-call operations are ls_exec.c's and ls_files.c's.
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
#include <sys/stat.h>
#include <unistd.h>

#include "aks_agent.h"
#include "aks_hostdir.h"
#include "aks_hostrun.h"
#include "aks_signals.h"
#include "ls_internal.h"

/* How long close waits for the agent to exit on its own before killing it. */
#define LS_AGENT_EXIT_MS 2000

/* The stream: the agent's process; its pipes belong to the agent client. */
typedef struct ls_stream {
	pid_t pid;
} ls_stream;

static int pipe_pair(const aks_host_api *host, int to[2], int from[2], aks_error **err)
{
	if (pipe2(to, O_CLOEXEC) < 0)
		return host->error_set(err, AKS_EIO, "cannot create a pipe: %s", strerror(errno));
	if (pipe2(from, O_CLOEXEC) < 0) {
		int e = errno;
		close(to[0]);
		close(to[1]);
		return host->error_set(err, AKS_EIO, "cannot create a pipe: %s", strerror(e));
	}
	return AKS_OK;
}

static int ls_agent_open(void *vsb, const char *path, const char *const *args, const aks_call *call,
                         void **stream, int *rfd, int *wfd, char **why, aks_error **err)
{
	(void)args; /* not resident: sandboxes of the host process */
	(void)call;
	(void)why;
	aks_sandbox_impl *sb = vsb;
	const aks_host_api *host = sb->prov->host;
	/* Everything the child needs is prepared before fork: a multithreaded host's child
	 * may only make async-signal-safe calls. */
	char **env = ls_env_build(sb->prov, sb->dir);
	ls_stream *s = calloc(1, sizeof(*s));
	int to[2], from[2];
	int rc = env && s ? pipe_pair(host, to, from, err) : AKS_ENOMEM;
	if (rc != AKS_OK) {
		aks__strv_free(env);
		free(s);
		return rc == AKS_ENOMEM ? host->error_set(err, rc, "out of memory") : rc;
	}
	/* --kill-leftovers: a call ends with its program and leaves nothing running, as on the
	 * per-call path. */
	char *const argv[] = {(char *)path, "--kill-leftovers", NULL};
	pid_t pid = fork();
	if (pid == 0) {
		/* The agent starts clean, not with this (host) thread's blocked mask and ignored
		 * signals: it and everything it runs must be stoppable by signals. */
		sigset_t none;
		sigemptyset(&none);
		aks__signals_default_all();
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (chdir(sb->dir) < 0 || dup2(to[0], 0) < 0 || dup2(from[1], 1) < 0)
			_exit(127);
		execve(path, argv, env);
		_exit(127);
	}
	int e = errno;
	aks__strv_free(env);
	close(to[0]);
	close(from[1]);
	if (pid < 0) {
		close(to[1]);
		close(from[0]);
		free(s);
		return host->error_set(err, AKS_EIO, "cannot start %s: %s", path, strerror(e));
	}
	s->pid = pid;
	*stream = s;
	*rfd = from[0];
	*wfd = to[1];
	return AKS_OK;
}

/* Reaps the agent, killing it if it does not exit in time. */
static void ls_agent_close(void *vsb, void *stream, char *said, size_t len)
{
	(void)vsb;
	(void)said;
	(void)len;
	ls_stream *s = stream;
	aks_hostrun_reap(&s->pid, LS_AGENT_EXIT_MS);
	free(s);
}

/* The exit is seen by waitpid at once; the broken stream only when the client's reader
 * thread gets to it. */
static bool ls_agent_running(void *vsb, void *stream)
{
	(void)vsb;
	return aks_hostrun_running(&((ls_stream *)stream)->pid);
}

static int ls_agent_check(void *vsb, const aks_call *call, aks_error **err)
{
	(void)call;
	aks_sandbox_impl *sb = vsb;
	return aks_hostdir_check(sb->prov->host, sb->dir, err);
}

static int per_call_code(void *sb, const char *code, const char *language, const aks_call *call,
                         aks_result *out, aks_error **err)
{
	return ls_run_code(sb, code, language, call, out, err);
}

static int per_call_command(void *sb, const char *command, const aks_call *call, aks_result *out,
                            aks_error **err)
{
	return ls_run_command(sb, command, call, out, err);
}

static int per_call_upload(void *sb, const char *path, const char *cpath, const void *data,
                           size_t len, const aks_call *call, aks_error **err)
{
	(void)cpath;
	(void)call;
	aks_sandbox_impl *s = sb;
	return aks_hostdir_write(s->prov->host, s->dir, path, data, len, err);
}

static int per_call_download(void *sb, const char *path, const char *cpath, const aks_call *call,
                             aks_result *out, aks_error **err)
{
	(void)cpath;
	(void)call;
	aks_sandbox_impl *s = sb;
	return aks_hostdir_read(s->prov->host, s->dir, path, out, err);
}

const aks_agent_ops ls_agent_ops = {
    .noun = "sandbox directory",
    .timeout_subject = "subprocess",
    .shell = "bash",
    .file_mode = 0666, /* less the umask, as a per-call write */
    .open = ls_agent_open,
    .close = ls_agent_close,
    .running = ls_agent_running,
    .check = ls_agent_check,
    .execute_code = per_call_code,
    .execute_command = per_call_command,
    .upload = per_call_upload,
    .download = per_call_download,
};
