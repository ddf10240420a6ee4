/*
 * tests/unit/test_k8s_rest.c - the kubernetes plugin's REST client against a
 * canned HTTP server on loopback (a thread here): the bearer token, the
 * impersonation headers (one Impersonate-Group per group), the per-identity
 * client cache, and the messages for 401, 403 and an unreachable server.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/plugin/host_api.h"
#include "k8s_internal.h"

/* ---- a one-request-at-a-time HTTP server ----------------------------------------------- */

static int lfd;
static int port;
static pthread_t thread;
static char request[65536]; /* the last request's head */
static const char *status_line = "200 OK";
static const char *body = "{}";

static void *serve(void *arg)
{
	(void)arg;
	for (;;) {
		int c = accept(lfd, NULL, NULL);
		if (c < 0)
			return NULL;
		size_t n = 0;
		while (n < sizeof(request) - 1) {
			ssize_t r = read(c, request + n, sizeof(request) - 1 - n);
			if (r <= 0)
				break;
			n += (size_t)r;
			request[n] = '\0';
			/* a request head ends with an empty line; a TLS hello never does */
			if (strstr(request, "\r\n\r\n") || request[0] == 0x16)
				break;
		}
		char resp[4096];
		int len = snprintf(resp, sizeof(resp),
		                   "HTTP/1.1 %s\r\nContent-Type: application/json\r\n"
		                   "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
		                   status_line, strlen(body), body);
		if (write(c, resp, (size_t)len) < 0)
			perror("write");
		close(c);
	}
}

static aks_provider_impl prov;

static int setup(void **state)
{
	(void)state;
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(lfd, 16), 0);
	socklen_t sl = sizeof(a);
	getsockname(lfd, (struct sockaddr *)&a, &sl);
	port = ntohs(a.sin_port);
	pthread_create(&thread, NULL, serve, NULL);
	curl_global_init(CURL_GLOBAL_ALL);
	prov.host = aks__host_api();
	pthread_mutex_init(&prov.lock, NULL);
	assert_true(asprintf(&prov.conn.server, "http://127.0.0.1:%d", port) > 0);
	prov.conn.source = strdup("kubeconfig /k (context 'c')");
	prov.conn.token = strdup("sekret-token");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	shutdown(lfd, SHUT_RDWR);
	close(lfd);
	pthread_join(thread, NULL);
	k8s_clients_free(&prov);
	k8s_conn_cfg_free(&prov.conn);
	pthread_mutex_destroy(&prov.lock);
	curl_global_cleanup();
	return 0;
}

static int get(k8s_client *c, const char *method, const char *path, k8s_req *r, aks_error **err)
{
	memset(r, 0, sizeof(*r));
	r->method = method;
	r->path = path;
	return k8s_request(c, r, NULL, err);
}

/* Every header line of the last request named `name`, joined by '|'. */
static char *headers_named(const char *name)
{
	static char out[4096];
	out[0] = '\0';
	size_t nl = strlen(name);
	for (const char *p = request; (p = strstr(p, "\r\n")); p += 2)
		if (strncasecmp(p + 2, name, nl) == 0 && p[2 + nl] == ':') {
			const char *v = p + 2 + nl + 1;
			while (*v == ' ')
				v++;
			size_t vl = strcspn(v, "\r");
			snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%.*s",
			         out[0] ? "|" : "", (int)vl, v);
		}
	return out;
}

static void test_agent_identity(void **state)
{
	(void)state;
	k8s_client *c = NULL, *again = NULL;
	aks_error *err = NULL;
	assert_int_equal(k8s_client_for(&prov, NULL, &c, &err), AKS_OK);
	assert_int_equal(k8s_client_own(&prov, &again, &err), AKS_OK);
	assert_ptr_equal(c, again); /* one client per identity */
	status_line = "200 OK";
	body = "{\"kind\":\"Pod\"}";
	k8s_req r;
	assert_int_equal(get(c, "GET", "/api/v1/namespaces/ns/pods/p", &r, &err), AKS_OK);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.resp.data, "{\"kind\":\"Pod\"}");
	assert_non_null(strstr(request, "GET /api/v1/namespaces/ns/pods/p HTTP/1.1\r\n"));
	assert_string_equal(headers_named("Authorization"), "Bearer sekret-token");
	assert_string_equal(headers_named("Impersonate-User"), "");
	assert_string_equal(headers_named("Impersonate-Group"), "");
	k8s_req_free(&r);
}

static void test_impersonation(void **state)
{
	(void)state;
	const char *groups[] = {"team-a", "team b", "third", NULL};
	aks_principal p = {
	    AKS_PRINCIPAL_VERSION, sizeof(p), AKS_IDENTITY_USER, "alice", groups, NULL};
	k8s_client *c = NULL, *same = NULL, *other = NULL;
	aks_error *err = NULL;
	assert_int_equal(k8s_client_for(&prov, &p, &c, &err), AKS_OK);
	assert_int_equal(k8s_client_for(&prov, &p, &same, &err), AKS_OK);
	assert_ptr_equal(c, same);
	k8s_req r;
	status_line = "201 Created";
	body = "{}";
	assert_int_equal(get(c, "GET", "/api/v1/namespaces/ns/pods", &r, &err), AKS_OK);
	k8s_req_free(&r);
	assert_string_equal(headers_named("Impersonate-User"), "alice");
	/* every group its own header, in order */
	assert_string_equal(headers_named("Impersonate-Group"), "team-a|team b|third");
	assert_string_equal(headers_named("Authorization"), "Bearer sekret-token");

	/* credentials win over subject and groups; a different identity, a different client */
	const char *creds[] = {"user", "bob", "groups", " g1 , g2,", NULL};
	aks_principal q = {
	    AKS_PRINCIPAL_VERSION, sizeof(q), AKS_IDENTITY_USER, "alice", groups, creds};
	assert_int_equal(k8s_client_for(&prov, &q, &other, &err), AKS_OK);
	assert_ptr_not_equal(other, c);
	assert_int_equal(get(other, "GET", "/api/v1/namespaces/ns/pods", &r, &err), AKS_OK);
	k8s_req_free(&r);
	assert_string_equal(headers_named("Impersonate-User"), "bob");
	assert_string_equal(headers_named("Impersonate-Group"), "g1|g2");
	char who[256];
	k8s_client_who(other, who, sizeof(who));
	assert_string_equal(who, "user 'bob' (groups 'g1', 'g2')");

	/* no user at all */
	aks_principal none = {
	    AKS_PRINCIPAL_VERSION, sizeof(none), AKS_IDENTITY_USER, NULL, NULL, NULL};
	assert_int_equal(k8s_client_for(&prov, &none, &other, &err), AKS_EPOLICY);
	assert_string_equal(aks_error_message(err),
	                    "user-mode principal carries no user identity to impersonate (set "
	                    "credentials['user'] or subject)");
	aks_error_free(err);
	err = NULL;
	/* a header injection attempt */
	aks_principal evil = {AKS_PRINCIPAL_VERSION,
	                      sizeof(evil),
	                      AKS_IDENTITY_USER,
	                      "x\r\nImpersonate-Group: system:masters",
	                      NULL,
	                      NULL};
	assert_int_equal(k8s_client_for(&prov, &evil, &other, &err), AKS_EPOLICY);
	aks_error_free(err);
}

static void test_api_errors(void **state)
{
	(void)state;
	k8s_client *c = NULL;
	aks_error *err = NULL;
	const char *groups[] = {"g", NULL};
	aks_principal p = {
	    AKS_PRINCIPAL_VERSION, sizeof(p), AKS_IDENTITY_USER, "bob", groups, NULL};
	assert_int_equal(k8s_client_for(&prov, &p, &c, &err), AKS_OK);
	status_line = "403 Forbidden";
	body = "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"pods is forbidden: User "
	       "\\\"bob\\\" cannot create resource \\\"pods\\\" in API group \\\"\\\" in the "
	       "namespace \\\"ns\\\"\",\"reason\":\"Forbidden\",\"code\":403}";
	k8s_req r;
	assert_int_equal(get(c, "POST", "/api/v1/namespaces/ns/pods", &r, &err), AKS_OK);
	assert_int_equal(r.status, 403);
	assert_int_equal(k8s_api_error(c, &r, AKS_EPROVISION, "cannot create the pod", &err),
	                 AKS_EPROVISION);
	assert_string_equal(
	    aks_error_message(err),
	    "kubernetes: cannot create the pod: forbidden (403): pods is forbidden: "
	    "User \"bob\" cannot create resource \"pods\" in API group \"\" in the "
	    "namespace \"ns\"; user 'bob' (groups 'g') needs RBAC 'create' on 'pods' "
	    "in namespace 'ns'");
	aks_error_free(err);
	err = NULL;
	k8s_req_free(&r);
	/* the verb and resource of a subresource GET */
	assert_int_equal(
	    get(c, "GET", "/api/v1/namespaces/ns/pods/p1/exec?command=sh&stdout=true", &r, &err),
	    AKS_OK);
	k8s_api_error(c, &r, AKS_EPROVISION, "exec", &err);
	assert_non_null(strstr(aks_error_message(err), "needs RBAC 'get' on 'pods/exec' in "
	                                               "namespace 'ns'"));
	aks_error_free(err);
	err = NULL;
	k8s_req_free(&r);

	k8s_client *own = NULL;
	assert_int_equal(k8s_client_own(&prov, &own, &err), AKS_OK);
	status_line = "401 Unauthorized";
	body = "{\"kind\":\"Status\",\"message\":\"Unauthorized\",\"code\":401}";
	assert_int_equal(get(own, "GET", "/api/v1/namespaces/ns/pods/p", &r, &err), AKS_OK);
	k8s_api_error(own, &r, AKS_EPROVISION, "cannot read the sandbox pod", &err);
	assert_string_equal(aks_error_message(err),
	                    "kubernetes: cannot read the sandbox pod: the API server rejected the "
	                    "credentials of kubeconfig /k (context 'c') (401 Unauthorized: "
	                    "Unauthorized); check the token or client certificate");
	aks_error_free(err);
	err = NULL;
	k8s_req_free(&r);
	/* a body that is not a Status */
	status_line = "500 Internal Server Error";
	body = "boom\n";
	assert_int_equal(get(own, "DELETE", "/api/v1/namespaces/ns/pods/p", &r, &err), AKS_OK);
	k8s_api_error(own, &r, AKS_EPROVISION, "cannot delete the pod", &err);
	assert_string_equal(aks_error_message(err),
	                    "kubernetes: cannot delete the pod: boom (HTTP 500)");
	aks_error_free(err);
	k8s_req_free(&r);
}

static void test_unreachable(void **state)
{
	(void)state;
	/* a port nobody listens on: bind one, then close it */
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	bind(s, (struct sockaddr *)&a, sizeof(a));
	socklen_t sl = sizeof(a);
	getsockname(s, (struct sockaddr *)&a, &sl);
	close(s);
	aks_provider_impl p2 = prov;
	p2.clients = NULL;
	pthread_mutex_init(&p2.lock, NULL);
	char *srv = NULL;
	assert_true(asprintf(&srv, "https://127.0.0.1:%d", ntohs(a.sin_port)) > 0);
	p2.conn.server = srv;
	k8s_client *c = NULL;
	aks_error *err = NULL;
	assert_int_equal(k8s_client_own(&p2, &c, &err), AKS_OK);
	k8s_req r;
	assert_int_equal(get(c, "GET", "/version", &r, &err), AKS_EPROVISION);
	char *want = NULL;
	assert_true(asprintf(&want, "kubernetes: cannot reach the API server at %s: ", srv) > 0);
	assert_true(strncmp(aks_error_message(err), want, strlen(want)) == 0);
	assert_non_null(strstr(aks_error_message(err), "(from kubeconfig /k (context 'c'))"));
	free(want);
	aks_error_free(err);
	err = NULL;
	k8s_req_free(&r);
	/* TLS to a plain HTTP server: the handshake fails, said as such */
	free(srv);
	assert_true(asprintf(&srv, "https://127.0.0.1:%d", port) > 0);
	p2.conn.server = srv;
	status_line = "200 OK";
	assert_int_equal(get(c, "GET", "/version", &r, &err), AKS_EPROVISION);
	assert_non_null(strstr(aks_error_message(err), "TLS"));
	aks_error_free(err);
	k8s_req_free(&r);
	k8s_clients_free(&p2);
	pthread_mutex_destroy(&p2.lock);
	free(srv);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_agent_identity),
	    cmocka_unit_test(test_impersonation),
	    cmocka_unit_test(test_api_errors),
	    cmocka_unit_test(test_unreachable),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
