/*
 * core/queue/worker.h - the queue broker's worker (reference §5.6), in two layers:
 *
 *  - the engine (worker_engine.c): one decoded request run to its completion against the
 *    worker's own profiles (§5.2 "run" and "process"), the session inventory it keeps in the
 *    response store, and one idle-sweep pass over that inventory;
 *  - the runtime (worker.c): the consumer loops on the input and output queues, the
 *    permanent-failure paths, completion truncation, the sweep's timer and a clean shutdown.
 *
 * `aksandbox worker` runs the runtime in its own process; the queue flavor's in_memory
 * topology runs it on threads inside the agent's process. Internal API (aks__ names).
 */
#ifndef AKS_CORE_QUEUE_WORKER_H
#define AKS_CORE_QUEUE_WORKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "queue/transport.h"
#include "queue/wire.h"
#include "store/store.h"

/* The response store's namespace: completion records keyed by task id, the session
 * inventory keyed by AKS_QUEUE_INVENTORY_PREFIX + the session key, and the record an idle
 * worker writes to learn whether a failing store answers again (it expires by itself). */
#define AKS_QUEUE_NS               "@queue"
#define AKS_QUEUE_INVENTORY_PREFIX "session:"
#define AKS_QUEUE_STORE_PROBE_KEY  "@store-probe"

/*
 * A session's key on the queue: its group id and the name of its inventory record. Sessions
 * are named by (namespace, id), so the key is "<byte length of ns>:<ns>/<id>" - the length
 * keeps ("a/b", "c") apart from ("a", "b/c"). per_call work has no key (no group). malloc'd;
 * NULL on ENOMEM.
 */
char *aks__queue_session_key(const char *ns, const char *id);

/* ---- the engine ---- */

typedef struct aks_worker_engine aks_worker_engine;

/* Over loaded settings (borrowed) and the response store (borrowed). */
int aks__worker_engine_new(aks_settings *settings, aks_state_store *responses,
                           aks_worker_engine **out, aks_error **err);
void aks__worker_engine_free(aks_worker_engine *e);

/*
 * Runs one request to its completion (*out, the caller's, freed with
 * aks__wire_completion_free): the profile's gates, the session's sandbox acquired (self-heal
 * included), the operation under the policy's timeout, the inventory updated before it
 * returns. Failures of the operation are completions (failed / timed_out, with error_type),
 * never returns; only AKS_ENOMEM is. `cancel` (may be NULL) stops the operation early; it
 * then completes as failed.
 */
int aks__worker_engine_process(aks_worker_engine *e, const aks_wire_request *req,
                               aks_cancel *cancel, aks_wire_completion **out);

/* One idle-sweep pass: every inventory record whose sandbox has been idle longer than its
 * idle_timeout loses it (destroyed under the session's lock, record removed). *destroyed
 * (may be NULL): how many. Only a failure to scan the store is returned. */
int aks__worker_engine_sweep(aks_worker_engine *e, size_t *destroyed, aks_error **err);

/* The garbage collector over the response store, which holds the inventory of what this
 * engine creates (session/owner.h: aks__owner_gc). */
struct json_object;
int aks__worker_engine_gc(aks_worker_engine *e, bool dry_run, struct json_object **report,
                          aks_error **err);
/* How many requests wait for the response store now (their session's lock cannot be taken
 * because the store does not answer). */
unsigned aks__worker_engine_store_waits(aks_worker_engine *e);

/* ---- the runtime ---- */

typedef struct aks_worker aks_worker;

typedef struct aks_worker_config {
	aks_transport *transport;   /* borrowed; serves both queues */
	aks_state_store *responses; /* borrowed; the response store */
	/* The engine, or a test's stand-in. process never fails but with AKS_ENOMEM; sweep may
	 * be NULL (no sweep). */
	int (*process)(void *ctx, const aks_wire_request *req, aks_cancel *cancel,
	               aks_wire_completion **out);
	int (*sweep)(void *ctx, size_t *destroyed, aks_error **err);
	/* May be NULL: how many requests process() holds waiting for the response store now
	 * (health: see aks_worker_stats.store_failing). */
	unsigned (*store_waits)(void *ctx);
	void *ctx;
	unsigned input_consumers;   /* threads on AKS_QUEUE_INPUT (>= 1) */
	unsigned output_consumers;  /* threads on AKS_QUEUE_OUTPUT (>= 1) */
	unsigned input_max_receive; /* deliveries before the permanent-failure path */
	unsigned output_max_receive;
	unsigned batch_size;              /* messages per fetch (>= 1) */
	int64_t inline_payload_max_bytes; /* completion records are truncated to fit */
	int64_t response_ttl;             /* seconds records live in the response store */
	double sweep_interval;            /* seconds between sweep passes */
	bool once; /* stop when both queues are drained (see aks__worker_wait) */
} aks_worker_config;

/* Starts the loops' threads (config is copied; what it points at is borrowed). */
int aks__worker_start(const aks_worker_config *config, aks_worker **out, aks_error **err);
/* Asks the worker to stop: no new fetches; in-flight requests finish (their completions are
 * sent and acked) for up to `grace` seconds, and are then cancelled and handed back to the
 * transport for redelivery. Safe from any thread; idempotent. */
void aks__worker_stop(aks_worker *w, double grace);
/* Waits for the worker to end (after a stop, or with `once` when both queues stayed empty
 * for a whole fetch wait), joins its threads. AKS_OK, or the first fatal loop error. */
int aks__worker_wait(aks_worker *w, aks_error **err);
void aks__worker_free(aks_worker *w);

/* Counters, for tests and health: messages processed, sent to the permanent-failure path,
 * nacked, and completions stored; and the worker's state now: requests running, a stop asked
 * for, consumer loops whose last fetch failed, how long ago the least recently seen loop
 * was last seen working (a fetch returns within about a second, a running request's
 * supervision wakes every second: a loop unseen for minutes is stuck), and whether the
 * response store is failing: the last attempt to store a completion record failed (it is
 * retried; the next success clears it), or a request waits for the store (store_waits). */
typedef struct aks_worker_stats {
	uint64_t requests, request_failures, nacks, stored, store_failures, dead_lettered;
	unsigned in_flight;
	bool stopping;
	unsigned fetch_failing;
	int64_t stalest_loop_ms;
	bool store_failing;
} aks_worker_stats;
void aks__worker_get_stats(aks_worker *w, aks_worker_stats *out);

/*
 * Cuts a completion so that its ready-to-store record (aks__wire_record_encode with
 * `conversation`) fits `limit` bytes, as the reference does (§5.6 "Truncation"): notice,
 * provider_data, output_files from the end, then the longer of stdout/stderr, then the
 * error. Returns true when anything was cut; false with *still_over when it could not fit.
 */
bool aks__worker_truncate(aks_wire_completion *c, const char *conversation, int64_t limit,
                          bool *still_over);

/* ---- aks_worker_monitor (worker_monitor.c) ---- */

/* A running worker (borrowed, with its transport) is attached to a monitor (NULL: a no-op)
 * after its start and detached before it is freed; detach waits for a read in progress. */
void aks__worker_monitor_attach(aks_worker_monitor *m, aks_worker *w, aks_transport *t,
                                unsigned input_consumers, unsigned output_consumers);
void aks__worker_monitor_detach(aks_worker_monitor *m);

/* ---- aks_worker_run (worker_api.c) ---- */

/* The caller's options (NULL: none) over the defaults, as aks_worker_run uses them: an
 * older caller's struct has fewer fields, which keep their defaults. AKS_EINVAL for a
 * struct no initialiser wrote. */
int aks__worker_options_read(aks_worker_options *out, const aks_worker_options *opts,
                             aks_error **err);

#endif /* AKS_CORE_QUEUE_WORKER_H */
