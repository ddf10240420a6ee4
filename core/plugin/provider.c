/*
 * core/plugin/provider.c - provider instances and sandbox handles as the host sees
 * them.
 *
 * Every call into a provider goes through this file. It is the one place that
 * turns a NULL slot or an undeclared capability into a capability error, reads
 * the instance's (not the class's) capabilities, creates the bounded result
 * record, and makes sure a failing plugin call always comes back with an error
 * message. The caller's aks_call may be of an older, smaller layout than this
 * library's (aksandbox.h): each operation reads it into ours (aks__call_import)
 * and hands the plugin that copy, never the caller's struct.
 */
#include "config.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/block.h"
#include "plugin/handle_cache.h"
#include "plugin/host_api.h"
#include "plugin/loader.h"
#include "plugin/provider.h"
#include "plugin/result.h"
#include "util/util.h"

struct aks_provider {
	const aks_plugin *plugin;
	const char *name; /* the descriptor's, static */
	const aks_provider_ops *ops;
	const aks_sandbox_ops *sandbox_ops;
	aks_provider_impl *impl;
	aks_config *defaults; /* the config built when none was given; lives until fini */
	const aks_capabilities *caps;
	size_t stream_cap;
	size_t file_cap;
	atomic_size_t open_sandboxes;
	aks_handle_cache *handles; /* kept between the engine's operations; NULL: none */
};

struct aks_sandbox {
	aks_provider *prov;
	aks_sandbox_impl *impl;
	void *host_data; /* aks__sandbox_attach: freed with the handle unless detached */
	void (*host_data_free)(void *data);
};

static int capability_error(const aks_provider *prov, const char *capability, aks_error **err)
{
	return aks__error_set(err, AKS_ECAPABILITY, "%s does not support capability: %s",
	                      prov->name, capability);
}

/* Normalises what a plugin returned: an error code always has a message, and
 * out-of-range codes are machinery errors. */
static int plugin_status(const aks_provider *prov, const char *op, int rc, aks_error **err)
{
	if (rc == AKS_OK)
		return AKS_OK;
	if (rc > 0 || rc < AKS_EIO) {
		if (err && *err) {
			aks_error_free(*err);
			*err = NULL;
		}
		return aks__error_set(err, AKS_ERROR, "%s: %s returned an invalid status %d",
		                      prov->name, op, rc);
	}
	if (err && !*err)
		aks__error_set(err, rc, "%s: %s failed: %s", prov->name, op, aks_strerror(rc));
	return rc;
}

AKS_EXPORT int aks_config_default_block(const aks_plugin *plugin, aks_config **out, aks_error **err)
{
	const aks_plugin_descriptor *d = aks_plugin_get_descriptor(plugin);
	if (!d || !out)
		return aks__error_set(err, AKS_EINVAL, "aks_config_default_block: no plugin");
	return aks__config_build(d, NULL, d->name, out, err);
}

AKS_EXPORT int aks_config_load_block(const aks_plugin *plugin, const char *yaml_path,
                                     aks_config **out, aks_error **err)
{
	const aks_plugin_descriptor *d = aks_plugin_get_descriptor(plugin);
	if (!d || !yaml_path || !out)
		return aks__error_set(err, AKS_EINVAL, "aks_config_load_block: no plugin or file");
	aks_node *root = NULL;
	int rc = aks__yaml_load_file(yaml_path, &root, err);
	if (rc < 0)
		return rc;
	const aks_node *block = root;
	const aks_node *sandbox = aks__node_get(root, "sandbox");
	if (sandbox) {
		/* A config.yaml: the sugar block, else the first profile of this type. */
		block = aks__node_get(sandbox, d->name);
		const aks_node *profiles = aks__node_get(sandbox, "profiles");
		for (size_t i = 0; !block && profiles && profiles->kind == AKS_NODE_MAPPING &&
		                   i + 1 < profiles->count;
		     i += 2)
			block = aks__node_get(profiles->items[i + 1], d->name);
		if (!block) {
			rc =
			    aks__error_set(err, AKS_ECONFIG,
			                   "%s: no '%s' block under sandbox: or sandbox.profiles.*",
			                   yaml_path, d->name);
			aks__node_free(root);
			return rc;
		}
	}
	rc = aks__config_build(d, block, d->name, out, err);
	aks__node_free(root);
	return rc;
}

AKS_EXPORT int aks_provider_open(const aks_plugin *plugin, const aks_config *config,
                                 aks_provider **out, aks_error **err)
{
	const aks_plugin_descriptor *d = aks_plugin_get_descriptor(plugin);
	if (!d || !out)
		return aks__error_set(err, AKS_EINVAL, "aks_provider_open: no plugin");
	if (d->kind != AKS_PLUGIN_PROVIDER)
		return aks__error_set(err, AKS_EPLUGIN, "plugin '%s' is not a provider", d->name);
	aks_provider *prov = calloc(1, sizeof(*prov));
	if (!prov)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	prov->plugin = plugin;
	prov->name = d->name;
	prov->ops = d->ops;
	prov->sandbox_ops = prov->ops->sandbox;
	prov->stream_cap = AKS_DEFAULT_STREAM_CAP;
	prov->file_cap = AKS_DEFAULT_FILE_CAP;
	atomic_init(&prov->open_sandboxes, 0);

	if (!config) {
		/* Accessor results live until fini (plugin.h), so this config does too. */
		int rc = aks__config_build(d, NULL, d->name, &prov->defaults, err);
		if (rc < 0) {
			free(prov);
			return rc;
		}
		config = prov->defaults;
	}
	int rc = prov->ops->init(aks__host_api(), config, &prov->impl, err);
	rc = plugin_status(prov, "init", rc, err);
	if (rc == AKS_OK && !prov->impl)
		rc = aks__error_set(err, AKS_EPLUGIN, "%s: init succeeded but returned no instance",
		                    prov->name);
	if (rc < 0) {
		aks_config_free(prov->defaults);
		free(prov);
		return rc;
	}
	/* Without memory for it, handles are closed after each operation, as the original. */
	prov->handles = aks__handle_cache_new(AKS_HANDLE_CACHE_MAX);
	prov->caps = prov->ops->capabilities;
	if (prov->ops->instance_capabilities) {
		const aks_capabilities *mine = prov->ops->instance_capabilities(prov->impl);
		if (mine && mine->struct_version >= 1 && mine->struct_size >= sizeof(*mine))
			prov->caps = mine;
	}
	rc = aks__provider_slots_check(prov->name, prov->caps, prov->sandbox_ops, err);
	if (rc < 0) {
		aks_provider_close(prov);
		return rc;
	}
	*out = prov;
	return AKS_OK;
}

AKS_EXPORT const char *aks_isolation_name(uint32_t tier)
{
	static const char *const names[] = {"none",           "os_policy", "container",
	                                    "syscall_filter", "micro_vm",  "wasm"};
	return tier < sizeof(names) / sizeof(names[0]) ? names[tier] : "unknown";
}

AKS_EXPORT const aks_capabilities *aks_provider_get_capabilities(const aks_provider *prov)
{
	return prov ? prov->caps : NULL;
}

AKS_EXPORT const char *aks_provider_get_description(const aks_provider *prov)
{
	if (!prov ||
	    prov->ops->struct_size < offsetof(aks_provider_ops, instance_description) +
	                                 sizeof(prov->ops->instance_description) ||
	    !prov->ops->instance_description)
		return "";
	const char *d = prov->ops->instance_description(prov->impl);
	return d ? d : "";
}

bool aks__provider_can_list(const aks_provider *prov)
{
	return prov &&
	       prov->ops->struct_size >=
	           offsetof(aks_provider_ops, list_sandboxes) + sizeof(prov->ops->list_sandboxes) &&
	       prov->ops->list_sandboxes;
}

int aks__provider_list_sandboxes(aks_provider *prov, const char *label_key, const char *label_value,
                                 const aks_call *call, aks_sandbox_list_fn fn, void *ctx,
                                 aks_error **err)
{
	if (!prov || !label_key || !label_value || !call || !fn)
		return aks__error_set(err, AKS_EINVAL, "list_sandboxes: missing argument");
	if (!aks__provider_can_list(prov))
		return aks__error_set(err, AKS_ECAPABILITY,
		                      "provider '%s' cannot list the sandboxes it created",
		                      prov->name);
	aks__imported_call c;
	int rc = aks__call_import(&c, call, err);
	if (rc < 0)
		return rc;
	return plugin_status(
	    prov, "list_sandboxes",
	    prov->ops->list_sandboxes(prov->impl, label_key, label_value, &c.call, fn, ctx, err),
	    err);
}

aks_handle_cache *aks__provider_handles(aks_provider *prov)
{
	return prov ? prov->handles : NULL;
}

AKS_EXPORT const aks_plugin *aks_provider_get_plugin(const aks_provider *prov)
{
	return prov ? prov->plugin : NULL;
}

AKS_EXPORT void aks_provider_set_limits(aks_provider *prov, size_t stream_cap, size_t file_cap)
{
	if (!prov)
		return;
	prov->stream_cap = stream_cap;
	prov->file_cap = file_cap;
}

/* The host's handle around a plugin's. create_call: the handle is of a sandbox just created
 * for that call, which must not outlive a failure here (nobody would know its id). */
static int wrap_sandbox(aks_provider *prov, aks_sandbox_impl *impl, const aks_call *create_call,
                        aks_sandbox **out, aks_error **err)
{
	if (!impl)
		return aks__error_set(err, AKS_EPLUGIN, "%s: returned no sandbox handle",
		                      prov->name);
	aks_sandbox *sb = calloc(1, sizeof(*sb));
	if (!sb) {
		const char *id = prov->sandbox_ops->id(impl);
		if (create_call && id && prov->ops->destroy)
			prov->ops->destroy(prov->impl, id, create_call, NULL);
		prov->sandbox_ops->close(impl);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	sb->prov = prov;
	sb->impl = impl;
	atomic_fetch_add(&prov->open_sandboxes, 1);
	*out = sb;
	return AKS_OK;
}

AKS_EXPORT int aks_provider_create(aks_provider *prov, const aks_call *call, aks_sandbox **out,
                                   aks_error **err)
{
	if (!prov || !call || !out)
		return aks__error_set(err, AKS_EINVAL, "aks_provider_create: missing argument");
	if (!prov->caps->provisions || !prov->ops->create)
		return capability_error(prov, "provisions", err);
	aks__imported_call c;
	int rc = aks__call_import(&c, call, err);
	if (rc < 0)
		return rc;
	aks_sandbox_impl *impl = NULL;
	rc = plugin_status(prov, "create", prov->ops->create(prov->impl, &c.call, &impl, err), err);
	if (rc < 0)
		return rc;
	return wrap_sandbox(prov, impl, &c.call, out, err);
}

AKS_EXPORT int aks_provider_attach(aks_provider *prov, const char *sandbox_id, const aks_call *call,
                                   aks_sandbox **out, aks_error **err)
{
	if (!prov || !sandbox_id || !call || !out)
		return aks__error_set(err, AKS_EINVAL, "aks_provider_attach: missing argument");
	if (!prov->caps->attach || !prov->ops->attach)
		return capability_error(prov, "attach", err);
	aks__imported_call c;
	int rc = aks__call_import(&c, call, err);
	if (rc < 0)
		return rc;
	aks_sandbox_impl *impl = NULL;
	rc = plugin_status(prov, "attach",
	                   prov->ops->attach(prov->impl, sandbox_id, &c.call, &impl, err), err);
	if (rc < 0)
		return rc;
	return wrap_sandbox(prov, impl, NULL, out, err);
}

AKS_EXPORT int aks_provider_destroy(aks_provider *prov, const char *sandbox_id,
                                    const aks_call *call, aks_error **err)
{
	if (!prov || !sandbox_id || !call)
		return aks__error_set(err, AKS_EINVAL, "aks_provider_destroy: missing argument");
	aks__imported_call c;
	int rc = aks__call_import(&c, call, err);
	if (rc < 0)
		return rc;
	return plugin_status(prov, "destroy",
	                     prov->ops->destroy(prov->impl, sandbox_id, &c.call, err), err);
}

AKS_EXPORT void aks_provider_close(aks_provider *prov)
{
	if (!prov)
		return;
	aks__handle_cache_free(prov->handles); /* its handles are ours */
	prov->handles = NULL;
	size_t open = atomic_load(&prov->open_sandboxes);
	if (open) {
		/* Finalising under live handles would free memory they use; leak instead. */
		aks__log(AKS_LOG_ERROR, prov->name,
		         "provider closed with %zu sandbox handle(s) still open; not finalising it",
		         open);
		return;
	}
	if (prov->ops->fini)
		prov->ops->fini(prov->impl);
	aks_config_free(prov->defaults);
	free(prov);
}

AKS_EXPORT const char *aks_sandbox_get_id(const aks_sandbox *sb)
{
	return sb ? sb->prov->sandbox_ops->id(sb->impl) : NULL;
}

AKS_EXPORT void aks_sandbox_close(aks_sandbox *sb)
{
	if (!sb)
		return;
	sb->prov->sandbox_ops->close(sb->impl);
	atomic_fetch_sub(&sb->prov->open_sandboxes, 1);
	if (sb->host_data && sb->host_data_free)
		sb->host_data_free(sb->host_data);
	free(sb);
}

void aks__sandbox_attach(aks_sandbox *sb, void *data, void (*free_fn)(void *data))
{
	sb->host_data = data;
	sb->host_data_free = free_fn;
}

void *aks__sandbox_detach(aks_sandbox *sb)
{
	void *data = sb ? sb->host_data : NULL;
	if (sb)
		sb->host_data = NULL;
	return data;
}

/* Runs one result-producing operation: a fresh bounded result (streaming to tap, may be
 * NULL), the status normalised, and the result kept on success, timeout and cancellation. */
typedef int (*result_op)(aks_sandbox *sb, const void *arg, const aks_call *call, aks_result *r,
                         aks_error **err);

static int run_with_result(aks_sandbox *sb, const char *op_name, result_op op, const void *arg,
                           const aks_call *call, aks_output_tap *tap, aks_result **out,
                           aks_error **err)
{
	aks__imported_call c;
	int rc = aks__call_import(&c, call, err);
	if (rc < 0)
		return rc;
	aks_result *r = aks__result_new_tapped(sb->prov->stream_cap, sb->prov->file_cap, tap);
	if (!r)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	rc = plugin_status(sb->prov, op_name, op(sb, arg, &c.call, r, err), err);
	if (rc == AKS_ETIMEOUT || rc == AKS_ECANCELLED)
		aks__result_set_timed_out(r);
	if (rc < 0 && rc != AKS_ETIMEOUT && rc != AKS_ECANCELLED) {
		aks_result_free(r);
		return rc;
	}
	*out = r;
	return rc;
}

typedef struct code_arg {
	const char *code;
	const char *language;
} code_arg;

static int op_code(aks_sandbox *sb, const void *arg, const aks_call *call, aks_result *r,
                   aks_error **err)
{
	const code_arg *a = arg;
	return sb->prov->sandbox_ops->execute_code(sb->impl, a->code, a->language, call, r, err);
}

static int op_command(aks_sandbox *sb, const void *arg, const aks_call *call, aks_result *r,
                      aks_error **err)
{
	return sb->prov->sandbox_ops->execute_command(sb->impl, arg, call, r, err);
}

static int op_install(aks_sandbox *sb, const void *arg, const aks_call *call, aks_result *r,
                      aks_error **err)
{
	return sb->prov->sandbox_ops->install_packages(sb->impl, arg, call, r, err);
}

static int op_download(aks_sandbox *sb, const void *arg, const aks_call *call, aks_result *r,
                       aks_error **err)
{
	int rc = sb->prov->sandbox_ops->download_file(sb->impl, arg, call, r, err);
	if (rc == AKS_OK && aks_result_get_file_count(r) != 1)
		return aks__error_set(
		    err, AKS_EPLUGIN,
		    "%s: download_file succeeded but returned %zu files instead of 1",
		    sb->prov->name, aks_result_get_file_count(r));
	return rc;
}

static bool declares_language(const aks_capabilities *caps, const char *language)
{
	for (size_t i = 0; caps->languages && caps->languages[i]; i++)
		if (strcmp(caps->languages[i], language) == 0)
			return true;
	return false;
}

#define CHECK_ARGS(cond, fn)                                                                       \
	do {                                                                                       \
		if (!(cond))                                                                       \
			return aks__error_set(err, AKS_EINVAL, fn ": missing argument");           \
	} while (0)

int aks__sandbox_execute_code(aks_sandbox *sb, const char *code, const char *language,
                              const aks_call *call, aks_output_tap *tap, aks_result **out,
                              aks_error **err)
{
	CHECK_ARGS(sb && code && call && out, "aks_sandbox_execute_code");
	if (!language)
		language = "python";
	if (!declares_language(sb->prov->caps, language)) {
		aks_autofree char *cap = NULL;
		if (asprintf(&cap, "language:%s", language) < 0)
			return aks__error_set(err, AKS_ENOMEM, "out of memory");
		return capability_error(sb->prov, cap, err);
	}
	code_arg a = {code, language};
	return run_with_result(sb, "execute_code", op_code, &a, call, tap, out, err);
}

AKS_EXPORT int aks_sandbox_execute_code(aks_sandbox *sb, const char *code, const char *language,
                                        const aks_call *call, aks_result **out, aks_error **err)
{
	return aks__sandbox_execute_code(sb, code, language, call, NULL, out, err);
}

int aks__sandbox_execute_command(aks_sandbox *sb, const char *command, const aks_call *call,
                                 aks_output_tap *tap, aks_result **out, aks_error **err)
{
	CHECK_ARGS(sb && command && call && out, "aks_sandbox_execute_command");
	if (!sb->prov->caps->shell || !sb->prov->sandbox_ops->execute_command)
		return capability_error(sb->prov, "shell", err);
	return run_with_result(sb, "execute_command", op_command, command, call, tap, out, err);
}

AKS_EXPORT int aks_sandbox_execute_command(aks_sandbox *sb, const char *command,
                                           const aks_call *call, aks_result **out, aks_error **err)
{
	return aks__sandbox_execute_command(sb, command, call, NULL, out, err);
}

AKS_EXPORT int aks_sandbox_install_packages(aks_sandbox *sb, const char *const *packages,
                                            const aks_call *call, aks_result **out, aks_error **err)
{
	CHECK_ARGS(sb && packages && call && out, "aks_sandbox_install_packages");
	if (!sb->prov->caps->package_install || !sb->prov->sandbox_ops->install_packages)
		return capability_error(sb->prov, "package_install", err);
	return run_with_result(sb, "install_packages", op_install, packages, call, NULL, out, err);
}

AKS_EXPORT int aks_sandbox_upload_file(aks_sandbox *sb, const char *path, const void *data,
                                       size_t len, const aks_call *call, aks_error **err)
{
	CHECK_ARGS(sb && path && (data || !len) && call, "aks_sandbox_upload_file");
	if (!sb->prov->caps->files || !sb->prov->sandbox_ops->upload_file)
		return capability_error(sb->prov, "files", err);
	aks__imported_call c;
	int rc = aks__call_import(&c, call, err);
	if (rc < 0)
		return rc;
	return plugin_status(
	    sb->prov, "upload_file",
	    sb->prov->sandbox_ops->upload_file(sb->impl, path, data ? data : "", len, &c.call, err),
	    err);
}

AKS_EXPORT int aks_sandbox_download_file(aks_sandbox *sb, const char *path, const aks_call *call,
                                         aks_result **out, aks_error **err)
{
	CHECK_ARGS(sb && path && call && out, "aks_sandbox_download_file");
	if (!sb->prov->caps->files || !sb->prov->sandbox_ops->download_file)
		return capability_error(sb->prov, "files", err);
	return run_with_result(sb, "download_file", op_download, path, call, NULL, out, err);
}

AKS_EXPORT const char *aks_version(void)
{
	return AKS_PACKAGE_VERSION;
}
