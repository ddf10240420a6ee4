/*
 * tests/unit/test_common_helpers.c - plugins/common/libaks-util, the helper layer the core,
 * the plugins and the agent share: the growable buffer and the string lists (aks_buf.h), and
 * the json-c getters (aks_json.h).
 *
 * Linked with -Wl,--wrap=realloc so that a test can make the next allocations fail and see
 * the ENOMEM paths for real.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "aks_buf.h"
#include "aks_json.h"

/* ---- allocation failure on demand ---- */

void *__real_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n);

static int fail_reallocs; /* how many of the next realloc calls fail */

void *__wrap_realloc(void *p, size_t n)
{
	if (fail_reallocs > 0) {
		fail_reallocs--;
		return NULL;
	}
	return __real_realloc(p, n);
}

/* ---- aks_buf ---- */

static void test_buf_growth_keeps_nul(void **state)
{
	(void)state;
	aks_buf b = AKS_BUF_INIT;
	char expect[10000];
	size_t n = 0;
	while (n + 7 <= sizeof(expect)) {
		assert_int_equal(aks__buf_append(&b, "abcdefg", 7), AKS_OK);
		memcpy(expect + n, "abcdefg", 7);
		n += 7;
		assert_int_equal(b.len, n);
		assert_true(b.cap >= b.len + 1);
		assert_int_equal(b.data[b.len], '\0');
	}
	assert_memory_equal(b.data, expect, n);
	assert_false(b.failed);
	aks__buf_free(&b);
	assert_null(b.data);
	assert_int_equal(b.len, 0);
	assert_int_equal(b.cap, 0);
}

static void test_buf_binary_and_empty(void **state)
{
	(void)state;
	aks_buf b = {0};
	assert_int_equal(aks__buf_append(&b, "", 0), AKS_OK);
	assert_non_null(b.data); /* even nothing makes it a C string */
	assert_string_equal(b.data, "");
	assert_int_equal(aks__buf_append(&b, "a\0b", 3), AKS_OK);
	assert_int_equal(b.len, 3);
	assert_memory_equal(b.data, "a\0b", 4); /* and the NUL past the end */
	aks__buf_free(&b);
	aks__buf_free(&b); /* twice is harmless */
}

static void test_buf_printf_puts(void **state)
{
	(void)state;
	aks_buf b = AKS_BUF_INIT;
	assert_int_equal(aks__buf_puts(&b, "x="), AKS_OK);
	assert_int_equal(aks__buf_printf(&b, "%d, %s", 42, "y"), AKS_OK);
	assert_string_equal(b.data, "x=42, y");
	char big[300];
	memset(big, 'z', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(aks__buf_printf(&b, "[%s]", big), AKS_OK); /* past any first size */
	assert_int_equal(b.len, 7 + 2 + sizeof(big) - 1);
	assert_int_equal(b.data[b.len - 1], ']');
	assert_int_equal(b.data[b.len], '\0');
	aks__buf_free(&b);
}

static void test_buf_reserve_then_write(void **state)
{
	(void)state;
	aks_buf b = AKS_BUF_INIT;
	assert_int_equal(aks__buf_reserve(&b, 100), AKS_OK);
	assert_int_equal(b.len, 0);
	assert_true(b.cap >= 101);
	memcpy(b.data, "hello", 5);
	b.len = 5;
	assert_int_equal(aks__buf_puts(&b, "!"), AKS_OK);
	assert_string_equal(b.data, "hello!");
	aks__buf_free(&b);
}

static void test_buf_truncate_reset_rtrim(void **state)
{
	(void)state;
	aks_buf b = AKS_BUF_INIT;
	aks__buf_truncate(&b, 0); /* on an empty buffer: nothing */
	aks__buf_rtrim(&b, "\n");
	assert_null(b.data);
	assert_int_equal(aks__buf_puts(&b, "line one\r\n\n"), AKS_OK);
	aks__buf_rtrim(&b, "\r\n");
	assert_string_equal(b.data, "line one");
	aks__buf_rtrim(&b, "x"); /* nothing of it at the end */
	assert_string_equal(b.data, "line one");
	aks__buf_truncate(&b, 4);
	assert_string_equal(b.data, "line");
	aks__buf_truncate(&b, 10); /* never lengthens */
	assert_int_equal(b.len, 4);
	char *mem = b.data;
	size_t cap = b.cap;
	aks__buf_reset(&b);
	assert_int_equal(b.len, 0);
	assert_ptr_equal(b.data, mem); /* the memory is kept for reuse */
	assert_int_equal(b.cap, cap);
	assert_string_equal(b.data, "");
	assert_int_equal(aks__buf_puts(&b, "\n\n"), AKS_OK);
	aks__buf_rtrim(&b, "\n"); /* all of it */
	assert_int_equal(b.len, 0);
	assert_string_equal(b.data, "");
	aks__buf_free(&b);
}

static void test_buf_steal(void **state)
{
	(void)state;
	aks_buf b = AKS_BUF_INIT;
	char *s = aks__buf_steal(&b);
	assert_non_null(s); /* "" for a buffer that never held anything */
	assert_string_equal(s, "");
	free(s);
	assert_int_equal(aks__buf_puts(&b, "kept"), AKS_OK);
	s = aks__buf_steal(&b);
	assert_string_equal(s, "kept");
	assert_null(b.data); /* the buffer is empty again, and usable */
	assert_int_equal(b.len, 0);
	assert_int_equal(aks__buf_puts(&b, "again"), AKS_OK);
	assert_string_equal(b.data, "again");
	free(s);
	aks__buf_free(&b);
}

/* A length that cannot be represented fails without allocating, and the failure sticks. */
static void test_buf_overflow_is_enomem(void **state)
{
	(void)state;
	aks_buf b = AKS_BUF_INIT;
	assert_int_equal(aks__buf_puts(&b, "abc"), AKS_OK);
	assert_int_equal(aks__buf_append(&b, "x", SIZE_MAX), AKS_ENOMEM);
	assert_true(b.failed);
	assert_string_equal(b.data, "abc"); /* contents as they were */
	assert_int_equal(b.len, 3);
	assert_int_equal(aks__buf_puts(&b, "d"), AKS_ENOMEM); /* sticky */
	assert_int_equal(aks__buf_printf(&b, "%d", 1), AKS_ENOMEM);
	assert_int_equal(aks__buf_reserve(&b, 1), AKS_ENOMEM);
	assert_string_equal(b.data, "abc");
	assert_null(aks__buf_steal(&b)); /* a failed buffer gives nothing, and is freed */
	assert_null(b.data);
	assert_false(b.failed);
}

static void test_buf_realloc_failure(void **state)
{
	(void)state;
	aks_buf b = AKS_BUF_INIT;
	assert_int_equal(aks__buf_puts(&b, "start"), AKS_OK);
	char big[200];
	memset(big, 'q', sizeof(big));
	fail_reallocs = 1;
	assert_int_equal(aks__buf_append(&b, big, sizeof(big)), AKS_ENOMEM);
	assert_int_equal(fail_reallocs, 0); /* it did try */
	assert_true(b.failed);
	assert_string_equal(b.data, "start");
	assert_int_equal(aks__buf_puts(&b, "more"), AKS_ENOMEM); /* allocation works, still fails */
	aks__buf_reset(&b);                                      /* a fresh start clears it */
	assert_false(b.failed);
	assert_int_equal(aks__buf_puts(&b, "fresh"), AKS_OK);
	assert_string_equal(b.data, "fresh");
	aks__buf_free(&b);

	fail_reallocs = 1; /* the first allocation of all */
	assert_null(aks__buf_steal(&b));
	assert_null(b.data);
}

/* ---- string lists ---- */

static void test_strv_push_free(void **state)
{
	(void)state;
	aks_strv l = {NULL, 0, 0};
	char name[16];
	for (int i = 0; i < 40; i++) { /* past the first capacity */
		snprintf(name, sizeof(name), "s%d", i);
		assert_int_equal(aks__strv_push(&l, name), AKS_OK);
		assert_null(l.v[l.n]);
	}
	assert_int_equal(l.n, 40);
	assert_string_equal(l.v[0], "s0");
	assert_string_equal(l.v[39], "s39");
	/* the next push that has to grow the vector fails, and leaves the list as it was */
	fail_reallocs = 1;
	size_t before = 0;
	int rc = AKS_OK;
	for (int i = 0; i < 1000 && rc == AKS_OK; i++) {
		before = l.n;
		rc = aks__strv_push(&l, "x");
	}
	assert_int_equal(rc, AKS_ENOMEM);
	assert_int_equal(l.n, before);
	assert_null(l.v[l.n]);
	assert_string_equal(l.v[39], "s39");
	aks__strv_free(l.v);
	aks__strv_free(NULL);
}

static void test_strv_dup(void **state)
{
	(void)state;
	const char *src[] = {"a", "bc", "", NULL};
	char **c = aks__strv_dup(src);
	assert_non_null(c);
	for (int i = 0; i < 3; i++) {
		assert_string_equal(c[i], src[i]);
		assert_ptr_not_equal(c[i], src[i]); /* deep */
	}
	assert_null(c[3]);
	aks__strv_free(c);
	c = aks__strv_dup(NULL);
	assert_non_null(c); /* nothing copies as an empty vector */
	assert_null(c[0]);
	aks__strv_free(c);
}

/* ---- json-c getters ---- */

static void test_jget_is_null_safe(void **state)
{
	(void)state;
	json_object *o = json_tokener_parse(
	    "{\"a\": {\"b\": \"deep\"}, \"n\": null, \"i\": 7, \"s\": \"str\", \"l\": [1]}");
	assert_non_null(o);
	assert_string_equal(json_object_get_string(aks__jget(aks__jget(o, "a"), "b")), "deep");
	assert_null(aks__jget(o, "missing"));
	assert_null(aks__jget(aks__jget(o, "missing"), "b")); /* NULL in, NULL out */
	assert_null(aks__jget(NULL, "a"));
	assert_null(aks__jget(o, "n"));                 /* a JSON null member */
	assert_null(aks__jget(aks__jget(o, "l"), "x")); /* not an object */
	assert_null(aks__jget(aks__jget(o, "s"), "x"));
	assert_int_equal(json_object_get_int(aks__jget(o, "i")), 7);
	json_object_put(o);
}

static void test_jstr_only_strings(void **state)
{
	(void)state;
	json_object *o = json_tokener_parse("{\"s\": \"text\", \"i\": 7, \"o\": {}, \"n\": null}");
	assert_non_null(o);
	assert_string_equal(aks__jstr(o, "s"), "text");
	assert_null(aks__jstr(o, "i")); /* json-c would render 7 as "7": not a string */
	assert_null(aks__jstr(o, "o"));
	assert_null(aks__jstr(o, "n"));
	assert_null(aks__jstr(o, "missing"));
	assert_null(aks__jstr(NULL, "s"));
	json_object_put(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_buf_growth_keeps_nul),
	    cmocka_unit_test(test_buf_binary_and_empty),
	    cmocka_unit_test(test_buf_printf_puts),
	    cmocka_unit_test(test_buf_reserve_then_write),
	    cmocka_unit_test(test_buf_truncate_reset_rtrim),
	    cmocka_unit_test(test_buf_steal),
	    cmocka_unit_test(test_buf_overflow_is_enomem),
	    cmocka_unit_test(test_buf_realloc_failure),
	    cmocka_unit_test(test_strv_push_free),
	    cmocka_unit_test(test_strv_dup),
	    cmocka_unit_test(test_jget_is_null_safe),
	    cmocka_unit_test(test_jstr_only_strings),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
