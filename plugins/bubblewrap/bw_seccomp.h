/*
 * plugins/bubblewrap/bw_seccomp.h - the seccomp filter that programs in a bubblewrap sandbox
 * run under, compiled with libseccomp into the BPF program `bwrap --seccomp FD` loads.
 *
 * bwrap already gives the program namespaces, a minimal read-only view of the system and no
 * capabilities, so most calls refused here would fail anyway. The filter is the second wall:
 * it keeps the program away from kernel code it has no business reaching even without
 * privileges (new user namespaces, bpf, perf, userfaultfd, keyrings, ptrace), from the few
 * unprivileged escape routes (TIOCSTI typing into the terminal, open_by_handle_at) and from
 * host-wide state should a capability ever leak in (mounts, modules, kexec, the clock).
 *
 * Policy: every call not listed in bw_seccomp_refused is allowed. Listed calls fail with
 * EPERM, except clone3, which fails with ENOSYS so that glibc falls back to clone, whose
 * flags the filter can inspect (clone3 passes them in memory). Four calls are refused only
 * for some arguments:
 *  - clone: when its flags ask for a new namespace (any CLONE_NEW* bit);
 *  - clone3: always, with ENOSYS (see above);
 *  - ioctl: the requests TIOCSTI and TIOCLINUX;
 *  - personality: every value except those Docker's default profile allows: PER_LINUX (0),
 *    PER_LINUX32 (8), UNAME26 (0x20000), UNAME26|PER_LINUX32 and 0xffffffff (the query).
 * Calls that do not exist on this architecture (umount, vm86 on x86_64) are left out.
 *
 * Only the native architecture's calls are allowed: a call made through another entry
 * (i386's int 0x80, x32 on x86_64) kills the process.
 */
#ifndef BW_SECCOMP_H
#define BW_SECCOMP_H

#include <stddef.h>

/*
 * Builds the filter and returns it as a sealed memfd (O_CLOEXEC) holding the BPF program,
 * an array of struct sock_filter, at offset 0. Sealed: nobody can change the program once
 * built. Returns -1 with a message in why ("seccomp: ...") when libseccomp or the memfd
 * fails. Hand it to bwrap through bw_seccomp_reopen(), never directly: see there.
 */
int bw_seccomp_build(char *why, size_t whylen);

/*
 * A new descriptor of the filter, read-only, O_CLOEXEC, with its own file offset at 0, or
 * -errno. bwrap reads the filter from the descriptor's current offset to EOF, so each bwrap
 * needs a descriptor of its own; a shared one would be read once. The caller moves it to the
 * number given to --seccomp in the child (dup2 clears O_CLOEXEC there) and closes it after
 * the fork. Opens /proc/self/fd/N, so /proc must be mounted.
 */
int bw_seccomp_reopen(int filter_fd);

/* The names of the calls the filter refuses, all or some uses of them (see above),
 * NULL-terminated: for descriptions, documentation and tests. */
extern const char *const bw_seccomp_refused[];

/* How many of bw_seccomp_refused exist on this architecture: the calls the filter refuses. */
size_t bw_seccomp_refused_count(void);

#endif /* BW_SECCOMP_H */
