/*
 * tests/unit/test_alloc_fail.c - allocation-failure torture over the core's paths, the way
 * curl's test suite does it: for each scenario, fail the 1st allocation, then the 2nd, and so
 * on, until a run of the scenario makes no allocation that fails. Every run must end cleanly:
 *
 *  - no crash, and no block allocated during the run left behind by it (alloc_fail.h keeps
 *    a record of every block allocated while armed; in the ASan build LeakSanitizer checks
 *    the whole process at exit as well);
 *  - either an error that says what happened (AKS_ENOMEM, or a message about memory: libc
 *    reports a failed allocation as ENOMEM, "Cannot allocate memory", and pthread_create
 *    as EAGAIN), or a success whose outcome is exactly that of the run without failure:
 *    never a success with missing data.
 *
 * Scenarios: a config loaded from YAML text (the fake provider's plugin loaded, its block
 * validated, its instance opened); a run_code call through aks_runtime_call_tool on the fake
 * provider, then destroy_sandbox_session (the runtime opened and closed around them; after a
 * run that failed before the destroy, a clean-up without failures destroys the session, so
 * what is left is a leak, or a sandbox no record knows); a state-store update and get (the
 * file store); the queue's wire format, decoded and encoded again. Each scenario first runs
 * without failure (so one-time initialisation, such as a plugin's loading, is not mistaken
 * for a leak), and must itself leave nothing behind. The diagnostics give each scenario's
 * number of allocation points and how the runs ended.
 *
 * Debugging: ALLOC_FAIL_TEST=test_wire runs one scenario, ALLOC_FAIL_ONLY=N only its run
 * where allocation N fails, and ALLOC_FAIL_TRAP=1 raises SIGTRAP there (under gdb, bt shows
 * the allocation). A leak is reported with the object and offset it was allocated from
 * (addr2line -f -e OBJECT OFFSET).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <dlfcn.h>
#include <errno.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#include <aksandbox/aksandbox.h>

#include "alloc_fail.h"
#include "core/config/env.h"
#include "core/config/settings.h"
#include "core/config/yaml_tree.h"
#include "core/queue/wire.h"
#include "core/store/store.h"

/* What a run ended with. Fixed buffers: nothing the outcome holds is allocated in the run. */
typedef struct outcome {
	int rc;
	char why[1024];  /* the error's message, when rc is not AKS_OK */
	char data[4096]; /* on success, what the scenario produced, to compare with the baseline */
} outcome;

typedef struct scenario {
	const char *name;
	void (*run)(outcome *out, void *ctx);
	void (*reset)(void *ctx); /* before each run, outside the window (NULL: nothing) */
	/* after each run, without failures, before the count of what it left behind: releases
	 * what the run rightly keeps (a sandbox its error left in place) */
	void (*teardown)(void *ctx);
	void *ctx;
} scenario;

static void set_error(outcome *o, int rc, const aks_error *err, const char *what)
{
	o->rc = rc;
	snprintf(o->why, sizeof(o->why), "%s", err ? aks_error_message(err) : what);
}

static void add_data(outcome *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_data(outcome *o, const char *fmt, ...)
{
	size_t n = strlen(o->data);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(o->data + n, sizeof(o->data) - n, fmt, ap);
	va_end(ap);
}

/* An error is clean when it says memory ran out; pthread_create reports that as EAGAIN, a
 * lack of resources, which is what a program can say then. */
static bool says_memory(const outcome *o)
{
	return o->rc == AKS_ENOMEM || strcasestr(o->why, "memory") ||
	       strstr(o->why, strerror(EAGAIN));
}

/* A leaked block and where it was allocated: the object and its offset (addr2line -f -e
 * OBJECT OFFSET names the line), and the nearest exported symbol. */
static void print_leak(void *ptr, size_t size, const void *site, void *ctx)
{
	(void)ctx, (void)ptr;
	Dl_info info;
	if (dladdr(site, &info) && info.dli_fname)
		print_message("#   leaked %zu bytes allocated at %s+%#lx (%s)\n", size,
		              info.dli_fname,
		              (unsigned long)((const char *)site - (const char *)info.dli_fbase),
		              info.dli_sname ? info.dli_sname : "?");
	else
		print_message("#   leaked %zu bytes allocated at %p\n", size, site);
}

static bool report(const scenario *sc, const char *what, const char *detail)
{
	print_message("# %s: %s: %s\n", sc->name, what, detail);
	return false;
}

static void run_window(const scenario *sc, unsigned long n, outcome *o, alloc_window *w)
{
	memset(o, 0, sizeof(*o));
	if (sc->reset)
		sc->reset(sc->ctx);
	alloc_fail_arm(n);
	sc->run(o, sc->ctx);
	alloc_fail_freeze();
	if (sc->teardown)
		sc->teardown(sc->ctx);
	*w = alloc_fail_disarm();
}

/* Runs the torture of one scenario; false (with the reasons printed) when a run was not clean.
 * Never jumps out, so the caller can clean up first. */
static bool torture(const scenario *sc)
{
	outcome base, o;
	alloc_window w;
	run_window(sc, 0, &base, &w); /* warm-up: one-time initialisation */
	run_window(sc, 0, &base, &w);
	if (base.rc != AKS_OK)
		return report(sc, "fails without any allocation failure", base.why);
	if (w.live) {
		alloc_fail_each_live(print_leak, NULL, 10);
		return report(sc, "leaks without any allocation failure", "see above");
	}
	unsigned long points = w.allocations, spared = w.spared, enomem = 0, memory_msg = 0,
	              absorbed = 0;
	bool bad = false;
	unsigned long n = 1, only = 0;
	/* ALLOC_FAIL_ONLY=N: only the run where allocation N fails (with ALLOC_FAIL_TRAP set,
	 * under a debugger) */
	const char *env = getenv("ALLOC_FAIL_ONLY");
	if (env && (only = strtoul(env, NULL, 10)))
		n = only;
	for (;; n++) {
		if (only && n > only)
			break;
		run_window(sc, n, &o, &w);
		if (!w.failed) {
			if (o.rc != AKS_OK || strcmp(o.data, base.data) != 0)
				return report(sc, "a run without failure differs from the baseline",
				              o.rc ? o.why : o.data);
			break;
		}
		if (w.live) {
			print_message("# %s: allocation %lu failed: %zu blocks leaked (%s)\n",
			              sc->name, n, w.live, o.rc ? o.why : "and it succeeded");
			alloc_fail_each_live(print_leak, NULL, 5);
			bad = true;
		}
		if (o.rc == AKS_OK) {
			if (strcmp(o.data, base.data) != 0) {
				print_message(
				    "# %s: allocation %lu failed: success with other data:\n"
				    "#   got  %s\n#   want %s\n",
				    sc->name, n, o.data, base.data);
				bad = true;
			}
			absorbed++;
		} else if (o.rc == AKS_ENOMEM) {
			enomem++;
		} else if (says_memory(&o)) {
			if (memory_msg++ < 3)
				print_message("# %s: allocation %lu failed: error %d: %s\n",
				              sc->name, n, o.rc, o.why);
		} else {
			print_message("# %s: allocation %lu failed: error %d does not say so: %s\n",
			              sc->name, n, o.rc, o.why);
			bad = true;
		}
	}
	print_message("# %s: %lu allocation points; a failure of each gave AKS_ENOMEM %lu times, "
	              "another error naming memory %lu times, a complete success %lu times\n",
	              sc->name, points, enomem, memory_msg, absorbed);
	if (spared)
		print_message("# %s: %lu more allocations spared (never failed, see alloc_fail.c): "
		              "the test's own checks, a new thread's set-up, and with json-c "
		              "before 0.17 (here %s) those inside json_tokener_parse_ex\n",
		              sc->name, spared, json_c_version());
	if (n - 1 != points)
		print_message("# %s: %lu runs with a failure for %lu allocation points\n", sc->name,
		              n - 1, points);
	return !bad;
}

/* ---- a config loaded from YAML text ---- */

static const char config_yaml[] =
    "sandbox:\n"
    "  enabled: true\n"
    "  default_profile: default\n"
    "  tool_output_max_chars: 5000\n"
    "  profiles:\n"
    "    default:\n"
    "      type: fake\n"
    "      scope: per_session\n"
    "      idle_timeout: 600\n"
    "      fake: {}\n"
    "      policy: {network_egress: allowlist, network_allow: [example.com], timeout: 30,\n"
    "               strict: false}\n"
    "    other:\n"
    "      type: fake\n"
    "      scope: per_call\n"
    "      fake: {}\n";

static const char *const config_env[] = {"AK_SANDBOX__PROFILES__OTHER__IDLE_TIMEOUT=42", NULL};

static void settings_data(outcome *o, const aks_settings *s)
{
	add_data(o, "default=%s max=%lld profiles=%zu", aks_settings_get_default_profile(s),
	         (long long)aks_settings_get_tool_output_max_chars(s),
	         aks_settings_get_profile_count(s));
	for (size_t i = 0; i < aks_settings_get_profile_count(s); i++) {
		aks_profile *p = aks_settings_get_profile(s, i);
		const aks_policy *pol = aks_profile_get_policy(p);
		add_data(o,
		         " [%s %s scope=%d idle=%lld params=%s egress=%d allow=%s timeout=%g %s]",
		         aks_profile_get_name(p), aks_profile_get_type(p), aks_profile_get_scope(p),
		         (long long)aks_profile_get_idle_timeout(p), aks_profile_get_params(p),
		         (int)pol->network_egress,
		         pol->network_allow && pol->network_allow[0] ? pol->network_allow[0] : "-",
		         pol->timeout, aks_profile_get_provider(p) ? "provider" : "NO PROVIDER");
	}
}

static void run_config(outcome *o, void *ctx)
{
	(void)ctx;
	aks_node *root = NULL;
	aks_settings *s = NULL;
	aks_error *err = NULL;
	int rc = aks__yaml_parse(config_yaml, sizeof(config_yaml) - 1, "torture.yaml", &root, &err);
	if (rc == AKS_OK)
		rc = aks__config_apply_env(&root, config_env, &err);
	if (rc == AKS_OK)
		rc = aks__settings_from_tree(root, "torture.yaml", &s, &err);
	if (rc == AKS_OK)
		settings_data(o, s);
	else
		set_error(o, rc, err, "no error set");
	aks_settings_free(s);
	aks__node_free(root);
	aks_error_free(err);
}

/* ---- one tool call ---- */

typedef struct tool_fixture {
	char dir[64];
	char state[128];
	aks_settings *settings;
} tool_fixture;

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st, (void)type, (void)ftw;
	return remove(path);
}

static void tool_reset(void *ctx)
{
	tool_fixture *fx = ctx;
	nftw(fx->state, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void read_tool_result(outcome *o, const char *tool, const char *json, const char *keys)
{
	json_object *j = json_tokener_parse(json), *v = NULL;
	if (!j) {
		set_error(o, AKS_ERROR, NULL, "the tool's result is not JSON");
		return;
	}
	if (json_object_object_get_ex(j, "error", &v) && v) {
		set_error(o, AKS_ERROR, NULL, json_object_get_string(v));
		json_object_put(j);
		return;
	}
	add_data(o, "%s:", tool);
	char k[64];
	for (const char *p = keys; *p; p += strcspn(p, " "), p += *p == ' ') {
		snprintf(k, sizeof(k), "%.*s", (int)strcspn(p, " "), p);
		add_data(o, " %s=%s", k,
		         json_object_object_get_ex(j, k, &v) ? json_object_get_string(v)
		                                             : "MISSING");
	}
	add_data(o, ";");
	json_object_put(j);
}

/* The members of a tool's JSON result this scenario checks, or its error (the test's own
 * parsing spared). */
static void tool_result(outcome *o, const char *tool, const char *json, const char *keys)
{
	alloc_fail_spare(true);
	read_tool_result(o, tool, json, keys);
	alloc_fail_spare(false);
}

static void run_tool_call(outcome *o, void *ctx)
{
	tool_fixture *fx = ctx;
	aks_runtime *rt = NULL;
	aks_error *err = NULL;
	int rc = aks_runtime_open(fx->settings, fx->state, &rt, &err);
	aks_tool_context tc;
	aks_tool_context_init(&tc, "torture-conversation", "agent");
	char *out = NULL;
	if (rc == AKS_OK)
		rc = aks_runtime_call_tool(rt, "run_code", "{\"code\": \"print(6 * 7)\"}", &tc,
		                           &out, &err);
	if (rc == AKS_OK)
		tool_result(o, "run_code", out, "stdout stderr exit_code sandbox_session_id");
	free(out);
	out = NULL;
	/* the session's sandbox lives in the provider instance until it is destroyed */
	if (rc == AKS_OK && o->rc == AKS_OK)
		rc = aks_runtime_call_tool(rt, "destroy_sandbox_session",
		                           "{\"sandbox_session_id\": \"default:default\"}", &tc,
		                           &out, &err);
	if (rc == AKS_OK && o->rc == AKS_OK)
		tool_result(o, "destroy", out, "destroyed");
	free(out);
	if (rc != AKS_OK)
		set_error(o, rc, err, "no error set");
	aks_runtime_close(rt);
	aks_error_free(err);
}

/* A run that failed before its destroy_sandbox_session left the session's sandbox (and its
 * handle, kept for the next call) in the provider instance: destroyed here. */
static void tool_teardown(void *ctx)
{
	tool_fixture *fx = ctx;
	aks_runtime *rt = NULL;
	aks_error *err = NULL;
	aks_tool_context tc;
	aks_tool_context_init(&tc, "torture-conversation", "agent");
	char *out = NULL;
	if (aks_runtime_open(fx->settings, fx->state, &rt, &err) == AKS_OK)
		aks_runtime_call_tool(rt, "destroy_sandbox_session",
		                      "{\"sandbox_session_id\": \"default:default\"}", &tc, &out,
		                      &err);
	free(out);
	aks_runtime_close(rt);
	aks_error_free(err);
}

/* ---- a state-store update and get ---- */

typedef struct store_fixture {
	char dir[64];
} store_fixture;

static void store_reset(void *ctx)
{
	store_fixture *fx = ctx;
	nftw(fx->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int set_fields(json_object *rec, bool *changed, void *ctx, aks_error **err)
{
	(void)ctx;
	json_object *groups = json_object_new_array();
	json_object *name = json_object_new_string("torture");
	json_object *count = json_object_new_int(3);
	if (!groups || !name || !count || json_object_array_add(groups, name) < 0) {
		json_object_put(groups);
		json_object_put(name);
		json_object_put(count);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	if (json_object_object_add(rec, "groups", groups) < 0) {
		json_object_put(groups);
		json_object_put(count);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	if (json_object_object_add(rec, "count", count) < 0) {
		json_object_put(count);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	*changed = true;
	return AKS_OK;
}

static void run_store(outcome *o, void *ctx)
{
	store_fixture *fx = ctx;
	aks_state_store *s = NULL;
	aks_error *err = NULL;
	json_object *rec = NULL;
	int rc = aks__store_open(fx->dir, &s, &err);
	if (rc == AKS_OK)
		rc = aks__store_update(s, "sessions", "conv/one", set_fields, NULL, &err);
	if (rc == AKS_OK)
		rc = aks__store_get(s, "sessions", "conv/one", &rec, &err);
	if (rc == AKS_OK) {
		alloc_fail_spare(true); /* the test's own serialisation */
		add_data(o, "%s", json_object_to_json_string_ext(rec, JSON_C_TO_STRING_PLAIN));
		alloc_fail_spare(false);
	} else {
		set_error(o, rc, err, rc == AKS_ENOTFOUND ? "the record is not there" : "no error");
	}
	json_object_put(rec);
	aks__store_close(s);
	aks_error_free(err);
}

/* ---- the queue's wire format ---- */

static const char wire_request[] =
    "{\"task_id\": \"0123456789abcdef0123456789abcdef\", \"operation\": \"upload_file\", "
    "\"payload\": {\"path\": \"notes/a.txt\", \"content\": \"aGVsbG8K\"}, \"profile\": "
    "\"default\", \"principal\": {\"mode\": \"user\", \"subject\": \"alice\", \"credentials\": "
    "{\"token\": \"t\"}, \"groups\": [\"dev\", \"ops\"]}, \"policy\": {\"network_egress\": "
    "\"allowlist\", \"network_allow\": [\"example.com\"], \"fs_allow_read\": [\"/data\"], "
    "\"fs_allow_write\": [], \"cpu\": 1.5, \"memory_mb\": 512, \"timeout\": 30.0, \"strict\": "
    "true}, \"sandbox_session\": {\"sandbox_session_id\": \"default:default\", \"name\": null, "
    "\"profile\": \"default\", \"provider_type\": \"fake\", \"sandbox_id\": \"abc\", "
    "\"created_at\": 1.0, \"last_used_at\": 2.0, \"status\": \"active\"}, \"ak_session_id\": "
    "\"conv\", \"agent\": \"agent\", \"wait_deadline\": 12.5}";

static const char wire_record[] =
    "{\"request_id\": \"t1\", \"session_id\": \"conv\", \"status_code\": 200, \"body\": "
    "{\"task_id\": \"t1\", \"status\": \"succeeded\", \"result\": {\"stdout\": \"hi\\n\", "
    "\"stderr\": \"\", \"exit_code\": 0, \"output_files\": [{\"path\": \"x\", \"content\": "
    "\"AP+ACg3I\", \"mime_type\": null}], \"sandbox_session_id\": \"s\", \"notice\": \"n\", "
    "\"provider_data\": {\"k\": [1, 2]}}, \"result_ref\": null, \"error\": null, "
    "\"error_type\": null, \"sandbox_session\": {\"sandbox_session_id\": \"s\", \"profile\": "
    "\"p\", \"created_at\": 0, \"last_used_at\": 0}}}";

static void run_wire(outcome *o, void *ctx)
{
	(void)ctx;
	aks_error *err = NULL;
	aks_wire_request *r = NULL, *back = NULL;
	aks_wire_completion *c = NULL, *cback = NULL;
	char *text = NULL, *record = NULL;
	int rc = aks__wire_request_decode(wire_request, sizeof(wire_request) - 1, &r, &err);
	if (rc == AKS_OK && !(text = aks__wire_request_encode(r)))
		rc = aks__error_set(&err, AKS_ENOMEM, "cannot encode the request");
	if (rc == AKS_OK)
		rc = aks__wire_request_decode(text, strlen(text), &back, &err);
	if (rc == AKS_OK)
		add_data(o,
		         "request %s op=%d path=%s content=%zu subject=%s groups=%s,%s cred=%s "
		         "allow=%s read=%s session=%s wait=%g;",
		         back->task_id, back->op, back->path, back->content_len, back->subject,
		         back->groups[0], back->groups[1], back->credentials[1],
		         back->network_allow[0], back->fs_allow_read[0], back->session.id,
		         back->wait_deadline);
	if (rc == AKS_OK)
		rc = aks__wire_completion_decode(wire_record, sizeof(wire_record) - 1, &c, &err);
	if (rc == AKS_OK && !(record = aks__wire_record_encode(c, "conv")))
		rc = aks__error_set(&err, AKS_ENOMEM, "cannot encode the record");
	if (rc == AKS_OK)
		rc = aks__wire_completion_decode(record, strlen(record), &cback, &err);
	if (rc == AKS_OK) {
		size_t out_len = 0, file_len = 0;
		const char *path = NULL, *mime = NULL;
		const char *stdout_text = aks_result_get_stdout(cback->result, &out_len);
		const unsigned char *file =
		    aks_result_get_file_count(cback->result)
		        ? aks_result_get_file(cback->result, 0, &path, &mime, &file_len)
		        : NULL;
		add_data(o,
		         "completion %s status=%d stdout=%.*s files=%zu file=%s:%zu:%02x notice=%s "
		         "data=%s session=%s",
		         cback->task_id, cback->status, (int)out_len, stdout_text,
		         aks_result_get_file_count(cback->result), path ? path : "-", file_len,
		         file ? file[0] : 0, aks_result_get_notice(cback->result),
		         aks_result_get_provider_data(cback->result), cback->session.id);
	}
	if (rc != AKS_OK)
		set_error(o, rc, err, "no error set");
	aks__wire_completion_free(cback);
	free(record);
	aks__wire_completion_free(c);
	aks__wire_request_free(back);
	free(text);
	aks__wire_request_free(r);
	aks_error_free(err);
}

/* ---- the tests ---- */

static void test_config(void **state)
{
	(void)state;
	scenario sc = {"config", run_config, NULL, NULL, NULL};
	assert_true(torture(&sc));
}

static void test_tool_call(void **state)
{
	(void)state;
	tool_fixture fx = {0};
	snprintf(fx.dir, sizeof(fx.dir), "/tmp/aks-alloc-XXXXXX");
	assert_non_null(mkdtemp(fx.dir));
	snprintf(fx.state, sizeof(fx.state), "%s/state", fx.dir);
	char cfg[128];
	snprintf(cfg, sizeof(cfg), "%s/config.yaml", fx.dir);
	FILE *f = fopen(cfg, "w");
	assert_non_null(f);
	fputs("sandbox:\n  enabled: true\n  profiles:\n    default: {type: fake, fake: {}}\n", f);
	assert_int_equal(fclose(f), 0);
	static const char *const no_env[] = {NULL};
	aks_error *err = NULL;
	if (aks_settings_load(cfg, no_env, &fx.settings, &err) != AKS_OK)
		fail_msg("%s", aks_error_message(err));
	scenario sc = {"tool call", run_tool_call, tool_reset, tool_teardown, &fx};
	bool clean = torture(&sc);
	aks_settings_free(fx.settings);
	nftw(fx.dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	assert_true(clean);
}

static void test_store(void **state)
{
	(void)state;
	store_fixture fx = {0};
	snprintf(fx.dir, sizeof(fx.dir), "/tmp/aks-alloc-XXXXXX");
	assert_non_null(mkdtemp(fx.dir));
	scenario sc = {"state store", run_store, store_reset, NULL, &fx};
	bool clean = torture(&sc);
	nftw(fx.dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	assert_true(clean);
}

static void test_wire(void **state)
{
	(void)state;
	scenario sc = {"wire", run_wire, NULL, NULL, NULL};
	assert_true(torture(&sc));
}

int main(void)
{
	aks_log_set_level(-1); /* the runs' warnings would drown the report */
	/* ALLOC_FAIL_TEST=test_wire: one scenario (for debugging) */
	if (getenv("ALLOC_FAIL_TEST"))
		cmocka_set_test_filter(getenv("ALLOC_FAIL_TEST"));
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_config),
	    cmocka_unit_test(test_tool_call),
	    cmocka_unit_test(test_store),
	    cmocka_unit_test(test_wire),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
