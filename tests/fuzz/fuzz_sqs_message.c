/*
 * Fuzz target: what the sqs transport reads from SQS (plugins/sqs/sqs_codec.c): a received
 * message as ReceiveMessage's JSON answer carries it, and its own mapping of any bytes onto
 * SQS's fields. Checks: nothing is read past what was given (the sanitizers); a decoded
 * message is complete (body length, attribute pairs); any bytes sent as a body, group and
 * attribute value come back unchanged, and what is sent is always text and ids SQS accepts.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <aksandbox/aksandbox.h>

#include "aks_json.h"
#include "sqs_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

static void decode_answer(const aks_host_api *host, const char *text, size_t size)
{
	json_tokener *tok = json_tokener_new();
	json_object *j = tok ? json_tokener_parse_ex(tok, text, (int)size) : NULL;
	json_tokener_free(tok);
	if (!json_object_is_type(j, json_type_object)) {
		json_object_put(j);
		return;
	}
	sqs_msg *m = NULL;
	aks_error *err = NULL;
	int rc = sqs_decode(host, j, &m, &err);
	CHECK(rc == AKS_OK || rc == AKS_EBROKER || rc == AKS_ENOMEM);
	if (rc == AKS_OK) {
		CHECK(m->m.body && m->m.receive_count >= 1 && m->receipt && *m->receipt);
		CHECK(m->m.body[m->m.body_len] == '\0');
		for (const char *const *a = m->m.attributes; *a; a += 2)
			CHECK(a[1] != NULL);
		sqs_msg_free(m);
	} else {
		CHECK(m == NULL && aks_error_message(err));
	}
	aks_error_free(err);
	json_object_put(j);
}

/* The input's bytes as a body, a group and an attribute value, through encode and decode. */
static void round_trip(const aks_host_api *host, const char *bytes, size_t size)
{
	char *s = malloc(size + 1); /* the group and attribute value: up to the first NUL */
	if (!s)
		return;
	memcpy(s, bytes, size);
	s[size] = '\0';
	const char *attrs[] = {"k", s, NULL};
	aks_message msg = {AKS_MESSAGE_INIT,          .body = bytes,
	                   .body_len = size,          .attributes = attrs,
	                   .group_id = *s ? s : NULL, .dedup_id = s};
	json_object *req = json_object_new_object();
	aks_error *err = NULL;
	if (req && sqs_encode(host, &msg, req, &err) == AKS_OK) {
		const char *body = aks__jstr(req, "MessageBody");
		CHECK(body && *body && sqs_text_ok(body, strlen(body)));
		CHECK(sqs_id_ok(aks__jstr(req, "MessageGroupId")));
		CHECK(sqs_id_ok(aks__jstr(req, "MessageDeduplicationId")));
		json_object *m = json_object_new_object();
		json_object_object_add(m, "ReceiptHandle", json_object_new_string("r"));
		json_object_object_add(m, "Body", json_object_get(aks__jget(req, "MessageBody")));
		json_object_object_add(m, "MessageAttributes",
		                       json_object_get(aks__jget(req, "MessageAttributes")));
		json_object *sys = json_object_new_object();
		json_object_object_add(sys, "MessageGroupId",
		                       json_object_get(aks__jget(req, "MessageGroupId")));
		json_object_object_add(m, "Attributes", sys);
		sqs_msg *got = NULL;
		if (sqs_decode(host, m, &got, &err) == AKS_OK) {
			CHECK(got->m.body_len == size && memcmp(got->m.body, bytes, size) == 0);
			CHECK(*s ? got->m.group_id && strcmp(got->m.group_id, s) == 0
			         : got->m.group_id == NULL);
			CHECK(got->m.attributes[0] && strcmp(got->m.attributes[1], s) == 0);
			sqs_msg_free(got);
		}
		json_object_put(m);
	}
	aks_error_free(err);
	json_object_put(req);
	free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const aks_host_api *host = aks_host_services();
	decode_answer(host, (const char *)data, size);
	round_trip(host, (const char *)data, size);
	return 0;
}
