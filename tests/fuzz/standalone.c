/*
 * Runs a fuzz target over files (the seed corpus) without libFuzzer, so
 * `make check` exercises every target under the sanitizers on every build.
 * Prints TAP: one test per input file.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	size_t cap = 1 << 16, len = 0;
	uint8_t *buf = malloc(cap);
	size_t n;
	while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
		len += n;
		if (len == cap) {
			uint8_t *grown = realloc(buf, cap *= 2);
			if (!grown) {
				free(buf);
				buf = NULL;
			}
			buf = grown;
		}
	}
	fclose(f);
	if (!buf)
		return -1;
	LLVMFuzzerTestOneInput(buf, len);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS-DIR\n", argv[0]);
		return 2;
	}
	DIR *d = opendir(argv[1]);
	if (!d) {
		perror(argv[1]);
		return 1;
	}
	char *names[4096];
	size_t count = 0;
	struct dirent *e;
	while ((e = readdir(d)) && count < 4096)
		if (e->d_name[0] != '.')
			names[count++] = strdup(e->d_name);
	closedir(d);
	printf("1..%zu\n", count);
	int failed = 0;
	for (size_t i = 0; i < count; i++) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/%s", argv[1], names[i]);
		/* A crash or sanitizer report aborts the process: the harness sees it. */
		int rc = run_file(path);
		printf("%sok %zu - %s\n", rc ? "not " : "", i + 1, names[i]);
		failed |= rc != 0;
		free(names[i]);
	}
	return failed;
}
