/* Unit tests: output streamed to the C API's callback (aks_tool_context.on_output) while a
 * run_code or run_command call runs, with the local_subprocess provider, per call or through
 * the build's aksandbox-agent (test_output_stream_agent: LS_TEST_AGENT). Chunks arrive
 * before the call ends, in order, stdout and stderr apart; bytes past the stream cap are
 * still streamed; nothing is called after aks_runtime_call_tool returns, also when the run
 * goes on as a pending task; an old (version 1) context streams nothing; file tools stream
 * nothing. Also the context's own wait (version 3). */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include <aksandbox/aksandbox.h>

/* This binary runs every test per call (agent: false) or through the build's agent. */
#ifndef LS_TEST_AGENT
#define LS_TEST_AGENT "false"
#endif

static const char *const no_env[] = {NULL};

typedef struct fixture {
	char dir[64];
	char cfg[128];
	char state[128];
	aks_settings *settings;
	aks_runtime *rt;
} fixture;

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- what the callback saw ---- */

#define MAX_CHUNKS 4096

typedef struct chunk {
	int stream;
	size_t off; /* where its bytes start in that stream's buffer */
	size_t len;
	double at;
} chunk;

typedef struct record {
	pthread_mutex_t mu; /* the library serialises calls; the lock makes the reads safe */
	char *out, *err;    /* every byte, per stream */
	size_t out_len, err_len, out_cap, err_cap;
	chunk chunks[MAX_CHUNKS];
	size_t n;      /* chunks kept */
	size_t calls;  /* every call */
	bool bad;      /* a call with a wrong tool, stream or length */
	char tool[32]; /* the tool name passed */
} record;

/* Set once a call has returned; a callback after that is counted here. */
static atomic_bool returned;
static atomic_int late_calls;

static void append(char **buf, size_t *len, size_t *cap, const void *data, size_t n)
{
	if (*len + n + 1 > *cap) {
		size_t c = *cap ? *cap : 4096;
		while (c < *len + n + 1)
			c *= 2;
		*buf = realloc(*buf, c);
		assert_non_null(*buf);
		*cap = c;
	}
	memcpy(*buf + *len, data, n);
	*len += n;
	(*buf)[*len] = '\0';
}

static void on_output(void *ud, const char *tool, int stream, const void *data, size_t len)
{
	if (atomic_load(&returned)) {
		/* Never dereference ud here: the caller may have freed it. */
		atomic_fetch_add(&late_calls, 1);
		return;
	}
	record *r = ud;
	pthread_mutex_lock(&r->mu);
	r->calls++;
	if (!tool || strlen(tool) >= sizeof(r->tool) || !data || len == 0 ||
	    (stream != AKS_STREAM_STDOUT && stream != AKS_STREAM_STDERR)) {
		r->bad = true;
	} else {
		strcpy(r->tool, tool);
		chunk *c = r->n < MAX_CHUNKS ? &r->chunks[r->n++] : NULL;
		if (stream == AKS_STREAM_STDOUT) {
			if (c)
				*c = (chunk){stream, r->out_len, len, mono()};
			append(&r->out, &r->out_len, &r->out_cap, data, len);
		} else {
			if (c)
				*c = (chunk){stream, r->err_len, len, mono()};
			append(&r->err, &r->err_len, &r->err_cap, data, len);
		}
	}
	pthread_mutex_unlock(&r->mu);
}

static record *record_new(void)
{
	record *r = calloc(1, sizeof(*r));
	assert_non_null(r);
	pthread_mutex_init(&r->mu, NULL);
	return r;
}

static void record_free(record *r)
{
	pthread_mutex_destroy(&r->mu);
	free(r->out);
	free(r->err);
	free(r);
}

/* The time the first chunk containing `needle` of a stream arrived (-1: never). */
static double arrival(const record *r, int stream, const char *needle)
{
	const char *buf = stream == AKS_STREAM_STDOUT ? r->out : r->err;
	const char *hit = buf ? strstr(buf, needle) : NULL;
	if (!hit)
		return -1;
	size_t at = (size_t)(hit - buf);
	for (size_t i = 0; i < r->n; i++)
		if (r->chunks[i].stream == stream && at >= r->chunks[i].off &&
		    at < r->chunks[i].off + r->chunks[i].len)
			return r->chunks[i].at;
	return -1;
}

/* ---- the runtime ---- */

static int write_config(fixture *fx, const char *flavor, const char *wait)
{
	FILE *f = fopen(fx->cfg, "w");
	if (!f)
		return -1;
	fprintf(f,
	        "sandbox:\n"
	        "  enabled: true\n"
	        "  default_profile: local\n"
	        "  broker: {flavor: %s, wait_timeout: %s}\n"
	        "  profiles:\n"
	        "    local: {type: local_subprocess,\n"
	        "            local_subprocess: {workdir: %s/boxes, agent: %s}}\n",
	        flavor, wait, fx->dir, LS_TEST_AGENT);
	return fclose(f);
}

static int setup_with(void **state, const char *flavor, const char *wait)
{
	fixture *fx = calloc(1, sizeof(*fx));
	if (!fx)
		return -1;
	strcpy(fx->dir, "/tmp/aks-stream-XXXXXX");
	if (!mkdtemp(fx->dir))
		return -1;
	snprintf(fx->cfg, sizeof(fx->cfg), "%s/config.yaml", fx->dir);
	snprintf(fx->state, sizeof(fx->state), "%s/state", fx->dir);
	aks_error *err = NULL;
	if (write_config(fx, flavor, wait) < 0 ||
	    aks_settings_load(fx->cfg, no_env, &fx->settings, &err) < 0 ||
	    aks_runtime_open(fx->settings, fx->state, &fx->rt, &err) < 0) {
		fprintf(stderr, "setup: %s\n", err ? aks_error_message(err) : "config");
		aks_error_free(err);
		return -1;
	}
	atomic_store(&returned, false);
	atomic_store(&late_calls, 0);
	*state = fx;
	return 0;
}

static int setup_thread(void **state)
{
	return setup_with(state, "thread", "60");
}

static int setup_embedded(void **state)
{
	return setup_with(state, "embedded", "0");
}

/* A run that outlasts the wait becomes a pending task. */
static int setup_short_wait(void **state)
{
	return setup_with(state, "thread", "0.5");
}

static int teardown(void **state)
{
	fixture *fx = *state;
	aks_runtime_close(fx->rt);
	aks_settings_free(fx->settings);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx->dir);
	int rc = system(cmd);
	free(fx);
	return rc == 0 ? 0 : -1;
}

/* Calls a tool with the callback and `r` as its user data. */
static char *call_streamed(fixture *fx, const char *tool, const char *args, record *r)
{
	aks_tool_context ctx;
	aks_tool_context_init(&ctx, "conv-stream", NULL);
	assert_int_equal(ctx.struct_version, AKS_TOOL_CONTEXT_VERSION);
	assert_int_equal(ctx.struct_size, sizeof(ctx));
	assert_null(ctx.on_output);
	ctx.on_output = on_output;
	ctx.output_userdata = r;
	char *out = NULL;
	aks_error *err = NULL;
	if (aks_runtime_call_tool(fx->rt, tool, args, &ctx, &out, &err) != AKS_OK)
		fail_msg("%s: %s", tool, aks_error_message(err));
	assert_non_null(out);
	return out;
}

static char *str_of(const char *json, const char *key, const char *sub)
{
	struct json_object *o = json_tokener_parse(json);
	if (!o)
		fail_msg("not JSON: %s", json);
	struct json_object *v = json_object_object_get(o, key);
	if (sub)
		v = json_object_object_get(v, sub);
	char *s = v && json_object_is_type(v, json_type_string) ? strdup(json_object_get_string(v))
	                                                        : NULL;
	json_object_put(o);
	return s;
}

/* ---- the tests ---- */

/* Output in steps: every chunk arrives while the program runs, before the call returns. */
static void check_live_steps(fixture *fx)
{
	record *r = record_new();
	double t0 = mono();
	char *got = call_streamed(
	    fx, "run_command",
	    "{\"command\": \"printf 'one\\\\n'; sleep 0.5; printf 'err1\\\\n' >&2; sleep 0.5; "
	    "printf 'two\\\\n'; sleep 0.5; printf three\"}",
	    r);
	double t_end = mono();
	char *out = str_of(got, "stdout", NULL), *err = str_of(got, "stderr", NULL);
	if (!out || strcmp(out, "one\ntwo\nthree") != 0 || !err || strcmp(err, "err1\n") != 0)
		fail_msg("the result changed: %s", got);
	assert_false(r->bad);
	assert_string_equal(r->tool, "run_command");
	/* Every byte, in order, each stream apart. */
	assert_non_null(r->out);
	assert_string_equal(r->out, "one\ntwo\nthree");
	assert_non_null(r->err);
	assert_string_equal(r->err, "err1\n");
	assert_true(r->n >= 4);
	/* Live: each step arrived when it was printed, not at the end. */
	double a_one = arrival(r, AKS_STREAM_STDOUT, "one"),
	       a_err = arrival(r, AKS_STREAM_STDERR, "err1"),
	       a_two = arrival(r, AKS_STREAM_STDOUT, "two"),
	       a_three = arrival(r, AKS_STREAM_STDOUT, "three");
	if (!(a_one > 0 && a_err > 0 && a_two > 0 && a_three > 0))
		fail_msg("a step never arrived: %g %g %g %g", a_one, a_err, a_two, a_three);
	if (!(a_one < a_err && a_err < a_two && a_two < a_three && a_three <= t_end))
		fail_msg("out of order: one %.3f err %.3f two %.3f three %.3f end %.3f", a_one - t0,
		         a_err - t0, a_two - t0, a_three - t0, t_end - t0);
	/* Printed 0.5 s apart, 1.5 s before the end; delivered at the end, they would all be
	 * within a few milliseconds of it. Margins for a loaded machine. */
	if (!(t_end - a_one > 1.0 && t_end - a_err > 0.5 && a_err - a_one > 0.25 &&
	      a_two - a_err > 0.25))
		fail_msg("chunks did not arrive as printed: one %.3f err %.3f two %.3f end %.3f",
		         a_one - t0, a_err - t0, a_two - t0, t_end - t0);
	assert_int_equal(atomic_load(&late_calls), 0);
	free(out);
	free(err);
	free(got);
	record_free(r);
}

static void test_chunks_live_thread(void **state)
{
	check_live_steps(*state);
}

static void test_chunks_live_embedded(void **state)
{
	check_live_steps(*state);
}

/* run_code streams too, under its own tool name. */
static void test_run_code_streams(void **state)
{
	fixture *fx = *state;
	record *r = record_new();
	char *got = call_streamed(fx, "run_code",
	                          "{\"code\": \"import sys, time\\nprint('a', flush=True)\\n"
	                          "time.sleep(0.8)\\nprint('b', file=sys.stderr, flush=True)\\n"
	                          "print('c')\"}",
	                          r);
	double t_end = mono();
	char *out = str_of(got, "stdout", NULL);
	if (!out || strcmp(out, "a\nc\n") != 0)
		fail_msg("unexpected result: %s", got);
	assert_false(r->bad);
	assert_string_equal(r->tool, "run_code");
	assert_string_equal(r->out, "a\nc\n");
	assert_string_equal(r->err, "b\n");
	double a = arrival(r, AKS_STREAM_STDOUT, "a");
	if (!(a > 0 && t_end - a > 0.5))
		fail_msg("'a' arrived %.3fs before the end, not while the code ran", t_end - a);
	free(out);
	free(got);
	record_free(r);
}

/* The cap bounds what the result keeps, not what is streamed. */
static void test_past_the_cap(void **state)
{
	fixture *fx = *state;
	aks_profile *p = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_settings_find_profile(fx->settings, "local", &p, &err), AKS_OK);
	aks_provider_set_limits(aks_profile_get_provider(p), 1000, AKS_DEFAULT_FILE_CAP);
	record *r = record_new();
	char *got = call_streamed(fx, "run_command",
	                          "{\"command\": \"head -c 300000 /dev/zero | tr '\\\\0' x; "
	                          "head -c 5000 /dev/zero | tr '\\\\0' y >&2\"}",
	                          r);
	aks_provider_set_limits(aks_profile_get_provider(p), AKS_DEFAULT_STREAM_CAP,
	                        AKS_DEFAULT_FILE_CAP);
	assert_false(r->bad);
	assert_int_equal(r->out_len, 300000);
	assert_int_equal(r->err_len, 5000);
	for (size_t i = 0; i < r->out_len; i++)
		if (r->out[i] != 'x')
			fail_msg("stdout byte %zu is %d", i, r->out[i]);
	for (size_t i = 0; i < r->err_len; i++)
		if (r->err[i] != 'y')
			fail_msg("stderr byte %zu is %d", i, r->err[i]);
	/* The result kept 1000 bytes of each (and says it cut them). */
	char *out = str_of(got, "stdout", NULL), *e = str_of(got, "stderr", NULL);
	assert_non_null(out);
	assert_non_null(e);
	assert_true(strlen(out) <= 1000 && strncmp(out, "xxxxxxxxxx", 10) == 0);
	assert_true(strlen(e) <= 1000 && strncmp(e, "yyyyyyyyyy", 10) == 0);
	assert_non_null(strstr(got, "truncated"));
	free(out);
	free(e);
	free(got);
	record_free(r);
}

/* A run that outlasts broker.wait_timeout goes on as a pending task: the callback is not
 * called after aks_runtime_call_tool has returned, although the program keeps printing. */
static void test_no_callback_after_return(void **state)
{
	fixture *fx = *state;
	record *r = record_new();
	char *got = call_streamed(fx, "run_command",
	                          "{\"command\": \"printf a; sleep 1.2; printf b; sleep 0.5; "
	                          "head -c 2000 /dev/zero | tr '\\\\0' z; printf c\"}",
	                          r);
	/* From here on a callback counts as late (and never touches r, which is freed). */
	atomic_store(&returned, true);
	size_t calls = r->calls;
	record_free(r);
	char *status = str_of(got, "status", NULL), *task = str_of(got, "task_id", NULL);
	if (!status || strcmp(status, "pending") != 0 || !task)
		fail_msg("not promoted: %s", got);
	/* The program goes on past its end; nothing reaches the callback meanwhile. */
	char args[128];
	snprintf(args, sizeof(args), "{\"task_id\": \"%s\"}", task);
	char *done = NULL;
	for (double end = mono() + 20;;) {
		free(done);
		aks_tool_context ctx;
		aks_tool_context_init(&ctx, "conv-stream", NULL);
		aks_error *err = NULL;
		done = NULL;
		assert_int_equal(
		    aks_runtime_call_tool(fx->rt, "check_sandbox_task", args, &ctx, &done, &err),
		    AKS_OK);
		char *st = str_of(done, "status", NULL);
		bool pending = st && strcmp(st, "pending") == 0;
		free(st);
		if (!pending || mono() > end)
			break;
		usleep(50000);
	}
	usleep(300000);
	char *st = str_of(done, "status", NULL), *out = str_of(done, "result", "stdout");
	if (!st || strcmp(st, "succeeded") != 0 || !out || out[0] != 'a' ||
	    out[strlen(out) - 1] != 'c')
		fail_msg("the run did not go on to its end: %s", done);
	/* It printed past the return (b, the zeros, c), none of which was passed on. */
	assert_int_equal(atomic_load(&late_calls), 0);
	assert_true(calls <= 1); /* at most the 'a' before the wait ended */
	free(st);
	free(out);
	free(done);
	free(status);
	free(task);
	free(got);
}

/* The layout of aks_tool_context version 1, as an old caller compiled it. */
typedef struct tool_context_v1 {
	uint32_t struct_version;
	uint32_t struct_size;
	const char *conversation_id;
	const char *agent;
	const char *const *attributes;
	aks_cancel *cancel;
} tool_context_v1;

static void test_old_context(void **state)
{
	fixture *fx = *state;
	_Static_assert(sizeof(tool_context_v1) == offsetof(aks_tool_context, on_output),
	               "version 1 ends where on_output starts");
	/* Exactly the old size on the heap: ASan sees any read past it. */
	tool_context_v1 *old = calloc(1, sizeof(*old));
	assert_non_null(old);
	old->struct_version = 1;
	old->struct_size = sizeof(*old);
	old->conversation_id = "conv-stream";
	char *got = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_runtime_call_tool(fx->rt, "run_command", "{\"command\": \"echo old\"}",
	                                       (const aks_tool_context *)old, &got, &err),
	                 AKS_OK);
	char *out = str_of(got, "stdout", NULL);
	assert_string_equal(out, "old\n");
	free(out);
	free(got);
	free(old);
	/* A new struct that says it is version 1: its callback is never looked at. */
	record *r = record_new();
	aks_tool_context ctx;
	aks_tool_context_init(&ctx, "conv-stream", NULL);
	ctx.struct_version = 1;
	ctx.struct_size = (uint32_t)offsetof(aks_tool_context, on_output);
	ctx.on_output = on_output;
	ctx.output_userdata = r;
	assert_int_equal(aks_runtime_call_tool(fx->rt, "run_command", "{\"command\": \"echo v1\"}",
	                                       &ctx, &got, &err),
	                 AKS_OK);
	out = str_of(got, "stdout", NULL);
	assert_string_equal(out, "v1\n");
	assert_int_equal(r->calls, 0);
	free(out);
	free(got);
	record_free(r);
}

/* The call's own wait (version 3): a number of seconds or the whole run instead of the
 * configured broker.wait_timeout (0.5 s here); a version 2 context's bytes past its size are
 * never read; a wait that is neither is refused. */
static void test_wait_override(void **state)
{
	fixture *fx = *state;
	const char *slow = "{\"command\": \"sleep 1; echo done\"}";
	aks_tool_context ctx;
	aks_tool_context_init(&ctx, "conv-wait", NULL);
	assert_true(ctx.wait_timeout == AKS_WAIT_CONFIGURED);
	char *got = NULL;
	aks_error *err = NULL;
	char *status = NULL, *out = NULL;

	/* Configured: pending after 0.5 s. */
	assert_int_equal(aks_runtime_call_tool(fx->rt, "run_command", slow, &ctx, &got, &err),
	                 AKS_OK);
	assert_string_equal(status = str_of(got, "status", NULL), "pending");
	free(status);
	free(got);

	/* The whole run, and a wait longer than the run: the outcome itself. */
	double waits[] = {AKS_WAIT_UNTIL_DONE, 30};
	for (size_t i = 0; i < 2; i++) {
		ctx.wait_timeout = waits[i];
		assert_int_equal(
		    aks_runtime_call_tool(fx->rt, "run_command", slow, &ctx, &got, &err), AKS_OK);
		assert_string_equal(out = str_of(got, "stdout", NULL), "done\n");
		free(out);
		free(got);
	}

	/* 0: a task at once, even for a run that takes no time (under the configured 0.5 s it
	 * would have answered with its outcome). */
	ctx.wait_timeout = 0;
	assert_int_equal(aks_runtime_call_tool(fx->rt, "run_command", "{\"command\": \"true\"}",
	                                       &ctx, &got, &err),
	                 AKS_OK);
	assert_string_equal(status = str_of(got, "status", NULL), "pending");
	free(status);
	free(got);

	/* A version 2 context: the field past its end is not looked at. */
	ctx.wait_timeout = AKS_WAIT_UNTIL_DONE;
	ctx.struct_version = 2;
	ctx.struct_size = (uint32_t)offsetof(aks_tool_context, wait_timeout);
	assert_int_equal(aks_runtime_call_tool(fx->rt, "run_command", slow, &ctx, &got, &err),
	                 AKS_OK);
	assert_string_equal(status = str_of(got, "status", NULL), "pending");
	free(status);
	free(got);

	/* Neither seconds nor one of the two constants. */
	aks_tool_context_init(&ctx, "conv-wait", NULL);
	double bad[] = {-5, -0.5, 1e12};
	for (size_t i = 0; i < 3; i++) {
		ctx.wait_timeout = bad[i];
		got = NULL;
		assert_int_equal(
		    aks_runtime_call_tool(fx->rt, "run_command", slow, &ctx, &got, &err),
		    AKS_EINVAL);
		assert_null(got);
		assert_non_null(strstr(aks_error_message(err), "wait_timeout"));
		aks_error_free(err);
		err = NULL;
	}
}

/* No callback (userdata set or not) is fine; file tools stream nothing. */
static void test_null_callback_and_file_tools(void **state)
{
	fixture *fx = *state;
	aks_tool_context ctx;
	aks_tool_context_init(&ctx, "conv-stream", NULL);
	int dummy = 0;
	ctx.output_userdata = &dummy;
	char *got = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks_runtime_call_tool(fx->rt, "run_command",
	                                       "{\"command\": \"echo plain\"}", &ctx, &got, &err),
	                 AKS_OK);
	char *out = str_of(got, "stdout", NULL);
	assert_string_equal(out, "plain\n");
	free(out);
	free(got);
	assert_int_equal(dummy, 0);

	record *r = record_new();
	got = call_streamed(fx, "write_sandbox_file",
	                    "{\"path\": \"f.txt\", \"content\": \"data\"}", r);
	assert_non_null(strstr(got, "\"written\": true"));
	free(got);
	got = call_streamed(fx, "read_sandbox_file", "{\"path\": \"f.txt\"}", r);
	assert_non_null(strstr(got, "\"content\": \"data\""));
	free(got);
	got = call_streamed(fx, "list_sandbox_sessions", "{}", r);
	free(got);
	assert_int_equal(r->calls, 0);
	record_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_chunks_live_thread, setup_thread, teardown),
	    cmocka_unit_test_setup_teardown(test_chunks_live_embedded, setup_embedded, teardown),
	    cmocka_unit_test_setup_teardown(test_run_code_streams, setup_thread, teardown),
	    cmocka_unit_test_setup_teardown(test_past_the_cap, setup_thread, teardown),
	    cmocka_unit_test_setup_teardown(test_no_callback_after_return, setup_short_wait,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_old_context, setup_thread, teardown),
	    cmocka_unit_test_setup_teardown(test_wait_override, setup_short_wait, teardown),
	    cmocka_unit_test_setup_teardown(test_null_callback_and_file_tools, setup_thread,
	                                    teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
