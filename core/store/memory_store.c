/*
 * core/store/memory_store.c - the built-in in_memory store (core/store/memory_store.h).
 *
 * Everything lives under one mutex: a hash map of namespaces, each a hash map of records,
 * and a hash map of named locks. An update runs its function under the mutex, which makes
 * it atomic with every other operation (the host never calls the store from inside it).
 * get, scan and namespaces copy what they deliver and call back without the mutex, so a
 * callback may use the store.
 *
 * Expiry (put_expiring): a record carries the time it ends. Every operation that meets an
 * ended record treats it as absent and removes it; and, so that records nobody reads again
 * do not pile up, a write sweeps the whole store at most once a second while it holds
 * expiring records.
 *
 * Locks: a held name has an entry with its waiters. A waiter sleeps in poll(2) on an eventfd
 * of its own and the call's cancellation fd, until its deadline (a condition variable could
 * not wake on the cancellation fd); unlock writes to every waiter's eventfd and the first to
 * get the mutex takes the lock. A lock dies with the process, as the contract asks.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "store/memory_store.h"

#define MS_NAME "in_memory"
/* The least time between two sweeps of expired records, ms. */
#define MS_SWEEP_EVERY_MS 1000

/* ---- a hash map of byte-string keys ---------------------------------------------------- */

typedef struct hent {
	char *key; /* NUL-terminated copy (keys may hold NULs: len counts) */
	size_t len;
	uint64_t hash;
	void *val;
	struct hent *next;
} hent;

typedef struct hmap {
	hent **b;
	size_t nb, n;
} hmap;

static uint64_t hash_bytes(const char *k, size_t len)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)k[i]) * 1099511628211ull;
	return h;
}

static int hm_init(hmap *m)
{
	m->n = 0;
	m->nb = 16;
	m->b = calloc(m->nb, sizeof(*m->b));
	return m->b ? 0 : -1;
}

/* The slot that points at the entry for key, or at the NULL ending its chain. */
static hent **hm_slot(hmap *m, const char *key, size_t len)
{
	uint64_t h = hash_bytes(key, len);
	hent **pp = &m->b[h % m->nb];
	while (*pp && ((*pp)->hash != h || (*pp)->len != len || memcmp((*pp)->key, key, len) != 0))
		pp = &(*pp)->next;
	return pp;
}

static void *hm_get(hmap *m, const char *key, size_t len)
{
	hent *e = *hm_slot(m, key, len);
	return e ? e->val : NULL;
}

/* Adds key (not present) with val; -1 when out of memory. */
static int hm_add(hmap *m, const char *key, size_t len, void *val)
{
	if (m->n >= m->nb) {
		size_t nb = m->nb * 2;
		hent **b = calloc(nb, sizeof(*b));
		if (!b)
			return -1;
		for (size_t i = 0; i < m->nb; i++)
			for (hent *e = m->b[i], *next; e; e = next) {
				next = e->next;
				e->next = b[e->hash % nb];
				b[e->hash % nb] = e;
			}
		free(m->b);
		m->b = b;
		m->nb = nb;
	}
	hent *e = calloc(1, sizeof(*e));
	if (!e || !(e->key = malloc(len + 1))) {
		free(e);
		return -1;
	}
	memcpy(e->key, key, len);
	e->key[len] = '\0';
	e->len = len;
	e->hash = hash_bytes(key, len);
	e->val = val;
	e->next = m->b[e->hash % m->nb];
	m->b[e->hash % m->nb] = e;
	m->n++;
	return 0;
}

/* Unlinks the entry *pp points at; returns its value. */
static void *hm_unlink(hmap *m, hent **pp)
{
	hent *e = *pp;
	void *val = e->val;
	*pp = e->next;
	free(e->key);
	free(e);
	m->n--;
	return val;
}

static void hm_free(hmap *m, void (*free_val)(void *))
{
	for (size_t i = 0; i < m->nb; i++)
		while (m->b[i])
			free_val(hm_unlink(m, &m->b[i]));
	free(m->b);
	m->b = NULL;
	m->nb = 0;
}

/* ---- the store ------------------------------------------------------------------------- */

typedef struct mrec {
	char *value; /* len bytes and a NUL */
	size_t len;
	int64_t expires; /* ms; 0: never */
} mrec;

typedef struct mns {
	hmap recs;
} mns;

/* A waiter for a held lock. */
typedef struct mwait {
	int fd; /* eventfd */
	struct mwait *next;
} mwait;

/* A named lock that is held, or waited for. */
typedef struct mlock {
	bool held;
	mwait *waiters;
} mlock;

struct aks_store_impl {
	const aks_host_api *host;
	pthread_mutex_t mu;
	hmap ns;            /* name -> mns */
	hmap locks;         /* "ns\0key" -> mlock */
	size_t expiring;    /* records with an expiry */
	int64_t next_sweep; /* ms */
};

struct aks_store_lock {
	char *name; /* "ns\0key" */
	size_t len;
};

static void rec_free(void *p)
{
	mrec *r = p;
	free(r->value);
	free(r);
}

static void ns_free(void *p)
{
	mns *n = p;
	hm_free(&n->recs, rec_free);
	free(n);
}

static void lock_free(void *p)
{
	free(p); /* no waiters: fini comes after every lock was released */
}

static int oom(aks_store_impl *s, aks_error **err)
{
	return s->host->error_set(err, AKS_ENOMEM, "out of memory");
}

static int check_name(aks_store_impl *s, const char *what, const char *name, aks_error **err)
{
	size_t len = name ? strnlen(name, AKS_STORE_NAME_MAX + 1) : 0;
	if (len < 1 || len > AKS_STORE_NAME_MAX)
		return s->host->error_set(err, AKS_EINVAL,
		                          MS_NAME ": a %s must be 1 to %d bytes long", what,
		                          AKS_STORE_NAME_MAX);
	return AKS_OK;
}

static int check_names(aks_store_impl *s, const char *ns, const char *key, aks_error **err)
{
	int rc = check_name(s, "namespace", ns, err);
	return rc < 0 ? rc : check_name(s, "key", key, err);
}

static bool ended(const mrec *r, int64_t now)
{
	return r->expires && r->expires <= now;
}

/* Removes the record *pp points at, in namespace n (named nsname); drops n when empty. */
static void rec_remove(aks_store_impl *s, const char *nsname, mns *n, hent **pp)
{
	mrec *r = hm_unlink(&n->recs, pp);
	if (r->expires)
		s->expiring--;
	rec_free(r);
	if (n->recs.n == 0)
		ns_free(hm_unlink(&s->ns, hm_slot(&s->ns, nsname, strlen(nsname))));
}

/* Removes every ended record, at most once every MS_SWEEP_EVERY_MS. */
static void sweep(aks_store_impl *s, int64_t now)
{
	if (!s->expiring || now < s->next_sweep)
		return;
	s->next_sweep = now + MS_SWEEP_EVERY_MS;
	for (size_t i = 0; i < s->ns.nb; i++) {
		for (hent **np = &s->ns.b[i]; *np;) {
			mns *n = (*np)->val;
			for (size_t j = 0; j < n->recs.nb; j++) {
				for (hent **rp = &n->recs.b[j]; *rp;) {
					mrec *r = (*rp)->val;
					if (!ended(r, now)) {
						rp = &(*rp)->next;
						continue;
					}
					s->expiring--;
					rec_free(hm_unlink(&n->recs, rp));
				}
			}
			if (n->recs.n == 0)
				ns_free(hm_unlink(&s->ns, np));
			else
				np = &(*np)->next;
		}
	}
}

/* The live record (ns, key), or NULL; removes it when it has ended. */
static mrec *find_live(aks_store_impl *s, const char *ns, const char *key, int64_t now)
{
	mns *n = hm_get(&s->ns, ns, strlen(ns));
	if (!n)
		return NULL;
	hent **pp = hm_slot(&n->recs, key, strlen(key));
	if (!*pp)
		return NULL;
	if (ended((*pp)->val, now)) {
		rec_remove(s, ns, n, pp);
		return NULL;
	}
	return (*pp)->val;
}

/* Writes (ns, key) = value; expires 0: for good. */
static int put_locked(aks_store_impl *s, const char *ns, const char *key, const char *value,
                      size_t len, int64_t expires, aks_error **err)
{
	char *copy = malloc(len + 1);
	if (!copy)
		return oom(s, err);
	if (len)
		memcpy(copy, value, len);
	copy[len] = '\0';
	size_t nslen = strlen(ns), keylen = strlen(key);
	mns *n = hm_get(&s->ns, ns, nslen);
	bool new_ns = !n;
	if (new_ns) {
		if (!(n = calloc(1, sizeof(*n))) || hm_init(&n->recs) < 0 ||
		    hm_add(&s->ns, ns, nslen, n) < 0) {
			if (n)
				free(n->recs.b);
			free(n);
			free(copy);
			return oom(s, err);
		}
	}
	mrec *r = hm_get(&n->recs, key, keylen);
	if (!r) {
		if (!(r = calloc(1, sizeof(*r))) || hm_add(&n->recs, key, keylen, r) < 0) {
			free(r);
			free(copy);
			if (new_ns)
				ns_free(hm_unlink(&s->ns, hm_slot(&s->ns, ns, nslen)));
			return oom(s, err);
		}
	}
	free(r->value);
	r->value = copy;
	r->len = len;
	if (r->expires)
		s->expiring--;
	r->expires = expires;
	if (expires)
		s->expiring++;
	return AKS_OK;
}

static int ms_init(const aks_host_api *host, const aks_config *config, aks_store_impl **out,
                   aks_error **err)
{
	(void)config;
	aks_store_impl *s = calloc(1, sizeof(*s));
	if (!s)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	if (hm_init(&s->ns) < 0 || hm_init(&s->locks) < 0) {
		free(s->ns.b);
		free(s);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	if (pthread_mutex_init(&s->mu, NULL) != 0) {
		free(s->ns.b);
		free(s->locks.b);
		free(s);
		return host->error_set(err, AKS_ENOMEM, MS_NAME ": cannot create a mutex");
	}
	s->host = host;
	*out = s;
	return AKS_OK;
}

static void ms_fini(aks_store_impl *s)
{
	if (!s)
		return;
	hm_free(&s->ns, ns_free);
	hm_free(&s->locks, lock_free);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

static int ms_update(aks_store_impl *s, const char *ns, const char *key, aks_store_txn_fn fn,
                     void *ctx, aks_error **err)
{
	int rc = check_names(s, ns, key, err);
	if (rc < 0)
		return rc;
	if (!fn)
		return s->host->error_set(err, AKS_EINVAL, MS_NAME ": update without a function");
	pthread_mutex_lock(&s->mu);
	int64_t now = s->host->now_ms();
	sweep(s, now);
	mrec *r = find_live(s, ns, key, now);
	int action = AKS_STORE_KEEP;
	const char *nv = NULL;
	size_t nlen = 0;
	rc = fn(ctx, r ? r->value : NULL, r ? r->len : 0, &action, &nv, &nlen, err);
	if (rc == AKS_OK && action == AKS_STORE_PUT) {
		if (!nv && nlen)
			rc = s->host->error_set(err, AKS_EINVAL, MS_NAME ": update: no new value");
		else
			rc = put_locked(s, ns, key, nv ? nv : "", nlen, 0, err);
	} else if (rc == AKS_OK && action == AKS_STORE_DELETE && r) {
		mns *n = hm_get(&s->ns, ns, strlen(ns));
		rec_remove(s, ns, n, hm_slot(&n->recs, key, strlen(key)));
	} else if (rc == AKS_OK && action != AKS_STORE_KEEP && action != AKS_STORE_DELETE) {
		rc = s->host->error_set(err, AKS_EINVAL, MS_NAME ": update: unknown action %d",
		                        action);
	}
	pthread_mutex_unlock(&s->mu);
	return rc;
}

static int ms_put_expiring(aks_store_impl *s, const char *ns, const char *key, const char *value,
                           size_t len, int64_t ttl_seconds, aks_error **err)
{
	int rc = check_names(s, ns, key, err);
	if (rc < 0)
		return rc;
	if (ttl_seconds <= 0 || (!value && len))
		return s->host->error_set(err, AKS_EINVAL,
		                          MS_NAME ": put_expiring needs a value and a time to live "
		                                  "> 0 (got %lld)",
		                          (long long)ttl_seconds);
	pthread_mutex_lock(&s->mu);
	int64_t now = s->host->now_ms();
	sweep(s, now);
	int64_t ttl_ms =
	    ttl_seconds > (INT64_MAX - now) / 1000 ? INT64_MAX - now : ttl_seconds * 1000;
	rc = put_locked(s, ns, key, value ? value : "", len, now + ttl_ms, err);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

static int ms_get(aks_store_impl *s, const char *ns, const char *key, aks_store_record_fn fn,
                  void *ctx, aks_error **err)
{
	int rc = check_names(s, ns, key, err);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&s->mu);
	mrec *r = find_live(s, ns, key, s->host->now_ms());
	char *copy = r ? malloc(r->len + 1) : NULL;
	size_t len = r ? r->len : 0;
	if (copy)
		memcpy(copy, r->value, len + 1);
	pthread_mutex_unlock(&s->mu);
	if (!r)
		return AKS_ENOTFOUND;
	if (!copy)
		return oom(s, err);
	rc = fn ? fn(ctx, key, copy, len) : AKS_OK;
	free(copy);
	return rc;
}

typedef struct snap {
	char *key, *value;
	size_t len;
} snap;

static int ms_scan(aks_store_impl *s, const char *ns, const char *prefix, aks_store_record_fn fn,
                   void *ctx, aks_error **err)
{
	int rc = check_name(s, "namespace", ns, err);
	if (rc < 0)
		return rc;
	if (!prefix)
		prefix = "";
	size_t plen = strlen(prefix), k = 0;
	snap *v = NULL;
	pthread_mutex_lock(&s->mu);
	int64_t now = s->host->now_ms();
	mns *n = hm_get(&s->ns, ns, strlen(ns));
	if (n && !(v = calloc(n->recs.n + 1, sizeof(*v))))
		rc = oom(s, err);
	for (size_t i = 0; v && rc == AKS_OK && i < n->recs.nb; i++) {
		for (hent **pp = &n->recs.b[i]; *pp && rc == AKS_OK;) {
			hent *e = *pp;
			mrec *r = e->val;
			if (ended(r, now)) {
				s->expiring--;
				rec_free(hm_unlink(&n->recs, pp));
				continue;
			}
			pp = &e->next;
			if (e->len < plen || memcmp(e->key, prefix, plen) != 0)
				continue;
			v[k].key = strdup(e->key);
			v[k].value = malloc(r->len + 1);
			v[k].len = r->len;
			if (v[k].value)
				memcpy(v[k].value, r->value, r->len + 1);
			if (!v[k].key || !v[k].value)
				rc = oom(s, err);
			k++;
		}
	}
	if (n && n->recs.n == 0)
		ns_free(hm_unlink(&s->ns, hm_slot(&s->ns, ns, strlen(ns))));
	pthread_mutex_unlock(&s->mu);
	for (size_t i = 0; i < k; i++) {
		if (rc == AKS_OK && fn)
			rc = fn(ctx, v[i].key, v[i].value, v[i].len);
		free(v[i].key);
		free(v[i].value);
	}
	free(v);
	return rc;
}

static int ms_namespaces(aks_store_impl *s, aks_store_name_fn fn, void *ctx, aks_error **err)
{
	pthread_mutex_lock(&s->mu);
	/* Force a sweep: a namespace of ended records only is not listed. */
	s->next_sweep = 0;
	sweep(s, s->host->now_ms());
	int rc = AKS_OK;
	size_t k = 0;
	char **names = s->ns.n ? calloc(s->ns.n, sizeof(*names)) : NULL;
	if (s->ns.n && !names)
		rc = oom(s, err);
	for (size_t i = 0; names && rc == AKS_OK && i < s->ns.nb; i++)
		for (hent *e = s->ns.b[i]; e && rc == AKS_OK; e = e->next)
			if (!(names[k++] = strdup(e->key)))
				rc = oom(s, err);
	pthread_mutex_unlock(&s->mu);
	for (size_t i = 0; i < k; i++) {
		if (rc == AKS_OK && fn)
			rc = fn(ctx, names[i]);
		free(names[i]);
	}
	free(names);
	return rc;
}

/* ---- named locks ----------------------------------------------------------------------- */

/* Drops the entry of a lock nobody holds or waits for. */
static void lock_gc(aks_store_impl *s, const char *name, size_t len)
{
	hent **pp = hm_slot(&s->locks, name, len);
	mlock *l = *pp ? (*pp)->val : NULL;
	if (l && !l->held && !l->waiters)
		lock_free(hm_unlink(&s->locks, pp));
}

static int ms_lock(aks_store_impl *s, const char *ns, const char *key, const aks_call *call,
                   aks_store_lock **out, aks_error **err)
{
	const aks_host_api *h = s->host;
	int rc = check_names(s, ns, key, err);
	if (rc < 0)
		return rc;
	size_t nslen = strlen(ns), keylen = strlen(key);
	aks_store_lock *lk = calloc(1, sizeof(*lk));
	if (!lk || !(lk->name = malloc(nslen + keylen + 2))) {
		free(lk);
		return oom(s, err);
	}
	lk->len = nslen + 1 + keylen;
	memcpy(lk->name, ns, nslen + 1);
	memcpy(lk->name + nslen + 1, key, keylen + 1);
	int cancel_fd = call ? h->cancel_fd(call) : -1;
	mwait me = {-1, NULL};

	pthread_mutex_lock(&s->mu);
	mlock *l = hm_get(&s->locks, lk->name, lk->len);
	if (!l && (!(l = calloc(1, sizeof(*l))) || hm_add(&s->locks, lk->name, lk->len, l) < 0)) {
		free(l);
		l = NULL;
		rc = oom(s, err);
	}
	while (rc == AKS_OK && l->held) {
		if (call && h->cancelled(call)) {
			rc = h->error_set(err, AKS_ECANCELLED,
			                  MS_NAME ": cancelled while waiting for the lock");
			break;
		}
		int64_t left = -1;
		if (call && call->deadline_ms > 0) {
			left = call->deadline_ms - h->now_ms();
			if (left <= 0) {
				rc = h->error_set(err, AKS_ETIMEOUT,
				                  MS_NAME
				                  ": timed out after %g s waiting for the lock, "
				                  "held by another operation",
				                  call->timeout);
				break;
			}
		}
		if (me.fd < 0) {
			me.fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
			if (me.fd < 0) {
				rc = h->error_set(err, AKS_EIO,
				                  MS_NAME ": cannot create an eventfd: %s",
				                  strerror(errno));
				break;
			}
			me.next = l->waiters;
			l->waiters = &me;
		}
		/* Registered before letting go of the mutex: an unlock from then on stays in
		 * the eventfd's counter until poll sees it. */
		pthread_mutex_unlock(&s->mu);
		struct pollfd pfd[2] = {{me.fd, POLLIN, 0}, {cancel_fd, POLLIN, 0}};
		poll(pfd, cancel_fd >= 0 ? 2 : 1, left > INT32_MAX ? INT32_MAX : (int)left);
		uint64_t count;
		ssize_t got = read(me.fd, &count, sizeof(count));
		(void)got; /* EAGAIN: nothing to drain */
		pthread_mutex_lock(&s->mu);
	}
	if (me.fd >= 0) {
		for (mwait **pp = &l->waiters; *pp; pp = &(*pp)->next)
			if (*pp == &me) {
				*pp = me.next;
				break;
			}
		close(me.fd);
	}
	if (rc == AKS_OK)
		l->held = true;
	else if (l)
		lock_gc(s, lk->name, lk->len);
	pthread_mutex_unlock(&s->mu);
	if (rc < 0) {
		free(lk->name);
		free(lk);
		return rc;
	}
	*out = lk;
	return AKS_OK;
}

static void ms_unlock(aks_store_impl *s, aks_store_lock *lk)
{
	if (!lk)
		return;
	pthread_mutex_lock(&s->mu);
	mlock *l = hm_get(&s->locks, lk->name, lk->len);
	if (l) {
		l->held = false;
		uint64_t one = 1;
		for (mwait *w = l->waiters; w; w = w->next) {
			ssize_t n = write(w->fd, &one, sizeof(one));
			(void)n; /* a full counter still reads as readable */
		}
		lock_gc(s, lk->name, lk->len);
	}
	pthread_mutex_unlock(&s->mu);
	free(lk->name);
	free(lk);
}

/* ---- descriptor ------------------------------------------------------------------------ */

static const aks_store_ops ms_ops = {
    .struct_version = AKS_STORE_OPS_VERSION,
    .struct_size = sizeof(aks_store_ops),
    .init = ms_init,
    .fini = ms_fini,
    .update = ms_update,
    .get = ms_get,
    .scan = ms_scan,
    .namespaces = ms_namespaces,
    .lock = ms_lock,
    .unlock = ms_unlock,
    .put_expiring = ms_put_expiring,
};

const aks_plugin_descriptor aks__memory_store_descriptor = {
    AKS_DESCRIPTOR_VERSION,
    sizeof(aks_plugin_descriptor),
    AKS_ABI_MAJOR,
    AKS_ABI_MINOR,
    AKS_PLUGIN_STORE,
    MS_NAME,
    PACKAGE_VERSION,
    "Apache-2.0",
    "the built-in response store for the single-process test topology: records, locks and "
    "expiring records in this process",
    NULL,
    &ms_ops,
    {NULL, NULL, NULL, NULL},
};
