/*
 * plugins/common/aws_request.c - signed requests to AWS (aks_aws.h): endpoints as the SDKs
 * resolve them, the AWS JSON protocol's calls, and AWS's error answers read in one place.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aks_aws.h"
#include "aks_text.h"

/* Throttled requests are sent again at most this many times, after a pause that doubles. */
#define THROTTLE_TRIES    4
#define THROTTLE_FIRST_MS 200

int aks_aws_endpoint(const aks_host_api *host, const char *who, const char *service,
                     const char *region, const char *configured, char **out, aks_error **err)
{
	*out = NULL;
	char var[64];
	int n = snprintf(var, sizeof(var), "AWS_ENDPOINT_URL_%s", service);
	for (int i = 17; i < n; i++)
		var[i] = (char)toupper((unsigned char)var[i]);
	const char *v = configured && *configured ? configured : getenv(var);
	if (!v || !*v)
		v = getenv("AWS_ENDPOINT_URL");
	int rc;
	if (v && *v)
		rc = (*out = strdup(v)) ? AKS_OK : AKS_ENOMEM;
	else
		rc = asprintf(out, "https://%s.%s.amazonaws.com%s", service, region,
		              strncmp(region, "cn-", 3) == 0 ? ".cn" : "") < 0
		         ? (*out = NULL, AKS_ENOMEM)
		         : AKS_OK;
	if (rc != AKS_OK)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	char key[64];
	snprintf(key, sizeof(key), "%s endpoint", service);
	if ((rc = aks_cloud_check_url(host, who, key, *out, err)) != AKS_OK) {
		free(*out);
		*out = NULL;
	}
	return rc;
}

/* ---- errors ---- */

static void copy_printable(char *dst, size_t size, const char *src, size_t len)
{
	size_t o = 0;
	for (size_t i = 0; i < len && o + 1 < size; i++) {
		unsigned char ch = (unsigned char)src[i];
		dst[o++] = ch < 0x20 || ch == 0x7f ? ' ' : (char)ch;
	}
	dst[o] = '\0';
}

/* An error code as AWS writes it in a JSON __type or a header: "com.amazonaws.ssm#Code" or
 * "Code:http://..." both mean Code. */
static void set_code(aks_aws_fault *f, const char *v, size_t len)
{
	const char *hash = memchr(v, '#', len);
	if (hash) {
		len -= (size_t)(hash + 1 - v);
		v = hash + 1;
	}
	const char *colon = memchr(v, ':', len);
	if (colon)
		len = (size_t)(colon - v);
	copy_printable(f->code, sizeof(f->code), v, len);
}

void aks_aws_json_fault(long status, const char *body, size_t len, aks_aws_fault *f)
{
	memset(f, 0, sizeof(*f));
	f->status = status;
	json_tokener *tok = json_tokener_new();
	json_object *o = tok && body && len ? json_tokener_parse_ex(tok, body, (int)len) : NULL;
	json_tokener_free(tok);
	json_object *v;
	if (json_object_is_type(o, json_type_object)) {
		if (json_object_object_get_ex(o, "__type", &v) &&
		    json_object_is_type(v, json_type_string))
			set_code(f, json_object_get_string(v),
			         (size_t)json_object_get_string_len(v));
		if ((json_object_object_get_ex(o, "message", &v) ||
		     json_object_object_get_ex(o, "Message", &v)) &&
		    json_object_is_type(v, json_type_string))
			copy_printable(f->message, sizeof(f->message), json_object_get_string(v),
			               (size_t)json_object_get_string_len(v));
	}
	json_object_put(o);
	if (!f->code[0])
		snprintf(f->code, sizeof(f->code), "HTTP %ld", status);
	if (!f->message[0] && body && len && !o)
		copy_printable(f->message, sizeof(f->message), body, len < 200 ? len : 200);
}

bool aks_aws_fault_is_auth(const char *code)
{
	static const char *const auth[] = {"UnrecognizedClientException",
	                                   "InvalidSignatureException",
	                                   "SignatureDoesNotMatch",
	                                   "ExpiredTokenException",
	                                   "ExpiredToken",
	                                   "InvalidClientTokenId",
	                                   "AccessDenied",
	                                   "AccessDeniedException",
	                                   "IncompleteSignature",
	                                   "MissingAuthenticationToken",
	                                   "InvalidAccessKeyId",
	                                   "RequestExpired",
	                                   NULL};
	for (int i = 0; auth[i]; i++)
		if (strcmp(code, auth[i]) == 0)
			return true;
	return false;
}

static bool is_throttle(const aks_aws_fault *f)
{
	/* SQS answers RequestThrottled (and KmsThrottled); DynamoDB a table's or an account's
	 * ProvisionedThroughputExceededException. */
	static const char *const codes[] = {"ThrottlingException",
	                                    "Throttling",
	                                    "TooManyRequestsException",
	                                    "RequestLimitExceeded",
	                                    "RequestThrottled",
	                                    "KmsThrottled",
	                                    "ProvisionedThroughputExceededException",
	                                    NULL};
	for (int i = 0; codes[i]; i++)
		if (strcmp(f->code, codes[i]) == 0)
			return true;
	return false;
}

/* ---- times ---- */

int64_t aks_aws_parse_time(const char *s)
{
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	const char *p = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
	if (!p)
		return -1;
	long ms = 0;
	if (*p == '.') {
		long scale = 100;
		for (p++; isdigit((unsigned char)*p); p++, scale /= 10)
			ms += scale > 0 ? (*p - '0') * scale : 0;
	}
	if (strcmp(p, "Z") != 0 && strcmp(p, "+00:00") != 0)
		return -1;
	time_t t = timegm(&tm);
	return t == (time_t)-1 ? -1 : (int64_t)t * 1000 + ms;
}

/* ---- the JSON protocol ---- */

/* The request's headers: the protocol's, and the session token of temporary credentials
 * (which libcurl signs with the rest). */
static bool json_headers(struct curl_slist **h, const char *version, const char *target,
                         const aks_aws_creds *cr)
{
	char type[48];
	snprintf(type, sizeof(type), "application/x-amz-json-%s", version ? version : "1.1");
	return aks_cloud_header_add(h, "Content-Type", type) &&
	       aks_cloud_header_add(h, "X-Amz-Target", target) &&
	       (!cr->token || aks_cloud_header_add(h, "X-Amz-Security-Token", cr->token));
}

static int send_signed(aks_aws_service *s, aks_cloud_req *r, const aks_aws_creds *cr,
                       const aks_call *call, aks_error **err)
{
	char scope[128];
	snprintf(scope, sizeof(scope), "aws:amz:%s:%s", s->region, s->service);
	r->aws_sigv4 = scope;
	r->aws_key_id = cr->key_id;
	r->aws_secret = cr->secret;
	int rc = aks_cloud_http(s->cloud, r, call, err);
	r->aws_sigv4 = r->aws_key_id = r->aws_secret = NULL;
	return rc;
}

static int fault_error(aks_aws_service *s, const char *what, const aks_aws_fault *f,
                       aks_error **err)
{
	const aks_host_api *host = s->cloud->host;
	if (aks_aws_fault_is_auth(f->code))
		return host->error_set(
		    err, AKS_EPROVISION, "%s: %s: AWS refused the credentials from %s: %s: %s",
		    s->cloud->who, what, aks_aws_source_describe(s->source), f->code, f->message);
	return host->error_set(err, AKS_EPROVISION, "%s: %s: %s: %s", s->cloud->who, what, f->code,
	                       f->message[0] ? f->message : "(no message)");
}

int aks_aws_json_call(aks_aws_service *s, const char *what, const char *target, json_object *body,
                      aks_cloud_retry retry, const aks_call *call, json_object **out,
                      aks_aws_fault *fault, aks_error **err)
{
	const aks_host_api *host = s->cloud->host;
	*out = NULL;
	memset(fault, 0, sizeof(*fault));
	size_t body_len = 0;
	const char *text =
	    json_object_to_json_string_length(body, JSON_C_TO_STRING_PLAIN, &body_len);
	if (!text)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	long pause_ms = THROTTLE_FIRST_MS;
	bool refreshed = false;
	for (int try = 1;; try++) {
		aks_aws_creds cr = {0};
		int rc = aks_aws_source_get(s->source, call, &cr, err);
		if (rc != AKS_OK)
			return rc;
		struct curl_slist *h = NULL;
		if (!json_headers(&h, s->json_version, target, &cr)) {
			aks_aws_creds_clear(&cr);
			return host->error_set(err, AKS_ENOMEM, "out of memory");
		}
		aks_cloud_req r = {
		    .what = what,
		    .method = "POST",
		    .url = s->endpoint,
		    .headers = h,
		    .body = text,
		    .body_len = body_len,
		    .retry = retry,
		};
		rc = send_signed(s, &r, &cr, call, err);
		aks_cloud_headers_free(h);
		aks_aws_creds_clear(&cr);
		if (rc != AKS_OK) {
			aks_cloud_req_free(&r);
			return rc;
		}
		if (r.status >= 200 && r.status < 300) {
			json_tokener *tok = json_tokener_new();
			json_object *o =
			    tok ? json_tokener_parse_ex(tok, r.resp.data ? r.resp.data : "",
			                                (int)r.resp.len)
			        : NULL;
			json_tokener_free(tok);
			aks_cloud_req_free(&r);
			if (!json_object_is_type(o, json_type_object)) {
				json_object_put(o);
				return host->error_set(err, AKS_EPROVISION,
				                       "%s: %s: the answer is not a JSON object",
				                       s->cloud->who, what);
			}
			*out = o;
			return AKS_OK;
		}
		aks_aws_json_fault(r.status, r.resp.data, r.resp.len, fault);
		aks_cloud_req_free(&r);
		/* temporary credentials the service saw expire before we did: fetched again, once
		 */
		if (!refreshed && (strcmp(fault->code, "ExpiredTokenException") == 0 ||
		                   strcmp(fault->code, "ExpiredToken") == 0)) {
			refreshed = true;
			aks_aws_source_invalidate(s->source);
			continue;
		}
		if (retry != AKS_CLOUD_RETRY_NEVER && is_throttle(fault) && try < THROTTLE_TRIES) {
			if ((rc = aks_cloud_pause(s->cloud, call, pause_ms, err)) != AKS_OK)
				return rc;
			pause_ms *= 2;
			continue;
		}
		return fault_error(s, what, fault, err);
	}
}
