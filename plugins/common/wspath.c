/*
 * plugins/common/wspath.c - the reference's workspace path rule; see
 * aks_container.h.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aks_container.h"

const char *aks_ctr_wspath_rel(const char *path)
{
	while (*path == '/')
		path++;
	return path;
}

bool aks_ctr_in_workspace(const char *p)
{
	return p && (strcmp(p, AKS_CTR_WORKSPACE) == 0 ||
	             strncmp(p, AKS_CTR_WORKSPACE "/", sizeof(AKS_CTR_WORKSPACE)) == 0);
}

int aks_ctr_wspath(const char *path, char **out)
{
	*out = NULL;
	if (!path)
		return AKS_EINVAL;
	/* AKS_CTR_WORKSPACE "/" + path, normalised like posixpath.normpath */
	path = aks_ctr_wspath_rel(path);
	size_t n = strlen(path);
	char *joined = malloc(sizeof(AKS_CTR_WORKSPACE "/") + n);
	char *res = malloc(sizeof(AKS_CTR_WORKSPACE "/") + n + 1);
	if (!joined || !res) {
		free(joined);
		free(res);
		return AKS_ENOMEM;
	}
	sprintf(joined, AKS_CTR_WORKSPACE "/%s", path);
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
	if (!aks_ctr_in_workspace(res)) {
		free(res);
		return AKS_EPOLICY;
	}
	*out = res;
	return AKS_OK;
}
