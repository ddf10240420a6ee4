/*
 * plugins/common/proc_run.c - the caller's side of aks_proc_run(): start the
 * supervisor, drain the program's output, enforce the deadline and
 * cancellation, collect the status. See aks_proc.h for the design.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* pipe2, getdents64, close_range, openat2: Linux-only code */
#endif

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc_internal.h"

/* How long the supervisor may take to kill the tree once asked, and how long
 * we wait for the output pipes to close once it reported. Both only matter
 * if something is badly wrong (the supervisor was killed, a process stuck in
 * the kernel, the program handed its stdout to a process outside its tree). */
#define KILL_GRACE_MS  5000
#define DRAIN_GRACE_MS 2000

#define READ_CHUNK (64 * 1024)

int aks_proc_exit_code(int wait_status)
{
	if (WIFEXITED(wait_status))
		return WEXITSTATUS(wait_status);
	if (WIFSIGNALED(wait_status))
		return 128 + WTERMSIG(wait_status);
	return -1;
}

static const char *find_path(const char *const *envp)
{
	for (; envp && *envp; envp++)
		if (strncmp(*envp, "PATH=", 5) == 0)
			return *envp + 5;
	return AKS__PROC_DEFAULT_PATH;
}

static void close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

static void set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

typedef struct run_state {
	const aks_proc_spec *spec;
	aks_proc_outcome *out;
	int out_r, err_r, ctl;
	pid_t sup, prog;
	bool final, kill_sent, supervisor_gone, start_failed;
	int start_errno;
	int64_t give_up_at; /* 0 = not waiting on a grace period */
	unsigned char msg[sizeof(aks__proc_msg)];
	size_t msg_len;
	char *buf;
} run_state;

static void request_kill(run_state *s, int end)
{
	if (s->kill_sent)
		return;
	s->kill_sent = true;
	s->out->end = end;
	char k = AKS__PROC_KILL;
	/* MSG_NOSIGNAL: if the supervisor is already gone, EPIPE, not SIGPIPE. */
	if (s->ctl >= 0)
		(void)send(s->ctl, &k, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (!s->final)
		s->give_up_at = aks_proc_mono_ms() + KILL_GRACE_MS;
}

/* Last resort when the supervisor cannot do its job. */
static void hard_kill(run_state *s)
{
	if (!s->final && s->sup > 0)
		kill(s->sup, SIGKILL);
	if (!s->final && s->prog > 0)
		kill(-s->prog, SIGKILL);
}

static void on_message(run_state *s, const aks__proc_msg *m)
{
	switch (m->kind) {
	case AKS__PROC_MSG_STARTED:
		s->prog = m->value;
		break;
	case AKS__PROC_MSG_EXITED:
		s->final = true;
		s->out->status_known = true;
		s->out->wait_status = m->value;
		s->out->exit_code = aks_proc_exit_code(m->value);
		s->give_up_at = aks_proc_mono_ms() + DRAIN_GRACE_MS;
		break;
	case AKS__PROC_MSG_FAILED:
		s->final = true;
		if (s->prog <= 0) {
			s->start_failed = true;
			s->start_errno = m->value > 0 ? m->value : EAGAIN;
		}
		s->give_up_at = aks_proc_mono_ms() + DRAIN_GRACE_MS;
		break;
	default:
		break;
	}
}

static void read_control(run_state *s)
{
	for (;;) {
		ssize_t n =
		    recv(s->ctl, s->msg + s->msg_len, sizeof(s->msg) - s->msg_len, MSG_DONTWAIT);
		if (n > 0) {
			s->msg_len += (size_t)n;
			if (s->msg_len == sizeof(s->msg)) {
				aks__proc_msg m;
				memcpy(&m, s->msg, sizeof(m));
				s->msg_len = 0;
				on_message(s, &m);
			}
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		/* EOF or error: the supervisor is gone. */
		close_fd(&s->ctl);
		if (!s->final) {
			/* It died without reporting (killed by the program?): take
			 * down what we can reach, the program's process group. */
			s->supervisor_gone = true;
			if (s->prog > 0)
				kill(-s->prog, SIGKILL);
			s->give_up_at = aks_proc_mono_ms() + DRAIN_GRACE_MS;
		}
		return;
	}
}

static void read_output(run_state *s, int *fd, int stream)
{
	ssize_t n = read(*fd, s->buf, READ_CHUNK);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		close_fd(fd);
		return;
	}
	/* After an abort, keep draining (so the program never blocks on a full
	 * pipe before it dies) but pass nothing on. */
	if (!s->spec->output || s->out->end == AKS_PROC_ABORTED)
		return;
	int rc = s->spec->output(s->spec->ctx, stream, s->buf, (size_t)n);
	if (rc != 0) {
		s->out->abort_code = rc;
		if (!s->kill_sent)
			request_kill(s, AKS_PROC_ABORTED);
		else
			s->out->end = AKS_PROC_ABORTED;
	}
}

static void event_loop(run_state *s)
{
	const aks_proc_spec *spec = s->spec;
	int cancel_fd = spec->cancel_fd;
	for (;;) {
		bool ctl_done = s->final || s->ctl < 0;
		if (s->out_r < 0 && s->err_r < 0 && ctl_done)
			return;
		int64_t now = aks_proc_mono_ms();
		if (!s->kill_sent && !s->final) {
			if (spec->cancelled && spec->cancelled(spec->ctx))
				request_kill(s, AKS_PROC_CANCELLED);
			else if (spec->deadline_ms > 0 && now >= spec->deadline_ms)
				request_kill(s, AKS_PROC_TIMED_OUT);
		}
		if (s->give_up_at && now >= s->give_up_at) {
			hard_kill(s);
			return;
		}

		int timeout = -1;
		int64_t wake = 0;
		if (!s->kill_sent && !s->final && spec->deadline_ms > 0)
			wake = spec->deadline_ms;
		if (s->give_up_at && (!wake || s->give_up_at < wake))
			wake = s->give_up_at;
		if (wake) {
			int64_t left = wake - now;
			timeout = left < 0 ? 0 : left > 60000 ? 60000 : (int)left;
		}

		struct pollfd p[4];
		int n = 0, i_out = -1, i_err = -1, i_ctl = -1, i_cancel = -1;
		if (s->out_r >= 0) {
			i_out = n;
			p[n++] = (struct pollfd){s->out_r, POLLIN, 0};
		}
		if (s->err_r >= 0) {
			i_err = n;
			p[n++] = (struct pollfd){s->err_r, POLLIN, 0};
		}
		if (s->ctl >= 0) {
			i_ctl = n;
			p[n++] = (struct pollfd){s->ctl, POLLIN, 0};
		}
		if (cancel_fd >= 0 && !s->kill_sent && !s->final) {
			i_cancel = n;
			p[n++] = (struct pollfd){cancel_fd, POLLIN, 0};
		}
		int r = poll(p, (nfds_t)n, timeout);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			hard_kill(s); /* cannot wait any more: fail safe */
			return;
		}
		if (r == 0)
			continue;
		if (i_out >= 0 && p[i_out].revents)
			read_output(s, &s->out_r, AKS_PROC_STDOUT);
		if (i_err >= 0 && p[i_err].revents)
			read_output(s, &s->err_r, AKS_PROC_STDERR);
		if (i_ctl >= 0 && p[i_ctl].revents)
			read_control(s);
		if (i_cancel >= 0 && p[i_cancel].revents) {
			if (p[i_cancel].revents & POLLNVAL)
				cancel_fd = -1; /* closed under us: stop watching */
			else
				request_kill(s, AKS_PROC_CANCELLED);
		}
	}
}

int aks_proc_run(const aks_proc_spec *spec, aks_proc_outcome *out)
{
	memset(out, 0, sizeof(*out));
	out->end = AKS_PROC_EXITED;
	out->exit_code = -1;
	if (!spec || !spec->argv || !spec->argv[0] || !spec->envp ||
	    spec->n_join > AKS_PROC_MAX_JOIN || (spec->n_join && !spec->join_fds) ||
	    (spec->pass_fd != 0 && spec->pass_fd < 3))
		return -EINVAL;

	run_state s;
	memset(&s, 0, sizeof(s));
	s.spec = spec;
	s.out = out;
	s.out_r = s.err_r = s.ctl = -1;
	s.buf = malloc(READ_CHUNK);
	if (!s.buf)
		return -ENOMEM;

	/* O_CLOEXEC everywhere: a child another thread spawns must not hold our
	 * pipes (it would delay EOF, or keep the control socket alive). */
	int outp[2] = {-1, -1}, errp[2] = {-1, -1}, sv[2] = {-1, -1};
	if (pipe2(outp, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		int e = errno;
		close_fd(&outp[0]), close_fd(&outp[1]);
		close_fd(&errp[0]), close_fd(&errp[1]);
		free(s.buf);
		return -e;
	}
	s.out_r = outp[0];
	s.err_r = errp[0];
	s.ctl = sv[0];
	set_nonblock(s.out_r);
	set_nonblock(s.err_r);
	set_nonblock(s.ctl);

	aks__proc_sup_args args = {
	    .argv = spec->argv,
	    .envp = spec->envp,
	    .cwd = spec->cwd,
	    .path = find_path(spec->envp),
	    .out_w = outp[1],
	    .err_w = errp[1],
	    .ctl = sv[1],
	    .pass_fd = spec->pass_fd,
	    .n_join = (int)spec->n_join,
	};
	for (size_t i = 0; i < spec->n_join; i++)
		args.join_fds[i] = spec->join_fds[i];

	/* Block every signal across fork(), so no handler of the host runs in
	 * the supervisor before it has reset them all. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid_t sup = fork();
	if (sup == 0)
		aks__proc_supervise(&args);
	int fork_errno = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	close_fd(&outp[1]);
	close_fd(&errp[1]);
	close_fd(&sv[1]);
	if (sup < 0) {
		close_fd(&s.out_r);
		close_fd(&s.err_r);
		close_fd(&s.ctl);
		free(s.buf);
		return -fork_errno;
	}
	s.sup = sup;

	event_loop(&s);

	close_fd(&s.out_r);
	close_fd(&s.err_r);
	close_fd(&s.ctl);
	free(s.buf);
	/* Reap only our own child: never waitpid(-1) in someone else's process.
	 * ECHILD (the host ignores SIGCHLD or reaped it) is fine: the status
	 * came over the socket. */
	while (waitpid(sup, NULL, 0) < 0 && errno == EINTR)
		;
	if (s.start_failed)
		return -s.start_errno;
	return 0;
}
