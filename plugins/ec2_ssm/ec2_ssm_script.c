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

#define SIZES_MARK "aks-ssm-sizes "

char *ssm_measured_script(const char *script)
{
	char *s = NULL;
	/* mktemp -d and a trap: nothing is left on the instance but after a kill */
	if (asprintf(&s,
	             "aks_t=$(mktemp -d) || { echo 'aksandbox: cannot make a temporary "
	             "directory on the instance' >&2; exit 125; }\n"
	             "trap 'rm -rf \"$aks_t\"' EXIT\n"
	             "(\n%s\n) >\"$aks_t/o\" 2>\"$aks_t/e\"\n"
	             "aks_rc=$?\n"
	             /* wc writes each count on a line of its own; no command substitution
	              * (each costs a process on the instance) */
	             "printf '" SIZES_MARK "'\n"
	             "wc -c <\"$aks_t/o\"\n"
	             "wc -c <\"$aks_t/e\"\n"
	             "cat \"$aks_t/o\"\n"
	             "cat \"$aks_t/e\" >&2\n"
	             "exit $aks_rc",
	             script) < 0)
		return NULL;
	return s;
}

/* A decimal count, with the blanks a BSD wc puts before it, then a line's end. */
static bool count_line(const char **p, const char *end, uint64_t *v)
{
	while (*p < end && (**p == ' ' || **p == '\t'))
		(*p)++;
	const char *digits = *p;
	uint64_t n = 0;
	for (; *p < end && **p >= '0' && **p <= '9'; (*p)++) {
		if (n > (UINT64_MAX - 9) / 10)
			return false;
		n = n * 10 + (uint64_t)(**p - '0');
	}
	if (*p == digits || *p >= end || **p != '\n')
		return false;
	(*p)++;
	*v = n;
	return true;
}

bool ssm_sizes_parse(const char *out, size_t len, uint64_t *out_bytes, uint64_t *err_bytes,
                     size_t *skip)
{
	size_t ml = strlen(SIZES_MARK);
	const char *p = out + ml, *end = out + (len < 96 ? len : 96);
	uint64_t o = 0, e = 0;
	if (len <= ml || memcmp(out, SIZES_MARK, ml) != 0 || !count_line(&p, end, &o) ||
	    !count_line(&p, end, &e))
		return false;
	*out_bytes = o;
	*err_bytes = e;
	*skip = (size_t)(p - out);
	return true;
}

size_t ssm_char_count(const char *s, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		if (((unsigned char)s[i] & 0xC0) != 0x80) /* not a continuation byte */
			n++;
	return n;
}
