/*
 * agent/pysession.c - stateful Python: one persistent interpreter per session name.
 *
 * The interpreter runs DRIVER (below) under a supervisor like any program. The agent sends
 * each run's code on the interpreter's stdin ("<nonce> <length>\n<code>"); the driver
 * executes it in one long-lived globals dict (so variables, imports and open files
 * survive), prints the value of a final expression as a REPL does, then writes an end
 * marker "\x1eAKSEND:<nonce>:<status>\x1e" to stdout and to stderr. Everything before the
 * marker on each stream is the run's output; the marker is stripped. The nonce is fresh per
 * run, so program output cannot fake an end.
 *
 * A run past its deadline gets SIGINT (KeyboardInterrupt: the session survives, status
 * 130); if it has not ended AKS_PY_KILL_GRACE_MS later, the interpreter tree is killed and
 * the next run starts a new interpreter, with a notice that the state is gone.
 */
#include "agent.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define AKS_PY_KILL_GRACE_MS 1000
#define MAX_SESSIONS         16

static const char DRIVER[] =
    "import ast, os, signal, sys, traceback\n"
    "def _aks_main():\n"
    "    cmd = os.fdopen(os.dup(0), 'rb', 0)\n"
    "    nul = os.open(os.devnull, os.O_RDONLY)\n"
    "    os.dup2(nul, 0)\n"
    "    os.close(nul)\n"
    "    g = {'__name__': '__main__', '__builtins__': __builtins__}\n"
    "    running = [False]\n"
    "    def on_int(sig, frame):\n"
    "        if running[0]:\n"
    "            raise KeyboardInterrupt\n"
    "    def read(n):\n"
    "        b = b''\n"
    "        while len(b) < n:\n"
    "            c = cmd.read(n - len(b))\n"
    "            if not c:\n"
    "                os._exit(0)\n"
    "            b += c\n"
    "        return b\n"
    "    while True:\n"
    "        try:\n"
    "            line = b''\n"
    "            while not line.endswith(b'\\n'):\n"
    "                line += read(1)\n"
    "            nonce, n = line.split()\n"
    "            src = read(int(n)).decode('utf-8', 'replace')\n"
    "        except KeyboardInterrupt:\n"
    "            continue\n"
    "        status = 0\n"
    "        signal.signal(signal.SIGINT, on_int)\n"
    "        try:\n"
    "            running[0] = True\n"
    "            try:\n"
    "                tree = ast.parse(src, '<run_code>', 'exec')\n"
    "                last = None\n"
    "                if tree.body and isinstance(tree.body[-1], ast.Expr):\n"
    "                    last = ast.Expression(tree.body.pop().value)\n"
    "                exec(compile(tree, '<run_code>', 'exec'), g)\n"
    "                if last is not None:\n"
    "                    v = eval(compile(last, '<run_code>', 'eval'), g)\n"
    "                    if v is not None:\n"
    "                        print(repr(v))\n"
    "            except SystemExit as e:\n"
    "                status = e.code if isinstance(e.code, int) else (e.code is not None)\n"
    "            except KeyboardInterrupt:\n"
    "                traceback.print_exc()\n"
    "                status = 130\n"
    "            except BaseException:\n"
    "                traceback.print_exc()\n"
    "                status = 1\n"
    "        except KeyboardInterrupt:\n"
    "            status = 130\n"
    "        running[0] = False\n"
    "        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})\n"
    "        for s in (sys.stdout, sys.stderr):\n"
    "            try:\n"
    "                s.flush()\n"
    "            except Exception:\n"
    "                pass\n"
    "        m = ('\\x1eAKSEND:%s:%03d\\x1e' % (nonce.decode(), int(status) & 255)).encode()\n"
    "        os.write(1, m)\n"
    "        os.write(2, m)\n"
    "        signal.pthread_sigmask(signal.SIG_SETMASK, old)\n"
    "_aks_main()\n";

enum { OUT = 0, ERR = 1 };

typedef struct pysession {
	struct pysession *next;
	char *name;
	proc p;
	bool alive;
	bool restarted; /* the next run's EXIT says the state was lost */
	req *run;
	/* the run's connection went: its output is dropped up to the end marker, then the
	 * next waiting run starts */
	bool draining;
	req *queue, *queue_tail; /* runs of other connections waiting for this session */
	char prefix[40];
	size_t prefix_len;
	uint8_t hold[2][48];
	size_t hold_len[2];
	bool marked[2];
	int status;
	uint8_t *cmd;
	size_t cmd_len, cmd_off;
	bool interrupted;
	int64_t kill_at;
	int idx[4]; /* pollfd slots of out, err, in, status; -1 when not polled */
} pysession;

static unsigned long long nonce_counter;

static void session_stop(pysession *s)
{
	proc_close(&s->p);
	s->alive = false;
	free(s->cmd);
	s->cmd = NULL;
	s->cmd_len = s->cmd_off = 0;
}

static int session_start(pysession *s, char *msg, size_t msglen)
{
	char *argv[] = {"python3", "-u", "-c", (char *)DRIVER, NULL};
	if (proc_start(&s->p, argv, NULL, NULL, msg, msglen) < 0)
		return -1;
	s->alive = true;
	return 0;
}

/* Sends r's code to the interpreter (started first if need be). 0, or -1 after an error
 * frame was sent. */
static int start_run(pysession *s, req *r, const char *src)
{
	char msg[300];
	if (!s->alive) {
		if (session_start(s, msg, sizeof(msg)) < 0) {
			conn_send_error(r->c, r->id, AKS_AGENT_SPAWN, AKS_AGENT_E_SPAWN,
			                "cannot start the Python session: %s", msg);
			return -1;
		}
		agent_state_mark_python(r->c->ag);
	}
	size_t len = strlen(src);
	char nonce[24];
	snprintf(nonce, sizeof(nonce), "%08x%08llx", (unsigned)getpid() ^ (unsigned)agent_now_ms(),
	         ++nonce_counter);
	s->cmd = malloc(len + 64);
	if (!s->cmd) {
		conn_send_error(r->c, r->id, AKS_AGENT_SPAWN, AKS_AGENT_E_LIMIT, "out of memory");
		return -1;
	}
	int head = snprintf((char *)s->cmd, 64, "%s %zu\n", nonce, len);
	memcpy(s->cmd + head, src, len);
	s->cmd_len = (size_t)head + len;
	s->cmd_off = 0;
	s->prefix_len = (size_t)snprintf(s->prefix, sizeof(s->prefix),
	                                 "\x1e"
	                                 "AKSEND:%s:",
	                                 nonce);
	s->hold_len[OUT] = s->hold_len[ERR] = 0;
	s->marked[OUT] = s->marked[ERR] = false;
	s->interrupted = false;
	s->status = 0;
	s->run = r;
	r->session = s;
	return 0;
}

static void unqueue(pysession *s, req *r)
{
	req **pp = &s->queue;
	while (*pp && *pp != r)
		pp = &(*pp)->queue_next;
	if (!*pp)
		return;
	*pp = r->queue_next;
	if (s->queue_tail == r) {
		s->queue_tail = NULL;
		for (req *q = s->queue; q; q = q->queue_next)
			s->queue_tail = q;
	}
	r->queue_next = NULL;
}

/* The session is free: starts the first waiting run that can start. */
static void next_run(pysession *s)
{
	while (!s->run && !s->draining && s->queue) {
		req *r = s->queue;
		unqueue(s, r);
		char *src = r->queued_src;
		r->queued_src = NULL;
		if (start_run(s, r, src) < 0)
			agent_free_req(r);
		free(src);
	}
}

/* Ends a run that never got its session (killed, or past its deadline while waiting). */
static void end_waiting(pysession *s, req *r, int sig, const char *notice)
{
	unqueue(s, r);
	agent_send_exit(r, -1, sig, notice);
	agent_free_req(r);
}

int pysession_run(conn *c, req *r, const char *name, const char *src)
{
	pysession *s = c->ag->sessions;
	int count = 0;
	for (; s && strcmp(s->name, name) != 0; s = s->next)
		count++;
	if (!s) {
		if (count >= MAX_SESSIONS) {
			conn_send_error(c, r->id, AKS_AGENT_SPAWN, AKS_AGENT_E_LIMIT,
			                "more than %d Python sessions", MAX_SESSIONS);
			return -1;
		}
		s = calloc(1, sizeof(*s));
		if (!s || !(s->name = strdup(name))) {
			free(s);
			conn_send_error(c, r->id, AKS_AGENT_SPAWN, AKS_AGENT_E_LIMIT,
			                "out of memory");
			return -1;
		}
		s->p.ctl = s->p.status = s->p.in = s->p.out = s->p.err = -1;
		s->next = c->ag->sessions;
		c->ag->sessions = s;
	}
	if (s->run && s->run->c == c) {
		/* One host runs one thing at a time in a session: a second is its mistake. */
		conn_send_error(c, r->id, AKS_AGENT_SPAWN, AKS_AGENT_E_BUSY,
		                "the Python session '%s' is running request %u", name, s->run->id);
		return -1;
	}
	if (s->run || s->draining || s->queue) {
		/* Another host's run holds the session: this one waits its turn. */
		if (!(r->queued_src = strdup(src))) {
			conn_send_error(c, r->id, AKS_AGENT_SPAWN, AKS_AGENT_E_LIMIT,
			                "out of memory");
			return -1;
		}
		r->session = s;
		if (s->queue_tail)
			s->queue_tail->queue_next = r;
		else
			s->queue = r;
		s->queue_tail = r;
		return 0;
	}
	return start_run(s, r, src);
}

void pysession_kill(req *r, int sig)
{
	pysession *s = r->session;
	if (s->run != r)
		end_waiting(s, r, sig, "killed while waiting for the Python session");
	else if (s->alive)
		proc_signal(&s->p, sig);
}

void pysession_conn_closed(agent *a, conn *c)
{
	for (pysession *s = a->sessions; s; s = s->next) {
		for (req *r = s->queue, *next; r; r = next) {
			next = r->queue_next;
			if (r->c == c) {
				unqueue(s, r);
				agent_free_req(r);
			}
		}
		req *r = s->run;
		if (!r || r->c != c)
			continue;
		/* Nobody waits for this run's output any more: interrupt it, keep the session
		 * (killed after the grace, as at a deadline), drop what it still prints. */
		s->run = NULL;
		agent_free_req(r);
		s->draining = true;
		if (s->alive && !s->interrupted) {
			s->interrupted = true;
			s->kill_at = agent_now_ms() + AKS_PY_KILL_GRACE_MS;
			proc_signal(&s->p, SIGINT);
		}
	}
}

/* Sends bytes of a run's stream, stripping the end marker and noting it. While draining
 * (no run), only the marker matters. */
static void feed(pysession *s, int k, const uint8_t *data, size_t n)
{
	req *r = s->run;
	uint8_t type = k == OUT ? AKS_AGENT_STDOUT : AKS_AGENT_STDERR;
	static uint8_t buf[sizeof(s->hold[0]) + AKS_AGENT_CHUNK];
	size_t len = s->hold_len[k];
	memcpy(buf, s->hold[k], len);
	memcpy(buf + len, data, n);
	len += n;
	s->hold_len[k] = 0;
	size_t emit = len, keep = 0;
	uint8_t *m = memmem(buf, len, s->prefix, s->prefix_len);
	size_t whole = s->prefix_len + 4; /* three status digits and the closing \x1e */
	if (m) {
		emit = (size_t)(m - buf);
		if (len - emit >= whole) {
			s->marked[k] = true;
			if (k == OUT)
				s->status = (m[s->prefix_len] - '0') * 100 +
				            (m[s->prefix_len + 1] - '0') * 10 +
				            (m[s->prefix_len + 2] - '0');
		} else {
			keep = len - emit;
		}
	} else {
		/* Hold back a tail that may be the start of the marker. */
		for (size_t l = s->prefix_len - 1 < len ? s->prefix_len - 1 : len; l > 0; l--)
			if (memcmp(buf + len - l, s->prefix, l) == 0) {
				keep = l;
				emit = len - l;
				break;
			}
	}
	if (keep) {
		memcpy(s->hold[k], buf + emit, keep);
		s->hold_len[k] = keep;
	}
	if (emit && r) {
		r->credit -= (int64_t)emit;
		*(k == OUT ? &r->out_total : &r->err_total) += emit;
		aks__agent_frame_data(&r->c->out, type, 0, r->id, buf, emit);
	}
}

static void pump(pysession *s, int k)
{
	int *fd = k == OUT ? &s->p.out : &s->p.err;
	static uint8_t chunk[AKS_AGENT_CHUNK];
	size_t want = sizeof(chunk);
	if (s->run && s->run->credit < (int64_t)want)
		want = s->run->credit > 0 ? (size_t)s->run->credit : 1;
	ssize_t n = read(*fd, chunk, want);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		close(*fd);
		*fd = -1;
		return;
	}
	if ((s->run || s->draining) && !s->marked[k])
		feed(s, k, chunk, (size_t)n);
	/* else: output between runs (a background thread) belongs to no request */
}

static void pump_cmd(pysession *s)
{
	ssize_t n = write(s->p.in, s->cmd + s->cmd_off, s->cmd_len - s->cmd_off);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n < 0) {
		s->cmd_off = s->cmd_len; /* the interpreter is gone; its death ends the run */
	} else {
		s->cmd_off += (size_t)n;
	}
	if (s->cmd_off == s->cmd_len) {
		free(s->cmd);
		s->cmd = NULL;
		s->cmd_len = s->cmd_off = 0;
	}
}

static void lower_timeout(int64_t at, int64_t now, int *timeout)
{
	if (at && (*timeout < 0 || at - now < *timeout))
		*timeout = (int)(at > now ? at - now : 0);
}

/* Waiting runs past their deadline end without having run. */
static void expire_waiting(pysession *s, int64_t now, int *timeout)
{
	for (req *r = s->queue, *next; r; r = next) {
		next = r->queue_next;
		if (!r->deadline)
			continue;
		if (now < r->deadline) {
			lower_timeout(r->deadline, now, timeout);
			continue;
		}
		r->timed_out = true;
		end_waiting(s, r, 0,
		            "the Python session was busy with another host's run until the "
		            "deadline: this code did not run");
	}
}

size_t pysession_add_fds(agent *a, struct pollfd *pfd, size_t max, int64_t now, int *timeout)
{
	size_t n = 0;
	for (pysession *s = a->sessions; s; s = s->next) {
		for (int i = 0; i < 4; i++)
			s->idx[i] = -1;
		expire_waiting(s, now, timeout);
		if (!s->alive)
			continue;
		req *r = s->run;
		if ((r && r->deadline) || s->draining) {
			int64_t at = s->interrupted ? s->kill_at : (r ? r->deadline : 0);
			if (at && now >= at) {
				if (!s->interrupted) {
					s->interrupted = true;
					r->timed_out = true;
					s->kill_at = now + AKS_PY_KILL_GRACE_MS;
					proc_signal(&s->p, SIGINT);
					at = s->kill_at;
				} else {
					proc_signal(&s->p, SIGKILL);
					s->kill_at = at = 0;
				}
			}
			lower_timeout(at, now, timeout);
		}
		bool room = !r || aks__agent_buf_pending(&r->c->out) < AGENT_OUT_SOFT;
		bool take = !r || (r->credit > 0 && room);
		int fds[4] = {s->p.out, s->p.err, s->cmd ? s->p.in : -1, s->p.status};
		short ev[4] = {POLLIN, POLLIN, POLLOUT, POLLIN};
		for (int i = 0; i < 4 && n < max; i++) {
			if (fds[i] < 0 || (i < 2 && !take))
				continue;
			pfd[n].fd = fds[i];
			pfd[n].events = ev[i];
			pfd[n].revents = 0;
			s->idx[i] = (int)n++;
		}
	}
	return n;
}

void pysession_events(agent *a, struct pollfd *pfd, size_t n)
{
	(void)n;
	for (pysession *s = a->sessions; s; s = s->next) {
		if (!s->alive)
			continue;
		if (s->idx[0] >= 0 && pfd[s->idx[0]].revents)
			pump(s, OUT);
		if (s->idx[1] >= 0 && pfd[s->idx[1]].revents)
			pump(s, ERR);
		if (s->idx[2] >= 0 && pfd[s->idx[2]].revents && s->cmd)
			pump_cmd(s);
		if (s->idx[3] >= 0 && pfd[s->idx[3]].revents)
			proc_read_status(&s->p);
		req *r = s->run;
		if ((r || s->draining) && s->marked[OUT] && s->marked[ERR]) {
			if (r)
				agent_send_exit(r, s->status, 0,
				                s->restarted ? "the Python session was restarted: "
				                               "variables and imports from earlier "
				                               "runs are gone"
				                             : NULL);
			s->restarted = false;
			s->run = NULL;
			s->draining = false;
			if (r)
				agent_free_req(r);
			next_run(s);
			continue;
		}
		bool dead = s->p.out < 0 && s->p.err < 0 && (s->p.have_status || s->p.status < 0);
		if (!dead)
			continue;
		/* The interpreter is gone (killed, or the code ended the process). */
		if (r) {
			int st = s->p.wstatus;
			int code = s->p.have_status && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
			int sig = s->p.have_status && WIFSIGNALED(st) ? WTERMSIG(st) : 0;
			agent_send_exit(
			    r, code, sig,
			    "the Python session ended: the next run starts a new interpreter");
			s->run = NULL;
			agent_free_req(r);
		}
		s->draining = false;
		proc_release(&s->p);
		session_stop(s);
		s->restarted = true;
		next_run(s);
	}
}

void pysession_close_all(agent *a)
{
	while (a->sessions) {
		pysession *s = a->sessions;
		a->sessions = s->next;
		session_stop(s);
		free(s->name);
		free(s);
	}
}
