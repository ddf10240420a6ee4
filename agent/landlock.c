/*
 * agent/landlock.c - confines the agent, and everything it runs, to a set of paths with
 * Landlock (--landlock-ro, --landlock-rw).
 *
 * A provider that builds the sandbox's mount namespace itself (bubblewrap) adds this as a
 * second filesystem layer: the agent applies it to itself once the namespace is built (a
 * Landlock-restricted process can no longer mount), before it speaks the protocol or runs
 * anything, and every program it starts inherits it. Landlock checks where a path really
 * leads (the resolved file and the directories above it), so a symlink pointing out of an
 * allowed path leads nowhere; what is mounted beneath an allowed path is allowed with it.
 *
 * The ruleset handles every filesystem right the running kernel knows, so that nothing is
 * allowed merely because no rule mentions it; on kernels with scopes (ABI 6) it also keeps
 * the programs from signalling, or connecting to the abstract unix sockets of, processes
 * outside this confinement. Raw syscalls: libc has no wrappers, and the agent is libc only.
 */
#include "landlock.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <linux/types.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* What older <linux/landlock.h> (Debian 12's) lacks, with the kernel's values. */
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13) /* ABI 2 */
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14) /* ABI 3 */
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0) /* ABI 6 */
#endif
#ifndef LANDLOCK_SCOPE_SIGNAL
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1) /* ABI 6 */
#endif

/* struct landlock_ruleset_attr as of ABI 6, under our own name: an older header declares the
 * struct with its first field only. The kernel reads as many bytes as it is told. */
struct agent_ruleset_attr {
	__u64 handled_access_fs;
	__u64 handled_access_net; /* ABI 4; left 0: the network is the provider's business */
	__u64 scoped;             /* ABI 6 */
};

/* The 13 rights of ABI 1. */
#define FS_RIGHTS_ABI1                                                                             \
	(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |                              \
	 LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR |                              \
	 LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |                          \
	 LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR |                              \
	 LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |                              \
	 LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |                            \
	 LANDLOCK_ACCESS_FS_MAKE_SYM)
/* The rights that make sense on a file; the kernel refuses the others there (EINVAL). */
#define FS_RIGHTS_FILE                                                                             \
	(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |                              \
	 LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |                              \
	 LANDLOCK_ACCESS_FS_IOCTL_DEV)
/* Read-only: look, read and run. IOCTL_DEV too, so that a terminal or another device under a
 * read-only /dev can still be queried (isatty, window size) once opened. */
#define FS_RIGHTS_RO                                                                               \
	(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR | \
	 LANDLOCK_ACCESS_FS_IOCTL_DEV)

int agent_landlock_abi(void)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	return abi < 0 ? -errno : (int)abi;
}

const char *agent_landlock_unavailable(int err)
{
	switch (err) {
	case ENOSYS:
		return "the kernel has no Landlock (not built in, or its system calls are blocked)";
	case EOPNOTSUPP:
		return "Landlock is not enabled (add it to the kernel's lsm= boot parameter)";
	default:
		return "cannot ask the kernel for its Landlock version";
	}
}

/* Everything the kernel of this ABI can confine (rights of later ABIs would be refused). */
static __u64 handled_fs_rights(int abi)
{
	__u64 rights = FS_RIGHTS_ABI1;
	if (abi >= 2)
		rights |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		rights |= LANDLOCK_ACCESS_FS_TRUNCATE;
	if (abi >= 5)
		rights |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
	return rights;
}

static int fail(char *msg, size_t msglen, int err, const char *what, const char *path)
{
	snprintf(msg, msglen, "%s%s%s: %s", what, path ? " " : "", path ? path : "", strerror(err));
	return -err;
}

/* Allows `rights` beneath path (on the file itself when it is not a directory). */
static int allow_path(int ruleset, const char *path, __u64 rights, char *msg, size_t msglen)
{
	int fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return fail(msg, msglen, errno, "cannot open", path);
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int err = errno;
		close(fd);
		return fail(msg, msglen, err, "cannot look at", path);
	}
	if (!S_ISDIR(st.st_mode))
		rights &= FS_RIGHTS_FILE;
	struct landlock_path_beneath_attr rule = {.allowed_access = rights, .parent_fd = fd};
	int rc = 0;
	if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) < 0)
		rc = fail(msg, msglen, errno, "cannot add a rule for", path);
	close(fd);
	return rc;
}

int agent_landlock_apply(const char *const *ro, size_t nro, const char *const *rw, size_t nrw,
                         char *msg, size_t msglen)
{
	int abi = agent_landlock_abi();
	if (abi < 0)
		return fail(msg, msglen, -abi, agent_landlock_unavailable(-abi), NULL);
	struct agent_ruleset_attr attr = {.handled_access_fs = handled_fs_rights(abi)};
	/* The size of the struct as this ABI knows it: older kernels refuse what they cannot read
	 * unless it is zero, and a size that is exactly theirs is never in doubt. */
	size_t attr_size = sizeof(attr.handled_access_fs);
	if (abi >= 4)
		attr_size += sizeof(attr.handled_access_net);
	if (abi >= 6) {
		attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
		attr_size += sizeof(attr.scoped);
	}
	int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0);
	if (ruleset < 0)
		return fail(msg, msglen, errno, "cannot create a ruleset", NULL);
	int rc = 0;
	for (size_t i = 0; i < nro && rc == 0; i++)
		rc = allow_path(ruleset, ro[i], FS_RIGHTS_RO & attr.handled_access_fs, msg, msglen);
	for (size_t i = 0; i < nrw && rc == 0; i++)
		rc = allow_path(ruleset, rw[i], attr.handled_access_fs, msg, msglen);
	/* Needed to restrict ourselves without CAP_SYS_ADMIN (bwrap has set it already). */
	if (rc == 0 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		rc = fail(msg, msglen, errno, "cannot set no_new_privs", NULL);
	if (rc == 0 && syscall(SYS_landlock_restrict_self, ruleset, 0) < 0)
		rc = fail(msg, msglen, errno, "cannot restrict the agent", NULL);
	close(ruleset);
	return rc;
}
