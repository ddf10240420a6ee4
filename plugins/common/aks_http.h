/*
 * plugins/common/aks_http.h - what every plugin that speaks HTTP with libcurl and json-c
 * shares (docker, kubernetes, e2b): the message of an HTTP error answer and libcurl's global
 * state. Transfers under a call's deadline are in aks_curl.h (they need libcurl's types).
 * libaks-http (http_message.c, curl_global.c, curl_wait.c): its users link libcurl and
 * json-c.
 */
#ifndef AKS_HTTP_H
#define AKS_HTTP_H

#include <stdbool.h>
#include <stddef.h>

/* ---- HTTP error answers (http_message.c; json-c) ---- */

/*
 * What an API's error answer says, for an error message: the "message" string of the body's
 * JSON object when it is not empty (the Docker Engine and Kubernetes both answer so), else
 * the body itself as text (up to a NUL, its first 500 bytes, without its trailing line
 * break), else "HTTP status <status>". `body` holds len bytes (NULL: none). Malloc'd and
 * never empty; NULL only when out of memory. Each plugin words the error around it.
 */
char *aks_ctr_http_message(const char *body, size_t len, long status);

/* ---- libcurl's global state (curl_global.c) ---- */

/* curl_global_init() on the first acquire, curl_global_cleanup() after the
 * last release: counted so that each provider instance can hold it. The
 * count is the linking plugin's own (each has its copy of this library). */
bool aks_ctr_curl_acquire(void);
void aks_ctr_curl_release(void);

#endif /* AKS_HTTP_H */
