/*
 * plugins/kubernetes/kubernetes.c - the descriptor, the provider instance and
 * the sandbox lifecycle (create, attach, destroy, close) over the Kubernetes
 * API.
 *
 * A sandbox is a pod ak-sandbox-<12 hex> running `sleep infinity` in one
 * container, `sandbox`; its id is <namespace>/<pod>. With network_policy a
 * NetworkPolicy of the same name is created before the pod, so the pod never
 * runs unrestricted. See docs/plugins/kubernetes.md.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "aks_agent.h"
#include "aks_container.h"
#include "aks_json.h"
#include "k8s_internal.h"

#ifndef K8S_VERSION
#error "K8S_VERSION must be defined (the package version)"
#endif
#ifndef K8S_AGENT_DEFAULT
#error "K8S_AGENT_DEFAULT must be defined (the installed aksandbox-agent)"
#endif

#define POLL_MS 250

/* ---- descriptor ------------------------------------------------------------------------ */

static const char *const k8s_languages[] = {"python", NULL};

/* The reference's row (section 8.0), with impersonation: container
 * isolation; egress only per instance with network_policy (the operator's
 * assertion that the CNI enforces NetworkPolicy); coarse filesystem policy
 * (read-only root, writable /workspace); cpu and memory as requests = limits. */
static const aks_capabilities k8s_capabilities = {
    .struct_version = AKS_CAPABILITIES_VERSION,
    .struct_size = sizeof(aks_capabilities),
    .isolation = AKS_ISOLATION_CONTAINER,
    .languages = k8s_languages,
    .shell = true,
    .files = true,
    .package_install = true,
    .stateful = false,
    .attach = true,
    .provisions = true,
    .attaches_external = true,
    .principal_user = true,
    .policy_network = false,
    .policy_network_allowlist = false,
    .policy_filesystem = true,
    .policy_resources = true,
};

static const aks_config_key k8s_config_keys[] = {
    AKS_CONFIG_KEY("namespace", AKS_CONFIG_STRING, false, "default",
                   "namespace of the sandbox pods"),
    AKS_CONFIG_KEY("image", AKS_CONFIG_STRING, false, "python:3.12-slim", "container image"),
    AKS_CONFIG_KEY("attach_to", AKS_CONFIG_STRING, false, NULL,
                   "existing pod, <namespace>/<pod> or <pod> (environment: attached)"),
    AKS_CONFIG_KEY("kubeconfig", AKS_CONFIG_STRING, false, NULL,
                   "kubeconfig file; null = in-cluster, else KUBECONFIG, else ~/.kube/config"),
    AKS_CONFIG_KEY("context", AKS_CONFIG_STRING, false, NULL,
                   "kubeconfig context; null = its current-context"),
    AKS_CONFIG_KEY("service_account", AKS_CONFIG_STRING, false, NULL,
                   "serviceAccountName of the pods"),
    AKS_CONFIG_KEY("image_pull_secrets", AKS_CONFIG_STRING_LIST, false, "[]",
                   "imagePullSecrets of the pods"),
    AKS_CONFIG_KEY("image_pull_policy", AKS_CONFIG_STRING, false, NULL,
                   "imagePullPolicy (Always, IfNotPresent, Never); null = the cluster's"),
    AKS_CONFIG_KEY("labels", AKS_CONFIG_STRING_MAP, false, "{}", "extra pod labels"),
    AKS_CONFIG_KEY("node_selector", AKS_CONFIG_STRING_MAP, false, "{}", "nodeSelector"),
    AKS_CONFIG_KEY("env", AKS_CONFIG_STRING_MAP, false, "{}", "environment of the container"),
    AKS_CONFIG_KEY("security_context", AKS_CONFIG_JSON, false, "{}", "pod securityContext"),
    AKS_CONFIG_KEY("container_security_context", AKS_CONFIG_JSON, false, "{}",
                   "overlays the hardened container securityContext key by key"),
    AKS_CONFIG_KEY("network_policy", AKS_CONFIG_BOOL, false, "false",
                   "enforce egress with per-pod NetworkPolicies (the CNI must enforce them)"),
    AKS_CONFIG_KEY("create_timeout", AKS_CONFIG_DOUBLE, false, "120",
                   "seconds for a pod to reach Running"),
    AKS_CONFIG_KEY("max_lifetime", AKS_CONFIG_INT, false, "0",
                   "activeDeadlineSeconds of the pods (0 = none; idle pods are reclaimed by "
                   "idle_timeout)"),
    AKS_CONFIG_KEY("python", AKS_CONFIG_STRING, false, "python3",
                   "interpreter for language python, in the container's PATH"),
    AKS_CONFIG_KEY("agent", AKS_CONFIG_STRING, false, NULL,
                   "the aksandbox-agent to place in the pods and run operations through "
                   "(stateful Python); null = the installed one if present, false = none "
                   "(one exec per call)"),
    AKS_CONFIG_END,
};

/* ---- names -------------------------------------------------------------------------------- */

/* A DNS-1123 subdomain: what a namespace or pod name can be. */
static bool valid_name(const char *s, size_t n)
{
	if (!n || n > 253)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
		if (!alnum && !((c == '-' || c == '.') && i > 0 && i + 1 < n))
			return false;
	}
	return true;
}

/* <ns>/<pod> (split on the first '/') or a bare pod in the configured namespace. */
static bool parse_id(const aks_provider_impl *prov, const char *id, char **ns, char **pod)
{
	*ns = *pod = NULL;
	if (!id)
		return false;
	const char *slash = strchr(id, '/');
	const char *p = slash ? slash + 1 : id;
	size_t nl = slash ? (size_t)(slash - id) : strlen(prov->namespace);
	const char *n = slash ? id : prov->namespace;
	if (!valid_name(n, nl) || !valid_name(p, strlen(p)))
		return false;
	*ns = strndup(n, nl);
	*pod = strdup(p);
	if (!*ns || !*pod) {
		free(*ns);
		free(*pod);
		*ns = *pod = NULL;
		return false;
	}
	return true;
}

/* Whether id names the attach_to pod ("pod" and "<namespace>/pod" alike). */
static bool is_attach_to(const aks_provider_impl *prov, const char *id)
{
	char *ns1 = NULL, *pod1 = NULL, *ns2 = NULL, *pod2 = NULL;
	bool same = prov->attach_to && parse_id(prov, prov->attach_to, &ns1, &pod1) &&
	            parse_id(prov, id, &ns2, &pod2) && strcmp(ns1, ns2) == 0 &&
	            strcmp(pod1, pod2) == 0;
	free(ns1);
	free(pod1);
	free(ns2);
	free(pod2);
	return same;
}

/* ---- instance ------------------------------------------------------------------------------ */

static void k8s_fini(aks_provider_impl *prov)
{
	if (!prov)
		return;
	k8s_clients_free(prov);
	k8s_conn_cfg_free(&prov->conn);
	aks_agent_program_free(prov->agent);
	aks_ctr_desc_free(&prov->desc);
	pthread_mutex_destroy(&prov->lock);
	free(prov);
	aks_ctr_curl_release();
}

static int read_config(aks_provider_impl *prov, const aks_config *cfg, aks_error **err)
{
	const aks_host_api *host = prov->host;
	const char *kubeconfig = NULL, *context = NULL, *agent = NULL;
	if (host->config_string(cfg, "namespace", &prov->namespace) != AKS_OK ||
	    host->config_string(cfg, "image", &prov->image) != AKS_OK ||
	    host->config_string(cfg, "attach_to", &prov->attach_to) != AKS_OK ||
	    host->config_string(cfg, "kubeconfig", &kubeconfig) != AKS_OK ||
	    host->config_string(cfg, "context", &context) != AKS_OK ||
	    host->config_string(cfg, "service_account", &prov->service_account) != AKS_OK ||
	    host->config_list(cfg, "image_pull_secrets", &prov->image_pull_secrets) != AKS_OK ||
	    host->config_string(cfg, "image_pull_policy", &prov->image_pull_policy) != AKS_OK ||
	    host->config_map(cfg, "labels", &prov->labels) != AKS_OK ||
	    host->config_map(cfg, "node_selector", &prov->node_selector) != AKS_OK ||
	    host->config_map(cfg, "env", &prov->env) != AKS_OK ||
	    host->config_json(cfg, "security_context", &prov->security_context) != AKS_OK ||
	    host->config_json(cfg, "container_security_context",
	                      &prov->container_security_context) != AKS_OK ||
	    host->config_bool(cfg, "network_policy", &prov->network_policy) != AKS_OK ||
	    host->config_double(cfg, "create_timeout", &prov->create_timeout) != AKS_OK ||
	    host->config_int(cfg, "max_lifetime", &prov->max_lifetime) != AKS_OK ||
	    host->config_string(cfg, "python", &prov->python) != AKS_OK ||
	    host->config_string(cfg, "agent", &agent) != AKS_OK)
		return host->error_set(err, AKS_ECONFIG,
		                       "kubernetes: the host could not read the config block");
	if (!prov->image || !*prov->image)
		prov->image = "python:3.12-slim";
	if (!prov->python || !*prov->python)
		prov->python = "python3";
	if (!prov->namespace || !*prov->namespace)
		prov->namespace = "default";
	if (prov->attach_to && !*prov->attach_to)
		prov->attach_to = NULL;
	if (!valid_name(prov->namespace, strlen(prov->namespace)))
		return host->error_set(err, AKS_ECONFIG,
		                       "kubernetes: namespace '%s' is not a valid namespace name",
		                       prov->namespace);
	char *ns = NULL, *pod = NULL;
	if (prov->attach_to && !parse_id(prov, prov->attach_to, &ns, &pod))
		return host->error_set(
		    err, AKS_ECONFIG,
		    "kubernetes: attach_to '%s' is not <namespace>/<pod> or <pod>",
		    prov->attach_to);
	free(ns);
	free(pod);
	if (!(prov->create_timeout > 0))
		return host->error_set(err, AKS_ECONFIG,
		                       "kubernetes: create_timeout must be a positive number of "
		                       "seconds");
	if (prov->max_lifetime < 0)
		return host->error_set(err, AKS_ECONFIG,
		                       "kubernetes: max_lifetime must be 0 (none) or seconds");
	for (const char *const *kv = prov->env; kv && kv[0]; kv += 2)
		if (!*kv[0] || strchr(kv[0], '=') || !kv[1])
			return host->error_set(err, AKS_ECONFIG,
			                       "kubernetes: env: '%s' is not a variable name",
			                       kv[0]);
	/* The overlays must be mappings: checked now, not at the first create. */
	k8s_pod_params pp = {.name = "x",
	                     .namespace = prov->namespace,
	                     .image = prov->image,
	                     .security_context = prov->security_context,
	                     .container_security_context = prov->container_security_context};
	k8s_err ke = {0};
	json_object *probe = k8s_pod_manifest(&pp, NULL, &ke);
	json_object_put(probe);
	if (!probe)
		return host->error_set(err, ke.code ? ke.code : AKS_ENOMEM, "%s", ke.msg);
	ke.code = AKS_OK;
	if (k8s_conn_cfg_load(kubeconfig, context, NULL, &prov->conn, &ke) != AKS_OK)
		return host->error_set(err, ke.code, "%s", ke.msg);
	/* Which cluster, found how: kubeconfig: null picks one by a lookup order, and an operator
	 * (or a worker pod's log) should not have to guess which entry won. */
	host->log(AKS_LOG_INFO, K8S_NAME, "the API server at %s, from the %s", prov->conn.server,
	          prov->conn.source);
	/* the agent: null = the installed one when there is one, false = none; stateful
	 * while it runs python3 in its session (aks_agent.h clears it in place otherwise) */
	prov->caps.stateful = true;
	aks_agent_program_opts ao = {
	    .provider = K8S_NAME,
	    .configured = agent,
	    .installed = K8S_AGENT_DEFAULT,
	    .per_call = "one exec per call",
	    .detail = prov->attach_to ? "over one exec stream, placed in the pod's /tmp/.aksandbox"
	                              : "over one exec stream, placed in the pod's /.aksandbox "
	                                "emptyDir",
	    .copied_in = true,
	    .python_session = strcmp(prov->python, "python3") == 0,
	    .resident = k8s_agent_ops.resident,
	    .stateful = &prov->caps.stateful,
	};
	return aks_agent_program_open(host, &ao, &prov->agent, err);
}

static int k8s_init(const aks_host_api *host, const aks_config *config, aks_provider_impl **out,
                    aks_error **err)
{
	if (!aks_ctr_curl_acquire())
		return host->error_set(err, AKS_ERROR, "kubernetes: libcurl failed to initialise");
	aks_provider_impl *prov = calloc(1, sizeof(*prov));
	if (!prov) {
		aks_ctr_curl_release();
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	prov->host = host;
	pthread_mutex_init(&prov->lock, NULL);
	prov->caps = k8s_capabilities;
	int rc = read_config(prov, config, err);
	if (rc != AKS_OK) {
		k8s_fini(prov);
		return rc;
	}
	if (prov->network_policy) {
		/* the operator asserts that the cluster's CNI enforces NetworkPolicy */
		prov->caps.policy_network = true;
		prov->caps.policy_network_allowlist = true;
		/* With the agent, an allowlist is its egress proxy's: the pod's NetworkPolicy
		 * denies all egress, and names, wildcards and ports work, not only CIDRs. */
		prov->caps.egress_proxy = aks_agent_program_enabled(prov->agent);
	}
	/* What a pod is held to beyond the policy, for `aksandbox check`: the pod spec (v1.20)
	 * has no pids field, so a fork bomb is bounded only where the cluster's kubelets set
	 * podPidsLimit (docs/plugins/kubernetes.md, "Process limits"). */
	rc = aks_ctr_desc_init(&prov->desc,
	                       prov->attach_to
	                           ? "the attached pod keeps its own limits"
	                           : "pods without a task limit of ours (the pod spec has no pids "
	                             "field: only the kubelet's podPidsLimit, set per node, bounds "
	                             "a fork bomb, where the cluster sets it)");
	if (rc != AKS_OK) {
		k8s_fini(prov);
		return host->error_set(err, rc, "out of memory");
	}
	*out = prov;
	return AKS_OK;
}

static const aks_capabilities *k8s_instance_caps(const aks_provider_impl *prov)
{
	return &prov->caps;
}

static const char *k8s_instance_description(const aks_provider_impl *prov)
{
	/* the description cache is the only thing that changes */
	return aks_ctr_desc_get((aks_ctr_desc *)&prov->desc,
	                        aks_agent_program_description(prov->agent));
}

/* ---- API helpers ----------------------------------------------------------------------------- */

/* A call bounded by `seconds` from now, keeping the caller's cancellation. */
static aks_call bounded(const aks_provider_impl *prov, const aks_call *call, double seconds)
{
	aks_call c = {AKS_CALL_INIT, .timeout = seconds};
	if (call) {
		c.principal = call->principal;
		c.policy = call->policy;
		c.host_private = call->host_private;
	}
	c.deadline_ms = prov->host->now_ms() + (int64_t)(seconds * 1000.0);
	return c;
}

static char *pod_path(const char *ns, const char *pod)
{
	char *p = NULL;
	if (asprintf(&p, "/api/v1/namespaces/%s/pods%s%s", ns, pod ? "/" : "", pod ? pod : "") < 0)
		return NULL;
	return p;
}

static char *netpol_path(const char *ns, const char *name)
{
	char *p = NULL;
	if (asprintf(&p, "/apis/networking.k8s.io/v1/namespaces/%s/networkpolicies%s%s", ns,
	             name ? "/" : "", name ? name : "") < 0)
		return NULL;
	return p;
}

/* GET the pod: AKS_OK with *pod_json, or AKS_EGONE for a 404. */
static int get_pod(k8s_client *c, const char *ns, const char *pod, const char *id,
                   const aks_call *call, json_object **out, aks_error **err)
{
	const aks_host_api *host = c->prov->host;
	*out = NULL;
	char *path = pod_path(ns, pod);
	if (!path)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	k8s_req r = {.method = "GET", .path = path};
	int rc = k8s_request(c, &r, call, err);
	if (rc == AKS_OK) {
		if (r.status == 404)
			rc = k8s_gone(host, id, "no longer exists", err);
		else if (r.status != 200)
			rc = k8s_api_error(c, &r, AKS_EPROVISION, "cannot read the sandbox pod",
			                   err);
		else if (!(*out = k8s_resp_json(&r)))
			rc = host->error_set(err, AKS_EPROVISION,
			                     "kubernetes: the API server's answer is not JSON");
	}
	k8s_req_free(&r);
	free(path);
	return rc;
}

int k8s_pod_check(aks_sandbox_impl *sb, const aks_call *call, aks_error **err)
{
	json_object *j = NULL;
	int rc = get_pod(sb->client, sb->ns, sb->pod, sb->id, call, &j, err);
	if (rc == AKS_OK && k8s_pod_state_of(j, NULL, 0) == K8S_POD_ENDED)
		rc = k8s_gone(sb->prov->host, sb->id, "is terminating or terminated", err);
	json_object_put(j);
	return rc;
}

/* The reference's running wait: poll every 0.25 s until Running, a terminal
 * phase, or create_timeout. */
static int wait_running(aks_provider_impl *prov, k8s_client *c, const char *ns, const char *pod,
                        const char *id, const aks_call *call, aks_error **err)
{
	const aks_host_api *host = prov->host;
	aks_call bc = bounded(prov, call, prov->create_timeout);
	char detail[512] = "unknown";
	for (;;) {
		json_object *j = NULL;
		aks_error *e = NULL;
		int rc = get_pod(c, ns, pod, id, &bc, &j, &e);
		if (rc == AKS_ETIMEOUT) {
			host->error_free(e);
			break;
		}
		if (rc != AKS_OK) {
			if (err && !*err)
				*err = e;
			else
				host->error_free(e);
			return rc;
		}
		k8s_pod_state state = k8s_pod_state_of(j, detail, sizeof(detail));
		json_object_put(j);
		if (state == K8S_POD_RUNNING)
			return AKS_OK;
		if (state == K8S_POD_ENDED)
			return host->error_set(
			    err, AKS_EPROVISION,
			    "sandbox pod '%s' terminated during provisioning: %s", id, detail);
		if (host->cancelled && call && host->cancelled(call))
			return host->error_set(err, AKS_ECANCELLED, "the call was cancelled");
		if (host->now_ms() + POLL_MS >= bc.deadline_ms)
			break;
		struct timespec ts = {0, POLL_MS * 1000000L};
		nanosleep(&ts, NULL);
	}
	return host->error_set(err, AKS_EPROVISION,
	                       "sandbox pod '%s' did not reach Running within %gs: %s", id,
	                       prov->create_timeout, detail);
}

static int delete_object(k8s_client *c, char *path, const aks_call *call, const char *what,
                         aks_error **err)
{
	if (!path)
		return c->prov->host->error_set(err, AKS_ENOMEM, "out of memory");
	k8s_req r = {.method = "DELETE", .path = path};
	int rc = k8s_request(c, &r, call, err);
	if (rc == AKS_OK && r.status != 200 && r.status != 202 && r.status != 404)
		rc = k8s_api_error(c, &r, AKS_EPROVISION, what, err);
	k8s_req_free(&r);
	free(path);
	return rc;
}

/* ---- handles ----------------------------------------------------------------------------------
 */

static int new_handle(aks_provider_impl *prov, const aks_call *call, k8s_client *c, char *ns,
                      char *pod, bool external, aks_sandbox_impl **out, aks_error **err)
{
	aks_sandbox_impl *sb = calloc(1, sizeof(*sb));
	if (!sb || asprintf(&sb->id, "%s/%s", ns, pod) < 0) {
		free(sb);
		free(ns);
		free(pod);
		return prov->host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	sb->prov = prov;
	sb->ns = ns;
	sb->pod = pod;
	sb->external = external;
	sb->client = c;
	const aks_policy *pol = call ? call->policy : NULL;
	aks_agent_session_opts o = {.id = sb->id,
	                            .cwd = K8S_WORKSPACE,
	                            .egress_proxy = prov->caps.egress_proxy && pol &&
	                                            pol->network_egress == AKS_EGRESS_ALLOWLIST,
	                            .network_allow = pol ? pol->network_allow : NULL};
	int rc = aks_agent_session_new(prov->agent, &k8s_agent_ops, sb, &o, &sb->agent, err);
	if (rc != AKS_OK) {
		free(sb->id);
		free(sb->ns);
		free(sb->pod);
		free(sb);
		return rc;
	}
	*out = sb;
	return AKS_OK;
}

static void k8s_close(aks_sandbox_impl *sb)
{
	if (!sb)
		return;
	aks_agent_session_free(sb->agent); /* the agent sees EOF, kills what it runs, exits */
	k8s_exec_ctx_free(sb);
	free(sb->id);
	free(sb->ns);
	free(sb->pod);
	free(sb);
}

static const char *k8s_id(const aks_sandbox_impl *sb)
{
	return sb->id;
}

/* ---- attach
 * -------------------------------------------------------------------------------------- */

static int attach_pod(aks_provider_impl *prov, const char *sandbox_id, bool external,
                      const aks_call *call, aks_sandbox_impl **out, aks_error **err)
{
	const aks_host_api *host = prov->host;
	char *ns = NULL, *pod = NULL;
	if (!parse_id(prov, sandbox_id, &ns, &pod))
		return k8s_gone(host, sandbox_id ? sandbox_id : "", "no longer exists", err);
	char id[600];
	snprintf(id, sizeof(id), "%s/%s", ns, pod);
	k8s_client *c = NULL;
	int rc = k8s_client_for(prov, call ? call->principal : NULL, &c, err);
	json_object *j = NULL;
	aks_call bc = bounded(prov, call, prov->create_timeout);
	if (rc == AKS_OK)
		rc = get_pod(c, ns, pod, id, &bc, &j, err);
	if (rc == AKS_OK) {
		k8s_pod_state state = k8s_pod_state_of(j, NULL, 0);
		if (state == K8S_POD_ENDED)
			rc = k8s_gone(host, id, "is terminating or terminated", err);
		else if (state == K8S_POD_PENDING)
			rc = wait_running(prov, c, ns, pod, id, call, err);
	}
	json_object_put(j);
	if (rc != AKS_OK) {
		free(ns);
		free(pod);
		return rc;
	}
	rc = new_handle(prov, call, c, ns, pod, external, out, err);
	if (rc == AKS_OK && external) {
		/* executions run in /workspace: make it exist in a pod we did not make */
		const char *argv[] = {"mkdir", "-p", K8S_WORKSPACE, NULL};
		k8s_exec_opts o = {.argv = argv, .workdir = "/"};
		int code = -1;
		aks_error *e = NULL;
		if (k8s_exec(*out, &o, call, &code, &e) != AKS_OK || code != 0)
			host->log(AKS_LOG_WARNING, K8S_NAME, "cannot create %s in pod '%s': %s",
			          K8S_WORKSPACE, (*out)->id,
			          e ? host->error_message(e) : "mkdir failed");
		if (e)
			host->error_free(e);
	}
	return rc;
}

static int k8s_attach(aks_provider_impl *prov, const char *sandbox_id, const aks_call *call,
                      aks_sandbox_impl **out, aks_error **err)
{
	bool external = is_attach_to(prov, sandbox_id);
	return attach_pod(prov, sandbox_id, external, call, out, err);
}

/* ---- create
 * ---------------------------------------------------------------------------------------- */

static void warn_log(void *ctx, const char *msg)
{
	const aks_provider_impl *prov = ctx;
	prov->host->log(AKS_LOG_WARNING, K8S_NAME, "%s", msg);
}

static int random_suffix(char *out)
{
	unsigned char raw[6];
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, raw, sizeof(raw)) : -1;
	if (fd >= 0)
		close(fd);
	if (n != (ssize_t)sizeof(raw))
		return -1;
	for (size_t i = 0; i < sizeof(raw); i++)
		sprintf(out + 2 * i, "%02x", raw[i]);
	return 0;
}

/* The host's labels (call->labels: the owner and the claim, which gc lists by) on an object's
 * metadata, beside ours and the configured ones. */
static void label_object(json_object *obj, const char *const *labels)
{
	json_object *l = json_object_object_get(json_object_object_get(obj, "metadata"), "labels");
	for (const char *const *kv = labels; l && kv && kv[0] && kv[1]; kv += 2)
		json_object_object_add(l, kv[0], json_object_new_string(kv[1]));
}

static int post_json(k8s_client *c, char *path, json_object *body, const aks_call *call,
                     const char *what, aks_error **err)
{
	if (!path)
		return c->prov->host->error_set(err, AKS_ENOMEM, "out of memory");
	k8s_req r = {.method = "POST", .path = path};
	r.body = json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN);
	r.body_len = strlen(r.body);
	int rc = k8s_request(c, &r, call, err);
	if (rc == AKS_OK && r.status != 201 && r.status != 200)
		rc = k8s_api_error(c, &r, AKS_EPROVISION, what, err);
	k8s_req_free(&r);
	free(path);
	return rc;
}

static int k8s_create(aks_provider_impl *prov, const aks_call *call, aks_sandbox_impl **out,
                      aks_error **err)
{
	const aks_host_api *host = prov->host;
	if (prov->attach_to)
		return attach_pod(prov, prov->attach_to, true, call, out, err);
	const aks_policy *p = call ? call->policy : NULL;
	k8s_client *c = NULL;
	int rc = k8s_client_for(prov, call ? call->principal : NULL, &c, err);
	if (rc != AKS_OK)
		return rc;
	char hex[13], name[64], id[400];
	if (random_suffix(hex) < 0)
		return host->error_set(err, AKS_EIO, "kubernetes: cannot read /dev/urandom");
	snprintf(name, sizeof(name), K8S_POD_PREFIX "%s", hex);
	snprintf(id, sizeof(id), "%s/%s", prov->namespace, name);

	/* Both objects are built, and the policy checked, before any API call. */
	k8s_err ke = {0};
	json_object *np = NULL;
	aks_policy through_proxy;
	if (prov->network_policy) {
		/* An allowlist through the agent's proxy: the pod itself may reach nothing. */
		if (p && p->network_egress == AKS_EGRESS_ALLOWLIST && prov->caps.egress_proxy) {
			through_proxy = *p;
			through_proxy.network_egress = AKS_EGRESS_DENY;
			p = &through_proxy;
		}
		np = k8s_netpol_manifest(name, prov->namespace, p, warn_log, prov, &ke);
		if (ke.code != AKS_OK)
			return host->error_set(err, ke.code, "%s", ke.msg);
	}
	k8s_pod_params pp = {.name = name,
	                     .namespace = prov->namespace,
	                     .image = prov->image,
	                     .image_pull_policy = prov->image_pull_policy,
	                     .labels = prov->labels,
	                     .node_selector = prov->node_selector,
	                     .env = prov->env,
	                     .service_account = prov->service_account,
	                     .image_pull_secrets = prov->image_pull_secrets,
	                     .security_context = prov->security_context,
	                     .container_security_context = prov->container_security_context,
	                     .max_lifetime = prov->max_lifetime,
	                     .agent_dir = aks_agent_program_enabled(prov->agent)};
	json_object *pod = k8s_pod_manifest(&pp, p, &ke);
	if (!pod) {
		json_object_put(np);
		return host->error_set(err, ke.code ? ke.code : AKS_ENOMEM, "%s", ke.msg);
	}
	label_object(np, call ? call->labels : NULL);
	label_object(pod, call ? call->labels : NULL);
	aks_call bc = bounded(prov, call, prov->create_timeout);
	aks_error *e = NULL;
	bool with_np = np != NULL;
	if (np) /* before the pod, so the pod never runs unrestricted */
		rc = post_json(c, netpol_path(prov->namespace, NULL), np, &bc,
		               "cannot create the NetworkPolicy", &e);
	if (rc == AKS_OK)
		rc = post_json(c, pod_path(prov->namespace, NULL), pod, &bc,
		               "cannot create the pod", &e);
	json_object_put(np);
	json_object_put(pod);
	if (rc == AKS_OK)
		rc = wait_running(prov, c, prov->namespace, name, id, call, &e);
	if (rc != AKS_OK) {
		/* clean up under our own identity, whatever was made */
		aks_call quick = bounded(prov, NULL, 30);
		k8s_client *own = NULL;
		if (k8s_client_own(prov, &own, NULL) == AKS_OK) {
			if (with_np)
				delete_object(own, netpol_path(prov->namespace, name), &quick,
				              "cannot delete the NetworkPolicy", NULL);
			delete_object(own, pod_path(prov->namespace, name), &quick,
			              "cannot delete the pod", NULL);
		}
		/* cancellation stays itself; anything else failed the provisioning */
		int code = rc == AKS_ECANCELLED ? rc : AKS_EPROVISION;
		const char *msg = e ? host->error_message(e) : "unknown error";
		if (rc == AKS_ECANCELLED || strstr(msg, id))
			host->error_set(err, code, "%s", msg);
		else
			host->error_set(err, code, "creating sandbox pod '%s' failed: %s", id, msg);
		if (e)
			host->error_free(e);
		return code;
	}
	char *ns_copy = strdup(prov->namespace), *pod_copy = strdup(name);
	if (!ns_copy || !pod_copy) {
		free(ns_copy);
		free(pod_copy);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	return new_handle(prov, call, c, ns_copy, pod_copy, false, out, err);
}

/* ---- destroy
 * ------------------------------------------------------------------------------------------ */

/* Deletes a pod we created (and its NetworkPolicy), under the configured
 * identity. Idempotent; never touches a pod aksandbox did not name. */
static int k8s_destroy(aks_provider_impl *prov, const char *sandbox_id, const aks_call *call,
                       aks_error **err)
{
	const aks_host_api *host = prov->host;
	char *ns = NULL, *pod = NULL;
	if (!parse_id(prov, sandbox_id, &ns, &pod))
		return AKS_OK;
	int rc = AKS_OK;
	if (strncmp(pod, K8S_POD_PREFIX, strlen(K8S_POD_PREFIX)) != 0 ||
	    is_attach_to(prov, sandbox_id)) {
		host->log(AKS_LOG_WARNING, K8S_NAME,
		          "destroy: not deleting pod '%s/%s': aksandbox did not create it", ns,
		          pod);
		goto out;
	}
	k8s_client *c = NULL;
	aks_call bc = bounded(prov, call, prov->create_timeout);
	if ((rc = k8s_client_own(prov, &c, err)) != AKS_OK)
		goto out;
	if (prov->network_policy &&
	    (rc = delete_object(c, netpol_path(ns, pod), &bc, "cannot delete the NetworkPolicy",
	                        err)) != AKS_OK)
		goto out;
	rc = delete_object(c, pod_path(ns, pod), &bc, "cannot delete the pod", err);
out:
	free(ns);
	free(pod);
	return rc;
}

/* ---- tables
 * -------------------------------------------------------------------------------------------- */

static const aks_sandbox_ops k8s_sandbox_ops = {
    .struct_version = AKS_SANDBOX_OPS_VERSION,
    .struct_size = sizeof(aks_sandbox_ops),
    .id = k8s_id,
    .execute_code = k8s_op_execute_code,
    .execute_command = k8s_op_execute_command,
    .upload_file = k8s_op_upload_file,
    .download_file = k8s_op_download_file,
    .install_packages = k8s_op_install_packages,
    .close = k8s_close,
};

static const aks_provider_ops k8s_provider_ops = {
    .struct_version = AKS_PROVIDER_OPS_VERSION,
    .struct_size = sizeof(aks_provider_ops),
    .capabilities = &k8s_capabilities,
    .init = k8s_init,
    .fini = k8s_fini,
    .instance_capabilities = k8s_instance_caps,
    .instance_description = k8s_instance_description,
    .create = k8s_create,
    .attach = k8s_attach,
    .destroy = k8s_destroy,
    .list_sandboxes = k8s_list_sandboxes,
    .sandbox = &k8s_sandbox_ops,
};

AKS_PLUGIN_DEFINE(AKS_PLUGIN_PROVIDER, K8S_NAME, K8S_VERSION, "Apache-2.0",
                  "runs code in Kubernetes pods (exec over WebSocket; impersonation; "
                  "NetworkPolicy egress)",
                  k8s_config_keys, &k8s_provider_ops);
