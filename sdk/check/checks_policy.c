/*
 * sdk/check/checks_policy.c - what the provider declares, proved from inside a sandbox.
 *
 * A declaration is only a promise: for each policy dimension the instance declares, a
 * sandbox is made with that policy and a program in it tries to break it, the way an
 * attacker's code would. Each probe has a control: the same program in a sandbox without
 * the policy must succeed, or nothing was proved (the machine cannot show it, or the
 * provider runs no program) and the check says NOT VERIFIED, never passed. A dimension the
 * instance does not declare is a pass with nothing to prove: the host refuses such
 * policies for it (core/config/settings.c).
 *
 * The probes are Python (every provider runs it: execute_python). Each prints one line
 * whose start is split in the source ('rea' 'ched='), so that a provider echoing the
 * source back is not mistaken for one that ran it.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

/* The seconds a probe's program gets. */
#define PROBE_TIMEOUT 60

static const aks_capabilities *caps(void)
{
	return aks_provider_get_capabilities(aks_check_need_provider());
}

/* A new sandbox made with `policy` (NULL: the default), tracked. */
static aks_sandbox *create_with(const aks_policy *policy, const char *what)
{
	aks_sandbox *sb = NULL;
	aks_error *err = NULL;
	aks_call call;
	char label[256];

	aks_call_init(&call, AKS_CHECK_CALL_TIMEOUT, policy, NULL, NULL);
	int rc = aks_provider_create(aks_check_need_provider(), &call, &sb, &err);
	snprintf(label, sizeof(label), "create (%s)", what);
	aks_check_expect(label, rc, AKS_OK, err);
	if (!sb)
		aks_check_fail("%s returned AKS_OK but no sandbox", label);
	aks_check_track(sb);
	return sb;
}

/* Runs `code` (python) in sb; returns its result (kept), which may be one of a program
 * that failed or was killed. */
static aks_result *run(aks_sandbox *sb, const char *code, const aks_policy *policy)
{
	aks_result *r = NULL;
	aks_error *err = NULL;
	aks_call call;

	aks_call_init(&call, PROBE_TIMEOUT, policy, NULL, NULL);
	int rc = aks_sandbox_execute_code(sb, code, "python", &call, &r, &err);
	aks_check_keep(r);
	aks_check_expect("execute_code(a policy probe)", rc, AKS_OK, err);
	if (!r)
		aks_check_fail("execute_code returned AKS_OK without a result");
	return r;
}

/* The value after `key` on the probe's line ("" when absent), into buf. */
static const char *probe_value(const aks_result *r, const char *key, char *buf, size_t size)
{
	size_t len = 0;
	const char *out = aks_result_get_stdout(r, &len);
	buf[0] = '\0';
	const char *at = out ? strstr(out, key) : NULL;
	if (!at)
		return NULL;
	at += strlen(key);
	size_t n = strcspn(at, " \n");
	snprintf(buf, size, "%.*s", (int)n, at);
	return buf;
}

static const char *err_of(const aks_result *r)
{
	const char *e = aks_result_get_stderr(r, NULL);
	return e ? e : "";
}

/* ---- network: egress deny ------------------------------------------------------------ */

#define MAX_ADDRS 8

/* A TCP listener on every IPv4 address of this machine, and those addresses: the places a
 * sandbox on this machine could reach, whatever its network (the loopback for a process
 * on the host, a bridge's address for a container). */
struct listener {
	int fd;
	int port;
	char addrs[MAX_ADDRS][INET_ADDRSTRLEN];
	size_t n_addrs;
};

static void listener_open(struct listener *l)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
	socklen_t len = sizeof(sa);
	l->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (l->fd < 0 || bind(l->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(l->fd, 64) != 0 || getsockname(l->fd, (struct sockaddr *)&sa, &len) != 0)
		aks_check_fail("cannot open the probe's listener: %s", strerror(errno));
	l->port = ntohs(sa.sin_port);
	struct ifaddrs *all = NULL;
	if (getifaddrs(&all) != 0)
		aks_check_fail("getifaddrs: %s", strerror(errno));
	for (struct ifaddrs *i = all; i && l->n_addrs < MAX_ADDRS; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
			continue;
		struct sockaddr_in *in = (struct sockaddr_in *)i->ifa_addr;
		inet_ntop(AF_INET, &in->sin_addr, l->addrs[l->n_addrs], INET_ADDRSTRLEN);
		l->n_addrs++;
	}
	freeifaddrs(all);
}

/* Accepts (and closes) what has connected so far; returns how many. */
static int listener_drain(struct listener *l)
{
	int n = 0, c;
	while ((c = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
		close(c);
		n++;
	}
	return n;
}

/* The program: connect to each address (2 s each), print those that answered: directly
 * ("direct=") and in all ("reached="), through the egress proxy too when the sandbox has one
 * (http_proxy: an HTTP CONNECT that the proxy answers 200 reached the address), and why the
 * proxy did not let the last address through ("proxy="). The proxy gets 30 s: behind it the
 * host decides and connects, and a host under valgrind on a loaded machine is slow. Written
 * into code (a fixed buffer: a failed check jumps out and frees nothing). */
static void network_probe(const struct listener *l, char *code, size_t size)
{
	char list[MAX_ADDRS * (INET_ADDRSTRLEN + 3) + 1] = "";
	for (size_t i = 0; i < l->n_addrs; i++) {
		strcat(list, "'");
		strcat(list, l->addrs[i]);
		strcat(list, "',");
	}
	int n =
	    snprintf(code, size,
	             "import os, socket\n"
	             "hits, direct, why = [], [], '-'\n"
	             "proxy = os.environ.get('http_proxy', '').rsplit(':', 1)\n"
	             "for a in [%s]:\n"
	             "    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
	             "    s.settimeout(2)\n"
	             "    try:\n"
	             "        s.connect((a, %d))\n"
	             "        hits.append(a)\n"
	             "        direct.append(a)\n"
	             "    except OSError:\n"
	             "        pass\n"
	             "    finally:\n"
	             "        s.close()\n"
	             "    if a in hits or len(proxy) != 2 or not proxy[1].isdigit():\n"
	             "        continue\n"
	             "    try:\n"
	             "        s = socket.create_connection(('127.0.0.1', int(proxy[1])), 30)\n"
	             "        s.sendall(('CONNECT %%s:%d HTTP/1.1\\r\\n\\r\\n' %% a).encode())\n"
	             "        status = s.recv(64).split(b' ')[1:2]\n"
	             "        if status == [b'200']:\n"
	             "            hits.append(a)\n"
	             "        else:\n"
	             "            why = b''.join(status).decode() or 'no-answer'\n"
	             "        s.close()\n"
	             "    except (OSError, IndexError) as e:\n"
	             "        why = type(e).__name__\n"
	             "print('rea' 'ched=' + (','.join(hits) or '-') + ' dir' 'ect=' + "
	             "(','.join(direct) or '-') + ' pro' 'xy=' + why)\n",
	             list, l->port, l->port);
	if (n < 0 || (size_t)n >= size)
		aks_check_fail("the network probe does not fit its buffer (%d bytes)", n);
}

/*
 * The allowlist, when declared: the first address the control reached, as a /32, must
 * still be reached, and no other. Needs a control that reached two addresses (the
 * loopback and another, for a process on the host).
 */
static void allowlist_holds(struct listener *l, const char *code, const char *control)
{
	char first[INET_ADDRSTRLEN + 1], seen[512], entry[INET_ADDRSTRLEN + 4];
	size_t n = strcspn(control, ",");
	if (!control[n] || n >= sizeof(first)) {
		aks_check_note(
		    "NOT VERIFIED: policy_network: allowlist: without a policy the probe "
		    "reached one address only (%s), so there is none to refuse beside "
		    "the allowed one",
		    control);
		return;
	}
	snprintf(first, sizeof(first), "%.*s", (int)n, control);
	snprintf(entry, sizeof(entry), "%s/32", first);
	const char *allow[] = {entry, NULL};
	aks_policy list;
	aks_policy_init(&list);
	list.network_egress = AKS_EGRESS_ALLOWLIST;
	list.network_allow = allow;
	list.strict = true;
	aks_result *r = run(create_with(&list, "network_egress: allowlist"), code, &list);
	listener_drain(l);
	const char *reached = probe_value(r, "reached=", seen, sizeof(seen));
	if (!reached)
		aks_check_fail("the probe under network_allow: [%s] printed no line (exit %d): %s",
		               entry, aks_result_get_exit_code(r), err_of(r));
	/* Through the proxy only: a program that connects by itself must find no network. */
	char direct[512];
	if (caps()->struct_size >= offsetof(aks_capabilities, egress_proxy) + sizeof(bool) &&
	    caps()->egress_proxy && probe_value(r, "direct=", direct, sizeof(direct)) &&
	    strcmp(direct, "-") != 0)
		aks_check_fail("declares egress_proxy, but under network_allow: [%s] the sandbox "
		               "connected to %s without the proxy",
		               entry, direct);
	char why[64];
	if (strcmp(reached, first) != 0)
		aks_check_fail("declares policy_network_allowlist, but under network_allow: [%s] "
		               "the sandbox reached %s (of %s without the policy; the proxy's "
		               "last answer: %s)",
		               entry, strcmp(reached, "-") == 0 ? "nothing" : reached, control,
		               probe_value(r, "proxy=", why, sizeof(why)) ? why : "-");
}

void aks_check_policy_network(void)
{
	if (!caps()->policy_network) {
		aks_check_note("policy_network: not declared, nothing to prove\n");
		return;
	}
	/* Static: a check that fails jumps out, and the next run closes what it left open. */
	static struct listener l = {.fd = -1};
	if (l.fd >= 0)
		close(l.fd);
	l = (struct listener){.fd = -1};
	listener_open(&l);
	char code[4096];
	network_probe(&l, code, sizeof(code));
	char seen[512];
	aks_policy deny;
	aks_policy_init(&deny);
	deny.network_egress = AKS_EGRESS_DENY;
	deny.strict = true;

	/* The control: without the policy, something must answer. */
	aks_result *r = run(create_with(NULL, "the default policy"), code, NULL);
	int control_accepts = listener_drain(&l);
	const char *reached = probe_value(r, "reached=", seen, sizeof(seen));
	if (!reached || strcmp(reached, "-") == 0 || control_accepts == 0) {
		aks_check_note(
		    "NOT VERIFIED: policy_network: without a policy the probe reached none "
		    "of this machine's addresses (%s), so a refusal would prove nothing\n",
		    reached ? reached : "it printed no probe line");
		aks_check_skip();
	}
	char control[512];
	snprintf(control, sizeof(control), "%s", reached);
	r = run(create_with(&deny, "network_egress: deny"), code, &deny);
	int deny_accepts = listener_drain(&l);
	reached = probe_value(r, "reached=", seen, sizeof(seen));
	if (deny_accepts > 0 || (reached && strcmp(reached, "-") != 0)) {
		aks_check_fail("declares policy_network, but a sandbox under network_egress: deny "
		               "connected to this machine (%s; %d connection(s) accepted)",
		               reached ? reached : "?", deny_accepts);
	}
	if (!reached) {
		aks_check_fail("the probe under network_egress: deny printed no line (exit %d): %s",
		               aks_result_get_exit_code(r), err_of(r));
	}
	if (caps()->policy_network_allowlist)
		allowlist_holds(&l, code, control);
	close(l.fd);
	l.fd = -1;
}

/* ---- resources: memory and cpu ------------------------------------------------------- */

/* 256 MiB, every page written (bytes * n is a memset), against a limit of 64. */
static const char memory_probe[] = "b = b'\\x01' * (256 << 20)\n"
                                   "print('allo' 'cated=%d' % len(b))\n";

/*
 * A busy loop for half a second (five periods of the kernel's CPU bandwidth control),
 * counting its rounds: the work it got done per second of wall time. The work, not the
 * program's own CPU clock, is what a limit takes away, and it is the
 * one measure every sandbox reports alike: gVisor's Sentry keeps its own accounting, in
 * which a throttled task still seems to run (0.85 of a core under cpu: 0.5, while the
 * host's cgroup gave it half). The program's CPU share is printed too, to tell a machine
 * too busy to measure on.
 */
static const char cpu_probe[] =
    "import time\n"
    "t0 = time.monotonic(); c0 = time.process_time(); n = 0\n"
    "while True:\n"
    "    for _ in range(10000):\n"
    "        pass\n"
    "    n += 1\n"
    "    t = time.monotonic() - t0\n"
    "    if t >= 0.5:\n"
    "        break\n"
    "print('wo' 'rk=%.1f share=%.3f' % (n / t,\n"
    "                                  (time.process_time() - c0) / t))\n";

/* Rounds of limited and unlimited loops, taken in turn: at least CPU_ROUNDS, and up to
 * CPU_MAX_ROUNDS until an unlimited run had a free core. */
#define CPU_ROUNDS     2
#define CPU_MAX_ROUNDS 6
/* Above this share of the unlimited work under cpu: 0.5, the limit did not hold. */
#define CPU_LIE_RATIO 0.8
/* A limited program whose own clock says at most this share of a core was held to its
 * limit, whatever work it did; one whose clock says more than CPU_PLAIN_LIE_SHARE was not. */
#define CPU_HELD_SHARE      0.6
#define CPU_PLAIN_LIE_SHARE 0.9
/* A run during which tasks of this machine waited for a CPU longer than this share of its
 * time was not on a free core (Linux's pressure stall information). */
#define CPU_QUIET_STALL 0.1
/* Without that information: unlimited runs further apart than this (the best over the
 * worst) mean the machine's load changed while measuring. */
#define CPU_STEADY_SPREAD 1.25
/* A limited run during which the machine's CPUs were idle for at least this many cores'
 * worth of its time had room: a program held back by nothing but other tasks would have
 * taken it, so little work then is the limit's doing. */
#define CPU_ROOM 0.5

typedef struct cpu_samples {
	double best, best_share;       /* the unlimited runs' best work, and its CPU share */
	double worst;                  /* the unlimited runs' worst work */
	double limited, limited_share; /* the limited runs' best work, and its CPU share */
	bool psi;                      /* the machine reports CPU pressure */
	bool quiet_free;               /* an unlimited run had a free core */
	bool limited_room;             /* a limited run had idle CPUs to take (CPU_ROOM) */
} cpu_samples;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Microseconds that some task of this machine has spent waiting for a CPU since boot
 * (/proc/pressure/cpu's "some" total), or -1 without pressure stall information. */
static double cpu_stall_us(void)
{
	FILE *f = fopen("/proc/pressure/cpu", "re");
	if (!f)
		return -1;
	char line[256];
	double total = -1;
	while (fgets(line, sizeof(line), f)) {
		const char *t = strstr(line, "total=");
		if (strncmp(line, "some ", 5) == 0 && t)
			total = strtod(t + 6, NULL);
	}
	fclose(f);
	return total;
}

/* Seconds the machine's CPUs have been idle since boot, all of them together (/proc/stat's
 * idle and iowait), or -1 when it cannot be read. */
static double cpu_idle_s(void)
{
	FILE *f = fopen("/proc/stat", "re");
	if (!f)
		return -1;
	unsigned long long user, nice, sys, idle, iowait;
	int n = fscanf(f, "cpu %llu %llu %llu %llu %llu", &user, &nice, &sys, &idle, &iowait);
	fclose(f);
	long hz = sysconf(_SC_CLK_TCK);
	return n == 5 && hz > 0 ? (double)(idle + iowait) / (double)hz : -1;
}

/* One more run of the cpu probe in sb, under `limited` or without a policy, into s. */
static void cpu_sample(aks_sandbox *sb, const aks_policy *limited, cpu_samples *s)
{
	char v[64];
	double stall0 = cpu_stall_us(), idle0 = cpu_idle_s(), t0 = now_s();
	aks_result *r = run(sb, cpu_probe, limited);
	double stall1 = cpu_stall_us(), idle1 = cpu_idle_s(), wall = now_s() - t0;
	if (!probe_value(r, "work=", v, sizeof(v)))
		aks_check_fail("the cpu probe%s printed no line (exit %d): %s",
		               limited ? " under cpu: 0.5" : "", aks_result_get_exit_code(r),
		               err_of(r));
	double work = atof(v);
	double share = probe_value(r, "share=", v, sizeof(v)) ? atof(v) : 0;
	s->psi = stall0 >= 0 && stall1 >= 0;
	if (limited) {
		/* Whether a limited run had a free core cannot be told from the pressure (the
		 * throttling of its own cgroup counts as waiting for a CPU); idle CPUs through
		 * the run say it had room to do more. */
		s->limited_room |= idle0 < 0 || idle1 < 0 || idle1 - idle0 >= CPU_ROOM * wall;
		if (work > s->limited) {
			s->limited = work;
			s->limited_share = share;
		}
		return;
	}
	if (work > s->best) {
		s->best = work;
		s->best_share = share;
	}
	if (s->worst == 0 || work < s->worst)
		s->worst = work;
	s->quiet_free |= !s->psi || (stall1 - stall0) / 1e6 < CPU_QUIET_STALL * wall;
}

/*
 * The cpu half: the best of a few limited loops against the best of the unlimited ones
 * taken between them. A limit caps every limited run at half of what a free core does,
 * whatever else the machine is doing, and an unlimited run on a free core does what a
 * free core does. So the verdict needs one unlimited run on a free core (the machine's
 * CPU pressure says whether there was one; more rounds are taken, up to CPU_MAX_ROUNDS,
 * until one comes). Where the kernel keeps no pressure information, the unlimited runs
 * must agree among themselves instead. A busy loop without a limit must also get most of
 * a core by its own clock, and a limit is said to hold only when a limited run had idle
 * CPUs beside it (CPU_ROOM): held back on a busy machine, a program without any limit
 * does half the work too. Otherwise nothing was proved either way: returns false for
 * NOT VERIFIED. Writes what the provider got away with to lie.
 */
static bool cpu_limit_holds(aks_sandbox *free_sb, aks_sandbox *sb, const aks_policy *limited,
                            char *lie, size_t lie_size)
{
	cpu_samples s = {0};
	cpu_sample(free_sb, NULL, &s);
	for (int i = 0; i < CPU_MAX_ROUNDS; i++) {
		cpu_sample(sb, limited, &s);
		cpu_sample(free_sb, NULL, &s);
		/* What looks like a lie is measured again: one more unlimited run on a free
		 * core can only raise the best, and a provider without a limit stays caught. */
		bool looks_lied = s.limited > CPU_LIE_RATIO * s.best;
		/* ... unless the limited program's own clock already says it had a whole core. */
		bool plain_lie = looks_lied && s.limited_share > CPU_PLAIN_LIE_SHARE;
		/* ... and what looks held must have been held with room to do more (a busy
		 * machine holds back a program no limit holds), and not by a slower CPU while
		 * its own clock says it had a whole core (a busy sibling hyperthread). */
		bool plain_held =
		    !looks_lied && s.limited_room && s.limited_share <= CPU_PLAIN_LIE_SHARE;
		if (i + 1 >= CPU_ROUNDS && s.quiet_free && s.best_share >= 0.8 &&
		    (looks_lied ? plain_lie : plain_held))
			break;
	}
	/* Without a limit a busy loop must get most of a core, or the machine is too busy
	 * to tell half a core apart. */
	if (s.best_share < 0.8) {
		aks_check_note("NOT VERIFIED: policy_resources: cpu: without a policy a busy "
		               "loop got at best %.2f of a core: the machine is too busy to "
		               "measure cpu: 0.5 on",
		               s.best_share);
		return false;
	}
	double ratio = s.limited / s.best;
	bool lied = ratio > CPU_LIE_RATIO;
	if (!s.quiet_free) {
		aks_check_note("NOT VERIFIED: policy_resources: cpu: other tasks waited for a CPU "
		               "during every unlimited run: the machine is too busy to measure "
		               "cpu: 0.5 on");
		return false;
	}
	if (!lied && !s.limited_room) {
		aks_check_note("NOT VERIFIED: policy_resources: cpu: a busy loop under cpu: 0.5 "
		               "never had an idle CPU beside it to take: the machine is too busy "
		               "to measure cpu: 0.5 on");
		return false;
	}
	if (!lied && s.limited_share > CPU_PLAIN_LIE_SHARE) {
		aks_check_note("NOT VERIFIED: policy_resources: cpu: a busy loop under cpu: 0.5 "
		               "did %.2f of the work it does without the policy, but its own "
		               "clock says %.2f of a core: the machine is too busy to measure "
		               "cpu: 0.5 on (the CPU was slower during the limited runs)",
		               ratio, s.limited_share);
		return false;
	}
	if (!lied) {
		aks_check_note("policy_resources: cpu: a busy loop under cpu: 0.5 did %.2f of the "
		               "work it does without the policy (its own clock says %.2f of a "
		               "core)",
		               ratio, s.limited_share);
		return true;
	}
	if (!s.psi && s.best > CPU_STEADY_SPREAD * s.worst) {
		aks_check_note("NOT VERIFIED: policy_resources: cpu: without a policy a busy "
		               "loop did from %.0f to %.0f rounds a second: the machine is too "
		               "busy to measure cpu: 0.5 on",
		               s.worst, s.best);
		return false;
	}
	/* The kernel's own account of the limited program's CPU time settles a work ratio
	 * that only a slower CPU during the unlimited runs explains (a sibling hyperthread
	 * or a neighbour busy then): a runtime may count more than the program got (gVisor,
	 * above), never less. */
	if (s.limited_share <= CPU_HELD_SHARE) {
		aks_check_note("NOT VERIFIED: policy_resources: cpu: a busy loop under cpu: 0.5 "
		               "did %.2f of the work it does without the policy, but its own "
		               "clock says %.2f of a core: the machine is too busy to measure "
		               "cpu: 0.5 on (the CPU was slower during the unlimited runs)",
		               ratio, s.limited_share);
		return false;
	}
	snprintf(lie, lie_size,
	         "a busy loop under cpu: 0.5 did %.2f of the work it does without the "
	         "policy (its own clock says %.2f of a core)",
	         ratio, s.limited_share);
	return true;
}

void aks_check_policy_resources(void)
{
	if (!caps()->policy_resources) {
		aks_check_note("policy_resources: not declared, nothing to prove\n");
		return;
	}
	char v[64];
	aks_sandbox *free_sb = create_with(NULL, "the default policy");
	aks_result *r = run(free_sb, memory_probe, NULL);
	bool memory_control = probe_value(r, "allocated=", v, sizeof(v)) != NULL;

	aks_policy limited;
	aks_policy_init(&limited);
	limited.memory_mb = 64;
	limited.cpu = 0.5;
	limited.strict = true;
	char cpu_lie[256] = "", memory_lie[128] = "";
	/* A provider whose backend sizes sandboxes more coarsely (whole cores, whole GiB) may
	 * refuse these limits under strict rather than loosen them: failing closed is honest,
	 * and proves nothing either way. */
	aks_sandbox *sb = NULL;
	aks_error *refused = NULL;
	aks_call limited_call;
	aks_call_init(&limited_call, AKS_CHECK_CALL_TIMEOUT, &limited, NULL, NULL);
	int created = aks_provider_create(aks_check_need_provider(), &limited_call, &sb, &refused);
	if (created == AKS_EPOLICY) {
		aks_check_note("NOT VERIFIED: policy_resources: memory_mb: 64, cpu: 0.5 refused "
		               "under strict (%s)\n",
		               aks_error_message(refused));
		aks_error_free(refused);
		aks_check_skip();
	}
	aks_check_expect("create (memory_mb: 64, cpu: 0.5)", created, AKS_OK, refused);
	if (!sb)
		aks_check_fail("create (memory_mb: 64, cpu: 0.5) returned AKS_OK but no sandbox");
	aks_check_track(sb);
	/* The cpu probe first: the memory probe may take the whole sandbox down with it. */
	bool cpu_verified = cpu_limit_holds(free_sb, sb, &limited, cpu_lie, sizeof(cpu_lie));
	if (memory_control) {
		/* A provider whose limit stops the whole sandbox (gVisor's) answers with an
		 * error rather than a killed program: either way nothing was allocated. */
		aks_result *mr = NULL;
		aks_error *err = NULL;
		aks_call call;
		aks_call_init(&call, PROBE_TIMEOUT, &limited, NULL, NULL);
		int rc = aks_sandbox_execute_code(sb, memory_probe, "python", &call, &mr, &err);
		aks_check_keep(mr);
		aks_error_free(err);
		if (rc == AKS_OK && mr && probe_value(mr, "allocated=", v, sizeof(v)))
			snprintf(memory_lie, sizeof(memory_lie),
			         "a program under memory_mb: 64 allocated and wrote 256 MiB");
	} else {
		aks_check_note("NOT VERIFIED: policy_resources: memory: without a policy the "
		               "probe could not allocate 256 MiB either\n");
	}
	if (cpu_lie[0] || memory_lie[0])
		aks_check_fail("declares policy_resources, but %s%s%s", cpu_lie,
		               cpu_lie[0] && memory_lie[0] ? "; and " : "", memory_lie);
	/* Either half unmeasured and no lie found: not proved, whatever the other half says. */
	if (!memory_control || !cpu_verified)
		aks_check_skip();
}

/* ---- filesystem: writes outside fs_allow_write, reads outside fs_allow_read ----------- */

/* What the runner plants in a file of this machine, outside anything a policy allows. */
#define PLANTED "aks-check-planted"

/* Both probes start with `planted = '<path>'`, a file of this machine that the program
 * must not read under fs_allow_read. */
static const char can_read_planted[] = "def can_read(p):\n"
                                       "    try:\n"
                                       "        with open(p) as f:\n"
                                       "            return f.read() == '" PLANTED "'\n"
                                       "    except OSError:\n"
                                       "        return False\n";

/* Where the program starts (its working directory), and whether it sees the planted file
 * without a policy (so a pass says which it was). */
static const char cwd_probe[] = "import os\n"
                                "print('cw' 'd=' + os.getcwd() + ' seen=%s' % "
                                "can_read(planted))\n";

/*
 * Under fs_allow_write: [its working directory], the program must be able to write there
 * and nowhere of the system's own places (nor the directory above its own, nor the shared
 * scratch places a sandbox could pass data through, /dev/shm and /dev/mqueue among them).
 * Each attempt creates a new file and removes it at once. /dev itself is not probed: a
 * root-owned in-memory tmpfs that two runtimes cannot make read-only and keep their device
 * nodes (gVisor's, a Kubernetes pod's), which their providers document as what is left.
 * Under fs_allow_read: [its working directory] too, it must not read the planted file.
 */
static const char fs_probe[] =
    "import os\n"
    "def can_write(d):\n"
    "    p = os.path.join(d, '.aks-check-%d' % os.getpid())\n"
    "    try:\n"
    "        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)\n"
    "    except OSError:\n"
    "        return False\n"
    "    os.close(fd)\n"
    "    os.unlink(p)\n"
    "    return True\n"
    "cwd = os.path.realpath(os.getcwd())\n"
    "places = ['/', '/etc', '/usr', '/bin', '/var', '/opt', '/srv', '/root', '/home',\n"
    "          '/tmp', '/var/tmp', '/dev/shm', '/dev/mqueue', '/sys/fs/cgroup',\n"
    "          os.path.dirname(cwd)]\n"
    "def inside(d):\n"
    "    d = os.path.realpath(d)\n"
    "    return d == cwd or d.startswith(cwd + '/')\n"
    "out = [d for d in places if os.path.isdir(d) and not inside(d) and can_write(d)]\n"
    "print('ho' 'me=%s outside=%s read=%s' % (can_write(cwd), ','.join(out) or '-',\n"
    "                                       can_read(planted)))\n";

/* `probe` preceded by the planted file's name and can_read(), in buf. */
static const char *with_planted(char *buf, size_t size, const char *planted, const char *probe)
{
	int n = snprintf(buf, size, "planted = '%s'\n%s%s", planted, can_read_planted, probe);
	if (n < 0 || (size_t)n >= size)
		aks_check_fail("internal: a filesystem probe does not fit in %zu bytes", size);
	return buf;
}

void aks_check_policy_filesystem(void)
{
	if (!caps()->policy_filesystem) {
		aks_check_note("policy_filesystem: not declared, nothing to prove\n");
		return;
	}
	char cwd[1024], v[1024], code[4096];
	const char *planted = aks_check_plant(PLANTED);
	aks_result *r = run(create_with(NULL, "the default policy"),
	                    with_planted(code, sizeof(code), planted, cwd_probe), NULL);
	if (!probe_value(r, "cwd=", cwd, sizeof(cwd)) || cwd[0] != '/' || !cwd[1]) {
		aks_check_note("NOT VERIFIED: policy_filesystem: the probe printed no working "
		               "directory other than / (%s), so there is no allowed path to set "
		               "apart from the rest\n",
		               cwd[0] ? cwd : "no line");
		aks_check_skip();
	}
	bool seen_without_policy = probe_value(r, "seen=", v, sizeof(v)) && !strcmp(v, "True");
	const char *allowed[] = {cwd, NULL};
	aks_policy fs;
	aks_policy_init(&fs);
	fs.fs_allow_write = allowed;
	fs.fs_allow_read = allowed;
	fs.strict = true;
	r = run(create_with(&fs, "fs_allow_read and fs_allow_write: [its working directory]"),
	        with_planted(code, sizeof(code), planted, fs_probe), &fs);
	if (!probe_value(r, "home=", v, sizeof(v)))
		aks_check_fail("the filesystem probe printed no line (exit %d): %s",
		               aks_result_get_exit_code(r), err_of(r));
	if (strcmp(v, "True") != 0)
		aks_check_fail("under fs_allow_write: [%s] the program cannot write in %s", cwd,
		               cwd);
	char outside[1024];
	probe_value(r, "outside=", outside, sizeof(outside));
	bool read = probe_value(r, "read=", v, sizeof(v)) && !strcmp(v, "True");
	if (strcmp(outside, "-") != 0 && read)
		aks_check_fail("declares policy_filesystem, but under fs_allow_write: [%s] the "
		               "program wrote in %s, and under fs_allow_read: [%s] it read %s",
		               cwd, outside, cwd, planted);
	if (strcmp(outside, "-") != 0)
		aks_check_fail(
		    "declares policy_filesystem, but under fs_allow_write: [%s] the program "
		    "wrote in %s",
		    cwd, outside);
	if (read)
		aks_check_fail("declares policy_filesystem, but under fs_allow_read: [%s] the "
		               "program read %s, a file of this machine outside it",
		               cwd, planted);
	aks_check_note("policy_filesystem: %s\n",
	               seen_without_policy
	                   ? "a file of this machine the default policy lets the program "
	                     "read is out of its reach under fs_allow_read"
	                   : "the program sees no file of this machine, with or without "
	                     "fs_allow_read");
}

/* ---- stateful: interpreter state across calls ----------------------------------------- */

/* State belongs to the sandbox, not to a handle (nor to the host process holding one): with
 * attach, a handle attached after the first was closed finds it too. */
static void stateful_after_attach(aks_sandbox *sb)
{
	if (!caps()->attach)
		return;
	const char *id = aks_check_keep_id(aks_sandbox_get_id(sb));
	aks_check_close(sb);
	aks_sandbox *again = NULL;
	aks_error *err = NULL;
	int rc = aks_check_attach(id, &again, &err);
	aks_check_expect("attach after close", rc, AKS_OK, err);
	char v[64];
	aks_result *r = run(again, "print('sta' 'te=%d' % (aks_check_state + 2))\n", NULL);
	if (!probe_value(r, "state=", v, sizeof(v)) || strcmp(v, "43") != 0)
		aks_check_fail(
		    "declares stateful, but a name set in a sandbox is gone for a handle "
		    "attached to it after the first was closed (exit %d): %s; state "
		    "must belong to the sandbox, not to a handle or a host process",
		    aks_result_get_exit_code(r), err_of(r));
	aks_check_close(again);
}

void aks_check_stateful(void)
{
	if (!caps()->stateful) {
		aks_check_note("stateful: not declared, nothing to prove\n");
		return;
	}
	char v[64];
	aks_sandbox *sb = create_with(NULL, "the default policy");
	run(sb, "aks_check_state = 41\n", NULL);
	aks_result *r = run(sb, "print('sta' 'te=%d' % (aks_check_state + 1))\n", NULL);
	if (probe_value(r, "state=", v, sizeof(v)) && strcmp(v, "42") == 0) {
		stateful_after_attach(sb);
		return;
	}
	size_t len = 0;
	const char *out = aks_result_get_stdout(r, &len);
	if (aks_result_get_exit_code(r) == 0 && out && strstr(out, "'sta' 'te=")) {
		aks_check_note("NOT VERIFIED: stateful: the provider echoed the program back, "
		               "so it runs no interpreter whose state could be checked\n");
		aks_check_skip();
	}
	aks_check_fail("declares stateful, but a name set in one call is gone in the next "
	               "(exit %d): %s",
	               aks_result_get_exit_code(r), err_of(r));
}
