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
#define AKS_ABI_MINOR 1

#endif /* AKSANDBOX_VERSION_H */
