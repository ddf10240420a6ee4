/*
 * plugins/kubernetes/k8s_rest.c - the Kubernetes API over libcurl.
 *
 * One client per identity: the configured one (kubeconfig or in-cluster),
 * and one per impersonated (user, groups), each with its own libcurl share
 * of connections and TLS sessions, so an identity's requests reuse its
 * connections and never another's. Impersonation is the API's: an
 * Impersonate-User header and one Impersonate-Group header per group (any
 * number of them). Requests run on a multi handle, so each is bounded by
 * the call's deadline and wakes on its cancellation descriptor.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aks_container.h"
#include "aks_curl.h"
#include "k8s_internal.h"

/* ---- clients ------------------------------------------------------------------------- */

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *ctx)
{
	(void)h;
	(void)access;
	k8s_client *c = ctx;
	pthread_mutex_lock(&c->locks[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *ctx)
{
	(void)h;
	k8s_client *c = ctx;
	pthread_mutex_unlock(&c->locks[data]);
}

static void client_free(k8s_client *c)
{
	if (!c)
		return;
	if (c->share)
		curl_share_cleanup(c->share);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&c->locks[i]);
	free(c->user);
	aks__strv_free(c->groups);
	free(c);
}

void k8s_clients_free(aks_provider_impl *prov)
{
	k8s_client *c = prov->clients;
	while (c) {
		k8s_client *next = c->next;
		client_free(c);
		c = next;
	}
	prov->clients = NULL;
}

static bool same_identity(const k8s_client *c, const char *user, char *const *groups)
{
	if (!c->user != !user || (user && strcmp(c->user, user) != 0))
		return false;
	size_t i = 0;
	for (; c->groups[i] && groups && groups[i]; i++)
		if (strcmp(c->groups[i], groups[i]) != 0)
			return false;
	return !c->groups[i] && !(groups && groups[i]);
}

/* Header values cannot carry line breaks or other control characters. */
static bool header_safe(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	return true;
}

/* Takes ownership of user and groups. */
static int client_get(aks_provider_impl *prov, char *user, char **groups, k8s_client **out,
                      aks_error **err)
{
	const aks_host_api *host = prov->host;
	pthread_mutex_lock(&prov->lock);
	for (k8s_client *c = prov->clients; c; c = c->next)
		if (same_identity(c, user, groups)) {
			pthread_mutex_unlock(&prov->lock);
			*out = c;
			free(user);
			aks__strv_free(groups);
			return AKS_OK;
		}
	k8s_client *c = calloc(1, sizeof(*c));
	if (c) {
		c->prov = prov;
		c->user = user;
		c->groups = groups;
		for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
			pthread_mutex_init(&c->locks[i], NULL);
		c->share = curl_share_init();
	}
	if (!c || !c->share || !c->groups) {
		if (c)
			client_free(c);
		else {
			free(user);
			aks__strv_free(groups);
		}
		pthread_mutex_unlock(&prov->lock);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	curl_share_setopt(c->share, CURLSHOPT_LOCKFUNC, share_lock);
	curl_share_setopt(c->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
	curl_share_setopt(c->share, CURLSHOPT_USERDATA, c);
	curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
	curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
	curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	c->next = prov->clients;
	prov->clients = c;
	pthread_mutex_unlock(&prov->lock);
	*out = c;
	return AKS_OK;
}

int k8s_client_own(aks_provider_impl *prov, k8s_client **out, aks_error **err)
{
	return client_get(prov, NULL, calloc(1, sizeof(char *)), out, err);
}

static const char *credential(const aks_principal *p, const char *key)
{
	for (const char *const *kv = p->credentials; kv && kv[0] && kv[1]; kv += 2)
		if (strcmp(kv[0], key) == 0)
			return kv[1];
	return NULL;
}

/* credentials["groups"] is one string: groups separated by commas. */
static char **split_groups(const char *s)
{
	size_t n = 1;
	for (const char *p = s; *p; p++)
		n += *p == ',';
	char **v = calloc(n + 1, sizeof(*v));
	size_t k = 0;
	for (const char *p = s; v && *p;) {
		size_t len = strcspn(p, ",");
		const char *a = p, *b = p + len;
		while (a < b && (*a == ' ' || *a == '\t'))
			a++;
		while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
			b--;
		if (b > a && !(v[k++] = strndup(a, (size_t)(b - a)))) {
			aks__strv_free(v);
			return NULL;
		}
		p += len;
		if (*p == ',')
			p++;
	}
	return v;
}

int k8s_client_for(aks_provider_impl *prov, const aks_principal *principal, k8s_client **out,
                   aks_error **err)
{
	const aks_host_api *host = prov->host;
	if (!principal || principal->mode != AKS_IDENTITY_USER)
		return k8s_client_own(prov, out, err);
	const char *user = credential(principal, "user");
	if (!user || !*user)
		user = principal->subject;
	if (!user || !*user)
		return host->error_set(
		    err, AKS_EPOLICY,
		    "user-mode principal carries no user identity to impersonate "
		    "(set credentials['user'] or subject)");
	const char *gs = credential(principal, "groups");
	char **groups = gs ? split_groups(gs) : aks__strv_dup(principal->groups);
	char *u = strdup(user);
	if (!groups || !u) {
		free(u);
		aks__strv_free(groups);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	bool safe = header_safe(u);
	for (char **g = groups; safe && *g; g++)
		safe = header_safe(*g);
	if (!safe) {
		free(u);
		aks__strv_free(groups);
		return host->error_set(err, AKS_EPOLICY,
		                       "the user-mode principal's user or groups contain control "
		                       "characters and cannot be impersonated");
	}
	return client_get(prov, u, groups, out, err);
}

void k8s_client_who(const k8s_client *c, char *out, size_t len)
{
	if (!c->user) {
		snprintf(out, len, "the identity of %s", c->prov->conn.source);
		return;
	}
	size_t n = (size_t)snprintf(out, len, "user '%s'", c->user);
	for (size_t i = 0; c->groups[i] && n < len; i++)
		n += (size_t)snprintf(out + n, len - n, "%s'%s'", i ? ", " : " (groups ",
		                      c->groups[i]);
	if (c->groups[0] && n < len)
		snprintf(out + n, len - n, ")");
}

struct curl_slist *k8s_auth_headers(k8s_client *c, bool *ok)
{
	struct curl_slist *h = NULL, *t;
	*ok = true;
	char *token = k8s_conn_token(&c->prov->conn);
	if (token) {
		char *line = NULL;
		if (asprintf(&line, "Authorization: Bearer %s", token) < 0)
			line = NULL;
		memset(token, 0, strlen(token));
		free(token);
		if (!line || !(t = curl_slist_append(h, line))) {
			free(line);
			goto nomem;
		}
		h = t;
		memset(line, 0, strlen(line));
		free(line);
	}
	if (c->user) {
		char *line = NULL;
		if (asprintf(&line, "Impersonate-User: %s", c->user) < 0 ||
		    !(t = curl_slist_append(h, line))) {
			free(line);
			goto nomem;
		}
		h = t;
		free(line);
		/* every group its own header: the API server reads them all */
		for (char **g = c->groups; *g; g++) {
			if (asprintf(&line, "Impersonate-Group: %s", *g) < 0 ||
			    !(t = curl_slist_append(h, line))) {
				free(line);
				goto nomem;
			}
			h = t;
			free(line);
		}
	}
	return h;
nomem:
	curl_slist_free_all(h);
	*ok = false;
	return NULL;
}

/* ---- requests ------------------------------------------------------------------------- */

static bool url_unreserved(unsigned char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       ch == '-' || ch == '_' || ch == '.' || ch == '~';
}

size_t k8s_escaped_len(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += url_unreserved((unsigned char)*s) ? 1 : 3;
	return n;
}

char *k8s_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	char *o = malloc(3 * strlen(s) + 1), *p = o;
	if (!o)
		return NULL;
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (url_unreserved(ch)) {
			*p++ = (char)ch;
		} else {
			*p++ = '%';
			*p++ = hex[ch >> 4];
			*p++ = hex[ch & 15];
		}
	}
	*p = '\0';
	return o;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *ctx)
{
	k8s_req *r = ctx;
	size_t n = size * nmemb;
	/* API answers are small objects; a bound keeps a misbehaving peer in check */
	if (r->resp.len + n > (64u << 20))
		return 0;
	return aks__buf_append(&r->resp, data, n) == AKS_OK ? n : 0;
}

void k8s_req_free(k8s_req *r)
{
	aks__buf_free(&r->resp);
}

json_object *k8s_resp_json(const k8s_req *r)
{
	return r->resp.len ? json_tokener_parse(r->resp.data) : NULL;
}

static void set_tls(CURL *e, const k8s_conn_cfg *cc)
{
	if (cc->insecure) {
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (cc->ca.data) {
		struct curl_blob b = {cc->ca.data, cc->ca.len, CURL_BLOB_COPY};
		curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &b);
	}
	if (cc->cert.data) {
		struct curl_blob b = {cc->cert.data, cc->cert.len, CURL_BLOB_COPY};
		curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &b);
		curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
	}
	if (cc->key.data) {
		struct curl_blob b = {cc->key.data, cc->key.len, CURL_BLOB_COPY};
		curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &b);
		curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
	}
}

static int transport_error(k8s_client *c, const k8s_req *r, aks_error **err)
{
	const aks_host_api *host = c->prov->host;
	const k8s_conn_cfg *cc = &c->prov->conn;
	const char *why = r->errbuf[0] ? r->errbuf : curl_easy_strerror(r->result);
	switch (r->result) {
	case CURLE_PEER_FAILED_VERIFICATION:
#if LIBCURL_VERSION_NUM < 0x073e00
	case CURLE_SSL_CACERT:
#endif
	case CURLE_SSL_CACERT_BADFILE:
		return host->error_set(err, AKS_EPROVISION,
		                       "kubernetes: the API server at %s presented a certificate "
		                       "that cannot be verified: %s (check the cluster's "
		                       "certificate-authority in %s)",
		                       cc->server, why, cc->source);
	case CURLE_SSL_CERTPROBLEM:
		return host->error_set(err, AKS_EPROVISION,
		                       "kubernetes: the client certificate or key of %s cannot be "
		                       "used: %s",
		                       cc->source, why);
	case CURLE_SSL_CONNECT_ERROR:
		return host->error_set(err, AKS_EPROVISION,
		                       "kubernetes: the TLS handshake with the API server at %s "
		                       "failed: %s (from %s)",
		                       cc->server, why, cc->source);
	default:
		return host->error_set(
		    err, AKS_EPROVISION,
		    "kubernetes: cannot reach the API server at %s: %s (from %s)", cc->server, why,
		    cc->source);
	}
}

int k8s_request(k8s_client *c, k8s_req *r, const aks_call *call, aks_error **err)
{
	const aks_host_api *host = c->prov->host;
	const k8s_conn_cfg *cc = &c->prov->conn;
	r->status = 0;
	r->result = CURLE_OK;
	r->errbuf[0] = '\0';
	int rc = aks_ctr_call_check(host, call, K8S_NAME, err);
	if (rc != AKS_OK)
		return rc;
	CURLM *multi = curl_multi_init();
	CURL *e = curl_easy_init();
	bool ok = true;
	struct curl_slist *headers = k8s_auth_headers(c, &ok), *t;
	char *url = NULL;
	if (!multi || !e || !ok || asprintf(&url, "%s%s", cc->server, r->path) < 0 ||
	    !(t = curl_slist_append(headers, "Accept: application/json")) || !(headers = t) ||
	    !(t = curl_slist_append(headers, "Expect:")) || !(headers = t) ||
	    (r->body && (!(t = curl_slist_append(headers, "Content-Type: application/json")) ||
	                 !(headers = t)))) {
		rc = host->error_set(err, AKS_ENOMEM, "out of memory");
		goto out;
	}
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_SHARE, c->share);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(e, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	set_tls(e, cc);
	if (strcmp(r->method, "GET") == 0) {
		curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
	} else {
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r->method);
		if (r->body) {
			curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body);
			curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
		}
	}
	if (curl_multi_add_handle(multi, e) != CURLM_OK) {
		rc = host->error_set(err, AKS_ERROR, "libcurl refused a request");
		goto out;
	}
	rc = aks_ctr_multi_run(host, multi, call, K8S_NAME, &r->result, err);
	curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &r->status);
	curl_multi_remove_handle(multi, e);
	if (rc == AKS_OK && r->result != CURLE_OK)
		rc = transport_error(c, r, err);
out:
	free(url);
	curl_slist_free_all(headers);
	if (e)
		curl_easy_cleanup(e);
	if (multi)
		curl_multi_cleanup(multi);
	return rc;
}

int k8s_gone(const aks_host_api *host, const char *id, const char *why, aks_error **err)
{
	return host->error_set(err, AKS_EGONE, "sandbox pod '%s' %s", id, why);
}

/* ---- API errors ------------------------------------------------------------------------ */

static const char *verb_of(const char *method, const char *path)
{
	if (strcmp(method, "POST") == 0)
		return "create";
	if (strcmp(method, "DELETE") == 0)
		return "delete";
	if (strcmp(method, "PUT") == 0)
		return "update";
	if (strcmp(method, "PATCH") == 0)
		return "patch";
	/* a GET on a collection lists it */
	const char *q = strchr(path, '?');
	size_t n = q ? (size_t)(q - path) : strlen(path);
	const char *last = path;
	for (size_t i = 0; i < n; i++)
		if (path[i] == '/')
			last = path + i + 1;
	size_t ln = (size_t)(path + n - last);
	if ((ln == 4 && strncmp(last, "pods", 4) == 0) ||
	    (ln == 15 && strncmp(last, "networkpolicies", 15) == 0))
		return "list";
	return "get";
}

/* "pods", "pods/exec", "networkpolicies" and the namespace, from an API path. */
static void resource_of(const char *path, char *res, size_t rlen, char *ns, size_t nslen)
{
	snprintf(res, rlen, "?");
	snprintf(ns, nslen, "?");
	const char *p = strstr(path, "/namespaces/");
	if (!p)
		return;
	p += strlen("/namespaces/");
	size_t n = strcspn(p, "/?");
	snprintf(ns, nslen, "%.*s", (int)n, p);
	p += n;
	if (*p != '/')
		return;
	p++;
	size_t rn = strcspn(p, "/?");
	const char *name = p + rn;
	if (*name == '/') {
		name++;
		size_t nn = strcspn(name, "/?");
		if (name[nn] == '/') { /* a subresource */
			snprintf(res, rlen, "%.*s/%.*s", (int)rn, p,
			         (int)strcspn(name + nn + 1, "/?"), name + nn + 1);
			return;
		}
	}
	snprintf(res, rlen, "%.*s", (int)rn, p);
}

int k8s_api_error(k8s_client *c, const k8s_req *r, int code, const char *what, aks_error **err)
{
	const aks_host_api *host = c->prov->host;
	char *msg = aks_ctr_http_message(r->resp.data, r->resp.len, r->status);
	char who[512];
	k8s_client_who(c, who, sizeof(who));
	int rc;
	if (r->status == 401) {
		rc =
		    host->error_set(err, code,
		                    "kubernetes: %s: the API server rejected the credentials of %s "
		                    "(401 Unauthorized: %s); check the token or client certificate",
		                    what, c->prov->conn.source, msg ? msg : "?");
	} else if (r->status == 403) {
		char res[128], ns[128];
		resource_of(r->path, res, sizeof(res), ns, sizeof(ns));
		rc = host->error_set(err, code,
		                     "kubernetes: %s: forbidden (403): %s; %s needs RBAC '%s' on "
		                     "'%s' in namespace '%s'",
		                     what, msg ? msg : "?", who, verb_of(r->method, r->path), res,
		                     ns);
	} else {
		rc = host->error_set(err, code, "kubernetes: %s: %s (HTTP %ld)", what,
		                     msg ? msg : "?", r->status);
	}
	free(msg);
	return rc;
}
