#!/bin/sh
# tests/bench/run.sh - the benchmarks behind `make bench` (not part of make check).
#
# Prints figures and ratios measured in this run only; it never asserts a
# wall-clock limit, since those depend on the machine. See README.md beside
# this file for what each figure means.
#
# Environment: AKS_TEST_BUILDDIR (the build tree), AKS_PLUGIN_PATH (set by
# make bench), BENCH_RUNS (hyperfine runs, default 100), BENCH_ITER (bench_exec
# iterations, default 200), BENCH_LOAD (fresh processes for plugin loading,
# default 30), BENCH_TOOL_ITER (bench_tool call iterations, default 200),
# BENCH_SESSIONS (idle sessions for bench_tool sessions, default 1000), BENCH_MCP_ITER
# (bench_mcp calls, default 200), BENCH_QUEUE_CALLS and BENCH_QUEUE_LATENCY (bench_queue:
# calls through the fleet, default 400; sequential calls for the latency, default 100),
# BENCH_K8S_ITER and BENCH_K8S_FIRST (bench_k8s: exec samples, default 50; new pods, default 5),
# BENCH_CONFIG_RUNS (bench_config: loads per file, default 5).
set -eu

B=${AKS_TEST_BUILDDIR:?run through make bench}
S=${AKS_TEST_SRCDIR:?run through make bench}
RUNS=${BENCH_RUNS:-100}
ITER=${BENCH_ITER:-200}
LOAD=${BENCH_LOAD:-30}

for tool in hyperfine python3; do
	command -v "$tool" >/dev/null || { echo "run.sh: $tool is needed (apt-get install $tool)" >&2; exit 1; }
done

# Programs linked against the uninstalled libaksandbox are libtool wrapper
# scripts; time the real binaries, or the wrapper's shell would be measured too.
real_binary() {
	dir=$(dirname "$1") base=$(basename "$1")
	for cand in "$dir/.libs/lt-$base" "$dir/.libs/$base" "$1"; do
		if [ -x "$cand" ] && [ -f "$cand" ] && ! grep -q "libtool wrapper" "$cand" 2>/dev/null; then
			echo "$cand"
			return 0
		fi
	done
	echo "run.sh: no real binary for $1" >&2
	return 1
}
AKS=$(real_binary "$B/core/cli/aksandbox")
BENCH_EXEC=$(real_binary "$B/tests/bench/bench_exec")
BENCH_TOOL=$(real_binary "$B/tests/bench/bench_tool")
BENCH_MCP=$(real_binary "$B/tests/bench/bench_mcp")
LD_LIBRARY_PATH="$B/core/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
AKS_LOG_LEVEL=${AKS_LOG_LEVEL:-error}
export LD_LIBRARY_PATH AKS_LOG_LEVEL

# Fail early, with the reason, if the CLI cannot run at all.
"$AKS" run -- true || { echo "run.sh: '$AKS run -- true' failed" >&2; exit 1; }

T=$(mktemp -d "${TMPDIR:-/tmp}/aks-bench.XXXXXX")
trap 'rm -rf "$T"' EXIT

# hyperfine_json JSON HYPERFINE_ARGS...: one hyperfine run (no intermediate shell) into JSON;
# on failure its output, and the benchmarks stop.
hyperfine_json() {
	json=$1
	shift
	hyperfine -N --style basic --warmup 5 --runs "$RUNS" --export-json "$json" "$@" \
		>"$T/hyperfine.log" 2>&1 || { cat "$T/hyperfine.log" >&2; exit 1; }
}

# hyperfine_pair TITLE JSON LABEL_A CMD_A LABEL_B CMD_B: medians of two
# commands (no intermediate shell) and their ratio.
hyperfine_pair() {
	title=$1 json=$2
	hyperfine_json "$json" -n "$3" "$4" -n "$5" "$6"
	python3 - "$json" "$title" <<'EOF'
import json, sys
res = json.load(open(sys.argv[1]))["results"]
a, b = res[0], res[1]
print(sys.argv[2] + ": %d runs each (median, stddev in ms)" % len(a["times"]))
for r in (a, b):
    print("  %-44s %8.3f %8.3f" % (r["command"], r["median"] * 1e3, r["stddev"] * 1e3))
print("  ratio: %.2fx   difference: %.3f ms" % (a["median"] / b["median"], (a["median"] - b["median"]) * 1e3))
EOF
}

echo "aksandbox benchmarks ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) CPUs, $(uname -r))"
echo "CLI: $AKS"
echo

# 1. The whole CLI round trip against the bare shell.
hyperfine_pair "Process: aksandbox run -- true vs sh -c true" "$T/run.json" \
	"aksandbox run -- true" "$AKS run -- true" "sh -c true" "sh -c true"
echo
# ... and against what local_subprocess itself must run for it (the reference's bash -c),
# which alone costs more than sh -c true: the difference is what aksandbox adds.
hyperfine_pair "Process: aksandbox run -- true vs bash -c true" "$T/run_bash.json" \
	"aksandbox run -- true" "$AKS run -- true" "bash -c true" "bash -c true"
echo
# ... and the floor under it, all in one hyperfine run: bash -c true (what the command costs
# by itself) and aksandbox --version (the CLI's exec and dynamic loading, no work). Their
# sum, as a ratio to sh -c true, is what no CLI that runs the command through bash can go
# below; with `check` instead, the same once it has read its config and loaded the plugin.
hyperfine_json "$T/floor.json" -n "sh -c true" "sh -c true" -n "bash -c true" "bash -c true" \
	-n "aksandbox --version" "$AKS --version" -n "aksandbox check" "$AKS check" \
	-n "aksandbox run -- true" "$AKS run -- true"
python3 - "$T/floor.json" <<'EOF'
import json, sys
res = {r["command"]: r["median"] for r in json.load(open(sys.argv[1]))["results"]}
base = res["sh -c true"]
print("Process: the floor under aksandbox run -- true (medians in ms, ratio to sh -c true)")
for name, median in res.items():
    print("  %-44s %8.3f %6.2fx" % (name, median * 1e3, median / base))
for what, cli in (("--version", "aksandbox --version"), ("check", "aksandbox check")):
    floor = res["bash -c true"] + res[cli]
    print("  %-44s %8.3f %6.2fx" % ("bash -c true + aksandbox " + what, floor * 1e3, floor / base))
EOF
echo

# 2. One execution in process, against bare fork/exec.
"$BENCH_EXEC" exec -n "$ITER"
echo

# 3. Plugin loading: in process (fresh process per sample) ...
"$BENCH_EXEC" load -n "$LOAD"
echo

# ... and as a whole program: listing every plugin against printing the version
# (same process start-up and library load, no plugin loaded).
hyperfine_pair "Process: aksandbox providers vs aksandbox --version" "$T/providers.json" \
	"aksandbox providers" "$AKS providers" "aksandbox --version" "$AKS --version"

echo
# Loading and validating a config with two profiles (plugins loaded, blocks
# checked against their schemas, providers started), against the bare start.
hyperfine_pair "Process: aksandbox check -c profiles.yaml vs aksandbox --version" "$T/check.json" \
	"aksandbox check (2 profiles)" "$AKS check -c $S/contrib/examples/profiles.yaml --json" \
	"aksandbox --version" "$AKS --version"

echo
# What inactive blocks cost: multi-backend.yaml's docker and kubernetes blocks are checked
# against their plugins (two more plugins loaded), next to the same profile without them.
hyperfine_pair "Process: check -c multi-backend.yaml vs check -c basic.yaml" "$T/inactive.json" \
	"aksandbox check (2 inactive blocks)" "$AKS check -c $S/contrib/examples/multi-backend.yaml --json" \
	"aksandbox check (none)" "$AKS check -c $S/contrib/examples/basic.yaml --json"

# Memory: the peak resident size of the aksandbox process (wait4's ru_maxrss,
# measured by bench_exec rss). Output beyond the per-stream cap (4 MiB) is
# counted and dropped, so a program printing 256 MiB must not make the host
# grow by more than the cap.
echo
echo "Memory: peak RSS of the aksandbox process (KiB)"
small=$("$BENCH_EXEC" rss "$AKS" run -- true)
capped=$("$BENCH_EXEC" rss "$AKS" run -- head -c 4194304 /dev/zero)
big=$("$BENCH_EXEC" rss "$AKS" run -- head -c 268435456 /dev/zero)
printf '  %-45s %8d\n' "aksandbox run -- true" "$small"
printf '  %-45s %8d\n' "aksandbox run -- head -c 4MiB /dev/zero" "$capped"
printf '  %-45s %8d\n' "aksandbox run -- head -c 256MiB /dev/zero" "$big"
printf '  growth for 4 MiB of output: %d KiB; for 256 MiB: %d KiB (cap: 4096 KiB)\n' \
	$((capped - small)) $((big - small))

# Loading a large config: 10,000 to 140,000 keys (up to the 16 MiB file cap) in a foreign
# section and in a section that is read, against libyaml's own parse of the same text.
echo
"$(real_binary "$B/tests/bench/bench_config")" -n "${BENCH_CONFIG_RUNS:-5}" "$T"

# The state store: one session transaction, reads, and 1,000 conversations.
echo
echo "State store (tests/bench/bench_store)"
"$B/tests/bench/bench_store" "${BENCH_STORE_ITER:-200}" "$T"

# The tool layer: one run_command through the C API (thread and embedded
# brokers) against bare fork/exec; then, in a fresh process, 1,000 idle
# sessions with a sandbox each. Configs, state and sandboxes live under $T.
echo
mkdir "$T/tool-call" "$T/tool-sessions"
"$BENCH_TOOL" call -n "${BENCH_TOOL_ITER:-200}" "$T/tool-call"
echo
"$BENCH_TOOL" sessions -n "${BENCH_SESSIONS:-1000}" "$T/tool-sessions"

# MCP: a run_command round trip as tools/call to one long-lived aksandbox mcp
# process (stdio and HTTP), against the same call through the C API; HTTP clients
# at once.
echo
mkdir "$T/mcp"
"$BENCH_MCP" -n "${BENCH_MCP_ITER:-200}" "$AKS" "$T/mcp"

# The docker provider (when it was built): one run_command in an existing
# sandbox against the three bare Engine API calls and `docker exec`, and a new
# sandbox's first command against `docker run` (tests/bench/bench_docker.c).
if [ -e "$B/tests/bench/bench_docker" ]; then
	echo
	"$(real_binary "$B/tests/bench/bench_docker")" -n "${BENCH_DOCKER_ITER:-100}" \
		-m "${BENCH_DOCKER_FIRST:-10}"
fi

# The bubblewrap provider (when it and docker were built): a command in an existing sandbox
# through the agent and per call against local_subprocess through the agent, and a new
# sandbox's first command against local_subprocess's and docker's (tests/bench/bench_bwrap.c).
if [ -e "$B/tests/bench/bench_bwrap" ]; then
	echo
	TMPDIR="$T" "$(real_binary "$B/tests/bench/bench_bwrap")" -n "${BENCH_BWRAP_ITER:-100}" \
		-m "${BENCH_BWRAP_FIRST:-10}"
fi

# A download through aksandbox-agent's egress proxy, in bubblewrap and docker, against the
# same download on this host (tests/bench/bench_egress.c).
if [ -e "$B/tests/bench/bench_egress" ]; then
	echo
	TMPDIR="$T" "$(real_binary "$B/tests/bench/bench_egress")" -n "${BENCH_EGRESS_ITER:-5}" \
		-s "${BENCH_EGRESS_MIB:-100}"
fi

# The nats transport (when it was built): latency of a send+fetch+ack round
# trip and round trips per second with 1, 2 and 4 consumer threads, against a
# private nats-server it starts (tests/bench/bench_nats.c).
if [ -e "$B/tests/bench/bench_nats" ]; then
	echo
	TMPDIR="$T" "$(real_binary "$B/tests/bench/bench_nats")" -n "${BENCH_NATS_ITER:-200}" \
		-m "${BENCH_NATS_MESSAGES:-2000}"
fi

# The redis store (when it was built): update, get and lock round trips and
# threaded updates per second against the file store, over a private
# redis-server it starts (tests/bench/bench_redis_store.c).
if [ -e "$B/tests/bench/bench_redis_store" ]; then
	echo
	"$(real_binary "$B/tests/bench/bench_redis_store")" "${BENCH_STORE_ITER:-200}" "$T"
fi

# The queue broker (when the nats and redis plugins were built): run_command true through a
# fleet of 1, 2 and 4 `aksandbox worker` processes against the thread broker, and the
# latency one call adds, over a private nats-server and redis-server it starts
# (tests/bench/bench_queue.c); and, when the sqs and dynamodb plugins were built too, the
# same over sqs + dynamodb against the emulators fauxqs and dynalite (bench_queue -b aws), in
# this run, so that the two backends' figures and their ratios compare like with like.
if [ -e "$B/tests/bench/bench_queue" ]; then
	BENCH_QUEUE=$(real_binary "$B/tests/bench/bench_queue")
	backends=nats
	if [ -e "$B/plugins/sqs/.libs/sqs.so" ] && [ -e "$B/plugins/dynamodb/.libs/dynamodb.so" ]; then
		backends="nats aws"
	fi
	# queue_bench BACKEND NAME ARGS...: one bench_queue run, its output kept in $T/queue-NAME.txt
	# for the comparison below (printed once it ends: a pipe into tee would hide its status).
	queue_bench() {
		b=$1 name=$2
		shift 2
		echo
		"$BENCH_QUEUE" -b "$b" "$@" "$AKS" "$T" >"$T/queue-$name.txt" ||
			{ cat "$T/queue-$name.txt"; exit 1; }
		cat "$T/queue-$name.txt"
	}
	for b in $backends; do
		queue_bench "$b" "$b-true" -n "${BENCH_QUEUE_CALLS:-400}" -l "${BENCH_QUEUE_LATENCY:-100}"
	done
	# The same fleet on commands that wait rather than compute (these machines have two
	# cores): whether sessions on different workers really run in parallel.
	for b in $backends; do
		queue_bench "$b" "$b-sleep" -n "${BENCH_QUEUE_SLEEP_CALLS:-64}" -l 5 -x "sleep 0.2"
	done
	if [ "$backends" = "nats aws" ]; then
		echo
		python3 - "$T" <<'PY'
import re, sys
t = sys.argv[1]
def figures(name):
    text = open("%s/queue-%s.txt" % (t, name)).read()
    rate = {int(w): float(x) for w, x in
            re.findall(r"queue, (\d+) worker process\S* \(\d+ consumers\)\s+([\d.]+)\s+ratio", text)}
    added = float(re.search(r"added per call: (-?[\d.]+) ms", text).group(1))
    return rate, added
print("Queue broker: sqs + dynamodb against nats + redis, both measured above in this run")
print("  %-40s %12s %12s %8s" % ("executions/s", "nats+redis", "sqs+dynamo", "aws/nats"))
for kind, label in (("true", "run_command true"), ("sleep", "run_command sleep 0.2")):
    (n, na), (a, aa) = figures("nats-" + kind), figures("aws-" + kind)
    for w in sorted(n):
        print("  %-40s %12.1f %12.1f %7.2fx" % ("%s, %d worker%s" % (label, w, "s" if w > 1 else ""),
                                               n[w], a[w], a[w] / n[w]))
    if kind == "true": # the latency phase always runs true; the sleep run samples it 5 times
        print("  %-40s %12.3f %12.3f %7.2fx" % ("latency: ms added per call", na, aa,
                                                aa / na if na > 0 else float("nan")))
PY
	fi
fi

# The kubernetes provider (when it was built): a command in an existing pod through the
# plugin against `kubectl exec`, and a new pod's first command against kubectl run + wait
# + exec (tests/bench/bench_k8s.c). It needs the test cluster: like bench_docker without
# dockerd, its absence fails the run, saying how to start it, rather than skipping.
if [ -e "$B/tests/bench/bench_k8s" ]; then
	echo
	k8s_setup=$S/tests/integration/k8s-setup.sh
	"$k8s_setup" status >"$T/k8s-status.log" 2>&1 || {
		cat "$T/k8s-status.log" >&2
		echo "run.sh: the kubernetes plugin is built but its test cluster is not up:" \
			"run $k8s_setup start (as root), or configure --enable-plugin-kubernetes=no" >&2
		exit 1
	}
	k8s_env=$("$k8s_setup" env) || { echo "run.sh: $k8s_setup env failed" >&2; exit 1; }
	(
		eval "$k8s_env"
		export AKS_K8S_KUBECTL AKS_K8S_KUBECONFIG AKS_K8S_NAMESPACE AKS_K8S_PY_IMAGE
		"$(real_binary "$B/tests/bench/bench_k8s")" -n "${BENCH_K8S_ITER:-50}" \
			-m "${BENCH_K8S_FIRST:-5}"
	)
fi

# The e2b provider (when it was built), against the official JS SDK (`e2b`, pinned in
# tests/integration/e2b/package-lock.json) doing the same work against the same fake E2B
# service (tests/fakes/e2b), in this run: a command in an existing sandbox and a 1 MiB file
# round trip (tests/bench/bench_e2b.c, tests/integration/e2b/e2b_bench.mjs). Two rounds
# each, alternated, so drift on the machine affects both alike; the ratio is of the medians
# of all their samples' medians.
if [ -e "$B/tests/bench/bench_e2b" ]; then
	echo
	echo "e2b: the plugin against the official JS SDK, both against the fake E2B service"
	(
		tmp=$T/e2b
		mkdir -p "$tmp"
		. "$S/tests/integration/e2b/fake-e2b.sh"
		trap 'fake_stop' EXIT
		fake_start
		n=${BENCH_E2B_ITER:-50}
		for round in 1 2; do
			"$(real_binary "$B/tests/bench/bench_e2b")" -n "$n" | tee -a "$T/e2b.txt"
			BENCH_E2B_ITER=$n bash "$S/tests/integration/run-node.sh" e2b e2b_bench.mjs e2b |
				grep '^e2b-sdk' | tee -a "$T/e2b.txt"
		done
		python3 - "$T/e2b.txt" <<'PY'
import sys
from statistics import median
m = {}
for line in open(sys.argv[1]):
    who, what, _, ms = line.split()[:4]
    m.setdefault((who, what), []).append(float(ms))
for what in ("run_command-true", "file-1MiB-round-trip"):
    p, s = median(m[("e2b-plugin", what)]), median(m[("e2b-sdk", what)])
    print(f"  {what}: plugin {p:.2f} ms, SDK {s:.2f} ms: plugin/SDK {p / s:.2f}x (goal: at most 1x)")
PY
	)
fi

# The daytona provider (when it was built), against the official JS SDK (`@daytonaio/sdk`,
# pinned in tests/integration/daytona/package-lock.json) doing the same work against the same
# fake Daytona service (tests/fakes/daytona), in this run: a command in an existing sandbox
# and a 1 MiB file round trip (tests/bench/bench_daytona.c,
# tests/integration/daytona/daytona_bench.mjs). The plugin runs a command as a toolbox session
# command: its ratio is against the SDK's executeSessionCommand; the SDK's executeCommand is
# shown beside it. Two rounds each, alternated, as for e2b.
if [ -e "$B/tests/bench/bench_daytona" ]; then
	echo
	echo "daytona: the plugin against the official JS SDK, both against the fake Daytona service"
	(
		tmp=$T/daytona
		mkdir -p "$tmp"
		. "$S/tests/integration/daytona/fake-daytona.sh"
		trap 'fake_stop' EXIT
		fake_start
		n=${BENCH_DAYTONA_ITER:-50}
		for round in 1 2; do
			"$(real_binary "$B/tests/bench/bench_daytona")" -n "$n" | tee -a "$T/daytona.txt"
			BENCH_DAYTONA_ITER=$n bash "$S/tests/integration/run-node.sh" daytona \
				daytona_bench.mjs @daytonaio/sdk | grep '^daytona-sdk' | tee -a "$T/daytona.txt"
		done
		python3 - "$T/daytona.txt" <<'PY'
import sys
from statistics import median
m = {}
for line in open(sys.argv[1]):
    who, what, _, ms = line.split()[:4]
    m.setdefault((who, what), []).append(float(ms))
for what in ("run_command-true", "file-1MiB-round-trip"):
    p, s = median(m[("daytona-plugin", what)]), median(m[("daytona-sdk", what)])
    print(f"  {what}: plugin {p:.2f} ms, SDK {s:.2f} ms: plugin/SDK {p / s:.2f}x (goal: at most 1x)")
p, s = median(m[("daytona-plugin", "run_command-true")]), median(m[("daytona-sdk", "executeCommand-true")])
print(f"  run_command-true against the SDK's executeCommand: SDK {s:.2f} ms: plugin/SDK {p / s:.2f}x")
PY
	)
fi

# The ec2_ssm provider (when it was built), against the official AWS SDK for JavaScript
# (`@aws-sdk/client-ssm`, pinned in tests/integration/ec2_ssm/package-lock.json) doing the same
# work against the same fake AWS service (tests/fakes/aws), in this run: a command on an
# instance attached to (tests/bench/bench_ec2_ssm.c, tests/integration/ec2_ssm/ec2_ssm_bench.mjs),
# SendCommand then GetCommandInvocation read on the plugin's schedule, both at poll_interval
# 0.05 s (its least). The fake runs with --invocation-delay-ms 0 --delivery-delay-ms 0: its
# defaults (the invocation unknown for 200 ms, the command started 300 ms after SendCommand)
# would add some 300 ms of the same waiting to both sides and bury their difference. Without
# them a script that ends within 50 ms has ended before the first read, so a call is
# SendCommand, one 50 ms wait and one GetCommandInvocation: that wait is the floor of both
# figures (the fake's `sh -c` of the script runs inside it; a script that outlasts it costs
# another read and another 50 ms). The ratio is given as measured, and again above the waits,
# with the reads per command the fake recorded (the SDK's requests carry its User-Agent, the
# plugin's none). Both run the same script on the instance: the SDK sends the one the plugin
# sent for `true` (the plugin's measuring wrapper around it, docs/plugins/ec2_ssm.md). Two
# rounds each, alternated, as for e2b.
if [ -e "$B/tests/bench/bench_ec2_ssm" ]; then
	echo
	echo "ec2_ssm: the plugin against the official AWS SDK for JavaScript, both against the fake AWS service"
	(
		tmp=$T/ec2_ssm
		mkdir -p "$tmp"
		. "$S/tests/integration/ec2_ssm/fake-aws.sh"
		trap 'fake_stop' EXIT
		fake_start --invocation-delay-ms 0 --delivery-delay-ms 0
		n=${BENCH_EC2_SSM_ITER:-50}
		for round in 1 2; do
			"$(real_binary "$B/tests/bench/bench_ec2_ssm")" -n "$n" | tee -a "$T/ec2_ssm.txt"
			# the SDK sends the very script the plugin sent for `true` (its wrapper with it)
			script=$(python3 -c '
import json, sys
last = [json.loads(l) for l in open(sys.argv[1]) if "AmazonSSM.SendCommand" in l][-1]
print(last["body"]["Parameters"]["commands"][0])' "$FAKE_RECORD")
			BENCH_EC2_SSM_SCRIPT=$script BENCH_EC2_SSM_ITER=$n bash "$S/tests/integration/run-node.sh" ec2_ssm \
				ec2_ssm_bench.mjs @aws-sdk/client-ssm | grep '^ec2_ssm-sdk' | tee -a "$T/ec2_ssm.txt"
		done
		python3 - "$T/ec2_ssm.txt" "$FAKE_RECORD" <<'PY'
import json, sys
from statistics import median
m = {}
for line in open(sys.argv[1]):
    who, what, _, ms = line.split()[:4]
    m.setdefault((who, what), []).append(float(ms))
p, s = median(m[("ec2_ssm-plugin", "command")]), median(m[("ec2_ssm-sdk", "command")])
print(f"  command: plugin {p:.2f} ms, SDK {s:.2f} ms: plugin/SDK {p / s:.2f}x (goal: at most 1x)")
reads = {"plugin": {}, "SDK": {}}
for line in open(sys.argv[2]):
    r = json.loads(line)
    if r.get("target") != "AmazonSSM.GetCommandInvocation":
        continue
    ua = any(k.lower() == "user-agent" and "aws-sdk-js" in v for k, v in r["headers"].items())
    c = reads["SDK" if ua else "plugin"]
    c[r["body"]["CommandId"]] = c.get(r["body"]["CommandId"], 0) + 1
rp, rs = median(reads["plugin"].values()), median(reads["SDK"].values())
p, s = p - 50 * rp, s - 50 * rs
print(f"  GetCommandInvocation reads per command: plugin {rp:g}, SDK {rs:g}; above their 50 ms"
      f" waits: plugin {p:.2f} ms, SDK {s:.2f} ms: plugin/SDK {p / s:.2f}x")
PY
	)
fi
