/*
 * Fuzz target: the MCP server's input path, as an MCP client (an untrusted
 * peer) drives it. The input is split into lines, as the stdio transport
 * frames it, and each line goes through the server's parse and dispatch:
 * initialize, stateless 2026-07-28 requests, tools/list, tools/call (on a
 * runtime whose sandbox is disabled, so no program runs: every call returns
 * the tools' "disabled" error, on its own thread as usual), cancellations.
 * Aborts (which the fuzzer and the corpus driver report) when:
 *   - a line written is not exactly one JSON-RPC 2.0 response: an object with
 *     "jsonrpc": "2.0", an id that is null, a string or a number, and either
 *     a result object or an error with an integer code and a string message;
 *   - a line the parser calls bad JSON is not answered with exactly one
 *     -32700, or the server answers more messages than it was sent.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "core/mcp/mcp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

static aks_settings *settings;
static aks_runtime *runtime;

struct sink {
	pthread_mutex_t lock;
	size_t messages;
	size_t parse_errors;
};

static void check_response(const char *line, size_t len, struct sink *sink)
{
	CHECK(len > 0 && line[len - 1] == '\n');
	CHECK(!memchr(line, '\n', len - 1));
	struct json_object *msg = json_tokener_parse(line), *v, *id, *result, *error;
	CHECK(msg && json_object_is_type(msg, json_type_object));
	CHECK(json_object_object_get_ex(msg, "jsonrpc", &v) &&
	      strcmp(json_object_get_string(v), "2.0") == 0);
	CHECK(json_object_object_get_ex(msg, "id", &id));
	CHECK(!id || aks__mcp_id_valid(id));
	bool has_result = json_object_object_get_ex(msg, "result", &result);
	bool has_error = json_object_object_get_ex(msg, "error", &error);
	CHECK(has_result != has_error);
	if (has_result) {
		CHECK(json_object_is_type(result, json_type_object));
	} else {
		CHECK(json_object_is_type(error, json_type_object));
		CHECK(json_object_object_get_ex(error, "code", &v) &&
		      json_object_is_type(v, json_type_int));
		if (json_object_get_int(v) == AKS_MCP_PARSE_ERROR) {
			CHECK(!id); /* nothing was parsed to take an id from */
			sink->parse_errors++;
		}
		CHECK(json_object_object_get_ex(error, "message", &v) &&
		      json_object_is_type(v, json_type_string));
	}
	sink->messages++;
	json_object_put(msg);
}

/* Runs with the server's write lock held: one line at a time. */
static int sink_write(void *userdata, void *route, const char *line, size_t len)
{
	(void)route;
	struct sink *sink = userdata;
	pthread_mutex_lock(&sink->lock);
	check_response(line, len, sink);
	pthread_mutex_unlock(&sink->lock);
	return 0;
}

static void setup(void)
{
	static const char *const envp[] = {"AK_SANDBOX__ENABLED=false", NULL};
	aks_error *err = NULL;
	aks_log_set_level(-1);
	CHECK(aks_settings_load(NULL, envp, &settings, &err) == AKS_OK);
	CHECK(!aks_settings_is_enabled(settings));
	CHECK(aks_runtime_open(settings, NULL, &runtime, &err) == AKS_OK);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!runtime)
		setup();
	struct sink sink = {.lock = PTHREAD_MUTEX_INITIALIZER};
	aks__mcp_options opt = {
	    .rt = runtime,
	    .settings = settings,
	    .conversation_id = "fuzz",
	    .agent = size & 1 ? "fuzzer" : NULL,
	    .max_calls = 2,
	    .write = sink_write,
	    .write_data = &sink,
	};
	aks__mcp_server *srv = NULL;
	CHECK(aks__mcp_server_new(&opt, &srv) == AKS_OK);
	const char *p = (const char *)data, *end = p + size;
	size_t lines = 0, bad_json = 0;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = (size_t)((nl ? nl : end) - p);
		aks__mcp_message m;
		aks__mcp_parse(p, len, &m);
		bad_json += m.kind == AKS_MCP_MSG_INVALID && m.error_code == AKS_MCP_PARSE_ERROR;
		aks__mcp_message_clear(&m);
		aks__mcp_server_handle_line(srv, p, len);
		lines++;
		p += len + 1;
	}
	aks__mcp_server_shutdown(srv);
	aks__mcp_server_free(srv);
	CHECK(sink.parse_errors == bad_json);
	CHECK(sink.messages <= lines);
	pthread_mutex_destroy(&sink.lock);
	return 0;
}
