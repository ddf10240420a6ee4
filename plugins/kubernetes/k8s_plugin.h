/*
 * plugins/kubernetes/k8s_plugin.h - TODO(agent module): remove. The old name of
 * k8s_internal.h, and the old names of aks_buf, for k8s_agent.c until its rewrite.
 */
#ifndef K8S_PLUGIN_H
#define K8S_PLUGIN_H

#include "k8s_internal.h"

typedef aks_buf k8s_buf;
static inline int k8s_buf_add(aks_buf *b, const void *data, size_t len)
{
	return aks__buf_append(b, data, len);
}
static inline void k8s_buf_free(aks_buf *b)
{
	aks__buf_free(b);
}

#endif /* K8S_PLUGIN_H */
