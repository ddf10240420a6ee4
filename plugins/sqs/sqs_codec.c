/*
 * plugins/sqs/sqs_codec.c - how a message maps onto SQS's fields, both ways. No I/O: the unit
 * test and the fuzz target (sqs_message) drive it directly.
 *
 * SQS carries text, not bytes: a body or a String attribute may hold only the characters of
 * XML 1.0 (sqs_text_ok). A body outside them travels base64-encoded, marked by the attribute
 * aks-body, and an attribute value as a Binary attribute. Group and deduplication ids are
 * ASCII of 128 characters at most: a host id outside that becomes a hash of itself (two
 * groups that share a hash are only serialised together, never run in parallel; the host's id
 * travels in aks-group so the receiver sees it unchanged). A message without a group gets a
 * group of its own (FIFO queues need one), so it waits for nothing.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "aks_base64.h"
#include "aks_json.h"
#include "aks_text.h"
#include "sqs_internal.h"

/* The code point at s[0..len) and its length in *n; -1 when the bytes are not UTF-8 (an
 * overlong form, a surrogate, past U+10FFFF, cut short). */
static long utf8_next(const unsigned char *s, size_t len, size_t *n)
{
	unsigned c = s[0];
	size_t need;
	long cp, min;
	if (c < 0x80) {
		*n = 1;
		return c;
	}
	if ((c & 0xE0) == 0xC0)
		need = 2, cp = c & 0x1F, min = 0x80;
	else if ((c & 0xF0) == 0xE0)
		need = 3, cp = c & 0x0F, min = 0x800;
	else if ((c & 0xF8) == 0xF0)
		need = 4, cp = c & 0x07, min = 0x10000;
	else
		return -1;
	if (len < need)
		return -1;
	for (size_t i = 1; i < need; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return -1;
		cp = (cp << 6) | (s[i] & 0x3F);
	}
	if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		return -1;
	*n = need;
	return cp;
}

bool sqs_text_ok(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	for (size_t i = 0; i < len;) {
		size_t n = 0;
		long cp = utf8_next(p + i, len - i, &n);
		if (cp < 0)
			return false;
		bool ok = cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) ||
		          (cp >= 0xE000 && cp <= 0xFFFD) || cp >= 0x10000;
		if (!ok)
			return false;
		i += n;
	}
	return true;
}

bool sqs_id_ok(const char *s)
{
	size_t len = s ? strlen(s) : 0;
	if (len == 0 || len > SQS_MAX_ID)
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] <= 0x20 || s[i] >= 0x7F) /* letters, digits and punctuation only */
			return false;
	return true;
}

/* FNV-1a, 64 bits, from a given basis: two bases give 128 bits of hash. */
static uint64_t fnv1a64(const char *s, uint64_t h)
{
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ULL;
	}
	return h;
}

void sqs_id_for(const char *s, char *buf, size_t size)
{
	if (sqs_id_ok(s)) {
		snprintf(buf, size, "%s", s);
		return;
	}
	snprintf(buf, size, "aks-%016llx%016llx",
	         (unsigned long long)fnv1a64(s ? s : "", 0xcbf29ce484222325ULL),
	         (unsigned long long)fnv1a64(s ? s : "", 0x84222325cbf29ce4ULL));
}

bool sqs_attr_name_ok(const char *name)
{
	size_t len = name ? strlen(name) : 0;
	if (len == 0 || len > 256 || name[0] == '.' || name[len - 1] == '.')
		return false;
	if (strncasecmp(name, "AWS.", 4) == 0 || strncasecmp(name, "Amazon.", 7) == 0)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		          (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
		if (!ok || (c == '.' && name[i + 1] == '.'))
			return false;
	}
	return true;
}

/* ---- encoding ---- */

static bool put_str(json_object *o, const char *key, const char *value)
{
	json_object *v = json_object_new_string(value);
	if (!v || json_object_object_add(o, key, v) != 0) {
		json_object_put(v);
		return false;
	}
	return true;
}

/* One attribute: String when SQS can carry the value as text, else Binary. */
static bool put_attr(json_object *attrs, const char *name, const char *value)
{
	json_object *a = json_object_new_object();
	bool ok = a != NULL;
	size_t len = strlen(value);
	if (ok && sqs_text_ok(value, len) && len > 0) {
		ok = put_str(a, "DataType", "String") && put_str(a, "StringValue", value);
	} else if (ok) {
		char *b64 = aks__base64_encode(value, len, AKS_BASE64_STD);
		ok = b64 && put_str(a, "DataType", "Binary") && put_str(a, "BinaryValue", b64);
		free(b64);
	}
	if (!ok || json_object_object_add(attrs, name, a) != 0) {
		json_object_put(a);
		return false;
	}
	return true;
}

static int oom(const aks_host_api *host, aks_error **err)
{
	return host->error_set(err, AKS_ENOMEM, "out of memory");
}

int sqs_encode(const aks_host_api *host, const aks_message *msg, json_object *req, aks_error **err)
{
	json_object *attrs = json_object_new_object();
	if (!attrs || json_object_object_add(req, "MessageAttributes", attrs) != 0) {
		json_object_put(attrs);
		return oom(host, err);
	}
	size_t count = 0;
	for (const char *const *a = msg->attributes; a && a[0] && a[1]; a += 2) {
		if (!sqs_attr_name_ok(a[0]) || strncmp(a[0], SQS_ATTR_PREFIX, 4) == 0)
			return host->error_set(err, AKS_EINVAL,
			                       SQS_NAME
			                       ": attribute '%s' cannot be an SQS message "
			                       "attribute name (1 to 256 of A-Z a-z 0-9 _ - ., not "
			                       "starting with AWS., Amazon. or aks-)",
			                       a[0]);
		if (++count > SQS_MAX_ATTRIBUTES - 2)
			return host->error_set(err, AKS_EINVAL,
			                       SQS_NAME
			                       ": more than %d attributes (SQS carries %d, "
			                       "the transport uses 2)",
			                       SQS_MAX_ATTRIBUTES - 2, SQS_MAX_ATTRIBUTES);
		if (!put_attr(attrs, a[0], a[1]))
			return oom(host, err);
	}

	/* the body: as it is when SQS can carry it, else base64 */
	const char *body = msg->body ? msg->body : "";
	size_t len = msg->body ? msg->body_len : 0;
	if (len > 0 && sqs_text_ok(body, len)) {
		json_object *b = json_object_new_string_len(body, (int)len);
		if (!b || json_object_object_add(req, "MessageBody", b) != 0) {
			json_object_put(b);
			return oom(host, err);
		}
	} else {
		/* an empty body is not allowed either: base64 of nothing is "" too, so "=" marks it
		 */
		char *b64 = len ? aks__base64_encode(body, len, AKS_BASE64_STD) : strdup("=");
		bool ok = b64 && put_str(req, "MessageBody", b64) &&
		          put_attr(attrs, SQS_ATTR_BODY, "base64");
		free(b64);
		if (!ok)
			return oom(host, err);
	}

	char id[SQS_MAX_ID + 1];
	if (msg->group_id) {
		sqs_id_for(msg->group_id, id, sizeof(id));
		if (strcmp(id, msg->group_id) != 0 &&
		    !put_attr(attrs, SQS_ATTR_GROUP, msg->group_id))
			return oom(host, err);
	} else {
		memcpy(id, "aks-none-", 9);
		if (!aks__random_hex(id + 9, 16))
			return host->error_set(err, AKS_EIO,
			                       SQS_NAME ": no random bytes for a group");
		if (!put_attr(attrs, SQS_ATTR_NOGROUP, "1"))
			return oom(host, err);
	}
	if (!put_str(req, "MessageGroupId", id))
		return oom(host, err);
	/* FIFO queues need a deduplication id (or content-based deduplication, which would drop
	 * two equal requests): without one from the host, one that matches nothing */
	if (msg->dedup_id) {
		sqs_id_for(msg->dedup_id, id, sizeof(id));
	} else {
		memcpy(id, "aks-once-", 9);
		if (!aks__random_hex(id + 9, 16))
			return host->error_set(err, AKS_EIO,
			                       SQS_NAME ": no random bytes for an id");
	}
	if (!put_str(req, "MessageDeduplicationId", id))
		return oom(host, err);
	return AKS_OK;
}

/* ---- decoding ---- */

void sqs_msg_free(sqs_msg *m)
{
	if (!m)
		return;
	free(m->body);
	for (char **a = m->attrs; a && *a; a++)
		free(*a);
	free(m->attrs);
	free(m->group);
	free(m->sqs_group);
	free(m->dedup);
	free(m->message_id);
	free(m->receipt);
	free(m);
}

/* An attribute's value as bytes (a Binary one decoded) in *out, NUL-terminated; *out NULL
 * when the attribute is of a type the transport never sends. false on a bad encoding or
 * ENOMEM (*bad says which). */
static bool attr_value(json_object *a, char **out, size_t *len, bool *bad)
{
	*out = NULL;
	*len = 0;
	*bad = false;
	const char *type = aks__jstr(a, "DataType");
	const char *s = aks__jstr(a, "StringValue");
	if (type && s && (strncmp(type, "String", 6) == 0 || strncmp(type, "Number", 6) == 0)) {
		*len = strlen(s);
		return (*out = strdup(s)) != NULL;
	}
	const char *b = aks__jstr(a, "BinaryValue");
	if (type && b && strncmp(type, "Binary", 6) == 0) {
		unsigned char *bytes = NULL;
		int rc = aks__base64_decode(b, strlen(b), AKS_BASE64_STD, &bytes, len);
		*bad = rc == AKS_EINVAL;
		*out = (char *)bytes;
		return rc == AKS_OK;
	}
	return true; /* not ours: left out */
}

static int bad_answer(const aks_host_api *host, const char *what, aks_error **err)
{
	return host->error_set(err, AKS_EBROKER, SQS_NAME ": a received message %s", what);
}

int sqs_decode(const aks_host_api *host, json_object *m, sqs_msg **out, aks_error **err)
{
	*out = NULL;
	const char *receipt = aks__jstr(m, "ReceiptHandle");
	const char *body = aks__jstr(m, "Body");
	const char *id = aks__jstr(m, "MessageId");
	if (!receipt || !*receipt)
		return bad_answer(host, "has no ReceiptHandle", err);
	if (!body)
		return bad_answer(host, "has no Body", err);
	sqs_msg *r = calloc(1, sizeof(*r));
	if (!r)
		return oom(host, err);
	int rc = AKS_OK;
	json_object *sys = aks__jget(m, "Attributes");
	const char *count = aks__jstr(sys, "ApproximateReceiveCount");
	const char *group = aks__jstr(sys, "MessageGroupId");
	const char *dedup = aks__jstr(sys, "MessageDeduplicationId");
	char *end = NULL;
	unsigned long n = count ? strtoul(count, &end, 10) : 1;
	if (count && (end == count || *end || n == 0 || n > UINT32_MAX))
		n = 1; /* SQS always sends a positive count; never trust it to be one */
	if (!(r->receipt = strdup(receipt)) || (id && !(r->message_id = strdup(id))) ||
	    (group && !(r->sqs_group = strdup(group))) || (dedup && !(r->dedup = strdup(dedup))))
		rc = oom(host, err);

	/* the host's attributes, and ours read apart */
	json_object *attrs = aks__jget(m, "MessageAttributes");
	size_t cap = (attrs && json_object_is_type(attrs, json_type_object)
	                  ? (size_t)json_object_object_length(attrs)
	                  : 0) *
	                 2 +
	             1;
	bool base64_body = false, nogroup = false;
	if (rc == AKS_OK && !(r->attrs = calloc(cap, sizeof(char *))))
		rc = oom(host, err);
	size_t k = 0;
	if (rc == AKS_OK && cap > 1) {
		json_object_object_foreach(attrs, name, value)
		{
			char *v = NULL;
			size_t vlen = 0;
			bool bad = false;
			if (!attr_value(value, &v, &vlen, &bad)) {
				rc = bad ? bad_answer(host,
				                      "has a Binary attribute that is not base64",
				                      err)
				         : oom(host, err);
				break;
			}
			if (!v)
				continue;
			if (strlen(v) != vlen) { /* a NUL inside: not a value the host can read */
				free(v);
				continue;
			}
			if (strcmp(name, SQS_ATTR_BODY) == 0) {
				base64_body = strcmp(v, "base64") == 0;
				free(v);
			} else if (strcmp(name, SQS_ATTR_NOGROUP) == 0) {
				nogroup = true;
				free(v);
			} else if (strcmp(name, SQS_ATTR_GROUP) == 0) {
				free(r->group);
				r->group = v;
			} else if (!(r->attrs[k] = strdup(name))) {
				free(v);
				rc = oom(host, err);
				break;
			} else {
				r->attrs[k + 1] = v;
				k += 2;
			}
		}
	}

	if (rc == AKS_OK && base64_body) {
		if (strcmp(body, "=") == 0) {
			r->body = calloc(1, 1);
			rc = r->body ? AKS_OK : oom(host, err);
		} else {
			unsigned char *bytes = NULL;
			int d = aks__base64_decode(body, strlen(body), AKS_BASE64_STD, &bytes,
			                           &r->body_len);
			r->body = (char *)bytes;
			if (d == AKS_EINVAL)
				rc = bad_answer(host, "is marked base64 and is not", err);
			else if (d != AKS_OK)
				rc = oom(host, err);
		}
	} else if (rc == AKS_OK) {
		r->body_len = strlen(body);
		if (!(r->body = strdup(body)))
			rc = oom(host, err);
	}
	if (rc == AKS_OK && !r->group && !nogroup && r->sqs_group &&
	    !(r->group = strdup(r->sqs_group)))
		rc = oom(host, err);
	if (rc == AKS_OK && nogroup) {
		free(r->group);
		r->group = NULL;
	}
	if (rc != AKS_OK) {
		sqs_msg_free(r);
		return rc;
	}
	r->m = (aks_message){
	    AKS_MESSAGE_INIT,
	    .body = r->body,
	    .body_len = r->body_len,
	    .attributes = (const char *const *)r->attrs,
	    .group_id = r->group,
	    .dedup_id = r->dedup,
	    .receive_count = (uint32_t)n,
	    .message_id = r->message_id,
	};
	*out = r;
	return AKS_OK;
}
