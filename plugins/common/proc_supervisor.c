/*
 * plugins/common/proc_supervisor.c - the supervisor process of aks_proc_run().
 *
 * This code runs in a fork() of a process that may be multi-threaded, and it
 * never execs (only its child, the program, started with vfork(), does). So
 * from the first line to _exit() it may call only async-signal-safe functions:
 * no malloc, no stdio, no opendir, no snprintf. Buffers are static (every
 * supervisor is its own process, so they are never shared) rather than on the
 * stack, because the stack is that of whichever host thread forked us and may
 * be small.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* pipe2, getdents64, close_range, openat2: Linux-only code */
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "aks_signals.h"
#include "proc_internal.h"

/* ---- small async-signal-safe helpers ------------------------------------- */

/* Closes every descriptor in [lo, hi]. */
static void close_range_fallback(unsigned lo, unsigned hi)
{
#ifdef SYS_close_range
	if (syscall(SYS_close_range, lo, hi, 0) == 0)
		return;
#endif
	/* Kernels before 5.9: close one by one up to the descriptor limit. */
	struct rlimit rl;
	unsigned max = 65536;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < max)
		max = (unsigned)rl.rlim_cur;
	for (unsigned fd = lo; fd <= hi && fd < max; fd++)
		close((int)fd);
}

/* Closes every descriptor except the n in keep[] (n small, all >= 0). */
static void close_all_except(int *keep, int n)
{
	/* Insertion sort: tiny n, and qsort is not async-signal-safe. */
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
			int t = keep[j];
			keep[j] = keep[j - 1];
			keep[j - 1] = t;
		}
	unsigned lo = 0;
	for (int i = 0; i < n; i++) {
		if ((unsigned)keep[i] > lo)
			close_range_fallback(lo, (unsigned)keep[i] - 1);
		lo = (unsigned)keep[i] + 1;
	}
	close_range_fallback(lo, ~0U);
}

/* Moves fd to a number >= 3 (close-on-exec), so 0-2 are free for the program. */
static int above_stdio(int fd)
{
	if (fd < 0 || fd > 2)
		return fd;
	int nfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	return nfd >= 0 ? nfd : fd;
}

static void append(char *buf, size_t cap, size_t *len, const char *s)
{
	while (*s && *len + 1 < cap)
		buf[(*len)++] = *s++;
	buf[*len] = '\0';
}

static void append_uint(char *buf, size_t cap, size_t *len, unsigned long v)
{
	char digits[24];
	int n = 0;
	do {
		digits[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n && *len + 1 < cap)
		buf[(*len)++] = digits[--n];
	buf[*len] = '\0';
}

/* strerror() is not async-signal-safe (locale); the few reasons that matter. */
static const char *exec_reason(int e)
{
	switch (e) {
	case ENOENT:
		return "command not found";
	case EACCES:
		return "permission denied";
	case ENOEXEC:
		return "exec format error";
	case E2BIG:
		return "argument list too long";
	case ENOMEM:
		return "out of memory";
	case ENOTDIR:
		return "not a directory";
	case ELOOP:
		return "too many levels of symbolic links";
	case ETXTBSY:
		return "text file busy";
	case ENAMETOOLONG:
		return "file name too long";
	default:
		return "cannot execute";
	}
}

/* Written to the program's stderr (fd 2) when it cannot be started. */
static void report(const char *what, const char *name, int e)
{
	char msg[512];
	size_t n = 0;
	append(msg, sizeof(msg), &n, "aksandbox: ");
	append(msg, sizeof(msg), &n, what);
	append(msg, sizeof(msg), &n, " '");
	append(msg, sizeof(msg), &n, name);
	append(msg, sizeof(msg), &n, "': ");
	append(msg, sizeof(msg), &n, exec_reason(e));
	append(msg, sizeof(msg), &n, " (errno ");
	append_uint(msg, sizeof(msg), &n, (unsigned long)e);
	append(msg, sizeof(msg), &n, ")\n");
	ssize_t w = write(2, msg, n);
	(void)w;
}

static char exec_path[PATH_MAX];

/* execvpe() without its allocation (it may malloc on ENOEXEC). Returns the
 * errno that best describes the failure. */
static int exec_search(const char *file, char *const argv[], char *const envp[], const char *path)
{
	if (strchr(file, '/')) {
		execve(file, argv, envp);
		return errno;
	}
	size_t flen = strlen(file);
	bool saw_eacces = false;
	const char *p = path;
	for (;;) {
		const char *colon = strchr(p, ':');
		size_t dlen = colon ? (size_t)(colon - p) : strlen(p);
		if (dlen + 1 + flen + 1 <= sizeof(exec_path)) {
			size_t off = 0;
			if (dlen) { /* an empty entry means the working directory */
				memcpy(exec_path, p, dlen);
				exec_path[dlen] = '/';
				off = dlen + 1;
			}
			memcpy(exec_path + off, file, flen + 1);
			execve(exec_path, argv, envp);
			switch (errno) {
			case EACCES:
				saw_eacces = true;
				break;
			case ENOENT:
			case ENOTDIR:
			case ELOOP:
			case ENAMETOOLONG:
			case ESTALE:
			case ENODEV:
			case ETIMEDOUT:
				break;
			default:
				return errno; /* found but cannot run: stop, as execvp does */
			}
		}
		if (!colon)
			break;
		p = colon + 1;
	}
	return saw_eacces ? EACCES : ENOENT;
}

static void send_msg(int ctl, int32_t kind, int32_t value)
{
	aks__proc_msg m = {kind, value};
	/* MSG_NOSIGNAL: a dead caller must not kill us before the cleanup. */
	while (send(ctl, &m, sizeof(m), MSG_NOSIGNAL) < 0 && errno == EINTR)
		;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* ---- killing the tree ------------------------------------------------------ */

/* Parses the ppid out of /proc/<pid>/stat: "pid (comm) state ppid ...".
 * comm may hold spaces and ')', so parse from the last ')'. */
static pid_t read_ppid(pid_t pid)
{
	char path[40];
	size_t n = 0;
	append(path, sizeof(path), &n, "/proc/");
	append_uint(path, sizeof(path), &n, (unsigned long)pid);
	append(path, sizeof(path), &n, "/stat");
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	char buf[512];
	ssize_t len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return -1;
	buf[len] = '\0';
	char *close_paren = NULL;
	for (char *c = buf; *c; c++)
		if (*c == ')')
			close_paren = c;
	if (!close_paren || close_paren[1] != ' ' || !close_paren[2] || close_paren[3] != ' ')
		return -1;
	const char *d = close_paren + 4;
	long v = 0;
	if (*d < '0' || *d > '9')
		return -1;
	while (*d >= '0' && *d <= '9')
		v = v * 10 + (*d++ - '0');
	return (pid_t)v;
}

#define MAX_TRACKED 4096
static pid_t tracked[MAX_TRACKED];
static size_t ntracked;
static unsigned char dents[16384] __attribute__((aligned(8)));

static bool is_tracked(pid_t pid)
{
	for (size_t i = 0; i < ntracked; i++)
		if (tracked[i] == pid)
			return true;
	return false;
}

/*
 * SIGKILLs every descendant of `self`: every process whose parent chain leads
 * to us. Because we are a subreaper, a process whose parent died was
 * reparented to us, so the chain never breaks. Passes over /proc repeat until
 * one finds no new descendant (a child may be listed before its parent).
 * When the table is full, the process is still killed; its children become
 * ours when it dies and the caller's next round finds them.
 * Returns false when /proc cannot be read.
 */
static bool kill_descendants(pid_t self)
{
	int dfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return false;
	ntracked = 0;
	tracked[ntracked++] = self;
	bool grew;
	do {
		grew = false;
		if (lseek(dfd, 0, SEEK_SET) < 0)
			break;
		for (;;) {
			ssize_t n = getdents64(dfd, dents, sizeof(dents));
			if (n <= 0)
				break;
			for (ssize_t off = 0; off < n;) {
				const struct dirent64 *d = (const struct dirent64 *)(dents + off);
				off += d->d_reclen;
				const char *s = d->d_name;
				long pid = 0;
				while (*s >= '0' && *s <= '9' && pid < INT_MAX / 10)
					pid = pid * 10 + (*s++ - '0');
				if (*s || pid <= 0 || pid == self || is_tracked((pid_t)pid))
					continue;
				pid_t ppid = read_ppid((pid_t)pid);
				if (ppid <= 0 || !is_tracked(ppid))
					continue;
				kill((pid_t)pid, SIGKILL);
				if (ntracked < MAX_TRACKED) {
					tracked[ntracked++] = (pid_t)pid;
					grew = true;
				}
			}
		}
	} while (grew);
	close(dfd);
	return true;
}

/* How long the kill phase may go on without reaping anything. Only a process
 * we may not signal (a setuid program, when we are not root) or one stuck in
 * the kernel gets here; we then report rather than hang the caller. */
#define KILL_STALL_MS 3000

/* Reaps every child that has ended (the program's status when it is one); *reaped when any
 * was. True once no child is left (ECHILD; or an error there is nothing to do about). */
static bool reap_ended(pid_t prog, int *status, bool *done, bool *reaped)
{
	for (;;) {
		int st;
		pid_t p = waitpid(-1, &st, WNOHANG);
		if (p > 0) {
			*reaped = true;
			if (p == prog && !*done) {
				*status = st;
				*done = true;
			}
			continue;
		}
		if (p == 0)
			return false;
		if (errno != EINTR)
			return true;
	}
}

/* Kills and reaps until we have no child left (waitpid says ECHILD): then no
 * descendant is left either. Records the program's status when it is reaped. */
static void kill_and_reap_all(pid_t self, pid_t prog, int *status, bool *done)
{
	long nap = 1;
	int64_t last_progress = aks_proc_mono_ms();
	bool reaped = false;
	/* The common end (the program exited and left nothing running) costs no pass over
	 * /proc: with no child left there is no descendant left. */
	if (reap_ended(prog, status, done, &reaped))
		return;
	for (;;) {
		/* Without /proc, the program's process group is all we can reach. */
		if (!kill_descendants(self))
			kill(-prog, SIGKILL);
		reaped = false;
		if (reap_ended(prog, status, done, &reaped))
			return;
		if (reaped) {
			nap = 1;
			last_progress = aks_proc_mono_ms();
		} else {
			if (aks_proc_mono_ms() - last_progress > KILL_STALL_MS)
				return;
			/* Killed processes take a moment to die; back off a
			 * little rather than spin. */
			sleep_ms(nap);
			if (nap < 16)
				nap *= 2;
		}
	}
}

/* ---- the program ------------------------------------------------------------ */

/* Runs in the vfork() child: the supervisor is suspended, and this shares its
 * memory until execve() or _exit(), so it only makes system calls and writes
 * nothing the supervisor reads. */
__attribute__((noreturn)) static void run_program(const aks__proc_sup_args *a, int ctl, int out_w,
                                                  int err_w)
{
	struct sigaction dfl;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	sigaction(SIGPIPE, &dfl, NULL); /* the supervisor ignores it; the program must not */
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	setpgid(0, 0);
	/* The caller learns our pid (= our process group) before we run a single
	 * instruction of the program: a program that kills the supervisor at once
	 * (kill $PPID) cannot leave the caller unable to find its process group. */
	send_msg(ctl, AKS__PROC_MSG_STARTED, getpid());

	/* Our inherited descriptors are all >= 3 (see aks__proc_supervise), so
	 * 0-2 are free and the dup2()s below cannot clobber them. */
	int devnull = open("/dev/null", O_RDONLY);
	if (devnull > 0) {
		dup2(devnull, 0);
		close(devnull);
	}
	dup2(out_w, 1);
	dup2(err_w, 2);
	/* Into the cgroups first (so the limits hold from the first instruction on), then the
	 * descriptor handed over as 3; above 2, so the dup2()s above left them alone. */
	for (int i = 0; i < a->n_join; i++) {
		ssize_t n;
		do
			n = write(a->join_fds[i], "0", 1);
		while (n < 0 && errno == EINTR);
		if (n != 1) {
			report("cannot join the cgroup", "(cgroup.procs)", errno);
			_exit(127);
		}
	}
	if (a->pass_fd > 0) {
		if (a->pass_fd == 3)
			fcntl(3, F_SETFD, 0);
		else
			dup2(a->pass_fd, 3);
	}
	close_range_fallback(a->pass_fd > 0 ? 4 : 3, ~0U);
	if (devnull < 0) {
		report("cannot open", "/dev/null", errno);
		_exit(127);
	}
	if (a->cwd && chdir(a->cwd) < 0) {
		report("cannot enter working directory", a->cwd, errno);
		_exit(127);
	}
	int e = exec_search(a->argv[0], (char *const *)a->argv, (char *const *)a->envp, a->path);
	report("cannot run", a->argv[0], e);
	_exit(e == ENOENT ? 127 : 126);
}

/* Starts the program with vfork(): the supervisor is a copy of the host, whose
 * page tables a fork() would copy once more (about 5 % of `aksandbox run --
 * true`, measured). Returns once the program has exec'd or exited: its pid, or
 * -1 with errno. Kept small, so no local of the supervisor lives across the
 * call. */
__attribute__((noinline)) static pid_t start_program(const aks__proc_sup_args *a, int ctl,
                                                     int out_w, int err_w)
{
	pid_t pid = vfork();
	if (pid == 0)
		run_program(a, ctl, out_w, err_w);
	return pid;
}

/* ---- the supervisor ------------------------------------------------------------ */

void aks__proc_supervise(const aks__proc_sup_args *a)
{
	/* The caller blocked every signal before fork(), so none of the host's
	 * handlers can run here. Reset them all before unblocking anything. */
	aks__signals_default_all();
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);

	/* SIGCHLD stays blocked and arrives through a signalfd, so poll() can
	 * wait for "a child changed" and "the caller spoke" at once. */
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_SETMASK, &chld, NULL);
	int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);

	/* Keep only our own descriptors (this also drops those of other
	 * executions that a concurrent thread had open when we were forked,
	 * so their pipes still see EOF on time). */
	int out_w = above_stdio(a->out_w);
	int err_w = above_stdio(a->err_w);
	int ctl = above_stdio(a->ctl);
	sfd = above_stdio(sfd);
	int keep[5 + AKS_PROC_MAX_JOIN] = {out_w, err_w, ctl};
	int nkeep = 3;
	if (sfd >= 0)
		keep[nkeep++] = sfd;
	/* The program's own (a copy of the arguments: ours are const) */
	aks__proc_sup_args mine = *a;
	if (mine.pass_fd > 0)
		keep[nkeep++] = mine.pass_fd = above_stdio(mine.pass_fd);
	for (int i = 0; i < mine.n_join; i++)
		keep[nkeep++] = mine.join_fds[i] = above_stdio(mine.join_fds[i]);
	close_all_except(keep, nkeep);
	a = &mine;

	/* Orphans of the program become our children, not init's. Our own
	 * process group keeps terminal signals aimed at the caller's group off
	 * us: if the caller dies, we see EOF and clean up. */
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	setpgid(0, 0);
	pid_t self = getpid();

	pid_t prog = start_program(a, ctl, out_w, err_w);
	if (prog < 0) {
		send_msg(ctl, AKS__PROC_MSG_FAILED, errno);
		_exit(1);
	}
	/* The program has exec'd (or failed and exited) and has said STARTED. */
	close(out_w);
	close(err_w);

	int status = 0;
	bool done = false;
	bool kill_requested = false;
	while (!done && !kill_requested) {
		struct pollfd p[2] = {{ctl, POLLIN, 0}, {sfd, POLLIN, 0}};
		/* Without a signalfd, look for the child every 20 ms. */
		int r = poll(p, sfd >= 0 ? 2 : 1, sfd >= 0 ? -1 : 20);
		if (r < 0 && errno != EINTR) {
			kill_requested = true; /* cannot wait: fail safe */
			break;
		}
		if (r > 0 && p[0].revents) {
			char c;
			ssize_t n = recv(ctl, &c, 1, MSG_DONTWAIT);
			/* A kill byte, EOF (the caller died) or an error: kill. */
			if (n != -1 || (errno != EAGAIN && errno != EINTR))
				kill_requested = true;
		}
		if (sfd >= 0 && r > 0 && p[1].revents) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) > 0)
				;
		}
		/* Reap whatever died, including orphans reparented to us. */
		for (;;) {
			int st;
			pid_t pid = waitpid(-1, &st, WNOHANG);
			if (pid < 0 && errno == EINTR)
				continue;
			if (pid <= 0)
				break;
			if (pid == prog) {
				status = st;
				done = true;
			}
		}
	}

	/* The program ended or must die: either way nothing it started may
	 * outlive this call. Its process group first (one syscall), then every
	 * descendant wherever it moved. */
	if (!done)
		kill(-prog, SIGKILL);
	kill_and_reap_all(self, prog, &status, &done);
	send_msg(ctl, done ? AKS__PROC_MSG_EXITED : AKS__PROC_MSG_FAILED, done ? status : ECHILD);
	_exit(0);
}
