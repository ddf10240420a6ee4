/*
 * sdk/check/harness.h - how a check of aksandbox-plugin-check ends, and how the run is
 * reported.
 *
 * A check is a plain function run in order in one process. It passes by returning; it
 * ends early through aks_check_fail (the plugin broke the contract: one message saying
 * what it did) or aks_check_skip (the check could not be proved on this machine: NOT
 * VERIFIED, never a pass), both of which leave it with a longjmp, so only the thread
 * that runs the checks may call them. Notes are kept with the check and printed with
 * its result.
 *
 * The run is printed as TAP (a line per check, "ok N - NAME", "not ok N - NAME" or
 * "ok N # SKIP NAME", the check's notes and message below it as "# " lines, the plan at
 * the end) or, with --json, as one JSON document. A gate check (the plugin loads, the
 * instance opens) that fails ends the run there: what needs it is reported once as not
 * run, instead of failing each on its own.
 */
#ifndef AKS_CHECK_HARNESS_H
#define AKS_CHECK_HARNESS_H

#include <stdbool.h>
#include <stddef.h>

struct aks_check_case {
	const char *name;
	void (*run)(void);
	bool gate; /* when it fails, the checks after it are not run */
};

enum aks_check_format { AKS_CHECK_TAP, AKS_CHECK_JSON };

/* Fails the running check with a message (printf-style). */
__attribute__((noreturn, format(printf, 1, 2))) void aks_check_fail(const char *fmt, ...);
/* Ends the running check as NOT VERIFIED; a note should say why. */
__attribute__((noreturn)) void aks_check_skip(void);
/* Adds a note to the running check (a trailing newline is dropped). */
__attribute__((format(printf, 1, 2))) void aks_check_note(const char *fmt, ...);

/*
 * Runs `cases` in order, each followed by `teardown` (which may not fail), and prints
 * the report of a run named `suite` over `plugin` to stdout. Stores each check's outcome
 * as an aks_proof (AKS_PROOF_NONE for one not run) in proofs[i]. Returns the number of
 * checks that failed.
 */
size_t aks_check_run(const char *suite, const char *plugin, const struct aks_check_case *cases,
                     size_t count, void (*teardown)(void), enum aks_check_format format,
                     int *proofs);

#endif /* AKS_CHECK_HARNESS_H */
