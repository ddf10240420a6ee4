/* Unit tests: the agent protocol's shared code (agent/proto.c, agent/sha256.c): SHA-256
 * against the FIPS 180-4 vectors, frames reassembled from any split of the byte stream,
 * merged frames, recovery from junk, too-large and wrong-version headers, TLV bounds, and
 * the builder's size limit. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "agent/proto.h"
#include "agent/sha256.h"

static void hex_of(const void *data, size_t len, char out[65])
{
	aks_sha256 s;
	uint8_t d[32];
	aks__sha256_init(&s);
	aks__sha256_update(&s, data, len);
	aks__sha256_final(&s, d);
	aks__sha256_hex(d, out);
}

static void test_sha256_vectors(void **state)
{
	(void)state;
	char hex[65];
	hex_of("", 0, hex);
	assert_string_equal(hex,
	                    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	hex_of("abc", 3, hex);
	assert_string_equal(hex,
	                    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	hex_of(m, strlen(m), hex);
	assert_string_equal(hex,
	                    "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	/* one million 'a', fed in odd-sized pieces */
	char *a = malloc(1000000);
	memset(a, 'a', 1000000);
	aks_sha256 s;
	uint8_t d[32];
	aks__sha256_init(&s);
	for (size_t off = 0; off < 1000000;) {
		size_t n = 1 + off % 97;
		if (n > 1000000 - off)
			n = 1000000 - off;
		aks__sha256_update(&s, a + off, n);
		off += n;
	}
	aks__sha256_final(&s, d);
	aks__sha256_hex(d, hex);
	assert_string_equal(hex,
	                    "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	free(a);
}

/* Three frames: a HELLO with fields, an empty PING, a data frame. */
static void build_three(aks_agent_buf *b)
{
	size_t s = aks__agent_frame_begin(b, AKS_AGENT_HELLO, 0, 1);
	aks__agent_put_u32(b, AKS_AGENT_T_VERSION_MIN, 1);
	aks__agent_put_str(b, AKS_AGENT_T_AGENT, "x");
	aks__agent_frame_end(b, s);
	s = aks__agent_frame_begin(b, AKS_AGENT_PING, 0, 2);
	aks__agent_frame_end(b, s);
	aks__agent_frame_data(b, AKS_AGENT_STDOUT, AKS_AGENT_FLAG_END, 0xdeadbeef, "hello", 5);
	assert_false(b->failed);
}

static void check_three(const aks_agent_frame *f, int i)
{
	static const uint8_t types[] = {AKS_AGENT_HELLO, AKS_AGENT_PING, AKS_AGENT_STDOUT};
	static const uint32_t ids[] = {1, 2, 0xdeadbeef};
	assert_int_equal(f->type, types[i]);
	assert_int_equal(f->id, ids[i]);
	if (i == 2) {
		assert_int_equal(f->flags, AKS_AGENT_FLAG_END);
		assert_int_equal(f->len, 5);
		assert_memory_equal(f->payload, "hello", 5);
	}
	if (i == 0) {
		aks_agent_tlv it;
		aks__agent_tlv_init(&it, f);
		uint16_t tag;
		const uint8_t *v;
		uint32_t n;
		assert_int_equal(aks__agent_tlv_next(&it, &tag, &v, &n), 1);
		assert_int_equal(tag, AKS_AGENT_T_VERSION_MIN);
		assert_int_equal(aks__agent_get32(v), 1);
		assert_int_equal(aks__agent_tlv_next(&it, &tag, &v, &n), 1);
		assert_int_equal(tag, AKS_AGENT_T_AGENT);
		assert_int_equal(n, 1);
		assert_int_equal(aks__agent_tlv_next(&it, &tag, &v, &n), 0);
	}
}

static void test_any_split(void **state)
{
	(void)state;
	aks_agent_buf b = {0};
	build_three(&b);
	/* Every split point, and byte-at-a-time: the same three frames come out. */
	for (size_t step = 1; step <= b.len; step++) {
		aks_agent_decoder d;
		assert_int_equal(aks__agent_decoder_init(&d, 4096), 0);
		int seen = 0;
		for (size_t off = 0; off < b.len; off += step) {
			size_t n = b.len - off < step ? b.len - off : step;
			assert_int_equal(aks__agent_decoder_feed(&d, b.data + off, n), n);
			aks_agent_frame f;
			uint32_t code;
			int rc;
			while ((rc = aks__agent_decoder_next(&d, &f, &code)) == AKS_AGENT_DEC_FRAME)
				check_three(&f, seen++);
			assert_int_equal(rc, AKS_AGENT_DEC_MORE);
		}
		assert_int_equal(seen, 3);
		aks__agent_decoder_free(&d);
	}
	aks__agent_buf_free(&b);
}

/* Feeds bytes and collects what comes out: frame types in order, then error codes. */
static void decode_all(const uint8_t *p, size_t len, uint32_t max, uint8_t *types, int *nt,
                       uint32_t *codes, int *nc)
{
	aks_agent_decoder d;
	assert_int_equal(aks__agent_decoder_init(&d, max), 0);
	*nt = *nc = 0;
	size_t off = 0;
	while (off < len) {
		off += aks__agent_decoder_feed(&d, p + off, len - off);
		aks_agent_frame f;
		uint32_t code;
		int rc;
		while ((rc = aks__agent_decoder_next(&d, &f, &code)) != AKS_AGENT_DEC_MORE) {
			if (rc == AKS_AGENT_DEC_FRAME)
				types[(*nt)++] = f.type;
			else
				codes[(*nc)++] = code;
		}
	}
	aks__agent_decoder_free(&d);
}

static void test_recovery(void **state)
{
	(void)state;
	uint8_t types[16];
	uint32_t codes[16];
	int nt, nc;
	aks_agent_buf b = {0};
	/* junk (with a fake "AK" in it) before a frame: one error, then the frame */
	aks__agent_put_raw(&b, "junk AK junk", 12);
	size_t s = aks__agent_frame_begin(&b, AKS_AGENT_PING, 0, 7);
	aks__agent_frame_end(&b, s);
	decode_all(b.data, b.len, 4096, types, &nt, codes, &nc);
	assert_int_equal(nt, 1);
	assert_int_equal(types[0], AKS_AGENT_PING);
	assert_int_equal(nc, 1);
	assert_int_equal(codes[0], AKS_AGENT_E_MALFORMED);

	/* too large: an error, the payload skipped (it is full of fake headers), then in sync */
	b.off = b.len = 0;
	s = aks__agent_frame_begin(&b, AKS_AGENT_SPAWN, 0, 8);
	for (int i = 0; i < 20; i++) {
		size_t inner = aks__agent_frame_begin(&b, AKS_AGENT_KILL, 0, 9);
		aks__agent_frame_end(&b, inner);
	}
	aks__agent_frame_end(&b, s);
	s = aks__agent_frame_begin(&b, AKS_AGENT_PING, 0, 10);
	aks__agent_frame_end(&b, s);
	decode_all(b.data, b.len, 100, types, &nt, codes, &nc);
	assert_int_equal(nc, 1);
	assert_int_equal(codes[0], AKS_AGENT_E_TOO_LARGE);
	assert_int_equal(nt, 1);
	assert_int_equal(types[0], AKS_AGENT_PING);

	/* a wrong version and nonzero reserved bits: one error each, next frame found */
	b.off = b.len = 0;
	s = aks__agent_frame_begin(&b, AKS_AGENT_PING, 0, 11);
	aks__agent_frame_end(&b, s);
	b.data[2] = 9;
	s = aks__agent_frame_begin(&b, AKS_AGENT_PING, 0, 12);
	aks__agent_frame_end(&b, s);
	decode_all(b.data, b.len, 4096, types, &nt, codes, &nc);
	assert_int_equal(nc, 1);
	assert_int_equal(codes[0], AKS_AGENT_E_VERSION);
	assert_int_equal(nt, 1);
	b.off = b.len = 0;
	s = aks__agent_frame_begin(&b, AKS_AGENT_PING, 0, 13);
	aks__agent_frame_end(&b, s);
	b.data[7] = 1;
	s = aks__agent_frame_begin(&b, AKS_AGENT_PONG, 0, 14);
	aks__agent_frame_end(&b, s);
	decode_all(b.data, b.len, 4096, types, &nt, codes, &nc);
	assert_int_equal(nc, 1);
	assert_int_equal(codes[0], AKS_AGENT_E_MALFORMED);
	assert_int_equal(nt, 1);
	assert_int_equal(types[0], AKS_AGENT_PONG);
	aks__agent_buf_free(&b);
}

static void test_tlv_bounds_and_builder_limit(void **state)
{
	(void)state;
	/* a field whose length runs past the payload */
	uint8_t payload[] = {0, 20, 0, 0, 0, 9, 'a', 'b'};
	aks_agent_frame f = {.payload = payload, .len = sizeof(payload)};
	aks_agent_tlv it;
	aks__agent_tlv_init(&it, &f);
	uint16_t tag;
	const uint8_t *v;
	uint32_t n;
	assert_int_equal(aks__agent_tlv_next(&it, &tag, &v, &n), -1);
	/* a header cut short */
	f.len = 3;
	aks__agent_tlv_init(&it, &f);
	assert_int_equal(aks__agent_tlv_next(&it, &tag, &v, &n), -1);
	/* the builder refuses a frame over the maximum payload */
	aks_agent_buf b = {0};
	size_t s = aks__agent_frame_begin(&b, AKS_AGENT_SPAWN, 0, 1);
	char *big = calloc(1, AKS_AGENT_MAX_PAYLOAD);
	aks__agent_put_bytes(&b, AKS_AGENT_T_STDIN, big, AKS_AGENT_MAX_PAYLOAD - 6);
	aks__agent_frame_end(&b, s);
	assert_false(b.failed); /* exactly the maximum */
	s = aks__agent_frame_begin(&b, AKS_AGENT_SPAWN, 0, 2);
	aks__agent_put_bytes(&b, AKS_AGENT_T_STDIN, big, AKS_AGENT_MAX_PAYLOAD - 5);
	aks__agent_frame_end(&b, s);
	assert_true(b.failed);
	free(big);
	aks__agent_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sha256_vectors),
	    cmocka_unit_test(test_any_split),
	    cmocka_unit_test(test_recovery),
	    cmocka_unit_test(test_tlv_bounds_and_builder_limit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
