/*
 * plugins/common/agent/aks_agent_client.h - the host side of the aksandbox-agent protocol
 * (docs/agent-protocol.md): one connection over a pair of file descriptors (pipes, a docker
 * attach stream, a kubernetes exec channel) carrying any number of concurrent requests from
 * any number of threads.
 *
 * Part of libaks-agent (plugins/common/Makefile.inc.am), the static, hidden library that the
 * providers running aksandbox-agent link; providers use it through aks_agent.h, which runs a
 * sandbox handle's operations over this client. The client reaches the host only through
 * the aks_host_api table a plugin receives at init (errors, results, cancellation, time).
 *
 * Threads: a reader thread per connection decodes what the agent sends and hands output to
 * the caller's chunk callback *on that thread*; callbacks must be quick and must not call
 * back into the client. Everything else may be called from any thread.
 */
#ifndef AKS_COMMON_AGENT_CLIENT_H
#define AKS_COMMON_AGENT_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <aksandbox/provider.h>

typedef struct aks_agent aks_agent;
typedef struct aks_agent_run aks_agent_run;

/* What to run: exactly one of argv, shell, or code (+ language). */
typedef struct aks_agent_spawn {
	const char *const *argv; /* NULL-terminated; argv[0] is looked up in PATH */
	const char *shell;       /* run with /bin/sh -c */
	const char *code;        /* source in `language` (python, bash, sh, node, ruby, perl) */
	const char *language;
	const char *session;    /* with language "python": run in this persistent interpreter */
	const char *cwd;        /* NULL: the agent's working directory */
	const char *const *env; /* "NAME=value" overrides, NULL-terminated */
	bool env_clear;         /* start from an empty environment instead of the agent's */
	const void *stdin_data; /* at most about 1 MiB (one frame) */
	size_t stdin_len;
	int64_t timeout_ms; /* 0: none; the call's deadline applies either way */
} aks_agent_spawn;

typedef struct aks_agent_exit {
	int exit_code;      /* -1 when a signal ended the program */
	int signal;         /* the signal that ended it, or 0 */
	bool timed_out;     /* the deadline passed and the agent killed the tree */
	uint64_t out_bytes; /* everything the program wrote, as counted by the agent */
	uint64_t err_bytes;
	char notice[256]; /* a session notice ("restarted: state lost"), or "" */
} aks_agent_exit;

/* Receives output: stream is AKS_STREAM_STDOUT, AKS_STREAM_STDERR or AKS_STREAM_FILE. */
typedef void (*aks_agent_chunk_fn)(void *ud, int stream, const void *data, size_t len);

/* Opens a connection: takes ownership of both fds (closed by aks__agent_free), says HELLO
 * and waits for the agent's answer until the call's deadline (10 s when it has none). */
int aks__agent_start(const aks_host_api *host, int rfd, int wfd, const aks_call *call,
                     aks_agent **out, aks_error **err);
/* Closes the connection (the agent sees EOF, kills what it runs and exits). Free every run
 * first. */
void aks__agent_free(aks_agent *a);
/* The agent's process id (in its own PID namespace) and version text, from its HELLO. */
uint32_t aks__agent_pid(const aks_agent *a);
const char *aks__agent_version(const aks_agent *a);
/* The agent process's random instance number from its HELLO (0 from an agent that sends
 * none): two connections with the same one reach the same agent, and its Python state. */
uint64_t aks__agent_instance(const aks_agent *a);
/* From the HELLO of a resident agent started with --state-dir: the instance of the agent
 * before it, which held Python state and is gone, or 0. Said to one connection only (the
 * first after the loss). */
uint64_t aks__agent_lost(const aks_agent *a);
/* False once the stream broke (the agent died or closed its output). */
bool aks__agent_alive(aks_agent *a);

/* A health check: PING, answered by a matching PONG. */
int aks__agent_ping(aks_agent *a, const aks_call *call, aks_error **err);

/* Starts a program; chunks of its output go to fn (may be NULL) as they arrive. */
int aks__agent_spawn(aks_agent *a, const aks_agent_spawn *spec, aks_agent_chunk_fn fn, void *ud,
                     const aks_call *call, aks_agent_run **out, aks_error **err);
/* Waits for the program's end. The agent enforces the deadline (exit->timed_out); past the
 * deadline plus a grace the client kills the run itself and fails with AKS_ETIMEOUT. A
 * cancelled call kills the run and fails with AKS_ECANCELLED; a lost agent, AKS_EGONE. */
int aks__agent_wait(aks_agent_run *run, const aks_call *call, aks_agent_exit *exit,
                    aks_error **err);
/* Signals the program's whole tree (SIGKILL tears it down). */
int aks__agent_kill(aks_agent_run *run, int sig, aks_error **err);
/* Forgets a run; one that has not ended is killed (tree and all). */
void aks__agent_run_free(aks_agent_run *run);

/* spawn + wait, with stdout and stderr captured into result (bounded by the result's caps)
 * and the exit code set. A timeout marks the result and returns AKS_ETIMEOUT. */
int aks__agent_exec(aks_agent *a, const aks_agent_spawn *spec, aks_result *result,
                    const aks_call *call, aks_agent_exit *exit, aks_error **err);

/* The same, asking watch->fn every watch->every_ms while the program runs: a watch that
 * fails (the sandbox died under a stream that did not tell) kills the run and is the error. */
typedef struct aks_agent_watch {
	int (*fn)(void *ud, aks_error **err);
	void *ud;
	int64_t every_ms;
} aks_agent_watch;
int aks__agent_exec_watched(aks_agent *a, const aks_agent_spawn *spec, aks_result *result,
                            const aks_call *call, const aks_agent_watch *watch,
                            aks_agent_exit *exit, aks_error **err);

/* Writes a file (parents created) with its size and SHA-256 checked by the agent before it
 * replaces the target. */
int aks__agent_write_file(aks_agent *a, const char *path, const void *data, size_t len,
                          uint32_t mode, const aks_call *call, aks_error **err);
/* Reads a file of at most max_size bytes, handing chunks to fn (AKS_STREAM_FILE); checks
 * its size and SHA-256 at the end. The chunks are trustworthy only when this returns
 * AKS_OK. */
int aks__agent_read_file(aks_agent *a, const char *path, uint64_t max_size, aks_agent_chunk_fn fn,
                         void *ud, const aks_call *call, uint64_t *size, aks_error **err);

/* aks__agent_read_file into a provider's download result: the file is added to `out` as
 * `name` (application/octet-stream; an empty file too) and its bytes written to it. When the
 * result refuses them (the host's file limit) that is the error and *refused is set;
 * otherwise the read's own status and error, as aks__agent_read_file. */
int aks__agent_read_into(aks_agent *a, const char *path, uint64_t max_size, aks_result *out,
                         const char *name, const aks_call *call, bool *refused, aks_error **err);

/* From now on every file request must resolve inside dir (the sandbox's workspace): a path
 * that leads out through a symlink is AKS_EPOLICY, checked by the agent where the file is
 * (dir NULL: no such bound). AKS_OK or AKS_ENOMEM. */
int aks__agent_set_beneath(aks_agent *a, const char *dir);

/* ---- the egress proxy (docs/agent-protocol.md, "Egress"; agent_egress.c uses these) ---- */

struct aks_agent_frame;
struct aks_agent_buf;
/* The agent's feature bits from its HELLO_OK (AKS_AGENT_FEATURE_*). */
uint32_t aks__agent_features(const aks_agent *a);
/* NET_LISTEN: the agent starts its proxy on 127.0.0.1 and says the port. window: the bytes
 * either side may have in flight per stream, which the agent must confirm (AKS_EIO when it
 * holds to another: both sides count against the same number). */
int aks__agent_net_listen(aks_agent *a, uint32_t window, const aks_call *call, unsigned *port,
                          aks_error **err);
/* Receives the frames of the streams the agent opens (NET_OPEN, NET_DATA, NET_CREDIT,
 * NET_EOF, NET_CLOSE), on the reader thread: fn must be quick, must not block and must not
 * send (it hands work to a thread of its own). Setting NULL waits for a call in progress. */
typedef void (*aks_agent_net_fn)(void *ud, const struct aks_agent_frame *f);
void aks__agent_set_net_handler(aks_agent *a, aks_agent_net_fn fn, void *ud);
/* Sends the frames built in b (nothing when it is empty). Never call it from the reader. */
int aks__agent_send_frames(aks_agent *a, struct aks_agent_buf *b, aks_error **err);

/* For tests and diagnostics: writes raw bytes into the stream, and reports the ERROR frames
 * that answered no request of ours (their count and the last message). */
int aks__agent_send_raw(aks_agent *a, const void *data, size_t len, aks_error **err);
unsigned aks__agent_stray_errors(aks_agent *a, char *msg, size_t msglen);

#endif /* AKS_COMMON_AGENT_CLIENT_H */
