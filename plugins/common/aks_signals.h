/*
 * plugins/common/aks_signals.h - giving a program about to be exec'd the default signal
 * actions.
 *
 * A handler is reset by exec, but an ignored signal stays ignored: a host that ignores
 * SIGPIPE or SIGTERM would hand that on to everything it runs, which then cannot be stopped
 * by the signal (and `yes | head` never ends). Shared by the per-call supervisor, the agent's
 * programs and the agent's own start, so that every path gives programs the same world.
 */
#ifndef AKS_SIGNALS_H
#define AKS_SIGNALS_H

/* Every signal's action to SIG_DFL (those libc keeps for itself are left as they are).
 * Async-signal-safe: for the child of a fork() in a multi-threaded process. */
void aks__signals_default_all(void);

#endif /* AKS_SIGNALS_H */
