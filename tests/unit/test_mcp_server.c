/* Unit tests of the MCP server's bound on tools/call in flight (core/mcp/mcp_server.c), with
 * the local_subprocess provider (per call) and a write function of the test's own: a call
 * whose response the client has read is no longer in flight, however late its thread runs
 * again after writing that response. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include <aksandbox/aksandbox.h>

#include "mcp/mcp.h"

static const char *const no_env[] = {NULL};

/* How long the writer of the first call's response stays in the write function after the
 * client has the line: a call thread descheduled right after its write, as on a loaded
 * machine. The next call is sent within that time. */
#define STALL_MS 300

/* Every line the server wrote, and a signal when the one awaited arrives. */
typedef struct wire {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct json_object *lines; /* array of the parsed messages */
	const char *stall_on_id;   /* the response whose writer stalls once delivered */
} wire;

typedef struct fixture {
	char dir[64];
	aks_settings *settings;
	aks_runtime *rt;
	aks__mcp_server *srv;
	wire w;
} fixture;

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0)
		;
}

static bool has_id(struct json_object *msg, const char *id)
{
	struct json_object *v = NULL;
	return json_object_object_get_ex(msg, "id", &v) &&
	       json_object_is_type(v, json_type_string) &&
	       strcmp(json_object_get_string(v), id) == 0;
}

/* The server's write function: records the line, wakes the waiter, and for the chosen
 * response stays here a while after delivering it (the write lock held, as a real write). */
static int record_line(void *userdata, void *route, const char *line, size_t len)
{
	wire *w = userdata;
	struct json_object *msg = json_tokener_parse(line);
	(void)len;
	(void)route;
	pthread_mutex_lock(&w->mu);
	bool stall = msg && w->stall_on_id && has_id(msg, w->stall_on_id);
	if (stall)
		w->stall_on_id = NULL;
	json_object_array_add(w->lines, msg);
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	if (stall)
		sleep_ms(STALL_MS);
	return 0;
}

/* The message with this id (a new reference), waiting up to 30 s for it. */
static struct json_object *wait_for(wire *w, const char *id)
{
	struct timespec deadline;
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 30;
	struct json_object *found = NULL;
	pthread_mutex_lock(&w->mu);
	while (!found) {
		for (size_t i = 0; !found && i < json_object_array_length(w->lines); i++) {
			struct json_object *m = json_object_array_get_idx(w->lines, i);
			if (has_id(m, id))
				found = json_object_get(m);
		}
		if (!found && pthread_cond_timedwait(&w->cv, &w->mu, &deadline) != 0)
			break;
	}
	pthread_mutex_unlock(&w->mu);
	if (!found)
		fail_msg("no response to '%s' within 30 s", id);
	return found;
}

static void send_line(fixture *fx, const char *line)
{
	aks__mcp_server_handle_line(fx->srv, line, strlen(line));
}

static void send_call(fixture *fx, const char *id)
{
	char line[256];
	snprintf(line, sizeof(line),
	         "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"method\":\"tools/call\",\"params\":"
	         "{\"name\":\"run_command\",\"arguments\":{\"command\":\"echo %s\"}}}",
	         id, id);
	send_line(fx, line);
}

/* The response is a tool result whose stdout is `want`, or the test fails saying what came. */
static void assert_ran(struct json_object *msg, const char *want)
{
	const char *text = json_object_to_json_string(msg);
	struct json_object *result = NULL, *content = NULL;
	if (!json_object_object_get_ex(msg, "result", &result) ||
	    !json_object_object_get_ex(result, "content", &content))
		fail_msg("expected a tool result, got %s", text);
	struct json_object *tool = json_tokener_parse(json_object_get_string(
	    json_object_object_get(json_object_array_get_idx(content, 0), "text")));
	struct json_object *out = NULL;
	if (!tool || !json_object_object_get_ex(tool, "stdout", &out) ||
	    strcmp(json_object_get_string(out), want) != 0)
		fail_msg("expected stdout '%s', got %s", want, text);
	json_object_put(tool);
}

static int setup(void **state)
{
	fixture *fx = calloc(1, sizeof(*fx));
	if (!fx)
		return -1;
	strcpy(fx->dir, "/tmp/aks-mcp-XXXXXX");
	if (!mkdtemp(fx->dir))
		return -1;
	char cfg[128], st[128];
	snprintf(cfg, sizeof(cfg), "%s/config.yaml", fx->dir);
	snprintf(st, sizeof(st), "%s/state", fx->dir);
	FILE *f = fopen(cfg, "w");
	if (!f)
		return -1;
	fprintf(f,
	        "sandbox:\n"
	        "  enabled: true\n"
	        "  profiles:\n"
	        "    default: {type: local_subprocess,\n"
	        "              local_subprocess: {workdir: %s/boxes, agent: false}}\n",
	        fx->dir);
	if (fclose(f) != 0)
		return -1;
	aks_error *err = NULL;
	if (aks_settings_load(cfg, no_env, &fx->settings, &err) < 0 ||
	    aks_runtime_open(fx->settings, st, &fx->rt, &err) < 0) {
		fprintf(stderr, "setup: %s\n", err ? aks_error_message(err) : "config");
		aks_error_free(err);
		return -1;
	}
	pthread_mutex_init(&fx->w.mu, NULL);
	pthread_cond_init(&fx->w.cv, NULL);
	fx->w.lines = json_object_new_array();
	aks__mcp_options opt = {.rt = fx->rt,
	                        .settings = fx->settings,
	                        .conversation_id = "mcp-unit",
	                        .max_calls = 1,
	                        .write = record_line,
	                        .write_data = &fx->w};
	if (!fx->w.lines || aks__mcp_server_new(&opt, &fx->srv) != AKS_OK)
		return -1;
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	fixture *fx = *state;
	aks__mcp_server_shutdown(fx->srv);
	aks__mcp_server_free(fx->srv);
	json_object_put(fx->w.lines);
	pthread_cond_destroy(&fx->w.cv);
	pthread_mutex_destroy(&fx->w.mu);
	aks_runtime_close(fx->rt);
	aks_settings_free(fx->settings);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx->dir);
	int rc = system(cmd);
	free(fx);
	return rc == 0 ? 0 : -1;
}

/* --max-calls 1: the next call, sent as soon as the previous response has arrived, runs,
 * while the previous call's thread is still inside the write of that response. */
static void test_slot_free_once_answered(void **state)
{
	fixture *fx = *state;
	send_line(fx, "{\"jsonrpc\":\"2.0\",\"id\":\"init\",\"method\":\"initialize\",\"params\":"
	              "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},"
	              "\"clientInfo\":{\"name\":\"unit\",\"version\":\"1\"}}}");
	json_object_put(wait_for(&fx->w, "init"));
	send_line(fx, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");

	pthread_mutex_lock(&fx->w.mu);
	fx->w.stall_on_id = "first";
	pthread_mutex_unlock(&fx->w.mu);
	send_call(fx, "first");
	struct json_object *first = wait_for(&fx->w, "first");
	assert_ran(first, "first\n");
	json_object_put(first);

	send_call(fx, "second"); /* the first call's writer is still stalled */
	struct json_object *second = wait_for(&fx->w, "second");
	assert_ran(second, "second\n");
	json_object_put(second);
}

/* The bound itself still holds: a call while one runs is refused at once. */
static void test_bound_while_running(void **state)
{
	fixture *fx = *state;
	send_line(fx, "{\"jsonrpc\":\"2.0\",\"id\":\"init\",\"method\":\"initialize\",\"params\":"
	              "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},"
	              "\"clientInfo\":{\"name\":\"unit\",\"version\":\"1\"}}}");
	json_object_put(wait_for(&fx->w, "init"));
	send_line(fx, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
	send_line(fx, "{\"jsonrpc\":\"2.0\",\"id\":\"long\",\"method\":\"tools/call\",\"params\":"
	              "{\"name\":\"run_command\",\"arguments\":{\"command\":\"sleep 30\"}}}");
	send_call(fx, "refused");
	struct json_object *r = wait_for(&fx->w, "refused");
	struct json_object *e = NULL;
	assert_true(json_object_object_get_ex(r, "error", &e));
	assert_int_equal(json_object_get_int(json_object_object_get(e, "code")),
	                 AKS_MCP_SERVER_BUSY);
	json_object_put(r);
	/* teardown cancels the long call: shutdown kills it and joins its thread */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_slot_free_once_answered, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bound_while_running, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
