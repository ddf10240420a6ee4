/*
 * core/session/owner.c - the store's owner id, creation claims, and the garbage collector
 * that finds what a killed host left behind (see owner.h).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "plugin/provider.h"
#include "session/engine.h"
#include "session/owner.h"
#include "session/pool.h"
#include "session/sessions.h"
#include "util/json_build.h"
#include "util/util.h"

#define OWNER_KEY    "store"
#define CLAIM_PREFIX "claim:"

struct aks_owner {
	aks_state_store *store;
	pthread_mutex_t mu;
	pthread_mutex_t hook_mu; /* guards the pool hook */
	void (*pool_taken)(void *ctx);
	void *pool_taken_ctx;
	char id[33]; /* "" until read or minted */
};

struct aks_owner_claim {
	aks_owner *owner;
	char key[sizeof(CLAIM_PREFIX) + 32];
	char token[33];
	const char *labels[5]; /* owner, token: key, value pairs */
};

int aks__owner_new(aks_state_store *store, aks_owner **out, aks_error **err)
{
	aks_owner *o = calloc(1, sizeof(*o));
	if (!o)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	/* A claim needs no fsync: it protects a sandbox only while its process lives, and a
	 * crash that could lose an unsynced claim ends that process too. A claim lost that way
	 * reads as a dead one (gc destroys what it protected), a removal lost that way as a
	 * dead claim (gc clears it). The owner id is synced like any record: a lost one would
	 * leave everything labelled with it another owner's. */
	int rc = aks__store_set_volatile(store, AKS_STORE_NS_OWNER, CLAIM_PREFIX, err);
	if (rc < 0) {
		free(o);
		return rc;
	}
	o->store = store;
	pthread_mutex_init(&o->mu, NULL);
	pthread_mutex_init(&o->hook_mu, NULL);
	*out = o;
	return AKS_OK;
}

void aks__owner_free(aks_owner *o)
{
	if (!o)
		return;
	pthread_mutex_destroy(&o->mu);
	pthread_mutex_destroy(&o->hook_mu);
	free(o);
}

aks_state_store *aks__owner_store(aks_owner *o)
{
	return o ? o->store : NULL;
}

void aks__owner_on_pool_take(aks_owner *o, void (*fn)(void *ctx), void *ctx)
{
	if (!o)
		return;
	pthread_mutex_lock(&o->hook_mu);
	o->pool_taken = fn;
	o->pool_taken_ctx = ctx;
	pthread_mutex_unlock(&o->hook_mu);
}

void aks__owner_pool_taken(aks_owner *o)
{
	if (!o)
		return;
	/* Called under hook_mu, so that the hook's removal waits for a call in progress. */
	pthread_mutex_lock(&o->hook_mu);
	if (o->pool_taken)
		o->pool_taken(o->pool_taken_ctx);
	pthread_mutex_unlock(&o->hook_mu);
}

/* ---- the owner id ---- */

static bool is_hex32(const char *s)
{
	if (!s || strlen(s) != 32)
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

/* The store's record keeps the first id any process minted: a concurrent minter adopts it. */
static int mint_fn(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	char *id = ctx;
	const char *have = json_object_get_string(json_object_object_get(rec, "id"));
	if (is_hex32(have)) {
		memcpy(id, have, 33);
		return AKS_OK;
	}
	bool oom = false;
	aks__jset(rec, "id", json_object_new_string(id), &oom);
	aks__jset(rec, "created_at", json_object_new_double(aks__epoch_now()), &oom);
	if (oom)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	*changed = true;
	return AKS_OK;
}

/* The id, read (mint: or minted) once per owner; AKS_ENOTFOUND without mint when the store
 * has none yet (nothing was ever labelled for it). */
static int owner_id(aks_owner *o, bool mint, char id[33], aks_error **err)
{
	pthread_mutex_lock(&o->mu);
	int rc = AKS_OK;
	if (!o->id[0]) {
		json_object *rec = NULL;
		rc = aks__store_get(o->store, AKS_STORE_NS_OWNER, OWNER_KEY, &rec, err);
		const char *have = json_object_get_string(json_object_object_get(rec, "id"));
		if (rc == AKS_OK && is_hex32(have))
			memcpy(o->id, have, 33);
		else if ((rc == AKS_OK || rc == AKS_ENOTFOUND) && mint) {
			char fresh[33];
			rc = aks__uuid4_hex(fresh, err);
			if (rc == AKS_OK)
				rc = aks__store_update(o->store, AKS_STORE_NS_OWNER, OWNER_KEY,
				                       mint_fn, fresh, err);
			if (rc == AKS_OK)
				memcpy(o->id, fresh, 33);
		} else if (rc == AKS_OK)
			rc = AKS_ENOTFOUND;
		json_object_put(rec);
	}
	if (rc == AKS_OK)
		memcpy(id, o->id, 33);
	pthread_mutex_unlock(&o->mu);
	return rc;
}

/* ---- who is creating: this machine and process ---- */

/* The boot and the pid namespace: two processes with equal ones see each other's pids. */
static char machine[64];
static pthread_once_t machine_once = PTHREAD_ONCE_INIT;

static void machine_init(void)
{
	char boot[40] = "";
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
	if (f) {
		if (!fgets(boot, sizeof(boot), f))
			boot[0] = '\0';
		fclose(f);
	}
	boot[strcspn(boot, "\n")] = '\0';
	struct stat st;
	if (boot[0] && stat("/proc/self/ns/pid", &st) == 0)
		snprintf(machine, sizeof(machine), "%s/%llu", boot, (unsigned long long)st.st_ino);
}

static const char *this_machine(void)
{
	pthread_once(&machine_once, machine_init);
	return machine;
}

/* A process's start time in clock ticks since boot (field 22 of /proc/PID/stat); 0 when it
 * does not exist. Together with the pid it names one process, whatever reuses the pid. */
static unsigned long long pid_start(long pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')'); /* the command name may hold anything but this */
	unsigned long long start = 0;
	/* After ") ": state is field 3, starttime field 22. */
	if (!p || sscanf(p + 2,
	                 "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
	                 "%*d %*d %*d %llu",
	                 &start) != 1)
		return 0;
	return start;
}

/* ---- claims ---- */

typedef struct claim_ctx {
	const char *profile;
	const char *machine;
	long pid;
	unsigned long long start;
} claim_ctx;

static int claim_fn(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	claim_ctx *c = ctx;
	bool oom = false;
	char start[32];
	snprintf(start, sizeof(start), "%llu", c->start);
	aks__jset(rec, "profile", json_object_new_string(c->profile), &oom);
	aks__jset(rec, "machine", json_object_new_string(c->machine), &oom);
	aks__jset(rec, "pid", json_object_new_int64(c->pid), &oom);
	aks__jset(rec, "pid_start", json_object_new_string(start), &oom);
	aks__jset(rec, "created_at", json_object_new_double(aks__epoch_now()), &oom);
	if (oom)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	*changed = true;
	return AKS_OK;
}

int aks__owner_claim(aks_owner *o, const char *profile, aks_owner_claim **out, aks_error **err)
{
	*out = NULL;
	aks_owner_claim *c = calloc(1, sizeof(*c));
	if (!c)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	c->owner = o;
	char id[33];
	int rc = owner_id(o, true, id, err);
	if (rc == AKS_OK)
		rc = aks__uuid4_hex(c->token, err);
	if (rc < 0) {
		free(c);
		return rc;
	}
	snprintf(c->key, sizeof(c->key), CLAIM_PREFIX "%s", c->token);
	claim_ctx cc = {.profile = profile ? profile : "",
	                .machine = this_machine(),
	                .pid = (long)getpid(),
	                .start = pid_start((long)getpid())};
	rc = aks__store_update(o->store, AKS_STORE_NS_OWNER, c->key, claim_fn, &cc, err);
	if (rc < 0) {
		free(c);
		return rc;
	}
	c->labels[0] = AKS_LABEL_OWNER;
	c->labels[1] = o->id; /* stable once minted */
	c->labels[2] = AKS_LABEL_CLAIM;
	c->labels[3] = c->token;
	c->labels[4] = NULL;
	*out = c;
	return AKS_OK;
}

const char *const *aks__owner_claim_labels(const aks_owner_claim *c)
{
	return c ? c->labels : NULL;
}

void aks__owner_release(aks_owner_claim *c)
{
	if (!c)
		return;
	aks_error *e = NULL;
	if (aks__store_delete(c->owner->store, AKS_STORE_NS_OWNER, c->key, &e) < 0)
		aks__log(AKS_LOG_WARNING, "sandbox", "cannot remove creation claim %s: %s",
		         c->token, aks_error_message(e));
	aks_error_free(e);
	free(c);
}

int aks__owner_create(aks_owner *o, const aks_profile *p, const aks_call *call, aks_sandbox **out,
                      aks_owner_claim **claim, aks_error **err)
{
	*claim = NULL;
	aks_provider *prov = aks_profile_get_provider(p);
	if (!o)
		return aks_provider_create(prov, call, out, err);
	aks__imported_call c; /* the library's layout, whatever the caller's was */
	int rc = aks__call_import(&c, call, err);
	if (rc == AKS_OK)
		rc = aks__owner_claim(o, aks_profile_get_name(p), claim, err);
	if (rc < 0)
		return rc;
	c.call.labels = aks__owner_claim_labels(*claim);
	rc = aks_provider_create(prov, &c.call, out, err);
	if (rc < 0) {
		aks__owner_release(*claim); /* nothing is left to protect */
		*claim = NULL;
		return rc;
	}
	/* For the tests of what a host killed between create and record leaves behind. */
	if (getenv("AKSANDBOX_TEST_DIE_AFTER_CREATE"))
		raise(SIGKILL);
	return AKS_OK;
}

void aks__owner_claim_free(aks_owner_claim *c)
{
	free(c);
}

/* Whether a claim record's creator may still be working on its sandbox. */
static bool claim_alive(json_object *rec, double now)
{
	const char *where = json_object_get_string(json_object_object_get(rec, "machine"));
	if (where && *where && strcmp(where, this_machine()) == 0) {
		long pid = (long)json_object_get_int64(json_object_object_get(rec, "pid"));
		const char *want = json_object_get_string(json_object_object_get(rec, "pid_start"));
		char have[32];
		snprintf(have, sizeof(have), "%llu", pid > 0 ? pid_start(pid) : 0ULL);
		return pid > 0 && want && strcmp(want, have) == 0 && strcmp(have, "0") != 0;
	}
	double at = json_object_get_double(json_object_object_get(rec, "created_at"));
	return now - at < AKS_OWNER_CLAIM_MAX_AGE;
}

/* ---- the collector ---- */

typedef struct listed {
	char *sandbox_id;
	char *claim; /* its AKS_LABEL_CLAIM, or NULL */
	aks_profile *profile;
} listed;

typedef struct gc_state {
	aks_profile *profile; /* the one being listed */
	listed *v;
	size_t n, cap;
	json_object *seen;        /* listed sandbox id -> true */
	json_object *live_claims; /* token -> true */
	json_object *dead_claims; /* key -> true */
	json_object *recorded;    /* sandbox id -> true */
} gc_state;

static int note_listed(void *ctx, const char *sandbox_id, const char *const *labels)
{
	gc_state *g = ctx;
	if (!sandbox_id || !*sandbox_id)
		return AKS_OK;
	if (json_object_object_get_ex(g->seen, sandbox_id, NULL))
		return AKS_OK; /* two profiles over one backend list it twice */
	json_object *yes = json_object_new_boolean(1);
	if (!yes || json_object_object_add(g->seen, sandbox_id, yes) < 0)
		return AKS_ENOMEM;
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 16;
		listed *grown = realloc(g->v, cap * sizeof(*grown));
		if (!grown)
			return AKS_ENOMEM;
		g->v = grown;
		g->cap = cap;
	}
	const char *claim = NULL;
	for (const char *const *kv = labels; kv && kv[0] && kv[1]; kv += 2)
		if (strcmp(kv[0], AKS_LABEL_CLAIM) == 0)
			claim = kv[1];
	listed *l = &g->v[g->n];
	l->profile = g->profile;
	l->sandbox_id = strdup(sandbox_id);
	l->claim = claim ? strdup(claim) : NULL;
	if (!l->sandbox_id || (claim && !l->claim)) {
		free(l->sandbox_id);
		free(l->claim);
		return AKS_ENOMEM;
	}
	g->n++;
	return AKS_OK;
}

static int add_entry(json_object *arr, const char *profile, const char *sandbox_id,
                     const char *what, const char *text)
{
	bool oom = false;
	json_object *o = aks__jnew(json_object_new_object(), &oom);
	aks__jset(o, "profile", json_object_new_string(profile), &oom);
	if (sandbox_id)
		aks__jset(o, "sandbox_id", json_object_new_string(sandbox_id), &oom);
	if (what)
		aks__jset(o, what, json_object_new_string(text ? text : ""), &oom);
	if (oom || json_object_array_add(arr, o) < 0) {
		json_object_put(o);
		return AKS_ENOMEM;
	}
	return AKS_OK;
}

/* Every profile that provisions lists what carries the owner id; the ones that cannot are
 * reported in not_listed. */
static int list_all(gc_state *g, aks_settings *settings, const char *id, json_object *not_listed)
{
	size_t count = aks_settings_get_profile_count(settings);
	for (size_t i = 0; i < count; i++) {
		aks_profile *p = aks_settings_get_profile(settings, i);
		aks_provider *prov = p ? aks_profile_get_provider(p) : NULL;
		if (!prov || aks__engine_is_attached(p))
			continue;
		const aks_capabilities *caps = aks_provider_get_capabilities(prov);
		if (caps && !caps->provisions)
			continue;
		int rc;
		if (!aks__provider_can_list(prov)) {
			rc = add_entry(not_listed, aks_profile_get_name(p), NULL, "reason",
			               "its provider cannot list the sandboxes it created");
			if (rc < 0)
				return rc;
			continue;
		}
		aks_principal principal;
		aks_policy policy;
		aks_call call;
		aks__engine_housekeeping_call(&principal, &policy, &call);
		aks_error *e = NULL;
		g->profile = p;
		rc = aks__provider_list_sandboxes(prov, AKS_LABEL_OWNER, id, &call, note_listed, g,
		                                  &e);
		if (rc == AKS_ENOMEM) {
			aks_error_free(e);
			return rc;
		}
		if (rc < 0)
			rc = add_entry(not_listed, aks_profile_get_name(p), NULL, "reason",
			               aks_error_message(e));
		aks_error_free(e);
		if (rc < 0)
			return rc;
	}
	return AKS_OK;
}

static int note_claim(void *ctx, const char *key, json_object *rec)
{
	gc_state *g = ctx;
	json_object *yes = json_object_new_boolean(1);
	if (!yes)
		return AKS_ENOMEM;
	double now = aks__epoch_now();
	if (claim_alive(rec, now))
		return json_object_object_add(g->live_claims, key + strlen(CLAIM_PREFIX), yes) < 0
		           ? AKS_ENOMEM
		           : AKS_OK;
	return json_object_object_add(g->dead_claims, key, yes) < 0 ? AKS_ENOMEM : AKS_OK;
}

/* A "session:" record's sandbox: the state store's sessions (and the pool's records) have it
 * at the top, a worker's inventory records in their body. */
static int note_recorded(void *ctx, const char *key, json_object *rec)
{
	(void)key;
	gc_state *g = ctx;
	json_object *sid = json_object_object_get(rec, "sandbox_id");
	if (!json_object_is_type(sid, json_type_string))
		sid = json_object_object_get(json_object_object_get(rec, "body"), "sandbox_id");
	if (!json_object_is_type(sid, json_type_string))
		return AKS_OK;
	json_object *yes = json_object_new_boolean(1);
	if (!yes || json_object_object_add(g->recorded, json_object_get_string(sid), yes) < 0)
		return AKS_ENOMEM;
	return AKS_OK;
}

static int read_recorded(gc_state *g, aks_state_store *store, aks_error **err)
{
	char **names = NULL;
	int rc = aks__store_list(store, &names, err);
	for (size_t i = 0; rc == AKS_OK && names[i]; i++)
		if (strcmp(names[i], AKS_STORE_NS_POOL) == 0)
			rc = aks__store_scan(store, names[i], AKS_POOL_KEY_PREFIX, note_recorded, g,
			                     err);
		else if (strcmp(names[i], AKS_STORE_NS_OWNER) != 0)
			rc = aks__store_scan(store, names[i], "session:", note_recorded, g, err);
	aks__store_free_names(names);
	if (rc == AKS_ENOMEM && err && !*err)
		aks__error_set(err, AKS_ENOMEM, "out of memory");
	return rc;
}

/* Destroys (or, dry, only reports) every listed sandbox that nothing holds. */
static int judge(gc_state *g, bool dry_run, json_object *report)
{
	json_object *removed = json_object_object_get(report, "removed");
	json_object *failed = json_object_object_get(report, "failed");
	int64_t kept = 0, creating = 0;
	for (size_t i = 0; i < g->n; i++) {
		listed *l = &g->v[i];
		if (json_object_object_get_ex(g->recorded, l->sandbox_id, NULL)) {
			kept++;
			continue;
		}
		if (l->claim && json_object_object_get_ex(g->live_claims, l->claim, NULL)) {
			creating++;
			continue;
		}
		const char *pname = aks_profile_get_name(l->profile);
		int rc = AKS_OK;
		aks_error *e = NULL;
		if (!dry_run) {
			aks__log(AKS_LOG_INFO, "sandbox",
			         "gc: destroying sandbox %s (profile %s): no session records it",
			         l->sandbox_id, pname);
			rc = aks__engine_destroy_sandbox(l->profile, l->sandbox_id, &e);
		}
		rc = rc < 0 ? add_entry(failed, pname, l->sandbox_id, "error", aks_error_message(e))
		            : add_entry(removed, pname, l->sandbox_id, NULL, NULL);
		aks_error_free(e);
		if (rc < 0)
			return rc;
	}
	bool oom = false;
	aks__jset(report, "kept", json_object_new_int64(kept), &oom);
	aks__jset(report, "in_creation", json_object_new_int64(creating), &oom);
	return oom ? AKS_ENOMEM : AKS_OK;
}

/* Dead claims protect nothing: whatever they labelled was judged above. */
static int clear_dead_claims(gc_state *g, aks_state_store *store, bool dry_run, json_object *report)
{
	int64_t cleared = 0;
	json_object_object_foreach(g->dead_claims, key, unused)
	{
		(void)unused;
		aks_error *e = NULL;
		if (dry_run || aks__store_delete(store, AKS_STORE_NS_OWNER, key, &e) == AKS_OK)
			cleared++;
		else
			aks__log(AKS_LOG_WARNING, "sandbox", "gc: cannot remove claim %s: %s", key,
			         aks_error_message(e));
		aks_error_free(e);
	}
	bool oom = false;
	aks__jset(report, "claims_cleared", json_object_new_int64(cleared), &oom);
	return oom ? AKS_ENOMEM : AKS_OK;
}

static json_object *report_new(const char *id, bool dry_run)
{
	bool oom = false;
	json_object *r = aks__jnew(json_object_new_object(), &oom);
	if (id)
		aks__jset(r, "owner", json_object_new_string(id), &oom);
	else
		aks__jset_null(r, "owner", &oom);
	aks__jset(r, "dry_run", json_object_new_boolean(dry_run), &oom);
	aks__jset(r, "removed", json_object_new_array(), &oom);
	aks__jset(r, "failed", json_object_new_array(), &oom);
	aks__jset(r, "kept", json_object_new_int64(0), &oom);
	aks__jset(r, "in_creation", json_object_new_int64(0), &oom);
	aks__jset(r, "not_listed", json_object_new_array(), &oom);
	aks__jset(r, "claims_cleared", json_object_new_int64(0), &oom);
	if (oom) {
		json_object_put(r);
		return NULL;
	}
	return r;
}

int aks__owner_gc(aks_owner *o, aks_settings *settings, bool dry_run, json_object **report,
                  aks_error **err)
{
	*report = NULL;
	char id[33];
	int rc = owner_id(o, false, id, err);
	if (rc == AKS_ENOTFOUND) /* nothing was ever created with this store's label */
		return (*report = report_new(NULL, dry_run))
		           ? AKS_OK
		           : aks__error_set(err, AKS_ENOMEM, "out of memory");
	if (rc < 0)
		return rc;
	json_object *r = report_new(id, dry_run);
	gc_state g = {.seen = json_object_new_object(),
	              .live_claims = json_object_new_object(),
	              .dead_claims = json_object_new_object(),
	              .recorded = json_object_new_object()};
	if (!r || !g.seen || !g.live_claims || !g.dead_claims || !g.recorded)
		rc = AKS_ENOMEM;
	/* The order is what makes this safe against a host creating right now: what is listed
	 * had its claim written before it existed; a claim gone when read was released after
	 * its session record was written, so the records, read last, hold it. */
	if (rc == AKS_OK)
		rc = list_all(&g, settings, id, json_object_object_get(r, "not_listed"));
	if (rc == AKS_OK)
		rc = aks__store_scan(o->store, AKS_STORE_NS_OWNER, CLAIM_PREFIX, note_claim, &g,
		                     err);
	if (rc == AKS_OK)
		rc = read_recorded(&g, o->store, err);
	if (rc == AKS_OK)
		rc = judge(&g, dry_run, r);
	if (rc == AKS_OK)
		rc = clear_dead_claims(&g, o->store, dry_run, r);
	for (size_t i = 0; i < g.n; i++) {
		free(g.v[i].sandbox_id);
		free(g.v[i].claim);
	}
	free(g.v);
	json_object_put(g.seen);
	json_object_put(g.live_claims);
	json_object_put(g.dead_claims);
	json_object_put(g.recorded);
	if (rc < 0) {
		json_object_put(r);
		if (rc == AKS_ENOMEM && err && !*err)
			aks__error_set(err, AKS_ENOMEM, "out of memory");
		return rc;
	}
	*report = r;
	return AKS_OK;
}

void aks__owner_gc_log(const char *component, int rc, json_object *report, const aks_error *e)
{
	if (rc < 0) {
		if (rc != AKS_ECAPABILITY) /* the queue flavor: its workers collect */
			aks__log(AKS_LOG_WARNING, component, "gc: %s",
			         e ? aks_error_message(e) : aks_strerror(rc));
		return;
	}
	size_t removed = json_object_array_length(json_object_object_get(report, "removed"));
	size_t failed = json_object_array_length(json_object_object_get(report, "failed"));
	if (failed)
		aks__log(AKS_LOG_WARNING, component,
		         "gc: destroyed %zu orphaned sandbox(es); %zu could not be destroyed",
		         removed, failed);
	else if (removed)
		aks__log(AKS_LOG_INFO, component, "gc: destroyed %zu orphaned sandbox(es)",
		         removed);
}
