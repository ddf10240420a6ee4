/*
 * Fuzz target: the signed_token resolver's token verifier, over untrusted
 * request attributes. Two ways in, chosen by the first byte:
 *
 *   'P' or 'Q'  the rest is a payload, which the target signs with the
 *               verifier's key, so the base64url decoder, the JSON parser and
 *               the claim checks see arbitrary authenticated bytes (Q also
 *               sets an audience);
 *   otherwise   the whole input is the token, as an attacker would send it
 *               (mostly stopped by the shape and signature checks).
 *
 * Checks the verifier's promises: a verdict, claims that are complete on
 * success, a reason on rejection.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "st_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define KEY "fuzzing-key-0123456789abcdef"
#define NOW 1767225600 /* 2026-01-01T00:00:00Z */

/* base64url without padding; out holds 4 * ((len + 2) / 3) + 1. */
static size_t b64url(const unsigned char *in, size_t len, char *out)
{
	int n = EVP_EncodeBlock((unsigned char *)out, in, (int)len);
	while (n > 0 && out[n - 1] == '=')
		n--;
	for (int i = 0; i < n; i++)
		out[i] = out[i] == '+' ? '-' : out[i] == '/' ? '_' : out[i];
	out[n] = '\0';
	return (size_t)n;
}

/* "v1." + base64url(payload) + "." + base64url(HMAC). NULL if out of memory. */
static char *sign(const uint8_t *payload, size_t len, size_t *token_len)
{
	char *t = malloc(3 + 4 * ((len + 2) / 3) + 1 + 44 + 1);
	if (!t)
		return NULL;
	memcpy(t, ST_PREFIX, 3);
	size_t n = 3 + b64url(payload, len, t + 3);
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int mac_len = 0;
	if (!HMAC(EVP_sha256(), KEY, (int)strlen(KEY), (unsigned char *)t, n, mac, &mac_len)) {
		free(t);
		return NULL;
	}
	t[n++] = '.';
	n += b64url(mac, mac_len, t + n);
	*token_len = n;
	return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	st_params p = {(const unsigned char *)KEY, strlen(KEY), NULL, 30, 8192};
	char *owned = NULL;
	const char *token = (const char *)data;
	size_t len = size;
	if (size > 0 && (data[0] == 'P' || data[0] == 'Q')) {
		if (data[0] == 'Q')
			p.audience = "aksandbox";
		if (!(owned = sign(data + 1, size - 1, &len)))
			return 0;
		token = owned;
		p.max_token_bytes = len; /* let any payload through to the parser */
	}

	st_claims c;
	char why[ST_WHY_SIZE];
	switch (st_verify(&p, token, len, NOW, &c, why)) {
	case ST_OK:
		if (!c.sub || !*c.sub || !c.groups || !c.credentials)
			abort();
		for (size_t i = 0; c.credentials[i]; i += 2)
			if (!c.credentials[i + 1])
				abort(); /* pairs */
		st_claims_free(&c);
		break;
	case ST_REJECTED:
		if (!*why || !memchr(why, '\0', sizeof(why)) || c.sub || c.groups || c.credentials)
			abort();
		break;
	case ST_NOMEM:
	case ST_ECRYPTO:
		break;
	default:
		abort();
	}
	free(owned);
	return 0;
}
