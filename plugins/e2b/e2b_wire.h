/*
 * plugins/e2b/e2b_wire.h - the bytes the e2b provider reads from E2B's in-sandbox services,
 * decoded: Connect RPC's enveloped stream (envd's process API), the process events in it,
 * and the code interpreter's lines of JSON. No I/O and no host: the plugin feeds what libcurl
 * receives, in whatever pieces it arrives; the unit test and the fuzz target feed anything.
 *
 * Everything here is untrusted input (from the sandbox's side of the network): every length
 * is bounded, every field checked for its type, nothing assumed about where pieces end.
 */
#ifndef E2B_WIRE_H
#define E2B_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "aks_buf.h"

/* The largest message either stream may carry: envd sends output in chunks of at most 32
 * KiB (base64: about 43 KiB), the interpreter one line per chunk of output or result; a
 * bigger one is a broken or hostile peer. */
#define E2B_WIRE_MESSAGE_MAX (4u << 20)

/* ---- Connect's enveloped stream ---- */

/* An envelope's flags: a compressed message (never asked for, so refused), the end of the
 * stream (its JSON says whether the call failed). */
#define E2B_ENVELOPE_COMPRESSED 0x01
#define E2B_ENVELOPE_END_STREAM 0x02

/* Receives one whole envelope: its flags and its JSON text (json[len] is a NUL). Returns
 * true to go on. */
typedef bool (*e2b_envelope_fn)(void *ctx, unsigned flags, const char *json, size_t len);

typedef struct e2b_envelopes {
	aks_buf pending; /* an envelope not whole yet */
	bool failed;     /* a bad envelope was seen: nothing more is read */
	char why[96];    /* what was wrong with it */
} e2b_envelopes;

/* Feeds received bytes; calls fn for each envelope they complete. false when an envelope is
 * bad (compressed, or longer than E2B_WIRE_MESSAGE_MAX: d->why says which), when memory runs
 * out, or when fn said stop. */
bool e2b_envelopes_feed(e2b_envelopes *d, const char *data, size_t len, e2b_envelope_fn fn,
                        void *ctx);
/* Whether the stream ended between envelopes (nothing pending). */
bool e2b_envelopes_clean_end(const e2b_envelopes *d);
void e2b_envelopes_free(e2b_envelopes *d);

/* ---- envd's process events (process.Process/Start, the JSON codec) ---- */

typedef enum e2b_event_kind {
	E2B_EVENT_START = 1, /* pid */
	E2B_EVENT_STDOUT,    /* data, data_len */
	E2B_EVENT_STDERR,    /* data, data_len */
	E2B_EVENT_END,       /* exit_code, exited, status, error */
	E2B_EVENT_KEEPALIVE,
	E2B_EVENT_OTHER /* a kind this client does not know (pty output, later additions) */
} e2b_event_kind;

typedef struct e2b_event {
	e2b_event_kind kind;
	uint32_t pid;
	unsigned char *data; /* decoded output, malloc'd */
	size_t data_len;
	int exit_code;
	bool exited;
	const char *status; /* borrowed from the parsed message */
	const char *error;  /* borrowed from the parsed message */
} e2b_event;

/*
 * Parses one message of a Start stream ({"event": {"start": {"pid": N}}}, {"event":
 * {"data": {"stdout": BASE64}}}, {"event": {"end": {"exitCode": N, "exited": B, "status":
 * S, "error": S}}}, {"event": {"keepalive": {}}}). On success *root holds the parsed
 * message (release it with json_object_put once done with ev's borrowed strings) and ev is
 * filled; ev->data is the caller's to free. false for anything malformed; why says what.
 */
bool e2b_event_parse(const char *json, size_t len, e2b_event *ev, json_object **root,
                     const char **why);

/*
 * The end-of-stream message of a Connect stream: {} when the call succeeded, else {"error":
 * {"code": C, "message": M}}. Returns true and sets *code and *message (borrowed from *root;
 * NULL when it succeeded) when well formed.
 */
bool e2b_end_parse(const char *json, size_t len, json_object **root, const char **code,
                   const char **message);

/* ---- the code interpreter's lines ---- */

/* Receives one line without its line break (line[len] is a NUL). Returns true to go on. */
typedef bool (*e2b_line_fn)(void *ctx, const char *line, size_t len);

typedef struct e2b_lines {
	aks_buf pending;
	bool failed;
	char why[96];
} e2b_lines;

/* Feeds received bytes; calls fn for each line they complete (empty lines are skipped).
 * false when a line grows past E2B_WIRE_MESSAGE_MAX, memory runs out, or fn said stop. */
bool e2b_lines_feed(e2b_lines *d, const char *data, size_t len, e2b_line_fn fn, void *ctx);
/* The last line, when the stream ended without a line break after it. */
bool e2b_lines_finish(e2b_lines *d, e2b_line_fn fn, void *ctx);
void e2b_lines_free(e2b_lines *d);

typedef enum e2b_output_kind {
	E2B_OUTPUT_STDOUT = 1, /* text */
	E2B_OUTPUT_STDERR,     /* text */
	E2B_OUTPUT_ERROR,      /* name, value, traceback */
	E2B_OUTPUT_END,        /* end_of_execution */
	E2B_OUTPUT_OTHER       /* results, execution counts, anything later */
} e2b_output_kind;

typedef struct e2b_output {
	e2b_output_kind kind;
	const char *text; /* borrowed from *root */
	size_t text_len;
	const char *name, *value, *traceback;
} e2b_output;

/* Parses one line ({"type": "stdout", "text": ...} and the like). false when it is not a
 * JSON object with a string "type", or a known type lacks its fields. */
bool e2b_output_parse(const char *line, size_t len, e2b_output *out, json_object **root);

#endif /* E2B_WIRE_H */
