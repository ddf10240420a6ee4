/*
 * core/plugin/handle_cache.c - open sandbox handles kept between operations (see handle_cache.h).
 *
 * A short list, most recently kept first: at most AKS_HANDLE_CACHE_MAX entries per provider,
 * so a linear scan costs less than any index would.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/handle_cache.h"

typedef struct kept {
	aks_sandbox *sb;
	char *id;
	int64_t used_ms;     /* when it was given back (aks__now_ms) */
	int64_t max_idle_ms; /* <= 0: no age limit */
	struct kept *next;
} kept;

struct aks_handle_cache {
	pthread_mutex_t mu;
	kept *head; /* most recently kept first */
	size_t count;
	size_t max;
};

aks_handle_cache *aks__handle_cache_new(size_t max_handles)
{
	aks_handle_cache *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	pthread_mutex_init(&c->mu, NULL);
	c->max = max_handles;
	return c;
}

static void close_all(kept *k)
{
	while (k) {
		kept *next = k->next;
		aks_sandbox_close(k->sb);
		free(k->id);
		free(k);
		k = next;
	}
}

void aks__handle_cache_free(aks_handle_cache *c)
{
	if (!c)
		return;
	close_all(c->head);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

/* Unlinks the entries too old to keep and those past the size limit (the list's tail, least
 * recently kept), into *closing. Under the lock. */
static void expire_locked(aks_handle_cache *c, int64_t now, kept **closing)
{
	size_t n = 0;
	for (kept **pp = &c->head; *pp;) {
		kept *k = *pp;
		bool stale = k->max_idle_ms > 0 && now - k->used_ms > k->max_idle_ms;
		if (stale || n >= c->max) {
			*pp = k->next;
			k->next = *closing;
			*closing = k;
			c->count--;
			continue;
		}
		n++;
		pp = &k->next;
	}
}

/* Unlinks the entry of sandbox_id. Under the lock. */
static kept *unlink_locked(aks_handle_cache *c, const char *sandbox_id)
{
	for (kept **pp = &c->head; *pp; pp = &(*pp)->next) {
		kept *k = *pp;
		if (strcmp(k->id, sandbox_id) == 0) {
			*pp = k->next;
			k->next = NULL;
			c->count--;
			return k;
		}
	}
	return NULL;
}

aks_sandbox *aks__handle_cache_take(aks_handle_cache *c, const char *sandbox_id)
{
	if (!c || !sandbox_id)
		return NULL;
	kept *closing = NULL;
	pthread_mutex_lock(&c->mu);
	expire_locked(c, aks__now_ms(), &closing);
	kept *k = unlink_locked(c, sandbox_id);
	pthread_mutex_unlock(&c->mu);
	close_all(closing);
	if (!k)
		return NULL;
	aks_sandbox *sb = k->sb;
	free(k->id);
	free(k);
	return sb;
}

void aks__handle_cache_put(aks_handle_cache *c, aks_sandbox *sb, int64_t max_idle_ms)
{
	if (!sb)
		return;
	kept *k = c ? calloc(1, sizeof(*k)) : NULL;
	if (!k || !(k->id = strdup(aks_sandbox_get_id(sb)))) {
		free(k);
		aks_sandbox_close(sb); /* no cache, or no memory: the original's close */
		return;
	}
	k->sb = sb;
	k->used_ms = aks__now_ms();
	k->max_idle_ms = max_idle_ms;
	kept *closing = NULL;
	pthread_mutex_lock(&c->mu);
	for (kept *o = c->head; o; o = o->next)
		if (strcmp(o->id, k->id) == 0) {
			/* Two operations on one sandbox (an attached environment shared by
			 * sessions) each had a handle: one is enough. */
			k->next = closing;
			closing = k;
			k = NULL;
			break;
		}
	if (k) {
		k->next = c->head;
		c->head = k;
		c->count++;
	}
	expire_locked(c, k ? k->used_ms : aks__now_ms(), &closing);
	pthread_mutex_unlock(&c->mu);
	close_all(closing);
}

void aks__handle_cache_drop(aks_handle_cache *c, const char *sandbox_id)
{
	if (!c || !sandbox_id)
		return;
	pthread_mutex_lock(&c->mu);
	kept *k = unlink_locked(c, sandbox_id);
	pthread_mutex_unlock(&c->mu);
	close_all(k);
}

size_t aks__handle_cache_size(aks_handle_cache *c)
{
	if (!c)
		return 0;
	pthread_mutex_lock(&c->mu);
	size_t n = c->count;
	pthread_mutex_unlock(&c->mu);
	return n;
}
