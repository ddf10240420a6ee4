/* Unit tests: the egress proxy end to end (docs/agent-protocol.md, "Egress"): the real
 * aksandbox-agent as a child over pipes listening as a proxy, the host's relay and its
 * decisions (plugins/common/agent/aks_egress.h), and programs the agent runs (curl, Python)
 * reaching loopback servers of the test under the names allowed.test and blocked.test
 * (AKS_TEST_EGRESS_RESOLVE). Here the agent shares the host's network, so these tests prove
 * what the proxy and the host decide; that nothing else leaves a sandbox is proved per
 * provider (tests/integration/egress-*.test). */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/plugin/host_api.h"
#include "core/plugin/result.h"
#include "plugins/common/agent/aks_egress.h"
#include "test_agent_harness.h"

/* ---- a loopback HTTP server: answers "hello <Host>" or a body of N bytes ----------------- */

typedef struct server {
	int fd;
	unsigned port;
	pthread_t thread;
	pthread_mutex_t mu;
	char last_head[4096];
	uint64_t last_body; /* bytes of the last request's body */
	unsigned requests;
} server;

static server srv;

static void *serve(void *arg)
{
	server *s = arg;
	for (;;) {
		int c = accept(s->fd, NULL, NULL);
		if (c < 0)
			return NULL;
		char head[8192];
		size_t n = 0;
		char *end = NULL;
		while (n < sizeof(head) - 1 && !end) {
			ssize_t r = read(c, head + n, sizeof(head) - 1 - n);
			if (r <= 0)
				break;
			n += (size_t)r;
			head[n] = '\0';
			end = strstr(head, "\r\n\r\n");
		}
		if (!end) {
			close(c);
			continue;
		}
		uint64_t body = n - (size_t)(end + 4 - head);
		const char *cl = strcasestr(head, "\r\nContent-Length:");
		uint64_t want = cl ? strtoull(cl + 17, NULL, 10) : 0;
		char buf[65536];
		while (body < want) {
			ssize_t r = read(c, buf, sizeof(buf));
			if (r <= 0)
				break;
			body += (uint64_t)r;
		}
		pthread_mutex_lock(&s->mu);
		snprintf(s->last_head, sizeof(s->last_head), "%.*s", (int)(end - head), head);
		s->last_body = body;
		s->requests++;
		pthread_mutex_unlock(&s->mu);
		/* GET /bytes/N: N bytes of a pattern; else hello and the Host. */
		unsigned long long size = 0;
		char reply[600];
		if (sscanf(head, "GET /bytes/%llu", &size) == 1) {
			int k = snprintf(reply, sizeof(reply),
			                 "HTTP/1.1 200 OK\r\nContent-Length: %llu\r\nConnection: "
			                 "close\r\n\r\n",
			                 size);
			ssize_t w = write(c, reply, (size_t)k);
			for (size_t i = 0; i < sizeof(buf); i++)
				buf[i] = (char)('a' + i % 26);
			while (w >= 0 && size > 0) {
				size_t chunk = size < sizeof(buf) ? (size_t)size : sizeof(buf);
				w = write(c, buf, chunk);
				if (w > 0)
					size -= (unsigned long long)w;
			}
		} else {
			const char *host = strcasestr(head, "\r\nHost: ");
			int hl = host ? (int)strcspn(host + 8, "\r\n") : 1;
			char text[300];
			int tl = snprintf(text, sizeof(text), "hello %.*s body=%llu\n", hl,
			                  host ? host + 8 : "-", (unsigned long long)body);
			int k = snprintf(reply, sizeof(reply),
			                 "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: "
			                 "close\r\n\r\n%s",
			                 tl, text);
			ssize_t w = write(c, reply, (size_t)k);
			(void)w;
		}
		close(c);
	}
}

static void server_start(server *s)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->mu, NULL);
	s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sin);
	assert_int_equal(bind(s->fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(s->fd, 64), 0);
	assert_int_equal(getsockname(s->fd, (struct sockaddr *)&sin, &len), 0);
	s->port = ntohs(sin.sin_port);
	assert_int_equal(pthread_create(&s->thread, NULL, serve, s), 0);
}

static void server_stop(server *s)
{
	shutdown(s->fd, SHUT_RDWR);
	close(s->fd);
	pthread_join(s->thread, NULL);
	pthread_mutex_destroy(&s->mu);
}

/* ---- the agent with its proxy ------------------------------------------------------------ */

typedef struct fixture {
	th_agent t;
	aks_egress_relay *egress;
	char log[256]; /* the host's stderr, where the audit lines go */
	int saved_stderr;
} fixture;

static fixture fx;

/* A call as the host makes one: a principal, and the context the audit names. */
static const aks_call *caller(const char *subject)
{
	static aks_principal principal = {AKS_PRINCIPAL_INIT};
	static const char *const context[] = {AKS_CONTEXT_CONVERSATION, "conv-1",
	                                      AKS_CONTEXT_SESSION, "default:p", NULL};
	static aks_call call = {AKS_CALL_INIT, .principal = &principal, .context = context};
	principal.subject = subject;
	return &call;
}

static void start_with(const char *const *allow)
{
	memset(&fx, 0, sizeof(fx));
	snprintf(fx.log, sizeof(fx.log), "/tmp/aks-egress-log-XXXXXX");
	int lfd = mkstemp(fx.log);
	assert_true(lfd >= 0);
	fflush(stderr);
	fx.saved_stderr = dup(2);
	dup2(lfd, 2);
	close(lfd);
	aks_log_set_level(AKS_LOG_INFO);
	char map[200];
	snprintf(map, sizeof(map),
	         "allowed.test=127.0.0.1,blocked.test=127.0.0.1,private.test=10.255.255.1,"
	         "meta.test=169.254.169.254");
	setenv("AKS_TEST_EGRESS_RESOLVE", map, 1);
	th_start(&fx.t);
	aks_egress_opts o = {.provider = "test", .sandbox_id = "sb-1", .allow = allow};
	aks_error *err = NULL;
	int rc =
	    aks_egress_start(aks__host_api(), fx.t.conn, &o, caller("agent-7"), &fx.egress, &err);
	if (rc != AKS_OK)
		fail_msg("egress start: %s", aks_error_message(err));
}

static void stop(void)
{
	aks_egress_stop(fx.egress);
	fx.egress = NULL;
	th_stop(&fx.t);
	fflush(stderr);
	dup2(fx.saved_stderr, 2);
	close(fx.saved_stderr);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	char *buf = calloc(1, 1 << 20);
	size_t n = fread(buf, 1, (1 << 20) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

typedef struct run_out {
	int exit_code;
	char out[65536];
	char err[8192];
} run_out;

/* Runs a shell command through the agent (so with the proxy's environment). */
static void run(const char *cmd, run_out *o)
{
	aks_result *res = aks__result_new(1 << 20, 1 << 20);
	assert_non_null(res);
	aks_agent_spawn sp = {.shell = cmd, .timeout_ms = 60000};
	aks_error *err = NULL;
	int rc = aks__agent_exec(fx.t.conn, &sp, res, NULL, NULL, &err);
	if (rc != AKS_OK)
		fail_msg("exec %s: %s", cmd, aks_error_message(err));
	size_t len;
	o->exit_code = aks_result_get_exit_code(res);
	const char *text = aks_result_get_stdout(res, &len);
	snprintf(o->out, sizeof(o->out), "%.*s", (int)len, text);
	text = aks_result_get_stderr(res, &len);
	snprintf(o->err, sizeof(o->err), "%.*s", (int)len, text);
	aks_result_free(res);
}

static void runf(run_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void runf(run_out *o, const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	run(cmd, o);
}

/* The test's servers are on loopback, which a name may lead to only through a CIDR entry
 * inside it: the lists that reach them say so, as an operator would for a local mirror. */
static const char *const default_allow[] = {"allowed.test", "127.0.0.1/32", NULL};

static int setup(void **state)
{
	(void)state;
	server_start(&srv);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	server_stop(&srv);
	return 0;
}

/* ---- the tests --------------------------------------------------------------------------- */

/* ---- an agent that is not the one we build: what its HELLO and NET_LISTENING say ------- */

typedef struct fake_agent {
	int in, out;       /* its ends: reads the host's frames, writes its answers */
	uint32_t features; /* HELLO_OK's FEATURES */
	uint32_t window;   /* NET_LISTENING's WINDOW; 0: the one asked */
	unsigned listens;  /* NET_LISTENs it was sent */
	pthread_t thread;
} fake_agent;

static void fake_answer(fake_agent *fa, const aks_agent_frame *f)
{
	aks_agent_buf b = {0};
	size_t at;
	if (f->type == AKS_AGENT_HELLO) {
		at = aks__agent_frame_begin(&b, AKS_AGENT_HELLO_OK, 0, f->id);
		aks__agent_put_u32(&b, AKS_AGENT_T_VERSION, AKS_AGENT_VERSION);
		aks__agent_put_str(&b, AKS_AGENT_T_AGENT, "aksandbox-agent 0.0.1 (older)");
		aks__agent_put_u32(&b, AKS_AGENT_T_MAX_PAYLOAD, AKS_AGENT_MAX_PAYLOAD);
		aks__agent_put_u32(&b, AKS_AGENT_T_WINDOW, AKS_AGENT_WINDOW);
		aks__agent_put_u32(&b, AKS_AGENT_T_FEATURES, fa->features);
		aks__agent_put_u32(&b, AKS_AGENT_T_PID, 4242);
	} else if (f->type == AKS_AGENT_NET_LISTEN) {
		fa->listens++;
		uint32_t asked = 0, n;
		uint16_t tag;
		const uint8_t *v;
		aks_agent_tlv it;
		aks__agent_tlv_init(&it, f);
		while (aks__agent_tlv_next(&it, &tag, &v, &n) > 0)
			if (tag == AKS_AGENT_T_WINDOW && n == 4)
				asked = aks__agent_get32(v);
		at = aks__agent_frame_begin(&b, AKS_AGENT_NET_LISTENING, AKS_AGENT_FLAG_END, f->id);
		aks__agent_put_u32(&b, AKS_AGENT_T_PORT, 3128);
		aks__agent_put_u32(&b, AKS_AGENT_T_WINDOW, fa->window ? fa->window : asked);
	} else {
		return;
	}
	aks__agent_frame_end(&b, at);
	for (size_t off = 0; off < b.len;) {
		ssize_t w = write(fa->out, b.data + off, b.len - off);
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	aks__agent_buf_free(&b);
}

static void *fake_agent_main(void *arg)
{
	fake_agent *fa = arg;
	aks_agent_decoder d;
	assert_int_equal(aks__agent_decoder_init(&d, AKS_AGENT_MAX_PAYLOAD), 0);
	for (;;) {
		size_t avail;
		uint8_t *space = aks__agent_decoder_space(&d, &avail);
		ssize_t r = read(fa->in, space, avail);
		if (r <= 0)
			break; /* the host closed: the end */
		aks__agent_decoder_commit(&d, (size_t)r);
		aks_agent_frame f;
		uint32_t code;
		while (aks__agent_decoder_next(&d, &f, &code) == AKS_AGENT_DEC_FRAME)
			fake_answer(fa, &f);
	}
	aks__agent_decoder_free(&d);
	close(fa->in);
	close(fa->out);
	return NULL;
}

/* Connects the client to a fake agent, then tries to start the egress proxy over it. */
static int egress_over_fake(fake_agent *fa, aks_error **err)
{
	int to[2], from[2];
	assert_int_equal(pipe2(to, O_CLOEXEC), 0);
	assert_int_equal(pipe2(from, O_CLOEXEC), 0);
	fa->in = to[0];
	fa->out = from[1];
	assert_int_equal(pthread_create(&fa->thread, NULL, fake_agent_main, fa), 0);
	aks_call call = {AKS_CALL_INIT, .deadline_ms = aks__host_api()->now_ms() + 10000,
	                 .timeout = 10};
	aks_agent *conn = NULL;
	int rc = aks__agent_start(aks__host_api(), from[0], to[1], &call, &conn, err);
	assert_int_equal(rc, AKS_OK);
	const char *const allow[] = {"allowed.test", NULL};
	aks_egress_opts o = {.provider = "test", .sandbox_id = "sb-old", .allow = allow};
	aks_egress_relay *e = NULL;
	rc = aks_egress_start(aks__host_api(), conn, &o, &call, &e, err);
	assert_null(e);        /* never half started */
	aks__agent_free(conn); /* closes its ends: the fake reads EOF */
	pthread_join(fa->thread, NULL);
	return rc;
}

/* An agent from before the proxy (no FEATURES bit): the allowlist fails closed, with the
 * reason, before anything is asked of it. */
static void t_old_agent_refused(void **state)
{
	(void)state;
	fake_agent fa = {.features = AKS_AGENT_FEATURE_PYTHON_SESSION};
	aks_error *err = NULL;
	assert_int_equal(egress_over_fake(&fa, &err), AKS_EPOLICY);
	assert_non_null(strstr(aks_error_message(err), "has no egress proxy"));
	assert_non_null(strstr(aks_error_message(err), "network_allow cannot be enforced"));
	assert_int_equal(fa.listens, 0);
	aks_error_free(err);
}

/* An agent that would keep another window than the host's: refused, the numbers said. */
static void t_window_mismatch_refused(void **state)
{
	(void)state;
	fake_agent fa = {.features = AKS_AGENT_FEATURE_PYTHON_SESSION | AKS_AGENT_FEATURE_EGRESS,
	                 .window = AKS_AGENT_NET_WINDOW * 4};
	aks_error *err = NULL;
	int rc = egress_over_fake(&fa, &err);
	assert_true(rc < 0);
	assert_int_equal(fa.listens, 1);
	if (!err || !strstr(aks_error_message(err), "egress window is"))
		fail_msg("error: %s", err ? aks_error_message(err) : "(none)");
	aks_error_free(err);
}

static void t_environment(void **state)
{
	(void)state;
	start_with(default_allow);
	run_out o;
	run("echo $http_proxy $HTTPS_PROXY $ALL_PROXY $NO_PROXY $npm_config_https_proxy", &o);
	unsigned port = 0;
	assert_int_equal(sscanf(o.out, "http://127.0.0.1:%u", &port), 1);
	char want[300];
	snprintf(want, sizeof(want),
	         "http://127.0.0.1:%u http://127.0.0.1:%u socks5h://127.0.0.1:%u "
	         "localhost,127.0.0.1,::1 http://127.0.0.1:%u\n",
	         port, port, port, port);
	assert_string_equal(o.out, want);
	/* the host's own ENV cannot point programs elsewhere: the proxy's settings win */
	aks_result *res = aks__result_new(4096, 4096);
	const char *const env[] = {"HTTP_PROXY=http://10.0.0.1:1", NULL};
	aks_agent_spawn sp = {.shell = "echo $HTTP_PROXY", .env = env, .env_clear = true};
	assert_int_equal(aks__agent_exec(fx.t.conn, &sp, res, NULL, NULL, NULL), AKS_OK);
	snprintf(want, sizeof(want), "http://127.0.0.1:%u\n", port);
	size_t len;
	const char *got = aks_result_get_stdout(res, &len);
	assert_int_equal(len, strlen(want));
	assert_memory_equal(got, want, len);
	aks_result_free(res);
	stop();
	unlink(fx.log);
}

static void t_http_allowed_and_blocked(void **state)
{
	(void)state;
	start_with(default_allow);
	run_out o;
	runf(&o, "curl -sS http://allowed.test:%u/x?y=1", srv.port);
	assert_int_equal(o.exit_code, 0);
	char want[200];
	snprintf(want, sizeof(want), "hello allowed.test:%u body=0\n", srv.port);
	assert_string_equal(o.out, want);
	pthread_mutex_lock(&srv.mu);
	assert_non_null(strstr(srv.last_head, "GET /x?y=1 HTTP/1.1\r\n"));
	assert_non_null(strstr(srv.last_head, "Connection: close"));
	assert_null(strcasestr(srv.last_head, "Proxy-Connection"));
	pthread_mutex_unlock(&srv.mu);
	/* a name no entry allows: 403 at once, saying why */
	unsigned before = srv.requests;
	runf(&o, "curl -s -w '%%{http_code}' http://blocked.test:%u/", srv.port);
	assert_non_null(strstr(o.out, "no network_allow entry allows blocked.test"));
	assert_non_null(strstr(o.out, "403"));
	assert_int_equal(srv.requests, before);
	/* the Host of a plain request must be the URL's */
	runf(&o, "curl -s -w '%%{http_code}' -H 'Host: blocked.test' http://allowed.test:%u/",
	     srv.port);
	assert_non_null(strstr(o.out, "403"));
	assert_non_null(strstr(o.out, "Host 'blocked.test'"));
	assert_int_equal(srv.requests, before);
	assert_int_equal(aks_egress_refused(fx.egress), 2);
	/* a principal cannot forge a field of the line: quoted, its quote made ', its newline
	 * escaped (by the host's logger) */
	aks_egress_set_caller(fx.egress, caller("evil\" dest=ok.test:1\negress allowed"));
	runf(&o, "curl -s http://blocked.test:%u/", srv.port);
	stop();
	char *log = slurp(fx.log);
	char line[300];
	snprintf(line, sizeof(line),
	         "egress allowed sandbox=sb-1 session=default:p conversation=conv-1 "
	         "principal=agent-7 dest=allowed.test:%u",
	         srv.port);
	assert_non_null(strstr(log, line));
	assert_non_null(strstr(log, "rule=\"allowed.test\""));
	snprintf(line, sizeof(line),
	         "egress refused sandbox=sb-1 session=default:p conversation=conv-1 "
	         "principal=agent-7 dest=blocked.test:%u",
	         srv.port);
	assert_non_null(strstr(log, line));
	snprintf(line, sizeof(line),
	         "principal=\"evil' dest=ok.test:1\\x0aegress allowed\" dest=blocked.test:%u",
	         srv.port);
	if (!strstr(log, line))
		fail_msg("no escaped principal in:\n%s", log);
	free(log);
	unlink(fx.log);
}

static void t_post_and_download(void **state)
{
	(void)state;
	start_with(default_allow);
	run_out o;
	/* 5 MiB up and 20 MiB down, both through the credit windows */
	runf(&o,
	     "head -c 5242880 /dev/zero | curl -sS --data-binary @- http://allowed.test:%u/up && "
	     "curl -sS http://allowed.test:%u/bytes/20971520 | wc -c",
	     srv.port, srv.port);
	assert_int_equal(o.exit_code, 0);
	char want[200];
	snprintf(want, sizeof(want), "hello allowed.test:%u body=5242880\n20971520\n", srv.port);
	assert_string_equal(o.out, want);
	stop();
	unlink(fx.log);
}

static void t_socks(void **state)
{
	(void)state;
	start_with(default_allow);
	run_out o;
	runf(&o, "curl -sS --proxy \"$ALL_PROXY\" http://allowed.test:%u/s", srv.port);
	assert_int_equal(o.exit_code, 0);
	assert_non_null(strstr(o.out, "hello allowed.test"));
	unsigned before = srv.requests;
	runf(&o, "curl -sS --proxy \"$ALL_PROXY\" http://blocked.test:%u/s", srv.port);
	assert_int_equal(o.exit_code, 97); /* CURLE_PROXY: the SOCKS reply said no */
	assert_int_equal(srv.requests, before);
	assert_int_equal(aks_egress_refused(fx.egress), 1);
	stop();
	unlink(fx.log);
}

static void t_special_addresses(void **state)
{
	(void)state;
	static const char *const allow[] = {"allowed.test", "private.test", "0.0.0.0/0",
	                                    "meta.test", NULL};
	start_with(allow);
	run_out o;
	/* a name that resolves into a private range; the metadata address by name and as
	 * itself; loopback under a catch-all CIDR */
	runf(&o, "curl -s http://private.test/");
	assert_non_null(strstr(o.out, "private.test resolves to 10.255.255.1, a private address"));
	runf(&o, "curl -s http://meta.test/latest/meta-data/");
	assert_non_null(strstr(o.out, "meta.test resolves to 169.254.169.254, a metadata address"));
	runf(&o, "curl -s http://169.254.169.254/latest/meta-data/");
	/* no_proxy names loopback (a sandbox's own servers): ask the proxy for it here */
	assert_non_null(strstr(o.out, "169.254.169.254 is a metadata address"));
	runf(&o, "no_proxy= NO_PROXY= curl -s http://127.0.0.1:%u/", srv.port);
	assert_non_null(strstr(o.out, "127.0.0.1 is a loopback address"));
	/* allowed.test maps to 127.0.0.1 too: a name must not lead into loopback either */
	runf(&o, "curl -s http://allowed.test:%u/", srv.port);
	assert_non_null(strstr(o.out, "allowed.test resolves to 127.0.0.1, a loopback address"));
	assert_int_equal(aks_egress_refused(fx.egress), 5);
	stop();
	unlink(fx.log);
}

static void t_cidr_and_port(void **state)
{
	(void)state;
	char entry[64];
	snprintf(entry, sizeof(entry), "127.0.0.1/32:%u", srv.port);
	const char *const allow[] = {entry, NULL};
	start_with(allow);
	run_out o;
	runf(&o, "no_proxy= NO_PROXY= curl -sS http://127.0.0.1:%u/c", srv.port);
	assert_int_equal(o.exit_code, 0);
	assert_non_null(strstr(o.out, "hello 127.0.0.1"));
	/* another port of the same address */
	runf(&o, "no_proxy= NO_PROXY= curl -s http://127.0.0.1:%u/c",
	     srv.port == 65535 ? 1 : srv.port + 1);
	assert_non_null(strstr(o.out, "127.0.0.1 is a loopback address; only a network_allow CIDR "
	                              "entry inside that range allows it"));
	stop();
	unlink(fx.log);
}

/* ---- TLS through CONNECT: a real server (openssl s_server) with a certificate of the test -- */

typedef struct tls_server {
	char dir[64];
	unsigned port;
	pid_t pid;
} tls_server;

static unsigned free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sin);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	close(fd);
	return ntohs(sin.sin_port);
}

static void tls_start(tls_server *t)
{
	snprintf(t->dir, sizeof(t->dir), "/tmp/aks-egress-tls-XXXXXX");
	assert_non_null(mkdtemp(t->dir));
	char cmd[1024];
	snprintf(cmd, sizeof(cmd),
	         "cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
	         "-nodes -keyout key.pem -out cert.pem -days 2 -subj /CN=allowed.test "
	         "-addext subjectAltName=DNS:allowed.test,DNS:blocked.test 2>/dev/null",
	         t->dir);
	assert_int_equal(system(cmd), 0);
	t->port = free_port();
	t->pid = fork();
	assert_true(t->pid >= 0);
	if (t->pid == 0) {
		char accept_at[32];
		snprintf(accept_at, sizeof(accept_at), "127.0.0.1:%u", t->port);
		if (chdir(t->dir) < 0)
			_exit(127);
		int devnull = open("/dev/null", O_RDWR);
		dup2(devnull, 0);
		dup2(devnull, 1);
		dup2(devnull, 2);
		execlp("openssl", "openssl", "s_server", "-accept", accept_at, "-cert", "cert.pem",
		       "-key", "key.pem", "-www", "-quiet", (char *)NULL);
		_exit(127);
	}
	/* until it listens */
	for (int i = 0; i < 200; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in sin = {.sin_family = AF_INET,
		                          .sin_port = htons((uint16_t)t->port),
		                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		int rc = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
		close(fd);
		if (rc == 0)
			return;
		usleep(20000);
	}
	fail_msg("openssl s_server did not listen");
}

static void tls_stop(tls_server *t)
{
	kill(t->pid, SIGTERM);
	waitpid(t->pid, NULL, 0);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", t->dir);
	assert_int_equal(system(cmd), 0);
}

static const char *const sni_client =
    "import os,socket,ssl,sys\n"
    "port=int(os.environ['http_proxy'].rsplit(':',1)[1])\n"
    "target,sni,ca=sys.argv[1],sys.argv[2],sys.argv[3]\n"
    "s=socket.create_connection(('127.0.0.1',port))\n"
    "s.sendall(('CONNECT %s HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n'%(target,target)).encode())\n"
    "head=b''\n"
    "while not head.endswith(b'\\r\\n\\r\\n'): head+=s.recv(1)\n"
    "print(head.split(b'\\r\\n')[0].decode())\n"
    "ctx=ssl.create_default_context(cafile=ca)\n"
    "try:\n"
    "  t=ctx.wrap_socket(s,server_hostname=sni)\n"
    "  t.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n'); print('served', b's_server' in t.recv(65536))\n"
    "except (OSError,ssl.SSLError) as e: print('failed', type(e).__name__)\n";

static void t_tls(void **state)
{
	(void)state;
	tls_server tls;
	tls_start(&tls);
	start_with(default_allow);
	run_out o;
	/* curl and Python's urllib, each through HTTPS_PROXY */
	runf(&o,
	     "curl -sS --cacert %s/cert.pem https://allowed.test:%u/ | grep -q s_server && echo "
	     "served",
	     tls.dir, tls.port);
	assert_string_equal(o.out, "served\n");
	runf(&o,
	     "python3 -c \"import ssl,urllib.request as u; "
	     "c=ssl.create_default_context(cafile='%s/cert.pem'); "
	     "print(b's_server' in u.urlopen('https://allowed.test:%u/',context=c).read())\"",
	     tls.dir, tls.port);
	assert_string_equal(o.out, "True\n");
	/* a name other than the CONNECT target in the ClientHello: cut before the server sees it */
	char path[] = "/tmp/aks-egress-sni-XXXXXX";
	int fd = mkstemp(path);
	assert_int_equal(write(fd, sni_client, strlen(sni_client)), (ssize_t)strlen(sni_client));
	close(fd);
	runf(&o, "python3 %s allowed.test:%u allowed.test %s/cert.pem", path, tls.port, tls.dir);
	assert_string_equal(o.out, "HTTP/1.1 200 Connection established\nserved True\n");
	unsigned before = aks_egress_refused(fx.egress);
	runf(&o, "python3 %s allowed.test:%u blocked.test %s/cert.pem", path, tls.port, tls.dir);
	assert_string_equal(o.out, "HTTP/1.1 200 Connection established\nfailed "
	                           "ConnectionResetError\n");
	/* the refusal is counted when the relay ends the stream: give it a moment */
	for (int i = 0; i < 100 && aks_egress_refused(fx.egress) == before; i++)
		usleep(10000);
	assert_int_equal(aks_egress_refused(fx.egress), before + 1);
	unlink(path);
	stop();
	char *log = slurp(fx.log);
	assert_non_null(strstr(log, "the TLS server name 'blocked.test' is not the destination "
	                            "allowed.test"));
	free(log);
	unlink(fx.log);
	tls_stop(&tls);
}

/* A program that speaks to the proxy by hand: malformed requests and many connections. */
static const char *const raw_client =
    "import os,socket,sys\n"
    "port=int(os.environ['http_proxy'].rsplit(':',1)[1])\n"
    "def ask(data):\n"
    "  s=socket.create_connection(('127.0.0.1',port)); s.sendall(data)\n"
    "  r=b''\n"
    "  while True:\n"
    "    b=s.recv(4096)\n"
    "    if not b: break\n"
    "    r+=b\n"
    "  s.close(); return r.split(b'\\r\\n')[0].decode()\n"
    "print(ask(b'CONNECT nonsense HTTP/1.1\\r\\n\\r\\n'))\n"
    "print(ask(b'GET / HTTP/1.1\\r\\nHost: allowed.test\\r\\n\\r\\n'))\n"
    "print(ask(b'GET http://allowed.test/ HTTP/1.1\\r\\nX: a\\r\\n b\\r\\n\\r\\n'))\n"
    "print(ask(b'GET https://allowed.test/ HTTP/1.1\\r\\n\\r\\n'))\n"
    "print(ask(b'X'*20000))\n"
    "held=[]; reset=0\n"
    "for i in range(300):\n"
    "  try:\n"
    "    s=socket.create_connection(('127.0.0.1',port)); held.append(s)\n"
    "  except OSError: reset+=1\n"
    "import select\n"
    "pending=list(held)\n"
    "while pending:\n"
    "  r,_,_=select.select(pending,[],[],1.0)\n"
    "  if not r: break\n"
    "  for s in r: pending.remove(s); reset+=1\n"
    "print('refused', reset >= 300-64 and len(pending) <= 64)\n"
    "for s in held: s.close()\n";

static void t_proxy_abuse(void **state)
{
	(void)state;
	start_with(default_allow);
	char path[] = "/tmp/aks-egress-raw-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, raw_client, strlen(raw_client)), (ssize_t)strlen(raw_client));
	close(fd);
	run_out o;
	runf(&o, "python3 %s", path);
	unlink(path);
	if (o.exit_code != 0)
		fail_msg("the client failed: %s", o.err);
	assert_string_equal(o.out, "HTTP/1.1 400 Bad Request\n"
	                           "HTTP/1.1 400 Bad Request\n"
	                           "HTTP/1.1 400 Bad Request\n"
	                           "HTTP/1.1 400 Bad Request\n"
	                           "HTTP/1.1 431 Request Header Fields Too Large\n"
	                           "refused True\n");
	/* and after all that, the proxy still serves */
	runf(&o, "curl -sS http://allowed.test:%u/after", srv.port);
	assert_int_equal(o.exit_code, 0);
	stop();
	unlink(fx.log);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_environment),       cmocka_unit_test(t_http_allowed_and_blocked),
	    cmocka_unit_test(t_post_and_download), cmocka_unit_test(t_socks),
	    cmocka_unit_test(t_special_addresses), cmocka_unit_test(t_cidr_and_port),
	    cmocka_unit_test(t_proxy_abuse),       cmocka_unit_test(t_tls),
	    cmocka_unit_test(t_old_agent_refused), cmocka_unit_test(t_window_mismatch_refused),
	};
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, setup, teardown);
}
