/*
 * plugins/common/tar_mem.c - a one-file tar built in memory, and the first
 * regular file of a tar read out to a result; see aks_container.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <archive.h>
#include <archive_entry.h>

#include "aks_container.h"

/* The tar goes to an open_memstream(), which grows and NUL-terminates it. */
static la_ssize_t tar_write(struct archive *a, void *ctx, const void *buf, size_t len)
{
	(void)a;
	return fwrite(buf, 1, len, ctx) == len ? (la_ssize_t)len : -1;
}

/* The entry's type, mode, owner and time. */
static void set_entry(struct archive_entry *e, const char *path, unsigned type, unsigned mode,
                      const aks_ctr_tar_opts *o, time_t now)
{
	archive_entry_clear(e);
	archive_entry_set_pathname(e, path);
	archive_entry_set_filetype(e, type);
	archive_entry_set_perm(e, mode);
	archive_entry_set_uid(e, o->uid);
	archive_entry_set_gid(e, o->gid);
	archive_entry_set_mtime(e, now, 0);
}

/* An entry for each parent directory of rel longer than o->existing bytes, outermost first. */
static int write_parents(struct archive *a, struct archive_entry *e, const char *rel,
                         const aks_ctr_tar_opts *o, time_t now)
{
	char *dir = strdup(rel);
	int ok = dir != NULL;
	for (char *slash = dir ? strchr(dir, '/') : NULL; ok && slash;
	     slash = strchr(slash + 1, '/')) {
		if ((size_t)(slash - dir) <= o->existing)
			continue;
		*slash = '\0';
		set_entry(e, dir, AE_IFDIR, 0755, o, now);
		ok = archive_write_header(a, e) == ARCHIVE_OK;
		*slash = '/';
	}
	free(dir);
	return ok;
}

int aks_ctr_tar_file(const char *rel, const void *data, size_t len, bool parents, char **out,
                     size_t *out_len)
{
	return aks_ctr_tar_file_mode(rel, data, len, parents, 0644, out, out_len);
}

int aks_ctr_tar_file_mode(const char *rel, const void *data, size_t len, bool parents,
                          unsigned mode, char **out, size_t *out_len)
{
	aks_ctr_tar_opts o = {.mode = mode, .existing = parents ? 0 : SIZE_MAX};
	return aks_ctr_tar_file_opts(rel, data, len, &o, out, out_len);
}

int aks_ctr_tar_file_opts(const char *rel, const void *data, size_t len, const aks_ctr_tar_opts *o,
                          char **out, size_t *out_len)
{
	*out = NULL;
	*out_len = 0;
	char *buf = NULL;
	size_t blen = 0;
	FILE *f = open_memstream(&buf, &blen);
	if (!f)
		return -1;
	struct archive *a = archive_write_new();
	struct archive_entry *e = a ? archive_entry_new() : NULL;
	int ok = e && archive_write_set_format_pax_restricted(a) == ARCHIVE_OK &&
	         archive_write_set_bytes_in_last_block(a, 1) == ARCHIVE_OK &&
	         archive_write_open(a, f, NULL, tar_write, NULL) == ARCHIVE_OK;
	time_t now = time(NULL);
	if (ok && o->existing != SIZE_MAX)
		ok = write_parents(a, e, rel, o, now);
	if (ok) {
		set_entry(e, rel, o->dir ? AE_IFDIR : AE_IFREG,
		          o->mode  ? o->mode
		          : o->dir ? 0755
		                   : 0644,
		          o, now);
		if (!o->dir)
			archive_entry_set_size(e, (la_int64_t)len);
		ok = archive_write_header(a, e) == ARCHIVE_OK;
		const char *p = data;
		size_t left = o->dir ? 0 : len;
		while (ok && left) {
			la_ssize_t w = archive_write_data(a, p, left);
			if (w <= 0)
				ok = 0;
			else
				p += w, left -= (size_t)w;
		}
		ok = ok && archive_write_close(a) == ARCHIVE_OK;
	}
	if (e)
		archive_entry_free(e);
	if (a)
		archive_write_free(a);
	ok = fclose(f) == 0 && ok; /* sets buf and blen */
	if (!ok) {
		free(buf);
		return -1;
	}
	*out = buf;
	*out_len = blen;
	return 0;
}

/* n zero bytes into the file: the holes of a sparse file (bounded by the host's file limit,
 * whatever size the tar claims). */
static int write_zeros(const aks_host_api *host, aks_result *out, uint64_t n, aks_error **err)
{
	static const char zeros[4096];
	while (n) {
		size_t k = n < sizeof(zeros) ? (size_t)n : sizeof(zeros);
		int rc = host->result_write(out, AKS_STREAM_FILE, zeros, k, err);
		if (rc != AKS_OK)
			return rc;
		n -= k;
	}
	return AKS_OK;
}

int aks_ctr_tar_read_file(const aks_host_api *host, struct archive *a, const char *path,
                          aks_result *out, aks_error **err)
{
	struct archive_entry *e;
	for (;;) {
		int h = archive_read_next_header(a, &e);
		if (h == ARCHIVE_EOF)
			return host->error_set(err, AKS_ENOTFOUND,
			                       "file '%s' not found in the sandbox", path);
		if (h != ARCHIVE_OK && h != ARCHIVE_WARN)
			return AKS_CTR_BADTAR;
		if (archive_entry_filetype(e) == AE_IFREG)
			break;
	}
	int rc = host->result_add_file(out, path, "application/octet-stream");
	if (rc != AKS_OK)
		return host->error_set(err, rc, "cannot add file '%s' to the result", path);
	/* Blocks come with their offset in the file: a sparse file's (GNU or pax sparse, which
	 * anything in the sandbox can write) skip its holes, which are zeros; at the end the
	 * offset is the file's size, past a trailing hole. Going back is a broken tar. */
	la_int64_t pos = 0;
	for (;;) {
		const void *blk;
		size_t blen = 0;
		la_int64_t off = pos;
		int d = archive_read_data_block(a, &blk, &blen, &off);
		if (d != ARCHIVE_OK && d != ARCHIVE_WARN && d != ARCHIVE_EOF)
			return AKS_CTR_BADTAR;
		if (off < pos || (la_int64_t)blen > INT64_MAX - off)
			return AKS_CTR_BADTAR;
		/* past the host's file limit: AKS_ELIMIT with *err set */
		if (off > pos &&
		    (rc = write_zeros(host, out, (uint64_t)(off - pos), err)) != AKS_OK)
			return rc;
		if (d == ARCHIVE_EOF)
			return AKS_OK;
		if (blen &&
		    (rc = host->result_write(out, AKS_STREAM_FILE, blk, blen, err)) != AKS_OK)
			return rc;
		pos = off + (la_int64_t)blen;
	}
}
