/*
 * tests/unit/test_k8s_channel.c - the exec WebSocket's channel framing and
 * status, without sockets: messages in one piece and in fragments, the
 * server's empty first stdout frame, a bounded status, and the status JSON
 * of a 1.20 server turned into exit codes and errors.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "k8s_pure.h"

typedef struct sink {
	aks_buf out, err;
	int calls;
	int stop_after; /* 0: never */
} sink;

static bool collect(void *ctx, int channel, const char *data, size_t len)
{
	sink *s = ctx;
	assert_true(len > 0); /* empty frames are not passed on */
	s->calls++;
	aks__buf_append(channel == K8S_CH_STDOUT ? &s->out : &s->err, data, len);
	return !(s->stop_after && s->calls >= s->stop_after);
}

static void feed(k8s_demux *d, const char *msg, size_t len)
{
	k8s_demux_feed(d, msg, len, true);
}

static void test_channels(void **state)
{
	(void)state;
	sink s = {0};
	k8s_demux d;
	k8s_demux_init(&d, collect, &s);
	feed(&d, "\x01", 1); /* the empty first stdout frame of a 1.20 server */
	feed(&d, "\x01hello ", 7);
	feed(&d, "\x02oops\n", 6);
	feed(&d, "\x01world\n", 7);
	feed(&d, "\x00ignored", 8); /* stdin: not ours to read */
	feed(&d, "\x04{}", 3);      /* resize */
	feed(&d, "\x03{\"metadata\":{},\"status\":\"Success\"}", 36);
	assert_string_equal(s.out.data, "hello world\n");
	assert_string_equal(s.err.data, "oops\n");
	assert_int_equal(s.calls, 3);
	assert_int_equal(d.bytes[1], 12);
	assert_int_equal(d.bytes[2], 5);
	int code = 99;
	k8s_err e = {0};
	assert_int_equal(k8s_status_exit_code(d.status.data, d.status.len, &code, &e), AKS_OK);
	assert_int_equal(code, 0);
	k8s_demux_fini(&d);
	aks__buf_free(&s.out);
	aks__buf_free(&s.err);
}

static void test_fragments(void **state)
{
	(void)state;
	sink s = {0};
	k8s_demux d;
	k8s_demux_init(&d, collect, &s);
	/* one message split so that its first fragment is empty, then the channel
	 * byte alone: the continuation fragments carry no channel byte */
	k8s_demux_feed(&d, "", 0, true);
	k8s_demux_feed(&d, "\x02", 1, false);
	k8s_demux_feed(&d, "ab", 2, false);
	k8s_demux_feed(&d, "\x01\x02", 2, false); /* payload bytes, not channels */
	k8s_demux_feed(&d, "\x01x", 2, true);
	assert_int_equal(s.err.len, 4);
	assert_memory_equal(s.err.data, "ab\x01\x02", 4);
	assert_string_equal(s.out.data, "x");
	/* binary-safe: NULs and high bytes pass unchanged */
	k8s_demux_feed(&d, "\x01\x00\xff\x00", 4, true);
	assert_int_equal(s.out.len, 4);
	assert_memory_equal(s.out.data, "x\x00\xff\x00", 4);
	k8s_demux_fini(&d);
	aks__buf_free(&s.out);
	aks__buf_free(&s.err);
}

static void test_stop_and_bound(void **state)
{
	(void)state;
	sink s = {.stop_after = 1};
	k8s_demux d;
	k8s_demux_init(&d, collect, &s);
	feed(&d, "\x01one", 4);
	feed(&d, "\x01two", 4);
	assert_true(d.stopped);
	assert_string_equal(s.out.data, "one"); /* nothing after the sink said stop */
	assert_int_equal(d.bytes[1], 6);        /* but it is still counted */
	/* the status is bounded */
	char *big = malloc(K8S_STATUS_MAX + 100);
	big[0] = K8S_CH_ERROR;
	memset(big + 1, 'x', K8S_STATUS_MAX + 99);
	feed(&d, big, K8S_STATUS_MAX + 100);
	k8s_demux_feed(&d, "more", 4, false);
	assert_int_equal(d.status.len, K8S_STATUS_MAX);
	assert_true(d.status_truncated);
	free(big);
	k8s_demux_fini(&d);
	aks__buf_free(&s.out);
}

static void expect_code(const char *status, int want)
{
	int code = -2;
	k8s_err e = {0};
	int rc = k8s_status_exit_code(status, strlen(status), &code, &e);
	if (rc != AKS_OK)
		fail_msg("status %s: %s", status, e.msg);
	assert_int_equal(code, want);
}

static void expect_error(const char *status, const char *msg)
{
	int code = -2;
	k8s_err e = {0};
	assert_int_equal(k8s_status_exit_code(status, status ? strlen(status) : 0, &code, &e),
	                 AKS_ERROR);
	assert_int_equal(code, -1);
	assert_string_equal(e.msg, msg);
}

static void test_status(void **state)
{
	(void)state;
	expect_code("{\"metadata\":{},\"status\":\"Success\"}", 0);
	/* verbatim from a 1.20 server */
	expect_code("{\"metadata\":{},\"status\":\"Failure\",\"message\":\"command terminated with "
	            "non-zero exit code: Error executing in Docker Container: 3\",\"reason\":"
	            "\"NonZeroExitCode\",\"details\":{\"causes\":[{\"reason\":\"ExitCode\","
	            "\"message\":\"3\"}]}}",
	            3);
	expect_code(
	    "{\"status\":\"Failure\",\"reason\":\"NonZeroExitCode\",\"details\":{\"causes\":"
	    "[{\"reason\":\"Other\",\"message\":\"9\"},{\"reason\":\"ExitCode\","
	    "\"message\":\"137\"}]}}",
	    137);
	expect_error(
	    "{\"status\":\"Failure\",\"message\":\"container not found (\\\"sandbox\\\")\","
	    "\"reason\":\"InternalError\"}",
	    "exec failed: container not found (\"sandbox\")");
	expect_error("{\"status\":\"Failure\",\"reason\":\"NonZeroExitCode\",\"message\":\"m\","
	             "\"details\":{\"causes\":[{\"reason\":\"ExitCode\",\"message\":\"x1\"}]}}",
	             "exec failed: m");
	expect_error("{\"status\":\"Failure\",\"reason\":\"Boom\"}", "exec failed: Boom");
	expect_error("not json at all", "exec failed: not json at all");
	expect_error(NULL, "the exec stream ended without a status from the server");
}

static void test_frame(void **state)
{
	(void)state;
	size_t n = 0;
	unsigned char *f = k8s_frame(K8S_CH_STDIN, "abc", 3, 16, &n);
	assert_int_equal(n, 4);
	assert_memory_equal(f + 16,
	                    "\x00"
	                    "abc",
	                    4);
	free(f);
	f = k8s_frame(K8S_CH_CLOSE, "\x00", 1, 0, &n); /* v5: close stdin */
	assert_int_equal(n, 2);
	assert_memory_equal(f, "\xff\x00", 2);
	free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_channels),       cmocka_unit_test(test_fragments),
	    cmocka_unit_test(test_stop_and_bound), cmocka_unit_test(test_status),
	    cmocka_unit_test(test_frame),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
