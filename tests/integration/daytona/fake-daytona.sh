# tests/integration/daytona/fake-daytona.sh - sourced by the tests that run the daytona plugin
# against the fake Daytona service (tests/fakes/daytona/fake_daytona.py): starts it with a fresh
# key in a temporary directory, points the plugin at it with the SDK's own variables, and stops
# it (and checks that none of its processes is left) when the test exits.
#
#   . fake-daytona.sh    needs $tmp (a directory the test owns) and AKS_TEST_SRCDIR
#   fake_start [ARGS]    starts it (ARGS: the fake's own flags, e.g. --start-delay 2
#                        --minute-seconds 1); exports FAKE_URL, FAKE_RECORD, DAYTONA_API_KEY,
#                        DAYTONA_API_URL ($FAKE_URL/api), DAYTONA_TARGET (us); sets FAKE_PID
#   fake_fault JSON      queues a fault (POST /_fake/faults), e.g.
#                        '{"status": 429, "retry_after": 1, "path_prefix": "/api/sandbox", "method": "POST"}'
#   fake_get PATH        GET of a /_fake/ path, the body on stdout (e.g. /_fake/sandboxes)
#   fake_post PATH       POST of a /_fake/ path (e.g. /_fake/sandboxes/ID/kill)
#   fake_requests FILTER the recorded requests (JSON lines) matching a python expression
#                        over r, e.g. 'r["path"] == "/api/sandbox" and r["method"] == "POST"'
#   fake_stop            stops it: 0 when it exited and left no process behind

fake_start() {
	FAKE_RECORD=$tmp/fake-requests.jsonl
	DAYTONA_API_KEY=dtn_$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
	export DAYTONA_API_KEY FAKE_RECORD
	FAKE_DAYTONA_API_KEY=$DAYTONA_API_KEY python3 "$AKS_TEST_SRCDIR/tests/fakes/daytona/fake_daytona.py" \
		--port-file "$tmp/fake.port" --record "$FAKE_RECORD" --state "$tmp/fake-state" "$@" \
		>"$tmp/fake.out" 2>"$tmp/fake.err" &
	FAKE_PID=$!
	i=0
	while [ ! -s "$tmp/fake.port" ] && [ $i -lt 150 ] && kill -0 "$FAKE_PID" 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
	done
	if [ ! -s "$tmp/fake.port" ]; then
		echo "Bail out! the fake Daytona service did not start: $(tail -5 "$tmp/fake.err")"
		exit 1
	fi
	FAKE_URL=http://127.0.0.1:$(cat "$tmp/fake.port")
	DAYTONA_API_URL=$FAKE_URL/api DAYTONA_TARGET=us
	export FAKE_URL DAYTONA_API_URL DAYTONA_TARGET
}

fake_fault() {
	curl -sf -X POST -H 'Content-Type: application/json' -d "$1" "$FAKE_URL/_fake/faults" >/dev/null
}
fake_get() { curl -sf "$FAKE_URL$1"; }
fake_post() { curl -sf -X POST "$FAKE_URL$1" >/dev/null; }

fake_requests() {
	python3 -c '
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if eval(sys.argv[2]):
        print(line, end="")' "$FAKE_RECORD" "$1"
}

fake_stop() {
	[ -n "${FAKE_PID:-}" ] || return 0
	kill -TERM "$FAKE_PID" 2>/dev/null
	i=0
	while kill -0 "$FAKE_PID" 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	kill -0 "$FAKE_PID" 2>/dev/null && { kill -KILL "$FAKE_PID"; return 1; }
	FAKE_PID=
	# its sandboxes' processes carry their tree's path in their command line
	! pgrep -f "$tmp/fake-state" >/dev/null
}
