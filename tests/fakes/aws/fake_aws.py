#!/usr/bin/env python3
# tests/fakes/aws/fake_aws.py - a protocol-faithful fake of the AWS services the ec2_ssm plugin
# talks to, for tests: Systems Manager (SSM) Run Command, STS, the EC2 instance metadata service
# (IMDSv2) and the ECS container credentials endpoint. What talks to it sees AWS's wire
# (Signature Version 4 checked as AWS checks it, AWS's error names and messages), and its
# commands really run.
#
#   fake_aws.py [--port-file F] [--record F] [--state DIR] [--region R] [--credentials FILE]
#       [--instance ID]... [--cred-seconds N] [--invocation-delay-ms N] [--delivery-delay-ms N]
#       [--web-identity-token T] [--ecs-auth-token T] [--clock-skew-s N] [--account A]
#       [--imds-role NAME] [--imds-v1]
#
# One process, one port on 127.0.0.1 (picked by the kernel; printed as the first line of
# stdout, "listening on http://127.0.0.1:PORT", and written to --port-file), serving what AWS
# serves on several hosts:
#   - SSM (AWS JSON 1.1: POST with X-Amz-Target: AmazonSSM.<Op>) and STS (the query protocol:
#     a form body Action=...&Version=2011-06-15, XML answers), both at /, signed with SigV4
#     (sigv4.py) by a key of --credentials or one the fake issued; ssm.py, sts.py;
#   - IMDSv2 under /latest/ and the ECS credentials endpoint at /_ecs/credentials (metadata.py);
#   - /_fake/..., the tests' own door: faults, instances, commands, issued credentials, clock.
# Every request but the tests' own is recorded (--record: one JSON line each, written before
# the answer is sent; secrets redacted). SIGTERM kills every command's process group and exits
# 0. README.md beside this file says what is faithful and what is not, and which SDK versions
# it was held to. Python standard library only.
import argparse
import datetime
import email.utils
import http.server
import json
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # the helpers below: no __pycache__ in the (maybe read-only) source tree
import creds  # noqa: E402
import metadata  # noqa: E402
import protocol  # noqa: E402
import sigv4  # noqa: E402
import ssm  # noqa: E402
import sts  # noqa: E402
from protocol import ApiError  # noqa: E402

SSM_PREFIX = "AmazonSSM."
# A SigV4 refusal, as each protocol answers it: (status, code[, message]).
AUTH_ERRORS = {
    "missing": {"json": (400, "MissingAuthenticationTokenException"),
                "query": (403, "MissingAuthenticationToken", "Request is missing Authentication Token")},
    "incomplete": {"json": (400, "IncompleteSignatureException"), "query": (400, "IncompleteSignature")},
    "signature": {"json": (400, "InvalidSignatureException"), "query": (403, "SignatureDoesNotMatch")},
    "unknown_key": {"json": (400, "UnrecognizedClientException"), "query": (403, "InvalidClientTokenId")},
    "expired_token": {"json": (400, "ExpiredTokenException"), "query": (400, "ExpiredToken")},
}
# A fault's default error name by status and protocol.
FAULT_CODES = {"json": {400: "ThrottlingException", 429: "ThrottlingException", 500: "InternalServerError",
                        503: "ServiceUnavailable"},
               "query": {400: "Throttling", 429: "Throttling", 500: "InternalFailure", 503: "ServiceUnavailable"}}
REDACTED_HEADERS = {"x-amz-security-token", "x-aws-ec2-metadata-token"}
REDACTED_PARAMS = {"WebIdentityToken"}


def now_iso(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Dropped(Exception):
    """A fault closed the connection: nothing more to send."""


class Faults:
    """Faults the tests queue with POST /_fake/faults. Each applies to the next `count` requests
    (default 1; 0: every one) whose target matches: an SSM X-Amz-Target (AmazonSSM.SendCommand),
    an STS Action (AssumeRole), a service (ssm, sts, imds, ecs), or, when absent, any SSM or STS
    request. It answers `status` with the error `type` (SSM's __type / STS's Code) and
    `message`, after `delay_s`; or, with `drop`, closes the connection without an answer."""

    KEYS = {"status", "type", "message", "target", "count", "delay_s", "drop"}

    def __init__(self):
        self.lock = threading.Lock()
        self.faults = []

    def add(self, fault):
        if not isinstance(fault, dict):
            raise ValueError("a fault is a JSON object")
        unknown = set(fault) - self.KEYS
        if unknown:
            raise ValueError(f"unknown fault keys: {sorted(unknown)}")
        with self.lock:
            self.faults.append(dict(fault, count=int(fault.get("count", 1))))

    def take(self, service, op):
        with self.lock:
            for f in self.faults:
                t = f.get("target")
                if (t is None and service in ("ssm", "sts")) or t == service or (op is not None and t == op):
                    if f["count"] > 0:
                        f["count"] -= 1
                        if f["count"] == 0:
                            self.faults.remove(f)
                    return f
        return None

    def list(self):
        with self.lock:
            return [dict(f) for f in self.faults]

    def clear(self):
        with self.lock:
            self.faults = []


class Recorder:
    def __init__(self, path):
        self.f = open(path, "a", buffering=1) if path else None
        self.lock = threading.Lock()

    def record(self, entry):
        if self.f:
            with self.lock:
                self.f.write(json.dumps(entry) + "\n")


class Service:
    def __init__(self, args):
        self.args = args
        self.region = args.region
        self.skew = float(args.clock_skew_s)
        self.store = creds.Store(args.account)
        if args.credentials:
            self.store.load(args.credentials)
        self.ssm = ssm.Ssm(region=args.region, state=args.state, clock=self.clock,
                           invocation_delay_s=args.invocation_delay_ms / 1000,
                           delivery_delay_s=args.delivery_delay_ms / 1000, instances=args.instance or [])
        self.sts = sts.Sts(self.store, args.cred_seconds, args.web_identity_token)
        self.metadata = metadata.Metadata(
            store=self.store, region=args.region, account=args.account,
            instance_id=(args.instance or ["i-0123456789abcdef0"])[0], role=args.imds_role,
            cred_seconds=args.cred_seconds, allow_v1=args.imds_v1, ecs_auth_token=args.ecs_auth_token,
            clock=self.clock)
        self.faults = Faults()
        self.recorder = Recorder(args.record)

    def clock(self):
        """The server's clock: the machine's, off by --clock-skew-s."""
        return time.time() + self.skew


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-aws"

    def log_message(self, fmt, *args):
        sys.stderr.write(f"fake-aws: {self.address_string()} {fmt % args}\n")

    def date_time_string(self, timestamp=None):
        # The Date header comes from the server's (skewed) clock: the SDKs correct theirs by it.
        return email.utils.formatdate(self.service.clock() if timestamp is None else timestamp, usegmt=True)

    @property
    def service(self):
        return self.server.service

    # -- the request -----------------------------------------------------------------------

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

    def handle_any(self):
        self.raw_path, _, self.raw_query = self.path.partition("?")
        self.path_only = urllib.parse.unquote(self.raw_path)
        self.body = self.read_body()
        self.entry = None
        try:
            if self.path_only.startswith("/_fake/"):
                return self.admin()
            if self.path_only.startswith("/latest/"):
                return self.metadata("imds")
            if self.path_only == "/_ecs/credentials":
                return self.metadata("ecs")
            return self.api()
        except Dropped:
            pass
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = handle_any

    def headers_for_record(self, redact=()):
        return {k: ("<redacted>" if k.lower() in REDACTED_HEADERS or k.lower() in redact else v)
                for k, v in self.headers.items()}

    def start_entry(self, service, **extra):
        self.entry = {"time": now_iso(time.time()), "method": self.command, "path": self.path_only,
                      "query": urllib.parse.parse_qs(self.raw_query, keep_blank_values=True),
                      "service": service, **extra}

    # -- the answer --------------------------------------------------------------------------

    def send(self, status, body, ctype, headers=()):
        """Records the request (with what it is answered), then answers."""
        if isinstance(body, str):
            body = body.encode()
        if self.entry is not None:
            self.entry["status"] = status
            self.service.recorder.record(self.entry)
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def drop(self):
        if self.entry is not None:
            self.entry["status"] = None
            self.entry["dropped"] = True
            self.service.recorder.record(self.entry)
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        raise Dropped()

    def send_json(self, status, obj, request_id, headers=()):
        self.send(status, json.dumps(obj), protocol.JSON_CONTENT_TYPE,
                  [("x-amzn-RequestId", request_id), *headers])

    def send_api_error(self, proto, err, request_id):
        if self.entry is not None:
            self.entry["error"] = err.code
            self.entry["message"] = err.message
        if proto == "json":
            body, error_type = protocol.json_error(err)
            return self.send_json(err.status, body, request_id, [("x-amzn-ErrorType", error_type)])
        return self.send(err.status, protocol.xml_error(err, request_id), protocol.XML_CONTENT_TYPE,
                         [("x-amzn-RequestId", request_id)])

    def auth_error(self, proto, e):
        status, code, *message = AUTH_ERRORS[e.kind][proto]
        return ApiError(status, code, message[0] if message else e.message,
                        namespace=protocol.CORAL if proto == "json" else None)

    # -- faults ------------------------------------------------------------------------------

    def apply_fault(self, fault, proto, request_id):
        """True when the fault answered the request itself."""
        if fault.get("delay_s"):
            time.sleep(float(fault["delay_s"]))
        if fault.get("drop"):
            self.drop()
        if not fault.get("status"):
            return False
        status = int(fault["status"])
        if self.entry is not None:
            self.entry["fault"] = True
        if proto in ("json", "query"):
            code = fault.get("type") or FAULT_CODES[proto].get(status, "InternalFailure")
            self.send_api_error(proto, ApiError(status, code, fault.get("message", f"fake fault: injected {status}"),
                                                sender=status < 500), request_id)
        else:
            self.send(status, fault.get("message", ""), "text/plain")
        return True

    # -- SSM and STS --------------------------------------------------------------------------

    def api(self):
        svc = self.service
        request_id = str(uuid.uuid4())
        target = self.headers.get("X-Amz-Target")
        if target is not None:
            proto, service, op = "json", "ssm", target
            try:
                body = json.loads(self.body or b"{}")
            except ValueError:
                body = None
            self.start_entry("ssm", target=target, body=body, request_id=request_id)
        else:
            proto, service = "query", "sts"
            params = {k: v[-1] for k, v in urllib.parse.parse_qs(self.raw_query, keep_blank_values=True).items()}
            if self.command == "POST":
                params.update({k: v[-1] for k, v in urllib.parse.parse_qs(
                    self.body.decode("utf-8", errors="replace"), keep_blank_values=True).items()})
            op = params.get("Action")
            self.start_entry("sts", action=op, request_id=request_id,
                             body={k: ("<redacted>" if k in REDACTED_PARAMS else v) for k, v in params.items()})
        self.entry["headers"] = self.headers_for_record()
        fault = svc.faults.take(service, op)
        if fault and self.apply_fault(fault, proto, request_id):
            return
        try:
            now = svc.clock()
            caller = None
            if not (proto == "query" and op in sts.UNSIGNED_ACTIONS):
                try:
                    auth, caller = sigv4.verify(self.command, self.raw_path, self.raw_query, self.headers,
                                                self.body, region=svc.region, service=service, now=now,
                                                lookup=svc.store.lookup)
                    self.entry["key_id"] = auth["key_id"]
                    self.entry["signed_headers"] = auth["signed_headers"]
                except sigv4.SigV4Error as e:
                    if "Authorization" in self.headers:
                        self.entry["key_id"] = self.headers["Authorization"].partition("Credential=")[2].split("/")[0]
                    raise self.auth_error(proto, e) from None
            if proto == "json":
                if not target.startswith(SSM_PREFIX):
                    raise ApiError(400, "UnknownOperationException", None, namespace=protocol.CORAL)
                ctype = self.headers.get("Content-Type", "")
                if not re.match(r"^application/x-amz-json-1\.[01]\b", ctype):
                    raise ApiError(400, "SerializationException", None, namespace=protocol.CORAL)
                if body is None:
                    raise ApiError(400, "SerializationException", None, namespace=protocol.CORAL)
                result = svc.ssm.call(target[len(SSM_PREFIX):], body)
                return self.send_json(200, result, request_id)
            if op is None:
                raise ApiError(400, "MissingAction", "Missing Action")
            if params.get("Version") != protocol.STS_VERSION:
                raise ApiError(400, "InvalidAction", f"Could not find operation {op} for version "
                               f"{params.get('Version', 'NO_VERSION_SPECIFIED')}")
            result = svc.sts.call(op, params, caller, now)
            return self.send(200, protocol.xml_response(op, result, request_id), protocol.XML_CONTENT_TYPE,
                             [("x-amzn-RequestId", request_id)])
        except ApiError as e:
            return self.send_api_error(proto, e, request_id)

    # -- IMDS and ECS -----------------------------------------------------------------------

    def metadata(self, which):
        self.start_entry(which, headers=self.headers_for_record({"authorization"} if which == "ecs" else ()))
        fault = self.service.faults.take(which, None)
        if fault and self.apply_fault(fault, which, None):
            return
        md = self.service.metadata
        status, ctype, body, headers = (md.imds(self.command, self.path_only, self.headers) if which == "imds"
                                        else md.ecs(self.command, self.headers))
        self.send(status, body, ctype, headers)

    # -- /_fake: the tests' own door ------------------------------------------------------------

    def admin(self):
        svc, path, method = self.service, self.path_only, self.command
        ok = lambda obj, status=200: self.send(status, json.dumps(obj), "application/json")  # noqa: E731
        fail = lambda status, msg: self.send(status, json.dumps({"message": msg}), "application/json")  # noqa: E731
        try:
            body = json.loads(self.body) if self.body else None
        except ValueError:
            return fail(400, "the body is not JSON")
        if path == "/_fake/faults":
            if method == "GET":
                return ok(svc.faults.list())
            if method == "DELETE":
                svc.faults.clear()
                return ok([])
            try:
                for fault in body if isinstance(body, list) else [body]:
                    svc.faults.add(fault)
            except (TypeError, ValueError) as e:
                return fail(400, str(e))
            return ok(svc.faults.list(), 201)
        if path == "/_fake/instances" and method == "GET":
            return ok(svc.ssm.list_instances())
        m = re.fullmatch(r"/_fake/instances/([^/]+)", path)
        if m and method in ("POST", "PUT"):
            try:
                return ok(svc.ssm.register(m.group(1), body if isinstance(body, dict) else None))
            except ValueError as e:
                return fail(400, str(e))
        if m and method == "DELETE":
            return ok({}) if svc.ssm.deregister(m.group(1)) else fail(404, "no such instance")
        if path == "/_fake/commands" and method == "GET":
            return ok(svc.ssm.list_commands())
        if path == "/_fake/credentials" and method == "GET":
            return ok(svc.store.list_issued(svc.clock()))
        m = re.fullmatch(r"/_fake/credentials/([^/]+)/expire", path)
        if m and method == "POST":
            return ok({}) if svc.store.expire(m.group(1), svc.clock()) else fail(404, "no such issued credential")
        if path == "/_fake/clock":
            if method == "POST":
                if not isinstance(body, dict) or not isinstance(body.get("skew_s"), (int, float)):
                    return fail(400, 'expected {"skew_s": N}')
                svc.skew = float(body["skew_s"])
            now = svc.clock()
            return ok({"now": now_iso(now), "epoch": now, "skew_s": svc.skew})
        return fail(404, "no such fake endpoint")


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def get_request(self):
        conn, addr = super().get_request()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, addr


def main():
    p = argparse.ArgumentParser(description="A fake of AWS SSM Run Command, STS, IMDSv2 and the ECS "
                                            "credentials endpoint, for tests.")
    p.add_argument("--port-file", help="write the port picked here")
    p.add_argument("--record", help="append one JSON line per request here")
    p.add_argument("--state", help="the directory for the instances' trees (default: a temporary one)")
    p.add_argument("--region", default="us-east-1", help="the region requests must be signed for")
    p.add_argument("--credentials", help="a JSON list of {access_key_id, secret_access_key} that may sign")
    p.add_argument("--instance", action="append", help="a registered, Online instance (repeatable); "
                                                       "the first is also the one IMDS describes")
    p.add_argument("--cred-seconds", type=int, default=3600,
                   help="the lifetime of the temporary credentials issued (STS: at most this)")
    p.add_argument("--invocation-delay-ms", type=int, default=200,
                   help="how long after SendCommand GetCommandInvocation answers InvocationDoesNotExist")
    p.add_argument("--delivery-delay-ms", type=int, default=300,
                   help="how long after SendCommand the command starts on its (online) instance")
    p.add_argument("--web-identity-token", help="the only WebIdentityToken STS accepts (default: any)")
    p.add_argument("--ecs-auth-token", help="the Authorization /_ecs/credentials requires (default: none)")
    p.add_argument("--clock-skew-s", type=float, default=0, help="how far off the server's clock is (seconds)")
    p.add_argument("--account", default="123456789012", help="the AWS account id")
    p.add_argument("--imds-role", default="aks-fake-instance-role", help="the instance profile's role name")
    p.add_argument("--imds-v1", action="store_true", help="answer IMDS GETs without a session token too")
    args = p.parse_args()
    own_state = args.state is None
    if own_state:
        args.state = tempfile.mkdtemp(prefix="fake-aws.")
    os.makedirs(args.state, exist_ok=True)
    try:
        service = Service(args)
    except (OSError, ValueError) as e:
        sys.exit(f"fake_aws.py: {e}")

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
    service.ssm.close()
    if own_state:
        shutil.rmtree(args.state, ignore_errors=True)


if __name__ == "__main__":
    main()
