/*
 * Fuzz target: reading a tar from a sandbox into a result (plugins/common/tar_mem.c,
 * aks_ctr_tar_read_file): docker's archive API answer and kubernetes's `tar cf -` output,
 * both made by (or inside) the sandbox. The first byte of the input picks the read sizes and
 * the result's file limit; the rest is the tar. It is read twice, from memory (as the
 * kubernetes plugin does) and through a read callback handing out pieces of those sizes (as
 * docker's transfer does), and the file is read a third time with archive_read_data, which
 * is the reference. Checks: both readings agree; AKS_OK means a result with exactly the
 * reference's bytes (holes of a sparse file included), never less; AKS_ELIMIT means the
 * file is larger than the limit; AKS_ENOTFOUND comes with an error, AKS_CTR_BADTAR without.
 * Aborts when a property fails.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <archive.h>
#include <archive_entry.h>

#include "aks_container.h"
#include "core/plugin/host_api.h"
#include "core/plugin/result.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

#define REF_MAX (256u << 10) /* the largest file limit; the reference reads twice that */

typedef struct source {
	const uint8_t *d;
	size_t len, at, piece;
} source;

static la_ssize_t piece_read(struct archive *a, void *ctx, const void **buf)
{
	(void)a;
	source *s = ctx;
	size_t n = s->len - s->at < s->piece ? s->len - s->at : s->piece;
	*buf = s->d + s->at;
	s->at += n;
	return (la_ssize_t)n;
}

static struct archive *open_tar(const uint8_t *d, size_t len, source *pieces)
{
	struct archive *a = archive_read_new();
	CHECK(a);
	archive_read_support_format_tar(a);
	int rc = pieces ? archive_read_open(a, pieces, NULL, piece_read, NULL)
	                : archive_read_open_memory(a, d, len);
	if (rc != ARCHIVE_OK) {
		archive_read_free(a);
		return NULL;
	}
	return a;
}

typedef struct reading {
	int rc;
	aks_result *r;
} reading;

static reading read_into_result(struct archive *a, size_t file_cap)
{
	reading out = {AKS_CTR_BADTAR, aks__result_new(64, file_cap)};
	CHECK(out.r);
	if (!a)
		return out;
	aks_error *err = NULL;
	out.rc = aks_ctr_tar_read_file(aks__host_api(), a, "dir/p", out.r, &err);
	if (out.rc == AKS_ENOTFOUND || out.rc == AKS_ELIMIT)
		CHECK(err && aks_error_message(err)[0]);
	else if (out.rc == AKS_CTR_BADTAR || out.rc == AKS_OK)
		CHECK(!err);
	else
		abort(); /* no other outcome is documented */
	aks_error_free(err);
	archive_read_free(a);
	return out;
}

/* The reference: the first regular file's bytes through archive_read_data; false when
 * libarchive fails on the way or the file is larger than 2 * REF_MAX. The end is two reads
 * of nothing in a row: with a sparse file whose last hole reaches the end, libarchive 3.6's
 * archive_read_data returns 0 once before it hands out that hole. */
static bool reference(const uint8_t *d, size_t len, unsigned char **body, size_t *body_len,
                      bool *found)
{
	*body = NULL;
	*body_len = 0;
	*found = false;
	struct archive *a = open_tar(d, len, NULL);
	if (!a)
		return false;
	struct archive_entry *e;
	int h;
	while ((h = archive_read_next_header(a, &e)) == ARCHIVE_OK || h == ARCHIVE_WARN)
		if (archive_entry_filetype(e) == AE_IFREG)
			break;
	bool ok = h == ARCHIVE_EOF;
	if (h == ARCHIVE_OK || h == ARCHIVE_WARN) {
		*found = true;
		size_t cap = 4096;
		unsigned char *buf = malloc(cap);
		CHECK(buf);
		la_ssize_t n = 0;
		for (int nothing = 0; nothing < 2;) {
			n = archive_read_data(a, buf + *body_len, cap - *body_len);
			if (n < 0)
				break;
			nothing = n ? 0 : nothing + 1;
			*body_len += (size_t)n;
			if (*body_len == cap && cap < 2 * REF_MAX) {
				CHECK((buf = realloc(buf, cap *= 2)));
			} else if (*body_len == cap) {
				n = -1; /* larger than the reference reads */
				break;
			}
		}
		ok = n == 0;
		*body = buf;
	}
	archive_read_free(a);
	return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t piece = 13 + (data[0] & 0x7f) * 37; /* 13 .. 4712 bytes per read */
	size_t file_cap = data[0] & 0x80 ? 100 : REF_MAX;
	const uint8_t *tar = data + 1;
	size_t len = size - 1;

	reading mem = read_into_result(open_tar(tar, len, NULL), file_cap);
	source src = {tar, len, 0, piece};
	reading cb = read_into_result(open_tar(tar, len, &src), file_cap);
	CHECK(mem.rc == cb.rc);

	unsigned char *ref = NULL;
	size_t ref_len = 0;
	bool found = false;
	bool ref_ok = reference(tar, len, &ref, &ref_len, &found);
	if (mem.rc == AKS_ENOTFOUND)
		CHECK(ref_ok && !found);
	for (int i = 0; i < 2; i++) {
		aks_result *r = i ? cb.r : mem.r;
		if (mem.rc == AKS_OK) {
			CHECK(ref_ok && found);
			CHECK(aks_result_get_file_count(r) == 1);
			const char *path = NULL, *mime = NULL;
			size_t got = 0;
			const unsigned char *body = aks_result_get_file(r, 0, &path, &mime, &got);
			CHECK(strcmp(path, "dir/p") == 0);
			CHECK(got == ref_len && (!got || memcmp(body, ref, got) == 0));
		} else if (mem.rc == AKS_ELIMIT) {
			CHECK(found && (!ref_ok || ref_len > file_cap));
		}
		aks_result_free(r);
	}
	free(ref);
	return 0;
}
