/*
 * Fuzz target: what the e2b plugin reads from a sandbox's services (plugins/e2b/e2b_wire.c):
 * envd's Connect stream of process events and the code interpreter's lines of JSON, fed in
 * pieces. The first byte picks the decoder and the size of the pieces; the rest is the
 * stream. Checks: the decoders never read past what they were given (the sanitizers), every
 * envelope they pass on has its declared length and is bounded, every line is whole (no
 * line break in it) and bounded, and each parsed message's fields are consistent.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "e2b_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

static bool on_envelope(void *ctx, unsigned flags, const char *json, size_t len)
{
	(void)ctx;
	CHECK(len <= E2B_WIRE_MESSAGE_MAX && json[len] == '\0');
	CHECK(!(flags & E2B_ENVELOPE_COMPRESSED));
	json_object *root = NULL;
	if (flags & E2B_ENVELOPE_END_STREAM) {
		const char *code, *message;
		if (e2b_end_parse(json, len, &root, &code, &message))
			CHECK(root && (!message || code));
		else
			CHECK(!root && !code && !message);
	} else {
		e2b_event ev;
		const char *why = NULL;
		if (e2b_event_parse(json, len, &ev, &root, &why)) {
			CHECK(root);
			if (ev.kind == E2B_EVENT_STDOUT || ev.kind == E2B_EVENT_STDERR)
				CHECK(ev.data_len == 0 || ev.data);
			else
				CHECK(!ev.data);
			free(ev.data);
		} else {
			CHECK(!root && why && !ev.data);
		}
	}
	json_object_put(root);
	return true;
}

static bool on_line(void *ctx, const char *line, size_t len)
{
	(void)ctx;
	CHECK(len > 0 && len <= E2B_WIRE_MESSAGE_MAX && line[len] == '\0');
	CHECK(!memchr(line, '\n', len));
	e2b_output o;
	json_object *root = NULL;
	if (e2b_output_parse(line, len, &o, &root)) {
		CHECK(root);
		if (o.kind == E2B_OUTPUT_STDOUT || o.kind == E2B_OUTPUT_STDERR)
			CHECK(o.text && strlen(o.text) <= o.text_len);
	} else {
		CHECK(!root);
	}
	json_object_put(root);
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	bool lines = data[0] & 0x80;
	size_t piece = (data[0] & 0x7f) + 1;
	data++;
	size--;
	if (lines) {
		e2b_lines d = {0};
		bool ok = true;
		for (size_t i = 0; ok && i < size; i += piece)
			ok = e2b_lines_feed(&d, (const char *)data + i,
			                    size - i < piece ? size - i : piece, on_line, NULL);
		if (ok)
			e2b_lines_finish(&d, on_line, NULL);
		e2b_lines_free(&d);
	} else {
		e2b_envelopes d = {0};
		bool ok = true;
		for (size_t i = 0; ok && i < size; i += piece)
			ok = e2b_envelopes_feed(&d, (const char *)data + i,
			                        size - i < piece ? size - i : piece, on_envelope,
			                        NULL);
		CHECK(ok || d.failed);
		e2b_envelopes_free(&d);
	}
	return 0;
}
