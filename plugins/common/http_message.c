/*
 * plugins/common/http_message.c - what an HTTP API's error answer says, for the messages
 * of the container providers; see aks_container.h.
 */
#include <string.h>

#include <json-c/json.h>

#include "aks_buf.h"
#include "aks_container.h"
#include "aks_json.h"

/* The most of a plain-text body a message quotes. */
#define BODY_QUOTE_MAX 500

/* The JSON error object's "message" (Docker Engine and Kubernetes both answer that way). */
static char *json_message(const char *body)
{
	json_object *j = json_tokener_parse(body);
	const char *m = json_object_get_string(aks__jget(j, "message"));
	char *msg = m ? strdup(m) : NULL;
	json_object_put(j);
	return msg;
}

char *aks_ctr_http_message(const char *body, long status)
{
	if (!body)
		body = "";
	char *msg = json_message(body);
	if (msg)
		return msg;
	aks_buf b = AKS_BUF_INIT;
	aks__buf_append(&b, body, strnlen(body, BODY_QUOTE_MAX));
	aks__buf_rtrim(&b, "\r\n"); /* a plain-text body's last line break */
	if (b.len == 0)
		aks__buf_printf(&b, "HTTP status %ld", status);
	return aks__buf_steal(&b); /* NULL when any step failed (the failure sticks) */
}
