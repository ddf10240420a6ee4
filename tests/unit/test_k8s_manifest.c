/*
 * tests/unit/test_k8s_manifest.c - the Pod and NetworkPolicy objects the
 * kubernetes plugin creates, compared with the exact JSON expected (the
 * reference's shape; activeDeadlineSeconds only from max_lifetime).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "k8s_pure.h"

/* Equal as JSON values, and with the same key order (what we send). */
static void assert_json(json_object *got, const char *expected)
{
	json_object *want = json_tokener_parse(expected);
	if (!want)
		fail_msg("bad expected JSON: %s", expected);
	const char *g = json_object_to_json_string_ext(got, JSON_C_TO_STRING_PLAIN);
	const char *w = json_object_to_json_string_ext(want, JSON_C_TO_STRING_PLAIN);
	if (!json_object_equal(got, want) || strcmp(g, w) != 0)
		fail_msg("JSON differs:\n got: %s\nwant: %s", g, w);
	json_object_put(want);
}

static aks_policy policy(void)
{
	aks_policy p = {.struct_version = AKS_POLICY_VERSION, .struct_size = sizeof(aks_policy)};
	return p;
}

#define HARDENED                                                                                   \
	"\"allowPrivilegeEscalation\":false,\"seccompProfile\":{\"type\":\"RuntimeDefault\"},"     \
	"\"capabilities\":{\"drop\":[\"ALL\"]}"

static void test_minimal_pod(void **state)
{
	(void)state;
	k8s_pod_params pp = {
	    .name = "ak-sandbox-0123456789ab", .namespace = "default", .image = "python:3.12-slim"};
	k8s_err e = {0};
	json_object *pod = k8s_pod_manifest(&pp, NULL, &e);
	assert_non_null(pod);
	assert_json(pod,
	            "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":"
	            "\"ak-sandbox-0123456789ab\",\"namespace\":\"default\",\"labels\":{"
	            "\"app.kubernetes.io/managed-by\":\"agent-kernel\",\"agentkernel.io/sandbox\":"
	            "\"true\",\"agentkernel.io/sandbox-name\":\"ak-sandbox-0123456789ab\"}},"
	            "\"spec\":{\"restartPolicy\":\"Never\",\"terminationGracePeriodSeconds\":5,"
	            "\"containers\":[{\"name\":\"sandbox\",\"image\":\"python:3.12-slim\","
	            "\"command\":[\"sleep\",\"infinity\"],\"workingDir\":\"/workspace\","
	            "\"securityContext\":{" HARDENED "}}]}}");
	json_object_put(pod);
}

static void test_full_pod(void **state)
{
	(void)state;
	const char *labels[] = {"team",
	                        "ml",
	                        "agentkernel.io/sandbox",
	                        "overridden",
	                        "agentkernel.io/sandbox-name",
	                        "cannot-override",
	                        NULL};
	const char *nodesel[] = {"pool", "sandboxes", NULL};
	const char *env[] = {"A", "1", "B", "two words", NULL};
	const char *secrets[] = {"regcred", "other", NULL};
	const char *rw[] = {"/workspace", NULL};
	k8s_pod_params pp = {
	    .name = "ak-sandbox-aaaaaaaaaaaa",
	    .namespace = "sb",
	    .image = "local/python:1",
	    .image_pull_policy = "Never",
	    .labels = labels,
	    .node_selector = nodesel,
	    .env = env,
	    .service_account = "runner",
	    .image_pull_secrets = secrets,
	    .security_context = "{\"runAsUser\":1000,\"fsGroup\":2000}",
	    /* key by key: replaces capabilities, adds runAsNonRoot, and cannot turn the
	     * read-only root off under a filesystem policy */
	    .container_security_context = "{\"capabilities\":{\"drop\":[\"ALL\"],\"add\":"
	                                  "[\"NET_BIND_SERVICE\"]},\"runAsNonRoot\":true,"
	                                  "\"readOnlyRootFilesystem\":false}",
	    .max_lifetime = 86400,
	    .agent_dir = true,
	};
	aks_policy p = policy();
	p.cpu = 1.5;
	p.memory_mb = 512;
	p.fs_allow_write = rw;
	k8s_err e = {0};
	json_object *pod = k8s_pod_manifest(&pp, &p, &e);
	assert_non_null(pod);
	assert_json(
	    pod,
	    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":"
	    "\"ak-sandbox-aaaaaaaaaaaa\",\"namespace\":\"sb\",\"labels\":{"
	    "\"app.kubernetes.io/managed-by\":\"agent-kernel\",\"agentkernel.io/sandbox\":"
	    "\"overridden\",\"team\":\"ml\",\"agentkernel.io/sandbox-name\":"
	    "\"ak-sandbox-aaaaaaaaaaaa\"}},"
	    "\"spec\":{\"restartPolicy\":\"Never\",\"activeDeadlineSeconds\":86400,"
	    "\"terminationGracePeriodSeconds\":5,"
	    "\"containers\":[{\"name\":\"sandbox\",\"image\":\"local/python:1\","
	    "\"imagePullPolicy\":\"Never\","
	    "\"command\":[\"sleep\",\"infinity\"],\"workingDir\":\"/workspace\","
	    "\"securityContext\":{\"allowPrivilegeEscalation\":false,\"seccompProfile\":{\"type\":"
	    "\"RuntimeDefault\"},\"capabilities\":{\"drop\":[\"ALL\"],\"add\":["
	    "\"NET_BIND_SERVICE\"]},\"runAsNonRoot\":true,\"readOnlyRootFilesystem\":true},"
	    "\"env\":[{\"name\":\"A\",\"value\":\"1\"},{\"name\":\"B\",\"value\":\"two words\"}],"
	    "\"resources\":{\"requests\":{\"cpu\":\"1.5\",\"memory\":\"512Mi\"},\"limits\":{"
	    "\"cpu\":\"1.5\",\"memory\":\"512Mi\"}},"
	    "\"volumeMounts\":[{\"name\":\"workspace\",\"mountPath\":\"/workspace\"},"
	    "{\"name\":\"aksandbox\",\"mountPath\":\"/.aksandbox\"},"
	    "{\"name\":\"no-dev-shm\",\"mountPath\":\"/dev/shm\",\"readOnly\":true},"
	    "{\"name\":\"no-dev-mqueue\",\"mountPath\":\"/dev/mqueue\",\"readOnly\":true}]}],"
	    "\"volumes\":[{\"name\":\"workspace\",\"emptyDir\":{}},"
	    "{\"name\":\"aksandbox\",\"emptyDir\":{}},{\"name\":\"no-dev-shm\",\"emptyDir\":{}},"
	    "{\"name\":\"no-dev-mqueue\",\"emptyDir\":{}}],"
	    "\"serviceAccountName\":\"runner\","
	    "\"imagePullSecrets\":[{\"name\":\"regcred\"},{\"name\":\"other\"}],"
	    "\"nodeSelector\":{\"pool\":\"sandboxes\"},"
	    "\"securityContext\":{\"runAsUser\":1000,\"fsGroup\":2000}}}");
	json_object_put(pod);
}

/* With the agent and no filesystem policy: its emptyDir alone, the root left writable. */
static void test_agent_dir(void **state)
{
	(void)state;
	k8s_pod_params pp = {.name = "ak-sandbox-0123456789ab",
	                     .namespace = "default",
	                     .image = "python:3.12-slim",
	                     .agent_dir = true};
	k8s_err e = {0};
	json_object *pod = k8s_pod_manifest(&pp, NULL, &e);
	assert_non_null(pod);
	assert_json(pod,
	            "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":"
	            "\"ak-sandbox-0123456789ab\",\"namespace\":\"default\",\"labels\":{"
	            "\"app.kubernetes.io/managed-by\":\"agent-kernel\",\"agentkernel.io/sandbox\":"
	            "\"true\",\"agentkernel.io/sandbox-name\":\"ak-sandbox-0123456789ab\"}},"
	            "\"spec\":{\"restartPolicy\":\"Never\",\"terminationGracePeriodSeconds\":5,"
	            "\"containers\":[{\"name\":\"sandbox\",\"image\":\"python:3.12-slim\","
	            "\"command\":[\"sleep\",\"infinity\"],\"workingDir\":\"/workspace\","
	            "\"securityContext\":{" HARDENED "},"
	            "\"volumeMounts\":[{\"name\":\"aksandbox\",\"mountPath\":\"/.aksandbox\"}]}],"
	            "\"volumes\":[{\"name\":\"aksandbox\",\"emptyDir\":{}}]}}");
	json_object_put(pod);
}

static void test_resources_alone(void **state)
{
	(void)state;
	k8s_pod_params pp = {.name = "n",
	                     .namespace = "ns",
	                     .image = "i",
	                     .security_context = "{}",
	                     .container_security_context = "{}"};
	aks_policy p = policy();
	p.cpu = 2;
	k8s_err e = {0};
	json_object *pod = k8s_pod_manifest(&pp, &p, &e);
	json_object *spec = NULL, *cs = NULL;
	assert_true(json_object_object_get_ex(pod, "spec", &spec));
	/* {} overlays are none: no pod securityContext */
	assert_false(json_object_object_get_ex(spec, "securityContext", NULL));
	assert_false(json_object_object_get_ex(spec, "volumes", NULL));
	assert_false(json_object_object_get_ex(spec, "activeDeadlineSeconds", NULL));
	assert_true(json_object_object_get_ex(spec, "containers", &cs));
	json_object *c = json_object_array_get_idx(cs, 0), *res = NULL;
	assert_true(json_object_object_get_ex(c, "resources", &res));
	assert_json(res, "{\"requests\":{\"cpu\":\"2.0\"},\"limits\":{\"cpu\":\"2.0\"}}");
	json_object_put(pod);

	p.cpu = 0;
	p.memory_mb = 2048;
	pod = k8s_pod_manifest(&pp, &p, &e);
	json_object_object_get_ex(pod, "spec", &spec);
	json_object_object_get_ex(spec, "containers", &cs);
	json_object_object_get_ex(json_object_array_get_idx(cs, 0), "resources", &res);
	assert_json(res,
	            "{\"requests\":{\"memory\":\"2048Mi\"},\"limits\":{\"memory\":\"2048Mi\"}}");
	json_object_put(pod);
}

static void test_bad_overlay(void **state)
{
	(void)state;
	k8s_pod_params pp = {
	    .name = "n", .namespace = "ns", .image = "i", .container_security_context = "[1,2]"};
	k8s_err e = {0};
	assert_null(k8s_pod_manifest(&pp, NULL, &e));
	assert_int_equal(e.code, AKS_ECONFIG);
	assert_string_equal(e.msg, "kubernetes: container_security_context must be a mapping");
}

static void test_cpu_format(void **state)
{
	(void)state;
	char b[64];
	k8s_format_cpu(1.5, b, sizeof(b));
	assert_string_equal(b, "1.5");
	k8s_format_cpu(0.25, b, sizeof(b));
	assert_string_equal(b, "0.25");
	k8s_format_cpu(1, b, sizeof(b));
	assert_string_equal(b, "1.0");
	k8s_format_cpu(0.1, b, sizeof(b));
	assert_string_equal(b, "0.1");
	k8s_format_cpu(16, b, sizeof(b));
	assert_string_equal(b, "16.0");
}

#define NP_HEAD                                                                                    \
	"{\"apiVersion\":\"networking.k8s.io/v1\",\"kind\":\"NetworkPolicy\",\"metadata\":{"       \
	"\"name\":\"ak-sandbox-0123456789ab\",\"namespace\":\"sb\",\"labels\":{"                   \
	"\"app.kubernetes.io/managed-by\":\"agent-kernel\",\"agentkernel.io/sandbox\":\"true\"}}," \
	"\"spec\":{\"podSelector\":{\"matchLabels\":{\"agentkernel.io/sandbox-name\":"             \
	"\"ak-sandbox-0123456789ab\"}},\"policyTypes\":[\"Egress\"],"

static void test_netpol_none(void **state)
{
	(void)state;
	aks_policy p = policy();
	k8s_err e = {0};
	assert_null(k8s_netpol_manifest("x", "y", &p, NULL, NULL, &e));
	assert_int_equal(e.code, AKS_OK);
	assert_null(k8s_netpol_manifest("x", "y", NULL, NULL, NULL, &e));
	assert_int_equal(e.code, AKS_OK);
}

static void test_netpol_deny(void **state)
{
	(void)state;
	aks_policy p = policy();
	p.network_egress = AKS_EGRESS_DENY;
	k8s_err e = {0};
	json_object *np = k8s_netpol_manifest("ak-sandbox-0123456789ab", "sb", &p, NULL, NULL, &e);
	assert_non_null(np);
	assert_json(np, NP_HEAD "\"egress\":[]}}");
	json_object_put(np);
}

static void test_netpol_allowlist(void **state)
{
	(void)state;
	const char *allow[] = {"10.0.0.0/8", "192.168.1.7", "172.16.5.4/12", "2001:DB8::1/32",
	                       NULL};
	aks_policy p = policy();
	p.network_egress = AKS_EGRESS_ALLOWLIST;
	p.network_allow = allow;
	p.strict = true;
	k8s_err e = {0};
	json_object *np = k8s_netpol_manifest("ak-sandbox-0123456789ab", "sb", &p, NULL, NULL, &e);
	assert_non_null(np);
	assert_json(np, NP_HEAD "\"egress\":[{\"to\":[{\"ipBlock\":{\"cidr\":\"10.0.0.0/8\"}},"
	                        "{\"ipBlock\":{\"cidr\":\"192.168.1.7/32\"}},"
	                        "{\"ipBlock\":{\"cidr\":\"172.16.0.0/12\"}},"
	                        "{\"ipBlock\":{\"cidr\":\"2001:db8::/32\"}}]}]}}");
	json_object_put(np);
}

static int warnings;
static char last_warning[1024];
static void on_warn(void *ctx, const char *msg)
{
	(void)ctx;
	warnings++;
	snprintf(last_warning, sizeof(last_warning), "%s", msg);
}

static void test_netpol_domains(void **state)
{
	(void)state;
	const char *allow[] = {"pypi.org", "10.1.0.0/16", "files.pythonhosted.org", "10.0.0.0/33",
	                       NULL};
	aks_policy p = policy();
	p.network_egress = AKS_EGRESS_ALLOWLIST;
	p.network_allow = allow;
	p.strict = true;
	k8s_err e = {0};
	assert_null(k8s_netpol_manifest("ak-sandbox-0123456789ab", "sb", &p, on_warn, NULL, &e));
	assert_int_equal(e.code, AKS_EPOLICY);
	assert_string_equal(e.msg, "NetworkPolicy cannot enforce domain-name egress entries "
	                           "['pypi.org', 'files.pythonhosted.org', '10.0.0.0/33']; use "
	                           "CIDRs, or set strict=false");
	assert_int_equal(warnings, 0);

	/* not strict: dropped with a warning, the CIDR kept */
	p.strict = false;
	e.code = AKS_OK;
	json_object *np =
	    k8s_netpol_manifest("ak-sandbox-0123456789ab", "sb", &p, on_warn, NULL, &e);
	assert_non_null(np);
	assert_int_equal(warnings, 1);
	assert_non_null(strstr(last_warning, "'pypi.org'"));
	assert_json(np,
	            NP_HEAD "\"egress\":[{\"to\":[{\"ipBlock\":{\"cidr\":\"10.1.0.0/16\"}}]}]}}");
	json_object_put(np);

	/* only domains: egress [] denies everything */
	const char *only[] = {"example.com", NULL};
	p.network_allow = only;
	np = k8s_netpol_manifest("ak-sandbox-0123456789ab", "sb", &p, on_warn, NULL, &e);
	assert_json(np, NP_HEAD "\"egress\":[]}}");
	json_object_put(np);
}

static void test_cidr(void **state)
{
	(void)state;
	char b[80];
	assert_true(k8s_cidr_normalize("0.0.0.0/0", b, sizeof(b)));
	assert_string_equal(b, "0.0.0.0/0");
	assert_true(k8s_cidr_normalize("10.9.8.7/20", b, sizeof(b)));
	assert_string_equal(b, "10.9.0.0/20");
	assert_true(k8s_cidr_normalize("::/0", b, sizeof(b)));
	assert_string_equal(b, "::/0");
	assert_false(k8s_cidr_normalize("10.0.0.0/", b, sizeof(b)));
	assert_false(k8s_cidr_normalize("10.0.0/8", b, sizeof(b)));
	assert_false(k8s_cidr_normalize("10.0.0.0/-1", b, sizeof(b)));
	assert_false(k8s_cidr_normalize("/8", b, sizeof(b)));
	assert_false(k8s_cidr_normalize("fe80::1/129", b, sizeof(b)));
}

/* The reference's path rule (shared with docker): lexical, under /workspace. */
static void test_safe_path(void **state)
{
	(void)state;
	static const struct {
		const char *in, *out;
	} ok[] = {{"a.txt", "/workspace/a.txt"},
	          {"/a/b", "/workspace/a/b"},
	          {"a/./b/../c", "/workspace/a/c"},
	          {"//x//y/", "/workspace/x/y"},
	          {"/etc/passwd", "/workspace/etc/passwd"},
	          {"", "/workspace"},
	          {"a/..", "/workspace"}};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		char *p = NULL;
		k8s_err e = {0};
		assert_int_equal(k8s_safe_path(ok[i].in, &p, &e), AKS_OK);
		assert_string_equal(p, ok[i].out);
		free(p);
	}
	static const char *bad[] = {"..", "../x", "a/../../x", "/../workspace2",
	                            "a/../../workspace/../etc"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *p = NULL;
		k8s_err e = {0};
		assert_int_equal(k8s_safe_path(bad[i], &p, &e), AKS_EPOLICY);
		assert_null(p);
		assert_non_null(strstr(e.msg, "escapes /workspace"));
	}
}

/* A pod's state and detail, from a GET of the pod as the API server could send it. */
static k8s_pod_state pod_state(const char *json, char *detail, size_t len)
{
	json_object *pod = json_tokener_parse(json);
	k8s_pod_state st = k8s_pod_state_of(pod, detail, len);
	json_object_put(pod);
	return st;
}

static void test_pod_state(void **state)
{
	(void)state;
	char d[256];
	assert_int_equal(pod_state("{\"status\":{\"phase\":\"Running\"}}", d, sizeof(d)),
	                 K8S_POD_RUNNING);
	assert_string_equal(d, "Running");
	/* the container's waiting reason, with its message */
	assert_int_equal(pod_state("{\"status\":{\"phase\":\"Pending\",\"containerStatuses\":[{"
	                           "\"state\":{\"waiting\":{\"reason\":\"ImagePullBackOff\","
	                           "\"message\":\"Back-off\"}}}]}}",
	                           d, sizeof(d)),
	                 K8S_POD_PENDING);
	assert_string_equal(d, "ImagePullBackOff: Back-off");
	/* ContainerCreating says nothing: the last condition's message */
	assert_int_equal(
	    pod_state("{\"status\":{\"phase\":\"Pending\",\"containerStatuses\":[{"
	              "\"state\":{\"waiting\":{\"reason\":\"ContainerCreating\"}}}],"
	              "\"conditions\":[{\"message\":\"a\"},{\"message\":\"0/1 nodes\"}]}}",
	              d, sizeof(d)),
	    K8S_POD_PENDING);
	assert_string_equal(d, "0/1 nodes");
	/* being deleted or terminated: ended, even while Running */
	assert_int_equal(pod_state("{\"metadata\":{\"deletionTimestamp\":\"2024-01-01T00:00:00Z\"},"
	                           "\"status\":{\"phase\":\"Running\"}}",
	                           NULL, 0),
	                 K8S_POD_ENDED);
	assert_int_equal(pod_state("{\"status\":{\"phase\":\"Succeeded\"}}", NULL, 0),
	                 K8S_POD_ENDED);
	assert_int_equal(pod_state("{\"status\":{\"phase\":\"Failed\"}}", NULL, 0), K8S_POD_ENDED);
	/* members of another type (json-c aborts on an array call on a non-array) */
	assert_int_equal(pod_state("{\"status\":{\"phase\":7,\"containerStatuses\":{\"a\":1},"
	                           "\"conditions\":\"none\"}}",
	                           d, sizeof(d)),
	                 K8S_POD_PENDING);
	assert_string_equal(d, "unknown");
	assert_int_equal(pod_state("[1,2]", d, sizeof(d)), K8S_POD_PENDING);
	assert_string_equal(d, "unknown");
	assert_int_equal(pod_state("{\"status\":{\"phase\":\"\"}}", d, sizeof(d)), K8S_POD_PENDING);
	assert_string_equal(d, "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_minimal_pod),     cmocka_unit_test(test_full_pod),
	    cmocka_unit_test(test_resources_alone), cmocka_unit_test(test_bad_overlay),
	    cmocka_unit_test(test_cpu_format),      cmocka_unit_test(test_netpol_none),
	    cmocka_unit_test(test_netpol_deny),     cmocka_unit_test(test_netpol_allowlist),
	    cmocka_unit_test(test_netpol_domains),  cmocka_unit_test(test_cidr),
	    cmocka_unit_test(test_safe_path),       cmocka_unit_test(test_agent_dir),
	    cmocka_unit_test(test_pod_state),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
