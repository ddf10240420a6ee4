/*
 * aksandbox/version.h - the plugin ABI version.
 *
 * A plugin records the ABI it was built with in its descriptor. The host loads
 * it only when the majors are equal and the plugin's minor is not newer than
 * the host's. A major bump moves the plugin directory (plugins-<major>), so
 * generations can be installed side by side. See docs/abi.md.
 */
#ifndef AKSANDBOX_VERSION_H
#define AKSANDBOX_VERSION_H

#define AKS_ABI_MAJOR 1
#define AKS_ABI_MINOR 5

/*
 * The oldest host minor a plugin is built to load on. A plugin that needs nothing of the
 * later minors defines it (before it includes any aksandbox header, or with -D) to the
 * minor it targets, say 0: AKS_PLUGIN_DEFINE then records that minor, so hosts from it on
 * load the plugin, and the headers leave out what later minors added (in 1.1:
 * aks_call.labels and aks_provider_ops.list_sandboxes; in 1.2: aks_call.context and
 * aks_host_api.result_add_egress_refused; in 1.3: aks_call.idle_timeout; in 1.4:
 * aks_host_api.result_add_unseen; in 1.5: aks_transport_ops.depth), so the plugin
 * cannot use, by
 * mistake, what such a host does not have. Unset, it is AKS_ABI_MINOR: the plugin loads on
 * hosts of this SDK's minor and later. Hosts (programs that include aksandbox.h) always
 * use the whole ABI.
 */
#ifndef AKS_TARGET_ABI_MINOR
#define AKS_TARGET_ABI_MINOR AKS_ABI_MINOR
#endif
#if AKS_TARGET_ABI_MINOR < 0 || AKS_TARGET_ABI_MINOR > AKS_ABI_MINOR
#error "AKS_TARGET_ABI_MINOR must be a minor of this SDK's major: 0 to AKS_ABI_MINOR"
#endif

#endif /* AKSANDBOX_VERSION_H */
