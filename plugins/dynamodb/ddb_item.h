/*
 * plugins/dynamodb/ddb_item.h - the dynamodb store's table layout as pure functions: names
 * to key attributes, records to items and back, the time-to-live rule that hides an expired
 * item, the key prefix a Query may ask for, and an item's size against DynamoDB's limit.
 *
 * No I/O and no host: only json-c and libaks-util, so the unit test (tests/unit/
 * test_dynamodb_item.c) links this file alone. The layout it encodes is documented in
 * docs/plugins/dynamodb.md ("Table layout"); change both together.
 */
#ifndef AKS_DDB_ITEM_H
#define AKS_DDB_ITEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

/* Attribute names. pk and sk are the table's key (both binary); the rest are ordinary
 * attributes. */
#define DDB_PK      "pk"         /* B: the namespace (records) or DDB_LOCK_TAG + namespace */
#define DDB_SK      "sk"         /* B: the record's or the lock's key */
#define DDB_VAL     "val"        /* B: the record's bytes */
#define DDB_VER     "ver"        /* S: random token of the write that made this item */
#define DDB_EXPIRES "expires_at" /* N: epoch seconds; the table's TTL attribute */
#define DDB_OWNER   "owner"      /* S: a lock's holder (its random token) */
#define DDB_LEASE   "lease_ms"   /* N: epoch ms at which a lock's lease ends */

/* A lock's partition key is these two bytes and the namespace: a namespace never holds a
 * NUL, so no namespace's partition is ever a lock's. */
#define DDB_LOCK_TAG     "\0L"
#define DDB_LOCK_TAG_LEN 2

/* DynamoDB's item size limit, in bytes (names and values of every attribute). */
#define DDB_ITEM_MAX (400 * 1024)

/* {"B": base64(data)}, {"S": s}, {"N": "<v>"}; NULL when out of memory. */
json_object *ddb_attr_b(const void *data, size_t len);
json_object *ddb_attr_s(const char *s);
json_object *ddb_attr_n(int64_t v);

/* Adds v to obj under key; false when v is NULL or out of memory (v is then released).
 * Lets a whole object be built in one chain of && with one check at its end. */
bool ddb_put(json_object *obj, const char *key, json_object *v);

/* The key of the record (ns, key): {"pk": {"B": ns}, "sk": {"B": key}}. NULL: no memory. */
json_object *ddb_record_key(const char *ns, const char *key);
/* The key of the lock named (ns, key): pk is DDB_LOCK_TAG + ns. */
json_object *ddb_lock_key(const char *ns, const char *key);

/* A whole record item: its key, val, ver, and expires_at when expires_at > 0. */
json_object *ddb_record_item(const char *ns, const char *key, const void *value, size_t len,
                             const char *ver, int64_t expires_at);

/* A record item as read back. Every pointer is malloc'd (free with ddb_record_clear) and
 * NUL-terminated past its length; absent attributes are NULL with length 0. */
typedef struct ddb_record {
	unsigned char *pk, *sk, *val;
	size_t pk_len, sk_len, val_len;
	char *ver;          /* NULL: the item has no ver (not written by this store) */
	int64_t expires_at; /* 0: none */
	bool has_val;
} ddb_record;

/* Reads item (an attribute map, as GetItem's Item or one of Query's Items) into *r.
 * 0; -1 when an attribute this store writes has the wrong type or is not base64 (the item
 * was not written by this store); -2 when out of memory. *r is cleared on failure. */
int ddb_record_read(json_object *item, ddb_record *r);
void ddb_record_clear(ddb_record *r);

/* The epoch second at and after which a record written now_ms with ttl_seconds is expired:
 * rounded up, so a record lives at least its time to live (and at most a second more). */
int64_t ddb_expiry(int64_t now_ms, int64_t ttl_seconds);
/* Whether an item with that expires_at (0: none) counts as absent at now_ms. DynamoDB
 * deletes expired items only eventually (and emulators never): every read applies this. */
bool ddb_expired(int64_t expires_at, int64_t now_ms);

/* Whether pk is a record partition, i.e. a namespace the store may list: 1 to 256 bytes,
 * no NUL (a lock's partition starts with one). */
bool ddb_pk_is_namespace(const unsigned char *pk, size_t len);

/* The size DynamoDB counts for a record item (attribute names, key and value bytes, the
 * version token and a time to live), rounded up; compared with DDB_ITEM_MAX before a
 * write. */
size_t ddb_record_size(size_t ns_len, size_t key_len, size_t val_len, bool expiring);

/* 16 random bytes as 32 lowercase hex characters and a NUL; -1 when no randomness. */
int ddb_token(char out[33]);

#endif /* AKS_DDB_ITEM_H */
