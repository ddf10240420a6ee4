/*
 * core/cli/cmd_gc.c - `aksandbox gc [-c FILE] [--dry-run] [--json]`: destroys the sandboxes
 * that the configured providers created for this state store and that no session records
 * (what a host killed between create and record leaves behind). See docs/gc.md.
 */
#include "config.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "cli.h"

static const char *member(json_object *o, const char *key)
{
	const char *s = json_object_get_string(json_object_object_get(o, key));
	return s ? s : "";
}

static void print_list(json_object *arr, const char *what, const char *extra)
{
	size_t n = json_object_array_length(arr);
	for (size_t i = 0; i < n; i++) {
		json_object *o = json_object_array_get_idx(arr, i);
		if (extra)
			printf("  %-12s profile %s: %s%s%s\n", what, member(o, "profile"),
			       member(o, "sandbox_id"), *member(o, "sandbox_id") ? ": " : "",
			       member(o, extra));
		else
			printf("  %-12s %s (profile %s)\n", what, member(o, "sandbox_id"),
			       member(o, "profile"));
	}
}

static void print_text(json_object *r)
{
	bool dry = json_object_get_boolean(json_object_object_get(r, "dry_run"));
	json_object *removed = json_object_object_get(r, "removed");
	if (!json_object_is_type(json_object_object_get(r, "owner"), json_type_string)) {
		printf("gc: this state store has never created a sandbox: nothing to collect\n");
		return;
	}
	printf("gc: state store owner %s: %zu orphaned sandbox(es) %s, %lld recorded, %lld "
	       "being created\n",
	       member(r, "owner"), json_object_array_length(removed),
	       dry ? "found (dry run: nothing destroyed)" : "destroyed",
	       (long long)json_object_get_int64(json_object_object_get(r, "kept")),
	       (long long)json_object_get_int64(json_object_object_get(r, "in_creation")));
	print_list(removed, dry ? "orphan" : "destroyed", NULL);
	print_list(json_object_object_get(r, "failed"), "failed", "error");
	print_list(json_object_object_get(r, "not_listed"), "not listed", "reason");
}

int cli_cmd_gc(int argc, char *argv[])
{
	static const struct option options[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"dry-run", no_argument, NULL, 'n'},
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	bool json = false, dry_run = false;
	int c;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:c:nh", options, NULL)) != -1) {
		switch (c) {
		case 'c':
			cli_config_path = optarg;
			break;
		case 'n':
			dry_run = true;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			cli_print_help(argv[0]);
			return CLI_EXIT_OK;
		default:
			return cli_option_error(argc, argv, c);
		}
	}
	if (optind < argc) {
		cli_warn("gc: unexpected argument '%s'", argv[optind]);
		cli_usage_hint("gc");
		return CLI_EXIT_USAGE;
	}
	cli_tool_host h;
	if (cli_tool_host_open(&h) < 0)
		return CLI_EXIT_ERROR;
	char *text = NULL;
	aks_error *e = NULL;
	int rc = aks_runtime_gc(h.rt, dry_run, &text, &e);
	cli_tool_host_close(&h);
	if (rc < 0) {
		cli_error err;
		cli_error_take(&err, rc, e);
		cli_error_print(&err);
		return CLI_EXIT_ERROR;
	}
	json_object *r = NULL;
	int status = cli_print_report(text, json, print_text, &r);
	/* A sandbox that could not be destroyed is still there: say so in the status. */
	if (json_object_array_length(json_object_object_get(r, "failed")) > 0)
		status = CLI_EXIT_FAILURE;
	json_object_put(r);
	free(text);
	return status;
}
