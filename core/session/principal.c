/*
 * core/session/principal.c - principals the host owns, and principal resolvers: the
 * built-in agent resolver and resolver plugins.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "config/block.h"
#include "internal.h"
#include "plugin/host_api.h"
#include "util/sized.h"

/* The owned form of an aks_principal: the public struct points into it. */
struct aks_principal_builder {
	aks_principal pub;
	bool set;
	char *subject;
	char **groups; /* NULL-terminated */
	size_t group_count;
	char **credentials; /* NULL-terminated key, value pairs */
	size_t credential_count;
};

static const char *const none[] = {NULL};

static aks_resolved_principal *principal_new(void)
{
	aks_resolved_principal *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pub.struct_version = AKS_PRINCIPAL_VERSION;
	p->pub.struct_size = sizeof(p->pub);
	p->pub.mode = AKS_IDENTITY_AGENT;
	p->pub.subject = "";
	p->pub.groups = none;
	p->pub.credentials = none;
	return p;
}

AKS_EXPORT void aks_resolved_principal_free(aks_resolved_principal *p)
{
	if (!p)
		return;
	free(p->subject);
	for (size_t i = 0; i < p->group_count; i++)
		free(p->groups[i]);
	free(p->groups);
	for (size_t i = 0; i < p->credential_count; i++)
		free(p->credentials[i]);
	free(p->credentials);
	free(p);
}

AKS_EXPORT const aks_principal *aks_resolved_principal_get(const aks_resolved_principal *p)
{
	return p ? &p->pub : NULL;
}

int aks__principal_set(aks_principal_builder *b, int mode, const char *subject)
{
	if (!b || !subject || (mode != AKS_IDENTITY_AGENT && mode != AKS_IDENTITY_USER))
		return AKS_EINVAL;
	char *copy = strdup(subject);
	if (!copy)
		return AKS_ENOMEM;
	free(b->subject);
	b->subject = copy;
	b->pub.subject = copy;
	b->pub.mode = (uint32_t)mode;
	b->set = true;
	return AKS_OK;
}

/* Appends strings to a NULL-terminated array. */
static int push(char ***v, size_t *count, const char *a, const char *b)
{
	size_t add = b ? 2 : 1;
	char **grown = realloc(*v, (*count + add + 1) * sizeof(**v));
	if (!grown)
		return AKS_ENOMEM;
	*v = grown;
	grown[*count] = strdup(a);
	grown[*count + 1] = b ? strdup(b) : NULL;
	if (!grown[*count] || (b && !grown[*count + 1])) {
		free(grown[*count]);
		free(b ? grown[*count + 1] : NULL);
		grown[*count] = NULL;
		return AKS_ENOMEM;
	}
	*count += add;
	grown[*count] = NULL;
	return AKS_OK;
}

int aks__principal_add_group(aks_principal_builder *b, const char *group)
{
	if (!b || !group)
		return AKS_EINVAL;
	int rc = push(&b->groups, &b->group_count, group, NULL);
	if (rc == AKS_OK)
		b->pub.groups = (const char *const *)b->groups;
	return rc;
}

int aks__principal_add_credential(aks_principal_builder *b, const char *key, const char *value)
{
	if (!b || !key || !value)
		return AKS_EINVAL;
	int rc = push(&b->credentials, &b->credential_count, key, value);
	if (rc == AKS_OK)
		b->pub.credentials = (const char *const *)b->credentials;
	return rc;
}

/* ---- resolvers ---- */

struct aks_resolver {
	const char *name;            /* "agent" or the plugin's */
	const aks_resolver_ops *ops; /* NULL for the built-in agent resolver */
	aks_resolver_impl *impl;
	aks_config *defaults;
};

static void request_defaults(aks_resolve_request *request, const char *conversation_id,
                             const char *agent, const char *const *attributes)
{
	memset(request, 0, sizeof(*request));
	request->struct_version = AKS_RESOLVE_REQUEST_VERSION;
	request->struct_size = sizeof(*request);
	request->conversation_id = conversation_id ? conversation_id : "";
	request->agent = agent && *agent ? agent : "agent";
	request->attributes = attributes ? attributes : none;
}

AKS_EXPORT void aks_resolve_request_init_sized(aks_resolve_request *request, size_t size,
                                               const char *conversation_id, const char *agent,
                                               const char *const *attributes)
{
	aks_resolve_request full;
	request_defaults(&full, conversation_id, agent, attributes);
	aks__sized_write(request, size, &full, sizeof(full));
}

AKS_EXPORT int aks_resolver_open_agent(aks_resolver **out, aks_error **err)
{
	aks_resolver *r = calloc(1, sizeof(*r));
	if (!r)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	r->name = "agent";
	*out = r;
	return AKS_OK;
}

AKS_EXPORT int aks_resolver_open(const aks_plugin *plugin, const aks_config *config,
                                 aks_resolver **out, aks_error **err)
{
	const aks_plugin_descriptor *d = aks_plugin_get_descriptor(plugin);
	if (!d || !out)
		return aks__error_set(err, AKS_EINVAL, "aks_resolver_open: no plugin");
	if (d->kind != AKS_PLUGIN_RESOLVER)
		return aks__error_set(err, AKS_EPLUGIN, "plugin '%s' is not a principal resolver",
		                      d->name);
	aks_resolver *r = calloc(1, sizeof(*r));
	if (!r)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	r->name = d->name;
	r->ops = d->ops;
	int rc = AKS_OK;
	if (!config) {
		rc = aks__config_build(d, NULL, d->name, &r->defaults, err);
		config = r->defaults;
	}
	if (rc == AKS_OK)
		rc = r->ops->init(aks__host_api(), config, &r->impl, err);
	if (rc < 0 && err && !*err)
		aks__error_set(err, rc, "principal resolver '%s' failed to start", d->name);
	if (rc < 0) {
		aks_config_free(r->defaults);
		free(r);
		return rc;
	}
	*out = r;
	return AKS_OK;
}

AKS_EXPORT int aks_resolver_resolve(aks_resolver *resolver, const aks_resolve_request *request,
                                    aks_resolved_principal **out, aks_error **err)
{
	if (!resolver || !request || !out)
		return aks__error_set(err, AKS_EINVAL, "aks_resolver_resolve: missing argument");
	/* The resolver reads every field of our layout; the caller's may be an older one. */
	aks_resolve_request full;
	request_defaults(&full, NULL, NULL, NULL);
	int rc = aks__sized_read(&full, sizeof(full), request, "aks_resolve_request", err);
	if (rc < 0)
		return rc;
	request = &full;
	aks_resolved_principal *p = principal_new();
	if (!p)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	if (!resolver->ops) {
		rc = aks__principal_set(p, AKS_IDENTITY_AGENT, request->agent);
		if (rc < 0)
			aks__error_set(err, rc, "out of memory");
	} else {
		rc = resolver->ops->resolve(resolver->impl, request, p, err);
		if (rc == AKS_OK && !p->set)
			rc = aks__error_set(err, AKS_EPOLICY,
			                    "principal resolver '%s' returned no principal",
			                    resolver->name);
		if (rc < 0 && err && !*err)
			aks__error_set(err, rc, "principal resolver '%s' failed: %s",
			               resolver->name, aks_strerror(rc));
	}
	if (rc < 0) {
		aks_resolved_principal_free(p);
		return rc > 0 ? AKS_ERROR : rc;
	}
	*out = p;
	return AKS_OK;
}

AKS_EXPORT void aks_resolver_close(aks_resolver *resolver)
{
	if (!resolver)
		return;
	if (resolver->ops && resolver->ops->fini)
		resolver->ops->fini(resolver->impl);
	aks_config_free(resolver->defaults);
	free(resolver);
}
