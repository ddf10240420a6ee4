/*
 * plugins/dynamodb/ddb_records.c - the dynamodb store's records: one item per record
 * (partition key the namespace, sort key the record's key; ddb_item.h).
 *
 * An update is optimistic: a strongly consistent GetItem, the host's function, then a
 * PutItem or DeleteItem on the condition that the item still carries the version token that
 * was read (or still does not exist), and again from the read when another writer got in
 * between (ConditionalCheckFailedException). Each write carries a new random token, so a
 * record deleted and written again never passes for the one that was read.
 *
 * DynamoDB deletes an expired item only eventually (emulators never): every read here
 * treats an item whose expires_at has passed as absent.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aks_buf.h"
#include "aks_json.h"
#include "aks_text.h"
#include "ddb_internal.h"

/* Optimistic retries before an update gives up: each lost race means another update of the
 * same record committed, so this bounds only pathological contention. */
#define DDB_MAX_CONFLICTS 1000
#define CONDITION_FAILED  "ConditionalCheckFailedException"

/* A name made printable for a message (names are any bytes but NUL, 256 at most). */
typedef struct shown {
	char text[4 * AKS_STORE_NAME_MAX + 8];
} shown;

static const char *show(const char *name, shown *b)
{
	aks__text_printable(b->text, sizeof(b->text), name, strlen(name));
	return b->text;
}

static int oom(aks_store_impl *s, aks_error **err)
{
	return s->host->error_set(err, AKS_ENOMEM, "out of memory");
}

static int malformed(aks_store_impl *s, const char *ns, const char *key, aks_error **err)
{
	shown a, b;
	return s->host->error_set(err, AKS_EIO,
	                          DDB_NAME " store: the item of record '%s' of '%s' in table '%s' "
	                                   "was not written by this store (an attribute of the "
	                                   "wrong type)",
	                          show(key, &a), show(ns, &b), s->table);
}

/* A strongly consistent GetItem of (ns, key): AKS_OK with *present, and the item in *r when
 * present (ddb_record_clear it). */
static int read_item(aks_store_impl *s, const char *ns, const char *key, ddb_record *r,
                     bool *present, aks_error **err)
{
	*present = false;
	memset(r, 0, sizeof(*r));
	json_object *body = json_object_new_object(), *out = NULL;
	if (!(ddb_put(body, "Key", ddb_record_key(ns, key)) &&
	      ddb_put(body, "ConsistentRead", json_object_new_boolean(1)))) {
		json_object_put(body);
		return oom(s, err);
	}
	int rc = ddb_request(s, "GetItem", "read a record", body, NULL, NULL, &out, err);
	json_object_put(body);
	if (rc != AKS_OK)
		return rc;
	json_object *item = aks__jget(out, "Item");
	if (item) {
		int got = ddb_record_read(item, r);
		rc = got == -2 ? oom(s, err) : got < 0 ? malformed(s, ns, key, err) : AKS_OK;
		*present = got == 0;
	}
	json_object_put(out);
	return rc;
}

static int too_big(aks_store_impl *s, const char *ns, const char *key, size_t len, bool expiring,
                   aks_error **err)
{
	size_t n = ddb_record_size(strlen(ns), strlen(key), len, expiring);
	if (n <= DDB_ITEM_MAX)
		return AKS_OK;
	shown a, b;
	return s->host->error_set(err, AKS_ELIMIT,
	                          DDB_NAME " store: the record '%s' of '%s' is %zu bytes, which "
	                                   "makes a %zu-byte item: over DynamoDB's item limit of "
	                                   "%d bytes (400 KB)",
	                          show(key, &a), show(ns, &b), len, n, DDB_ITEM_MAX);
}

/* The condition that the item is still the one read: absent, or carrying its token. */
static bool add_condition(json_object *body, bool present, const char *ver)
{
	json_object *names = json_object_new_object(), *values = NULL;
	const char *cond;
	bool ok;
	if (!present) {
		cond = "attribute_not_exists(#pk)";
		ok = ddb_put(names, "#pk", json_object_new_string(DDB_PK));
	} else if (!ver) {
		cond = "attribute_exists(#pk) AND attribute_not_exists(#v)";
		ok = ddb_put(names, "#pk", json_object_new_string(DDB_PK)) &&
		     ddb_put(names, "#v", json_object_new_string(DDB_VER));
	} else {
		cond = "#v = :old";
		values = json_object_new_object();
		ok = ddb_put(names, "#v", json_object_new_string(DDB_VER)) &&
		     ddb_put(values, ":old", ddb_attr_s(ver));
	}
	ok = ok && ddb_put(body, "ConditionExpression", json_object_new_string(cond));
	ok = ddb_put(body, "ExpressionAttributeNames", names) && ok;
	if (values)
		ok = ddb_put(body, "ExpressionAttributeValues", values) && ok;
	return ok;
}

/* A random pause once several tries in a row lost the race: lets the winners through. */
static void back_off(int conflicts)
{
	if (conflicts <= 3)
		return;
	char t[33];
	int cap = conflicts < 9 ? 1 << (conflicts - 3) : 64;
	if (ddb_token(t) == 0)
		poll(NULL, 0, (int)(strtoul(t + 24, NULL, 16) % (unsigned long)cap));
}

int ddb_update(aks_store_impl *s, const char *ns, const char *key, aks_store_txn_fn fn, void *ctx,
               aks_error **err)
{
	const aks_host_api *host = s->host;
	ddb_record cur;
	bool present = false, have = false;
	int rc = AKS_OK, conflicts = 0;
	memset(&cur, 0, sizeof(cur));
	for (;;) {
		if (!have && (rc = read_item(s, ns, key, &cur, &present, err)) != AKS_OK)
			break;
		have = false;
		bool exists = present && !ddb_expired(cur.expires_at, ddb_now_ms());
		int action = AKS_STORE_KEEP;
		const char *nv = NULL;
		size_t nlen = 0;
		rc = fn(ctx, exists ? (cur.val ? (const char *)cur.val : "") : NULL,
		        exists ? cur.val_len : 0, &action, &nv, &nlen, err);
		if (rc == AKS_OK && action == AKS_STORE_PUT && !nv)
			rc = host->error_set(err, AKS_EINVAL, DDB_NAME " store: nothing to write");
		if (rc != AKS_OK || action == AKS_STORE_KEEP ||
		    (action == AKS_STORE_DELETE && !exists))
			break; /* an expired item left for DynamoDB's TTL to delete */
		bool put = action == AKS_STORE_PUT;
		char token[33];
		if (put && (rc = too_big(s, ns, key, nlen, false, err)) != AKS_OK)
			break;
		if (ddb_token(token) < 0) {
			rc = host->error_set(err, AKS_EIO, DDB_NAME " store: no random bytes");
			break;
		}
		json_object *body = json_object_new_object(), *out = NULL;
		bool ok = put ? ddb_put(body, "Item", ddb_record_item(ns, key, nv, nlen, token, 0))
		              : ddb_put(body, "Key", ddb_record_key(ns, key));
		if (!ok || !add_condition(body, present, cur.ver)) {
			json_object_put(body);
			rc = oom(s, err);
			break;
		}
		rc = ddb_request(s, put ? "PutItem" : "DeleteItem",
		                 put ? "write a record" : "delete a record", body, CONDITION_FAILED,
		                 NULL, &out, err);
		json_object_put(body);
		json_object_put(out);
		ddb_record_clear(&cur);
		if (rc != DDB_FAULT)
			break;
		rc = AKS_OK;
		if (put) {
			/* A write whose answer was lost is sent again, and the second one finds its
			 * own token: it was written, and the function must not run twice. */
			if ((rc = read_item(s, ns, key, &cur, &present, err)) != AKS_OK)
				break;
			if (present && cur.ver && strcmp(cur.ver, token) == 0)
				break;
			have = true;
		}
		if (++conflicts >= DDB_MAX_CONFLICTS) {
			shown a;
			rc =
			    host->error_set(err, AKS_EIO,
			                    DDB_NAME " store: gave up on updating a record of '%s' "
			                             "after %d conflicting writes",
			                    show(ns, &a), conflicts);
			break;
		}
		back_off(conflicts);
	}
	ddb_record_clear(&cur);
	return rc;
}

int ddb_get(aks_store_impl *s, const char *ns, const char *key, aks_store_record_fn fn, void *ctx,
            aks_error **err)
{
	ddb_record r;
	bool present = false;
	int rc = read_item(s, ns, key, &r, &present, err);
	if (rc != AKS_OK)
		return rc;
	if (!present || ddb_expired(r.expires_at, ddb_now_ms()))
		rc = AKS_ENOTFOUND;
	else
		rc = fn(ctx, key, r.val ? (const char *)r.val : "", r.val_len);
	ddb_record_clear(&r);
	return rc;
}

int ddb_put_expiring(aks_store_impl *s, const char *ns, const char *key, const char *value,
                     size_t len, int64_t ttl_seconds, aks_error **err)
{
	if (ttl_seconds <= 0 || !value)
		return s->host->error_set(err, AKS_EINVAL,
		                          DDB_NAME " store: an expiring record needs a value and a "
		                                   "time to live above 0");
	int rc = too_big(s, ns, key, len, true, err);
	if (rc != AKS_OK)
		return rc;
	char token[33];
	if (ddb_token(token) < 0)
		return s->host->error_set(err, AKS_EIO, DDB_NAME " store: no random bytes");
	json_object *body = json_object_new_object(), *out = NULL;
	if (!ddb_put(body, "Item",
	             ddb_record_item(ns, key, value, len, token,
	                             ddb_expiry(ddb_now_ms(), ttl_seconds)))) {
		json_object_put(body);
		return oom(s, err);
	}
	rc = ddb_request(s, "PutItem", "write an expiring record", body, NULL, NULL, &out, err);
	json_object_put(body);
	json_object_put(out);
	return rc;
}

/* ---- scan and namespaces ---- */

/* Adds the page's ExclusiveStartKey (consumed; NULL: the first page). */
static bool add_start(json_object *body, json_object **start)
{
	if (!*start)
		return true;
	json_object *k = *start;
	*start = NULL;
	return ddb_put(body, "ExclusiveStartKey", k);
}

/* The answer's LastEvaluatedKey, kept for the next page (NULL: this was the last one). */
static json_object *next_start(json_object *out)
{
	json_object *k = aks__jget(out, "LastEvaluatedKey");
	return k ? json_object_get(k) : NULL;
}

static json_object *query_body(const char *ns, const char *prefix, size_t plen)
{
	json_object *b = json_object_new_object(), *names = json_object_new_object(),
	            *values = json_object_new_object();
	bool ok = ddb_put(names, "#pk", json_object_new_string(DDB_PK)) &&
	          ddb_put(values, ":ns", ddb_attr_b(ns, strlen(ns)));
	if (plen)
		ok = ok && ddb_put(names, "#sk", json_object_new_string(DDB_SK)) &&
		     ddb_put(values, ":p", ddb_attr_b(prefix, plen));
	ok = ok && ddb_put(b, "KeyConditionExpression",
	                   json_object_new_string(plen ? "#pk = :ns AND begins_with(#sk, :p)"
	                                               : "#pk = :ns"));
	ok = ddb_put(b, "ExpressionAttributeNames", names) && ok;
	ok = ddb_put(b, "ExpressionAttributeValues", values) && ok;
	ok = ok && ddb_put(b, "ConsistentRead", json_object_new_boolean(1));
	if (!ok) {
		json_object_put(b);
		return NULL;
	}
	return b;
}

/* Whether the item read is a live record of the scan: a key (1 to 256 bytes, no NUL) that
 * starts with prefix byte for byte (checked again: the Query's begins_with is the service's,
 * or an emulator's), not expired. */
static bool in_scan(const ddb_record *r, const char *prefix, size_t plen, int64_t now_ms)
{
	return r->sk_len >= plen && r->sk_len >= 1 && r->sk_len <= AKS_STORE_NAME_MAX &&
	       !memchr(r->sk, '\0', r->sk_len) && memcmp(r->sk, prefix, plen) == 0 &&
	       !ddb_expired(r->expires_at, now_ms);
}

int ddb_scan(aks_store_impl *s, const char *ns, const char *prefix, aks_store_record_fn fn,
             void *ctx, aks_error **err)
{
	size_t plen = strlen(prefix);
	json_object *start = NULL;
	int rc = AKS_OK, skipped = 0;
	do {
		json_object *body = query_body(ns, prefix, plen), *out = NULL;
		if (!body || !add_start(body, &start)) {
			json_object_put(body);
			rc = oom(s, err);
			break;
		}
		rc = ddb_request(s, "Query", "scan records", body, NULL, NULL, &out, err);
		json_object_put(body);
		if (rc != AKS_OK)
			break;
		json_object *items = aks__jget(out, "Items");
		size_t n = json_object_is_type(items, json_type_array)
		               ? json_object_array_length(items)
		               : 0;
		int64_t now = ddb_now_ms();
		for (size_t i = 0; i < n && rc == AKS_OK; i++) {
			ddb_record r;
			int got = ddb_record_read(json_object_array_get_idx(items, i), &r);
			if (got == -2)
				rc = oom(s, err);
			else if (got < 0)
				skipped++;
			else if (in_scan(&r, prefix, plen, now))
				rc = fn(ctx, (const char *)r.sk, r.val ? (const char *)r.val : "",
				        r.val_len);
			ddb_record_clear(&r);
		}
		start = rc == AKS_OK ? next_start(out) : NULL;
		json_object_put(out);
	} while (start);
	json_object_put(start);
	if (skipped) {
		shown a;
		s->host->log(
		    AKS_LOG_WARNING, DDB_NAME,
		    "scan of '%s': skipped %d items of table '%s' not written by this store",
		    show(ns, &a), skipped, s->table);
	}
	return rc;
}

static json_object *namespaces_body(void)
{
	json_object *b = json_tokener_parse("{\"ProjectionExpression\": \"#pk, #e\", "
	                                    "\"ExpressionAttributeNames\": {\"#pk\": \"" DDB_PK
	                                    "\", \"#e\": \"" DDB_EXPIRES "\"}, "
	                                    "\"ConsistentRead\": true}");
	return b;
}

/* Every partition key of the table (a Scan that reads only the keys and expiries): the
 * namespaces with at least one live record. */
static int list_namespaces(aks_store_impl *s, aks_strv *names, aks_error **err)
{
	json_object *start = NULL;
	int rc = AKS_OK;
	do {
		json_object *body = namespaces_body(), *out = NULL;
		if (!body || !add_start(body, &start)) {
			json_object_put(body);
			rc = oom(s, err);
			break;
		}
		rc = ddb_request(s, "Scan", "list the namespaces", body, NULL, NULL, &out, err);
		json_object_put(body);
		if (rc != AKS_OK)
			break;
		json_object *items = aks__jget(out, "Items");
		size_t n = json_object_is_type(items, json_type_array)
		               ? json_object_array_length(items)
		               : 0;
		int64_t now = ddb_now_ms();
		for (size_t i = 0; i < n && rc == AKS_OK; i++) {
			ddb_record r;
			int got = ddb_record_read(json_object_array_get_idx(items, i), &r);
			if (got == -2)
				rc = oom(s, err);
			else if (got == 0 && ddb_pk_is_namespace(r.pk, r.pk_len) &&
			         !ddb_expired(r.expires_at, now) &&
			         aks__strv_take(names, strndup((const char *)r.pk, r.pk_len)) !=
			             AKS_OK)
				rc = oom(s, err);
			ddb_record_clear(&r);
		}
		start = rc == AKS_OK ? next_start(out) : NULL;
		json_object_put(out);
	} while (start);
	json_object_put(start);
	return rc;
}

int ddb_namespaces(aks_store_impl *s, aks_store_name_fn fn, void *ctx, aks_error **err)
{
	aks_strv names = {0};
	int rc = list_namespaces(s, &names, err);
	if (rc == AKS_OK)
		aks__strv_sort_unique(&names); /* a namespace's partition holds many records */
	for (size_t i = 0; rc == AKS_OK && i < names.n; i++)
		rc = fn(ctx, names.v[i]);
	aks__strv_free(names.v);
	return rc;
}
