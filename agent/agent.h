/*
 * agent/agent.h - the state shared by the agent's files (the event loop, process control,
 * file transfers, Python sessions). The agent is single-threaded: one poll(2) loop.
 *
 * An agent serves one host connection on its stdio, or, resident (--resident), any number
 * of them arriving on a unix socket: each connection has its own requests and output
 * queue (conn); the Python sessions and the egress proxy belong to the agent, so state
 * outlives the host process that made it (docs/agent-protocol.md, "Resident agents").
 */
#ifndef AKS_AGENT_AGENT_H
#define AKS_AGENT_AGENT_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto.h"
#include "sha256.h"

#define AGENT_MAX_REQUESTS 64
/* Output waiting for the host: above SOFT the agent stops reading programs and files; above
 * HARD it also stops reading requests, so a host that never reads cannot grow the agent. */
#define AGENT_OUT_SOFT (1024u * 1024u)
#define AGENT_OUT_HARD (4u * 1024u * 1024u)
/* Host connections a resident agent serves at once; one more is told so and closed. */
#define AGENT_MAX_CONNS 32

enum req_kind { REQ_FREE = 0, REQ_SPAWN, REQ_WRITE, REQ_READ };

struct pysession;
struct netconn;
struct conn;

/* A running program: the supervisor the agent forked and the pipes of the program it runs.
 * A spawn owns one; a Python session keeps one across its runs. */
typedef struct proc {
	pid_t sup;  /* the supervisor (a child subreaper that owns the program's tree) */
	int ctl;    /* agent -> supervisor: one byte per order (a signal, or 0 = release) */
	int status; /* supervisor -> agent: the program's wait status, then EOF */
	int in, out, err;
	bool have_status;
	int wstatus;
	bool killing; /* SIGKILL ordered: the tree is being torn down */
} proc;

typedef struct req {
	int kind;
	uint32_t id;
	struct conn *c; /* the connection the request came on (kept across reuse) */
	int64_t credit; /* output bytes the host still accepts */
	/* spawn */
	proc p;
	struct pysession *session; /* a run in a Python session (p is then the session's) */
	uint8_t *stdin_data;
	size_t stdin_len, stdin_off;
	int64_t deadline; /* CLOCK_MONOTONIC ms, 0 = none */
	bool timed_out;
	uint64_t out_total, err_total;
	/* files */
	int fd;
	char *path, *tmp;
	uint64_t size, done;
	uint8_t sha[AKS_SHA256_LEN];
	aks_sha256 hash;
	uint32_t mode;
	/* a Python session run waiting for its session (another connection's run holds it) */
	char *queued_src;
	struct req *queue_next;
} req;

struct agent;

/* One host connection: its frames both ways and its requests. */
typedef struct conn {
	struct conn *next;
	struct agent *ag;
	int in_fd, out_fd; /* stdin and stdout, or one socket twice */
	aks_agent_decoder dec;
	aks_agent_buf out;
	bool hello;
	bool in_eof;
	bool out_broken;
	bool net_listened; /* sent NET_LISTEN: may be the proxy's host */
	uint32_t window;
	req reqs[AGENT_MAX_REQUESTS];
} conn;

typedef struct agent {
	int sigfd;
	uint64_t instance; /* random, sent in every HELLO_OK */
	int listen_fd;     /* resident: where connections arrive; -1 on stdio */
	/* resident with --state-dir: the file that names the agent holding Python state in
	 * this sandbox (state_mark_python()), whether it names us, and the agent it named
	 * when we started (gone, with its state), told to the first host that says HELLO */
	char *state_mark;
	bool state_marked;
	uint64_t lost;
	conn *conns;
	unsigned nconns;
	struct pysession *sessions;
	/* the egress proxy (netproxy.c): -1 until a host sends NET_LISTEN */
	int net_fd;
	uint16_t net_port;
	uint32_t net_window; /* each stream's window both ways, as NET_LISTEN said */
	uint32_t net_next;   /* the next stream's id, less AKS_AGENT_NET_ID */
	struct netconn *net;
	conn *net_host; /* the connection new streams go to: the last to send NET_LISTEN */
} agent;

/* ---- the event loop (aksandbox-agent.c) ---- */
/* Serves the protocol: on stdin and stdout (listen_fd -1: ends with them), or to every host
 * that connects to listen_fd (a resident agent: never ends). Returns only on a failure to
 * start. */
int agent_run(int listen_fd, const char *state_mark);
/* A Python session starts: from now on, an agent that starts after this one is gone must
 * tell its first host that the state was lost (state_mark, when there is one). */
void agent_state_mark_python(agent *a);
int64_t agent_now_ms(void);
void conn_send_error(conn *c, uint32_t id, uint8_t type, uint32_t code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
req *conn_find(conn *c, uint32_t id);
/* A free request slot of c, reset (fds -1), or NULL when all are in use. */
req *conn_new_req(conn *c);
/* The u32 field `want` of a frame's payload: false when it is absent or not 4 bytes. */
bool agent_get_u32(const aks_agent_frame *f, uint16_t want, uint32_t *out);
void agent_free_req(req *r);
/* Marks an fd close-on-exec and non-blocking and records it for the supervisors' cleanup. */
int agent_track_fd(int fd, bool nonblock);

/* ---- process control (spawn.c) ---- */
/* Starts argv under a new supervisor. envp NULL inherits the agent's environment. 0, or -1
 * with a message in msg. */
int proc_start(proc *p, char *const argv[], char *const envp[], const char *cwd, char *msg,
               size_t msglen);
/* Orders the supervisor to signal the whole tree (SIGKILL also reaps it and exits). */
void proc_signal(proc *p, int sig);
/* Lets the supervisor go (the program finished; leftovers reparent to the agent). */
void proc_release(proc *p);
void proc_close(proc *p);
/* Kills every child of the calling process and everything reparented to it, until none is
 * left (or bound_ms passes). main_pid's wait status goes to *main_status when seen. */
void proc_kill_children(pid_t main_pid, int *main_status, bool *main_seen, int bound_ms);
/* Makes the agent a child subreaper and finds out whether that takes (spawn.c). */
void proc_init(void);
/* Where it does not: kills the orphans init adopted that started at `since` or later
 * (clock ticks since boot), for at most bound_ms. */
void proc_sweep_orphans(unsigned long long since, int bound_ms);
extern bool proc_subreaper_works;
extern unsigned long long proc_agent_start;

/* ---- file transfers (files.c) ---- */
void files_write_open(conn *c, const aks_agent_frame *f);
void files_write_data(conn *c, req *r, const aks_agent_frame *f);
void files_read_open(conn *c, const aks_agent_frame *f);
/* Sends the next chunk of a read if credit and the output queue allow; true if it did. */
bool files_read_step(conn *c, req *r);

/* ---- Python sessions (pysession.c) ---- */
/* Starts a run of src in the named session, creating the interpreter on first use; while
 * another connection's run holds the session, r waits for it (its deadline running). 0, or
 * -1 after an error frame was sent (the caller frees r). */
int pysession_run(conn *c, req *r, const char *name, const char *src);
/* KILL of a session run: signals the interpreter tree, or ends a waiting run. */
void pysession_kill(req *r, int sig);
/* The connection is going: its waiting runs leave their queues, its running ones are
 * interrupted (the session stays) and their output is dropped. */
void pysession_conn_closed(agent *a, conn *c);
/* Appends the sessions' fds to pfd (at most max), lowering *timeout for interrupt and kill
 * deadlines; returns how many it added. */
size_t pysession_add_fds(agent *a, struct pollfd *pfd, size_t max, int64_t now, int *timeout);
/* Handles the events of the fds pysession_add_fds added, and ends finished runs. */
void pysession_events(agent *a, struct pollfd *pfd, size_t n);
void pysession_close_all(agent *a);

/* ---- the egress proxy (netproxy.c) ---- */
/* NET_LISTEN: listens on 127.0.0.1 and puts the proxy settings into the environment every
 * program inherits from now on. */
void netproxy_listen(conn *c, const aks_agent_frame *f);
/* The NET_* frames a host sends for a stream of its own. */
void netproxy_frame(conn *c, const aks_agent_frame *f);
/* The connection is going: its streams are reset, and new ones go to the last other
 * connection that sent NET_LISTEN (none: they are refused). */
void netproxy_conn_closed(agent *a, conn *c);
/* The proxy's variables ("NAME=value", NULL-terminated), or NULL before NET_LISTEN: a
 * spawn's environment gets them last, so they win. */
char *const *netproxy_env(const agent *a);
size_t netproxy_add_fds(agent *a, struct pollfd *pfd, size_t max, int64_t now, int *timeout);
void netproxy_events(agent *a, struct pollfd *pfd, size_t n);
void netproxy_close_all(agent *a);

/* ---- the host's end of a resident agent (resident.c) ---- */
/* Relays stdin and stdout to the agent resident under name, started first if none runs.
 * Returns the exit status. */
int resident_relay(const char *name, const char *state_dir);

/* ---- shared by the loop and the sessions ---- */
void proc_read_status(proc *p);
void agent_send_exit(req *r, int exit_code, int sig, const char *notice);

#endif /* AKS_AGENT_AGENT_H */
