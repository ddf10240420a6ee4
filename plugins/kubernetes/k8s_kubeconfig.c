/*
 * plugins/kubernetes/k8s_kubeconfig.c - where the API server is and how to
 * authenticate: a kubeconfig file's selected context (libyaml), or the
 * in-cluster configuration of a pod's service account.
 *
 * Only what a client needs is read: the cluster's server, CA (file or data),
 * tls-server-name and insecure-skip-tls-verify; the user's client
 * certificate and key (file or data) and bearer token (token or tokenFile);
 * the context's namespace. Credential plugins (exec, auth-provider) are
 * refused by name: this plugin never runs programs on the host.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

#include "aks_base64.h"
#include "aks_file.h"
#include "k8s_pure.h"

/* Referenced files are small; anything larger is not a PEM or a token. */
#define MAX_REF_FILE   (4u << 20)
#define MAX_KUBECONFIG (16u << 20)

typedef struct kc {
	yaml_document_t doc;
	const char *path; /* for messages */
	char *dir;        /* anchors relative paths */
	k8s_err *e;
} kc;

static yaml_node_t *node(kc *k, int id)
{
	return id ? yaml_document_get_node(&k->doc, id) : NULL;
}

static const char *scalar(yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* A mapping's value for key, or NULL. */
static yaml_node_t *get(kc *k, yaml_node_t *map, const char *key)
{
	if (!map || map->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
	     p++) {
		const char *s = scalar(node(k, p->key));
		if (s && strcmp(s, key) == 0)
			return node(k, p->value);
	}
	return NULL;
}

static const char *get_str(kc *k, yaml_node_t *map, const char *key)
{
	const char *s = scalar(get(k, map, key));
	return s && *s ? s : NULL;
}

static bool truthy(const char *s)
{
	return s && (strcmp(s, "true") == 0 || strcmp(s, "True") == 0 || strcmp(s, "TRUE") == 0 ||
	             strcmp(s, "yes") == 0 || strcmp(s, "on") == 0);
}

/* The entry of list `section` (clusters, users, contexts) named `name`: its
 * inner mapping (`inner`: cluster, user, context). */
static yaml_node_t *find_named(kc *k, yaml_node_t *root, const char *section, const char *inner,
                               const char *name)
{
	yaml_node_t *list = get(k, root, section);
	if (!list || list->type != YAML_SEQUENCE_NODE)
		return NULL;
	for (yaml_node_item_t *it = list->data.sequence.items.start;
	     it < list->data.sequence.items.top; it++) {
		yaml_node_t *entry = node(k, *it);
		const char *n = get_str(k, entry, "name");
		if (n && strcmp(n, name) == 0) {
			yaml_node_t *v = get(k, entry, inner);
			/* "cluster: {}" and an absent mapping both mean an empty entry */
			return v && v->type == YAML_MAPPING_NODE ? v : entry;
		}
	}
	return NULL;
}

static char *resolve(kc *k, const char *p)
{
	char *out = NULL;
	if (p[0] == '/' || !k->dir)
		return strdup(p);
	if (asprintf(&out, "%s/%s", k->dir, p) < 0)
		return NULL;
	return out;
}

/* file or data form of one PEM item into blob. */
static int load_pem(kc *k, yaml_node_t *m, const char *file_key, const char *data_key,
                    const char *owner, k8s_blob *blob)
{
	const char *data = get_str(k, m, data_key);
	const char *file = get_str(k, m, file_key);
	if (data) {
		unsigned char *bytes = NULL;
		int rc =
		    aks__base64_decode(data, strlen(data), AKS_BASE64_LOOSE, &bytes, &blob->len);
		if (rc == AKS_ENOMEM)
			return k8s_err_set(k->e, rc, "out of memory");
		if (rc != AKS_OK)
			return k8s_err_set(k->e, AKS_ECONFIG, "kubeconfig %s: %s: %s is not base64",
			                   k->path, owner, data_key);
		blob->data = (char *)bytes;
		if (!blob->len) {
			free(blob->data);
			blob->data = NULL;
			return k8s_err_set(k->e, AKS_ECONFIG, "kubeconfig %s: %s: %s is empty",
			                   k->path, owner, data_key);
		}
		return AKS_OK;
	}
	if (!file)
		return AKS_OK;
	char *p = resolve(k, file);
	if (!p)
		return k8s_err_set(k->e, AKS_ENOMEM, "out of memory");
	blob->data = aks__file_read(p, MAX_REF_FILE, &blob->len);
	int rc = AKS_OK;
	if (!blob->data)
		rc = k8s_err_set(k->e, AKS_ECONFIG, "kubeconfig %s: %s: %s '%s' cannot be read: %s",
		                 k->path, owner, file_key, p, strerror(errno));
	free(p);
	return rc;
}

static char *trimmed(const char *s, size_t n)
{
	while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	while (n && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r'))
		s++, n--;
	return strndup(s, n);
}

static int read_token_file(const char *path, char **token, k8s_err *e, const char *what)
{
	size_t n = 0;
	char *t = aks__file_read(path, MAX_REF_FILE, &n);
	if (!t)
		return k8s_err_set(e, AKS_ECONFIG, "%s: token file '%s' cannot be read: %s", what,
		                   path, strerror(errno));
	*token = trimmed(t, n);
	free(t);
	if (!*token)
		return k8s_err_set(e, AKS_ENOMEM, "out of memory");
	if (!**token) {
		free(*token);
		*token = NULL;
		return k8s_err_set(e, AKS_ECONFIG, "%s: token file '%s' is empty", what, path);
	}
	return AKS_OK;
}

static bool valid_server(const char *s)
{
	return (strncmp(s, "https://", 8) == 0 && s[8]) || (strncmp(s, "http://", 7) == 0 && s[7]);
}

static int set_server(k8s_conn_cfg *out, const char *s, k8s_err *e)
{
	out->server = strdup(s);
	if (!out->server)
		return k8s_err_set(e, AKS_ENOMEM, "out of memory");
	size_t n = strlen(out->server);
	while (n > 8 && out->server[n - 1] == '/')
		out->server[--n] = '\0';
	return AKS_OK;
}

static int parse_doc(kc *k, const char *context, k8s_conn_cfg *out)
{
	yaml_node_t *root = yaml_document_get_root_node(&k->doc);
	if (!root || root->type != YAML_MAPPING_NODE)
		return k8s_err_set(k->e, AKS_ECONFIG,
		                   "kubeconfig %s: not a kubeconfig (no mapping)", k->path);
	const char *ctx_name = context && *context ? context : get_str(k, root, "current-context");
	if (!ctx_name)
		return k8s_err_set(
		    k->e, AKS_ECONFIG,
		    "kubeconfig %s: no current-context is set (set one with `kubectl "
		    "config use-context NAME`, or the plugin's context: key)",
		    k->path);
	yaml_node_t *ctx = find_named(k, root, "contexts", "context", ctx_name);
	if (!ctx)
		return k8s_err_set(k->e, AKS_ECONFIG, "kubeconfig %s: context '%s' is not defined",
		                   k->path, ctx_name);
	const char *cluster_name = get_str(k, ctx, "cluster");
	const char *user_name = get_str(k, ctx, "user");
	const char *ns = get_str(k, ctx, "namespace");
	if (!cluster_name)
		return k8s_err_set(k->e, AKS_ECONFIG,
		                   "kubeconfig %s: context '%s' names no cluster", k->path,
		                   ctx_name);
	yaml_node_t *cluster = find_named(k, root, "clusters", "cluster", cluster_name);
	if (!cluster)
		return k8s_err_set(k->e, AKS_ECONFIG,
		                   "kubeconfig %s: cluster '%s' (of context '%s') is not defined",
		                   k->path, cluster_name, ctx_name);
	if (asprintf(&out->source, "kubeconfig %s (context '%s')", k->path, ctx_name) < 0) {
		out->source = NULL;
		return k8s_err_set(k->e, AKS_ENOMEM, "out of memory");
	}
	const char *server = get_str(k, cluster, "server");
	if (!server)
		return k8s_err_set(k->e, AKS_ECONFIG, "kubeconfig %s: cluster '%s' has no server",
		                   k->path, cluster_name);
	if (!valid_server(server))
		return k8s_err_set(
		    k->e, AKS_ECONFIG,
		    "kubeconfig %s: cluster '%s': server '%s' is not an http(s):// URL", k->path,
		    cluster_name, server);
	int rc = set_server(out, server, k->e);
	if (rc != AKS_OK)
		return rc;
	if (ns && !(out->namespace = strdup(ns)))
		return k8s_err_set(k->e, AKS_ENOMEM, "out of memory");
	out->insecure = truthy(scalar(get(k, cluster, "insecure-skip-tls-verify")));
	const char *sni = get_str(k, cluster, "tls-server-name");
	if (sni && !(out->tls_server_name = strdup(sni)))
		return k8s_err_set(k->e, AKS_ENOMEM, "out of memory");
	char owner[300];
	snprintf(owner, sizeof(owner), "cluster '%s'", cluster_name);
	if ((rc = load_pem(k, cluster, "certificate-authority", "certificate-authority-data", owner,
	                   &out->ca)) != AKS_OK)
		return rc;
	if (!user_name)
		return AKS_OK; /* anonymous: allowed, the server decides */
	yaml_node_t *user = find_named(k, root, "users", "user", user_name);
	if (!user)
		return k8s_err_set(k->e, AKS_ECONFIG,
		                   "kubeconfig %s: user '%s' (of context '%s') is not defined",
		                   k->path, user_name, ctx_name);
	snprintf(owner, sizeof(owner), "user '%s'", user_name);
	if (get(k, user, "exec") || get(k, user, "auth-provider"))
		return k8s_err_set(k->e, AKS_ECONFIG,
		                   "kubeconfig %s: user '%s' gets its credentials from %s, which "
		                   "aksandbox does not run; give it a token, tokenFile or client "
		                   "certificate",
		                   k->path, user_name,
		                   get(k, user, "exec") ? "an exec plugin" : "an auth-provider");
	if ((rc = load_pem(k, user, "client-certificate", "client-certificate-data", owner,
	                   &out->cert)) != AKS_OK ||
	    (rc = load_pem(k, user, "client-key", "client-key-data", owner, &out->key)) != AKS_OK)
		return rc;
	if (!out->cert.data != !out->key.data)
		return k8s_err_set(k->e, AKS_ECONFIG,
		                   "kubeconfig %s: user '%s' has a client %s but no client %s",
		                   k->path, user_name, out->cert.data ? "certificate" : "key",
		                   out->cert.data ? "key (client-key or client-key-data)"
		                                  : "certificate (client-certificate or "
		                                    "client-certificate-data)");
	const char *token = get_str(k, user, "token");
	const char *token_file = get_str(k, user, "tokenFile");
	if (token) {
		if (!(out->token = strdup(token)))
			return k8s_err_set(k->e, AKS_ENOMEM, "out of memory");
	} else if (token_file) {
		if (!(out->token_file = resolve(k, token_file)))
			return k8s_err_set(k->e, AKS_ENOMEM, "out of memory");
		char what[400];
		snprintf(what, sizeof(what), "kubeconfig %s: user '%s'", k->path, user_name);
		if ((rc = read_token_file(out->token_file, &out->token, k->e, what)) != AKS_OK)
			return rc;
	}
	if (get(k, user, "username") && !out->token && !out->cert.data)
		return k8s_err_set(
		    k->e, AKS_ECONFIG,
		    "kubeconfig %s: user '%s' uses basic authentication (username and "
		    "password), which Kubernetes removed in 1.19; use a token or a "
		    "client certificate",
		    k->path, user_name);
	return AKS_OK;
}

void k8s_conn_cfg_free(k8s_conn_cfg *c)
{
	if (!c)
		return;
	free(c->source);
	free(c->server);
	free(c->namespace);
	free(c->ca.data);
	free(c->cert.data);
	free(c->key.data);
	if (c->token) /* do not leave a credential in freed memory */
		memset(c->token, 0, strlen(c->token));
	free(c->token);
	free(c->token_file);
	free(c->tls_server_name);
	memset(c, 0, sizeof(*c));
}

int k8s_kubeconfig_parse(const char *text, size_t len, const char *path, const char *context,
                         k8s_conn_cfg *out, k8s_err *e)
{
	memset(out, 0, sizeof(*out));
	kc k = {.path = path ? path : "(text)", .e = e};
	if (path) {
		const char *slash = strrchr(path, '/');
		k.dir =
		    slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
		if (!k.dir)
			return k8s_err_set(e, AKS_ENOMEM, "out of memory");
	}
	yaml_parser_t parser;
	if (!yaml_parser_initialize(&parser)) {
		free(k.dir);
		return k8s_err_set(e, AKS_ENOMEM, "out of memory");
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	int rc;
	if (!yaml_parser_load(&parser, &k.doc)) {
		rc = k8s_err_set(e, AKS_ECONFIG, "kubeconfig %s: not valid YAML: %s at line %zu",
		                 k.path, parser.problem ? parser.problem : "parse error",
		                 parser.problem_mark.line + 1);
		yaml_parser_delete(&parser);
		free(k.dir);
		return rc;
	}
	yaml_parser_delete(&parser);
	rc = parse_doc(&k, context, out);
	yaml_document_delete(&k.doc);
	free(k.dir);
	if (rc != AKS_OK)
		k8s_conn_cfg_free(out);
	return rc;
}

/* ---- finding the configuration ------------------------------------------------------ */

static int load_file(const char *path, const char *context, const char *why, k8s_conn_cfg *out,
                     k8s_err *e)
{
	size_t n = 0;
	char *text = aks__file_read(path, MAX_KUBECONFIG, &n);
	if (!text)
		return k8s_err_set(e, AKS_ECONFIG, "kubeconfig %s (%s) cannot be read: %s", path,
		                   why, strerror(errno));
	int rc = k8s_kubeconfig_parse(text, n, path, context, out, e);
	free(text);
	return rc;
}

static int in_cluster(const char *sa_dir, k8s_conn_cfg *out, k8s_err *e)
{
	memset(out, 0, sizeof(*out));
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	char *tok = NULL, *ca = NULL, *nsf = NULL;
	int rc = AKS_OK;
	if (asprintf(&tok, "%s/token", sa_dir) < 0 || asprintf(&ca, "%s/ca.crt", sa_dir) < 0 ||
	    asprintf(&nsf, "%s/namespace", sa_dir) < 0) {
		rc = k8s_err_set(e, AKS_ENOMEM, "out of memory");
		goto out;
	}
	bool v6 = strchr(host, ':') != NULL;
	if (asprintf(&out->server, "https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "",
	             port && *port ? port : "443") < 0 ||
	    !(out->source = strdup("in-cluster configuration")) ||
	    !(out->token_file = strdup(tok))) {
		out->server = NULL;
		rc = k8s_err_set(e, AKS_ENOMEM, "out of memory");
		goto out;
	}
	if ((rc = read_token_file(tok, &out->token, e, "in-cluster configuration")) != AKS_OK)
		goto out;
	out->ca.data = aks__file_read(ca, MAX_REF_FILE, &out->ca.len);
	if (!out->ca.data) {
		rc = k8s_err_set(e, AKS_ECONFIG,
		                 "in-cluster configuration: the CA '%s' cannot be read: %s", ca,
		                 strerror(errno));
		goto out;
	}
	size_t n = 0;
	char *ns = aks__file_read(nsf, 4096, &n);
	if (ns) {
		out->namespace = trimmed(ns, n);
		free(ns);
		if (out->namespace && !*out->namespace) {
			free(out->namespace);
			out->namespace = NULL;
		}
	}
out:
	free(tok);
	free(ca);
	free(nsf);
	if (rc != AKS_OK)
		k8s_conn_cfg_free(out);
	return rc;
}

/* A pod's environment: the API server's address and its service account's token. Without
 * the token (automountServiceAccountToken: false) there is no in-cluster configuration. */
static bool in_a_pod(const char *sa_dir)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	if (!host || !*host)
		return false;
	char *tok = NULL;
	if (asprintf(&tok, "%s/token", sa_dir) < 0)
		return true; /* let in_cluster() report the shortage */
	bool found = access(tok, F_OK) == 0;
	free(tok);
	return found;
}

/*
 * kubeconfig: null means, as in the seeds and the official clients' load order, the in-cluster
 * configuration first, then KUBECONFIG, then ~/.kube/config: a worker pod that happens to
 * carry a kubeconfig still talks to its own cluster. A broken in-cluster configuration (an
 * empty token, an unreadable CA) is an error, not a reason to try another cluster.
 */
int k8s_conn_cfg_load(const char *configured, const char *context, const char *sa_dir,
                      k8s_conn_cfg *out, k8s_err *e)
{
	memset(out, 0, sizeof(*out));
	if (!sa_dir)
		sa_dir = K8S_SA_DIR;
	if (configured && *configured)
		return load_file(configured, context, "the plugin's kubeconfig key", out, e);
	if (in_a_pod(sa_dir))
		return in_cluster(sa_dir, out, e);
	const char *env = getenv("KUBECONFIG");
	if (env && *env) {
		/* kubectl merges the list; we use its first non-empty entry */
		const char *p = env;
		while (*p == ':')
			p++;
		size_t n = strcspn(p, ":");
		if (n) {
			char *first = strndup(p, n);
			if (!first)
				return k8s_err_set(e, AKS_ENOMEM, "out of memory");
			int rc = load_file(first, context, "from KUBECONFIG", out, e);
			free(first);
			return rc;
		}
	}
	const char *home = getenv("HOME");
	char *def = NULL;
	if (home && *home && asprintf(&def, "%s/.kube/config", home) < 0)
		return k8s_err_set(e, AKS_ENOMEM, "out of memory");
	struct stat st;
	if (def && stat(def, &st) == 0) {
		int rc = load_file(def, context, "the default kubeconfig", out, e);
		free(def);
		return rc;
	}
	const char *h = getenv("KUBERNETES_SERVICE_HOST");
	int rc = k8s_err_set(e, AKS_ECONFIG,
	                     "no Kubernetes configuration found: the plugin's kubeconfig key and "
	                     "KUBECONFIG are unset, %s%s does not exist, and this is not a pod "
	                     "(%s); set kubeconfig: to a kubeconfig file",
	                     def ? def : "~/.kube/config", def ? "" : " (HOME is unset)",
	                     h && *h ? "KUBERNETES_SERVICE_HOST is set but there is no service "
	                               "account token"
	                             : "KUBERNETES_SERVICE_HOST is unset");
	free(def);
	return rc;
}

char *k8s_conn_token(const k8s_conn_cfg *c)
{
	if (c->token_file) {
		size_t n = 0;
		char *t = aks__file_read(c->token_file, MAX_REF_FILE, &n);
		if (t) {
			char *r = trimmed(t, n);
			free(t);
			if (r && *r)
				return r;
			free(r);
		}
	}
	return c->token ? strdup(c->token) : NULL;
}
