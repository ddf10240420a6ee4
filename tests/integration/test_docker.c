/*
 * tests/integration/test_docker.c - the docker provider against the real
 * Docker Engine (and gVisor's runsc), through the core API: the plugin is
 * loaded from AKS_PLUGIN_PATH and configured from YAML.
 *
 * Every check looks at effects, from the engine (docker inspect), the host
 * (a TCP listener, cgroup files) or a second execution in the container
 * (/proc, files), not at return codes alone. Every container and volume the
 * tests make carries the label io.aksandbox.test=<this run>; the group
 * teardown removes whatever is left by that label.
 *
 * Needs: a Docker Engine on DOCKER_HOST (default /var/run/docker.sock) and the
 * image aksandbox-test:bookworm; tests/integration/docker-setup.sh provides
 * both. Without them every test fails saying so.
 *
 * This file is built twice: test_docker runs every test with one docker exec
 * per call (agent: false); test_docker_agent (DK_TEST_AGENT, the build's static
 * aksandbox-agent) runs the same tests through the agent, plus the agent's own
 * (placement, the persistent Python session, restarts, fallbacks, bounded
 * memory for huge output).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <aksandbox/aksandbox.h>

#define IMAGE "aksandbox-test:bookworm"
#define SETUP_HINT                                                                                 \
	"run tests/integration/docker-setup.sh start (as root; it starts dockerd "                 \
	"--iptables=false --bridge=none and builds " IMAGE ")"

#ifndef DK_TEST_AGENT
#define DK_TEST_AGENT "false"
#endif
#define AGENT_IN_CTR "/.aksandbox/aksandbox-agent"

static bool with_agent;    /* DK_TEST_AGENT is not "false" */
static char run_label[64]; /* io.aksandbox.test value of this run */
static char tmpdir[256];
static const aks_plugin *plugin;

/* ---- helpers ------------------------------------------------------------------------ */

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

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

/* Runs a host shell command; returns its stdout (trailing newlines cut) and
 * its exit status in *status. */
static char *sh_out(int *status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *sh_out(int *status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *cmd = NULL;
	assert_true(vasprintf(&cmd, fmt, ap) >= 0);
	va_end(ap);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	size_t n;
	while ((n = fread(buf + len, 1, cap - len - 1, p)) > 0) {
		len += n;
		if (cap - len < 2) {
			cap *= 2;
			buf = realloc(buf, cap);
		}
	}
	buf[len] = '\0';
	while (len && buf[len - 1] == '\n')
		buf[--len] = '\0';
	int st = pclose(p);
	if (status)
		*status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	free(cmd);
	return buf;
}

/* The macro evaluates the call before reading the error it fills (as arguments of one
 * function call, the order is unspecified: the error read could be the one from before). */
#define check_ok(expr, e)                                                                          \
	do {                                                                                       \
		int rc_ = (expr);                                                                  \
		check_ok_(rc_, (e));                                                               \
	} while (0)

static void check_ok_(int rc, aks_error *err)
{
	if (rc != AKS_OK)
		fail_msg("expected AKS_OK, got %d: %s", rc,
		         err ? aks_error_message(err) : "(no error)");
	assert_null(err);
}

/* Asserts the code and that the message contains each NULL-terminated part. */
static void check_error(int rc, aks_error **err, int code, ...)
{
	if (rc != code)
		fail_msg("expected %d, got %d: %s", code, rc,
		         *err ? aks_error_message(*err) : "(no error)");
	assert_non_null(*err);
	assert_int_equal(aks_error_code(*err), code);
	va_list ap;
	va_start(ap, code);
	for (const char *part; (part = va_arg(ap, const char *));)
		if (!strstr(aks_error_message(*err), part))
			fail_msg("the error '%s' lacks '%s'", aks_error_message(*err), part);
	va_end(ap);
	aks_error_free(*err);
	*err = NULL;
}

/* ---- fixture ---------------------------------------------------------------------------- */

typedef struct fixture {
	aks_config *config;
	aks_provider *prov;
	aks_sandbox *sb;
	char *id;
	aks_policy policy;
} fixture;

/* A provider whose config block holds `extra` (YAML lines, 4-space indent). */
static void open_provider(fixture *f, const char *extra)
{
	char *yaml = xasprintf("%s/config-%d.yaml", tmpdir, rand());
	char *text = xasprintf("sandbox:\n"
	                       "  enabled: true\n"
	                       "  type: docker\n"
	                       "  docker:\n"
	                       "%s%s%s%s"
	                       "    labels: {io.aksandbox.test: %s}\n"
	                       "%s",
	                       extra && strstr(extra, "pull:") ? "" : "    pull: false\n",
	                       extra && strstr(extra, "agent:") ? "" : "    agent: ",
	                       extra && strstr(extra, "agent:") ? "" : DK_TEST_AGENT,
	                       extra && strstr(extra, "agent:") ? "" : "\n", run_label,
	                       extra ? extra : "    image: " IMAGE "\n");
	FILE *fp = fopen(yaml, "w");
	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
	free(text);
	aks_error *err = NULL;
	check_ok(aks_config_load_block(plugin, yaml, &f->config, &err), err);
	check_ok(aks_provider_open(plugin, f->config, &f->prov, &err), err);
	unlink(yaml);
	free(yaml);
}

static void create_sandbox(fixture *f)
{
	aks_call call;
	aks_call_init(&call, 60, &f->policy, NULL, NULL);
	aks_error *err = NULL;
	check_ok(aks_provider_create(f->prov, &call, &f->sb, &err), err);
	f->id = strdup(aks_sandbox_get_id(f->sb));
}

static fixture *new_fixture(void)
{
	fixture *f = calloc(1, sizeof(*f));
	aks_policy_init(&f->policy);
	return f;
}

static int setup(void **state)
{
	fixture *f = new_fixture();
	open_provider(f, NULL);
	create_sandbox(f);
	*state = f;
	return 0;
}

static int setup_bare(void **state)
{
	*state = new_fixture();
	return 0;
}

/* Closes and destroys the fixture's sandbox, and closes its provider: the fixture can open
 * another. */
static void teardown_sandbox(fixture *f)
{
	/* Generous: removing a gVisor container that a fork bomb filled, on a machine that
	 * runs other suites at the same time, took over a minute (the ptrace platform is slow
	 * to tear a sandbox down under load); a teardown deadline proves nothing. */
	aks_call call;
	aks_call_init(&call, 240, NULL, NULL, NULL);
	if (f->sb)
		aks_sandbox_close(f->sb);
	if (f->id && f->prov) {
		aks_error *err = NULL;
		check_ok(aks_provider_destroy(f->prov, f->id, &call, &err), err);
	}
	free(f->id);
	aks_provider_close(f->prov);
	aks_config_free(f->config);
	f->sb = NULL;
	f->id = NULL;
	f->prov = NULL;
	f->config = NULL;
}

static int teardown(void **state)
{
	teardown_sandbox(*state);
	free(*state);
	return 0;
}

/* Runs a shell command (language NULL) or python code. */
static int run(fixture *f, const char *language, const char *code, double timeout,
               aks_cancel *cancel, aks_result **res, aks_error **err)
{
	aks_call call;
	aks_call_init(&call, timeout, &f->policy, NULL, cancel);
	*res = NULL;
	if (!language)
		return aks_sandbox_execute_command(f->sb, code, &call, res, err);
	return aks_sandbox_execute_code(f->sb, code, language, &call, res, err);
}

/* Runs a shell command that must succeed; returns its stdout (caller frees). */
static char *run_ok(fixture *f, const char *command)
{
	aks_result *r = NULL;
	aks_error *err = NULL;
	check_ok(run(f, NULL, command, 60, NULL, &r, &err), err);
	if (aks_result_get_exit_code(r) != 0)
		fail_msg("'%s' exited with %d: %s", command, aks_result_get_exit_code(r),
		         aks_result_get_stderr(r, NULL));
	char *out = strdup(aks_result_get_stdout(r, NULL));
	aks_result_free(r);
	size_t n = strlen(out);
	while (n && out[n - 1] == '\n')
		out[--n] = '\0';
	return out;
}

/* docker inspect -f TEMPLATE of the sandbox's container. */
static char *inspect(const char *id, const char *tmpl)
{
	int st;
	char *out = sh_out(&st, "docker inspect -f '%s' %s 2>&1", tmpl, id);
	if (st != 0)
		fail_msg("docker inspect %s failed: %s", id, out);
	return out;
}

static bool container_exists(const char *id)
{
	int st;
	free(sh_out(&st, "docker container inspect %s >/dev/null 2>&1", id));
	return st == 0;
}

static bool volume_exists(const char *name)
{
	int st;
	free(sh_out(&st, "docker volume inspect %s >/dev/null 2>&1", name));
	return st == 0;
}

/* The processes in container id whose command line starts with `prefix`, seen by a
 * separate `docker exec` (never through the agent under test). */
static char *ctr_procs(const char *id, const char *prefix)
{
	int st;
	char *out = sh_out(&st,
	                   "docker exec %s /bin/sh -c 'for p in /proc/[0-9]*; do "
	                   "c=$(tr \"\\\\0\" \" \" < $p/cmdline 2>/dev/null); "
	                   "case \"$c\" in \"%s\"*) echo \"$c\";; esac; done; true' 2>&1",
	                   id, prefix);
	if (st != 0)
		fail_msg("docker exec in %s failed: %s", id, out);
	return out;
}

static char *procs_matching(fixture *f, const char *prefix)
{
	return ctr_procs(f->id, prefix);
}

static int agent_pid(const char *id);
static int agent_proc(const char *id, bool relay);

/* A shell command run in container id by `docker exec` (not through the plugin). */
static char *ctr_sh(const char *id, int *status, const char *cmd)
{
	char *q = xasprintf("docker exec %s /bin/sh -c '%s' 2>&1", id, cmd);
	int st;
	char *out = sh_out(&st, "%s", q);
	free(q);
	if (status)
		*status = st;
	return out;
}

/* ---- group setup: the engine and the image must be there -------------------------------- */

static int group_setup(void **state)
{
	int st;
	char *v = sh_out(&st, "docker version --format '{{.Server.APIVersion}}' 2>&1");
	if (st != 0) {
		print_error("the Docker Engine is not reachable (%s): %s\n", v, SETUP_HINT);
		free(v);
		return -1;
	}
	free(v);
	free(sh_out(&st, "docker image inspect " IMAGE " >/dev/null 2>&1"));
	if (st != 0) {
		print_error("the test image " IMAGE " is missing: %s\n", SETUP_HINT);
		return -1;
	}
	snprintf(run_label, sizeof(run_label), "run-%d-%lld", (int)getpid(), (long long)time(NULL));
	const char *t = getenv("TMPDIR");
	snprintf(tmpdir, sizeof(tmpdir), "%s/aks-docker-test-XXXXXX", t && *t ? t : "/tmp");
	if (!mkdtemp(tmpdir))
		return -1;
	srand((unsigned)getpid());
	aks_error *err = NULL;
	if (aks_plugin_load("docker", AKS_PLUGIN_PROVIDER, &plugin, &err) != AKS_OK) {
		print_error("cannot load docker.so (AKS_PLUGIN_PATH=%s): %s\n",
		            getenv("AKS_PLUGIN_PATH"), err ? aks_error_message(err) : "?");
		return -1;
	}
	return 0;
}

/* Removes whatever this run left (nothing, if destroy works). */
static int group_teardown(void **state)
{
	int st;
	free(sh_out(&st,
	            "ids=$(docker ps -aq --filter label=io.aksandbox.test=%s); "
	            "[ -z \"$ids\" ] || docker rm -f $ids >/dev/null 2>&1; "
	            "vols=$(docker volume ls -q --filter label=io.aksandbox.test=%s); "
	            "[ -z \"$vols\" ] || docker volume rm -f $vols >/dev/null 2>&1; true",
	            run_label, run_label));
	char *cmd = xasprintf("rm -rf '%s'", tmpdir);
	free(sh_out(&st, "%s", cmd));
	free(cmd);
	return 0;
}

/* ---- lifecycle ------------------------------------------------------------------------- */

/* create: a running container with our labels, /workspace a named volume;
 * destroy removes both, and is idempotent. */
static void t_lifecycle(void **state)
{
	fixture *f = *state;
	assert_true(strncmp(f->id, "aks-", 4) == 0);
	char *got =
	    inspect(f->id, "{{.State.Running}} {{index .Config.Labels \"io.aksandbox.sandbox\"}} "
	                   "{{index .Config.Labels \"io.aksandbox.test\"}} {{.Config.WorkingDir}} "
	                   "{{range .Mounts}}{{.Type}}:{{.Name}}:{{.Destination}}{{end}}");
	char *want =
	    xasprintf("true 1 %s /workspace volume:%s-workspace:/workspace", run_label, f->id);
	assert_string_equal(got, want);
	free(got);
	free(want);
	char *pwd = run_ok(f, "pwd");
	assert_string_equal(pwd, "/workspace");
	free(pwd);

	/* destroy: container and volume gone; again, and an unknown id: fine */
	aks_sandbox_close(f->sb);
	f->sb = NULL;
	aks_call call;
	aks_call_init(&call, 60, NULL, NULL, NULL);
	aks_error *err = NULL;
	check_ok(aks_provider_destroy(f->prov, f->id, &call, &err), err);
	assert_false(container_exists(f->id));
	char *vol = xasprintf("%s-workspace", f->id);
	assert_false(volume_exists(vol));
	free(vol);
	check_ok(aks_provider_destroy(f->prov, f->id, &call, &err), err);
	check_ok(aks_provider_destroy(f->prov, "aks-00000000000000000000000000000000", &call, &err),
	         err);
	check_ok(aks_provider_destroy(f->prov, "not a docker id!", &call, &err), err);
	/* attach to the destroyed one: gone */
	aks_sandbox *sb = NULL;
	int rc = aks_provider_attach(f->prov, f->id, &call, &sb, &err);
	char *msg = xasprintf("container '%s' no longer exists", f->id);
	check_error(rc, &err, AKS_EGONE, msg, (char *)NULL);
	free(msg);
}

/* A container removed behind our back: the handle and attach say gone
 * (the core turns that into a recreation). */
static void t_gone(void **state)
{
	fixture *f = *state;
	int st;
	free(sh_out(&st, "docker rm -f %s >/dev/null 2>&1", f->id));
	assert_int_equal(st, 0);
	aks_result *r = NULL;
	aks_error *err = NULL;
	int rc = run(f, NULL, "echo hi", 30, NULL, &r, &err);
	check_error(rc, &err, AKS_EGONE, "no longer exists", (char *)NULL);
	aks_result_free(r);
	/* the orphaned workspace volume stays until attach finds the container
	 * gone; then it goes too (the core recreates the sandbox empty and says
	 * so), and destroy has nothing left to do */
	char *vol = xasprintf("%s-workspace", f->id);
	assert_true(volume_exists(vol));
	aks_call call;
	aks_call_init(&call, 60, NULL, NULL, NULL);
	aks_sandbox *sb = NULL;
	rc = aks_provider_attach(f->prov, f->id, &call, &sb, &err);
	check_error(rc, &err, AKS_EGONE, "no longer exists", (char *)NULL);
	assert_false(volume_exists(vol));
	free(vol);
	check_ok(aks_provider_destroy(f->prov, f->id, &call, &err), err);
}

/* A stopped container is started again by attach, with its workspace: the
 * files written before are read back. */
static void t_restart_keeps_workspace(void **state)
{
	fixture *f = *state;
	aks_call call;
	aks_call_init(&call, 60, &f->policy, NULL, NULL);
	aks_error *err = NULL;
	check_ok(aks_sandbox_upload_file(f->sb, "keep/notes.txt", "survives", 8, &call, &err), err);
	free(run_ok(f, "echo written-by-exec > /workspace/exec.txt"));
	int st;
	free(sh_out(&st, "docker stop -t 1 %s >/dev/null 2>&1", f->id));
	assert_int_equal(st, 0);
	char *running = inspect(f->id, "{{.State.Running}}");
	assert_string_equal(running, "false");
	free(running);
	aks_sandbox_close(f->sb);
	f->sb = NULL;
	check_ok(aks_provider_attach(f->prov, f->id, &call, &f->sb, &err), err);
	running = inspect(f->id, "{{.State.Running}}");
	assert_string_equal(running, "true");
	free(running);
	aks_result *r = NULL;
	check_ok(aks_sandbox_download_file(f->sb, "keep/notes.txt", &call, &r, &err), err);
	size_t len = 0;
	const unsigned char *data = aks_result_get_file(r, 0, NULL, NULL, &len);
	assert_int_equal(len, 8);
	assert_memory_equal(data, "survives", 8);
	aks_result_free(r);
	char *out = run_ok(f, "cat /workspace/exec.txt");
	assert_string_equal(out, "written-by-exec");
	free(out);
	/* a restart behind our back, then a plain execution on the open handle */
	if (with_agent) /* state to lose */
		free(run_ok(f, "true"));
	free(sh_out(&st, "docker restart -t 1 %s >/dev/null 2>&1", f->id));
	assert_int_equal(st, 0);
	r = NULL;
	check_ok(run(f, NULL, "cat /workspace/keep/notes.txt", 30, NULL, &r, &err), err);
	assert_string_equal(aks_result_get_stdout(r, NULL), "survives");
	const char *notice = aks_result_get_notice(r);
	if (with_agent) {
		/* the agent died with the container: restarted, with the notice */
		if (!notice || !strstr(notice, "state from earlier calls was lost"))
			fail_msg("no restart notice: %s", notice ? notice : "(none)");
		assert_true(agent_pid(f->id) > 0);
	} else {
		assert_null(notice);
	}
	aks_result_free(r);
}

/* ---- execution ---------------------------------------------------------------------------- */

static void t_exec_streams(void **state)
{
	fixture *f = *state;
	aks_result *r = NULL;
	aks_error *err = NULL;
	check_ok(run(f, "python",
	             "import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(3)", 30,
	             NULL, &r, &err),
	         err);
	assert_string_equal(aks_result_get_stdout(r, NULL), "out\n");
	assert_string_equal(aks_result_get_stderr(r, NULL), "err\n");
	assert_int_equal(aks_result_get_exit_code(r), 3);
	assert_false(aks_result_timed_out(r));
	aks_result_free(r);

	/* a failing program is a result */
	check_ok(run(f, "python", "__nonzero_exit__", 30, NULL, &r, &err), err);
	assert_int_not_equal(aks_result_get_exit_code(r), 0);
	assert_non_null(strstr(aks_result_get_stderr(r, NULL), "NameError"));
	aks_result_free(r);

	/* undeclared language */
	int rc = run(f, "bash", "echo hi", 30, NULL, &r, &err);
	check_error(rc, &err, AKS_ECAPABILITY, "language:bash", (char *)NULL);

	/* interleaved, flushed frames of both streams, byte-exact */
	check_ok(run(f, "python",
	             "import sys\n"
	             "for i in range(20000):\n"
	             "    sys.stdout.write('%d\\n' % i); sys.stdout.flush()\n"
	             "    sys.stderr.write('-%d\\n' % i)\n",
	             60, NULL, &r, &err),
	         err);
	size_t cap = 200000, ol = 0, el = 0;
	char *eo = malloc(cap), *ee = malloc(cap);
	for (int i = 0; i < 20000; i++) {
		ol += (size_t)sprintf(eo + ol, "%d\n", i);
		el += (size_t)sprintf(ee + el, "-%d\n", i);
	}
	size_t gl = 0;
	const char *go = aks_result_get_stdout(r, &gl);
	assert_int_equal(gl, ol);
	assert_memory_equal(go, eo, ol);
	const char *ge = aks_result_get_stderr(r, &gl);
	assert_int_equal(gl, el);
	assert_memory_equal(ge, ee, el);
	free(eo);
	free(ee);
	aks_result_free(r);

	/* large output, past the host's cap: kept up to it, all of it counted */
	check_ok(run(f, "python",
	             "import sys\n_ = sys.stdout.buffer.write(bytes(range(256)) * 24576)\n", 60,
	             NULL, &r, &err),
	         err);
	const char *big = aks_result_get_stdout(r, &gl);
	assert_int_equal(aks_result_get_stream_total(r, 1), 256 * 24576);
	assert_true(gl > 0 && gl <= AKS_DEFAULT_STREAM_CAP);
	assert_true(aks_result_is_truncated(r, 1));
	for (size_t i = 0; i < gl; i++)
		if ((unsigned char)big[i] != (unsigned char)(i % 256))
			fail_msg("stdout byte %zu is %d, not %d", i, (unsigned char)big[i],
			         (int)(i % 256));
	assert_int_equal(aks_result_get_exit_code(r), 0);
	aks_result_free(r);
}

/* The timeout kills the whole tree in the container: the program, a child
 * in the background, and a double-forked orphan (re-parented to init). */
static void t_timeout_kills_tree(void **state)
{
	fixture *f = *state;
	aks_result *r = NULL;
	aks_error *err = NULL;
	int64_t t0 = now_ms();
	int rc = run(f, NULL,
	             "echo started; (sleep 300 >/dev/null 2>&1 &); sleep 301 >/dev/null 2>&1 & "
	             "sleep 302",
	             2, NULL, &r, &err);
	int64_t took = now_ms() - t0;
	check_error(rc, &err, AKS_ETIMEOUT, "docker exec exceeded timeout 2s", (char *)NULL);
	assert_non_null(r);
	assert_true(aks_result_timed_out(r));
	assert_string_equal(aks_result_get_stdout(r, NULL), "started\n");
	aks_result_free(r);
	if (took < 1900 || took > 10000)
		fail_msg("the timed-out call took %lld ms", (long long)took);
	char *left = procs_matching(f, "sleep 30");
	assert_string_equal(left, "");
	free(left);

	/* control: the listing does see a survivor when one exists */
	free(run_ok(f, "(sleep 303 >/dev/null 2>&1 &); true"));
	left = procs_matching(f, "sleep 30");
	assert_string_equal(left, "sleep 303 ");
	free(left);
}

static void *cancel_later(void *arg)
{
	struct timespec ts = {1, 0};
	nanosleep(&ts, NULL);
	aks_cancel_trigger(arg);
	return NULL;
}

static void t_cancel_kills_tree(void **state)
{
	fixture *f = *state;
	aks_cancel *cancel = NULL;
	aks_error *err = NULL;
	check_ok(aks_cancel_new(&cancel, &err), err);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, cancel_later, cancel), 0);
	aks_result *r = NULL;
	int64_t t0 = now_ms();
	int rc = run(f, NULL, "(sleep 310 >/dev/null 2>&1 &); sleep 311", 60, cancel, &r, &err);
	int64_t took = now_ms() - t0;
	pthread_join(th, NULL);
	check_error(rc, &err, AKS_ECANCELLED, "cancelled", (char *)NULL);
	aks_result_free(r);
	aks_cancel_free(cancel);
	if (took > 8000)
		fail_msg("the cancelled call took %lld ms", (long long)took);
	char *left = procs_matching(f, "sleep 31");
	assert_string_equal(left, "");
	free(left);
}

/* ---- files ---------------------------------------------------------------------------------- */

static void t_files(void **state)
{
	fixture *f = *state;
	aks_call call;
	aks_call_init(&call, 60, &f->policy, NULL, NULL);
	aks_error *err = NULL;
	aks_result *r = NULL;

	/* binary-safe, 1 MiB, parents created; the file really is in the container */
	size_t n = 256 * 4096;
	unsigned char *data = malloc(n);
	for (size_t i = 0; i < n; i++)
		data[i] = (unsigned char)(i % 256);
	check_ok(aks_sandbox_upload_file(f->sb, "sub/dir/bin.dat", data, n, &call, &err), err);
	char *out = run_ok(f, "python3 -c \"d=open('/workspace/sub/dir/bin.dat','rb').read(); "
	                      "print(len(d), d == bytes(range(256))*4096)\"");
	assert_string_equal(out, "1048576 True");
	free(out);
	check_ok(aks_sandbox_download_file(f->sb, "sub/dir/bin.dat", &call, &r, &err), err);
	assert_int_equal(aks_result_get_file_count(r), 1);
	size_t len = 0;
	const char *path = NULL;
	const unsigned char *got = aks_result_get_file(r, 0, &path, NULL, &len);
	assert_string_equal(path, "sub/dir/bin.dat");
	assert_int_equal(len, n);
	assert_memory_equal(got, data, n);
	aks_result_free(r);
	free(data);

	/* a file written by a program is read back; an empty file too */
	free(run_ok(f, "printf 'from exec' > /workspace/e.txt; : > /workspace/empty"));
	check_ok(aks_sandbox_download_file(f->sb, "/e.txt", &call, &r, &err), err);
	got = aks_result_get_file(r, 0, NULL, NULL, &len);
	assert_int_equal(len, 9);
	assert_memory_equal(got, "from exec", 9);
	aks_result_free(r);
	check_ok(aks_sandbox_download_file(f->sb, "empty", &call, &r, &err), err);
	aks_result_get_file(r, 0, NULL, NULL, &len);
	assert_int_equal(len, 0);
	aks_result_free(r);

	/* missing, and a directory: not found */
	int rc = aks_sandbox_download_file(f->sb, "nope.txt", &call, &r, &err);
	check_error(rc, &err, AKS_ENOTFOUND, "file 'nope.txt' not found in the sandbox",
	            (char *)NULL);
	rc = aks_sandbox_download_file(f->sb, "sub", &call, &r, &err);
	check_error(rc, &err, AKS_ENOTFOUND, "not found", (char *)NULL);

	/* ../ escapes; an absolute path is remapped under /workspace (the
	 * reference's rule): the container's /etc/passwd is untouched */
	rc = aks_sandbox_upload_file(f->sb, "../evil.txt", "x", 1, &call, &err);
	check_error(rc, &err, AKS_EPOLICY, "escapes /workspace", (char *)NULL);
	rc = aks_sandbox_upload_file(f->sb, "a/../../../etc/evil", "x", 1, &call, &err);
	check_error(rc, &err, AKS_EPOLICY, "escapes", (char *)NULL);
	rc = aks_sandbox_download_file(f->sb, "../etc/passwd", &call, &r, &err);
	check_error(rc, &err, AKS_EPOLICY, "escapes", (char *)NULL);
	out = run_ok(f, "test ! -e /evil.txt && test ! -e /etc/evil && echo clean");
	assert_string_equal(out, "clean");
	free(out);
	check_ok(aks_sandbox_upload_file(f->sb, "/etc/passwd", "pwned", 5, &call, &err), err);
	out = run_ok(f, "head -c 5 /etc/passwd; echo; cat /workspace/etc/passwd");
	assert_string_equal(out, "root:\npwned");
	free(out);

	/* symbolic links out of /workspace are refused; inside it they work */
	free(run_ok(f, "ln -s /etc /workspace/evil && ln -s /etc/hostname /workspace/host && "
	               "ln -s sub /workspace/inner && ln -s dir/bin.dat /workspace/sub/lnk"));
	rc = aks_sandbox_upload_file(f->sb, "evil/aks-planted", "x", 1, &call, &err);
	check_error(rc, &err, AKS_EPOLICY, "symbolic link", (char *)NULL);
	out = run_ok(f, "test ! -e /etc/aks-planted && echo clean");
	assert_string_equal(out, "clean");
	free(out);
	rc = aks_sandbox_download_file(f->sb, "evil/passwd", &call, &r, &err);
	check_error(rc, &err, AKS_EPOLICY, "symbolic link", (char *)NULL);
	rc = aks_sandbox_download_file(f->sb, "host", &call, &r, &err);
	check_error(rc, &err, AKS_EPOLICY, "symbolic link", (char *)NULL);
	check_ok(aks_sandbox_download_file(f->sb, "inner/lnk", &call, &r, &err), err);
	aks_result_get_file(r, 0, NULL, NULL, &len);
	assert_int_equal(len, n);
	aks_result_free(r);
	check_ok(aks_sandbox_upload_file(f->sb, "inner/via-link.txt", "ok", 2, &call, &err), err);
	out = run_ok(f, "cat /workspace/sub/via-link.txt");
	assert_string_equal(out, "ok");
	free(out);
}

/* ---- policy ---------------------------------------------------------------------------------- */

/* The first non-loopback IPv4 address of this host. */
static bool host_ipv4(char *buf, size_t len)
{
	struct ifaddrs *ifa = NULL, *i;
	bool found = false;
	if (getifaddrs(&ifa) != 0)
		return false;
	for (i = ifa; i && !found; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET) {
			struct sockaddr_in *sin = (struct sockaddr_in *)i->ifa_addr;
			if ((ntohl(sin->sin_addr.s_addr) >> 24) == 127)
				continue;
			found = inet_ntop(AF_INET, &sin->sin_addr, buf, (socklen_t)len) != NULL;
		}
	freeifaddrs(ifa);
	return found;
}

/* egress deny, cpu, memory and filesystem policy, in one container */
static int setup_policy(void **state)
{
	fixture *f = new_fixture();
	f->policy.network_egress = AKS_EGRESS_DENY;
	f->policy.cpu = 0.5;
	f->policy.memory_mb = 96;
	static const char *const fs_write[] = {"/workspace", NULL};
	f->policy.fs_allow_write = fs_write;
	open_provider(f, NULL);
	create_sandbox(f);
	*state = f;
	return 0;
}

static void t_policy_engine_settings(void **state)
{
	fixture *f = *state;
	char *got = inspect(f->id, "{{.HostConfig.NetworkMode}} {{.HostConfig.NanoCpus}} "
	                           "{{.HostConfig.Memory}} {{.HostConfig.MemorySwap}} "
	                           "{{.HostConfig.ReadonlyRootfs}}");
	assert_string_equal(got, "none 500000000 100663296 100663296 true");
	free(got);
	/* the cgroup the kernel enforces (cgroup v1 as mounted in the container) */
	char *quota = run_ok(
	    f, "cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.cfs_period_us "
	       "/sys/fs/cgroup/memory/memory.limit_in_bytes | tr '\\n' ' '");
	assert_string_equal(quota, "50000 100000 100663296 ");
	free(quota);
}

static void t_policy_network_deny(void **state)
{
	fixture *f = *state;
	char ip[64];
	if (!host_ipv4(ip, sizeof(ip)))
		fail_msg("this host has no non-loopback IPv4 address to listen on");
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	assert_true(ls >= 0);
	struct sockaddr_in sa = {.sin_family = AF_INET};
	inet_pton(AF_INET, ip, &sa.sin_addr);
	assert_int_equal(bind(ls, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(ls, 8), 0);
	socklen_t sl = sizeof(sa);
	getsockname(ls, (struct sockaddr *)&sa, &sl);
	int port = ntohs(sa.sin_port);

	/* control: the listener is reachable at that address from the host */
	int c = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(c, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(c);
	int a = -1;
	for (int i = 0; i < 100 && a < 0; i++) {
		a = accept(ls, NULL, NULL);
		if (a < 0)
			usleep(10000);
	}
	assert_true(a >= 0);
	close(a);

	char *code = xasprintf("import socket\n"
	                       "s = socket.socket(); s.settimeout(3)\n"
	                       "try:\n"
	                       "    s.connect(('%s', %d)); print('connected')\n"
	                       "except OSError as e:\n"
	                       "    print('failed', type(e).__name__)\n",
	                       ip, port);
	aks_result *r = NULL;
	aks_error *err = NULL;
	check_ok(run(f, "python", code, 30, NULL, &r, &err), err);
	free(code);
	const char *out = aks_result_get_stdout(r, NULL);
	if (strncmp(out, "failed", 6) != 0)
		fail_msg("the sandbox reached %s:%d: %s", ip, port, out);
	aks_result_free(r);
	assert_true(accept(ls, NULL, NULL) < 0); /* nothing came in */
	close(ls);
	/* only the loopback interface exists */
	char *ifs = run_ok(f, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '");
	assert_string_equal(ifs, "lo");
	free(ifs);
}

static void t_policy_memory(void **state)
{
	fixture *f = *state;
	aks_result *r = NULL;
	aks_error *err = NULL;
	check_ok(run(f, "python",
	             "b = bytearray(400 * 1024 * 1024)\n"
	             "for i in range(0, len(b), 4096): b[i] = 1\n"
	             "print('survived')\n",
	             60, NULL, &r, &err),
	         err);
	assert_int_not_equal(aks_result_get_exit_code(r), 0);
	assert_null(strstr(aks_result_get_stdout(r, NULL), "survived"));
	aks_result_free(r);
	/* the container (and the host) carry on */
	char *out = run_ok(f, "echo alive");
	assert_string_equal(out, "alive");
	free(out);
	char *running = inspect(f->id, "{{.State.Running}}");
	assert_string_equal(running, "true");
	free(running);
}

static void t_policy_filesystem(void **state)
{
	fixture *f = *state;
	aks_result *r = NULL;
	aks_error *err = NULL;
	check_ok(run(f, NULL, "echo x > /etc/aks-ro-test", 30, NULL, &r, &err), err);
	assert_int_not_equal(aks_result_get_exit_code(r), 0);
	assert_non_null(strstr(aks_result_get_stderr(r, NULL), "Read-only file system"));
	aks_result_free(r);
	char *out = run_ok(f, "echo w > /workspace/w.txt && cat /workspace/w.txt");
	assert_string_equal(out, "w");
	free(out);
	/* uploads still work under a read-only root */
	aks_call call;
	aks_call_init(&call, 30, &f->policy, NULL, NULL);
	check_ok(aks_sandbox_upload_file(f->sb, "up.txt", "up", 2, &call, &err), err);
	out = run_ok(f, "cat /workspace/up.txt");
	assert_string_equal(out, "up");
	free(out);
}

/* An egress allowlist cannot be enforced: refused under strict before any
 * container exists; allowed (unrestricted) otherwise. */
static void t_policy_allowlist(void **state)
{
	fixture *f = *state;
	open_provider(f, NULL);
	static const char *const allow[] = {"pypi.org", NULL};
	f->policy.network_egress = AKS_EGRESS_ALLOWLIST;
	f->policy.network_allow = allow;
	f->policy.strict = true;
	if (with_agent) {
		/* enforced by the agent's egress proxy (egress-docker.test drives it): the
		 * container has no network of its own */
		assert_true(aks_provider_get_capabilities(f->prov)->egress_proxy);
		create_sandbox(f);
		char *net = inspect(f->id, "{{.HostConfig.NetworkMode}}");
		assert_string_equal(net, "none");
		free(net);
		return;
	}
	int st;
	char *before =
	    sh_out(&st, "docker ps -aq --filter label=io.aksandbox.test=%s | wc -l", run_label);
	aks_call call;
	aks_call_init(&call, 30, &f->policy, NULL, NULL);
	aks_error *err = NULL;
	aks_sandbox *sb = NULL;
	int rc = aks_provider_create(f->prov, &call, &sb, &err);
	check_error(
	    rc, &err, AKS_EPOLICY,
	    "docker cannot enforce a network egress allowlist; use 'deny' or 'allow', or set "
	    "strict=false",
	    (char *)NULL);
	char *after =
	    sh_out(&st, "docker ps -aq --filter label=io.aksandbox.test=%s | wc -l", run_label);
	assert_string_equal(before, after);
	free(before);
	free(after);
	f->policy.strict = false;
	create_sandbox(f);
	char *net = inspect(f->id, "{{.HostConfig.NetworkMode}}");
	assert_string_not_equal(net, "none");
	free(net);
}

/* ---- hardening: what an attacker's code inside the sandbox tries ----------------------------- */

/* A file of the workspace, read with download_file: no process is started in the container
 * (the shell forks nothing for it either way), so it works while the container cannot fork. */
static char *read_ws(fixture *f, const char *path)
{
	aks_call call;
	aks_call_init(&call, 30, &f->policy, NULL, NULL);
	aks_error *err = NULL;
	aks_result *r = NULL;
	check_ok(aks_sandbox_download_file(f->sb, path, &call, &r, &err), err);
	size_t len = 0;
	const char *data = (const char *)aks_result_get_file(r, 0, NULL, NULL, &len);
	char *s = strndup(data, len);
	aks_result_free(r);
	return s;
}

/* Waits (up to 90 s) until the sandbox runs a command again. */
static void wait_answers(fixture *f)
{
	int64_t until = now_ms() + 90000;
	for (;;) {
		aks_result *r = NULL;
		aks_error *err = NULL;
		int rc = run(f, NULL, "echo alive", 30, NULL, &r, &err);
		bool ok = rc == AKS_OK && aks_result_get_exit_code(r) == 0 &&
		          strcmp(aks_result_get_stdout(r, NULL), "alive\n") == 0;
		if (!ok && now_ms() > until)
			fail_msg("the sandbox does not answer after the fork bomb: %s",
			         err ? aks_error_message(err) : aks_result_get_stderr(r, NULL));
		aks_result_free(r);
		if (err)
			aks_error_free(err);
		if (ok)
			return;
		usleep(500000);
	}
}

/* A bounded fork bomb (1000 sleeps of 10 s; each records its number, and the shell stops at
 * the first fork that fails) stays under `limit` tasks in the container; the host still
 * forks, the engine counts no more host tasks than the container's PidsLimit, and the
 * sandbox answers again once the sleeps are over. The bomb is dash's (sh): bash retries a
 * failed fork with a growing sleep for half a minute, dash stops at once. */
static void fork_bomb(fixture *f, int limit)
{
	aks_result *r = NULL;
	aks_error *err = NULL;
	check_ok(run(f, NULL,
	             "echo 0 > /workspace/started; "
	             "sh -c 'for i in $(seq 1000); do sleep 10 & echo $i > /workspace/started; "
	             "done'",
	             60, NULL, &r, &err),
	         err);
	aks_result_free(r);
	int64_t bomb_end = now_ms(); /* every sleep of it started before */
	char *started = read_ws(f, "started");
	int n = atoi(started);
	if (n >= limit || n < limit / 2)
		fail_msg("the fork bomb started %s processes (limit %d)", started, limit);
	free(started);
	int st;
	char *host = sh_out(&st, "echo host-forks");
	assert_string_equal(host, "host-forks");
	free(host);
	char *pids = sh_out(&st, "docker stats --no-stream --format '{{.PIDs}}' %s", f->id);
	char *max = inspect(f->id, "{{.HostConfig.PidsLimit}}");
	if (atoll(max) <= 0 || atoll(pids) > atoll(max))
		fail_msg("the engine counts %s host tasks, the container's PidsLimit is %s", pids,
		         max);
	free(pids);
	free(max);
	/* The bomb is over when its sleeps end by themselves, 10 s after they started (until
	 * then the sandbox can fork nothing: a command would fail, and under gVisor the exec
	 * itself); then the sandbox answers, and the teardown removes an idle container,
	 * which a loaded machine does well within its deadline. */
	int64_t left_ms = bomb_end + 11000 - now_ms();
	if (left_ms > 0)
		usleep((useconds_t)left_ms * 1000);
	wait_answers(f);
	char *left = ctr_procs(f->id, "sleep 10");
	assert_string_equal(left, "");
	free(left);
}

/* Every container gets a task limit by default (512); pids_limit sets it (0: none of ours),
 * and a fork bomb stops there, under runc and under gVisor. */
static void t_pids_limit(void **state)
{
	fixture *f = *state;
	open_provider(f, NULL);
	create_sandbox(f);
	char *got = inspect(f->id, "{{.HostConfig.PidsLimit}}");
	assert_string_equal(got, "512");
	free(got);
	teardown_sandbox(f);
	open_provider(f, "    image: " IMAGE "\n    pids_limit: 0\n");
	create_sandbox(f);
	got = inspect(f->id, "{{.HostConfig.PidsLimit}}");
	assert_true(strcmp(got, "0") == 0 || strcmp(got, "<nil>") == 0);
	free(got);
	teardown_sandbox(f);
	open_provider(f, "    image: " IMAGE "\n    pids_limit: 100\n");
	create_sandbox(f);
	got = inspect(f->id, "{{.HostConfig.PidsLimit}}");
	assert_string_equal(got, "100");
	free(got);
	fork_bomb(f, 100);
}

/* Under gVisor the container's host tasks are gVisor's own (its Sentry needs a dozen host
 * tasks per process it runs): the limit is RLIMIT_NPROC in gVisor's kernel, with a host
 * PidsLimit above it as a backstop. */
static void t_pids_limit_runsc(void **state)
{
	fixture *f = *state;
	open_provider(f, "    image: " IMAGE "\n    runtime: runsc\n    pids_limit: 100\n");
	create_sandbox(f);
	char *got = inspect(f->id, "{{.HostConfig.PidsLimit}} {{range .HostConfig.Ulimits}}"
	                           "{{.Name}}={{.Soft}}:{{.Hard}}{{end}}");
	assert_string_equal(got, "1856 nproc=100:100");
	free(got);
	fork_bomb(f, 100);
}

/* pids_limit: a number of tasks, 0, or a configuration error naming the key. */
static void t_pids_limit_config(void **state)
{
	fixture *f = *state;
	const char *bad[] = {"-1", "3"};
	for (int i = 0; i < 2; i++) {
		char *extra = xasprintf("    image: " IMAGE "\n    pids_limit: %s\n", bad[i]);
		char *yaml = xasprintf("%s/bad-pids.yaml", tmpdir);
		FILE *fp = fopen(yaml, "w");
		fprintf(fp, "sandbox:\n  enabled: true\n  type: docker\n  docker:\n%s", extra);
		fclose(fp);
		aks_error *err = NULL;
		check_ok(aks_config_load_block(plugin, yaml, &f->config, &err), err);
		int rc = aks_provider_open(plugin, f->config, &f->prov, &err);
		check_error(rc, &err, AKS_ECONFIG, "pids_limit", bad[i], (char *)NULL);
		aks_config_free(f->config);
		f->config = NULL;
		unlink(yaml);
		free(yaml);
		free(extra);
	}
}

/* What the attacker's code finds out about its privileges, from inside: its ids, effective and
 * bounding capabilities, no_new_privs (prctl: gVisor's /proc/self/status has no NoNewPrivs
 * line), its seccomp mode, whether raw sockets open (ICMP, AF_PACKET), and mknod of the host's
 * root disk and of /dev/mem in the writable places: refused, or made but opening nothing. */
static char *privileges(fixture *f)
{
	struct stat st;
	assert_int_equal(stat("/", &st), 0);
	char *code = xasprintf(
	    "import ctypes, os, socket, stat\n"
	    "st = dict(l.rstrip('\\n').split(':\\t', 1) for l in open('/proc/self/status') "
	    "if ':\\t' in l)\n"
	    "libc = ctypes.CDLL(None, use_errno=True)\n"
	    "print('uid', os.getuid(), os.getgid())\n"
	    "print('CapEff', st['CapEff'], 'CapBnd', st['CapBnd'])\n"
	    "print('NoNewPrivs', libc.prctl(39, 0, 0, 0, 0))\n"
	    "print('Seccomp', st.get('Seccomp'))\n"
	    "for name, args in (('raw_icmp', (socket.AF_INET, socket.SOCK_RAW, "
	    "socket.IPPROTO_ICMP)), ('af_packet', (socket.AF_PACKET, socket.SOCK_RAW, 0))):\n"
	    "    try:\n"
	    "        socket.socket(*args).close(); print(name, 'OPENED')\n"
	    "    except OSError:\n"
	    "        print(name, 'refused')\n"
	    "for d in ('/workspace', '/tmp', '/dev/shm'):\n"
	    "    for name, mode, dev in (('disk', stat.S_IFBLK | 0o600, os.makedev(%u, %u)), "
	    "('mem', stat.S_IFCHR | 0o600, os.makedev(1, 1))):\n"
	    "        p = d + '/aks-node-' + name\n"
	    "        try:\n"
	    "            os.mknod(p, mode, dev)\n"
	    "        except OSError:\n"
	    "            print('mknod', d, name, 'refused'); continue\n"
	    "        try:\n"
	    "            os.close(os.open(p, os.O_RDONLY)); print('mknod', d, name, 'OPENS')\n"
	    "        except OSError:\n"
	    "            print('mknod', d, name, 'made, opens nothing')\n",
	    major(st.st_dev), minor(st.st_dev));
	aks_result *r = NULL;
	aks_error *err = NULL;
	check_ok(run(f, "python", code, 60, NULL, &r, &err), err);
	free(code);
	if (aks_result_get_exit_code(r) != 0)
		fail_msg("the probe failed: %s", aks_result_get_stderr(r, NULL));
	char *out = strdup(aks_result_get_stdout(r, NULL));
	aks_result_free(r);
	return out;
}

static void expect_line(const char *out, const char *line)
{
	char *want = xasprintf("%s\n", line);
	if (!strstr(out, want))
		fail_msg("expected the line '%s' in:\n%s", line, out);
	free(want);
}

/* Every capability is dropped but CHOWN, DAC_OVERRIDE and FOWNER (0xb), no_new_privs is set,
 * Docker's default seccomp profile filters (mode 2), raw sockets do not open, and mknod
 * fails: as the engine was told (inspect) and as the code inside finds it. */
static void t_hardened(void **state)
{
	fixture *f = *state;
	char *got = inspect(f->id, "{{.HostConfig.CapDrop}} {{.HostConfig.CapAdd}} "
	                           "{{.HostConfig.SecurityOpt}} {{.HostConfig.Privileged}}");
	assert_string_equal(got, "[ALL] [CHOWN DAC_OVERRIDE FOWNER] [no-new-privileges] false");
	free(got);
	char *out = privileges(f);
	expect_line(out, "uid 0 0");
	expect_line(out, "CapEff 000000000000000b CapBnd 000000000000000b");
	expect_line(out, "NoNewPrivs 1");
	expect_line(out, "Seccomp 2");
	expect_line(out, "raw_icmp refused");
	expect_line(out, "af_packet refused");
	const char *places[] = {"/workspace", "/tmp", "/dev/shm"};
	for (int i = 0; i < 3; i++) {
		char *l =
		    xasprintf("mknod %s disk refused\nmknod %s mem refused", places[i], places[i]);
		expect_line(out, l);
		free(l);
	}
	free(out);
}

/* The same under gVisor, whose kernel checks them itself (Docker's seccomp profile is not
 * loaded inside gVisor unless runsc runs with --oci-seccomp: mode 0). gVisor's own tmpfs
 * (/tmp, /dev/shm) lets mknod make a node without CAP_MKNOD, but the node is gVisor's and
 * opens no device of the host's. */
static void t_hardened_runsc(void **state)
{
	fixture *f = *state;
	open_provider(f, "    image: " IMAGE "\n    runtime: runsc\n");
	create_sandbox(f);
	char *got = inspect(f->id, "{{.HostConfig.CapDrop}} {{.HostConfig.CapAdd}} "
	                           "{{.HostConfig.SecurityOpt}} {{.HostConfig.Privileged}}");
	assert_string_equal(got, "[ALL] [CHOWN DAC_OVERRIDE FOWNER] [no-new-privileges] false");
	free(got);
	char *out = privileges(f);
	expect_line(out, "uid 0 0");
	expect_line(out, "CapEff 000000000000000b CapBnd 000000000000000b");
	expect_line(out, "NoNewPrivs 1");
	expect_line(out, "raw_icmp refused");
	expect_line(out, "af_packet refused");
	expect_line(out, "mknod /workspace disk refused\nmknod /workspace mem refused");
	if (strstr(out, "OPENS"))
		fail_msg("a device node opens under gVisor:\n%s", out);
	free(out);
}

/* user: the containers run as that uid:gid, every process of theirs without capabilities;
 * the workspace is the user's (given by one exec as root at create), files uploaded into new
 * directories are the user's to change, and the agent runs as the user too. */
static void check_user(fixture *f)
{
	char *out = privileges(f);
	expect_line(out, "uid 1000 1000");
	expect_line(out, "CapEff 0000000000000000 CapBnd 000000000000000b");
	expect_line(out, "NoNewPrivs 1");
	expect_line(out, "raw_icmp refused");
	free(out);
	/* owners by python: coreutils' stat uses a statx flag this gVisor refuses */
#define OWNERS                                                                                     \
	"python3 -c \"import os, sys; [print('%d:%d' % (os.stat(p).st_uid, os.stat(p).st_gid)) "   \
	"for p in sys.argv[1:]]\" "
	out = run_ok(f, OWNERS "/workspace; echo w > /workspace/w.txt && cat /workspace/w.txt");
	assert_string_equal(out, "1000:1000\nw");
	free(out);
	aks_call call;
	aks_call_init(&call, 30, &f->policy, NULL, NULL);
	aks_error *err = NULL;
	check_ok(aks_sandbox_upload_file(f->sb, "up/dir/u.txt", "up", 2, &call, &err), err);
	out = run_ok(f, "cd /workspace/up/dir && " OWNERS ". .. u.txt && echo more >> u.txt "
	                "&& echo new > n.txt && rm u.txt && ls");
#undef OWNERS
	assert_string_equal(out, "1000:1000\n1000:1000\n1000:1000\nn.txt");
	free(out);
	char *got = read_ws(f, "up/dir/n.txt");
	assert_string_equal(got, "new\n");
	free(got);
	/* python runs, and a timeout still kills the whole tree (one user: nothing escapes) */
	aks_result *r = NULL;
	check_ok(run(f, "python", "import os\nprint(os.getuid())", 30, NULL, &r, &err), err);
	assert_string_equal(aks_result_get_stdout(r, NULL), "1000\n");
	aks_result_free(r);
	int rc = run(f, NULL, "(sleep 340 >/dev/null 2>&1 &); sleep 341", 2, NULL, &r, &err);
	check_error(rc, &err, AKS_ETIMEOUT, "exceeded timeout", (char *)NULL);
	aks_result_free(r);
	char *left = ctr_procs(f->id, "sleep 34");
	assert_string_equal(left, "");
	free(left);
	if (with_agent) {
		int pid = agent_pid(f->id);
		assert_true(pid > 0);
		char *cmd = xasprintf("grep ^Uid: /proc/%d/status | cut -f2", pid);
		char *uid = ctr_sh(f->id, NULL, cmd);
		assert_string_equal(uid, "1000");
		free(uid);
		free(cmd);
	}
}

/* Under a filesystem policy (a read-only root: the agent in its volume), with runc. */
static void t_user(void **state)
{
	fixture *f = *state;
	static const char *const fs_write[] = {"/workspace", NULL};
	f->policy.fs_allow_write = fs_write;
	open_provider(f, "    image: " IMAGE "\n    user: \"1000:1000\"\n");
	create_sandbox(f);
	char *got = inspect(f->id, "{{.Config.User}} {{.HostConfig.ReadonlyRootfs}}");
	assert_string_equal(got, "1000:1000 true");
	free(got);
	if (!strstr(aks_provider_get_description(f->prov),
	            "; as user 1000:1000 (no capabilities in effect)"))
		fail_msg("description: %s", aks_provider_get_description(f->prov));
	check_user(f);
}

/* gVisor, without a filesystem policy (the agent placed in the root). */
static void t_user_runsc(void **state)
{
	fixture *f = *state;
	open_provider(f, "    image: " IMAGE "\n    runtime: runsc\n    user: \"1000:1000\"\n");
	create_sandbox(f);
	check_user(f);
}

/* user: numeric UID or UID:GID, else a configuration error naming the key. */
static void t_user_config(void **state)
{
	fixture *f = *state;
	const char *bad[] = {"root", "1000:", ":1000", "-1", "1000:users", "99999999999"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *yaml = xasprintf("%s/bad-user.yaml", tmpdir);
		FILE *fp = fopen(yaml, "w");
		fprintf(fp,
		        "sandbox:\n  enabled: true\n  type: docker\n  docker:\n    user: \"%s\"\n",
		        bad[i]);
		fclose(fp);
		aks_error *err = NULL;
		check_ok(aks_config_load_block(plugin, yaml, &f->config, &err), err);
		int rc = aks_provider_open(plugin, f->config, &f->prov, &err);
		char *want = xasprintf("user '%s'", bad[i]);
		check_error(rc, &err, AKS_ECONFIG, want, "UID[:GID]", (char *)NULL);
		free(want);
		aks_config_free(f->config);
		f->config = NULL;
		unlink(yaml);
		free(yaml);
	}
}

/* Under a filesystem policy, every place the code inside can create a file in: each mount
 * point it sees (/proc/self/mountinfo, escapes decoded) and a few known places, a file created
 * and removed in each, and a POSIX message queue (mq_open, which needs no path); sorted, one
 * per line. */
static char *writable_places(fixture *f)
{
	static const char code[] =
	    "import ctypes, os\n"
	    "places = {'/', '/tmp', '/var/tmp', '/run', '/root', '/etc', '/home', '/dev', "
	    "'/dev/shm', '/dev/mqueue', '/sys/fs/cgroup', '/workspace', '/.aksandbox'}\n"
	    "for line in open('/proc/self/mountinfo'):\n"
	    "    m = line.split()[4]\n"
	    "    places.add(m.encode().decode('unicode_escape'))\n"
	    "found = []\n"
	    "for d in sorted(places):\n"
	    "    if not os.path.isdir(d):\n"
	    "        continue\n"
	    "    p = os.path.join(d, '.aks-probe-%d' % os.getpid())\n"
	    "    try:\n"
	    "        os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))\n"
	    "    except OSError:\n"
	    "        continue\n"
	    "    os.unlink(p)\n"
	    "    found.append(d)\n"
	    "try:\n"
	    "    rt = ctypes.CDLL('librt.so.1', use_errno=True)\n"
	    "    rt.mq_open.restype = ctypes.c_int\n"
	    "    if rt.mq_open(b'/aks-probe', os.O_CREAT | os.O_RDWR, 0o600, None) >= 0:\n"
	    "        rt.mq_unlink(b'/aks-probe')\n"
	    "        found.append('(a POSIX message queue)')\n"
	    "except OSError:\n"
	    "    pass\n"
	    "print('\\n'.join(found))\n";
	aks_result *r = NULL;
	aks_error *err = NULL;
	check_ok(run(f, "python", code, 60, NULL, &r, &err), err);
	if (aks_result_get_exit_code(r) != 0)
		fail_msg("the probe failed: %s", aks_result_get_stderr(r, NULL));
	char *out = strdup(aks_result_get_stdout(r, NULL));
	aks_result_free(r);
	size_t n = strlen(out);
	while (n && out[n - 1] == '\n')
		out[--n] = '\0';
	return out;
}

static void check_writable(fixture *f, const char *want)
{
	char *got = writable_places(f);
	if (strcmp(got, want) != 0)
		fail_msg("writable under a filesystem policy:\n%s\nallowed:\n%s", got, want);
	free(got);
}

/* The policy allows /workspace; the agent's own volume is writable too (docs: it is the
 * sandbox's own, and holds only the agent). Nothing else: not /dev (a 64 MB tmpfs), /dev/shm,
 * /dev/mqueue or message queues, the tmpfs that holds the cgroup hierarchies. */
static void t_fs_writable(void **state)
{
	fixture *f = *state;
	check_writable(f, with_agent ? "/.aksandbox\n/workspace" : "/workspace");
	/* Docker's own read-only paths are kept: ours extend the engine's default list */
	int st;
	char *dflt = sh_out(&st, "c=$(docker create " IMAGE " true) && docker inspect -f "
	                         "'{{range .HostConfig.ReadonlyPaths}}{{.}} {{end}}' $c; "
	                         "docker rm $c >/dev/null");
	char *ours = inspect(f->id, " {{range .HostConfig.ReadonlyPaths}}{{.}} {{end}}");
	for (char *save = NULL, *p = strtok_r(dflt, " ", &save); p;
	     p = strtok_r(NULL, " ", &save)) {
		char *w = xasprintf(" %s ", p);
		if (!strstr(ours, w))
			fail_msg("the engine's read-only path %s is not in ours:%s", p, ours);
		free(w);
	}
	free(dflt);
	free(ours);
}

/* gVisor: its own /tmp (a tmpfs it mounts where the spec has none) is closed by a read-only
 * tmpfs of ours, /dev/shm too. What this gVisor release cannot close is documented as its
 * in-memory scratch: its /dev (a devtmpfs that cannot be made read-only and keep its device
 * nodes), root's only, and POSIX message queues (it enforces neither RLIMIT_MSGQUEUE nor a
 * count). As a user other than root /dev is closed too. */
static void t_fs_writable_runsc(void **state)
{
	fixture *f = *state;
	static const char *const fs_write[] = {"/workspace", NULL};
	f->policy.fs_allow_write = fs_write;
	open_provider(f, "    image: " IMAGE "\n    runtime: runsc\n");
	create_sandbox(f);
	check_writable(f, with_agent ? "/.aksandbox\n/dev\n/workspace\n(a POSIX message queue)"
	                             : "/dev\n/workspace\n(a POSIX message queue)");
	teardown_sandbox(f);
	open_provider(f, "    image: " IMAGE "\n    runtime: runsc\n    user: \"1000:1000\"\n");
	create_sandbox(f);
	check_writable(f, "/workspace\n(a POSIX message queue)");
}

/* n bytes of names of `name` bytes of `c` joined by '/'. */
static char *long_path(size_t n, size_t name, char c)
{
	char *s = malloc(n + 1);
	assert_non_null(s);
	for (size_t i = 0; i < n; i++)
		s[i] = (i % (name + 1) == name) ? '/' : c;
	s[n] = '\0';
	return s;
}

/* Refused before the engine is asked, with a clear message that shows a bounded prefix. */
static void expect_long_refused(fixture *f, const char *path, const char *why)
{
	aks_call call;
	aks_call_init(&call, 30, &f->policy, NULL, NULL);
	for (int op = 0; op < 2; op++) {
		aks_error *err = NULL;
		aks_result *r = NULL;
		int64_t t0 = now_ms();
		int rc = op ? aks_sandbox_download_file(f->sb, path, &call, &r, &err)
		            : aks_sandbox_upload_file(f->sb, path, "x", 1, &call, &err);
		if (rc != AKS_ELIMIT || !err)
			fail_msg("%s of a %zu-byte path: %d %s", op ? "download" : "upload",
			         strlen(path), rc, err ? aks_error_message(err) : "");
		const char *m = aks_error_message(err);
		if (!strstr(m, why) || strlen(m) > 300 || strstr(m, "HTTP status"))
			fail_msg("the message: %s", m);
		if (now_ms() - t0 > 1000)
			fail_msg("the refusal took %lld ms", (long long)(now_ms() - t0));
		aks_error_free(err);
		aks_result_free(r);
	}
}

/* Very long paths to the file tools: a clear refusal (AKS_ELIMIT) that echoes at most a
 * bounded prefix, never the engine's HTTP 500 with the whole path; the longest accepted
 * container path (3072 bytes) works both ways. */
static void t_long_paths(void **state)
{
	fixture *f = *state;
	char *p = long_path(5000, 1, 'a');
	expect_long_refused(f, p,
	                    "is 5000 bytes: a sandbox path has at most 3061 below /workspace/");
	free(p);
	p = long_path(70000, 200, 'a');
	expect_long_refused(f, p, "is 70000 bytes");
	free(p);
	char *name = long_path(300, 1000, 'n');
	p = xasprintf("dir/%s", name);
	expect_long_refused(f, p, "has a name of 300 bytes: at most 255");
	free(p);
	free(name);
	/* at the bound: works, and the file is really there */
	p = long_path(3072 - strlen("/workspace/"), 200, 'b');
	aks_call call;
	aks_call_init(&call, 60, &f->policy, NULL, NULL);
	aks_error *err = NULL;
	check_ok(aks_sandbox_upload_file(f->sb, p, "at the bound", 12, &call, &err), err);
	char *got = read_ws(f, p);
	assert_string_equal(got, "at the bound");
	free(got);
	char *cmd = xasprintf("cat '/workspace/%s'", p);
	got = run_ok(f, cmd);
	assert_string_equal(got, "at the bound");
	free(got);
	free(cmd);
	free(p);
}

/* ---- runtimes -------------------------------------------------------------------------------- */

static void t_runsc(void **state)
{
	fixture *f = *state;
	open_provider(f, "    image: " IMAGE "\n    runtime: runsc\n");
	assert_int_equal(aks_provider_get_capabilities(f->prov)->isolation,
	                 AKS_ISOLATION_SYSCALL_FILTER);
	create_sandbox(f);
	char *rt = inspect(f->id, "{{.HostConfig.Runtime}}");
	assert_string_equal(rt, "runsc");
	free(rt);
	char *k = run_ok(f, "dmesg | head -1; cat /proc/version");
	if (!strstr(k, "Starting gVisor"))
		fail_msg("the sandbox does not see gVisor's kernel: %s", k);
	free(k);
	/* python, files and the timeout kill work under gVisor too */
	aks_result *r = NULL;
	aks_error *err = NULL;
	check_ok(run(f, "python", "print(6 * 7)", 30, NULL, &r, &err), err);
	assert_string_equal(aks_result_get_stdout(r, NULL), "42\n");
	aks_result_free(r);
	int rc = run(f, NULL, "(sleep 320 >/dev/null 2>&1 &); sleep 321", 2, NULL, &r, &err);
	check_error(rc, &err, AKS_ETIMEOUT, "exceeded timeout", (char *)NULL);
	aks_result_free(r);
	char *left = procs_matching(f, "sleep 32");
	assert_string_equal(left, "");
	free(left);
}

/* control for t_runsc: the default runtime shares the host's kernel */
static void t_runc_is_host_kernel(void **state)
{
	fixture *f = *state;
	assert_int_equal(aks_provider_get_capabilities(f->prov)->isolation,
	                 AKS_ISOLATION_CONTAINER);
	char *k = run_ok(f, "cat /proc/version");
	int st;
	char *host = sh_out(&st, "cat /proc/version");
	assert_string_equal(k, host);
	free(k);
	free(host);
}

/* ---- configuration and the engine ------------------------------------------------------------ */

static void t_missing_image(void **state)
{
	fixture *f = *state;
	open_provider(f, "    image: aksandbox-test:no-such-tag\n    pull: true\n");
	aks_call call;
	aks_call_init(&call, 60, &f->policy, NULL, NULL);
	aks_error *err = NULL;
	aks_sandbox *sb = NULL;
	int64_t t0 = now_ms();
	int rc = aks_provider_create(f->prov, &call, &sb, &err);
	check_error(rc, &err, AKS_EPROVISION, "'aksandbox-test:no-such-tag'", "could not be pulled",
	            "docker pull aksandbox-test:no-such-tag", "docker load", "docker import",
	            (char *)NULL);
	if (now_ms() - t0 > 45000)
		fail_msg("the failed pull took %lld ms", (long long)(now_ms() - t0));
	/* nothing is left behind: no container, no volume */
	int st;
	char *left = sh_out(&st,
	                    "{ docker ps -aq --filter label=io.aksandbox.test=%s --filter "
	                    "ancestor=aksandbox-test:no-such-tag; docker volume ls -q --filter "
	                    "dangling=true --filter label=io.aksandbox.test=%s; } | wc -l",
	                    run_label, run_label);
	assert_string_equal(left, "0");
	free(left);
}

static void t_unreachable_engine(void **state)
{
	fixture *f = *state;
	const char *hosts[] = {"unix:///nonexistent/docker.sock", "tcp://127.0.0.1:1"};
	for (int i = 0; i < 2; i++) {
		setenv("DOCKER_HOST", hosts[i], 1);
		fixture g = {0};
		aks_policy_init(&g.policy);
		open_provider(&g, NULL);
		unsetenv("DOCKER_HOST");
		aks_call call;
		aks_call_init(&call, 30, NULL, NULL, NULL);
		aks_error *err = NULL;
		aks_sandbox *sb = NULL;
		int rc = aks_provider_create(g.prov, &call, &sb, &err);
		check_error(rc, &err, AKS_EPROVISION, "cannot reach the Docker Engine at", hosts[i],
		            "dockerd", (char *)NULL);
		aks_provider_close(g.prov);
		aks_config_free(g.config);
	}
	/* the config's host wins over DOCKER_HOST, and unix:// works */
	setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock", 1);
	open_provider(f, "    image: " IMAGE "\n    host: unix:///var/run/docker.sock\n");
	unsetenv("DOCKER_HOST");
	create_sandbox(f);
	char *out = run_ok(f, "echo via-host-key");
	assert_string_equal(out, "via-host-key");
	free(out);
}

/* environment: attached: bind to a container we did not create; destroy
 * leaves it alone. */
static void t_attach_to(void **state)
{
	fixture *f = *state;
	char name[96];
	snprintf(name, sizeof(name), "aks-ext-%s", run_label);
	int st;
	char *out = sh_out(&st,
	                   "docker run -d --name %s --label io.aksandbox.test=%s " IMAGE
	                   " sleep infinity 2>&1",
	                   name, run_label);
	if (st != 0)
		fail_msg("docker run failed: %s", out);
	free(out);
	char *extra = xasprintf("    image: " IMAGE "\n    attach_to: %s\n", name);
	open_provider(f, extra);
	free(extra);
	create_sandbox(f);
	assert_string_equal(f->id, name);
	out = run_ok(f, "pwd; hostname");
	assert_non_null(strstr(out, "/workspace"));
	free(out);
	aks_sandbox_close(f->sb);
	f->sb = NULL;
	/* the core attaches to attach_to (environment: attached): same handle */
	aks_call call;
	aks_call_init(&call, 30, NULL, NULL, NULL);
	aks_error *err = NULL;
	check_ok(aks_provider_attach(f->prov, name, &call, &f->sb, &err), err);
	assert_string_equal(aks_sandbox_get_id(f->sb), name);
	out = run_ok(f, "pwd");
	assert_string_equal(out, "/workspace");
	free(out);
	aks_sandbox_close(f->sb);
	f->sb = NULL;
	check_ok(aks_provider_destroy(f->prov, f->id, &call, &err), err);
	assert_true(container_exists(name));
	/* policy the existing container does not enforce: refused under strict */
	f->policy.network_egress = AKS_EGRESS_DENY;
	aks_call_init(&call, 30, &f->policy, NULL, NULL);
	aks_sandbox *sb = NULL;
	int rc = aks_provider_create(f->prov, &call, &sb, &err);
	check_error(rc, &err, AKS_EPOLICY, "does not enforce network egress deny", (char *)NULL);
	rc = aks_provider_attach(f->prov, name, &call, &sb, &err);
	check_error(rc, &err, AKS_EPOLICY, "does not enforce network egress deny", (char *)NULL);
	free(sh_out(&st, "docker rm -f %s >/dev/null 2>&1", name));
	free(f->id);
	f->id = NULL;
}

/* ---- through aksandbox-agent (test_docker_agent only) ---------------------------------------- */

/* The agent's pid in the container, or 0: of the processes running AGENT_IN_CTR (the
 * resident agent, its supervisors, which are forks of it, and the relays of the hosts
 * connected to it: docs/agent-protocol.md, "Resident agents"), the one whose parent is not
 * one and is in the container (a relay's is not). relay true: the one relay of a handle to
 * it instead (0 when none). */
static int agent_proc(const char *id, bool relay)
{
	char *out =
	    ctr_sh(id, NULL,
	           "for p in /proc/[0-9]*; do c=$(tr \"\\\\0\" \" \" < $p/cmdline 2>/dev/null); "
	           "case \"$c\" in \"" AGENT_IN_CTR " \"*) read -r s < $p/stat; "
	           "set -- ${s##*)}; echo ${p#/proc/} $2;; esac; done");
	int pids[64], ppids[64], n = 0;
	for (char *line = out; line && *line && n < 64;) {
		if (sscanf(line, "%d %d", &pids[n], &ppids[n]) == 2)
			n++;
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	free(out);
	int found = 0;
	for (int i = 0; i < n; i++) {
		bool child = false;
		for (int j = 0; j < n; j++)
			child = child || ppids[i] == pids[j];
		/* an exec's process has no parent in the container's namespace (0); the agent
		 * a relay started left it for init */
		if (child || (ppids[i] == 0) != relay)
			continue; /* a supervisor, or the other kind */
		if (found)
			fail_msg("more than one %s in %s (%d and %d)", relay ? "relay" : "agent",
			         id, found, pids[i]);
		found = pids[i];
	}
	return found;
}

static int agent_pid(const char *id)
{
	return agent_proc(id, false);
}

static char *python_out(fixture *f, const char *code, int *exit_code, char **notice)
{
	aks_result *r = NULL;
	aks_error *err = NULL;
	check_ok(run(f, "python", code, 30, NULL, &r, &err), err);
	char *out = strdup(aks_result_get_stdout(r, NULL));
	if (exit_code)
		*exit_code = aks_result_get_exit_code(r);
	if (notice)
		*notice = aks_result_get_notice(r) ? strdup(aks_result_get_notice(r)) : NULL;
	aks_result_free(r);
	return out;
}

/* Placement, the persistent Python session, the description, and close: the agent stays
 * resident in the container, with the state and what it started, for the next handle. */
static void t_agent_session(void **state)
{
	fixture *f = *state;
	assert_true(aks_provider_get_capabilities(f->prov)->stateful);
	const char *d = aks_provider_get_description(f->prov);
	if (!strstr(d, "through aksandbox-agent " DK_TEST_AGENT) || !strstr(d, AGENT_IN_CTR))
		fail_msg("description: %s", d);
	/* placed before the first operation (between create and start), mode 0755 */
	int st;
	char *ls = ctr_sh(f->id, &st, "stat -c %a " AGENT_IN_CTR);
	assert_int_equal(st, 0);
	assert_string_equal(ls, "755");
	free(ls);
	assert_int_equal(agent_pid(f->id), 0); /* started lazily */

	char *out = python_out(f, "x = 41", NULL, NULL);
	assert_string_equal(out, "");
	free(out);
	out = python_out(f, "print(x + 1)", NULL, NULL);
	assert_string_equal(out, "42\n");
	free(out);
	out = python_out(f, "import os\nos.getcwd()", NULL, NULL); /* a final expression */
	assert_string_equal(out, "'/workspace'\n");
	free(out);
	int pid = agent_pid(f->id);
	assert_true(pid > 0);
	/* one agent for every operation */
	free(run_ok(f, "true"));
	aks_call call;
	aks_call_init(&call, 30, NULL, NULL, NULL);
	aks_error *err = NULL;
	check_ok(aks_sandbox_upload_file(f->sb, "s.txt", "s", 1, &call, &err), err);
	assert_int_equal(agent_pid(f->id), pid);

	/* a detached leftover of a finished command survives the call (as with docker exec)
	 * and the handle: the agent it was left to is resident in the container, and closing
	 * the handle ends only the handle's relay to it */
	free(run_ok(f, "(sleep 404 >/dev/null 2>&1 &); true"));
	char *left = ctr_procs(f->id, "sleep 404");
	assert_string_equal(left, "sleep 404 ");
	free(left);
	aks_sandbox_close(f->sb);
	f->sb = NULL;
	assert_int_equal(agent_pid(f->id), pid);
	left = ctr_procs(f->id, "sleep 404");
	assert_string_equal(left, "sleep 404 ");
	free(left);
	/* and the handle's relay is gone */
	for (int i = 0; i < 50 && agent_proc(f->id, true) > 0; i++)
		usleep(100 * 1000);
	assert_int_equal(agent_proc(f->id, true), 0);

	/* a new handle (as another host process would) reaches the same agent: the state is
	 * the container's */
	check_ok(aks_provider_attach(f->prov, f->id, &call, &f->sb, &err), err);
	int code = 0;
	out = python_out(f, "print(x)", &code, NULL);
	assert_int_equal(code, 0);
	assert_string_equal(out, "41\n");
	free(out);
	assert_int_equal(agent_pid(f->id), pid);
}

/* Another interpreter than python3 runs per call (through the agent): not stateful. */
static void t_agent_other_python(void **state)
{
	fixture *f = *state;
	char *extra = xasprintf("    image: " IMAGE "\n    python: python3.11\n");
	open_provider(f, extra);
	free(extra);
	assert_false(aks_provider_get_capabilities(f->prov)->stateful);
	if (!strstr(aks_provider_get_description(f->prov), "Python runs per call"))
		fail_msg("description: %s", aks_provider_get_description(f->prov));
	create_sandbox(f);
	free(python_out(f, "x = 41", NULL, NULL));
	int code = 0;
	char *out = python_out(f, "import sys\nprint(sys.version_info[:2])\nprint(x)", &code, NULL);
	assert_string_equal(out, "(3, 11)\n");
	assert_int_equal(code, 1);
	free(out);
	assert_true(agent_pid(f->id) > 0);
}

/* A timeout kills a double-forked process, and one that left the process group and
 * cleared its environment (beyond the per-call marker sweep), checked by docker exec. */
static void t_agent_timeout_tree(void **state)
{
	fixture *f = *state;
	aks_result *r = NULL;
	aks_error *err = NULL;
	int64_t t0 = now_ms();
	int rc = run(f, NULL,
	             "echo started; (sleep 350 >/dev/null 2>&1 &); "
	             "(setsid env -i /bin/sleep 351 >/dev/null 2>&1 &); sleep 352",
	             2, NULL, &r, &err);
	int64_t took = now_ms() - t0;
	check_error(rc, &err, AKS_ETIMEOUT, "docker exec exceeded timeout 2s", (char *)NULL);
	assert_true(aks_result_timed_out(r));
	assert_int_equal(aks_result_get_exit_code(r), -1);
	assert_string_equal(aks_result_get_stdout(r, NULL), "started\n");
	aks_result_free(r);
	if (took < 1900 || took > 6000)
		fail_msg("the timed-out call took %lld ms", (long long)took);
	char *left = ctr_procs(f->id, "sleep 35");
	assert_string_equal(left, "");
	free(left);
	left = ctr_procs(f->id, "/bin/sleep 35");
	assert_string_equal(left, "");
	free(left);
	/* control: without the timeout the same escapee is there to be seen */
	free(run_ok(f, "(setsid env -i /bin/sleep 353 >/dev/null 2>&1 &); true"));
	left = ctr_procs(f->id, "/bin/sleep 353");
	assert_string_equal(left, "/bin/sleep 353 ");
	free(left);
	/* a Python session run past its deadline is interrupted; the session lives on */
	free(python_out(f, "kept = 7", NULL, NULL));
	rc = run(f, "python", "import time\nwhile True: time.sleep(0.1)", 2, NULL, &r, &err);
	check_error(rc, &err, AKS_ETIMEOUT, "docker exec exceeded timeout 2s", (char *)NULL);
	assert_true(aks_result_timed_out(r));
	aks_result_free(r);
	char *out = python_out(f, "print(kept)", NULL, NULL);
	assert_string_equal(out, "7\n");
	free(out);
}

static long vm_hwm_kb(void)
{
	FILE *fp = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;
	while (fp && fgets(line, sizeof(line), fp))
		if (strncmp(line, "VmHWM:", 6) == 0)
			kb = atol(line + 6);
	if (fp)
		fclose(fp);
	return kb;
}

/* 200 MiB of output streams through with bounded memory in this (the host) process: the
 * result keeps its cap and counts the rest. */
static void t_agent_big_output(void **state)
{
	fixture *f = *state;
	free(run_ok(f, "true")); /* the agent is up: its start is not measured */
	long before = vm_hwm_kb();
	aks_result *r = NULL;
	aks_error *err = NULL;
	check_ok(run(f, NULL, "head -c 209715200 /dev/zero | tr \"\\0\" a", 120, NULL, &r, &err),
	         err);
	long after = vm_hwm_kb();
	assert_int_equal(aks_result_get_exit_code(r), 0);
	assert_int_equal(aks_result_get_stream_total(r, 1), 209715200);
	assert_true(aks_result_is_truncated(r, 1));
	size_t len = 0;
	const char *out = aks_result_get_stdout(r, &len);
	assert_true(len > 0 && len <= AKS_DEFAULT_STREAM_CAP);
	for (size_t i = 0; i < len; i++)
		if (out[i] != 'a')
			fail_msg("stdout byte %zu is %d", i, out[i]);
	aks_result_free(r);
	print_message("# VmHWM %ld kB before, %ld kB after 200 MiB of output\n", before, after);
	if (after - before > 40 * 1024)
		fail_msg("peak RSS grew by %ld kB for 200 MiB of output", after - before);
}

/* An upload through the agent (size and SHA-256 verified there) is what a separate docker
 * exec finds in the container, byte for byte; a download comes back the same. */
static void t_agent_file_hash(void **state)
{
	fixture *f = *state;
	size_t n = 3 * 1024 * 1024 + 17;
	unsigned char *data = malloc(n);
	uint32_t x = 2463534242u;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 17, x ^= x << 5;
		data[i] = (unsigned char)x;
	}
	char *host_file = xasprintf("%s/upload.bin", tmpdir);
	FILE *fp = fopen(host_file, "wb");
	assert_non_null(fp);
	assert_int_equal(fwrite(data, 1, n, fp), n);
	fclose(fp);
	int st;
	char *want = sh_out(&st, "sha256sum < '%s' | cut -d' ' -f1", host_file);
	aks_call call;
	aks_call_init(&call, 60, NULL, NULL, NULL);
	aks_error *err = NULL;
	check_ok(aks_sandbox_upload_file(f->sb, "deep/er/upload.bin", data, n, &call, &err), err);
	assert_true(agent_pid(f->id) > 0); /* it went through the agent */
	char *got = ctr_sh(f->id, &st,
	                   "sha256sum < /workspace/deep/er/upload.bin | cut -d\" \" -f1; "
	                   "stat -c %s.%a /workspace/deep/er/upload.bin");
	char *expect = xasprintf("%s\n%zu.644", want, n);
	assert_string_equal(got, expect);
	free(got);
	free(expect);
	/* the same again with the archive API, independent of both */
	char *cp = sh_out(&st,
	                  "docker cp %s:/workspace/deep/er/upload.bin - | tar -xOf - | "
	                  "sha256sum | cut -d' ' -f1",
	                  f->id);
	assert_string_equal(cp, want);
	free(cp);
	aks_result *r = NULL;
	check_ok(aks_sandbox_download_file(f->sb, "deep/er/upload.bin", &call, &r, &err), err);
	size_t len = 0;
	const unsigned char *back = aks_result_get_file(r, 0, NULL, NULL, &len);
	assert_int_equal(len, n);
	assert_memory_equal(back, data, n);
	aks_result_free(r);
	/* replacing it: the old content never shows through */
	check_ok(aks_sandbox_upload_file(f->sb, "deep/er/upload.bin", "new", 3, &call, &err), err);
	got = ctr_sh(f->id, &st, "cat /workspace/deep/er/upload.bin");
	assert_string_equal(got, "new");
	free(got);
	free(want);
	free(host_file);
	free(data);
}

/* A killed agent is replaced by the next operation, which carries the notice. */
static void t_agent_killed(void **state)
{
	fixture *f = *state;
	free(python_out(f, "x = 41", NULL, NULL));
	int pid = agent_pid(f->id);
	assert_true(pid > 0);
	/* Only the stream is lost (the handle's relay killed, as when an exec dies): the
	 * resident agent is reached again, with its state, and nothing is said. */
	int relay = agent_proc(f->id, true);
	assert_true(relay > 0);
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "kill -9 %d", relay);
	int st;
	free(ctr_sh(f->id, &st, cmd));
	assert_int_equal(st, 0);
	for (int i = 0; i < 100 && agent_proc(f->id, true) == relay; i++)
		usleep(20000);
	int code = 0;
	char *notice = NULL;
	char *out = python_out(f, "print(x + 1)", &code, &notice);
	assert_string_equal(out, "42\n");
	assert_null(notice);
	free(out);
	assert_int_equal(agent_pid(f->id), pid);
	int relay_again = agent_proc(f->id, true);
	assert_true(relay_again > 0 && relay_again != relay);

	/* The agent itself killed: a new one, and the state is lost, said once. */
	snprintf(cmd, sizeof(cmd), "kill -9 %d", pid);
	free(ctr_sh(f->id, &st, cmd));
	assert_int_equal(st, 0);
	for (int i = 0; i < 100 && agent_pid(f->id) == pid; i++)
		usleep(20000);
	out = python_out(f, "print(x + 1)", &code, &notice);
	if (!notice || !strstr(notice, "aksandbox-agent was restarted"))
		fail_msg("no restart notice: %s", notice ? notice : "(none)");
	assert_int_equal(code, 1); /* NameError: x went with the old interpreter */
	free(out);
	free(notice);
	int again = agent_pid(f->id);
	assert_true(again > 0 && again != pid);
	/* the notice is said once */
	out = python_out(f, "x = 41\nprint(x + 1)", &code, &notice);
	assert_string_equal(out, "42\n");
	assert_null(notice);
	free(out);
	/* a file missing from its place is placed again */
	free(ctr_sh(f->id, &st, "rm -f " AGENT_IN_CTR));
	snprintf(cmd, sizeof(cmd), "kill -9 %d", again);
	free(ctr_sh(f->id, &st, cmd));
	for (int i = 0; i < 100 && agent_pid(f->id) == again; i++)
		usleep(20000);
	out = python_out(f, "print(41 + 1)", &code, &notice);
	assert_string_equal(out, "42\n");
	assert_non_null(notice);
	free(notice);
	free(out);
	assert_true(agent_pid(f->id) > 0);
}

/* Under a read-only root the agent lives in a volume of ours at /.aksandbox; destroy
 * removes it with the rest. */
static void t_agent_readonly_root(void **state)
{
	fixture *f = *state;
	char *mounts = inspect(f->id, "{{.HostConfig.ReadonlyRootfs}} {{range .Mounts}}"
	                              "{{if eq .Type \"volume\"}}{{.Name}}:{{.Destination}} "
	                              "{{end}}{{end}}");
	/* The engine lists mounts in no fixed order: both volumes, and no other (the filesystem
	 * policy's read-only tmpfs at /dev/shm is t_fs_writable's). */
	char *ws = xasprintf(" %s-workspace:/workspace ", f->id);
	char *ag = xasprintf(" %s-aksandbox:/.aksandbox ", f->id);
	if (strncmp(mounts, "true ", 5) != 0 || !strstr(mounts, ws) || !strstr(mounts, ag) ||
	    strlen(mounts) != strlen("true ") + strlen(ws) + strlen(ag) - 2)
		fail_msg("mounts: '%s'", mounts);
	free(mounts);
	free(ws);
	free(ag);
	assert_true(aks_provider_get_capabilities(f->prov)->stateful);
	free(python_out(f, "x = 41", NULL, NULL));
	char *out = python_out(f, "print(x + 1)", NULL, NULL);
	assert_string_equal(out, "42\n");
	free(out);
	assert_true(agent_pid(f->id) > 0);
	aks_sandbox_close(f->sb);
	f->sb = NULL;
	aks_call call;
	aks_call_init(&call, 60, NULL, NULL, NULL);
	aks_error *err = NULL;
	check_ok(aks_provider_destroy(f->prov, f->id, &call, &err), err);
	char *vol = xasprintf("%s-aksandbox", f->id);
	assert_false(volume_exists(vol));
	free(vol);
	free(f->id);
	f->id = NULL;
}

/* gVisor: placed before start, the agent runs under runsc too, with its process control. */
static void t_agent_runsc(void **state)
{
	fixture *f = *state;
	open_provider(f, "    image: " IMAGE "\n    runtime: runsc\n");
	create_sandbox(f);
	char *k = run_ok(f, "dmesg | head -1");
	if (!strstr(k, "Starting gVisor"))
		fail_msg("not under gVisor: %s", k);
	free(k);
	free(python_out(f, "x = 41", NULL, NULL));
	char *out = python_out(f, "print(x + 1)", NULL, NULL);
	assert_string_equal(out, "42\n");
	free(out);
	assert_true(agent_pid(f->id) > 0);
	aks_result *r = NULL;
	aks_error *err = NULL;
	/* gVisor ignores PR_SET_CHILD_SUBREAPER: orphans go to the container's init, so a
	 * double fork with setsid and a cleared environment escaped the kill; now swept */
	int rc = run(f, NULL,
	             "(sleep 360 >/dev/null 2>&1 &); (setsid env -i /bin/sleep 362 >/dev/null "
	             "2>&1 &); sleep 361",
	             2, NULL, &r, &err);
	check_error(rc, &err, AKS_ETIMEOUT, "exceeded timeout", (char *)NULL);
	aks_result_free(r);
	char *left = ctr_procs(f->id, "sleep 36");
	assert_string_equal(left, "");
	free(left);
	left = ctr_procs(f->id, "/bin/sleep 36");
	assert_string_equal(left, "");
	free(left);
	/* a detached job outlives its call and the handle, as on runc: it was left to the
	 * agent resident in the container, which closing a handle does not end */
	free(run_ok(f, "(setsid env -i /bin/sleep 363 >/dev/null 2>&1 &); true"));
	left = ctr_procs(f->id, "/bin/sleep 363");
	assert_string_equal(left, "/bin/sleep 363 ");
	free(left);
	int resident = agent_pid(f->id);
	aks_sandbox_close(f->sb);
	f->sb = NULL;
	usleep(300 * 1000);
	left = ctr_procs(f->id, "/bin/sleep 363");
	assert_string_equal(left, "/bin/sleep 363 ");
	free(left);
	assert_int_equal(agent_pid(f->id), resident);
}

/* gVisor: a container that dies under a call (removed, or killed for its memory limit,
 * which under gVisor takes the whole sandbox) is noticed within seconds, not at the call's
 * timeout, and never wedges the handle: its stream does not end there, the engine says. */
static void t_agent_runsc_container_dies(void **state)
{
	fixture *f = *state;
	f->policy.memory_mb = 64;
	open_provider(f, "    image: " IMAGE "\n    runtime: runsc\n");
	create_sandbox(f);
	free(python_out(f, "x = 41", NULL, NULL));
	aks_result *r = NULL;
	aks_error *err = NULL;
	int64_t t0 = now_ms();
	int rc =
	    run(f, "python", "b = bytearray(300 * 1024 * 1024)\nprint(len(b))", 60, NULL, &r, &err);
	int64_t took = now_ms() - t0;
	/* gVisor kills the program (exit 137, as runc does), its whole sandbox (the error
	 * names the limit), or the agent that runs the Python session (the connection broke;
	 * the container lives on, so there is no limit to name): never a timeout */
	if (rc == AKS_OK) {
		assert_int_equal(aks_result_get_exit_code(r), 137);
	} else {
		const char *msg = err ? aks_error_message(err) : "";
		assert_int_equal(rc, AKS_EIO);
		if (!strstr(msg, "memory limit") && !strstr(msg, "broke during the call"))
			fail_msg("the out-of-memory death reads: %s", msg);
		aks_error_free(err);
		err = NULL;
	}
	aks_result_free(r);
	if (took > 20000)
		fail_msg("the out-of-memory death took %lld ms to notice", (long long)took);
	/* the next call: the container (if it died) and the agent started again, said so */
	bool sandbox_died = rc != AKS_OK;
	char *notice = NULL;
	char *out = python_out(f, "print('back')", NULL, &notice);
	assert_string_equal(out, "back\n");
	if (sandbox_died && (!notice || !strstr(notice, "was restarted")))
		fail_msg("no restart notice: %s", notice ? notice : "(none)");
	free(out);
	free(notice);
	/* removed behind the handle's back, the agent idle: gone before anything runs */
	int st;
	free(sh_out(&st, "docker rm -f %s >/dev/null 2>&1", f->id));
	usleep(1200 * 1000);
	t0 = now_ms();
	rc = run(f, NULL, "echo never", 30, NULL, &r, &err);
	check_error(rc, &err, AKS_EGONE, "no longer exists", (char *)NULL);
	aks_result_free(r);
	assert_true(now_ms() - t0 < 10000);
	aks_sandbox_close(f->sb);
	f->sb = NULL;
}

/* attach_to: placed into the running container that is not ours, and resident there. */
static void t_agent_attach_to(void **state)
{
	fixture *f = *state;
	char name[96];
	snprintf(name, sizeof(name), "aks-ext-agent-%s", run_label);
	int st;
	char *out = sh_out(&st,
	                   "docker run -d --name %s --label io.aksandbox.test=%s " IMAGE
	                   " sleep infinity 2>&1",
	                   name, run_label);
	if (st != 0)
		fail_msg("docker run failed: %s", out);
	free(out);
	char *extra = xasprintf("    image: " IMAGE "\n    attach_to: %s\n", name);
	open_provider(f, extra);
	free(extra);
	create_sandbox(f);
	free(python_out(f, "x = 41", NULL, NULL));
	out = python_out(f, "print(x + 1)", NULL, NULL);
	assert_string_equal(out, "42\n");
	free(out);
	int pid = agent_pid(name);
	assert_true(pid > 0);
	/* resident there too: the container's Python state is there for the next handle */
	aks_sandbox_close(f->sb);
	f->sb = NULL;
	assert_int_equal(agent_pid(name), pid);
	free(f->id);
	create_sandbox(f); /* attach_to: the same container again */
	out = python_out(f, "print(x)", NULL, NULL);
	assert_string_equal(out, "41\n");
	free(out);
	aks_sandbox_close(f->sb);
	f->sb = NULL;
	free(sh_out(&st, "docker rm -f %s >/dev/null 2>&1", name));
	free(f->id);
	f->id = NULL;
}

/* Configured but unable to run: everything per call, said in the description, and no
 * stateful. `fresh` runs the operations and checks nothing was started in the container. */
static void check_fallback(fixture *f, const char *why)
{
	create_sandbox(f);
	const char *d = aks_provider_get_description(f->prov);
	if (!strstr(d, "one docker exec per call") || !strstr(d, why))
		fail_msg("description: %s", d);
	assert_false(aks_provider_get_capabilities(f->prov)->stateful);
	char *out = run_ok(f, "echo per-call");
	assert_string_equal(out, "per-call");
	free(out);
	free(python_out(f, "x = 41", NULL, NULL));
	int code = 0;
	out = python_out(f, "print(x + 1)", &code, NULL);
	assert_int_equal(code, 1); /* a new interpreter per call */
	free(out);
	aks_call call;
	aks_call_init(&call, 30, NULL, NULL, NULL);
	aks_error *err = NULL;
	check_ok(aks_sandbox_upload_file(f->sb, "fb.txt", "fb", 2, &call, &err), err);
	aks_result *r = NULL;
	check_ok(aks_sandbox_download_file(f->sb, "fb.txt", &call, &r, &err), err);
	size_t len = 0;
	const unsigned char *got = aks_result_get_file(r, 0, NULL, NULL, &len);
	assert_int_equal(len, 2);
	assert_memory_equal(got, "fb", 2);
	aks_result_free(r);
	assert_int_equal(agent_pid(f->id), 0);
}

/* A host-only (dynamically linked, sanitizer) build of the agent: never placed. */
static void t_agent_fallback_dynamic(void **state)
{
	fixture *f = *state;
	const char *b = getenv("AKS_TEST_BUILDDIR");
	assert_non_null(b);
	char *extra =
	    xasprintf("    image: " IMAGE "\n    agent: %s/agent/aksandbox-agent-debug\n", b);
	open_provider(f, extra);
	free(extra);
	/* known at init: not claimed from the start */
	assert_false(aks_provider_get_capabilities(f->prov)->stateful);
	check_fallback(f, "dynamically linked");
	int st;
	free(ctr_sh(f->id, &st, "test -e /.aksandbox"));
	assert_int_not_equal(st, 0);
}

/* An agent built for another architecture than the image's (an arm64 ELF header on this
 * build's program): the image's Architecture is checked and the agent never tried. */
static void t_agent_fallback_arch(void **state)
{
	fixture *f = *state;
	char *arm = xasprintf("%s/aksandbox-agent-arm64", tmpdir);
	int st;
	free(sh_out(&st, "cp '%s' '%s'", DK_TEST_AGENT, arm));
	assert_int_equal(st, 0);
	FILE *fp = fopen(arm, "r+b");
	assert_non_null(fp);
	unsigned char em[2] = {183, 0}; /* e_machine EM_AARCH64, little-endian, at offset 18 */
	assert_int_equal(fseek(fp, 18, SEEK_SET), 0);
	assert_int_equal(fwrite(em, 1, 2, fp), 2);
	fclose(fp);
	char *extra = xasprintf("    image: " IMAGE "\n    agent: %s\n", arm);
	open_provider(f, extra);
	free(extra);
	char *image_arch = sh_out(&st, "docker image inspect -f '{{.Architecture}}' " IMAGE);
	char *why =
	    xasprintf("is for architecture %s, aksandbox-agent %s for arm64", image_arch, arm);
	check_fallback(f, why);
	free(why);
	free(image_arch);
	free(ctr_sh(f->id, &st, "test -e " AGENT_IN_CTR));
	assert_int_not_equal(st, 0);
	free(arm);
}

/* The sandbox's root overwrites the agent with something of the same size (as hostile code
 * would, to disable it): the copy is checked by its SHA-256 before it is started, found not
 * ours and placed again, so operations still run through the real agent; with the agent
 * killed as well, the restart does the same. Never a silent fall back to per call. */
static void t_agent_replaced_inside(void **state)
{
	fixture *f = *state;
	const char *corrupt =
	    "n=$(stat -c %s " AGENT_IN_CTR "); head -c $n /dev/zero > " AGENT_IN_CTR
	    ".x && chmod 755 " AGENT_IN_CTR ".x && mv " AGENT_IN_CTR ".x " AGENT_IN_CTR;
	int st;
	free(ctr_sh(f->id, &st, corrupt));
	assert_int_equal(st, 0);
	char *out = run_ok(f, "echo still-works");
	assert_string_equal(out, "still-works");
	free(out);
	assert_true(agent_pid(f->id) > 0); /* through the agent, ours again */
	assert_true(aks_provider_get_capabilities(f->prov)->stateful);
	assert_null(strstr(aks_provider_get_description(f->prov), "per call:"));
	/* the agent up, then overwritten and killed: the restart places ours again */
	free(python_out(f, "x = 41", NULL, NULL));
	free(ctr_sh(f->id, &st, corrupt));
	assert_int_equal(st, 0);
	char *kill = xasprintf("kill -9 %d", agent_pid(f->id));
	free(ctr_sh(f->id, &st, kill));
	assert_int_equal(st, 0);
	free(kill);
	/* a call racing the kill fails with AKS_EIO (the agent broke under it); the host sees
	 * the end of the stream at once, so wait for the agent to be gone from the container */
	for (int i = 0; i < 50 && agent_pid(f->id) > 0; i++)
		usleep(100 * 1000);
	usleep(300 * 1000);
	char *notice = NULL;
	int code = 0;
	out = python_out(f, "print('after')", &code, &notice);
	assert_int_equal(code, 0);
	assert_string_equal(out, "after\n");
	if (!notice || !strstr(notice, "was restarted"))
		fail_msg("no restart notice: %s", notice ? notice : "(none)");
	free(notice);
	free(out);
	free(ctr_sh(f->id, &st, "[ \"$(head -c 4 " AGENT_IN_CTR " | tail -c 3)\" = ELF ]"));
	assert_int_equal(st, 0); /* the zeros are gone: a program again */
}

/* agent: must be false, null or an executable absolute path. */
static void t_agent_config(void **state)
{
	fixture *f = *state;
	char *yaml = xasprintf("%s/bad.yaml", tmpdir);
	const char *bad[] = {"relative/aksandbox-agent", "/nonexistent/aksandbox-agent"};
	for (int i = 0; i < 2; i++) {
		FILE *fp = fopen(yaml, "w");
		fprintf(fp, "sandbox:\n  enabled: true\n  type: docker\n  docker:\n    agent: %s\n",
		        bad[i]);
		fclose(fp);
		aks_error *err = NULL;
		check_ok(aks_config_load_block(plugin, yaml, &f->config, &err), err);
		int rc = aks_provider_open(plugin, f->config, &f->prov, &err);
		check_error(rc, &err, AKS_ECONFIG, "agent:", bad[i], "false disables",
		            (char *)NULL);
		aks_config_free(f->config);
		f->config = NULL;
	}
	unlink(yaml);
	free(yaml);
	/* false: per call, said so */
	open_provider(f, "    image: " IMAGE "\n    agent: false\n");
	if (!strstr(aks_provider_get_description(f->prov),
	            "one docker exec per call (agent disabled"))
		fail_msg("description: %s", aks_provider_get_description(f->prov));
	assert_false(aks_provider_get_capabilities(f->prov)->stateful);
}

/* ---- threads ------------------------------------------------------------------------------------
 */

typedef struct worker {
	aks_provider *prov;
	int n;
	char out[64];
	char err[256];
} worker;

static void *work(void *arg)
{
	worker *w = arg;
	aks_call call;
	aks_call_init(&call, 60, NULL, NULL, NULL);
	aks_error *err = NULL;
	aks_sandbox *sb = NULL;
	if (aks_provider_create(w->prov, &call, &sb, &err) != AKS_OK) {
		snprintf(w->err, sizeof(w->err), "create: %s", aks_error_message(err));
		aks_error_free(err);
		return NULL;
	}
	char *id = strdup(aks_sandbox_get_id(sb));
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "echo worker-%d", w->n);
	for (int i = 0; i < 3; i++) {
		aks_result *r = NULL;
		if (aks_sandbox_execute_command(sb, cmd, &call, &r, &err) != AKS_OK) {
			snprintf(w->err, sizeof(w->err), "exec: %s", aks_error_message(err));
			aks_error_free(err);
			err = NULL;
			break;
		}
		snprintf(w->out, sizeof(w->out), "%s", aks_result_get_stdout(r, NULL));
		aks_result_free(r);
	}
	aks_sandbox_close(sb);
	if (aks_provider_destroy(w->prov, id, &call, &err) != AKS_OK) {
		snprintf(w->err, sizeof(w->err), "destroy: %s", aks_error_message(err));
		aks_error_free(err);
	}
	free(id);
	return NULL;
}

static void t_threads(void **state)
{
	fixture *f = *state;
	open_provider(f, NULL);
	enum { N = 4 };
	worker w[N];
	pthread_t th[N];
	for (int i = 0; i < N; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].prov = f->prov;
		w[i].n = i;
		assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
	}
	for (int i = 0; i < N; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < N; i++) {
		if (w[i].err[0])
			fail_msg("worker %d: %s", i, w[i].err);
		char want[64];
		snprintf(want, sizeof(want), "worker-%d\n", i);
		assert_string_equal(w[i].out, want);
	}
	int st;
	char *left = sh_out(&st,
	                    "docker ps -aq --filter label=io.aksandbox.test=%s "
	                    "--filter 'name=^/?aks-[0-9a-f]{32}$' | wc -l",
	                    run_label);
	assert_string_equal(left, "0");
	free(left);
}

int main(void)
{
	with_agent = strcmp(DK_TEST_AGENT, "false") != 0;
	const struct CMUnitTest agent_tests[] = {
	    cmocka_unit_test_setup_teardown(t_agent_session, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_agent_other_python, setup_bare, teardown),
	    cmocka_unit_test_setup_teardown(t_agent_timeout_tree, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_agent_big_output, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_agent_file_hash, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_agent_killed, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_agent_readonly_root, setup_policy, teardown),
	    cmocka_unit_test_setup_teardown(t_agent_runsc, setup_bare, teardown),
	    cmocka_unit_test_setup_teardown(t_agent_runsc_container_dies, setup_bare, teardown),
	    cmocka_unit_test_setup_teardown(t_agent_attach_to, setup_bare, teardown),
	    cmocka_unit_test_setup_teardown(t_agent_fallback_dynamic, setup_bare, teardown),
	    cmocka_unit_test_setup_teardown(t_agent_fallback_arch, setup_bare, teardown),
	    cmocka_unit_test_setup_teardown(t_agent_replaced_inside, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_agent_config, setup_bare, teardown),
	};
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(t_lifecycle, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_gone, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_restart_keeps_workspace, setup_policy, teardown),
	    cmocka_unit_test_setup_teardown(t_exec_streams, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_timeout_kills_tree, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_cancel_kills_tree, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_files, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_policy_engine_settings, setup_policy, teardown),
	    cmocka_unit_test_setup_teardown(t_policy_network_deny, setup_policy, teardown),
	    cmocka_unit_test_setup_teardown(t_policy_memory, setup_policy, teardown),
	    cmocka_unit_test_setup_teardown(t_policy_filesystem, setup_policy, teardown),
	    cmocka_unit_test_setup_teardown(t_policy_allowlist, setup_bare, teardown),
	    cmocka_unit_test_setup_teardown(t_pids_limit, setup_bare, teardown),
	    cmocka_unit_test_setup_teardown(t_pids_limit_runsc, setup_bare, teardown),
	    cmocka_unit_test_setup_teardown(t_pids_limit_config, setup_bare, teardown),
	    cmocka_unit_test_setup_teardown(t_hardened, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_hardened_runsc, setup_bare, teardown),
	    cmocka_unit_test_setup_teardown(t_user, setup_bare, teardown),
	    cmocka_unit_test_setup_teardown(t_user_runsc, setup_bare, teardown),
	    cmocka_unit_test_setup_teardown(t_user_config, setup_bare, teardown),
	    cmocka_unit_test_setup_teardown(t_fs_writable, setup_policy, teardown),
	    cmocka_unit_test_setup_teardown(t_fs_writable_runsc, setup_bare, teardown),
	    cmocka_unit_test_setup_teardown(t_long_paths, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_runsc, setup_bare, teardown),
	    cmocka_unit_test_setup_teardown(t_runc_is_host_kernel, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_missing_image, setup_bare, teardown),
	    cmocka_unit_test_setup_teardown(t_unreachable_engine, setup_bare, teardown),
	    cmocka_unit_test_setup_teardown(t_attach_to, setup_bare, teardown),
	    cmocka_unit_test_setup_teardown(t_threads, setup_bare, teardown),
	};
	/* One group (one TAP plan): the agent's own tests only run in test_docker_agent. */
	size_t n = sizeof(tests) / sizeof(tests[0]),
	       na = with_agent ? sizeof(agent_tests) / sizeof(agent_tests[0]) : 0;
	struct CMUnitTest *all = calloc(n + na, sizeof(*all));
	memcpy(all, tests, sizeof(tests));
	if (na)
		memcpy(all + n, agent_tests, sizeof(agent_tests));
	/* AKS_DOCKER_TEST_FILTER=t_files runs one case (a cmocka glob) */
	const char *filter = getenv("AKS_DOCKER_TEST_FILTER");
	if (filter && *filter)
		cmocka_set_test_filter(filter);
	int failed = _cmocka_run_group_tests(with_agent ? "docker through aksandbox-agent"
	                                                : "docker, agent: false",
	                                     all, n + na, group_setup, group_teardown);
	free(all);
	return failed;
}
