/*
 * plugins/common/aks_wsresolve.h - a file tool's path as the sandbox itself resolves it, for
 * the providers whose file transfers go through a remote service that follows links (e2b's
 * envd, daytona's toolbox): the path, by the workspace rule (aks_wspath.h) below root, must
 * still be below root once its links are followed in the sandbox, and name a regular file
 * (or nothing yet): a FIFO, a directory or a device is refused before any transfer, which
 * could block on it. Part of libaks-util.
 *
 * The check and the transfer are two requests, so a program of the sandbox's own that swaps
 * a link between them can win that race, and reach what it could read and write itself
 * anyway: the sandbox is the boundary.
 */
#ifndef AKS_WSRESOLVE_H
#define AKS_WSRESOLVE_H

#include <aksandbox/plugin.h>

/*
 * The shell script to run in the sandbox as
 *   sh -c SCRIPT resolve ROOT ABS [mkdir]
 * ("resolve" is $0). It prints the root and ABS as resolved (realpath -m: links followed,
 * missing parts kept), one a line; with "mkdir" it also makes ABS's parent directories when
 * they stay below the root (a write's). Exit 0; 3 when ABS names something that is not a
 * regular file; else realpath failed.
 */
extern const char aks_wsresolve_script[];

/*
 * Judges what the script printed (output, NUL-terminated; modified) and its exit code for
 * the caller's path (as given, for messages): AKS_OK; AKS_EPOLICY "path 'P' escapes ROOT
 * (through a symbolic link)"; AKS_EINVAL "path 'P' is not a regular file ..."; AKS_EIO
 * "<who>: cannot resolve path 'P' in the sandbox ...".
 */
int aks_wsresolve_judge(const aks_host_api *host, const char *who, const char *root,
                        const char *path, char *output, int code, aks_error **err);

#endif /* AKS_WSRESOLVE_H */
