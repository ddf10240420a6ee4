/*
 * plugins/common/wspath.c - the reference's workspace path rule, under any root; see
 * aks_wspath.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aks_wspath.h"

const char *aks_ctr_wspath_rel(const char *path)
{
	while (*path == '/')
		path++;
	return path;
}

bool aks_wspath_in_root(const char *root, const char *p)
{
	size_t n = strlen(root);
	return p && strncmp(p, root, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

bool aks_ctr_in_workspace(const char *p)
{
	return aks_wspath_in_root(AKS_CTR_WORKSPACE, p);
}

/* The most bytes a path may have below root "/". */
static size_t rel_max(const char *root)
{
	return AKS_CTR_PATH_MAX - strlen(root) - 1;
}

/* The length of the longest name (between slashes) in rel. */
static size_t longest_name(const char *rel)
{
	size_t longest = 0;
	for (const char *p = rel; *p;) {
		size_t n = strcspn(p, "/");
		if (n > longest)
			longest = n;
		p += n;
		p += strspn(p, "/");
	}
	return longest;
}

const char *aks_ctr_shown(const char *s, size_t max, char *buf, size_t len)
{
	size_t n = strlen(s);
	if (n <= max || len < max + 4)
		return n <= max ? s : "...";
	n = max;
	while (n && ((unsigned char)s[n] & 0xC0) == 0x80) /* s[n] continues a character */
		n--;
	memcpy(buf, s, n);
	memcpy(buf + n, "...", 4);
	return buf;
}

const char *aks_wspath_why(const char *root, int rc, const char *path, char *buf, size_t len)
{
	char shown[AKS_CTR_SHOWN_BUF];
	const char *rel = path ? aks_ctr_wspath_rel(path) : "";
	const char *p = aks_ctr_shown(rel, AKS_CTR_SHOWN_MAX, shown, sizeof(shown));
	if (rc == AKS_EPOLICY)
		snprintf(buf, len, "path '%s' escapes %s", p, root);
	else if (rc == AKS_ELIMIT && strlen(rel) > rel_max(root))
		snprintf(buf, len,
		         "path '%s' is %zu bytes: a sandbox path has at most %zu below %s/", p,
		         strlen(rel), rel_max(root), root);
	else if (rc == AKS_ELIMIT)
		snprintf(buf, len, "path '%s' has a name of %zu bytes: at most %d", p,
		         longest_name(rel), AKS_CTR_NAME_MAX);
	else
		snprintf(buf, len, "%s", rc == AKS_EINVAL ? "no path" : "out of memory");
	return buf;
}

const char *aks_ctr_wspath_why(int rc, const char *path, char *buf, size_t len)
{
	return aks_wspath_why(AKS_CTR_WORKSPACE, rc, path, buf, len);
}

int aks_wspath(const char *root, const char *path, char **out)
{
	*out = NULL;
	if (!path)
		return AKS_EINVAL;
	/* root "/" + path, normalised like posixpath.normpath */
	path = aks_ctr_wspath_rel(path);
	size_t n = strlen(path), rn = strlen(root);
	/* bounded before anything: the result is at most as long, and has no other names */
	if (n > rel_max(root) || longest_name(path) > AKS_CTR_NAME_MAX)
		return AKS_ELIMIT;
	char *joined = malloc(rn + n + 2);
	char *res = malloc(rn + n + 3);
	if (!joined || !res) {
		free(joined);
		free(res);
		return AKS_ENOMEM;
	}
	sprintf(joined, "%s/%s", root, path);
	size_t len = 0; /* res holds "/a/b" without a trailing '/' ("" is the root) */
	for (char *save = NULL, *c = strtok_r(joined, "/", &save); c;
	     c = strtok_r(NULL, "/", &save)) {
		if (strcmp(c, ".") == 0)
			continue;
		if (strcmp(c, "..") == 0) {
			while (len && res[len - 1] != '/')
				len--;
			if (len)
				len--;
			continue;
		}
		res[len++] = '/';
		size_t cl = strlen(c);
		memcpy(res + len, c, cl);
		len += cl;
	}
	res[len] = '\0';
	free(joined);
	if (!aks_wspath_in_root(root, res)) {
		free(res);
		return AKS_EPOLICY;
	}
	*out = res;
	return AKS_OK;
}

int aks_ctr_wspath(const char *path, char **out)
{
	return aks_wspath(AKS_CTR_WORKSPACE, path, out);
}
