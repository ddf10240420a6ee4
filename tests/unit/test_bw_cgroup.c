/*
 * tests/unit/test_bw_cgroup.c - plugins/bubblewrap/bw_cgroup.c against this machine's real
 * cgroup hierarchy (v1 or v2, whichever carries the controllers): the probe, the limits
 * as the kernel reads them back, joining, the task and memory limits biting for real,
 * killing a cgroup of processes that try to get away, and removal. When a cgroup2 mount
 * without the controllers sits beside v1 (a "hybrid" host, /sys/fs/cgroup/unified), the
 * v2 code is run there too, both killing ways, and limits it cannot enforce refused.
 *
 * Needs root, or a delegated cgroup v2 subtree: without either every test fails saying so,
 * unless AKS_TEST_UNPRIVILEGED=1 says the run is meant to be unprivileged; then each test
 * checks instead that the probe fails with a reason an operator can act on.
 *
 * Everything is made under the parent "aksandbox-test-<pid>" (beneath this process's own
 * cgroups) and removed in each test's teardown, also when the test failed. The test process
 * is a child subreaper, so the orphans the tests make come back to it and are reaped.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "bw_cgroup.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

static char parent[64];   /* "aksandbox-test-<pid>" */
static bool unprivileged; /* AKS_TEST_UNPRIVILEGED=1 */

struct fixture {
	bw_cgroups *cg;
	int rc; /* the probe's */
	char why[BW_CGROUP_WHY_SIZE];
	bool no_v2; /* a v2 test on a host without a cgroup2 mount */
	const char *v2_mount;
	unsigned flags;
	const char *names[4]; /* cgroups to remove in the teardown */
	size_t n_names;
	pid_t pids[8]; /* processes to kill in the teardown */
	size_t n_pids;
};

/* ---- fixtures ---- */

static int setup_with(void **state, const char *v2_mount, unsigned flags)
{
	struct fixture *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	if (v2_mount) {
		struct statfs sf;
		f->v2_mount = v2_mount;
		f->flags = flags;
		f->no_v2 = statfs(v2_mount, &sf) != 0 || sf.f_type != CGROUP2_SUPER_MAGIC;
		if (!f->no_v2)
			f->rc = bw_cgroup_probe_v2(v2_mount, parent, flags, &f->cg, f->why,
			                           sizeof(f->why));
	} else {
		f->rc = bw_cgroup_probe(parent, &f->cg, f->why, sizeof(f->why));
	}
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_with(state, NULL, 0);
}

/* The cgroup2 mount of a hybrid host, or on a v2-only host the hierarchy itself. */
static const char *v2_mount(void)
{
	struct statfs sf;
	if (statfs("/sys/fs/cgroup/unified", &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC)
		return "/sys/fs/cgroup/unified";
	return "/sys/fs/cgroup";
}

static int setup_v2(void **state)
{
	return setup_with(state, v2_mount(), 0);
}

static int setup_v2_no_kill_file(void **state)
{
	return setup_with(state, v2_mount(), BW_CGROUP_NO_KILL_FILE);
}

static void reap_all(void)
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	int rc = 0;
	for (size_t i = 0; i < f->n_pids; i++)
		if (f->pids[i] > 0)
			kill(f->pids[i], SIGKILL);
	for (size_t i = 0; i < f->n_pids; i++)
		if (f->pids[i] > 0)
			waitpid(f->pids[i], NULL, 0);
	if (f->cg) {
		for (size_t i = 0; i < f->n_names; i++) {
			int r = bw_cgroup_remove(f->cg, f->names[i]);
			if (r < 0) {
				fprintf(stderr, "teardown: cannot remove cgroup %s: %s\n",
				        f->names[i], strerror(-r));
				rc = -1;
			}
		}
		reap_all();
		int r = bw_cgroup_remove_parent(f->cg);
		if (r < 0) {
			fprintf(stderr, "teardown: cannot remove the parent: %s\n", strerror(-r));
			rc = -1;
		}
		bw_cgroup_free(f->cg);
	}
	reap_all();
	free(f);
	return rc;
}

/*
 * The probe's result for a test that needs cgroups, or NULL when the run is unprivileged
 * and the probe failed as it must there (checked here); a root-less run without
 * AKS_TEST_UNPRIVILEGED=1 fails: it would prove nothing.
 */
static bw_cgroups *need_cgroups(struct fixture *f)
{
	if (f->no_v2)
		skip();
	if (f->cg)
		return f->cg;
	if (!unprivileged)
		fail_msg("cannot make cgroups here (euid %d): %s. These tests need root or a "
		         "delegated cgroup v2 subtree; an unprivileged run sets "
		         "AKS_TEST_UNPRIVILEGED=1 and then only checks that the probe fails saying "
		         "why",
		         (int)geteuid(), f->why);
	assert_true(f->rc < 0);
	if (!strstr(f->why, "cannot create") || !strstr(f->why, "run as root"))
		fail_msg("the unprivileged probe failed without saying why clearly: %s", f->why);
	print_message("unprivileged, as expected: %s\n", f->why);
	return NULL;
}

static void keep_name(struct fixture *f, const char *name)
{
	f->names[f->n_names++] = name;
}

/* ---- reading the hierarchy ---- */

static void read_cg_file(const bw_cgroups *cg, const char *controller, const char *name,
                         const char *file, char *buf, size_t len)
{
	char path[4096];
	assert_int_equal(bw_cgroup_file(cg, controller, name, file, path, sizeof(path)), 0);
	FILE *fp = fopen(path, "r");
	if (!fp)
		fail_msg("cannot open %s: %s", path, strerror(errno));
	size_t n = fread(buf, 1, len - 1, fp);
	fclose(fp);
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0'; /* the first line */
}

static void expect_file(const bw_cgroups *cg, const char *controller, const char *name,
                        const char *file, const char *want)
{
	char got[256];
	read_cg_file(cg, controller, name, file, got, sizeof(got));
	if (strcmp(got, want) != 0)
		fail_msg("%s of %s: \"%s\", expected \"%s\"", file, name, got, want);
}

/* How many processes the i-th hierarchy lists for name; whether pid is one of them. */
static size_t procs_in(const bw_cgroups *cg, size_t i, const char *name, pid_t pid, bool *has)
{
	char dir[4096], path[4200], line[32];
	assert_int_equal(bw_cgroup_dir(cg, i, name, dir, sizeof(dir)), 0);
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	FILE *fp = fopen(path, "r");
	if (!fp)
		fail_msg("cannot open %s: %s", path, strerror(errno));
	size_t n = 0;
	if (has)
		*has = false;
	while (fgets(line, sizeof(line), fp)) {
		n++;
		if (has && atol(line) == (long)pid)
			*has = true;
	}
	fclose(fp);
	return n;
}

static bool gone(const bw_cgroups *cg, const char *name)
{
	for (size_t i = 0; i < bw_cgroup_hierarchies(cg); i++) {
		char dir[4096];
		assert_int_equal(bw_cgroup_dir(cg, i, name, dir, sizeof(dir)), 0);
		if (access(dir, F_OK) == 0)
			return false;
	}
	return true;
}

static double elapsed_ms(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) * 1e3 + (double)(t1.tv_nsec - t0->tv_nsec) / 1e6;
}

/* ---- children ---- */

/* What a child reports through its pipe after joining. */
struct report {
	int join_err; /* 0, or the errno of bw_cgroup_join */
	int forks;    /* children made */
	int fork_err; /* the errno of the fork that failed, 0 if none did */
	pid_t pids[50];
};

static void write_all(int fd, const void *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			_exit(121);
		p = (const char *)p + w;
		n -= (size_t)w;
	}
}

static void die_with_parent(void)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
}

static void pause_forever(void)
{
	for (;;)
		pause();
}

enum body {
	PAUSE,   /* just stay */
	FORK_50, /* fork up to 50 children that pause, report how many */
	EAT_200, /* touch 200 MiB, 1 MiB at a time */
	SCATTER, /* start processes that try to get away, report their pids */
};

static void child_body(enum body what, int wfd, struct report *r)
{
	switch (what) {
	case PAUSE:
		write_all(wfd, r, sizeof(*r));
		pause_forever();
		break;
	case FORK_50:
		for (int i = 0; i < 50; i++) {
			pid_t p = fork();
			if (p == 0) {
				die_with_parent();
				pause_forever();
			}
			if (p < 0) {
				r->fork_err = errno;
				break;
			}
			r->pids[r->forks++] = p;
		}
		write_all(wfd, r, sizeof(*r));
		pause_forever();
		break;
	case EAT_200:
		write_all(wfd, r, sizeof(*r));
		for (int i = 0; i < 200; i++) {
			char *p = malloc(1 << 20);
			if (!p)
				_exit(122);
			memset(p, i + 1, 1 << 20); /* touched, so really charged */
		}
		_exit(0); /* the limit did not bite */
	case SCATTER: {
		pid_t p = fork(); /* one that ignores SIGTERM */
		if (p == 0) {
			signal(SIGTERM, SIG_IGN);
			pause_forever();
		}
		r->pids[r->forks++] = p;
		p = fork(); /* one in a session of its own */
		if (p == 0) {
			setsid();
			pause_forever();
		}
		r->pids[r->forks++] = p;
		int pfd[2];
		if (pipe(pfd) != 0)
			_exit(123);
		p = fork(); /* an orphan: double-forked, its parent gone */
		if (p == 0) {
			pid_t q = fork();
			if (q == 0) {
				close(pfd[0]);
				setsid();
				signal(SIGTERM, SIG_IGN);
				signal(SIGHUP, SIG_IGN);
				write_all(pfd[1], &(pid_t){getpid()}, sizeof(pid_t));
				pause_forever();
			}
			_exit(0);
		}
		close(pfd[1]);
		pid_t orphan = -1;
		if (read(pfd[0], &orphan, sizeof(orphan)) != sizeof(orphan))
			_exit(124);
		waitpid(p, NULL, 0);
		r->pids[r->forks++] = orphan;
		write_all(wfd, r, sizeof(*r));
		pause_forever();
		break;
	}
	}
	_exit(125);
}

/* Forks a child that joins name's cgroup through the descriptors of bw_cgroup_open_procs
 * and then does what; returns once it has reported, with the report. */
static pid_t spawn_in(struct fixture *f, const char *name, enum body what, struct report *r)
{
	int fds[BW_CGROUP_MAX_FDS];
	size_t n = 0;
	int rc = bw_cgroup_open_procs(f->cg, name, fds, &n);
	if (rc < 0)
		fail_msg("bw_cgroup_open_procs(%s): %s", name, strerror(-rc));
	assert_int_equal(n, bw_cgroup_hierarchies(f->cg));
	int pfd[2];
	assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		die_with_parent();
		close(pfd[0]);
		struct report mine;
		memset(&mine, 0, sizeof(mine));
		mine.join_err = -bw_cgroup_join(fds, n);
		bw_cgroup_close_fds(fds, n);
		if (mine.join_err) {
			write_all(pfd[1], &mine, sizeof(mine));
			_exit(126);
		}
		child_body(what, pfd[1], &mine);
	}
	f->pids[f->n_pids++] = pid;
	bw_cgroup_close_fds(fds, n);
	close(pfd[1]);
	memset(r, 0, sizeof(*r));
	ssize_t got = read(pfd[0], r, sizeof(*r));
	close(pfd[0]);
	if (got != (ssize_t)sizeof(*r))
		fail_msg("the child in %s did not report (%zd)", name, got);
	if (r->join_err)
		fail_msg("the child could not join %s: %s", name, strerror(r->join_err));
	return pid;
}

/* The wait status of pid, which must end within 5 s. */
static int wait_for(struct fixture *f, pid_t pid)
{
	int status = 0;
	for (int i = 0; i < 5000; i++) {
		pid_t w = waitpid(pid, &status, WNOHANG);
		if (w == pid) {
			for (size_t j = 0; j < f->n_pids; j++)
				if (f->pids[j] == pid)
					f->pids[j] = 0;
			return status;
		}
		assert_int_equal(w, 0);
		usleep(1000);
	}
	fail_msg("process %d did not end", (int)pid);
	return -1;
}

/* Whether pid is gone for good (reaped, or never ours). */
static bool dead(pid_t pid)
{
	reap_all();
	return kill(pid, 0) != 0 && errno == ESRCH;
}

/* ---- the probe ---- */

static void test_probe_describes(void **state)
{
	struct fixture *f = *state;
	bw_cgroups *cg = need_cgroups(f);
	if (!cg)
		return;
	const char *d = bw_cgroup_describe(cg);
	print_message("%s\n", d);
	assert_non_null(strstr(d, parent));
	if (bw_cgroup_version(cg) == 1) {
		assert_non_null(strstr(d, "cgroup v1:"));
		assert_true(bw_cgroup_has(cg, "cpu"));
		assert_true(bw_cgroup_has(cg, "memory"));
		assert_true(bw_cgroup_has(cg, "pids"));
		assert_true(bw_cgroup_hierarchies(cg) >= 3);
	} else {
		assert_int_equal(bw_cgroup_version(cg), 2);
		assert_non_null(strstr(d, "cgroup v2 at "));
		assert_int_equal(bw_cgroup_hierarchies(cg), 1);
	}
	assert_false(bw_cgroup_has(cg, "cpuset"));
	assert_false(bw_cgroup_has(cg, "nonsense"));
	/* The parent is there in each hierarchy, and under this process's own cgroup. */
	for (size_t i = 0; i < bw_cgroup_hierarchies(cg); i++) {
		char dir[4096];
		struct stat st;
		assert_int_equal(bw_cgroup_dir(cg, i, NULL, dir, sizeof(dir)), 0);
		if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
			fail_msg("the parent %s is missing", dir);
		assert_non_null(strstr(dir, parent));
	}
	assert_int_equal(bw_cgroup_dir(cg, bw_cgroup_hierarchies(cg), NULL, (char[8]){0}, 8),
	                 -ENOENT);
}

/* Bad parents are refused before anything is touched; an absolute parent is taken from the
 * top of each hierarchy. */
static void test_probe_absolute_and_bad_parents(void **state)
{
	struct fixture *f = *state;
	char abs_parent[80], why[BW_CGROUP_WHY_SIZE];
	bw_cgroups *cg = NULL;
	const char *bad[] = {"", "/", "../up", "a/../b", "a/./b", "a//b", "a/", "tab\there"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cg = (bw_cgroups *)1;
		why[0] = '\0';
		int rc = bw_cgroup_probe(bad[i], &cg, why, sizeof(why));
		if (rc != -EINVAL)
			fail_msg("parent \"%s\" was not refused: %d", bad[i], rc);
		assert_null(cg);
		assert_non_null(strstr(why, "bad cgroup parent"));
	}

	if (!need_cgroups(f))
		return;
	snprintf(abs_parent, sizeof(abs_parent), "/%s-abs", parent);
	int rc = bw_cgroup_probe(abs_parent, &cg, why, sizeof(why));
	if (rc < 0)
		fail_msg("probe %s: %s", abs_parent, why);
	char dir[4096];
	assert_int_equal(bw_cgroup_dir(cg, 0, NULL, dir, sizeof(dir)), 0);
	print_message("absolute parent: %s\n", dir);
	rc = strncmp(dir, "/sys/fs/cgroup/", 15) == 0 && strstr(dir, abs_parent) ? 0 : -1;
	int removed = bw_cgroup_remove_parent(cg);
	bool still = access(dir, F_OK) == 0;
	bw_cgroup_free(cg);
	assert_int_equal(rc, 0);
	assert_int_equal(removed, 0);
	assert_false(still);
}

/* ---- names and limits ---- */

static void test_name_rules(void **state)
{
	(void)state;
	char longest[65], too_long[66];
	memset(longest, 'x', sizeof(longest) - 1);
	longest[sizeof(longest) - 1] = '\0';
	memset(too_long, 'x', sizeof(too_long) - 1);
	too_long[sizeof(too_long) - 1] = '\0';
	const char *good[] = {"sbx-1", "a", "A.b_c-9", "0x", longest};
	const char *bad[] = {"",        ".",  "..",  "../x", "a/b",      "/a", "-x",
	                     ".hidden", "_x", "a b", "a\nb", "\xc3\xa9", NULL, too_long};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		if (!bw_cgroup_name_ok(good[i]))
			fail_msg("\"%s\" was refused", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (bw_cgroup_name_ok(bad[i]))
			fail_msg("\"%s\" was accepted", bad[i] ? bad[i] : "(null)");
}

static void test_create_refuses_bad_names_and_limits(void **state)
{
	struct fixture *f = *state;
	bw_cgroups *cg = need_cgroups(f);
	if (!cg)
		return;
	char why[BW_CGROUP_WHY_SIZE];
	const char *names[] = {"a/b", "..", ".", "../escape", ""};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		assert_int_equal(bw_cgroup_create(cg, names[i], NULL, why, sizeof(why)), -EINVAL);
		assert_non_null(strstr(why, "bad cgroup name"));
		assert_int_equal(bw_cgroup_kill(cg, names[i]), -EINVAL);
		assert_int_equal(bw_cgroup_remove(cg, names[i]), -EINVAL);
	}
	const bw_limits bad[] = {{-1, 0, 0}, {NAN, 0, 0},       {INFINITY, 0, 0},
	                         {0, -5, 0}, {0, INT64_MAX, 0}, {0, 0, -2}};
	keep_name(f, "badlim");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(bw_cgroup_create(cg, "badlim", &bad[i], why, sizeof(why)),
		                 -EINVAL);
		assert_non_null(strstr(why, "out of range"));
	}
	assert_true(gone(cg, "badlim"));
}

static void test_create_sets_limits(void **state)
{
	struct fixture *f = *state;
	bw_cgroups *cg = need_cgroups(f);
	if (!cg)
		return;
	char why[BW_CGROUP_WHY_SIZE];
	const char *n = "limits";
	keep_name(f, n);
	bool v1 = bw_cgroup_version(cg) == 1;
	bool memsw = false;
	char path[4096];

	bw_limits lim = {.cpu = 0.5, .memory_mb = 32, .pids = 8};
	if (bw_cgroup_create(cg, n, &lim, why, sizeof(why)) != 0)
		fail_msg("create: %s", why);
	if (v1) {
		expect_file(cg, "cpu", n, "cpu.cfs_period_us", "100000");
		expect_file(cg, "cpu", n, "cpu.cfs_quota_us", "50000");
		expect_file(cg, "memory", n, "memory.limit_in_bytes", "33554432");
		assert_int_equal(bw_cgroup_file(cg, "memory", n, "memory.memsw.limit_in_bytes",
		                                path, sizeof(path)),
		                 0);
		memsw = access(path, F_OK) == 0;
		if (memsw)
			expect_file(cg, "memory", n, "memory.memsw.limit_in_bytes", "33554432");
		else
			print_message("no memory.memsw files (no swap accounting)\n");
	} else {
		if (bw_cgroup_has(cg, "cpu"))
			expect_file(cg, "cpu", n, "cpu.max", "50000 100000");
		if (bw_cgroup_has(cg, "memory"))
			expect_file(cg, "memory", n, "memory.max", "33554432");
	}
	expect_file(cg, "pids", n, "pids.max", "8");

	/* Again, with more of everything: the same cgroup, raised (memory+swap first). */
	lim = (bw_limits){.cpu = 2, .memory_mb = 64, .pids = 0};
	if (bw_cgroup_create(cg, n, &lim, why, sizeof(why)) != 0)
		fail_msg("create again: %s", why);
	if (v1) {
		expect_file(cg, "cpu", n, "cpu.cfs_quota_us", "200000");
		expect_file(cg, "memory", n, "memory.limit_in_bytes", "67108864");
		if (memsw)
			expect_file(cg, "memory", n, "memory.memsw.limit_in_bytes", "67108864");
	}
	expect_file(cg, "pids", n, "pids.max", "512"); /* BW_CGROUP_DEFAULT_PIDS */

	/* Lowered again, and a cpu below the kernel's smallest quota gets that quota. */
	lim = (bw_limits){.cpu = 0.001, .memory_mb = 16, .pids = 100};
	if (bw_cgroup_create(cg, n, &lim, why, sizeof(why)) != 0)
		fail_msg("create lowered: %s", why);
	if (v1) {
		expect_file(cg, "cpu", n, "cpu.cfs_quota_us", "1000");
		expect_file(cg, "memory", n, "memory.limit_in_bytes", "16777216");
		if (memsw)
			expect_file(cg, "memory", n, "memory.memsw.limit_in_bytes", "16777216");
	}
	expect_file(cg, "pids", n, "pids.max", "100");

	/* And with none: every limit reset, so a reused cgroup has exactly the profile's. */
	lim = (bw_limits){.cpu = 0, .memory_mb = 0, .pids = -1};
	if (bw_cgroup_create(cg, n, &lim, why, sizeof(why)) != 0)
		fail_msg("create without limits: %s", why);
	if (v1) {
		expect_file(cg, "cpu", n, "cpu.cfs_quota_us", "-1");
		char got[64];
		read_cg_file(cg, "memory", n, "memory.limit_in_bytes", got, sizeof(got));
		assert_true(strtoull(got, NULL, 10) > (1ULL << 62)); /* "no limit", page-rounded */
	}
	expect_file(cg, "pids", n, "pids.max", "max");
	assert_int_equal(bw_cgroup_remove(cg, n), 0);
	assert_true(gone(cg, n));
}

/* ---- joining ---- */

static void test_join(void **state)
{
	struct fixture *f = *state;
	bw_cgroups *cg = need_cgroups(f);
	if (!cg)
		return;
	char why[BW_CGROUP_WHY_SIZE];
	const char *n = "join";
	keep_name(f, n);
	bw_limits lim = {.cpu = 1, .memory_mb = 256, .pids = 16};
	if (bw_cgroup_create(cg, n, &lim, why, sizeof(why)) != 0)
		fail_msg("create: %s", why);
	struct report r;
	pid_t pid = spawn_in(f, n, PAUSE, &r);
	for (size_t i = 0; i < bw_cgroup_hierarchies(cg); i++) {
		bool has;
		assert_int_equal(procs_in(cg, i, n, pid, &has), 1);
		assert_true(has);
	}
	/* And the kernel says so from the process's side. */
	char path[64], text[4096];
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	FILE *fp = fopen(path, "r");
	assert_non_null(fp);
	text[fread(text, 1, sizeof(text) - 1, fp)] = '\0';
	fclose(fp);
	char want[128];
	snprintf(want, sizeof(want), "/%s/%s\n", parent, n);
	assert_non_null(strstr(text, want));

	assert_int_equal(bw_cgroup_remove(cg, n), 0);
	int status = wait_for(f, pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGKILL);
	assert_true(gone(cg, n));
}

/* ---- the limits biting ---- */

static void test_pids_limit_bites(void **state)
{
	struct fixture *f = *state;
	bw_cgroups *cg = need_cgroups(f);
	if (!cg)
		return;
	if (!bw_cgroup_has(cg, "pids"))
		skip();
	char why[BW_CGROUP_WHY_SIZE];
	const char *n = "pids";
	keep_name(f, n);
	bw_limits lim = {.pids = 8};
	if (bw_cgroup_create(cg, n, &lim, why, sizeof(why)) != 0)
		fail_msg("create: %s", why);
	struct report r;
	pid_t pid = spawn_in(f, n, FORK_50, &r);
	print_message("pids.max 8: %d forks, then %s\n", r.forks, strerror(r.fork_err));
	assert_int_equal(r.fork_err, EAGAIN);
	assert_int_equal(r.forks, 7); /* 8 tasks with the forking one */
	expect_file(cg, "pids", n, "pids.current", "8");
	for (size_t i = 0; i < bw_cgroup_hierarchies(cg); i++)
		assert_int_equal(procs_in(cg, i, n, 0, NULL), 8);

	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int killed = bw_cgroup_kill(cg, n);
	print_message("kill of 8 processes: %d killed in %.1f ms\n", killed, elapsed_ms(&t0));
	assert_int_equal(killed, 8);
	for (size_t i = 0; i < bw_cgroup_hierarchies(cg); i++)
		assert_int_equal(procs_in(cg, i, n, 0, NULL), 0);
	assert_int_equal(bw_cgroup_remove(cg, n), 0);
	assert_true(gone(cg, n));
	int status = wait_for(f, pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	for (int i = 0; i < r.forks; i++)
		if (!dead(r.pids[i]))
			fail_msg("process %d outlived its cgroup", (int)r.pids[i]);
}

static void test_memory_limit_kills(void **state)
{
	struct fixture *f = *state;
	bw_cgroups *cg = need_cgroups(f);
	if (!cg)
		return;
	if (!bw_cgroup_has(cg, "memory"))
		skip();
	char why[BW_CGROUP_WHY_SIZE];
	const char *n = "memory";
	keep_name(f, n);
	bw_limits lim = {.memory_mb = 32};
	if (bw_cgroup_create(cg, n, &lim, why, sizeof(why)) != 0)
		fail_msg("create: %s", why);
	assert_int_equal(bw_cgroup_oom_kills(cg, n), 0);
	struct report r;
	pid_t pid = spawn_in(f, n, EAT_200, &r);
	int status = wait_for(f, pid);
	if (!WIFSIGNALED(status))
		fail_msg("touching 200 MiB under a 32 MiB limit ended with exit %d, not a kill",
		         WEXITSTATUS(status));
	assert_int_equal(WTERMSIG(status), SIGKILL);
	int64_t ooms = bw_cgroup_oom_kills(cg, n);
	print_message("memory_mb 32: killed by SIGKILL, oom_kill %lld\n", (long long)ooms);
	assert_true(ooms >= 1);
	assert_int_equal(bw_cgroup_remove(cg, n), 0);
	assert_int_equal(bw_cgroup_oom_kills(cg, n), -1); /* gone: unknown */
}

/* ---- killing and removing ---- */

/* A cgroup of processes that try to get away: one ignores SIGTERM, one is in its own
 * session, one is an orphan in a session of its own. Each is killed; nothing is left. */
static void kill_scattered(struct fixture *f, const char *n, const char *how)
{
	bw_cgroups *cg = f->cg;
	char why[BW_CGROUP_WHY_SIZE];
	keep_name(f, n);
	bw_limits lim = {.pids = -1};
	if (bw_cgroup_create(cg, n, &lim, why, sizeof(why)) != 0)
		fail_msg("create: %s", why);
	struct report r;
	pid_t pid = spawn_in(f, n, SCATTER, &r);
	assert_int_equal(r.forks, 3);
	bool has;
	assert_int_equal(procs_in(cg, 0, n, r.pids[2], &has), 4);
	assert_true(has);

	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int killed = bw_cgroup_kill(cg, n);
	print_message("kill (cgroup v%d, %s): %d killed in %.1f ms\n", bw_cgroup_version(cg), how,
	              killed, elapsed_ms(&t0));
	assert_int_equal(killed, 4);
	for (size_t i = 0; i < bw_cgroup_hierarchies(cg); i++)
		assert_int_equal(procs_in(cg, i, n, 0, NULL), 0);
	int status = wait_for(f, pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	for (int i = 0; i < r.forks; i++)
		if (!dead(r.pids[i]))
			fail_msg("process %d outlived the kill", (int)r.pids[i]);
	assert_int_equal(bw_cgroup_kill(cg, n), 0); /* empty now */

	assert_int_equal(bw_cgroup_remove(cg, n), 0);
	assert_true(gone(cg, n));
	assert_int_equal(bw_cgroup_remove(cg, n), 0); /* idempotent */
	assert_int_equal(bw_cgroup_kill(cg, n), 0);   /* nothing there */
}

static void test_kill_leaves_nothing(void **state)
{
	struct fixture *f = *state;
	if (!need_cgroups(f))
		return;
	kill_scattered(f, "scatter",
	               bw_cgroup_version(f->cg) == 2     ? "cgroup.kill if the kernel has it"
	               : bw_cgroup_has(f->cg, "freezer") ? "frozen, then signalled"
	                                                 : "signalled");
}

/* ---- cgroup v2 ---- */

/* The v2 code on the cgroup2 mount; on a hybrid host one without cpu, memory and pids, so
 * limits are refused (fail closed) while a cgroup without them still works. */
static void test_v2(void **state)
{
	struct fixture *f = *state;
	bw_cgroups *cg = need_cgroups(f);
	if (!cg)
		return;
	char why[BW_CGROUP_WHY_SIZE];
	print_message("%s\n", bw_cgroup_describe(cg));
	assert_int_equal(bw_cgroup_version(cg), 2);
	assert_non_null(strstr(bw_cgroup_describe(cg), f->v2_mount));
	bool hybrid = strcmp(f->v2_mount, "/sys/fs/cgroup/unified") == 0;
	if (hybrid) {
		assert_false(bw_cgroup_has(cg, "cpu"));
		assert_false(bw_cgroup_has(cg, "memory"));
		assert_false(bw_cgroup_has(cg, "pids"));
		assert_non_null(
		    strstr(bw_cgroup_describe(cg), "no cpu, memory or pids controller"));
	}
	const char *n = "v2";
	keep_name(f, n);
	if (!bw_cgroup_has(cg, "memory")) {
		bw_limits lim = {.memory_mb = 64, .pids = -1};
		assert_int_equal(bw_cgroup_create(cg, n, &lim, why, sizeof(why)), -EOPNOTSUPP);
		print_message("refused: %s\n", why);
		assert_non_null(strstr(why, "memory_mb 64"));
		assert_non_null(strstr(why, "memory controller"));
		assert_true(gone(cg, n));
	}
	if (!bw_cgroup_has(cg, "pids")) {
		assert_int_equal(bw_cgroup_create(cg, n, NULL, why, sizeof(why)), -EOPNOTSUPP);
		assert_non_null(strstr(why, "pids 512, the default"));
	}
	if (!bw_cgroup_has(cg, "cpu")) {
		bw_limits lim = {.cpu = 1, .pids = -1};
		assert_int_equal(bw_cgroup_create(cg, n, &lim, why, sizeof(why)), -EOPNOTSUPP);
		assert_non_null(strstr(why, "cpu controller"));
	}
	assert_int_equal(bw_cgroup_oom_kills(cg, n), bw_cgroup_has(cg, "memory") ? 0 : -1);
	kill_scattered(
	    f, n, f->flags & BW_CGROUP_NO_KILL_FILE ? "frozen, then signalled" : "cgroup.kill");
}

int main(void)
{
	const char *u = getenv("AKS_TEST_UNPRIVILEGED");
	unprivileged = u && strcmp(u, "1") == 0;
	snprintf(parent, sizeof(parent), "aksandbox-test-%ld", (long)getpid());
	/* The orphans the tests make are reparented to us, not to init, and reaped here. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_name_rules),
	    cmocka_unit_test_setup_teardown(test_probe_describes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_probe_absolute_and_bad_parents, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_create_refuses_bad_names_and_limits, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_create_sets_limits, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_join, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pids_limit_bites, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_memory_limit_kills, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_kill_leaves_nothing, setup, teardown),
	    {"test_v2", test_v2, setup_v2, teardown, NULL},
	    {"test_v2_kill_by_freezing", test_v2, setup_v2_no_kill_file, teardown, NULL},
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
