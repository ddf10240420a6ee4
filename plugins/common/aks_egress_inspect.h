/*
 * plugins/common/aks_egress_inspect.h - the first bytes a sandbox program sends through a
 * proxied connection, read by the host before it forwards any of them (issue 22). The
 * connection was allowed for a name; a program must not then ask the server there for
 * another one (domain fronting: a TLS server_name or an HTTP Host that differs), so the host
 * compares the name found here with the rules before the server sees a byte. The input is
 * untrusted: nothing here reads outside p[0..n) or allocates. libc only.
 */
#ifndef AKS_COMMON_EGRESS_INSPECT_H
#define AKS_COMMON_EGRESS_INSPECT_H

#include <stddef.h>
#include <stdint.h>

enum aks_inspect {
	AKS_INSPECT_MORE = 0, /* not enough bytes to decide yet */
	AKS_INSPECT_TLS,      /* a TLS ClientHello: name is its server_name, or "" */
	AKS_INSPECT_HTTP,     /* an HTTP/1.x request head: name and port are its Host's */
	AKS_INSPECT_OTHER,    /* neither: forward as it is */
	AKS_INSPECT_BAD       /* looks like TLS or HTTP but is not a well-formed one: refuse */
};

/* The most bytes looked at: one whole TLS record (a 5-byte header and 16384 bytes). */
#define AKS_INSPECT_MAX (16u * 1024u + 5u)

/*
 * Looks at p[0..AKS_INSPECT_MAX) (n bytes given; more are not looked at) and returns one of
 * enum aks_inspect. The decision only ever depends on the bytes before the point where it is
 * made, so feeding a stream's bytes as they come and calling again on the longer prefix gives
 * MORE until the decision, and that same decision (and name and port) from then on.
 *
 *  MORE   only when n < AKS_INSPECT_MAX (n == 0 included: the server may be the one to speak
 *         first; the caller's timeout decides then).
 *  TLS    p starts with a TLS handshake record holding a whole ClientHello: name is its
 *         server_name (a host_name, lowercased, one trailing dot dropped), or "" without the
 *         extension. A ClientHello is waited for until its whole first record (at most
 *         AKS_INSPECT_MAX bytes) is there.
 *  HTTP   p starts with an HTTP/1.0 or HTTP/1.1 request head (request line, header lines,
 *         CRLF CRLF), with exactly one Host header: name is its host (lowercased; an IPv6
 *         literal without its brackets, IP literals in canonical form), *port its port or 0.
 *         A request target in absolute form (http://host/...) or authority form (CONNECT
 *         host:port) must name the same host.
 *  OTHER  the first byte can start neither: TLS starts with 0x16, and text may be HTTP (a
 *         control character other than TAB, CR and LF, or a byte above 0x7e, cannot start
 *         it; lenient servers take any token as a method and skip empty lines before the
 *         request line, so a printable first byte is not enough to decide). Or text whose
 *         first line ends, or has a control character, before any "HTTP/" (in any case):
 *         a request line names its version, and one without (HTTP/0.9's) has no headers, so
 *         no Host. Client commands of SMTP, FTP or POP3 ("EHLO x\r\n"), an SSH banner
 *         ("SSH-2.0-OpenSSH_9.6 Ubuntu\r\n"), a Redis "*1\r\n" are OTHER.
 *  BAD    looks like TLS or HTTP and is not a well-formed one: a record that is no handshake,
 *         a ClientHello split across records or with trailing bytes, a server_name that is
 *         not a host name (an IP address, a NUL, two names), an encrypted ClientHello (ECH,
 *         which hides the real name), HTTP/2 prior knowledge ("PRI * HTTP/2.0"), a first
 *         line with "HTTP/" that is no strict request line (METHOD of uppercase letters, '-'
 *         and '_', one space, a target, one space, HTTP/1.0 or HTTP/1.1, CRLF: so "get /
 *         HTTP/1.1" is BAD), empty lines before the request line, a head that does not end within
 * AKS_INSPECT_MAX bytes, a folded or malformed header line, a bare LF or CR, none or two Host
 * headers; *why (when not NULL) says which, in a short phrase.
 *
 * Only the first message is read: a later request on a kept-alive HTTP connection, a second
 * ClientHello (after a HelloRetryRequest) and the Host header inside TLS are not seen here.
 *
 * name has room for cap bytes and is always NUL-terminated when cap > 0 ("" unless TLS or
 * HTTP); 256 is enough, and a name that does not fit is BAD. *port is 0 unless HTTP's Host
 * has a port; *why is NULL unless BAD. port and why may be NULL.
 */
int aks_egress_inspect(const uint8_t *p, size_t n, char *name, size_t cap, unsigned *port,
                       const char **why);

#endif /* AKS_COMMON_EGRESS_INSPECT_H */
