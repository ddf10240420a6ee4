/*
 * plugins/redis/rd_lock.c - named locks as leased Redis keys.
 *
 * Taking a lock sets "<prefix>l:<n>:<ns>:<key>" to a random token with NX and a lease (PX);
 * a waiter polls with backoff (1 ms doubling to 20 ms), looking at the call's deadline and
 * cancellation between tries. While held, a background thread renews the lease every third
 * of it (PEXPIRE only if the token is still ours, in a script). A holder that dies stops
 * renewing, so its lock frees itself one lease later. Unlock deletes the key only if the
 * token is still ours (a lock lost to an expired lease is never taken from its new holder).
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rd_internal.h"

#define RD_POLL_MAX_MS 20

/* Sets the key unless someone else holds it; already ours (a retried command whose first
 * reply was lost) counts as taken. */
static const char acquire_lua[] =
    "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end "
    "if redis.call('GET', KEYS[1]) == ARGV[1] then "
    "redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end "
    "return 0";
static const char renew_lua[] = "if redis.call('GET', KEYS[1]) == ARGV[1] then "
                                "return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0";
static const char release_lua[] = "if redis.call('GET', KEYS[1]) == ARGV[1] then "
                                  "return redis.call('DEL', KEYS[1]) end return 0";

/* EVAL script 1 key token [lease]. */
static void script_argv(const char *script, const aks_store_lock *lk, const char *lease,
                        const char **argv, size_t *lens, int *argc)
{
	argv[0] = "EVAL", lens[0] = 4;
	argv[1] = script, lens[1] = strlen(script);
	argv[2] = "1", lens[2] = 1;
	argv[3] = lk->key, lens[3] = lk->key_len;
	argv[4] = lk->token, lens[4] = strlen(lk->token);
	*argc = 5;
	if (lease) {
		argv[5] = lease, lens[5] = strlen(lease);
		*argc = 6;
	}
}

static void free_lock(aks_store_lock *lk)
{
	if (lk)
		free(lk->key);
	free(lk);
}

/* Adds a taken lock to the lease keeper, which starts renewing on first use. */
static int track(aks_store_impl *s, aks_store_lock *lk, aks_error **err)
{
	if (aks_lease_track(&s->leases, &lk->lease, lk) == 0)
		return AKS_OK;
	return s->host->error_set(err, AKS_ENOMEM,
	                          RD_NAME " store: cannot start the lease renewal thread");
}

static void release_key(aks_store_impl *s, aks_store_lock *lk)
{
	const char *argv[6];
	size_t lens[6];
	int argc;
	script_argv(release_lua, lk, NULL, argv, lens, &argc);
	redisContext *c = NULL;
	bool retried = false;
	redisReply *r = NULL;
	aks_error *err = NULL;
	if (rd_command(s, &c, &retried, argc, argv, lens, &r, &err) < 0) {
		s->host->log(AKS_LOG_WARNING, RD_NAME,
		             "could not release a lock (it frees itself when its lease ends): %s",
		             s->host->error_message(err));
		s->host->error_free(err);
	}
	freeReplyObject(r);
	rd_pool_put(s, c, false);
}

int rd_lock(aks_store_impl *s, const char *ns, const char *key, const aks_call *call,
            aks_store_lock **out, aks_error **err)
{
	const aks_host_api *host = s->host;
	*out = NULL;
	aks_store_lock *lk = calloc(1, sizeof(*lk));
	if (!lk)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	aks_buf b = {0};
	rd_key(s, 'l', ns, key, &b);
	if (b.failed || rd_token(lk->token) < 0) {
		aks__buf_free(&b);
		free(lk);
		return host->error_set(err, AKS_ENOMEM,
		                       RD_NAME " store: out of memory or randomness");
	}
	lk->key_len = b.len;
	lk->key = aks__buf_steal(&b);
	char lease[32];
	snprintf(lease, sizeof(lease), "%lld", (long long)s->lease_ms);
	const char *argv[6];
	size_t lens[6];
	int argc;
	script_argv(acquire_lua, lk, lease, argv, lens, &argc);

	int rc, delay = 1;
	redisContext *c = NULL;
	for (;;) {
		bool retried = false;
		redisReply *r = NULL;
		rc = rd_command(s, &c, &retried, argc, argv, lens, &r, err);
		bool taken = rc == AKS_OK && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
		freeReplyObject(r);
		if (rc < 0 || taken)
			break;
		/* Not holding a connection while waiting: the holder may need one to let go. */
		rd_pool_put(s, c, false);
		c = NULL;
		if (call && host->cancelled(call)) {
			rc = host->error_set(err, AKS_ECANCELLED,
			                     "cancelled while waiting for the sandbox session");
			break;
		}
		int64_t wait = delay;
		if (call && call->deadline_ms > 0) {
			int64_t left = call->deadline_ms - host->now_ms();
			if (left <= 0) {
				rc = host->error_set(err, AKS_ETIMEOUT,
				                     "timed out after %g s waiting for the sandbox "
				                     "session, busy with another operation",
				                     call->timeout);
				break;
			}
			if (left < wait)
				wait = left;
		}
		struct pollfd pfd = {call ? host->cancel_fd(call) : -1, POLLIN, 0};
		poll(&pfd, pfd.fd >= 0 ? 1 : 0, (int)wait);
		if (delay < RD_POLL_MAX_MS)
			delay = delay * 2 > RD_POLL_MAX_MS ? RD_POLL_MAX_MS : delay * 2;
	}
	rd_pool_put(s, c, false);
	if (rc == AKS_OK && (rc = track(s, lk, err)) < 0)
		release_key(s, lk);
	if (rc < 0) {
		free_lock(lk);
		return rc;
	}
	*out = lk;
	return AKS_OK;
}

void rd_unlock(aks_store_impl *s, aks_store_lock *lk)
{
	if (!lk)
		return;
	aks_lease_untrack(&s->leases, &lk->lease);
	release_key(s, lk);
	free_lock(lk);
}

/* ---- renewal ---- */

/* What renewing a lock needs, copied: the holder may unlock it during a renewal pass. */
typedef struct renewal {
	size_t key_len;
	char token[33];
	char key[]; /* NUL-terminated */
} renewal;

static void *copy_lock(const void *lock)
{
	const aks_store_lock *lk = lock;
	renewal *r = malloc(sizeof(*r) + lk->key_len + 1);
	if (!r)
		return NULL;
	r->key_len = lk->key_len;
	memcpy(r->token, lk->token, sizeof(r->token));
	memcpy(r->key, lk->key, lk->key_len + 1);
	return r;
}

/* Renews every lock (v: renewal copies) in one pipelined round trip. */
static void renew_all(aks_store_impl *s, void *const *v, size_t n)
{
	char lease[32];
	snprintf(lease, sizeof(lease), "%lld", (long long)s->lease_ms);
	redisContext *c = NULL;
	aks_error *err = NULL;
	/* A fresh connection only after a failure: the pooled ones are then likely dead. */
	for (int attempt = 0; attempt < 2; attempt++) {
		if (rd_pool_get(s, attempt > 0, &c, &err) < 0)
			break;
		rd_sigguard g;
		rd_sig_block(&g);
		for (size_t i = 0; i < n; i++) {
			const renewal *lk = v[i];
			const char *argv[6] = {"EVAL", renew_lua, "1", lk->key, lk->token, lease};
			size_t lens[6] = {4, strlen(renew_lua), 1, lk->key_len, 32, strlen(lease)};
			redisAppendCommandArgv(c, 6, argv, lens);
		}
		bool broken = false;
		for (size_t i = 0; i < n && !broken; i++) {
			redisReply *r = NULL;
			if (redisGetReply(c, (void **)&r) != REDIS_OK || !r) {
				broken = true;
				break;
			}
			const renewal *lk = v[i];
			if (r->type == REDIS_REPLY_INTEGER && r->integer == 0)
				s->host->log(AKS_LOG_WARNING, RD_NAME,
				             "the lease of lock %.*s ended before it was renewed: "
				             "another process may now hold it",
				             (int)lk->key_len, lk->key);
			else if (r->type == REDIS_REPLY_ERROR)
				s->host->log(AKS_LOG_WARNING, RD_NAME,
				             "renewing lock %.*s: " RD_SERVER " answered %s",
				             (int)lk->key_len, lk->key, r->str);
			freeReplyObject(r);
		}
		rd_sig_restore(&g);
		if (!broken) {
			rd_pool_put(s, c, false);
			return;
		}
		rd_io_error(s, c, "lost the connection while renewing lock leases", &err);
		rd_pool_put(s, c, true);
		c = NULL;
		if (attempt == 0) {
			s->host->error_free(err);
			err = NULL;
		}
	}
	s->host->log(AKS_LOG_WARNING, RD_NAME, "could not renew lock leases (retrying): %s",
	             err ? s->host->error_message(err) : "unknown error");
	s->host->error_free(err);
}

/* The keeper's pass, one round trip for all. A copy missing (out of memory) skips the pass,
 * silently as before the keeper: the next one, a third of a lease later, tries again. */
static void renew(void *ctx, void *const *copies, size_t n)
{
	aks_store_impl *s = ctx;
	if (!copies) {
		s->host->log(AKS_LOG_WARNING, RD_NAME, "out of memory renewing lock leases");
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (!copies[i])
			return;
	renew_all(s, copies, n);
}

static const aks_lease_ops lease_ops = {copy_lock, free, renew};

void rd_lock_init(aks_store_impl *s)
{
	aks_lease_init(&s->leases, s->lease_ms, &lease_ops, s);
}

void rd_lock_stop(aks_store_impl *s)
{
	aks_lease_fini(&s->leases);
}
