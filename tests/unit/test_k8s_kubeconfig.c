/*
 * tests/unit/test_k8s_kubeconfig.c - the kubernetes plugin's kubeconfig and
 * in-cluster configuration reader: every field in its file and data forms,
 * relative paths, context selection, the search order, and the messages for
 * what is missing or wrong.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "k8s_pure.h"

static char dir[256];

static void write_file(const char *name, const char *text)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static char *path_of(const char *name)
{
	char *p = NULL;
	assert_true(asprintf(&p, "%s/%s", dir, name) > 0);
	return p;
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/test_k8s_kc.XXXXXX");
	assert_non_null(mkdtemp(dir));
	write_file("ca.crt", "-----BEGIN CERTIFICATE-----\nCAFILE\n-----END CERTIFICATE-----\n");
	write_file("client.crt", "CERTFILE\n");
	write_file("client.key", "KEYFILE\n");
	write_file("token", "  file-token-123\n\n");
	unsetenv("KUBECONFIG");
	unsetenv("KUBERNETES_SERVICE_HOST");
	unsetenv("KUBERNETES_SERVICE_PORT");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

/* base64 of "CADATA", "CERTDATA", "KEYDATA" */
static const char data_form[] = "apiVersion: v1\n"
                                "kind: Config\n"
                                "current-context: main\n"
                                "clusters:\n"
                                "- name: other\n"
                                "  cluster: {server: 'https://wrong:1'}\n"
                                "- name: c1\n"
                                "  cluster:\n"
                                "    server: https://127.0.0.1:16443/\n"
                                "    certificate-authority-data: Q0FEQVRB\n"
                                "    tls-server-name: kubernetes\n"
                                "contexts:\n"
                                "- name: main\n"
                                "  context: {cluster: c1, user: u1, namespace: sandboxes}\n"
                                "- name: tok\n"
                                "  context: {cluster: c2, user: u2}\n"
                                "- name: files\n"
                                "  context: {cluster: c2, user: u3}\n"
                                "users:\n"
                                "- name: u1\n"
                                "  user:\n"
                                "    client-certificate-data: Q0VSVERBVEE=\n"
                                "    client-key-data: S0VZREFUQQ==\n"
                                "- name: u2\n"
                                "  user: {token: abc.def}\n"
                                "- name: u3\n"
                                "  user:\n"
                                "    client-certificate: client.crt\n"
                                "    client-key: client.key\n"
                                "    tokenFile: token\n"
                                "- name: u4\n"
                                "  user:\n"
                                "    exec: {command: aws}\n"
                                "clusters_extra: 1\n";

static const char c2[] = "- name: c2\n"
                         "  cluster:\n"
                         "    server: http://10.0.0.1:8080\n"
                         "    certificate-authority: ca.crt\n"
                         "    insecure-skip-tls-verify: true\n";

/* data_form with cluster c2 inserted into clusters */
static char *full_config(void)
{
	const char *at = strstr(data_form, "contexts:\n");
	char *s = NULL;
	assert_true(asprintf(&s, "%.*s%s%s", (int)(at - data_form), data_form, c2, at) > 0);
	return s;
}

static void parse_ok(const char *text, const char *context, k8s_conn_cfg *c)
{
	k8s_err e = {0};
	char *p = path_of("config");
	int rc = k8s_kubeconfig_parse(text, strlen(text), p, context, c, &e);
	if (rc != AKS_OK)
		fail_msg("parse failed: %s", e.msg);
	free(p);
}

static void parse_fails(const char *text, const char *context, int code, const char *needle)
{
	k8s_err e = {0};
	k8s_conn_cfg c;
	char *p = path_of("config");
	int rc = k8s_kubeconfig_parse(text, strlen(text), p, context, &c, &e);
	assert_int_equal(rc, code);
	assert_int_equal(e.code, code);
	if (!strstr(e.msg, needle))
		fail_msg("message '%s' lacks '%s'", e.msg, needle);
	/* every message names the file */
	if (!strstr(e.msg, p))
		fail_msg("message '%s' lacks the file '%s'", e.msg, p);
	assert_null(c.server);
	free(p);
}

static void test_data_form(void **state)
{
	(void)state;
	char *text = full_config();
	k8s_conn_cfg c;
	parse_ok(text, NULL, &c);
	assert_string_equal(c.server, "https://127.0.0.1:16443");
	assert_string_equal(c.namespace, "sandboxes");
	assert_string_equal(c.tls_server_name, "kubernetes");
	assert_int_equal(c.ca.len, 6);
	assert_string_equal(c.ca.data, "CADATA");
	assert_string_equal(c.cert.data, "CERTDATA");
	assert_string_equal(c.key.data, "KEYDATA");
	assert_null(c.token);
	assert_false(c.insecure);
	assert_non_null(strstr(c.source, "context 'main'"));
	k8s_conn_cfg_free(&c);
	free(text);
}

static void test_token_and_insecure(void **state)
{
	(void)state;
	char *text = full_config();
	k8s_conn_cfg c;
	parse_ok(text, "tok", &c);
	assert_string_equal(c.server, "http://10.0.0.1:8080");
	assert_string_equal(c.token, "abc.def");
	assert_true(c.insecure);
	assert_null(c.namespace);
	assert_null(c.cert.data);
	/* the CA file, relative to the kubeconfig's directory */
	assert_non_null(c.ca.data);
	assert_non_null(strstr(c.ca.data, "CAFILE"));
	char *tok = k8s_conn_token(&c);
	assert_string_equal(tok, "abc.def");
	free(tok);
	k8s_conn_cfg_free(&c);
	free(text);
}

static void test_file_form(void **state)
{
	(void)state;
	char *text = full_config();
	k8s_conn_cfg c;
	parse_ok(text, "files", &c);
	assert_string_equal(c.cert.data, "CERTFILE\n");
	assert_string_equal(c.key.data, "KEYFILE\n");
	assert_string_equal(c.token, "file-token-123"); /* trimmed */
	char *tf = path_of("token");
	assert_string_equal(c.token_file, tf);
	/* a rotated token is picked up on the next connection */
	write_file("token", "rotated-456\n");
	char *tok = k8s_conn_token(&c);
	assert_string_equal(tok, "rotated-456");
	free(tok);
	write_file("token", "  file-token-123\n\n");
	free(tf);
	k8s_conn_cfg_free(&c);
	free(text);
}

static void test_errors(void **state)
{
	(void)state;
	char *text = full_config();
	parse_fails(text, "nope", AKS_ECONFIG, "context 'nope' is not defined");
	parse_fails("clusters: []\n", NULL, AKS_ECONFIG, "no current-context is set");
	parse_fails("current-context: a\ncontexts:\n- name: a\n  context: {cluster: x}\n", NULL,
	            AKS_ECONFIG, "cluster 'x' (of context 'a') is not defined");
	parse_fails("current-context: a\ncontexts:\n- name: a\n  context: {user: x}\n", NULL,
	            AKS_ECONFIG, "context 'a' names no cluster");
	parse_fails("current-context: a\ncontexts:\n- {name: a, context: {cluster: x}}\n"
	            "clusters:\n- {name: x, cluster: {insecure-skip-tls-verify: true}}\n",
	            NULL, AKS_ECONFIG, "cluster 'x' has no server");
	parse_fails("current-context: a\ncontexts:\n- {name: a, context: {cluster: x}}\n"
	            "clusters:\n- {name: x, cluster: {server: 'ftp://h'}}\n",
	            NULL, AKS_ECONFIG, "server 'ftp://h' is not an http(s):// URL");
	parse_fails("current-context: a\ncontexts:\n- {name: a, context: {cluster: x}}\n"
	            "clusters:\n- {name: x, cluster: {server: 'https://h', certificate-authority: "
	            "missing.crt}}\n",
	            NULL, AKS_ECONFIG, "certificate-authority");
	parse_fails("current-context: a\ncontexts:\n- {name: a, context: {cluster: x}}\n"
	            "clusters:\n- {name: x, cluster: {server: 'https://h', certificate-authority: "
	            "missing.crt}}\n",
	            NULL, AKS_ECONFIG, "missing.crt' cannot be read: No such file or directory");
	parse_fails("current-context: a\ncontexts:\n- {name: a, context: {cluster: x, user: u}}\n"
	            "clusters:\n- {name: x, cluster: {server: 'https://h'}}\n"
	            "users:\n- {name: u, user: {client-certificate-data: QUJD}}\n",
	            NULL, AKS_ECONFIG, "user 'u' has a client certificate but no client key");
	parse_fails("current-context: a\ncontexts:\n- {name: a, context: {cluster: x, user: u}}\n"
	            "clusters:\n- {name: x, cluster: {server: 'https://h'}}\n",
	            NULL, AKS_ECONFIG, "user 'u' (of context 'a') is not defined");
	parse_fails("current-context: a\ncontexts:\n- {name: a, context: {cluster: x, user: u}}\n"
	            "clusters:\n- {name: x, cluster: {server: 'https://h'}}\n"
	            "users:\n- {name: u, user: {exec: {command: aws}}}\n",
	            NULL, AKS_ECONFIG, "an exec plugin");
	parse_fails("current-context: a\ncontexts:\n- {name: a, context: {cluster: x, user: u}}\n"
	            "clusters:\n- {name: x, cluster: {server: 'https://h'}}\n"
	            "users:\n- {name: u, user: {tokenFile: /nonexistent/tok}}\n",
	            NULL, AKS_ECONFIG, "token file '/nonexistent/tok' cannot be read");
	parse_fails("current-context: a\ncontexts:\n- {name: a, context: {cluster: x}}\n"
	            "clusters:\n- {name: x, cluster: {server: 'https://h', "
	            "certificate-authority-data: 'not base64!'}}\n",
	            NULL, AKS_ECONFIG, "certificate-authority-data is not base64");
	parse_fails("a: [b\n", NULL, AKS_ECONFIG, "not valid YAML");
	parse_fails("- a\n- b\n", NULL, AKS_ECONFIG, "not a kubeconfig");
	free(text);
}

static void test_load_order(void **state)
{
	(void)state;
	char *text = full_config();
	write_file("config", text);
	write_file("other", "current-context: z\ncontexts:\n- {name: z, context: {cluster: y}}\n"
	                    "clusters:\n- {name: y, cluster: {server: 'https://other:6443'}}\n");
	char *cfg = path_of("config"), *other = path_of("other");
	k8s_conn_cfg c;
	k8s_err e = {0};

	/* 1. the configured path wins over KUBECONFIG */
	char *kenv = NULL;
	assert_true(asprintf(&kenv, ":%s:%s", other, cfg) > 0);
	setenv("KUBECONFIG", kenv, 1);
	assert_int_equal(k8s_conn_cfg_load(cfg, NULL, NULL, &c, &e), AKS_OK);
	assert_string_equal(c.server, "https://127.0.0.1:16443");
	k8s_conn_cfg_free(&c);

	/* 2. KUBECONFIG: its first entry */
	assert_int_equal(k8s_conn_cfg_load(NULL, NULL, NULL, &c, &e), AKS_OK);
	assert_string_equal(c.server, "https://other:6443");
	k8s_conn_cfg_free(&c);

	/* a missing KUBECONFIG file is an error naming it, not a silent fallback */
	setenv("KUBECONFIG", "/nonexistent/kc", 1);
	assert_int_equal(k8s_conn_cfg_load(NULL, NULL, NULL, &c, &e), AKS_ECONFIG);
	assert_non_null(strstr(e.msg, "/nonexistent/kc (from KUBECONFIG) cannot be read"));
	unsetenv("KUBECONFIG");

	/* 3. ~/.kube/config */
	char *home = NULL, *kube = NULL, *cmd = NULL;
	assert_true(asprintf(&home, "%s/home", dir) > 0);
	assert_true(asprintf(&kube, "%s/.kube", home) > 0);
	assert_int_equal(mkdir(home, 0700), 0);
	assert_int_equal(mkdir(kube, 0700), 0);
	assert_true(asprintf(&cmd, "cp '%s' '%s/config'", other, kube) > 0);
	assert_int_equal(system(cmd), 0);
	const char *saved_home = getenv("HOME");
	char *saved = saved_home ? strdup(saved_home) : NULL;
	setenv("HOME", home, 1);
	e.code = AKS_OK;
	assert_int_equal(k8s_conn_cfg_load(NULL, "z", NULL, &c, &e), AKS_OK);
	assert_string_equal(c.server, "https://other:6443");
	k8s_conn_cfg_free(&c);
	free(cmd);
	assert_true(asprintf(&cmd, "rm -rf '%s'", kube) > 0);
	assert_int_equal(system(cmd), 0);

	/* 4. nothing at all: the message says what was tried */
	e.code = AKS_OK;
	assert_int_equal(k8s_conn_cfg_load(NULL, NULL, NULL, &c, &e), AKS_ECONFIG);
	assert_non_null(strstr(e.msg, "no Kubernetes configuration found"));
	assert_non_null(strstr(e.msg, "/.kube/config does not exist"));
	assert_non_null(strstr(e.msg, "KUBERNETES_SERVICE_HOST is unset"));

	/* 5. in-cluster */
	char *sa = NULL;
	assert_true(asprintf(&sa, "%s/sa", dir) > 0);
	assert_int_equal(mkdir(sa, 0700), 0);
	write_file("sa/token", "sa-token-1\n");
	write_file("sa/ca.crt", "SACA\n");
	write_file("sa/namespace", "team-a\n");
	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "8443", 1);
	e.code = AKS_OK;
	assert_int_equal(k8s_conn_cfg_load(NULL, NULL, sa, &c, &e), AKS_OK);
	assert_string_equal(c.server, "https://10.96.0.1:8443");
	assert_string_equal(c.token, "sa-token-1");
	assert_string_equal(c.ca.data, "SACA\n");
	assert_string_equal(c.namespace, "team-a");
	assert_string_equal(c.source, "in-cluster configuration");
	k8s_conn_cfg_free(&c);
	setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
	unsetenv("KUBERNETES_SERVICE_PORT");
	assert_int_equal(k8s_conn_cfg_load(NULL, NULL, sa, &c, &e), AKS_OK);
	assert_string_equal(c.server, "https://[fd00::1]:443");
	k8s_conn_cfg_free(&c);
	/* in a pod, in-cluster comes before KUBECONFIG and ~/.kube/config (the seeds' order): a
	 * worker pod carrying a kubeconfig still talks to its own cluster */
	setenv("KUBECONFIG", other, 1);
	assert_int_equal(k8s_conn_cfg_load(NULL, NULL, sa, &c, &e), AKS_OK);
	assert_string_equal(c.source, "in-cluster configuration");
	assert_string_equal(c.server, "https://[fd00::1]:443");
	k8s_conn_cfg_free(&c);
	/* ...but a pod without a mounted token (automount off) is not in-cluster: KUBECONFIG */
	char *tokfile = NULL;
	assert_true(asprintf(&tokfile, "%s/token", sa) > 0);
	char *away = NULL;
	assert_true(asprintf(&away, "%s/token.away", dir) > 0);
	assert_int_equal(rename(tokfile, away), 0);
	assert_int_equal(k8s_conn_cfg_load(NULL, NULL, sa, &c, &e), AKS_OK);
	assert_string_equal(c.server, "https://other:6443");
	k8s_conn_cfg_free(&c);
	unsetenv("KUBECONFIG");
	e.code = AKS_OK;
	assert_int_equal(k8s_conn_cfg_load(NULL, NULL, sa, &c, &e), AKS_ECONFIG);
	assert_non_null(strstr(e.msg, "KUBERNETES_SERVICE_HOST is set but there is no service"));
	assert_int_equal(rename(away, tokfile), 0);
	free(tokfile);
	free(away);
	/* in-cluster without the service-account token: says which file */
	write_file("sa/token", "");
	e.code = AKS_OK;
	assert_int_equal(k8s_conn_cfg_load(NULL, NULL, sa, &c, &e), AKS_ECONFIG);
	assert_non_null(strstr(e.msg, "in-cluster configuration: token file"));
	assert_non_null(strstr(e.msg, "is empty"));
	unsetenv("KUBERNETES_SERVICE_HOST");

	if (saved)
		setenv("HOME", saved, 1);
	free(saved);
	free(sa);
	free(cmd);
	free(home);
	free(kube);
	free(kenv);
	free(cfg);
	free(other);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_data_form),  cmocka_unit_test(test_token_and_insecure),
	    cmocka_unit_test(test_file_form),  cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_load_order),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
