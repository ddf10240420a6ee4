/*
 * tests/unit/test_common_helpers.c - plugins/common/libaks-util, the helper layer the core,
 * the plugins and the agent share: the growable buffer and the string lists (aks_buf.h),
 * base64 in its variants (aks_base64.h), and the json-c getters (aks_json.h).
 *
 * Linked with -Wl,--wrap=realloc,--wrap=malloc so that a test can make the next allocations
 * fail and see the ENOMEM paths for real.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "aks_base64.h"
#include "aks_buf.h"
#include "aks_file.h"
#include "aks_json.h"
#include "aks_shquote.h"
#include "aks_wspath.h"
#include "aks_wsresolve.h"

/* ---- allocation failure on demand ---- */

void *__real_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n);
void *__real_malloc(size_t n);
void *__wrap_malloc(size_t n);

static int fail_reallocs; /* how many of the next realloc calls fail */
static int fail_mallocs;  /* the same for malloc */

void *__wrap_realloc(void *p, size_t n)
{
	if (fail_reallocs > 0) {
		fail_reallocs--;
		return NULL;
	}
	return __real_realloc(p, n);
}

void *__wrap_malloc(size_t n)
{
	if (fail_mallocs > 0) {
		fail_mallocs--;
		return NULL;
	}
	return __real_malloc(n);
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

/* take owns what it is given, also when it fails; sort_unique leaves each string once, in
 * order, the list still NULL-terminated (the stores list names a SCAN repeats). */
static void test_strv_take_sort_unique(void **state)
{
	(void)state;
	aks_strv l = {NULL, 0, 0};
	const char *in[] = {"b", "a", "c", "a", "b", "b", "d", "a"};
	for (size_t i = 0; i < sizeof(in) / sizeof(*in); i++)
		assert_int_equal(aks__strv_take(&l, strdup(in[i])), AKS_OK);
	assert_int_equal(aks__strv_take(&l, NULL), AKS_ENOMEM); /* a failed copy */
	assert_int_equal(l.n, 8);
	aks__strv_sort_unique(&l);
	assert_int_equal(l.n, 4);
	const char *want[] = {"a", "b", "c", "d"};
	for (size_t i = 0; i < 4; i++)
		assert_string_equal(l.v[i], want[i]);
	assert_null(l.v[4]);
	aks__strv_free(l.v);
	aks_strv one = {NULL, 0, 0};
	aks__strv_sort_unique(&one); /* empty: nothing to do */
	assert_int_equal(aks__strv_take(&one, strdup("x")), AKS_OK);
	aks__strv_sort_unique(&one);
	assert_int_equal(one.n, 1);
	assert_null(one.v[1]);
	aks__strv_free(one.v);
}

/* ---- base64 ---- */

static void expect_decodes(const char *text, unsigned flags, const void *want, size_t want_len)
{
	unsigned char *d = NULL;
	size_t n = 99;
	int rc = aks__base64_decode(text, strlen(text), flags, &d, &n);
	if (rc != AKS_OK)
		fail_msg("'%s' (flags %u): %d", text, flags, rc);
	assert_int_equal(n, want_len);
	assert_memory_equal(d, want, n);
	assert_int_equal(d[n], '\0'); /* a NUL past the bytes */
	free(d);
}

static void expect_refused(const char *text, unsigned flags)
{
	unsigned char *d = (unsigned char *)"sentinel";
	size_t n = 99;
	int rc = aks__base64_decode(text, strlen(text), flags, &d, &n);
	if (rc != AKS_EINVAL)
		fail_msg("'%s' (flags %u) was not refused: %d", text, flags, rc);
	assert_null(d);
	assert_int_equal(n, 0);
}

static void expect_encodes(const void *data, size_t len, unsigned flags, const char *want)
{
	char *e = aks__base64_encode(data, len, flags);
	assert_non_null(e);
	assert_string_equal(e, want);
	free(e);
}

/* RFC 4648 §10, and strict standard decoding (the queue wire's). */
static void test_base64_std(void **state)
{
	(void)state;
	const char *plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	const char *coded[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
	for (int i = 0; i < 7; i++) {
		expect_encodes(plain[i], strlen(plain[i]), AKS_BASE64_STD, coded[i]);
		expect_decodes(coded[i], AKS_BASE64_STD, plain[i], strlen(plain[i]));
	}
	expect_encodes("\0\xff\x10hi", 5, AKS_BASE64_STD, "AP8QaGk=");
	expect_encodes("\xfb\xff", 2, AKS_BASE64_STD, "+/8=");
	/* strict: no whitespace, padding only at the end, no stray bits, length % 4 */
	const char *bad[] = {"Zg=",  "Zg",       "Z===",   "Zh==", "Zm9=", "Zm 9v",
	                     "=Zm9", "Zg==Zg==", "Zm9v\n", "====", "-_8=", "Zm9v===="};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_refused(bad[i], AKS_BASE64_STD);
}

/* base64url without padding (signed_token's), strict. */
static void test_base64_url_nopad(void **state)
{
	(void)state;
	const char *plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	const char *coded[] = {"", "Zg", "Zm8", "Zm9v", "Zm9vYg", "Zm9vYmE", "Zm9vYmFy"};
	unsigned f = AKS_BASE64_URL | AKS_BASE64_NOPAD;
	for (int i = 0; i < 7; i++) {
		expect_encodes(plain[i], strlen(plain[i]), f, coded[i]);
		expect_decodes(coded[i], f, plain[i], strlen(plain[i]));
	}
	expect_encodes("\xfb\xff", 2, f, "-_8");
	expect_decodes("-_8", f, "\xfb\xff", 2);
	expect_encodes("\xfb\xff", 2, AKS_BASE64_URL, "-_8="); /* padded url is an option too */
	const char *bad[] = {"Zg==", "+/8", "Z", "Zm9vY", "Zh", "Zm9", "Zm 9v", "Zm9v\n", "Zg="};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_refused(bad[i], f);
}

/* Loose decoding (kubeconfig data, Docker's path-stat header), as the container providers
 * always decoded. */
static void test_base64_loose(void **state)
{
	(void)state;
	unsigned f = AKS_BASE64_LOOSE;
	expect_decodes("aGVs\nbG8=", f, "hello", 5);
	expect_decodes("aGVs\nbG8", f, "hello", 5); /* padding missing */
	expect_decodes(" aGVs bG8=\r\n\t", f, "hello", 5);
	expect_decodes("aGVsbG8=\n=", f, "hello", 5); /* more padding, after a line break */
	expect_decodes("+/8=", f, "\xfb\xff", 2);
	expect_decodes("-_8", f, "\xfb\xff", 2); /* either alphabet */
	expect_decodes("Zh==", f, "f", 1);       /* leftover bits ignored */
	expect_decodes("AP8QaGk=", f, "\0\xff\x10hi", 5);
	expect_decodes("", f, "", 0);
	expect_refused("aGU=bG8=", f); /* data after '=' */
	expect_refused("aG*s", f);
	expect_refused("aGVs*", f);
	expect_refused("aGVs\v", f); /* only space, tab, CR and LF are skipped */
}

/* Every length and every byte: what is encoded decodes back, strictly, in each variant. */
static void test_base64_round_trips(void **state)
{
	(void)state;
	unsigned char data[256];
	for (int i = 0; i < 256; i++)
		data[i] = (unsigned char)(255 - i);
	const unsigned variants[] = {AKS_BASE64_STD, AKS_BASE64_URL, AKS_BASE64_NOPAD,
	                             AKS_BASE64_URL | AKS_BASE64_NOPAD};
	for (size_t v = 0; v < 4; v++)
		for (size_t len = 0; len <= sizeof(data); len += len < 70 ? 1 : 31) {
			char *e = aks__base64_encode(data, len, variants[v]);
			assert_non_null(e);
			unsigned char out[sizeof(data) + 4];
			size_t n = 0;
			assert_true(aks__base64_decoded_max(strlen(e)) <= sizeof(out));
			assert_int_equal(aks__base64_decode_to(e, strlen(e), variants[v], out, &n),
			                 AKS_OK);
			assert_int_equal(n, len);
			assert_memory_equal(out, data, len);
			assert_int_equal(
			    aks__base64_decode_to(e, strlen(e), AKS_BASE64_LOOSE, out, &n), AKS_OK);
			assert_int_equal(n, len);
			free(e);
		}
}

static void test_base64_enomem(void **state)
{
	(void)state;
	fail_mallocs = 1;
	assert_null(aks__base64_encode("abc", 3, AKS_BASE64_STD));
	unsigned char *d = (unsigned char *)"sentinel";
	size_t n = 99;
	fail_mallocs = 1;
	assert_int_equal(aks__base64_decode("YWJj", 4, AKS_BASE64_STD, &d, &n), AKS_ENOMEM);
	assert_int_equal(fail_mallocs, 0);
	assert_null(d);
	assert_int_equal(n, 0);
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

/* A whole small file: its bytes, a bound, and what is not a regular file refused at once (a
 * FIFO with no writer would block an open for reading forever). */
static void test_file_read(void **state)
{
	(void)state;
	char dir[] = "/tmp/aks-file-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[64], fifo[64];
	snprintf(path, sizeof(path), "%s/f", dir);
	snprintf(fifo, sizeof(fifo), "%s/p", dir);
	FILE *f = fopen(path, "wb");
	fwrite("a\0b", 1, 3, f);
	fclose(f);
	size_t len = 0;
	char *got = aks__file_read(path, 3, &len);
	assert_non_null(got);
	assert_int_equal(len, 3);
	assert_memory_equal(got, "a\0b", 3);
	assert_int_equal(got[3], '\0');
	free(got);
	errno = 0;
	assert_null(aks__file_read(path, 2, &len));
	assert_int_equal(errno, EFBIG);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_null(aks__file_read(fifo, 100, &len)); /* would hang without O_NONBLOCK */
	assert_int_equal(errno, EINVAL);
	assert_null(aks__file_read(dir, 100, &len));
	assert_int_equal(errno, EINVAL);
	assert_null(aks__file_read("/dev/zero", 100, &len));
	assert_null(aks__file_read("/nonexistent/f", 100, &len));
	assert_int_equal(errno, ENOENT);
	unlink(path);
	unlink(fifo);
	rmdir(dir);
}

/* The workspace rule under another root than the containers' (an E2B sandbox's home). */
static void test_wspath_other_root(void **state)
{
	(void)state;
	char *p = NULL;
	assert_int_equal(aks_wspath("/home/user", "a/b.txt", &p), AKS_OK);
	assert_string_equal(p, "/home/user/a/b.txt");
	free(p);
	assert_int_equal(aks_wspath("/home/user", "/x/../y", &p), AKS_OK);
	assert_string_equal(p, "/home/user/y");
	free(p);
	assert_int_equal(aks_wspath("/home/user", ".", &p), AKS_OK);
	assert_string_equal(p, "/home/user");
	free(p);
	assert_int_equal(aks_wspath("/home/user", "../user2/x", &p), AKS_EPOLICY);
	assert_null(p);
	assert_int_equal(aks_wspath("/home/user", "a/../../etc/passwd", &p), AKS_EPOLICY);
	/* a sibling that only starts like the root is outside it */
	assert_false(aks_wspath_in_root("/home/user", "/home/username"));
	assert_true(aks_wspath_in_root("/home/user", "/home/user/x"));
	char why[AKS_CTR_WSPATH_WHY_BUF];
	aks_wspath_why("/home/user", AKS_EPOLICY, "../etc", why, sizeof(why));
	assert_string_equal(why, "path '../etc' escapes /home/user");
	/* the length bound counts the root: 3072 less "/home/user/" */
	size_t max = AKS_CTR_PATH_MAX - strlen("/home/user/");
	char *long_path = malloc(max + 2);
	for (size_t i = 0; i < max + 1; i++)
		long_path[i] = i % 200 == 199 ? '/' : 'a';
	long_path[max + 1] = '\0';
	assert_int_equal(aks_wspath("/home/user", long_path, &p), AKS_ELIMIT);
	aks_wspath_why("/home/user", AKS_ELIMIT, long_path, why, sizeof(why));
	assert_non_null(strstr(why, "at most 3061 below /home/user/"));
	long_path[max] = '\0';
	assert_int_equal(aks_wspath("/home/user", long_path, &p), AKS_OK);
	free(p);
	free(long_path);
}

/* Runs the shell command line, its stdout into out (cap bytes, NUL-terminated); its exit
 * status. */
static int sh_run(const char *line, char *out, size_t cap)
{
	FILE *f = popen(line, "r");
	assert_non_null(f);
	size_t n = fread(out, 1, cap - 1, f);
	out[n] = '\0';
	int st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* What a shell reads from the quoted words is the words, whatever is in them. */
static void test_shquote_round_trip(void **state)
{
	(void)state;
	const char *words[] = {
	    "printf",      "%s|", "plain", "two words",
	    "it's",        "'",   "''",    "$HOME `id` $(id) \\ \"q\" ; & | > < * ? ~ # !",
	    "line\nbreak", "",    NULL};
	char *q = aks_shquote_argv(words);
	assert_non_null(q);
	char out[512];
	assert_int_equal(sh_run(q, out, sizeof(out)), 0);
	assert_string_equal(out, "plain|two words|it's|'|''|$HOME `id` $(id) \\ \"q\" ; & | > < * "
	                         "? ~ # !|line\nbreak||");
	free(q);
	const char *none[] = {NULL};
	q = aks_shquote_argv(none);
	assert_string_equal(q, "");
	free(q);
}

/* The resolve script (aks_wsresolve.h) on this machine's file system: a regular file, a
 * missing one (its parents made for a write), a link out of the root, a FIFO, a directory. */
static void test_wsresolve_script(void **state)
{
	(void)state;
	char root[] = "/tmp/aks-wsresolve.XXXXXX";
	assert_non_null(mkdtemp(root));
	char line[4096], out[2048], want[1024];
	snprintf(
	    line, sizeof(line),
	    "cd %s && mkdir home && echo x > home/file && mkfifo home/pipe && mkdir home/dir && "
	    "ln -s /etc home/out && ln -s pipe home/link",
	    root);
	assert_int_equal(system(line), 0);
	struct {
		const char *path, *mode;
		int code;
	} cases[] = {{"file", "", 0},       {"new/deep/f", "mkdir", 0},
	             {"out/passwd", "", 0}, {"pipe", "", 3},
	             {"link", "", 3},       {"dir", "", 3},
	             {"out", "mkdir", 3}};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char abs[600];
		snprintf(abs, sizeof(abs), "%s/home/%s", root, cases[i].path);
		const char *argv[] = {"sh", "-c", aks_wsresolve_script, "resolve",
		                      NULL, abs,  cases[i].mode,        NULL};
		char home[600];
		snprintf(home, sizeof(home), "%s/home", root);
		argv[4] = home;
		char *q = aks_shquote_argv(argv);
		assert_non_null(q);
		assert_int_equal(sh_run(q, out, sizeof(out)), cases[i].code);
		free(q);
		/* the first line is the root; the second the path with its links followed */
		snprintf(want, sizeof(want), "%s/home\n", root);
		assert_memory_equal(out, want, strlen(want));
		if (strcmp(cases[i].path, "out/passwd") == 0)
			assert_string_equal(out + strlen(want), "/etc/passwd\n");
	}
	snprintf(line, sizeof(line), "%s/home/new/deep", root);
	struct stat st;
	assert_int_equal(stat(line, &st), 0); /* a write's parents were made */
	snprintf(line, sizeof(line), "rm -rf %s", root);
	assert_int_equal(system(line), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_buf_growth_keeps_nul),
	    cmocka_unit_test(test_file_read),
	    cmocka_unit_test(test_buf_binary_and_empty),
	    cmocka_unit_test(test_buf_printf_puts),
	    cmocka_unit_test(test_buf_reserve_then_write),
	    cmocka_unit_test(test_buf_truncate_reset_rtrim),
	    cmocka_unit_test(test_buf_steal),
	    cmocka_unit_test(test_buf_overflow_is_enomem),
	    cmocka_unit_test(test_buf_realloc_failure),
	    cmocka_unit_test(test_strv_push_free),
	    cmocka_unit_test(test_strv_dup),
	    cmocka_unit_test(test_strv_take_sort_unique),
	    cmocka_unit_test(test_base64_std),
	    cmocka_unit_test(test_base64_url_nopad),
	    cmocka_unit_test(test_base64_loose),
	    cmocka_unit_test(test_base64_round_trips),
	    cmocka_unit_test(test_base64_enomem),
	    cmocka_unit_test(test_jget_is_null_safe),
	    cmocka_unit_test(test_jstr_only_strings),
	    cmocka_unit_test(test_wspath_other_root),
	    cmocka_unit_test(test_shquote_round_trip),
	    cmocka_unit_test(test_wsresolve_script),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
