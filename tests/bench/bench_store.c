/*
 * bench_store: what the built-in file store costs (records named by namespace and key).
 *
 *   bench_store [ITER] [DIR]     (ITER also from BENCH_ITER, default 200; DIR: a scratch
 *                                 directory on the file system to measure, default $TMPDIR)
 *
 * 1. One session record: an update that changes it (lock file, read, parse, serialize,
 *    temporary, fsync, rename, fsync of the directory, lock file removed), one that does not
 *    (lock file, read, parse) and a get (no lock: open, read, parse); medians and 90th
 *    percentiles, interleaved.
 * 2. The point of one file per record: an update and a get of one record in a namespace
 *    holding 1, 100 and 1,000 records (per_runtime sessions all live in "@runtime"; a busy
 *    conversation holds many tasks). Their cost should not grow with the number of records;
 *    a scan of the namespace, which reads them all, does.
 * 3. 1,000 conversations of three records each (two sessions and a task): the time to create
 *    them, the bytes of the records, what they occupy on disk, and a reaper's pass (list the
 *    namespaces, scan each one's sessions).
 * Figures depend on the file system (fsync dominates a changed update); compare runs on the
 * same machine. Nothing is asserted: this prints what it measured.
 */
#include "config.h"

#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "core/store/store.h"

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Sorts v and returns its median. */
static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[n / 2];
}

static void report(const char *what, double *v, int n)
{
	double m = median(v, n);
	printf("  %-46s median %8.3f ms   p90 %8.3f ms\n", what, m, v[n * 9 / 10]);
}

/* A session record shaped like the reference's SandboxSession. */
static void fill_session(json_object *s, const char *id, double t)
{
	json_object_object_add(s, "sandbox_session_id", json_object_new_string(id));
	json_object_object_add(s, "name", NULL);
	json_object_object_add(s, "profile", json_object_new_string("python"));
	json_object_object_add(s, "provider_type", json_object_new_string("local_subprocess"));
	json_object_object_add(s, "sandbox_id",
	                       json_object_new_string("/var/tmp/aksandbox-3f2c9e1ab0d44c8f"));
	json_object_object_add(s, "created_at", json_object_new_double(t));
	json_object_object_add(s, "last_used_at", json_object_new_double(t + 12.5));
	json_object_object_add(s, "status", json_object_new_string("active"));
}

/* fn: (re)writes a session record; ctx is its id. */
static int put_session(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)err;
	fill_session(rec, ctx, 1.7e9);
	*changed = true;
	return AKS_OK;
}

/* fn: a promoted task's record; ctx is its id. */
static int put_task(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)err;
	json_object_object_add(rec, "task_id", json_object_new_string(ctx));
	json_object_object_add(rec, "sandbox_session_id", json_object_new_string("default:python"));
	json_object_object_add(rec, "profile", json_object_new_string("python"));
	json_object_object_add(rec, "status", json_object_new_string("pending"));
	json_object_object_add(rec, "submitted_at", json_object_new_double(1.7e9));
	json_object_object_add(rec, "consumed", json_object_new_boolean(0));
	*changed = true;
	return AKS_OK;
}

/* fn: touches a session's last_used_at, as every tool call does. */
static int touch(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)ctx;
	(void)err;
	json_object_object_add(rec, "last_used_at", json_object_new_double(now_ms()));
	*changed = true;
	return AKS_OK;
}

static int unchanged(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)rec;
	(void)ctx;
	(void)err;
	*changed = false;
	return AKS_OK;
}

static int count_record(void *ctx, const char *key, json_object *rec)
{
	(void)key;
	(void)rec;
	(*(size_t *)ctx)++;
	return AKS_OK;
}

static unsigned long long g_bytes, g_blocks, g_files, g_dirs, g_recs, g_rec_bytes;

static int account(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)ftw;
	if (flag == FTW_D) {
		g_dirs++;
		g_blocks += (unsigned long long)st->st_blocks * 512;
	} else if (flag == FTW_F) {
		g_files++;
		g_bytes += (unsigned long long)st->st_size;
		g_blocks += (unsigned long long)st->st_blocks * 512;
		size_t n = strlen(path);
		if (n > 5 && strcmp(path + n - 5, ".json") == 0) {
			g_recs++;
			g_rec_bytes += (unsigned long long)st->st_size;
		}
	}
	return 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void die(const char *what, aks_error *err)
{
	fprintf(stderr, "bench_store: %s: %s\n", what, aks_error_message(err));
	exit(1);
}

static void session_key(char *key, size_t size, unsigned i)
{
	snprintf(key, size, "session:%08x%08x", i * 2654435761u, i);
}

int main(int argc, char **argv)
{
	int iter = argc > 1               ? atoi(argv[1])
	           : getenv("BENCH_ITER") ? atoi(getenv("BENCH_ITER"))
	                                  : 200;
	if (iter < 10)
		iter = 10;
	const char *tmpdir = argc > 2 ? argv[2] : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char base[512];
	snprintf(base, sizeof(base), "%s/aks-bench-store-XXXXXX", tmpdir);
	if (!mkdtemp(base)) {
		perror("mkdtemp");
		return 1;
	}
	char dir[600];
	snprintf(dir, sizeof(dir), "%s/state", base);
	aks_state_store *s = NULL;
	aks_error *err = NULL;
	if (aks__store_open(dir, &s, &err) < 0)
		die("open", err);
	printf("state store in %s\n", dir);
	double *a = malloc(sizeof(double) * (size_t)iter),
	       *b = malloc(sizeof(double) * (size_t)iter),
	       *c = malloc(sizeof(double) * (size_t)iter);

	/* 1. one record */
	const char *key = "session:default:python";
	if (aks__store_update(s, "conv-bench", key, put_session, (void *)key, &err) < 0)
		die("update", err);
	for (int i = 0; i < iter; i++) {
		/* Rotate the order so that no variant always follows another. */
		for (int k = 0; k < 3; k++) {
			int which = (i + k) % 3;
			double t0 = now_ms();
			json_object *rec = NULL;
			int rc =
			    which == 0 ? aks__store_update(s, "conv-bench", key, touch, NULL, &err)
			    : which == 1
			        ? aks__store_update(s, "conv-bench", key, unchanged, NULL, &err)
			        : aks__store_get(s, "conv-bench", key, &rec, &err);
			double dt = now_ms() - t0;
			json_object_put(rec);
			if (rc < 0)
				die("transaction", err);
			(which == 0 ? a : which == 1 ? b : c)[i] = dt;
		}
	}
	struct stat st;
	char path[800];
	snprintf(path, sizeof(path), "%s/ns/conv-bench.d/session%%3adefault%%3apython.json", dir);
	stat(path, &st);
	printf("1. one session record (%lld bytes), %d times each:\n", (long long)st.st_size, iter);
	report("update, changed (written, 2 fsyncs)", a, iter);
	report("update, unchanged (lock file, read, parse)", b, iter);
	report("get (no lock: read, parse)", c, iter);

	/* 2. one record among 1, 100 and 1,000: the three interleaved, so that a change in the
	 * machine's load during the run weighs on each of them alike. */
	const int sizes[] = {1, 100, 1000};
	char ns2[3][32], key2[3][64];
	double *upd[3], *get[3], upd_med[3], get_med[3];
	for (int z = 0; z < 3; z++) {
		snprintf(ns2[z], sizeof(ns2[z]), "many-%d", sizes[z]);
		for (int i = 0; i < sizes[z]; i++) {
			char k[64];
			session_key(k, sizeof(k), (unsigned)i);
			if (aks__store_update(s, ns2[z], k, put_session, k, &err) < 0)
				die("update", err);
		}
		session_key(key2[z], sizeof(key2[z]), (unsigned)(sizes[z] / 2));
		upd[z] = malloc(sizeof(double) * (size_t)iter);
		get[z] = malloc(sizeof(double) * (size_t)iter);
	}
	for (int i = 0; i < iter; i++) {
		for (int r = 0; r < 3; r++) {
			int z = (i + r) % 3;
			double t0 = now_ms();
			if (aks__store_update(s, ns2[z], key2[z], touch, NULL, &err) < 0)
				die("update", err);
			upd[z][i] = now_ms() - t0;
			json_object *rec = NULL;
			t0 = now_ms();
			if (aks__store_get(s, ns2[z], key2[z], &rec, &err) < 0)
				die("get", err);
			get[z][i] = now_ms() - t0;
			json_object_put(rec);
		}
	}
	printf("2. one record in a namespace of N records, %d times each, interleaved (the cost "
	       "should not depend on N):\n",
	       iter);
	printf("  %6s  %-28s %-28s %s\n", "N", "update (median / p90)", "get (median / p90)",
	       "scan of all N (median)");
	int scans = iter / 10 > 5 ? iter / 10 : 5;
	for (int z = 0; z < 3; z++) {
		for (int i = 0; i < scans; i++) {
			size_t n = 0;
			double t0 = now_ms();
			if (aks__store_scan(s, ns2[z], "session:", count_record, &n, &err) < 0)
				die("scan", err);
			a[i] = now_ms() - t0;
			if (n != (size_t)sizes[z]) {
				fprintf(stderr, "bench_store: scan found %zu of %d records\n", n,
				        sizes[z]);
				return 1;
			}
		}
		upd_med[z] = median(upd[z], iter);
		get_med[z] = median(get[z], iter);
		printf("  %6d  %8.3f / %8.3f ms        %8.3f / %8.3f ms        %8.3f ms\n",
		       sizes[z], upd_med[z], upd[z][iter * 9 / 10], get_med[z],
		       get[z][iter * 9 / 10], median(a, scans));
		free(upd[z]);
		free(get[z]);
	}
	printf("  median at 1,000 records / at 1: update %.2fx, get %.2fx\n",
	       upd_med[2] / upd_med[0], get_med[2] / get_med[0]);

	/* 3. 1,000 conversations */
	const int convs = 1000;
	double t0 = now_ms();
	for (int i = 0; i < convs; i++) {
		char ns[64];
		snprintf(ns, sizeof(ns), "%08x-2c41-4d7e-9b1a-%012x", i * 2654435761u, i);
		if (aks__store_update(s, ns, "session:default:python", put_session,
		                      "default:python", &err) < 0 ||
		    aks__store_update(s, ns, "session:4be0643f1d98573b97cdca98a65347dd",
		                      put_session, "4be0643f1d98573b97cdca98a65347dd", &err) < 0 ||
		    aks__store_update(s, ns, "task:9f0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d", put_task,
		                      "9f0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d", &err) < 0)
			die("update", err);
	}
	double create_ms = now_ms() - t0;
	g_bytes = g_blocks = g_files = g_dirs = g_recs = g_rec_bytes = 0;
	snprintf(path, sizeof(path), "%s/ns", dir);
	nftw(path, account, 16, FTW_PHYS);
	t0 = now_ms();
	char **names = NULL;
	if (aks__store_list(s, &names, &err) < 0)
		die("list", err);
	double list_ms = now_ms() - t0;
	size_t listed = 0, sessions = 0;
	for (char **p = names; *p; p++) {
		if (aks__store_scan(s, *p, "session:", count_record, &sessions, &err) < 0)
			die("scan", err);
		listed++;
	}
	double reap_ms = now_ms() - t0;
	aks__store_free_names(names);
	printf("3. %d conversations of 3 records each (with everything above in the store too):\n",
	       convs);
	printf("  created in %.1f ms (%.3f ms a record)\n", create_ms, create_ms / (3 * convs));
	printf("  whole store: %llu records, %llu bytes (%.0f bytes each); %llu files, %llu "
	       "directories, %llu bytes on disk\n",
	       g_recs, g_rec_bytes, (double)g_rec_bytes / (double)g_recs, g_files, g_dirs,
	       g_blocks);
	printf("  reaper pass: list %zu namespaces %.2f ms, list + scan each for sessions "
	       "(%zu found) %.1f ms\n",
	       listed, list_ms, sessions, reap_ms);

	free(a);
	free(b);
	free(c);
	aks__store_close(s);
	nftw(base, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}
