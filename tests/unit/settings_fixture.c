/* The config-file fixture of the settings tests: a temporary config.yaml, loads that must
 * succeed or fail (with the error text, the file's path shown as "config.yaml"), and the stub
 * providers on the plugin path. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "settings_fixture.h"

char settings_dir[] = "/tmp/aks-settings-XXXXXX";
char config_path[PATH_MAX];
const char *const no_env[] = {NULL};

int settings_setup(void **state)
{
	(void)state;
	if (!mkdtemp(settings_dir))
		return -1;
	snprintf(config_path, sizeof(config_path), "%s/config.yaml", settings_dir);
	/* The stub providers (docker, kubernetes, ec2_ssm, ...) join the path. */
	const char *build = getenv("AKS_TEST_BUILDDIR"), *path = getenv("AKS_PLUGIN_PATH");
	char *joined = NULL;
	if (!build ||
	    asprintf(&joined, "%s/tests/plugins/stubs/.libs:%s", build, path ? path : "") < 0)
		return -1;
	setenv("AKS_PLUGIN_PATH", joined, 1);
	free(joined);
	return 0;
}

int settings_teardown(void **state)
{
	(void)state;
	unlink(config_path);
	rmdir(settings_dir);
	return 0;
}

void write_config(const char *yaml)
{
	FILE *f = fopen(config_path, "w");
	assert_non_null(f);
	fputs(yaml, f);
	fclose(f);
}

aks_settings *load_ok_env(const char *yaml, const char *const *env)
{
	write_config(yaml);
	aks_settings *s = NULL;
	aks_error *err = NULL;
	if (aks_settings_load(config_path, env, &s, &err) != AKS_OK)
		fail_msg("unexpected error: %s", aks_error_message(err));
	return s;
}

aks_settings *load_ok(const char *yaml)
{
	return load_ok_env(yaml, no_env);
}

/* The error text, with the config file's path replaced by "config.yaml". */
char *load_err_env(const char *yaml, const char *const *env, int code)
{
	write_config(yaml);
	aks_settings *s = NULL;
	aks_error *err = NULL;
	int rc = aks_settings_load(config_path, env, &s, &err);
	if (rc != code)
		fail_msg("expected %d, got %d: %s", code, rc, err ? aks_error_message(err) : "");
	assert_null(s);
	const char *msg = aks_error_message(err);
	char *out = calloc(1, strlen(msg) + 1);
	const char *p = strstr(msg, config_path);
	if (p) {
		memcpy(out, msg, (size_t)(p - msg));
		strcat(out, "config.yaml");
		strcat(out, p + strlen(config_path));
	} else {
		strcpy(out, msg);
	}
	aks_error_free(err);
	return out;
}

char *load_err(const char *yaml)
{
	return load_err_env(yaml, no_env, AKS_ECONFIG);
}
