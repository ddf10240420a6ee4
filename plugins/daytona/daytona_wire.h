/*
 * plugins/daytona/daytona_wire.h - the reading of what a sandbox's toolbox answers to a
 * session command (no I/O): linked into the plugin, its unit test and its fuzz target.
 *
 * The answer is JSON: {"cmdId", "exitCode", "stdout", "stderr", "output"}. A toolbox that
 * splits the streams itself fills stdout and stderr; one asked for the raw log
 * (X-Daytona-Split-Output: true) leaves them null and answers in output each chunk the
 * command wrote after a marker of its stream: three 0x01 bytes for stdout, three 0x02 for
 * stderr. A toolbox that merges them answers output without markers: all of it stdout.
 */
#ifndef DAYTONA_WIRE_H
#define DAYTONA_WIRE_H

#include <stdbool.h>
#include <stddef.h>

#include "aks_buf.h"

typedef struct dt_exec_answer {
	int exit_code; /* -1 when the answer has none (the reference's default) */
	aks_buf out;   /* what the command wrote to stdout */
	aks_buf err;   /* and to stderr */
} dt_exec_answer;

/*
 * Reads the session command's answer (json, len bytes; it needs no NUL) into a (zeroed by
 * the caller; free with dt_exec_answer_free). true, or false with *why a static reason ("not
 * a JSON object", "out of memory") and a emptied.
 */
bool dt_exec_answer_parse(const char *json, size_t len, dt_exec_answer *a, const char **why);
void dt_exec_answer_free(dt_exec_answer *a);

/* The raw log's chunks, each after its stream's marker, into out and err (bytes before any
 * marker are stdout's). false when out of memory. */
bool dt_demux(const char *log, size_t len, aks_buf *out, aks_buf *err);

#endif /* DAYTONA_WIRE_H */
