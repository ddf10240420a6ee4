/*
 * plugins/common/aks_shquote.h - words quoted for a POSIX shell, for the providers whose
 * service runs a command line rather than an argument vector (daytona's toolbox sessions;
 * SSM's RunShellScript): each word in single quotes, a quote in it closed, escaped and
 * reopened, so no shell ever reads its content as syntax. Part of libaks-util: libc only.
 */
#ifndef AKS_SHQUOTE_H
#define AKS_SHQUOTE_H

/* The words of argv (NULL-terminated), each quoted, separated by one space; malloc'd, NULL
 * when out of memory. An empty argv gives "". */
char *aks_shquote_argv(const char *const *argv);

#endif /* AKS_SHQUOTE_H */
