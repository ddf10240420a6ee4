/*
 * agent/resident.c - --resident NAME: the host's end of a resident agent
 * (docs/agent-protocol.md, "Resident agents").
 *
 * A provider that can start a program in a sandbox but not keep it past the host process
 * that started it (docker exec, kubernetes exec) runs `aksandbox-agent --resident NAME`
 * once per host connection. It connects to the agent resident in the sandbox under NAME,
 * an abstract unix socket of the sandbox's network namespace, starting that agent first
 * when none listens, and relays the protocol's bytes between its stdio and the socket.
 * The resident agent keeps the Python sessions (and the egress proxy's port) for the
 * sandbox's life, so a second host process finds the first one's state.
 *
 * Starting is race-free: bind() on the name is the lock. The relay that binds it forks the
 * resident agent (twice, in a session of its own, so it outlives the exec that started it)
 * with the bound socket, and connects like any other; one that loses the race connects
 * to the winner's. The agent itself calls listen(), so the socket's peer credentials are its
 * own, and a relay serves only an agent of its own user.
 */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RESIDENT_PREFIX "aksandbox-agent/"
/* How long a relay keeps trying while another one is starting the agent. */
#define RESIDENT_START_MS 5000
#define RELAY_BUF         (64 * 1024)

/* The socket's address: a NUL, then RESIDENT_PREFIX NAME (no NUL: abstract names are
 * counted, not terminated). -1 when NAME is empty, too long or not printable. */
static int resident_address(const char *name, struct sockaddr_un *sa, socklen_t *len)
{
	size_t n = strlen(name), pre = sizeof(RESIDENT_PREFIX) - 1;
	if (n == 0 || 1 + pre + n > sizeof(sa->sun_path))
		return -1;
	for (size_t i = 0; i < n; i++)
		if (name[i] <= ' ' || name[i] > '~')
			return -1;
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path + 1, RESIDENT_PREFIX, pre);
	memcpy(sa->sun_path + 1 + pre, name, n);
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + pre + n);
	return 0;
}

static int try_connect(const struct sockaddr_un *sa, socklen_t len)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (const struct sockaddr *)sa, len) == 0)
		return fd;
	int e = errno;
	close(fd);
	errno = e;
	return -1;
}

/* Binds the name and forks the resident agent onto it (state_mark: agent_run's). 0 when it
 * was started (or another relay holds the name: connect again), -1 with errno on a real
 * failure. */
static int start_resident(const struct sockaddr_un *sa, socklen_t len, const char *state_mark)
{
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		return -1;
	if (bind(lfd, (const struct sockaddr *)sa, len) < 0) {
		int e = errno;
		close(lfd);
		if (e == EADDRINUSE)
			return 0; /* someone else is starting it */
		errno = e;
		return -1;
	}
	pid_t mid = fork();
	if (mid < 0) {
		int e = errno;
		close(lfd);
		errno = e;
		return -1;
	}
	if (mid == 0) {
		/* Out of the exec's session and process group, then once more, so the agent is
		 * nobody's child here and no signal for the exec reaches it. */
		setsid();
		pid_t pid = fork();
		if (pid != 0)
			_exit(pid < 0 ? 1 : 0);
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
			dup2(null, 2);
			if (null > 2)
				close(null);
		}
		/* Until this listen(), relays are refused and try again; from it on, the
		 * socket's credentials are this process's, which relays check. */
		if (listen(lfd, 64) < 0)
			_exit(1);
		/* The working directory stays the exec's (the workspace): a Python session
		 * starts there, as with an agent on stdio. */
		_exit(agent_run(lfd, state_mark));
	}
	close(lfd);
	int st;
	while (waitpid(mid, &st, 0) < 0 && errno == EINTR)
		;
	return 0;
}

/* What listens under the name must run as this user: a program of another user that took
 * the name (after the agent died, say) would read the host's requests and answer them. Not
 * "this program" too: the agent is not dumpable (agent_run), so its /proc/PID/exe is closed
 * to a relay without CAP_SYS_PTRACE, and a program of the agent's own user is the sandbox's
 * code, which the agent serves anyway. 0, or -1 said on stderr. */
static int check_agent(int sock, const char *name)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		fprintf(stderr, "aksandbox-agent: --resident %s: cannot tell who listens: %s\n",
		        name, strerror(errno));
		return -1;
	}
	if (cred.uid != getuid()) {
		fprintf(stderr,
		        "aksandbox-agent: --resident %s: what listens there (pid %ld) runs as uid "
		        "%lu, not %lu: refused\n",
		        name, (long)cred.pid, (unsigned long)cred.uid, (unsigned long)getuid());
		return -1;
	}
	return 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Copies both ways until the host's input ends (the socket's write side is then shut and
 * the agent's answers drained) or the agent goes. */
static int relay(int sock)
{
	static uint8_t up[RELAY_BUF], down[RELAY_BUF];
	size_t up_len = 0, up_off = 0, down_len = 0, down_off = 0;
	bool in_eof = false, sock_eof = false, shut = false;
	signal(SIGPIPE, SIG_IGN);
	for (;;) {
		if (in_eof && up_off == up_len && !shut) {
			shutdown(sock, SHUT_WR);
			shut = true;
		}
		if (sock_eof && down_off == down_len)
			return 0;
		struct pollfd pfd[4];
		int n = 0, i_in = -1, i_sr = -1, i_sw = -1, i_out = -1;
		if (!in_eof && up_len == 0)
			pfd[i_in = n++] = (struct pollfd){.fd = 0, .events = POLLIN};
		if (up_off < up_len)
			pfd[i_sw = n++] = (struct pollfd){.fd = sock, .events = POLLOUT};
		if (!sock_eof && down_len == 0)
			pfd[i_sr = n++] = (struct pollfd){.fd = sock, .events = POLLIN};
		if (down_off < down_len)
			pfd[i_out = n++] = (struct pollfd){.fd = 1, .events = POLLOUT};
		if (poll(pfd, (nfds_t)n, -1) < 0) {
			if (errno == EINTR)
				continue;
			return 1;
		}
		if (i_in >= 0 && pfd[i_in].revents) {
			ssize_t r = read(0, up, sizeof(up));
			if (r > 0)
				up_len = (size_t)r, up_off = 0;
			else if (r == 0 || (errno != EINTR && errno != EAGAIN))
				in_eof = true;
		}
		if (i_sw >= 0 && pfd[i_sw].revents) {
			ssize_t w = write(sock, up + up_off, up_len - up_off);
			if (w > 0)
				up_off += (size_t)w;
			else if (w < 0 && errno != EINTR && errno != EAGAIN)
				return 1; /* the agent went */
			if (up_off == up_len)
				up_len = up_off = 0;
		}
		if (i_sr >= 0 && pfd[i_sr].revents) {
			ssize_t r = read(sock, down, sizeof(down));
			if (r > 0)
				down_len = (size_t)r, down_off = 0;
			else if (r == 0 || (errno != EINTR && errno != EAGAIN))
				sock_eof = true;
		}
		if (i_out >= 0 && pfd[i_out].revents) {
			ssize_t w = write(1, down + down_off, down_len - down_off);
			if (w > 0)
				down_off += (size_t)w;
			else if (w < 0 && errno != EINTR && errno != EAGAIN)
				return 0; /* the host went: closing the socket tells the agent */
			if (down_off == down_len)
				down_len = down_off = 0;
		}
	}
}

/* DIR/.NAME.python, a slash in NAME made '_': the file through which an agent started here
 * learns that one before it held Python state and is gone (agent_run). NULL without a
 * directory. */
static char *state_mark_path(const char *state_dir, const char *name)
{
	char *path = NULL;
	if (!state_dir || asprintf(&path, "%s/.%s.python", state_dir, name) < 0)
		return NULL;
	for (char *p = path + strlen(state_dir) + 2; *p; p++)
		if (*p == '/')
			*p = '_';
	return path;
}

int resident_relay(const char *name, const char *state_dir)
{
	struct sockaddr_un sa;
	socklen_t len;
	if (resident_address(name, &sa, &len) < 0) {
		fprintf(stderr,
		        "aksandbox-agent: --resident: '%s' is not a name (1 to %zu printable "
		        "characters, no spaces)\n",
		        name, sizeof(sa.sun_path) - sizeof(RESIDENT_PREFIX));
		return 2;
	}
	char *state_mark = state_mark_path(state_dir, name);
	int64_t give_up = now_ms() + RESIDENT_START_MS;
	int sock;
	while ((sock = try_connect(&sa, len)) < 0) {
		int e = errno;
		if (e != ECONNREFUSED && e != ENOENT && e != EAGAIN) {
			fprintf(stderr, "aksandbox-agent: --resident %s: cannot connect: %s\n",
			        name, strerror(e));
			return 1;
		}
		if (start_resident(&sa, len, state_mark) < 0) {
			fprintf(stderr, "aksandbox-agent: --resident %s: cannot start it: %s\n",
			        name, strerror(errno));
			free(state_mark);
			return 1;
		}
		if (now_ms() > give_up) {
			fprintf(stderr, "aksandbox-agent: --resident %s: it does not answer\n",
			        name);
			free(state_mark);
			return 1;
		}
		struct timespec pause = {0, 2 * 1000 * 1000};
		nanosleep(&pause, NULL);
	}
	free(state_mark);
	if (check_agent(sock, name) < 0) {
		close(sock);
		return 1;
	}
	return relay(sock);
}
