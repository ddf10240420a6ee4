/*
 * plugins/dynamodb/ddb_lock.c - named locks as leased items of the table.
 *
 * A lock is the item (DDB_LOCK_TAG + ns, key) holding its owner's random token and the end
 * of its lease (epoch ms). Taking it is a PutItem on the condition that no such item exists,
 * or its lease has ended, or it is already this owner's (a resent request whose first
 * answer was lost). A waiter tries again with backoff (10 ms doubling to 200 ms), looking at
 * the call's deadline and cancellation between tries. While held, a background thread
 * renews every held lease each third of it (an UpdateItem on the condition that the owner is
 * still us). A holder that dies stops renewing, so its lock frees itself one lease later.
 * Unlock deletes the item only if the owner is still us, so a lock lost to an ended lease is
 * never taken from its new holder. Leases compare wall clocks of different hosts: keep them
 * in sync (NTP), far closer than the lease.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aks_text.h"
#include "ddb_internal.h"

#define DDB_POLL_FIRST_MS 10
#define DDB_POLL_MAX_MS   200
#define CONDITION_FAILED  "ConditionalCheckFailedException"

static void free_lock(aks_store_lock *lk)
{
	if (!lk)
		return;
	free(lk->ns);
	free(lk->key);
	free(lk);
}

/* The names and values every lock request shares: #pk, #o (owner), :me. */
static bool add_owner(json_object *names, json_object *values, const char *owner)
{
	return ddb_put(names, "#pk", json_object_new_string(DDB_PK)) &&
	       ddb_put(names, "#o", json_object_new_string(DDB_OWNER)) &&
	       ddb_put(values, ":me", ddb_attr_s(owner));
}

/* TTL deletes a lock item left behind by a dead holder, well after its lease ended. */
static int64_t lock_expiry(int64_t lease_end_ms)
{
	return ddb_expiry(lease_end_ms, 3600);
}

/* PutItem of the lock: taken when it is free, its lease ended, or ours already. */
static json_object *acquire_body(aks_store_impl *s, const aks_store_lock *lk)
{
	int64_t now = ddb_now_ms(), until = now + s->lease_ms;
	json_object *b = json_object_new_object(), *item = ddb_lock_key(lk->ns, lk->key),
	            *names = json_object_new_object(), *values = json_object_new_object();
	bool ok = ddb_put(item, DDB_OWNER, ddb_attr_s(lk->owner)) &&
	          ddb_put(item, DDB_LEASE, ddb_attr_n(until)) &&
	          ddb_put(item, DDB_EXPIRES, ddb_attr_n(lock_expiry(until)));
	ok = ddb_put(b, "Item", item) && ok;
	ok = ok && add_owner(names, values, lk->owner) &&
	     ddb_put(names, "#l", json_object_new_string(DDB_LEASE)) &&
	     ddb_put(values, ":now", ddb_attr_n(now));
	ok = ddb_put(b, "ExpressionAttributeNames", names) && ok;
	ok = ddb_put(b, "ExpressionAttributeValues", values) && ok;
	ok = ok && ddb_put(b, "ConditionExpression",
	                   json_object_new_string("attribute_not_exists(#pk) OR #l < :now OR "
	                                          "#o = :me"));
	if (!ok) {
		json_object_put(b);
		return NULL;
	}
	return b;
}

/* UpdateItem (renew: a new lease end) or DeleteItem (release) while the owner is us. */
static json_object *owned_body(aks_store_impl *s, const aks_store_lock *lk, bool renew)
{
	json_object *b = json_object_new_object(), *names = json_object_new_object(),
	            *values = json_object_new_object();
	bool ok = ddb_put(b, "Key", ddb_lock_key(lk->ns, lk->key)) &&
	          add_owner(names, values, lk->owner) &&
	          ddb_put(b, "ConditionExpression",
	                  json_object_new_string("attribute_exists(#pk) AND #o = :me"));
	if (renew) {
		int64_t until = ddb_now_ms() + s->lease_ms;
		ok = ok && ddb_put(names, "#l", json_object_new_string(DDB_LEASE)) &&
		     ddb_put(names, "#e", json_object_new_string(DDB_EXPIRES)) &&
		     ddb_put(values, ":until", ddb_attr_n(until)) &&
		     ddb_put(values, ":exp", ddb_attr_n(lock_expiry(until))) &&
		     ddb_put(b, "UpdateExpression",
		             json_object_new_string("SET #l = :until, #e = :exp"));
	}
	ok = ddb_put(b, "ExpressionAttributeNames", names) && ok;
	ok = ddb_put(b, "ExpressionAttributeValues", values) && ok;
	if (!ok) {
		json_object_put(b);
		return NULL;
	}
	return b;
}

/* Adds a taken lock to the lease keeper, which starts renewing on first use. */
static int track(aks_store_impl *s, aks_store_lock *lk, aks_error **err)
{
	if (aks_lease_track(&s->leases, &lk->lease, lk) == 0)
		return AKS_OK;
	return s->host->error_set(err, AKS_ENOMEM,
	                          DDB_NAME " store: cannot start the lease renewal thread");
}

static void release_item(aks_store_impl *s, aks_store_lock *lk)
{
	json_object *body = owned_body(s, lk, false), *out = NULL;
	aks_error *err = NULL;
	int rc = body ? ddb_request(s, "DeleteItem", "release a lock", body, CONDITION_FAILED, NULL,
	                            &out, &err)
	              : AKS_ENOMEM;
	json_object_put(body);
	json_object_put(out);
	if (rc < 0)
		s->host->log(AKS_LOG_WARNING, DDB_NAME,
		             "could not release a lock (it frees itself when its lease ends): %s",
		             err ? s->host->error_message(err) : "out of memory");
	s->host->error_free(err);
}

static int busy_timeout(aks_store_impl *s, const aks_call *call, aks_error **err)
{
	return s->host->error_set(err, AKS_ETIMEOUT,
	                          "timed out after %g s waiting for the sandbox session, busy "
	                          "with another operation",
	                          call ? call->timeout : s->request_timeout_s);
}

static int busy_cancelled(aks_store_impl *s, aks_error **err)
{
	return s->host->error_set(err, AKS_ECANCELLED,
	                          "cancelled while waiting for the sandbox session");
}

int ddb_lock(aks_store_impl *s, const char *ns, const char *key, const aks_call *call,
             aks_store_lock **out, aks_error **err)
{
	const aks_host_api *host = s->host;
	*out = NULL;
	aks_store_lock *lk = calloc(1, sizeof(*lk));
	if (!lk || !(lk->ns = strdup(ns)) || !(lk->key = strdup(key)) || ddb_token(lk->owner) < 0) {
		free_lock(lk);
		return host->error_set(err, AKS_ENOMEM,
		                       DDB_NAME " store: out of memory or randomness");
	}
	int rc, delay = DDB_POLL_FIRST_MS;
	for (;;) {
		if (call && host->cancelled(call)) {
			rc = busy_cancelled(s, err);
			break;
		}
		json_object *body = acquire_body(s, lk), *answer = NULL;
		aks_error *e = NULL;
		rc = body ? ddb_request(s, "PutItem", "take a lock", body, CONDITION_FAILED, call,
		                        &answer, &e)
		          : host->error_set(&e, AKS_ENOMEM, "out of memory");
		json_object_put(body);
		json_object_put(answer);
		/* The request ended with the call: worded as the wait's end. */
		if (rc == AKS_ECANCELLED)
			rc = busy_cancelled(s, err);
		else if (rc == AKS_ETIMEOUT)
			rc = busy_timeout(s, call, err);
		else if (rc < 0)
			rc = host->error_set(err, rc, "%s", host->error_message(e));
		host->error_free(e);
		if (rc != DDB_FAULT)
			break;
		rc = AKS_OK;
		int64_t wait = delay;
		if (call && call->deadline_ms > 0) {
			int64_t left = call->deadline_ms - host->now_ms();
			if (left <= 0) {
				rc = busy_timeout(s, call, err);
				break;
			}
			if (left < wait)
				wait = left;
		}
		struct pollfd pfd = {call ? host->cancel_fd(call) : -1, POLLIN, 0};
		poll(&pfd, pfd.fd >= 0 ? 1 : 0, (int)wait);
		if (delay < DDB_POLL_MAX_MS)
			delay = delay * 2 > DDB_POLL_MAX_MS ? DDB_POLL_MAX_MS : delay * 2;
	}
	if (rc == AKS_OK && (rc = track(s, lk, err)) < 0)
		release_item(s, lk);
	if (rc < 0) {
		free_lock(lk);
		return rc;
	}
	*out = lk;
	return AKS_OK;
}

void ddb_unlock(aks_store_impl *s, aks_store_lock *lk)
{
	if (!lk)
		return;
	aks_lease_untrack(&s->leases, &lk->lease);
	release_item(s, lk);
	free_lock(lk);
}

/* ---- renewal ---- */

/* One renewal, on a copy of the lock's names (the holder may unlock meanwhile). */
static void renew_one(aks_store_impl *s, const aks_store_lock *lk)
{
	json_object *body = owned_body(s, lk, true), *out = NULL;
	aks_error *err = NULL;
	int rc = body ? ddb_request(s, "UpdateItem", "renew a lock's lease", body, CONDITION_FAILED,
	                            NULL, &out, &err)
	              : AKS_ENOMEM;
	json_object_put(body);
	json_object_put(out);
	char ns[4 * AKS_STORE_NAME_MAX + 8], key[4 * AKS_STORE_NAME_MAX + 8];
	if (rc != AKS_OK) {
		aks__text_printable(ns, sizeof(ns), lk->ns, strlen(lk->ns));
		aks__text_printable(key, sizeof(key), lk->key, strlen(lk->key));
	}
	if (rc == DDB_FAULT)
		s->host->log(AKS_LOG_WARNING, DDB_NAME,
		             "the lease of lock '%s' of '%s' ended before it was renewed: another "
		             "process may now hold it",
		             key, ns);
	else if (rc < 0)
		s->host->log(AKS_LOG_WARNING, DDB_NAME,
		             "could not renew the lease of lock '%s' of '%s' (retrying): %s", key,
		             ns, err ? s->host->error_message(err) : "out of memory");
	s->host->error_free(err);
}

/* A copy of the lock's names: the holder may unlock it during a renewal pass. */
static void *copy_lock(const void *lock)
{
	const aks_store_lock *lk = lock;
	aks_store_lock *c = calloc(1, sizeof(*c));
	if (!c || !(c->ns = strdup(lk->ns)) || !(c->key = strdup(lk->key))) {
		free_lock(c);
		return NULL;
	}
	memcpy(c->owner, lk->owner, sizeof(c->owner));
	return c;
}

/* The keeper's pass: each lock on its own, so one whose copy is missing holds up no other. */
static void renew(void *ctx, void *const *copies, size_t n)
{
	aks_store_impl *s = ctx;
	if (!copies) {
		s->host->log(AKS_LOG_WARNING, DDB_NAME, "out of memory renewing lock leases");
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (copies[i])
			renew_one(s, copies[i]);
		else
			s->host->log(AKS_LOG_WARNING, DDB_NAME,
			             "out of memory renewing lock leases");
	}
}

static void free_copy(void *copy)
{
	free_lock(copy);
}

static const aks_lease_ops lease_ops = {copy_lock, free_copy, renew};

void ddb_lock_init(aks_store_impl *s)
{
	aks_lease_init(&s->leases, s->lease_ms, &lease_ops, s);
}

void ddb_lock_stop(aks_store_impl *s)
{
	aks_lease_fini(&s->leases);
}
