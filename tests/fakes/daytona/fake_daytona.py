#!/usr/bin/env python3
# tests/fakes/daytona/fake_daytona.py - a protocol-faithful fake of the Daytona
# service (https://daytona.io) for tests: what talks to it sees Daytona's wire,
# and its sandboxes really run.
#
#   FAKE_DAYTONA_API_KEY=dtn_... fake_daytona.py [--port-file F] [--record F]
#       [--state DIR] [--start-delay S] [--minute-seconds S] [--snapshots A,B]
#       [--target T] [--daemon-version V]
#
# One process, one port on 127.0.0.1 (picked by the kernel; printed as the
# first line of stdout, "listening on http://127.0.0.1:PORT", and written to
# --port-file), serving what Daytona serves on several hosts:
#   - /api/...: the control plane (the SDK's apiUrl is http://127.0.0.1:PORT/api):
#     sandboxes created, listed, started, stopped, deleted;
#   - /toolbox/{sandboxId}/...: each sandbox's daemon (the toolbox API) behind
#     Daytona's proxy (the sandbox DTO's toolboxProxyUrl): commands, sessions,
#     code, files;
#   - /_fake/...: the tests' own door (faults, the sandboxes, a kill behind the
#     client's back).
# A sandbox is a directory tree under --state, seen by its processes through
# bubblewrap as /home/daytona and /tmp over a read-only host root, in a PID
# namespace of its own (and a network namespace of its own with
# networkBlockAll; networkAllowList is enforced with an iptables chain). What
# must happen in the sandbox's view (starting and signalling processes, every
# file operation) is done by the fake E2B's sandbox agent
# (tests/fakes/e2b/sandbox_init.py) with agent_ops.py added to it; the fake
# E2B module is imported for that agent and for the plumbing both fakes share
# (the record, the faults, the iptables chains).
#
# Every request is recorded (--record: one JSON line each, the API key
# redacted). SIGTERM kills every sandbox, removes its tree and its rules, and
# exits 0. README.md beside this file says what is faithful and what is not,
# and which SDK version it was held to. Python standard library only.
import argparse
import base64
import datetime
import hmac
import http
import http.server
import ipaddress
import json
import os
import queue
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2b"))
import fake_e2b as e2b  # noqa: E402  (the fake E2B: its agent and shared plumbing)

HOME = "/home/daytona"  # the sandbox user's home: where commands start, where relative paths go
ORGANIZATION_ID = str(uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/aksandbox/fake-daytona"))
RUNNER_ID = str(uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/aksandbox/fake-daytona/runner"))
DEFAULT_SNAPSHOT = "daytonaio/sandbox:0.4.3"
SNAPSHOT_RESOURCES = {"cpu": 1, "gpu": 0, "memory": 1, "disk": 3}  # Daytona's default snapshot
BUILD_DEFAULTS = {"cpu": 1, "memory": 1, "disk": 3}  # the API's DEFAULT_CPU/MEMORY/DISK
STDOUT_PREFIX, STDERR_PREFIX = b"\x01\x01\x01", b"\x02\x02\x02"  # the session log's markers
ARTIFACT_MARKER = "dtn_artifact_k39fd2:"
HANG_TIMEOUT_S = 30  # childreap: how long the daemon waits for a command's output to end after it exits
SESSION_GRACE_S, SESSION_CHECK_S = 5.0, 0.1  # TerminationGracePeriod, TerminationCheckInterval
REDACTED_HEADERS = {"authorization", "x-daytona-authorization"}
ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MULTIPART_BOUNDARY = "DAYTONA-FILE-BOUNDARY"
# Go's built-in MIME table (mime.TypeByExtension without /etc/mime.types).
GO_MIME = {".avif": "image/avif", ".css": "text/css; charset=utf-8", ".gif": "image/gif",
           ".htm": "text/html; charset=utf-8", ".html": "text/html; charset=utf-8",
           ".jpeg": "image/jpeg", ".jpg": "image/jpeg", ".js": "text/javascript; charset=utf-8",
           ".json": "application/json", ".mjs": "text/javascript; charset=utf-8",
           ".pdf": "application/pdf", ".png": "image/png", ".svg": "image/svg+xml",
           ".wasm": "application/wasm", ".webp": "image/webp", ".xml": "text/xml; charset=utf-8"}
# common-go's error codes by status, for the daemon's (and proxy's) ErrorResponse.
GO_CODES = {400: "BAD_REQUEST", 401: "UNAUTHORIZED", 403: "FORBIDDEN", 404: "NOT_FOUND",
            408: "REQUEST_TIMEOUT", 409: "CONFLICT", 410: "GONE", 422: "UNPROCESSABLE_ENTITY",
            500: "INTERNAL_SERVER_ERROR"}
# Session command wrapper: the daemon's cmdWrapperFormat, as it writes it to the session's shell.
SESSION_WRAPPER = """
{
\tlog=@LOG@
\tdir=@DIR@

\t# per-command FIFOs
\tsp="$dir/stdout.pipe"
\tep="$dir/stderr.pipe"
\tip=@INPUT@
\t
\trm -f "$sp" "$ep" "$ip" && mkfifo "$sp" "$ep" "$ip" || exit 1

\tcleanup() { rm -f "$sp" "$ep" "$ip"; }
\ttrap 'cleanup' EXIT HUP INT TERM

  # prefix each stream and append to shared log
\t( while IFS= read -r line || [ -n "$line" ]; do printf '\\001\\001\\001%s\\n' "$line"; done < "$sp" ) >> "$log" & r1=$!
\t( while IFS= read -r line || [ -n "$line" ]; do printf '\\002\\002\\002%s\\n' "$line"; done < "$ep" ) >> "$log" & r2=$!

\t# Sync commands should see EOF immediately; async commands keep stdin open for SendInput.
\t@STDIN@
\tip_pid=$!

\t# Run your command from file (avoids heredoc parsing issues with pipe-fed shells)
\t{ . @CMD@; } < "$ip" > "$sp" 2> "$ep"
\t_ec=$?

\t# Stop the stdin holder so it doesn't outlive the command
\tkill "$ip_pid" 2>/dev/null; wait "$ip_pid" 2>/dev/null

\t# drain labelers (cleanup via trap)
\twait "$r1" "$r2"

\t# Write exit code only after labelers have flushed all output to the log file.
\t# Previously echo "$?" ran before wait, creating a race where clients polling
\t# the exit-code file would read an empty/incomplete log.
\techo "$_ec" >> @EXIT@

\t# Ensure unlink even if the waits failed
\tcleanup
}

"""


# ---- formats ----------------------------------------------------------------

def api_time(t=None):
    """A time as the API (JavaScript's toISOString) writes it."""
    dt = datetime.datetime.fromtimestamp(time.time() if t is None else t, datetime.timezone.utc)
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def go_time_json(ns=None):
    """A time.Time as Go's encoding/json writes it (RFC 3339, nanoseconds, zeros trimmed; UTC)."""
    ns = time.time_ns() if ns is None else ns
    secs, nanos = divmod(ns, 1_000_000_000)
    base = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs))
    return base + (f".{nanos:09d}".rstrip("0") if nanos else "") + "Z"


def go_time_string(ns):
    """Go's time.Time.String() in UTC: "2006-01-02 15:04:05.999999999 +0000 UTC"."""
    secs, nanos = divmod(ns, 1_000_000_000)
    base = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(secs))
    return base + (f".{nanos:09d}".rstrip("0") if nanos else "") + " +0000 UTC"


def go_json(obj):
    """JSON as Go's encoding/json writes it: compact, <>& and U+2028/9 escaped."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    for c, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                   ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(c, esc)
    return text.encode()


def api_json(obj):
    """JSON as Express (JSON.stringify) writes it."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def to_latin1(s):
    """The daemon's toLatin1 for a quoted Content-Disposition filename."""
    s = s.replace("\\", "\\\\").replace('"', '\\"').replace("\r", "").replace("\n", "").replace("\0", "")
    return "".join("_" if ord(c) > 0xFF or ord(c) < 0x20 or ord(c) == 0x7F else c for c in s)


def rfc5987(s):
    safe = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$&+-.^_`|~")
    return "".join(chr(b) if b in safe else f"%{b:02X}" for b in s.encode())


def semver(v):
    """(major, minor, patch, prerelease) of a version the daemon's CompareVersions
    accepts (a suffix right after X.Y.Z is a prerelease), or None."""
    m = re.fullmatch(r"v?(\d+)\.(\d+)\.(\d+)(?:-?([0-9A-Za-z.-]+))?(?:\+\S*)?", v or "")
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4)


def compare_versions(a, b):
    """-1, 0, 1 as Masterminds/semver compares (a prerelease sorts before its
    release); None when a does not parse."""
    va, vb = semver(a), semver(b)
    if va is None or vb is None:
        return None
    if va[:3] != vb[:3]:
        return -1 if va[:3] < vb[:3] else 1
    pa, pb = va[3], vb[3]
    if pa == pb:
        return 0
    if pa is None or pb is None:
        return 1 if pa is None else -1

    def key(p):
        return [(0, int(x), "") if x.isdigit() else (1, 0, x) for x in p.split(".")]
    return -1 if key(pa) < key(pb) else 1


def output_mode(headers):
    """(combined, skip_server_demux) of a session request, as the daemon
    decides them from X-Daytona-SDK-Version (and X-Daytona-Split-Output)."""
    sdk = headers.get("X-Daytona-SDK-Version") or ""
    cmp = compare_versions(sdk, "0.27.0-0") if sdk else None
    if sdk and cmp is None:
        cmp = 1
    combined = (cmp is not None and cmp < 0 and "dev" not in sdk) or \
        (sdk == "" and headers.get("X-Daytona-Split-Output") != "true")
    if sdk == "":
        skip = True
    elif "dev" in sdk:
        skip = False
    else:
        c = compare_versions(sdk, "0.167.0-0")
        skip = c is None or c < 0
    return combined, skip


def demux(log):
    """The daemon's DemuxLogBytes: the session log's stdout and stderr."""
    out, err, pos = bytearray(), bytearray(), 0
    markers = (STDOUT_PREFIX, STDERR_PREFIX)

    def next_marker(start):
        found = [i for i in (log.find(m, start) for m in markers) if i >= 0]
        return min(found) if found else len(log)
    while pos < len(log):
        head = log[pos:pos + 3]
        if head in markers:
            end = next_marker(pos + 3)
            (out if head == STDOUT_PREFIX else err).extend(log[pos + 3:end])
            pos = end
        else:
            pos += 1
    return bytes(out), bytes(err)


def strip_markers(log):
    return log.replace(STDOUT_PREFIX, b"").replace(STDERR_PREFIX, b"")


def parse_artifacts(output):
    """coderun.ParseArtifacts: marker lines out of the result, charts kept."""
    charts, kept = [], []
    for line in output.split("\n"):
        if not line.startswith(ARTIFACT_MARKER):
            kept.append(line)
            continue
        payload = line[len(ARTIFACT_MARKER):].strip()
        try:
            artifact = json.loads(payload) if payload else None
        except ValueError:
            continue
        if isinstance(artifact, dict) and artifact.get("type") == "chart" and isinstance(artifact.get("value"), dict):
            charts.append(artifact["value"])
    return "\n".join(kept), ({"charts": charts} if charts else None)


def get_shell():
    """The daemon's GetShell: zsh, else bash, from /etc/shells (the sandbox
    sees the host's), else $SHELL, else sh."""
    try:
        with open("/etc/shells") as f:
            shells = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    except OSError:
        return "sh"
    for candidate in ("/usr/bin/zsh", "/bin/zsh", "/usr/bin/bash", "/bin/bash"):
        if candidate in shells:
            return candidate
    return os.environ.get("SHELL") or "sh"


def js_parse_int(text):
    """JavaScript's parseInt(text, 10): its leading integer, or None (NaN)."""
    m = re.match(r"\s*([+-]?\d+)", text or "")
    return int(m.group(1)) if m else None


def validate_network_allow_list(value):
    """The API's validateNetworkAllowList; its message on error (a 400)."""
    networks = [n.strip() for n in value.split(",")]
    for network in networks:
        if not network:
            continue
        ip, _, prefix = network.partition("/")
        try:
            ipaddress.IPv4Address(ip)
        except ValueError:
            return f'Invalid IP address: "{ip}" in network "{network}". Must be a valid IPv4 address'
        if not prefix:
            return f'Invalid network format: "{network}". Missing CIDR prefix length (e.g., /24)'
        p = js_parse_int(prefix)
        if p is not None and (p < 0 or p > 32):
            return f"Invalid CIDR prefix length: {network}. Prefix must be between 0 and 32"
    if len(networks) > 10:
        return "Network allow list cannot contain more than 10 networks"
    return None


def validate_domain_allow_list(value):
    rx = re.compile(r"^(\*\.)?([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.)+[a-zA-Z]{2,}$")
    domains = [d.strip() for d in value.split(",")]
    for d in domains:
        if d and not rx.match(d):
            return f'Invalid domain: "{d}". Must be a valid domain name'
    if len(domains) > 10:
        return "Domain allow list cannot contain more than 10 domains"
    return None


def allow_list_networks(value):
    """The CIDRs of a validated networkAllowList, as the iptables rules take them."""
    nets = []
    for network in (n.strip() for n in value.split(",")):
        if not network:
            continue
        ip, _, prefix = network.partition("/")
        p = js_parse_int(prefix)
        nets.append(str(ipaddress.ip_network(f"{ip}/{32 if p is None else p}", strict=False)))
    return nets


def read_fd(fd):
    """All of an fd the agent opened (non-blocking for a FIFO: what is there)."""
    chunks = []
    with open(fd, "rb", buffering=0) as f:
        while True:
            try:
                piece = f.read(1 << 20)
            except BlockingIOError:
                piece = None
            if not piece:  # EOF, or None: a FIFO with nothing to read now
                break
            chunks.append(piece)
    return b"".join(chunks)


class DaemonError(Exception):
    """An error the daemon answers with its ErrorResponse."""

    def __init__(self, status, message, code=None):
        super().__init__(message)
        self.status, self.message = status, message
        self.code = GO_CODES.get(status) if code is None else code


# ---- the plumbing shared with the fake E2B ------------------------------------

class Faults(e2b.Faults):
    """The fake E2B's fault queue (path_prefix, method, target: api|toolbox,
    count; status, message, retry_after, body, delay_ms, drop_after_bytes,
    malformed) with what Daytona's tests need besides: drop (the connection
    closed without an answer), delay_s, and start_delay_s (the sandbox a
    create or start request brings up takes that long to be 'started')."""

    KEYS = e2b.Faults.KEYS | {"drop", "delay_s", "start_delay_s", "exit_code_race"}


class Agent(e2b.Init):
    """The fake E2B's sandbox agent with the daemon's operations added."""

    _base = e2b.Init.SOURCE.rstrip()
    assert _base.endswith("\nmain()"), "tests/fakes/e2b/sandbox_init.py must end by calling main()"
    SOURCE = (_base[:-len("main()")] + "\n" + open(os.path.join(HERE, "agent_ops.py")).read()
              + "\n\nmain()\n")


class Firewall(e2b.Firewall):
    """The fake E2B's iptables chains, under a prefix of this fake's own:
    AKSFAKED-<pid>-<sandbox id's start> (an E2B fake cleaning stale chains
    leaves them alone, and this one cleans only those of dead Daytona fakes)."""

    PREFIX = "AKSFAKED-"

    def chain(self, sid):
        return f"{self.PREFIX}{self.pid}-{sid.replace('-', '')[:10]}"

    def clean_stale(self):
        for family in e2b.FAMILIES:
            if shutil.which(family.tool) is None:
                continue
            try:
                listing = subprocess.run([family.tool, "-w", "-S"], capture_output=True, text=True,
                                         timeout=30).stdout
            except (OSError, subprocess.TimeoutExpired):
                continue
            for chain, pid in re.findall(rf"^-N ({self.PREFIX}(\d+)-\S+)$", listing, re.M):
                if not self.stale(int(pid)):
                    continue
                jumps = re.findall(rf"^-A (OUTPUT .* -j {re.escape(chain)})$", listing, re.M)
                try:
                    self.restore(family, [f"-D {j}" for j in jumps] + [f"-F {chain}", f"-X {chain}"])
                    sys.stderr.write(f"fake-daytona: removed {chain}, left by a fake that is gone\n")
                except e2b.FirewallError:
                    pass

    def stale(self, pid):
        if pid == self.pid:
            return True
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                return b"fake_daytona.py" not in f.read()
        except OSError:
            return True


class Gone(Exception):
    """The sandbox stopped (or went) while a request was being served."""


# ---- a sandbox ------------------------------------------------------------------

class Sandbox:
    def __init__(self, service, body, snapshot, build_info):
        self.service = service
        self.id = str(uuid.uuid4())
        self.name = body.get("name") or self.id
        self.snapshot, self.build_info = snapshot, build_info
        self.user = body.get("user") or "daytona"
        self.env_vars = dict(body.get("env") or {})
        self.labels = dict(body.get("labels") or {})
        self.public = bool(body.get("public") or False)
        self.network_block_all = bool(body.get("networkBlockAll") or False)
        self.network_allow_list = body.get("networkAllowList")
        self.domain_allow_list = body.get("domainAllowList")
        self.target = body.get("target") or service.target
        res = SNAPSHOT_RESOURCES if build_info is None else {
            "cpu": body.get("cpu") or BUILD_DEFAULTS["cpu"], "gpu": body.get("gpu") or 0,
            "memory": body.get("memory") or BUILD_DEFAULTS["memory"],
            "disk": body.get("disk") or BUILD_DEFAULTS["disk"]}
        self.cpu, self.gpu, self.memory, self.disk = res["cpu"], res["gpu"], res["memory"], res["disk"]
        self.auto_stop = body.get("autoStopInterval", 15)
        self.auto_archive = body.get("autoArchiveInterval", 7 * 24 * 60)
        self.auto_delete = body.get("autoDeleteInterval", -1)
        self.state, self.desired, self.error_reason = "creating", "started", None
        self.created_at = self.updated_at = self.last_activity = time.time()
        self.busy = 0  # toolbox requests in flight: activity, as Daytona's proxy keeps it
        self.busy_lock = threading.Lock()
        self.lock = threading.RLock()
        self.agent, self.sessions, self.generation = None, {}, 0
        self.exit_cond, self.exits = threading.Condition(), {}
        self.root = os.path.join(service.state, self.id)
        self.gid, self.chains = None, set()
        for sub, mode in (("home/daytona", 0o755), ("tmp", 0o1777)):
            os.makedirs(os.path.join(self.root, sub))
            os.chmod(os.path.join(self.root, sub), mode)

    # -- the control plane's views of it

    def dto(self):
        """The Sandbox DTO (SandboxDto.fromSandbox)."""
        d = self.list_item()
        del d["toolboxProxyUrl"]
        d.update(env=self.env_vars, volumes=[], autoPauseInterval=0, backupCreatedAt=None,
                 buildInfo=None if self.build_info is None else dict(self.build_info),
                 linkedSandboxId=None, kvm=False, toolboxProxyUrl=self.service.toolbox_url)
        return d

    def list_item(self):
        """The SandboxListItem of the list endpoint."""
        return {"id": self.id, "organizationId": ORGANIZATION_ID, "name": self.name, "target": self.target,
                "runnerId": RUNNER_ID, "sandboxClass": "container", "state": self.state,
                "desiredState": self.desired, "snapshot": self.snapshot, "user": self.user,
                "errorReason": self.error_reason, "recoverable": False, "public": self.public,
                "networkBlockAll": self.network_block_all, "networkAllowList": self.network_allow_list,
                "domainAllowList": self.domain_allow_list, "cpu": self.cpu, "gpu": self.gpu,
                "memory": self.memory, "disk": self.disk, "labels": self.labels, "backupState": "None",
                "autoStopInterval": self.auto_stop, "autoArchiveInterval": self.auto_archive,
                "autoDeleteInterval": self.auto_delete, "createdAt": api_time(self.created_at),
                "updatedAt": api_time(self.updated_at), "lastActivityAt": api_time(self.last_activity),
                "daemonVersion": self.service.daemon_version, "toolboxProxyUrl": self.service.toolbox_url}

    def touch(self):
        self.last_activity = time.time()

    def set_state(self, state, desired=None):
        self.state = state
        if desired:
            self.desired = desired
        self.updated_at = time.time()

    # -- its life

    def bwrap_argv(self):
        argv = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                "--tmpfs", "/home", "--bind", os.path.join(self.root, "home/daytona"), HOME,
                "--bind", os.path.join(self.root, "tmp"), "/tmp",
                "--unshare-pid", "--unshare-ipc", "--die-with-parent", "--chdir", HOME]
        if self.network_block_all:
            argv.append("--unshare-net")
        if os.geteuid() != 0:
            argv.append("--unshare-user")
        return argv + ["--"]

    def bring_up(self, delay):
        """Start its agent: at once (the caller waits), or after delay
        seconds in the background (the state says creating or starting
        meanwhile)."""
        with self.lock:
            self.generation += 1
            gen = self.generation
        if delay <= 0:
            return self.boot(gen)

        def later():
            time.sleep(delay)
            self.boot(gen)
        threading.Thread(target=later, daemon=True).start()

    def boot(self, gen):
        with self.lock:
            if gen != self.generation or self.desired != "started" or self.state == "started":
                return
            try:
                if self.network_allow_list and not self.network_block_all and not self.chains:
                    self.apply_allow_list()
                agent = Agent(self.bwrap_argv(), self.on_exit, lambda: self.on_dead(agent_ref),
                              self.service.spawn, self.root, self.gid)
            except (RuntimeError, OSError, e2b.RuleError) as e:  # FirewallError too: never unfiltered
                self.error_reason = str(e)
                self.set_state("error")
                return
            agent_ref = agent
            self.agent = agent
            self.touch()
            self.set_state("started")

    def apply_allow_list(self):
        """networkAllowList: only those networks, as a chain of the fake E2B's
        kind for a group of this sandbox's own (IPv6 denied whole)."""
        if self.gid is None:
            self.gid = self.service.allocate_gid()
        egress = e2b.Egress(allow_list_networks(self.network_allow_list), [e2b.ALL_TRAFFIC])
        self.service.firewall.apply(self.id, self.gid, egress, self.chains)

    def on_dead(self, agent):
        """Its agent died of itself: the sandbox is in error, as a container that died."""
        with self.lock:
            if self.agent is agent:
                self.halt()
                self.error_reason = "the sandbox's agent died"
                self.set_state("error")

    def halt(self):
        """Every process of it dies (the agent's PID namespace goes); the tree stays."""
        with self.lock:
            agent, self.agent = self.agent, None
            sessions, self.sessions = list(self.sessions.values()), {}
            self.generation += 1
        for s in sessions:
            s.cancelled = True
            s.close()
        if agent:
            agent.kill()
        with self.exit_cond:
            self.exits.clear()
            self.exit_cond.notify_all()

    def remove(self):
        """Gone for good: its processes, its rules, its tree."""
        self.halt()
        self.service.firewall.remove(self.id, self.gid, self.chains)
        self.chains.clear()
        self.service.release_gid(self.gid)
        shutil.rmtree(self.root, ignore_errors=True)

    # -- processes and files, through its agent

    def on_exit(self, pid, status):
        with self.exit_cond:
            self.exits[pid] = status
            self.exit_cond.notify_all()

    def request(self, op, pass_fds=(), **args):
        agent = self.agent
        if agent is None:
            raise Gone()
        try:
            return agent.request(op, pass_fds, **args)
        except e2b.Gone:
            raise Gone()

    def env(self, extra=None):
        """A command's environment: the daemon's (the container's: PATH, HOME,
        the DAYTONA_SANDBOX_* Daytona sets, the sandbox's env), then extra."""
        env = {"PATH": e2b.SANDBOX_PATH, "HOME": HOME, "HOSTNAME": self.id[:12],
               "DAYTONA_SANDBOX_ID": self.id, "DAYTONA_SANDBOX_SNAPSHOT": self.snapshot or "",
               "DAYTONA_SANDBOX_USER": self.user, "DAYTONA_ORGANIZATION_ID": ORGANIZATION_ID,
               "DAYTONA_REGION_ID": self.target}
        env.update(self.env_vars)
        env.update(extra or {})
        return env

    def run_shell(self, script, cwd, env, timeout):
        """As the daemon's /process/execute runs a command: the shell reading
        script on its stdin, stdout and stderr one pipe, its own process group
        (SIGKILLed at the timeout). (exit code, output, timed out), or
        (None, start error, False) when it could not start."""
        in_r, in_w = os.pipe2(os.O_CLOEXEC)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        try:
            reply, _ = self.request("spawn", [in_r, out_w, out_w], fds=[True, True, True], cwd=cwd,
                                    env=env, argv=[self.service.shell])
        except Gone:
            os.close(in_w)
            os.close(out_r)
            raise
        finally:
            os.close(in_r)
            os.close(out_w)
        if "error" in reply:
            os.close(in_w)
            os.close(out_r)
            return None, f"chdir {cwd}: no such file or directory", False
        pid, agent = reply["pid"], self.agent

        def feed():
            data = script.encode()
            try:
                while data:
                    data = data[os.write(in_w, data):]
            except OSError:
                pass
            os.close(in_w)
        threading.Thread(target=feed, daemon=True).start()
        timed_out = threading.Event()

        def expire():
            timed_out.set()
            try:
                self.request("signal", pid=pid, signal=signal.SIGKILL)
            except Gone:
                pass
        timer = threading.Timer(timeout, expire) if timeout else None
        if timer:
            timer.daemon = True
            timer.start()
        out, exited_at = bytearray(), None
        try:
            while True:
                ready, _, _ = select.select([out_r], [], [], 0.1)
                if ready:
                    data = os.read(out_r, 65536)
                    if not data:
                        break
                    out += data
                    continue
                if self.agent is not agent:
                    raise Gone()
                with self.exit_cond:
                    exited = pid in self.exits
                if exited:
                    exited_at = exited_at or time.monotonic()
                    if time.monotonic() - exited_at > HANG_TIMEOUT_S:
                        break
            with self.exit_cond:
                while pid not in self.exits and self.agent is agent:
                    self.exit_cond.wait(0.5)
                status = self.exits.pop(pid, None)
            if status is None:
                raise Gone()
        finally:
            if timer:
                timer.cancel()
            os.close(out_r)
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
        return code, bytes(out), timed_out.is_set()

    def read_file(self, path):
        """The bytes of a file of the sandbox (None if missing)."""
        reply, fds = self.request("dopen", path=path, mode="r")
        if "error" in reply:
            if reply["error"]["kind"] == "not_found":
                return None
            raise DaemonError(400, "bad request: " + reply["error"]["message"])
        return read_fd(fds[0])

    def write_file(self, path, data, perm=0o666):
        """The error reply, or None once written."""
        reply, fds = self.request("dopen", path=path, mode="w", perm=perm)
        if "error" in reply:
            return reply["error"]
        with open(fds[0], "wb") as f:
            f.write(data)
        return None


def resolve(path):
    """A path as the daemon takes it: relative to its working directory, the home."""
    return os.path.normpath(path if path.startswith("/") else os.path.join(HOME, path))


# ---- a session: the daemon's long-lived shell --------------------------------------

class Session:
    def __init__(self, sbx, sid):
        self.sbx, self.id = sbx, sid
        self.commands, self.cancelled = {}, False
        self.dir = f"{HOME}/.daytona/sessions/{sid}"
        self.write_lock = threading.Lock()
        in_r, self.stdin_w = os.pipe2(os.O_CLOEXEC)
        try:
            reply, _ = sbx.request("spawn", [in_r], fds=[True, False, False], cwd=HOME, env=sbx.env(),
                                   argv=[sbx.service.shell])
        except Gone:
            os.close(self.stdin_w)
            raise
        finally:
            os.close(in_r)
        if "error" in reply:
            os.close(self.stdin_w)
            raise DaemonError(500, f"internal server error: failed to start shell: {reply['error']['message']}")
        self.pid = reply["pid"]
        sbx.request("dmkdir", path=self.dir, mode=0o755)

    def close(self):
        with self.write_lock:
            if self.stdin_w is not None:
                os.close(self.stdin_w)
                self.stdin_w = None

    def execute(self, command, run_async, combined, skip_demux, exit_code_race=False):
        sbx, cid = self.sbx, str(uuid.uuid4())
        cdir = f"{self.dir}/{cid}"
        log, exit_file = f"{cdir}/output.log", f"{cdir}/exit_code"
        reply, _ = sbx.request("dmkdir", path=cdir, mode=0o755)
        if "error" in reply:
            raise DaemonError(400, f"bad request: failed to create log directory: {reply['error']['message']}")
        cmd = {"id": cid, "command": command, "exitCode": None}
        self.commands[cid] = cmd
        err = sbx.write_file(log, b"") or sbx.write_file(f"{cdir}/cmd.sh", command.encode(), 0o600)
        if err:
            raise DaemonError(400, f"bad request: failed to write command file: {err['message']}")
        stdin = 'while :; do sleep 3600; done > "$ip" &' if run_async else 'cat /dev/null > "$ip" &'
        wrapper = SESSION_WRAPPER
        for token, value in (("@LOG@", json.dumps(log)), ("@DIR@", json.dumps(cdir)),
                             ("@INPUT@", json.dumps(f"{cdir}/input.pipe")), ("@STDIN@", stdin),
                             ("@CMD@", json.dumps(f"{cdir}/cmd.sh")), ("@EXIT@", json.dumps(exit_file))):
            wrapper = wrapper.replace(token, value)
        data = wrapper.encode()
        with self.write_lock:
            try:
                if self.stdin_w is None:
                    raise OSError("closed")
                while data:
                    data = data[os.write(self.stdin_w, data):]
            except OSError as e:
                raise DaemonError(400, f"bad request: failed to write command: write |1: {e}")
        if run_async:
            return {"cmdId": cid, "output": None, "stdout": None, "stderr": None, "exitCode": None}
        while True:
            if self.cancelled:
                cmd["exitCode"] = 1
                raise DaemonError(400, "bad request: session cancelled")
            text = sbx.read_file(exit_file)
            # the current daemon reads again while the file is empty (created, not yet
            # written); the older ones' race is a fault (exit_code_race)
            if text is None or (not text.strip() and not exit_code_race):
                time.sleep(0.05)
                continue
            if exit_code_race:
                text = b""
            try:
                code = int(text.decode().rstrip("\n"))
            except ValueError:
                raise DaemonError(400, "bad request: failed to convert exit code to int")
            cmd["exitCode"] = code
            logb = sbx.read_file(log) or b""
            if combined:
                return {"cmdId": cid, "output": strip_markers(logb).decode(errors="replace"),
                        "stdout": None, "stderr": None, "exitCode": code}
            result = {"cmdId": cid, "output": logb.decode(errors="replace"), "stdout": None,
                      "stderr": None, "exitCode": code}
            if not skip_demux:
                out, err = demux(logb)
                result.update(stdout=out.decode(errors="replace"), stderr=err.decode(errors="replace"))
            return result

    def command(self, cid):
        cmd = self.commands.get(cid)
        if cmd is None:
            raise DaemonError(404, "command not found", "PROCESS_NOT_FOUND")
        if cmd["exitCode"] is None:
            text = self.sbx.read_file(f"{self.dir}/{cid}/exit_code")
            if text is not None and text.strip():
                try:
                    cmd["exitCode"] = int(text.decode().rstrip("\n"))
                except ValueError:
                    raise DaemonError(500, "failed to convert exit code to int", "")
        return cmd

    def dto(self):
        return {"sessionId": self.id, "commands": [command_dto(self.command(c)) for c in list(self.commands)]}

    def delete(self):
        """SIGTERM to its process group and tree, up to 5 s for them to go,
        then SIGKILL; the shell itself killed (the daemon cancels its
        context); its directory removed."""
        sbx = self.sbx
        self.cancelled = True
        sbx.request("dtree_signal", pid=self.pid, signal=signal.SIGTERM)
        deadline, graceful = time.monotonic() + SESSION_GRACE_S, False
        while time.monotonic() < deadline:
            time.sleep(SESSION_CHECK_S)
            reply, _ = sbx.request("dchildren", pid=self.pid)
            if not reply["alive"] or not reply["children"]:
                graceful = True
                break
        if not graceful:
            sbx.request("dtree_signal", pid=self.pid, signal=signal.SIGKILL)
        sbx.request("signal", pid=self.pid, signal=signal.SIGKILL, group=False)
        self.close()
        sbx.request("ddelete", path=self.dir, recursive=True)


def command_dto(cmd):
    d = {"id": cmd["id"], "command": cmd["command"]}
    if cmd["exitCode"] is not None:
        d["exitCode"] = cmd["exitCode"]
    return d


# ---- the service -------------------------------------------------------------------

class Service:
    def __init__(self, args, api_key):
        self.api_key, self.state = api_key, args.state
        self.start_delay, self.minute_s = args.start_delay, args.minute_seconds
        self.snapshots = set(filter(None, (args.snapshots or "").split(","))) or None
        self.target, self.daemon_version = args.target, args.daemon_version
        self.recorder, self.faults = e2b.Recorder(args.record), Faults()
        self.shell = get_shell()
        self.lock = threading.Lock()
        self.sandboxes = {}
        self.toolbox_url = None  # http://127.0.0.1:PORT/toolbox, once the port is known
        self.firewall = Firewall()
        self.firewall.clean_stale()
        self.gids, self.next_gid = set(), 0
        self.stopping = threading.Event()
        self.spawns = queue.Queue()
        threading.Thread(target=self._spawner, daemon=True).start()
        threading.Thread(target=self._auto_stopper, daemon=True).start()

    def _spawner(self):
        """Starts what must outlive the request that asked for it (bubblewrap
        dies with the thread that started it: --die-with-parent)."""
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

    def _auto_stopper(self):
        """Daytona's auto-stop: a started sandbox idle (no toolbox request)
        for autoStopInterval minutes (--minute-seconds each) is stopped."""
        while not self.stopping.wait(0.1):
            now = time.time()
            for sbx in self.all():
                if (sbx.state == "started" and sbx.auto_stop and sbx.busy == 0
                        and now - sbx.last_activity >= sbx.auto_stop * self.minute_s):
                    self.stop(sbx)

    def allocate_gid(self):
        """A group no other sandbox of any fake has (the fake E2B's scheme)."""
        if os.geteuid() != 0:
            raise e2b.FirewallError("networkAllowList needs the fake Daytona to run as root (iptables)")
        with self.lock:
            for _ in range(255):
                self.next_gid = self.next_gid % 255 + 1
                gid = e2b.GID_BASE + (self.firewall.pid << 8) + self.next_gid
                if gid not in self.gids:
                    self.gids.add(gid)
                    return gid
        raise RuntimeError("more than 255 sandboxes with a networkAllowList at once")

    def release_gid(self, gid):
        with self.lock:
            self.gids.discard(gid)

    def add(self, sbx):
        with self.lock:
            if any(s.name == sbx.name for s in self.sandboxes.values()):
                return False
            self.sandboxes[sbx.id] = sbx
            return True

    def find(self, id_or_name):
        with self.lock:
            sbx = self.sandboxes.get(id_or_name)
            if sbx is None:
                sbx = next((s for s in self.sandboxes.values() if s.name == id_or_name), None)
            return sbx

    def all(self):
        with self.lock:
            return list(self.sandboxes.values())

    def stop(self, sbx):
        with sbx.lock:
            if sbx.state != "started":
                return
            sbx.set_state("stopping", "stopped")
        sbx.halt()
        with sbx.lock:
            if sbx.desired == "stopped":
                sbx.set_state("stopped")

    def destroy(self, sbx):
        with self.lock:
            if self.sandboxes.get(sbx.id) is not sbx:
                return False
        with sbx.lock:
            sbx.set_state("destroying", "destroyed")
        sbx.remove()
        with self.lock:
            self.sandboxes.pop(sbx.id, None)
        sbx.set_state("destroyed")
        return True

    def close(self):
        self.stopping.set()
        for sbx in self.all():
            self.destroy(sbx)


# ---- HTTP -------------------------------------------------------------------------

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-daytona"
    drop_budget = None
    # The fake E2B's request and answer plumbing (Content-Length and chunked
    # bodies; drop_after_bytes; the connection reset).
    read_body = e2b.Handler.read_body
    json_body = e2b.Handler.json_body
    write = e2b.Handler.write
    abort = e2b.Handler.abort
    chunk = e2b.Handler.chunk
    end_stream = e2b.Handler.end_stream

    def log_message(self, fmt, *args):
        sys.stderr.write(f"fake-daytona: {self.address_string()} {fmt % args}\n")

    @property
    def service(self):
        return self.server.service

    def send(self, status, body=b"", ctype=None, headers=()):
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

    def api_send(self, status, obj, headers=()):
        self.send(status, api_json(obj), "application/json; charset=utf-8", headers)

    def go_send(self, status, obj):
        self.send(status, go_json(obj), "application/json; charset=utf-8")

    def api_error(self, status, message, headers=()):
        """The API's error (AllExceptionsFilter): path, timestamp, statusCode, error, message."""
        self.api_send(status, {"path": self.path, "timestamp": api_time(), "statusCode": status,
                               "error": http.HTTPStatus(status).phrase, "message": message}, headers)

    def go_error(self, status, message, code=None, source="DAYTONA_DAEMON", path=None, headers=()):
        """common-go's ErrorResponse, as the daemon (and the proxy) send it."""
        body = {"statusCode": status, "message": message}
        if source:
            body["source"] = source
        code = GO_CODES.get(status) if code is None else code
        if code:
            body["code"] = code
        body.update(timestamp=go_time_json(), path=self.daemon_path if path is None else path,
                    method=self.command)
        self.send(status, go_json(body), "application/json", headers)

    # -- the request

    def handle_any(self):
        url = urllib.parse.urlsplit(self.path)
        self.path_only = url.path
        self.query_list = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        self.query = {k: v[0] if len(v) == 1 else v for k, v in self.query_list.items()}
        self.body = self.read_body()
        self.daemon_path = self.path_only
        self.start_delay = None
        self.exit_code_race = False
        try:
            if self.path_only.startswith("/_fake/"):
                return self.admin()
            target = "toolbox" if self.path_only.startswith("/toolbox/") else "api"
            self.record(target)
            fault = self.service.faults.take(self.command, self.path_only, target)
            if fault and self.apply_fault(fault, target):
                return
            if target == "api":
                return self.api()
            return self.toolbox()
        except e2b.Dropped:
            pass
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any

    def record(self, target):
        headers = {k: ("<redacted>" if k.lower() in REDACTED_HEADERS else v) for k, v in self.headers.items()}
        entry = {"time": go_time_json(), "target": target, "method": self.command,
                 "path": self.path_only, "query": self.query, "headers": headers}
        try:
            if self.headers.get("Content-Type", "").startswith("application/json") and self.body:
                entry["body"] = json.loads(self.body)
            elif self.body:
                entry["body_bytes"] = len(self.body)
        except ValueError:
            entry["body_bytes"] = len(self.body)
        self.service.recorder.record(entry)

    def apply_fault(self, fault, target):
        """A fault; True when it answered (or dropped) the request itself."""
        delay = (fault.get("delay_ms") or 0) / 1000 + (fault.get("delay_s") or 0)
        if delay:
            time.sleep(delay)
        if fault.get("start_delay_s") is not None:
            self.start_delay = float(fault["start_delay_s"])
        if fault.get("drop"):
            self.abort()
        if fault.get("drop_after_bytes") is not None:
            self.drop_budget = int(fault["drop_after_bytes"])
        if fault.get("status"):
            status = int(fault["status"])
            headers = [("Retry-After", str(fault["retry_after"]))] if "retry_after" in fault else []
            if "body" in fault:
                body = fault["body"]
                if isinstance(body, (dict, list)):
                    self.send(status, api_json(body), "application/json; charset=utf-8", headers)
                else:
                    self.send(status, str(body).encode(), "text/plain; charset=utf-8", headers)
            elif target == "api":
                default = "ThrottlerException: Too Many Requests" if status == 429 else f"fake fault: injected {status}"
                self.api_error(status, fault.get("message", default), headers)
            else:
                self.go_error(status, fault.get("message", f"fake fault: injected {status}"),
                              source="DAYTONA_PROXY", path=self.path_only, headers=headers)
            return True
        if fault.get("malformed"):
            self.send(200, b'{"id": "' if target == "api" else b'{"exitCode": 0, "resu',
                      "application/json; charset=utf-8")
            return True
        if fault.get("exit_code_race"):
            # the daemon's race (before it waited for content): the command runs to its end,
            # but the synchronous exec reads the exit-code file while the shell has created
            # it and not yet written it, and answers 400
            self.exit_code_race = True
        return False

    # -- /_fake: the tests' own door

    def admin(self):
        path, method, svc = self.path_only, self.command, self.service
        if path == "/_fake/faults":
            if method == "GET":
                return self.api_send(200, svc.faults.list())
            if method == "DELETE":
                svc.faults.clear()
                return self.send(204)
            body = self.json_body()
            try:
                for fault in body if isinstance(body, list) else [body]:
                    svc.faults.add(fault)
            except (TypeError, ValueError, AttributeError) as e:
                return self.api_send(400, {"message": str(e)})
            return self.api_send(201, svc.faults.list())
        if path == "/_fake/sandboxes" and method == "GET":
            out = []
            for s in svc.all():
                agent = s.agent
                out.append({"id": s.id, "name": s.name, "state": s.state, "desiredState": s.desired,
                            "labels": s.labels, "env": s.env_vars, "networkBlockAll": s.network_block_all,
                            "networkAllowList": s.network_allow_list, "autoStopInterval": s.auto_stop,
                            "lastActivityAt": api_time(s.last_activity), "root": s.root,
                            "agentPid": agent.proc.pid if agent else None, "gid": s.gid,
                            "chains": [svc.firewall.chain(s.id)] if s.chains else [],
                            "sessions": sorted(s.sessions)})
            return self.api_send(200, out)
        m = re.fullmatch(r"/_fake/sandboxes/([^/]+)/(kill|stop)", path)
        if m and method == "POST":
            sbx = svc.find(m.group(1))
            if sbx is None:
                return self.api_send(404, {"message": "no such sandbox"})
            if m.group(2) == "kill":
                svc.destroy(sbx)
            else:
                svc.stop(sbx)
            return self.send(204)
        return self.api_send(404, {"message": "no such fake endpoint"})

    # -- the control plane: /api

    API_ROUTES = [
        ("POST", r"/api/sandbox", "create"),
        ("GET", r"/api/sandbox", "list"),
        ("GET", r"/api/sandbox/([^/]+)", "get"),
        ("DELETE", r"/api/sandbox/([^/]+)", "delete"),
        ("POST", r"/api/sandbox/([^/]+)/start", "start"),
        ("POST", r"/api/sandbox/([^/]+)/stop", "stop"),
        ("POST", r"/api/sandbox/([^/]+)/autostop/([^/]+)", "autostop"),
        ("GET", r"/api/sandbox/([^/]+)/toolbox-proxy-url", "proxy_url"),
        ("PUT", r"/api/sandbox/([^/]+)/labels", "labels"),
        ("POST", r"/api/sandbox/([^/]+)/last-activity", "activity"),
        # Daytona has these; the fake does not model them.
        ("GET", r"/api/sandbox/paginated", None),
        ("POST", r"/api/sandbox/([^/]+)/(archive|pause|recover|resize|fork|snapshot|backup|"
                 r"autoarchive/[^/]+|autodelete/[^/]+|autopause/[^/]+|ttl/[^/]+|network-settings|"
                 r"public/[^/]+|ssh-access)", None),
        ("GET", r"/api/sandbox/([^/]+)/(build-logs|build-logs-url|ports/.*|telemetry/.*|forks|parent|"
                r"ancestors|signing-key)", None),
        ("GET", r"/api/(snapshots|volumes|config|organizations)(/.*)?", None),
    ]

    def api(self):
        for method, pattern, name in self.API_ROUTES:
            m = re.fullmatch(pattern, self.path_only)
            if m and method == self.command:
                if not self.api_auth():
                    return
                if name is None:
                    return self.api_error(501, "not implemented by the fake Daytona")
                return getattr(self, "api_" + name)(*m.groups())
        self.api_error(404, f"Cannot {self.command} {self.path_only}")

    def api_auth(self):
        """Authorization: Bearer <key> (the API's message for any failure)."""
        auth = self.headers.get("Authorization", "")
        key = auth[7:].strip() if auth.startswith("Bearer ") else ""
        if key and hmac.compare_digest(key.encode(), self.service.api_key.encode()):
            return True
        self.api_error(401, "Invalid credentials")
        return False

    def lookup(self, id_or_name):
        sbx = self.service.find(urllib.parse.unquote(id_or_name))
        if sbx is None or sbx.state == "destroyed":
            self.api_error(404, f"Sandbox with ID or name {urllib.parse.unquote(id_or_name)} not found")
            return None
        return sbx

    def create_errors(self, body):
        """class-validator's messages for a CreateSandbox body."""
        errors = []
        checks = [("name", str, "must be a string"), ("snapshot", str, "must be a string"),
                  ("user", str, "must be a string"), ("env", dict, "must be an object"),
                  ("labels", dict, "must be an object"), ("public", bool, "must be a boolean value"),
                  ("networkBlockAll", bool, "must be a boolean value"),
                  ("networkAllowList", str, "must be a string"), ("domainAllowList", str, "must be a string"),
                  ("target", str, "must be a string"), ("buildInfo", dict, "must be an object"),
                  ("linkedSandbox", str, "must be a string")]
        for key, kind, message in checks:
            if body.get(key) is not None and not isinstance(body[key], kind):
                errors.append(f"{key} {message}")
        for key, lo, hi in (("cpu", 0, None), ("gpu", 0, 1), ("memory", 0, None), ("disk", 0, None),
                            ("autoStopInterval", None, None), ("autoArchiveInterval", None, None),
                            ("autoDeleteInterval", None, None)):
            v = body.get(key)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                errors.append(f"{key} must be a number conforming to the specified constraints")
            elif lo is not None and v < lo:
                errors.append(f"{key} must not be less than {lo}")
            elif hi is not None and v > hi:
                errors.append(f"{key} must not be greater than {hi}")
        for key in ("env", "labels"):
            if isinstance(body.get(key), dict) and not all(isinstance(v, str) for v in body[key].values()):
                errors.append(f"{key} values must be strings")
        return errors

    def api_create(self):
        body = self.json_body()
        if not isinstance(body, dict):
            return self.api_error(400, "Unexpected token in JSON body" if self.body else "Invalid request body")
        errors = self.create_errors(body)
        if errors:
            return self.api_error(400, ", ".join(errors))
        build = body.get("buildInfo")
        if build:
            if body.get("snapshot"):
                return self.api_error(400, "Cannot specify a snapshot when using a build info entry")
            if not isinstance(build.get("dockerfileContent"), str) or not build["dockerfileContent"].strip():
                return self.api_error(400, "buildInfo.dockerfileContent must be a string")
            snapshot = None
            now = api_time()
            ref = "daytona-" + uuid.uuid5(uuid.NAMESPACE_URL, build["dockerfileContent"] + json.dumps(
                build.get("contextHashes") or [])).hex + ":daytona"
            build_info = {"dockerfileContent": build["dockerfileContent"],
                          "contextHashes": build.get("contextHashes") or [],
                          "createdAt": now, "updatedAt": now, "snapshotRef": ref}
        else:
            if body.get("cpu") or body.get("gpu") or body.get("memory") or body.get("disk"):
                return self.api_error(400, "Cannot specify Sandbox resources when using a snapshot")
            snapshot = (body.get("snapshot") or "").strip() or DEFAULT_SNAPSHOT
            known = self.service.snapshots
            if known is not None and snapshot not in known and snapshot != DEFAULT_SNAPSHOT:
                return self.api_error(400, f"Snapshot {snapshot} not found. Did you add it through the Daytona Dashboard?")
            build_info = None
        if body.get("networkAllowList") is not None:
            err = validate_network_allow_list(body["networkAllowList"])
            if err:
                return self.api_error(400, err)
        if body.get("domainAllowList") is not None:
            err = validate_domain_allow_list(body["domainAllowList"])
            if err:
                return self.api_error(400, err)
        if body.get("autoStopInterval") is not None and body["autoStopInterval"] < 0:
            return self.api_error(400, "Auto-stop interval must be non-negative")
        sbx = Sandbox(self.service, body, snapshot, build_info)
        if not self.service.add(sbx):
            shutil.rmtree(sbx.root, ignore_errors=True)
            return self.api_error(409, f"Sandbox with name {body.get('name')} already exists")
        # The API answers with the sandbox as it was inserted, 'creating', after
        # waiting for it to start (snapshots) or at once (builds): a client polls.
        answer = sbx.dto()
        sbx.bring_up(self.service.start_delay if self.start_delay is None else self.start_delay)
        self.api_send(200, answer)

    def api_list(self):
        q = self.query_list
        labels = None
        if "labels" in q:
            try:
                labels = json.loads(q["labels"][0])
                if not isinstance(labels, dict):
                    raise ValueError
            except ValueError:
                return self.api_error(400, "Invalid labels JSON format")
        limit = 100
        if "limit" in q:
            try:
                limit = int(q["limit"][0])
            except ValueError:
                return self.api_error(400, "limit must be an integer number")
            if limit < 1:
                return self.api_error(400, "limit must not be less than 1")
            if limit > 200:
                return self.api_error(400, "limit must not be greater than 200")
        states = [s for v in q.get("states", []) for s in v.split(",") if s]
        sandboxes = [s for s in self.service.all() if s.state != "destroyed"]
        if labels:
            sandboxes = [s for s in sandboxes if all(s.labels.get(k) == v for k, v in labels.items())]
        if states:
            sandboxes = [s for s in sandboxes if s.state in states]
        for key, attr in (("id", "id"), ("name", "name")):
            if key in q:
                prefix = q[key][0].lower()
                sandboxes = [s for s in sandboxes if getattr(s, attr).lower().startswith(prefix)]
        asc = (q.get("order") or ["desc"])[0] == "asc"
        field = (q.get("sort") or ["createdAt"])[0]
        keyf = {"name": lambda s: s.name, "cpu": lambda s: s.cpu, "memoryGib": lambda s: s.memory,
                "diskGib": lambda s: s.disk, "lastActivityAt": lambda s: s.last_activity}.get(
            field, lambda s: s.created_at)
        sandboxes.sort(key=lambda s: (keyf(s), s.id), reverse=not asc)
        if "cursor" in q:
            try:
                cur = json.loads(base64.b64decode(q["cursor"][0]))
                after = (cur["sortValue"], cur["id"])
            except (ValueError, KeyError, TypeError):
                return self.api_error(400, "Invalid cursor")
            sandboxes = [s for s in sandboxes if ((keyf(s), s.id) > tuple(after) if asc else (keyf(s), s.id) < tuple(after))]
        page, more = sandboxes[:limit], len(sandboxes) > limit
        cursor = None
        if more:
            last = page[-1]
            cursor = base64.b64encode(json.dumps({"sortValue": keyf(last), "id": last.id}).encode()).decode()
        self.api_send(200, {"items": [s.list_item() for s in page], "nextCursor": cursor})

    def api_get(self, sid):
        sbx = self.lookup(sid)
        if sbx:
            self.api_send(200, sbx.dto())

    def api_delete(self, sid):
        sbx = self.lookup(sid)
        if not sbx:
            return
        if sbx.state in ("creating", "starting", "stopping", "destroying"):
            return self.api_error(409, "Sandbox state change in progress")
        with sbx.lock:
            sbx.set_state(sbx.state, "destroyed")
            answer = sbx.dto()
            answer["state"] = "destroying"
        self.service.destroy(sbx)
        self.api_send(200, answer)

    def api_start(self, sid):
        sbx = self.lookup(sid)
        if not sbx:
            return
        with sbx.lock:
            if sbx.state == "started" and sbx.desired == "started":
                return self.api_send(200, sbx.dto())
            if sbx.state == "error":
                return self.api_error(400, "Sandbox is in an errored state")
            if sbx.state != sbx.desired:
                return self.api_error(409, "Sandbox state change in progress")
            if sbx.state != "stopped":
                return self.api_error(400, "Sandbox is not in valid state")
            sbx.set_state("starting", "started")
            answer = sbx.dto()
        sbx.bring_up(self.service.start_delay if self.start_delay is None else self.start_delay)
        self.api_send(200, answer)

    def api_stop(self, sid):
        sbx = self.lookup(sid)
        if not sbx:
            return
        with sbx.lock:
            if sbx.state == "error":
                return self.api_error(400, "Sandbox is in an errored state")
            if sbx.state != sbx.desired:
                return self.api_error(409, "Sandbox state change in progress")
            if sbx.state != "started":
                return self.api_error(400, "Sandbox is not in a stoppable state")
            answer = sbx.dto()
            answer.update(state="stopping", desiredState="stopped")
        self.service.stop(sbx)
        self.api_send(200, answer)

    def api_autostop(self, sid, interval):
        sbx = self.lookup(sid)
        if not sbx:
            return
        try:
            value = int(interval)
        except ValueError:
            return self.api_error(400, "Validation failed (numeric string is expected)")
        if value < 0:
            return self.api_error(400, "Auto-stop interval must be non-negative")
        sbx.auto_stop = value
        sbx.set_state(sbx.state)
        self.api_send(201, sbx.dto())  # no @HttpCode on this route: Nest's POST default

    def api_proxy_url(self, sid):
        if self.lookup(sid):
            self.api_send(200, {"url": self.service.toolbox_url})

    def api_labels(self, sid):
        sbx = self.lookup(sid)
        if not sbx:
            return
        body = self.json_body()
        if not isinstance(body, dict) or not isinstance(body.get("labels"), dict):
            return self.api_error(400, "labels must be an object")
        sbx.labels = dict(body["labels"])
        sbx.set_state(sbx.state)
        self.api_send(200, sbx.dto())

    def api_activity(self, sid):
        sbx = self.lookup(sid)
        if sbx:
            sbx.touch()
            self.send(201)

    # -- a sandbox's daemon, behind Daytona's proxy: /toolbox/{id}/...

    def toolbox(self):
        m = re.fullmatch(r"/toolbox/([^/]+)(/.*)?", self.path_only)
        sid, rest = urllib.parse.unquote(m.group(1)), m.group(2) or "/"
        self.daemon_path = rest
        auth = self.headers.get("Authorization", "")
        key = auth[7:].strip() if auth.startswith("Bearer ") else ""
        if not key:
            return self.go_error(401, "unauthorized: missing authentication: provide a preview access token "
                                 "(via header, query parameter, or cookie) or use an API key or JWT",
                                 source="DAYTONA_PROXY", path=self.path_only)
        sbx = self.service.find(sid)
        if (not hmac.compare_digest(key.encode(), self.service.api_key.encode()) or sbx is None
                or sbx.id != sid or sbx.state == "destroyed"):
            return self.go_error(401, "unauthorized: authentication failed: Bearer token is invalid",
                                 source="DAYTONA_PROXY", path=self.path_only)
        if sbx.state != "started" or sbx.agent is None:  # the runner finds no running container
            return self.go_error(400, "bad request: no IP address found. Is the Sandbox started?", source=None,
                                 path=f"/sandboxes/{sid}/toolbox{rest}")
        with sbx.busy_lock:
            sbx.busy += 1
        sbx.touch()
        try:
            self.daemon(sbx, rest)
        except DaemonError as e:
            self.go_error(e.status, e.message, e.code)
        except Gone:  # stopped meanwhile: the connection goes with its container
            self.abort()
        finally:
            with sbx.busy_lock:
                sbx.busy -= 1
            sbx.touch()

    UNMODELLED = re.compile(r"/(git|lsp|computeruse|port|proxy)(/.*)?|/process/(pty|interpreter)(/.*)?|"
                            r"/files/(move|find|search|replace|permissions)|/process/session/[^/]+/command/[^/]+/input")

    def daemon(self, sbx, path):
        method = self.command
        routes = {
            ("POST", "/process/execute"): self.d_execute,
            ("POST", "/process/code-run"): self.d_code_run,
            ("GET", "/process/session"): self.d_sessions,
            ("POST", "/process/session"): self.d_session_create,
            ("GET", "/files"): self.d_list, ("GET", "/files/"): self.d_list,
            ("DELETE", "/files"): self.d_delete, ("DELETE", "/files/"): self.d_delete,
            ("GET", "/files/download"): self.d_download,
            ("POST", "/files/bulk-download"): self.d_bulk_download,
            ("GET", "/files/info"): self.d_info,
            ("POST", "/files/folder"): self.d_folder,
            ("POST", "/files/upload"): lambda sbx: self.d_upload(sbx, False),
            ("POST", "/files/upload-v2"): lambda sbx: self.d_upload(sbx, True),
            ("POST", "/files/bulk-upload"): self.d_bulk_upload,
            ("GET", "/user-home-dir"): lambda sbx: self.go_send(200, {"dir": HOME}),
            ("GET", "/project-dir"): lambda sbx: self.go_send(200, {"dir": HOME}),
            ("GET", "/work-dir"): lambda sbx: self.go_send(200, {"dir": HOME}),
            ("GET", "/version"): lambda sbx: self.go_send(200, {"version": self.service.daemon_version}),
        }
        handler = routes.get((method, path))
        if handler:
            return handler(sbx)
        m = re.fullmatch(r"/process/session/([^/]+)(?:/(exec)|/command/([^/]+)(/logs)?)?", path)
        if m and not (m.group(3) and m.group(2)):
            sid, exe, cid, logs = m.groups()
            if exe and method == "POST":
                return self.d_session_exec(sbx, sid)
            if cid and method == "GET":
                return self.d_session_logs(sbx, sid, cid) if logs else self.d_session_command(sbx, sid, cid)
            if not exe and not cid and method == "GET":
                return self.d_session_get(sbx, sid)
            if not exe and not cid and method == "DELETE":
                return self.d_session_delete(sbx, sid)
        if self.UNMODELLED.fullmatch(path):
            raise DaemonError(501, "not implemented by the fake Daytona", "")
        self.send(404, b"404 page not found", "text/plain")

    def bind(self, kind, required=()):
        """A JSON body as gin's ShouldBindJSON and the daemon's validator take it."""
        body = self.json_body()
        if not isinstance(body, dict):
            raise DaemonError(400, "invalid body request: invalid request body: invalid character in JSON body",
                              "INVALID_REQUEST_BODY")
        for field in required:
            if not body.get(field):
                name = field[0].upper() + field[1:]
                raise DaemonError(400, f"invalid body request: Key: '{kind}.{name}' Error:Field validation "
                                  f"for '{name}' failed on the 'required' tag", "INVALID_REQUEST_BODY")
        return body

    @staticmethod
    def check_envs(envs):
        if envs is not None and not isinstance(envs, dict):
            raise DaemonError(400, "invalid body request: envs must be an object", "INVALID_REQUEST_BODY")
        for key in envs or {}:
            if not ENV_KEY.match(key):
                raise DaemonError(400, f"bad request: invalid environment variable name: '{key}'")

    @staticmethod
    def timeout_of(body):
        t = body.get("timeout")
        if t is not None and (isinstance(t, bool) or not isinstance(t, int) or t < 0):
            raise DaemonError(400, "invalid body request: json: cannot unmarshal number into Go struct "
                              "field .timeout of type uint32", "INVALID_REQUEST_BODY")
        return t or 0

    # process

    def d_execute(self, sbx):
        body = self.bind("ExecuteRequest", ["command"])
        if not isinstance(body["command"], str) or not body["command"].strip():
            raise DaemonError(400, "bad request: command cannot be empty or whitespace-only")
        self.check_envs(body.get("envs"))
        timeout = self.timeout_of(body)
        cwd = resolve(body["cwd"]) if isinstance(body.get("cwd"), str) and body["cwd"] else HOME
        code, out, timed_out = sbx.run_shell(body["command"], cwd, sbx.env(body.get("envs")), timeout)
        if code is None:
            return self.go_send(200, {"exitCode": -1, "result": out})
        if timed_out:
            raise DaemonError(408, "command execution timeout", "PROCESS_EXECUTION_TIMEOUT")
        self.go_send(200, {"exitCode": code, "result": out.decode(errors="replace")})

    def d_code_run(self, sbx):
        body = self.bind("CodeRunRequest", ["code", "language"])
        language, argv = body["language"], " ".join(body.get("argv") or [])
        self.check_envs(body.get("envs"))
        timeout = self.timeout_of(body)

        def b64(code):
            return base64.b64encode(code.encode()).decode()
        if language == "python":
            script = f"printf '%s' '{b64(body['code'])}' | base64 -d | python3 -u - {argv}"
        elif language == "javascript":
            script = f"printf '%s' '{b64('process.argv.splice(1, 1);' + chr(10) + body['code'])}' | base64 -d | node - {argv}"
        elif language == "typescript":
            script = "; ".join([
                "_f=/tmp/dtn_$$.ts",
                f"printf '%s' '{b64('process.argv.splice(1, 1);' + chr(10) + body['code'])}' | base64 -d > \"$_f\"",
                f"npm_config_loglevel=error npx ts-node -T --ignore-diagnostics 5107 -O '{{\"module\":\"CommonJS\"}}' \"$_f\" {argv}",
                "_dtn_ec=$?", 'rm -f "$_f"', "exit $_dtn_ec"])
        else:
            raise DaemonError(400, f"bad request: unsupported language: {language}")
        code, out, timed_out = sbx.run_shell(script, HOME, sbx.env(body.get("envs")), timeout)
        if code is None:
            return self.go_send(200, {"exitCode": -1, "result": out})
        if timed_out:
            raise DaemonError(408, "command execution timeout", "PROCESS_EXECUTION_TIMEOUT")
        result, artifacts = parse_artifacts(out.decode(errors="replace"))
        answer = {"exitCode": code, "result": result}
        if artifacts:
            answer["artifacts"] = artifacts
        self.go_send(200, answer)

    # sessions

    def session_of(self, sbx, sid):
        s = sbx.sessions.get(sid)
        if s is None:
            raise DaemonError(404, "session not found", "PROCESS_NOT_FOUND")
        return s

    def d_sessions(self, sbx):
        self.go_send(200, [s.dto() for s in list(sbx.sessions.values())])

    def d_session_create(self, sbx):
        body = self.bind("CreateSessionRequest", ["sessionId"])
        sid = body["sessionId"]
        if sid == "entrypoint":
            raise DaemonError(400, "bad request: provided session ID is reserved and cannot be created/overridden")
        if sid in sbx.sessions:
            raise DaemonError(409, "conflict: session already exists")
        session = Session(sbx, sid)
        with sbx.lock:
            if sbx.agent is None:
                session.close()
                raise Gone()
            sbx.sessions[sid] = session
        self.send(201)

    def d_session_get(self, sbx, sid):
        self.go_send(200, self.session_of(sbx, sid).dto())

    def d_session_delete(self, sbx, sid):
        if sid == "entrypoint":
            raise DaemonError(400, "bad request: can't delete entrypoint session")
        session = self.session_of(sbx, sid)
        session.delete()
        sbx.sessions.pop(sid, None)
        self.send(204)

    def d_session_exec(self, sbx, sid):
        if sid == "entrypoint":
            raise DaemonError(400, "bad request: can't execute command in entrypoint session")
        body = self.bind("SessionExecuteRequest", ["command"])
        if not isinstance(body["command"], str) or not body["command"].strip():
            raise DaemonError(400, "bad request: command cannot be empty")
        session = sbx.sessions.get(sid)
        if session is None:
            raise DaemonError(500, "failed to execute command: session not found", "")
        combined, skip = output_mode(self.headers)
        run_async = bool(body.get("runAsync") or body.get("async"))
        result = session.execute(body["command"], run_async, combined, skip, self.exit_code_race)
        self.go_send(202 if run_async else 200, result)

    def d_session_command(self, sbx, sid, cid):
        self.go_send(200, command_dto(self.session_of(sbx, sid).command(cid)))

    def d_session_logs(self, sbx, sid, cid):
        session = self.session_of(sbx, sid)
        if cid not in session.commands:
            raise DaemonError(404, "command not found", "PROCESS_NOT_FOUND")
        if self.headers.get("Upgrade", "").lower() == "websocket" or self.query.get("follow") == "true":
            raise DaemonError(501, "following logs (WebSocket) is not implemented by the fake Daytona", "")
        log = f"{session.dir}/{cid}/output.log"
        data = sbx.read_file(log)
        if data is None:
            raise DaemonError(404, f"not found: open {log}: no such file or directory")
        combined, skip = output_mode(self.headers)
        if combined:
            data = strip_markers(data)
        if not skip and not combined:
            out, err = demux(data)
            return self.go_send(200, {"output": data.decode(errors="replace"), "stdout": out.decode(errors="replace"),
                                      "stderr": err.decode(errors="replace")})
        self.send(200, data, "text/plain; charset=utf-8")

    # files

    def file_info(self, raw):
        ns = raw["mtime_ns"]
        return {"name": raw["name"], "size": raw["size"], "mode": raw["mode"], "modTime": go_time_string(ns),
                "modifiedAt": go_time_json(ns), "isDir": raw["isDir"], "owner": str(raw["uid"]),
                "group": str(raw["gid"]), "permissions": f"{raw['perm']:04o}"}

    @staticmethod
    def path_error(err):
        """A file operation's error as the daemon answers it."""
        if err["kind"] == "not_found":
            return DaemonError(404, err["message"], "FILE_NOT_FOUND")
        if err["kind"] == "permission":
            return DaemonError(403, err["message"], "FILE_ACCESS_DENIED")
        return DaemonError(400, "bad request: " + err["message"])

    def required_path(self):
        raw = self.query.get("path", "")
        if not isinstance(raw, str) or raw == "":
            raise DaemonError(400, "bad request: path is required")
        return raw

    def d_info(self, sbx):
        reply, _ = sbx.request("dinfo", path=resolve(self.required_path()))
        if "error" in reply:
            raise self.path_error(reply["error"])
        self.go_send(200, self.file_info(reply["info"]))

    def d_list(self, sbx):
        raw = self.query.get("path") or "."
        reply, _ = sbx.request("dlist", path=resolve(raw))
        if "error" in reply:
            raise self.path_error(reply["error"])
        self.go_send(200, [self.file_info(i) for i in reply["infos"]])

    def d_delete(self, sbx):
        reply, _ = sbx.request("ddelete", path=resolve(self.required_path()),
                               recursive=self.query.get("recursive") == "true")
        if "error" in reply:
            raise self.path_error(reply["error"])
        self.send(204)

    def d_folder(self, sbx):
        path, mode = self.required_path(), self.query.get("mode") or ""
        perm = 0o755
        if mode:
            try:
                perm = int(mode, 8)
                if perm >= 1 << 32:
                    raise ValueError
            except ValueError:
                raise DaemonError(400, "bad request: invalid mode format")
        reply, _ = sbx.request("dmkdir", path=resolve(path), mode=perm & 0o7777)
        if "error" in reply:
            raise DaemonError(400, "bad request: " + reply["error"]["message"])
        self.send(201)

    def d_download(self, sbx):
        path = resolve(self.required_path())
        reply, fds = sbx.request("dopen", path=path, mode="r")
        if "error" in reply:
            if reply["error"]["kind"] == "is_dir":
                raise DaemonError(400, "bad request: path must be a file")
            raise self.path_error(reply["error"])
        data = read_fd(fds[0])
        name = os.path.basename(path)
        self.send(200, data, "application/octet-stream", [
            ("Content-Description", "File Transfer"),
            ("Content-Disposition", f"attachment; filename=\"{to_latin1(name)}\"; filename*=utf-8''{rfc5987(name)}"),
            ("Content-Transfer-Encoding", "binary"), ("Expires", "0"), ("Cache-Control", "must-revalidate"),
            ("Pragma", "public"), ("Accept-Ranges", "bytes"),
            ("Last-Modified", time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(reply["mtime_ns"] / 1e9)))])

    def d_bulk_download(self, sbx):
        try:
            body = json.loads(self.body or b"")
        except ValueError:
            return self.send(400)  # gin's BindJSON aborts with the status alone
        paths = body.get("paths") if isinstance(body, dict) else None
        if not isinstance(paths, list) or not paths or not all(isinstance(p, str) for p in paths):
            raise DaemonError(400, 'bad request: request body must be {"paths": [ ... ]} and non-empty')
        self.send_response(200)
        self.send_header("Content-Type", f"multipart/form-data; boundary={MULTIPART_BOUNDARY}")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        first = True
        for path in paths:
            disposition = f"; filename=\"{to_latin1(path)}\"; filename*=utf-8''{rfc5987(path)}"
            lead = b"" if first else b"\r\n"
            first = False
            data, error = None, None
            if path == "":
                error = (400, "", "invalid file path: path is empty")
            else:
                reply, fds = sbx.request("dopen", path=resolve(path), mode="r")
                if "error" in reply:
                    kind = reply["error"]["kind"]
                    error = {"not_found": (404, "FILE_NOT_FOUND", f"file not found: {path}"),
                             "permission": (403, "FILE_ACCESS_DENIED", f"permission denied: {path}"),
                             "is_dir": (400, "", f"invalid file path: path points to a directory: {path}")}.get(
                        kind, (500, "", f"failed to open file: {reply['error']['message']}"))
                else:
                    data = read_fd(fds[0])
            if error:
                status, code, message = error
                payload = {"statusCode": status, "message": message, "source": "DAYTONA_DAEMON"}
                if code:
                    payload["code"] = code
                payload.update(timestamp=go_time_json(), path=path, method=self.command)
                head = (f"--{MULTIPART_BOUNDARY}\r\nContent-Disposition: form-data; name=\"error\"{disposition}\r\n"
                        f"Content-Type: application/json; charset=utf-8\r\n\r\n")
                self.chunk(lead + head.encode() + go_json(payload))
            else:
                ctype = GO_MIME.get(os.path.splitext(path)[1].lower(), "application/octet-stream")
                head = (f"--{MULTIPART_BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"{disposition}\r\n"
                        f"Content-Length: {len(data)}\r\nContent-Type: {ctype}\r\n\r\n")
                self.chunk(lead + head.encode() + data)
        self.chunk(f"\r\n--{MULTIPART_BOUNDARY}--\r\n".encode())
        self.end_stream()

    def multipart(self):
        ctype = self.headers.get("Content-Type", "")
        m = re.search(r'boundary="?([^";]+)"?', ctype)
        if not ctype.lower().startswith("multipart/") or not m:
            return None
        return e2b.parse_multipart(self.body, m.group(1).encode())

    def d_upload(self, sbx, v2):
        raw = self.query.get("path", "")
        if not isinstance(raw, str) or raw == "":
            return self.send(400)  # AbortWithError: the status alone, no body
        if self.headers.get("Content-Type", "").lower().startswith("multipart/form-data"):
            parts = [p for p in (self.multipart() or []) if p[0] == "file"]
            if not parts:
                return self.send(400)
            data = parts[0][2]
        else:
            data = self.body
        if sbx.write_file(resolve(raw), data):
            return self.send(400)
        if v2:
            return self.go_send(200, {"name": os.path.basename(raw), "path": raw, "type": "file"})
        self.send(200)

    def d_bulk_upload(self, sbx):
        parts = self.multipart()
        if parts is None:
            return self.go_send(400, {"errors": ["invalid multipart form"]})
        dests, errs, files = {}, [], []
        for name, _, content in parts:
            name = name or ""
            idx = name[len("files["):] if name.startswith("files[") else name
            idx = idx.removesuffix("].path").removesuffix("].file")
            if name.endswith(".path"):
                dest = content.decode(errors="replace").strip()
                if not dest:
                    errs.append(f"path[{idx}]: empty path")
                    continue
                dests[idx] = dest
            elif name.endswith(".file"):
                dest = dests.get(idx)
                if dest is None:
                    errs.append(f"file[{idx}]: missing .path metadata")
                    continue
                err = sbx.write_file(resolve(dest), content)
                if err:
                    errs.append(f"{dest}: create: {err['message']}")
                    continue
                files.append({"path": dest, "bytes": len(content)})
        if errs:
            return self.go_send(400, {"errors": errs, "files": files or None})
        self.go_send(200, {"files": files or None})


def main():
    parser = argparse.ArgumentParser(description="A fake Daytona service for tests.")
    parser.add_argument("--port-file", help="write the port picked here")
    parser.add_argument("--record", help="append one JSON line per request here")
    parser.add_argument("--state", help="the directory for the sandboxes' trees (default: a temporary one)")
    parser.add_argument("--start-delay", type=float, default=0.0,
                        help="seconds a sandbox takes to be 'started' after create or start (default 0)")
    parser.add_argument("--minute-seconds", type=float, default=60.0,
                        help="how many seconds an auto-stop minute lasts (default 60)")
    parser.add_argument("--snapshots", default="",
                        help="comma-separated snapshot names that exist (default: any name does)")
    parser.add_argument("--target", default="us", help="the default target (region) of sandboxes")
    parser.add_argument("--daemon-version", default="v0.190.0", help="the daemon version to advertise")
    args = parser.parse_args()
    api_key = os.environ.get("FAKE_DAYTONA_API_KEY")
    if not api_key:
        sys.exit("fake_daytona.py: FAKE_DAYTONA_API_KEY must be set to the valid key")
    own_state = args.state is None
    if own_state:
        args.state = tempfile.mkdtemp(prefix="fake-daytona.")
    os.makedirs(args.state, exist_ok=True)

    service = Service(args, api_key)
    server = e2b.Server(("127.0.0.1", 0), Handler)
    server.service = service
    port = server.server_address[1]
    service.toolbox_url = f"http://127.0.0.1:{port}/toolbox"
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
