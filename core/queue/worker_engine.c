/*
 * core/queue/worker_engine.c - the queue worker's engine: one request run to its completion against
 * the worker's own profiles (reference §5.2), the session inventory in the response store,
 * and the idle sweep over it (§5.6).
 *
 * The inventory is the fleet's memory of which sandbox a session has. The worker that ran an
 * operation writes it before the request is acked, and per-group FIFO delivers a session's
 * next request only after that ack, so the next operation always finds the sandbox the last
 * one left - even when the agent never saw that completion (a promoted task nobody checked
 * yet). A request's own sandbox_id is used only when the inventory has no record. The
 * session's lock in the response store serialises the operations with the sweep, which runs
 * on any worker.
 *
 * Policy: the worker enforces its OWN profile's policy and gates. The request names the
 * profile; the copy of the policy it carries is never used, so a request cannot loosen what
 * the worker's operator configured.
 */
#include "config.h"

#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "config/settings.h"
#include "plugin/result.h"
#include "queue/worker.h"
#include "session/engine.h"
#include "tools/json.h"
#include "util/cancel.h"
#include "util/util.h"

/* How long the sweep waits for a session that is busy before leaving it for the next pass. */
#define SWEEP_LOCK_WAIT 0.5
/* The pauses between tries of a session lock while the response store is unreachable. */
#define LOCK_RETRY_FIRST_MS 100
#define LOCK_RETRY_MAX_MS   2000

struct aks_worker_engine {
	aks_settings *settings;
	aks_state_store *responses;
	aks_owner *owner; /* the response store's: it holds the inventory of what is created */
	atomic_uint store_waits; /* requests in lock_session waiting for the store */
};

char *aks__queue_session_key(const char *ns, const char *id)
{
	char *key = NULL;
	if (!ns || !id || asprintf(&key, "%zu:%s/%s", strlen(ns), ns, id) < 0)
		return NULL;
	return key;
}

static char *inventory_key(const char *session_key)
{
	char *key = NULL;
	if (asprintf(&key, "%s%s", AKS_QUEUE_INVENTORY_PREFIX, session_key) < 0)
		return NULL;
	return key;
}

int aks__worker_engine_new(aks_settings *settings, aks_state_store *responses,
                           aks_worker_engine **out, aks_error **err)
{
	aks_worker_engine *e = calloc(1, sizeof(*e));
	if (!e)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	e->settings = settings;
	e->responses = responses;
	int rc = aks__owner_new(responses, &e->owner, err);
	if (rc < 0) {
		free(e);
		return rc;
	}
	*out = e;
	return AKS_OK;
}

void aks__worker_engine_free(aks_worker_engine *e)
{
	if (!e)
		return;
	aks__owner_free(e->owner);
	free(e);
}

unsigned aks__worker_engine_store_waits(aks_worker_engine *e)
{
	return atomic_load(&e->store_waits);
}

int aks__worker_engine_gc(aks_worker_engine *e, bool dry_run, struct json_object **report,
                          aks_error **err)
{
	return aks__owner_gc(e->owner, e->settings, dry_run, report, err);
}

/* ---- the inventory ---- */

/* The sandbox the inventory records for a session: AKS_OK with *sandbox_id (malloc'd, may be
 * NULL when the record has none), AKS_ENOTFOUND, or a store error. */
static int inventory_get(aks_worker_engine *e, const char *ikey, char **sandbox_id, aks_error **err)
{
	*sandbox_id = NULL;
	struct json_object *rec = NULL;
	int rc = aks__store_get(e->responses, AKS_QUEUE_NS, ikey, &rec, err);
	if (rc < 0)
		return rc;
	struct json_object *body = json_object_object_get(rec, "body");
	struct json_object *sid = json_object_object_get(body, "sandbox_id");
	if (json_object_is_type(sid, json_type_string) &&
	    !(*sandbox_id = strdup(json_object_get_string(sid))))
		rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
	json_object_put(rec);
	return rc;
}

/* The reference's inventory record, plus where the session lives (namespace and id), so a
 * sweep on any worker can name it. */
static struct json_object *inventory_record(const char *ikey, const aks_profile *p, const char *ns,
                                            const aks_session_rec *s)
{
	struct json_object *body = json_object_new_object();
	struct json_object *rec = json_object_new_object();
	if (!body || !rec) {
		json_object_put(body);
		json_object_put(rec);
		return NULL;
	}
	json_object_object_add(body, "provider_type",
	                       json_object_new_string(aks_profile_get_type(p)));
	json_object_object_add(body, "sandbox_id", json_object_new_string(s->sandbox_id));
	json_object_object_add(body, "profile", json_object_new_string(aks_profile_get_name(p)));
	json_object_object_add(body, "idle_timeout",
	                       json_object_new_int64(aks_profile_get_idle_timeout(p)));
	json_object_object_add(body, "last_used_at", json_object_new_double(s->last_used_at));
	json_object_object_add(body, "namespace", json_object_new_string(ns));
	json_object_object_add(body, "sandbox_session_id", json_object_new_string(s->id));
	json_object_object_add(rec, "request_id", json_object_new_string(ikey));
	json_object_object_add(rec, "session_id", json_object_new_string(s->id));
	json_object_object_add(rec, "status_code", json_object_new_int(200));
	json_object_object_add(rec, "body", body);
	return rec;
}

/* Records the session's sandbox (or that it has none). Best effort: a failure is logged; the
 * next operation then falls back to the sandbox id its request carries. */
static void inventory_put(aks_worker_engine *e, const char *ikey, const aks_profile *p,
                          const char *ns, const aks_session_rec *s)
{
	aks_error *err = NULL;
	int rc;
	if (!s->sandbox_id) {
		rc = aks__store_delete(e->responses, AKS_QUEUE_NS, ikey, &err);
	} else {
		struct json_object *rec = inventory_record(ikey, p, ns, s);
		rc = rec ? aks__store_put_expiring(e->responses, AKS_QUEUE_NS, ikey, rec,
		                                   e->settings->broker.response_ttl, &err)
		         : aks__error_set(&err, AKS_ENOMEM, "out of memory");
		json_object_put(rec);
	}
	if (rc < 0)
		aks__log(AKS_LOG_WARNING, "worker",
		         "cannot record sandbox %s of session '%s' in the inventory: %s",
		         s->sandbox_id ? s->sandbox_id : "(none)", s->id, aks_error_message(err));
	aks_error_free(err);
}

/* ---- one request ---- */

/* Sleeps up to ms, or until cancelled: true when cancelled. */
static bool nap(aks_cancel *cancel, int ms)
{
	aks_call call;
	aks_call_init(&call, 0, NULL, NULL, cancel);
	int fd = cancel ? aks__call_cancel_fd(&call) : -1;
	struct pollfd p = {.fd = fd, .events = POLLIN};
	poll(fd >= 0 ? &p : NULL, fd >= 0 ? 1 : 0, ms);
	return cancel && aks_cancel_is_triggered(cancel);
}

/*
 * Takes the session's lock in the response store. A store that cannot be reached is waited
 * for (with a growing pause, while the runtime keeps the message alive) rather than turned
 * into a failed completion: an outage of the store must delay work, not fail it. Only
 * cancellation (the worker stopping) ends the wait.
 */
static int lock_session(aks_worker_engine *e, const char *ikey, const char *id, aks_cancel *cancel,
                        aks_store_lock **lk, aks_error **err)
{
	int pause_ms = LOCK_RETRY_FIRST_MS;
	for (bool told = false;; told = true) {
		aks_error *le = NULL;
		aks_call call;
		aks_call_init(&call, 0, NULL, NULL, cancel);
		int rc = aks__store_lock(e->responses, AKS_QUEUE_NS, ikey, &call, lk, &le);
		if (rc == AKS_OK || rc == AKS_ECANCELLED || rc == AKS_ENOMEM || rc == AKS_EINVAL) {
			if (told)
				atomic_fetch_sub(&e->store_waits, 1);
			if (rc < 0 && le && rc != AKS_ECANCELLED)
				aks__error_prefix(le, "cannot lock sandbox session '%s'", id);
			if (rc < 0)
				return aks__error_pass(err, rc, le);
			aks_error_free(le);
			if (told)
				aks__log(AKS_LOG_INFO, "worker",
				         "the response store answers again; running session '%s'",
				         id);
			return rc;
		}
		if (!told) {
			atomic_fetch_add(&e->store_waits, 1);
			aks__log(
			    AKS_LOG_WARNING, "worker",
			    "cannot lock sandbox session '%s' in the response store (%s); waiting "
			    "for the store before running it",
			    id, aks_error_message(le));
		}
		aks_error_free(le);
		if (nap(cancel, pause_ms)) {
			atomic_fetch_sub(&e->store_waits, 1);
			return aks__error_set(
			    err, AKS_ECANCELLED,
			    "the worker stopped while waiting for the response store");
		}
		pause_ms = pause_ms * 2 > LOCK_RETRY_MAX_MS ? LOCK_RETRY_MAX_MS : pause_ms * 2;
	}
}

/* The request's operation as the engine's request (views into r). */
static void mgr_request_of(const aks_wire_request *r, aks_mgr_request *m)
{
	static const int ops[] = {
	    [AKS_WIRE_EXECUTE_CODE] = AKS_MGR_EXECUTE_CODE,
	    [AKS_WIRE_EXECUTE_COMMAND] = AKS_MGR_EXECUTE_COMMAND,
	    [AKS_WIRE_UPLOAD_FILE] = AKS_MGR_UPLOAD,
	    [AKS_WIRE_DOWNLOAD_FILE] = AKS_MGR_DOWNLOAD,
	};
	memset(m, 0, sizeof(*m));
	m->op = ops[r->op];
	m->code = r->code;
	m->language = r->language;
	m->command = r->command;
	m->path = r->path;
	m->data = r->content;
	m->len = r->content_len;
}

static int copy_session(aks_session_rec *dst, const aks_session_rec *src)
{
	memset(dst, 0, sizeof(*dst));
	dst->created_at = src->created_at;
	dst->last_used_at = src->last_used_at;
	dst->closed = src->closed;
	if ((src->id && !(dst->id = strdup(src->id))) ||
	    (src->name && !(dst->name = strdup(src->name))) ||
	    (src->profile && !(dst->profile = strdup(src->profile))) ||
	    (src->provider_type && !(dst->provider_type = strdup(src->provider_type))) ||
	    (src->sandbox_id && !(dst->sandbox_id = strdup(src->sandbox_id)))) {
		aks__session_clear(dst);
		return AKS_ENOMEM;
	}
	return AKS_OK;
}

typedef struct run_state {
	aks_worker_engine *e;
	const aks_wire_request *req;
	aks_cancel *cancel;
	aks_profile *profile;
	const char *ns;    /* NULL for per_call */
	char *ikey;        /* the inventory key; NULL for per_call */
	aks_session_rec s; /* the session as it ends */
	bool known;        /* s.sandbox_id is what the inventory must say now */
	aks_result *result;
	aks_owner_claim *claim; /* per_call: the created sandbox's, released once destroyed */
} run_state;

/* destroy (§5.2 step 3): whatever sandbox the inventory or the request names goes. */
static int run_destroy(run_state *st, aks_error **err)
{
	(void)err;
	char *known = NULL;
	if (st->ikey) {
		aks_error *e = NULL;
		int rc = inventory_get(st->e, st->ikey, &known, &e);
		if (rc < 0 && rc != AKS_ENOTFOUND)
			aks__log(AKS_LOG_WARNING, "worker",
			         "destroy of session '%s': cannot read the inventory (%s)",
			         st->s.id, e ? aks_error_message(e) : aks_strerror(rc));
		aks_error_free(e);
	}
	if (known && (!st->s.sandbox_id || strcmp(known, st->s.sandbox_id) != 0)) {
		aks_session_rec other = {.id = st->s.id, .sandbox_id = known};
		aks__engine_destroy(st->profile, &other); /* frees and clears known */
		known = NULL;
	}
	free(known);
	aks__engine_destroy(st->profile, &st->s);
	st->known = true;
	st->result = aks__result_new(0, 0);
	if (!st->result)
		return AKS_ENOMEM;
	aks__result_set_exit_code(st->result, 0);
	return AKS_OK;
}

/* The sandbox the inventory records for the session replaces the one its request names (see
 * the top); a store that cannot be read leaves the request's, logged. */
static int sandbox_from_inventory(run_state *st, aks_error **err)
{
	char *known = NULL;
	aks_error *e = NULL;
	int rc = inventory_get(st->e, st->ikey, &known, &e);
	if (rc == AKS_OK) {
		free(st->s.sandbox_id);
		st->s.sandbox_id = known;
	} else if (rc == AKS_ENOMEM) {
		aks_error_free(e);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	} else if (rc != AKS_ENOTFOUND) {
		aks__log(AKS_LOG_WARNING, "worker",
		         "cannot read the inventory for session '%s' (%s); using the sandbox its "
		         "request names",
		         st->s.id, aks_error_message(e));
	}
	aks_error_free(e);
	return AKS_OK;
}

/* The engine's record hook: a new sandbox goes in the inventory before it is used, so no
 * failure after can orphan it. Best effort (inventory_put logs), so never a failure. */
static int record_sandbox(void *ctx, const aks_session_rec *s, aks_error **err)
{
	(void)err;
	run_state *st = ctx;
	inventory_put(st->e, st->ikey, st->profile, st->ns, s);
	return AKS_OK;
}

/* A completion always has a result: an upload's says exit code 0, and a recreated sandbox's
 * notice goes on it unless the operation left one of its own. */
static int complete_result(run_state *st, int op, const char *notice, aks_error **err)
{
	if (!st->result && !(st->result = aks__result_new(0, 0)))
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	if (op == AKS_MGR_UPLOAD)
		aks__result_set_exit_code(st->result, 0);
	if (notice && !aks_result_get_notice(st->result) &&
	    aks__result_set_notice(st->result, notice) < 0)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	return AKS_OK;
}

/* Everything but destroy: gates, then the operation in the session (aks__engine_run). */
static int run_operation(run_state *st, aks_error **err)
{
	int rc = aks_profile_check_principal(st->profile, &st->req->principal, err);
	if (rc == AKS_OK)
		rc = aks_profile_check_policy(st->profile, err);
	if (rc < 0)
		return rc;
	st->known = true; /* from here on, the inventory follows s */
	if (st->ikey && (rc = sandbox_from_inventory(st, err)) < 0)
		return rc;
	aks_mgr_request mreq;
	mgr_request_of(st->req, &mreq);
	aks_engine_op op = {.profile = st->profile,
	                    .req = &mreq,
	                    .principal = &st->req->principal,
	                    .conversation = st->req->ak_session_id,
	                    .cancel = st->cancel,
	                    .keep_handle = true,
	                    .record = st->ikey ? record_sandbox : NULL,
	                    .record_ctx = st,
	                    .owner = st->e->owner};
	aks_engine_outcome done;
	rc = aks__engine_run(&op, &st->s, &done, err);
	st->result = done.result;
	st->claim = done.claim;
	if (rc == AKS_OK)
		rc = complete_result(st, mreq.op, done.notice, err);
	free(done.notice);
	return rc;
}

static int completion_new(const run_state *st, int rc, aks_error *e, aks_wire_completion **out)
{
	aks_wire_completion *c = calloc(1, sizeof(*c));
	if (!c || !(c->task_id = strdup(st->req->task_id)) || copy_session(&c->session, &st->s) < 0)
		goto oom;
	if (rc == AKS_OK) {
		c->status = AKS_WIRE_SUCCEEDED;
	} else {
		c->status = rc == AKS_ETIMEOUT ? AKS_WIRE_TIMED_OUT : AKS_WIRE_FAILED;
		const char *msg = e ? aks_error_message(e) : aks_strerror(rc);
		if (!(c->error = strdup(msg)) ||
		    !(c->error_type = strdup(aks__wire_error_type(rc))))
			goto oom;
	}
	*out = c;
	return AKS_OK;
oom:
	aks__wire_completion_free(c);
	return AKS_ENOMEM;
}

int aks__worker_engine_process(aks_worker_engine *e, const aks_wire_request *req,
                               aks_cancel *cancel, aks_wire_completion **out)
{
	*out = NULL;
	run_state st = {.e = e, .req = req, .cancel = cancel};
	aks_error *err = NULL;
	int rc = copy_session(&st.s, &req->session) < 0 ? AKS_ENOMEM : AKS_OK;
	if (rc == AKS_OK && req->op == AKS_WIRE_INSTALL_PACKAGES)
		rc = aks__error_set(&err, AKS_ECAPABILITY,
		                    "install_packages is not supported by this worker");
	if (rc == AKS_OK)
		rc = aks_settings_find_profile(e->settings, req->profile, &st.profile, &err);
	if (rc == AKS_OK && aks_profile_get_scope(st.profile) != AKS_SCOPE_PER_CALL) {
		/* The session lives where the agent keeps it: the conversation's namespace, or
		 * the runtime one for per_runtime. */
		st.ns = aks__session_ns(st.profile, req->ak_session_id);
		aks_autofree char *skey = aks__queue_session_key(st.ns, st.s.id);
		if (!skey || !(st.ikey = inventory_key(skey)))
			rc = AKS_ENOMEM;
	}
	aks_store_lock *lk = NULL;
	if (rc == AKS_OK && st.ikey)
		rc = lock_session(e, st.ikey, st.s.id, cancel, &lk, &err);
	if (rc == AKS_OK) {
		if (req->op == AKS_WIRE_DESTROY)
			rc = run_destroy(&st, &err);
		else
			rc = run_operation(&st, &err);
		if (st.ikey && st.known)
			inventory_put(e, st.ikey, st.profile, st.ns, &st.s);
		if (st.profile && aks_profile_get_scope(st.profile) == AKS_SCOPE_PER_CALL &&
		    req->op != AKS_WIRE_DESTROY) {
			aks__engine_destroy(st.profile, &st.s);
			aks__owner_release(st.claim);
			st.claim = NULL;
		}
	}
	aks__owner_claim_free(st.claim); /* none but per_call's is left here */
	if (lk)
		aks__store_unlock(e->responses, lk);
	if (rc < 0 && rc != AKS_ENOMEM) {
		aks_result_free(st.result); /* what a killed program printed is not shown */
		st.result = NULL;
	}
	int crc = rc == AKS_ENOMEM ? AKS_ENOMEM : completion_new(&st, rc, err, out);
	if (crc == AKS_OK) {
		(*out)->result = rc == AKS_OK ? st.result : NULL;
		if (rc == AKS_OK)
			st.result = NULL;
		if (rc < 0)
			aks__log(AKS_LOG_WARNING, "worker", "sandbox task %s %s: %s", req->task_id,
			         rc == AKS_ETIMEOUT ? "timed out" : "failed", (*out)->error);
	}
	aks_result_free(st.result);
	aks_error_free(err);
	aks__session_clear(&st.s);
	free(st.ikey);
	return crc;
}

/* ---- the idle sweep ---- */

static int note_idle(void *ctx, const char *key, struct json_object *rec)
{
	struct json_object *body = json_object_object_get(rec, "body");
	struct json_object *idle = json_object_object_get(body, "idle_timeout");
	struct json_object *last = json_object_object_get(body, "last_used_at");
	struct json_object *sid = json_object_object_get(body, "sandbox_id");
	if (!json_object_is_type(sid, json_type_string) || json_object_get_int64(idle) <= 0 ||
	    !(json_object_is_type(last, json_type_double) ||
	      json_object_is_type(last, json_type_int)))
		return AKS_OK;
	if (!(aks__epoch_now() - json_object_get_double(last) >
	      (double)json_object_get_int64(idle)))
		return AKS_OK;
	return aks__strv_push(ctx, key);
}

/* One candidate, checked again under the session's lock. */
static bool sweep_one(aks_worker_engine *e, const char *ikey)
{
	aks_store_lock *lk = NULL;
	aks_error *err = NULL;
	aks_call call;
	aks_call_init(&call, SWEEP_LOCK_WAIT, NULL, NULL, NULL);
	int rc = aks__store_lock(e->responses, AKS_QUEUE_NS, ikey, &call, &lk, &err);
	if (rc < 0) {
		if (rc != AKS_ETIMEOUT) /* busy: it is in use, so not idle; next pass */
			aks__log(AKS_LOG_WARNING, "worker", "idle sweep: %s",
			         aks_error_message(err));
		aks_error_free(err);
		return false;
	}
	bool destroyed = false;
	struct json_object *rec = NULL;
	if (aks__store_get(e->responses, AKS_QUEUE_NS, ikey, &rec, &err) == AKS_OK) {
		aks_strv still = {NULL, 0, 0};
		note_idle(&still, ikey, rec);
		struct json_object *body = json_object_object_get(rec, "body");
		const char *pname = json_object_get_string(json_object_object_get(body, "profile"));
		aks_profile *p = NULL;
		if (still.n && pname &&
		    aks_settings_find_profile(e->settings, pname, &p, NULL) == AKS_OK &&
		    !aks__engine_is_attached(p)) {
			const char *sid = json_object_get_string(
			    json_object_object_get(body, "sandbox_session_id"));
			const char *box =
			    json_object_get_string(json_object_object_get(body, "sandbox_id"));
			sid = sid ? sid : "?";
			aks__log(AKS_LOG_INFO, "worker",
			         "idle sweep: destroying sandbox %s of session '%s' (profile %s)",
			         box ? box : "?", sid, pname);
			/* A sandbox the backend would not destroy now (a bad credential, an outage)
			 * stays in the inventory and the next pass tries again: forgotten, it would
			 * keep running with only `aksandbox gc` to find it. */
			if (box && aks__engine_destroy_sandbox(p, box, NULL) < 0) {
				aks__log(AKS_LOG_WARNING, "worker",
				         "idle sweep: sandbox %s of session '%s' stays in the "
				         "inventory; "
				         "the next pass tries again",
				         box, sid);
			} else {
				if (aks__store_delete(e->responses, AKS_QUEUE_NS, ikey, &err) < 0)
					aks__log(AKS_LOG_WARNING, "worker", "idle sweep: %s",
					         aks_error_message(err));
				destroyed = true;
			}
		} else if (still.n && pname && !p) {
			aks__log(AKS_LOG_INFO, "worker",
			         "idle sweep: profile '%s' is not configured on this worker; its "
			         "sandbox is left for a worker that has it",
			         pname);
		}
		aks__store_free_names(still.v);
		json_object_put(rec);
	}
	aks_error_free(err);
	aks__store_unlock(e->responses, lk);
	return destroyed;
}

int aks__worker_engine_sweep(aks_worker_engine *e, size_t *destroyed, aks_error **err)
{
	if (destroyed)
		*destroyed = 0;
	aks_strv keys = {NULL, 0, 0};
	int rc = aks__store_scan(e->responses, AKS_QUEUE_NS, AKS_QUEUE_INVENTORY_PREFIX, note_idle,
	                         &keys, err);
	for (size_t i = 0; rc == AKS_OK && i < keys.n; i++)
		if (sweep_one(e, keys.v[i]) && destroyed)
			(*destroyed)++;
	aks__store_free_names(keys.v);
	return rc;
}
