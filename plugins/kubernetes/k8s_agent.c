/*
 * plugins/kubernetes/k8s_agent.c - running a sandbox's operations through aksandbox-agent
 * (docs/agent-protocol.md) inside its pod.
 *
 * Each sandbox handle gets one agent, started at its first operation and living as long
 * as the handle: placed in the pod by one exec (the file on stdin; pods we create have an
 * emptyDir at /.aksandbox for it, which a read-only root does not affect and which
 * survives a restart of the container), then run by one long-lived exec WebSocket
 * (k8s_stream.c) with the handle's identity. Commands, code and files are requests to it;
 * Python runs in its persistent session, so state survives between calls (`stateful`).
 * Closing the handle closes the stream: the agent kills what it runs and exits.
 *
 * When the agent cannot be used in a pod (another CPU architecture, no writable place
 * where a program may run, it does not start) the handle runs operations one exec per
 * call (k8s_exec.c, k8s_files.c), says so once in the log and in the next result's notice.
 * A dead agent (killed, or its container restarted) is noticed at the next operation and
 * replaced (re-placed if its file is gone), with a warning and a notice that the Python
 * session's state was lost.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_client.h"
#include "aks_container.h"
#include "k8s_plugin.h"
#include "sha256.h"

/* Placement and start get their own budget (keeping the call's cancellation): the first
 * operation's timeout is for the operation. */
#define SETUP_S 60
/* An agent idle this long is pinged before use: a kill or a container restart since may
 * not have reached the stream yet. */
#define PING_IDLE_MS 1000
/* An agent idle this long first has its pod looked up: a pod deleted by force is gone from
 * the API at once, while its container (and the agent's stream into it) lingers for
 * seconds. Per call, the exec itself finds it gone; through a kept agent only this does, so
 * the core self-heals instead of running in a dying pod. */
#define POD_CHECK_IDLE_MS 100
/* What travels as one argument; longer texts go on the program's stdin (one frame). */
#define MAX_ARG        (100 * 1024)
#define MAX_STDIN      (900 * 1024)
#define MAX_SESSION    (960 * 1024)
#define DOWNLOAD_MAX   (512u << 20)
#define NOT_FOUND_EXIT 44

struct k8s_agent_file {
	char *path;
	unsigned char *data;
	size_t size;
	char arch[32]; /* as `uname -m` says it */
	char name[64]; /* aksandbox-agent-<16 hex of its SHA-256>: a new build, a new name */
};

/* ---- the agent file ----------------------------------------------------------------------- */

static unsigned rd16(const unsigned char *p, bool le)
{
	return le ? (unsigned)p[0] | (unsigned)p[1] << 8 : (unsigned)p[0] << 8 | (unsigned)p[1];
}

/* The ELF machine as `uname -m` names it, or NULL for one we do not know. */
static const char *elf_arch(const unsigned char *d, size_t n)
{
	if (n < 20 || memcmp(d, "\177ELF", 4) != 0 || (d[5] != 1 && d[5] != 2))
		return NULL;
	bool le = d[5] == 1, is64 = d[4] == 2;
	switch (rd16(d + 18, le)) {
	case 62:
		return "x86_64";
	case 183:
		return "aarch64";
	case 3:
		return "i686";
	case 40:
		return "arm";
	case 243:
		return is64 ? "riscv64" : "riscv32";
	case 21:
		return le ? "ppc64le" : "ppc64";
	case 22:
		return "s390x";
	default:
		return NULL;
	}
}

/* Whether a program for `agent` runs on a machine `uname -m` calls `node`. */
static bool arch_runs(const char *agent, const char *node)
{
	if (strcmp(agent, node) == 0)
		return true;
	if (strcmp(agent, "i686") == 0) /* i386 ... i686 */
		return node[0] == 'i' && node[1] >= '3' && node[1] <= '6' &&
		       strcmp(node + 2, "86") == 0;
	if (strcmp(agent, "arm") == 0) /* armv6l, armv7l, ... */
		return strncmp(node, "arm", 3) == 0;
	return false;
}

int k8s_agent_file_load(const aks_host_api *host, const char *path, k8s_agent_file **out,
                        aks_error **err)
{
	*out = NULL;
	if (path[0] != '/' || access(path, X_OK) != 0)
		return host->error_set(err, AKS_ECONFIG,
		                       "kubernetes: agent: '%s' is not an executable absolute path "
		                       "(false disables the agent)",
		                       path);
	k8s_agent_file *f = calloc(1, sizeof(*f));
	if (!f || !(f->path = strdup(path))) {
		free(f);
		return host->error_set(err, AKS_ENOMEM, "out of memory");
	}
	f->data = (unsigned char *)k8s_read_file(path, 64u << 20, &f->size);
	if (!f->data) {
		int e = errno;
		k8s_agent_file_free(f);
		return host->error_set(err, AKS_ECONFIG, "kubernetes: agent: cannot read '%s': %s",
		                       path, strerror(e));
	}
	const char *arch = elf_arch(f->data, f->size);
	if (!arch) {
		k8s_agent_file_free(f);
		return host->error_set(err, AKS_ECONFIG,
		                       "kubernetes: agent: '%s' is not an ELF program of a known "
		                       "architecture (it is copied into the pods)",
		                       path);
	}
	snprintf(f->arch, sizeof(f->arch), "%s", arch);
	uint8_t sum[AKS_SHA256_LEN];
	aks_sha256 h;
	aks__sha256_init(&h);
	aks__sha256_update(&h, f->data, f->size);
	aks__sha256_final(&h, sum);
	int n = snprintf(f->name, sizeof(f->name), "aksandbox-agent-");
	for (int i = 0; i < 8; i++)
		n += snprintf(f->name + n, sizeof(f->name) - (size_t)n, "%02x", sum[i]);
	*out = f;
	return AKS_OK;
}

void k8s_agent_file_free(k8s_agent_file *f)
{
	if (!f)
		return;
	free(f->path);
	free(f->data);
	free(f);
}

const char *k8s_agent_file_path(const k8s_agent_file *f)
{
	return f->path;
}

const char *k8s_agent_file_arch(const k8s_agent_file *f)
{
	return f->arch;
}

/* ---- placement ------------------------------------------------------------------------------ */

/* Prints the machine, then "found PATH" for a copy of this agent already in place. An
 * attached pod whose container restarted lost the /workspace made at attach: made again. */
static const char probe_script[] =
    "mkdir -p " K8S_WORKSPACE " 2>/dev/null; "
    "uname -m 2>/dev/null || echo unknown; n=$1; s=$2; shift 2; "
    "for d in \"$@\"; do f=\"$d/$n\"; "
    "if [ -x \"$f\" ] && [ \"$(wc -c < \"$f\" 2>/dev/null)\" = \"$s\" ]; then "
    "echo \"found $f\"; exit 0; fi; done; echo missing";

/* Reads the agent (exactly $2 bytes: no end of input needed, so v4 works) into the first
 * of the directories where it can be written and then run. */
static const char place_script[] =
    "n=$1; s=$2; shift 2; src=; "
    "for d in \"$@\"; do mkdir -p \"$d\" 2>/dev/null || continue; t=\"$d/.$n.$$\"; "
    "if [ -n \"$src\" ]; then cp \"$src\" \"$t\" 2>/dev/null || { rm -f \"$t\"; continue; }; "
    "elif ! head -c \"$s\" > \"$t\" 2>/dev/null; then rm -f \"$t\"; continue; fi; "
    "if [ \"$(wc -c < \"$t\")\" != \"$s\" ]; then rm -f \"$t\"; echo \"the copy in $d is "
    "short\"; exit 4; fi; "
    "chmod 755 \"$t\" && mv -f \"$t\" \"$d/$n\" || { rm -f \"$t\"; continue; }; "
    "src=\"$d/$n\"; if \"$src\" --version >/dev/null 2>&1; then echo \"placed $src\"; exit 0; "
    "fi; done; echo \"no writable place where a program may run among $*\"; exit 5";

/* Where a pod we created has its emptyDir; attached pods get what they offer. */
static const char *const created_dirs[] = {"/.aksandbox", "/tmp/.aksandbox", NULL};
static const char *const attached_dirs[] = {"/tmp/.aksandbox", "/var/tmp/.aksandbox", "/.aksandbox",
                                            NULL};

static aks_call setup_call(const aks_sandbox_impl *sb, const aks_call *call)
{
	aks_call c = {AKS_CALL_VERSION, sizeof(aks_call), 0, SETUP_S, NULL, NULL, NULL};
	if (call) {
		c.principal = call->principal;
		c.policy = call->policy;
		c.host_private = call->host_private;
	}
	c.deadline_ms = sb->prov->host->now_ms() + SETUP_S * 1000;
	return c;
}

static void trim(k8s_buf *b)
{
	while (b->len && (b->data[b->len - 1] == '\n' || b->data[b->len - 1] == '\r' ||
	                  b->data[b->len - 1] == ' '))
		b->data[--b->len] = '\0';
}

/* argv: sh -c SCRIPT sh NAME SIZE DIR... */
static const char **script_argv(const aks_sandbox_impl *sb, const char *script, char *size)
{
	const k8s_agent_file *f = sb->prov->agent;
	const char *const *dirs = sb->external ? attached_dirs : created_dirs;
	size_t nd = 0;
	while (dirs[nd])
		nd++;
	const char **argv = calloc(nd + 7, sizeof(*argv));
	if (!argv)
		return NULL;
	size_t k = 0;
	argv[k++] = "/bin/sh";
	argv[k++] = "-c";
	argv[k++] = script;
	argv[k++] = "sh";
	argv[k++] = f->name;
	argv[k++] = size;
	for (size_t i = 0; i < nd; i++)
		argv[k++] = dirs[i];
	return argv;
}

typedef enum { PLACED, NOT_PLACED, PLACE_ERROR } place_outcome;

/*
 * Finds or puts the agent in the pod. PLACED with sb->agent_path; NOT_PLACED with *why
 * (the fallback's reason); PLACE_ERROR when the exec itself failed (the pod is gone, the
 * identity may not exec, ...): that is the operation's error, as it would be per call.
 */
static place_outcome place(aks_sandbox_impl *sb, const aks_call *call, char **why, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	const k8s_agent_file *f = sb->prov->agent;
	char size[32];
	snprintf(size, sizeof(size), "%zu", f->size);
	*why = NULL;
	const char **argv = script_argv(sb, probe_script, size);
	if (!argv) {
		host->error_set(err, AKS_ENOMEM, "out of memory");
		return PLACE_ERROR;
	}
	k8s_buf out = {0}, errb = {0};
	k8s_exec_opts o = {.argv = argv,
	                   .workdir = "/",
	                   .capture = &out,
	                   .capture_err = &errb,
	                   .capture_max = 65536};
	int code = -1;
	int rc = k8s_exec(sb, &o, call, &code, err);
	free(argv);
	place_outcome res = PLACE_ERROR;
	if (rc != AKS_OK)
		goto out;
	trim(&out);
	char *nl = out.data ? strchr(out.data, '\n') : NULL;
	if (code != 0 || !nl) {
		trim(&errb);
		if (asprintf(why, "the probe failed (exit %d: %s)", code,
		             errb.len ? errb.data : "no output") < 0)
			*why = NULL;
		res = NOT_PLACED;
		goto out;
	}
	*nl = '\0';
	const char *machine = out.data, *rest = nl + 1;
	if (!arch_runs(f->arch, machine)) {
		if (asprintf(why, "the agent is built for %s and the pod's node is %s", f->arch,
		             machine) < 0)
			*why = NULL;
		res = NOT_PLACED;
		goto out;
	}
	if (strncmp(rest, "found ", 6) == 0) {
		free(sb->agent_path);
		sb->agent_path = strdup(rest + 6);
		res = sb->agent_path ? PLACED : PLACE_ERROR;
		if (!sb->agent_path)
			host->error_set(err, AKS_ENOMEM, "out of memory");
		goto out;
	}
	/* not there: copy it in */
	k8s_buf_free(&out);
	k8s_buf_free(&errb);
	argv = script_argv(sb, place_script, size);
	if (!argv) {
		host->error_set(err, AKS_ENOMEM, "out of memory");
		goto out;
	}
	k8s_exec_opts po = {.argv = argv,
	                    .workdir = "/",
	                    .stdin_data = f->data,
	                    .stdin_len = f->size,
	                    .capture = &out,
	                    .capture_err = &errb,
	                    .capture_max = 65536};
	rc = k8s_exec(sb, &po, call, &code, err);
	free(argv);
	if (rc != AKS_OK)
		goto out;
	trim(&out);
	if (code == 0 && out.data && strncmp(out.data, "placed ", 7) == 0) {
		free(sb->agent_path);
		sb->agent_path = strdup(out.data + 7);
		res = sb->agent_path ? PLACED : PLACE_ERROR;
		if (!sb->agent_path)
			host->error_set(err, AKS_ENOMEM, "out of memory");
		goto out;
	}
	trim(&errb);
	if (asprintf(why, "%s", out.len ? out.data : errb.len ? errb.data : "placement failed") < 0)
		*why = NULL;
	res = NOT_PLACED;
out:
	k8s_buf_free(&out);
	k8s_buf_free(&errb);
	if (res == NOT_PLACED && !*why)
		host->error_set(err, AKS_ENOMEM, "out of memory");
	return res == NOT_PLACED && !*why ? PLACE_ERROR : res;
}

/* ---- start, stop, ensure ------------------------------------------------------------------ */

void k8s_agent_stop(aks_sandbox_impl *sb)
{
	if (sb->agent) { /* closes its sockets: EOF for the agent */
		aks__agent_free(sb->agent);
		sb->agent = NULL;
	}
	if (sb->stream) {
		k8s_stream_close(sb->stream);
		sb->stream = NULL;
	}
}

static int start(aks_sandbox_impl *sb, const aks_call *call, aks_error **err)
{
	const char *argv[] = {sb->agent_path, NULL};
	int rfd = -1, wfd = -1;
	int rc = k8s_stream_open(sb, argv, call, &sb->stream, &rfd, &wfd, err);
	if (rc != AKS_OK)
		return rc;
	rc = aks__agent_start(sb->prov->host, rfd, wfd, call, &sb->agent, err);
	if (rc != AKS_OK) {
		sb->agent = NULL;
		k8s_agent_stop(sb);
	}
	return rc;
}

static void set_notice(aks_sandbox_impl *sb, const char *fmt, ...) AKS_PRINTF(2, 3);
static void set_notice(aks_sandbox_impl *sb, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(sb->notice, sizeof(sb->notice), fmt, ap);
	va_end(ap);
	sb->notice_pending = true;
}

static void fall_back(aks_sandbox_impl *sb, const char *why)
{
	const aks_host_api *host = sb->prov->host;
	sb->agent_state = K8S_AGENT_FALLBACK;
	free(sb->fallback_why);
	sb->fallback_why = strdup(why);
	host->log(AKS_LOG_WARNING, K8S_NAME,
	          "aksandbox-agent cannot be used in pod '%s' (%s): its operations run one exec "
	          "per call, and Python keeps no state between calls",
	          sb->id, why);
	set_notice(sb,
	           "aksandbox-agent cannot run in this sandbox (%s): each operation runs as its "
	           "own exec, and Python keeps no state between calls",
	           why);
}

/* Places (if needed) and starts the agent. AKS_OK: up, or fallen back (state says which);
 * an error only when the pod itself cannot be reached (the operation's error). */
static int bring_up(aks_sandbox_impl *sb, const aks_call *call, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	aks_call sc = setup_call(sb, call);
	char *why = NULL;
	place_outcome po = place(sb, &sc, &why, err);
	if (po == PLACE_ERROR)
		return err && *err ? host->error_code(*err) : AKS_ERROR;
	if (po == NOT_PLACED) {
		fall_back(sb, why);
		free(why);
		return AKS_OK;
	}
	aks_error *e = NULL;
	if (start(sb, &sc, &e) != AKS_OK) {
		char msg[600];
		snprintf(msg, sizeof(msg), "%s did not start: %s", sb->agent_path,
		         e ? host->error_message(e) : "unknown error");
		if (e)
			host->error_free(e);
		fall_back(sb, msg);
		return AKS_OK;
	}
	sb->agent_state = K8S_AGENT_UP;
	host->log(AKS_LOG_DEBUG, K8S_NAME, "%s up in pod '%s' (%s, pid %u)",
	          aks__agent_version(sb->agent), sb->id, sb->agent_path,
	          (unsigned)aks__agent_pid(sb->agent));
	return AKS_OK;
}

static int64_t last_use_ms(aks_sandbox_impl *sb, bool touch)
{
	int64_t now = sb->prov->host->now_ms();
	int64_t prev = sb->agent_used_ms;
	if (touch)
		sb->agent_used_ms = now;
	return now - prev;
}

/* Whether this operation goes through the agent (*use). Errors are the operation's. */
static int ensure(aks_sandbox_impl *sb, const aks_call *call, bool *use, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	*use = false;
	switch (sb->agent_state) {
	case K8S_AGENT_OFF:
	case K8S_AGENT_FALLBACK:
		return AKS_OK;
	case K8S_AGENT_UNTRIED: {
		int rc = bring_up(sb, call, err);
		*use = rc == AKS_OK && sb->agent_state == K8S_AGENT_UP;
		if (*use)
			last_use_ms(sb, true);
		return rc;
	}
	default:
		break;
	}
	bool alive = aks__agent_alive(sb->agent);
	if (last_use_ms(sb, false) >= POD_CHECK_IDLE_MS) {
		aks_call pc = setup_call(sb, call);
		pc.deadline_ms = host->now_ms() + 10000;
		int rc = k8s_pod_check(sb, &pc, err);
		if (rc != AKS_OK) {
			if (rc == AKS_EGONE)
				k8s_agent_stop(sb);
			return rc;
		}
	}
	if (alive && last_use_ms(sb, false) >= PING_IDLE_MS) {
		aks_call pc = setup_call(sb, call);
		pc.deadline_ms = host->now_ms() + 5000;
		aks_error *e = NULL;
		alive = aks__agent_ping(sb->agent, &pc, &e) == AKS_OK;
		if (e)
			host->error_free(e);
	}
	if (alive) {
		*use = true;
		last_use_ms(sb, true);
		return AKS_OK;
	}
	host->log(AKS_LOG_WARNING, K8S_NAME,
	          "the aksandbox-agent of pod '%s' is gone (killed, or its container restarted); "
	          "starting another (the Python session's state is lost)",
	          sb->id);
	k8s_agent_stop(sb);
	sb->agent_state = K8S_AGENT_UNTRIED;
	int rc = bring_up(sb, call, err);
	if (rc != AKS_OK)
		return rc;
	if (sb->agent_state == K8S_AGENT_UP) {
		set_notice(
		    sb, "%s",
		    "the sandbox's aksandbox-agent was restarted (it had stopped): the Python "
		    "session's state was lost");
		*use = true;
		last_use_ms(sb, true);
	}
	return AKS_OK;
}

/* The pending notice, on this result (after any the agent gave). */
static void give_notice(aks_sandbox_impl *sb, aks_result *out)
{
	if (!sb->notice_pending || !out)
		return;
	sb->prov->host->result_set_notice(out, sb->notice);
	sb->notice_pending = false;
}

/* ---- executions ---------------------------------------------------------------------------- */

/* AKS_EIO for a stream that broke during a call (e: the client's AKS_EGONE, freed). */
static int agent_lost(aks_sandbox_impl *sb, aks_error *e, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	int rc = host->error_set(err, AKS_EIO,
	                         "kubernetes: the aksandbox-agent of pod '%s' stopped during the "
	                         "call (%s); the next call starts another",
	                         sb->id, e ? host->error_message(e) : "its stream ended");
	if (e)
		host->error_free(e);
	return rc;
}

/* The agent's words for a timeout or a cancellation replaced by the per-call path's. */
static int run_spec(aks_sandbox_impl *sb, const aks_agent_spawn *spec, const aks_call *call,
                    aks_result *out, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	aks_agent_exit ex;
	memset(&ex, 0, sizeof(ex));
	aks_error *e = NULL;
	int rc = aks__agent_exec(sb->agent, spec, out, call, &ex, &e);
	if (rc == AKS_ETIMEOUT || rc == AKS_ECANCELLED) {
		host->error_free(e);
		e = NULL;
		host->result_set_exit_code(out, -1);
		host->result_set_timed_out(out);
		rc =
		    rc == AKS_ECANCELLED
		        ? host->error_set(err, rc, "kubernetes exec was cancelled")
		        : host->error_set(err, AKS_ETIMEOUT, "kubernetes exec exceeded timeout %gs",
		                          call ? call->timeout : 0.0);
	} else if (rc == AKS_EGONE) {
		/* the agent's stream broke, not the pod: EGONE would make the core recreate the
		 * sandbox; the next call restarts the agent (or finds the pod gone) */
		rc = agent_lost(sb, e, err);
	} else if (e) {
		if (err && !*err)
			*err = e;
		else
			host->error_free(e);
	}
	if (ex.notice[0] && sb->notice_pending) {
		/* both: the agent's (a session restarted) and ours */
		size_t n = strlen(sb->notice);
		snprintf(sb->notice + n, sizeof(sb->notice) - n, "; %.*s",
		         (int)(sizeof(sb->notice) - n > 3 ? sizeof(sb->notice) - n - 3 : 0),
		         ex.notice);
	}
	give_notice(sb, out);
	return rc;
}

/* Cancelled before anything ran: the per-call path's words. */
static bool cancelled_first(aks_sandbox_impl *sb, const aks_call *call, aks_result *out,
                            aks_error **err, int *rc)
{
	const aks_host_api *host = sb->prov->host;
	if (!call || !host->cancelled || !host->cancelled(call))
		return false;
	if (out)
		host->result_set_timed_out(out);
	*rc = host->error_set(err, AKS_ECANCELLED, "execution cancelled before it started");
	return true;
}

/* argv = {interp..., text} when text fits one argument; else the text on stdin, read by the
 * shell (head -c: no end of input needed) and run as `"$1" -c "$c"`. */
static int run_text(aks_sandbox_impl *sb, const char *interp, const char *text,
                    const aks_call *call, aks_result *out, aks_error **err)
{
	size_t len = strlen(text);
	aks_agent_spawn spec = {.cwd = K8S_WORKSPACE};
	const char *argv[] = {interp, "-c", text, NULL};
	char script[160];
	const char *sargv[] = {"/bin/sh", "-c", script, "sh", interp, NULL};
	if (len <= MAX_ARG) {
		spec.argv = argv;
	} else {
		snprintf(script, sizeof(script),
		         "c=$(head -c %zu; echo x); c=${c%%x}; exec \"$1\" -c "
		         "\"$c\"",
		         len);
		spec.argv = sargv;
		spec.stdin_data = text;
		spec.stdin_len = len;
	}
	return run_spec(sb, &spec, call, out, err);
}

int k8s_op_execute_code(aks_sandbox_impl *sb, const char *code, const char *language,
                        const aks_call *call, aks_result *out, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	if (!language)
		language = "python";
	if (!code)
		return host->error_set(err, AKS_EINVAL, "execute_code: no code");
	if (strcmp(language, "python") != 0)
		return host->error_set(err, AKS_ECAPABILITY,
		                       "kubernetes does not support capability: language:%s",
		                       language);
	size_t len = strlen(code);
	bool session = strcmp(sb->prov->python, "python3") == 0;
	int rc;
	if (cancelled_first(sb, call, out, err, &rc))
		return rc;
	bool use = false;
	if (len <= (session ? MAX_SESSION : MAX_STDIN) &&
	    (rc = ensure(sb, call, &use, err)) != AKS_OK)
		return rc;
	if (!use) {
		rc = k8s_execute_code(sb, code, language, call, out, err);
		give_notice(sb, out);
		return rc;
	}
	if (!session) /* another interpreter has no session: a program per call, in the agent */
		return run_text(sb, sb->prov->python, code, call, out, err);
	aks_agent_spawn spec = {
	    .code = code, .language = "python", .session = "default", .cwd = K8S_WORKSPACE};
	return run_spec(sb, &spec, call, out, err);
}

int k8s_op_execute_command(aks_sandbox_impl *sb, const char *command, const aks_call *call,
                           aks_result *out, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	if (!command)
		return host->error_set(err, AKS_EINVAL, "execute_command: no command");
	int rc;
	if (cancelled_first(sb, call, out, err, &rc))
		return rc;
	bool use = false;
	if (strlen(command) <= MAX_STDIN && (rc = ensure(sb, call, &use, err)) != AKS_OK)
		return rc;
	if (!use) {
		rc = k8s_execute_command(sb, command, call, out, err);
		give_notice(sb, out);
		return rc;
	}
	return run_text(sb, "/bin/sh", command, call, out, err);
}

int k8s_op_install_packages(aks_sandbox_impl *sb, const char *const *packages, const aks_call *call,
                            aks_result *out, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	const char **argv = NULL;
	int rc = aks_ctr_pip_argv(sb->prov->python, packages, &argv);
	if (rc != AKS_OK)
		return host->error_set(err, rc, "%s",
		                       rc == AKS_EINVAL ? "install_packages: no packages"
		                                        : "out of memory");
	bool use = false;
	if (!cancelled_first(sb, call, out, err, &rc) &&
	    (rc = ensure(sb, call, &use, err)) == AKS_OK) {
		if (use) {
			aks_agent_spawn spec = {.argv = argv, .cwd = K8S_WORKSPACE};
			rc = run_spec(sb, &spec, call, out, err);
		} else {
			rc = k8s_install_packages(sb, packages, call, out, err);
			give_notice(sb, out);
		}
	}
	free(argv);
	return rc;
}

/* ---- files ---------------------------------------------------------------------------------- */

int k8s_op_upload_file(aks_sandbox_impl *sb, const char *path, const void *data, size_t len,
                       const aks_call *call, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	if (!path || (!data && len))
		return host->error_set(err, AKS_EINVAL, "upload_file: no path or no data");
	char *cpath = NULL;
	int rc = k8s_sandbox_path(sb, path, &cpath, err);
	if (rc != AKS_OK)
		return rc;
	if (strcmp(cpath, K8S_WORKSPACE) == 0) {
		free(cpath);
		return host->error_set(err, AKS_EINVAL, "path '%s' names %s, not a file", path,
		                       K8S_WORKSPACE);
	}
	bool use = false;
	if ((rc = ensure(sb, call, &use, err)) != AKS_OK || !use) {
		free(cpath);
		return rc != AKS_OK ? rc : k8s_upload_file(sb, path, data, len, call, err);
	}
	aks_error *e = NULL;
	rc = aks__agent_write_file(sb->agent, cpath, data, len, 0644, call, &e);
	free(cpath);
	if (rc == AKS_OK)
		return AKS_OK;
	if (rc == AKS_ETIMEOUT || rc == AKS_ECANCELLED) {
		host->error_free(e);
		return rc == AKS_ECANCELLED
		           ? host->error_set(err, rc, "kubernetes exec was cancelled")
		           : host->error_set(err, AKS_ETIMEOUT,
		                             "kubernetes exec exceeded timeout %gs",
		                             call ? call->timeout : 0.0);
	}
	if (rc == AKS_EGONE)
		return agent_lost(sb, e, err);
	rc = host->error_set(err, rc == AKS_ENOMEM ? rc : AKS_EIO,
	                     "upload of '%s' to pod '%s' failed: %s", path, sb->id,
	                     e ? host->error_message(e) : "the agent failed");
	if (e)
		host->error_free(e);
	return rc;
}

int k8s_op_download_file(aks_sandbox_impl *sb, const char *path, const aks_call *call,
                         aks_result *out, aks_error **err)
{
	const aks_host_api *host = sb->prov->host;
	if (!path)
		return host->error_set(err, AKS_EINVAL, "download_file: no path");
	char *cpath = NULL;
	int rc = k8s_sandbox_path(sb, path, &cpath, err);
	if (rc != AKS_OK)
		return rc;
	bool use = false;
	if ((rc = ensure(sb, call, &use, err)) != AKS_OK || !use) {
		free(cpath);
		return rc != AKS_OK ? rc : k8s_download_file(sb, path, call, out, err);
	}
	/* A regular file (after symlinks), as the per-call path's `[ -f ]`: a directory or a
	 * FIFO is not found, and never opened. */
	char script[64];
	snprintf(script, sizeof(script), "[ -f \"$1\" ] || exit %d", NOT_FOUND_EXIT);
	const char *argv[] = {"/bin/sh", "-c", script, "sh", cpath, NULL};
	aks_agent_spawn spec = {.argv = argv, .cwd = "/"};
	aks_agent_exit ex;
	memset(&ex, 0, sizeof(ex));
	aks_error *e = NULL;
	aks_agent_run *run = NULL;
	rc = aks__agent_spawn(sb->agent, &spec, NULL, NULL, call, &run, &e);
	if (rc == AKS_OK)
		rc = aks__agent_wait(run, call, &ex, &e);
	aks__agent_run_free(run);
	if (rc == AKS_OK && (ex.exit_code != 0 || ex.signal)) {
		free(cpath);
		return host->error_set(err, AKS_ENOTFOUND, "file '%s' not found in the sandbox",
		                       path);
	}
	bool refused = false;
	if (rc == AKS_OK)
		rc = aks__agent_read_into(sb->agent, cpath, DOWNLOAD_MAX, out, path, call, &refused,
		                          &e);
	free(cpath);
	if (refused) {
		if (err && !*err) {
			*err = e;
			e = NULL;
		}
	} else if (rc == AKS_ETIMEOUT || rc == AKS_ECANCELLED) {
		rc =
		    rc == AKS_ECANCELLED
		        ? host->error_set(err, rc, "kubernetes exec was cancelled")
		        : host->error_set(err, AKS_ETIMEOUT, "kubernetes exec exceeded timeout %gs",
		                          call ? call->timeout : 0.0);
	} else if (rc == AKS_ENOTFOUND) {
		rc =
		    host->error_set(err, AKS_ENOTFOUND, "file '%s' not found in the sandbox", path);
	} else if (rc == AKS_ELIMIT) {
		rc =
		    host->error_set(err, AKS_ELIMIT,
		                    "kubernetes: the output is larger than %u bytes", DOWNLOAD_MAX);
	} else if (rc == AKS_EGONE) {
		rc = agent_lost(sb, e, err);
		e = NULL;
	} else if (rc != AKS_OK) {
		rc = host->error_set(err, rc == AKS_ENOMEM ? rc : AKS_EIO,
		                     "download of '%s' from pod '%s' failed: %s", path, sb->id,
		                     e ? host->error_message(e) : "the agent failed");
	}
	if (e)
		host->error_free(e);
	return rc;
}
