/*
 * sdk/check/checks_plugin.c - the checks of the plugin file itself: it loads,
 * exports only its entry point, carries a valid descriptor, refuses unknown
 * config keys, and its provider opens and closes cleanly.
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "plugin/exports.h"
#include "probe.h"

struct aks_check_state aks_check;

void aks_check_plugin_loads(void)
{
	aks_error *err = NULL;

	int rc = aks_plugin_load(aks_check.plugin_path, aks_check.kind, &aks_check.plugin, &err);
	if (rc == AKS_OK) {
		aks_error_free(err);
		return;
	}
	/* The loader's own message says what is wrong and how to fix it: it is the report. */
	aks_check.plugin = NULL;
	char msg[1024];
	snprintf(msg, sizeof(msg), "%s", err ? aks_error_message(err) : aks_strerror(rc));
	aks_error_free(err);
	aks_check_fail("the plugin does not load: %s", msg);
}

void aks_check_exports_only_entry(void)
{
	struct aks__plugin_exports ex;
	char why[512];
	char extra[2048] = "";
	size_t nextra = 0, used = 0;

	const char *file = aks_plugin_get_file(aks_check_need_plugin());
	if (aks__plugin_exports_read(file, &ex, why, sizeof(why)) != 0)
		aks_check_fail("cannot read the dynamic symbols of %s: %s", file, why);
	bool has_entry = aks__plugin_exports_has(&ex, "aks_plugin_entry");
	for (size_t i = 0; i < ex.count; i++) {
		if (strcmp(ex.names[i], "aks_plugin_entry") == 0)
			continue;
		nextra++;
		int n = snprintf(extra + used, sizeof(extra) - used, "%s%s", used ? ", " : "",
		                 ex.names[i]);
		if (n > 0 && (size_t)n < sizeof(extra) - used)
			used += (size_t)n;
	}
	aks__plugin_exports_free(&ex);
	if (!has_entry)
		aks_check_fail("%s does not export aks_plugin_entry", file);
	if (nextra)
		aks_check_fail("%s exports %zu symbol%s besides aks_plugin_entry: %s (build with "
		               "-fvisibility=hidden, or link with a version script or "
		               "-export-symbols-regex '^aks_plugin_entry$')",
		               file, nextra, nextra == 1 ? "" : "s", extra);
}

static bool nonempty(const char *s)
{
	return s && *s;
}

/* The file's base name without ".so": what the descriptor's name must be. */
static void expected_name(const char *file, char *out, size_t size)
{
	const char *base = strrchr(file, '/');

	base = base ? base + 1 : file;
	snprintf(out, size, "%s", base);
	size_t len = strlen(out);
	if (len > 3 && strcmp(out + len - 3, ".so") == 0)
		out[len - 3] = '\0';
}

static bool known_config_type(uint32_t type)
{
	return type >= AKS_CONFIG_STRING && type <= AKS_CONFIG_JSON;
}

static void check_schema(const aks_plugin_descriptor *d)
{
	const aks_config_key *keys = d->config_keys;

	if (!keys)
		return;
	/* Entries may be larger than ours (a newer SDK appended fields): step by
	 * the plugin's struct_size, as the host does. */
	size_t step = keys[0].struct_size;
	if (keys[0].struct_version < 1 || step < sizeof(aks_config_key))
		aks_check_fail("config key entries have struct_version %u and struct_size %u (need "
		               "version >= 1 and size >= %zu)",
		               keys[0].struct_version, keys[0].struct_size, sizeof(aks_config_key));
	for (size_t i = 0;; i++) {
		const aks_config_key *k =
		    (const aks_config_key *)(const void *)((const char *)keys + i * step);
		if (k->struct_size != step)
			aks_check_fail("config key %zu has struct_size %u, the first has %zu", i,
			               k->struct_size, step);
		if (!k->name)
			break;
		if (!*k->name)
			aks_check_fail("config key %zu has an empty name", i);
		if (!known_config_type(k->type))
			aks_check_fail("config key '%s' has unknown type %u", k->name, k->type);
		for (size_t j = 0; j < i; j++) {
			const aks_config_key *o =
			    (const aks_config_key *)(const void *)((const char *)keys + j * step);
			if (strcmp(o->name, k->name) == 0)
				aks_check_fail("config key '%s' is declared twice", k->name);
		}
		if (i > 1000)
			aks_check_fail("config keys are not terminated with AKS_CONFIG_END");
	}
}

void aks_check_descriptor_is_valid(void)
{
	char want[256];

	const aks_plugin *plugin = aks_check_need_plugin();
	const aks_plugin_descriptor *d = aks_plugin_get_descriptor(plugin);
	if (!d)
		aks_check_fail("the plugin has no descriptor");
	if (d->struct_version < 1 || d->struct_size < sizeof(aks_plugin_descriptor))
		aks_check_fail("descriptor struct_version %u, struct_size %u: rebuild against the "
		               "current SDK",
		               d->struct_version, d->struct_size);
	if (d->kind != AKS_PLUGIN_PROVIDER && d->kind != AKS_PLUGIN_STORE &&
	    d->kind != AKS_PLUGIN_TRANSPORT)
		aks_check_fail("descriptor kind is %u: the suite checks providers, stores and "
		               "transports",
		               d->kind);
	expected_name(aks_plugin_get_file(plugin), want, sizeof(want));
	if (!d->name || strcmp(d->name, want) != 0)
		aks_check_fail("descriptor name '%s' does not match the file name '%s.so'",
		               d->name ? d->name : "(null)", want);
	if (!nonempty(d->version))
		aks_check_fail("descriptor version is empty");
	if (!nonempty(d->license))
		aks_check_fail("descriptor license is empty (give an SPDX identifier)");
	if (!nonempty(d->summary))
		aks_check_fail("descriptor summary is empty");
	if (!d->ops)
		aks_check_fail("descriptor has no operations table");
	check_schema(d);
}

void aks_check_unknown_config_key_is_refused(void)
{
	char probe[4096], why[1024];
	aks_config *cfg = NULL;
	aks_error *err = NULL;

	const aks_plugin *plugin = aks_check_need_plugin();
	const aks_plugin_descriptor *d = aks_plugin_get_descriptor(plugin);
	if (aks_check_write_probe(aks_check.config_path, d->name, AKS_CHECK_UNKNOWN_KEY, probe,
	                          sizeof(probe), why, sizeof(why)) != 0)
		aks_check_fail("cannot write the probe config: %s", why);
	int rc = aks_config_load_block(plugin, probe, &cfg, &err);
	unlink(probe);
	if (rc == AKS_OK) {
		aks_config_free(cfg);
		aks_check_fail("a config block with the unknown key '%s' was accepted",
		               AKS_CHECK_UNKNOWN_KEY);
	}
	bool named = err && strstr(aks_error_message(err), AKS_CHECK_UNKNOWN_KEY);
	char msg[1024];
	snprintf(msg, sizeof(msg), "%s", err ? aks_error_message(err) : "(no error message)");
	if (rc != AKS_ECONFIG)
		aks_check_expect("loading a block with an unknown key", rc, AKS_ECONFIG, err);
	aks_error_free(err);
	if (!named)
		aks_check_fail("the error does not name the unknown key '%s': %s",
		               AKS_CHECK_UNKNOWN_KEY, msg);
}

/* The config block the suite runs with: the given file's, or the defaults. */
static int load_config(aks_config **out, aks_error **err)
{
	if (aks_check.config_path)
		return aks_config_load_block(aks_check.plugin, aks_check.config_path, out, err);
	return aks_config_default_block(aks_check.plugin, out, err);
}

void aks_check_provider_opens(void)
{
	aks_error *err = NULL;

	aks_check_need_plugin();
	int rc = load_config(&aks_check.config, &err);
	aks_check_expect(aks_check.config_path ? "loading the config block"
	                                       : "building the default config block",
	                 rc, AKS_OK, err);
	err = NULL;
	rc = aks_provider_open(aks_check.plugin, aks_check.config, &aks_check.provider, &err);
	if (rc != AKS_OK)
		aks_check.provider = NULL;
	aks_check_expect("aks_provider_open", rc, AKS_OK, err);
	const aks_capabilities *caps = aks_provider_get_capabilities(aks_check.provider);
	if (!caps)
		aks_check_fail("the provider instance reports no capabilities");
	bool python = false;
	for (const char *const *l = caps->languages; l && *l; l++)
		if (strcmp(*l, "python") == 0)
			python = true;
	if (!python)
		aks_check_fail("the instance's languages do not include python");
}

/* After every other check: the instance closes (with all its sandboxes
 * closed), and the provider opens and closes twice more from scratch. */
void aks_check_provider_reopens(void)
{
	aks_check_need_provider();
	aks_provider_close(aks_check.provider);
	aks_check.provider = NULL;
	for (int round = 1; round <= 2; round++) {
		aks_provider *prov = NULL;
		aks_error *err = NULL;
		char what[64];

		int rc = aks_provider_open(aks_check.plugin, aks_check.config, &prov, &err);
		snprintf(what, sizeof(what), "aks_provider_open (round %d)", round);
		aks_check_expect(what, rc, AKS_OK, err);
		aks_provider_close(prov);
	}
}
