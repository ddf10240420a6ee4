/*
 * core/util/cancel.h - cancellation as the host services see it.
 */
#ifndef AKS_CORE_UTIL_CANCEL_H
#define AKS_CORE_UTIL_CANCEL_H

#include "internal.h"

bool aks__call_cancelled(const aks_call *call);
int aks__call_cancel_fd(const aks_call *call);

#endif /* AKS_CORE_UTIL_CANCEL_H */
