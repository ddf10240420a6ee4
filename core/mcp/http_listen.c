/*
 * core/mcp/http_listen.c - see http_listen.h.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http_listen.h"

static bool is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		return IN6_IS_ADDR_LOOPBACK(a) ||
		       (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return false;
}

/* Splits spec into host (default 127.0.0.1) and port; -1 with err written when it is neither
 * form. */
static int split(const char *spec, char *host, size_t hostsize, const char **port, char *err,
                 size_t errlen)
{
	snprintf(host, hostsize, "127.0.0.1");
	*port = spec;
	const char *colon = strrchr(spec, ':');
	if (spec[0] == '[') {
		const char *close_br = strchr(spec, ']');
		if (!close_br || close_br[1] != ':' || (size_t)(close_br - spec - 1) >= hostsize) {
			snprintf(err, errlen, "'%s' is not [ADDRESS]:PORT", spec);
			return -1;
		}
		memcpy(host, spec + 1, (size_t)(close_br - spec - 1));
		host[close_br - spec - 1] = '\0';
		*port = close_br + 2;
	} else if (colon) {
		if ((size_t)(colon - spec) >= hostsize) {
			snprintf(err, errlen, "'%s': the host is too long", spec);
			return -1;
		}
		memcpy(host, spec, (size_t)(colon - spec));
		host[colon - spec] = '\0';
		*port = colon + 1;
	}
	if (!**port || strspn(*port, "0123456789") != strlen(*port) || strlen(*port) > 5 ||
	    strtoul(*port, NULL, 10) > 65535) {
		snprintf(err, errlen, "'%s': the port is not a number from 0 to 65535", spec);
		return -1;
	}
	return 0;
}

int aks__http_listen_tcp(const char *spec, const char *non_loopback_refusal, bool *loopback,
                         char *bound, size_t boundsize, char *err, size_t errlen)
{
	char host[256];
	const char *port;
	if (split(spec, host, sizeof(host), &port, err, errlen) < 0)
		return -1;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_family = AF_UNSPEC};
	struct addrinfo *ai = NULL;
	int gai = getaddrinfo(host, port, &hints, &ai);
	if (gai != 0) {
		snprintf(err, errlen, "cannot resolve '%s': %s", host, gai_strerror(gai));
		return -1;
	}
	*loopback = is_loopback(ai->ai_addr);
	if (!*loopback && non_loopback_refusal) {
		snprintf(err, errlen, "'%s' is not a loopback address: %s", host,
		         non_loopback_refusal);
		freeaddrinfo(ai);
		return -1;
	}
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0) {
		snprintf(err, errlen, "cannot listen on %s: %s", spec, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return -1;
	}
	freeaddrinfo(ai);
	struct sockaddr_storage sa;
	socklen_t salen = sizeof(sa);
	char addr[INET6_ADDRSTRLEN] = "?";
	unsigned port_no = 0;
	if (getsockname(fd, (struct sockaddr *)&sa, &salen) == 0) {
		if (sa.ss_family == AF_INET6) {
			const struct sockaddr_in6 *b6 = (const struct sockaddr_in6 *)&sa;
			inet_ntop(AF_INET6, &b6->sin6_addr, addr, sizeof(addr));
			port_no = ntohs(b6->sin6_port);
		} else {
			const struct sockaddr_in *b4 = (const struct sockaddr_in *)&sa;
			inet_ntop(AF_INET, &b4->sin_addr, addr, sizeof(addr));
			port_no = ntohs(b4->sin_port);
		}
	}
	bool v6 = sa.ss_family == AF_INET6;
	snprintf(bound, boundsize, "%s%s%s:%u", v6 ? "[" : "", addr, v6 ? "]" : "", port_no);
	return fd;
}
