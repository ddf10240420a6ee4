/*
 * tests/plugins/memstore/memstore.c - a store plugin that keeps records in memory, for
 * tests: it proves that the host reaches its state only through <aksandbox/store.h>.
 *
 * One process only (records die with it). A plain list under one mutex: tests hold a few
 * dozen records.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <aksandbox/store.h>

typedef struct record {
	char *ns, *key;
	char *value;
	size_t len;
	struct record *next;
} record;

typedef struct held {
	char *ns, *key;
	struct held *next;
} held;

struct aks_store_impl {
	const aks_host_api *host;
	pthread_mutex_t mu;
	record *records;
	held *locks;
};

struct aks_store_lock {
	char *ns, *key;
};

static int oom(aks_store_impl *m, aks_error **err)
{
	return m->host->error_set(err, AKS_ENOMEM, "memstore: out of memory");
}

static record **find(aks_store_impl *m, const char *ns, const char *key)
{
	record **r = &m->records;
	while (*r && (strcmp((*r)->ns, ns) != 0 || strcmp((*r)->key, key) != 0))
		r = &(*r)->next;
	return r;
}

static int ms_init(const aks_host_api *host, const aks_config *config, aks_store_impl **out,
                   aks_error **err)
{
	(void)config;
	aks_store_impl *m = calloc(1, sizeof(*m));
	if (!m)
		return host->error_set(err, AKS_ENOMEM, "memstore: out of memory");
	m->host = host;
	pthread_mutex_init(&m->mu, NULL);
	*out = m;
	return AKS_OK;
}

static void ms_fini(aks_store_impl *m)
{
	for (record *r = m->records, *next; r; r = next) {
		next = r->next;
		free(r->ns);
		free(r->key);
		free(r->value);
		free(r);
	}
	pthread_mutex_destroy(&m->mu);
	free(m);
}

static int ms_update(aks_store_impl *m, const char *ns, const char *key, aks_store_txn_fn fn,
                     void *ctx, aks_error **err)
{
	pthread_mutex_lock(&m->mu);
	record **slot = find(m, ns, key), *r = *slot;
	int action = AKS_STORE_KEEP;
	const char *nv = NULL;
	size_t nlen = 0;
	int rc = fn(ctx, r ? r->value : NULL, r ? r->len : 0, &action, &nv, &nlen, err);
	if (rc == AKS_OK && action == AKS_STORE_PUT) {
		char *copy = malloc(nlen + 1);
		if (!copy) {
			rc = oom(m, err);
		} else {
			memcpy(copy, nv, nlen);
			copy[nlen] = '\0';
			if (!r && (r = calloc(1, sizeof(*r))) &&
			    (!(r->ns = strdup(ns)) || !(r->key = strdup(key)))) {
				free(r->ns);
				free(r);
				r = NULL;
			} else if (r && !*slot) {
				*slot = r;
			}
			if (!r) {
				free(copy);
				rc = oom(m, err);
			} else {
				free(r->value);
				r->value = copy;
				r->len = nlen;
			}
		}
	} else if (rc == AKS_OK && action == AKS_STORE_DELETE && r) {
		*slot = r->next;
		free(r->ns);
		free(r->key);
		free(r->value);
		free(r);
	}
	pthread_mutex_unlock(&m->mu);
	return rc;
}

static int ms_get(aks_store_impl *m, const char *ns, const char *key, aks_store_record_fn fn,
                  void *ctx, aks_error **err)
{
	(void)err;
	pthread_mutex_lock(&m->mu);
	record *r = *find(m, ns, key);
	/* A copy, so the callback runs without the mutex. */
	char *copy = r ? malloc(r->len + 1) : NULL;
	size_t len = r ? r->len : 0;
	if (copy)
		memcpy(copy, r->value, len + 1);
	pthread_mutex_unlock(&m->mu);
	if (r && !copy)
		return oom(m, err);
	int rc = copy ? fn(ctx, key, copy, len) : AKS_ENOTFOUND;
	free(copy);
	return rc;
}

static int ms_scan(aks_store_impl *m, const char *ns, const char *prefix, aks_store_record_fn fn,
                   void *ctx, aks_error **err)
{
	/* Snapshot the matching records, then call back without the mutex. */
	pthread_mutex_lock(&m->mu);
	size_t n = 0;
	for (record *r = m->records; r; r = r->next)
		n++;
	record *snap = calloc(n ? n : 1, sizeof(*snap));
	size_t k = 0;
	for (record *r = m->records; snap && r; r = r->next) {
		if (strcmp(r->ns, ns) != 0 || strncmp(r->key, prefix, strlen(prefix)) != 0)
			continue;
		snap[k].key = strdup(r->key);
		snap[k].value = malloc(r->len + 1);
		if (snap[k].value)
			memcpy(snap[k].value, r->value, r->len + 1);
		snap[k].len = r->len;
		k++;
	}
	pthread_mutex_unlock(&m->mu);
	int rc = snap ? AKS_OK : oom(m, err);
	for (size_t i = 0; i < k; i++) {
		if (rc == AKS_OK && (!snap[i].key || !snap[i].value))
			rc = oom(m, err);
		if (rc == AKS_OK)
			rc = fn(ctx, snap[i].key, snap[i].value, snap[i].len);
		free(snap[i].key);
		free(snap[i].value);
	}
	free(snap);
	return rc;
}

static int ms_namespaces(aks_store_impl *m, aks_store_name_fn fn, void *ctx, aks_error **err)
{
	pthread_mutex_lock(&m->mu);
	size_t n = 0;
	for (record *r = m->records; r; r = r->next)
		n++;
	char **names = calloc(n + 1, sizeof(*names));
	size_t k = 0;
	for (record *r = m->records; names && r; r = r->next) {
		bool seen = false;
		for (size_t i = 0; i < k && !seen; i++)
			seen = strcmp(names[i], r->ns) == 0;
		if (!seen)
			names[k++] = strdup(r->ns);
	}
	pthread_mutex_unlock(&m->mu);
	int rc = names ? AKS_OK : oom(m, err);
	for (size_t i = 0; i < k; i++) {
		if (rc == AKS_OK)
			rc = names[i] ? fn(ctx, names[i]) : oom(m, err);
		free(names[i]);
	}
	free(names);
	return rc;
}

static bool is_held(aks_store_impl *m, const char *ns, const char *key)
{
	for (held *h = m->locks; h; h = h->next)
		if (strcmp(h->ns, ns) == 0 && strcmp(h->key, key) == 0)
			return true;
	return false;
}

static int ms_lock(aks_store_impl *m, const char *ns, const char *key, const aks_call *call,
                   aks_store_lock **out, aks_error **err)
{
	const aks_host_api *host = m->host;
	held *h = calloc(1, sizeof(*h));
	aks_store_lock *lk = calloc(1, sizeof(*lk));
	if (!h || !lk || !(h->ns = strdup(ns)) || !(h->key = strdup(key))) {
		if (h)
			free(h->ns);
		free(h);
		free(lk);
		return oom(m, err);
	}
	int rc = AKS_OK;
	pthread_mutex_lock(&m->mu);
	while (is_held(m, ns, key)) {
		if (call && host->cancelled(call)) {
			rc = host->error_set(err, AKS_ECANCELLED, "memstore: cancelled");
			break;
		}
		if (call && call->deadline_ms > 0 && host->now_ms() >= call->deadline_ms) {
			rc = host->error_set(err, AKS_ETIMEOUT, "memstore: lock wait timed out");
			break;
		}
		/* Wake now and then to look at the deadline and the cancellation. */
		pthread_mutex_unlock(&m->mu);
		poll(NULL, 0, 5);
		pthread_mutex_lock(&m->mu);
	}
	if (rc == AKS_OK) {
		h->next = m->locks;
		m->locks = h;
		lk->ns = h->ns;
		lk->key = h->key;
	}
	pthread_mutex_unlock(&m->mu);
	if (rc < 0) {
		free(h->ns);
		free(h->key);
		free(h);
		free(lk);
		return rc;
	}
	*out = lk;
	return AKS_OK;
}

static void ms_unlock(aks_store_impl *m, aks_store_lock *lk)
{
	pthread_mutex_lock(&m->mu);
	for (held **h = &m->locks; *h; h = &(*h)->next) {
		if ((*h)->ns == lk->ns && (*h)->key == lk->key) {
			held *gone = *h;
			*h = gone->next;
			free(gone->ns);
			free(gone->key);
			free(gone);
			break;
		}
	}
	pthread_mutex_unlock(&m->mu);
	free(lk);
}

static const aks_store_ops memstore_ops = {
    AKS_STORE_OPS_VERSION,
    sizeof(aks_store_ops),
    ms_init,
    ms_fini,
    ms_update,
    ms_get,
    ms_scan,
    ms_namespaces,
    ms_lock,
    ms_unlock,
    NULL,
};

static const aks_config_key memstore_keys[] = {
    AKS_CONFIG_KEY("label", AKS_CONFIG_STRING, false, NULL, "a free label, to test the block"),
    AKS_CONFIG_END,
};

AKS_PLUGIN_DEFINE(AKS_PLUGIN_STORE, "memstore", "1.0", "Apache-2.0",
                  "test store: records in memory, one process", memstore_keys, &memstore_ops);
