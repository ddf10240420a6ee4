/*
 * plugins/local_subprocess/ls_files.c - upload_file and download_file.
 *
 * Paths are the agent's, resolved inside the sandbox directory by the shared host-directory
 * module (aks_hostdir.h): a result outside it is AKS_EPOLICY, and a symlink swapped in
 * between cannot lead outside either. The checks are made here; the agent (or, per call,
 * the module) then writes or reads the file.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdio.h>
#include <stdlib.h>

#include "aks_agent.h"
#include "aks_hostdir.h"
#include "ls_internal.h"

/* dir/rel, or dir when rel is empty; NULL when out of memory. */
static char *join(const char *dir, const char *rel)
{
	char *s;
	if (asprintf(&s, "%s%s%s", dir, *rel ? "/" : "", rel) < 0)
		return NULL;
	return s;
}

int ls_upload_file(aks_sandbox_impl *sb, const char *path, const void *data, size_t len,
                   const aks_call *call, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	if (!path || (!data && len))
		return host->error_set(err, AKS_EINVAL, "upload_file: no path or no data");
	char *rel;
	int rc = aks_hostdir_prepare_upload(host, sb->dir, path, &rel, err);
	if (rc != AKS_OK)
		return rc;
	char *abs = join(sb->dir, rel);
	free(rel);
	if (!abs)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	rc = aks_agent_upload(sb->agent, path, abs, data, len, call, err);
	free(abs);
	return rc;
}

int ls_download_file(aks_sandbox_impl *sb, const char *path, const aks_call *call, aks_result *out,
                     aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	char *rel;
	int rc = aks_hostdir_prepare_download(host, sb->dir, path, &rel, err);
	if (rc != AKS_OK)
		return rc;
	char *abs = join(sb->dir, rel);
	free(rel);
	if (!abs)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	rc = aks_agent_download(sb->agent, path, abs, call, out, err);
	free(abs);
	return rc;
}
