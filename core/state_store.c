/*
 * core/state_store.c - the file-backed state store: opening it, and the locked
 * read-modify-write transactions and snapshots on one namespace's document.
 *
 * Per namespace, under <dir>/ns/ (see docs/state-store.md):
 *   <path>.lock  the lock file, locked with flock(2) (state_file.c says why); it is never
 *                replaced, only removed by the holder of its lock when the namespace empties;
 *   <path>.json  the document, only ever replaced whole by rename(2);
 *   <path>.tmp   the next document while it is being written (only the lock holder writes it,
 *                so one fixed name suffices and a crashed writer's leftover is overwritten).
 * <path> comes from aks__store_ns_path(): long names become chunk directories "<chunk>+/".
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "state_file.h"
#include "state_store.h"

/* At most ceil(3 * AKS_STORE_NS_MAX / AKS_STORE_NS_CHUNK) path components. */
#define MAX_LEVELS (((3 * AKS_STORE_NS_MAX) + AKS_STORE_NS_CHUNK - 1) / AKS_STORE_NS_CHUNK)
/* Lock files only vanish when a namespace empties; give up after this many in a row. */
#define MAX_LOCK_ATTEMPTS 10000

struct aks_state_store {
	char *dir;
	int dirfd;
	int nsfd; /* <dir>/ns */
	size_t max_doc;
	/* Threads inside a call on this handle, to refuse nested calls (they would deadlock). */
	pthread_mutex_t mu;
	pthread_t *active;
	size_t n_active, cap_active;
};

/* ---- opening ---- */

int aks__store_default_dir(char **out, aks_error **err)
{
	return aks__store_default_dir_as(geteuid() == 0, out, err);
}

int aks__store_default_dir_as(bool root, char **out, aks_error **err)
{
	*out = NULL;
	const char *env = getenv("AKS_STATE_DIR");
	const char *xdg = getenv("XDG_STATE_HOME");
	const char *home = getenv("HOME");
	int n;
	if (env && *env) {
		n = asprintf(out, "%s", env);
	} else if (root) {
		n = asprintf(out, "/var/lib/aksandbox");
	} else if (xdg && xdg[0] == '/') {
		/* The XDG base directory spec: relative values are invalid and ignored. */
		n = asprintf(out, "%s/aksandbox", xdg);
	} else {
		struct passwd pw, *pwp = NULL;
		char buf[4096];
		if ((!home || home[0] != '/') &&
		    getpwuid_r(geteuid(), &pw, buf, sizeof(buf), &pwp) == 0 && pwp && pwp->pw_dir &&
		    pwp->pw_dir[0] == '/')
			home = pwp->pw_dir;
		if (!home || home[0] != '/')
			return aks__error_set(err, AKS_ECONFIG,
			                      "state store: no state directory: set AKS_STATE_DIR, "
			                      "XDG_STATE_HOME or HOME");
		n = asprintf(out, "%s/.local/state/aksandbox", home);
	}
	if (n < 0) {
		*out = NULL;
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	return AKS_OK;
}

int aks__store_open(const char *dir, aks_state_store **out, aks_error **err)
{
	*out = NULL;
	if (dir && !*dir)
		return aks__error_set(err, AKS_EINVAL, "state store: the directory name is empty");
	struct aks_state_store *s = calloc(1, sizeof(*s));
	if (!s)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	s->dirfd = s->nsfd = -1;
	s->max_doc = AKS_STORE_MAX_DOC_SIZE;
	int rc = AKS_OK;
	if (dir && !(s->dir = strdup(dir)))
		rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
	else if (!dir)
		rc = aks__store_default_dir(&s->dir, err);
	if (rc < 0) {
		free(s);
		return rc;
	}
	if (pthread_mutex_init(&s->mu, NULL) != 0) {
		free(s->dir);
		free(s);
		return aks__error_set(err, AKS_ENOMEM, "state store: cannot create a mutex");
	}
	int e = -aks__state_mkdirs(s->dir);
	if (e) {
		aks__error_set(err, AKS_EIO, "state store: cannot create the directory %s: %s",
		               s->dir, strerror(e));
		aks__store_close(s);
		return AKS_EIO;
	}
	s->dirfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->dirfd < 0) {
		aks__error_set(err, AKS_EIO, "state store: cannot open the directory %s: %s",
		               s->dir, strerror(errno));
		aks__store_close(s);
		return AKS_EIO;
	}
	if (mkdirat(s->dirfd, "ns", 0700) < 0 && errno != EEXIST)
		e = errno;
	if (!e) {
		s->nsfd = openat(s->dirfd, "ns", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (s->nsfd < 0)
			e = errno;
	}
	if (e) {
		aks__error_set(err, AKS_EIO, "state store: cannot create or open %s/ns: %s", s->dir,
		               strerror(e));
		aks__store_close(s);
		return AKS_EIO;
	}
	*out = s;
	return AKS_OK;
}

void aks__store_close(aks_state_store *s)
{
	if (!s)
		return;
	if (s->nsfd >= 0)
		close(s->nsfd);
	if (s->dirfd >= 0)
		close(s->dirfd);
	pthread_mutex_destroy(&s->mu);
	free(s->active);
	free(s->dir);
	free(s);
}

const char *aks__store_dir(const aks_state_store *s)
{
	return s->dir;
}

int aks__store_ns_fd(const aks_state_store *s)
{
	return s->nsfd;
}

void aks__store_set_max_doc_size(aks_state_store *s, size_t bytes)
{
	/* json-c measures what it parses in int. */
	if (bytes > 0)
		s->max_doc = bytes < INT32_MAX ? bytes : INT32_MAX - 1;
}

/* ---- refusing nested calls ---- */

static int enter(aks_state_store *s, aks_error **err)
{
	pthread_t self = pthread_self();
	int rc = AKS_OK;
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->n_active; i++) {
		if (pthread_equal(s->active[i], self)) {
			rc = aks__error_set(
			    err, AKS_EINVAL,
			    "state store: a call from inside a transaction would wait "
			    "for a lock its own thread holds");
			goto out;
		}
	}
	if (s->n_active == s->cap_active) {
		size_t cap = s->cap_active ? s->cap_active * 2 : 8;
		pthread_t *p = realloc(s->active, cap * sizeof(*p));
		if (!p) {
			rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
			goto out;
		}
		s->active = p;
		s->cap_active = cap;
	}
	s->active[s->n_active++] = self;
out:
	pthread_mutex_unlock(&s->mu);
	return rc;
}

static void leave(aks_state_store *s)
{
	pthread_t self = pthread_self();
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->n_active; i++) {
		if (pthread_equal(s->active[i], self)) {
			s->active[i] = s->active[--s->n_active];
			break;
		}
	}
	pthread_mutex_unlock(&s->mu);
}

/* ---- one namespace's files ---- */

typedef struct ns_files {
	char *rel;              /* path under ns/ without suffix, for messages */
	char *comp[MAX_LEVELS]; /* its components; the last one names the files */
	int ncomp;
	int fds[MAX_LEVELS];    /* fds[i]: the directory holding comp[i]; fds[0] is nsfd */
	char *lock, *doc, *tmp; /* file names inside fds[ncomp - 1] */
	int lockfd;
} ns_files;

static void files_close_dirs(ns_files *f)
{
	for (int i = 1; i < f->ncomp; i++) {
		if (f->fds[i] >= 0)
			close(f->fds[i]);
		f->fds[i] = -1;
	}
}

static void files_free(ns_files *f)
{
	if (f->lockfd >= 0)
		close(f->lockfd); /* releases the lock */
	f->lockfd = -1;
	files_close_dirs(f);
	for (int i = 0; i < f->ncomp; i++)
		free(f->comp[i]);
	free(f->rel);
	free(f->lock);
	free(f->doc);
	free(f->tmp);
}

static int files_init(aks_state_store *s, const char *ns, ns_files *f, aks_error **err)
{
	memset(f, 0, sizeof(*f));
	f->lockfd = -1;
	for (int i = 0; i < MAX_LEVELS; i++)
		f->fds[i] = -1;
	int rc = aks__store_ns_check(ns, err);
	if (rc < 0)
		return rc;
	f->rel = aks__store_ns_path(ns);
	if (!f->rel)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	for (const char *p = f->rel;;) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);
		if (f->ncomp == MAX_LEVELS || !(f->comp[f->ncomp++] = strndup(p, n)))
			return aks__error_set(err, AKS_ENOMEM, "out of memory");
		if (!slash)
			break;
		p = slash + 1;
	}
	f->fds[0] = s->nsfd;
	const char *leaf = f->comp[f->ncomp - 1];
	if (asprintf(&f->lock, "%s.lock", leaf) < 0 || asprintf(&f->doc, "%s.json", leaf) < 0 ||
	    asprintf(&f->tmp, "%s.tmp", leaf) < 0)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	return AKS_OK;
}

static int leaf_fd(const ns_files *f)
{
	return f->fds[f->ncomp - 1];
}

static int io_error(aks_state_store *s, const ns_files *f, const char *what, const char *suffix,
                    int e, aks_error **err)
{
	return aks__error_set(err, AKS_EIO, "state store: %s %s/ns/%s%s: %s", what, s->dir, f->rel,
	                      suffix, strerror(e));
}

/*
 * Opens the chunk directories down to the namespace's files. `create` makes missing ones;
 * otherwise a missing one sets *absent. Returns 0 or -errno.
 */
static int walk(ns_files *f, bool create, bool *absent)
{
	*absent = false;
	for (int i = 1; i < f->ncomp; i++) {
		const char *name = f->comp[i - 1];
		int fd;
		while ((fd = openat(f->fds[i - 1], name,
		                    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
			if (errno != ENOENT)
				return -errno;
			if (!create) {
				*absent = true;
				return 0;
			}
			if (mkdirat(f->fds[i - 1], name, 0700) < 0 && errno != EEXIST)
				return -errno;
		}
		f->fds[i] = fd;
	}
	return 0;
}

/*
 * Takes the namespace's lock. Readers never create anything: no lock file means no document
 * (a document is only ever written under its lock file, and the lock file is removed after
 * it), and *absent is set. After the lock is granted the lock file must still be the one at
 * the path: if the namespace emptied meanwhile, its holder removed the file, and a newcomer
 * may already be locking a new one, so start again.
 */
static int lock_ns(aks_state_store *s, ns_files *f, bool exclusive, bool *absent, aks_error **err)
{
	for (int attempt = 0; attempt < MAX_LOCK_ATTEMPTS; attempt++) {
		files_close_dirs(f);
		int e = -walk(f, exclusive, absent);
		if (e)
			return io_error(s, f, "cannot open the directory of", "", e, err);
		if (*absent)
			return AKS_OK;
		int flags = (exclusive ? O_RDWR | O_CREAT : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW;
		int fd = openat(leaf_fd(f), f->lock, flags, 0600);
		if (fd < 0 && errno == ENOENT && !exclusive) {
			*absent = true;
			return AKS_OK;
		}
		if (fd < 0 && errno == ENOENT && f->ncomp > 1)
			continue; /* an emptied namespace's chunk directory went away under us */
		if (fd < 0)
			return io_error(s, f, "cannot open", ".lock", errno, err);
		e = -aks__state_lock(fd, exclusive);
		if (e) {
			close(fd);
			return io_error(s, f, "cannot lock", ".lock", e, err);
		}
		struct stat held, now;
		if (fstat(fd, &held) < 0) {
			e = errno;
			close(fd);
			return io_error(s, f, "cannot stat", ".lock", e, err);
		}
		if (fstatat(leaf_fd(f), f->lock, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
		    now.st_dev == held.st_dev && now.st_ino == held.st_ino) {
			f->lockfd = fd;
			return AKS_OK;
		}
		close(fd);
	}
	return aks__error_set(err, AKS_EIO,
	                      "state store: the lock file %s/ns/%s.lock kept "
	                      "vanishing",
	                      s->dir, f->rel);
}

/* The document under the lock: `{}` if there is none. */
static int load_doc(aks_state_store *s, ns_files *f, json_object **out, aks_error **err)
{
	*out = NULL;
	int fd = openat(leaf_fd(f), f->doc, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 && errno == ENOENT) {
		*out = json_object_new_object();
		return *out ? AKS_OK : aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	if (fd < 0)
		return io_error(s, f, "cannot open", ".json", errno, err);
	char *data = NULL;
	size_t len = 0;
	bool over = false;
	int e = -aks__state_read_all(fd, s->max_doc, &data, &len, &over);
	close(fd);
	if (e == ENOMEM)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	if (e)
		return io_error(s, f, "cannot read", ".json", e, err);
	if (over)
		return aks__error_set(
		    err, AKS_ELIMIT,
		    "state store: %s/ns/%s.json is larger than the %zu-byte limit "
		    "on a document",
		    s->dir, f->rel, s->max_doc);
	json_tokener *tok = json_tokener_new_ex(AKS_STORE_MAX_DEPTH);
	if (!tok) {
		free(data);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	json_object *doc = json_tokener_parse_ex(tok, data, (int)len);
	enum json_tokener_error jerr = json_tokener_get_error(tok);
	size_t end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	const char *why = NULL;
	if (jerr == json_tokener_continue || (jerr == json_tokener_success && !doc))
		why = "it ends early";
	else if (jerr != json_tokener_success)
		why = json_tokener_error_desc(jerr);
	else if (!json_object_is_type(doc, json_type_object))
		why = "it is not a JSON object";
	for (size_t i = end; !why && i < len; i++) {
		char c = data[i]; /* not strchr: it would find a NUL byte */
		if (c != ' ' && c != '\t' && c != '\r' && c != '\n')
			why = "there is more after the document";
	}
	free(data);
	if (why) {
		json_object_put(doc);
		/* Never discard state silently: the file stays for a person to look at. */
		return aks__error_set(
		    err, AKS_EIO,
		    "state store: %s/ns/%s.json is corrupt (%s); it was left as it "
		    "is: move it aside to start that namespace afresh",
		    s->dir, f->rel, why);
	}
	*out = doc;
	return AKS_OK;
}

/* Serializes doc, refusing what is over the size bound or would not parse back. */
static int serialize(aks_state_store *s, ns_files *f, json_object *doc, const char **text,
                     size_t *len, aks_error **err)
{
	*text = json_object_to_json_string_length(
	    doc, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, len);
	if (!*text)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	if (*len + 1 > s->max_doc || *len > INT32_MAX)
		return aks__error_set(err, AKS_ELIMIT,
		                      "state store: the document for %s/ns/%s.json would be %zu "
		                      "bytes, over the %zu-byte limit; nothing was written",
		                      s->dir, f->rel, *len + 1, s->max_doc);
	/* Read it back with the reader's own settings: what cannot be loaded is not written. */
	json_tokener *tok = json_tokener_new_ex(AKS_STORE_MAX_DEPTH);
	if (!tok)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	json_object *back = json_tokener_parse_ex(tok, *text, (int)*len);
	enum json_tokener_error jerr = json_tokener_get_error(tok);
	json_tokener_free(tok);
	json_object_put(back);
	if (jerr == json_tokener_error_depth)
		return aks__error_set(
		    err, AKS_ELIMIT,
		    "state store: the document for %s/ns/%s.json nests deeper than "
		    "%d levels; nothing was written",
		    s->dir, f->rel, AKS_STORE_MAX_DEPTH);
	if (jerr != json_tokener_success || !back)
		return aks__error_set(err, AKS_EINVAL,
		                      "state store: the document for %s/ns/%s.json would not read "
		                      "back (%s); nothing was written",
		                      s->dir, f->rel,
		                      jerr == json_tokener_success ? "incomplete"
		                                                   : json_tokener_error_desc(jerr));
	return AKS_OK;
}

/* temp file, fsync, rename over the document, fsync of the directory. */
static int commit_doc(aks_state_store *s, ns_files *f, json_object *doc, aks_error **err)
{
	const char *text;
	size_t len;
	int rc = serialize(s, f, doc, &text, &len, err);
	if (rc < 0)
		return rc;
	int dfd = leaf_fd(f);
	if (unlinkat(dfd, f->tmp, 0) < 0 && errno != ENOENT)
		return io_error(s, f, "cannot remove the stale", ".tmp", errno, err);
	int fd = openat(dfd, f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return io_error(s, f, "cannot create", ".tmp", errno, err);
	int e = -aks__state_write_all(fd, text, len);
	if (!e)
		e = -aks__state_write_all(fd, "\n", 1);
	if (!e)
		e = -aks__state_fsync(fd);
	if (close(fd) < 0 && !e && errno != EINTR)
		e = errno;
	if (e) {
		unlinkat(dfd, f->tmp, 0);
		return io_error(s, f, "cannot write", ".tmp", e, err);
	}
	if (renameat(dfd, f->tmp, dfd, f->doc) < 0) {
		e = errno;
		unlinkat(dfd, f->tmp, 0);
		return io_error(s, f, "cannot rename the new document onto", ".json", e, err);
	}
	/* Until the directory is synced, a power cut could bring the old document back. */
	e = -aks__state_fsync(dfd);
	if (e)
		return io_error(s, f, "wrote, but could not sync the directory of", ".json", e,
		                err);
	return AKS_OK;
}

/* An emptied namespace leaves nothing behind: the document, then (still holding it) the lock
 * file, then any chunk directories it was the last user of. */
static int remove_doc(aks_state_store *s, ns_files *f, aks_error **err)
{
	int dfd = leaf_fd(f);
	if (unlinkat(dfd, f->doc, 0) < 0 && errno != ENOENT)
		return io_error(s, f, "cannot remove", ".json", errno, err);
	if (unlinkat(dfd, f->tmp, 0) < 0 && errno != ENOENT)
		return io_error(s, f, "cannot remove", ".tmp", errno, err);
	int e = -aks__state_fsync(dfd);
	if (e)
		return io_error(s, f, "removed, but could not sync the directory of", ".json", e,
		                err);
	/* Waiters on this lock file will see it gone and start again (lock_ns). */
	if (unlinkat(dfd, f->lock, 0) < 0 && errno != ENOENT)
		return AKS_OK; /* harmless: a lock file without a document is an empty namespace */
	close(f->lockfd);
	f->lockfd = -1;
	/* Fails harmlessly (ENOTEMPTY) while another namespace or a newcomer uses them. */
	for (int i = f->ncomp - 1; i >= 1; i--) {
		close(f->fds[i]);
		f->fds[i] = -1;
		if (unlinkat(f->fds[i - 1], f->comp[i - 1], AT_REMOVEDIR) < 0)
			break;
	}
	return AKS_OK;
}

int aks__store_update(aks_state_store *s, const char *ns, aks_store_txn_fn fn, void *ctx,
                      aks_error **err)
{
	if (!s || !fn)
		return aks__error_set(err, AKS_EINVAL, "state store: no store or no function");
	ns_files f;
	int rc = files_init(s, ns, &f, err);
	if (rc < 0)
		goto out_free;
	if ((rc = enter(s, err)) < 0)
		goto out_free;
	bool absent = false;
	json_object *doc = NULL;
	rc = lock_ns(s, &f, true, &absent, err);
	if (rc == AKS_OK)
		rc = load_doc(s, &f, &doc, err);
	if (rc == AKS_OK) {
		bool changed = false;
		rc = fn(doc, &changed, ctx, err);
		if (rc == AKS_OK && changed) {
			if (json_object_object_length(doc) == 0)
				rc = remove_doc(s, &f, err);
			else
				rc = commit_doc(s, &f, doc, err);
		}
	}
	json_object_put(doc);
	files_free(&f); /* releases the lock */
	leave(s);
	return rc;
out_free:
	files_free(&f);
	return rc;
}

int aks__store_read(aks_state_store *s, const char *ns, json_object **out, aks_error **err)
{
	*out = NULL;
	if (!s)
		return aks__error_set(err, AKS_EINVAL, "state store: no store");
	ns_files f;
	int rc = files_init(s, ns, &f, err);
	if (rc < 0)
		goto out_free;
	if ((rc = enter(s, err)) < 0)
		goto out_free;
	bool absent = false;
	rc = lock_ns(s, &f, false, &absent, err);
	if (rc == AKS_OK && absent) {
		*out = json_object_new_object();
		if (!*out)
			rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
	} else if (rc == AKS_OK) {
		rc = load_doc(s, &f, out, err);
	}
	files_free(&f);
	leave(s);
	return rc;
out_free:
	files_free(&f);
	return rc;
}
