/*
 * core/config/provider_blocks.c - the keys of a profile that are provider blocks, and the
 * blocks it holds for another type than its own.
 *
 * Operators keep one config.yaml with a block per backend (`docker:` and
 * `local_subprocess:`) and pick the backend per deployment with
 * AK_SANDBOX__TYPE. As in the original, the blocks the type does not select are
 * accepted and do nothing. Unlike the original, each is still checked against
 * its own plugin's schema when that plugin is installed, so a typo in a dormant
 * block is reported (as a warning, with its place) before the deployment that
 * would switch to it; `aksandbox check` lists them as inactive.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/block.h"
#include "config/settings.h"
#include "plugin/loader.h"
#include "util/util.h"

static const char *const builtin_provider_names[] = {AKS_BUILTIN_PROVIDER_BLOCKS, NULL};

bool aks__is_builtin_provider(const char *name)
{
	for (size_t i = 0; builtin_provider_names[i]; i++)
		if (strcmp(builtin_provider_names[i], name) == 0)
			return true;
	return false;
}

bool aks__is_provider_block_name(const char *key)
{
	return aks__is_builtin_provider(key) || aks__plugin_installed(key);
}

int aks__settings_warn(aks_settings *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *msg = NULL;
	int n = vasprintf(&msg, fmt, ap);
	va_end(ap);
	if (n < 0)
		return AKS_ENOMEM;
	aks__log(AKS_LOG_WARNING, "config", "%s", msg);
	char **grown = realloc(s->warnings, (s->warning_count + 2) * sizeof(*grown));
	if (!grown) {
		free(msg);
		return AKS_ENOMEM;
	}
	s->warnings = grown;
	grown[s->warning_count++] = msg;
	grown[s->warning_count] = NULL;
	return AKS_OK;
}

/* Fills b for the block `node` (its key `key`) at `path`.name. */
static int check_block(aks_settings *s, aks_inactive_block *b, const aks_node *key,
                       const aks_node *node, const char *path, bool load, aks_error **err)
{
	if (!load) {
		b->state = AKS_BLOCK_UNCHECKED;
		b->detail = strdup("the sandbox is disabled: no plugin is loaded");
		return b->detail ? AKS_OK : aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	const aks_plugin *plugin = NULL;
	aks_error *e = NULL;
	if (aks_plugin_load(b->name, 0, &plugin, &e) < 0) {
		/* Not installed here (another deployment's backend): nothing to check it with.
		 * Installed but unloadable: the deployment that switches to it would fail. */
		b->state = AKS_BLOCK_UNCHECKED;
		b->detail = strdup(aks_error_message(e));
		aks_error_free(e);
		if (!b->detail)
			return aks__error_set(err, AKS_ENOMEM, "out of memory");
		char pos[AKS_NODE_WHERE_SIZE];
		if (aks__plugin_installed(b->name) &&
		    aks__settings_warn(s, "%s: %s.%s: an inactive block, not checked: %s",
		                       aks__node_where(key, pos, sizeof(pos)), path, b->name,
		                       b->detail) < 0)
			return aks__error_set(err, AKS_ENOMEM, "out of memory");
		return AKS_OK;
	}
	const aks_plugin_descriptor *d = aks_plugin_get_descriptor(plugin);
	if (d->kind != AKS_PLUGIN_PROVIDER) {
		/* `redis:` in a profile: no type can ever select it, so it is no inactive block
		 * but a mistake. */
		char pos[AKS_NODE_WHERE_SIZE];
		return aks__error_set(err, AKS_ECONFIG,
		                      "%s: %s.%s: '%s' is a %s plugin (%s), not a provider: no "
		                      "profile type can use this block",
		                      aks__node_where(key, pos, sizeof(pos)), path, b->name,
		                      b->name, aks__plugin_kind_name(d->kind),
		                      aks_plugin_get_file(plugin));
	}
	aks_autofree char *label = NULL;
	if (asprintf(&label, "%s.%s", path, b->name) < 0) {
		label = NULL;
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	aks_config *cfg = NULL;
	int rc = aks__config_build(d, node, label, &cfg, &e);
	aks_config_free(cfg);
	if (rc == AKS_ENOMEM) {
		aks_error_free(e);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	if (rc < 0) {
		b->state = AKS_BLOCK_INVALID;
		b->detail = strdup(aks_error_message(e));
		aks_error_free(e);
		if (!b->detail)
			return aks__error_set(err, AKS_ENOMEM, "out of memory");
		rc = aks__settings_warn(s,
		                        "%s (an inactive block: the profile's type does not use "
		                        "it, so the load goes on)",
		                        b->detail);
		return rc < 0 ? aks__error_set(err, AKS_ENOMEM, "out of memory") : AKS_OK;
	}
	b->state = AKS_BLOCK_VALID;
	b->detail = strdup(aks_plugin_get_file(plugin));
	return b->detail ? AKS_OK : aks__error_set(err, AKS_ENOMEM, "out of memory");
}

int aks__inactive_blocks_collect(aks_settings *s, aks_profile *p, const aks_node *pn,
                                 const char *path, const char *own, const char *skip, bool load,
                                 aks_error **err)
{
	for (size_t i = 0; pn && i + 1 < pn->count; i += 2) {
		const char *key = pn->items[i]->value;
		if ((own && strcmp(key, own) == 0) || (skip && strcmp(key, skip) == 0) ||
		    !aks__is_provider_block_name(key))
			continue;
		aks_inactive_block *grown =
		    realloc(p->inactive, (p->inactive_count + 1) * sizeof(*grown));
		if (!grown)
			return aks__error_set(err, AKS_ENOMEM, "out of memory");
		p->inactive = grown;
		aks_inactive_block *b = &grown[p->inactive_count];
		*b = (aks_inactive_block){.name = strdup(key)};
		if (!b->name)
			return aks__error_set(err, AKS_ENOMEM, "out of memory");
		p->inactive_count++;
		int rc = check_block(s, b, pn->items[i], pn->items[i + 1], path, load, err);
		if (rc < 0)
			return rc;
	}
	return AKS_OK;
}

void aks__inactive_blocks_free(aks_profile *p)
{
	for (size_t i = 0; i < p->inactive_count; i++) {
		free(p->inactive[i].name);
		free(p->inactive[i].detail);
	}
	free(p->inactive);
	p->inactive = NULL;
	p->inactive_count = 0;
}
