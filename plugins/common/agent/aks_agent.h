/*
 * plugins/common/agent/aks_agent.h - aksandbox-agent for the providers that run it: the
 * program on this host (one per provider instance) and an agent session per sandbox handle,
 * which runs the handle's operations through the agent (docs/agent-protocol.md) and falls
 * back to the provider's own per-call operations where the agent cannot run.
 *
 * The lifecycle lives here once for every provider: the agent is placed and started by the
 * handle's first operation; a stream that broke is noticed before the next operation and the
 * agent placed again and restarted, with a notice on that operation's result (the Python
 * session's state is lost); an agent that cannot be placed or does not answer HELLO makes
 * the handle run per call, said in the log, in the next result's notice and in the
 * instance's description. A provider supplies only a table (aks_agent_ops): how to place the
 * program in a sandbox, how to start it with its stdio as two fds, how to close that stream,
 * and its per-call operations. docs/plugin-author-guide.md, "Running operations through
 * aksandbox-agent", walks through one.
 *
 * Part of libaks-agent (plugins/common/Makefile.inc.am): static and hidden, linked into each
 * provider that uses it. Threads: a program may be shared by any threads; a session belongs
 * to its sandbox handle, which the host uses from one thread at a time.
 */
#ifndef AKS_COMMON_AGENT_H
#define AKS_COMMON_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <aksandbox/plugin.h>
#include <aksandbox/provider.h>

typedef struct aks_agent_program aks_agent_program;
typedef struct aks_agent_session aks_agent_session;

/* ---- ELF headers (agent_elf.c) ------------------------------------------------------------ */

typedef struct aks_elf_info {
	unsigned machine; /* e_machine */
	bool is64;
	bool big_endian;
	bool dynamic;      /* it has an interpreter (PT_INTERP): it needs a loader and libraries */
	const char *uname; /* the machine as `uname -m` names it; NULL when unknown to us */
	const char *oci;   /* as an OCI image's Architecture names it (Docker's "amd64") */
} aks_elf_info;

/* Reads the ELF header and program headers in data[0..len). NULL on success; otherwise why
 * it is not a program we can read ("it is not an ELF executable", ...). Never reads past
 * len: the input is any file. */
const char *aks_elf_read(const void *data, size_t len, aks_elf_info *out);
/* Whether a program for elf runs on a machine whose `uname -m` is uname_m (i686 runs on
 * i386..i686, arm on armv6l/armv7l, ...). */
bool aks_elf_runs_on(const aks_elf_info *elf, const char *uname_m);

/* ---- the program on this host (agent_program.c) -------------------------------------------- */

typedef struct aks_agent_program_opts {
	const char *provider;   /* "docker": prefixes messages and names the log */
	const char *configured; /* the provider's `agent` key: NULL, "false" or an absolute path */
	const char *installed; /* the installed agent, used when configured is NULL and it exists */
	const char *per_call;  /* "one docker exec per call": how operations run without it */
	const char *detail;    /* said after "one per sandbox handle" in the description, or NULL */
	bool copied_in;      /* copied into sandboxes: must be a static ELF (its bytes are kept) */
	bool python_session; /* the provider's Python is the agent's session interpreter */
	bool resident;       /* its sessions' table says .resident: the description says so */
	bool *stateful;      /* the instance's capability, cleared (atomically) on a fallback */
	const char *note;    /* ends every description ("; ..."), or NULL */
} aks_agent_program_opts;

/*
 * Resolves the `agent` key (NULL: the installed agent when there is one; "false": none; else
 * an executable absolute path, or AKS_ECONFIG) and, for copied_in, reads the program: an ELF
 * of a known architecture, or AKS_ECONFIG; a dynamically linked one is kept but unusable (the
 * description says why; every operation runs per call). *out is set in every AKS_OK case, a
 * disabled agent included; free with aks_agent_program_free.
 */
int aks_agent_program_open(const aks_host_api *host, const aks_agent_program_opts *o,
                           aks_agent_program **out, aks_error **err);
void aks_agent_program_free(aks_agent_program *p);
/* False when disabled (agent: false, or none installed). */
bool aks_agent_program_enabled(const aks_agent_program *p);
/* Enabled and no reason known that every sandbox of the instance must run per call. */
bool aks_agent_program_usable(const aks_agent_program *p);
/* Records a reason that holds for every sandbox of the instance (an image of another
 * architecture): from now on new sessions run per call. The first reason is kept and logged
 * as a warning. */
void aks_agent_program_unusable(aks_agent_program *p, const char *reason);
/* The host file, its bytes (copied_in only), and the name its copies carry in sandboxes:
 * "aksandbox-agent-" and 16 hex digits of its SHA-256, so another build gets another name. */
const char *aks_agent_program_path(const aks_agent_program *p);
const void *aks_agent_program_data(const aks_agent_program *p, size_t *size);
const char *aks_agent_program_name(const aks_agent_program *p);
const uint8_t *aks_agent_program_sha256(const aks_agent_program *p);
const aks_elf_info *aks_agent_program_elf(const aks_agent_program *p);
/* The instance's "runs" line (instance_description): how operations run now. */
const char *aks_agent_program_description(const aks_agent_program *p);

/* ---- the provider's table ------------------------------------------------------------------ */

/* `sb` is the provider's sandbox handle, as given to aks_agent_session_new. */
typedef struct aks_agent_ops {
	const char *noun;            /* what a sandbox is called in messages: "container" */
	const char *timeout_subject; /* "docker exec": "<subject> exceeded timeout <t>s" */
	const char *shell;           /* runs commands as `<shell> -c COMMAND`: "/bin/sh" */
	int64_t setup_ms;     /* placing and starting get at least this long (0: the call's time) */
	int64_t ping_idle_ms; /* an agent idle this long is pinged before use (0: never) */
	int64_t check_idle_ms; /* a sandbox idle this long is checked before use (0: never) */
	int64_t watch_ms;      /* check() this often while a program runs (0: never): for a stream
	                        * that does not end when its sandbox dies (gVisor's) */
	/* The agent stays in the sandbox between host processes (`aksandbox-agent --resident`,
	 * docs/agent-protocol.md): open() starts a relay to it, so every handle of every
	 * process reaches the same agent and Python state lives with the sandbox. For providers
	 * whose sandboxes outlive the host process (containers, pods). */
	bool resident;
	uint32_t file_mode;    /* of uploaded files */
	uint64_t download_max; /* the largest download (0: the host's file limit only) */

	/*
	 * Puts the program where the sandbox can run it and says where (*path, malloc'd).
	 * look_again: trust nothing remembered from earlier handles. *verified: the placement
	 * was checked just now (a start that fails after a remembered one is retried once with
	 * look_again). AKS_OK with *why (malloc'd) when it cannot be placed: the session runs
	 * per call. Other failures are the call's (the sandbox is gone, a timeout). NULL: the
	 * program runs as it is, from aks_agent_program_path.
	 */
	int (*place)(void *sb, bool look_again, const aks_call *call, char **path, bool *verified,
	             char **why, aks_error **err);
	/* Starts the program at path with the arguments args (NULL-terminated; none when NULL)
	 * and its stdin and stdout as two fds (*wfd writes its stdin, *rfd reads its stdout; the
	 * client owns both from then on) and a stream handle of the provider's. AKS_OK with *why
	 * when it cannot be started this way (per call still works); other failures are the
	 * call's. Only a resident provider is given arguments. */
	int (*open)(void *sb, const char *path, const char *const *args, const aks_call *call,
	            void **stream, int *rfd, int *wfd, char **why, aks_error **err);
	/* Tears the stream down after the client closed its fds; what the program said on
	 * stderr (if the provider kept it) goes to said[0..len). */
	void (*close)(void *sb, void *stream, char *said, size_t len);
	/* Optional: false when the program is known to have ended (a reaped child). */
	bool (*running)(void *sb, void *stream);
	/* Optional: AKS_OK while the sandbox exists and runs, AKS_EGONE (the provider's error)
	 * once it does not exist, another error (its message says why) while it exists but
	 * cannot run anything (a stopped container), AKS_ETIMEOUT when it cannot tell. Asked
	 * before using an agent idle past check_idle_ms, every watch_ms while a program runs,
	 * and after a stream broke during a call. */
	int (*check)(void *sb, const aks_call *call, aks_error **err);

	/* The per-call operations, for a session that cannot use the agent. path is the
	 * caller's, cpath the provider's checked absolute path for it. */
	int (*execute_code)(void *sb, const char *code, const char *language, const aks_call *call,
	                    aks_result *out, aks_error **err);
	int (*execute_command)(void *sb, const char *command, const aks_call *call, aks_result *out,
	                       aks_error **err);
	/* argv: `<python> -m pip install PACKAGE...` */
	int (*install_packages)(void *sb, const char *const *argv, const aks_call *call,
	                        aks_result *out, aks_error **err);
	int (*upload)(void *sb, const char *path, const char *cpath, const void *data, size_t len,
	              const aks_call *call, aks_error **err);
	int (*download)(void *sb, const char *path, const char *cpath, const aks_call *call,
	                aks_result *out, aks_error **err);
} aks_agent_ops;

/* ---- a session: one per sandbox handle (agent_session.c) ------------------------------------ */

typedef struct aks_agent_session_opts {
	const char *id;         /* the sandbox's id, for messages */
	const char *cwd;        /* where programs start: "/workspace" */
	const char *const *env; /* "NAME=value" for every program, or NULL */
	bool env_clear;         /* env replaces the agent's environment */
	/* network_egress: allowlist. The sandbox has no network; the agent's proxy is its way
	 * out, and the host lets through what these entries allow (aks_egress.h). A handle
	 * whose agent cannot run is then refused, not run per call: nothing else enforces
	 * the list. */
	bool egress_proxy;
	const char *const *network_allow;
} aks_agent_session_opts;

/* A session for handle sb (prog disabled: every operation per call). Strings are copied. */
int aks_agent_session_new(aks_agent_program *prog, const aks_agent_ops *ops, void *sb,
                          const aks_agent_session_opts *o, aks_agent_session **out,
                          aks_error **err);
/* Stops the agent (it sees EOF, kills what it runs and exits) and frees the session. */
void aks_agent_session_free(aks_agent_session *s);
/* Stops the agent; the next operation starts it again, quietly (closing a handle, a
 * sandbox about to be destroyed). */
void aks_agent_session_stop(aks_agent_session *s);
/* The agent is running for this handle (for tests and descriptions). */
bool aks_agent_session_up(const aks_agent_session *s);
/* Connections the egress proxy refused for this handle so far. */
unsigned aks_agent_session_egress_refused(const aks_agent_session *s);

/*
 * The operations, through the agent or per call. language "python" with interp "python3"
 * runs in the agent's persistent session (state kept between calls); other code runs as
 * `<interp> -c CODE`. Texts too long for one protocol frame run per call. Timeouts and
 * cancellations say "<subject> exceeded timeout <t>s" / "<subject> was cancelled", and mark
 * the result; a stream that broke during a call is AKS_EIO unless the sandbox is gone.
 */
int aks_agent_execute_code(aks_agent_session *s, const char *code, const char *language,
                           const char *interp, const aks_call *call, aks_result *out,
                           aks_error **err);
int aks_agent_execute_command(aks_agent_session *s, const char *command, const aks_call *call,
                              aks_result *out, aks_error **err);
/* `<python> -m pip install PACKAGE...` (AKS_EINVAL without packages). */
int aks_agent_install_packages(aks_agent_session *s, const char *python,
                               const char *const *packages, const aks_call *call, aks_result *out,
                               aks_error **err);
int aks_agent_upload(aks_agent_session *s, const char *path, const char *cpath, const void *data,
                     size_t len, const aks_call *call, aks_error **err);
/* A path that is not a regular file is not found (never opened in a way that can block). */
int aks_agent_download(aks_agent_session *s, const char *path, const char *cpath,
                       const aks_call *call, aks_result *out, aks_error **err);

#endif /* AKS_COMMON_AGENT_H */
