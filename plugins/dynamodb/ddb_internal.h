/*
 * plugins/dynamodb/ddb_internal.h - what the files of the dynamodb store share:
 *   dynamodb.c     the plugin: descriptor, config block, init and fini, the operation table
 *   ddb_client.c   AWS set up at first use (region, endpoint, credentials), the table checked
 *                  (and created with auto_provision), one request with its errors worded
 *   ddb_records.c  update, get, scan, namespaces, put_expiring
 *   ddb_lock.c     named locks as leased items, renewed while held (aks_lease.h)
 *   ddb_item.c     the table layout, pure (ddb_item.h)
 * Layout, semantics and limits: docs/plugins/dynamodb.md.
 */
#ifndef AKS_DDB_INTERNAL_H
#define AKS_DDB_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <aksandbox/store.h>

#include "aks_aws.h"
#include "aks_cloud.h"
#include "aks_lease.h"
#include "ddb_item.h"

#define DDB_NAME "dynamodb"

/* One lock held by this process: renewed by the lease keeper until unlock. */
struct aks_store_lock {
	char *ns, *key;
	char owner[33]; /* random hex: proves ownership to the conditional writes */
	aks_lease_entry lease;
};

struct aks_store_impl {
	const aks_host_api *host;
	aks_cloud cloud; /* every request's: it keeps a connection per request in flight */
	char *table;
	char *region_setting;   /* the block's region (NULL: the default chain's) */
	char *endpoint_setting; /* the block's endpoint_url */
	bool auto_provision;
	double request_timeout_s;
	int64_t lease_ms;

	/* Resolved at the first request (a host that never touches its state needs no AWS
	 * settings), under setup_mu; set up again after the table went missing. */
	pthread_mutex_t setup_mu;
	bool aws_ready, table_ready;
	aks_aws_env env;
	char *endpoint;
	aks_aws_source *source;
	aks_aws_service svc;

	/* Locks held, and the thread that renews their leases (ddb_lock_init, after the
	 * config: it needs lease_ms). */
	aks_lease_keeper leases;
};

/* ---- requests (ddb_client.c) ---- */

/* What ddb_request returns, besides AKS_* errors, for the fault the caller said it expects
 * (ConditionalCheckFailedException for a conditional write): no error is set. */
#define DDB_FAULT 1

/*
 * Sends the DynamoDB operation op ("GetItem") with body (TableName is added), setting the
 * store up first if it is not yet. `what` words the request for messages ("read a record").
 * call: the caller's (lock), or NULL for the store's own deadline of request_timeout; either
 * way no request outlives request_timeout. AKS_OK with the answer in *out; DDB_FAULT when
 * the service answered expected_fault (NULL: none expected); otherwise an error naming the
 * table, its region and endpoint: AKS_EIO (the service refused, unreachable, no answer in
 * time), AKS_ETIMEOUT / AKS_ECANCELLED (the caller's call ended), AKS_ENOMEM.
 */
int ddb_request(aks_store_impl *s, const char *op, const char *what, json_object *body,
                const char *expected_fault, const aks_call *call, json_object **out,
                aks_error **err);
/* Frees what the set-up made (fini, when no request runs). */
void ddb_client_free(aks_store_impl *s);

/* The wall clock in ms: DynamoDB's TTL and the leases are epoch times, shared across hosts. */
int64_t ddb_now_ms(void);

/* ---- locks (ddb_lock.c) ---- */

int ddb_lock(aks_store_impl *s, const char *ns, const char *key, const aks_call *call,
             aks_store_lock **out, aks_error **err);
void ddb_unlock(aks_store_impl *s, aks_store_lock *lk);
/* Sets up the lease keeper (init, once lease_ms is read). */
void ddb_lock_init(aks_store_impl *s);
/* Stops the renewal thread and frees the keeper (fini; also after a failed init). */
void ddb_lock_stop(aks_store_impl *s);

/* ---- records (ddb_records.c) ---- */

int ddb_update(aks_store_impl *s, const char *ns, const char *key, aks_store_txn_fn fn, void *ctx,
               aks_error **err);
int ddb_get(aks_store_impl *s, const char *ns, const char *key, aks_store_record_fn fn, void *ctx,
            aks_error **err);
int ddb_scan(aks_store_impl *s, const char *ns, const char *prefix, aks_store_record_fn fn,
             void *ctx, aks_error **err);
int ddb_namespaces(aks_store_impl *s, aks_store_name_fn fn, void *ctx, aks_error **err);
int ddb_put_expiring(aks_store_impl *s, const char *ns, const char *key, const char *value,
                     size_t len, int64_t ttl_seconds, aks_error **err);

#endif /* AKS_DDB_INTERNAL_H */
