/*
 * sdk/check/checks_child.c - the world a sandboxed program starts in.
 *
 * Hosts call providers from threads that block every signal (aksandbox mcp's
 * call threads), with SIGPIPE ignored, with stdin the MCP client's channel and
 * an environment full of the host's secrets. A provider that spawns its
 * programs must give them none of that: a program reading stdin would steal
 * the client's requests, one with signals blocked or ignored could never be
 * stopped by them (`sleep 2 & wait` never returns), and one seeing the host's
 * environment sees its API keys. This check puts the calling thread in that
 * state, then asks the program what it got.
 */
#include "config.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

/* The name of a variable set in the runner's environment during the check; its value is
 * never printed by the program, only whether the name reached it. */
#define SECRET_NAME "AKS_CHECK_HOST_SECRET"

/*
 * What the program reports, on one line: its blocked and ignored signals among 1..31, as
 * Python sees them (it changes no mask at start, and of the dispositions only SIGPIPE's and
 * SIGXFSZ's, which are left out; an inherited SIG_IGN it keeps), whether the secret's name is
 * in its environment, and how many bytes stdin gave before EOF. Python's view rather than
 * /proc/self/status, which gVisor's kernel does not fill in. The line's start is split in the
 * source, so that a provider echoing the source back is not mistaken for one that ran it.
 */
static const char probe[] =
    "import os, signal, sys\n"
    "low = [s for s in range(1, 32) if s not in (signal.SIGKILL, signal.SIGSTOP)]\n"
    "blocked = sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])\n"
    "                 if 0 < int(s) < 32)\n"
    "ignored = [s for s in low if s not in (signal.SIGPIPE, signal.SIGXFSZ)\n"
    "           and signal.getsignal(s) == signal.SIG_IGN]\n"
    "print('blo' 'cked=%s ignored=%s secret=%s stdin=%d' % (blocked, ignored,\n"
    "      '" SECRET_NAME "' in os.environ, len(sys.stdin.buffer.read())))\n";

/* The runner as a host may be: fd 0 a pipe that never ends, every signal blocked on this
 * thread, SIGPIPE and SIGTERM ignored, a secret in the environment. */
struct hostile_host {
	int saved_stdin, pipe_w;
	sigset_t saved_mask;
	struct sigaction saved_pipe, saved_term;
};

static void hostile_enter(struct hostile_host *h)
{
	int p[2];
	if (pipe(p) != 0)
		aks_check_fail("pipe: cannot set up the check");
	h->saved_stdin = dup(0);
	dup2(p[0], 0);
	close(p[0]);
	h->pipe_w = p[1]; /* kept open: a reader of this stdin would wait for ever */
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &h->saved_mask);
	struct sigaction ign = {.sa_handler = SIG_IGN};
	sigaction(SIGPIPE, &ign, &h->saved_pipe);
	sigaction(SIGTERM, &ign, &h->saved_term);
	setenv(SECRET_NAME, "this value must not reach a sandbox", 1);
}

static void hostile_leave(struct hostile_host *h)
{
	unsetenv(SECRET_NAME);
	sigaction(SIGTERM, &h->saved_term, NULL);
	sigaction(SIGPIPE, &h->saved_pipe, NULL);
	pthread_sigmask(SIG_SETMASK, &h->saved_mask, NULL);
	if (h->saved_stdin >= 0) {
		dup2(h->saved_stdin, 0);
		close(h->saved_stdin);
	} else {
		int null = open("/dev/null", O_RDONLY);
		dup2(null, 0);
		close(null);
	}
	close(h->pipe_w);
}

void aks_check_child_world(void)
{
	struct hostile_host h;
	aks_result *r = NULL;
	aks_error *err = NULL;
	aks_call call;
	char line[512];

	aks_provider *prov = aks_check_need_provider();
	aks_sandbox *sb = NULL;
	/* Nothing in here may fail the check (a jump out would leave the runner hostile). The
	 * sandbox is made in this state too: a provider may start its programs (or an agent
	 * that starts them) as early as create. */
	hostile_enter(&h);
	aks_check_call(&call);
	int rc = aks_provider_create(prov, &call, &sb, &err);
	if (rc == AKS_OK && sb) {
		aks_call_init(&call, 15.0, NULL, NULL, NULL);
		rc = aks_sandbox_execute_code(sb, probe, "python", &call, &r, &err);
	}
	hostile_leave(&h);
	if (!sb)
		aks_check_expect("create (from a thread blocking every signal)", rc, AKS_OK, err);
	if (!sb)
		aks_check_fail("create returned AKS_OK but no sandbox");
	aks_check_track(sb);
	aks_check_keep(r);
	if (rc == AKS_ETIMEOUT) {
		aks_error_free(err);
		aks_check_fail(
		    "the program did not finish within 15 s: it is reading the host's stdin "
		    "(give it /dev/null) or cannot run");
	}
	aks_check_expect("execute_code(the child-world probe)", rc, AKS_OK, err);
	size_t len = 0;
	const char *out = r ? aks_result_get_stdout(r, &len) : NULL;
	const char *nl = out ? memchr(out, '\n', len) : NULL;
	snprintf(line, sizeof(line), "%.*s", nl ? (int)(nl - out) : (int)len, out ? out : "");
	if (aks_result_get_exit_code(r) == 0 && !strstr(out ? out : "", "blocked=")) {
		/* A fake that echoes its input runs no program: nothing to verify, and that is
		 * said, never counted as a pass. */
		aks_check_note("NOT VERIFIED: child_world: the provider printed no probe line, so "
		               "it runs no program whose world could be checked\n");
		aks_check_skip();
	}
	if (aks_result_get_exit_code(r) != 0 || strncmp(line, "blocked=", 8) != 0)
		aks_check_fail(
		    "the probe failed (exit %d): %s%s", aks_result_get_exit_code(r), line,
		    aks_result_get_stderr(r, NULL) ? aks_result_get_stderr(r, NULL) : "");
	if (!strstr(line, "blocked=[] "))
		aks_check_fail(
		    "the program starts with signals blocked (%s): give it an empty mask "
		    "(posix_spawnattr_setsigmask, or sigprocmask before exec)",
		    line);
	if (!strstr(line, "ignored=[] "))
		aks_check_fail(
		    "the program starts with signals ignored (%s): reset them to SIG_DFL "
		    "(posix_spawnattr_setsigdefault)",
		    line);
	if (!strstr(line, "secret=False "))
		aks_check_fail(
		    "the host's environment reached the program (%s is set in it): give it "
		    "a minimal environment of its own",
		    SECRET_NAME);
	if (!strstr(line, "stdin=0"))
		aks_check_fail("the program's stdin is not empty (%s): give it /dev/null", line);
}
