/*
 * core/mcp/http_listen.h - a TCP listening socket from an operator's "[HOST:]PORT", for the
 * command line's HTTP servers: MCP's Streamable HTTP transport (mcp_http.c) and the queue
 * worker's metrics endpoint (core/cli/worker_metrics.c).
 */
#ifndef AKS_CORE_MCP_HTTP_LISTEN_H
#define AKS_CORE_MCP_HTTP_LISTEN_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Listens on spec: "PORT", "HOST:PORT" or "[V6]:PORT"; HOST defaults to 127.0.0.1, PORT 0
 * takes any free port. Returns the listening socket (close-on-exec), with `bound` set to the
 * address as bound ("127.0.0.1:8080", "[::1]:8080") and *loopback to whether it is a loopback
 * one; -1 with err written otherwise. With `non_loopback_refusal`, an address that is not a
 * loopback one is refused before anything is bound: "'HOST' is not a loopback address: " and
 * that text.
 */
int aks__http_listen_tcp(const char *spec, const char *non_loopback_refusal, bool *loopback,
                         char *bound, size_t boundsize, char *err, size_t errlen);

#endif /* AKS_CORE_MCP_HTTP_LISTEN_H */
