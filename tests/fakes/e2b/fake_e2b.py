#!/usr/bin/env python3
# tests/fakes/e2b/fake_e2b.py - a protocol-faithful fake of the E2B service
# (https://e2b.dev) for tests: nothing that talks to it can tell, at the
# wire, that it is not E2B, and its sandboxes really run.
#
#   FAKE_E2B_API_KEY=e2b_... fake_e2b.py [--port-file F] [--record F]
#       [--state DIR] [--envd-version V] [--domain D]
#
# One process, one port on 127.0.0.1 (picked by the kernel; printed as the
# first line of stdout, "listening on http://127.0.0.1:PORT", and written to
# --port-file), serving what E2B serves on several hosts:
#   - the control-plane REST API (the SDK's E2B_API_URL): /v2/sandboxes...;
#   - envd, the agent in each sandbox (E2B_SANDBOX_URL, with the headers
#     E2b-Sandbox-Id and E2b-Sandbox-Port: 49983): Connect RPC (JSON codec)
#     for processes and the filesystem, and GET/POST /files;
#   - the code interpreter (the same URL with E2b-Sandbox-Port: 49999):
#     POST /execute, /contexts;
#   - /_fake/..., the tests' own door: fault injection, a kill behind the
#     client's back, the list of sandboxes.
# A sandbox is a directory tree under --state, seen by its processes through
# bubblewrap as /home/user and /tmp over a read-only host root, in a PID
# namespace of its own (and a network namespace of its own when it may not
# reach the internet). Its processes are started, signalled and its files
# read and written by sandbox_init.py inside that view; code runs in
# interpreter.py processes there. Its timeout is enforced: at the end of it
# the sandbox is killed, as E2B does. Its egress rules (network.allowOut,
# denyOut) are enforced with an iptables chain for a group of its own (see
# "egress rules" below; that needs root and iptables).
#
# Every request is recorded (--record: one JSON line each, the secrets
# redacted). SIGTERM kills every sandbox, removes its tree and its rules,
# and exits.
# README.md beside this file says what is faithful and what is not, and
# which SDK versions it was held to. Python standard library only.
import argparse
import base64
import datetime
import gzip
import hashlib
import hmac
import http.server
import ipaddress
import json
import os
import queue
import re
import secrets
import select
import shutil
import signal
import socket
import string
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ENVD_PORT, JUPYTER_PORT = 49983, 49999
CLIENT_ID = "6532622b"  # E2B's constant (deprecated) clientID
DEFAULT_TIMEOUT_S = 300  # NewSandboxV2.timeout's default
SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MAX_DGRAM = 64 << 10  # sandbox_init.py's limit; bigger messages go through a pipe
# How sandbox_init.py and interpreter.py start: their source is the first line
# of their stdin (JSON), read unbuffered, so that ps in a sandbox stays readable.
BOOT = "import json, sys; exec(json.loads(sys.stdin.buffer.raw.readline()))"

# Connect error codes and the HTTP statuses a unary error travels with.
CONNECT_HTTP = {"canceled": 499, "unknown": 500, "invalid_argument": 400,
                "deadline_exceeded": 504, "not_found": 404, "already_exists": 409,
                "permission_denied": 403, "resource_exhausted": 429,
                "failed_precondition": 400, "aborted": 409, "out_of_range": 400,
                "unimplemented": 501, "internal": 500, "unavailable": 503,
                "data_loss": 500, "unauthenticated": 401}
# sandbox_init.py's error kinds as Connect codes.
KIND_CODE = {"not_found": "not_found", "exists": "already_exists", "not_dir": "invalid_argument",
             "is_dir": "invalid_argument", "invalid": "invalid_argument", "internal": "internal"}
# syscall.Signal.String() of Go, for an EndEvent's status ("signal: killed").
GO_SIGNALS = {1: "hangup", 2: "interrupt", 3: "quit", 6: "aborted", 9: "killed",
              11: "segmentation fault", 13: "broken pipe", 14: "alarm clock", 15: "terminated"}
REDACTED_HEADERS = {"x-api-key", "x-access-token", "e2b-traffic-access-token"}


def now_rfc3339(t=None):
    """A time as Go's encoding/json writes it (RFC 3339, UTC)."""
    dt = datetime.datetime.fromtimestamp(time.time() if t is None else t, datetime.timezone.utc)
    return dt.isoformat().replace("+00:00", "Z")


def sandbox_python():
    """A Python the sandbox can see: /home and /tmp are the sandbox's own."""
    exe = os.path.realpath(sys.executable)
    if not exe.startswith(("/home/", "/tmp/")):
        return exe
    return shutil.which("python3", path=SANDBOX_PATH) or "python3"


class Dropped(Exception):
    """A fault closed the connection mid-answer: nothing more to send."""


class Gone(Exception):
    """The sandbox was killed while a request was being served."""


# ---- the record of requests and the faults tests inject --------------------

class Recorder:
    """One JSON line per request, flushed at once, secrets redacted."""

    def __init__(self, path):
        self.f = open(path, "a", buffering=1) if path else None
        self.lock = threading.Lock()

    def record(self, entry):
        if self.f:
            with self.lock:
                self.f.write(json.dumps(entry) + "\n")


class Faults:
    """Faults the tests queue with POST /_fake/faults. Each one matches
    requests by path_prefix (and method, target: api|envd|jupyter, when
    given) and applies to the next `count` of them (default 1, 0: all):
    status (+ message, retry_after, body), delay_ms, drop_after_bytes,
    malformed."""

    KEYS = {"path_prefix", "method", "target", "count", "status", "message", "retry_after",
            "body", "delay_ms", "drop_after_bytes", "malformed"}

    def __init__(self):
        self.lock = threading.Lock()
        self.faults = []

    def add(self, fault):
        unknown = set(fault) - self.KEYS
        if unknown:
            raise ValueError(f"unknown fault keys: {sorted(unknown)}")
        fault = dict(fault, count=int(fault.get("count", 1)))
        with self.lock:
            self.faults.append(fault)

    def take(self, method, path, target):
        with self.lock:
            for f in self.faults:
                if (path.startswith(f.get("path_prefix", "/"))
                        and f.get("method", method).upper() == method
                        and f.get("target", target) == target):
                    if f["count"] > 0:
                        f["count"] -= 1
                        if f["count"] == 0:
                            self.faults.remove(f)
                    return f
        return None

    def clear(self):
        with self.lock:
            self.faults = []

    def list(self):
        with self.lock:
            return [dict(f) for f in self.faults]


# ---- the agent inside a sandbox ---------------------------------------------

class Init:
    """sandbox_init.py in its bubblewrap, and the socket to it. Requests
    come from any thread; one reader thread hands each reply to the thread
    that waits for it and each exit event to on_exit; on_dead is called if
    the agent dies of itself (a sandbox whose VM died is gone). gid, when
    given, is the sandbox's own group (see Firewall): a supplementary group
    of the agent, so of everything it starts."""

    SOURCE = open(os.path.join(HERE, "sandbox_init.py")).read()

    def __init__(self, argv, on_exit, on_dead, spawn, tag, gid=None):
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock, self.on_exit, self.on_dead = mine, on_exit, on_dead
        self.send_lock, self.lock = threading.Lock(), threading.Lock()
        self.pending, self.next_id, self.dead, self.killed = {}, 1, False, False
        self.ready = threading.Event()
        # tag (the sandbox's tree) only marks the process, for tests to find it
        cmd = argv + [sandbox_python(), "-c", BOOT, str(theirs.fileno()), tag]
        # bwrap dies with the thread that started it (--die-with-parent is
        # PR_SET_PDEATHSIG): spawn() starts it from a thread that lives as
        # long as the fake, not from this request's thread.
        self.proc = spawn(lambda: subprocess.Popen(
            cmd, pass_fds=[theirs.fileno()], stdin=subprocess.PIPE, start_new_session=True,
            extra_groups=None if gid is None else [gid]))
        theirs.close()
        try:
            self.proc.stdin.write((json.dumps(self.SOURCE) + "\n").encode())
            self.proc.stdin.close()
        except OSError:  # it died at once: the wait below says so
            pass
        threading.Thread(target=self._read, daemon=True).start()
        if not self.ready.wait(15) or self.dead:
            self.kill()
            raise RuntimeError("the sandbox's agent did not start (is bubblewrap usable here?)")

    def _receive(self):
        data, fds, _, _ = socket.recv_fds(self.sock, MAX_DGRAM, 9)
        if not data:
            return None, []
        msg = json.loads(data)
        if msg.get("via_fd"):
            with open(fds.pop(0), "rb") as f:
                msg = json.loads(f.read())
        return msg, fds

    def _read(self):
        while True:
            try:
                msg, fds = self._receive()
            except OSError:
                msg, fds = None, []
            if msg is None:
                break
            if "id" in msg:
                with self.lock:
                    waiter = self.pending.pop(msg["id"], None)
                if waiter:
                    waiter.append((msg, fds))
                    waiter[0].set()
                else:
                    for fd in fds:
                        os.close(fd)
            elif msg.get("event") == "ready":
                self.ready.set()
            elif msg.get("event") == "exit":
                self.on_exit(msg["pid"], msg["status"])
        with self.lock:  # the agent is gone: nobody will answer
            self.dead = True
            for waiter in self.pending.values():
                waiter[0].set()
            self.pending.clear()
        self.ready.set()  # a start that failed fails now
        if not self.killed:
            threading.Thread(target=self.on_dead, daemon=True).start()

    def request(self, op, pass_fds=(), timeout=60, **args):
        """Run op in the sandbox, handing it pass_fds; (reply, fds received).
        Raises Gone if the sandbox died."""
        waiter = [threading.Event()]
        with self.lock:
            if self.dead:
                raise Gone()
            rid, self.next_id = self.next_id, self.next_id + 1
            self.pending[rid] = waiter
        data = json.dumps(dict(args, id=rid, op=op)).encode()
        with self.send_lock:
            try:
                if len(data) <= MAX_DGRAM:
                    socket.send_fds(self.sock, [data], list(pass_fds))
                else:  # see sandbox_init.py's send()
                    r, w = os.pipe2(os.O_CLOEXEC)
                    socket.send_fds(self.sock, [b'{"via_fd": true}'], [r] + list(pass_fds))
                    os.close(r)
                    with open(w, "wb") as f:
                        f.write(data)
            except OSError:
                raise Gone()
        if not waiter[0].wait(timeout) or len(waiter) < 2:
            raise Gone()
        return waiter[1]

    def kill(self):
        """The bubblewrap process group: the PID namespace goes with it."""
        self.killed = True
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()


# ---- processes, as envd keeps them ------------------------------------------

def end_event(status):
    """envd's EndEvent for a wait status, as Go's os.ProcessState has it."""
    if os.WIFEXITED(status):
        code = os.WEXITSTATUS(status)
        end = {"exited": True, "status": f"exit status {code}"}
        if code:
            end.update(exitCode=code, error=end["status"])
        return end
    sig = os.WTERMSIG(status)
    text = f"signal: {GO_SIGNALS.get(sig, f'signal {sig}')}"
    return {"exitCode": -1, "status": text, "error": text}


class Proc:
    """A command started through process.Process/Start: its output as the
    ProcessEvent list every stream of it reads from (Start from the first,
    Connect from the moment it joins), its exit, its deadline."""

    def __init__(self, sandbox, pid, config, tag, out_r, err_r, stdin_w, deadline):
        self.sandbox, self.pid, self.config, self.tag = sandbox, pid, config, tag
        self.stdin_w = stdin_w
        self.events, self.ended, self.status, self.cancelled = [], False, None, False
        self.cond = threading.Condition()
        self.wake_r, self.wake_w = os.pipe2(os.O_CLOEXEC)
        self.timer = None
        if deadline:  # envd's process context: the command dies at its deadline
            self.timer = threading.Timer(max(0, deadline - time.monotonic()), self.expire)
            self.timer.daemon = True
            self.timer.start()
        threading.Thread(target=self.pump, args=(out_r, err_r), daemon=True).start()

    def info(self):
        info = {"config": self.config, "pid": self.pid}
        if self.tag is not None:
            info["tag"] = self.tag
        return info

    def wake(self):
        with self.cond:
            self.cond.notify_all()
            if self.wake_w is not None:
                os.write(self.wake_w, b"x")

    def exited(self, status):
        with self.cond:
            self.status = status
        self.wake()

    def cancel_output(self):
        """As envd on SIGKILL/SIGTERM: stop waiting for the output to end."""
        self.cancelled = True
        self.wake()

    def signal(self, sig):
        reply, _ = self.sandbox.init.request("signal", pid=self.pid, signal=sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            self.cancel_output()
        return reply

    def close_stdin(self):
        with self.cond:
            if self.stdin_w is not None:
                os.close(self.stdin_w)
                self.stdin_w = None

    def expire(self):
        if not self.ended:
            try:
                self.signal(signal.SIGKILL)
            except Gone:
                pass

    def pump(self, out_r, err_r):
        streams = {out_r: "stdout", err_r: "stderr"}
        while streams and not self.cancelled and self.sandbox.alive:
            ready, _, _ = select.select(list(streams) + [self.wake_r], [], [])
            for fd in ready:
                if fd == self.wake_r:
                    os.read(fd, 4096)
                    continue
                data = os.read(fd, 32768)
                if not data:
                    del streams[fd]
                    os.close(fd)
                    continue
                with self.cond:
                    self.events.append({"data": {streams[fd]: base64.b64encode(data).decode()}})
                    self.cond.notify_all()
        for fd in streams:
            os.close(fd)
        with self.cond:
            while self.status is None and self.sandbox.alive:
                self.cond.wait(0.5)
            if self.status is not None:
                self.events.append({"end": end_event(self.status)})
            self.ended = True
            self.cond.notify_all()
        if self.timer:
            self.timer.cancel()
        self.close_stdin()
        with self.cond:
            os.close(self.wake_r)
            os.close(self.wake_w)
            self.wake_w = None
        self.sandbox.forget(self)


# ---- code-interpreter contexts -----------------------------------------------

class Context:
    """A code-interpreter context: an interpreter.py process in the sandbox
    (the kernel), one execution at a time."""

    SOURCE = open(os.path.join(HERE, "interpreter.py")).read()

    def __init__(self, sandbox, language, cwd, ctx_id=None):
        self.sandbox, self.language, self.cwd = sandbox, language, cwd
        self.id = ctx_id or str(uuid.uuid4())
        self.lock = threading.Lock()
        self.buf = b""
        in_r, self.req_w = os.pipe2(os.O_CLOEXEC)
        self.out_r, out_w = os.pipe2(os.O_CLOEXEC)
        try:
            reply, _ = sandbox.init.request(
                "spawn", [in_r, out_w, 2], fds=[True, True, True], cwd=cwd, env=sandbox.env("user"),
                argv=[sandbox_python(), "-c", BOOT, cwd, sandbox.root])  # root: a mark, as Init's
        finally:
            os.close(in_r)
            os.close(out_w)
        if "error" in reply:
            os.close(self.req_w)
            os.close(self.out_r)
            raise RuntimeError(reply["error"]["message"])
        self.pid = reply["pid"]
        self.send(self.SOURCE)

    def json(self):
        return {"id": self.id, "language": self.language, "cwd": self.cwd}

    def send(self, request):
        """A line of JSON to the kernel (the first one is its source)."""
        data = (json.dumps(request) + "\n").encode()
        while data:
            data = data[os.write(self.req_w, data):]

    def read_line(self, timeout, client=None):
        """The next output line; None on timeout, b"" at the end, "gone"
        when the client socket (watched while given) has closed."""
        while b"\n" not in self.buf:
            watch = [self.out_r] + ([client] if client else [])
            ready, _, _ = select.select(watch, [], [], timeout)
            if not ready:
                return None
            if client in ready:
                try:
                    if client.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                        return "gone"
                except BlockingIOError:
                    pass
                except OSError:
                    return "gone"
                client = None  # bytes of a next request: nothing to watch for
                continue
            data = os.read(self.out_r, 65536)
            if not data:
                return b""
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return line + b"\n"

    def close(self):
        """Close the pipes (the caller holds self.lock: no execution reads them)."""
        for fd in (self.req_w, self.out_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self.req_w = self.out_r = -1

    def close_later(self):
        """Close once the running execution (if any) has let go."""
        def run():
            with self.lock:
                self.close()
        threading.Thread(target=run, daemon=True).start()


# ---- egress rules: E2B's allowOut/denyOut, enforced with iptables ------------
#
# E2B filters what a sandbox sends out: an allowOut entry (an address, a CIDR
# or a domain name) lets traffic through, a denyOut entry (an address or a
# CIDR) refuses it, allowOut wins, and what neither names goes through.
# allow_internet_access false is denyOut ["0.0.0.0/0"]. A domain is matched
# by E2B's proxy only on HTTP (port 80, the Host header) and TLS (443, SNI),
# and naming one opens DNS. The fake models it with a group per sandbox and
# an iptables chain per sandbox in the host's filter table:
#   - every sandbox on the host's network runs with a group of its own
#     (Service.allocate_gid(): from the fake's pid, so two fakes never share
#     one) as a supplementary group of its processes (files stay root's);
#   - when its rules restrict anything, OUTPUT jumps to its chain for that
#     group (-m owner --gid-owner G --suppl-groups), where an allowed
#     destination RETURNs (the host's own rules still apply to it), a denied
#     one is REJECTed (a TCP reset, an ICMP port unreachable for the rest),
#     and anything else falls through;
#   - a domain is resolved (IPv4) when the rules are set, and its addresses
#     are allowed on TCP ports 80 and 443; the host's name servers are
#     allowed on port 53 then;
#   - 0.0.0.0/0 denies IPv6 too (E2B's sandboxes have no IPv6): an ip6tables
#     chain does for IPv6 what the iptables one does for IPv4.
# Chains are named AKSFAKE-<fake's pid>-<sandbox id's start>: they go when
# their sandbox does, and a fake that starts removes those of fakes that
# died without cleaning up (clean_stale()). A sandbox without internet
# access and nothing allowed gets a network namespace of its own instead:
# no chain, no iptables needed.

ALL_TRAFFIC = "0.0.0.0/0"
CHAIN_PREFIX = "AKSFAKE-"
DOMAIN_PORTS = (80, 443)  # where E2B's proxy can see a name (Host, SNI)
RESOLVE_TIMEOUT_S = 2.0
GID_BASE = 1 << 31  # sandboxes' groups: GID_BASE + (the fake's pid << 8) + n
LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?"
DOMAIN_RE = re.compile(rf"\*|(\*\.)?{LABEL}(\.{LABEL})*\.?")  # "*", "*.a.b", "a.b"; no space, no quote
ERR_DOMAINS_NEED_ALL = ("When specifying allowed domains in allow out, you must include "
                        "'ALL_TRAFFIC' in deny out to block all other traffic.")


class RuleError(ValueError):
    """A network entry E2B's API refuses (400, with E2B's message)."""


class FirewallError(RuntimeError):
    """The rules could not be put in force: the sandbox must not run (500)."""


class Rule:
    """One allowOut/denyOut entry, parsed as E2B's sandbox_network.ParseRule
    does: "8.8.8.8", "10.0.0.0/8", "example.com", "*.example.com", each
    with an optional ":PORT" or ":LOW-HIGH" ("[v6]:PORT" for IPv6)."""

    def __init__(self, entry):
        if not isinstance(entry, str) or not entry.strip():
            raise RuleError(f"invalid entry {entry!r}: empty network rule")
        self.entry = entry.strip()
        host, ports = self.split(self.entry)
        self.ports = self.port_range(ports) if ports else None  # None: all ports
        try:
            self.net = ipaddress.ip_network(host, strict=False)  # Go's ParseCIDR keeps host bits
            self.domain = None
        except ValueError:
            if not DOMAIN_RE.fullmatch(host):
                raise RuleError(f"invalid entry {entry!r}: not an IP, a CIDR or a domain name")
            self.net, self.domain = None, host.rstrip(".").lower()

    @staticmethod
    def split(s):
        """(host, port part or "")."""
        if s.startswith("["):
            host, close, rest = s[1:].partition("]")
            if not close or (rest and not rest.startswith(":")):
                raise RuleError(f"invalid entry {s!r}: malformed brackets")
            return host, rest[1:]
        if s.count(":") != 1:  # none, or IPv6 without brackets: no port
            return s, ""
        return tuple(s.split(":"))

    @staticmethod
    def port_range(text):
        lo, _, hi = text.partition("-")
        try:
            lo, hi = int(lo), int(hi or lo)
        except ValueError:
            raise RuleError(f"invalid port {text!r}")
        if not (0 < lo <= hi <= 65535):
            raise RuleError(f"invalid port range {text!r}")
        return lo, hi

    def all_traffic(self):
        """0.0.0.0/0, on every port."""
        return self.net is not None and self.net.version == 4 and self.net.prefixlen == 0 and self.ports is None

    def unspecified(self):
        """0.0.0.0 or :: as an address, which E2B refuses (0.0.0.0/0 aside)."""
        return self.net is not None and self.entry != ALL_TRAFFIC and self.net.network_address.is_unspecified


class Egress:
    """A sandbox's egress rules, from E2B's fields, validated as E2B's API
    validates them (RuleError: its 400)."""

    def __init__(self, allow_out=None, deny_out=None, internet=None):
        for name, value in (("allowOut", allow_out), ("denyOut", deny_out)):
            if value is not None and not (isinstance(value, list) and all(isinstance(e, str) for e in value)):
                raise RuleError(f'request body has an error: doesn\'t match schema: property "{name}": '
                                'value must be an array of strings')
        self.allow = [Rule(e) for e in allow_out or []]
        self.deny = [Rule(e) for e in deny_out or []]
        for r in self.deny:
            if r.domain is not None or r.unspecified():
                raise RuleError(f"invalid denied CIDR {r.entry}")
        for r in self.allow:
            if r.unspecified():
                raise RuleError(f"invalid allowed address {r.entry}")
        if any(r.domain for r in self.allow) and ALL_TRAFFIC not in (deny_out or []):
            raise RuleError(ERR_DOMAINS_NEED_ALL)
        if internet is False:  # E2B: it replaces the denied list
            self.deny = [Rule(ALL_TRAFFIC)]
        self.resolved = {}  # domain: its IPv4 addresses, when the rules are set

    @classmethod
    def of(cls, network, internet):
        """From a create body's network object and allow_internet_access."""
        if network is not None and not isinstance(network, dict):
            raise RuleError('request body has an error: doesn\'t match schema: property "network": '
                            'value must be an object')
        network = network or {}
        return cls(network.get("allowOut"), network.get("denyOut"), internet)

    def offline(self):
        """Nothing may go out: a network namespace of its own does it."""
        return not self.allow and any(r.all_traffic() for r in self.deny)

    def restricts(self):
        """Whether anything is denied (allowOut alone denies nothing)."""
        return bool(self.deny)


def resolve_ipv4(names, timeout=RESOLVE_TIMEOUT_S):
    """{name: sorted IPv4 addresses} of each name, [] for one that does not
    resolve in time (the lookups run at once; one that hangs is left)."""
    found = {}

    def lookup(name):
        try:
            infos = socket.getaddrinfo(name, None, socket.AF_INET, socket.SOCK_STREAM)
            found[name] = sorted({info[4][0] for info in infos})
        except OSError:
            found[name] = []
    threads = [threading.Thread(target=lookup, args=(n,), daemon=True) for n in set(names)]
    for t in threads:
        t.start()
    end = time.monotonic() + timeout
    for t in threads:
        t.join(max(0, end - time.monotonic()))
    return {n: found.get(n, []) for n in names}


def name_servers():
    """The name servers the sandbox resolves with (it sees the host's
    /etc/resolv.conf), as ip_address objects."""
    servers = []
    try:
        with open("/etc/resolv.conf") as f:
            for line in f:
                words = line.split()
                if len(words) >= 2 and words[0] == "nameserver":
                    try:
                        servers.append(ipaddress.ip_address(words[1].split("%")[0]))
                    except ValueError:
                        pass
    except OSError:
        pass
    return servers


class Family:
    """What differs between IPv4 (iptables) and IPv6 (ip6tables)."""

    def __init__(self, version, tool, reject_other):
        self.version, self.tool, self.restore = version, tool, tool + "-restore"
        self.reject_other = reject_other


FAMILIES = (Family(4, "iptables", "icmp-port-unreachable"),
            Family(6, "ip6tables", "icmp6-port-unreachable"))


def with_ports(match, ports):
    """A match as one rule per protocol E2B's ports apply to: all traffic
    without ports, TCP and UDP to those ports with them."""
    if ports is None:
        return [match]
    span = f"{ports[0]}:{ports[1]}" if ports[0] != ports[1] else str(ports[0])
    return [f"{match} -p {proto} --dport {span}".strip() for proto in ("tcp", "udp")]


def rule_line(chain, match, comment, verdict):
    """One iptables-restore line; comments are built from parsed values
    only (nothing a client sent goes into the line as is)."""
    return " ".join(part for part in (f"-A {chain}", match.strip(), f'-m comment --comment "{comment}"',
                                      f"-j {verdict}") if part)


def chain_rules(chain, family, egress):
    """The body of a sandbox's chain for one IP family, as iptables-restore
    lines; [] when nothing of that family is denied (no chain needed):
    what is established goes on, then what allowOut allows (RETURN: on
    through the host's own rules), then what denyOut denies (REJECT)."""
    denied = [r for r in egress.deny if r.net is not None and r.net.version == family.version]
    if family.version == 6:  # 0.0.0.0/0 is all traffic: IPv6 too
        denied += [r for r in egress.deny if r.entry == ALL_TRAFFIC]
    if not denied:
        return []
    lines = [f"-A {chain} -m conntrack --ctstate RELATED,ESTABLISHED -j RETURN"]
    for r in egress.allow:
        if r.net is not None and r.net.version == family.version:
            lines += [rule_line(chain, m, f"allowOut {r.net}", "RETURN")
                      for m in with_ports(f"-d {r.net}", r.ports)]
    lines += domain_rules(chain, family, egress)
    for r in denied:
        lines += reject_lines(chain, family, r)
    return lines


def reject_lines(chain, family, r):
    """A denyOut entry's REJECTs: TCP gets a reset (as a closed port
    answers: connect() fails at once), the rest an ICMP port unreachable
    (a datagram is not even sent: EPERM); with ports, TCP and UDP to them."""
    dest = "" if r.entry == ALL_TRAFFIC else f"-d {r.net}"
    comment = f"denyOut {r.net}" + (", all of IPv6 too" if r.net.version != family.version else "")
    reset, unreachable = "REJECT --reject-with tcp-reset", f"REJECT --reject-with {family.reject_other}"
    if r.ports is None:
        return [rule_line(chain, f"{dest} -p tcp", comment, reset), rule_line(chain, dest, comment, unreachable)]
    tcp, udp = with_ports(dest, r.ports)
    return [rule_line(chain, tcp, comment, reset), rule_line(chain, udp, comment, unreachable)]


def domain_rules(chain, family, egress):
    """allowOut domains: their (IPv4) addresses on TCP 80 and 443 (those
    of the entry's ports), "*" any address there; then DNS (port 53) to the
    host's name servers, which the sandbox resolves with."""
    domains = [r for r in egress.allow if r.domain is not None]
    if not domains:
        return []
    lines = []
    for r in domains:
        ports = [p for p in DOMAIN_PORTS if r.ports is None or r.ports[0] <= p <= r.ports[1]]
        if not ports or family.version != 4:
            continue
        web = "-p tcp -m multiport --dports " + ",".join(map(str, ports))
        comment = f"allowOut {r.domain}"
        if r.domain == "*":
            lines.append(rule_line(chain, web, comment, "RETURN"))
        for addr in egress.resolved.get(r.domain, []):
            lines.append(rule_line(chain, f"-d {addr}/32 {web}", comment, "RETURN"))
    for server in name_servers():
        if server.version == family.version:
            lines += [rule_line(chain, f"-d {server} -p {proto} --dport 53", "DNS, for allowOut domains", "RETURN")
                      for proto in ("udp", "tcp")]
    return lines


class Firewall:
    """The fake's chains in the host's filter table, one per sandbox that
    has rules (see the top of this section). apply() and remove() keep, per
    sandbox, the set of the IP families whose chain is installed."""

    def __init__(self):
        self.pid = os.getpid()
        self.lock = threading.Lock()

    def chain(self, sid):
        return f"{CHAIN_PREFIX}{self.pid}-{sid[:10]}"  # iptables allows 28 characters

    @staticmethod
    def jump(gid, chain):
        return f"OUTPUT -m owner --gid-owner {gid} --suppl-groups -j {chain}"

    def restore(self, family, lines):
        """Lines applied in one transaction (iptables-restore --noflush)."""
        if shutil.which(family.restore) is None:
            raise FirewallError(f"{family.restore} is not installed, so the fake E2B cannot enforce network rules")
        text = "*filter\n" + "".join(line + "\n" for line in lines) + "COMMIT\n"
        try:
            res = subprocess.run([family.restore, "-w", "--noflush"], input=text, text=True,
                                 capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise FirewallError(f"{family.restore} failed: {e}")
        if res.returncode != 0:
            raise FirewallError(f"{family.restore} failed (exit {res.returncode}): {res.stderr.strip()}")

    def apply(self, sid, gid, egress, installed):
        """Put egress in force for the sandbox's group, replacing what was
        there (per family in one transaction: a chain declared again is
        emptied in it, so nothing passes unfiltered meanwhile). installed,
        the set of the families whose chain is in, is kept up to date as it
        goes; FirewallError if it cannot be done."""
        if gid is None and egress.restricts():
            raise FirewallError("network rules need the fake E2B to run as root (a group per sandbox, iptables)")
        names = {r.domain for r in egress.allow if r.domain is not None and "*" not in r.domain}
        egress.resolved = resolve_ipv4(sorted(names)) if names and egress.restricts() else {}
        chain = self.chain(sid)
        with self.lock:
            for family in FAMILIES:
                body = chain_rules(chain, family, egress)
                if family.version == 6 and not os.path.exists("/proc/net/if_inet6"):
                    body = []  # no IPv6 on this host: nothing to filter
                if body:
                    jump = [] if family.version in installed else [f"-I {self.jump(gid, chain)}"]
                    self.restore(family, [f":{chain} - [0:0]"] + body + jump)
                    installed.add(family.version)
                elif family.version in installed:  # nothing of this family is denied any more
                    self.drop(family, gid, chain)
                    installed.discard(family.version)

    def drop(self, family, gid, chain):
        self.restore(family, [f"-D {self.jump(gid, chain)}", f"-F {chain}", f"-X {chain}"])

    def remove(self, sid, gid, installed):
        """The sandbox's chains go (its processes are dead: nothing is let
        through unfiltered); a failure is logged, never raised."""
        if not installed:
            return
        with self.lock:
            for family in FAMILIES:
                if family.version in installed:
                    try:
                        self.drop(family, gid, self.chain(sid))
                    except FirewallError as e:
                        sys.stderr.write(f"fake-e2b: cannot remove the rules of sandbox {sid}: {e}\n")

    def clean_stale(self):
        """Remove the chains (and their jumps) of fakes that are gone, which
        a fake killed hard leaves; those of live fakes stay."""
        for family in FAMILIES:
            if shutil.which(family.tool) is None:
                continue
            try:
                listing = subprocess.run([family.tool, "-w", "-S"], capture_output=True, text=True,
                                         timeout=30).stdout
            except (OSError, subprocess.TimeoutExpired):
                continue
            chains = re.findall(rf"^-N ({CHAIN_PREFIX}(\d+)-\S+)$", listing, re.M)
            for chain, pid in chains:
                if not self.stale(int(pid)):
                    continue
                jumps = re.findall(rf"^-A (OUTPUT .* -j {re.escape(chain)})$", listing, re.M)
                try:
                    self.restore(family, [f"-D {j}" for j in jumps] + [f"-F {chain}", f"-X {chain}"])
                    sys.stderr.write(f"fake-e2b: removed {chain}, left by a fake that is gone\n")
                except FirewallError:  # another fake cleaned it meanwhile
                    pass

    def stale(self, pid):
        """Whether a chain of that pid's is no live fake's (ours neither: we
        have none yet, so one with our pid is a dead fake's)."""
        if pid == self.pid:
            return True
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                return b"fake_e2b.py" not in f.read()
        except OSError:
            return True


# ---- a sandbox ----------------------------------------------------------------

class Sandbox:
    def __init__(self, service, template, body):
        self.service = service
        self.id = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(20))
        self.template, self.body = template, body
        self.metadata = body.get("metadata") or {}
        self.env_vars = body.get("envVars") or {}
        self.allow_internet = body.get("allow_internet_access")
        self.network = body.get("network")
        egress = Egress.of(self.network, self.allow_internet)  # RuleError: E2B's 400
        # Nothing allowed out: a network namespace of its own. Else the
        # host's network, with a group of its own that its rules (now or
        # after an update) hang on.
        self.own_netns = egress.offline()
        self.gid = None if self.own_netns else service.allocate_gid()
        self.chains = set()  # the IP families whose chain of its is installed
        self.net_lock = threading.Lock()
        self.token = secrets.token_hex(16)
        self.started_at = time.time()
        timeout = body.get("timeout")
        self.end_at = self.started_at + (DEFAULT_TIMEOUT_S if timeout is None else int(timeout))
        self.alive = True
        self.lock = threading.Lock()
        self.procs, self.contexts, self.default_context = {}, {}, None
        self.exits = {}  # pid: wait status of exits that came before their Proc
        self.root = os.path.join(service.state, self.id)
        try:
            # The rules are in force before anything of it runs.
            if not self.own_netns and egress.restricts():
                service.firewall.apply(self.id, self.gid, egress, self.chains)
            for sub, mode in (("home/user", 0o755), ("tmp", 0o1777)):
                os.makedirs(os.path.join(self.root, sub))
                os.chmod(os.path.join(self.root, sub), mode)
            self.init = Init(self.bwrap_argv(), self.on_exit, lambda: service.kill(self.id),
                             service.spawn, self.root, self.gid)
        except BaseException:
            service.firewall.remove(self.id, self.gid, self.chains)
            service.release_gid(self.gid)
            shutil.rmtree(self.root, ignore_errors=True)
            raise

    def offline(self):
        """No network at all: a network namespace of its own."""
        return self.own_netns

    def update_network(self, body):
        """PUT /sandboxes/{id}/network: the egress rules replaced (what the
        body leaves out is cleared, as E2B does). RuleError: E2B's 400;
        FirewallError: they could not be put in force (the old ones stay)."""
        egress = Egress(body.get("allowOut"), body.get("denyOut"), body.get("allow_internet_access"))
        with self.net_lock:
            if not self.alive:
                raise Gone()
            if self.own_netns and not egress.offline():
                raise FirewallError("this sandbox was created without internet access, in a network "
                                    "namespace of its own: the fake E2B cannot give it a network later")
            if not self.own_netns:
                self.service.firewall.apply(self.id, self.gid, egress, self.chains)
            egress_keys = ("allowOut", "denyOut", "rules", "egressProxy")
            network = {k: v for k, v in (self.network or {}).items() if k not in egress_keys}
            network.update((k, body[k]) for k in egress_keys if k in body)
            self.network = network or None
            self.allow_internet = body.get("allow_internet_access")

    def bwrap_argv(self):
        argv = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                "--tmpfs", "/home", "--bind", os.path.join(self.root, "home/user"), "/home/user",
                "--bind", os.path.join(self.root, "tmp"), "/tmp",
                "--unshare-pid", "--unshare-ipc", "--die-with-parent", "--chdir", "/home/user"]
        if self.offline():
            argv.append("--unshare-net")
        if os.geteuid() != 0:
            argv.append("--unshare-user")
        return argv + ["--"]

    def env(self, user, extra=None):
        """A process's environment, as envd builds it: PATH, the user's
        HOME, USER and LOGNAME, the sandbox's envVars, then the request's."""
        home = home_of(user)
        env = {"PATH": SANDBOX_PATH, "HOME": home, "USER": user, "LOGNAME": user}
        env.update(self.env_vars)
        env.update(extra or {})
        return env

    def on_exit(self, pid, status):
        with self.lock:
            proc = self.procs.get(pid)
            if proc is None:  # a quick command: its Proc is not registered yet
                self.exits[pid] = status
        if proc:
            proc.exited(status)

    def register(self, proc):
        with self.lock:
            self.procs[proc.pid] = proc
            status = self.exits.pop(proc.pid, None)
        if status is not None:
            proc.exited(status)

    def forget(self, proc):
        with self.lock:
            if self.procs.get(proc.pid) is proc:
                del self.procs[proc.pid]

    def kill(self):
        """Everything in it dies; its tree goes. Streams of it see the end."""
        with self.lock:
            if not self.alive:
                return
            self.alive = False
            procs, contexts = list(self.procs.values()), list(self.contexts.values())
        self.init.kill()
        with self.net_lock:  # after its processes: nothing of it goes out unfiltered
            self.service.firewall.remove(self.id, self.gid, self.chains)
            self.chains.clear()
        self.service.release_gid(self.gid)
        for proc in procs:
            proc.wake()
        for ctx in contexts:
            ctx.close_later()
        shutil.rmtree(self.root, ignore_errors=True)

    def context(self, ctx_id=None):
        """A context by id, or the default python one (started on first use;
        not under self.lock: the agent's reader thread needs it meanwhile)."""
        with self.lock:
            if ctx_id is not None:
                return self.contexts.get(ctx_id)
            if self.default_context is not None:
                return self.default_context
        ctx = Context(self, "python", "/home/user")
        with self.lock:
            if self.default_context is None:
                self.default_context = ctx
                self.contexts[ctx.id] = ctx
                return ctx
            other = self.default_context
        self.init.request("signal", pid=ctx.pid, signal=signal.SIGKILL)
        ctx.close()
        return other

    # the control plane's views of it

    def json(self):
        """The Sandbox schema: what create and connect answer."""
        return {"alias": self.template, "clientID": CLIENT_ID, "domain": self.service.domain,
                "envdAccessToken": self.token, "envdVersion": self.service.envd_version,
                "sandboxID": self.id, "templateID": self.template, "trafficAccessToken": None}

    def listed(self):
        """The ListedSandbox schema."""
        return {"alias": self.template, "clientID": CLIENT_ID, "cpuCount": 2, "diskSizeMB": 10240,
                "endAt": now_rfc3339(self.end_at), "envdVersion": self.service.envd_version,
                "memoryMB": 512, "metadata": self.metadata, "sandboxID": self.id,
                "startedAt": now_rfc3339(self.started_at), "state": "running",
                "templateID": self.template, "volumeMounts": []}

    def detail(self):
        """The SandboxDetail schema: GET /sandboxes/{id}."""
        d = dict(self.listed(), domain=self.service.domain, envdAccessToken=self.token,
                 lifecycle={"autoResume": False, "onTimeout": "kill"})
        if self.allow_internet is not None:
            d["allowInternetAccess"] = self.allow_internet
        if self.network is not None:
            d["network"] = self.network
        return d


def home_of(user):
    return "/root" if user == "root" else f"/home/{user}"


def resolve(path, user):
    """envd's ExpandAndResolve: ~ and relative paths against the user's home."""
    home = home_of(user)
    if path in ("", "~"):
        return home
    if path.startswith("~/"):
        path = home + path[1:]
    if path.startswith("/"):
        return path
    return os.path.normpath(os.path.join(home, path))


# ---- the service --------------------------------------------------------------

class Service:
    def __init__(self, args, api_key):
        self.api_key, self.state = api_key, args.state
        self.envd_version, self.domain = args.envd_version, args.domain
        self.recorder, self.faults = Recorder(args.record), Faults()
        self.lock = threading.Lock()
        self.sandboxes = {}
        self.firewall = Firewall()
        self.firewall.clean_stale()
        self.gids, self.next_gid = set(), 0
        self.stopping = threading.Event()
        self.spawns = queue.Queue()
        threading.Thread(target=self._spawner, daemon=True).start()
        threading.Thread(target=self._reaper, daemon=True).start()

    def _spawner(self):
        """Starts what must outlive the request that asked for it."""
        while True:
            fn, box = self.spawns.get()
            try:
                box.append(fn())
            except BaseException as e:
                box.append(e)
            box[0].set()

    def spawn(self, fn):
        box = [threading.Event()]
        self.spawns.put((fn, box))
        box[0].wait()
        if isinstance(box[1], BaseException):
            raise box[1]
        return box[1]

    def _reaper(self):
        """E2B's auto-kill: a sandbox whose timeout ran out is killed."""
        while not self.stopping.wait(0.05):
            now = time.time()
            with self.lock:
                expired = [s for s in self.sandboxes.values() if s.end_at <= now]
            for s in expired:
                self.kill(s.id)

    def allocate_gid(self):
        """A group no other sandbox (of this fake or another one) has:
        GID_BASE + (pid << 8) + n, n in 1..255 (None unless root: only root
        may hand out groups)."""
        if os.geteuid() != 0:
            return None
        with self.lock:
            for _ in range(255):
                self.next_gid = self.next_gid % 255 + 1
                gid = GID_BASE + (self.firewall.pid << 8) + self.next_gid
                if gid not in self.gids:
                    self.gids.add(gid)
                    return gid
        raise RuntimeError("more than 255 sandboxes at once on the host's network")

    def release_gid(self, gid):
        with self.lock:
            self.gids.discard(gid)

    def create(self, template, body):
        sbx = Sandbox(self, template, body)
        with self.lock:
            self.sandboxes[sbx.id] = sbx
        return sbx

    def get(self, sid):
        with self.lock:
            return self.sandboxes.get(sid)

    def all(self):
        with self.lock:
            return list(self.sandboxes.values())

    def kill(self, sid):
        with self.lock:
            sbx = self.sandboxes.pop(sid, None)
        if sbx:
            sbx.kill()
        return sbx is not None

    def close(self):
        self.stopping.set()
        for sbx in self.all():
            self.kill(sbx.id)


# ---- HTTP ---------------------------------------------------------------------

def envelope(flags, obj):
    data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return struct.pack(">BI", flags, len(data)) + data


def parse_multipart(body, boundary):
    """(name, filename, bytes) of each part; binary-safe."""
    parts, delim = [], b"--" + boundary
    for chunk in body.split(delim)[1:]:
        if chunk.startswith(b"--"):
            break
        head, _, content = chunk.partition(b"\r\n\r\n")
        if content.endswith(b"\r\n"):
            content = content[:-2]
        disp = ""
        for line in head.decode("utf-8", "replace").split("\r\n"):
            if line.lower().startswith("content-disposition:"):
                disp = line
        name = re.search(r'[; ]name="([^"]*)"', disp)
        filename = re.search(r'filename="([^"]*)"', disp)
        parts.append((name and name.group(1), filename and filename.group(1), content))
    return parts


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-e2b"
    drop_budget = None

    def log_message(self, fmt, *args):
        sys.stderr.write(f"fake-e2b: {self.address_string()} {fmt % args}\n")

    @property
    def service(self):
        return self.server.service

    # -- the request ---------------------------------------------------------

    def read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def json_body(self):
        try:
            return json.loads(self.body or b"{}")
        except ValueError:
            return None

    def route(self):
        """(target, sandbox id, port): admin, api or a sandbox's port, by the
        headers E2B's proxy routes on or, failing them, the host name."""
        if self.path_only.startswith("/_fake/"):
            return "admin", None, None
        sid = self.headers.get("E2b-Sandbox-Id")
        port = self.headers.get("E2b-Sandbox-Port")
        if sid is None and port is None:
            m = re.match(r"^(\d+)-([a-z0-9]+)\.", self.headers.get("Host", ""))
            if m:
                port, sid = m.groups()
        if sid is None and port is None:
            return "api", None, None
        target = {str(ENVD_PORT): "envd", str(JUPYTER_PORT): "jupyter"}.get(port or "", "port")
        return target, sid, port

    def record(self, target):
        headers = {k: ("<redacted>" if k.lower() in REDACTED_HEADERS else v)
                   for k, v in self.headers.items()}
        entry = {"time": now_rfc3339(), "target": target, "method": self.command,
                 "path": self.path_only, "query": self.query, "headers": headers}
        ctype = self.headers.get("Content-Type", "")
        try:
            if ctype.startswith("application/json") and self.body:
                entry["body"] = json.loads(self.body)
            elif ctype.startswith("application/connect+json") and len(self.body) >= 5:
                entry["body"] = json.loads(self.body[5:])
            elif self.body:
                entry["body_bytes"] = len(self.body)
        except ValueError:
            entry["body_bytes"] = len(self.body)
        self.service.recorder.record(entry)

    def handle_any(self):
        url = urllib.parse.urlsplit(self.path)
        self.path_only = url.path
        self.query = {k: v[0] if len(v) == 1 else v
                      for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        self.body = self.read_body()
        target, sid, port = self.route()
        try:
            if target == "admin":
                return self.admin()
            self.record(target)
            fault = self.service.faults.take(self.command, self.path_only, target)
            if fault and self.apply_fault(fault, target):
                return
            if target == "api":
                return self.api()
            return self.sandbox_port(target, sid, port)
        except Dropped:
            pass
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any

    # -- the answer ----------------------------------------------------------

    def write(self, data):
        """Body bytes to the wire, unless a drop_after_bytes fault cuts in."""
        if self.drop_budget is not None and len(data) >= self.drop_budget:
            self.wfile.write(data[:self.drop_budget])
            self.abort()
        if self.drop_budget is not None:
            self.drop_budget -= len(data)
        self.wfile.write(data)

    def abort(self):
        """Close the connection mid-answer (as a dying sandbox would)."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        raise Dropped()

    def send(self, status, body=b"", ctype=None, headers=()):
        if isinstance(body, (dict, list)) or body is None:
            body = json.dumps(body).encode()
            ctype = ctype or "application/json"
        elif isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        if ctype:
            self.send_header("Content-Type", ctype)
        for k, v in headers:
            self.send_header(k, v)
        if status != 204:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and status != 204:
            self.write(body)

    def start_stream(self, ctype=None):
        self.send_response(200)
        if ctype:
            self.send_header("Content-Type", ctype)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def chunk(self, data):
        self.write(b"%x\r\n%s\r\n" % (len(data), data))

    def end_stream(self):
        self.write(b"0\r\n\r\n")

    def api_error(self, status, message, headers=()):
        """The control plane's (and envd's REST) error: {"code", "message"}."""
        self.send(status, {"code": status, "message": message}, headers=headers)

    # -- faults -----------------------------------------------------------------

    def apply_fault(self, fault, target):
        """Apply a fault; True when it answered the request itself."""
        if fault.get("delay_ms"):
            time.sleep(fault["delay_ms"] / 1000)
        if fault.get("drop_after_bytes") is not None:
            self.drop_budget = int(fault["drop_after_bytes"])
        if fault.get("status"):
            status = int(fault["status"])
            headers = [("Retry-After", str(fault["retry_after"]))] if "retry_after" in fault else []
            if "body" in fault:
                body = fault["body"]
                self.send(status, body, ctype=None if isinstance(body, (dict, list)) else "text/plain",
                          headers=headers)
            else:
                self.api_error(status, fault.get("message", f"fake fault: injected {status}"), headers)
            return True
        if fault.get("malformed"):
            ctype = self.headers.get("Content-Type", "")
            if ctype.startswith("application/connect+json"):
                self.start_stream("application/connect+json")
                self.chunk(envelope(0, b'{"event": {"start": '))  # invalid JSON, then EOF
                self.end_stream()
            elif target == "jupyter":
                self.send(200, b"this is not JSON\n")
            else:
                self.send(200, b'{"sandboxID": "', ctype="application/json")
            return True
        return False

    # -- /_fake: the tests' own door ---------------------------------------------

    def admin(self):
        path, method = self.path_only, self.command
        if path == "/_fake/faults":
            if method == "GET":
                return self.send(200, self.service.faults.list())
            if method == "DELETE":
                self.service.faults.clear()
                return self.send(204)
            body = self.json_body()
            try:
                for fault in body if isinstance(body, list) else [body]:
                    self.service.faults.add(fault)
            except (TypeError, ValueError) as e:
                return self.send(400, {"message": str(e)})
            return self.send(201, self.service.faults.list())
        if path == "/_fake/sandboxes" and method == "GET":
            return self.send(200, [{"sandboxID": s.id, "templateID": s.template,
                                    "metadata": s.metadata, "envVars": s.env_vars,
                                    "offline": s.offline(), "endAt": now_rfc3339(s.end_at),
                                    "root": s.root, "initPid": s.init.proc.pid, "gid": s.gid,
                                    "chains": [self.service.firewall.chain(s.id)] if s.chains else [],
                                    "processes": sorted(s.procs)} for s in self.service.all()])
        m = re.fullmatch(r"/_fake/sandboxes/([^/]+)/kill", path)
        if m and method == "POST":
            return self.send(204) if self.service.kill(m.group(1)) else self.send(404, {"message": "no such sandbox"})
        return self.send(404, {"message": "no such fake endpoint"})

    # -- the control plane ---------------------------------------------------------

    def api_auth(self):
        """X-API-Key, as E2B's API checks it (its messages, its 401)."""
        key = self.headers.get("X-API-Key")
        if not key:
            msg = "authorization header is missing"
        elif not key.startswith("e2b_"):
            msg = "authorization header is malformed"
        elif hmac.compare_digest(key, self.service.api_key):
            return True
        else:
            msg = "Invalid API key, please visit https://e2b.dev/docs/api-key for more information."
        self.api_error(401, msg)
        return False

    API_ROUTES = [
        ("POST", r"/v2/sandboxes", "create"),
        ("GET", r"/v2/sandboxes", "list"),
        ("GET", r"/sandboxes", "list"),
        ("GET", r"/sandboxes/([a-z0-9]+)", "get"),
        ("DELETE", r"/sandboxes/([a-z0-9]+)", "kill"),
        ("POST", r"/sandboxes/([a-z0-9]+)/timeout", "timeout"),
        ("POST", r"/v2/sandboxes/([a-z0-9]+)/connect", "connect"),
        ("POST", r"/sandboxes/([a-z0-9]+)/connect", "connect"),
        ("PUT", r"/sandboxes/([a-z0-9]+)/network", "network"),
        # E2B has these; the fake does not model them.
        ("POST", r"/sandboxes", None),
        ("POST", r"/sandboxes/([a-z0-9]+)/(pause|resume|fork|refreshes|snapshots)", None),
        ("GET", r"/sandboxes/([a-z0-9]+)/(metrics|logs)", None),
        ("GET", r"/v2/sandboxes/([a-z0-9]+)/logs", None),
        ("GET", r"/sandboxes/metrics", None),
    ]

    def api(self):
        if self.path_only == "/health" and self.command == "GET":
            return self.send(200, "Health check successful", ctype="text/plain; charset=utf-8")
        for method, pattern, name in self.API_ROUTES:
            m = re.fullmatch(pattern, self.path_only)
            if m and method == self.command:
                if not self.api_auth():
                    return
                if name is None:
                    return self.api_error(501, "not implemented by the fake E2B")
                return getattr(self, "api_" + name)(*m.groups()[:1])
        self.api_error(404, "validation error: no matching operation was found")

    def not_found(self, sid):
        self.api_error(404, f'Sandbox "{sid}" doesn\'t exist or you don\'t have access to it')

    def api_create(self):
        body = self.json_body()
        if not isinstance(body, dict) or not isinstance(body.get("templateID"), str):
            return self.api_error(400, 'request body has an error: doesn\'t match schema: property "templateID" is missing')
        if not isinstance(body.get("timeout", 0), int) or body.get("timeout", 0) < 0:
            return self.api_error(400, 'request body has an error: doesn\'t match schema: property "timeout": value must be an integer')
        try:
            sbx = self.service.create(body["templateID"], body)
        except RuleError as e:
            return self.api_error(400, str(e))
        except (OSError, RuntimeError) as e:  # FirewallError too: never a sandbox unfiltered
            return self.api_error(500, f"failed to create sandbox: {e}")
        self.send(201, sbx.json())

    def api_list(self):
        sandboxes = self.service.all()
        if "metadata" in self.query:
            want = dict(urllib.parse.parse_qsl(self.query["metadata"]))
            want = {urllib.parse.unquote(k): urllib.parse.unquote(v) for k, v in want.items()}
            sandboxes = [s for s in sandboxes if all(s.metadata.get(k) == v for k, v in want.items())]
        states = self.query.get("state", "running")
        if "running" not in (states if isinstance(states, list) else states.split(",")):
            sandboxes = []
        sandboxes.sort(key=lambda s: s.started_at, reverse=self.query.get("order") != "asc")
        self.send(200, [s.listed() for s in sandboxes])

    def api_get(self, sid):
        sbx = self.service.get(sid)
        return self.send(200, sbx.detail()) if sbx else self.not_found(sid)

    def api_kill(self, sid):
        return self.send(204) if self.service.kill(sid) else self.not_found(sid)

    def api_timeout(self, sid):
        sbx, body = self.service.get(sid), self.json_body()
        if not sbx:
            return self.not_found(sid)
        if not isinstance(body, dict) or not isinstance(body.get("timeout"), int):
            return self.api_error(400, 'request body has an error: doesn\'t match schema: property "timeout" is missing')
        sbx.end_at = time.time() + body["timeout"]
        self.send(204)

    def api_network(self, sid):
        """updateNetwork: the egress rules replaced, in force when it answers."""
        sbx, body = self.service.get(sid), self.json_body()
        if not sbx:
            return self.not_found(sid)
        if not isinstance(body, dict):
            return self.api_error(400, "Error when parsing request: the body is not a JSON object")
        try:
            sbx.update_network(body)
        except RuleError as e:
            return self.api_error(400, str(e))
        except FirewallError as e:
            return self.api_error(500, f"failed to update the sandbox's network: {e}")
        except Gone:
            return self.not_found(sid)
        self.send(204)

    def api_connect(self, sid):
        """Connect: running sandboxes only (pause is not modeled); the TTL
        is only ever extended."""
        sbx, body = self.service.get(sid), self.json_body() or {}
        if not sbx:
            return self.not_found(sid)
        sbx.end_at = max(sbx.end_at, time.time() + int(body.get("timeout") or DEFAULT_TIMEOUT_S))
        self.send(200, sbx.json())

    # -- a sandbox's ports, behind E2B's proxy -------------------------------------

    def sandbox_port(self, target, sid, port):
        if not sid or not port:
            missing = "E2b-Sandbox-Id" if not sid else "E2b-Sandbox-Port"
            return self.send(400, f"Missing header: {missing}", ctype="text/plain; charset=utf-8")
        sbx = self.service.get(sid)
        if sbx is None:  # E2B's proxy: the sandbox is not running (any more)
            return self.send(502, {"sandboxId": sid, "message": "The sandbox was not found", "code": 502})
        try:
            if target == "envd":
                return self.envd(sbx)
            if target == "jupyter":
                return self.jupyter(sbx)
            self.send(502, {"sandboxId": sid, "message": "The sandbox is running but port is not open",
                            "port": int(port) if port.isdigit() else 0, "code": 502})
        except Gone:  # killed meanwhile: the connection dies with it
            self.abort()

    # -- envd --------------------------------------------------------------------

    def envd(self, sbx):
        path, method = self.path_only, self.command
        if method + path not in ("GET/health", "GET/files", "POST/files", "POST/init"):
            token = self.headers.get("X-Access-Token", "")
            if not hmac.compare_digest(token, sbx.token):
                return self.api_error(401, "unauthorized access, please provide a valid access token or method signing if supported")
        if method == "GET" and path == "/health":
            return self.send(204, headers=[("Cache-Control", "no-store")])
        if method == "GET" and path == "/envs":
            return self.send(200, sbx.env_vars, headers=[("Cache-Control", "no-store")])
        if path == "/files" and method in ("GET", "POST"):
            return self.files_get(sbx) if method == "GET" else self.files_post(sbx)
        m = re.fullmatch(r"/(process\.Process|filesystem\.Filesystem)/(\w+)", path)
        if m and method == "POST":
            return self.rpc(sbx, m.group(1), m.group(2))
        self.send(404, "404 page not found\n", ctype="text/plain; charset=utf-8")

    def envd_user(self):
        """The user of a request: Basic auth "user:" (RPC) or ?username=."""
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Basic "):
            try:
                return base64.b64decode(auth[6:]).decode().split(":", 1)[0] or "user"
            except ValueError:
                pass
        return self.query.get("username") or "user"

    def signing_error(self, sbx, path, operation):
        """envd's check of /files: the access token in the header, or a
        signature made with it; None when the request may pass."""
        token = self.headers.get("X-Access-Token")
        if token:
            return None if hmac.compare_digest(token, sbx.token) else "access token present in header but does not match"
        signature = self.query.get("signature")
        if not signature:
            return "missing signature query parameter"
        raw = f"{path}:{operation}:{self.query.get('username', '')}:{sbx.token}"
        expiration = self.query.get("signature_expiration")
        if expiration:
            raw += f":{expiration}"
        expected = "v1_" + base64.b64encode(hashlib.sha256(raw.encode()).digest()).decode().rstrip("=")
        if not hmac.compare_digest(expected, signature):
            return "invalid signature"
        if expiration and int(expiration) < time.time():
            return "signature is already expired"
        return None

    def check_user(self, user):
        if user not in ("user", "root"):
            self.api_error(401, f"error looking up user '{user}': user: unknown user {user}")
            return False
        return True

    def files_get(self, sbx):
        raw_path = self.query.get("path", "")
        err = self.signing_error(sbx, raw_path, "read")
        if err:
            return self.api_error(401, err)
        user = self.envd_user()
        if not self.check_user(user):
            return
        path = resolve(raw_path, user)
        reply, fds = sbx.init.request("open", path=path, mode="r")
        if "error" in reply:
            kind = reply["error"]["kind"]
            if kind == "not_found":
                return self.api_error(404, f"path '{path}' does not exist")
            if kind == "is_dir":
                return self.api_error(400, f"path '{path}' is a directory")
            return self.api_error(500, reply["error"]["message"])
        with open(fds[0], "rb") as f:
            data = f.read()
        headers = [("Content-Disposition", f'inline; filename="{os.path.basename(path)}"'),
                   ("Last-Modified", time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(reply["mtime_ns"] / 1e9))),
                   ("Vary", "Accept-Encoding")]
        if self.wants_gzip():  # envd compresses whenever the client accepts gzip
            return self.send(200, gzip.compress(data), ctype="application/octet-stream",
                             headers=headers + [("Content-Encoding", "gzip")])
        self.send(200, data, ctype="application/octet-stream", headers=headers + [("Accept-Ranges", "bytes")])

    def wants_gzip(self):
        best = None
        for item in self.headers.get("Accept-Encoding", "").split(","):
            name, _, params = item.strip().partition(";")
            q = 1.0
            m = re.search(r"q=([0-9.]+)", params)
            if m:
                q = float(m.group(1))
            if name.lower() in ("gzip", "identity", "*") and q > 0 and (best is None or q > best[1]):
                best = (name.lower(), q)
        return best is not None and best[0] == "gzip"

    def files_post(self, sbx):
        raw_path = self.query.get("path")
        err = self.signing_error(sbx, raw_path or "", "write")
        if err:
            return self.api_error(401, err)
        user = self.envd_user()
        if not self.check_user(user):
            return
        body = self.body
        encoding = self.headers.get("Content-Encoding", "identity").lower()
        if encoding == "gzip":
            try:
                body = gzip.decompress(body)
            except (OSError, EOFError) as e:
                return self.api_error(400, f"error decompressing request body: {e}")
        elif encoding != "identity":
            return self.api_error(400, f"error decompressing request body: unsupported Content-Encoding: {encoding}, supported: [gzip]")
        ctype = self.headers.get("Content-Type", "")
        media = ctype.split(";")[0].strip().lower()
        if media == "application/octet-stream":
            if raw_path is None:
                return self.api_error(400, "path query parameter is required for raw body upload")
            files = [(resolve(raw_path, user), body)]
        elif media.startswith("multipart/"):
            m = re.search(r'boundary="?([^";]+)"?', ctype)
            if not m:
                return self.api_error(500, "error parsing multipart form: no multipart boundary param in Content-Type")
            files = [(resolve(raw_path if raw_path is not None else fname or "", user), content)
                     for name, fname, content in parse_multipart(body, m.group(1).encode()) if name == "file"]
        else:
            return self.api_error(400, f"unsupported content type: {ctype}, expected multipart/form-data or application/octet-stream")
        written = []
        for path, content in files:
            reply, fds = sbx.init.request("open", path=path, mode="w")
            if "error" in reply:
                status = 400 if reply["error"]["kind"] == "is_dir" else 500
                return self.api_error(status, reply["error"]["message"])
            with open(fds[0], "wb") as f:
                f.write(content)
            written.append({"name": os.path.basename(path), "path": path, "type": "file"})
        # envd sets no Content-Type here: Go sniffs it as text/plain.
        self.send(200, json.dumps(written).encode(), ctype="text/plain; charset=utf-8")

    # -- envd's Connect RPC --------------------------------------------------------

    STREAMS = {"process.Process/Start", "process.Process/Connect", "filesystem.Filesystem/WatchDir"}

    def rpc(self, sbx, service, method):
        name = f"{service}/{method}"
        streaming = name in self.STREAMS
        ctype = self.headers.get("Content-Type", "")
        want = "application/connect+json" if streaming else "application/json"
        if ctype.split(";")[0].strip() != want:
            return self.send(415, headers=[("Accept-Post", want)])
        try:
            msg = json.loads(self.body[5:] if streaming else self.body or b"{}")
        except ValueError:
            return self.rpc_fail(streaming, "invalid_argument", "unmarshal message: invalid JSON")
        user = self.envd_user()
        if user not in ("user", "root"):
            return self.rpc_fail(streaming, "unauthenticated", f"invalid username: '{user}'")
        handler = getattr(self, f"rpc_{method.lower()}", None) if name in RPC_METHODS else None
        if handler is None:
            return self.rpc_fail(streaming, "unimplemented", f"{name} is not implemented by the fake E2B")
        handler(sbx, msg, user)

    def rpc_fail(self, streaming, code, message):
        """A Connect error: in the end-of-stream message of a stream (HTTP
        200), as the status and JSON body of a unary call."""
        if streaming:
            self.start_stream("application/connect+json")
            self.chunk(envelope(2, {"error": {"code": code, "message": message}}))
            return self.end_stream()
        self.send(CONNECT_HTTP[code], {"code": code, "message": message})

    def rpc_reply(self, reply, key=None):
        """The unary answer to an op sandbox_init.py did (or its error)."""
        if "error" in reply:
            return self.rpc_fail(False, KIND_CODE[reply["error"]["kind"]], reply["error"]["message"])
        # proto JSON leaves out empty fields (a listing of an empty directory is {})
        self.send(200, {key: reply[key]} if key and reply[key] else {})

    def timeout_s(self):
        ms = self.headers.get("Connect-Timeout-Ms")
        return int(ms) / 1000 if ms and ms.isdigit() and int(ms) > 0 else None

    # filesystem.Filesystem

    def rpc_stat(self, sbx, msg, user):
        self.rpc_reply(sbx.init.request("stat", path=resolve(msg.get("path", ""), user))[0], "entry")

    def rpc_makedir(self, sbx, msg, user):
        self.rpc_reply(sbx.init.request("mkdir", path=resolve(msg.get("path", ""), user))[0], "entry")

    def rpc_move(self, sbx, msg, user):
        self.rpc_reply(sbx.init.request("move", source=resolve(msg.get("source", ""), user),
                                        destination=resolve(msg.get("destination", ""), user))[0], "entry")

    def rpc_listdir(self, sbx, msg, user):
        self.rpc_reply(sbx.init.request("listdir", path=resolve(msg.get("path", ""), user),
                                        depth=msg.get("depth") or 1)[0], "entries")

    def rpc_remove(self, sbx, msg, user):
        self.rpc_reply(sbx.init.request("remove", path=resolve(msg.get("path", ""), user))[0])

    # process.Process

    def proc_of(self, sbx, msg, streaming=False):
        """The process a ProcessSelector names, or an error sent."""
        selector = msg.get("process") or {}
        with sbx.lock:
            procs = list(sbx.procs.values())
        if "pid" in selector:
            found = [p for p in procs if p.pid == selector["pid"]]
            what = f"process with pid {selector['pid']} not found"
        else:
            found = [p for p in procs if p.tag is not None and p.tag == selector.get("tag")]
            what = f"process with tag {selector.get('tag')} not found"
        if not found:
            self.rpc_fail(streaming, "not_found", what)
            return None
        return found[0]

    def rpc_start(self, sbx, msg, user):
        if msg.get("pty"):
            return self.rpc_fail(True, "unimplemented", "PTY is not implemented by the fake E2B")
        p = msg.get("process") or {}
        config = {"cmd": p.get("cmd", ""), "args": p.get("args") or [], "envs": p.get("envs") or {}}
        if "cwd" in p:
            config["cwd"] = p["cwd"]
        cwd = resolve(p.get("cwd", ""), user)
        stdin = bool(msg.get("stdin"))
        # One deadline for the process and for this stream: the end of a
        # process killed at its deadline comes after the deadline error.
        timeout = self.timeout_s()
        deadline = time.monotonic() + timeout if timeout else None
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        in_r, in_w = os.pipe2(os.O_CLOEXEC) if stdin else (None, None)
        passed = ([in_r] if stdin else []) + [out_w, err_w]
        try:
            reply, _ = sbx.init.request("spawn", passed, fds=[stdin, True, True], cwd=cwd,
                                        env=sbx.env(user, config["envs"]),
                                        argv=[config["cmd"]] + config["args"])
        except Gone:
            reply = None
        finally:
            for fd in passed:
                os.close(fd)
        if reply is None or "error" in reply:
            for fd in (out_r, err_r, in_w):
                if fd is not None:
                    os.close(fd)
            if reply is None:
                raise Gone()
            return self.rpc_fail(True, KIND_CODE[reply["error"]["kind"]], reply["error"]["message"])
        proc = Proc(sbx, reply["pid"], config, msg.get("tag"), out_r, err_r, in_w, deadline)
        sbx.register(proc)
        self.stream_events(proc, 0, deadline)

    def rpc_connect(self, sbx, msg, user):
        proc = self.proc_of(sbx, msg, streaming=True)
        if proc:
            with proc.cond:
                start = len(proc.events)
            timeout = self.timeout_s()
            self.stream_events(proc, start, time.monotonic() + timeout if timeout else None)

    def stream_events(self, proc, index, deadline):
        """A process's events from index on, as Connect stream messages:
        start, data..., end, then the end of the stream; keepalives while it
        is quiet (Keepalive-Ping-Interval, seconds); the deadline error when
        Connect-Timeout-Ms runs out (deadline, monotonic); the connection
        cut if the sandbox dies."""
        ping = self.headers.get("Keepalive-Ping-Interval")
        ping = int(ping) if ping and ping.isdigit() and int(ping) > 0 else None
        self.start_stream("application/connect+json")
        self.chunk(envelope(0, {"event": {"start": {"pid": proc.pid}}}))
        last_sent = time.monotonic()
        while True:
            with proc.cond:
                while len(proc.events) <= index and not proc.ended and proc.sandbox.alive:
                    now = time.monotonic()
                    waits = [x - now for x in (deadline, ping and last_sent + ping) if x]
                    if waits and min(waits) <= 0:
                        break
                    proc.cond.wait(min(waits) if waits else None)
                new, ended = proc.events[index:], proc.ended
            if not proc.sandbox.alive:
                self.abort()
            if deadline and time.monotonic() >= deadline:
                self.chunk(envelope(2, {"error": {"code": "deadline_exceeded", "message": "context deadline exceeded"}}))
                return self.end_stream()
            for event in new:
                self.chunk(envelope(0, {"event": event}))
            index += len(new)
            if new:
                last_sent = time.monotonic()
            if ended and index >= len(proc.events):
                self.chunk(envelope(2, {}))
                return self.end_stream()
            now = time.monotonic()
            if ping and now >= last_sent + ping:
                self.chunk(envelope(0, {"event": {"keepalive": {}}}))
                last_sent = now

    def rpc_list(self, sbx, msg, user):
        with sbx.lock:
            procs = [p for p in sbx.procs.values() if not p.ended]
        self.send(200, {"processes": [p.info() for p in procs]} if procs else {})

    def rpc_sendsignal(self, sbx, msg, user):
        proc = self.proc_of(sbx, msg)
        if not proc:
            return
        sig = {"SIGNAL_SIGKILL": signal.SIGKILL, "SIGNAL_SIGTERM": signal.SIGTERM,
               9: signal.SIGKILL, 15: signal.SIGTERM}.get(msg.get("signal"))
        if sig is None:
            return self.rpc_fail(False, "unimplemented", f"invalid signal: {msg.get('signal')}")
        reply = proc.signal(sig)
        if "error" in reply:
            return self.rpc_fail(False, KIND_CODE[reply["error"]["kind"]], reply["error"]["message"])
        self.send(200, {})

    def rpc_sendinput(self, sbx, msg, user):
        proc = self.proc_of(sbx, msg)
        if not proc:
            return
        data = (msg.get("input") or {}).get("stdin")
        if data is None:
            return self.rpc_fail(False, "unimplemented", "PTY input is not implemented by the fake E2B")
        with proc.cond:
            try:
                if proc.stdin_w is None:
                    raise OSError("stdin not enabled or closed")
                os.write(proc.stdin_w, base64.b64decode(data))
            except OSError as e:
                return self.rpc_fail(False, "internal", f"error writing to stdin: {e}")
        self.send(200, {})

    def rpc_closestdin(self, sbx, msg, user):
        proc = self.proc_of(sbx, msg)
        if not proc:
            return
        proc.close_stdin()
        self.send(200, {})

    # -- the code interpreter (E2B's server in front of Jupyter) ---------------

    def jupyter(self, sbx):
        path, method = self.path_only, self.command
        if path == "/health" and method == "GET":
            return self.send(200, "OK")
        if path == "/execute" and method == "POST":
            return self.execute(sbx)
        if path == "/contexts" and method == "GET":
            with sbx.lock:
                contexts = list(sbx.contexts.values())
            return self.send(200, [c.json() for c in contexts])
        if path == "/contexts" and method == "POST":
            body = self.json_body() or {}
            language = (body.get("language") or "python").lower()
            if language != "python":
                return self.send(500, f"language '{language}' is not supported by the fake E2B", ctype="text/plain; charset=utf-8")
            ctx = Context(sbx, language, body.get("cwd") or "/home/user")
            with sbx.lock:
                sbx.contexts[ctx.id] = ctx
            return self.send(200, ctx.json())
        m = re.fullmatch(r"/contexts/([^/]+)(/restart)?", path)
        if m and ((method == "DELETE" and not m.group(2)) or (method == "POST" and m.group(2))):
            return self.context_remove(sbx, m.group(1), restart=bool(m.group(2)))
        self.send(404, {"detail": "Not Found"})

    def context_remove(self, sbx, ctx_id, restart):
        with sbx.lock:
            ctx = sbx.contexts.pop(ctx_id, None)
            if ctx and sbx.default_context is ctx:
                sbx.default_context = None
        if not ctx:
            return self.send(404, f"Context {ctx_id} not found", ctype="text/plain; charset=utf-8")
        with ctx.lock:
            try:
                sbx.init.request("signal", pid=ctx.pid, signal=signal.SIGKILL)
            except Gone:
                pass
            ctx.close()
        if restart:
            new = Context(sbx, ctx.language, ctx.cwd, ctx.id)
            with sbx.lock:
                sbx.contexts[new.id] = new
                if sbx.default_context is None and ctx.cwd == "/home/user":
                    sbx.default_context = new
        self.send(200, None)

    def execute(self, sbx):
        body = self.json_body()
        if not isinstance(body, dict) or not isinstance(body.get("code"), str):
            return self.send(422, {"detail": [{"type": "missing", "loc": ["body", "code"], "msg": "Field required"}]})
        if body.get("context_id") and body.get("language"):
            return self.send(400, "Only one of context_id or language can be provided", ctype="text/plain; charset=utf-8")
        language = (body.get("language") or "python").lower()
        if language != "python":
            return self.send(500, f"language '{language}' is not supported by the fake E2B", ctype="text/plain; charset=utf-8")
        ctx = sbx.context(body.get("context_id"))
        if ctx is None:
            return self.send(404, f"Context {body['context_id']} not found", ctype="text/plain; charset=utf-8")
        with ctx.lock:
            self.relay_execution(sbx, ctx, {"code": body["code"], "env_vars": body.get("env_vars") or {}})

    def relay_execution(self, sbx, ctx, request):
        """Stream the kernel's lines as they come (a keepalive line after 5
        quiet seconds). A client that goes away gets its execution
        interrupted, as E2B's server does, and the rest is drained."""
        client = True
        try:
            ctx.send(request)
        except OSError:
            raise Gone()
        self.start_stream()
        while True:
            line = ctx.read_line(5, self.connection if client else None)
            if not sbx.alive:
                self.abort()
            if line == "gone":
                client = False
                self.interrupt(sbx, ctx)
                continue
            end = line == b"" or (line is not None and json.loads(line).get("type") == "end_of_execution")
            if line == b"":  # the kernel died: E2B's server says so, then ends
                line = (json.dumps({"type": "error", "name": "UnexpectedEndOfExecution",
                                    "value": "Connection to the execution was closed before the execution was finished",
                                    "traceback": ""}) + "\n").encode()
                line += b'{"type": "end_of_execution"}\n'
            elif line is None:
                line = b'{"type": "keepalive"}\n'
            if client:
                try:
                    self.chunk(line)
                except (BrokenPipeError, ConnectionResetError):
                    client = False
                    self.interrupt(sbx, ctx)
            if end:
                break
        if client:
            self.end_stream()
        else:
            self.close_connection = True

    def interrupt(self, sbx, ctx):
        """The kernel interrupt (KeyboardInterrupt in the running code)."""
        try:
            sbx.init.request("signal", pid=ctx.pid, signal=signal.SIGINT, group=False)
        except Gone:
            pass


RPC_METHODS = {"filesystem.Filesystem/Stat", "filesystem.Filesystem/MakeDir",
               "filesystem.Filesystem/Move", "filesystem.Filesystem/ListDir",
               "filesystem.Filesystem/Remove", "process.Process/Start",
               "process.Process/Connect", "process.Process/List",
               "process.Process/SendSignal", "process.Process/SendInput",
               "process.Process/CloseStdin"}


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def get_request(self):
        # TCP_NODELAY, as Go's servers (E2B's API, envd) set on every connection: without it a
        # reply written in pieces (headers, then each chunk) waits on the client's delayed
        # ACK, 40 ms a time on a kept-alive connection, which no real E2B service adds.
        conn, addr = super().get_request()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, addr


def main():
    parser = argparse.ArgumentParser(description="A fake E2B service for tests.")
    parser.add_argument("--port-file", help="write the port picked here")
    parser.add_argument("--record", help="append one JSON line per request here")
    parser.add_argument("--state", help="the directory for the sandboxes' trees (default: a temporary one)")
    parser.add_argument("--envd-version", default="0.5.7", help="the envdVersion to advertise")
    parser.add_argument("--domain", default=None, help="the domain to answer with (default: null)")
    args = parser.parse_args()
    api_key = os.environ.get("FAKE_E2B_API_KEY")
    if not api_key or not api_key.startswith("e2b_"):
        sys.exit("fake_e2b.py: FAKE_E2B_API_KEY must be set to the valid key (e2b_...)")
    own_state = args.state is None
    if own_state:
        args.state = tempfile.mkdtemp(prefix="fake-e2b.")
    os.makedirs(args.state, exist_ok=True)

    service = Service(args, api_key)
    server = Server(("127.0.0.1", 0), Handler)
    server.service = service
    port = server.server_address[1]
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write(f"{port}\n")
        os.rename(args.port_file + ".tmp", args.port_file)
    print(f"listening on http://127.0.0.1:{port}", flush=True)

    def stop(*_):
        threading.Thread(target=server.shutdown, daemon=True).start()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server.serve_forever(poll_interval=0.1)
    service.close()
    if own_state:
        shutil.rmtree(args.state, ignore_errors=True)


if __name__ == "__main__":
    main()
