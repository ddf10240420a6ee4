/*
 * core/cli/main.c - `aksandbox`: global options, command dispatch and help.
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

struct command {
	const char *name;
	int (*run)(int argc, char *argv[]);
	const char *synopsis; /* after "aksandbox NAME" */
	const char *summary;  /* one line for --help */
	const char *help;     /* the rest of `aksandbox help NAME` */
};

static int cmd_help(int argc, char *argv[]);

static const struct command commands[] = {
    {"run", cli_cmd_run,
     "[--profile P] [--timeout SECONDS | --persist | --session ID] [--] CMD [ARG...]",
     "run a command in a fresh sandbox or a session",
     "Runs CMD with its arguments in a fresh sandbox, which is destroyed afterwards.\n"
     "The arguments are passed literally: they are quoted for the sandbox's shell.\n"
     "The program's stdout and stderr are copied byte for byte, and its exit code\n"
     "is aksandbox's exit status.\n"
     "\n"
     "With --persist or --session, the command runs through the run_command tool\n"
     "in a session of the conversation (--conversation), kept in the state\n"
     "directory, so later invocations find its files: --persist uses the profile's\n"
     "default session (default:PROFILE), --session ID an explicit session (see\n"
     "'aksandbox tool new_sandbox_session'). The output is then the tool's text:\n"
     "UTF-8 (invalid bytes replaced) and cut at tool_output_max_chars, with a\n"
     "message on stderr when cut; notices are printed as 'aksandbox: notice: ...'.\n"
     "The timeout is the profile's policy timeout: --timeout is refused there.\n"
     "\n"
     "Options:\n"
     "  -p, --profile P        the sandbox profile (default: default)\n"
     "  -t, --timeout SECONDS  kill the program after SECONDS (default: the\n"
     "                         profile's policy timeout, 120; 0: no limit)\n"
     "  --persist              run in the profile's default session\n"
     "  -s, --session ID       run in session ID (implies --persist)\n"
     "  -h, --help             show this help\n"},
    {"code", cli_cmd_code,
     "[-l LANG] [--profile P] [--timeout SECONDS | --persist | --session ID] [FILE|-]",
     "run code from FILE or standard input in a fresh sandbox or a session",
     "Reads code from FILE, or from standard input when FILE is '-' or absent, and\n"
     "runs it with the interpreter for LANG in a fresh sandbox. Output and exit\n"
     "status are passed through as with 'aksandbox run'; --persist and --session\n"
     "run it through the run_code tool in a session, as for 'aksandbox run'.\n"
     "\n"
     "Options:\n"
     "  -l, --language LANG    the language of the code (default: python); see\n"
     "                         'aksandbox providers' for what each provider runs\n"
     "  -p, --profile P        the sandbox profile (default: default)\n"
     "  -t, --timeout SECONDS  kill the program after SECONDS (default: 120; 0: none)\n"
     "  --persist              run in the profile's default session\n"
     "  -s, --session ID       run in session ID (implies --persist)\n"
     "  -h, --help             show this help\n"},
    {"providers", cli_cmd_providers, "[--json]",
     "list the plugins on the search path and what they support",
     "Lists every plugin found on the search path (AKS_PLUGIN_PATH, then the\n"
     "installed plugin directory): kind, version, license, capabilities, config\n"
     "keys and file. Files that fail to load are listed with the reason.\n"
     "\n"
     "Options:\n"
     "  --json      print one JSON document instead of text\n"
     "  -h, --help  show this help\n"},
    {"check", cli_cmd_check, "[-c FILE] [--json]",
     "validate the configuration and report what each profile enforces",
     "Loads the configuration as any host would (config.yaml's sandbox: block, with\n"
     "the AK_SANDBOX__... environment overrides), reporting the first error with its\n"
     "file, line and column. Then, for each profile: the plugin and its file, the\n"
     "isolation tier, the lifecycle, the identity rule, and for each policy dimension\n"
     "whether it is enforced, refused (strict) or only warned about (strict: false).\n"
     "Exits 1 when the configuration does not load or any profile would be refused.\n"
     "\n"
     "Options:\n"
     "  -c, --config FILE  the configuration file (default: as for every command)\n"
     "  --json             print one JSON document instead of text\n"
     "  -h, --help         show this help\n"},
    {"gc", cli_cmd_gc, "[-c FILE] [--dry-run] [--json]",
     "destroy the sandboxes no session records (left by a killed host)",
     "Every provider of a configured profile lists the sandboxes it created for\n"
     "this state store (they carry the store's owner label); those that no\n"
     "session records are destroyed, unless the process creating them is still\n"
     "alive. That is what a host killed between creating a sandbox and recording\n"
     "it leaves behind. Sandboxes of other state stores, attached environments\n"
     "and anything without the label are never touched. `aksandbox mcp` and\n"
     "`aksandbox worker` collect by themselves; see docs/gc.md.\n"
     "Exits 0, or 1 when a sandbox could not be destroyed.\n"
     "\n"
     "Options:\n"
     "  -c, --config FILE  the configuration file (as the global -c)\n"
     "  -n, --dry-run      list what would be destroyed, destroy nothing\n"
     "  --json             print the report as one JSON document\n"
     "  -h, --help         show this help\n"},
    {"pool", cli_cmd_pool, "[-c FILE] [--json] [--watch SECONDS]",
     "fill the warm pools of the profiles that have one",
     "For every profile with a pool (pool: {size: N, max_idle: S}), destroys the\n"
     "pooled sandboxes older than max_idle and creates the missing ones with the\n"
     "profile's policy, recorded in the state store. A new session (and `run`)\n"
     "then takes a pooled sandbox instead of waiting for a create. `aksandbox mcp`\n"
     "keeps its pools filled by itself; this command is for hosts that only run\n"
     "the CLI: once (from a timer), or with --watch until SIGINT or SIGTERM, when\n"
     "it also does what mcp's background reaper does (idle resets, gc). See\n"
     "docs/pools.md.\n"
     "Exits 0, or 1 when a pool could not be filled to its size.\n"
     "\n"
     "Options:\n"
     "  -c, --config FILE      the configuration file (as the global -c)\n"
     "  --json                 print the report as one JSON document\n"
     "  -w, --watch SECONDS    keep the pools filled: refill every SECONDS\n"
     "  -h, --help             show this help\n"},
    {"tool", cli_cmd_tool, "NAME [JSON|-]", "call an agent tool and print its JSON result",
     "Calls the agent tool NAME (run_code, run_command, write_sandbox_file,\n"
     "read_sandbox_file, check_sandbox_task, list_sandbox_sessions,\n"
     "new_sandbox_session, destroy_sandbox_session) with the JSON object of its\n"
     "arguments (default {}; '-' reads it from standard input) and prints the\n"
     "JSON result, exactly what an agent would get. Sessions belong to the\n"
     "conversation (--conversation) and persist in the state directory\n"
     "($AKS_STATE_DIR), so successive invocations share them.\n"
     "Exits 0, or 1 when the result is an error ({\"error\": ...}).\n"
     "\n"
     "Options:\n"
     "  -h, --help  show this help\n"},
    {"tools", cli_cmd_tools, "", "print the tools' argument schemas (JSON)",
     "Prints the eight tools as a JSON array of {name, description, parameters},\n"
     "parameters being the JSON Schema of the tool's arguments.\n"},
    {"prompt", cli_cmd_prompt, "", "print the system-prompt guidance for the tools",
     "Prints the guidance an agent's system prompt gets with the tools, for the\n"
     "agent given with --agent (nothing when the agents filter excludes it).\n"},
    {"sessions", cli_cmd_sessions, "", "list the conversation's sandbox sessions (JSON)",
     "Prints list_sandbox_sessions for the conversation: its sessions, then the\n"
     "per_runtime ones.\n"},
    {"mcp", cli_cmd_mcp,
     "[-c FILE] [--conversation ID] [--agent NAME] [--max-calls N] [--wait-timeout S]\n"
     "       [--listen ADDR [--tls-cert FILE --tls-key FILE] [--allow-origin ORIGIN]...\n"
     "       [--grace SECONDS] [--auth [--token-attribute NAME] [--resource-url URL]\n"
     "       [--authorization-server URL]...]]",
     "serve the tools to MCP clients (standard input and output, or HTTP)",
     "Speaks the Model Context Protocol (newline-delimited JSON-RPC 2.0) on\n"
     "standard input and output, offering the eight tools to any MCP client:\n"
     "protocol 2026-07-28 (stateless requests, server/discover) and the\n"
     "initialize handshake of 2025-11-25, 2025-06-18, 2025-03-26 and 2024-11-05.\n"
     "tools/call returns the tool's JSON result as text (isError when it is an\n"
     "error result); notifications/cancelled kills the call's program. The\n"
     "guidance is also the prompt sandbox-guidance and the resource\n"
     "aksandbox://guidance. Standard output carries protocol messages only; logs\n"
     "go to standard error. A disabled sandbox offers no tools.\n"
     "\n"
     "Each server is one conversation: by default this user's for the working\n"
     "directory (mcp-UID-HASH, printed on standard error at start), so a restarted\n"
     "client finds its sandboxes again; --conversation or $AKSANDBOX_CONVERSATION\n"
     "names another. A run that outlasts the wait answers with a pending task\n"
     "(check_sandbox_task polls it); one whose request carries a progressToken\n"
     "streams its output, hears \"still running\" every 10 s of silence and\n"
     "answers when it ends. Ends, cancelling what still runs, at the end of its\n"
     "input. See docs/mcp.md for client configuration.\n"
     "\n"
     "With --listen it serves MCP's Streamable HTTP transport at /mcp instead:\n"
     "each initialize opens a session (Mcp-Session-Id), a tools/call answers as\n"
     "server-sent events that a client resumes with Last-Event-ID, DELETE ends\n"
     "the session. ADDR is [HOST:]PORT (HOST 127.0.0.1 by default; PORT 0 picks\n"
     "one, logged at start), [V6]:PORT, or unix:PATH (a socket only this user may\n"
     "use). Without --auth only loopback addresses are accepted. With --auth\n"
     "every request carries Authorization: Bearer TOKEN, which the configured\n"
     "principal resolver (signed_token) must resolve to a user, else 401 with a\n"
     "challenge naming the protected-resource metadata (served at\n"
     "/.well-known/oauth-protected-resource/mcp); each user's sessions are theirs\n"
     "alone, in the conversation CONVERSATION:SUBJECT, and their calls run as\n"
     "them. SIGTERM (or SIGINT) stops taking connections, gives running calls\n"
     "--grace seconds (default 10) to finish, cancels the rest and exits.\n"
     "\n"
     "Options:\n"
     "  -c, --config FILE    the configuration file (as the global -c)\n"
     "  --conversation ID    the conversation to act in instead of the default\n"
     "  --agent NAME         the agent the tools act for (agents filter, principal)\n"
     "  --max-calls N        tool calls allowed to run at once (default 16);\n"
     "                       more are refused with a JSON-RPC error\n"
     "  --wait-timeout S     seconds a run without a progressToken waits before\n"
     "                       it is a pending task (default: 45, or the broker's\n"
     "                       wait_timeout when smaller; 0: at once)\n"
     "  --listen ADDR        serve Streamable HTTP on ADDR instead of stdio\n"
     "  --tls-cert FILE      with --tls-key: serve HTTPS with this PEM certificate\n"
     "  --tls-key FILE       ... and this PEM private key\n"
     "  --allow-origin ORIGIN  a browser Origin allowed besides loopback ones\n"
     "                       (requests with any other Origin get 403; repeatable)\n"
     "  --grace SECONDS      at SIGTERM, how long running calls may finish (10)\n"
     "  --auth               require bearer tokens (see above)\n"
     "  --token-attribute NAME  the resolver attribute the token is given as\n"
     "                       (default token: signed_token's `attribute`)\n"
     "  --resource-url URL   this server's URL as clients reach it (metadata)\n"
     "  --authorization-server URL  an authorization server that issues the\n"
     "                       tokens, for the metadata (repeatable)\n"
     "  -h, --help           show this help\n"},
    {"worker", cli_cmd_worker,
     "[-c FILE] [--once | --check] [--grace SECONDS] [--metrics [HOST:]PORT]",
     "run a queue broker worker (sandbox.broker.flavor: queue)",
     "Takes the operations agents send through sandbox.broker.queue, runs them\n"
     "on this machine's profiles (their policy and gates apply) and sends the\n"
     "completions back to sandbox.broker.response_store; also destroys sandboxes\n"
     "idle longer than their profile's idle_timeout. Run as many as you like,\n"
     "on as many machines: the transport keeps each sandbox session's\n"
     "operations in order, one at a time, across all of them.\n"
     "\n"
     "SIGTERM or SIGINT stops it cleanly: no new work is taken, operations in\n"
     "flight get the grace to finish and have their completions sent, and what\n"
     "is left is handed back to the transport for another worker. Exits 0 after\n"
     "a clean stop, 125 when it cannot start (the message says why).\n"
     "See docs/queue.md.\n"
     "\n"
     "Options:\n"
     "  -c, --config FILE    the configuration file (as the global -c)\n"
     "  --once               drain both queues, then exit (batch or cron use)\n"
     "  --check              check that the configuration is a worker's and that\n"
     "                       the transport and response store answer, then exit\n"
     "                       (0: healthy); for supervisors and readiness probes\n"
     "  --grace SECONDS      how long in-flight work may finish after a stop\n"
     "                       signal (default 30)\n"
     "  --metrics [HOST:]PORT  serve /metrics (Prometheus: queue depth, operations\n"
     "                       in flight, counters), /healthz and /readyz over HTTP\n"
     "                       there (HOST 127.0.0.1 unless given; PORT 0: any)\n"
     "  -h, --help           show this help\n"},
    {"help", cmd_help, "[COMMAND]", "show help for aksandbox or one of its commands", ""},
};
#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static const char exit_status_help[] =
    "Exit status of run and code:\n"
    "  the program's exit code, or\n"
    "  2    usage error\n"
    "  124  the timeout expired (the program was killed)\n"
    "  125  aksandbox itself failed (configuration, plugin, provider)\n"
    "  128+N  cancelled by signal N (130 for SIGINT, 143 for SIGTERM)\n";

static const struct command *find_command(const char *name)
{
	for (size_t i = 0; i < N_COMMANDS; i++) {
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	}
	return NULL;
}

/* Edit distance, for "did you mean" hints. */
static size_t distance(const char *a, const char *b)
{
	size_t lb = strlen(b), row[64];
	if (lb >= sizeof(row) / sizeof(row[0]) || strlen(a) >= 64)
		return (size_t)-1;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; a[i - 1]; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t best = diag + (a[i - 1] != b[j - 1]);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

void cli_usage_hint(const char *command)
{
	if (command && find_command(command))
		fprintf(stderr, "Try 'aksandbox help %s'.\n", command);
	else
		fprintf(stderr, "Try 'aksandbox --help'.\n");
}

int cli_option_error(int argc, char *argv[], int c)
{
	const char *opt = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
	char short_opt[3] = {'-', (char)optopt, '\0'};

	/* An unknown short option may sit inside a cluster (-jx): name it alone. */
	if (c == '?' && optopt)
		opt = short_opt;
	if (c == ':')
		cli_warn("%s: option '%s' needs an argument", argv[0], opt);
	else
		cli_warn("%s: unknown option '%s'", argv[0], opt);
	cli_usage_hint(argv[0]);
	return CLI_EXIT_USAGE;
}

static void print_usage(FILE *f)
{
	fprintf(f, "Usage: aksandbox [--version] [--help] COMMAND [ARGS...]\n"
	           "\n"
	           "Runs code and commands for AI agents in sandboxes provided by plugins.\n"
	           "\n"
	           "Commands:\n");
	for (size_t i = 0; i < N_COMMANDS; i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\n"
	           "The configuration is config.yaml's sandbox: block, read from -c FILE, else\n"
	           "$AKSANDBOX_CONFIG, else ./config.yaml, else ~/.config/aksandbox/config.yaml,\n"
	           "else /etc/aksandbox/config.yaml. With none of them, one profile exists:\n"
	           "'default', the local_subprocess provider (no isolation). run and code use a\n"
	           "fresh sandbox per call unless given --persist or --session; those, tool and\n"
	           "sessions keep the conversation's sessions in the state directory\n"
	           "($AKS_STATE_DIR, default ~/.local/state/aksandbox).\n"
	           "\n"
	           "Options:\n"
	           "  -c, --config FILE  the configuration file\n"
	           "  --conversation ID  the conversation the tools act in (default:\n"
	           "                     $AKSANDBOX_CONVERSATION, else 'cli')\n"
	           "  --agent NAME       the agent the tools act for (principal, agents filter)\n"
	           "  -h, --help         show this help\n"
	           "  -V, --version      show the version and the plugin ABI\n"
	           "\n"
	           "Run 'aksandbox help COMMAND' for a command's options.\n");
}

void cli_print_help(const char *name)
{
	const struct command *cmd = name ? find_command(name) : NULL;
	if (!cmd || strcmp(cmd->name, "help") == 0) {
		print_usage(stdout);
		return;
	}
	printf("Usage: aksandbox %s %s\n\n%s", cmd->name, cmd->synopsis, cmd->help);
	if (cmd->run == cli_cmd_run || cmd->run == cli_cmd_code)
		printf("\n%s", exit_status_help);
}

static int cmd_help(int argc, char *argv[])
{
	if (argc > 2) {
		cli_warn("help: unexpected argument '%s'", argv[2]);
		cli_usage_hint("help");
		return CLI_EXIT_USAGE;
	}
	if (argc == 2 && !find_command(argv[1])) {
		cli_warn("help: unknown command '%s'", argv[1]);
		cli_usage_hint(NULL);
		return CLI_EXIT_USAGE;
	}
	cli_print_help(argc == 2 ? argv[1] : NULL);
	return CLI_EXIT_OK;
}

static void print_version(void)
{
	printf("aksandbox %s\n"
	       "plugin ABI %d.%d\n"
	       "plugin directory %s\n",
	       aks_version(), AKS_ABI_MAJOR, AKS_ABI_MINOR, aks_plugin_dir());
}

static int unknown_command(const char *name)
{
	const char *best = NULL;
	size_t best_d = 3; /* suggest only close misspellings */
	for (size_t i = 0; i < N_COMMANDS; i++) {
		size_t d = distance(name, commands[i].name);
		if (d < best_d) {
			best_d = d;
			best = commands[i].name;
		}
	}
	cli_warn("unknown command '%s'", name);
	if (best)
		fprintf(stderr, "Did you mean 'aksandbox %s'?\n", best);
	cli_usage_hint(NULL);
	return CLI_EXIT_USAGE;
}

int main(int argc, char *argv[])
{
	static const struct option options[] = {
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {"config", required_argument, NULL, 'c'},
	    {"conversation", required_argument, NULL, 'C'},
	    {"agent", required_argument, NULL, 'A'},
	    {NULL, 0, NULL, 0},
	};
	int c;

	/* Our stderr carries the program's stderr byte for byte, so the library's
	 * warnings (local_subprocess warns on every start that it does not
	 * isolate) stay quiet unless the user asks for them. */
	if (!getenv("AKS_LOG_LEVEL"))
		aks_log_set_level(AKS_LOG_ERROR);

	/* '+': stop at the command, whose own options are parsed by it. */
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:hVc:", options, NULL)) != -1) {
		switch (c) {
		case 'c':
			cli_config_path = optarg;
			break;
		case 'C':
			cli_conversation = optarg;
			break;
		case 'A':
			cli_agent = optarg;
			break;
		case ':':
			cli_warn("option '%s' needs an argument", argv[optind - 1]);
			cli_usage_hint(NULL);
			return CLI_EXIT_USAGE;
		case 'h':
			print_usage(stdout);
			return CLI_EXIT_OK;
		case 'V':
			print_version();
			return CLI_EXIT_OK;
		default: {
			char opt[3] = {'-', (char)optopt, '\0'};
			cli_warn("unknown option '%s'", optopt ? opt : argv[optind - 1]);
			cli_usage_hint(NULL);
			return CLI_EXIT_USAGE;
		}
		}
	}
	if (optind >= argc) {
		cli_warn("missing command");
		print_usage(stderr);
		return CLI_EXIT_USAGE;
	}

	const struct command *cmd = find_command(argv[optind]);
	if (!cmd)
		return unknown_command(argv[optind]);
	return cmd->run(argc - optind, argv + optind);
}
