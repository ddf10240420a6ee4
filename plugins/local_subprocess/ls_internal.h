/*
 * plugins/local_subprocess/ls_internal.h - shared by the plugin's files.
 */
#ifndef LS_INTERNAL_H
#define LS_INTERNAL_H

#include <sys/types.h>

#include <aksandbox/plugin.h>
#include <aksandbox/provider.h>

#include "aks_buf.h"

typedef struct aks_agent aks_agent;

#define LS_NAME   "local_subprocess"
#define LS_PREFIX "ak-sandbox-"

/* One provider instance: its validated config, copied at init (copying
 * costs nothing and keeps us safe whatever the host does with the block). */
struct aks_provider_impl {
	const aks_host_api *host;
	char *workdir;          /* NULL: $TMPDIR, else /tmp */
	char *python;           /* searched in the child's PATH */
	char **env_passthrough; /* NULL-terminated names */
	char **env;             /* NULL-terminated key, value pairs */
	char *agent;            /* the aksandbox-agent to run, or NULL: per-call programs */
	char *description;      /* instance_description's line */
};

/* A handle on one sandbox directory. */
struct aks_sandbox_impl {
	aks_provider_impl *prov;
	char *dir;        /* the sandbox id */
	aks_agent *agent; /* NULL when prov->agent is NULL */
	pid_t agent_pid;
};

/* ls_exec.c */
int ls_execute_code(aks_sandbox_impl *sb, const char *code, const char *language,
                    const aks_call *call, aks_result *out, aks_error **err);
int ls_execute_command(aks_sandbox_impl *sb, const char *command, const aks_call *call,
                       aks_result *out, aks_error **err);

/* The child's environment (ls_exec.c): the defaults, env_passthrough, env. Returns a
 * NULL-terminated "NAME=value" vector, or NULL when out of memory; free with aks__strv_free. */
char **ls_env_build(const aks_provider_impl *prov, const char *dir);
/* TODO(agent module): remove (ls_agent.c's name for aks__strv_free). */
static inline void ls_env_free(char **env)
{
	aks__strv_free(env);
}

/* ls_agent.c: one aksandbox-agent per sandbox handle, over pipes (docs/plugins/
 * local_subprocess.md, "Through aksandbox-agent"). */
int ls_agent_start(aks_sandbox_impl *sb, const aks_call *call, aks_error **err);
/* Restarts the agent if its stream broke (it died): the Python session's state is lost. */
int ls_agent_ensure(aks_sandbox_impl *sb, const aks_call *call, aks_error **err);
void ls_agent_stop(aks_sandbox_impl *sb);
int ls_agent_exec(aks_sandbox_impl *sb, const char *const *argv, const char *python_code,
                  const aks_call *call, aks_result *out, aks_error **err);
int ls_agent_write(aks_sandbox_impl *sb, const char *abs_path, const void *data, size_t len,
                   const aks_call *call, aks_error **err);
int ls_agent_read(aks_sandbox_impl *sb, const char *abs_path, const char *name,
                  const aks_call *call, aks_result *out, aks_error **err);

/* ls_files.c */
int ls_upload_file(aks_sandbox_impl *sb, const char *path, const void *data, size_t len,
                   const aks_call *call, aks_error **err);
int ls_download_file(aks_sandbox_impl *sb, const char *path, const aks_call *call, aks_result *out,
                     aks_error **err);

/* local_subprocess.c: the "sandbox working directory '<id>' no longer exists"
 * error (AKS_EGONE). */
int ls_gone(const aks_host_api *host, const char *dir, aks_error **err);

#endif /* LS_INTERNAL_H */
