/*
 * plugins/ec2_ssm/ec2_ssm.c - the ec2_ssm provider: attaches to an existing EC2 instance (or
 * any node managed by AWS Systems Manager) and runs commands and code on it with SSM's
 * AWS-RunShellScript, as the reference does. Attach-only: it never creates or destroys an
 * instance. Isolation none, not stateful (each command is its own shell), no files, no
 * policy beyond the timeout; under user identity it runs with the principal's role, assumed
 * with STS, and as the principal's run_as user.
 *
 * Requests are signed with SigV4 by libcurl; credentials come from the AWS SDKs' default
 * chain (plugins/common/aks_aws.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ec2_ssm_internal.h"

#ifndef EC2_SSM_VERSION
#define EC2_SSM_VERSION "0"
#endif

static const char *const ssm_languages[] = {"python", NULL};

static const aks_capabilities ssm_caps = {
    AKS_CAPABILITIES_INIT,
    .isolation = AKS_ISOLATION_NONE,
    .languages = ssm_languages,
    .shell = true,
    .files = false,
    .package_install = false,
    .stateful = false,
    .attach = true,
    .provisions = false,
    .attaches_external = true,
    .principal_user = true,
    .policy_network = false,
    .policy_filesystem = false,
    .policy_resources = false,
    .policy_network_allowlist = false,
    .egress_proxy = false,
};

static const aks_config_key ssm_keys[] = {
    AKS_CONFIG_KEY("attach_to", AKS_CONFIG_STRING, false, NULL,
                   "the instance id (environment: attached)"),
    AKS_CONFIG_KEY("region", AKS_CONFIG_STRING, false, NULL,
                   "AWS region; null = $AWS_REGION, $AWS_DEFAULT_REGION, the profile's"),
    AKS_CONFIG_KEY("endpoint_url", AKS_CONFIG_STRING, false, NULL,
                   "SSM endpoint; null = $AWS_ENDPOINT_URL_SSM, $AWS_ENDPOINT_URL, "
                   "the region's (set it for a VPC endpoint)"),
    AKS_CONFIG_KEY("sts_endpoint_url", AKS_CONFIG_STRING, false, NULL,
                   "STS endpoint (roles, web identity); null = $AWS_ENDPOINT_URL_STS, "
                   "$AWS_ENDPOINT_URL, the region's"),
    AKS_CONFIG_KEY("poll_interval", AKS_CONFIG_DOUBLE, false, "1",
                   "the longest wait in seconds between two reads of a running command's "
                   "state (sooner at first)"),
    AKS_CLOUD_CONFIG_KEYS,
    AKS_CONFIG_END,
};

static void ssm_fini(aks_provider_impl *prov)
{
	if (!prov)
		return;
	ssm_clients_free(prov);
	aks_aws_env_free(&prov->env);
	aks_cloud_fini(&prov->cloud);
	pthread_mutex_destroy(&prov->lock);
	free(prov->region_setting);
	free(prov->endpoint_setting);
	free(prov->sts_setting);
	free(prov->ssm_endpoint);
	free(prov->sts_endpoint);
	free(prov->description);
	free(prov);
}

static int check_url(const aks_host_api *host, const char *key, char *url, aks_error **err)
{
	return aks_cloud_check_url(host, EC2_SSM_NAME, key, url, err);
}

static int ssm_init(const aks_host_api *host, const aks_config *cfg, aks_provider_impl **out,
                    aks_error **err)
{
	aks_provider_impl *prov = calloc(1, sizeof(*prov));
	if (!prov)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	prov->host = host;
	pthread_mutex_init(&prov->lock, NULL);
	prov->poll_interval_s = 1;
	host->config_double(cfg, "poll_interval", &prov->poll_interval_s);
	int rc = AKS_OK;
	if (!aks_cloud_setting(host, cfg, "region", NULL, NULL, &prov->region_setting) ||
	    !aks_cloud_setting(host, cfg, "endpoint_url", NULL, NULL, &prov->endpoint_setting) ||
	    !aks_cloud_setting(host, cfg, "sts_endpoint_url", NULL, NULL, &prov->sts_setting))
		rc = host->error_set(err, AKS_ENOMEM, "out of memory");
	else if (!(prov->poll_interval_s >= 0.05 && prov->poll_interval_s <= 60))
		rc = host->error_set(err, AKS_ECONFIG,
		                     "ec2_ssm: poll_interval must be at least 0.05 and at most 60 "
		                     "seconds");
	else if ((rc = check_url(host, "endpoint_url", prov->endpoint_setting, err)) == AKS_OK &&
	         (rc = check_url(host, "sts_endpoint_url", prov->sts_setting, err)) == AKS_OK)
		rc = aks_cloud_configure(&prov->cloud, host, cfg, EC2_SSM_NAME, err);
	if (rc != AKS_OK) {
		ssm_fini(prov);
		return rc;
	}
	*out = prov;
	return AKS_OK;
}

static const char *ssm_description(const aks_provider_impl *prov)
{
	aks_provider_impl *p = (aks_provider_impl *)prov;
	if (!p->description &&
	    asprintf(&p->description,
	             "existing instances over AWS Systems Manager (AWS-RunShellScript) in %s%s; "
	             "each command a new shell, its output as much as SSM keeps (%d characters "
	             "of stdout, %d of stderr); no files",
	             prov->region_setting ? "region " : "the default region",
	             prov->region_setting ? prov->region_setting : "", SSM_STDOUT_MAX,
	             SSM_STDERR_MAX) < 0)
		p->description = NULL;
	return p->description ? p->description : "";
}

/* ---- lifecycle ---- */

static int ssm_attach(aks_provider_impl *prov, const char *id, const aks_call *call,
                      aks_sandbox_impl **out, aks_error **err)
{
	const aks_host_api *host = prov->host;
	ssm_client *client = NULL;
	const char *run_as = NULL;
	int rc = ssm_client_for(prov, call, &client, &run_as, err);
	if (rc != AKS_OK)
		return rc;
	json_object *body = json_object_new_object(), *filters = json_object_new_array(),
	            *filter = json_object_new_object(), *values = json_object_new_array();
	bool ok = body && filters && filter && values &&
	          !json_object_array_add(values, json_object_new_string(id)) &&
	          !json_object_object_add(filter, "Key", json_object_new_string("InstanceIds")) &&
	          !json_object_object_add(filter, "Values", values) &&
	          (values = NULL, !json_object_array_add(filters, filter)) &&
	          (filter = NULL, !json_object_object_add(body, "Filters", filters));
	if (ok)
		filters = NULL;
	json_object_put(values);
	json_object_put(filter);
	json_object_put(filters);
	if (!ok) {
		json_object_put(body);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	json_object *answer = NULL;
	aks_aws_fault fault;
	char what[160];
	snprintf(what, sizeof(what), "describe instance '%.64s'", id);
	aks_error *e = NULL;
	rc = aks_aws_json_call(&client->ssm, what, "AmazonSSM.DescribeInstanceInformation", body,
	                       AKS_CLOUD_RETRY_SAFE, call, &answer, &fault, &e);
	json_object_put(body);
	if (rc != AKS_OK) {
		rc = strcmp(fault.code, "InvalidInstanceId") == 0
		         ? host->error_set(err, AKS_EGONE, "instance '%s' is not reachable via SSM",
		                           id)
		         : host->error_set(err, rc, "%s", host->error_message(e));
		host->error_free(e);
		return rc;
	}
	json_object *list = NULL;
	json_object_object_get_ex(answer, "InstanceInformationList", &list);
	size_t n = json_object_is_type(list, json_type_array) ? json_object_array_length(list) : 0;
	json_object_put(answer);
	if (n == 0)
		return host->error_set(err, AKS_EGONE, "instance '%s' is not registered with SSM",
		                       id);
	aks_sandbox_impl *sb = calloc(1, sizeof(*sb));
	if (!sb || !(sb->id = strdup(id))) {
		free(sb);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	sb->prov = prov;
	*out = sb;
	return AKS_OK;
}

static int ssm_destroy(aks_provider_impl *prov, const char *id, const aks_call *call,
                       aks_error **err)
{
	(void)prov, (void)id, (void)call, (void)err;
	return AKS_OK; /* attached: the instance is not ours to remove */
}

static const char *ssm_id(const aks_sandbox_impl *sb)
{
	return sb->id;
}

static void ssm_close(aks_sandbox_impl *sb)
{
	if (!sb)
		return;
	free(sb->id);
	free(sb);
}

static const aks_sandbox_ops ssm_sandbox_ops = {
    AKS_SANDBOX_OPS_INIT,
    .id = ssm_id,
    .execute_code = ssm_execute_code,
    .execute_command = ssm_execute_command,
    .close = ssm_close,
};

static const aks_provider_ops ssm_ops = {
    AKS_PROVIDER_OPS_INIT,
    .capabilities = &ssm_caps,
    .init = ssm_init,
    .fini = ssm_fini,
    .attach = ssm_attach,
    .destroy = ssm_destroy,
    .sandbox = &ssm_sandbox_ops,
    .instance_description = ssm_description,
};

AKS_PLUGIN_DEFINE(AKS_PLUGIN_PROVIDER, EC2_SSM_NAME, EC2_SSM_VERSION, "Apache-2.0",
                  "existing EC2 instances over AWS Systems Manager (attach-only)", ssm_keys,
                  &ssm_ops);
