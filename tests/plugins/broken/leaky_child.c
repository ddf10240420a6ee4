/*
 * leaky_child.so - the fake provider, except that the runner's child-world probe (the one
 * program that asks for its signal mask) really runs, with python3, and is handed one piece
 * of the host's own world the way a careless provider would (posix_spawn's defaults):
 * $LEAKY_CHILD_LEAK says which one, "stdin" (default), "mask", "ignored" or "env". Everything
 * else is done right, so that aksandbox-plugin-check's child_world fails for exactly that
 * reason (tests/plugins/runner-rejects.test).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* posix_spawn_file_actions_addchdir_np */
#endif
#ifndef FAKE_PLUGIN_NAME
#define FAKE_PLUGIN_NAME "leaky_child"
#endif
#define FAKE_NO_DESCRIPTOR
#include "../fake/fake.c"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static bool leaks(const char *what)
{
#ifdef LEAKY_CHILD_LEAKS_NOTHING
	(void)what;
	return false;
#endif
	const char *leak = getenv("LEAKY_CHILD_LEAK");
	return strcmp(leak && *leak ? leak : "stdin", what) == 0;
}

/* Runs python3 -c code, its stdout into out, until it exits or the call's deadline; in a
 * network namespace of its own (unshare -rn) when no_network, in cwd when not NULL. */
static int leaky_run_in(aks_sandbox_impl *sb, const char *code, bool no_network, const char *cwd,
                        const aks_call *call, aks_result *out, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	char *python[] = {"python3", "-c", (char *)code, NULL};
	char *unshared[] = {"unshare", "-rn", "python3", "-c", (char *)code, NULL};
	char **argv = no_network ? unshared : python;
	char *clean_env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", NULL};
	int o[2];
	if (pipe(o) != 0)
		return host->error_set(err, AKS_EIO, "pipe: %s", strerror(errno));
	fcntl(o[0], F_SETFD, FD_CLOEXEC);
	fcntl(o[1], F_SETFD, FD_CLOEXEC);
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, all;
	posix_spawn_file_actions_init(&fa);
	if (!leaks("stdin"))
		posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, o[1], 1);
	if (cwd)
		posix_spawn_file_actions_addchdir_np(&fa, cwd);
	posix_spawnattr_init(&attr);
	sigemptyset(&none);
	sigfillset(&all);
	short flags = POSIX_SPAWN_SETPGROUP;
	if (!leaks("mask")) {
		posix_spawnattr_setsigmask(&attr, &none);
		flags |= POSIX_SPAWN_SETSIGMASK;
	}
	if (!leaks("ignored")) {
		posix_spawnattr_setsigdefault(&attr, &all);
		flags |= POSIX_SPAWN_SETSIGDEF;
	}
	posix_spawnattr_setflags(&attr, flags);
	pid_t pid;
	int e = posix_spawnp(&pid, argv[0], &fa, &attr, argv, leaks("env") ? environ : clean_env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	close(o[1]);
	if (e) {
		close(o[0]);
		return host->error_set(err, AKS_EIO, "cannot run %s: %s", argv[0], strerror(e));
	}
	int rc = AKS_OK;
	struct pollfd p[2] = {{o[0], POLLIN, 0}, {host->cancel_fd(call), POLLIN, 0}};
	int64_t deadline = call->deadline_ms ? call->deadline_ms : host->now_ms() + 60000;
	for (;;) {
		int64_t left = deadline - host->now_ms();
		if (left <= 0) {
			rc = AKS_ETIMEOUT;
			break;
		}
		if (poll(p, 2, (int)left) <= 0)
			continue;
		if (p[1].revents) {
			rc = AKS_ECANCELLED;
			break;
		}
		char buf[4096];
		ssize_t n = read(o[0], buf, sizeof(buf));
		if (n <= 0)
			break;
		host->result_write(out, AKS_STREAM_STDOUT, buf, (size_t)n, NULL);
	}
	close(o[0]);
	kill(-pid, SIGKILL);
	int status = 0;
	waitpid(pid, &status, 0);
	if (rc == AKS_ETIMEOUT) {
		host->result_set_timed_out(out);
		return host->error_set(err, rc, "exceeded the timeout");
	}
	if (rc == AKS_ECANCELLED)
		return host->error_set(err, rc, "cancelled");
	host->result_set_exit_code(out, WIFEXITED(status) ? WEXITSTATUS(status) : 1);
	return AKS_OK;
}

#ifndef LEAKY_CHILD_NO_DESCRIPTOR
static int leaky_run(aks_sandbox_impl *sb, const char *code, const aks_call *call, aks_result *out,
                     aks_error **err)
{
	return leaky_run_in(sb, code, false, NULL, call, out, err);
}

static int leaky_execute_code(aks_sandbox_impl *sb, const char *code, const char *language,
                              const aks_call *call, aks_result *out, aks_error **err)
{
	if (strcmp(language, "python") == 0 && strstr(code, "pthread_sigmask"))
		return leaky_run(sb, code, call, out, err);
	return fake_execute_code(sb, code, language, call, out, err);
}

static const aks_sandbox_ops leaky_sandbox_ops = {
    .struct_version = AKS_SANDBOX_OPS_VERSION,
    .struct_size = sizeof(aks_sandbox_ops),
    .id = fake_sandbox_id,
    .execute_code = leaky_execute_code,
    .execute_command = fake_execute_command,
    .upload_file = fake_upload_file,
    .download_file = fake_download_file,
    .close = fake_close,
};

static const aks_capabilities leaky_capabilities = {
    .struct_version = AKS_CAPABILITIES_VERSION,
    .struct_size = sizeof(aks_capabilities),
    .isolation = AKS_ISOLATION_NONE,
    .languages = fake_languages,
    .shell = true,
    .files = true,
    .stateful = true,
    .attach = true,
    .provisions = true,
};

static const aks_provider_ops leaky_provider_ops = {
    .struct_version = AKS_PROVIDER_OPS_VERSION,
    .struct_size = sizeof(aks_provider_ops),
    .capabilities = &leaky_capabilities,
    .init = fake_init,
    .fini = fake_fini,
    .create = fake_create,
    .attach = fake_attach,
    .destroy = fake_destroy,
    .sandbox = &leaky_sandbox_ops,
};

AKS_PLUGIN_DEFINE(AKS_PLUGIN_PROVIDER, "leaky_child", "1.0", "Apache-2.0",
                  "hands its programs a piece of the host's world (tests only)", NULL,
                  &leaky_provider_ops);
#endif /* LEAKY_CHILD_NO_DESCRIPTOR */
