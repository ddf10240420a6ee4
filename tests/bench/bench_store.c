/*
 * bench_store: what the file-backed state store costs.
 *
 *   bench_store [ITER] [DIR]     (ITER also from BENCH_ITER, default 200; DIR: a scratch
 *                                 directory on the file system to measure, default $TMPDIR)
 *
 * 1. One transaction on a small document (a conversation with two sessions and a task):
 *    changed (lock, read, parse, serialize, temp file, fsync, rename, fsync of the
 *    directory), unchanged (lock, read, parse) and a snapshot read (shared lock, read,
 *    parse); medians and 90th percentiles, interleaved.
 * 2. 1,000 conversations, one document each: the time to create them, the bytes of the
 *    documents, what they occupy on disk (documents, lock files), and a reaper's pass
 *    (list, then a read of each).
 * 3. 1,000 sessions in one namespace (per_runtime sessions all live in "@runtime"): the
 *    document's size and one transaction's cost on it.
 * Figures depend on the file system (fsync dominates); compare runs on the same machine.
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

#include "core/state_store.h"

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

static void report(const char *what, double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	printf("  %-44s median %8.3f ms   p90 %8.3f ms\n", what, v[n / 2], v[n * 9 / 10]);
}

/* A session record shaped like the reference's SandboxSession. */
static json_object *session(const char *id, const char *profile, double t)
{
	json_object *s = json_object_new_object();
	json_object_object_add(s, "sandbox_session_id", json_object_new_string(id));
	json_object_object_add(s, "name", NULL);
	json_object_object_add(s, "profile", json_object_new_string(profile));
	json_object_object_add(s, "provider_type", json_object_new_string("local_subprocess"));
	json_object_object_add(s, "sandbox_id",
	                       json_object_new_string("/var/tmp/aksandbox-3f2c9e1ab0d44c8f"));
	json_object_object_add(s, "created_at", json_object_new_double(t));
	json_object_object_add(s, "last_used_at", json_object_new_double(t + 12.5));
	json_object_object_add(s, "status", json_object_new_string("active"));
	return s;
}

/* fn: a conversation's document, rebuilt, with the "last_used_at" of one session touched. */
static int conversation(json_object *doc, bool *changed, void *ctx, aks_error **err)
{
	(void)err;
	double t = *(double *)ctx;
	json_object *sessions = json_object_new_object();
	json_object_object_add(sessions, "default:python", session("default:python", "python", t));
	json_object_object_add(sessions, "4be0643f1d98573b97cdca98a65347dd",
	                       session("4be0643f1d98573b97cdca98a65347dd", "python", t));
	json_object *tasks = json_object_new_object();
	json_object *task = json_object_new_object();
	json_object_object_add(task, "task_id",
	                       json_object_new_string("9f0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d"));
	json_object_object_add(task, "sandbox_session_id",
	                       json_object_new_string("default:python"));
	json_object_object_add(task, "profile", json_object_new_string("python"));
	json_object_object_add(task, "status", json_object_new_string("pending"));
	json_object_object_add(task, "submitted_at", json_object_new_double(t));
	json_object_object_add(task, "consumed", json_object_new_boolean(0));
	json_object_object_add(tasks, "9f0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d", task);
	json_object_object_add(doc, "sessions", sessions);
	json_object_object_add(doc, "tasks", tasks);
	*changed = true;
	return AKS_OK;
}

static int unchanged(json_object *doc, bool *changed, void *ctx, aks_error **err)
{
	(void)doc;
	(void)ctx;
	(void)err;
	*changed = false;
	return AKS_OK;
}

/* fn: adds *(int *)ctx sessions to the document. */
static int many_sessions(json_object *doc, bool *changed, void *ctx, aks_error **err)
{
	(void)err;
	int n = *(int *)ctx;
	json_object *sessions = json_object_new_object();
	for (int i = 0; i < n; i++) {
		char id[40];
		snprintf(id, sizeof(id), "%032x", i * 2654435761u);
		json_object_object_add(sessions, id, session(id, "python", 1.7e9 + i));
	}
	json_object_object_add(doc, "sessions", sessions);
	*changed = true;
	return AKS_OK;
}

/* fn: touches one session's last_used_at. */
static int touch(json_object *doc, bool *changed, void *ctx, aks_error **err)
{
	(void)ctx;
	(void)err;
	json_object *sessions = json_object_object_get(doc, "sessions");
	json_object_object_foreach(sessions, key, val)
	{
		(void)key;
		json_object_object_add(val, "last_used_at", json_object_new_double(now_ms()));
		break;
	}
	*changed = true;
	return AKS_OK;
}

static unsigned long long g_bytes, g_blocks, g_files, g_docs, g_doc_bytes;

static int account(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)ftw;
	if (flag == FTW_F) {
		g_files++;
		g_bytes += (unsigned long long)st->st_size;
		g_blocks += (unsigned long long)st->st_blocks * 512;
		size_t n = strlen(path);
		if (n > 5 && strcmp(path + n - 5, ".json") == 0) {
			g_docs++;
			g_doc_bytes += (unsigned long long)st->st_size;
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

	/* 1. one transaction */
	double t = 1.7e9;
	if (aks__store_update(s, "conv-bench", conversation, &t, &err) < 0)
		die("update", err);
	double *a = malloc(sizeof(double) * (size_t)iter),
	       *b = malloc(sizeof(double) * (size_t)iter),
	       *c = malloc(sizeof(double) * (size_t)iter);
	for (int i = 0; i < iter; i++) {
		/* Rotate the order so that no variant always follows another. */
		for (int k = 0; k < 3; k++) {
			int which = (i + k) % 3;
			double t0 = now_ms();
			json_object *doc = NULL;
			int rc =
			    which == 0 ? aks__store_update(s, "conv-bench", conversation, &t, &err)
			    : which == 1 ? aks__store_update(s, "conv-bench", unchanged, NULL, &err)
			                 : aks__store_read(s, "conv-bench", &doc, &err);
			double dt = now_ms() - t0;
			json_object_put(doc);
			if (rc < 0)
				die("transaction", err);
			(which == 0 ? a : which == 1 ? b : c)[i] = dt;
		}
	}
	struct stat st;
	char path[700];
	snprintf(path, sizeof(path), "%s/ns/conv-bench.json", dir);
	stat(path, &st);
	printf("1. one transaction on a conversation's document (%lld bytes), %d times each:\n",
	       (long long)st.st_size, iter);
	report("update, changed (written, 2 fsyncs)", a, iter);
	report("update, unchanged (lock, read, parse)", b, iter);
	report("read (shared lock, read, parse)", c, iter);

	/* 2. 1,000 conversations */
	const int convs = 1000;
	double t0 = now_ms();
	for (int i = 0; i < convs; i++) {
		char ns[64];
		snprintf(ns, sizeof(ns), "%08x-2c41-4d7e-9b1a-%012x", i * 2654435761u, i);
		if (aks__store_update(s, ns, conversation, &t, &err) < 0)
			die("update", err);
	}
	double create_ms = now_ms() - t0;
	g_bytes = g_blocks = g_files = g_docs = g_doc_bytes = 0;
	snprintf(path, sizeof(path), "%s/ns", dir);
	nftw(path, account, 16, FTW_PHYS);
	t0 = now_ms();
	char **names = NULL;
	if (aks__store_list(s, &names, &err) < 0)
		die("list", err);
	double list_ms = now_ms() - t0;
	size_t listed = 0;
	for (char **p = names; *p; p++) {
		json_object *doc = NULL;
		if (aks__store_read(s, *p, &doc, &err) < 0)
			die("read", err);
		json_object_put(doc);
		listed++;
	}
	double reap_ms = now_ms() - t0;
	aks__store_free_names(names);
	printf("2. %d conversations (plus the one above), one document each:\n", convs);
	printf("  created in %.1f ms (%.3f ms each)\n", create_ms, create_ms / convs);
	printf("  %llu documents, %llu bytes (%.0f bytes each); %llu files in all (with the lock "
	       "files), %llu bytes on disk\n",
	       g_docs, g_doc_bytes, (double)g_doc_bytes / (double)g_docs, g_files, g_blocks);
	printf("  reaper pass: list %zu namespaces %.2f ms, list + read each %.1f ms\n", listed,
	       list_ms, reap_ms);

	/* 3. 1,000 sessions in one namespace */
	int n = 1000;
	if (aks__store_update(s, AKS_STORE_NS_RUNTIME, many_sessions, &n, &err) < 0)
		die("update", err);
	snprintf(path, sizeof(path), "%s/ns/%%40runtime.json", dir);
	stat(path, &st);
	int reps = iter / 4 > 10 ? iter / 4 : 10;
	for (int i = 0; i < reps; i++) {
		double t1 = now_ms();
		if (aks__store_update(s, AKS_STORE_NS_RUNTIME, touch, NULL, &err) < 0)
			die("update", err);
		a[i] = now_ms() - t1;
		t1 = now_ms();
		json_object *doc = NULL;
		if (aks__store_read(s, AKS_STORE_NS_RUNTIME, &doc, &err) < 0)
			die("read", err);
		json_object_put(doc);
		b[i] = now_ms() - t1;
	}
	printf("3. %d sessions in one namespace (%s): document %lld bytes, %d times each:\n", n,
	       AKS_STORE_NS_RUNTIME, (long long)st.st_size, reps);
	report("update touching one session", a, reps);
	report("read", b, reps);

	free(a);
	free(b);
	free(c);
	aks__store_close(s);
	nftw(base, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}
