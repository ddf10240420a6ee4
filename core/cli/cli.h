/*
 * core/cli/cli.h - the pieces of the aksandbox command line.
 *
 * The CLI uses only the public embedding API (<aksandbox/aksandbox.h>). Its
 * parts are kept apart so later work can swap one without touching the
 * others:
 *  - the runtime (runtime.c): which profiles exist and the provider, policy
 *    and principal behind each, from config.yaml or the embedded default.
 *  - the commands (cmd_*.c): argument parsing and output, one file per verb.
 *  - util.c: error records, output writing, shell quoting.
 */
#ifndef AKS_CORE_CLI_CLI_H
#define AKS_CORE_CLI_CLI_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include <aksandbox/aksandbox.h>

/* Exit statuses, as timeout(1) and env(1) use them. */
enum {
	CLI_EXIT_OK = 0,
	CLI_EXIT_FAILURE = 1,   /* e.g. `providers` could not write its output */
	CLI_EXIT_USAGE = 2,     /* bad command line */
	CLI_EXIT_TIMEOUT = 124, /* the deadline passed; the program was killed */
	CLI_EXIT_ERROR = 125,   /* the machinery failed (config, plugin, provider) */
	CLI_EXIT_SIGNAL = 128   /* + the signal number that cancelled the call */
};

/* ---- errors ---------------------------------------------------------------- */

/*
 * The CLI's own error record. The embedding API gives no way to construct an
 * aks_error, and the runtime must report errors of its own (an unknown
 * profile), so the CLI copies library errors into this.
 */
typedef struct cli_error {
	int code; /* aks_status */
	char message[1024];
} cli_error;

int cli_error_set(cli_error *err, int code, const char *fmt, ...) AKS_PRINTF(3, 4);
/* Copies `src` into `err` (or a generic text for `code` when src is NULL),
 * frees `src`, and returns `code`. */
int cli_error_take(cli_error *err, int code, aks_error *src);
/* Prints "aksandbox: <message>" on stderr. */
void cli_error_print(const cli_error *err);

/* ---- output ------------------------------------------------------------------ */

/* Writes every byte to `fd`, retrying after EINTR. 0 or -1 with errno set. */
int cli_write_all(int fd, const void *data, size_t len);
/* "aksandbox: <text>\n" on stderr. */
void cli_warn(const char *fmt, ...) AKS_PRINTF(1, 2);

/* `aksandbox worker --metrics` (worker_metrics.c, in aksandbox-http.so: http_load.c loads
 * it): an HTTP server over a worker monitor (borrowed), started before aks_worker_run and
 * stopped after it. Start says where it listens on stderr; -1 after saying why it cannot. */
typedef struct cli_metrics cli_metrics;
int cli_metrics_start(const char *spec, aks_worker_monitor *monitor, cli_metrics **out);
void cli_metrics_stop(cli_metrics *m);
/* `aksandbox mcp --listen`: aks__mcp_http_serve, in aksandbox-http.so; -1 after saying why
 * the module cannot be loaded. */
struct aks__mcp_http_options;
int cli_mcp_http_serve(const struct aks__mcp_http_options *opt, volatile sig_atomic_t *stop);
struct json_object;
/* A command's JSON report on stdout: as is with `json`, else print_text of it parsed. Returns
 * CLI_EXIT_OK or CLI_EXIT_FAILURE (the output could not be written); *parsed is the parsed
 * report (the caller's; NULL when it does not parse). */
int cli_print_report(const char *text, bool json, void (*print_text)(struct json_object *),
                     struct json_object **parsed);

/*
 * Joins argv into one POSIX shell command that runs exactly that argv: every
 * word that is not made of safe characters only is single-quoted. Returns a
 * malloc'ed string, or NULL when out of memory.
 */
char *cli_shell_join(int argc, char *const argv[]);

/* ---- the configuration ----------------------------------------------------------- */

/* The config file to load (aks_settings_locate with -c): malloc'ed, or NULL for the embedded
 * default. A file skipped at a default place is named on stderr. */
char *cli_find_config(void);

/* ---- the runtime: profiles and the providers behind them -------------------- */

typedef enum cli_scope {
	CLI_SCOPE_PER_CALL = 0 /* create a sandbox, run, destroy it */
} cli_scope;

/* A resolved profile. Everything is owned by the runtime. */
typedef struct cli_profile {
	const char *name;
	aks_provider *provider;   /* opened on first use */
	const aks_policy *policy; /* policy->timeout is the default timeout */
	const aks_principal *principal;
	cli_scope scope;
	const aks_profile *profile;
	/* Claims what is created in the state store, so gc collects it after a kill (NULL: the
	 * store could not be opened, or the sandbox is disabled: created unclaimed). */
	aks_runtime *runtime;
} cli_profile;

typedef struct cli_runtime cli_runtime;

/* The config file given with -c FILE (NULL: aks_settings_find_file decides). */
extern const char *cli_config_path;

/* Loads the configuration (-c FILE, $AKSANDBOX_CONFIG, the default locations,
 * or the embedded default: one profile `default`, the local_subprocess
 * provider in process), validating every profile and opening its provider. */
int cli_runtime_open(cli_runtime **out, cli_error *err);
/* Resolves a profile by name (NULL: the default profile), resolves the CLI's
 * principal and passes both gates. An unknown name is AKS_ECONFIG, naming the
 * configured ones. The CLI runs every call in a fresh sandbox (per_call)
 * whatever the profile's scope: it keeps no sessions between invocations yet. */
int cli_runtime_get_profile(cli_runtime *rt, const char *name, const cli_profile **out,
                            cli_error *err);
void cli_runtime_close(cli_runtime *rt);

/* ---- commands ------------------------------------------------------------------ */

/* Each takes the argv that starts with the command's name and returns the
 * process's exit status. */
int cli_cmd_providers(int argc, char *argv[]);
int cli_cmd_run(int argc, char *argv[]);
int cli_cmd_worker(int argc, char *argv[]);
int cli_cmd_code(int argc, char *argv[]);
int cli_cmd_check(int argc, char *argv[]);
/* cmd_gc.c: the garbage collector over the state store. */
int cli_cmd_gc(int argc, char *argv[]);
int cli_cmd_pool(int argc, char *argv[]);
/* cmd_tool.c: the agent tools over the state directory's sessions. */
int cli_cmd_tool(int argc, char *argv[]);
int cli_cmd_tools(int argc, char *argv[]);
int cli_cmd_prompt(int argc, char *argv[]);
int cli_cmd_sessions(int argc, char *argv[]);
/* cmd_mcp.c: the tools as an MCP server on stdin/stdout. */
int cli_cmd_mcp(int argc, char *argv[]);

/* The tool runtime over the configuration (-c FILE, ...) and the state
 * directory, as `tool` uses it; `run`/`code` use it for --session/--persist. */
typedef struct cli_tool_host {
	aks_settings *settings;
	aks_runtime *rt;
} cli_tool_host;

/* 0, or -1 after printing why on stderr. */
int cli_tool_host_open(cli_tool_host *h);
void cli_tool_host_close(cli_tool_host *h);

/* --conversation ID and --agent NAME (NULL when not given). */
extern const char *cli_conversation;
extern const char *cli_agent;
/* --conversation, else $AKSANDBOX_CONVERSATION, else "cli". */
const char *cli_get_conversation(void);

/* Help texts and usage errors (main.c). */
void cli_usage_hint(const char *command);
/* Reports what getopt_long (with opterr = 0 and ':' leading the option
 * string) returned as `c` ('?' or ':'), and returns CLI_EXIT_USAGE. */
int cli_option_error(int argc, char *argv[], int c);
void cli_print_help(const char *command);

#endif /* AKS_CORE_CLI_CLI_H */
