/*
 * plugins/dynamodb/dynamodb.c - the dynamodb store: the host's records, locks and the queue
 * broker's expiring response records in one Amazon DynamoDB table, shared by every process
 * and host that points at it.
 *
 * Requests are AWS JSON 1.0, signed with SigV4 by libcurl, with credentials from the AWS
 * SDKs' default chain (plugins/common/aks_aws.h). Nothing is resolved or contacted at init:
 * `aksandbox check` works on a host without AWS settings.
 *
 * Layout, locking and failure behaviour: docs/plugins/dynamodb.md.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "ddb_internal.h"

#ifndef DDB_VERSION
#error "DDB_VERSION must be defined (the package version)"
#endif

static const aks_config_key ddb_config_keys[] = {
    AKS_CONFIG_KEY("table_name", AKS_CONFIG_STRING, true, NULL,
                   "the DynamoDB table (partition key pk and sort key sk, both binary)"),
    AKS_CONFIG_KEY("region", AKS_CONFIG_STRING, false, NULL,
                   "AWS region; null = $AWS_REGION, $AWS_DEFAULT_REGION, the profile's"),
    AKS_CONFIG_KEY("endpoint_url", AKS_CONFIG_STRING, false, NULL,
                   "DynamoDB endpoint; null = $AWS_ENDPOINT_URL_DYNAMODB, $AWS_ENDPOINT_URL, "
                   "the region's (set it for a VPC endpoint or an emulator)"),
    AKS_CONFIG_KEY("auto_provision", AKS_CONFIG_BOOL, false, "false",
                   "create the table (on demand, with TTL) when it is missing: development "
                   "only; otherwise a missing table is an error"),
    AKS_CONFIG_KEY("lock_lease", AKS_CONFIG_DOUBLE, false, "30",
                   "seconds a lock outlives a holder that stopped renewing it (it died)"),
    AKS_CONFIG_KEY("request_timeout", AKS_CONFIG_DOUBLE, false, "10",
                   "seconds one request may take, its retries included"),
    AKS_CONFIG_KEY("ttl", AKS_CONFIG_INT, false, "0",
                   "accepted for the reference's response_store blocks; the host passes "
                   "each expiring record's time to live"),
    AKS_CLOUD_CONFIG_KEYS,
    AKS_CONFIG_END,
};

static void ddb_fini(aks_store_impl *s)
{
	if (!s)
		return;
	ddb_lock_stop(s);
	ddb_client_free(s);
	aks_cloud_fini(&s->cloud);
	free(s->table);
	free(s->region_setting);
	free(s->endpoint_setting);
	pthread_mutex_destroy(&s->setup_mu);
	free(s);
}

static int read_config(aks_store_impl *s, const aks_config *cfg, aks_error **err)
{
	const aks_host_api *host = s->host;
	const char *table = NULL;
	double lease = 30, timeout = 10;
	host->config_string(cfg, "table_name", &table);
	host->config_bool(cfg, "auto_provision", &s->auto_provision);
	host->config_double(cfg, "lock_lease", &lease);
	host->config_double(cfg, "request_timeout", &timeout);
	/* DynamoDB's own rule for table names, checked here so a typo fails at load. */
	size_t n = table ? strlen(table) : 0;
	bool ok = n >= 3 && n <= 255;
	for (size_t i = 0; ok && i < n; i++)
		ok = (table[i] >= 'a' && table[i] <= 'z') || (table[i] >= 'A' && table[i] <= 'Z') ||
		     (table[i] >= '0' && table[i] <= '9') || strchr("_.-", table[i]);
	if (!ok)
		return host->error_set(err, AKS_ECONFIG,
		                       DDB_NAME ".table_name: '%s' is not a DynamoDB table name "
		                                "(3 to 255 of A-Z a-z 0-9 _ . -)",
		                       table ? table : "");
	if (!(lease >= 1 && lease <= 86400))
		return host->error_set(err, AKS_ECONFIG,
		                       DDB_NAME ".lock_lease: %g is not from 1 to 86400 seconds",
		                       lease);
	if (!(timeout >= 0.1 && timeout <= 3600))
		return host->error_set(
		    err, AKS_ECONFIG,
		    DDB_NAME ".request_timeout: %g is not from 0.1 to 3600 seconds", timeout);
	s->lease_ms = (int64_t)(lease * 1000);
	s->request_timeout_s = timeout;
	if (!(s->table = strdup(table)) ||
	    !aks_cloud_setting(host, cfg, "region", NULL, NULL, &s->region_setting) ||
	    !aks_cloud_setting(host, cfg, "endpoint_url", NULL, NULL, &s->endpoint_setting))
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	int rc = aks_cloud_check_url(host, DDB_NAME, "endpoint_url", s->endpoint_setting, err);
	if (rc != AKS_OK)
		return rc;
	return aks_cloud_configure(&s->cloud, host, cfg, DDB_NAME, err);
}

static int ddb_init(const aks_host_api *host, const aks_config *cfg, aks_store_impl **out,
                    aks_error **err)
{
	*out = NULL;
	aks_store_impl *s = calloc(1, sizeof(*s));
	if (!s)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	s->host = host;
	pthread_mutex_init(&s->setup_mu, NULL);
	int rc = read_config(s, cfg, err);
	if (rc < 0) {
		ddb_fini(s);
		return rc;
	}
	ddb_lock_init(s);
	*out = s;
	return AKS_OK;
}

static const aks_store_ops ddb_ops = {
    AKS_STORE_OPS_VERSION,
    sizeof(aks_store_ops),
    ddb_init,
    ddb_fini,
    ddb_update,
    ddb_get,
    ddb_scan,
    ddb_namespaces,
    ddb_lock,
    ddb_unlock,
    ddb_put_expiring,
};

AKS_PLUGIN_DEFINE(AKS_PLUGIN_STORE, DDB_NAME, DDB_VERSION, "Apache-2.0",
                  "state and response store in an Amazon DynamoDB table: shared by every host "
                  "that points at the table",
                  ddb_config_keys, &ddb_ops);
