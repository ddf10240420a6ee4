/*
 * core/session/broker_thread.c - the thread broker's worker pool (reference §5.4).
 *
 * Each job has two owners until one of them lets go: the submitter, who
 * waits on the job's condition variable, and the worker that runs it. The
 * job's mutex orders the submitter's promotion before the worker's
 * completion, so a promoted task is always recorded as pending before its
 * outcome is written, never after.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "session/broker_thread.h"

typedef struct job {
	const aks_broker_ops *ops;
	void *ctx;
	char *key;          /* jobs with equal keys run one at a time, in order; NULL: any time */
	pthread_mutex_t mu; /* guards done, promoted, refs */
	pthread_cond_t cv;
	bool done, promoted;
	int refs;
	struct job *next;
} job;

struct aks_broker_pool {
	pthread_mutex_t mu;
	pthread_cond_t work; /* workers: a job is queued, or the pool closes */
	pthread_cond_t idle; /* the closer: nothing queued or running */
	job *head, *tail;
	job **running; /* the job of each worker slot, or NULL */
	pthread_t *threads;
	unsigned nthreads, started, busy; /* busy: queued + running */
	bool closing;
};

typedef struct worker_arg {
	aks_broker_pool *p;
	unsigned slot;
} worker_arg;

static void mono_deadline(struct timespec *ts, double seconds)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	if (seconds <= 0)
		return;
	double whole = (double)(time_t)seconds;
	ts->tv_sec += (time_t)whole;
	ts->tv_nsec += (long)((seconds - whole) * 1e9);
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

static bool mono_passed(const struct timespec *deadline)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > deadline->tv_sec ||
	       (now.tv_sec == deadline->tv_sec && now.tv_nsec >= deadline->tv_nsec);
}

static int cond_init_mono(pthread_cond_t *cv)
{
	pthread_condattr_t a;
	if (pthread_condattr_init(&a) != 0)
		return -1;
	int rc = pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	if (rc == 0)
		rc = pthread_cond_init(cv, &a);
	pthread_condattr_destroy(&a);
	return rc == 0 ? 0 : -1;
}

static void job_unref(job *j)
{
	pthread_mutex_lock(&j->mu);
	bool last = --j->refs == 0;
	pthread_mutex_unlock(&j->mu);
	if (last) {
		pthread_mutex_destroy(&j->mu);
		pthread_cond_destroy(&j->cv);
		free(j->key);
		free(j);
	}
}

/* True when a worker runs a job with this key (pool locked). */
static bool key_running(const aks_broker_pool *p, const char *key)
{
	for (unsigned i = 0; i < p->nthreads; i++)
		if (p->running[i] && p->running[i]->key && strcmp(p->running[i]->key, key) == 0)
			return true;
	return false;
}

/* Unlinks and returns the first queued job that may run now: the oldest whose key no worker
 * is running. Waiting jobs of a busy session stay queued instead of holding a worker on the
 * session's lock, so other sessions keep every worker (pool locked). */
static job *take_runnable(aks_broker_pool *p)
{
	for (job **link = &p->head, *prev = NULL; *link; prev = *link, link = &(*link)->next) {
		job *j = *link;
		if (j->key && key_running(p, j->key))
			continue;
		*link = j->next;
		if (p->tail == j)
			p->tail = prev;
		j->next = NULL;
		return j;
	}
	return NULL;
}

/* The run has ended: hand the outcome to the waiting submitter, or, for a
 * promoted job, finish it here. */
static void job_finish(job *j)
{
	pthread_mutex_lock(&j->mu);
	j->done = true;
	bool promoted = j->promoted;
	pthread_cond_signal(&j->cv);
	pthread_mutex_unlock(&j->mu);
	if (promoted) {
		j->ops->promoted_done(j->ctx);
		j->ops->free(j->ctx);
	}
	job_unref(j);
}

static void *worker_main(void *arg)
{
	worker_arg wa = *(worker_arg *)arg;
	free(arg);
	aks_broker_pool *p = wa.p;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		job *j;
		while (!(j = take_runnable(p)) && !(p->closing && !p->head))
			pthread_cond_wait(&p->work, &p->mu);
		if (!j)
			break; /* closing, and the queue is drained */
		p->running[wa.slot] = j;
		pthread_mutex_unlock(&p->mu);

		j->ops->run(j->ctx);

		pthread_mutex_lock(&p->mu);
		p->running[wa.slot] = NULL;
		if (j->key)
			pthread_cond_broadcast(&p->work); /* the key's next job may run now */
		if (--p->busy == 0)
			pthread_cond_broadcast(&p->idle);
		pthread_mutex_unlock(&p->mu);
		job_finish(j);
		pthread_mutex_lock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int aks__broker_pool_new(unsigned threads, aks_broker_pool **out, aks_error **err)
{
	aks_broker_pool *p = calloc(1, sizeof(*p));
	if (!p)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	p->nthreads = threads ? threads : AKS_BROKER_THREADS;
	p->running = calloc(p->nthreads, sizeof(*p->running));
	p->threads = calloc(p->nthreads, sizeof(*p->threads));
	if (!p->running || !p->threads) {
		free(p->running);
		free(p->threads);
		free(p);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->work, NULL);
	if (cond_init_mono(&p->idle) < 0) {
		pthread_cond_destroy(&p->work);
		pthread_mutex_destroy(&p->mu);
		free(p->running);
		free(p->threads);
		free(p);
		return aks__error_set(err, AKS_EIO, "cannot create a condition variable");
	}
	*out = p;
	return AKS_OK;
}

/* Starts the missing workers (pool locked). At least one must be running. */
static int start_workers(aks_broker_pool *p, aks_error **err)
{
	int rc = 0;
	while (p->started < p->nthreads) {
		worker_arg *wa = malloc(sizeof(*wa));
		if (!wa) {
			rc = ENOMEM;
			break;
		}
		*wa = (worker_arg){p, p->started};
		if ((rc = pthread_create(&p->threads[p->started], NULL, worker_main, wa)) != 0) {
			free(wa);
			break;
		}
		p->started++;
	}
	if (p->started == 0)
		return aks__error_set(err, AKS_EBROKER,
		                      "cannot start the sandbox thread broker: %s", strerror(rc));
	if (rc != 0)
		aks__log(AKS_LOG_WARNING, "sandbox",
		         "the sandbox thread broker runs with %u of %u threads: %s", p->started,
		         p->nthreads, strerror(rc));
	return AKS_OK;
}

/* A job for ctx, referenced by its submitter and its worker. */
static int job_new(const aks_broker_ops *ops, void *ctx, const char *key, job **out,
                   aks_error **err)
{
	job *j = calloc(1, sizeof(*j));
	if (!j || (key && !(j->key = strdup(key)))) {
		free(j);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	if (cond_init_mono(&j->cv) < 0) {
		free(j->key);
		free(j);
		return aks__error_set(err, AKS_EIO, "cannot create a condition variable");
	}
	pthread_mutex_init(&j->mu, NULL);
	j->ops = ops;
	j->ctx = ctx;
	j->refs = 2; /* the submitter's and the worker's */
	*out = j;
	return AKS_OK;
}

/* Queues j for the workers (started when missing). On failure j is the caller's still. */
static int enqueue(aks_broker_pool *p, job *j, aks_error **err)
{
	pthread_mutex_lock(&p->mu);
	int rc = p->closing ? aks__error_set(err, AKS_EBROKER, "sandbox thread broker is closed")
	                    : start_workers(p, err);
	if (rc == AKS_OK) {
		if (p->tail)
			p->tail->next = j;
		else
			p->head = j;
		p->tail = j;
		p->busy++;
		pthread_cond_signal(&p->work);
	}
	pthread_mutex_unlock(&p->mu);
	return rc;
}

/* Sleeps on the job's condition (job locked) until it is signalled, the deadline passes
 * (when bounded) or, with a caller's token not yet passed on, for a 50 ms slice: the host's
 * token has no way to wake us, so it is looked at that often. */
static void wait_slice(job *j, const struct timespec *deadline, bool bounded, bool poll_cancel)
{
	if (!poll_cancel) {
		if (bounded)
			pthread_cond_timedwait(&j->cv, &j->mu, deadline);
		else
			pthread_cond_wait(&j->cv, &j->mu);
		return;
	}
	struct timespec slice;
	mono_deadline(&slice, 0.05);
	if (bounded && (deadline->tv_sec < slice.tv_sec ||
	                (deadline->tv_sec == slice.tv_sec && deadline->tv_nsec < slice.tv_nsec)))
		slice = *deadline;
	pthread_cond_timedwait(&j->cv, &j->mu, &slice);
}

/* The submitter's wait (see aks__broker_submit): AKS_OK when the run ended, 1 promoted. */
static int wait_for(job *j, double wait, const aks_cancel *caller_cancel)
{
	struct timespec deadline;
	mono_deadline(&deadline, wait);
	bool bounded = wait >= 0, cancel_passed = false;
	pthread_mutex_lock(&j->mu);
	while (!j->done) {
		if (bounded && mono_passed(&deadline)) {
			if (j->ops->promote(j->ctx) >= 0) {
				j->promoted = true;
				pthread_mutex_unlock(&j->mu);
				return 1;
			}
			bounded = false; /* could not record a task: wait for the outcome */
		}
		bool poll_cancel = caller_cancel && !cancel_passed;
		wait_slice(j, &deadline, bounded, poll_cancel);
		if (poll_cancel && aks_cancel_is_triggered(caller_cancel)) {
			j->ops->cancel(j->ctx);
			cancel_passed = true;
		}
	}
	pthread_mutex_unlock(&j->mu);
	return AKS_OK;
}

int aks__broker_submit(aks_broker_pool *p, const aks_broker_ops *ops, void *ctx, const char *key,
                       double wait, const aks_cancel *caller_cancel, aks_error **err)
{
	job *j = NULL;
	int rc = job_new(ops, ctx, key, &j, err);
	if (rc == AKS_OK)
		rc = enqueue(p, j, err);
	if (rc < 0) {
		if (j) {
			j->refs = 1; /* no worker will ever see it */
			job_unref(j);
		}
		return rc;
	}
	rc = wait_for(j, wait, caller_cancel);
	job_unref(j);
	return rc;
}

unsigned aks__broker_pending(aks_broker_pool *p)
{
	pthread_mutex_lock(&p->mu);
	unsigned n = p->busy;
	pthread_mutex_unlock(&p->mu);
	return n;
}

void aks__broker_pool_free(aks_broker_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->closing = true;
	pthread_cond_broadcast(&p->work);
	struct timespec deadline;
	mono_deadline(&deadline, AKS_BROKER_CLOSE_GRACE);
	while (p->busy > 0 && p->started > 0 &&
	       pthread_cond_timedwait(&p->idle, &p->mu, &deadline) != ETIMEDOUT)
		;
	if (p->busy > 0 && p->started > 0) {
		aks__log(AKS_LOG_WARNING, "sandbox",
		         "closing the sandbox thread broker: cancelling %u unfinished operation(s)",
		         p->busy);
		for (job *j = p->head; j; j = j->next)
			j->ops->cancel(j->ctx);
		for (unsigned i = 0; i < p->nthreads; i++)
			if (p->running[i])
				p->running[i]->ops->cancel(p->running[i]->ctx);
	}
	pthread_mutex_unlock(&p->mu);
	for (unsigned i = 0; i < p->started; i++)
		pthread_join(p->threads[i], NULL);
	pthread_cond_destroy(&p->work);
	pthread_cond_destroy(&p->idle);
	pthread_mutex_destroy(&p->mu);
	free(p->running);
	free(p->threads);
	free(p);
}
