/*
 * plugins/signed_token/st_internal.h - the v1 identity token: parser and verifier
 * (token.c), shared with the plugin's entry points (signed_token.c).
 *
 *   v1.<payload>.<signature>
 *   payload   = base64url (no padding) of a JSON object of claims
 *   signature = base64url (no padding) of HMAC-SHA256(key, "v1." + payload)
 *
 * Claims: "sub" (non-empty string) and "exp" (integer, Unix seconds) are
 * required; "nbf" (integer), "aud" (string), "groups" (array of strings) and
 * "credentials" (object of strings) are optional; anything else is ignored.
 *
 * Kept free of the host API so the fuzz target and the tests can link it
 * directly. Everything here is thread-safe: no global state.
 */
#ifndef AKS_SIGNED_TOKEN_INTERNAL_H
#define AKS_SIGNED_TOKEN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#define ST_PREFIX   "v1."
#define ST_MAC_LEN  32 /* HMAC-SHA256 */
#define ST_WHY_SIZE 160

typedef struct st_params {
	const unsigned char *key;
	size_t key_len;
	const char *audience;   /* NULL: "aud" is not checked */
	int64_t leeway;         /* seconds of clock skew allowed; >= 0 */
	size_t max_token_bytes; /* longer tokens are refused unread */
} st_params;

typedef struct st_claims {
	char *sub;
	char **groups;      /* NULL-terminated */
	char **credentials; /* NULL-terminated key, value pairs */
} st_claims;

typedef enum st_status {
	ST_OK = 0,
	ST_REJECTED = 1, /* `why` says why; it never contains the token */
	ST_NOMEM = 2,
	ST_ECRYPTO = 3 /* libcrypto could not compute the HMAC */
} st_status;

/*
 * Verifies `token` (`len` bytes, not necessarily NUL-terminated) at time
 * `now` (Unix seconds). The signature is checked before the payload is even
 * decoded, so only authenticated bytes reach the JSON parser. On ST_OK the
 * claims are in *out (free them with st_claims_free); otherwise *out is
 * empty and, for ST_REJECTED, `why` (ST_WHY_SIZE bytes) holds the reason,
 * e.g. "bad signature" or "expired at 2026-01-01T00:00:00Z".
 */
st_status st_verify(const st_params *p, const char *token, size_t len, int64_t now, st_claims *out,
                    char *why);

void st_claims_free(st_claims *c);

#endif /* AKS_SIGNED_TOKEN_INTERNAL_H */
