/*
 * plugins/common/pip_argv.c - the command line of install_packages; see
 * aks_container.h.
 */
#include <stdlib.h>

#include "aks_container.h"

int aks_ctr_pip_argv(const char *python, const char *const *packages, const char ***argv)
{
	*argv = NULL;
	size_t n = 0;
	while (packages && packages[n])
		n++;
	if (!n)
		return AKS_EINVAL;
	const char **v = calloc(n + 5, sizeof(*v));
	if (!v)
		return AKS_ENOMEM;
	v[0] = python;
	v[1] = "-m";
	v[2] = "pip";
	v[3] = "install";
	for (size_t i = 0; i < n; i++)
		v[4 + i] = packages[i];
	*argv = v;
	return AKS_OK;
}
