/* Unit tests: file transfers through aksandbox-agent. Writes are checked on disk (content,
 * mode, parents created, no temporary left behind), a chunk that does not match the
 * announced SHA-256 or size is refused and leaves nothing, and reads round-trip binary data
 * across chunk boundaries with their size and hash verified. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "agent/sha256.h"
#include "core/plugin/host_api.h"
#include "test_agent_harness.h"

static uint8_t *pattern(size_t len, uint32_t seed)
{
	uint8_t *p = malloc(len ? len : 1);
	assert_non_null(p);
	for (size_t i = 0; i < len; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (uint8_t)(seed >> 16);
	}
	return p;
}

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *p = malloc((size_t)n + 1);
	assert_int_equal(fread(p, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return p;
}

/* No ".aks-upload-" temporary is left in dir. */
static void assert_no_temp(const char *dir)
{
	DIR *d = opendir(dir);
	assert_non_null(d);
	struct dirent *e;
	while ((e = readdir(d)))
		if (strncmp(e->d_name, ".aks-upload-", 12) == 0)
			fail_msg("temporary %s left in %s", e->d_name, dir);
	closedir(d);
}

typedef struct sink {
	uint8_t *data;
	size_t len, cap;
	int calls;
} sink;

static void sink_chunk(void *ud, int stream, const void *data, size_t len)
{
	sink *s = ud;
	assert_int_equal(stream, AKS_STREAM_FILE);
	if (s->len + len > s->cap) {
		s->cap = (s->len + len) * 2;
		s->data = realloc(s->data, s->cap);
	}
	memcpy(s->data + s->len, data, len);
	s->len += len;
	s->calls++;
}

static void test_write_read_round_trip(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	th_agent t;
	th_start(&t);
	aks_error *err = NULL;
	/* sizes around the chunk size, zero, and a few MiB (more than the output window) */
	const size_t sizes[] = {0, 1, 65535, 65536, 65537, 300000, 5 * 1024 * 1024 + 3};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char path[4200];
		snprintf(path, sizeof(path), "%s/sub/dir%zu/file.bin", dir, i);
		uint8_t *data = pattern(sizes[i], (uint32_t)i + 1);
		assert_int_equal(
		    aks__agent_write_file(t.conn, path, data, sizes[i], 0640, NULL, &err), AKS_OK);
		/* on disk: the bytes, the mode */
		size_t len;
		uint8_t *disk = slurp(path, &len);
		assert_non_null(disk);
		assert_int_equal(len, sizes[i]);
		assert_memory_equal(disk, data, len);
		free(disk);
		struct stat st;
		assert_int_equal(stat(path, &st), 0);
		assert_int_equal(st.st_mode & 0777, 0640);
		/* and back */
		sink s = {0};
		uint64_t size = 0;
		assert_int_equal(aks__agent_read_file(t.conn, path, UINT64_MAX, sink_chunk, &s,
		                                      NULL, &size, &err),
		                 AKS_OK);
		assert_int_equal(size, sizes[i]);
		assert_int_equal(s.len, sizes[i]);
		if (sizes[i])
			assert_memory_equal(s.data, data, sizes[i]);
		if (sizes[i] > 65536)
			assert_true(s.calls > 1); /* it came in chunks */
		free(s.data);
		free(data);
		snprintf(path, sizeof(path), "%s/sub/dir%zu", dir, i);
		assert_no_temp(path);
	}
	/* overwriting replaces the whole file */
	char path[4200];
	snprintf(path, sizeof(path), "%s/over", dir);
	assert_int_equal(aks__agent_write_file(t.conn, path, "long contents", 13, 0644, NULL, &err),
	                 AKS_OK);
	assert_int_equal(aks__agent_write_file(t.conn, path, "short", 5, 0644, NULL, &err), AKS_OK);
	size_t len;
	uint8_t *disk = slurp(path, &len);
	assert_int_equal(len, 5);
	assert_memory_equal(disk, "short", 5);
	free(disk);
	assert_int_equal(th_stop(&t), 0);
	th_rmdir(dir);
}

static void test_read_errors(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	th_agent t;
	th_start(&t);
	aks_error *err = NULL;
	char path[4200];
	snprintf(path, sizeof(path), "%s/missing", dir);
	sink s = {0};
	assert_int_equal(
	    aks__agent_read_file(t.conn, path, UINT64_MAX, sink_chunk, &s, NULL, NULL, &err),
	    AKS_ENOTFOUND);
	assert_non_null(strstr(aks_error_message(err), "missing"));
	aks_error_free(err);
	err = NULL;
	snprintf(path, sizeof(path), "%s/big", dir);
	assert_int_equal(aks__agent_write_file(t.conn, path, "0123456789", 10, 0644, NULL, &err),
	                 AKS_OK);
	assert_int_equal(aks__agent_read_file(t.conn, path, 9, sink_chunk, &s, NULL, NULL, &err),
	                 AKS_ELIMIT);
	aks_error_free(err);
	err = NULL;
	/* not a regular file: not found (the per-call paths' `[ -f ]`) */
	assert_int_equal(aks__agent_read_file(t.conn, dir, 100, sink_chunk, &s, NULL, NULL, &err),
	                 AKS_ENOTFOUND);
	assert_non_null(strstr(aks_error_message(err), "not a regular file"));
	aks_error_free(err);
	assert_int_equal(s.len, 0);
	assert_int_equal(th_stop(&t), 0);
	th_rmdir(dir);
}

/* A FIFO with no writer, as hostile code would plant where a file is expected: refused at
 * once, never opened in a way that waits, and the agent goes on serving (it is one thread:
 * a blocked open would stop every later request of the session). */
static void test_read_fifo_refused(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	char path[4200];
	snprintf(path, sizeof(path), "%s/fifo", dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	th_agent t;
	th_start(&t);
	aks_call call;
	aks_call_init(&call, 5, NULL, NULL, NULL);
	aks_error *err = NULL;
	sink s = {0};
	int64_t t0 = aks__host_api()->now_ms();
	assert_int_equal(
	    aks__agent_read_file(t.conn, path, UINT64_MAX, sink_chunk, &s, &call, NULL, &err),
	    AKS_ENOTFOUND);
	assert_true(aks__host_api()->now_ms() - t0 < 2000);
	aks_error_free(err);
	err = NULL;
	/* the next request is answered */
	aks_call_init(&call, 5, NULL, NULL, NULL);
	assert_int_equal(aks__agent_ping(t.conn, &call, &err), AKS_OK);
	snprintf(path, sizeof(path), "%s/after", dir);
	assert_int_equal(aks__agent_write_file(t.conn, path, "ok", 2, 0644, &call, &err), AKS_OK);
	assert_int_equal(th_stop(&t), 0);
	th_rmdir(dir);
}

/* Raw frames: a WRITE announcing one SHA-256 followed by other bytes. */
static void raw_write(th_agent *t, uint32_t id, const char *path, const void *announced,
                      size_t announced_len, const void *sent, size_t sent_len)
{
	uint8_t sha[32];
	aks_sha256 h;
	aks__sha256_init(&h);
	aks__sha256_update(&h, announced, announced_len);
	aks__sha256_final(&h, sha);
	aks_agent_buf b = {0};
	size_t s = aks__agent_frame_begin(&b, AKS_AGENT_WRITE, 0, id);
	aks__agent_put_str(&b, AKS_AGENT_T_PATH, path);
	aks__agent_put_u64(&b, AKS_AGENT_T_SIZE, announced_len);
	aks__agent_put_bytes(&b, AKS_AGENT_T_SHA256, sha, sizeof(sha));
	aks__agent_frame_end(&b, s);
	aks__agent_frame_data(&b, AKS_AGENT_WRITE_DATA, 0, id, sent, sent_len / 2);
	aks__agent_frame_data(&b, AKS_AGENT_WRITE_DATA, AKS_AGENT_FLAG_END, id,
	                      (const uint8_t *)sent + sent_len / 2, sent_len - sent_len / 2);
	th_send(t, &b);
	aks__agent_buf_free(&b);
}

static void test_corrupt_write_refused(void **state)
{
	(void)state;
	char *dir = th_tmpdir();
	th_agent t;
	th_start_raw(&t);
	th_send_hello(&t);
	char path[4200];
	snprintf(path, sizeof(path), "%s/target", dir);
	aks_agent_frame f;
	static uint8_t payload[AKS_AGENT_MAX_PAYLOAD];

	/* one flipped byte in a chunk: refused for its hash, nothing written */
	raw_write(&t, 5, path, "the real contents", 17, "the reaL contents", 17);
	th_recv(&t, &f, payload, sizeof(payload), 5000);
	assert_int_equal(f.type, AKS_AGENT_ERROR);
	assert_int_equal(f.id, 5);
	assert_int_equal(th_field_u32(&f, AKS_AGENT_T_CODE), AKS_AGENT_E_HASH_MISMATCH);
	assert_int_equal(access(path, F_OK), -1);
	assert_no_temp(dir);

	/* more bytes than announced: refused at once; its remaining data is dropped quietly */
	raw_write(&t, 6, path, "abc", 3, "abcdefgh", 8);
	th_recv(&t, &f, payload, sizeof(payload), 5000);
	assert_int_equal(f.type, AKS_AGENT_ERROR);
	assert_int_equal(f.id, 6);
	assert_int_equal(th_field_u32(&f, AKS_AGENT_T_CODE), AKS_AGENT_E_SIZE_MISMATCH);
	assert_int_equal(access(path, F_OK), -1);

	/* fewer bytes than announced */
	raw_write(&t, 7, path, "abcdef", 6, "abc", 3);
	th_recv(&t, &f, payload, sizeof(payload), 5000);
	assert_int_equal(f.type, AKS_AGENT_ERROR);
	assert_int_equal(th_field_u32(&f, AKS_AGENT_T_CODE), AKS_AGENT_E_SIZE_MISMATCH);
	assert_int_equal(access(path, F_OK), -1);
	assert_no_temp(dir);

	/* the honest write then succeeds, with the hash echoed */
	raw_write(&t, 8, path, "the real contents", 17, "the real contents", 17);
	th_recv(&t, &f, payload, sizeof(payload), 5000);
	assert_int_equal(f.type, AKS_AGENT_WRITE_OK);
	assert_int_equal(f.id, 8);
	size_t len;
	uint8_t *disk = slurp(path, &len);
	assert_int_equal(len, 17);
	assert_memory_equal(disk, "the real contents", 17);
	free(disk);
	assert_no_temp(dir);
	int st = th_stop(&t);
	assert_int_equal(st, 0);
	th_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_write_read_round_trip),
	    cmocka_unit_test(test_read_errors),
	    cmocka_unit_test(test_read_fifo_refused),
	    cmocka_unit_test(test_corrupt_write_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
