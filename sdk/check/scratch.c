/*
 * sdk/check/scratch.c - tracking of the objects a check creates, so that a
 * failed assertion (which longjmps out of the check) leaks nothing and leaves
 * no sandbox behind, and the provider can still be closed cleanly.
 */
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

#define MAX_TRACKED 16

/* Untyped slots, so one tracking function serves every kind of object. */
static struct {
	void *sandboxes[MAX_TRACKED]; /* aks_sandbox */
	void *results[MAX_TRACKED];   /* aks_result */
	void *ids[MAX_TRACKED];       /* char */
	void *planted[MAX_TRACKED];   /* char: a file of this machine, in a directory of its own */
} scratch;

static void track(void **slots, void *p)
{
	for (size_t i = 0; i < MAX_TRACKED; i++) {
		if (!slots[i]) {
			slots[i] = p;
			return;
		}
	}
	aks_check_fail("internal: more than %d objects in one check", MAX_TRACKED);
}

void aks_check_teardown(void)
{
	for (size_t i = 0; i < MAX_TRACKED; i++) {
		if (scratch.sandboxes[i])
			aks_sandbox_close(scratch.sandboxes[i]);
		scratch.sandboxes[i] = NULL;
	}
	for (size_t i = 0; i < MAX_TRACKED; i++) {
		if (scratch.ids[i] && aks_check.provider) {
			aks_call call;
			aks_error *err = NULL;

			aks_check_call(&call);
			aks_provider_destroy(aks_check.provider, scratch.ids[i], &call, &err);
			aks_error_free(err);
		}
		free(scratch.ids[i]);
		scratch.ids[i] = NULL;
	}
	for (size_t i = 0; i < MAX_TRACKED; i++) {
		aks_result_free(scratch.results[i]);
		scratch.results[i] = NULL;
	}
	for (size_t i = 0; i < MAX_TRACKED; i++) {
		char *file = scratch.planted[i];
		if (!file)
			continue;
		unlink(file);
		*strrchr(file, '/') = '\0';
		rmdir(file);
		free(file);
		scratch.planted[i] = NULL;
	}
}

const char *aks_check_plant(const char *content)
{
	const char *tmp = getenv("TMPDIR");
	char dir[512];
	/* The path goes into a probe's program as a quoted literal. */
	if (!tmp || tmp[0] != '/' || strlen(tmp) > 256 || strpbrk(tmp, "'\\\n"))
		tmp = "/tmp";
	snprintf(dir, sizeof(dir), "%s/aks-check-XXXXXX", tmp);
	if (!mkdtemp(dir))
		aks_check_fail("cannot create a directory in %s to plant a file in", tmp);
	size_t size = strlen(dir) + sizeof("/outside");
	char *file = malloc(size);
	if (!file) {
		rmdir(dir);
		aks_check_fail("out of memory");
	}
	snprintf(file, size, "%s/outside", dir);
	/* Readable by anyone, so only the sandbox's confinement can keep a program from it. */
	chmod(dir, 0755);
	int fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	size_t len = strlen(content);
	bool written = fd >= 0 && write(fd, content, len) == (ssize_t)len;
	if (fd >= 0)
		close(fd);
	for (size_t i = 0; written && i < MAX_TRACKED; i++) {
		if (!scratch.planted[i]) {
			scratch.planted[i] = file;
			return file;
		}
	}
	unlink(file);
	rmdir(dir);
	free(file);
	if (written)
		aks_check_fail("internal: more than %d planted files in one check", MAX_TRACKED);
	aks_check_fail("cannot write a file in %s", dir);
}

const aks_plugin *aks_check_need_plugin(void)
{
	if (!aks_check.plugin)
		aks_check_fail("the plugin did not load (see check plugin_loads)");
	return aks_check.plugin;
}

aks_provider *aks_check_need_provider(void)
{
	if (!aks_check.provider)
		aks_check_fail("no provider instance (see check provider_opens)");
	return aks_check.provider;
}

void aks_check_call(aks_call *call)
{
	aks_call_init(call, AKS_CHECK_CALL_TIMEOUT, NULL, NULL, NULL);
}

aks_sandbox *aks_check_create(void)
{
	aks_provider *prov = aks_check_need_provider();
	aks_sandbox *sb = NULL;
	aks_error *err = NULL;
	aks_call call;

	aks_check_call(&call);
	int rc = aks_provider_create(prov, &call, &sb, &err);
	aks_check_expect("create", rc, AKS_OK, err);
	if (!sb)
		aks_check_fail("create returned AKS_OK but no sandbox");
	track(scratch.sandboxes, sb);
	const char *id = aks_sandbox_get_id(sb);
	if (!id || !*id)
		aks_check_fail("a new sandbox has no id");
	aks_check_keep_id(id);
	return sb;
}

void aks_check_track(aks_sandbox *sb)
{
	track(scratch.sandboxes, sb);
	const char *id = aks_sandbox_get_id(sb);
	if (id && *id)
		aks_check_keep_id(id);
}

int aks_check_attach(const char *id, aks_sandbox **out, aks_error **err)
{
	aks_call call;

	*out = NULL;
	aks_check_call(&call);
	int rc = aks_provider_attach(aks_check_need_provider(), id, &call, out, err);
	if (rc == AKS_OK && *out)
		track(scratch.sandboxes, *out);
	return rc;
}

void aks_check_close(aks_sandbox *sb)
{
	for (size_t i = 0; i < MAX_TRACKED; i++) {
		if (scratch.sandboxes[i] == sb) {
			scratch.sandboxes[i] = NULL;
			aks_sandbox_close(sb);
			return;
		}
	}
	aks_check_fail("internal: closing an untracked sandbox");
}

aks_result *aks_check_keep(aks_result *r)
{
	if (r)
		track(scratch.results, r);
	return r;
}

const char *aks_check_keep_id(const char *id)
{
	char *copy = strdup(id);

	if (!copy)
		aks_check_fail("out of memory");
	track(scratch.ids, copy);
	return copy;
}

void aks_check_expect(const char *what, int rc, int want, aks_error *err)
{
	char msg[1024];

	if (rc == want) {
		aks_error_free(err);
		return;
	}
	snprintf(msg, sizeof(msg), "%s: expected %s (%d), got %s (%d)%s%s", what,
	         want == AKS_OK ? "success" : aks_strerror(want), want,
	         rc == AKS_OK ? "success" : aks_strerror(rc), rc, err ? ": " : "",
	         err ? aks_error_message(err) : "");
	aks_error_free(err);
	aks_check_fail("%s", msg);
}
