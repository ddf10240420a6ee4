/*
 * core/store/file_store.c - the built-in file store: records as files under <dir>/ns/, each
 * changed only under its own lock and only ever replaced whole (docs/state-store.md).
 *
 * A record (ns, key) lives at ns/<N>.d/<K>, where <N> and <K> are the names encoded by
 * aks__store_name_path() (long ones become chunk directories "<chunk>+/"; '.' never occurs
 * in an encoding, so "<N>.d" cannot be mistaken for anything else). Beside <K>:
 *   <K>.json   the value, only ever replaced whole by rename(2), so a reader needs no lock;
 *   <K>.lock   the update lock (flock(2), see file_io.c), only while an update holds it;
 *   <K>.tmp    the next value while an update writes it;
 *   <K>.mutex  the named lock of the store contract (the per-session lock).
 * Lock files are removed by their holder on release; a waiter that then gets the lock on the
 * removed file sees that and starts again on the current one. Directories left empty are
 * removed, so a conversation with nothing in it takes no space.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugin/host_api.h"
#include "store/file_io.h"
#include "store/store.h"

/* Lock files vanish whenever their holder lets go; give up after this many in a row. */
#define MAX_LOCK_ATTEMPTS 10000
/* The longest leaf name plus a suffix. */
#define LEAF_MAX (AKS_STORE_NS_CHUNK + 16)
/* The longest wait between two tries of a lock that can be cancelled, in ms. */
#define LOCK_POLL_MAX_MS 16

struct aks_store_impl {
	char *dir;
	int dirfd;
	int nsfd; /* <dir>/ns */
	/* Records written without fsync (aks__file_store_set_volatile): this namespace's keys
	 * that start with this prefix; NULL: none. */
	char *volatile_ns, *volatile_prefix;
};

struct aks_store_lock {
	aks_fs_path path;
	int fd;
};

/* ---- where the store lives ---- */

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

static void fs_fini(aks_store_impl *fs)
{
	if (!fs)
		return;
	if (fs->nsfd >= 0)
		close(fs->nsfd);
	if (fs->dirfd >= 0)
		close(fs->dirfd);
	free(fs->dir);
	free(fs->volatile_ns);
	free(fs->volatile_prefix);
	free(fs);
}

int aks__file_store_set_volatile(aks_store_impl *fs, const char *ns, const char *key_prefix)
{
	char *n = strdup(ns), *k = strdup(key_prefix);
	if (!n || !k) {
		free(n);
		free(k);
		return AKS_ENOMEM;
	}
	free(fs->volatile_ns);
	free(fs->volatile_prefix);
	fs->volatile_ns = n;
	fs->volatile_prefix = k;
	return AKS_OK;
}

/* Whether a write of (ns, key) must reach the disk before the transaction ends. */
static bool durable(const aks_store_impl *fs, const char *ns, const char *key)
{
	return !fs->volatile_ns || strcmp(ns, fs->volatile_ns) != 0 ||
	       strncmp(key, fs->volatile_prefix, strlen(fs->volatile_prefix)) != 0;
}

int aks__file_store_new(const char *dir, aks_store_impl **out, aks_error **err)
{
	*out = NULL;
	if (dir && !*dir)
		return aks__error_set(err, AKS_EINVAL, "state store: the directory name is empty");
	aks_store_impl *fs = calloc(1, sizeof(*fs));
	if (!fs)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	fs->dirfd = fs->nsfd = -1;
	int rc = AKS_OK;
	if (dir && !(fs->dir = strdup(dir)))
		rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
	else if (!dir)
		rc = aks__store_default_dir(&fs->dir, err);
	if (rc < 0) {
		free(fs);
		return rc;
	}
	int e = -aks__state_mkdirs(fs->dir);
	const char *what = "create the directory";
	if (!e && (fs->dirfd = open(fs->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		e = errno;
		what = "open the directory";
	}
	if (!e && mkdirat(fs->dirfd, "ns", 0700) < 0 && errno != EEXIST) {
		e = errno;
		what = "create the directory ns/ in";
	}
	if (!e && (fs->nsfd = openat(fs->dirfd, "ns",
	                             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		e = errno;
		what = "open the directory ns/ in";
	}
	if (e) {
		aks__error_set(err, AKS_EIO, "state store: cannot %s %s: %s", what, fs->dir,
		               strerror(e));
		fs_fini(fs);
		return AKS_EIO;
	}
	*out = fs;
	return AKS_OK;
}

const char *aks__file_store_dir(const aks_store_impl *fs)
{
	return fs->dir;
}

int aks__fs_ns_fd(const aks_store_impl *fs)
{
	return fs->nsfd;
}

size_t aks__fs_max_record(void)
{
	return AKS_STORE_MAX_DOC_SIZE;
}

static int fs_init(const aks_host_api *host, const aks_config *config, aks_store_impl **out,
                   aks_error **err)
{
	const char *dir = NULL;
	if (config && host->config_string(config, "dir", &dir) < 0)
		return host->error_set(err, AKS_ECONFIG, "state store: cannot read the key 'dir'");
	return aks__file_store_new(dir && *dir ? dir : NULL, out, err);
}

/* ---- a record's path ---- */

void aks__fs_path_free(aks_fs_path *p)
{
	for (int i = 1; i < AKS_FS_MAX_LEVELS; i++) {
		if (p->fds[i] >= 0)
			close(p->fds[i]);
		p->fds[i] = -1;
	}
	for (int i = 0; i < p->ncomp; i++)
		free(p->comp[i]);
	p->ncomp = 0;
	free(p->rel);
	p->rel = NULL;
}

static void close_dirs(aks_fs_path *p)
{
	for (int i = 1; i < AKS_FS_MAX_LEVELS; i++) {
		if (p->fds[i] >= 0)
			close(p->fds[i]);
		p->fds[i] = -1;
	}
}

int aks__fs_path_init(aks_store_impl *fs, const char *ns, const char *key, aks_fs_path *p,
                      aks_error **err)
{
	memset(p, 0, sizeof(*p));
	for (int i = 0; i < AKS_FS_MAX_LEVELS; i++)
		p->fds[i] = -1;
	p->fds[0] = fs->nsfd;
	int rc = aks__store_name_check("namespace", ns, err);
	if (rc == AKS_OK && key)
		rc = aks__store_name_check("key", key, err);
	if (rc < 0)
		return rc;
	aks_autofree char *nsp = aks__store_name_path(ns);
	aks_autofree char *keyp = key ? aks__store_name_path(key) : NULL;
	if (!nsp || (key && !keyp) ||
	    asprintf(&p->rel, "%s.d%s%s", nsp, key ? "/" : "", key ? keyp : "") < 0) {
		p->rel = NULL;
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	for (const char *s = p->rel;;) {
		const char *slash = strchr(s, '/');
		size_t n = slash ? (size_t)(slash - s) : strlen(s);
		/* ceil(3 * 256 / 200) = 4 components each at most */
		if (p->ncomp == AKS_FS_MAX_LEVELS || !(p->comp[p->ncomp++] = strndup(s, n)))
			return aks__error_set(err, AKS_ENOMEM, "out of memory");
		if (!slash)
			break;
		s = slash + 1;
	}
	return AKS_OK;
}

int aks__fs_walk(aks_fs_path *p, int upto, bool create)
{
	for (int i = 1; i <= upto; i++) {
		if (p->fds[i] >= 0)
			continue;
		const char *name = p->comp[i - 1];
		int fd;
		while ((fd = openat(p->fds[i - 1], name,
		                    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
			if (errno != ENOENT || !create)
				return -errno;
			if (mkdirat(p->fds[i - 1], name, 0700) == 0) {
				/* The new entry must survive a power cut with the record in it. */
				int e = aks__state_fsync(p->fds[i - 1]);
				if (e)
					return e;
			} else if (errno != EEXIST) {
				return -errno; /* ENOENT: the parent was just removed */
			}
		}
		p->fds[i] = fd;
	}
	return 0;
}

static int leaf_fd(const aks_fs_path *p)
{
	return p->fds[p->ncomp - 1];
}

static const char *leaf_name(const aks_fs_path *p, const char *suffix, char buf[LEAF_MAX])
{
	snprintf(buf, LEAF_MAX, "%s%s", p->comp[p->ncomp - 1], suffix);
	return buf;
}

static int io_error(const aks_store_impl *fs, const aks_fs_path *p, const char *what,
                    const char *suffix, int e, aks_error **err)
{
	return aks__error_set(err, AKS_EIO, "state store: %s %s/ns/%s%s: %s", what, fs->dir, p->rel,
	                      suffix, strerror(e));
}

/* Removes the record's directories that are now empty, innermost first; stops at the first
 * that is not (ENOTEMPTY is the normal case, not an error). */
static void prune(aks_fs_path *p)
{
	for (int i = p->ncomp - 1; i >= 1; i--) {
		if (p->fds[i] >= 0)
			close(p->fds[i]);
		p->fds[i] = -1;
		if (p->fds[i - 1] < 0 || unlinkat(p->fds[i - 1], p->comp[i - 1], AT_REMOVEDIR) < 0)
			break;
	}
}

/* ---- locks ---- */

/* flock(LOCK_EX), waiting no longer than the call allows (call NULL: as long as it takes). */
static int wait_lock(int fd, const aks_call *call, aks_error **err)
{
	const aks_host_api *host = aks__host_api();
	/* Nothing can end the wait early: let the kernel wake us instead of polling. */
	if (!call || (call->deadline_ms <= 0 && host->cancel_fd(call) < 0)) {
		int e = -aks__state_lock(fd, true);
		return e ? aks__error_set(err, AKS_EIO, "state store: cannot lock: %s", strerror(e))
		         : AKS_OK;
	}
	int delay = 1;
	for (;;) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return AKS_OK;
		if (errno == EINTR)
			continue;
		if (errno != EWOULDBLOCK)
			return aks__error_set(err, AKS_EIO, "state store: cannot lock: %s",
			                      strerror(errno));
		if (host->cancelled(call))
			return aks__error_set(err, AKS_ECANCELLED,
			                      "cancelled while waiting for the sandbox session");
		int64_t wait = delay;
		if (call->deadline_ms > 0) {
			int64_t left = call->deadline_ms - host->now_ms();
			if (left <= 0)
				return aks__error_set(
				    err, AKS_ETIMEOUT,
				    "timed out after %g s waiting for the sandbox "
				    "session, busy with another operation",
				    call->timeout);
			if (left < wait)
				wait = left;
		}
		/* flock cannot wait on two things at once: poll the cancellation between tries. */
		struct pollfd pfd = {host->cancel_fd(call), POLLIN, 0};
		poll(&pfd, pfd.fd >= 0 ? 1 : 0, (int)wait);
		if (delay < LOCK_POLL_MAX_MS)
			delay *= 2;
	}
}

/* Takes the lock file `suffix` beside the record: *fd holds it. */
static int acquire(aks_store_impl *fs, aks_fs_path *p, const char *suffix, const aks_call *call,
                   int *out_fd, aks_error **err)
{
	char name[LEAF_MAX];
	leaf_name(p, suffix, name);
	for (int attempt = 0; attempt < MAX_LOCK_ATTEMPTS; attempt++) {
		close_dirs(p);
		int e = -aks__fs_walk(p, p->ncomp - 1, true);
		if (e == ENOENT)
			continue; /* a directory on the way was removed as it emptied */
		if (e)
			return io_error(fs, p, "cannot create the directory of", "", e, err);
		int fd = openat(leaf_fd(p), name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0 && errno == ENOENT)
			continue;
		if (fd < 0)
			return io_error(fs, p, "cannot open", suffix, errno, err);
		int rc = wait_lock(fd, call, err);
		if (rc < 0) {
			close(fd);
			return rc;
		}
		struct stat held, now;
		if (fstat(fd, &held) < 0) {
			e = errno;
			close(fd);
			return io_error(fs, p, "cannot stat", suffix, e, err);
		}
		if (fstatat(leaf_fd(p), name, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
		    now.st_dev == held.st_dev && now.st_ino == held.st_ino) {
			*out_fd = fd;
			return AKS_OK;
		}
		close(fd); /* its holder removed it as we waited: lock the current one */
	}
	return aks__error_set(err, AKS_EIO, "state store: the lock file %s/ns/%s%s kept vanishing",
	                      fs->dir, p->rel, suffix);
}

/* Removes the lock file while still holding it, then lets go. */
static void release(aks_fs_path *p, const char *suffix, int fd)
{
	char name[LEAF_MAX];
	unlinkat(leaf_fd(p), leaf_name(p, suffix, name), 0);
	close(fd);
}

static int fs_lock(aks_store_impl *fs, const char *ns, const char *key, const aks_call *call,
                   aks_store_lock **out, aks_error **err)
{
	*out = NULL;
	aks_store_lock *lk = calloc(1, sizeof(*lk));
	if (!lk)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	int rc = aks__fs_path_init(fs, ns, key, &lk->path, err);
	if (rc == AKS_OK)
		rc = acquire(fs, &lk->path, ".mutex", call, &lk->fd, err);
	if (rc < 0) {
		aks__fs_path_free(&lk->path);
		free(lk);
		return rc;
	}
	*out = lk;
	return AKS_OK;
}

static void fs_unlock(aks_store_impl *fs, aks_store_lock *lk)
{
	(void)fs;
	if (!lk)
		return;
	release(&lk->path, ".mutex", lk->fd);
	prune(&lk->path);
	aks__fs_path_free(&lk->path);
	free(lk);
}

/* ---- records ---- */

/* The record's value: *data NULL when there is none. */
static int load(aks_store_impl *fs, aks_fs_path *p, char **data, size_t *len, aks_error **err)
{
	char name[LEAF_MAX];
	*data = NULL;
	*len = 0;
	/* O_NONBLOCK: a FIFO planted under the name must not hang us (it is refused below). */
	int fd = openat(leaf_fd(p), leaf_name(p, ".json", name),
	                O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0 && errno == ENOENT)
		return AKS_OK;
	if (fd < 0)
		return io_error(fs, p, "cannot open", ".json", errno, err);
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return io_error(fs, p, "cannot stat", ".json", e, err);
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return aks__error_set(err, AKS_EIO,
		                      "state store: %s/ns/%s.json is not a regular file; it was "
		                      "left as it is",
		                      fs->dir, p->rel);
	}
	bool over = false;
	int e = -aks__state_read_all(fd, AKS_STORE_MAX_DOC_SIZE, data, len, &over);
	close(fd);
	if (e == ENOMEM)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	if (e)
		return io_error(fs, p, "cannot read", ".json", e, err);
	if (over)
		return aks__error_set(err, AKS_ELIMIT,
		                      "state store: %s/ns/%s.json is larger than the %u-byte limit "
		                      "on a record; it was left as it is",
		                      fs->dir, p->rel, AKS_STORE_MAX_DOC_SIZE);
	return AKS_OK;
}

/* temp file, fsync, rename over the record, fsync of the directory (the syncs only when
 * `sync`: the rename alone is what makes the new value whole to every reader). */
static int commit(aks_store_impl *fs, aks_fs_path *p, const char *text, size_t len, bool sync,
                  aks_error **err)
{
	char tmp[LEAF_MAX], doc[LEAF_MAX];
	leaf_name(p, ".tmp", tmp);
	leaf_name(p, ".json", doc);
	int dfd = leaf_fd(p);
	if (unlinkat(dfd, tmp, 0) < 0 && errno != ENOENT)
		return io_error(fs, p, "cannot remove the stale", ".tmp", errno, err);
	int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return io_error(fs, p, "cannot create", ".tmp", errno, err);
	int e = -aks__state_write_all(fd, text, len);
	if (!e)
		e = -aks__state_write_all(fd, "\n", 1);
	if (!e && sync)
		e = -aks__state_fsync(fd);
	if (close(fd) < 0 && !e && errno != EINTR)
		e = errno;
	if (e) {
		unlinkat(dfd, tmp, 0);
		return io_error(fs, p, "cannot write", ".tmp", e, err);
	}
	if (renameat(dfd, tmp, dfd, doc) < 0) {
		e = errno;
		unlinkat(dfd, tmp, 0);
		return io_error(fs, p, "cannot rename the new value onto", ".json", e, err);
	}
	/* Until the directory is synced, a power cut could bring the old value back. */
	e = sync ? -aks__state_fsync(dfd) : 0;
	return e ? io_error(fs, p, "wrote, but could not sync the directory of", ".json", e, err)
	         : AKS_OK;
}

static int remove_record(aks_store_impl *fs, aks_fs_path *p, bool sync, aks_error **err)
{
	char name[LEAF_MAX];
	int dfd = leaf_fd(p);
	if (unlinkat(dfd, leaf_name(p, ".json", name), 0) < 0 && errno != ENOENT)
		return io_error(fs, p, "cannot remove", ".json", errno, err);
	unlinkat(dfd, leaf_name(p, ".tmp", name), 0);
	int e = sync ? -aks__state_fsync(dfd) : 0;
	return e ? io_error(fs, p, "removed, but could not sync the directory of", ".json", e, err)
	         : AKS_OK;
}

static int fs_update(aks_store_impl *fs, const char *ns, const char *key, aks_store_txn_fn fn,
                     void *ctx, aks_error **err)
{
	aks_fs_path p;
	int lockfd = -1;
	char *data = NULL;
	size_t len = 0;
	bool exists = false;
	int rc = aks__fs_path_init(fs, ns, key, &p, err);
	if (rc == AKS_OK)
		rc = acquire(fs, &p, ".lock", NULL, &lockfd, err);
	if (rc == AKS_OK)
		rc = load(fs, &p, &data, &len, err);
	if (rc == AKS_OK) {
		exists = data != NULL;
		int action = AKS_STORE_KEEP;
		const char *nv = NULL;
		size_t nlen = 0;
		rc = fn(ctx, data, len, &action, &nv, &nlen, err);
		bool sync = durable(fs, ns, key);
		if (rc == AKS_OK && action == AKS_STORE_PUT) {
			rc = nv ? commit(fs, &p, nv, nlen, sync, err)
			        : aks__error_set(err, AKS_EINVAL, "state store: nothing to write");
			exists = exists || rc == AKS_OK;
		} else if (rc == AKS_OK && action == AKS_STORE_DELETE && exists) {
			rc = remove_record(fs, &p, sync, err);
			exists = rc < 0;
		}
	}
	free(data);
	if (lockfd >= 0) {
		release(&p, ".lock", lockfd);
		if (!exists)
			prune(&p);
	}
	aks__fs_path_free(&p);
	return rc;
}

static int fs_get(aks_store_impl *fs, const char *ns, const char *key, aks_store_record_fn fn,
                  void *ctx, aks_error **err)
{
	aks_fs_path p;
	int rc = aks__fs_path_init(fs, ns, key, &p, err);
	if (rc == AKS_OK) {
		int e = -aks__fs_walk(&p, p.ncomp - 1, false);
		if (e == ENOENT)
			rc = AKS_ENOTFOUND;
		else if (e)
			rc = io_error(fs, &p, "cannot open the directory of", "", e, err);
	}
	char *data = NULL;
	size_t len = 0;
	if (rc == AKS_OK)
		rc = load(fs, &p, &data, &len, err);
	if (rc == AKS_OK)
		rc = data ? fn(ctx, key, data, len) : AKS_ENOTFOUND;
	free(data);
	aks__fs_path_free(&p);
	return rc;
}

const aks_store_ops aks__file_store_ops = {
    AKS_STORE_OPS_VERSION, sizeof(aks_store_ops), fs_init, fs_fini,   fs_update, fs_get,
    aks__fs_scan,          aks__fs_namespaces,    fs_lock, fs_unlock, NULL, /* put_expiring: files
                                                                               do not expire by
                                                                               themselves */
};

static const aks_config_key file_store_keys[] = {
    AKS_CONFIG_KEY("dir", AKS_CONFIG_STRING, false, NULL,
                   "the state directory (default: $AKS_STATE_DIR, else the XDG state "
                   "directory, /var/lib/aksandbox for root)"),
    AKS_CONFIG_END,
};

const aks_plugin_descriptor aks__file_store_descriptor = {
    AKS_DESCRIPTOR_VERSION,
    sizeof(aks_plugin_descriptor),
    AKS_ABI_MAJOR,
    AKS_ABI_MINOR,
    AKS_PLUGIN_STORE,
    "file",
    PACKAGE_VERSION,
    "Apache-2.0",
    "the built-in state store: records as files in the state directory",
    file_store_keys,
    &aks__file_store_ops,
    {NULL, NULL, NULL, NULL},
};
