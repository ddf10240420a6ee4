/*
 * agent/landlock.h - confines the agent, and everything it runs, to a set of paths with
 * Landlock (--landlock-ro, --landlock-rw: docs/agent-protocol.md, "Confining the agent").
 */
#ifndef AKS_AGENT_LANDLOCK_H
#define AKS_AGENT_LANDLOCK_H

#include <stddef.h>

/* The running kernel's Landlock ABI version (1 or more), or -errno when it has none:
 * -ENOSYS when Landlock is not built in, -EOPNOTSUPP when it is not enabled at boot. */
int agent_landlock_abi(void);
/* Why the kernel has no Landlock, for the -errno agent_landlock_abi returned. */
const char *agent_landlock_unavailable(int err);

/* Restricts the calling process, and what it starts from now on, to reading (and executing)
 * beneath each of ro[] and to everything beneath each of rw[]: every filesystem right the
 * kernel knows is handled, so whatever no rule allows is denied. 0, or -errno with
 * "<what failed>: <why>" in msg; on failure nothing may go on unconfined. */
int agent_landlock_apply(const char *const *ro, size_t nro, const char *const *rw, size_t nrw,
                         char *msg, size_t msglen);

#endif /* AKS_AGENT_LANDLOCK_H */
