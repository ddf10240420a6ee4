/*
 * plugins/bubblewrap/bw_seccomp.c - the sandbox's seccomp filter: the rules, built with
 * libseccomp, exported as BPF into a sealed memfd for `bwrap --seccomp FD`. The policy and
 * why are in bw_seccomp.h.
 *
 * Architectures. seccomp_init() puts only the native architecture in the filter, and its
 * bad-architecture action (kill) applies to calls made through any other entry, such as
 * i386's int 0x80 on x86_64, whose numbers mean different calls. x32 is subtler: its calls
 * enter as x86_64 (same AUDIT_ARCH) with bit 30 (__X32_SYSCALL_BIT) set in the number.
 * libseccomp's x86_64 filter sends every number >= 0x40000000 other than -1 to the
 * bad-architecture action unless x32 is in the filter, which it is not, so x32 calls kill
 * the process too and cannot bypass the rules. We ask for kill-process rather than
 * libseccomp's default kill-thread, so that a multi-threaded program dies as a whole.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* memfd_create, F_ADD_SEALS */
#endif

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <unistd.h>

#include <seccomp.h>

#include "bw_seccomp.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080 /* glibc before 2.36 lacks it */
#endif

const char *const bw_seccomp_refused[] = {
    /* another process's memory and descriptors */
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
    /* the mount table and the root directory: bwrap built the view, the program keeps it */
    "mount", "umount", "umount2", "pivot_root", "chroot", "fsopen", "fsconfig", "fsmount", "fspick",
    "move_mount", "open_tree", "mount_setattr",
    /* namespaces: none made, none entered (clone's flags below) */
    "unshare", "setns",
    /* another kernel, modules */
    "kexec_load", "kexec_file_load", "reboot", "init_module", "finit_module", "delete_module",
    /* large kernel interfaces an unprivileged program can reach: a history of exploits */
    "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
    /* host-wide state and old escape routes. adjtimex stays: with modes 0 it only reads,
     * and setting the clock needs CAP_SYS_TIME; name_to_handle_at stays too, its
     * counterpart open_by_handle_at is the known container escape. */
    "acct", "swapon", "swapoff", "syslog", "settimeofday", "stime", "clock_settime",
    "clock_settime64", "clock_adjtime", "clock_adjtime64", "quotactl", "quotactl_fd",
    "lookup_dcookie", "vhangup", "open_by_handle_at", "iopl", "ioperm", "vm86", "vm86old",
    "nfsservctl", "uselib", "fanotify_init", "_sysctl",
    /* only some uses: see add_rules() */
    "clone", "clone3", "ioctl", "personality", NULL};

size_t bw_seccomp_refused_count(void)
{
	size_t n = 0;
	for (const char *const *p = bw_seccomp_refused; *p; p++)
		n += seccomp_syscall_resolve_name(*p) >= 0;
	return n;
}

static int say(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int say(char *why, size_t whylen, const char *fmt, ...)
{
	if (why && whylen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* One rule: the call nr fails as action says when all n comparisons hold (always if n = 0). */
static int rule(scmp_filter_ctx ctx, const char *name, int nr, uint32_t action, unsigned int n,
                const struct scmp_arg_cmp *cmp, char *why, size_t whylen)
{
	int rc = seccomp_rule_add_array(ctx, action, nr, n, cmp);
	if (rc < 0)
		return say(why, whylen, "seccomp: cannot add the rule for %s: %s", name,
		           strerror(-rc));
	return 0;
}

/* clone with any of these flags: a new namespace. CLONE_NEWTIME shares its bit with the
 * exit signal in clone's flags (it only works through clone3 and unshare), and no valid
 * signal has that bit, so refusing it costs nothing. */
static const unsigned long bw_namespace_flags[] = {
    CLONE_NEWNS,  CLONE_NEWUTS, CLONE_NEWIPC,    CLONE_NEWUSER,
    CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWCGROUP, CLONE_NEWTIME,
};

/*
 * personality: the bits a program may set are PER_LINUX32 and UNAME26; 0xffffffff only
 * asks. The kernel takes the argument as unsigned int, so only the low 32 bits count, as
 * the masks below do. libseccomp allows one comparison per argument in a rule, so "none of
 * the allowed values" is spelled out over the other 30 bits: if some are set and some are
 * clear, then for one of them the next (cyclically) is clear: a rule per such pair. If all
 * are set, the value is refused unless both free bits are set too (0xffffffff).
 */
static int add_personality(scmp_filter_ctx ctx, int nr, char *why, size_t whylen)
{
	const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
	const uint32_t free_bits = PER_LINUX32 | UNAME26, others = ~free_bits;
	uint32_t bit[32];
	int n = 0;
	for (int b = 0; b < 32; b++)
		if (others & (UINT32_C(1) << b))
			bit[n++] = UINT32_C(1) << b;
	for (int i = 0; i < n; i++) {
		uint32_t set = bit[i], clear = bit[(i + 1) % n];
		struct scmp_arg_cmp c = SCMP_A0(SCMP_CMP_MASKED_EQ, set | clear, set);
		if (rule(ctx, "personality", nr, eperm, 1, &c, why, whylen) < 0)
			return -1;
	}
	for (int i = 0; i < 2; i++) {
		uint32_t one_free = i ? PER_LINUX32 : UNAME26; /* and the other clear */
		struct scmp_arg_cmp c = SCMP_A0(SCMP_CMP_MASKED_EQ, others | one_free, others);
		if (rule(ctx, "personality", nr, eperm, 1, &c, why, whylen) < 0)
			return -1;
	}
	return 0;
}

/* The rules for one call of bw_seccomp_refused. */
static int add_rules(scmp_filter_ctx ctx, const char *name, int nr, char *why, size_t whylen)
{
	const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
	if (strcmp(name, "clone") == 0) {
		/* The flags are the first argument, except on s390, where they are the second. */
		uint32_t arch = seccomp_arch_native();
		unsigned int arg = arch == SCMP_ARCH_S390 || arch == SCMP_ARCH_S390X ? 1 : 0;
		for (size_t i = 0; i < sizeof(bw_namespace_flags) / sizeof(*bw_namespace_flags);
		     i++) {
			unsigned long f = bw_namespace_flags[i];
			struct scmp_arg_cmp has = {arg, SCMP_CMP_MASKED_EQ, f, f};
			if (rule(ctx, name, nr, eperm, 1, &has, why, whylen) < 0)
				return -1;
		}
		return 0;
	}
	if (strcmp(name, "ioctl") == 0) {
		/* The kernel truncates the request to unsigned int: compare the low 32 bits, or
		 * TIOCSTI with a high bit set would pass. TIOCSTI pushes input into the terminal,
		 * to be read by whatever runs there after the sandbox (a shell outside it);
		 * TIOCLINUX can do the same on a virtual console (selection paste). */
		static const unsigned long requests[] = {TIOCSTI, TIOCLINUX};
		for (size_t i = 0; i < 2; i++) {
			struct scmp_arg_cmp is =
			    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffff, requests[i]);
			if (rule(ctx, name, nr, eperm, 1, &is, why, whylen) < 0)
				return -1;
		}
		return 0;
	}
	if (strcmp(name, "personality") == 0)
		return add_personality(ctx, nr, why, whylen);
	if (strcmp(name, "clone3") == 0)
		return rule(ctx, name, nr, SCMP_ACT_ERRNO(ENOSYS), 0, NULL, why, whylen);
	return rule(ctx, name, nr, eperm, 0, NULL, why, whylen);
}

/* The filter as a BPF program in a new sealed memfd at offset 0, or -1. */
static int export_sealed(scmp_filter_ctx ctx, char *why, size_t whylen)
{
	int fd = memfd_create("aksandbox-seccomp", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return say(why, whylen, "seccomp: cannot create a memfd: %s", strerror(errno));
	const int seals = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL;
	int rc = seccomp_export_bpf(ctx, fd);
	if (rc < 0)
		say(why, whylen, "seccomp: cannot export the filter: %s", strerror(-rc));
	else if (fcntl(fd, F_ADD_SEALS, seals) < 0 || lseek(fd, 0, SEEK_SET) < 0)
		say(why, whylen, "seccomp: cannot seal the filter's memfd: %s", strerror(errno));
	else
		return fd;
	close(fd);
	return -1;
}

int bw_seccomp_build(char *why, size_t whylen)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return say(why, whylen,
		           "seccomp: cannot start a filter (libseccomp: out of memory)");
	/* Real errnos from seccomp_export_bpf() rather than ECANCELED. */
	(void)seccomp_attr_set(ctx, SCMP_FLTATR_API_SYSRAWRC, 1);
	/* Fails only where the kernel lacks kill-process (before 4.14), or cannot tell
	 * libseccomp (seccomp(2) refused): the default, kill the thread, still stops the call. */
	(void)seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	int rc = 0;
	for (const char *const *p = bw_seccomp_refused; *p && rc == 0; p++) {
		/* Negative: unknown to libseccomp (__NR_SCMP_ERROR) or known but not a call on
		 * this architecture (a pseudo number, which would only make a dead rule). */
		int nr = seccomp_syscall_resolve_name(*p);
		if (nr >= 0)
			rc = add_rules(ctx, *p, nr, why, whylen);
	}
	int fd = rc == 0 ? export_sealed(ctx, why, whylen) : -1;
	seccomp_release(ctx);
	return fd;
}

int bw_seccomp_reopen(int filter_fd)
{
	char path[40];
	if (filter_fd < 0)
		return -EBADF;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", filter_fd);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}
