/*
 * plugins/ec2_ssm/ec2_ssm_client.c - which AWS identity a call runs under: the instance's
 * own (the default credential chain) for agent identity; for user identity, the role the
 * principal's credentials name (role_arn), assumed with STS AssumeRole once per
 * (subject, role_arn) and refreshed before it expires, as the reference does.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ec2_ssm_internal.h"

static const char *credential(const aks_principal *p, const char *key)
{
	for (const char *const *kv = p ? p->credentials : NULL; kv && kv[0] && kv[1]; kv += 2)
		if (strcmp(kv[0], key) == 0)
			return kv[1];
	return NULL;
}

static void client_free(ssm_client *c)
{
	if (!c)
		return;
	aks_aws_source_free(c->source);
	free(c->subject);
	free(c->role_arn);
	free(c);
}

void ssm_clients_free(aks_provider_impl *prov)
{
	for (ssm_client *c = prov->clients, *next; c; c = next) {
		next = c->next;
		client_free(c);
	}
	prov->clients = NULL;
	client_free(prov->agent);
	prov->agent = NULL;
}

static void service_of(aks_provider_impl *prov, ssm_client *c)
{
	c->ssm = (aks_aws_service){
	    .cloud = &prov->cloud,
	    .source = c->source,
	    .service = "ssm",
	    .region = prov->env.region,
	    .endpoint = prov->ssm_endpoint,
	};
}

/* Resolves the region, the endpoints and the default chain once (under prov->lock). */
static int setup(aks_provider_impl *prov, aks_error **err)
{
	const aks_host_api *host = prov->host;
	if (prov->ready)
		return AKS_OK;
	aks_aws_env_free(&prov->env);
	int rc = aks_aws_env_load(&prov->env, host, EC2_SSM_NAME, prov->region_setting, err);
	if (rc != AKS_OK)
		return rc;
	if (!prov->env.region)
		return host->error_set(
		    err, AKS_ECONFIG,
		    "ec2_ssm: no AWS region: set region in the ec2_ssm block, or "
		    "AWS_REGION, or the region of profile '%s' in %s",
		    prov->env.profile, prov->env.config_file);
	free(prov->ssm_endpoint);
	free(prov->sts_endpoint);
	prov->ssm_endpoint = prov->sts_endpoint = NULL;
	ssm_client *agent = NULL;
	if ((rc = aks_aws_endpoint(host, EC2_SSM_NAME, "ssm", prov->env.region,
	                           prov->endpoint_setting, &prov->ssm_endpoint, err)) != AKS_OK ||
	    (rc = aks_aws_endpoint(host, EC2_SSM_NAME, "sts", prov->env.region, prov->sts_setting,
	                           &prov->sts_endpoint, err)) != AKS_OK)
		return rc;
	if (!(agent = calloc(1, sizeof(*agent))))
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	if ((rc = aks_aws_chain_new(&prov->cloud, &prov->env, prov->sts_endpoint, &agent->source,
	                            err)) != AKS_OK) {
		client_free(agent);
		return rc;
	}
	service_of(prov, agent);
	prov->agent = agent;
	prov->ready = true;
	host->log(AKS_LOG_DEBUG, EC2_SSM_NAME, "SSM at %s in %s; credentials from %s",
	          prov->ssm_endpoint, prov->env.region, aks_aws_source_describe(agent->source));
	return AKS_OK;
}

/* The user's client for role_arn, made (and kept) at its first use. */
static int user_client(aks_provider_impl *prov, const char *subject, const char *role_arn,
                       ssm_client **out, aks_error **err)
{
	const aks_host_api *host = prov->host;
	for (ssm_client *c = prov->clients; c; c = c->next)
		if (strcmp(c->subject, subject) == 0 && strcmp(c->role_arn, role_arn) == 0) {
			*out = c;
			return AKS_OK;
		}
	ssm_client *c = calloc(1, sizeof(*c));
	if (!c || !(c->subject = strdup(subject)) || !(c->role_arn = strdup(role_arn))) {
		client_free(c);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	char name[65];
	aks_aws_session_name("ak-sandbox-", subject, name, sizeof(name));
	int rc = aks_aws_assume_role_new(&prov->cloud, prov->agent->source, prov->env.region,
	                                 prov->sts_endpoint, role_arn, name, &c->source, err);
	if (rc != AKS_OK) {
		client_free(c);
		return rc;
	}
	service_of(prov, c);
	c->next = prov->clients;
	prov->clients = c;
	*out = c;
	return AKS_OK;
}

int ssm_client_for(aks_provider_impl *prov, const aks_call *call, ssm_client **out,
                   const char **run_as, aks_error **err)
{
	const aks_host_api *host = prov->host;
	const aks_principal *p = call ? call->principal : NULL;
	*out = NULL;
	*run_as = NULL;
	bool user = p && p->mode == AKS_IDENTITY_USER;
	const char *role_arn = user ? credential(p, "role_arn") : NULL;
	if (user && (!role_arn || !*role_arn))
		return host->error_set(err, AKS_EPOLICY,
		                       "ec2_ssm user mode requires credentials['role_arn'] on the "
		                       "principal");
	const char *who = p ? credential(p, "run_as") : NULL;
	*run_as = who && *who ? who : NULL;
	pthread_mutex_lock(&prov->lock);
	int rc = setup(prov, err);
	if (rc == AKS_OK && user)
		rc = user_client(prov, p->subject ? p->subject : "", role_arn, out, err);
	else if (rc == AKS_OK)
		*out = prov->agent;
	pthread_mutex_unlock(&prov->lock);
	return rc;
}
