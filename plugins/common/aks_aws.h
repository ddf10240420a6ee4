/*
 * plugins/common/aks_aws.h - what the providers and brokers that talk to AWS share (ec2_ssm;
 * sqs, dynamodb): credentials resolved as the AWS SDKs resolve them, kept fresh;
 * requests signed with Signature Version 4 by libcurl (CURLOPT_AWS_SIGV4) and sent through
 * the cloud client (aks_cloud.h) under the call's deadline; the AWS JSON protocol's answers
 * and errors read in one place; STS's AssumeRole and AssumeRoleWithWebIdentity (XML answers,
 * read with libxml2). Part of libaks-aws; its users link libcurl, json-c and libxml2.
 *
 * Secrets (secret keys, session tokens, web identity tokens) live in aks_aws_creds, which
 * aks_aws_creds_clear wipes, and in a request's header list and libcurl's user name and
 * password for the request's life; no message, log line or error ever quotes one.
 */
#ifndef AKS_AWS_H
#define AKS_AWS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

#include "aks_cloud.h"

/* ---- credentials ---- */

typedef struct aks_aws_creds {
	char *key_id;
	char *secret;
	char *token;        /* the session token of temporary credentials; NULL: none */
	int64_t expires_ms; /* wall-clock (epoch) ms; 0: never */
} aks_aws_creds;

/* Wipes and frees what c holds; c is then zeroed. */
void aks_aws_creds_clear(aks_aws_creds *c);
/* A copy of src in dst (zeroed first); false when out of memory (dst is then clear). */
bool aks_aws_creds_copy(aks_aws_creds *dst, const aks_aws_creds *src);

/* Where credentials come from, in the order the SDKs' default chain tries them. */
typedef enum aks_aws_source_kind {
	AKS_AWS_SRC_ENV = 1,      /* AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN */
	AKS_AWS_SRC_PROFILE,      /* the shared credentials and config files, AWS_PROFILE */
	AKS_AWS_SRC_WEB_IDENTITY, /* AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN, through STS */
	AKS_AWS_SRC_CONTAINER,    /* the ECS container endpoint (AWS_CONTAINER_CREDENTIALS_*) */
	AKS_AWS_SRC_IMDS,         /* the EC2 instance metadata service, IMDSv2 */
	AKS_AWS_SRC_ASSUME_ROLE   /* STS AssumeRole of a role, signed with a parent source's */
} aks_aws_source_kind;

typedef struct aks_aws_source aks_aws_source;

/* The region and the settings the chain reads, resolved once (aks_aws_env_load). */
typedef struct aks_aws_env {
	char *region;  /* NULL: none found */
	char *profile; /* AWS_PROFILE, else "default" */
	char *credentials_file;
	char *config_file;
} aks_aws_env;

/* Reads the environment and the shared config file: region is `region` when set, else
 * AWS_REGION, AWS_DEFAULT_REGION, the profile's region. AKS_OK, AKS_ENOMEM, or AKS_ECONFIG
 * for a shared file that cannot be parsed (its path and line in the message). */
int aks_aws_env_load(aks_aws_env *env, const aks_host_api *host, const char *who,
                     const char *region, aks_error **err);
void aks_aws_env_free(aks_aws_env *env);

/* The default chain's source, chosen as the SDKs choose it: the first of the kinds above
 * whose settings are present (IMDS last, unless AWS_EC2_METADATA_DISABLED is true). Nothing is
 * fetched yet. sts_endpoint: where web identity goes (NULL: STS's in env's region).
 * AKS_OK, AKS_ENOMEM, or AKS_ECONFIG for settings that are present but wrong (a profile
 * without keys, a token file that is not set with a role). */
int aks_aws_chain_new(aks_cloud *cloud, const aks_aws_env *env, const char *sts_endpoint,
                      aks_aws_source **out, aks_error **err);
/* A source that assumes role_arn with STS AssumeRole as session_name (sanitised as the
 * seeds say, see aks_aws_session_name), signing with parent's credentials (borrowed: it must
 * outlive the new source). */
int aks_aws_assume_role_new(aks_cloud *cloud, aks_aws_source *parent, const char *region,
                            const char *sts_endpoint, const char *role_arn,
                            const char *session_name, aks_aws_source **out, aks_error **err);
void aks_aws_source_free(aks_aws_source *s);
aks_aws_source_kind aks_aws_source_kind_of(const aks_aws_source *s);
/* What the source is, for `check` and logs: "environment variables", "profile 'x' of
 * /root/.aws/credentials", "role arn:... through web identity", ... */
const char *aks_aws_source_describe(const aks_aws_source *s);

/* A copy of the source's current credentials in *out, fetched when it has none, or when
 * they expire within five minutes (temporary credentials refresh before they run out).
 * Thread-safe. AKS_OK, or an error worded "<who>: cannot get AWS credentials from
 * <source>: ...": AKS_EPROVISION (the service failed or refused), AKS_ETIMEOUT,
 * AKS_ECANCELLED, AKS_ENOMEM. */
int aks_aws_source_get(aks_aws_source *s, const aks_call *call, aks_aws_creds *out,
                       aks_error **err);
/* Forgets the source's cached credentials (after the service refused them as expired). */
void aks_aws_source_invalidate(aks_aws_source *s);

/* RoleSessionName as the seeds build it: every character outside [A-Za-z0-9_+=,.@-]
 * replaced by '_', clamped to 64 characters, into buf (at least 65 bytes). */
void aks_aws_session_name(const char *prefix, const char *subject, char *buf, size_t size);

/* ---- signed requests ---- */

/* One service's endpoint in one region, and the source that signs its requests. */
typedef struct aks_aws_service {
	aks_cloud *cloud;       /* borrowed */
	aks_aws_source *source; /* borrowed */
	const char *service;    /* the signing name: "ssm", "sts" (static) */
	const char *region;     /* borrowed */
	const char *endpoint;   /* borrowed: "https://ssm.us-east-1.amazonaws.com" */
	/* the AWS JSON protocol's version: "1.0" (SQS, DynamoDB) or "1.1" (SSM); NULL: 1.1 */
	const char *json_version;
} aks_aws_service;

/* An AWS error answer, as the service worded it. */
typedef struct aks_aws_fault {
	long status;       /* HTTP status; 0: no answer */
	char code[96];     /* "InvalidInstanceId" (a JSON __type's namespace dropped) */
	char message[512]; /* the service's message, made printable */
} aks_aws_fault;

/* The endpoint of service in region as the SDKs resolve it: `configured` when set, else
 * AWS_ENDPOINT_URL_<SERVICE>, AWS_ENDPOINT_URL, https://<service>.<region>.amazonaws.com
 * (.amazonaws.com.cn in the cn- regions). malloc'd in *out, its trailing '/' removed.
 * AKS_OK, AKS_ENOMEM, or AKS_ECONFIG for a URL that is not http(s). */
int aks_aws_endpoint(const aks_host_api *host, const char *who, const char *service,
                     const char *region, const char *configured, char **out, aks_error **err);

/* POSTs body (a JSON object) to s as the AWS JSON protocol's (json_version) operation target
 * ("AmazonSSM.SendCommand"), signed. A 2xx answer: AKS_OK with its JSON object in *out.
 * An AWS error answer: fault filled, and the error "<who>: <what>: <code>: <message>":
 * AKS_EPROVISION; credentials the service refused (UnrecognizedClientException,
 * InvalidSignatureException, ExpiredTokenException, AccessDenied...) say so and which
 * source they came from. Throttling is retried as retry allows. Transport failures,
 * deadline and cancellation as aks_cloud_http. */
int aks_aws_json_call(aks_aws_service *s, const char *what, const char *target, json_object *body,
                      aks_cloud_retry retry, const aks_call *call, json_object **out,
                      aks_aws_fault *fault, aks_error **err);

/* Whether an AWS error code says the credentials were refused (the message then says so). */
bool aks_aws_fault_is_auth(const char *code);

/* Reads an AWS JSON error answer (status and body) into f. */
void aks_aws_json_fault(long status, const char *body, size_t len, aks_aws_fault *f);
/* Reads an AWS query protocol (XML) error answer into f; false when it is not one. */
bool aks_aws_xml_fault(long status, const char *body, size_t len, aks_aws_fault *f);

/* An ISO 8601 UTC time ("2026-12-05T10:00:00Z", fractions allowed) as epoch ms; -1 when it
 * is not one. */
int64_t aks_aws_parse_time(const char *s);

#endif /* AKS_AWS_H */
