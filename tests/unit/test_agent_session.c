/* Unit tests: the agent module every provider shares (plugins/common/agent/aks_agent.h),
 * driven through a provider table of the test's own whose stream is the real aksandbox-agent
 * as a child over pipes. The ELF reader on crafted headers; the `agent` key; the lazy start;
 * Python state kept; a killed agent restarted with one notice; a fallback said once (log,
 * notice, description, `stateful`); a remembered placement looked at again when the start
 * fails; a stream broken mid-call being AKS_EIO unless the sandbox is gone; the one timeout
 * wording; long texts through stdin; files through the agent, a FIFO refused. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/plugin/host_api.h"
#include "core/plugin/result.h"
#include "plugins/common/agent/aks_agent.h"
#include "test_agent_harness.h"

/* ---- ELF headers ------------------------------------------------------------------------- */

/* A 64-bit header of machine m in byte order big, with one program header of type pt (0:
 * none). */
static size_t make_elf64(unsigned char *b, size_t cap, unsigned m, bool big, uint32_t pt)
{
	memset(b, 0, cap);
	memcpy(b, ELFMAG, SELFMAG);
	b[EI_CLASS] = ELFCLASS64;
	b[EI_DATA] = big ? ELFDATA2MSB : ELFDATA2LSB;
	b[EI_VERSION] = EV_CURRENT;
	/* put16/32/64 in the chosen order */
#define PUT(off, v, n)                                                                             \
	for (unsigned i_ = 0; i_ < (n); i_++)                                                      \
	b[(off) + (big ? (n)-1 - i_ : i_)] = (unsigned char)((uint64_t)(v) >> (8 * i_))
	PUT(offsetof(Elf64_Ehdr, e_machine), m, 2);
	PUT(offsetof(Elf64_Ehdr, e_phoff), sizeof(Elf64_Ehdr), 8);
	PUT(offsetof(Elf64_Ehdr, e_phentsize), sizeof(Elf64_Phdr), 2);
	PUT(offsetof(Elf64_Ehdr, e_phnum), pt ? 1 : 0, 2);
	if (pt)
		PUT(sizeof(Elf64_Ehdr), pt, 4);
#undef PUT
	return sizeof(Elf64_Ehdr) + (pt ? sizeof(Elf64_Phdr) : 0);
}

static void t_elf_read(void **state)
{
	(void)state;
	unsigned char b[256];
	aks_elf_info e;
	size_t n = make_elf64(b, sizeof(b), EM_X86_64, false, PT_LOAD);
	assert_null(aks_elf_read(b, n, &e));
	assert_string_equal(e.uname, "x86_64");
	assert_string_equal(e.oci, "amd64");
	assert_false(e.dynamic);
	n = make_elf64(b, sizeof(b), EM_AARCH64, false, PT_INTERP);
	assert_null(aks_elf_read(b, n, &e));
	assert_string_equal(e.oci, "arm64");
	assert_true(e.dynamic);
	/* the other byte order, read as such */
	n = make_elf64(b, sizeof(b), EM_PPC64, true, 0);
	assert_null(aks_elf_read(b, n, &e));
	assert_true(e.big_endian);
	assert_string_equal(e.uname, "ppc64");
	n = make_elf64(b, sizeof(b), EM_PPC64, false, 0);
	assert_null(aks_elf_read(b, n, &e));
	assert_string_equal(e.uname, "ppc64le");
	/* unknown machine: read, unnamed */
	n = make_elf64(b, sizeof(b), 0x9999, false, 0);
	assert_null(aks_elf_read(b, n, &e));
	assert_null(e.uname);
	/* truncations and garbage, never read past the end */
	n = make_elf64(b, sizeof(b), EM_X86_64, false, PT_INTERP);
	assert_non_null(aks_elf_read(b, n - sizeof(Elf64_Phdr) + 2, &e)); /* into p_type */
	assert_non_null(aks_elf_read(b, 20, &e));
	assert_string_equal(aks_elf_read("#!/bin/sh\n", 10, &e), "it is not an ELF executable");
	b[EI_CLASS] = 7;
	assert_non_null(aks_elf_read(b, n, &e));
	/* a program header table far past the end */
	n = make_elf64(b, sizeof(b), EM_X86_64, false, PT_LOAD);
	b[offsetof(Elf64_Ehdr, e_phoff) + 5] = 0x7f;
	assert_non_null(aks_elf_read(b, n, &e));
}

static void t_elf_runs_on(void **state)
{
	(void)state;
	aks_elf_info e = {.uname = "i686"};
	assert_true(aks_elf_runs_on(&e, "i386"));
	assert_true(aks_elf_runs_on(&e, "i686"));
	assert_false(aks_elf_runs_on(&e, "x86_64"));
	e.uname = "arm";
	assert_true(aks_elf_runs_on(&e, "armv7l"));
	assert_false(aks_elf_runs_on(&e, "arm64"));
	e.uname = "x86_64";
	assert_true(aks_elf_runs_on(&e, "x86_64"));
	assert_false(aks_elf_runs_on(&e, "aarch64"));
	e.uname = NULL;
	assert_false(aks_elf_runs_on(&e, "x86_64"));
}

/* ---- the program -------------------------------------------------------------------------- */

static bool stateful;

static int open_program(const char *configured, bool copied_in, aks_agent_program **out,
                        aks_error **err)
{
	stateful = true;
	aks_agent_program_opts o = {.provider = "fake",
	                            .configured = configured,
	                            .installed = "/nonexistent/aksandbox-agent",
	                            .per_call = "one fake exec per call",
	                            .copied_in = copied_in,
	                            .python_session = true,
	                            .stateful = &stateful};
	return aks_agent_program_open(aks__host_api(), &o, out, err);
}

static void t_program_key(void **state)
{
	(void)state;
	aks_agent_program *p = NULL;
	aks_error *err = NULL;
	/* false, and null with none installed: disabled, said so, not stateful */
	assert_int_equal(open_program("false", true, &p, &err), AKS_OK);
	assert_false(aks_agent_program_enabled(p));
	assert_string_equal(aks_agent_program_description(p),
	                    "one fake exec per call (agent disabled or not installed)");
	assert_false(stateful);
	aks_agent_program_free(p);
	assert_int_equal(open_program(NULL, true, &p, &err), AKS_OK);
	assert_false(aks_agent_program_enabled(p));
	aks_agent_program_free(p);
	/* a relative or missing path: a config error naming it */
	assert_int_equal(open_program("rel/agent", true, &p, &err), AKS_ECONFIG);
	assert_non_null(strstr(aks_error_message(err), "'rel/agent' is not an executable"));
	aks_error_free(err);
	err = NULL;
	/* a script copied into sandboxes: not an ELF program, refused at init */
	assert_int_equal(open_program("/bin/true", false, &p, &err), AKS_OK);
	assert_true(aks_agent_program_usable(p));
	aks_agent_program_free(p);
	char *dir = th_tmpdir();
	char script[4200];
	snprintf(script, sizeof(script), "%s/agent.sh", dir);
	FILE *f = fopen(script, "w");
	fputs("#!/bin/sh\nexit 0\n", f);
	fclose(f);
	chmod(script, 0755);
	assert_int_equal(open_program(script, true, &p, &err), AKS_ECONFIG);
	assert_non_null(strstr(aks_error_message(err), "cannot be copied into sandboxes"));
	assert_non_null(strstr(aks_error_message(err), "not an ELF"));
	aks_error_free(err);
	err = NULL;
	th_rmdir(dir);
}

static void t_program_static(void **state)
{
	(void)state;
	aks_agent_program *p = NULL;
	aks_error *err = NULL;
	const char *agent = th_agent_path();
	assert_int_equal(open_program(agent, true, &p, &err), AKS_OK);
	const aks_elf_info *e = aks_agent_program_elf(p);
	size_t size = 0;
	assert_non_null(aks_agent_program_data(p, &size));
	struct stat st;
	assert_int_equal(stat(agent, &st), 0);
	assert_int_equal(size, (size_t)st.st_size);
	const char *name = aks_agent_program_name(p);
	assert_int_equal(strlen(name), strlen("aksandbox-agent-") + 16);
	if (e->dynamic) { /* a sanitizer build of the agent: kept, but never copied in */
		assert_false(aks_agent_program_usable(p));
		assert_non_null(strstr(aks_agent_program_description(p), "dynamically linked"));
		assert_false(stateful);
	} else {
		assert_true(aks_agent_program_usable(p));
		assert_true(stateful);
		assert_non_null(
		    strstr(aks_agent_program_description(p), "through aksandbox-agent "));
	}
	aks_agent_program_free(p);
	/* a dynamically linked program (the system's sh) copied in: unusable, said why */
	assert_int_equal(open_program("/bin/sh", true, &p, &err), AKS_OK);
	assert_false(aks_agent_program_usable(p));
	assert_true(aks_agent_program_enabled(p));
	assert_non_null(strstr(aks_agent_program_description(p), "one fake exec per call: "));
	assert_non_null(strstr(aks_agent_program_description(p), "dynamically linked"));
	assert_false(stateful);
	aks_agent_program_free(p);
}

/* ---- a fake provider over the real agent ------------------------------------------------- */

typedef struct fake_sb {
	aks_agent_program *prog;
	aks_agent_session *s;
	char *dir;
	pid_t pid; /* the agent of the open stream */
	int opens, places, per_call, closes;
	bool open_refuses;     /* open() answers *why */
	int open_fails_left;   /* open() starts a program that never says HELLO */
	bool place_unverified; /* place() says it trusted a memory */
	int place_delay_ms;    /* place() takes this long (a copy over a slow exec) */
	bool last_look_again;
	int check_rc;          /* what check() answers */
	int checks;            /* how often check() was asked */
	int stop_after_checks; /* from this check on the sandbox has stopped (0: never) */
} fake_sb;

static int fake_place(void *vsb, bool look_again, const aks_call *call, char **path, bool *verified,
                      char **why, aks_error **err)
{
	(void)call;
	(void)why;
	(void)err;
	fake_sb *f = vsb;
	f->places++;
	if (f->place_delay_ms)
		usleep((useconds_t)f->place_delay_ms * 1000);
	f->last_look_again = look_again;
	*verified = !f->place_unverified || look_again;
	*path = strdup(aks_agent_program_path(f->prog));
	return AKS_OK;
}

static int fake_open(void *vsb, const char *path, const char *const *args, const aks_call *call,
                     void **stream, int *rfd, int *wfd, char **why, aks_error **err)
{
	(void)args; /* not resident: sandboxes of the host process */
	(void)call;
	(void)err;
	fake_sb *f = vsb;
	f->opens++;
	if (f->open_refuses) {
		*why = strdup("the fake engine will not stream");
		return AKS_OK;
	}
	int in[2], out[2];
	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	bool broken = f->open_fails_left > 0;
	if (broken)
		f->open_fails_left--;
	f->pid = fork();
	assert_true(f->pid >= 0);
	if (f->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		if (chdir(f->dir) < 0)
			_exit(126);
		if (broken) /* says something on stdout that is no HELLO, then ends */
			execl("/bin/sh", "sh", "-c", "echo not-an-agent", (char *)NULL);
		else
			execl(path, path, "--kill-leftovers", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	*rfd = out[0];
	*wfd = in[1];
	*stream = f;
	return AKS_OK;
}

static void fake_close(void *vsb, void *stream, char *said, size_t len)
{
	(void)stream;
	fake_sb *f = vsb;
	f->closes++;
	if (said && len)
		snprintf(said, len, "%s", "");
	if (f->pid > 0) {
		kill(f->pid, SIGKILL);
		waitpid(f->pid, NULL, 0);
		f->pid = 0;
	}
}

static int fake_check(void *vsb, const aks_call *call, aks_error **err)
{
	(void)call;
	fake_sb *f = vsb;
	f->checks++;
	if (f->stop_after_checks && f->checks >= f->stop_after_checks)
		return aks__host_api()->error_set(err, AKS_EIO, "fake sandbox stopped (exit 137)");
	if (f->check_rc == AKS_EGONE)
		return aks__host_api()->error_set(err, AKS_EGONE, "fake sandbox '%s' is gone",
		                                  f->dir);
	return f->check_rc;
}

static int fake_code(void *sb, const char *code, const char *language, const aks_call *call,
                     aks_result *out, aks_error **err)
{
	(void)code, (void)language, (void)call, (void)err;
	((fake_sb *)sb)->per_call++;
	aks__host_api()->result_write(out, AKS_STREAM_STDOUT, "per-call\n", 9, NULL);
	aks__host_api()->result_set_exit_code(out, 0);
	return AKS_OK;
}

static int fake_command(void *sb, const char *command, const aks_call *call, aks_result *out,
                        aks_error **err)
{
	return fake_code(sb, command, NULL, call, out, err);
}

static char *last_argv; /* the per-call install command, joined by spaces */

static int fake_argv(void *sb, const char *const *argv, const aks_call *call, aks_result *out,
                     aks_error **err)
{
	(void)call, (void)out, (void)err;
	((fake_sb *)sb)->per_call++;
	size_t n = 1;
	for (size_t i = 0; argv[i]; i++)
		n += strlen(argv[i]) + 1;
	free(last_argv);
	last_argv = calloc(1, n);
	for (size_t i = 0; argv[i]; i++) {
		if (i)
			strcat(last_argv, " ");
		strcat(last_argv, argv[i]);
	}
	return AKS_OK;
}

static const aks_agent_ops fake_ops = {
    .noun = "fake sandbox",
    .timeout_subject = "fake exec",
    .shell = "/bin/sh",
    .file_mode = 0640,
    .place = fake_place,
    .open = fake_open,
    .close = fake_close,
    .check = fake_check,
    .execute_code = fake_code,
    .execute_command = fake_command,
    .install_packages = fake_argv,
};

static int setup(void **state)
{
	fake_sb *f = calloc(1, sizeof(*f));
	aks_error *err = NULL;
	assert_int_equal(open_program(th_agent_path(), false, &f->prog, &err), AKS_OK);
	f->dir = th_tmpdir();
	aks_agent_session_opts o = {.id = "fake-1", .cwd = f->dir};
	assert_int_equal(aks_agent_session_new(f->prog, &fake_ops, f, &o, &f->s, &err), AKS_OK);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fake_sb *f = *state;
	aks_agent_session_free(f->s);
	aks_agent_program_free(f->prog);
	th_rmdir(f->dir);
	free(f);
	return 0;
}

/* Runs a command (code NULL) or Python code; returns the result, *rc its status. */
static aks_result *run(fake_sb *f, const char *command, const char *code, double timeout, int *rc,
                       aks_error **err)
{
	aks_call call;
	aks_call_init(&call, timeout, NULL, NULL, NULL);
	aks_result *r = aks__result_new(4 << 20, 64 << 20);
	assert_non_null(r);
	*rc = command ? aks_agent_execute_command(f->s, command, &call, r, err)
	              : aks_agent_execute_code(f->s, code, "python", "python3", &call, r, err);
	return r;
}

static char *stdout_of(aks_result *r)
{
	return strdup(aks_result_get_stdout(r, NULL));
}

static void expect_out(fake_sb *f, const char *command, const char *code, const char *want)
{
	aks_error *err = NULL;
	int rc;
	aks_result *r = run(f, command, code, 30, &rc, &err);
	if (rc != AKS_OK)
		fail_msg("%s: %s", command ? command : code, aks_error_message(err));
	assert_string_equal(aks_result_get_stdout(r, NULL), want);
	aks_result_free(r);
}

static void t_lazy_start_and_state(void **state)
{
	fake_sb *f = *state;
	assert_int_equal(f->opens, 0); /* nothing until the first operation */
	assert_false(aks_agent_session_up(f->s));
	expect_out(f, "echo hi", NULL, "hi\n");
	assert_int_equal(f->opens, 1);
	assert_int_equal(f->places, 1);
	assert_true(aks_agent_session_up(f->s));
	expect_out(f, NULL, "x = 41", "");
	expect_out(f, NULL, "print(x + 1)", "42\n");
	expect_out(f, "pwd > where", NULL, "");
	char where[4200];
	snprintf(where, sizeof(where), "%s/where", f->dir);
	FILE *fp = fopen(where, "r");
	assert_non_null(fp);
	char line[4200] = "";
	assert_non_null(fgets(line, sizeof(line), fp));
	fclose(fp);
	line[strcspn(line, "\n")] = '\0';
	char *real = realpath(f->dir, NULL);
	assert_string_equal(line, real);
	free(real);
	assert_int_equal(f->opens, 1); /* one agent for the handle's life */
	assert_int_equal(f->per_call, 0);
}

static void t_restart_notice_once(void **state)
{
	fake_sb *f = *state;
	expect_out(f, NULL, "x = 41", "");
	kill(f->pid, SIGKILL);
	waitpid(f->pid, NULL, 0);
	f->pid = 0;
	usleep(100 * 1000); /* the client's reader sees the end of the stream */
	aks_error *err = NULL;
	int rc;
	aks_result *r = run(f, NULL, "print(x + 1)", 30, &rc, &err);
	assert_int_equal(rc, AKS_OK);
	const char *n = aks_result_get_notice(r);
	if (!n || !strstr(n, "aksandbox-agent was restarted") ||
	    !strstr(n, "state from earlier calls was lost"))
		fail_msg("notice: %s", n ? n : "(none)");
	assert_non_null(strstr(aks_result_get_stderr(r, NULL), "NameError"));
	aks_result_free(r);
	assert_int_equal(f->opens, 2);
	assert_true(f->last_look_again); /* placed again: a restart may have lost it */
	r = run(f, "echo again", NULL, 30, &rc, &err);
	assert_int_equal(rc, AKS_OK);
	assert_null(aks_result_get_notice(r)); /* said once */
	aks_result_free(r);
}

static void t_fallback_said_once(void **state)
{
	fake_sb *f = *state;
	f->open_refuses = true;
	aks_error *err = NULL;
	int rc;
	aks_result *r = run(f, "echo x", NULL, 30, &rc, &err);
	assert_int_equal(rc, AKS_OK);
	assert_string_equal(aks_result_get_stdout(r, NULL), "per-call\n");
	const char *n = aks_result_get_notice(r);
	if (!n || !strstr(n, "the fake engine will not stream") ||
	    !strstr(n, "one fake exec per call") || !strstr(n, "Python keeps no state"))
		fail_msg("notice: %s", n ? n : "(none)");
	aks_result_free(r);
	const char *d = aks_agent_program_description(f->prog);
	if (!strstr(d, "one fake exec per call") || !strstr(d, "the fake engine will not stream"))
		fail_msg("description: %s", d);
	assert_false(stateful); /* the instance no longer promises state */
	r = run(f, NULL, "print(1)", 30, &rc, &err);
	assert_int_equal(rc, AKS_OK);
	assert_null(aks_result_get_notice(r));
	aks_result_free(r);
	assert_int_equal(f->opens, 1); /* not tried again for this handle */
	assert_int_equal(f->per_call, 2);
}

/* Under an allowlist the agent's egress proxy is the only way out: a handle whose agent
 * cannot start is refused, never run per call (nothing would enforce network_allow); one
 * whose agent starts has the proxy in every program's environment. */
static void t_egress_no_fallback(void **state)
{
	fake_sb *f = *state;
	aks_agent_session_free(f->s);
	static const char *const allow[] = {"pypi.org", NULL};
	aks_agent_session_opts o = {
	    .id = "fake-1", .cwd = f->dir, .egress_proxy = true, .network_allow = allow};
	aks_error *err = NULL;
	assert_int_equal(aks_agent_session_new(f->prog, &fake_ops, f, &o, &f->s, &err), AKS_OK);
	expect_out(f, "case $HTTPS_PROXY in http://127.0.0.1:*) echo proxied;; esac", NULL,
	           "proxied\n");
	aks_agent_session_free(f->s);
	assert_int_equal(aks_agent_session_new(f->prog, &fake_ops, f, &o, &f->s, &err), AKS_OK);
	f->open_refuses = true;
	int rc;
	aks_result *r = run(f, "echo x", NULL, 30, &rc, &err);
	assert_int_equal(rc, AKS_EIO);
	assert_int_equal(f->per_call, 0);
	aks_result_free(r);
	aks_error_free(err);
}

static void t_remembered_placement_checked_again(void **state)
{
	fake_sb *f = *state;
	f->place_unverified = true;
	f->open_fails_left = 1; /* the remembered copy does not start */
	expect_out(f, "echo up", NULL, "up\n");
	assert_int_equal(f->places, 2);
	assert_true(f->last_look_again);
	assert_int_equal(f->opens, 2);
	assert_int_equal(f->per_call, 0);
}

/* Placed (its bytes checked) and started, but no HELLO: a sandbox that made it unrunnable,
 * or a broken build. Refused, never a quiet change to per call; said why. */
static void t_no_hello_refused(void **state)
{
	fake_sb *f = *state;
	f->open_fails_left = 5; /* placement verified: no second try */
	aks_error *err = NULL;
	int rc;
	aks_result *r = run(f, "echo x", NULL, 30, &rc, &err);
	assert_int_equal(rc, AKS_EIO);
	assert_non_null(strstr(aks_error_message(err), "does not start"));
	assert_non_null(strstr(aks_error_message(err), "did not start in fake sandbox 'fake-1'"));
	aks_error_free(err);
	aks_result_free(r);
	assert_int_equal(f->opens, 1);
	assert_int_equal(f->per_call, 0);
	assert_true(stateful);
}

/* An agent that ran for this handle and cannot be started again (a sandbox that made it
 * unrunnable) is an error of every call until it starts: never a silent downgrade to per
 * call, which would lose the whole-tree kills and the Python state. */
static void t_lost_agent_refused(void **state)
{
	fake_sb *f = *state;
	expect_out(f, NULL, "x = 41", "");
	kill(f->pid, SIGKILL);
	waitpid(f->pid, NULL, 0);
	f->pid = 0;
	usleep(100 * 1000);
	f->open_fails_left = 2; /* the next two starts say no HELLO */
	for (int i = 0; i < 2; i++) {
		aks_error *err = NULL;
		int rc;
		aks_result *r = run(f, "echo x", NULL, 30, &rc, &err);
		assert_int_equal(rc, AKS_EIO);
		assert_non_null(strstr(aks_error_message(err), "cannot be started again"));
		aks_error_free(err);
		aks_result_free(r);
	}
	assert_int_equal(f->per_call, 0);
	assert_true(stateful); /* nothing was downgraded */
	/* once it can start, the handle goes on, with the restart notice */
	aks_error *err = NULL;
	int rc;
	aks_result *r = run(f, "echo back", NULL, 30, &rc, &err);
	assert_int_equal(rc, AKS_OK);
	assert_string_equal(aks_result_get_stdout(r, NULL), "back\n");
	assert_non_null(strstr(aks_result_get_notice(r), "was restarted"));
	aks_result_free(r);
}

static void t_unusable_program(void **state)
{
	fake_sb *f = *state;
	aks_agent_program_unusable(f->prog, "the fake image is for another machine");
	expect_out(f, "echo x", NULL, "per-call\n");
	assert_int_equal(f->opens, 0);
	assert_string_equal(aks_agent_program_description(f->prog),
	                    "one fake exec per call: the fake image is for another machine");
}

/* The agent killed while a call runs: an I/O failure of that call, never AKS_EGONE (which
 * would make the core run it again in a new sandbox), with what check() says. */
static void t_broken_stream(void **state)
{
	fake_sb *f = *state;
	for (int gone = 0; gone < 2; gone++) {
		expect_out(f, "true", NULL, "");
		f->check_rc = gone ? AKS_EGONE : AKS_OK;
		pid_t victim = f->pid;
		pid_t killer = fork();
		if (killer == 0) {
			usleep(300 * 1000);
			kill(victim, SIGKILL);
			_exit(0);
		}
		aks_error *err = NULL;
		int rc;
		aks_result *r = run(f, "sleep 20", NULL, 30, &rc, &err);
		waitpid(killer, NULL, 0);
		/* never AKS_EGONE: the core would run the operation again in a new sandbox */
		assert_int_equal(rc, AKS_EIO);
		assert_non_null(strstr(aks_error_message(err), "broke during the call"));
		if (gone) /* what the sandbox says, said */
			assert_non_null(strstr(aks_error_message(err), "is gone"));
		aks_error_free(err);
		aks_result_free(r);
		f->check_rc = AKS_OK;
	}
}

/* A sandbox that dies under a running program, behind a stream that does not end (as
 * gVisor's): check() is asked while it runs, and the call ends within the watch period
 * with what the sandbox says, never at the call's timeout. */
static void t_watch_while_running(void **state)
{
	fake_sb *f = *state;
	aks_agent_ops ops = fake_ops;
	ops.watch_ms = 200;
	aks_agent_session *s = NULL;
	aks_error *err = NULL;
	aks_agent_session_opts o = {.id = "fake-w", .cwd = f->dir};
	assert_int_equal(aks_agent_session_new(f->prog, &ops, f, &o, &s, &err), AKS_OK);
	aks_agent_session *keep = f->s;
	f->s = s;
	expect_out(f, "true", NULL, "");
	f->stop_after_checks = f->checks + 3;
	int64_t t0 = aks__host_api()->now_ms();
	int rc;
	aks_result *r = run(f, "sleep 20", NULL, 30, &rc, &err);
	int64_t took = aks__host_api()->now_ms() - t0;
	assert_int_equal(rc, AKS_EIO);
	assert_string_equal(aks_error_message(err),
	                    "fake: the program was stopped with its fake sandbox: fake sandbox "
	                    "stopped (exit 137)");
	assert_true(took < 5000);
	assert_int_equal(aks_result_get_exit_code(r), -1);
	aks_error_free(err);
	aks_result_free(r);
	/* a quick program is not held up by the watch */
	f->stop_after_checks = 0;
	expect_out(f, "echo fine", NULL, "fine\n");
	f->s = keep;
	aks_agent_session_free(s);
}

static void t_timeout_wording(void **state)
{
	fake_sb *f = *state;
	aks_error *err = NULL;
	int rc;
	aks_result *r = run(f, "echo started; sleep 30", NULL, 1, &rc, &err);
	assert_int_equal(rc, AKS_ETIMEOUT);
	assert_string_equal(aks_error_message(err), "fake exec exceeded timeout 1s");
	assert_true(aks_result_timed_out(r));
	assert_int_equal(aks_result_get_exit_code(r), -1);
	assert_string_equal(aks_result_get_stdout(r, NULL), "started\n");
	aks_error_free(err);
	aks_result_free(r);
}

/* Placing and starting the agent is setup: the program still gets its whole timeout, on
 * the first call as on a restart (a slow placement once ate all of a 4 s one). */
static void t_setup_not_counted(void **state)
{
	fake_sb *f = *state;
	f->place_delay_ms = 1200;
	for (int i = 0; i < 2; i++) {
		aks_error *err = NULL;
		int rc;
		aks_result *r = run(f, "sleep 1.2; echo done", NULL, 2, &rc, &err);
		if (rc != AKS_OK)
			fail_msg("call %d: %s", i, aks_error_message(err));
		assert_string_equal(aks_result_get_stdout(r, NULL), "done\n");
		aks_result_free(r);
		kill(f->pid, SIGKILL); /* the second call restarts it */
		waitpid(f->pid, NULL, 0);
		f->pid = 0;
		usleep(100 * 1000);
	}
	assert_int_equal(f->places, 2);
}

static void t_long_texts(void **state)
{
	fake_sb *f = *state;
	/* over one argument's limit: through stdin */
	size_t n = 300 * 1024;
	char *cmd = malloc(n + 64);
	int k = snprintf(cmd, n + 64, "printf %%s ");
	memset(cmd + k, 'a', n);
	cmd[k + n] = '\0';
	strcat(cmd + k + n, " | wc -c");
	aks_error *err = NULL;
	int rc;
	aks_result *r = run(f, cmd, NULL, 30, &rc, &err);
	assert_int_equal(rc, AKS_OK);
	char *out = stdout_of(r);
	if (atol(out) != (long)n)
		fail_msg("stdout '%s', stderr '%s'", out, aks_result_get_stderr(r, NULL));
	free(out);
	aks_result_free(r);
	free(cmd);
	assert_int_equal(f->per_call, 0);
	/* Python that is not the session's interpreter, as long */
	char *code = malloc(n + 64);
	k = snprintf(code, n + 64, "print(6 * 7)\n#");
	memset(code + k, 'b', n);
	code[k + n] = '\0';
	aks_call call;
	aks_call_init(&call, 30, NULL, NULL, NULL);
	aks_result *pr = aks__result_new(4 << 20, 64 << 20);
	assert_int_equal(
	    aks_agent_execute_code(f->s, code, "python", "/usr/bin/python3", &call, pr, &err),
	    AKS_OK);
	assert_string_equal(aks_result_get_stdout(pr, NULL), "42\n");
	aks_result_free(pr);
	free(code);
	assert_int_equal(f->per_call, 0);
	/* over one frame: the per-call path takes it */
	n = 2 * 1024 * 1024;
	cmd = malloc(n + 1);
	memset(cmd, '#', n);
	cmd[n] = '\0';
	r = run(f, cmd, NULL, 30, &rc, &err);
	assert_int_equal(rc, AKS_OK);
	assert_int_equal(f->per_call, 1);
	aks_result_free(r);
	free(cmd);
}

static void t_files(void **state)
{
	fake_sb *f = *state;
	aks_call call;
	aks_call_init(&call, 10, NULL, NULL, NULL);
	aks_error *err = NULL;
	char path[4200];
	snprintf(path, sizeof(path), "%s/sub/file.bin", f->dir);
	assert_int_equal(aks_agent_upload(f->s, "sub/file.bin", path, "a\0b", 3, &call, &err),
	                 AKS_OK);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 3);
	assert_int_equal(st.st_mode & 0777, 0640); /* the mode given, whatever the umask */
	aks_result *r = aks__result_new(4 << 20, 64 << 20);
	assert_int_equal(aks_agent_download(f->s, "sub/file.bin", path, &call, r, &err), AKS_OK);
	size_t len = 0;
	const unsigned char *got = aks_result_get_file(r, 0, NULL, NULL, &len);
	assert_int_equal(len, 3);
	assert_memory_equal(got, "a\0b", 3);
	aks_result_free(r);
	/* a FIFO where a file was expected: not found, at once */
	snprintf(path, sizeof(path), "%s/fifo", f->dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	r = aks__result_new(4 << 20, 64 << 20);
	assert_int_equal(aks_agent_download(f->s, "fifo", path, &call, r, &err), AKS_ENOTFOUND);
	assert_string_equal(aks_error_message(err), "file 'fifo' not found in the sandbox");
	aks_error_free(err);
	err = NULL;
	aks_result_free(r);
	expect_out(f, "echo still-serving", NULL, "still-serving\n");
	/* out of the workspace through a symlink: refused where the file is, by the agent */
	char outside[1024], link[1100];
	snprintf(outside, sizeof(outside), "%s-outside", f->dir);
	assert_int_equal(mkdir(outside, 0700), 0);
	snprintf(link, sizeof(link), "%s/out", f->dir);
	assert_int_equal(symlink(outside, link), 0);
	snprintf(path, sizeof(path), "%s/out/secret", f->dir);
	assert_int_equal(aks_agent_upload(f->s, "out/secret", path, "x", 1, &call, &err),
	                 AKS_EPOLICY);
	assert_string_equal(aks_error_message(err),
	                    "path 'out/secret' escapes the sandbox working directory");
	aks_error_free(err);
	err = NULL;
	snprintf(path, sizeof(path), "%s/secret", outside);
	assert_int_equal(access(path, F_OK), -1); /* nothing was written out there */
	FILE *fp = fopen(path, "w");
	fputs("host secret", fp);
	fclose(fp);
	snprintf(path, sizeof(path), "%s/out/secret", f->dir);
	r = aks__result_new(4 << 20, 64 << 20);
	assert_int_equal(aks_agent_download(f->s, "out/secret", path, &call, r, &err), AKS_EPOLICY);
	aks_error_free(err);
	assert_int_equal(aks_result_get_file_count(r), 0);
	aks_result_free(r);
	snprintf(path, sizeof(path), "%s/secret", outside);
	unlink(path);
	rmdir(outside);
}

/* install_packages is `python -m pip install ...`, through the agent or per call. */
static void t_install_packages(void **state)
{
	fake_sb *f = *state;
	aks_call call;
	aks_call_init(&call, 30, NULL, NULL, NULL);
	aks_error *err = NULL;
	const char *none[] = {NULL};
	aks_result *r = aks__result_new(4 << 20, 64 << 20);
	assert_int_equal(aks_agent_install_packages(f->s, "python3", none, &call, r, &err),
	                 AKS_EINVAL);
	assert_string_equal(aks_error_message(err), "install_packages: no packages");
	aks_error_free(err);
	err = NULL;
	/* through the agent: a python that only echoes its argv */
	const char *pk[] = {"numpy", "requests==2.0", NULL};
	assert_int_equal(aks_agent_install_packages(f->s, "echo", pk, &call, r, &err), AKS_OK);
	assert_string_equal(aks_result_get_stdout(r, NULL), "-m pip install numpy requests==2.0\n");
	aks_result_free(r);
	/* per call: the same command line */
	aks_agent_session_stop(f->s);
	f->open_refuses = true;
	r = aks__result_new(4 << 20, 64 << 20);
	assert_int_equal(aks_agent_install_packages(f->s, "py3", pk, &call, r, &err), AKS_OK);
	assert_string_equal(last_argv, "py3 -m pip install numpy requests==2.0");
	aks_result_free(r);
	free(last_argv);
	last_argv = NULL;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_elf_read),
	    cmocka_unit_test(t_elf_runs_on),
	    cmocka_unit_test(t_program_key),
	    cmocka_unit_test(t_program_static),
	    cmocka_unit_test_setup_teardown(t_lazy_start_and_state, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_restart_notice_once, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_fallback_said_once, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_egress_no_fallback, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_remembered_placement_checked_again, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_no_hello_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_unusable_program, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_lost_agent_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_broken_stream, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_timeout_wording, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_setup_not_counted, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_watch_while_running, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_long_texts, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_files, setup, teardown),
	    cmocka_unit_test_setup_teardown(t_install_packages, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
