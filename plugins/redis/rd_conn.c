/*
 * plugins/redis/rd_conn.c - the redis store's connections: the server address from `url`,
 * connecting (TLS, AUTH, SELECT), the pool shared by the host's threads, and commands with
 * one reconnect when a connection turns out dead.
 *
 * hiredis contexts are not thread-safe: each operation takes one from the pool for its
 * duration, and no operation ever holds two, so the pool cannot deadlock.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rd_internal.h"

#ifdef HAVE_HIREDIS_SSL
#include <hiredis/hiredis_ssl.h> /* after hiredis.h, which it needs */
#endif

/* ---- the address ---- */

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decodes n bytes; NULL on a bad escape, an encoded NUL, or ENOMEM (*bad tells). */
static char *pct_decode(const char *in, size_t n, bool *bad)
{
	char *out = malloc(n + 1);
	size_t k = 0;
	*bad = false;
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (in[i] != '%') {
			out[k++] = in[i];
			continue;
		}
		int hi = i + 2 < n ? hexval(in[i + 1]) : -1;
		int lo = i + 2 < n ? hexval(in[i + 2]) : -1;
		if (hi >= 0 && lo >= 0 && (hi | lo) != 0) {
			out[k++] = (char)(hi * 16 + lo);
			i += 2;
			continue;
		}
		*bad = true;
		free(out);
		return NULL;
	}
	out[k] = '\0';
	return out;
}

/* A decimal in [lo, hi] made of n digits. */
static bool parse_int(const char *p, size_t n, long lo, long hi, int *out)
{
	if (n == 0 || n > 9)
		return false;
	long v = 0;
	for (size_t i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		v = v * 10 + (p[i] - '0');
	}
	if (v < lo || v > hi)
		return false;
	*out = (int)v;
	return true;
}

static int bad_url(const aks_host_api *host, const char *why, aks_error **err)
{
	return host->error_set(err, AKS_ECONFIG,
	                       RD_NAME
	                       ".url: %s (expected redis://[user:password@]host[:port][/db], "
	                       "rediss://... for TLS, or unix:///path/to/redis.sock[?db=N])",
	                       why);
}

/* The query string: db=N and password=P, '&'-separated. */
static int parse_query(const aks_host_api *host, const char *q, rd_target *t, aks_error **err)
{
	while (*q) {
		size_t n = strcspn(q, "&");
		const char *eq = memchr(q, '=', n);
		if (!eq)
			return bad_url(host, "a query parameter without '='", err);
		size_t klen = (size_t)(eq - q), vlen = n - klen - 1;
		if (klen == 2 && !memcmp(q, "db", 2)) {
			if (!parse_int(eq + 1, vlen, 0, INT_MAX, &t->db))
				return bad_url(host, "db is not a database number", err);
		} else if (klen == 8 && !memcmp(q, "password", 8)) {
			bool bad = false;
			free(t->password);
			if (!(t->password = pct_decode(eq + 1, vlen, &bad)))
				return bad ? bad_url(host, "a bad %-escape in the password", err)
				           : host->error_set(err, AKS_ENOMEM, "out of memory");
		} else {
			return bad_url(host, "unknown query parameter (known: db, password)", err);
		}
		q += n;
		if (*q == '&')
			q++;
	}
	return AKS_OK;
}

static int parse_tcp(const aks_host_api *host, const char *rest, rd_target *t, aks_error **err)
{
	size_t alen = strcspn(rest, "/?");
	const char *auth_end = rest + alen;
	/* userinfo: everything up to the last '@' of the authority (a password may hold '@'
	 * only percent-encoded, but be lenient). */
	const char *at = NULL;
	for (const char *p = rest; p < auth_end; p++)
		if (*p == '@')
			at = p;
	const char *hp = rest;
	bool bad = false;
	if (at) {
		const char *colon = memchr(rest, ':', (size_t)(at - rest));
		size_t ulen = colon ? (size_t)(colon - rest) : (size_t)(at - rest);
		if (ulen > 0 && !(t->user = pct_decode(rest, ulen, &bad)))
			goto decode_failed;
		if (colon && !(t->password = pct_decode(colon + 1, (size_t)(at - colon - 1), &bad)))
			goto decode_failed;
		if (!colon) {
			/* redis://secret@host: a password without a user, as most clients read it
			 */
			t->password = t->user;
			t->user = NULL;
		}
		hp = at + 1;
	}
	const char *port = NULL;
	size_t hlen;
	if (*hp == '[') {
		const char *close = memchr(hp, ']', (size_t)(auth_end - hp));
		if (!close)
			return bad_url(host, "an IPv6 address without its closing ']'", err);
		hlen = (size_t)(close - hp - 1);
		if (close + 1 < auth_end && close[1] != ':')
			return bad_url(host, "junk after the IPv6 address", err);
		port = close + 1 < auth_end ? close + 2 : NULL;
		hp++;
	} else {
		const char *colon = memchr(hp, ':', (size_t)(auth_end - hp));
		hlen = colon ? (size_t)(colon - hp) : (size_t)(auth_end - hp);
		port = colon ? colon + 1 : NULL;
	}
	t->host = hlen ? strndup(hp, hlen) : strdup("localhost");
	if (!t->host)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	t->port = 6379;
	if (port && !parse_int(port, (size_t)(auth_end - port), 1, 65535, &t->port))
		return bad_url(host, "the port is not a number from 1 to 65535", err);
	const char *p = auth_end;
	if (*p == '/') {
		size_t dlen = strcspn(p + 1, "?");
		if (dlen && !parse_int(p + 1, dlen, 0, INT_MAX, &t->db))
			return bad_url(host, "the path is not a database number", err);
		p += 1 + dlen;
	}
	return *p == '?' ? parse_query(host, p + 1, t, err) : AKS_OK;
decode_failed:
	return bad ? bad_url(host, "a bad %-escape in the user or password", err)
	           : host->error_set(err, AKS_ENOMEM, "out of memory");
}

int rd_target_parse(const aks_host_api *host, const char *url, rd_target *t, aks_error **err)
{
	memset(t, 0, sizeof(*t));
	int rc;
	if (!url || !*url)
		return bad_url(host, "empty", err);
	if (!strncmp(url, "unix://", 7)) {
		t->is_unix = true;
		const char *path = url + 7;
		size_t plen = strcspn(path, "?");
		if (plen == 0 || path[0] != '/')
			return bad_url(host, "a unix socket needs an absolute path", err);
		if (!(t->path = strndup(path, plen)))
			return host->error_set(err, AKS_ENOMEM, "out of memory");
		rc = path[plen] == '?' ? parse_query(host, path + plen + 1, t, err) : AKS_OK;
	} else if (!strncmp(url, "redis://", 8)) {
		rc = parse_tcp(host, url + 8, t, err);
	} else if (!strncmp(url, "rediss://", 9)) {
		t->tls = true;
		rc = parse_tcp(host, url + 9, t, err);
	} else {
		return bad_url(host, "unknown scheme", err);
	}
	if (rc < 0)
		return rc;
	/* For messages: never the password. */
	char buf[1024];
	if (t->is_unix)
		snprintf(buf, sizeof(buf), "unix://%s%s%.0d", t->path, t->db ? "?db=" : "", t->db);
	else
		snprintf(buf, sizeof(buf), "%s://%s%s%s%s%s:%d/%d", t->tls ? "rediss" : "redis",
		         t->user ? t->user : "", t->user ? "@" : "",
		         strchr(t->host, ':') ? "[" : "", t->host, strchr(t->host, ':') ? "]" : "",
		         t->port, t->db);
	if (!(t->display = strdup(buf)))
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	return AKS_OK;
}

void rd_target_free(rd_target *t)
{
	free(t->host);
	free(t->path);
	free(t->user);
	if (t->password) /* do not leave it in freed memory */
		memset(t->password, 0, strlen(t->password));
	free(t->password);
	free(t->display);
	memset(t, 0, sizeof(*t));
}

/* ---- TLS ---- */

#ifdef HAVE_HIREDIS_SSL
struct rd_tls {
	redisSSLContext *ctx;
};

static void openssl_init(void)
{
	redisInitOpenSSL();
}

int rd_tls_new(aks_store_impl *s, const char *ca, const char *cert, const char *key,
               const char *server_name, bool skip_verify, aks_error **err)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, openssl_init);
	redisSSLContextError e = REDIS_SSL_CTX_NONE;
	redisSSLContext *ctx;
	if (!server_name)
		server_name = s->target.host;
#if HIREDIS_MAJOR > 1 || (HIREDIS_MAJOR == 1 && HIREDIS_MINOR >= 1)
	redisSSLOptions o;
	memset(&o, 0, sizeof(o));
	o.cacert_filename = ca;
	o.cert_filename = cert;
	o.private_key_filename = key;
	o.server_name = server_name;
	o.verify_mode = skip_verify ? REDIS_SSL_VERIFY_NONE : REDIS_SSL_VERIFY_PEER;
#if HIREDIS_MAJOR > 1 || HIREDIS_MINOR >= 5
	o.verify_name = skip_verify ? NULL : server_name; /* the certificate must name it */
#else
	if (!skip_verify)
		s->host->log(AKS_LOG_WARNING, RD_NAME,
		             "hiredis %d.%d checks that the server's certificate chains to a "
		             "trusted CA, but not the name in it (hiredis 1.5 does): trust only "
		             "a CA that signs nothing but your Redis servers",
		             HIREDIS_MAJOR, HIREDIS_MINOR);
#endif
	ctx = redisCreateSSLContextWithOptions(&o, &e);
#else
	if (skip_verify)
		return s->host->error_set(err, AKS_ECONFIG,
		                          RD_NAME ".tls_skip_verify needs hiredis 1.1 or later");
	ctx = redisCreateSSLContext(ca, NULL, cert, key, server_name, &e);
#endif
	if (!ctx)
		return s->host->error_set(err, AKS_ECONFIG,
		                          RD_NAME ": cannot set up TLS for %s: %s",
		                          s->target.display, redisSSLContextGetError(e));
	if (!(s->tls = calloc(1, sizeof(*s->tls)))) {
		redisFreeSSLContext(ctx);
		return s->host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	s->tls->ctx = ctx;
	return AKS_OK;
}

void rd_tls_free(rd_tls *tls)
{
	if (tls)
		redisFreeSSLContext(tls->ctx);
	free(tls);
}

static bool tls_start(aks_store_impl *s, redisContext *c)
{
	return redisInitiateSSLWithContext(c, s->tls->ctx) == REDIS_OK;
}
#else
int rd_tls_new(aks_store_impl *s, const char *ca, const char *cert, const char *key,
               const char *server_name, bool skip_verify, aks_error **err)
{
	(void)ca, (void)cert, (void)key, (void)server_name, (void)skip_verify;
	return s->host->error_set(err, AKS_ECONFIG,
	                          RD_NAME ": %s needs TLS, but this " RD_NAME
	                                  ".so was built without "
	                                  "hiredis_ssl (hiredis 1.0 or later with TLS)",
	                          s->target.display);
}

void rd_tls_free(rd_tls *tls)
{
	(void)tls;
}

static bool tls_start(aks_store_impl *s, redisContext *c)
{
	(void)s, (void)c;
	return false;
}
#endif

/* ---- SIGPIPE ---- */

void rd_sig_block(rd_sigguard *g)
{
	sigset_t set, pending;
	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	sigemptyset(&pending);
	sigpending(&pending);
	g->pending_before = sigismember(&pending, SIGPIPE) == 1;
	pthread_sigmask(SIG_BLOCK, &set, &g->old);
}

void rd_sig_restore(rd_sigguard *g)
{
	if (!g->pending_before) {
		sigset_t set, pending;
		sigemptyset(&set);
		sigaddset(&set, SIGPIPE);
		sigemptyset(&pending);
		sigpending(&pending);
		if (sigismember(&pending, SIGPIPE) == 1) {
			struct timespec zero = {0, 0};
			while (sigtimedwait(&set, NULL, &zero) < 0 && errno == EINTR)
				;
		}
	}
	pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

/* ---- errors ---- */

int rd_io_error(aks_store_impl *s, const redisContext *c, const char *what, aks_error **err)
{
	const char *why = c && c->err ? c->errstr : "no reply";
	if (c && c->err == REDIS_ERR_IO && strstr(why, "temporarily unavailable"))
		why = "no reply within command_timeout";
	return s->host->error_set(err, AKS_EIO, RD_NAME " store: %s at %s: %s", what,
	                          s->target.display, why);
}

int rd_reply_error(aks_store_impl *s, const redisReply *r, const char *what, aks_error **err)
{
	return s->host->error_set(
	    err, AKS_EIO, RD_NAME " store: %s: " RD_SERVER " at %s answered: %.*s", what,
	    s->target.display, r->str ? (int)r->len : 0, r->str ? r->str : "");
}

/* ---- connecting ---- */

/* AUTH, SELECT and CLIENT SETNAME in one round trip. */
static int handshake(aks_store_impl *s, redisContext *c, aks_error **err)
{
	int n = 0;
	const char *argv[3];
	size_t lens[3];
	if (s->target.password) {
		int k = 0;
		argv[k++] = "AUTH";
		if (s->target.user)
			argv[k++] = s->target.user;
		argv[k++] = s->target.password;
		for (int i = 0; i < k; i++)
			lens[i] = strlen(argv[i]);
		redisAppendCommandArgv(c, k, argv, lens);
		n++;
	}
	if (s->target.db) {
		char db[16];
		snprintf(db, sizeof(db), "%d", s->target.db);
		argv[0] = "SELECT", argv[1] = db;
		lens[0] = 6, lens[1] = strlen(db);
		redisAppendCommandArgv(c, 2, argv, lens);
		n++;
	}
	argv[0] = "CLIENT", argv[1] = "SETNAME", argv[2] = "aksandbox";
	lens[0] = 6, lens[1] = 7, lens[2] = 9;
	redisAppendCommandArgv(c, 3, argv, lens);
	n++;
	int rc = AKS_OK;
	for (int i = 0; i < n; i++) {
		redisReply *r = NULL;
		if (redisGetReply(c, (void **)&r) != REDIS_OK || !r)
			return rd_io_error(s, c, "lost the connection while logging in", err);
		if (r->type == REDIS_REPLY_ERROR && rc == AKS_OK)
			rc = rd_reply_error(s, r,
			                    i == 0 && s->target.password ? "AUTH failed"
			                                                 : "cannot start a session",
			                    err);
		freeReplyObject(r);
	}
	return rc;
}

static int connect_one(aks_store_impl *s, redisContext **out, aks_error **err)
{
	*out = NULL;
	redisContext *c =
	    s->target.is_unix
	        ? redisConnectUnixWithTimeout(s->target.path, s->connect_tv)
	        : redisConnectWithTimeout(s->target.host, s->target.port, s->connect_tv);
	if (!c)
		return s->host->error_set(err, AKS_ENOMEM, "out of memory");
	int rc = AKS_OK;
	if (c->err)
		rc = rd_io_error(s, c, "cannot connect to " RD_SERVER, err);
	if (rc == AKS_OK && redisSetTimeout(c, s->command_tv) != REDIS_OK)
		rc = rd_io_error(s, c, "cannot set the command timeout", err);
	if (rc == AKS_OK && !s->target.is_unix)
		redisEnableKeepAlive(c); /* notices a vanished peer on idle pooled connections */
	if (rc == AKS_OK && s->target.tls && !tls_start(s, c))
		rc = rd_io_error(s, c, "TLS handshake failed with " RD_SERVER, err);
	if (rc == AKS_OK)
		rc = handshake(s, c, err);
	if (rc < 0) {
		redisFree(c);
		return rc;
	}
	*out = c;
	return AKS_OK;
}

/* ---- the pool ---- */

static void drain_locked(aks_store_impl *s)
{
	for (int i = 0; i < s->n_idle; i++)
		redisFree(s->idle[i]);
	s->n_open -= s->n_idle;
	s->n_idle = 0;
}

void rd_pool_drain(aks_store_impl *s)
{
	pthread_mutex_lock(&s->mu);
	drain_locked(s);
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

int rd_pool_get(aks_store_impl *s, bool fresh, redisContext **out, aks_error **err)
{
	*out = NULL;
	pthread_mutex_lock(&s->mu);
	if (fresh)
		drain_locked(s);
	for (;;) {
		if (!fresh && s->n_idle > 0) {
			*out = s->idle[--s->n_idle];
			pthread_mutex_unlock(&s->mu);
			return AKS_OK;
		}
		if (s->n_open < s->pool_max)
			break;
		pthread_cond_wait(&s->cv, &s->mu);
	}
	s->n_open++;
	pthread_mutex_unlock(&s->mu);
	rd_sigguard g;
	rd_sig_block(&g);
	int rc = connect_one(s, out, err);
	rd_sig_restore(&g);
	if (rc < 0) {
		pthread_mutex_lock(&s->mu);
		s->n_open--;
		pthread_cond_signal(&s->cv);
		pthread_mutex_unlock(&s->mu);
	}
	return rc;
}

void rd_pool_put(aks_store_impl *s, redisContext *c, bool broken)
{
	if (!c)
		return;
	pthread_mutex_lock(&s->mu);
	if (broken || c->err) {
		redisFree(c);
		s->n_open--;
	} else {
		s->idle[s->n_idle++] = c; /* n_idle <= n_open <= pool_max: the array holds it */
	}
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

/* ---- commands ---- */

int rd_command(aks_store_impl *s, redisContext **c, bool *retried, int argc, const char **argv,
               const size_t *lens, redisReply **out, aks_error **err)
{
	*out = NULL;
	for (;;) {
		int rc = AKS_OK;
		if (!*c && (rc = rd_pool_get(s, *retried, c, err)) < 0)
			return rc;
		rd_sigguard g;
		rd_sig_block(&g);
		redisReply *r = redisCommandArgv(*c, argc, argv, lens);
		rd_sig_restore(&g);
		if (r) {
			if (r->type == REDIS_REPLY_ERROR) {
				char what[64];
				snprintf(what, sizeof(what), "%.*s failed", (int)lens[0], argv[0]);
				rc = rd_reply_error(s, r, what, err);
				freeReplyObject(r);
				return rc;
			}
			*out = r;
			return AKS_OK;
		}
		if (*retried) {
			rc = rd_io_error(s, *c, "lost the connection to " RD_SERVER, err);
			rd_pool_put(s, *c, true);
			*c = NULL;
			return rc;
		}
		/* The server restarted, or killed the connection: the idle ones are as dead. */
		s->host->log(AKS_LOG_DEBUG, RD_NAME, "connection to %s failed (%s); reconnecting",
		             s->target.display, (*c)->errstr);
		rd_pool_put(s, *c, true);
		*c = NULL;
		*retried = true;
	}
}
