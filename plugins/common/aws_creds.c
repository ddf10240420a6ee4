/*
 * plugins/common/aws_creds.c - AWS credentials as the SDKs' default chain resolves them
 * (aks_aws.h): the environment, the shared files and AWS_PROFILE, web identity through STS,
 * the ECS container endpoint, the EC2 instance metadata service (IMDSv2); and roles assumed
 * with STS AssumeRole. Temporary credentials are cached and fetched again before they expire.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aks_file.h"
#include "aws_internal.h"

/* Temporary credentials are fetched again this long before they expire (or at half their
 * life, when that is shorter: a role assumed for 15 minutes is not fetched every call). */
#define REFRESH_MARGIN_MS (5 * 60 * 1000)
/* The metadata services answer on the link at once or not at all: a host that is not on EC2
 * or ECS is told so within this budget, not after a connect timeout. */
#define METADATA_BUDGET_MS 3000
#define IMDS_DEFAULT       "http://169.254.169.254"
#define ECS_DEFAULT_HOST   "http://169.254.170.2"
/* A token file, a credential answer: small. */
#define SMALL_MAX (64u * 1024)

struct aks_aws_source {
	aks_aws_source_kind kind;
	aks_cloud *cloud;
	pthread_mutex_t lock;
	aks_aws_creds cached; /* under lock */
	int64_t fetched_ms;   /* wall clock of the fetch */
	char *describe;
	char *region;
	char *sts_endpoint;
	char *role_arn, *session_name; /* web identity, assume role */
	char *token_file;              /* web identity */
	char *url;                     /* container: the endpoint; imds: its base */
	char *auth_token, *auth_token_file;
	aks_aws_source *parent; /* assume role: the signer, borrowed */
};

static int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void wipe_free(char *s)
{
	if (s) {
		memset(s, 0, strlen(s));
		free(s);
	}
}

void aks_aws_creds_clear(aks_aws_creds *c)
{
	wipe_free(c->key_id);
	wipe_free(c->secret);
	wipe_free(c->token);
	memset(c, 0, sizeof(*c));
}

bool aks_aws_creds_copy(aks_aws_creds *dst, const aks_aws_creds *src)
{
	memset(dst, 0, sizeof(*dst));
	dst->key_id = src->key_id ? strdup(src->key_id) : NULL;
	dst->secret = src->secret ? strdup(src->secret) : NULL;
	dst->token = src->token ? strdup(src->token) : NULL;
	dst->expires_ms = src->expires_ms;
	if ((src->key_id && !dst->key_id) || (src->secret && !dst->secret) ||
	    (src->token && !dst->token)) {
		aks_aws_creds_clear(dst);
		return false;
	}
	return true;
}

void aks_aws_session_name(const char *prefix, const char *subject, char *buf, size_t size)
{
	size_t o = 0, max = size - 1 < 64 ? size - 1 : 64;
	for (const char *p = prefix; *p && o < max; p++)
		buf[o++] = *p;
	for (const char *p = subject ? subject : ""; *p && o < max; p++) {
		char ch = *p;
		bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		          (ch >= '0' && ch <= '9') || strchr("_+=,.@-", ch);
		buf[o++] = ok && ch ? ch : '_';
	}
	buf[o] = '\0';
}

/* ---- the environment ---- */

static char *env_dup(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? strdup(v) : NULL;
}

static char *home_file(const char *var, const char *rel)
{
	const char *v = getenv(var);
	if (v && *v)
		return strdup(v);
	const char *home = getenv("HOME");
	char *p = NULL;
	if (asprintf(&p, "%s/.aws/%s", home && *home ? home : "/", rel) < 0)
		p = NULL;
	return p;
}

/* Loads a shared file; a missing one is empty. AKS_ECONFIG names its bad line. */
static int load_ini(const aks_host_api *host, const char *who, const char *path, aks_aws_ini *ini,
                    aks_error **err)
{
	int line = 0, rc = aks__aws_ini_load(path, ini, &line);
	if (rc == AKS_ENOTFOUND)
		return AKS_OK;
	if (rc == AKS_ECONFIG)
		return host->error_set(err, AKS_ECONFIG,
		                       "%s: %s:%d: not a line of an AWS shared file ([section], "
		                       "key = value, or a comment)",
		                       who, path, line);
	if (rc == AKS_ENOMEM)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	if (rc != AKS_OK)
		return host->error_set(err, AKS_ECONFIG, "%s: cannot read %s: %s", who, path,
		                       strerror(errno));
	return AKS_OK;
}

int aks_aws_env_load(aks_aws_env *env, const aks_host_api *host, const char *who,
                     const char *region, aks_error **err)
{
	memset(env, 0, sizeof(*env));
	env->profile = env_dup("AWS_PROFILE");
	if (!env->profile)
		env->profile = strdup("default");
	env->credentials_file = home_file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
	env->config_file = home_file("AWS_CONFIG_FILE", "config");
	if (region && *region)
		env->region = strdup(region);
	else if (!(env->region = env_dup("AWS_REGION")))
		env->region = env_dup("AWS_DEFAULT_REGION");
	if (!env->profile || !env->credentials_file || !env->config_file ||
	    (region && *region && !env->region))
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	if (env->region)
		return AKS_OK;
	aks_aws_ini ini;
	int rc = load_ini(host, who, env->config_file, &ini, err);
	if (rc != AKS_OK)
		return rc;
	char section[300];
	aks__aws_config_section(env->profile, section, sizeof(section));
	const char *r = aks__aws_ini_get(&ini, section, "region");
	if (r && *r && !(env->region = strdup(r)))
		rc = host->error_set(err, AKS_ENOMEM, "out of memory");
	aks__aws_ini_free(&ini);
	return rc;
}

void aks_aws_env_free(aks_aws_env *env)
{
	free(env->region);
	free(env->profile);
	free(env->credentials_file);
	free(env->config_file);
	memset(env, 0, sizeof(*env));
}

/* ---- sources ---- */

static aks_aws_source *source_new(aks_cloud *cloud, aks_aws_source_kind kind)
{
	aks_aws_source *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->kind = kind;
	s->cloud = cloud;
	pthread_mutex_init(&s->lock, NULL);
	return s;
}

void aks_aws_source_free(aks_aws_source *s)
{
	if (!s)
		return;
	aks_aws_creds_clear(&s->cached);
	pthread_mutex_destroy(&s->lock);
	free(s->describe);
	free(s->region);
	free(s->sts_endpoint);
	free(s->role_arn);
	free(s->session_name);
	free(s->token_file);
	free(s->url);
	wipe_free(s->auth_token);
	free(s->auth_token_file);
	free(s);
}

aks_aws_source_kind aks_aws_source_kind_of(const aks_aws_source *s)
{
	return s->kind;
}

const char *aks_aws_source_describe(const aks_aws_source *s)
{
	return s && s->describe ? s->describe : "AWS credentials";
}

static int oom(aks_cloud *cloud, aks_aws_source *s, aks_error **err)
{
	aks_aws_source_free(s);
	return cloud->host->error_set(err, AKS_ENOMEM, "out of memory");
}

/* Static keys from the environment, or NULL in *out when AWS_ACCESS_KEY_ID is unset. */
static int from_env(aks_cloud *cloud, aks_aws_source **out, aks_error **err)
{
	*out = NULL;
	const char *id = getenv("AWS_ACCESS_KEY_ID"), *secret = getenv("AWS_SECRET_ACCESS_KEY");
	if (!id || !*id)
		return AKS_OK;
	if (!secret || !*secret)
		return cloud->host->error_set(err, AKS_ECONFIG,
		                              "%s: AWS_ACCESS_KEY_ID is set but "
		                              "AWS_SECRET_ACCESS_KEY is not",
		                              cloud->who);
	aks_aws_source *s = source_new(cloud, AKS_AWS_SRC_ENV);
	if (!s || !(s->cached.key_id = strdup(id)) || !(s->cached.secret = strdup(secret)) ||
	    !(s->describe = strdup("the environment (AWS_ACCESS_KEY_ID)")))
		return oom(cloud, s, err);
	const char *token = getenv("AWS_SESSION_TOKEN");
	if (token && *token && !(s->cached.token = strdup(token)))
		return oom(cloud, s, err);
	*out = s;
	return AKS_OK;
}

/* Static keys of the profile from the shared files; NULL in *out when the profile is the
 * default one, not set explicitly, and has none. */
static int from_profile(aks_cloud *cloud, const aks_aws_env *env, aks_aws_source **out,
                        aks_error **err)
{
	const aks_host_api *host = cloud->host;
	*out = NULL;
	bool explicit = getenv("AWS_PROFILE") && *getenv("AWS_PROFILE");
	aks_aws_ini creds = {0}, config = {0};
	int rc = load_ini(host, cloud->who, env->credentials_file, &creds, err);
	if (rc == AKS_OK)
		rc = load_ini(host, cloud->who, env->config_file, &config, err);
	char section[300];
	aks__aws_config_section(env->profile, section, sizeof(section));
	const aks_aws_ini *in =
	    aks__aws_ini_get(&creds, env->profile, "aws_access_key_id") ? &creds : &config;
	const char *sec = in == &creds ? env->profile : section;
	const char *id = aks__aws_ini_get(in, sec, "aws_access_key_id");
	const char *secret = aks__aws_ini_get(in, sec, "aws_secret_access_key");
	const char *token = aks__aws_ini_get(in, sec, "aws_session_token");
	const char *file = in == &creds ? env->credentials_file : env->config_file;
	aks_aws_source *s = NULL;
	if (rc != AKS_OK) {
		/* the shared file's own error */
	} else if (id && *id && secret && *secret) {
		s = source_new(cloud, AKS_AWS_SRC_PROFILE);
		if (!s || !(s->cached.key_id = strdup(id)) ||
		    !(s->cached.secret = strdup(secret)) ||
		    (token && *token && !(s->cached.token = strdup(token))) ||
		    asprintf(&s->describe, "profile '%s' of %s", env->profile, file) < 0) {
			if (s)
				s->describe = NULL;
			rc = oom(cloud, s, err);
			s = NULL;
		}
	} else if (id && *id) {
		rc = host->error_set(err, AKS_ECONFIG,
		                     "%s: profile '%s' of %s has aws_access_key_id but no "
		                     "aws_secret_access_key",
		                     cloud->who, env->profile, file);
	} else if (explicit) {
		bool known =
		    aks__aws_ini_has(&creds, env->profile) || aks__aws_ini_has(&config, section);
		rc = host->error_set(
		    err, AKS_ECONFIG,
		    known ? "%s: AWS_PROFILE '%s' has no aws_access_key_id and "
		            "aws_secret_access_key in "
		            "%s or %s (aksandbox reads a profile's static keys; for a role, set "
		            "AWS_ROLE_ARN with AWS_WEB_IDENTITY_TOKEN_FILE, or the principal's "
		            "role_arn)"
		          : "%s: AWS_PROFILE '%s' is in neither %s nor %s",
		    cloud->who, env->profile, env->credentials_file, env->config_file);
	}
	aks__aws_ini_free(&creds);
	aks__aws_ini_free(&config);
	*out = s;
	return rc;
}

static int sts_endpoint_of(aks_cloud *cloud, const char *region, const char *configured, char **out,
                           aks_error **err)
{
	return aks_aws_endpoint(cloud->host, cloud->who, "sts", region ? region : "us-east-1",
	                        configured, out, err);
}

int aks_aws_chain_new(aks_cloud *cloud, const aks_aws_env *env, const char *sts_endpoint,
                      aks_aws_source **out, aks_error **err)
{
	const aks_host_api *host = cloud->host;
	*out = NULL;
	aks_aws_source *s = NULL;
	int rc = from_env(cloud, &s, err);
	if (rc == AKS_OK && !s)
		rc = from_profile(cloud, env, &s, err);
	if (rc != AKS_OK || s) {
		*out = s;
		return rc;
	}
	const char *token_file = getenv("AWS_WEB_IDENTITY_TOKEN_FILE");
	const char *role = getenv("AWS_ROLE_ARN");
	if (token_file && *token_file) {
		if (!role || !*role)
			return host->error_set(err, AKS_ECONFIG,
			                       "%s: AWS_WEB_IDENTITY_TOKEN_FILE is set but "
			                       "AWS_ROLE_ARN is not",
			                       cloud->who);
		s = source_new(cloud, AKS_AWS_SRC_WEB_IDENTITY);
		if (!s || !(s->token_file = strdup(token_file)) || !(s->role_arn = strdup(role)) ||
		    (env->region && !(s->region = strdup(env->region))))
			return oom(cloud, s, err);
		const char *name = getenv("AWS_ROLE_SESSION_NAME");
		if (name && *name)
			s->session_name = strdup(name);
		else if (asprintf(&s->session_name, "aksandbox-%lld", (long long)wall_ms()) < 0)
			s->session_name = NULL;
		if (!s->session_name || asprintf(&s->describe, "role %s through web identity (%s)",
		                                 role, token_file) < 0)
			return s->describe = NULL, oom(cloud, s, err);
		if ((rc = sts_endpoint_of(cloud, env->region, sts_endpoint, &s->sts_endpoint,
		                          err)) != AKS_OK) {
			aks_aws_source_free(s);
			return rc;
		}
		*out = s;
		return AKS_OK;
	}
	const char *rel = getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
	const char *full = getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI");
	if ((rel && *rel) || (full && *full)) {
		s = source_new(cloud, AKS_AWS_SRC_CONTAINER);
		if (!s)
			return oom(cloud, s, err);
		if (rel && *rel ? asprintf(&s->url, "%s%s", ECS_DEFAULT_HOST, rel) < 0
		                : !(s->url = strdup(full)))
			return s->url = NULL, oom(cloud, s, err);
		s->auth_token = env_dup("AWS_CONTAINER_AUTHORIZATION_TOKEN");
		s->auth_token_file = env_dup("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
		if (asprintf(&s->describe, "the container credentials endpoint %s", s->url) < 0)
			return s->describe = NULL, oom(cloud, s, err);
		if (strncmp(s->url, "http://", 7) != 0 && strncmp(s->url, "https://", 8) != 0) {
			rc =
			    host->error_set(err, AKS_ECONFIG,
			                    "%s: the container credentials endpoint '%s' is not an "
			                    "http:// or https:// URL",
			                    cloud->who, s->url);
			aks_aws_source_free(s);
			return rc;
		}
		*out = s;
		return AKS_OK;
	}
	const char *disabled = getenv("AWS_EC2_METADATA_DISABLED");
	if (disabled && strcasecmp(disabled, "true") == 0)
		return host->error_set(
		    err, AKS_ECONFIG,
		    "%s: no AWS credentials: none in the environment "
		    "(AWS_ACCESS_KEY_ID), profile '%s' has none in %s or %s, no web "
		    "identity (AWS_WEB_IDENTITY_TOKEN_FILE) or container endpoint "
		    "(AWS_CONTAINER_CREDENTIALS_*), and the instance metadata "
		    "service is disabled (AWS_EC2_METADATA_DISABLED)",
		    cloud->who, env->profile, env->credentials_file, env->config_file);
	s = source_new(cloud, AKS_AWS_SRC_IMDS);
	const char *base = getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
	if (!s || !(s->url = strdup(base && *base ? base : IMDS_DEFAULT)))
		return oom(cloud, s, err);
	size_t n = strlen(s->url);
	while (n > 8 && s->url[n - 1] == '/')
		s->url[--n] = '\0';
	if (asprintf(&s->describe, "the instance metadata service %s", s->url) < 0)
		return s->describe = NULL, oom(cloud, s, err);
	*out = s;
	return AKS_OK;
}

int aks_aws_assume_role_new(aks_cloud *cloud, aks_aws_source *parent, const char *region,
                            const char *sts_endpoint, const char *role_arn,
                            const char *session_name, aks_aws_source **out, aks_error **err)
{
	*out = NULL;
	aks_aws_source *s = source_new(cloud, AKS_AWS_SRC_ASSUME_ROLE);
	if (!s || !(s->role_arn = strdup(role_arn)) || !(s->session_name = strdup(session_name)) ||
	    !(s->region = strdup(region ? region : "us-east-1")) ||
	    asprintf(&s->describe, "role %s assumed as %s with %s", role_arn, session_name,
	             aks_aws_source_describe(parent)) < 0) {
		if (s)
			s->describe = NULL;
		return oom(cloud, s, err);
	}
	s->parent = parent;
	int rc = sts_endpoint_of(cloud, region, sts_endpoint, &s->sts_endpoint, err);
	if (rc != AKS_OK) {
		aks_aws_source_free(s);
		return rc;
	}
	*out = s;
	return AKS_OK;
}

/* ---- fetching ---- */

/* A form's value, percent-encoded; NULL when out of memory. */
static char *form_value(const char *v)
{
	return aks_cloud_escape(v);
}

static int fetch_web_identity(aks_aws_source *s, const aks_call *call, aks_aws_creds *out,
                              aks_error **err)
{
	const aks_host_api *host = s->cloud->host;
	size_t len = 0;
	char *token =
	    aks__file_read(s->token_file, SMALL_MAX, &len); /* it rotates: read each time */
	if (!token)
		return host->error_set(err, AKS_EPROVISION,
		                       "%s: cannot read the web identity token %s: %s",
		                       s->cloud->who, s->token_file, strerror(errno));
	while (len && (token[len - 1] == '\n' || token[len - 1] == '\r' || token[len - 1] == ' '))
		token[--len] = '\0';
	char *t = form_value(token), *r = form_value(s->role_arn), *n = form_value(s->session_name);
	char *form = NULL;
	int rc = AKS_OK;
	if (!t || !r || !n ||
	    asprintf(&form,
	             "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=%s&"
	             "RoleSessionName=%s&WebIdentityToken=%s",
	             r, n, t) < 0) {
		form = NULL;
		rc = host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	if (rc == AKS_OK) {
		char what[600];
		snprintf(what, sizeof(what), "assume role %s with a web identity", s->role_arn);
		rc = aks__aws_sts_credentials(s->cloud, s->sts_endpoint,
		                              s->region ? s->region : "us-east-1", NULL, form, what,
		                              call, out, err);
	}
	memset(token, 0, len);
	free(token);
	wipe_free(t);
	free(r);
	free(n);
	wipe_free(form);
	return rc;
}

static int fetch_assume_role(aks_aws_source *s, const aks_call *call, aks_aws_creds *out,
                             aks_error **err)
{
	const aks_host_api *host = s->cloud->host;
	aks_aws_creds signer = {0};
	int rc = aks_aws_source_get(s->parent, call, &signer, err);
	if (rc != AKS_OK)
		return rc;
	char *r = form_value(s->role_arn), *n = form_value(s->session_name), *form = NULL;
	if (!r || !n ||
	    asprintf(&form,
	             "Action=AssumeRole&Version=2011-06-15&RoleArn=%s&RoleSessionName=%s&"
	             "DurationSeconds=3600",
	             r, n) < 0) {
		form = NULL;
		rc = host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	if (rc == AKS_OK) {
		char what[600];
		snprintf(what, sizeof(what), "assume role %s as %s", s->role_arn, s->session_name);
		rc = aks__aws_sts_credentials(s->cloud, s->sts_endpoint, s->region, &signer, form,
		                              what, call, out, err);
	}
	aks_aws_creds_clear(&signer);
	free(r);
	free(n);
	free(form);
	return rc;
}

/* Reads the JSON the metadata services answer ({AccessKeyId, SecretAccessKey, Token,
 * Expiration}). */
static bool parse_json_creds(const char *body, size_t len, aks_aws_creds *out)
{
	memset(out, 0, sizeof(*out));
	json_tokener *tok = json_tokener_new();
	json_object *o = tok && body ? json_tokener_parse_ex(tok, body, (int)len) : NULL;
	json_tokener_free(tok);
	json_object *v;
	const char *exp = NULL;
#define GET(key, dst)                                                                              \
	if (json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string) &&   \
	    json_object_get_string_len(v) > 0)                                                     \
		dst = strdup(json_object_get_string(v));
	if (json_object_is_type(o, json_type_object)) {
		GET("AccessKeyId", out->key_id);
		GET("SecretAccessKey", out->secret);
		GET("Token", out->token);
		if (json_object_object_get_ex(o, "Expiration", &v) &&
		    json_object_is_type(v, json_type_string))
			exp = json_object_get_string(v);
	}
#undef GET
	out->expires_ms = exp ? aks_aws_parse_time(exp) : 0;
	json_object_put(o);
	if (!out->key_id || !out->secret || out->expires_ms < 0) {
		aks_aws_creds_clear(out);
		return false;
	}
	return true;
}

/* A GET or PUT to a metadata service within METADATA_BUDGET_MS (and the call's deadline). */
static int metadata_request(aks_aws_source *s, const aks_call *call, const char *method,
                            const char *url, struct curl_slist *h, aks_cloud_req *r,
                            aks_error **err)
{
	const aks_host_api *host = s->cloud->host;
	aks_call bounded = call ? *call : (aks_call){AKS_CALL_INIT};
	int64_t budget = host->now_ms() + METADATA_BUDGET_MS;
	bool ours = !bounded.deadline_ms || bounded.deadline_ms > budget;
	if (ours)
		bounded.deadline_ms = budget;
	*r = (aks_cloud_req){
	    .what = s->describe,
	    .method = method,
	    .url = url,
	    .headers = h,
	    .retry = AKS_CLOUD_RETRY_SAFE,
	    .resp_max = SMALL_MAX,
	};
	aks_error *e = NULL;
	int rc = aks_cloud_http(s->cloud, r, &bounded, &e);
	if (rc == AKS_ETIMEOUT && ours) {
		host->error_free(e);
		return host->error_set(err, AKS_EPROVISION,
		                       "%s: no AWS credentials: %s did not answer within %d ms (no "
		                       "other source is set: the environment, a profile, web "
		                       "identity or a container endpoint)",
		                       s->cloud->who, s->describe, METADATA_BUDGET_MS);
	}
	if (rc != AKS_OK) {
		rc = host->error_set(err, rc, "%s", host->error_message(e));
		host->error_free(e);
	}
	return rc;
}

static int refused(aks_aws_source *s, const aks_cloud_req *r, aks_error **err)
{
	char why[200];
	size_t n = r->resp.len < sizeof(why) - 1 ? r->resp.len : sizeof(why) - 1;
	for (size_t i = 0; i < n; i++)
		why[i] = (unsigned char)r->resp.data[i] < 0x20 ? ' ' : r->resp.data[i];
	why[n] = '\0';
	return s->cloud->host->error_set(err, AKS_EPROVISION,
	                                 "%s: cannot get AWS credentials from %s: HTTP %ld%s%s",
	                                 s->cloud->who, s->describe, r->status, n ? ": " : "", why);
}

static int fetch_container(aks_aws_source *s, const aks_call *call, aks_aws_creds *out,
                           aks_error **err)
{
	const aks_host_api *host = s->cloud->host;
	struct curl_slist *h = NULL;
	char *token = NULL;
	size_t len = 0;
	if (s->auth_token_file) {
		if (!(token = aks__file_read(s->auth_token_file, SMALL_MAX, &len)))
			return host->error_set(
			    err, AKS_EPROVISION,
			    "%s: cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE "
			    "%s: %s",
			    s->cloud->who, s->auth_token_file, strerror(errno));
		while (len && (token[len - 1] == '\n' || token[len - 1] == '\r'))
			token[--len] = '\0';
	}
	const char *auth = token ? token : s->auth_token;
	bool ok = !auth || aks_cloud_header_add(&h, "Authorization", auth);
	if (token) {
		memset(token, 0, len);
		free(token);
	}
	if (!ok)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	aks_cloud_req r;
	int rc = metadata_request(s, call, "GET", s->url, h, &r, err);
	aks_cloud_headers_free(h);
	if (rc == AKS_OK && r.status != 200)
		rc = refused(s, &r, err);
	else if (rc == AKS_OK && !parse_json_creds(r.resp.data, r.resp.len, out))
		rc = host->error_set(err, AKS_EPROVISION,
		                     "%s: %s answered without complete credentials", s->cloud->who,
		                     s->describe);
	if (r.resp.data)
		memset(r.resp.data, 0, r.resp.len);
	aks_cloud_req_free(&r);
	return rc;
}

static int fetch_imds(aks_aws_source *s, const aks_call *call, aks_aws_creds *out, aks_error **err)
{
	const aks_host_api *host = s->cloud->host;
	char *url = NULL, *token = NULL, *role = NULL;
	struct curl_slist *h = NULL;
	aks_cloud_req r = {0};
	int rc = AKS_OK;
	/* IMDSv2: a session token first, PUT, then every read carries it */
	if (asprintf(&url, "%s/latest/api/token", s->url) < 0 ||
	    !aks_cloud_header_add(&h, "X-aws-ec2-metadata-token-ttl-seconds", "21600")) {
		url = NULL;
		rc = host->error_set(err, AKS_ENOMEM, "out of memory");
		goto out;
	}
	if ((rc = metadata_request(s, call, "PUT", url, h, &r, err)) != AKS_OK)
		goto out;
	if (r.status != 200 || !r.resp.len) {
		rc = refused(s, &r, err);
		goto out;
	}
	token = strndup(r.resp.data, r.resp.len);
	aks_cloud_headers_free(h);
	h = NULL;
	aks_cloud_req_free(&r);
	free(url);
	url = NULL;
	if (!token || !aks_cloud_header_safe(token) ||
	    !aks_cloud_header_add(&h, "X-aws-ec2-metadata-token", token) ||
	    asprintf(&url, "%s/latest/meta-data/iam/security-credentials/", s->url) < 0) {
		url = NULL;
		rc = host->error_set(err, token ? AKS_ENOMEM : AKS_ENOMEM, "out of memory");
		goto out;
	}
	if ((rc = metadata_request(s, call, "GET", url, h, &r, err)) != AKS_OK)
		goto out;
	if (r.status != 200 || !r.resp.len) {
		rc = r.status == 404 ? host->error_set(err, AKS_EPROVISION,
		                                       "%s: %s: this instance has no IAM role "
		                                       "(instance profile)",
		                                       s->cloud->who, s->describe)
		                     : refused(s, &r, err);
		goto out;
	}
	size_t n = strcspn(r.resp.data, "\r\n");
	role = strndup(r.resp.data, n);
	aks_cloud_req_free(&r);
	free(url);
	url = NULL;
	char *er = role ? aks_cloud_escape(role) : NULL;
	if (!er ||
	    asprintf(&url, "%s/latest/meta-data/iam/security-credentials/%s", s->url, er) < 0) {
		url = NULL;
		free(er);
		rc = host->error_set(err, AKS_ENOMEM, "out of memory");
		goto out;
	}
	free(er);
	if ((rc = metadata_request(s, call, "GET", url, h, &r, err)) != AKS_OK)
		goto out;
	if (r.status != 200)
		rc = refused(s, &r, err);
	else if (!parse_json_creds(r.resp.data, r.resp.len, out))
		rc = host->error_set(err, AKS_EPROVISION,
		                     "%s: %s answered without complete credentials for role %s",
		                     s->cloud->who, s->describe, role);
out:
	if (r.resp.data)
		memset(r.resp.data, 0, r.resp.len);
	aks_cloud_req_free(&r);
	aks_cloud_headers_free(h);
	wipe_free(token);
	free(role);
	free(url);
	return rc;
}

static bool fresh(const aks_aws_source *s, int64_t now)
{
	const aks_aws_creds *c = &s->cached;
	if (!c->key_id)
		return false;
	if (!c->expires_ms)
		return true;
	int64_t life = c->expires_ms - s->fetched_ms;
	int64_t margin = life / 2 < REFRESH_MARGIN_MS ? life / 2 : REFRESH_MARGIN_MS;
	return now < c->expires_ms - margin;
}

int aks_aws_source_get(aks_aws_source *s, const aks_call *call, aks_aws_creds *out, aks_error **err)
{
	const aks_host_api *host = s->cloud->host;
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&s->lock);
	int rc = AKS_OK;
	int64_t now = wall_ms();
	if (!fresh(s, now) && s->kind != AKS_AWS_SRC_ENV && s->kind != AKS_AWS_SRC_PROFILE) {
		aks_aws_creds got = {0};
		aks_error *e = NULL;
		switch (s->kind) {
		case AKS_AWS_SRC_WEB_IDENTITY:
			rc = fetch_web_identity(s, call, &got, &e);
			break;
		case AKS_AWS_SRC_CONTAINER:
			rc = fetch_container(s, call, &got, &e);
			break;
		case AKS_AWS_SRC_IMDS:
			rc = fetch_imds(s, call, &got, &e);
			break;
		case AKS_AWS_SRC_ASSUME_ROLE:
			rc = fetch_assume_role(s, call, &got, &e);
			break;
		default:
			rc = host->error_set(&e, AKS_ERROR, "unknown credential source");
		}
		if (rc == AKS_OK) {
			aks_aws_creds_clear(&s->cached);
			s->cached = got;
			s->fetched_ms = now;
			host->log(AKS_LOG_DEBUG, s->cloud->who,
			          "AWS credentials from %s, expiring in %lld s", s->describe,
			          got.expires_ms ? (long long)(got.expires_ms - now) / 1000 : -1LL);
		} else if (s->cached.key_id && s->cached.expires_ms > now && rc != AKS_ECANCELLED) {
			/* the refresh failed but what we have is still good: use it, say why */
			host->log(AKS_LOG_WARNING, s->cloud->who,
			          "keeping AWS credentials from %s until they expire: %s",
			          s->describe, host->error_message(e));
			host->error_free(e);
			e = NULL;
			rc = AKS_OK;
		}
		if (rc != AKS_OK) {
			rc = host->error_set(err, rc, "%s", host->error_message(e));
			host->error_free(e);
		}
	}
	if (rc == AKS_OK && !aks_aws_creds_copy(out, &s->cached))
		rc = host->error_set(err, AKS_ENOMEM, "out of memory");
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void aks_aws_source_invalidate(aks_aws_source *s)
{
	if (s->kind == AKS_AWS_SRC_ENV || s->kind == AKS_AWS_SRC_PROFILE)
		return; /* nothing to fetch again */
	pthread_mutex_lock(&s->lock);
	aks_aws_creds_clear(&s->cached);
	pthread_mutex_unlock(&s->lock);
}
