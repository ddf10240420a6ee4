/*
 * plugins/signed_token/signed_token.c - the signed_token principal resolver.
 *
 * A trusted front end authenticates the end user and passes, with each agent
 * call, a token it signed with a key shared with aksandbox (st_internal.h). A valid
 * token becomes a user principal; no token at all becomes the agent principal
 * (profiles with identity.mode: user then refuse); anything else - a token
 * that is malformed, too large, badly signed, expired, not yet valid or for
 * another audience - is AKS_EPOLICY: fail closed, never a weaker principal.
 *
 * The key is read once, at init, from the environment variable the config
 * names; it never appears in the config file.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>

#include <aksandbox/plugin.h>
#include <aksandbox/provider.h>
#include <aksandbox/resolver.h>

#include "st_internal.h"

#ifndef ST_PLUGIN_VERSION
#error "ST_PLUGIN_VERSION must be defined (the package version)"
#endif

#define ST_NAME "signed_token"
/* Short keys make the HMAC guessable offline from any token it signed. */
#define ST_MIN_KEY_BYTES   16
#define ST_MAX_LEEWAY      86400
#define ST_MIN_TOKEN_BYTES 64
#define ST_MAX_TOKEN_BYTES (1 << 20)

static const aks_config_key st_config_keys[] = {
    AKS_CONFIG_KEY("secret_env", AKS_CONFIG_STRING, false, "AKS_IDENTITY_SECRET",
                   "environment variable holding the HMAC-SHA256 key (read at start)"),
    AKS_CONFIG_KEY("attribute", AKS_CONFIG_STRING, false, "token",
                   "request attribute that carries the token"),
    AKS_CONFIG_KEY("audience", AKS_CONFIG_STRING, false, NULL,
                   "when set, the token's 'aud' must equal it"),
    AKS_CONFIG_KEY("leeway", AKS_CONFIG_INT, false, "30",
                   "seconds of clock skew allowed on 'exp' and 'nbf'"),
    AKS_CONFIG_KEY("max_token_bytes", AKS_CONFIG_INT, false, "8192",
                   "longer tokens are refused unread"),
    AKS_CONFIG_END,
};

struct aks_resolver_impl {
	const aks_host_api *host;
	char *attribute;
	char *audience; /* NULL: not checked */
	unsigned char *key;
	size_t key_len;
	int64_t leeway;
	size_t max_token_bytes;
};

static void st_fini(aks_resolver_impl *r)
{
	if (!r)
		return;
	if (r->key)
		OPENSSL_cleanse(r->key, r->key_len);
	free(r->key);
	free(r->attribute);
	free(r->audience);
	free(r);
}

static int st_init(const aks_host_api *host, const aks_config *config, aks_resolver_impl **out,
                   aks_error **err)
{
	/* A host older than the principal services cannot take our answer. */
	if (!AKS_HOST_HAS(host, principal_add_credential))
		return host->error_set(err, AKS_EPLUGIN,
		                       ST_NAME ": the host lacks the principal services");
	const char *secret_env = NULL, *attribute = NULL, *audience = NULL;
	int64_t leeway = 0, max_bytes = 0;
	if (host->config_string(config, "secret_env", &secret_env) != AKS_OK ||
	    host->config_string(config, "attribute", &attribute) != AKS_OK ||
	    host->config_string(config, "audience", &audience) != AKS_OK ||
	    host->config_int(config, "leeway", &leeway) != AKS_OK ||
	    host->config_int(config, "max_token_bytes", &max_bytes) != AKS_OK)
		return host->error_set(err, AKS_ECONFIG, ST_NAME ": cannot read the config block");
	if (!secret_env || !*secret_env)
		return host->error_set(err, AKS_ECONFIG,
		                       ST_NAME ": 'secret_env' must name an environment variable");
	if (!attribute || !*attribute)
		return host->error_set(err, AKS_ECONFIG,
		                       ST_NAME ": 'attribute' must name a request attribute");
	if (audience && !*audience)
		return host->error_set(err, AKS_ECONFIG,
		                       ST_NAME ": 'audience' is empty; set it or use null");
	if (leeway < 0 || leeway > ST_MAX_LEEWAY)
		return host->error_set(err, AKS_ECONFIG,
		                       ST_NAME ": 'leeway' is %lld; it must be 0 to %d seconds",
		                       (long long)leeway, ST_MAX_LEEWAY);
	if (max_bytes < ST_MIN_TOKEN_BYTES || max_bytes > ST_MAX_TOKEN_BYTES)
		return host->error_set(
		    err, AKS_ECONFIG, ST_NAME ": 'max_token_bytes' is %lld; it must be %d to %d",
		    (long long)max_bytes, ST_MIN_TOKEN_BYTES, ST_MAX_TOKEN_BYTES);

	const char *secret = getenv(secret_env);
	if (!secret || !*secret)
		return host->error_set(err, AKS_ECONFIG,
		                       ST_NAME ": the environment variable %s (secret_env) holding "
		                               "the token key is not set or empty",
		                       secret_env);
	size_t key_len = strlen(secret);
	if (key_len < ST_MIN_KEY_BYTES)
		return host->error_set(err, AKS_ECONFIG,
		                       ST_NAME ": the key in %s is %zu bytes; use at least %d "
		                               "(e.g. openssl rand -hex 32)",
		                       secret_env, key_len, ST_MIN_KEY_BYTES);

	aks_resolver_impl *r = calloc(1, sizeof(*r));
	if (!r)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	r->host = host;
	r->attribute = strdup(attribute);
	r->audience = audience ? strdup(audience) : NULL;
	r->key = malloc(key_len);
	if (!r->attribute || (audience && !r->audience) || !r->key) {
		st_fini(r);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	memcpy(r->key, secret, key_len);
	r->key_len = key_len;
	r->leeway = leeway;
	r->max_token_bytes = (size_t)max_bytes;
	*out = r;
	return AKS_OK;
}

static int st_resolve(aks_resolver_impl *r, const aks_resolve_request *request,
                      aks_principal_builder *out, aks_error **err)
{
	const aks_host_api *host = r->host;
	const char *token = NULL;
	for (size_t i = 0; request->attributes && request->attributes[i]; i += 2) {
		if (!request->attributes[i + 1])
			break; /* an odd list: the last key has no value */
		if (strcmp(request->attributes[i], r->attribute) != 0)
			continue;
		/* Two tokens could name two users: refuse rather than pick one. */
		if (token)
			return host->error_set(
			    err, AKS_EPOLICY,
			    "identity token rejected: more than one '%s' attribute", r->attribute);
		token = request->attributes[i + 1];
	}
	if (!token) {
		int rc = host->principal_set(out, AKS_IDENTITY_AGENT, request->agent);
		return rc == AKS_OK ? AKS_OK : host->error_set(err, rc, "out of memory");
	}

	st_params params = {r->key, r->key_len, r->audience, r->leeway, r->max_token_bytes};
	/* An empty token is a token that fails to parse, not an absent one. */
	size_t len = strnlen(token, r->max_token_bytes + 1);
	st_claims claims;
	char why[ST_WHY_SIZE];
	switch (st_verify(&params, token, len, (int64_t)time(NULL), &claims, why)) {
	case ST_OK:
		break;
	case ST_REJECTED:
		return host->error_set(err, AKS_EPOLICY, "identity token rejected: %s", why);
	case ST_ECRYPTO:
		return host->error_set(err, AKS_ERROR,
		                       "identity token not checked: libcrypto cannot compute "
		                       "HMAC-SHA256");
	default:
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}

	int rc = host->principal_set(out, AKS_IDENTITY_USER, claims.sub);
	for (size_t i = 0; rc == AKS_OK && claims.groups[i]; i++)
		rc = host->principal_add_group(out, claims.groups[i]);
	for (size_t i = 0; rc == AKS_OK && claims.credentials[i]; i += 2)
		rc = host->principal_add_credential(out, claims.credentials[i],
		                                    claims.credentials[i + 1]);
	st_claims_free(&claims);
	return rc == AKS_OK ? AKS_OK : host->error_set(err, rc, "out of memory");
}

static const aks_resolver_ops st_ops = {
    .struct_version = AKS_RESOLVER_OPS_VERSION,
    .struct_size = sizeof(aks_resolver_ops),
    .init = st_init,
    .fini = st_fini,
    .resolve = st_resolve,
};

AKS_PLUGIN_DEFINE(AKS_PLUGIN_RESOLVER, ST_NAME, ST_PLUGIN_VERSION, "Apache-2.0",
                  "maps a signed identity token (HMAC-SHA256) from a trusted front end to a "
                  "user principal",
                  st_config_keys, &st_ops);
