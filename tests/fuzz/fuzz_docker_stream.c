/*
 * Fuzz target: the docker plugin's exec stream (plugins/docker/dk_parse.c), as the engine
 * sends it: the head of the answer to an upgraded exec start, then the multiplexed frames
 * (8-byte header, payload) of the program's stdout and stderr. The first byte of the input
 * seeds the sizes of the pieces the rest arrives in (as a connection cuts it); the rest is
 * the answer. Checks: the head is found in the same place with the same status and length,
 * whether it arrives whole or in pieces; the frames demultiplexed piece by piece give every
 * payload byte exactly once, in order, with its frame's stream, as a reading of the whole
 * buffer at once does; no call carries zero bytes. Aborts when a property fails.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dk_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

/* What came out: a running hash of (stream, byte) and the count per stream. */
typedef struct seen {
	uint64_t h;
	uint64_t n[256];
} seen;

static void mix(seen *s, int stream, const unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		s->h = (s->h ^ ((uint64_t)stream << 8 | p[i])) * 0x100000001b3ull;
	s->n[stream & 0xff] += len;
}

static void on_frame(void *ctx, int stream, const unsigned char *p, size_t len)
{
	CHECK(len > 0 && p && stream >= 0 && stream <= 255);
	mix(ctx, stream, p, len);
}

/* The reference: the frames of the whole buffer, read in one go. */
static void frames_at_once(const unsigned char *p, size_t len, seen *s)
{
	while (len >= 8) {
		int stream = p[0];
		size_t n = (size_t)p[4] << 24 | (size_t)p[5] << 16 | (size_t)p[6] << 8 | p[7];
		p += 8, len -= 8;
		if (n > len)
			n = len;
		mix(s, stream, p, n);
		p += n, len -= n;
	}
}

/* Piece sizes: 1 .. 64 bytes from a small generator seeded by the input. */
static size_t next_piece(uint32_t *state)
{
	*state = *state * 1103515245u + 12345u;
	return 1 + (*state >> 16) % 64;
}

static void demux_in_pieces(const unsigned char *p, size_t len, uint32_t seed, seen *s)
{
	dk_demux d;
	dk_demux_init(&d, on_frame, s);
	while (len) {
		size_t n = next_piece(&seed);
		if (n > len)
			n = len;
		dk_demux_feed(&d, p, n);
		p += n, len -= n;
	}
}

static void check_frames(const unsigned char *p, size_t len, uint32_t seed)
{
	seen *whole = calloc(1, sizeof(seen)), *pieces = calloc(1, sizeof(seen));
	CHECK(whole && pieces);
	frames_at_once(p, len, whole);
	demux_in_pieces(p, len, seed, pieces);
	CHECK(whole->h == pieces->h && memcmp(whole->n, pieces->n, sizeof(whole->n)) == 0);
	free(whole);
	free(pieces);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint32_t seed = data[0];
	const char *answer = (const char *)data + 1;
	size_t len = size - 1;
	/* the head, as dk_stream.c reads it: growing until it is whole */
	char *buf = malloc(len + 1);
	CHECK(buf);
	size_t have = 0;
	dk_head h = {0}, once = {0};
	bool found = false;
	uint32_t cut = seed;
	while (!found && have < len) {
		size_t n = next_piece(&cut);
		if (n > len - have)
			n = len - have;
		memcpy(buf + have, answer + have, n);
		have += n;
		buf[have] = '\0';
		found = dk_head_parse(buf, have, &h);
	}
	bool found_once = dk_head_parse(answer, len, &once);
	CHECK(found == found_once);
	if (found) {
		CHECK(h.len == once.len && h.status == once.status && h.body_len == once.body_len);
		CHECK(h.len >= 4 && h.len <= have && memcmp(buf + h.len - 4, "\r\n\r\n", 4) == 0);
		CHECK(h.status == 0 || (h.status >= 100 && h.status <= 599));
		/* the stream after the head (with what came along with it) */
		check_frames((const unsigned char *)answer + h.len, len - h.len, seed);
	}
	/* the per-call exec: libcurl hands over the body alone */
	check_frames((const unsigned char *)answer, len, seed ^ 0x5a);
	free(buf);
	return 0;
}
