/*
 * plugins/local_subprocess/ls_internal.h - shared by the plugin's files.
 */
#ifndef LS_INTERNAL_H
#define LS_INTERNAL_H

#include <aksandbox/plugin.h>
#include <aksandbox/provider.h>

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
};

/* A handle on one sandbox directory. */
struct aks_sandbox_impl {
	aks_provider_impl *prov;
	char *dir; /* the sandbox id */
};

/* ls_exec.c */
int ls_execute_code(aks_sandbox_impl *sb, const char *code, const char *language,
                    const aks_call *call, aks_result *out, aks_error **err);
int ls_execute_command(aks_sandbox_impl *sb, const char *command, const aks_call *call,
                       aks_result *out, aks_error **err);

/* ls_files.c */
int ls_upload_file(aks_sandbox_impl *sb, const char *path, const void *data, size_t len,
                   const aks_call *call, aks_error **err);
int ls_download_file(aks_sandbox_impl *sb, const char *path, const aks_call *call, aks_result *out,
                     aks_error **err);

/* local_subprocess.c: the "sandbox working directory '<id>' no longer exists"
 * error (AKS_EGONE). */
int ls_gone(const aks_host_api *host, const char *dir, aks_error **err);

#endif /* LS_INTERNAL_H */
