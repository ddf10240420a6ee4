/*
 * path_liar.so - the fake provider with a real workspace on the host (a directory per
 * sandbox, where its python3 programs run), whose file operations join the path to it
 * without a thought: "..", an absolute path and a symlink planted by the sandbox's own code
 * all leave the workspace. aksandbox-plugin-check must fail file_paths, naming what got
 * out (tests/plugins/runner-rejects.test).
 */
#define FAKE_PLUGIN_NAME "path_liar"
/* fake.c's in-memory file operations are replaced, not used. */
#pragma GCC diagnostic ignored "-Wunused-function"
#define LEAKY_CHILD_NO_DESCRIPTOR
#define LEAKY_CHILD_LEAKS_NOTHING
#include "leaky_child.c"

#include <ftw.h>
#include <limits.h>
#include <sys/stat.h>

/* The sandbox's workspace: /tmp/aks-path-liar-<id>, made on first use. */
static const char *workspace(aks_sandbox_impl *sb, char *buf, size_t size)
{
	snprintf(buf, size, "/tmp/aks-path-liar-%s", fake_sandbox_id(sb));
	mkdir(buf, 0700);
	return buf;
}

/* The bug: an absolute path is taken as it is, anything else is joined to the workspace. */
static void join(aks_sandbox_impl *sb, const char *path, char *buf, size_t size)
{
	char ws[128];
	int n = path[0] == '/' ? snprintf(buf, size, "%s", path)
	                       : snprintf(buf, size, "%s/%s", workspace(sb, ws, sizeof(ws)), path);
	if (n < 0 || (size_t)n >= size)
		buf[0] = '\0'; /* too long: fopen("") fails */
}

static int liar_execute_code(aks_sandbox_impl *sb, const char *code, const char *language,
                             const aks_call *call, aks_result *out, aks_error **err)
{
	char ws[PATH_MAX];
	if (strcmp(language, "python") != 0)
		return fake_execute_code(sb, code, language, call, out, err);
	return leaky_run_in(sb, code, false, workspace(sb, ws, sizeof(ws)), call, out, err);
}

static int liar_upload_file(aks_sandbox_impl *sb, const char *path, const void *data, size_t len,
                            const aks_call *call, aks_error **err)
{
	char p[PATH_MAX];
	(void)call;
	join(sb, path, p, sizeof(p));
	FILE *f = fopen(p, "w");
	if (!f)
		return sb->prov->host->error_set(err, AKS_EIO, "%s: %s", path, strerror(errno));
	fwrite(data, 1, len, f);
	fclose(f);
	return AKS_OK;
}

static int liar_download_file(aks_sandbox_impl *sb, const char *path, const aks_call *call,
                              aks_result *out, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	char p[PATH_MAX], data[4096];
	(void)call;
	join(sb, path, p, sizeof(p));
	FILE *f = fopen(p, "r");
	if (!f)
		return host->error_set(err, AKS_ENOTFOUND, "%s: %s", path, strerror(errno));
	size_t n = fread(data, 1, sizeof(data), f);
	fclose(f);
	int rc = host->result_add_file(out, path, "application/octet-stream");
	if (rc != AKS_OK)
		return host->error_set(err, rc, "cannot add '%s' to the result", path);
	return host->result_write(out, AKS_STREAM_FILE, data, n, err);
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	remove(path);
	return 0;
}

static int liar_destroy(aks_provider_impl *prov, const char *sandbox_id, const aks_call *call,
                        aks_error **err)
{
	char ws[PATH_MAX];
	snprintf(ws, sizeof(ws), "/tmp/aks-path-liar-%s", sandbox_id);
	if (!strchr(sandbox_id, '/'))
		nftw(ws, remove_one, 16, FTW_DEPTH | FTW_PHYS);
	return fake_destroy(prov, sandbox_id, call, err);
}

static const aks_sandbox_ops liar_sandbox_ops = {
    .struct_version = AKS_SANDBOX_OPS_VERSION,
    .struct_size = sizeof(aks_sandbox_ops),
    .id = fake_sandbox_id,
    .execute_code = liar_execute_code,
    .execute_command = fake_execute_command,
    .upload_file = liar_upload_file,
    .download_file = liar_download_file,
    .close = fake_close,
};

static const char *const liar_languages[] = {"python", NULL};

static const aks_capabilities liar_capabilities = {
    .struct_version = AKS_CAPABILITIES_VERSION,
    .struct_size = sizeof(aks_capabilities),
    .isolation = AKS_ISOLATION_NONE,
    .languages = liar_languages,
    .shell = true,
    .files = true,
    .attach = true,
    .provisions = true,
};

static const aks_provider_ops liar_provider_ops = {
    .struct_version = AKS_PROVIDER_OPS_VERSION,
    .struct_size = sizeof(aks_provider_ops),
    .capabilities = &liar_capabilities,
    .init = fake_init,
    .fini = fake_fini,
    .create = fake_create,
    .attach = fake_attach,
    .destroy = liar_destroy,
    .sandbox = &liar_sandbox_ops,
};

AKS_PLUGIN_DEFINE(AKS_PLUGIN_PROVIDER, "path_liar", "1.0", "Apache-2.0",
                  "lets its file operations leave the workspace (tests only)", NULL,
                  &liar_provider_ops);
