/*
 * tests/unit/test_agent_harness.h - starts aksandbox-agent as a child over pipes, with the
 * client (plugins/common/agent/agent_client.c) or raw (frames by hand), and looks at
 * processes in /proc.
 * The agent is $AKS_TEST_AGENT, else the build tree's static agent/aksandbox-agent.
 */
#ifndef AKS_TEST_AGENT_HARNESS_H
#define AKS_TEST_AGENT_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/proto.h"
#include "plugins/common/agent/aks_agent_client.h"

typedef struct th_agent {
	pid_t pid;
	int to;   /* our end of the agent's stdin (raw mode; the client owns it otherwise) */
	int from; /* our end of the agent's stdout (raw mode) */
	aks_agent *conn;
	aks_agent_decoder dec;
} th_agent;

/* The agent the tests run: $AKS_TEST_AGENT, else the build tree's static one. */
const char *th_agent_path(void);
/* Starts the agent and connects the client (asserts on failure). */
void th_start(th_agent *t);
/* The same with the agent's options (NULL-terminated, at most 62). */
void th_start_args(th_agent *t, const char *const *args);
/* Starts `aksandbox-agent --resident name` (a relay, our child) and connects the client
 * through it to the agent resident under name (aks__agent_pid: that agent's pid). th_stop
 * ends the relay; the resident agent stays. */
void th_start_resident(th_agent *t, const char *name);
/* The same, the agent noting who holds Python state in state_dir (--state-dir). */
void th_start_resident_in(th_agent *t, const char *name, const char *state_dir);
/* Starts the agent with raw pipes: the test speaks frames itself. */
void th_start_raw(th_agent *t);
void th_start_raw_args(th_agent *t, const char *const *args);
/* Closes the connection and waits for the agent to exit; returns its wait status
 * (asserts it exits within 10 s). */
int th_stop(th_agent *t);

/* Raw mode: sends the frames in b (and empties it); receives the next frame into *f with
 * its payload copied into payload (up to cap), failing the test after timeout_ms. */
void th_send(th_agent *t, aks_agent_buf *b);
void th_send_hello(th_agent *t);
void th_recv(th_agent *t, aks_agent_frame *f, uint8_t *payload, size_t cap, int timeout_ms);
/* The u32 / string field `tag` of a received payload (asserts it is there). */
uint32_t th_field_u32(const aks_agent_frame *f, uint16_t tag);

/* A private scratch directory (removed by th_rmdir). */
char *th_tmpdir(void);
void th_rmdir(char *dir);
/* Reads a small file's contents as a pid; -1 when absent. */
pid_t th_read_pid(const char *dir, const char *name, int wait_ms);
/* True while pid exists and is not a zombie. */
bool th_alive(pid_t pid);
/* True when pid is gone (or a zombie) within wait_ms. */
bool th_gone_within(pid_t pid, int wait_ms);
/* VmHWM (peak resident set) of a process, in KiB. */
long th_vm_hwm_kb(pid_t pid);

#endif /* AKS_TEST_AGENT_HARNESS_H */
