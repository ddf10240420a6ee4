/*
 * Fuzz target: the docker plugin's reading of the Engine's JSON answers
 * (plugins/docker/dk_parse.c): error messages, exec create and exec inspect, a pull's
 * progress stream, and the X-Docker-Container-Path-Stat header (base64 of JSON). The first
 * byte of the input is the HTTP status; the rest is the body (or the header). Checks: an
 * error message is never empty and never longer than the body or the status text it falls
 * back to; an exec id is always one the engine could accept (it goes into request paths); a
 * running exec has no exit code; a pull fails exactly when its stream holds an "error" key;
 * a symlink target is never empty. Aborts when a property fails.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aks_base64.h"
#include "aks_container.h"
#include "dk_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

static const long statuses[] = {200, 201, 204, 304, 400, 404, 409, 500};

static void check_path_stat(const char *header)
{
	dk_path_stat st;
	int rc = dk_parse_path_stat(header, &st);
	CHECK(rc == AKS_OK || rc == AKS_ENOMEM);
	CHECK(!st.link || *st.link);
	free(st.link);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	/* aks_buf keeps a NUL past the body, and so does this copy */
	dk_req r = {.status = statuses[data[0] % (sizeof(statuses) / sizeof(statuses[0]))]};
	size_t len = size - 1;
	char *body = malloc(len + 1);
	CHECK(body);
	memcpy(body, data + 1, len);
	body[len] = '\0';
	r.resp.data = len ? body : NULL;
	r.resp.len = len;
	r.resp.cap = len + 1;

	char *msg = dk_engine_message(&r);
	CHECK(msg && *msg);
	char fallback[32];
	snprintf(fallback, sizeof(fallback), "HTTP status %ld", r.status);
	CHECK(strlen(msg) <= (len > strlen(fallback) ? len : strlen(fallback)));
	free(msg);

	char *id = NULL;
	int rc = dk_parse_exec_id(&r, &id);
	CHECK(rc == AKS_OK ? dk_valid_ref(id) : !id && (rc == AKS_ERROR || rc == AKS_ENOMEM));
	free(id);

	bool running = true;
	int code = 0;
	dk_parse_exec_state(&r, &running, &code);
	CHECK(!running || code == -1);

	bool failed = false;
	char *why = dk_parse_pull_error(&r, &failed);
	CHECK(failed == (len && strstr(body, "\"error\"") != NULL));
	CHECK(!why || (failed && *why));
	free(why);

	json_object_put(dk_resp_json(&r));

	check_path_stat(body);
	char *b64 = aks__base64_encode(body, len, AKS_BASE64_STD);
	CHECK(b64);
	check_path_stat(b64);
	free(b64);
	free(body);
	return 0;
}
