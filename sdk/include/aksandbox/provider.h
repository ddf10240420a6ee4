/*
 * aksandbox/provider.h - the provider (sandbox backend) contract.
 *
 * A provider plugin's descriptor has kind AKS_PLUGIN_PROVIDER and its `ops`
 * points at a static const aks_provider_ops. The provider declares its
 * capabilities honestly: under-declaring is safe (the host refuses the
 * operation with a clear capability error), over-declaring is a security bug.
 *
 * Mandatory slots (the loader refuses a plugin without them): capabilities,
 * init, destroy, sandbox (the table), sandbox->id, sandbox->execute_code
 * (language "python"), sandbox->close; create unless capabilities->provisions
 * is false; attach when attach or attaches_external is declared; and the slot
 * of each declared capability: execute_command for shell, upload_file and
 * download_file for files, install_packages for package_install (checked for
 * the class's capabilities at load and an instance's own at open). Every other
 * slot may be NULL; the host turns a NULL slot into a capability error in one
 * place. A slot whose capability is declared false is never called.
 *
 * Threading: calls are blocking and may come from several threads at once for
 * different sandboxes of one provider instance; the host never calls two
 * operations on the same sandbox handle at the same time.
 *
 * Deadlines: every call carries a deadline. A provider returns by then; on
 * expiry it kills the program (and everything it started) and returns
 * AKS_ETIMEOUT after marking the result with result_set_timed_out(). A failing
 * program is a result (exit code != 0), never an error.
 *
 * Ownership: see plugin.h.
 */
#ifndef AKSANDBOX_PROVIDER_H
#define AKSANDBOX_PROVIDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <aksandbox/common.h>
#include <aksandbox/plugin.h>
#include <aksandbox/version.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The honest isolation boundary of a provider. */
typedef enum aks_isolation {
	AKS_ISOLATION_NONE = 0,           /* host process */
	AKS_ISOLATION_OS_POLICY = 1,      /* seccomp, Seatbelt, bubblewrap */
	AKS_ISOLATION_CONTAINER = 2,      /* shared-kernel namespaces */
	AKS_ISOLATION_SYSCALL_FILTER = 3, /* user-space kernel (gVisor) */
	AKS_ISOLATION_MICRO_VM = 4,       /* Firecracker or managed VM */
	AKS_ISOLATION_WASM = 5            /* in-process WebAssembly */
} aks_isolation;

#define AKS_CAPABILITIES_VERSION 1

/* What a provider supports (the seeds' SandboxCapabilities). */
typedef struct aks_capabilities {
	uint32_t struct_version;      /* AKS_CAPABILITIES_VERSION */
	uint32_t struct_size;         /* sizeof(aks_capabilities) */
	uint32_t isolation;           /* aks_isolation; required */
	const char *const *languages; /* NULL-terminated; must include "python" */
	bool shell;                   /* execute_command */
	bool files;                   /* upload_file and download_file */
	bool package_install;         /* install_packages */
	bool stateful;                /* interpreter state persists across calls */
	bool attach;                  /* reconnect to a live sandbox by id */
	bool provisions;              /* can create environments (false: attach-only) */
	bool attaches_external;       /* can bind to an environment it did not create */
	bool principal_user;          /* enforces a user identity */
	bool policy_network;          /* enforces egress policy */
	bool policy_filesystem;       /* enforces filesystem policy */
	bool policy_resources;        /* enforces cpu and memory limits */
	/* Enforces an egress allowlist (network_egress allowlist with network_allow),
	 * not only deny. Without it an allowlist counts as the network_egress dimension
	 * the provider cannot enforce: under strict, every request on a profile that sets
	 * it fails with AKS_EPOLICY, and `aksandbox check` exits 1. */
	bool policy_network_allowlist;
	/* Appended after ABI 1.1 (a host reads it only when struct_size covers it): the
	 * allowlist is enforced by aksandbox-agent's egress proxy, the host deciding each
	 * connection (names, *.suffix wildcards, CIDRs and ports; docs/security.md), rather
	 * than by a backend's own network rules. `aksandbox check` says which. */
	bool egress_proxy;
} aks_capabilities;

/* The start of a designated initialiser of each transparent struct: its version and size,
 * as in {AKS_CAPABILITIES_INIT, .shell = true}. */
#define AKS_CAPABILITIES_INIT                                                                      \
	.struct_version = AKS_CAPABILITIES_VERSION, .struct_size = sizeof(aks_capabilities)

/* ---- policy and principal (host-owned, borrowed by the plugin) ------------ */

typedef enum aks_egress {
	AKS_EGRESS_ALLOW = 0,
	AKS_EGRESS_DENY = 1,
	AKS_EGRESS_ALLOWLIST = 2
} aks_egress;

#define AKS_POLICY_VERSION 1

typedef struct aks_policy {
	uint32_t struct_version;
	uint32_t struct_size;
	uint32_t network_egress;           /* aks_egress */
	const char *const *network_allow;  /* NULL-terminated domains / CIDRs */
	const char *const *fs_allow_read;  /* NULL-terminated; empty = default */
	const char *const *fs_allow_write; /* NULL-terminated */
	double cpu;                        /* cores; 0 = unset */
	int64_t memory_mb;                 /* 0 = unset */
	double timeout;                    /* seconds per execution; 0 = none */
	bool strict;                       /* fail closed on unenforceable parts */
} aks_policy;

#define AKS_POLICY_INIT .struct_version = AKS_POLICY_VERSION, .struct_size = sizeof(aks_policy)

typedef enum aks_identity_mode { AKS_IDENTITY_AGENT = 0, AKS_IDENTITY_USER = 1 } aks_identity_mode;

#define AKS_PRINCIPAL_VERSION 1

typedef struct aks_principal {
	uint32_t struct_version;
	uint32_t struct_size;
	uint32_t mode;                  /* aks_identity_mode */
	const char *subject;            /* agent name or resolved user id */
	const char *const *groups;      /* NULL-terminated */
	const char *const *credentials; /* NULL-terminated key, value pairs */
} aks_principal;

#define AKS_PRINCIPAL_INIT                                                                         \
	.struct_version = AKS_PRINCIPAL_VERSION, .struct_size = sizeof(aks_principal)

/* ---- the per-call context ------------------------------------------------- */

#define AKS_CALL_VERSION 1

struct aks_call {
	uint32_t struct_version; /* AKS_CALL_VERSION */
	uint32_t struct_size;    /* sizeof(aks_call) */
	int64_t deadline_ms;     /* CLOCK_MONOTONIC ms; 0 = no deadline */
	double timeout;          /* the seconds the deadline stands for */
	const aks_principal *principal;
	const aks_policy *policy;
	void *host_private; /* cancellation state; plugins do not touch */
#if AKS_TARGET_ABI_MINOR >= 1
	/* Appended in ABI 1.1. On create: labels (NULL-terminated key, value pairs) that the
	 * provider puts on everything it makes for the sandbox (containers, volumes, pods,
	 * directories), so that list_sandboxes finds it again: AKS_LABEL_OWNER names the state
	 * store that will record the sandbox, AKS_LABEL_CLAIM the creation. Keys and values are
	 * [A-Za-z0-9._-], at most 63 bytes. NULL outside create, and from a host that keeps no
	 * record of what it creates. */
	const char *const *labels;
#endif
#if AKS_TARGET_ABI_MINOR >= 2
	/* Appended in ABI 1.2. Whom the operation is for, for the provider's own logs and
	 * audit lines (an egress proxy's verdicts): NULL-terminated key, value pairs, among
	 * them AKS_CONTEXT_CONVERSATION and AKS_CONTEXT_SESSION (the sandbox session's id).
	 * Borrowed for the call; NULL when the host has none (housekeeping, a direct call). */
	const char *const *context;
#endif
#if AKS_TARGET_ABI_MINOR >= 3
	/* Appended in ABI 1.3. The profile's idle_timeout in seconds, on the calls made for a
	 * profile's sandbox (create, attach and the operations): after that long unused the host
	 * reclaims the sandbox, so a backend with a lifetime of its own (E2B's timeout) can be
	 * told to keep it that long after each use. 0 when the host has none (housekeeping). */
	double idle_timeout;
#endif
};

#define AKS_CALL_INIT .struct_version = AKS_CALL_VERSION, .struct_size = sizeof(aks_call)

/* The labels a host gives create (call->labels). */
#define AKS_LABEL_OWNER "io.aksandbox.owner"
#define AKS_LABEL_CLAIM "io.aksandbox.claim"

/* The keys of call->context (ABI 1.2). */
#define AKS_CONTEXT_CONVERSATION "conversation"
#define AKS_CONTEXT_SESSION      "session"

/* Receives one sandbox from list_sandboxes: its id (what create's handle answered) and its
 * labels of call->labels' keys that it carries (NULL-terminated key, value pairs; borrowed for
 * the call). A non-zero return stops the listing, which returns it. */
typedef int (*aks_sandbox_list_fn)(void *ctx, const char *sandbox_id, const char *const *labels);

/* ---- provider and sandbox operation tables -------------------------------- */

/* Completed privately by each plugin; the host only passes them back. */
typedef struct aks_provider_impl aks_provider_impl;
typedef struct aks_sandbox_impl aks_sandbox_impl;

#define AKS_SANDBOX_OPS_VERSION 1

typedef struct aks_sandbox_ops {
	uint32_t struct_version; /* AKS_SANDBOX_OPS_VERSION */
	uint32_t struct_size;    /* sizeof(aks_sandbox_ops) */

	/* Mandatory. The provider-scoped id used to attach later. */
	const char *(*id)(const aks_sandbox_impl *sb);

	/* Mandatory, for language "python" at least. An undeclared language is
	 * AKS_ECAPABILITY. */
	int (*execute_code)(aks_sandbox_impl *sb, const char *code, const char *language,
	                    const aks_call *call, aks_result *out, aks_error **err);

	/* Optional (capability `shell`). Runs `command` with a POSIX shell. */
	int (*execute_command)(aks_sandbox_impl *sb, const char *command, const aks_call *call,
	                       aks_result *out, aks_error **err);

	/* Optional (capability `files`). Paths are relative to the workspace; a
	 * path that escapes it is AKS_EPOLICY. Upload creates parent directories.
	 * Download adds one file to `out` (result_add_file + AKS_STREAM_FILE
	 * writes); a missing file is AKS_ENOTFOUND. */
	int (*upload_file)(aks_sandbox_impl *sb, const char *path, const void *data, size_t len,
	                   const aks_call *call, aks_error **err);
	int (*download_file)(aks_sandbox_impl *sb, const char *path, const aks_call *call,
	                     aks_result *out, aks_error **err);

	/* Optional (capability `package_install`). */
	int (*install_packages)(aks_sandbox_impl *sb, const char *const *packages,
	                        const aks_call *call, aks_result *out, aks_error **err);

	/* Mandatory. Releases the handle but keeps backend state, so a later
	 * attach works. Called exactly once per handle. */
	void (*close)(aks_sandbox_impl *sb);
} aks_sandbox_ops;

#define AKS_SANDBOX_OPS_INIT                                                                       \
	.struct_version = AKS_SANDBOX_OPS_VERSION, .struct_size = sizeof(aks_sandbox_ops)

#define AKS_PROVIDER_OPS_VERSION 1

typedef struct aks_provider_ops {
	uint32_t struct_version; /* AKS_PROVIDER_OPS_VERSION */
	uint32_t struct_size;    /* sizeof(aks_provider_ops) */

	/* Mandatory. What the provider class supports; readable without init. */
	const aks_capabilities *capabilities;

	/* Mandatory. Builds one provider instance from its validated config block.
	 * Keep it cheap: connect to backends lazily. */
	int (*init)(const aks_host_api *host, const aks_config *config, aks_provider_impl **out,
	            aks_error **err);

	/* Optional. Releases the instance; called once, after every sandbox
	 * handle of the instance has been closed. */
	void (*fini)(aks_provider_impl *prov);

	/* Optional. The instance's capabilities when its config changes what it
	 * enforces (docker with runtime runsc, kubernetes with network_policy).
	 * The host always reads these when the slot is set. */
	const aks_capabilities *(*instance_capabilities)(const aks_provider_impl *prov);

	/* Mandatory unless capabilities->provisions is false. Provisions a new
	 * sandbox honouring call->policy and call->principal; a dimension it
	 * declared but cannot honour for this request is AKS_EPOLICY. */
	int (*create)(aks_provider_impl *prov, const aks_call *call, aks_sandbox_impl **out,
	              aks_error **err);

	/* Optional (capability `attach`). Reconnects to a live sandbox; a target
	 * that no longer exists is AKS_EGONE (the self-heal signal). */
	int (*attach)(aks_provider_impl *prov, const char *sandbox_id, const aks_call *call,
	              aks_sandbox_impl **out, aks_error **err);

	/* Mandatory. Permanently disposes a sandbox. Idempotent: an unknown id is
	 * not an error. */
	int (*destroy)(aks_provider_impl *prov, const char *sandbox_id, const aks_call *call,
	               aks_error **err);

	/* Mandatory. The operations on a sandbox handle. */
	const aks_sandbox_ops *sandbox;

	/* Optional (appended in ABI 1.0; the host reads it only when struct_size covers it).
	 * One line saying how this instance runs operations, for `aksandbox check` and the
	 * logs, e.g. "through aksandbox-agent /usr/libexec/aksandbox/aksandbox-agent; per-call
	 * exec where it cannot be placed". Owned by the instance, valid until fini; NULL or ""
	 * says nothing. */
	const char *(*instance_description)(const aks_provider_impl *prov);

#if AKS_TARGET_ABI_MINOR >= 1
	/* Optional (appended in ABI 1.1). Every sandbox of this instance's backend that carries
	 * the label key=value (as create got it in call->labels), including one whose creation
	 * was cut short (a volume without its container): fn gets each one's id, which destroy
	 * accepts, once. The host's garbage collector (`aksandbox gc`) destroys those no session
	 * records; a provider that cannot list what it made leaves this NULL, and its orphans
	 * are then reported as not collectable. */
	int (*list_sandboxes)(aks_provider_impl *prov, const char *label_key,
	                      const char *label_value, const aks_call *call, aks_sandbox_list_fn fn,
	                      void *ctx, aks_error **err);
#endif
} aks_provider_ops;

#define AKS_PROVIDER_OPS_INIT                                                                      \
	.struct_version = AKS_PROVIDER_OPS_VERSION, .struct_size = sizeof(aks_provider_ops)

/* The size of the provider operations table before instance_description was appended:
 * the smallest table the host accepts. */
#define AKS_PROVIDER_OPS_MIN_SIZE offsetof(aks_provider_ops, instance_description)

#ifdef __cplusplus
}
#endif

#endif /* AKSANDBOX_PROVIDER_H */
