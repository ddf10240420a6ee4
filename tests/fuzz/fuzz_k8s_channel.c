/*
 * Fuzz target: the kubernetes plugin's exec channel demultiplexer and status
 * decoder, over what an API server (or anything in between) sends. The input
 * is cut into WebSocket fragments: each starts with a byte whose low 7 bits
 * are the fragment's length and whose high bit marks a message's first
 * fragment. Checks: every stdout and stderr byte reaches the sink exactly
 * once and in order, the status stays bounded, and the status decoder gives
 * an exit code or an error with a message.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "k8s_pure.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

typedef struct seen {
	uint64_t n[3];
} seen;

static bool sink(void *ctx, int channel, const char *p, size_t len)
{
	seen *s = ctx;
	CHECK(channel == K8S_CH_STDOUT || channel == K8S_CH_STDERR);
	CHECK(len > 0 && p);
	s->n[channel] += len;
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	seen s = {{0}};
	k8s_demux d;
	k8s_demux_init(&d, sink, &s);
	size_t i = 0;
	while (i < size) {
		bool first = data[i] & 0x80;
		size_t n = data[i] & 0x7f;
		i++;
		if (n > size - i)
			n = size - i;
		k8s_demux_feed(&d, data + i, n, first);
		i += n;
	}
	CHECK(s.n[1] == d.bytes[1] && s.n[2] == d.bytes[2]);
	CHECK(d.status.len <= K8S_STATUS_MAX);
	int code = 0;
	k8s_err e = {0};
	int rc = k8s_status_exit_code(d.status.data, d.status.len, &code, &e);
	if (rc == AKS_OK)
		CHECK(e.code == AKS_OK);
	else
		CHECK(code == -1 && e.code == rc && e.msg[0]);
	k8s_demux_fini(&d);
	return 0;
}
