/*
 * plugins/common/aks_text.h - bytes from outside (a sandbox's stderr, a program's output,
 * a backend's message) made safe to print: what could steer a terminal or forge a log line
 * is escaped; and random bytes as hex, for tokens and ids. Shared by the core's logger and the
 * plugins (libc only; compiled into each).
 */
#ifndef AKS_COMMON_TEXT_H
#define AKS_COMMON_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Copies src[0..len) into dst (cap bytes, always NUL-terminated, cut whole at a character)
 * with C0 controls (newlines and tabs included), DEL, the C1 controls and every byte that
 * is not part of well-formed UTF-8 written as \xNN, and a backslash as \\. Printable ASCII
 * and well-formed UTF-8 pass unchanged. Returns the length written.
 */
size_t aks__text_printable(char *dst, size_t cap, const void *src, size_t len);

/* nbytes bytes from the kernel's random source as 2 * nbytes lowercase hex digits and a NUL
 * in out: a lock's owner token, a run's marker, an id nobody else picks. false when the kernel
 * gives none (out is then ""). */
bool aks__random_hex(char *out, size_t nbytes);

#endif /* AKS_COMMON_TEXT_H */
