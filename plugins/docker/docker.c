/*
 * plugins/docker/docker.c - the descriptor, the provider instance and the
 * sandbox lifecycle (create, attach, destroy, close) over the Engine API.
 *
 * A sandbox is a long-lived container (`sleep infinity` under docker-init)
 * named aks-<32 hex>, whose name is the sandbox id, with a named volume
 * <name>-workspace mounted at /workspace: the workspace survives container
 * and daemon restarts, and a read-only root (filesystem policy) leaves it
 * writable. Both carry the label io.aksandbox.sandbox=1 plus the configured
 * labels; destroy removes only what carries it. See docs/plugins/docker.md.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aks_agent.h"
#include "aks_container.h"
#include "aks_json.h"
#include "dk_internal.h"

#ifndef DK_VERSION
#error "DK_VERSION must be defined (the package version)"
#endif

/* ---- descriptor ---------------------------------------------------------------- */

static const char *const dk_languages[] = {"python", NULL};

/* The reference's row (section 8.0): container isolation; network policy is
 * deny only (an allowlist is refused under strict at create); filesystem
 * policy is coarse (read-only root, writable /workspace). An instance with
 * runtime runsc reports syscall_filter (dk_instance_caps). */
static const aks_capabilities dk_capabilities = {
    .struct_version = AKS_CAPABILITIES_VERSION,
    .struct_size = sizeof(aks_capabilities),
    .isolation = AKS_ISOLATION_CONTAINER,
    .languages = dk_languages,
    .shell = true,
    .files = true,
    .package_install = true,
    .stateful = false,
    .attach = true,
    .provisions = true,
    .attaches_external = true,
    .principal_user = false,
    .policy_network = true,
    .policy_network_allowlist = false, /* with the agent only: its egress proxy (read_config) */
    .policy_filesystem = true,
    .policy_resources = true,
};

/* image, runtime and attach_to as the reference (and tests/plugins/stubs). */
static const aks_config_key dk_config_keys[] = {
    AKS_CONFIG_KEY("image", AKS_CONFIG_STRING, false, "python:3.12-slim", "container image"),
    AKS_CONFIG_KEY("runtime", AKS_CONFIG_STRING, false, "docker",
                   "OCI runtime (runsc: gVisor, syscall_filter isolation)"),
    AKS_CONFIG_KEY("attach_to", AKS_CONFIG_STRING, false, NULL,
                   "existing container id (environment: attached)"),
    AKS_CONFIG_KEY("host", AKS_CONFIG_STRING, false, NULL,
                   "engine address (unix:///path or tcp://host:port); null = DOCKER_HOST, "
                   "else unix:///var/run/docker.sock"),
    AKS_CONFIG_KEY("python", AKS_CONFIG_STRING, false, "python3",
                   "interpreter for language python, in the container's PATH"),
    AKS_CONFIG_KEY("pull", AKS_CONFIG_BOOL, false, "true",
                   "pull a missing image from its registry before failing"),
    AKS_CONFIG_KEY("labels", AKS_CONFIG_STRING_MAP, false, "{}",
                   "extra labels on the containers and volumes created"),
    AKS_CONFIG_KEY("env", AKS_CONFIG_STRING_MAP, false, "{}",
                   "environment variables of the container"),
    AKS_CONFIG_KEY("pids_limit", AKS_CONFIG_INT, false, "512",
                   "most tasks (processes and threads) a container may hold; 0 = no limit of "
                   "ours (the engine's default)"),
    AKS_CONFIG_KEY("user", AKS_CONFIG_STRING, false, NULL,
                   "numeric UID[:GID] the containers run as (no capabilities); null = the "
                   "image's user"),
    AKS_CONFIG_KEY("agent", AKS_CONFIG_STRING, false, NULL,
                   "the static aksandbox-agent to place in each container and run operations "
                   "through (stateful Python); null = the installed one if present, false = "
                   "none (one docker exec per call)"),
    AKS_CONFIG_END,
};

/* ---- provider instance ------------------------------------------------------------------ */

static void dk_fini(aks_provider_impl *prov)
{
	if (!prov)
		return;
	dk_endpoint_fini(&prov->ep);
	free(prov->image);
	free(prov->runtime);
	free(prov->attach_to);
	free(prov->python);
	free(prov->user);
	aks__strv_free(prov->labels);
	aks__strv_free(prov->env);
	aks_agent_program_free(prov->agent);
	aks_ctr_desc_free(&prov->desc);
	pthread_mutex_destroy(&prov->agent_mu);
	free(prov);
	aks_ctr_curl_release();
}

/* One id (uid or gid): decimal digits, at most 4294967294 ((uid_t)-1 means "none"). */
static bool parse_id(const char *s, size_t n, unsigned *out)
{
	unsigned long long v = 0;
	if (n == 0 || n > 10)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v > 4294967294ULL)
		return false;
	*out = (unsigned)v;
	return true;
}

/* user: "UID" or "UID:GID", numeric (the container need not know the names, and the
 * workspace's owner is unambiguous); a GID left out is the UID. Sets prov->user ("UID:GID"),
 * uid and gid. */
static int read_user(aks_provider_impl *prov, const char *user, aks_error **err)
{
	if (!user || !*user)
		return AKS_OK;
	const char *colon = strchr(user, ':');
	size_t ulen = colon ? (size_t)(colon - user) : strlen(user);
	if (!parse_id(user, ulen, &prov->uid) ||
	    !(colon ? parse_id(colon + 1, strlen(colon + 1), &prov->gid)
	            : (prov->gid = prov->uid, true)))
		return prov->host->error_set(
		    err, AKS_ECONFIG, "docker: user '%s' is not UID[:GID] (numeric ids)", user);
	if (asprintf(&prov->user, "%u:%u", prov->uid, prov->gid) < 0) {
		prov->user = NULL;
		return prov->host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	return AKS_OK;
}

/* prov->env from the env map ("KEY=VALUE"), with HOME=/workspace for a user other than root
 * when the map sets no HOME: the user has no entry in the image's passwd, so HOME would be /,
 * which it cannot write (pip installs for the user under HOME). */
static int read_env(aks_provider_impl *prov, const char *const *env, aks_error **err)
{
	size_t n = 0;
	bool home = false;
	while (env && env[2 * n]) {
		home = home || strcmp(env[2 * n], "HOME") == 0;
		n++;
	}
	bool add_home = prov->uid != 0 && !home;
	if (!(prov->env = calloc(n + 2, sizeof(char *))))
		return prov->host->error_set(err, AKS_ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		if (asprintf(&prov->env[i], "%s=%s", env[2 * i], env[2 * i + 1]) < 0) {
			prov->env[i] = NULL;
			return prov->host->error_set(err, AKS_ENOMEM, "out of memory");
		}
	if (add_home && !(prov->env[n] = strdup("HOME=" DK_WORKSPACE)))
		return prov->host->error_set(err, AKS_ENOMEM, "out of memory");
	return AKS_OK;
}

static int read_config(aks_provider_impl *prov, const aks_config *cfg, aks_error **err)
{
	const aks_host_api *host = prov->host;
	const char *image = NULL, *runtime = NULL, *attach_to = NULL, *python = NULL,
	           *hostaddr = NULL, *agent = NULL, *user = NULL;
	const char *const *labels = NULL, *const *env = NULL;
	bool pull = true;
	int64_t pids_limit = DK_PIDS_DEFAULT;
	if (host->config_string(cfg, "image", &image) != AKS_OK ||
	    host->config_string(cfg, "runtime", &runtime) != AKS_OK ||
	    host->config_string(cfg, "attach_to", &attach_to) != AKS_OK ||
	    host->config_string(cfg, "host", &hostaddr) != AKS_OK ||
	    host->config_string(cfg, "python", &python) != AKS_OK ||
	    host->config_bool(cfg, "pull", &pull) != AKS_OK ||
	    host->config_map(cfg, "labels", &labels) != AKS_OK ||
	    host->config_map(cfg, "env", &env) != AKS_OK ||
	    host->config_int(cfg, "pids_limit", &pids_limit) != AKS_OK ||
	    host->config_string(cfg, "user", &user) != AKS_OK ||
	    host->config_string(cfg, "agent", &agent) != AKS_OK)
		return host->error_set(err, AKS_ECONFIG,
		                       "docker: the host could not read the config block");
	if (!image || !*image)
		image = "python:3.12-slim";
	if (!python || !*python)
		python = "python3";
	if (attach_to && *attach_to && !dk_valid_ref(attach_to))
		return host->error_set(err, AKS_ECONFIG,
		                       "docker: attach_to '%s' is not a container id or name",
		                       attach_to);
	for (const char *const *kv = env; kv && kv[0]; kv += 2)
		if (!*kv[0] || strchr(kv[0], '=') || !kv[1])
			return host->error_set(err, AKS_ECONFIG,
			                       "docker: env: '%s' is not a variable name", kv[0]);
	for (const char *const *kv = labels; kv && kv[0]; kv += 2)
		if (!*kv[0] || !kv[1] || strcmp(kv[0], DK_LABEL) == 0)
			return host->error_set(err, AKS_ECONFIG,
			                       "docker: labels: '%s' cannot be used as a label",
			                       kv[0]);
	if (pids_limit != 0 && (pids_limit < DK_PIDS_MIN || pids_limit > DK_PIDS_MAX))
		return host->error_set(
		    err, AKS_ECONFIG,
		    "docker: pids_limit %lld: give 0 (no limit of ours) or %d to "
		    "%d tasks (the container's own processes need a few)",
		    (long long)pids_limit, DK_PIDS_MIN, DK_PIDS_MAX);
	prov->pull = pull;
	prov->pids_limit = pids_limit;
	if (!(prov->image = strdup(image)) || !(prov->python = strdup(python)) ||
	    (runtime && *runtime && strcmp(runtime, "docker") != 0 &&
	     !(prov->runtime = strdup(runtime))) ||
	    (attach_to && *attach_to && !(prov->attach_to = strdup(attach_to))) ||
	    !(prov->labels = aks__strv_dup(labels)))
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	prov->gvisor = prov->runtime && strcmp(prov->runtime, "runsc") == 0;
	int rc = read_user(prov, user, err);
	if (rc == AKS_OK)
		rc = read_env(prov, env, err);
	if (rc == AKS_OK)
		rc = dk_endpoint_init(&prov->ep, hostaddr, host, err);
	if (rc != AKS_OK)
		return rc;
	/* stateful only while the agent can be used (aks_agent.h clears it in place: the host
	 * keeps this pointer), and only with python3, the agent's session interpreter: another
	 * `python` runs per call. */
	prov->caps.stateful = true;
	aks_agent_program_opts ao = {
	    .provider = DK_NAME,
	    .configured = agent,
	    .installed = DK_AGENT_DEFAULT,
	    .per_call = "one docker exec per call",
	    .detail = "(placed at " DK_AGENT_PATH ")",
	    .copied_in = true,
	    .python_session = strcmp(prov->python, "python3") == 0,
	    .resident = dk_agent_ops.resident,
	    .stateful = &prov->caps.stateful,
	};
	rc = aks_agent_program_open(host, &ao, &prov->agent, err);
	/* An allowlist is enforced by the agent's egress proxy: a container without a network
	 * (NetworkMode none) whose only way out is the agent's stream to the host. */
	if (rc == AKS_OK)
		prov->caps.policy_network_allowlist = prov->caps.egress_proxy =
		    aks_agent_program_enabled(prov->agent);
	return rc;
}

/* What a sandbox's root keeps of Docker's default capabilities: what it needs to act as the
 * owner of every file in its container, as tar and package managers do when they restore
 * owners (CHOWN), write into or replace files of other owners (DAC_OVERRIDE) and set their
 * modes and times (FOWNER). The rest goes: raw and packet sockets (NET_RAW), device nodes (MKNOD),
 * changing uids (SETUID, SETGID, so every process stays the container's user and a timeout kill
 * reaches them all without KILL), file capabilities (SETFCAP, SETPCAP), chroot, audit
 * writes, setgid bits on others' files (FSETID), ports below 1024 (NET_BIND_SERVICE: the
 * engine sets ip_unprivileged_port_start to 0 in containers anyway). A user other than root
 * has none of them in effect: no ambient capabilities, and no_new_privs keeps setuid and
 * file capabilities from granting any. docs/plugins/docker.md, "Hardening defaults". */
static const char *const dk_cap_add[] = {"CHOWN", "DAC_OVERRIDE", "FOWNER", NULL};

/* How the containers of this instance are confined, for the "runs" line of `aksandbox check`
 * (docs/plugins/docker.md, "Hardening defaults"). NULL when out of memory. */
static char *describe_confinement(const aks_provider_impl *prov)
{
	if (prov->attach_to) {
		char *s = NULL;
		return asprintf(&s,
		                "the attached container '%s' keeps its own limits and privileges",
		                prov->attach_to) < 0
		           ? NULL
		           : s;
	}
	char *pids = NULL, *caps = NULL, *user = NULL, *s = NULL;
	int n =
	    !prov->pids_limit ? asprintf(&pids, "no task limit of ours (pids_limit: 0)")
	    : prov->gvisor
	        ? asprintf(&pids,
	                   "at most %lld tasks (pids_limit, enforced by gVisor's kernel; the "
	                   "host allows gVisor itself %lld)",
	                   (long long)prov->pids_limit,
	                   (long long)DK_GVISOR_HOST_TASKS(prov->pids_limit))
	        : asprintf(&pids, "at most %lld tasks (pids_limit)", (long long)prov->pids_limit);
	size_t len = 1;
	for (const char *const *c = dk_cap_add; *c; c++)
		len += strlen(*c) + 2;
	if (n >= 0 && (caps = calloc(1, len)))
		for (const char *const *c = dk_cap_add; *c; c++)
			strcat(strcat(caps, c == dk_cap_add ? "" : ", "), *c);
	if (n >= 0 && caps)
		n = !prov->user ? asprintf(&user, "as the image's user (user: null)")
		    : prov->uid == 0
		        ? asprintf(&user, "as root")
		        : asprintf(&user, "as user %s (no capabilities in effect)", prov->user);
	if (n >= 0 && caps)
		n = asprintf(&s,
		             "containers: %s; every capability dropped but %s; no new privileges; "
		             "seccomp: Docker's default profile%s; %s",
		             pids, caps,
		             prov->gvisor ? " (loaded inside gVisor only with runsc --oci-seccomp)"
		                          : "",
		             user);
	if (n < 0 || !caps)
		s = NULL;
	free(pids);
	free(caps);
	free(user);
	return s;
}

static int dk_init(const aks_host_api *host, const aks_config *config, aks_provider_impl **out,
                   aks_error **err)
{
	if (!aks_ctr_curl_acquire())
		return host->error_set(err, AKS_ERROR, "docker: libcurl failed to initialise");
	aks_provider_impl *prov = calloc(1, sizeof(*prov));
	if (!prov) {
		aks_ctr_curl_release();
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	prov->host = host;
	pthread_mutex_init(&prov->agent_mu, NULL);
	prov->caps = dk_capabilities;
	int rc = read_config(prov, config, err);
	if (rc != AKS_OK) {
		dk_fini(prov);
		return rc;
	}
	/* gVisor puts a user-space kernel between the program and the host's. */
	if (prov->gvisor)
		prov->caps.isolation = AKS_ISOLATION_SYSCALL_FILTER;
	char *confinement = describe_confinement(prov);
	rc = confinement ? aks_ctr_desc_init(&prov->desc, confinement) : AKS_ENOMEM;
	free(confinement);
	if (rc != AKS_OK) {
		dk_fini(prov);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	*out = prov;
	return AKS_OK;
}

static const aks_capabilities *dk_instance_caps(const aks_provider_impl *prov)
{
	return &prov->caps;
}

static const char *dk_instance_description(const aks_provider_impl *prov)
{
	/* the description cache is the only thing that changes */
	return aks_ctr_desc_get((aks_ctr_desc *)&prov->desc,
	                        aks_agent_program_description(prov->agent));
}

/* ---- shared helpers ---------------------------------------------------------------------- */

int dk_gone(const aks_host_api *host, const char *id, aks_error **err)
{
	return host->error_set(err, AKS_EGONE, "container '%s' no longer exists", id);
}

static int engine_error(const aks_host_api *host, int code, const char *what, const dk_req *r,
                        aks_error **err)
{
	char *msg = dk_engine_message(r);
	int rc = host->error_set(err, code, "docker: %s: %s", what, msg);
	free(msg);
	return rc;
}

/* A one-shot request with a JSON body (NULL: none); the status is in r. */
static int call_json(dk_conn *c, dk_req *r, const char *method, const char *path, json_object *body,
                     const aks_call *call, aks_error **err)
{
	memset(r, 0, sizeof(*r));
	r->method = method;
	r->path = path;
	if (body) {
		r->body = json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN);
		r->body_len = strlen(r->body);
	}
	return dk_request(c, r, call, err);
}

/* GET /containers/{id}/json: AKS_OK with *info (caller puts it), AKS_EGONE. */
static int inspect(dk_conn *c, const char *id, const aks_call *call, json_object **info,
                   aks_error **err)
{
	const aks_host_api *host = c->prov->host;
	*info = NULL;
	char *path = NULL;
	if (asprintf(&path, "/containers/%s/json", id) < 0)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	dk_req r;
	int rc = call_json(c, &r, "GET", path, NULL, call, err);
	free(path);
	if (rc == AKS_OK) {
		if (r.status == 404)
			rc = dk_gone(host, id, err);
		else if (r.status != 200)
			rc = engine_error(host, AKS_EPROVISION, "cannot inspect the container", &r,
			                  err);
		else if (!(*info = dk_resp_json(&r)))
			rc = host->error_set(err, AKS_EPROVISION,
			                     "docker: the engine's answer is not JSON");
	}
	dk_req_free(&r);
	return rc;
}

static bool has_our_label(json_object *labels)
{
	json_object *v = aks__jget(labels, DK_LABEL);
	return v && strcmp(json_object_get_string(v), "1") == 0;
}

int dk_ensure_running(dk_conn *c, const char *id, const aks_call *call, aks_error **err)
{
	const aks_host_api *host = c->prov->host;
	json_object *info = NULL;
	int rc = inspect(c, id, call, &info, err);
	if (rc != AKS_OK)
		return rc;
	json_object *state = aks__jget(info, "State");
	bool running = json_object_get_boolean(aks__jget(state, "Running"));
	bool paused = json_object_get_boolean(aks__jget(state, "Paused"));
	json_object_put(info);
	if (running && !paused)
		return AKS_OK;
	char *path = NULL;
	if (asprintf(&path, "/containers/%s/%s", id, paused ? "unpause" : "start") < 0)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	dk_req r;
	rc = call_json(c, &r, "POST", path, NULL, call, err);
	free(path);
	if (rc == AKS_OK) {
		if (r.status == 404)
			rc = dk_gone(host, id, err);
		else if (r.status != 204 && r.status != 304)
			rc = engine_error(host, AKS_EPROVISION, "cannot start the container", &r,
			                  err);
	}
	dk_req_free(&r);
	return rc;
}

static int new_handle(aks_provider_impl *prov, const char *id, bool external, const aks_call *call,
                      aks_sandbox_impl **out, aks_error **err)
{
	const aks_policy *pol = call ? call->policy : NULL;
	aks_sandbox_impl *sb = calloc(1, sizeof(*sb));
	if (!sb || !(sb->id = strdup(id))) {
		free(sb);
		return prov->host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	sb->prov = prov;
	sb->external = external;
	aks_agent_session_opts o = {.id = sb->id,
	                            .cwd = DK_WORKSPACE,
	                            .egress_proxy =
	                                pol && pol->network_egress == AKS_EGRESS_ALLOWLIST,
	                            .network_allow = pol ? pol->network_allow : NULL};
	int rc = dk_conn_init(&sb->conn, prov, err);
	if (rc == AKS_OK && (rc = aks_agent_session_new(prov->agent, &dk_agent_ops, sb, &o,
	                                                &sb->agent, err)) != AKS_OK)
		dk_conn_fini(&sb->conn);
	if (rc != AKS_OK) {
		free(sb->id);
		free(sb);
		return rc;
	}
	*out = sb;
	return AKS_OK;
}

static void dk_close(aks_sandbox_impl *sb)
{
	if (!sb)
		return;
	aks_agent_session_free(sb->agent); /* the agent sees EOF, kills what it runs, exits */
	dk_conn_fini(&sb->conn);
	free(sb->id);
	free(sb);
}

/* ---- policy --------------------------------------------------------------------------- */

static bool fs_policy(const aks_policy *p)
{
	return p && ((p->fs_allow_read && p->fs_allow_read[0]) ||
	             (p->fs_allow_write && p->fs_allow_write[0]));
}

/* What we refuse before any daemon call: an allowlist without the agent's proxy. */
static int check_policy(const aks_provider_impl *prov, const aks_policy *p, aks_error **err)
{
	if (!p || p->network_egress != AKS_EGRESS_ALLOWLIST || prov->caps.policy_network_allowlist)
		return AKS_OK;
	if (p->strict)
		return prov->host->error_set(
		    err, AKS_EPOLICY,
		    "docker cannot enforce a network egress allowlist; use "
		    "'deny' or 'allow', or set strict=false");
	prov->host->log(AKS_LOG_WARNING, DK_NAME,
	                "docker cannot enforce a network egress allowlist without aksandbox-agent: "
	                "egress is unrestricted (strict=false)");
	return AKS_OK;
}

/* An existing container (attach_to) is not reconfigured: under strict, each
 * policy dimension must already hold in its HostConfig. */
static int check_existing(aks_provider_impl *prov, json_object *info, const aks_policy *p,
                          aks_error **err)
{
	if (!p)
		return AKS_OK;
	json_object *hc = aks__jget(info, "HostConfig");
	const char *net = json_object_get_string(aks__jget(hc, "NetworkMode"));
	int64_t mem = json_object_get_int64(aks__jget(hc, "Memory"));
	int64_t nano = json_object_get_int64(aks__jget(hc, "NanoCpus"));
	bool ro = json_object_get_boolean(aks__jget(hc, "ReadonlyRootfs"));
	const char *unmet = NULL;
	if (p->network_egress != AKS_EGRESS_ALLOW && !(net && strcmp(net, "none") == 0))
		unmet =
		    p->network_egress == AKS_EGRESS_DENY
		        ? "network egress deny (its NetworkMode is not none)"
		        : "a network egress allowlist (its NetworkMode is not none, so programs "
		          "need not go through the proxy)";
	else if (p->memory_mb > 0 && (mem <= 0 || mem > p->memory_mb * 1024 * 1024))
		unmet = "the memory limit";
	else if (p->cpu > 0 && (nano <= 0 || nano > (int64_t)(p->cpu * 1e9)))
		unmet = "the cpu limit";
	else if (fs_policy(p) && !ro)
		unmet = "the filesystem policy (its root is not read-only)";
	if (!unmet)
		return AKS_OK;
	if (p->strict)
		return prov->host->error_set(
		    err, AKS_EPOLICY,
		    "docker: the existing container '%s' does not enforce %s, "
		    "and an attached container is never reconfigured",
		    prov->attach_to, unmet);
	prov->host->log(AKS_LOG_WARNING, DK_NAME,
	                "the existing container '%s' does not enforce %s (strict=false)",
	                prov->attach_to, unmet);
	return AKS_OK;
}

/* ---- create ----------------------------------------------------------------------------- */

/* Ours, the host's (call->labels: the owner and the claim, which gc lists by) and the
 * configured ones. */
static json_object *labels_json(const aks_provider_impl *prov, const aks_call *call)
{
	json_object *l = json_object_new_object();
	json_object_object_add(l, DK_LABEL, json_object_new_string("1"));
	for (const char *const *kv = call ? call->labels : NULL; kv && kv[0] && kv[1]; kv += 2)
		if (strcmp(kv[0], DK_LABEL) != 0)
			json_object_object_add(l, kv[0], json_object_new_string(kv[1]));
	for (char *const *kv = prov->labels; kv && kv[0]; kv += 2)
		json_object_object_add(l, kv[0], json_object_new_string(kv[1]));
	return l;
}

static json_object *strv_json(char *const *v)
{
	json_object *a = json_object_new_array();
	for (; v && *v; v++)
		json_object_array_add(a, json_object_new_string(*v));
	return a;
}

/* agent_volume: mounted at DK_AGENT_DIR (a read-only root), or NULL. */
static json_object *mount_json(const char *volume, const char *target)
{
	json_object *m = json_object_new_object();
	json_object_object_add(m, "Type", json_object_new_string("volume"));
	json_object_object_add(m, "Source", json_object_new_string(volume));
	json_object_object_add(m, "Target", json_object_new_string(target));
	return m;
}

/* The container's task limit (pids_limit), so a fork bomb stops at its container. Under runc
 * it is the kernel's pids cgroup. Under gVisor the host's tasks are the Sentry's, a dozen or
 * more for each task it runs, and it dies when it cannot make one: gVisor's kernel enforces
 * the limit (RLIMIT_NPROC, which it counts over every task of the user, threads and root
 * without CAP_SYS_RESOURCE included; a container runs as one user), and the host cgroup gets
 * a backstop above what that lets gVisor need. Not RLIMIT_NPROC under runc: the host kernel
 * counts it per user over the whole host (other containers of that uid too) and exempts
 * root. */
static json_object *ulimit_json(const char *name, int64_t value)
{
	json_object *u = json_object_new_object();
	json_object_object_add(u, "Name", json_object_new_string(name));
	json_object_object_add(u, "Soft", json_object_new_int64(value));
	json_object_object_add(u, "Hard", json_object_new_int64(value));
	return u;
}

static void add_pids_limit(const aks_provider_impl *prov, json_object *hc, json_object *ulimits)
{
	if (!prov->pids_limit)
		return;
	if (!prov->gvisor) {
		json_object_object_add(hc, "PidsLimit", json_object_new_int64(prov->pids_limit));
		return;
	}
	json_object_object_add(hc, "PidsLimit",
	                       json_object_new_int64(DK_GVISOR_HOST_TASKS(prov->pids_limit)));
	json_object_array_add(ulimits, ulimit_json("nproc", prov->pids_limit));
}

/* Under a filesystem policy nothing but the allowed paths may be written. A read-only root
 * leaves writable mounts of the engine's own: /dev (a 64 MB tmpfs), /dev/shm, /dev/mqueue,
 * and under cgroup v1 the tmpfs that holds the hierarchies (each hierarchy is read-only).
 * runc makes them read-only from HostConfig.ReadonlyPaths, which replaces the engine's
 * list: dk_readonly_paths starts with it (Docker 20.10's; test_docker checks that ours
 * holds the engine's). */
static const char *const dk_readonly_paths[] = {
    "/proc/bus", "/proc/fs",    "/proc/irq",      "/proc/sys", "/proc/sysrq-trigger",
    "/dev",      "/dev/mqueue", "/sys/fs/cgroup", NULL};

static json_object *readonly_tmpfs_json(const char *target)
{
	json_object *m = json_object_new_object();
	json_object_object_add(m, "Type", json_object_new_string("tmpfs"));
	json_object_object_add(m, "Target", json_object_new_string(target));
	json_object_object_add(m, "ReadOnly", json_object_new_boolean(1));
	return m;
}

/* The read-only root and the rest of a filesystem policy. gVisor ignores ReadonlyPaths: there
 * /dev/shm and /tmp (a tmpfs gVisor mounts itself where the spec has no /tmp: this runsc
 * does not overlay the root, whose read-only flag holds) get read-only tmpfs mounts of ours,
 * which runc honours too (/dev/shm; its /tmp is the read-only root's). gVisor's /dev cannot
 * be: a read-only tmpfs there has no device nodes (docs/plugins/docker.md, "Hardening
 * defaults"). POSIX message queues need no path: RLIMIT_MSGQUEUE 0 leaves no room for one. */
static void add_fs_policy(const aks_provider_impl *prov, json_object *hc, json_object *mounts,
                          json_object *ulimits)
{
	json_object_object_add(hc, "ReadonlyRootfs", json_object_new_boolean(1));
	json_object_object_add(hc, "ReadonlyPaths", strv_json((char *const *)dk_readonly_paths));
	json_object_array_add(mounts, readonly_tmpfs_json("/dev/shm"));
	if (prov->gvisor)
		json_object_array_add(mounts, readonly_tmpfs_json("/tmp"));
	json_object_array_add(ulimits, ulimit_json("msgqueue", 0));
}

/* Every capability dropped but dk_cap_add; no_new_privs, so no setuid program or file
 * capability grants more. No seccomp option: the engine's default profile stays. */
static void add_privileges(json_object *hc)
{
	const char *drop[] = {"ALL", NULL}, *opts[] = {"no-new-privileges", NULL};
	json_object_object_add(hc, "CapDrop", strv_json((char *const *)drop));
	json_object_object_add(hc, "CapAdd", strv_json((char *const *)dk_cap_add));
	json_object_object_add(hc, "SecurityOpt", strv_json((char *const *)opts));
	/* its own cgroup namespace: the host's cgroup paths are not shown to it */
	json_object_object_add(hc, "CgroupnsMode", json_object_new_string("private"));
}

static json_object *create_body(const aks_provider_impl *prov, const char *volume,
                                const char *agent_volume, const aks_call *call)
{
	const aks_policy *p = call ? call->policy : NULL;
	json_object *b = json_object_new_object();
	json_object_object_add(b, "Image", json_object_new_string(prov->image));
	const char *cmd[] = {"sleep", "infinity", NULL};
	json_object_object_add(b, "Cmd", strv_json((char *const *)cmd));
	json_object_object_add(b, "WorkingDir", json_object_new_string(DK_WORKSPACE));
	json_object_object_add(b, "Labels", labels_json(prov, call));
	json_object_object_add(b, "Env", strv_json(prov->env));
	if (prov->user)
		json_object_object_add(b, "User", json_object_new_string(prov->user));
	json_object *hc = json_object_new_object();
	/* docker-init as PID 1 reaps what the timeout kill leaves as zombies. */
	json_object_object_add(hc, "Init", json_object_new_boolean(1));
	/* An allowlist too: the agent's egress proxy is its only way out. */
	if (p && p->network_egress != AKS_EGRESS_ALLOW &&
	    (p->network_egress == AKS_EGRESS_DENY || prov->caps.policy_network_allowlist))
		json_object_object_add(hc, "NetworkMode", json_object_new_string("none"));
	if (p && p->cpu > 0)
		json_object_object_add(hc, "NanoCpus",
		                       json_object_new_int64((int64_t)(p->cpu * 1e9)));
	if (p && p->memory_mb > 0) {
		int64_t bytes = p->memory_mb * 1024 * 1024;
		json_object_object_add(hc, "Memory", json_object_new_int64(bytes));
		/* No swap on top: a hog fails at the limit instead of paging. */
		json_object_object_add(hc, "MemorySwap", json_object_new_int64(bytes));
	}
	json_object *mounts = json_object_new_array(), *ulimits = json_object_new_array();
	json_object_array_add(mounts, mount_json(volume, DK_WORKSPACE));
	if (agent_volume)
		json_object_array_add(mounts, mount_json(agent_volume, DK_AGENT_DIR));
	add_pids_limit(prov, hc, ulimits);
	add_privileges(hc);
	if (fs_policy(p))
		add_fs_policy(prov, hc, mounts, ulimits);
	if (prov->runtime)
		json_object_object_add(hc, "Runtime", json_object_new_string(prov->runtime));
	json_object_object_add(hc, "Mounts", mounts);
	if (json_object_array_length(ulimits))
		json_object_object_add(hc, "Ulimits", ulimits);
	else
		json_object_put(ulimits);
	json_object_object_add(b, "HostConfig", hc);
	return b;
}

/* POST /images/create: a 200 whose progress stream holds {"error": ...} is a
 * failure too. AKS_OK when the image is now present. */
static int pull_image(dk_conn *c, const aks_call *call, char **why, aks_error **err)
{
	const aks_host_api *host = c->prov->host;
	char *img = dk_escape(c->prov->image), *path = NULL;
	if (!img || asprintf(&path, "/images/create?fromImage=%s", img) < 0) {
		free(img);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	free(img);
	dk_req r;
	int rc = call_json(c, &r, "POST", path, NULL, call, err);
	free(path);
	if (rc == AKS_OK) {
		bool failed = r.status != 200;
		*why = failed ? dk_engine_message(&r) : dk_parse_pull_error(&r, &failed);
		if (failed && !*why)
			rc = host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	dk_req_free(&r);
	return rc;
}

static int missing_image(const aks_provider_impl *prov, const char *why, aks_error **err)
{
	return prov->host->error_set(
	    err, AKS_EPROVISION,
	    "docker: the image '%s' is not available on the engine%s%s%s; provide it with "
	    "`docker pull %s` (from a registry), `docker load -i FILE.tar` or `docker import "
	    "ROOTFS.tar %s`, or set image: to one that exists",
	    prov->image, why ? " and could not be pulled (" : "", why ? why : "", why ? ")" : "",
	    prov->image, prov->image);
}

static int remove_container(dk_conn *c, const char *id, const aks_call *call, aks_error **err);
static int remove_volume(dk_conn *c, const char *volume, const aks_call *call, aks_error **err);

/* A call of its own for cleaning up after a failure (the failed call's deadline may be over). */
static aks_call cleanup_call(const aks_host_api *host)
{
	aks_call quick = {AKS_CALL_INIT, .deadline_ms = host->now_ms() + 30000, .timeout = 30};
	return quick;
}

static int create_volume(dk_conn *c, const char *volume, const aks_call *call, aks_error **err)
{
	json_object *b = json_object_new_object();
	json_object_object_add(b, "Name", json_object_new_string(volume));
	json_object_object_add(b, "Labels", labels_json(c->prov, call));
	dk_req r;
	int rc = call_json(c, &r, "POST", "/volumes/create", b, call, err);
	json_object_put(b);
	if (rc == AKS_OK && r.status != 201 && r.status != 200)
		rc = engine_error(c->prov->host, AKS_EPROVISION,
		                  "cannot create the workspace volume", &r, err);
	dk_req_free(&r);
	return rc;
}

/* The engine makes a new workspace volume root's: with a `user` other than root it is given
 * to the user before the container starts, through the archive API, which needs no process
 * (and no capability) in the container and works under a read-only root (the volume is not
 * the root). The tar's one entry is "/", the directory it is unpacked into: the engine sets
 * its owner and mode (an entry "." it would skip). The ownership stays across restarts. */
static int give_workspace(dk_conn *c, const char *name, const aks_call *call, aks_error **err)
{
	const aks_provider_impl *prov = c->prov;
	aks_ctr_tar_opts o = {
	    .dir = true, .uid = prov->uid, .gid = prov->gid, .existing = SIZE_MAX};
	aks_buf tar = {0};
	if (aks_ctr_tar_file_opts("/", NULL, 0, &o, &tar.data, &tar.len) < 0)
		return prov->host->error_set(err, AKS_ENOMEM, "out of memory");
	tar.cap = tar.len + 1;
	char path[160];
	snprintf(path, sizeof(path), "/containers/%s/archive?path=" DK_WORKSPACE, name);
	dk_req r = {.method = "PUT",
	            .path = path,
	            .content_type = "application/x-tar",
	            .body = tar.data,
	            .body_len = tar.len};
	int rc = dk_request(c, &r, call, err);
	if (rc == AKS_OK && r.status != 200) {
		char *what = NULL;
		if (asprintf(&what, "cannot give %s to user %s", DK_WORKSPACE, prov->user) < 0)
			rc = prov->host->error_set(err, AKS_ENOMEM, "out of memory");
		else
			rc = engine_error(prov->host, AKS_EPROVISION, what, &r, err);
		free(what);
	}
	dk_req_free(&r);
	aks__buf_free(&tar);
	return rc;
}

/* Between create and start (a runtime such as gVisor may not see host-side writes to its
 * root after start): the agent into the new container. After a failure the handle's
 * first operation tries again (aks_agent.h), and falls back if it cannot. */
static void place_agent(aks_provider_impl *prov, dk_conn *c, const char *name, bool into_dir,
                        const aks_call *call)
{
	if (!aks_agent_program_usable(prov->agent))
		return;
	char *why = NULL;
	aks_error *e = NULL;
	int rc = dk_agent_place_new(c, name, into_dir, call, &why, &e);
	if (rc != AKS_OK || why) /* the handle tries again before its first operation */
		prov->host->log(AKS_LOG_INFO, DK_NAME,
		                "cannot place aksandbox-agent in '%s' yet: %s", name,
		                why ? why
		                : e ? prov->host->error_message(e)
		                    : "?");
	free(why);
	if (e)
		prov->host->error_free(e);
}

static int provision(aks_provider_impl *prov, dk_conn *c, const aks_call *call, char *name,
                     aks_error **err)
{
	const aks_host_api *host = prov->host;
	const aks_policy *p = call ? call->policy : NULL;
	char hex[33], volume[96], agent_volume[96], path[128];
	if (dk_random_hex(hex, 16) < 0)
		return host->error_set(err, AKS_EIO, "docker: cannot read /dev/urandom");
	snprintf(name, 64, DK_ID_PREFIX "%s", hex);
	snprintf(volume, sizeof(volume), "%s" DK_VOLUME_SUFFIX, name);
	snprintf(agent_volume, sizeof(agent_volume), "%s" DK_AGENT_VOLUME_SUFFIX, name);
	/* A read-only root has no place for the agent: a volume of ours is. */
	bool with_agent_volume = fs_policy(p) && aks_agent_program_usable(prov->agent);
	int rc = create_volume(c, volume, call, err);
	if (rc != AKS_OK)
		return rc;
	if (with_agent_volume && (rc = create_volume(c, agent_volume, call, err)) != AKS_OK) {
		with_agent_volume = false;
		goto out_volume;
	}

	json_object *body =
	    create_body(prov, volume, with_agent_volume ? agent_volume : NULL, call);
	snprintf(path, sizeof(path), "/containers/create?name=%s", name);
	dk_req r;
	bool pulled = false;
	for (;;) {
		rc = call_json(c, &r, "POST", path, body, call, err);
		if (rc != AKS_OK || r.status != 404 || pulled)
			break;
		/* 404 from create: the image is missing. */
		char *why = NULL;
		if (!prov->pull) {
			rc = missing_image(prov, NULL, err);
			break;
		}
		dk_req_free(&r);
		rc = pull_image(c, call, &why, err);
		if (rc == AKS_OK && why)
			rc = missing_image(prov, why, err);
		free(why);
		if (rc != AKS_OK)
			goto out;
		pulled = true;
	}
	if (rc == AKS_OK && r.status != 201) {
		if (r.status == 404)
			rc = missing_image(prov, NULL, err);
		else
			rc = engine_error(host, AKS_EPROVISION, "cannot create the container", &r,
			                  err);
	}
	dk_req_free(&r);
	bool created = rc == AKS_OK;
	/* Between create and start: the workspace's owner, and the agent. */
	if (rc == AKS_OK && prov->uid != 0)
		rc = give_workspace(c, name, call, err);
	if (rc == AKS_OK)
		place_agent(prov, c, name, with_agent_volume, call);
	if (rc == AKS_OK) {
		snprintf(path, sizeof(path), "/containers/%s/start", name);
		rc = call_json(c, &r, "POST", path, NULL, call, err);
		if (rc == AKS_OK && r.status != 204 && r.status != 304)
			rc = engine_error(host, AKS_EPROVISION, "cannot start the container", &r,
			                  err);
		dk_req_free(&r);
	}
	if (rc != AKS_OK && created) {
		aks_call quick = cleanup_call(host);
		remove_container(c, name, &quick, NULL);
	}
out:
	json_object_put(body);
out_volume:
	if (rc != AKS_OK) {
		aks_call quick = cleanup_call(host);
		remove_volume(c, volume, &quick, NULL);
		if (with_agent_volume)
			remove_volume(c, agent_volume, &quick, NULL);
	}
	return rc;
}

/* environment: attached (the core allows attach_to nowhere else): bind to
 * the configured container, never created or reconfigured by us. Its
 * HostConfig must already enforce the call's policy (strict), and /workspace
 * is made to exist, since executions run there. */
static int attach_external(aks_provider_impl *prov, const aks_call *call, aks_sandbox_impl **out,
                           aks_error **err)
{
	const aks_policy *p = call ? call->policy : NULL;
	int rc = check_policy(prov, p, err);
	if (rc != AKS_OK)
		return rc;
	dk_conn c = {0};
	if ((rc = dk_conn_init(&c, prov, err)) != AKS_OK)
		return rc;
	json_object *info = NULL;
	rc = inspect(&c, prov->attach_to, call, &info, err);
	if (rc == AKS_OK)
		rc = check_existing(prov, info, p, err);
	json_object_put(info);
	if (rc == AKS_OK)
		rc = dk_ensure_running(&c, prov->attach_to, call, err);
	dk_conn_fini(&c);
	if (rc != AKS_OK)
		return rc;
	rc = new_handle(prov, prov->attach_to, true, call, out, err);
	if (rc == AKS_OK) {
		const char *argv[] = {"mkdir", "-p", DK_WORKSPACE, NULL};
		int code = 0;
		aks_error *e = NULL;
		if (dk_exec_argv(*out, argv, call, NULL, &code, &e) != AKS_OK || code != 0)
			prov->host->log(AKS_LOG_WARNING, DK_NAME,
			                "cannot create %s in container '%s': %s", DK_WORKSPACE,
			                prov->attach_to,
			                e ? prov->host->error_message(e) : "mkdir failed");
		if (e)
			prov->host->error_free(e);
	}
	return rc;
}

static int dk_create(aks_provider_impl *prov, const aks_call *call, aks_sandbox_impl **out,
                     aks_error **err)
{
	if (prov->attach_to) /* it checks the policy and connects itself */
		return attach_external(prov, call, out, err);
	const aks_policy *p = call ? call->policy : NULL;
	int rc = check_policy(prov, p, err);
	if (rc != AKS_OK)
		return rc;
	dk_conn c = {0};
	if ((rc = dk_conn_init(&c, prov, err)) != AKS_OK)
		return rc;
	char name[64];
	rc = provision(prov, &c, call, name, err);
	dk_conn_fini(&c);
	if (rc != AKS_OK)
		return rc;
	return new_handle(prov, name, false, call, out, err);
}

/* ---- attach and destroy --------------------------------------------------------------------- */

static int dk_attach(aks_provider_impl *prov, const char *sandbox_id, const aks_call *call,
                     aks_sandbox_impl **out, aks_error **err)
{
	if (!dk_valid_ref(sandbox_id))
		return dk_gone(prov->host, sandbox_id ? sandbox_id : "", err);
	if (prov->attach_to && strcmp(prov->attach_to, sandbox_id) == 0)
		return attach_external(prov, call, out, err);
	dk_conn c = {0};
	int rc = dk_conn_init(&c, prov, err);
	if (rc != AKS_OK)
		return rc;
	rc = dk_ensure_running(&c, sandbox_id, call, err);
	if (rc == AKS_EGONE && strncmp(sandbox_id, DK_ID_PREFIX, strlen(DK_ID_PREFIX)) == 0 &&
	    strlen(sandbox_id) < 200) {
		/* The container was removed behind our back; the core recreates the
		 * sandbox and tells the agent its workspace is gone. Make that true
		 * rather than leak the orphaned workspace volume. */
		char volume[256];
		snprintf(volume, sizeof(volume), "%s" DK_VOLUME_SUFFIX, sandbox_id);
		aks_error *e = NULL;
		if (remove_volume(&c, volume, call, &e) != AKS_OK)
			prov->host->log(AKS_LOG_WARNING, DK_NAME,
			                "cannot remove the workspace volume '%s' of a vanished "
			                "container: %s",
			                volume, e ? prov->host->error_message(e) : "?");
		if (e)
			prov->host->error_free(e);
		e = NULL;
		snprintf(volume, sizeof(volume), "%s" DK_AGENT_VOLUME_SUFFIX, sandbox_id);
		if (remove_volume(&c, volume, call, &e) != AKS_OK)
			prov->host->log(AKS_LOG_WARNING, DK_NAME,
			                "cannot remove the agent volume '%s' of a vanished "
			                "container: %s",
			                volume, e ? prov->host->error_message(e) : "?");
		if (e)
			prov->host->error_free(e);
	}
	dk_conn_fini(&c);
	if (rc != AKS_OK)
		return rc;
	return new_handle(prov, sandbox_id, false, call, out, err);
}

static int remove_container(dk_conn *c, const char *id, const aks_call *call, aks_error **err)
{
	char path[320];
	snprintf(path, sizeof(path), "/containers/%s?force=1", id);
	dk_req r;
	int rc = call_json(c, &r, "DELETE", path, NULL, call, err);
	if (rc == AKS_OK && r.status != 204 && r.status != 404)
		rc = engine_error(c->prov->host, AKS_EPROVISION, "cannot remove the container", &r,
		                  err);
	dk_req_free(&r);
	return rc;
}

/* Removes a workspace volume if it carries our label. */
static int remove_volume(dk_conn *c, const char *volume, const aks_call *call, aks_error **err)
{
	char path[320];
	snprintf(path, sizeof(path), "/volumes/%s", volume);
	dk_req r;
	int rc = call_json(c, &r, "GET", path, NULL, call, err);
	bool ours = false;
	if (rc == AKS_OK && r.status == 200) {
		json_object *j = dk_resp_json(&r);
		ours = has_our_label(aks__jget(j, "Labels"));
		json_object_put(j);
	}
	dk_req_free(&r);
	if (rc != AKS_OK || !ours)
		return rc;
	snprintf(path, sizeof(path), "/volumes/%s?force=1", volume);
	rc = call_json(c, &r, "DELETE", path, NULL, call, err);
	if (rc == AKS_OK && r.status != 204 && r.status != 404)
		rc = engine_error(c->prov->host, AKS_EPROVISION,
		                  "cannot remove the workspace volume", &r, err);
	dk_req_free(&r);
	return rc;
}

/* Removes a container we created, and its workspace volume. Anything else
 * (an unknown id, a container without our label) is left alone: destroy is
 * idempotent and never touches what aksandbox did not create. */
static int dk_destroy(aks_provider_impl *prov, const char *sandbox_id, const aks_call *call,
                      aks_error **err)
{
	const aks_host_api *host = prov->host;
	if (!dk_valid_ref(sandbox_id))
		return AKS_OK;
	dk_conn c = {0};
	int rc = dk_conn_init(&c, prov, err);
	if (rc != AKS_OK)
		return rc;
	json_object *info = NULL;
	aks_error *e = NULL;
	rc = inspect(&c, sandbox_id, call, &info, &e);
	if (rc == AKS_OK) {
		if (has_our_label(aks__jget(aks__jget(info, "Config"), "Labels"))) {
			rc = remove_container(&c, sandbox_id, call, err);
		} else {
			host->log(
			    AKS_LOG_WARNING, DK_NAME,
			    "destroy: not removing container '%s': aksandbox did not create it",
			    sandbox_id);
		}
	} else if (rc == AKS_EGONE) {
		rc = AKS_OK;
	} else {
		rc = host->error_set(err, rc, "%s", host->error_message(e));
	}
	if (e)
		host->error_free(e);
	json_object_put(info);
	if (rc == AKS_OK && strncmp(sandbox_id, DK_ID_PREFIX, strlen(DK_ID_PREFIX)) == 0 &&
	    strlen(sandbox_id) < 200) {
		char volume[256];
		snprintf(volume, sizeof(volume), "%s" DK_VOLUME_SUFFIX, sandbox_id);
		rc = remove_volume(&c, volume, call, err);
		snprintf(volume, sizeof(volume), "%s" DK_AGENT_VOLUME_SUFFIX, sandbox_id);
		if (rc == AKS_OK)
			rc = remove_volume(&c, volume, call, err);
	}
	dk_conn_fini(&c);
	return rc;
}

/* ---- tables -----------------------------------------------------------------------------------
 */

static const char *dk_id(const aks_sandbox_impl *sb)
{
	return sb->id;
}

static const aks_sandbox_ops dk_sandbox_ops = {
    .struct_version = AKS_SANDBOX_OPS_VERSION,
    .struct_size = sizeof(aks_sandbox_ops),
    .id = dk_id,
    .execute_code = dk_execute_code,
    .execute_command = dk_execute_command,
    .upload_file = dk_upload_file,
    .download_file = dk_download_file,
    .install_packages = dk_install_packages,
    .close = dk_close,
};

static const aks_provider_ops dk_provider_ops = {
    .struct_version = AKS_PROVIDER_OPS_VERSION,
    .struct_size = sizeof(aks_provider_ops),
    .capabilities = &dk_capabilities,
    .init = dk_init,
    .fini = dk_fini,
    .instance_capabilities = dk_instance_caps,
    .instance_description = dk_instance_description,
    .create = dk_create,
    .attach = dk_attach,
    .destroy = dk_destroy,
    .sandbox = &dk_sandbox_ops,
    .list_sandboxes = dk_list_sandboxes,
};

AKS_PLUGIN_DEFINE(AKS_PLUGIN_PROVIDER, DK_NAME, DK_VERSION, "Apache-2.0",
                  "runs code in Docker containers over the Engine API (runc, or gVisor with "
                  "runtime runsc)",
                  dk_config_keys, &dk_provider_ops);
