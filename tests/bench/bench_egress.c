/*
 * tests/bench/bench_egress.c - a download through aksandbox-agent's egress proxy against the
 * same download on the host, measured in the same run: curl fetches SIZE bytes from a
 * loopback server of the bench (as allowed.test, through AKS_TEST_EGRESS_RESOLVE)
 *
 *  host:       curl on this host, straight to the server;
 *  bubblewrap: curl in a bubblewrap sandbox under network_allow, through the proxy (the
 *              agent's pipes to the host);
 *  docker:     the same in a docker container (runc; the agent's stream is one docker exec).
 *
 * interleaved, the medians compared as throughput ratios (proxy / host; the goal is >= 0.5).
 *
 * Usage: bench_egress [-n N] [-s MIB] [-a AGENT] [IMAGE]  (N samples each, default 5; MIB the
 * download, default 100; AGENT the build's aksandbox-agent; IMAGE docker's, default
 * aksandbox-test:bookworm). Needs bwrap, curl, and the Docker Engine with the image: their
 * absence fails the run rather than skipping.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench_util.h"

static const char *prog = "bench_egress";

/* ---- the server: GET /N answers N bytes -------------------------------------------------- */

static int server_fd;

static void *serve(void *arg)
{
	(void)arg;
	static char block[1 << 16];
	memset(block, 'x', sizeof(block));
	for (;;) {
		int c = accept(server_fd, NULL, NULL);
		if (c < 0)
			return NULL;
		char head[4096];
		ssize_t n = read(c, head, sizeof(head) - 1);
		unsigned long long size = 0;
		if (n > 0) {
			head[n] = '\0';
			sscanf(head, "GET /%llu", &size);
		}
		char reply[200];
		int k = snprintf(
		    reply, sizeof(reply),
		    "HTTP/1.1 200 OK\r\nContent-Length: %llu\r\nConnection: close\r\n\r\n", size);
		ssize_t w = write(c, reply, (size_t)k);
		while (w > 0 && size > 0) {
			w = write(c, block, size < sizeof(block) ? (size_t)size : sizeof(block));
			if (w > 0)
				size -= (unsigned long long)w;
		}
		close(c);
	}
}

static unsigned server_start(void)
{
	server_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sin);
	if (bind(server_fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    listen(server_fd, 16) < 0 ||
	    getsockname(server_fd, (struct sockaddr *)&sin, &len) < 0) {
		perror("bench_egress: server");
		exit(1);
	}
	pthread_t t;
	pthread_create(&t, NULL, serve, NULL);
	pthread_detach(t);
	return ntohs(sin.sin_port);
}

/* ---- the providers ------------------------------------------------------------------------ */

static const char *const allow[] = {"allowed.test", "127.0.0.1/32", NULL};
static aks_policy policy;

static char command[512];

/* The download in sb: ns (curl must succeed and count every byte). */
static int64_t fetch_in(aks_sandbox *sb, unsigned long long size)
{
	aks_call call;
	aks_call_init(&call, 600, &policy, NULL, NULL);
	aks_error *err = NULL;
	aks_result *r = NULL;
	int64_t t0 = bench_now_ns();
	if (aks_sandbox_execute_command(sb, command, &call, &r, &err) != AKS_OK)
		bench_die(prog, "execute_command", err);
	int64_t t = bench_now_ns() - t0;
	const char *out = aks_result_get_stdout(r, NULL);
	if (aks_result_get_exit_code(r) != 0 || !out || strtoull(out, NULL, 10) != size) {
		fprintf(stderr, "%s: the download in the sandbox failed (exit %d): %s %s\n", prog,
		        aks_result_get_exit_code(r), out ? out : "",
		        aks_result_get_stderr(r, NULL) ? aks_result_get_stderr(r, NULL) : "");
		exit(1);
	}
	aks_result_free(r);
	return t;
}

/* The same download on the host, no proxy. */
static int64_t fetch_on_host(const char *url)
{
	char *argv[] = {"curl", "-sS", "--noproxy", "*", "-o", "/dev/null", (char *)url, NULL};
	char *curl = "/usr/bin/curl";
	argv[0] = curl;
	int64_t t = bench_time_spawn(argv);
	if (t < 0) {
		fprintf(stderr, "%s: curl on the host failed\n", prog);
		exit(1);
	}
	return t;
}

static void report(const char *what, int64_t *v, size_t n, double mib)
{
	double med = bench_median_ms(v, n);
	printf("  %-44s %9.1f ms  %7.1f MiB/s  (p10 %.1f, p90 %.1f ms)\n", what, med,
	       mib / (med / 1000.0), bench_percentile_ms(v, n, 0.1),
	       bench_percentile_ms(v, n, 0.9));
}

int main(int argc, char **argv)
{
	size_t n = 5;
	unsigned mib = 100;
	const char *agent = NULL;
	int opt;
	while ((opt = getopt(argc, argv, "n:s:a:")) != -1) {
		if (opt == 'n')
			n = (size_t)atol(optarg);
		else if (opt == 's')
			mib = (unsigned)atol(optarg);
		else if (opt == 'a')
			agent = optarg;
		else {
			fprintf(stderr, "usage: %s [-n N] [-s MIB] [-a AGENT] [IMAGE]\n", prog);
			return 2;
		}
	}
	const char *image = optind < argc ? argv[optind] : "aksandbox-test:bookworm";
	if (n < 1 || mib < 1) {
		fprintf(stderr, "%s: -n and -s must be at least 1\n", prog);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	char agent_buf[4096];
	if (!agent) {
		const char *b = getenv("AKS_TEST_BUILDDIR");
		snprintf(agent_buf, sizeof(agent_buf), "%s/agent/aksandbox-agent", b ? b : ".");
		agent = agent_buf;
	}
	unsigned port = server_start();
	setenv("AKS_TEST_EGRESS_RESOLVE", "allowed.test=127.0.0.1", 1);
	unsigned long long size = (unsigned long long)mib << 20;
	char url[128];
	snprintf(url, sizeof(url), "http://allowed.test:%u/%llu", port, size);
	char host_url[128];
	snprintf(host_url, sizeof(host_url), "http://127.0.0.1:%u/%llu", port, size);
	snprintf(command, sizeof(command), "curl -sS -o /dev/null -w '%%{size_download}' %s", url);
	aks_policy_init(&policy);
	policy.network_egress = AKS_EGRESS_ALLOWLIST;
	policy.network_allow = allow;
	policy.strict = true;

	char block[4200];
	aks_config *c_bw = NULL, *c_dk = NULL;
	snprintf(block, sizeof(block), "    agent: %s\n    landlock: required\n", agent);
	aks_provider *bw = bench_open_provider(prog, "bubblewrap", block, &c_bw);
	snprintf(block, sizeof(block),
	         "    image: %s\n    pull: false\n    agent: %s\n"
	         "    labels: {io.aksandbox.test: bench}\n",
	         image, agent);
	aks_provider *dk = bench_open_provider(prog, "docker", block, &c_dk);
	aks_sandbox *s_bw = bench_create(prog, bw, &policy),
	            *s_dk = bench_create(prog, dk, &policy);
	/* warm-up: the agents and their proxies start on the first operation */
	fetch_in(s_bw, size);
	fetch_in(s_dk, size);
	fetch_on_host(host_url);
	int64_t *h = calloc(n, sizeof(int64_t)), *b = calloc(n, sizeof(int64_t)),
	        *d = calloc(n, sizeof(int64_t));
	for (size_t i = 0; i < n; i++) { /* interleaved, rotating */
		for (size_t k = 0; k < 3; k++)
			switch ((i + k) % 3) {
			case 0:
				h[i] = fetch_on_host(host_url);
				break;
			case 1:
				b[i] = fetch_in(s_bw, size);
				break;
			default:
				d[i] = fetch_in(s_dk, size);
			}
	}
	printf("egress: a %u MiB download with curl, %zu samples each\n", mib, n);
	double hm = bench_median_ms(h, n), bm = bench_median_ms(b, n), dm = bench_median_ms(d, n);
	report("on the host, no proxy", h, n, mib);
	report("bubblewrap, through the egress proxy", b, n, mib);
	report("docker (runc), through the egress proxy", d, n, mib);
	printf("  throughput through the proxy / on the host: bubblewrap %.2fx, docker %.2fx\n",
	       hm / bm, hm / dm);
	bench_destroy(prog, bw, s_bw);
	bench_destroy(prog, dk, s_dk);
	aks_provider_close(bw);
	aks_provider_close(dk);
	aks_config_free(c_bw);
	aks_config_free(c_dk);
	free(h);
	free(b);
	free(d);
	return 0;
}
