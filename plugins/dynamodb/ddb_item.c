/*
 * plugins/dynamodb/ddb_item.c - the dynamodb store's table layout (ddb_item.h): names and
 * records as DynamoDB attribute maps in the JSON protocol, and back.
 *
 * Names and values are binary (B) attributes, base64 in the protocol: the store's names and
 * records are byte strings, and a string (S) attribute would have to be valid UTF-8.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aks_base64.h"
#include "aks_text.h"
#include "ddb_item.h"

json_object *ddb_attr_b(const void *data, size_t len)
{
	char *text = aks__base64_encode(data, len, AKS_BASE64_STD);
	if (!text)
		return NULL;
	json_object *o = json_object_new_object();
	if (!ddb_put(o, "B", json_object_new_string(text))) {
		json_object_put(o);
		o = NULL;
	}
	free(text);
	return o;
}

json_object *ddb_attr_s(const char *s)
{
	json_object *o = json_object_new_object();
	if (!ddb_put(o, "S", json_object_new_string(s))) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

json_object *ddb_attr_n(int64_t v)
{
	char text[32];
	snprintf(text, sizeof(text), "%" PRId64, v);
	json_object *o = json_object_new_object();
	if (!ddb_put(o, "N", json_object_new_string(text))) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

bool ddb_put(json_object *obj, const char *key, json_object *v)
{
	if (!obj || !v) {
		json_object_put(v);
		return false;
	}
	if (json_object_object_add(obj, key, v) != 0) {
		json_object_put(v);
		return false;
	}
	return true;
}

static json_object *key_of(const void *pk, size_t pk_len, const char *key)
{
	json_object *o = json_object_new_object();
	if (!(ddb_put(o, DDB_PK, ddb_attr_b(pk, pk_len)) &&
	      ddb_put(o, DDB_SK, ddb_attr_b(key, strlen(key))))) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

json_object *ddb_record_key(const char *ns, const char *key)
{
	return key_of(ns, strlen(ns), key);
}

json_object *ddb_lock_key(const char *ns, const char *key)
{
	size_t n = strlen(ns);
	unsigned char *pk = malloc(DDB_LOCK_TAG_LEN + n);
	if (!pk)
		return NULL;
	memcpy(pk, DDB_LOCK_TAG, DDB_LOCK_TAG_LEN);
	memcpy(pk + DDB_LOCK_TAG_LEN, ns, n);
	json_object *o = key_of(pk, DDB_LOCK_TAG_LEN + n, key);
	free(pk);
	return o;
}

json_object *ddb_record_item(const char *ns, const char *key, const void *value, size_t len,
                             const char *ver, int64_t expires_at)
{
	json_object *o = ddb_record_key(ns, key);
	if (!(ddb_put(o, DDB_VAL, ddb_attr_b(value, len)) && ddb_put(o, DDB_VER, ddb_attr_s(ver)) &&
	      (expires_at <= 0 || ddb_put(o, DDB_EXPIRES, ddb_attr_n(expires_at))))) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

/* ---- reading items ---- */

/* The value of attribute name of type type ("B", "S", "N") in item: 1 with *v set, 0 when
 * the item has no such attribute, -1 when it has one of another type. */
static int attr(json_object *item, const char *name, const char *type, json_object **v)
{
	json_object *a = NULL, *t = NULL;
	*v = NULL;
	if (!json_object_object_get_ex(item, name, &a) || !a)
		return 0;
	if (!json_object_is_type(a, json_type_object) || !json_object_object_get_ex(a, type, &t) ||
	    !json_object_is_type(t, json_type_string))
		return -1;
	*v = t;
	return 1;
}

/* A binary attribute decoded into *out (malloc'd, NUL after its bytes). */
static int read_b(json_object *item, const char *name, unsigned char **out, size_t *len)
{
	json_object *v;
	int rc = attr(item, name, "B", &v);
	if (rc <= 0)
		return rc;
	rc = aks__base64_decode(json_object_get_string(v), (size_t)json_object_get_string_len(v),
	                        AKS_BASE64_STD, out, len);
	return rc == 0 ? 1 : rc == AKS_ENOMEM ? -2 : -1;
}

int ddb_record_read(json_object *item, ddb_record *r)
{
	memset(r, 0, sizeof(*r));
	if (!json_object_is_type(item, json_type_object))
		return -1;
	int rc = read_b(item, DDB_PK, &r->pk, &r->pk_len);
	if (rc >= 0)
		rc = read_b(item, DDB_SK, &r->sk, &r->sk_len);
	if (rc >= 0 && (rc = read_b(item, DDB_VAL, &r->val, &r->val_len)) > 0)
		r->has_val = true;
	json_object *v = NULL;
	if (rc >= 0 && (rc = attr(item, DDB_VER, "S", &v)) > 0 &&
	    !(r->ver = strdup(json_object_get_string(v))))
		rc = -2;
	if (rc >= 0 && (rc = attr(item, DDB_EXPIRES, "N", &v)) > 0) {
		/* TTL is epoch seconds as an integer; anything else (DynamoDB would ignore it for
		 * TTL too) counts as no expiry. */
		const char *text = json_object_get_string(v);
		char *end = NULL;
		errno = 0;
		long long e = strtoll(text, &end, 10);
		r->expires_at = errno == 0 && end != text && *end == '\0' && e > 0 ? (int64_t)e : 0;
	}
	if (rc < 0) {
		ddb_record_clear(r);
		return rc;
	}
	return 0;
}

void ddb_record_clear(ddb_record *r)
{
	free(r->pk);
	free(r->sk);
	free(r->val);
	free(r->ver);
	memset(r, 0, sizeof(*r));
}

/* ---- time to live ---- */

int64_t ddb_expiry(int64_t now_ms, int64_t ttl_seconds)
{
	return (now_ms + 999) / 1000 + ttl_seconds;
}

bool ddb_expired(int64_t expires_at, int64_t now_ms)
{
	return expires_at > 0 && now_ms >= expires_at * 1000;
}

/* ---- names ---- */

bool ddb_pk_is_namespace(const unsigned char *pk, size_t len)
{
	return pk && len >= 1 && len <= 256 && !memchr(pk, '\0', len);
}

size_t ddb_record_size(size_t ns_len, size_t key_len, size_t val_len, bool expiring)
{
	/* Each attribute counts its name's bytes and its value's; a number at most 21 bytes. */
	size_t n = strlen(DDB_PK) + ns_len + strlen(DDB_SK) + key_len + strlen(DDB_VAL) + val_len +
	           strlen(DDB_VER) + 32;
	if (expiring)
		n += strlen(DDB_EXPIRES) + 21;
	return n + 64; /* headroom for what DynamoDB counts per item and does not document */
}

int ddb_token(char out[33])
{
	return aks__random_hex(out, 16) ? 0 : -1;
}
