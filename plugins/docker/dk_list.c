/*
 * plugins/docker/dk_list.c - list_sandboxes: the containers and volumes that carry our label
 * and the host's key=value (what create put on them), as sandbox ids. A volume counts on its
 * own: a host killed after creating the workspace volume and before the container leaves only
 * the volume, which destroy(id) removes all the same.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "aks_json.h"
#include "dk_internal.h"

/* The engine's filters={"label":["<DK_LABEL>=1","<key>=<value>"]}, percent-encoded. */
static char *label_filter(const char *key, const char *value)
{
	json_object *f = json_object_new_object();
	json_object *labels = json_object_new_array();
	char *mine = NULL, *theirs = NULL, *query = NULL;
	if (f && labels && asprintf(&mine, DK_LABEL "=1") >= 0 &&
	    asprintf(&theirs, "%s=%s", key, value) >= 0) {
		json_object_array_add(labels, json_object_new_string(mine));
		json_object_array_add(labels, json_object_new_string(theirs));
		json_object_object_add(f, "label", labels);
		labels = NULL;
		query = dk_escape(json_object_to_json_string_ext(f, JSON_C_TO_STRING_PLAIN));
	}
	json_object_put(labels);
	json_object_put(f);
	free(mine);
	free(theirs);
	return query;
}

/* The labels of key `key` (and our claim label) of an engine object, as pairs. */
static void pairs_of(json_object *labels, const char *key, const char *out[5])
{
	size_t n = 0;
	const char *keys[] = {key, AKS_LABEL_CLAIM};
	for (size_t i = 0; i < 2; i++) {
		const char *v = json_object_get_string(aks__jget(labels, keys[i]));
		if (v && (i == 0 || strcmp(keys[i], key) != 0)) {
			out[n++] = keys[i];
			out[n++] = v;
		}
	}
	out[n] = NULL;
}

typedef struct listing {
	dk_conn *c;
	const char *key, *query;
	const aks_call *call;
	aks_sandbox_list_fn fn;
	void *ctx;
	json_object *seen; /* sandbox id -> true */
} listing;

/* A GET of the engine's listing: its JSON (the caller's) or an error. */
static int get_list(listing *l, const char *what, json_object **out, aks_error **err)
{
	const aks_host_api *host = l->c->prov->host;
	char path[1024];
	snprintf(path, sizeof(path), "/%s?all=1&filters=%s", what, l->query);
	dk_req r = {.method = "GET", .path = path};
	int rc = dk_request(l->c, &r, l->call, err);
	if (rc == AKS_OK && r.status != 200) {
		char *msg = dk_engine_message(&r);
		rc = host->error_set(err, AKS_EIO, "docker: cannot list the %s: %s", what,
		                     msg ? msg : "?");
		free(msg);
	} else if (rc == AKS_OK && !(*out = dk_resp_json(&r))) {
		rc =
		    host->error_set(err, AKS_EIO, "docker: the engine's %s list is not JSON", what);
	}
	dk_req_free(&r);
	return rc;
}

/* Reports one sandbox id once. */
static int report(listing *l, const char *id, json_object *labels)
{
	if (!dk_valid_ref(id) || json_object_object_get_ex(l->seen, id, NULL))
		return AKS_OK;
	json_object_object_add(l->seen, id, json_object_new_boolean(1));
	const char *pairs[5];
	pairs_of(labels, l->key, pairs);
	return l->fn(l->ctx, id, pairs);
}

static int list_containers(listing *l, aks_error **err)
{
	json_object *arr = NULL;
	int rc = get_list(l, "containers/json", &arr, err);
	size_t n = rc == AKS_OK ? json_object_array_length(arr) : 0;
	for (size_t i = 0; rc == AKS_OK && i < n; i++) {
		json_object *c = json_object_array_get_idx(arr, i);
		const char *name =
		    json_object_get_string(json_object_array_get_idx(aks__jget(c, "Names"), 0));
		if (name && *name == '/')
			rc = report(l, name + 1, aks__jget(c, "Labels"));
	}
	json_object_put(arr);
	return rc;
}

/* A volume's sandbox: its name without the workspace or agent suffix. */
static int list_volumes(listing *l, aks_error **err)
{
	json_object *body = NULL;
	int rc = get_list(l, "volumes", &body, err);
	json_object *arr = aks__jget(body, "Volumes");
	size_t n = rc == AKS_OK ? json_object_array_length(arr) : 0;
	const char *suffixes[] = {DK_VOLUME_SUFFIX, DK_AGENT_VOLUME_SUFFIX};
	for (size_t i = 0; rc == AKS_OK && i < n; i++) {
		json_object *v = json_object_array_get_idx(arr, i);
		const char *name = json_object_get_string(aks__jget(v, "Name"));
		size_t len = name ? strlen(name) : 0;
		for (size_t k = 0; rc == AKS_OK && k < 2; k++) {
			size_t sl = strlen(suffixes[k]);
			if (len <= sl || len >= 256 || strcmp(name + len - sl, suffixes[k]) != 0 ||
			    strncmp(name, DK_ID_PREFIX, strlen(DK_ID_PREFIX)) != 0)
				continue;
			char id[256];
			memcpy(id, name, len - sl);
			id[len - sl] = '\0';
			rc = report(l, id, aks__jget(v, "Labels"));
		}
	}
	json_object_put(body);
	return rc;
}

int dk_list_sandboxes(aks_provider_impl *prov, const char *label_key, const char *label_value,
                      const aks_call *call, aks_sandbox_list_fn fn, void *ctx, aks_error **err)
{
	const aks_host_api *host = prov->host;
	dk_conn c = {0};
	int rc = dk_conn_init(&c, prov, err);
	if (rc != AKS_OK)
		return rc;
	char *query = label_filter(label_key, label_value);
	listing l = {.c = &c,
	             .key = label_key,
	             .query = query,
	             .call = call,
	             .fn = fn,
	             .ctx = ctx,
	             .seen = json_object_new_object()};
	if (!query || !l.seen)
		rc = host->error_set(err, AKS_ENOMEM, "out of memory");
	else if (strlen(query) > 900)
		rc = host->error_set(err, AKS_EINVAL, "docker: the label to list by is too long");
	/* Containers first: a volume of a listed container is not reported again. */
	if (rc == AKS_OK)
		rc = list_containers(&l, err);
	if (rc == AKS_OK)
		rc = list_volumes(&l, err);
	json_object_put(l.seen);
	free(query);
	dk_conn_fini(&c);
	return rc;
}
