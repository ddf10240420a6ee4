/*
 * plugins/bubblewrap/bw_files.c - upload_file and download_file.
 *
 * Paths are the agent's, resolved inside the workspace directory on this host by the shared
 * host-directory module (aks_hostdir.h): a result outside it is AKS_EPOLICY, and a symlink
 * swapped in between cannot lead outside either. The agent then writes or reads the file at
 * its path inside the sandbox (under the workspace's path there), confined like any of the
 * sandbox's programs; per call, the module does it from this host, beneath the directory.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <stdio.h>
#include <stdlib.h>

#include "aks_agent.h"
#include "aks_hostdir.h"
#include "bw_internal.h"

/* The file's path inside the sandbox; NULL when out of memory. */
static char *inside(const aks_sandbox_impl *sb, const char *rel)
{
	char *s;
	if (asprintf(&s, "%s%s%s", sb->prov->workspace, *rel ? "/" : "", rel) < 0)
		return NULL;
	return s;
}

int bw_upload_file(aks_sandbox_impl *sb, const char *path, const void *data, size_t len,
                   const aks_call *call, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	if (!path || (!data && len))
		return host->error_set(err, AKS_EINVAL, "upload_file: no path or no data");
	char *rel;
	int rc = aks_hostdir_prepare_upload(host, sb->dir, path, &rel, err);
	if (rc != AKS_OK)
		return rc;
	char *cpath = inside(sb, rel);
	free(rel);
	if (!cpath)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	rc = aks_agent_upload(sb->agent, path, cpath, data, len, call, err);
	free(cpath);
	return rc;
}

int bw_download_file(aks_sandbox_impl *sb, const char *path, const aks_call *call, aks_result *out,
                     aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	char *rel;
	int rc = aks_hostdir_prepare_download(host, sb->dir, path, &rel, err);
	if (rc != AKS_OK)
		return rc;
	char *cpath = inside(sb, rel);
	free(rel);
	if (!cpath)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	rc = aks_agent_download(sb->agent, path, cpath, call, out, err);
	free(cpath);
	return rc;
}
