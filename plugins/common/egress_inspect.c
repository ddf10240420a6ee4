/*
 * plugins/common/egress_inspect.c - the first bytes of a proxied connection: a TLS
 * ClientHello's server_name, an HTTP/1.x request's Host (aks_egress_inspect.h). Every read
 * is checked against the bytes there; nothing is allocated.
 */
#include <stdbool.h>
#include <string.h>

#include "aks_egress_inspect.h"
#include "aks_netrule.h"

#define TLS_RECORD_MAX 16384u

/* The outcome: the result, and for BAD the reason. */
struct verdict {
	char *name;
	size_t cap;
	unsigned *port;
	const char **why;
};

static int bad(const struct verdict *v, const char *why)
{
	if (v->why)
		*v->why = why;
	if (v->cap)
		v->name[0] = '\0';
	if (v->port)
		*v->port = 0;
	return AKS_INSPECT_BAD;
}

/* Sets the name (normalized: a host name, or with ip_ok an IP literal) from s[0..len);
 * false when it is neither or does not fit. */
static bool set_name(const struct verdict *v, const uint8_t *s, size_t len, bool ip_ok)
{
	char raw[300], norm[256];
	if (len >= sizeof(raw) || memchr(s, '\0', len))
		return false;
	memcpy(raw, s, len);
	raw[len] = '\0';
	if (aks_netname_normalize(raw, norm, sizeof(norm)) != 0)
		return false;
	if (!ip_ok && strchr(norm, ':'))
		return false;
	if (!ip_ok) {
		/* a dotted quad normalizes to itself and has a numeric last label */
		const char *last = strrchr(norm, '.');
		last = last ? last + 1 : norm;
		if (last[strspn(last, "0123456789")] == '\0')
			return false;
	}
	size_t nl = strlen(norm);
	if (nl >= v->cap)
		return false;
	memcpy(v->name, norm, nl + 1);
	return true;
}

/* ---- TLS ---- */

/* A cursor over the ClientHello's body. */
struct cursor {
	const uint8_t *p;
	size_t n, at;
};

static bool get(struct cursor *c, size_t k, const uint8_t **out)
{
	if (c->n - c->at < k)
		return false;
	*out = c->p + c->at;
	c->at += k;
	return true;
}

static bool get_u8(struct cursor *c, size_t *v)
{
	const uint8_t *b;
	if (!get(c, 1, &b))
		return false;
	*v = b[0];
	return true;
}

static bool get_u16(struct cursor *c, size_t *v)
{
	const uint8_t *b;
	if (!get(c, 2, &b))
		return false;
	*v = (size_t)b[0] << 8 | b[1];
	return true;
}

/* The server_name extension's body (RFC 6066 section 3): exactly one host_name. */
static int server_name(const struct verdict *v, const uint8_t *d, size_t len)
{
	struct cursor c = {d, len, 0};
	size_t list, type, nl;
	const uint8_t *s;
	if (!get_u16(&c, &list) || list != len - 2 || !get_u8(&c, &type) || !get_u16(&c, &nl) ||
	    !get(&c, nl, &s))
		return bad(v, "malformed TLS server_name extension");
	if (type != 0)
		return bad(v, "TLS server_name of a type other than host_name");
	if (c.at != c.n)
		return bad(v, "TLS server_name with more than one name");
	if (!set_name(v, s, nl, false))
		return bad(v, "TLS server_name is not a valid host name");
	return AKS_INSPECT_TLS;
}

static int client_hello(const struct verdict *v, const uint8_t *d, size_t len)
{
	struct cursor c = {d, len, 0};
	const uint8_t *skip, *ext;
	size_t k, total;
	if (!get(&c, 2 + 32, &skip) || skip[0] != 3)
		return bad(v, "malformed TLS ClientHello");
	if (!get_u8(&c, &k) || k > 32 || !get(&c, k, &skip))
		return bad(v, "malformed TLS ClientHello session id");
	if (!get_u16(&c, &k) || k < 2 || k % 2 || !get(&c, k, &skip))
		return bad(v, "malformed TLS ClientHello cipher suites");
	if (!get_u8(&c, &k) || k < 1 || !get(&c, k, &skip))
		return bad(v, "malformed TLS ClientHello compression methods");
	if (c.at == c.n)
		return AKS_INSPECT_TLS; /* no extensions, so no server_name */
	if (!get_u16(&c, &total) || total != c.n - c.at)
		return bad(v, "malformed TLS ClientHello extensions");
	bool named = false;
	while (c.at < c.n) {
		size_t type;
		if (!get_u16(&c, &type) || !get_u16(&c, &k) || !get(&c, k, &ext))
			return bad(v, "malformed TLS extension");
		if (type == 0xfe0d || type == 0xffce)
			return bad(v, "TLS encrypted ClientHello (ECH) hides the server name");
		if (type != 0)
			continue;
		if (named)
			return bad(v, "TLS ClientHello with two server_name extensions");
		named = true;
		int rc = server_name(v, ext, k);
		if (rc != AKS_INSPECT_TLS)
			return rc;
	}
	return AKS_INSPECT_TLS;
}

static int tls(const struct verdict *v, const uint8_t *p, size_t n)
{
	/* record: type 22, version 3.x, length; handshake: type 1, length (24 bits) */
	if (n >= 2 && p[1] != 3)
		return bad(v, "not a TLS record");
	if (n >= 3 && p[2] > 4)
		return bad(v, "not a TLS record");
	if (n < 5)
		return AKS_INSPECT_MORE;
	size_t len = (size_t)p[3] << 8 | p[4];
	if (!len)
		return bad(v, "empty TLS record");
	if (len > TLS_RECORD_MAX)
		return bad(v, "TLS record longer than 16384 bytes");
	if (n >= 6 && p[5] != 1)
		return bad(v, "TLS handshake that is not a ClientHello");
	if (len < 4)
		return n < 5 + len ? AKS_INSPECT_MORE
		                   : bad(v, "TLS ClientHello split across records");
	if (n >= 9) {
		size_t hl = (size_t)p[6] << 16 | (size_t)p[7] << 8 | p[8];
		if (hl > len - 4)
			return bad(v, "TLS ClientHello split across records");
		if (hl < len - 4)
			return bad(v, "TLS record holds more than the ClientHello");
	}
	if (n < 5 + len)
		return AKS_INSPECT_MORE;
	return client_hello(v, p + 9, len - 4);
}

/* ---- HTTP ---- */

static bool is_upper(uint8_t c)
{
	return c >= 'A' && c <= 'Z';
}

static bool is_tchar(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || is_upper(c) || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool is_ctl(uint8_t c)
{
	return c < 0x20 || c == 0x7f;
}

/* Out of bytes: more may come, unless the limit was reached. */
static int out_of_bytes(const struct verdict *v, bool full, const char *why)
{
	return full ? bad(v, why) : AKS_INSPECT_MORE;
}

/* Whether p[0..m) holds "HTTP/" in any case (Apache's lax mode takes "http/1.1"): 1 when it
 * does, 0 when it differs, -1 when p ends before telling. */
static int http_slash_at(const uint8_t *p, size_t m)
{
	static const char want[] = "http/";
	for (size_t k = 0; k < 5; k++) {
		if (k == m)
			return -1;
		uint8_t c = p[k] >= 'A' && p[k] <= 'Z' ? (uint8_t)(p[k] | 0x20) : p[k];
		if (c != (uint8_t)want[k])
			return 0;
	}
	return 1;
}

/* Whether the first line p[0..m) may be a request line: 1 when it has "HTTP/" before its end
 * or a control character, 0 when one of those comes first (a request line always names its
 * version; a line without one, HTTP/0.9's, has no headers, so no Host), -1 when p ends
 * before telling. */
static int first_line_is_http(const uint8_t *p, size_t m)
{
	for (size_t i = 0; i < m; i++) {
		if (p[i] == '\n' || (p[i] == '\r' && i + 1 < m && p[i + 1] == '\n'))
			return 0;
		if (p[i] == '\r' && i + 1 == m)
			return -1;
		int h = http_slash_at(p + i, m - i);
		if (h)
			return h;
		if (is_ctl(p[i]) && p[i] != '\t')
			return 0;
	}
	return -1;
}

/* s[0..len) as host[:port] (an IPv6 host in brackets) into v's name and *port. */
static bool host_port(const struct verdict *v, const uint8_t *s, size_t len, unsigned *port)
{
	size_t hl = len;
	const uint8_t *colon = NULL;
	*port = 0;
	if (len && s[0] == '[') {
		const uint8_t *close = memchr(s, ']', len);
		if (!close)
			return false;
		hl = (size_t)(close - s) + 1;
		if (hl < len) {
			if (s[hl] != ':')
				return false;
			colon = s + hl;
		}
	} else {
		colon = memchr(s, ':', len);
		if (colon) {
			hl = (size_t)(colon - s);
			if (memchr(colon + 1, ':', len - hl - 1))
				return false;
		}
	}
	if (colon) {
		size_t pl = len - (size_t)(colon + 1 - s);
		unsigned value = 0;
		if (!pl || pl > 5)
			return false;
		for (size_t i = 1; i <= pl; i++) {
			if (colon[i] < '0' || colon[i] > '9')
				return false;
			value = value * 10 + (unsigned)(colon[i] - '0');
		}
		if (value < 1 || value > 65535)
			return false;
		*port = value;
	}
	return hl && set_name(v, s, hl, true);
}

/* The authority a request target names, or none (origin and asterisk form): *has, s, len. */
static bool target_authority(const uint8_t *t, size_t len, bool connect, const uint8_t **s,
                             size_t *alen, bool *has)
{
	*has = false;
	if (connect) {
		*has = true;
		*s = t;
		*alen = len;
		return true;
	}
	if (t[0] == '/' || (len == 1 && t[0] == '*'))
		return true;
	size_t i = 0;
	while (i < len &&
	       ((t[i] >= 'a' && t[i] <= 'z') || (t[i] >= 'A' && t[i] <= 'Z') ||
	        (i && ((t[i] >= '0' && t[i] <= '9') || t[i] == '+' || t[i] == '-' || t[i] == '.'))))
		i++;
	if (!i || len - i < 3 || memcmp(t + i, "://", 3) != 0)
		return false;
	*s = t + i + 3;
	size_t rest = len - i - 3, a = 0;
	while (a < rest && (*s)[a] != '/' && (*s)[a] != '?' && (*s)[a] != '#')
		a++;
	if (memchr(*s, '@', a))
		return false; /* userinfo: which part names the host is for the server to guess */
	*has = true;
	*alen = a;
	return true;
}

/* Text: an HTTP/1.x request head, or OTHER when its first line plainly is no request line. */
static int http(const struct verdict *v, const uint8_t *p, size_t m, bool full)
{
	const char *too_long = "HTTP request head longer than the inspection limit";
	size_t i = 0;
	/* empty lines, which servers skip before a request line */
	while (i < m && (p[i] == '\r' || p[i] == '\n'))
		i++;
	if (i == m)
		return out_of_bytes(v, full, too_long);
	int is_http = first_line_is_http(p + i, m - i);
	if (is_http < 0)
		return out_of_bytes(v, full, "first line longer than the inspection limit");
	if (!is_http)
		return AKS_INSPECT_OTHER;
	if (i)
		return bad(v, "empty line before the HTTP request line");
	while (i < m && (is_upper(p[i]) || p[i] == '-' || p[i] == '_'))
		i++;
	if (!i || p[i] != ' ')
		return bad(v, "malformed HTTP request line");
	if (i == 3 && memcmp(p, "PRI", 3) == 0)
		return bad(v, "HTTP/2 prior knowledge (PRI * HTTP/2.0)");
	bool connect = i == 7 && memcmp(p, "CONNECT", 7) == 0;

	/* request target: visible ASCII up to one space */
	size_t t0 = ++i;
	while (i < m && p[i] > 0x20 && p[i] < 0x7f)
		i++;
	if (i == m)
		return out_of_bytes(v, full, too_long);
	if (p[i] != ' ' || i == t0)
		return bad(v, "malformed HTTP request target");
	const uint8_t *auth = NULL;
	size_t alen = 0;
	bool has_auth;
	if (!target_authority(p + t0, i - t0, connect, &auth, &alen, &has_auth))
		return bad(v, "HTTP request target of an unknown form");

	/* version and line end */
	i++;
	static const char v11[] = "HTTP/1.1\r\n", v10[] = "HTTP/1.0\r\n";
	for (size_t k = 0; k < 10; k++, i++) {
		if (i == m)
			return out_of_bytes(v, full, too_long);
		if (p[i] == v11[k] || p[i] == v10[k])
			continue;
		if (k < 8)
			return bad(v, "HTTP version other than HTTP/1.0 and HTTP/1.1");
		return bad(v, "HTTP request line does not end in CRLF");
	}
	/* "HTTP/1.1" and "HTTP/1.0" differ in one byte only, so the mix above is one of them */

	/* header lines up to an empty one */
	const uint8_t *host = NULL;
	size_t host_len = 0;
	for (;;) {
		if (i == m)
			return out_of_bytes(v, full, too_long);
		if (p[i] == '\r') {
			if (i + 1 == m)
				return out_of_bytes(v, full, too_long);
			if (p[i + 1] != '\n')
				return bad(v, "bare CR in the HTTP head");
			break;
		}
		if (p[i] == ' ' || p[i] == '\t')
			return bad(v, "folded HTTP header line");
		size_t n0 = i;
		while (i < m && is_tchar(p[i]))
			i++;
		if (i == m)
			return out_of_bytes(v, full, too_long);
		if (p[i] != ':' || i == n0)
			return bad(v, p[i] == ' ' || p[i] == '\t' ? "whitespace before ':' in an "
			                                            "HTTP header"
			                                          : "malformed HTTP header name");
		bool is_host = i - n0 == 4 && (p[n0] | 0x20) == 'h' && (p[n0 + 1] | 0x20) == 'o' &&
		               (p[n0 + 2] | 0x20) == 's' && (p[n0 + 3] | 0x20) == 't';
		if (is_host && host)
			return bad(v, "two Host headers");
		size_t v0 = ++i;
		while (i < m && p[i] != '\r' && p[i] != '\n') {
			if (is_ctl(p[i]) && p[i] != '\t')
				return bad(v, "control character in an HTTP header");
			i++;
		}
		if (i == m || (p[i] == '\r' && i + 1 == m))
			return out_of_bytes(v, full, too_long);
		if (p[i] == '\n')
			return bad(v, "bare LF in the HTTP head");
		if (p[i + 1] != '\n')
			return bad(v, "bare CR in the HTTP head");
		if (is_host) {
			size_t a = v0, b = i;
			while (a < b && (p[a] == ' ' || p[a] == '\t'))
				a++;
			while (b > a && (p[b - 1] == ' ' || p[b - 1] == '\t'))
				b--;
			host = p + a;
			host_len = b - a;
		}
		i += 2;
	}
	if (!host)
		return bad(v, "no Host header");
	unsigned port;
	if (!host_port(v, host, host_len, &port))
		return bad(v, "Host is not a valid host[:port]");
	if (has_auth) {
		char named[256];
		unsigned tport;
		memcpy(named, v->name, strlen(v->name) + 1);
		if (!host_port(v, auth, alen, &tport))
			return bad(v, "HTTP request target names no valid host[:port]");
		if (strcmp(named, v->name) != 0 || (tport && port && tport != port))
			return bad(v, "HTTP request target and Host name different hosts");
		if (!port)
			port = tport;
	}
	if (v->port)
		*v->port = port;
	return AKS_INSPECT_HTTP;
}

int aks_egress_inspect(const uint8_t *p, size_t n, char *name, size_t cap, unsigned *port,
                       const char **why)
{
	struct verdict v = {name, name ? cap : 0, port, why};
	char scratch[256];
	if (v.cap)
		name[0] = '\0';
	if (port)
		*port = 0;
	if (why)
		*why = NULL;
	if (!n)
		return AKS_INSPECT_MORE;
	if (!p)
		return bad(&v, "no bytes");
	bool full = n >= AKS_INSPECT_MAX;
	size_t m = full ? AKS_INSPECT_MAX : n;
	if (p[0] == 0x16)
		return tls(&v, p, m);
	/* Text may be HTTP: servers take any token as a method, and skip empty lines first. */
	if ((is_ctl(p[0]) && p[0] != '\t' && p[0] != '\r' && p[0] != '\n') || p[0] >= 0x80)
		return AKS_INSPECT_OTHER;
	/* the Host and a target's authority are compared in a buffer of our own */
	struct verdict h = v;
	h.name = scratch;
	h.cap = sizeof(scratch);
	int rc = http(&h, p, m, full);
	if (rc == AKS_INSPECT_HTTP) {
		size_t nl = strlen(scratch);
		if (nl >= v.cap)
			return bad(&v, "name longer than the buffer");
		memcpy(name, scratch, nl + 1);
	}
	return rc;
}
