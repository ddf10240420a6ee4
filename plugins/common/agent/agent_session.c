/*
 * plugins/common/agent/agent_session.c - one sandbox handle's aksandbox-agent: its lifecycle
 * (place, start, HELLO, fall back, notice a loss and start again) and the operations over it,
 * with the provider's per-call operations where the agent cannot run (see aks_agent.h).
 */
#include "config.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_internal.h"
#include "aks_agent_client.h"
#include "aks_buf.h"
#include "aks_egress.h"
#include "aks_text.h"

/* How long the agent has to answer HELLO (at most; the setup's deadline may be sooner). */
#define HELLO_MS 10000
/* The quick questions (ping, is the sandbox there) get this long. */
#define PING_MS  5000
#define CHECK_MS 10000
/* What travels as one argument of a program; longer texts go on its stdin (one frame). */
#define MAX_ARG     (100 * 1024)
#define MAX_STDIN   (900 * 1024)
#define MAX_SESSION (960 * 1024)

enum session_state { S_OFF, S_UNTRIED, S_UP, S_FALLBACK };

struct aks_agent_session {
	aks_agent_program *prog;
	const aks_agent_ops *ops;
	const aks_host_api *host;
	void *sb;
	char *id, *cwd;
	char **env;
	bool env_clear;
	int state;
	aks_agent *agent;
	bool egress_proxy;
	char **network_allow;
	aks_egress_relay *egress;
	unsigned egress_refused;  /* by the egress of agents stopped before */
	unsigned egress_reported; /* of all refused, those already counted on a result */
	void *stream;
	char *path;        /* where the program is in the sandbox, once placed */
	char *resident;    /* the resident agent's name (ops->resident) */
	uint64_t instance; /* the agent last reached (its HELLO): the same one keeps the state */
	bool was_up;       /* the agent ran for this handle before: a new start is a restart */
	bool watch_failed; /* watch_sandbox found the sandbox dead during the current run */
	int64_t used_ms;
	bool notice_pending; /* the next result says: a restart lost state, or the fallback */
	char notice[640];
};

/* ---- small helpers ------------------------------------------------------------------------ */

static int oom(const aks_host_api *host, aks_error **err)
{
	return host->error_set(err, AKS_ENOMEM, "out of memory");
}

static void set_notice(aks_agent_session *s, const char *fmt, ...) AKS_PRINTF(2, 3);
static void set_notice(aks_agent_session *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->notice, sizeof(s->notice), fmt, ap);
	va_end(ap);
	s->notice_pending = true;
}

/* The pending notice on this result, after what the agent itself said (a session that
 * restarted inside it), if anything. */
static void give_notice(aks_agent_session *s, aks_result *out, const char *agent_said)
{
	if (!out || !s->notice_pending)
		return;
	if (agent_said && agent_said[0]) {
		size_t n = strlen(s->notice);
		snprintf(s->notice + n, sizeof(s->notice) - n, "; %s", agent_said);
	}
	s->host->result_set_notice(out, s->notice);
	s->notice_pending = false;
}

static void drop_error(const aks_host_api *host, aks_error **e)
{
	if (*e)
		host->error_free(*e);
	*e = NULL;
}

/* Moves e into *err when the caller has none yet (else frees it); returns rc. */
static int pass(const aks_host_api *host, int rc, aks_error *e, aks_error **err)
{
	if (err && !*err)
		*err = e;
	else if (e)
		host->error_free(e);
	return rc;
}

static bool cancelled(const aks_host_api *host, const aks_call *call)
{
	return call && host->cancelled && host->cancelled(call);
}

/* The one wording of a timeout or a cancellation, the same as the per-call path's. */
static int over(aks_agent_session *s, int rc, const aks_call *call, aks_error **err)
{
	if (rc == AKS_ECANCELLED)
		return s->host->error_set(err, rc, "%s was cancelled", s->ops->timeout_subject);
	return s->host->error_set(err, AKS_ETIMEOUT, "%s exceeded timeout %gs",
	                          s->ops->timeout_subject, call ? call->timeout : 0.0);
}

/* A call for placing and starting: the caller's principal, policy and cancellation, and at
 * least the provider's setup time (the operation's own timeout is for the operation). */
static aks_call setup_call(const aks_agent_session *s, const aks_call *call)
{
	aks_call c = {AKS_CALL_INIT};
	if (call)
		c = *call;
	int64_t floor = s->ops->setup_ms ? s->host->now_ms() + s->ops->setup_ms : 0;
	if (floor && (!c.deadline_ms || c.deadline_ms < floor)) {
		c.deadline_ms = floor;
		c.timeout = (double)s->ops->setup_ms / 1000;
	}
	return c;
}

static aks_call quick_call(const aks_agent_session *s, const aks_call *call, int64_t ms)
{
	aks_call c = setup_call(s, call);
	c.deadline_ms = s->host->now_ms() + ms;
	c.timeout = (double)ms / 1000;
	return c;
}

/* ---- session ------------------------------------------------------------------------------ */

/* The name a sandbox's resident agent listens under: the program's build (another build is
 * another agent, never a stale one) and the sandbox's id (two sandboxes that share a network
 * namespace never share an agent), in the characters the agent accepts. */
static char *resident_name(const aks_agent_program *prog, const char *id)
{
	char name[88];
	const uint8_t *sha = aks_agent_program_sha256(prog);
	size_t n = 0;
	for (int i = 0; i < 8; i++)
		n += (size_t)snprintf(name + n, sizeof(name) - n, "%02x", sha ? sha[i] : 0);
	name[n++] = '.';
	for (const char *p = id; *p && n < sizeof(name) - 1; p++) {
		bool plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		             (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_';
		name[n++] = plain ? *p : '_';
	}
	name[n] = '\0';
	return strdup(name);
}

int aks_agent_session_new(aks_agent_program *prog, const aks_agent_ops *ops, void *sb,
                          const aks_agent_session_opts *o, aks_agent_session **out, aks_error **err)
{
	const aks_host_api *host = prog->host;
	aks_agent_session *s = calloc(1, sizeof(*s));
	*out = NULL;
	if (!s)
		return oom(host, err);
	s->prog = prog;
	s->ops = ops;
	s->host = host;
	s->sb = sb;
	s->env_clear = o->env_clear;
	s->egress_proxy = o->egress_proxy;
	s->state = aks_agent_program_enabled(prog) ? S_UNTRIED : S_OFF;
	static const char *const none[] = {NULL};
	if (!(s->id = strdup(o->id)) || (o->cwd && !(s->cwd = strdup(o->cwd))) ||
	    (o->env && !(s->env = aks__strv_dup(o->env))) ||
	    !(s->network_allow = aks__strv_dup(o->network_allow ? o->network_allow : none)) ||
	    (ops->resident && !(s->resident = resident_name(prog, o->id)))) {
		aks_agent_session_free(s);
		return oom(host, err);
	}
	*out = s;
	return AKS_OK;
}

/* Ends the agent's stream; a loss (was_up stays) or the start of a deliberate stop. */
static void stop_agent(aks_agent_session *s)
{
	if (s->egress) { /* before the connection it serves */
		s->egress_refused += aks_egress_refused(s->egress);
		aks_egress_stop(s->egress);
		s->egress = NULL;
	}
	if (s->agent) { /* closes its fds first: the agent sees EOF and exits */
		aks__agent_free(s->agent);
		s->agent = NULL;
	}
	if (s->stream) {
		s->ops->close(s->sb, s->stream, NULL, 0);
		s->stream = NULL;
	}
	if (s->state == S_UP)
		s->state = S_UNTRIED;
}

void aks_agent_session_stop(aks_agent_session *s)
{
	stop_agent(s);
	s->was_up = false; /* not a loss: the next start says nothing */
}

void aks_agent_session_free(aks_agent_session *s)
{
	if (!s)
		return;
	stop_agent(s);
	aks__strv_free(s->env);
	aks__strv_free(s->network_allow);
	free(s->id);
	free(s->cwd);
	free(s->path);
	free(s->resident);
	free(s);
}

bool aks_agent_session_up(const aks_agent_session *s)
{
	return s && s->state == S_UP && s->agent;
}

unsigned aks_agent_session_egress_refused(const aks_agent_session *s)
{
	return s->egress_refused + (s->egress ? aks_egress_refused(s->egress) : 0);
}

/* Counts on out the refusals no result has counted yet (the host tallies them on the
 * sandbox session): those of this operation, and any of a background program since. */
static void report_refused(aks_agent_session *s, aks_result *out)
{
	unsigned total = aks_agent_session_egress_refused(s);
	if (!out || total <= s->egress_reported ||
	    !AKS_HOST_HAS(s->host, result_add_egress_refused))
		return;
	s->host->result_add_egress_refused(out, total - s->egress_reported);
	s->egress_reported = total;
}

/* ---- bringing the agent up ------------------------------------------------------------------ */

static void fall_back(aks_agent_session *s, const char *why)
{
	stop_agent(s);
	s->state = S_FALLBACK;
	aks__agent_fell_back(s->prog, why, false);
	s->host->log(AKS_LOG_WARNING, s->prog->provider,
	             "aksandbox-agent cannot be used in %s '%s' (%s): its operations run %s, and "
	             "Python keeps no state between calls",
	             s->ops->noun, s->id, why, s->prog->per_call);
	set_notice(s,
	           "aksandbox-agent cannot run in this sandbox (%s): its operations run %s, and "
	           "Python keeps no state between calls",
	           why, s->prog->per_call);
}

/* The agent is in place (its bytes checked, or it ran for this handle before) and does not
 * start: killed and made unrunnable, or overwritten where the host's copy does not reach
 * (gVisor keeps showing the sandbox its own bytes). Running on per call would drop what the
 * agent guarantees (the whole-tree kill, the Python state) without the caller's say: every
 * call is refused until it starts again or the session is recreated. Only what is known
 * before a start (the architecture, no place for it, no stream) makes a handle per call. */
static int refuse(aks_agent_session *s, const char *why, aks_error **err)
{
	const char *what = s->was_up ? "stopped and cannot be started again" : "does not start";
	stop_agent(s);
	s->state = S_UNTRIED;
	s->host->log(AKS_LOG_WARNING, s->prog->provider, "the aksandbox-agent of %s '%s' %s: %s",
	             s->ops->noun, s->id, what, why);
	return s->host->error_set(
	    err, AKS_EIO,
	    "%s: the aksandbox-agent of %s '%s' %s (%s); its operations are "
	    "refused rather than run without it (destroying the session gives "
	    "a new sandbox)",
	    s->prog->provider, s->ops->noun, s->id, what, why);
}

/* The reason a start failed: what the program said on stderr, else the client's error. */
static char *start_failure(aks_agent_session *s, aks_error *e)
{
	char said[512] = "";
	s->ops->close(s->sb, s->stream, said, sizeof(said));
	s->stream = NULL;
	size_t len = strlen(said);
	while (len && (said[len - 1] == '\n' || said[len - 1] == '\r'))
		len--; /* its last line's end is no part of the reason */
	/* what the program said is the sandbox's: escaped before it reaches a message */
	char safe[4 * sizeof(said)];
	aks__text_printable(safe, sizeof(safe), said, len);
	const char *reason = safe[0] ? safe : e ? s->host->error_message(e) : "no answer";
	char *why = NULL;
	if (asprintf(&why, "aksandbox-agent did not start in %s '%s': %s", s->ops->noun, s->id,
	             reason) < 0)
		why = NULL;
	return why;
}

/* Starts the placed program and says HELLO. AKS_OK with s->agent, or AKS_OK with *why (it
 * cannot start: fall back), or the call's failure. */
static int start(aks_agent_session *s, const aks_call *setup, char **why, bool *no_hello,
                 aks_error **err)
{
	*no_hello = false;
	const aks_host_api *host = s->host;
	const char *path = s->path ? s->path : s->prog->path;
	int rfd = -1, wfd = -1;
	/* The placed program's directory lasts as long as the sandbox's files (docker: the
	 * container's, kubernetes: the pod's emptyDir), through restarts: where the agent notes
	 * who holds Python state, so a later one can say that it was lost. */
	char *state_dir = s->resident ? strdup(path) : NULL;
	char *slash = state_dir ? strrchr(state_dir, '/') : NULL;
	if (slash)
		slash[slash == state_dir] = '\0'; /* "/x" is in "/" */
	const char *args[] = {"--resident", s->resident, slash ? "--state-dir" : NULL, state_dir,
	                      NULL};
	int rc = s->ops->open(s->sb, path, s->resident ? args : NULL, setup, &s->stream, &rfd, &wfd,
	                      why, err);
	free(state_dir);
	if (rc != AKS_OK || *why)
		return rc;
	aks_call hello = *setup;
	int64_t limit = host->now_ms() + HELLO_MS;
	if (!hello.deadline_ms || hello.deadline_ms > limit)
		hello.deadline_ms = limit;
	aks_error *e = NULL;
	rc = aks__agent_start(host, rfd, wfd, &hello, &s->agent, &e);
	if (rc == AKS_OK && s->egress_proxy) {
		aks_egress_opts eo = {.provider = s->prog->provider,
		                      .sandbox_id = s->id,
		                      .allow = (const char *const *)s->network_allow};
		rc = aks_egress_start(host, s->agent, &eo, &hello, &s->egress, err);
		if (rc != AKS_OK) { /* the list cannot be enforced: the call fails, closed */
			stop_agent(s);
			return rc;
		}
	}
	if (rc == AKS_OK)
		s->instance = aks__agent_instance(s->agent);
	if (rc == AKS_OK) /* the files it moves stay in the workspace, symlinks or not */
		return s->cwd && aks__agent_set_beneath(s->agent, s->cwd) != AKS_OK ? oom(host, err)
		                                                                    : AKS_OK;
	s->agent = NULL;
	bool timed_out = setup->deadline_ms && host->now_ms() >= setup->deadline_ms;
	if (cancelled(host, setup) || timed_out) {
		drop_error(host, &e);
		stop_agent(s);
		return over(s, cancelled(host, setup) ? AKS_ECANCELLED : AKS_ETIMEOUT, setup, err);
	}
	*why = start_failure(s, e);
	*no_hello = true;
	drop_error(host, &e);
	return *why ? AKS_OK : oom(host, err);
}

/* Places the program (when the provider must): AKS_OK with s->path, or with *why. */
static int place(aks_agent_session *s, bool look_again, const aks_call *setup, bool *verified,
                 char **why, aks_error **err)
{
	*verified = true;
	if (!s->ops->place)
		return AKS_OK;
	char *path = NULL;
	int rc = s->ops->place(s->sb, look_again, setup, &path, verified, why, err);
	if (rc == AKS_OK && !*why) {
		free(s->path);
		s->path = path;
	} else {
		free(path);
	}
	return rc;
}

/* Places (if needed) and starts the agent: AKS_OK when up or fallen back (the state says
 * which); an error only when the sandbox itself cannot be reached (the operation's). */
static int bring_up(aks_agent_session *s, const aks_call *call, bool look_again, aks_error **err)
{
	aks_call setup = setup_call(s, call);
	char *why = NULL;
	bool verified, no_hello = false;
	int rc = place(s, look_again, &setup, &verified, &why, err);
	if (rc == AKS_OK && !why)
		rc = start(s, &setup, &why, &no_hello, err);
	if (rc == AKS_OK && why && !verified) {
		/* remembered from an earlier handle but not startable now: look again, once */
		free(why);
		why = NULL;
		no_hello = false;
		rc = place(s, true, &setup, &verified, &why, err);
		if (rc == AKS_OK && !why)
			rc = start(s, &setup, &why, &no_hello, err);
	}
	if (rc == AKS_OK && why && (s->was_up || no_hello || s->egress_proxy))
		rc = refuse(s, why, err); /* per call, nothing would enforce network_allow */
	else if (rc == AKS_OK && why)
		fall_back(s, why);
	else if (rc == AKS_OK)
		s->state = S_UP;
	free(why);
	return rc;
}

/* Whether the running agent is still there: asks the sandbox (check) and pings an agent
 * idle long enough that a kill may not have reached its stream yet. AKS_OK with *alive, or
 * the sandbox's failure (gone). */
static int still_there(aks_agent_session *s, const aks_call *call, bool *alive, aks_error **err)
{
	const aks_agent_ops *ops = s->ops;
	int64_t idle = s->host->now_ms() - s->used_ms;
	*alive = aks__agent_alive(s->agent) && (!ops->running || ops->running(s->sb, s->stream));
	if (ops->check && ops->check_idle_ms && idle >= ops->check_idle_ms) {
		aks_call c = quick_call(s, call, CHECK_MS);
		aks_error *e = NULL;
		int rc = ops->check(s->sb, &c, &e);
		if (rc == AKS_EGONE) { /* before anything ran: the core recreates it */
			stop_agent(s);
			return pass(s->host, rc, e, err);
		}
		drop_error(s->host, &e);
		if (rc !=
		    AKS_OK) /* there but not running (stopped): start it and the agent again */
			*alive = false;
	}
	if (*alive && ops->ping_idle_ms && idle >= ops->ping_idle_ms) {
		aks_call c = quick_call(s, call, PING_MS);
		aks_error *e = NULL;
		*alive = aks__agent_ping(s->agent, &c, &e) == AKS_OK;
		drop_error(s->host, &e);
	}
	return AKS_OK;
}

/* Before an operation: *use when it goes through the agent. Errors are the operation's.
 * *run is the call the operation then runs under: call itself, but when the agent had to be
 * placed and started first (its first use, or a restart), with the deadline moved on by the
 * time that took. Starting the agent is the provider's setup, like creating the sandbox, and
 * the program still gets the policy's whole timeout (a copy placed again over a slow
 * cluster's exec once ate all of a 4 s one). */
static int ensure(aks_agent_session *s, const aks_call *call, bool *use, aks_call *run,
                  aks_error **err)
{
	*use = false;
	if (call)
		*run = *call;
	if (s->state == S_OFF || s->state == S_FALLBACK)
		return AKS_OK;
	if (!aks_agent_program_usable(s->prog)) {
		s->state = S_FALLBACK; /* said once, for the whole instance */
		return AKS_OK;
	}
	bool alive = false;
	int rc = s->state == S_UP ? still_there(s, call, &alive, err) : AKS_OK;
	if (rc != AKS_OK)
		return rc;
	if (!alive) {
		bool restart = s->was_up;
		if (restart && !s->resident)
			s->host->log(
			    AKS_LOG_WARNING, s->prog->provider,
			    "the aksandbox-agent of %s '%s' is gone (killed, or its %s "
			    "restarted); starting another (the Python session's state is lost)",
			    s->ops->noun, s->id, s->ops->noun);
		stop_agent(s);
		uint64_t before = s->instance;
		int64_t started_ms = s->host->now_ms();
		if ((rc = bring_up(s, call, restart, err)) != AKS_OK || s->state != S_UP)
			return rc;
		if (call && run->deadline_ms > 0)
			run->deadline_ms += s->host->now_ms() - started_ms;
		/* A resident agent outlives the stream to it: reached again, it kept the state. A
		 * new one says whether one before it held Python state and is gone, which a handle
		 * that never reached that one (a later host process) learns only from it. */
		if (restart && s->resident && s->instance == before)
			restart = false;
		else if (s->resident && (restart || aks__agent_lost(s->agent))) {
			s->host->log(
			    AKS_LOG_WARNING, s->prog->provider,
			    "the resident aksandbox-agent of %s '%s' was gone (killed, or its "
			    "%s restarted); another started (the Python session's state is "
			    "lost)",
			    s->ops->noun, s->id, s->ops->noun);
			restart = true;
		}
		if (restart)
			set_notice(
			    s,
			    "the sandbox's aksandbox-agent was restarted (it had stopped: killed, "
			    "or its %s restarted): the Python session's state from earlier calls "
			    "was lost",
			    s->ops->noun);
		s->was_up = true;
	}
	*use = true;
	s->used_ms = s->host->now_ms();
	if (s->egress)
		aks_egress_set_caller(s->egress, call);
	return AKS_OK;
}

/* An agent request failed with AKS_EGONE: its stream broke. The sandbox may be gone (that
 * is the error); otherwise it is an I/O failure of this call and the next call starts the
 * agent again. AKS_EGONE must not escape otherwise: the core reads it as a vanished sandbox
 * and recreates it. */
static int broke(aks_agent_session *s, const char *what, aks_error *e, aks_error **err)
{
	const aks_host_api *host = s->host;
	char msg[300];
	snprintf(msg, sizeof(msg), "%s", e ? host->error_message(e) : "its stream ended");
	drop_error(host, &e);
	stop_agent(s);
	if (s->ops->check) {
		aks_call c = quick_call(s, NULL, CHECK_MS);
		aks_error *ce = NULL;
		int rc = s->ops->check(s->sb, &c, &ce);
		if (rc != AKS_OK) /* gone or stopped: say what the sandbox says */
			snprintf(msg, sizeof(msg), "%s",
			         ce ? host->error_message(ce) : "it stopped");
		drop_error(host, &ce);
	}
	/* Never AKS_EGONE here, even for a sandbox removed under the call: the core would run
	 * the operation again in a new one, and this one has already run (partly). The next
	 * call finds it gone before it runs anything, and recreates it. */
	return host->error_set(err, AKS_EIO,
	                       "%s: %s: the connection to aksandbox-agent in %s '%s' broke during "
	                       "the call (%s); the next call starts it again",
	                       s->prog->provider, what, s->ops->noun, s->id, msg);
}

/* While a program runs (aks__agent_exec_watched): the sandbox still there and running,
 * for a stream that does not end when its sandbox dies. */
static int watch_sandbox(void *ud, aks_error **err)
{
	aks_agent_session *s = ud;
	aks_call c = quick_call(s, NULL, CHECK_MS);
	aks_error *e = NULL;
	int rc = s->ops->check(s->sb, &c, &e);
	if (rc == AKS_OK || rc == AKS_ETIMEOUT) /* a slow answer is no verdict */
		return pass(s->host, AKS_OK, e, NULL);
	s->watch_failed = true;
	rc = s->host->error_set(err, AKS_EIO, "%s: the program was stopped with its %s: %s",
	                        s->prog->provider, s->ops->noun,
	                        e ? s->host->error_message(e) : "it stopped");
	drop_error(s->host, &e);
	return rc;
}
/* ---- executions ----------------------------------------------------------------------------- */

/* Cancelled before anything ran: the per-call path's words. */
static bool cancelled_first(aks_agent_session *s, const aks_call *call, aks_result *out,
                            aks_error **err, int *rc)
{
	if (!cancelled(s->host, call))
		return false;
	if (out)
		s->host->result_set_timed_out(out);
	*rc = s->host->error_set(err, AKS_ECANCELLED, "execution cancelled before it started");
	return true;
}

/* ensure() for an execution: *rc set and true when the operation ends here. */
static bool exec_ensure(aks_agent_session *s, size_t len, size_t max, const aks_call *call,
                        aks_result *out, bool *use, aks_call *run, aks_error **err, int *rc)
{
	*use = false;
	if (cancelled_first(s, call, out, err, rc))
		return true;
	/* too long for one frame: the per-call path takes it (or says why not) */
	if (len > max)
		return false;
	*rc = ensure(s, call, use, run, err);
	if (*rc == AKS_ETIMEOUT || *rc == AKS_ECANCELLED)
		s->host->result_set_timed_out(out);
	return *rc != AKS_OK;
}

static int run_spec(aks_agent_session *s, aks_agent_spawn *spec, const aks_call *call,
                    aks_result *out, aks_error **err)
{
	const aks_host_api *host = s->host;
	spec->cwd = s->cwd;
	spec->env = (const char *const *)s->env;
	spec->env_clear = s->env_clear;
	aks_agent_exit ex;
	memset(&ex, 0, sizeof(ex));
	aks_error *e = NULL;
	aks_agent_watch w = {watch_sandbox, s, s->ops->check ? s->ops->watch_ms : 0};
	unsigned refused = s->egress ? aks_egress_refused(s->egress) : 0;
	int rc = aks__agent_exec_watched(s->agent, spec, out, call, &w, &ex, &e);
	/* Connections the policy refused while the program ran: the caller (an agent) learns
	 * why its download failed, not only that it did. */
	char said[sizeof(ex.notice) + 700];
	snprintf(said, sizeof(said), "%s", ex.notice);
	if (s->egress) {
		char which[600];
		unsigned now = aks_egress_refused_since(s->egress, refused, which, sizeof(which));
		if (now > refused) {
			size_t len = strlen(said);
			snprintf(
			    said + len, sizeof(said) - len,
			    "%s%u connection%s refused by the egress policy (network_allow): %s",
			    len ? "; " : "", now - refused, now - refused == 1 ? "" : "s", which);
		}
	}
	if (s->watch_failed) { /* the run was killed with its sandbox: not a timeout */
		s->watch_failed = false;
		stop_agent(s);
		host->result_set_exit_code(out, -1);
		rc = pass(host, rc, e, err);
	} else if (rc == AKS_ETIMEOUT || rc == AKS_ECANCELLED) {
		drop_error(host, &e);
		host->result_set_exit_code(out, -1); /* killed: no exit code of its own */
		host->result_set_timed_out(out);
		rc = over(s, rc, call, err);
	} else if (rc == AKS_EGONE) {
		rc = broke(s, "execution", e, err);
	} else if (rc != AKS_OK) {
		rc = pass(host, rc, e, err);
	}
	if (s->notice_pending)
		give_notice(s, out, said);
	else if (said[0] && out)
		host->result_set_notice(out, said);
	report_refused(s, out);
	return rc;
}

/* `interp -c TEXT`. TEXT travels as one argument when it fits; a longer one (Linux refuses
 * a single argument of 128 KiB or more) comes on the program's stdin and is run from there
 * without another exec: a shell evals it (head -c: no end of input needed; the x keeps its
 * trailing newlines), Python compiles it as -c would. */
static int run_text(aks_agent_session *s, const char *interp, bool python, const char *text,
                    const aks_call *call, aks_result *out, aks_error **err)
{
	size_t len = strlen(text);
	char script[128];
	const char *argv[] = {interp, "-c", text, NULL};
	aks_agent_spawn spec = {.argv = argv};
	if (len > MAX_ARG) {
		if (python)
			snprintf(script, sizeof(script), "%s",
			         "import sys; exec(compile(sys.stdin.read(), '<string>', 'exec'))");
		else
			snprintf(script, sizeof(script),
			         "c=$(head -c %zu; echo x); c=${c%%x}; eval \"$c\"", len);
		argv[2] = script;
		spec.stdin_data = text;
		spec.stdin_len = len;
	}
	return run_spec(s, &spec, call, out, err);
}

/* The per-call result, with the pending notice (the fallback's, once). */
static int per_call_done(aks_agent_session *s, int rc, aks_result *out)
{
	give_notice(s, out, NULL);
	return rc;
}

int aks_agent_execute_code(aks_agent_session *s, const char *code, const char *language,
                           const char *interp, const aks_call *call, aks_result *out,
                           aks_error **err)
{
	if (!code)
		return s->host->error_set(err, AKS_EINVAL, "execute_code: no code");
	bool session = strcmp(language, "python") == 0 && strcmp(interp, "python3") == 0;
	bool use;
	int rc;
	aks_call run;
	if (exec_ensure(s, strlen(code), session ? MAX_SESSION : MAX_STDIN, call, out, &use, &run,
	                err, &rc))
		return rc;
	if (use && call)
		call = &run;
	if (!use)
		return per_call_done(s, s->ops->execute_code(s->sb, code, language, call, out, err),
		                     out);
	if (!session) /* another interpreter has no session: a program per call, in the agent */
		return run_text(s, interp, strcmp(language, "python") == 0, code, call, out, err);
	aks_agent_spawn spec = {.code = code, .language = "python", .session = "default"};
	return run_spec(s, &spec, call, out, err);
}

int aks_agent_execute_command(aks_agent_session *s, const char *command, const aks_call *call,
                              aks_result *out, aks_error **err)
{
	if (!command)
		return s->host->error_set(err, AKS_EINVAL, "execute_command: no command");
	bool use;
	int rc;
	aks_call run;
	if (exec_ensure(s, strlen(command), MAX_STDIN, call, out, &use, &run, err, &rc))
		return rc;
	if (use && call)
		call = &run;
	if (!use)
		return per_call_done(s, s->ops->execute_command(s->sb, command, call, out, err),
		                     out);
	return run_text(s, s->ops->shell, false, command, call, out, err);
}

/* {python, "-m", "pip", "install", packages..., NULL}, calloc'd (the strings are the
 * caller's), or NULL: *rc says why. */
static const char **pip_argv(aks_agent_session *s, const char *python, const char *const *packages,
                             aks_error **err, int *rc)
{
	size_t n = 0;
	while (packages && packages[n])
		n++;
	const char **v = n ? calloc(n + 5, sizeof(*v)) : NULL;
	if (!v) {
		*rc = n ? oom(s->host, err)
		        : s->host->error_set(err, AKS_EINVAL, "install_packages: no packages");
		return NULL;
	}
	v[0] = python;
	v[1] = "-m";
	v[2] = "pip";
	v[3] = "install";
	memcpy(v + 4, packages, n * sizeof(*v));
	return v;
}

int aks_agent_install_packages(aks_agent_session *s, const char *python,
                               const char *const *packages, const aks_call *call, aks_result *out,
                               aks_error **err)
{
	int rc;
	const char **argv = pip_argv(s, python, packages, err, &rc);
	if (!argv)
		return rc;
	bool use;
	aks_call run;
	if (!exec_ensure(s, 0, 0, call, out, &use, &run, err, &rc)) {
		aks_agent_spawn spec = {.argv = argv};
		rc = use ? run_spec(s, &spec, call ? &run : NULL, out, err)
		         : per_call_done(s, s->ops->install_packages(s->sb, argv, call, out, err),
		                         out);
	}
	free(argv);
	return rc;
}

/* ---- files ---------------------------------------------------------------------------------- */

/* The agent's failure of a file operation in the provider's words. */
static int file_error(aks_agent_session *s, const char *verb, const char *path, int rc,
                      aks_error *e, const aks_call *call, aks_error **err)
{
	const aks_host_api *host = s->host;
	if (rc == AKS_EGONE)
		return broke(s, strcmp(verb, "write") == 0 ? "upload" : "download", e, err);
	if (rc == AKS_ETIMEOUT || rc == AKS_ECANCELLED) {
		drop_error(host, &e);
		return over(s, rc, call, err);
	}
	if (rc == AKS_ENOTFOUND) {
		drop_error(host, &e);
		return host->error_set(err, rc, "file '%s' not found in the sandbox", path);
	}
	if (rc == AKS_EPOLICY) { /* the reference's words for the path rule */
		drop_error(host, &e);
		return host->error_set(err, rc, "path '%s' escapes the sandbox working directory",
		                       path);
	}
	const char *m = e ? host->error_message(e) : "failed";
	if (strncmp(m, "agent: ", 7) == 0)
		m += 7;
	rc = host->error_set(err, rc == AKS_ELIMIT || rc == AKS_ENOMEM ? rc : AKS_EIO,
	                     "%s: cannot %s '%s': %s", s->prog->provider, verb, path, m);
	drop_error(host, &e);
	return rc;
}

int aks_agent_upload(aks_agent_session *s, const char *path, const char *cpath, const void *data,
                     size_t len, const aks_call *call, aks_error **err)
{
	bool use;
	aks_call run;
	int rc = ensure(s, call, &use, &run, err);
	if (rc != AKS_OK)
		return rc;
	if (use && call)
		call = &run;
	if (!use)
		return s->ops->upload(s->sb, path, cpath, data, len, call, err);
	aks_error *e = NULL;
	rc = aks__agent_write_file(s->agent, cpath, data, len, s->ops->file_mode, call, &e);
	return rc == AKS_OK ? AKS_OK : file_error(s, "write", path, rc, e, call, err);
}

int aks_agent_download(aks_agent_session *s, const char *path, const char *cpath,
                       const aks_call *call, aks_result *out, aks_error **err)
{
	bool use;
	aks_call run;
	int rc = ensure(s, call, &use, &run, err);
	if (rc != AKS_OK)
		return rc;
	if (use && call)
		call = &run;
	if (!use)
		return per_call_done(s, s->ops->download(s->sb, path, cpath, call, out, err), out);
	uint64_t max = s->ops->download_max ? s->ops->download_max : UINT64_MAX;
	aks_error *e = NULL;
	bool refused = false;
	rc = aks__agent_read_into(s->agent, cpath, max, out, path, call, &refused, &e);
	if (rc != AKS_OK)
		rc = refused ? pass(s->host, rc, e, err)
		             : file_error(s, "read", path, rc, e, call, err);
	give_notice(s, out, NULL);
	report_refused(s, out);
	return rc;
}
