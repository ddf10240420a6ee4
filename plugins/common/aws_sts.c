/*
 * plugins/common/aws_sts.c - AWS STS over its query protocol: a form POSTed, signed or not,
 * and the answer's XML read with libxml2 (no network, no entities: STS's answers have none).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "aws_internal.h"

/* STS answers are a few KiB; a bigger one is not read whole. */
#define STS_ANSWER_MAX (64u * 1024)

static void quiet(void *ctx, const char *fmt, ...)
{
	(void)ctx, (void)fmt;
}

static xmlDocPtr parse(const char *xml, size_t len)
{
	if (!xml || !len || len > STS_ANSWER_MAX)
		return NULL;
	/* an answer that is not XML is the caller's to word: libxml2 prints nothing of it (its
	 * error handlers are the thread's, put back after) */
	xmlGenericErrorFunc saved = xmlGenericError;
	void *saved_ctx = xmlGenericErrorContext;
	xmlSetGenericErrorFunc(NULL, quiet);
	xmlDocPtr doc = xmlReadMemory(xml, (int)len, "sts.xml", NULL,
	                              XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
	xmlSetGenericErrorFunc(saved_ctx, saved);
	return doc;
}

/* The first element named name under n (n itself included), depth first. */
static xmlNodePtr find(xmlNodePtr n, const char *name)
{
	for (; n; n = n->next) {
		if (n->type != XML_ELEMENT_NODE)
			continue;
		if (xmlStrcmp(n->name, (const xmlChar *)name) == 0)
			return n;
		xmlNodePtr in = find(n->children, name);
		if (in)
			return in;
	}
	return NULL;
}

/* The text of the child element name of n, malloc'd; NULL when there is none. */
static char *child_text(xmlNodePtr n, const char *name)
{
	for (xmlNodePtr c = n ? n->children : NULL; c; c = c->next) {
		if (c->type != XML_ELEMENT_NODE || xmlStrcmp(c->name, (const xmlChar *)name) != 0)
			continue;
		xmlChar *t = xmlNodeGetContent(c);
		char *s = t ? strdup((const char *)t) : NULL;
		if (t) {
			memset(t, 0, strlen((const char *)t));
			xmlFree(t);
		}
		return s;
	}
	return NULL;
}

bool aks__aws_sts_parse_credentials(const char *xml, size_t len, aks_aws_creds *out)
{
	memset(out, 0, sizeof(*out));
	xmlDocPtr doc = parse(xml, len);
	xmlNodePtr c = doc ? find(xmlDocGetRootElement(doc), "Credentials") : NULL;
	char *expiration = NULL;
	if (c) {
		out->key_id = child_text(c, "AccessKeyId");
		out->secret = child_text(c, "SecretAccessKey");
		out->token = child_text(c, "SessionToken");
		expiration = child_text(c, "Expiration");
	}
	xmlFreeDoc(doc);
	out->expires_ms = expiration ? aks_aws_parse_time(expiration) : -1;
	free(expiration);
	if (!out->key_id || !*out->key_id || !out->secret || !*out->secret || !out->token ||
	    out->expires_ms <= 0) {
		aks_aws_creds_clear(out);
		return false;
	}
	return true;
}

bool aks_aws_xml_fault(long status, const char *body, size_t len, aks_aws_fault *f)
{
	memset(f, 0, sizeof(*f));
	f->status = status;
	xmlDocPtr doc = parse(body, len);
	xmlNodePtr e = doc ? find(xmlDocGetRootElement(doc), "Error") : NULL;
	char *code = e ? child_text(e, "Code") : NULL,
	     *message = e ? child_text(e, "Message") : NULL;
	xmlFreeDoc(doc);
	bool ok = code && *code;
	if (ok)
		for (size_t i = 0, o = 0; code[i] && o + 1 < sizeof(f->code); i++)
			f->code[o++] = (unsigned char)code[i] < 0x20 ? ' ' : code[i],
			f->code[o] = '\0';
	if (message)
		for (size_t i = 0, o = 0; message[i] && o + 1 < sizeof(f->message); i++)
			f->message[o++] = (unsigned char)message[i] < 0x20 ? ' ' : message[i],
			f->message[o] = '\0';
	free(code);
	free(message);
	if (!ok)
		snprintf(f->code, sizeof(f->code), "HTTP %ld", status);
	return ok;
}

int aks__aws_sts_credentials(aks_cloud *cloud, const char *endpoint, const char *region,
                             const aks_aws_creds *signer, const char *form, const char *what,
                             const aks_call *call, aks_aws_creds *out, aks_error **err)
{
	const aks_host_api *host = cloud->host;
	memset(out, 0, sizeof(*out));
	struct curl_slist *h = NULL;
	if (!aks_cloud_header_add(&h, "Content-Type",
	                          "application/x-www-form-urlencoded; charset=utf-8") ||
	    (signer && signer->token &&
	     !aks_cloud_header_add(&h, "X-Amz-Security-Token", signer->token)))
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	char scope[128];
	snprintf(scope, sizeof(scope), "aws:amz:%s:sts", region);
	aks_cloud_req r = {
	    .what = what,
	    .method = "POST",
	    .url = endpoint,
	    .headers = h,
	    .body = form,
	    .body_len = strlen(form),
	    .retry = AKS_CLOUD_RETRY_SAFE, /* asking for credentials again does no harm */
	    .resp_max = STS_ANSWER_MAX,
	    .aws_sigv4 = signer ? scope : NULL,
	    .aws_key_id = signer ? signer->key_id : NULL,
	    .aws_secret = signer ? signer->secret : NULL,
	};
	int rc = aks_cloud_http(cloud, &r, call, err);
	aks_cloud_headers_free(h);
	if (rc == AKS_OK && r.status >= 200 && r.status < 300) {
		if (!aks__aws_sts_parse_credentials(r.resp.data, r.resp.len, out))
			rc = host->error_set(
			    err, AKS_EPROVISION,
			    "%s: cannot %s: STS answered without complete credentials", cloud->who,
			    what);
	} else if (rc == AKS_OK) {
		aks_aws_fault f;
		aks_aws_xml_fault(r.status, r.resp.data, r.resp.len, &f);
		rc = host->error_set(err, AKS_EPROVISION, "%s: cannot %s: STS refused: %s: %s",
		                     cloud->who, what, f.code,
		                     f.message[0] ? f.message : "(no message)");
	}
	if (r.resp.data)
		memset(r.resp.data, 0, r.resp.len); /* it held a secret key */
	aks_cloud_req_free(&r);
	return rc;
}
