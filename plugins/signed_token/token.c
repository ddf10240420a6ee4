/*
 * plugins/signed_token/token.c - parses and verifies v1 identity tokens.
 *
 * The token is untrusted input (any caller can put anything in the request
 * attribute), so the checks run from cheapest and least exposed to most:
 * size, shape, signature (constant-time), and only then base64 decoding and
 * JSON parsing of the now-authenticated payload.
 */
#include "st_internal.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "aks_base64.h"
#include "aks_buf.h"

/* Nesting the claims need (object > array or object); deeper is malformed. */
#define ST_JSON_DEPTH 4
/* Both parts are base64url without padding (RFC 4648 §5), decoded strictly: every byte
 * string has exactly one encoding. */
#define ST_BASE64 (AKS_BASE64_URL | AKS_BASE64_NOPAD)

static st_status reject(char *why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static st_status reject(char *why, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, ST_WHY_SIZE, fmt, ap);
	va_end(ap);
	return ST_REJECTED;
}

static void iso_time(int64_t t, char *buf, size_t size)
{
	struct tm tm;
	time_t tt = (time_t)t;
	if ((int64_t)tt != t || !gmtime_r(&tt, &tm) ||
	    !strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, size, "@%lld", (long long)t);
}

void st_claims_free(st_claims *c)
{
	if (!c)
		return;
	free(c->sub);
	aks__strv_free(c->groups);
	aks__strv_free(c->credentials);
	memset(c, 0, sizeof(*c));
}

/* A JSON string without NUL bytes (which would cut the C string short: a
 * subject "alice\u0000admin" must not become "alice"). */
static const char *plain_string(json_object *o)
{
	if (!json_object_is_type(o, json_type_string))
		return NULL;
	const char *s = json_object_get_string(o);
	return strlen(s) == (size_t)json_object_get_string_len(o) ? s : NULL;
}

static bool get_int(json_object *claims, const char *name, bool *present, int64_t *out)
{
	json_object *o = NULL;
	*present = json_object_object_get_ex(claims, name, &o);
	if (!*present)
		return true;
	if (!json_object_is_type(o, json_type_int))
		return false;
	*out = json_object_get_int64(o);
	return true;
}

/* Copies the claims a principal needs. Returns ST_OK, ST_REJECTED or ST_NOMEM. */
static st_status copy_claims(json_object *claims, st_claims *out, char *why)
{
	json_object *o = NULL;
	const char *sub = json_object_object_get_ex(claims, "sub", &o) ? plain_string(o) : NULL;
	if (!sub || !*sub)
		return reject(why, "malformed (claim 'sub' is missing or not a non-empty string)");

	json_object *groups = NULL;
	if (json_object_object_get_ex(claims, "groups", &groups) &&
	    !json_object_is_type(groups, json_type_array))
		return reject(why, "malformed (claim 'groups' is not an array of strings)");
	size_t ngroups = groups ? json_object_array_length(groups) : 0;
	for (size_t i = 0; i < ngroups; i++)
		if (!plain_string(json_object_array_get_idx(groups, i)))
			return reject(why, "malformed (claim 'groups' is not an array of strings)");

	json_object *creds = NULL;
	if (json_object_object_get_ex(claims, "credentials", &creds) &&
	    !json_object_is_type(creds, json_type_object))
		return reject(why, "malformed (claim 'credentials' is not an object of strings)");
	size_t ncreds = creds ? (size_t)json_object_object_length(creds) : 0;
	if (creds) {
		json_object_object_foreach(creds, key, value)
		{
			if (!plain_string(value) || strlen(key) == 0)
				return reject(why,
				              "malformed (claim 'credentials' is not an object "
				              "of strings)");
		}
	}

	out->sub = strdup(sub);
	out->groups = calloc(ngroups + 1, sizeof(char *));
	out->credentials = calloc(2 * ncreds + 1, sizeof(char *));
	if (!out->sub || !out->groups || !out->credentials)
		return ST_NOMEM;
	for (size_t i = 0; i < ngroups; i++)
		if (!(out->groups[i] = strdup(plain_string(json_object_array_get_idx(groups, i)))))
			return ST_NOMEM;
	size_t n = 0;
	if (creds) {
		json_object_object_foreach(creds, key, value)
		{
			if (!(out->credentials[n++] = strdup(key)) ||
			    !(out->credentials[n++] = strdup(plain_string(value))))
				return ST_NOMEM;
		}
	}
	return ST_OK;
}

/* Checks the claims of an authenticated payload and copies them to *out. */
static st_status check_claims(const st_params *p, json_object *claims, int64_t now, st_claims *out,
                              char *why)
{
	bool has_exp, has_nbf;
	int64_t exp = 0, nbf = 0;
	if (!get_int(claims, "exp", &has_exp, &exp) || !has_exp)
		return reject(why, "malformed (claim 'exp' is missing or not an integer)");
	if (!get_int(claims, "nbf", &has_nbf, &nbf))
		return reject(why, "malformed (claim 'nbf' is not an integer)");
	json_object *o = NULL;
	const char *aud = NULL;
	if (json_object_object_get_ex(claims, "aud", &o) && !(aud = plain_string(o)))
		return reject(why, "malformed (claim 'aud' is not a string)");

	st_status rc = copy_claims(claims, out, why);
	if (rc != ST_OK)
		return rc;

	char when[64];
	/* now and leeway are small, so these cannot overflow whatever exp is. */
	if (now - p->leeway >= exp) {
		iso_time(exp, when, sizeof(when));
		return reject(why, "expired at %s", when);
	}
	if (has_nbf && now + p->leeway < nbf) {
		iso_time(nbf, when, sizeof(when));
		return reject(why, "not valid before %s", when);
	}
	if (p->audience && !aud)
		return reject(why, "no audience (expected '%s')", p->audience);
	if (p->audience && strcmp(aud, p->audience) != 0)
		return reject(why, "issued for another audience (expected '%s')", p->audience);
	return ST_OK;
}

static st_status parse_payload(const st_params *p, const char *b64, size_t b64_len, int64_t now,
                               st_claims *out, char *why)
{
	unsigned char *json = NULL;
	size_t n = 0;
	int rc = aks__base64_decode(b64, b64_len, ST_BASE64, &json, &n);
	if (rc == AKS_ENOMEM)
		return ST_NOMEM;
	if (rc != AKS_OK)
		return reject(why, "malformed (payload is not base64url)");
	if (memchr(json, '\0', n)) {
		free(json);
		return reject(why, "malformed (payload is not a JSON object)");
	}

	json_tokener *tok = json_tokener_new_ex(ST_JSON_DEPTH);
	if (!tok) {
		free(json);
		return ST_NOMEM;
	}
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	/* The length includes the NUL, which ends a trailing number. */
	json_object *claims = json_tokener_parse_ex(tok, (const char *)json, (int)n + 1);
	bool whole = json_tokener_get_error(tok) == json_tokener_success &&
	             json_tokener_get_parse_end(tok) >= n;
	json_tokener_free(tok);
	free(json);

	st_status st;
	if (!claims || !whole || !json_object_is_type(claims, json_type_object))
		st = reject(why, "malformed (payload is not a JSON object)");
	else
		st = check_claims(p, claims, now, out, why);
	json_object_put(claims);
	return st;
}

st_status st_verify(const st_params *p, const char *token, size_t len, int64_t now, st_claims *out,
                    char *why)
{
	memset(out, 0, sizeof(*out));
	why[0] = '\0';
	if (len > p->max_token_bytes)
		return reject(why, "too large (%zu bytes; the limit is %zu)", len,
		              p->max_token_bytes);
	size_t plen = strlen(ST_PREFIX);
	if (len < plen || memcmp(token, ST_PREFIX, plen) != 0)
		return reject(why, "malformed (not a v1 token)");
	const char *dot = memchr(token + plen, '.', len - plen);
	if (!dot)
		return reject(why, "malformed (no signature)");
	size_t signed_len = (size_t)(dot - token);
	const char *sig = dot + 1;
	size_t sig_len = len - signed_len - 1;
	if (signed_len == plen)
		return reject(why, "malformed (empty payload)");
	if (memchr(sig, '.', sig_len))
		return reject(why, "malformed (too many parts)");

	/* 43 characters encode 32 bytes; check before decoding into the buffer. */
	unsigned char given[ST_MAC_LEN + 3]; /* at least aks__base64_decoded_max(43) */
	size_t given_len = 0;
	if (sig_len != (ST_MAC_LEN * 4 + 2) / 3 ||
	    aks__base64_decode_to(sig, sig_len, ST_BASE64, given, &given_len) != AKS_OK ||
	    given_len != ST_MAC_LEN)
		return reject(why, "malformed (the signature is not base64url of 32 bytes)");

	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int mac_len = 0;
	if (!HMAC(EVP_sha256(), p->key, (int)p->key_len, (const unsigned char *)token, signed_len,
	          mac, &mac_len) ||
	    mac_len != ST_MAC_LEN)
		return ST_ECRYPTO;
	if (CRYPTO_memcmp(mac, given, ST_MAC_LEN) != 0)
		return reject(why, "bad signature");

	st_status rc = parse_payload(p, token + plen, signed_len - plen, now, out, why);
	if (rc != ST_OK)
		st_claims_free(out);
	return rc;
}
