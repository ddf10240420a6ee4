/*
 * plugins/docker/dk_http.c - the Engine API client: where the engine is
 * (DOCKER_HOST and the TLS variables, as the docker CLI reads them), and HTTP
 * requests over libcurl's multi interface, so that every transfer is bounded
 * by the call's deadline and wakes up on its cancellation descriptor instead
 * of blocking in libcurl.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aks_container.h"
#include "aks_curl.h"
#include "dk_internal.h"

#define DEFAULT_SOCKET "/var/run/docker.sock"

/* ---- small helpers ----------------------------------------------------------------- */

char *dk_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *o = malloc(3 * n + 1), *p = o;
	if (!o)
		return NULL;
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.' || ch == '~' ||
		    ch == '/') {
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

int dk_random_hex(char *out, size_t nbytes)
{
	unsigned char raw[64];
	if (nbytes > sizeof(raw))
		return -1;
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t got = 0;
	while (got < nbytes) {
		ssize_t n = read(fd, raw + got, nbytes - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			close(fd);
			return -1;
		}
		got += (size_t)n;
	}
	close(fd);
	for (size_t i = 0; i < nbytes; i++)
		sprintf(out + 2 * i, "%02x", raw[i]);
	return 0;
}

int dk_unreachable(const aks_provider_impl *prov, const dk_req *r, aks_error **err)
{
	return prov->host->error_set(
	    err, AKS_EPROVISION,
	    "cannot reach the Docker Engine at %s: %s (is dockerd running? start it with "
	    "`dockerd` or `systemctl start docker`, or set DOCKER_HOST)",
	    prov->ep.display, r->errbuf[0] ? r->errbuf : curl_easy_strerror(r->result));
}

/* ---- the endpoint ------------------------------------------------------------------- */

static char *file_if_exists(const char *dir, const char *name)
{
	char *p = NULL;
	if (asprintf(&p, "%s/%s", dir, name) < 0)
		return NULL;
	struct stat st;
	if (stat(p, &st) != 0) {
		free(p);
		return NULL;
	}
	return p;
}

void dk_endpoint_fini(dk_endpoint *ep)
{
	free(ep->display);
	free(ep->base_url);
	free(ep->unix_path);
	free(ep->ca);
	free(ep->cert);
	free(ep->key);
	memset(ep, 0, sizeof(*ep));
}

/* DOCKER_HOST as the docker CLI reads it: unix:///path, tcp://host[:port]
 * (2376 with TLS, else 2375), TLS when DOCKER_TLS_VERIFY is non-empty (then
 * verified against DOCKER_CERT_PATH/ca.pem, presenting cert.pem and key.pem)
 * or DOCKER_TLS is non-empty (unverified). */
int dk_endpoint_init(dk_endpoint *ep, const char *configured_host, const aks_host_api *host,
                     aks_error **err)
{
	memset(ep, 0, sizeof(*ep));
	const char *h =
	    configured_host && *configured_host ? configured_host : getenv("DOCKER_HOST");
	if (!h || !*h)
		h = "unix://" DEFAULT_SOCKET;
	if (!(ep->display = strdup(h)))
		goto nomem;
	if (strncmp(h, "unix://", 7) == 0) {
		if (!h[7])
			return host->error_set(err, AKS_ECONFIG,
			                       "docker: host '%s' has no socket path", h);
		if (!(ep->unix_path = strdup(h + 7)) ||
		    !(ep->base_url = strdup("http://localhost")))
			goto nomem;
		return AKS_OK;
	}
	if (strncmp(h, "tcp://", 6) != 0)
		return host->error_set(err, AKS_ECONFIG,
		                       "docker: host '%s' is not supported (use unix:///path or "
		                       "tcp://host:port)",
		                       h);
	const char *verify = getenv("DOCKER_TLS_VERIFY");
	const char *tls = getenv("DOCKER_TLS");
	ep->tls_verify = verify && *verify;
	ep->tls = ep->tls_verify || (tls && *tls);
	char *hostport = strdup(h + 6);
	if (!hostport)
		goto nomem;
	char *slash = strchr(hostport, '/');
	if (slash)
		*slash = '\0';
	if (!*hostport) {
		free(hostport);
		return host->error_set(err, AKS_ECONFIG, "docker: host '%s' has no address", h);
	}
	/* A port is present unless the text after the last ']' has no ':'. */
	const char *after = strrchr(hostport, ']');
	bool has_port = strchr(after ? after : hostport, ':') != NULL;
	int n = asprintf(&ep->base_url, "%s://%s%s", ep->tls ? "https" : "http", hostport,
	                 has_port ? "" : (ep->tls ? ":2376" : ":2375"));
	free(hostport);
	if (n < 0) {
		ep->base_url = NULL;
		goto nomem;
	}
	if (ep->tls) {
		const char *dir = getenv("DOCKER_CERT_PATH");
		char *def = NULL;
		if (!dir || !*dir) {
			const char *home = getenv("HOME");
			if (asprintf(&def, "%s/.docker", home ? home : "") < 0)
				goto nomem;
			dir = def;
		}
		ep->ca = file_if_exists(dir, "ca.pem");
		ep->cert = file_if_exists(dir, "cert.pem");
		ep->key = file_if_exists(dir, "key.pem");
		free(def);
	}
	return AKS_OK;
nomem:
	return host->error_set(err, AKS_ENOMEM, "out of memory");
}

/* ---- connections ----------------------------------------------------------------------- */

int dk_conn_init(dk_conn *c, const aks_provider_impl *prov, aks_error **err)
{
	c->prov = prov;
	c->multi = curl_multi_init();
	c->easy = curl_easy_init();
	if (!c->multi || !c->easy) {
		dk_conn_fini(c);
		return prov->host->error_set(err, AKS_ENOMEM, "cannot create a libcurl handle");
	}
	return AKS_OK;
}

void dk_conn_fini(dk_conn *c)
{
	if (c->easy)
		curl_easy_cleanup(c->easy);
	if (c->multi)
		curl_multi_cleanup(c->multi);
	c->easy = NULL;
	c->multi = NULL;
}

/* ---- requests ------------------------------------------------------------------------------ */

static size_t on_body(char *data, size_t size, size_t nmemb, void *ctx)
{
	dk_req *r = ctx;
	size_t n = size * nmemb;
	if (r->sink) {
		if (!r->sink(r->sink_ctx, data, n)) {
			r->aborted = true;
			return 0; /* aborts the transfer */
		}
		return n;
	}
	return aks__buf_append(&r->resp, data, n) == AKS_OK ? n : 0;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *ctx)
{
	dk_req *r = ctx;
	size_t n = size * nmemb;
	static const char name[] = "x-docker-container-path-stat:";
	if (n > sizeof(name) - 1 && strncasecmp(data, name, sizeof(name) - 1) == 0) {
		const char *v = data + sizeof(name) - 1;
		size_t vl = n - (sizeof(name) - 1);
		while (vl && (*v == ' ' || *v == '\t'))
			v++, vl--;
		while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
			vl--;
		free(r->path_stat);
		r->path_stat = strndup(v, vl);
	}
	return n;
}

void dk_req_free(dk_req *r)
{
	aks__buf_free(&r->resp);
	free(r->path_stat);
	r->path_stat = NULL;
	if (r->headers)
		curl_slist_free_all(r->headers);
	r->headers = NULL;
}

int dk_begin(dk_conn *c, dk_req *r, aks_error **err)
{
	const aks_host_api *host = c->prov->host;
	const dk_endpoint *ep = &c->prov->ep;
	CURL *e = c->easy;
	curl_easy_reset(e);
	r->errbuf[0] = '\0';
	r->status = 0;
	r->done = r->aborted = false;
	r->result = CURLE_OK;

	char *url = NULL;
	if (asprintf(&url, "%s%s%s", ep->base_url, DK_API, r->path) < 0)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	curl_easy_setopt(e, CURLOPT_URL, url);
	free(url); /* libcurl copies string options */
	if (ep->unix_path)
		curl_easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, ep->unix_path);
	if (ep->tls) {
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, ep->tls_verify ? 1L : 0L);
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, ep->tls_verify ? 2L : 0L);
		if (ep->ca)
			curl_easy_setopt(e, CURLOPT_CAINFO, ep->ca);
		if (ep->cert)
			curl_easy_setopt(e, CURLOPT_SSLCERT, ep->cert);
		if (ep->key)
			curl_easy_setopt(e, CURLOPT_SSLKEY, ep->key);
	}
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);

	if (r->headers)
		curl_slist_free_all(r->headers);
	r->headers = curl_slist_append(NULL, "Expect:"); /* no 100-continue round trip */
	if (!r->headers)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	if (strcmp(r->method, "GET") == 0) {
		curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
	} else if (strcmp(r->method, "HEAD") == 0) {
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	} else {
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r->method);
		if (r->body || strcmp(r->method, "POST") == 0 || strcmp(r->method, "PUT") == 0) {
			char ct[128];
			snprintf(ct, sizeof(ct), "Content-Type: %s",
			         r->content_type ? r->content_type : "application/json");
			struct curl_slist *h = curl_slist_append(r->headers, ct);
			if (!h)
				return host->error_set(err, AKS_ENOMEM, "out of memory");
			r->headers = h;
			curl_easy_setopt(e, CURLOPT_POSTFIELDS,
			                 r->body ? (const char *)r->body : "");
			curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
			                 (curl_off_t)(r->body ? r->body_len : 0));
		}
	}
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->headers);
	if (curl_multi_add_handle(c->multi, e) != CURLM_OK)
		return host->error_set(err, AKS_ERROR, "libcurl refused a request");
	r->active = true;
	return AKS_OK;
}

void dk_end(dk_conn *c, dk_req *r)
{
	if (r->active) {
		curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &r->status);
		curl_multi_remove_handle(c->multi, c->easy);
		r->active = false;
	}
	if (r->headers) {
		curl_slist_free_all(r->headers);
		r->headers = NULL;
	}
}

/* One step: let libcurl work, then wait for socket activity, the cancel
 * descriptor or the deadline. Sets r->done when the transfer ended. */
int dk_pump(dk_conn *c, dk_req *r, const aks_call *call, aks_error **err)
{
	const aks_host_api *host = c->prov->host;
	int running = 0;
	if (curl_multi_perform(c->multi, &running) != CURLM_OK)
		return host->error_set(err, AKS_ERROR, "libcurl failed");
	CURLMsg *m;
	int left;
	while ((m = curl_multi_info_read(c->multi, &left)))
		if (m->msg == CURLMSG_DONE && m->easy_handle == c->easy) {
			r->done = true;
			r->result = m->data.result;
		}
	if (r->done) {
		curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &r->status);
		return AKS_OK;
	}
	return aks_ctr_multi_wait(host, c->multi, call, DK_NAME, err);
}

int dk_request(dk_conn *c, dk_req *r, const aks_call *call, aks_error **err)
{
	int rc = dk_begin(c, r, err);
	if (rc != AKS_OK)
		return rc;
	while (rc == AKS_OK && !r->done)
		rc = dk_pump(c, r, call, err);
	dk_end(c, r);
	if (rc != AKS_OK)
		return rc;
	if (r->result != CURLE_OK && !r->aborted)
		return dk_unreachable(c->prov, r, err);
	return AKS_OK;
}
