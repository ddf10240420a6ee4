/*
 * tests/unit/test_container_common.c - plugins/common/libaks-container: the
 * workspace path rule, the tar round trip, the kill script, the message of
 * an HTTP error answer and transfers under a call's deadline, which the
 * docker and kubernetes providers share.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <pthread.h>
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
#include "aks_curl.h"
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

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	assert_true(vasprintf(&s, fmt, ap) >= 0);
	va_end(ap);
	return s;
}

/* A string of n bytes: components of `name` bytes of 'n' joined by '/'. */
static char *long_path(size_t n, size_t name)
{
	char *s = malloc(n + 1);
	assert_non_null(s);
	for (size_t i = 0; i < n; i++)
		s[i] = (i % (name + 1) == name) ? '/' : 'n';
	s[n] = '\0';
	return s;
}

/* Refused before anything: longer than AKS_CTR_PATH_MAX as a container path, or a name
 * longer than AKS_CTR_NAME_MAX; the message says so and shows a bounded prefix. */
static void test_wspath_limits(void **state)
{
	(void)state;
	size_t rel_max = AKS_CTR_PATH_MAX - strlen("/workspace/");
	char *at = long_path(rel_max, 200), *over = long_path(rel_max + 1, 200);
	char *p = NULL;
	assert_int_equal(aks_ctr_wspath(at, &p), AKS_OK);
	assert_int_equal(strlen(p), AKS_CTR_PATH_MAX);
	free(p);
	assert_int_equal(aks_ctr_wspath(over, &p), AKS_ELIMIT);
	assert_null(p);
	char why[AKS_CTR_WSPATH_WHY_BUF];
	const char *m = aks_ctr_wspath_why(AKS_ELIMIT, over, why, sizeof(why));
	char *want = xasprintf("is %zu bytes: a sandbox path has at most %zu below /workspace/",
	                       rel_max + 1, rel_max);
	assert_non_null(strstr(m, want));
	free(want);
	assert_true(strlen(m) < AKS_CTR_SHOWN_MAX + 100);
	assert_non_null(strstr(m, "nnnn...'"));
	/* ".." does not make a long path acceptable: the bound is on what the caller sent */
	char *dots = malloc(70001);
	for (size_t i = 0; i < 70000; i++)
		dots[i] = "a/../"[i % 5];
	dots[70000] = '\0';
	assert_int_equal(aks_ctr_wspath(dots, &p), AKS_ELIMIT);
	free(dots);
	free(at);
	free(over);

	char *name = long_path(AKS_CTR_NAME_MAX, 1000), *longer = long_path(256, 1000);
	assert_int_equal(aks_ctr_wspath(name, &p), AKS_OK);
	free(p);
	char *in = xasprintf("a/%s/b", longer);
	assert_int_equal(aks_ctr_wspath(in, &p), AKS_ELIMIT);
	m = aks_ctr_wspath_why(AKS_ELIMIT, in, why, sizeof(why));
	assert_non_null(strstr(m, "has a name of 256 bytes: at most 255"));
	free(in);
	free(name);
	free(longer);
	/* the escape message as before */
	assert_string_equal(aks_ctr_wspath_why(AKS_EPOLICY, "/../x", why, sizeof(why)),
	                    "path '../x' escapes /workspace");
}

/* A bounded prefix, cut where a UTF-8 character begins. */
static void test_shown(void **state)
{
	(void)state;
	char buf[16];
	assert_string_equal(aks_ctr_shown("short", 8, buf, sizeof(buf)), "short");
	assert_string_equal(aks_ctr_shown("exactly8", 8, buf, sizeof(buf)), "exactly8");
	assert_string_equal(aks_ctr_shown("longer than 8", 8, buf, sizeof(buf)), "longer t...");
	/* "aaaaaaaé!": é is two bytes, at 7 and 8: the cut goes before it */
	assert_string_equal(aks_ctr_shown("aaaaaaa\xc3\xa9!", 8, buf, sizeof(buf)), "aaaaaaa...");
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

/* "PATH UID:GID" of each entry. */
static size_t list_owners(const char *tar, size_t len, char out[][64], size_t max)
{
	struct archive *a = archive_read_new();
	assert_non_null(a);
	archive_read_support_format_tar(a);
	assert_int_equal(archive_read_open_memory(a, tar, len), ARCHIVE_OK);
	struct archive_entry *e;
	size_t n = 0;
	while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
		assert_true(n < max);
		snprintf(out[n++], 64, "%s %lld:%lld", archive_entry_pathname(e),
		         (long long)archive_entry_uid(e), (long long)archive_entry_gid(e));
	}
	archive_read_free(a);
	return n;
}

/* An owner for every entry; parent entries only for the directories past `existing`; one
 * directory, "/" included (the directory the tar is unpacked into). */
static void test_tar_opts(void **state)
{
	(void)state;
	char *tar = NULL;
	size_t len = 0;
	char ents[8][64];
	aks_ctr_tar_opts o = {.uid = 1000, .gid = 1001, .existing = 3};
	assert_int_equal(aks_ctr_tar_file_opts("up/dir/x/f.txt", "hi", 2, &o, &tar, &len), 0);
	assert_int_equal(list_tar(tar, len, ents, 8), 3);
	assert_string_equal(ents[0], "d up/dir/ 755"); /* "up" exists: left alone */
	assert_string_equal(ents[1], "d up/dir/x/ 755");
	assert_string_equal(ents[2], "f up/dir/x/f.txt 644 2");
	assert_int_equal(list_owners(tar, len, ents, 8), 3);
	assert_string_equal(ents[0], "up/dir/ 1000:1001");
	assert_string_equal(ents[2], "up/dir/x/f.txt 1000:1001");
	free(tar);

	o.existing = SIZE_MAX;
	o.mode = 0600;
	assert_int_equal(aks_ctr_tar_file_opts("up/dir/x/f.txt", "hi", 2, &o, &tar, &len), 0);
	assert_int_equal(list_tar(tar, len, ents, 8), 1);
	assert_string_equal(ents[0], "f up/dir/x/f.txt 600 2");
	free(tar);

	aks_ctr_tar_opts d = {.dir = true, .uid = 7, .gid = 8, .existing = SIZE_MAX};
	assert_int_equal(aks_ctr_tar_file_opts("/", NULL, 0, &d, &tar, &len), 0);
	assert_int_equal(list_tar(tar, len, ents, 8), 1);
	assert_string_equal(ents[0], "d / 755");
	assert_int_equal(list_owners(tar, len, ents, 8), 1);
	assert_string_equal(ents[0], "/ 7:8");
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

/* ---- a call's deadline and cancellation ---- */

static void test_call_check(void **state)
{
	(void)state;
	const aks_host_api *host = aks__host_api();
	aks_error *err = NULL;
	assert_int_equal(aks_ctr_call_check(host, NULL, "docker", &err), AKS_OK);
	aks_call call;
	aks_call_init(&call, 30, NULL, NULL, NULL);
	assert_int_equal(aks_ctr_call_check(host, &call, "docker", &err), AKS_OK);
	assert_null(err);
	call.timeout = 0.5;
	call.deadline_ms = host->now_ms() - 1; /* over */
	assert_int_equal(aks_ctr_call_check(host, &call, "kubernetes", &err), AKS_ETIMEOUT);
	assert_string_equal(aks_error_message(err), "kubernetes exceeded timeout 0.5s");
	aks_error_free(err);
	err = NULL;
	aks_cancel *cancel = NULL;
	assert_int_equal(aks_cancel_new(&cancel, &err), AKS_OK);
	aks_call_init(&call, 30, NULL, NULL, cancel);
	aks_cancel_trigger(cancel);
	assert_int_equal(aks_ctr_call_check(host, &call, "docker", &err), AKS_ECANCELLED);
	assert_string_equal(aks_error_message(err), "the call was cancelled");
	aks_error_free(err);
	aks_cancel_free(cancel);
}

static void *cancel_soon(void *arg)
{
	usleep(100 * 1000);
	aks_cancel_trigger(arg);
	return NULL;
}

/* With nothing to transfer, the wait ends at the deadline, or at once on cancellation
 * (the cancel descriptor wakes it), never a whole second later. */
static void test_multi_wait(void **state)
{
	(void)state;
	const aks_host_api *host = aks__host_api();
	CURLM *multi = curl_multi_init();
	assert_non_null(multi);
	aks_error *err = NULL;
	aks_call call;
	aks_call_init(&call, 0.2, NULL, NULL, NULL);
	int64_t t0 = host->now_ms();
	int rc = AKS_OK;
	while (rc == AKS_OK && host->now_ms() - t0 < 5000)
		rc = aks_ctr_multi_wait(host, multi, &call, "docker", &err);
	assert_int_equal(rc, AKS_ETIMEOUT);
	assert_true(host->now_ms() - t0 < 900);
	aks_error_free(err);
	err = NULL;

	aks_cancel *cancel = NULL;
	assert_int_equal(aks_cancel_new(&cancel, &err), AKS_OK);
	aks_call_init(&call, 30, NULL, NULL, cancel);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, cancel_soon, cancel), 0);
	t0 = host->now_ms();
	rc = aks_ctr_multi_wait(host, multi, &call, "docker", &err); /* woken by the cancel */
	assert_int_equal(rc, AKS_OK);
	assert_true(host->now_ms() - t0 < 900);
	assert_int_equal(aks_ctr_multi_wait(host, multi, &call, "docker", &err), AKS_ECANCELLED);
	pthread_join(th, NULL);
	aks_error_free(err);
	aks_cancel_free(cancel);
	curl_multi_cleanup(multi);
}

/* The "runs" line: the module's line and the confinement; one per line of the module's, the
 * same pointer for the same line (the host may keep it); the line itself for a third. */
static void test_desc(void **state)
{
	(void)state;
	aks_ctr_desc d = {0};
	aks_ctr_desc_free(&d); /* a zeroed one: nothing to free */
	assert_string_equal(aks_ctr_desc_get(&d, "runs"), "runs");
	assert_int_equal(aks_ctr_desc_init(&d, "containers of at most 512 tasks"), AKS_OK);
	const char a[] = "through the agent", b[] = "one exec per call: why", c[] = "third";
	const char *la = aks_ctr_desc_get(&d, a);
	assert_string_equal(la, "through the agent; containers of at most 512 tasks");
	assert_ptr_equal(aks_ctr_desc_get(&d, a), la);
	const char *lb = aks_ctr_desc_get(&d, b);
	assert_string_equal(lb, "one exec per call: why; containers of at most 512 tasks");
	assert_ptr_equal(aks_ctr_desc_get(&d, a), la);
	assert_ptr_equal(aks_ctr_desc_get(&d, b), lb);
	assert_ptr_equal(aks_ctr_desc_get(&d, c), c);
	aks_ctr_desc_free(&d);
}

/* ---- HTTP error answers ---- */

/* The message of an API error answer, and what stands in for it when there is none. */
static void expect_message(const char *body, long status, const char *want)
{
	char *msg = aks_ctr_http_message(body, body ? strlen(body) : 0, status);
	assert_non_null(msg);
	assert_string_equal(msg, want);
	free(msg);
}

static void test_http_message(void **state)
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
	char *msg = aks_ctr_http_message(big, strlen(big), 500);
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
	    cmocka_unit_test(test_wspath_limits),
	    cmocka_unit_test(test_shown),
	    cmocka_unit_test(test_in_workspace),
	    cmocka_unit_test(test_tar_layout),
	    cmocka_unit_test(test_tar_opts),
	    cmocka_unit_test(test_tar_round_trip),
	    cmocka_unit_test(test_tar_read_errors),
	    cmocka_unit_test(test_kill_script),
	    cmocka_unit_test(test_http_message),
	    cmocka_unit_test(test_call_check),
	    cmocka_unit_test(test_multi_wait),
	    cmocka_unit_test(test_desc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
