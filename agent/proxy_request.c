/*
 * agent/proxy_request.c - reading what a program asks the egress proxy for (see
 * proxy_request.h). Strict where leniency would let two readers disagree: CRLF line ends
 * only, no folded headers, one request line form per method.
 */
#include "proxy_request.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proto.h"

void proxy_request_clear(proxy_request *r)
{
	free(r->head);
	memset(r, 0, sizeof(*r));
}

static int bad(proxy_request *r, int status, const char *why)
{
	r->status = status;
	r->why = why;
	return PROXY_BAD;
}

static const uint8_t *find(const uint8_t *p, size_t n, const char *needle)
{
	size_t k = strlen(needle);
	for (size_t i = 0; i + k <= n; i++)
		if (memcmp(p + i, needle, k) == 0)
			return p + i;
	return NULL;
}

/* A port of 1 to 65535 written as digits only. */
static bool parse_port(const char *s, size_t n, unsigned *port)
{
	if (n == 0 || n > 5)
		return false;
	unsigned v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v == 0 || v > 65535)
		return false;
	*port = v;
	return true;
}

/* host[:port] or [v6][:port]: the host (brackets removed) and the port, or def_port when
 * none is given (0: a port is required). Characters are checked loosely here (printable, no
 * spaces, none of "/?#@"): the host validates the name. */
static bool parse_authority(const char *s, size_t n, unsigned def_port, proxy_request *r)
{
	const char *host = s, *colon = NULL;
	size_t hlen;
	if (n && s[0] == '[') {
		const char *close = memchr(s, ']', n);
		if (!close)
			return false;
		host = s + 1;
		hlen = (size_t)(close - host);
		size_t rest = n - (size_t)(close + 1 - s);
		if (rest) {
			if (close[1] != ':')
				return false;
			colon = close + 1;
		}
	} else {
		colon = memrchr(s, ':', n);
		hlen = colon ? (size_t)(colon - s) : n;
	}
	if (hlen == 0 || hlen >= sizeof(r->host))
		return false;
	for (size_t i = 0; i < hlen; i++) {
		unsigned char c = (unsigned char)host[i];
		if (c <= ' ' || c >= 0x7f || strchr("/?#@[]\\", c))
			return false;
	}
	memcpy(r->host, host, hlen);
	r->host[hlen] = '\0';
	if (colon)
		return parse_port(colon + 1, n - (size_t)(colon + 1 - s), &r->port);
	r->port = def_port;
	return def_port != 0;
}

static bool is_token_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       strchr("!#$%&'*+-.^_`|~", c);
}

/* Headers a proxy consumes (every Proxy-*), or that would let one connection carry a second
 * request. */
static bool dropped_header(const char *name, size_t n)
{
	if (n >= 6 && strncasecmp(name, "proxy-", 6) == 0)
		return true;
	static const char *const names[] = {"connection", "keep-alive", NULL};
	for (size_t i = 0; names[i]; i++)
		if (strlen(names[i]) == n && strncasecmp(names[i], name, n) == 0)
			return true;
	return false;
}

int proxy_http_parse(const uint8_t *p, size_t n, proxy_request *r)
{
	memset(r, 0, sizeof(*r));
	size_t look = n < PROXY_HEAD_MAX ? n : PROXY_HEAD_MAX;
	const uint8_t *end = find(p, look, "\r\n\r\n");
	if (!end)
		return n >= PROXY_HEAD_MAX ? bad(r, 431, "the request head is over 16 KiB")
		                           : PROXY_MORE;
	size_t head_len = (size_t)(end - p) + 4;
	for (size_t i = 0; i < head_len; i++)
		if (p[i] == 0 || (p[i] == '\n' && (i == 0 || p[i - 1] != '\r')))
			return bad(r, 400, "the request head holds a NUL or a bare line feed");
	const char *s = (const char *)p;
	const char *line_end = (const char *)find(p, head_len, "\r\n");
	/* METHOD SP target SP HTTP/1.x */
	const char *sp1 = memchr(s, ' ', (size_t)(line_end - s));
	if (!sp1 || sp1 == s || sp1 - s > 20)
		return bad(r, 400, "the request line has no method");
	for (const char *c = s; c < sp1; c++)
		if (!is_token_char((unsigned char)*c))
			return bad(r, 400, "the request line has no method");
	const char *target = sp1 + 1;
	const char *sp2 = memchr(target, ' ', (size_t)(line_end - target));
	if (!sp2 || sp2 == target)
		return bad(r, 400, "the request line has no target");
	const char *version = sp2 + 1;
	size_t vlen = (size_t)(line_end - version);
	if (vlen != 8 ||
	    (memcmp(version, "HTTP/1.1", 8) != 0 && memcmp(version, "HTTP/1.0", 8) != 0))
		return bad(r, 400, "the request is not HTTP/1.0 or HTTP/1.1");
	size_t method_len = (size_t)(sp1 - s), target_len = (size_t)(sp2 - target);
	for (size_t i = 0; i < target_len; i++)
		if ((unsigned char)target[i] <= ' ' || (unsigned char)target[i] >= 0x7f)
			return bad(r, 400, "the request target holds a control or non-ASCII byte");
	/* Every header line: a token, a colon; no folding. */
	const char *h = line_end + 2;
	const char *hend = (const char *)end + 2;
	bool has_host = false;
	while (h < hend) {
		const char *e = (const char *)find((const uint8_t *)h, (size_t)(hend - h), "\r\n");
		const char *colon = memchr(h, ':', (size_t)(e - h));
		if (!colon || colon == h)
			return bad(r, 400, "a header line is not NAME: value");
		for (const char *c = h; c < colon; c++)
			if (!is_token_char((unsigned char)*c))
				return bad(r, 400,
				           "a header name is not a token (folded headers are "
				           "refused)");
		if (colon - h == 4 && strncasecmp(h, "host", 4) == 0)
			has_host = true;
		h = e + 2;
	}
	r->consumed = head_len;
	if (method_len == 7 && memcmp(s, "CONNECT", 7) == 0) {
		r->kind = AKS_AGENT_NET_CONNECT;
		if (!parse_authority(target, target_len, 0, r))
			return bad(r, 400, "CONNECT needs host:port");
		return PROXY_OK;
	}
	if (target_len >= 8 && strncasecmp(target, "https://", 8) == 0)
		return bad(r, 400, "an https:// URL goes through CONNECT (set HTTPS_PROXY)");
	if (target_len < 7 || strncasecmp(target, "http://", 7) != 0)
		return bad(r, target[0] == '/' ? 400 : 501,
		           target[0] == '/' ? "a proxy request needs an absolute http:// URL"
		                            : "only http:// URLs and CONNECT are proxied");
	const char *auth = target + 7;
	size_t auth_len = strcspn(auth, "/?#");
	if (auth + auth_len > sp2)
		auth_len = (size_t)(sp2 - auth);
	if (memchr(auth, '@', auth_len))
		return bad(r, 400, "credentials in the URL are not forwarded");
	r->kind = AKS_AGENT_NET_HTTP;
	if (!parse_authority(auth, auth_len, 80, r))
		return bad(r, 400, "the URL's host or port is malformed");
	const char *path = auth + auth_len;
	size_t path_len = (size_t)(sp2 - path);
	/* The head upstream: request line in origin form, the headers less the dropped ones,
	 * Connection: close, and Host from the URL when the program sent none. */
	size_t cap = head_len + auth_len + 64;
	char *out = malloc(cap);
	if (!out)
		return bad(r, 503, "out of memory");
	size_t o = 0;
	memcpy(out + o, s, method_len + 1);
	o += method_len + 1;
	if (path_len == 0 || path[0] != '/')
		out[o++] = '/';
	memcpy(out + o, path, path_len);
	o += path_len;
	memcpy(out + o, " ", 1);
	o += 1;
	memcpy(out + o, version, 8);
	o += 8;
	memcpy(out + o, "\r\n", 2);
	o += 2;
	for (h = line_end + 2; h < hend;) {
		const char *e = (const char *)find((const uint8_t *)h, (size_t)(hend - h), "\r\n");
		const char *colon = memchr(h, ':', (size_t)(e - h));
		if (!dropped_header(h, (size_t)(colon - h))) {
			memcpy(out + o, h, (size_t)(e - h) + 2);
			o += (size_t)(e - h) + 2;
		}
		h = e + 2;
	}
	if (!has_host) {
		memcpy(out + o, "Host: ", 6);
		o += 6;
		memcpy(out + o, auth, auth_len);
		o += auth_len;
		memcpy(out + o, "\r\n", 2);
		o += 2;
	}
	memcpy(out + o, "Connection: close\r\n\r\n", 21);
	o += 21;
	r->head = out;
	r->head_len = o;
	return PROXY_OK;
}

int proxy_socks_greeting(const uint8_t *p, size_t n, size_t *consumed)
{
	if (n < 2)
		return PROXY_MORE;
	if (p[0] != 5 || p[1] == 0)
		return PROXY_BAD;
	if (n < 2u + p[1])
		return PROXY_MORE;
	*consumed = 2u + p[1];
	return memchr(p + 2, 0, p[1]) ? PROXY_OK : PROXY_BAD;
}

int proxy_socks_request(const uint8_t *p, size_t n, proxy_request *r)
{
	memset(r, 0, sizeof(*r));
	r->kind = AKS_AGENT_NET_SOCKS;
	if (n < 5)
		return PROXY_MORE;
	if (p[0] != 5 || p[2] != 0)
		return bad(r, 1, "not a SOCKS5 request");
	if (p[1] != 1)
		return bad(r, 7, "only SOCKS5 CONNECT is supported");
	size_t need;
	switch (p[3]) {
	case 1:
		need = 4 + 4 + 2;
		break;
	case 3:
		need = 4 + 1 + (size_t)p[4] + 2;
		break;
	case 4:
		need = 4 + 16 + 2;
		break;
	default:
		return bad(r, 8, "unknown SOCKS5 address type");
	}
	if (n < need)
		return PROXY_MORE;
	if (p[3] == 1) {
		inet_ntop(AF_INET, p + 4, r->host, sizeof(r->host));
	} else if (p[3] == 4) {
		inet_ntop(AF_INET6, p + 4, r->host, sizeof(r->host));
	} else {
		size_t len = p[4];
		if (len == 0)
			return bad(r, 1, "an empty SOCKS5 domain name");
		for (size_t i = 0; i < len; i++)
			if (p[5 + i] <= ' ' || p[5 + i] >= 0x7f)
				return bad(r, 1,
				           "a SOCKS5 domain name with a control or non-ASCII "
				           "byte");
		memcpy(r->host, p + 5, len);
		r->host[len] = '\0';
	}
	r->port = (unsigned)p[need - 2] << 8 | p[need - 1];
	if (r->port == 0)
		return bad(r, 1, "port 0");
	r->consumed = need;
	return PROXY_OK;
}
