/*
 * plugins/kubernetes/k8s_manifest.c - the objects we create, built before
 * any API call (so a bad overlay or an unenforceable policy fails early):
 *
 *  - the Pod: one container `sandbox` running `sleep infinity` as PID 1, with
 *    the hardened security context (no privilege escalation, RuntimeDefault
 *    seccomp, every capability dropped) overlaid key by key with
 *    container_security_context; requests = limits from the policy's cpu and
 *    memory; under a filesystem policy a read-only root (forced last, so the
 *    overlay cannot undo it) and a writable emptyDir at /workspace;
 *  - the NetworkPolicy of the policy's egress: deny is `egress: []`, an
 *    allowlist is one rule over its CIDRs (domains cannot be expressed:
 *    refused under strict, dropped with a warning otherwise).
 *
 * Unlike the original, activeDeadlineSeconds is never derived from the idle
 * timeout (it counts from pod start and would kill a session in use): it is
 * the separate max_lifetime key, 0 = none, and idle pods are reclaimed by the
 * core's idle machinery.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k8s_pure.h"

bool k8s_fs_policy(const aks_policy *p)
{
	return p && ((p->fs_allow_read && p->fs_allow_read[0]) ||
	             (p->fs_allow_write && p->fs_allow_write[0]));
}

void k8s_format_cpu(double v, char *out, size_t outlen)
{
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(out, outlen, "%.*g", prec, v);
		if (strtod(out, NULL) == v)
			break;
	}
	if (!strpbrk(out, ".enia")) { /* an integer: Python writes 2.0 */
		size_t n = strlen(out);
		if (n + 3 <= outlen)
			memcpy(out + n, ".0", 3);
	}
}

static json_object *str(const char *s)
{
	return json_object_new_string(s);
}

static void add(json_object *o, const char *k, json_object *v)
{
	json_object_object_add(o, k, v);
}

static json_object *managed_labels(void)
{
	json_object *l = json_object_new_object();
	add(l, "app.kubernetes.io/managed-by", str(K8S_MANAGED_BY));
	add(l, K8S_LABEL_SANDBOX, str("true"));
	return l;
}

static json_object *map_json(const char *const *kv)
{
	json_object *m = json_object_new_object();
	for (; kv && kv[0] && kv[1]; kv += 2)
		add(m, kv[0], str(kv[1]));
	return m;
}

/* An overlay given as JSON text: NULL text or {} is "none" (*out NULL). */
static int overlay(const char *text, const char *key, json_object **out, k8s_err *e)
{
	*out = NULL;
	if (!text || !*text || strcmp(text, "null") == 0)
		return AKS_OK;
	json_object *o = json_tokener_parse(text);
	if (!o || !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		return k8s_err_set(e, AKS_ECONFIG, "kubernetes: %s must be a mapping", key);
	}
	if (json_object_object_length(o) == 0) {
		json_object_put(o);
		return AKS_OK;
	}
	*out = o;
	return AKS_OK;
}

static json_object *container_security_context(json_object *over, bool read_only)
{
	json_object *sc = json_object_new_object();
	add(sc, "allowPrivilegeEscalation", json_object_new_boolean(0));
	json_object *seccomp = json_object_new_object();
	add(seccomp, "type", str("RuntimeDefault"));
	add(sc, "seccompProfile", seccomp);
	json_object *caps = json_object_new_object();
	json_object *drop = json_object_new_array();
	json_object_array_add(drop, str("ALL"));
	add(caps, "drop", drop);
	add(sc, "capabilities", caps);
	if (over) {
		json_object_object_foreach(over, k, v)
		{
			add(sc, k, json_object_get(v));
		}
	}
	if (read_only) /* enforcement wins over the overlay */
		add(sc, "readOnlyRootFilesystem", json_object_new_boolean(1));
	return sc;
}

/*
 * The pod's emptyDir volumes and the container's mounts of them: /workspace under a
 * filesystem policy, /.aksandbox for the agent, and under a filesystem policy read-only
 * covers over the runtime's world-writable mounts that a read-only root leaves writable
 * (/dev/shm, a 64 MB tmpfs, and /dev/mqueue): nothing but the allowed paths may take a
 * write. /dev itself stays the runtime's tmpfs, writable by root only: a pod spec has no
 * way to make it read-only that keeps the device nodes (docs/plugins/kubernetes.md).
 */
static void add_volumes(json_object *spec, json_object *c, bool fs, bool agent_dir)
{
	static const struct {
		const char *name, *path;
		bool read_only, fs_only;
	} volumes[] = {
	    {"workspace", K8S_WORKSPACE, false, true},
	    {"aksandbox", K8S_AGENT_DIR, false, false},
	    {"no-dev-shm", "/dev/shm", true, true},
	    {"no-dev-mqueue", "/dev/mqueue", true, true},
	};
	json_object *mounts = json_object_new_array(), *vols = json_object_new_array();
	for (size_t i = 0; i < sizeof(volumes) / sizeof(*volumes); i++) {
		bool wanted = volumes[i].fs_only ? fs : agent_dir;
		if (!wanted)
			continue;
		json_object *m = json_object_new_object();
		add(m, "name", str(volumes[i].name));
		add(m, "mountPath", str(volumes[i].path));
		if (volumes[i].read_only)
			add(m, "readOnly", json_object_new_boolean(1));
		json_object_array_add(mounts, m);
		json_object *v = json_object_new_object();
		add(v, "name", str(volumes[i].name));
		add(v, "emptyDir", json_object_new_object());
		json_object_array_add(vols, v);
	}
	if (json_object_array_length(mounts)) {
		add(c, "volumeMounts", mounts);
		add(spec, "volumes", vols);
	} else {
		json_object_put(mounts);
		json_object_put(vols);
	}
}

json_object *k8s_pod_manifest(const k8s_pod_params *pp, const aks_policy *pol, k8s_err *e)
{
	json_object *pod_sc = NULL, *ctr_sc = NULL;
	if (overlay(pp->security_context, "security_context", &pod_sc, e) != AKS_OK)
		return NULL;
	if (overlay(pp->container_security_context, "container_security_context", &ctr_sc, e) !=
	    AKS_OK) {
		json_object_put(pod_sc);
		return NULL;
	}
	bool fs = k8s_fs_policy(pol);
	json_object *pod = json_object_new_object();
	add(pod, "apiVersion", str("v1"));
	add(pod, "kind", str("Pod"));
	json_object *meta = json_object_new_object();
	add(meta, "name", str(pp->name));
	add(meta, "namespace", str(pp->namespace));
	json_object *labels = managed_labels();
	for (const char *const *kv = pp->labels; kv && kv[0] && kv[1]; kv += 2)
		add(labels, kv[0], str(kv[1]));     /* config wins */
	add(labels, K8S_LABEL_NAME, str(pp->name)); /* always last: the selector's */
	add(meta, "labels", labels);
	add(pod, "metadata", meta);

	json_object *spec = json_object_new_object();
	add(spec, "restartPolicy", str("Never"));
	if (pp->max_lifetime > 0)
		add(spec, "activeDeadlineSeconds", json_object_new_int64(pp->max_lifetime));
	add(spec, "terminationGracePeriodSeconds", json_object_new_int(5));

	json_object *c = json_object_new_object();
	add(c, "name", str("sandbox"));
	add(c, "image", str(pp->image));
	if (pp->image_pull_policy && *pp->image_pull_policy)
		add(c, "imagePullPolicy", str(pp->image_pull_policy));
	json_object *cmd = json_object_new_array();
	json_object_array_add(cmd, str("sleep"));
	json_object_array_add(cmd, str("infinity"));
	add(c, "command", cmd);
	add(c, "workingDir", str(K8S_WORKSPACE));
	add(c, "securityContext", container_security_context(ctr_sc, fs));
	if (pp->env && pp->env[0]) {
		json_object *env = json_object_new_array();
		for (const char *const *kv = pp->env; kv[0] && kv[1]; kv += 2) {
			json_object *v = json_object_new_object();
			add(v, "name", str(kv[0]));
			add(v, "value", str(kv[1]));
			json_object_array_add(env, v);
		}
		add(c, "env", env);
	}
	if (pol && (pol->cpu > 0 || pol->memory_mb > 0)) {
		json_object *req = json_object_new_object();
		if (pol->cpu > 0) {
			char cpu[64];
			k8s_format_cpu(pol->cpu, cpu, sizeof(cpu));
			add(req, "cpu", str(cpu));
		}
		if (pol->memory_mb > 0) {
			char mem[64];
			snprintf(mem, sizeof(mem), "%lldMi", (long long)pol->memory_mb);
			add(req, "memory", str(mem));
		}
		json_object *res = json_object_new_object();
		add(res, "requests", req);
		json_object *lim = NULL;
		json_object_deep_copy(req, &lim, NULL);
		add(res, "limits", lim);
		add(c, "resources", res);
	}
	json_object *containers = json_object_new_array();
	json_object_array_add(containers, c);
	add(spec, "containers", containers);
	add_volumes(spec, c, fs, pp->agent_dir);
	if (pp->service_account && *pp->service_account)
		add(spec, "serviceAccountName", str(pp->service_account));
	if (pp->image_pull_secrets && pp->image_pull_secrets[0]) {
		json_object *a = json_object_new_array();
		for (const char *const *s = pp->image_pull_secrets; *s; s++) {
			json_object *ref = json_object_new_object();
			add(ref, "name", str(*s));
			json_object_array_add(a, ref);
		}
		add(spec, "imagePullSecrets", a);
	}
	if (pp->node_selector && pp->node_selector[0])
		add(spec, "nodeSelector", map_json(pp->node_selector));
	if (pod_sc)
		add(spec, "securityContext", pod_sc);
	add(pod, "spec", spec);
	json_object_put(ctr_sc);
	return pod;
}

/* ---- NetworkPolicy ----------------------------------------------------------------- */

static bool parse_prefix(const char *s, int max, int *out)
{
	if (!*s || strlen(s) > 3)
		return false;
	int v = 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		v = v * 10 + (*s - '0');
	}
	if (v > max)
		return false;
	*out = v;
	return true;
}

bool k8s_cidr_normalize(const char *s, char *out, size_t outlen)
{
	char addr[64];
	const char *slash = strchr(s, '/');
	size_t n = slash ? (size_t)(slash - s) : strlen(s);
	if (!n || n >= sizeof(addr))
		return false;
	memcpy(addr, s, n);
	addr[n] = '\0';
	unsigned char bytes[16];
	int family = strchr(addr, ':') ? AF_INET6 : AF_INET;
	int bits = family == AF_INET6 ? 128 : 32;
	if (inet_pton(family, addr, bytes) != 1)
		return false;
	int prefix = bits;
	if (slash && !parse_prefix(slash + 1, bits, &prefix))
		return false;
	/* strict=False: the host bits are cleared */
	for (int i = 0; i < bits / 8; i++) {
		int keep = prefix - i * 8;
		if (keep <= 0)
			bytes[i] = 0;
		else if (keep < 8)
			bytes[i] &= (unsigned char)(0xff << (8 - keep));
	}
	char text[INET6_ADDRSTRLEN];
	if (!inet_ntop(family, bytes, text, sizeof(text)))
		return false;
	return snprintf(out, outlen, "%s/%d", text, prefix) < (int)outlen;
}

json_object *k8s_netpol_manifest(const char *name, const char *namespace, const aks_policy *pol,
                                 k8s_warn_fn warn, void *warn_ctx, k8s_err *e)
{
	if (!pol || pol->network_egress == AKS_EGRESS_ALLOW)
		return NULL;
	json_object *egress = json_object_new_array();
	if (pol->network_egress == AKS_EGRESS_ALLOWLIST) {
		json_object *to = json_object_new_array();
		aks_buf domains = {0};
		for (const char *const *a = pol->network_allow; a && *a; a++) {
			char cidr[80];
			if (k8s_cidr_normalize(*a, cidr, sizeof(cidr))) {
				json_object *peer = json_object_new_object(),
				            *blk = json_object_new_object();
				add(blk, "cidr", str(cidr));
				add(peer, "ipBlock", blk);
				json_object_array_add(to, peer);
				continue;
			}
			/* Python's repr of the list: ['a', 'b'] */
			if (aks__buf_printf(&domains, "%s'%s'", domains.len ? ", " : "", *a) !=
			    AKS_OK)
				break;
		}
		if (domains.len && pol->strict) {
			k8s_err_set(
			    e, AKS_EPOLICY,
			    "NetworkPolicy cannot enforce domain-name egress entries [%s]; use "
			    "CIDRs, or set strict=false",
			    domains.data);
			aks__buf_free(&domains);
			json_object_put(to);
			json_object_put(egress);
			return NULL;
		}
		if (domains.len && warn) {
			char msg[sizeof(e->msg)];
			snprintf(
			    msg, sizeof(msg),
			    "NetworkPolicy cannot enforce domain-name egress entries [%s]; they "
			    "are dropped (strict=false)",
			    domains.data);
			warn(warn_ctx, msg);
		}
		aks__buf_free(&domains);
		if (json_object_array_length(to) > 0) {
			json_object *rule = json_object_new_object();
			add(rule, "to", to);
			json_object_array_add(egress, rule);
		} else {
			json_object_put(to); /* no CIDR at all: egress [] denies everything */
		}
	}
	json_object *np = json_object_new_object();
	add(np, "apiVersion", str("networking.k8s.io/v1"));
	add(np, "kind", str("NetworkPolicy"));
	json_object *meta = json_object_new_object();
	add(meta, "name", str(name));
	add(meta, "namespace", str(namespace));
	add(meta, "labels", managed_labels());
	add(np, "metadata", meta);
	json_object *spec = json_object_new_object(), *sel = json_object_new_object(),
	            *ml = json_object_new_object();
	add(ml, K8S_LABEL_NAME, str(name));
	add(sel, "matchLabels", ml);
	add(spec, "podSelector", sel);
	json_object *types = json_object_new_array();
	json_object_array_add(types, str("Egress"));
	add(spec, "policyTypes", types);
	add(spec, "egress", egress);
	add(np, "spec", spec);
	return np;
}
