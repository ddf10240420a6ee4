/*
 * Mixed_Case.so - a valid provider whose name breaks the name rule (lowercase letters, digits
 * and '_'): its file name matches, so only the rule itself can refuse it, by path too.
 */
#include "broken.h"

AKS_PLUGIN_DEFINE(AKS_PLUGIN_PROVIDER, "Mixed_Case", "1.0", "MIT",
                  "deliberately broken test plugin", NULL, &broken_provider_ops);
