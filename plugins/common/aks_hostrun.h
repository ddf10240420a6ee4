/*
 * plugins/common/aks_hostrun.h - running a sandbox's programs on this host (local_subprocess,
 * bubblewrap): the minimal environment they get, and one supervised program (aks_proc.h) as
 * a tool call's result, with the deadline, cancellation and output limits every provider
 * keeps.
 *
 * Part of libaks-proc (static and hidden in each plugin that links it).
 */
#ifndef AKS_HOSTRUN_H
#define AKS_HOSTRUN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <aksandbox/plugin.h>
#include <aksandbox/provider.h>

/*
 * The environment of a sandbox's programs, never this host's: PATH
 * (/usr/local/bin:/usr/bin:/bin), HOME, TMPDIR, LANG=C.UTF-8 and PWD, then the host variables
 * named in passthrough (those set), then env (NULL-terminated key, value pairs), each
 * replacing an earlier value of its name. A NULL-terminated "NAME=value" vector (free with
 * aks__strv_free), or NULL when out of memory.
 */
char **aks_hostrun_env(const char *home, const char *tmpdir, const char *pwd,
                       char *const *passthrough, char *const *env);

typedef struct aks_hostrun_spec {
	const char *const *argv; /* argv[0] looked up in envp's PATH */
	const char *const *envp;
	const char *cwd;
	const char *subject;  /* "subprocess": "<subject> exceeded timeout <t>s" */
	const char *provider; /* names the log's warnings */
	int pass_fd;          /* aks_proc_spec's: fd 3 of the program, 0 = none */
	const int *join_fds;  /* aks_proc_spec's: cgroup.procs files it joins */
	size_t n_join;
} aks_hostrun_spec;

/*
 * Runs the program to its end under the call's deadline and cancellation, its output into
 * out. AKS_OK with the exit code when it ended on its own (a failing program too);
 * AKS_ETIMEOUT or AKS_ECANCELLED with the result marked timed out and exit code -1 when its
 * tree was killed; a result_write failure (the host's limit) as result_write said; AKS_EIO
 * when it could not be started.
 */
int aks_hostrun(const aks_host_api *host, const aks_hostrun_spec *spec, const aks_call *call,
                aks_result *out, aks_error **err);

/* For a child this host started itself (the agent's process): waits up to grace_ms for it to
 * exit, then SIGKILLs and reaps it; *pid is 0 afterwards. Nothing when *pid is 0. */
void aks_hostrun_reap(pid_t *pid, int grace_ms);
/* Whether the child *pid still runs: false once it ended (reaped here, *pid = 0); true while
 * it runs, or when it is not ours to wait for (a host that reaps its children itself). */
bool aks_hostrun_running(pid_t *pid);

#endif /* AKS_HOSTRUN_H */
