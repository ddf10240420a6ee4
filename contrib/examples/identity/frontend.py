#!/usr/bin/env python3
"""contrib/examples/identity/frontend.py - the trusted front end of the identity example.

It authenticates an end user (here against a file of scrypt password hashes; in a real
deployment, your login or SSO), mints a short-lived signed identity token for them (the
signed_token format, docs/plugins/signed_token.md) with the key it shares with aksandbox,
and calls the sandbox tools over MCP's Streamable HTTP transport with that token as a bearer
token. aksandbox (`aksandbox mcp --listen ... --auth`) verifies it and runs the code as that
user. Only the Python standard library is used.

  frontend.py add-user USERS_FILE NAME                 (reads the password on stdin)
  frontend.py run --mcp URL --users USERS_FILE --user NAME [--audience A] -- COMMAND
      (reads the password on stdin; prints the tool's JSON result; exit 0 when the command
      ran and exited 0, 1 when the tool reported an error, 2 when the login failed)

The key is $AKS_IDENTITY_SECRET. It never leaves this process except inside the HMAC.
"""
import base64
import hashlib
import hmac
import http.client
import json
import os
import secrets
import sys
import time
import urllib.parse

TOKEN_SECONDS = 300
PROTOCOL = "2025-11-25"


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def scrypt(password, salt):
    return hashlib.scrypt(password.encode(), salt=salt, n=2**14, r=8, p=1, dklen=32)


def add_user(users_file, name):
    password = sys.stdin.readline().rstrip("\n")
    salt = secrets.token_bytes(16)
    with open(users_file, "a", encoding="utf-8") as f:
        f.write(f"{name}:{salt.hex()}:{scrypt(password, salt).hex()}\n")


def authenticate(users_file, name, password):
    """True when the file has this user with this password (compared in constant time)."""
    with open(users_file, encoding="utf-8") as f:
        for line in f:
            user, salt, digest = line.rstrip("\n").split(":")
            if user == name:
                return hmac.compare_digest(scrypt(password, bytes.fromhex(salt)).hex(), digest)
    scrypt(password, b"\0" * 16)  # the same work for an unknown user
    return False


def mint(subject, key, audience):
    """v1.<payload>.<signature>: base64url JSON claims, HMAC-SHA256 over "v1." + payload."""
    now = int(time.time())
    claims = {"sub": subject, "iat": now, "exp": now + TOKEN_SECONDS}
    if audience:
        claims["aud"] = audience
    payload = b64url(json.dumps(claims, separators=(",", ":")).encode())
    mac = hmac.new(key, ("v1." + payload).encode(), hashlib.sha256).digest()
    return f"v1.{payload}.{b64url(mac)}"


class McpClient:
    """Just enough of an MCP client over Streamable HTTP: one connection, JSON or events."""

    def __init__(self, url, token):
        u = urllib.parse.urlsplit(url)
        conn_class = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
        self.conn = conn_class(u.hostname, u.port, timeout=600)
        self.path = u.path or "/mcp"
        self.token = token
        self.session = None
        self.next_id = 0

    def post(self, message):
        headers = {"Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream",
                   "Authorization": "Bearer " + self.token,
                   "MCP-Protocol-Version": PROTOCOL}
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        self.conn.request("POST", self.path, json.dumps(message), headers)
        resp = self.conn.getresponse()
        body = resp.read().decode()
        if resp.status == 401:
            raise PermissionError("the sandbox refused the token: "
                                  + (resp.getheader("WWW-Authenticate") or ""))
        if resp.status >= 400:
            raise RuntimeError(f"HTTP {resp.status}: {body}")
        self.session = resp.getheader("Mcp-Session-Id") or self.session
        if resp.getheader("Content-Type", "").startswith("text/event-stream"):
            # The response is the event whose data has our id (progress may come before it).
            for block in body.split("\n\n"):
                data = "".join(l[5:].lstrip() for l in block.split("\n") if l.startswith("data:"))
                if data:
                    msg = json.loads(data)
                    if msg.get("id") == message.get("id"):
                        return msg
            raise RuntimeError("the event stream ended without a response")
        return json.loads(body) if body else None

    def request(self, method, params):
        self.next_id += 1
        msg = self.post({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        if "error" in msg:
            raise RuntimeError(f"{method}: {msg['error']['message']}")
        return msg["result"]

    def start(self):
        self.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                    "clientInfo": {"name": "identity-frontend", "version": "1"}})
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def call(self, tool, arguments):
        result = self.request("tools/call", {"name": tool, "arguments": arguments})
        return json.loads(result["content"][0]["text"]), result.get("isError", False)


def run(argv):
    opts, command = {}, None
    i = 0
    while i < len(argv):
        if argv[i] == "--":
            command = " ".join(argv[i + 1:])
            break
        opts[argv[i].lstrip("-")] = argv[i + 1]
        i += 2
    if not command or not all(k in opts for k in ("mcp", "users", "user")):
        sys.exit(__doc__)
    password = sys.stdin.readline().rstrip("\n")
    if not authenticate(opts["users"], opts["user"], password):
        print("login failed", file=sys.stderr)
        return 2
    key = os.environb.get(b"AKS_IDENTITY_SECRET")
    if not key:
        sys.exit("AKS_IDENTITY_SECRET is not set")
    client = McpClient(opts["mcp"], mint(opts["user"], key, opts.get("audience", "aksandbox")))
    client.start()
    result, is_error = client.call("run_command", {"command": command})
    print(json.dumps(result))
    return 1 if is_error or result.get("error") else (0 if result.get("exit_code") == 0 else 1)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "add-user":
        add_user(sys.argv[2], sys.argv[3])
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "run":
        return run(sys.argv[2:])
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
