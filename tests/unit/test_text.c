/* Unit tests: untrusted bytes made printable (plugins/common/aks_text.h), and the core's
 * logger using it, so a sandbox's stderr cannot steer the terminal or forge a log line. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aks_text.h"
#include "internal.h"

static char *printable(const char *s, size_t len, size_t cap)
{
	char *out = malloc(cap);
	assert_non_null(out);
	size_t n = aks__text_printable(out, cap, s, len);
	assert_int_equal(n, strlen(out));
	assert_true(n < cap);
	return out;
}

static void expect(const char *in, size_t len, const char *want)
{
	char *got = printable(in, len, 256);
	assert_string_equal(got, want);
	free(got);
}

#define EXPECT(lit, want) expect((lit), sizeof(lit) - 1, (want))

static void t_controls(void **state)
{
	(void)state;
	EXPECT("plain text: 1 + 1 = 2", "plain text: 1 + 1 = 2");
	EXPECT("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m");
	EXPECT("one\nforged: line\r\n", "one\\x0aforged: line\\x0d\\x0a");
	EXPECT("tab\there", "tab\\x09here");
	EXPECT("a\0b", "a\\x00b");
	EXPECT("del\x7f", "del\\x7f");
	EXPECT("back\\slash", "back\\\\slash");
}

static void t_utf8(void **state)
{
	(void)state;
	EXPECT("caf\xc3\xa9 \xe6\xbc\xa2 \xf0\x9f\x98\x80",
	       "caf\xc3\xa9 \xe6\xbc\xa2 \xf0\x9f\x98\x80");
	/* C1 controls, CSI among them, are control characters in UTF-8 too */
	EXPECT("\xc2\x9b"
	       "31m",
	       "\\xc2\\x9b31m");
	EXPECT("\xc2\xa0nbsp", "\xc2\xa0nbsp");
	/* not well formed: a stray continuation, a lone lead byte, overlong, a surrogate, past
	 * U+10FFFF, 0xff, and a sequence cut at the end */
	EXPECT("\x80", "\\x80");
	EXPECT("\xc3x", "\\xc3x");
	EXPECT("\xc0\xaf", "\\xc0\\xaf");
	EXPECT("\xe0\x80\xaf", "\\xe0\\x80\\xaf");
	EXPECT("\xed\xa0\x80", "\\xed\\xa0\\x80");
	EXPECT("\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80");
	EXPECT("\xff", "\\xff");
	EXPECT("ok\xe6\xbc", "ok\\xe6\\xbc");
}

/* A small buffer cuts at a whole character or escape, never inside one. */
static void t_bounded(void **state)
{
	(void)state;
	char out[6];
	assert_int_equal(aks__text_printable(out, sizeof(out), "ab\x1b", 3), 2);
	assert_string_equal(out, "ab");
	assert_int_equal(aks__text_printable(out, sizeof(out), "abcd\xc3\xa9", 6), 4);
	assert_string_equal(out, "abcd");
	assert_int_equal(aks__text_printable(out, 1, "abc", 3), 0);
	assert_string_equal(out, "");
	assert_int_equal(aks__text_printable(out, 0, "abc", 3), 0);
	/* any input, any cap: always terminated, never past cap */
	unsigned char junk[512];
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (unsigned char)(i * 37 + 11);
	for (size_t cap = 1; cap < 64; cap++) {
		char *b = malloc(cap);
		size_t n = aks__text_printable(b, cap, junk, sizeof(junk));
		assert_true(n < cap);
		assert_int_equal(strlen(b), n);
		free(b);
	}
}

/* The core's logger writes one escaped line, whatever the message holds. */
static void t_logger(void **state)
{
	(void)state;
	char path[] = "/tmp/aks-test-log-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	fflush(stderr);
	int saved = dup(2);
	dup2(fd, 2);
	aks__log(AKS_LOG_ERROR, "docker", "agent said: %s", "\x1b]0;pwned\x07\nfake: line");
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	char buf[512] = "";
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	unlink(path);
	assert_true(n > 0);
	assert_string_equal(buf, "aksandbox[docker]: error: agent said: "
	                         "\\x1b]0;pwned\\x07\\x0afake: line\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_controls),
	    cmocka_unit_test(t_utf8),
	    cmocka_unit_test(t_bounded),
	    cmocka_unit_test(t_logger),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
