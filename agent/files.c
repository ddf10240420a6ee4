/*
 * agent/files.c - file transfers: WRITE (to a temporary file beside the target, fsync'd,
 * size and SHA-256 checked, then renamed over it) and READ (chunked under the request's
 * credit, ending with the size and SHA-256 of what was sent).
 */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Creates the parent directories of path (like mkdir -p of dirname). */
static int make_parents(const char *path)
{
	char *copy = strdup(path);
	if (!copy)
		return -1;
	for (char *s = strchr(copy + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		if (mkdir(copy, 0755) < 0 && errno != EEXIST) {
			int e = errno;
			free(copy);
			errno = e;
			return -1;
		}
		*s = '/';
	}
	free(copy);
	return 0;
}

static char *temp_beside(const char *path)
{
	const char *slash = strrchr(path, '/');
	size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
	char *tmp = malloc(dirlen + sizeof(".aks-upload-XXXXXX"));
	if (tmp) {
		memcpy(tmp, path, dirlen);
		strcpy(tmp + dirlen, ".aks-upload-XXXXXX");
	}
	return tmp;
}

/* Whether the resolved path real is base or inside it (base resolved too). */
static bool inside(const char *real, const char *base)
{
	size_t n = strlen(base);
	if (n > 1 && base[n - 1] == '/')
		n--;
	return strncmp(real, base, n) == 0 && (real[n] == '\0' || real[n] == '/' || n == 1);
}

/* The resolved path of an open file, from /proc/self/fd (no race with a swapped symlink),
 * malloc'd, or NULL. */
static char *fd_path(int fd)
{
	char link[64];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	return realpath(link, NULL);
}

/* The nearest existing ancestor of path's directory, resolved: where a WRITE would create
 * the missing parents. Malloc'd, or NULL. */
static char *existing_parent(const char *path)
{
	char *d = strdup(path);
	for (char *slash; d && (slash = strrchr(d, '/'));) {
		*slash = '\0';
		char *real = realpath(*d ? d : "/", NULL);
		if (real || errno != ENOENT) {
			free(d);
			return real;
		}
	}
	free(d);
	return realpath(".", NULL);
}

/* With BENEATH (the host's workspace), a path that resolves outside it is refused: through
 * a symlink, as a `..` the host did not see. 0 fine, else the error was sent. */
static int check_beneath(conn *c, const aks_agent_frame *f, const char *path, int fd,
                         const char *beneath)
{
	if (!beneath)
		return 0;
	char *base = realpath(beneath, NULL);
	char *real = fd >= 0 ? fd_path(fd) : existing_parent(path);
	bool ok = base && real && inside(real, base);
	free(base);
	free(real);
	if (ok)
		return 0;
	conn_send_error(c, f->id, f->type, AKS_AGENT_E_ESCAPES, "%s resolves outside %s", path,
	                beneath);
	return -1;
}

static req *new_req(conn *c, const aks_agent_frame *f, int kind)
{
	if (f->id == 0) {
		conn_send_error(c, f->id, f->type, AKS_AGENT_E_BAD_PAYLOAD,
		                "request id 0 is reserved");
		return NULL;
	}
	if (conn_find(c, f->id)) {
		conn_send_error(c, f->id, f->type, AKS_AGENT_E_DUPLICATE_ID,
		                "request %u is still running", f->id);
		return NULL;
	}
	req *r = conn_new_req(c);
	if (!r) {
		conn_send_error(c, f->id, f->type, AKS_AGENT_E_LIMIT,
		                "more than %d requests at once", AGENT_MAX_REQUESTS);
		return NULL;
	}
	r->kind = kind;
	r->id = f->id;
	r->credit = c->window;
	return r;
}

static uint32_t errno_code(int e)
{
	return e == ENOENT || e == ENOTDIR ? AKS_AGENT_E_NOT_FOUND : AKS_AGENT_E_IO;
}

void files_write_open(conn *c, const aks_agent_frame *f)
{
	aks_agent_tlv it;
	aks__agent_tlv_init(&it, f);
	uint16_t tag;
	const uint8_t *v;
	uint32_t n;
	int rc;
	char *path = NULL, *beneath = NULL;
	bool have_size = false, have_sha = false;
	uint64_t size = 0;
	uint8_t sha[AKS_SHA256_LEN];
	uint32_t mode = 0644;
	while ((rc = aks__agent_tlv_next(&it, &tag, &v, &n)) > 0) {
		if (tag == AKS_AGENT_T_PATH && n > 0 && !memchr(v, 0, n)) {
			free(path);
			path = strndup((const char *)v, n);
		} else if (tag == AKS_AGENT_T_SIZE && n == 8) {
			size = aks__agent_get64(v);
			have_size = true;
		} else if (tag == AKS_AGENT_T_SHA256 && n == AKS_SHA256_LEN) {
			memcpy(sha, v, n);
			have_sha = true;
		} else if (tag == AKS_AGENT_T_MODE && n == 4) {
			mode = aks__agent_get32(v) & 07777;
		} else if (tag == AKS_AGENT_T_BENEATH && n > 0 && !memchr(v, 0, n)) {
			free(beneath);
			beneath = strndup((const char *)v, n);
		}
	}
	if (rc < 0 || !path || !have_size || !have_sha) {
		conn_send_error(c, f->id, f->type, AKS_AGENT_E_BAD_PAYLOAD,
		                "WRITE needs PATH, SIZE (8 bytes) and SHA256 (32 bytes)");
		free(path);
		free(beneath);
		return;
	}
	/* where the parents would be made, before anything is made */
	int out = check_beneath(c, f, path, -1, beneath);
	req *r = out ? NULL : new_req(c, f, REQ_WRITE);
	if (!r) {
		free(path);
		free(beneath);
		return;
	}
	r->path = path;
	r->size = size;
	r->mode = mode;
	memcpy(r->sha, sha, sizeof(sha));
	aks__sha256_init(&r->hash);
	r->tmp = temp_beside(path);
	if (!r->tmp || make_parents(path) < 0 || (r->fd = mkostemp(r->tmp, O_CLOEXEC)) < 0) {
		int e = errno;
		conn_send_error(c, f->id, f->type, errno_code(e), "cannot write %s: %s", path,
		                strerror(e));
		free(r->tmp);
		r->tmp = NULL; /* nothing was created */
		agent_free_req(r);
		free(beneath);
		return;
	}
	agent_track_fd(r->fd, false);
	/* and where the file really is, now that it exists (a parent swapped meanwhile) */
	if (beneath && check_beneath(c, f, path, r->fd, beneath) < 0) {
		close(r->fd);
		r->fd = -1;
		unlink(r->tmp);
		agent_free_req(r);
	}
	free(beneath);
}

static void write_fail(conn *c, req *r, uint32_t code, const char *what, int e)
{
	if (e)
		conn_send_error(c, r->id, AKS_AGENT_WRITE_DATA, code, "%s %s: %s", what, r->path,
		                strerror(e));
	else
		conn_send_error(c, r->id, AKS_AGENT_WRITE_DATA, code, "%s %s", what, r->path);
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
	if (r->tmp)
		unlink(r->tmp);
	/* The error ends the request: its remaining data frames find no request and are
	 * dropped quietly. */
	agent_free_req(r);
}

void files_write_data(conn *c, req *r, const aks_agent_frame *f)
{
	if (f->len > r->size - r->done) {
		write_fail(c, r, AKS_AGENT_E_SIZE_MISMATCH, "more bytes than announced for", 0);
		return;
	}
	const uint8_t *p = f->payload;
	size_t left = f->len;
	while (left > 0) {
		ssize_t w = write(r->fd, p, left);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			write_fail(c, r, AKS_AGENT_E_IO, "cannot write", errno);
			return;
		}
		p += w;
		left -= (size_t)w;
	}
	aks__sha256_update(&r->hash, f->payload, f->len);
	r->done += f->len;
	if (!(f->flags & AKS_AGENT_FLAG_END))
		return;
	uint8_t got[AKS_SHA256_LEN];
	aks__sha256_final(&r->hash, got);
	if (r->done != r->size) {
		write_fail(c, r, AKS_AGENT_E_SIZE_MISMATCH, "fewer bytes than announced for", 0);
		return;
	}
	if (memcmp(got, r->sha, sizeof(got)) != 0) {
		write_fail(c, r, AKS_AGENT_E_HASH_MISMATCH,
		           "the bytes received do not match the SHA-256 announced for", 0);
		return;
	}
	if (fchmod(r->fd, r->mode) < 0 || fsync(r->fd) < 0) {
		write_fail(c, r, AKS_AGENT_E_IO, "cannot sync", errno);
		return;
	}
	int fd = r->fd;
	r->fd = -1;
	if (close(fd) < 0) {
		write_fail(c, r, AKS_AGENT_E_IO, "cannot close", errno);
		return;
	}
	if (rename(r->tmp, r->path) < 0) {
		write_fail(c, r, AKS_AGENT_E_IO, "cannot rename into", errno);
		return;
	}
	/* The rename is durable once the directory is synced. */
	char *dir = strdup(r->path);
	char *slash = dir ? strrchr(dir, '/') : NULL;
	int dfd = -1;
	if (slash) {
		slash[slash == dir ? 1 : 0] = '\0';
		dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	} else if (dir) {
		dfd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	free(dir);
	free(r->tmp);
	r->tmp = NULL; /* renamed: nothing to clean up */
	size_t s = aks__agent_frame_begin(&c->out, AKS_AGENT_WRITE_OK, AKS_AGENT_FLAG_END, r->id);
	aks__agent_put_u64(&c->out, AKS_AGENT_T_SIZE, r->done);
	aks__agent_put_bytes(&c->out, AKS_AGENT_T_SHA256, got, sizeof(got));
	aks__agent_frame_end(&c->out, s);
	agent_free_req(r);
}

void files_read_open(conn *c, const aks_agent_frame *f)
{
	aks_agent_tlv it;
	aks__agent_tlv_init(&it, f);
	uint16_t tag;
	const uint8_t *v;
	uint32_t n;
	int rc;
	char *path = NULL, *beneath = NULL;
	uint64_t max = UINT64_MAX;
	while ((rc = aks__agent_tlv_next(&it, &tag, &v, &n)) > 0) {
		if (tag == AKS_AGENT_T_PATH && n > 0 && !memchr(v, 0, n)) {
			free(path);
			path = strndup((const char *)v, n);
		} else if (tag == AKS_AGENT_T_MAX_SIZE && n == 8) {
			max = aks__agent_get64(v);
		} else if (tag == AKS_AGENT_T_BENEATH && n > 0 && !memchr(v, 0, n)) {
			free(beneath);
			beneath = strndup((const char *)v, n);
		}
	}
	if (rc < 0 || !path) {
		conn_send_error(c, f->id, f->type, AKS_AGENT_E_BAD_PAYLOAD, "READ needs PATH");
		free(path);
		free(beneath);
		return;
	}
	/* O_NONBLOCK: opening a FIFO for reading waits for a writer, which would stop this
	 * one-threaded agent and every request it serves; what is not a regular file is refused
	 * before it is read, and a regular file reads the same either way. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		int e = errno;
		conn_send_error(c, f->id, f->type, errno_code(e), "cannot read %s: %s", path,
		                strerror(e));
	} else if (!S_ISREG(st.st_mode)) {
		conn_send_error(c, f->id, f->type, AKS_AGENT_E_NOT_FOUND,
		                "cannot read %s: not a regular file", path);
	} else if (check_beneath(c, f, path, fd, beneath) < 0) {
		/* refused: the error was sent */
	} else if ((uint64_t)st.st_size > max) {
		conn_send_error(c, f->id, f->type, AKS_AGENT_E_LIMIT,
		                "%s is %llu bytes, more than the %llu allowed", path,
		                (unsigned long long)st.st_size, (unsigned long long)max);
	} else {
		req *r = new_req(c, f, REQ_READ);
		if (r) {
			r->fd = agent_track_fd(fd, false);
			r->path = path;
			r->size = (uint64_t)st.st_size;
			aks__sha256_init(&r->hash);
			size_t s = aks__agent_frame_begin(&c->out, AKS_AGENT_READ_INFO, 0, r->id);
			aks__agent_put_u64(&c->out, AKS_AGENT_T_SIZE, r->size);
			aks__agent_put_u32(&c->out, AKS_AGENT_T_MODE, st.st_mode & 07777);
			aks__agent_frame_end(&c->out, s);
			free(beneath);
			return;
		}
	}
	if (fd >= 0)
		close(fd);
	free(path);
	free(beneath);
}

bool files_read_step(conn *c, req *r)
{
	if (r->credit <= 0 || aks__agent_buf_pending(&c->out) >= AGENT_OUT_SOFT)
		return false;
	static uint8_t chunk[AKS_AGENT_CHUNK];
	size_t want = r->credit < (int64_t)sizeof(chunk) ? (size_t)r->credit : sizeof(chunk);
	ssize_t n = read(r->fd, chunk, want);
	if (n < 0 && errno == EINTR)
		return true;
	if (n < 0) {
		conn_send_error(c, r->id, AKS_AGENT_READ, AKS_AGENT_E_IO, "cannot read %s: %s",
		                r->path, strerror(errno));
		agent_free_req(r);
		return true;
	}
	if (n > 0) {
		if (r->done + (uint64_t)n > r->size) {
			conn_send_error(c, r->id, AKS_AGENT_READ, AKS_AGENT_E_SIZE_MISMATCH,
			                "%s grew while it was read", r->path);
			agent_free_req(r);
			return true;
		}
		aks__sha256_update(&r->hash, chunk, (size_t)n);
		r->done += (uint64_t)n;
		r->credit -= n;
		aks__agent_frame_data(&c->out, AKS_AGENT_READ_DATA, 0, r->id, chunk, (size_t)n);
		return true;
	}
	if (r->done != r->size) {
		conn_send_error(c, r->id, AKS_AGENT_READ, AKS_AGENT_E_SIZE_MISMATCH,
		                "%s shrank while it was read", r->path);
	} else {
		uint8_t got[AKS_SHA256_LEN];
		aks__sha256_final(&r->hash, got);
		size_t s =
		    aks__agent_frame_begin(&c->out, AKS_AGENT_READ_END, AKS_AGENT_FLAG_END, r->id);
		aks__agent_put_u64(&c->out, AKS_AGENT_T_SIZE, r->done);
		aks__agent_put_bytes(&c->out, AKS_AGENT_T_SHA256, got, sizeof(got));
		aks__agent_frame_end(&c->out, s);
	}
	agent_free_req(r);
	return true;
}
