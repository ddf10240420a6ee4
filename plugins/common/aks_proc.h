/*
 * plugins/common/aks_proc.h - run a program under a supervisor that can kill
 * its whole process tree.
 *
 * Shared by the providers that run programs on this host (local_subprocess,
 * bubblewrap). Linux only; links nothing but libc.
 *
 * How it works. aks_proc_run() forks a small supervisor process. The
 * supervisor makes itself a child subreaper (PR_SET_CHILD_SUBREAPER), so every
 * process the program starts, including ones that call setsid()/setpgid() or
 * double-fork, stays its descendant. It forks the program (own process group,
 * stdin /dev/null, stdout and stderr to pipes, every other fd closed), waits for
 * it, and then SIGKILLs every remaining descendant (found by walking the parent
 * chains in /proc) and reaps them until none is left. It does the same at once
 * when the caller asks it to (deadline, cancellation) or when the caller's
 * process dies (EOF on the control socket). Only then does it report the
 * program's wait status and exit. So when aks_proc_run() returns, nothing the
 * program started is still running; background jobs do not outlive it.
 *
 * The calling process is never made a subreaper itself: it may be a
 * multi-threaded library host with children of its own. The supervisor runs
 * only async-signal-safe code (it is a fork of a possibly multi-threaded
 * process that never execs), and every descriptor is created with O_CLOEXEC so
 * children that other threads start never inherit them.
 *
 * Limits: the program runs with the caller's user and privileges. A program
 * that SIGKILLs its own supervisor can orphan its tree; aks_proc_run() then
 * falls back to killing the program's process group.
 */
#ifndef AKS_PROC_H
#define AKS_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Which pipe a chunk of output came from. Same values as aks_stream. */
enum { AKS_PROC_STDOUT = 1, AKS_PROC_STDERR = 2 };

/*
 * Receives every chunk the program writes, in order per stream. Return 0 to
 * go on; any other value kills the program and ends the run with
 * AKS_PROC_ABORTED (the value is kept in aks_proc_outcome.abort_code). After
 * an abort, output is still drained but no longer passed on.
 */
typedef int (*aks_proc_output_fn)(void *ctx, int stream, const void *data, size_t len);

/* Polled between reads; return true to cancel the run. May be NULL. */
typedef bool (*aks_proc_cancelled_fn)(void *ctx);

typedef struct aks_proc_spec {
	/* argv[0] is looked up in envp's PATH (default /usr/local/bin:/usr/bin:/bin)
	 * unless it contains a '/'. Both arrays are NULL-terminated. */
	const char *const *argv;
	const char *const *envp;
	const char *cwd;     /* working directory, or NULL to inherit */
	int64_t deadline_ms; /* CLOCK_MONOTONIC ms; 0 = none */
	int cancel_fd;       /* readable once cancelled; -1 = none; never read */
	aks_proc_cancelled_fn cancelled;
	aks_proc_output_fn output; /* may be NULL: output is discarded */
	void *ctx;                 /* passed to output and cancelled */
	/* For a program that confines itself (bwrap): a descriptor it gets as fd 3 (its
	 * `--seccomp 3`), 0 = none; and up to AKS_PROC_MAX_JOIN descriptors of cgroup.procs
	 * files it writes "0" to before exec, so it and everything it starts are counted and
	 * limited there (the supervisor stays outside). A failed join stops the program
	 * (exit 127, the reason on its stderr): a limit is never silently dropped. */
	int pass_fd;
	const int *join_fds;
	size_t n_join;
} aks_proc_spec;

#define AKS_PROC_MAX_JOIN 4

typedef enum aks_proc_end {
	AKS_PROC_EXITED = 0,    /* the program ended on its own */
	AKS_PROC_TIMED_OUT = 1, /* the deadline passed; the tree was killed */
	AKS_PROC_CANCELLED = 2, /* cancelled; the tree was killed */
	AKS_PROC_ABORTED = 3    /* the output callback failed; the tree was killed */
} aks_proc_end;

typedef struct aks_proc_outcome {
	int end;           /* aks_proc_end */
	bool status_known; /* false if the supervisor died before reporting */
	int wait_status;   /* the program's raw wait status, when known */
	int exit_code;     /* exit status, 128 + signal when killed, -1 when unknown */
	int abort_code;    /* the output callback's non-zero return (AKS_PROC_ABORTED) */
} aks_proc_outcome;

/*
 * Runs the program to completion (or until it is killed) and fills *out.
 * Returns 0, or a negative errno when the supervisor could not be started
 * (pipes, fork). A program that cannot be executed is not an error: it exits
 * with 127 (not found) or 126 (not executable) and a message on its stderr,
 * as a shell would report it.
 */
int aks_proc_run(const aks_proc_spec *spec, aks_proc_outcome *out);

/* The shell convention: the exit status, or 128 + the signal number. */
int aks_proc_exit_code(int wait_status);

/* CLOCK_MONOTONIC in milliseconds (async-signal-safe: the supervisor uses it in its child). */
static inline int64_t aks_proc_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif /* AKS_PROC_H */
