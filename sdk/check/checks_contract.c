/*
 * sdk/check/checks_contract.c - the seven checks of the seeds' provider
 * contract suite (reference section 9), against the public API, so the host's
 * own capability handling is part of what is checked.
 *
 * Capabilities are the instance's (aks_provider_get_capabilities): that is
 * what the host enforces. Declared operations must work; undeclared ones must
 * be AKS_ECAPABILITY. A failing program is a result, never an error.
 */
#include "config.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "check.h"

static const aks_capabilities *caps(void)
{
	return aks_provider_get_capabilities(aks_check_need_provider());
}

static bool declares_language(const char *language)
{
	for (const char *const *l = caps()->languages; l && *l; l++)
		if (strcmp(*l, language) == 0)
			return true;
	return false;
}

/* The kept stdout of r, or "" */
static const char *out_of(const aks_result *r)
{
	size_t len = 0;
	const char *s = aks_result_get_stdout(r, &len);
	return s ? s : "";
}

static aks_result *run_code(aks_sandbox *sb, const char *code, const char *language, int want)
{
	aks_result *r = NULL;
	aks_error *err = NULL;
	aks_call call;
	char what[256];

	aks_check_call(&call);
	int rc = aks_sandbox_execute_code(sb, code, language, &call, &r, &err);
	aks_check_keep(r);
	snprintf(what, sizeof(what), "execute_code(\"%s\", %s)", code, language);
	aks_check_expect(what, rc, want, err);
	if (want == AKS_OK && !r)
		aks_check_fail("%s returned AKS_OK without a result", what);
	return r;
}

void aks_check_execute_python(void)
{
	aks_sandbox *sb = aks_check_create();
	aks_result *r = run_code(sb, "print('hi')", "python", AKS_OK);
	int code = aks_result_get_exit_code(r);
	if (code != 0)
		aks_check_fail("print('hi') exited with %d (stderr: %s)", code,
		               aks_result_get_stderr(r, NULL) ? aks_result_get_stderr(r, NULL)
		                                              : "");
	if (!strstr(out_of(r), "hi"))
		aks_check_fail("print('hi') printed '%s', which lacks 'hi'", out_of(r));
}

void aks_check_undeclared_language(void)
{
	static const char lang[] = "definitely-not-a-language";

	if (declares_language(lang))
		aks_check_fail("the provider declares the language '%s'", lang);
	aks_sandbox *sb = aks_check_create();
	run_code(sb, "noop", lang, AKS_ECAPABILITY);
}

/* A program per language that prints 42 from a source holding no "42", so a provider
 * that echoes the source back is told apart from one that ran it. */
static const struct {
	const char *language, *code;
} language_probes[] = {
    {"python", "print(6 * 7)"},     {"bash", "echo $((6 * 7))"},
    {"sh", "echo $((6 * 7))"},      {"javascript", "console.log(6 * 7)"},
    {"node", "console.log(6 * 7)"}, {"typescript", "console.log(6 * 7)"},
    {"ruby", "puts 6 * 7"},         {"perl", "print 6 * 7, qq(\\n)"},
    {"r", "cat(6 * 7, \"\\n\")"},
};

static const char *language_probe(const char *language)
{
	for (size_t i = 0; i < sizeof(language_probes) / sizeof(*language_probes); i++)
		if (strcmp(language_probes[i].language, language) == 0)
			return language_probes[i].code;
	return NULL;
}

/* Every declared language really runs: its program prints 42 and exits 0. */
void aks_check_declared_languages_run(void)
{
	char unknown[256] = "", echoed[256] = "";
	aks_sandbox *sb = aks_check_create();
	for (const char *const *l = caps()->languages; l && *l; l++) {
		const char *code = language_probe(*l);
		if (!code) {
			snprintf(unknown + strlen(unknown), sizeof(unknown) - strlen(unknown),
			         "%s%s", unknown[0] ? ", " : "", *l);
			continue;
		}
		aks_result *r = run_code(sb, code, *l, AKS_OK);
		const char *out = out_of(r);
		if (aks_result_get_exit_code(r) == 0 && strstr(out, "42"))
			continue;
		if (aks_result_get_exit_code(r) == 0 && strstr(out, code)) {
			snprintf(echoed + strlen(echoed), sizeof(echoed) - strlen(echoed), "%s%s",
			         echoed[0] ? ", " : "", *l);
			continue;
		}
		const char *e = aks_result_get_stderr(r, NULL);
		aks_check_fail(
		    "declares the language %s, but %s exited with %d and printed '%.200s' "
		    "(stderr: %.200s)",
		    *l, code, aks_result_get_exit_code(r), out, e ? e : "");
	}
	if (unknown[0])
		aks_check_note("NOT VERIFIED: declared_languages_run: the runner has no program "
		               "for %s",
		               unknown);
	if (echoed[0])
		aks_check_note("NOT VERIFIED: declared_languages_run: the provider echoed the "
		               "program back for %s: it runs none",
		               echoed);
	if (unknown[0] || echoed[0])
		aks_check_skip();
}

void aks_check_honesty_shell(void)
{
	aks_result *r = NULL;
	aks_error *err = NULL;
	aks_call call;

	bool shell = caps()->shell;
	aks_sandbox *sb = aks_check_create();
	aks_check_call(&call);
	int rc = aks_sandbox_execute_command(sb, "echo hi", &call, &r, &err);
	aks_check_keep(r);
	if (!shell) {
		aks_check_expect("execute_command without the shell capability", rc,
		                 AKS_ECAPABILITY, err);
		return;
	}
	aks_check_expect("execute_command(\"echo hi\") with the shell capability", rc, AKS_OK, err);
	if (!r)
		aks_check_fail("execute_command returned AKS_OK without a result");
	if (aks_result_get_exit_code(r) != 0)
		aks_check_fail("echo hi exited with %d", aks_result_get_exit_code(r));
	if (!strstr(out_of(r), "hi"))
		aks_check_fail("echo hi printed '%s', which lacks 'hi'", out_of(r));
}

void aks_check_honesty_files(void)
{
	aks_result *r = NULL;
	aks_error *err = NULL;
	aks_call call;

	bool files = caps()->files;
	aks_sandbox *sb = aks_check_create();
	aks_check_call(&call);
	int rc = aks_sandbox_upload_file(sb, "f.txt", "data", 4, &call, &err);
	aks_check_expect(files ? "upload_file(\"f.txt\") with the files capability"
	                       : "upload_file without the files capability",
	                 rc, files ? AKS_OK : AKS_ECAPABILITY, err);
	err = NULL;
	aks_check_call(&call);
	rc = aks_sandbox_download_file(sb, "f.txt", &call, &r, &err);
	aks_check_keep(r);
	aks_check_expect(files ? "download_file(\"f.txt\") with the files capability"
	                       : "download_file without the files capability",
	                 rc, files ? AKS_OK : AKS_ECAPABILITY, err);
	if (!files)
		return;
	if (!r || aks_result_get_file_count(r) != 1)
		aks_check_fail("download_file returned %zu files, not 1",
		               r ? aks_result_get_file_count(r) : (size_t)0);
	size_t len = 0;
	const char *path = NULL;
	const unsigned char *data = aks_result_get_file(r, 0, &path, NULL, &len);
	if (!data || len != 4 || memcmp(data, "data", 4) != 0)
		aks_check_fail(
		    "download_file(\"f.txt\") returned %zu bytes '%.*s', not the 4 bytes "
		    "'data' uploaded",
		    len, data ? (int)(len > 64 ? 64 : len) : 0, data ? (const char *)data : "");
}

void aks_check_honesty_package_install(void)
{
	static const char *const packages[] = {"pip-noop", NULL};
	aks_result *r = NULL;
	aks_error *err = NULL;
	aks_call call;

	bool declared = caps()->package_install;
	aks_sandbox *sb = aks_check_create();
	aks_check_call(&call);
	int rc = aks_sandbox_install_packages(sb, packages, &call, &r, &err);
	aks_check_keep(r);
	aks_check_expect(declared ? "install_packages([\"pip-noop\"]) with the package_install "
	                            "capability"
	                          : "install_packages without the package_install capability",
	                 rc, declared ? AKS_OK : AKS_ECAPABILITY, err);
	if (declared && !r)
		aks_check_fail("install_packages returned AKS_OK without a result");
}

void aks_check_program_failure_is_result(void)
{
	aks_sandbox *sb = aks_check_create();
	aks_result *r = run_code(sb, AKS_CHECK_FAIL_MARKER, "python", AKS_OK);
	if (aks_result_get_exit_code(r) == 0)
		aks_check_fail("the failing program %s exited with 0", AKS_CHECK_FAIL_MARKER);
}

/* close releases the handle only: the sandbox stays attachable, and (with
 * files) keeps its workspace. Closing the re-attached handle works as well. */
void aks_check_close_is_idempotent(void)
{
	aks_error *err = NULL;
	aks_call call;

	const aks_capabilities *c = caps();
	aks_sandbox *sb = aks_check_create();
	const char *id = aks_check_keep_id(aks_sandbox_get_id(sb));
	if (c->files) {
		aks_check_call(&call);
		int rc = aks_sandbox_upload_file(sb, "kept.txt", "kept", 4, &call, &err);
		aks_check_expect("upload_file(\"kept.txt\")", rc, AKS_OK, err);
		err = NULL;
	}
	aks_check_close(sb);
	if (!c->attach)
		return;

	aks_sandbox *again = NULL;
	int rc = aks_check_attach(id, &again, &err);
	aks_check_expect("attach after close (close must keep the sandbox)", rc, AKS_OK, err);
	err = NULL;
	if (c->files) {
		aks_result *r = NULL;
		aks_check_call(&call);
		rc = aks_sandbox_download_file(again, "kept.txt", &call, &r, &err);
		aks_check_keep(r);
		aks_check_expect("download_file(\"kept.txt\") after close and attach", rc, AKS_OK,
		                 err);
		size_t len = 0;
		const unsigned char *data = r && aks_result_get_file_count(r) == 1
		                                ? aks_result_get_file(r, 0, NULL, NULL, &len)
		                                : NULL;
		if (!data || len != 4 || memcmp(data, "kept", 4) != 0)
			aks_check_fail("a file uploaded before close was not kept");
	}
	aks_check_close(again);
}

/* destroy twice and destroy of an unknown id succeed; after destroy the
 * sandbox is gone for attach. */
void aks_check_destroy_is_idempotent(void)
{
	aks_error *err = NULL;
	aks_call call;

	aks_provider *prov = aks_check_need_provider();
	aks_sandbox *sb = aks_check_create();
	const char *id = aks_check_keep_id(aks_sandbox_get_id(sb));
	aks_check_close(sb);
	for (int round = 1; round <= 2; round++) {
		char what[64];
		aks_check_call(&call);
		int rc = aks_provider_destroy(prov, id, &call, &err);
		snprintf(what, sizeof(what), "destroy (round %d)", round);
		aks_check_expect(what, rc, AKS_OK, err);
		err = NULL;
	}
	aks_check_call(&call);
	int rc = aks_provider_destroy(prov, "unknown-sandbox-id", &call, &err);
	aks_check_expect("destroy(\"unknown-sandbox-id\")", rc, AKS_OK, err);
	err = NULL;
	if (caps()->attach) {
		aks_sandbox *again = NULL;
		rc = aks_check_attach(id, &again, &err);
		aks_check_expect("attach to a destroyed sandbox", rc, AKS_EGONE, err);
	}
}

void aks_check_attach_honesty(void)
{
	aks_sandbox *again = NULL;
	aks_error *err = NULL;

	if (!caps()->attach) {
		int rc = aks_check_attach("whatever", &again, &err);
		aks_check_expect("attach without the attach capability", rc, AKS_ECAPABILITY, err);
		return;
	}
	aks_sandbox *sb = aks_check_create();
	const char *id = aks_check_keep_id(aks_sandbox_get_id(sb));
	int rc = aks_check_attach(id, &again, &err);
	aks_check_expect("attach to a live sandbox", rc, AKS_OK, err);
	err = NULL;
	if (!again)
		aks_check_fail("attach returned AKS_OK without a sandbox");
	const char *again_id = aks_sandbox_get_id(again);
	if (!again_id || strcmp(again_id, id) != 0)
		aks_check_fail("attach('%s') returned a sandbox with id '%s'", id,
		               again_id ? again_id : "(null)");
	run_code(again, "print('hi')", "python", AKS_OK);

	aks_sandbox *none = NULL;
	rc = aks_check_attach("nonexistent-id", &none, &err);
	aks_check_expect("attach(\"nonexistent-id\")", rc, AKS_EGONE, err);
}

/* Triggers a cancellation token after a delay, from another thread. */
struct delayed_cancel {
	aks_cancel *cancel;
	unsigned delay_ms;
};

static void *cancel_later(void *arg)
{
	struct delayed_cancel *d = arg;
	struct timespec ts = {d->delay_ms / 1000, (long)(d->delay_ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
	aks_cancel_trigger(d->cancel);
	return NULL;
}

static double seconds_since(const struct timespec *start)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - start->tv_sec) + (double)(now.tv_nsec - start->tv_nsec) / 1e9;
}

/* A program that would run for a minute: the provider must come back at its
 * deadline (AKS_ETIMEOUT, result marked timed out) or when the call is
 * cancelled (AKS_ECANCELLED), well before the program would have ended. A
 * provider that does not really run code (a fake) may answer AKS_OK at once. */
void aks_check_deadline_and_cancel_are_honoured(void)
{
	static const char code[] = "import time\ntime.sleep(60)\n";
	const double grace = 10.0;
	aks_result *r = NULL;
	aks_error *err = NULL;
	aks_call call;
	struct timespec start;

	aks_sandbox *sb = aks_check_create();
	aks_call_init(&call, 1.0, NULL, NULL, NULL);
	clock_gettime(CLOCK_MONOTONIC, &start);
	int rc = aks_sandbox_execute_code(sb, code, "python", &call, &r, &err);
	double took = seconds_since(&start);
	aks_check_keep(r);
	if (took > 1.0 + grace)
		aks_check_fail("a 1 s deadline returned after %.1f s", took);
	if (rc != AKS_OK) {
		aks_check_expect("a program past its 1 s deadline", rc, AKS_ETIMEOUT, err);
		if (!r || !aks_result_timed_out(r))
			aks_check_fail("AKS_ETIMEOUT without a result marked timed out");
	}

	aks_cancel *cancel = NULL;
	err = NULL;
	if (aks_cancel_new(&cancel, &err) < 0)
		aks_check_fail("aks_cancel_new: %s", aks_error_message(err));
	struct delayed_cancel d = {cancel, 500};
	pthread_t thread;
	pthread_create(&thread, NULL, cancel_later, &d);
	aks_call_init(&call, 120.0, NULL, NULL, cancel);
	r = NULL;
	clock_gettime(CLOCK_MONOTONIC, &start);
	rc = aks_sandbox_execute_code(sb, code, "python", &call, &r, &err);
	took = seconds_since(&start);
	pthread_join(thread, NULL);
	aks_cancel_free(cancel);
	aks_check_keep(r);
	if (took > 0.5 + grace)
		aks_check_fail("a call cancelled after 0.5 s returned after %.1f s", took);
	if (rc != AKS_OK)
		aks_check_expect("a cancelled program", rc, AKS_ECANCELLED, err);
}
