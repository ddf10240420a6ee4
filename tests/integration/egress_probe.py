#!/usr/bin/env python3
"""What a program inside a sandbox under network_egress: allowlist tries, as a user would
and as an attacker would (tests/integration/egress.sh runs it through aksandbox-agent).

Usage: egress_probe.py HTTP_PORT HTTPS_PORT CA_FILE HOST_ADDRESS
Prints one "name=value" line per probe; the test compares them.
"""
import os
import socket
import ssl
import subprocess
import sys
import urllib.request

http_port, https_port, ca, host_addr = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
proxy_port = int(os.environ["http_proxy"].rsplit(":", 1)[1])


def say(name, value):
    print("%s=%s" % (name, value), flush=True)


def sh(cmd):
    p = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=120)
    return p.returncode, " ".join(p.stdout.split()), " ".join(p.stderr.split())


def first_line(data):
    return data.split(b"\r\n", 1)[0].decode(errors="replace")


def proxy_ask(data, timeout=10):
    s = socket.create_connection(("127.0.0.1", proxy_port), timeout)
    s.sendall(data)
    got = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
    except OSError:
        pass
    s.close()
    return got


# ---- what users do: each client through the proxy ------------------------------------------
rc, out, err = sh("curl -sS http://allowed.test:%d/" % http_port)
say("curl_http", out if rc == 0 else "failed: " + err)
rc, out, err = sh("curl -sS --cacert %s https://allowed.test:%d/" % (ca, https_port))
say("curl_https", out if rc == 0 else "failed: " + err)
try:
    ctx = ssl.create_default_context(cafile=ca)
    body = urllib.request.urlopen("https://allowed.test:%d/" % https_port, context=ctx,
                                  timeout=30).read().decode().strip()
    say("urllib_https", body)
except Exception as e:  # noqa: BLE001 - the test prints what failed
    say("urllib_https", "failed: %r" % e)
# (listed by Python: coreutils' ls fails on a new directory under this gVisor, EINVAL)
rc, out, err = sh("python3 -m pip download --no-deps --disable-pip-version-check -q -d /tmp/pipdl "
                  "--cert %s --index-url https://allowed.test:%d/simple/ tinypkg && python3 -c 'import os; print(*os.listdir(\"/tmp/pipdl\"))'"
                  % (ca, https_port))
say("pip_download", out if rc == 0 else "failed: " + (err or out)[-300:])
rc, out, err = sh("rm -rf clone && git -c http.sslCAInfo=%s clone -q https://allowed.test:%d/repo.git "
                  "clone && cat clone/README" % (ca, https_port))
say("git_clone", out if rc == 0 else "failed: " + err[-300:])

# ---- refused through the proxy, with the reason ---------------------------------------------
rc, out, err = sh("curl -s -w ' %%{http_code}' http://blocked.test:%d/" % http_port)
say("blocked_name", out)
rc, out, err = sh("curl -s -w ' %%{http_code}' -H 'Host: blocked.test' http://allowed.test:%d/host"
                  % http_port)
say("blocked_host", out)
rc, out, err = sh("curl -s -w ' %{http_code}' http://8.8.8.8/")
say("cidr_outside", out)
rc, out, err = sh("curl -s -w ' %{http_code}' http://private.test/")
say("private_name", out)
rc, out, err = sh("curl -s -w ' %{http_code}' http://169.254.169.254/latest/meta-data/")
say("metadata", out)

# the TLS name must be the CONNECT target
for sni in ("allowed.test", "blocked.test"):
    try:
        s = socket.create_connection(("127.0.0.1", proxy_port), 10)
        s.sendall(b"CONNECT allowed.test:%d HTTP/1.1\r\n\r\n" % https_port)
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            head += s.recv(1)
        t = ssl.create_default_context(cafile=ca).wrap_socket(s, server_hostname=sni)
        t.sendall(b"GET / HTTP/1.0\r\nHost: allowed.test\r\n\r\n")
        say("sni_" + sni.split(".")[0], "served" if b"hello" in t.recv(65536) + t.recv(65536) else "no page")
    except (ConnectionResetError, BrokenPipeError, ssl.SSLZeroReturnError, ssl.SSLEOFError):
        # the connection was cut (a reset; gVisor's network stack closes it instead)
        say("sni_" + sni.split(".")[0], "cut")
    except (OSError, ssl.SSLError) as e:
        say("sni_" + sni.split(".")[0], "failed " + type(e).__name__)

# ---- no way around the proxy -------------------------------------------------------------
def tcp(addr, port, family=socket.AF_INET):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect((addr, port))
        return "connected"
    except OSError as e:
        return "refused" if isinstance(e, ConnectionRefusedError) else "failed"
    finally:
        s.close()


say("direct_loopback", tcp("127.0.0.1", http_port))
say("direct_host", tcp(host_addr, http_port))
say("direct_public", tcp("1.1.1.1", 443))
try:
    say("direct_ipv6", tcp("2606:4700:4700::1111", 443, socket.AF_INET6))
except OSError:
    say("direct_ipv6", "failed")
try:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.sendto(b"x", ("1.1.1.1", 53))
    say("udp", "sent")
except OSError:
    say("udp", "failed")
try:
    socket.getaddrinfo("allowed.test", 80)
    say("dns", "resolved")
except OSError:
    try:
        socket.getaddrinfo("deb.debian.org", 80)
        say("dns", "resolved")
    except OSError:
        say("dns", "failed")
try:
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    say("icmp", "opened")
except OSError:
    say("icmp", "failed")

# ---- proxy abuse -------------------------------------------------------------------------
say("malformed_connect", first_line(proxy_ask(b"CONNECT nonsense HTTP/1.1\r\n\r\n")))
say("origin_form", first_line(proxy_ask(b"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n")))
# 10,000 connections in waves of 500 held at once: at most the proxy's limit is served, the
# rest are cut at once, and nothing hangs.
held_max, cut = 0, 0
for wave in range(20):
    socks = []
    for i in range(500):
        try:
            socks.append(socket.create_connection(("127.0.0.1", proxy_port), 5))
        except OSError:
            cut += 1
    # what the proxy cut becomes readable (EOF or a reset) at once; what it holds does not
    import select
    import time
    pending, deadline = list(socks), time.time() + 10
    while pending and time.time() < deadline:
        readable, _, _ = select.select(pending, [], [], 0.2)
        if not readable:
            break
        for s in readable:
            pending.remove(s)
        cut += len(readable)
    live = len(pending)
    for s in socks:
        s.close()
    held_max = max(held_max, live)
say("storm", "bounded" if held_max <= 64 and cut >= 10000 - 20 * 64 else
    "held %d, cut %d" % (held_max, cut))
rc, out, err = sh("curl -sS http://allowed.test:%d/" % http_port)
say("after_storm", out if rc == 0 else "failed: " + err)
