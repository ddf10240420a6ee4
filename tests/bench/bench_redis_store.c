/*
 * bench_redis_store: the redis store plugin against the built-in file store, through the
 * core's state store API (what the manager pays per session transaction).
 *
 *   bench_redis_store [ITER] [DIR]   (ITER also from BENCH_ITER, default 200; DIR: a scratch
 *                                     directory for the file store and the server, default
 *                                     $TMPDIR)
 *
 * Starts a private redis-server (no persistence) listening on a unix socket and on a
 * loopback TCP port, and measures, interleaved, for the file store and the redis store over
 * both: an update that changes a session record, one that leaves it as it is, a get, and a
 * lock + unlock; then the throughput of 8 threads updating records of their own. The file
 * store fsyncs every changed record; this redis-server writes nothing to disk (with
 * appendonly and fsync always, Redis would pay a comparable fsync). Nothing is asserted.
 *
 * Needs redis-server on PATH and redis.so on AKS_PLUGIN_PATH (make bench sets it).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>
#include <json-c/json.h>

#include "core/config/block.h"
#include "core/config/yaml_tree.h"
#include "core/store/store.h"

static char g_dir[256], g_sock[300];
static int g_port;
static pid_t g_server = -1;

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void die(const char *what, aks_error *err)
{
	fprintf(stderr, "bench_redis_store: %s%s%s\n", what, err ? ": " : "",
	        err ? aks_error_message(err) : "");
	if (g_server > 0)
		kill(g_server, SIGTERM);
	exit(1);
}

/* A free loopback port (there is a window before the server binds it; fine for a bench). */
static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
		die("no free port", NULL);
	close(fd);
	return ntohs(sa.sin_port);
}

static void server_start(void)
{
	char port[16];
	g_port = free_port();
	snprintf(port, sizeof(port), "%d", g_port);
	char *argv[] = {"redis-server", "--port", port,  "--bind", "127.0.0.1", "--unixsocket",
	                g_sock,         "--dir",  g_dir, "--save", "",          "--appendonly",
	                "no",           NULL};
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0)
		die("fork", NULL);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		int null = open("/dev/null", O_RDWR);
		dup2(null, 0), dup2(null, 1), dup2(null, 2);
		execvp("redis-server", argv);
		_exit(127);
	}
	g_server = pid;
	struct timeval tv = {1, 0};
	for (int i = 0; i < 200; i++) {
		redisContext *c = redisConnectUnixWithTimeout(g_sock, tv);
		redisReply *r = c && !c->err ? redisCommand(c, "PING") : NULL;
		bool up = r && r->type == REDIS_REPLY_STATUS;
		freeReplyObject(r);
		if (c)
			redisFree(c);
		if (up)
			return;
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			g_server = -1;
			die("redis-server did not start (is it installed? Debian: apt-get install "
			    "redis-server)",
			    NULL);
		}
		struct timespec ts = {0, 25000000L};
		nanosleep(&ts, NULL);
	}
	die("redis-server did not answer", NULL);
}

static aks_state_store *open_redis(const char *url, aks_config **cfg)
{
	const aks_plugin *p = NULL;
	aks_error *err = NULL;
	if (aks_plugin_load("redis", AKS_PLUGIN_STORE, &p, &err) < 0)
		die("loading redis.so", err);
	char yaml[512];
	snprintf(yaml, sizeof(yaml), "redis:\n  url: \"%s\"\n", url);
	aks_node *root = NULL;
	aks_state_store *s = NULL;
	if (aks__yaml_parse(yaml, strlen(yaml), "bench.yaml", &root, &err) < 0 ||
	    aks__config_build(aks_plugin_get_descriptor(p), aks__node_get(root, "redis"), "redis",
	                      cfg, &err) < 0 ||
	    aks__store_open_plugin(p, *cfg, &s, &err) < 0)
		die("opening the redis store", err);
	aks__node_free(root);
	return s;
}

/* ---- the operations ---- */

static double g_clock = 1.7e9;

static int put_session(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)err;
	json_object_object_add(rec, "sandbox_session_id", json_object_new_string(ctx));
	json_object_object_add(rec, "profile", json_object_new_string("python"));
	json_object_object_add(rec, "provider_type", json_object_new_string("local_subprocess"));
	json_object_object_add(rec, "sandbox_id",
	                       json_object_new_string("/var/tmp/aksandbox-3f2c9e1ab0d44c8f"));
	json_object_object_add(rec, "created_at", json_object_new_double(1.7e9));
	json_object_object_add(rec, "last_used_at", json_object_new_double(g_clock += 1.0));
	json_object_object_add(rec, "status", json_object_new_string("active"));
	*changed = true;
	return AKS_OK;
}

static int keep(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)rec, (void)ctx, (void)err;
	*changed = false;
	return AKS_OK;
}

enum { OP_UPDATE, OP_KEEP, OP_GET, OP_LOCK, N_OPS };
static const char *op_names[N_OPS] = {"update (changes the record)", "update (no change)", "get",
                                      "lock + unlock"};

static void run_op(aks_state_store *s, int op)
{
	aks_error *err = NULL;
	int rc = AKS_OK;
	json_object *rec = NULL;
	aks_store_lock *lk = NULL;
	switch (op) {
	case OP_UPDATE:
		rc = aks__store_update(s, "conv-bench", "session:default:python", put_session,
		                       "default:python", &err);
		break;
	case OP_KEEP:
		rc = aks__store_update(s, "conv-bench", "session:default:python", keep, NULL, &err);
		break;
	case OP_GET:
		rc = aks__store_get(s, "conv-bench", "session:default:python", &rec, &err);
		json_object_put(rec);
		break;
	case OP_LOCK:
		rc = aks__store_lock(s, "conv-bench", "session:default:python", NULL, &lk, &err);
		if (rc == AKS_OK)
			aks__store_unlock(s, lk);
		break;
	}
	if (rc < 0)
		die(op_names[op], err);
}

/* ---- throughput ---- */

typedef struct worker {
	aks_state_store *s;
	int id, n;
} worker;

static void *work(void *arg)
{
	worker *w = arg;
	char key[32], id[32];
	snprintf(key, sizeof(key), "session:t%d", w->id);
	snprintf(id, sizeof(id), "t%d", w->id);
	for (int i = 0; i < w->n; i++) {
		aks_error *err = NULL;
		if (aks__store_update(w->s, "conv-threads", key, put_session, id, &err) < 0)
			die("threaded update", err);
	}
	return NULL;
}

static double throughput(aks_state_store *s, int threads, int per_thread)
{
	pthread_t th[16];
	worker w[16];
	double t0 = now_ms();
	for (int i = 0; i < threads; i++) {
		w[i] = (worker){s, i, per_thread};
		pthread_create(&th[i], NULL, work, &w[i]);
	}
	for (int i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	return threads * per_thread / ((now_ms() - t0) / 1e3);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

int main(int argc, char **argv)
{
	int iter = argc > 1               ? atoi(argv[1])
	           : getenv("BENCH_ITER") ? atoi(getenv("BENCH_ITER"))
	                                  : 200;
	const char *base = argc > 2 ? argv[2] : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	if (iter < 10)
		iter = 10;
	snprintf(g_dir, sizeof(g_dir), "%s/bench-redis-XXXXXX", base);
	if (!mkdtemp(g_dir))
		die("mkdtemp", NULL);
	snprintf(g_sock, sizeof(g_sock), "%s/redis.sock", g_dir);
	server_start();

	char state[300], url_unix[400], url_tcp[64];
	snprintf(state, sizeof(state), "%s/state", g_dir);
	snprintf(url_unix, sizeof(url_unix), "unix://%s", g_sock);
	snprintf(url_tcp, sizeof(url_tcp), "redis://127.0.0.1:%d", g_port);
	aks_error *err = NULL;
	aks_state_store *stores[3];
	aks_config *cfgs[3] = {NULL, NULL, NULL};
	const char *names[3] = {"file", "redis (unix socket)", "redis (TCP loopback)"};
	if (aks__store_open(state, &stores[0], &err) < 0)
		die("opening the file store", err);
	stores[1] = open_redis(url_unix, &cfgs[1]);
	stores[2] = open_redis(url_tcp, &cfgs[2]);

	printf("Redis store vs file store: %d iterations each, interleaved (median, p90 in ms)\n",
	       iter);
	double *v = calloc((size_t)(3 * N_OPS * iter), sizeof(*v));
	for (int k = 0; k < 3; k++) /* warm up: connections, the record, the directories */
		for (int op = 0; op < N_OPS; op++)
			run_op(stores[k], op);
	for (int i = 0; i < iter; i++)
		for (int op = 0; op < N_OPS; op++)
			for (int k = 0; k < 3; k++) {
				double t0 = now_ms();
				run_op(stores[k], op);
				v[(k * N_OPS + op) * iter + i] = now_ms() - t0;
			}
	for (int op = 0; op < N_OPS; op++) {
		printf("  %s\n", op_names[op]);
		double med[3];
		for (int k = 0; k < 3; k++) {
			double *s = v + (k * N_OPS + op) * iter;
			qsort(s, (size_t)iter, sizeof(*s), cmp_double);
			med[k] = s[iter / 2];
			printf("    %-24s %8.3f %8.3f\n", names[k], med[k], s[iter * 9 / 10]);
		}
		printf("    redis (unix) / file: %.2fx\n", med[1] / med[0]);
	}
	free(v);

	printf("  8 threads, one record each, %d changing updates per thread (updates/s)\n", iter);
	for (int k = 0; k < 3; k++)
		printf("    %-24s %10.0f\n", names[k], throughput(stores[k], 8, iter));

	for (int k = 0; k < 3; k++) {
		aks__store_close(stores[k]);
		aks_config_free(cfgs[k]);
	}
	kill(g_server, SIGTERM);
	waitpid(g_server, NULL, 0);
	nftw(g_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}
