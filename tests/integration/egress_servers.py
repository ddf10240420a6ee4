#!/usr/bin/env python3
"""The destinations of the egress tests: an HTTP and an HTTPS server on this host's
loopback, serving one directory that holds a page, a pip index with one wheel and a git
repository (dumb HTTP), with a certificate of a test CA for allowed.test and blocked.test.

Usage: egress_servers.py DIR. Makes everything in DIR, then prints one line
"http=PORT https=PORT ca=DIR/ca.pem" and serves until killed. The tests reach the servers
under the names allowed.test and blocked.test through AKS_TEST_EGRESS_RESOLVE.
"""
import base64
import hashlib
import http.server
import os
import ssl
import subprocess
import sys
import threading
import zipfile


def make_wheel(simple):
    """tinypkg 1.0 as a wheel, listed in a PEP 503 simple index."""
    files = {
        "tinypkg/__init__.py": b"VALUE = 42\n",
        "tinypkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n",
        "tinypkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: aksandbox-tests\n"
        b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = ""
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += "%s,sha256=%s,%d\n" % (name, digest, len(data))
    record += "tinypkg-1.0.dist-info/RECORD,,\n"
    files["tinypkg-1.0.dist-info/RECORD"] = record.encode()
    pkg = os.path.join(simple, "tinypkg")
    os.makedirs(pkg, exist_ok=True)
    wheel = "tinypkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(pkg, wheel), "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    with open(os.path.join(pkg, wheel), "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    with open(os.path.join(pkg, "index.html"), "w") as f:
        f.write('<html><body><a href="%s#sha256=%s">%s</a></body></html>\n' % (wheel, sha, wheel))
    with open(os.path.join(simple, "index.html"), "w") as f:
        f.write('<html><body><a href="tinypkg/">tinypkg</a></body></html>\n')


def make_repo(root):
    """repo.git: a bare repository with one commit, served over dumb HTTP."""
    work = os.path.join(root, "repo-work")
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    run = lambda *a, **k: subprocess.run(a, check=True, env=env, capture_output=True, **k)
    run("git", "init", "-q", "-b", "main", work)
    with open(os.path.join(work, "README"), "w") as f:
        f.write("cloned through the egress proxy\n")
    run("git", "-C", work, "add", "README")
    run("git", "-C", work, "commit", "-q", "-m", "first")
    run("git", "clone", "-q", "--bare", work, os.path.join(root, "repo.git"))
    run("git", "-C", os.path.join(root, "repo.git"), "update-server-info")


def make_cert(root):
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                    os.path.join(root, "key.pem"), "-out", os.path.join(root, "ca.pem"),
                    "-days", "2", "-subj", "/CN=allowed.test",
                    "-addext", "subjectAltName=DNS:allowed.test,DNS:blocked.test"],
                   check=True, capture_output=True)


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path.startswith("/bytes/"):
            size = int(self.path[7:])
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            block = b"x" * 65536
            while size > 0:
                n = min(size, len(block))
                self.wfile.write(block[:n])
                size -= n
            return
        if self.path == "/host":
            body = ("host=%s\n" % self.headers.get("Host", "-")).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()


def main():
    root = os.path.abspath(sys.argv[1])
    site = os.path.join(root, "site")
    os.makedirs(os.path.join(site, "simple"), exist_ok=True)
    with open(os.path.join(site, "index.html"), "w") as f:
        f.write("hello through the proxy\n")
    make_wheel(os.path.join(site, "simple"))
    make_repo(site)
    make_cert(root)
    handler = lambda *a, **k: Quiet(*a, directory=site, **k)
    plain = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    tls = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(os.path.join(root, "ca.pem"), os.path.join(root, "key.pem"))
    tls.socket = ctx.wrap_socket(tls.socket, server_side=True)
    for server in (plain, tls):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    print("http=%d https=%d ca=%s" % (plain.server_address[1], tls.server_address[1],
                                       os.path.join(root, "ca.pem")), flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
