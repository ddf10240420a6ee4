#!/usr/bin/env python3
# tests/integration/e2b/relay.py - what stands between the e2b plugin and an E2B service in
# the field, for e2b-tls.test: a TLS front (a certificate the test made, in front of the fake
# E2B service's plain HTTP) and an HTTP CONNECT proxy (as https_proxy names one), each
# relaying bytes both ways. Python standard library only.
#
#   relay.py tls PORT-FILE CERT KEY UPSTREAM-PORT    TLS on 127.0.0.1, to the upstream
#   relay.py proxy PORT-FILE LOG                     CONNECT proxy; each target to LOG
import os
import socket
import ssl
import sys
import threading


def pipe(a, b):
    """Copies a to b until a ends, then ends b's writing side."""
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    finally:
        try:
            b.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def relay(a, b):
    t = threading.Thread(target=pipe, args=(b, a), daemon=True)
    t.start()
    pipe(a, b)
    t.join()
    a.close()
    b.close()


def listen(port_file):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    with open(port_file + ".tmp", "w") as f:
        f.write(f"{s.getsockname()[1]}\n")
    os.rename(port_file + ".tmp", port_file)
    return s


def tls_front(port_file, cert, key, upstream):
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    s = listen(port_file)

    def serve(conn):
        try:
            t = ctx.wrap_socket(conn, server_side=True)
        except (ssl.SSLError, OSError):  # a client that refused our certificate
            conn.close()
            return
        u = socket.create_connection(("127.0.0.1", upstream))
        u.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        relay(t, u)

    while True:
        conn, _ = s.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


def connect_proxy(port_file, log):
    s = listen(port_file)

    def serve(conn):
        head = b""
        while b"\r\n\r\n" not in head:
            data = conn.recv(4096)
            if not data:
                conn.close()
                return
            head += data
        line = head.split(b"\r\n", 1)[0].decode()
        method, target = line.split(" ")[:2]
        with open(log, "a") as f:
            f.write(f"{method} {target}\n")
        if method != "CONNECT":
            conn.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            conn.close()
            return
        host, port = target.rsplit(":", 1)
        u = socket.create_connection((host, int(port)))
        conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        relay(conn, u)

    while True:
        conn, _ = s.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    if sys.argv[1] == "tls":
        tls_front(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        connect_proxy(sys.argv[2], sys.argv[3])
