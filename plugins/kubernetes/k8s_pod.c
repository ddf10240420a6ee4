/*
 * plugins/kubernetes/k8s_pod.c - what the API server says about a pod: whether it runs, has
 * ended or is still on its way, and what keeps it from running (pure; see k8s_pure.h).
 * The object is whatever the server sent: every member may be missing or of another type.
 */
#include <stdio.h>
#include <string.h>

#include "aks_json.h"
#include "k8s_pure.h"

/* A string member that says something: NULL when absent, empty or of another type. */
static const char *jtext(json_object *o, const char *key)
{
	const char *s = aks__jstr(o, key);
	return s && *s ? s : NULL;
}

/* An array member's length; 0 when it is absent or not an array. */
static size_t jlen(json_object *a)
{
	return json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0;
}

/* What keeps a pod from running: its container's waiting reason, else the
 * last condition's message, else the phase (the reference's detail). */
static void pod_detail(json_object *st, char *out, size_t len)
{
	json_object *cs = aks__jget(st, "containerStatuses");
	for (size_t i = 0; i < jlen(cs); i++) {
		json_object *w =
		    aks__jget(aks__jget(json_object_array_get_idx(cs, i), "state"), "waiting");
		const char *reason = jtext(w, "reason"), *msg = jtext(w, "message");
		if (reason && strcmp(reason, "ContainerCreating") != 0) {
			snprintf(out, len, "%s%s%s", reason, msg ? ": " : "", msg ? msg : "");
			return;
		}
	}
	json_object *conds = aks__jget(st, "conditions");
	size_t n = jlen(conds);
	const char *msg = n ? jtext(json_object_array_get_idx(conds, n - 1), "message") : NULL;
	const char *phase = jtext(st, "phase");
	snprintf(out, len, "%s", msg ? msg : phase ? phase : "unknown");
}

k8s_pod_state k8s_pod_state_of(json_object *pod, char *detail, size_t len)
{
	json_object *st = aks__jget(pod, "status");
	const char *phase = jtext(st, "phase");
	if (detail && len)
		pod_detail(st, detail, len);
	bool deleting = aks__jget(aks__jget(pod, "metadata"), "deletionTimestamp") != NULL;
	if (deleting ||
	    (phase && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0)))
		return K8S_POD_ENDED;
	if (phase && strcmp(phase, "Running") == 0)
		return K8S_POD_RUNNING;
	return K8S_POD_PENDING;
}
