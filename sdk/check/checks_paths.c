/*
 * sdk/check/checks_paths.c - the file operations stay in the workspace, tried as an
 * attacker's agent would: a path climbing out with "..", an absolute path (which the
 * reference takes relative to the workspace: it must land there or be refused, never at
 * that place of the system), and a symlink that the sandbox's own code planted in the
 * workspace, pointing at "/", followed by an upload and a download. A program in the
 * sandbox (python) plants the link and a file to steal beside the workspace, then looks
 * for what got out and removes it all.
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

static bool files_declared(void)
{
	return aks_provider_get_capabilities(aks_check_need_provider())->files;
}

/* Runs python `code` in sb (default policy), which must exit 0, and returns its stdout. */
static const char *python(aks_sandbox *sb, const char *code)
{
	aks_result *r = NULL;
	aks_error *err = NULL;
	aks_call call;
	aks_check_call(&call);
	int rc = aks_sandbox_execute_code(sb, code, "python", &call, &r, &err);
	aks_check_keep(r);
	aks_check_expect("execute_code(the path probe's python)", rc, AKS_OK, err);
	if (!r)
		aks_check_fail("execute_code returned AKS_OK without a result");
	size_t len = 0;
	const char *out = aks_result_get_stdout(r, &len);
	if (aks_result_get_exit_code(r) != 0) {
		const char *e = aks_result_get_stderr(r, NULL);
		aks_check_fail("the path probe's python exited with %d: %.300s",
		               aks_result_get_exit_code(r), e ? e : "");
	}
	return out ? out : "";
}

static int upload(aks_sandbox *sb, const char *path)
{
	aks_error *err = NULL;
	aks_call call;
	aks_check_call(&call);
	int rc = aks_sandbox_upload_file(sb, path, "aks-check", 9, &call, &err);
	aks_error_free(err);
	return rc;
}

void aks_check_file_paths(void)
{
	if (!files_declared()) {
		aks_check_note("file_paths: files not declared, nothing to prove");
		return;
	}
	char tag[64], code[2048], up[128], abs[128], via_link[160], steal[160];
	snprintf(tag, sizeof(tag), "aks-check-%ld", (long)getpid());
	aks_sandbox *sb = aks_check_create();

	/* The sandbox plants a link to / and a secret beside its workspace (where a default
	 * sandbox can write: its /tmp). */
	snprintf(code, sizeof(code),
	         "import os\n"
	         "os.symlink('/', '%s-link')\n"
	         "open('/tmp/%s.secret', 'w').write('SECRET-' + 'aks')\n"
	         "print('plan' 'ted')\n",
	         tag, tag);
	if (!strstr(python(sb, code), "planted")) {
		aks_check_note("NOT VERIFIED: file_paths: the sandbox's python could not plant a "
		               "symlink and a file in /tmp");
		aks_check_skip();
	}
	snprintf(up, sizeof(up), "../%s.up", tag);
	snprintf(abs, sizeof(abs), "/tmp/%s.abs", tag);
	snprintf(via_link, sizeof(via_link), "%s-link/tmp/%s.sym", tag, tag);
	snprintf(steal, sizeof(steal), "%s-link/tmp/%s.secret", tag, tag);
	upload(sb, up);
	upload(sb, abs);
	upload(sb, via_link);

	/* The download through the link must not bring the secret back. */
	aks_result *r = NULL;
	aks_error *err = NULL;
	aks_call call;
	aks_check_call(&call);
	int rc = aks_sandbox_download_file(sb, steal, &call, &r, &err);
	aks_check_keep(r);
	aks_error_free(err);
	bool stolen = false;
	for (size_t i = 0; rc == AKS_OK && r && i < aks_result_get_file_count(r); i++) {
		size_t len = 0;
		const unsigned char *data = aks_result_get_file(r, i, NULL, NULL, &len);
		stolen |= data && len >= 10 && memcmp(data, "SECRET-aks", 10) == 0;
	}

	/* What got out, as the sandbox sees it; then everything is removed. */
	snprintf(code, sizeof(code),
	         "import os, shutil\n"
	         "parent = os.path.dirname(os.path.realpath(os.getcwd()))\n"
	         "out = []\n"
	         "for what, p in (('..', os.path.join(parent, '%s.up')),\n"
	         "                ('absolute', '/tmp/%s.abs'), ('symlink', '/tmp/%s.sym')):\n"
	         "    if os.path.lexists(p):\n"
	         "        out.append('%%s:%%s' %% (what, p))\n"
	         "        os.unlink(p)\n"
	         "for p in ('%s-link', '/tmp/%s.secret'):\n"
	         "    if os.path.isdir(p) and not os.path.islink(p):\n"
	         "        shutil.rmtree(p)\n"
	         "    elif os.path.lexists(p):\n"
	         "        os.unlink(p)\n"
	         "print('esc' 'aped=' + (','.join(out) or '-'))\n",
	         tag, tag, tag, tag, tag);
	const char *seen = python(sb, code);
	const char *escaped = strstr(seen, "escaped=");
	if (!escaped)
		aks_check_fail("the path probe printed no line: %.200s", seen);
	escaped += strlen("escaped=");
	int n = (int)strcspn(escaped, "\n");
	bool wrote_out = !(n == 1 && escaped[0] == '-');
	if (stolen && wrote_out)
		aks_check_fail("file operations left the workspace: download_file(\"%s\") read "
		               "a file outside it, and uploads landed at %.*s",
		               steal, n, escaped);
	if (stolen)
		aks_check_fail("a file operation left the workspace: download_file(\"%s\") read "
		               "a file outside it through a symlink the sandbox planted",
		               steal);
	if (wrote_out)
		aks_check_fail("a file operation left the workspace: uploads landed at %.*s", n,
		               escaped);
}
