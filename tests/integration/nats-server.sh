#!/bin/sh
# tests/integration/nats-server.sh - a private nats-server (JetStream on) for tests.
#
#   nats-server.sh start DIR [PORT]   starts one on 127.0.0.1 (a free port unless
#                                     PORT is given: a restart reuses the old one),
#                                     store in DIR/store, log in DIR/server.log;
#                                     waits until it accepts clients and prints
#                                     its URL (nats://127.0.0.1:PORT)
#   nats-server.sh stop DIR           stops it (SIGTERM, then SIGKILL) and waits
#   nats-server.sh kill DIR           SIGKILL, no clean shutdown
#
# DIR/pid and DIR/port record the running server; NATS_SERVER_ARGS adds
# arguments (e.g. -V to trace the protocol into the log while debugging).
# With NATS_SERVER_OWNER=PID the server is killed once that process is gone,
# so a test that crashes leaves no server behind. A missing nats-server is an
# error (exit 1), never a skip: install it with contrib/install-deps.sh.
set -eu

die() {
	echo "nats-server.sh: $*" >&2
	exit 1
}

[ $# -ge 2 ] || die "usage: nats-server.sh start|stop|kill DIR [PORT]"
cmd=$1 dir=$2

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# True once the port accepts a TCP connection and the server says INFO.
ready() {
	python3 - "$1" <<'EOF'
import socket, sys
try:
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=0.5)
    ok = s.recv(4).startswith(b"INFO")
    s.close()
except OSError:
    ok = False
sys.exit(0 if ok else 1)
EOF
}

alive() {
	[ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null
}

wait_gone() {
	i=0
	while alive && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	! alive
}

case $cmd in
start)
	command -v nats-server >/dev/null 2>&1 ||
		PATH=$PATH:/usr/sbin:/usr/local/sbin
	command -v nats-server >/dev/null 2>&1 ||
		die "nats-server is not installed (apt-get install nats-server, or contrib/install-deps.sh)"
	mkdir -p "$dir/store"
	alive && die "a server already runs for $dir (pid $(cat "$dir/pid"))"
	port=${3:-$(free_port)}
	# setsid: the server outlives neither the test's wishes nor its process
	# group signals; the test stops it explicitly.
	setsid nats-server -js -a 127.0.0.1 -p "$port" -sd "$dir/store" \
		-l "$dir/server.log" ${NATS_SERVER_ARGS:-} >/dev/null 2>&1 </dev/null &
	spid=$!
	echo "$spid" >"$dir/pid"
	echo "$port" >"$dir/port"
	if [ -n "${NATS_SERVER_OWNER:-}" ]; then
		owner=$NATS_SERVER_OWNER
		(
			while kill -0 "$owner" 2>/dev/null && kill -0 "$spid" 2>/dev/null; do
				sleep 1
			done
			kill -KILL "$spid" 2>/dev/null
		) </dev/null >/dev/null 2>&1 &
	fi
	i=0
	until ready "$port"; do
		alive || die "nats-server exited at start: $(tail -5 "$dir/server.log" 2>/dev/null)"
		i=$((i + 1))
		[ $i -lt 100 ] || die "nats-server did not accept clients on port $port within 10 s"
		sleep 0.1
	done
	# JetStream is ready once the log says so (it starts after the listener).
	i=0
	until grep -q "Server is ready" "$dir/server.log" 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 100 ] || die "nats-server never reported ready"
		sleep 0.1
	done
	echo "nats://127.0.0.1:$port"
	;;
stop | kill)
	[ -f "$dir/pid" ] || exit 0
	if alive; then
		if [ "$cmd" = kill ]; then
			kill -KILL "$(cat "$dir/pid")"
		else
			kill -TERM "$(cat "$dir/pid")"
		fi
		wait_gone || { kill -KILL "$(cat "$dir/pid")" 2>/dev/null; wait_gone; } ||
			die "nats-server (pid $(cat "$dir/pid")) would not stop"
	fi
	rm -f "$dir/pid"
	;;
*)
	die "unknown command '$cmd'"
	;;
esac
