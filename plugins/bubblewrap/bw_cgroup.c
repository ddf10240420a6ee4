/*
 * plugins/bubblewrap/bw_cgroup.c - a cgroup per bubblewrap sandbox: finding the hierarchy,
 * making the cgroup with its limits, moving a child into it, killing everything in it and
 * removing it; see bw_cgroup.h.
 *
 * Everything here is plain file work on cgroupfs. Interface files are read and written
 * with one read()/write() each (the kernel parses a write as a whole, and reports a refused
 * value as the write's error, which is passed on with the file's name), never with stdio,
 * whose buffering would split or delay them.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* Linux-only code */
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "bw_cgroup.h"

enum { CG_CPU = 1u << 0, CG_MEMORY = 1u << 1, CG_PIDS = 1u << 2, CG_FREEZER = 1u << 3 };

static const struct {
	const char *name;
	unsigned bit;
} controllers[] = {
    {"cpu", CG_CPU}, {"memory", CG_MEMORY}, {"pids", CG_PIDS}, {"freezer", CG_FREEZER}};
#define N_CONTROLLERS (sizeof(controllers) / sizeof(controllers[0]))

/* The limits' controllers: cgroup v1 is used when a v1 hierarchy carries one of them. */
#define CG_LIMITS (CG_CPU | CG_MEMORY | CG_PIDS)

#define CPU_PERIOD_US 100000   /* the CFS period: quotas are per 100 ms, the kernel's default */
#define CPU_QUOTA_MIN 1000     /* the smallest quota the kernel takes: 1 ms, 0.01 cores */
#define CPU_MAX       100000.0 /* cores; far above any host, far below the quota's maximum */
#define MIB           1048576

#define KILL_WAIT_MS   2000       /* how long bw_cgroup_kill waits for the cgroup to empty */
#define FREEZE_WAIT_MS 200        /* per round: a task stuck in the kernel may never freeze */
#define ROUND_WAIT_MS  50         /* per round, for the signalled processes to exit */
#define RMDIR_WAIT_MS  1000       /* for a just-emptied cgroup to become removable */
#define MAX_DEPTH      16         /* of nested cgroups walked below a sandbox's */
#define MAX_FILE       (16 * MIB) /* cgroup.procs of a full pid space is ~30 MiB; ours are small */

struct hierarchy {
	unsigned ctl;          /* the CG_ bits of our controllers it carries (v2: those enabled) */
	char parent[PATH_MAX]; /* the parent directory: sandbox cgroups are parent/name */
};

struct bw_cgroups {
	int version;
	size_t n;
	struct hierarchy h[4]; /* v1: at most one per controller; v2: one */
	unsigned ctl;          /* the union of h[].ctl */
	bool kill_file;        /* v2: cgroup.kill exists (Linux 5.14) and may be used */
	bool freeze_file;      /* v2: cgroup.freeze exists (Linux 5.2) */
	char offered[128];     /* v2: the controllers the hierarchy has at all, for messages */
	char mount[PATH_MAX];  /* v2: where it is mounted */
	char *describe;
};

/* ---- small helpers -------------------------------------------------------------------- */

__attribute__((format(printf, 4, 5))) static int fail(char *why, size_t whylen, int err,
                                                      const char *fmt, ...)
{
	if (why && whylen > 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return -err;
}

/* buf = a[/b[/c]]. 0 or -ENAMETOOLONG. */
static int join(char *buf, size_t len, const char *a, const char *b, const char *c)
{
	int r =
	    snprintf(buf, len, "%s%s%s%s%s", a, b ? "/" : "", b ? b : "", c ? "/" : "", c ? c : "");
	return r < 0 || (size_t)r >= len ? -ENAMETOOLONG : 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* Reads a small file into buf, NUL-terminated. The length, or -errno. */
static ssize_t read_text(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t got = 0;
	while (got + 1 < len) {
		ssize_t r = read(fd, buf + got, len - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			close(fd);
			return -e;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	buf[got] = '\0';
	return (ssize_t)got;
}

/* Reads a whole file of any size (mountinfo, cgroup.procs) into a malloc'd string. */
static int read_all(const char *path, char **out)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t cap = 4096, got = 0;
	char *buf = malloc(cap);
	int rc = buf ? 0 : -ENOMEM;
	while (rc == 0) {
		if (got + 1 == cap) {
			char *bigger = cap < MAX_FILE ? realloc(buf, cap * 2) : NULL;
			if (!bigger) {
				rc = cap < MAX_FILE ? -ENOMEM : -EFBIG;
				break;
			}
			buf = bigger;
			cap *= 2;
		}
		ssize_t r = read(fd, buf + got, cap - 1 - got);
		if (r < 0 && errno != EINTR)
			rc = -errno;
		else if (r == 0)
			break;
		else if (r > 0)
			got += (size_t)r;
	}
	close(fd);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	buf[got] = '\0';
	*out = buf;
	return 0;
}

/* Writes s to an interface file in one write(). 0 or -errno (the kernel's verdict). */
static int write_text(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t len = strlen(s);
	ssize_t w;
	do
		w = write(fd, s, len);
	while (w < 0 && errno == EINTR);
	int rc = w < 0 ? -errno : (size_t)w != len ? -EIO : 0;
	close(fd);
	return rc;
}

static bool exists(const char *path)
{
	return access(path, F_OK) == 0;
}

static bool exists_in(const char *dir, const char *file)
{
	char path[PATH_MAX];
	return join(path, sizeof(path), dir, file, NULL) == 0 && exists(path);
}

/* Whether word (up to its end or a space) is one of the space-separated words of list. */
static bool has_word(const char *list, const char *word)
{
	size_t wl = strcspn(word, " \n");
	for (const char *p = list; *p;) {
		p += strspn(p, " \n");
		size_t l = strcspn(p, " \n");
		if (l == wl && l > 0 && strncmp(p, word, l) == 0)
			return true;
		p += l;
	}
	return false;
}

/* The value of the "key N" line of a flat-keyed file (memory.events, memory.oom_control). */
static int64_t keyed_value(const char *text, const char *key)
{
	size_t kl = strlen(key);
	for (const char *p = text; p;) {
		if (strncmp(p, key, kl) == 0 && p[kl] == ' ')
			return strtoll(p + kl + 1, NULL, 10);
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return -1;
}

static unsigned controller_bit(const char *name)
{
	for (size_t i = 0; i < N_CONTROLLERS; i++)
		if (strcmp(controllers[i].name, name) == 0)
			return controllers[i].bit;
	return 0;
}

/* "cpu, memory" for the bits of ctl; "none" for none. */
static void controller_list(unsigned ctl, char *buf, size_t len)
{
	buf[0] = '\0';
	size_t used = 0;
	for (size_t i = 0; i < N_CONTROLLERS; i++)
		if (ctl & controllers[i].bit) {
			int r = snprintf(buf + used, len - used, "%s%s", used ? ", " : "",
			                 controllers[i].name);
			if (r < 0 || (size_t)r >= len - used)
				break;
			used += (size_t)r;
		}
	if (!used)
		snprintf(buf, len, "none");
}

bool bw_cgroup_name_ok(const char *name)
{
	if (!name || !((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' && name[0] <= 'Z') ||
	               (name[0] >= '0' && name[0] <= '9')))
		return false;
	size_t n =
	    strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-");
	return name[n] == '\0' && n <= 64;
}

/* A parent: '/'-separated non-empty components, none "." or "..", no control characters. */
static bool parent_ok(const char *p)
{
	size_t len = strlen(p);
	if (len == 0 || len > 1024)
		return false;
	const char *c = p[0] == '/' ? p + 1 : p;
	if (*c == '\0')
		return false; /* "/" alone: the hierarchy's top cannot be a sandbox's parent */
	while (*c) {
		size_t l = strcspn(c, "/");
		if (l == 0 || (l == 1 && c[0] == '.') || (l == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		for (size_t i = 0; i < l; i++)
			if ((unsigned char)c[i] < 0x20 || c[i] == 0x7f)
				return false;
		c += l;
		if (*c == '/')
			c++;
		else
			break;
	}
	return p[len - 1] != '/';
}

/* ---- finding the hierarchies ---------------------------------------------------------- */

struct mnt {
	bool found;
	char point[PATH_MAX]; /* where it is mounted */
	char root[PATH_MAX];  /* which cgroup of the hierarchy is mounted there ("/" mostly) */
};

struct mounts {
	struct mnt v1[N_CONTROLLERS]; /* by index in controllers[] */
	struct mnt v2;
};

/* Copies a mountinfo field, undoing its octal escapes (\040 for a space). */
static void unescape(char *dst, size_t len, const char *src)
{
	size_t o = 0;
	for (; *src && o + 1 < len; src++) {
		if (src[0] == '\\' && src[1] >= '0' && src[1] <= '3' && src[2] >= '0' &&
		    src[2] <= '7' && src[3] >= '0' && src[3] <= '7') {
			dst[o++] =
			    (char)((src[1] - '0') * 64 + (src[2] - '0') * 8 + (src[3] - '0'));
			src += 3;
		} else {
			dst[o++] = *src;
		}
	}
	dst[o] = '\0';
}

/* Whether the comma-separated options contain opt. */
static bool has_option(const char *opts, size_t n, const char *opt)
{
	size_t ol = strlen(opt);
	for (size_t i = 0; i < n;) {
		size_t l = 0;
		while (i + l < n && opts[i + l] != ',')
			l++;
		if (l == ol && strncmp(opts + i, opt, l) == 0)
			return true;
		i += l + 1;
	}
	return false;
}

/*
 * The cgroup mounts, from /proc/self/mountinfo: "ID PARENT MAJ:MIN ROOT POINT OPTIONS
 * [OPTIONAL...] - FSTYPE SOURCE SUPER-OPTIONS". A v1 hierarchy names its controllers in the
 * super options. The first mount of each wins (later ones are bind mounts of the same).
 * want_v2: when non-NULL, only the cgroup2 mount at that point counts.
 */
static int find_mounts(struct mounts *m, const char *want_v2)
{
	memset(m, 0, sizeof(*m));
	char want[PATH_MAX] = "";
	if (want_v2) {
		snprintf(want, sizeof(want), "%s", want_v2);
		for (size_t l = strlen(want); l > 1 && want[l - 1] == '/'; l--)
			want[l - 1] = '\0';
	}
	char *text;
	int rc = read_all("/proc/self/mountinfo", &text);
	if (rc < 0)
		return rc;
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *tok[32], *ts = NULL;
		int nt = 0, dash = -1;
		for (char *t = strtok_r(line, " ", &ts); t && nt < 32; t = strtok_r(NULL, " ", &ts))
			tok[nt++] = t;
		for (int i = 6; i < nt && dash < 0; i++)
			if (strcmp(tok[i], "-") == 0)
				dash = i;
		if (dash < 0 || dash + 3 >= nt)
			continue;
		const char *type = tok[dash + 1], *opts = tok[dash + 3];
		struct mnt found = {.found = true};
		unescape(found.root, sizeof(found.root), tok[3]);
		unescape(found.point, sizeof(found.point), tok[4]);
		if (strcmp(type, "cgroup2") == 0 && !m->v2.found &&
		    (!want_v2 || strcmp(found.point, want) == 0))
			m->v2 = found;
		if (strcmp(type, "cgroup") == 0)
			for (size_t i = 0; i < N_CONTROLLERS; i++)
				if (!m->v1[i].found &&
				    has_option(opts, strlen(opts), controllers[i].name))
					m->v1[i] = found;
	}
	free(text);
	return 0;
}

/* This process's cgroup in the v1 hierarchy of controller, or in v2 (controller NULL), from
 * /proc/self/cgroup: "ID:CONTROLLERS:PATH", v2's with ID 0 and no controllers. */
static int own_cgroup(const char *controller, char *buf, size_t len)
{
	char *text;
	int rc = read_all("/proc/self/cgroup", &text);
	if (rc < 0)
		return rc;
	rc = -ENOENT;
	for (char *line = text; *line && rc == -ENOENT;) {
		char *end = strchr(line, '\n');
		if (end)
			*end = '\0';
		char *c1 = strchr(line, ':');
		char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (c2) {
			const char *list = c1 + 1;
			size_t ll = (size_t)(c2 - list);
			bool match = controller ? has_option(list, ll, controller)
			                        : (ll == 0 && c1 - line == 1 && line[0] == '0');
			if (match)
				rc =
				    snprintf(buf, len, "%s", c2 + 1) < (int)len ? 0 : -ENAMETOOLONG;
		}
		if (!end)
			break;
		line = end + 1;
	}
	free(text);
	return rc;
}

/* The directory of this process's cgroup under mount m: the mount point plus the path from
 * the mounted cgroup (m->root) down to ours. */
static int own_dir(const struct mnt *m, const char *controller, char *buf, size_t len, char *why,
                   size_t whylen)
{
	char own[PATH_MAX];
	int rc = own_cgroup(controller, own, sizeof(own));
	if (rc < 0)
		return fail(why, whylen, -rc,
		            "cannot find this process's %s%s cgroup in /proc/self/cgroup",
		            controller ? controller : "cgroup v2", controller ? " (v1)" : "");
	const char *rest = own;
	size_t rl = strlen(m->root);
	if (strcmp(m->root, "/") != 0) {
		if (strncmp(own, m->root, rl) != 0 || (own[rl] != '\0' && own[rl] != '/'))
			return fail(
			    why, whylen, ENOENT,
			    "this process's cgroup %s is outside the part of the hierarchy "
			    "mounted at %s (%s); give the cgroup parent as an absolute path",
			    own, m->point, m->root);
		rest = own + rl;
	}
	if (strcmp(rest, "/") == 0)
		rest = "";
	if (snprintf(buf, len, "%s%s", m->point, rest) >= (int)len)
		return fail(why, whylen, ENAMETOOLONG, "the path of cgroup %s is too long", own);
	return 0;
}

/* The parent directory under mount m: from the mount point when parent is absolute, from
 * this process's own cgroup when it is relative. */
static int parent_dir(const struct mnt *m, const char *controller, const char *parent, char *buf,
                      size_t len, char *why, size_t whylen)
{
	char base[PATH_MAX];
	if (parent[0] == '/') {
		snprintf(base, sizeof(base), "%s", m->point);
		parent++;
	} else {
		int rc = own_dir(m, controller, base, sizeof(base), why, whylen);
		if (rc < 0)
			return rc;
	}
	if (join(buf, len, base, parent, NULL) < 0)
		return fail(why, whylen, ENAMETOOLONG, "the path %s/%s is too long", base, parent);
	return 0;
}

/* mkdir that accepts an existing directory. 1 made, 0 existed, -errno. */
static int make_dir(const char *path)
{
	if (mkdir(path, 0755) == 0)
		return 1;
	int e = errno;
	struct stat st;
	if (e == EEXIST && stat(path, &st) == 0)
		return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
	return -e;
}

static const char *privilege_hint(int err)
{
	return err == EACCES || err == EPERM || err == EROFS
	           ? " (run as root, or give a delegated cgroup v2 subtree)"
	           : "";
}

/*
 * cgroup v2: enables in dir's cgroup.subtree_control those of cpu, memory and pids that its
 * cgroup.controllers offers and that are not enabled yet, so its child cgroups get them.
 */
static int enable_controllers(const char *dir, char *why, size_t whylen)
{
	char path[PATH_MAX], offered[256], enabled[256], want[64] = "";
	if (join(path, sizeof(path), dir, "cgroup.controllers", NULL) < 0)
		return fail(why, whylen, ENAMETOOLONG, "the path %s is too long", dir);
	ssize_t r = read_text(path, offered, sizeof(offered));
	if (r < 0)
		return fail(why, whylen, (int)-r, "cannot read %s: %s", path, strerror((int)-r));
	if (join(path, sizeof(path), dir, "cgroup.subtree_control", NULL) < 0)
		return fail(why, whylen, ENAMETOOLONG, "the path %s is too long", dir);
	r = read_text(path, enabled, sizeof(enabled));
	if (r < 0)
		return fail(why, whylen, (int)-r, "cannot read %s: %s", path, strerror((int)-r));
	for (size_t i = 0; i < N_CONTROLLERS; i++) {
		const char *c = controllers[i].name;
		if ((controllers[i].bit & CG_LIMITS) && has_word(offered, c) &&
		    !has_word(enabled, c)) {
			size_t used = strlen(want);
			snprintf(want + used, sizeof(want) - used, "%s+%s", used ? " " : "", c);
		}
	}
	if (!want[0])
		return 0;
	int rc = write_text(path, want);
	if (rc == -EBUSY)
		return fail(
		    why, whylen, EBUSY,
		    "cannot enable %s in %s: that cgroup holds processes itself, and cgroup v2 "
		    "lets only the root cgroup or one without processes give controllers to "
		    "its children (the \"no internal processes\" rule); give as the cgroup "
		    "parent a delegated cgroup that holds no processes (with systemd: "
		    "Delegate=yes and the service moved into a leaf cgroup of its own)",
		    want, path);
	if (rc < 0)
		return fail(why, whylen, -rc, "cannot enable %s in %s: %s%s", want, path,
		            strerror(-rc), privilege_hint(-rc));
	return 0;
}

/* Removes the last `made` components of path: the directories make_parent made. */
static void unmake(const char *path, int made)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s", path);
	for (; made > 0; made--) {
		rmdir(p);
		char *slash = strrchr(p, '/');
		if (!slash)
			break;
		*slash = '\0';
	}
}

/*
 * Makes dir and the directories above it that are missing, from the first of them that
 * exists; for v2 enables the controllers in each on the way down, dir's own included, so
 * sandbox cgroups under dir get them. *made: how many it made (a tail of dir's path).
 */
static int make_parent(const char *dir, bool v2, int *made, char *why, size_t whylen)
{
	*made = 0;
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s", dir);
	/* Up to the deepest directory that exists... */
	while (!exists(p)) {
		char *slash = strrchr(p, '/');
		if (!slash || slash == p)
			return fail(why, whylen, ENOENT, "%s does not exist", dir);
		*slash = '\0';
	}
	for (;;) {
		if (v2) {
			int rc = enable_controllers(p, why, whylen);
			if (rc < 0) {
				unmake(p, *made);
				*made = 0;
				return rc;
			}
		}
		size_t len = strlen(p);
		if (dir[len] == '\0')
			return 0;
		/* ...then down again, a component at a time. */
		size_t l = len + 1 + strcspn(dir + len + 1, "/");
		memcpy(p, dir, l);
		p[l] = '\0';
		int rc = make_dir(p);
		if (rc < 0) {
			fail(why, whylen, -rc, "cannot create %s: %s%s", p, strerror(-rc),
			     privilege_hint(-rc));
			p[len] = '\0';
			unmake(p, *made);
			*made = 0;
			return rc;
		}
		*made += rc;
	}
}

/* ---- probing ---------------------------------------------------------------------------- */

static void describe_v1(bw_cgroups *cg)
{
	size_t len = cg->n * (PATH_MAX + 64) + 256, used = 0;
	char *d = malloc(len);
	if (!d)
		return;
	used = (size_t)snprintf(d, len, "cgroup v1:");
	for (size_t i = 0; i < cg->n; i++) {
		char list[64];
		controller_list(cg->h[i].ctl, list, sizeof(list));
		used += (size_t)snprintf(d + used, len - used, "%s %s at %s", i ? "," : "", list,
		                         cg->h[i].parent);
	}
	unsigned missing = (CG_LIMITS | CG_FREEZER) & ~cg->ctl;
	if (missing) {
		char list[64];
		controller_list(missing, list, sizeof(list));
		snprintf(d + used, len - used, "; not mounted: %s", list);
	}
	cg->describe = d;
}

static void describe_v2(bw_cgroups *cg)
{
	size_t len = PATH_MAX + 512;
	char *d = malloc(len), have[64], missing[64];
	if (!d)
		return;
	controller_list(cg->ctl, have, sizeof(have));
	controller_list(CG_LIMITS & ~cg->ctl, missing, sizeof(missing));
	const char *offered = cg->offered[0] ? cg->offered : "no controller";
	if (!cg->ctl)
		snprintf(d, len,
		         "cgroup v2 at %s: no cpu, memory or pids controller (the hierarchy "
		         "has: %s)",
		         cg->h[0].parent, offered);
	else if (CG_LIMITS & ~cg->ctl)
		snprintf(d, len, "cgroup v2 at %s: %s; not available: %s (the hierarchy has: %s)",
		         cg->h[0].parent, have, missing, offered);
	else
		snprintf(d, len, "cgroup v2 at %s: %s", cg->h[0].parent, have);
	cg->describe = d;
}

/*
 * Makes and removes a cgroup under parent: whatever a failure of making the parent missed
 * (a read-only mount, a hierarchy that refuses new cgroups) shows here, at probe time.
 * For v2 also notes what the new cgroup is given.
 */
static int try_child(bw_cgroups *cg, const char *parent, char *why, size_t whylen)
{
	char name[64], dir[PATH_MAX], path[PATH_MAX];
	snprintf(name, sizeof(name), "aksandbox-probe-%ld", (long)getpid());
	if (join(dir, sizeof(dir), parent, name, NULL) < 0)
		return fail(why, whylen, ENAMETOOLONG, "the path %s is too long", parent);
	int rc = make_dir(dir);
	if (rc < 0)
		return fail(why, whylen, -rc, "cannot create %s: %s%s", dir, strerror(-rc),
		            privilege_hint(-rc));
	rc = 0;
	if (cg->version == 2) {
		char offered[256];
		ssize_t r = join(path, sizeof(path), dir, "cgroup.controllers", NULL);
		if (r == 0)
			r = read_text(path, offered, sizeof(offered));
		if (r < 0) {
			rc = fail(why, whylen, (int)-r, "cannot read %s: %s", path,
			          strerror((int)-r));
			offered[0] = '\0';
		}
		for (size_t i = 0; i < N_CONTROLLERS; i++)
			if ((controllers[i].bit & CG_LIMITS) &&
			    has_word(offered, controllers[i].name))
				cg->h[0].ctl |= controllers[i].bit;
		cg->ctl = cg->h[0].ctl;
		cg->kill_file = exists_in(dir, "cgroup.kill");
		cg->freeze_file = exists_in(dir, "cgroup.freeze");
	}
	if (rmdir(dir) != 0 && rc == 0)
		rc = fail(why, whylen, errno, "cannot remove the cgroup %s just made: %s", dir,
		          strerror(errno));
	return rc;
}

static int probe_v1(const struct mounts *m, const char *parent, bw_cgroups *cg, char *why,
                    size_t whylen)
{
	cg->version = 1;
	/* One hierarchy per distinct mount: controllers mounted together share a directory. */
	for (size_t i = 0; i < N_CONTROLLERS; i++) {
		if (!m->v1[i].found)
			continue;
		size_t j = 0;
		for (; j < i; j++)
			if (m->v1[j].found && strcmp(m->v1[j].point, m->v1[i].point) == 0)
				break;
		if (j < i) {
			for (size_t k = 0; k < cg->n; k++)
				if (cg->h[k].ctl & controllers[j].bit)
					cg->h[k].ctl |= controllers[i].bit;
			continue;
		}
		struct hierarchy *h = &cg->h[cg->n++];
		h->ctl = controllers[i].bit;
		int rc = parent_dir(&m->v1[i], controllers[i].name, parent, h->parent,
		                    sizeof(h->parent), why, whylen);
		if (rc < 0)
			return rc;
	}
	int made[4] = {0};
	int rc = 0;
	size_t i = 0;
	for (; i < cg->n && rc == 0; i++) {
		rc = make_parent(cg->h[i].parent, false, &made[i], why, whylen);
		if (rc == 0)
			rc = try_child(cg, cg->h[i].parent, why, whylen);
		cg->ctl |= cg->h[i].ctl;
	}
	if (rc < 0) /* leave nothing behind in the hierarchies that worked */
		while (i-- > 0)
			unmake(cg->h[i].parent, made[i]);
	return rc;
}

static int probe_v2(const struct mnt *m, const char *parent, bw_cgroups *cg, char *why,
                    size_t whylen)
{
	cg->version = 2;
	cg->n = 1;
	/* What the hierarchy has at all: the root's cgroup.controllers, for messages. */
	snprintf(cg->mount, sizeof(cg->mount), "%s", m->point);
	char path[PATH_MAX];
	if (join(path, sizeof(path), m->point, "cgroup.controllers", NULL) == 0 &&
	    read_text(path, cg->offered, sizeof(cg->offered)) >= 0)
		cg->offered[strcspn(cg->offered, "\n")] = '\0';
	int rc = parent_dir(m, NULL, parent, cg->h[0].parent, sizeof(cg->h[0].parent), why, whylen);
	if (rc < 0)
		return rc;
	int made = 0;
	rc = make_parent(cg->h[0].parent, true, &made, why, whylen);
	if (rc == 0)
		rc = try_child(cg, cg->h[0].parent, why, whylen);
	if (rc < 0)
		unmake(cg->h[0].parent, made);
	return rc;
}

static int probe(const char *v2_mount, bool force_v2, const char *parent, unsigned flags,
                 bw_cgroups **out, char *why, size_t whylen)
{
	*out = NULL;
	if (why && whylen)
		why[0] = '\0';
	if (!parent)
		parent = BW_CGROUP_DEFAULT_PARENT;
	if (!parent_ok(parent))
		return fail(why, whylen, EINVAL,
		            "bad cgroup parent \"%s\": give a path of non-empty components, none "
		            "\".\" or \"..\"",
		            parent);
	struct mounts *m = malloc(sizeof(*m));
	bw_cgroups *cg = calloc(1, sizeof(*cg));
	int rc = m && cg ? find_mounts(m, v2_mount) : -ENOMEM;
	if (rc < 0) {
		fail(why, whylen, -rc, "cannot read /proc/self/mountinfo: %s", strerror(-rc));
	} else {
		bool v1 = false;
		for (size_t i = 0; i < N_CONTROLLERS; i++)
			v1 |= m->v1[i].found && (controllers[i].bit & CG_LIMITS);
		if (force_v2 && !m->v2.found)
			rc = v2_mount
			         ? fail(why, whylen, ENOENT,
			                "no cgroup2 file system is mounted at %s", v2_mount)
			         : fail(why, whylen, ENOENT, "no cgroup2 file system is mounted");
		else if (!force_v2 && v1)
			rc = probe_v1(m, parent, cg, why, whylen);
		else if (m->v2.found)
			rc = probe_v2(&m->v2, parent, cg, why, whylen);
		else
			rc = fail(
			    why, whylen, ENOENT,
			    "no cgroup hierarchy is mounted: neither cgroup2 nor cgroup v1 with "
			    "the cpu, memory or pids controller");
	}
	free(m);
	if (rc == 0) {
		cg->kill_file = cg->kill_file && !(flags & BW_CGROUP_NO_KILL_FILE);
		if (cg->version == 1)
			describe_v1(cg);
		else
			describe_v2(cg);
		if (!cg->describe)
			rc = fail(why, whylen, ENOMEM, "out of memory");
	}
	if (rc < 0) {
		bw_cgroup_free(cg);
		return rc;
	}
	*out = cg;
	return 0;
}

int bw_cgroup_probe(const char *parent, bw_cgroups **out, char *why, size_t whylen)
{
	return probe(NULL, false, parent, 0, out, why, whylen);
}

int bw_cgroup_probe_v2(const char *mount, const char *parent, unsigned flags, bw_cgroups **out,
                       char *why, size_t whylen)
{
	return probe(mount, true, parent, flags, out, why, whylen);
}

void bw_cgroup_free(bw_cgroups *cg)
{
	if (!cg)
		return;
	free(cg->describe);
	free(cg);
}

int bw_cgroup_remove_parent(const bw_cgroups *cg)
{
	int rc = 0;
	for (size_t i = 0; i < cg->n; i++)
		if (rmdir(cg->h[i].parent) != 0 && errno != ENOENT && rc == 0)
			rc = errno == ENOTEMPTY ? -EBUSY : -errno;
	return rc;
}

int bw_cgroup_version(const bw_cgroups *cg)
{
	return cg->version;
}

const char *bw_cgroup_describe(const bw_cgroups *cg)
{
	return cg->describe;
}

bool bw_cgroup_has(const bw_cgroups *cg, const char *controller)
{
	unsigned bit = controller ? controller_bit(controller) : 0;
	return bit && (cg->ctl & bit);
}

size_t bw_cgroup_hierarchies(const bw_cgroups *cg)
{
	return cg->n;
}

int bw_cgroup_dir(const bw_cgroups *cg, size_t i, const char *name, char *buf, size_t len)
{
	if (i >= cg->n)
		return -ENOENT;
	if (name && !bw_cgroup_name_ok(name))
		return -EINVAL;
	return join(buf, len, cg->h[i].parent, name, NULL);
}

/* The index of the hierarchy carrying bit (0: the first), or -1. */
static int hierarchy_of(const bw_cgroups *cg, unsigned bit)
{
	for (size_t i = 0; i < cg->n; i++)
		if (!bit || (cg->h[i].ctl & bit))
			return (int)i;
	return -1;
}

int bw_cgroup_file(const bw_cgroups *cg, const char *controller, const char *name, const char *file,
                   char *buf, size_t len)
{
	unsigned bit = 0;
	if (controller && !(bit = controller_bit(controller)))
		return -ENOENT;
	int i = hierarchy_of(cg, bit);
	if (i < 0)
		return -ENOENT;
	if (!bw_cgroup_name_ok(name))
		return -EINVAL;
	return join(buf, len, cg->h[i].parent, name, file);
}

/* ---- making a sandbox's cgroup -------------------------------------------------------- */

/* Writes value to name's file in the hierarchy carrying bit, with why on failure. */
static int set_file(const bw_cgroups *cg, unsigned bit, const char *name, const char *file,
                    const char *value, char *why, size_t whylen)
{
	char path[PATH_MAX];
	int i = hierarchy_of(cg, bit);
	if (i < 0 || join(path, sizeof(path), cg->h[i].parent, name, file) < 0)
		return fail(why, whylen, ENAMETOOLONG, "the path of %s in cgroup %s is too long",
		            file, name);
	int rc = write_text(path, value);
	if (rc < 0)
		return fail(why, whylen, -rc, "cannot write \"%s\" to %s: %s", value, path,
		            strerror(-rc));
	return 0;
}

/* Whether name's file exists in the hierarchy carrying bit. */
static bool has_file(const bw_cgroups *cg, unsigned bit, const char *name, const char *file)
{
	char path[PATH_MAX];
	int i = hierarchy_of(cg, bit);
	return i >= 0 && join(path, sizeof(path), cg->h[i].parent, name, file) == 0 && exists(path);
}

/* Refuses a limit whose controller sandboxes do not get: limits fail closed. */
static int check_controllers(const bw_cgroups *cg, const bw_limits *lim, int64_t pids, char *why,
                             size_t whylen)
{
	char what[96];
	unsigned bit = 0;
	if (lim->cpu > 0 && !(cg->ctl & CG_CPU)) {
		bit = CG_CPU;
		snprintf(what, sizeof(what), "the cpu limit (cpu %g)", lim->cpu);
	} else if (lim->memory_mb > 0 && !(cg->ctl & CG_MEMORY)) {
		bit = CG_MEMORY;
		snprintf(what, sizeof(what), "the memory limit (memory_mb %lld)",
		         (long long)lim->memory_mb);
	} else if (pids > 0 && !(cg->ctl & CG_PIDS)) {
		bit = CG_PIDS;
		snprintf(what, sizeof(what), "the task limit (pids %lld%s)", (long long)pids,
		         lim->pids == 0 ? ", the default" : "");
	}
	if (!bit)
		return 0;
	const char *c = bit == CG_CPU ? "cpu" : bit == CG_MEMORY ? "memory" : "pids";
	if (cg->version == 1)
		return fail(why, whylen, EOPNOTSUPP,
		            "%s needs the %s controller, and no cgroup v1 hierarchy with it is "
		            "mounted",
		            what, c);
	if (has_word(cg->offered, c))
		return fail(
		    why, whylen, EOPNOTSUPP,
		    "%s needs the %s controller, which cgroups under %s do not get: the "
		    "cgroups above do not enable it in their cgroup.subtree_control (have it "
		    "delegated, or give a parent where it is)",
		    what, c, cg->h[0].parent);
	return fail(why, whylen, EOPNOTSUPP,
	            "%s needs the %s controller, which the cgroup v2 hierarchy at %s does not have "
	            "(it has: %s; a controller in use by a cgroup v1 hierarchy is not available "
	            "to v2)",
	            what, c, cg->mount, cg->offered[0] ? cg->offered : "no controller");
}

static int set_limits(const bw_cgroups *cg, const char *name, const bw_limits *lim, int64_t pids,
                      char *why, size_t whylen)
{
	char v[64];
	int rc = 0;
	if (cg->ctl & CG_CPU) {
		int64_t quota = -1;
		if (lim->cpu > 0) {
			quota = (int64_t)(lim->cpu * CPU_PERIOD_US + 0.5);
			if (quota < CPU_QUOTA_MIN)
				quota = CPU_QUOTA_MIN;
		}
		if (cg->version == 1) {
			snprintf(v, sizeof(v), "%d", CPU_PERIOD_US);
			rc = set_file(cg, CG_CPU, name, "cpu.cfs_period_us", v, why, whylen);
			snprintf(v, sizeof(v), "%lld", (long long)quota);
			if (rc == 0)
				rc = set_file(cg, CG_CPU, name, "cpu.cfs_quota_us", v, why, whylen);
		} else {
			if (quota < 0)
				snprintf(v, sizeof(v), "max %d", CPU_PERIOD_US);
			else
				snprintf(v, sizeof(v), "%lld %d", (long long)quota, CPU_PERIOD_US);
			rc = set_file(cg, CG_CPU, name, "cpu.max", v, why, whylen);
		}
		if (rc < 0)
			return rc;
	}
	if (cg->ctl & CG_MEMORY) {
		if (lim->memory_mb > 0)
			snprintf(v, sizeof(v), "%lld", (long long)(lim->memory_mb * MIB));
		else
			snprintf(v, sizeof(v), "%s", cg->version == 1 ? "-1" : "max");
		if (cg->version == 1) {
			/* memory+swap may not be below memory alone: lowering goes memory first,
			 * raising (a reused cgroup, or no limit) memsw first. */
			bool memsw = has_file(cg, CG_MEMORY, name, "memory.memsw.limit_in_bytes");
			rc = set_file(cg, CG_MEMORY, name, "memory.limit_in_bytes", v, why, whylen);
			if (rc == -EINVAL && memsw) {
				rc = set_file(cg, CG_MEMORY, name, "memory.memsw.limit_in_bytes", v,
				              why, whylen);
				if (rc == 0)
					rc = set_file(cg, CG_MEMORY, name, "memory.limit_in_bytes",
					              v, why, whylen);
			}
			if (rc == 0 && memsw)
				rc = set_file(cg, CG_MEMORY, name, "memory.memsw.limit_in_bytes", v,
				              why, whylen);
		} else {
			rc = set_file(cg, CG_MEMORY, name, "memory.max", v, why, whylen);
			/* No swap on top of the limit, or a hog swaps instead of being stopped. */
			if (rc == 0 && has_file(cg, CG_MEMORY, name, "memory.swap.max"))
				rc = set_file(cg, CG_MEMORY, name, "memory.swap.max",
				              lim->memory_mb > 0 ? "0" : "max", why, whylen);
		}
		if (rc < 0)
			return rc;
	}
	if (cg->ctl & CG_PIDS) {
		if (pids > 0)
			snprintf(v, sizeof(v), "%lld", (long long)pids);
		else
			snprintf(v, sizeof(v), "max");
		rc = set_file(cg, CG_PIDS, name, "pids.max", v, why, whylen);
	}
	return rc;
}

/* Thaws name's cgroup, in case a kill that froze it was itself interrupted: a process
 * joining a frozen cgroup would stop at once. */
static int thaw(const bw_cgroups *cg, const char *name)
{
	if (cg->version == 1 && (cg->ctl & CG_FREEZER))
		return set_file(cg, CG_FREEZER, name, "freezer.state", "THAWED", NULL, 0);
	if (cg->version == 2 && cg->freeze_file)
		return set_file(cg, 0, name, "cgroup.freeze", "0", NULL, 0);
	return 0;
}

int bw_cgroup_create(const bw_cgroups *cg, const char *name, const bw_limits *lim, char *why,
                     size_t whylen)
{
	static const bw_limits defaults = {0, 0, 0};
	if (why && whylen)
		why[0] = '\0';
	if (!lim)
		lim = &defaults;
	if (!bw_cgroup_name_ok(name))
		return fail(why, whylen, EINVAL,
		            "bad cgroup name \"%s\": 1 to 64 of A-Z a-z 0-9 . _ -, starting with a "
		            "letter or digit",
		            name ? name : "(null)");
	if (!(lim->cpu >= 0 && lim->cpu <= CPU_MAX)) /* also NaN */
		return fail(why, whylen, EINVAL, "cpu %g is out of range (0 to %g)", lim->cpu,
		            CPU_MAX);
	if (lim->memory_mb < 0 || lim->memory_mb > INT64_MAX / MIB)
		return fail(why, whylen, EINVAL, "memory_mb %lld is out of range",
		            (long long)lim->memory_mb);
	if (lim->pids < -1)
		return fail(why, whylen, EINVAL,
		            "pids %lld is out of range (-1 for none, 0 for %d)",
		            (long long)lim->pids, BW_CGROUP_DEFAULT_PIDS);
	int64_t pids = lim->pids == 0 ? BW_CGROUP_DEFAULT_PIDS : lim->pids;
	int rc = check_controllers(cg, lim, pids, why, whylen);
	if (rc < 0)
		return rc;

	bool made[4] = {false};
	for (size_t i = 0; i < cg->n && rc == 0; i++) {
		char dir[PATH_MAX];
		if (join(dir, sizeof(dir), cg->h[i].parent, name, NULL) < 0) {
			rc = fail(why, whylen, ENAMETOOLONG, "the path %s/%s is too long",
			          cg->h[i].parent, name);
			break;
		}
		int r = make_dir(dir);
		if (r < 0)
			rc = fail(why, whylen, -r, "cannot create the cgroup %s: %s%s", dir,
			          strerror(-r), privilege_hint(-r));
		made[i] = r == 1;
	}
	if (rc == 0) {
		rc = thaw(cg, name);
		if (rc < 0)
			fail(why, whylen, -rc, "cannot thaw the cgroup %s: %s", name,
			     strerror(-rc));
	}
	if (rc == 0)
		rc = set_limits(cg, name, lim, pids, why, whylen);
	if (rc < 0)
		for (size_t i = 0; i < cg->n; i++) {
			char dir[PATH_MAX];
			if (made[i] && join(dir, sizeof(dir), cg->h[i].parent, name, NULL) == 0)
				rmdir(dir);
		}
	return rc;
}

/* ---- joining ---------------------------------------------------------------------------- */

int bw_cgroup_open_procs(const bw_cgroups *cg, const char *name, int *fds, size_t *n)
{
	*n = 0;
	if (!bw_cgroup_name_ok(name))
		return -EINVAL;
	for (size_t i = 0; i < cg->n && i < BW_CGROUP_MAX_FDS; i++) {
		char path[PATH_MAX];
		int fd = -1, rc = join(path, sizeof(path), cg->h[i].parent, name, "cgroup.procs");
		if (rc == 0 && (fd = open(path, O_WRONLY | O_CLOEXEC)) < 0)
			rc = -errno;
		if (rc < 0) {
			bw_cgroup_close_fds(fds, *n);
			*n = 0;
			return rc;
		}
		fds[(*n)++] = fd;
	}
	return 0;
}

int bw_cgroup_join(const int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		ssize_t w;
		do
			w = write(fds[i], "0", 1);
		while (w < 0 && errno == EINTR);
		if (w < 0)
			return -errno;
		if (w != 1)
			return -EIO;
	}
	return 0;
}

void bw_cgroup_close_fds(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fds[i] >= 0) {
			close(fds[i]);
			fds[i] = -1;
		}
}

/* ---- killing and removing ------------------------------------------------------------- */

struct pidset {
	pid_t *v;
	size_t n, cap;
};

/* Appends pid; duplicates are kept (a v1 process is listed once per hierarchy) and counted
 * once by distinct(): linear look-ups would be quadratic in a cgroup without a task limit. */
static int pidset_add(struct pidset *s, pid_t pid)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		pid_t *v = realloc(s->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = pid;
	return 0;
}

static int pid_order(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return (x > y) - (x < y);
}

static size_t distinct(struct pidset *s)
{
	if (s->n == 0)
		return 0;
	qsort(s->v, s->n, sizeof(*s->v), pid_order);
	size_t n = 1;
	for (size_t i = 1; i < s->n; i++)
		n += s->v[i] != s->v[i - 1];
	return n;
}

/* Adds the processes of the cgroup dir and of the cgroups below it. A dir that does not
 * exist has none. A process outside our PID namespace is listed as 0 and left out: we can
 * neither see nor signal it, and a sandbox started from here cannot hold one. */
static int collect(const char *dir, int depth, struct pidset *s)
{
	char path[PATH_MAX];
	char *text;
	if (join(path, sizeof(path), dir, "cgroup.procs", NULL) < 0)
		return -ENAMETOOLONG;
	int rc = read_all(path, &text);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	for (char *p = text; *p && rc >= 0;) {
		char *end;
		long pid = strtol(p, &end, 10);
		if (end == p)
			break;
		if (pid > 0)
			rc = pidset_add(s, (pid_t)pid);
		p = end + (*end == '\n');
	}
	free(text);
	if (rc < 0 || depth >= MAX_DEPTH)
		return rc < 0 ? rc : 0;
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	struct dirent *e;
	while (rc >= 0 && (e = readdir(d)) != NULL)
		if (e->d_type == DT_DIR && strcmp(e->d_name, ".") != 0 &&
		    strcmp(e->d_name, "..") != 0) {
			rc = join(path, sizeof(path), dir, e->d_name, NULL);
			if (rc == 0)
				rc = collect(path, depth + 1, s);
		}
	closedir(d);
	return rc < 0 ? rc : 0;
}

/* The processes in name's cgroup, in any hierarchy. *present: whether the cgroup exists. */
static int list_procs(const bw_cgroups *cg, const char *name, struct pidset *s, bool *present)
{
	s->n = 0;
	*present = false;
	for (size_t i = 0; i < cg->n; i++) {
		char dir[PATH_MAX];
		if (join(dir, sizeof(dir), cg->h[i].parent, name, NULL) < 0)
			return -ENAMETOOLONG;
		*present |= exists(dir);
		int rc = collect(dir, 0, s);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Waits until name's cgroup holds no process, or until the deadline. 0 or -ETIMEDOUT. */
static int wait_empty(const bw_cgroups *cg, const char *name, int64_t deadline, struct pidset *s)
{
	long pause_us = 500;
	for (;;) {
		bool present;
		int rc = list_procs(cg, name, s, &present);
		if (rc < 0)
			return rc;
		if (s->n == 0)
			return 0;
		if (now_ms() >= deadline)
			return -ETIMEDOUT;
		sleep_us(pause_us);
		if (pause_us < 10000)
			pause_us *= 2;
	}
}

/* Freezes name's cgroup and waits, briefly, until it is. Whether it got frozen: a task
 * stuck in the kernel may keep it "FREEZING", and then the kill goes ahead unfrozen. */
static bool freeze(const bw_cgroups *cg, const char *name)
{
	char path[PATH_MAX], state[256];
	const char *file, *want;
	if (cg->version == 1 && (cg->ctl & CG_FREEZER)) {
		if (set_file(cg, CG_FREEZER, name, "freezer.state", "FROZEN", NULL, 0) < 0)
			return false;
		file = "freezer.state";
		want = "FROZEN\n";
	} else if (cg->version == 2 && cg->freeze_file) {
		if (set_file(cg, 0, name, "cgroup.freeze", "1", NULL, 0) < 0)
			return false;
		file = "cgroup.events";
		want = "frozen 1";
	} else {
		return false;
	}
	int i = hierarchy_of(cg, cg->version == 1 ? CG_FREEZER : 0);
	if (i < 0 || join(path, sizeof(path), cg->h[i].parent, name, file) < 0)
		return false;
	int64_t until = now_ms() + FREEZE_WAIT_MS;
	for (long pause_us = 100;; pause_us = pause_us < 5000 ? pause_us * 2 : pause_us) {
		if (read_text(path, state, sizeof(state)) < 0)
			return false;
		if (cg->version == 1 ? strcmp(state, want) == 0 : strstr(state, want) != NULL)
			return true;
		if (now_ms() >= until)
			return false;
		sleep_us(pause_us);
	}
}

/*
 * Kills by signalling each listed process. Without freezing, a process may fork between
 * being listed and being killed (the next round gets the child), or exit and have its pid
 * reused by an unrelated process in that instant: frozen, processes neither fork nor exit,
 * so the pids listed are the ones signalled. SIGKILL is fatal even to frozen tasks, but
 * under the v1 freezer takes effect only on thawing, hence thaw after each round.
 */
static int kill_by_signal(const bw_cgroups *cg, const char *name, int64_t deadline,
                          struct pidset *killed)
{
	struct pidset now = {0};
	int rc = 0;
	while (rc == 0) {
		freeze(cg, name);
		bool present;
		rc = list_procs(cg, name, &now, &present);
		for (size_t i = 0; rc == 0 && i < now.n; i++)
			if (kill(now.v[i], SIGKILL) == 0)
				rc = pidset_add(killed, now.v[i]);
		if (present)
			thaw(cg, name);
		if (rc < 0 || now.n == 0)
			break;
		int64_t round = now_ms() + ROUND_WAIT_MS;
		rc = wait_empty(cg, name, round < deadline ? round : deadline, &now);
		if (rc == 0)
			break;
		if (rc == -ETIMEDOUT && now_ms() < deadline)
			rc = 0; /* another round: someone forked, or it is slow to exit */
	}
	free(now.v);
	return rc;
}

int bw_cgroup_kill(const bw_cgroups *cg, const char *name)
{
	if (!bw_cgroup_name_ok(name))
		return -EINVAL;
	int64_t deadline = now_ms() + KILL_WAIT_MS;
	struct pidset killed = {0};
	int rc;
	if (cg->version == 2 && cg->kill_file) {
		/* The kernel kills the whole subtree, forks in flight included. */
		bool present;
		rc = list_procs(cg, name, &killed, &present);
		if (rc == 0 && present) {
			struct pidset left = {0};
			rc = set_file(cg, 0, name, "cgroup.kill", "1", NULL, 0);
			if (rc == 0)
				rc = wait_empty(cg, name, deadline, &left);
			free(left.v);
		}
	} else {
		rc = kill_by_signal(cg, name, deadline, &killed);
	}
	size_t n = distinct(&killed);
	free(killed.v);
	return rc < 0 ? rc : (int)n;
}

/* rmdir of a cgroup and the ones below it, deepest first. Absent is fine. */
static int remove_tree(const char *dir, int depth)
{
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	struct dirent *e;
	int rc = 0;
	while (rc == 0 && (e = readdir(d)) != NULL)
		if (e->d_type == DT_DIR && strcmp(e->d_name, ".") != 0 &&
		    strcmp(e->d_name, "..") != 0) {
			char sub[PATH_MAX];
			rc = depth >= MAX_DEPTH ? -ELOOP
			                        : join(sub, sizeof(sub), dir, e->d_name, NULL);
			if (rc == 0)
				rc = remove_tree(sub, depth + 1);
		}
	closedir(d);
	if (rc == 0 && rmdir(dir) != 0 && errno != ENOENT)
		rc = -errno;
	return rc;
}

int bw_cgroup_remove(const bw_cgroups *cg, const char *name)
{
	int rc = bw_cgroup_kill(cg, name);
	if (rc < 0)
		return rc;
	int64_t deadline = now_ms() + RMDIR_WAIT_MS;
	for (size_t i = 0; i < cg->n; i++) {
		char dir[PATH_MAX];
		if (join(dir, sizeof(dir), cg->h[i].parent, name, NULL) < 0)
			return -ENAMETOOLONG;
		/* An emptied cgroup can stay busy for a moment while the kernel lets go of it. */
		while ((rc = remove_tree(dir, 0)) == -EBUSY && now_ms() < deadline)
			sleep_us(2000);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int64_t bw_cgroup_oom_kills(const bw_cgroups *cg, const char *name)
{
	char path[PATH_MAX], text[1024];
	const char *file = cg->version == 1 ? "memory.oom_control" : "memory.events";
	if (!(cg->ctl & CG_MEMORY) ||
	    bw_cgroup_file(cg, "memory", name, file, path, sizeof(path)) < 0 ||
	    read_text(path, text, sizeof(text)) < 0)
		return -1;
	return keyed_value(text, "oom_kill");
}
