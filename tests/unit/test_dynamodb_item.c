/*
 * tests/unit/test_dynamodb_item.c - the dynamodb store's table layout without a network
 * (plugins/dynamodb/ddb_item.c): names and records as binary attributes and back (NUL,
 * 0xFF and invalid UTF-8 kept exactly), lock partitions apart from every namespace, the
 * time-to-live rule every read applies (an item past its expires_at is absent, whatever
 * DynamoDB has not deleted yet), and the item size checked against DynamoDB's 400 KB.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ddb_item.h"

/* The base64 text of attribute name's {"B": ...} in o. */
static const char *b_of(json_object *o, const char *name)
{
	json_object *a = NULL, *b = NULL;
	assert_true(json_object_object_get_ex(o, name, &a));
	assert_true(json_object_object_get_ex(a, "B", &b));
	return json_object_get_string(b);
}

static void record_key_is_binary_namespace_and_key(void **state)
{
	(void)state;
	json_object *k = ddb_record_key("cli", "session:default:local");
	assert_non_null(k);
	assert_string_equal(b_of(k, DDB_PK), "Y2xp"); /* "cli" */
	assert_string_equal(b_of(k, DDB_SK), "c2Vzc2lvbjpkZWZhdWx0OmxvY2Fs");
	assert_int_equal(json_object_object_length(k), 2);
	json_object_put(k);
}

static void lock_partition_is_no_namespace(void **state)
{
	(void)state;
	json_object *k = ddb_lock_key("cli", "s");
	assert_string_equal(b_of(k, DDB_PK), "AExjbGk="); /* "\0Lcli" */
	ddb_record r;
	assert_int_equal(ddb_record_read(k, &r), 0);
	assert_int_equal(r.pk_len, 5);
	assert_memory_equal(r.pk, "\0Lcli", 5);
	assert_false(ddb_pk_is_namespace(r.pk, r.pk_len));
	ddb_record_clear(&r);
	json_object_put(k);
	assert_true(ddb_pk_is_namespace((const unsigned char *)"cli", 3));
	unsigned char longest[256], too_long[257];
	memset(longest, 'n', sizeof(longest));
	memset(too_long, 'n', sizeof(too_long));
	assert_true(ddb_pk_is_namespace(longest, sizeof(longest)));
	assert_false(ddb_pk_is_namespace(too_long, sizeof(too_long)));
	assert_false(ddb_pk_is_namespace((const unsigned char *)"", 0));
}

static void record_round_trips_any_bytes(void **state)
{
	(void)state;
	static const char value[] = {'{', 0, (char)0xFF, (char)0xC3, '\n', '}'};
	const char *ns = "\xff\xfe ns", *key = "k\xc3(\x80";
	json_object *item = ddb_record_item(ns, key, value, sizeof(value), "0123abcd", 0);
	assert_non_null(item);
	/* no TTL attribute on a record that does not expire */
	assert_false(json_object_object_get_ex(item, DDB_EXPIRES, NULL));
	/* through the protocol's text, as DynamoDB would send it back */
	json_object *back = json_tokener_parse(json_object_to_json_string(item));
	ddb_record r;
	assert_int_equal(ddb_record_read(back, &r), 0);
	assert_int_equal(r.pk_len, strlen(ns));
	assert_memory_equal(r.pk, ns, r.pk_len);
	assert_int_equal(r.sk_len, strlen(key));
	assert_memory_equal(r.sk, key, r.sk_len);
	assert_true(r.has_val);
	assert_int_equal(r.val_len, sizeof(value));
	assert_memory_equal(r.val, value, sizeof(value));
	assert_string_equal(r.ver, "0123abcd");
	assert_int_equal(r.expires_at, 0);
	ddb_record_clear(&r);
	json_object_put(back);
	json_object_put(item);
}

static void empty_value_round_trips(void **state)
{
	(void)state;
	json_object *item = ddb_record_item("n", "k", "", 0, "v", 0);
	assert_string_equal(b_of(item, DDB_VAL), "");
	ddb_record r;
	assert_int_equal(ddb_record_read(item, &r), 0);
	assert_true(r.has_val);
	assert_int_equal(r.val_len, 0);
	ddb_record_clear(&r);
	json_object_put(item);
}

static void items_of_others_are_refused(void **state)
{
	(void)state;
	const char *bad[] = {
	    "{\"pk\": {\"S\": \"cli\"}, \"sk\": {\"B\": \"aw==\"}}",   /* pk a string */
	    "{\"pk\": {\"B\": \"Y2xp\"}, \"sk\": {\"B\": \"a w==\"}}", /* not base64 */
	    "{\"pk\": {\"B\": \"Y2xp\"}, \"sk\": {\"B\": \"aw==\"}, \"val\": {\"S\": \"x\"}}",
	    "{\"pk\": {\"B\": \"Y2xp\"}, \"sk\": {\"B\": \"aw==\"}, \"ver\": {\"N\": \"1\"}}",
	    "[]",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_object *o = json_tokener_parse(bad[i]);
		ddb_record r;
		assert_int_equal(ddb_record_read(o, &r), -1);
		assert_null(r.pk);
		assert_null(r.sk);
		json_object_put(o);
	}
	/* A projection (namespaces reads pk and expires_at only) is fine. */
	json_object *o = json_tokener_parse("{\"pk\": {\"B\": \"Y2xp\"}, "
	                                    "\"expires_at\": {\"N\": \"1700000000\"}}");
	ddb_record r;
	assert_int_equal(ddb_record_read(o, &r), 0);
	assert_int_equal(r.pk_len, 3);
	assert_null(r.sk);
	assert_false(r.has_val);
	assert_int_equal(r.expires_at, 1700000000);
	ddb_record_clear(&r);
	json_object_put(o);
}

/* The read-side filter: DynamoDB keeps expired items for days, dynalite for ever. */
static void expired_items_are_absent(void **state)
{
	(void)state;
	int64_t now_ms = 1700000000500; /* ...000.5 s */
	int64_t e = ddb_expiry(now_ms, 1);
	assert_int_equal(e, 1700000002); /* rounded up: it lives at least its second */
	assert_false(ddb_expired(e, now_ms));
	assert_false(ddb_expired(e, 1700000001999));
	assert_true(ddb_expired(e, 1700000002000));
	assert_true(ddb_expired(e, now_ms + 86400000));
	assert_false(ddb_expired(0, now_ms)); /* no TTL: never */
	assert_int_equal(ddb_expiry(1700000000000, 60), 1700000060);

	/* An item read back with its expires_at in the past is expired... */
	json_object *item = ddb_record_item("q", "task", "done", 4, "t", 1600000000);
	json_object *n = NULL, *a = NULL;
	assert_true(json_object_object_get_ex(item, DDB_EXPIRES, &a));
	assert_true(json_object_object_get_ex(a, "N", &n));
	assert_string_equal(json_object_get_string(n), "1600000000");
	ddb_record r;
	assert_int_equal(ddb_record_read(item, &r), 0);
	assert_true(ddb_expired(r.expires_at, now_ms));
	ddb_record_clear(&r);
	json_object_put(item);

	/* ...and one whose TTL attribute DynamoDB would ignore (not an integer) never is. */
	const char *odd[] = {"{\"expires_at\": {\"N\": \"1.5e9\"}}",
	                     "{\"expires_at\": {\"N\": \"-5\"}}"};
	for (size_t i = 0; i < 2; i++) {
		json_object *o = json_tokener_parse(odd[i]);
		assert_int_equal(ddb_record_read(o, &r), 0);
		assert_false(ddb_expired(r.expires_at, now_ms));
		ddb_record_clear(&r);
		json_object_put(o);
	}
}

static void item_size_against_the_limit(void **state)
{
	(void)state;
	size_t small = ddb_record_size(3, 21, 100, false);
	assert_true(small > 124 && small < 400);
	assert_true(ddb_record_size(3, 1, 100, true) > ddb_record_size(3, 1, 100, false));
	assert_true(ddb_record_size(256, 256, 400 * 1024 - 1000, true) <= DDB_ITEM_MAX);
	assert_true(ddb_record_size(1, 1, 400 * 1024, false) > DDB_ITEM_MAX);
}

static void tokens_are_random_hex(void **state)
{
	(void)state;
	char a[33], b[33];
	assert_int_equal(ddb_token(a), 0);
	assert_int_equal(ddb_token(b), 0);
	assert_int_equal(strlen(a), 32);
	assert_int_equal(strspn(a, "0123456789abcdef"), 32);
	assert_string_not_equal(a, b);
}

static void numbers_and_strings(void **state)
{
	(void)state;
	json_object *n = ddb_attr_n(-42), *s = ddb_attr_s("x\"y");
	assert_string_equal(json_object_to_json_string_ext(n, JSON_C_TO_STRING_PLAIN),
	                    "{\"N\":\"-42\"}");
	assert_string_equal(json_object_to_json_string_ext(s, JSON_C_TO_STRING_PLAIN),
	                    "{\"S\":\"x\\\"y\"}");
	json_object_put(n);
	json_object_put(s);
	assert_false(ddb_put(NULL, "k", json_object_new_int(1))); /* released, no leak */
	json_object *o = json_object_new_object();
	assert_false(ddb_put(o, "k", NULL));
	json_object_put(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(record_key_is_binary_namespace_and_key),
	    cmocka_unit_test(lock_partition_is_no_namespace),
	    cmocka_unit_test(record_round_trips_any_bytes),
	    cmocka_unit_test(empty_value_round_trips),
	    cmocka_unit_test(items_of_others_are_refused),
	    cmocka_unit_test(expired_items_are_absent),
	    cmocka_unit_test(item_size_against_the_limit),
	    cmocka_unit_test(tokens_are_random_hex),
	    cmocka_unit_test(numbers_and_strings),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
