/* Unit tests: warm pools (core/session/pool.h) with real local_subprocess sandboxes and the
 * file store — filled, taken by sessions and `run`, never taken twice by concurrent takers,
 * replaced after max_idle, kept by gc while pooled, refilled by the background reaper; a
 * pooled sandbox that no longer answers is cleaned up and the next taken; a pool that cannot
 * be read falls back to creating. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include <aksandbox/aksandbox.h>

#include "core/session/sessions.h"
#include "core/store/store.h"

static const char *const no_env[] = {NULL};

typedef struct fixture {
	char dir[64];
	char cfg[96];
	char state[96];
	aks_settings *settings;
	aks_runtime *rt;
} fixture;

static int setup(void **state)
{
	fixture *fx = calloc(1, sizeof(*fx));
	if (!fx)
		return -1;
	strcpy(fx->dir, "/tmp/aks-pool-XXXXXX");
	if (!mkdtemp(fx->dir))
		return -1;
	snprintf(fx->cfg, sizeof(fx->cfg), "%s/config.yaml", fx->dir);
	snprintf(fx->state, sizeof(fx->state), "%s/state", fx->dir);
	char boxes[96];
	snprintf(boxes, sizeof(boxes), "%s/boxes", fx->dir);
	if (mkdir(boxes, 0700) != 0)
		return -1;
	FILE *f = fopen(fx->cfg, "w");
	if (!f)
		return -1;
	fprintf(f,
	        "sandbox:\n"
	        "  enabled: true\n"
	        "  default_profile: warm\n"
	        "  profiles:\n"
	        "    warm: {type: local_subprocess, pool: {size: 2, max_idle: 600},\n"
	        "           local_subprocess: {workdir: %s/boxes, agent: false}}\n"
	        "    wide: {type: local_subprocess, pool: {size: 8},\n"
	        "           local_subprocess: {workdir: %s/boxes, agent: false}}\n"
	        "    brief: {type: local_subprocess, pool: {size: 1, max_idle: 0.3},\n"
	        "            local_subprocess: {workdir: %s/boxes, agent: false}}\n"
	        "    agented: {type: local_subprocess, pool: {size: 1},\n"
	        "              local_subprocess: {workdir: %s/boxes, agent: %s}}\n",
	        fx->dir, fx->dir, fx->dir, fx->dir, LS_TEST_AGENT);
	if (fclose(f) != 0)
		return -1;
	aks_error *err = NULL;
	if (aks_settings_load(fx->cfg, no_env, &fx->settings, &err) < 0 ||
	    aks_runtime_open(fx->settings, fx->state, &fx->rt, &err) < 0) {
		fprintf(stderr, "setup: %s\n", aks_error_message(err));
		aks_error_free(err);
		return -1;
	}
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	fixture *fx = *state;
	aks_runtime_close(fx->rt);
	aks_settings_free(fx->settings);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx->dir);
	int rc = system(cmd);
	free(fx);
	return rc == 0 ? 0 : -1;
}

/* The fill report's member for `profile` (the runtime's fill). */
static int64_t fill(fixture *fx, const char *profile, const char *member)
{
	char *text = NULL;
	aks_error *e = NULL;
	if (aks_runtime_fill_pools(fx->rt, &text, &e) < 0)
		fail_msg("fill: %s", aks_error_message(e));
	json_object *all = json_tokener_parse(text);
	assert_non_null(all);
	int64_t v = -1;
	for (size_t i = 0; i < json_object_array_length(all); i++) {
		json_object *p = json_object_array_get_idx(all, i);
		if (strcmp(json_object_get_string(json_object_object_get(p, "profile")), profile) ==
		    0)
			v = json_object_get_int64(json_object_object_get(p, member));
		assert_int_equal(json_object_array_length(json_object_object_get(p, "failed")), 0);
	}
	json_object_put(all);
	free(text);
	return v;
}

/* The sandbox ids the pool records for `profile`, NULL-terminated (read from the store). */
typedef struct ids {
	char *v[80];
	size_t n;
} ids;

static int note_id(void *ctx, const char *key, json_object *rec)
{
	(void)key;
	ids *l = ctx;
	if (l->n < 79)
		l->v[l->n++] =
		    strdup(json_object_get_string(json_object_object_get(rec, "sandbox_id")));
	return AKS_OK;
}

/* Calls fn for every pool record of `profile` in the store. */
static void scan_pool_records(fixture *fx, const char *profile, aks_store_each_fn fn, void *ctx)
{
	aks_state_store *st = NULL;
	assert_int_equal(aks__store_open(fx->state, &st, NULL), AKS_OK);
	char prefix[64];
	snprintf(prefix, sizeof(prefix), "pool:%s:", profile);
	assert_int_equal(aks__store_scan(st, "@pool", prefix, fn, ctx, NULL), AKS_OK);
	aks__store_close(st);
}

static void pooled(fixture *fx, const char *profile, ids *out)
{
	memset(out, 0, sizeof(*out));
	scan_pool_records(fx, profile, note_id, out);
}

static void ids_free(ids *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	l->n = 0;
}

static bool ids_has(const ids *l, const char *id)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i], id) == 0)
			return true;
	return false;
}

static bool exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* How many sandbox directories the provider has made in boxes/. */
static int boxes(fixture *fx)
{
	char path[96];
	snprintf(path, sizeof(path), "%s/boxes", fx->dir);
	DIR *d = opendir(path);
	assert_non_null(d);
	int n = 0;
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_type == DT_DIR && e->d_name[0] != '.';
	closedir(d);
	return n;
}

static char *call_in(aks_runtime *rt, const char *tool, const char *args)
{
	aks_tool_context ctx;
	aks_tool_context_init(&ctx, "conv-a", NULL);
	char *out = NULL;
	aks_error *err = NULL;
	if (aks_runtime_call_tool(rt, tool, args, &ctx, &out, &err) != AKS_OK)
		fail_msg("%s: %s", tool, aks_error_message(err));
	assert_non_null(out);
	return out;
}

static char *call(fixture *fx, const char *tool, const char *args)
{
	return call_in(fx->rt, tool, args);
}

/* Another host on the same configuration and store: its own providers, so none of the
 * handles the fixture's runtime keeps for what it pooled (it must attach, as a separate
 * process does). */
typedef struct host {
	aks_settings *settings;
	aks_runtime *rt;
} host;

static void host_open(fixture *fx, host *h)
{
	aks_error *e = NULL;
	if (aks_settings_load(fx->cfg, no_env, &h->settings, &e) < 0 ||
	    aks_runtime_open(h->settings, fx->state, &h->rt, &e) < 0)
		fail_msg("another host: %s", aks_error_message(e));
}

static void host_close(host *h)
{
	aks_runtime_close(h->rt);
	aks_settings_free(h->settings);
}

/* The record of conversation conv-a's session of `profile` (aks__session_clear it). */
static void session_of(fixture *fx, const char *profile, aks_session_rec *s)
{
	char key[64];
	snprintf(key, sizeof(key), "default:%s", profile);
	aks_state_store *st = NULL;
	assert_int_equal(aks__store_open(fx->state, &st, NULL), AKS_OK);
	assert_int_equal(aks__sessions_find_in(st, "conv-a", key, s, NULL), AKS_OK);
	aks__store_close(st);
}

/* A fill creates the pool's sandboxes; a new session takes one of them instead of creating
 * one, and the next fill replaces what was taken. */
static void test_fill_and_take(void **state)
{
	fixture *fx = *state;
	assert_int_equal(fill(fx, "warm", "created"), 2);
	ids before;
	pooled(fx, "warm", &before);
	assert_int_equal(before.n, 2);
	for (size_t i = 0; i < before.n; i++)
		assert_true(exists(before.v[i]));
	int made = boxes(fx);

	char *got = call(fx, "run_command", "{\"command\": \"pwd\", \"profile\": \"warm\"}");
	aks_session_rec s;
	session_of(fx, "warm", &s);
	assert_true(ids_has(&before, s.sandbox_id)); /* a pooled one */
	assert_non_null(strstr(got, s.sandbox_id));  /* and the command ran in it */
	assert_int_equal(boxes(fx), made);           /* nothing was created for the session */
	ids after;
	pooled(fx, "warm", &after);
	assert_int_equal(after.n, 1);
	assert_false(ids_has(&after, s.sandbox_id)); /* no longer the pool's */
	ids_free(&after);
	free(got);
	aks__session_clear(&s);

	/* The next fill replaces it; a full pool's fill creates nothing. */
	assert_int_equal(fill(fx, "warm", "created"), 1);
	assert_int_equal(fill(fx, "warm", "created"), 0);
	assert_int_equal(fill(fx, "warm", "ready"), 2);
	ids_free(&before);
}

/* aks_runtime_create_sandbox (what `aksandbox run` makes) takes from the pool too. */
static void test_run_takes(void **state)
{
	fixture *fx = *state;
	fill(fx, "warm", "created");
	ids before;
	pooled(fx, "warm", &before);
	aks_profile *p = NULL;
	assert_int_equal(aks_settings_find_profile(fx->settings, "warm", &p, NULL), AKS_OK);
	aks_call call;
	aks_call_init(&call, 30, aks_profile_get_policy(p), NULL, NULL);
	aks_sandbox *sb = NULL;
	aks_error *e = NULL;
	assert_int_equal(aks_runtime_create_sandbox(fx->rt, p, &call, &sb, &e), AKS_OK);
	char *id = strdup(aks_sandbox_get_id(sb));
	assert_true(ids_has(&before, id));
	assert_int_equal(aks_runtime_destroy_sandbox(fx->rt, p, sb, &call, &e), AKS_OK);
	assert_false(exists(id));
	free(id);
	ids_free(&before);
}

/* Eight threads, each with its own runtime (its own store handles, as separate processes
 * have), take from a pool of eight at once: eight different sandboxes, all pooled ones. */
typedef struct taker {
	fixture *fx;
	pthread_barrier_t *start;
	char *id;
} taker;

static void *take_one(void *arg)
{
	taker *t = arg;
	aks_runtime *rt = NULL;
	aks_error *e = NULL;
	if (aks_runtime_open(t->fx->settings, t->fx->state, &rt, &e) < 0)
		return NULL;
	aks_profile *p = NULL;
	aks_settings_find_profile(t->fx->settings, "wide", &p, NULL);
	aks_call call;
	aks_call_init(&call, 30, aks_profile_get_policy(p), NULL, NULL);
	aks_sandbox *sb = NULL;
	pthread_barrier_wait(t->start);
	if (aks_runtime_create_sandbox(rt, p, &call, &sb, &e) == AKS_OK) {
		t->id = strdup(aks_sandbox_get_id(sb));
		aks_sandbox_close(sb);
	}
	aks_error_free(e);
	aks_runtime_close(rt);
	return NULL;
}

static void test_concurrent_takers(void **state)
{
	fixture *fx = *state;
	assert_int_equal(fill(fx, "wide", "created"), 8);
	ids before;
	pooled(fx, "wide", &before);
	enum { N = 8 };
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, N);
	taker t[N];
	pthread_t th[N];
	for (int i = 0; i < N; i++) {
		t[i] = (taker){fx, &start, NULL};
		assert_int_equal(pthread_create(&th[i], NULL, take_one, &t[i]), 0);
	}
	for (int i = 0; i < N; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&start);
	for (int i = 0; i < N; i++) {
		assert_non_null(t[i].id);
		assert_true(ids_has(&before, t[i].id));
		for (int k = 0; k < i; k++)
			assert_string_not_equal(t[i].id, t[k].id);
	}
	ids left;
	pooled(fx, "wide", &left);
	assert_int_equal(left.n, 0);
	for (int i = 0; i < N; i++)
		free(t[i].id);
	ids_free(&before);
}

/* A pooled sandbox older than max_idle is never handed out, and the next fill destroys it
 * and makes a new one. */
static void test_max_idle(void **state)
{
	fixture *fx = *state;
	assert_int_equal(fill(fx, "brief", "created"), 1);
	ids old;
	pooled(fx, "brief", &old);
	assert_int_equal(old.n, 1);
	struct timespec nap = {0, 400 * 1000 * 1000};
	nanosleep(&nap, NULL);
	char *got = call(fx, "run_command", "{\"command\": \"pwd\", \"profile\": \"brief\"}");
	assert_null(strstr(got, old.v[0])); /* a fresh sandbox, not the stale one */
	free(got);
	assert_true(exists(old.v[0]));
	assert_int_equal(fill(fx, "brief", "replaced"), 1);
	assert_false(exists(old.v[0]));
	ids now;
	pooled(fx, "brief", &now);
	assert_int_equal(now.n, 1);
	assert_string_not_equal(now.v[0], old.v[0]);
	ids_free(&now);
	ids_free(&old);
}

/* One collection; how many sandboxes it removed. */
static size_t gc_removed(fixture *fx)
{
	char *text = NULL;
	aks_error *e = NULL;
	if (aks_runtime_gc(fx->rt, false, &text, &e) < 0)
		fail_msg("gc: %s", aks_error_message(e));
	json_object *r = json_tokener_parse(text);
	size_t n = json_object_array_length(json_object_object_get(r, "removed"));
	json_object_put(r);
	free(text);
	return n;
}

/* gc keeps what the pool records; a pooled sandbox whose record is gone (a host killed
 * between taking it and recording its session) is collected. */
static void test_gc(void **state)
{
	fixture *fx = *state;
	fill(fx, "warm", "created");
	ids l;
	pooled(fx, "warm", &l);
	assert_int_equal(l.n, 2);
	assert_int_equal(gc_removed(fx), 0);
	for (size_t i = 0; i < l.n; i++)
		assert_true(exists(l.v[i]));
	/* One pool record lost, as a host killed between taking it and recording it leaves. */
	char path[256];
	snprintf(path, sizeof(path), "%s/ns/%%40pool.d", fx->state);
	DIR *d = opendir(path);
	assert_non_null(d);
	char victim[600] = "";
	for (struct dirent *de; (de = readdir(d));)
		if (strncmp(de->d_name, "pool%3awarm%3a", 14) == 0 && strstr(de->d_name, ".json")) {
			snprintf(victim, sizeof(victim), "%s/%s", path, de->d_name);
			break;
		}
	closedir(d);
	assert_true(*victim);
	assert_int_equal(unlink(victim), 0);
	ids rest;
	pooled(fx, "warm", &rest);
	assert_int_equal(rest.n, 1);
	assert_int_equal(gc_removed(fx), 1);
	for (size_t i = 0; i < l.n; i++)
		assert_true(exists(l.v[i]) == ids_has(&rest, l.v[i]));
	ids_free(&rest);
	ids_free(&l);
}

/* A long-running host's background reaper fills the pools when it starts, and refills at
 * once when a session takes a pooled sandbox (its interval here is an hour). */
static bool wait_pooled(fixture *fx, const char *profile, size_t want)
{
	for (int i = 0; i < 1000; i++) {
		ids l;
		pooled(fx, profile, &l);
		size_t n = l.n;
		ids_free(&l);
		if (n == want)
			return true;
		struct timespec nap = {0, 20 * 1000 * 1000};
		nanosleep(&nap, NULL);
	}
	return false;
}

static void test_background_refill(void **state)
{
	fixture *fx = *state;
	aks_error *e = NULL;
	assert_int_equal(aks_runtime_start_reaper(fx->rt, 3600, &e), AKS_OK);
	assert_true(wait_pooled(fx, "warm", 2));
	assert_true(wait_pooled(fx, "wide", 8));
	char *got = call(fx, "run_command", "{\"command\": \"true\", \"profile\": \"warm\"}");
	assert_non_null(strstr(got, "\"exit_code\": 0"));
	free(got);
	assert_true(wait_pooled(fx, "warm", 2));
	ids l;
	pooled(fx, "warm", &l);
	aks_session_rec s;
	session_of(fx, "warm", &s);
	assert_false(ids_has(&l, s.sandbox_id)); /* the refill is a new one */
	aks__session_clear(&s);
	ids_free(&l);
}

/* The processes (other than this one) whose working directory is dir: a local_subprocess
 * sandbox's agent, once its programs have ended. *pid: the last one found. */
static int processes_in(const char *dir, pid_t *pid)
{
	DIR *d = opendir("/proc");
	assert_non_null(d);
	int n = 0;
	for (struct dirent *e; (e = readdir(d));) {
		char link[300], cwd[256];
		pid_t p = (pid_t)atoi(e->d_name);
		if (p <= 0 || p == getpid())
			continue;
		snprintf(link, sizeof(link), "/proc/%d/cwd", (int)p);
		ssize_t len = readlink(link, cwd, sizeof(cwd) - 1);
		if (len < 0)
			continue;
		cwd[len] = '\0';
		if (strcmp(cwd, dir) == 0) {
			n++;
			*pid = p;
		}
	}
	closedir(d);
	return n;
}

/* A fill runs `true` in each new pooled sandbox, which starts its agent, and keeps the handle;
 * a session of the same process then takes that handle, agent and all, instead of attaching
 * and starting another. */
static void test_fill_warms_and_keeps(void **state)
{
	fixture *fx = *state;
	assert_int_equal(fill(fx, "agented", "created"), 1);
	ids l;
	pooled(fx, "agented", &l);
	assert_int_equal(l.n, 1);
	pid_t agent = 0, again = 0;
	assert_int_equal(processes_in(l.v[0], &agent), 1); /* started by the warm-up, kept */

	/* The command names its ancestors: the kept agent must be one. */
	char *got = call(fx, "run_command",
	                 "{\"command\": \"p=$$; while [ $p -gt 1 ]; do echo pid=$p; "
	                 "p=$(awk '/^PPid/ {print $2}' /proc/$p/status); done\", "
	                 "\"profile\": \"agented\"}");
	assert_non_null(strstr(got, "\"exit_code\": 0"));
	char line[32];
	snprintf(line, sizeof(line), "pid=%d\\n", (int)agent);
	assert_non_null(strstr(got, line));
	free(got);
	aks_session_rec s;
	session_of(fx, "agented", &s);
	assert_string_equal(s.sandbox_id, l.v[0]);
	assert_int_equal(processes_in(l.v[0], &again), 1); /* no second agent */
	assert_int_equal(again, agent);
	aks__session_clear(&s);
	ids_free(&l);
}

/* A kept pooled sandbox that vanished while pooled: the session's first call gets another,
 * with no "recreated" notice (the session never had the vanished one). */
static void test_kept_pooled_gone(void **state)
{
	fixture *fx = *state;
	fill(fx, "agented", "created");
	ids l;
	pooled(fx, "agented", &l);
	assert_int_equal(l.n, 1);
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", l.v[0]);
	assert_int_equal(system(cmd), 0);

	char *got = call(fx, "run_command", "{\"command\": \"pwd\", \"profile\": \"agented\"}");
	assert_non_null(strstr(got, "\"exit_code\": 0"));
	assert_null(strstr(got, "recreated"));
	aks_session_rec s;
	session_of(fx, "agented", &s);
	assert_string_not_equal(s.sandbox_id, l.v[0]);
	assert_non_null(strstr(got, s.sandbox_id)); /* it ran there */
	free(got);
	aks__session_clear(&s);
	ids_free(&l);
}

/* The oldest pooled sandbox of `profile` (the first a take tries), and the other ones. */
typedef struct by_created {
	char *oldest;
	double at;
} by_created;

static int note_oldest(void *ctx, const char *key, json_object *rec)
{
	(void)key;
	by_created *b = ctx;
	double at = json_object_get_double(json_object_object_get(rec, "created_at"));
	if (!b->oldest || at < b->at) {
		free(b->oldest);
		b->oldest =
		    strdup(json_object_get_string(json_object_object_get(rec, "sandbox_id")));
		b->at = at;
	}
	return AKS_OK;
}

static char *oldest_pooled(fixture *fx, const char *profile)
{
	by_created b = {NULL, 0};
	scan_pool_records(fx, profile, note_oldest, &b);
	assert_non_null(b.oldest);
	return b.oldest;
}

/* Another host takes from the pool: the first pooled sandbox it tries no longer answers (its
 * directory is gone), so it is cleaned up and the next one taken; the session never had the
 * dead one, so there is no "recreated" notice, and nothing is created. */
static void test_pooled_gone_next_tried(void **state)
{
	fixture *fx = *state;
	assert_int_equal(fill(fx, "warm", "created"), 2);
	ids l;
	pooled(fx, "warm", &l);
	assert_int_equal(l.n, 2);
	char *dead = oldest_pooled(fx, "warm");
	const char *alive = strcmp(l.v[0], dead) == 0 ? l.v[1] : l.v[0];
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dead);
	assert_int_equal(system(cmd), 0);
	int made = boxes(fx); /* the fill made every profile's pool */

	host other;
	host_open(fx, &other);
	char *got =
	    call_in(other.rt, "run_command", "{\"command\": \"pwd\", \"profile\": \"warm\"}");
	assert_non_null(strstr(got, "\"exit_code\": 0"));
	assert_non_null(strstr(got, alive)); /* it ran in the next pooled one */
	assert_null(strstr(got, "recreated"));
	free(got);
	aks_session_rec s;
	session_of(fx, "warm", &s);
	assert_string_equal(s.sandbox_id, alive);
	aks__session_clear(&s);
	ids after;
	pooled(fx, "warm", &after);
	assert_int_equal(after.n, 0); /* both records taken: the dead one's too */
	ids_free(&after);
	assert_int_equal(boxes(fx), made); /* nothing created */
	host_close(&other);
	free(dead);
	ids_free(&l);
}

/* A pool that cannot be read only costs the time it would have saved: the session's first
 * call creates a sandbox as without a pool, and succeeds. (The pool's namespace is made a
 * file here, which the file store cannot list; a store plugin's outage looks the same.) */
static void test_pool_unreadable_creates(void **state)
{
	fixture *fx = *state;
	assert_int_equal(fill(fx, "warm", "created"), 2);
	ids l;
	pooled(fx, "warm", &l);
	char ns[160], aside[176];
	snprintf(ns, sizeof(ns), "%s/ns/%%40pool.d", fx->state);
	snprintf(aside, sizeof(aside), "%s.aside", ns);
	assert_int_equal(rename(ns, aside), 0);
	FILE *f = fopen(ns, "w");
	assert_non_null(f);
	assert_int_equal(fclose(f), 0);
	int made = boxes(fx); /* the fill made every profile's pool */

	host other;
	host_open(fx, &other);
	char *got =
	    call_in(other.rt, "run_command", "{\"command\": \"pwd\", \"profile\": \"warm\"}");
	assert_non_null(strstr(got, "\"exit_code\": 0"));
	aks_session_rec s;
	session_of(fx, "warm", &s);
	assert_false(ids_has(&l, s.sandbox_id)); /* a new one, not a pooled one */
	assert_non_null(strstr(got, s.sandbox_id));
	assert_true(exists(s.sandbox_id));
	free(got);
	aks__session_clear(&s);
	assert_int_equal(boxes(fx), made + 1);
	host_close(&other);

	assert_int_equal(unlink(ns), 0); /* the pool as it was: both still pooled */
	assert_int_equal(rename(aside, ns), 0);
	ids after;
	pooled(fx, "warm", &after);
	assert_int_equal(after.n, 2);
	ids_free(&after);
	ids_free(&l);
}

/* A new sandbox that fails its warm-up is destroyed and reported, never pooled. */
static void test_warm_up_failure(void **state)
{
	fixture *fx = *state;
	char cfg[160], env[128], box[96];
	snprintf(env, sizeof(env), "%s/exit3", fx->dir);
	snprintf(box, sizeof(box), "%s/broken", fx->dir);
	snprintf(cfg, sizeof(cfg), "%s/broken.yaml", fx->dir);
	FILE *f = fopen(env, "w");
	assert_non_null(f);
	fputs("exit 3\n", f); /* bash reads $BASH_ENV first: `bash -c true` exits 3 */
	assert_int_equal(fclose(f), 0);
	assert_int_equal(mkdir(box, 0700), 0);
	f = fopen(cfg, "w");
	assert_non_null(f);
	fprintf(
	    f,
	    "sandbox:\n"
	    "  enabled: true\n"
	    "  default_profile: broken\n"
	    "  profiles:\n"
	    "    broken: {type: local_subprocess, pool: {size: 1},\n"
	    "             local_subprocess: {workdir: %s, agent: false, env: {BASH_ENV: %s}}}\n",
	    box, env);
	assert_int_equal(fclose(f), 0);
	aks_settings *settings = NULL;
	aks_runtime *rt = NULL;
	aks_error *e = NULL;
	assert_int_equal(aks_settings_load(cfg, no_env, &settings, &e), AKS_OK);
	assert_int_equal(aks_runtime_open(settings, fx->state, &rt, &e), AKS_OK);
	char *text = NULL;
	assert_int_equal(aks_runtime_fill_pools(rt, &text, &e), AKS_OK);
	json_object *all = json_tokener_parse(text), *p = json_object_array_get_idx(all, 0);
	assert_int_equal(json_object_get_int(json_object_object_get(p, "ready")), 0);
	json_object *failed = json_object_object_get(p, "failed");
	assert_int_equal(json_object_array_length(failed), 1);
	assert_non_null(strstr(json_object_get_string(json_object_array_get_idx(failed, 0)),
	                       "`true`, exited with 3"));
	json_object_put(all);
	free(text);
	ids l;
	pooled(fx, "broken", &l);
	assert_int_equal(l.n, 0);
	DIR *d = opendir(box); /* its directory was destroyed */
	assert_non_null(d);
	for (struct dirent *de; (de = readdir(d));)
		assert_true(de->d_name[0] == '.');
	closedir(d);
	aks_runtime_close(rt);
	aks_settings_free(settings);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_fill_and_take, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_run_takes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_concurrent_takers, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_max_idle, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_gc, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_background_refill, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fill_warms_and_keeps, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_kept_pooled_gone, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_warm_up_failure, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pooled_gone_next_tried, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pool_unreadable_creates, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
