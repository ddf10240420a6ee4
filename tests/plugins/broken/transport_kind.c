/*
 * transport_kind.so - trips the loader's kind check: a valid descriptor of kind
 * AKS_PLUGIN_TRANSPORT, loaded where a provider is expected. Its ops point at a
 * versioned table that is not a provider table (the transport ops arrive in a
 * later ABI minor), so a loader that skipped the kind check would misread it.
 */
#include "broken.h"

struct transport_ops_placeholder {
	uint32_t struct_version;
	uint32_t struct_size;
};

static const struct transport_ops_placeholder transport_ops = {1, sizeof(transport_ops)};

static const aks_plugin_descriptor descriptor =
    BROKEN_DESCRIPTOR(AKS_DESCRIPTOR_VERSION, sizeof(aks_plugin_descriptor), AKS_ABI_MAJOR,
                      AKS_ABI_MINOR, AKS_PLUGIN_TRANSPORT, "transport_kind", "MIT", &transport_ops);

BROKEN_ENTRY(&descriptor);
