/*
 * core/plugin/host_api.c - the host services table and the core's logger.
 *
 * Plugins never link against libaksandbox; everything they need from the host
 * comes through this table, so a plugin built against SDK 1.0 keeps working
 * with any 1.x host.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aks_text.h"
#include "config/block.h"
#include "plugin/host_api.h"
#include "plugin/result.h"
#include "util/cancel.h"

/* Read by every logging thread, set by aks_log_set_level: atomic. */
static atomic_int log_threshold = -1;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;

/* AKS_LOG_LEVEL=error|warning|info|debug; warnings by default. */
static void read_log_level(void)
{
	const char *v = getenv("AKS_LOG_LEVEL");
	log_threshold = AKS_LOG_WARNING;
	if (!v)
		return;
	if (strcmp(v, "error") == 0)
		log_threshold = AKS_LOG_ERROR;
	else if (strcmp(v, "info") == 0)
		log_threshold = AKS_LOG_INFO;
	else if (strcmp(v, "debug") == 0)
		log_threshold = AKS_LOG_DEBUG;
	else if (strcmp(v, "quiet") == 0 || strcmp(v, "none") == 0)
		log_threshold = AKS_LOG_ERROR - 1;
}

AKS_EXPORT void aks_log_set_level(int level)
{
	pthread_once(&log_once, read_log_level);
	log_threshold = level < AKS_LOG_ERROR ? AKS_LOG_ERROR - 1 : level;
}

static void vlog(int level, const char *component, const char *fmt, va_list ap) AKS_PRINTF(3, 0);
static void vlog(int level, const char *component, const char *fmt, va_list ap)
{
	static const char *const names[] = {"error", "warning", "info", "debug"};
	pthread_once(&log_once, read_log_level);
	if (level > log_threshold || level < AKS_LOG_ERROR)
		return;
	char line[2048];
	int n = snprintf(line, sizeof(line), "aksandbox[%s]: %s: ", component ? component : "core",
	                 names[level > AKS_LOG_DEBUG ? AKS_LOG_DEBUG : level]);
	if (n < 0 || (size_t)n >= sizeof(line))
		return;
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	size_t len = m < 0 ? (size_t)n : (size_t)n + (size_t)m;
	if (len >= sizeof(line))
		len = sizeof(line) - 1;
	/* Messages carry bytes from sandboxes and backends: nothing in them may steer the
	 * terminal or start a forged line of its own. */
	char safe[4 * sizeof(line) + 1];
	aks__text_printable(safe, sizeof(safe), line, len);
	/* One write per line, so concurrent threads do not interleave. */
	fprintf(stderr, "%s\n", safe);
}

void aks__log(int level, const char *component, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(level, component, fmt, ap);
	va_end(ap);
}

static void host_log(int level, const char *plugin, const char *fmt, ...) AKS_PRINTF(3, 4);
static void host_log(int level, const char *plugin, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(level, plugin, fmt, ap);
	va_end(ap);
}

static int host_error_set(aks_error **err, int code, const char *fmt, ...) AKS_PRINTF(3, 4);
static int host_error_set(aks_error **err, int code, const char *fmt, ...)
{
	/* A plugin must not report success as an error, nor invent codes. */
	if (code >= 0 || code < AKS_EIO)
		code = AKS_ERROR;
	va_list ap;
	va_start(ap, fmt);
	aks__error_vset(err, code, fmt, ap);
	va_end(ap);
	return code;
}

static int host_result_write(aks_result *r, int stream, const void *data, size_t len,
                             aks_error **err)
{
	return aks__result_write(r, stream, data, len, err);
}

static const aks_host_api host_api = {
    .struct_version = AKS_HOST_API_VERSION,
    .struct_size = sizeof(aks_host_api),
    .log = host_log,
    .error_set = host_error_set,
    .error_code = aks_error_code,
    .error_message = aks_error_message,
    .error_free = aks_error_free,
    .config_string = aks__config_string,
    .config_bool = aks__config_bool,
    .config_int = aks__config_int,
    .config_double = aks__config_double,
    .config_list = aks__config_list,
    .config_map = aks__config_map,
    .config_json = aks__config_json,
    .result_write = host_result_write,
    .result_set_exit_code = aks__result_set_exit_code,
    .result_set_timed_out = aks__result_set_timed_out,
    .result_set_notice = aks__result_set_notice,
    .result_add_file = aks__result_add_file,
    .result_set_provider_data = aks__result_set_provider_data,
    .now_ms = aks__now_ms,
    .cancelled = aks__call_cancelled,
    .cancel_fd = aks__call_cancel_fd,
    .principal_set = aks__principal_set,
    .principal_add_group = aks__principal_add_group,
    .principal_add_credential = aks__principal_add_credential,
    .result_add_egress_refused = aks__result_add_egress_refused,
    .result_add_unseen = aks__result_add_unseen,
};

const aks_host_api *aks__host_api(void)
{
	return &host_api;
}

AKS_EXPORT const aks_host_api *aks_host_services(void)
{
	return aks__host_api();
}
