/*
 * plugins/common/lease.c - the lease keeper (aks_lease.h): the held locks, the renewal
 * thread and its periodic snapshot.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>

#include "aks_lease.h"

void aks_lease_init(aks_lease_keeper *k, int64_t lease_ms, const aks_lease_ops *ops, void *ctx)
{
	*k = (aks_lease_keeper){0};
	k->ops = ops;
	k->ctx = ctx;
	k->every_ms = lease_ms / 3 > 0 ? lease_ms / 3 : 1;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	/* A wall clock set back would otherwise delay renewals past the lease. */
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_mutex_init(&k->mu, NULL);
	pthread_cond_init(&k->cv, &ca);
	pthread_condattr_destroy(&ca);
	k->ready = true;
}

/* Waits one interval, or until stop; under k->mu. False: stopping. */
static bool wait_interval(aks_lease_keeper *k)
{
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += k->every_ms / 1000;
	until.tv_nsec += (k->every_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	int e = 0;
	while (!k->stopping && e != ETIMEDOUT)
		e = pthread_cond_timedwait(&k->cv, &k->mu, &until);
	return !k->stopping;
}

/* Copies of the held locks, under k->mu: the array (NULL when out of memory) and its
 * length in *n. */
static void **snapshot(aks_lease_keeper *k, size_t *n)
{
	*n = 0;
	for (aks_lease_entry *e = k->held; e; e = e->next)
		(*n)++;
	void **v = *n ? calloc(*n, sizeof(*v)) : NULL;
	size_t i = 0;
	for (aks_lease_entry *e = k->held; v && e; e = e->next)
		v[i++] = k->ops->copy(e->lock);
	return v;
}

static void *renewer_main(void *arg)
{
	aks_lease_keeper *k = arg;
	/* The host's signals are for its own threads. */
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_mutex_lock(&k->mu);
	while (wait_interval(k)) {
		size_t n;
		void **v = snapshot(k, &n);
		pthread_mutex_unlock(&k->mu);
		if (n)
			k->ops->renew(k->ctx, v, n);
		for (size_t i = 0; v && i < n; i++)
			if (v[i])
				k->ops->free_copy(v[i]);
		free(v);
		pthread_mutex_lock(&k->mu);
	}
	pthread_mutex_unlock(&k->mu);
	return NULL;
}

int aks_lease_track(aks_lease_keeper *k, aks_lease_entry *e, const void *lock)
{
	int rc = 0;
	pthread_mutex_lock(&k->mu);
	/* Once stopped, no thread: none would be joined. */
	if (!k->started && !k->stopping) {
		rc = pthread_create(&k->thread, NULL, renewer_main, k);
		k->started = rc == 0;
	}
	if (rc == 0) {
		e->lock = lock;
		e->next = k->held;
		k->held = e;
	}
	pthread_mutex_unlock(&k->mu);
	return rc;
}

void aks_lease_untrack(aks_lease_keeper *k, aks_lease_entry *e)
{
	pthread_mutex_lock(&k->mu);
	for (aks_lease_entry **p = &k->held; *p; p = &(*p)->next) {
		if (*p == e) {
			*p = e->next;
			break;
		}
	}
	pthread_mutex_unlock(&k->mu);
}

void aks_lease_stop(aks_lease_keeper *k)
{
	pthread_mutex_lock(&k->mu);
	k->stopping = true;
	bool started = k->started;
	k->started = false; /* joined once */
	pthread_cond_broadcast(&k->cv);
	pthread_mutex_unlock(&k->mu);
	if (started)
		pthread_join(k->thread, NULL);
}

void aks_lease_fini(aks_lease_keeper *k)
{
	if (!k->ready)
		return;
	aks_lease_stop(k);
	pthread_mutex_destroy(&k->mu);
	pthread_cond_destroy(&k->cv);
	k->ready = false;
}
