/*
 * transport_kind.so - trips the loader's kind check: a valid transport plugin
 * (kind AKS_PLUGIN_TRANSPORT, every mandatory slot set, none meant to run),
 * loaded where a provider is expected. Its ops are not a provider table, so a
 * loader that skipped the kind check would misread them.
 */
#include <aksandbox/transport.h>

#include "broken.h"

static int t_init(const aks_host_api *host, const aks_config *config, aks_transport_impl **out,
                  aks_error **err)
{
	(void)host, (void)config, (void)out, (void)err;
	return AKS_ERROR;
}

static int t_send(aks_transport_impl *t, const char *queue, const aks_message *msg,
                  const aks_call *call, aks_error **err)
{
	(void)t, (void)queue, (void)msg, (void)call, (void)err;
	return AKS_ERROR;
}

static int t_open(aks_transport_impl *t, const char *queue, aks_consumer **out, aks_error **err)
{
	(void)t, (void)queue, (void)out, (void)err;
	return AKS_ERROR;
}

static int t_fetch(aks_consumer *c, aks_message **out, size_t max, size_t *n, int64_t wait_ms,
                   const aks_call *call, aks_error **err)
{
	(void)c, (void)out, (void)max, (void)n, (void)wait_ms, (void)call, (void)err;
	return AKS_ERROR;
}

static int t_settle(aks_consumer *c, aks_message *msg, aks_error **err)
{
	(void)c, (void)msg, (void)err;
	return AKS_ERROR;
}

static int t_nack(aks_consumer *c, aks_message *msg, double delay, aks_error **err)
{
	(void)c, (void)msg, (void)delay, (void)err;
	return AKS_ERROR;
}

static void t_close(aks_consumer *c)
{
	(void)c;
}

static const aks_transport_ops transport_ops = {
    .struct_version = AKS_TRANSPORT_OPS_VERSION,
    .struct_size = sizeof(aks_transport_ops),
    .init = t_init,
    .send = t_send,
    .consumer_open = t_open,
    .fetch = t_fetch,
    .ack = t_settle,
    .nack = t_nack,
    .consumer_close = t_close,
};

static const aks_plugin_descriptor descriptor =
    BROKEN_DESCRIPTOR(AKS_DESCRIPTOR_VERSION, sizeof(aks_plugin_descriptor), AKS_ABI_MAJOR,
                      AKS_ABI_MINOR, AKS_PLUGIN_TRANSPORT, "transport_kind", "MIT", &transport_ops);

BROKEN_ENTRY(&descriptor);
