/*
 * plugins/common/aks_killscript.h - the script that kills, inside a sandbox, every process
 * one run started, for the providers that run programs through a remote API with no
 * process-tree kill of its own (docker and kubernetes without aksandbox-agent, e2b). Part of
 * libaks-util (kill_script.c): a string.
 */
#ifndef AKS_KILLSCRIPT_H
#define AKS_KILLSCRIPT_H

/* Each exec runs with AKS_CTR_MARKER_VAR=<32 random hex digits> in its
 * environment; `/bin/sh -c aks_ctr_kill_script sh <marker>` then kills every
 * process that carries it, retrying while any remain (exit 0), and gives up
 * with exit 1 after 200 sweeps. */
#define AKS_CTR_MARKER_VAR "AKS_EXEC_ID"
extern const char aks_ctr_kill_script[];

#endif /* AKS_KILLSCRIPT_H */
