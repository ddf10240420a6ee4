/*
 * core/plugin/loader.c - resolve a profile `type` to a plugin file, load it and
 * validate its descriptor before any plugin code beyond the entry point runs.
 *
 * Search order: an explicit path (any `type` containing '/') -> the
 * directories of AKS_PLUGIN_PATH (colon-separated; ignored in setuid
 * programs) -> the installed plugin directory ($(pkglibdir)/plugins-<major>,
 * overridable with AKS_PLUGIN_SYSTEM_DIR, where empty means none, for tests).
 *
 * Plugins are never unloaded: they are made resident (RTLD_NODELETE) once
 * validated, because unloading code that other threads may still run is not
 * safe. Loading the same file twice returns the same plugin.
 */
#include "config.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/block.h"
#include <aksandbox/store.h>
#include <aksandbox/transport.h>

#include "plugin/exports.h"
#include "plugin/loader.h"
#include "util/util.h"

#ifndef AKS_PLUGINDIR
#error "AKS_PLUGINDIR must be defined by the build"
#endif

struct aks_plugin {
	char *file;
	void *handle;
	const aks_plugin_descriptor *desc;
	struct aks_plugin *next;
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct aks_plugin *registry;

/* Plugins this project ships, so "not found" can name the package to install: each in
 * aksandbox-plugin-<name> ('_' as '-'), but where `package` names another. */
static const struct in_tree_plugin {
	const char *name, *package;
} in_tree_plugins[] = {
    {"local_subprocess", NULL},
    {"docker", NULL},
    {"kubernetes", NULL},
    {"e2b", NULL},
    {"daytona", NULL},
    {"ec2_ssm", NULL},
    {"bubblewrap", NULL},
    {"nats", NULL},
    {"redis", NULL},
    {"valkey", "redis"},
    {"signed_token", NULL},
    {NULL, NULL},
};

const char *aks__plugin_kind_name(uint32_t kind)
{
	switch (kind) {
	case AKS_PLUGIN_PROVIDER:
		return "provider";
	case AKS_PLUGIN_TRANSPORT:
		return "transport";
	case AKS_PLUGIN_STORE:
		return "store";
	case AKS_PLUGIN_RESOLVER:
		return "resolver";
	default:
		return "unknown";
	}
}

const char *aks__plugin_package(const char *name, char *buf, size_t size)
{
	for (const struct in_tree_plugin *t = in_tree_plugins; t->name; t++) {
		if (strcmp(t->name, name) != 0)
			continue;
		int n = snprintf(buf, size, "aksandbox-plugin-%s", t->package ? t->package : name);
		if (n < 0 || (size_t)n >= size)
			return NULL;
		for (char *p = buf; *p; p++)
			if (*p == '_')
				*p = '-';
		return buf;
	}
	return NULL;
}

AKS_EXPORT const char *aks_plugin_dir(void)
{
	return AKS_PLUGINDIR;
}

/* The directories to search, in order; a NULL-terminated array the caller frees
 * with aks__strv_free(). */
static char **search_dirs(void)
{
	const char *path = secure_getenv("AKS_PLUGIN_PATH");
	const char *system_dir = secure_getenv("AKS_PLUGIN_SYSTEM_DIR");
	if (!system_dir)
		system_dir = AKS_PLUGINDIR;
	size_t n = 2;
	for (const char *p = path; p && *p; p++)
		n += *p == ':';
	char **dirs = calloc(n + 1, sizeof(*dirs));
	if (!dirs)
		return NULL;
	size_t count = 0;
	if (path) {
		char *copy = strdup(path), *save = NULL;
		if (!copy) {
			free(dirs);
			return NULL;
		}
		for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save))
			if (*d && count < n && !(dirs[count++] = strdup(d)))
				break;
		free(copy);
	}
	if (*system_dir && count < n)
		dirs[count++] = strdup(system_dir);
	for (size_t i = 0; i < count; i++) {
		if (!dirs[i]) {
			aks__strv_free(dirs);
			return NULL;
		}
	}
	return dirs;
}

static bool valid_name(const char *name)
{
	if (!*name || strlen(name) > 64)
		return false;
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
			return false;
	return true;
}

/* The plugin name a file must declare: its base name without ".so". */
static char *name_from_file(const char *file)
{
	const char *base = strrchr(file, '/');
	base = base ? base + 1 : file;
	size_t len = strlen(base);
	if (len > 3 && strcmp(base + len - 3, ".so") == 0)
		len -= 3;
	return strndup(base, len);
}

/* Refuses files others could have replaced: writable by group or others, or
 * owned by someone other than root or us. */
static int check_file(const char *file, aks_error **err)
{
	struct stat st;
	if (stat(file, &st) < 0)
		return aks__error_set(err, AKS_EPLUGIN, "cannot read plugin '%s': %s", file,
		                      strerror(errno));
	if (!S_ISREG(st.st_mode))
		return aks__error_set(err, AKS_EPLUGIN, "plugin '%s' is not a regular file", file);
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return aks__error_set(
		    err, AKS_EPLUGIN,
		    "refusing to load plugin '%s': it is writable by group or others "
		    "(mode %04o); run 'chmod go-w %s'",
		    file, (unsigned)(st.st_mode & 07777), file);
	if (st.st_uid != 0 && st.st_uid != geteuid())
		return aks__error_set(
		    err, AKS_EPLUGIN,
		    "refusing to load plugin '%s': it is owned by uid %u, not by root "
		    "or by this user",
		    file, (unsigned)st.st_uid);
	return AKS_OK;
}

static int dlopen_error(const char *file, aks_error **err)
{
	const char *why = dlerror();
	if (!why)
		why = "unknown dynamic loader error";
	if (strstr(why, "cannot open shared object file"))
		return aks__error_set(
		    err, AKS_EPLUGIN,
		    "cannot load plugin '%s': %s; a shared library the plugin needs is "
		    "missing: install it (check with 'ldd %s')",
		    file, why, file);
	if (strstr(why, "undefined symbol"))
		return aks__error_set(
		    err, AKS_EPLUGIN,
		    "cannot load plugin '%s': %s; the plugin needs a symbol no loaded "
		    "library provides: it was built against another version of a "
		    "library, or without -no-undefined (check with 'ldd -r %s')",
		    file, why, file);
	return aks__error_set(err, AKS_EPLUGIN,
	                      "cannot load plugin '%s': %s; a missing shared library is the usual "
	                      "cause (check with 'ldd %s')",
	                      file, why, file);
}

#define DESC_HAS(d, member)                                                                        \
	((d)->struct_size >= offsetof(aks_plugin_descriptor, member) + sizeof((d)->member))

static int check_capabilities(const char *file, const aks_capabilities *caps, aks_error **err)
{
	if (!caps)
		return aks__error_set(err, AKS_EPLUGIN,
		                      "plugin '%s': provider declares no capabilities", file);
	if (caps->struct_version < 1 || caps->struct_size < sizeof(aks_capabilities))
		return aks__error_set(err, AKS_EPLUGIN,
		                      "plugin '%s': capabilities record has version %u and size %u "
		                      "(expected version >= 1 and size >= %zu)",
		                      file, caps->struct_version, caps->struct_size,
		                      sizeof(aks_capabilities));
	if (caps->isolation > AKS_ISOLATION_WASM)
		return aks__error_set(err, AKS_EPLUGIN, "plugin '%s': unknown isolation tier %u",
		                      file, caps->isolation);
	bool python = false;
	for (size_t i = 0; caps->languages && caps->languages[i]; i++)
		python = python || strcmp(caps->languages[i], "python") == 0;
	if (!python)
		return aks__error_set(
		    err, AKS_EPLUGIN,
		    "plugin '%s': provider does not declare the mandatory language "
		    "'python'",
		    file);
	if (!caps->provisions && !caps->attaches_external)
		return aks__error_set(
		    err, AKS_EPLUGIN,
		    "plugin '%s': provider neither provisions nor attaches to external "
		    "environments",
		    file);
	return AKS_OK;
}

static int missing_op(const char *file, const char *op, aks_error **err)
{
	return aks__error_set(err, AKS_EPLUGIN,
	                      "plugin '%s': provider is missing the mandatory operation '%s'", file,
	                      op);
}

int aks__provider_slots_check(const char *who, const aks_capabilities *caps,
                              const aks_sandbox_ops *sb, aks_error **err)
{
	/* What the host would advertise to agents and then call: a declared capability with
	 * no operation behind it is a lie the loader can see. */
	const struct {
		bool declared;
		const void *slot;
		const char *capability, *op;
	} need[] = {
	    {caps->shell, (const void *)sb->execute_command, "shell", "execute_command"},
	    {caps->files, (const void *)sb->upload_file, "files", "upload_file"},
	    {caps->files, (const void *)sb->download_file, "files", "download_file"},
	    {caps->package_install, (const void *)sb->install_packages, "package_install",
	     "install_packages"},
	};
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
		if (need[i].declared && !need[i].slot)
			return aks__error_set(
			    err, AKS_EPLUGIN,
			    "plugin '%s' declares the %s capability but has no '%s' "
			    "operation; implement it or do not declare %s",
			    who, need[i].capability, need[i].op, need[i].capability);
	return AKS_OK;
}

static int check_provider(const char *file, const aks_provider_ops *ops, aks_error **err)
{
	if (!ops)
		return aks__error_set(err, AKS_EPLUGIN,
		                      "plugin '%s': provider has no operations table", file);
	if (ops->struct_version < 1 || ops->struct_size < AKS_PROVIDER_OPS_MIN_SIZE)
		return aks__error_set(
		    err, AKS_EPLUGIN,
		    "plugin '%s': provider operations table has version %u and size %u "
		    "(expected version >= 1 and size >= %zu)",
		    file, ops->struct_version, ops->struct_size, (size_t)AKS_PROVIDER_OPS_MIN_SIZE);
	int rc = check_capabilities(file, ops->capabilities, err);
	if (rc < 0)
		return rc;
	const aks_sandbox_ops *sb = ops->sandbox;
	if (!ops->init)
		return missing_op(file, "init", err);
	if (!ops->create && ops->capabilities->provisions)
		return missing_op(file, "create", err);
	if (!ops->attach && (ops->capabilities->attach || ops->capabilities->attaches_external))
		return missing_op(file, "attach", err);
	if (!ops->destroy)
		return missing_op(file, "destroy", err);
	if (!sb)
		return missing_op(file, "sandbox", err);
	if (sb->struct_version < 1 || sb->struct_size < sizeof(aks_sandbox_ops))
		return aks__error_set(
		    err, AKS_EPLUGIN,
		    "plugin '%s': sandbox operations table has version %u and size %u "
		    "(expected version >= 1 and size >= %zu)",
		    file, sb->struct_version, sb->struct_size, sizeof(aks_sandbox_ops));
	if (!sb->id)
		return missing_op(file, "id", err);
	if (!sb->execute_code)
		return missing_op(file, "execute_code", err);
	if (!sb->close)
		return missing_op(file, "close", err);
	return aks__provider_slots_check(file, ops->capabilities, sb, err);
}

static int check_resolver(const char *file, const aks_resolver_ops *ops, aks_error **err)
{
	if (!ops)
		return aks__error_set(err, AKS_EPLUGIN,
		                      "plugin '%s': resolver has no operations table", file);
	if (ops->struct_version < 1 || ops->struct_size < sizeof(aks_resolver_ops))
		return aks__error_set(
		    err, AKS_EPLUGIN,
		    "plugin '%s': resolver operations table has version %u and size %u "
		    "(expected version >= 1 and size >= %zu)",
		    file, ops->struct_version, ops->struct_size, sizeof(aks_resolver_ops));
	if (!ops->init)
		return aks__error_set(
		    err, AKS_EPLUGIN,
		    "plugin '%s': resolver is missing the mandatory operation 'init'", file);
	if (!ops->resolve)
		return aks__error_set(err, AKS_EPLUGIN,
		                      "plugin '%s': resolver is missing the mandatory operation "
		                      "'resolve'",
		                      file);
	return AKS_OK;
}

static int check_store(const char *file, const aks_store_ops *ops, aks_error **err)
{
	if (!ops)
		return aks__error_set(err, AKS_EPLUGIN,
		                      "plugin '%s': store has no operations table", file);
	/* The optional slots at the end (put_expiring) may be missing from a smaller table. */
	size_t least = offsetof(aks_store_ops, put_expiring);
	if (ops->struct_version < 1 || ops->struct_size < least)
		return aks__error_set(
		    err, AKS_EPLUGIN,
		    "plugin '%s': store operations table has version %u and size %u "
		    "(expected version >= 1 and size >= %zu)",
		    file, ops->struct_version, ops->struct_size, least);
	/* Every slot of a store is mandatory: name the first one missing. */
	const struct {
		const char *name;
		bool set;
	} slots[] = {{"init", ops->init},    {"update", ops->update},         {"get", ops->get},
	             {"scan", ops->scan},    {"namespaces", ops->namespaces}, {"lock", ops->lock},
	             {"unlock", ops->unlock}};
	for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++)
		if (!slots[i].set)
			return aks__error_set(
			    err, AKS_EPLUGIN,
			    "plugin '%s': store is missing the mandatory operation "
			    "'%s'",
			    file, slots[i].name);
	return AKS_OK;
}

static int check_transport(const char *file, const aks_transport_ops *ops, aks_error **err)
{
	if (!ops)
		return aks__error_set(err, AKS_EPLUGIN,
		                      "plugin '%s': transport has no operations table", file);
	/* The optional slots at the end (in_progress) may be missing from a smaller table. */
	size_t least = offsetof(aks_transport_ops, in_progress);
	if (ops->struct_version < 1 || ops->struct_size < least)
		return aks__error_set(err, AKS_EPLUGIN,
		                      "plugin '%s': transport operations table has version %u and "
		                      "size %u (expected version >= 1 and size >= %zu)",
		                      file, ops->struct_version, ops->struct_size, least);
	const struct {
		const char *name;
		bool set;
	} slots[] = {{"init", ops->init},
	             {"send", ops->send},
	             {"consumer_open", ops->consumer_open},
	             {"fetch", ops->fetch},
	             {"ack", ops->ack},
	             {"nack", ops->nack},
	             {"consumer_close", ops->consumer_close}};
	for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++)
		if (!slots[i].set)
			return aks__error_set(err, AKS_EPLUGIN,
			                      "plugin '%s': transport is missing the mandatory "
			                      "operation '%s'",
			                      file, slots[i].name);
	return AKS_OK;
}

static int check_descriptor(const char *file, const aks_plugin_descriptor *d, aks_error **err)
{
	if (!d)
		return aks__error_set(err, AKS_EPLUGIN,
		                      "plugin '%s': aks_plugin_entry() returned no descriptor",
		                      file);
	/* The ABI fields come first; read nothing else until they are checked. */
	if (d->struct_version < 1 || d->struct_size < offsetof(aks_plugin_descriptor, kind))
		return aks__error_set(
		    err, AKS_EPLUGIN,
		    "plugin '%s': descriptor has version %u and size %u (expected "
		    "version >= 1 and size >= %zu); rebuild it against the aksandbox "
		    "SDK",
		    file, d->struct_version, d->struct_size, sizeof(aks_plugin_descriptor));
	if (d->abi_major != AKS_ABI_MAJOR)
		return aks__error_set(err, AKS_EPLUGIN,
		                      "plugin '%s' was built for plugin ABI %u.%u, but this host "
		                      "implements ABI %d.%d; rebuild it against aksandbox-sdk %d.x",
		                      file, d->abi_major, d->abi_minor, AKS_ABI_MAJOR,
		                      AKS_ABI_MINOR, AKS_ABI_MAJOR);
	if (d->abi_minor > AKS_ABI_MINOR)
		return aks__error_set(
		    err, AKS_EPLUGIN,
		    "plugin '%s' needs plugin ABI %u.%u, but this host implements ABI "
		    "%d.%d; upgrade aksandbox or rebuild the plugin against this SDK",
		    file, d->abi_major, d->abi_minor, AKS_ABI_MAJOR, AKS_ABI_MINOR);
	if (d->struct_size < sizeof(aks_plugin_descriptor))
		return aks__error_set(
		    err, AKS_EPLUGIN,
		    "plugin '%s': descriptor has size %u, expected at least %zu for "
		    "ABI %u.%u",
		    file, d->struct_size, sizeof(aks_plugin_descriptor), d->abi_major,
		    d->abi_minor);
	if (!d->name || !*d->name)
		return aks__error_set(err, AKS_EPLUGIN, "plugin '%s': descriptor has no name",
		                      file);
	if (!d->version || !*d->version)
		return aks__error_set(err, AKS_EPLUGIN, "plugin '%s': descriptor has no version",
		                      file);
	if (!d->license || !*d->license)
		return aks__error_set(err, AKS_EPLUGIN, "plugin '%s': descriptor has no license",
		                      file);
	/* The rule for names, whatever the path it is loaded by: `type: NAME`, config blocks and
	 * packages all spell it. */
	if (!valid_name(d->name))
		return aks__error_set(err, AKS_EPLUGIN,
		                      "plugin '%s' declares the name '%s', which is not a plugin "
		                      "name: lowercase letters, digits and '_', at most 64",
		                      file, d->name);
	aks_autofree char *expected = name_from_file(file);
	if (!expected)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	if (strcmp(expected, d->name) != 0)
		return aks__error_set(
		    err, AKS_EPLUGIN,
		    "plugin file '%s' declares the name '%s'; a plugin's name must "
		    "match its file name ('%s')",
		    file, d->name, expected);
	if (d->kind < AKS_PLUGIN_PROVIDER || d->kind > AKS_PLUGIN_RESOLVER)
		return aks__error_set(err, AKS_EPLUGIN, "plugin '%s': unknown plugin kind %u", file,
		                      d->kind);
	int rc = aks__schema_check(d, file, err);
	if (rc < 0)
		return rc;
	if (d->kind == AKS_PLUGIN_PROVIDER)
		return check_provider(file, d->ops, err);
	if (d->kind == AKS_PLUGIN_RESOLVER)
		return check_resolver(file, d->ops, err);
	if (d->kind == AKS_PLUGIN_STORE)
		return check_store(file, d->ops, err);
	if (d->kind == AKS_PLUGIN_TRANSPORT)
		return check_transport(file, d->ops, err);
	return AKS_OK;
}

/*
 * A plugin should export aks_plugin_entry alone: anything else it exports can be bound in
 * place of a same-named symbol of the host's or of a library's, and says the plugin was
 * built without -fvisibility=hidden. It still loads (the symbols are local to it, as
 * plugins are opened RTLD_LOCAL), with a warning naming them; aksandbox-plugin-check fails
 * it.
 */
static void warn_extra_exports(const char *file, const char *name)
{
	struct aks__plugin_exports ex;
	char why[256], list[512] = "";
	size_t extra = 0, used = 0;
	if (aks__plugin_exports_read(file, &ex, why, sizeof(why)) != 0)
		return; /* nothing to add to a load that worked */
	for (size_t i = 0; i < ex.count; i++) {
		if (strcmp(ex.names[i], "aks_plugin_entry") == 0)
			continue;
		if (extra++ < 4 && used < sizeof(list)) {
			int n = snprintf(list + used, sizeof(list) - used, "%s%s", used ? ", " : "",
			                 ex.names[i]);
			if (n > 0)
				used += (size_t)n;
		}
	}
	aks__plugin_exports_free(&ex);
	if (extra)
		aks__log(AKS_LOG_WARNING, "loader",
		         "plugin '%s' (%s) exports %zu symbol%s besides aks_plugin_entry (%s%s): "
		         "build it with -fvisibility=hidden",
		         name, file, extra, extra == 1 ? "" : "s", list, extra > 4 ? ", ..." : "");
}

/* Loads and validates one file; called with the registry lock held. */
static int load_file(const char *file, struct aks_plugin **out, aks_error **err)
{
	for (struct aks_plugin *p = registry; p; p = p->next) {
		if (strcmp(p->file, file) == 0) {
			*out = p;
			return AKS_OK;
		}
	}
	int rc = check_file(file, err);
	if (rc < 0)
		return rc;
	dlerror();
	void *handle = dlopen(file, RTLD_NOW | RTLD_LOCAL);
	if (!handle)
		return dlopen_error(file, err);
	dlerror();
	aks_plugin_entry_fn entry =
	    (aks_plugin_entry_fn)(uintptr_t)dlsym(handle, "aks_plugin_entry");
	if (!entry) {
		dlclose(handle);
		return aks__error_set(err, AKS_EPLUGIN,
		                      "'%s' is not an aksandbox plugin: it does not export "
		                      "aks_plugin_entry",
		                      file);
	}
	const aks_plugin_descriptor *desc = entry();
	rc = check_descriptor(file, desc, err);
	if (rc < 0) {
		dlclose(handle);
		return rc;
	}
	/* Validated: pin it for the life of the process. */
	void *resident = dlopen(file, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD | RTLD_NODELETE);
	if (resident)
		dlclose(resident);
	struct aks_plugin *p = calloc(1, sizeof(*p));
	if (!p || !(p->file = strdup(file))) {
		free(p);
		dlclose(handle);
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	}
	p->handle = handle;
	p->desc = desc;
	p->next = registry;
	registry = p;
	aks__log(AKS_LOG_DEBUG, "loader", "loaded %s plugin '%s' %s from %s",
	         aks__plugin_kind_name(desc->kind), desc->name, desc->version, file);
	warn_extra_exports(file, desc->name);
	*out = p;
	return AKS_OK;
}

static int not_found(const char *name, char **dirs, aks_error **err)
{
	aks_buf searched = AKS_BUF_INIT;
	for (size_t i = 0; dirs && dirs[i]; i++)
		aks__buf_printf(&searched, "%s%s/%s.so", i ? ", " : "", dirs[i], name);
	if (!searched.len)
		aks__buf_puts(&searched, "no directories (AKS_PLUGIN_PATH is empty and the plugin "
		                         "directory is disabled)");
	char pkg[128];
	int rc;
	if (aks__plugin_package(name, pkg, sizeof(pkg)))
		rc = aks__error_set(
		    err, AKS_EPLUGIN,
		    "plugin '%s' not found; searched: %s; it is shipped in the package "
		    "'%s': install it",
		    name, searched.data, pkg);
	else
		rc = aks__error_set(
		    err, AKS_EPLUGIN,
		    "plugin '%s' not found; searched: %s; install it into %s, add its "
		    "directory to AKS_PLUGIN_PATH, or give the path to the .so",
		    name, searched.data, AKS_PLUGINDIR);
	aks__buf_free(&searched);
	return rc;
}

static int resolve(const char *type, char **out_file, aks_error **err)
{
	if (strchr(type, '/')) {
		char *real = realpath(type, NULL);
		if (!real)
			return aks__error_set(err, AKS_EPLUGIN, "plugin file '%s' not found: %s",
			                      type, strerror(errno));
		*out_file = real;
		return AKS_OK;
	}
	if (!valid_name(type))
		return aks__error_set(
		    err, AKS_ECONFIG,
		    "'%s' is neither a plugin name (lowercase letters, digits and '_') "
		    "nor a path to a .so",
		    type);
	char **dirs = search_dirs();
	if (!dirs)
		return aks__error_set(err, AKS_ENOMEM, "out of memory");
	int rc = AKS_EPLUGIN;
	for (size_t i = 0; dirs[i]; i++) {
		aks_autofree char *candidate = NULL;
		if (asprintf(&candidate, "%s/%s.so", dirs[i], type) < 0) {
			candidate = NULL;
			rc = aks__error_set(err, AKS_ENOMEM, "out of memory");
			break;
		}
		if (access(candidate, F_OK) != 0)
			continue;
		char *real = realpath(candidate, NULL);
		if (!real) {
			rc = aks__error_set(err, AKS_EPLUGIN, "cannot resolve '%s': %s", candidate,
			                    strerror(errno));
			break;
		}
		*out_file = real;
		rc = AKS_OK;
		break;
	}
	if (rc == AKS_EPLUGIN && !(err && *err))
		rc = not_found(type, dirs, err);
	aks__strv_free(dirs);
	return rc;
}

bool aks__plugin_installed(const char *name)
{
	if (!name || strchr(name, '/') || !valid_name(name))
		return false;
	char *file = NULL;
	if (resolve(name, &file, NULL) < 0)
		return false;
	free(file);
	return true;
}

static int check_kind(const struct aks_plugin *p, int kind, aks_error **err)
{
	if (kind == 0 || p->desc->kind == (uint32_t)kind)
		return AKS_OK;
	return aks__error_set(err, AKS_EPLUGIN,
	                      "plugin '%s' (%s) is a %s plugin, but a %s plugin is needed here",
	                      p->desc->name, p->file, aks__plugin_kind_name(p->desc->kind),
	                      aks__plugin_kind_name((uint32_t)kind));
}

AKS_EXPORT int aks_plugin_load(const char *type, int kind, const aks_plugin **out, aks_error **err)
{
	if (!type || !*type || !out)
		return aks__error_set(err, AKS_EINVAL, "aks_plugin_load: no plugin type given");
	char *file = NULL;
	int rc = resolve(type, &file, err);
	if (rc < 0)
		return rc;
	struct aks_plugin *p = NULL;
	pthread_mutex_lock(&registry_lock);
	rc = load_file(file, &p, err);
	pthread_mutex_unlock(&registry_lock);
	free(file);
	if (rc < 0)
		return rc;
	rc = check_kind(p, kind, err);
	if (rc < 0)
		return rc;
	*out = p;
	return AKS_OK;
}

AKS_EXPORT const aks_plugin_descriptor *aks_plugin_get_descriptor(const aks_plugin *plugin)
{
	return plugin ? plugin->desc : NULL;
}

AKS_EXPORT const char *aks_plugin_get_file(const aks_plugin *plugin)
{
	return plugin ? plugin->file : NULL;
}

AKS_EXPORT const aks_capabilities *aks_plugin_get_capabilities(const aks_plugin *plugin)
{
	if (!plugin || plugin->desc->kind != AKS_PLUGIN_PROVIDER)
		return NULL;
	return ((const aks_provider_ops *)plugin->desc->ops)->capabilities;
}

static int compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.so names in one directory, sorted; NULL-terminated. */
static char **list_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return NULL;
	size_t count = 0, cap = 16;
	char **names = calloc(cap + 1, sizeof(*names));
	struct dirent *ent;
	while (names && (ent = readdir(d))) {
		size_t len = strlen(ent->d_name);
		if (len <= 3 || strcmp(ent->d_name + len - 3, ".so") != 0)
			continue;
		if (count == cap) {
			char **grown = realloc(names, (cap * 2 + 1) * sizeof(*names));
			if (!grown)
				break;
			names = grown;
			cap *= 2;
		}
		if (!(names[count] = strdup(ent->d_name)))
			break;
		names[++count] = NULL;
	}
	closedir(d);
	if (names)
		qsort(names, count, sizeof(*names), compare_names);
	return names;
}

AKS_EXPORT int aks_plugin_foreach(aks_plugin_visit_fn visit, void *userdata)
{
	char **dirs = search_dirs();
	if (!dirs)
		return AKS_ENOMEM;
	aks_buf seen = AKS_BUF_INIT; /* "\n"-separated names already visited */
	aks__buf_puts(&seen, "\n");
	int rc = 0;
	for (size_t i = 0; dirs[i] && rc == 0; i++) {
		char **names = list_dir(dirs[i]);
		for (size_t j = 0; names && names[j] && rc == 0; j++) {
			aks_autofree char *key = NULL, *path = NULL;
			if (asprintf(&key, "\n%s\n", names[j]) < 0 ||
			    asprintf(&path, "%s/%s", dirs[i], names[j]) < 0) {
				rc = AKS_ENOMEM;
				break;
			}
			if (strstr(seen.data, key))
				continue; /* shadowed by an earlier directory */
			aks__buf_printf(&seen, "%s\n", names[j]);
			const aks_plugin *plugin = NULL;
			aks_error *e = NULL;
			if (aks_plugin_load(path, 0, &plugin, &e) < 0)
				plugin = NULL;
			rc = visit(plugin ? plugin->file : path, plugin, e, userdata);
			aks_error_free(e);
		}
		aks__strv_free(names);
	}
	aks__buf_free(&seen);
	aks__strv_free(dirs);
	return rc;
}
