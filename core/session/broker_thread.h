/*
 * core/session/broker_thread.h - the thread broker's pool (reference §5.4): a fixed
 * number of worker threads, started on the first submission, that run the
 * manager's work while the submitter waits a bounded time for it.
 *
 * A submission the submitter stops waiting for is "promoted": the work goes
 * on, and when it ends the worker itself runs the job's `promoted_done` (the
 * manager records the task's outcome in the store there), then frees it.
 * The pool knows nothing of sandboxes: jobs carry a key (the session), and
 * jobs with equal keys run one at a time in submission order, waiting in the
 * queue rather than on a worker. The manager's session lock still serialises
 * a session across processes. Internal API (aks__ names).
 */
#ifndef AKS_CORE_SESSION_BROKER_THREAD_H
#define AKS_CORE_SESSION_BROKER_THREAD_H

#include <stdbool.h>

#include "internal.h"

/* Worker threads per pool: how many sessions run at once in one process. */
#define AKS_BROKER_THREADS 4
/* How long closing the pool lets running and queued work finish before it
 * cancels what is left (seconds); it then joins every thread. */
#define AKS_BROKER_CLOSE_GRACE 5.0

typedef struct aks_broker_pool aks_broker_pool;

typedef struct aks_broker_ops {
	void (*run)(void *ctx);           /* the work, on a worker thread */
	int (*promote)(void *ctx);        /* the submitter gave up waiting; < 0 refuses */
	void (*promoted_done)(void *ctx); /* after run, on the worker, when promoted */
	void (*cancel)(void *ctx);        /* ask running or queued work to stop (any thread) */
	void (*free)(void *ctx);          /* the pool's last use of a promoted job */
} aks_broker_ops;

/* A pool of `threads` workers (0: AKS_BROKER_THREADS); no thread starts yet. */
int aks__broker_pool_new(unsigned threads, aks_broker_pool **out, aks_error **err);

/*
 * Queues ctx and waits for its run to end: `wait` seconds at most (< 0: no
 * bound; 0: not at all). `key` (copied; NULL: none) serialises it with
 * every other job of the same key. While waiting, a triggered `caller_cancel` is passed
 * on through ops->cancel. Returns:
 *   AKS_OK - the run ended; ctx is the caller's again.
 *   1      - promoted: ops->promote(ctx) returned >= 0 before the run ended
 *            (it runs under the job's lock, so strictly before promoted_done);
 *            the pool owns ctx now and frees it with ops->free.
 * When promote refuses, the submitter waits on without a bound. < 0: the
 * pool is closed or a thread could not start (ctx is still the caller's).
 */
int aks__broker_submit(aks_broker_pool *p, const aks_broker_ops *ops, void *ctx, const char *key,
                       double wait, const aks_cancel *caller_cancel, aks_error **err);

/* Stops accepting work, lets queued and running work finish for up to
 * AKS_BROKER_CLOSE_GRACE seconds, cancels the rest, joins every worker and
 * frees the pool. NULL is a no-op. */
void aks__broker_pool_free(aks_broker_pool *p);

/* For tests: jobs queued or running. */
unsigned aks__broker_pending(aks_broker_pool *p);

#endif /* AKS_CORE_SESSION_BROKER_THREAD_H */
