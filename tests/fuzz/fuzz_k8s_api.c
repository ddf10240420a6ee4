/*
 * Fuzz target: what the kubernetes plugin makes of the API server's answers: the error for a
 * non-2xx answer (plugins/kubernetes/k8s_rest.c, k8s_api_error: the Status object's message,
 * or the body, with what a 401 or a 403 means) and a pod's state from a GET of the pod
 * (plugins/kubernetes/k8s_pod.c: running, ended or on its way, and why). The first byte of
 * the input is the HTTP status; the rest is the body. Checks: the error is the code asked
 * for, with a message that names the operation; the pod's state is one of the three, and an
 * ended one is never reported running; the detail is never empty. Aborts when a property
 * fails.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/plugin/host_api.h"
#include "k8s_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

static const long statuses[] = {400, 401, 403, 404, 409, 422, 500, 503};

static void check_api_error(long status, const char *body, size_t len)
{
	static aks_provider_impl prov;
	static char source[] = "kubeconfig /k (context 'c')";
	static char user[] = "alice";
	static char *groups[] = {"dev", NULL};
	prov.host = aks__host_api();
	prov.conn.source = source;
	k8s_client c = {.prov = &prov};
	if (status & 1) { /* an impersonated identity */
		c.user = user;
		c.groups = groups;
	}
	k8s_req r = {.method = "GET", .path = "/api/v1/namespaces/ns/pods/p", .status = status};
	r.resp.data = (char *)body;
	r.resp.len = len;
	aks_error *err = NULL;
	int rc = k8s_api_error(&c, &r, AKS_EPROVISION, "cannot read the sandbox pod", &err);
	CHECK(rc == AKS_EPROVISION && err && aks_error_code(err) == AKS_EPROVISION);
	CHECK(strncmp(aks_error_message(err), "kubernetes: cannot read the sandbox pod: ", 41) ==
	      0);
	aks_error_free(err);
}

static void check_pod_state(const char *body, size_t len)
{
	json_tokener *tok = json_tokener_new();
	CHECK(tok);
	json_object *pod = json_tokener_parse_ex(tok, body, (int)len);
	json_tokener_free(tok);
	char detail[512] = "";
	k8s_pod_state st = k8s_pod_state_of(pod, detail, sizeof(detail));
	CHECK(st == K8S_POD_PENDING || st == K8S_POD_RUNNING || st == K8S_POD_ENDED);
	CHECK(detail[0]);
	CHECK(k8s_pod_state_of(pod, NULL, 0) == st);
	json_object *meta = NULL, *ts = NULL;
	if (json_object_object_get_ex(pod, "metadata", &meta) &&
	    json_object_object_get_ex(meta, "deletionTimestamp", &ts) && ts)
		CHECK(st == K8S_POD_ENDED);
	json_object_put(pod);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > (1u << 20))
		return 0;
	/* aks_buf keeps a NUL past the body, and so does this copy */
	size_t len = size - 1;
	char *body = malloc(len + 1);
	CHECK(body);
	memcpy(body, data + 1, len);
	body[len] = '\0';
	check_api_error(statuses[data[0] % (sizeof(statuses) / sizeof(statuses[0]))], body, len);
	check_pod_state(body, len);
	free(body);
	return 0;
}
