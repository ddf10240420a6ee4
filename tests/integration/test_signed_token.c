/*
 * tests/integration/test_signed_token.c - the signed_token principal resolver
 * through the public API: the plugin is loaded from the build tree
 * (AKS_PLUGIN_PATH), configured from YAML, and fed tokens minted here with
 * libcrypto, independently of the plugin's own code. The verifier is also
 * linked directly, to pin the time boundaries to the second.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <aksandbox/aksandbox.h>

#include "st_internal.h"

#define KEY       "0123456789abcdef0123456789abcdef"
#define OTHER_KEY "fedcba9876543210fedcba9876543210"
#define REJECTED  "identity token rejected: "

/* ---- helpers --------------------------------------------------------------------- */

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	int n = vasprintf(&s, fmt, ap);
	va_end(ap);
	assert_true(n >= 0);
	return s;
}

static int64_t now_s(void)
{
	return (int64_t)time(NULL);
}

/* base64url without padding, from libcrypto's standard base64. */
static char *b64url(const void *data, size_t len)
{
	char *out = malloc(4 * ((len + 2) / 3) + 1);
	assert_non_null(out);
	int n = EVP_EncodeBlock((unsigned char *)out, data, (int)len);
	assert_true(n >= 0);
	while (n > 0 && out[n - 1] == '=')
		n--;
	out[n] = '\0';
	for (char *c = out; *c; c++)
		*c = *c == '+' ? '-' : *c == '/' ? '_' : *c;
	return out;
}

/* A v1 token over `payload` (any bytes), signed with `key`. */
static char *mint_raw(const char *key, const void *payload, size_t len)
{
	char *p = b64url(payload, len);
	char *signed_part = xasprintf("v1.%s", p);
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int mac_len = 0;
	assert_non_null(HMAC(EVP_sha256(), key, (int)strlen(key), (unsigned char *)signed_part,
	                     strlen(signed_part), mac, &mac_len));
	assert_int_equal(mac_len, 32);
	char *sig = b64url(mac, mac_len);
	char *token = xasprintf("%s.%s", signed_part, sig);
	free(p);
	free(signed_part);
	free(sig);
	return token;
}

static char *mint(const char *key, const char *json_fmt, ...) __attribute__((format(printf, 2, 3)));
static char *mint(const char *key, const char *json_fmt, ...)
{
	va_list ap;
	va_start(ap, json_fmt);
	char *json = NULL;
	assert_true(vasprintf(&json, json_fmt, ap) >= 0);
	va_end(ap);
	char *token = mint_raw(key, json, strlen(json));
	free(json);
	return token;
}

/* A valid token for alice, expiring in an hour. */
static char *mint_alice(void)
{
	return mint(KEY, "{\"sub\":\"alice\",\"exp\":%lld}", (long long)now_s() + 3600);
}

static const aks_plugin *plugin(void)
{
	const aks_plugin *p = NULL;
	aks_error *err = NULL;
	if (aks_plugin_load("signed_token", AKS_PLUGIN_RESOLVER, &p, &err) != AKS_OK)
		fail_msg("loading signed_token: %s", aks_error_message(err));
	return p;
}

/* Opens the resolver with `yaml` as its block (NULL: the defaults). */
static int open_resolver(const char *yaml, aks_resolver **out, aks_error **err)
{
	aks_config *cfg = NULL;
	if (yaml) {
		char path[] = "/tmp/aks-signed-token-XXXXXX";
		int fd = mkstemp(path);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, yaml, strlen(yaml)), (ssize_t)strlen(yaml));
		assert_int_equal(close(fd), 0);
		int rc = aks_config_load_block(plugin(), path, &cfg, err);
		unlink(path);
		if (rc != AKS_OK)
			return rc;
	}
	int rc = aks_resolver_open(plugin(), cfg, out, err);
	/* The resolver copies what it keeps; free the block now to prove it. */
	aks_config_free(cfg);
	return rc;
}

static aks_resolver *must_open(const char *yaml)
{
	aks_resolver *r = NULL;
	aks_error *err = NULL;
	if (open_resolver(yaml, &r, &err) != AKS_OK)
		fail_msg("open: %s", aks_error_message(err));
	return r;
}

static int resolve_attrs(aks_resolver *r, const char *const *attrs, aks_resolved_principal **out,
                         aks_error **err)
{
	aks_resolve_request req;
	aks_resolve_request_init(&req, "conversation-1", "helper", attrs);
	*out = NULL;
	return aks_resolver_resolve(r, &req, out, err);
}

static int resolve(aks_resolver *r, const char *token, aks_resolved_principal **out,
                   aks_error **err)
{
	const char *attrs[] = {"trace", "abc", "token", token, NULL};
	if (!token)
		attrs[2] = NULL;
	return resolve_attrs(r, attrs, out, err);
}

/* `token` is refused with exactly REJECTED `why`, and the message holds no
 * part of the token. */
static void expect_rejected(aks_resolver *r, const char *token, const char *why)
{
	aks_resolved_principal *p = NULL;
	aks_error *err = NULL;
	int rc = resolve(r, token, &p, &err);
	if (rc != AKS_EPOLICY)
		fail_msg("expected '%s', got %d (%s)", why, rc, err ? aks_error_message(err) : "");
	assert_null(p);
	assert_int_equal(aks_error_code(err), AKS_EPOLICY);
	char *want = xasprintf(REJECTED "%s", why);
	assert_string_equal(aks_error_message(err), want);
	free(want);
	const char *dot = strrchr(token, '.');
	if (dot && strlen(dot + 1) >= 8)
		assert_null(strstr(aks_error_message(err), dot + 1));
	if (strlen(token) > 12)
		assert_null(strstr(aks_error_message(err), token + 3));
	aks_error_free(err);
}

static void expect_user(aks_resolver *r, const char *token, const char *subject)
{
	aks_resolved_principal *p = NULL;
	aks_error *err = NULL;
	if (resolve(r, token, &p, &err) != AKS_OK)
		fail_msg("resolve: %s", aks_error_message(err));
	const aks_principal *pr = aks_resolved_principal_get(p);
	assert_int_equal(pr->mode, AKS_IDENTITY_USER);
	assert_string_equal(pr->subject, subject);
	aks_resolved_principal_free(p);
}

static int setup_key(void **state)
{
	assert_int_equal(setenv("AKS_IDENTITY_SECRET", KEY, 1), 0);
	return 0;
}

/* ---- tests --------------------------------------------------------------------------- */

static void test_descriptor(void **state)
{
	const aks_plugin_descriptor *d = aks_plugin_get_descriptor(plugin());
	assert_int_equal(d->kind, AKS_PLUGIN_RESOLVER);
	assert_string_equal(d->name, "signed_token");
	assert_null(aks_plugin_get_capabilities(plugin()));
	/* Providers cannot be opened from it. */
	aks_provider *prov = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_provider_open(plugin(), NULL, &prov, &err), AKS_EPLUGIN);
	aks_error_free(err);
}

static void test_good_token(void **state)
{
	aks_resolver *r = must_open(NULL);
	char *token = mint(KEY,
	                   "{\"sub\":\"alice\",\"groups\":[\"eng\",\"oncall\"],"
	                   "\"credentials\":{\"role_arn\":\"arn:aws:iam::123456789012:role/alice\","
	                   "\"run_as\":\"alice\"},\"exp\":%lld,\"aud\":\"aksandbox\","
	                   "\"iat\":1,\"iss\":\"front-end\"}",
	                   (long long)now_s() + 600);
	aks_resolved_principal *p = NULL;
	aks_error *err = NULL;
	assert_int_equal(resolve(r, token, &p, &err), AKS_OK);
	assert_null(err);
	const aks_principal *pr = aks_resolved_principal_get(p);
	assert_int_equal(pr->mode, AKS_IDENTITY_USER);
	assert_string_equal(pr->subject, "alice");
	assert_string_equal(pr->groups[0], "eng");
	assert_string_equal(pr->groups[1], "oncall");
	assert_null(pr->groups[2]);
	/* Credentials in any order, each exactly once. */
	int seen = 0;
	for (size_t i = 0; pr->credentials[i]; i += 2) {
		if (strcmp(pr->credentials[i], "role_arn") == 0) {
			assert_string_equal(pr->credentials[i + 1],
			                    "arn:aws:iam::123456789012:role/alice");
			seen |= 1;
		} else if (strcmp(pr->credentials[i], "run_as") == 0) {
			assert_string_equal(pr->credentials[i + 1], "alice");
			seen |= 2;
		} else {
			fail_msg("unexpected credential %s", pr->credentials[i]);
		}
	}
	assert_int_equal(seen, 3);
	aks_resolved_principal_free(p);

	/* Only sub and exp are required: no groups, no credentials. */
	free(token);
	token = mint(KEY, "{\"sub\":\"bob\",\"exp\":%lld}", (long long)now_s() + 600);
	assert_int_equal(resolve(r, token, &p, &err), AKS_OK);
	pr = aks_resolved_principal_get(p);
	assert_int_equal(pr->mode, AKS_IDENTITY_USER);
	assert_string_equal(pr->subject, "bob");
	assert_null(pr->groups[0]);
	assert_null(pr->credentials[0]);
	aks_resolved_principal_free(p);
	free(token);
	aks_resolver_close(r);
}

static void test_no_token(void **state)
{
	aks_resolver *r = must_open(NULL);
	aks_resolved_principal *p = NULL;
	aks_error *err = NULL;
	assert_int_equal(resolve(r, NULL, &p, &err), AKS_OK);
	const aks_principal *pr = aks_resolved_principal_get(p);
	assert_int_equal(pr->mode, AKS_IDENTITY_AGENT);
	assert_string_equal(pr->subject, "helper");
	assert_null(pr->groups[0]);
	assert_null(pr->credentials[0]);
	aks_resolved_principal_free(p);

	/* No attributes at all, and the default agent name. */
	aks_resolve_request req;
	aks_resolve_request_init(&req, NULL, NULL, NULL);
	assert_int_equal(aks_resolver_resolve(r, &req, &p, &err), AKS_OK);
	pr = aks_resolved_principal_get(p);
	assert_int_equal(pr->mode, AKS_IDENTITY_AGENT);
	assert_string_equal(pr->subject, "agent");
	aks_resolved_principal_free(p);

	/* A token under another attribute name is no token. */
	char *token = mint_alice();
	const char *attrs[] = {"Token", token, "token2", token, NULL};
	assert_int_equal(resolve_attrs(r, attrs, &p, &err), AKS_OK);
	assert_int_equal(aks_resolved_principal_get(p)->mode, AKS_IDENTITY_AGENT);
	aks_resolved_principal_free(p);
	free(token);
	aks_resolver_close(r);
}

static void test_bad_signature(void **state)
{
	aks_resolver *r = must_open(NULL);
	int64_t exp = now_s() + 600;
	/* Signed with another key. */
	char *token = mint(OTHER_KEY, "{\"sub\":\"alice\",\"exp\":%lld}", (long long)exp);
	expect_rejected(r, token, "bad signature");
	free(token);

	/* A payload changed after signing: alice's signature on mallory's claims. */
	char *alice = mint_alice();
	char *mallory = mint(KEY, "{\"sub\":\"mallory\",\"exp\":%lld}", (long long)exp);
	char *forged = xasprintf("%.*s%s", (int)(strrchr(mallory, '.') - mallory), mallory,
	                         strrchr(alice, '.'));
	expect_rejected(r, forged, "bad signature");
	free(forged);

	/* One flipped bit in the signature. */
	char *flipped = strdup(alice);
	char *last = flipped + strlen(flipped) - 2;
	*last = *last == 'A' ? 'B' : 'A';
	expect_rejected(r, flipped, "bad signature");
	free(flipped);
	free(alice);
	free(mallory);
	aks_resolver_close(r);
}

static void test_malformed(void **state)
{
	aks_resolver *r = must_open(NULL);
	long long exp = (long long)now_s() + 600;
	char *good = mint_alice();
	const char *sig = strrchr(good, '.');
	struct {
		char *token;
		const char *why;
	} cases[] = {
	    {strdup(""), "malformed (not a v1 token)"},
	    {xasprintf("v2%s", good + 2), "malformed (not a v1 token)"},
	    {xasprintf("%.*s", (int)(sig - good), good), "malformed (no signature)"},
	    {xasprintf("v1.%s", sig), "malformed (empty payload)"},
	    {xasprintf("%s.x", good), "malformed (too many parts)"},
	    {xasprintf("%.*s.", (int)(sig - good), good),
	     "malformed (the signature is not base64url of 32 bytes)"},
	    {xasprintf("%s=", good), "malformed (the signature is not base64url of 32 bytes)"},
	    {xasprintf("%.*s.%s", (int)(sig - good), good,
	               "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@"),
	     "malformed (the signature is not base64url of 32 bytes)"},
	    /* Correctly signed, wrong inside. */
	    {mint(KEY, "[\"sub\",\"alice\"]"), "malformed (payload is not a JSON object)"},
	    {mint(KEY, "sub=alice"), "malformed (payload is not a JSON object)"},
	    {mint(KEY, "{\"sub\":\"alice\",\"exp\":%lld} x", exp),
	     "malformed (payload is not a JSON object)"},
	    {mint(KEY, "{\"sub\":'alice',\"exp\":%lld}", exp),
	     "malformed (payload is not a JSON object)"},
	    {mint(KEY, "{\"exp\":%lld}", exp),
	     "malformed (claim 'sub' is missing or not a non-empty string)"},
	    {mint(KEY, "{\"sub\":\"\",\"exp\":%lld}", exp),
	     "malformed (claim 'sub' is missing or not a non-empty string)"},
	    {mint(KEY, "{\"sub\":7,\"exp\":%lld}", exp),
	     "malformed (claim 'sub' is missing or not a non-empty string)"},
	    {mint(KEY, "{\"sub\":\"alice\\u0000admin\",\"exp\":%lld}", exp),
	     "malformed (claim 'sub' is missing or not a non-empty string)"},
	    {mint(KEY, "{\"sub\":\"alice\"}"),
	     "malformed (claim 'exp' is missing or not an integer)"},
	    {mint(KEY, "{\"sub\":\"alice\",\"exp\":\"%lld\"}", exp),
	     "malformed (claim 'exp' is missing or not an integer)"},
	    {mint(KEY, "{\"sub\":\"alice\",\"exp\":%lld.5}", exp),
	     "malformed (claim 'exp' is missing or not an integer)"},
	    {mint(KEY, "{\"sub\":\"alice\",\"exp\":%lld,\"nbf\":null}", exp),
	     "malformed (claim 'nbf' is not an integer)"},
	    {mint(KEY, "{\"sub\":\"alice\",\"exp\":%lld,\"aud\":[\"aksandbox\"]}", exp),
	     "malformed (claim 'aud' is not a string)"},
	    {mint(KEY, "{\"sub\":\"alice\",\"exp\":%lld,\"groups\":\"eng\"}", exp),
	     "malformed (claim 'groups' is not an array of strings)"},
	    {mint(KEY, "{\"sub\":\"alice\",\"exp\":%lld,\"groups\":[\"eng\",1]}", exp),
	     "malformed (claim 'groups' is not an array of strings)"},
	    {mint(KEY, "{\"sub\":\"alice\",\"exp\":%lld,\"groups\":[[\"eng\"]]}", exp),
	     "malformed (claim 'groups' is not an array of strings)"},
	    {mint(KEY, "{\"sub\":\"alice\",\"exp\":%lld,\"credentials\":[\"role\"]}", exp),
	     "malformed (claim 'credentials' is not an object of strings)"},
	    {mint(KEY, "{\"sub\":\"alice\",\"exp\":%lld,\"credentials\":{\"role_arn\":1}}", exp),
	     "malformed (claim 'credentials' is not an object of strings)"},
	    {mint(KEY, "{\"sub\":\"alice\",\"exp\":%lld,\"credentials\":{\"\":\"x\"}}", exp),
	     "malformed (claim 'credentials' is not an object of strings)"},
	    /* Too deep for the claims. */
	    {mint(KEY, "{\"sub\":\"alice\",\"exp\":%lld,\"x\":[[[[[1]]]]]}", exp),
	     "malformed (payload is not a JSON object)"},
	    /* Not UTF-8. */
	    {mint(KEY, "{\"sub\":\"al\xff\xfeice\",\"exp\":%lld}", exp),
	     "malformed (payload is not a JSON object)"},
	    {mint_raw(KEY, "{\"sub\":\"a\"\0}", 12), "malformed (payload is not a JSON object)"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		expect_rejected(r, cases[i].token, cases[i].why);
		free(cases[i].token);
	}

	/* A payload that is not base64url, signed as it is. */
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int mac_len = 0;
	const char *signed_part = "v1.eyJ=";
	HMAC(EVP_sha256(), KEY, (int)strlen(KEY), (const unsigned char *)signed_part,
	     strlen(signed_part), mac, &mac_len);
	char *s = b64url(mac, mac_len);
	char *token = xasprintf("%s.%s", signed_part, s);
	expect_rejected(r, token, "malformed (payload is not base64url)");
	free(token);
	free(s);

	/* The same token twice, or two tokens, is ambiguous. */
	const char *attrs[] = {"token", good, "token", good, NULL};
	aks_resolved_principal *p = NULL;
	aks_error *err = NULL;
	assert_int_equal(resolve_attrs(r, attrs, &p, &err), AKS_EPOLICY);
	assert_null(p);
	assert_string_equal(aks_error_message(err), REJECTED "more than one 'token' attribute");
	aks_error_free(err);
	free(good);
	aks_resolver_close(r);
}

static void test_expired_and_not_yet_valid(void **state)
{
	aks_resolver *r = must_open(NULL);
	/* 2020-01-01T00:00:00Z */
	char *token = mint(KEY, "{\"sub\":\"alice\",\"exp\":1577836800}");
	expect_rejected(r, token, "expired at 2020-01-01T00:00:00Z");
	free(token);
	token = mint(KEY, "{\"sub\":\"alice\",\"exp\":-1}");
	expect_rejected(r, token, "expired at 1969-12-31T23:59:59Z");
	free(token);

	/* Valid from 2286-11-20T17:46:39Z only. */
	token = mint(KEY, "{\"sub\":\"alice\",\"exp\":99999999999,\"nbf\":9999999999}");
	expect_rejected(r, token, "not valid before 2286-11-20T17:46:39Z");
	free(token);
	/* An nbf in the past is fine. */
	token = mint(KEY, "{\"sub\":\"alice\",\"exp\":%lld,\"nbf\":1577836800}",
	             (long long)now_s() + 600);
	expect_user(r, token, "alice");
	free(token);
	/* A far future exp neither overflows nor fails. */
	token = mint(KEY, "{\"sub\":\"alice\",\"exp\":9223372036854775807}");
	expect_user(r, token, "alice");
	free(token);
	aks_resolver_close(r);
}

static char *iso(long long t)
{
	struct tm tm;
	time_t tt = (time_t)t;
	char buf[64];
	assert_non_null(gmtime_r(&tt, &tm));
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
	return strdup(buf);
}

/* exp and nbf with `leeway`: one token just inside and one just outside on
 * each side. The inside ones have 5 s of margin for the clock to move during
 * the test; the outside ones are outside whatever the clock does (exp) or
 * unless the test takes 5 s (nbf). test_time_boundaries pins the exact
 * seconds. */
static void check_leeway(const char *yaml, long long leeway)
{
	aks_resolver *r = must_open(yaml);
	long long now = (long long)now_s();
	char *token = mint(KEY, "{\"sub\":\"alice\",\"exp\":%lld}", now - leeway);
	char *when = iso(now - leeway);
	char *why = xasprintf("expired at %s", when);
	expect_rejected(r, token, why);
	free(token);
	free(when);
	free(why);
	token = mint(KEY, "{\"sub\":\"alice\",\"exp\":%lld}", now - leeway + 5);
	expect_user(r, token, "alice");
	free(token);

	long long far = now + 3600;
	token = mint(KEY, "{\"sub\":\"alice\",\"exp\":%lld,\"nbf\":%lld}", far, now + leeway + 5);
	when = iso(now + leeway + 5);
	why = xasprintf("not valid before %s", when);
	expect_rejected(r, token, why);
	free(token);
	free(when);
	free(why);
	token = mint(KEY, "{\"sub\":\"alice\",\"exp\":%lld,\"nbf\":%lld}", far, now + leeway);
	expect_user(r, token, "alice");
	free(token);
	aks_resolver_close(r);
}

static void test_leeway(void **state)
{
	check_leeway(NULL, 30); /* the default */
	check_leeway("leeway: 10\n", 10);
	check_leeway("leeway: 0\n", 0);
	check_leeway("leeway: 86400\n", 86400);
}

static void test_audience(void **state)
{
	aks_resolver *r = must_open("audience: aksandbox\n");
	long long exp = (long long)now_s() + 600;
	char *token = mint(KEY, "{\"sub\":\"alice\",\"exp\":%lld,\"aud\":\"aksandbox\"}", exp);
	expect_user(r, token, "alice");
	free(token);
	token = mint(KEY, "{\"sub\":\"alice\",\"exp\":%lld,\"aud\":\"billing\"}", exp);
	expect_rejected(r, token, "issued for another audience (expected 'aksandbox')");
	free(token);
	token = mint(KEY, "{\"sub\":\"alice\",\"exp\":%lld,\"aud\":\"aksandbox2\"}", exp);
	expect_rejected(r, token, "issued for another audience (expected 'aksandbox')");
	free(token);
	token = mint(KEY, "{\"sub\":\"alice\",\"exp\":%lld}", exp);
	expect_rejected(r, token, "no audience (expected 'aksandbox')");
	free(token);
	aks_resolver_close(r);

	/* Without an audience configured, aud is not checked. */
	r = must_open(NULL);
	token = mint(KEY, "{\"sub\":\"alice\",\"exp\":%lld,\"aud\":\"billing\"}", exp);
	expect_user(r, token, "alice");
	free(token);
	aks_resolver_close(r);
}

/* A token `total` bytes long, validly signed, for alice. */
static char *mint_sized(size_t total)
{
	long long exp = (long long)now_s() + 600;
	for (size_t pad = 0; pad < total; pad++) {
		char *json = xasprintf("{\"sub\":\"alice\",\"exp\":%lld,\"pad\":\"%*s\"}", exp,
		                       (int)pad, "");
		char *token = mint_raw(KEY, json, strlen(json));
		free(json);
		if (strlen(token) == total)
			return token;
		size_t len = strlen(token);
		free(token);
		if (len > total)
			break;
	}
	fail_msg("no token of %zu bytes", total);
	return NULL;
}

static void test_size_limit(void **state)
{
	aks_resolver *r = must_open(NULL); /* max_token_bytes: 8192 */
	char *token = mint_sized(8193);
	expect_rejected(r, token, "too large (8193 bytes; the limit is 8192)");
	free(token);
	/* (8192 is not a possible v1 token length: 47 bytes plus 4k+1 characters.) */
	token = mint_sized(8191);
	expect_user(r, token, "alice");
	free(token);
	/* Far larger: refused without being read to its end. */
	char *huge = malloc(1 << 22);
	memset(huge, 'A', (1 << 22) - 1);
	huge[(1 << 22) - 1] = '\0';
	memcpy(huge, "v1.", 3);
	char *why = xasprintf("too large (8193 bytes; the limit is 8192)");
	expect_rejected(r, huge, why);
	free(why);
	free(huge);
	aks_resolver_close(r);

	/* A limit that is a possible length: exactly max passes, max + 1 does not. */
	r = must_open("max_token_bytes: 8194\n");
	token = mint_sized(8194);
	expect_user(r, token, "alice");
	free(token);
	token = mint_sized(8195);
	expect_rejected(r, token, "too large (8195 bytes; the limit is 8194)");
	free(token);
	aks_resolver_close(r);
}

static void test_custom_attribute_and_secret_env(void **state)
{
	assert_int_equal(setenv("MY_FRONT_END_KEY", OTHER_KEY, 1), 0);
	aks_resolver *r = must_open("secret_env: MY_FRONT_END_KEY\nattribute: x-identity\n");
	char *token = mint(OTHER_KEY, "{\"sub\":\"carol\",\"exp\":%lld}", (long long)now_s() + 60);
	const char *attrs[] = {"token", "garbage", "x-identity", token, NULL};
	aks_resolved_principal *p = NULL;
	aks_error *err = NULL;
	assert_int_equal(resolve_attrs(r, attrs, &p, &err), AKS_OK);
	assert_int_equal(aks_resolved_principal_get(p)->mode, AKS_IDENTITY_USER);
	assert_string_equal(aks_resolved_principal_get(p)->subject, "carol");
	aks_resolved_principal_free(p);
	free(token);
	/* The key is read at start: changing the variable later changes nothing. */
	assert_int_equal(setenv("MY_FRONT_END_KEY", KEY, 1), 0);
	token = mint(OTHER_KEY, "{\"sub\":\"carol\",\"exp\":%lld}", (long long)now_s() + 60);
	const char *attrs2[] = {"x-identity", token, NULL};
	assert_int_equal(resolve_attrs(r, attrs2, &p, &err), AKS_OK);
	aks_resolved_principal_free(p);
	free(token);
	aks_resolver_close(r);
	unsetenv("MY_FRONT_END_KEY");
}

static void expect_open_error(const char *yaml, const char *needle)
{
	aks_resolver *r = NULL;
	aks_error *err = NULL;
	assert_int_equal(open_resolver(yaml, &r, &err), AKS_ECONFIG);
	assert_null(r);
	assert_int_equal(aks_error_code(err), AKS_ECONFIG);
	if (!strstr(aks_error_message(err), needle))
		fail_msg("'%s' does not contain '%s'", aks_error_message(err), needle);
	aks_error_free(err);
}

static void test_secret_missing(void **state)
{
	assert_int_equal(unsetenv("AKS_IDENTITY_SECRET"), 0);
	expect_open_error(NULL, "the environment variable AKS_IDENTITY_SECRET (secret_env) holding "
	                        "the token key is not set or empty");
	assert_int_equal(setenv("AKS_IDENTITY_SECRET", "", 1), 0);
	expect_open_error(NULL, "AKS_IDENTITY_SECRET (secret_env)");
	assert_int_equal(setenv("AKS_IDENTITY_SECRET", "short", 1), 0);
	expect_open_error(NULL, "the key in AKS_IDENTITY_SECRET is 5 bytes; use at least 16");
	expect_open_error("secret_env: NO_SUCH_VARIABLE_FOR_AKS\n",
	                  "NO_SUCH_VARIABLE_FOR_AKS (secret_env)");
	setup_key(NULL);
}

static void test_config_errors(void **state)
{
	expect_open_error("leeway: -1\n", "'leeway' is -1");
	expect_open_error("leeway: 86401\n", "'leeway' is 86401");
	expect_open_error("max_token_bytes: 63\n", "'max_token_bytes' is 63");
	expect_open_error("max_token_bytes: 1048577\n", "'max_token_bytes' is 1048577");
	expect_open_error("attribute: ''\n", "'attribute' must name a request attribute");
	expect_open_error("secret_env: null\n", "'secret_env' must name an environment variable");
	expect_open_error("audience: ''\n", "'audience' is empty");
	/* The host's schema check: unknown keys and types. */
	expect_open_error("secret: abc\n", "secret");
	expect_open_error("leeway: soon\n", "leeway");
}

/* ---- the verifier directly, with the clock in hand -------------------------------- */

static st_status verify_at(const char *token, int64_t now, int64_t leeway, char *why)
{
	st_params p = {(const unsigned char *)KEY, strlen(KEY), NULL, leeway, 8192};
	st_claims c;
	st_status rc = st_verify(&p, token, strlen(token), now, &c, why);
	if (rc == ST_OK) {
		assert_string_equal(c.sub, "alice");
		st_claims_free(&c);
	}
	return rc;
}

static void test_time_boundaries(void **state)
{
	char why[ST_WHY_SIZE];
	char *token = mint(KEY, "{\"sub\":\"alice\",\"exp\":1000000,\"nbf\":900000}");
	/* exp: valid up to exp + leeway - 1; no leeway: up to exp - 1. */
	assert_int_equal(verify_at(token, 1000029, 30, why), ST_OK);
	assert_int_equal(verify_at(token, 1000030, 30, why), ST_REJECTED);
	assert_string_equal(why, "expired at 1970-01-12T13:46:40Z");
	assert_int_equal(verify_at(token, 999999, 0, why), ST_OK);
	assert_int_equal(verify_at(token, 1000000, 0, why), ST_REJECTED);
	/* nbf: valid from nbf - leeway. */
	assert_int_equal(verify_at(token, 899970, 30, why), ST_OK);
	assert_int_equal(verify_at(token, 899969, 30, why), ST_REJECTED);
	assert_string_equal(why, "not valid before 1970-01-11T10:00:00Z");
	assert_int_equal(verify_at(token, 900000, 0, why), ST_OK);
	assert_int_equal(verify_at(token, 899999, 0, why), ST_REJECTED);
	free(token);
}

/* One resolver, many threads, good and bad tokens interleaved. */
struct worker {
	aks_resolver *r;
	const char *good, *bad;
	int failures;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	for (int i = 0; i < 200; i++) {
		aks_resolved_principal *p = NULL;
		aks_error *err = NULL;
		bool good = i % 2 == 0;
		int rc = resolve(w->r, good ? w->good : w->bad, &p, &err);
		if (good ? (rc != AKS_OK || strcmp(aks_resolved_principal_get(p)->subject, "alice"))
		         : (rc != AKS_EPOLICY || p))
			w->failures++;
		aks_resolved_principal_free(p);
		aks_error_free(err);
	}
	return NULL;
}

static void test_threads(void **state)
{
	aks_resolver *r = must_open(NULL);
	char *good = mint_alice();
	char *bad = mint(OTHER_KEY, "{\"sub\":\"alice\",\"exp\":%lld}", (long long)now_s() + 600);
	pthread_t t[8];
	struct worker w[8];
	for (int i = 0; i < 8; i++) {
		w[i] = (struct worker){r, good, bad, 0};
		assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
	}
	for (int i = 0; i < 8; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		assert_int_equal(w[i].failures, 0);
	}
	free(good);
	free(bad);
	aks_resolver_close(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_descriptor, setup_key),
	    cmocka_unit_test_setup(test_good_token, setup_key),
	    cmocka_unit_test_setup(test_no_token, setup_key),
	    cmocka_unit_test_setup(test_bad_signature, setup_key),
	    cmocka_unit_test_setup(test_malformed, setup_key),
	    cmocka_unit_test_setup(test_expired_and_not_yet_valid, setup_key),
	    cmocka_unit_test_setup(test_leeway, setup_key),
	    cmocka_unit_test_setup(test_audience, setup_key),
	    cmocka_unit_test_setup(test_size_limit, setup_key),
	    cmocka_unit_test_setup(test_custom_attribute_and_secret_env, setup_key),
	    cmocka_unit_test_setup(test_secret_missing, setup_key),
	    cmocka_unit_test_setup(test_config_errors, setup_key),
	    cmocka_unit_test(test_time_boundaries),
	    cmocka_unit_test_setup(test_threads, setup_key),
	};
	return cmocka_run_group_tests_name("signed_token", tests, NULL, NULL);
}
