/*
 * tests/bench/bench_queue.c - what the queue broker costs (flavor: queue, nats + redis or
 * sqs + dynamodb, a fleet of `aksandbox worker` processes) against the same executions in
 * process (flavor: thread).
 *
 *   bench_queue [-b nats|aws] [-n CALLS] [-c CALLERS] [-s SESSIONS] [-l LATENCY_CALLS]
 *               [-p POLL] [-x COMMAND] AKSANDBOX DIR
 *
 * -b picks the transport and the response store: nats (the default) starts a private
 * nats-server (JetStream) and redis-server through tests/integration/{nats,redis}-server.sh;
 * aws starts the emulators fauxqs (SQS) and dynalite (DynamoDB) from the npm registry through
 * tests/integration/sqs/fauxqs.sh and tests/integration/dynamodb/dynalite.sh, with test
 * credentials in the environment (which the workers inherit) and none of this host's AWS
 * settings. Then:
 * 1. Throughput: CALLERS threads of this process share one runtime and call
 *    run_command {"command": "true"} (or -x COMMAND, e.g. "sleep 0.2") CALLS times in all, spread
 * over SESSIONS sessions (each caller has its own sessions, so no caller waits for another's
 * session lock). Once in process (thread broker), then through the fleet with 1, 2 and 4 worker
 *    processes (AKSANDBOX worker, each with 2 input consumers); executions per second
 *    from the first call to the last answer, and the ratio to the thread broker.
 * 2. Added latency: one caller, sequential, LATENCY_CALLS calls on one session, the queue
 *    (1 worker) and the thread broker interleaved; medians and p90s, and the difference:
 *    what one call pays for the trip through the transport, a worker and the store. The
 *    agent reads the response store every POLL seconds (wait_poll_interval), which bounds
 *    that figure from below: it is printed with it.
 * Sessions' sandboxes (local_subprocess) and all state live under DIR, removed at the end.
 * Needs AKS_TEST_SRCDIR and AKS_PLUGIN_PATH (make bench sets both). Nothing is asserted
 * beyond every call succeeding: this prints what it measured.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <aksandbox/aksandbox.h>

#include "bench_util.h"

#define PROG                 "bench_queue"
#define MAX_WORKERS          4
#define CONSUMERS_PER_WORKER 2

/* A transport and a response store, each a private server started (and stopped) by its
 * script under tests/integration, in DIR/<subdirectory>. */
struct backend {
	const char *name;  /* -b */
	const char *label; /* what the figures are of */
	const char *transport_script, *transport_sub;
	const char *store_script, *store_sub;
};
static const struct backend backends[] = {
    {"nats", "nats + redis", "nats-server.sh", "nats", "redis-server.sh", "redis"},
    {"aws", "sqs + dynamodb", "sqs/fauxqs.sh", "fauxqs", "dynamodb/dynalite.sh", "dynalite"},
};
static const struct backend *backend = &backends[0];

static char dir[2048], src[2048], transport_url[256], store_url[2300], aksandbox[2048];

/* ---- servers and worker processes ----------------------------------------------------- */

/* SCRIPT start|stop SUBDIR: the first line it prints into out; 0 when it exited 0. */
static int server(const char *script, const char *cmd, const char *sub, char *out, size_t size)
{
	char line[8192];
	snprintf(line, sizeof(line), "sh '%s/tests/integration/%s' %s '%s/%s'", src, script, cmd,
	         dir, sub);
	FILE *f = popen(line, "r");
	if (!f)
		return -1;
	char buf[2300] = "";
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	int st = pclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	if (out)
		snprintf(out, size, "%s", buf);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static pid_t workers[MAX_WORKERS];
static int nworkers;

/* Starts one `aksandbox -c DIR/queue.yaml worker`, its log in DIR/worker-N.log, and waits
 * until it says it started. */
static void start_worker(void)
{
	char config[2100], log[2100];
	snprintf(config, sizeof(config), "%s/queue.yaml", dir);
	snprintf(log, sizeof(log), "%s/worker-%d.log", dir, nworkers);
	pid_t pid = fork();
	if (pid < 0) {
		perror(PROG ": fork");
		exit(1);
	}
	if (pid == 0) {
		FILE *f = freopen(log, "w", stderr);
		(void)f;
		setenv("AKS_LOG_LEVEL", "info", 1);
		execl(aksandbox, aksandbox, "-c", config, "worker", (char *)NULL);
		_exit(127);
	}
	workers[nworkers++] = pid;
	for (int i = 0; i < 400; i++) {
		char line[512];
		FILE *f = fopen(log, "r");
		bool ready = false;
		while (f && fgets(line, sizeof(line), f))
			ready = ready || strstr(line, "queue worker started");
		if (f)
			fclose(f);
		if (ready)
			return;
		if (waitpid(pid, NULL, WNOHANG) == pid) {
			fprintf(stderr, PROG ": the worker exited at start; see %s\n", log);
			exit(1);
		}
		usleep(25000);
	}
	fprintf(stderr, PROG ": the worker did not start within 10 s; see %s\n", log);
	exit(1);
}

/* SIGTERM to every worker; each must exit 0. */
static void stop_workers(void)
{
	for (int i = 0; i < nworkers; i++)
		kill(workers[i], SIGTERM);
	for (int i = 0; i < nworkers; i++) {
		int st = 0;
		if (waitpid(workers[i], &st, 0) != workers[i] || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != 0)
			fprintf(stderr, PROG ": worker %d did not exit cleanly (status %d)\n",
			        (int)workers[i], st);
	}
	nworkers = 0;
}

static void cleanup(void)
{
	stop_workers();
	server(backend->transport_script, "stop", backend->transport_sub, NULL, 0);
	server(backend->store_script, "stop", backend->store_sub, NULL, 0);
}

/* -b aws: the emulators' credentials (SigV4 needs some; neither emulator checks them), and
 * no AWS_* setting of this host (a profile, an endpoint, a region), which the plugins would
 * otherwise pick up. The workers inherit this environment. */
static void aws_environment(void)
{
	extern char **environ;
	for (bool again = true; again;) {
		again = false;
		for (char **e = environ; *e; e++) {
			if (strncmp(*e, "AWS_", 4) != 0)
				continue;
			char name[256];
			snprintf(name, sizeof(name), "%.*s", (int)strcspn(*e, "="), *e);
			unsetenv(name); /* environ changed under us: scan it again */
			again = true;
			break;
		}
	}
	char none[2100];
	snprintf(none, sizeof(none), "%s/no-aws-files", dir);
	setenv("AWS_ACCESS_KEY_ID", "test", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "test", 1);
	setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
	setenv("AWS_CONFIG_FILE", none, 1);
	setenv("AWS_SHARED_CREDENTIALS_FILE", none, 1);
}

/* The broker block's queue and response_store for the backend (after its servers started). */
static void backend_blocks(char *out, size_t size)
{
	if (strcmp(backend->name, "nats") == 0) {
		snprintf(out, size,
		         "    queue:\n"
		         "      type: nats\n"
		         "      input: {no_of_consumers: %d}\n"
		         "      output: {no_of_consumers: 1}\n"
		         "      nats: {url: \"%s\", auto_provision: true, partitions: 64, "
		         "ack_wait: 60}\n"
		         "    response_store:\n"
		         "      type: redis\n"
		         "      redis: {url: \"%s\"}\n",
		         CONSUMERS_PER_WORKER, transport_url, store_url);
		return;
	}
	/* fauxqs names a queue by the URL it gives it (its host, the endpoint's port); the
	 * visibility timeout is the ack wait, 60 s as nats's. */
	const char *colon = strrchr(transport_url, ':');
	const char *port = colon ? colon + 1 : "";
	snprintf(out, size,
	         "    queue:\n"
	         "      type: sqs\n"
	         "      input: {url: \"http://sqs.us-east-1.localhost:%s/000000000000/"
	         "aks-bench-in.fifo\", no_of_consumers: %d}\n"
	         "      output: {url: \"http://sqs.us-east-1.localhost:%s/000000000000/"
	         "aks-bench-out.fifo\", no_of_consumers: 1}\n"
	         "      sqs: {endpoint_url: \"%s\", region: us-east-1, auto_provision: true, "
	         "visibility_timeout: 60}\n"
	         "    response_store:\n"
	         "      type: dynamodb\n"
	         "      dynamodb: {table_name: aks-bench, endpoint_url: \"%s\", region: us-east-1, "
	         "auto_provision: true}\n",
	         port, CONSUMERS_PER_WORKER, port, transport_url, store_url);
}

/* ---- runtimes ------------------------------------------------------------------------- */

struct host {
	aks_settings *settings;
	aks_runtime *rt;
};

static void write_config(const char *name, const char *broker)
{
	char path[2100];
	snprintf(path, sizeof(path), "%s/%s.yaml", dir, name);
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, PROG ": cannot write %s: %s\n", path, strerror(errno));
		exit(1);
	}
	fprintf(f,
	        "sandbox:\n"
	        "  enabled: true\n"
	        "  default_profile: ws\n"
	        "  profiles:\n"
	        "    ws:\n"
	        "      type: local_subprocess\n"
	        "      scope: per_session\n"
	        "      local_subprocess: {workdir: \"%s/sb-%s\"}\n"
	        "  broker:\n"
	        "%s",
	        dir, name, broker);
	fclose(f);
}

static void host_open(struct host *h, const char *name)
{
	char config[2100], state[2100];
	aks_error *err = NULL;
	snprintf(config, sizeof(config), "%s/%s.yaml", dir, name);
	snprintf(state, sizeof(state), "%s/state-%s", dir, name);
	if (aks_settings_load(config, NULL, &h->settings, &err) < 0)
		bench_die(PROG, "settings", err);
	if (aks_runtime_open(h->settings, state, &h->rt, &err) < 0)
		bench_die(PROG, "runtime", err);
}

static void host_close(struct host *h)
{
	aks_runtime_close(h->rt);
	aks_settings_free(h->settings);
}

/* One tool call; exits unless it answered without an error. Returns the JSON (free()). */
static char *call(struct host *h, const char *tool, const char *args)
{
	aks_tool_context ctx;
	aks_tool_context_init(&ctx, "bench", NULL);
	char *json = NULL;
	aks_error *err = NULL;
	if (aks_runtime_call_tool(h->rt, tool, args, &ctx, &json, &err) < 0)
		bench_die(PROG, tool, err);
	if (strncmp(json, "{\"error\"", 8) == 0 || strstr(json, "\"status\": \"pending\"")) {
		fprintf(stderr, PROG ": %s %s: %s\n", tool, args ? args : "", json);
		exit(1);
	}
	return json;
}

/* What the throughput phase runs (-x): "true" measures what the broker itself costs; a
 * command that waits ("sleep 0.2") whether workers serve sessions in parallel. */
static const char *throughput_command = "true";

/* run_command COMMAND on a session; exits unless it ran and exited 0. */
static int64_t run_cmd(struct host *h, const char *session, const char *command)
{
	char args[512];
	snprintf(args, sizeof(args), "{\"command\": \"%s\", \"sandbox_session_id\": \"%s\"}",
	         command, session);
	int64_t t0 = bench_now_ns();
	char *json = call(h, "run_command", args);
	int64_t t = bench_now_ns() - t0;
	if (!strstr(json, "\"exit_code\": 0")) {
		fprintf(stderr, PROG ": run_command %s: %s\n", command, json);
		exit(1);
	}
	free(json);
	return t;
}

static int64_t run_true(struct host *h, const char *session)
{
	return run_cmd(h, session, "true");
}

static char **new_sessions(struct host *h, int n)
{
	char **ids = calloc((size_t)n, sizeof(char *));
	for (int i = 0; ids && i < n; i++) {
		char *json = call(h, "new_sandbox_session", "{}");
		const char *key = "\"sandbox_session_id\": \"";
		const char *p = strstr(json, key);
		if (p) {
			p += strlen(key);
			ids[i] = strndup(p, strcspn(p, "\""));
		}
		free(json);
		if (!ids[i]) {
			fprintf(stderr, PROG ": no session id\n");
			exit(1);
		}
	}
	if (!ids) {
		fprintf(stderr, PROG ": out of memory\n");
		exit(1);
	}
	return ids;
}

/* ---- throughput ----------------------------------------------------------------------- */

struct caller {
	pthread_t thread;
	struct host *h;
	char **sessions; /* this caller's */
	int nsessions;
	int calls;
};

static void *caller_main(void *arg)
{
	struct caller *c = arg;
	for (int i = 0; i < c->calls; i++)
		run_cmd(c->h, c->sessions[i % c->nsessions], throughput_command);
	return NULL;
}

/* CALLS executions by CALLERS threads over the sessions; executions per second. */
static double throughput(struct host *h, char **sessions, int nsessions, int callers, int calls)
{
	struct caller *c = calloc((size_t)callers, sizeof(*c));
	if (!c) {
		fprintf(stderr, PROG ": out of memory\n");
		exit(1);
	}
	int per = nsessions / callers;
	for (int k = 0; k < callers; k++) {
		c[k].h = h;
		c[k].sessions = sessions + k * per;
		c[k].nsessions = per;
		c[k].calls = calls / callers + (k < calls % callers);
	}
	int64_t t0 = bench_now_ns();
	for (int k = 0; k < callers; k++)
		if (pthread_create(&c[k].thread, NULL, caller_main, &c[k]) != 0) {
			fprintf(stderr, PROG ": cannot start a caller thread\n");
			exit(1);
		}
	for (int k = 0; k < callers; k++)
		pthread_join(c[k].thread, NULL);
	double s = (double)(bench_now_ns() - t0) / 1e9;
	free(c);
	return calls / s;
}

/* ---- main ----------------------------------------------------------------------------- */

static void usage(void)
{
	fprintf(stderr, "usage: " PROG " [-b nats|aws] [-n CALLS] [-c CALLERS] [-s SESSIONS] "
	                "[-l LATENCY_CALLS] [-p POLL] [-x COMMAND] AKSANDBOX DIR\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int calls = 400, callers = 8, nsessions = 32, lat = 100, opt;
	double poll = 0.002;
	while ((opt = getopt(argc, argv, "b:n:c:s:l:p:x:")) != -1) {
		switch (opt) {
		case 'b':
			backend = NULL;
			for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
				if (strcmp(optarg, backends[i].name) == 0)
					backend = &backends[i];
			if (!backend)
				usage();
			break;
		case 'n':
			calls = atoi(optarg);
			break;
		case 'c':
			callers = atoi(optarg);
			break;
		case 's':
			nsessions = atoi(optarg);
			break;
		case 'l':
			lat = atoi(optarg);
			break;
		case 'p':
			poll = atof(optarg);
			break;
		case 'x':
			if (strpbrk(optarg, "\"\\"))
				usage(); /* it goes into JSON as it is */
			throughput_command = optarg;
			break;
		default:
			usage();
		}
	}
	if (argc - optind != 2 || calls < 1 || callers < 1 || nsessions < callers || lat < 1 ||
	    !(poll > 0))
		usage();
	nsessions -= nsessions % callers; /* the same number of sessions per caller */
	snprintf(aksandbox, sizeof(aksandbox), "%s", argv[optind]);
	/* one directory per backend: run.sh runs both in the same DIR */
	snprintf(dir, sizeof(dir), "%s/queue-bench-%s", argv[optind + 1], backend->name);
	snprintf(src, sizeof(src), "%s",
	         getenv("AKS_TEST_SRCDIR") ? getenv("AKS_TEST_SRCDIR") : ".");
	if (mkdir(dir, 0700) < 0) {
		fprintf(stderr, PROG ": cannot create %s: %s\n", dir, strerror(errno));
		return 1;
	}
	char owner[32];
	snprintf(owner, sizeof(owner), "%d", (int)getpid());
	setenv("NATS_SERVER_OWNER", owner, 1); /* no nats-server outlives this process */
	if (strcmp(backend->name, "aws") == 0)
		aws_environment();
	if (server(backend->transport_script, "start", backend->transport_sub, transport_url,
	           sizeof(transport_url)) < 0 ||
	    server(backend->store_script, "start", backend->store_sub, store_url,
	           sizeof(store_url)) < 0) {
		fprintf(stderr,
		        PROG ": cannot start the servers of %s (%s, %s: see above; "
		             "contrib/install-deps.sh installs what they need)\n",
		        backend->label, backend->transport_script, backend->store_script);
		cleanup();
		return 1;
	}
	atexit(cleanup);

	char blocks[8192], broker[8400];
	backend_blocks(blocks, sizeof(blocks));
	snprintf(broker, sizeof(broker),
	         "    flavor: queue\n"
	         "    wait_timeout: 60\n"
	         "    wait_poll_interval: %g\n"
	         "%s",
	         poll, blocks);
	write_config("queue", broker);
	write_config("thread", "    flavor: thread\n");

	struct host thread, queue;
	host_open(&thread, "thread");
	host_open(&queue, "queue");
	start_worker();
	char **ts = new_sessions(&thread, nsessions), **qs = new_sessions(&queue, nsessions);
	/* Warm-up outside the figures: every session gets its sandbox (and, under queue, its
	 * inventory record), the pools and connections start. */
	for (int i = 0; i < nsessions; i++) {
		run_true(&thread, ts[i]);
		run_true(&queue, qs[i]);
	}

	printf("Queue broker over %s (%s, %s)\n", backend->label, transport_url, store_url);
	printf("Throughput: run_command %s, %d calls from %d caller threads over %d sessions "
	       "(executions/s)\n",
	       throughput_command, calls, callers, nsessions);
	double base = throughput(&thread, ts, nsessions, callers, calls);
	printf("  %-46s %8.1f\n", "in process (broker: thread)", base);
	double one = 0;
	for (int w = 1; w <= MAX_WORKERS; w *= 2) {
		while (nworkers < w)
			start_worker();
		throughput(&queue, qs, nsessions, callers,
		           callers * 2); /* the new workers warm up */
		double q = throughput(&queue, qs, nsessions, callers, calls);
		char label[96];
		snprintf(label, sizeof(label), "queue, %d worker process%s (%d consumers)", w,
		         w > 1 ? "es" : "", w * CONSUMERS_PER_WORKER);
		if (w == 1)
			one = q;
		printf("  %-46s %8.1f   ratio to thread: %.2fx", label, q, q / base);
		if (w > 1)
			printf(", to 1 worker: %.2fx", q / one);
		printf("\n");
	}

	/* Latency with one worker, as a single agent sees it. */
	stop_workers();
	start_worker();
	int64_t *tq = calloc((size_t)lat, sizeof(int64_t)),
	        *tt = calloc((size_t)lat, sizeof(int64_t));
	if (!tq || !tt) {
		fprintf(stderr, PROG ": out of memory\n");
		return 1;
	}
	for (int i = 0; i < 5; i++)
		run_true(&queue, qs[0]);
	for (int i = 0; i < lat; i++) {
		if (i % 2) {
			tq[i] = run_true(&queue, qs[0]);
			tt[i] = run_true(&thread, ts[0]);
		} else {
			tt[i] = run_true(&thread, ts[0]);
			tq[i] = run_true(&queue, qs[0]);
		}
	}
	double mq = bench_median_ms(tq, (size_t)lat), mt = bench_median_ms(tt, (size_t)lat);
	printf("Latency: one caller, sequential, %d calls each, interleaved (median, p90 in ms)\n",
	       lat);
	printf("  %-46s %8.3f %8.3f\n", "in process (broker: thread)", mt,
	       bench_percentile_ms(tt, (size_t)lat, 0.9));
	printf("  %-46s %8.3f %8.3f\n", "queue, 1 worker process", mq,
	       bench_percentile_ms(tq, (size_t)lat, 0.9));
	printf("  added per call: %.3f ms (ratio %.2fx; the agent polls the store every %g ms)\n",
	       mq - mt, mq / mt, poll * 1000.0);
	free(tq);
	free(tt);

	for (int i = 0; i < nsessions; i++) {
		free(ts[i]);
		free(qs[i]);
	}
	free(ts);
	free(qs);
	host_close(&queue);
	host_close(&thread);
	cleanup();
	char line[4200];
	snprintf(line, sizeof(line), "rm -rf '%s'", dir);
	return system(line) == 0 ? 0 : 1;
}
