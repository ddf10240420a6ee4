/*
 * agent/spawn.c - process control: every program runs under its own supervisor.
 *
 * The supervisor is a forked copy of the agent that makes itself a child subreaper
 * (PR_SET_CHILD_SUBREAPER) and forks the program into its own process group. Whatever the
 * program starts, however it detaches (double fork, setsid, a cleared environment), stays a
 * descendant of the supervisor: an orphan is reparented to its nearest subreaper ancestor.
 * So killing "the tree" is exact: signal the process group, then kill every child of the
 * supervisor and reap it, again and again, until the supervisor has no children left.
 *
 * The supervisor talks to the agent over two pipes: `ctl` (orders: one byte, a signal
 * number, or 0 = release) and `status` (the program's wait status, 4 bytes, then EOF when
 * the supervisor exits). When the agent dies, ctl reaches EOF and the supervisor kills the
 * tree, so nothing the agent ran outlives it.
 *
 * Where a subreaper does nothing (gVisor accepts PR_SET_CHILD_SUBREAPER and ignores it),
 * an orphan goes to the init of the container's PID namespace instead. Then a kill also
 * sweeps the orphans: every process whose parent is init (pid 1) and that started since
 * the supervisor did (or, when the agent exits, since the agent did). A process started
 * from outside the agent (another `docker exec`, another handle's agent) has no parent
 * in the namespace (0), never init, so it is spared. The window is the run's: a
 * concurrent run's orphan of the same window would be swept too (the host runs one
 * operation at a time per sandbox).
 */
#include "agent.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "aks_signals.h"

extern char **environ;

extern int agent_fd_hwm; /* the highest fd the agent has open (aksandbox-agent.c) */

/* Parses the parent pid and process group out of /proc/PID/stat (the fields after the ")"
 * that ends the name): 0, or -1 when the process is gone. */
static int read_stat(const char *pid, pid_t *ppid, pid_t *pgrp)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%s/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	char *paren = strrchr(buf, ')');
	if (!paren)
		return -1;
	char state;
	int pp, pg;
	if (sscanf(paren + 1, " %c %d %d", &state, &pp, &pg) != 3)
		return -1;
	*ppid = pp;
	*pgrp = pg;
	return 0;
}

static pid_t read_ppid(const char *pid)
{
	pid_t ppid, pgrp;
	return read_stat(pid, &ppid, &pgrp) < 0 ? -1 : ppid;
}

/* The start time of a process (clock ticks since boot, /proc/PID/stat field 22), or 0. */
static unsigned long long read_starttime(const char *pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%s/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	char *s = strrchr(buf, ')');
	/* after the name: field 3 (state) ... field 22 (starttime) */
	for (int field = 3; s && field <= 22; field++)
		s = strchr(s + 1, ' ');
	return s ? strtoull(s + 1, NULL, 10) : 0;
}

/* Set once at start: false where PR_SET_CHILD_SUBREAPER does not take (see above). */
bool proc_subreaper_works = true;
unsigned long long proc_agent_start;

void proc_init(void)
{
	int on = 0;
	proc_subreaper_works = prctl(PR_SET_CHILD_SUBREAPER, 1) == 0 &&
	                       prctl(PR_GET_CHILD_SUBREAPER, &on) == 0 && on == 1;
	proc_agent_start = read_starttime("self");
}

void proc_sweep_orphans(unsigned long long since, int bound_ms)
{
	if (proc_subreaper_works || !since)
		return;
	struct timespec nap = {0, 2 * 1000 * 1000};
	int64_t until = agent_now_ms() + bound_ms;
	for (int found = 1; found && agent_now_ms() < until;) {
		found = 0;
		DIR *d = opendir("/proc");
		if (!d)
			return;
		struct dirent *e;
		while ((e = readdir(d))) {
			if (e->d_name[0] < '1' || e->d_name[0] > '9' || strcmp(e->d_name, "1") == 0)
				continue;
			if (read_ppid(e->d_name) != 1 || read_starttime(e->d_name) < since)
				continue;
			kill((pid_t)atoi(e->d_name), SIGKILL);
			found++;
		}
		closedir(d);
		if (found) /* their children are orphans now, in turn */
			nanosleep(&nap, NULL);
	}
}

/* Signals every process whose parent is `parent`; returns how many were found. */
static int signal_children_of(pid_t parent, int sig)
{
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	int found = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		if (read_ppid(e->d_name) == parent) {
			pid_t pid = (pid_t)atoi(e->d_name);
			kill(pid, sig);
			found++;
		}
	}
	closedir(d);
	return found;
}

/* Signals every descendant of `root` (not root itself) outside process group `skip_pgrp`
 * (already signalled as a group: a second signal could interrupt its handler), walking
 * parent links in /proc. */
static void signal_descendants(pid_t root, int sig, pid_t skip_pgrp)
{
	DIR *d = opendir("/proc");
	if (!d)
		return;
	size_t n = 0, cap = 0;
	pid_t(*pairs)[3] = NULL;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		pid_t ppid, pgrp;
		if (read_stat(e->d_name, &ppid, &pgrp) < 0)
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 256;
			pid_t(*grown)[3] = realloc(pairs, ncap * sizeof(*pairs));
			if (!grown)
				break;
			pairs = grown;
			cap = ncap;
		}
		pairs[n][0] = (pid_t)atoi(e->d_name);
		pairs[n][1] = ppid;
		pairs[n][2] = pgrp;
		n++;
	}
	closedir(d);
	/* Mark descendants to a fixed point. */
	bool *in = calloc(n ? n : 1, sizeof(bool));
	if (in) {
		for (bool changed = true; changed;) {
			changed = false;
			for (size_t i = 0; i < n; i++) {
				if (in[i])
					continue;
				bool under = pairs[i][1] == root;
				for (size_t j = 0; !under && j < n; j++)
					under = in[j] && pairs[j][0] == pairs[i][1];
				if (under) {
					in[i] = true;
					changed = true;
					if (pairs[i][2] != skip_pgrp)
						kill(pairs[i][0], sig);
				}
			}
		}
	}
	free(in);
	free(pairs);
}

/* Reaps every child that has ended (main_pid's status into *main_status); true when no child
 * is left at all. */
static bool reap_ended(pid_t main_pid, int *main_status, bool *main_seen)
{
	int st;
	pid_t p;
	while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
		if (p == main_pid && main_status) {
			*main_status = st;
			*main_seen = true;
		}
	}
	return p < 0 && errno == ECHILD;
}

void proc_kill_children(pid_t main_pid, int *main_status, bool *main_seen, int bound_ms)
{
	pid_t self = getpid();
	struct timespec nap = {0, 2 * 1000 * 1000};
	int64_t until = agent_now_ms() + bound_ms;
	for (;;) {
		if (main_pid > 0) {
			kill(-main_pid, SIGKILL);
			if (!*main_seen)
				kill(main_pid, SIGKILL);
		}
		/* A subreaper with no child left has no descendant left (every orphan of the
		 * tree comes back to it): done without reading all of /proc, which the common
		 * case (the program exited and left nothing behind) paid on every call. */
		if (reap_ended(main_pid, main_status, main_seen))
			return;
		signal_children_of(self, SIGKILL);
		if (reap_ended(main_pid, main_status, main_seen))
			return;
		if (agent_now_ms() >= until)
			return; /* without /proc an unkillable child must not hang us */
		nanosleep(&nap, NULL);
	}
}

static void put_status(int fd, int wstatus)
{
	uint8_t raw[4];
	aks__agent_put32(raw, (uint32_t)wstatus);
	ssize_t n = write(fd, raw, sizeof(raw));
	(void)n; /* the agent may be gone; then nobody needs it */
}

static void __attribute__((noreturn))
run_program(char *const argv[], char *const envp[], const char *cwd)
{
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* Dispositions set to ignore survive exec (ours of SIGPIPE, and whatever the agent
	 * inherited): give the program the defaults. */
	aks__signals_default_all();
	setpgid(0, 0);
	if (cwd && chdir(cwd) < 0) {
		dprintf(2, "aksandbox-agent: cannot enter %s: %s\n", cwd, strerror(errno));
		_exit(127);
	}
	if (envp)
		environ = (char **)envp;
	execvp(argv[0], argv);
	int e = errno;
	dprintf(2, "aksandbox-agent: %s: %s\n", argv[0],
	        e == ENOENT ? "command not found" : strerror(e));
	_exit(e == ENOENT ? 127 : 126);
}

static void __attribute__((noreturn))
supervise(int ctl, int status, int fds[3], char *const argv[], char *const envp[], const char *cwd)
{
	/* Hold nothing of the agent's: another request's pipe end kept open here would keep
	 * that program from seeing EOF. Everything but our five fds goes. */
	for (int fd = 0; fd <= agent_fd_hwm + 8; fd++)
		if (fd != ctl && fd != status && fd != fds[0] && fd != fds[1] && fd != fds[2])
			close(fd);
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	unsigned long long started = read_starttime("self");
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	int sigfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fds[0], 0);
		dup2(fds[1], 1);
		dup2(fds[2], 2);
		run_program(argv, envp, cwd);
	}
	if (pid < 0) {
		put_status(status, 127 << 8);
		_exit(1);
	}
	setpgid(pid, pid); /* also here, so a signal sent right away already finds the group */
	close(fds[0]);
	close(fds[1]);
	close(fds[2]);
	bool seen = false;
	int st = 0;
	for (;;) {
		struct pollfd pf[2] = {{ctl, POLLIN, 0}, {sigfd, POLLIN, 0}};
		if (poll(pf, sigfd >= 0 ? 2 : 1, sigfd >= 0 ? -1 : 50) < 0 && errno != EINTR)
			break;
		if (sigfd >= 0 && (pf[1].revents & POLLIN)) {
			struct signalfd_siginfo si;
			while (read(sigfd, &si, sizeof(si)) > 0)
				;
		}
		pid_t p;
		while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
			if (p == pid && !seen) {
				seen = true;
				put_status(status, st);
			}
		}
		if (pf[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			uint8_t order;
			ssize_t n = read(ctl, &order, 1);
			if (n < 0 && errno == EINTR)
				continue;
			if (n == 1 && order == 0)
				_exit(0); /* released: leftovers reparent to the agent */
			if (n == 1 && order != SIGKILL) {
				kill(-pid, order);
				signal_descendants(getpid(), order, pid);
				continue;
			}
			/* SIGKILL, or the agent is gone: tear the whole tree down. */
			bool main_seen = seen;
			proc_kill_children(pid, &st, &main_seen, 10000);
			proc_sweep_orphans(started, 10000);
			if (main_seen && !seen)
				put_status(status, st);
			_exit(0);
		}
	}
	proc_kill_children(pid, &st, &seen, 10000);
	proc_sweep_orphans(started, 10000);
	_exit(1);
}

int proc_start(proc *p, char *const argv[], char *const envp[], const char *cwd, char *msg,
               size_t msglen)
{
	int ctl[2] = {-1, -1}, st[2] = {-1, -1}, in[2] = {-1, -1}, out[2] = {-1, -1},
	    err[2] = {-1, -1};
	if (pipe2(ctl, O_CLOEXEC) < 0 || pipe2(st, O_CLOEXEC) < 0 || pipe2(in, O_CLOEXEC) < 0 ||
	    pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
		snprintf(msg, msglen, "cannot create pipes: %s", strerror(errno));
		goto fail;
	}
	for (int i = 0; i < 2; i++) {
		agent_track_fd(ctl[i], false);
		agent_track_fd(st[i], false);
		agent_track_fd(in[i], false);
		agent_track_fd(out[i], false);
		agent_track_fd(err[i], false);
	}
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(msg, msglen, "cannot fork: %s", strerror(errno));
		goto fail;
	}
	if (pid == 0) {
		int fds[3] = {in[0], out[1], err[1]};
		supervise(ctl[0], st[1], fds, argv, envp, cwd);
	}
	close(ctl[0]);
	close(st[1]);
	close(in[0]);
	close(out[1]);
	close(err[1]);
	memset(p, 0, sizeof(*p));
	p->sup = pid;
	p->ctl = agent_track_fd(ctl[1], true);
	p->status = agent_track_fd(st[0], true);
	p->in = agent_track_fd(in[1], true);
	p->out = agent_track_fd(out[0], true);
	p->err = agent_track_fd(err[0], true);
	return 0;
fail:;
	int *all[] = {ctl, st, in, out, err};
	for (int i = 0; i < 5; i++)
		for (int j = 0; j < 2; j++)
			if (all[i][j] >= 0)
				close(all[i][j]);
	return -1;
}

void proc_signal(proc *p, int sig)
{
	if (p->ctl < 0 || p->killing)
		return;
	if (sig == SIGKILL)
		p->killing = true;
	uint8_t order = (uint8_t)sig;
	ssize_t n = write(p->ctl, &order, 1);
	(void)n; /* a gone supervisor has already torn its tree down */
}

void proc_release(proc *p)
{
	if (p->ctl >= 0 && !p->killing) {
		uint8_t order = 0;
		ssize_t n = write(p->ctl, &order, 1);
		(void)n;
	}
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

void proc_close(proc *p)
{
	close_fd(&p->ctl);
	close_fd(&p->status);
	close_fd(&p->in);
	close_fd(&p->out);
	close_fd(&p->err);
}
