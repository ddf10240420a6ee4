/*
 * plugins/common/aws_profile.c - the shared credentials and config files
 * (~/.aws/credentials, ~/.aws/config) read as the AWS SDKs read them.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aks_file.h"
#include "aws_internal.h"

/* A shared file larger than this is refused: they hold a few profiles. */
#define INI_MAX (1u << 20)

static const char *trim(char *s, size_t *len)
{
	while (*len && isspace((unsigned char)*s))
		s++, (*len)--;
	while (*len && isspace((unsigned char)s[*len - 1]))
		(*len)--;
	return s;
}

static bool add(aks_aws_ini *ini, const char *section, const char *key, size_t key_len,
                const char *value, size_t value_len)
{
	char **t = realloc(ini->items, (ini->n + 1) * 3 * sizeof(*t));
	if (!t)
		return false;
	ini->items = t;
	char **e = t + ini->n * 3;
	e[0] = strdup(section);
	e[1] = strndup(key, key_len);
	e[2] = strndup(value, value_len);
	if (!e[0] || !e[1] || !e[2]) {
		free(e[0]);
		free(e[1]);
		free(e[2]);
		return false;
	}
	ini->n++;
	return true;
}

int aks__aws_ini_parse(const char *text, size_t len, aks_aws_ini *ini, int *bad_line)
{
	memset(ini, 0, sizeof(*ini));
	*bad_line = 0;
	char *section = strdup("");
	if (!section)
		return AKS_ENOMEM;
	int line_no = 0, rc = AKS_OK;
	const char *p = text, *end = text + len;
	while (p < end && rc == AKS_OK) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		char *line = strndup(p, n);
		p = nl ? nl + 1 : end;
		line_no++;
		if (!line) {
			rc = AKS_ENOMEM;
			break;
		}
		bool indented = n && (line[0] == ' ' || line[0] == '\t');
		size_t l = strlen(line); /* a NUL byte ends the line */
		const char *s = trim(line, &l);
		if (!l || s[0] == '#' || s[0] == ';' || indented) {
			/* empty, a comment, or a sub-setting of the key above (s3 = ... its lines)
			 */
		} else if (s[0] == '[') {
			if (s[l - 1] != ']' || l < 3) {
				rc = AKS_ECONFIG;
			} else {
				size_t sl = l - 2;
				const char *name = trim((char *)s + 1, &sl);
				char *copy = sl ? strndup(name, sl) : NULL;
				if (!copy) {
					rc = sl ? AKS_ENOMEM : AKS_ECONFIG;
				} else {
					free(section);
					section = copy;
				}
			}
		} else {
			const char *eq = memchr(s, '=', l);
			if (!eq || eq == s) {
				rc = AKS_ECONFIG;
			} else {
				size_t kl = (size_t)(eq - s), vl = l - kl - 1;
				const char *k = trim((char *)s, &kl);
				const char *v = trim((char *)eq + 1, &vl);
				if (!kl)
					rc = AKS_ECONFIG;
				else if (!add(ini, section, k, kl, v, vl))
					rc = AKS_ENOMEM;
			}
		}
		if (rc == AKS_ECONFIG)
			*bad_line = line_no;
		memset(line, 0, n); /* it may have held a secret key */
		free(line);
	}
	free(section);
	if (rc != AKS_OK)
		aks__aws_ini_free(ini);
	return rc;
}

int aks__aws_ini_load(const char *path, aks_aws_ini *ini, int *bad_line)
{
	memset(ini, 0, sizeof(*ini));
	*bad_line = 0;
	size_t len = 0;
	char *data = aks__file_read(path, INI_MAX, &len);
	if (!data)
		return errno == ENOENT ? AKS_ENOTFOUND : errno == ENOMEM ? AKS_ENOMEM : AKS_EIO;
	int rc = aks__aws_ini_parse(data, len, ini, bad_line);
	memset(data, 0, len);
	free(data);
	return rc;
}

const char *aks__aws_ini_get(const aks_aws_ini *ini, const char *section, const char *key)
{
	const char *found = NULL;
	for (size_t i = 0; i < ini->n; i++) /* the last setting of a key wins, as in the SDKs */
		if (strcmp(ini->items[i * 3], section) == 0 &&
		    strcmp(ini->items[i * 3 + 1], key) == 0)
			found = ini->items[i * 3 + 2];
	return found;
}

bool aks__aws_ini_has(const aks_aws_ini *ini, const char *section)
{
	for (size_t i = 0; i < ini->n; i++)
		if (strcmp(ini->items[i * 3], section) == 0)
			return true;
	return false;
}

void aks__aws_ini_free(aks_aws_ini *ini)
{
	for (size_t i = 0; i < ini->n * 3; i++) {
		memset(ini->items[i], 0, strlen(ini->items[i]));
		free(ini->items[i]);
	}
	free(ini->items);
	memset(ini, 0, sizeof(*ini));
}

void aks__aws_config_section(const char *profile, char *buf, size_t size)
{
	if (strcmp(profile, "default") == 0)
		snprintf(buf, size, "default");
	else
		snprintf(buf, size, "profile %s", profile);
}
