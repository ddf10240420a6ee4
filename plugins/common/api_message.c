/*
 * plugins/common/api_message.c - what an API server's error answer says, for the container
 * providers' messages (the Docker Engine's {"message": ...}, a Kubernetes Status object);
 * see aks_container.h. The body is whatever the server (or anything in between) sent.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "aks_container.h"

/* Plain-text bodies are cut here: an HTML error page says nothing useful past it. */
#define PLAIN_MAX 500

/* The "message" string of a JSON object body, malloc'd; NULL when there is none (or it is
 * empty, which says nothing). */
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

char *aks_ctr_api_message(const char *body, size_t len, long status)
{
	if (!body)
		len = 0;
	char *msg = len ? json_message(body, len) : NULL;
	if (msg)
		return msg;
	/* not JSON: the body itself, up to a NUL, without its trailing newline */
	size_t n = len ? strnlen(body, len < PLAIN_MAX ? len : PLAIN_MAX) : 0;
	while (n && (body[n - 1] == '\n' || body[n - 1] == '\r'))
		n--;
	if (n)
		return strndup(body, n);
	if (asprintf(&msg, "HTTP status %ld", status) < 0)
		return NULL;
	return msg;
}
