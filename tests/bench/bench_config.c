/*
 * bench_config: what loading a large config.yaml costs, and that it grows linearly.
 *
 *   bench_config [-n RUNS] DIR     (RUNS: loads per file, default 5; DIR: scratch directory)
 *
 * For 10,000, 40,000 and 140,000 keys (the last about 15.5 MB, just under the 16 MiB file
 * cap), two files, each key on a line of about 110 bytes:
 *   - foreign: the keys under a top-level section of another program (`other:`), beside a
 *     small `sandbox:` block. aksandbox parses that section but builds nothing of it.
 *   - read: the same keys under `sandbox.profiles.p.params`, which is built into the tree,
 *     checked for duplicate keys and kept as JSON.
 * Printed: each file's size, the median of RUNS `aks_settings_load` calls, the same text
 * through libyaml's event parser alone (the floor: what any YAML reader pays), the ratio of
 * the load to that floor, and the ratio of the 40,000-key load to the 10,000-key one: 4 for a
 * linear load, 16 for a quadratic one. Nothing is asserted.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <yaml.h>

#include "bench_util.h"

static const char *prog = "bench_config";

/* Writes the file and returns its size in bytes. `read` puts the keys where the loader
 * builds them; otherwise they sit in a foreign section. */
static long write_config(const char *path, size_t keys, int read)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(1);
	}
	const char *indent = read ? "        " : "  ";
	if (read)
		fputs("sandbox:\n  enabled: false\n  profiles:\n    p:\n      type: "
		      "local_subprocess\n"
		      "      local_subprocess: {}\n      params:\n",
		      f);
	else
		fputs("sandbox:\n  enabled: false\nother:\n", f);
	for (size_t i = 0; i < keys; i++)
		fprintf(f,
		        "%skey_number_%07zu: the value of key %07zu, padded to the length of a "
		        "real setting of a few more words\n",
		        indent, i, i);
	long size = ftell(f);
	if (fclose(f) != 0) {
		perror(path);
		exit(1);
	}
	return size;
}

static char *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f || fseek(f, 0, SEEK_END) != 0) {
		perror(path);
		exit(1);
	}
	long size = ftell(f);
	rewind(f);
	char *text = malloc((size_t)size + 1);
	if (!text || fread(text, 1, (size_t)size, f) != (size_t)size) {
		perror(path);
		exit(1);
	}
	fclose(f);
	*len = (size_t)size;
	return text;
}

/* Nanoseconds for libyaml to produce every event of the text, building nothing. */
static int64_t libyaml_events_ns(const char *text, size_t len)
{
	yaml_parser_t parser;
	if (!yaml_parser_initialize(&parser)) {
		fprintf(stderr, "%s: out of memory\n", prog);
		exit(1);
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	int64_t start = bench_now_ns();
	for (;;) {
		yaml_event_t ev;
		if (!yaml_parser_parse(&parser, &ev)) {
			fprintf(stderr, "%s: libyaml: %s\n", prog, parser.problem);
			exit(1);
		}
		int done = ev.type == YAML_STREAM_END_EVENT;
		yaml_event_delete(&ev);
		if (done)
			break;
	}
	int64_t ns = bench_now_ns() - start;
	yaml_parser_delete(&parser);
	return ns;
}

static int64_t load_ns(const char *path)
{
	static const char *const no_env[] = {NULL};
	aks_settings *s = NULL;
	aks_error *err = NULL;
	int64_t start = bench_now_ns();
	if (aks_settings_load(path, no_env, &s, &err) != AKS_OK)
		bench_die(prog, path, err);
	int64_t ns = bench_now_ns() - start;
	aks_settings_free(s);
	return ns;
}

/* Loads `path` `runs` times, and parses it as often with libyaml alone, interleaved.
 * Returns the median load in milliseconds. */
static double measure(const char *label, const char *path, size_t keys, long size, int runs)
{
	size_t len;
	char *text = read_all(path, &len);
	int64_t *load = calloc((size_t)runs, sizeof(*load));
	int64_t *floor = calloc((size_t)runs, sizeof(*floor));
	if (!load || !floor) {
		fprintf(stderr, "%s: out of memory\n", prog);
		exit(1);
	}
	for (int i = 0; i < runs; i++) {
		load[i] = load_ns(path);
		floor[i] = libyaml_events_ns(text, len);
	}
	double load_ms = bench_median_ms(load, (size_t)runs);
	double floor_ms = bench_median_ms(floor, (size_t)runs);
	printf("  %-8s %7zu keys %6.1f MB   load %8.1f ms   libyaml alone %8.1f ms   %5.2fx\n",
	       label, keys, (double)size / 1e6, load_ms, floor_ms,
	       floor_ms > 0 ? load_ms / floor_ms : 0);
	free(text);
	free(load);
	free(floor);
	return load_ms;
}

int main(int argc, char **argv)
{
	int runs = 5, opt;
	while ((opt = getopt(argc, argv, "n:")) != -1) {
		if (opt != 'n' || (runs = atoi(optarg)) < 1) {
			fprintf(stderr, "usage: %s [-n RUNS] DIR\n", prog);
			return 2;
		}
	}
	if (optind + 1 != argc) {
		fprintf(stderr, "usage: %s [-n RUNS] DIR\n", prog);
		return 2;
	}
	const char *dir = argv[optind];
	static const size_t sizes[] = {10000, 40000, 140000};
	static const char *const labels[] = {"foreign", "read"};
	printf("Loading config.yaml (aks_settings_load, median of %d; libyaml alone: the same "
	       "text through its event parser)\n",
	       runs);
	for (int read = 0; read < 2; read++) {
		double ms[3];
		for (size_t i = 0; i < 3; i++) {
			char path[4096];
			snprintf(path, sizeof(path), "%s/config-%s-%zu.yaml", dir, labels[read],
			         sizes[i]);
			long size = write_config(path, sizes[i], read);
			ms[i] = measure(labels[read], path, sizes[i], size, runs);
			unlink(path);
		}
		printf("  %-8s 40,000 / 10,000 keys: %.2fx (linear: 4, quadratic: 16)\n",
		       labels[read], ms[0] > 0 ? ms[1] / ms[0] : 0);
	}
	return 0;
}
