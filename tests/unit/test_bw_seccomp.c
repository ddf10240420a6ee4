/*
 * tests/unit/test_bw_seccomp.c - the bubblewrap provider's seccomp filter (bw_seccomp.h),
 * loaded for real: every refused call refused with the errno the policy says, calls from
 * another architecture killed, ordinary programs unaffected, and the memfd sealed.
 *
 * Probes. Each call is made by a probe: this program again, run with --probe the way bwrap
 * runs a sandboxed program. It reads the filter from an inherited descriptor to EOF, loads
 * it (no_new_privs, then seccomp), makes one raw system call and exits with its errno (0 when
 * it succeeded). A new program rather than a forked child because the call must reach the
 * kernel: under valgrind a forked child is still emulated, and valgrind answers the calls it
 * does not know (fsopen, pidfd_getfd, mount_setattr...) with ENOSYS itself. valgrind does not
 * follow exec, so the probes run natively and valgrind checks the module in this process.
 *
 * Proving the filter, not bad arguments: each refused call is made a second time without the
 * filter (the control) and must then not fail with EPERM (or ENOSYS for clone3). The
 * arguments are chosen so that the kernel rejects them for a reason of its own (EINVAL,
 * EBADF, ENOENT...) or lets the call succeed harmlessly, even as root: nothing here changes
 * the host. Where the kernel checks a privilege before the arguments, the control says
 * something only when we hold that capability and is skipped otherwise; kexec has no control
 * (lockdown and kexec_load_disabled refuse even root). Each case prints both results.
 * Calls that do not exist on this architecture are not in the filter and get no case.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <seccomp.h>

#include "bw_seccomp.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#define UFFD_USER_MODE_ONLY       1  /* linux/userfaultfd.h */
#define SYSLOG_ACTION_SIZE_BUFFER 10 /* linux/syslog.h is not exported */

/* Argument values the probe replaces before the call: a descriptor of a pseudo-terminal
 * that is its controlling terminal, a pointer to "", a pointer to a zeroed 4 KiB buffer. */
#define PTY (-0x7e5701L)
#define STR (-0x7e5702L)
#define BUF (-0x7e5703L)

/* Control kinds besides a capability number: arguments checked first, or no control. */
enum { ARGS = -1, NONE = -2 };

/* A probe that could not do its job (the message is on its stderr). Errnos are below. */
#define PROBE_BROKEN 200

#if LONG_MAX > 0x7fffffffL
#define HIGH (1L << 32) /* a bit the kernel drops from 32-bit arguments */
#endif

struct refusal {
	const char *name;    /* the call, as libseccomp names it */
	const char *variant; /* which use, for calls refused only for some; NULL = any */
	long a[6];
	int control; /* ARGS, NONE, or the capability the kernel checks before the arguments */
	int expect;  /* 0 = EPERM */
};

/* The control's result, when there is one, is in the comment. */
static const struct refusal refusals[] = {
    {"ptrace", NULL, {PTRACE_DETACH, -1}, ARGS, 0},          /* ESRCH: no process -1 */
    {"process_vm_readv", NULL, {0, 0, 0, 0, 0, 1}, ARGS, 0}, /* EINVAL: flags */
    {"process_vm_writev", NULL, {0, 0, 0, 0, 0, 1}, ARGS, 0},
    {"pidfd_getfd", NULL, {-1, 0, 1}, ARGS, 0},         /* EINVAL: flags */
    {"mount", NULL, {0, STR, 0, 0, 0}, ARGS, 0},        /* ENOENT: target "" */
    {"umount", NULL, {STR}, ARGS, 0},                   /* ENOENT */
    {"umount2", NULL, {STR, 0}, ARGS, 0},               /* ENOENT */
    {"pivot_root", NULL, {STR, STR}, CAP_SYS_ADMIN, 0}, /* ENOENT */
    {"chroot", NULL, {STR}, ARGS, 0},                   /* ENOENT */
    {"fsopen", NULL, {STR, 0}, CAP_SYS_ADMIN, 0},       /* ENODEV: no file system "" */
    {"fsconfig", NULL, {-1, 0, 0, 0, 0}, ARGS, 0},      /* EINVAL: fd -1 */
    {"fsmount", NULL, {-1, 0, 0}, CAP_SYS_ADMIN, 0},    /* EBADF */
    {"fspick", NULL, {-1, STR, 0}, CAP_SYS_ADMIN, 0},   /* EBADF or ENOENT */
    {"move_mount", NULL, {-1, STR, -1, STR, 0}, CAP_SYS_ADMIN, 0},
    {"open_tree", NULL, {AT_FDCWD, STR, 0}, ARGS, 0},             /* ENOENT */
    {"mount_setattr", NULL, {-1, STR, 0, 0, 0}, ARGS, 0},         /* EINVAL: size 0 */
    {"unshare", NULL, {0}, ARGS, 0},                              /* succeeds: unshares nothing */
    {"setns", NULL, {-1, 0}, ARGS, 0},                            /* EBADF */
    {"kexec_load", NULL, {0, 1000, 0, 0}, NONE, 0},               /* EINVAL: over 16 segments */
    {"kexec_file_load", NULL, {-1, -1, 0, 0, 1L << 30}, NONE, 0}, /* EINVAL: flags */
    {"reboot", NULL, {0, 0, 0, 0}, CAP_SYS_BOOT, 0},              /* EINVAL: no magic */
    {"init_module", NULL, {0, 0, STR}, CAP_SYS_MODULE, 0},        /* ENOEXEC: empty image */
    {"finit_module", NULL, {-1, STR, 0}, CAP_SYS_MODULE, 0},      /* EBADF */
    {"delete_module", NULL, {STR, 0}, CAP_SYS_MODULE, 0},         /* ENOENT */
    {"bpf", NULL, {-1, 0, 0}, CAP_SYS_ADMIN, 0},                  /* EINVAL: command -1 */
    {"perf_event_open", NULL, {0, 0, -1, -1, 1L << 30}, ARGS, 0}, /* EINVAL: flags */
    {"userfaultfd", NULL, {UFFD_USER_MODE_ONLY}, ARGS, 0},        /* succeeds */
    {"keyctl", NULL, {-1}, ARGS, 0},                              /* EOPNOTSUPP */
    {"add_key", NULL, {STR, STR, 0, 0, 0}, ARGS, 0},              /* EINVAL: key type "" */
    {"request_key", NULL, {STR, STR, 0, 0}, ARGS, 0},             /* EINVAL */
    {"acct", NULL, {STR}, CAP_SYS_PACCT, 0},    /* ENOENT (NULL would stop accounting) */
    {"swapon", NULL, {STR, 1L << 30}, ARGS, 0}, /* EINVAL: flags */
    {"swapoff", NULL, {STR}, CAP_SYS_ADMIN, 0}, /* ENOENT */
    {"syslog", NULL, {SYSLOG_ACTION_SIZE_BUFFER, 0, 0}, CAP_SYSLOG, 0}, /* succeeds */
    {"settimeofday", NULL, {0, 0}, CAP_SYS_TIME, 0},                    /* succeeds: sets nothing */
    {"stime", NULL, {0}, ARGS, 0},                                      /* EFAULT */
    {"clock_settime", NULL, {100, 0}, ARGS, 0},                         /* EINVAL: no clock 100 */
    {"clock_settime64", NULL, {100, 0}, ARGS, 0},
    {"clock_adjtime", NULL, {100, BUF}, ARGS, 0}, /* EINVAL (BUF: modes 0, would only read) */
    {"clock_adjtime64", NULL, {100, BUF}, ARGS, 0},
    {"quotactl", NULL, {0xff, 0, 0, 0}, ARGS, 0},          /* EINVAL: quota type 255 */
    {"quotactl_fd", NULL, {-1, 0xff, 0, 0}, ARGS, 0},      /* EINVAL or EBADF */
    {"lookup_dcookie", NULL, {0, 0, 0}, CAP_SYS_ADMIN, 0}, /* EINVAL, ENOSYS since 6.8 */
    {"vhangup", NULL, {0}, CAP_SYS_TTY_CONFIG, 0},         /* succeeds: the probe has no tty */
    {"open_by_handle_at", NULL, {-1, 0, 0}, CAP_DAC_READ_SEARCH, 0}, /* EBADF or EFAULT */
    {"iopl", NULL, {4}, ARGS, 0},               /* EINVAL: level 4 (ENOSYS: no port I/O) */
    {"ioperm", NULL, {0x10000, 1, 1}, ARGS, 0}, /* EINVAL: past port 0xffff (or ENOSYS) */
    {"vm86", NULL, {0, 0}, ARGS, 0},
    {"vm86old", NULL, {0}, ARGS, 0},
    {"nfsservctl", NULL, {0, 0, 0}, ARGS, 0},                           /* ENOSYS since 3.1 */
    {"uselib", NULL, {STR}, ARGS, 0},                                   /* ENOENT, or ENOSYS */
    {"fanotify_init", NULL, {FAN_CLOEXEC, O_RDONLY}, CAP_SYS_ADMIN, 0}, /* succeeds */
    {"_sysctl", NULL, {0}, ARGS, 0},                                    /* ENOSYS since 5.5 */
    /* A thread without CLONE_SIGHAND: EINVAL before any namespace or privilege is looked at. */
    {"clone", "CLONE_NEWNS", {CLONE_NEWNS | CLONE_THREAD}, ARGS, 0},
    {"clone", "CLONE_NEWUTS", {CLONE_NEWUTS | CLONE_THREAD}, ARGS, 0},
    {"clone", "CLONE_NEWIPC", {CLONE_NEWIPC | CLONE_THREAD}, ARGS, 0},
    {"clone", "CLONE_NEWUSER", {CLONE_NEWUSER | CLONE_THREAD}, ARGS, 0},
    {"clone", "CLONE_NEWPID", {CLONE_NEWPID | CLONE_THREAD}, ARGS, 0},
    {"clone", "CLONE_NEWNET", {CLONE_NEWNET | CLONE_THREAD}, ARGS, 0},
    {"clone", "CLONE_NEWCGROUP", {CLONE_NEWCGROUP | CLONE_THREAD}, ARGS, 0},
    {"clone", "CLONE_NEWTIME", {CLONE_NEWTIME | CLONE_THREAD}, ARGS, 0},
    {"clone3", NULL, {0, 0}, ARGS, ENOSYS}, /* EINVAL: size 0 */
    /* TIOCSTI succeeds on the probe's own terminal (EIO where legacy TIOCSTI is off); a pty
     * is no virtual console, so TIOCLINUX gives ENOTTY or EINVAL. */
    {"ioctl", "TIOCSTI", {PTY, TIOCSTI, BUF}, ARGS, 0},
    {"ioctl", "TIOCLINUX", {PTY, TIOCLINUX, BUF}, ARGS, 0},
#ifdef HIGH
    {"ioctl", "TIOCSTI with bit 32 (the kernel drops it)", {PTY, HIGH | TIOCSTI, BUF}, ARGS, 0},
    {"ioctl", "TIOCLINUX with bit 32", {PTY, HIGH | TIOCLINUX, BUF}, ARGS, 0},
#endif
    /* personality succeeds without the filter, whatever the value. */
    {"personality", "READ_IMPLIES_EXEC", {READ_IMPLIES_EXEC}, ARGS, 0},
    {"personality", "ADDR_NO_RANDOMIZE", {ADDR_NO_RANDOMIZE}, ARGS, 0},
    {"personality", "PER_LINUX32|ADDR_NO_RANDOMIZE", {PER_LINUX32 | ADDR_NO_RANDOMIZE}, ARGS, 0},
    {"personality", "0x1", {1}, ARGS, 0},
    {"personality", "0x80000000", {0x80000000L}, ARGS, 0},
    {"personality", "0xfffdfff7 (every bit but the free ones)", {0xfffdfff7L}, ARGS, 0},
    {"personality", "0xfffffff7 (all but PER_LINUX32)", {0xfffffff7L}, ARGS, 0},
    {"personality", "0xfffdffff (all but UNAME26)", {0xfffdffffL}, ARGS, 0},
    {"personality", "0x7fffffff", {0x7fffffffL}, ARGS, 0},
#ifdef HIGH
    {"personality", "READ_IMPLIES_EXEC with bit 32", {HIGH | READ_IMPLIES_EXEC}, ARGS, 0},
#endif
};

struct allowance {
	const char *name;
	const char *variant;
	long a[6];
};

/* Allowed under the filter: each must succeed. */
static const struct allowance allowances[] = {
    {"getpid", NULL, {0}},
    {"prctl", "PR_GET_NO_NEW_PRIVS", {PR_GET_NO_NEW_PRIVS}},
    {"clone", "SIGCHLD (a fork)", {SIGCHLD}},
    {"ioctl", "TCGETS", {PTY, TCGETS, BUF}},
    {"ioctl", "TIOCGWINSZ", {PTY, TIOCGWINSZ, BUF}},
    {"adjtimex", "modes 0 (reads the clock)", {BUF}},
    {"personality", "0xffffffff (the query)", {0xffffffffL}},
    {"personality", "PER_LINUX", {PER_LINUX}},
    {"personality", "PER_LINUX32", {PER_LINUX32}},
    {"personality", "UNAME26", {UNAME26}},
    {"personality", "PER_LINUX32|UNAME26", {PER_LINUX32 | UNAME26}},
#ifdef HIGH
    {"personality", "-1 (the query to the kernel)", {-1L}},
    {"personality", "PER_LINUX32 with bit 32", {HIGH | PER_LINUX32}},
#endif
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ---- the probe (this program run with --probe) ------------------------------------------ */

static char probe_buf[4096];

static _Noreturn void probe_broken(const char *what)
{
	fprintf(stderr, "probe: %s: %s\n", what, strerror(errno));
	_exit(PROBE_BROKEN);
}

/* A new pseudo-terminal's slave side, made the controlling terminal (we lead a new session
 * and do not pass O_NOCTTY), as the terminal of a sandboxed program would be. The master
 * side stays open so that the slave is not hung up. */
static int probe_pty(void)
{
	int master = posix_openpt(O_RDWR | O_NOCTTY);
	const char *name;
	if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0 || !(name = ptsname(master)))
		probe_broken("pseudo-terminal");
	int slave = open(name, O_RDWR);
	if (slave < 0)
		probe_broken(name);
	return slave;
}

/* What bwrap does with --seccomp FD: read the program to EOF and load it. */
static void probe_load(int fd)
{
	struct sock_filter insns[BPF_MAXINSNS + 1];
	size_t len = 0;
	ssize_t n;
	while ((n = read(fd, (char *)insns + len, sizeof(insns) - len)) > 0)
		len += (size_t)n;
	if (n < 0)
		probe_broken("read the filter");
	if (len == 0 || len % sizeof(*insns) || len == sizeof(insns)) {
		errno = EINVAL;
		probe_broken("the filter's size");
	}
	close(fd);
	struct sock_fprog prog = {(unsigned short)(len / sizeof(*insns)), insns};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
		probe_broken("load the filter");
}

static void *probe_thread(void *arg)
{
	return arg;
}

/* Everyday things a sandboxed program does. Threads and posix_spawn go through glibc's
 * clone3, which gets ENOSYS, and its fallback to clone. */
static _Noreturn void probe_ordinary(void)
{
	int st, fds[2];
	char c = 0;
	pid_t pid = fork();
	if (pid == 0)
		_exit(7);
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 7)
		probe_broken("fork");
	pthread_t t;
	void *back = NULL;
	if ((errno = pthread_create(&t, NULL, probe_thread, &c)) ||
	    (errno = pthread_join(t, &back)) || back != &c)
		probe_broken("pthread_create");
	char *argv[] = {"true", NULL}, *envp[] = {NULL};
	if ((errno = posix_spawn(&pid, "/bin/true", NULL, NULL, argv, envp)) ||
	    waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		probe_broken("posix_spawn /bin/true");
	if (pipe2(fds, O_CLOEXEC) < 0 || write(fds[1], "x", 1) != 1 || read(fds[0], &c, 1) != 1 ||
	    c != 'x')
		probe_broken("pipe");
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, &c, 1) != 0)
		probe_broken("/dev/null");
	_exit(0);
}

#if defined(__x86_64__)
/* getpid through the i386 entry; r8-r11 are not preserved by it. */
static long int80_getpid(void)
{
	long r;
	__asm__ volatile("int $0x80" : "=a"(r) : "a"(20L) : "memory", "r8", "r9", "r10", "r11");
	return r;
}
#endif

/* argv: self --probe FD KIND NR A0..A5, where FD is the filter or -1 for none, and KIND
 * "call" (the raw call NR), "ordinary" or "int80". Exits with the call's errno. */
static _Noreturn void probe_main(int argc, char **argv)
{
	if (argc != 11) {
		errno = EINVAL;
		probe_broken("usage: --probe FD call|ordinary|int80 NR A0 A1 A2 A3 A4 A5");
	}
	int fd = atoi(argv[2]);
	const char *kind = argv[3];
	long nr = strtol(argv[4], NULL, 0), a[6];
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); /* no core file when the filter kills us */
	if (setsid() < 0)                   /* no controlling terminal until we open one */
		probe_broken("setsid");
	for (int i = 0; i < 6; i++) {
		a[i] = strtol(argv[5 + i], NULL, 0);
		if (a[i] == PTY)
			a[i] = probe_pty();
		else if (a[i] == STR)
			a[i] = (long)"";
		else if (a[i] == BUF)
			a[i] = (long)probe_buf;
	}
	if (fd >= 0)
		probe_load(fd);
	if (strcmp(kind, "ordinary") == 0)
		probe_ordinary();
	if (strcmp(kind, "int80") == 0) {
#if defined(__x86_64__)
		/* A kernel without the entry faults: die of it, without a sanitizer report. */
		signal(SIGSEGV, SIG_DFL);
		long r = int80_getpid();
		_exit(r > 0 ? 0 : r < 0 && r > -4096 ? (int)-r : PROBE_BROKEN);
#else
		_exit(ENOSYS);
#endif
	}
	pid_t self = getpid();
	errno = 0;
	long r = syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	int e = r == -1 ? errno : 0;
	if (getpid() != self) /* the call made a process (clone), and this is it */
		_exit(0);
	if (nr == SYS_clone && r > 0)
		waitpid((pid_t)r, NULL, __WALL);
	_exit(e);
}

/* ---- the test's side -------------------------------------------------------------------- */

static char self_exe[PATH_MAX];
static int filter_fd = -1; /* built once for all cases */

/* Runs a probe under the filter (filter >= 0, through a descriptor of its own, as bwrap gets
 * it) or without; returns the errno of its call (0: it succeeded) or minus the signal that
 * killed it. */
static int probe(int filter, const char *kind, long nr, const long a[6])
{
	char num[8][32];
	int fd = -1;
	if (filter >= 0) {
		fd = bw_seccomp_reopen(filter);
		assert_true(fd >= 0);
	}
	snprintf(num[0], sizeof(num[0]), "%d", fd);
	snprintf(num[1], sizeof(num[1]), "%ld", nr);
	for (int i = 0; i < 6; i++)
		snprintf(num[2 + i], sizeof(num[2 + i]), "%ld", a ? a[i] : 0);
	char *argv[] = {self_exe, "--probe", num[0], (char *)kind, num[1], num[2],
	                num[3],   num[4],    num[5], num[6],       num[7], NULL};
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		if (fd < 0 || fcntl(fd, F_SETFD, 0) == 0) /* bwrap inherits it */
			execv(self_exe, argv);
		_exit(PROBE_BROKEN);
	}
	assert_true(pid > 0);
	if (fd >= 0)
		close(fd);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (WIFSIGNALED(st))
		return -WTERMSIG(st);
	assert_true(WIFEXITED(st));
	if (WEXITSTATUS(st) == PROBE_BROKEN)
		fail_msg("the probe failed (see its message above)");
	return WEXITSTATUS(st);
}

/* An errno's or a signal's name, for messages. */
static const char *ename(int e)
{
	static char buf[4][48];
	static int i;
	char *b = buf[i++ % 4];
	if (e == 0)
		return "success";
	if (e < 0)
		snprintf(b, sizeof(buf[0]), "killed by %s",
		         sigabbrev_np(-e) ? sigabbrev_np(-e) : "?");
	else
		snprintf(b, sizeof(buf[0]), "%s", strerrorname_np(e) ? strerrorname_np(e) : "?");
	return b;
}

static bool have_cap(int cap)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	unsigned long long eff = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1)
			break;
	if (f)
		fclose(f);
	return (eff >> cap) & 1;
}

/* main() registers cases only for calls of this architecture. */
static int resolve(const char *name)
{
	int nr = seccomp_syscall_resolve_name(name);
	assert_true(nr >= 0);
	return nr;
}

static void test_refused(void **state)
{
	const struct refusal *r = *state;
	const char *sp = r->variant ? " " : "", *v = r->variant ? r->variant : "";
	int expect = r->expect ? r->expect : EPERM;
	int nr = resolve(r->name);
	int got = probe(filter_fd, "call", nr, r->a);
	bool control = r->control == ARGS || (r->control >= 0 && have_cap(r->control));
	int ctl = control ? probe(-1, "call", nr, r->a) : 0;
	print_message("# %s%s%s: %s under the filter; without it: %s\n", r->name, sp, v, ename(got),
	              control           ? ename(ctl)
	              : r->control >= 0 ? "not run (a privilege is checked first, we lack it)"
	                                : "not run (kexec: host policy may refuse even root)");
	if (got != expect)
		fail_msg("%s%s%s under the filter: %s, not %s", r->name, sp, v, ename(got),
		         ename(expect));
	if (control && (ctl < 0 || ctl == EPERM || ctl == expect))
		fail_msg("%s%s%s without the filter: %s; the arguments alone would explain it",
		         r->name, sp, v, ename(ctl));
}

static void test_allowed(void **state)
{
	const struct allowance *w = *state;
	const char *sp = w->variant ? " " : "", *v = w->variant ? w->variant : "";
	int got = probe(filter_fd, "call", resolve(w->name), w->a);
	print_message("# %s%s%s: %s under the filter\n", w->name, sp, v, ename(got));
	if (got != 0)
		fail_msg("%s%s%s under the filter: %s", w->name, sp, v, ename(got));
}

/* Every refused name has cases above, every case's name is in the list, and libseccomp
 * knows each name (a typo would make a rule silently missing). */
static void test_refused_list(void **state)
{
	(void)state;
	size_t n = 0, here = 0;
	for (const char *const *p = bw_seccomp_refused; *p; p++, n++) {
		bool tested = false;
		for (size_t i = 0; i < COUNT(refusals); i++)
			tested |= strcmp(refusals[i].name, *p) == 0;
		if (!tested)
			fail_msg("%s is refused but not tested", *p);
		int nr = seccomp_syscall_resolve_name(*p);
		if (nr == __NR_SCMP_ERROR)
			fail_msg("libseccomp does not know %s", *p);
		here += nr >= 0;
	}
	for (size_t i = 0; i < COUNT(refusals); i++) {
		bool listed = false;
		for (const char *const *p = bw_seccomp_refused; *p; p++)
			listed |= strcmp(refusals[i].name, *p) == 0;
		if (!listed)
			fail_msg("%s is tested but not in bw_seccomp_refused", refusals[i].name);
	}
	assert_int_equal(bw_seccomp_refused_count(), here);
	assert_true(here > 40 && here <= n);
	print_message("# %zu calls listed, %zu of them on this architecture\n", n, here);
}

static size_t read_all(int fd, char *buf, size_t cap)
{
	size_t len = 0;
	ssize_t n;
	while ((n = read(fd, buf + len, cap - len)) > 0)
		len += (size_t)n;
	assert_true(n == 0);
	return len;
}

static void test_sealed_memfd(void **state)
{
	(void)state;
	struct stat st;
	assert_int_equal(fstat(filter_fd, &st), 0);
	assert_true(st.st_size > 0 && st.st_size % (off_t)sizeof(struct sock_filter) == 0);
	assert_int_equal(fcntl(filter_fd, F_GETFD), FD_CLOEXEC);
	assert_int_equal(fcntl(filter_fd, F_GET_SEALS),
	                 F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL);
	assert_int_equal(lseek(filter_fd, 0, SEEK_CUR), 0);
	assert_int_equal(pwrite(filter_fd, "x", 1, 0), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(ftruncate(filter_fd, 0), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(fcntl(filter_fd, F_ADD_SEALS, F_SEAL_WRITE), -1);
	assert_int_equal(errno, EPERM);

	/* Built again: the same program. */
	char why[256] = "";
	int again = bw_seccomp_build(why, sizeof(why));
	assert_true(again >= 0);
	static char a[65536], b[65536];
	size_t na = read_all(again, a, sizeof(a));
	assert_int_equal(na, st.st_size);
	assert_int_equal(pread(filter_fd, b, sizeof(b), 0), st.st_size);
	assert_memory_equal(a, b, na);
	close(again);
}

static void test_reopen(void **state)
{
	(void)state;
	static char a[65536], b[65536];
	struct stat st;
	assert_int_equal(fstat(filter_fd, &st), 0);
	int one = bw_seccomp_reopen(filter_fd), two = bw_seccomp_reopen(filter_fd);
	assert_true(one >= 0 && two >= 0 && one != two);
	assert_int_equal(fcntl(one, F_GETFD), FD_CLOEXEC);
	assert_int_equal(fcntl(one, F_GETFL) & O_ACCMODE, O_RDONLY);
	assert_int_equal(write(one, "x", 1), -1);
	assert_int_equal(errno, EBADF);
	/* Each descriptor reads the whole program from its start, whatever the other did. */
	assert_int_equal(read_all(one, a, sizeof(a)), st.st_size);
	assert_int_equal(read_all(two, b, sizeof(b)), st.st_size);
	assert_memory_equal(a, b, (size_t)st.st_size);
	assert_int_equal(read(one, a, 1), 0);
	assert_int_equal(lseek(filter_fd, 0, SEEK_CUR), 0);
	close(one);
	close(two);
	assert_int_equal(bw_seccomp_reopen(-1), -EBADF);
	assert_int_equal(bw_seccomp_reopen(one), -ENOENT); /* closed just now */
}

/* Out of descriptors: -1 and a message saying so. */
static void test_build_error(void **state)
{
	(void)state;
	struct rlimit old, low;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	int lowest = dup(0);
	assert_true(lowest >= 0);
	close(lowest);
	low = old;
	low.rlim_cur = (rlim_t)lowest; /* no new descriptor from here */
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	char why[256] = "";
	int fd = bw_seccomp_build(why, sizeof(why));
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	assert_int_equal(fd, -1);
	print_message("# %s\n", why);
	assert_non_null(strstr(why, "seccomp: cannot create a memfd: "));
	fd = bw_seccomp_build(NULL, 0); /* no room for a message is fine */
	assert_true(fd >= 0);
	close(fd);
}

static void test_ordinary(void **state)
{
	(void)state;
	assert_int_equal(probe(filter_fd, "ordinary", 0, NULL), 0);
}

#if defined(__x86_64__)
/* An x32 call enters as x86_64 with bit 30 in the number: the bad-architecture action. */
static void test_x32_killed(void **state)
{
	(void)state;
	const long a[6] = {0};
	int got = probe(filter_fd, "call", 0x40000000L | SYS_getpid, a);
	int ctl = probe(-1, "call", 0x40000000L | SYS_getpid, a);
	print_message("# x32 getpid: %s under the filter; without it: %s\n", ename(got),
	              ename(ctl));
	assert_int_equal(got, -SIGSYS);
	assert_true(ctl >= 0); /* ENOSYS without x32 support, success with it */
}

/* The i386 entry (int 0x80) uses another numbering: the bad-architecture action. */
static void test_i386_killed(void **state)
{
	(void)state;
	int ctl = probe(-1, "int80", 0, NULL);
	int got = probe(filter_fd, "int80", 0, NULL);
	print_message("# i386 getpid: %s under the filter; without it: %s\n", ename(got),
	              ename(ctl));
	if (ctl == 0)
		assert_int_equal(got, -SIGSYS);
	else /* no i386 entry in this kernel (IA32 emulation off): nothing for the filter to do */
		assert_int_equal(got, ctl);
}
#endif

static int group_setup(void **state)
{
	(void)state;
	char why[256] = "";
	filter_fd = bw_seccomp_build(why, sizeof(why));
	if (filter_fd < 0)
		print_error("bw_seccomp_build: %s\n", why);
	return filter_fd < 0 ? -1 : 0;
}

static int group_teardown(void **state)
{
	(void)state;
	close(filter_fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--probe") == 0)
		probe_main(argc, argv);
	ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
	if (n <= 0) {
		perror("/proc/self/exe");
		return 1;
	}
	self_exe[n] = '\0';

	static struct CMUnitTest tests[COUNT(refusals) + COUNT(allowances) + 8];
	static char names[COUNT(refusals) + COUNT(allowances)][96];
	size_t t = 0, k = 0;
	/* Calls that do not exist here are not in the filter: nothing to test. (No skip():
	 * cmocka's TAP says "not ok # SKIP", which the automake driver counts as a failure.) */
	printf("# not calls on this architecture, so not in the filter:");
	for (size_t i = 0; i < COUNT(refusals); i++, k++) {
		if (seccomp_syscall_resolve_name(refusals[i].name) < 0) {
			printf(" %s", refusals[i].name);
			continue;
		}
		snprintf(names[k], sizeof(names[k]), "refuses %s%s%s", refusals[i].name,
		         refusals[i].variant ? " " : "",
		         refusals[i].variant ? refusals[i].variant : "");
		tests[t++] =
		    (struct CMUnitTest){names[k], test_refused, NULL, NULL, (void *)&refusals[i]};
	}
	printf("\n");
	for (size_t i = 0; i < COUNT(allowances); i++, k++) {
		snprintf(names[k], sizeof(names[k]), "allows %s%s%s", allowances[i].name,
		         allowances[i].variant ? " " : "",
		         allowances[i].variant ? allowances[i].variant : "");
		tests[t++] =
		    (struct CMUnitTest){names[k], test_allowed, NULL, NULL, (void *)&allowances[i]};
	}
	tests[t++] = (struct CMUnitTest)cmocka_unit_test(test_refused_list);
	tests[t++] = (struct CMUnitTest)cmocka_unit_test(test_sealed_memfd);
	tests[t++] = (struct CMUnitTest)cmocka_unit_test(test_reopen);
	tests[t++] = (struct CMUnitTest)cmocka_unit_test(test_build_error);
	tests[t++] = (struct CMUnitTest)cmocka_unit_test(test_ordinary);
#if defined(__x86_64__)
	tests[t++] = (struct CMUnitTest)cmocka_unit_test(test_x32_killed);
	tests[t++] = (struct CMUnitTest)cmocka_unit_test(test_i386_killed);
#endif
	return _cmocka_run_group_tests("bw_seccomp", tests, t, group_setup, group_teardown);
}
