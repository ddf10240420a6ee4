/*
 * core/cli/http_module.c - the table aksandbox-http.so exports to the CLI (http_module.h).
 */
#include "config.h"

#include "http_module.h"

AKS_EXPORT const cli_http_module aksandbox_cli_http = {
    .abi = CLI_HTTP_MODULE_ABI,
    .version = PACKAGE_VERSION,
    .mcp_http_serve = aks__mcp_http_serve,
    .metrics_start = cli_http_metrics_start,
    .metrics_stop = cli_http_metrics_stop,
};
