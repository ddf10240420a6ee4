/*
 * core/plugin/host_api.h - the services table handed to plugins at init.
 */
#ifndef AKS_CORE_PLUGIN_HOST_API_H
#define AKS_CORE_PLUGIN_HOST_API_H

#include "internal.h"

const aks_host_api *aks__host_api(void);

#endif /* AKS_CORE_PLUGIN_HOST_API_H */
