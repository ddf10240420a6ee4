/*
 * agent/proxy_request.h - what a program asks the agent's egress proxy for: an HTTP proxy
 * request head (CONNECT, or a plain request in absolute form) or a SOCKS5 handshake. Pure
 * functions over the bytes read so far, so the fuzz target and the tests drive them without
 * sockets. The agent only parses and forwards; the host decides (docs/agent-protocol.md,
 * "Egress"), so nothing here is a security check, only a careful reader of untrusted bytes.
 */
#ifndef AKS_AGENT_PROXY_REQUEST_H
#define AKS_AGENT_PROXY_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The longest request head (or SOCKS handshake) the proxy reads before it answers 431. */
#define PROXY_HEAD_MAX (16u * 1024u)

enum proxy_parse {
	PROXY_MORE = 0, /* not enough bytes yet */
	PROXY_OK,       /* a request: see the proxy_request */
	PROXY_BAD,      /* refused: status and why say how to answer */
};

typedef struct proxy_request {
	int kind;       /* AKS_AGENT_NET_CONNECT, _HTTP or _SOCKS */
	char host[256]; /* a name or an IP literal, without brackets */
	unsigned port;
	size_t consumed; /* bytes of the input the head (or handshake step) took */
	/* AKS_AGENT_NET_HTTP: the head to send upstream, in origin form, malloc'd */
	char *head;
	size_t head_len;
	/* PROXY_BAD: the HTTP status (400, 405, 431, 501), or the SOCKS5 reply code; and why */
	int status;
	const char *why;
} proxy_request;

/* An HTTP/1.x proxy request head at p[0..n). A plain request is rewritten to origin form
 * with `Connection: close` (one request per stream, so every request's Host is the one the
 * host checked) and without the Proxy-* headers; a missing Host is added from the URL. */
int proxy_http_parse(const uint8_t *p, size_t n, proxy_request *out);

/* The SOCKS5 greeting (version 5, its methods): PROXY_OK with *consumed when "no
 * authentication" is offered, PROXY_BAD when it is not (answer 05 FF). */
int proxy_socks_greeting(const uint8_t *p, size_t n, size_t *consumed);
/* The SOCKS5 request after the greeting: CONNECT to an IPv4, IPv6 or domain address.
 * PROXY_BAD carries the reply code (7: command not supported, 8: address type). */
int proxy_socks_request(const uint8_t *p, size_t n, proxy_request *out);

void proxy_request_clear(proxy_request *r);

#endif /* AKS_AGENT_PROXY_REQUEST_H */
