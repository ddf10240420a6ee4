/*
 * core/store/memory_store.h - the built-in in_memory store ("in_memory", no config keys): records,
 * named locks and expiring records (put_expiring) in this process only. It is the response
 * store of the single-process test topology, paired with the in_memory transport (reference
 * §5.5, "check_store_pairing"); it can serve as a state store too, for tests. Internal API.
 */
#ifndef AKS_CORE_STORE_MEMORY_STORE_H
#define AKS_CORE_STORE_MEMORY_STORE_H

#include <aksandbox/store.h>

#include "internal.h"

/* Kind AKS_PLUGIN_STORE; ops is a full aks_store_ops, put_expiring included. */
extern const aks_plugin_descriptor aks__memory_store_descriptor;

#endif /* AKS_CORE_STORE_MEMORY_STORE_H */
