/*
 * plugins/ec2_ssm/ec2_ssm_script.c - the shell script a run sends through AWS-RunShellScript:
 * Python from a heredoc whose delimiter the code cannot end early, and the sudo line of a
 * principal's run_as. No I/O.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aks_shquote.h"
#include "ec2_ssm_internal.h"

/* Whether a line of code is exactly delim. */
static bool has_line(const char *code, const char *delim)
{
	size_t dl = strlen(delim);
	for (const char *p = code; p;) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		if (n == dl && memcmp(p, delim, dl) == 0)
			return true;
		p = nl ? nl + 1 : NULL;
	}
	return false;
}

char *ssm_python_script(const char *code)
{
	char delim[64];
	snprintf(delim, sizeof(delim), "%s", SSM_HEREDOC_DEFAULT);
	/* a line per candidate at most, so this ends */
	for (unsigned n = 1; has_line(code, delim); n++)
		snprintf(delim, sizeof(delim), "%s_%u", SSM_HEREDOC_DEFAULT, n);
	char *s = NULL;
	if (asprintf(&s, "python3 - <<'%s'\n%s\n%s", delim, code, delim) < 0)
		return NULL;
	return s;
}

char *ssm_run_as_script(const char *command, const char *run_as)
{
	if (!run_as)
		return strdup(command);
	const char *argv[] = {"sudo", "-n", "-u", run_as, "sh", "-c", command, NULL};
	return aks_shquote_argv(argv);
}

size_t ssm_char_count(const char *s, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		if (((unsigned char)s[i] & 0xC0) != 0x80) /* not a continuation byte */
			n++;
	return n;
}
