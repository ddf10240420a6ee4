/*
 * bench_nats: what the nats transport costs, against a private nats-server
 * (JetStream, file storage) it starts on a free loopback port through
 * tests/integration/nats-server.sh.
 *
 *   bench_nats [-n ROUND_TRIPS] [-m MESSAGES]    (defaults 200 and 2000)
 *
 * 1. Latency of one round trip, one message at a time: send (returns once the
 *    stream acknowledged it: durable), fetch by a waiting consumer, ack (the
 *    server confirms it). Medians and 90th percentiles of each step and of
 *    the whole, over ROUND_TRIPS, with the default 32 partitions.
 * 2. Throughput: MESSAGES sent by one thread across 64 groups while 1, 2 and
 *    4 consumer threads fetch and ack them; messages per second from the first
 *    send to the last ack (every message makes the full round trip).
 * Needs AKS_TEST_SRCDIR (for the script) and AKS_PLUGIN_PATH (make bench sets
 * both). Nothing is asserted: this prints what it measured.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <aksandbox/aksandbox.h>
#include <aksandbox/transport.h>

#include "core/plugin/host_api.h"
#include "tests/bench/bench_util.h"

static const aks_transport_ops *ops;
static const aks_plugin *plugin;
static char dir[128], url[128], script[1024];

static void die(const char *what, aks_error *err)
{
	bench_die("bench_nats", what, err);
}

static aks_transport_impl *open_transport(const char *name)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s.yaml", dir, name);
	FILE *f = fopen(path, "w");
	if (!f)
		die("writing the config", NULL);
	fprintf(f,
	        "url: %s\ninput_stream: %s_IN\ninput_subject_prefix: %s.req\n"
	        "output_stream: %s_OUT\noutput_subject_prefix: %s.out\nauto_provision: true\n",
	        url, name, name, name, name);
	fclose(f);
	aks_config *cfg = NULL;
	aks_error *err = NULL;
	aks_transport_impl *t = NULL;
	if (aks_config_load_block(plugin, path, &cfg, &err) != AKS_OK)
		die("config", err);
	if (ops->init(aks__host_api(), cfg, &t, &err) != AKS_OK)
		die("init", err);
	aks_config_free(cfg);
	return t;
}

static void send_one(aks_transport_impl *t, const char *body, const char *group, const char *dedup)
{
	static const char *const attrs[] = {"request_id", "bench", NULL};
	aks_message m = {AKS_MESSAGE_VERSION,
	                 sizeof(aks_message),
	                 body,
	                 strlen(body),
	                 attrs,
	                 group,
	                 dedup,
	                 0,
	                 NULL};
	aks_error *err = NULL;
	if (ops->send(t, AKS_QUEUE_INPUT, &m, NULL, &err) != AKS_OK)
		die("send", err);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static void report(const char *what, int64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_i64);
	printf("  %-40s median %8.3f ms   p90 %8.3f ms\n", what, bench_percentile_ms(v, n, 0.5),
	       bench_percentile_ms(v, n, 0.9));
}

static void latency(int n)
{
	aks_transport_impl *t = open_transport("LAT");
	aks_consumer *c = NULL;
	aks_error *err = NULL;
	if (ops->consumer_open(t, AKS_QUEUE_INPUT, &c, &err) != AKS_OK)
		die("consumer_open", err);
	int64_t *s = calloc((size_t)n, sizeof(int64_t)), *f = calloc((size_t)n, sizeof(int64_t));
	int64_t *a = calloc((size_t)n, sizeof(int64_t)), *all = calloc((size_t)n, sizeof(int64_t));
	for (int i = -10; i < n; i++) { /* 10 warm-up round trips */
		char body[64], dedup[32];
		snprintf(body, sizeof(body), "{\"op\":\"execute\",\"i\":%d}", i);
		snprintf(dedup, sizeof(dedup), "lat-%d", i);
		int64_t t0 = bench_now_ns();
		send_one(t, body, "session-1", dedup);
		int64_t t1 = bench_now_ns();
		aks_message *out[1];
		size_t got = 0;
		while (!got)
			if (ops->fetch(c, out, 1, &got, 5000, NULL, &err) != AKS_OK)
				die("fetch", err);
		int64_t t2 = bench_now_ns();
		if (ops->ack(c, out[0], &err) != AKS_OK)
			die("ack", err);
		int64_t t3 = bench_now_ns();
		if (i >= 0) {
			s[i] = t1 - t0, f[i] = t2 - t1, a[i] = t3 - t2, all[i] = t3 - t0;
		}
	}
	printf("Latency: one round trip at a time, %d samples (32 partitions, file storage)\n", n);
	report("send (until the stream's PubAck)", s, (size_t)n);
	report("fetch (message already queued)", f, (size_t)n);
	report("ack (until the server confirms)", a, (size_t)n);
	report("send + fetch + ack", all, (size_t)n);
	free(s), free(f), free(a), free(all);
	ops->consumer_close(c);
	ops->fini(t);
}

struct drain {
	aks_transport_impl *t;
	int total;
	int *done; /* shared, atomic */
	int64_t last_ns;
};

static void *consume(void *arg)
{
	struct drain *d = arg;
	aks_consumer *c = NULL;
	aks_error *err = NULL;
	if (ops->consumer_open(d->t, AKS_QUEUE_INPUT, &c, &err) != AKS_OK)
		die("consumer_open", err);
	while (__atomic_load_n(d->done, __ATOMIC_ACQUIRE) < d->total) {
		aks_message *out[1];
		size_t got = 0;
		if (ops->fetch(c, out, 1, &got, 100, NULL, &err) != AKS_OK)
			die("fetch", err);
		if (!got)
			continue;
		if (ops->ack(c, out[0], &err) != AKS_OK)
			die("ack", err);
		__atomic_add_fetch(d->done, 1, __ATOMIC_ACQ_REL);
	}
	d->last_ns = bench_now_ns();
	ops->consumer_close(c);
	return NULL;
}

static void throughput(int m, int consumers)
{
	char name[32];
	snprintf(name, sizeof(name), "TP%d", consumers);
	aks_transport_impl *t = open_transport(name);
	/* Provision the durables outside the measurement. */
	aks_consumer *c = NULL;
	aks_error *err = NULL;
	if (ops->consumer_open(t, AKS_QUEUE_INPUT, &c, &err) != AKS_OK)
		die("consumer_open", err);
	ops->consumer_close(c);
	int done = 0;
	struct drain d[8];
	pthread_t th[8];
	int64_t t0 = bench_now_ns();
	for (int i = 0; i < consumers; i++) {
		d[i] = (struct drain){t, m, &done, 0};
		pthread_create(&th[i], NULL, consume, &d[i]);
	}
	for (int i = 0; i < m; i++) {
		char body[64], group[32], dedup[32];
		snprintf(group, sizeof(group), "session-%d", i % 64);
		snprintf(body, sizeof(body), "{\"op\":\"execute\",\"i\":%d}", i);
		snprintf(dedup, sizeof(dedup), "tp-%d", i);
		send_one(t, body, group, dedup);
	}
	int64_t sent = bench_now_ns();
	int64_t end = 0;
	for (int i = 0; i < consumers; i++) {
		pthread_join(th[i], NULL);
		if (d[i].last_ns > end)
			end = d[i].last_ns;
	}
	printf("  %d consumer thread(s): %6d messages in %7.3f s: %8.0f round trips/s  (sending "
	       "alone: %.0f/s)\n",
	       consumers, m, (double)(end - t0) / 1e9, m / ((double)(end - t0) / 1e9),
	       m / ((double)(sent - t0) / 1e9));
	ops->fini(t);
}

static int server(const char *cmd, char *out, size_t size)
{
	char line[2048];
	snprintf(line, sizeof(line), "'%s' %s '%s'", script, cmd, dir);
	FILE *f = popen(line, "r");
	if (!f)
		return -1;
	char buf[256] = "";
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	int st = pclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	if (out)
		snprintf(out, size, "%s", buf);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	int n = 200, m = 2000, opt;
	while ((opt = getopt(argc, argv, "n:m:")) != -1) {
		if (opt == 'n')
			n = atoi(optarg);
		else if (opt == 'm')
			m = atoi(optarg);
		else {
			fprintf(stderr, "usage: bench_nats [-n ROUND_TRIPS] [-m MESSAGES]\n");
			return 2;
		}
	}
	if (n < 1 || m < 1)
		return 2;
	const char *src = getenv("AKS_TEST_SRCDIR");
	snprintf(script, sizeof(script), "%s/tests/integration/nats-server.sh", src ? src : ".");
	snprintf(dir, sizeof(dir), "%s/aks-bench-nats.XXXXXX",
	         getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	aks_error *err = NULL;
	if (aks_plugin_load("nats", AKS_PLUGIN_TRANSPORT, &plugin, &err) != AKS_OK)
		die("loading nats", err);
	ops = aks_plugin_get_descriptor(plugin)->ops;
	char owner[32];
	snprintf(owner, sizeof(owner), "%d", (int)getpid());
	setenv("NATS_SERVER_OWNER", owner, 1); /* no server outlives this process */
	if (server("start", url, sizeof(url)) != 0) {
		fprintf(stderr, "bench_nats: cannot start nats-server (%s)\n", script);
		return 1;
	}
	printf("nats transport (nats-server %s on loopback)\n", url);
	latency(n);
	printf("Throughput: %d messages over 64 groups, one sender, 32 partitions\n", m);
	throughput(m, 1);
	throughput(m, 2);
	throughput(m, 4);
	server("stop", NULL, 0);
	char line[512];
	snprintf(line, sizeof(line), "rm -rf '%s'", dir);
	return system(line) == 0 ? 0 : 1;
}
