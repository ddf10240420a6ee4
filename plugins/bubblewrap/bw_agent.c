/*
 * plugins/bubblewrap/bw_agent.c - what this provider tells the shared agent module
 * (plugins/common/agent/aks_agent.h): the agent runs inside bwrap, a child of this host over
 * two pipes, bound read-only at BW_AGENT_INSIDE (it is never copied), in the sandbox's
 * cgroup and under its seccomp filter and Landlock rules; the workspace directory's existence
 * says whether the sandbox is there; the per-call operations are bw_exec.c's and the shared
 * host-directory module's.
 *
 * The agent exits when its input closes (it kills what it runs first); bwrap's
 * --die-with-parent and its pid namespace take everything else with it, so closing the
 * handle, or this host dying, ends the sandbox's programs.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "aks_agent.h"
#include "aks_hostdir.h"
#include "aks_hostrun.h"
#include "aks_signals.h"
#include "bw_internal.h"
#include "bw_seccomp.h"

/* How long close waits for the agent (and bwrap) to exit on its own before killing it. */
#define BW_AGENT_EXIT_MS 2000

/* The stream: bwrap's process and what it and the agent said on stderr. */
typedef struct bw_stream {
	pid_t pid;
	int said_fd; /* a memfd */
} bw_stream;

/* What the child needs, prepared before fork: a multithreaded host's child may only make
 * async-signal-safe calls. */
typedef struct child_plan {
	char **argv, **env;
	int in, out, said, seccomp;
	int join[BW_CGROUP_MAX_FDS];
	size_t njoin;
} child_plan;

/* In the child: every descriptor moved above the ones it ends up with (0, 1, 2, 3), then
 * placed; a joined cgroup first, so the limits hold from bwrap's first instruction on. */
__attribute__((noreturn)) static void child(const child_plan *p)
{
	sigset_t none;
	sigemptyset(&none);
	aks__signals_default_all();
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (size_t i = 0; i < p->njoin; i++)
		if (write(p->join[i], "0", 1) != 1)
			_exit(127);
	int in = fcntl(p->in, F_DUPFD_CLOEXEC, 10), out = fcntl(p->out, F_DUPFD_CLOEXEC, 10);
	int said = fcntl(p->said, F_DUPFD_CLOEXEC, 10),
	    sec = fcntl(p->seccomp, F_DUPFD_CLOEXEC, 10);
	if (in < 0 || out < 0 || said < 0 || sec < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 ||
	    dup2(said, 2) < 0 || dup2(sec, 3) < 0)
		_exit(127);
	/* Nothing else of this host's: a descriptor it left open without O_CLOEXEC (a
	 * directory) would be a way out of any mount namespace. */
	syscall(SYS_close_range, 4U, ~0U, 0U);
	execve(p->argv[0], p->argv, p->env);
	_exit(127);
}

static int bw_agent_open(void *vsb, const char *path, const char *const *args, const aks_call *call,
                         void **stream, int *rfd, int *wfd, char **why, aks_error **err)
{
	(void)args; /* not resident: sandboxes of the host process */
	(void)call;
	(void)why;
	aks_sandbox_impl *sb = vsb;
	const aks_provider_impl *prov = sb->prov;
	const aks_host_api *host = prov->host;
	child_plan p = {.in = -1, .out = -1, .said = -1, .seccomp = -1};
	aks_strv cmd = {NULL, 0, 0};
	bw_stream *s = calloc(1, sizeof(*s));
	p.env = bw_env_build(sb);
	if (!s || !p.env || bw_view_argv(sb, path, true, NULL, &cmd) != AKS_OK) {
		free(s);
		aks__strv_free(p.env);
		aks__strv_free(cmd.v);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	p.argv = cmd.v;
	int rc = bw_cgroup_enter(sb, p.join, &p.njoin, err);
	int to[2] = {-1, -1}, from[2] = {-1, -1};
	if (rc == AKS_OK) {
		p.said = memfd_create("bwrap-stderr", MFD_CLOEXEC);
		p.seccomp = bw_seccomp_reopen(prov->seccomp_fd);
		if (p.said < 0 || p.seccomp < 0 || pipe2(to, O_CLOEXEC) < 0 ||
		    pipe2(from, O_CLOEXEC) < 0)
			rc = host->error_set(err, AKS_EIO, "cannot start bwrap: %s",
			                     strerror(errno));
	}
	pid_t pid = -1;
	if (rc == AKS_OK) {
		p.in = to[0];
		p.out = from[1];
		pid = fork();
		if (pid == 0)
			child(&p);
		if (pid < 0)
			rc = host->error_set(err, AKS_EIO, "cannot start bwrap: %s",
			                     strerror(errno));
	}
	if (to[0] >= 0)
		close(to[0]);
	if (from[1] >= 0)
		close(from[1]);
	if (p.seccomp >= 0)
		close(p.seccomp);
	bw_cgroup_close_fds(p.join, p.njoin);
	aks__strv_free(p.env);
	aks__strv_free(cmd.v);
	if (rc != AKS_OK) {
		if (to[1] >= 0)
			close(to[1]);
		if (from[0] >= 0)
			close(from[0]);
		if (p.said >= 0)
			close(p.said);
		free(s);
		return rc;
	}
	s->pid = pid;
	s->said_fd = p.said;
	*stream = s;
	*rfd = from[0];
	*wfd = to[1];
	return AKS_OK;
}

/* Reaps bwrap, killing it if it does not exit in time, and hands over what was said. */
static void bw_agent_close(void *vsb, void *stream, char *said, size_t len)
{
	(void)vsb;
	bw_stream *s = stream;
	aks_hostrun_reap(&s->pid, BW_AGENT_EXIT_MS);
	if (said && len) {
		ssize_t n = pread(s->said_fd, said, len - 1, 0);
		said[n > 0 ? n : 0] = '\0';
	}
	close(s->said_fd);
	free(s);
}

/* The exit is seen by waitpid at once; the broken stream only when the client's reader
 * thread gets to it. */
static bool bw_agent_running(void *vsb, void *stream)
{
	(void)vsb;
	return aks_hostrun_running(&((bw_stream *)stream)->pid);
}

static int bw_agent_check(void *vsb, const aks_call *call, aks_error **err)
{
	(void)call;
	aks_sandbox_impl *sb = vsb;
	return aks_hostdir_check(sb->prov->host, sb->dir, err);
}

static int per_call_code(void *sb, const char *code, const char *language, const aks_call *call,
                         aks_result *out, aks_error **err)
{
	return bw_run_code(sb, code, language, call, out, err);
}

static int per_call_command(void *sb, const char *command, const aks_call *call, aks_result *out,
                            aks_error **err)
{
	return bw_run_command(sb, command, call, out, err);
}

static int per_call_upload(void *vsb, const char *path, const char *cpath, const void *data,
                           size_t len, const aks_call *call, aks_error **err)
{
	(void)cpath;
	(void)call;
	aks_sandbox_impl *sb = vsb;
	return aks_hostdir_write(sb->prov->host, sb->dir, path, data, len, err);
}

static int per_call_download(void *vsb, const char *path, const char *cpath, const aks_call *call,
                             aks_result *out, aks_error **err)
{
	(void)cpath;
	(void)call;
	aks_sandbox_impl *sb = vsb;
	return aks_hostdir_read(sb->prov->host, sb->dir, path, out, err);
}

const aks_agent_ops bw_agent_ops = {
    .noun = "sandbox",
    .timeout_subject = "bwrap",
    .shell = "bash",
    .file_mode = 0666, /* less the umask, as a per-call write */
    .open = bw_agent_open,
    .close = bw_agent_close,
    .running = bw_agent_running,
    .check = bw_agent_check,
    .execute_code = per_call_code,
    .execute_command = per_call_command,
    .upload = per_call_upload,
    .download = per_call_download,
};
