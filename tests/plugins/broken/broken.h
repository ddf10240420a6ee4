/*
 * broken.h - a minimal, otherwise valid provider shared by the deliberately
 * broken test plugins, so that each of them trips exactly one loader check.
 *
 * The operations are never meant to run: a loader that accepts one of these
 * plugins has a bug. They still behave sanely (capability errors) so that such
 * a bug shows up as a failed assertion rather than a crash.
 */
#ifndef AKS_TESTS_BROKEN_H
#define AKS_TESTS_BROKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

#include <aksandbox/plugin.h>
#include <aksandbox/provider.h>

/* Not every plugin uses every piece. */
#define BROKEN_UNUSED __attribute__((unused))

struct aks_provider_impl {
	const aks_host_api *host;
};

struct aks_sandbox_impl {
	int unused;
};

BROKEN_UNUSED static const char *const broken_languages[] = {"python", NULL};

BROKEN_UNUSED static const aks_capabilities broken_capabilities = {
    .struct_version = AKS_CAPABILITIES_VERSION,
    .struct_size = sizeof(aks_capabilities),
    .isolation = AKS_ISOLATION_NONE,
    .languages = broken_languages,
    .provisions = true,
};

BROKEN_UNUSED static int broken_init(const aks_host_api *host, const aks_config *config,
                                     aks_provider_impl **out, aks_error **err)
{
	aks_provider_impl *prov = calloc(1, sizeof(*prov));

	if (!prov)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	prov->host = host;
	*out = prov;
	return AKS_OK;
}

BROKEN_UNUSED static void broken_fini(aks_provider_impl *prov)
{
	free(prov);
}

BROKEN_UNUSED static int broken_create(aks_provider_impl *prov, const aks_call *call,
                                       aks_sandbox_impl **out, aks_error **err)
{
	return prov->host->error_set(err, AKS_EPROVISION, "a broken test plugin cannot create");
}

BROKEN_UNUSED static int broken_destroy(aks_provider_impl *prov, const char *sandbox_id,
                                        const aks_call *call, aks_error **err)
{
	return AKS_OK;
}

BROKEN_UNUSED static const char *broken_id(const aks_sandbox_impl *sb)
{
	return "broken";
}

BROKEN_UNUSED static int broken_execute_code(aks_sandbox_impl *sb, const char *code,
                                             const char *language, const aks_call *call,
                                             aks_result *out, aks_error **err)
{
	return AKS_ECAPABILITY;
}

BROKEN_UNUSED static void broken_close(aks_sandbox_impl *sb)
{
}

BROKEN_UNUSED static const aks_sandbox_ops broken_sandbox_ops = {
    .struct_version = AKS_SANDBOX_OPS_VERSION,
    .struct_size = sizeof(aks_sandbox_ops),
    .id = broken_id,
    .execute_code = broken_execute_code,
    .close = broken_close,
};

BROKEN_UNUSED static const aks_provider_ops broken_provider_ops = {
    .struct_version = AKS_PROVIDER_OPS_VERSION,
    .struct_size = sizeof(aks_provider_ops),
    .capabilities = &broken_capabilities,
    .init = broken_init,
    .fini = broken_fini,
    .create = broken_create,
    .destroy = broken_destroy,
    .sandbox = &broken_sandbox_ops,
};

/* A descriptor literal with every field given, for the plugins that need one
 * field wrong (AKS_PLUGIN_DEFINE always fills the right values). */
#define BROKEN_DESCRIPTOR(sv_, ss_, major_, minor_, kind_, name_, license_, ops_)                  \
	{                                                                                          \
		(sv_), (ss_), (major_), (minor_), (kind_), (name_), "1.0", (license_),             \
		    "deliberately broken test plugin", NULL, (ops_),                               \
		{                                                                                  \
			NULL, NULL, NULL, NULL                                                     \
		}                                                                                  \
	}

/* Exports aks_plugin_entry returning `desc_`. */
#define BROKEN_ENTRY(desc_)                                                                        \
	AKS_EXPORT const aks_plugin_descriptor *aks_plugin_entry(void);                            \
	AKS_EXPORT const aks_plugin_descriptor *aks_plugin_entry(void)                             \
	{                                                                                          \
		return (desc_);                                                                    \
	}                                                                                          \
	struct broken_entry_needs_a_semicolon_

#endif /* AKS_TESTS_BROKEN_H */
