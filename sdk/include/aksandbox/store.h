/*
 * aksandbox/store.h - the store contract: where the host keeps its state.
 *
 * A store plugin's descriptor has kind AKS_PLUGIN_STORE and its `ops` points
 * at a static const aks_store_ops. The host keeps each conversation's sandbox
 * sessions and promoted tasks in a store, so that successive processes, and
 * several processes at once (on one machine, or on many with a shared store),
 * see the same sessions. The default is the built-in file store in the state
 * directory (docs/state-store.md); `sandbox.state_store` in config.yaml
 * selects another.
 *
 * Model. A store holds *records*: byte strings (the host writes UTF-8 JSON
 * objects) named by a namespace and a key. Namespaces and keys are 1 to
 * AKS_STORE_NAME_MAX bytes, any bytes but NUL; the store gives them no
 * meaning and must keep any two distinct names apart (the file store encodes
 * them, a Redis store would use them in key names).
 *
 * Operations (all mandatory but put_expiring):
 *  - update: a read-modify-write transaction on one record, atomic with
 *    respect to every other update of that record by any thread, process or
 *    host sharing the store. The host's function decides the new value from
 *    the current one; the store writes it (or deletes the record) before it
 *    lets the next update of the record in. A crash at any instant leaves the
 *    old value or the new one, never a mix. A store may run the function more
 *    than once (optimistic concurrency: read, decide, write if unchanged,
 *    else again); only the last run's decision counts.
 *  - get: the current value of one record, as some completed update left it
 *    (never a torn value). Reads need not lock.
 *  - scan: every record of a namespace whose key starts with a prefix. Each
 *    value delivered is one that some update left; records added or removed
 *    during the scan may or may not be seen.
 *  - namespaces: every namespace that has at least one record (a namespace
 *    whose last record was deleted may still be listed while that happens).
 *  - put_expiring (optional): writes a record that the store removes by
 *    itself after a time to live, for the queue broker's response records.
 *  - lock / unlock: a named mutual exclusion lock, independent of the
 *    records, held across a whole sandbox operation (the per-session lock).
 *    Waiting honours the call's deadline (AKS_ETIMEOUT) and cancellation
 *    (AKS_ECANCELLED). A lock held by a process that dies must not stay held
 *    for ever (the file store's dies with the process; a networked store uses
 *    a lease it renews).
 *
 * Threading: every operation may be called from several threads at once.
 * Reentrancy: the host never calls into the store from inside an update's
 * function.
 *
 * Ownership: see plugin.h. Values handed to a callback are borrowed for the
 * duration of the callback; the new value a transaction function returns is
 * the host's and stays valid until update returns.
 */
#ifndef AKSANDBOX_STORE_H
#define AKSANDBOX_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <aksandbox/common.h>
#include <aksandbox/plugin.h>
#include <aksandbox/provider.h> /* aks_call: the deadline and cancellation of a lock wait */

#ifdef __cplusplus
extern "C" {
#endif

/* The longest namespace or key, in bytes. */
#define AKS_STORE_NAME_MAX 256

/* What a transaction function decides. */
typedef enum aks_store_action {
	AKS_STORE_KEEP = 0,  /* leave the record as it is (absent stays absent) */
	AKS_STORE_PUT = 1,   /* write *new_value (creating the record if absent) */
	AKS_STORE_DELETE = 2 /* remove the record (absent is fine) */
} aks_store_action;

/*
 * The host's side of an update. `value` is the record's current bytes (not
 * NUL-terminated as far as the store is concerned; NULL when the record does
 * not exist). Sets *action, and for AKS_STORE_PUT *new_value and *new_len.
 * A non-zero return aborts the update: the store writes nothing and update
 * returns that same code, with the error the function set.
 */
typedef int (*aks_store_txn_fn)(void *ctx, const char *value, size_t len, int *action,
                                const char **new_value, size_t *new_len, aks_error **err);

/* Receives one record (get, scan). A non-zero return stops a scan, which
 * then returns that code. */
typedef int (*aks_store_record_fn)(void *ctx, const char *key, const char *value, size_t len);

/* Receives one namespace name. A non-zero return stops the listing. */
typedef int (*aks_store_name_fn)(void *ctx, const char *ns);

/* Completed privately by each store plugin. */
typedef struct aks_store_impl aks_store_impl;
typedef struct aks_store_lock aks_store_lock;

#define AKS_STORE_OPS_VERSION 1

typedef struct aks_store_ops {
	uint32_t struct_version; /* AKS_STORE_OPS_VERSION */
	uint32_t struct_size;    /* sizeof(aks_store_ops) */

	/* Builds the store from its validated config block. Connect lazily or
	 * here; a store that cannot reach its backend when used returns AKS_EIO
	 * (or AKS_EBROKER) with a message naming it. */
	int (*init)(const aks_host_api *host, const aks_config *config, aks_store_impl **out,
	            aks_error **err);
	/* Releases the store; called once, after every lock was released. */
	void (*fini)(aks_store_impl *store);

	int (*update)(aks_store_impl *store, const char *ns, const char *key, aks_store_txn_fn fn,
	              void *ctx, aks_error **err);
	/* Calls fn once with the record; AKS_ENOTFOUND (no error set, fn not
	 * called) when it does not exist. Returns fn's non-zero return as is. */
	int (*get)(aks_store_impl *store, const char *ns, const char *key, aks_store_record_fn fn,
	           void *ctx, aks_error **err);
	/* prefix "" matches every key. The order of the records is unspecified. */
	int (*scan)(aks_store_impl *store, const char *ns, const char *prefix,
	            aks_store_record_fn fn, void *ctx, aks_error **err);
	int (*namespaces)(aks_store_impl *store, aks_store_name_fn fn, void *ctx, aks_error **err);

	/* Waits for the lock named (ns, key); `call` carries the deadline and the
	 * cancellation (host->now_ms, host->cancelled, host->cancel_fd). */
	int (*lock)(aks_store_impl *store, const char *ns, const char *key, const aks_call *call,
	            aks_store_lock **out, aks_error **err);
	/* Releases a lock taken by lock(); never fails. */
	void (*unlock)(aks_store_impl *store, aks_store_lock *lock);

	/* Optional (NULL: the store cannot serve as the queue broker's response
	 * store). Writes the record, replacing any value, and removes it by
	 * itself `ttl_seconds` (> 0) later. */
	int (*put_expiring)(aks_store_impl *store, const char *ns, const char *key,
	                    const char *value, size_t len, int64_t ttl_seconds, aks_error **err);
} aks_store_ops;

#define AKS_STORE_OPS_INIT                                                                         \
	.struct_version = AKS_STORE_OPS_VERSION, .struct_size = sizeof(aks_store_ops)

#ifdef __cplusplus
}
#endif

#endif /* AKSANDBOX_STORE_H */
