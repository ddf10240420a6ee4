/*
 * plugins/common/aks_base64.h - base64 (RFC 4648), the one implementation of the tree:
 * file contents in the queue broker's JSON messages (the core), signed_token's tokens,
 * kubeconfig data and Docker's path-stat header. None of the libraries these link offers
 * it, and it is small enough not to pull in another one for. Part of libaks-util (libc
 * only; see aks_buf.h for who links it).
 *
 * The variant is a set of flags:
 *   AKS_BASE64_STD    §4: '+' and '/', padded with '=' to a multiple of 4;
 *   AKS_BASE64_URL    §5's alphabet instead: '-' and '_';
 *   AKS_BASE64_NOPAD  no '=': encoding writes none, decoding refuses any;
 *   AKS_BASE64_LOOSE  decoding only: what other programs write (kubeconfig files, the
 *                     engine's headers), as they write it; see below.
 *
 * Decoding is strict unless AKS_BASE64_LOOSE: only the alphabet's 64 characters (no
 * whitespace), padding exactly as the variant says, a length that can be an encoding (not
 * 4k+1), and zero bits after the last byte, so every text has one meaning and every byte
 * string one encoding. Loose decoding takes both alphabets, skips spaces, tabs and line
 * breaks, lets padding be missing or too long, and ignores leftover bits; it still refuses
 * any other character and data after an '='.
 *
 * Functions return AKS_OK, AKS_EINVAL (not base64 of that variant) or AKS_ENOMEM.
 */
#ifndef AKS_BASE64_H
#define AKS_BASE64_H

#include <stddef.h>

#include <aksandbox/common.h>

enum {
	AKS_BASE64_STD = 0,
	AKS_BASE64_URL = 1 << 0,
	AKS_BASE64_NOPAD = 1 << 1,
	AKS_BASE64_LOOSE = 1 << 2,
};

/* The encoding of data[0..len) (NUL-terminated, malloc'd), or NULL on ENOMEM. */
char *aks__base64_encode(const void *data, size_t len, unsigned flags);

/* The most bytes `len` characters decode to: the size out needs in aks__base64_decode_to. */
size_t aks__base64_decoded_max(size_t len);
/* Decodes text[0..len) into out (aks__base64_decoded_max(len) bytes), *out_len bytes of it;
 * AKS_OK or AKS_EINVAL (then out holds garbage). */
int aks__base64_decode_to(const char *text, size_t len, unsigned flags, unsigned char *out,
                          size_t *out_len);
/* The same into *out, malloc'd, with a NUL past the *out_len bytes for convenience; on
 * failure *out is NULL and *out_len 0. */
int aks__base64_decode(const char *text, size_t len, unsigned flags, unsigned char **out,
                       size_t *out_len);

#endif /* AKS_BASE64_H */
