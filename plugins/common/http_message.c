/*
 * plugins/common/http_message.c - what an HTTP API's error answer says (the Docker Engine's
 * {"message": ...}, a Kubernetes Status object, E2B's {"code", "message"}), for the providers'
 * messages; see aks_http.h. The body is whatever the server (or anything in between) sent.
 */
#include <limits.h>
#include <string.h>

#include <json-c/json.h>

#include "aks_buf.h"
#include "aks_http.h"

/* The most of a plain-text body a message quotes: an HTML error page says nothing useful
 * past it. */
#define BODY_QUOTE_MAX 500

/* The non-empty "message" string of a JSON object body, malloc'd; NULL when there is none
 * (an empty one says nothing). The body is parsed by its length: it may hold a NUL. */
static char *json_message(const char *body, size_t len)
{
	json_tokener *tok = json_tokener_new();
	if (!tok)
		return NULL;
	json_object *j = json_tokener_parse_ex(tok, body, len > INT_MAX ? INT_MAX : (int)len);
	bool parsed = json_tokener_get_error(tok) == json_tokener_success;
	json_tokener_free(tok);
	json_object *m = NULL;
	const char *text = NULL;
	if (parsed && json_object_object_get_ex(j, "message", &m) &&
	    json_object_is_type(m, json_type_string))
		text = json_object_get_string(m);
	char *msg = text && *text ? strdup(text) : NULL;
	json_object_put(j);
	return msg;
}

char *aks_ctr_http_message(const char *body, size_t len, long status)
{
	if (!body)
		len = 0;
	char *msg = len ? json_message(body, len) : NULL;
	if (msg)
		return msg;
	aks_buf b = AKS_BUF_INIT;
	/* not JSON: the body itself, up to a NUL, without its trailing line break */
	aks__buf_append(&b, body,
	                len ? strnlen(body, len < BODY_QUOTE_MAX ? len : BODY_QUOTE_MAX) : 0);
	aks__buf_rtrim(&b, "\r\n");
	if (b.len == 0)
		aks__buf_printf(&b, "HTTP status %ld", status);
	return aks__buf_steal(&b); /* NULL when any step failed (the failure sticks) */
}
