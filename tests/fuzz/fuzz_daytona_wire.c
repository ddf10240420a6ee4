/*
 * Fuzz target: what the daytona plugin reads from a sandbox's toolbox
 * (plugins/daytona/daytona_wire.c): a session command's JSON answer, with its streams split
 * by the toolbox or its raw log's stream markers split by the plugin, and the raw log alone.
 * Checks: the reader never reads past what it was given (the sanitizers), an answer it
 * refuses leaves nothing behind, the exit code is -1 or a shell's, and splitting a log never
 * makes bytes: what comes out is what went in less the markers.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daytona_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

/* How many marker bytes the log holds, as the reader counts them (left to right, three at
 * a time). */
static size_t marker_bytes(const char *s, size_t n)
{
	size_t count = 0;
	for (size_t i = 0; i + 3 <= n;) {
		if ((s[i] == 1 || s[i] == 2) && s[i + 1] == s[i] && s[i + 2] == s[i]) {
			count += 3;
			i += 3;
		} else {
			i++;
		}
	}
	return count;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const char *body = (const char *)data + 1;
	size_t len = size - 1;
	if (data[0] & 1) {
		/* the raw log alone */
		aks_buf out = AKS_BUF_INIT, err = AKS_BUF_INIT;
		CHECK(dt_demux(body, len, &out, &err));
		CHECK(out.len + err.len + marker_bytes(body, len) == len);
		aks__buf_free(&out);
		aks__buf_free(&err);
		return 0;
	}
	dt_exec_answer a = {0};
	const char *why = NULL;
	if (dt_exec_answer_parse(body, len, &a, &why)) {
		CHECK(a.exit_code >= -1 && a.exit_code <= 255);
		CHECK(!a.out.len || a.out.data);
		CHECK(!a.err.len || a.err.data);
		dt_exec_answer_free(&a);
	} else {
		CHECK(why && a.out.len == 0 && a.err.len == 0);
	}
	return 0;
}
