/*
 * aksandbox/aksandbox.h - the embedding API of libaksandbox.
 *
 * Programs that host sandboxes (the aksandbox CLI, the MCP server, workers,
 * agent frameworks) use this API; plugins use plugin.h and provider.h only.
 *
 * Conventions: functions return AKS_OK or a negative aks_status and take
 * `aks_error **err` last (see common.h). The output parameter is named `out`.
 * A `const` pointer returned by a getter is borrowed from its parent object.
 */
#ifndef AKSANDBOX_AKSANDBOX_H
#define AKSANDBOX_AKSANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <aksandbox/common.h>
#include <aksandbox/plugin.h>
#include <aksandbox/provider.h>
#include <aksandbox/resolver.h>
#include <aksandbox/version.h>

/* A program that embeds the host sees every struct as the library does. */
#if AKS_TARGET_ABI_MINOR != AKS_ABI_MINOR
#error                                                                                             \
    "AKS_TARGET_ABI_MINOR is for plugins: a program using libaksandbox (aksandbox.h) uses the whole ABI"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- library ------------------------------------------------------------- */

/* The package version of the library, e.g. "0.1.0". */
AKS_EXPORT const char *aks_version(void);

/* The most verbose aks_log_level written to stderr (plugins' logs included);
 * -1 silences everything. Overrides the AKS_LOG_LEVEL environment variable
 * (error, warning, info, debug or quiet), whose default is warning. */
AKS_EXPORT void aks_log_set_level(int level);

/* ---- errors -------------------------------------------------------------- */

AKS_EXPORT int aks_error_code(const aks_error *err);
AKS_EXPORT const char *aks_error_message(const aks_error *err);
AKS_EXPORT void aks_error_free(aks_error *err);
/* A short, static description of a status code ("policy error"). */
AKS_EXPORT const char *aks_strerror(int code);
/* The seeds' error class name for a code ("SandboxPolicyError"). */
AKS_EXPORT const char *aks_error_type_name(int code);

/* ---- plugins ------------------------------------------------------------- */

/* A loaded plugin. Plugins stay resident until the process exits. */
typedef struct aks_plugin aks_plugin;

/*
 * Resolves `type` to a plugin and loads it. `type` is a plugin name
 * ("docker" -> docker.so, searched in AKS_PLUGIN_PATH, then the installed
 * plugin directory) or a path to a .so (anything containing '/').
 * `kind` is the aks_plugin_kind expected, or 0 for any. Loading the same
 * file twice returns the same plugin.
 */
AKS_EXPORT int aks_plugin_load(const char *type, int kind, const aks_plugin **out, aks_error **err);
AKS_EXPORT const aks_plugin_descriptor *aks_plugin_get_descriptor(const aks_plugin *plugin);
/* The absolute path of the file the plugin was loaded from. */
AKS_EXPORT const char *aks_plugin_get_file(const aks_plugin *plugin);
/* For providers: the class capabilities (NULL for other kinds). */
AKS_EXPORT const aks_capabilities *aks_plugin_get_capabilities(const aks_plugin *plugin);
/* The name of an isolation tier (aks_capabilities.isolation, AKS_ISOLATION_*): "none",
 * "os_policy", "container", "syscall_filter", "micro_vm" or "wasm"; "unknown" otherwise. */
AKS_EXPORT const char *aks_isolation_name(uint32_t tier);
/* The compiled-in plugin directory ($(pkglibdir)/plugins-<ABI major>). */
AKS_EXPORT const char *aks_plugin_dir(void);
/* The host services table the host hands to every plugin it starts, for tools
 * that drive a plugin's operation table directly (the contract suite does, for
 * store plugins). Static: never freed. */
AKS_EXPORT const aks_host_api *aks_host_services(void);

/*
 * Calls `visit` for every plugin file found on the search path, in search
 * order, shadowed names skipped. `plugin` is NULL and `error` set when the
 * file failed to load. A non-zero return from `visit` stops the walk and is
 * returned.
 */
typedef int (*aks_plugin_visit_fn)(const char *file, const aks_plugin *plugin,
                                   const aks_error *error, void *userdata);
AKS_EXPORT int aks_plugin_foreach(aks_plugin_visit_fn visit, void *userdata);

/* ---- provider config blocks ---------------------------------------------- */

/*
 * Builds a plugin's validated config block. From a YAML file: the document
 * is either a config.yaml (the block is `sandbox.<name>`, or the first
 * `sandbox.profiles.*.<name>`), or the bare block itself. Unknown keys,
 * wrong types and missing required keys are AKS_ECONFIG errors naming the
 * file, line and column.
 */
AKS_EXPORT int aks_config_load_block(const aks_plugin *plugin, const char *yaml_path,
                                     aks_config **out, aks_error **err);
/* The block with every key at its default (fails if a key is required). */
AKS_EXPORT int aks_config_default_block(const aks_plugin *plugin, aks_config **out,
                                        aks_error **err);
AKS_EXPORT void aks_config_free(aks_config *config);

/* ---- calls: deadline, policy, principal, cancellation --------------------- */

typedef struct aks_cancel aks_cancel;

/* A cancellation token; one token may be shared by several calls. */
AKS_EXPORT int aks_cancel_new(aks_cancel **out, aks_error **err);
/* Async-signal-safe and thread-safe; idempotent. */
AKS_EXPORT void aks_cancel_trigger(aks_cancel *cancel);
AKS_EXPORT bool aks_cancel_is_triggered(const aks_cancel *cancel);
AKS_EXPORT void aks_cancel_free(aks_cancel *cancel);

/*
 * The initialisers of the versioned structs (aks_policy_init and the others below) are
 * macros that pass the library the size of the struct the caller was compiled with, so a
 * program built against an older header, whose struct is smaller, gets only its own bytes
 * written however new the library is. A *_init_sized function writes the fields that fit
 * in `size` bytes and stamps `size` as struct_size (a struct larger than the library's, from
 * a newer header, gets its unknown fields zeroed and the library's size). Call the macros;
 * the functions of the macros' names are the entry points of binaries built before the
 * macros existed (docs/abi.md).
 */

/* The defaults of the seeds: egress allow, timeout 120 s, strict. */
AKS_EXPORT void aks_policy_init_sized(aks_policy *policy, size_t size);
#define aks_policy_init(policy) aks_policy_init_sized((policy), sizeof(*(policy)))
/* An agent-mode principal for `subject`. */
AKS_EXPORT void aks_principal_init_sized(aks_principal *principal, size_t size,
                                         const char *subject);
#define aks_principal_init(principal, subject)                                                     \
	aks_principal_init_sized((principal), sizeof(*(principal)), (subject))

/*
 * Prepares a call. The deadline is now + timeout (timeout <= 0: none). The
 * policy, principal and cancel token are borrowed and must outlive the call;
 * any of them may be NULL (defaults; not cancellable). The functions that take
 * a call read only what its struct_size covers (and likewise of its policy
 * and principal); fields past it keep the defaults.
 */
AKS_EXPORT void aks_call_init_sized(aks_call *call, size_t size, double timeout,
                                    const aks_policy *policy, const aks_principal *principal,
                                    aks_cancel *cancel);
#define aks_call_init(call, timeout, policy, principal, cancel)                                    \
	aks_call_init_sized((call), sizeof(*(call)), (timeout), (policy), (principal), (cancel))

/* ---- providers and sandboxes ----------------------------------------------- */

typedef struct aks_provider aks_provider;
typedef struct aks_sandbox aks_sandbox;

#define AKS_DEFAULT_STREAM_CAP ((size_t)4 << 20)  /* bytes kept per stream */
#define AKS_DEFAULT_FILE_CAP   ((size_t)64 << 20) /* largest download */

/* Instantiates a provider plugin with its validated config block. The config
 * is borrowed and must outlive the provider. */
AKS_EXPORT int aks_provider_open(const aks_plugin *plugin, const aks_config *config,
                                 aks_provider **out, aks_error **err);
/* The instance's capabilities (which may differ from the class's). */
AKS_EXPORT const aks_capabilities *aks_provider_get_capabilities(const aks_provider *prov);
/* How the instance runs operations (its instance_description slot), e.g. through
 * aksandbox-agent or one exec per call; "" when the plugin says nothing. Valid while the
 * provider is open. */
AKS_EXPORT const char *aks_provider_get_description(const aks_provider *prov);
AKS_EXPORT const aks_plugin *aks_provider_get_plugin(const aks_provider *prov);

/*
 * Proofs: what aksandbox-plugin-check proved of an instance on this machine, which
 * `aksandbox check` reports beside each dimension a plugin declares. A proof belongs to
 * the instance as it is now: the plugin file (path, device, inode, size, modification
 * time), its version, and the instance's isolation tier and description; a rebuilt or
 * upgraded plugin, or another configuration that changes those, has none. Kept in
 * <state directory>/proofs/<plugin>.json (the directory aks_runtime's file store uses).
 */
typedef enum aks_proof {
	AKS_PROOF_NONE = 0,        /* nothing recorded for this instance and check */
	AKS_PROOF_PASSED = 1,      /* the check proved it */
	AKS_PROOF_FAILED = 2,      /* the check found the declaration false */
	AKS_PROOF_NOT_VERIFIED = 3 /* the check could not tell on this machine */
} aks_proof;
/* Records the results (aks_proof values other than NONE) of `count` checks, by name,
 * replacing what was recorded for the same instance. */
AKS_EXPORT int aks_provider_record_proof(const aks_provider *prov, const char *const *checks,
                                         const int *results, size_t count, aks_error **err);
/* The result recorded for `check` of this instance (AKS_PROOF_NONE when none), and when
 * it was recorded (seconds since the epoch) in *recorded_at, which may be NULL. */
AKS_EXPORT int aks_provider_get_proof(const aks_provider *prov, const char *check,
                                      int64_t *recorded_at);
/* Bytes of stdout and of stderr kept per result (the rest is counted and
 * reported as cut), and the largest file a download may return. */
AKS_EXPORT void aks_provider_set_limits(aks_provider *prov, size_t stream_cap, size_t file_cap);
AKS_EXPORT int aks_provider_create(aks_provider *prov, const aks_call *call, aks_sandbox **out,
                                   aks_error **err);
AKS_EXPORT int aks_provider_attach(aks_provider *prov, const char *sandbox_id, const aks_call *call,
                                   aks_sandbox **out, aks_error **err);
AKS_EXPORT int aks_provider_destroy(aks_provider *prov, const char *sandbox_id,
                                    const aks_call *call, aks_error **err);
/* Releases the instance; every sandbox handle must be closed first. */
AKS_EXPORT void aks_provider_close(aks_provider *prov);

AKS_EXPORT const char *aks_sandbox_get_id(const aks_sandbox *sb);

/*
 * The execution operations. On success *out is a new result. On AKS_ETIMEOUT
 * and AKS_ECANCELLED *out is also set, holding what the program printed before
 * it was killed (aks_result_timed_out() is true). On other errors *out is
 * NULL. A failing program is AKS_OK with a non-zero exit code.
 */
AKS_EXPORT int aks_sandbox_execute_code(aks_sandbox *sb, const char *code, const char *language,
                                        const aks_call *call, aks_result **out, aks_error **err);
AKS_EXPORT int aks_sandbox_execute_command(aks_sandbox *sb, const char *command,
                                           const aks_call *call, aks_result **out, aks_error **err);
AKS_EXPORT int aks_sandbox_install_packages(aks_sandbox *sb, const char *const *packages,
                                            const aks_call *call, aks_result **out,
                                            aks_error **err);
AKS_EXPORT int aks_sandbox_upload_file(aks_sandbox *sb, const char *path, const void *data,
                                       size_t len, const aks_call *call, aks_error **err);
/* On success the result holds exactly one file. */
AKS_EXPORT int aks_sandbox_download_file(aks_sandbox *sb, const char *path, const aks_call *call,
                                         aks_result **out, aks_error **err);
/* Releases the handle; backend state stays for a later attach. */
AKS_EXPORT void aks_sandbox_close(aks_sandbox *sb);

/* ---- principal resolvers --------------------------------------------------- */

typedef struct aks_resolver aks_resolver;
/* A principal the host owns (from a resolver, or built by the embedder). */
typedef struct aks_principal_builder aks_resolved_principal;

/* Instantiates a resolver plugin with its validated config block (borrowed;
 * it must outlive the resolver; NULL means the defaults). */
AKS_EXPORT int aks_resolver_open(const aks_plugin *plugin, const aks_config *config,
                                 aks_resolver **out, aks_error **err);
/* The built-in resolver: an agent-mode principal whose subject is the agent. */
AKS_EXPORT int aks_resolver_open_agent(aks_resolver **out, aks_error **err);
/* Resolves a principal for a call; on success *out is new and the caller frees
 * it with aks_resolved_principal_free(). */
AKS_EXPORT int aks_resolver_resolve(aks_resolver *resolver, const aks_resolve_request *request,
                                    aks_resolved_principal **out, aks_error **err);
AKS_EXPORT void aks_resolver_close(aks_resolver *resolver);
/* Fills a request; attributes may be NULL. A macro, as aks_call_init. */
AKS_EXPORT void aks_resolve_request_init_sized(aks_resolve_request *request, size_t size,
                                               const char *conversation_id, const char *agent,
                                               const char *const *attributes);
#define aks_resolve_request_init(request, conversation_id, agent, attributes)                      \
	aks_resolve_request_init_sized((request), sizeof(*(request)), (conversation_id), (agent),  \
	                               (attributes))
/* The principal, valid as long as the resolved principal. */
AKS_EXPORT const aks_principal *aks_resolved_principal_get(const aks_resolved_principal *p);
AKS_EXPORT void aks_resolved_principal_free(aks_resolved_principal *p);

/* ---- configuration (the sandbox: block of config.yaml) ------------------------ */

typedef struct aks_settings aks_settings;
typedef struct aks_profile aks_profile;

typedef enum aks_scope {
	AKS_SCOPE_PER_SESSION = 0, /* one sandbox per session; the workspace persists */
	AKS_SCOPE_PER_CALL = 1,    /* a fresh sandbox per execution */
	AKS_SCOPE_PER_RUNTIME = 2  /* one shared sandbox per profile */
} aks_scope;

typedef enum aks_environment {
	AKS_ENV_MANAGED = 0, /* the provider creates and owns the sandbox */
	AKS_ENV_ATTACHED = 1 /* an existing environment, never created or destroyed */
} aks_environment;

/* Policy dimensions (aks_profile_get_unenforced). */
#define AKS_POLICY_NETWORK    1u
#define AKS_POLICY_FILESYSTEM 2u
#define AKS_POLICY_RESOURCES  4u

/*
 * The config file to use: `explicit_path` if given; else $AKSANDBOX_CONFIG;
 * else ./config.yaml; else $XDG_CONFIG_HOME/aksandbox/config.yaml (default
 * ~/.config/...); else /etc/aksandbox/config.yaml. A file at one of the last
 * three places that has no `sandbox:` mapping is someone else's: it is skipped
 * with a warning in the library's log. NULL when none is found (the embedded
 * default applies). The caller frees the result.
 */
AKS_EXPORT char *aks_settings_find_file(const char *explicit_path);
/* The same search, telling on_skip (if not NULL) of each file skipped, by its
 * absolute path, instead of logging it. */
typedef void (*aks_settings_skip_fn)(void *userdata, const char *path);
AKS_EXPORT char *aks_settings_locate(const char *explicit_path, aks_settings_skip_fn on_skip,
                                     void *userdata);

/*
 * Loads and validates the sandbox: block of `path` (NULL: the embedded
 * default, local_subprocess in process), after applying the AK_SANDBOX__...
 * overrides of `envp` (NULL: the process environment). For an enabled sandbox
 * every profile's plugin is loaded, its block validated against the plugin's
 * schema and its provider instance opened. Errors name file, line, column (or
 * the environment variable) and the key path.
 */
AKS_EXPORT int aks_settings_load(const char *path, const char *const *envp, aks_settings **out,
                                 aks_error **err);
AKS_EXPORT void aks_settings_free(aks_settings *settings);
AKS_EXPORT const char *aks_settings_get_file(const aks_settings *settings);
AKS_EXPORT bool aks_settings_is_enabled(const aks_settings *settings);
AKS_EXPORT const char *aks_settings_get_default_profile(const aks_settings *settings);
AKS_EXPORT int64_t aks_settings_get_tool_output_max_chars(const aks_settings *settings);
AKS_EXPORT const char *aks_settings_get_broker_flavor(const aks_settings *settings);
AKS_EXPORT double aks_settings_get_wait_timeout(const aks_settings *settings);
/* The agents filter: true when `agent` gets the tools (NULL agent: always). */
AKS_EXPORT bool aks_settings_agent_allowed(const aks_settings *settings, const char *agent);
/* The principal resolver (NULL when the sandbox is disabled). */
AKS_EXPORT aks_resolver *aks_settings_get_resolver(const aks_settings *settings);
/* "agent" for the built-in resolver, else the configured plugin type. */
AKS_EXPORT const char *aks_settings_get_resolver_type(const aks_settings *settings);
AKS_EXPORT size_t aks_settings_get_profile_count(const aks_settings *settings);
AKS_EXPORT aks_profile *aks_settings_get_profile(const aks_settings *settings, size_t index);
/*
 * What the load accepted but is likely a mistake, each with its place: an unknown key where the
 * original allows extra ones (sandbox.broker), an inactive provider block its plugin refuses.
 * Also logged at warning level when loading. Valid as long as the settings.
 */
AKS_EXPORT size_t aks_settings_get_warning_count(const aks_settings *settings);
AKS_EXPORT const char *aks_settings_get_warning(const aks_settings *settings, size_t index);
/* `name` NULL: the default profile. Unknown: "unknown sandbox profile 'x';
 * configured profiles: ['default']". */
AKS_EXPORT int aks_settings_find_profile(const aks_settings *settings, const char *name,
                                         aks_profile **out, aks_error **err);

AKS_EXPORT const char *aks_profile_get_name(const aks_profile *profile);
AKS_EXPORT const char *aks_profile_get_type(const aks_profile *profile);
AKS_EXPORT int aks_profile_get_scope(const aks_profile *profile);       /* aks_scope */
AKS_EXPORT int aks_profile_get_environment(const aks_profile *profile); /* aks_environment */
AKS_EXPORT int64_t aks_profile_get_idle_timeout(const aks_profile *profile);
AKS_EXPORT int aks_profile_get_identity_mode(const aks_profile *profile);
AKS_EXPORT const aks_policy *aks_profile_get_policy(const aks_profile *profile);
AKS_EXPORT const char *aks_profile_get_attach_to(const aks_profile *profile);
/* The warm pool (ABI 1.2; `pool: {size, max_idle}`): how many sandboxes it keeps created
 * ahead (0: none), and how many seconds one waits before it is replaced. */
AKS_EXPORT int aks_profile_get_pool_size(const aks_profile *profile);
AKS_EXPORT double aks_profile_get_pool_max_idle(const aks_profile *profile);
/* The params block as JSON text ("{}" when absent). */
AKS_EXPORT const char *aks_profile_get_params(const aks_profile *profile);
/* The profile's provider instance (NULL when the sandbox is disabled). */
AKS_EXPORT aks_provider *aks_profile_get_provider(const aks_profile *profile);
/* AKS_POLICY_* dimensions the profile sets but its provider cannot enforce. */
AKS_EXPORT unsigned aks_profile_get_unenforced(const aks_profile *profile);

/* The state of an inactive block (aks_profile_get_inactive_block). */
typedef enum aks_block_state {
	AKS_BLOCK_VALID = 0,     /* its plugin accepts it; detail: the plugin's file */
	AKS_BLOCK_UNCHECKED = 1, /* its plugin is not installed or not loaded; detail: why */
	AKS_BLOCK_INVALID = 2    /* its plugin refuses it; detail: where and why (a warning) */
} aks_block_state;

/*
 * The provider blocks a profile holds for other types than its own (`docker:` beside
 * `local_subprocess:`, for a deployment that sets AK_SANDBOX__TYPE=docker): inert, but checked
 * against their own plugins when installed. Returns the block's name (NULL past the end) and
 * sets *state (aks_block_state) and *detail, either of which may be NULL.
 */
AKS_EXPORT size_t aks_profile_get_inactive_block_count(const aks_profile *profile);
AKS_EXPORT const char *aks_profile_get_inactive_block(const aks_profile *profile, size_t index,
                                                      int *state, const char **detail);

/*
 * The gates every request passes, fail closed. The policy gate refuses
 * (AKS_EPOLICY) a strict profile whose provider cannot enforce a dimension it
 * sets; with strict: false it logs one warning per profile and passes. The
 * principal gate refuses a user-identity profile whose provider does not
 * support user identity (AKS_ECAPABILITY) or whose principal is not a user
 * (AKS_EPOLICY). timeout is always enforced and never refused.
 */
AKS_EXPORT int aks_profile_check_policy(aks_profile *profile, aks_error **err);
AKS_EXPORT int aks_profile_check_principal(const aks_profile *profile,
                                           const aks_principal *principal, aks_error **err);

/* ---- results --------------------------------------------------------------- */

/* The program's exit code; 128 + N when signal N ended it; -1 when it was killed at its
 * deadline or by a cancellation (aks_result_timed_out is then true). */
AKS_EXPORT int aks_result_get_exit_code(const aks_result *r);
/* The kept bytes of a stream (NUL-terminated for convenience; may contain
 * NULs, so use *len). */
AKS_EXPORT const char *aks_result_get_stdout(const aks_result *r, size_t *len);
AKS_EXPORT const char *aks_result_get_stderr(const aks_result *r, size_t *len);
/* The bytes the program wrote to a stream, kept or not. */
AKS_EXPORT uint64_t aks_result_get_stream_total(const aks_result *r, int stream);
AKS_EXPORT bool aks_result_is_truncated(const aks_result *r, int stream);
AKS_EXPORT bool aks_result_timed_out(const aks_result *r);
AKS_EXPORT const char *aks_result_get_notice(const aks_result *r);
/* Connections the profile's egress policy (network_allow) refused on the sandbox that this
 * result reports: those refused while the operation ran, and any refused since the
 * previous result that reported some (a program left running in the background). */
AKS_EXPORT unsigned aks_result_get_egress_refused(const aks_result *r);
AKS_EXPORT const char *aks_result_get_provider_data(const aks_result *r);
AKS_EXPORT size_t aks_result_get_file_count(const aks_result *r);
AKS_EXPORT const unsigned char *aks_result_get_file(const aks_result *r, size_t index,
                                                    const char **path, const char **mime_type,
                                                    size_t *len);
AKS_EXPORT void aks_result_free(aks_result *r);

/* ---- the agent tools ---------------------------------------------------------- */

/*
 * A host of the eight sandbox tools (run_code, run_command, write_sandbox_file,
 * read_sandbox_file, check_sandbox_task, list_sandbox_sessions,
 * new_sandbox_session, destroy_sandbox_session) over loaded settings, with its
 * sessions in a state directory shared by every process that opens it.
 */
typedef struct aks_runtime aks_runtime;

/*
 * Output as it arrives (aks_tool_context.on_output): `data` holds `len` (> 0) bytes the
 * program of a run_code or run_command call wrote to `stream` (AKS_STREAM_STDOUT or
 * AKS_STREAM_STDERR), in order per stream, not NUL-terminated and not necessarily whole
 * lines or whole UTF-8 characters; `tool` is the tool's name. Every byte is passed, also
 * past the stream cap that bounds what the tool's JSON result keeps. The callback runs on
 * a library or plugin thread (not necessarily the caller's), one call at a time per tool
 * call, while aks_runtime_call_tool runs: never after it has returned, not even when the
 * run goes on as a pending task (broker.wait_timeout): the rest of that run's output is
 * only in check_sandbox_task. It must return promptly (the program's output waits for
 * it) and must not call aks_runtime_call_tool for the same session. With broker.flavor
 * `queue` the operations run in worker processes and no output is streamed.
 */
typedef void (*aks_tool_output_fn)(void *userdata, const char *tool, int stream, const void *data,
                                   size_t len);

/* Who calls a tool. Every call belongs to a conversation, whose sandbox
 * sessions no other conversation can address. */
typedef struct aks_tool_context {
	uint32_t struct_version;       /* AKS_TOOL_CONTEXT_VERSION */
	uint32_t struct_size;          /* sizeof(aks_tool_context) */
	const char *conversation_id;   /* required; ids starting with '@' are reserved */
	const char *agent;             /* the agent's name, or NULL */
	const char *const *attributes; /* NULL-terminated key, value pairs for the resolver */
	aks_cancel *cancel;            /* NULL: not cancellable */
	/* Version 2: */
	aks_tool_output_fn on_output; /* NULL: output only in the result */
	void *output_userdata;        /* passed to on_output */
	/* Version 3: how long run_code and run_command wait before the run becomes a pending
	 * task. AKS_WAIT_CONFIGURED: the configuration's broker.wait_timeout; a number of
	 * seconds >= 0 (0: at once); AKS_WAIT_UNTIL_DONE: the whole run (on the queue flavor,
	 * its policy timeout and a margin, which the run cannot outlast). */
	double wait_timeout;
} aks_tool_context;

#define AKS_WAIT_CONFIGURED (-1.0)
#define AKS_WAIT_UNTIL_DONE (-2.0)

#define AKS_TOOL_CONTEXT_INIT                                                                      \
	.struct_version = AKS_TOOL_CONTEXT_VERSION, .struct_size = sizeof(aks_tool_context)

/* 2 added on_output and output_userdata; a version 1 struct (struct_size up to `cancel`)
 * still works and streams nothing. 3 added wait_timeout; an older struct waits as
 * configured. */
#define AKS_TOOL_CONTEXT_VERSION 3

/* Fills a context: version, size, the two ids, no attributes, no cancel token, no output
 * callback, the configured wait. A macro, as aks_call_init. */
AKS_EXPORT void aks_tool_context_init_sized(aks_tool_context *ctx, size_t size,
                                            const char *conversation_id, const char *agent);
#define aks_tool_context_init(ctx, conversation_id, agent)                                         \
	aks_tool_context_init_sized((ctx), sizeof(*(ctx)), (conversation_id), (agent))
/* Opens a runtime. `settings` is borrowed and must outlive it; `state_dir`
 * NULL is the default state directory ($AKS_STATE_DIR, ...). A disabled
 * sandbox opens no state. */
AKS_EXPORT int aks_runtime_open(aks_settings *settings, const char *state_dir, aks_runtime **out,
                                aks_error **err);
AKS_EXPORT void aks_runtime_close(aks_runtime *rt);
/*
 * Calls a tool by name with JSON arguments (an object; NULL or "" for none).
 * *out_json is always the tool's JSON result (errors included, as the agent
 * sees them), freed by the caller with free(); returns AKS_OK, or an error
 * only for API misuse (*out_json is then NULL) or when memory ran out.
 */
AKS_EXPORT int aks_runtime_call_tool(aks_runtime *rt, const char *tool, const char *args_json,
                                     const aks_tool_context *ctx, char **out_json, aks_error **err);
/* The tools' argument schemas, a JSON array of {name, description,
 * parameters} (malloc'ed; NULL when out of memory). */
AKS_EXPORT char *aks_runtime_tool_schemas(const aks_runtime *rt);
/* The system-prompt guidance for `agent` ("" when the sandbox is disabled or
 * the agents filter excludes it; NULL agent: no filtering). malloc'ed. */
AKS_EXPORT char *aks_runtime_guidance(const aks_runtime *rt, const char *agent);
/*
 * The idle reaper: destroys the sandbox of every stored session (of any
 * conversation) whose profile is managed and still configured and that has
 * been idle longer than the profile's idle_timeout. The session itself stays;
 * its next call starts in a fresh sandbox and says so in its notice. Attached
 * environments are never touched. Hosts call it at start and, if they run
 * long, now and then (sandboxes are otherwise only reset when touched).
 * AKS_OK (also when the sandbox is disabled), or an error when the state
 * directory cannot be read.
 */
AKS_EXPORT int aks_runtime_reap(aks_runtime *rt, aks_error **err);
/*
 * The garbage collector (docs/gc.md): every sandbox that a provider of this runtime's
 * profiles created for its state store (labelled with the store's owner id) and that no
 * session records is destroyed, unless the process creating it is still alive; with dry_run
 * it is only reported. This is what a host killed between creating a sandbox and recording it
 * leaves behind. What carries another store's label, or none (attached environments), is
 * never touched. *report (malloc'd, the caller's) is a JSON object: owner, dry_run, removed
 * and failed ([{profile, sandbox_id[, error]}]), kept, in_creation, not_listed ([{profile,
 * reason}]: providers that cannot list what they made) and claims_cleared. AKS_ECONFIG when
 * the sandbox is disabled, AKS_ECAPABILITY under the queue flavor (its workers collect), or
 * an error reading the state store. The background reaper (aks_runtime_start_reaper) runs it
 * after every pass.
 */
AKS_EXPORT int aks_runtime_gc(aks_runtime *rt, bool dry_run, char **report, aks_error **err);
/*
 * Fills the warm pools (ABI 1.2; a profile's `pool: {size, max_idle}`, docs/pools.md): for
 * every pooled profile, pooled sandboxes older than max_idle are destroyed and the missing
 * ones created with the profile's policy, so that new sessions (and aks_runtime_create_sandbox)
 * take one instead of waiting for a create. *report (malloc'd, the caller's) is a JSON array
 * of {profile, size, ready, created, replaced, failed: [message]}: a create that failed is
 * reported there, not as an error. AKS_ECONFIG when the sandbox is disabled,
 * AKS_ECAPABILITY under the queue flavor, or an error of the state store. The background
 * reaper (aks_runtime_start_reaper) fills them when it starts, after every pass, and at once
 * when a sandbox was taken from a pool.
 */
AKS_EXPORT int aks_runtime_fill_pools(aks_runtime *rt, char **report, aks_error **err);
/*
 * A sandbox of `profile` outside any session (what `aksandbox run` makes for one program):
 * aks_provider_create, with the creation claimed in the runtime's state store and the
 * sandbox labelled with it, so that aks_runtime_gc collects it if this process dies before
 * aks_runtime_destroy_sandbox. A disabled runtime creates it unclaimed.
 */
AKS_EXPORT int aks_runtime_create_sandbox(aks_runtime *rt, const aks_profile *profile,
                                          const aks_call *call, aks_sandbox **out, aks_error **err);
/* Closes sb, destroys its sandbox (aks_provider_destroy) and then releases its claim. */
AKS_EXPORT int aks_runtime_destroy_sandbox(aks_runtime *rt, const aks_profile *profile,
                                           aks_sandbox *sb, const aks_call *call, aks_error **err);
/*
 * Runs the idle reaper (aks_runtime_reap) on a background thread every
 * `interval_seconds` (> 0; the first pass after one interval), for hosts that
 * run long. Its errors are logged, never fatal. aks_runtime_close stops and
 * joins the thread promptly, without waiting for the interval to end.
 * AKS_EINVAL for a bad interval or when the reaper is already running; AKS_OK
 * without a thread when the sandbox is disabled.
 */
AKS_EXPORT int aks_runtime_start_reaper(aks_runtime *rt, double interval_seconds, aks_error **err);

/* ---- the queue worker ----------------------------------------------------------- */

/*
 * `flavor: queue` sends the tools' operations to workers near the sandbox backends: processes
 * that run aks_worker_run (the `aksandbox worker` command) over the same config.yaml. A worker
 * consumes requests from the transport, runs them against its own profiles (its policy and
 * gates apply, never a request's), sends the completions back and stores them in the
 * response store, and sweeps idle sandboxes. See docs/queue.md.
 */
typedef struct aks_worker_monitor aks_worker_monitor;

typedef struct aks_worker_options {
	uint32_t struct_version; /* AKS_WORKER_OPTIONS_VERSION */
	uint32_t struct_size;    /* sizeof(aks_worker_options) */
	bool once;               /* return once both queues are drained, instead of at `stop` */
	double stop_grace;       /* seconds in-flight operations get to finish after `stop` is
	                          * triggered, before they are cancelled and handed back for
	                          * redelivery (<= 0: 30) */
	/* Appended with ABI 1.5: a monitor (aks_worker_monitor_new) through which other
	 * threads read the worker's state while it runs; NULL: none. Borrowed: it must outlive
	 * the call. */
	aks_worker_monitor *monitor;
} aks_worker_options;

#define AKS_WORKER_OPTIONS_INIT                                                                    \
	.struct_version = AKS_WORKER_OPTIONS_VERSION, .struct_size = sizeof(aks_worker_options)

#define AKS_WORKER_OPTIONS_VERSION 1

/* Fills the options: version, size, run until stopped, a 30 s grace. A macro, as
 * aks_call_init. */
AKS_EXPORT void aks_worker_options_init_sized(aks_worker_options *opts, size_t size);
#define aks_worker_options_init(opts) aks_worker_options_init_sized((opts), sizeof(*(opts)))
/*
 * Runs a queue worker for `settings` (enabled, flavor queue with a transport that reaches
 * other processes) until `stop` is triggered (NULL: only `once` ends it), then stops cleanly:
 * no new work is taken, in-flight operations finish within the grace and their completions
 * are sent. AKS_OK after a clean stop; an error when the worker cannot start (the message says
 * why: the configuration, an unreachable transport or store) or one of its loops failed.
 * aks_cancel_trigger may be called from a signal-handling thread.
 */
AKS_EXPORT int aks_worker_run(aks_settings *settings, const aks_worker_options *opts,
                              aks_cancel *stop, aks_error **err);
/* Whether a worker could run here: the settings are a worker's, and the transport and the
 * response store answer. AKS_OK, or the error aks_worker_run would start with. */
AKS_EXPORT int aks_worker_check(aks_settings *settings, aks_error **err);

/*
 * What a running worker is doing, for health checks and an autoscaler (`aksandbox worker
 * --metrics`). A monitor is given to aks_worker_run in its options; any thread may read it at
 * any time, also before the worker starts and after it ends (running false then).
 */
typedef struct aks_worker_status {
	uint32_t struct_version; /* AKS_WORKER_STATUS_VERSION */
	uint32_t struct_size;    /* sizeof(aks_worker_status) */
	bool running;            /* the worker's consumers are open; until it ends */
	bool stopping;           /* a stop was asked for: in-flight work is finishing */
	unsigned input_consumers, output_consumers;
	unsigned in_flight;        /* operations running now */
	unsigned fetch_failing;    /* consumers whose last fetch failed (the transport is not
	                            * answering) */
	double stalest_consumer_s; /* seconds since the consumer seen least recently was last
	                            * seen working; each is seen about every second */
	/* Counted since the worker started: operations completed and sent back, requests sent to
	 * the permanent-failure path, messages handed back for redelivery, messages
	 * dead-lettered, completion records stored and the store's failures to. */
	uint64_t requests, request_failures, nacks, dead_lettered, completions_stored,
	    store_failures;
	/* Messages waiting on each queue, as the transport counts them (approximate where the
	 * service's count is: SQS); -1 when the transport cannot count (a transport plugin
	 * older than ABI 1.5) or the count failed (logged), or the read did not count the queues.
	 */
	int64_t input_depth, output_depth;
	/* The response store does not answer: the last attempt to store a completion record
	 * failed (it is retried; the next that succeeds clears this), or an operation waits for
	 * its session's lock in the store. Appended after the depths (still ABI 1.5): a caller
	 * whose struct_size ends before it is not given it. */
	bool store_failing;
} aks_worker_status;

#define AKS_WORKER_STATUS_VERSION 1

AKS_EXPORT int aks_worker_monitor_new(aks_worker_monitor **out, aks_error **err);
/* After the aks_worker_run it was given has returned. NULL is a no-op. */
AKS_EXPORT void aks_worker_monitor_free(aks_worker_monitor *m);
/* Fills *out (of `size` bytes: the macro passes the caller's sizeof); the depths only with
 * count_queues (a request to the transport per queue: for a metrics scrape, not for a
 * probe), else -1. AKS_OK, also when no worker runs (running false, the rest zero, depths
 * -1). */
AKS_EXPORT int aks_worker_monitor_read_sized(aks_worker_monitor *m, aks_worker_status *out,
                                             size_t size, bool count_queues, aks_error **err);
#define aks_worker_monitor_read(m, out, count_queues, err)                                         \
	aks_worker_monitor_read_sized((m), (out), sizeof(*(out)), (count_queues), (err))

/* ---- entry points of binaries built before the sized initialisers ---------------- */

/*
 * What programs compiled against a header without the *_init_sized functions call. Each
 * writes the struct as it was in that header (the layout of ABI 1.0; aks_tool_context's
 * version 2), never more, whatever the library's struct has grown to. New code calls the
 * macros above; the parentheses keep them from expanding here.
 */
AKS_EXPORT void(aks_policy_init)(aks_policy *policy);
AKS_EXPORT void(aks_principal_init)(aks_principal *principal, const char *subject);
AKS_EXPORT void(aks_call_init)(aks_call *call, double timeout, const aks_policy *policy,
                               const aks_principal *principal, aks_cancel *cancel);
AKS_EXPORT void(aks_resolve_request_init)(aks_resolve_request *request, const char *conversation_id,
                                          const char *agent, const char *const *attributes);
AKS_EXPORT void(aks_tool_context_init)(aks_tool_context *ctx, const char *conversation_id,
                                       const char *agent);
AKS_EXPORT void(aks_worker_options_init)(aks_worker_options *opts);

#ifdef __cplusplus
}
#endif

#endif /* AKSANDBOX_AKSANDBOX_H */
