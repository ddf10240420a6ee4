/* Unit tests: the first bytes of a proxied connection (plugins/common/aks_egress_inspect.h):
 * real and built TLS ClientHellos whole, in pieces and broken; HTTP/1.x request heads and
 * their Host; what is neither; and the limit past which nothing is waited for. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aks_egress_inspect.h"
#include "tls_client_hello.h"

/* What one call says. */
struct seen {
	int rc;
	char name[256];
	unsigned port;
	const char *why;
};

static struct seen look(const void *p, size_t n)
{
	struct seen s;
	memset(s.name, 'x', sizeof(s.name));
	s.port = 12345;
	s.why = "unset";
	s.rc = aks_egress_inspect(p, n, s.name, sizeof(s.name), &s.port, &s.why);
	assert_non_null(memchr(s.name, '\0', sizeof(s.name)));
	assert_true(s.rc == AKS_INSPECT_BAD ? s.why && *s.why : !s.why);
	if (s.rc != AKS_INSPECT_TLS && s.rc != AKS_INSPECT_HTTP)
		assert_string_equal(s.name, "");
	if (s.rc != AKS_INSPECT_HTTP)
		assert_int_equal(s.port, 0);
	return s;
}

/* p[0..n) decides rc (with name and port) at its last byte: every shorter prefix is MORE. */
static struct seen decided_at_end(const void *p, size_t n, int rc)
{
	for (size_t k = 0; k < n; k++) {
		struct seen s = look(p, k);
		if (s.rc != AKS_INSPECT_MORE)
			fail_msg("prefix of %zu of %zu bytes: %d (%s), not MORE", k, n, s.rc,
			         s.why ? s.why : "");
	}
	struct seen s = look(p, n);
	if (s.rc != rc)
		fail_msg("%zu bytes: %d (%s), wanted %d", n, s.rc, s.why ? s.why : "", rc);
	return s;
}

static void expect_bad(const void *p, size_t n, const char *why)
{
	struct seen s = look(p, n);
	if (s.rc != AKS_INSPECT_BAD || !strstr(s.why, why))
		fail_msg("%d (%s), wanted BAD: %s", s.rc, s.why ? s.why : "", why);
}

#define BAD_TEXT(lit, why) expect_bad((lit), sizeof(lit) - 1, (why))

/* ---- building ClientHellos ---- */

static size_t put16(uint8_t *p, size_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
	return 2;
}

/* A server_name extension naming name[0..len) (type: the name type). */
static size_t sni_ext(uint8_t *out, const char *name, size_t len, uint8_t type)
{
	size_t o = 0;
	o += put16(out + o, 0);
	o += put16(out + o, len + 5);
	o += put16(out + o, len + 3);
	out[o++] = type;
	o += put16(out + o, len);
	memcpy(out + o, name, len);
	return o + len;
}

/* A ClientHello record with the extensions ext[0..elen) (no extensions block when ext is
 * NULL). Returns its length. */
static size_t build_hello(uint8_t *out, const uint8_t *ext, size_t elen)
{
	uint8_t *b = out + 9;
	size_t o = 0;
	b[o++] = 3;
	b[o++] = 3;
	memset(b + o, 0xab, 32);
	o += 32;
	b[o++] = 0;           /* session id */
	o += put16(b + o, 2); /* cipher suites */
	o += put16(b + o, 0x1301);
	b[o++] = 1; /* compression methods */
	b[o++] = 0;
	if (ext) {
		o += put16(b + o, elen);
		memcpy(b + o, ext, elen);
		o += elen;
	}
	out[0] = 0x16;
	out[1] = 3;
	out[2] = 1;
	put16(out + 3, o + 4);
	out[5] = 1;
	out[6] = (uint8_t)(o >> 16);
	put16(out + 7, o);
	return 9 + o;
}

static size_t hello_named(uint8_t *out, const char *name)
{
	uint8_t ext[512];
	size_t e = sni_ext(ext, name, strlen(name), 0);
	return build_hello(out, ext, e);
}

/* ---- TLS ---- */

/* Real ClientHellos: the name, or "" without SNI; MORE at every split before the end. */
static void test_tls_real(void **state)
{
	(void)state;
	struct seen s =
	    decided_at_end(hello_openssl_sni, sizeof(hello_openssl_sni), AKS_INSPECT_TLS);
	assert_string_equal(s.name, "allowed.test");
	s = decided_at_end(hello_python_sni, sizeof(hello_python_sni), AKS_INSPECT_TLS);
	assert_string_equal(s.name, "allowed.test");
	s = decided_at_end(hello_python_nosni, sizeof(hello_python_nosni), AKS_INSPECT_TLS);
	assert_string_equal(s.name, "");
	/* what follows the first record changes nothing */
	uint8_t more[sizeof(hello_openssl_sni) + 64];
	memcpy(more, hello_openssl_sni, sizeof(hello_openssl_sni));
	memset(more + sizeof(hello_openssl_sni), 0x17, 64);
	s = look(more, sizeof(more));
	assert_int_equal(s.rc, AKS_INSPECT_TLS);
	assert_string_equal(s.name, "allowed.test");
	/* a name that does not fit the caller's buffer */
	char small[8];
	const char *why = NULL;
	assert_int_equal(aks_egress_inspect(hello_openssl_sni, sizeof(hello_openssl_sni), small,
	                                    sizeof(small), NULL, &why),
	                 AKS_INSPECT_BAD);
	assert_string_equal(small, "");
}

/* The record and handshake headers: each length lie or wrong type is BAD, as early as the
 * bytes show it. */
static void test_tls_lengths(void **state)
{
	(void)state;
	uint8_t h[sizeof(hello_openssl_sni)];
	size_t n = sizeof(h);
	memcpy(h, hello_openssl_sni, n);
	put16(h + 3, n - 5 + 1);
	/* the record says one byte more than the handshake holds */
	expect_bad(h, 9, "TLS record holds more than the ClientHello");
	expect_bad(h, n, "TLS record holds more than the ClientHello");
	/* the handshake says more than the record holds: split across records */
	memcpy(h, hello_openssl_sni, n);
	h[8]++;
	expect_bad(h, 9, "TLS ClientHello split across records");
	expect_bad(h, n, "TLS ClientHello split across records");
	memcpy(h, hello_openssl_sni, n);
	put16(h + 3, 3);
	assert_int_equal(look(h, 7).rc, AKS_INSPECT_MORE);
	expect_bad(h, 8, "TLS ClientHello split across records");
	/* a record longer than TLS allows, empty, of another version */
	memcpy(h, hello_openssl_sni, n);
	put16(h + 3, 16385);
	expect_bad(h, 5, "TLS record longer than 16384 bytes");
	put16(h + 3, 0);
	expect_bad(h, 5, "empty TLS record");
	memcpy(h, hello_openssl_sni, n);
	h[1] = 2;
	expect_bad(h, 2, "not a TLS record");
	h[1] = 3;
	h[2] = 9;
	expect_bad(h, 3, "not a TLS record");
	/* a handshake that is no ClientHello */
	memcpy(h, hello_openssl_sni, n);
	h[5] = 2;
	expect_bad(h, 6, "not a ClientHello");
	/* the body's own lengths */
	memcpy(h, hello_openssl_sni, n);
	h[9 + 34] = 33; /* session id */
	expect_bad(h, n, "session id");
	memcpy(h, hello_openssl_sni, n);
	h[9 + 34 + 1 + 32 + 1] = 0xff; /* cipher suites length past the end */
	expect_bad(h, n, "cipher suites");
	/* a ClientHello filling the largest record: decided at exactly AKS_INSPECT_MAX bytes */
	static uint8_t big[AKS_INSPECT_MAX + 10];
	uint8_t *ext = malloc(16384);
	assert_non_null(ext);
	size_t e = sni_ext(ext, "allowed.test", 12, 0);
	size_t pad = 16384 - 4 - 2 - 32 - 1 - 4 - 2 - 2 - e - 4;
	e += put16(ext + e, 21); /* padding */
	e += put16(ext + e, pad);
	memset(ext + e, 0, pad);
	e += pad;
	assert_int_equal(build_hello(big, ext, e), AKS_INSPECT_MAX);
	free(ext);
	assert_int_equal(look(big, AKS_INSPECT_MAX - 1).rc, AKS_INSPECT_MORE);
	struct seen s = look(big, AKS_INSPECT_MAX);
	assert_int_equal(s.rc, AKS_INSPECT_TLS);
	assert_string_equal(s.name, "allowed.test");
	assert_int_equal(look(big, sizeof(big)).rc, AKS_INSPECT_TLS);
}

/* Built ClientHellos: what the server_name may and may not be. */
static void test_tls_server_name(void **state)
{
	(void)state;
	uint8_t h[2048], ext[1024];
	struct seen s = decided_at_end(h, hello_named(h, "Allowed.TEST."), AKS_INSPECT_TLS);
	assert_string_equal(s.name, "allowed.test");
	s = look(h, hello_named(h, "localhost"));
	assert_int_equal(s.rc, AKS_INSPECT_TLS);
	assert_string_equal(s.name, "localhost");
	/* no extensions at all, or none of them SNI */
	s = look(h, build_hello(h, NULL, 0));
	assert_int_equal(s.rc, AKS_INSPECT_TLS);
	assert_string_equal(s.name, "");
	s = look(h, build_hello(h, (const uint8_t *)"\x00\x17\x00\x00", 4));
	assert_int_equal(s.rc, AKS_INSPECT_TLS);
	assert_string_equal(s.name, "");

	expect_bad(h, hello_named(h, "10.0.0.1"), "server_name is not a valid host name");
	expect_bad(h, hello_named(h, "2001:db8::1"), "server_name is not a valid host name");
	expect_bad(h, hello_named(h, "a..test"), "server_name is not a valid host name");
	expect_bad(h, hello_named(h, "a_b.test"), "server_name is not a valid host name");
	expect_bad(h, hello_named(h, "0x7f000001"), "server_name is not a valid host name");
	expect_bad(h, hello_named(h, ""), "server_name is not a valid host name");
	size_t e = sni_ext(ext, "allowed.test\0evil.test", 22, 0);
	expect_bad(h, build_hello(h, ext, e), "server_name is not a valid host name");
	e = sni_ext(ext, "allowed.test", 12, 1);
	expect_bad(h, build_hello(h, ext, e), "type other than host_name");
	/* two names in one extension, two extensions */
	e = sni_ext(ext, "allowed.test", 12, 0);
	put16(ext + 2, 12 + 5 + 8);
	put16(ext + 4, 12 + 3 + 8);
	memcpy(ext + e,
	       "\x00\x00\x05"
	       "b.com",
	       8);
	expect_bad(h, build_hello(h, ext, e + 8), "more than one name");
	e = sni_ext(ext, "allowed.test", 12, 0);
	e += sni_ext(ext + e, "evil.test", 9, 0);
	expect_bad(h, build_hello(h, ext, e), "two server_name extensions");
	/* ECH hides the real name */
	e = sni_ext(ext, "public.test", 11, 0);
	memcpy(ext + e, "\xfe\x0d\x00\x01\x00", 5);
	expect_bad(h, build_hello(h, ext, e + 5), "ECH");
	/* extension lengths that lie */
	e = sni_ext(ext, "allowed.test", 12, 0);
	size_t n = build_hello(h, ext, e);
	h[n - e - 1]++; /* the extensions block says one more byte */
	expect_bad(h, n, "malformed TLS ClientHello extensions");
	e = sni_ext(ext, "allowed.test", 12, 0);
	put16(ext + 2, 100); /* the SNI extension runs past the block */
	expect_bad(h, build_hello(h, ext, e), "malformed TLS extension");
	e = sni_ext(ext, "allowed.test", 12, 0);
	put16(ext + 4, 10); /* the name list is shorter than the extension */
	expect_bad(h, build_hello(h, ext, e), "malformed TLS server_name extension");
}

/* ---- HTTP ---- */

static struct seen http_ok(const char *head, const char *name, unsigned port)
{
	struct seen s = decided_at_end(head, strlen(head), AKS_INSPECT_HTTP);
	if (strcmp(s.name, name) != 0 || s.port != port)
		fail_msg("%s: %s:%u, wanted %s:%u", head, s.name, s.port, name, port);
	return s;
}

static void test_http_host(void **state)
{
	(void)state;
	http_ok("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", "example.com", 0);
	http_ok("GET /a?b=c HTTP/1.1\r\nUser-Agent: t\r\nHost: Example.COM:8080\r\nAccept: */*"
	        "\r\n\r\n",
	        "example.com", 8080);
	http_ok("GET / HTTP/1.1\r\nHost: [2001:DB8::1]:443\r\n\r\n", "2001:db8::1", 443);
	http_ok("GET / HTTP/1.1\r\nHost: [::1]\r\n\r\n", "::1", 0);
	http_ok("GET / HTTP/1.1\r\nHost: 10.0.0.1:80\r\n\r\n", "10.0.0.1", 80);
	http_ok("GET / HTTP/1.1\r\nHost: pypi.org.\r\n\r\n", "pypi.org", 0);
	http_ok("GET / HTTP/1.0\r\nHost: old.test\r\n\r\n", "old.test", 0);
	http_ok("OPTIONS * HTTP/1.1\r\nHost: a.test\r\n\r\n", "a.test", 0);
	http_ok("M-SEARCH / HTTP/1.1\r\nHost: a.test\r\n\r\n", "a.test", 0);
	/* any case of the header name; odd but allowed whitespace around the value */
	http_ok("GET / HTTP/1.1\r\nhost: lower.test\r\n\r\n", "lower.test", 0);
	http_ok("GET / HTTP/1.1\r\nHOST:nospace.test\r\n\r\n", "nospace.test", 0);
	http_ok("GET / HTTP/1.1\r\nHost: \t spaced.test \t\r\n\r\n", "spaced.test", 0);
	http_ok("GET / HTTP/1.1\r\nX-Empty:\r\nHost: a.test\r\n\r\n", "a.test", 0);
	/* a body after the head is not looked at */
	const char *post = "POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 7\r\n\r\n\r\nHost:";
	struct seen s = look(post, strlen(post));
	assert_int_equal(s.rc, AKS_INSPECT_HTTP);
	assert_string_equal(s.name, "a.test");
	/* a target in absolute or authority form names the same host */
	http_ok("GET http://a.test/x HTTP/1.1\r\nHost: a.test\r\n\r\n", "a.test", 0);
	http_ok("GET http://A.test:8080 HTTP/1.1\r\nHost: a.test\r\n\r\n", "a.test", 8080);
	http_ok("CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n", "a.test", 443);
	BAD_TEXT("GET http://evil.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
	         "request target and Host name different hosts");
	BAD_TEXT("GET http://allowed.test:81/ HTTP/1.1\r\nHost: allowed.test:80\r\n\r\n",
	         "different hosts");
	BAD_TEXT("CONNECT evil.test:443 HTTP/1.1\r\nHost: allowed.test\r\n\r\n", "different hosts");
	BAD_TEXT("GET http://allowed.test@evil.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n",
	         "unknown form");
	BAD_TEXT("GET evil.test HTTP/1.1\r\nHost: evil.test\r\n\r\n", "unknown form");
	BAD_TEXT("GET http://[::1/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "names no valid host");
}

/* Exactly one Host, and nothing a lenient server could read another way. */
static void test_http_bad(void **state)
{
	(void)state;
	BAD_TEXT("GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", "no Host header");
	BAD_TEXT("GET / HTTP/1.0\r\n\r\n", "no Host header");
	BAD_TEXT("GET / HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n", "two Host headers");
	BAD_TEXT("GET / HTTP/1.1\r\nHost: a.test\r\nhost: a.test\r\n\r\n", "two Host headers");
	BAD_TEXT("GET / HTTP/1.1\r\nHost : a.test\r\n\r\n", "whitespace before ':'");
	BAD_TEXT("GET / HTTP/1.1\r\nHost\t: a.test\r\n\r\n", "whitespace before ':'");
	BAD_TEXT("GET / HTTP/1.1\r\nHost: allowed.test\r\n evil.test\r\n\r\n",
	         "folded HTTP header line");
	BAD_TEXT("GET / HTTP/1.1\r\nX-A: b\r\n\tc\r\n", "folded HTTP header line");
	BAD_TEXT("GET / HTTP/1.1\r\n Host: a.test\r\n\r\n", "folded HTTP header line");
	BAD_TEXT("GET / HTTP/1.1\nHost: a.test\n\n", "does not end in CRLF");
	BAD_TEXT("GET / HTTP/1.1\r\nHost: a.test\nX: y\r\n\r\n", "bare LF");
	BAD_TEXT("GET / HTTP/1.1\r\nHost: a.test\rX: y\r\n\r\n", "bare CR");
	BAD_TEXT("GET / HTTP/1.1\r\nHost: a.test\r\n\rX", "bare CR");
	BAD_TEXT("GET / HTTP/1.1\r\nX: a\x01z\r\n", "control character");
	BAD_TEXT("GET / HTTP/1.1\r\nX@: y\r\n", "malformed HTTP header name");
	BAD_TEXT("GET / HTTP/1.1\r\n: y\r\n", "malformed HTTP header name");
	BAD_TEXT("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", "Host is not a valid host[:port]");
	BAD_TEXT("GET / HTTP/1.1\r\nHost: \r\n\r\n", "Host is not a valid host[:port]");
	BAD_TEXT("GET / HTTP/1.1\r\nHost: ::1\r\n\r\n", "Host is not a valid host[:port]");
	BAD_TEXT("GET / HTTP/1.1\r\nHost: a.test:\r\n\r\n", "Host is not a valid host[:port]");
	BAD_TEXT("GET / HTTP/1.1\r\nHost: a.test:0\r\n\r\n", "Host is not a valid host[:port]");
	BAD_TEXT("GET / HTTP/1.1\r\nHost: a.test:65536\r\n\r\n", "Host is not");
	BAD_TEXT("GET / HTTP/1.1\r\nHost: a.test:80:80\r\n\r\n", "Host is not");
	BAD_TEXT("GET / HTTP/1.1\r\nHost: [::1]x\r\n\r\n", "Host is not");
	BAD_TEXT("GET / HTTP/1.1\r\nHost: user@a.test\r\n\r\n", "Host is not");
	BAD_TEXT("GET / HTTP/1.1\r\nHost: a.test/x\r\n\r\n", "Host is not");
	BAD_TEXT("GET / HTTP/1.1\r\nHost: 127.1\r\n\r\n", "Host is not");
	BAD_TEXT("GET / HTTP/1.1\r\nHost: b\xc3\xbc"
	         "cher.de\r\n\r\n",
	         "Host is not");
	/* the request line */
	BAD_TEXT("GET  / HTTP/1.1\r\n", "malformed HTTP request target");
	BAD_TEXT("GET / HTTP/1.2\r\n", "HTTP version other than");
	BAD_TEXT("GET / HTTP/2.0\r\n", "HTTP version other than");
	BAD_TEXT("GET / http/1.1\r\n", "HTTP version other than");
	BAD_TEXT("GET / HTTP/1.1 \r\n", "does not end in CRLF");
	BAD_TEXT("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "HTTP/2 prior knowledge");
	BAD_TEXT("PRI * HTTP/2", "HTTP/2 prior knowledge");
	/* what a lenient server would still take for a request */
	BAD_TEXT("get / HTTP/1.1\r\nHost: evil.test\r\n\r\n", "malformed HTTP request line");
	BAD_TEXT("G3T / HTTP/1.1\r\n", "malformed HTTP request line");
	BAD_TEXT("X1 HTTP/", "malformed HTTP request line");
	BAD_TEXT(" GET / HTTP/1.1\r\n", "malformed HTTP request line");
	BAD_TEXT("\r\nGET / HTTP/1.1\r\nHost: evil.test\r\n\r\n", "empty line before");
	BAD_TEXT("\n\nPOST / HTTP/", "empty line before");
	BAD_TEXT("\r\nget / HTTP/1.1\r\n", "empty line before");
	/* decided as soon as the bytes show it, not at the end of the head */
	BAD_TEXT("GET / HTTP/1.1\r\nHost: a.test\r\nHost:", "two Host headers");
	BAD_TEXT("GET / HTTP/1.1\r\nHost: a.test\r\n x", "folded");
}

/* Not TLS, not HTTP: decided by the first byte, or by a first line that is no request. */
static void test_other(void **state)
{
	(void)state;
	static const char ssh[] = "SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13.5\r\n";
	decided_at_end(ssh, sizeof(ssh) - 1, AKS_INSPECT_OTHER);
	static const char redis[] = "*1\r\n$4\r\nPING\r\n";
	decided_at_end(redis, 4, AKS_INSPECT_OTHER);
	static const char stomp[] = "CONNECT\naccept-version:1.2\n\n";
	decided_at_end(stomp, 8, AKS_INSPECT_OTHER);
	/* client commands after a server's greeting: "WORD arg", no version */
	static const char ehlo[] = "EHLO client.test\r\n";
	decided_at_end(ehlo, sizeof(ehlo) - 1, AKS_INSPECT_OTHER);
	static const char user[] = "USER anonymous\r\n";
	decided_at_end(user, sizeof(user) - 1, AKS_INSPECT_OTHER);
	/* HTTP/0.9: no version, no headers, so no Host to front with */
	decided_at_end("GET /\r\n", 7, AKS_INSPECT_OTHER);
	/* a control character before the version: no server reads that as a request line */
	decided_at_end("GET /\x01 HTTP/1.1\r\n", 6, AKS_INSPECT_OTHER);
	/* binary protocols: the first byte decides */
	static const uint8_t pg[] = {0x00, 0x00, 0x00, 0x08, 0x04, 0xd2, 0x16, 0x2f};
	decided_at_end(pg, 1, AKS_INSPECT_OTHER);
	static const uint8_t sslv2[] = {0x80, 0x2e, 0x01, 0x00, 0x02};
	decided_at_end(sslv2, 1, AKS_INSPECT_OTHER);
	static const uint8_t alert[] = {0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28};
	decided_at_end(alert, 1, AKS_INSPECT_OTHER);
	/* a control character ends a line that could have been text */
	decided_at_end("Zz\x01", 3, AKS_INSPECT_OTHER);
	/* "HTTP/" arriving keeps the question open */
	assert_int_equal(look("X1 HTTP", 7).rc, AKS_INSPECT_MORE);
	assert_int_equal(look("X1 http/", 8).rc, AKS_INSPECT_BAD);
	/* nothing yet: the server may speak first */
	assert_int_equal(look("", 0).rc, AKS_INSPECT_MORE);
	assert_int_equal(aks_egress_inspect(NULL, 0, NULL, 0, NULL, NULL), AKS_INSPECT_MORE);
}

/* Nothing is waited for past AKS_INSPECT_MAX bytes. */
static void test_limit(void **state)
{
	(void)state;
	static char buf[AKS_INSPECT_MAX + 100];
	static const char head[] = "GET / HTTP/1.1\r\nHost: a.test\r\nX-Long: ";
	memcpy(buf, head, sizeof(head) - 1);
	memset(buf + sizeof(head) - 1, 'a', sizeof(buf) - sizeof(head) + 1);
	assert_int_equal(look(buf, AKS_INSPECT_MAX - 1).rc, AKS_INSPECT_MORE);
	expect_bad(buf, AKS_INSPECT_MAX, "longer than the inspection limit");
	expect_bad(buf, sizeof(buf), "longer than the inspection limit");
	/* a head that ends just past the limit is still too long */
	memcpy(buf + AKS_INSPECT_MAX - 2, "\r\n\r\n", 4);
	expect_bad(buf, AKS_INSPECT_MAX + 2, "longer than the inspection limit");
	/* one that ends at it is fine */
	memcpy(buf + AKS_INSPECT_MAX - 4, "\r\n\r\n", 4);
	struct seen s = look(buf, sizeof(buf));
	assert_int_equal(s.rc, AKS_INSPECT_HTTP);
	assert_string_equal(s.name, "a.test");
	/* a first line that never ends */
	memset(buf, 'a', sizeof(buf));
	buf[0] = 'S';
	assert_int_equal(look(buf, AKS_INSPECT_MAX - 1).rc, AKS_INSPECT_MORE);
	expect_bad(buf, AKS_INSPECT_MAX, "first line longer than the inspection limit");
	/* only empty lines */
	memset(buf, '\n', sizeof(buf));
	assert_int_equal(look(buf, 100).rc, AKS_INSPECT_MORE);
	expect_bad(buf, AKS_INSPECT_MAX, "longer than the inspection limit");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tls_real),        cmocka_unit_test(test_tls_lengths),
	    cmocka_unit_test(test_tls_server_name), cmocka_unit_test(test_http_host),
	    cmocka_unit_test(test_http_bad),        cmocka_unit_test(test_other),
	    cmocka_unit_test(test_limit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
