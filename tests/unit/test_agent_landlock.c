/*
 * tests/unit/test_agent_landlock.c - aksandbox-agent's Landlock confinement (--landlock-ro,
 * --landlock-rw) in --exec mode and in protocol mode: writes only beneath the rw paths, reads
 * only beneath the ro and rw ones, no way out through a symlink or a hard link, rules on single
 * files, no signal to a process outside (ABI 6), the exit statuses of --exec, and fail closed:
 * a bad path or a kernel without Landlock (simulated with seccomp) runs nothing, exit 125.
 * The agent is the build's (AKS_TEST_AGENT picks another); tests that need Landlock are
 * skipped when `--landlock-abi` says the kernel has none.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/plugin/host_api.h"
#include "core/plugin/result.h"
#include "test_agent_harness.h"

/* ---- running the agent ---- */

typedef struct args {
	const char *v[64];
	size_t n;
} args;

static void push(args *a, const char *s)
{
	assert_true(a->n + 1 < sizeof(a->v) / sizeof(a->v[0]));
	a->v[a->n++] = s;
	a->v[a->n] = NULL;
}

/* What /bin/sh, cat and friends need to run: /usr, and the top directories that are not
 * merely symlinks into it on this system (Landlock checks where a path leads); and /proc,
 * where the agent finds a tree's processes to kill them (and the sanitizer build of the
 * agent its threads, for the leak check at exit). */
static void push_system_ro(args *a)
{
	static const char *const dirs[] = {"/usr",   "/bin",   "/sbin", "/lib",
	                                   "/lib64", "/lib32", "/proc"};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		struct stat st;
		if (lstat(dirs[i], &st) == 0 && S_ISDIR(st.st_mode)) {
			push(a, "--landlock-ro");
			push(a, dirs[i]);
		}
	}
}

/* --exec /bin/sh -c script, with $1 (and $2) from the arguments the caller pushes after. */
static void push_sh(args *a, const char *script)
{
	push(a, "--exec");
	push(a, "/bin/sh");
	push(a, "-c");
	push(a, script);
	push(a, "sh");
}

typedef struct outcome {
	int status; /* the agent's wait status */
	char out[8192], err[8192];
	size_t out_len, err_len;
} outcome;

/* Makes landlock_create_ruleset fail with ENOSYS, as on a kernel without Landlock. The
 * syscall's number is the same on every architecture, so the filter checks no arch. */
static void pretend_no_landlock(void)
{
	struct sock_filter code[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_landlock_create_ruleset, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof(code) / sizeof(code[0]), code};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
		_exit(99);
}

static void drain(int *fd, char *buf, size_t cap, size_t *len)
{
	char scratch[4096];
	ssize_t n = read(*fd, scratch, sizeof(scratch));
	if (n <= 0) {
		close(*fd);
		*fd = -1;
		return;
	}
	size_t keep = (size_t)n < cap - 1 - *len ? (size_t)n : cap - 1 - *len;
	memcpy(buf + *len, scratch, keep);
	*len += keep;
	buf[*len] = '\0';
}

/* Runs the agent with options (NULL-terminated) and stdin /dev/null, collecting its output;
 * without_landlock: as if the kernel had none. */
static void run_agent(const args *a, bool without_landlock, outcome *o)
{
	memset(o, 0, sizeof(*o));
	const char *path = th_agent_path();
	const char *argv[66] = {path};
	for (size_t i = 0; i < a->n; i++)
		argv[i + 1] = a->v[i];
	int out[2], err[2];
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	assert_int_equal(pipe2(err, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);
		dup2(null, 0);
		dup2(out[1], 1);
		dup2(err[1], 2);
		if (without_landlock)
			pretend_no_landlock();
		execv(path, (char *const *)argv);
		_exit(98);
	}
	close(out[1]);
	close(err[1]);
	int fds[2] = {out[0], err[0]};
	while (fds[0] >= 0 || fds[1] >= 0) {
		struct pollfd pfd[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
		int ready = poll(pfd, 2, 10000);
		if (ready <= 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			fail_msg("the agent did not finish within 10 s");
		}
		if (pfd[0].revents)
			drain(&fds[0], o->out, sizeof(o->out), &o->out_len);
		if (pfd[1].revents)
			drain(&fds[1], o->err, sizeof(o->err), &o->err_len);
	}
	assert_int_equal(waitpid(pid, &o->status, 0), pid);
}

static int exit_code(const outcome *o)
{
	if (!WIFEXITED(o->status))
		fail_msg("the agent did not exit normally (wait status 0x%x)", o->status);
	return WEXITSTATUS(o->status);
}

/* The running kernel's Landlock ABI as the agent reports it (asked once). */
static int kernel_abi(void)
{
	static int abi = -1;
	if (abi < 0) {
		args a = {0};
		push(&a, "--landlock-abi");
		outcome o;
		run_agent(&a, false, &o);
		assert_int_equal(exit_code(&o), 0);
		abi = atoi(o.out);
		if (abi == 0)
			print_message("# no Landlock here: %s", o.err);
	}
	return abi;
}

/* ---- the scratch directories ---- */

typedef struct dirs {
	char *ws;       /* --landlock-rw: the workspace */
	char *outside;  /* in no rule: mode 0777, holding secret */
	char *ro;       /* --landlock-ro: holding readme */
	pid_t leftover; /* a process of the test's to kill in teardown, should an assert fail */
} dirs;

static void put_file(const char *dir, const char *name, const char *text)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static bool file_exists(const char *dir, const char *name)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

static int setup_dirs(void **state)
{
	dirs *d = calloc(1, sizeof(*d));
	assert_non_null(d);
	d->ws = th_tmpdir();
	d->outside = th_tmpdir();
	d->ro = th_tmpdir();
	/* Open to anyone: only Landlock can be what refuses a write there. */
	assert_int_equal(chmod(d->outside, 0777), 0);
	put_file(d->outside, "secret", "secret\n");
	put_file(d->ro, "readme", "readable\n");
	*state = d;
	return 0;
}

static int teardown_dirs(void **state)
{
	dirs *d = *state;
	if (d->leftover > 0) {
		kill(d->leftover, SIGKILL);
		waitpid(d->leftover, NULL, 0);
	}
	th_rmdir(d->ws);
	th_rmdir(d->outside);
	th_rmdir(d->ro);
	free(d);
	return 0;
}

/* The usual confinement: the system read-only, d->ro read-only, d->ws writable. */
static void push_confined(args *a, const dirs *d)
{
	push_system_ro(a);
	push(a, "--landlock-ro");
	push(a, d->ro);
	push(a, "--landlock-rw");
	push(a, d->ws);
}

/* Runs script under the usual confinement with $1 = arg1 (and $2 = arg2 when not NULL). */
static void run_confined(const dirs *d, const char *script, const char *arg1, const char *arg2,
                         outcome *o)
{
	args a = {0};
	push_confined(&a, d);
	push_sh(&a, script);
	push(&a, arg1);
	if (arg2)
		push(&a, arg2);
	run_agent(&a, false, o);
}

/* ---- the tests ---- */

static void test_abi(void **state)
{
	(void)state;
	args a = {0};
	push(&a, "--landlock-abi");
	outcome o;
	run_agent(&a, false, &o);
	assert_int_equal(exit_code(&o), 0);
	assert_true(atoi(o.out) >= 0);
	print_message("# the kernel's Landlock ABI: %s", o.out);
	/* Without Landlock: 0, with the reason. */
	run_agent(&a, true, &o);
	assert_int_equal(exit_code(&o), 0);
	assert_string_equal(o.out, "0\n");
	assert_non_null(strstr(o.err, "not built in"));
}

static void test_exec_confined(void **state)
{
	dirs *d = *state;
	if (kernel_abi() < 1)
		skip();
	outcome o;
	/* The workspace is writable, and whatever was written there readable. */
	run_confined(d, "echo made > \"$1/new\" && mkdir \"$1/sub\" && cat \"$1/new\"", d->ws, NULL,
	             &o);
	assert_int_equal(exit_code(&o), 0);
	assert_string_equal(o.out, "made\n");
	assert_true(file_exists(d->ws, "sub"));
	/* Another directory, open to anyone: no write, no new file, no read. */
	run_confined(d, "echo x > \"$1/new\"", d->outside, NULL, &o);
	assert_int_not_equal(exit_code(&o), 0);
	assert_non_null(strstr(o.err, "Permission denied"));
	assert_false(file_exists(d->outside, "new"));
	run_confined(d, "mkdir \"$1/sub\"", d->outside, NULL, &o);
	assert_int_not_equal(exit_code(&o), 0);
	assert_non_null(strstr(o.err, "Permission denied"));
	run_confined(d, "cat \"$1/secret\"", d->outside, NULL, &o);
	assert_int_not_equal(exit_code(&o), 0);
	assert_non_null(strstr(o.err, "Permission denied"));
	assert_null(strstr(o.out, "secret"));
	/* A read-only path: read, but neither written, nor emptied, nor removed from. */
	run_confined(d, "cat \"$1/readme\"", d->ro, NULL, &o);
	assert_int_equal(exit_code(&o), 0);
	assert_string_equal(o.out, "readable\n");
	run_confined(d, "echo x > \"$1/readme\"; echo y > \"$1/new\"; rm -f \"$1/readme\"", d->ro,
	             NULL, &o);
	assert_int_not_equal(exit_code(&o), 0);
	assert_non_null(strstr(o.err, "Permission denied"));
	assert_false(file_exists(d->ro, "new"));
	run_confined(d, "cat \"$1/readme\"", d->ro, NULL, &o); /* still there, unchanged */
	assert_string_equal(o.out, "readable\n");
}

/* Landlock follows where a path really leads, not the name used. */
static void test_no_way_out(void **state)
{
	dirs *d = *state;
	if (kernel_abi() < 1)
		skip();
	char target[4200];
	snprintf(target, sizeof(target), "%s/secret", d->outside);
	char link[4200];
	snprintf(link, sizeof(link), "%s/link", d->ws);
	assert_int_equal(symlink(target, link), 0);
	snprintf(link, sizeof(link), "%s/linkdir", d->ws);
	assert_int_equal(symlink(d->outside, link), 0);
	outcome o;
	/* A symlink planted in the workspace (say, by a file upload) reads nothing outside. */
	run_confined(d, "cat \"$1/link\"", d->ws, NULL, &o);
	assert_int_not_equal(exit_code(&o), 0);
	assert_non_null(strstr(o.err, "Permission denied"));
	assert_null(strstr(o.out, "secret"));
	run_confined(d, "echo x > \"$1/linkdir/new\"", d->ws, NULL, &o);
	assert_int_not_equal(exit_code(&o), 0);
	assert_false(file_exists(d->outside, "new"));
	/* Nor can the confined program make its own way in: a symlink it makes leads just as
	 * far, and a hard link to an outside file is refused. */
	run_confined(d, "ln -s \"$2/secret\" \"$1/own\" && cat \"$1/own\"", d->ws, d->outside, &o);
	assert_int_not_equal(exit_code(&o), 0);
	assert_null(strstr(o.out, "secret"));
	run_confined(d, "ln \"$2/secret\" \"$1/hard\"", d->ws, d->outside, &o);
	assert_int_not_equal(exit_code(&o), 0);
	assert_false(file_exists(d->ws, "hard"));
}

/* A rule may name a single file: only file rights are given there (the kernel refuses
 * directory rights on a file), and its neighbours stay closed. */
static void test_file_rules(void **state)
{
	dirs *d = *state;
	if (kernel_abi() < 1)
		skip();
	put_file(d->outside, "other", "other\n");
	char secret[4200], log[4200];
	snprintf(secret, sizeof(secret), "%s/secret", d->outside);
	snprintf(log, sizeof(log), "%s/log", d->outside);
	put_file(d->outside, "log", "");
	args a = {0};
	push_system_ro(&a);
	push(&a, "--landlock-ro");
	push(&a, secret);
	push(&a, "--landlock-rw");
	push(&a, log);
	push_sh(&a, "cat \"$1/secret\" && echo appended >> \"$1/log\" && cat \"$1/other\"");
	push(&a, d->outside);
	outcome o;
	run_agent(&a, false, &o);
	assert_int_not_equal(exit_code(&o), 0);
	assert_string_equal(o.out, "secret\n");
	assert_non_null(strstr(o.err, "Permission denied")); /* other */
	FILE *f = fopen(log, "r");
	assert_non_null(f);
	char line[64] = "";
	assert_non_null(fgets(line, sizeof(line), f));
	fclose(f);
	assert_string_equal(line, "appended\n");
}

/* Runs cmd through the agent's client; rc NULL: the run must succeed. */
static aks_result *run_through_agent(th_agent *t, const char *cmd, double timeout,
                                     aks_agent_exit *ex, int *rc)
{
	aks_result *r = aks__result_new(1 << 16, 1 << 16);
	assert_non_null(r);
	aks_call call;
	aks_call_init(&call, timeout, NULL, NULL, NULL);
	aks_agent_spawn spec = {.shell = cmd};
	aks_error *err = NULL;
	int got = aks__agent_exec(t->conn, &spec, r, &call, ex, &err);
	if (rc)
		*rc = got;
	else if (got != AKS_OK)
		fail_msg("exec '%s': %s", cmd, aks_error_message(err));
	aks_error_free(err);
	return r;
}

static bool result_has(const aks_result *r, bool err, const char *needle)
{
	size_t len;
	const char *data = err ? aks_result_get_stderr(r, &len) : aks_result_get_stdout(r, &len);
	return data && memmem(data, len, needle, strlen(needle)) != NULL;
}

/* The long-running agent: it answers HELLO, and it and what it runs are confined alike. */
static void test_protocol_confined(void **state)
{
	dirs *d = *state;
	if (kernel_abi() < 1)
		skip();
	args a = {0};
	push_confined(&a, d);
	/* /dev/null for the daemon below (a file rule: the rest of /dev stays closed). */
	push(&a, "--landlock-rw");
	push(&a, "/dev/null");
	th_agent t;
	th_start_args(&t, a.v); /* asserts HELLO_OK */
	d->leftover = t.pid;
	char cmd[9000];
	aks_agent_exit ex;
	snprintf(cmd, sizeof(cmd), "echo made > '%s/new' && cat '%s/new'", d->ws, d->ws);
	aks_result *r = run_through_agent(&t, cmd, 10, &ex, NULL);
	assert_int_equal(ex.exit_code, 0);
	assert_true(result_has(r, false, "made"));
	aks_result_free(r);
	snprintf(cmd, sizeof(cmd), "echo x > '%s/new'", d->outside);
	r = run_through_agent(&t, cmd, 10, &ex, NULL);
	assert_int_not_equal(ex.exit_code, 0);
	assert_true(result_has(r, true, "Permission denied"));
	aks_result_free(r);
	snprintf(cmd, sizeof(cmd), "cat '%s/secret'", d->outside);
	r = run_through_agent(&t, cmd, 10, &ex, NULL);
	assert_int_not_equal(ex.exit_code, 0);
	assert_false(result_has(r, false, "secret"));
	aks_result_free(r);
	assert_false(file_exists(d->outside, "new"));

	/* The agent's own file transfers are held to the same paths. */
	char path[4200];
	aks_error *err = NULL;
	snprintf(path, sizeof(path), "%s/up", d->ws);
	assert_int_equal(aks__agent_write_file(t.conn, path, "up", 2, 0644, NULL, &err), AKS_OK);
	snprintf(path, sizeof(path), "%s/up", d->outside);
	assert_int_not_equal(aks__agent_write_file(t.conn, path, "up", 2, 0644, NULL, &err),
	                     AKS_OK);
	aks_error_free(err);
	err = NULL;
	assert_false(file_exists(d->outside, "up"));
	snprintf(path, sizeof(path), "%s/secret", d->outside);
	r = aks__result_new(4096, 4096);
	bool refused = false;
	assert_int_not_equal(
	    aks__agent_read_into(t.conn, path, 4096, r, "secret", NULL, &refused, &err), AKS_OK);
	aks_error_free(err);
	aks_result_free(r);

	/* Whole-tree kills still work under the rules (with /proc readable): a detached daemon
	 * is gone when the run's deadline has passed. */
	snprintf(cmd, sizeof(cmd),
	         "cd '%s' && (setsid sh -c 'echo $$ > daemon; exec sleep 1000' "
	         "</dev/null >/dev/null 2>&1 &); sleep 1000",
	         d->ws);
	int rc;
	r = run_through_agent(&t, cmd, 0.5, &ex, &rc);
	assert_int_equal(rc, AKS_ETIMEOUT);
	assert_true(ex.timed_out);
	aks_result_free(r);
	pid_t daemon = th_read_pid(d->ws, "daemon", 1000);
	assert_true(daemon > 0);
	assert_false(th_alive(daemon));
	assert_int_equal(th_stop(&t), 0);
	d->leftover = 0;
}

/* Any failure to confine runs nothing: exit 125 and one line on stderr. */
static void test_fail_closed(void **state)
{
	dirs *d = *state;
	args a = {0};
	push_system_ro(&a);
	push(&a, "--landlock-rw");
	push(&a, d->ws);
	push(&a, "--landlock-ro");
	push(&a, "/nonexistent-aks-landlock");
	size_t before_exec = a.n;
	push_sh(&a, "touch \"$1/ran\"");
	push(&a, d->ws);
	outcome o;
	run_agent(&a, false, &o);
	assert_int_equal(exit_code(&o), 125);
	assert_non_null(strstr(o.err, "aksandbox-agent: landlock: "));
	assert_non_null(strstr(o.err, "/nonexistent-aks-landlock"));
	assert_false(file_exists(d->ws, "ran"));

	/* A kernel without Landlock: the same, with the reason. */
	run_agent(&a, true, &o);
	assert_int_equal(exit_code(&o), 125);
	assert_non_null(strstr(o.err, "landlock: the kernel has no Landlock"));
	assert_false(file_exists(d->ws, "ran"));

	/* Protocol mode: not one byte of protocol either. */
	a.n = before_exec;
	a.v[a.n] = NULL;
	run_agent(&a, false, &o);
	assert_int_equal(exit_code(&o), 125);
	assert_int_equal(o.out_len, 0);
	assert_non_null(strstr(o.err, "landlock"));
}

/* With scopes (ABI 6) a confined program cannot signal a process outside its domain. */
static void test_signal_scope(void **state)
{
	dirs *d = *state;
	if (kernel_abi() < 6)
		skip();
	pid_t victim = fork();
	assert_true(victim >= 0);
	if (victim == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (;;)
			pause();
	}
	d->leftover = victim;
	char pid[32];
	snprintf(pid, sizeof(pid), "%d", (int)victim);
	const char *script =
	    "kill -0 \"$1\" && echo reached || echo refused; kill -0 $$ && echo self";
	outcome o;
	run_confined(d, script, pid, NULL, &o);
	assert_string_equal(o.out, "refused\nself\n");
	assert_non_null(strstr(o.err, "Operation not permitted"));
	/* Not confined, the same signal goes through (the test may run as root). */
	args a = {0};
	push_sh(&a, script);
	push(&a, pid);
	run_agent(&a, false, &o);
	assert_string_equal(o.out, "reached\nself\n");
	assert_true(th_alive(victim));
}

/* --exec, confined or not, ends as a shell would. */
static void test_exec_statuses(void **state)
{
	dirs *d = *state;
	args a = {0};
	push_sh(&a, "exit 7");
	outcome o;
	run_agent(&a, false, &o);
	assert_int_equal(exit_code(&o), 7);
	a.n = 0;
	push(&a, "--exec");
	push(&a, "no-such-program-aks");
	run_agent(&a, false, &o);
	assert_int_equal(exit_code(&o), 127);
	assert_non_null(strstr(o.err, "command not found"));
	a.n = 0;
	push(&a, "--exec");
	push(&a, "/dev/null");
	run_agent(&a, false, &o);
	assert_int_equal(exit_code(&o), 126);
	if (kernel_abi() >= 1) {
		/* A program outside the rules cannot be run: 126, not an unconfined run. */
		char prog[4200];
		snprintf(prog, sizeof(prog), "%s/prog", d->outside);
		put_file(d->outside, "prog", "#!/bin/sh\necho ran\n");
		assert_int_equal(chmod(prog, 0755), 0);
		a.n = 0;
		push_confined(&a, d);
		push(&a, "--exec");
		push(&a, prog);
		run_agent(&a, false, &o);
		assert_int_equal(exit_code(&o), 126);
		assert_string_equal(o.out, "");
	}
	/* Usage errors: 2. */
	a.n = 0;
	push(&a, "--landlock-ro");
	run_agent(&a, false, &o);
	assert_int_equal(exit_code(&o), 2);
	a.n = 0;
	push(&a, "--exec");
	run_agent(&a, false, &o);
	assert_int_equal(exit_code(&o), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_abi),
	    cmocka_unit_test_setup_teardown(test_exec_confined, setup_dirs, teardown_dirs),
	    cmocka_unit_test_setup_teardown(test_no_way_out, setup_dirs, teardown_dirs),
	    cmocka_unit_test_setup_teardown(test_file_rules, setup_dirs, teardown_dirs),
	    cmocka_unit_test_setup_teardown(test_protocol_confined, setup_dirs, teardown_dirs),
	    cmocka_unit_test_setup_teardown(test_fail_closed, setup_dirs, teardown_dirs),
	    cmocka_unit_test_setup_teardown(test_signal_scope, setup_dirs, teardown_dirs),
	    cmocka_unit_test_setup_teardown(test_exec_statuses, setup_dirs, teardown_dirs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
