/*
 * Fuzz target: what libaks-aws reads from outside (plugins/common/aws_*.c): STS's XML
 * answers (credentials and errors), the JSON protocol's error answers, AWS's times, and the
 * shared credentials and config files' ini dialect; and the sizes ec2_ssm reads at the start
 * of a command's output (plugins/ec2_ssm/ec2_ssm_script.c). Checks: nothing is read past what was
 * given (the sanitizers), credentials read are complete or nothing, a refused ini names its
 * line and keeps nothing, and every error code and message is printable.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "aws_internal.h"
#include "ec2_ssm_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

static void check_printable(const char *s)
{
	for (; *s; s++)
		CHECK((unsigned char)*s >= 0x20 && *s != 0x7f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	aks_aws_creds c;
	if (aks__aws_sts_parse_credentials(text, size, &c)) {
		CHECK(c.key_id && *c.key_id && c.secret && *c.secret && c.token &&
		      c.expires_ms > 0);
		aks_aws_creds_clear(&c);
	}
	aks_aws_fault f;
	aks_aws_xml_fault(400, text, size, &f);
	CHECK(f.code[0]);
	aks_aws_json_fault(400, text, size, &f);
	CHECK(f.code[0]);
	check_printable(f.code);
	check_printable(f.message);

	aks_aws_ini ini;
	int bad = 0, rc = aks__aws_ini_parse(text, size, &ini, &bad);
	CHECK(rc == AKS_OK || rc == AKS_ECONFIG || rc == AKS_ENOMEM);
	if (rc == AKS_OK) {
		for (size_t i = 0; i < ini.n; i++)
			CHECK(aks__aws_ini_get(&ini, ini.items[i * 3], ini.items[i * 3 + 1]) !=
			      NULL);
		aks__aws_ini_free(&ini);
	} else {
		CHECK(ini.items == NULL && (rc != AKS_ECONFIG || bad > 0));
	}

	uint64_t out_bytes = 0, err_bytes = 0;
	size_t skip = 0;
	if (ssm_sizes_parse(text, size, &out_bytes, &err_bytes, &skip))
		CHECK(skip > 0 && skip <= size && text[skip - 1] == '\n');
	CHECK(ssm_char_count(text, size) <= size);

	char *s = malloc(size + 1);
	if (s) {
		memcpy(s, data, size);
		s[size] = '\0';
		int64_t t = aks_aws_parse_time(s);
		CHECK(t >= -1 || t < -1); /* any value; the sanitizers judge the reading */
		free(s);
	}
	return 0;
}
