/*
 * plugins/common/aks_lease.h - the lease keeper of a networked store's named locks.
 *
 * A store that leases its locks (redis, dynamodb: "a lock held by a process that dies must
 * not stay held for ever") tracks each lock it takes here until it unlocks it. One thread,
 * started at the first track, wakes every third of the lease, copies what renewing the held
 * locks needs under the keeper's mutex, and renews those copies outside it: no request is
 * made under the mutex, and a holder may unlock (and free its lock) during a renewal pass.
 * How a lease is renewed is the store's (callbacks); the keeper has no I/O and links only
 * libc and pthreads.
 */
#ifndef AKS_LEASE_H
#define AKS_LEASE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Embedded in the store's lock, so tracking never allocates (no failure to undo). */
typedef struct aks_lease_entry {
	struct aks_lease_entry *next;
	const void *lock; /* what copy() is given */
} aks_lease_entry;

typedef struct aks_lease_ops {
	/* What renewing `lock` needs, as a copy the renewal owns; NULL when out of memory. Runs
	 * under the keeper's mutex, which track and untrack take: no request, nothing slow. */
	void *(*copy)(const void *lock);
	void (*free_copy)(void *copy);
	/* Renews copies[0..n), on the keeper's thread (all signals blocked) and outside its
	 * mutex; the keeper frees them after. copies[i] is NULL when that copy ran out of memory,
	 * copies itself NULL when the snapshot's array did. Called only when n > 0. */
	void (*renew)(void *ctx, void *const *copies, size_t n);
} aks_lease_ops;

/* The fields are the keeper's own. */
typedef struct aks_lease_keeper {
	const aks_lease_ops *ops;
	void *ctx;
	int64_t every_ms;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	aks_lease_entry *held; /* newest first, the order renew() sees */
	bool ready, started, stopping;
	pthread_t thread;
} aks_lease_keeper;

/* Sets up a keeper that renews each lease_ms / 3 (at least 1 ms); no thread yet. */
void aks_lease_init(aks_lease_keeper *k, int64_t lease_ms, const aks_lease_ops *ops, void *ctx);
/* Tracks a taken lock, starting the renewal thread on first use: 0, or the errno of a
 * thread that could not start (the lock is then not tracked). */
int aks_lease_track(aks_lease_keeper *k, aks_lease_entry *e, const void *lock);
/* Stops renewing a lock (before it is released): no pass that starts later copies it. */
void aks_lease_untrack(aks_lease_keeper *k, aks_lease_entry *e);
/* Stops the thread and joins it (a pass under way ends first); no renewal follows. Locks
 * tracked later are not renewed. */
void aks_lease_stop(aks_lease_keeper *k);
/* aks_lease_stop, then frees the keeper. A zeroed keeper never set up is a no-op, so a
 * store's fini may run after an init that failed before aks_lease_init. */
void aks_lease_fini(aks_lease_keeper *k);

#endif /* AKS_LEASE_H */
