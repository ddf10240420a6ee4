/*
 * core/tools/api.c - the public tool API (aks_runtime_*): the eight tools by
 * name, JSON arguments in, the tool's JSON result out (reference §3), over
 * the manager.
 *
 * A tool never fails towards the agent: every refusal, bad argument and
 * machinery error becomes the tool's error JSON. Only misuse of the API (NULL
 * pointers, a missing or reserved conversation id) and running out of memory
 * are returned as errors.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "config/block.h"
#include "config/settings.h"
#include "plugin/handle_cache.h"
#include "plugin/provider.h"
#include "plugin/result.h"
#include "session/engine.h"
#include "session/manager.h"
#include "session/owner.h"
#include "store/store.h"
#include "tools/json.h"
#include "util/json_fix.h"
#include "util/sized.h"

struct aks_runtime {
	aks_settings *settings; /* borrowed */
	aks_state_store *store; /* NULL when the sandbox is disabled */
	aks_manager *manager;
	/* The background reaper (aks_runtime_start_reaper): a timed wait on
	 * reaper_cv, so that close wakes it at once instead of waiting out the
	 * interval. */
	bool reaper_started;
	bool reaper_stop; /* guarded by reaper_mu */
	bool pool_taken;  /* a session took a pooled sandbox: refill now (reaper_mu) */
	double reaper_interval;
	pthread_mutex_t reaper_mu;
	pthread_cond_t reaper_cv;
	pthread_t reaper;
};

AKS_EXPORT void aks_tool_context_init_sized(aks_tool_context *ctx, size_t size,
                                            const char *conversation_id, const char *agent)
{
	aks_tool_context full = {
	    .struct_version = AKS_TOOL_CONTEXT_VERSION,
	    .struct_size = sizeof(full),
	    .conversation_id = conversation_id,
	    .agent = agent,
	    .wait_timeout = AKS_WAIT_CONFIGURED,
	};
	aks__sized_write(ctx, size, &full, sizeof(full));
}

/* The configured store: a plugin, or the file store in state_dir (the caller's choice wins
 * over the config's `dir`, which wins over the environment). */
static int open_store(const aks_settings *settings, const char *state_dir, aks_state_store **out,
                      aks_error **err)
{
	if (settings->store_plugin)
		return aks__store_open_plugin(settings->store_plugin, settings->store_block, out,
		                              err);
	const char *dir = state_dir;
	if (!dir && settings->store_block &&
	    aks__config_string(settings->store_block, "dir", &dir) < 0)
		dir = NULL;
	return aks__store_open(dir && *dir ? dir : NULL, out, err);
}

AKS_EXPORT int aks_runtime_open(aks_settings *settings, const char *state_dir, aks_runtime **out,
                                aks_error **err)
{
	if (!settings || !out)
		return aks__error_set(err, AKS_EINVAL,
		                      "aks_runtime_open: settings and out are required");
	aks_runtime *rt = calloc(1, sizeof(*rt));
	if (!rt)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	rt->settings = settings;
	/* A disabled capability touches no state: every tool just says so. */
	if (aks_settings_is_enabled(settings)) {
		int rc = open_store(settings, state_dir, &rt->store, err);
		if (rc == AKS_OK)
			rc = aks__manager_new(settings, rt->store, &rt->manager, err);
		if (rc < 0) {
			aks_runtime_close(rt);
			return rc;
		}
	}
	*out = rt;
	return AKS_OK;
}

/* Stops and joins the background reaper, if it runs; before the manager goes. */
static void stop_reaper(aks_runtime *rt)
{
	if (!rt->reaper_started)
		return;
	aks__owner_on_pool_take(aks__manager_owner(rt->manager), NULL, NULL);
	pthread_mutex_lock(&rt->reaper_mu);
	rt->reaper_stop = true;
	pthread_cond_signal(&rt->reaper_cv);
	pthread_mutex_unlock(&rt->reaper_mu);
	pthread_join(rt->reaper, NULL);
	pthread_cond_destroy(&rt->reaper_cv);
	pthread_mutex_destroy(&rt->reaper_mu);
	rt->reaper_started = false;
}

AKS_EXPORT void aks_runtime_close(aks_runtime *rt)
{
	if (!rt)
		return;
	stop_reaper(rt);
	aks__manager_free(rt->manager);
	aks__store_close(rt->store);
	free(rt);
}

/* ---- arguments ---- */

static const char *arg_str(struct json_object *args, const char *key)
{
	struct json_object *v = json_object_object_get(args, key);
	return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

/* The tool's error JSON; a NULL result is ENOMEM. */
static int error_json(const char *message, const char *session_id, char **out, aks_error **err)
{
	*out = aks__tool_json_error(message, session_id);
	return *out ? AKS_OK : aks__error_set(err, AKS_ENOMEM, "out of memory");
}

/* A manager error as the agent sees it (the error is consumed). */
static int fail_json(aks_error *e, const char *session_id, char **out, aks_error **err)
{
	int rc =
	    error_json(e ? aks_error_message(e) : "sandbox operation failed", session_id, out, err);
	aks_error_free(e);
	return rc;
}

static int done(char *json, char **out, aks_error **err)
{
	*out = json;
	return json ? AKS_OK : aks__error_set(err, AKS_ENOMEM, "out of memory");
}

/* ---- the tools ---- */

typedef struct tool_call {
	aks_runtime *rt;
	int tool;
	const char *tool_name;
	struct json_object *args;
	aks_mgr_caller caller;
	size_t max_chars;
	aks_tool_output_fn on_output; /* NULL: nothing streamed */
	void *output_userdata;
} tool_call;

/* The output tap's callback: the caller's, with the tool's name. Runs under the tap's lock,
 * so never after tool_submit has detached it. */
static void relay_output(void *ud, int stream, const void *data, size_t len)
{
	const tool_call *tc = ud;
	tc->on_output(tc->output_userdata, tc->tool_name, stream, data, len);
}

static int tool_submit(tool_call *tc, char **out, aks_error **err)
{
	struct json_object *content = json_object_object_get(tc->args, "content");
	aks_mgr_request req = {
	    .code = arg_str(tc->args, "code"),
	    .language = arg_str(tc->args, "language"),
	    .command = arg_str(tc->args, "command"),
	    .path = arg_str(tc->args, "path"),
	    .data = content ? json_object_get_string(content) : NULL,
	    .len = content ? (size_t)json_object_get_string_len(content) : 0,
	    .profile = arg_str(tc->args, "profile"),
	    .session_id = arg_str(tc->args, "sandbox_session_id"),
	};
	switch (tc->tool) {
	case AKS_TOOL_RUN_CODE:
		req.op = AKS_MGR_EXECUTE_CODE;
		break;
	case AKS_TOOL_RUN_COMMAND:
		req.op = AKS_MGR_EXECUTE_COMMAND;
		break;
	case AKS_TOOL_WRITE_SANDBOX_FILE:
		req.op = AKS_MGR_UPLOAD;
		break;
	default:
		req.op = AKS_MGR_DOWNLOAD;
		break;
	}
	/* The file tools reach the workspace only, and take paths relative to it, as commands
	 * do (it is their working directory). The original took "/tmp/x" to mean
	 * "<workspace>/tmp/x", so a file written there was not where a command looking at
	 * /tmp/x found it: an absolute path is refused instead, and the agent told why. */
	if ((req.op == AKS_MGR_UPLOAD || req.op == AKS_MGR_DOWNLOAD) && req.path &&
	    req.path[0] == '/') {
		char *msg = NULL;
		if (asprintf(
		        &msg,
		        "%s: path '%.200s' is absolute; the file tools reach only the sandbox's "
		        "workspace and take paths relative to it (the working directory of "
		        "run_command and run_code): use a relative path, and run_command to "
		        "move a file elsewhere",
		        tc->tool_name, req.path) < 0)
			return aks__error_set(err, AKS_ENOMEM, "out of memory");
		int rc = error_json(msg, req.session_id, out, err);
		free(msg);
		return rc;
	}
	/* Only executions stream; the tap may outlive this call (a promoted run keeps its
	 * result), so it is detached before we return: no callback after that. */
	if (tc->on_output &&
	    (req.op == AKS_MGR_EXECUTE_CODE || req.op == AKS_MGR_EXECUTE_COMMAND) &&
	    !(req.output = aks__output_tap_new(relay_output, tc)))
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	aks_mgr_outcome o;
	aks_error *e = NULL;
	int rc = aks__manager_submit(tc->rt->manager, &tc->caller, &req, &o, &e);
	aks__output_tap_detach(req.output);
	aks__output_tap_unref(req.output);
	if (rc < 0) {
		/* The session the manager resolved (the default one, when none was named). */
		rc = fail_json(e, o.session_id ? o.session_id : req.session_id, out, err);
		aks__mgr_outcome_clear(&o);
		return rc;
	}
	char *json;
	if (o.task_id) {
		json = aks__tool_json_pending(o.task_id, o.session_id, o.notice);
	} else if (req.op == AKS_MGR_UPLOAD) {
		json = aks__tool_json_written(req.path, o.session_id, o.notice);
	} else if (req.op == AKS_MGR_DOWNLOAD) {
		size_t len = 0;
		const unsigned char *data = o.result && aks_result_get_file_count(o.result)
		                                ? aks_result_get_file(o.result, 0, NULL, NULL, &len)
		                                : NULL;
		json = aks__tool_json_read(req.path, data ? (const void *)data : "", data ? len : 0,
		                           0, o.session_id, o.notice, tc->max_chars);
	} else {
		aks_tool_output to;
		aks__tool_output_from_result(o.result, &to);
		json = aks__tool_json_run(&to, o.session_id, tc->max_chars);
	}
	aks__mgr_outcome_clear(&o);
	return done(json, out, err);
}

static int tool_task(tool_call *tc, char **out, aks_error **err)
{
	aks_error *e = NULL;
	if (aks__manager_task(tc->rt->manager, &tc->caller, arg_str(tc->args, "task_id"), out, &e) <
	    0)
		return fail_json(e, NULL, out, err);
	return AKS_OK;
}

static int tool_list(tool_call *tc, char **out, aks_error **err)
{
	aks_session_rec *recs = NULL;
	size_t n = 0;
	aks_error *e = NULL;
	if (aks__manager_list_sessions(tc->rt->manager, &tc->caller, &recs, &n, &e) < 0)
		return fail_json(e, NULL, out, err);
	aks_tool_session_row *rows = calloc(n ? n : 1, sizeof(*rows));
	char *json = NULL;
	if (rows) {
		for (size_t i = 0; i < n; i++)
			rows[i] = (aks_tool_session_row){
			    recs[i].id,           recs[i].name,
			    recs[i].profile,      recs[i].closed ? "closed" : "active",
			    recs[i].last_used_at, recs[i].egress_refused};
		json = aks__tool_json_sessions(rows, n);
	}
	free(rows);
	for (size_t i = 0; i < n; i++)
		aks__session_clear(&recs[i]);
	free(recs);
	return done(json, out, err);
}

static int tool_new(tool_call *tc, char **out, aks_error **err)
{
	aks_session_rec rec;
	aks_error *e = NULL;
	if (aks__manager_new_session(tc->rt->manager, &tc->caller, arg_str(tc->args, "profile"),
	                             arg_str(tc->args, "name"), &rec, &e) < 0)
		return fail_json(e, NULL, out, err);
	char *json = aks__tool_json_new_session(rec.id, rec.name, rec.profile);
	aks__session_clear(&rec);
	return done(json, out, err);
}

static int tool_destroy(tool_call *tc, char **out, aks_error **err)
{
	const char *id = arg_str(tc->args, "sandbox_session_id");
	aks_error *e = NULL;
	int rc = aks__manager_destroy_session(tc->rt->manager, &tc->caller, id, &e);
	if (rc == AKS_ENOTFOUND) {
		/* Still idempotent (the same shape, no error), but truthful: nothing went. */
		aks_error_free(e);
		return done(aks__tool_json_destroyed(id, false), out, err);
	}
	if (rc < 0)
		return fail_json(e, id, out, err);
	return done(aks__tool_json_destroyed(id, true), out, err);
}

static int dispatch(tool_call *tc, char **out, aks_error **err)
{
	switch (tc->tool) {
	case AKS_TOOL_RUN_CODE:
	case AKS_TOOL_RUN_COMMAND:
	case AKS_TOOL_WRITE_SANDBOX_FILE:
	case AKS_TOOL_READ_SANDBOX_FILE:
		return tool_submit(tc, out, err);
	case AKS_TOOL_CHECK_SANDBOX_TASK:
		return tool_task(tc, out, err);
	case AKS_TOOL_LIST_SANDBOX_SESSIONS:
		return tool_list(tc, out, err);
	case AKS_TOOL_NEW_SANDBOX_SESSION:
		return tool_new(tc, out, err);
	default:
		return tool_destroy(tc, out, err);
	}
}

/* The arguments as an object (NULL for none), or the tool's error JSON in *out. */
static int parse_args(const char *tool, const char *text, struct json_object **args, char **out,
                      aks_error **err)
{
	*args = NULL;
	if (!text || !*text)
		return AKS_OK;
	size_t len = strlen(text);
	aks_autofree char *fixed = NULL; /* json_fix.h: json-c misreads some surrogate pairs */
	size_t fixed_len = 0;
	struct json_tokener *tok = aks__json_fix_surrogates(text, len, &fixed, &fixed_len) == 0
	                               ? json_tokener_new()
	                               : NULL;
	if (!tok)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	if (fixed) {
		text = fixed;
		len = fixed_len;
	}
	struct json_object *obj = json_tokener_parse_ex(tok, text, (int)len);
	enum json_tokener_error jerr = json_tokener_get_error(tok);
	size_t used = tok->char_offset;
	json_tokener_free(tok);
	while (obj && used < len && strchr(" \t\r\n", text[used]))
		used++;
	if (!obj || jerr != json_tokener_success || used != len) {
		json_object_put(obj);
		char *msg = NULL;
		if (asprintf(&msg, "%s: the arguments are not valid JSON: %s", tool,
		             obj || jerr != json_tokener_success
		                 ? (jerr == json_tokener_success ? "trailing characters"
		                                                 : json_tokener_error_desc(jerr))
		                 : "trailing characters") < 0)
			return aks__error_set(err, AKS_ENOMEM, "out of memory");
		int rc = error_json(msg, NULL, out, err);
		free(msg);
		return rc < 0 ? rc : 1;
	}
	*args = obj;
	return AKS_OK;
}

AKS_EXPORT int aks_runtime_call_tool(aks_runtime *rt, const char *tool, const char *args_json,
                                     const aks_tool_context *ctx, char **out_json, aks_error **err)
{
	if (!out_json)
		return aks__error_set(err, AKS_EINVAL,
		                      "aks_runtime_call_tool: out_json is required");
	*out_json = NULL;
	if (!rt || !tool || !ctx)
		return aks__error_set(err, AKS_EINVAL,
		                      "aks_runtime_call_tool: rt, tool and ctx are required");
	if (ctx->struct_size < offsetof(aks_tool_context, agent) + sizeof(ctx->agent))
		return aks__error_set(err, AKS_EINVAL,
		                      "aks_runtime_call_tool: ctx is too small "
		                      "(use aks_tool_context_init)");
	tool_call tc = {.rt = rt, .tool = aks__tool_find(tool)};
	tc.caller.conversation = ctx->conversation_id;
	tc.caller.agent = ctx->agent;
	if (ctx->struct_size >= offsetof(aks_tool_context, attributes) + sizeof(ctx->attributes))
		tc.caller.attributes = ctx->attributes;
	if (ctx->struct_size >= offsetof(aks_tool_context, cancel) + sizeof(ctx->cancel))
		tc.caller.cancel = ctx->cancel;
	/* Version 2 fields: a version 1 caller's struct ends before them. */
	if (ctx->struct_size >=
	    offsetof(aks_tool_context, output_userdata) + sizeof(ctx->output_userdata)) {
		tc.on_output = ctx->on_output;
		tc.output_userdata = ctx->output_userdata;
	}
	/* Version 3: the wait. */
	if (ctx->struct_size >=
	    offsetof(aks_tool_context, wait_timeout) + sizeof(ctx->wait_timeout)) {
		double w = ctx->wait_timeout;
		if (w == AKS_WAIT_UNTIL_DONE) {
			tc.caller.wait_mode = AKS_MGR_WAIT_UNTIL_DONE;
		} else if (w >= 0 && w <= 1e9) {
			tc.caller.wait_mode = AKS_MGR_WAIT_SECONDS;
			tc.caller.wait_seconds = w;
		} else if (w != AKS_WAIT_CONFIGURED) {
			return aks__error_set(
			    err, AKS_EINVAL,
			    "aks_runtime_call_tool: wait_timeout must be a number of "
			    "seconds, AKS_WAIT_CONFIGURED or AKS_WAIT_UNTIL_DONE");
		}
	}

	if (tc.tool < 0) {
		char *msg = NULL;
		if (asprintf(&msg, "unknown tool '%s'", tool) < 0)
			return aks__error_set(err, AKS_ENOMEM, "out of memory");
		int rc = error_json(msg, NULL, out_json, err);
		free(msg);
		return rc;
	}
	if (!aks_settings_is_enabled(rt->settings))
		return done(aks__tool_json_disabled(), out_json, err);
	int rc = aks__manager_check_conversation(tc.caller.conversation, err);
	if (rc < 0)
		return rc;
	if (!aks_settings_agent_allowed(rt->settings, tc.caller.agent)) {
		/* Fail closed: the tools are not offered to this agent, so they
		 * cannot be called by it either. */
		char *msg = NULL;
		if (asprintf(&msg, "the sandbox tools are not available to agent '%s'",
		             tc.caller.agent) < 0)
			return aks__error_set(err, AKS_ENOMEM, "out of memory");
		rc = error_json(msg, NULL, out_json, err);
		free(msg);
		return rc;
	}
	rc = parse_args(tool, args_json, &tc.args, out_json, err);
	if (rc != AKS_OK)
		return rc < 0 ? rc : AKS_OK;
	aks_error *e = NULL;
	if (aks__tool_validate_args(tc.tool, tc.args, &e) < 0) {
		const char *sid = NULL;
		if (json_object_is_type(tc.args, json_type_object))
			sid = arg_str(tc.args, "sandbox_session_id");
		rc = fail_json(e, sid, out_json, err);
	} else {
		tc.max_chars = (size_t)aks_settings_get_tool_output_max_chars(rt->settings);
		tc.tool_name = aks__tool_name(tc.tool);
		rc = dispatch(&tc, out_json, err);
	}
	json_object_put(tc.args);
	return rc;
}

AKS_EXPORT char *aks_runtime_tool_schemas(const aks_runtime *rt)
{
	(void)rt; /* the schemas do not depend on the configuration */
	struct json_object *arr = json_object_new_array();
	for (int i = 0; arr && i < AKS_TOOL_COUNT; i++) {
		struct json_object *t = json_object_new_object(), *schema = aks__tool_schema(i);
		if (!t || !schema) {
			json_object_put(t);
			json_object_put(schema);
			json_object_put(arr);
			return NULL;
		}
		json_object_object_add(t, "name", json_object_new_string(aks__tool_name(i)));
		json_object_object_add(t, "description",
		                       json_object_new_string(aks__tool_description(i)));
		json_object_object_add(t, "parameters", schema);
		json_object_array_add(arr, t);
	}
	char *text = arr ? aks__json_dumps(arr) : NULL;
	json_object_put(arr);
	return text;
}

AKS_EXPORT char *aks_runtime_guidance(const aks_runtime *rt, const char *agent)
{
	if (!rt || !aks_settings_is_enabled(rt->settings) ||
	    !aks_settings_agent_allowed(rt->settings, agent))
		return strdup("");
	return aks__tool_guidance_from_settings(rt->settings);
}

AKS_EXPORT int aks_runtime_reap(aks_runtime *rt, aks_error **err)
{
	if (!rt)
		return aks__error_set(err, AKS_EINVAL, "aks_runtime_reap: rt is required");
	return rt->manager ? aks__manager_reap(rt->manager, NULL, err) : AKS_OK;
}

AKS_EXPORT int aks_runtime_gc(aks_runtime *rt, bool dry_run, char **report, aks_error **err)
{
	if (report)
		*report = NULL;
	if (!rt || !report)
		return aks__error_set(err, AKS_EINVAL,
		                      "aks_runtime_gc: rt and report are required");
	if (!rt->manager)
		return aks__error_set(err, AKS_ECONFIG,
		                      "the sandbox is disabled: nothing to collect");
	json_object *r = NULL;
	int rc = aks__manager_gc(rt->manager, dry_run, &r, err);
	if (rc < 0)
		return rc;
	*report = aks__json_dumps(r);
	json_object_put(r);
	return *report ? AKS_OK : aks__error_set(err, AKS_ENOMEM, "out of memory");
}

static void claim_free(void *claim)
{
	aks__owner_claim_free(claim);
}

AKS_EXPORT int aks_runtime_create_sandbox(aks_runtime *rt, const aks_profile *profile,
                                          const aks_call *call, aks_sandbox **out, aks_error **err)
{
	if (out)
		*out = NULL;
	if (!rt || !profile || !call || !out)
		return aks__error_set(err, AKS_EINVAL,
		                      "aks_runtime_create_sandbox: missing argument");
	/* Disabled, or the queue flavor: no store of this process records it, so no owner. */
	aks_owner_claim *claim = NULL;
	int rc = aks__engine_new_sandbox(aks__manager_owner(rt->manager), profile, call, out,
	                                 &claim, err);
	if (rc < 0)
		return rc;
	if (claim)
		aks__sandbox_attach(*out, claim, claim_free);
	return AKS_OK;
}

AKS_EXPORT int aks_runtime_destroy_sandbox(aks_runtime *rt, const aks_profile *profile,
                                           aks_sandbox *sb, const aks_call *call, aks_error **err)
{
	if (!rt || !profile || !sb || !call) {
		aks_sandbox_close(sb);
		return aks__error_set(err, AKS_EINVAL,
		                      "aks_runtime_destroy_sandbox: missing argument");
	}
	char *id = strdup(aks_sandbox_get_id(sb));
	aks_owner_claim *claim = aks__sandbox_detach(sb);
	aks_sandbox_close(sb);
	if (!id) {
		aks__owner_claim_free(claim); /* left for gc, which finds it once we are gone */
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	/* A handle this process kept for it (a pooled sandbox's) goes first. */
	aks__handle_cache_drop(aks__provider_handles(aks_profile_get_provider(profile)), id);
	int rc = aks_provider_destroy(aks_profile_get_provider(profile), id, call, err);
	if (rc == AKS_OK)
		aks__owner_release(claim);
	else
		aks__owner_claim_free(claim);
	free(id);
	return rc;
}

/* One collection from the background reaper: logged, never fatal. A queue-flavor host has
 * none (its workers collect). */
static void reaper_gc(aks_runtime *rt)
{
	json_object *r = NULL;
	aks_error *e = NULL;
	int rc = aks__manager_gc(rt->manager, false, &r, &e);
	aks__owner_gc_log("sandbox", rc, r, e);
	json_object_put(r);
	aks_error_free(e);
}

AKS_EXPORT int aks_runtime_fill_pools(aks_runtime *rt, char **report, aks_error **err)
{
	if (report)
		*report = NULL;
	if (!rt || !report)
		return aks__error_set(err, AKS_EINVAL,
		                      "aks_runtime_fill_pools: rt and report are required");
	if (!rt->manager)
		return aks__error_set(err, AKS_ECONFIG,
		                      "the sandbox is disabled: no pools to fill");
	json_object *r = NULL;
	int rc = aks__manager_fill_pools(rt->manager, &r, err);
	if (rc < 0)
		return rc;
	*report = aks__json_dumps(r);
	json_object_put(r);
	return *report ? AKS_OK : aks__error_set(err, AKS_ENOMEM, "out of memory");
}

/* ---- the background reaper ---- */

/* One fill of the warm pools from the background reaper: failures are logged (by the pool
 * for a backend's, here for the store's), never fatal. */
static void reaper_fill(aks_runtime *rt)
{
	json_object *r = NULL;
	aks_error *e = NULL;
	if (aks__manager_fill_pools(rt->manager, &r, &e) < 0 &&
	    aks_error_code(e) != AKS_ECAPABILITY)
		aks__log(AKS_LOG_WARNING, "sandbox", "pool: %s", aks_error_message(e));
	json_object_put(r);
	aks_error_free(e);
}

/* The pool's hook: a session took a pooled sandbox, so the reaper refills at once. */
static void wake_for_pool(void *ctx)
{
	aks_runtime *rt = ctx;
	pthread_mutex_lock(&rt->reaper_mu);
	rt->pool_taken = true;
	pthread_cond_signal(&rt->reaper_cv);
	pthread_mutex_unlock(&rt->reaper_mu);
}

static void *reaper_main(void *arg)
{
	aks_runtime *rt = arg;
	reaper_fill(rt); /* a long-running host has its pools ready from its start */
	pthread_mutex_lock(&rt->reaper_mu);
	while (!rt->reaper_stop) {
		struct timespec deadline;
		clock_gettime(CLOCK_MONOTONIC, &deadline);
		time_t whole = (time_t)rt->reaper_interval; /* positive: truncation is floor */
		deadline.tv_sec += whole;
		deadline.tv_nsec += (long)((rt->reaper_interval - (double)whole) * 1e9);
		if (deadline.tv_nsec >= 1000000000L) {
			deadline.tv_sec++;
			deadline.tv_nsec -= 1000000000L;
		}
		int rc = 0;
		while (!rt->reaper_stop && rc != ETIMEDOUT) {
			if (rt->pool_taken) {
				rt->pool_taken = false;
				pthread_mutex_unlock(&rt->reaper_mu);
				reaper_fill(rt);
				pthread_mutex_lock(&rt->reaper_mu);
				continue;
			}
			rc = pthread_cond_timedwait(&rt->reaper_cv, &rt->reaper_mu, &deadline);
		}
		if (rt->reaper_stop)
			break;
		/* The pass runs unlocked: close only has to wait for a pass in
		 * progress, never for the rest of an interval. */
		pthread_mutex_unlock(&rt->reaper_mu);
		aks_error *e = NULL;
		if (aks__manager_reap(rt->manager, NULL, &e) < 0)
			aks__log(AKS_LOG_WARNING, "sandbox", "idle reaper: %s",
			         aks_error_message(e));
		aks_error_free(e);
		reaper_gc(rt);
		reaper_fill(rt); /* and replaces what outlived max_idle */
		pthread_mutex_lock(&rt->reaper_mu);
	}
	pthread_mutex_unlock(&rt->reaper_mu);
	return NULL;
}

AKS_EXPORT int aks_runtime_start_reaper(aks_runtime *rt, double interval_seconds, aks_error **err)
{
	if (!rt)
		return aks__error_set(err, AKS_EINVAL, "aks_runtime_start_reaper: rt is required");
	/* Also bounds the interval so that the deadline cannot overflow time_t. */
	if (!(interval_seconds > 0) || !(interval_seconds <= 1e9))
		return aks__error_set(err, AKS_EINVAL,
		                      "aks_runtime_start_reaper: the interval must be a positive "
		                      "number of seconds");
	if (rt->reaper_started)
		return aks__error_set(err, AKS_EINVAL,
		                      "aks_runtime_start_reaper: the reaper is already running");
	if (!rt->manager)
		return AKS_OK; /* disabled: there is nothing to reap */
	pthread_condattr_t attr;
	if (pthread_condattr_init(&attr) != 0)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	int rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	if (rc == 0)
		rc = pthread_cond_init(&rt->reaper_cv, &attr);
	pthread_condattr_destroy(&attr);
	if (rc != 0)
		return aks__error_set(err, AKS_ERROR, "cannot start the idle reaper: %s",
		                      strerror(rc));
	pthread_mutex_init(&rt->reaper_mu, NULL);
	rt->reaper_stop = false;
	rt->pool_taken = false;
	rt->reaper_interval = interval_seconds;
	if ((rc = pthread_create(&rt->reaper, NULL, reaper_main, rt)) != 0) {
		pthread_cond_destroy(&rt->reaper_cv);
		pthread_mutex_destroy(&rt->reaper_mu);
		return aks__error_set(err, AKS_ERROR, "cannot start the idle reaper: %s",
		                      strerror(rc));
	}
	rt->reaper_started = true;
	aks__owner_on_pool_take(aks__manager_owner(rt->manager), wake_for_pool, rt);
	return AKS_OK;
}
