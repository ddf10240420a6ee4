/*
 * plugins/common/aks_text.h - bytes from outside (a sandbox's stderr, a program's output,
 * a backend's message) made safe to print: what could steer a terminal or forge a log line
 * is escaped. Shared by the core's logger and the plugins (libc only; compiled into each).
 */
#ifndef AKS_COMMON_TEXT_H
#define AKS_COMMON_TEXT_H

#include <stddef.h>

/*
 * Copies src[0..len) into dst (cap bytes, always NUL-terminated, cut whole at a character)
 * with C0 controls (newlines and tabs included), DEL, the C1 controls and every byte that
 * is not part of well-formed UTF-8 written as \xNN, and a backslash as \\. Printable ASCII
 * and well-formed UTF-8 pass unchanged. Returns the length written.
 */
size_t aks__text_printable(char *dst, size_t cap, const void *src, size_t len);

#endif /* AKS_COMMON_TEXT_H */
