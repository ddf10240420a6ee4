/*
 * tests/unit/test_sqs_codec.c - the sqs transport's logic without a server: how it maps a
 * message onto SQS's fields and back (plugins/sqs/sqs_codec.c), and which received messages it
 * hands out or holds back (sqs_hold.c) with the answers AWS documents. The mapping: SQS's text
 * rules (the characters of XML 1.0, which AWS documents for bodies and String attributes), ids SQS
 * accepts, and a round trip of every kind of message the host sends, through JSON as SQS's answers
 * carry it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <aksandbox/aksandbox.h>

#include "aks_json.h"
#include "sqs_internal.h"

static const aks_host_api *host(void)
{
	return aks_host_services();
}

static void text_rules(void **state)
{
	(void)state;
	assert_true(sqs_text_ok("plain {\"json\": 1}\t\r\n", 20));
	assert_true(sqs_text_ok("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9)); /* é € U+1F600 */
	assert_true(sqs_text_ok("", 0));
	assert_false(sqs_text_ok("a\0b", 3));         /* NUL */
	assert_false(sqs_text_ok("\x01", 1));         /* a control character */
	assert_false(sqs_text_ok("\xff", 1));         /* not UTF-8 */
	assert_false(sqs_text_ok("\xc0\xaf", 2));     /* overlong */
	assert_false(sqs_text_ok("\xed\xa0\x80", 3)); /* a surrogate */
	assert_false(sqs_text_ok("\xef\xbf\xbe", 3)); /* U+FFFE */
	assert_false(sqs_text_ok("\xe2\x82", 2));     /* cut short */
}

static void ids(void **state)
{
	(void)state;
	char buf[SQS_MAX_ID + 1], again[SQS_MAX_ID + 1], other[SQS_MAX_ID + 1];
	assert_true(sqs_id_ok("cli/default:abc-123"));
	assert_false(sqs_id_ok(""));
	assert_false(sqs_id_ok("has space"));
	assert_false(sqs_id_ok("caf\xc3\xa9"));
	char long_id[200];
	memset(long_id, 'a', sizeof(long_id) - 1);
	long_id[sizeof(long_id) - 1] = '\0';
	assert_false(sqs_id_ok(long_id));

	sqs_id_for("cli/default", buf, sizeof(buf));
	assert_string_equal(buf, "cli/default"); /* kept as it is */
	sqs_id_for("caf\xc3\xa9 session", buf, sizeof(buf));
	sqs_id_for("caf\xc3\xa9 session", again, sizeof(again));
	sqs_id_for("caf\xc3\xa9 sessioN", other, sizeof(other));
	assert_true(sqs_id_ok(buf));
	assert_string_equal(buf, again);       /* the same group every time */
	assert_string_not_equal(buf, other);   /* and another for another */
	assert_int_equal(strlen(buf), 4 + 32); /* "aks-" and 128 bits */
	sqs_id_for(long_id, buf, sizeof(buf));
	assert_true(sqs_id_ok(buf));
}

static void attribute_names(void **state)
{
	(void)state;
	assert_true(sqs_attr_name_ok("request_id"));
	assert_true(sqs_attr_name_ok("a.b-c_d"));
	assert_false(sqs_attr_name_ok(""));
	assert_false(sqs_attr_name_ok(".a"));
	assert_false(sqs_attr_name_ok("a."));
	assert_false(sqs_attr_name_ok("a..b"));
	assert_false(sqs_attr_name_ok("AWS.x"));
	assert_false(sqs_attr_name_ok("amazon.x"));
	assert_false(sqs_attr_name_ok("sp ace"));
}

/* What SQS would answer for a message sent as req: the body and the attributes as sent, the
 * system attributes it adds. */
static json_object *as_received(json_object *req, const char *count)
{
	json_object *m = json_object_new_object(), *sys = json_object_new_object();
	json_object_object_add(m, "MessageId", json_object_new_string("m-1"));
	json_object_object_add(m, "ReceiptHandle", json_object_new_string("rh-1"));
	json_object_object_add(m, "Body", json_object_get(aks__jget(req, "MessageBody")));
	json_object_object_add(m, "MessageAttributes",
	                       json_object_get(aks__jget(req, "MessageAttributes")));
	json_object_object_add(sys, "ApproximateReceiveCount", json_object_new_string(count));
	json_object_object_add(sys, "MessageGroupId",
	                       json_object_get(aks__jget(req, "MessageGroupId")));
	json_object_object_add(m, "Attributes", sys);
	return m;
}

/* Sends msg through encode and decode; returns the decoded message (the caller frees it). */
static sqs_msg *round_trip(const aks_message *msg, json_object **req_out)
{
	json_object *req = json_object_new_object();
	aks_error *err = NULL;
	assert_int_equal(sqs_encode(host(), msg, req, &err), AKS_OK);
	/* whatever is sent is text SQS accepts */
	const char *body = aks__jstr(req, "MessageBody");
	assert_non_null(body);
	assert_true(strlen(body) > 0 && sqs_text_ok(body, strlen(body)));
	assert_true(sqs_id_ok(aks__jstr(req, "MessageGroupId")));
	assert_true(sqs_id_ok(aks__jstr(req, "MessageDeduplicationId")));
	json_object *received = as_received(req, "2");
	sqs_msg *m = NULL;
	assert_int_equal(sqs_decode(host(), received, &m, &err), AKS_OK);
	json_object_put(received);
	*req_out = req;
	return m;
}

static const char *attr(const sqs_msg *m, const char *key)
{
	for (char **a = m->attrs; a && a[0]; a += 2)
		if (strcmp(a[0], key) == 0)
			return a[1];
	return NULL;
}

static void text_message(void **state)
{
	(void)state;
	const char *attrs[] = {"request_id", "t-1", "lang", "caf\xc3\xa9", NULL};
	aks_message msg = {AKS_MESSAGE_INIT,    .body = "{\"op\": \"run\"}", .body_len = 13,
	                   .attributes = attrs, .group_id = "cli/s1",        .dedup_id = "t-1"};
	json_object *req = NULL;
	sqs_msg *m = round_trip(&msg, &req);
	assert_string_equal(aks__jstr(req, "MessageBody"), msg.body); /* as it is */
	assert_string_equal(aks__jstr(req, "MessageGroupId"), "cli/s1");
	assert_string_equal(aks__jstr(req, "MessageDeduplicationId"), "t-1");
	assert_memory_equal(m->m.body, msg.body, 13);
	assert_int_equal(m->m.body_len, 13);
	assert_string_equal(m->m.group_id, "cli/s1");
	assert_int_equal(m->m.receive_count, 2);
	assert_string_equal(m->m.message_id, "m-1");
	assert_string_equal(attr(m, "request_id"), "t-1");
	assert_string_equal(attr(m, "lang"), "caf\xc3\xa9");
	assert_null(attr(m, SQS_ATTR_BODY)); /* the transport's own are not the host's */
	sqs_msg_free(m);
	json_object_put(req);
}

static void binary_message(void **state)
{
	(void)state;
	const char body[] = {'a', '\0', (char)0xff, (char)0x80, '\n', (char)0xc8};
	const char *attrs[] = {"ctl", "bell\x07", NULL};
	aks_message msg = {AKS_MESSAGE_INIT,
	                   .body = body,
	                   .body_len = sizeof(body),
	                   .attributes = attrs,
	                   .group_id = "grp with spaces \xc3\xa9",
	                   .dedup_id = NULL};
	json_object *req = NULL;
	sqs_msg *m = round_trip(&msg, &req);
	/* the body travelled as base64, the group as a hash, the host's group in an attribute */
	assert_string_not_equal(aks__jstr(req, "MessageBody"), "a");
	assert_int_equal(m->m.body_len, sizeof(body));
	assert_memory_equal(m->m.body, body, sizeof(body));
	assert_string_equal(m->m.group_id, "grp with spaces \xc3\xa9");
	assert_string_equal(attr(m, "ctl"), "bell\x07"); /* a Binary attribute */
	assert_null(attr(m, SQS_ATTR_GROUP));
	sqs_msg_free(m);
	json_object_put(req);
}

static void empty_and_ungrouped(void **state)
{
	(void)state;
	aks_message msg = {AKS_MESSAGE_INIT, .body = "", .body_len = 0, .attributes = NULL};
	json_object *req = NULL, *req2 = NULL;
	sqs_msg *m = round_trip(&msg, &req);
	sqs_msg *m2 = round_trip(&msg, &req2);
	assert_int_equal(m->m.body_len, 0);
	assert_null(m->m.group_id); /* no group, as sent */
	/* two ungrouped messages never share a group, nor a deduplication id */
	assert_string_not_equal(aks__jstr(req, "MessageGroupId"),
	                        aks__jstr(req2, "MessageGroupId"));
	assert_string_not_equal(aks__jstr(req, "MessageDeduplicationId"),
	                        aks__jstr(req2, "MessageDeduplicationId"));
	sqs_msg_free(m);
	sqs_msg_free(m2);
	json_object_put(req);
	json_object_put(req2);
}

static void refused_attributes(void **state)
{
	(void)state;
	aks_error *err = NULL;
	const char *bad_name[] = {"AWS.trace", "x", NULL};
	aks_message msg = {AKS_MESSAGE_INIT, .body = "b", .body_len = 1, .attributes = bad_name};
	json_object *req = json_object_new_object();
	assert_int_equal(sqs_encode(host(), &msg, req, &err), AKS_EINVAL);
	assert_non_null(strstr(aks_error_message(err), "AWS.trace"));
	aks_error_free(err);
	err = NULL;
	json_object_put(req);

	const char *ours[] = {"aks-body", "base64", NULL};
	msg.attributes = ours;
	req = json_object_new_object();
	assert_int_equal(sqs_encode(host(), &msg, req, &err), AKS_EINVAL);
	aks_error_free(err);
	err = NULL;
	json_object_put(req);

	const char *many[2 * 9 + 1] = {0};
	char names[9][8];
	for (int i = 0; i < 9; i++) {
		snprintf(names[i], sizeof(names[i]), "k%d", i);
		many[2 * i] = names[i];
		many[2 * i + 1] = "v";
	}
	msg.attributes = many;
	req = json_object_new_object();
	assert_int_equal(sqs_encode(host(), &msg, req, &err), AKS_EINVAL);
	assert_non_null(strstr(aks_error_message(err), "attributes"));
	aks_error_free(err);
	json_object_put(req);
}

static void foreign_answers(void **state)
{
	(void)state;
	aks_error *err = NULL;
	sqs_msg *m = NULL;
	/* no receipt handle: nothing could settle it */
	json_object *j = json_tokener_parse("{\"MessageId\": \"x\", \"Body\": \"b\"}");
	assert_int_equal(sqs_decode(host(), j, &m, &err), AKS_EBROKER);
	assert_null(m);
	aks_error_free(err);
	err = NULL;
	json_object_put(j);
	/* marked base64 and not */
	j = json_tokener_parse(
	    "{\"ReceiptHandle\": \"r\", \"Body\": \"!!\", \"MessageAttributes\": "
	    "{\"aks-body\": {\"DataType\": \"String\", \"StringValue\": "
	    "\"base64\"}}}");
	assert_int_equal(sqs_decode(host(), j, &m, &err), AKS_EBROKER);
	aks_error_free(err);
	err = NULL;
	json_object_put(j);
	/* a message someone else sent (no attributes of ours, a bad count): read as text, count 1
	 */
	j = json_tokener_parse(
	    "{\"ReceiptHandle\": \"r\", \"Body\": \"hello\", \"Attributes\": "
	    "{\"ApproximateReceiveCount\": \"zero\", \"MessageGroupId\": \"g\"}}");
	assert_int_equal(sqs_decode(host(), j, &m, &err), AKS_OK);
	assert_int_equal(m->m.receive_count, 1);
	assert_string_equal(m->m.group_id, "g");
	assert_string_equal(m->m.body, "hello");
	sqs_msg_free(m);
	json_object_put(j);
}

/* ---- holding back a group's later messages (sqs_hold.c) ---- */

static sqs_msg *msg_of(const char *id, const char *group)
{
	sqs_msg *m = calloc(1, sizeof(*m));
	m->message_id = strdup(id);
	m->sqs_group = strdup(group);
	m->m.message_id = m->message_id;
	return m;
}

static const char *ids_of(aks_message **out, size_t n, char *buf, size_t size)
{
	buf[0] = '\0';
	for (size_t i = 0; i < n; i++)
		snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", i ? "," : "",
		         out[i]->message_id);
	return buf;
}

static const char *list_ids(const sqs_msg *m, char *buf, size_t size)
{
	buf[0] = '\0';
	for (; m; m = m->next)
		snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", buf[0] ? "," : "",
		         m->message_id);
	return buf;
}

static void free_list(sqs_msg *m)
{
	for (sqs_msg *next; m; m = next) {
		next = m->next;
		sqs_msg_free(m);
	}
}

/* AWS returns as many messages of one group as it can in one answer, in order (the SQS
 * developer guide, "FIFO queue logic"); fauxqs returns one per group, so the tests against it
 * never see this: here the answer is the one AWS documents. */
static void one_in_flight_per_group(void **state)
{
	(void)state;
	sqs_lists l = {0};
	aks_message *out[10];
	size_t n = 0;
	char buf[128];
	const char *answer[][2] = {{"a1", "A"}, {"a2", "A"}, {"b1", "B"}, {"a3", "A"}};
	for (size_t i = 0; i < 4; i++)
		sqs_hand_out_or_hold(&l, msg_of(answer[i][0], answer[i][1]), out, 10, &n);
	assert_string_equal(ids_of(out, n, buf, sizeof(buf)), "a1,b1");
	assert_string_equal(list_ids(l.held, buf, sizeof(buf)), "a2,a3");

	/* while a1 is in flight, nothing of A comes, whatever the room */
	aks_message *a1_msg = out[0];
	n = 0;
	sqs_hand_out_held(&l, out, 10, &n);
	assert_int_equal(n, 0);

	/* a1 settled: a2, and only a2 (a3 waits behind it) */
	sqs_msg *a1 = sqs_settle(&l, a1_msg);
	assert_non_null(a1);
	assert_string_equal(a1->message_id, "a1");
	assert_null(sqs_settle(&l, &a1->m)); /* settled once */
	assert_false(sqs_holds(&l, &a1->m));
	sqs_msg_free(a1);
	sqs_hand_out_held(&l, out, 10, &n);
	assert_string_equal(ids_of(out, n, buf, sizeof(buf)), "a2");
	assert_true(sqs_holds(&l, out[0]));

	/* a2 nacked: A's held messages go back with it, so a2 comes back first */
	sqs_msg *a2 = sqs_settle(&l, out[0]);
	sqs_msg *released = sqs_release_group(&l, a2);
	assert_string_equal(list_ids(released, buf, sizeof(buf)), "a3");
	assert_null(l.held);
	assert_string_equal(list_ids(l.inflight, buf, sizeof(buf)), "b1");
	free_list(released);
	sqs_msg_free(a2);
	free_list(l.inflight);
}

static void room_and_order(void **state)
{
	(void)state;
	sqs_lists l = {0};
	aks_message *out[2];
	size_t n = 0;
	char buf[128];
	/* a fetch of one: the rest of the answer waits, another group's too, in order */
	sqs_hand_out_or_hold(&l, msg_of("c1", "C"), out, 1, &n);
	sqs_hand_out_or_hold(&l, msg_of("d1", "D"), out, 1, &n);
	sqs_hand_out_or_hold(&l, msg_of("e1", "E"), out, 1, &n);
	assert_string_equal(ids_of(out, n, buf, sizeof(buf)), "c1");
	/* the next fetch takes held messages of free groups first, as many as it may */
	n = 0;
	sqs_hand_out_held(&l, out, 2, &n);
	assert_string_equal(ids_of(out, n, buf, sizeof(buf)), "d1,e1");
	assert_null(l.held);
	assert_string_equal(list_ids(l.inflight, buf, sizeof(buf)), "c1,d1,e1");
	/* a message nobody holds is not settled */
	sqs_msg *stranger = msg_of("x", "X");
	assert_null(sqs_settle(&l, &stranger->m));
	assert_false(sqs_holds(&l, &stranger->m));
	sqs_msg_free(stranger);
	free_list(l.inflight);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(text_rules),
	    cmocka_unit_test(ids),
	    cmocka_unit_test(attribute_names),
	    cmocka_unit_test(text_message),
	    cmocka_unit_test(binary_message),
	    cmocka_unit_test(empty_and_ungrouped),
	    cmocka_unit_test(refused_attributes),
	    cmocka_unit_test(foreign_answers),
	    cmocka_unit_test(one_in_flight_per_group),
	    cmocka_unit_test(room_and_order),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
