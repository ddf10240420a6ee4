/*
 * Fuzz target: the queue broker's wire format, as a worker receives requests and an agent
 * receives completion records from a message broker (untrusted bytes). The input is decoded
 * both as a request and as a completion; whatever decodes must encode again, and decode
 * again to the same thing (checked on the parts a provider acts on). Aborts when a property
 * fails, which the fuzzer and the corpus driver report.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "aks_base64.h"
#include "core/queue/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

static bool same(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static void request(const char *text, size_t size)
{
	aks_wire_request *r = NULL;
	aks_error *err = NULL;
	if (aks__wire_request_decode(text, size, &r, &err) < 0) {
		CHECK(err && aks_error_message(err)[0]);
		aks_error_free(err);
		return;
	}
	char *again = aks__wire_request_encode(r);
	CHECK(again);
	aks_wire_request *r2 = NULL;
	CHECK(aks__wire_request_decode(again, strlen(again), &r2, NULL) == AKS_OK);
	CHECK(r2->op == r->op && same(r2->task_id, r->task_id) && same(r2->command, r->command) &&
	      same(r2->code, r->code) && same(r2->path, r->path) &&
	      r2->content_len == r->content_len &&
	      (!r->content_len || memcmp(r2->content, r->content, r->content_len) == 0) &&
	      r2->policy.network_egress == r->policy.network_egress &&
	      r2->policy.strict == r->policy.strict && r2->principal.mode == r->principal.mode &&
	      same(r2->session.id, r->session.id) &&
	      same(r2->session.sandbox_id, r->session.sandbox_id));
	aks__wire_request_free(r2);
	free(again);
	aks__wire_request_free(r);
}

static void completion(const char *text, size_t size)
{
	aks_wire_completion *c = NULL;
	aks_error *err = NULL;
	if (aks__wire_completion_decode(text, size, &c, &err) < 0) {
		CHECK(err && aks_error_message(err)[0]);
		aks_error_free(err);
		return;
	}
	char *record = aks__wire_record_encode(c, "conv");
	CHECK(record);
	aks_wire_completion *c2 = NULL;
	CHECK(aks__wire_completion_decode(record, strlen(record), &c2, NULL) == AKS_OK);
	CHECK(c2->status == c->status && same(c2->task_id, c->task_id) &&
	      same(c2->error, c->error) && (c2->result != NULL) == (c->result != NULL));
	aks__wire_completion_free(c2);
	free(record);
	aks__wire_completion_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	request(text, size);
	completion(text, size);
	/* base64: what decodes re-encodes to the very same text (strict decoding) */
	unsigned char *raw = NULL;
	size_t n = 0;
	if (aks__base64_decode(text, size, AKS_BASE64_STD, &raw, &n) == AKS_OK) {
		char *enc = aks__base64_encode(raw, n, AKS_BASE64_STD);
		CHECK(enc && strlen(enc) == size && memcmp(enc, text, size) == 0);
		free(enc);
		free(raw);
	}
	free(text);
	return 0;
}
