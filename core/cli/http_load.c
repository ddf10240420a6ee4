/*
 * core/cli/http_load.c - loading aksandbox-http.so (http_module.h) when `mcp --listen` or
 * `worker --metrics` asks for it, and the CLI's calls into it.
 *
 * Where: beside the running executable first (a build tree's .libs/, where the module of
 * that very build is), then the installed $(pkglibdir). Its table must be of this ABI and
 * this release; anything else is refused with the reason, never half used.
 */
#include "config.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "http_module.h"

#ifndef AKS_PKGLIBDIR
#error "AKS_PKGLIBDIR must name the directory aksandbox-http.so is installed in"
#endif

/* The module beside the executable, when there is one: its path in buf. */
static bool beside_executable(char *buf, size_t size)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return false;
	exe[n] = '\0';
	char *slash = strrchr(exe, '/');
	if (!slash)
		return false;
	*slash = '\0';
	if (snprintf(buf, size, "%s/%s", exe, CLI_HTTP_MODULE_FILE) >= (int)size)
		return false;
	return access(buf, F_OK) == 0;
}

const cli_http_module *cli_http_module_load(const char *what)
{
	static const cli_http_module *loaded;
	if (loaded)
		return loaded;
	char path[PATH_MAX + 32];
	if (!beside_executable(path, sizeof(path)))
		snprintf(path, sizeof(path), "%s/%s", AKS_PKGLIBDIR, CLI_HTTP_MODULE_FILE);
	/* Never unloaded: its threads and handlers live as long as the process. */
	void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!handle) {
		cli_warn("%s: cannot load the HTTP module: %s", what, dlerror());
		return NULL;
	}
	const cli_http_module *m = dlsym(handle, CLI_HTTP_MODULE_SYMBOL);
	if (!m) {
		cli_warn("%s: %s is not aksandbox's HTTP module (no %s)", what, path,
		         CLI_HTTP_MODULE_SYMBOL);
	} else if (m->abi != CLI_HTTP_MODULE_ABI || !m->version ||
	           strcmp(m->version, PACKAGE_VERSION) != 0) {
		cli_warn("%s: %s is the HTTP module of aksandbox %s (ABI %u); this is %s (ABI %u): "
		         "reinstall aksandbox",
		         what, path, m->version ? m->version : "?", m->abi, PACKAGE_VERSION,
		         CLI_HTTP_MODULE_ABI);
	} else {
		loaded = m;
		return m;
	}
	dlclose(handle);
	return NULL;
}

int cli_metrics_start(const char *spec, aks_worker_monitor *monitor, cli_metrics **out)
{
	*out = NULL;
	const cli_http_module *m = cli_http_module_load("worker: --metrics");
	return m ? m->metrics_start(spec, monitor, out) : -1;
}

void cli_metrics_stop(cli_metrics *server)
{
	if (server) /* only a started server exists, so the module is loaded */
		cli_http_module_load("worker: --metrics")->metrics_stop(server);
}

int cli_mcp_http_serve(const aks__mcp_http_options *opt, volatile sig_atomic_t *stop)
{
	const cli_http_module *m = cli_http_module_load("mcp: --listen");
	return m ? m->mcp_http_serve(opt, stop) : -1;
}
