/*
 * plugins/nats/nats_codec.h - how an aks_message maps onto a NATS message: the
 * partition a group hashes to, and the escaping of attribute keys and values
 * into header names and values.
 *
 * Kept apart from libnats so the tests can check the mapping (and pick groups
 * that land in distinct partitions) without a server.
 */
#ifndef AKS_NATS_CODEC_H
#define AKS_NATS_CODEC_H

#include <stddef.h>
#include <stdint.h>

/* Header names. Attributes travel as AKS_NATS_ATTR_PREFIX + escaped key. */
#define AKS_NATS_HDR_GROUP   "Aks-Group"
#define AKS_NATS_HDR_DEDUP   "Aks-Dedup"
#define AKS_NATS_ATTR_PREFIX "Aks-Attr-"

/* FNV-1a, 32 bits: stable across processes, builds and architectures, so
 * every sender maps a group to the same partition. */
static inline uint32_t aks_nats_fnv1a(const char *s)
{
	uint32_t h = 2166136261u;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 16777619u;
	}
	return h;
}

/* The partition of a group (0 .. partitions-1). */
static inline unsigned aks_nats_partition(const char *group, unsigned partitions)
{
	return partitions ? aks_nats_fnv1a(group) % partitions : 0;
}

/*
 * Escapes `in` for a header name (lowercase letters, digits, '_' and '-' are
 * kept; every other byte, uppercase letters included, becomes %xx with
 * lowercase hex). The result is all lowercase, so NATS's case-insensitive
 * header names cannot merge two distinct keys. Returns a malloc'd string.
 */
char *aks_nats_escape_key(const char *in);
/* Escapes `in` for a header value: '=' first (never an empty value), then
 * '%', control bytes and bytes >= 0x7f become %xx; everything else is kept.
 * Returns a malloc'd string. */
char *aks_nats_escape_value(const char *in);
/* Reverses the key escape. Returns a malloc'd string, or NULL on a malformed
 * escape or a %00 (a key or value cannot hold NUL). */
char *aks_nats_unescape(const char *in);
/* Reverses the value escape; NULL also when the leading '=' is missing. */
char *aks_nats_unescape_value(const char *in);

#endif /* AKS_NATS_CODEC_H */
