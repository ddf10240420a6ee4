/*
 * core/mcp/mcp_http_auth.c - bearer authentication for the Streamable HTTP transport, as
 * MCP's authorization spec has a resource server do it: the token in "Authorization:
 * Bearer" is verified by the configured principal resolver (signed_token verifies signed
 * identity tokens), which must find a user in it; a request without one, or with one it
 * refuses, gets 401 and a WWW-Authenticate challenge naming the protected-resource
 * metadata (RFC 9728), which points clients at the operator's authorization server.
 * aksandbox verifies tokens; it issues none.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <json-c/json.h>

#include "mcp_http.h"

#define METADATA_PATH "/.well-known/oauth-protected-resource"

int aks__http_auth_init(struct http_auth *a, const aks__mcp_http_options *opt, const char *url)
{
	memset(a, 0, sizeof(*a));
	a->resolver = opt->resolver;
	a->attribute = opt->token_attribute ? opt->token_attribute : "token";
	a->conversation = opt->server.conversation_id;
	a->agent = opt->server.agent;
	a->servers = opt->authorization_servers;
	a->resource = strdup(opt->resource_url ? opt->resource_url : url);
	if (!a->resource)
		return -1;
	/* RFC 9728 §3.1: the well-known path goes between the host and the resource's path. */
	const char *host = strstr(a->resource, "://");
	const char *path = host ? strchr(host + 3, '/') : NULL;
	size_t origin_len = path ? (size_t)(path - a->resource) : strlen(a->resource);
	if (asprintf(&a->metadata_url, "%.*s" METADATA_PATH "%s", (int)origin_len, a->resource,
	             path && strcmp(path, "/") != 0 ? path : "") < 0) {
		a->metadata_url = NULL;
		return -1;
	}
	return 0;
}

void aks__http_auth_clear(struct http_auth *a)
{
	free(a->resource);
	free(a->metadata_url);
	memset(a, 0, sizeof(*a));
}

bool aks__http_auth_is_metadata_path(const char *url)
{
	size_t n = strlen(METADATA_PATH);
	return strncmp(url, METADATA_PATH, n) == 0 && (url[n] == '\0' || url[n] == '/');
}

char *aks__http_auth_metadata(const struct http_auth *a)
{
	struct json_object *doc = json_object_new_object(), *servers = json_object_new_array();
	json_object_object_add(doc, "resource", json_object_new_string(a->resource));
	for (size_t i = 0; a->servers && a->servers[i]; i++)
		json_object_array_add(servers, json_object_new_string(a->servers[i]));
	json_object_object_add(doc, "authorization_servers", servers);
	struct json_object *methods = json_object_new_array();
	json_object_array_add(methods, json_object_new_string("header"));
	json_object_object_add(doc, "bearer_methods_supported", methods);
	json_object_object_add(doc, "resource_name", json_object_new_string("aksandbox"));
	const char *text = json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN |
	                                                           JSON_C_TO_STRING_NOSLASHESCAPE);
	char *out = text ? strdup(text) : NULL;
	json_object_put(doc);
	return out;
}

/* The token of "Bearer <token>" (the scheme in any case, then spaces); NULL otherwise. */
static const char *bearer_token(const char *authorization)
{
	if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0)
		return NULL;
	const char *t = authorization + 7;
	while (*t == ' ')
		t++;
	/* RFC 6750's token68: letters, digits and -._~+/ then '=' padding. */
	size_t n =
	    strspn(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/");
	n += strspn(t + n, "=");
	return n > 0 && t[n] == '\0' ? t : NULL;
}

int aks__http_auth_check(const struct http_auth *a, const char *authorization, char **subject,
                         char **token, char *why, size_t why_size)
{
	*subject = *token = NULL;
	const char *t = bearer_token(authorization);
	if (!t) {
		snprintf(why, why_size, "%s", authorization ? "not a Bearer token" : "no token");
		return authorization ? AKS_HTTP_AUTH_INVALID : AKS_HTTP_AUTH_MISSING;
	}
	const char *attributes[] = {a->attribute, t, NULL};
	aks_resolve_request req;
	aks_resolve_request_init(&req, a->conversation, a->agent, attributes);
	aks_resolved_principal *rp = NULL;
	aks_error *e = NULL;
	if (aks_resolver_resolve(a->resolver, &req, &rp, &e) < 0) {
		/* The resolver's message never holds the token (signed_token promises it). */
		snprintf(why, why_size, "%s", e ? aks_error_message(e) : "refused");
		aks_error_free(e);
		return AKS_HTTP_AUTH_INVALID;
	}
	const aks_principal *p = aks_resolved_principal_get(rp);
	if (!p || p->mode != AKS_IDENTITY_USER || !p->subject || !*p->subject) {
		snprintf(why, why_size, "the token names no user");
		aks_resolved_principal_free(rp);
		return AKS_HTTP_AUTH_INVALID;
	}
	*subject = strdup(p->subject);
	*token = strdup(t);
	aks_resolved_principal_free(rp);
	if (!*subject || !*token) {
		free(*subject);
		free(*token);
		*subject = *token = NULL;
		snprintf(why, why_size, "out of memory");
		return AKS_HTTP_AUTH_INVALID;
	}
	return AKS_HTTP_AUTH_OK;
}

char *aks__http_auth_challenge(const struct http_auth *a, int outcome, const char *why)
{
	/* A quoted-string may hold neither '"' nor '\': those become '\''. */
	char desc[256];
	snprintf(desc, sizeof(desc), "%s", why ? why : "");
	for (char *p = desc; *p; p++)
		if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
			*p = '\'';
	char *out = NULL;
	int n = outcome == AKS_HTTP_AUTH_INVALID
	            ? asprintf(&out,
	                       "Bearer resource_metadata=\"%s\", error=\"invalid_token\", "
	                       "error_description=\"%s\"",
	                       a->metadata_url, desc)
	            : asprintf(&out, "Bearer resource_metadata=\"%s\"", a->metadata_url);
	return n < 0 ? NULL : out;
}
