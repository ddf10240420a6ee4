#!/bin/sh
# tests/integration/sqs/fauxqs.sh - a private, throwaway SQS emulator for the sqs transport's
# tests and benchmark: fauxqs (written by others, from the npm registry, pinned in
# package-lock.json and installed into the build tree by run-node.sh --install).
#
#   fauxqs.sh start DIR   starts one (state in DIR, created) on a free loopback port;
#                         prints its endpoint URL once it answers
#   fauxqs.sh stop DIR    stops it and waits for it to exit
#
# Needs AKS_TEST_BUILDDIR and AKS_TEST_SRCDIR (make check sets them). No node, npm or
# registry is a failure, saying so, never a skip.
set -eu
usage() { echo "usage: $0 start DIR | stop DIR" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1 dir=$2
S=${AKS_TEST_SRCDIR:?AKS_TEST_SRCDIR is not set}

case $cmd in
start)
	D=$(bash "$S/tests/integration/run-node.sh" --install sqs fauxqs @aws-sdk/client-sqs) ||
		{ echo "$0: cannot install fauxqs from the npm registry" >&2; exit 1; }
	mkdir -p "$dir"
	rm -f "$dir/port"
	node "$S/tests/integration/sqs/fauxqs-server.mjs" "$D/node_modules/fauxqs/dist/app.js" \
		"$dir/port" >"$dir/fauxqs.log" 2>&1 &
	echo $! >"$dir/fauxqs.pid"
	i=0
	until [ -s "$dir/port" ]; do
		i=$((i + 1))
		kill -0 "$(cat "$dir/fauxqs.pid")" 2>/dev/null && [ $i -lt 300 ] ||
			{ echo "$0: fauxqs did not start; $dir/fauxqs.log says: $(tail -5 "$dir/fauxqs.log")" >&2; exit 1; }
		sleep 0.05
	done
	echo "http://127.0.0.1:$(cat "$dir/port")"
	;;
stop)
	[ -f "$dir/fauxqs.pid" ] || exit 0
	pid=$(cat "$dir/fauxqs.pid")
	kill "$pid" 2>/dev/null || { rm -f "$dir/fauxqs.pid"; exit 0; }
	i=0
	while kill -0 "$pid" 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 100 ] || { kill -9 "$pid" 2>/dev/null; break; }
		sleep 0.05
	done
	rm -f "$dir/fauxqs.pid"
	;;
*)
	usage
	;;
esac
