#!/bin/sh
# tests/integration/redis-server.sh - a private, throwaway redis-server for the
# redis store's tests and benchmark, or to try the store by hand.
#
#   redis-server.sh start DIR [PORT]   starts one in DIR (created), listening on
#                                      DIR/redis.sock (and 127.0.0.1:PORT when
#                                      given), no persistence; prints the url
#   redis-server.sh stop DIR           stops it and waits for it to exit
#
# Fails, saying what to install, when redis-server is missing. With VALKEY=1 it starts
# valkey-server (and asks valkey-cli) where the system has one, else redis-server, and
# says on stderr which it started.
set -eu
server=redis-server cli=redis-cli
if [ "${VALKEY:-}" = 1 ]; then
	if command -v valkey-server >/dev/null 2>&1 && command -v valkey-cli >/dev/null 2>&1; then
		server=valkey-server cli=valkey-cli
	fi
fi

usage() { echo "usage: $0 start DIR [PORT] | stop DIR" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1 dir=$2

case $cmd in
start)
	command -v $server >/dev/null 2>&1 || {
		echo "$0: redis-server not found: install it (Debian: apt-get install redis-server)" >&2
		exit 1
	}
	if [ "${VALKEY:-}" = 1 ]; then
		echo "$0: starting $server ($($server --version | head -1))" >&2
	fi
	mkdir -p "$dir"
	port=${3:-0}
	$server --daemonize yes --dir "$dir" --pidfile "$dir/redis.pid" \
		--logfile "$dir/redis.log" --unixsocket "$dir/redis.sock" --unixsocketperm 700 \
		--port "$port" --bind 127.0.0.1 --save "" --appendonly no >/dev/null
	i=0
	until $cli -s "$dir/redis.sock" ping 2>/dev/null | grep -q PONG; do
		i=$((i + 1))
		[ $i -lt 100 ] || { echo "$0: redis-server did not start; see $dir/redis.log" >&2; exit 1; }
		sleep 0.05
	done
	echo "unix://$dir/redis.sock"
	;;
stop)
	[ -f "$dir/redis.pid" ] || exit 0
	pid=$(cat "$dir/redis.pid")
	kill "$pid" 2>/dev/null || exit 0
	i=0
	while kill -0 "$pid" 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 100 ] || { kill -9 "$pid" 2>/dev/null; break; }
		sleep 0.05
	done
	rm -f "$dir/redis.pid"
	;;
*)
	usage
	;;
esac
