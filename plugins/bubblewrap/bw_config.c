/*
 * plugins/bubblewrap/bw_config.c - the config block, and what this host offers: the bwrap
 * program and whether it can make a sandbox here (as root, or as this user through
 * unprivileged user namespaces), the kernel's Landlock, cgroups for limits, the seccomp
 * filter. Everything is found once, at init, so a host that cannot confine is refused then,
 * with the reason, and never at the first call.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "aks_agent.h"
#include "aks_file.h"
#include "aks_hostrun.h"
#include "aks_proc.h"
#include "bw_internal.h"
#include "bw_seccomp.h"

/* ---- the system's view ------------------------------------------------------------------ */

/* The top-level system directories a sandbox sees as on this host, read-only: a real
 * directory is bound, a symlink (Debian's merged /usr: /bin -> usr/bin) recreated. */
static const char *const system_dirs[] = {"/usr",   "/bin",   "/sbin",   "/lib",
                                          "/lib32", "/lib64", "/libx32", NULL};

static bool exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

static int find_system(aks_provider_impl *prov, aks_error **err)
{
	aks_strv v = {NULL, 0, 0};
	for (const char *const *d = system_dirs; *d; d++)
		if (exists(*d) && aks__strv_push(&v, *d) != AKS_OK) {
			aks__strv_free(v.v);
			return prov->host->error_set(err, AKS_ENOMEM, "out of memory");
		}
	if (!v.v || !exists("/usr/bin")) {
		aks__strv_free(v.v);
		return prov->host->error_set(err, AKS_ECONFIG,
		                             "bubblewrap: this host has no /usr/bin to show "
		                             "sandboxes");
	}
	prov->system = v.v;
	return AKS_OK;
}

/* ---- bwrap ---------------------------------------------------------------------------- */

/* name as an absolute path: itself when it has a '/', else found in this process's PATH. */
static char *find_program(const char *name)
{
	if (strchr(name, '/'))
		return access(name, X_OK) == 0 ? strdup(name) : NULL;
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (const char *p = path; *p;) {
		const char *end = strchr(p, ':');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char *cand = NULL;
		if (len && asprintf(&cand, "%.*s/%s", (int)len, p, name) >= 0) {
			if (access(cand, X_OK) == 0)
				return cand;
			free(cand);
		}
		p += len + (end ? 1 : 0);
	}
	return NULL;
}

typedef struct trial_out {
	aks_buf said;
} trial_out;

static int keep_output(void *ctx, int stream, const void *data, size_t len)
{
	(void)stream;
	trial_out *t = ctx;
	if (t->said.len < 1024)
		aks__buf_append(&t->said, data, len);
	return 0;
}

/* Whether a sysctl of this host (a file under /proc/sys) reads as the digit d. */
static bool sysctl_is(const char *path, char d)
{
	size_t len;
	char *v = aks__file_read(path, 64, &len);
	bool is = v && v[0] == d && (v[1] == '\n' || !v[1]);
	free(v);
	return is;
}

/* Why this user may not have user namespaces, read off this host's settings, or "". */
static const char *userns_hint(void)
{
	if (sysctl_is("/proc/sys/kernel/unprivileged_userns_clone", '0'))
		return "; kernel.unprivileged_userns_clone is 0: set it to 1 (sysctl), or run as "
		       "root";
	if (sysctl_is("/proc/sys/user/max_user_namespaces", '0'))
		return "; user.max_user_namespaces is 0: raise it (sysctl)";
	if (sysctl_is("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", '1'))
		return "; AppArmor restricts unprivileged user namespaces "
		       "(kernel.apparmor_restrict_unprivileged_userns=1): give bwrap a profile "
		       "that "
		       "allows them, or run as root";
	return "";
}

/* Runs bwrap once with the namespaces every sandbox gets: the host can confine, or says why
 * not (no user namespaces for this user, a bwrap without what we need). */
static int trial_run(aks_provider_impl *prov, aks_error **err)
{
	const aks_host_api *host = prov->host;
	/* a sandbox with nothing of its own: the system, /proc, /dev */
	aks_sandbox_impl bare = {.prov = prov};
	aks_strv argv = {NULL, 0, 0};
	const char *const prog[] = {"true", NULL};
	if (bw_view_argv(&bare, NULL, false, prog, &argv) != AKS_OK) {
		aks__strv_free(argv.v);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	const char *envp[] = {"PATH=/usr/bin:/bin", NULL};
	trial_out t = {{0}};
	int sfd = bw_seccomp_reopen(prov->seccomp_fd);
	if (sfd < 0) {
		aks__strv_free(argv.v);
		return host->error_set(err, AKS_ECONFIG,
		                       "bubblewrap: cannot read the seccomp filter: %s",
		                       strerror(-sfd));
	}
	aks_proc_spec spec = {.argv = (const char *const *)argv.v,
	                      .envp = envp,
	                      .cwd = "/",
	                      .cancel_fd = -1,
	                      .output = keep_output,
	                      .ctx = &t,
	                      .pass_fd = sfd};
	aks_proc_outcome oc;
	int rc = aks_proc_run(&spec, &oc);
	close(sfd);
	aks__strv_free(argv.v);
	if (rc < 0) {
		aks__buf_free(&t.said);
		return host->error_set(err, AKS_ECONFIG, "bubblewrap: cannot run %s: %s",
		                       prov->bwrap, strerror(-rc));
	}
	if (oc.exit_code == 0) {
		aks__buf_free(&t.said);
		return AKS_OK;
	}
	/* bwrap's own message ("bwrap: setting up uid map: Permission denied"), first line */
	char said[256] = "";
	if (t.said.data) {
		snprintf(said, sizeof(said), "%.*s", (int)t.said.len, t.said.data);
		said[strcspn(said, "\n")] = '\0';
	}
	aks__buf_free(&t.said);
	return host->error_set(err, AKS_ECONFIG,
	                       "bubblewrap: %s cannot make a sandbox on this host as %s (exit %d: "
	                       "%s)%s",
	                       prov->bwrap, geteuid() == 0 ? "root" : "this user", oc.exit_code,
	                       said[0] ? said : "no message", geteuid() == 0 ? "" : userns_hint());
}

/* ---- Landlock --------------------------------------------------------------------------- */

/* The kernel's Landlock ABI, as the agent sees it (`aksandbox-agent --landlock-abi`): the
 * agent applies the rules, so its answer is the one that counts. -1 when it cannot tell. */
static int landlock_abi(const aks_provider_impl *prov)
{
	if (!aks_agent_program_enabled(prov->agent))
		return -1;
	const char *argv[] = {aks_agent_program_path(prov->agent), "--landlock-abi", NULL};
	const char *envp[] = {"PATH=/usr/bin:/bin", NULL};
	trial_out t = {{0}};
	aks_proc_spec spec = {
	    .argv = argv, .envp = envp, .cancel_fd = -1, .output = keep_output, .ctx = &t};
	aks_proc_outcome oc;
	int abi = -1;
	if (aks_proc_run(&spec, &oc) == 0 && oc.exit_code == 0 && t.said.data) {
		char buf[32];
		snprintf(buf, sizeof(buf), "%.*s", (int)t.said.len, t.said.data);
		abi = atoi(buf);
	}
	aks__buf_free(&t.said);
	return abi;
}

/* ---- the block ----------------------------------------------------------------------------- */

/* An environment variable name: non-empty, no '=' (and no NUL, by C). */
static bool valid_env_name(const char *name)
{
	return name && *name && !strchr(name, '=');
}

/* An entry of `etc`: a relative name under /etc, no "..", nothing that holds secrets. */
static const char *etc_entry_problem(const char *name)
{
	static const char *const secret[] = {
	    "shadow",      "gshadow",          "sudoers",   "sudoers.d",   "ssh",
	    "ssl/private", "security/opasswd", "aksandbox", "krb5.keytab", NULL};
	if (!*name || name[0] == '/')
		return "is not a name under /etc";
	for (const char *p = name; *p; p++)
		if ((p == name || p[-1] == '/') && p[0] == '.' && p[1] == '.' &&
		    (p[2] == '/' || !p[2]))
			return "has a '..' in it";
	for (const char *const *s = secret; *s; s++) {
		size_t n = strlen(*s);
		if (strncmp(name, *s, n) == 0 && (!name[n] || name[n] == '/' || name[n] == '-'))
			return "holds secrets (it is never shown to sandboxes)";
	}
	return NULL;
}

static int read_etc(aks_provider_impl *prov, const char *const *etc, aks_error **err)
{
	for (const char *const *e = etc; e && *e; e++) {
		const char *why = etc_entry_problem(*e);
		if (why)
			return prov->host->error_set(err, AKS_ECONFIG, "bubblewrap: etc: '%s' %s",
			                             *e, why);
	}
	if (!(prov->etc = aks__strv_dup(etc)))
		return prov->host->error_set(err, AKS_ENOMEM, "out of memory");
	return AKS_OK;
}

/* The description: how operations run, then what confines them. */
static int describe(aks_provider_impl *prov, aks_error **err)
{
	char landlock[96];
	if (prov->landlock == BW_LANDLOCK_REQUIRED)
		snprintf(landlock, sizeof(landlock), "Landlock ABI %d (required)",
		         prov->landlock_abi);
	else if (prov->landlock_abi > 0)
		snprintf(landlock, sizeof(landlock), "no Landlock (off; the kernel has ABI %d)",
		         prov->landlock_abi);
	else
		snprintf(landlock, sizeof(landlock), "no Landlock (off)");
	char *d = NULL;
	if (asprintf(&d, "%s; bwrap %s as %s, seccomp refusing %zu calls, %s, %s%s%s",
	             aks_agent_program_description(prov->agent), prov->bwrap,
	             geteuid() == 0 ? "root" : "an unprivileged user (user namespaces)",
	             bw_seccomp_refused_count(), landlock,
	             prov->cgroups ? bw_cgroup_describe(prov->cgroups)
	                           : "no cgroups, so no cpu, memory or pids limits (",
	             prov->cgroups ? "" : prov->cgroup_why, prov->cgroups ? "" : ")") < 0)
		return prov->host->error_set(err, AKS_ENOMEM, "out of memory");
	prov->description = d;
	return AKS_OK;
}

int bw_config_read(aks_provider_impl *prov, const aks_config *config, aks_error **err)
{
	const aks_host_api *host = prov->host;
	const char *workdir = NULL, *python = NULL, *agent = NULL, *bwrap = NULL, *ws = NULL,
	           *landlock = NULL, *parent = NULL;
	const char *const *pass = NULL, *const *env = NULL, *const *etc = NULL;
	int64_t pids = 0;
	if (host->config_string(config, "workdir", &workdir) != AKS_OK ||
	    host->config_string(config, "bwrap", &bwrap) != AKS_OK ||
	    host->config_string(config, "workspace", &ws) != AKS_OK ||
	    host->config_string(config, "python", &python) != AKS_OK ||
	    host->config_list(config, "env_passthrough", &pass) != AKS_OK ||
	    host->config_map(config, "env", &env) != AKS_OK ||
	    host->config_string(config, "agent", &agent) != AKS_OK ||
	    host->config_string(config, "landlock", &landlock) != AKS_OK ||
	    host->config_string(config, "cgroup_parent", &parent) != AKS_OK ||
	    host->config_int(config, "pids_max", &pids) != AKS_OK ||
	    host->config_list(config, "etc", &etc) != AKS_OK)
		return host->error_set(err, AKS_ECONFIG,
		                       "bubblewrap: the host could not read the config block");
	if (!python || !*python)
		return host->error_set(err, AKS_ECONFIG, "bubblewrap: python must not be empty");
	if (!ws || ws[0] != '/' || !ws[1] || strstr(ws, "/..") || strstr(ws, "//") ||
	    ws[strlen(ws) - 1] == '/')
		return host->error_set(err, AKS_ECONFIG,
		                       "bubblewrap: workspace must be an absolute path other than "
		                       "/, without '..' (got '%s')",
		                       ws ? ws : "");
	for (const char *const *d = system_dirs; *d; d++)
		if (strncmp(ws, *d, strlen(*d)) == 0 && (!ws[strlen(*d)] || ws[strlen(*d)] == '/'))
			return host->error_set(err, AKS_ECONFIG,
			                       "bubblewrap: workspace '%s' is inside the system's "
			                       "read-only %s",
			                       ws, *d);
	if (!strcmp(ws, "/proc") || !strcmp(ws, "/dev") || !strcmp(ws, "/tmp") ||
	    !strcmp(ws, "/etc") || !strncmp(ws, "/run/aksandbox", 14))
		return host->error_set(err, AKS_ECONFIG,
		                       "bubblewrap: workspace '%s' is a place the sandbox's system "
		                       "needs",
		                       ws);
	if (!landlock || !strcmp(landlock, "required"))
		prov->landlock = BW_LANDLOCK_REQUIRED;
	else if (!strcmp(landlock, "off"))
		prov->landlock = BW_LANDLOCK_OFF;
	else
		return host->error_set(err, AKS_ECONFIG,
		                       "bubblewrap: landlock must be required or off (got '%s')",
		                       landlock);
	if (pids < 8)
		return host->error_set(err, AKS_ECONFIG,
		                       "bubblewrap: pids_max must be at least 8 (got %lld)",
		                       (long long)pids);
	prov->pids_max = pids;
	for (const char *const *n = pass; n && *n; n++)
		if (!valid_env_name(*n))
			return host->error_set(
			    err, AKS_ECONFIG,
			    "bubblewrap: env_passthrough: '%s' is not a variable name", *n);
	for (const char *const *kv = env; kv && kv[0]; kv += 2)
		if (!valid_env_name(kv[0]) || !kv[1])
			return host->error_set(err, AKS_ECONFIG,
			                       "bubblewrap: env: '%s' is not a variable name",
			                       kv[0]);
	int rc = read_etc(prov, etc, err);
	if (rc != AKS_OK)
		return rc;
	if ((workdir && *workdir && !(prov->workdir = strdup(workdir))) ||
	    !(prov->python = strdup(python)) || !(prov->workspace = strdup(ws)) ||
	    !(prov->env_passthrough = aks__strv_dup(pass)) || !(prov->env = aks__strv_dup(env)))
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	if ((rc = find_system(prov, err)) != AKS_OK)
		return rc;

	if (!(prov->bwrap = find_program(bwrap ? bwrap : "bwrap")))
		return host->error_set(err, AKS_ECONFIG,
		                       "bubblewrap: no bwrap program '%s' (install the bubblewrap "
		                       "package, or set bwrap to its path)",
		                       bwrap ? bwrap : "bwrap");
	char why[256];
	if ((prov->seccomp_fd = bw_seccomp_build(why, sizeof(why))) < 0)
		return host->error_set(err, AKS_ECONFIG, "bubblewrap: %s", why);
	if ((rc = trial_run(prov, err)) != AKS_OK)
		return rc;

	/* Not stateful: the agent runs inside a bwrap of the host process that holds the
	 * sandbox, so its Python session is kept between the calls of one long-lived host but
	 * not across processes (an `aksandbox tool` call, another queue worker). */
	prov->caps = bw_capabilities;
	aks_agent_program_opts ao = {
	    .provider = BW_NAME,
	    .configured = agent,
	    .installed = BW_AGENT_DEFAULT,
	    .per_call = "one bwrap per call",
	    .detail = "inside bwrap",
	    .python_session = strcmp(python, "python3") == 0,
	};
	if ((rc = aks_agent_program_open(host, &ao, &prov->agent, err)) != AKS_OK)
		return rc;
	/* An allowlist is enforced by the agent's egress proxy, so only with the agent. */
	prov->caps.policy_network_allowlist = prov->caps.egress_proxy =
	    aks_agent_program_enabled(prov->agent);

	prov->landlock_abi = landlock_abi(prov);
	if (prov->landlock == BW_LANDLOCK_REQUIRED && !aks_agent_program_enabled(prov->agent))
		return host->error_set(err, AKS_ECONFIG,
		                       "bubblewrap: landlock: required needs aksandbox-agent (it "
		                       "applies the rules inside the sandbox), and agent is off or "
		                       "not installed; set landlock: off, or install the agent");
	if (prov->landlock == BW_LANDLOCK_REQUIRED && prov->landlock_abi < 1)
		return host->error_set(err, AKS_ECONFIG,
		                       "bubblewrap: landlock: required, but this kernel has no "
		                       "Landlock (Linux 5.13 or later with landlock in its lsm= "
		                       "list); set landlock: off to run without it");

	if (bw_cgroup_probe(parent, &prov->cgroups, prov->cgroup_why, sizeof(prov->cgroup_why)) < 0)
		prov->cgroups = NULL;
	/* Limits only where a cgroup can really be made (instance capabilities, like runsc on
	 * docker): otherwise the core refuses cpu and memory policies under strict. */
	prov->caps.policy_resources = prov->cgroups && bw_cgroup_has(prov->cgroups, "cpu") &&
	                              bw_cgroup_has(prov->cgroups, "memory");
	return describe(prov, err);
}

void bw_config_free(aks_provider_impl *prov)
{
	free(prov->workdir);
	free(prov->bwrap);
	free(prov->workspace);
	free(prov->python);
	aks__strv_free(prov->env_passthrough);
	aks__strv_free(prov->env);
	aks__strv_free(prov->etc);
	aks__strv_free(prov->system);
	if (prov->cgroups)
		bw_cgroup_free(prov->cgroups);
	if (prov->seccomp_fd > 0)
		close(prov->seccomp_fd);
	aks_agent_program_free(prov->agent);
	free(prov->description);
}

/* ---- the sandbox's environment --------------------------------------------------------- */

char **bw_env_build(const aks_sandbox_impl *sb)
{
	const aks_provider_impl *prov = sb->prov;
	/* TMPDIR: /tmp, unless a filesystem policy leaves it read-only */
	return aks_hostrun_env(prov->workspace, sb->tmp_writable ? "/tmp" : prov->workspace,
	                       prov->workspace, prov->env_passthrough, prov->env);
}
