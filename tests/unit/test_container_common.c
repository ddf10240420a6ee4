/*
 * tests/unit/test_container_common.c - plugins/common/libaks-container: the
 * workspace path rule, the tar round trip, the kill script and base64 that
 * the docker and kubernetes providers share.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <archive.h>
#include <archive_entry.h>

#include <aksandbox/aksandbox.h>

#include "aks_container.h"
#include "core/plugin/host_api.h"
#include "core/plugin/result.h"

/* ---- the path rule ---- */

static void expect_ok(const char *in, const char *want)
{
	char *p = (char *)"sentinel";
	int rc = aks_ctr_wspath(in, &p);
	if (rc != AKS_OK)
		fail_msg("'%s': %d", in, rc);
	assert_string_equal(p, want);
	free(p);
}

static void expect_escape(const char *in)
{
	char *p = (char *)"sentinel";
	int rc = aks_ctr_wspath(in, &p);
	if (rc != AKS_EPOLICY)
		fail_msg("'%s' was not refused: %d (%s)", in, rc, rc == AKS_OK ? p : "");
	assert_null(p);
}

static void test_wspath_relative_and_absolute(void **state)
{
	(void)state;
	expect_ok("a.txt", "/workspace/a.txt");
	expect_ok("/a.txt", "/workspace/a.txt");
	expect_ok("///a/b", "/workspace/a/b");
	expect_ok("/etc/passwd", "/workspace/etc/passwd"); /* absolute means under the root */
	expect_ok("/workspace/x", "/workspace/workspace/x");
	expect_ok("a//b/", "/workspace/a/b");
}

static void test_wspath_dots(void **state)
{
	(void)state;
	expect_ok("./a", "/workspace/a");
	expect_ok("a/./b/../c", "/workspace/a/c");
	expect_ok("a/b/../../c", "/workspace/c");
	expect_ok("a/../../workspace/b", "/workspace/b"); /* leaves, comes back: lexical */
	expect_ok("...", "/workspace/...");
	expect_ok("..a/b..", "/workspace/..a/b..");
}

static void test_wspath_root(void **state)
{
	(void)state;
	expect_ok("", "/workspace");
	expect_ok("/", "/workspace");
	expect_ok(".", "/workspace");
	expect_ok("a/..", "/workspace");
	expect_ok("/./a/../", "/workspace");
}

static void test_wspath_escapes(void **state)
{
	(void)state;
	expect_escape("..");
	expect_escape("/..");
	expect_escape("../x");
	expect_escape("a/../../x");
	expect_escape("../../../../etc/passwd");
	expect_escape("/../workspace2");   /* a sibling whose name starts the same */
	expect_escape("../workspacefile"); /* likewise */
	expect_escape("a/../../workspace/../etc");
	char *p = (char *)"sentinel";
	assert_int_equal(aks_ctr_wspath(NULL, &p), AKS_EINVAL);
	assert_null(p);
	/* what the escape message names */
	assert_string_equal(aks_ctr_wspath_rel("//../x"), "../x");
}

static void test_in_workspace(void **state)
{
	(void)state;
	assert_true(aks_ctr_in_workspace("/workspace"));
	assert_true(aks_ctr_in_workspace("/workspace/a"));
	assert_false(aks_ctr_in_workspace("/workspace2"));
	assert_false(aks_ctr_in_workspace("/work"));
	assert_false(aks_ctr_in_workspace("/etc/passwd"));
	assert_false(aks_ctr_in_workspace(NULL));
}

/* ---- tars ---- */

/* Lists the entries of a tar: "d a/ 755", "f a/b/c.txt 644 5". */
static size_t list_tar(const char *tar, size_t len, char out[][64], size_t max)
{
	struct archive *a = archive_read_new();
	assert_non_null(a);
	archive_read_support_format_tar(a);
	assert_int_equal(archive_read_open_memory(a, tar, len), ARCHIVE_OK);
	struct archive_entry *e;
	size_t n = 0;
	while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
		assert_true(n < max);
		bool dir = archive_entry_filetype(e) == AE_IFDIR;
		if (dir)
			snprintf(out[n], 64, "d %s %o", archive_entry_pathname(e),
			         (unsigned)archive_entry_perm(e));
		else
			snprintf(out[n], 64, "f %s %o %lld", archive_entry_pathname(e),
			         (unsigned)archive_entry_perm(e), (long long)archive_entry_size(e));
		n++;
	}
	archive_read_free(a);
	return n;
}

static void test_tar_layout(void **state)
{
	(void)state;
	char *tar = NULL;
	size_t len = 0;
	char ents[8][64];
	assert_int_equal(aks_ctr_tar_file("a/b/c.txt", "hello", 5, true, &tar, &len), 0);
	assert_non_null(tar);
	assert_int_equal(tar[len], '\0');
	assert_int_equal(list_tar(tar, len, ents, 8), 3);
	assert_string_equal(ents[0], "d a/ 755"); /* tar marks a directory with a "/" */
	assert_string_equal(ents[1], "d a/b/ 755");
	assert_string_equal(ents[2], "f a/b/c.txt 644 5");
	free(tar);

	assert_int_equal(aks_ctr_tar_file("a/b/c.txt", "hello", 5, false, &tar, &len), 0);
	assert_int_equal(list_tar(tar, len, ents, 8), 1);
	assert_string_equal(ents[0], "f a/b/c.txt 644 5");
	free(tar);

	assert_int_equal(aks_ctr_tar_file("empty", NULL, 0, true, &tar, &len), 0);
	assert_int_equal(list_tar(tar, len, ents, 8), 1);
	assert_string_equal(ents[0], "f empty 644 0");
	free(tar);
}

/* Builds a tar of `data`, reads it back through the host's result. */
static void round_trip(const void *data, size_t len)
{
	char *tar = NULL;
	size_t tlen = 0;
	assert_int_equal(aks_ctr_tar_file("d/e/f.bin", data, len, true, &tar, &tlen), 0);
	struct archive *a = archive_read_new();
	assert_non_null(a);
	archive_read_support_format_tar(a);
	assert_int_equal(archive_read_open_memory(a, tar, tlen), ARCHIVE_OK);
	aks_result *r = aks__result_new(1 << 20, 8 << 20);
	assert_non_null(r);
	aks_error *err = NULL;
	int rc = aks_ctr_tar_read_file(aks__host_api(), a, "agent/f.bin", r, &err);
	if (rc != AKS_OK)
		fail_msg("%d: %s", rc, err ? aks_error_message(err) : "");
	archive_read_free(a);
	free(tar);
	assert_int_equal(aks_result_get_file_count(r), 1);
	const char *path = NULL, *mime = NULL;
	size_t got = 0;
	const unsigned char *body = aks_result_get_file(r, 0, &path, &mime, &got);
	assert_string_equal(path, "agent/f.bin");
	assert_string_equal(mime, "application/octet-stream");
	assert_int_equal(got, len);
	if (len)
		assert_memory_equal(body, data, len);
	aks_result_free(r);
}

static void test_tar_round_trip(void **state)
{
	(void)state;
	round_trip("hello, world\n", 13);
	round_trip("", 0);
	size_t n = 300000; /* many blocks, every byte value */
	unsigned char *big = malloc(n);
	assert_non_null(big);
	for (size_t i = 0; i < n; i++)
		big[i] = (unsigned char)(i * 7 + i / 256);
	round_trip(big, n);
	free(big);
}

static void test_tar_read_errors(void **state)
{
	(void)state;
	/* garbage: libarchive refuses it and nothing is set */
	static const char junk[1024] = "this is not a tar";
	struct archive *a = archive_read_new();
	archive_read_support_format_tar(a);
	aks_result *r = aks__result_new(1024, 1024);
	aks_error *err = NULL;
	int rc = archive_read_open_memory(a, junk, sizeof(junk)) == ARCHIVE_OK
	             ? aks_ctr_tar_read_file(aks__host_api(), a, "p", r, &err)
	             : AKS_CTR_BADTAR;
	assert_int_equal(rc, AKS_CTR_BADTAR);
	assert_null(err);
	assert_int_equal(aks_result_get_file_count(r), 0);
	archive_read_free(a);

	/* an empty archive (end blocks only): AKS_ENOTFOUND naming the path */
	static const char zeros[1024];
	a = archive_read_new();
	archive_read_support_format_tar(a);
	archive_read_support_format_empty(a);
	assert_int_equal(archive_read_open_memory(a, zeros, sizeof(zeros)), ARCHIVE_OK);
	rc = aks_ctr_tar_read_file(aks__host_api(), a, "dir/p", r, &err);
	assert_int_equal(rc, AKS_ENOTFOUND);
	assert_non_null(err);
	assert_string_equal(aks_error_message(err), "file 'dir/p' not found in the sandbox");
	aks_error_free(err);
	assert_int_equal(aks_result_get_file_count(r), 0);
	archive_read_free(a);
	aks_result_free(r);
}

/* ---- the kill script, run here against a process carrying the marker ---- */

static void test_kill_script(void **state)
{
	(void)state;
	const char *marker = "0123456789abcdef0123456789abcdef";
	pid_t victim = fork();
	assert_true(victim >= 0);
	if (victim == 0) {
		setenv(AKS_CTR_MARKER_VAR, marker, 1);
		execl("/bin/sleep", "sleep", "30", (char *)NULL);
		_exit(127);
	}
	pid_t other = fork(); /* the same variable, another value: must survive */
	assert_true(other >= 0);
	if (other == 0) {
		setenv(AKS_CTR_MARKER_VAR, "ffffffffffffffffffffffffffffffff", 1);
		execl("/bin/sleep", "sleep", "30", (char *)NULL);
		_exit(127);
	}
	usleep(200000); /* both have exec'd: their environ is sleep's */
	pid_t killer = fork();
	assert_true(killer >= 0);
	if (killer == 0) {
		execl("/bin/sh", "sh", "-c", aks_ctr_kill_script, "sh", marker, (char *)NULL);
		_exit(127);
	}
	int st = 0;
	/* the victim dies first (the script waits for it to become a zombie) */
	assert_int_equal(waitpid(victim, &st, 0), victim);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	assert_int_equal(waitpid(killer, &st, 0), killer);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_int_equal(waitpid(other, &st, WNOHANG), 0); /* still running */
	kill(other, SIGKILL);
	assert_int_equal(waitpid(other, &st, 0), other);
}

/* ---- base64 ---- */

static void test_b64(void **state)
{
	(void)state;
	size_t n = 0;
	char *e = aks_ctr_b64_encode("\0\xff\x10hi", 5);
	assert_string_equal(e, "AP8QaGk=");
	char *d = aks_ctr_b64_decode(e, strlen(e), &n);
	assert_int_equal(n, 5);
	assert_memory_equal(d, "\0\xff\x10hi", 5);
	free(d);
	free(e);
	d = aks_ctr_b64_decode("aGVs\nbG8", 8, NULL);
	assert_string_equal(d, "hello");
	free(d);
	assert_null(aks_ctr_b64_decode("aGU=bG8=", 8, &n));
	assert_null(aks_ctr_b64_decode("aG*s", 4, &n));
}

/* The message of an API error answer, and what stands in for it when there is none. */
static void expect_message(const char *body, long status, const char *want)
{
	char *msg = aks_ctr_api_message(body, body ? strlen(body) : 0, status);
	assert_non_null(msg);
	assert_string_equal(msg, want);
	free(msg);
}

static void test_api_message(void **state)
{
	(void)state;
	expect_message("{\"message\":\"No such container: x\"}\n", 404, "No such container: x");
	/* a Kubernetes Status object */
	expect_message(
	    "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"pods \\\"p\\\" is "
	    "forbidden\",\"code\":403}",
	    403, "pods \"p\" is forbidden");
	/* a message that says nothing is no message: the body, else the status */
	expect_message("{\"message\":null}", 500, "{\"message\":null}");
	expect_message("{\"message\":\"\"}", 500, "{\"message\":\"\"}");
	expect_message("{\"message\":7}", 500, "{\"message\":7}");
	expect_message("404 page not found\r\n", 404, "404 page not found");
	expect_message("\n", 502, "HTTP status 502");
	expect_message("", 503, "HTTP status 503");
	expect_message(NULL, 500, "HTTP status 500");
	/* plain text is cut at 500 bytes */
	char big[800];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	char *msg = aks_ctr_api_message(big, strlen(big), 500);
	assert_non_null(msg);
	assert_int_equal(strlen(msg), 500);
	free(msg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_wspath_relative_and_absolute),
	    cmocka_unit_test(test_wspath_dots),
	    cmocka_unit_test(test_wspath_root),
	    cmocka_unit_test(test_wspath_escapes),
	    cmocka_unit_test(test_in_workspace),
	    cmocka_unit_test(test_tar_layout),
	    cmocka_unit_test(test_tar_round_trip),
	    cmocka_unit_test(test_tar_read_errors),
	    cmocka_unit_test(test_kill_script),
	    cmocka_unit_test(test_b64),
	    cmocka_unit_test(test_api_message),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
