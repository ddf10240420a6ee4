/*
 * core/util/base64.h - standard base64 (RFC 4648 §4, with padding), for file contents in the
 * queue broker's JSON messages. Decoding is strict: no whitespace, no missing or extra
 * padding, no non-zero bits after the last byte, so every text has one meaning.
 */
#ifndef AKS_CORE_UTIL_BASE64_H
#define AKS_CORE_UTIL_BASE64_H

#include <stddef.h>

/* The encoding of data[0..len) (NUL-terminated, malloc'd), or NULL on ENOMEM. */
char *aks__base64_encode(const void *data, size_t len);
/* Decodes text[0..len) into *out (malloc'd, len bytes + a NUL for convenience):
 * 0, -EINVAL for text that is not canonical base64, or -ENOMEM. */
int aks__base64_decode(const char *text, size_t len, unsigned char **out, size_t *out_len);

#endif /* AKS_CORE_UTIL_BASE64_H */
