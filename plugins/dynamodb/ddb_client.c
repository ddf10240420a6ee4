/*
 * plugins/dynamodb/ddb_client.c - the dynamodb store's requests: AWS set up at the first one
 * (region, endpoint and the default credential chain, as the SDKs resolve them, so a host
 * that never touches its state needs no AWS settings), the table checked once (its key
 * schema, its status) and, with auto_provision, created with TTL on; every request bounded
 * by request_timeout, and every failure worded with the table, region and endpoint.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aks_json.h"
#include "ddb_internal.h"

/* How long a table being created (by us or by another process) may take to become ACTIVE,
 * and how often it is looked at meanwhile. */
#define DDB_ACTIVE_WAIT_MS 60000
#define DDB_ACTIVE_POLL_MS 250

int64_t ddb_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void ddb_client_free(aks_store_impl *s)
{
	aks_aws_source_free(s->source);
	s->source = NULL;
	aks_aws_env_free(&s->env);
	free(s->endpoint);
	s->endpoint = NULL;
	s->aws_ready = s->table_ready = false;
}

/* ---- one request ---- */

/* Sends op with body as it is. See ddb_request; no set-up, no TableName added. */
static int send_op(aks_store_impl *s, const char *op, const char *what, json_object *body,
                   const char *expected_fault, const aks_call *call, json_object **out,
                   aks_aws_fault *fault, aks_error **err)
{
	const aks_host_api *host = s->host;
	char target[64];
	snprintf(target, sizeof(target), "DynamoDB_20120810.%s", op);
	/* No request outlives request_timeout: the host's store calls carry no deadline (but
	 * lock, whose own deadline is kept when it is sooner, and whose cancellation is kept). */
	int64_t limit = host->now_ms() + (int64_t)(s->request_timeout_s * 1000);
	aks_call own = {AKS_CALL_INIT};
	if (call)
		own = *call;
	bool ours = !(own.deadline_ms > 0 && own.deadline_ms <= limit);
	if (ours) {
		own.deadline_ms = limit;
		own.timeout = s->request_timeout_s;
	}
	aks_aws_fault local;
	if (!fault)
		fault = &local;
	aks_error *e = NULL;
	*out = NULL;
	memset(fault, 0, sizeof(*fault));
	int rc = aks_aws_json_call(&s->svc, what, target, body, AKS_CLOUD_RETRY_SAFE, &own, out,
	                           fault, &e);
	if (rc == AKS_OK)
		return AKS_OK;
	if (expected_fault && strcmp(fault->code, expected_fault) == 0) {
		host->error_free(e);
		return DDB_FAULT;
	}
	const char *why = e ? host->error_message(e) : "unknown error";
	if (rc == AKS_ENOMEM || rc == AKS_ECANCELLED || (rc == AKS_ETIMEOUT && !ours))
		rc = host->error_set(err, rc, "%s", why);
	else if (rc == AKS_ETIMEOUT)
		rc = host->error_set(
		    err, AKS_EIO,
		    DDB_NAME ": cannot %s: no answer within %g s (request_timeout) "
		             "from table '%s' in %s at %s",
		    what, s->request_timeout_s, s->table, s->env.region, s->endpoint);
	else
		rc = host->error_set(err, AKS_EIO, "%s (table '%s' in %s at %s)", why, s->table,
		                     s->env.region, s->endpoint);
	host->error_free(e);
	return rc;
}

/* ---- set-up ---- */

/* Region, endpoint and credentials, once for the store's life (under setup_mu). */
static int setup_aws(aks_store_impl *s, aks_error **err)
{
	const aks_host_api *host = s->host;
	if (s->aws_ready)
		return AKS_OK;
	aks_aws_env_free(&s->env);
	free(s->endpoint);
	s->endpoint = NULL;
	int rc = aks_aws_env_load(&s->env, host, DDB_NAME, s->region_setting, err);
	if (rc != AKS_OK)
		return rc;
	if (!s->env.region)
		return host->error_set(err, AKS_ECONFIG,
		                       DDB_NAME
		                       ": no AWS region: set region in the dynamodb block, "
		                       "or AWS_REGION, or the region of profile '%s' in %s",
		                       s->env.profile, s->env.config_file);
	if ((rc = aks_aws_endpoint(host, DDB_NAME, "dynamodb", s->env.region, s->endpoint_setting,
	                           &s->endpoint, err)) != AKS_OK)
		return rc;
	/* A user or password in the URL would be sent, and quoted in every message. */
	const char *auth = strstr(s->endpoint, "://") + 3;
	const char *at = strchr(auth, '@'), *slash = strchr(auth, '/');
	if (at && (!slash || at < slash))
		return host->error_set(err, AKS_ECONFIG,
		                       DDB_NAME ": the DynamoDB endpoint URL must not carry a user "
		                                "or password (requests are signed with AWS "
		                                "credentials)");
	if ((rc = aks_aws_chain_new(&s->cloud, &s->env, NULL, &s->source, err)) != AKS_OK)
		return rc;
	s->svc = (aks_aws_service){
	    .cloud = &s->cloud,
	    .source = s->source,
	    .service = "dynamodb",
	    .region = s->env.region,
	    .endpoint = s->endpoint,
	    .json_version = "1.0",
	};
	s->aws_ready = true;
	host->log(AKS_LOG_DEBUG, DDB_NAME, "table '%s' in %s at %s; credentials from %s", s->table,
	          s->env.region, s->endpoint, aks_aws_source_describe(s->source));
	return AKS_OK;
}

static json_object *table_body(aks_store_impl *s, const char *json_text)
{
	json_object *o = json_tokener_parse(json_text);
	if (!ddb_put(o, "TableName", json_object_new_string(s->table))) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

static int missing_table(aks_store_impl *s, aks_error **err)
{
	return s->host->error_set(
	    err, AKS_ECONFIG,
	    DDB_NAME ": table '%s' does not exist in region %s (at %s): create it as "
	             "docs/plugins/dynamodb.md says (partition key pk and sort key sk, both "
	             "binary; TTL on attribute " DDB_EXPIRES "), or set auto_provision: true "
	             "(development)",
	    s->table, s->env.region, s->endpoint);
}

/* Whether attribute `name` is the key of type key_type ("HASH", "RANGE") and binary. */
static bool has_key(json_object *table, const char *name, const char *key_type)
{
	bool key = false, binary = false;
	json_object *ks = aks__jget(table, "KeySchema"),
	            *ad = aks__jget(table, "AttributeDefinitions");
	size_t n = json_object_is_type(ks, json_type_array) ? json_object_array_length(ks) : 0;
	for (size_t i = 0; i < n; i++) {
		json_object *k = json_object_array_get_idx(ks, i);
		const char *a = aks__jstr(k, "AttributeName"), *t = aks__jstr(k, "KeyType");
		key = key || (a && t && strcmp(a, name) == 0 && strcmp(t, key_type) == 0);
	}
	n = json_object_is_type(ad, json_type_array) ? json_object_array_length(ad) : 0;
	for (size_t i = 0; i < n; i++) {
		json_object *d = json_object_array_get_idx(ad, i);
		const char *a = aks__jstr(d, "AttributeName"), *t = aks__jstr(d, "AttributeType");
		binary = binary || (a && t && strcmp(a, name) == 0 && strcmp(t, "B") == 0);
	}
	return key && binary;
}

/* DescribeTable: AKS_OK with its status in *status (a static string), DDB_FAULT when the
 * table does not exist. The key schema must be this store's. */
static int describe(aks_store_impl *s, const char **status, aks_error **err)
{
	json_object *body = table_body(s, "{}"), *out = NULL;
	if (!body)
		return s->host->error_set(err, AKS_ENOMEM, "out of memory");
	int rc = send_op(s, "DescribeTable", "describe the table", body,
	                 "ResourceNotFoundException", NULL, &out, NULL, err);
	json_object_put(body);
	if (rc != AKS_OK)
		return rc;
	json_object *t = aks__jget(out, "Table");
	const char *st = aks__jstr(t, "TableStatus");
	static const char *const known[] = {"ACTIVE", "CREATING", "UPDATING", "DELETING", NULL};
	*status = "unknown";
	for (int i = 0; st && known[i]; i++)
		if (strcmp(st, known[i]) == 0)
			*status = known[i];
	bool ours = has_key(t, DDB_PK, "HASH") && has_key(t, DDB_SK, "RANGE");
	json_object_put(out);
	if (!ours)
		return s->host->error_set(
		    err, AKS_ECONFIG,
		    DDB_NAME ": table '%s' in %s (at %s) does not have this store's key schema "
		             "(partition key pk and sort key sk, both binary): give table_name a "
		             "table made for aksandbox",
		    s->table, s->env.region, s->endpoint);
	return AKS_OK;
}

/* Waits until the table is ACTIVE (a table just created is CREATING for a while). */
static int wait_active(aks_store_impl *s, aks_error **err)
{
	int64_t until = s->host->now_ms() + DDB_ACTIVE_WAIT_MS;
	for (;;) {
		const char *status = NULL;
		int rc = describe(s, &status, err);
		if (rc == DDB_FAULT)
			return missing_table(s, err);
		if (rc != AKS_OK)
			return rc;
		if (strcmp(status, "ACTIVE") == 0 || strcmp(status, "UPDATING") == 0)
			return AKS_OK;
		if (strcmp(status, "CREATING") != 0 || s->host->now_ms() >= until)
			return s->host->error_set(
			    err, AKS_EIO,
			    DDB_NAME ": table '%s' in %s (at %s) is %s, not "
			             "ACTIVE",
			    s->table, s->env.region, s->endpoint,
			    strcmp(status, "CREATING") == 0 ? "still CREATING after 60 s" : status);
		poll(NULL, 0, DDB_ACTIVE_POLL_MS);
	}
}

/* Turns TTL on for expires_at. A failure is a warning: reads hide expired items anyway,
 * only their deletion (and its saving of space) is lost. */
static void enable_ttl(aks_store_impl *s)
{
	json_object *body = table_body(s, "{\"TimeToLiveSpecification\": {\"AttributeName\": "
	                                  "\"" DDB_EXPIRES "\", \"Enabled\": true}}"),
	            *out = NULL;
	aks_error *e = NULL;
	aks_aws_fault f;
	int rc = body
	             ? send_op(s, "UpdateTimeToLive", "turn on TTL", body, NULL, NULL, &out, &f, &e)
	             : AKS_ENOMEM;
	json_object_put(body);
	json_object_put(out);
	if (rc != AKS_OK)
		s->host->log(
		    AKS_LOG_WARNING, DDB_NAME,
		    "could not turn on TTL for table '%s' (expired records are hidden from "
		    "reads but not deleted): %s",
		    s->table, e ? s->host->error_message(e) : "out of memory");
	s->host->error_free(e);
}

static int create_table(aks_store_impl *s, aks_error **err)
{
	json_object *body = table_body(
	                s, "{\"AttributeDefinitions\": ["
	                   "{\"AttributeName\": \"" DDB_PK "\", \"AttributeType\": \"B\"},"
	                   "{\"AttributeName\": \"" DDB_SK "\", \"AttributeType\": \"B\"}],"
	                   "\"KeySchema\": ["
	                   "{\"AttributeName\": \"" DDB_PK "\", \"KeyType\": \"HASH\"},"
	                   "{\"AttributeName\": \"" DDB_SK "\", \"KeyType\": \"RANGE\"}],"
	                   "\"BillingMode\": \"PAY_PER_REQUEST\"}"),
	            *out = NULL;
	if (!body)
		return s->host->error_set(err, AKS_ENOMEM, "out of memory");
	/* ResourceInUseException: another process is creating it too; wait for it as well. */
	int rc = send_op(s, "CreateTable", "create the table", body, "ResourceInUseException", NULL,
	                 &out, NULL, err);
	json_object_put(body);
	json_object_put(out);
	if (rc < 0)
		return rc;
	s->host->log(
	    AKS_LOG_WARNING, DDB_NAME,
	    "auto_provision: %s table '%s' in %s (on-demand capacity, TTL on " DDB_EXPIRES ")",
	    rc == DDB_FAULT ? "another process is creating" : "created", s->table, s->env.region);
	if ((rc = wait_active(s, err)) != AKS_OK)
		return rc;
	enable_ttl(s);
	return AKS_OK;
}

/* The table checked once (under setup_mu): it exists with this store's key schema, is
 * ACTIVE, or is created when auto_provision says so. */
static int setup_table(aks_store_impl *s, aks_error **err)
{
	if (s->table_ready)
		return AKS_OK;
	const char *status = NULL;
	int rc = describe(s, &status, err);
	if (rc == DDB_FAULT)
		rc = s->auto_provision ? create_table(s, err) : missing_table(s, err);
	else if (rc == AKS_OK && strcmp(status, "ACTIVE") != 0)
		rc = wait_active(s, err);
	if (rc == AKS_OK)
		s->table_ready = true;
	return rc;
}

int ddb_request(aks_store_impl *s, const char *op, const char *what, json_object *body,
                const char *expected_fault, const aks_call *call, json_object **out,
                aks_error **err)
{
	*out = NULL;
	pthread_mutex_lock(&s->setup_mu);
	int rc = setup_aws(s, err);
	if (rc == AKS_OK)
		rc = setup_table(s, err);
	pthread_mutex_unlock(&s->setup_mu);
	if (rc != AKS_OK)
		return rc;
	if (!ddb_put(body, "TableName", json_object_new_string(s->table)))
		return s->host->error_set(err, AKS_ENOMEM, "out of memory");
	aks_error *e = NULL;
	aks_aws_fault f;
	rc = send_op(s, op, what, body, expected_fault, call, out, &f, &e);
	if (rc < 0 && strcmp(f.code, "ResourceNotFoundException") == 0) {
		/* The table went away since it was checked: the next request checks again (and
		 * creates it, with auto_provision). */
		pthread_mutex_lock(&s->setup_mu);
		s->table_ready = false;
		pthread_mutex_unlock(&s->setup_mu);
		s->host->error_free(e);
		return missing_table(s, err);
	}
	if (rc < 0)
		rc = s->host->error_set(err, rc, "%s",
		                        e ? s->host->error_message(e) : "unknown error");
	s->host->error_free(e);
	return rc;
}
