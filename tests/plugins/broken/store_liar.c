/*
 * store_liar.so - a store plugin that loads (every slot is set) but breaks the store
 * contract where no loader can see it, so that the contract suite must catch it:
 *  - it ignores the namespace of get and update (names collide);
 *  - its update is not atomic (read, think, write, with no lock between);
 *  - its lock excludes nobody.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <aksandbox/store.h>

#define SLOTS 64

typedef struct rec {
	char *ns, *key, *value;
	size_t len;
} rec;

struct aks_store_impl {
	const aks_host_api *host;
	pthread_mutex_t mu;
	rec r[SLOTS];
};

struct aks_store_lock {
	int unused;
};

static rec *find(aks_store_impl *s, const char *key)
{
	for (int i = 0; i < SLOTS; i++)
		if (s->r[i].key && strcmp(s->r[i].key, key) == 0)
			return &s->r[i];
	return NULL;
}

static int liar_init(const aks_host_api *host, const aks_config *config, aks_store_impl **out,
                     aks_error **err)
{
	(void)config, (void)err;
	aks_store_impl *s = calloc(1, sizeof(*s));
	if (!s)
		return AKS_ENOMEM;
	s->host = host;
	pthread_mutex_init(&s->mu, NULL);
	*out = s;
	return AKS_OK;
}

static void clear(rec *r)
{
	free(r->ns);
	free(r->key);
	free(r->value);
	memset(r, 0, sizeof(*r));
}

static void liar_fini(aks_store_impl *s)
{
	for (int i = 0; i < SLOTS; i++)
		clear(&s->r[i]);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

static int liar_update(aks_store_impl *s, const char *ns, const char *key, aks_store_txn_fn fn,
                       void *ctx, aks_error **err)
{
	char *copy = NULL;
	size_t len = 0;
	pthread_mutex_lock(&s->mu);
	rec *r = find(s, key);
	if (r) {
		copy = malloc(r->len + 1);
		if (copy)
			memcpy(copy, r->value, r->len + 1);
		len = r->len;
	}
	pthread_mutex_unlock(&s->mu);
	int action = AKS_STORE_KEEP;
	const char *nv = NULL;
	size_t nlen = 0;
	int rc = fn(ctx, copy, len, &action, &nv, &nlen, err);
	free(copy);
	if (rc != AKS_OK)
		return rc;
	usleep(1000); /* the window in which other updates are lost */
	pthread_mutex_lock(&s->mu);
	r = find(s, key);
	if (action == AKS_STORE_DELETE && r) {
		clear(r);
	} else if (action == AKS_STORE_PUT) {
		for (int i = 0; !r && i < SLOTS; i++)
			if (!s->r[i].key)
				r = &s->r[i];
		if (r) {
			free(r->value);
			free(r->ns);
			free(r->key);
			r->ns = strdup(ns);
			r->key = strdup(key);
			r->value = malloc(nlen + 1);
			memcpy(r->value, nv, nlen);
			r->value[nlen] = '\0';
			r->len = nlen;
		}
	}
	pthread_mutex_unlock(&s->mu);
	return AKS_OK;
}

static int liar_get(aks_store_impl *s, const char *ns, const char *key, aks_store_record_fn fn,
                    void *ctx, aks_error **err)
{
	(void)ns, (void)err;
	pthread_mutex_lock(&s->mu);
	rec *r = find(s, key);
	int rc = r ? fn(ctx, key, r->value, r->len) : AKS_ENOTFOUND;
	pthread_mutex_unlock(&s->mu);
	return rc;
}

static int liar_scan(aks_store_impl *s, const char *ns, const char *prefix, aks_store_record_fn fn,
                     void *ctx, aks_error **err)
{
	(void)ns, (void)err;
	int rc = AKS_OK;
	pthread_mutex_lock(&s->mu);
	for (int i = 0; rc == AKS_OK && i < SLOTS; i++)
		if (s->r[i].key && strncmp(s->r[i].key, prefix, strlen(prefix)) == 0)
			rc = fn(ctx, s->r[i].key, s->r[i].value, s->r[i].len);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

static int liar_namespaces(aks_store_impl *s, aks_store_name_fn fn, void *ctx, aks_error **err)
{
	(void)err;
	int rc = AKS_OK;
	pthread_mutex_lock(&s->mu);
	for (int i = 0; rc == AKS_OK && i < SLOTS; i++)
		if (s->r[i].ns)
			rc = fn(ctx, s->r[i].ns);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

static struct aks_store_lock nobody;

static int liar_lock(aks_store_impl *s, const char *ns, const char *key, const aks_call *call,
                     aks_store_lock **out, aks_error **err)
{
	(void)s, (void)ns, (void)key, (void)call, (void)err;
	*out = &nobody;
	return AKS_OK;
}

static void liar_unlock(aks_store_impl *s, aks_store_lock *lock)
{
	(void)s, (void)lock;
}

static const aks_store_ops ops = {
    .struct_version = AKS_STORE_OPS_VERSION,
    .struct_size = sizeof(aks_store_ops),
    .init = liar_init,
    .fini = liar_fini,
    .update = liar_update,
    .get = liar_get,
    .scan = liar_scan,
    .namespaces = liar_namespaces,
    .lock = liar_lock,
    .unlock = liar_unlock,
};

AKS_PLUGIN_DEFINE(AKS_PLUGIN_STORE, "store_liar", "1.0", "MIT", "deliberately broken test store",
                  NULL, &ops);
