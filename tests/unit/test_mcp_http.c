/* Unit tests of the Streamable HTTP transport (core/mcp/mcp_http.c, mcp_http_state.c) in
 * one process, so that valgrind and the sanitizers see every path: a session's life
 * (initialize, a tools/call as events, its resumption, DELETE), refusals, and a stop that
 * cancels a call still running. The server listens on a unix socket in a temporary
 * directory; the client is a few lines of HTTP/1.1 over it. The provider is
 * local_subprocess, per call. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <aksandbox/aksandbox.h>

#include "mcp/mcp.h"
#include "mcp/mcp_http.h"

static const char *const no_env[] = {NULL};

typedef struct fixture {
	char dir[64];
	char sock[128];
	char listen[140];
	aks_settings *settings;
	aks_runtime *rt;
	pthread_t thread;
	volatile sig_atomic_t stop;
	aks__mcp_http_options opt;
	int served; /* aks__mcp_http_serve's result */
} fixture;

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0)
		;
}

static void *serve_main(void *arg)
{
	fixture *fx = arg;
	fx->served = aks__mcp_http_serve(&fx->opt, &fx->stop);
	return NULL;
}

/* The server with bearer authentication: signed_token verifies the tokens below. */
static const char unit_key[] = "unit-test-key-0123456789abcdef";
/* {"sub": "alice" | "bob", "exp": 4102444800 (2100)}, signed with unit_key. */
static const char alice_token[] = "v1.eyJzdWIiOiJhbGljZSIsImV4cCI6NDEwMjQ0NDgwMH0."
                                  "9NMOF6wSaTLldPyMBq8UjcIM-BvqdRvkuQE90P-QR-0";
static const char bob_token[] = "v1.eyJzdWIiOiJib2IiLCJleHAiOjQxMDI0NDQ4MDB9."
                                "nT5I_gvbM5I4cocZFlsTvlC3b3BmMDqBwhhnM00HF-0";

enum server_kind {
	PLAIN,
	AUTH,
	/* Small bounds, to see each one hold in a unit test's time: two sessions, ended after
	 * a second of idleness; a silent stream's keep-alive every second; a silent connection
	 * closed after two. */
	BOUNDED,
};

/* Whether the server takes connections within 5 s. Its socket file appears at bind(), a
 * moment before listen(): a connect() in between is refused. */
static bool wait_listening(const fixture *fx)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	strcpy(sa.sun_path, fx->sock);
	for (int i = 0; i < 500; i++) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return false;
		int rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
		close(fd);
		if (rc == 0)
			return true;
		sleep_ms(10);
	}
	return false;
}

static int setup_with(void **state, enum server_kind kind)
{
	bool auth = kind == AUTH;
	fixture *fx = calloc(1, sizeof(*fx));
	if (!fx)
		return -1;
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/aks-mcp-http.XXXXXX");
	if (!mkdtemp(fx->dir))
		return -1;
	char cfg[128], st[128];
	snprintf(cfg, sizeof(cfg), "%s/config.yaml", fx->dir);
	snprintf(st, sizeof(st), "%s/state", fx->dir);
	snprintf(fx->sock, sizeof(fx->sock), "%s/mcp.sock", fx->dir);
	snprintf(fx->listen, sizeof(fx->listen), "unix:%s", fx->sock);
	FILE *f = fopen(cfg, "w");
	if (!f)
		return -1;
	fprintf(f,
	        "sandbox:\n"
	        "  enabled: true\n"
	        "%s"
	        "  profiles:\n"
	        "    default: {type: local_subprocess,\n"
	        "              local_subprocess: {workdir: %s/boxes, agent: false}}\n",
	        auth ? "  principal_resolver: signed_token\n"
	               "  signed_token: {secret_env: AKS_UNIT_KEY}\n"
	             : "",
	        fx->dir);
	if (fclose(f) != 0)
		return -1;
	aks_error *err = NULL;
	if (auth)
		setenv("AKS_UNIT_KEY", unit_key, 1); /* the resolver reads its key from there */
	if (aks_settings_load(cfg, no_env, &fx->settings, &err) < 0 ||
	    aks_runtime_open(fx->settings, st, &fx->rt, &err) < 0) {
		fprintf(stderr, "setup: %s\n", err ? aks_error_message(err) : "config");
		aks_error_free(err);
		return -1;
	}
	fx->opt.server = (aks__mcp_options){
	    .rt = fx->rt, .settings = fx->settings, .conversation_id = "mcp-http-unit"};
	fx->opt.listen = fx->listen;
	fx->opt.max_body = 64 << 10;
	fx->opt.drain_seconds = 0;
	if (auth)
		fx->opt.resolver = aks_settings_get_resolver(fx->settings);
	if (kind == BOUNDED) {
		fx->opt.max_sessions = 2;
		fx->opt.session_idle_seconds = 1;
		fx->opt.keepalive_seconds = 1;
		fx->opt.connection_timeout_seconds = 2;
	}
	if (pthread_create(&fx->thread, NULL, serve_main, fx) != 0)
		return -1;
	*state = fx;
	return wait_listening(fx) ? 0 : -1;
}

static int setup(void **state)
{
	return setup_with(state, PLAIN);
}

static int setup_auth(void **state)
{
	return setup_with(state, AUTH);
}

static int setup_bounded(void **state)
{
	return setup_with(state, BOUNDED);
}

static int teardown(void **state)
{
	fixture *fx = *state;
	fx->stop = 1;
	pthread_join(fx->thread, NULL);
	int served = fx->served;
	bool socket_left = access(fx->sock, F_OK) == 0;
	aks_runtime_close(fx->rt);
	aks_settings_free(fx->settings);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx->dir);
	int rc = system(cmd);
	free(fx);
	return rc == 0 && served == 0 && !socket_left ? 0 : -1;
}

/* ---- a small HTTP/1.1 client over the socket ------------------------------------------- */

typedef struct reply {
	int status;
	char *raw; /* headers and body, as received */
	size_t len;
} reply;

static int dial(const fixture *fx)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	strcpy(sa.sun_path, fx->sock);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return; /* the server may close on us (an oversized body) */
		p += w;
		n -= (size_t)w;
	}
}

/* Sends one request (Connection: close); extra headers are "Name: value\r\n" lines. */
static int start_request(const fixture *fx, const char *method, const char *headers,
                         const char *body)
{
	int fd = dial(fx);
	char head[1024];
	size_t blen = body ? strlen(body) : 0;
	int n =
	    snprintf(head, sizeof(head),
	             "%s /mcp HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
	             "Content-Type: application/json\r\n"
	             "Accept: application/json, text/event-stream\r\n%sContent-Length: %zu\r\n\r\n",
	             method, headers ? headers : "", blen);
	send_all(fd, head, (size_t)n);
	if (blen)
		send_all(fd, body, blen);
	return fd;
}

/* Reads into r until the server closes (then closes fd), or until `until` appears (then
 * leaves fd open for more). */
static void read_more(int fd, reply *r, const char *until)
{
	size_t cap = r->raw ? r->len + 4096 : 4096;
	r->raw = realloc(r->raw, cap);
	assert_non_null(r->raw);
	for (;;) {
		if (r->len + 1 >= cap) {
			cap *= 2;
			r->raw = realloc(r->raw, cap);
			assert_non_null(r->raw);
		}
		ssize_t got = recv(fd, r->raw + r->len, cap - r->len - 1, 0);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			close(fd);
			break;
		}
		r->len += (size_t)got;
		r->raw[r->len] = '\0';
		if (until && strstr(r->raw, until))
			break;
	}
	r->raw[r->len] = '\0';
	if (sscanf(r->raw, "HTTP/1.1 %d", &r->status) != 1)
		r->status = -1;
}

static reply read_reply(int fd)
{
	reply r = {0};
	read_more(fd, &r, NULL);
	return r;
}

static reply request(const fixture *fx, const char *method, const char *headers, const char *body)
{
	return read_reply(start_request(fx, method, headers, body));
}

static void reply_clear(reply *r)
{
	free(r->raw);
	r->raw = NULL;
}

/* "Mcp-Session-Id: <id>\r\n" from a reply, as a header line to send back. */
static void session_header(const reply *r, char *out, size_t size)
{
	const char *p = strcasestr(r->raw, "\r\nMcp-Session-Id: ");
	assert_non_null(p);
	p += strlen("\r\nMcp-Session-Id: ");
	size_t n = strcspn(p, "\r");
	assert_int_equal(n, 32);
	snprintf(out, size, "Mcp-Session-Id: %.*s\r\n", (int)n, p);
}

static const char initialize[] =
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
    "\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"unit\",\"version\":\"1\"}}}";

/* ---- tests ------------------------------------------------------------------------------ */

/* Opens a session: its "Mcp-Session-Id: <id>\r\n" header line into sid. */
static void open_session(const fixture *fx, char *sid, size_t size)
{
	reply r = request(fx, "POST", NULL, initialize);
	assert_int_equal(r.status, 200);
	session_header(&r, sid, size);
	reply_clear(&r);
}

/* The server still serves: a new session opens. */
static void assert_serving(const fixture *fx)
{
	char sid[64];
	open_session(fx, sid, sizeof(sid));
}

static void test_session_life(void **state)
{
	fixture *fx = *state;
	reply r = request(fx, "POST", NULL, initialize);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.raw, "\"protocolVersion\":\"2025-11-25\""));
	char sid[64];
	session_header(&r, sid, sizeof(sid));
	reply_clear(&r);

	r = request(fx, "POST", sid,
	            "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
	assert_int_equal(r.status, 202);
	reply_clear(&r);

	/* A tools/call answers as events: the priming one, then the response. */
	r = request(fx, "POST", sid,
	            "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
	            "\"run_command\",\"arguments\":{\"command\":\"echo hi-there\"}}}");
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.raw, "text/event-stream"));
	const char *prime = strstr(r.raw, "id: 2-0\nretry: 1000\ndata: \n\n");
	const char *answer = strstr(r.raw, "id: 2-1\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,");
	assert_non_null(prime);
	assert_non_null(answer);
	assert_true(prime < answer);
	assert_non_null(strstr(answer, "hi-there"));
	reply_clear(&r);

	/* The stream is kept: Last-Event-ID 2-0 replays the response. */
	char resume[160];
	snprintf(resume, sizeof(resume), "%sLast-Event-ID: 2-0\r\n", sid);
	r = request(fx, "GET", resume, NULL);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.raw, "id: 2-1\ndata: {"));
	assert_null(strstr(r.raw, "id: 2-0"));
	reply_clear(&r);

	r = request(fx, "DELETE", sid, NULL);
	assert_int_equal(r.status, 200);
	reply_clear(&r);
	r = request(fx, "POST", sid, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}");
	assert_int_equal(r.status, 404);
	reply_clear(&r);
}

static void test_refusals(void **state)
{
	fixture *fx = *state;
	reply r = request(fx, "POST", NULL, "{\"jsonrpc\":\"2.0\",\"id\":1,");
	assert_int_equal(r.status, 400);
	assert_non_null(strstr(r.raw, "-32700"));
	reply_clear(&r);

	r = request(fx, "POST", NULL, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
	assert_int_equal(r.status, 400);
	assert_non_null(strstr(r.raw, "Mcp-Session-Id"));
	reply_clear(&r);

	r = request(fx, "POST", "Mcp-Session-Id: 00000000000000000000000000000000\r\n",
	            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}");
	assert_int_equal(r.status, 404);
	reply_clear(&r);

	r = request(fx, "POST", "Origin: http://rebound.example\r\n", initialize);
	assert_int_equal(r.status, 403);
	reply_clear(&r);

	r = request(fx, "PUT", NULL, NULL);
	assert_int_equal(r.status, 405);
	reply_clear(&r);

	/* Over the bound (64 KiB here): read, dropped, answered 413. */
	size_t big = 100 << 10;
	char *body = malloc(big + 1);
	assert_non_null(body);
	memset(body, ' ', big);
	body[big] = '\0';
	r = request(fx, "POST", NULL, body);
	free(body);
	assert_int_equal(r.status, 413);
	reply_clear(&r);

	/* Still serving. */
	assert_serving(fx);
}

/* A stop with no grace cancels a call that runs; its stream ends, and serving returns. */
static void test_stop_cancels(void **state)
{
	fixture *fx = *state;
	char sid[64];
	open_session(fx, sid, sizeof(sid));
	reply r;
	int fd =
	    start_request(fx, "POST", sid,
	                  "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{"
	                  "\"name\":\"run_command\",\"arguments\":{\"command\":\"sleep 30\"}}}");
	r = (reply){0};
	read_more(fd, &r, "id: 2-0"); /* the call runs */
	fx->stop = 1;
	read_more(fd, &r, NULL); /* ends when the server ends the stream */
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.raw, "id: 2-0"));
	assert_null(strstr(r.raw, "id: 2-1"));
	reply_clear(&r);
	pthread_join(fx->thread, NULL);
	fx->stop = 0;
	/* teardown joins again: run a fresh server so it has one to stop */
	assert_int_equal(fx->served, 0);
	assert_int_equal(pthread_create(&fx->thread, NULL, serve_main, fx), 0);
	assert_true(wait_listening(fx));
}

/* Bearer tokens: none or a forged one is 401 with the challenge; a user's session is unknown
 * to another user; the metadata is public. */
static void test_auth(void **state)
{
	fixture *fx = *state;
	reply r = request(fx, "POST", NULL, initialize);
	assert_int_equal(r.status, 401);
	assert_non_null(strstr(r.raw, "WWW-Authenticate: Bearer resource_metadata=\""));
	reply_clear(&r);
	r = request(fx, "POST", "Authorization: Bearer v1.e30.AAAA\r\n", initialize);
	assert_int_equal(r.status, 401);
	assert_non_null(strstr(r.raw, "error=\"invalid_token\""));
	reply_clear(&r);

	char alice[256], bob[256];
	snprintf(alice, sizeof(alice), "Authorization: Bearer %s\r\n", alice_token);
	snprintf(bob, sizeof(bob), "Authorization: Bearer %s\r\n", bob_token);
	r = request(fx, "POST", alice, initialize);
	assert_int_equal(r.status, 200);
	char sid[64], as_alice[400], as_bob[400];
	session_header(&r, sid, sizeof(sid));
	reply_clear(&r);
	snprintf(as_alice, sizeof(as_alice), "%s%s", alice, sid);
	snprintf(as_bob, sizeof(as_bob), "%s%s", bob, sid);
	const char *ping = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}";
	r = request(fx, "POST", as_bob, ping);
	assert_int_equal(r.status, 404);
	reply_clear(&r);
	r = request(fx, "POST", as_alice, ping);
	assert_int_equal(r.status, 200);
	reply_clear(&r);

	int fd = dial(fx);
	const char get[] = "GET /.well-known/oauth-protected-resource/mcp HTTP/1.1\r\nHost: x\r\n"
	                   "Connection: close\r\n\r\n";
	send_all(fd, get, sizeof(get) - 1);
	r = read_reply(fd);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.raw, "\"bearer_methods_supported\":[\"header\"]"));
	reply_clear(&r);
}

/* The session table is bounded: a full one is 503 (and opens nothing) until an idle session
 * ends, which its client then hears as 404. */
static void test_session_bounds(void **state)
{
	fixture *fx = *state;
	char first[64], second[64];
	open_session(fx, first, sizeof(first));
	open_session(fx, second, sizeof(second));
	reply r = request(fx, "POST", NULL, initialize);
	assert_int_equal(r.status, 503);
	assert_non_null(strstr(r.raw, "too many sessions"));
	assert_null(strcasestr(r.raw, "Mcp-Session-Id:"));
	reply_clear(&r);

	sleep_ms(2500); /* both idle past their second */
	assert_serving(fx);
	const char *ping = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}";
	r = request(fx, "POST", first, ping);
	assert_int_equal(r.status, 404);
	reply_clear(&r);
}

/* A stream with nothing to say hears a keep-alive comment; the call's answer follows. */
static void test_keepalive(void **state)
{
	fixture *fx = *state;
	char sid[64];
	open_session(fx, sid, sizeof(sid));
	reply r;
	r = request(
	    fx, "POST", sid,
	    "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{"
	    "\"name\":\"run_command\",\"arguments\":{\"command\":\"sleep 3; echo woke\"}}}");
	assert_int_equal(r.status, 200);
	const char *alive = strstr(r.raw, "\n: keep-alive\n\n");
	const char *answer = strstr(r.raw, "id: 2-1\ndata: {");
	assert_non_null(alive);
	assert_non_null(answer);
	assert_true(alive < answer);
	assert_non_null(strstr(answer, "woke"));
	reply_clear(&r);
}

/* A connection that sends nothing is closed by the server, which goes on serving. */
static void test_silent_connection(void **state)
{
	fixture *fx = *state;
	int fd = dial(fx);
	struct timeval limit = {.tv_sec = 30};
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit)), 0);
	char byte;
	/* 0: closed by the server; -1 (EAGAIN) would be our own 30 s limit. */
	assert_int_equal(recv(fd, &byte, 1, 0), 0);
	close(fd);
	reply r = request(fx, "POST", NULL, initialize);
	assert_int_equal(r.status, 200);
	reply_clear(&r);
}

/* A body declared past 16 times the bound is refused from its headers (413, nothing read);
 * one that streams past it undeclared (chunked) has its connection closed; either way the
 * server goes on serving. */
static void test_oversize(void **state)
{
	fixture *fx = *state;
	int fd = dial(fx);
	const char huge[] = "POST /mcp HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
	                    "Content-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n{";
	send_all(fd, huge, sizeof(huge) - 1);
	reply r = read_reply(fd);
	assert_int_equal(r.status, 413);
	reply_clear(&r);

	fd = dial(fx);
	const char chunked[] =
	    "POST /mcp HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
	    "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
	send_all(fd, chunked, sizeof(chunked) - 1);
	static char chunk[(64 << 10) + 16];
	int head = snprintf(chunk, sizeof(chunk), "%x\r\n", 64 << 10);
	memset(chunk + head, ' ', 64 << 10);
	memcpy(chunk + head + (64 << 10), "\r\n", 2);
	for (int i = 0; i < 40; i++) /* 2.5 MiB: past 16 x 64 KiB */
		send_all(fd, chunk, (size_t)head + (64 << 10) + 2);
	r = read_reply(fd);
	assert_int_not_equal(r.status, 200);
	assert_int_not_equal(r.status, 413);
	reply_clear(&r);

	assert_serving(fx);
}

/* Finished streams are kept for resumption, 64 a session at most and keep_seconds long:
 * the state module alone, with its clock moved by hand. */
static void test_stream_retention(void **state)
{
	fixture *fx = *state;
	struct http_state st;
	aks__http_state_init(&st, &fx->opt.server, 4, 3600);
	bool full = true;
	struct http_session *s = aks__http_session_new(&st, false, NULL, &full);
	assert_non_null(s);
	assert_false(full);
	bool closed = true;
	struct http_stream *t =
	    aks__http_session_handle(s, initialize, strlen(initialize), true, NULL, &closed);
	assert_non_null(t);
	assert_false(closed);
	for (int i = 0; i < 99; i++) {
		char ping[64];
		int n = snprintf(ping, sizeof(ping),
		                 "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"ping\"}", i + 2);
		assert_non_null(aks__http_session_handle(s, ping, (size_t)n, true, NULL, &closed));
	}
	size_t kept = 0;
	pthread_mutex_lock(&st.mu);
	for (t = s->streams; t; t = t->next)
		kept += t->done;
	pthread_mutex_unlock(&st.mu);
	assert_int_equal(kept, 100); /* all answered, none forgotten yet */

	assert_int_equal(aks__http_state_sweep(&st), 0);
	pthread_mutex_lock(&st.mu);
	kept = 0;
	uint64_t oldest = UINT64_MAX;
	for (t = s->streams; t; t = t->next) {
		kept++;
		oldest = t->id < oldest ? t->id : oldest;
	}
	/* The newest 64 are kept; one being read is never forgotten */
	assert_int_equal(kept, 64);
	assert_int_equal(oldest, 100 - 64 + 1);
	s->streams->reading = true;
	for (t = s->streams; t; t = t->next)
		t->done_at -= 301;
	pthread_mutex_unlock(&st.mu);
	aks__http_state_sweep(&st);
	pthread_mutex_lock(&st.mu);
	assert_non_null(s->streams);
	assert_null(s->streams->next);
	s->streams->reading = false;
	pthread_mutex_unlock(&st.mu);
	aks__http_session_unref(s);
	aks__http_state_clear(&st);
	aks__http_state_destroy(&st);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_session_life, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stop_cancels, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_auth, setup_auth, teardown),
	    cmocka_unit_test_setup_teardown(test_session_bounds, setup_bounded, teardown),
	    cmocka_unit_test_setup_teardown(test_keepalive, setup_bounded, teardown),
	    cmocka_unit_test_setup_teardown(test_silent_connection, setup_bounded, teardown),
	    cmocka_unit_test_setup_teardown(test_oversize, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stream_retention, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
