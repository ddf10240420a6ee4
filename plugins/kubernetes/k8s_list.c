/*
 * plugins/kubernetes/k8s_list.c - list_sandboxes: the pods and NetworkPolicies of the
 * namespace that carry the host's key=value label (what create put on them), as sandbox ids
 * "<namespace>/<pod>". A NetworkPolicy counts on its own: a host killed after creating it
 * and before the pod leaves only the policy, which destroy(id) deletes all the same.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "aks_json.h"
#include "k8s_internal.h"

typedef struct listing {
	k8s_client *c;
	const char *ns, *key;
	const aks_call *call;
	aks_sandbox_list_fn fn;
	void *ctx;
	json_object *seen; /* sandbox id -> true */
} listing;

/* The items of one collection with the label selector; the caller's JSON. */
static int get_items(listing *l, const char *collection, const char *selector, json_object **out,
                     aks_error **err)
{
	const aks_host_api *host = l->c->prov->host;
	char *path = NULL;
	if (asprintf(&path, "%s/namespaces/%s/%s?labelSelector=%s",
	             strcmp(collection, "pods") == 0 ? "/api/v1" : "/apis/networking.k8s.io/v1",
	             l->ns, collection, selector) < 0)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	k8s_req r = {.method = "GET", .path = path};
	int rc = k8s_request(l->c, &r, l->call, err);
	if (rc == AKS_OK && r.status != 200)
		rc = k8s_api_error(l->c, &r, AKS_EIO, "cannot list the sandboxes", err);
	else if (rc == AKS_OK && !(*out = k8s_resp_json(&r)))
		rc = host->error_set(err, AKS_EIO,
		                     "kubernetes: the API server's answer is not JSON");
	k8s_req_free(&r);
	free(path);
	return rc;
}

static int list_collection(listing *l, const char *collection, const char *selector,
                           aks_error **err)
{
	json_object *body = NULL;
	int rc = get_items(l, collection, selector, &body, err);
	json_object *items = aks__jget(body, "items");
	size_t n = rc == AKS_OK ? json_object_array_length(items) : 0;
	for (size_t i = 0; rc == AKS_OK && i < n; i++) {
		json_object *meta = aks__jget(json_object_array_get_idx(items, i), "metadata");
		const char *name = json_object_get_string(aks__jget(meta, "name"));
		if (!name || strncmp(name, K8S_POD_PREFIX, strlen(K8S_POD_PREFIX)) != 0)
			continue; /* not a name we give */
		char *id = NULL;
		if (asprintf(&id, "%s/%s", l->ns, name) < 0)
			return l->c->prov->host->error_set(err, AKS_ENOMEM, "out of memory");
		if (!json_object_object_get_ex(l->seen, id, NULL)) {
			json_object_object_add(l->seen, id, json_object_new_boolean(1));
			json_object *labels = aks__jget(meta, "labels");
			const char *pairs[5] = {NULL};
			size_t k = 0;
			const char *mine = json_object_get_string(aks__jget(labels, l->key));
			const char *claim =
			    json_object_get_string(aks__jget(labels, AKS_LABEL_CLAIM));
			if (mine) {
				pairs[k++] = l->key;
				pairs[k++] = mine;
			}
			if (claim && strcmp(l->key, AKS_LABEL_CLAIM) != 0) {
				pairs[k++] = AKS_LABEL_CLAIM;
				pairs[k++] = claim;
			}
			rc = l->fn(l->ctx, id, pairs);
		}
		free(id);
	}
	json_object_put(body);
	return rc;
}

int k8s_list_sandboxes(aks_provider_impl *prov, const char *label_key, const char *label_value,
                       const aks_call *call, aks_sandbox_list_fn fn, void *ctx, aks_error **err)
{
	const aks_host_api *host = prov->host;
	k8s_client *c = NULL;
	int rc = k8s_client_own(prov, &c, err);
	if (rc != AKS_OK)
		return rc;
	char *raw = NULL, *selector = NULL;
	if (asprintf(&raw, "%s=%s", label_key, label_value) < 0 || !(selector = k8s_escape(raw))) {
		free(raw);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	listing l = {.c = c,
	             .ns = prov->namespace,
	             .key = label_key,
	             .call = call,
	             .fn = fn,
	             .ctx = ctx,
	             .seen = json_object_new_object()};
	if (!l.seen)
		rc = host->error_set(err, AKS_ENOMEM, "out of memory");
	/* Pods first: the NetworkPolicy of a listed pod is not reported again. */
	if (rc == AKS_OK)
		rc = list_collection(&l, "pods", selector, err);
	if (rc == AKS_OK && prov->network_policy)
		rc = list_collection(&l, "networkpolicies", selector, err);
	json_object_put(l.seen);
	free(selector);
	free(raw);
	return rc;
}
