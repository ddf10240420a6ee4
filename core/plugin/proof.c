/*
 * core/plugin/proof.c - what aksandbox-plugin-check proved of a provider instance on this
 * machine, kept for `aksandbox check` (aksandbox.h, "Proofs").
 *
 * One JSON file per plugin name in <state directory>/proofs/, an array of records. A
 * record is keyed by what decides whether a proof still holds for an instance: the plugin
 * file (its path, device, inode, size and modification time, so a rebuilt or upgraded file
 * has no proof), the plugin's version, and the instance's isolation tier and description
 * (which name what the configuration chose, such as docker's runtime). It holds when it
 * was recorded and each check's result. Records are small and few; a file is rewritten
 * whole, through a temporary file and a rename, so a reader never sees half of one.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "internal.h"
#include "store/file_io.h"
#include "store/store.h"

/* At most this many records per plugin: the oldest go first. */
#define MAX_RECORDS 32

static const char *const proof_names[] = {"none", "passed", "failed", "not_verified"};

/* The key of an instance, as a JSON object (NULL on failure, with err set). */
static json_object *instance_key(const aks_provider *prov, aks_error **err)
{
	const aks_plugin *plugin = aks_provider_get_plugin(prov);
	const char *file = aks_plugin_get_file(plugin);
	struct stat st;
	if (stat(file, &st) != 0)
		return aks__error_set(err, AKS_EIO, "cannot stat %s: %s", file, strerror(errno)),
		       NULL;
	json_object *k = json_object_new_object();
	json_object_object_add(k, "file", json_object_new_string(file));
	json_object_object_add(k, "device", json_object_new_int64((int64_t)st.st_dev));
	json_object_object_add(k, "inode", json_object_new_int64((int64_t)st.st_ino));
	json_object_object_add(k, "size", json_object_new_int64((int64_t)st.st_size));
	json_object_object_add(
	    k, "mtime_ns",
	    json_object_new_int64((int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec));
	json_object_object_add(k, "version",
	                       json_object_new_string(aks_plugin_get_descriptor(plugin)->version));
	json_object_object_add(
	    k, "isolation",
	    json_object_new_int64((int64_t)aks_provider_get_capabilities(prov)->isolation));
	json_object_object_add(k, "description",
	                       json_object_new_string(aks_provider_get_description(prov)));
	return k;
}

/* The proofs file of prov's plugin (malloc'd), in the state directory. */
static char *proof_file(const aks_provider *prov, bool create_dir, aks_error **err)
{
	char *dir = NULL, *path = NULL;
	if (aks__store_default_dir(&dir, err) != AKS_OK)
		return NULL;
	char *proofs = NULL;
	if (asprintf(&proofs, "%s/proofs", dir) < 0)
		proofs = NULL;
	int e = proofs && create_dir ? -aks__state_mkdirs(proofs) : 0;
	if (e) {
		aks__error_set(err, AKS_EIO, "cannot create %s: %s", proofs, strerror(e));
		free(proofs);
		free(dir);
		return NULL;
	}
	const char *name = aks_plugin_get_descriptor(aks_provider_get_plugin(prov))->name;
	if (!proofs || asprintf(&path, "%s/%s.json", proofs, name) < 0) {
		path = NULL;
		aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	free(proofs);
	free(dir);
	return path;
}

/* The records in path, or a new empty array when there are none (or none readable). */
static json_object *read_records(const char *path)
{
	json_object *all = json_object_from_file(path);
	if (all && json_object_is_type(all, json_type_array))
		return all;
	json_object_put(all);
	return json_object_new_array();
}

static bool same_key(json_object *record, json_object *key)
{
	json_object *k = NULL;
	return json_object_object_get_ex(record, "instance", &k) && json_object_equal(k, key);
}

AKS_EXPORT int aks_provider_record_proof(const aks_provider *prov, const char *const *checks,
                                         const int *results, size_t count, aks_error **err)
{
	if (!prov || (!checks && count) || (!results && count))
		return aks__error_set(err, AKS_EINVAL, "aks_provider_record_proof: NULL argument");
	for (size_t i = 0; i < count; i++)
		if (!checks[i] || results[i] < AKS_PROOF_PASSED ||
		    results[i] > AKS_PROOF_NOT_VERIFIED)
			return aks__error_set(err, AKS_EINVAL,
			                      "aks_provider_record_proof: check %zu has no name or "
			                      "an unknown result",
			                      i);
	json_object *key = instance_key(prov, err);
	if (!key)
		return aks_error_code(*err);
	char *path = proof_file(prov, true, err);
	if (!path) {
		json_object_put(key);
		return aks_error_code(*err);
	}
	json_object *old = read_records(path), *all = json_object_new_array();
	size_t n = json_object_array_length(old);
	for (size_t i = 0, kept = 0; i < n; i++) {
		json_object *r = json_object_array_get_idx(old, i);
		/* The same instance's record is replaced; the oldest go when there are many. */
		if (same_key(r, key) || n - i >= MAX_RECORDS + kept)
			continue;
		json_object_array_add(all, json_object_get(r));
		kept++;
	}
	json_object_put(old);
	json_object *rec = json_object_new_object(), *res = json_object_new_object();
	json_object_object_add(rec, "instance", key);
	json_object_object_add(rec, "recorded_at", json_object_new_int64((int64_t)time(NULL)));
	for (size_t i = 0; i < count; i++)
		json_object_object_add(res, checks[i],
		                       json_object_new_string(proof_names[results[i]]));
	json_object_object_add(rec, "checks", res);
	json_object_array_add(all, rec);

	char *tmp = NULL;
	int rc = AKS_OK;
	if (asprintf(&tmp, "%s.%ld.tmp", path, (long)getpid()) < 0) {
		tmp = NULL;
		rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
	} else if (json_object_to_file_ext(tmp, all, JSON_C_TO_STRING_PRETTY) != 0 ||
	           rename(tmp, path) != 0) {
		rc = aks__error_set(err, AKS_EIO, "cannot write %s: %s", path, strerror(errno));
		unlink(tmp);
	}
	free(tmp);
	free(path);
	json_object_put(all);
	return rc;
}

AKS_EXPORT int aks_provider_get_proof(const aks_provider *prov, const char *check,
                                      int64_t *recorded_at)
{
	if (recorded_at)
		*recorded_at = 0;
	if (!prov || !check)
		return AKS_PROOF_NONE;
	aks_error *err = NULL;
	json_object *key = instance_key(prov, &err);
	char *path = key ? proof_file(prov, false, &err) : NULL;
	aks_error_free(err);
	int proof = AKS_PROOF_NONE;
	json_object *all = path ? read_records(path) : NULL;
	for (size_t i = 0; all && i < json_object_array_length(all); i++) {
		json_object *r = json_object_array_get_idx(all, i), *checks, *v, *at;
		if (!same_key(r, key) || !json_object_object_get_ex(r, "checks", &checks) ||
		    !json_object_object_get_ex(checks, check, &v))
			continue;
		for (int k = AKS_PROOF_PASSED; k <= AKS_PROOF_NOT_VERIFIED; k++)
			if (strcmp(json_object_get_string(v), proof_names[k]) == 0)
				proof = k;
		if (proof && recorded_at && json_object_object_get_ex(r, "recorded_at", &at))
			*recorded_at = json_object_get_int64(at);
	}
	json_object_put(all);
	json_object_put(key);
	free(path);
	return proof;
}
