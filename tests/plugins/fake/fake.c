/*
 * fake.c - the in-memory fake provider (the seeds' FakeSandbox and
 * FakeSandboxProvider, reference section 9), for tests that need a provider
 * without any backend.
 *
 *  - execute_code (python, bash) and execute_command echo their input on
 *    stdout with exit code 0; input containing FAKE_FAIL_MARKER instead gives
 *    stderr "simulated non-zero exit" and exit code 1 (a failing program is a
 *    result, never an error). The command FAKE_DESCRIBE_CALL instead prints
 *    what the call carries (fake_describe_call), for tests of what the host
 *    hands a plugin. Input containing FAKE_VANISH_MARKER makes the
 *    sandbox vanish as if its backend deleted it behind the host's back: the
 *    operation fails with AKS_EGONE, and so does any later attach of its id
 *    (destroy is not called, so destroy_log does not list it).
 *  - Files live in an in-memory map per sandbox; a missing file is
 *    AKS_ENOTFOUND.
 *  - install_packages is deliberately absent: the host turns the NULL slot into
 *    a capability error.
 *  - create mints a uuid4-style id of 32 lowercase hex digits; attach of an
 *    unknown id is AKS_EGONE; destroy is idempotent.
 *  - Config (all optional): `attaches_external: true` makes the instance
 *    declare attaches_external (through instance_capabilities), so profiles
 *    with `environment: attached` accept it; `attach_to` is only there for
 *    such profiles to name their target. With attaches_external, every id of
 *    at most 32 characters starting with "ext-" stands for an existing
 *    external environment: the first attach materialises it (with no files),
 *    and it lives on, files included, until a destroy of that id, after which
 *    attaching to it is AKS_EGONE (so a test can tell whether the host ever
 *    destroyed it).
 *    `destroy_log: PATH` appends each id destroy is called with to PATH, one
 *    per line, so a test can see which destroys the host made.
 *    `create_log: PATH` likewise appends each id create mints, so a test can
 *    count the sandboxes the host made (and, pointed at the same file as
 *    destroy_log, see the order of creates and destroys).
 *    `destroy_refused_while: PATH` makes destroy fail (AKS_ERROR, nothing
 *    destroyed or logged) while PATH exists, as a backend refusing for now would.
 *    `create_delay: SECONDS` makes create take that long, as a slow backend
 *    would; it gives up at the call's deadline (AKS_ETIMEOUT) or when the
 *    call is cancelled (AKS_ECANCELLED), as a provider must.
 *
 * Tests drive one instance from many threads at once, so one mutex per
 * instance guards the sandbox table and everything the sandboxes hold.
 * Sandboxes are reference counted: the table holds one reference and every
 * open handle one more, so destroy while a handle is open is safe (the handle
 * then answers AKS_EGONE).
 *
 * FAKE_PLUGIN_NAME lets another test plugin reuse this file under its own name
 * (tests/plugins/broken/extra_export.c); FAKE_NO_DESCRIPTOR leaves out the
 * capabilities, the operation tables and the descriptor, for a plugin that
 * wraps these operations in its own (tests/plugins/broken/contract_liar.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <aksandbox/plugin.h>
#include <aksandbox/provider.h>

#ifndef FAKE_PLUGIN_NAME
#define FAKE_PLUGIN_NAME "fake"
#endif

#define FAKE_FAIL_MARKER   "__nonzero_exit__"
#define FAKE_FAIL_STDERR   "simulated non-zero exit"
#define FAKE_DESCRIBE_CALL "__describe_call__"
#define FAKE_VANISH_MARKER "__vanish__"
#define FAKE_ID_LEN        32

struct fake_file {
	struct fake_file *next;
	char *path;
	unsigned char *data;
	size_t len;
};

struct fake_box {
	struct fake_box *next; /* in the instance's table while not destroyed */
	char id[FAKE_ID_LEN + 1];
	unsigned refs; /* the table's (while live) plus one per open handle */
	bool destroyed;
	bool external; /* an "ext-" environment: kept in the table once destroyed */
	struct fake_file *files;
};

struct aks_provider_impl {
	const aks_host_api *host;
	bool attaches_external;      /* config: declare it, and accept "ext-" ids */
	bool claim_packages;         /* config: the instance declares package_install (a lie) */
	double create_delay;         /* config: seconds create takes */
	char *destroy_log;           /* config: where destroy calls are recorded, or NULL */
	char *create_log;            /* config: where created ids are recorded, or NULL */
	char *destroy_refused_while; /* config: destroy fails while this file exists */
	pthread_mutex_t lock;
	struct fake_box *boxes;
};

struct aks_sandbox_impl {
	struct aks_provider_impl *prov;
	struct fake_box *box;
};

static const char *const fake_languages[] = {"python", "bash", NULL};

/* ---- sandboxes ---------------------------------------------------------- */

static void fake_files_free(struct fake_file *f)
{
	while (f) {
		struct fake_file *next = f->next;
		free(f->path);
		free(f->data);
		free(f);
		f = next;
	}
}

/* Drops one reference; the caller holds prov->lock. */
static void fake_box_unref(struct fake_box *box)
{
	if (--box->refs > 0)
		return;
	fake_files_free(box->files);
	free(box);
}

/* The caller holds prov->lock. */
static struct fake_box *fake_box_find(struct aks_provider_impl *prov, const char *id)
{
	for (struct fake_box *b = prov->boxes; b; b = b->next)
		if (strcmp(b->id, id) == 0)
			return b;
	return NULL;
}

/* Fills buf with random bytes: getrandom() first, /dev/urandom as a fallback
 * for kernels without it. */
static int fake_random(unsigned char *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = getrandom(buf + got, len - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		got += (size_t)n;
	}
	if (got == len)
		return 0;

	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	got = 0;
	while (got < len) {
		ssize_t n = read(fd, buf + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	return got == len ? 0 : -1;
}

/* A uuid4 in hex without dashes, like Python's uuid.uuid4().hex. */
static int fake_mint_id(char out[FAKE_ID_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char raw[FAKE_ID_LEN / 2];

	if (fake_random(raw, sizeof(raw)) != 0)
		return -1;
	raw[6] = (unsigned char)((raw[6] & 0x0f) | 0x40); /* version 4 */
	raw[8] = (unsigned char)((raw[8] & 0x3f) | 0x80); /* RFC 4122 variant */
	for (size_t i = 0; i < sizeof(raw); i++) {
		out[2 * i] = hex[raw[i] >> 4];
		out[2 * i + 1] = hex[raw[i] & 0x0f];
	}
	out[FAKE_ID_LEN] = '\0';
	return 0;
}

static const char *fake_sandbox_id(const aks_sandbox_impl *sb)
{
	return sb->box->id;
}

/* Takes a managed box out of the instance's table (lock held), as its backend deleting it
 * would: handles still open on it answer AKS_EGONE from now on. */
static void fake_box_vanish(aks_provider_impl *prov, struct fake_box *box)
{
	for (struct fake_box **p = &prov->boxes; *p; p = &(*p)->next) {
		if (*p != box)
			continue;
		*p = box->next;
		box->next = NULL;
		box->destroyed = true;
		fake_box_unref(box);
		return;
	}
}

/* Both execution operations follow one rule: echo the input, or fail the
 * "program" when it contains the marker, or lose the sandbox on the vanish marker. */
static int fake_run(aks_sandbox_impl *sb, const char *input, aks_result *out, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	bool gone;

	pthread_mutex_lock(&sb->prov->lock);
	if (strstr(input, FAKE_VANISH_MARKER) && !sb->box->external)
		fake_box_vanish(sb->prov, sb->box);
	gone = sb->box->destroyed;
	pthread_mutex_unlock(&sb->prov->lock);
	if (gone)
		return host->error_set(err, AKS_EGONE, "fake sandbox '%s' was destroyed",
		                       sb->box->id);

	if (strstr(input, FAKE_FAIL_MARKER)) {
		int rc = host->result_write(out, AKS_STREAM_STDERR, FAKE_FAIL_STDERR,
		                            strlen(FAKE_FAIL_STDERR), err);
		if (rc != AKS_OK)
			return rc;
		host->result_set_exit_code(out, 1);
		return AKS_OK;
	}
	int rc = host->result_write(out, AKS_STREAM_STDOUT, input, strlen(input), err);
	if (rc != AKS_OK)
		return rc;
	host->result_set_exit_code(out, 0);
	return AKS_OK;
}

static int fake_execute_code(aks_sandbox_impl *sb, const char *code, const char *language,
                             const aks_call *call, aks_result *out, aks_error **err)
{
	bool known = false;

	for (const char *const *l = fake_languages; *l; l++)
		if (strcmp(*l, language) == 0)
			known = true;
	if (!known)
		return sb->prov->host->error_set(err, AKS_ECAPABILITY,
		                                 "provider '%s' does not support language:%s",
		                                 FAKE_PLUGIN_NAME, language);
	return fake_run(sb, code, out, err);
}

static size_t fake_count(const char *const *list)
{
	size_t n = 0;
	while (list[n])
		n++;
	return n;
}

/* One line of every field of the call, its policy and its principal, read the way a
 * plugin may: directly, with no size check, because the host hands plugins its own
 * layout. */
static int fake_describe_call(aks_sandbox_impl *sb, const aks_call *call, aks_result *out,
                              aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	const aks_policy *p = call->policy;
	const aks_principal *who = call->principal;
	char line[1024];
	int n =
	    snprintf(line, sizeof(line),
	             "call: size=%u timeout=%g deadline=%s cancellable=%s\n"
	             "policy: size=%u egress=%u allow=%zu read=%zu write=%zu cpu=%g "
	             "memory_mb=%lld timeout=%g strict=%s\n"
	             "principal: size=%u mode=%u subject=%s groups=%zu credentials=%zu\n",
	             call->struct_size, call->timeout, call->deadline_ms > 0 ? "yes" : "no",
	             host->cancel_fd(call) >= 0 ? "yes" : "no", p->struct_size, p->network_egress,
	             fake_count(p->network_allow), fake_count(p->fs_allow_read),
	             fake_count(p->fs_allow_write), p->cpu, (long long)p->memory_mb, p->timeout,
	             p->strict ? "yes" : "no", who->struct_size, who->mode, who->subject,
	             fake_count(who->groups), fake_count(who->credentials));
	if (n < 0 || (size_t)n >= sizeof(line))
		return host->error_set(err, AKS_ERROR, "fake: call description too long");
	int rc = host->result_write(out, AKS_STREAM_STDOUT, line, (size_t)n, err);
	if (rc == AKS_OK)
		host->result_set_exit_code(out, 0);
	return rc;
}

static int fake_execute_command(aks_sandbox_impl *sb, const char *command, const aks_call *call,
                                aks_result *out, aks_error **err)
{
	if (strcmp(command, FAKE_DESCRIBE_CALL) == 0)
		return fake_describe_call(sb, call, out, err);
	return fake_run(sb, command, out, err);
}

/* The fake has no real workspace, but it keeps the contract's path rule:
 * absolute paths and ".." components would escape a workspace. */
static bool fake_path_escapes(const char *path)
{
	if (path[0] == '/')
		return true;
	for (const char *p = path; *p;) {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return true;
		p += n;
		p += strspn(p, "/");
	}
	return false;
}

static int fake_upload_file(aks_sandbox_impl *sb, const char *path, const void *data, size_t len,
                            const aks_call *call, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	struct fake_file *f;
	unsigned char *copy;

	if (path[0] == '\0' || fake_path_escapes(path))
		return host->error_set(err, AKS_EPOLICY, "path '%s' escapes the sandbox workspace",
		                       path);
	copy = malloc(len ? len : 1);
	if (!copy)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	if (len)
		memcpy(copy, data, len);

	pthread_mutex_lock(&sb->prov->lock);
	if (sb->box->destroyed) {
		pthread_mutex_unlock(&sb->prov->lock);
		free(copy);
		return host->error_set(err, AKS_EGONE, "fake sandbox '%s' was destroyed",
		                       sb->box->id);
	}
	for (f = sb->box->files; f; f = f->next)
		if (strcmp(f->path, path) == 0)
			break;
	if (f) {
		free(f->data);
	} else {
		f = calloc(1, sizeof(*f));
		char *name = strdup(path);
		if (!f || !name) {
			pthread_mutex_unlock(&sb->prov->lock);
			free(f);
			free(name);
			free(copy);
			return host->error_set(err, AKS_ENOMEM, "out of memory");
		}
		f->path = name;
		f->next = sb->box->files;
		sb->box->files = f;
	}
	f->data = copy;
	f->len = len;
	pthread_mutex_unlock(&sb->prov->lock);
	return AKS_OK;
}

static int fake_download_file(aks_sandbox_impl *sb, const char *path, const aks_call *call,
                              aks_result *out, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	unsigned char *copy = NULL;
	size_t len = 0;
	int rc = AKS_ENOTFOUND;

	if (path[0] == '\0' || fake_path_escapes(path))
		return host->error_set(err, AKS_EPOLICY, "path '%s' escapes the sandbox workspace",
		                       path);

	/* Copy under the lock and hand the copy to the host outside it, so a
	 * slow host allocator never blocks the other threads. */
	pthread_mutex_lock(&sb->prov->lock);
	if (sb->box->destroyed) {
		rc = AKS_EGONE;
	} else {
		for (struct fake_file *f = sb->box->files; f; f = f->next) {
			if (strcmp(f->path, path) != 0)
				continue;
			copy = malloc(f->len ? f->len : 1);
			if (copy) {
				memcpy(copy, f->data, f->len);
				len = f->len;
				rc = AKS_OK;
			} else {
				rc = AKS_ENOMEM;
			}
			break;
		}
	}
	pthread_mutex_unlock(&sb->prov->lock);

	if (rc == AKS_EGONE)
		return host->error_set(err, rc, "fake sandbox '%s' was destroyed", sb->box->id);
	if (rc == AKS_ENOTFOUND)
		return host->error_set(err, rc, "no such file: '%s'", path);
	if (rc == AKS_ENOMEM)
		return host->error_set(err, rc, "out of memory");

	rc = host->result_add_file(out, path, "application/octet-stream");
	if (rc != AKS_OK)
		rc = host->error_set(err, rc, "cannot add '%s' to the result", path);
	else
		rc = host->result_write(out, AKS_STREAM_FILE, copy, len, err);
	free(copy);
	return rc;
}

static void fake_close(aks_sandbox_impl *sb)
{
	pthread_mutex_lock(&sb->prov->lock);
	fake_box_unref(sb->box);
	pthread_mutex_unlock(&sb->prov->lock);
	free(sb);
}

/* ---- the provider --------------------------------------------------------- */

static int fake_init(const aks_host_api *host, const aks_config *config, aks_provider_impl **out,
                     aks_error **err)
{
	aks_provider_impl *prov = calloc(1, sizeof(*prov));

	if (!prov)
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	if (pthread_mutex_init(&prov->lock, NULL) != 0) {
		free(prov);
		return host->error_set(err, AKS_ERROR, "cannot initialise a mutex");
	}
	prov->host = host;
	/* Absent when the descriptor declares no keys (contract_liar). */
	if (host->config_bool(config, "attaches_external", &prov->attaches_external) != AKS_OK)
		prov->attaches_external = false;
	if (host->config_bool(config, "claim_package_install", &prov->claim_packages) != AKS_OK)
		prov->claim_packages = false;
	if (host->config_double(config, "create_delay", &prov->create_delay) != AKS_OK)
		prov->create_delay = 0;
	struct {
		const char *key;
		char **to;
	} paths[] = {{"destroy_log", &prov->destroy_log},
	             {"create_log", &prov->create_log},
	             {"destroy_refused_while", &prov->destroy_refused_while}};
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		const char *path = NULL;
		if (host->config_string(config, paths[i].key, &path) == AKS_OK && path &&
		    !(*paths[i].to = strdup(path))) {
			pthread_mutex_destroy(&prov->lock);
			free(prov->destroy_log);
			free(prov->create_log);
			free(prov);
			return host->error_set(err, AKS_ENOMEM, "out of memory");
		}
	}
	*out = prov;
	return AKS_OK;
}

#define FAKE_EXT_PREFIX "ext-"

/* An id that stands for an external environment of this instance. */
static bool fake_is_external(const aks_provider_impl *prov, const char *id)
{
	return prov->attaches_external &&
	       strncmp(id, FAKE_EXT_PREFIX, strlen(FAKE_EXT_PREFIX)) == 0 &&
	       strlen(id) <= FAKE_ID_LEN;
}

/* Adds an external environment to the table (the caller holds the lock). */
static struct fake_box *fake_external_new(aks_provider_impl *prov, const char *id)
{
	struct fake_box *box = calloc(1, sizeof(*box));
	if (!box)
		return NULL;
	strcpy(box->id, id); /* fits: fake_is_external bounds the length */
	box->external = true;
	box->refs = 1; /* the table's */
	box->next = prov->boxes;
	prov->boxes = box;
	return box;
}

static void fake_fini(aks_provider_impl *prov)
{
	/* Every handle is closed by now, so the table holds the last
	 * reference of each live sandbox. */
	while (prov->boxes) {
		struct fake_box *b = prov->boxes;
		prov->boxes = b->next;
		fake_box_unref(b);
	}
	pthread_mutex_destroy(&prov->lock);
	free(prov->destroy_log);
	free(prov->create_log);
	free(prov->destroy_refused_while);
	free(prov);
}

/* A new handle on box, which the caller holds the lock for. */
static aks_sandbox_impl *fake_handle_new(aks_provider_impl *prov, struct fake_box *box)
{
	aks_sandbox_impl *sb = calloc(1, sizeof(*sb));

	if (!sb)
		return NULL;
	sb->prov = prov;
	sb->box = box;
	box->refs++;
	return sb;
}

/* Appends `id` to the log file at `path` (NULL: none); the caller holds prov->lock, which
 * keeps the lines of both logs in the order the calls happened. */
static void fake_log_id(const char *path, const char *id)
{
	if (!path)
		return;
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0) {
		dprintf(fd, "%s\n", id);
		close(fd);
	}
}

/* Waits `seconds`, or less: the call's deadline and its cancellation end the wait. */
static int slow_backend(aks_provider_impl *prov, const aks_call *call, double seconds,
                        aks_error **err)
{
	const aks_host_api *host = prov->host;
	int64_t until = host->now_ms() + (int64_t)(seconds * 1000);
	for (;;) {
		int64_t now = host->now_ms();
		if (host->cancelled(call))
			return host->error_set(err, AKS_ECANCELLED, "fake: create cancelled");
		if (call->deadline_ms > 0 && now >= call->deadline_ms)
			return host->error_set(err, AKS_ETIMEOUT,
			                       "fake: create timed out after %g s", call->timeout);
		if (now >= until)
			return AKS_OK;
		int64_t wait = until - now;
		if (call->deadline_ms > 0 && call->deadline_ms - now < wait)
			wait = call->deadline_ms - now;
		struct pollfd pfd = {host->cancel_fd(call), POLLIN, 0};
		poll(&pfd, pfd.fd >= 0 ? 1 : 0, (int)(wait > 50 ? 50 : wait));
	}
}

static int fake_create(aks_provider_impl *prov, const aks_call *call, aks_sandbox_impl **out,
                       aks_error **err)
{
	if (prov->create_delay > 0) {
		int rc = slow_backend(prov, call, prov->create_delay, err);
		if (rc < 0)
			return rc;
	}
	struct fake_box *box = calloc(1, sizeof(*box));

	if (!box)
		return prov->host->error_set(err, AKS_ENOMEM, "out of memory");
	if (fake_mint_id(box->id) != 0) {
		free(box);
		return prov->host->error_set(err, AKS_EPROVISION,
		                             "cannot read random bytes for a sandbox id");
	}
	pthread_mutex_lock(&prov->lock);
	aks_sandbox_impl *sb = fake_handle_new(prov, box);
	if (!sb) {
		pthread_mutex_unlock(&prov->lock);
		free(box);
		return prov->host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	box->refs++; /* the table's */
	box->next = prov->boxes;
	prov->boxes = box;
	fake_log_id(prov->create_log, box->id);
	pthread_mutex_unlock(&prov->lock);
	*out = sb;
	return AKS_OK;
}

static int fake_attach(aks_provider_impl *prov, const char *sandbox_id, const aks_call *call,
                       aks_sandbox_impl **out, aks_error **err)
{
	pthread_mutex_lock(&prov->lock);
	struct fake_box *box = fake_box_find(prov, sandbox_id);
	if (!box && fake_is_external(prov, sandbox_id)) {
		box = fake_external_new(prov, sandbox_id);
		if (!box) {
			pthread_mutex_unlock(&prov->lock);
			return prov->host->error_set(err, AKS_ENOMEM, "out of memory");
		}
	}
	if (!box || box->destroyed) {
		pthread_mutex_unlock(&prov->lock);
		return prov->host->error_set(err, AKS_EGONE, "fake sandbox '%s' no longer exists",
		                             sandbox_id);
	}
	aks_sandbox_impl *sb = fake_handle_new(prov, box);
	pthread_mutex_unlock(&prov->lock);
	if (!sb)
		return prov->host->error_set(err, AKS_ENOMEM, "out of memory");
	*out = sb;
	return AKS_OK;
}

static int fake_destroy(aks_provider_impl *prov, const char *sandbox_id, const aks_call *call,
                        aks_error **err)
{
	bool found = false;

	/* A backend that refuses for now (a bad credential, an outage): nothing is destroyed,
	 * nothing logged. */
	if (prov->destroy_refused_while && access(prov->destroy_refused_while, F_OK) == 0)
		return prov->host->error_set(err, AKS_ERROR, "fake: destroy of '%s' refused",
		                             sandbox_id);
	pthread_mutex_lock(&prov->lock);
	fake_log_id(prov->destroy_log, sandbox_id);
	for (struct fake_box **p = &prov->boxes; *p; p = &(*p)->next) {
		struct fake_box *box = *p;
		if (strcmp(box->id, sandbox_id) != 0)
			continue;
		found = true;
		if (box->external) {
			/* stays in the table as a tombstone: attach says it is gone */
			box->destroyed = true;
			break;
		}
		*p = box->next;
		box->next = NULL;
		box->destroyed = true;
		fake_box_unref(box);
		break;
	}
	if (!found && fake_is_external(prov, sandbox_id)) {
		struct fake_box *tomb = fake_external_new(prov, sandbox_id);
		if (tomb)
			tomb->destroyed = true;
	}
	pthread_mutex_unlock(&prov->lock);
	return AKS_OK; /* an unknown id is not an error */
}

#ifndef FAKE_NO_DESCRIPTOR
static const aks_capabilities fake_capabilities = {
    .struct_version = AKS_CAPABILITIES_VERSION,
    .struct_size = sizeof(aks_capabilities),
    .isolation = AKS_ISOLATION_NONE,
    .languages = fake_languages,
    .shell = true,
    .files = true,
    .package_install = false,
    .stateful = true,
    .attach = true,
    .provisions = true,
};

/* The same, for an instance configured with attaches_external: true. */
static const aks_capabilities fake_capabilities_external = {
    .struct_version = AKS_CAPABILITIES_VERSION,
    .struct_size = sizeof(aks_capabilities),
    .isolation = AKS_ISOLATION_NONE,
    .languages = fake_languages,
    .shell = true,
    .files = true,
    .package_install = false,
    .stateful = true,
    .attach = true,
    .attaches_external = true,
    .provisions = true,
};

/* For claim_package_install: true, an instance that declares what it has no operation for. */
static const aks_capabilities fake_capabilities_claiming = {
    .struct_version = AKS_CAPABILITIES_VERSION,
    .struct_size = sizeof(aks_capabilities),
    .isolation = AKS_ISOLATION_NONE,
    .languages = fake_languages,
    .shell = true,
    .files = true,
    .package_install = true, /* the lie: install_packages is NULL */
    .stateful = true,
    .attach = true,
    .provisions = true,
};

static const aks_capabilities *fake_instance_capabilities(const aks_provider_impl *prov)
{
	if (prov->claim_packages)
		return &fake_capabilities_claiming;
	return prov->attaches_external ? &fake_capabilities_external : &fake_capabilities;
}

static const aks_config_key fake_config_keys[] = {
    AKS_CONFIG_KEY("attaches_external", AKS_CONFIG_BOOL, false, "false",
                   "declare attaches_external; ids starting with 'ext-' are external "
                   "environments"),
    AKS_CONFIG_KEY("attach_to", AKS_CONFIG_STRING, false, NULL,
                   "the external environment of an environment: attached profile"),
    AKS_CONFIG_KEY("claim_package_install", AKS_CONFIG_BOOL, false, "false",
                   "the instance declares package_install without its operation (for the "
                   "host's check)"),
    AKS_CONFIG_KEY("create_delay", AKS_CONFIG_DOUBLE, false, "0",
                   "seconds create takes (it gives up at the call's deadline)"),
    AKS_CONFIG_KEY("destroy_log", AKS_CONFIG_STRING, false, NULL,
                   "a file each destroyed id is appended to (for tests)"),
    AKS_CONFIG_KEY("create_log", AKS_CONFIG_STRING, false, NULL,
                   "a file each created id is appended to (for tests)"),
    AKS_CONFIG_KEY("destroy_refused_while", AKS_CONFIG_STRING, false, NULL,
                   "destroy fails while this file exists, as a backend refusing would (for "
                   "tests)"),
    AKS_CONFIG_END,
};

static const aks_sandbox_ops fake_sandbox_ops = {
    .struct_version = AKS_SANDBOX_OPS_VERSION,
    .struct_size = sizeof(aks_sandbox_ops),
    .id = fake_sandbox_id,
    .execute_code = fake_execute_code,
    .execute_command = fake_execute_command,
    .upload_file = fake_upload_file,
    .download_file = fake_download_file,
    .install_packages = NULL, /* deliberately: package_install is false */
    .close = fake_close,
};

static const aks_provider_ops fake_provider_ops = {
    .struct_version = AKS_PROVIDER_OPS_VERSION,
    .struct_size = sizeof(aks_provider_ops),
    .capabilities = &fake_capabilities,
    .init = fake_init,
    .fini = fake_fini,
    .instance_capabilities = fake_instance_capabilities,
    .create = fake_create,
    .attach = fake_attach,
    .destroy = fake_destroy,
    .sandbox = &fake_sandbox_ops,
};

AKS_PLUGIN_DEFINE(AKS_PLUGIN_PROVIDER, FAKE_PLUGIN_NAME, "1.0", "Apache-2.0",
                  "in-memory fake provider for tests (echoes code, keeps files in memory)",
                  fake_config_keys, &fake_provider_ops);
#endif /* FAKE_NO_DESCRIPTOR */
