/*
 * tests/integration/test_local_subprocess_proc.c - the process-control and
 * path-guard library under local_subprocess (plugins/common), tested directly
 * with real processes and a real filesystem.
 *
 * Built twice: as is, and with AKS_FSGUARD_FORCE_WALK so the component-walk
 * fallback of the path guard (kernels without openat2) is tested too.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pid_check.h"
#include <cmocka.h>

#include "aks_fsguard.h"
#include "aks_proc.h"

/* ---- helpers ------------------------------------------------------------------------ */

static char *make_tmpdir(void)
{
	const char *base = getenv("TMPDIR");
	char *t = NULL;
	assert_true(asprintf(&t, "%s/aks-proc-test-XXXXXX", base && *base ? base : "/tmp") > 0);
	assert_non_null(mkdtemp(t));
	return t;
}

static void rm_rf(const char *dir)
{
	char *cmd = NULL;
	assert_true(asprintf(&cmd, "rm -rf '%s'", dir) > 0);
	assert_int_equal(system(cmd), 0);
	free(cmd);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	char *buf = calloc(1, 65536);
	size_t n = fread(buf, 1, 65535, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

#ifndef AKS_FSGUARD_FORCE_WALK

typedef struct capture {
	char *out, *err;
	size_t out_len, err_len;
	int fail_after; /* > 0: the output callback fails on this call */
	int calls;
} capture;

static int append_out(void *ctx, int stream, const void *data, size_t len)
{
	capture *c = ctx;
	char **buf = stream == AKS_PROC_STDOUT ? &c->out : &c->err;
	size_t *n = stream == AKS_PROC_STDOUT ? &c->out_len : &c->err_len;
	if (c->fail_after && ++c->calls >= c->fail_after)
		return -42;
	/* Keep at most 1 MiB: some tests print a lot. */
	if (*n < (1u << 20)) {
		size_t take = len;
		if (*n + take > (1u << 20))
			take = (1u << 20) - *n;
		*buf = realloc(*buf, *n + take + 1);
		assert_non_null(*buf);
		memcpy(*buf + *n, data, take);
		*n += take;
		(*buf)[*n] = '\0';
	}
	return 0;
}

static void capture_free(capture *c)
{
	free(c->out);
	free(c->err);
	memset(c, 0, sizeof(*c));
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *const min_env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8",
                                      "AKS_MARK=present", NULL};

static int run_sh(const char *script, const char *cwd, int64_t timeout_ms, capture *c,
                  aks_proc_outcome *oc)
{
	const char *argv[] = {"bash", "-c", script, NULL};
	aks_proc_spec spec = {
	    .argv = argv,
	    .envp = min_env,
	    .cwd = cwd,
	    .deadline_ms = timeout_ms > 0 ? now_ms() + timeout_ms : 0,
	    .cancel_fd = -1,
	    .output = append_out,
	    .ctx = c,
	};
	return aks_proc_run(&spec, oc);
}

/* Every PID listed in `path` (one a line) must be gone. Returns the count. */
static int assert_pids_gone(const char *path, int expected)
{
	char *t = slurp(path);
	assert_non_null(t);
	int n = 0;
	for (char *line = strtok(t, "\n"); line; line = strtok(NULL, "\n")) {
		pid_t pid = (pid_t)atoi(line);
		assert_true(pid > 1);
		if (test_pid_alive(pid))
			fail_msg("pid %d (from %s) survived", (int)pid, path);
		n++;
	}
	free(t);
	assert_int_equal(n, expected);
	return n;
}

/* ---- process control ---------------------------------------------------------------- */

static void test_stdout_stderr_exit(void **state)
{
	capture c = {0};
	aks_proc_outcome oc;
	assert_int_equal(run_sh("echo out; echo err >&2; exit 3", NULL, 0, &c, &oc), 0);
	assert_int_equal(oc.end, AKS_PROC_EXITED);
	assert_true(oc.status_known);
	assert_int_equal(oc.exit_code, 3);
	assert_string_equal(c.out, "out\n");
	assert_string_equal(c.err, "err\n");
	capture_free(&c);
}

static void test_signal_exit_code(void **state)
{
	capture c = {0};
	aks_proc_outcome oc;
	assert_int_equal(run_sh("kill -TERM $$", NULL, 0, &c, &oc), 0);
	assert_int_equal(oc.exit_code, 128 + SIGTERM);
	assert_true(WIFSIGNALED(oc.wait_status));
	capture_free(&c);
}

static void test_command_not_found(void **state)
{
	const char *argv[] = {"definitely-not-a-command-aks", NULL};
	capture c = {0};
	aks_proc_spec spec = {
	    .argv = argv, .envp = min_env, .cancel_fd = -1, .output = append_out, .ctx = &c};
	aks_proc_outcome oc;
	assert_int_equal(aks_proc_run(&spec, &oc), 0);
	assert_int_equal(oc.exit_code, 127);
	assert_non_null(c.err);
	assert_non_null(strstr(c.err, "definitely-not-a-command-aks"));
	assert_non_null(strstr(c.err, "command not found"));
	capture_free(&c);
}

static void test_exact_env_cwd_stdin_fds(void **state)
{
	char *dir = make_tmpdir();
	/* A descriptor the test leaks on purpose (no O_CLOEXEC). */
	int leak = open("/dev/null", O_RDONLY);
	assert_true(leak >= 0);
	capture c = {0};
	aks_proc_outcome oc;
	assert_int_equal(run_sh("env | grep -v '^_=' | grep -v '^SHLVL=' | grep -v '^PWD=' | "
	                        "grep -v '^OLDPWD=' | sort; "
	                        "echo cwd=$(/bin/pwd); "
	                        "echo stdin=$(cat | wc -c); "
	                        /* the shell's own descriptors, listed from a
	                         * plain command (no pipe held by the shell) */
	                        "ls /proc/$$/fd > fds.txt; "
	                        "echo fds=$(sort -n fds.txt | tr '\\n' ' ')",
	                        dir, 0, &c, &oc),
	                 0);
	assert_int_equal(oc.exit_code, 0);
	char *expect = NULL;
	assert_true(asprintf(&expect,
	                     "AKS_MARK=present\nLANG=C.UTF-8\nPATH=/usr/local/bin:/usr/bin:/bin\n"
	                     "cwd=%s\nstdin=0\nfds=0 1 2\n",
	                     dir) > 0);
	assert_string_equal(c.out, expect);
	free(expect);
	close(leak);
	capture_free(&c);
	rm_rf(dir);
	free(dir);
}

/* The supervisor must not leave the host a subreaper or change its signals. */
static void test_host_untouched(void **state)
{
	int before = -1, after = -1;
	assert_int_equal(prctl(PR_GET_CHILD_SUBREAPER, &before, 0, 0, 0), 0);
	capture c = {0};
	aks_proc_outcome oc;
	assert_int_equal(run_sh("true", NULL, 0, &c, &oc), 0);
	assert_int_equal(prctl(PR_GET_CHILD_SUBREAPER, &after, 0, 0, 0), 0);
	assert_int_equal(before, 0);
	assert_int_equal(after, 0);
	/* The supervisor was reaped: no child of ours is left. */
	assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
	capture_free(&c);
}

static const char tree_script[] =
    /* a process in its own session */
    "setsid bash -c 'echo $$ >> pids; exec sleep 1000' & "
    /* a double-forked daemon: its parent exits, it is orphaned */
    "( bash -c 'echo $$ >> pids; exec sleep 1000' & ) ; "
    /* one that changes process group */
    "python3 -c 'import os,time; os.setpgid(0,0); open(\"pids\",\"a\").write(\"%d\\n\" % "
    "os.getpid()); time.sleep(1000)' & "
    /* a classic daemon: fork, setsid, fork */
    "python3 -c 'import os,time\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    if os.fork() == 0:\n"
    "        open(\"pids\",\"a\").write(\"%d\\n\" % os.getpid()); time.sleep(1000)\n"
    "    os._exit(0)\n"
    "' ; "
    "echo $$ >> pids; "
    /* every PID must be on file before the test looks (bounded wait) */
    "for i in $(seq 400); do [ $(wc -l < pids) -ge 5 ] && break; sleep 0.025; done; ";

static void test_timeout_kills_tree(void **state)
{
	char *dir = make_tmpdir();
	char *pids = NULL;
	assert_true(asprintf(&pids, "%s/pids", dir) > 0);
	char *script = NULL;
	assert_true(asprintf(&script, "%s echo started; exec sleep 1000", tree_script) > 0);
	capture c = {0};
	aks_proc_outcome oc;
	int64_t t0 = now_ms();
	assert_int_equal(run_sh(script, dir, 2000, &c, &oc), 0);
	int64_t took = now_ms() - t0;
	assert_int_equal(oc.end, AKS_PROC_TIMED_OUT);
	assert_int_equal(oc.exit_code, 128 + SIGKILL);
	assert_true(took >= 2000);
	assert_true(took < 4000);
	assert_string_equal(c.out, "started\n"); /* output before the kill is kept */
	assert_pids_gone(pids, 5);
	free(script);
	free(pids);
	capture_free(&c);
	rm_rf(dir);
	free(dir);
}

static void test_exit_kills_leftovers(void **state)
{
	char *dir = make_tmpdir();
	char *pids = NULL;
	assert_true(asprintf(&pids, "%s/pids", dir) > 0);
	char *script = NULL;
	/* Background jobs that would hold stdout open: the call must still end
	 * at once, and none of them may survive. */
	assert_true(asprintf(&script, "%s sleep 1000 & echo $! >> pids; echo done", tree_script) >
	            0); /* $! is on file before the script ends */
	capture c = {0};
	aks_proc_outcome oc;
	int64_t t0 = now_ms();
	assert_int_equal(run_sh(script, dir, 20000, &c, &oc), 0);
	assert_true(now_ms() - t0 < 10000);
	assert_int_equal(oc.end, AKS_PROC_EXITED);
	assert_int_equal(oc.exit_code, 0);
	assert_string_equal(c.out, "done\n");
	assert_pids_gone(pids, 6);
	free(script);
	free(pids);
	capture_free(&c);
	rm_rf(dir);
	free(dir);
}

typedef struct canceller {
	int fd;
	int delay_ms;
} canceller;

static void *cancel_later(void *arg)
{
	canceller *k = arg;
	usleep((useconds_t)k->delay_ms * 1000);
	uint64_t one = 1;
	assert_int_equal(write(k->fd, &one, sizeof(one)), sizeof(one));
	return NULL;
}

static void test_cancel_fd(void **state)
{
	char *dir = make_tmpdir();
	char *pids = NULL;
	assert_true(asprintf(&pids, "%s/pids", dir) > 0);
	char *script = NULL;
	assert_true(asprintf(&script, "%s echo ready; exec sleep 1000", tree_script) > 0);
	int efd = eventfd(0, EFD_CLOEXEC);
	assert_true(efd >= 0);
	canceller k = {efd, 1500};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, cancel_later, &k), 0);
	const char *argv[] = {"bash", "-c", script, NULL};
	capture c = {0};
	aks_proc_spec spec = {.argv = argv,
	                      .envp = min_env,
	                      .cwd = dir,
	                      .cancel_fd = efd,
	                      .output = append_out,
	                      .ctx = &c};
	aks_proc_outcome oc;
	int64_t t0 = now_ms();
	assert_int_equal(aks_proc_run(&spec, &oc), 0);
	assert_true(now_ms() - t0 < 5000);
	pthread_join(th, NULL);
	assert_int_equal(oc.end, AKS_PROC_CANCELLED);
	assert_string_equal(c.out, "ready\n");
	assert_pids_gone(pids, 5);
	close(efd);
	free(script);
	free(pids);
	capture_free(&c);
	rm_rf(dir);
	free(dir);
}

static void test_output_abort_kills(void **state)
{
	capture c = {0};
	c.fail_after = 3;
	aks_proc_outcome oc;
	int64_t t0 = now_ms();
	assert_int_equal(run_sh("yes", NULL, 30000, &c, &oc), 0);
	assert_true(now_ms() - t0 < 10000);
	assert_int_equal(oc.end, AKS_PROC_ABORTED);
	assert_int_equal(oc.abort_code, -42);
	capture_free(&c);
}

/* Lots of output: drained completely and in order, no deadlock. */
static void test_large_output(void **state)
{
	capture c = {0};
	aks_proc_outcome oc;
	assert_int_equal(run_sh("head -c 20000000 /dev/zero; echo tail >&2", NULL, 60000, &c, &oc),
	                 0);
	assert_int_equal(oc.exit_code, 0);
	assert_int_equal(c.out_len, 1u << 20); /* kept by the test's own cap */
	assert_string_equal(c.err, "tail\n");
	capture_free(&c);
}

/* With SIGCHLD ignored in the host (children auto-reaped), statuses still
 * come through. */
static void test_host_ignores_sigchld(void **state)
{
	struct sigaction ign = {0}, old;
	ign.sa_handler = SIG_IGN;
	assert_int_equal(sigaction(SIGCHLD, &ign, &old), 0);
	capture c = {0};
	aks_proc_outcome oc;
	int rc = run_sh("sleep 0.2 & exit 7", NULL, 10000, &c, &oc);
	sigaction(SIGCHLD, &old, NULL);
	assert_int_equal(rc, 0);
	assert_int_equal(oc.exit_code, 7);
	capture_free(&c);
}

/* A program that SIGKILLs its own supervisor: the caller notices (EOF on the
 * control socket), kills the program's process group itself and returns
 * promptly with the status unknown. */
static void test_supervisor_killed(void **state)
{
	char *dir = make_tmpdir();
	capture c = {0};
	aks_proc_outcome oc;
	int64_t t0 = now_ms();
	assert_int_equal(
	    run_sh("echo $$ > pid; kill -KILL $PPID; exec sleep 1000", dir, 0, &c, &oc), 0);
	assert_true(now_ms() - t0 < 5000);
	assert_int_equal(oc.end, AKS_PROC_EXITED);
	assert_false(oc.status_known);
	assert_int_equal(oc.exit_code, -1);
	/* Orphaned to init once the supervisor died, the killed program is
	 * reaped by init, not by us: allow it a moment. */
	char *pidfile = NULL;
	assert_true(asprintf(&pidfile, "%s/pid", dir) > 0);
	char *t = slurp(pidfile);
	assert_non_null(t);
	pid_t pid = (pid_t)atoi(t);
	free(t);
	assert_true(pid > 1);
	for (int i = 0; i < 1000 && test_pid_alive(pid); i++)
		usleep(10000);
	if (test_pid_alive(pid)) {
		char path[64], stat[512] = "";
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		FILE *f = fopen(path, "r");
		if (f) {
			size_t n = fread(stat, 1, sizeof(stat) - 1, f);
			stat[n] = '\0';
			fclose(f);
		}
		fail_msg("pid %d still runs: %s", (int)pid, stat);
	}
	free(pidfile);
	capture_free(&c);
	rm_rf(dir);
	free(dir);
}

/* The host process dies mid-run (SIGKILL, no cleanup of its own): the
 * supervisor sees EOF on the control socket and kills the whole tree, then
 * exits itself. */
static void test_host_death_kills_tree(void **state)
{
	char *dir = make_tmpdir();
	char *pids = NULL, *sup = NULL, *script = NULL;
	assert_true(asprintf(&pids, "%s/pids", dir) > 0);
	assert_true(asprintf(&sup, "%s/sup", dir) > 0);
	assert_true(asprintf(&script, "echo $PPID > sup; %s exec sleep 1000", tree_script) > 0);
	pid_t host = fork();
	assert_true(host >= 0);
	if (host == 0) {
		/* the doomed host: runs the tree with no deadline */
		capture c = {0};
		aks_proc_outcome oc;
		run_sh(script, dir, 0, &c, &oc);
		_exit(0);
	}
	/* wait until the tree is up and on file */
	int lines = 0;
	for (int i = 0; i < 1000 && lines < 5; i++) {
		usleep(10000);
		char *t = slurp(pids);
		lines = 0;
		for (char *p = t; p && *p; p++)
			lines += *p == '\n';
		free(t);
	}
	assert_int_equal(lines, 5);
	char *t = slurp(sup);
	assert_non_null(t);
	pid_t sup_pid = (pid_t)atoi(t);
	free(t);
	assert_true(sup_pid > 1);
	assert_true(test_pid_alive(sup_pid));

	assert_int_equal(kill(host, SIGKILL), 0);
	assert_int_equal(waitpid(host, NULL, 0), host);
	/* the supervisor (now init's child) cleans up and exits */
	for (int i = 0; i < 500 && test_pid_alive(sup_pid); i++)
		usleep(10000);
	assert_false(test_pid_alive(sup_pid));
	assert_pids_gone(pids, 5);
	free(script);
	free(sup);
	free(pids);
	rm_rf(dir);
	free(dir);
}

typedef struct par_job {
	const char *script;
	int64_t took;
	int exit_code;
	char *out;
} par_job;

static void *par_run(void *arg)
{
	par_job *j = arg;
	capture c = {0};
	aks_proc_outcome oc;
	int64_t t0 = now_ms();
	if (run_sh(j->script, NULL, 20000, &c, &oc) == 0)
		j->exit_code = oc.exit_code;
	j->took = now_ms() - t0;
	j->out = c.out;
	free(c.err);
	return NULL;
}

/* Concurrent executions from several threads: a quick one must not wait for
 * a slow one (no descriptor of one run may leak into another's processes). */
static void test_concurrent_runs(void **state)
{
	enum { N = 8 };
	par_job jobs[N];
	pthread_t th[N];
	for (int i = 0; i < N; i++) {
		memset(&jobs[i], 0, sizeof(jobs[i]));
		jobs[i].exit_code = -1;
		jobs[i].script = i == 0 ? "sleep 3; echo slow" : "echo quick";
	}
	for (int i = 0; i < N; i++)
		assert_int_equal(pthread_create(&th[i], NULL, par_run, &jobs[i]), 0);
	for (int i = 0; i < N; i++)
		pthread_join(th[i], NULL);
	assert_string_equal(jobs[0].out, "slow\n");
	for (int i = 1; i < N; i++) {
		assert_int_equal(jobs[i].exit_code, 0);
		assert_string_equal(jobs[i].out, "quick\n");
		assert_true(jobs[i].took < 2500);
	}
	for (int i = 0; i < N; i++)
		free(jobs[i].out);
}

#endif /* !AKS_FSGUARD_FORCE_WALK */

/* ---- path guard ---------------------------------------------------------------------- */

typedef struct fsfix {
	char *root;    /* the workspace */
	char *outside; /* a sibling directory */
} fsfix;

static int fs_setup(void **state)
{
	fsfix *f = calloc(1, sizeof(*f));
	f->root = make_tmpdir();
	f->outside = make_tmpdir();
	char *p = NULL;
	assert_true(asprintf(&p, "%s/secret", f->outside) > 0);
	write_file(p, "outside\n");
	free(p);
	*state = f;
	return 0;
}

static int fs_teardown(void **state)
{
	fsfix *f = *state;
	rm_rf(f->root);
	rm_rf(f->outside);
	free(f->root);
	free(f->outside);
	free(f);
	return 0;
}

static void in_root(fsfix *f, const char *rel, char *out, size_t cap)
{
	snprintf(out, cap, "%s/%s", f->root, rel);
}

static void expect_rel(fsfix *f, const char *path, const char *want)
{
	char *rel = NULL;
	int rc = aks_fs_resolve(f->root, path, &rel);
	if (rc != 0)
		fail_msg("resolve('%s') = %d, want '%s'", path, rc, want);
	assert_string_equal(rel, want);
	free(rel);
}

static void expect_err(fsfix *f, const char *path, int want)
{
	char *rel = NULL;
	int rc = aks_fs_resolve(f->root, path, &rel);
	if (rc != want)
		fail_msg("resolve('%s') = %d ('%s'), want %d", path, rc, rel ? rel : "", want);
	assert_null(rel);
}

static void make_links(fsfix *f)
{
	char p[4096], t[4096];
	in_root(f, "real", p, sizeof(p));
	assert_int_equal(mkdir(p, 0700), 0);
	in_root(f, "alias", p, sizeof(p));
	assert_int_equal(symlink("real", p), 0); /* relative, inside */
	in_root(f, "to_etc", p, sizeof(p));
	assert_int_equal(symlink("/etc", p), 0);
	in_root(f, "to_outside", p, sizeof(p));
	assert_int_equal(symlink(f->outside, p), 0);
	in_root(f, "up", p, sizeof(p));
	assert_int_equal(symlink("../", p), 0);
	in_root(f, "loop1", p, sizeof(p));
	assert_int_equal(symlink("loop2", p), 0);
	in_root(f, "loop2", p, sizeof(p));
	assert_int_equal(symlink("loop1", p), 0);
	snprintf(t, sizeof(t), "%s/real", f->root);
	in_root(f, "abs_inside", p, sizeof(p));
	assert_int_equal(symlink(t, p), 0); /* absolute, but inside */
}

static void test_resolve_inside(void **state)
{
	fsfix *f = *state;
	make_links(f);
	expect_rel(f, "a.txt", "a.txt");
	expect_rel(f, "/a.txt", "a.txt");
	expect_rel(f, "///etc/passwd", "etc/passwd"); /* absolute paths map inside */
	expect_rel(f, "x/../y/./z", "y/z");
	expect_rel(f, "", "");
	expect_rel(f, "/", "");
	expect_rel(f, "alias/f", "real/f");
	expect_rel(f, "abs_inside/f", "real/f");
	expect_rel(f, "real/../a", "a");
	expect_rel(f, "missing/../real/x", "real/x");
	expect_rel(f, "alias/../alias", "real");
}

static void test_resolve_escapes(void **state)
{
	fsfix *f = *state;
	make_links(f);
	expect_err(f, "..", -EXDEV);
	expect_err(f, "../x", -EXDEV);
	expect_err(f, "a/../../x", -EXDEV);
	expect_err(f, "/../../etc/passwd", -EXDEV);
	expect_err(f, "to_etc", -EXDEV);
	expect_err(f, "to_etc/passwd", -EXDEV);
	expect_err(f, "to_outside/secret", -EXDEV);
	expect_err(f, "real/../to_outside/new/file", -EXDEV);
	expect_err(f, "up/x", -EXDEV);
	expect_err(f, "loop1", -ELOOP);
	char *rel = NULL;
	assert_int_equal(aks_fs_resolve("/nonexistent-aks-root", "x", &rel), -ENOENT);
	assert_null(rel);
}

static int open_root(fsfix *f)
{
	int fd = open(f->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	return fd;
}

/* Resolution and open are two steps; a symlink swapped in between (a
 * directory or the file itself) must make the open fail, never escape. */
static void test_open_beneath_race(void **state)
{
	fsfix *f = *state;
	char p[4096], q[4096];
	in_root(f, "sub", p, sizeof(p));
	assert_int_equal(mkdir(p, 0700), 0);
	in_root(f, "sub/secret", p, sizeof(p));
	write_file(p, "inside\n");
	in_root(f, "file", p, sizeof(p));
	write_file(p, "inside\n");

	char *rel_dir = NULL, *rel_file = NULL;
	assert_int_equal(aks_fs_resolve(f->root, "sub/secret", &rel_dir), 0);
	assert_int_equal(aks_fs_resolve(f->root, "file", &rel_file), 0);
	int rootfd = open_root(f);
	int fd = aks_fs_open_beneath(rootfd, rel_dir, O_RDONLY, 0);
	assert_true(fd >= 0);
	close(fd);

	/* The race: swap in symlinks pointing outside. */
	in_root(f, "sub", p, sizeof(p));
	in_root(f, "sub.old", q, sizeof(q));
	assert_int_equal(rename(p, q), 0);
	assert_int_equal(symlink(f->outside, p), 0);
	in_root(f, "file", p, sizeof(p));
	assert_int_equal(unlink(p), 0);
	snprintf(q, sizeof(q), "%s/secret", f->outside);
	assert_int_equal(symlink(q, p), 0);

	assert_int_equal(aks_fs_open_beneath(rootfd, rel_dir, O_RDONLY, 0), -ELOOP);
	assert_int_equal(aks_fs_open_beneath(rootfd, rel_file, O_RDONLY, 0), -ELOOP);
	assert_int_equal(aks_fs_open_beneath(rootfd, "missing", O_RDONLY, 0), -ENOENT);
	/* "" is the root itself */
	fd = aks_fs_open_beneath(rootfd, "", O_RDONLY, 0);
	assert_true(fd >= 0);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	close(fd);
	close(rootfd);
	free(rel_dir);
	free(rel_file);
}

static void test_mkdirs_beneath(void **state)
{
	fsfix *f = *state;
	char p[4096];
	int rootfd = open_root(f);
	int dfd = aks_fs_mkdirs_beneath(rootfd, "a/b/c", 0777);
	assert_true(dfd >= 0);
	close(dfd);
	struct stat st;
	in_root(f, "a/b/c", p, sizeof(p));
	assert_int_equal(stat(p, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	/* again: existing directories are fine */
	dfd = aks_fs_mkdirs_beneath(rootfd, "a/b/c", 0777);
	assert_true(dfd >= 0);
	close(dfd);
	/* a symlinked parent is refused, and nothing is created outside */
	in_root(f, "link", p, sizeof(p));
	assert_int_equal(symlink(f->outside, p), 0);
	assert_int_equal(aks_fs_mkdirs_beneath(rootfd, "link/new", 0777), -ELOOP);
	snprintf(p, sizeof(p), "%s/new", f->outside);
	assert_int_equal(stat(p, &st), -1);
	/* a file in the way */
	in_root(f, "plain", p, sizeof(p));
	write_file(p, "x");
	assert_int_equal(aks_fs_mkdirs_beneath(rootfd, "plain/sub", 0777), -ENOTDIR);
	close(rootfd);
}

static void test_write_atomic(void **state)
{
	fsfix *f = *state;
	char p[4096], q[4096];
	int rootfd = open_root(f);
	assert_int_equal(aks_fs_write_atomic(rootfd, "new.bin", "a\0b", 3, 0666), 0);
	in_root(f, "new.bin", p, sizeof(p));
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_size, 3);
	/* overwrite */
	assert_int_equal(aks_fs_write_atomic(rootfd, "new.bin", "hello", 5, 0666), 0);
	char *t = slurp(p);
	assert_string_equal(t, "hello");
	free(t);
	/* a symlink at the name is replaced, not followed */
	in_root(f, "t", p, sizeof(p));
	snprintf(q, sizeof(q), "%s/secret", f->outside);
	assert_int_equal(symlink(q, p), 0);
	assert_int_equal(aks_fs_write_atomic(rootfd, "t", "mine", 4, 0666), 0);
	t = slurp(q);
	assert_string_equal(t, "outside\n");
	free(t);
	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	/* a directory at the name is an error, and leaves no temporary file */
	in_root(f, "d", p, sizeof(p));
	assert_int_equal(mkdir(p, 0700), 0);
	assert_int_equal(aks_fs_write_atomic(rootfd, "d", "x", 1, 0666), -EISDIR);
	close(rootfd);
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "test \"$(ls -A '%s' | sort | tr '\\n' ' ')\" = 'd new.bin t '",
	         f->root);
	assert_int_equal(system(cmd), 0);
}

static void test_remove_tree(void **state)
{
	fsfix *f = *state;
	char p[4096], cmd[8400];
	snprintf(cmd, sizeof(cmd),
	         "set -e; cd '%s'; mkdir -p t/a/b/c t/e; echo 1 > t/a/b/c/f; echo 2 > t/f; "
	         "ln -s '%s' t/a/out; ln -s '%s/secret' t/e/sec; mkfifo t/fifo; "
	         "chmod 000 t/e; for i in $(seq 1 300); do touch t/a/n$i; done",
	         f->root, f->outside, f->outside);
	assert_int_equal(system(cmd), 0);
	in_root(f, "t", p, sizeof(p));
	assert_int_equal(aks_fs_remove_tree(p), 0);
	struct stat st;
	assert_int_equal(lstat(p, &st), -1);
	assert_int_equal(errno, ENOENT);
	snprintf(p, sizeof(p), "%s/secret", f->outside);
	assert_int_equal(stat(p, &st), 0); /* the symlinks' targets survive */
	/* not a directory, or a symlink to one: refused */
	in_root(f, "l", p, sizeof(p));
	assert_int_equal(symlink(f->outside, p), 0);
	assert_true(aks_fs_remove_tree(p) < 0);
	snprintf(p, sizeof(p), "%s/secret", f->outside);
	assert_int_equal(stat(p, &st), 0);
}

static void test_mkdir_p(void **state)
{
	fsfix *f = *state;
	char p[4096];
	in_root(f, "x/y/z", p, sizeof(p));
	assert_int_equal(aks_fs_mkdir_p(p, 0777), 0);
	assert_int_equal(aks_fs_mkdir_p(p, 0777), 0);
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	in_root(f, "file", p, sizeof(p));
	write_file(p, "x");
	in_root(f, "file/sub", p, sizeof(p));
	assert_true(aks_fs_mkdir_p(p, 0777) < 0);
}

#define FS_TEST(t) cmocka_unit_test_setup_teardown(t, fs_setup, fs_teardown)

static const struct CMUnitTest tests[] = {
#ifndef AKS_FSGUARD_FORCE_WALK
    cmocka_unit_test(test_stdout_stderr_exit),
    cmocka_unit_test(test_signal_exit_code),
    cmocka_unit_test(test_command_not_found),
    cmocka_unit_test(test_exact_env_cwd_stdin_fds),
    cmocka_unit_test(test_host_untouched),
    cmocka_unit_test(test_timeout_kills_tree),
    cmocka_unit_test(test_exit_kills_leftovers),
    cmocka_unit_test(test_cancel_fd),
    cmocka_unit_test(test_output_abort_kills),
    cmocka_unit_test(test_large_output),
    cmocka_unit_test(test_host_ignores_sigchld),
    cmocka_unit_test(test_concurrent_runs),
    cmocka_unit_test(test_supervisor_killed),
    cmocka_unit_test(test_host_death_kills_tree),
#endif
    FS_TEST(test_resolve_inside),
    FS_TEST(test_resolve_escapes),
    FS_TEST(test_open_beneath_race),
    FS_TEST(test_mkdirs_beneath),
    FS_TEST(test_write_atomic),
    FS_TEST(test_remove_tree),
    FS_TEST(test_mkdir_p),
};

int main(void)
{
	return cmocka_run_group_tests(tests, NULL, NULL);
}
