/*
 * core/cli/cmd_tool.c - `aksandbox tool NAME [JSON]`, `tools`, `prompt` and
 * `sessions`: the agent tools from the command line, with the sessions of the
 * conversation (--conversation, $AKSANDBOX_CONVERSATION, or "cli") kept in
 * the state directory, so successive invocations share them.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

const char *cli_conversation;
const char *cli_agent;

#define CLI_DEFAULT_CONVERSATION "cli"

const char *cli_get_conversation(void)
{
	if (cli_conversation)
		return cli_conversation;
	const char *env = getenv("AKSANDBOX_CONVERSATION");
	return env && *env ? env : CLI_DEFAULT_CONVERSATION;
}

int cli_tool_host_open(cli_tool_host *h)
{
	memset(h, 0, sizeof(*h));
	char *file = cli_find_config();
	aks_error *e = NULL;
	int rc = aks_settings_load(file, NULL, &h->settings, &e);
	free(file);
	if (rc == AKS_OK)
		rc = aks_runtime_open(h->settings, NULL, &h->rt, &e);
	/* The CLI is not a long-running process: reclaim the sandboxes that went
	 * idle since the last invocation, so none lives on for want of a touch. */
	if (rc == AKS_OK && aks_runtime_reap(h->rt, &e) < 0) {
		cli_warn("could not reclaim idle sandboxes: %s", aks_error_message(e));
		aks_error_free(e);
		e = NULL;
	}
	if (rc < 0) {
		cli_error err;
		cli_error_take(&err, rc, e);
		cli_error_print(&err);
		aks_runtime_close(h->rt);
		aks_settings_free(h->settings);
		return -1;
	}
	return 0;
}

void cli_tool_host_close(cli_tool_host *h)
{
	aks_runtime_close(h->rt);
	aks_settings_free(h->settings);
}

/* Prints text and a newline; the exit status for a write failure. */
static int print_line(const char *text)
{
	if (cli_write_all(STDOUT_FILENO, text, strlen(text)) < 0 ||
	    cli_write_all(STDOUT_FILENO, "\n", 1) < 0) {
		cli_warn("cannot write the output: %s", strerror(errno));
		return CLI_EXIT_FAILURE;
	}
	return CLI_EXIT_OK;
}

/* All of standard input, NUL-terminated (malloc'ed), or NULL. */
static char *read_stdin(void)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);
	while (buf) {
		if (len + 1 >= cap) {
			char *grown = realloc(buf, cap *= 2);
			if (!grown)
				break;
			buf = grown;
		}
		ssize_t n = read(STDIN_FILENO, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		if (n == 0) {
			buf[len] = '\0';
			return buf;
		}
		len += (size_t)n;
	}
	free(buf);
	return NULL;
}

/* Only -h/--help; returns -1 to go on, else the exit status. */
static int parse_help_only(int argc, char *argv[], int max_args)
{
	static const struct option options[] = {{"help", no_argument, NULL, 'h'},
	                                        {NULL, 0, NULL, 0}};
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:h", options, NULL)) != -1) {
		if (c == 'h') {
			cli_print_help(argv[0]);
			return CLI_EXIT_OK;
		}
		return cli_option_error(argc, argv, c);
	}
	if (argc - optind > max_args) {
		cli_warn("%s: unexpected argument '%s'", argv[0], argv[optind + max_args]);
		cli_usage_hint(argv[0]);
		return CLI_EXIT_USAGE;
	}
	return -1;
}

/* Calls a tool and prints its JSON: exit 0, or 1 when the result is an error. */
static int run_tool(const char *name, const char *args)
{
	cli_tool_host h;
	if (cli_tool_host_open(&h) < 0)
		return CLI_EXIT_ERROR;
	aks_tool_context ctx;
	aks_tool_context_init(&ctx, cli_get_conversation(), cli_agent);
	char *json = NULL;
	aks_error *e = NULL;
	int rc = aks_runtime_call_tool(h.rt, name, args, &ctx, &json, &e);
	int status;
	if (rc < 0) {
		cli_error err;
		cli_error_take(&err, rc, e);
		cli_error_print(&err);
		status = rc == AKS_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_ERROR;
	} else {
		status = print_line(json);
		if (status == CLI_EXIT_OK && strncmp(json, "{\"error\": ", 10) == 0)
			status = CLI_EXIT_FAILURE;
	}
	free(json);
	cli_tool_host_close(&h);
	return status;
}

int cli_cmd_tool(int argc, char *argv[])
{
	int st = parse_help_only(argc, argv, 2);
	if (st >= 0)
		return st;
	if (optind >= argc) {
		cli_warn("tool: missing the tool's name");
		cli_usage_hint("tool");
		return CLI_EXIT_USAGE;
	}
	const char *name = argv[optind];
	const char *args = optind + 1 < argc ? argv[optind + 1] : "{}";
	char *in = NULL;
	if (strcmp(args, "-") == 0) {
		if (!(in = read_stdin())) {
			cli_warn("tool: cannot read the arguments from standard input");
			return CLI_EXIT_ERROR;
		}
		args = in;
	}
	st = run_tool(name, args);
	free(in);
	return st;
}

int cli_cmd_sessions(int argc, char *argv[])
{
	int st = parse_help_only(argc, argv, 0);
	return st >= 0 ? st : run_tool("list_sandbox_sessions", "{}");
}

int cli_cmd_tools(int argc, char *argv[])
{
	int st = parse_help_only(argc, argv, 0);
	if (st >= 0)
		return st;
	cli_tool_host h;
	if (cli_tool_host_open(&h) < 0)
		return CLI_EXIT_ERROR;
	char *json = aks_runtime_tool_schemas(h.rt);
	st = json ? print_line(json) : CLI_EXIT_ERROR;
	free(json);
	cli_tool_host_close(&h);
	return st;
}

int cli_cmd_prompt(int argc, char *argv[])
{
	int st = parse_help_only(argc, argv, 0);
	if (st >= 0)
		return st;
	cli_tool_host h;
	if (cli_tool_host_open(&h) < 0)
		return CLI_EXIT_ERROR;
	char *text = aks_runtime_guidance(h.rt, cli_agent);
	st = !text ? CLI_EXIT_ERROR : *text ? print_line(text) : CLI_EXIT_OK;
	free(text);
	cli_tool_host_close(&h);
	return st;
}
