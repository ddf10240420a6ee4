/*
 * plugins/bubblewrap/bw_view.c - what a sandbox sees, as a bwrap command line.
 *
 * Namespaces: a new user, pid, ipc, uts and cgroup namespace always, a new network namespace
 * (loopback only) unless network_egress is allow; no capabilities, no_new_privs, a new
 * session (no terminal to push input into), and death with its parent.
 *
 * Filesystem: the system directories read-only as on this host (/usr, and /bin, /lib, ... as
 * the symlinks or directories they are here), the curated entries of /etc (the `etc` key;
 * never shadow, sudoers, ssh keys), a fresh /proc, a minimal /dev, private /tmp and /dev/shm,
 * the workspace read-write at one path, fs_allow_read entries read-only and fs_allow_write
 * entries read-write at their own paths. Nothing else of the host exists inside. The root,
 * /dev and (under a filesystem policy that does not list them) /tmp and /dev/shm are
 * read-only, so a program can write only where the policy says.
 *
 * With Landlock the same paths are given to the agent, which restricts itself to them before
 * it runs anything: a second layer that holds even where a mount would not (a path bound
 * read-write that the rules make read-only).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bw_internal.h"

/* ---- the policy -------------------------------------------------------------------------- */

/* Whether path is dir or beneath it. */
static bool beneath(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	return strncmp(path, dir, n) == 0 && (!path[n] || path[n] == '/');
}

/* Places of the sandbox's own system a policy entry cannot be bound over. */
static const char *reserved(const aks_sandbox_impl *sb, const char *path)
{
	if (!strcmp(path, "/"))
		return "is the whole of this host";
	if (beneath(path, "/proc") || beneath(path, "/dev") || beneath(path, "/run/aksandbox"))
		return "is a place of the sandbox's own system";
	if (beneath(sb->prov->workspace, path))
		return "holds the sandbox's workspace";
	return NULL;
}

/* One fs_allow_read or fs_allow_write entry: the workspace (already there), the sandbox's own
 * /tmp or /dev/shm (writable when listed), or a host path to bind, canonical and existing. */
static int add_entry(aks_sandbox_impl *sb, const char *entry, bool write, aks_strv *binds,
                     aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	const char *key = write ? "fs_allow_write" : "fs_allow_read";
	if (!entry || entry[0] != '/')
		return host->error_set(err, AKS_EPOLICY, "%s: '%s' is not an absolute path", key,
		                       entry ? entry : "");
	if (beneath(entry, sb->prov->workspace))
		return AKS_OK; /* the workspace: readable and writable already */
	if (!strcmp(entry, "/tmp") || !strcmp(entry, "/dev/shm")) {
		if (write)
			sb->tmp_writable = sb->tmp_writable || !strcmp(entry, "/tmp");
		if (write && !strcmp(entry, "/dev/shm"))
			sb->shm_writable = true;
		return AKS_OK; /* the sandbox's own, never the host's */
	}
	char *real = realpath(entry, NULL);
	if (!real)
		return host->error_set(err, AKS_EPOLICY,
		                       "%s: '%s' cannot be shown to the sandbox: %s on this host",
		                       key, entry, strerror(errno));
	const char *why = reserved(sb, real);
	if (why) {
		int rc = host->error_set(err, AKS_EPOLICY, "%s: '%s'%s%s %s", key, entry,
		                         strcmp(real, entry) ? " (" : "",
		                         strcmp(real, entry) ? real : "", why);
		free(real);
		return rc;
	}
	int rc = aks__strv_push(binds, real);
	free(real);
	return rc == AKS_OK ? AKS_OK : host->error_set(err, AKS_ENOMEM, "out of memory");
}

int bw_view_policy(aks_sandbox_impl *sb, const aks_policy *policy, aks_error **err)
{
	static const char *const none[] = {NULL};
	const char *const *rd = policy && policy->fs_allow_read ? policy->fs_allow_read : none;
	const char *const *wr = policy && policy->fs_allow_write ? policy->fs_allow_write : none;
	/* An allowlist gets no network either: its way out is the agent's egress proxy (and
	 * without the agent, which the core refused under strict and warned of otherwise,
	 * nothing is reachable rather than everything). */
	sb->net = !policy || policy->network_egress == AKS_EGRESS_ALLOW;
	/* Without fs_allow_write the sandbox's own /tmp and /dev/shm are writable; with it,
	 * only where it says. */
	sb->tmp_writable = sb->shm_writable = !wr[0];
	sb->cpu = policy ? policy->cpu : 0;
	sb->memory_mb = policy ? policy->memory_mb : 0;
	aks_strv r = {NULL, 0, 0}, w = {NULL, 0, 0};
	int rc = AKS_OK;
	for (const char *const *e = rd; rc == AKS_OK && *e; e++)
		rc = add_entry(sb, *e, false, &r, err);
	for (const char *const *e = wr; rc == AKS_OK && *e; e++)
		rc = add_entry(sb, *e, true, &w, err);
	if (rc != AKS_OK) {
		aks__strv_free(r.v);
		aks__strv_free(w.v);
		return rc;
	}
	sb->read_binds = r.v;
	sb->write_binds = w.v;
	return AKS_OK;
}

/* ---- the command line ------------------------------------------------------------------ */

typedef struct argv_b {
	aks_strv *v;
	bool failed;
} argv_b;

static void add(argv_b *b, const char *s)
{
	if (!b->failed && aks__strv_push(b->v, s) != AKS_OK)
		b->failed = true;
}

static void add2(argv_b *b, const char *a, const char *c)
{
	add(b, a);
	add(b, c);
}

static void add3(argv_b *b, const char *a, const char *c, const char *d)
{
	add(b, a);
	add(b, c);
	add(b, d);
}

/* A system directory as it is here: a symlink recreated, a directory bound read-only. */
static void add_system(argv_b *b, const char *dir)
{
	char target[PATH_MAX];
	ssize_t n = readlink(dir, target, sizeof(target) - 1);
	if (n > 0) {
		target[n] = '\0';
		add3(b, "--symlink", target, dir);
	} else {
		add3(b, "--ro-bind", dir, dir);
	}
}

/* The agent's Landlock options: everything the sandbox sees readable (the mounts already
 * hold only what it may read), and writable only where the mounts let it write: the rules
 * hold that even where a mount would not. */
static void add_landlock(argv_b *b, const aks_sandbox_impl *sb)
{
	add2(b, "--landlock-ro", "/");
	add2(b, "--landlock-rw", "/dev");
	if (sb->tmp_writable)
		add2(b, "--landlock-rw", "/tmp");
	if (sb->shm_writable)
		add2(b, "--landlock-rw", "/dev/shm");
	add2(b, "--landlock-rw", sb->prov->workspace);
	for (char *const *p = sb->write_binds; p && *p; p++)
		add2(b, "--landlock-rw", *p);
}

int bw_view_argv(const aks_sandbox_impl *sb, const char *agent_path, bool is_agent,
                 const char *const *argv, aks_strv *out)
{
	const aks_provider_impl *prov = sb->prov;
	argv_b b = {out, false};
	add(&b, prov->bwrap);
	add(&b, "--unshare-user");
	add(&b, "--unshare-pid");
	add(&b, "--unshare-ipc");
	add(&b, "--unshare-uts");
	add(&b, "--unshare-cgroup-try");
	if (!sb->net)
		add(&b, "--unshare-net");
	add2(&b, "--hostname", "aksandbox");
	add(&b, "--die-with-parent");
	add(&b, "--new-session");
	add2(&b, "--cap-drop", "ALL");
	for (char *const *d = prov->system; *d; d++)
		add_system(&b, *d);
	add2(&b, "--dir", "/etc");
	for (char *const *e = prov->etc; e && *e; e++) {
		char *path = NULL;
		if (asprintf(&path, "/etc/%s", *e) < 0) {
			b.failed = true;
			break;
		}
		add3(&b, "--ro-bind-try", path, path);
		free(path);
	}
	add2(&b, "--proc", "/proc");
	add2(&b, "--dev", "/dev");
	add2(&b, "--tmpfs", "/dev/shm");
	add2(&b, "--tmpfs", "/tmp");
	if (sb->dir) /* (none for bw_config.c's trial run) */
		add3(&b, "--bind", sb->dir, prov->workspace);
	for (char *const *p = sb->read_binds; p && *p; p++)
		add3(&b, "--ro-bind", *p, *p);
	for (char *const *p = sb->write_binds; p && *p; p++)
		add3(&b, "--bind", *p, *p);
	if (agent_path)
		add3(&b, "--ro-bind", agent_path, BW_AGENT_INSIDE);
	add2(&b, "--chdir", sb->dir ? prov->workspace : "/");
	add2(&b, "--seccomp", "3");
	if (!sb->tmp_writable)
		add2(&b, "--remount-ro", "/tmp");
	if (!sb->shm_writable)
		add2(&b, "--remount-ro", "/dev/shm");
	add2(&b, "--remount-ro", "/dev");
	add2(&b, "--remount-ro", "/");
	add(&b, "--");
	/* (the agent applies the rules: never without it, which bw_config.c refuses but for its
	 * trial run) */
	bool landlock = prov->landlock == BW_LANDLOCK_REQUIRED && agent_path;
	if (is_agent || landlock) {
		add(&b, BW_AGENT_INSIDE);
		if (is_agent)
			add(&b, "--kill-leftovers");
		if (landlock)
			add_landlock(&b, sb);
		if (!is_agent)
			add(&b, "--exec");
	}
	for (const char *const *a = argv; a && *a; a++)
		add(&b, *a);
	return b.failed ? AKS_ENOMEM : AKS_OK;
}
