/* tests/unit/settings_fixture.h - the config-file fixture of the settings tests. */
#ifndef AKS_TESTS_SETTINGS_FIXTURE_H
#define AKS_TESTS_SETTINGS_FIXTURE_H

#include <limits.h>

#include <aksandbox/aksandbox.h>

extern char settings_dir[];
extern char config_path[PATH_MAX];
extern const char *const no_env[];

/* cmocka group setup and teardown: the temporary directory, the stub providers on the path. */
int settings_setup(void **state);
int settings_teardown(void **state);

void write_config(const char *yaml);
/* Loads that must succeed (failing the test otherwise). */
aks_settings *load_ok_env(const char *yaml, const char *const *env);
aks_settings *load_ok(const char *yaml);
/* Loads that must fail with `code`: the error text, the file's path replaced by "config.yaml"
 * (the caller frees it). */
char *load_err_env(const char *yaml, const char *const *env, int code);
char *load_err(const char *yaml);

#define EXPECT_ERROR(yaml, expected)                                                               \
	do {                                                                                       \
		char *msg_ = load_err(yaml);                                                       \
		assert_string_equal(msg_, expected);                                               \
		free(msg_);                                                                        \
	} while (0)

#endif /* AKS_TESTS_SETTINGS_FIXTURE_H */
