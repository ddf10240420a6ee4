/*
 * aksandbox-agent - the in-sandbox helper (docs/agent-protocol.md).
 *
 * A provider places this static program in a sandbox and keeps it running for the
 * sandbox's life; the host talks to it over the agent's stdin and stdout (pipes, docker
 * attach, a kubernetes exec stream). It opens no network port but, when the host asks, its
 * egress proxy on the sandbox's own loopback (netproxy.c). It runs programs (each
 * under its own supervisor, see spawn.c), streams their output in chunks under per-request
 * credit, moves files with size and SHA-256 checks (files.c) and keeps persistent Python
 * interpreters (pysession.c). One poll(2) loop serves every request at once. Given
 * --landlock-ro/--landlock-rw it first confines itself, and so all it runs, to those paths
 * (landlock.c); given --exec it runs one program in its own place instead of the protocol.
 *
 * libc only, linked statically: it must run in any Linux image. Nothing here may call the
 * NSS functions (getpwnam and friends), which a static glibc cannot provide.
 *
 * Memory is bounded: one frame buffer for input, an output queue the loop stops filling at
 * AGENT_OUT_SOFT (and stops reading requests at AGENT_OUT_HARD), one chunk buffer, and each
 * spawn's stdin (at most one frame).
 */
#include "agent.h"
#include "landlock.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef AKS_PACKAGE_VERSION
#define AKS_PACKAGE_VERSION "0"
#endif

extern char **environ;

int agent_fd_hwm = 2;

int64_t agent_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int agent_track_fd(int fd, bool nonblock)
{
	if (fd < 0)
		return fd;
	if (fd > agent_fd_hwm)
		agent_fd_hwm = fd;
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	if (nonblock)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return fd;
}

void conn_send_error(conn *c, uint32_t id, uint8_t type, uint32_t code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	size_t s = aks__agent_frame_begin(&c->out, AKS_AGENT_ERROR, AKS_AGENT_FLAG_END, id);
	aks__agent_put_u32(&c->out, AKS_AGENT_T_CODE, code);
	aks__agent_put_u32(&c->out, AKS_AGENT_T_FRAME_TYPE, type);
	aks__agent_put_str(&c->out, AKS_AGENT_T_MESSAGE, msg);
	aks__agent_frame_end(&c->out, s);
}

req *conn_find(conn *c, uint32_t id)
{
	for (int i = 0; i < AGENT_MAX_REQUESTS; i++)
		if (c->reqs[i].kind != REQ_FREE && c->reqs[i].id == id)
			return &c->reqs[i];
	return NULL;
}

/* A free slot, its owner kept and every fd -1. */
static void req_reset(req *r)
{
	conn *owner = r->c;
	memset(r, 0, sizeof(*r));
	r->c = owner;
	r->kind = REQ_FREE;
	r->fd = -1;
	r->p.ctl = r->p.status = r->p.in = r->p.out = r->p.err = -1;
}

req *conn_new_req(conn *c)
{
	for (int i = 0; i < AGENT_MAX_REQUESTS; i++)
		if (c->reqs[i].kind == REQ_FREE) {
			req_reset(&c->reqs[i]);
			return &c->reqs[i];
		}
	return NULL;
}

void agent_free_req(req *r)
{
	if (r->kind == REQ_SPAWN && !r->session)
		proc_close(&r->p);
	if (r->fd >= 0)
		close(r->fd);
	if (r->tmp)
		unlink(r->tmp);
	free(r->tmp);
	free(r->path);
	free(r->stdin_data);
	free(r->queued_src);
	req_reset(r);
}

/* ---- requests ---- */

static void on_hello(conn *c, const aks_agent_frame *f)
{
	aks_agent_tlv it;
	aks__agent_tlv_init(&it, f);
	uint16_t tag;
	const uint8_t *v;
	uint32_t n, lo = 1, hi = 1, window = AKS_AGENT_WINDOW;
	int rc;
	while ((rc = aks__agent_tlv_next(&it, &tag, &v, &n)) > 0) {
		if (n != 4)
			continue;
		if (tag == AKS_AGENT_T_VERSION_MIN)
			lo = aks__agent_get32(v);
		else if (tag == AKS_AGENT_T_VERSION_MAX)
			hi = aks__agent_get32(v);
		else if (tag == AKS_AGENT_T_WINDOW)
			window = aks__agent_get32(v);
	}
	if (rc < 0) {
		conn_send_error(c, f->id, f->type, AKS_AGENT_E_BAD_PAYLOAD,
		                "HELLO: truncated field");
		return;
	}
	if (lo > AKS_AGENT_VERSION || hi < AKS_AGENT_VERSION) {
		conn_send_error(c, f->id, f->type, AKS_AGENT_E_VERSION,
		                "the host speaks protocol versions %u to %u; this agent speaks %u",
		                lo, hi, AKS_AGENT_VERSION);
		return;
	}
	if (window < AKS_AGENT_CHUNK)
		window = AKS_AGENT_CHUNK;
	if (window > 16u * 1024 * 1024)
		window = 16u * 1024 * 1024;
	c->window = window;
	c->hello = true;
	size_t s = aks__agent_frame_begin(&c->out, AKS_AGENT_HELLO_OK, 0, f->id);
	aks__agent_put_u32(&c->out, AKS_AGENT_T_VERSION, AKS_AGENT_VERSION);
	aks__agent_put_str(&c->out, AKS_AGENT_T_AGENT, "aksandbox-agent " AKS_PACKAGE_VERSION);
	aks__agent_put_u32(&c->out, AKS_AGENT_T_MAX_PAYLOAD, AKS_AGENT_MAX_PAYLOAD);
	aks__agent_put_u32(&c->out, AKS_AGENT_T_WINDOW, window);
	aks__agent_put_u32(&c->out, AKS_AGENT_T_FEATURES,
	                   AKS_AGENT_FEATURE_PYTHON_SESSION | AKS_AGENT_FEATURE_EGRESS);
	aks__agent_put_u32(&c->out, AKS_AGENT_T_PID, (uint32_t)getpid());
	aks__agent_put_u64(&c->out, AKS_AGENT_T_INSTANCE, c->ag->instance);
	aks__agent_put_u32(&c->out, AKS_AGENT_T_MAX_REQUESTS, AGENT_MAX_REQUESTS);
	if (c->ag->lost) {
		/* Told once: to the first host after the loss, which tells its caller. */
		aks__agent_put_u64(&c->out, AKS_AGENT_T_LOST, c->ag->lost);
		c->ag->lost = 0;
		if (!c->ag->state_marked)
			unlink(c->ag->state_mark);
	}
	aks__agent_frame_end(&c->out, s);
}

/* The interpreters a SRC + LANGUAGE spawn runs, with the flag that takes code. */
static const struct {
	const char *language, *program, *flag;
} languages[] = {
    {"python", "python3", "-c"}, {"python3", "python3", "-c"}, {"bash", "bash", "-c"},
    {"sh", "/bin/sh", "-c"},     {"shell", "/bin/sh", "-c"},   {"javascript", "node", "-e"},
    {"node", "node", "-e"},      {"ruby", "ruby", "-e"},       {"perl", "perl", "-e"},
};

/* The kernel's limit on one argument (MAX_ARG_STRLEN), NUL included. */
#define ARG_MAX_ONE (32 * 4096)

typedef struct spawn_args {
	const char *argv[256];
	size_t argc;
	char *strings[512]; /* owned copies, freed at the end */
	size_t nstrings;
	char *env[512];
	size_t nenv;
	bool env_clear;
	const char *shell, *src, *language, *cwd, *session;
	const uint8_t *stdin_data;
	size_t stdin_len;
	uint32_t timeout_ms;
} spawn_args;

static char *own(spawn_args *s, const uint8_t *v, uint32_t n)
{
	if (s->nstrings == sizeof(s->strings) / sizeof(s->strings[0]))
		return NULL;
	char *copy = strndup((const char *)v, n);
	if (copy)
		s->strings[s->nstrings++] = copy;
	return copy;
}

/* Parses a SPAWN payload; NULL, or what is wrong with it. */
static const char *parse_spawn(spawn_args *s, const aks_agent_frame *f)
{
	aks_agent_tlv it;
	aks__agent_tlv_init(&it, f);
	uint16_t tag;
	const uint8_t *v;
	uint32_t n;
	int rc;
	while ((rc = aks__agent_tlv_next(&it, &tag, &v, &n)) > 0) {
		bool text = tag == AKS_AGENT_T_ARGV || tag == AKS_AGENT_T_SHELL ||
		            tag == AKS_AGENT_T_SRC || tag == AKS_AGENT_T_LANGUAGE ||
		            tag == AKS_AGENT_T_CWD || tag == AKS_AGENT_T_ENV ||
		            tag == AKS_AGENT_T_SESSION;
		if (text && memchr(v, 0, n))
			return "a string field holds a NUL byte";
		char *str = text ? own(s, v, n) : NULL;
		if (text && !str)
			return "too many string fields (or out of memory)";
		switch (tag) {
		case AKS_AGENT_T_ARGV:
			if (s->argc == sizeof(s->argv) / sizeof(s->argv[0]) - 1)
				return "more than 255 ARGV fields";
			s->argv[s->argc++] = str;
			break;
		case AKS_AGENT_T_SHELL:
			s->shell = str;
			break;
		case AKS_AGENT_T_SRC:
			s->src = str;
			break;
		case AKS_AGENT_T_LANGUAGE:
			s->language = str;
			break;
		case AKS_AGENT_T_CWD:
			s->cwd = str;
			break;
		case AKS_AGENT_T_SESSION:
			s->session = str;
			break;
		case AKS_AGENT_T_ENV:
			if (!strchr(str, '=') || str[0] == '=')
				return "an ENV field is not NAME=value";
			if (s->nenv == sizeof(s->env) / sizeof(s->env[0]) - 1)
				return "more than 511 ENV fields";
			s->env[s->nenv++] = str;
			break;
		case AKS_AGENT_T_ENV_CLEAR:
			if (n != 4)
				return "ENV_CLEAR is not 4 bytes";
			s->env_clear = aks__agent_get32(v) != 0;
			break;
		case AKS_AGENT_T_STDIN:
			s->stdin_data = v;
			s->stdin_len = n;
			break;
		case AKS_AGENT_T_TIMEOUT_MS:
			if (n != 4)
				return "TIMEOUT_MS is not 4 bytes";
			s->timeout_ms = aks__agent_get32(v);
			break;
		default:
			break; /* unknown fields are ignored: newer hosts may add some */
		}
	}
	if (rc < 0)
		return "a field runs past the end of the payload";
	int kinds = (s->argc > 0) + (s->shell != NULL) + (s->src != NULL);
	if (kinds != 1)
		return "give exactly one of ARGV, SHELL or SRC";
	if (s->src && !s->language)
		return "SRC needs a LANGUAGE";
	if (s->session && (!s->src || strcmp(s->language, "python") != 0))
		return "SESSION is for SRC in LANGUAGE python";
	if (s->session && s->stdin_len)
		return "a SESSION run has no STDIN";
	return NULL;
}

/* The environment of a spawn: the agent's (unless cleared) with the ENV fields on top. */
static char **build_env(spawn_args *s)
{
	if (!s->env_clear && s->nenv == 0)
		return NULL;
	size_t base = 0;
	if (!s->env_clear)
		while (environ[base])
			base++;
	char **envp = calloc(base + s->nenv + 1, sizeof(char *));
	if (!envp)
		return NULL;
	size_t n = 0;
	for (size_t i = 0; i < base; i++) {
		bool replaced = false;
		size_t klen = strcspn(environ[i], "=");
		for (size_t j = 0; j < s->nenv && !replaced; j++)
			replaced =
			    strncmp(s->env[j], environ[i], klen) == 0 && s->env[j][klen] == '=';
		if (!replaced)
			envp[n++] = environ[i];
	}
	for (size_t j = 0; j < s->nenv; j++) {
		/* A later field for the same name wins. */
		size_t klen = strcspn(s->env[j], "=");
		bool later = false;
		for (size_t k = j + 1; k < s->nenv && !later; k++)
			later = strncmp(s->env[k], s->env[j], klen + 1) == 0;
		if (!later)
			envp[n++] = s->env[j];
	}
	return envp;
}

static void on_spawn(conn *c, const aks_agent_frame *f)
{
	spawn_args s;
	memset(&s, 0, sizeof(s));
	const char *bad = parse_spawn(&s, f);
	char msg[300];
	char **envp = NULL;
	req *r = NULL;
	if (bad) {
		conn_send_error(c, f->id, f->type, AKS_AGENT_E_BAD_PAYLOAD, "SPAWN: %s", bad);
		goto out;
	}
	if (f->id == 0 || conn_find(c, f->id)) {
		conn_send_error(
		    c, f->id, f->type, f->id ? AKS_AGENT_E_DUPLICATE_ID : AKS_AGENT_E_BAD_PAYLOAD,
		    f->id ? "request %u is still running" : "request id %u is reserved", f->id);
		goto out;
	}
	if (s.cwd) {
		struct stat st;
		if (stat(s.cwd, &st) < 0 || !S_ISDIR(st.st_mode)) {
			conn_send_error(c, f->id, f->type, AKS_AGENT_E_NOT_FOUND,
			                "the working directory %s does not exist", s.cwd);
			goto out;
		}
	}
	if (s.shell) {
		s.argv[0] = "/bin/sh";
		s.argv[1] = "-c";
		s.argv[2] = s.shell;
		s.argc = 3;
	} else if (s.src && !s.session) {
		size_t i = 0;
		while (i < sizeof(languages) / sizeof(languages[0]) &&
		       strcmp(languages[i].language, s.language) != 0)
			i++;
		if (i == sizeof(languages) / sizeof(languages[0])) {
			conn_send_error(c, f->id, f->type, AKS_AGENT_E_BAD_PAYLOAD,
			                "SPAWN: unknown LANGUAGE '%s'", s.language);
			goto out;
		}
		if (strlen(s.src) >= ARG_MAX_ONE) {
			conn_send_error(
			    c, f->id, f->type, AKS_AGENT_E_LIMIT,
			    "code of %zu bytes is over the %d-byte limit of one argument; "
			    "write it to a file and run that",
			    strlen(s.src), ARG_MAX_ONE - 1);
			goto out;
		}
		s.argv[0] = languages[i].program;
		s.argv[1] = languages[i].flag;
		s.argv[2] = s.src;
		s.argc = 3;
	}
	s.argv[s.argc] = NULL;
	if (!(r = conn_new_req(c))) {
		conn_send_error(c, f->id, f->type, AKS_AGENT_E_LIMIT,
		                "more than %d requests at once", AGENT_MAX_REQUESTS);
		goto out;
	}
	r->id = f->id;
	r->credit = c->window;
	if (s.timeout_ms)
		r->deadline = agent_now_ms() + s.timeout_ms;
	if (s.session) {
		r->kind = REQ_SPAWN;
		if (pysession_run(c, r, s.session, s.src) < 0)
			agent_free_req(r);
		goto out;
	}
	if (s.stdin_len) {
		r->stdin_data = malloc(s.stdin_len);
		if (!r->stdin_data) {
			conn_send_error(c, f->id, f->type, AKS_AGENT_E_LIMIT,
			                "no memory for stdin");
			r = NULL;
			goto out;
		}
		memcpy(r->stdin_data, s.stdin_data, s.stdin_len);
		r->stdin_len = s.stdin_len;
	}
	/* The proxy's settings come last, so they win over the host's and the agent's. */
	for (char *const *e = netproxy_env(c->ag); e && *e; e++)
		if (s.nenv < sizeof(s.env) / sizeof(s.env[0]) - 1)
			s.env[s.nenv++] = *e;
	envp = build_env(&s);
	if (proc_start(&r->p, (char *const *)s.argv, envp, s.cwd, msg, sizeof(msg)) < 0) {
		conn_send_error(c, f->id, f->type, AKS_AGENT_E_SPAWN, "SPAWN: %s", msg);
		agent_free_req(r);
		goto out;
	}
	r->kind = REQ_SPAWN;
	if (!r->stdin_len) {
		close(r->p.in);
		r->p.in = -1;
	}
out:
	free(envp);
	for (size_t i = 0; i < s.nstrings; i++)
		free(s.strings[i]);
}

bool agent_get_u32(const aks_agent_frame *f, uint16_t want, uint32_t *out)
{
	aks_agent_tlv it;
	aks__agent_tlv_init(&it, f);
	uint16_t tag;
	const uint8_t *v;
	uint32_t n;
	while (aks__agent_tlv_next(&it, &tag, &v, &n) > 0)
		if (tag == want && n == 4) {
			*out = aks__agent_get32(v);
			return true;
		}
	return false;
}

static void on_kill(conn *c, const aks_agent_frame *f)
{
	uint32_t sig = SIGKILL;
	agent_get_u32(f, AKS_AGENT_T_SIGNAL, &sig);
	req *r = conn_find(c, f->id);
	if (sig == 0 || sig >= 65) {
		conn_send_error(c, f->id, f->type, AKS_AGENT_E_BAD_PAYLOAD, "KILL: bad signal %u",
		                sig);
		return;
	}
	if (!r || r->kind != REQ_SPAWN) {
		/* The program may just have finished: its EXIT is on the way. */
		conn_send_error(c, f->id, f->type, AKS_AGENT_E_NO_SUCH_REQUEST,
		                "KILL: no program runs as request %u", f->id);
		return;
	}
	if (r->session)
		pysession_kill(r, (int)sig); /* the session's interpreter tree */
	else
		proc_signal(&r->p, (int)sig);
}

static void dispatch(conn *c, const aks_agent_frame *f)
{
	if (!c->hello && f->type != AKS_AGENT_HELLO && f->type != AKS_AGENT_PING) {
		conn_send_error(c, f->id, f->type, AKS_AGENT_E_NO_HELLO,
		                "send HELLO first (got %s)",
		                aks__agent_type_name(f->type) ? aks__agent_type_name(f->type)
		                                              : "an unknown frame type");
		return;
	}
	switch (f->type) {
	case AKS_AGENT_HELLO:
		on_hello(c, f);
		return;
	case AKS_AGENT_PING:
		if (f->len > 1024) {
			conn_send_error(c, f->id, f->type, AKS_AGENT_E_BAD_PAYLOAD,
			                "PING payload over 1024 bytes");
			return;
		}
		aks__agent_frame_data(&c->out, AKS_AGENT_PONG, 0, f->id, f->payload, f->len);
		return;
	case AKS_AGENT_CREDIT: {
		uint32_t bytes;
		req *r = conn_find(c, f->id);
		if (!agent_get_u32(f, AKS_AGENT_T_BYTES, &bytes))
			conn_send_error(c, f->id, f->type, AKS_AGENT_E_BAD_PAYLOAD,
			                "CREDIT needs BYTES");
		else if (r && r->credit < ((int64_t)1 << 40))
			r->credit += bytes;
		return; /* credit for a finished request is a harmless race */
	}
	case AKS_AGENT_SPAWN:
		on_spawn(c, f);
		return;
	case AKS_AGENT_KILL:
		on_kill(c, f);
		return;
	case AKS_AGENT_WRITE:
		files_write_open(c, f);
		return;
	case AKS_AGENT_WRITE_DATA: {
		req *r = conn_find(c, f->id);
		if (r && r->kind == REQ_WRITE)
			files_write_data(c, r, f);
		return; /* data of a refused write: the refusal was sent already */
	}
	case AKS_AGENT_READ:
		files_read_open(c, f);
		return;
	case AKS_AGENT_NET_LISTEN:
		netproxy_listen(c, f);
		return;
	case AKS_AGENT_NET_OPENED:
	case AKS_AGENT_NET_DATA:
	case AKS_AGENT_NET_CREDIT:
	case AKS_AGENT_NET_EOF:
	case AKS_AGENT_NET_CLOSE:
		netproxy_frame(c, f);
		return;
	default: {
		const char *name = aks__agent_type_name(f->type);
		if (name)
			conn_send_error(c, f->id, f->type, AKS_AGENT_E_UNKNOWN_TYPE,
			                "frame type 0x%02x (%s) is sent by the agent, not to it",
			                f->type, name);
		else
			conn_send_error(c, f->id, f->type, AKS_AGENT_E_UNKNOWN_TYPE,
			                "unknown frame type 0x%02x", f->type);
	}
	}
}

static void on_decode_error(conn *c, const aks_agent_frame *f, uint32_t code)
{
	switch (code) {
	case AKS_AGENT_E_TOO_LARGE:
		conn_send_error(c, f->id, f->type, code,
		                "frame of %u payload bytes is over the %u maximum; skipped", f->len,
		                AKS_AGENT_MAX_PAYLOAD);
		break;
	case AKS_AGENT_E_VERSION:
		conn_send_error(c, f->id, f->type, code,
		                "frame version %u is not %u; looking for the next frame",
		                f->version, AKS_AGENT_VERSION);
		break;
	default:
		conn_send_error(
		    c, 0, 0, code,
		    "malformed frame header (bad magic or reserved bits); looking for the "
		    "next frame");
	}
}

static void read_requests(conn *c)
{
	size_t avail;
	uint8_t *p = aks__agent_decoder_space(&c->dec, &avail);
	ssize_t n = avail ? read(c->in_fd, p, avail) : 0;
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0 && avail) {
		c->in_eof = true;
		return;
	}
	aks__agent_decoder_commit(&c->dec, (size_t)n);
	aks_agent_frame f;
	uint32_t code;
	int rc;
	while ((rc = aks__agent_decoder_next(&c->dec, &f, &code)) != AKS_AGENT_DEC_MORE) {
		if (rc == AKS_AGENT_DEC_FRAME)
			dispatch(c, &f);
		else
			on_decode_error(c, &f, code);
	}
}

/* ---- program output, stdin, status ---- */

static uint8_t chunk[AKS_AGENT_CHUNK];

static void pump_output(req *r, int *fd, uint8_t type, uint64_t *total)
{
	size_t want = r->credit < (int64_t)sizeof(chunk) ? (size_t)r->credit : sizeof(chunk);
	ssize_t n = read(*fd, chunk, want);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		close(*fd);
		*fd = -1;
		return;
	}
	r->credit -= n;
	*total += (uint64_t)n;
	aks__agent_frame_data(&r->c->out, type, 0, r->id, chunk, (size_t)n);
}

static void pump_stdin(req *r)
{
	ssize_t n = write(r->p.in, r->stdin_data + r->stdin_off, r->stdin_len - r->stdin_off);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n > 0)
		r->stdin_off += (size_t)n;
	if (n < 0 || r->stdin_off == r->stdin_len) {
		/* Done, or the program closed its stdin (EPIPE): either way stdin ends here. */
		close(r->p.in);
		r->p.in = -1;
		free(r->stdin_data);
		r->stdin_data = NULL;
	}
}

/* --kill-leftovers: a run ends with its program, taking everything it started with it, as
 * the local_subprocess provider promises (a background job holding the output open does
 * not keep the run going, and no daemon survives the call). */
static bool kill_leftovers;

void proc_read_status(proc *p)
{
	uint8_t raw[4];
	ssize_t n = read(p->status, raw, sizeof(raw));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n == 4 && !p->have_status) {
		p->have_status = true;
		p->wstatus = (int)aks__agent_get32(raw);
		if (kill_leftovers)
			proc_signal(p, SIGKILL);
		return;
	}
	if (n <= 0) {
		close(p->status);
		p->status = -1;
	}
}

void agent_send_exit(req *r, int exit_code, int sig, const char *notice)
{
	aks_agent_buf *out = &r->c->out;
	size_t s = aks__agent_frame_begin(out, AKS_AGENT_EXIT, AKS_AGENT_FLAG_END, r->id);
	aks__agent_put_u32(out, AKS_AGENT_T_EXIT_CODE, (uint32_t)exit_code);
	aks__agent_put_u32(out, AKS_AGENT_T_EXIT_SIGNAL, (uint32_t)sig);
	aks__agent_put_u32(out, AKS_AGENT_T_TIMED_OUT, r->timed_out);
	aks__agent_put_u64(out, AKS_AGENT_T_OUT_BYTES, r->out_total);
	aks__agent_put_u64(out, AKS_AGENT_T_ERR_BYTES, r->err_total);
	if (notice)
		aks__agent_put_str(out, AKS_AGENT_T_NOTICE, notice);
	aks__agent_frame_end(out, s);
}

static void finish_spawn(req *r)
{
	if (!r->p.have_status) {
		conn_send_error(r->c, r->id, AKS_AGENT_SPAWN, AKS_AGENT_E_IO,
		                "the program's supervisor died before reporting its status");
	} else {
		int st = r->p.wstatus;
		agent_send_exit(r, WIFEXITED(st) ? WEXITSTATUS(st) : -1,
		                WIFSIGNALED(st) ? WTERMSIG(st) : 0, NULL);
	}
	proc_release(&r->p);
	agent_free_req(r);
}

/* ---- connections ---- */

static conn *conn_open(agent *a, int in_fd, int out_fd)
{
	conn *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	if (aks__agent_decoder_init(&c->dec, AKS_AGENT_MAX_PAYLOAD) < 0) {
		free(c);
		return NULL;
	}
	c->ag = a;
	c->in_fd = in_fd;
	c->out_fd = out_fd;
	c->window = AKS_AGENT_WINDOW;
	for (int i = 0; i < AGENT_MAX_REQUESTS; i++) {
		c->reqs[i].c = c;
		req_reset(&c->reqs[i]);
	}
	c->next = a->conns;
	a->conns = c;
	a->nconns++;
	return c;
}

/* The host went (EOF, a broken stream) or the agent is ending: what the connection runs
 * dies with it (a supervisor whose order pipe closes kills its tree), its Python runs are
 * interrupted and its proxy streams reset. */
static void conn_close(agent *a, conn *c)
{
	for (conn **pp = &a->conns; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	a->nconns--;
	pysession_conn_closed(a, c);
	netproxy_conn_closed(a, c);
	for (int i = 0; i < AGENT_MAX_REQUESTS; i++)
		if (c->reqs[i].kind != REQ_FREE)
			agent_free_req(&c->reqs[i]);
	if (c->in_fd >= 0)
		close(c->in_fd);
	if (c->out_fd >= 0 && c->out_fd != c->in_fd)
		close(c->out_fd);
	aks__agent_decoder_free(&c->dec);
	aks__agent_buf_free(&c->out);
	free(c);
}

/* A resident agent's new hosts: only processes of its own user may connect (the socket is
 * in the sandbox's network namespace, where the sandbox's programs are too: they could run
 * all this themselves anyway). */
static void accept_hosts(agent *a)
{
	for (;;) {
		int fd = accept4(a->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		struct ucred cred;
		socklen_t len = sizeof(cred);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
		    cred.uid != getuid()) {
			close(fd);
			continue;
		}
		agent_track_fd(fd, true);
		conn *c = a->nconns < AGENT_MAX_CONNS ? conn_open(a, fd, fd) : NULL;
		if (!c) {
			/* Told why, best effort, then closed: the host sees its stream end. */
			aks_agent_buf b = {0};
			size_t s =
			    aks__agent_frame_begin(&b, AKS_AGENT_ERROR, AKS_AGENT_FLAG_END, 0);
			aks__agent_put_u32(&b, AKS_AGENT_T_CODE, AKS_AGENT_E_LIMIT);
			aks__agent_put_u32(&b, AKS_AGENT_T_FRAME_TYPE, 0);
			aks__agent_put_str(&b, AKS_AGENT_T_MESSAGE,
			                   "the resident agent serves its most hosts already");
			aks__agent_frame_end(&b, s);
			if (!b.failed && write(fd, b.data, aks__agent_buf_pending(&b)) < 0)
				(void)0;
			aks__agent_buf_free(&b);
			close(fd);
		}
	}
}

/* ---- the loop ---- */

enum {
	SLOT_IN,
	SLOT_OUT,
	SLOT_SIG,
	SLOT_LISTEN,
	SLOT_REQ_OUT,
	SLOT_REQ_ERR,
	SLOT_REQ_IN,
	SLOT_REQ_STATUS
};

typedef struct slot {
	int what;
	conn *c;
	req *r;
} slot;

static void shutdown_and_exit(agent *a)
{
	/* Everything the agent runs dies with it: supervisors and whatever they leave. */
	while (a->conns)
		conn_close(a, a->conns);
	pysession_close_all(a);
	netproxy_close_all(a);
	bool seen = false;
	proc_kill_children(-1, NULL, &seen, 10000);
	proc_sweep_orphans(proc_agent_start, 10000);
	exit(0);
}

static void reap(agent *a)
{
	struct signalfd_siginfo si;
	while (read(a->sigfd, &si, sizeof(si)) > 0)
		;
	int st;
	while (waitpid(-1, &st, WNOHANG) > 0)
		; /* supervisors (their news comes through the status pipe) and orphans */
}

/* The fds one connection's requests poll, and the time to its first deadline. */
static void add_conn_fds(conn *c, struct pollfd *pfd, slot *slots, nfds_t *n, int64_t now,
                         int *timeout)
{
#define ADD(fd_, ev_, what_, r_)                                                                   \
	do {                                                                                       \
		pfd[*n].fd = (fd_);                                                                \
		pfd[*n].events = (ev_);                                                            \
		pfd[*n].revents = 0;                                                               \
		slots[*n].what = (what_);                                                          \
		slots[*n].c = c;                                                                   \
		slots[*n].r = (r_);                                                                \
		(*n)++;                                                                            \
	} while (0)
	size_t pending = aks__agent_buf_pending(&c->out);
	bool room = pending < AGENT_OUT_SOFT;
	if (pending < AGENT_OUT_HARD && !c->in_eof)
		ADD(c->in_fd, POLLIN, SLOT_IN, NULL);
	if (pending)
		ADD(c->out_fd, POLLOUT, SLOT_OUT, NULL);
	for (int i = 0; i < AGENT_MAX_REQUESTS; i++) {
		req *r = &c->reqs[i];
		if (r->kind == REQ_READ && r->credit > 0 && room)
			*timeout = 0;
		if (r->kind != REQ_SPAWN || r->session)
			continue;
		if (r->deadline && !r->p.killing) {
			if (now >= r->deadline) {
				r->timed_out = true;
				proc_signal(&r->p, SIGKILL);
			} else {
				int left = (int)(r->deadline - now);
				if (*timeout < 0 || left < *timeout)
					*timeout = left;
			}
		}
		if (r->p.out >= 0 && r->credit > 0 && room)
			ADD(r->p.out, POLLIN, SLOT_REQ_OUT, r);
		if (r->p.err >= 0 && r->credit > 0 && room)
			ADD(r->p.err, POLLIN, SLOT_REQ_ERR, r);
		if (r->p.in >= 0)
			ADD(r->p.in, POLLOUT, SLOT_REQ_IN, r);
		if (r->p.status >= 0)
			ADD(r->p.status, POLLIN, SLOT_REQ_STATUS, r);
	}
#undef ADD
}

/* Requests that finished: reads that can send more, spawns whose program and output are
 * done. */
static void step_conn(conn *c)
{
	for (int i = 0; i < AGENT_MAX_REQUESTS; i++) {
		req *r = &c->reqs[i];
		if (r->kind == REQ_READ)
			files_read_step(c, r);
		else if (r->kind == REQ_SPAWN && !r->session && r->p.out < 0 && r->p.err < 0 &&
		         (r->p.have_status || r->p.status < 0) &&
		         (!r->p.killing || r->p.status < 0))
			/* A tree being killed is gone only when its supervisor exits (the status
			 * pipe closes): EXIT must not overtake the kill. */
			finish_spawn(r);
	}
}

static void loop(agent *a)
{
	enum { PER_CONN = 2 + 4 * AGENT_MAX_REQUESTS, EXTRA = 2 + 3 * 64 + 1 + AKS_AGENT_NET_MAX };
	size_t cap = (size_t)(a->listen_fd >= 0 ? AGENT_MAX_CONNS : 1) * PER_CONN + EXTRA;
	struct pollfd *pfd = calloc(cap, sizeof(*pfd));
	slot *slots = calloc(cap, sizeof(*slots));
	if (!pfd || !slots)
		shutdown_and_exit(a);
	for (;;) {
		for (conn *c = a->conns, *next; c; c = next) {
			next = c->next;
			if (!c->in_eof && !c->out_broken && !c->out.failed)
				continue;
			/* On stdio the host's end is the agent's; a resident agent stays for the
			 * next host. Out of memory for an output queue: nothing sane can follow. */
			if (a->listen_fd < 0 || c->out.failed)
				shutdown_and_exit(a);
			conn_close(a, c);
		}
		int64_t now = agent_now_ms();
		int timeout = -1;
		nfds_t n = 0;
		pfd[n] = (struct pollfd){.fd = a->sigfd, .events = POLLIN};
		slots[n++] = (slot){.what = SLOT_SIG};
		if (a->listen_fd >= 0) {
			pfd[n] = (struct pollfd){.fd = a->listen_fd, .events = POLLIN};
			slots[n++] = (slot){.what = SLOT_LISTEN};
		}
		for (conn *c = a->conns; c; c = c->next)
			add_conn_fds(c, pfd, slots, &n, now, &timeout);
		size_t nsess = pysession_add_fds(a, pfd + n, cap - n, now, &timeout);
		size_t nnet = netproxy_add_fds(a, pfd + n + nsess, cap - n - nsess, now, &timeout);
		if (poll(pfd, n + nsess + nnet, timeout) < 0 && errno != EINTR)
			shutdown_and_exit(a);
		bool accept_now = false;
		for (nfds_t i = 0; i < n; i++) {
			if (!pfd[i].revents)
				continue;
			conn *c = slots[i].c;
			req *r = slots[i].r;
			switch (slots[i].what) {
			case SLOT_IN:
				read_requests(c);
				break;
			case SLOT_OUT: {
				ssize_t w = write(c->out_fd, c->out.data + c->out.off,
				                  aks__agent_buf_pending(&c->out));
				if (w > 0)
					aks__agent_buf_consume(&c->out, (size_t)w);
				else if (w < 0 && errno != EAGAIN && errno != EINTR)
					c->out_broken = true;
				break;
			}
			case SLOT_SIG:
				reap(a);
				break;
			case SLOT_LISTEN:
				accept_now = true;
				break;
			case SLOT_REQ_OUT:
				pump_output(r, &r->p.out, AKS_AGENT_STDOUT, &r->out_total);
				break;
			case SLOT_REQ_ERR:
				pump_output(r, &r->p.err, AKS_AGENT_STDERR, &r->err_total);
				break;
			case SLOT_REQ_IN:
				pump_stdin(r);
				break;
			case SLOT_REQ_STATUS:
				proc_read_status(&r->p);
				break;
			}
		}
		pysession_events(a, pfd + n, nsess);
		netproxy_events(a, pfd + n + nsess, nnet);
		for (conn *c = a->conns; c; c = c->next)
			step_conn(c);
		/* After the events: a new connection's fds were in no slot of this round. */
		if (accept_now)
			accept_hosts(a);
	}
}

static int usage(const char *argv0)
{
	fprintf(stderr,
	        "usage: %s [--kill-leftovers] [--landlock-ro PATH]... [--landlock-rw PATH]...\n"
	        "          [--resident NAME [--state-dir DIR] | --exec PROGRAM [ARG...]]\n"
	        "       %s --landlock-abi | --version\n"
	        "Speaks the aksandbox agent protocol on stdin and stdout "
	        "(docs/agent-protocol.md),\n"
	        "with --resident through the agent resident in the sandbox under NAME "
	        "(started if none runs;\n"
	        "in DIR it notes who holds Python state, to tell a host when that was lost),\n"
	        "or with --exec runs PROGRAM in its place; --landlock-* confine both (exit 125 "
	        "when they cannot).\n",
	        argv0, argv0);
	return 2;
}

/* Applies the --landlock-* rules, if any. Fails closed: the caller exits without running
 * anything unconfined. */
static int confine(const char *const *ro, size_t nro, const char *const *rw, size_t nrw)
{
	if (nro == 0 && nrw == 0)
		return 0;
	char msg[4200];
	if (agent_landlock_apply(ro, nro, rw, nrw, msg, sizeof(msg)) < 0) {
		fprintf(stderr, "aksandbox-agent: landlock: %s\n", msg);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--version") == 0) {
		printf("aksandbox-agent %s (protocol %d)\n", AKS_PACKAGE_VERSION,
		       AKS_AGENT_VERSION);
		return 0;
	}
	if (argc > 1 && strcmp(argv[1], "--landlock-abi") == 0) {
		int abi = agent_landlock_abi();
		if (abi < 0)
			fprintf(stderr, "aksandbox-agent: landlock: %s: %s\n",
			        agent_landlock_unavailable(-abi), strerror(-abi));
		printf("%d\n", abi < 0 ? 0 : abi);
		return 0;
	}
	/* Each --landlock-* takes one argument, so argc bounds both lists. */
	const char **ro = calloc((size_t)argc, sizeof(*ro));
	const char **rw = calloc((size_t)argc, sizeof(*rw));
	if (!ro || !rw) {
		free(ro);
		free(rw);
		fprintf(stderr, "aksandbox-agent: cannot start: %s\n", strerror(ENOMEM));
		return 1;
	}
	size_t nro = 0, nrw = 0;
	char **exec_argv = NULL;
	const char *resident = NULL, *state_dir = NULL;
	bool bad_usage = false;
	for (int opt = 1; opt < argc && !exec_argv && !bad_usage; opt++) {
		bool has_value = opt + 1 < argc;
		if (strcmp(argv[opt], "--kill-leftovers") == 0)
			kill_leftovers = true;
		else if (strcmp(argv[opt], "--landlock-ro") == 0 && has_value)
			ro[nro++] = argv[++opt];
		else if (strcmp(argv[opt], "--landlock-rw") == 0 && has_value)
			rw[nrw++] = argv[++opt];
		else if (strcmp(argv[opt], "--exec") == 0 && has_value)
			exec_argv = argv + opt + 1;
		else if (strcmp(argv[opt], "--resident") == 0 && has_value)
			resident = argv[++opt];
		else if (strcmp(argv[opt], "--state-dir") == 0 && has_value)
			state_dir = argv[++opt];
		else
			bad_usage = true;
	}
	int confined = bad_usage ? 0 : confine(ro, nro, rw, nrw);
	free(ro);
	free(rw);
	if (bad_usage || (resident && exec_argv) || (state_dir && !resident))
		return usage(argv[0]);
	if (confined < 0)
		return 125;
	if (exec_argv) {
		/* One program in the agent's place, under the same rules: no protocol at all. */
		execvp(exec_argv[0], exec_argv);
		int e = errno;
		fprintf(stderr, "aksandbox-agent: %s: %s\n", exec_argv[0],
		        e == ENOENT ? "command not found" : strerror(e));
		return e == ENOENT ? 127 : 126;
	}
	if (resident)
		return resident_relay(resident, state_dir);
	return agent_run(-1, NULL);
}

/* The INSTANCE an agent before us wrote to state_mark when it started a Python session, or
 * 0 (no file: none did, or its loss was told already). */
static uint64_t read_state_mark(const char *state_mark)
{
	/* The directory is the sandbox's to write in too: nothing there may block us (a FIFO)
	 * or lead elsewhere (a symlink). */
	int fd = open(state_mark, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return 0;
	struct stat st;
	char buf[32];
	ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, buf, sizeof(buf) - 1) : 0;
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	char *end;
	unsigned long long v = strtoull(buf, &end, 16);
	return end != buf ? (uint64_t)v : 0;
}

void agent_state_mark_python(agent *a)
{
	if (!a->state_mark || a->state_marked)
		return;
	/* Written once, by the agent whose Python state it is; a sandbox that cannot write
	 * there (a read-only directory) only loses the report, never a run. */
	int fd =
	    open(a->state_mark, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || ftruncate(fd, 0) < 0) {
		close(fd);
		return;
	}
	char buf[24];
	int n = snprintf(buf, sizeof(buf), "%016llx\n", (unsigned long long)a->instance);
	a->state_marked = write(fd, buf, (size_t)n) == n;
	close(fd);
}

int agent_run(int listen_fd, const char *state_mark)
{
	static agent a;
	a.listen_fd = listen_fd;
	a.net_fd = -1;
	/* Told to every host, so one that reconnects knows whether it reached the same agent
	 * (and its Python state). Not a secret: a clock and the pid do where getrandom fails. */
	if (getrandom(&a.instance, sizeof(a.instance), GRND_NONBLOCK) != sizeof(a.instance))
		a.instance = ((uint64_t)agent_now_ms() << 20) ^ (uint64_t)getpid();
	a.instance |= 1; /* never 0, which means an agent that sends none */
	/* An agent before us held Python state and is gone (killed, or the sandbox restarted):
	 * its state is lost, and the first host to reach us hears of it. */
	if (state_mark && (a.state_mark = strdup(state_mark)))
		a.lost = read_state_mark(a.state_mark);
	/* Orphans of what we run come back to us, so nothing escapes a kill or our exit (or,
	 * where that does not take, are swept: spawn.c). */
	proc_init();
	/* Not dumpable: our /proc entries (our stdio is the host's channel) are closed to the
	 * programs we run as the same non-root user; they are dumpable again after exec. */
	prctl(PR_SET_DUMPABLE, 0);
	signal(SIGPIPE, SIG_IGN);
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	a.sigfd = agent_track_fd(signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK), false);
	if (a.sigfd < 0 || (listen_fd < 0 && !conn_open(&a, 0, 1))) {
		fprintf(stderr, "aksandbox-agent: cannot start: %s\n", strerror(errno));
		return 1;
	}
	if (listen_fd >= 0) {
		agent_track_fd(listen_fd, true);
	} else {
		/* Where the stream is a pipe (local providers, a container's stdio), a deeper
		 * one carries a whole frame per write: fewer wake-ups per MiB (the egress
		 * proxy's data, a large output). Refused (a socket, a low pipe-max-size)
		 * changes nothing. */
		fcntl(0, F_SETPIPE_SZ, 1 << 20);
		fcntl(1, F_SETPIPE_SZ, 1 << 20);
		fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
		fcntl(1, F_SETFL, fcntl(1, F_GETFL) | O_NONBLOCK);
	}
	loop(&a);
	return 0;
}
