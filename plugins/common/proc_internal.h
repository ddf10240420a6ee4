/*
 * plugins/common/proc_internal.h - the contract between the caller side
 * (proc_run.c) and the supervisor (proc_supervisor.c).
 */
#ifndef AKS_PROC_INTERNAL_H
#define AKS_PROC_INTERNAL_H

#include <stdint.h>

#include "aks_proc.h"

/* Everything the supervisor needs, prepared before fork(): after fork() the
 * supervisor may not allocate. */
typedef struct aks__proc_sup_args {
	const char *const *argv;
	const char *const *envp;
	const char *cwd;
	const char *path;                /* PATH to search argv[0] in */
	int out_w;                       /* program's stdout */
	int err_w;                       /* program's stderr */
	int ctl;                         /* supervisor's end of the control socket */
	int pass_fd;                     /* becomes the program's fd 3; 0 = none */
	int join_fds[AKS_PROC_MAX_JOIN]; /* cgroup.procs files the program joins */
	int n_join;
} aks__proc_sup_args;

/* Messages on the control socket; one write each, so they arrive whole.
 * STARTED comes from the program itself, before it execs; the others from the
 * supervisor. */
enum {
	AKS__PROC_MSG_STARTED = 1, /* value: the program's pid (= its pgid) */
	AKS__PROC_MSG_EXITED = 2,  /* value: the program's wait status */
	AKS__PROC_MSG_FAILED = 3   /* value: errno of a failed fork */
};

typedef struct aks__proc_msg {
	int32_t kind;
	int32_t value;
} aks__proc_msg;

/* The byte the caller sends to ask for the kill. */
#define AKS__PROC_KILL 'K'

/* The default search path, also the minimal environment's PATH. */
#define AKS__PROC_DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

/* Runs in the forked supervisor; never returns. Async-signal-safe only. */
__attribute__((noreturn)) void aks__proc_supervise(const aks__proc_sup_args *a);

#endif /* AKS_PROC_INTERNAL_H */
