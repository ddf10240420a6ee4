/* Unit tests: the queue broker's wire format (reference §2.9, §5.6, §5.7) — requests and
 * completion records round-trip with binary fidelity, typed errors cross the wire by class
 * name, and malformed messages are refused with a message instead of crashing. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/plugin/result.h"
#include "core/queue/wire.h"

/* The reference's binary-fidelity bytes. */
static const unsigned char binary[] = {0x00, 0xFF, 0x80, 0x0A, 0x0D, 0xC8};

static aks_wire_request *sample_request(int op)
{
	aks_wire_request *r = calloc(1, sizeof(*r));
	r->task_id = strdup("0123456789abcdef0123456789abcdef");
	r->op = op;
	r->code = strdup("print(1)");
	r->language = strdup("python");
	r->command = strdup("echo hi");
	r->path = strdup("dir/file.bin");
	r->content = malloc(sizeof(binary));
	memcpy(r->content, binary, sizeof(binary));
	r->content_len = sizeof(binary);
	r->profile = strdup("default");
	r->groups = calloc(3, sizeof(char *));
	r->groups[0] = strdup("eng");
	r->groups[1] = strdup("ops");
	r->credentials = calloc(3, sizeof(char *));
	r->credentials[0] = strdup("role_arn");
	r->credentials[1] = strdup("arn:aws:iam::1:role/x");
	r->subject = strdup("alice");
	aks_principal_init(&r->principal, r->subject);
	r->principal.mode = AKS_IDENTITY_USER;
	r->principal.groups = (const char *const *)r->groups;
	r->principal.credentials = (const char *const *)r->credentials;
	aks_policy_init(&r->policy);
	r->policy.network_egress = AKS_EGRESS_DENY;
	r->policy.cpu = 1.5;
	r->policy.memory_mb = 512;
	r->policy.timeout = 30;
	r->policy.strict = false;
	r->session.id = strdup("default:default");
	r->session.profile = strdup("default");
	r->session.provider_type = strdup("docker");
	r->session.sandbox_id = strdup("c0ffee");
	r->session.created_at = 1700000000.5;
	r->session.last_used_at = 1700000001.25;
	r->ak_session_id = strdup("conv-1");
	r->agent = strdup("coder");
	return r;
}

static void test_request_round_trip(void **state)
{
	(void)state;
	for (int op = AKS_WIRE_EXECUTE_CODE; op <= AKS_WIRE_DESTROY; op++) {
		aks_wire_request *r = sample_request(op);
		char *json = aks__wire_request_encode(r);
		assert_non_null(json);
		aks_wire_request *back = NULL;
		aks_error *err = NULL;
		assert_int_equal(aks__wire_request_decode(json, strlen(json), &back, &err), AKS_OK);
		assert_int_equal(back->op, op);
		assert_string_equal(back->task_id, r->task_id);
		assert_string_equal(back->profile, "default");
		assert_string_equal(back->ak_session_id, "conv-1");
		assert_string_equal(back->agent, "coder");
		assert_string_equal(back->session.sandbox_id, "c0ffee");
		assert_true(back->session.last_used_at == 1700000001.25);
		assert_int_equal(back->principal.mode, AKS_IDENTITY_USER);
		assert_string_equal(back->principal.subject, "alice");
		assert_string_equal(back->principal.groups[1], "ops");
		assert_string_equal(back->principal.credentials[0], "role_arn");
		assert_int_equal(back->policy.network_egress, AKS_EGRESS_DENY);
		assert_true(back->policy.cpu == 1.5);
		assert_int_equal(back->policy.memory_mb, 512);
		assert_true(back->policy.timeout == 30);
		assert_false(back->policy.strict);
		if (op == AKS_WIRE_UPLOAD_FILE) {
			assert_int_equal(back->content_len, sizeof(binary));
			assert_memory_equal(back->content, binary, sizeof(binary));
			assert_non_null(strstr(json, "\"content\": \"AP+ACg3I\""));
		}
		if (op == AKS_WIRE_EXECUTE_COMMAND)
			assert_string_equal(back->command, "echo hi");
		if (op == AKS_WIRE_DESTROY)
			assert_null(back->command);
		aks__wire_request_free(back);
		aks__wire_request_free(r);
		free(json);
	}
}

static void expect_refused(const char *json, const char *words)
{
	aks_wire_request *r = NULL;
	aks_error *err = NULL;
	assert_int_equal(aks__wire_request_decode(json, strlen(json), &r, &err), AKS_EINVAL);
	assert_null(r);
	if (!strstr(aks_error_message(err), words))
		fail_msg("'%s' does not say '%s'", aks_error_message(err), words);
	aks_error_free(err);
}

#define HEAD "{\"task_id\": \"t\", \"profile\": \"p\", "
#define TAIL                                                                                       \
	"\"principal\": {\"subject\": \"a\"}, \"policy\": {}, "                                    \
	"\"sandbox_session\": {\"sandbox_session_id\": \"s\", \"profile\": \"p\"}}"

static void test_request_refusals(void **state)
{
	(void)state;
	expect_refused("not json", "malformed request");
	expect_refused("[1]", "not a JSON object");
	expect_refused(
	    HEAD "\"operation\": \"execute_command\", \"payload\": {\"command\": \"x\"}, " TAIL
	         " trailing",
	    "more after");
	expect_refused("{\"operation\": \"destroy\"}", "'task_id' is missing");
	expect_refused(HEAD "\"operation\": \"rm_rf\", " TAIL, "unknown operation 'rm_rf'");
	expect_refused(HEAD
	               "\"operation\": \"execute_command\", \"payload\": {\"command\": 7}, " TAIL,
	               "'command' has the wrong type");
	expect_refused(HEAD "\"operation\": \"upload_file\", \"payload\": {\"path\": \"x\", "
	                    "\"content\": \"Zh==\"}, " TAIL,
	               "not standard base64");
	expect_refused(HEAD "\"operation\": \"execute_command\", \"payload\": {\"command\": "
	                    "\"a\\u0000b\"}, " TAIL,
	               "NUL");
	expect_refused(HEAD "\"operation\": \"destroy\", \"principal\": {\"subject\": \"a\", "
	                    "\"mode\": \"root\"}, \"policy\": {}, \"sandbox_session\": "
	                    "{\"sandbox_session_id\": \"s\", \"profile\": \"p\"}}",
	               "neither agent nor user");
	expect_refused(HEAD "\"operation\": \"destroy\", \"principal\": {\"subject\": \"a\"}, "
	                    "\"policy\": {\"timeout\": -1}, \"sandbox_session\": "
	                    "{\"sandbox_session_id\": \"s\", \"profile\": \"p\"}}",
	               "'timeout' must be a positive");
	expect_refused(HEAD "\"operation\": \"destroy\", \"principal\": {\"subject\": \"a\"}, "
	                    "\"policy\": {}, \"sandbox_session\": {\"profile\": \"p\"}}",
	               "'sandbox_session' lacks");
	expect_refused(HEAD "\"operation\": \"execute_command\", \"payload\": {\"command\": "
	                    "\"echo\xc3hi\"}, " TAIL,
	               "not valid UTF-8");
	expect_refused(HEAD "\"operation\": \"execute_command\", \"payload\": {\"command\": "
	                    "\"\xed\xa0\x80\"}, " TAIL,
	               "not valid UTF-8"); /* a surrogate */
	/* A NUL anywhere a request holds a string, not only in the payload's: each becomes a C
	 * string on the worker, which it would cut short. */
	expect_refused(HEAD "\"operation\": \"install_packages\", \"payload\": {\"packages\": "
	                    "[\"numpy\", \"x\\u0000; rm -rf /\"]}, " TAIL,
	               "'packages' contains a NUL character");
	expect_refused(HEAD "\"operation\": \"destroy\", \"principal\": {\"subject\": \"a\", "
	                    "\"groups\": [\"dev\\u0000admin\"]}, \"policy\": {}, "
	                    "\"sandbox_session\": {\"sandbox_session_id\": \"s\", \"profile\": "
	                    "\"p\"}}",
	               "'groups' contains a NUL character");
	expect_refused(HEAD "\"operation\": \"destroy\", \"principal\": {\"subject\": \"a\", "
	                    "\"credentials\": {\"token\": \"abc\\u0000def\"}}, \"policy\": {}, "
	                    "\"sandbox_session\": {\"sandbox_session_id\": \"s\", \"profile\": "
	                    "\"p\"}}",
	               "'token' contains a NUL character");
	expect_refused(HEAD "\"operation\": \"destroy\", \"principal\": {\"subject\": \"a\"}, "
	                    "\"policy\": {\"network_allow\": [\"a.example\\u0000.evil\"]}, "
	                    "\"sandbox_session\": {\"sandbox_session_id\": \"s\", \"profile\": "
	                    "\"p\"}}",
	               "'network_allow' contains a NUL character");
	expect_refused(HEAD "\"operation\": \"destroy\", \"principal\": {\"subject\": \"a\"}, "
	                    "\"policy\": {}, \"sandbox_session\": {\"sandbox_session_id\": "
	                    "\"s\\u0000other\", \"profile\": \"p\"}}",
	               "'sandbox_session_id' contains a NUL character");
	/* nesting deeper than the bound */
	char deep[400];
	memset(deep, '[', 300);
	deep[300] = '\0';
	expect_refused(deep, "malformed request");
}

static void test_completion_record(void **state)
{
	(void)state;
	aks_wire_completion c = {0};
	c.task_id = "t-1";
	c.status = AKS_WIRE_SUCCEEDED;
	c.result = aks__result_new(AKS_DEFAULT_STREAM_CAP, AKS_DEFAULT_FILE_CAP);
	assert_int_equal(aks__result_write(c.result, AKS_STREAM_STDOUT, "out\n", 4, NULL), AKS_OK);
	assert_int_equal(aks__result_write(c.result, AKS_STREAM_STDERR, "err", 3, NULL), AKS_OK);
	aks__result_set_exit_code(c.result, 3);
	assert_int_equal(aks__result_add_file(c.result, "f.bin", "application/octet-stream"), 0);
	assert_int_equal(aks__result_write(c.result, AKS_STREAM_FILE, binary, sizeof(binary), NULL),
	                 AKS_OK);
	assert_int_equal(aks__result_set_notice(c.result, "reset"), 0);
	c.session.id = "s-1";
	c.session.profile = "p";
	c.session.provider_type = "docker";
	c.session.sandbox_id = "new-box";
	char *rec = aks__wire_record_encode(&c, "conv-9");
	assert_non_null(rec);
	assert_non_null(strstr(rec, "{\"request_id\": \"t-1\", \"session_id\": \"conv-9\", "
	                            "\"status_code\": 200, \"body\": {\"task_id\": \"t-1\""));
	aks_wire_completion *back = NULL;
	assert_int_equal(aks__wire_completion_decode(rec, strlen(rec), &back, NULL), AKS_OK);
	assert_int_equal(back->status, AKS_WIRE_SUCCEEDED);
	size_t n;
	assert_memory_equal(aks_result_get_stdout(back->result, &n), "out\n", 4);
	assert_int_equal(aks_result_get_exit_code(back->result), 3);
	assert_string_equal(aks_result_get_notice(back->result), "reset");
	const char *path, *mime;
	const unsigned char *data = aks_result_get_file(back->result, 0, &path, &mime, &n);
	assert_int_equal(n, sizeof(binary));
	assert_memory_equal(data, binary, n);
	assert_string_equal(path, "f.bin");
	assert_string_equal(back->session.sandbox_id, "new-box");
	aks__wire_completion_free(back);
	free(rec);
	aks_result_free(c.result);

	/* a failure: 500, no result, the error class by name; timed out: 504 */
	aks_wire_completion f = {.task_id = "t-2",
	                         .status = AKS_WIRE_FAILED,
	                         .error = "boom",
	                         .error_type = "SandboxPolicyError"};
	f.session.id = "s";
	f.session.profile = "p";
	rec = aks__wire_record_encode(&f, "c");
	assert_non_null(strstr(rec, "\"status_code\": 500"));
	assert_int_equal(aks__wire_completion_decode(rec, strlen(rec), &back, NULL), AKS_OK);
	assert_null(back->result);
	assert_string_equal(back->error, "boom");
	assert_int_equal(aks__wire_error_code(back->error_type), AKS_EPOLICY);
	aks__wire_completion_free(back);
	free(rec);
	f.status = AKS_WIRE_TIMED_OUT;
	rec = aks__wire_record_encode(&f, "c");
	assert_non_null(strstr(rec, "\"status_code\": 504"));
	free(rec);
}

static void test_error_types(void **state)
{
	(void)state;
	int codes[] = {AKS_ECONFIG,
	               AKS_ECAPABILITY,
	               AKS_EPOLICY,
	               AKS_ETIMEOUT,
	               AKS_EPROVISION,
	               AKS_EGONE,
	               AKS_ESESSION_NOT_FOUND,
	               AKS_EBROKER,
	               AKS_ENOTFOUND,
	               AKS_ELIMIT,
	               AKS_ECANCELLED,
	               AKS_EPLUGIN};
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		assert_int_equal(aks__wire_error_code(aks__wire_error_type(codes[i])), codes[i]);
	assert_string_equal(aks__wire_error_type(AKS_ETIMEOUT), "SandboxTimeoutError");
	/* a missing file keeps its type across the wire (the reference lost it) */
	assert_string_equal(aks__wire_error_type(AKS_ENOTFOUND), "FileNotFoundError");
	/* an error of no known class is the root class, read back as a machinery error */
	assert_string_equal(aks__wire_error_type(AKS_EIO), "SandboxError");
	assert_int_equal(aks__wire_error_code("SandboxError"), AKS_ERROR);
	/* only the reference's own classes are honoured */
	assert_int_equal(aks__wire_error_code("ValueError"), AKS_EBROKER);
	assert_int_equal(aks__wire_error_code(NULL), AKS_EBROKER);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_request_round_trip),
	    cmocka_unit_test(test_request_refusals),
	    cmocka_unit_test(test_completion_record),
	    cmocka_unit_test(test_error_types),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
