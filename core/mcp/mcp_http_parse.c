/*
 * core/mcp/mcp_http_parse.c - the header values the Streamable HTTP transport reads itself
 * (libmicrohttpd parses the HTTP; these are what a client puts in two headers). Pure
 * functions: tests/fuzz/fuzz_mcp_http_headers.c checks them.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mcp_http.h"

bool aks__mcp_http_loopback_origin(const char *origin)
{
	const char *p = strstr(origin, "://");
	if (!p || strcspn(origin, ":/") != (size_t)(p - origin) || p == origin)
		return false; /* a scheme first, then "://" */
	p += 3;
	size_t n;
	if (*p == '[') {
		n = strcspn(p, "]");
		if (p[n] != ']')
			return false;
		n++;
	} else {
		n = strcspn(p, ":/");
	}
	/* After the host: nothing, a port, or a path (browsers send none, but be exact). */
	if (p[n] && p[n] != ':' && p[n] != '/')
		return false;
	static const char *const hosts[] = {"localhost", "127.0.0.1", "[::1]", NULL};
	for (size_t i = 0; hosts[i]; i++)
		if (strlen(hosts[i]) == n && strncasecmp(p, hosts[i], n) == 0)
			return true;
	return false;
}

/* A decimal number of at most 19 digits (no sign, no space) at *p; advances *p. */
static bool decimal(const char **p, uint64_t *out)
{
	size_t n = strspn(*p, "0123456789");
	if (n == 0 || n > 19)
		return false;
	char *end;
	errno = 0;
	*out = strtoull(*p, &end, 10);
	if (errno || end != *p + n)
		return false;
	*p = end;
	return true;
}

bool aks__mcp_http_parse_event_id(const char *text, uint64_t *stream, uint64_t *seq)
{
	const char *p = text;
	return decimal(&p, stream) && *p++ == '-' && decimal(&p, seq) && *p == '\0';
}
