/*
 * null_entry.so - trips the loader's descriptor check: aks_plugin_entry exists
 * but returns NULL instead of a descriptor.
 */
#include "broken.h"

BROKEN_ENTRY(NULL);
