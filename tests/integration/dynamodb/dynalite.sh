#!/bin/sh
# tests/integration/dynamodb/dynalite.sh - a private, throwaway DynamoDB emulator for the
# dynamodb store's tests, or to try the store by hand: dynalite (written by others, from the
# npm registry, pinned in package-lock.json and installed into the build tree by
# run-node.sh --install), in memory unless DYNALITE_ON_DISK=1 (below).
#
#   dynalite.sh start DIR [PORT]   starts one (its pid and log in DIR, created) on a free
#                                  loopback port, or on PORT when given (to restart it at
#                                  the endpoint its clients already have); prints its
#                                  endpoint URL once it answers
#   dynalite.sh stop DIR           stops it and waits for it to exit
#
# With DYNALITE_ON_DISK=1 its tables live on disk in DIR/db instead of in memory, so a
# start after a stop (or a SIGKILL) finds them again: a service outage, not a new service.
#
# Needs AKS_TEST_BUILDDIR and AKS_TEST_SRCDIR (make check sets them). No node, npm, registry
# or emulator is a failure, saying so, never a skip.
set -eu
usage() { echo "usage: $0 start DIR [PORT] | stop DIR" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1 dir=$2
S=${AKS_TEST_SRCDIR:?AKS_TEST_SRCDIR is not set}

case $cmd in
start)
	command -v node >/dev/null 2>&1 ||
		{ echo "$0: node is not installed (apt-get install nodejs npm)" >&2; exit 1; }
	D=$(bash "$S/tests/integration/run-node.sh" --install dynamodb dynalite @aws-sdk/client-dynamodb) ||
		{ echo "$0: cannot install dynalite from the npm registry" >&2; exit 1; }
	mkdir -p "$dir"
	rm -f "$dir/port"
	data=
	[ "${DYNALITE_ON_DISK:-}" = 1 ] && data=$dir/db
	# the log is appended to: a restart keeps what the first run said
	node "$S/tests/integration/dynamodb/dynalite-server.mjs" "$D/node_modules/dynalite" \
		"$dir/port" "${3:-0}" $data >>"$dir/dynalite.log" 2>&1 &
	echo $! >"$dir/dynalite.pid"
	i=0
	until [ -s "$dir/port" ]; do
		i=$((i + 1))
		kill -0 "$(cat "$dir/dynalite.pid")" 2>/dev/null && [ $i -lt 300 ] ||
			{ echo "$0: dynalite did not start; $dir/dynalite.log says: $(tail -5 "$dir/dynalite.log")" >&2; exit 1; }
		sleep 0.05
	done
	url="http://127.0.0.1:$(cat "$dir/port")"
	# Answering: an unsigned request is refused with DynamoDB's own error.
	i=0
	until curl -s -m 2 -X POST -H 'X-Amz-Target: DynamoDB_20120810.ListTables' \
		-H 'Content-Type: application/x-amz-json-1.0' -d '{}' "$url/" | grep -q '__type'; do
		i=$((i + 1))
		[ $i -lt 100 ] || { echo "$0: dynalite at $url does not answer" >&2; exit 1; }
		sleep 0.05
	done
	echo "$url"
	;;
stop)
	[ -f "$dir/dynalite.pid" ] || exit 0
	pid=$(cat "$dir/dynalite.pid")
	kill "$pid" 2>/dev/null || { rm -f "$dir/dynalite.pid"; exit 0; }
	i=0
	while kill -0 "$pid" 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 100 ] || { kill -9 "$pid" 2>/dev/null; break; }
		sleep 0.05
	done
	rm -f "$dir/dynalite.pid"
	;;
*)
	usage
	;;
esac
