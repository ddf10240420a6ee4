/* Unit tests: aksandbox-agent run as a child over pipes, driven through the host-side
 * client (plugins/common/agent/agent_client.c): exit codes and signals, stdout/stderr separation,
 * stdin, environment and working directory, concurrent runs over one connection, killing whole
 * process trees (double-forked daemons included) on timeout, kill and agent exit, a
 * 200 MiB output with bounded memory on both sides, malformed frames, and a killed agent. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/plugin/host_api.h"
#include "core/plugin/result.h"
#include "test_agent_harness.h"

static aks_result *run_shell(th_agent *t, const char *cmd, double timeout, aks_agent_exit *ex,
                             int *rc_out)
{
	aks_result *r = aks__result_new(1 << 20, 1 << 20);
	assert_non_null(r);
	aks_call call;
	aks_call_init(&call, timeout, NULL, NULL, NULL);
	aks_agent_spawn spec = {.shell = cmd};
	aks_error *err = NULL;
	int rc = aks__agent_exec(t->conn, &spec, r, &call, ex, &err);
	if (rc_out)
		*rc_out = rc;
	else if (rc != AKS_OK)
		fail_msg("exec '%s': %s", cmd, aks_error_message(err));
	aks_error_free(err);
	return r;
}

static void assert_stdout(const aks_result *r, const char *want)
{
	size_t len;
	const char *out = aks_result_get_stdout(r, &len);
	assert_int_equal(len, strlen(want));
	assert_memory_equal(out, want, len);
}

static void test_exit_codes(void **state)
{
	(void)state;
	th_agent t;
	th_start(&t);
	aks_agent_exit ex;
	aks_result *r = run_shell(&t, "exit 7", 10, &ex, NULL);
	assert_int_equal(ex.exit_code, 7);
	assert_int_equal(ex.signal, 0);
	assert_false(ex.timed_out);
	assert_int_equal(aks_result_get_exit_code(r), 7);
	aks_result_free(r);

	r = run_shell(&t, "true", 10, &ex, NULL);
	assert_int_equal(ex.exit_code, 0);
	aks_result_free(r);

	/* A signal: the exit frame says which, the result follows the 128+n convention. */
	r = run_shell(&t, "kill -TERM $$", 10, &ex, NULL);
	assert_int_equal(ex.signal, SIGTERM);
	assert_int_equal(ex.exit_code, -1);
	assert_int_equal(aks_result_get_exit_code(r), 128 + SIGTERM);
	aks_result_free(r);

	/* argv form, and a program that does not exist: 127 and a message, not an error. */
	const char *argv[] = {"no-such-program-aks", NULL};
	aks_agent_spawn spec = {.argv = argv};
	r = aks__result_new(4096, 4096);
	aks_error *err = NULL;
	assert_int_equal(aks__agent_exec(t.conn, &spec, r, NULL, &ex, &err), AKS_OK);
	assert_int_equal(ex.exit_code, 127);
	size_t len;
	const char *e = aks_result_get_stderr(r, &len);
	assert_non_null(strstr(e, "command not found"));
	aks_result_free(r);

	/* A missing working directory is an error of the request, not a run. */
	spec = (aks_agent_spawn){.shell = "true", .cwd = "/no/such/dir"};
	r = aks__result_new(4096, 4096);
	assert_int_equal(aks__agent_exec(t.conn, &spec, r, NULL, &ex, &err), AKS_ENOTFOUND);
	assert_non_null(strstr(aks_error_message(err), "/no/such/dir"));
	aks_error_free(err);
	aks_result_free(r);
	assert_int_equal(th_stop(&t), 0);
}

static void test_streams_stdin_env_cwd(void **state)
{
	(void)state;
	th_agent t;
	th_start(&t);
	aks_agent_exit ex;
	aks_result *r = run_shell(&t, "printf out1; printf err1 >&2; printf out2; printf err2 >&2",
	                          10, &ex, NULL);
	assert_stdout(r, "out1out2");
	size_t len;
	const char *e = aks_result_get_stderr(r, &len);
	assert_int_equal(len, 8);
	assert_memory_equal(e, "err1err2", 8);
	assert_int_equal(ex.out_bytes, 8);
	assert_int_equal(ex.err_bytes, 8);
	aks_result_free(r);

	/* stdin, binary-safe (NUL and high bytes) */
	static const char in[] = "line1\n\0\xff\x80 end";
	const char *cat[] = {"cat", NULL};
	aks_agent_spawn spec = {.argv = cat, .stdin_data = in, .stdin_len = sizeof(in) - 1};
	r = aks__result_new(4096, 4096);
	aks_error *err = NULL;
	assert_int_equal(aks__agent_exec(t.conn, &spec, r, NULL, &ex, &err), AKS_OK);
	const char *out = aks_result_get_stdout(r, &len);
	assert_int_equal(len, sizeof(in) - 1);
	assert_memory_equal(out, in, len);
	aks_result_free(r);

	/* environment overrides and the working directory */
	const char *env[] = {"AKS_T1=one", "AKS_T2=two", "AKS_T1=uno", NULL};
	spec = (aks_agent_spawn){.shell = "echo \"$AKS_T1 $AKS_T2\"; pwd", .env = env, .cwd = "/"};
	r = aks__result_new(4096, 4096);
	assert_int_equal(aks__agent_exec(t.conn, &spec, r, NULL, &ex, &err), AKS_OK);
	assert_stdout(r, "uno two\n/\n");
	aks_result_free(r);

	/* a cleared environment holds only what the request gives */
	const char *only[] = {"ONLY=1", NULL};
	const char *envprog[] = {"/usr/bin/env", NULL};
	spec = (aks_agent_spawn){.argv = envprog, .env = only, .env_clear = true};
	r = aks__result_new(4096, 4096);
	assert_int_equal(aks__agent_exec(t.conn, &spec, r, NULL, &ex, &err), AKS_OK);
	assert_stdout(r, "ONLY=1\n");
	aks_result_free(r);
	assert_int_equal(th_stop(&t), 0);
}

/* ---- several runs at once over one connection ---- */

typedef struct worker {
	th_agent *t;
	int index;
	int failures;
	char msg[256];
} worker;

static void *worker_main(void *arg)
{
	worker *w = arg;
	char cmd[256];
	/* Each run prints 300 numbered lines with its tag, yielding between some of them so the
	 * runs' chunks interleave on the stream. */
	snprintf(
	    cmd, sizeof(cmd),
	    "i=0; while [ $i -lt 300 ]; do echo \"w%d-$i\"; [ $((i %% 50)) = 0 ] && sleep 0.01; "
	    "i=$((i+1)); done; echo \"w%d-err\" >&2",
	    w->index, w->index);
	aks_result *r = aks__result_new(1 << 20, 1 << 20);
	aks_agent_spawn spec = {.shell = cmd};
	aks_error *err = NULL;
	aks_agent_exit ex;
	if (aks__agent_exec(w->t->conn, &spec, r, NULL, &ex, &err) != AKS_OK) {
		snprintf(w->msg, sizeof(w->msg), "%s", aks_error_message(err));
		w->failures++;
	} else {
		char want[64 * 300 + 1];
		size_t off = 0;
		for (int i = 0; i < 300; i++)
			off += (size_t)snprintf(want + off, sizeof(want) - off, "w%d-%d\n",
			                        w->index, i);
		size_t len;
		const char *out = aks_result_get_stdout(r, &len);
		if (len != off || memcmp(out, want, len) != 0) {
			snprintf(w->msg, sizeof(w->msg),
			         "run %d: stdout of %zu bytes is not its own", w->index, len);
			w->failures++;
		}
		char werr[32];
		snprintf(werr, sizeof(werr), "w%d-err\n", w->index);
		const char *e = aks_result_get_stderr(r, &len);
		if (len != strlen(werr) || memcmp(e, werr, len) != 0)
			w->failures++;
	}
	aks_error_free(err);
	aks_result_free(r);
	return NULL;
}

static void test_concurrent_runs(void **state)
{
	(void)state;
	th_agent t;
	th_start(&t);
	enum { N = 8 };
	pthread_t th[N];
	worker w[N];
	for (int i = 0; i < N; i++) {
		w[i] = (worker){.t = &t, .index = i};
		assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
	}
	for (int i = 0; i < N; i++) {
		pthread_join(th[i], NULL);
		if (w[i].failures)
			fail_msg("worker %d: %s", i, w[i].msg);
	}
	/* and a ping still answers */
	assert_int_equal(aks__agent_ping(t.conn, NULL, NULL), AKS_OK);
	assert_int_equal(th_stop(&t), 0);
}

/* ---- killing trees ---- */

static void test_timeout_kills_double_forked(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	th_agent t;
	th_start(&t);
	char cmd[1024];
	/* d1: a daemon that double-forks, starts a new session and lets go of every pipe; d2: a
	 * double-forked background process that keeps stdout open. The main program sleeps. */
	snprintf(
	    cmd, sizeof(cmd),
	    "cd '%s'; (setsid sh -c 'echo $$ > d1; exec sleep 1000' </dev/null >/dev/null 2>&1 &); "
	    "(sh -c 'echo $$ > d2; exec sleep 1000' &); echo $$ > main; sleep 1000",
	    dir);
	int64_t t0 = aks__now_ms();
	aks_agent_exit ex;
	int rc;
	aks_result *r = run_shell(&t, cmd, 0.5, &ex, &rc);
	int64_t took = aks__now_ms() - t0;
	assert_int_equal(rc, AKS_ETIMEOUT);
	assert_true(ex.timed_out);
	assert_int_equal(ex.signal, SIGKILL);
	assert_true(aks_result_timed_out(r));
	assert_true(took < 3000);
	aks_result_free(r);
	pid_t d1 = th_read_pid(dir, "d1", 1000), d2 = th_read_pid(dir, "d2", 1000),
	      mainp = th_read_pid(dir, "main", 1000);
	assert_true(d1 > 0 && d2 > 0 && mainp > 0);
	/* Gone already when the run reported its end: the supervisor reaps the whole tree first. */
	assert_false(th_alive(d1));
	assert_false(th_alive(d2));
	assert_false(th_alive(mainp));

	/* The same for a run whose main program exits at once but whose background child holds
	 * the output open: the run lasts until the deadline, then the child dies. */
	snprintf(cmd, sizeof(cmd),
	         "cd '%s'; (sh -c 'echo $$ > d3; exec sleep 1000' &); echo started", dir);
	r = run_shell(&t, cmd, 0.5, &ex, &rc);
	assert_int_equal(rc, AKS_ETIMEOUT);
	assert_stdout(r, "started\n");
	aks_result_free(r);
	pid_t d3 = th_read_pid(dir, "d3", 1000);
	assert_true(d3 > 0);
	assert_false(th_alive(d3));
	assert_int_equal(th_stop(&t), 0);
	th_rmdir(dir);
}

static void test_kill_request(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	th_agent t;
	th_start(&t);
	char cmd[512];
	snprintf(
	    cmd, sizeof(cmd),
	    "cd '%s'; (setsid sh -c 'echo $$ > d; exec sleep 1000' </dev/null >/dev/null 2>&1 &); "
	    "trap 'echo got-term; exit 5' TERM; echo ready; sleep 1000 & wait",
	    dir);
	aks_result *r = aks__result_new(4096, 4096);
	aks_agent_spawn spec = {.shell = cmd};
	aks_agent_run *run = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks__agent_spawn(t.conn, &spec, NULL, NULL, NULL, &run, &err), AKS_OK);
	pid_t d = th_read_pid(dir, "d", 5000);
	assert_true(d > 0);
	usleep(100000); /* let the shell reach `wait` with its trap set */
	/* SIGTERM goes to the whole tree: the shell's trap runs, the daemon (its own session)
	 * gets it too and dies of it. */
	assert_int_equal(aks__agent_kill(run, SIGTERM, &err), AKS_OK);
	aks_agent_exit ex;
	assert_int_equal(aks__agent_wait(run, NULL, &ex, &err), AKS_OK);
	assert_int_equal(ex.exit_code, 5);
	assert_true(th_gone_within(d, 2000));
	aks__agent_run_free(run);
	aks_result_free(r);

	/* SIGKILL on a run: the exit frame says so. */
	const char *sleeper[] = {"sleep", "1000", NULL};
	spec = (aks_agent_spawn){.argv = sleeper};
	assert_int_equal(aks__agent_spawn(t.conn, &spec, NULL, NULL, NULL, &run, &err), AKS_OK);
	assert_int_equal(aks__agent_kill(run, SIGKILL, &err), AKS_OK);
	assert_int_equal(aks__agent_wait(run, NULL, &ex, &err), AKS_OK);
	assert_int_equal(ex.signal, SIGKILL);
	aks__agent_run_free(run);
	assert_int_equal(th_stop(&t), 0);
	th_rmdir(dir);
}

/* ---- 200 MiB with bounded memory ---- */

static void test_large_output_bounded(void **state)
{
	(void)state;
	th_agent t;
	th_start(&t);
	long host_before = th_vm_hwm_kb(getpid());
	const uint64_t total = 200ull * 1024 * 1024;
	aks_result *r = aks__result_new(1 << 20, 1 << 20);
	const char *argv[] = {"head", "-c", "209715200", "/dev/zero", NULL};
	aks_agent_spawn spec = {.argv = argv};
	aks_agent_exit ex;
	aks_error *err = NULL;
	assert_int_equal(aks__agent_exec(t.conn, &spec, r, NULL, &ex, &err), AKS_OK);
	assert_int_equal(ex.exit_code, 0);
	assert_int_equal(ex.out_bytes, total);
	/* The result kept its cap and counted the rest. */
	assert_int_equal(aks_result_get_stream_total(r, AKS_STREAM_STDOUT), total);
	size_t len;
	aks_result_get_stdout(r, &len);
	assert_int_equal(len, 1 << 20);
	assert_true(aks_result_is_truncated(r, AKS_STREAM_STDOUT));
	aks_result_free(r);
	long host_after = th_vm_hwm_kb(getpid());
	long agent_peak = th_vm_hwm_kb(t.pid);
	/* Bounded: a few MiB each, nowhere near the 200 MiB that went through. */
	print_message("# host peak RSS grew by %ld KiB; agent peak RSS %ld KiB\n",
	              host_after - host_before, agent_peak);
	assert_true(host_after - host_before < 32 * 1024);
	assert_true(agent_peak > 0 && agent_peak < 32 * 1024);
	assert_int_equal(th_stop(&t), 0);
}

/* ---- protocol errors ---- */

static void wait_stray(th_agent *t, unsigned want, char *msg, size_t cap)
{
	for (int i = 0; i < 500; i++) {
		if (aks__agent_stray_errors(t->conn, msg, cap) >= want)
			return;
		usleep(10000);
	}
	fail_msg("no error frame from the agent");
}

static void test_malformed_frames(void **state)
{
	(void)state;
	th_agent t;
	th_start(&t);
	char msg[512];
	aks_error *err = NULL;
	/* junk: one error frame, then the agent finds the next header */
	assert_int_equal(aks__agent_send_raw(t.conn, "this is not a frame\n", 20, &err), AKS_OK);
	wait_stray(&t, 1, msg, sizeof(msg));
	assert_non_null(strstr(msg, "malformed"));
	assert_int_equal(aks__agent_ping(t.conn, NULL, &err), AKS_OK);

	/* an unknown type: an error frame naming it */
	aks_agent_buf b = {0};
	size_t s = aks__agent_frame_begin(&b, 0x7e, 0, 4242);
	aks__agent_put_u32(&b, 99, 1);
	aks__agent_frame_end(&b, s);
	assert_int_equal(aks__agent_send_raw(t.conn, b.data, b.len, &err), AKS_OK);
	wait_stray(&t, 2, msg, sizeof(msg));
	assert_non_null(strstr(msg, "unknown frame type 0x7e"));

	/* a payload over the maximum: refused, skipped, and the stream stays in sync */
	b.off = b.len = 0;
	s = aks__agent_frame_begin(&b, AKS_AGENT_PING, 0, 4243);
	aks__agent_frame_end(&b, s);
	aks__agent_put32(b.data + s + 12, AKS_AGENT_MAX_PAYLOAD + 10);
	size_t big = AKS_AGENT_MAX_PAYLOAD + 10;
	uint8_t *junk = malloc(big);
	memset(junk, 'A', big); /* 'A' bytes look like magic: resync must not be fooled */
	aks__agent_put_raw(&b, junk, big);
	free(junk);
	assert_int_equal(aks__agent_send_raw(t.conn, b.data, b.len, &err), AKS_OK);
	wait_stray(&t, 3, msg, sizeof(msg));
	assert_non_null(strstr(msg, "over the"));
	/* a truncated field in a SPAWN */
	b.off = b.len = 0;
	s = aks__agent_frame_begin(&b, AKS_AGENT_SPAWN, 0, 4244);
	aks__agent_put_raw(&b, "\x00\x15\x00\x00\x10\x00xx", 8);
	aks__agent_frame_end(&b, s);
	assert_int_equal(aks__agent_send_raw(t.conn, b.data, b.len, &err), AKS_OK);
	wait_stray(&t, 4, msg, sizeof(msg));
	assert_non_null(strstr(msg, "SPAWN"));
	aks__agent_buf_free(&b);
	/* still serving */
	assert_int_equal(aks__agent_ping(t.conn, NULL, &err), AKS_OK);
	aks_agent_exit ex;
	aks_result *r = run_shell(&t, "echo alive", 10, &ex, NULL);
	assert_stdout(r, "alive\n");
	aks_result_free(r);
	assert_true(th_alive(t.pid));
	assert_int_equal(th_stop(&t), 0);
}

static void test_agent_killed_mid_request(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	th_agent t;
	th_start(&t);
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "echo $$ > '%s/p'; exec sleep 1000", dir);
	aks_agent_spawn spec = {.shell = cmd};
	aks_agent_run *run = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks__agent_spawn(t.conn, &spec, NULL, NULL, NULL, &run, &err), AKS_OK);
	pid_t p = th_read_pid(dir, "p", 5000);
	assert_true(p > 0);
	kill(t.pid, SIGKILL);
	int64_t t0 = aks__now_ms();
	aks_call call;
	aks_call_init(&call, 30, NULL, NULL, NULL);
	aks_agent_exit ex;
	assert_int_equal(aks__agent_wait(run, &call, &ex, &err), AKS_EGONE);
	assert_true(aks__now_ms() - t0 < 2000);
	assert_non_null(strstr(aks_error_message(err), "agent"));
	aks_error_free(err);
	err = NULL;
	aks__agent_run_free(run);
	assert_false(aks__agent_alive(t.conn));
	/* later requests fail at once, they do not hang */
	assert_int_equal(aks__agent_ping(t.conn, NULL, &err), AKS_EGONE);
	aks_error_free(err);
	/* the program died with its agent (its supervisor saw the agent go) */
	assert_true(th_gone_within(p, 3000));
	int st = th_stop(&t);
	assert_true(WIFSIGNALED(st));
	th_rmdir(dir);
}

static void raw_spawn(th_agent *t, uint32_t id, const char *cmd)
{
	aks_agent_buf b = {0};
	size_t s = aks__agent_frame_begin(&b, AKS_AGENT_SPAWN, 0, id);
	aks__agent_put_str(&b, AKS_AGENT_T_SHELL, cmd);
	aks__agent_frame_end(&b, s);
	th_send(t, &b);
	aks__agent_buf_free(&b);
}

static void test_eof_exits_and_kills(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	th_agent t;
	/* Raw frames: the client would kill an unfinished run itself when it is freed. */
	th_start_raw(&t);
	th_send_hello(&t);
	char cmd[512];
	/* A finished run's detached leftover survives the run (like docker exec)... */
	snprintf(
	    cmd, sizeof(cmd),
	    "cd '%s'; setsid sh -c 'echo $$ > left; exec sleep 1000' </dev/null >/dev/null 2>&1 &",
	    dir);
	raw_spawn(&t, 2, cmd);
	aks_agent_frame f;
	uint8_t payload[4096];
	th_recv(&t, &f, payload, sizeof(payload), 5000);
	assert_int_equal(f.type, AKS_AGENT_EXIT);
	assert_int_equal(th_field_u32(&f, AKS_AGENT_T_EXIT_CODE), 0);
	pid_t left = th_read_pid(dir, "left", 5000);
	assert_true(left > 0);
	usleep(100000);
	assert_true(th_alive(left));
	/* ... and a program still running */
	snprintf(cmd, sizeof(cmd), "echo $$ > '%s/run'; exec sleep 1000", dir);
	raw_spawn(&t, 3, cmd);
	pid_t running = th_read_pid(dir, "run", 5000);
	assert_true(running > 0);
	assert_true(th_alive(running));
	/* EOF on the agent's stdin: it exits cleanly and takes everything with it. */
	int st = th_stop(&t);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_true(th_gone_within(running, 2000));
	assert_true(th_gone_within(left, 2000));
	th_rmdir(dir);
}

static void test_run_free_kills(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	th_agent t;
	th_start(&t);
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "echo $$ > '%s/p'; exec sleep 1000", dir);
	aks_agent_spawn spec = {.shell = cmd};
	aks_agent_run *run = NULL;
	assert_int_equal(aks__agent_spawn(t.conn, &spec, NULL, NULL, NULL, &run, NULL), AKS_OK);
	pid_t p = th_read_pid(dir, "p", 5000);
	assert_true(p > 0);
	aks__agent_run_free(run);
	assert_true(th_gone_within(p, 2000));
	assert_true(th_alive(t.pid));
	assert_int_equal(th_stop(&t), 0);
	th_rmdir(dir);
}

static void test_client_deadline_cancel(void **state)
{
	(void)state;
	th_agent t;
	th_start(&t);
	aks_cancel *c = NULL;
	assert_int_equal(aks_cancel_new(&c, NULL), AKS_OK);
	aks_call call;
	aks_call_init(&call, 30, NULL, NULL, c);
	const char *sleeper[] = {"sleep", "1000", NULL};
	aks_agent_spawn spec = {.argv = sleeper};
	aks_agent_run *run = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks__agent_spawn(t.conn, &spec, NULL, NULL, &call, &run, &err), AKS_OK);
	aks_cancel_trigger(c);
	int64_t t0 = aks__now_ms();
	aks_agent_exit ex;
	assert_int_equal(aks__agent_wait(run, &call, &ex, &err), AKS_ECANCELLED);
	assert_true(aks__now_ms() - t0 < 2000);
	assert_int_equal(ex.signal, SIGKILL); /* the kill was confirmed */
	aks_error_free(err);
	aks__agent_run_free(run);
	aks_cancel_free(c);
	assert_int_equal(th_stop(&t), 0);
}

int main(void)
{
	/* SIGPIPE stays fatal: the client must not die writing to a dead agent. */
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_exit_codes),
	    cmocka_unit_test(test_streams_stdin_env_cwd),
	    cmocka_unit_test(test_concurrent_runs),
	    cmocka_unit_test(test_timeout_kills_double_forked),
	    cmocka_unit_test(test_kill_request),
	    cmocka_unit_test(test_large_output_bounded),
	    cmocka_unit_test(test_malformed_frames),
	    cmocka_unit_test(test_agent_killed_mid_request),
	    cmocka_unit_test(test_eof_exits_and_kills),
	    cmocka_unit_test(test_run_free_kills),
	    cmocka_unit_test(test_client_deadline_cancel),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
