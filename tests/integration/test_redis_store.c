/* Integration tests: the redis store plugin (plugins/redis) against a real redis-server that
 * the test starts on a private unix socket in a temporary directory and stops at the end.
 * Through the core's state store API (the same calls the manager makes): records, hostile
 * names, exact prefix scans, namespaces, concurrent updates, locks between threads and
 * processes, deadlines, cancellation, lease expiry after SIGKILL, expiring records,
 * reconnection after CLIENT KILL and a server restart, errors while the server is down, and
 * the CLI end to end. Effects are checked in Redis itself, over a separate connection.
 *
 * redis-server missing is a failure, not a skip. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>
#include <json-c/json.h>

#include <aksandbox/aksandbox.h>

#include "core/config/block.h"
#include "core/config/yaml_tree.h"
#include "core/plugin/host_api.h"
#include "core/store/store.h"
#include "tests/unit/rm_tree.h"

/* ---- the server ---- */

static char g_dir[64];  /* temporary directory: the socket, the server's files */
static char g_sock[96]; /* its unix socket */
static pid_t g_server = -1;
static pid_t g_child = -1; /* a lock holder of the running test */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static redisContext *direct(void)
{
	struct timeval tv = {2, 0};
	redisContext *c = redisConnectUnixWithTimeout(g_sock, tv);
	if (c && c->err) {
		redisFree(c);
		return NULL;
	}
	return c;
}

/* A command on a fresh direct connection; the reply or NULL. */
static redisReply *rcmd(const char *fmt, ...)
{
	redisContext *c = direct();
	if (!c)
		return NULL;
	va_list ap;
	va_start(ap, fmt);
	redisReply *r = redisvCommand(c, fmt, ap);
	va_end(ap);
	redisFree(c);
	return r;
}

static long long rint_cmd(const char *fmt, const char *arg)
{
	redisReply *r = rcmd(fmt, arg);
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_INTEGER);
	long long v = r->integer;
	freeReplyObject(r);
	return v;
}

static void server_start(void)
{
	char *argv[] = {"redis-server", "--port",           "0",         "--unixsocket",
	                g_sock,         "--unixsocketperm", "700",       "--dir",
	                g_dir,          "--save",           "",          "--appendonly",
	                "no",           "--logfile",        "redis.log", NULL};
	int ready[2];
	assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
	pid_t parent = getpid();
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* Dies with the test, and holds none of its descriptors: a server left behind
		 * by a crashed test would keep the TAP driver's pipe open for ever. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		int null = open("/dev/null", O_RDWR);
		dup2(null, 0), dup2(null, 1), dup2(null, 2);
		execvp("redis-server", argv);
		int e = errno;
		if (write(ready[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	close(ready[1]);
	int e = 0;
	ssize_t got = read(ready[0], &e, sizeof(e));
	close(ready[0]);
	if (got == (ssize_t)sizeof(e)) {
		waitpid(pid, NULL, 0);
		fail_msg("cannot start redis-server (%s): install it (Debian: apt-get install "
		         "redis-server)",
		         strerror(e));
	}
	g_server = pid;
	for (int i = 0; i < 200; i++) {
		redisReply *r = rcmd("PING");
		bool up = r && r->type == REDIS_REPLY_STATUS;
		freeReplyObject(r);
		if (up)
			return;
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			g_server = -1;
			fail_msg("redis-server exited at start; see %s/redis.log", g_dir);
		}
		sleep_ms(25);
	}
	fail_msg("redis-server did not answer on %s", g_sock);
}

static void server_stop(void)
{
	if (g_server <= 0)
		return;
	kill(g_server, SIGTERM);
	int st;
	while (waitpid(g_server, &st, 0) < 0 && errno == EINTR)
		;
	g_server = -1;
}

static int group_setup(void **state)
{
	(void)state;
	signal(SIGPIPE, SIG_DFL); /* the store must not die of a dead connection regardless */
	strcpy(g_dir, "/tmp/aks-redis-test-XXXXXX");
	if (!mkdtemp(g_dir))
		return -1;
	snprintf(g_sock, sizeof(g_sock), "%s/redis.sock", g_dir);
	server_start();
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	server_stop();
	rm_tree(g_dir);
	return 0;
}

/* ---- the store under test ---- */

typedef struct opened {
	aks_config *cfg;
	aks_state_store *s;
} opened;

static int open_with(const char *extra_yaml, opened *o, aks_error **err)
{
	memset(o, 0, sizeof(*o));
	const aks_plugin *p = NULL;
	int rc = aks_plugin_load("redis", AKS_PLUGIN_STORE, &p, err);
	if (rc < 0)
		return rc;
	char yaml[2048];
	snprintf(yaml, sizeof(yaml), "redis:\n  url: \"unix://%s\"\n%s", g_sock,
	         extra_yaml ? extra_yaml : "");
	aks_node *root = NULL;
	rc = aks__yaml_parse(yaml, strlen(yaml), "test.yaml", &root, err);
	if (rc == AKS_OK)
		rc = aks__config_build(aks_plugin_get_descriptor(p), aks__node_get(root, "redis"),
		                       "redis", &o->cfg, err);
	aks__node_free(root);
	if (rc == AKS_OK)
		rc = aks__store_open_plugin(p, o->cfg, &o->s, err);
	if (rc < 0) {
		aks_config_free(o->cfg);
		o->cfg = NULL;
	}
	return rc;
}

static void open_ok(const char *extra_yaml, opened *o)
{
	aks_error *err = NULL;
	int rc = open_with(extra_yaml, o, &err);
	if (rc != AKS_OK)
		fail_msg("open: %s", aks_error_message(err));
}

static void close_store(opened *o)
{
	aks__store_close(o->s);
	aks_config_free(o->cfg);
	memset(o, 0, sizeof(*o));
}

static int setup(void **state)
{
	redisReply *r = rcmd("FLUSHALL");
	if (!r)
		return -1;
	freeReplyObject(r);
	opened *o = calloc(1, sizeof(*o));
	open_ok(NULL, o);
	*state = o;
	return 0;
}

static int teardown(void **state)
{
	if (g_child > 0) {
		kill(g_child, SIGKILL);
		waitpid(g_child, NULL, 0);
		g_child = -1;
	}
	opened *o = *state;
	close_store(o);
	free(o);
	return 0;
}

/* ---- transaction functions ---- */

/* Sets "v" to the string ctx. */
static int set_v(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)err;
	json_object_object_add(rec, "v", json_object_new_string(ctx));
	*changed = true;
	return AKS_OK;
}

/* Increments "n". */
static int incr_n(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)ctx, (void)err;
	json_object *n = NULL;
	int64_t v = json_object_object_get_ex(rec, "n", &n) ? json_object_get_int64(n) : 0;
	json_object_object_add(rec, "n", json_object_new_int64(v + 1));
	*changed = true;
	return AKS_OK;
}

static int clear_rec(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)ctx, (void)err;
	aks__store_clear_record(rec);
	*changed = true;
	return AKS_OK;
}

static int refuse(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)ctx;
	json_object_object_add(rec, "v", json_object_new_string("never"));
	*changed = true;
	return aks__error_set(err, AKS_EPOLICY, "refused");
}

static void put(aks_state_store *s, const char *ns, const char *key, const char *v)
{
	aks_error *err = NULL;
	int rc = aks__store_update(s, ns, key, set_v, (void *)v, &err);
	if (rc != AKS_OK)
		fail_msg("update %s/%s: %s", ns, key, aks_error_message(err));
}

/* "v" of the record, malloc'd; NULL when absent. */
static char *get_v(aks_state_store *s, const char *ns, const char *key)
{
	json_object *rec = NULL;
	aks_error *err = NULL;
	int rc = aks__store_get(s, ns, key, &rec, &err);
	if (rc == AKS_ENOTFOUND)
		return NULL;
	if (rc != AKS_OK)
		fail_msg("get %s/%s: %s", ns, key, aks_error_message(err));
	json_object *v = NULL;
	char *out = json_object_object_get_ex(rec, "v", &v) ? strdup(json_object_get_string(v))
	                                                    : strdup("");
	json_object_put(rec);
	return out;
}

static int64_t get_n(aks_state_store *s, const char *ns, const char *key)
{
	json_object *rec = NULL, *n = NULL;
	aks_error *err = NULL;
	int rc = aks__store_get(s, ns, key, &rec, &err);
	if (rc != AKS_OK)
		fail_msg("get %s/%s: %s", ns, key, err ? aks_error_message(err) : "not found");
	int64_t v = json_object_object_get_ex(rec, "n", &n) ? json_object_get_int64(n) : -1;
	json_object_put(rec);
	return v;
}

/* ---- records ---- */

/* A record goes in, reads back, changes, and goes away; in Redis it is the documented key
 * holding the JSON; an aborted update writes nothing. */
static void test_round_trip(void **state)
{
	opened *o = *state;
	aks_error *err = NULL;
	put(o->s, "conv", "sess1", "one");
	char *v = get_v(o->s, "conv", "sess1");
	assert_string_equal(v, "one");
	free(v);

	redisReply *r = rcmd("GET %s", "aks:r:4:conv:sess1");
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_STRING);
	assert_string_equal(r->str, "{\"v\":\"one\"}");
	freeReplyObject(r);

	put(o->s, "conv", "sess1", "two");
	v = get_v(o->s, "conv", "sess1");
	assert_string_equal(v, "two");
	free(v);

	assert_int_equal(aks__store_update(o->s, "conv", "sess1", refuse, NULL, &err), AKS_EPOLICY);
	aks_error_free(err);
	err = NULL;
	v = get_v(o->s, "conv", "sess1");
	assert_string_equal(v, "two");
	free(v);

	assert_int_equal(aks__store_update(o->s, "conv", "sess1", clear_rec, NULL, &err), AKS_OK);
	assert_null(get_v(o->s, "conv", "sess1"));
	assert_int_equal(rint_cmd("EXISTS %s", "aks:r:4:conv:sess1"), 0);
	/* Deleting what is absent is fine, and a missing record reads as not found. */
	assert_int_equal(aks__store_update(o->s, "conv", "sess1", clear_rec, NULL, &err), AKS_OK);
	json_object *rec = NULL;
	assert_int_equal(aks__store_get(o->s, "conv", "nope", &rec, &err), AKS_ENOTFOUND);
	assert_null(err);
}

typedef struct collected {
	char *keys[4096];
	char *vals[4096];
	size_t n;
} collected;

static int collect(void *ctx, const char *key, json_object *rec)
{
	collected *c = ctx;
	assert_true(c->n < 4096);
	json_object *v = NULL;
	c->keys[c->n] = strdup(key);
	c->vals[c->n] =
	    strdup(json_object_object_get_ex(rec, "v", &v) ? json_object_get_string(v) : "");
	c->n++;
	return AKS_OK;
}

static void collected_free(collected *c)
{
	for (size_t i = 0; i < c->n; i++) {
		free(c->keys[i]);
		free(c->vals[i]);
	}
	c->n = 0;
}

static bool has_key(const collected *c, const char *key)
{
	for (size_t i = 0; i < c->n; i++)
		if (!strcmp(c->keys[i], key))
			return true;
	return false;
}

static void scan_into(aks_state_store *s, const char *ns, const char *prefix, collected *c)
{
	aks_error *err = NULL;
	int rc = aks__store_scan(s, ns, prefix, collect, c, &err);
	if (rc != AKS_OK)
		fail_msg("scan %s: %s", ns, aks_error_message(err));
}

/* Names that would collide in a naive "prefix:ns:key" layout, or act as glob patterns, or are
 * as long as allowed, each keep their own record, scan and namespace. */
static void test_hostile_names(void **state)
{
	opened *o = *state;
	char long_a[AKS_STORE_NAME_MAX + 1], long_b[AKS_STORE_NAME_MAX + 1];
	memset(long_a, 'x', AKS_STORE_NAME_MAX);
	long_a[AKS_STORE_NAME_MAX] = '\0';
	memset(long_b, ':', AKS_STORE_NAME_MAX);
	long_b[AKS_STORE_NAME_MAX] = '\0';
	long_b[7] = '*';
	const char *pairs[][2] = {
	    {"a:b", "c"},     {"a", "b:c"},     {"a:b:c", "d"},        {"*", "*"},
	    {"[x]", "?"},     {"x", "]"},       {"with space", "k k"}, {"back\\slash", "\\"},
	    {long_a, long_b}, {long_b, long_a}, {"\x01\xff", "\x7f"},  {"12:ab", "3"},
	};
	size_t n = sizeof(pairs) / sizeof(pairs[0]);
	for (size_t i = 0; i < n; i++) {
		char v[16];
		snprintf(v, sizeof(v), "value-%zu", i);
		put(o->s, pairs[i][0], pairs[i][1], v);
	}
	for (size_t i = 0; i < n; i++) {
		char want[16];
		snprintf(want, sizeof(want), "value-%zu", i);
		char *v = get_v(o->s, pairs[i][0], pairs[i][1]);
		assert_non_null(v);
		assert_string_equal(v, want);
		free(v);
		/* Each namespace holds exactly its one record. */
		collected c = {0};
		scan_into(o->s, pairs[i][0], "", &c);
		assert_int_equal(c.n, 1);
		assert_string_equal(c.keys[0], pairs[i][1]);
		assert_string_equal(c.vals[0], want);
		collected_free(&c);
	}
	/* A name over the limit is refused before it reaches Redis. */
	char too_long[AKS_STORE_NAME_MAX + 2];
	memset(too_long, 'y', sizeof(too_long) - 1);
	too_long[sizeof(too_long) - 1] = '\0';
	aks_error *err = NULL;
	assert_int_equal(aks__store_update(o->s, too_long, "k", set_v, "v", &err), AKS_EINVAL);
	aks_error_free(err);

	char **names = NULL;
	err = NULL;
	assert_int_equal(aks__store_list(o->s, &names, &err), AKS_OK);
	size_t k = 0;
	while (names[k])
		k++;
	assert_int_equal(k, n);
	for (size_t i = 0; i < n; i++) {
		bool found = false;
		for (size_t j = 0; j < k; j++)
			found = found || !strcmp(names[j], pairs[i][0]);
		if (!found)
			fail_msg("namespace %zu missing from the listing", i);
	}
	aks__store_free_names(names);
}

/* A scan returns the records of its namespace whose key starts with the prefix, and no
 * others: not those of a namespace whose name extends it, nor what a glob would match. */
static void test_scan_prefix_exact(void **state)
{
	opened *o = *state;
	const char *nss[] = {"a", "ab", "a*", "a:k", "a\\"};
	const char *keys[] = {"k1", "k2", "x1", "k*1", "k?"};
	for (size_t i = 0; i < 5; i++)
		for (size_t j = 0; j < 5; j++)
			put(o->s, nss[i], keys[j], nss[i]);
	collected c = {0};
	scan_into(o->s, "a", "k", &c);
	assert_int_equal(c.n, 4);
	assert_true(has_key(&c, "k1") && has_key(&c, "k2") && has_key(&c, "k*1") &&
	            has_key(&c, "k?"));
	for (size_t i = 0; i < c.n; i++)
		assert_string_equal(c.vals[i], "a");
	collected_free(&c);

	scan_into(o->s, "a*", "", &c);
	assert_int_equal(c.n, 5);
	for (size_t i = 0; i < c.n; i++)
		assert_string_equal(c.vals[i], "a*");
	collected_free(&c);

	scan_into(o->s, "a", "k*", &c); /* a literal '*' */
	assert_int_equal(c.n, 1);
	assert_string_equal(c.keys[0], "k*1");
	collected_free(&c);

	scan_into(o->s, "a\\", "k?", &c);
	assert_int_equal(c.n, 1);
	assert_string_equal(c.keys[0], "k?");
	assert_string_equal(c.vals[0], "a\\");
	collected_free(&c);

	scan_into(o->s, "nothing", "", &c);
	assert_int_equal(c.n, 0);
}

/* Enough records for several SCAN steps and MGET batches: each comes once. */
static void test_scan_many(void **state)
{
	opened *o = *state;
	/* Written directly, in one pipeline, in the documented layout. */
	redisContext *d = direct();
	assert_non_null(d);
	for (int i = 0; i < 3000; i++)
		redisAppendCommand(d, "SET aks:r:3:big:k%04d {\"v\":\"%d\"}", i, i);
	redisAppendCommand(d, "SET aks:r:4:bigg:k0001 {\"v\":\"other\"}");
	for (int i = 0; i < 3001; i++) {
		redisReply *r = NULL;
		assert_int_equal(redisGetReply(d, (void **)&r), REDIS_OK);
		freeReplyObject(r);
	}
	redisFree(d);
	collected *c = calloc(1, sizeof(*c));
	scan_into(o->s, "big", "k", c);
	assert_int_equal(c->n, 3000);
	char seen[3000] = {0};
	for (size_t i = 0; i < c->n; i++) {
		int k = atoi(c->keys[i] + 1);
		assert_true(k >= 0 && k < 3000);
		assert_int_equal(seen[k], 0);
		seen[k] = 1;
		assert_int_equal(atoi(c->vals[i]), k);
	}
	collected_free(c);
	free(c);
}

/* Namespaces: listed once each, whatever their number of records; gone with the last. */
static void test_namespaces(void **state)
{
	opened *o = *state;
	put(o->s, "n1", "a", "1");
	put(o->s, "n1", "b", "1");
	put(o->s, "n2", "a", "1");
	put(o->s, AKS_STORE_NS_RUNTIME, "x", "1");
	/* Not records of this store: another prefix, a lock, a stray key. */
	freeReplyObject(rcmd("SET other:r:2:zz:k {}"));
	freeReplyObject(rcmd("SET aks:l:2:zz:k token"));
	freeReplyObject(rcmd("SET aks:r:garbage x"));
	char **names = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks__store_list(o->s, &names, &err), AKS_OK);
	assert_non_null(names[0]);
	assert_string_equal(names[0], AKS_STORE_NS_RUNTIME);
	assert_string_equal(names[1], "n1");
	assert_string_equal(names[2], "n2");
	assert_null(names[3]);
	aks__store_free_names(names);
	assert_int_equal(aks__store_update(o->s, "n2", "a", clear_rec, NULL, &err), AKS_OK);
	assert_int_equal(aks__store_list(o->s, &names, &err), AKS_OK);
	assert_string_equal(names[1], "n1");
	assert_null(names[2]);
	aks__store_free_names(names);
}

/* ---- concurrency ---- */

typedef struct counter_arg {
	aks_state_store *s;
	const char *key;
	int iterations;
	int ok, failed, unsure;
} counter_arg;

static void *count_up(void *arg)
{
	counter_arg *a = arg;
	for (int i = 0; i < a->iterations; i++) {
		aks_error *err = NULL;
		int rc = aks__store_update(a->s, "counters", a->key, incr_n, NULL, &err);
		if (rc == AKS_OK)
			a->ok++;
		else if (strstr(aks_error_message(err), "may or may not"))
			a->unsure++;
		else
			a->failed++;
		aks_error_free(err);
	}
	return NULL;
}

/* 8 threads increment one record (and 8 others their own): no increment is lost. */
static void test_concurrent_counter(void **state)
{
	opened *o = *state;
	pthread_t th[16];
	counter_arg a[16];
	char keys[16][8];
	for (int i = 0; i < 16; i++) {
		snprintf(keys[i], sizeof(keys[i]), "own%d", i);
		a[i] = (counter_arg){o->s, i < 8 ? "shared" : keys[i], 100, 0, 0, 0};
		assert_int_equal(pthread_create(&th[i], NULL, count_up, &a[i]), 0);
	}
	for (int i = 0; i < 16; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	for (int i = 0; i < 16; i++)
		assert_int_equal(a[i].ok, 100);
	assert_int_equal(get_n(o->s, "counters", "shared"), 800);
	for (int i = 8; i < 16; i++)
		assert_int_equal(get_n(o->s, "counters", keys[i]), 100);
}

static volatile int g_stop_killer;

static void *killer(void *arg)
{
	int *kills = arg;
	while (!g_stop_killer) {
		redisReply *r = rcmd("CLIENT KILL TYPE normal SKIPME yes");
		if (r && r->type == REDIS_REPLY_INTEGER)
			*kills += (int)r->integer;
		freeReplyObject(r);
		sleep_ms(15);
	}
	return NULL;
}

/* Connections killed by the server while 4 threads increment: each update is applied once.
 * An update whose connection died after EXEC was sent is looked up by its commit marker, not
 * applied again; one whose outcome could not be learnt says so ("may or may not"). */
static void test_counter_under_client_kill(void **state)
{
	opened *o = *state;
	int kills = 0;
	g_stop_killer = 0;
	pthread_t k, th[4];
	counter_arg a[4];
	assert_int_equal(pthread_create(&k, NULL, killer, &kills), 0);
	for (int i = 0; i < 4; i++) {
		a[i] = (counter_arg){o->s, "killed", 150, 0, 0, 0};
		assert_int_equal(pthread_create(&th[i], NULL, count_up, &a[i]), 0);
	}
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	g_stop_killer = 1;
	assert_int_equal(pthread_join(k, NULL), 0);
	int ok = 0, unsure = 0, failed = 0;
	for (int i = 0; i < 4; i++)
		ok += a[i].ok, unsure += a[i].unsure, failed += a[i].failed;
	int64_t n = get_n(o->s, "counters", "killed");
	print_message(
	    "# %d connections killed; %d updates ok, %d failed, %d unsure; counter %lld\n", kills,
	    ok, failed, unsure, (long long)n);
	assert_true(kills > 0);
	assert_true(n >= ok && n <= ok + unsure);
	/* Most updates get through: one reconnect per operation absorbs a single kill. */
	assert_true(ok >= 500);
}

/* ---- a proxy that loses a connection at a chosen moment ---- */

/* Between the store and the server: forwards bytes both ways, except that, armed, it cuts
 * the connection either just before the server sees a MULTI (the transaction never ran) or
 * just after the server answered an EXEC (it ran; the reply is lost). */
enum { PROXY_PASS, PROXY_CUT_AFTER_EXEC, PROXY_CUT_BEFORE_MULTI };
static volatile int g_proxy_mode, g_proxy_stop, g_proxy_cuts;
static char g_proxy_sock[96];

typedef struct proxy_pair {
	int c, s;          /* client side, server side; -1 when closed */
	bool cut_on_reply; /* the EXEC went through: drop the reply */
} proxy_pair;

static void pair_close(proxy_pair *p)
{
	if (p->c >= 0)
		close(p->c);
	if (p->s >= 0)
		close(p->s);
	p->c = p->s = -1;
}

static void *proxy_main(void *arg)
{
	int lfd = *(int *)arg;
	proxy_pair pairs[64];
	size_t n = 0;
	while (!g_proxy_stop) {
		struct pollfd pfd[129];
		pfd[0] = (struct pollfd){lfd, POLLIN, 0};
		for (size_t i = 0; i < n; i++) {
			pfd[1 + 2 * i] = (struct pollfd){pairs[i].c, POLLIN, 0};
			pfd[2 + 2 * i] = (struct pollfd){pairs[i].s, POLLIN, 0};
		}
		if (poll(pfd, 1 + 2 * n, 50) <= 0)
			continue;
		size_t polled = n; /* a pair accepted now has no poll result yet */
		if ((pfd[0].revents & POLLIN) && n < 64) {
			int c = accept(lfd, NULL, NULL);
			struct sockaddr_un sa = {.sun_family = AF_UNIX};
			snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", g_sock);
			int sfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
			if (c >= 0 && sfd >= 0 &&
			    connect(sfd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
				pairs[n++] = (proxy_pair){c, sfd, false};
			} else {
				if (c >= 0)
					close(c);
				if (sfd >= 0)
					close(sfd);
			}
		}
		for (size_t i = 0; i < polled; i++) {
			char buf[65536];
			proxy_pair *p = &pairs[i];
			if (p->c >= 0 && (pfd[1 + 2 * i].revents & (POLLIN | POLLHUP | POLLERR))) {
				ssize_t got = read(p->c, buf, sizeof(buf));
				if (got <= 0) {
					pair_close(p);
				} else if (g_proxy_mode == PROXY_CUT_BEFORE_MULTI &&
				           memmem(buf, (size_t)got, "MULTI", 5)) {
					g_proxy_mode = PROXY_PASS;
					g_proxy_cuts++;
					pair_close(p);
				} else {
					if (g_proxy_mode == PROXY_CUT_AFTER_EXEC &&
					    memmem(buf, (size_t)got, "EXEC", 4)) {
						g_proxy_mode = PROXY_PASS;
						p->cut_on_reply = true;
					}
					if (write(p->s, buf, (size_t)got) != got)
						pair_close(p);
				}
			}
			if (p->s >= 0 && (pfd[2 + 2 * i].revents & (POLLIN | POLLHUP | POLLERR))) {
				ssize_t got = read(p->s, buf, sizeof(buf));
				if (got <= 0) {
					pair_close(p);
				} else if (p->cut_on_reply) {
					/* The server answers a pipeline after running all of it. */
					g_proxy_cuts++;
					pair_close(p);
				} else if (write(p->c, buf, (size_t)got) != got) {
					pair_close(p);
				}
			}
		}
		size_t k = 0; /* compact */
		for (size_t i = 0; i < n; i++)
			if (pairs[i].c >= 0)
				pairs[k++] = pairs[i];
		n = k;
	}
	for (size_t i = 0; i < n; i++)
		pair_close(&pairs[i]);
	return NULL;
}

typedef struct counted {
	int calls;
} counted;

static int incr_counted(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	((counted *)ctx)->calls++;
	return incr_n(rec, changed, NULL, err);
}

/* The connection lost with EXEC sent: the store asks the server whether its commit marker
 * exists instead of guessing. After EXEC ran, the function is not run again and the record
 * is incremented once; when the transaction never reached the server, the function runs
 * again on a new connection and the record is still incremented once. */
static void test_update_outcome_after_lost_exec(void **state)
{
	(void)state;
	snprintf(g_proxy_sock, sizeof(g_proxy_sock), "%s/proxy.sock", g_dir);
	unlink(g_proxy_sock);
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(lfd >= 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", g_proxy_sock);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(lfd, 16), 0);
	g_proxy_stop = 0, g_proxy_cuts = 0, g_proxy_mode = PROXY_PASS;
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, proxy_main, &lfd), 0);

	/* open_with puts the real socket first; build this one by hand */
	const aks_plugin *p = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_plugin_load("redis", AKS_PLUGIN_STORE, &p, &err), AKS_OK);
	char yaml[512];
	snprintf(yaml, sizeof(yaml), "redis:\n  url: \"unix://%s\"\n", g_proxy_sock);
	aks_node *root = NULL;
	opened o = {0};
	assert_int_equal(aks__yaml_parse(yaml, strlen(yaml), "t.yaml", &root, &err), AKS_OK);
	assert_int_equal(aks__config_build(aks_plugin_get_descriptor(p),
	                                   aks__node_get(root, "redis"), "redis", &o.cfg, &err),
	                 AKS_OK);
	aks__node_free(root);
	assert_int_equal(aks__store_open_plugin(p, o.cfg, &o.s, &err), AKS_OK);

	counted c = {0};
	assert_int_equal(aks__store_update(o.s, "counters", "c", incr_counted, &c, &err), AKS_OK);
	assert_int_equal(c.calls, 1);

	g_proxy_mode = PROXY_CUT_AFTER_EXEC;
	c.calls = 0;
	int rc = aks__store_update(o.s, "counters", "c", incr_counted, &c, &err);
	if (rc != AKS_OK)
		fail_msg("update: %s", aks_error_message(err));
	assert_int_equal(g_proxy_cuts, 1);
	assert_int_equal(c.calls, 1);
	assert_int_equal(get_n(o.s, "counters", "c"), 2);

	g_proxy_mode = PROXY_CUT_BEFORE_MULTI;
	c.calls = 0;
	rc = aks__store_update(o.s, "counters", "c", incr_counted, &c, &err);
	if (rc != AKS_OK)
		fail_msg("update: %s", aks_error_message(err));
	assert_int_equal(g_proxy_cuts, 2);
	assert_int_equal(c.calls, 2);
	assert_int_equal(get_n(o.s, "counters", "c"), 3);

	close_store(&o);
	g_proxy_stop = 1;
	pthread_join(th, NULL);
	close(lfd);
	unlink(g_proxy_sock);
}

/* ---- locks ---- */

typedef struct lock_arg {
	aks_state_store *s;
	int *inside, *entries, *overlaps;
	pthread_mutex_t *mu;
} lock_arg;

static void *lock_loop(void *arg)
{
	lock_arg *a = arg;
	for (int i = 0; i < 15; i++) {
		aks_store_lock *lk = NULL;
		aks_error *err = NULL;
		if (aks__store_lock(a->s, "conv", "sess", NULL, &lk, &err) != AKS_OK) {
			aks_error_free(err);
			pthread_mutex_lock(a->mu);
			(*a->overlaps)++;
			pthread_mutex_unlock(a->mu);
			continue;
		}
		pthread_mutex_lock(a->mu);
		if (++*a->inside != 1)
			(*a->overlaps)++;
		(*a->entries)++;
		pthread_mutex_unlock(a->mu);
		sleep_ms(2);
		pthread_mutex_lock(a->mu);
		--*a->inside;
		pthread_mutex_unlock(a->mu);
		aks__store_unlock(a->s, lk);
	}
	return NULL;
}

/* 6 threads take one lock 15 times each: never two inside at once, and the key is gone
 * after the last unlock. */
static void test_lock_threads(void **state)
{
	opened *o = *state;
	int inside = 0, entries = 0, overlaps = 0;
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	lock_arg a = {o->s, &inside, &entries, &overlaps, &mu};
	pthread_t th[6];
	for (int i = 0; i < 6; i++)
		assert_int_equal(pthread_create(&th[i], NULL, lock_loop, &a), 0);
	for (int i = 0; i < 6; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	assert_int_equal(overlaps, 0);
	assert_int_equal(entries, 90);
	assert_int_equal(rint_cmd("EXISTS %s", "aks:l:4:conv:sess"), 0);
}

typedef struct timed {
	aks_state_store *s;
	double timeout;
	aks_cancel *cancel;
	int rc;
	double elapsed;
	char msg[256];
} timed;

static void *timed_lock(void *arg)
{
	timed *t = arg;
	aks_call call;
	aks_call_init(&call, t->timeout, NULL, NULL, t->cancel);
	aks_store_lock *lk = NULL;
	aks_error *err = NULL;
	double t0 = now_s();
	t->rc = aks__store_lock(t->s, "conv", "busy", &call, &lk, &err);
	t->elapsed = now_s() - t0;
	snprintf(t->msg, sizeof(t->msg), "%s", err ? aks_error_message(err) : "");
	aks_error_free(err);
	if (lk)
		aks__store_unlock(t->s, lk);
	return NULL;
}

typedef struct canceller {
	aks_cancel *cancel;
	int after_ms;
} canceller;

static void *cancel_later(void *arg)
{
	canceller *c = arg;
	sleep_ms(c->after_ms);
	aks_cancel_trigger(c->cancel);
	return NULL;
}

/* A wait for a held lock ends at the deadline (AKS_ETIMEOUT) or when cancelled
 * (AKS_ECANCELLED), whichever comes first; the lock is not taken either way. */
static void test_lock_timeout_and_cancel(void **state)
{
	opened *o = *state;
	aks_store_lock *held = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks__store_lock(o->s, "conv", "busy", NULL, &held, &err), AKS_OK);

	timed t = {.s = o->s, .timeout = 0.3};
	timed_lock(&t);
	assert_int_equal(t.rc, AKS_ETIMEOUT);
	assert_true(t.elapsed >= 0.28 && t.elapsed < 2.0);
	assert_non_null(strstr(t.msg, "timed out"));

	aks_cancel *cancel = NULL;
	assert_int_equal(aks_cancel_new(&cancel, &err), AKS_OK);
	canceller c = {cancel, 200};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, cancel_later, &c), 0);
	t = (timed){.s = o->s, .timeout = 60.0, .cancel = cancel};
	timed_lock(&t);
	pthread_join(th, NULL);
	assert_int_equal(t.rc, AKS_ECANCELLED);
	assert_true(t.elapsed >= 0.18 && t.elapsed < 2.0);
	aks_cancel_free(cancel);

	/* Still ours: the key holds our token, and once released another takes it at once. */
	assert_int_equal(rint_cmd("EXISTS %s", "aks:l:4:conv:busy"), 1);
	aks__store_unlock(o->s, held);
	t = (timed){.s = o->s, .timeout = 1.0};
	timed_lock(&t);
	assert_int_equal(t.rc, AKS_OK);
	assert_true(t.elapsed < 0.5);
}

/* A child process: opens its own store, takes the lock, reports on `fd`, holds it hold_ms
 * (or until killed when hold_ms < 0), and releases it. */
static void child_hold(const char *extra_yaml, int fd, int hold_ms)
{
	opened o;
	aks_error *err = NULL;
	if (open_with(extra_yaml, &o, &err) != AKS_OK)
		_exit(10);
	aks_store_lock *lk = NULL;
	if (aks__store_lock(o.s, "conv", "proc", NULL, &lk, &err) != AKS_OK)
		_exit(11);
	if (write(fd, "L", 1) != 1)
		_exit(12);
	if (hold_ms < 0)
		for (;;)
			pause();
	sleep_ms(hold_ms);
	/* The parent must not be inside: it records its entry in this key. */
	redisReply *r = rcmd("GET %s", "parent-inside");
	int bad = r && r->type == REDIS_REPLY_STRING;
	freeReplyObject(r);
	aks__store_unlock(o.s, lk);
	close_store(&o);
	_exit(bad ? 13 : 0);
}

static pid_t spawn_holder(const char *extra_yaml, int hold_ms)
{
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t parent = getpid();
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		close(p[0]);
		child_hold(extra_yaml, p[1], hold_ms);
	}
	g_child = pid; /* killed by teardown if an assertion ends the test early */
	close(p[1]);
	char c = 0;
	struct pollfd pfd = {p[0], POLLIN, 0};
	assert_int_equal(poll(&pfd, 1, 10000), 1);
	assert_int_equal(read(p[0], &c, 1), 1);
	assert_int_equal(c, 'L');
	close(p[0]);
	return pid;
}

/* Two processes: the parent waits while the child holds the lock, and gets it after. */
static void test_lock_processes(void **state)
{
	opened *o = *state;
	pid_t pid = spawn_holder(NULL, 600);
	aks_call call;
	aks_call_init(&call, 0.2, NULL, NULL, NULL);
	aks_store_lock *lk = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks__store_lock(o->s, "conv", "proc", &call, &lk, &err), AKS_ETIMEOUT);
	aks_error_free(err);
	err = NULL;
	double t0 = now_s();
	assert_int_equal(aks__store_lock(o->s, "conv", "proc", NULL, &lk, &err), AKS_OK);
	double waited = now_s() - t0;
	freeReplyObject(rcmd("SET parent-inside 1"));
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	g_child = -1;
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_true(waited >= 0.2);
	aks__store_unlock(o->s, lk);
}

/* A holder killed with SIGKILL: while it lived its lease was renewed (held past several
 * leases); after its death the lock frees itself within about one lease. */
static void test_lease_expiry_after_sigkill(void **state)
{
	(void)state;
	opened o;
	open_ok("  lock_lease: 1\n", &o);
	pid_t pid = spawn_holder("  lock_lease: 1\n", -1);
	sleep_ms(2500); /* two and a half leases */
	long long pttl = rint_cmd("PTTL %s", "aks:l:4:conv:proc");
	assert_true(pttl > 0 && pttl <= 1000);
	aks_call call;
	aks_call_init(&call, 0.2, NULL, NULL, NULL);
	aks_store_lock *lk = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks__store_lock(o.s, "conv", "proc", &call, &lk, &err), AKS_ETIMEOUT);
	aks_error_free(err);
	err = NULL;

	assert_int_equal(kill(pid, SIGKILL), 0);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	g_child = -1;
	assert_true(WIFSIGNALED(st));
	double t0 = now_s();
	aks_call_init(&call, 5.0, NULL, NULL, NULL);
	assert_int_equal(aks__store_lock(o.s, "conv", "proc", &call, &lk, &err), AKS_OK);
	double waited = now_s() - t0;
	print_message("# lock free %.3f s after the holder's death (lease 1 s)\n", waited);
	assert_true(waited <= 1.8); /* one lease, and slack for a loaded machine */
	aks__store_unlock(o.s, lk);
	assert_int_equal(rint_cmd("EXISTS %s", "aks:l:4:conv:proc"), 0);
	close_store(&o);
}

/* ---- expiring records ---- */

static int no_record(void *ctx, const char *key, const char *value, size_t len)
{
	(void)ctx, (void)key, (void)value, (void)len;
	return AKS_ERROR;
}

/* put_expiring writes a record that get and scan see, with its time to live in Redis, gone
 * by itself after it. Called through the ops table, as the queue broker's response store. */
static void test_put_expiring(void **state)
{
	(void)state;
	const aks_plugin *p = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_plugin_load("redis", AKS_PLUGIN_STORE, &p, &err), AKS_OK);
	const aks_store_ops *ops = aks_plugin_get_descriptor(p)->ops;
	assert_non_null(ops->put_expiring);
	opened o;
	open_ok("  prefix: \"ak:responses:\"\n", &o);
	aks_store_impl *impl = NULL;
	assert_int_equal(ops->init(aks__host_api(), o.cfg, &impl, &err), AKS_OK);
	const char rec[] = "{\"request_id\":\"t1\",\"status_code\":200}";
	assert_int_equal(ops->put_expiring(impl, "responses", "t1", rec, strlen(rec), 1, &err),
	                 AKS_OK);
	assert_int_equal(ops->put_expiring(impl, "responses", "t2", rec, strlen(rec), 0, &err),
	                 AKS_EINVAL);
	aks_error_free(err);
	err = NULL;
	const char *key = "ak:responses:r:9:responses:t1";
	long long pttl = rint_cmd("PTTL %s", key);
	assert_true(pttl > 0 && pttl <= 1000);
	json_object *got = NULL;
	assert_int_equal(aks__store_get(o.s, "responses", "t1", &got, &err), AKS_OK);
	json_object *sc = NULL;
	assert_true(json_object_object_get_ex(got, "status_code", &sc));
	assert_int_equal(json_object_get_int(sc), 200);
	json_object_put(got);
	sleep_ms(1500);
	redisReply *r = rcmd("GET %s", key);
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_NIL);
	freeReplyObject(r);
	assert_int_equal(ops->get(impl, "responses", "t1", no_record, NULL, &err), AKS_ENOTFOUND);
	ops->fini(impl);
	close_store(&o);
}

/* ---- failures ---- */

/* Connections killed by the server: the next operations reconnect by themselves. */
static void test_reconnect_after_client_kill(void **state)
{
	opened *o = *state;
	put(o->s, "conv", "k", "before");
	aks_store_lock *lk = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks__store_lock(o->s, "conv", "k", NULL, &lk, &err), AKS_OK);
	aks__store_unlock(o->s, lk);
	long long killed = rint_cmd("CLIENT KILL TYPE normal SKIPME %s", "yes");
	assert_true(killed >= 1);
	char *v = get_v(o->s, "conv", "k");
	assert_string_equal(v, "before");
	free(v);
	rint_cmd("CLIENT KILL TYPE normal SKIPME %s", "yes");
	put(o->s, "conv", "k", "after");
	v = get_v(o->s, "conv", "k");
	assert_string_equal(v, "after");
	free(v);
	rint_cmd("CLIENT KILL TYPE normal SKIPME %s", "yes");
	collected c = {0};
	scan_into(o->s, "conv", "", &c);
	assert_int_equal(c.n, 1);
	collected_free(&c);
	rint_cmd("CLIENT KILL TYPE normal SKIPME %s", "yes");
	assert_int_equal(aks__store_lock(o->s, "conv", "k", NULL, &lk, &err), AKS_OK);
	aks__store_unlock(o->s, lk);
}

/* The server stopped: every operation fails quickly with AKS_EIO naming the server; after a
 * restart the same store works again without being reopened. */
static void test_server_down_and_restart(void **state)
{
	opened *o = *state;
	put(o->s, "conv", "k", "v");
	server_stop();
	aks_error *err = NULL;
	json_object *rec = NULL;
	double t0 = now_s();
	assert_int_equal(aks__store_get(o->s, "conv", "k", &rec, &err), AKS_EIO);
	assert_true(now_s() - t0 < 3.0);
	assert_non_null(strstr(aks_error_message(err), g_sock));
	assert_non_null(strstr(aks_error_message(err), "redis"));
	print_message("# %s\n", aks_error_message(err));
	aks_error_free(err);
	err = NULL;
	assert_int_equal(aks__store_update(o->s, "conv", "k", set_v, "x", &err), AKS_EIO);
	assert_non_null(strstr(aks_error_message(err), g_sock));
	aks_error_free(err);
	err = NULL;
	aks_store_lock *lk = NULL;
	assert_int_equal(aks__store_lock(o->s, "conv", "k", NULL, &lk, &err), AKS_EIO);
	aks_error_free(err);
	err = NULL;
	char **names = NULL;
	assert_int_equal(aks__store_list(o->s, &names, &err), AKS_EIO);
	aks_error_free(err);
	err = NULL;

	server_start(); /* no persistence: empty */
	assert_null(get_v(o->s, "conv", "k"));
	put(o->s, "conv", "k", "again");
	char *v = get_v(o->s, "conv", "k");
	assert_string_equal(v, "again");
	free(v);
	/* And a restart under an open pool, without an outage seen in between. */
	server_stop();
	server_start();
	put(o->s, "conv", "k2", "after restart");
	v = get_v(o->s, "conv", "k2");
	assert_string_equal(v, "after restart");
	free(v);
}

/* Config mistakes are refused at open with the key named; a store on a socket nobody
 * listens on opens (lazily) and fails on use, naming it. */
static void test_config_and_unreachable(void **state)
{
	(void)state;
	const aks_plugin *p = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_plugin_load("redis", AKS_PLUGIN_STORE, &p, &err), AKS_OK);
	static const struct {
		const char *yaml, *want;
	} bad[] = {
	    {"redis: {url: \"http://x\"}", "unknown scheme"},
	    {"redis: {url: \"redis://h:99999\"}", "port"},
	    {"redis: {url: \"redis://h/x\"}", "database number"},
	    {"redis: {url: \"unix://relative.sock\"}", "absolute path"},
	    {"redis: {url: \"unix:///s.sock?bogus=1\"}", "unknown query parameter"},
	    {"redis: {url: \"redis://h\", tls_ca_file: /ca.pem}", "not rediss://"},
	    {"redis: {lock_lease: 0}", "lock_lease"},
	    {"redis: {pool_size: 0}", "pool_size"},
	    {"redis: {password_env: AKS_TEST_NO_SUCH_VARIABLE}", "AKS_TEST_NO_SUCH_VARIABLE"},
#ifndef HAVE_HIREDIS_SSL
	    {"redis: {url: \"rediss://h\"}", "without hiredis_ssl"},
#endif
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		aks_node *root = NULL;
		aks_config *cfg = NULL;
		aks_state_store *s = NULL;
		err = NULL;
		assert_int_equal(
		    aks__yaml_parse(bad[i].yaml, strlen(bad[i].yaml), "t.yaml", &root, &err),
		    AKS_OK);
		int rc = aks__config_build(aks_plugin_get_descriptor(p),
		                           aks__node_get(root, "redis"), "redis", &cfg, &err);
		if (rc == AKS_OK)
			rc = aks__store_open_plugin(p, cfg, &s, &err);
		if (rc != AKS_ECONFIG || !strstr(aks_error_message(err), bad[i].want))
			fail_msg("%s: rc %d, %s", bad[i].yaml, rc,
			         err ? aks_error_message(err) : "");
		assert_null(s);
		aks_error_free(err);
		aks_config_free(cfg);
		aks__node_free(root);
	}

	char yaml[256];
	snprintf(yaml, sizeof(yaml), "  url: \"unix://%s/nobody.sock\"\n", g_dir);
	opened o;
	memset(&o, 0, sizeof(o));
	err = NULL;
	/* open_with puts its own url first; a second url key would be a duplicate: build by hand */
	char full[512];
	snprintf(full, sizeof(full), "redis:\n%s", yaml);
	aks_node *root = NULL;
	assert_int_equal(aks__yaml_parse(full, strlen(full), "t.yaml", &root, &err), AKS_OK);
	assert_int_equal(aks__config_build(aks_plugin_get_descriptor(p),
	                                   aks__node_get(root, "redis"), "redis", &o.cfg, &err),
	                 AKS_OK);
	aks__node_free(root);
	assert_int_equal(aks__store_open_plugin(p, o.cfg, &o.s, &err), AKS_OK);
	json_object *rec = NULL;
	assert_int_equal(aks__store_get(o.s, "n", "k", &rec, &err), AKS_EIO);
	assert_non_null(strstr(aks_error_message(err), "nobody.sock"));
	assert_non_null(strstr(aks_error_message(err), "cannot connect"));
	aks_error_free(err);
	close_store(&o);
}

/* ---- the CLI end to end ---- */

static char *run_cli(const char *cfg, const char *tool, const char *args, int *status)
{
	const char *b = getenv("AKS_TEST_BUILDDIR");
	assert_non_null(b);
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "'%s/core/cli/aksandbox' -c '%s' tool %s '%s' 2>&1", b, cfg,
	         tool, args);
	FILE *f = popen(cmd, "r");
	assert_non_null(f);
	char *out = calloc(1, 65536);
	size_t n = fread(out, 1, 65535, f);
	out[n] = '\0';
	*status = pclose(f);
	return out;
}

/* Two CLI processes on a config whose state store is this Redis: the first creates a
 * session (its record is in Redis under the documented key), the second finds it, with its
 * sandbox and the file the first wrote. */
static void test_cli_end_to_end(void **state)
{
	(void)state;
	char cfg[256], yaml[1024];
	snprintf(cfg, sizeof(cfg), "%s/config.yaml", g_dir);
	snprintf(yaml, sizeof(yaml),
	         "sandbox:\n"
	         "  enabled: true\n"
	         "  default_profile: local\n"
	         "  state_store: {type: redis, redis: {url: \"unix://%s\", prefix: \"e2e:\"}}\n"
	         "  profiles:\n"
	         "    local: {type: local_subprocess, local_subprocess: {workdir: %s/boxes}}\n",
	         g_sock, g_dir);
	FILE *f = fopen(cfg, "w");
	assert_non_null(f);
	fputs(yaml, f);
	assert_int_equal(fclose(f), 0);

	int st;
	char *out =
	    run_cli(cfg, "run_command", "{\"command\":\"echo hi; echo kept > note.txt\"}", &st);
	if (st != 0 || !strstr(out, "\"stdout\": \"hi\\n\""))
		fail_msg("run_command: status %d: %s", st, out);
	free(out);

	/* The session record, in Redis. */
	redisReply *r = rcmd("KEYS %s", "e2e:r:*");
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_ARRAY);
	bool found = false;
	for (size_t i = 0; i < r->elements; i++)
		found = found || strstr(r->element[i]->str, "session:default:local") != NULL;
	if (!found)
		fail_msg("no session record among %zu keys e2e:r:*", r->elements);
	freeReplyObject(r);

	out = run_cli(cfg, "list_sandbox_sessions", "{}", &st);
	if (st != 0 || !strstr(out, "default:local"))
		fail_msg("list_sandbox_sessions: status %d: %s", st, out);
	free(out);
	out = run_cli(cfg, "read_sandbox_file", "{\"path\":\"note.txt\"}", &st);
	if (st != 0 || !strstr(out, "kept"))
		fail_msg("read_sandbox_file in a second process: status %d: %s", st, out);
	free(out);
	/* Nothing was written to a state directory: the CLI had none configured but Redis. */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hostile_names, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_scan_prefix_exact, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_scan_many, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_namespaces, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_concurrent_counter, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_counter_under_client_kill, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_update_outcome_after_lost_exec, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lock_threads, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lock_timeout_and_cancel, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lock_processes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lease_expiry_after_sigkill, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_put_expiring, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reconnect_after_client_kill, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_server_down_and_restart, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_config_and_unreachable, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cli_end_to_end, setup, teardown),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
