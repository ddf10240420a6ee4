/*
 * tests/bench/bench_mcp.c - what MCP costs on top of the tool API: one run_command
 * {"command": "true"} as a tools/call round trip to a long-lived `aksandbox mcp` process
 * over its stdin/stdout pipes (as a stdio MCP client does it) and to one `aksandbox mcp
 * --listen` over HTTP (a keep-alive connection; the answer as server-sent events, as the
 * SDKs ask for it), against the same call through the C API (aks_runtime_call_tool) in
 * this process. Then the HTTP server's throughput with C clients at once (50 by default),
 * each with its MCP session and its sandbox session, against one client alone.
 *
 *   bench_mcp [-n N] [-c CLIENTS] AKSANDBOX DIR
 *
 * AKSANDBOX is the aksandbox binary; DIR an empty scratch directory for the configs, state
 * directories and sandboxes (same profile: local_subprocess, per_session, the thread
 * broker). N calls of each, interleaved, after a warm-up; medians, p90s and the ratios.
 * Figures are measured in this run only and never judged.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <aksandbox/aksandbox.h>

#include "bench_util.h"

#define PROG "bench_mcp"

static void die(const char *what)
{
	fprintf(stderr, PROG ": %s: %s\n", what, strerror(errno));
	exit(1);
}

/* DIR/name/{config.yaml,state,sandboxes}; returns the config's path. */
static void write_config(const char *dir, const char *name, char *config, size_t size, char *state,
                         size_t state_size)
{
	char base[2048], boxes[2100];
	snprintf(base, sizeof(base), "%s/%s", dir, name);
	snprintf(boxes, sizeof(boxes), "%s/sandboxes", base);
	snprintf(config, size, "%s/config.yaml", base);
	snprintf(state, state_size, "%s/state", base);
	if ((mkdir(base, 0700) < 0 && errno != EEXIST) ||
	    (mkdir(boxes, 0700) < 0 && errno != EEXIST))
		die(boxes);
	FILE *f = fopen(config, "w");
	if (!f)
		die(config);
	fprintf(f,
	        "sandbox:\n"
	        "  enabled: true\n"
	        "  profiles:\n"
	        "    default:\n"
	        "      type: local_subprocess\n"
	        "      scope: per_session\n"
	        "      local_subprocess: {workdir: \"%s\"}\n",
	        boxes);
	fclose(f);
}

/* ---- the C API ------------------------------------------------------------------- */

struct capi {
	aks_settings *settings;
	aks_runtime *rt;
	aks_tool_context ctx;
};

static int64_t capi_call(struct capi *c)
{
	char *json = NULL;
	aks_error *err = NULL;
	int64_t t0 = bench_now_ns();
	if (aks_runtime_call_tool(c->rt, "run_command", "{\"command\": \"true\"}", &c->ctx, &json,
	                          &err) < 0)
		bench_die(PROG, "run_command", err);
	int64_t t = bench_now_ns() - t0;
	if (!strstr(json, "\"exit_code\": 0")) {
		fprintf(stderr, PROG ": C API run_command true: %s\n", json);
		exit(1);
	}
	free(json);
	return t;
}

/* ---- the MCP server ----------------------------------------------------------------- */

struct mcp {
	pid_t pid;
	FILE *in;  /* the server's stdin */
	FILE *out; /* the server's stdout */
	char *line;
	size_t cap;
	long next_id;
};

static void mcp_start(struct mcp *m, const char *aks, const char *config, const char *state)
{
	int to[2], from[2];
	/* Close-on-exec: the HTTP server started later must not hold this one's stdin open. */
	if (pipe2(to, O_CLOEXEC) < 0 || pipe2(from, O_CLOEXEC) < 0)
		die("pipe");
	m->pid = fork();
	if (m->pid < 0)
		die("fork");
	if (m->pid == 0) {
		dup2(to[0], 0);
		dup2(from[1], 1);
		close(to[0]);
		close(to[1]);
		close(from[0]);
		close(from[1]);
		setenv("AKS_STATE_DIR", state, 1);
		unsetenv("AKSANDBOX_CONVERSATION");
		if (!freopen("/dev/null", "w", stderr))
			_exit(127);
		execl(aks, aks, "-c", config, "mcp", "--conversation", "bench", (char *)NULL);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	m->in = fdopen(to[1], "w");
	m->out = fdopen(from[0], "r");
	if (!m->in || !m->out)
		die("fdopen");
}

/* Sends one line and reads one line back. */
static const char *mcp_roundtrip(struct mcp *m, const char *request)
{
	if (fputs(request, m->in) < 0 || fputc('\n', m->in) < 0 || fflush(m->in) < 0)
		die("write to aksandbox mcp");
	if (getline(&m->line, &m->cap, m->out) < 0) {
		fprintf(stderr, PROG ": aksandbox mcp closed its output\n");
		exit(1);
	}
	return m->line;
}

static int64_t mcp_call(struct mcp *m)
{
	char req[256];
	snprintf(req, sizeof(req),
	         "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"tools/call\",\"params\":{\"name\":"
	         "\"run_command\",\"arguments\":{\"command\":\"true\"}}}",
	         ++m->next_id);
	int64_t t0 = bench_now_ns();
	const char *resp = mcp_roundtrip(m, req);
	int64_t t = bench_now_ns() - t0;
	if (!strstr(resp, "exit_code\\\": 0") || !strstr(resp, "\"isError\":false")) {
		fprintf(stderr, PROG ": MCP run_command true: %s", resp);
		exit(1);
	}
	return t;
}

static void mcp_stop(struct mcp *m)
{
	int status;
	fclose(m->in); /* end of input: the server exits */
	if (waitpid(m->pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, PROG ": aksandbox mcp did not exit 0\n");
		exit(1);
	}
	fclose(m->out);
	free(m->line);
}

/* ---- the HTTP server ------------------------------------------------------------------ */

struct http_server {
	pid_t pid;
	int port;
};

static void http_start(struct http_server *h, const char *aks, const char *config,
                       const char *state, const char *log)
{
	h->pid = fork();
	if (h->pid < 0)
		die("fork");
	if (h->pid == 0) {
		setenv("AKS_STATE_DIR", state, 1);
		unsetenv("AKSANDBOX_CONVERSATION");
		if (!freopen(log, "w", stderr) || !freopen("/dev/null", "r", stdin))
			_exit(127);
		execl(aks, aks, "-c", config, "mcp", "--conversation", "bench", "--listen",
		      "127.0.0.1:0", (char *)NULL);
		_exit(127);
	}
	/* The server says where it listens on stderr. */
	for (int i = 0; i < 500 && !h->port; i++) {
		FILE *f = fopen(log, "r");
		char line[512];
		while (f && fgets(line, sizeof(line), f)) {
			const char *p = strstr(line, "listening on http://127.0.0.1:");
			if (p)
				h->port = atoi(p + strlen("listening on http://127.0.0.1:"));
		}
		if (f)
			fclose(f);
		if (!h->port) {
			struct timespec ts = {0, 10 * 1000000L};
			nanosleep(&ts, NULL);
		}
	}
	if (!h->port) {
		fprintf(stderr, PROG ": aksandbox mcp --listen did not start (see %s)\n", log);
		exit(1);
	}
}

static void http_stop(struct http_server *h)
{
	int status;
	kill(h->pid, SIGTERM);
	if (waitpid(h->pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, PROG ": aksandbox mcp --listen did not exit 0\n");
		exit(1);
	}
}

/* One client: a keep-alive connection and an MCP session. */
struct http_client {
	int fd;
	char *buf; /* bytes read and not yet consumed */
	size_t len, cap;
	char *body; /* the last response's body, decoded */
	size_t body_len, body_cap;
	char sid[64];
	char sandbox[96]; /* its own sandbox session, for the throughput run */
	long next_id;
};

static void client_fill(struct http_client *c)
{
	if (c->len == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 16384;
		c->buf = realloc(c->buf, c->cap);
		if (!c->buf)
			die("realloc");
	}
	ssize_t got = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
	if (got <= 0) {
		fprintf(stderr, PROG ": the HTTP server closed the connection\n");
		exit(1);
	}
	c->len += (size_t)got;
}

/* Takes n bytes off the front of the buffer (reading more as needed), into the body. */
static void client_take(struct http_client *c, size_t n, bool keep)
{
	while (c->len < n)
		client_fill(c);
	if (keep) {
		if (c->body_len + n + 1 > c->body_cap) {
			c->body_cap = c->body_len + n + 4096;
			c->body = realloc(c->body, c->body_cap);
			if (!c->body)
				die("realloc");
		}
		memcpy(c->body + c->body_len, c->buf, n);
		c->body_len += n;
		c->body[c->body_len] = '\0';
	}
	memmove(c->buf, c->buf + n, c->len - n);
	c->len -= n;
}

/* A line (through CRLF) off the front of the buffer, into line. */
static void client_line(struct http_client *c, char *line, size_t size)
{
	char *end;
	while (!(end = memchr(c->buf, '\n', c->len)))
		client_fill(c);
	size_t n = (size_t)(end - c->buf) + 1;
	snprintf(line, size, "%.*s", (int)(n > 1 ? n - 2 : 0), c->buf);
	client_take(c, n, false);
}

/* POSTs one message; returns the status; the body (events or JSON) in c->body. */
static int client_post(struct http_client *c, const char *json)
{
	char head[512];
	int hn = snprintf(
	    head, sizeof(head),
	    "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
	    "Accept: application/json, text/event-stream\r\n%s%s%sContent-Length: "
	    "%zu\r\n\r\n",
	    c->sid[0] ? "Mcp-Session-Id: " : "", c->sid, c->sid[0] ? "\r\n" : "", strlen(json));
	if (send(c->fd, head, (size_t)hn, MSG_NOSIGNAL) != hn ||
	    send(c->fd, json, strlen(json), MSG_NOSIGNAL) != (ssize_t)strlen(json))
		die("send");
	char line[1024];
	int status = 0;
	long length = -1;
	bool chunked = false;
	client_line(c, line, sizeof(line));
	sscanf(line, "HTTP/1.1 %d", &status);
	for (;;) {
		client_line(c, line, sizeof(line));
		if (!line[0])
			break;
		if (strncasecmp(line, "Content-Length:", 15) == 0)
			length = atol(line + 15);
		else if (strncasecmp(line, "Transfer-Encoding:", 18) == 0 &&
		         strstr(line, "chunked"))
			chunked = true;
		else if (strncasecmp(line, "Mcp-Session-Id: ", 16) == 0)
			snprintf(c->sid, sizeof(c->sid), "%.63s", line + 16);
	}
	c->body_len = 0;
	client_take(c, 0, true);
	if (chunked) {
		for (;;) {
			client_line(c, line, sizeof(line));
			size_t size = strtoul(line, NULL, 16);
			if (size == 0) {
				client_line(c, line, sizeof(line)); /* the last CRLF */
				break;
			}
			client_take(c, size, true);
			client_take(c, 2, false);
		}
	} else if (length > 0) {
		client_take(c, (size_t)length, true);
	}
	return status;
}

static void client_open(struct http_client *c, int port)
{
	memset(c, 0, sizeof(*c));
	struct sockaddr_in sa = {.sin_family = AF_INET,
	                         .sin_port = htons((uint16_t)port),
	                         .sin_addr.s_addr = htonl(0x7f000001)};
	c->fd = socket(AF_INET, SOCK_STREAM, 0);
	int one = 1; /* as the SDKs' HTTP clients (undici, httpx) do */
	if (c->fd < 0 || setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
	    connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("connect to aksandbox mcp --listen");
	if (client_post(c, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
	                   "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{"
	                   "\"name\":\"bench\",\"version\":\"1\"}}}") != 200 ||
	    !c->sid[0] ||
	    client_post(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}") !=
	        202) {
		fprintf(stderr, PROG ": HTTP initialize failed: %s\n", c->body ? c->body : "");
		exit(1);
	}
}

/* A sandbox session of the client's own, so that clients' calls do not queue on one. */
static void client_new_sandbox(struct http_client *c)
{
	char req[256];
	snprintf(req, sizeof(req),
	         "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"tools/call\",\"params\":{\"name\":"
	         "\"new_sandbox_session\",\"arguments\":{}}}",
	         ++c->next_id);
	const char *p =
	    client_post(c, req) == 200 ? strstr(c->body, "sandbox_session_id\\\": \\\"") : NULL;
	if (!p || sscanf(p, "sandbox_session_id\\\": \\\"%90[^\\]", c->sandbox) != 1) {
		fprintf(stderr, PROG ": new_sandbox_session over HTTP: %s\n", c->body);
		exit(1);
	}
}

static int64_t http_call(struct http_client *c)
{
	char req[384];
	if (c->sandbox[0])
		snprintf(req, sizeof(req),
		         "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"tools/call\",\"params\":{"
		         "\"name\":\"run_command\",\"arguments\":{\"command\":\"true\","
		         "\"sandbox_session_id\":\"%s\"}}}",
		         ++c->next_id, c->sandbox);
	else
		snprintf(req, sizeof(req),
		         "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"tools/call\",\"params\":{"
		         "\"name\":\"run_command\",\"arguments\":{\"command\":\"true\"}}}",
		         ++c->next_id);
	int64_t t0 = bench_now_ns();
	int status = client_post(c, req);
	int64_t t = bench_now_ns() - t0;
	if (status != 200 || !strstr(c->body, "exit_code\\\": 0") ||
	    !strstr(c->body, "\"isError\":false")) {
		fprintf(stderr, PROG ": HTTP run_command true: %d %s\n", status, c->body);
		exit(1);
	}
	return t;
}

/* A ping: the transport and the protocol alone, no tool. */
static void http_ping(struct http_client *c)
{
	char req[128];
	snprintf(req, sizeof(req), "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"ping\"}",
	         ++c->next_id);
	if (client_post(c, req) != 200 || !strstr(c->body, "\"result\":{}")) {
		fprintf(stderr, PROG ": HTTP ping: %s\n", c->body);
		exit(1);
	}
}

static void client_close(struct http_client *c)
{
	close(c->fd);
	free(c->buf);
	free(c->body);
}

struct worker {
	int port;
	size_t calls;
	bool ping; /* pings, not run_command */
	pthread_barrier_t *start;
	struct http_client c;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	client_open(&w->c, w->port);
	if (!w->ping) {
		client_new_sandbox(&w->c);
		http_call(&w->c); /* its sandbox made before the clock starts */
	}
	pthread_barrier_wait(w->start);
	for (size_t i = 0; i < w->calls; i++) {
		if (w->ping)
			http_ping(&w->c);
		else
			http_call(&w->c);
	}
	return NULL;
}

/* `clients` clients with `calls` each, at once: calls per second, from the barrier on. */
static double throughput(int port, size_t clients, size_t calls, bool ping)
{
	struct worker *w = calloc(clients, sizeof(*w));
	pthread_t *t = calloc(clients, sizeof(*t));
	pthread_barrier_t start;
	if (!w || !t || pthread_barrier_init(&start, NULL, (unsigned)clients + 1) != 0)
		die("throughput");
	for (size_t i = 0; i < clients; i++) {
		w[i] = (struct worker){.port = port, .calls = calls, .ping = ping, .start = &start};
		if (pthread_create(&t[i], NULL, worker_main, &w[i]) != 0)
			die("pthread_create");
	}
	pthread_barrier_wait(&start);
	int64_t t0 = bench_now_ns();
	for (size_t i = 0; i < clients; i++)
		pthread_join(t[i], NULL);
	double seconds = (double)(bench_now_ns() - t0) / 1e9;
	for (size_t i = 0; i < clients; i++)
		client_close(&w[i].c);
	pthread_barrier_destroy(&start);
	free(w);
	free(t);
	return (double)(clients * calls) / seconds;
}

int main(int argc, char *argv[])
{
	size_t n = 200, clients = 50;
	int opt;
	while ((opt = getopt(argc, argv, "n:c:")) != -1) {
		if (opt == 'n' && atol(optarg) > 0) {
			n = (size_t)atol(optarg);
		} else if (opt == 'c' && atol(optarg) > 0 && atol(optarg) <= 200) {
			clients = (size_t)atol(optarg);
		} else {
			fprintf(stderr, "usage: " PROG " [-n N] [-c CLIENTS] AKSANDBOX DIR\n");
			return 2;
		}
	}
	if (argc - optind != 2) {
		fprintf(stderr, "usage: " PROG " [-n N] [-c CLIENTS] AKSANDBOX DIR\n");
		return 2;
	}
	const char *aks = argv[optind], *dir = argv[optind + 1];
	char config[2200], state[2200];
	aks_error *err = NULL;
	signal(SIGPIPE, SIG_IGN);

	struct capi c;
	write_config(dir, "capi", config, sizeof(config), state, sizeof(state));
	if (aks_settings_load(config, NULL, &c.settings, &err) < 0)
		bench_die(PROG, "settings", err);
	if (aks_runtime_open(c.settings, state, &c.rt, &err) < 0)
		bench_die(PROG, "runtime", err);
	aks_tool_context_init(&c.ctx, "bench", NULL);

	struct mcp m = {0};
	write_config(dir, "mcp", config, sizeof(config), state, sizeof(state));
	mcp_start(&m, aks, config, state);
	const char *init = mcp_roundtrip(
	    &m, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
	        "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":"
	        "\"bench\",\"version\":\"1\"}}}");
	if (!strstr(init, "\"protocolVersion\":\"2025-11-25\"")) {
		fprintf(stderr, PROG ": initialize: %s", init);
		return 1;
	}
	fputs("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n", m.in);

	struct http_server hs = {0};
	char log[2200];
	write_config(dir, "http", config, sizeof(config), state, sizeof(state));
	snprintf(log, sizeof(log), "%s/http/server.log", dir);
	http_start(&hs, aks, config, state, log);
	struct http_client hc;
	client_open(&hc, hs.port);

	int64_t *tc = calloc(n, sizeof(int64_t)), *tm = calloc(n, sizeof(int64_t)),
	        *th = calloc(n, sizeof(int64_t));
	if (!tc || !tm || !th)
		die("calloc");
	/* Warm-up: the first call creates each session's sandbox. */
	for (int i = 0; i < 5; i++) {
		capi_call(&c);
		mcp_call(&m);
		http_call(&hc);
	}
	for (size_t i = 0; i < n; i++) {
		/* Each takes each place in the order as often as the others. */
		switch (i % 3) {
		case 0:
			tc[i] = capi_call(&c);
			tm[i] = mcp_call(&m);
			th[i] = http_call(&hc);
			break;
		case 1:
			tm[i] = mcp_call(&m);
			th[i] = http_call(&hc);
			tc[i] = capi_call(&c);
			break;
		default:
			th[i] = http_call(&hc);
			tc[i] = capi_call(&c);
			tm[i] = mcp_call(&m);
		}
	}
	mcp_stop(&m);
	client_close(&hc);
	size_t per_client = n / 4 > 10 ? n / 4 : 10;
	double one = throughput(hs.port, 1, per_client * 4, false);
	double many = throughput(hs.port, clients, per_client, false);
	double ping_one = throughput(hs.port, 1, per_client * 40, true);
	double ping_many = throughput(hs.port, clients, per_client * 10, true);
	http_stop(&hs);
	aks_runtime_close(c.rt);
	aks_settings_free(c.settings);

	double mc = bench_median_ms(tc, n), mm = bench_median_ms(tm, n),
	       mh = bench_median_ms(th, n);
	printf("MCP: run_command {\"command\": \"true\"}, %zu calls each, interleaved "
	       "(median, p90 in ms)\n",
	       n);
	printf("  %-52s %8.3f %8.3f\n", "C API: aks_runtime_call_tool", mc,
	       bench_percentile_ms(tc, n, 0.9));
	printf("  %-52s %8.3f %8.3f\n", "MCP stdio: tools/call to one aksandbox mcp", mm,
	       bench_percentile_ms(tm, n, 0.9));
	printf("  %-52s %8.3f %8.3f\n", "MCP HTTP: tools/call to aksandbox mcp --listen", mh,
	       bench_percentile_ms(th, n, 0.9));
	printf("  ratio stdio / C API: %.2fx   HTTP / stdio: %.2fx   HTTP / C API: %.2fx\n",
	       mm / mc, mh / mm, mh / mc);
	printf("MCP HTTP throughput (run_command true, each client its own MCP and sandbox "
	       "session)\n");
	printf("  %-52s %8.1f calls/s\n", "1 client", one);
	printf("  %-52s %8.1f calls/s (%zu calls each)\n",
	       clients == 1 ? "1 client" : "clients at once", many, per_client);
	printf("  ratio %zu clients / 1 client: %.2fx\n", clients, many / one);
	printf("  %-52s %8.1f calls/s\n", "ping (the transport alone), 1 client", ping_one);
	printf("  %-52s %8.1f calls/s\n", "ping, clients at once", ping_many);
	printf("  ratio %zu clients / 1 client: %.2fx\n", clients, ping_many / ping_one);
	free(tc);
	free(tm);
	free(th);
	return 0;
}
