/*
 * tests/integration/dynamodb/ddb_tool.c - one store operation of the dynamodb plugin from
 * the command line, through the public API only (the plugin's operation table driven as
 * the host drives it), for the tests that check what the plugin writes and how it fails:
 * dynamodb-sdk.test (the official AWS SDK reads the items back) and dynamodb-errors.test.
 *
 *   ddb_tool PLUGIN CONFIG.yaml put NS KEY VALUE
 *   ddb_tool PLUGIN CONFIG.yaml expiring NS KEY VALUE TTL_SECONDS
 *   ddb_tool PLUGIN CONFIG.yaml get NS KEY           the value in hex; exit 3 when absent
 *   ddb_tool PLUGIN CONFIG.yaml del NS KEY
 *   ddb_tool PLUGIN CONFIG.yaml incr NS KEY          a decimal counter, +1 (absent: 0)
 *   ddb_tool PLUGIN CONFIG.yaml scan NS PREFIX       "KEYHEX VALUEHEX" lines
 *   ddb_tool PLUGIN CONFIG.yaml namespaces           one hex name a line
 *   ddb_tool PLUGIN CONFIG.yaml lock NS KEY WAIT HOLD  takes the lock (waiting at most WAIT
 *                                                    seconds), prints "locked", holds it
 *                                                    HOLD seconds, releases it
 *
 * A name or value written "x:<hex>" is those bytes, "n:<count>" that many bytes 'v' (a
 * value too long for a command line); anything else is itself. A failure is
 * "error <code>: <message>" on stderr and exit 1 (exit 4 for AKS_ETIMEOUT).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <aksandbox/aksandbox.h>
#include <aksandbox/store.h>

static const aks_store_ops *ops;
static aks_store_impl *store;

/* "x:<hex>" decoded in place (the bytes must hold no NUL but for values, which carry a
 * length); anything else as it is. */
static const char *arg(char *a, size_t *len)
{
	if (strncmp(a, "n:", 2) == 0) {
		static char *big;
		*len = strtoul(a + 2, NULL, 10);
		free(big);
		if (!(big = malloc(*len + 1)))
			exit(2);
		memset(big, 'v', *len);
		big[*len] = '\0';
		return big;
	}
	if (strncmp(a, "x:", 2) != 0) {
		*len = strlen(a);
		return a;
	}
	size_t n = 0;
	for (const char *h = a + 2; h[0] && h[1]; h += 2) {
		unsigned v;
		if (sscanf(h, "%2x", &v) != 1) {
			fprintf(stderr, "bad hex: %s\n", a);
			exit(2);
		}
		a[n++] = (char)v;
	}
	a[n] = '\0';
	*len = n;
	return a;
}

static void hex(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		printf("%02x", (unsigned char)p[i]);
}

static int fail(int rc, aks_error *err)
{
	fprintf(stderr, "error %d: %s\n", rc, err ? aks_error_message(err) : "(no message)");
	aks_error_free(err);
	return rc == AKS_ETIMEOUT ? 4 : 1;
}

static int print_value(void *ctx, const char *key, const char *value, size_t len)
{
	(void)ctx, (void)key;
	hex(value, len);
	printf("\n");
	return AKS_OK;
}

static int print_record(void *ctx, const char *key, const char *value, size_t len)
{
	(void)ctx;
	hex(key, strlen(key));
	printf(" ");
	hex(value, len);
	printf("\n");
	return AKS_OK;
}

static int print_name(void *ctx, const char *ns)
{
	(void)ctx;
	hex(ns, strlen(ns));
	printf("\n");
	return AKS_OK;
}

typedef struct put_ctx {
	const char *value;
	size_t len;
	int action;
	char buf[32];
} put_ctx;

static int put_fn(void *ctx, const char *value, size_t len, int *action, const char **nv,
                  size_t *nlen, aks_error **err)
{
	(void)value, (void)len, (void)err;
	put_ctx *p = ctx;
	*action = p->action;
	*nv = p->value;
	*nlen = p->len;
	return AKS_OK;
}

static int incr_fn(void *ctx, const char *value, size_t len, int *action, const char **nv,
                   size_t *nlen, aks_error **err)
{
	(void)err;
	put_ctx *p = ctx;
	char tmp[32];
	snprintf(tmp, sizeof(tmp), "%.*s", (int)(len < 31 ? len : 31), value ? value : "0");
	snprintf(p->buf, sizeof(p->buf), "%ld", strtol(tmp, NULL, 10) + 1);
	*action = AKS_STORE_PUT;
	*nv = p->buf;
	*nlen = strlen(p->buf);
	return AKS_OK;
}

static int run(int argc, char **argv)
{
	const char *op = argv[3];
	aks_error *err = NULL;
	size_t l1 = 0, l2 = 0, l3 = 0;
	int rc;
	if (strcmp(op, "put") == 0 && argc == 7) {
		const char *ns = arg(argv[4], &l1), *key = arg(argv[5], &l2);
		put_ctx p = {arg(argv[6], &l3), l3, AKS_STORE_PUT, ""};
		rc = ops->update(store, ns, key, put_fn, &p, &err);
	} else if (strcmp(op, "del") == 0 && argc == 6) {
		const char *ns = arg(argv[4], &l1), *key = arg(argv[5], &l2);
		put_ctx p = {NULL, 0, AKS_STORE_DELETE, ""};
		rc = ops->update(store, ns, key, put_fn, &p, &err);
	} else if (strcmp(op, "incr") == 0 && argc == 6) {
		const char *ns = arg(argv[4], &l1), *key = arg(argv[5], &l2);
		put_ctx p = {NULL, 0, AKS_STORE_PUT, ""};
		rc = ops->update(store, ns, key, incr_fn, &p, &err);
		if (rc == AKS_OK)
			printf("%s\n", p.buf);
	} else if (strcmp(op, "expiring") == 0 && argc == 8) {
		const char *ns = arg(argv[4], &l1), *key = arg(argv[5], &l2),
		           *value = arg(argv[6], &l3);
		rc = ops->put_expiring(store, ns, key, value, l3, atoll(argv[7]), &err);
	} else if (strcmp(op, "get") == 0 && argc == 6) {
		const char *ns = arg(argv[4], &l1), *key = arg(argv[5], &l2);
		rc = ops->get(store, ns, key, print_value, NULL, &err);
		if (rc == AKS_ENOTFOUND) {
			aks_error_free(err);
			return 3;
		}
	} else if (strcmp(op, "scan") == 0 && argc == 6) {
		const char *ns = arg(argv[4], &l1), *prefix = arg(argv[5], &l2);
		rc = ops->scan(store, ns, prefix, print_record, NULL, &err);
	} else if (strcmp(op, "namespaces") == 0 && argc == 4) {
		rc = ops->namespaces(store, print_name, NULL, &err);
	} else if (strcmp(op, "lock") == 0 && argc == 8) {
		const char *ns = arg(argv[4], &l1), *key = arg(argv[5], &l2);
		aks_call call;
		aks_call_init(&call, atof(argv[6]), NULL, NULL, NULL);
		aks_store_lock *lk = NULL;
		rc = ops->lock(store, ns, key, &call, &lk, &err);
		if (rc == AKS_OK) {
			printf("locked\n");
			fflush(stdout);
			usleep((useconds_t)(atof(argv[7]) * 1e6));
			ops->unlock(store, lk);
		}
	} else {
		fprintf(stderr, "ddb_tool: unknown operation or wrong arguments: %s\n", op);
		return 2;
	}
	return rc == AKS_OK ? 0 : fail(rc, err);
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: ddb_tool PLUGIN CONFIG.yaml OPERATION ARGS...\n");
		return 2;
	}
	const aks_plugin *plugin = NULL;
	aks_config *cfg = NULL;
	aks_error *err = NULL;
	int rc = aks_plugin_load(argv[1], AKS_PLUGIN_STORE, &plugin, &err);
	if (rc == AKS_OK)
		rc = aks_config_load_block(plugin, argv[2], &cfg, &err);
	if (rc == AKS_OK) {
		ops = aks_plugin_get_descriptor(plugin)->ops;
		rc = ops->init(aks_host_services(), cfg, &store, &err);
	}
	if (rc != AKS_OK) {
		aks_config_free(cfg);
		return fail(rc, err);
	}
	int status = run(argc, argv);
	ops->fini(store);
	aks_config_free(cfg);
	return status;
}
