/*
 * tests/integration/test_nats_transport.c - the nats transport plugin against
 * a real nats-server (JetStream) started by the test itself through
 * tests/integration/nats-server.sh. A missing nats-server fails the run.
 *
 * The plugin is loaded from the build tree through the core loader and
 * driven through its aks_transport_ops with the host's services table, as the
 * broker will. Several tests use child processes (this program re-executed
 * with --child ...): one holds a message and is SIGKILLed, others are the
 * consumers of the cross-process FIFO test.
 *
 * Every test uses its own streams (names derived from the test), so they are
 * independent on the one shared server; the restart test runs its own.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <aksandbox/aksandbox.h>
#include <aksandbox/transport.h>

#include "core/plugin/host_api.h"
#include "plugins/nats/nats_codec.h"

extern char **environ;

static char g_dir[128];     /* the shared server's directory */
static char g_url[128];     /* its URL */
static char g_script[1024]; /* nats-server.sh */
static char g_self[1024];   /* this program, for children */

/* ---- helpers ------------------------------------------------------------------- */

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const aks_plugin *plugin(void)
{
	const aks_plugin *p = NULL;
	aks_error *err = NULL;
	if (aks_plugin_load("nats", AKS_PLUGIN_TRANSPORT, &p, &err) != AKS_OK)
		fail_msg("loading nats: %s", aks_error_message(err));
	return p;
}

static const aks_transport_ops *ops(void)
{
	return aks_plugin_get_descriptor(plugin())->ops;
}

/* Runs nats-server.sh CMD DIR [PORT]; for start, the URL goes to url. */
static int server_cmd(const char *cmd, const char *dir, const char *port, char *url, size_t size)
{
	char line[2048];
	snprintf(line, sizeof(line), "'%s' %s '%s' %s", g_script, cmd, dir, port ? port : "");
	FILE *f = popen(line, "r");
	if (!f)
		return -1;
	char buf[256] = "";
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	int status = pclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	if (url)
		snprintf(url, size, "%s", buf);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* A bare config block for test `name` (its own streams and subjects), with
 * `extra` YAML lines appended. */
static char *write_block(const char *url, const char *name, const char *extra)
{
	static int counter;
	char *path = NULL;
	if (asprintf(&path, "%s/%s-%d.yaml", g_dir, name, counter++) < 0)
		fail();
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f,
	        "url: %s\n"
	        "input_stream: %s_IN\n"
	        "input_subject_prefix: %s.req\n"
	        "output_stream: %s_OUT\n"
	        "output_subject_prefix: %s.out\n"
	        "%s",
	        url, name, name, name, name, extra ? extra : "");
	assert_int_equal(fclose(f), 0);
	return path;
}

static int open_t(const char *yaml_path, aks_transport_impl **out, aks_error **err)
{
	aks_config *cfg = NULL;
	int rc = aks_config_load_block(plugin(), yaml_path, &cfg, err);
	if (rc != AKS_OK)
		return rc;
	rc = ops()->init(aks__host_api(), cfg, out, err);
	/* The plugin copies what it keeps: free the block now to prove it. */
	aks_config_free(cfg);
	return rc;
}

static aks_transport_impl *must_open(const char *url, const char *name, const char *extra)
{
	char *path = write_block(url, name, extra);
	aks_transport_impl *t = NULL;
	aks_error *err = NULL;
	if (open_t(path, &t, &err) != AKS_OK)
		fail_msg("init %s: %s", name, aks_error_message(err));
	free(path);
	return t;
}

static aks_consumer *must_consumer(aks_transport_impl *t, const char *queue)
{
	aks_consumer *c = NULL;
	aks_error *err = NULL;
	if (ops()->consumer_open(t, queue, &c, &err) != AKS_OK)
		fail_msg("consumer_open: %s", aks_error_message(err));
	return c;
}

static void must_send(aks_transport_impl *t, const char *queue, const char *body, size_t len,
                      const char *const *attrs, const char *group, const char *dedup)
{
	static const char *const none[] = {NULL};
	aks_message m = {AKS_MESSAGE_VERSION,
	                 sizeof(aks_message),
	                 body,
	                 len,
	                 attrs ? attrs : none,
	                 group,
	                 dedup,
	                 0,
	                 NULL};
	aks_call call;
	aks_call_init(&call, 10, NULL, NULL, NULL);
	aks_error *err = NULL;
	if (ops()->send(t, queue, &m, &call, &err) != AKS_OK)
		fail_msg("send: %s", aks_error_message(err));
}

static void send_str(aks_transport_impl *t, const char *body, const char *group, const char *dedup)
{
	must_send(t, AKS_QUEUE_INPUT, body, strlen(body), NULL, group, dedup);
}

/* Fetches one message, waiting up to wait_ms; NULL when none came. */
static aks_message *fetch1(aks_consumer *c, int64_t wait_ms)
{
	aks_message *out[1] = {NULL};
	size_t n = 99;
	aks_error *err = NULL;
	if (ops()->fetch(c, out, 1, &n, wait_ms, NULL, &err) != AKS_OK)
		fail_msg("fetch: %s", aks_error_message(err));
	assert_true(n <= 1);
	return n ? out[0] : NULL;
}

static void must_ack(aks_consumer *c, aks_message *m)
{
	aks_error *err = NULL;
	if (ops()->ack(c, m, &err) != AKS_OK)
		fail_msg("ack: %s", aks_error_message(err));
}

static bool body_is(const aks_message *m, const char *s)
{
	return m->body_len == strlen(s) && memcmp(m->body, s, m->body_len) == 0;
}

/* Two groups that hash to different partitions (and one for each given). */
static void distinct_groups(unsigned partitions, const char *prefix, char *a, char *b, size_t size)
{
	snprintf(a, size, "%s-a", prefix);
	for (int i = 0;; i++) {
		snprintf(b, size, "%s-b%d", prefix, i);
		if (aks_nats_partition(a, partitions) != aks_nats_partition(b, partitions))
			return;
	}
}

static pid_t spawn_child(char *const argv[], int *stdout_fd)
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	int pipefd[2] = {-1, -1};
	if (stdout_fd) {
		assert_int_equal(pipe(pipefd), 0);
		posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
		posix_spawn_file_actions_addclose(&fa, pipefd[0]);
	}
	pid_t pid = -1;
	assert_int_equal(posix_spawn(&pid, g_self, &fa, NULL, argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	if (stdout_fd) {
		close(pipefd[1]);
		*stdout_fd = pipefd[0];
	}
	return pid;
}

/* ---- children ------------------------------------------------------------------- */

/* --child hold CONFIG: takes one message, reports it on stdout, never settles
 * it, and waits to be killed. */
static int child_hold(const char *config)
{
	aks_transport_impl *t = NULL;
	aks_error *err = NULL;
	if (open_t(config, &t, &err) != AKS_OK) {
		fprintf(stderr, "child: %s\n", aks_error_message(err));
		return 1;
	}
	aks_consumer *c = NULL;
	if (ops()->consumer_open(t, AKS_QUEUE_INPUT, &c, &err) != AKS_OK)
		return 1;
	aks_message *out[1];
	size_t n = 0;
	while (n == 0)
		if (ops()->fetch(c, out, 1, &n, 1000, NULL, &err) != AKS_OK)
			return 1;
	printf("got %.*s %u\n", (int)out[0]->body_len, out[0]->body, out[0]->receive_count);
	fflush(stdout);
	for (;;)
		pause();
}

/* --child fifo CONFIG LOG STOPFILE THREADS: consumer threads that process
 * messages "<group> <seq>" with a short pause, logging "S group seq pid" before
 * and "E group seq pid" after each (O_APPEND: one ordered record of the whole
 * fleet), until STOPFILE exists. */
struct fifo_ctx {
	aks_transport_impl *t;
	int log_fd;
	const char *stop;
	int failed;
};

static void *fifo_thread(void *arg)
{
	struct fifo_ctx *x = arg;
	aks_error *err = NULL;
	aks_consumer *c = NULL;
	if (ops()->consumer_open(x->t, AKS_QUEUE_INPUT, &c, &err) != AKS_OK) {
		x->failed = 1;
		return NULL;
	}
	while (access(x->stop, F_OK) != 0) {
		aks_message *out[1];
		size_t n = 0;
		if (ops()->fetch(c, out, 1, &n, 200, NULL, &err) != AKS_OK) {
			fprintf(stderr, "child fetch: %s\n", aks_error_message(err));
			x->failed = 1;
			break;
		}
		if (!n)
			continue;
		char line[256];
		int len = snprintf(line, sizeof(line), "S %.*s %d\n", (int)out[0]->body_len,
		                   out[0]->body, (int)getpid());
		if (write(x->log_fd, line, (size_t)len) != len)
			x->failed = 1;
		usleep(3000 + (unsigned)(rand() % 4000));
		line[0] = 'E';
		if (write(x->log_fd, line, (size_t)len) != len)
			x->failed = 1;
		if (ops()->ack(c, out[0], &err) != AKS_OK)
			x->failed = 1;
	}
	ops()->consumer_close(c);
	return NULL;
}

static int child_fifo(const char *config, const char *log, const char *stop, int threads)
{
	struct fifo_ctx x = {NULL, -1, stop, 0};
	aks_error *err = NULL;
	if (open_t(config, &x.t, &err) != AKS_OK) {
		fprintf(stderr, "child: %s\n", aks_error_message(err));
		return 1;
	}
	x.log_fd = open(log, O_WRONLY | O_APPEND | O_CREAT, 0600);
	pthread_t th[16];
	for (int i = 0; i < threads && i < 16; i++)
		pthread_create(&th[i], NULL, fifo_thread, &x);
	for (int i = 0; i < threads && i < 16; i++)
		pthread_join(th[i], NULL);
	close(x.log_fd);
	ops()->fini(x.t);
	return x.failed;
}

/* ---- tests ------------------------------------------------------------------------ */

/* The core loader accepts the plugin as a transport (every mandatory slot),
 * and the schema carries the original's keys and defaults. */
static void test_loader_accepts(void **state)
{
	(void)state;
	const aks_plugin *p = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_plugin_load("nats", AKS_PLUGIN_TRANSPORT, &p, &err), AKS_OK);
	const aks_plugin_descriptor *d = aks_plugin_get_descriptor(p);
	assert_string_equal(d->name, "nats");
	assert_int_equal(d->kind, AKS_PLUGIN_TRANSPORT);
	const aks_transport_ops *o = d->ops;
	assert_non_null(o->init);
	assert_non_null(o->dead_letter);
	assert_non_null(o->fini);
	const char *want[][2] = {{"url", "nats://localhost:4222"},
	                         {"input_stream", "AGENT_REQUESTS"},
	                         {"input_subject_prefix", "chat.req"},
	                         {"output_stream", "AGENT_REPLIES"},
	                         {"output_subject_prefix", "chat.out"},
	                         {"partitions", "32"},
	                         {"ack_wait", "300"},
	                         {"retry_backoff", "2.0"},
	                         {"duplicate_window", "300"},
	                         {"max_age", "86400"},
	                         {"request_timeout", "10"},
	                         {"auto_provision", "false"},
	                         {"token_env", NULL},
	                         {"user", NULL},
	                         {"password_env", NULL},
	                         {"doorbell", "true"}};
	size_t n = 0;
	for (const aks_config_key *k = d->config_keys; k->name; k++, n++) {
		assert_true(n < sizeof(want) / sizeof(want[0]));
		assert_string_equal(k->name, want[n][0]);
		if (want[n][1])
			assert_string_equal(k->default_value, want[n][1]);
		else
			assert_null(k->default_value); /* not set unless given */
		assert_false(k->required);
	}
	assert_int_equal(n, sizeof(want) / sizeof(want[0]));
	/* Not a provider. */
	assert_int_equal(aks_plugin_load("nats", AKS_PLUGIN_PROVIDER, &p, &err), AKS_EPLUGIN);
	aks_error_free(err);
}

/* Header escaping keeps distinct keys distinct under case folding, and the
 * partition hash is FNV-1a (stable across processes and builds). */
static void test_codec(void **state)
{
	(void)state;
	char *a = aks_nats_escape_key("Request_ID"), *b = aks_nats_escape_key("request_id");
	assert_string_not_equal(a, b);
	for (char *p = a; *p; p++)
		assert_false(*p >= 'A' && *p <= 'Z');
	char *back = aks_nats_unescape(a);
	assert_string_equal(back, "Request_ID");
	free(a), free(b), free(back);
	char *v = aks_nats_escape_value("x\r\n%y\x01\xc8");
	assert_null(strpbrk(v, "\r\n\x01"));
	back = aks_nats_unescape_value(v);
	assert_string_equal(back, "x\r\n%y\x01\xc8");
	free(v), free(back);
	v = aks_nats_escape_value("");
	assert_string_equal(v, "="); /* never an empty header value */
	back = aks_nats_unescape_value(v);
	assert_string_equal(back, "");
	free(v), free(back);
	assert_null(aks_nats_unescape_value("no-marker"));
	assert_null(aks_nats_unescape("bad%zz"));
	assert_null(aks_nats_unescape("nul%00"));
	assert_int_equal(aks_nats_fnv1a(""), 2166136261u);
	assert_int_equal(aks_nats_fnv1a("a"), 0xe40c292cu);
	assert_int_equal(aks_nats_partition("a", 32), 0xe40c292cu % 32);
}

/* send, fetch, ack: body (binary), attributes, group and dedup id intact;
 * receive_count 1; an acked message never comes back; queues are apart. */
static void test_round_trip(void **state)
{
	(void)state;
	aks_transport_impl *t = must_open(g_url, "RT", "auto_provision: true\npartitions: 4\n");
	aks_consumer *in = must_consumer(t, AKS_QUEUE_INPUT);
	aks_consumer *out = must_consumer(t, AKS_QUEUE_OUTPUT);
	static const char body[] = {0x00, (char)0xFF, (char)0x80, 0x0A, 0x0D, (char)0xC8};
	const char *attrs[] = {"request_id", "task-1", "Request_ID", "other", "odd key: é",
	                       "va\r\nl%ue", "empty",  "",           NULL};
	must_send(t, AKS_QUEUE_INPUT, body, sizeof(body), attrs, "sess-1", "task-1");
	must_send(t, AKS_QUEUE_OUTPUT, "{\"done\":1}", 10, NULL, NULL, NULL);

	aks_message *m = fetch1(in, 3000);
	assert_non_null(m);
	assert_int_equal(m->body_len, sizeof(body));
	assert_memory_equal(m->body, body, sizeof(body));
	assert_string_equal(m->group_id, "sess-1");
	assert_string_equal(m->dedup_id, "task-1");
	assert_int_equal(m->receive_count, 1);
	assert_non_null(m->message_id);
	assert_string_equal(m->message_id, "1");
	/* Sorted by key: "Request_ID" < "empty" < "odd key: é" < "request_id". */
	const char *want[] = {"Request_ID", "other",      "empty",  "",  "odd key: é",
	                      "va\r\nl%ue", "request_id", "task-1", NULL};
	for (size_t i = 0; want[i]; i++) {
		assert_non_null(m->attributes[i]);
		assert_string_equal(m->attributes[i], want[i]);
	}
	assert_null(m->attributes[8]);
	must_ack(in, m);
	assert_null(fetch1(in, 300)); /* the input queue held one message */

	m = fetch1(out, 3000);
	assert_non_null(m);
	assert_true(body_is(m, "{\"done\":1}"));
	assert_null(m->group_id);
	assert_null(m->dedup_id);
	assert_null(m->attributes[0]);
	must_ack(out, m);
	/* Acked messages are gone for good, past ack_wait too (here 300 s: check
	 * the settle reached the server by asking a fresh consumer). */
	aks_consumer *again = must_consumer(t, AKS_QUEUE_INPUT);
	assert_null(fetch1(again, 300));
	/* Settling a message twice, or a foreign pointer, is refused. */
	aks_error *err = NULL;
	assert_int_equal(ops()->ack(in, m, &err), AKS_EINVAL);
	aks_error_free(err);
	ops()->consumer_close(again);
	ops()->consumer_close(in);
	ops()->consumer_close(out);
	ops()->fini(t);
}

/* The same dedup_id twice: accepted twice, delivered once (the first). */
static void test_dedup(void **state)
{
	(void)state;
	aks_transport_impl *t = must_open(g_url, "DD", "auto_provision: true\npartitions: 4\n");
	aks_consumer *c = must_consumer(t, AKS_QUEUE_INPUT);
	send_str(t, "first", "g", "task-42");
	send_str(t, "second", "g", "task-42");
	send_str(t, "other", "g", "task-43");
	aks_message *m = fetch1(c, 3000);
	assert_non_null(m);
	assert_true(body_is(m, "first"));
	must_ack(c, m);
	m = fetch1(c, 3000);
	assert_non_null(m);
	assert_true(body_is(m, "other"));
	must_ack(c, m);
	assert_null(fetch1(c, 500));
	ops()->consumer_close(c);
	ops()->fini(t);
}

/* nack: redelivered after about the delay, with receive_count 2; a delay of
 * 0 means retry_backoff. */
static void test_nack_redelivery(void **state)
{
	(void)state;
	/* ack_wait 3: a redelivery lost into an expiring pull request (docs/plugins/nats.md,
	 * "Delivery counts") comes back within the waits below instead of after 300 s. */
	aks_transport_impl *t = must_open(
	    g_url, "NK", "auto_provision: true\npartitions: 4\nretry_backoff: 1.0\nack_wait: 3\n");
	aks_consumer *c = must_consumer(t, AKS_QUEUE_INPUT);
	send_str(t, "again", "g1", "n1");
	aks_message *m = fetch1(c, 3000);
	assert_non_null(m);
	assert_int_equal(m->receive_count, 1);
	aks_error *err = NULL;
	int64_t t0 = now_ms();
	assert_int_equal(ops()->nack(c, m, 0.3, &err), AKS_OK);
	m = fetch1(c, 8000);
	int64_t dt = now_ms() - t0;
	assert_non_null(m);
	assert_true(body_is(m, "again"));
	uint32_t count = m->receive_count;
	if (count < 2 || count > 3)
		fail_msg("receive_count %u after one nack (want 2, 3 after a lost delivery)",
		         count);
	assert_true(dt >= 250);
	/* delay 0: retry_backoff (1 s). */
	t0 = now_ms();
	assert_int_equal(ops()->nack(c, m, 0, &err), AKS_OK);
	assert_null(fetch1(c, 600));
	m = fetch1(c, 8000);
	assert_non_null(m);
	if (m->receive_count <= count || m->receive_count > count + 2)
		fail_msg("receive_count %u after a second nack (was %u)", m->receive_count, count);
	assert_true(now_ms() - t0 >= 900);
	must_ack(c, m);
	ops()->consumer_close(c);
	ops()->fini(t);
}

/* A consumer process SIGKILLed while it holds a message: nothing else gets
 * the group's message while the ack wait runs; then it is redelivered, with
 * receive_count 2. */
static void test_redelivery_after_kill(void **state)
{
	(void)state;
	const char *extra = "auto_provision: true\npartitions: 4\nack_wait: 2\n";
	char *path = write_block(g_url, "KL", extra);
	aks_transport_impl *t = must_open(g_url, "KL", extra);
	aks_consumer *c = must_consumer(t, AKS_QUEUE_INPUT);
	send_str(t, "held", "sess", "k1");
	char *argv[] = {g_self, "--child", "hold", path, NULL};
	int fd = -1;
	pid_t pid = spawn_child(argv, &fd);
	FILE *f = fdopen(fd, "r");
	char line[128] = "";
	assert_non_null(fgets(line, sizeof(line), f));
	assert_string_equal(line, "got held 1\n");
	/* In flight in the child: not deliverable here. */
	assert_null(fetch1(c, 500));
	int64_t t0 = now_ms();
	assert_int_equal(kill(pid, SIGKILL), 0);
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	fclose(f);
	aks_message *m = fetch1(c, 6000);
	assert_non_null(m);
	assert_true(body_is(m, "held"));
	/* At least the child's and this one. nats-server 2.9 may deliver a redelivery into a
	 * pull request that expired that very instant; it is then lost and counted, and comes
	 * back after another ack wait (docs/plugins/nats.md, "Delivery counts"). */
	if (m->receive_count < 2 || m->receive_count > 4)
		fail_msg("receive_count %u after one kill (want 2, or a little more)",
		         m->receive_count);
	/* The child held it for 0.5 s before the kill; redelivery waits out the
	 * rest of the 2 s ack wait. */
	assert_true(now_ms() - t0 >= 1000);
	must_ack(c, m);
	ops()->consumer_close(c);
	ops()->fini(t);
	unlink(path);
	free(path);
}

/* dead_letter: never redelivered, not even after the ack wait. */
static void test_dead_letter(void **state)
{
	(void)state;
	aks_transport_impl *t =
	    must_open(g_url, "DL", "auto_provision: true\npartitions: 4\nack_wait: 1\n");
	aks_consumer *c = must_consumer(t, AKS_QUEUE_INPUT);
	send_str(t, "poison", "g", "d1");
	send_str(t, "next", "g", "d2");
	aks_message *m = fetch1(c, 3000);
	assert_non_null(m);
	assert_true(body_is(m, "poison"));
	aks_error *err = NULL;
	assert_int_equal(ops()->dead_letter(c, m, &err), AKS_OK);
	/* The group moves on to its next message... */
	m = fetch1(c, 3000);
	assert_non_null(m);
	assert_true(body_is(m, "next"));
	must_ack(c, m);
	/* ...and the poison never returns. */
	assert_null(fetch1(c, 2500));
	ops()->consumer_close(c);
	ops()->fini(t);
}

/* in_progress keeps a long execution's message from redelivery: with ack_wait 1 s, a message
 * held for 3 s while in_progress is sent every 0.4 s is not delivered to a second consumer;
 * without it, it is (so the check can fail). */
static void test_in_progress(void **state)
{
	(void)state;
	aks_transport_impl *t =
	    must_open(g_url, "IP", "auto_provision: true\npartitions: 1\nack_wait: 1\n");
	aks_consumer *c = must_consumer(t, AKS_QUEUE_INPUT);
	aks_consumer *other = must_consumer(t, AKS_QUEUE_INPUT);
	send_str(t, "long", "g", "ip1");
	aks_message *m = fetch1(c, 3000);
	assert_non_null(m);
	assert_non_null(ops()->in_progress);
	for (int i = 0; i < 8; i++) {
		aks_error *err = NULL;
		assert_int_equal(ops()->in_progress(c, m, &err), AKS_OK);
		assert_null(fetch1(other, 400)); /* not redelivered while worked on */
	}
	must_ack(c, m);
	/* the same hold without in_progress: redelivered to the other consumer */
	send_str(t, "slow", "g", "ip2");
	m = fetch1(c, 3000);
	assert_non_null(m);
	aks_message *again = fetch1(other, 4000);
	assert_non_null(again);
	assert_true(body_is(again, "slow"));
	/* At least the second delivery: on a loaded machine a pull's answer can come after
	 * its inbox was given up (pull_one), and that delivery is redelivered in turn. */
	assert_true(again->receive_count >= 2);
	must_ack(other, again);
	ops()->consumer_close(c); /* m is stale: its copy was settled by the other */
	ops()->consumer_close(other);
	ops()->fini(t);
}

/* One group: one message in flight, across consumers; FIFO. Two groups in
 * different partitions: both in flight at once. Closing a consumer that
 * holds a message leaves it for redelivery after ack_wait. */
static void group_serial_and_parallel(const char *name, const char *extra)
{
	aks_transport_impl *t = must_open(g_url, name, extra);
	char a[64], b[64];
	distinct_groups(8, "sess", a, b, sizeof(a));
	aks_consumer *c1 = must_consumer(t, AKS_QUEUE_INPUT);
	aks_consumer *c2 = must_consumer(t, AKS_QUEUE_INPUT);
	aks_consumer *c3 = must_consumer(t, AKS_QUEUE_INPUT);
	send_str(t, "a1", a, "a1");
	send_str(t, "a2", a, "a2");
	aks_message *m1 = fetch1(c1, 3000);
	assert_non_null(m1);
	assert_true(body_is(m1, "a1"));
	/* a2 waits while a1 is in flight, whoever asks. */
	assert_null(fetch1(c2, 500));
	assert_null(fetch1(c1, 200));
	send_str(t, "b1", b, "b1");
	aks_message *m2 = fetch1(c2, 3000);
	assert_non_null(m2);
	assert_true(body_is(m2, "b1")); /* in flight together with a1 */
	assert_null(fetch1(c3, 300));
	must_ack(c1, m1);
	aks_message *m3 = fetch1(c3, 3000);
	assert_non_null(m3);
	assert_true(body_is(m3, "a2"));
	must_ack(c2, m2);
	/* c3 closes with a2 unsettled: redelivered after ack_wait (2 s). */
	int64_t t0 = now_ms();
	ops()->consumer_close(c3);
	assert_null(fetch1(c1, 1000));
	m3 = fetch1(c1, 4000);
	assert_non_null(m3);
	assert_true(body_is(m3, "a2"));
	/* At least the second delivery (as in the test above: on a loaded machine the empty
	 * fetch's pull can be answered after it gave up, a delivery redelivered in turn). */
	assert_true(m3->receive_count >= 2);
	assert_true(now_ms() - t0 >= 1500);
	must_ack(c1, m3);
	ops()->consumer_close(c1);
	ops()->consumer_close(c2);
	ops()->fini(t);
}

static void test_group_serial_and_parallel(void **state)
{
	(void)state;
	group_serial_and_parallel("GP", "auto_provision: true\npartitions: 8\nack_wait: 2\n");
}

/* The same without the doorbell: the bell is only a hint. */
static void test_group_serial_no_doorbell(void **state)
{
	(void)state;
	group_serial_and_parallel(
	    "GN", "auto_provision: true\npartitions: 8\nack_wait: 2\ndoorbell: false\n");
}

/* Many groups, several consumer processes with several threads each: every
 * message processed exactly once, each group's in order and never two of a
 * group at once, and different groups at the same time. */
#define FIFO_GROUPS    16
#define FIFO_PER_GROUP 10
#define FIFO_PROCS     3
#define FIFO_THREADS   "3"

static void test_fifo_across_processes(void **state)
{
	(void)state;
	/* ack_wait 10: far above a message's few ms of work, yet a delivery lost into an
	 * expiring pull request (docs/plugins/nats.md) comes back well within the 60 s. */
	const char *extra = "auto_provision: true\npartitions: 8\nack_wait: 10\n";
	char *path = write_block(g_url, "FF", extra);
	aks_transport_impl *t = must_open(g_url, "FF", extra);
	/* Provision the durables before the children race to. */
	aks_consumer *c = must_consumer(t, AKS_QUEUE_INPUT);
	ops()->consumer_close(c);
	char log[512], stop[512];
	snprintf(log, sizeof(log), "%s/fifo.log", g_dir);
	snprintf(stop, sizeof(stop), "%s/fifo.stop", g_dir);
	unlink(log);
	unlink(stop);
	/* Interleave the groups' messages, as agents would. */
	for (int k = 0; k < FIFO_PER_GROUP; k++)
		for (int g = 0; g < FIFO_GROUPS; g++) {
			char body[64], group[32], dedup[32];
			snprintf(group, sizeof(group), "g%02d", g);
			snprintf(body, sizeof(body), "g%02d %d", g, k);
			snprintf(dedup, sizeof(dedup), "g%02d-%d", g, k);
			send_str(t, body, group, dedup);
		}
	pid_t pids[FIFO_PROCS];
	for (int i = 0; i < FIFO_PROCS; i++) {
		char *argv[] = {g_self, "--child", "fifo", path, log, stop, FIFO_THREADS, NULL};
		pids[i] = spawn_child(argv, NULL);
	}
	/* Wait until every message was processed (E lines), at most 60 s. */
	int total = FIFO_GROUPS * FIFO_PER_GROUP, ends = 0;
	for (int64_t t0 = now_ms(); now_ms() - t0 < 60000;) {
		FILE *f = fopen(log, "r");
		ends = 0;
		char line[128];
		while (f && fgets(line, sizeof(line), f))
			ends += line[0] == 'E';
		if (f)
			fclose(f);
		if (ends >= total)
			break;
		usleep(100000);
	}
	usleep(300000); /* a duplicate would show up now */
	FILE *sf = fopen(stop, "w");
	assert_non_null(sf);
	fclose(sf);
	for (int i = 0; i < FIFO_PROCS; i++) {
		int status = 0;
		assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	assert_int_equal(ends, total);

	/* Replay the log. */
	int next[FIFO_GROUPS] = {0};
	bool open_[FIFO_GROUPS] = {false};
	int in_flight = 0, max_in_flight = 0, lines = 0;
	pid_t seen[FIFO_PROCS] = {0};
	int nseen = 0;
	FILE *f = fopen(log, "r");
	assert_non_null(f);
	char kind;
	int g, k, pid;
	while (fscanf(f, " %c g%d %d %d", &kind, &g, &k, &pid) == 4) {
		lines++;
		assert_true(g >= 0 && g < FIFO_GROUPS);
		if (kind == 'S') {
			if (open_[g])
				fail_msg("group %d: message %d started while another was in flight",
				         g, k);
			if (k != next[g])
				fail_msg("group %d: message %d started, expected %d (FIFO)", g, k,
				         next[g]);
			open_[g] = true;
			if (++in_flight > max_in_flight)
				max_in_flight = in_flight;
			bool known = false;
			for (int i = 0; i < nseen; i++)
				known |= seen[i] == pid;
			if (!known && nseen < FIFO_PROCS)
				seen[nseen++] = pid;
		} else {
			assert_int_equal(kind, 'E');
			assert_true(open_[g]);
			assert_int_equal(k, next[g]);
			open_[g] = false;
			next[g]++;
			in_flight--;
		}
	}
	fclose(f);
	assert_int_equal(lines, 2 * total);
	for (int i = 0; i < FIFO_GROUPS; i++)
		assert_int_equal(next[i], FIFO_PER_GROUP);
	print_message("fifo: %d messages, %d groups, %d processes took part, at most %d groups "
	              "in flight at once\n",
	              total, FIFO_GROUPS, nseen, max_in_flight);
	assert_true(max_in_flight >= 2); /* groups ran in parallel */
	assert_true(nseen >= 2);         /* across processes */
	ops()->fini(t);
	unlink(path);
	free(path);
}

/* The shared server's pid. */
static pid_t server_pid(void)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/pid", g_dir);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	int pid = 0;
	assert_int_equal(fscanf(f, "%d", &pid), 1);
	fclose(f);
	return (pid_t)pid;
}

/* SIGSTOPs the server and waits until it really is stopped (state T). */
static void freeze_server(pid_t pid)
{
	assert_int_equal(kill(pid, SIGSTOP), 0);
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	for (int i = 0; i < 1000; i++) {
		FILE *f = fopen(path, "r");
		assert_non_null(f);
		size_t len = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[len] = '\0';
		const char *close_paren = strrchr(buf, ')');
		if (close_paren && close_paren[1] == ' ' && close_paren[2] == 'T')
			return;
		usleep(1000);
	}
	fail_msg("nats-server %d did not stop", (int)pid);
}

/* One try of the batch: two groups' messages and a third behind the first. Whether one
 * fetch(max 5) gathered both heads (it never hands out "three" before "one" is acked). */
static bool batch_once(const char *stream)
{
	aks_transport_impl *t = must_open(g_url, stream, "auto_provision: true\npartitions: 16\n");
	aks_consumer *c = must_consumer(t, AKS_QUEUE_INPUT);
	char a[64], b[64];
	distinct_groups(16, "bf", a, b, sizeof(a));
	send_str(t, "one", a, "b1");
	send_str(t, "two", b, "b2");
	send_str(t, "three", a, "b3"); /* behind "one": not in this batch */
	aks_message *out[5] = {NULL};
	size_t n = 0;
	aks_error *err = NULL;
	assert_int_equal(ops()->fetch(c, out, 5, &n, 3000, NULL, &err), AKS_OK);
	assert_in_range(n, 1, 2);
	bool gathered = n == 2;
	if (gathered)
		assert_true((body_is(out[0], "one") && body_is(out[1], "two")) ||
		            (body_is(out[0], "two") && body_is(out[1], "one")));
	else
		assert_true(body_is(out[0], "one") || body_is(out[0], "two"));
	bool one_acked = false;
	for (size_t i = 0; i < n; i++) {
		one_acked = one_acked || body_is(out[i], "one");
		must_ack(c, out[i]);
	}
	/* the rest, one at a time: "three" only after "one" */
	for (size_t left = 3 - n; left > 0; left--) {
		aks_message *m = fetch1(c, 3000);
		assert_non_null(m);
		if (body_is(m, "three"))
			assert_true(one_acked);
		one_acked = one_acked || body_is(m, "one");
		must_ack(c, m);
	}
	ops()->consumer_close(c);
	ops()->fini(t);
	return gathered;
}

/* fetch(max > 1) gathers from several partitions in one call. A partition whose answer is
 * late (a loaded server: past the pull's expiry and grace) is left for the next call, so
 * one try may gather one message; of three tries one must gather both. */
static void test_batch_fetch(void **state)
{
	(void)state;
	bool gathered = false;
	for (int i = 0; i < 3 && !gathered; i++) {
		char stream[16];
		snprintf(stream, sizeof(stream), "BF%d", i);
		if (!(gathered = batch_once(stream)))
			print_message("batch fetch: try %d gathered one message (a late answer)\n",
			              i + 1);
	}
	assert_true(gathered);
}

struct canceller {
	aks_cancel *cancel;
	int delay_ms;
};

static void *cancel_later(void *arg)
{
	struct canceller *x = arg;
	usleep((useconds_t)x->delay_ms * 1000);
	aks_cancel_trigger(x->cancel);
	return NULL;
}

/* A waiting fetch returns soon after its call is cancelled; a send whose
 * deadline passes while the server does not answer is AKS_ETIMEOUT. */
static void test_cancel_and_deadline(void **state)
{
	(void)state;
	aks_transport_impl *t = must_open(g_url, "CD", "auto_provision: true\npartitions: 2\n");
	aks_consumer *c = must_consumer(t, AKS_QUEUE_INPUT);
	aks_cancel *cancel = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_cancel_new(&cancel, &err), AKS_OK);
	aks_call call;
	aks_call_init(&call, 0, NULL, NULL, cancel);
	struct canceller x = {cancel, 300};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, cancel_later, &x), 0);
	aks_message *out[1];
	size_t n = 7;
	int64_t t0 = now_ms();
	assert_int_equal(ops()->fetch(c, out, 1, &n, 10000, &call, &err), AKS_OK);
	int64_t dt = now_ms() - t0;
	pthread_join(th, NULL);
	assert_int_equal(n, 0);
	assert_true(dt >= 250 && dt < 2000);
	aks_cancel_free(cancel);

	/* Freeze the server: the publish acknowledgement cannot come. */
	pid_t pid = server_pid();
	freeze_server(pid);
	static const char *const none[] = {NULL};
	aks_message msg = {
	    AKS_MESSAGE_VERSION, sizeof(aks_message), "x", 1, none, "g", "cd1", 0, NULL};
	aks_call_init(&call, 0.4, NULL, NULL, NULL);
	t0 = now_ms();
	int rc = ops()->send(t, AKS_QUEUE_INPUT, &msg, &call, &err);
	dt = now_ms() - t0;
	kill(pid, SIGCONT);
	assert_int_equal(rc, AKS_ETIMEOUT);
	assert_true(dt >= 300 && dt < 2000);
	aks_error_free(err);
	err = NULL;
	/* The publish was buffered and may still land: resending with the same
	 * dedup id delivers it exactly once. */
	send_str(t, "x", "g", "cd1");
	aks_message *m = fetch1(c, 3000);
	assert_non_null(m);
	must_ack(c, m);
	assert_null(fetch1(c, 300));
	ops()->consumer_close(c);
	ops()->fini(t);
}

/* A server that stops answering while the connection stays up (frozen): a fetch still ends
 * within about its own wait, never request_timeout (10 s by default). Its stream-info hint
 * waits no longer than the fetch would, each pull only its grace: a worker stopping then is
 * not held up ten seconds per request. */
static void test_fetch_bounded_by_wait(void **state)
{
	(void)state;
	aks_transport_impl *t = must_open(g_url, "FW", "auto_provision: true\npartitions: 2\n");
	aks_consumer *c = must_consumer(t, AKS_QUEUE_INPUT);
	assert_null(fetch1(c, 100)); /* connected, the stream there */
	pid_t pid = server_pid();
	freeze_server(pid);
	int64_t t0 = now_ms();
	aks_message *m = fetch1(c, 1000);
	int64_t dt = now_ms() - t0;
	kill(pid, SIGCONT);
	assert_null(m);
	if (dt >= 4000)
		fail_msg("a fetch of 1 s took %lld ms with the server frozen", (long long)dt);
	ops()->consumer_close(c);
	ops()->fini(t);
}

static void *cont_later(void *arg)
{
	usleep(1600 * 1000);
	kill(*(pid_t *)arg, SIGCONT);
	return NULL;
}

/* A pull answered so late that the consumer gave up on it (the server was
 * frozen with SIGSTOP past the consumer's grace period): the message reached
 * the consumer's retired inbox and the next fetch hands it out, once, with
 * its first delivery count; nothing waits out ack_wait. */
static void test_late_delivery(void **state)
{
	(void)state;
	aks_transport_impl *t = must_open(
	    g_url, "LD", "auto_provision: true\npartitions: 1\nrequest_timeout: 1\nack_wait: 30\n");
	aks_consumer *c = must_consumer(t, AKS_QUEUE_INPUT);
	aks_consumer *other = must_consumer(t, AKS_QUEUE_INPUT);
	send_str(t, "late", "g", "l1");
	pid_t server = server_pid();
	freeze_server(server);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, cont_later, &server), 0);
	/* The stream-info hint times out (1 s), the pull's answer does not come
	 * within the grace period: nothing, for now. */
	aks_message *m = fetch1(c, 0);
	pthread_join(th, NULL);
	assert_null(m);
	/* Thawed, the server delivers into the retired inbox. */
	m = fetch1(c, 3000);
	assert_non_null(m);
	assert_true(body_is(m, "late"));
	assert_int_equal(m->receive_count, 1);
	assert_null(fetch1(other, 300)); /* in flight: nobody else gets it */
	must_ack(c, m);
	assert_null(fetch1(other, 300));
	ops()->consumer_close(other);
	ops()->consumer_close(c);
	ops()->fini(t);
}

/* ---- doorbell ------------------------------------------------------------------------ */

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* A consumer thread that fetches, acks and reports when each message came. */
struct pickup {
	aks_consumer *c;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int64_t at_us;    /* when the last message was fetched */
	int got;          /* messages fetched */
	int out_of_order; /* bodies not "<got>" */
	int errors;       /* failed fetches or acks */
	bool stop;
};

static void *pickup_thread(void *arg)
{
	struct pickup *p = arg;
	for (;;) {
		pthread_mutex_lock(&p->mu);
		bool stop = p->stop;
		pthread_mutex_unlock(&p->mu);
		if (stop)
			return NULL;
		aks_message *out[1] = {NULL};
		size_t n = 0;
		aks_error *err = NULL;
		/* Short fetches: the consumer's pause persists across them. */
		int rc = ops()->fetch(p->c, out, 1, &n, 200, NULL, &err);
		int64_t at = now_us();
		if (rc != AKS_OK || !n) {
			aks_error_free(err);
			pthread_mutex_lock(&p->mu);
			p->errors += rc != AKS_OK;
			pthread_mutex_unlock(&p->mu);
			continue;
		}
		char want[32];
		pthread_mutex_lock(&p->mu);
		snprintf(want, sizeof(want), "%d", p->got);
		pthread_mutex_unlock(&p->mu);
		bool in_order = body_is(out[0], want);
		rc = ops()->ack(p->c, out[0], &err);
		aks_error_free(err);
		pthread_mutex_lock(&p->mu);
		p->at_us = at;
		p->got++;
		p->out_of_order += !in_order;
		p->errors += rc != AKS_OK;
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
	}
}

static int compare_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/*
 * Sends `sends` messages one at a time from `sender` to an idle consumer of
 * `receiver` and returns the median time, in microseconds, from the start of
 * each send to its fetch. Before each send the queue stays idle 70-102 ms
 * (random), long enough for the consumer's pause to reach its 32 ms cap (after
 * 63 ms idle) and with a phase that does not follow the consumer's polls.
 */
static int64_t median_pickup(aks_transport_impl *sender, aks_transport_impl *receiver, int sends)
{
	struct pickup p = {.c = must_consumer(receiver, AKS_QUEUE_INPUT)};
	pthread_mutex_init(&p.mu, NULL);
	pthread_cond_init(&p.cv, NULL);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, pickup_thread, &p), 0);
	int64_t *lat = calloc((size_t)sends, sizeof(*lat));
	assert_non_null(lat);
	int got = 0;
	for (int i = 0; i < sends; i++) {
		usleep((useconds_t)(70 + rand() % 33) * 1000);
		char body[32], dedup[32];
		snprintf(body, sizeof(body), "%d", i);
		snprintf(dedup, sizeof(dedup), "pick-%d", i);
		int64_t t0 = now_us();
		send_str(sender, body, "g", dedup);
		pthread_mutex_lock(&p.mu);
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 5;
		while (p.got == i)
			if (pthread_cond_timedwait(&p.cv, &p.mu, &until) != 0)
				break;
		got = p.got;
		lat[i] = p.at_us - t0;
		pthread_mutex_unlock(&p.mu);
		if (got != i + 1)
			break;
	}
	pthread_mutex_lock(&p.mu);
	p.stop = true;
	pthread_mutex_unlock(&p.mu);
	pthread_join(th, NULL);
	ops()->consumer_close(p.c);
	pthread_mutex_destroy(&p.mu);
	pthread_cond_destroy(&p.cv);
	assert_int_equal(got, sends); /* every message, each within 5 s */
	assert_int_equal(p.out_of_order, 0);
	assert_int_equal(p.errors, 0);
	qsort(lat, (size_t)sends, sizeof(*lat), compare_i64);
	int64_t median = lat[sends / 2];
	free(lat);
	return median;
}

/* An idle consumer (its pause at the 32 ms cap) picks up a message sent by
 * another transport (another connection, as an agent and a worker) well
 * within its pause when the doorbell rings: the median pickup with bells is
 * under half the median with the doorbell off, measured in the same run
 * (under the sanitizers: under the median with it off, see below). */
#define PICKUP_SENDS 50

static void test_doorbell_pickup(void **state)
{
	(void)state;
	const char *on = "auto_provision: true\npartitions: 4\n";
	const char *off = "auto_provision: true\npartitions: 4\ndoorbell: false\n";
	aks_transport_impl *bs = must_open(g_url, "DBON", on), *br = must_open(g_url, "DBON", on);
	aks_transport_impl *ps = must_open(g_url, "DBOFF", off),
	                   *pr = must_open(g_url, "DBOFF", off);
	srand(7);
	int64_t bell = median_pickup(bs, br, PICKUP_SENDS);
	int64_t poll_ = median_pickup(ps, pr, PICKUP_SENDS);
	print_message("doorbell: median pickup %.2f ms with bells, %.2f ms polling (%d sends "
	              "each)\n",
	              (double)bell / 1000.0, (double)poll_ / 1000.0, PICKUP_SENDS);
#if defined(__SANITIZE_ADDRESS__)
	/* Under the sanitizers every request costs several times the CPU, which a ring's
	 * pickup pays and a poll's pause hides (4.6 ms against 21 plain, 9.6 against 19 under
	 * ASan on a loaded machine): faster, by less. */
	assert_true(bell < poll_);
#else
	assert_true(bell < poll_ / 2);
#endif
	ops()->fini(bs);
	ops()->fini(br);
	ops()->fini(ps);
	ops()->fini(pr);
}

/* Sends three messages of one group and checks an idle consumer gets them,
 * in order, each once. */
static void three_in_order(aks_transport_impl *sender, aks_consumer *c, const char *tag)
{
	usleep(100000); /* idle: the pause is at its cap */
	char body[3][32], dedup[32];
	for (int i = 0; i < 3; i++) {
		snprintf(body[i], sizeof(body[i]), "%s-%d", tag, i);
		snprintf(dedup, sizeof(dedup), "%s-%d", tag, i);
		send_str(sender, body[i], "g", dedup);
	}
	for (int i = 0; i < 3; i++) {
		aks_message *m = fetch1(c, 3000);
		assert_non_null(m);
		assert_true(body_is(m, body[i]));
		assert_int_equal(m->receive_count, 1);
		must_ack(c, m);
	}
	assert_null(fetch1(c, 200));
}

/* Bells that never come change nothing but the latency: a sender without
 * the doorbell (an older version, or doorbell: false) still reaches a
 * consumer that listens; and when another stream captures the bell subject
 * (here a queue whose subjects are "_AKS.bell.<p>"), init leaves that bell
 * off, so no bell is ever stored, and the queue works by polling. */
static void test_doorbell_fallback(void **state)
{
	(void)state;
	aks_transport_impl *quiet =
	    must_open(g_url, "DBM", "auto_provision: true\npartitions: 4\ndoorbell: false\n");
	aks_transport_impl *listening =
	    must_open(g_url, "DBM", "auto_provision: true\npartitions: 4\n");
	aks_consumer *c = must_consumer(listening, AKS_QUEUE_INPUT);
	three_in_order(quiet, c, "quiet");
	three_in_order(listening, c, "own");
	ops()->consumer_close(c);
	ops()->fini(listening);
	ops()->fini(quiet);

	/* A foreign queue whose stream captures "_AKS.bell.>", partition 3 of
	 * which is "_AKS.bell.3": the bell subject of a stream named "3". */
	char *path = NULL;
	assert_true(asprintf(&path, "%s/dbc-foreign.yaml", g_dir) > 0);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f,
	        "url: %s\ninput_stream: DBC_FOREIGN\ninput_subject_prefix: _AKS.bell\n"
	        "output_stream: DBC_FOREIGN_OUT\noutput_subject_prefix: dbc.fout\n"
	        "partitions: 4\nauto_provision: true\n",
	        g_url);
	assert_int_equal(fclose(f), 0);
	aks_transport_impl *foreign = NULL;
	aks_error *err = NULL;
	if (open_t(path, &foreign, &err) != AKS_OK)
		fail_msg("init foreign: %s", aks_error_message(err));
	free(path);
	assert_true(asprintf(&path, "%s/dbc-three.yaml", g_dir) > 0);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f,
	        "url: %s\ninput_stream: \"3\"\ninput_subject_prefix: dbc.req\n"
	        "output_stream: DBC_OUT\noutput_subject_prefix: dbc.out\n"
	        "partitions: 2\nauto_provision: true\n",
	        g_url);
	assert_int_equal(fclose(f), 0);
	aks_transport_impl *three = NULL;
	if (open_t(path, &three, &err) != AKS_OK)
		fail_msg("init stream 3: %s", aks_error_message(err));
	free(path);
	aks_consumer *fc = must_consumer(foreign, AKS_QUEUE_INPUT);
	c = must_consumer(three, AKS_QUEUE_INPUT);
	three_in_order(three, c, "captured");
	/* A bell of stream 3 would have been stored on "_AKS.bell.3", partition 3
	 * of the foreign queue, and delivered here. */
	assert_null(fetch1(fc, 500));
	/* The foreign queue's own bell subject is captured by its own stream:
	 * off too, and it works. */
	three_in_order(foreign, fc, "foreign");
	ops()->consumer_close(c);
	ops()->consumer_close(fc);
	ops()->fini(three);
	ops()->fini(foreign);
}

/* auto_provision false: a missing stream fails init, a missing consumer
 * fails consumer_open, each naming the object and how to create it. */
static void test_missing_objects(void **state)
{
	(void)state;
	char *path = write_block(g_url, "NP", "partitions: 2\n");
	aks_transport_impl *t = NULL;
	aks_error *err = NULL;
	assert_int_equal(open_t(path, &t, &err), AKS_EBROKER);
	const char *msg = aks_error_message(err);
	assert_non_null(strstr(msg, "stream NP_IN does not exist"));
	assert_non_null(strstr(msg, g_url));
	assert_non_null(strstr(msg, "auto_provision: true"));
	assert_non_null(strstr(msg, "nats stream add NP_IN"));
	aks_error_free(err);
	err = NULL;
	free(path);
	/* Streams made (only), then opened without auto_provision. */
	aks_transport_impl *maker = must_open(g_url, "NQ", "partitions: 2\nauto_provision: true\n");
	ops()->fini(maker);
	t = must_open(g_url, "NQ", "partitions: 2\n");
	aks_consumer *c = NULL;
	assert_int_equal(ops()->consumer_open(t, AKS_QUEUE_INPUT, &c, &err), AKS_EBROKER);
	msg = aks_error_message(err);
	assert_non_null(strstr(msg, "consumer NQ_IN_p0 of stream NQ_IN does not exist"));
	assert_non_null(strstr(msg, "auto_provision: true"));
	aks_error_free(err);
	err = NULL;
	/* An unknown queue name is a bad argument. */
	assert_int_equal(ops()->consumer_open(t, "sideways", &c, &err), AKS_EINVAL);
	aks_error_free(err);
	ops()->fini(t);
}

/* Starts a private server asking for authentication (args as nats-server takes them) in
 * g_dir/<name>; its URL to url. */
static void start_auth_server(const char *name, const char *args, char *url, size_t size)
{
	char dir[256];
	snprintf(dir, sizeof(dir), "%s/%s", g_dir, name);
	setenv("NATS_SERVER_ARGS", args, 1);
	int rc = server_cmd("start", dir, NULL, url, size);
	unsetenv("NATS_SERVER_ARGS");
	assert_int_equal(rc, 0);
}

static void stop_auth_server(const char *name)
{
	char dir[256];
	snprintf(dir, sizeof(dir), "%s/%s", g_dir, name);
	server_cmd("stop", dir, NULL, NULL, 0);
}

/* init with `extra` fails with rc; the message has `want` and never `secret`. */
static void expect_refused(const char *url, const char *extra, int rc, const char *want,
                           const char *secret)
{
	char *path = write_block(url, "AU", extra);
	aks_transport_impl *t = NULL;
	aks_error *err = NULL;
	assert_int_equal(open_t(path, &t, &err), rc);
	const char *msg = aks_error_message(err);
	if (!strstr(msg, want) || (secret && strstr(msg, secret)))
		fail_msg("wanted '%s' and not '%s' in: %s", want, secret ? secret : "", msg);
	aks_error_free(err);
	unlink(path);
	free(path);
}

/* One message through a transport opened with `extra`. */
static void round_trip_with(const char *url, const char *name, const char *extra)
{
	char all[512];
	snprintf(all, sizeof(all), "auto_provision: true\npartitions: 1\n%s", extra);
	aks_transport_impl *t = must_open(url, name, all);
	aks_consumer *c = must_consumer(t, AKS_QUEUE_INPUT);
	send_str(t, "authenticated", NULL, NULL);
	aks_message *m = fetch1(c, 5000);
	assert_non_null(m);
	assert_true(body_is(m, "authenticated"));
	must_ack(c, m);
	ops()->consumer_close(c);
	ops()->fini(t);
}

/* A server that asks for authentication (as the worker tier's does): without credentials,
 * or with wrong ones, init fails with the server's refusal and the URL, never the secret;
 * with the token (token_env), the user and password (user, password_env) or credentials in
 * the URL, messages go through. Half-given or unset credentials are config errors. */
static void test_auth(void **state)
{
	(void)state;
	char url[128], creds_url[192];
	setenv("AKS_TEST_NATS_TOKEN", "tok-3f9a1c0e", 1);
	setenv("AKS_TEST_NATS_WRONG", "wrong-77e2b4", 1);
	setenv("AKS_TEST_NATS_PASSWORD", "pw-51c0de9a", 1);
	unsetenv("AKS_TEST_NATS_UNSET");

	start_auth_server("auth-token", "--auth tok-3f9a1c0e", url, sizeof(url));
	expect_refused(url, "request_timeout: 3\n", AKS_EBROKER, "uthorization", NULL);
	expect_refused(url, "request_timeout: 3\n", AKS_EBROKER, url, NULL);
	expect_refused(url, "token_env: AKS_TEST_NATS_WRONG\nrequest_timeout: 3\n", AKS_EBROKER,
	               "uthorization", "wrong-77e2b4");
	round_trip_with(url, "AT", "token_env: AKS_TEST_NATS_TOKEN\n");
	expect_refused(url, "token_env: AKS_TEST_NATS_UNSET\n", AKS_ECONFIG,
	               "nats.token_env: the environment variable AKS_TEST_NATS_UNSET is not set",
	               NULL);
	expect_refused(url,
	               "token_env: AKS_TEST_NATS_TOKEN\nuser: aks\n"
	               "password_env: AKS_TEST_NATS_PASSWORD\n",
	               AKS_ECONFIG, "token_env, or user with password_env: not both",
	               "tok-3f9a1c0e");
	stop_auth_server("auth-token");

	start_auth_server("auth-user", "--user aks --pass pw-51c0de9a", url, sizeof(url));
	round_trip_with(url, "AP", "user: aks\npassword_env: AKS_TEST_NATS_PASSWORD\n");
	expect_refused(url, "user: aks\npassword_env: AKS_TEST_NATS_WRONG\nrequest_timeout: 3\n",
	               AKS_EBROKER, "uthorization", "wrong-77e2b4");
	expect_refused(url, "user: aks\n", AKS_ECONFIG, "user and password_env go together", NULL);
	/* In the URL: it works, and a message shows the URL with ***@ for the credentials. */
	const char *hostport = strstr(url, "://") + 3;
	snprintf(creds_url, sizeof(creds_url), "nats://aks:pw-51c0de9a@%s", hostport);
	round_trip_with(creds_url, "AU", "");
	snprintf(creds_url, sizeof(creds_url), "nats://aks:wrong-77e2b4@%s", hostport);
	char shown[192];
	snprintf(shown, sizeof(shown), "nats://***@%s", hostport);
	expect_refused(creds_url, "request_timeout: 3\n", AKS_EBROKER, shown, "wrong-77e2b4");
	/* A list: every URL's credentials hidden, the rest kept. */
	char list[512];
	snprintf(list, sizeof(list), "nats://tok-3f9a1c0e@127.0.0.1:1, %s", creds_url);
	char shown_list[512];
	snprintf(shown_list, sizeof(shown_list), "nats://***@127.0.0.1:1, %s", shown);
	expect_refused(list, "request_timeout: 3\n", AKS_EBROKER, shown_list, "tok-3f9a1c0e");
	stop_auth_server("auth-user");
}

/* Nothing listens: init fails, naming the URL. */
static void test_server_down(void **state)
{
	(void)state;
	char url[128];
	/* A port that was free a moment ago (the script's choice, unused). */
	char line[512];
	snprintf(line, sizeof(line),
	         "python3 -c 'import socket; s = socket.socket(); s.bind((\"127.0.0.1\", 0)); "
	         "print(s.getsockname()[1])'");
	FILE *f = popen(line, "r");
	int port = 0;
	assert_int_equal(fscanf(f, "%d", &port), 1);
	pclose(f);
	snprintf(url, sizeof(url), "nats://127.0.0.1:%d", port);
	char *path = write_block(url, "DN", "request_timeout: 2\n");
	aks_transport_impl *t = NULL;
	aks_error *err = NULL;
	int64_t t0 = now_ms();
	assert_int_equal(open_t(path, &t, &err), AKS_EBROKER);
	assert_true(now_ms() - t0 < 5000);
	assert_non_null(strstr(aks_error_message(err), "cannot connect"));
	assert_non_null(strstr(aks_error_message(err), url));
	aks_error_free(err);
	unlink(path);
	free(path);
}

/* The server stops and comes back (same port and store): while it is down,
 * send and fetch fail with errors naming the URL; afterwards the same
 * transport and consumer work again, and a message sent before the stop
 * survived it. */
static void test_server_restart(void **state)
{
	(void)state;
	char dir[256], url[128], port[32];
	snprintf(dir, sizeof(dir), "%s/restart", g_dir);
	assert_int_equal(server_cmd("start", dir, NULL, url, sizeof(url)), 0);
	const char *colon = strrchr(url, ':');
	snprintf(port, sizeof(port), "%s", colon + 1);
	aks_transport_impl *t =
	    must_open(url, "RS", "auto_provision: true\npartitions: 4\nrequest_timeout: 1\n");
	aks_consumer *c = must_consumer(t, AKS_QUEUE_INPUT);
	send_str(t, "before", "g", "r1");
	assert_int_equal(server_cmd("stop", dir, NULL, NULL, 0), 0);
	usleep(300000);

	static const char *const none[] = {NULL};
	aks_message msg = {
	    AKS_MESSAGE_VERSION, sizeof(aks_message), "down", 4, none, "g", "r2", 0, NULL};
	aks_error *err = NULL;
	assert_int_equal(ops()->send(t, AKS_QUEUE_INPUT, &msg, NULL, &err), AKS_EBROKER);
	assert_non_null(strstr(aks_error_message(err), url));
	aks_error_free(err);
	err = NULL;
	aks_message *out[1];
	size_t n = 0;
	assert_int_equal(ops()->fetch(c, out, 1, &n, 100, NULL, &err), AKS_EBROKER);
	assert_non_null(strstr(aks_error_message(err), "not connected"));
	assert_non_null(strstr(aks_error_message(err), url));
	aks_error_free(err);
	err = NULL;

	assert_int_equal(server_cmd("start", dir, port, NULL, 0), 0);
	/* Reconnect happens in the background; fetch errors until it has. */
	aks_message *m = NULL;
	for (int64_t t0 = now_ms(); !m && now_ms() - t0 < 15000;) {
		n = 0;
		if (ops()->fetch(c, out, 1, &n, 500, NULL, &err) != AKS_OK) {
			aks_error_free(err);
			err = NULL;
			usleep(200000);
		} else if (n) {
			m = out[0];
		}
	}
	assert_non_null(m);
	assert_true(body_is(m, "before"));
	must_ack(c, m);
	/* The send made during the outage may have been flushed on reconnect:
	 * the sender retries with the same dedup id, and it arrives once. */
	send_str(t, "down", "g", "r2");
	send_str(t, "after", "g", "r3");
	m = fetch1(c, 3000);
	assert_non_null(m);
	assert_true(body_is(m, "down"));
	must_ack(c, m);
	m = fetch1(c, 3000);
	assert_non_null(m);
	assert_true(body_is(m, "after"));
	must_ack(c, m);
	assert_null(fetch1(c, 300));
	ops()->consumer_close(c);
	ops()->fini(t);
	assert_int_equal(server_cmd("stop", dir, NULL, NULL, 0), 0);
}

/* ---- main ----------------------------------------------------------------------- */

static int group_setup(void **state)
{
	(void)state;
	const char *src = getenv("AKS_TEST_SRCDIR");
	snprintf(g_script, sizeof(g_script), "%s/tests/integration/nats-server.sh",
	         src ? src : ".");
	snprintf(g_dir, sizeof(g_dir), "/tmp/aks-nats-test.XXXXXX");
	/* Whatever happens to this process, its servers go with it. */
	char owner[32];
	snprintf(owner, sizeof(owner), "%d", (int)getpid());
	setenv("NATS_SERVER_OWNER", owner, 1);
	if (!mkdtemp(g_dir))
		return -1;
	if (server_cmd("start", g_dir, NULL, g_url, sizeof(g_url)) != 0) {
		fprintf(stderr, "cannot start nats-server (see %s/server.log); is it installed?\n",
		        g_dir);
		return -1;
	}
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	char restart[256];
	snprintf(restart, sizeof(restart), "%s/restart", g_dir);
	server_cmd("stop", restart, NULL, NULL, 0); /* when test_server_restart failed */
	stop_auth_server("auth-token");             /* or test_auth */
	stop_auth_server("auth-user");
	server_cmd("stop", g_dir, NULL, NULL, 0);
	if (getenv("NATS_TEST_KEEP"))
		return 0;
	char line[512];
	snprintf(line, sizeof(line), "rm -rf '%s'", g_dir);
	return system(line) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	ssize_t len = readlink("/proc/self/exe", g_self, sizeof(g_self) - 1);
	if (len <= 0)
		return 1;
	g_self[len] = '\0';
	if (argc >= 4 && strcmp(argv[1], "--child") == 0) {
		/* A child never outlives the test that started it. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() == 1)
			return 1;
		if (strcmp(argv[2], "hold") == 0)
			return child_hold(argv[3]);
		if (strcmp(argv[2], "fifo") == 0 && argc >= 7) {
			srand((unsigned)getpid());
			return child_fifo(argv[3], argv[4], argv[5], atoi(argv[6]));
		}
		return 2;
	}
	/* NATS_TEST_FILTER=test_dedup runs one test (while debugging). */
	if (getenv("NATS_TEST_FILTER"))
		cmocka_set_test_filter(getenv("NATS_TEST_FILTER"));
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_loader_accepts),
	    cmocka_unit_test(test_codec),
	    cmocka_unit_test(test_round_trip),
	    cmocka_unit_test(test_dedup),
	    cmocka_unit_test(test_nack_redelivery),
	    cmocka_unit_test(test_redelivery_after_kill),
	    cmocka_unit_test(test_dead_letter),
	    cmocka_unit_test(test_in_progress),
	    cmocka_unit_test(test_group_serial_and_parallel),
	    cmocka_unit_test(test_group_serial_no_doorbell),
	    cmocka_unit_test(test_fifo_across_processes),
	    cmocka_unit_test(test_batch_fetch),
	    cmocka_unit_test(test_cancel_and_deadline),
	    cmocka_unit_test(test_fetch_bounded_by_wait),
	    cmocka_unit_test(test_late_delivery),
	    cmocka_unit_test(test_missing_objects),
	    cmocka_unit_test(test_server_down),
	    cmocka_unit_test(test_auth),
	    /* After every other test of the shared server: the fallback test leaves
	     * a stream that captures "_AKS.bell.>" (every later bell is off). */
	    cmocka_unit_test(test_doorbell_pickup),
	    cmocka_unit_test(test_doorbell_fallback),
	    cmocka_unit_test(test_server_restart),
	};
	return cmocka_run_group_tests_name("nats_transport", tests, group_setup, group_teardown);
}
