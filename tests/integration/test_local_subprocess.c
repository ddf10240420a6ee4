/*
 * tests/integration/test_local_subprocess.c - the local_subprocess provider
 * end to end, through the real core API (aksandbox.h): the plugin is loaded
 * from AKS_PLUGIN_PATH (the build tree), configured from YAML, and runs real
 * programs on real files.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pid_check.h"
#include <cmocka.h>

#include <aksandbox/aksandbox.h>

/* ---- fixture ---------------------------------------------------------------------- */

typedef struct fixture {
	const aks_plugin *plugin;
	char *base;    /* private temporary directory of the test */
	char *workdir; /* base/work/a/b: does not exist before the first create */
	char *yaml;    /* base/config.yaml */
	aks_config *config;
	aks_provider *prov;
	aks_sandbox *sb;
	const char *id;
} fixture;

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

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static char *read_text(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	char *buf = calloc(1, 1 << 16);
	size_t n = fread(buf, 1, (1 << 16) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *cmd = NULL;
	assert_true(vasprintf(&cmd, fmt, ap) >= 0);
	va_end(ap);
	int rc = system(cmd);
	if (rc != 0)
		fail_msg("shell command failed (%d): %s", rc, cmd);
	free(cmd);
}

static bool exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

static void check_ok(int rc, aks_error *err)
{
	if (rc != AKS_OK)
		fail_msg("expected AKS_OK, got %d: %s", rc,
		         err ? aks_error_message(err) : "(no error)");
	assert_null(err);
}

/* Asserts an error code and, if given, the exact message; frees the error. */
static void check_error(int rc, aks_error **err, int code, const char *message)
{
	if (rc != code)
		fail_msg("expected %d, got %d: %s", code, rc,
		         *err ? aks_error_message(*err) : "(no error)");
	assert_non_null(*err);
	assert_int_equal(aks_error_code(*err), code);
	if (message)
		assert_string_equal(aks_error_message(*err), message);
	aks_error_free(*err);
	*err = NULL;
}

/* This binary runs every test with the agent (test_local_subprocess_agent: the build's
 * aksandbox-agent) or without it (test_local_subprocess: agent: false). */
#ifndef LS_TEST_AGENT
#define LS_TEST_AGENT "false"
#endif

/* Writes the YAML config (a config.yaml with the sugar block, agent: `agent`) and loads it. */
static void load_config_agent(fixture *f, const char *agent, const char *extra_keys)
{
	free(f->yaml);
	f->yaml = xasprintf("%s/config.yaml", f->base);
	char *text = xasprintf("sandbox:\n"
	                       "  enabled: true\n"
	                       "  type: local_subprocess\n"
	                       "  local_subprocess:\n"
	                       "    workdir: %s\n"
	                       "    agent: %s\n"
	                       "%s",
	                       f->workdir, agent, extra_keys ? extra_keys : "");
	write_text(f->yaml, text);
	free(text);
	aks_error *err = NULL;
	aks_config_free(f->config);
	f->config = NULL;
	check_ok(aks_config_load_block(f->plugin, f->yaml, &f->config, &err), err);
}

static void load_config(fixture *f, const char *extra_keys)
{
	load_config_agent(f, LS_TEST_AGENT, extra_keys);
}

static void open_provider(fixture *f)
{
	aks_error *err = NULL;
	check_ok(aks_provider_open(f->plugin, f->config, &f->prov, &err), err);
}

static void create_sandbox(fixture *f)
{
	aks_call call;
	aks_call_init(&call, 30, NULL, NULL, NULL);
	aks_error *err = NULL;
	check_ok(aks_provider_create(f->prov, &call, &f->sb, &err), err);
	f->id = aks_sandbox_get_id(f->sb);
	assert_non_null(f->id);
}

static void close_all(fixture *f)
{
	aks_call call;
	aks_call_init(&call, 30, NULL, NULL, NULL);
	if (f->sb) {
		char *id = strdup(f->id);
		aks_sandbox_close(f->sb);
		f->sb = NULL;
		f->id = NULL;
		aks_error *err = NULL;
		check_ok(aks_provider_destroy(f->prov, id, &call, &err), err);
		free(id);
	}
	aks_provider_close(f->prov);
	f->prov = NULL;
	aks_config_free(f->config);
	f->config = NULL;
}

static int setup_bare(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	aks_error *err = NULL;
	int rc = aks_plugin_load("local_subprocess", AKS_PLUGIN_PROVIDER, &f->plugin, &err);
	if (rc != AKS_OK)
		fail_msg("cannot load local_subprocess (AKS_PLUGIN_PATH=%s): %s",
		         getenv("AKS_PLUGIN_PATH"), err ? aks_error_message(err) : "?");
	const char *tmp = getenv("TMPDIR");
	f->base = xasprintf("%s/aks-ls-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	assert_non_null(mkdtemp(f->base));
	/* Canonical, so ids (which are canonical) compare as strings. */
	char *real = realpath(f->base, NULL);
	assert_non_null(real);
	free(f->base);
	f->base = real;
	f->workdir = xasprintf("%s/work/a/b", f->base);
	*state = f;
	return 0;
}

/* The usual fixture: YAML config with a private workdir, one sandbox. */
static int setup(void **state)
{
	setup_bare(state);
	fixture *f = *state;
	load_config(f, NULL);
	open_provider(f);
	create_sandbox(f);
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;
	close_all(f);
	sh("rm -rf '%s'", f->base);
	free(f->base);
	free(f->workdir);
	free(f->yaml);
	free(f);
	return 0;
}

/* Runs code (language NULL: a shell command) with a timeout in seconds. */
static int run(fixture *f, const char *language, const char *code, double timeout,
               aks_cancel *cancel, aks_result **res, aks_error **err)
{
	aks_call call;
	aks_call_init(&call, timeout, NULL, NULL, cancel);
	*res = NULL;
	if (!language)
		return aks_sandbox_execute_command(f->sb, code, &call, res, err);
	return aks_sandbox_execute_code(f->sb, code, language, &call, res, err);
}

static const char *out_of(const aks_result *r)
{
	return aks_result_get_stdout(r, NULL);
}

static const char *err_of(const aks_result *r)
{
	return aks_result_get_stderr(r, NULL);
}

/* Every PID in the file (one a line) is gone; the file holds `expected`. */
static void assert_pids_gone(const char *path, int expected)
{
	char *t = read_text(path);
	assert_non_null(t);
	int n = 0;
	for (char *line = strtok(t, "\n"); line; line = strtok(NULL, "\n")) {
		pid_t pid = (pid_t)atoi(line);
		assert_true(pid > 1);
		if (test_pid_alive(pid))
			fail_msg("pid %d survived the execution", (int)pid);
		n++;
	}
	free(t);
	assert_int_equal(n, expected);
}

/* ---- descriptor and capabilities ------------------------------------------------------- */

static void test_descriptor(void **state)
{
	fixture *f = *state;
	const aks_plugin_descriptor *d = aks_plugin_get_descriptor(f->plugin);
	assert_non_null(d);
	assert_string_equal(d->name, "local_subprocess");
	assert_int_equal(d->kind, AKS_PLUGIN_PROVIDER);
	assert_string_equal(d->license, "Apache-2.0");
	assert_string_equal(d->version, aks_version());
	assert_int_equal(d->abi_major, AKS_ABI_MAJOR);

	static const struct {
		const char *name;
		uint32_t type;
		const char *def;
	} want[] = {{"workdir", AKS_CONFIG_STRING, NULL},
	            {"python", AKS_CONFIG_STRING, "python3"},
	            {"env_passthrough", AKS_CONFIG_STRING_LIST, "[]"},
	            {"env", AKS_CONFIG_STRING_MAP, "{}"},
	            {"agent", AKS_CONFIG_STRING, NULL}};
	size_t n = 0;
	for (const aks_config_key *k = d->config_keys; k && k->name; k++, n++) {
		assert_true(n < 5);
		assert_string_equal(k->name, want[n].name);
		assert_int_equal(k->type, want[n].type);
		assert_false(k->required);
		if (want[n].def)
			assert_string_equal(k->default_value, want[n].def);
		else
			assert_null(k->default_value);
		assert_non_null(k->help);
	}
	assert_int_equal(n, 5);

	const aks_capabilities *c = aks_plugin_get_capabilities(f->plugin);
	assert_non_null(c);
	assert_int_equal(c->isolation, AKS_ISOLATION_NONE);
	assert_true(c->shell && c->files && c->attach && c->provisions);
	assert_false(c->package_install || c->stateful || c->attaches_external ||
	             c->principal_user || c->policy_network || c->policy_filesystem ||
	             c->policy_resources);
	assert_string_equal(c->languages[0], "python");
	assert_string_equal(c->languages[1], "bash");
	assert_null(c->languages[2]);
}

/* The NO-isolation warning goes through the host's log (stderr) at init. */
static void test_init_warns(void **state)
{
	fixture *f = *state;
	load_config(f, NULL);
	char *log = xasprintf("%s/stderr.log", f->base);
	fflush(stderr);
	int saved = dup(2);
	int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(saved >= 0 && fd >= 0);
	dup2(fd, 2);
	close(fd);
	aks_error *err = NULL;
	int rc = aks_provider_open(f->plugin, f->config, &f->prov, &err);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	check_ok(rc, err);
	char *text = read_text(log);
	assert_non_null(text);
	assert_non_null(strstr(text, "local_subprocess provides NO isolation: development/test use "
	                             "only"));
	free(text);
	free(log);
}

static void test_config_rejects_unknown_key(void **state)
{
	fixture *f = *state;
	char *yaml = xasprintf("%s/bad.yaml", f->base);
	write_text(yaml, "workdir: /tmp\nbogus_key: 1\n");
	aks_error *err = NULL;
	aks_config *cfg = NULL;
	int rc = aks_config_load_block(f->plugin, yaml, &cfg, &err);
	assert_int_equal(rc, AKS_ECONFIG);
	assert_null(cfg);
	assert_non_null(strstr(aks_error_message(err), "bogus_key"));
	aks_error_free(err);
	free(yaml);
}

/* ---- execution ----------------------------------------------------------------------------- */

static void test_python(void **state)
{
	fixture *f = *state;
	aks_result *r;
	aks_error *err = NULL;
	check_ok(run(f, "python",
	             "import sys\nprint('hi')\nprint('err', file=sys.stderr)\nsys.exit(3)", 30,
	             NULL, &r, &err),
	         err);
	assert_int_equal(aks_result_get_exit_code(r), 3); /* a failing program is a result */
	assert_string_equal(out_of(r), "hi\n");
	assert_string_equal(err_of(r), "err\n");
	assert_false(aks_result_timed_out(r));
	aks_result_free(r);

	/* the contract's failing program */
	check_ok(run(f, "python", "__nonzero_exit__", 30, NULL, &r, &err), err);
	assert_int_not_equal(aks_result_get_exit_code(r), 0);
	assert_non_null(strstr(err_of(r), "NameError"));
	aks_result_free(r);

	check_ok(run(f, "python", "import os; print(os.getcwd())", 30, NULL, &r, &err), err);
	char *want = xasprintf("%s\n", f->id);
	assert_string_equal(out_of(r), want);
	free(want);
	assert_int_equal(aks_result_get_exit_code(r), 0);
	aks_result_free(r);
}

static void test_bash_and_command(void **state)
{
	fixture *f = *state;
	aks_result *r;
	aks_error *err = NULL;
	check_ok(run(f, "bash", "echo $((6 * 7)); echo oops >&2; exit 5", 30, NULL, &r, &err), err);
	assert_int_equal(aks_result_get_exit_code(r), 5);
	assert_string_equal(out_of(r), "42\n");
	assert_string_equal(err_of(r), "oops\n");
	aks_result_free(r);

	check_ok(run(f, NULL, "pwd; echo \"$HOME\"; echo \"$TMPDIR\"; touch made-here; [[ -n x ]]",
	             30, NULL, &r, &err),
	         err);
	assert_int_equal(aks_result_get_exit_code(r), 0);
	char *want = xasprintf("%s\n%s\n%s\n", f->id, f->id, f->id);
	assert_string_equal(out_of(r), want);
	free(want);
	aks_result_free(r);
	char *made = xasprintf("%s/made-here", f->id);
	assert_true(exists(made));
	free(made);

	check_ok(run(f, NULL, "exit 0", 30, NULL, &r, &err), err);
	assert_int_equal(aks_result_get_exit_code(r), 0);
	aks_result_free(r);

	/* killed by a signal: 128 + signal, as a shell reports it */
	check_ok(run(f, NULL, "kill -KILL $$", 30, NULL, &r, &err), err);
	assert_int_equal(aks_result_get_exit_code(r), 128 + SIGKILL);
	aks_result_free(r);

	/* stdin is /dev/null: reading it ends at once */
	check_ok(run(f, NULL, "cat; echo end", 30, NULL, &r, &err), err);
	assert_string_equal(out_of(r), "end\n");
	aks_result_free(r);
}

static void test_unknown_language(void **state)
{
	fixture *f = *state;
	aks_result *r;
	aks_error *err = NULL;
	int rc = run(f, "ruby", "puts 1", 30, NULL, &r, &err);
	check_error(rc, &err, AKS_ECAPABILITY,
	            "local_subprocess does not support capability: language:ruby");
	assert_null(r);
}

static void test_python_config(void **state)
{
	fixture *f = *state;
	close_all(f);
	load_config(f, "    python: no-such-python-aks\n");
	open_provider(f);
	create_sandbox(f);
	aks_result *r;
	aks_error *err = NULL;
	check_ok(run(f, "python", "print(1)", 30, NULL, &r, &err), err);
	assert_int_equal(aks_result_get_exit_code(r), 127);
	assert_non_null(strstr(err_of(r), "no-such-python-aks"));
	aks_result_free(r);

	close_all(f);
	load_config(f, "    python: /usr/bin/python3\n");
	open_provider(f);
	create_sandbox(f);
	check_ok(run(f, "python", "import sys; print(sys.executable)", 30, NULL, &r, &err), err);
	assert_string_equal(out_of(r), "/usr/bin/python3\n");
	aks_result_free(r);
}

/* Through the agent, Python keeps its state between the calls of this host process; without
 * it (agent: false) every call is a fresh interpreter. The instance never says stateful:
 * the state does not outlive the process (another `aksandbox tool` call, another queue
 * worker starts afresh). Both binaries check both configurations. */
static void check_statefulness(fixture *f, bool agent)
{
	assert_false(aks_provider_get_capabilities(f->prov)->stateful);
	aks_result *r;
	aks_error *err = NULL;
	check_ok(run(f, "python", "x = 41", 30, NULL, &r, &err), err);
	assert_int_equal(aks_result_get_exit_code(r), 0);
	aks_result_free(r);
	check_ok(run(f, "python", "print(x + 1)", 30, NULL, &r, &err), err);
	if (agent) {
		assert_int_equal(aks_result_get_exit_code(r), 0);
		assert_string_equal(out_of(r), "42\n");
	} else {
		assert_int_equal(aks_result_get_exit_code(r), 1);
		assert_non_null(strstr(err_of(r), "NameError"));
	}
	aks_result_free(r);
	/* Commands stay separate programs either way. */
	check_ok(run(f, NULL, "echo ${x:-unset}", 30, NULL, &r, &err), err);
	assert_string_equal(out_of(r), "unset\n");
	aks_result_free(r);
}

/* The agents this process started (children named aksandbox-agent), into pids[]. */
static size_t find_agents(pid_t *pids, size_t max)
{
	size_t n = 0;
	DIR *d = opendir("/proc");
	assert_non_null(d);
	struct dirent *e;
	while ((e = readdir(d)) && n < max) {
		char *path = xasprintf("/proc/%s/stat", e->d_name);
		FILE *fp = fopen(path, "r");
		free(path);
		if (!fp)
			continue;
		int pid, ppid;
		char comm[64], st;
		if (fscanf(fp, "%d (%63[^)]) %c %d", &pid, comm, &st, &ppid) == 4 &&
		    ppid == getpid() && strcmp(comm, "aksandbox-agent") == 0 && st != 'Z')
			pids[n++] = pid;
		fclose(fp);
	}
	closedir(d);
	return n;
}

static void test_stateful_python(void **state)
{
	fixture *f = *state;
	const char *builddir = getenv("AKS_TEST_BUILDDIR");
	assert_non_null(builddir);
	char *agent = xasprintf("%s/agent/aksandbox-agent", builddir);
	/* Neither the class nor an instance promises it (check_statefulness). */
	assert_false(aks_plugin_get_capabilities(f->plugin)->stateful);
	close_all(f);
	load_config_agent(f, agent, NULL);
	open_provider(f);
	create_sandbox(f);
	check_statefulness(f, true);

	/* A killed agent is replaced before the next call; the session's state is lost. */
	pid_t agents[4], again_dummy[4];
	assert_int_equal(find_agents(agents, 4), 1);
	assert_int_equal(kill(agents[0], SIGKILL), 0);
	for (int i = 0; i < 500 && find_agents(again_dummy, 4) == 1; i++)
		usleep(10 * 1000); /* until it is a zombie: dead, its pipes closed */
	aks_result *r;
	aks_error *err = NULL;
	check_ok(run(f, "python", "print(x + 1)", 30, NULL, &r, &err), err);
	assert_int_equal(aks_result_get_exit_code(r), 1);
	assert_non_null(strstr(err_of(r), "NameError"));
	aks_result_free(r);
	pid_t again[4];
	assert_int_equal(find_agents(again, 4), 1);
	assert_int_not_equal(again[0], agents[0]);
	check_statefulness(f, true);

	close_all(f);
	load_config_agent(f, "false", NULL);
	open_provider(f);
	create_sandbox(f);
	check_statefulness(f, false);

	/* Another interpreter than python3 runs per call even with the agent: not stateful. */
	close_all(f);
	char *keys = xasprintf("    python: /usr/bin/python3\n");
	load_config_agent(f, agent, keys);
	free(keys);
	open_provider(f);
	create_sandbox(f);
	check_statefulness(f, false);

	/* An agent that is not an executable is a config error, not a silent fallback. */
	close_all(f);
	load_config_agent(f, "/nonexistent/aksandbox-agent", NULL);
	check_error(aks_provider_open(f->plugin, f->config, &f->prov, &err), &err, AKS_ECONFIG,
	            NULL);
	free(agent);
}

static void test_code_too_long(void **state)
{
	fixture *f = *state;
	size_t n = 200 * 1024;
	char *code = malloc(n + 1);
	memset(code, '#', n);
	code[n] = '\0';
	aks_result *r;
	aks_error *err = NULL;
	if (strcmp(LS_TEST_AGENT, "false") == 0) {
		/* One argument of `python3 -c`: Linux's limit. */
		check_error(run(f, "python", code, 30, NULL, &r, &err), &err, AKS_ELIMIT, NULL);
		free(code);
		return;
	}
	/* In the agent's session the code is a frame: 200 KiB runs, 2 MiB is over the limit. */
	check_ok(run(f, "python", code, 30, NULL, &r, &err), err);
	assert_int_equal(aks_result_get_exit_code(r), 0);
	aks_result_free(r);
	free(code);
	n = 2 * 1024 * 1024;
	code = malloc(n + 1);
	memset(code, '#', n);
	code[n] = '\0';
	check_error(run(f, "python", code, 30, NULL, &r, &err), &err, AKS_ELIMIT, NULL);
	free(code);
}

/* ---- environment ------------------------------------------------------------------------------
 */

static void test_minimal_env(void **state)
{
	fixture *f = *state;
	setenv("AKS_TEST_SECRET", "s3cret-value", 1);
	aks_result *r;
	aks_error *err = NULL;
	check_ok(
	    run(f, "python", "import os; print(sorted(os.environ.items()))", 30, NULL, &r, &err),
	    err);
	char *want = xasprintf("[('HOME', '%s'), ('LANG', 'C.UTF-8'), "
	                       "('PATH', '/usr/local/bin:/usr/bin:/bin'), ('PWD', '%s'), "
	                       "('TMPDIR', '%s')]\n",
	                       f->id, f->id, f->id);
	assert_string_equal(out_of(r), want);
	free(want);
	assert_null(strstr(out_of(r), "s3cret"));
	aks_result_free(r);

	/* env_passthrough names the host variables the child may see; env adds
	 * and overrides. */
	close_all(f);
	load_config(f, "    env_passthrough: [AKS_TEST_SECRET, AKS_TEST_UNSET_VAR]\n"
	               "    env:\n"
	               "      EXTRA_ONE: \"1\"\n"
	               "      LANG: C\n");
	unsetenv("AKS_TEST_UNSET_VAR");
	open_provider(f);
	create_sandbox(f);
	check_ok(run(f, NULL,
	             "echo \"secret=$AKS_TEST_SECRET extra=$EXTRA_ONE lang=$LANG "
	             "unset=${AKS_TEST_UNSET_VAR-none}\"",
	             30, NULL, &r, &err),
	         err);
	assert_string_equal(out_of(r), "secret=s3cret-value extra=1 lang=C unset=none\n");
	aks_result_free(r);
	unsetenv("AKS_TEST_SECRET");
}

static void test_env_config_rejects_bad_name(void **state)
{
	fixture *f = *state;
	load_config(f, "    env_passthrough: [\"A=B\"]\n");
	aks_error *err = NULL;
	aks_provider *p = NULL;
	int rc = aks_provider_open(f->plugin, f->config, &p, &err);
	assert_null(p);
	check_error(rc, &err, AKS_ECONFIG, NULL);

	load_config(f, "    env:\n      \"A=B\": x\n");
	rc = aks_provider_open(f->plugin, f->config, &p, &err);
	assert_null(p);
	check_error(rc, &err, AKS_ECONFIG, NULL);

	load_config(f, "    python: \"\"\n");
	rc = aks_provider_open(f->plugin, f->config, &p, &err);
	assert_null(p);
	check_error(rc, &err, AKS_ECONFIG, "local_subprocess: python must not be empty");
}

/* ---- files -------------------------------------------------------------------------------------
 */

static void roundtrip(fixture *f, const char *path, const unsigned char *data, size_t len)
{
	aks_call call;
	aks_call_init(&call, 60, NULL, NULL, NULL);
	aks_error *err = NULL;
	check_ok(aks_sandbox_upload_file(f->sb, path, data, len, &call, &err), err);
	aks_result *r = NULL;
	check_ok(aks_sandbox_download_file(f->sb, path, &call, &r, &err), err);
	assert_int_equal(aks_result_get_file_count(r), 1);
	const char *p, *mime;
	size_t got_len;
	const unsigned char *got = aks_result_get_file(r, 0, &p, &mime, &got_len);
	assert_non_null(got);
	assert_string_equal(p, path);
	assert_string_equal(mime, "application/octet-stream");
	assert_int_equal(got_len, len);
	assert_memory_equal(got, data, len);
	aks_result_free(r);
}

static void test_files_binary_roundtrip(void **state)
{
	fixture *f = *state;
	unsigned char all[256];
	for (int i = 0; i < 256; i++)
		all[i] = (unsigned char)i;
	roundtrip(f, "data/nested/all-bytes.bin", all, sizeof(all));
	/* the file is really there, byte for byte (checked by the program) */
	aks_result *r;
	aks_error *err = NULL;
	check_ok(run(f, "python",
	             "d = open('data/nested/all-bytes.bin','rb').read()\n"
	             "print(len(d), d == bytes(range(256)))",
	             30, NULL, &r, &err),
	         err);
	assert_string_equal(out_of(r), "256 True\n");
	aks_result_free(r);

	/* a multi-MiB file, and overwriting it */
	size_t big = (size_t)5 << 20;
	unsigned char *buf = malloc(big);
	uint32_t x = 12345;
	for (size_t i = 0; i < big; i++) {
		x = x * 1103515245u + 12345u;
		buf[i] = (unsigned char)(x >> 16);
	}
	roundtrip(f, "big.bin", buf, big);
	roundtrip(f, "big.bin", buf + 1, big - 1);
	free(buf);

	/* an empty file */
	roundtrip(f, "empty", (const unsigned char *)"", 0);

	/* a file the program wrote */
	check_ok(run(f, "python", "open('made.bin','wb').write(bytes(range(256)) * 12288)", 30,
	             NULL, &r, &err),
	         err);
	aks_result_free(r);
	aks_call call;
	aks_call_init(&call, 60, NULL, NULL, NULL);
	check_ok(aks_sandbox_download_file(f->sb, "/made.bin", &call, &r, &err), err);
	size_t len;
	const unsigned char *got = aks_result_get_file(r, 0, NULL, NULL, &len);
	assert_int_equal(len, 256 * 12288);
	for (size_t i = 0; i < len; i += 4099)
		assert_int_equal(got[i], (unsigned char)(i % 256));
	aks_result_free(r);
	/* no temporary file of the atomic upload is left behind */
	check_ok(run(f, NULL, "ls -A | sort | tr '\\n' ' '", 30, NULL, &r, &err), err);
	assert_string_equal(out_of(r), "big.bin data empty made.bin ");
	aks_result_free(r);
}

static void test_download_limit(void **state)
{
	fixture *f = *state;
	aks_provider_set_limits(f->prov, AKS_DEFAULT_STREAM_CAP, 1024);
	aks_call call;
	aks_call_init(&call, 30, NULL, NULL, NULL);
	aks_error *err = NULL;
	char data[2048];
	memset(data, 'z', sizeof(data));
	check_ok(aks_sandbox_upload_file(f->sb, "two-k", data, sizeof(data), &call, &err), err);
	aks_result *r = NULL;
	check_error(aks_sandbox_download_file(f->sb, "two-k", &call, &r, &err), &err, AKS_ELIMIT,
	            NULL);
	assert_null(r);
	check_ok(aks_sandbox_upload_file(f->sb, "one-k", data, 1024, &call, &err), err);
	check_ok(aks_sandbox_download_file(f->sb, "one-k", &call, &r, &err), err);
	aks_result_free(r);
}

static void expect_escape(fixture *f, const char *path)
{
	aks_call call;
	aks_call_init(&call, 30, NULL, NULL, NULL);
	aks_error *err = NULL;
	char *msg = xasprintf("path '%s' escapes the sandbox working directory", path);
	check_error(aks_sandbox_upload_file(f->sb, path, "evil", 4, &call, &err), &err, AKS_EPOLICY,
	            msg);
	aks_result *r = NULL;
	check_error(aks_sandbox_download_file(f->sb, path, &call, &r, &err), &err, AKS_EPOLICY,
	            msg);
	assert_null(r);
	free(msg);
}

static void test_path_escapes(void **state)
{
	fixture *f = *state;
	/* a sibling of the sandbox, with a file in it */
	char *outside = xasprintf("%s/outside", f->base);
	sh("mkdir -p '%s' && echo secret > '%s/secret'", outside, outside);

	expect_escape(f, "../x");
	expect_escape(f, "../../../../../../etc/passwd");
	expect_escape(f, "a/../../x");
	char *sibling = xasprintf("%s/../escaped-file", f->id);
	assert_false(exists(sibling)); /* the upload of ../x... left nothing */
	free(sibling);

	aks_result *r;
	aks_error *err = NULL;
	/* symlinks planted by the program: to /etc, to a directory outside, to a
	 * file outside; and a symlink inside that stays inside */
	char *cmd = xasprintf("ln -s /etc etc_link && ln -s '%s' out_dir && "
	                      "ln -s '%s/secret' out_file && echo in > real.txt && "
	                      "ln -s real.txt alias.txt && mkdir -p d && ln -s ../.. d/up",
	                      outside, outside);
	check_ok(run(f, NULL, cmd, 30, NULL, &r, &err), err);
	assert_int_equal(aks_result_get_exit_code(r), 0);
	aks_result_free(r);
	free(cmd);
	expect_escape(f, "etc_link/passwd");
	expect_escape(f, "etc_link/aks-evil-file");
	expect_escape(f, "out_dir/secret");
	expect_escape(f, "out_dir/new/file");
	expect_escape(f, "out_file");
	expect_escape(f, "d/up/x");
	assert_false(exists("/etc/aks-evil-file"));
	char *p = xasprintf("%s/new", outside);
	assert_false(exists(p));
	free(p);
	char *secret = xasprintf("%s/secret", outside);
	char *t = read_text(secret);
	assert_string_equal(t, "secret\n"); /* not overwritten through out_file */
	free(t);
	free(secret);

	/* absolute paths map inside the sandbox */
	aks_call call;
	aks_call_init(&call, 30, NULL, NULL, NULL);
	check_ok(aks_sandbox_upload_file(f->sb, "/etc/passwd", "mine\n", 5, &call, &err), err);
	p = xasprintf("%s/etc/passwd", f->id);
	t = read_text(p);
	assert_string_equal(t, "mine\n");
	free(t);
	free(p);
	t = read_text("/etc/passwd");
	assert_true(strncmp(t, "mine\n", 5) != 0); /* the real one is untouched */
	free(t);

	/* a symlink that stays inside is followed */
	check_ok(aks_sandbox_download_file(f->sb, "alias.txt", &call, &r, &err), err);
	size_t len;
	const unsigned char *got = aks_result_get_file(r, 0, NULL, NULL, &len);
	assert_int_equal(len, 3);
	assert_memory_equal(got, "in\n", 3);
	aks_result_free(r);
	free(outside);
}

static void test_missing_file(void **state)
{
	fixture *f = *state;
	aks_call call;
	aks_call_init(&call, 30, NULL, NULL, NULL);
	aks_error *err = NULL;
	aks_result *r = NULL;
	check_error(aks_sandbox_download_file(f->sb, "nope.txt", &call, &r, &err), &err,
	            AKS_ENOTFOUND, "file 'nope.txt' not found in the sandbox");
	assert_null(r);
	check_error(aks_sandbox_download_file(f->sb, "no/such/dir/x", &call, &r, &err), &err,
	            AKS_ENOTFOUND, "file 'no/such/dir/x' not found in the sandbox");
	/* a directory, and a FIFO, are not regular files */
	check_ok(run(f, NULL, "mkdir adir && mkfifo afifo", 30, NULL, &r, &err), err);
	aks_result_free(r);
	check_error(aks_sandbox_download_file(f->sb, "adir", &call, &r, &err), &err, AKS_ENOTFOUND,
	            "file 'adir' not found in the sandbox");
	check_error(aks_sandbox_download_file(f->sb, "afifo", &call, &r, &err), &err, AKS_ENOTFOUND,
	            "file 'afifo' not found in the sandbox");
	check_error(aks_sandbox_download_file(f->sb, "/", &call, &r, &err), &err, AKS_ENOTFOUND,
	            NULL);
	/* uploading onto a directory is refused */
	check_error(aks_sandbox_upload_file(f->sb, "adir", "x", 1, &call, &err), &err, AKS_EINVAL,
	            NULL);
}

/* ---- lifecycle ---------------------------------------------------------------------------------
 */

static void test_workdir_and_id(void **state)
{
	fixture *f = *state;
	/* workdir (base/work/a/b) was created with its parents */
	size_t wl = strlen(f->workdir);
	assert_memory_equal(f->id, f->workdir, wl);
	assert_memory_equal(f->id + wl, "/ak-sandbox-", 12);
	assert_null(strchr(f->id + wl + 1, '/'));
	struct stat st;
	assert_int_equal(stat(f->id, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0700);
	/* each create is a new directory */
	aks_sandbox *second = NULL;
	aks_call call;
	aks_call_init(&call, 30, NULL, NULL, NULL);
	aks_error *err = NULL;
	check_ok(aks_provider_create(f->prov, &call, &second, &err), err);
	char *id2 = strdup(aks_sandbox_get_id(second));
	assert_string_not_equal(id2, f->id);
	aks_sandbox_close(second);
	check_ok(aks_provider_destroy(f->prov, id2, &call, &err), err);
	assert_false(exists(id2));
	free(id2);
}

static void test_default_tmpdir(void **state)
{
	fixture *f = *state;
	char *old = getenv("TMPDIR") ? strdup(getenv("TMPDIR")) : NULL;
	char *tmp = xasprintf("%s/tmpdir", f->base);
	assert_int_equal(mkdir(tmp, 0700), 0);
	setenv("TMPDIR", tmp, 1);
	aks_error *err = NULL;
	check_ok(aks_config_default_block(f->plugin, &f->config, &err), err);
	open_provider(f);
	create_sandbox(f);
	if (old)
		setenv("TMPDIR", old, 1);
	else
		unsetenv("TMPDIR");
	free(old);
	assert_memory_equal(f->id, tmp, strlen(tmp));
	assert_memory_equal(f->id + strlen(tmp), "/ak-sandbox-", 12);
	free(tmp);
}

static void test_attach_gone_destroy(void **state)
{
	fixture *f = *state;
	aks_call call;
	aks_call_init(&call, 30, NULL, NULL, NULL);
	aks_error *err = NULL;
	char *id = strdup(f->id);
	check_ok(aks_sandbox_upload_file(f->sb, "keep.txt", "state", 5, &call, &err), err);
	aks_sandbox_close(f->sb); /* close keeps the directory */
	f->sb = NULL;
	assert_true(exists(id));

	/* attach: a new handle on the same workspace */
	check_ok(aks_provider_attach(f->prov, id, &call, &f->sb, &err), err);
	f->id = aks_sandbox_get_id(f->sb);
	assert_string_equal(f->id, id);
	aks_result *r;
	check_ok(run(f, NULL, "cat keep.txt", 30, NULL, &r, &err), err);
	assert_string_equal(out_of(r), "state");
	aks_result_free(r);

	/* destroy removes it; twice is fine; an unknown id is fine */
	check_ok(aks_provider_destroy(f->prov, id, &call, &err), err);
	assert_false(exists(id));
	check_ok(aks_provider_destroy(f->prov, id, &call, &err), err);
	check_ok(aks_provider_destroy(f->prov, "unknown-sandbox-id", &call, &err), err);

	/* the old handle now reports the sandbox gone */
	check_error(run(f, NULL, "true", 30, NULL, &r, &err), &err, AKS_EGONE, NULL);
	check_error(aks_sandbox_upload_file(f->sb, "x", "x", 1, &call, &err), &err, AKS_EGONE,
	            NULL);
	aks_sandbox_close(f->sb);
	f->sb = NULL;
	f->id = NULL;

	/* attach to it: gone, with the original's message */
	aks_sandbox *sb = NULL;
	char *msg = xasprintf("sandbox working directory '%s' no longer exists", id);
	check_error(aks_provider_attach(f->prov, id, &call, &sb, &err), &err, AKS_EGONE, msg);
	assert_null(sb);
	free(msg);
	check_error(aks_provider_attach(f->prov, "nonexistent-id", &call, &sb, &err), &err,
	            AKS_EGONE, "sandbox working directory 'nonexistent-id' no longer exists");
	free(id);
}

static void test_destroy_prefix_rule(void **state)
{
	fixture *f = *state;
	aks_call call;
	aks_call_init(&call, 30, NULL, NULL, NULL);
	aks_error *err = NULL;
	/* a directory without the prefix is never deleted */
	char *keep = xasprintf("%s/precious", f->base);
	sh("mkdir -p '%s/sub' && echo data > '%s/sub/file'", keep, keep);
	check_ok(aks_provider_destroy(f->prov, keep, &call, &err), err);
	char *kept = xasprintf("%s/sub/file", keep);
	assert_true(exists(kept));
	/* nor through a prefixed symlink */
	char *link = xasprintf("%s/ak-sandbox-link", f->base);
	assert_int_equal(symlink(keep, link), 0);
	check_ok(aks_provider_destroy(f->prov, link, &call, &err), err);
	assert_true(exists(kept));
	/* nor a prefixed regular file */
	char *file = xasprintf("%s/ak-sandbox-file", f->base);
	write_text(file, "x");
	check_ok(aks_provider_destroy(f->prov, file, &call, &err), err);
	assert_true(exists(file));
	/* a prefixed directory is deleted with everything in it (a trailing
	 * slash is fine), without following symlinks inside it */
	char *victim = xasprintf("%s/ak-sandbox-manual", f->base);
	sh("mkdir -p '%s/x/y' && echo 1 > '%s/x/y/z' && ln -s '%s' '%s/x/outlink' && "
	   "chmod 000 '%s/x/y'",
	   victim, victim, keep, victim, victim);
	char *slashed = xasprintf("%s/", victim);
	check_ok(aks_provider_destroy(f->prov, slashed, &call, &err), err);
	assert_false(exists(victim));
	assert_true(exists(kept));
	free(slashed);
	free(victim);
	free(file);
	free(link);
	free(kept);
	free(keep);
}

/* ---- timeouts, cancellation, leftovers ---------------------------------------------------------
 */

/* Starts a session leader, a double-forked daemon, a process that changes
 * its group, and a classic fork/setsid/fork daemon, each writing its PID to
 * ./pids; then waits until all five (with its own) are on file. */
static const char tree_script[] =
    "setsid bash -c 'echo $$ >> pids; exec sleep 1000' & "
    "( bash -c 'echo $$ >> pids; exec sleep 1000' & ) ; "
    "python3 -c 'import os,time; os.setpgid(0,0); open(\"pids\",\"a\").write(\"%d\\n\" % "
    "os.getpid()); time.sleep(1000)' & "
    "python3 -c 'import os,time\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    if os.fork() == 0:\n"
    "        open(\"pids\",\"a\").write(\"%d\\n\" % os.getpid()); time.sleep(1000)\n"
    "    os._exit(0)\n"
    "' ; "
    "echo $$ >> pids; "
    "for i in $(seq 400); do [ $(wc -l < pids) -ge 5 ] && break; sleep 0.025; done; ";

static void test_timeout_kills_tree(void **state)
{
	fixture *f = *state;
	char *script = xasprintf("%s echo started; exec sleep 1000", tree_script);
	aks_result *r;
	aks_error *err = NULL;
	int64_t t0 = now_ms();
	int rc = run(f, NULL, script, 2.5, NULL, &r, &err);
	int64_t took = now_ms() - t0;
	check_error(rc, &err, AKS_ETIMEOUT, "subprocess exceeded timeout 2.5s");
	assert_true(took >= 2500);
	assert_true(took < 3 * 2500); /* a small multiple of the timeout */
	assert_non_null(r);
	assert_true(aks_result_timed_out(r));
	assert_string_equal(out_of(r), "started\n"); /* output before the kill is kept */
	/* killed at its deadline: no exit code of its own, as on every provider */
	assert_int_equal(aks_result_get_exit_code(r), -1);
	aks_result_free(r);
	char *pids = xasprintf("%s/pids", f->id);
	assert_pids_gone(pids, 5);
	free(pids);
	free(script);

	/* python code too, and a whole-number timeout prints as such */
	t0 = now_ms();
	rc = run(f, "python", "import time\nprint('x', flush=True)\ntime.sleep(100)", 1, NULL, &r,
	         &err);
	check_error(rc, &err, AKS_ETIMEOUT, "subprocess exceeded timeout 1s");
	assert_true(now_ms() - t0 < 3000);
	assert_string_equal(out_of(r), "x\n");
	aks_result_free(r);
}

static void test_exit_leaves_nothing_behind(void **state)
{
	fixture *f = *state;
	char *script = xasprintf("%s sleep 1000 & echo $! >> pids; echo done", tree_script);
	aks_result *r;
	aks_error *err = NULL;
	int64_t t0 = now_ms();
	/* the background jobs hold stdout open: the call must end anyway */
	check_ok(run(f, NULL, script, 60, NULL, &r, &err), err);
	assert_true(now_ms() - t0 < 10000);
	assert_int_equal(aks_result_get_exit_code(r), 0);
	assert_string_equal(out_of(r), "done\n");
	assert_false(aks_result_timed_out(r));
	aks_result_free(r);
	char *pids = xasprintf("%s/pids", f->id);
	assert_pids_gone(pids, 6);
	free(pids);
	free(script);
}

typedef struct trigger {
	aks_cancel *cancel;
	int delay_ms;
} trigger;

static void *trigger_later(void *arg)
{
	trigger *t = arg;
	usleep((useconds_t)t->delay_ms * 1000);
	aks_cancel_trigger(t->cancel);
	return NULL;
}

static void test_cancel(void **state)
{
	fixture *f = *state;
	aks_cancel *cancel = NULL;
	aks_error *err = NULL;
	check_ok(aks_cancel_new(&cancel, &err), err);
	trigger t = {cancel, 1500};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, trigger_later, &t), 0);
	char *script = xasprintf("%s echo ready; exec sleep 1000", tree_script);
	aks_result *r;
	int64_t t0 = now_ms();
	int rc = run(f, NULL, script, 60, cancel, &r, &err);
	int64_t took = now_ms() - t0;
	pthread_join(th, NULL);
	check_error(rc, &err, AKS_ECANCELLED, NULL);
	assert_true(took >= 1500 && took < 6000);
	assert_non_null(r);
	assert_string_equal(out_of(r), "ready\n");
	aks_result_free(r);
	char *pids = xasprintf("%s/pids", f->id);
	assert_pids_gone(pids, 5);
	free(pids);
	free(script);

	/* already cancelled: nothing runs */
	rc = run(f, NULL, "touch ran", 60, cancel, &r, &err);
	check_error(rc, &err, AKS_ECANCELLED, NULL);
	aks_result_free(r);
	char *ran = xasprintf("%s/ran", f->id);
	assert_false(exists(ran));
	free(ran);
	aks_cancel_free(cancel);
}

/* 50 MiB on stdout: the host keeps its cap, counts the rest, and the program
 * runs to completion (nothing blocks on a full pipe). */
static void test_huge_output(void **state)
{
	fixture *f = *state;
	size_t cap = (size_t)1 << 20;
	aks_provider_set_limits(f->prov, cap, AKS_DEFAULT_FILE_CAP);
	aks_result *r;
	aks_error *err = NULL;
	check_ok(run(f, "python",
	             "import sys\n"
	             "chunk = b'x' * (1 << 20)\n"
	             "for _ in range(50): sys.stdout.buffer.write(chunk)\n"
	             "sys.stdout.flush()\n"
	             "print('done', file=sys.stderr)\n"
	             "open('finished', 'w').close()\n",
	             120, NULL, &r, &err),
	         err);
	assert_int_equal(aks_result_get_exit_code(r), 0);
	size_t len;
	const char *out = aks_result_get_stdout(r, &len);
	assert_int_equal(len, cap);
	for (size_t i = 0; i < len; i += 997)
		assert_int_equal(out[i], 'x');
	assert_int_equal(aks_result_get_stream_total(r, AKS_STREAM_STDOUT), (uint64_t)50 << 20);
	assert_true(aks_result_is_truncated(r, AKS_STREAM_STDOUT));
	assert_false(aks_result_is_truncated(r, AKS_STREAM_STDERR));
	assert_string_equal(err_of(r), "done\n");
	aks_result_free(r);
	char *fin = xasprintf("%s/finished", f->id);
	assert_true(exists(fin));
	free(fin);
}

/* Several sandboxes of one provider, used from several threads at once. */
typedef struct par {
	fixture *f;
	aks_sandbox *sb;
	int n;
	int rc;
	char out[64];
} par;

static void *par_run(void *arg)
{
	par *p = arg;
	aks_call call;
	aks_call_init(&call, 60, NULL, NULL, NULL);
	/* when it started and ended, by the clock all the runs share */
	char *code = xasprintf("import time; s = time.time(); time.sleep(1); "
	                       "print(%d * 2, s, time.time())",
	                       p->n);
	aks_result *r = NULL;
	aks_error *err = NULL;
	p->rc = aks_sandbox_execute_code(p->sb, code, "python", &call, &r, &err);
	if (r)
		snprintf(p->out, sizeof(p->out), "%s", out_of(r));
	aks_result_free(r);
	aks_error_free(err);
	free(code);
	return NULL;
}

static void test_concurrent_sandboxes(void **state)
{
	fixture *f = *state;
	enum { N = 6 };
	par ps[N];
	pthread_t th[N];
	aks_call call;
	aks_call_init(&call, 30, NULL, NULL, NULL);
	for (int i = 0; i < N; i++) {
		memset(&ps[i], 0, sizeof(ps[i]));
		ps[i].f = f;
		ps[i].n = i;
		aks_error *err = NULL;
		check_ok(aks_provider_create(f->prov, &call, &ps[i].sb, &err), err);
	}
	for (int i = 0; i < N; i++)
		assert_int_equal(pthread_create(&th[i], NULL, par_run, &ps[i]), 0);
	for (int i = 0; i < N; i++)
		pthread_join(th[i], NULL);
	/* they overlapped: every run started before any ended (however slow the host's part
	 * was: under valgrind its threads take turns) */
	double last_start = 0, first_end = 1e300;
	for (int i = 0; i < N; i++) {
		assert_int_equal(ps[i].rc, AKS_OK);
		int twice = -1;
		double s = 0, e = 0;
		assert_int_equal(sscanf(ps[i].out, "%d %lf %lf", &twice, &s, &e), 3);
		assert_int_equal(twice, i * 2);
		last_start = s > last_start ? s : last_start;
		first_end = e < first_end ? e : first_end;
	}
	if (last_start >= first_end)
		fail_msg("the runs did not overlap: the last started %.3f s after the first ended",
		         last_start - first_end);
	for (int i = 0; i < N; i++) {
		char *id = strdup(aks_sandbox_get_id(ps[i].sb));
		aks_sandbox_close(ps[i].sb);
		aks_error *err = NULL;
		check_ok(aks_provider_destroy(f->prov, id, &call, &err), err);
		free(id);
	}
}

/* The probe a hostile program runs as the host's own user: read a process's environment,
 * write into its stdout. Prints "read PID" / "wrote PID" for what worked, then "done". */
static char *proc_probe(pid_t host, pid_t control)
{
	return xasprintf("for p in %d $PPID %d; do "
	                 "cat /proc/$p/environ >/dev/null 2>&1 && echo read $p; "
	                 "(printf '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\\n' "
	                 "> /proc/$p/fd/1) 2>/dev/null && echo wrote $p; "
	                 "done; echo done",
	                 (int)host, (int)control);
}

/* In a child as `nobody`: a host with a secret in its environment opens a provider and
 * runs the probe. Exit codes: 0 as expected, 10+ which step failed (no cmocka here). */
static int probe_as_nobody(const char *base, const char *agent)
{
	if (setgid(65534) < 0 || setuid(65534) < 0)
		return 10;
	setenv("AKS_TEST_SECRET", "hunter2", 1);
	char *yaml = xasprintf("%s/nobody.yaml", base);
	char *text = xasprintf("sandbox:\n  enabled: true\n  type: local_subprocess\n"
	                       "  local_subprocess:\n    workdir: %s/nobody-work\n    agent: %s\n",
	                       base, agent);
	write_text(yaml, text);
	const aks_plugin *plugin = NULL;
	aks_config *config = NULL;
	aks_provider *prov = NULL;
	aks_sandbox *sb = NULL;
	aks_result *r = NULL;
	aks_error *err = NULL;
	aks_call call;
	aks_call_init(&call, 30, NULL, NULL, NULL);
	if (aks_plugin_load("local_subprocess", AKS_PLUGIN_PROVIDER, &plugin, &err) != AKS_OK ||
	    aks_config_load_block(plugin, yaml, &config, &err) != AKS_OK ||
	    aks_provider_open(plugin, config, &prov, &err) != AKS_OK ||
	    aks_provider_create(prov, &call, &sb, &err) != AKS_OK)
		return 11;
	if (!strstr(aks_provider_get_description(prov), "closed to its programs"))
		return 12;
	/* a control the probe must be able to read and write: a dumpable process of ours whose
	 * stdout is a pipe, as an MCP server's is */
	int pfd[2], exec_seen[2];
	if (pipe(pfd) < 0 || pipe2(exec_seen, O_CLOEXEC) < 0)
		return 15;
	pid_t control = fork();
	if (control == 0) {
		dup2(pfd[1], 1);
		execl("/bin/sleep", "sleep", "30", (char *)NULL);
		_exit(127);
	}
	/* Until its exec the control is a fork of this (non-dumpable) host, closed to the
	 * probe like the host itself: wait for the exec, which closes exec_seen's write end. */
	close(exec_seen[1]);
	char byte;
	while (read(exec_seen[0], &byte, 1) < 0 && errno == EINTR)
		;
	close(exec_seen[0]);
	char *probe = proc_probe(getpid(), control);
	int rc = aks_sandbox_execute_command(sb, probe, &call, &r, &err);
	kill(control, SIGKILL);
	char *want = xasprintf("read %d\nwrote %d\ndone\n", (int)control, (int)control);
	int code = rc != AKS_OK ? 13 : strcmp(aks_result_get_stdout(r, NULL), want) != 0 ? 14 : 0;
	if (code == 14)
		fprintf(stderr, "probe said: %s", aks_result_get_stdout(r, NULL));
	/* everything freed: valgrind checks this child's leaks too */
	waitpid(control, NULL, 0);
	close(pfd[0]);
	close(pfd[1]);
	free(want);
	free(probe);
	aks_result_free(r);
	aks_error_free(err);
	char *id = strdup(aks_sandbox_get_id(sb));
	aks_sandbox_close(sb);
	aks_provider_destroy(prov, id, &call, NULL);
	free(id);
	aks_provider_close(prov);
	aks_config_free(config);
	free(text);
	free(yaml);
	return code;
}

/*
 * No isolation, but this host's /proc entries are closed to its programs: a program cannot
 * read the host's environment (its secrets) nor write forged replies into its stdout (an
 * MCP server's channel), nor do either to the agent or supervisor between them. As root
 * nothing closes them, and the description says so plainly.
 */
static void test_host_proc_closed(void **state)
{
	fixture *f = *state;
	load_config(f, NULL);
	open_provider(f);
	if (geteuid() != 0) {
		skip(); /* the suite runs as root in CI; the probe below needs to switch users */
		return;
	}
	assert_non_null(strstr(aks_provider_get_description(f->prov),
	                       "runs as root, so its programs can read this host's memory"));
	char *work = xasprintf("%s/nobody-work", f->base);
	assert_int_equal(mkdir(work, 0700), 0);
	assert_int_equal(chown(work, 65534, 65534), 0);
	assert_int_equal(chmod(f->base, 0777), 0);
	free(work);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(probe_as_nobody(f->base, LS_TEST_AGENT));
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

#define T(name)  cmocka_unit_test_setup_teardown(name, setup, teardown)
#define TB(name) cmocka_unit_test_setup_teardown(name, setup_bare, teardown)

static const struct CMUnitTest tests[] = {
    TB(test_descriptor),
    TB(test_init_warns),
    TB(test_config_rejects_unknown_key),
    T(test_python),
    T(test_bash_and_command),
    T(test_unknown_language),
    T(test_python_config),
    T(test_code_too_long),
    T(test_minimal_env),
    TB(test_env_config_rejects_bad_name),
    T(test_files_binary_roundtrip),
    T(test_download_limit),
    T(test_path_escapes),
    T(test_missing_file),
    T(test_stateful_python),
    T(test_workdir_and_id),
    TB(test_default_tmpdir),
    T(test_attach_gone_destroy),
    T(test_destroy_prefix_rule),
    T(test_timeout_kills_tree),
    T(test_exit_leaves_nothing_behind),
    T(test_cancel),
    T(test_huge_output),
    T(test_concurrent_sandboxes),
    TB(test_host_proc_closed),
};

int main(void)
{
	/* test_init_warns reads the warning from the host's log; the host reads
	 * the level once, so pin it before anything logs. */
	setenv("AKS_LOG_LEVEL", "warning", 1);
	/* AKS_LS_TEST_FILTER=test_files* runs some cases (a cmocka glob) */
	const char *filter = getenv("AKS_LS_TEST_FILTER");
	if (filter && *filter)
		cmocka_set_test_filter(filter);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
