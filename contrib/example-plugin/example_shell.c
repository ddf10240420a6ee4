/*
 * example_shell.c - a minimal but real aksandbox provider, built out of tree
 * against the SDK only (see README.md). Each sandbox is a fresh temporary
 * directory; code and commands run there as child processes of the host, in
 * their own process group, under the call's deadline.
 *
 * It isolates nothing: declare the truth (AKS_ISOLATION_NONE). What it does give
 * the child is a clean world of its own (see run()): stdin from /dev/null, an
 * empty signal mask with default dispositions, a minimal environment, and its
 * own process group, killed whole at the end. Copy those parts as they are.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* It uses nothing the plugin ABI gained after 1.0 (call->labels, list_sandboxes), so it
 * targets 1.0: every 1.x host loads it, and the headers hide what 1.0 hosts lack
 * (<aksandbox/version.h>). */
#define AKS_TARGET_ABI_MINOR 0
#include <aksandbox/provider.h>

#define PREFIX "example-shell-"

struct aks_provider_impl {
	const aks_host_api *host;
	char *shell, *workdir; /* copied from the config, which we must not keep */
};

struct aks_sandbox_impl {
	aks_provider_impl *prov;
	char *dir; /* the sandbox id */
};

static const char *const languages[] = {"python", NULL};

static const aks_capabilities capabilities = {
    AKS_CAPABILITIES_INIT,  .isolation = AKS_ISOLATION_NONE,
    .languages = languages, .shell = true,
    .attach = true,         .provisions = true,
};

static const aks_config_key config_keys[] = {
    AKS_CONFIG_KEY("shell", AKS_CONFIG_STRING, false, "/bin/sh", "shell for commands"),
    AKS_CONFIG_KEY("workdir", AKS_CONFIG_STRING, false, NULL, "base directory (default $TMPDIR)"),
    AKS_CONFIG_END,
};

static int copy_key(const aks_host_api *host, const aks_config *cfg, const char *key,
                    const char *fallback, char **out)
{
	const char *value = NULL;

	if (host->config_string(cfg, key, &value) != AKS_OK)
		return -1;
	*out = strdup(value ? value : fallback);
	return *out ? 0 : -1;
}

static void fini(aks_provider_impl *prov)
{
	free(prov->shell);
	free(prov->workdir);
	free(prov);
}

static int init(const aks_host_api *host, const aks_config *cfg, aks_provider_impl **out,
                aks_error **err)
{
	aks_provider_impl *prov = calloc(1, sizeof(*prov));

	if (!prov)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	prov->host = host;
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	if (copy_key(host, cfg, "shell", "/bin/sh", &prov->shell) ||
	    copy_key(host, cfg, "workdir", tmp, &prov->workdir)) {
		fini(prov);
		return host->error_set(err, AKS_ECONFIG, "example_shell: cannot read the config");
	}
	*out = prov;
	return AKS_OK;
}

static int new_handle(aks_provider_impl *prov, const char *dir, aks_sandbox_impl **out,
                      aks_error **err)
{
	aks_sandbox_impl *sb = calloc(1, sizeof(*sb));

	if (!sb || !(sb->dir = strdup(dir))) {
		free(sb);
		return prov->host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	sb->prov = prov;
	*out = sb;
	return AKS_OK;
}

static int create(aks_provider_impl *prov, const aks_call *call, aks_sandbox_impl **out,
                  aks_error **err)
{
	char dir[4096];

	snprintf(dir, sizeof(dir), "%s/" PREFIX "XXXXXX", prov->workdir);
	if (!mkdtemp(dir))
		return prov->host->error_set(err, AKS_EPROVISION, "mkdtemp %s: %s", dir,
		                             strerror(errno));
	return new_handle(prov, dir, out, err);
}

/* Only directories this provider made are sandboxes. */
static int is_ours(const char *id)
{
	const char *base = strrchr(id, '/');
	struct stat st;

	return base && strncmp(base + 1, PREFIX, strlen(PREFIX)) == 0 && stat(id, &st) == 0 &&
	       S_ISDIR(st.st_mode);
}

static int attach(aks_provider_impl *prov, const char *id, const aks_call *call,
                  aks_sandbox_impl **out, aks_error **err)
{
	if (!is_ours(id))
		return prov->host->error_set(err, AKS_EGONE, "sandbox '%s' no longer exists", id);
	return new_handle(prov, id, out, err);
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	remove(path);
	return 0;
}

static int destroy(aks_provider_impl *prov, const char *id, const aks_call *call, aks_error **err)
{
	if (is_ours(id))
		nftw(id, remove_one, 16, FTW_DEPTH | FTW_PHYS);
	return AKS_OK; /* idempotent: an unknown id is not an error */
}

/*
 * The child's environment: a fixed minimal one, never the host's. The host's
 * holds its secrets (API keys, tokens, AWS credentials), which sandboxed code
 * must not see; PATH finds the usual tools, HOME is the sandbox.
 */
static int child_env(const aks_sandbox_impl *sb, char *home, size_t size, char *envp[4])
{
	if ((size_t)snprintf(home, size, "HOME=%s", sb->dir) >= size)
		return -1;
	envp[0] = "PATH=/usr/local/bin:/usr/bin:/bin";
	envp[1] = home;
	envp[2] = "LANG=C.UTF-8";
	envp[3] = NULL;
	return 0;
}

/* Runs `prog -c text` in the sandbox directory, in a new process group,
 * collecting its output until it closes both streams, the deadline passes, or
 * the call is cancelled. posix_spawn, unlike fork, is safe in a threaded host. */
static int run(aks_sandbox_impl *sb, const char *prog, const char *text, const aks_call *call,
               aks_result *out, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	char *argv[] = {(char *)prog, "-c", (char *)text, NULL};
	char home[4200], *envp[4];
	int o[2], e[2], status = 0, rc = AKS_OK;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, all;
	pid_t pid;

	if (child_env(sb, home, sizeof(home), envp) != 0)
		return host->error_set(err, AKS_EINVAL, "sandbox path too long: %s", sb->dir);

	if (pipe2(o, O_CLOEXEC) != 0)
		return host->error_set(err, AKS_EIO, "pipe: %s", strerror(errno));
	if (pipe2(e, O_CLOEXEC) != 0) {
		close(o[0]), close(o[1]);
		return host->error_set(err, AKS_EIO, "pipe: %s", strerror(errno));
	}
	posix_spawn_file_actions_init(&fa);
	/* stdin is /dev/null, never the host's: under `aksandbox mcp` the host's stdin is the
	 * protocol channel, and a program reading it would steal the client's requests. */
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, o[1], 1);
	posix_spawn_file_actions_adddup2(&fa, e[1], 2);
	posix_spawn_file_actions_addchdir_np(&fa, sb->dir);
	posix_spawnattr_init(&attr);
	/* The host calls us on threads that block every signal, and may ignore some (SIGPIPE):
	 * a child would inherit both, and `sleep 2 & wait` or a SIGTERM would never end. Give
	 * it an empty mask and every signal's default action. */
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &all);
	/* Its own process group (pgroup 0), so that the end of the call can kill all of it. */
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
	                                    POSIX_SPAWN_SETSIGDEF);
	int spawn_error = posix_spawnp(&pid, prog, &fa, &attr, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	close(o[1]), close(e[1]);
	if (spawn_error) {
		close(o[0]), close(e[0]);
		return host->error_set(err, AKS_EIO, "cannot run %s: %s", prog,
		                       strerror(spawn_error));
	}

	struct pollfd p[3] = {{o[0], POLLIN, 0},
	                      {e[0], POLLIN, 0},
	                      {host->cancel_fd(call), POLLIN, 0}}; /* fd -1 is ignored */
	while (p[0].fd >= 0 || p[1].fd >= 0) {
		int64_t left = call->deadline_ms ? call->deadline_ms - host->now_ms() : 60000;
		if (left <= 0) {
			rc = AKS_ETIMEOUT;
			break;
		}
		if (poll(p, 3, left > 60000 ? 60000 : (int)left) < 0 && errno != EINTR) {
			rc = host->error_set(err, AKS_EIO, "poll: %s", strerror(errno));
			break;
		}
		if (host->cancelled(call)) {
			rc = AKS_ECANCELLED;
			break;
		}
		for (int i = 0; i < 2; i++) {
			char buf[4096];
			if (p[i].fd < 0 || !p[i].revents)
				continue;
			ssize_t n = read(p[i].fd, buf, sizeof(buf));
			if (n > 0)
				host->result_write(out, i ? AKS_STREAM_STDERR : AKS_STREAM_STDOUT,
				                   buf, (size_t)n, NULL);
			else if (n == 0 || errno != EINTR)
				close(p[i].fd), p[i].fd = -1;
		}
	}
	kill(-pid, SIGKILL); /* whatever the program left running goes too */
	waitpid(pid, &status, 0);
	for (int i = 0; i < 2; i++)
		if (p[i].fd >= 0)
			close(p[i].fd);
	if (rc == AKS_ETIMEOUT || rc == AKS_ECANCELLED) {
		host->result_set_timed_out(out);
		return host->error_set(err, rc,
		                       rc == AKS_ETIMEOUT ? "exceeded the timeout" : "cancelled");
	}
	if (rc != AKS_OK)
		return rc;
	host->result_set_exit_code(out, WIFEXITED(status) ? WEXITSTATUS(status)
	                                                  : 128 + WTERMSIG(status));
	return AKS_OK;
}

static int execute_code(aks_sandbox_impl *sb, const char *code, const char *language,
                        const aks_call *call, aks_result *out, aks_error **err)
{
	if (strcmp(language, "python") != 0)
		return sb->prov->host->error_set(err, AKS_ECAPABILITY, "language:%s", language);
	return run(sb, "python3", code, call, out, err);
}

static int execute_command(aks_sandbox_impl *sb, const char *command, const aks_call *call,
                           aks_result *out, aks_error **err)
{
	return run(sb, sb->prov->shell, command, call, out, err);
}

static const char *sandbox_id(const aks_sandbox_impl *sb)
{
	return sb->dir;
}

static void sandbox_close(aks_sandbox_impl *sb)
{
	free(sb->dir); /* the directory stays, for a later attach */
	free(sb);
}

static const aks_sandbox_ops sandbox_ops = {
    AKS_SANDBOX_OPS_INIT,         .id = sandbox_id,
    .execute_code = execute_code, .execute_command = execute_command,
    .close = sandbox_close,
};

static const aks_provider_ops provider_ops = {
    AKS_PROVIDER_OPS_INIT, .capabilities = &capabilities,
    .init = init,          .fini = fini,
    .create = create,      .attach = attach,
    .destroy = destroy,    .sandbox = &sandbox_ops,
};

AKS_PLUGIN_DEFINE(AKS_PLUGIN_PROVIDER, "example_shell", "1.0", "MIT",
                  "example: runs code and commands in a temporary directory (no isolation)",
                  config_keys, &provider_ops);
