/*
 * core/cli/cmd_worker.c - `aksandbox worker`: a queue broker worker (flavor: queue), which
 * takes the operations agents send through the configured transport, runs them on this
 * machine's sandbox backends and sends the completions back (see docs/queue.md).
 *
 * SIGTERM and SIGINT stop it cleanly: no new work is taken, in-flight operations get the
 * grace to finish and have their completions sent, the rest is handed back to the transport
 * for another worker. Exit status 0 after a clean stop. --metrics serves the worker's state
 * over HTTP meanwhile (worker_metrics.c).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static aks_cancel *stop_token;

static void on_signal(int signo)
{
	(void)signo;
	aks_cancel_trigger(stop_token); /* async-signal-safe: an atomic flag and an eventfd */
}

static int parse_grace(const char *arg, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(arg, &end);
	if (errno || *end || end == arg || !(v > 0) || v > 86400)
		return -1;
	*out = v;
	return 0;
}

int cli_cmd_worker(int argc, char *argv[])
{
	static const struct option options[] = {
	    {"help", no_argument, NULL, 'h'},
	    {"config", required_argument, NULL, 'c'},
	    {"once", no_argument, NULL, 'o'},
	    {"check", no_argument, NULL, 'k'},
	    {"grace", required_argument, NULL, 'g'},
	    {"metrics", required_argument, NULL, 'm'},
	    {NULL, 0, NULL, 0},
	};
	const char *metrics = NULL;
	aks_worker_options opts;
	aks_worker_options_init(&opts);
	bool check = false;
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
		case 'o':
			opts.once = true;
			break;
		case 'k':
			check = true;
			break;
		case 'm':
			metrics = optarg;
			break;
		case 'g':
			if (parse_grace(optarg, &opts.stop_grace) < 0) {
				cli_warn("worker: --grace wants seconds (> 0), not '%s'", optarg);
				cli_usage_hint("worker");
				return CLI_EXIT_USAGE;
			}
			break;
		default:
			return cli_option_error(argc, argv, c);
		}
	}
	if (optind < argc) {
		cli_warn("worker: unexpected argument '%s'", argv[optind]);
		cli_usage_hint("worker");
		return CLI_EXIT_USAGE;
	}
	if (check && opts.once) {
		cli_warn("worker: --check and --once do not go together");
		cli_usage_hint("worker");
		return CLI_EXIT_USAGE;
	}
	if (check && metrics) {
		cli_warn("worker: --check and --metrics do not go together");
		cli_usage_hint("worker");
		return CLI_EXIT_USAGE;
	}

	char *file = cli_find_config();
	aks_settings *settings = NULL;
	aks_error *e = NULL;
	int rc = aks_settings_load(file, NULL, &settings, &e);
	free(file);
	if (rc == AKS_OK && check) {
		rc = aks_worker_check(settings, &e);
		if (rc == AKS_OK)
			printf("ok: the transport and the response store answer\n");
	} else if (rc == AKS_OK) {
		cli_metrics *server = NULL;
		if (metrics && (rc = aks_worker_monitor_new(&opts.monitor, &e)) == AKS_OK &&
		    cli_metrics_start(metrics, opts.monitor, &server) < 0) {
			aks_worker_monitor_free(opts.monitor);
			aks_settings_free(settings);
			return CLI_EXIT_ERROR;
		}
		if (rc == AKS_OK && (rc = aks_cancel_new(&stop_token, &e)) == AKS_OK) {
			struct sigaction sa;
			memset(&sa, 0, sizeof(sa));
			sa.sa_handler = on_signal;
			sigemptyset(&sa.sa_mask);
			sigaction(SIGINT, &sa, NULL);
			sigaction(SIGTERM, &sa, NULL);
			signal(SIGPIPE, SIG_IGN);
			rc = aks_worker_run(settings, &opts, stop_token, &e);
			signal(SIGINT, SIG_DFL);
			signal(SIGTERM, SIG_DFL);
			aks_cancel_free(stop_token);
			stop_token = NULL;
		}
		cli_metrics_stop(server);
		aks_worker_monitor_free(opts.monitor);
	}
	if (rc < 0)
		cli_warn("worker: %s", aks_error_message(e));
	aks_error_free(e);
	aks_settings_free(settings);
	return rc < 0 ? CLI_EXIT_ERROR : CLI_EXIT_OK;
}
