/*
 * tests/unit/test_k8s_exec.c - the kubernetes plugin's exec over WebSocket
 * (libwebsockets) against a canned API server on loopback (a thread here that
 * speaks the WebSocket handshake and framing of RFC 6455 and the channel
 * protocol): v5.channel.k8s.io offered first with v4 accepted, stdin sent and
 * half-closed on v5 (channel 255), the command in the URL, the status on
 * channel 3 turned into the exit code, and a refused handshake explained with
 * the API server's own 403. The real server (1.20, v4 only) is exercised by
 * tests/integration/test_kubernetes; no server here speaks v5, hence this.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "aks_base64.h"
#include "core/plugin/host_api.h"
#include "k8s_internal.h"

/* ---- SHA-1 and base64, for Sec-WebSocket-Accept -----------------------------------------------
 */

static uint32_t rol(uint32_t v, int n)
{
	return v << n | v >> (32 - n);
}

static void sha1(const unsigned char *d, size_t n, unsigned char out[20])
{
	uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
	size_t total = ((n + 8) / 64 + 1) * 64;
	unsigned char *m = calloc(1, total);
	memcpy(m, d, n);
	m[n] = 0x80;
	uint64_t bits = (uint64_t)n * 8;
	for (int i = 0; i < 8; i++)
		m[total - 1 - i] = (unsigned char)(bits >> (8 * i));
	for (size_t off = 0; off < total; off += 64) {
		uint32_t w[80];
		for (int i = 0; i < 16; i++)
			w[i] = (uint32_t)m[off + 4 * i] << 24 | (uint32_t)m[off + 4 * i + 1] << 16 |
			       (uint32_t)m[off + 4 * i + 2] << 8 | m[off + 4 * i + 3];
		for (int i = 16; i < 80; i++)
			w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
		uint32_t a = h[0], b = h[1], c = h[2], dd = h[3], e = h[4];
		for (int i = 0; i < 80; i++) {
			uint32_t f, k;
			if (i < 20)
				f = (b & c) | (~b & dd), k = 0x5A827999;
			else if (i < 40)
				f = b ^ c ^ dd, k = 0x6ED9EBA1;
			else if (i < 60)
				f = (b & c) | (b & dd) | (c & dd), k = 0x8F1BBCDC;
			else
				f = b ^ c ^ dd, k = 0xCA62C1D6;
			uint32_t t = rol(a, 5) + f + e + k + w[i];
			e = dd, dd = c, c = rol(b, 30), b = a, a = t;
		}
		h[0] += a, h[1] += b, h[2] += c, h[3] += dd, h[4] += e;
	}
	free(m);
	for (int i = 0; i < 20; i++)
		out[i] = (unsigned char)(h[i / 4] >> (24 - 8 * (i % 4)));
}

/* ---- the canned server ------------------------------------------------------------------------
 */

typedef struct srv_state {
	int lfd, port;
	pthread_t thread;
	bool offer_v5;    /* answer v5 when the client offers it */
	bool forbid;      /* 403 for everything */
	int refuse_ws;    /* refuse this many more WebSocket handshakes with a 400 */
	int handshakes;   /* WebSocket handshakes seen */
	int exit_code;    /* what channel 3 reports */
	size_t stdin_len; /* v4: how many stdin bytes to wait for */
	/* seen */
	char protocols[256], chosen[64], path[65536];
	bool half_closed;
	aks_buf stdin_got;
} srv_state;

static srv_state S;

static int read_all(int fd, void *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, (char *)buf + got, n - got);
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

/* One client frame (masked): opcode and payload into p. */
static int read_frame(int fd, int *op, aks_buf *p)
{
	unsigned char h[2];
	if (read_all(fd, h, 2) < 0)
		return -1;
	*op = h[0] & 15;
	uint64_t len = h[1] & 127;
	if (len == 126) {
		unsigned char e[2];
		if (read_all(fd, e, 2) < 0)
			return -1;
		len = (uint64_t)e[0] << 8 | e[1];
	} else if (len == 127) {
		unsigned char e[8];
		if (read_all(fd, e, 8) < 0)
			return -1;
		len = 0;
		for (int i = 0; i < 8; i++)
			len = len << 8 | e[i];
	}
	unsigned char mask[4] = {0};
	if ((h[1] & 128) && read_all(fd, mask, 4) < 0)
		return -1;
	p->len = 0;
	unsigned char *d = malloc(len + 1);
	if (read_all(fd, d, len) < 0) {
		free(d);
		return -1;
	}
	for (uint64_t i = 0; i < len; i++)
		d[i] ^= mask[i % 4];
	aks__buf_append(p, d, len);
	free(d);
	return 0;
}

static void send_frame(int fd, int op, const void *data, size_t len)
{
	unsigned char h[10];
	size_t hl = 2;
	h[0] = (unsigned char)(0x80 | op);
	if (len < 126) {
		h[1] = (unsigned char)len;
	} else if (len < 65536) {
		h[1] = 126;
		h[2] = (unsigned char)(len >> 8);
		h[3] = (unsigned char)len;
		hl = 4;
	} else {
		h[1] = 127;
		for (int i = 0; i < 8; i++)
			h[2 + i] = (unsigned char)((uint64_t)len >> (56 - 8 * i));
		hl = 10;
	}
	if (write(fd, h, hl) < 0 || (len && write(fd, data, len) < 0))
		perror("write");
}

static void send_channel(int fd, int ch, const char *s, size_t len)
{
	char *m = malloc(len + 1);
	m[0] = (char)ch;
	memcpy(m + 1, s, len);
	send_frame(fd, 2, m, len + 1);
	free(m);
}

static const char *header(const char *req, const char *name, char *out, size_t outlen)
{
	size_t nl = strlen(name);
	for (const char *p = req; (p = strstr(p, "\r\n")); p += 2)
		if (strncasecmp(p + 2, name, nl) == 0 && p[2 + nl] == ':') {
			const char *v = p + 3 + nl;
			while (*v == ' ')
				v++;
			snprintf(out, outlen, "%.*s", (int)strcspn(v, "\r"), v);
			return out;
		}
	return NULL;
}

static void serve_one(int c)
{
	char req[65536 + 4096];
	size_t n = 0;
	while (n < sizeof(req) - 1) {
		ssize_t r = read(c, req + n, 1); /* byte by byte: no frame data eaten */
		if (r <= 0)
			return;
		n++;
		req[n] = '\0';
		if (n >= 4 && memcmp(req + n - 4, "\r\n\r\n", 4) == 0)
			break;
	}
	sscanf(req, "GET %65535s", S.path);
	char key[128], upgrade[64];
	bool is_ws = header(req, "Upgrade", upgrade, sizeof(upgrade)) != NULL;
	if (!header(req, "Sec-WebSocket-Protocol", S.protocols, sizeof(S.protocols)))
		S.protocols[0] = '\0';
	if (is_ws)
		S.handshakes++;
	bool refused = is_ws && S.refuse_ws > 0 && S.refuse_ws--;
	if (S.forbid || !is_ws || refused) {
		const char *body =
		    S.forbid
		        ? "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"pods "
		          "\\\"p\\\" "
		          "is forbidden: User \\\"bob\\\" cannot get resource \\\"pods/exec\\\" in "
		          "API group \\\"\\\" in the namespace \\\"ns\\\"\",\"code\":403}"
		        : "{\"message\":\"Upgrade request required\",\"code\":400}";
		char resp[1024];
		int len =
		    snprintf(resp, sizeof(resp),
		             "HTTP/1.1 %s\r\nContent-Type: application/json\r\n"
		             "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
		             S.forbid ? "403 Forbidden" : "400 Bad Request", strlen(body), body);
		if (write(c, resp, (size_t)len) < 0)
			perror("write");
		return;
	}
	header(req, "Sec-WebSocket-Key", key, sizeof(key));
	char cat[256];
	snprintf(cat, sizeof(cat), "%s258EAFA5-E914-47DA-95CA-C5AB0DC85B11", key);
	unsigned char dig[20];
	sha1((unsigned char *)cat, strlen(cat), dig);
	char *accept = aks__base64_encode(dig, 20, AKS_BASE64_STD);
	snprintf(S.chosen, sizeof(S.chosen), "%s",
	         S.offer_v5 && strstr(S.protocols, K8S_PROTO_V5) ? K8S_PROTO_V5 : K8S_PROTO_V4);
	char resp[512];
	int len = snprintf(resp, sizeof(resp),
	                   "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
	                   "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n"
	                   "Sec-WebSocket-Protocol: %s\r\n\r\n",
	                   accept, S.chosen);
	free(accept);
	if (write(c, resp, (size_t)len) < 0)
		return;
	send_channel(c, K8S_CH_STDOUT, "", 0); /* as a real server: an empty first frame */
	bool v5 = strcmp(S.chosen, K8S_PROTO_V5) == 0;
	if (strstr(S.path, "stdin=true")) {
		aks_buf p = {0};
		int op;
		for (;;) {
			if (!v5 && S.stdin_got.len >= S.stdin_len)
				break; /* v4 cannot half-close: the command knows its length */
			if (read_frame(c, &op, &p) < 0 || op == 8)
				break;
			if (p.len && (unsigned char)p.data[0] == K8S_CH_STDIN)
				aks__buf_append(&S.stdin_got, p.data + 1, p.len - 1);
			if (p.len == 2 && (unsigned char)p.data[0] == K8S_CH_CLOSE &&
			    p.data[1] == 0) {
				S.half_closed = true;
				break;
			}
		}
		aks__buf_free(&p);
		/* echo what came, like cat */
		if (S.stdin_got.len)
			send_channel(c, K8S_CH_STDOUT, S.stdin_got.data, S.stdin_got.len);
	} else {
		send_channel(c, K8S_CH_STDOUT, "out\n", 4);
		send_channel(c, K8S_CH_STDERR, "err\n", 4);
	}
	char st[512];
	if (S.exit_code == 0)
		snprintf(st, sizeof(st), "{\"metadata\":{},\"status\":\"Success\"}");
	else
		snprintf(st, sizeof(st),
		         "{\"metadata\":{},\"status\":\"Failure\",\"message\":\"command terminated "
		         "with non-zero exit code\",\"reason\":\"NonZeroExitCode\",\"details\":{"
		         "\"causes\":[{\"reason\":\"ExitCode\",\"message\":\"%d\"}]}}",
		         S.exit_code);
	send_channel(c, K8S_CH_ERROR, st, strlen(st));
	send_frame(c, 8, "\x03\xe8", 2);
	shutdown(c, SHUT_WR);
	char sink[256];
	while (read(c, sink, sizeof(sink)) > 0) /* until the client closes */
		;
}

static void *serve(void *arg)
{
	(void)arg;
	for (;;) {
		int c = accept(S.lfd, NULL, NULL);
		if (c < 0)
			return NULL;
		serve_one(c);
		close(c);
	}
}

/* ---- fixture ------------------------------------------------------------------------------------
 */

static aks_provider_impl prov;
static aks_sandbox_impl sb;

static int setup(void **state)
{
	(void)state;
	S.lfd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	assert_int_equal(bind(S.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(S.lfd, 16), 0);
	socklen_t sl = sizeof(a);
	getsockname(S.lfd, (struct sockaddr *)&a, &sl);
	S.port = ntohs(a.sin_port);
	pthread_create(&S.thread, NULL, serve, NULL);
	curl_global_init(CURL_GLOBAL_ALL);
	prov.host = aks__host_api();
	prov.python = "python3";
	pthread_mutex_init(&prov.lock, NULL);
	assert_true(asprintf(&prov.conn.server, "http://127.0.0.1:%d", S.port) > 0);
	prov.conn.source = strdup("kubeconfig /k (context 'c')");
	prov.conn.token = strdup("tok");
	sb.prov = &prov;
	sb.id = strdup("ns/p");
	sb.ns = strdup("ns");
	sb.pod = strdup("p");
	aks_error *err = NULL;
	assert_int_equal(k8s_client_own(&prov, &sb.client, &err), AKS_OK);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	shutdown(S.lfd, SHUT_RDWR);
	close(S.lfd);
	pthread_join(S.thread, NULL);
	k8s_exec_ctx_free(&sb);
	free(sb.id);
	free(sb.ns);
	free(sb.pod);
	k8s_clients_free(&prov);
	k8s_conn_cfg_free(&prov.conn);
	pthread_mutex_destroy(&prov.lock);
	aks__buf_free(&S.stdin_got);
	curl_global_cleanup();
	return 0;
}

/* A call that fails the case rather than hang it. */
static const aks_call *bounded(void)
{
	static aks_call call;
	call = (aks_call){AKS_CALL_INIT, .deadline_ms = prov.host->now_ms() + 20000, .timeout = 20};
	return &call;
}

static void reset(bool v5, int code)
{
	S.offer_v5 = v5;
	S.forbid = false;
	S.refuse_ws = 0;
	S.handshakes = 0;
	S.exit_code = code;
	S.half_closed = false;
	S.stdin_got.len = 0;
	S.stdin_len = 0;
}

/* ---- cases -------------------------------------------------------------------------------------
 */

static void test_v4_command(void **state)
{
	(void)state;
	reset(false, 7);
	const char *argv[] = {"/bin/sh", "-c", "echo 'a b'&x=1", NULL};
	aks_buf out = {0}, err_b = {0};
	k8s_exec_opts o = {
	    .argv = argv, .capture = &out, .capture_err = &err_b, .capture_max = 1 << 20};
	int code = -1;
	aks_error *err = NULL;
	assert_int_equal(k8s_exec(&sb, &o, bounded(), &code, &err), AKS_OK);
	assert_int_equal(code, 7);
	assert_string_equal(out.data, "out\n");
	assert_string_equal(err_b.data, "err\n");
	/* both offered, v5 first; v4 chosen */
	assert_string_equal(S.protocols, "v5.channel.k8s.io,v4.channel.k8s.io");
	assert_string_equal(S.chosen, K8S_PROTO_V4);
	/* the path: our container, the kill wrapper, then the command, escaped */
	static const char prefix[] = "/api/v1/namespaces/ns/pods/p/exec?container=sandbox&"
	                             "command=%2Fbin%2Fsh&command=-c&command=AKS_EXEC_ID%3D";
	if (strncmp(S.path, prefix, strlen(prefix)) != 0)
		fail_msg("path %s", S.path);
	assert_non_null(strstr(S.path, "&command=%2Fworkspace&command=%2Fbin%2Fsh&command=-c&"
	                               "command=echo%20%27a%20b%27%26x%3D1&stdout=true&stderr=true"
	                               "&tty=false"));
	assert_null(strstr(S.path, "stdin=true"));
	aks__buf_free(&out);
	aks__buf_free(&err_b);
}

static void test_v5_stdin_half_close(void **state)
{
	(void)state;
	reset(true, 0);
	size_t len = 100000; /* several stdin frames */
	char *data = malloc(len);
	for (size_t i = 0; i < len; i++)
		data[i] = (char)(i * 13);
	const char *argv[] = {"cat", NULL};
	aks_buf out = {0};
	k8s_exec_opts o = {.argv = argv,
	                   .stdin_data = data,
	                   .stdin_len = len,
	                   .capture = &out,
	                   .capture_max = 1 << 20};
	int code = -1;
	aks_error *err = NULL;
	int rc = k8s_exec(&sb, &o, bounded(), &code, &err);
	if (rc != AKS_OK)
		fail_msg("%d: %s", rc, aks_error_message(err));
	assert_string_equal(S.chosen, K8S_PROTO_V5);
	assert_true(S.half_closed); /* channel 255: the program saw EOF */
	assert_int_equal(S.stdin_got.len, len);
	assert_memory_equal(S.stdin_got.data, data, len);
	assert_int_equal(out.len, len); /* binary-safe both ways */
	assert_memory_equal(out.data, data, len);
	assert_int_equal(code, 0);
	assert_non_null(strstr(S.path, "stdin=true"));
	aks__buf_free(&out);
	free(data);
}

static void test_v4_stdin(void **state)
{
	(void)state;
	reset(false, 3);
	S.stdin_len = 5;
	const char *argv[] = {"cat", NULL};
	aks_buf out = {0};
	k8s_exec_opts o = {.argv = argv,
	                   .stdin_data = "12345",
	                   .stdin_len = 5,
	                   .capture = &out,
	                   .capture_max = 64};
	int code = -1;
	aks_error *err = NULL;
	assert_int_equal(k8s_exec(&sb, &o, bounded(), &code, &err), AKS_OK);
	assert_string_equal(S.chosen, K8S_PROTO_V4);
	assert_false(S.half_closed); /* v4 has no channel 255 */
	assert_string_equal(out.data, "12345");
	assert_int_equal(code, 3);
	aks__buf_free(&out);
}

static void test_capture_bound(void **state)
{
	(void)state;
	reset(true, 0);
	const char *argv[] = {"cat", NULL};
	aks_buf out = {0};
	k8s_exec_opts o = {.argv = argv,
	                   .stdin_data = "0123456789",
	                   .stdin_len = 10,
	                   .capture = &out,
	                   .capture_max = 4};
	int code = -1;
	aks_error *err = NULL;
	assert_int_equal(k8s_exec(&sb, &o, bounded(), &code, &err), AKS_ELIMIT);
	assert_non_null(strstr(aks_error_message(err), "larger than 4 bytes"));
	aks_error_free(err);
	aks__buf_free(&out);
}

static void test_handshake_refused(void **state)
{
	(void)state;
	reset(true, 0);
	S.forbid = true;
	const char *argv[] = {"true", NULL};
	k8s_exec_opts o = {.argv = argv};
	int code = -1;
	aks_error *err = NULL;
	assert_int_equal(k8s_exec(&sb, &o, bounded(), &code, &err), AKS_EPROVISION);
	const char *m = aks_error_message(err);
	if (!strstr(m,
	            "exec into pod 'ns/p': forbidden (403): pods \"p\" is forbidden: User \"bob\" "
	            "cannot get resource \"pods/exec\"") ||
	    !strstr(m, "needs RBAC 'get' on 'pods/exec' in namespace 'ns'"))
		fail_msg("unexpected message: %s", m);
	aks_error_free(err);
}

/* A handshake refused with anything but 401 or 403 does not blame RBAC: it says what the
 * server answered. */
static void test_handshake_400(void **state)
{
	(void)state;
	reset(true, 0);
	S.refuse_ws = 1;
	const char *argv[] = {"true", NULL};
	k8s_exec_opts o = {.argv = argv};
	int code = -1;
	aks_error *err = NULL;
	assert_int_equal(k8s_exec(&sb, &o, bounded(), &code, &err), AKS_EPROVISION);
	assert_int_equal(S.handshakes, 1);
	const char *m = aks_error_message(err);
	if (!strstr(m, "exec into pod 'ns/p' failed during the WebSocket handshake") ||
	    !strstr(m, "HTTP 400") || strstr(m, "RBAC"))
		fail_msg("unexpected message: %s", m);
	aks_error_free(err);
}

/* What a program costs in the exec URL: k8s_escape's length, without making it. */
static void test_escaped_len(void **state)
{
	(void)state;
	const char *samples[] = {"", "abc-._~XYZ09", "x=1\n", "print('é')", "a b&c=d%"};
	for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++) {
		char *e = k8s_escape(samples[i]);
		assert_non_null(e);
		assert_int_equal(k8s_escaped_len(samples[i]), strlen(e));
		free(e);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_v4_command),        cmocka_unit_test(test_v5_stdin_half_close),
	    cmocka_unit_test(test_v4_stdin),          cmocka_unit_test(test_capture_bound),
	    cmocka_unit_test(test_handshake_refused), cmocka_unit_test(test_handshake_400),
	    cmocka_unit_test(test_escaped_len),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
