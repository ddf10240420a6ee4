/*
 * core/cli/http_module.h - the CLI's HTTP servers (`aksandbox mcp --listen`, `aksandbox worker
 * --metrics`), built as a module of their own, aksandbox-http.so, that the CLI loads only
 * when one is asked for.
 *
 * Why: the servers are libmicrohttpd's, which brings GnuTLS, p11-kit and their libraries,
 * whose loading and constructors cost more than a whole `sh -c true` at every start of the
 * CLI. Every other command (`run`, `tool`, `check`...) starts without them.
 */
#ifndef AKS_CORE_CLI_HTTP_MODULE_H
#define AKS_CORE_CLI_HTTP_MODULE_H

#include <signal.h>

#include <aksandbox/aksandbox.h>

#include "mcp/mcp.h"

typedef struct cli_metrics cli_metrics;

/* The module's one exported symbol: a `const cli_http_module`. */
#define CLI_HTTP_MODULE_SYMBOL "aksandbox_cli_http"
#define CLI_HTTP_MODULE_FILE   "aksandbox-http.so"
/* Raised whenever the table or a type it passes changes. */
#define CLI_HTTP_MODULE_ABI 1

typedef struct cli_http_module {
	unsigned abi;        /* CLI_HTTP_MODULE_ABI */
	const char *version; /* PACKAGE_VERSION: a module of another release is refused */
	int (*mcp_http_serve)(const aks__mcp_http_options *opt, volatile sig_atomic_t *stop);
	int (*metrics_start)(const char *spec, aks_worker_monitor *monitor, cli_metrics **out);
	void (*metrics_stop)(cli_metrics *m);
} cli_http_module;

/* In the module (worker_metrics.c): the metrics server. */
int cli_http_metrics_start(const char *spec, aks_worker_monitor *monitor, cli_metrics **out);
void cli_http_metrics_stop(cli_metrics *m);

/* In the CLI (http_load.c): the module, loaded at the first call; NULL after saying on
 * stderr why it cannot be (`what` names the option that needed it). */
const cli_http_module *cli_http_module_load(const char *what);

#endif /* AKS_CORE_CLI_HTTP_MODULE_H */
