/*
 * plugins/ec2_ssm/ec2_ssm_exec.c - a command or code run on the instance, as the reference
 * runs it: SendCommand with AWS-RunShellScript (never sent twice), GetCommandInvocation read
 * until the command ends (an invocation SSM does not know yet is still pending: SSM is
 * eventually consistent), the exit code from ResponseCode; at the deadline or on
 * cancellation, CancelCommand and the timeout error. SSM keeps only the first 24,000
 * characters of stdout and 8,000 of stderr: an output that reaches that bound says so.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ec2_ssm_internal.h"

/* The first wait before reading a command's state; it doubles up to poll_interval (most
 * commands end within a second, so a fixed second is what most of them would wait). */
#define FIRST_POLL_MS 100
/* CancelCommand after the deadline gets this long of its own; SSM's own executionTimeout is
 * the deadline plus this, the backstop should the cancel never arrive (a host that died). */
#define CANCEL_BUDGET_MS 5000

static bool add_str(json_object *o, const char *key, const char *v)
{
	json_object *s = json_object_new_string(v);
	if (!s || json_object_object_add(o, key, s)) {
		json_object_put(s);
		return false;
	}
	return true;
}

/* {"commands": [script], "executionTimeout": ["N"]} */
static json_object *send_body(const char *instance, const char *script, long timeout_s)
{
	json_object *body = json_object_new_object(), *ids = json_object_new_array(),
	            *params = json_object_new_object(), *cmds = json_object_new_array(),
	            *tmo = json_object_new_array();
	char t[32];
	snprintf(t, sizeof(t), "%ld", timeout_s);
	bool ok = body && ids && params && cmds && tmo &&
	          !json_object_array_add(ids, json_object_new_string(instance)) &&
	          !json_object_array_add(cmds, json_object_new_string(script)) &&
	          !json_object_array_add(tmo, json_object_new_string(t));
	ok = ok && !json_object_object_add(params, "commands", cmds);
	if (ok)
		cmds = NULL;
	ok = ok && !json_object_object_add(params, "executionTimeout", tmo);
	if (ok)
		tmo = NULL;
	ok = ok && !json_object_object_add(body, "InstanceIds", ids);
	if (ok)
		ids = NULL;
	ok = ok && add_str(body, "DocumentName", "AWS-RunShellScript") &&
	     !json_object_object_add(body, "Parameters", params);
	if (ok)
		params = NULL;
	json_object_put(ids);
	json_object_put(params);
	json_object_put(cmds);
	json_object_put(tmo);
	if (!ok) {
		json_object_put(body);
		return NULL;
	}
	return body;
}

static json_object *invocation_body(const char *command_id, const char *instance)
{
	json_object *body = json_object_new_object();
	if (!body || !add_str(body, "CommandId", command_id) ||
	    !add_str(body, "InstanceId", instance)) {
		json_object_put(body);
		return NULL;
	}
	return body;
}

static const char *str_of(json_object *o, const char *key)
{
	json_object *v = NULL;
	return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
	           ? json_object_get_string(v)
	           : NULL;
}

/* Best effort: the command is stopped on the instance, within a budget of its own (the
 * call's deadline has passed, or the call was cancelled). */
static void cancel_command(aks_sandbox_impl *sb, ssm_client *client, const char *command_id,
                           const aks_call *call)
{
	const aks_host_api *host = sb->prov->host;
	json_object *body = json_object_new_object(), *ids = json_object_new_array();
	if (!body || !ids || json_object_array_add(ids, json_object_new_string(sb->id)) ||
	    json_object_object_add(body, "InstanceIds", ids) ||
	    (ids = NULL, !add_str(body, "CommandId", command_id))) {
		json_object_put(ids);
		json_object_put(body);
		return;
	}
	aks_call own = {AKS_CALL_INIT};
	own.deadline_ms = host->now_ms() + CANCEL_BUDGET_MS;
	own.principal = call ? call->principal : NULL;
	own.policy = call ? call->policy : NULL;
	json_object *answer = NULL;
	aks_aws_fault fault;
	aks_error *e = NULL;
	if (aks_aws_json_call(&client->ssm, "cancel the command", "AmazonSSM.CancelCommand", body,
	                      AKS_CLOUD_RETRY_SAFE, &own, &answer, &fault, &e) != AKS_OK) {
		host->log(AKS_LOG_WARNING, EC2_SSM_NAME, "command %s on %s may still run: %s",
		          command_id, sb->id, host->error_message(e));
		host->error_free(e);
	}
	json_object_put(answer);
	json_object_put(body);
}

/* An output field of the invocation (NULL, 0 when absent). */
static const char *field(json_object *inv, const char *key, size_t *len)
{
	json_object *v = NULL;
	*len = 0;
	if (!json_object_object_get_ex(inv, key, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	*len = (size_t)json_object_get_string_len(v);
	return json_object_get_string(v);
}

/* Writes one stream to the result. The bytes the command wrote past what SSM returned are
 * counted as unseen (the result is then marked cut, with the output's whole length): from
 * the measured script's sizes line when there is one, else a stream that reaches SSM's bound
 * is taken as cut (by at least a byte). *cut says whether it was. */
static int write_stream(aks_sandbox_impl *sb, int stream, const char *s, size_t len, bool measured,
                        uint64_t total, size_t bound, aks_result *out, bool *cut, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	int rc = len ? host->result_write(out, stream, s, len, err) : AKS_OK;
	uint64_t unseen =
	    measured ? (total > len ? total - len : 0) : (ssm_char_count(s, len) >= bound ? 1 : 0);
	*cut = unseen > 0;
	if (rc == AKS_OK && unseen && AKS_HOST_HAS(host, result_add_unseen) &&
	    host->result_add_unseen)
		host->result_add_unseen(out, stream, unseen);
	return rc;
}

static int finish(aks_sandbox_impl *sb, json_object *inv, const char *status, aks_result *out,
                  aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	json_object *v = NULL;
	int code = json_object_object_get_ex(inv, "ResponseCode", &v) ? json_object_get_int(v) : -1;
	const char *details = str_of(inv, "StatusDetails");
	if (code < 0 || code > 255)
		return host->error_set(err, AKS_EPROVISION,
		                       "ec2_ssm: the command on '%s' ended %s (%s) without an exit "
		                       "code",
		                       sb->id, status, details ? details : "no details");
	size_t out_len = 0, err_len = 0, skip = 0;
	const char *o = field(inv, "StandardOutputContent", &out_len);
	const char *e = field(inv, "StandardErrorContent", &err_len);
	uint64_t out_total = 0, err_total = 0;
	bool measured = o && ssm_sizes_parse(o, out_len, &out_total, &err_total, &skip);
	if (measured)
		o += skip, out_len -= skip;
	bool out_cut = false, err_cut = false;
	int rc = write_stream(sb, AKS_STREAM_STDOUT, o, out_len, measured, out_total,
	                      SSM_STDOUT_MAX, out, &out_cut, err);
	if (rc == AKS_OK)
		rc = write_stream(sb, AKS_STREAM_STDERR, e, err_len, measured, err_total,
		                  SSM_STDERR_MAX, out, &err_cut, err);
	if (rc != AKS_OK)
		return rc;
	host->result_set_exit_code(out, code);
	if (out_cut || err_cut) {
		char notice[300];
		snprintf(
		    notice, sizeof(notice),
		    "SSM returns only the first %d characters of stdout and %d of stderr: %s%s%s "
		    "went past that bound, and what the command wrote after it is not here",
		    SSM_STDOUT_MAX, SSM_STDERR_MAX, out_cut ? "stdout" : "",
		    out_cut && err_cut ? " and " : "", err_cut ? "stderr" : "");
		if ((rc = host->result_set_notice(out, notice)) != AKS_OK)
			return host->error_set(err, rc, "out of memory");
	}
	return AKS_OK;
}

static int run_script(aks_sandbox_impl *sb, const char *script, const aks_call *call,
                      aks_result *out, aks_error **err)
{
	aks_provider_impl *prov = sb->prov;
	const aks_host_api *host = prov->host;
	ssm_client *client = NULL;
	const char *run_as = NULL;
	int rc = ssm_client_for(prov, call, &client, &run_as, err);
	if (rc != AKS_OK)
		return rc;
	char *as = ssm_run_as_script(script, run_as);
	char *line = as ? ssm_measured_script(as) : NULL;
	free(as);
	double timeout = call && call->timeout > 0 ? call->timeout : 3600;
	json_object *body =
	    line ? send_body(sb->id, line, (long)ceil(timeout) + CANCEL_BUDGET_MS / 1000) : NULL;
	free(line);
	if (!body)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	json_object *answer = NULL, *cmd = NULL;
	aks_aws_fault fault;
	/* never sent twice: only refusals that did nothing (throttling, a connection that never
	 * opened) are tried again */
	aks_error *e = NULL;
	rc = aks_aws_json_call(&client->ssm, "send the command", "AmazonSSM.SendCommand", body,
	                       AKS_CLOUD_RETRY_UNSENT, call, &answer, &fault, &e);
	json_object_put(body);
	if (rc != AKS_OK) {
		rc = strcmp(fault.code, "InvalidInstanceId") == 0
		         ? host->error_set(err, AKS_EGONE, "instance '%s' is not reachable via SSM",
		                           sb->id)
		         : host->error_set(err, rc, "%s", host->error_message(e));
		host->error_free(e);
		return rc;
	}
	json_object_object_get_ex(answer, "Command", &cmd);
	const char *id = str_of(cmd, "CommandId");
	char command_id[64];
	snprintf(command_id, sizeof(command_id), "%s", id ? id : "");
	json_object_put(answer);
	if (!command_id[0] || strlen(command_id) > 48)
		return host->error_set(err, AKS_EPROVISION,
		                       "ec2_ssm: SSM accepted the command without a CommandId");
	json_object *query = invocation_body(command_id, sb->id);
	if (!query)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	long wait = FIRST_POLL_MS, max_wait = (long)(prov->poll_interval_s * 1000);
	for (;;) {
		if ((rc = aks_cloud_pause(&prov->cloud, call, wait < max_wait ? wait : max_wait,
		                          err)) != AKS_OK)
			break;
		wait *= 2;
		json_object *inv = NULL;
		e = NULL;
		rc = aks_aws_json_call(&client->ssm, "read the command's state",
		                       "AmazonSSM.GetCommandInvocation", query,
		                       AKS_CLOUD_RETRY_SAFE, call, &inv, &fault, &e);
		if (rc != AKS_OK && strcmp(fault.code, "InvocationDoesNotExist") == 0) {
			host->error_free(e); /* not visible yet: pending, and never sent again */
			continue;
		}
		if (rc != AKS_OK) {
			rc = host->error_set(err, rc, "%s", host->error_message(e));
			host->error_free(e);
			break;
		}
		const char *status = str_of(inv, "Status");
		if (!status || strcmp(status, "Pending") == 0 ||
		    strcmp(status, "InProgress") == 0 || strcmp(status, "Delayed") == 0 ||
		    strcmp(status, "Cancelling") == 0) {
			json_object_put(inv);
			continue;
		}
		if (strcmp(status, "TimedOut") == 0) /* SSM's own executionTimeout struck first */
			rc = AKS_ETIMEOUT;
		else
			rc = finish(sb, inv, status, out, err);
		json_object_put(inv);
		break;
	}
	json_object_put(query);
	if (rc == AKS_ETIMEOUT || rc == AKS_ECANCELLED) {
		cancel_command(sb, client, command_id, call);
		if (rc == AKS_ETIMEOUT) {
			host->result_set_timed_out(out);
			rc = host->error_set(err, AKS_ETIMEOUT, "ssm command exceeded timeout %gs",
			                     timeout);
		}
	}
	return rc;
}

int ssm_execute_command(aks_sandbox_impl *sb, const char *command, const aks_call *call,
                        aks_result *out, aks_error **err)
{
	return run_script(sb, command, call, out, err);
}

int ssm_execute_code(aks_sandbox_impl *sb, const char *code, const char *language,
                     const aks_call *call, aks_result *out, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	if (strcmp(language, "python") != 0)
		return host->error_set(err, AKS_ECAPABILITY,
		                       "ec2_ssm runs python code only, not %s", language);
	char *script = ssm_python_script(code);
	if (!script)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	int rc = run_script(sb, script, call, out, err);
	free(script);
	return rc;
}
