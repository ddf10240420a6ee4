/* Unit tests: the state store (core/store/store.h) over the built-in file store: records named
 * by (namespace, key), transactions, get, scan, the namespace listing, named locks, the name
 * encoding, bad names, corrupt records, bounds, permissions, leftovers of killed processes,
 * nested calls and threads. Layout checked: ns/<N>.d/<K>.json (docs/state-store.md). */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#include <aksandbox/aksandbox.h>

#include "core/store/store.h"
#include "tests/unit/rm_tree.h"

/* ---- fixtures and helpers ---- */

typedef struct fixture {
	char base[64]; /* a fresh temporary directory */
	char dir[128]; /* the store: base/state (created by the store) */
	aks_state_store *s;
} fixture;

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	strcpy(f->base, "/tmp/aks-store-test-XXXXXX");
	assert_non_null(mkdtemp(f->base));
	snprintf(f->dir, sizeof(f->dir), "%s/state", f->base);
	aks_error *err = NULL;
	assert_int_equal(aks__store_open(f->dir, &f->s, &err), AKS_OK);
	assert_null(err);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;
	aks__store_close(f->s);
	rm_tree(f->base);
	free(f);
	return 0;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Path of a file under the store's ns/ directory. */
static char *ns_file(const fixture *f, const char *rel)
{
	char *p = NULL;
	assert_true(asprintf(&p, "%s/ns/%s", f->dir, rel) > 0);
	return p;
}

static bool exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

static char *slurp(const char *path)
{
	FILE *fp = fopen(path, "rb");
	if (!fp)
		fail_msg("cannot open %s: %s", path, strerror(errno));
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	char chunk[4096];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), fp)) > 0)
		fwrite(chunk, 1, n, mem);
	fclose(fp);
	fclose(mem);
	return buf;
}

static void spitn(const char *path, const char *data, size_t len)
{
	FILE *fp = fopen(path, "wb");
	if (!fp)
		fail_msg("cannot create %s: %s", path, strerror(errno));
	assert_int_equal(fwrite(data, 1, len, fp), len);
	fclose(fp);
}

static void spit(const char *path, const char *text)
{
	spitn(path, text, strlen(text));
}

static void mkdir_p(const char *path)
{
	char buf[1024];
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++) {
		if (*p == '/') {
			*p = '\0';
			mkdir(buf, 0700);
			*p = '/';
		}
	}
	mkdir(buf, 0700);
}

/* Names of the entries of a directory (not . and ..), one string "a b c " sorted. */
static int cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *dir_listing(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		fail_msg("cannot list %s: %s", path, strerror(errno));
	char *names[256];
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && n < 256)
			names[n++] = strdup(de->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmpstr);
	char *out = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&out, &len);
	for (size_t i = 0; i < n; i++) {
		fprintf(mem, "%s ", names[i]);
		free(names[i]);
	}
	fclose(mem);
	return out;
}

static void assert_listing(const char *path, const char *want)
{
	char *got = dir_listing(path);
	if (strcmp(got, want) != 0) {
		char msg[2048];
		snprintf(msg, sizeof(msg), "%s holds \"%s\", expected \"%s\"", path, got, want);
		free(got);
		fail_msg("%s", msg);
	}
	free(got);
}

static void assert_ns_listing(const fixture *f, const char *rel, const char *want)
{
	char *p = ns_file(f, rel);
	assert_listing(p, want);
	free(p);
}

/* What is under ns/: regular files by suffix, directories, and empty directories. */
typedef struct census {
	int json, lock, mutex, tmp, other, dirs, empty_dirs, not_private;
	char odd[512]; /* the first few unexpected entries, for messages */
} census;

static void census_dir(const char *path, census *c)
{
	DIR *d = opendir(path);
	if (!d)
		fail_msg("cannot list %s: %s", path, strerror(errno));
	int entries = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		entries++;
		char *p = NULL;
		assert_true(asprintf(&p, "%s/%s", path, de->d_name) > 0);
		struct stat st;
		assert_int_equal(lstat(p, &st), 0);
		if (S_ISDIR(st.st_mode)) {
			c->dirs++;
			c->not_private += (st.st_mode & 07777) != 0700;
			census_dir(p, c);
		} else {
			size_t n = strlen(de->d_name);
			c->not_private += (st.st_mode & 07777) != 0600;
			if (n > 5 && !strcmp(de->d_name + n - 5, ".json"))
				c->json++;
			else if (n > 5 && !strcmp(de->d_name + n - 5, ".lock"))
				c->lock++;
			else if (n > 6 && !strcmp(de->d_name + n - 6, ".mutex"))
				c->mutex++;
			else if (n > 4 && !strcmp(de->d_name + n - 4, ".tmp"))
				c->tmp++;
			else
				c->other++;
			if (!S_ISREG(st.st_mode) ||
			    !(n > 5 && !strcmp(de->d_name + n - 5, ".json")))
				snprintf(c->odd + strlen(c->odd), sizeof(c->odd) - strlen(c->odd),
				         "%.60s ", de->d_name);
		}
		free(p);
	}
	closedir(d);
	if (entries == 0)
		c->empty_dirs++;
}

static census take_census(const fixture *f)
{
	census c;
	memset(&c, 0, sizeof(c));
	char *p = ns_file(f, "");
	census_dir(p, &c);
	free(p);
	c.empty_dirs -= c.dirs == 0 && c.empty_dirs == 1; /* ns/ itself may be empty */
	return c;
}

/* Nothing under ns/ but `records` record files in non-empty private directories. */
static void assert_clean(const fixture *f, int records)
{
	census c = take_census(f);
	if (c.json != records || c.lock || c.mutex || c.tmp || c.other || c.empty_dirs ||
	    c.not_private)
		fail_msg("ns/ holds %d records (expected %d), %d .lock, %d .mutex, %d .tmp, %d "
		         "other files, %d empty directories, %d entries not 0600/0700: %s",
		         c.json, records, c.lock, c.mutex, c.tmp, c.other, c.empty_dirs,
		         c.not_private, c.odd);
}

/* fn: adds 1 to "n" and appends ctx (a string, when not NULL) to "list". */
static int incr(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)err;
	json_object *n = NULL;
	int64_t v = json_object_object_get_ex(rec, "n", &n) ? json_object_get_int64(n) : 0;
	json_object_object_add(rec, "n", json_object_new_int64(v + 1));
	if (ctx) {
		json_object *list = NULL;
		if (!json_object_object_get_ex(rec, "list", &list)) {
			list = json_object_new_array();
			json_object_object_add(rec, "list", list);
		}
		json_object_array_add(list, json_object_new_string(ctx));
	}
	*changed = true;
	return AKS_OK;
}

/* "n" of the record, or -1 when the record does not exist. */
static int64_t get_n(aks_state_store *s, const char *ns, const char *key)
{
	json_object *rec = NULL;
	aks_error *err = NULL;
	int rc = aks__store_get(s, ns, key, &rec, &err);
	if (rc == AKS_ENOTFOUND) {
		assert_null(err);
		assert_null(rec);
		return -1;
	}
	if (rc != AKS_OK)
		fail_msg("get: %d %s", rc, aks_error_message(err));
	json_object *n = NULL;
	int64_t v = json_object_object_get_ex(rec, "n", &n) ? json_object_get_int64(n) : -2;
	json_object_put(rec);
	return v;
}

/* fn: empties the record (so the store deletes it). */
static int clear(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)ctx;
	(void)err;
	aks__store_clear_record(rec);
	*changed = true;
	return AKS_OK;
}

/* fn: changes the record but says it did not. */
static int change_quietly(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)ctx;
	(void)err;
	json_object_object_add(rec, "quiet", json_object_new_boolean(1));
	*changed = false;
	return AKS_OK;
}

/* fn: changes the record, then fails with its own error. */
static int change_then_fail(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)ctx;
	json_object_object_add(rec, "n", json_object_new_int(999));
	*changed = true;
	return aks__error_set(err, AKS_EPOLICY, "the caller's own reason");
}

/* fn: sets "blob" to a string of *(size_t *)ctx bytes. */
static int set_blob(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)err;
	size_t n = *(size_t *)ctx;
	char *s = malloc(n + 1);
	memset(s, 'x', n);
	s[n] = '\0';
	json_object_object_add(rec, "blob", json_object_new_string_len(s, (int)n));
	free(s);
	*changed = true;
	return AKS_OK;
}

/* fn: sets "deep" to a value nested *(int *)ctx levels below the record (which is level 1). */
static int set_deep(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)err;
	int levels = *(int *)ctx;
	json_object *v = json_object_new_array();
	for (int i = 2; i < levels; i++) {
		json_object *outer = json_object_new_array();
		json_object_array_add(outer, v);
		v = outer;
	}
	json_object_object_add(rec, "deep", v);
	*changed = true;
	return AKS_OK;
}

static void expect_err(int rc, int want_rc, aks_error **err, const char *needle)
{
	if (rc != want_rc)
		fail_msg("returned %d, expected %d (%s)", rc, want_rc,
		         *err ? aks_error_message(*err) : "no error");
	assert_non_null(*err);
	if (!strstr(aks_error_message(*err), needle))
		fail_msg("message \"%s\" lacks \"%s\"", aks_error_message(*err), needle);
	aks_error_free(*err);
	*err = NULL;
}

/* A scan's result: keys seen, sorted, as "k1 k2 ", and their "n" values summed. */
typedef struct seen {
	char *keys[64];
	size_t n;
	int64_t sum;
	int stop_after; /* > 0: return AKS_EPOLICY after that many records */
} seen;

static int collect(void *ctx, const char *key, json_object *rec)
{
	seen *s = ctx;
	if (s->n < 64)
		s->keys[s->n++] = strdup(key);
	json_object *n = NULL;
	if (json_object_object_get_ex(rec, "n", &n))
		s->sum += json_object_get_int64(n);
	if (s->stop_after > 0 && (int)s->n >= s->stop_after)
		return AKS_EPOLICY;
	return AKS_OK;
}

static char *seen_keys(seen *s)
{
	qsort(s->keys, s->n, sizeof(*s->keys), cmpstr);
	char *out = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&out, &len);
	for (size_t i = 0; i < s->n; i++) {
		fprintf(mem, "%s ", s->keys[i]);
		free(s->keys[i]);
	}
	fclose(mem);
	s->n = 0;
	return out;
}

static void assert_scan(aks_state_store *st, const char *ns, const char *prefix, const char *want)
{
	seen s = {.n = 0};
	aks_error *err = NULL;
	int rc = aks__store_scan(st, ns, prefix, collect, &s, &err);
	if (rc != AKS_OK)
		fail_msg("scan: %d %s", rc, aks_error_message(err));
	char *got = seen_keys(&s);
	if (strcmp(got, want) != 0) {
		char msg[2048];
		snprintf(msg, sizeof(msg),
		         "scan of \"%s\" with prefix \"%s\": \"%s\", expected \"%s\"", ns, prefix,
		         got, want);
		free(got);
		fail_msg("%s", msg);
	}
	free(got);
}

/* The namespace listing as "a b ". */
static char *list_string(aks_state_store *s)
{
	char **names = NULL;
	aks_error *err = NULL;
	int rc = aks__store_list(s, &names, &err);
	if (rc != AKS_OK)
		fail_msg("list: %d %s", rc, aks_error_message(err));
	char *out = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&out, &len);
	for (char **p = names; *p; p++)
		fprintf(mem, "%s ", *p);
	fclose(mem);
	aks__store_free_names(names);
	return out;
}

static void assert_list(aks_state_store *s, const char *want)
{
	char *got = list_string(s);
	if (strcmp(got, want) != 0) {
		char msg[2048];
		snprintf(msg, sizeof(msg), "namespaces: \"%s\", expected \"%s\"", got, want);
		free(got);
		fail_msg("%s", msg);
	}
	free(got);
}

/* ---- opening ---- */

static void test_open_creates_private_dirs(void **state)
{
	(void)state;
	char base[] = "/tmp/aks-store-open-XXXXXX";
	assert_non_null(mkdtemp(base));
	char dir[128];
	snprintf(dir, sizeof(dir), "%s/a/b/c", base);
	mode_t old = umask(0);
	aks_state_store *s = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks__store_open(dir, &s, &err), AKS_OK);
	umask(old);
	assert_string_equal(aks__store_dir(s), dir);
	assert_string_equal(aks__store_name(s), "file");
	struct stat st;
	char p[160];
	const char *subs[] = {"/a", "/a/b", "/a/b/c", "/a/b/c/ns"};
	for (size_t i = 0; i < 4; i++) {
		snprintf(p, sizeof(p), "%s%s", base, subs[i]);
		assert_int_equal(stat(p, &st), 0);
		assert_true(S_ISDIR(st.st_mode));
		assert_int_equal(st.st_mode & 07777, 0700);
	}
	/* Opening creates nothing else. */
	assert_listing(dir, "ns ");
	snprintf(p, sizeof(p), "%s/ns", dir);
	assert_listing(p, "");
	aks__store_close(s);
	/* Opening it again is fine. */
	assert_int_equal(aks__store_open(dir, &s, &err), AKS_OK);
	aks__store_close(s);

	/* A file in the way. */
	snprintf(p, sizeof(p), "%s/file", base);
	spit(p, "x");
	snprintf(dir, sizeof(dir), "%s/file/sub", base);
	expect_err(aks__store_open(dir, &s, &err), AKS_EIO, &err, "cannot create the directory");
	assert_null(s);
	expect_err(aks__store_open("", &s, &err), AKS_EINVAL, &err, "empty");
	assert_null(s);
	rm_tree(base);
}

static void test_default_dir(void **state)
{
	(void)state;
	char *saved[3];
	const char *vars[] = {"AKS_STATE_DIR", "XDG_STATE_HOME", "HOME"};
	for (int i = 0; i < 3; i++)
		saved[i] = getenv(vars[i]) ? strdup(getenv(vars[i])) : NULL;
	char *d = NULL;
	aks_error *err = NULL;

	setenv("AKS_STATE_DIR", "/srv/aks-state", 1);
	setenv("XDG_STATE_HOME", "/x/state", 1);
	setenv("HOME", "/home/someone", 1);
	for (int root = 0; root < 2; root++) {
		assert_int_equal(aks__store_default_dir_as(root, &d, &err), AKS_OK);
		assert_string_equal(d, "/srv/aks-state");
		free(d);
	}
	setenv("AKS_STATE_DIR", "", 1); /* empty: unset */
	assert_int_equal(aks__store_default_dir_as(true, &d, &err), AKS_OK);
	assert_string_equal(d, "/var/lib/aksandbox");
	free(d);
	assert_int_equal(aks__store_default_dir_as(false, &d, &err), AKS_OK);
	assert_string_equal(d, "/x/state/aksandbox");
	free(d);
	setenv("XDG_STATE_HOME", "relative/state", 1); /* invalid per the spec: ignored */
	assert_int_equal(aks__store_default_dir_as(false, &d, &err), AKS_OK);
	assert_string_equal(d, "/home/someone/.local/state/aksandbox");
	free(d);
	unsetenv("XDG_STATE_HOME");
	unsetenv("AKS_STATE_DIR");
	assert_int_equal(aks__store_default_dir_as(false, &d, &err), AKS_OK);
	assert_string_equal(d, "/home/someone/.local/state/aksandbox");
	free(d);
	/* Without HOME: the password database's home directory. */
	unsetenv("HOME");
	struct passwd *pw = getpwuid(geteuid());
	assert_non_null(pw);
	int rc = aks__store_default_dir_as(false, &d, &err);
	if (pw->pw_dir && pw->pw_dir[0] == '/') {
		assert_int_equal(rc, AKS_OK);
		char *want = NULL;
		assert_true(asprintf(&want, "%s/.local/state/aksandbox", pw->pw_dir) > 0);
		assert_string_equal(d, want);
		free(want);
		free(d);
	} else {
		expect_err(rc, AKS_ECONFIG, &err, "set AKS_STATE_DIR");
	}
	/* The real one matches the process's identity. */
	setenv("HOME", "/home/someone", 1);
	assert_int_equal(aks__store_default_dir(&d, &err), AKS_OK);
	assert_string_equal(d, geteuid() == 0 ? "/var/lib/aksandbox"
	                                      : "/home/someone/.local/state/aksandbox");
	free(d);

	/* open(NULL) uses it, and does not move when the environment changes later. */
	char base[] = "/tmp/aks-store-env-XXXXXX";
	assert_non_null(mkdtemp(base));
	setenv("AKS_STATE_DIR", base, 1);
	aks_state_store *s = NULL;
	assert_int_equal(aks__store_open(NULL, &s, &err), AKS_OK);
	assert_string_equal(aks__store_dir(s), base);
	setenv("AKS_STATE_DIR", "/nonexistent/elsewhere", 1);
	assert_int_equal(aks__store_update(s, "c1", "k", incr, NULL, &err), AKS_OK);
	aks__store_close(s);
	char p[128];
	snprintf(p, sizeof(p), "%s/ns/c1.d/k.json", base);
	assert_true(exists(p));
	assert_false(exists("/nonexistent/elsewhere"));
	rm_tree(base);

	for (int i = 0; i < 3; i++) {
		if (saved[i])
			setenv(vars[i], saved[i], 1);
		else
			unsetenv(vars[i]);
		free(saved[i]);
	}
}

/* ---- transactions and get ---- */

static void test_update_and_get(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	json_object *rec = NULL;

	/* Nothing yet: not found, no error, and no file created by reading. */
	assert_int_equal(aks__store_get(f->s, "conv-1", "s1", &rec, &err), AKS_ENOTFOUND);
	assert_null(err);
	assert_null(rec);
	assert_listing(f->dir, "ns ");
	assert_ns_listing(f, "", "");
	assert_scan(f->s, "conv-1", "", "");
	assert_list(f->s, "");

	for (int i = 0; i < 3; i++)
		assert_int_equal(aks__store_update(f->s, "conv-1", "s1", incr, "x", &err), AKS_OK);
	assert_null(err);
	assert_int_equal(get_n(f->s, "conv-1", "s1"), 3);
	char *path = ns_file(f, "conv-1.d/s1.json");
	char *text = slurp(path);
	assert_string_equal(text, "{\"n\":3,\"list\":[\"x\",\"x\",\"x\"]}\n");
	free(text);

	/* Only the record: the update lock file went with its holder, no temporary left. */
	assert_ns_listing(f, "", "conv-1.d ");
	assert_ns_listing(f, "conv-1.d", "s1.json ");

	/* Unchanged (by its own account): nothing written. */
	struct stat before, after;
	assert_int_equal(stat(path, &before), 0);
	assert_int_equal(aks__store_update(f->s, "conv-1", "s1", change_quietly, NULL, &err),
	                 AKS_OK);
	assert_int_equal(stat(path, &after), 0);
	assert_int_equal(before.st_ino, after.st_ino); /* not even rewritten */
	text = slurp(path);
	assert_null(strstr(text, "quiet"));
	free(text);

	/* fn's error comes back as it was, and nothing is written. */
	assert_int_equal(aks__store_update(f->s, "conv-1", "s1", change_then_fail, NULL, &err),
	                 AKS_EPOLICY);
	assert_string_equal(aks_error_message(err), "the caller's own reason");
	aks_error_free(err);
	err = NULL;
	assert_int_equal(get_n(f->s, "conv-1", "s1"), 3);

	/* Results of get are independent copies. */
	json_object *a = NULL, *b = NULL;
	assert_int_equal(aks__store_get(f->s, "conv-1", "s1", &a, &err), AKS_OK);
	json_object_object_add(a, "n", json_object_new_int(42));
	assert_int_equal(aks__store_get(f->s, "conv-1", "s1", &b, &err), AKS_OK);
	assert_int_equal(json_object_get_int(json_object_object_get(b, "n")), 3);
	json_object_put(a);
	json_object_put(b);

	/* Keys and namespaces are separate. */
	assert_int_equal(aks__store_update(f->s, "conv-1", "s2", incr, NULL, &err), AKS_OK);
	assert_int_equal(aks__store_update(f->s, "conv-2", "s1", incr, NULL, &err), AKS_OK);
	assert_int_equal(aks__store_update(f->s, "conv-2", "s1", incr, NULL, &err), AKS_OK);
	assert_int_equal(get_n(f->s, "conv-1", "s1"), 3);
	assert_int_equal(get_n(f->s, "conv-1", "s2"), 1);
	assert_int_equal(get_n(f->s, "conv-2", "s1"), 2);
	assert_int_equal(get_n(f->s, "conv-2", "s2"), -1);
	assert_ns_listing(f, "conv-1.d", "s1.json s2.json ");
	assert_ns_listing(f, "conv-2.d", "s1.json ");

	/* A transaction that leaves an absent record absent creates nothing. */
	assert_int_equal(aks__store_update(f->s, "conv-3", "s1", change_quietly, NULL, &err),
	                 AKS_OK);
	assert_int_equal(aks__store_update(f->s, "conv-3", "s1", change_then_fail, NULL, &err),
	                 AKS_EPOLICY);
	aks_error_free(err);
	err = NULL;
	assert_int_equal(get_n(f->s, "conv-3", "s1"), -1);
	assert_ns_listing(f, "", "conv-1.d conv-2.d ");
	assert_clean(f, 3);

	/* No store or no function. */
	expect_err(aks__store_update(f->s, "conv-1", "s1", NULL, NULL, &err), AKS_EINVAL, &err,
	           "no function");
	expect_err(aks__store_update(NULL, "conv-1", "s1", incr, NULL, &err), AKS_EINVAL, &err,
	           "no store");
	expect_err(aks__store_get(NULL, "conv-1", "s1", &rec, &err), AKS_EINVAL, &err, "no store");
	expect_err(aks__store_scan(f->s, "conv-1", "", NULL, NULL, &err), AKS_EINVAL, &err,
	           "no function");
	free(path);
}

static void test_deleting_records_leaves_nothing(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	/* '~' is escaped: 768 encoded bytes, 4 path components for each of the two names. */
	char long_name[AKS_STORE_NAME_MAX + 1];
	memset(long_name, '~', AKS_STORE_NAME_MAX);
	long_name[AKS_STORE_NAME_MAX] = '\0';
	const char *ns[] = {"keep", "gone", long_name, long_name, "keep"};
	const char *key[] = {"k", "k", "k", long_name, long_name};
	for (int i = 0; i < 5; i++)
		assert_int_equal(aks__store_update(f->s, ns[i], key[i], incr, NULL, &err), AKS_OK);
	assert_clean(f, 5);
	char *want = NULL;
	assert_true(asprintf(&want, "gone keep %s ", long_name) > 0);
	assert_list(f->s, want);
	free(want);

	/* Delete all but keep/k: neither record, lock file, temporary nor directory is left. */
	for (int i = 1; i < 5; i++)
		assert_int_equal(aks__store_update(f->s, ns[i], key[i], clear, NULL, &err), AKS_OK);
	assert_ns_listing(f, "", "keep.d ");
	assert_ns_listing(f, "keep.d", "k.json ");
	assert_clean(f, 1);
	assert_list(f->s, "keep ");
	for (int i = 1; i < 5; i++)
		assert_int_equal(get_n(f->s, ns[i], key[i]), -1);

	/* Deleting an absent record is fine and leaves no trace either. */
	assert_int_equal(aks__store_update(f->s, "never", "k", clear, NULL, &err), AKS_OK);
	assert_int_equal(aks__store_update(f->s, long_name, long_name, clear, NULL, &err), AKS_OK);
	assert_int_equal(aks__store_update(f->s, "keep", "absent", clear, NULL, &err), AKS_OK);
	assert_clean(f, 1);
	assert_list(f->s, "keep ");

	/* And records come back to life normally. */
	assert_int_equal(aks__store_update(f->s, "gone", "k", incr, NULL, &err), AKS_OK);
	assert_int_equal(get_n(f->s, "gone", "k"), 1);
	assert_int_equal(aks__store_update(f->s, long_name, long_name, incr, NULL, &err), AKS_OK);
	assert_int_equal(get_n(f->s, long_name, long_name), 1);
	assert_clean(f, 3);

	/* A named lock taken and released leaves nothing behind either. */
	aks_store_lock *lk = NULL;
	assert_int_equal(aks__store_lock(f->s, "lockonly", long_name, NULL, &lk, &err), AKS_OK);
	assert_non_null(lk);
	census c = take_census(f);
	assert_int_equal(c.mutex, 1);
	aks__store_unlock(f->s, lk);
	assert_int_equal(aks__store_lock(f->s, long_name, long_name, NULL, &lk, &err), AKS_OK);
	aks__store_unlock(f->s, lk);
	assert_clean(f, 3);
	/* ns/ holds the three namespaces; the long one's first chunk cuts an escape in two. */
	char *chunk = aks__store_name_path(long_name);
	assert_int_equal(strlen(chunk), 3 * AKS_STORE_NAME_MAX + 3 * 2);
	assert_true(asprintf(&want, "%.201s gone.d keep.d ", chunk) > 0);
	assert_memory_equal(want + 198, "%7+", 3);
	assert_ns_listing(f, "", want);
	free(want);
	free(chunk);
}

/* ---- names ---- */

static void check_path(const char *name, const char *want)
{
	char *p = aks__store_name_path(name);
	assert_non_null(p);
	assert_string_equal(p, want);
	char *back = NULL;
	assert_int_equal(aks__store_name_from_path(p, &back), AKS_OK);
	assert_string_equal(back, name);
	free(back);
	free(p);
}

static void test_name_encoding(void **state)
{
	(void)state;
	check_path("abc-123_x", "abc-123_x");
	check_path("../x", "%2e%2e%2fx");
	check_path("/", "%2f");
	check_path(".", "%2e");
	check_path("..", "%2e%2e");
	check_path("A", "%41"); /* apart from "a" even on a case-folding directory */
	check_path("@runtime", "%40runtime");
	check_path("a b%", "a%20b%25");
	check_path("caf\xc3\xa9", "caf%c3%a9");
	check_path("x+", "x%2b");
	check_path("session:abc", "session%3aabc");
	check_path("k.json", "k%2ejson");
	check_path("x.d", "x%2ed");

	/* Every byte 0x01..0xff: printable-safe, no '/' or '.', and back again. */
	char all[256];
	for (int i = 1; i < 256; i++)
		all[i - 1] = (char)i;
	all[255] = '\0';
	char *p = aks__store_name_path(all);
	for (const char *c = p; *c; c++) {
		if (!strchr("abcdefghijklmnopqrstuvwxyz0123456789_-%+/", *c))
			fail_msg("unexpected byte 0x%02x in %s", (unsigned char)*c, p);
	}
	char *back = NULL;
	assert_int_equal(aks__store_name_from_path(p, &back), AKS_OK);
	assert_memory_equal(back, all, 256);
	free(back);
	/* Components: chunks of 200 encoded bytes, each but the last marked '+'. */
	size_t total = 0, ncomp = 0;
	for (char *c = p, *slash;; c = slash + 1) {
		slash = strchr(c, '/');
		size_t n = slash ? (size_t)(slash - c) : strlen(c);
		if (slash) {
			assert_int_equal(n, AKS_STORE_NS_CHUNK + 1);
			assert_int_equal(c[n - 1], '+');
			total += n - 1;
		} else {
			assert_in_range(n, 1, AKS_STORE_NS_CHUNK);
			total += n;
		}
		ncomp++;
		if (!slash)
			break;
	}
	assert_int_equal(ncomp, 4);
	free(p);

	/* The longest name that all needs escaping: 768 bytes, four components. */
	char max[AKS_STORE_NAME_MAX + 1];
	memset(max, '.', AKS_STORE_NAME_MAX);
	max[AKS_STORE_NAME_MAX] = '\0';
	p = aks__store_name_path(max);
	assert_int_equal(strlen(p), 3 * AKS_STORE_NAME_MAX + 3 * 2);
	assert_memory_equal(p + 200, "+/", 2);
	assert_int_equal(aks__store_name_from_path(p, &back), AKS_OK);
	assert_string_equal(back, max);
	free(back);
	free(p);

	/* 256 plain bytes: one 200-byte chunk and the rest. */
	char plain[257];
	memset(plain, 'a', 256);
	plain[256] = '\0';
	p = aks__store_name_path(plain);
	assert_int_equal(strlen(p), 256 + 2);
	assert_memory_equal(p + 200, "+/", 2);
	free(p);
	/* Exactly one chunk: no directory. */
	plain[AKS_STORE_NS_CHUNK] = '\0';
	p = aks__store_name_path(plain);
	assert_null(strchr(p, '/'));
	free(p);

	/* Only canonical paths decode. */
	const char *bad[] = {"",    "%2E",  "%61", "%00", "%2",   "%zz", "A",      "a.b",
	                     "a/b", "a+/b", "+/a", "a+",  "%2f/", "..",  "%2e+/x", "a b"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		char *name = NULL;
		if (aks__store_name_from_path(bad[i], &name) != AKS_EINVAL)
			fail_msg("\"%s\" decoded to \"%s\"", bad[i], name ? name : "(null)");
		assert_null(name);
	}
	/* 257 bytes is over the limit even when spelled canonically. */
	char over[258];
	memset(over, 'a', 257);
	over[257] = '\0';
	char *name = NULL;
	p = aks__store_name_path(over);
	assert_int_equal(aks__store_name_from_path(p, &name), AKS_EINVAL);
	assert_null(name);
	free(p);

	/* The checks, and what they say. */
	aks_error *err = NULL;
	assert_int_equal(aks__store_name_check("key", "k", &err), AKS_OK);
	assert_int_equal(aks__store_name_check("key", max, &err), AKS_OK);
	assert_null(err);
	expect_err(aks__store_name_check("key", "", &err), AKS_EINVAL, &err, "the key is empty");
	expect_err(aks__store_name_check("namespace", NULL, &err), AKS_EINVAL, &err,
	           "the namespace is empty");
	expect_err(aks__store_name_check("key", over, &err), AKS_EINVAL, &err,
	           "the key is 257 bytes long; the limit is 256");
}

/* Nothing escapes the store's directory: it holds ns/ only, and its parent the store only. */
static void assert_only_under_ns(const fixture *f, int want_records)
{
	assert_listing(f->dir, "ns ");
	assert_listing(f->base, "state ");
	assert_clean(f, want_records);
}

static void test_hostile_names(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	char all[256];
	for (int i = 1; i < 256; i++)
		all[i - 1] = (char)i;
	all[255] = '\0';
	char max[AKS_STORE_NAME_MAX + 1];
	for (int i = 0; i < AKS_STORE_NAME_MAX; i++)
		max[i] = (char)(0x80 + i % 0x80);
	max[AKS_STORE_NAME_MAX] = '\0';
	const char *names[] = {"../x",
	                       "/",
	                       "..",
	                       ".",
	                       "../../etc/passwd",
	                       "a/../../b",
	                       "A",
	                       "a",
	                       "x.lock",
	                       "x",
	                       all,
	                       max,
	                       AKS_STORE_NS_RUNTIME,
	                       "-rf",
	                       "%2e",
	                       "a+",
	                       " ",
	                       "k.json",
	                       "k.d",
	                       "x.mutex",
	                       "x.tmp"};
	size_t count = sizeof(names) / sizeof(*names);
	/* Every name as a namespace with a plain key, and as a key in one namespace. */
	for (size_t i = 0; i < count; i++) {
		for (size_t k = 0; k <= i; k++) {
			assert_int_equal(
			    aks__store_update(f->s, names[i], "k", incr, (void *)names[i], &err),
			    AKS_OK);
			assert_int_equal(
			    aks__store_update(f->s, "keys", names[i], incr, (void *)names[i], &err),
			    AKS_OK);
		}
	}
	/* Each has its own record, holding exactly what was written to it. */
	for (size_t i = 0; i < count; i++) {
		for (int as_key = 0; as_key < 2; as_key++) {
			json_object *rec = NULL;
			const char *ns = as_key ? "keys" : names[i], *key = as_key ? names[i] : "k";
			assert_int_equal(aks__store_get(f->s, ns, key, &rec, &err), AKS_OK);
			assert_int_equal(json_object_get_int(json_object_object_get(rec, "n")),
			                 i + 1);
			json_object *list = json_object_object_get(rec, "list");
			assert_int_equal(json_object_array_length(list), i + 1);
			assert_string_equal(
			    json_object_get_string(json_object_array_get_idx(list, 0)), names[i]);
			json_object_put(rec);
		}
	}
	/* Nothing was created outside ns/: one file per record, no lock files left. */
	assert_only_under_ns(f, (int)(2 * count));

	/* list gives every namespace back, byte for byte, sorted ("keys" among them). */
	char **list = NULL;
	assert_int_equal(aks__store_list(f->s, &list, &err), AKS_OK);
	const char *sorted[sizeof(names) / sizeof(*names) + 1];
	memcpy(sorted, names, sizeof(names));
	sorted[count] = "keys";
	qsort(sorted, count + 1, sizeof(*sorted), cmpstr);
	for (size_t i = 0; i <= count; i++) {
		assert_non_null(list[i]);
		assert_string_equal(list[i], sorted[i]);
	}
	assert_null(list[count + 1]);
	aks__store_free_names(list);

	/* scan gives every key back, byte for byte, with its own record. */
	seen s = {.n = 0};
	assert_int_equal(aks__store_scan(f->s, "keys", "", collect, &s, &err), AKS_OK);
	assert_int_equal(s.n, count);
	assert_int_equal(s.sum, (int64_t)(count * (count + 1) / 2));
	qsort(s.keys, s.n, sizeof(*s.keys), cmpstr);
	qsort(sorted, count + 1, sizeof(*sorted), cmpstr);
	size_t j = 0;
	for (size_t i = 0; i <= count; i++) {
		if (strcmp(sorted[i], "keys") == 0)
			continue;
		assert_string_equal(s.keys[j], sorted[i]);
		free(s.keys[j]);
		j++;
	}
	/* Each name as a prefix finds at least itself and only keys that start with it. */
	for (size_t i = 0; i < count; i++) {
		seen p = {.n = 0};
		assert_int_equal(aks__store_scan(f->s, "keys", names[i], collect, &p, &err),
		                 AKS_OK);
		bool self = false;
		for (size_t k = 0; k < p.n; k++) {
			assert_int_equal(strncmp(p.keys[k], names[i], strlen(names[i])), 0);
			self = self || strcmp(p.keys[k], names[i]) == 0;
			free(p.keys[k]);
		}
		assert_true(self);
	}

	/* Deleting them all leaves nothing. */
	for (size_t i = 0; i < count; i++) {
		assert_int_equal(aks__store_update(f->s, names[i], "k", clear, NULL, &err), AKS_OK);
		assert_int_equal(aks__store_update(f->s, "keys", names[i], clear, NULL, &err),
		                 AKS_OK);
	}
	assert_only_under_ns(f, 0);
	assert_ns_listing(f, "", "");
	assert_list(f->s, "");
}

static void test_bad_names(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	json_object *rec = NULL;
	aks_store_lock *lk = NULL;
	char over[AKS_STORE_NAME_MAX + 2];
	memset(over, 'a', AKS_STORE_NAME_MAX + 1);
	over[AKS_STORE_NAME_MAX + 1] = '\0';
	seen s = {.n = 0};

	expect_err(aks__store_update(f->s, "", "k", incr, NULL, &err), AKS_EINVAL, &err,
	           "the namespace is empty");
	expect_err(aks__store_update(f->s, NULL, "k", incr, NULL, &err), AKS_EINVAL, &err,
	           "the namespace is empty");
	expect_err(aks__store_update(f->s, over, "k", incr, NULL, &err), AKS_EINVAL, &err,
	           "the namespace is 257 bytes long; the limit is 256");
	expect_err(aks__store_update(f->s, "ns", "", incr, NULL, &err), AKS_EINVAL, &err,
	           "the key is empty");
	expect_err(aks__store_update(f->s, "ns", over, incr, NULL, &err), AKS_EINVAL, &err,
	           "the key is 257 bytes long; the limit is 256");
	expect_err(aks__store_get(f->s, over, "k", &rec, &err), AKS_EINVAL, &err, "257 bytes");
	assert_null(rec);
	expect_err(aks__store_get(f->s, "", "k", &rec, &err), AKS_EINVAL, &err, "empty");
	expect_err(aks__store_get(f->s, "ns", over, &rec, &err), AKS_EINVAL, &err,
	           "the key is 257 bytes");
	expect_err(aks__store_get(f->s, "ns", "", &rec, &err), AKS_EINVAL, &err, "key is empty");
	assert_null(rec);
	expect_err(aks__store_scan(f->s, over, "", collect, &s, &err), AKS_EINVAL, &err,
	           "257 bytes");
	expect_err(aks__store_scan(f->s, "", "", collect, &s, &err), AKS_EINVAL, &err, "empty");
	expect_err(aks__store_lock(f->s, "", "k", NULL, &lk, &err), AKS_EINVAL, &err,
	           "namespace is empty");
	expect_err(aks__store_lock(f->s, "ns", over, NULL, &lk, &err), AKS_EINVAL, &err,
	           "key is 257 bytes");
	assert_null(lk);
	assert_int_equal(s.n, 0);
	/* Nothing was created. */
	assert_ns_listing(f, "", "");
	/* Exactly the limit is fine, for both. */
	over[AKS_STORE_NAME_MAX] = '\0';
	assert_int_equal(aks__store_update(f->s, over, over, incr, NULL, &err), AKS_OK);
	assert_int_equal(get_n(f->s, over, over), 1);
	assert_int_equal(aks__store_lock(f->s, over, over, NULL, &lk, &err), AKS_OK);
	aks__store_unlock(f->s, lk);
	assert_clean(f, 1);
}

/* A NULL key is a bad key, like "" (state_store.h: keys are 1..AKS_STORE_NAME_MAX bytes): it
 * must not be taken for "no key" and address the namespace's own directory entry. */
static void test_null_key_refused(void **state)
{
	fixture *f = *state;
	json_object *rec = NULL;
	aks_store_lock *lk = NULL;
	/* Every call first, then the checks, so that a failure leaks nothing. */
	aks_error *e[3] = {NULL, NULL, NULL};
	int rc[3];
	rc[0] = aks__store_update(f->s, "ns", NULL, incr, NULL, &e[0]);
	rc[1] = aks__store_get(f->s, "ns", NULL, &rec, &e[1]);
	rc[2] = aks__store_lock(f->s, "ns", NULL, NULL, &lk, &e[2]);
	char *created = dir_listing(f->dir), *in_ns = NULL;
	assert_true(asprintf(&in_ns, "%s/ns", f->dir) > 0);
	char *ns_entries = dir_listing(in_ns);
	free(in_ns);
	free(created);
	json_object_put(rec);
	if (lk)
		aks__store_unlock(f->s, lk);
	char msg[1024] = "";
	for (int i = 0; i < 3; i++) {
		const char *m = e[i] ? aks_error_message(e[i]) : "";
		if ((rc[i] != AKS_EINVAL || !strstr(m, "the key is empty")) && !msg[0])
			snprintf(msg, sizeof(msg), "%s with a NULL key returned %d (%s)",
			         i == 0   ? "update"
			         : i == 1 ? "get"
			                  : "lock",
			         rc[i], m);
		aks_error_free(e[i]);
	}
	/* Nothing was created (the update would have written ns/ns.d.json). */
	if (!msg[0] && ns_entries[0])
		snprintf(msg, sizeof(msg), "ns/ holds \"%s\"", ns_entries);
	if (msg[0])
		print_message("# ns/ holds \"%s\"\n", ns_entries);
	free(ns_entries);
	if (msg[0])
		fail_msg("%s", msg);
}

/* ---- damage, bounds, permissions ---- */

static void test_corrupt_records(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	json_object *rec = NULL;
	assert_int_equal(aks__store_update(f->s, "c", "bad", incr, NULL, &err), AKS_OK);
	assert_int_equal(aks__store_update(f->s, "c", "good", incr, NULL, &err), AKS_OK);
	char *path = ns_file(f, "c.d/bad.json");
	/* sizeof - 1: the last case holds a NUL byte inside. */
	static const char b0[] = "{\"n\": 1", b1[] = "", b2[] = "[1, 2]", b3[] = "{\"n\": 1} x",
	                  b4[] = "not json", b5[] = "\"a string\"", b6[] = "{\"n\": 1}{}",
	                  b7[] = "{\"n\": 1}\0 ";
	const char *bad[] = {b0, b1, b2, b3, b4, b5, b6, b7};
	size_t lens[] = {sizeof(b0) - 1, sizeof(b1) - 1, sizeof(b2) - 1, sizeof(b3) - 1,
	                 sizeof(b4) - 1, sizeof(b5) - 1, sizeof(b6) - 1, sizeof(b7) - 1};
	const char *why[] = {"ends early", "ends early",        "not a JSON object", "more after",
	                     "(",          "not a JSON object", "more after",        "more after"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		spitn(path, bad[i], lens[i]);
		const char *want = "the record 'bad' of 'c' is unreadable";
		assert_int_equal(aks__store_update(f->s, "c", "bad", incr, NULL, &err), AKS_EIO);
		if (!strstr(aks_error_message(err), want) ||
		    !strstr(aks_error_message(err), why[i]) ||
		    !strstr(aks_error_message(err), "left as it is"))
			fail_msg("case %zu: %s", i, aks_error_message(err));
		aks_error_free(err);
		err = NULL;
		/* Even a transaction that would delete it leaves it. */
		expect_err(aks__store_update(f->s, "c", "bad", clear, NULL, &err), AKS_EIO, &err,
		           want);
		expect_err(aks__store_get(f->s, "c", "bad", &rec, &err), AKS_EIO, &err, want);
		assert_null(rec);
		/* Left exactly as it was. */
		struct stat st;
		assert_int_equal(stat(path, &st), 0);
		assert_int_equal(st.st_size, lens[i]);
		char *text = slurp(path);
		assert_memory_equal(text, bad[i], lens[i]);
		free(text);
		/* A scan skips it and delivers the others; the namespace is still listed. */
		assert_scan(f->s, "c", "", "good ");
		assert_list(f->s, "c ");
		/* The others are unaffected. */
		assert_int_equal(aks__store_update(f->s, "c", "good", incr, NULL, &err), AKS_OK);
	}
	assert_int_equal(get_n(f->s, "c", "good"), 1 + (int64_t)(sizeof(bad) / sizeof(*bad)));

	/* Whitespace around a record is fine. */
	spit(path, "\n  {\"n\": 7}  \n\n");
	assert_int_equal(get_n(f->s, "c", "bad"), 7);

	/* A symbolic link in its place is not followed. */
	char *target = NULL;
	assert_true(asprintf(&target, "%s/elsewhere.json", f->base) > 0);
	spit(target, "{\"n\": 100}");
	unlink(path);
	assert_int_equal(symlink(target, path), 0);
	expect_err(aks__store_get(f->s, "c", "bad", &rec, &err), AKS_EIO, &err, "cannot open");
	expect_err(aks__store_update(f->s, "c", "bad", incr, NULL, &err), AKS_EIO, &err,
	           "cannot open");
	char *text = slurp(target);
	assert_string_equal(text, "{\"n\": 100}");
	free(text);
	unlink(target);
	free(target);
	free(path);
}

/* A scan skips what it cannot read as a record, a symbolic link planted in place of one
 * included (never following it), and delivers the rest: one bad entry must not hide a
 * conversation's other sessions from a listing or a reaper. */
static void test_scan_skips_planted_symlink(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	assert_int_equal(aks__store_update(f->s, "c", "good", incr, NULL, &err), AKS_OK);
	char *path = ns_file(f, "c.d/bad.json"), *target = NULL;
	assert_true(asprintf(&target, "%s/elsewhere.json", f->base) > 0);
	spit(target, "{\"n\": 100}");
	assert_int_equal(symlink(target, path), 0);
	seen s = {.n = 0};
	int rc = aks__store_scan(f->s, "c", "", collect, &s, &err);
	char *keys = seen_keys(&s), msg[1024];
	snprintf(msg, sizeof(msg), "scan: %d (%s), keys \"%s\", sum %lld", rc,
	         err ? aks_error_message(err) : "no error", keys, (long long)s.sum);
	bool ok = rc == AKS_OK && strcmp(keys, "good ") == 0 && s.sum == 1; /* target not read */
	aks_error_free(err);
	free(keys);
	free(target);
	free(path);
	if (!ok)
		fail_msg("%s", msg);
}

/* A FIFO or a directory planted under a record's name never hangs a reader: get and update
 * refuse it naming the file, scan skips it, and the other records are unaffected. */
static void test_planted_fifo_and_dir(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	json_object *rec = NULL;
	assert_int_equal(aks__store_update(f->s, "c", "good", incr, NULL, &err), AKS_OK);
	char *fifo = ns_file(f, "c.d/fifo.json"), *dir = ns_file(f, "c.d/dir.json");
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_int_equal(mkdir(dir, 0700), 0);
	expect_err(aks__store_get(f->s, "c", "fifo", &rec, &err), AKS_EIO, &err,
	           "fifo.json is not a regular file");
	assert_null(rec);
	expect_err(aks__store_update(f->s, "c", "fifo", incr, NULL, &err), AKS_EIO, &err,
	           "fifo.json is not a regular file");
	expect_err(aks__store_get(f->s, "c", "dir", &rec, &err), AKS_EIO, &err, "dir.json");
	seen s = {.n = 0};
	assert_int_equal(aks__store_scan(f->s, "c", "", collect, &s, &err), AKS_OK);
	char *keys = seen_keys(&s);
	assert_string_equal(keys, "good ");
	free(keys);
	free(fifo);
	free(dir);
}

static void test_size_bound(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	json_object *rec = NULL;
	aks__store_set_max_doc_size(f->s, 1000);
	size_t n = 900;
	assert_int_equal(aks__store_update(f->s, "big", "r", set_blob, &n, &err), AKS_OK);
	char *path = ns_file(f, "big.d/r.json");
	char *before = slurp(path);
	n = 1000;
	expect_err(aks__store_update(f->s, "big", "r", set_blob, &n, &err), AKS_ELIMIT, &err,
	           "over the 1000-byte limit; nothing was written");
	char *after = slurp(path);
	assert_string_equal(before, after);
	free(after);
	/* Nothing written for a new record either. */
	expect_err(aks__store_update(f->s, "big", "new", set_blob, &n, &err), AKS_ELIMIT, &err,
	           "the record 'new' of 'big'");
	expect_err(aks__store_update(f->s, "big2", "new", set_blob, &n, &err), AKS_ELIMIT, &err,
	           "nothing was written");
	assert_clean(f, 1);
	/* The bound counts the whole file: {"blob":"..."} plus its newline. */
	n = 1000 - strlen("{\"blob\":\"\"}\n");
	assert_int_equal(aks__store_update(f->s, "big", "r", set_blob, &n, &err), AKS_OK);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 1000);
	n++;
	expect_err(aks__store_update(f->s, "big", "r", set_blob, &n, &err), AKS_ELIMIT, &err,
	           "would be 1001 bytes");

	/* A file that grew over the bound by other means is refused when read, not cut. */
	FILE *fp = fopen(path, "a");
	fputs("          ", fp);
	fclose(fp);
	expect_err(aks__store_get(f->s, "big", "r", &rec, &err), AKS_ELIMIT, &err,
	           "the record 'r' of 'big' is unreadable (it is larger than the size limit");
	expect_err(aks__store_update(f->s, "big", "r", incr, NULL, &err), AKS_ELIMIT, &err,
	           "left as it is");
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 1010);

	/* The default bound is 16 MiB. */
	aks_state_store *s2 = NULL;
	assert_int_equal(aks__store_open(f->dir, &s2, &err), AKS_OK);
	assert_int_equal(aks__store_get(s2, "big", "r", &rec, &err), AKS_OK);
	assert_int_equal(json_object_get_string_len(json_object_object_get(rec, "blob")),
	                 1000 - strlen("{\"blob\":\"\"}\n"));
	json_object_put(rec);
	assert_int_equal(AKS_STORE_MAX_DOC_SIZE, 16 * 1024 * 1024);
	/* A file over it is refused by the file store itself (it never reads more). */
	char *huge = ns_file(f, "big.d/huge.json");
	size_t hlen = AKS_STORE_MAX_DOC_SIZE + 1;
	char *h = malloc(hlen);
	memset(h, ' ', hlen);
	h[0] = '{';
	h[hlen - 1] = '}';
	spitn(huge, h, hlen);
	free(h);
	expect_err(aks__store_get(s2, "big", "huge", &rec, &err), AKS_ELIMIT, &err,
	           "left as it is");
	assert_int_equal(stat(huge, &st), 0);
	assert_int_equal((size_t)st.st_size, hlen);
	/* A scan goes on without it. */
	assert_scan(s2, "big", "", "r ");
	aks__store_close(s2);
	free(huge);
	free(before);
	free(path);
}

static void test_depth_bound(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	int levels = AKS_STORE_MAX_DEPTH;
	assert_int_equal(aks__store_update(f->s, "deep", "r", set_deep, &levels, &err), AKS_OK);
	json_object *rec = NULL;
	assert_int_equal(aks__store_get(f->s, "deep", "r", &rec, &err), AKS_OK);
	json_object_put(rec);
	char *path = ns_file(f, "deep.d/r.json");
	char *before = slurp(path);
	levels++;
	expect_err(aks__store_update(f->s, "deep", "r", set_deep, &levels, &err), AKS_ELIMIT, &err,
	           "nests deeper than 64 levels; nothing was written");
	expect_err(aks__store_update(f->s, "deep", "new", set_deep, &levels, &err), AKS_ELIMIT,
	           &err, "the record 'new' of 'deep' nests deeper");
	/* The stored record is still the one that fits, byte for byte. */
	char *after = slurp(path);
	assert_string_equal(before, after);
	free(before);
	free(after);
	assert_int_equal(aks__store_get(f->s, "deep", "r", &rec, &err), AKS_OK);
	json_object *v = json_object_object_get(rec, "deep");
	int depth = 1;
	while (v) {
		depth++;
		v = json_object_array_length(v) ? json_object_array_get_idx(v, 0) : NULL;
	}
	assert_int_equal(depth, AKS_STORE_MAX_DEPTH);
	json_object_put(rec);
	assert_clean(f, 1);
	free(path);
}

/* fn: records the mode of the update lock file, which exists only while it runs. */
typedef struct lock_mode {
	const char *path;
	int mode; /* -1: absent */
} lock_mode;

static int note_lock_mode(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	lock_mode *m = ctx;
	struct stat st;
	m->mode = stat(m->path, &st) == 0 ? (int)(st.st_mode & 07777) : -1;
	return incr(rec, changed, NULL, err);
}

static void test_permissions(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	char long_name[AKS_STORE_NAME_MAX + 1];
	memset(long_name, 'q', AKS_STORE_NAME_MAX);
	long_name[AKS_STORE_NAME_MAX] = '\0';
	mode_t old = umask(0); /* the modes must not depend on the caller's umask */
	char *lockpath = ns_file(f, "p.d/k.lock");
	lock_mode m = {lockpath, -2};
	assert_int_equal(aks__store_update(f->s, "p", "k", note_lock_mode, &m, &err), AKS_OK);
	assert_int_equal(aks__store_update(f->s, long_name, long_name, incr, NULL, &err), AKS_OK);
	aks_store_lock *lk = NULL;
	assert_int_equal(aks__store_lock(f->s, "p", "k", NULL, &lk, &err), AKS_OK);
	umask(old);
	assert_int_equal(m.mode, 0600);
	free(lockpath);
	struct stat st;
	const char *files[] = {"p.d/k.json", "p.d/k.mutex"};
	for (int i = 0; i < 2; i++) {
		char *p = ns_file(f, files[i]);
		assert_int_equal(stat(p, &st), 0);
		assert_true(S_ISREG(st.st_mode));
		assert_int_equal(st.st_mode & 07777, 0600);
		free(p);
	}
	char *p = ns_file(f, "p.d");
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	free(p);
	/* Chunk directories of a long namespace and a long key: 0700. */
	char rel[1200];
	snprintf(rel, sizeof(rel), "%.200s+", long_name);
	p = ns_file(f, rel);
	assert_int_equal(stat(p, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0700);
	free(p);
	snprintf(rel, sizeof(rel), "%.200s+/%s.d/%.200s+", long_name, long_name + 200, long_name);
	p = ns_file(f, rel);
	assert_int_equal(stat(p, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0700);
	free(p);
	snprintf(rel, sizeof(rel), "%.200s+/%s.d/%.200s+/%s.json", long_name, long_name + 200,
	         long_name, long_name + 200);
	p = ns_file(f, rel);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	free(p);
	aks__store_unlock(f->s, lk);
	/* The census checks every entry: files 0600, directories 0700. */
	assert_clean(f, 2);
}

static void test_stale_temp_and_lock_files(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	/* What processes killed mid-write or while holding locks leave: lock files and a half
	 * temporary, beside a record and beside an absent one. */
	assert_int_equal(aks__store_update(f->s, "s", "live", incr, NULL, &err), AKS_OK);
	const char *leftovers[] = {"s.d/k.tmp",    "s.d/k.lock",    "s.d/k.mutex",
	                           "s.d/live.tmp", "s.d/live.lock", "s.d/live.mutex"};
	for (size_t i = 0; i < 6; i++) {
		char *p = ns_file(f, leftovers[i]);
		spit(p, i % 3 == 0 ? "{\"half\": " : "");
		free(p);
	}
	json_object *rec = NULL;
	assert_int_equal(aks__store_get(f->s, "s", "k", &rec, &err), AKS_ENOTFOUND);
	assert_null(err);
	assert_int_equal(get_n(f->s, "s", "live"), 1);
	assert_scan(f->s, "s", "", "live ");
	assert_list(f->s, "s ");

	/* Neither blocks, and the next holder cleans up. A lock wait gets a short deadline, so
	 * that a regression fails instead of hanging. */
	aks_call call;
	for (int i = 0; i < 2; i++) {
		const char *key = i ? "live" : "k";
		assert_int_equal(aks__store_update(f->s, "s", key, incr, NULL, &err), AKS_OK);
		aks_store_lock *lk = NULL;
		aks_call_init(&call, 5.0, NULL, NULL, NULL);
		assert_int_equal(aks__store_lock(f->s, "s", key, &call, &lk, &err), AKS_OK);
		aks__store_unlock(f->s, lk);
	}
	assert_int_equal(get_n(f->s, "s", "k"), 1);
	assert_int_equal(get_n(f->s, "s", "live"), 2);
	assert_ns_listing(f, "s.d", "k.json live.json ");

	/* A stale temporary beside a record that is then deleted goes too. */
	char *p = ns_file(f, "s.d/k.tmp");
	spit(p, "{");
	free(p);
	assert_int_equal(aks__store_update(f->s, "s", "k", clear, NULL, &err), AKS_OK);
	assert_ns_listing(f, "s.d", "live.json ");
	assert_clean(f, 1);

	/* Stray files are neither namespaces nor records. */
	const char *strays[] = {
	    "README",    "%61.d",      "ABC.d",        "x.d.bak",      ".d",
	    "a+",        "s.d/README", "s.d/%61.json", "s.d/ABC.json", "s.d/x.json.bak",
	    "s.d/.json", "s.d/a+",     "s.d/x.lock",   "s.d/x.tmp"};
	for (size_t i = 0; i < sizeof(strays) / sizeof(*strays); i++) {
		p = ns_file(f, strays[i]);
		spit(p, "{\"n\": 100}");
		free(p);
	}
	assert_list(f->s, "s ");
	assert_scan(f->s, "s", "", "live ");
}

/* ---- scan and list ---- */

static void test_scan_prefix(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	char long_key[AKS_STORE_NAME_MAX + 1];
	memset(long_key, '~', AKS_STORE_NAME_MAX);
	memcpy(long_key, "session:", 8);
	long_key[AKS_STORE_NAME_MAX] = '\0';
	const char *keys[] = {"session:a", "session:b", "session:", "sessions",
	                      "task:1",    "task:2",    "t",        long_key};
	for (size_t i = 0; i < sizeof(keys) / sizeof(*keys); i++)
		assert_int_equal(aks__store_update(f->s, "conv", keys[i], incr, NULL, &err),
		                 AKS_OK);
	/* Another namespace's records are never part of a scan. */
	assert_int_equal(aks__store_update(f->s, "other", "session:x", incr, NULL, &err), AKS_OK);
	assert_int_equal(aks__store_update(f->s, "conv2", "session:y", incr, NULL, &err), AKS_OK);

	char *want = NULL;
	assert_true(asprintf(&want, "session: session:a session:b %s ", long_key) > 0);
	assert_scan(f->s, "conv", "session:", want);
	free(want);
	assert_scan(f->s, "conv", "task:", "task:1 task:2 ");
	assert_scan(f->s, "conv", "task:1", "task:1 ");
	assert_scan(f->s, "conv", "t", "t task:1 task:2 ");
	assert_scan(f->s, "conv", "session:~a", "");
	assert_scan(f->s, "conv", "x", "");
	assert_scan(f->s, "conv", "session:a-longer", "");
	assert_scan(f->s, "conv2", "", "session:y ");
	assert_scan(f->s, "absent", "", "");
	assert_scan(f->s, "absent", "session:", "");
	/* prefix NULL is "". */
	seen s = {.n = 0};
	assert_int_equal(aks__store_scan(f->s, "conv", NULL, collect, &s, &err), AKS_OK);
	assert_int_equal(s.n, sizeof(keys) / sizeof(*keys));
	assert_int_equal(s.sum, (int64_t)(sizeof(keys) / sizeof(*keys)));
	free(seen_keys(&s));
	/* The long key's record is the one written. */
	assert_int_equal(get_n(f->s, "conv", long_key), 1);
	assert_true(asprintf(&want, "%s ", long_key) > 0);
	assert_scan(f->s, "conv", "session:~", want);
	free(want);

	/* A non-zero return of the callback stops the scan and is its result. */
	s = (seen){.stop_after = 2};
	assert_int_equal(aks__store_scan(f->s, "conv", "", collect, &s, &err), AKS_EPOLICY);
	assert_int_equal(s.n, 2);
	free(seen_keys(&s));

	/* Deleted records drop out. */
	assert_int_equal(aks__store_update(f->s, "conv", "session:a", clear, NULL, &err), AKS_OK);
	assert_int_equal(aks__store_update(f->s, "conv", long_key, clear, NULL, &err), AKS_OK);
	assert_scan(f->s, "conv", "session:", "session: session:b ");
	assert_clean(f, 8);
}

static void test_list_namespaces(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	assert_list(f->s, "");
	const char *ns[] = {"b", "a", AKS_STORE_NS_RUNTIME, "c-1", "A"};
	for (size_t i = 0; i < 5; i++) {
		assert_int_equal(aks__store_update(f->s, ns[i], "k1", incr, NULL, &err), AKS_OK);
		assert_int_equal(aks__store_update(f->s, ns[i], "k2", incr, NULL, &err), AKS_OK);
	}
	assert_list(f->s, "@runtime A a b c-1 "); /* bytewise order */
	/* A namespace is listed while it has a record... */
	assert_int_equal(aks__store_update(f->s, "b", "k1", clear, NULL, &err), AKS_OK);
	assert_list(f->s, "@runtime A a b c-1 ");
	/* ...and dropped when its last one goes. */
	assert_int_equal(aks__store_update(f->s, "b", "k2", clear, NULL, &err), AKS_OK);
	assert_list(f->s, "@runtime A a c-1 ");
	assert_int_equal(aks__store_update(f->s, AKS_STORE_NS_RUNTIME, "k1", clear, NULL, &err),
	                 AKS_OK);
	assert_int_equal(aks__store_update(f->s, AKS_STORE_NS_RUNTIME, "k2", clear, NULL, &err),
	                 AKS_OK);
	assert_list(f->s, "A a c-1 ");
	/* Reading, scanning and failed transactions add nothing. */
	json_object *rec = NULL;
	assert_int_equal(aks__store_get(f->s, "z", "k", &rec, &err), AKS_ENOTFOUND);
	assert_scan(f->s, "y", "", "");
	assert_int_equal(aks__store_update(f->s, "x", "k", change_then_fail, NULL, &err),
	                 AKS_EPOLICY);
	aks_error_free(err);
	err = NULL;
	assert_list(f->s, "A a c-1 ");
	assert_clean(f, 6);
}

/* The namespaces listed are exactly those with records, whatever else is left in ns/: a
 * namespace directory holding only a leftover lock or temporary file (a killed process), or
 * only a held named lock, or empty directories, has no record. */
static void test_list_only_namespaces_with_records(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	assert_int_equal(aks__store_update(f->s, "real", "k", incr, NULL, &err), AKS_OK);
	const char *leftovers[] = {"dead-lock.d/k.lock", "dead-tmp.d/k.tmp",
	                           "dead-mutex.d/k.mutex"};
	for (size_t i = 0; i < 3; i++) {
		char *p = ns_file(f, leftovers[i]);
		char *d = strdup(p);
		*strrchr(d, '/') = '\0';
		mkdir_p(d);
		free(d);
		spit(p, "");
		free(p);
	}
	char *p = ns_file(f, "empty-dir.d/aaaa+");
	mkdir_p(p);
	free(p);
	aks_store_lock *lk = NULL;
	assert_int_equal(aks__store_lock(f->s, "held", "session:x", NULL, &lk, &err), AKS_OK);
	char *while_held = list_string(f->s);
	aks__store_unlock(f->s, lk);
	bool ok = strcmp(while_held, "real ") == 0;
	print_message("# namespaces while a lock is held in \"held\": %s\n", while_held);
	free(while_held);
	assert_list(f->s, "real ");
	assert_true(ok);
}

typedef struct churner {
	aks_state_store *s;
	int id;
	volatile int stop;
	int rounds, failures;
} churner;

static void *churn_records(void *arg)
{
	churner *c = arg;
	char long_key[AKS_STORE_NAME_MAX + 1];
	memset(long_key, '~', AKS_STORE_NAME_MAX);
	long_key[AKS_STORE_NAME_MAX] = '\0';
	while (!c->stop) {
		aks_error *err = NULL;
		char key[32], ns[32];
		/* Each thread its own names: every record holds n == 1 while it exists. */
		snprintf(key, sizeof(key), "tmp-%d-%d", c->id, c->rounds % 7);
		snprintf(ns, sizeof(ns), "ephemeral-%d-%d", c->id, c->rounds % 3);
		long_key[AKS_STORE_NAME_MAX - 2] = (char)('a' + c->id);
		long_key[AKS_STORE_NAME_MAX - 1] = (char)('a' + c->rounds % 5);
		int rc = aks__store_update(c->s, "churn", key, incr, NULL, &err);
		rc = rc ? rc : aks__store_update(c->s, "churn", long_key, incr, NULL, &err);
		rc = rc ? rc : aks__store_update(c->s, ns, "only", incr, NULL, &err);
		rc = rc ? rc : aks__store_update(c->s, "churn", key, clear, NULL, &err);
		rc = rc ? rc : aks__store_update(c->s, "churn", long_key, clear, NULL, &err);
		rc = rc ? rc : aks__store_update(c->s, ns, "only", clear, NULL, &err);
		if (rc != AKS_OK) {
			fprintf(stderr, "# churn: %s\n", aks_error_message(err));
			c->failures++;
		}
		aks_error_free(err);
		c->rounds++;
	}
	return NULL;
}

/* Counts the stable records a scan sees; every record must hold n == 1. */
typedef struct stable_seen {
	int stable, long_stable, bad;
	const char *long_key;
} stable_seen;

static int see_stable(void *ctx, const char *key, json_object *rec)
{
	stable_seen *s = ctx;
	if (json_object_get_int64(json_object_object_get(rec, "n")) != 1)
		s->bad++;
	if (strncmp(key, "stable-", 7) == 0)
		s->stable++;
	else if (strcmp(key, s->long_key) == 0)
		s->long_stable++;
	return AKS_OK;
}

static void test_scan_and_list_during_deletes(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	/* Records that stay, beside records that come and go: the stable long key shares its
	 * first chunk directory with the churned long keys. */
	char long_key[AKS_STORE_NAME_MAX + 1];
	memset(long_key, '~', AKS_STORE_NAME_MAX);
	long_key[AKS_STORE_NAME_MAX] = '\0';
	long_key[AKS_STORE_NAME_MAX - 1] = 'z';
	for (int i = 0; i < 5; i++) {
		char key[32];
		snprintf(key, sizeof(key), "stable-%d", i);
		assert_int_equal(aks__store_update(f->s, "churn", key, incr, NULL, &err), AKS_OK);
	}
	assert_int_equal(aks__store_update(f->s, "churn", long_key, incr, NULL, &err), AKS_OK);
	assert_int_equal(aks__store_update(f->s, "steady", "k", incr, NULL, &err), AKS_OK);

	churner c[2] = {{.s = f->s, .id = 0}, {.s = f->s, .id = 1}};
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&t[i], NULL, churn_records, &c[i]), 0);
	/* Failures are noted, not asserted, until the threads are stopped. */
	int scans = 0, lists = 0;
	char problem[512] = "";
	double end = now_s() + 1.5;
	while (!problem[0] && (now_s() < end || c[0].rounds < 20 || c[1].rounds < 20)) {
		stable_seen s = {.long_key = long_key};
		int rc = aks__store_scan(f->s, "churn", "", see_stable, &s, &err);
		if (rc != AKS_OK)
			snprintf(problem, sizeof(problem), "scan during deletes: %d %s", rc,
			         aks_error_message(err));
		else if (s.stable != 5 || s.long_stable != 1 || s.bad)
			snprintf(problem, sizeof(problem),
			         "scan %d saw %d of 5 stable records, %d of the long one, %d bad",
			         scans, s.stable, s.long_stable, s.bad);
		scans++;
		char **names = NULL;
		rc = problem[0] ? AKS_OK : aks__store_list(f->s, &names, &err);
		if (rc != AKS_OK)
			snprintf(problem, sizeof(problem), "list during deletes: %d %s", rc,
			         aks_error_message(err));
		int found = 0;
		for (char **p = names; p && *p; p++) {
			found += !strcmp(*p, "churn") || !strcmp(*p, "steady");
			if (strcmp(*p, "churn") && strcmp(*p, "steady") &&
			    strncmp(*p, "ephemeral-", 10))
				snprintf(problem, sizeof(problem),
				         "list during deletes: unexpected namespace \"%s\"", *p);
		}
		aks__store_free_names(names);
		if (names && found != 2)
			snprintf(problem, sizeof(problem), "list %d lost a namespace with records",
			         lists);
		lists++;
	}
	for (int i = 0; i < 2; i++) {
		c[i].stop = 1;
		pthread_join(t[i], NULL);
	}
	if (problem[0])
		fail_msg("%s", problem);
	assert_int_equal(c[0].failures, 0);
	assert_int_equal(c[1].failures, 0);
	print_message("# %d scans and %d listings during %d + %d create/delete rounds\n", scans,
	              lists, c[0].rounds, c[1].rounds);
	assert_clean(f, 7);
	assert_list(f->s, "churn steady ");
}

/* ---- nesting ---- */

typedef struct nest_ctx {
	aks_state_store *s;
	int rc_update, rc_get, rc_other, rc_scan, rc_list, rc_lock;
	char msg[256];
	bool scanned;
	char **names;
} nest_ctx;

static int scan_flag(void *ctx, const char *key, json_object *rec)
{
	(void)key;
	(void)rec;
	((nest_ctx *)ctx)->scanned = true;
	return AKS_OK;
}

static int nested(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)err;
	nest_ctx *c = ctx;
	aks_error *e = NULL;
	json_object *snap = NULL;
	c->rc_update = aks__store_update(c->s, "n1", "k", incr, NULL, &e);
	snprintf(c->msg, sizeof(c->msg), "%s", aks_error_message(e));
	aks_error_free(e);
	e = NULL;
	c->rc_get = aks__store_get(c->s, "n1", "other", &snap, &e);
	json_object_put(snap);
	aks_error_free(e);
	e = NULL;
	c->rc_other = aks__store_update(c->s, "another", "k", incr, NULL, &e);
	aks_error_free(e);
	e = NULL;
	c->rc_scan = aks__store_scan(c->s, "n1", "", scan_flag, c, &e);
	aks_error_free(e);
	e = NULL;
	c->rc_list = aks__store_list(c->s, &c->names, &e);
	aks_error_free(e);
	json_object_object_add(rec, "outer", json_object_new_boolean(1));
	*changed = true;
	return AKS_OK;
}

static void test_nested_calls_refused(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	assert_int_equal(aks__store_update(f->s, "n1", "other", incr, NULL, &err), AKS_OK);
	nest_ctx c = {.s = f->s};
	assert_int_equal(aks__store_update(f->s, "n1", "k", nested, &c, &err), AKS_OK);
	assert_int_equal(c.rc_update, AKS_EINVAL);
	assert_int_equal(c.rc_get, AKS_EINVAL);
	assert_int_equal(c.rc_other, AKS_EINVAL);
	assert_int_equal(c.rc_scan, AKS_EINVAL);
	assert_int_equal(c.rc_list, AKS_EINVAL);
	assert_false(c.scanned);
	assert_null(c.names);
	assert_non_null(strstr(c.msg, "inside a transaction"));
	/* The outer transaction committed; the refused inner ones did nothing. */
	json_object *rec = NULL;
	assert_int_equal(aks__store_get(f->s, "n1", "k", &rec, &err), AKS_OK);
	assert_string_equal(json_object_to_json_string_ext(rec, JSON_C_TO_STRING_PLAIN),
	                    "{\"outer\":true}");
	json_object_put(rec);
	assert_int_equal(get_n(f->s, "another", "k"), -1);
	assert_int_equal(get_n(f->s, "n1", "other"), 1);
	/* And the handle works normally afterwards, on this thread too. */
	assert_int_equal(aks__store_update(f->s, "n1", "k", incr, NULL, &err), AKS_OK);
	assert_int_equal(get_n(f->s, "n1", "k"), 1);
	assert_scan(f->s, "n1", "", "k other ");
	assert_list(f->s, "n1 ");
	assert_clean(f, 2);
}

/* A named lock taken from inside a transaction can deadlock against a thread that holds the
 * named lock and waits for the record (the manager's order is: named lock, then records), so
 * it is refused like any other call into the store from there (state_store.h: "fn must not
 * call into the store"). A short deadline keeps a regression from hanging. */
static int nested_lock(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	nest_ctx *c = ctx;
	aks_error *e = NULL;
	aks_store_lock *lk = NULL;
	aks_call call;
	aks_call_init(&call, 0.5, NULL, NULL, NULL);
	c->rc_lock = aks__store_lock(c->s, "n1", "session:x", &call, &lk, &e);
	if (lk)
		aks__store_unlock(c->s, lk);
	aks_error_free(e);
	return incr(rec, changed, NULL, err);
}

static void test_nested_lock_refused(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	nest_ctx c = {.s = f->s};
	assert_int_equal(aks__store_update(f->s, "n1", "k", nested_lock, &c, &err), AKS_OK);
	assert_int_equal(c.rc_lock, AKS_EINVAL);
	assert_clean(f, 1);
}

/* ---- threads ---- */

#define THREADS    6
#define PER_THREAD 15

/* incr, slowly: widens the window in which a broken lock would let two writers in. */
static int incr_slow(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	json_object *n = NULL;
	int64_t v = json_object_object_get_ex(rec, "n", &n) ? json_object_get_int64(n) : 0;
	usleep(300);
	int rc = incr(rec, changed, ctx, err);
	json_object_object_add(rec, "n", json_object_new_int64(v + 1));
	return rc;
}

typedef struct worker {
	aks_state_store *s;
	int id, failures;
} worker;

static void *work(void *arg)
{
	worker *w = arg;
	char own[32];
	snprintf(own, sizeof(own), "own-%d", w->id);
	for (int i = 0; i < PER_THREAD; i++) {
		char tag[32];
		snprintf(tag, sizeof(tag), "t%d-%d", w->id, i);
		aks_error *err = NULL;
		/* One record everyone changes, one of its own and one shared by pairs of threads
		 * in the same namespace, and a record that keeps being deleted. */
		char pair[32];
		snprintf(pair, sizeof(pair), "pair-%d", w->id / 2);
		if (aks__store_update(w->s, "shared", "counter", incr_slow, tag, &err) != AKS_OK)
			w->failures++;
		if (aks__store_update(w->s, "shared", own, incr_slow, NULL, &err) != AKS_OK)
			w->failures++;
		if (aks__store_update(w->s, "shared", pair, incr, NULL, &err) != AKS_OK)
			w->failures++;
		if (aks__store_update(w->s, "shared", "flip", i % 2 ? clear : incr, NULL, &err) !=
		    AKS_OK)
			w->failures++;
		json_object *rec = NULL;
		if (aks__store_get(w->s, "shared", "counter", &rec, &err) != AKS_OK)
			w->failures++;
		json_object_put(rec);
		if (err)
			fprintf(stderr, "# worker: %s\n", aks_error_message(err));
		aks_error_free(err);
	}
	return NULL;
}

static void test_threads_lose_nothing(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	/* Half the threads on the fixture's handle, half on a second handle. */
	aks_state_store *s2 = NULL;
	assert_int_equal(aks__store_open(f->dir, &s2, &err), AKS_OK);
	pthread_t t[THREADS];
	worker w[THREADS];
	for (int i = 0; i < THREADS; i++) {
		w[i] = (worker){.s = i % 2 ? s2 : f->s, .id = i};
		assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
	}
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(w[i].failures, 0);
	}
	aks__store_close(s2);
	json_object *rec = NULL;
	assert_int_equal(aks__store_get(f->s, "shared", "counter", &rec, &err), AKS_OK);
	assert_int_equal(json_object_get_int(json_object_object_get(rec, "n")),
	                 THREADS * PER_THREAD);
	json_object *list = json_object_object_get(rec, "list");
	assert_int_equal(json_object_array_length(list), THREADS * PER_THREAD);
	/* Every entry exactly once, each thread's in its order. */
	char seen_tag[THREADS][PER_THREAD] = {{0}};
	int next[THREADS] = {0};
	for (size_t i = 0; i < json_object_array_length(list); i++) {
		int a = -1, b = -1;
		assert_int_equal(sscanf(json_object_get_string(json_object_array_get_idx(list, i)),
		                        "t%d-%d", &a, &b),
		                 2);
		assert_in_range(a, 0, THREADS - 1);
		assert_in_range(b, 0, PER_THREAD - 1);
		assert_int_equal(seen_tag[a][b]++, 0);
		assert_int_equal(b, next[a]++);
	}
	json_object_put(rec);
	for (int i = 0; i < THREADS; i++) {
		char own[32];
		snprintf(own, sizeof(own), "own-%d", i);
		assert_int_equal(get_n(f->s, "shared", own), PER_THREAD);
	}
	for (int i = 0; i < THREADS / 2; i++) {
		char pair[32];
		snprintf(pair, sizeof(pair), "pair-%d", i);
		assert_int_equal(get_n(f->s, "shared", pair), 2 * PER_THREAD);
	}
	/* Every thread's last change of "flip" adds 1, so it ends holding the number of those
	 * made after the last deletion: 1 to THREADS. */
	int64_t flip = get_n(f->s, "shared", "flip");
	assert_in_range(flip, 1, THREADS);
	/* No temporary or lock file left behind. */
	assert_clean(f, 1 + THREADS + THREADS / 2 + 1);
}

/* A waiter queued on a lock file that its holder removes (it removes it on every release)
 * must not keep using the removed file: its write has to land in the record as seen by
 * everyone else. Here the holder also deletes the record, so the directory goes too. */
typedef struct hold_ctx {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool inside, go;
} hold_ctx;

static int hold_then_clear(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	hold_ctx *h = ctx;
	pthread_mutex_lock(&h->mu);
	h->inside = true;
	pthread_cond_broadcast(&h->cv);
	while (!h->go)
		pthread_cond_wait(&h->cv, &h->mu);
	pthread_mutex_unlock(&h->mu);
	return clear(rec, changed, NULL, err);
}

typedef struct holder_arg {
	aks_state_store *s;
	hold_ctx *h;
	int rc;
} holder_arg;

static void *holder(void *arg)
{
	holder_arg *a = arg;
	a->rc = aks__store_update(a->s, "churn", "k", hold_then_clear, a->h, NULL);
	return NULL;
}

static void *waiter(void *arg)
{
	holder_arg *a = arg;
	a->rc = aks__store_update(a->s, "churn", "k", incr, "waiter", NULL);
	return NULL;
}

static void test_waiter_on_removed_lock_file(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	assert_int_equal(aks__store_update(f->s, "churn", "k", incr, NULL, &err), AKS_OK);
	hold_ctx h = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
	holder_arg ha = {.s = f->s, .h = &h}, wa = {.s = f->s};
	pthread_t th, tw;
	assert_int_equal(pthread_create(&th, NULL, holder, &ha), 0);
	pthread_mutex_lock(&h.mu);
	while (!h.inside)
		pthread_cond_wait(&h.cv, &h.mu);
	pthread_mutex_unlock(&h.mu);
	/* The holder's lock file exists while it holds it. */
	char *lock = ns_file(f, "churn.d/k.lock");
	assert_true(exists(lock));
	assert_int_equal(pthread_create(&tw, NULL, waiter, &wa), 0);
	usleep(100 * 1000); /* let the waiter open the old lock file and queue on it */
	pthread_mutex_lock(&h.mu);
	h.go = true;
	pthread_cond_broadcast(&h.cv);
	pthread_mutex_unlock(&h.mu);
	pthread_join(th, NULL);
	pthread_join(tw, NULL);
	assert_int_equal(ha.rc, AKS_OK);
	assert_int_equal(wa.rc, AKS_OK);
	/* The waiter's write is the record, after the holder's deletion. */
	json_object *rec = NULL;
	assert_int_equal(aks__store_get(f->s, "churn", "k", &rec, &err), AKS_OK);
	assert_string_equal(json_object_to_json_string_ext(rec, JSON_C_TO_STRING_PLAIN),
	                    "{\"n\":1,\"list\":[\"waiter\"]}");
	json_object_put(rec);
	/* And every lock file went with its holder. */
	assert_false(exists(lock));
	assert_ns_listing(f, "churn.d", "k.json ");
	assert_clean(f, 1);
	free(lock);
}

/* ---- named locks ---- */

/* What the threads contending for one named lock share. */
typedef struct excl_shared {
	pthread_mutex_t mu;
	int inside, max_inside, count, failures;
} excl_shared;

typedef struct excl {
	aks_state_store *s;
	excl_shared *sh;
} excl;

static void *lock_worker(void *arg)
{
	excl *x = arg;
	excl_shared *sh = x->sh;
	for (int i = 0; i < 20; i++) {
		aks_store_lock *lk = NULL;
		aks_error *err = NULL;
		aks_call call;
		aks_call_init(&call, 30.0, NULL, NULL, NULL);
		/* Every other wait with a deadline: the polling path and the blocking one. */
		if (aks__store_lock(x->s, "conv", "session:a", i % 2 ? &call : NULL, &lk, &err) !=
		    AKS_OK) {
			fprintf(stderr, "# lock: %s\n", aks_error_message(err));
			aks_error_free(err);
			pthread_mutex_lock(&sh->mu);
			sh->failures++;
			pthread_mutex_unlock(&sh->mu);
			continue;
		}
		pthread_mutex_lock(&sh->mu);
		if (++sh->inside > sh->max_inside)
			sh->max_inside = sh->inside;
		int c = sh->count;
		pthread_mutex_unlock(&sh->mu);
		usleep(200);
		pthread_mutex_lock(&sh->mu);
		sh->count = c + 1; /* an increment is lost if two were inside at once */
		sh->inside--;
		pthread_mutex_unlock(&sh->mu);
		aks__store_unlock(x->s, lk);
	}
	return NULL;
}

static void test_lock_excludes_threads(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	aks_state_store *s2 = NULL;
	assert_int_equal(aks__store_open(f->dir, &s2, &err), AKS_OK);
	/* Four threads, two on each handle, on one named lock. */
	excl_shared sh = {.mu = PTHREAD_MUTEX_INITIALIZER};
	excl x[4];
	pthread_t t[4];
	for (int i = 0; i < 4; i++) {
		x[i] = (excl){i % 2 ? s2 : f->s, &sh};
		assert_int_equal(pthread_create(&t[i], NULL, lock_worker, &x[i]), 0);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(sh.failures, 0);
	assert_int_equal(sh.max_inside, 1);
	assert_int_equal(sh.count, 4 * 20);
	assert_clean(f, 0);

	/* Different names do not exclude each other, and a named lock does not block the
	 * record of the same name. */
	aks_store_lock *a = NULL, *b = NULL, *c = NULL;
	aks_call call;
	aks_call_init(&call, 5.0, NULL, NULL, NULL);
	assert_int_equal(aks__store_lock(f->s, "conv", "session:a", &call, &a, &err), AKS_OK);
	assert_int_equal(aks__store_lock(f->s, "conv", "session:b", &call, &b, &err), AKS_OK);
	assert_int_equal(aks__store_lock(s2, "conv2", "session:a", &call, &c, &err), AKS_OK);
	assert_int_equal(aks__store_update(f->s, "conv", "session:a", incr, NULL, &err), AKS_OK);
	assert_int_equal(get_n(f->s, "conv", "session:a"), 1);
	census cs = take_census(f);
	assert_int_equal(cs.mutex, 3);
	aks__store_unlock(f->s, a);
	aks__store_unlock(f->s, b);
	aks__store_unlock(s2, c);
	aks__store_unlock(f->s, NULL); /* harmless */
	aks__store_close(s2);
	assert_clean(f, 1);
}

typedef struct timed {
	aks_state_store *s;
	double timeout;
	aks_cancel *cancel;
	int rc;
	double elapsed;
	char msg[256];
	aks_store_lock *lk;
} timed;

static void *timed_lock(void *arg)
{
	timed *t = arg;
	aks_call call;
	aks_call_init(&call, t->timeout, NULL, NULL, t->cancel);
	aks_error *err = NULL;
	double t0 = now_s();
	t->rc = aks__store_lock(t->s, "conv", "session:a", &call, &t->lk, &err);
	t->elapsed = now_s() - t0;
	snprintf(t->msg, sizeof(t->msg), "%s", err ? aks_error_message(err) : "");
	aks_error_free(err);
	return NULL;
}

static void test_lock_wait_timeout(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	aks_store_lock *held = NULL;
	assert_int_equal(aks__store_lock(f->s, "conv", "session:a", NULL, &held, &err), AKS_OK);
	/* In another thread, and in this very thread (a lock is not reentrant). */
	timed t = {.s = f->s, .timeout = 0.2};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, timed_lock, &t), 0);
	pthread_join(th, NULL);
	assert_int_equal(t.rc, AKS_ETIMEOUT);
	assert_null(t.lk);
	assert_true(t.elapsed >= 0.19);
	assert_true(t.elapsed < 10.0);
	if (!strstr(t.msg, "timed out"))
		fail_msg("message: %s", t.msg);
	timed same = {.s = f->s, .timeout = 0.2};
	timed_lock(&same);
	assert_int_equal(same.rc, AKS_ETIMEOUT);
	assert_true(same.elapsed >= 0.19 && same.elapsed < 10.0);
	/* The failed waits did not disturb the holder: its lock file is there and still held. */
	char *mutex = ns_file(f, "conv.d/session%3aa.mutex");
	assert_true(exists(mutex));
	int fd = open(mutex, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), -1);
	assert_int_equal(errno, EWOULDBLOCK);
	close(fd);
	/* Once released, a waiter with a deadline gets it at once. */
	aks__store_unlock(f->s, held);
	assert_false(exists(mutex));
	timed ok = {.s = f->s, .timeout = 5.0};
	timed_lock(&ok);
	assert_int_equal(ok.rc, AKS_OK);
	assert_non_null(ok.lk);
	assert_true(ok.elapsed < 5.0);
	aks__store_unlock(f->s, ok.lk);
	free(mutex);
	assert_clean(f, 0);
}

typedef struct releaser {
	aks_state_store *s;
	aks_store_lock *lk;
	int delay_ms;
} releaser;

static void *release_later(void *arg)
{
	releaser *r = arg;
	usleep((useconds_t)r->delay_ms * 1000);
	aks__store_unlock(r->s, r->lk);
	return NULL;
}

static void test_lock_waits_until_released(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	aks_store_lock *held = NULL;
	assert_int_equal(aks__store_lock(f->s, "conv", "session:a", NULL, &held, &err), AKS_OK);
	releaser r = {f->s, held, 300};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, release_later, &r), 0);
	/* No deadline: waits as long as it takes. */
	aks_store_lock *lk = NULL;
	double t0 = now_s();
	assert_int_equal(aks__store_lock(f->s, "conv", "session:a", NULL, &lk, &err), AKS_OK);
	double waited = now_s() - t0;
	pthread_join(th, NULL);
	assert_true(waited >= 0.25 && waited < 10.0);
	/* With a deadline that is far enough. */
	r = (releaser){f->s, lk, 300};
	assert_int_equal(pthread_create(&th, NULL, release_later, &r), 0);
	timed t = {.s = f->s, .timeout = 8.0};
	timed_lock(&t);
	pthread_join(th, NULL);
	assert_int_equal(t.rc, AKS_OK);
	assert_true(t.elapsed >= 0.25 && t.elapsed < 8.0);
	aks__store_unlock(f->s, t.lk);
	assert_clean(f, 0);
}

typedef struct canceller {
	aks_cancel *cancel;
	int delay_ms;
} canceller;

static void *cancel_later(void *arg)
{
	canceller *c = arg;
	usleep((useconds_t)c->delay_ms * 1000);
	aks_cancel_trigger(c->cancel);
	return NULL;
}

static void test_lock_wait_cancelled(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	aks_store_lock *held = NULL;
	assert_int_equal(aks__store_lock(f->s, "conv", "session:a", NULL, &held, &err), AKS_OK);
	aks_cancel *cancel = NULL;
	assert_int_equal(aks_cancel_new(&cancel, &err), AKS_OK);
	/* A long deadline; the cancellation ends the wait long before it. */
	canceller c = {cancel, 200};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, cancel_later, &c), 0);
	timed t = {.s = f->s, .timeout = 60.0, .cancel = cancel};
	timed_lock(&t);
	pthread_join(th, NULL);
	assert_int_equal(t.rc, AKS_ECANCELLED);
	assert_null(t.lk);
	assert_true(aks_cancel_is_triggered(cancel));
	assert_true(t.elapsed >= 0.15 && t.elapsed < 10.0);
	if (!strstr(t.msg, "cancelled"))
		fail_msg("message: %s", t.msg);
	/* Without a deadline too. */
	aks_cancel *cancel2 = NULL;
	assert_int_equal(aks_cancel_new(&cancel2, &err), AKS_OK);
	c = (canceller){cancel2, 200};
	assert_int_equal(pthread_create(&th, NULL, cancel_later, &c), 0);
	timed t2 = {.s = f->s, .timeout = 0, .cancel = cancel2};
	timed_lock(&t2);
	pthread_join(th, NULL);
	assert_int_equal(t2.rc, AKS_ECANCELLED);
	assert_true(t2.elapsed >= 0.15 && t2.elapsed < 10.0);
	/* An already cancelled call does not wait at all for a held lock. */
	timed t3 = {.s = f->s, .timeout = 60.0, .cancel = cancel};
	timed_lock(&t3);
	assert_int_equal(t3.rc, AKS_ECANCELLED);
	assert_true(t3.elapsed < 5.0);
	/* The holder was not disturbed. */
	char *mutex = ns_file(f, "conv.d/session%3aa.mutex");
	assert_true(exists(mutex));
	free(mutex);
	aks__store_unlock(f->s, held);
	aks_cancel_free(cancel);
	aks_cancel_free(cancel2);
	assert_clean(f, 0);
}

static bool readable_within(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	return poll(&p, 1, ms) == 1;
}

static void test_lock_released_when_holder_killed(void **state)
{
	fixture *f = *state;
	int held[2];
	assert_int_equal(pipe(held), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(held[0]);
		aks_state_store *cs = NULL;
		aks_store_lock *lk = NULL;
		if (aks__store_open(f->dir, &cs, NULL) != AKS_OK ||
		    aks__store_lock(cs, "conv", "session:a", NULL, &lk, NULL) != AKS_OK)
			_exit(2);
		if (write(held[1], "L", 1) != 1)
			_exit(3);
		for (;;)
			pause();
	}
	close(held[1]);
	assert_true(readable_within(held[0], 10000)); /* the child holds the lock */
	/* Held while the child lives. */
	timed t = {.s = f->s, .timeout = 0.3};
	timed_lock(&t);
	assert_int_equal(t.rc, AKS_ETIMEOUT);
	/* A waiter with a long deadline gets it once the child is killed. */
	timed w = {.s = f->s, .timeout = 30.0};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, timed_lock, &w), 0);
	usleep(100 * 1000);
	kill(pid, SIGKILL);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	assert_true(WIFSIGNALED(st));
	pthread_join(th, NULL);
	assert_int_equal(w.rc, AKS_OK);
	assert_true(w.elapsed < 10.0);
	aks__store_unlock(f->s, w.lk);
	close(held[0]);
	/* The dead holder's lock file is no obstacle afterwards either, and goes. */
	timed again = {.s = f->s, .timeout = 5.0};
	timed_lock(&again);
	assert_int_equal(again.rc, AKS_OK);
	aks__store_unlock(f->s, again.lk);
	assert_clean(f, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_open_creates_private_dirs),
	    cmocka_unit_test(test_default_dir),
	    cmocka_unit_test_setup_teardown(test_update_and_get, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_deleting_records_leaves_nothing, setup, teardown),
	    cmocka_unit_test(test_name_encoding),
	    cmocka_unit_test_setup_teardown(test_hostile_names, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_names, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_null_key_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_corrupt_records, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_scan_skips_planted_symlink, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_planted_fifo_and_dir, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_size_bound, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_depth_bound, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_permissions, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stale_temp_and_lock_files, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_scan_prefix, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_list_namespaces, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_list_only_namespaces_with_records, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_scan_and_list_during_deletes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_nested_calls_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_nested_lock_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_threads_lose_nothing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_waiter_on_removed_lock_file, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lock_excludes_threads, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lock_wait_timeout, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lock_waits_until_released, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lock_wait_cancelled, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lock_released_when_holder_killed, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
