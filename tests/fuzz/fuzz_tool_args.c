/*
 * Fuzz target: tool arguments, as an agent (an untrusted caller) sends them
 * through the C API, the CLI or the MCP server. The input is JSON text; it is
 * parsed with json-c and validated against each of the eight tools' schemas.
 * Along the way it checks the properties the rest of the host relies on, and
 * aborts (which the fuzzer and the corpus driver report) when one fails:
 *   - the validator accepts only an object (or nothing), and every refusal
 *     has a message that starts with the tool's name;
 *   - the JSON writer renders any parsed value, and any refusal as the error
 *     shape, as pure printable ASCII that json-c parses back;
 *   - truncation of the raw input bytes yields valid UTF-8 of at most the
 *     limit, and truncating that again changes nothing.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "core/tools/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

/* The writer's output: printable ASCII (it escapes everything else) that parses. */
static void check_dumped(char *text)
{
	CHECK(text);
	for (const unsigned char *p = (const unsigned char *)text; *p; p++)
		CHECK(*p >= 0x20 && *p < 0x7F);
	enum json_tokener_error jerr;
	struct json_object *back = json_tokener_parse_verbose(text, &jerr);
	CHECK(jerr == json_tokener_success);
	json_object_put(back);
	free(text);
}

static void check_truncation(const uint8_t *data, size_t size)
{
	size_t max = size ? data[0] % 64 : 0;
	aks_cut_text t, again;
	CHECK(aks__truncate_chars((const char *)data, size, max, 0, &t) == AKS_OK);
	CHECK(t.chars <= max && t.total >= t.chars && t.total <= size);
	CHECK(aks__truncate_chars(t.text, t.len, SIZE_MAX, 0, &again) == AKS_OK);
	/* Valid UTF-8 decodes to itself: same bytes, every character kept. */
	CHECK(again.len == t.len && memcmp(again.text, t.text, t.len) == 0);
	CHECK(again.chars == t.chars && again.total == t.chars);
	aks__cut_text_free(&again);
	aks__cut_text_free(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_truncation(data, size);
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0'; /* an embedded NUL ends the document */
	enum json_tokener_error jerr;
	struct json_object *args = json_tokener_parse_verbose(text, &jerr);
	free(text);
	if (jerr != json_tokener_success)
		return 0;
	check_dumped(aks__json_dumps(args));
	for (int tool = 0; tool < AKS_TOOL_COUNT; tool++) {
		aks_error *err = NULL;
		int rc = aks__tool_validate_args(tool, args, &err);
		if (rc == AKS_OK) {
			CHECK(!err);
			CHECK(!args || json_object_is_type(args, json_type_object));
			continue;
		}
		CHECK(rc == AKS_EINVAL && err);
		const char *msg = aks_error_message(err), *name = aks__tool_name(tool);
		CHECK(strncmp(msg, name, strlen(name)) == 0 && msg[strlen(name)] == ':');
		check_dumped(aks__tool_json_error(msg, ""));
		aks_error_free(err);
	}
	json_object_put(args);
	return 0;
}
