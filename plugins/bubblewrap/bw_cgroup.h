/*
 * plugins/bubblewrap/bw_cgroup.h - a cgroup of its own for each bubblewrap sandbox, with the
 * profile's cpu, memory and task limits, and a reliable way to kill everything in it.
 *
 * bwrap gives the sandbox namespaces but no resource limits: without a cgroup a sandboxed
 * program could take every core, all memory or fork until the host's pid space is gone. So
 * the bwrap process and all it starts run in a cgroup named after the sandbox, and because
 * the cgroup holds every descendant (setsid, double forks and PID namespaces do not leave
 * it) it is also what the plugin kills when the sandbox ends.
 *
 * Both cgroup versions are supported, found from /proc/self/mountinfo rather than guessed:
 *
 *  - cgroup v1: one hierarchy per controller (or a few sharing one mount). The sandbox gets
 *    a directory in the hierarchies of cpu, memory and pids, and of freezer when it is
 *    mounted (it makes killing race-free). cpuset is left alone: a new cpuset cgroup starts
 *    with no cpus and no memory nodes, and the sandbox needs no pinning.
 *  - cgroup v2: one unified hierarchy. The sandbox's cgroup is a leaf under a parent whose
 *    cgroup.subtree_control enables cpu, memory and pids, those of them that are available.
 *
 * v1 is used when any v1 hierarchy carries cpu, memory or pids (a controller is bound to one
 * version at a time, so on a "hybrid" host the cgroup2 mount has none of them), otherwise v2.
 *
 * Where. Every sandbox cgroup is <hierarchy>/<parent>/<name>. A relative parent (the
 * default, BW_CGROUP_DEFAULT_PARENT = "aksandbox") is taken from this process's own cgroup
 * in each hierarchy (/proc/self/cgroup), so sandboxes stay inside whatever limits the
 * operator, systemd or a container runtime put on the service, and under cgroup v2 inside
 * the subtree delegated to it. A parent starting with '/' is taken from the top of the
 * hierarchy as mounted here (in a container with its own cgroup namespace: the container's
 * cgroup), like Docker's "/docker" under cgroup v1.
 *
 * cgroup v2's "no internal processes" rule: a cgroup other than the root that holds
 * processes cannot enable controllers for its children (EBUSY). The default parent lies
 * under this process's own cgroup, so under v2 that works only when that cgroup is the root
 * (as in a container with a private cgroup namespace, or on a host without systemd) or
 * already has the controllers enabled; otherwise the probe fails saying so, and the operator
 * gives a delegated parent that holds no processes itself (with systemd: Delegate=yes and
 * the service moved into a leaf of its own cgroup, or a slice made for the sandboxes).
 *
 * Limits: Linux only, links nothing but libc. Making cgroups needs root, or under v2 write
 * access to a delegated subtree; under v1 there is no safe delegation, so an unprivileged
 * process gets a probe that fails and says why. Nested cgroups inside a sandbox's cgroup
 * are not expected (its programs run without privileges) but are killed and removed too.
 */
#ifndef BW_CGROUP_H
#define BW_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The parent used when the caller gives none: relative, so under this process's cgroup. */
#define BW_CGROUP_DEFAULT_PARENT "aksandbox"

/*
 * The task limit when the caller asks for the default (bw_limits.pids == 0). Tasks are
 * processes and threads. 512 leaves room for a parallel build (make -j, compilers, a JVM or
 * a language server with its thread pools) while a fork bomb stops at a number the host does
 * not notice, within milliseconds. The same default as the docker provider's pids_limit.
 */
#define BW_CGROUP_DEFAULT_PIDS 512

/* The most descriptors bw_cgroup_open_procs() returns: one per hierarchy (v1: cpu, memory,
 * pids, freezer; v2: one), with room to spare. */
#define BW_CGROUP_MAX_FDS 8

/* Room for the messages this module writes to why (an unusually long path is cut short). */
#define BW_CGROUP_WHY_SIZE 512

/* What this host offers, as found by a probe. Opaque; read-only once made, so it may be
 * shared between threads. */
typedef struct bw_cgroups bw_cgroups;

typedef struct bw_limits {
	double cpu;        /* cores, as a CFS quota per 100 ms period; 0 = no limit */
	int64_t memory_mb; /* MiB of memory, swap not on top of it; 0 = no limit */
	int64_t pids;      /* tasks; 0 = BW_CGROUP_DEFAULT_PIDS; -1 = no limit of ours */
} bw_limits;

/*
 * Finds the hierarchy (v1 or v2, see above), makes the parent directory (and the ones above
 * it that are missing) in each hierarchy, under v2 enables the controllers for it, and makes
 * and removes a cgroup under it to show that this really works. parent: NULL for
 * BW_CGROUP_DEFAULT_PARENT; no "." or ".." components. Returns 0 with *out, or a negative
 * errno with why[0..whylen) saying what is missing, e.g. "cannot create
 * /sys/fs/cgroup/pids/aksandbox: Permission denied (run as root, or give a delegated cgroup
 * v2 subtree)". Leaves the parent in place (bw_cgroup_remove_parent removes it).
 */
int bw_cgroup_probe(const char *parent, bw_cgroups **out, char *why, size_t whylen);

/* Kill by freezing and signalling each process even where cgroup.kill exists: the way taken
 * on kernels before 5.14, for tests. */
#define BW_CGROUP_NO_KILL_FILE 1u

/*
 * The same for the cgroup v2 hierarchy mounted at mount (NULL: the first cgroup2 mount in
 * /proc/self/mountinfo), whichever version carries the controllers: to use v2 on a hybrid
 * host, and for tests. flags: BW_CGROUP_NO_KILL_FILE or 0.
 */
int bw_cgroup_probe_v2(const char *mount, const char *parent, unsigned flags, bw_cgroups **out,
                       char *why, size_t whylen);

/* Removes the parent directory in each hierarchy (not the ones above it). 0 when gone,
 * -EBUSY while sandbox cgroups remain under it. */
int bw_cgroup_remove_parent(const bw_cgroups *cg);

void bw_cgroup_free(bw_cgroups *cg);

int bw_cgroup_version(const bw_cgroups *cg); /* 1 or 2 */

/* One line for logs and status, e.g. "cgroup v1: cpu at /sys/fs/cgroup/cpu/aksandbox,
 * memory at ..., pids at ..., freezer at ...", or for v2 which controllers are missing. */
const char *bw_cgroup_describe(const bw_cgroups *cg);

/* Whether sandbox cgroups get the controller: "cpu", "memory", "pids" or "freezer" (v1;
 * v2's freezing is built in and not a controller). */
bool bw_cgroup_has(const bw_cgroups *cg, const char *controller);

/* Whether name can name a sandbox cgroup: 1 to 64 of [A-Za-z0-9._-], the first a letter or a
 * digit (so never "." or "..", and no '/'). */
bool bw_cgroup_name_ok(const char *name);

/* How many hierarchies a sandbox has a directory in (v1: 1 to 4; v2: 1), and the path of
 * the i-th of them for name (NULL: the parent's). 0, -ENOENT past the last, -ENAMETOOLONG,
 * -EINVAL for a bad name. */
size_t bw_cgroup_hierarchies(const bw_cgroups *cg);
int bw_cgroup_dir(const bw_cgroups *cg, size_t i, const char *name, char *buf, size_t len);

/* The path of file in name's cgroup in the hierarchy that carries controller (NULL: the
 * first), e.g. ("memory", "sbx1", "memory.max"). -ENOENT when no hierarchy carries it. */
int bw_cgroup_file(const bw_cgroups *cg, const char *controller, const char *name, const char *file,
                   char *buf, size_t len);

/*
 * Makes the cgroup name, or reuses it when it exists (idempotent, and thawed), and sets its
 * limits; a limit left unset is reset to none, so a reused cgroup has exactly these. A
 * limit whose controller is missing is an error (-EOPNOTSUPP, why naming it): limits fail
 * closed, never silently dropped. On any failure a cgroup made by this call is removed
 * again. 0 or a negative errno with why.
 */
int bw_cgroup_create(const bw_cgroups *cg, const char *name, const bw_limits *lim, char *why,
                     size_t whylen);

/*
 * Opens name's cgroup.procs in each hierarchy for writing (O_WRONLY | O_CLOEXEC):
 * fds[0..*n), fds holding BW_CGROUP_MAX_FDS. The caller forks, the child calls
 * bw_cgroup_join() and then execs bwrap, so the program is inside before its first
 * instruction (a parent writing the child's pid would race with the child's first fork).
 * The caller closes them with bw_cgroup_close_fds(). 0 or a negative errno (no why: the
 * cgroup was just made, so this fails only for want of descriptors or memory).
 */
int bw_cgroup_open_procs(const bw_cgroups *cg, const char *name, int *fds, size_t *n);

/* Moves the calling process into the cgroup: writes "0" (the writer itself, in v1 and v2) to
 * each descriptor. Async-signal-safe, for a child between fork and exec. 0 or -errno. */
int bw_cgroup_join(const int *fds, size_t n);

/* Closes fds[0..n) and sets them to -1. */
void bw_cgroup_close_fds(int *fds, size_t n);

/*
 * SIGKILLs every process in name's cgroup (and cgroups below it) and waits until none is
 * left, at most 2 s. Under v2 with cgroup.kill (Linux 5.14) the kernel does it at once;
 * otherwise the cgroup is frozen (v1 freezer, v2 cgroup.freeze) so nothing can fork or exit
 * while its processes are listed and signalled, then thawed so the kills take effect, and
 * that is repeated until it is empty. Returns how many processes were killed (with
 * cgroup.kill: how many were there just before; 0 when the cgroup does not exist),
 * -ETIMEDOUT when some are still there after 2 s (e.g. stuck in the kernel), or another
 * negative errno. Not for a child between fork and exec: it allocates.
 */
int bw_cgroup_kill(const bw_cgroups *cg, const char *name);

/* Kills, then removes name's cgroup in every hierarchy. 0, also when it does not exist;
 * a negative errno (-ETIMEDOUT from the kill) when something of it remains. */
int bw_cgroup_remove(const bw_cgroups *cg, const char *name);

/* How many times the memory limit killed a process in name's cgroup (v1: the oom_kill line
 * of memory.oom_control; v2: of memory.events), so the plugin can say "killed: out of memory
 * (memory_mb 64)"; -1 when unknown (no memory controller, no such cgroup). */
int64_t bw_cgroup_oom_kills(const bw_cgroups *cg, const char *name);

#endif /* BW_CGROUP_H */
