/* Unit tests: stateful Python through aksandbox-agent. A session keeps variables between
 * runs (x = 41, then print(x + 1) prints 42), shows a final expression's value, survives an
 * exception, turns a timeout into KeyboardInterrupt and keeps its state, and when the code
 * ignores the interrupt the interpreter is killed and the next run says the state is gone. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/plugin/host_api.h"
#include "core/plugin/result.h"
#include "test_agent_harness.h"

typedef struct outcome {
	int rc;
	aks_agent_exit ex;
	char out[4096];
	char err[8192];
} outcome;

static outcome py(th_agent *t, const char *session, const char *code, double timeout)
{
	outcome o;
	memset(&o, 0, sizeof(o));
	aks_result *r = aks__result_new(1 << 16, 1 << 16);
	aks_call call;
	aks_call_init(&call, timeout, NULL, NULL, NULL);
	aks_agent_spawn spec = {.code = code, .language = "python", .session = session};
	aks_error *err = NULL;
	o.rc = aks__agent_exec(t->conn, &spec, r, &call, &o.ex, &err);
	size_t len;
	const char *s = aks_result_get_stdout(r, &len);
	snprintf(o.out, sizeof(o.out), "%.*s", (int)len, s);
	s = aks_result_get_stderr(r, &len);
	snprintf(o.err, sizeof(o.err), "%.*s", (int)len, s);
	aks_error_free(err);
	aks_result_free(r);
	return o;
}

static void test_state_survives(void **state)
{
	(void)state;
	th_agent t;
	th_start(&t);
	outcome o = py(&t, "s1", "x = 41", 30);
	assert_int_equal(o.rc, AKS_OK);
	assert_int_equal(o.ex.exit_code, 0);
	assert_string_equal(o.out, "");
	o = py(&t, "s1", "print(x + 1)", 30);
	assert_int_equal(o.rc, AKS_OK);
	assert_string_equal(o.out, "42\n");
	/* a final expression shows its value, as a REPL would */
	o = py(&t, "s1", "import os\ny = x * 2\ny", 30);
	assert_string_equal(o.out, "82\n");
	/* imports survive too, and another session is separate */
	o = py(&t, "s1", "print(os.sep)", 30);
	assert_string_equal(o.out, "/\n");
	o = py(&t, "s2", "print('x' in globals())", 30);
	assert_string_equal(o.out, "False\n");
	/* an exception is a failed run, not a lost session */
	o = py(&t, "s1", "print('before')\n1 / 0", 30);
	assert_int_equal(o.rc, AKS_OK);
	assert_int_equal(o.ex.exit_code, 1);
	assert_string_equal(o.out, "before\n");
	assert_non_null(strstr(o.err, "ZeroDivisionError"));
	o = py(&t, "s1", "print(x)", 30);
	assert_string_equal(o.out, "41\n");
	/* output that imitates an end marker does not end the run */
	o = py(&t, "s1", "print('\\x1eAKSEND:0000:000\\x1e tricky'); print('after')", 30);
	assert_string_equal(o.out, "\x1e"
	                           "AKSEND:0000:000\x1e tricky\nafter\n");
	assert_int_equal(th_stop(&t), 0);
}

static void test_timeout_interrupts_then_kills(void **state)
{
	(void)state;
	th_agent t;
	th_start(&t);
	outcome o = py(&t, "s", "x = 41", 30);
	assert_int_equal(o.rc, AKS_OK);
	/* interrupted: KeyboardInterrupt, the state stays */
	int64_t t0 = aks__now_ms();
	o = py(&t, "s", "while True:\n    pass", 0.5);
	assert_int_equal(o.rc, AKS_ETIMEOUT);
	assert_true(o.ex.timed_out);
	assert_int_equal(o.ex.exit_code, 130);
	assert_non_null(strstr(o.err, "KeyboardInterrupt"));
	assert_true(aks__now_ms() - t0 < 2500);
	o = py(&t, "s", "print(x + 1)", 30);
	assert_int_equal(o.rc, AKS_OK);
	assert_string_equal(o.out, "42\n");
	assert_string_equal(o.ex.notice, "");
	/* code that ignores SIGINT: killed after the grace, and the next run starts over */
	o = py(&t, "s",
	       "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass",
	       0.5);
	assert_int_equal(o.rc, AKS_ETIMEOUT);
	assert_true(o.ex.timed_out);
	assert_int_equal(o.ex.signal, 9);
	o = py(&t, "s", "print('x' in globals())", 30);
	assert_int_equal(o.rc, AKS_OK);
	assert_string_equal(o.out, "False\n");
	assert_non_null(strstr(o.ex.notice, "restarted"));
	assert_int_equal(th_stop(&t), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_state_survives),
	    cmocka_unit_test(test_timeout_interrupts_then_kills),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
