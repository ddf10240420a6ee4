/*
 * tests/unit/test_aws_common.c - what libaks-aws reads without a network
 * (plugins/common/aks_aws.h): the shared files' ini dialect, STS's credentials and errors in
 * XML, the JSON protocol's errors, AWS's times, RoleSessionName, endpoints as the SDKs
 * resolve them; and the ec2_ssm plugin's scripts (plugins/ec2_ssm/ec2_ssm_script.c): the
 * collision-free heredoc, the run_as line, characters counted as SSM counts them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "aws_internal.h"
#include "ec2_ssm_internal.h"

static void ini_reads_the_aws_dialect(void **state)
{
	(void)state;
	const char *text = "# comment\n"
	                   "[default]\n"
	                   "aws_access_key_id = AKIADEFAULT\n"
	                   "aws_secret_access_key=s3cr3t/with=equals\n"
	                   "; another comment\n"
	                   "\n"
	                   "[profile dev]\r\n"
	                   "region = eu-west-1  \r\n"
	                   "s3 =\n"
	                   "  max_concurrent_requests = 10\n"
	                   "region = eu-west-2\n";
	aks_aws_ini ini;
	int bad = -1;
	assert_int_equal(aks__aws_ini_parse(text, strlen(text), &ini, &bad), AKS_OK);
	assert_string_equal(aks__aws_ini_get(&ini, "default", "aws_access_key_id"), "AKIADEFAULT");
	assert_string_equal(aks__aws_ini_get(&ini, "default", "aws_secret_access_key"),
	                    "s3cr3t/with=equals");
	/* the last setting wins; an indented line belongs to the key above it */
	assert_string_equal(aks__aws_ini_get(&ini, "profile dev", "region"), "eu-west-2");
	assert_null(aks__aws_ini_get(&ini, "profile dev", "max_concurrent_requests"));
	assert_null(aks__aws_ini_get(&ini, "dev", "region"));
	assert_true(aks__aws_ini_has(&ini, "profile dev"));
	assert_false(aks__aws_ini_has(&ini, "profile other"));
	aks__aws_ini_free(&ini);

	char section[64];
	aks__aws_config_section("default", section, sizeof(section));
	assert_string_equal(section, "default");
	aks__aws_config_section("dev", section, sizeof(section));
	assert_string_equal(section, "profile dev");
}

static void ini_names_the_bad_line(void **state)
{
	(void)state;
	static const struct {
		const char *text;
		int line;
	} cases[] = {
	    {"[default]\nthis is not a setting\n", 2},
	    {"[default\nkey = v\n", 1},
	    {"[]\n", 1},
	    {"[default]\n= value\n", 2},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		aks_aws_ini ini;
		int bad = 0;
		assert_int_equal(
		    aks__aws_ini_parse(cases[i].text, strlen(cases[i].text), &ini, &bad),
		    AKS_ECONFIG);
		assert_int_equal(bad, cases[i].line);
		assert_null(ini.items);
	}
}

static const char sts_ok[] =
    "<AssumeRoleResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
    "<AssumeRoleResult><AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/r/s</Arn>"
    "</AssumedRoleUser><Credentials><AccessKeyId>ASIAEXAMPLE</AccessKeyId>"
    "<SecretAccessKey>secret+key/x</SecretAccessKey><SessionToken>tok&amp;en</SessionToken>"
    "<Expiration>2026-12-05T10:00:00.500Z</Expiration></Credentials></AssumeRoleResult>"
    "<ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></AssumeRoleResponse>";

static void sts_credentials_are_read(void **state)
{
	(void)state;
	aks_aws_creds c;
	assert_true(aks__aws_sts_parse_credentials(sts_ok, strlen(sts_ok), &c));
	assert_string_equal(c.key_id, "ASIAEXAMPLE");
	assert_string_equal(c.secret, "secret+key/x");
	assert_string_equal(c.token, "tok&en");
	assert_int_equal(c.expires_ms, aks_aws_parse_time("2026-12-05T10:00:00Z") + 500);
	aks_aws_creds copy;
	assert_true(aks_aws_creds_copy(&copy, &c));
	assert_string_equal(copy.token, "tok&en");
	aks_aws_creds_clear(&copy);
	aks_aws_creds_clear(&c);
	assert_null(c.key_id);

	/* incomplete, not XML, an entity that would reach outside: nothing */
	const char *bad[] = {
	    "<X><Credentials><AccessKeyId>A</AccessKeyId></Credentials></X>",
	    "not xml at all",
	    "<?xml version=\"1.0\"?><!DOCTYPE x [<!ENTITY e SYSTEM \"file:///etc/passwd\">]>"
	    "<X><Credentials><AccessKeyId>&e;</AccessKeyId><SecretAccessKey>s</SecretAccessKey>"
	    "<SessionToken>t</SessionToken><Expiration>2026-12-05T10:00:00Z</Expiration>"
	    "</Credentials></X>",
	    "",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (aks__aws_sts_parse_credentials(bad[i], strlen(bad[i]), &c)) {
			/* the entity is never expanded from the file system */
			assert_null(strstr(c.key_id, "root:"));
			aks_aws_creds_clear(&c);
		}
	}
}

static void errors_are_read_in_both_protocols(void **state)
{
	(void)state;
	aks_aws_fault f;
	const char *xml = "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
	                  "<Error><Type>Sender</Type><Code>SignatureDoesNotMatch</Code>"
	                  "<Message>The request signature we calculated does not match\n"
	                  "</Message></Error><RequestId>x</RequestId></ErrorResponse>";
	assert_true(aks_aws_xml_fault(403, xml, strlen(xml), &f));
	assert_string_equal(f.code, "SignatureDoesNotMatch");
	assert_string_equal(f.message, "The request signature we calculated does not match ");
	assert_false(aks_aws_xml_fault(502, "<html>bad gateway</html>", 24, &f));
	assert_string_equal(f.code, "HTTP 502");

	const char *json = "{\"__type\":\"com.amazonaws.ssm#InvalidInstanceId\","
	                   "\"message\":\"Instances not in a valid state\"}";
	aks_aws_json_fault(400, json, strlen(json), &f);
	assert_string_equal(f.code, "InvalidInstanceId");
	assert_string_equal(f.message, "Instances not in a valid state");
	json = "{\"__type\":\"UnrecognizedClientException:http://internal\",\"Message\":\"m\"}";
	aks_aws_json_fault(400, json, strlen(json), &f);
	assert_string_equal(f.code, "UnrecognizedClientException");
	assert_true(aks_aws_fault_is_auth(f.code));
	assert_false(aks_aws_fault_is_auth("InvalidInstanceId"));
	aks_aws_json_fault(503, "Service Unavailable", 19, &f);
	assert_string_equal(f.code, "HTTP 503");
	assert_string_equal(f.message, "Service Unavailable");
}

static void times_are_read(void **state)
{
	(void)state;
	assert_int_equal(aks_aws_parse_time("1970-01-01T00:00:01Z"), 1000);
	assert_int_equal(aks_aws_parse_time("1970-01-01T00:00:01.25Z"), 1250);
	assert_int_equal(aks_aws_parse_time("1970-01-01T00:01:00+00:00"), 60000);
	assert_int_equal(aks_aws_parse_time("1970-01-01T00:00:01"), -1); /* a zone is required */
	assert_int_equal(aks_aws_parse_time("yesterday"), -1);
	assert_int_equal(aks_aws_parse_time(NULL), -1);
}

static void session_names_are_sanitised_and_clamped(void **state)
{
	(void)state;
	char name[65];
	aks_aws_session_name("ak-sandbox-", "alice@example.com", name, sizeof(name));
	assert_string_equal(name, "ak-sandbox-alice@example.com");
	aks_aws_session_name("ak-sandbox-", "a b/c:d\xc3\xa9", name, sizeof(name));
	assert_string_equal(name, "ak-sandbox-a_b_c_d__");
	char longer[200];
	memset(longer, 'x', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	aks_aws_session_name("ak-sandbox-", longer, name, sizeof(name));
	assert_int_equal(strlen(name), 64);
}

static void heredoc_delimiter_never_collides(void **state)
{
	(void)state;
	char *s = ssm_python_script("print(1)");
	assert_string_equal(s, "python3 - <<'AK_SANDBOX_EOF'\nprint(1)\nAK_SANDBOX_EOF");
	free(s);
	/* a line that is the delimiter moves it; one that only contains it does not */
	s = ssm_python_script("x = 1\nAK_SANDBOX_EOF\nAK_SANDBOX_EOF_1\nprint('AK_SANDBOX_EOF_2')");
	assert_non_null(strstr(s, "<<'AK_SANDBOX_EOF_2'\n"));
	assert_true(strlen(s) > 17 && strcmp(s + strlen(s) - 17, "\nAK_SANDBOX_EOF_2") == 0);
	free(s);
}

static void run_as_is_quoted(void **state)
{
	(void)state;
	char *s = ssm_run_as_script("echo 'hi'; id", "app user");
	assert_string_equal(s, "'sudo' '-n' '-u' 'app user' 'sh' '-c' 'echo '\\''hi'\\''; id'");
	free(s);
	s = ssm_run_as_script("id", NULL);
	assert_string_equal(s, "id");
	free(s);
}

/* The measured script, run by a real sh: the sizes line first, then the outputs, and the
 * script's own status; a script's exit or heredoc stays inside its subshell. */
static void measured_script_says_the_sizes(void **state)
{
	(void)state;
	char *inner = ssm_python_script("import sys\nprint('x' * 5000)\nsys.stderr.write('e' * 7)\n"
	                                "sys.exit(4)");
	char *s = ssm_measured_script(inner);
	free(inner);
	char path[] = "/tmp/aks-measured-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, s, strlen(s)), (ssize_t)strlen(s));
	close(fd);
	free(s);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "sh %s 2>/dev/null", path);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	char buf[8192];
	size_t n = fread(buf, 1, sizeof(buf), p);
	int status = pclose(p);
	unlink(path);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 4);
	uint64_t out = 0, err = 0;
	size_t skip = 0;
	assert_true(ssm_sizes_parse(buf, n, &out, &err, &skip));
	assert_int_equal(out, 5001);
	assert_int_equal(err, 7);
	assert_int_equal(n - skip, 5001);

	/* not a sizes line: the output is the command's own */
	assert_true(ssm_sizes_parse("aks-ssm-sizes     12\n 3\nrest", 27, &out, &err, &skip));
	assert_int_equal(out, 12); /* a BSD wc's blanks */
	assert_int_equal(err, 3);
	assert_int_equal(skip, 24);
	assert_false(ssm_sizes_parse("hello\n", 6, &out, &err, &skip));
	assert_false(ssm_sizes_parse("aks-ssm-sizes 1\n", 16, &out, &err, &skip));
	assert_false(ssm_sizes_parse("aks-ssm-sizes 1 2\n", 18, &out, &err, &skip));
	assert_false(ssm_sizes_parse("aks-ssm-sizes 1\n2", 17, &out, &err, &skip));
	assert_false(
	    ssm_sizes_parse("aks-ssm-sizes 99999999999999999999999\n1\n", 40, &out, &err, &skip));
}

static void characters_are_counted_as_ssm_counts_them(void **state)
{
	(void)state;
	assert_int_equal(ssm_char_count("abc", 3), 3);
	assert_int_equal(ssm_char_count("\xc3\xa9\xe2\x82\xac", 5), 2);
	assert_int_equal(ssm_char_count("\xff", 1), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(ini_reads_the_aws_dialect),
	    cmocka_unit_test(ini_names_the_bad_line),
	    cmocka_unit_test(sts_credentials_are_read),
	    cmocka_unit_test(errors_are_read_in_both_protocols),
	    cmocka_unit_test(times_are_read),
	    cmocka_unit_test(session_names_are_sanitised_and_clamped),
	    cmocka_unit_test(heredoc_delimiter_never_collides),
	    cmocka_unit_test(run_as_is_quoted),
	    cmocka_unit_test(measured_script_says_the_sizes),
	    cmocka_unit_test(characters_are_counted_as_ssm_counts_them),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
