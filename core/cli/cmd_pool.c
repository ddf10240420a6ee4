/*
 * core/cli/cmd_pool.c - `aksandbox pool [-c FILE] [--json] [--watch SECONDS]`: fills the
 * warm pools of the profiles that have one (`pool: {size, max_idle}`), once, or keeps them
 * filled until a signal. See docs/pools.md.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "cli.h"

static int64_t member_int(json_object *o, const char *key)
{
	return json_object_get_int64(json_object_object_get(o, key));
}

static void print_text(json_object *all)
{
	size_t n = json_object_array_length(all);
	if (n == 0)
		printf("pool: no profile has a pool (pool: {size: N} on a profile)\n");
	for (size_t i = 0; i < n; i++) {
		json_object *p = json_object_array_get_idx(all, i);
		json_object *failed = json_object_object_get(p, "failed");
		printf("pool '%s': %lld of %lld ready (%lld created, %lld replaced)\n",
		       json_object_get_string(json_object_object_get(p, "profile")),
		       (long long)member_int(p, "ready"), (long long)member_int(p, "size"),
		       (long long)member_int(p, "created"), (long long)member_int(p, "replaced"));
		for (size_t k = 0; k < json_object_array_length(failed); k++)
			printf("  failed: %s\n",
			       json_object_get_string(json_object_array_get_idx(failed, k)));
	}
}

/* Whether any pool is short of its size. */
static bool any_short(json_object *all)
{
	for (size_t i = 0; i < json_object_array_length(all); i++) {
		json_object *p = json_object_array_get_idx(all, i);
		if (member_int(p, "ready") < member_int(p, "size"))
			return true;
	}
	return false;
}

/* Keeps the pools filled from the runtime's background reaper until SIGINT or SIGTERM. */
static int watch(cli_tool_host *h, double interval)
{
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	/* Blocked before the reaper's thread starts, so that it inherits the mask and the
	 * signal comes to sigwait. */
	pthread_sigmask(SIG_BLOCK, &stop, NULL);
	aks_error *e = NULL;
	if (aks_runtime_start_reaper(h->rt, interval, &e) < 0) {
		cli_error err;
		cli_error_take(&err, aks_error_code(e), e);
		cli_error_print(&err);
		return CLI_EXIT_ERROR;
	}
	int sig = 0;
	sigwait(&stop, &sig);
	return CLI_EXIT_OK;
}

int cli_cmd_pool(int argc, char *argv[])
{
	static const struct option options[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"json", no_argument, NULL, 'j'},
	    {"watch", required_argument, NULL, 'w'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	bool json = false;
	double interval = 0;
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:c:w:h", options, NULL)) != -1) {
		switch (c) {
		case 'c':
			cli_config_path = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'w': {
			char *end = NULL;
			errno = 0;
			interval = strtod(optarg, &end);
			if (!*optarg || *end || errno || !(interval > 0) || !(interval <= 1e6)) {
				cli_warn("pool: --watch: '%s' is not a number of seconds (> 0)",
				         optarg);
				cli_usage_hint("pool");
				return CLI_EXIT_USAGE;
			}
			break;
		}
		case 'h':
			cli_print_help(argv[0]);
			return CLI_EXIT_OK;
		default:
			return cli_option_error(argc, argv, c);
		}
	}
	if (optind < argc) {
		cli_warn("pool: unexpected argument '%s'", argv[optind]);
		cli_usage_hint("pool");
		return CLI_EXIT_USAGE;
	}
	cli_tool_host h;
	if (cli_tool_host_open(&h) < 0)
		return CLI_EXIT_ERROR;
	if (interval > 0) {
		int status = watch(&h, interval);
		cli_tool_host_close(&h);
		return status;
	}
	char *text = NULL;
	aks_error *e = NULL;
	int rc = aks_runtime_fill_pools(h.rt, &text, &e);
	cli_tool_host_close(&h);
	if (rc < 0) {
		cli_error err;
		cli_error_take(&err, rc, e);
		cli_error_print(&err);
		return CLI_EXIT_ERROR;
	}
	json_object *all = NULL;
	int status = cli_print_report(text, json, print_text, &all);
	/* A pool left short (its backend refused a create) is a failure to say in the status. */
	if (!all || any_short(all))
		status = CLI_EXIT_FAILURE;
	json_object_put(all);
	free(text);
	return status;
}
