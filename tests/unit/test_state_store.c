/* Unit tests: the file-backed state store (core/state_store.h): transactions, snapshots,
 * listing, the namespace encoding, bad names, corrupt files, bounds and permissions. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <pwd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "core/state_store.h"

/* ---- fixtures and helpers ---- */

typedef struct fixture {
	char base[64]; /* a fresh temporary directory */
	char dir[128]; /* the store: base/state (created by the store) */
	aks_state_store *s;
} fixture;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void rm_rf(const char *path)
{
	nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

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
	rm_rf(f->base);
	free(f);
	return 0;
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
	assert_non_null(fp);
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
	assert_non_null(fp);
	assert_int_equal(fwrite(data, 1, len, fp), len);
	fclose(fp);
}

static void spit(const char *path, const char *text)
{
	spitn(path, text, strlen(text));
}

/* Names of the entries of a directory (not . and ..), one string "a b c " sorted. */
static int cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *dir_listing(const char *path)
{
	DIR *d = opendir(path);
	assert_non_null(d);
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

static char *ns_listing(const fixture *f)
{
	char p[160];
	snprintf(p, sizeof(p), "%s/ns", f->dir);
	return dir_listing(p);
}

/* fn: adds 1 to "n" and appends ctx (a string, when not NULL) to "list". */
static int incr(json_object *doc, bool *changed, void *ctx, aks_error **err)
{
	(void)err;
	json_object *n = NULL;
	int64_t v = json_object_object_get_ex(doc, "n", &n) ? json_object_get_int64(n) : 0;
	json_object_object_add(doc, "n", json_object_new_int64(v + 1));
	if (ctx) {
		json_object *list = NULL;
		if (!json_object_object_get_ex(doc, "list", &list)) {
			list = json_object_new_array();
			json_object_object_add(doc, "list", list);
		}
		json_object_array_add(list, json_object_new_string(ctx));
	}
	*changed = true;
	return AKS_OK;
}

static int64_t get_n(aks_state_store *s, const char *ns)
{
	json_object *doc = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks__store_read(s, ns, &doc, &err), AKS_OK);
	json_object *n = NULL;
	int64_t v = json_object_object_get_ex(doc, "n", &n) ? json_object_get_int64(n) : -1;
	json_object_put(doc);
	return v;
}

/* fn: removes every key. */
static int clear(json_object *doc, bool *changed, void *ctx, aks_error **err)
{
	(void)ctx;
	(void)err;
	while (json_object_object_length(doc) > 0) {
		struct json_object_iterator it = json_object_iter_begin(doc);
		char *key = strdup(json_object_iter_peek_name(&it));
		json_object_object_del(doc, key);
		free(key);
	}
	*changed = true;
	return AKS_OK;
}

/* fn: changes the document but says it did not. */
static int change_quietly(json_object *doc, bool *changed, void *ctx, aks_error **err)
{
	(void)ctx;
	(void)err;
	json_object_object_add(doc, "quiet", json_object_new_boolean(1));
	*changed = false;
	return AKS_OK;
}

/* fn: changes the document, then fails with its own error. */
static int change_then_fail(json_object *doc, bool *changed, void *ctx, aks_error **err)
{
	(void)ctx;
	json_object_object_add(doc, "n", json_object_new_int(999));
	*changed = true;
	return aks__error_set(err, AKS_EPOLICY, "the caller's own reason");
}

/* fn: sets "blob" to a string of *(size_t *)ctx bytes. */
static int set_blob(json_object *doc, bool *changed, void *ctx, aks_error **err)
{
	(void)err;
	size_t n = *(size_t *)ctx;
	char *s = malloc(n + 1);
	memset(s, 'x', n);
	s[n] = '\0';
	json_object_object_add(doc, "blob", json_object_new_string_len(s, (int)n));
	free(s);
	*changed = true;
	return AKS_OK;
}

/* fn: sets "deep" to a value nested *(int *)ctx levels below the document (which is level 1). */
static int set_deep(json_object *doc, bool *changed, void *ctx, aks_error **err)
{
	(void)err;
	int levels = *(int *)ctx;
	json_object *v = json_object_new_array();
	for (int i = 2; i < levels; i++) {
		json_object *outer = json_object_new_array();
		json_object_array_add(outer, v);
		v = outer;
	}
	json_object_object_add(doc, "deep", v);
	*changed = true;
	return AKS_OK;
}

static void expect_err(int rc, int want_rc, aks_error **err, const char *needle)
{
	assert_int_equal(rc, want_rc);
	assert_non_null(*err);
	if (!strstr(aks_error_message(*err), needle))
		fail_msg("message \"%s\" lacks \"%s\"", aks_error_message(*err), needle);
	aks_error_free(*err);
	*err = NULL;
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
	struct stat st;
	char p[160];
	const char *subs[] = {"/a", "/a/b", "/a/b/c", "/a/b/c/ns"};
	for (size_t i = 0; i < 4; i++) {
		snprintf(p, sizeof(p), "%s%s", base, subs[i]);
		assert_int_equal(stat(p, &st), 0);
		assert_true(S_ISDIR(st.st_mode));
		assert_int_equal(st.st_mode & 07777, 0700);
	}
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
	rm_rf(base);
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

	/* open(NULL) uses it. */
	char base[] = "/tmp/aks-store-env-XXXXXX";
	assert_non_null(mkdtemp(base));
	setenv("AKS_STATE_DIR", base, 1);
	aks_state_store *s = NULL;
	assert_int_equal(aks__store_open(NULL, &s, &err), AKS_OK);
	assert_string_equal(aks__store_dir(s), base);
	assert_int_equal(aks__store_update(s, "c1", incr, NULL, &err), AKS_OK);
	aks__store_close(s);
	char p[128];
	snprintf(p, sizeof(p), "%s/ns/c1.json", base);
	assert_true(exists(p));
	rm_rf(base);

	for (int i = 0; i < 3; i++) {
		if (saved[i])
			setenv(vars[i], saved[i], 1);
		else
			unsetenv(vars[i]);
		free(saved[i]);
	}
}

/* ---- transactions and snapshots ---- */

static void test_update_and_read(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	json_object *doc = NULL;

	/* Nothing yet: {} and no file created by reading. */
	assert_int_equal(aks__store_read(f->s, "conv-1", &doc, &err), AKS_OK);
	assert_string_equal(json_object_to_json_string(doc), "{ }");
	json_object_put(doc);
	char *listing = dir_listing(f->dir);
	assert_string_equal(listing, "ns ");
	free(listing);
	listing = ns_listing(f);
	assert_string_equal(listing, "");
	free(listing);

	for (int i = 0; i < 3; i++)
		assert_int_equal(aks__store_update(f->s, "conv-1", incr, "x", &err), AKS_OK);
	assert_null(err);
	assert_int_equal(get_n(f->s, "conv-1"), 3);
	char *path = ns_file(f, "conv-1.json");
	char *text = slurp(path);
	assert_string_equal(text, "{\"n\":3,\"list\":[\"x\",\"x\",\"x\"]}\n");
	free(text);

	/* Only the document and its lock file: no temporary left behind. */
	listing = ns_listing(f);
	assert_string_equal(listing, "conv-1.json conv-1.lock ");
	free(listing);

	/* Unchanged (by its own account): nothing written. */
	assert_int_equal(aks__store_update(f->s, "conv-1", change_quietly, NULL, &err), AKS_OK);
	text = slurp(path);
	assert_null(strstr(text, "quiet"));
	free(text);

	/* fn's error comes back as it was, and nothing is written. */
	assert_int_equal(aks__store_update(f->s, "conv-1", change_then_fail, NULL, &err),
	                 AKS_EPOLICY);
	assert_string_equal(aks_error_message(err), "the caller's own reason");
	aks_error_free(err);
	err = NULL;
	assert_int_equal(get_n(f->s, "conv-1"), 3);

	/* Snapshots are independent copies. */
	json_object *a = NULL, *b = NULL;
	assert_int_equal(aks__store_read(f->s, "conv-1", &a, &err), AKS_OK);
	json_object_object_add(a, "n", json_object_new_int(42));
	assert_int_equal(aks__store_read(f->s, "conv-1", &b, &err), AKS_OK);
	assert_int_equal(json_object_get_int(json_object_object_get(b, "n")), 3);
	json_object_put(a);
	json_object_put(b);

	/* Namespaces are separate. */
	assert_int_equal(aks__store_update(f->s, "conv-2", incr, NULL, &err), AKS_OK);
	assert_int_equal(get_n(f->s, "conv-2"), 1);
	assert_int_equal(get_n(f->s, "conv-1"), 3);

	/* No store or no function. */
	expect_err(aks__store_update(f->s, "conv-1", NULL, NULL, &err), AKS_EINVAL, &err,
	           "no function");
	free(path);
}

static void test_empty_document_leaves_nothing(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	char long_ns[AKS_STORE_NS_MAX + 1];
	memset(long_ns, '~', AKS_STORE_NS_MAX); /* '~' is escaped: 768 bytes, 4 components */
	long_ns[AKS_STORE_NS_MAX] = '\0';
	const char *names[] = {"keep", "gone", long_ns};
	for (int i = 0; i < 3; i++)
		assert_int_equal(aks__store_update(f->s, names[i], incr, NULL, &err), AKS_OK);
	char **list = NULL;
	assert_int_equal(aks__store_list(f->s, &list, &err), AKS_OK);
	assert_non_null(list[0]);
	assert_non_null(list[1]);
	assert_non_null(list[2]);
	assert_null(list[3]);
	aks__store_free_names(list);

	assert_int_equal(aks__store_update(f->s, "gone", clear, NULL, &err), AKS_OK);
	assert_int_equal(aks__store_update(f->s, long_ns, clear, NULL, &err), AKS_OK);
	/* Neither document, lock file, temporary nor chunk directory is left. */
	char *listing = ns_listing(f);
	assert_string_equal(listing, "keep.json keep.lock ");
	free(listing);
	assert_int_equal(aks__store_list(f->s, &list, &err), AKS_OK);
	assert_string_equal(list[0], "keep");
	assert_null(list[1]);
	aks__store_free_names(list);
	assert_int_equal(get_n(f->s, "gone"), -1);

	/* A transaction that leaves a fresh namespace empty leaves no trace either. */
	assert_int_equal(aks__store_update(f->s, "never", clear, NULL, &err), AKS_OK);
	listing = ns_listing(f);
	assert_string_equal(listing, "keep.json keep.lock ");
	free(listing);

	/* And the namespace comes back to life normally. */
	assert_int_equal(aks__store_update(f->s, "gone", incr, NULL, &err), AKS_OK);
	assert_int_equal(get_n(f->s, "gone"), 1);
	assert_int_equal(aks__store_update(f->s, long_ns, incr, NULL, &err), AKS_OK);
	assert_int_equal(get_n(f->s, long_ns), 1);
}

/* ---- names ---- */

static void check_path(const char *ns, const char *want)
{
	char *p = aks__store_ns_path(ns);
	assert_non_null(p);
	assert_string_equal(p, want);
	char *back = NULL;
	assert_int_equal(aks__store_ns_from_path(p, &back), AKS_OK);
	assert_string_equal(back, ns);
	free(back);
	free(p);
}

static void test_ns_encoding(void **state)
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

	/* Every byte 0x01..0xff: printable-safe, no '/' or '.', and back again. */
	char all[256];
	for (int i = 1; i < 256; i++)
		all[i - 1] = (char)i;
	all[255] = '\0';
	char *p = aks__store_ns_path(all);
	for (const char *c = p; *c; c++) {
		if (!strchr("abcdefghijklmnopqrstuvwxyz0123456789_-%+/", *c))
			fail_msg("unexpected byte 0x%02x in %s", (unsigned char)*c, p);
	}
	char *back = NULL;
	assert_int_equal(aks__store_ns_from_path(p, &back), AKS_OK);
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

	/* 256 plain bytes: one 200-byte chunk and the rest. */
	char plain[257];
	memset(plain, 'a', 256);
	plain[256] = '\0';
	p = aks__store_ns_path(plain);
	assert_int_equal(strlen(p), 256 + 2);
	assert_memory_equal(p + 200, "+/", 2);
	free(p);
	/* Exactly one chunk: no directory. */
	plain[AKS_STORE_NS_CHUNK] = '\0';
	p = aks__store_ns_path(plain);
	assert_null(strchr(p, '/'));
	free(p);

	/* Only canonical paths decode. */
	const char *bad[] = {"",    "%2E",  "%61", "%00", "%2",   "%zz", "A",      "a.b",
	                     "a/b", "a+/b", "+/a", "a+",  "%2f/", "..",  "%2e+/x", "a b"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		char *ns = NULL;
		if (aks__store_ns_from_path(bad[i], &ns) != AKS_EINVAL)
			fail_msg("\"%s\" decoded to \"%s\"", bad[i], ns ? ns : "(null)");
		assert_null(ns);
	}
	/* 257 bytes is over the limit even when spelled canonically. */
	char over[258];
	memset(over, 'a', 257);
	over[257] = '\0';
	char *ns = NULL;
	p = aks__store_ns_path(over);
	assert_int_equal(aks__store_ns_from_path(p, &ns), AKS_EINVAL);
	free(p);
}

/* Every entry below ns/ of the store, walking it (to show nothing escapes it). */
static void assert_only_under_ns(const fixture *f, size_t want_files)
{
	char *listing = dir_listing(f->dir);
	assert_string_equal(listing, "ns ");
	free(listing);
	listing = dir_listing(f->base);
	assert_string_equal(listing, "state ");
	free(listing);
	/* Count the regular files (documents and lock files) anywhere under ns/. */
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "find '%s/ns' -type f | wc -l", f->dir);
	FILE *fp = popen(cmd, "r");
	assert_non_null(fp);
	size_t n = 0;
	assert_int_equal(fscanf(fp, "%zu", &n), 1);
	pclose(fp);
	assert_int_equal(n, want_files);
}

static void test_hostile_names(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	char all[256];
	for (int i = 1; i < 256; i++)
		all[i - 1] = (char)i;
	all[255] = '\0';
	char max[AKS_STORE_NS_MAX + 1];
	for (int i = 0; i < AKS_STORE_NS_MAX; i++)
		max[i] = (char)(0x80 + i % 0x80);
	max[AKS_STORE_NS_MAX] = '\0';
	const char *names[] = {
	    "../x",   "/", "..", ".", "../../etc/passwd",   "a/../../b", "A",   "a",
	    "x.lock", "x", all,  max, AKS_STORE_NS_RUNTIME, "-rf",       "%2e", "a+",
	    " "};
	size_t count = sizeof(names) / sizeof(*names);
	for (size_t i = 0; i < count; i++) {
		for (size_t k = 0; k <= i; k++)
			assert_int_equal(
			    aks__store_update(f->s, names[i], incr, (void *)names[i], &err),
			    AKS_OK);
	}
	/* Each has its own document, holding exactly what was written to it. */
	for (size_t i = 0; i < count; i++) {
		json_object *doc = NULL;
		assert_int_equal(aks__store_read(f->s, names[i], &doc, &err), AKS_OK);
		assert_int_equal(json_object_get_int(json_object_object_get(doc, "n")), i + 1);
		json_object *list = json_object_object_get(doc, "list");
		assert_int_equal(json_object_array_length(list), i + 1);
		assert_string_equal(json_object_get_string(json_object_array_get_idx(list, 0)),
		                    names[i]);
		json_object_put(doc);
	}
	/* Nothing was created outside ns/: two files (document, lock) per name. */
	assert_only_under_ns(f, 2 * count);

	/* list gives every name back, byte for byte, sorted. */
	char **list = NULL;
	assert_int_equal(aks__store_list(f->s, &list, &err), AKS_OK);
	const char *sorted[sizeof(names) / sizeof(*names)];
	memcpy(sorted, names, sizeof(names));
	qsort(sorted, count, sizeof(*sorted), cmpstr);
	for (size_t i = 0; i < count; i++)
		assert_string_equal(list[i], sorted[i]);
	assert_null(list[count]);
	aks__store_free_names(list);
}

static void test_bad_names(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	json_object *doc = NULL;
	char over[AKS_STORE_NS_MAX + 2];
	memset(over, 'a', AKS_STORE_NS_MAX + 1);
	over[AKS_STORE_NS_MAX + 1] = '\0';
	expect_err(aks__store_update(f->s, "", incr, NULL, &err), AKS_EINVAL, &err,
	           "the namespace is empty");
	expect_err(aks__store_update(f->s, NULL, incr, NULL, &err), AKS_EINVAL, &err,
	           "the namespace is empty");
	expect_err(aks__store_update(f->s, over, incr, NULL, &err), AKS_EINVAL, &err,
	           "the namespace is 257 bytes long; the limit is 256");
	expect_err(aks__store_read(f->s, over, &doc, &err), AKS_EINVAL, &err, "257 bytes");
	assert_null(doc);
	expect_err(aks__store_read(f->s, "", &doc, &err), AKS_EINVAL, &err, "empty");
	/* Nothing was created. */
	char *listing = ns_listing(f);
	assert_string_equal(listing, "");
	free(listing);
	/* Exactly the limit is fine. */
	over[AKS_STORE_NS_MAX] = '\0';
	assert_int_equal(aks__store_update(f->s, over, incr, NULL, &err), AKS_OK);
	assert_int_equal(get_n(f->s, over), 1);
}

/* ---- damage, bounds, permissions ---- */

static void test_corrupt_documents(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	json_object *doc = NULL;
	assert_int_equal(aks__store_update(f->s, "c", incr, NULL, &err), AKS_OK);
	char *path = ns_file(f, "c.json");
	/* sizeof - 1: the last case holds a NUL byte inside. */
	static const char b0[] = "{\"n\": 1", b1[] = "", b2[] = "[1, 2]", b3[] = "{\"n\": 1} x",
	                  b4[] = "not json", b5[] = "\"a string\"", b6[] = "{\"n\": 1}{}",
	                  b7[] = "{\"n\": 1}\0 ";
	const char *bad[] = {b0, b1, b2, b3, b4, b5, b6, b7};
	size_t lens[] = {sizeof(b0) - 1, sizeof(b1) - 1, sizeof(b2) - 1, sizeof(b3) - 1,
	                 sizeof(b4) - 1, sizeof(b5) - 1, sizeof(b6) - 1, sizeof(b7) - 1};
	const char *why[] = {"ends early", "ends early",        "not a JSON object", "more after",
	                     "corrupt",    "not a JSON object", "more after",        "more after"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		spitn(path, bad[i], lens[i]);
		char *want = NULL;
		assert_true(asprintf(&want, "%s is corrupt", path) > 0);
		assert_int_equal(aks__store_update(f->s, "c", incr, NULL, &err), AKS_EIO);
		if (!strstr(aks_error_message(err), want) ||
		    !strstr(aks_error_message(err), why[i]) ||
		    !strstr(aks_error_message(err), "left as it is"))
			fail_msg("case %zu: %s", i, aks_error_message(err));
		aks_error_free(err);
		err = NULL;
		expect_err(aks__store_read(f->s, "c", &doc, &err), AKS_EIO, &err, want);
		assert_null(doc);
		free(want);
		/* Left exactly as it was. */
		struct stat st;
		assert_int_equal(stat(path, &st), 0);
		assert_int_equal(st.st_size, lens[i]);
		char *text = slurp(path);
		assert_memory_equal(text, bad[i], lens[i]);
		free(text);
	}
	/* Still listed, so a reaper sees it and reports it. */
	char **list = NULL;
	assert_int_equal(aks__store_list(f->s, &list, &err), AKS_OK);
	assert_string_equal(list[0], "c");
	aks__store_free_names(list);

	/* Whitespace around a document is fine. */
	spit(path, "\n  {\"n\": 7}  \n\n");
	assert_int_equal(get_n(f->s, "c"), 7);

	/* A symbolic link in its place is not followed. */
	char *target = NULL;
	assert_true(asprintf(&target, "%s/elsewhere.json", f->base) > 0);
	spit(target, "{\"n\": 100}");
	unlink(path);
	assert_int_equal(symlink(target, path), 0);
	expect_err(aks__store_read(f->s, "c", &doc, &err), AKS_EIO, &err, "cannot open");
	expect_err(aks__store_update(f->s, "c", incr, NULL, &err), AKS_EIO, &err, "cannot open");
	char *text = slurp(target);
	assert_string_equal(text, "{\"n\": 100}");
	free(text);
	unlink(target);
	free(target);
	free(path);
}

static void test_size_bound(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	json_object *doc = NULL;
	aks__store_set_max_doc_size(f->s, 1000);
	size_t n = 900;
	assert_int_equal(aks__store_update(f->s, "big", set_blob, &n, &err), AKS_OK);
	char *path = ns_file(f, "big.json");
	char *before = slurp(path);
	n = 1000;
	expect_err(aks__store_update(f->s, "big", set_blob, &n, &err), AKS_ELIMIT, &err,
	           "over the 1000-byte limit; nothing was written");
	char *after = slurp(path);
	assert_string_equal(before, after);
	free(after);
	/* The bound counts the whole file: {"blob":"..."} plus its newline. */
	n = 1000 - strlen("{\"blob\":\"\"}\n");
	assert_int_equal(aks__store_update(f->s, "big", set_blob, &n, &err), AKS_OK);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 1000);
	n++;
	expect_err(aks__store_update(f->s, "big", set_blob, &n, &err), AKS_ELIMIT, &err,
	           "would be 1001 bytes");

	/* A file that grew over the bound by other means is refused when read, not cut. */
	FILE *fp = fopen(path, "a");
	fputs("          ", fp);
	fclose(fp);
	expect_err(aks__store_read(f->s, "big", &doc, &err), AKS_ELIMIT, &err,
	           "big.json is larger than the 1000-byte limit");
	expect_err(aks__store_update(f->s, "big", incr, NULL, &err), AKS_ELIMIT, &err,
	           "larger than the 1000-byte limit");

	/* The default bound is 16 MiB. */
	aks_state_store *s2 = NULL;
	assert_int_equal(aks__store_open(f->dir, &s2, &err), AKS_OK);
	assert_int_equal(aks__store_read(s2, "big", &doc, &err), AKS_OK);
	assert_int_equal(json_object_get_string_len(json_object_object_get(doc, "blob")),
	                 1000 - strlen("{\"blob\":\"\"}\n"));
	json_object_put(doc);
	aks__store_close(s2);
	assert_int_equal(AKS_STORE_MAX_DOC_SIZE, 16 * 1024 * 1024);
	free(before);
	free(path);
}

static void test_depth_bound(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	int levels = AKS_STORE_MAX_DEPTH;
	assert_int_equal(aks__store_update(f->s, "deep", set_deep, &levels, &err), AKS_OK);
	json_object *doc = NULL;
	assert_int_equal(aks__store_read(f->s, "deep", &doc, &err), AKS_OK);
	json_object_put(doc);
	levels++;
	expect_err(aks__store_update(f->s, "deep", set_deep, &levels, &err), AKS_ELIMIT, &err,
	           "nests deeper than 64 levels; nothing was written");
	/* The stored document is still the one that fits. */
	assert_int_equal(aks__store_read(f->s, "deep", &doc, &err), AKS_OK);
	json_object *v = json_object_object_get(doc, "deep");
	int depth = 1;
	while (v) {
		depth++;
		v = json_object_array_length(v) ? json_object_array_get_idx(v, 0) : NULL;
	}
	assert_int_equal(depth, AKS_STORE_MAX_DEPTH);
	json_object_put(doc);
}

static void test_permissions(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	char long_ns[AKS_STORE_NS_MAX + 1];
	memset(long_ns, 'q', AKS_STORE_NS_MAX);
	long_ns[AKS_STORE_NS_MAX] = '\0';
	mode_t old = umask(0); /* the modes must not depend on the caller's umask */
	assert_int_equal(aks__store_update(f->s, "p", incr, NULL, &err), AKS_OK);
	assert_int_equal(aks__store_update(f->s, long_ns, incr, NULL, &err), AKS_OK);
	umask(old);
	struct stat st;
	const char *files[] = {"p.json", "p.lock"};
	for (int i = 0; i < 2; i++) {
		char *p = ns_file(f, files[i]);
		assert_int_equal(stat(p, &st), 0);
		assert_int_equal(st.st_mode & 07777, 0600);
		free(p);
	}
	char rel[400];
	snprintf(rel, sizeof(rel), "%.200s+", long_ns);
	char *p = ns_file(f, rel);
	assert_int_equal(stat(p, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0700);
	free(p);
	snprintf(rel, sizeof(rel), "%.200s+/%s.json", long_ns, long_ns + 200);
	p = ns_file(f, rel);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	free(p);
}

static void test_stale_temp_and_lock_files(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	/* What a writer killed mid-write leaves: a lock file and a half temporary. */
	char *tmp = ns_file(f, "s.tmp"), *lock = ns_file(f, "s.lock");
	spit(tmp, "{\"half\": ");
	spit(lock, "");
	json_object *doc = NULL;
	assert_int_equal(aks__store_read(f->s, "s", &doc, &err), AKS_OK);
	assert_int_equal(json_object_object_length(doc), 0);
	json_object_put(doc);
	char **list = NULL;
	assert_int_equal(aks__store_list(f->s, &list, &err), AKS_OK);
	assert_null(list[0]);
	aks__store_free_names(list);
	assert_int_equal(aks__store_update(f->s, "s", incr, NULL, &err), AKS_OK);
	assert_false(exists(tmp));
	assert_int_equal(get_n(f->s, "s"), 1);

	/* Stray files in ns/ are not namespaces. */
	const char *strays[] = {"README", "%61.json", "ABC.json", "x.json.bak", ".json", "a+"};
	for (size_t i = 0; i < sizeof(strays) / sizeof(*strays); i++) {
		char *p = ns_file(f, strays[i]);
		spit(p, "{}");
		free(p);
	}
	assert_int_equal(aks__store_list(f->s, &list, &err), AKS_OK);
	assert_string_equal(list[0], "s");
	assert_null(list[1]);
	aks__store_free_names(list);
	free(tmp);
	free(lock);
}

/* ---- nesting and threads ---- */

typedef struct nest_ctx {
	aks_state_store *s;
	int rc_update, rc_read, rc_other;
	char msg[256];
} nest_ctx;

static int nested(json_object *doc, bool *changed, void *ctx, aks_error **err)
{
	(void)err;
	nest_ctx *c = ctx;
	aks_error *e = NULL;
	json_object *snap = NULL;
	c->rc_update = aks__store_update(c->s, "n1", incr, NULL, &e);
	snprintf(c->msg, sizeof(c->msg), "%s", aks_error_message(e));
	aks_error_free(e);
	e = NULL;
	c->rc_read = aks__store_read(c->s, "n1", &snap, &e);
	aks_error_free(e);
	e = NULL;
	c->rc_other = aks__store_update(c->s, "another", incr, NULL, &e);
	aks_error_free(e);
	json_object_object_add(doc, "outer", json_object_new_boolean(1));
	*changed = true;
	return AKS_OK;
}

static void test_nested_calls_refused(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	nest_ctx c = {.s = f->s};
	assert_int_equal(aks__store_update(f->s, "n1", nested, &c, &err), AKS_OK);
	assert_int_equal(c.rc_update, AKS_EINVAL);
	assert_int_equal(c.rc_read, AKS_EINVAL);
	assert_int_equal(c.rc_other, AKS_EINVAL);
	assert_non_null(strstr(c.msg, "inside a transaction"));
	/* The outer transaction committed; the refused inner ones did nothing. */
	json_object *doc = NULL;
	assert_int_equal(aks__store_read(f->s, "n1", &doc, &err), AKS_OK);
	assert_string_equal(json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN),
	                    "{\"outer\":true}");
	json_object_put(doc);
	assert_int_equal(get_n(f->s, "another"), -1);
	/* And the handle works normally afterwards. */
	assert_int_equal(aks__store_update(f->s, "n1", incr, NULL, &err), AKS_OK);
	assert_int_equal(get_n(f->s, "n1"), 1);
}

#define THREADS    6
#define PER_THREAD 15

/* incr, slowly: widens the window in which a broken lock would let two writers in. */
static int incr_slow(json_object *doc, bool *changed, void *ctx, aks_error **err)
{
	json_object *n = NULL;
	int64_t v = json_object_object_get_ex(doc, "n", &n) ? json_object_get_int64(n) : 0;
	usleep(300);
	int rc = incr(doc, changed, ctx, err);
	json_object_object_add(doc, "n", json_object_new_int64(v + 1));
	return rc;
}

typedef struct worker {
	aks_state_store *s;
	int id, failures;
} worker;

static void *work(void *arg)
{
	worker *w = arg;
	for (int i = 0; i < PER_THREAD; i++) {
		char tag[32];
		snprintf(tag, sizeof(tag), "t%d-%d", w->id, i);
		aks_error *err = NULL;
		/* Alternate between a busy namespace and one that keeps emptying. */
		if (aks__store_update(w->s, "shared", incr_slow, tag, &err) != AKS_OK)
			w->failures++;
		if (aks__store_update(w->s, "flip", i % 2 ? clear : incr, NULL, &err) != AKS_OK)
			w->failures++;
		json_object *doc = NULL;
		if (aks__store_read(w->s, "shared", &doc, &err) != AKS_OK)
			w->failures++;
		json_object_put(doc);
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
	json_object *doc = NULL;
	assert_int_equal(aks__store_read(f->s, "shared", &doc, &err), AKS_OK);
	assert_int_equal(json_object_get_int(json_object_object_get(doc, "n")),
	                 THREADS * PER_THREAD);
	json_object *list = json_object_object_get(doc, "list");
	assert_int_equal(json_object_array_length(list), THREADS * PER_THREAD);
	/* Every entry exactly once. */
	char seen[THREADS][PER_THREAD] = {{0}};
	for (size_t i = 0; i < json_object_array_length(list); i++) {
		int a = -1, b = -1;
		assert_int_equal(sscanf(json_object_get_string(json_object_array_get_idx(list, i)),
		                        "t%d-%d", &a, &b),
		                 2);
		assert_in_range(a, 0, THREADS - 1);
		assert_in_range(b, 0, PER_THREAD - 1);
		assert_int_equal(seen[a][b]++, 0);
	}
	json_object_put(doc);
	/* No temporary files left behind. */
	char *listing = ns_listing(f);
	assert_null(strstr(listing, ".tmp"));
	free(listing);
}

/* A waiter queued on a lock file whose namespace empties must not keep using the removed
 * file: its write has to land in the namespace as seen by everyone else. */
typedef struct hold_ctx {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool inside, go;
} hold_ctx;

static int hold_then_clear(json_object *doc, bool *changed, void *ctx, aks_error **err)
{
	hold_ctx *h = ctx;
	pthread_mutex_lock(&h->mu);
	h->inside = true;
	pthread_cond_broadcast(&h->cv);
	while (!h->go)
		pthread_cond_wait(&h->cv, &h->mu);
	pthread_mutex_unlock(&h->mu);
	return clear(doc, changed, NULL, err);
}

typedef struct holder_arg {
	aks_state_store *s;
	hold_ctx *h;
	int rc;
} holder_arg;

static void *holder(void *arg)
{
	holder_arg *a = arg;
	a->rc = aks__store_update(a->s, "churn", hold_then_clear, a->h, NULL);
	return NULL;
}

static void *waiter(void *arg)
{
	holder_arg *a = arg;
	a->rc = aks__store_update(a->s, "churn", incr, "waiter", NULL);
	return NULL;
}

static void test_waiter_on_removed_lock_file(void **state)
{
	fixture *f = *state;
	aks_error *err = NULL;
	assert_int_equal(aks__store_update(f->s, "churn", incr, NULL, &err), AKS_OK);
	hold_ctx h = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
	holder_arg ha = {.s = f->s, .h = &h}, wa = {.s = f->s};
	pthread_t th, tw;
	assert_int_equal(pthread_create(&th, NULL, holder, &ha), 0);
	pthread_mutex_lock(&h.mu);
	while (!h.inside)
		pthread_cond_wait(&h.cv, &h.mu);
	pthread_mutex_unlock(&h.mu);
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
	/* The waiter's write is the namespace's document, under a live lock file. */
	json_object *doc = NULL;
	assert_int_equal(aks__store_read(f->s, "churn", &doc, &err), AKS_OK);
	assert_string_equal(json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN),
	                    "{\"n\":1,\"list\":[\"waiter\"]}");
	json_object_put(doc);
	char *lock = ns_file(f, "churn.lock");
	assert_true(exists(lock));
	free(lock);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_open_creates_private_dirs),
	    cmocka_unit_test(test_default_dir),
	    cmocka_unit_test_setup_teardown(test_update_and_read, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_empty_document_leaves_nothing, setup, teardown),
	    cmocka_unit_test(test_ns_encoding),
	    cmocka_unit_test_setup_teardown(test_hostile_names, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_names, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_corrupt_documents, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_size_bound, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_depth_bound, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_permissions, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stale_temp_and_lock_files, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_nested_calls_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_threads_lose_nothing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_waiter_on_removed_lock_file, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
