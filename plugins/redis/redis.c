/*
 * plugins/redis/redis.c - the redis store: the host's records, locks and expiring response
 * records in Redis, shared by every process and host that points at the same server.
 *
 * Records are plain string keys (rd_keys.c). An update is optimistic: WATCH and GET the key,
 * run the host's function, then MULTI / SET or DEL / EXEC, and again from the start when
 * another writer got in between (EXEC answers nil). The transaction also sets a short-lived
 * commit marker, so that when the connection dies after EXEC was sent, a new connection can
 * tell whether the write happened instead of applying the function twice.
 *
 * Layout, locking and failure behaviour: docs/plugins/redis.md.
 */
#include "config.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rd_internal.h"

#ifndef RD_VERSION
#error "RD_VERSION must be defined (the package version)"
#endif

/* Optimistic retries before an update gives up: each lost race means another update of the
 * same record committed, so this bounds only pathological contention. */
#define RD_MAX_CONFLICTS 1000
/* Keys asked of each SCAN step, and fetched per MGET. */
#define RD_SCAN_COUNT "1000"
#define RD_MGET_BATCH 256

static const aks_config_key rd_config_keys[] = {
    AKS_CONFIG_KEY("url", AKS_CONFIG_STRING, false, "redis://localhost:6379",
                   "redis://[user:password@]host[:port][/db], rediss://... (TLS), or "
                   "unix:///path/redis.sock[?db=N]"),
    AKS_CONFIG_KEY("prefix", AKS_CONFIG_STRING, false, "\"aks:\"",
                   "prepended to every key this store writes"),
    AKS_CONFIG_KEY("password_env", AKS_CONFIG_STRING, false, NULL,
                   "environment variable holding the password (read at start; overrides "
                   "the url's)"),
    AKS_CONFIG_KEY("connect_timeout", AKS_CONFIG_DOUBLE, false, "5",
                   "seconds to wait for a connection"),
    AKS_CONFIG_KEY("command_timeout", AKS_CONFIG_DOUBLE, false, "10",
                   "seconds to wait for a reply"),
    AKS_CONFIG_KEY("lock_lease", AKS_CONFIG_DOUBLE, false, "30",
                   "seconds a lock outlives a holder that stopped renewing it (it died)"),
    AKS_CONFIG_KEY("pool_size", AKS_CONFIG_INT, false, "16",
                   "most connections open at once (1 to 1024)"),
    AKS_CONFIG_KEY("ttl", AKS_CONFIG_INT, false, "0",
                   "accepted for the reference's response_store.redis.ttl; the host passes "
                   "each expiring record's time to live"),
    AKS_CONFIG_KEY("tls_ca_file", AKS_CONFIG_STRING, false, NULL,
                   "rediss://: CA certificates to verify the server with (PEM)"),
    AKS_CONFIG_KEY("tls_cert_file", AKS_CONFIG_STRING, false, NULL,
                   "rediss://: client certificate (PEM), for servers that require one"),
    AKS_CONFIG_KEY("tls_key_file", AKS_CONFIG_STRING, false, NULL,
                   "rediss://: the client certificate's private key (PEM)"),
    AKS_CONFIG_KEY("tls_server_name", AKS_CONFIG_STRING, false, NULL,
                   "rediss://: the name to verify (SNI); default: the url's host"),
    AKS_CONFIG_KEY("tls_skip_verify", AKS_CONFIG_BOOL, false, "false",
                   "rediss://: do not verify the server's certificate (testing only)"),
    AKS_CONFIG_END,
};

static struct timeval to_tv(double s)
{
	struct timeval tv;
	tv.tv_sec = (time_t)s;
	tv.tv_usec = (suseconds_t)((s - (double)tv.tv_sec) * 1e6);
	return tv;
}

static void rd_fini(aks_store_impl *s);

static int read_config(aks_store_impl *s, const aks_config *cfg, aks_error **err)
{
	const aks_host_api *host = s->host;
	const char *url = NULL, *prefix = NULL, *pw_env = NULL;
	const char *ca = NULL, *cert = NULL, *key = NULL, *sni = NULL;
	double connect_t = 5, command_t = 10, lease = 30;
	int64_t pool = 16;
	bool skip = false;
	host->config_string(cfg, "url", &url);
	host->config_string(cfg, "prefix", &prefix);
	host->config_string(cfg, "password_env", &pw_env);
	host->config_double(cfg, "connect_timeout", &connect_t);
	host->config_double(cfg, "command_timeout", &command_t);
	host->config_double(cfg, "lock_lease", &lease);
	host->config_int(cfg, "pool_size", &pool);
	host->config_string(cfg, "tls_ca_file", &ca);
	host->config_string(cfg, "tls_cert_file", &cert);
	host->config_string(cfg, "tls_key_file", &key);
	host->config_string(cfg, "tls_server_name", &sni);
	host->config_bool(cfg, "tls_skip_verify", &skip);

	if (!(connect_t > 0 && connect_t <= 3600) || !(command_t > 0 && command_t <= 3600))
		return host->error_set(err, AKS_ECONFIG,
		                       RD_NAME ": connect_timeout and command_timeout must be more "
		                               "than 0 and at most 3600 seconds");
	if (!(lease >= 0.1 && lease <= 86400))
		return host->error_set(err, AKS_ECONFIG,
		                       RD_NAME ".lock_lease: %g is not from 0.1 to 86400 seconds",
		                       lease);
	if (pool < 1 || pool > 1024)
		return host->error_set(err, AKS_ECONFIG,
		                       RD_NAME ".pool_size: %lld is not from 1 to 1024",
		                       (long long)pool);
	int rc = rd_target_parse(host, url ? url : "redis://localhost:6379", &s->target, err);
	if (rc < 0)
		return rc;
	if (pw_env) {
		const char *pw = getenv(pw_env);
		if (!pw || !*pw)
			return host->error_set(err, AKS_ECONFIG,
			                       RD_NAME
			                       ".password_env: the environment variable %s is "
			                       "not set",
			                       pw_env);
		free(s->target.password);
		if (!(s->target.password = strdup(pw)))
			return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	bool tls_keys = ca || cert || key || sni || skip;
	if (tls_keys && !s->target.tls)
		return host->error_set(err, AKS_ECONFIG,
		                       RD_NAME ": tls_* keys are set but the url is not rediss://");
	if (!cert != !key)
		return host->error_set(err, AKS_ECONFIG,
		                       RD_NAME ": tls_cert_file and tls_key_file go together");
	if (s->target.tls && (rc = rd_tls_new(s, ca, cert, key, sni, skip, err)) < 0)
		return rc;

	if (!(s->prefix = strdup(prefix ? prefix : "aks:")))
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	s->prefix_len = strlen(s->prefix);
	s->connect_tv = to_tv(connect_t);
	s->command_tv = to_tv(command_t);
	s->lease_ms = (int64_t)(lease * 1000);
	/* The marker is read back only right after a reconnect, at most one connect and one
	 * command later. */
	s->marker_ttl_ms = (int64_t)((connect_t + command_t) * 2000) + 10000;
	s->pool_max = (int)pool;
	if (!(s->idle = calloc((size_t)pool, sizeof(*s->idle))))
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	return AKS_OK;
}

static int rd_init(const aks_host_api *host, const aks_config *cfg, aks_store_impl **out,
                   aks_error **err)
{
	*out = NULL;
	aks_store_impl *s = calloc(1, sizeof(*s));
	if (!s)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	s->host = host;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	int rc = read_config(s, cfg, err);
	if (rc < 0) {
		rd_fini(s);
		return rc;
	}
	rd_lock_init(s);
	/* Connect lazily: a host that never touches its state needs no server. */
	*out = s;
	return AKS_OK;
}

static void rd_fini(aks_store_impl *s)
{
	if (!s)
		return;
	rd_lock_stop(s);
	rd_pool_drain(s);
	rd_tls_free(s->tls);
	rd_target_free(&s->target);
	free(s->prefix);
	free(s->idle);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
}

static int oom(aks_store_impl *s, aks_error **err)
{
	return s->host->error_set(err, AKS_ENOMEM, "out of memory");
}

/* ---- update ---- */

/* Sends `n` pipelined commands and reads their replies into r[] (all NULL on failure). */
static bool pipeline(redisContext *c, int n, const int *argc, const char **const *argv,
                     const size_t *const *lens, redisReply **r)
{
	rd_sigguard g;
	rd_sig_block(&g);
	bool ok = true;
	for (int i = 0; i < n && ok; i++)
		ok = redisAppendCommandArgv(c, argc[i], argv[i], lens[i]) == REDIS_OK;
	for (int i = 0; i < n; i++)
		r[i] = NULL;
	for (int i = 0; i < n && ok; i++)
		ok = redisGetReply(c, (void **)&r[i]) == REDIS_OK && r[i];
	rd_sig_restore(&g);
	if (!ok) {
		for (int i = 0; i < n; i++) {
			freeReplyObject(r[i]);
			r[i] = NULL;
		}
	}
	return ok;
}

static void free_replies(redisReply **r, int n)
{
	for (int i = 0; i < n; i++) {
		freeReplyObject(r[i]);
		r[i] = NULL;
	}
}

/* UNWATCH, so that the connection goes back to the pool clean. */
static void unwatch(aks_store_impl *s, redisContext **c)
{
	const char *argv[] = {"UNWATCH"};
	size_t lens[] = {7};
	rd_sigguard g;
	rd_sig_block(&g);
	redisReply *r = redisCommandArgv(*c, 1, argv, lens);
	rd_sig_restore(&g);
	rd_pool_put(s, *c, !r || r->type == REDIS_REPLY_ERROR);
	freeReplyObject(r);
	*c = NULL;
}

/* After the connection died with EXEC sent: did the transaction commit? 1 yes, 0 no, or an
 * error. Uses the one reconnect the operation is allowed. */
static int committed(aks_store_impl *s, redisContext **c, const char *marker, size_t mlen,
                     aks_error **err)
{
	const char *argv[] = {"EXISTS", marker};
	size_t lens[] = {6, mlen};
	bool retried = true; /* no second reconnect */
	redisReply *r = NULL;
	aks_error *why = NULL;
	int rc = rd_pool_get(s, true, c, &why);
	if (rc == AKS_OK)
		rc = rd_command(s, c, &retried, 2, argv, lens, &r, &why);
	if (rc < 0) {
		s->host->error_set(err, rc,
		                   RD_NAME
		                   " store: lost the connection during an update, which may or "
		                   "may not have been written: %s",
		                   why ? s->host->error_message(why) : "unknown error");
		s->host->error_free(why);
		return rc;
	}
	int yes = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
	freeReplyObject(r);
	return yes;
}

static int rd_update(aks_store_impl *s, const char *ns, const char *key, aks_store_txn_fn fn,
                     void *ctx, aks_error **err)
{
	aks_buf k = {0}, m = {0};
	rd_key(s, 'r', ns, key, &k);
	char token[33];
	if (k.failed || rd_token(token) < 0) {
		aks__buf_free(&k);
		return oom(s, err);
	}
	char ttl[32];
	snprintf(ttl, sizeof(ttl), "%lld", (long long)s->marker_ttl_ms);

	redisContext *c = NULL;
	bool reconnected = false;
	int rc = AKS_OK, conflicts = 0;
	for (;;) {
		if (!c && (rc = rd_pool_get(s, reconnected, &c, err)) < 0)
			break;
		/* WATCH and GET in one round trip. */
		const char *w_argv[] = {"WATCH", k.data}, *g_argv[] = {"GET", k.data};
		size_t w_lens[] = {5, k.len}, g_lens[] = {3, k.len};
		const char **argvs[] = {w_argv, g_argv};
		const size_t *lenss[] = {w_lens, g_lens};
		int argcs[] = {2, 2};
		redisReply *r[4];
		if (!pipeline(c, 2, argcs, (const char **const *)argvs, lenss, r)) {
			if (reconnected) {
				rc = rd_io_error(s, c, "lost the connection to " RD_SERVER, err);
				break;
			}
			rd_pool_put(s, c, true);
			c = NULL;
			reconnected = true;
			continue;
		}
		if (r[0]->type == REDIS_REPLY_ERROR || r[1]->type == REDIS_REPLY_ERROR) {
			rc = rd_reply_error(s, r[0]->type == REDIS_REPLY_ERROR ? r[0] : r[1],
			                    "cannot read a record", err);
			free_replies(r, 2);
			unwatch(s, &c);
			break;
		}
		if (r[1]->type != REDIS_REPLY_STRING && r[1]->type != REDIS_REPLY_NIL) {
			free_replies(r, 2);
			unwatch(s, &c);
			rc = s->host->error_set(err, AKS_EIO,
			                        RD_NAME " store: %s at %s is not a string key",
			                        k.data, s->target.display);
			break;
		}
		bool exists = r[1]->type == REDIS_REPLY_STRING;
		int action = AKS_STORE_KEEP;
		const char *nv = NULL;
		size_t nlen = 0;
		rc = fn(ctx, exists ? r[1]->str : NULL, exists ? r[1]->len : 0, &action, &nv, &nlen,
		        err);
		free_replies(r, 2);
		if (rc == AKS_OK && action == AKS_STORE_PUT && !nv)
			rc =
			    s->host->error_set(err, AKS_EINVAL, RD_NAME " store: nothing to write");
		if (rc != AKS_OK || action == AKS_STORE_KEEP ||
		    (action == AKS_STORE_DELETE && !exists)) {
			unwatch(s, &c);
			break;
		}
		/* MULTI, SET or DEL, the commit marker, EXEC: one round trip. */
		aks__buf_reset(&m);
		aks__buf_append(&m, s->prefix, s->prefix_len);
		aks__buf_puts(&m, "t:");
		aks__buf_puts(&m, token);
		if (m.failed) {
			unwatch(s, &c);
			rc = oom(s, err);
			break;
		}
		const char *mu_argv[] = {"MULTI"}, *ex_argv[] = {"EXEC"};
		size_t mu_lens[] = {5}, ex_lens[] = {4};
		const char *set_argv[] = {"SET", k.data, nv}, *del_argv[] = {"DEL", k.data};
		size_t set_lens[] = {3, k.len, nlen}, del_lens[] = {3, k.len};
		const char *mk_argv[] = {"SET", m.data, "1", "PX", ttl};
		size_t mk_lens[] = {3, m.len, 1, 2, strlen(ttl)};
		bool put = action == AKS_STORE_PUT;
		const char **targv[] = {mu_argv, put ? set_argv : del_argv, mk_argv, ex_argv};
		const size_t *tlens[] = {mu_lens, put ? set_lens : del_lens, mk_lens, ex_lens};
		int targc[] = {1, put ? 3 : 2, 5, 1};
		if (!pipeline(c, 4, targc, (const char **const *)targv, tlens, r)) {
			/* EXEC may have run: ask a new connection before deciding. */
			if (reconnected) {
				rc = rd_io_error(
				    s, c,
				    "lost the connection during an update (it may or may "
				    "not have been written)",
				    err);
				break;
			}
			rd_pool_put(s, c, true);
			c = NULL;
			reconnected = true;
			int yes = committed(s, &c, m.data, m.len, err);
			if (yes < 0) {
				rc = yes;
				break;
			}
			if (yes)
				break; /* it was written */
			if (rd_token(token) < 0) {
				rc = oom(s, err);
				break;
			}
			continue; /* not written: again, on the new connection */
		}
		redisReply *ex = r[3];
		if (ex->type == REDIS_REPLY_ARRAY) {
			for (size_t i = 0; i < ex->elements && rc == AKS_OK; i++)
				if (ex->element[i]->type == REDIS_REPLY_ERROR)
					rc = rd_reply_error(s, ex->element[i],
					                    "cannot write a record", err);
			free_replies(r, 4);
			rd_pool_put(s, c, false);
			c = NULL;
			break;
		}
		if (ex->type == REDIS_REPLY_ERROR) {
			rc = rd_reply_error(s, ex, "cannot write a record", err);
			free_replies(r, 4);
			rd_pool_put(s, c, false);
			c = NULL;
			break;
		}
		free_replies(r, 4);
		/* nil: another writer changed the record since WATCH. Run the function again. */
		if (++conflicts >= RD_MAX_CONFLICTS) {
			rd_pool_put(s, c, false);
			c = NULL;
			rc = s->host->error_set(err, AKS_EIO,
			                        RD_NAME
			                        " store: gave up on updating a record of '%s' "
			                        "after %d conflicting writes",
			                        ns, conflicts);
			break;
		}
		if (conflicts > 3) {
			/* Let the winners through: a random pause growing to ~8 ms. */
			char t[33];
			int cap = conflicts < 8 ? 1 << (conflicts - 3) : 8;
			rd_token(t);
			poll(NULL, 0, (int)((unsigned char)t[0] % (unsigned)cap));
		}
	}
	if (c)
		rd_pool_put(s, c, rc < 0);
	aks__buf_free(&k);
	aks__buf_free(&m);
	return rc;
}

/* ---- get ---- */

static int rd_get(aks_store_impl *s, const char *ns, const char *key, aks_store_record_fn fn,
                  void *ctx, aks_error **err)
{
	aks_buf k = {0};
	rd_key(s, 'r', ns, key, &k);
	if (k.failed)
		return oom(s, err);
	const char *argv[] = {"GET", k.data};
	size_t lens[] = {3, k.len};
	redisContext *c = NULL;
	bool retried = false;
	redisReply *r = NULL;
	int rc = rd_command(s, &c, &retried, 2, argv, lens, &r, err);
	rd_pool_put(s, c, false); /* before the callback: it may take its time */
	aks__buf_free(&k);
	if (rc < 0)
		return rc;
	if (r->type == REDIS_REPLY_NIL)
		rc = AKS_ENOTFOUND;
	else if (r->type != REDIS_REPLY_STRING)
		rc = s->host->error_set(err, AKS_EIO,
		                        RD_NAME " store: the record '%s' of '%s' at %s is not a "
		                                "string key",
		                        key, ns, s->target.display);
	else
		rc = fn(ctx, key, r->str, r->len);
	freeReplyObject(r);
	return rc;
}

/* ---- put_expiring ---- */

static int rd_put_expiring(aks_store_impl *s, const char *ns, const char *key, const char *value,
                           size_t len, int64_t ttl_seconds, aks_error **err)
{
	if (ttl_seconds <= 0 || !value)
		return s->host->error_set(err, AKS_EINVAL,
		                          RD_NAME " store: an expiring record needs a value and a "
		                                  "time to live above 0");
	aks_buf k = {0};
	rd_key(s, 'r', ns, key, &k);
	if (k.failed)
		return oom(s, err);
	char ttl[32];
	snprintf(ttl, sizeof(ttl), "%lld", (long long)ttl_seconds);
	const char *argv[] = {"SET", k.data, value, "EX", ttl};
	size_t lens[] = {3, k.len, len, 2, strlen(ttl)};
	redisContext *c = NULL;
	bool retried = false;
	redisReply *r = NULL;
	int rc = rd_command(s, &c, &retried, 5, argv, lens, &r, err);
	rd_pool_put(s, c, false);
	freeReplyObject(r);
	aks__buf_free(&k);
	return rc;
}

/* ---- scan and namespaces ---- */

/* Every key matching `pattern` that starts with `head`, de-duplicated, into *out. */
static int scan_keys(aks_store_impl *s, const char *pattern, size_t plen, const char *head,
                     size_t hlen, aks_strv *out, aks_error **err)
{
	char cursor[32] = "0";
	redisContext *c = NULL;
	bool retried = false;
	int rc = AKS_OK;
	do {
		const char *argv[] = {"SCAN", cursor, "MATCH", pattern, "COUNT", RD_SCAN_COUNT};
		size_t lens[] = {4, strlen(cursor), 5, plen, 5, strlen(RD_SCAN_COUNT)};
		redisReply *r = NULL;
		/* The cursor is the server's: a step retried on a new connection resumes. */
		if ((rc = rd_command(s, &c, &retried, 6, argv, lens, &r, err)) < 0)
			break;
		if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
		    r->element[0]->type != REDIS_REPLY_STRING ||
		    r->element[0]->len >= sizeof(cursor) ||
		    r->element[1]->type != REDIS_REPLY_ARRAY) {
			freeReplyObject(r);
			rc = s->host->error_set(err, AKS_EIO,
			                        RD_NAME " store: a malformed SCAN reply from %s",
			                        s->target.display);
			break;
		}
		memcpy(cursor, r->element[0]->str, r->element[0]->len);
		cursor[r->element[0]->len] = '\0';
		redisReply *keys = r->element[1];
		for (size_t i = 0; i < keys->elements && rc == AKS_OK; i++) {
			redisReply *e = keys->element[i];
			/* Byte-exact check: the pattern is only a filter on the server's side. */
			if (e->type != REDIS_REPLY_STRING || e->len < hlen ||
			    memcmp(e->str, head, hlen) || memchr(e->str, '\0', e->len))
				continue;
			if (aks__strv_take(out, strndup(e->str, e->len)) != AKS_OK)
				rc = oom(s, err);
		}
		freeReplyObject(r);
	} while (rc == AKS_OK && strcmp(cursor, "0") != 0);
	rd_pool_put(s, c, rc < 0);
	if (rc == AKS_OK)
		aks__strv_sort_unique(out); /* SCAN may return a key more than once */
	return rc;
}

static int rd_scan(aks_store_impl *s, const char *ns, const char *prefix, aks_store_record_fn fn,
                   void *ctx, aks_error **err)
{
	aks_buf head = {0}, pat = {0};
	rd_key_ns(s, 'r', ns, &head);
	aks__buf_puts(&head, prefix);
	if (!head.failed)
		rd_glob_escape(&pat, head.data, head.len);
	aks__buf_append(&pat, "*", 1);
	aks_strv keys = {0};
	int rc = head.failed || pat.failed
	             ? oom(s, err)
	             : scan_keys(s, pat.data, pat.len, head.data, head.len, &keys, err);
	size_t skip = head.len - strlen(prefix); /* the record key starts here */
	aks__buf_free(&pat);
	/* MGET in batches; records deleted since SCAN come back nil and are skipped. */
	for (size_t at = 0; rc == AKS_OK && at < keys.n; at += RD_MGET_BATCH) {
		size_t n = keys.n - at < RD_MGET_BATCH ? keys.n - at : RD_MGET_BATCH;
		const char *argv[RD_MGET_BATCH + 1];
		size_t lens[RD_MGET_BATCH + 1];
		argv[0] = "MGET", lens[0] = 4;
		for (size_t i = 0; i < n; i++)
			argv[i + 1] = keys.v[at + i], lens[i + 1] = strlen(keys.v[at + i]);
		redisContext *c = NULL;
		bool retried = false;
		redisReply *r = NULL;
		rc = rd_command(s, &c, &retried, (int)n + 1, argv, lens, &r, err);
		rd_pool_put(s, c, false);
		if (rc < 0)
			break;
		if (r->type != REDIS_REPLY_ARRAY || r->elements != n)
			rc = s->host->error_set(err, AKS_EIO,
			                        RD_NAME " store: a malformed MGET reply from %s",
			                        s->target.display);
		for (size_t i = 0; rc == AKS_OK && i < n; i++) {
			redisReply *v = r->element[i];
			if (v->type == REDIS_REPLY_STRING)
				rc = fn(ctx, keys.v[at + i] + skip, v->str, v->len);
		}
		freeReplyObject(r);
	}
	aks__strv_free(keys.v);
	aks__buf_free(&head);
	return rc;
}

static int rd_namespaces(aks_store_impl *s, aks_store_name_fn fn, void *ctx, aks_error **err)
{
	aks_buf head = {0}, pat = {0};
	aks__buf_append(&head, s->prefix, s->prefix_len);
	aks__buf_puts(&head, "r:");
	if (!head.failed)
		rd_glob_escape(&pat, s->prefix, s->prefix_len);
	aks__buf_puts(&pat, "r:*");
	aks_strv keys = {0}, names = {0};
	int rc = head.failed || pat.failed
	             ? oom(s, err)
	             : scan_keys(s, pat.data, pat.len, head.data, head.len, &keys, err);
	aks__buf_free(&pat);
	aks__buf_free(&head);
	for (size_t i = 0; rc == AKS_OK && i < keys.n; i++) {
		char *ns = NULL;
		const char *key = NULL;
		if (!rd_key_parse(s, keys.v[i], strlen(keys.v[i]), &ns, &key))
			continue; /* not a record of ours (or no memory: then it is missed) */
		if (aks__strv_take(&names, ns) != AKS_OK)
			rc = oom(s, err);
	}
	aks__strv_free(keys.v);
	if (rc == AKS_OK)
		aks__strv_sort_unique(&names);
	for (size_t i = 0; rc == AKS_OK && i < names.n; i++)
		rc = fn(ctx, names.v[i]);
	aks__strv_free(names.v);
	return rc;
}

/* ---- locks ---- */

static int rd_lock_op(aks_store_impl *s, const char *ns, const char *key, const aks_call *call,
                      aks_store_lock **out, aks_error **err)
{
	return rd_lock(s, ns, key, call, out, err);
}

static void rd_unlock_op(aks_store_impl *s, aks_store_lock *lk)
{
	rd_unlock(s, lk);
}

static const aks_store_ops rd_ops = {
    AKS_STORE_OPS_VERSION,
    sizeof(aks_store_ops),
    rd_init,
    rd_fini,
    rd_update,
    rd_get,
    rd_scan,
    rd_namespaces,
    rd_lock_op,
    rd_unlock_op,
    rd_put_expiring,
};

AKS_PLUGIN_DEFINE(AKS_PLUGIN_STORE, RD_NAME, RD_VERSION, "Apache-2.0",
                  "state and response store in " RD_SERVER " (hiredis): shared by every host "
                  "that points at the server",
                  rd_config_keys, &rd_ops);
