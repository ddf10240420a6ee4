/*
 * plugins/bubblewrap/bw_internal.h - shared by the plugin's files.
 */
#ifndef BW_INTERNAL_H
#define BW_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <aksandbox/plugin.h>
#include <aksandbox/provider.h>

#include "aks_buf.h"
#include "bw_cgroup.h"

typedef struct aks_agent_program aks_agent_program;
typedef struct aks_agent_session aks_agent_session;
typedef struct aks_agent_ops aks_agent_ops;

#define BW_NAME   "bubblewrap"
#define BW_PREFIX "ak-bwrap-"
/* Where the agent is bound inside a sandbox (read-only). */
#define BW_AGENT_INSIDE "/run/aksandbox/agent"

/* The landlock key. */
enum { BW_LANDLOCK_OFF = 0, BW_LANDLOCK_REQUIRED = 1 };

/* One provider instance: its validated config, and what this host offers (found at init). */
struct aks_provider_impl {
	const aks_host_api *host;
	char *workdir;          /* NULL: $TMPDIR, else /tmp */
	char *bwrap;            /* the bwrap program, absolute */
	char *workspace;        /* the workspace's path inside: "/workspace" */
	char *python;           /* searched in the sandbox's PATH */
	char **env_passthrough; /* NULL-terminated names */
	char **env;             /* NULL-terminated key, value pairs */
	char **etc;             /* the entries of /etc a sandbox sees (names under /etc) */
	char **system;          /* "/usr", "/bin", ... : the system directories as on this host */
	int landlock;           /* BW_LANDLOCK_* */
	int landlock_abi;       /* the kernel's (0: none) */
	int64_t pids_max;       /* per sandbox, when cgroups are usable */
	bw_cgroups *cgroups;    /* NULL: none usable (cgroup_why says why) */
	char cgroup_why[BW_CGROUP_WHY_SIZE];
	int seccomp_fd;           /* the sealed filter (bw_seccomp.h) */
	aks_agent_program *agent; /* aksandbox-agent (disabled: per call) */
	aks_capabilities caps;    /* the instance's */
	char *description;        /* instance_description */
};

/* A handle on one sandbox: a workspace directory, and the confinement its programs get. */
struct aks_sandbox_impl {
	aks_provider_impl *prov;
	char *dir;          /* the sandbox id: the workspace on this host */
	char *cgroup;       /* the cgroup's name (the directory's base name) or NULL */
	bool net;           /* network_egress allow: the host's network namespace */
	char **read_binds;  /* host paths bound read-only (NULL-terminated) */
	char **write_binds; /* host paths bound read-write */
	bool tmp_writable;  /* the sandbox's own /tmp is writable */
	bool shm_writable;  /* the sandbox's own /dev/shm is writable */
	double cpu;         /* the policy's limits (0: unset) */
	int64_t memory_mb;
	aks_agent_session *agent; /* runs the operations, through the agent or per call */
};

/* bubblewrap.c: the class's capabilities (an instance's start from them). */
extern const aks_capabilities bw_capabilities;

/* bw_config.c: reads and checks the config block, and finds what this host offers. */
int bw_config_read(aks_provider_impl *prov, const aks_config *config, aks_error **err);
void bw_config_free(aks_provider_impl *prov);
/* The sandbox's environment: the defaults, env_passthrough, env ("NAME=value", NULL-terminated;
 * free with aks__strv_free), or NULL when out of memory. */
char **bw_env_build(const aks_sandbox_impl *sb);

/* bw_view.c: the policy of a create or attach, checked and kept in the handle. */
int bw_view_policy(aks_sandbox_impl *sb, const aks_policy *policy, aks_error **err);
/*
 * The bwrap command line that runs argv (NULL-terminated) in the sandbox, with the seccomp
 * filter as fd 3: namespaces, the filesystem view, the agent bound at BW_AGENT_INSIDE when
 * agent_path is set, and, with Landlock, argv run under `agent --landlock-... --exec` (or,
 * for the agent itself, its own --landlock options). Appended to *out (an aks_strv).
 */
int bw_view_argv(const aks_sandbox_impl *sb, const char *agent_path, bool is_agent,
                 const char *const *argv, aks_strv *out);

/* bw_exec.c: the operations, and the per-call programs the session falls back to. */
int bw_execute_code(aks_sandbox_impl *sb, const char *code, const char *language,
                    const aks_call *call, aks_result *out, aks_error **err);
int bw_execute_command(aks_sandbox_impl *sb, const char *command, const aks_call *call,
                       aks_result *out, aks_error **err);
int bw_run_code(aks_sandbox_impl *sb, const char *code, const char *language, const aks_call *call,
                aks_result *out, aks_error **err);
int bw_run_command(aks_sandbox_impl *sb, const char *command, const aks_call *call, aks_result *out,
                   aks_error **err);
/* The cgroup of the sandbox, made (with the policy's limits) before a program starts in it,
 * and its cgroup.procs descriptors (*n = 0 without cgroups; close them with
 * bw_cgroup_close_fds). */
int bw_cgroup_enter(aks_sandbox_impl *sb, int *fds, size_t *n, aks_error **err);

/* bw_files.c: upload_file and download_file. */
int bw_upload_file(aks_sandbox_impl *sb, const char *path, const void *data, size_t len,
                   const aks_call *call, aks_error **err);
int bw_download_file(aks_sandbox_impl *sb, const char *path, const aks_call *call, aks_result *out,
                     aks_error **err);

/* bw_agent.c: the agent module's table for this provider. */
extern const aks_agent_ops bw_agent_ops;

#endif /* BW_INTERNAL_H */
