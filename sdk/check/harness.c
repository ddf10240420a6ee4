/*
 * sdk/check/harness.c - runs the checks in order and reports them (harness.h).
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include <aksandbox/aksandbox.h>

#include "harness.h"

enum outcome { PASSED, FAILED, NOT_VERIFIED, NOT_RUN };

static const char *const outcome_names[] = {"passed", "failed", "not_verified", "not_run"};

/* The running check: where its early end jumps to, and what it has said. */
static struct {
	jmp_buf jump;
	bool running;
	json_object *notes; /* array of strings */
	char *message;      /* the failure's */
} cur;

__attribute__((format(printf, 1, 0))) static char *vformat(const char *fmt, va_list ap)
{
	char *s = NULL;
	if (vasprintf(&s, fmt, ap) < 0)
		return NULL;
	size_t len = strlen(s);
	while (len && s[len - 1] == '\n')
		s[--len] = '\0';
	return s;
}

static __attribute__((noreturn)) void end_check(enum outcome how)
{
	if (!cur.running) {
		/* Only the checks' own thread, inside a check, may end one. */
		fprintf(stderr, "aksandbox-plugin-check: internal error: a check ended outside "
		                "its run\n");
		abort();
	}
	longjmp(cur.jump, (int)how + 1);
}

void aks_check_fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	free(cur.message);
	cur.message = vformat(fmt, ap);
	va_end(ap);
	end_check(FAILED);
}

void aks_check_skip(void)
{
	end_check(NOT_VERIFIED);
}

void aks_check_note(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = vformat(fmt, ap);
	va_end(ap);
	if (s)
		json_object_array_add(cur.notes, json_object_new_string(s));
	free(s);
}

/* Each line of `text` as a TAP comment. */
static void print_comment(const char *text)
{
	while (*text) {
		size_t n = strcspn(text, "\n");
		printf("# %.*s\n", (int)n, text);
		text += n;
		if (*text == '\n')
			text++;
	}
}

static void print_tap(size_t number, const char *name, enum outcome how, json_object *notes,
                      const char *message)
{
	if (how == NOT_VERIFIED)
		printf("ok %zu # SKIP %s\n", number, name);
	else
		printf("%s %zu - %s\n", how == PASSED ? "ok" : "not ok", number, name);
	for (size_t i = 0; i < json_object_array_length(notes); i++)
		print_comment(json_object_get_string(json_object_array_get_idx(notes, i)));
	if (message)
		print_comment(message);
	fflush(stdout);
}

static json_object *json_case(const char *name, enum outcome how, json_object *notes,
                              const char *message)
{
	json_object *c = json_object_new_object();
	json_object_object_add(c, "name", json_object_new_string(name));
	json_object_object_add(c, "result", json_object_new_string(outcome_names[how]));
	if (message)
		json_object_object_add(c, "message", json_object_new_string(message));
	json_object_object_add(c, "notes",
	                       notes ? json_object_get(notes) : json_object_new_array());
	return c;
}

size_t aks_check_run(const char *suite, const char *plugin, const struct aks_check_case *cases,
                     size_t count, void (*teardown)(void), enum aks_check_format format,
                     int *proofs)
{
	static const int as_proof[] = {AKS_PROOF_PASSED, AKS_PROOF_FAILED, AKS_PROOF_NOT_VERIFIED,
	                               AKS_PROOF_NONE};
	size_t tally[4] = {0};
	json_object *report = json_object_new_array();
	const char *stopped_by = NULL;

	for (size_t i = 0; i < count; i++) {
		enum outcome how = NOT_RUN;
		cur.notes = json_object_new_array();
		cur.message = NULL;
		if (!stopped_by) {
			int jumped = setjmp(cur.jump);
			if (!jumped) {
				cur.running = true;
				cases[i].run();
				how = PASSED;
			} else {
				how = (enum outcome)(jumped - 1);
			}
			cur.running = false;
			teardown();
			if (how == FAILED && cases[i].gate)
				stopped_by = cases[i].name;
		}
		tally[how]++;
		proofs[i] = as_proof[how];
		if (format == AKS_CHECK_JSON)
			json_object_array_add(
			    report, json_case(cases[i].name, how, cur.notes, cur.message));
		else if (how != NOT_RUN)
			print_tap(i + 1, cases[i].name, how, cur.notes, cur.message);
		json_object_put(cur.notes);
		free(cur.message);
		cur.notes = NULL;
		cur.message = NULL;
	}

	if (format == AKS_CHECK_JSON) {
		json_object *doc = json_object_new_object();
		json_object_object_add(doc, "suite", json_object_new_string(suite));
		json_object_object_add(doc, "plugin", json_object_new_string(plugin));
		json_object_object_add(doc, "ok", json_object_new_boolean(!tally[FAILED]));
		for (int k = PASSED; k <= NOT_RUN; k++)
			json_object_object_add(doc, outcome_names[k],
			                       json_object_new_int64((int64_t)tally[k]));
		if (stopped_by)
			json_object_object_add(doc, "stopped_by",
			                       json_object_new_string(stopped_by));
		json_object_object_add(doc, "checks", report);
		printf("%s\n", json_object_to_json_string_ext(
		                   doc, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(doc);
	} else {
		json_object_put(report);
		if (stopped_by)
			printf("# %zu check%s not run: %s failed, and %s need%s it\n",
			       tally[NOT_RUN], tally[NOT_RUN] == 1 ? "" : "s", stopped_by,
			       tally[NOT_RUN] == 1 ? "it" : "they", tally[NOT_RUN] == 1 ? "s" : "");
		printf("# %s: %zu check%s passed, %zu failed, %zu not verified\n", suite,
		       tally[PASSED], tally[PASSED] == 1 ? "" : "s", tally[FAILED],
		       tally[NOT_VERIFIED]);
		printf("1..%zu\n", count - tally[NOT_RUN]);
	}
	fflush(stdout);
	return tally[FAILED];
}
