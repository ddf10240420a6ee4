/*
 * core/cli/cmd_mcp.c - `aksandbox mcp`: the eight tools as a Model Context
 * Protocol server on standard input and output (see core/mcp/ and
 * docs/mcp.md). Standard output carries protocol messages only; everything
 * else goes to standard error.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "mcp/mcp.h"

/* How often the idle reaper runs while the server is up. */
#define MCP_REAP_INTERVAL 60.0

static volatile sig_atomic_t stop_requested;

static void on_signal(int signo)
{
	(void)signo;
	stop_requested = 1;
}

static int write_stdout(void *userdata, const char *line, size_t len)
{
	(void)userdata;
	return cli_write_all(STDOUT_FILENO, line, len);
}

/* "mcp-" and 32 random hex digits: a conversation of its own. */
static int new_conversation_id(char out[40])
{
	unsigned char raw[16];
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, raw, sizeof(raw)) : -1;
	if (fd >= 0)
		close(fd);
	if (n != (ssize_t)sizeof(raw))
		return -1;
	strcpy(out, "mcp-");
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(out + 4 + 2 * i, 3, "%02x", raw[i]);
	return 0;
}

int cli_cmd_mcp(int argc, char *argv[])
{
	static const struct option options[] = {
	    {"help", no_argument, NULL, 'h'},
	    {"config", required_argument, NULL, 'c'},
	    {"conversation", required_argument, NULL, 'C'},
	    {"agent", required_argument, NULL, 'A'},
	    {"max-calls", required_argument, NULL, 'M'},
	    {NULL, 0, NULL, 0},
	};
	long max_calls = AKS_MCP_DEFAULT_MAX_CALLS;
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
		default:
			return cli_option_error(argc, argv, c);
		}
	}
	if (optind < argc) {
		cli_warn("mcp: unexpected argument '%s'", argv[optind]);
		cli_usage_hint("mcp");
		return CLI_EXIT_USAGE;
	}

	/* --conversation joins an existing conversation; else
	 * $AKSANDBOX_CONVERSATION; else a new one for this connection. */
	char fresh[40];
	const char *conversation = cli_conversation;
	const char *env = getenv("AKSANDBOX_CONVERSATION");
	if (!conversation && env && *env)
		conversation = env;
	if (!conversation) {
		if (new_conversation_id(fresh) < 0) {
			cli_warn("mcp: cannot read /dev/urandom for a conversation id");
			return CLI_EXIT_ERROR;
		}
		conversation = fresh;
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
	    .write = write_stdout,
	};
	aks__mcp_server *srv = NULL;
	if (aks__mcp_server_new(&opt, &srv) != AKS_OK) {
		cli_warn("mcp: out of memory");
		cli_tool_host_close(&h);
		return CLI_EXIT_ERROR;
	}
	cli_warn("mcp: serving conversation '%s' (config %s); other clients join it with "
	         "--conversation %s",
	         conversation,
	         aks_settings_get_file(h.settings) ? aks_settings_get_file(h.settings)
	                                           : "(built-in default)",
	         conversation);
	/* A client started in a directory without a config (a desktop client's default) would
	 * otherwise run its agent's code on this machine without a word to the operator. */
	if (!aks_settings_get_file(h.settings))
		cli_warn("mcp: no configuration file was found, so the built-in default serves: "
		         "local_subprocess, which does NOT isolate (programs run on this machine "
		         "with your rights); give one with -c or $AKSANDBOX_CONFIG (docs/cli.md)");

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
