/*
 * core/mcp/mcp_loop.c - the stdio transport's framing: newline-delimited
 * messages read from a file descriptor, each line bounded in size.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcp.h"

static bool is_blank(const char *p, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
			return false;
	}
	return true;
}

static void deliver(aks__mcp_server *s, const char *line, size_t len)
{
	if (len > 0 && line[len - 1] == '\r')
		len--;
	if (!is_blank(line, len))
		aks__mcp_server_handle_line(s, line, len);
}

int aks__mcp_serve_fd(aks__mcp_server *s, int fd, size_t max_line, volatile sig_atomic_t *stop)
{
	size_t cap = 64 << 10, len = 0;
	if (cap > max_line + 1)
		cap = max_line + 1;
	char *buf = malloc(cap);
	bool discarding = false; /* inside a line that was too long */
	int rc = 0;
	if (!buf) {
		errno = ENOMEM;
		return -1;
	}
	while (!(stop && *stop) && !aks__mcp_server_peer_gone(s)) {
		/* poll with a timeout, so a signal caught on another thread (or a
		 * stop request) is seen within a fraction of a second. */
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int ready = poll(&pfd, 1, 200);
		if (ready < 0 && errno != EINTR) {
			rc = -1;
			break;
		}
		aks__mcp_server_reap(s);
		if (ready <= 0)
			continue;
		if (len == cap) {
			size_t grown = cap * 2 > max_line + 1 ? max_line + 1 : cap * 2;
			char *p = realloc(buf, grown);
			if (!p) {
				errno = ENOMEM;
				rc = -1;
				break;
			}
			buf = p;
			cap = grown;
		}
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			rc = -1;
			break;
		}
		if (n == 0) {
			/* A last message without its newline still counts. */
			if (len > 0 && !discarding)
				deliver(s, buf, len);
			break;
		}
		size_t scan = len, start = 0;
		len += (size_t)n;
		for (;;) {
			char *nl = memchr(buf + scan, '\n', len - scan);
			if (!nl)
				break;
			size_t end = (size_t)(nl - buf);
			if (discarding)
				discarding = false; /* the oversized line ends here */
			else
				deliver(s, buf + start, end - start);
			start = scan = end + 1;
			if (aks__mcp_server_peer_gone(s))
				break;
		}
		memmove(buf, buf + start, len - start);
		len -= start;
		if (len > max_line || (discarding && len > 0)) {
			/* Too long: refuse it once, then drop bytes until its newline. */
			if (!discarding)
				aks__mcp_server_handle_oversized(s, max_line);
			discarding = true;
			len = 0;
		}
	}
	free(buf);
	return rc;
}
