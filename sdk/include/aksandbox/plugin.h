/*
 * aksandbox/plugin.h - the plugin contract: descriptor, config schema and the
 * host services table.
 *
 * A plugin is a shared object that exports exactly one symbol,
 * aks_plugin_entry(), which has no side effects and returns a pointer to
 * static const data: the descriptor. Everything else in the plugin is hidden
 * (build with -fvisibility=hidden; AKS_PLUGIN_DEFINE marks the entry point).
 *
 * ABI rules
 *  - Every transparent struct starts with `uint32_t struct_version;
 *    uint32_t struct_size;`. Structs grow only by appending; the host reads a
 *    field only if the plugin's struct_size covers it.
 *  - The descriptor carries the AKS_ABI_MAJOR the plugin was built with and the
 *    minor it targets (AKS_TARGET_ABI_MINOR, version.h: AKS_ABI_MINOR unless
 *    the plugin asks for an older one). The host loads it only if the major is
 *    equal and that minor is not newer than its own.
 *  - Fill struct_version and struct_size of the structs you hand the host with
 *    the AKS_*_INIT designated initialisers, e.g.
 *      static const aks_capabilities caps = {AKS_CAPABILITIES_INIT, .shell = true};
 *  - Plugins never link against libaksandbox: the host hands them its services
 *    through the aks_host_api table passed to init. Third parties need only
 *    these headers (pkg-config aksandbox-sdk).
 *
 * Ownership rules
 *  1. Whoever allocates frees. The host never frees plugin memory and the
 *     plugin never frees host memory, except through the host's own
 *     error_free().
 *  2. Everything the host passes in (config, call, policy, principal, ids,
 *     code, file contents) is borrowed for the duration of the call only.
 *     Copy what you keep.
 *  3. Results and errors are host objects. The plugin fills them through
 *     host->result_*() and host->error_set(); it never allocates them.
 *  4. A const pointer a plugin returns (descriptor, capabilities, sandbox id)
 *     stays valid as long as its owner: the descriptor and class capabilities
 *     for the life of the process, instance capabilities until fini, a sandbox
 *     id until that sandbox handle is closed.
 *  5. Handles the plugin creates (aks_provider_impl, aks_sandbox_impl) are
 *     released by the plugin in fini() and close() respectively; the host calls
 *     each exactly once.
 */
#ifndef AKSANDBOX_PLUGIN_H
#define AKSANDBOX_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <aksandbox/common.h>
#include <aksandbox/version.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The kinds of plugin. One descriptor format serves all of them. */
typedef enum aks_plugin_kind {
	AKS_PLUGIN_PROVIDER = 1,  /* sandbox backend: ops is aks_provider_ops */
	AKS_PLUGIN_TRANSPORT = 2, /* queue transport (later ABI minor) */
	AKS_PLUGIN_STORE = 3,     /* state / response store: ops is aks_store_ops (store.h) */
	AKS_PLUGIN_RESOLVER = 4   /* principal resolver: ops is aks_resolver_ops (resolver.h) */
} aks_plugin_kind;

/* ---- configuration schema ------------------------------------------------ */

/* The host-owned, validated configuration block handed to a plugin. */
typedef struct aks_config aks_config;

typedef enum aks_config_type {
	AKS_CONFIG_STRING = 1,      /* YAML scalar, or null */
	AKS_CONFIG_BOOL = 2,        /* true / false */
	AKS_CONFIG_INT = 3,         /* 64-bit signed integer */
	AKS_CONFIG_DOUBLE = 4,      /* number */
	AKS_CONFIG_STRING_LIST = 5, /* sequence of scalars */
	AKS_CONFIG_STRING_MAP = 6,  /* mapping of scalar to scalar */
	AKS_CONFIG_JSON = 7         /* any structure, handed over as JSON text */
} aks_config_type;

#define AKS_CONFIG_KEY_VERSION 1

/* One key of a plugin's config block. Arrays of these end with AKS_CONFIG_END. */
typedef struct aks_config_key {
	uint32_t struct_version;   /* AKS_CONFIG_KEY_VERSION */
	uint32_t struct_size;      /* sizeof(aks_config_key) */
	const char *name;          /* NULL terminates the array */
	uint32_t type;             /* aks_config_type */
	bool required;             /* the block must set it */
	const char *default_value; /* YAML text of the default, or NULL */
	const char *help;          /* one line for `aksandbox providers` */
} aks_config_key;

/* The start of a designated initialiser of an aks_config_key: its version and size. */
#define AKS_CONFIG_KEY_INIT                                                                        \
	.struct_version = AKS_CONFIG_KEY_VERSION, .struct_size = sizeof(aks_config_key)

#define AKS_CONFIG_KEY(name_, type_, required_, default_, help_)                                   \
	{                                                                                          \
		AKS_CONFIG_KEY_VERSION, sizeof(aks_config_key), (name_), (type_), (required_),     \
		    (default_), (help_)                                                            \
	}
#define AKS_CONFIG_END                                                                             \
	{                                                                                          \
		AKS_CONFIG_KEY_VERSION, sizeof(aks_config_key), NULL, 0, false, NULL, NULL         \
	}

/* ---- the descriptor ------------------------------------------------------- */

#define AKS_DESCRIPTOR_VERSION 1

typedef struct aks_plugin_descriptor {
	uint32_t struct_version;           /* AKS_DESCRIPTOR_VERSION */
	uint32_t struct_size;              /* sizeof(aks_plugin_descriptor) */
	uint32_t abi_major;                /* AKS_ABI_MAJOR at build time */
	uint32_t abi_minor;                /* AKS_TARGET_ABI_MINOR at build time */
	uint32_t kind;                     /* aks_plugin_kind */
	const char *name;                  /* must equal the file's base name */
	const char *version;               /* the plugin's own version */
	const char *license;               /* SPDX identifier */
	const char *summary;               /* one line */
	const aks_config_key *config_keys; /* schema of the config block, or NULL */
	const void *ops;                   /* kind-specific table (provider.h) */
	void *reserved[4];                 /* zero */
} aks_plugin_descriptor;

#define AKS_DESCRIPTOR_INIT                                                                        \
	.struct_version = AKS_DESCRIPTOR_VERSION, .struct_size = sizeof(aks_plugin_descriptor)

/* The one symbol a plugin exports. */
typedef const aks_plugin_descriptor *(*aks_plugin_entry_fn)(void);

/*
 * Defines the descriptor and the exported entry point. Use once per plugin, at
 * file scope, followed by a semicolon:
 *
 *   AKS_PLUGIN_DEFINE(AKS_PLUGIN_PROVIDER, "myprov", "1.0", "MIT",
 *                     "my backend", myprov_keys, &myprov_ops);
 */
#define AKS_PLUGIN_DEFINE(kind_, name_, version_, license_, summary_, keys_, ops_)                 \
	static const aks_plugin_descriptor aks_plugin_descriptor_ = {                              \
	    AKS_DESCRIPTOR_VERSION,                                                                \
	    sizeof(aks_plugin_descriptor),                                                         \
	    AKS_ABI_MAJOR,                                                                         \
	    AKS_TARGET_ABI_MINOR,                                                                  \
	    (kind_),                                                                               \
	    (name_),                                                                               \
	    (version_),                                                                            \
	    (license_),                                                                            \
	    (summary_),                                                                            \
	    (keys_),                                                                               \
	    (ops_),                                                                                \
	    {NULL, NULL, NULL, NULL}};                                                             \
	AKS_EXPORT const aks_plugin_descriptor *aks_plugin_entry(void);                            \
	AKS_EXPORT const aks_plugin_descriptor *aks_plugin_entry(void)                             \
	{                                                                                          \
		return &aks_plugin_descriptor_;                                                    \
	}                                                                                          \
	struct aks_plugin_define_needs_a_semicolon_

/* ---- host services -------------------------------------------------------- */

typedef enum aks_log_level {
	AKS_LOG_ERROR = 0,
	AKS_LOG_WARNING = 1,
	AKS_LOG_INFO = 2,
	AKS_LOG_DEBUG = 3
} aks_log_level;

/* Which part of a result a write goes to. */
typedef enum aks_stream {
	AKS_STREAM_STDOUT = 1,
	AKS_STREAM_STDERR = 2,
	AKS_STREAM_FILE = 3 /* the file most recently added with result_add_file */
} aks_stream;

/* A host-owned result record (stdout, stderr, exit code, files, notice,
 * provider data). The host bounds what it keeps of each stream. */
typedef struct aks_result aks_result;

/* Per-call context; defined in provider.h. */
typedef struct aks_call aks_call;

/* A host-owned principal a resolver fills (resolver.h). */
typedef struct aks_principal_builder aks_principal_builder;

#define AKS_HOST_API_VERSION 1

typedef struct aks_host_api {
	uint32_t struct_version; /* AKS_HOST_API_VERSION */
	uint32_t struct_size;    /* sizeof(aks_host_api) of the host */

	/* Logging. `plugin` is the plugin's name. Never write to stdout. */
	void (*log)(int level, const char *plugin, const char *fmt, ...) AKS_PRINTF(3, 4);

	/* Errors. error_set() stores a new error in *err when err != NULL and
	 * *err == NULL, and returns `code` so it can be used in a return. */
	int (*error_set)(aks_error **err, int code, const char *fmt, ...) AKS_PRINTF(3, 4);
	int (*error_code)(const aks_error *err);
	const char *(*error_message)(const aks_error *err);
	void (*error_free)(aks_error *err);

	/* Typed config accessors. The host validated the block against the
	 * descriptor's schema before init, so a key of the right type always
	 * answers: with its value, its schema default, or (for strings) NULL.
	 * Returned pointers are borrowed from the config, which is itself borrowed
	 * for the call it is passed to (init; rule 2 above): copy what you keep.
	 * Lists are NULL-terminated; maps are NULL-terminated key, value pairs.
	 * Each returns AKS_OK, or AKS_EINVAL for a key not in the schema or of
	 * another type. */
	int (*config_string)(const aks_config *cfg, const char *key, const char **out);
	int (*config_bool)(const aks_config *cfg, const char *key, bool *out);
	int (*config_int)(const aks_config *cfg, const char *key, int64_t *out);
	int (*config_double)(const aks_config *cfg, const char *key, double *out);
	int (*config_list)(const aks_config *cfg, const char *key, const char *const **out);
	int (*config_map)(const aks_config *cfg, const char *key, const char *const **out);
	int (*config_json)(const aks_config *cfg, const char *key, const char **out);

	/* Results. result_write() keeps at most the host's per-stream cap of
	 * stdout and stderr (it still counts what it drops, and never fails for
	 * them); for AKS_STREAM_FILE it fails with AKS_ELIMIT past the host's file
	 * size limit. Write stdout and stderr as the output arrives, not once at
	 * the end: the host streams each write to its callers (the C API's
	 * on_output, MCP progress notifications) while the operation runs. A
	 * plugin's reader thread may write, one writer at a time per result,
	 * until the operation returns. */
	int (*result_write)(aks_result *r, int stream, const void *data, size_t len,
	                    aks_error **err);
	/* The program's exit status: 0..255 for an exit, 128 + N for death by
	 * signal N (as a shell reports it). NULL r: nothing. */
	void (*result_set_exit_code)(aks_result *r, int exit_code);
	/* Marks the result as cut short by the deadline (return AKS_ETIMEOUT too);
	 * a cancelled call is AKS_ECANCELLED and is not marked. NULL r: nothing. */
	void (*result_set_timed_out)(aks_result *r);
	/* Each copies its strings. result_set_notice: NULL clears it; AKS_EINVAL for
	 * a NULL r, AKS_ENOMEM. result_add_file: a file whose bytes the next
	 * AKS_STREAM_FILE writes hold; mime_type NULL = application/octet-stream;
	 * AKS_EINVAL for a NULL r or path, AKS_ENOMEM. result_set_provider_data: one
	 * JSON object (AKS_EINVAL for anything else, or a NULL r), NULL clears it. */
	int (*result_set_notice)(aks_result *r, const char *notice);
	int (*result_add_file)(aks_result *r, const char *path, const char *mime_type);
	int (*result_set_provider_data)(aks_result *r, const char *json_object);

	/* Time and cancellation. Deadlines are CLOCK_MONOTONIC milliseconds. */
	int64_t (*now_ms)(void);
	bool (*cancelled)(const aks_call *call);
	/* A file descriptor that becomes readable once the call is cancelled, for
	 * poll(); -1 when the call cannot be cancelled. Do not read or close it. */
	int (*cancel_fd)(const aks_call *call);

	/* Principals (resolvers). mode is aks_identity_mode (provider.h). Each
	 * returns AKS_OK, AKS_EINVAL for a bad argument, AKS_ENOMEM. */
	int (*principal_set)(aks_principal_builder *b, int mode, const char *subject);
	int (*principal_add_group)(aks_principal_builder *b, const char *group);
	int (*principal_add_credential)(aks_principal_builder *b, const char *key,
	                                const char *value);

#if AKS_TARGET_ABI_MINOR >= 2
	/* Appended in ABI 1.2. Counts connections an egress policy refused on the sandbox
	 * since the last result that counted any (while this operation ran, or between
	 * operations: a program left running in the background). The host adds them to the
	 * sandbox session's tally (`aksandbox sessions`: egress_refused). NULL r: nothing. */
	void (*result_add_egress_refused)(aks_result *r, unsigned count);
#endif
#if AKS_TARGET_ABI_MINOR >= 4
	/* Appended in ABI 1.4. Counts bytes the program wrote to stream (AKS_STREAM_STDOUT or
	 * AKS_STREAM_STDERR) that the backend never handed over, for a service that keeps only
	 * an output's start (SSM keeps 24,000 characters of stdout): they count in the stream's
	 * total as bytes the host's own cap drops do, so the result says the output was cut,
	 * and how long it was, rather than being silently short. NULL r, another stream:
	 * nothing. */
	void (*result_add_unseen)(aks_result *r, int stream, uint64_t bytes);
#endif
} aks_host_api;

#define AKS_HOST_API_INIT                                                                          \
	.struct_version = AKS_HOST_API_VERSION, .struct_size = sizeof(aks_host_api)

/* True when the host's table is large enough to hold `member`. */
#define AKS_HOST_HAS(host, member)                                                                 \
	((host)->struct_size >= offsetof(aks_host_api, member) + sizeof((host)->member))

#ifdef __cplusplus
}
#endif

#endif /* AKSANDBOX_PLUGIN_H */
