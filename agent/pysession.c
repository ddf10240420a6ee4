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

int pysession_run(agent *a, req *r, const char *name, const char *src)
{
	pysession *s = a->sessions;
	int count = 0;
	for (; s && strcmp(s->name, name) != 0; s = s->next)
		count++;
	if (!s) {
		if (count >= MAX_SESSIONS) {
			agent_send_error(a, r->id, AKS_AGENT_SPAWN, AKS_AGENT_E_LIMIT,
			                 "more than %d Python sessions", MAX_SESSIONS);
			return -1;
		}
		s = calloc(1, sizeof(*s));
		if (!s || !(s->name = strdup(name))) {
			free(s);
			agent_send_error(a, r->id, AKS_AGENT_SPAWN, AKS_AGENT_E_LIMIT,
			                 "out of memory");
			return -1;
		}
		s->p.ctl = s->p.status = s->p.in = s->p.out = s->p.err = -1;
		s->next = a->sessions;
		a->sessions = s;
	}
	if (s->run) {
		agent_send_error(a, r->id, AKS_AGENT_SPAWN, AKS_AGENT_E_BUSY,
		                 "the Python session '%s' is running request %u", name, s->run->id);
		return -1;
	}
	char msg[300];
	if (!s->alive && session_start(s, msg, sizeof(msg)) < 0) {
		agent_send_error(a, r->id, AKS_AGENT_SPAWN, AKS_AGENT_E_SPAWN,
		                 "cannot start the Python session: %s", msg);
		return -1;
	}
	size_t len = strlen(src);
	char nonce[24];
	snprintf(nonce, sizeof(nonce), "%08x%08llx", (unsigned)getpid() ^ (unsigned)agent_now_ms(),
	         ++nonce_counter);
	s->cmd = malloc(len + 64);
	if (!s->cmd) {
		agent_send_error(a, r->id, AKS_AGENT_SPAWN, AKS_AGENT_E_LIMIT, "out of memory");
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

void pysession_kill(pysession *s, int sig)
{
	if (s->alive)
		proc_signal(&s->p, sig);
}

/* Sends bytes of a run's stream, stripping the end marker and noting it. */
static void feed(agent *a, pysession *s, int k, const uint8_t *data, size_t n)
{
	req *r = s->run;
	uint8_t type = k == OUT ? AKS_AGENT_STDOUT : AKS_AGENT_STDERR;
	uint64_t *total = k == OUT ? &r->out_total : &r->err_total;
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
	if (emit) {
		r->credit -= (int64_t)emit;
		*total += emit;
		aks__agent_frame_data(&a->out, type, 0, r->id, buf, emit);
	}
}

static void pump(agent *a, pysession *s, int k)
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
	if (s->run && !s->marked[k])
		feed(a, s, k, chunk, (size_t)n);
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

size_t pysession_add_fds(agent *a, struct pollfd *pfd, size_t max, int64_t now, int *timeout)
{
	size_t n = 0;
	bool room = aks__agent_buf_pending(&a->out) < AGENT_OUT_SOFT;
	for (pysession *s = a->sessions; s; s = s->next) {
		for (int i = 0; i < 4; i++)
			s->idx[i] = -1;
		if (!s->alive)
			continue;
		req *r = s->run;
		if (r && r->deadline) {
			int64_t at = s->interrupted ? s->kill_at : r->deadline;
			if (now >= at) {
				if (!s->interrupted) {
					s->interrupted = true;
					r->timed_out = true;
					s->kill_at = now + AKS_PY_KILL_GRACE_MS;
					proc_signal(&s->p, SIGINT);
					at = s->kill_at;
				} else {
					proc_signal(&s->p, SIGKILL);
					at = 0;
				}
			}
			if (at && (*timeout < 0 || at - now < *timeout))
				*timeout = (int)(at - now);
		}
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
			pump(a, s, OUT);
		if (s->idx[1] >= 0 && pfd[s->idx[1]].revents)
			pump(a, s, ERR);
		if (s->idx[2] >= 0 && pfd[s->idx[2]].revents && s->cmd)
			pump_cmd(s);
		if (s->idx[3] >= 0 && pfd[s->idx[3]].revents)
			proc_read_status(&s->p);
		req *r = s->run;
		if (r && s->marked[OUT] && s->marked[ERR]) {
			agent_send_exit(a, r, s->status, 0,
			                s->restarted
			                    ? "the Python session was restarted: variables "
			                      "and imports from earlier runs are gone"
			                    : NULL);
			s->restarted = false;
			s->run = NULL;
			agent_free_req(r);
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
			    a, r, code, sig,
			    "the Python session ended: the next run starts a new interpreter");
			s->run = NULL;
			agent_free_req(r);
		}
		proc_release(&s->p);
		session_stop(s);
		s->restarted = true;
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
