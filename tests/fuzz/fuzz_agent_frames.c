/*
 * Fuzz target: the aksandbox-agent frame decoder (agent/proto.c), which both the agent (on
 * what the host sends) and the host-side client (on what a sandbox sends back) run over
 * untrusted bytes. The input is fed whole, then again in pieces whose sizes come from the
 * input itself; both runs must produce the same frames and errors, every frame must lie
 * inside what was fed, and every payload's fields are walked. Aborts when a property fails.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

typedef struct trace {
	uint64_t h; /* a running hash of everything decoded */
	size_t frames, errors;
} trace;

static void mix(trace *t, uint64_t v)
{
	t->h = (t->h ^ v) * 0x100000001b3ull;
}

static void drain(aks_agent_decoder *d, trace *t)
{
	aks_agent_frame f;
	uint32_t code;
	int rc;
	while ((rc = aks__agent_decoder_next(d, &f, &code)) != AKS_AGENT_DEC_MORE) {
		if (rc == AKS_AGENT_DEC_ERROR) {
			CHECK(code >= AKS_AGENT_E_MALFORMED && code <= AKS_AGENT_E_TOO_LARGE);
			t->errors++;
			mix(t, 0xE000 + code);
			continue;
		}
		CHECK(rc == AKS_AGENT_DEC_FRAME);
		CHECK(f.len <= d->max_payload);
		CHECK(f.payload >= d->buf && f.payload + f.len <= d->buf + d->end);
		t->frames++;
		mix(t, f.type);
		mix(t, f.id);
		mix(t, f.len);
		for (uint32_t i = 0; i < f.len; i++)
			mix(t, f.payload[i]);
		aks_agent_tlv it;
		aks__agent_tlv_init(&it, &f);
		uint16_t tag;
		const uint8_t *v;
		uint32_t n;
		int r;
		while ((r = aks__agent_tlv_next(&it, &tag, &v, &n)) > 0)
			CHECK(v >= f.payload && v + n <= f.payload + f.len);
		CHECK(r == 0 || r == -1);
	}
}

static void run(const uint8_t *data, size_t size, size_t (*piece)(const uint8_t *, size_t, size_t),
                trace *t)
{
	aks_agent_decoder d;
	/* A small maximum so the fuzzer reaches the too-large path with short inputs. */
	if (aks__agent_decoder_init(&d, 256) < 0)
		return;
	memset(t, 0, sizeof(*t));
	size_t off = 0;
	while (off < size) {
		size_t want = piece(data, size, off);
		size_t n = aks__agent_decoder_feed(&d, data + off, want);
		off += n;
		drain(&d, t);
		CHECK(n > 0 || want == 0);
	}
	aks__agent_decoder_free(&d);
}

static size_t whole(const uint8_t *data, size_t size, size_t off)
{
	(void)data;
	return size - off;
}

static size_t pieces(const uint8_t *data, size_t size, size_t off)
{
	size_t n = 1 + data[off] % 23;
	return n < size - off ? n : size - off;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	trace a, b;
	run(data, size, whole, &a);
	run(data, size, pieces, &b);
	/* The split of the stream must not change what it means. */
	CHECK(a.frames == b.frames && a.errors == b.errors && a.h == b.h);
	return 0;
}
