/*
 * plugins/redis/rd_internal.h - the redis store's shared pieces: the parsed server address,
 * the connection pool with its one-reconnect rule, key names, and the lock table.
 *
 * Files: redis.c (descriptor, config, records), rd_conn.c (address, connections, pool,
 * commands), rd_keys.c (key names and glob patterns), rd_lock.c (leased locks, renewed by
 * plugins/common/aks_lease.h). Layout and semantics: docs/plugins/redis.md.
 */
#ifndef AKS_REDIS_INTERNAL_H
#define AKS_REDIS_INTERNAL_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>

#include <aksandbox/store.h>

#include "aks_buf.h"
#include "aks_lease.h"

/* The same sources build redis.so and valkey.so (Valkey speaks Redis's protocol); each
 * declares the name its file and its config block have. */
#ifndef RD_NAME
#define RD_NAME "redis"
#endif
#ifndef RD_SERVER
#define RD_SERVER "Redis"
#endif

/* Where the server is, as parsed from `url`. */
typedef struct rd_target {
	bool is_unix;
	bool tls;       /* rediss:// */
	char *host;     /* TCP: host name or address (no brackets) */
	int port;       /* TCP */
	char *path;     /* unix socket */
	char *user;     /* NULL: AUTH with the password only */
	char *password; /* NULL: no AUTH */
	int db;         /* SELECT db when not 0 */
	char *display;  /* the url without its password, for messages */
} rd_target;

/* Parses redis://[user[:pass]@]host[:port][/db][?db=N&password=P], rediss://..., and
 * unix:///path.sock[?db=N&password=P]. AKS_ECONFIG with a message on a bad url. */
int rd_target_parse(const aks_host_api *host, const char *url, rd_target *t, aks_error **err);
void rd_target_free(rd_target *t);

typedef struct rd_tls rd_tls; /* the TLS context (hiredis_ssl builds only) */

/* One lock held by this process: renewed by the lease keeper until unlock. */
struct aks_store_lock {
	char *key; /* the full Redis key name */
	size_t key_len;
	char token[33]; /* random hex, proves ownership to the scripts */
	aks_lease_entry lease;
};

struct aks_store_impl {
	const aks_host_api *host;
	rd_target target;
	rd_tls *tls;
	char *prefix;
	size_t prefix_len;
	struct timeval connect_tv, command_tv;
	int64_t lease_ms;
	int64_t marker_ttl_ms; /* how long an update's commit marker lives */

	/* The pool: idle connections, and how many are open (idle or in use). */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	redisContext **idle;
	int n_idle, n_open, pool_max;

	/* Locks held, and the thread that renews their leases (rd_lock_init, after the
	 * config: it needs lease_ms). */
	aks_lease_keeper leases;
};

/* ---- connections (rd_conn.c) ---- */

int rd_tls_new(aks_store_impl *s, const char *ca, const char *cert, const char *key,
               const char *server_name, bool skip_verify, aks_error **err);
void rd_tls_free(rd_tls *tls);

/* A connection for one operation; `fresh` skips the idle ones (after a failure they are
 * likely dead too, and are dropped). */
int rd_pool_get(aks_store_impl *s, bool fresh, redisContext **out, aks_error **err);
/* Gives it back; a connection with an error, or `broken`, is closed instead. */
void rd_pool_put(aks_store_impl *s, redisContext *c, bool broken);
void rd_pool_drain(aks_store_impl *s);

/* Blocks SIGPIPE in this thread around socket writes (hiredis uses write(2), and a server
 * that went away must give an error, not kill the host), then discards the one it caused. */
typedef struct rd_sigguard {
	sigset_t old;
	bool pending_before;
} rd_sigguard;
void rd_sig_block(rd_sigguard *g);
void rd_sig_restore(rd_sigguard *g);

/*
 * Runs one idempotent command on *c (taken from the pool when NULL; left in *c for the
 * caller to put back). A connection that fails is closed and the command is sent once more
 * on a new one, when *retried is still false (it is then set); a second failure is AKS_EIO
 * naming the server. An error reply is AKS_EIO with the server's message. *out is the reply
 * (freeReplyObject) on success.
 */
int rd_command(aks_store_impl *s, redisContext **c, bool *retried, int argc, const char **argv,
               const size_t *lens, redisReply **out, aks_error **err);
/* The AKS_EIO for a broken connection: "redis store: <what> at <server>: <why>". */
int rd_io_error(aks_store_impl *s, const redisContext *c, const char *what, aks_error **err);
/* The AKS_EIO for an error reply. */
int rd_reply_error(aks_store_impl *s, const redisReply *r, const char *what, aks_error **err);

/* ---- key names (rd_keys.c) ---- */

/* Keys are built in an aks_buf (plugins/common/aks_buf.h) and its failure, which sticks,
 * is checked once they are whole (b.failed). */
/* "<prefix><kind>:<len(ns)>:<ns>:" — kind 'r' for records, 'l' for locks. */
void rd_key_ns(const aks_store_impl *s, char kind, const char *ns, aks_buf *b);
/* rd_key_ns + key. */
void rd_key(const aks_store_impl *s, char kind, const char *ns, const char *key, aks_buf *b);
/* Appends `text` with the glob characters * ? [ ] \ escaped. */
void rd_glob_escape(aks_buf *b, const char *text, size_t len);
/* The (ns, key) of a record key "<prefix>r:<n>:<ns>:<key>": false when it is not one. The
 * out pointers are into a malloc'd copy in *ns (free it; *key points inside it). */
bool rd_key_parse(const aks_store_impl *s, const char *name, size_t len, char **ns,
                  const char **key);
/* Random bytes as lowercase hex: 16 bytes, 32 characters and a NUL. */
int rd_token(char out[33]);

/* ---- locks (rd_lock.c) ---- */

int rd_lock(aks_store_impl *s, const char *ns, const char *key, const aks_call *call,
            aks_store_lock **out, aks_error **err);
void rd_unlock(aks_store_impl *s, aks_store_lock *lk);
/* Sets up the lease keeper (init, once lease_ms is read). */
void rd_lock_init(aks_store_impl *s);
/* Stops the renewal thread and frees the keeper (fini; also after a failed init). */
void rd_lock_stop(aks_store_impl *s);

#endif /* AKS_REDIS_INTERNAL_H */
