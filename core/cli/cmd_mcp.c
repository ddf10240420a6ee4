/*
 * core/cli/cmd_mcp.c - `aksandbox mcp`: the eight tools as a Model Context
 * Protocol server on standard input and output, or over Streamable HTTP with
 * --listen (see core/mcp/ and docs/mcp.md). Standard output carries protocol
 * messages only; everything else goes to standard error.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "mcp/mcp.h"

/* How often the idle reaper runs while the server is up. */
#define MCP_REAP_INTERVAL 60.0
/* --allow-origin may be given this many times. */
#define MCP_MAX_ORIGINS 16

static volatile sig_atomic_t stop_requested;

static void on_signal(int signo)
{
	(void)signo;
	stop_requested = 1;
}

static int write_stdout(void *userdata, void *route, const char *line, size_t len)
{
	(void)userdata;
	(void)route;
	return cli_write_all(STDOUT_FILENO, line, len);
}

/*
 * The conversation a client gets unless it names one: "mcp-<uid>-<16 hex digits>", the hex a
 * hash of the working directory's real path. A client that is restarted (Claude Code starts
 * its servers in the project's folder, Claude Desktop in one of its own) finds the sandboxes
 * its agent made before, and two projects of one user do not share theirs.
 */
static int default_conversation_id(char *out, size_t size)
{
	char *cwd = realpath(".", NULL);
	if (!cwd)
		return -1;
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a: a name, not a secret */
	for (const unsigned char *p = (const unsigned char *)cwd; *p; p++)
		h = (h ^ *p) * 0x100000001b3ull;
	free(cwd);
	int n =
	    snprintf(out, size, "mcp-%lu-%016llx", (unsigned long)getuid(), (unsigned long long)h);
	return n > 0 && (size_t)n < size ? 0 : -1;
}

/* A number of seconds from 0 to a day, for --wait-timeout. */
static int parse_seconds(const char *text, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(text, &end);
	if (errno || end == text || *end || !(v >= 0 && v <= 86400))
		return -1;
	*out = v;
	return 0;
}

/* $AKSANDBOX_MCP_HEARTBEAT_MS: the tests' short heartbeat (100 to 600000); 0, the default. */
static unsigned heartbeat_ms(void)
{
	const char *v = getenv("AKSANDBOX_MCP_HEARTBEAT_MS");
	char *end;
	unsigned long ms = v && *v ? strtoul(v, &end, 10) : 0;
	if (!v || !*v || *end || ms < 100 || ms > 600000)
		return 0;
	return (unsigned)ms;
}

/* Says on stderr what is served: the conversation, the config, and what is off or unsafe. */
static void log_start(cli_tool_host *h, const char *conversation, bool per_user)
{
	const char *file = aks_settings_get_file(h->settings);
	char *abs = file ? realpath(file, NULL) : NULL;
	const char *config = abs ? abs : file ? file : "(built-in default)";
	/* Under --auth each user acts in a conversation of their own, never in this one. */
	if (per_user)
		cli_warn("mcp: serving conversations '%s:<user>', one per authenticated user "
		         "(config %s)",
		         conversation, config);
	else
		cli_warn("mcp: serving conversation '%s' (config %s); other clients join it with "
		         "--conversation %s",
		         conversation, config, conversation);
	free(abs);
	if (!aks_settings_is_enabled(h->settings))
		cli_warn("mcp: the sandbox is disabled in this configuration (sandbox.enabled is "
		         "not true): no tools are offered");
	/* A client started in a directory without a config (a desktop client's default) would
	 * otherwise run its agent's code on this machine without a word to the operator. */
	if (!aks_settings_get_file(h->settings))
		cli_warn("mcp: no configuration file was found, so the built-in default serves: "
		         "local_subprocess, which does NOT isolate (programs run on this machine "
		         "with your rights); give one with -c or $AKSANDBOX_CONFIG (docs/cli.md)");
}

int cli_cmd_mcp(int argc, char *argv[])
{
	static const struct option options[] = {
	    {"help", no_argument, NULL, 'h'},
	    {"config", required_argument, NULL, 'c'},
	    {"conversation", required_argument, NULL, 'C'},
	    {"agent", required_argument, NULL, 'A'},
	    {"max-calls", required_argument, NULL, 'M'},
	    {"wait-timeout", required_argument, NULL, 'W'},
	    {"listen", required_argument, NULL, 'L'},
	    {"tls-cert", required_argument, NULL, 'T'},
	    {"tls-key", required_argument, NULL, 'K'},
	    {"allow-origin", required_argument, NULL, 'O'},
	    {"grace", required_argument, NULL, 'G'},
	    {"auth", no_argument, NULL, 'U'},
	    {"token-attribute", required_argument, NULL, 'N'},
	    {"resource-url", required_argument, NULL, 'R'},
	    {"authorization-server", required_argument, NULL, 'S'},
	    {NULL, 0, NULL, 0},
	};
	aks__mcp_http_options http = {.drain_seconds = AKS_MCP_HTTP_DRAIN};
	const char *origins[MCP_MAX_ORIGINS + 1] = {NULL};
	size_t n_origins = 0;
	const char *auth_servers[MCP_MAX_ORIGINS + 1] = {NULL};
	size_t n_auth_servers = 0;
	bool grace_given = false, auth = false;
	long max_calls = AKS_MCP_DEFAULT_MAX_CALLS;
	double wait_timeout = 0; /* the server's default */
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:hc:", options, NULL)) != -1) {
		switch (c) {
		case 'h':
			cli_print_help(argv[0]);
			return CLI_EXIT_OK;
		case 'c':
			cli_config_path = optarg;
			break;
		case 'C':
			cli_conversation = optarg;
			break;
		case 'A':
			cli_agent = optarg;
			break;
		case 'M': {
			char *end;
			errno = 0;
			max_calls = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || max_calls < 1 || max_calls > 1024) {
				cli_warn("mcp: --max-calls wants a number from 1 to 1024, not '%s'",
				         optarg);
				cli_usage_hint("mcp");
				return CLI_EXIT_USAGE;
			}
			break;
		}
		case 'W':
			if (parse_seconds(optarg, &wait_timeout) < 0) {
				cli_warn("mcp: --wait-timeout wants a number of seconds from 0 to "
				         "86400, "
				         "not '%s'",
				         optarg);
				cli_usage_hint("mcp");
				return CLI_EXIT_USAGE;
			}
			if (wait_timeout == 0)
				wait_timeout = AKS_MCP_WAIT_NONE;
			break;
		case 'L':
			http.listen = optarg;
			break;
		case 'U':
			auth = true;
			break;
		case 'N':
			http.token_attribute = optarg;
			break;
		case 'R':
			http.resource_url = optarg;
			break;
		case 'S':
			if (n_auth_servers == MCP_MAX_ORIGINS || strncmp(optarg, "http", 4) != 0) {
				cli_warn(
				    "mcp: --authorization-server wants a URL (at most %d), not "
				    "'%s'",
				    MCP_MAX_ORIGINS, optarg);
				cli_usage_hint("mcp");
				return CLI_EXIT_USAGE;
			}
			auth_servers[n_auth_servers++] = optarg;
			break;
		case 'G': {
			double grace;
			if (parse_seconds(optarg, &grace) < 0 || grace != (unsigned)grace) {
				cli_warn(
				    "mcp: --grace wants a whole number of seconds from 0 to 86400, "
				    "not '%s'",
				    optarg);
				cli_usage_hint("mcp");
				return CLI_EXIT_USAGE;
			}
			http.drain_seconds = (unsigned)grace;
			grace_given = true;
			break;
		}
		case 'T':
			http.tls_cert = optarg;
			break;
		case 'K':
			http.tls_key = optarg;
			break;
		case 'O':
			if (n_origins == MCP_MAX_ORIGINS || strncmp(optarg, "http", 4) != 0 ||
			    !strstr(optarg, "://")) {
				cli_warn("mcp: --allow-origin wants an origin such as "
				         "https://app.example (at most %d), not '%s'",
				         MCP_MAX_ORIGINS, optarg);
				cli_usage_hint("mcp");
				return CLI_EXIT_USAGE;
			}
			origins[n_origins++] = optarg;
			break;
		default:
			return cli_option_error(argc, argv, c);
		}
	}
	if (optind < argc) {
		cli_warn("mcp: unexpected argument '%s'", argv[optind]);
		cli_usage_hint("mcp");
		return CLI_EXIT_USAGE;
	}
	bool auth_options = http.token_attribute || http.resource_url || n_auth_servers;
	if (!http.listen && (http.tls_cert || http.tls_key || n_origins || grace_given || auth)) {
		cli_warn("mcp: --tls-cert, --tls-key, --allow-origin, --grace and --auth go with "
		         "--listen");
		cli_usage_hint("mcp");
		return CLI_EXIT_USAGE;
	}
	if (auth_options && !auth) {
		cli_warn(
		    "mcp: --token-attribute, --resource-url and --authorization-server go with "
		    "--auth");
		cli_usage_hint("mcp");
		return CLI_EXIT_USAGE;
	}
	http.allowed_origins = origins;
	http.authorization_servers = auth_servers;

	/* --conversation; else $AKSANDBOX_CONVERSATION; else this user's for this directory. */
	char stable[64];
	const char *conversation = cli_conversation;
	const char *env = getenv("AKSANDBOX_CONVERSATION");
	if (!conversation && env && *env)
		conversation = env;
	if (!conversation) {
		if (default_conversation_id(stable, sizeof(stable)) < 0) {
			cli_warn("mcp: cannot resolve the working directory for the default "
			         "conversation: %s; give one with --conversation",
			         strerror(errno));
			return CLI_EXIT_ERROR;
		}
		conversation = stable;
	}
	if (!*conversation || conversation[0] == '@') {
		cli_warn("mcp: invalid conversation id '%s' (ids starting with '@' are reserved)",
		         conversation);
		return CLI_EXIT_USAGE;
	}

	/* A client that goes away must not kill us mid-call: writes fail instead. */
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal; /* no SA_RESTART: poll() returns at once */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);

	cli_tool_host h;
	if (cli_tool_host_open(&h) < 0)
		return CLI_EXIT_ERROR;
	aks_error *e = NULL;
	if (aks_runtime_start_reaper(h.rt, MCP_REAP_INTERVAL, &e) < 0) {
		cli_warn("mcp: the idle reaper did not start: %s", aks_error_message(e));
		aks_error_free(e);
	}

	aks__mcp_options opt = {
	    .rt = h.rt,
	    .settings = h.settings,
	    .conversation_id = conversation,
	    .agent = cli_agent,
	    .max_calls = (size_t)max_calls,
	    .wait_timeout = wait_timeout,
	    .heartbeat_ms = heartbeat_ms(),
	    .write = write_stdout,
	};
	if (http.listen) {
		http.server = opt;
		if (auth) {
			/* Tokens are only as good as what verifies them: the built-in resolver
			 * verifies nothing (it names the agent). */
			http.resolver = aks_settings_get_resolver(h.settings);
			const char *type = aks_settings_get_resolver_type(h.settings);
			if (!http.resolver || !type || strcmp(type, "agent") == 0) {
				cli_warn(
				    "mcp: --auth needs a principal resolver that verifies tokens "
				    "(sandbox.principal_resolver: signed_token); this "
				    "configuration "
				    "has %s",
				    type ? type : "none (the sandbox is disabled)");
				cli_tool_host_close(&h);
				return CLI_EXIT_ERROR;
			}
		}
		log_start(&h, conversation, auth);
		int rc = cli_mcp_http_serve(&http, &stop_requested);
		cli_tool_host_close(&h);
		return rc < 0 ? CLI_EXIT_ERROR : CLI_EXIT_OK;
	}
	aks__mcp_server *srv = NULL;
	if (aks__mcp_server_new(&opt, &srv) != AKS_OK) {
		cli_warn("mcp: out of memory");
		cli_tool_host_close(&h);
		return CLI_EXIT_ERROR;
	}
	log_start(&h, conversation, false);

	int rc = aks__mcp_serve_fd(srv, STDIN_FILENO, AKS_MCP_DEFAULT_MAX_LINE, &stop_requested);
	int read_errno = errno;
	/* End of input (or a signal): cancel what still runs, then wait for it. */
	aks__mcp_server_shutdown(srv);
	aks__mcp_server_free(srv);
	cli_tool_host_close(&h);
	if (rc < 0) {
		cli_warn("mcp: cannot read standard input: %s", strerror(read_errno));
		return CLI_EXIT_FAILURE;
	}
	return CLI_EXIT_OK;
}
