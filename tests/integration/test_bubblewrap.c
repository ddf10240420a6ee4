/*
 * tests/integration/test_bubblewrap.c - the bubblewrap provider end to end, through the real
 * core API (aksandbox.h), with real bwrap, cgroups and kernel: the escape tests. Each test is
 * written as an attacker inside the sandbox would try, and most have a control that shows the
 * same probe succeeds where the policy allows it, so a pass cannot come from a broken probe.
 *
 * Built twice: test_bubblewrap (every operation through the build's aksandbox-agent, with
 * Landlock) and test_bubblewrap_percall (agent: false, landlock: off: one bwrap per call).
 * bubblewrap-unprivileged.test runs both again as an unprivileged user (user namespaces, no
 * cgroups on a v1 host: the resource tests then prove the limits are refused, not dropped).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <aksandbox/aksandbox.h>

#ifndef BW_TEST_AGENT
#define BW_TEST_AGENT "false"
#endif

/* The agent: the build's, or a copy of it (AKS_BW_TEST_AGENT: bubblewrap-unprivileged.test
 * runs these tests as a user who may not reach the build tree). */
static const char *test_agent(void)
{
	const char *copy = getenv("AKS_BW_TEST_AGENT");
	return strcmp(BW_TEST_AGENT, "false") != 0 && copy && *copy ? copy : BW_TEST_AGENT;
}

static bool with_agent(void)
{
	return strcmp(BW_TEST_AGENT, "false") != 0;
}

/* ---- fixture -------------------------------------------------------------------------------- */

typedef struct fixture {
	const aks_plugin *plugin;
	char *base;  /* private temporary directory of the test */
	char *plant; /* base/plant: a directory of this host no policy names */
	aks_config *config;
	aks_provider *prov;
	aks_sandbox *sb;
} fixture;

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	int n = vasprintf(&s, fmt, ap);
	va_end(ap);
	assert_true(n >= 0);
	return s;
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static void check_ok(int rc, aks_error *err)
{
	if (rc != AKS_OK)
		fail_msg("expected AKS_OK, got %d: %s", rc,
		         err ? aks_error_message(err) : "(no error)");
}

/* A provider instance with the test's config block (extra: more keys, indented 4). */
static aks_provider *open_provider(fixture *f, const char *extra)
{
	char *yaml = xasprintf("%s/config.yaml", f->base);
	char *text = xasprintf("sandbox:\n  enabled: true\n  type: bubblewrap\n  bubblewrap:\n"
	                       "    workdir: %s/work\n    agent: %s\n    landlock: %s\n%s",
	                       f->base, test_agent(), with_agent() ? "required" : "'off'",
	                       extra ? extra : "");
	write_text(yaml, text);
	free(text);
	aks_error *err = NULL;
	aks_config_free(f->config);
	f->config = NULL;
	check_ok(aks_config_load_block(f->plugin, yaml, &f->config, &err), err);
	free(yaml);
	aks_provider *prov = NULL;
	check_ok(aks_provider_open(f->plugin, f->config, &prov, &err), err);
	return prov;
}

/* A sandbox under policy (NULL: the default one). */
static aks_sandbox *create(fixture *f, const aks_policy *policy)
{
	aks_call call;
	aks_call_init(&call, 30, policy, NULL, NULL);
	aks_error *err = NULL;
	aks_sandbox *sb = NULL;
	check_ok(aks_provider_create(f->prov, &call, &sb, &err), err);
	return sb;
}

static void destroy(fixture *f, aks_sandbox *sb)
{
	char *id = strdup(aks_sandbox_get_id(sb));
	aks_sandbox_close(sb);
	aks_call call;
	aks_call_init(&call, 30, NULL, NULL, NULL);
	aks_error *err = NULL;
	check_ok(aks_provider_destroy(f->prov, id, &call, &err), err);
	free(id);
}

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	aks_error *err = NULL;
	if (aks_plugin_load("bubblewrap", AKS_PLUGIN_PROVIDER, &f->plugin, &err) != AKS_OK)
		fail_msg("cannot load bubblewrap (AKS_PLUGIN_PATH=%s): %s",
		         getenv("AKS_PLUGIN_PATH"), err ? aks_error_message(err) : "?");
	const char *tmp = getenv("TMPDIR");
	f->base = xasprintf("%s/aks-bw-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	assert_non_null(mkdtemp(f->base));
	char *real = realpath(f->base, NULL);
	free(f->base);
	f->base = real;
	f->plant = xasprintf("%s/plant", f->base);
	assert_int_equal(mkdir(f->plant, 0755), 0);
	char *secret = xasprintf("%s/secret.txt", f->plant);
	write_text(secret, "host-secret-4711\n");
	free(secret);
	f->prov = open_provider(f, NULL);
	f->sb = create(f, NULL);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;
	if (f->sb)
		destroy(f, f->sb);
	aks_provider_close(f->prov);
	aks_config_free(f->config);
	char *cmd = xasprintf("rm -rf '%s'", f->base);
	if (system(cmd) != 0)
		fprintf(stderr, "# could not remove %s\n", f->base);
	free(cmd);
	free(f->plant);
	free(f->base);
	free(f);
	return 0;
}

/* Runs a shell command (or python code) in sb with a timeout; the result, never NULL. */
static aks_result *run_in(aks_sandbox *sb, const char *language, const char *code, double timeout,
                          int *rc)
{
	aks_call call;
	aks_call_init(&call, timeout, NULL, NULL, NULL);
	aks_result *res = NULL;
	aks_error *err = NULL;
	*rc = language ? aks_sandbox_execute_code(sb, code, language, &call, &res, &err)
	               : aks_sandbox_execute_command(sb, code, &call, &res, &err);
	if (!res)
		fail_msg("no result (%d): %s", *rc, err ? aks_error_message(err) : "?");
	aks_error_free(err);
	return res;
}

/* stdout of a shell command that must succeed. */
static char *sh_out(aks_sandbox *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *sh_out(aks_sandbox *sb, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *cmd = NULL;
	assert_true(vasprintf(&cmd, fmt, ap) >= 0);
	va_end(ap);
	int rc;
	aks_result *r = run_in(sb, NULL, cmd, 30, &rc);
	if (rc != AKS_OK || aks_result_get_exit_code(r) != 0)
		fail_msg("'%s' failed (%d, exit %d): %s", cmd, rc, aks_result_get_exit_code(r),
		         aks_result_get_stderr(r, NULL));
	char *out = strdup(aks_result_get_stdout(r, NULL));
	aks_result_free(r);
	free(cmd);
	return out;
}

/* stdout of python code that must succeed. */
static char *py_out(aks_sandbox *sb, const char *code)
{
	int rc;
	aks_result *r = run_in(sb, "python", code, 30, &rc);
	if (rc != AKS_OK || aks_result_get_exit_code(r) != 0)
		fail_msg("python failed (%d, exit %d): %s\n%s", rc, aks_result_get_exit_code(r),
		         aks_result_get_stderr(r, NULL), code);
	char *out = strdup(aks_result_get_stdout(r, NULL));
	aks_result_free(r);
	return out;
}

static void expect_out(char *out, const char *want)
{
	if (strcmp(out, want) != 0)
		fail_msg("expected '%s', got '%s'", want, out);
	free(out);
}

/* ---- the basics ---------------------------------------------------------------------------- */

static void t_runs(void **state)
{
	fixture *f = *state;
	expect_out(sh_out(f->sb, "echo $HOME $PWD; pwd; echo hi > f.txt; cat f.txt"),
	           "/workspace /workspace\n/workspace\nhi\n");
	expect_out(py_out(f->sb, "print(6 * 7)"), "42\n");
	/* stateful through the agent only */
	free(py_out(f->sb, "kept = 41"));
	int rc;
	aks_result *r = run_in(f->sb, "python", "print(kept + 1)", 30, &rc);
	if (with_agent())
		assert_string_equal(aks_result_get_stdout(r, NULL), "42\n");
	else
		assert_int_not_equal(aks_result_get_exit_code(r), 0);
	aks_result_free(r);
	/* the file landed in the workspace directory on this host */
	char *path = xasprintf("%s/f.txt", aks_sandbox_get_id(f->sb));
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	free(path);
}

/* No capabilities, no new privileges, the seccomp filter on, and no way back. */
static void t_privileges(void **state)
{
	fixture *f = *state;
	expect_out(sh_out(f->sb, "grep -E '^(CapEff|CapPrm|CapBnd|CapAmb|NoNewPrivs|Seccomp):' "
	                         "/proc/self/status | tr -s '\\t ' ' '"),
	           "CapPrm: 0000000000000000\nCapEff: 0000000000000000\n"
	           "CapBnd: 0000000000000000\nCapAmb: 0000000000000000\nNoNewPrivs: 1\n"
	           "Seccomp: 2\n");
}

/* The host's environment (where secrets live) is not the sandbox's. */
static void t_environment(void **state)
{
	fixture *f = *state;
	setenv("AKS_BW_TEST_SECRET", "hunter2-env", 1);
	aks_sandbox *sb = create(f, NULL);
	char *out = sh_out(sb, "env; cat /proc/1/environ | tr '\\0' '\\n'; "
	                       "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'");
	assert_null(strstr(out, "hunter2-env"));
	assert_non_null(strstr(out, "PATH=/usr/local/bin:/usr/bin:/bin"));
	free(out);
	destroy(f, sb);
	unsetenv("AKS_BW_TEST_SECRET");
}

/* ---- the filesystem ----------------------------------------------------------------------- */

/* Python that prints, for each "r:PATH" (read the file) or "w:DIR" (create a file in it),
 * R, W or - when it could not. */
static char *probe_code(const char *probes)
{
	return xasprintf("import os\n"
	                 "def r(p):\n"
	                 "    try:\n"
	                 "        open(p).read(); return 'R'\n"
	                 "    except OSError: return '-'\n"
	                 "def w(d):\n"
	                 "    p = os.path.join(d, '.aks-bw-%%d' %% os.getpid())\n"
	                 "    try:\n"
	                 "        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)\n"
	                 "    except OSError: return '-'\n"
	                 "    os.close(fd); os.unlink(p); return 'W'\n"
	                 "print(' '.join((r if p[0] == 'r' else w)(p[2:]) for p in %s))\n",
	                 probes);
}

static void t_host_files_hidden(void **state)
{
	fixture *f = *state;
	const char *src = getenv("AKS_TEST_SRCDIR");
	assert_non_null(src);
	/* Reads: /etc/shadow, the repository, a planted file, root's home; writes: the system's
	 * own places, the planted directory, the workspace's directory on this host. */
	char *paths = xasprintf("['r:/etc/shadow', 'r:%s/README.md', 'r:%s/secret.txt', "
	                        "'r:/root/.bashrc', 'w:/', 'w:/etc', 'w:/usr', 'w:/usr/local', "
	                        "'w:/var', 'w:%s', 'w:%s', 'w:/proc/1']",
	                        src, f->plant, f->plant, aks_sandbox_get_id(f->sb));
	char *code = probe_code(paths);
	expect_out(py_out(f->sb, code), "- - - - - - - - - - - -\n");
	/* the control: this host sees and writes them (so the probe works) */
	char *host = xasprintf("test -r '%s/README.md' && test -r '%s/secret.txt' && "
	                       "test -w '%s'",
	                       src, f->plant, f->plant);
	assert_int_equal(system(host), 0);
	free(host);
	/* and the workspace and /tmp are writable by default */
	free(code);
	code = probe_code("['w:/workspace', 'w:/tmp', 'w:/dev/shm']");
	expect_out(py_out(f->sb, code), "W W W\n");
	free(code);
	free(paths);
}

/* fs_allow_read shows a host path read-only, fs_allow_write read-write, at its own path; with
 * fs_allow_write, nothing else is writable (not even the sandbox's own /tmp, unless listed). */
static void t_fs_policy(void **state)
{
	fixture *f = *state;
	char *other = xasprintf("%s/shared", f->base);
	assert_int_equal(mkdir(other, 0777), 0);
	const char *rd[] = {f->plant, NULL};
	const char *wr[] = {"/workspace", other, NULL};
	aks_policy p;
	aks_policy_init(&p);
	p.fs_allow_read = rd;
	p.fs_allow_write = wr;
	aks_sandbox *sb = create(f, &p);
	char *paths = xasprintf("['r:%s/secret.txt', 'w:%s', 'w:%s', 'w:/workspace', 'w:/tmp', "
	                        "'w:/dev/shm', 'w:/']",
	                        f->plant, f->plant, other);
	char *code = probe_code(paths);
	expect_out(py_out(sb, code), "R - W W - - -\n");
	/* a file written there is on this host */
	free(sh_out(sb, "echo from-sandbox > '%s/out.txt'", other));
	char *out = xasprintf("%s/out.txt", other);
	struct stat st;
	assert_int_equal(stat(out, &st), 0);
	free(out);
	/* TMPDIR follows: the sandbox's /tmp is read-only here */
	expect_out(sh_out(sb, "echo $TMPDIR"), "/workspace\n");
	destroy(f, sb);
	/* /tmp listed: the sandbox's own /tmp is writable again (never the host's) */
	const char *wr_tmp[] = {"/workspace", "/tmp", NULL};
	p.fs_allow_write = wr_tmp;
	p.fs_allow_read = NULL;
	sb = create(f, &p);
	free(code);
	code = probe_code("['w:/tmp', 'w:/dev/shm']");
	expect_out(py_out(sb, code), "W -\n");
	destroy(f, sb);
	/* an entry that does not exist on this host is refused at create */
	const char *missing[] = {"/nonexistent-aks-path", NULL};
	p.fs_allow_write = NULL;
	p.fs_allow_read = missing;
	aks_call call;
	aks_call_init(&call, 30, &p, NULL, NULL);
	aks_error *err = NULL;
	sb = NULL;
	assert_int_equal(aks_provider_create(f->prov, &call, &sb, &err), AKS_EPOLICY);
	assert_non_null(strstr(aks_error_message(err), "/nonexistent-aks-path"));
	aks_error_free(err);
	free(code);
	free(paths);
	free(other);
}

/* Symlinks and FIFOs planted by the sandbox cannot take the file tools outside. */
static void t_planted_links(void **state)
{
	fixture *f = *state;
	free(sh_out(f->sb,
	            "ln -s /etc/passwd leak && ln -s / root && ln -s '%s' plant && "
	            "mkfifo fifo",
	            f->plant));
	aks_call call;
	aks_call_init(&call, 30, NULL, NULL, NULL);
	static const struct {
		const char *path;
		int code;
	} reads[] = {{"leak", AKS_EPOLICY},
	             {"root/etc/passwd", AKS_EPOLICY},
	             {"plant/secret.txt", AKS_EPOLICY},
	             {"../../plant/secret.txt", AKS_EPOLICY},
	             {"fifo", AKS_ENOTFOUND}};
	for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++) {
		aks_result *r = NULL;
		aks_error *err = NULL;
		int rc = aks_sandbox_download_file(f->sb, reads[i].path, &call, &r, &err);
		if (rc != reads[i].code)
			fail_msg("download %s: %d (%s), wanted %d", reads[i].path, rc,
			         err ? aks_error_message(err) : "ok", reads[i].code);
		aks_error_free(err);
		aks_result_free(r);
	}
	aks_error *err = NULL;
	assert_int_equal(aks_sandbox_upload_file(f->sb, "plant/evil.txt", "x", 1, &call, &err),
	                 AKS_EPOLICY);
	aks_error_free(err);
	char *evil = xasprintf("%s/evil.txt", f->plant);
	struct stat st;
	assert_int_equal(stat(evil, &st), -1);
	free(evil);
	/* the control: a plain file goes both ways */
	err = NULL;
	check_ok(aks_sandbox_upload_file(f->sb, "dir/in.txt", "data", 4, &call, &err), err);
	expect_out(sh_out(f->sb, "cat dir/in.txt"), "data");
}

/* ---- network ----------------------------------------------------------------------------- */

/* A listener on this host's loopback, and how many connections it accepted. */
static int listen_loopback(int *port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, 16), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

static int accepted(int fd)
{
	int n = 0, c;
	while ((c = accept(fd, NULL, NULL)) >= 0) {
		close(c);
		n++;
	}
	return n;
}

static void t_network(void **state)
{
	fixture *f = *state;
	int port;
	int lfd = listen_loopback(&port);
	char *code = xasprintf("import socket\n"
	                       "try:\n"
	                       "    socket.create_connection(('127.0.0.1', %d), timeout=3)\n"
	                       "    print('reached')\n"
	                       "except OSError as e:\n"
	                       "    print('refused')\n",
	                       port);
	aks_policy p;
	aks_policy_init(&p);
	p.network_egress = AKS_EGRESS_DENY;
	aks_sandbox *sb = create(f, &p);
	expect_out(py_out(sb, code), "refused\n");
	assert_int_equal(accepted(lfd), 0);
	/* its own loopback works */
	expect_out(py_out(sb, "import socket\ns = socket.socket(); s.bind(('127.0.0.1', 0)); "
	                      "s.listen(); c = socket.create_connection(s.getsockname()); "
	                      "print('own loopback')"),
	           "own loopback\n");
	destroy(f, sb);
	/* the control: allow reaches it */
	p.network_egress = AKS_EGRESS_ALLOW;
	sb = create(f, &p);
	expect_out(py_out(sb, code), "reached\n");
	assert_int_equal(accepted(lfd), 1);
	destroy(f, sb);
	close(lfd);
	free(code);
}

/* Landlock's scope: even sharing this host's network namespace (egress allow), a program
 * cannot reach an abstract unix socket of this host (X11's, a container runtime's). */
static void t_landlock_abstract_socket(void **state)
{
	fixture *f = *state;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int n = snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, "aks-bw-test-%d", (int)getpid());
	assert_int_equal(
	    bind(fd, (struct sockaddr *)&a, offsetof(struct sockaddr_un, sun_path) + 1 + n), 0);
	assert_int_equal(listen(fd, 4), 0);
	char *code = xasprintf("import socket\n"
	                       "s = socket.socket(socket.AF_UNIX)\n"
	                       "try:\n"
	                       "    s.connect('\\0aks-bw-test-%d'); print('reached')\n"
	                       "except OSError as e:\n"
	                       "    print('refused')\n",
	                       (int)getpid());
	aks_policy p;
	aks_policy_init(&p);
	p.network_egress = AKS_EGRESS_ALLOW;
	aks_sandbox *sb = create(f, &p);
	/* through the agent Landlock holds; per call (landlock off) this is the control */
	expect_out(py_out(sb, code), with_agent() ? "refused\n" : "reached\n");
	assert_int_equal(accepted(fd), with_agent() ? 0 : 1);
	destroy(f, sb);
	close(fd);
	free(code);
}

/* ---- processes ---------------------------------------------------------------------------- */

/* Processes of this host: invisible, and out of reach of signals. */
static void t_host_processes(void **state)
{
	fixture *f = *state;
	pid_t child = fork();
	if (child == 0) {
		execlp("sleep", "sleep", "4711", (char *)NULL);
		_exit(127);
	}
	/* no 'sleep 4711' among the sandbox's processes, and no signal reaches it */
	char *out = sh_out(f->sb,
	                   "kill -9 %d 2>&1; "
	                   "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | "
	                   "grep -o 'sleep 47[1]1' | wc -l",
	                   (int)child);
	assert_non_null(strstr(out, "No such process"));
	int status;
	assert_int_equal(waitpid(child, &status, WNOHANG), 0); /* still alive */
	kill(child, SIGKILL);
	waitpid(child, &status, 0);
	char *last = strrchr(out, '\n');
	*last = '\0';
	last = strrchr(out, '\n');
	assert_string_equal(last ? last + 1 : out, "0");
	free(out);
}

/* Whether a process whose command line holds needle runs on this host. */
static int host_count(const char *needle)
{
	char *cmd = xasprintf("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | "
	                      "grep -o '%s' | wc -l",
	                      needle);
	FILE *p = popen(cmd, "r");
	int n = -1;
	if (p) {
		if (fscanf(p, "%d", &n) != 1)
			n = -1;
		pclose(p);
	}
	free(cmd);
	return n;
}

/* A timeout kills the whole tree: background jobs, double forks, new sessions. */
static void t_timeout_kills_tree(void **state)
{
	fixture *f = *state;
	int rc;
	aks_result *r = run_in(f->sb, NULL,
	                       "setsid sleep 4721 & (sleep 4722 &) ; nohup sleep 4723 >/dev/null & "
	                       "sleep 4724",
	                       1, &rc);
	assert_int_equal(rc, AKS_ETIMEOUT);
	assert_true(aks_result_timed_out(r));
	aks_result_free(r);
	int left = -1;
	/* Killed processes may take a moment to be gone from /proc on a loaded machine (the
	 * sanitizer suite): up to 10 s. One that survives stays, and fails this. */
	for (int i = 0; i < 200 && left != 0; i++) {
		left = host_count("sleep 472[1-4]");
		if (left)
			usleep(50 * 1000);
	}
	assert_int_equal(left, 0);
	/* the sandbox still works afterwards */
	expect_out(sh_out(f->sb, "echo alive"), "alive\n");
}

/* ---- seccomp ------------------------------------------------------------------------------ */

/* Each refused call, made for real from the sandbox: EPERM (clone3: ENOSYS), where without the
 * filter these arguments give another answer (the control runs on this host). */
static const char seccomp_probe[] =
    "import ctypes, errno, os\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "NR = {'ptrace': 101, 'mount': 165, 'umount2': 166, 'pivot_root': 155, 'chroot': 161,\n"
    "      'unshare': 272, 'setns': 308, 'kexec_load': 246, 'init_module': 175,\n"
    "      'finit_module': 313, 'delete_module': 176, 'bpf': 321, 'perf_event_open': 298,\n"
    "      'userfaultfd': 323, 'keyctl': 250, 'add_key': 248, 'request_key': 249,\n"
    "      'personality': 135, 'open_by_handle_at': 304, 'clone3': 435, 'ioctl': 16,\n"
    "      'fsopen': 430, 'open_tree': 428}\n"
    "args = {'ptrace': (0, 0, 0, 0), 'unshare': (0x10000000,), 'setns': (-1, 0),\n"
    "        'personality': (0x0400000,), 'ioctl': (0, 0x5412, 0), 'keyctl': (0, 0),\n"
    "        'bpf': (0, 0, 0), 'userfaultfd': (0,), 'clone3': (0, 0),\n"
    "        'perf_event_open': (0, 0, -1, -1, 0), 'open_by_handle_at': (-1, 0, 0),\n"
    "        'fsopen': (0, 0), 'open_tree': (-1, 0, 0)}\n"
    "out = []\n"
    "for name in sorted(NR):\n"
    "    ctypes.set_errno(0)\n"
    "    r = libc.syscall(NR[name], *args.get(name, (0, 0, 0, 0, 0)))\n"
    "    e = ctypes.get_errno()\n"
    "    out.append('%s=%s' % (name, errno.errorcode.get(e, str(e)) if r == -1 else 'ok'))\n"
    "print(' '.join(out))\n";

static void t_seccomp(void **state)
{
	fixture *f = *state;
	char *out = py_out(f->sb, seccomp_probe);
	char *tok = out, *save = NULL;
	int n = 0;
	for (char *t = strtok_r(tok, " \n", &save); t; t = strtok_r(NULL, " \n", &save), n++) {
		const char *want = strncmp(t, "clone3=", 7) == 0 ? "ENOSYS" : "EPERM";
		const char *got = strchr(t, '=') + 1;
		if (strcmp(got, want) != 0)
			fail_msg("%s: wanted %s", t, want);
	}
	assert_int_equal(n, 23);
	free(out);
	/* the control, on this host without the filter: TIOCSTI on stdin is not EPERM there,
	 * nor personality's flag (both succeed or fail otherwise), so EPERM above is the
	 * filter's */
	FILE *p = popen("python3 -c \"import ctypes; l = ctypes.CDLL(None, use_errno=True); "
	                "r = l.syscall(135, 0xffffffff); print('query', r >= 0)\"",
	                "r");
	char line[64] = "";
	assert_non_null(p);
	assert_non_null(fgets(line, sizeof(line), p));
	pclose(p);
	assert_string_equal(line, "query True\n");
	/* and the query is allowed in the sandbox too */
	expect_out(py_out(f->sb, "import ctypes; l = ctypes.CDLL(None, use_errno=True)\n"
	                         "print('query', l.syscall(135, 0xffffffff) >= 0)"),
	           "query True\n");
}

/* ---- resources ----------------------------------------------------------------------------- */

static bool privileged(void)
{
	return geteuid() == 0;
}

/* As root the instance makes cgroups and declares limits; as another user on a cgroup v1
 * host it cannot, declares none, and says why in its description. */
static void t_limits_declared(void **state)
{
	fixture *f = *state;
	const aks_capabilities *caps = aks_provider_get_capabilities(f->prov);
	const char *d = aks_provider_get_description(f->prov);
	if (privileged()) {
		assert_true(caps->policy_resources);
		assert_non_null(strstr(d, "cgroup v"));
	} else {
		assert_false(caps->policy_resources);
		assert_non_null(strstr(d, "no cgroups"));
	}
	assert_non_null(strstr(d, "seccomp refusing"));
	assert_non_null(strstr(d, with_agent() ? "Landlock ABI" : "no Landlock"));
}

static void t_memory_limit(void **state)
{
	fixture *f = *state;
	if (!privileged())
		return; /* t_limits_declared proved the limit is not declared */
	aks_policy p;
	aks_policy_init(&p);
	p.memory_mb = 64;
	aks_sandbox *sb = create(f, &p);
	/* bounded: 16 MB fits, 256 MB does not */
	expect_out(py_out(sb, "b = bytearray(16 << 20); print('small ok')"), "small ok\n");
	int rc;
	aks_result *r =
	    run_in(sb, "python", "b = [bytearray(1 << 20) for i in range(256)]\nprint('all of it')",
	           30, &rc);
	assert_null(strstr(aks_result_get_stdout(r, NULL), "all of it"));
	assert_int_not_equal(aks_result_get_exit_code(r), 0);
	const char *notice = aks_result_get_notice(r);
	if (!notice || !strstr(notice, "memory limit (memory_mb 64) killed"))
		fail_msg("no notice of the memory limit: %s", notice ? notice : "(none)");
	aks_result_free(r);
	destroy(f, sb);
}

/* A fork bomb stays inside: at most pids_max tasks, bounded here at 40 attempts. */
static void t_pids_limit(void **state)
{
	fixture *f = *state;
	if (!privileged())
		return;
	destroy(f, f->sb);
	aks_provider_close(f->prov);
	f->prov = open_provider(f, "    pids_max: 16\n");
	f->sb = create(f, NULL);
	char *out = sh_out(f->sb, "n=0; for i in $(seq 40); do (sleep 5 &) 2>/dev/null && "
	                          "n=$((n+1)); done; sleep 0.2; ls /proc | grep -c '^[0-9]'");
	int procs = atoi(out);
	free(out);
	if (procs > 16 || procs < 4)
		fail_msg("%d processes under pids_max 16", procs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(t_runs, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_privileges, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_environment, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_host_files_hidden, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_fs_policy, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_planted_links, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_network, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_landlock_abstract_socket, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_host_processes, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_timeout_kills_tree, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_seccomp, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_limits_declared, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_memory_limit, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_pids_limit, setup, teardown),
	};
	return cmocka_run_group_tests_name("bubblewrap", tests, NULL, NULL);
}
