/*
 * plugins/local_subprocess/ls_internal.h - shared by the plugin's files.
 */
#ifndef LS_INTERNAL_H
#define LS_INTERNAL_H

#include <sys/types.h>

#include <aksandbox/plugin.h>
#include <aksandbox/provider.h>

#include "aks_buf.h"

typedef struct aks_agent_program aks_agent_program;
typedef struct aks_agent_session aks_agent_session;
typedef struct aks_agent_ops aks_agent_ops;

#define LS_NAME   "local_subprocess"
#define LS_PREFIX "ak-sandbox-"

/* One provider instance: its validated config, copied at init (copying
 * costs nothing and keeps us safe whatever the host does with the block). */
struct aks_provider_impl {
	const aks_host_api *host;
	char *workdir;            /* NULL: $TMPDIR, else /tmp */
	char *python;             /* searched in the child's PATH */
	char **env_passthrough;   /* NULL-terminated names */
	char **env;               /* NULL-terminated key, value pairs */
	aks_agent_program *agent; /* aksandbox-agent (ls_agent.c; disabled: per call) */
	aks_capabilities caps;    /* the instance's (stateful: while the agent can keep state) */
};

/* A handle on one sandbox directory. */
struct aks_sandbox_impl {
	aks_provider_impl *prov;
	char *dir;                /* the sandbox id */
	aks_agent_session *agent; /* runs the operations, through the agent or per call */
};

/* ls_exec.c: the operations (through the handle's agent session), and the per-call way
 * the session falls back to. */
int ls_execute_code(aks_sandbox_impl *sb, const char *code, const char *language,
                    const aks_call *call, aks_result *out, aks_error **err);
int ls_execute_command(aks_sandbox_impl *sb, const char *command, const aks_call *call,
                       aks_result *out, aks_error **err);
int ls_run_code(aks_sandbox_impl *sb, const char *code, const char *language, const aks_call *call,
                aks_result *out, aks_error **err);
int ls_run_command(aks_sandbox_impl *sb, const char *command, const aks_call *call, aks_result *out,
                   aks_error **err);

/* The child's environment (ls_exec.c): the defaults, env_passthrough, env. Returns a
 * NULL-terminated "NAME=value" vector, or NULL when out of memory; free with aks__strv_free. */
char **ls_env_build(const aks_provider_impl *prov, const char *dir);

/* ls_agent.c: the agent module's table for this provider (docs/plugins/local_subprocess.md,
 * "Through aksandbox-agent"). */
extern const aks_agent_ops ls_agent_ops;

/* ls_files.c: the operations (the per-call reads and writes are aks_hostdir.h's). */
int ls_upload_file(aks_sandbox_impl *sb, const char *path, const void *data, size_t len,
                   const aks_call *call, aks_error **err);
int ls_download_file(aks_sandbox_impl *sb, const char *path, const aks_call *call, aks_result *out,
                     aks_error **err);

#endif /* LS_INTERNAL_H */
