/*
 * plugins/common/wsresolve.c - a file tool's path as the sandbox resolves it
 * (aks_wsresolve.h).
 */
#include <string.h>

#include "aks_wspath.h"
#include "aks_wsresolve.h"

const char aks_wsresolve_script[] =
    "h=$(realpath -m -- \"$1\") && r=$(realpath -m -- \"$2\") || exit 1\n"
    "printf '%s\\n%s\\n' \"$h\" \"$r\"\n"
    "[ ! -e \"$r\" ] || [ -f \"$r\" ] || exit 3\n"
    "if [ \"${3:-}\" = mkdir ]; then\n"
    "  case \"$r\" in \"$h\"/*) mkdir -p -- \"${r%/*}\" 2>/dev/null ;; esac\n"
    "fi\n"
    "exit 0\n";

int aks_wsresolve_judge(const aks_host_api *host, const char *who, const char *root,
                        const char *path, char *output, int code, aks_error **err)
{
	/* two lines: the root as resolved, then the path */
	char *home = output ? output : "", *real = strchr(home, '\n');
	if (real)
		*real++ = '\0';
	size_t n = real ? strlen(real) : 0;
	if (n && real[n - 1] == '\n')
		real[n - 1] = '\0';
	char shown[AKS_CTR_SHOWN_BUF];
	const char *p =
	    aks_ctr_shown(aks_ctr_wspath_rel(path), AKS_CTR_SHOWN_MAX, shown, sizeof(shown));
	if (code == 3 && real && *real && aks_wspath_in_root(home, real))
		return host->error_set(err, AKS_EINVAL,
		                       "path '%s' is not a regular file (a directory, FIFO or "
		                       "device): the file tools read and write files only",
		                       p);
	if (code == 3 && real && *real)
		return host->error_set(err, AKS_EPOLICY,
		                       "path '%s' escapes %s (through a symbolic link)", p, root);
	if (code != 0 || !real || !*real || !*home)
		return host->error_set(err, AKS_EIO,
		                       "%s: cannot resolve path '%s' in the sandbox (realpath "
		                       "exited %d)",
		                       who, p, code);
	if (!aks_wspath_in_root(home, real))
		return host->error_set(err, AKS_EPOLICY,
		                       "path '%s' escapes %s (through a symbolic link)", p, root);
	return AKS_OK;
}
