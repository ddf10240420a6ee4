/*
 * plugins/kubernetes/k8s_util.c - errors without the host and whole-file
 * reads, shared by every layer of the plugin, and the path rule of
 * plugins/common/libaks-container, worded here.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aks_container.h"
#include "k8s_pure.h"

int k8s_err_set(k8s_err *e, int code, const char *fmt, ...)
{
	if (e && e->code == AKS_OK) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
		va_end(ap);
		e->code = code;
	}
	return code;
}

int k8s_safe_path(const char *path, char **out, k8s_err *e)
{
	int rc = aks_ctr_wspath(path, out);
	char why[AKS_CTR_WSPATH_WHY_BUF];
	if (rc != AKS_OK)
		return k8s_err_set(e, rc, "%s", aks_ctr_wspath_why(rc, path, why, sizeof(why)));
	return AKS_OK;
}
