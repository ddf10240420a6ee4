/* Unit tests: the resident agent (aksandbox-agent --resident NAME, agent/resident.c). Python
 * state made by one host process is there for the next (x = 41, then print(x + 1) prints 42
 * through two relays); several hosts are served at once and a run waits for a Python
 * session another host holds (killed while it waits, it ends at once and never runs); a host
 * that goes takes its programs with it but not the sessions (its Python run is interrupted),
 * and mid-WRITE leaves the target untouched; racing relays start one agent; a killed agent is
 * started again, fresh, and with --state-dir its first host hears that the Python state
 * was lost; the egress proxy keeps its port across hosts and refuses to decide
 * while no host is connected; another user is not served, and a relay serves only its own
 * user's agent, never another user's program that took the name; the 33rd host is refused; a bad
 * name is a usage error. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <grp.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/plugin/host_api.h"
#include "core/plugin/result.h"
#include "test_agent_harness.h"

/* A name of this test's own: resident agents live in the machine's network namespace. */
static const char *fresh_name(char *buf, size_t len)
{
	static unsigned n;
	snprintf(buf, len, "test-resident-%d-%u", (int)getpid(), ++n);
	return buf;
}

typedef struct outcome {
	int rc;
	aks_agent_exit ex;
	char out[4096];
	char err[4096];
} outcome;

static outcome run(th_agent *t, const aks_agent_spawn *spec, double timeout)
{
	outcome o;
	memset(&o, 0, sizeof(o));
	aks_result *r = aks__result_new(1 << 16, 1 << 16);
	aks_call call;
	aks_call_init(&call, timeout, NULL, NULL, NULL);
	aks_error *err = NULL;
	o.rc = aks__agent_exec(t->conn, spec, r, &call, &o.ex, &err);
	size_t len;
	const char *s = aks_result_get_stdout(r, &len);
	snprintf(o.out, sizeof(o.out), "%.*s", (int)len, s);
	s = aks_result_get_stderr(r, &len);
	snprintf(o.err, sizeof(o.err), "%.*s", (int)len, s);
	aks_error_free(err);
	aks_result_free(r);
	return o;
}

static outcome py(th_agent *t, const char *code)
{
	aks_agent_spawn spec = {.code = code, .language = "python", .session = "main"};
	return run(t, &spec, 30);
}

static outcome sh(th_agent *t, const char *command)
{
	aks_agent_spawn spec = {.shell = command};
	return run(t, &spec, 30);
}

static aks_agent_run *start_py(th_agent *t, const char *code)
{
	aks_agent_spawn spec = {.code = code, .language = "python", .session = "main"};
	aks_call call;
	aks_call_init(&call, 60, NULL, NULL, NULL);
	aks_agent_run *r = NULL;
	aks_error *err = NULL;
	int rc = aks__agent_spawn(t->conn, &spec, NULL, NULL, &call, &r, &err);
	if (rc != AKS_OK)
		fail_msg("spawn: %s", aks_error_message(err));
	return r;
}

static void end_resident(pid_t pid)
{
	kill(pid, SIGKILL);
	assert_true(th_gone_within(pid, 5000));
}

/* Writes a HELLO to fd, which may be closed already (the peer refused): that is no error. */
static void write_hello(int fd)
{
	aks_agent_buf b = {0};
	size_t s = aks__agent_frame_begin(&b, AKS_AGENT_HELLO, 0, 1);
	aks__agent_put_u32(&b, AKS_AGENT_T_VERSION_MIN, 1);
	aks__agent_put_u32(&b, AKS_AGENT_T_VERSION_MAX, 1);
	aks__agent_frame_end(&b, s);
	signal(SIGPIPE, SIG_IGN);
	if (write(fd, b.data, aks__agent_buf_pending(&b)) < 0)
		(void)0;
	aks__agent_buf_free(&b);
}

/* Waits for a run to end (asserting it does) and frees it. */
static void finish(aks_agent_run *r)
{
	aks_call call;
	aks_call_init(&call, 30, NULL, NULL, NULL);
	aks_agent_exit ex;
	aks_error *err = NULL;
	assert_int_equal(aks__agent_wait(r, &call, &ex, &err), AKS_OK);
	aks__agent_run_free(r);
}

/* Two hosts of one new resident agent: its pid. */
static pid_t start_both(th_agent *a, th_agent *b)
{
	char name[64];
	fresh_name(name, sizeof(name));
	th_start_resident(a, name);
	th_start_resident(b, name);
	pid_t resident = (pid_t)aks__agent_pid(a->conn);
	assert_int_equal((pid_t)aks__agent_pid(b->conn), resident);
	return resident;
}

/* Ends two hosts and the agent they share. */
static void end_both(th_agent *a, th_agent *b, pid_t resident)
{
	th_stop(a);
	th_stop(b);
	end_resident(resident);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void test_state_outlives_the_host(void **state)
{
	(void)state;
	char name[64];
	fresh_name(name, sizeof(name));
	th_agent a;
	th_start_resident(&a, name);
	pid_t resident = (pid_t)aks__agent_pid(a.conn);
	outcome o = py(&a, "x = 41");
	assert_int_equal(o.rc, AKS_OK);
	assert_int_equal(o.ex.exit_code, 0);
	int st = th_stop(&a);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0); /* the relay ends cleanly */
	assert_true(th_alive(resident));                    /* the agent does not */

	th_agent b;
	th_start_resident(&b, name);
	assert_int_equal((pid_t)aks__agent_pid(b.conn), resident);
	o = py(&b, "print(x + 1)");
	assert_int_equal(o.rc, AKS_OK);
	assert_string_equal(o.out, "42\n");
	assert_string_equal(o.ex.notice, "");
	th_stop(&b);
	end_resident(resident);
}

static void test_hosts_at_once(void **state)
{
	(void)state;
	th_agent a, b;
	pid_t resident = start_both(&a, &b);

	/* A's long Python run holds the session: B's run waits for it, then sees its state. */
	aks_agent_run *slow = start_py(&a, "import time\ntime.sleep(0.8)\ny = 7\nprint('a done')");
	usleep(200 * 1000); /* A's run has the session (its frame took another relay) */
	double t0 = now_s();
	outcome quick = sh(&b, "echo b"); /* a program of B's does not wait */
	assert_int_equal(quick.rc, AKS_OK);
	assert_string_equal(quick.out, "b\n");
	assert_true(now_s() - t0 < 0.5);
	outcome o = py(&b, "print(y)");
	assert_int_equal(o.rc, AKS_OK);
	assert_string_equal(o.out, "7\n");
	aks_call call;
	aks_call_init(&call, 30, NULL, NULL, NULL);
	aks_agent_exit ex;
	aks_error *err = NULL;
	assert_int_equal(aks__agent_wait(slow, &call, &ex, &err), AKS_OK);
	assert_int_equal(ex.exit_code, 0);
	aks__agent_run_free(slow);

	/* A run that waits past its deadline ends, saying its code did not run. */
	slow = start_py(&a, "import time\ntime.sleep(1.5)\nv = 1");
	usleep(200 * 1000);
	aks_agent_spawn spec = {
	    .code = "v = 2", .language = "python", .session = "main", .timeout_ms = 300};
	o = run(&b, &spec, 30);
	assert_true(o.ex.timed_out);
	assert_non_null(strstr(o.ex.notice, "did not run"));
	finish(slow);
	o = py(&b, "print(v)");
	assert_string_equal(o.out, "1\n");
	end_both(&a, &b, resident);
}

static void test_a_host_that_goes_takes_its_programs(void **state)
{
	(void)state;
	char name[64];
	fresh_name(name, sizeof(name));
	char *dir = th_tmpdir();
	th_agent a;
	th_start_resident(&a, name);
	pid_t resident = (pid_t)aks__agent_pid(a.conn);
	assert_int_equal(py(&a, "z = 5").rc, AKS_OK);
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "sleep 1000 & echo $! > %s/bg; exec sleep 1001", dir);
	aks_agent_spawn spec = {.shell = cmd};
	aks_call call;
	aks_call_init(&call, 60, NULL, NULL, NULL);
	aks_agent_run *r = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks__agent_spawn(a.conn, &spec, NULL, NULL, &call, &r, &err), AKS_OK);
	pid_t bg = th_read_pid(dir, "bg", 5000);
	assert_true(bg > 0);
	aks_agent_run *py_run = start_py(&a, "import time\ntime.sleep(60)");
	usleep(300 * 1000);
	/* The host dies without a word: its relay is killed, the socket closes. */
	kill(a.pid, SIGKILL);
	assert_true(th_gone_within(bg, 5000));
	assert_true(th_alive(resident));
	aks__agent_run_free(r);
	aks__agent_run_free(py_run);
	th_stop(&a);

	/* The session is still there, its long run interrupted, its state kept. */
	th_agent b;
	th_start_resident(&b, name);
	double t0 = now_s();
	outcome o = py(&b, "print(z)");
	assert_int_equal(o.rc, AKS_OK);
	assert_string_equal(o.out, "5\n");
	assert_string_equal(o.ex.notice, "");
	assert_true(now_s() - t0 < 10);
	th_stop(&b);
	end_resident(resident);
	th_rmdir(dir);
}

/* A run waiting for a session another host holds, killed: it ends at once with that signal
 * and a notice, and its code never runs. */
static void test_a_waiting_run_is_killed(void **state)
{
	(void)state;
	th_agent a, b;
	pid_t resident = start_both(&a, &b);
	assert_int_equal(py(&a, "w = 1").rc, AKS_OK);
	aks_agent_run *slow = start_py(&a, "import time\ntime.sleep(1.5)");
	usleep(200 * 1000);
	aks_agent_run *waiting = start_py(&b, "w = 2");
	usleep(200 * 1000);
	aks_error *err = NULL;
	assert_int_equal(aks__agent_kill(waiting, SIGKILL, &err), AKS_OK);
	aks_call call;
	aks_call_init(&call, 30, NULL, NULL, NULL);
	aks_agent_exit ex;
	double t0 = now_s();
	assert_int_equal(aks__agent_wait(waiting, &call, &ex, &err), AKS_OK);
	assert_true(now_s() - t0 < 1.0); /* not after A's run */
	assert_int_equal(ex.signal, SIGKILL);
	assert_non_null(strstr(ex.notice, "waiting"));
	aks__agent_run_free(waiting);
	finish(slow);
	outcome o = py(&b, "print(w)");
	assert_string_equal(o.out, "1\n");
	end_both(&a, &b, resident);
}

/* A host that goes in the middle of a WRITE (its relay killed after the first chunk) leaves
 * the target as it was and no temporary file beside it. */
static void test_a_host_gone_mid_write(void **state)
{
	(void)state;
	char name[64], target[600], cmd[1300];
	fresh_name(name, sizeof(name));
	char *dir = th_tmpdir();
	snprintf(target, sizeof(target), "%s/target", dir);
	FILE *f = fopen(target, "w");
	assert_non_null(f);
	fputs("original\n", f);
	fclose(f);
	th_agent t;
	th_start_raw_args(&t, (const char *const[]){"--resident", name, NULL});
	th_send_hello(&t);
	uint8_t sha[32] = {0}; /* never checked: the data never ends */
	aks_agent_buf b = {0};
	size_t s = aks__agent_frame_begin(&b, AKS_AGENT_WRITE, 0, 2);
	aks__agent_put_str(&b, AKS_AGENT_T_PATH, target);
	aks__agent_put_u64(&b, AKS_AGENT_T_SIZE, 1 << 20);
	aks__agent_put_bytes(&b, AKS_AGENT_T_SHA256, sha, sizeof(sha));
	aks__agent_put_u32(&b, AKS_AGENT_T_MODE, 0644);
	aks__agent_frame_end(&b, s);
	static uint8_t chunk[64 * 1024];
	memset(chunk, 'x', sizeof(chunk));
	aks__agent_frame_data(&b, AKS_AGENT_WRITE_DATA, 0, 2, chunk, sizeof(chunk));
	th_send(&t, &b);
	aks__agent_buf_free(&b);
	/* the temporary file beside the target is there: the write is under way */
	snprintf(cmd, sizeof(cmd), "test $(ls -A '%s' | wc -l) -eq 2", dir);
	int i;
	for (i = 0; i < 500 && system(cmd) != 0; i++)
		usleep(10 * 1000);
	assert_true(i < 500);
	kill(t.pid, SIGKILL);
	th_stop(&t);
	snprintf(cmd, sizeof(cmd), "test \"$(ls -A '%s')\" = target", dir);
	for (i = 0; i < 500 && system(cmd) != 0; i++)
		usleep(10 * 1000);
	assert_true(i < 500); /* the temporary file is gone */
	char got[64] = "";
	f = fopen(target, "r");
	assert_non_null(f);
	assert_non_null(fgets(got, sizeof(got), f));
	fclose(f);
	assert_string_equal(got, "original\n");
	th_agent c; /* the agent itself goes on */
	th_start_resident(&c, name);
	pid_t resident = (pid_t)aks__agent_pid(c.conn);
	assert_string_equal(sh(&c, "echo on").out, "on\n");
	th_stop(&c);
	end_resident(resident);
	th_rmdir(dir);
}

static void test_racing_hosts_start_one_agent(void **state)
{
	(void)state;
	char name[64];
	fresh_name(name, sizeof(name));
	enum { N = 6 };
	th_agent t[N];
	for (int i = 0; i < N; i++)
		th_start_raw_args(&t[i], (const char *const[]){"--resident", name, NULL});
	/* every HELLO out before any answer is read: the relays race to start the agent */
	for (int i = 0; i < N; i++)
		write_hello(t[i].to);
	uint32_t pid[N];
	for (int i = 0; i < N; i++) {
		aks_agent_frame f;
		uint8_t payload[512];
		th_recv(&t[i], &f, payload, sizeof(payload), 10000);
		assert_int_equal(f.type, AKS_AGENT_HELLO_OK);
		pid[i] = th_field_u32(&f, AKS_AGENT_T_PID);
		assert_int_equal(pid[i], pid[0]);
	}
	for (int i = 0; i < N; i++)
		th_stop(&t[i]);
	end_resident((pid_t)pid[0]);
}

static void test_a_killed_agent_starts_again_fresh(void **state)
{
	(void)state;
	char name[64];
	fresh_name(name, sizeof(name));
	th_agent a;
	th_start_resident(&a, name);
	pid_t first = (pid_t)aks__agent_pid(a.conn);
	assert_int_equal(py(&a, "w = 1").rc, AKS_OK);
	end_resident(first);
	int st = th_stop(&a); /* its relay saw the socket close and ended */
	assert_true(WIFEXITED(st));
	th_agent b;
	th_start_resident(&b, name);
	pid_t second = (pid_t)aks__agent_pid(b.conn);
	assert_int_not_equal(second, first);
	outcome o = py(&b, "print('w' in globals())");
	assert_string_equal(o.out, "False\n");
	th_stop(&b);
	end_resident(second);
}

/* The instance an agent noted in dir as holding Python state under name, or 0 (no note). */
static uint64_t noted(const char *dir, const char *name)
{
	char path[300], buf[32] = "";
	snprintf(path, sizeof(path), "%s/.%s.python", dir, name);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	return strtoull(buf, NULL, 16);
}

/* With --state-dir, an agent started after one that held Python state says so in its HELLO
 * (LOST: that agent's instance), to the first host only; an agent gone without Python state
 * leaves nothing to say. */
static void test_a_lost_state_is_told_once(void **state)
{
	(void)state;
	char name[64];
	fresh_name(name, sizeof(name));
	char *dir = th_tmpdir();
	th_agent a;
	th_start_resident_in(&a, name, dir);
	pid_t first = (pid_t)aks__agent_pid(a.conn);
	uint64_t first_instance = aks__agent_instance(a.conn);
	assert_int_equal(aks__agent_lost(a.conn), 0); /* a new sandbox lost nothing */
	assert_int_equal(noted(dir, name), 0);        /* no Python session yet */
	assert_int_equal(sh(&a, "true").rc, AKS_OK);
	assert_int_equal(noted(dir, name), 0);
	assert_int_equal(py(&a, "w = 1").rc, AKS_OK);
	assert_true(noted(dir, name) == first_instance);
	end_resident(first);
	th_stop(&a);

	th_agent b, c;
	th_start_resident_in(&b, name, dir);
	pid_t second = (pid_t)aks__agent_pid(b.conn);
	assert_int_not_equal(second, first);
	assert_true(aks__agent_lost(b.conn) == first_instance);
	th_start_resident_in(&c, name, dir); /* told once: b's host tells its caller */
	assert_int_equal((pid_t)aks__agent_pid(c.conn), second);
	assert_int_equal(aks__agent_lost(c.conn), 0);
	assert_int_equal(noted(dir, name), 0);
	th_stop(&c);
	/* The second agent never ran Python: its end loses nothing. */
	end_resident(second);
	th_stop(&b);
	th_start_resident_in(&a, name, dir);
	pid_t third = (pid_t)aks__agent_pid(a.conn);
	assert_int_equal(aks__agent_lost(a.conn), 0);
	th_stop(&a);
	end_resident(third);
	th_rmdir(dir);
}

/* The state directory is the sandbox's to write in: a FIFO or a symlink put where the agent
 * notes its Python state blocks nothing and leads nowhere. */
static void test_a_planted_state_note_blocks_nothing(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	char name[64], path[300], target[300];
	for (int planted = 0; planted < 2; planted++) {
		fresh_name(name, sizeof(name));
		snprintf(path, sizeof(path), "%s/.%s.python", dir, name);
		snprintf(target, sizeof(target), "%s/target", dir);
		if (planted == 0)
			assert_int_equal(mkfifo(path, 0600), 0);
		else
			assert_int_equal(symlink(target, path), 0);
		th_agent a;
		th_start_resident_in(&a, name, dir);
		pid_t resident = (pid_t)aks__agent_pid(a.conn);
		assert_int_equal(aks__agent_lost(a.conn), 0);
		double t0 = now_s();
		outcome o = py(&a, "print(6 * 7)");
		assert_int_equal(o.rc, AKS_OK);
		assert_string_equal(o.out, "42\n");
		assert_true(now_s() - t0 < 10);
		assert_int_equal(access(target, F_OK), -1); /* nothing written through the link */
		th_stop(&a);
		end_resident(resident);
		unlink(path);
	}
	th_rmdir(dir);
}

/* What the proxy answers a plain HTTP request on port. */
static void proxy_answer(unsigned port, char *buf, size_t len)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sin = {.sin_family = AF_INET,
	                          .sin_port = htons((uint16_t)port),
	                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	static const char req[] = "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n";
	assert_int_equal(write(fd, req, sizeof(req) - 1), (ssize_t)sizeof(req) - 1);
	struct timeval tv = {5, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ssize_t n = read(fd, buf, len - 1);
	buf[n > 0 ? n : 0] = '\0';
	close(fd);
}

static void test_egress_port_stays_and_nobody_decides_between_hosts(void **state)
{
	(void)state;
	char name[64];
	fresh_name(name, sizeof(name));
	th_agent a;
	th_start_resident(&a, name);
	pid_t resident = (pid_t)aks__agent_pid(a.conn);
	aks_call call;
	aks_call_init(&call, 10, NULL, NULL, NULL);
	unsigned port_a = 0, port_b = 0;
	aks_error *err = NULL;
	assert_int_equal(aks__agent_net_listen(a.conn, 256 * 1024, &call, &port_a, &err), AKS_OK);
	th_stop(&a);
	char answer[512];
	proxy_answer(port_a, answer, sizeof(answer));
	assert_non_null(strstr(answer, "HTTP/1.1 503"));
	assert_non_null(strstr(answer, "no host is connected"));
	th_agent b;
	th_start_resident(&b, name);
	assert_int_equal(aks__agent_net_listen(b.conn, 256 * 1024, &call, &port_b, &err), AKS_OK);
	assert_int_equal(port_b, port_a);
	th_stop(&b);
	end_resident(resident);
}

/* A process of another user that connects is closed without an answer: run as nobody (a copy
 * of the agent it may execute), its relay reaches the agent and ends, and no HELLO_OK comes
 * back. The relay's exit status 0 proves it ran and connected (exec failing would be 126 or
 * 127; no agent to reach, it would start its own and answer). */
/* The resident agent's address, as resident.c makes it. */
static socklen_t resident_addr(const char *name, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	int n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "aksandbox-agent/%s", name);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* In a child: drops to nobody (uid and gid 65534, no groups). */
static bool become_nobody(void)
{
	return setgroups(0, NULL) == 0 && setgid(65534) == 0 && setuid(65534) == 0;
}

/* A program of another user (nobody) that connects to the agent's socket itself and says
 * HELLO is closed without an answer; the agent goes on. Fails when the agent's SO_PEERCRED
 * check is removed. */
static void test_other_users_are_not_served(void **state)
{
	(void)state;
	if (getuid() != 0) {
		skip(); /* needs root to become another user */
	}
	char name[64];
	fresh_name(name, sizeof(name));
	th_agent a;
	th_start_resident(&a, name);
	pid_t resident = (pid_t)aks__agent_pid(a.conn);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) { /* 0: closed unanswered; 1: answered; 2: could not try */
		alarm(20);
		struct sockaddr_un sa;
		socklen_t len = resident_addr(name, &sa);
		int fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (fd < 0 || !become_nobody() || connect(fd, (struct sockaddr *)&sa, len) < 0)
			_exit(2);
		write_hello(fd);
		char buf[256];
		_exit(read(fd, buf, sizeof(buf)) > 0 ? 1 : 0);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_true(th_alive(resident));
	outcome o = sh(&a, "echo served");
	assert_string_equal(o.out, "served\n");
	th_stop(&a);
	end_resident(resident);
}

/* A relay run as another user (nobody, through setpriv) does not serve the agent of root
 * it finds under the name: it exits 1 and passes nothing on. */
static void test_relay_refuses_another_users_agent(void **state)
{
	(void)state;
	if (getuid() != 0) {
		skip(); /* needs root to become another user */
	}
	char name[64];
	fresh_name(name, sizeof(name));
	th_agent a;
	th_start_resident(&a, name);
	pid_t resident = (pid_t)aks__agent_pid(a.conn);
	char *dir = th_tmpdir();
	char copy[256], cmd[1024];
	snprintf(copy, sizeof(copy), "%s/aksandbox-agent", dir);
	snprintf(cmd, sizeof(cmd), "chmod 755 '%s' && cp '%s' '%s' && chmod 755 '%s'", dir,
	         th_agent_path(), copy, copy);
	assert_int_equal(system(cmd), 0);
	int in[2], out[2];
	assert_int_equal(pipe(in), 0);
	assert_int_equal(pipe(out), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execlp("setpriv", "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
		       copy, "--resident", name, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	write_hello(in[1]);
	close(in[1]);
	char buf[256];
	ssize_t got = 0, n;
	while ((n = read(out[0], buf, sizeof(buf))) > 0) /* EOF when the relay ends */
		got += n;
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 1);
	assert_int_equal(got, 0);
	close(out[0]);
	assert_true(th_alive(resident));
	th_stop(&a);
	end_resident(resident);
	th_rmdir(dir);
}

/* A program of another user (nobody) that took the name is not served: the relay exits 1
 * and the host's HELLO, already in its input, never reaches it. Fails when the relay's check
 * of who listens is removed. */
static void test_relay_refuses_another_users_listener(void **state)
{
	(void)state;
	if (getuid() != 0) {
		skip(); /* needs root to become another user */
	}
	char name[64];
	fresh_name(name, sizeof(name));
	int ready[2];
	assert_int_equal(pipe(ready), 0);
	pid_t squatter = fork();
	assert_true(squatter >= 0);
	if (squatter == 0) { /* 0: the relay came and said nothing; 1: it passed bytes on */
		alarm(20);
		struct sockaddr_un sa;
		socklen_t len = resident_addr(name, &sa);
		int fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (fd < 0 || !become_nobody() || bind(fd, (struct sockaddr *)&sa, len) < 0 ||
		    listen(fd, 4) < 0)
			_exit(2);
		if (write(ready[1], "r", 1) != 1)
			_exit(2);
		int c = accept(fd, NULL, NULL);
		char buf[256];
		_exit(c < 0 ? 2 : read(c, buf, sizeof(buf)) > 0 ? 1 : 0);
	}
	close(ready[1]);
	char r;
	assert_int_equal(read(ready[0], &r, 1), 1);
	close(ready[0]);
	th_agent t;
	th_start_raw_args(&t, (const char *const[]){"--resident", name, NULL});
	write_hello(t.to);
	int st = th_stop(&t);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 1);
	assert_int_equal(waitpid(squatter, &st, 0), squatter);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* At most 32 hosts at once: the 33rd is told so (ERROR LIMIT) and closed; the others go on. */
static void test_host_limit(void **state)
{
	(void)state;
	char name[64];
	fresh_name(name, sizeof(name));
	enum { N = 32 };
	th_agent t[N];
	for (int i = 0; i < N; i++)
		th_start_resident(&t[i], name);
	pid_t resident = (pid_t)aks__agent_pid(t[0].conn);
	th_agent extra;
	th_start_raw_args(&extra, (const char *const[]){"--resident", name, NULL});
	aks_agent_frame f;
	uint8_t payload[512];
	th_recv(&extra, &f, payload, sizeof(payload), 10000);
	assert_int_equal(f.type, AKS_AGENT_ERROR);
	assert_int_equal(th_field_u32(&f, AKS_AGENT_T_CODE), AKS_AGENT_E_LIMIT);
	int st = th_stop(&extra);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	outcome o = sh(&t[N - 1], "echo still");
	assert_string_equal(o.out, "still\n");
	for (int i = 0; i < N; i++)
		th_stop(&t[i]);
	end_resident(resident);
}

static void test_bad_names(void **state)
{
	(void)state;
	const char *bad[] = {"", "two words", "tab\tin"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		th_agent t;
		th_start_raw_args(&t, (const char *const[]){"--resident", bad[i], NULL});
		int st = th_stop(&t);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 2);
	}
	/* --resident and --exec do not go together */
	th_agent t;
	th_start_raw_args(&t, (const char *const[]){"--resident", "x", "--exec", "true", NULL});
	int st = th_stop(&t);
	assert_int_equal(WEXITSTATUS(st), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_state_outlives_the_host),
	    cmocka_unit_test(test_hosts_at_once),
	    cmocka_unit_test(test_a_host_that_goes_takes_its_programs),
	    cmocka_unit_test(test_a_waiting_run_is_killed),
	    cmocka_unit_test(test_a_host_gone_mid_write),
	    cmocka_unit_test(test_racing_hosts_start_one_agent),
	    cmocka_unit_test(test_a_killed_agent_starts_again_fresh),
	    cmocka_unit_test(test_a_lost_state_is_told_once),
	    cmocka_unit_test(test_a_planted_state_note_blocks_nothing),
	    cmocka_unit_test(test_egress_port_stays_and_nobody_decides_between_hosts),
	    cmocka_unit_test(test_other_users_are_not_served),
	    cmocka_unit_test(test_relay_refuses_another_users_agent),
	    cmocka_unit_test(test_relay_refuses_another_users_listener),
	    cmocka_unit_test(test_host_limit),
	    cmocka_unit_test(test_bad_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
