#!/bin/bash
# tests/security/probes.sh TARGET - what hostile sandboxed code tries, as it would try it:
# through the eight tools (`aksandbox tool`, the same JSON an agent sends), against one
# provider and runtime: local (local_subprocess through the agent), docker (runc), runsc
# (docker with gVisor) or kubernetes. TAP. Every probe is an attack with its expected
# refusal, and where a probe could pass for the wrong reason, a control that shows the
# attack itself works when nothing stops it. docs/security.md says what each one proves.
set -u

target=${1:?usage: probes.sh local|docker|runsc|kubernetes}
B=${AKS_TEST_BUILDDIR:?run through make check}
AKS="$B/core/cli/aksandbox"
AGENT="$B/agent/aksandbox-agent"
[ -x "$AKS" ] || { echo "Bail out! $AKS was not built"; exit 1; }

T=$(mktemp -d "${TMPDIR:-/tmp}/aks-probes-$target.XXXXXX") || exit 1
mkdir -p "$T/boxes"
export AKS_STATE_DIR="$T/state"
export AKS_PROBE_SECRET="hunter2-$$-not-for-the-sandbox"
unset AKSANDBOX_CONVERSATION AKSANDBOX_CONFIG

case $target in
local)
	block="type: local_subprocess
      local_subprocess: {workdir: $T/boxes, agent: $AGENT}" ;;
docker | runsc)
	runtime=docker
	[ "$target" = runsc ] && runtime=runsc
	block="type: docker
      docker: {image: aksandbox-test:bookworm, pull: false, runtime: $runtime, agent: $AGENT,
               labels: {io.aksandbox.test: probes-$$}}" ;;
kubernetes)
	kc=/var/cache/aksandbox-k8s/conf/admin.kubeconfig
	[ -r "$kc" ] || { echo "Bail out! no test cluster ($kc): run tests/integration/k8s-setup.sh start"; exit 1; }
	block="type: kubernetes
      kubernetes: {kubeconfig: $kc, namespace: aks-test, image: aksandbox-test:bookworm,
                   image_pull_policy: Never, agent: $AGENT, labels: {aksandbox-test: probes-$$}}" ;;
*)
	echo "Bail out! unknown target $target"
	exit 1 ;;
esac
cat >"$T/config.yaml" <<YAML
sandbox:
  enabled: true
  default_profile: p
  profiles:
    p:
      scope: per_session
      policy: {timeout: 4}
      $block
YAML

aks() { "$AKS" -c "$T/config.yaml" --conversation probes "$@"; }
# One tool call; prints its JSON result on stdout. $1 tool, $2 JSON arguments.
tool() { aks tool "$1" "$2" 2>>"$T/stderr"; }
# A field of a JSON text on stdin ("" when absent).
field() { python3 -c 'import json,sys
try: v = json.load(sys.stdin).get(sys.argv[1], "")
except Exception: v = "<not JSON>"
print(v if isinstance(v, str) else json.dumps(v))' "$1"; }
cmd() { tool run_command "$(python3 -c 'import json,sys; print(json.dumps({"command": sys.argv[1]}))' "$1")"; }
out_of() { cmd "$1" | field stdout; }

cleanup() {
	aks tool destroy_sandbox_session '{"sandbox_session_id": "default:p"}' >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT

n=0
failed=0
check() { # check NAME EXPECTED ACTUAL
	n=$((n + 1))
	if [ "$2" = "$3" ]; then
		echo "ok $n - $target: $1"
	else
		failed=$((failed + 1))
		echo "not ok $n - $target: $1"
		echo "#   expected: $2"
		echo "#   actual:   $3"
	fi
}
has() { case $2 in *"$1"*) echo yes ;; *) echo "no: $2" ;; esac; }

# A shell command counting the processes whose command line holds $1$2, seen from where the
# sandbox's programs run: four processes whatever the machine runs (a loop forking per
# process outlived the 4 s timeout on a busy machine). The pattern's first character of
# $2 is a bracket expression, so the probe's own command line never matches it.
count_cmd() { # part1 part2
	rest=${2#?}
	printf '%s' "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -ao '$1[${2%"$rest"}]$rest' | wc -l"
}
count_procs() { # part1 part2
	out_of "$(count_cmd "$1" "$2")" | tr -d '\n '
}

echo "1..10"

# 1. A detached escapee (double fork, setsid, a cleared environment) outlives no timeout.
# Its sleeps carry this run's own number: the probes of the other targets may run at the
# same time, and a local sandbox sees the host's processes, theirs among them.
mark="sleep 47$(printf '%05d' $(($$ % 100000)))"
res=$(cmd "(setsid env -i $mark""11 >/dev/null 2>&1 &); ($mark""12 >/dev/null 2>&1 &); sleep 60")
check "a run past its timeout is an error" yes "$(has "exceeded timeout" "$(echo "$res" | field error)")"
sleep 1
check "nothing it detached survives the timeout (setsid, env -i, double fork)" \
	"0 0" "$(count_procs "$mark" 11) $(count_procs "$mark" 12)"

# the control: the same escapee is there to be seen while its run goes on
seen=$(out_of "(setsid env -i $mark""13 >/dev/null 2>&1 &); sleep 0.5; $(count_cmd "$mark" 13)" | tr -d '\n ')
check "(control) the escapee is seen while its run goes on" yes "$([ "${seen:-0}" -ge 1 ] && echo yes || echo "no: $seen")"

# 2. The host's secrets are not in the sandbox's environment.
env_out=$(out_of 'env; cat /proc/1/environ 2>/dev/null | tr "\0" "\n"')
check "the host's environment (a secret in it) is not the sandbox's" \
	yes "$(case $env_out in *"$AKS_PROBE_SECRET"*) echo "no: leaked" ;; "") echo "no: empty" ;; *) echo yes ;; esac)"

# 3. NUL in a command does not cut it silently.
res=$(tool run_command '{"command": "echo safe\u0000; echo cut"}')
check "a NUL in a command is refused, not cut" yes "$(has "NUL" "$(echo "$res" | field error)")"

# 4. A FIFO where a file is expected never wedges the session.
cmd "mkfifo trap.fifo" >/dev/null
start=$(date +%s)
res=$(tool read_sandbox_file '{"path": "trap.fifo"}')
took=$(($(date +%s) - start))
check "reading a FIFO is a clear error, at once" "yes fast" \
	"$(has "not found" "$(echo "$res" | field error)") $([ $took -lt 4 ] && echo fast || echo "slow: ${took}s")"
check "and the session still answers" "still here" "$(out_of 'echo still here' | tr -d '\n')"

# 5. Paths that escape the workspace, directly or through a symlink.
res=$(tool read_sandbox_file '{"path": "../../../../etc/passwd"}')
check "a path out of the workspace is refused" yes "$(has "escapes" "$(echo "$res" | field error)")"
cmd "ln -sf /etc/passwd leak" >/dev/null
res=$(tool read_sandbox_file '{"path": "leak"}')
check "a symlink out of the workspace is refused" yes \
	"$(echo "$res" | field error | grep -qiE 'escapes|not found|outside' && echo yes || echo "no: $res")"

# 6. Overwriting the agent from inside, then killing it: the next call still runs through
# the real agent (its copy is checked by hash, placed again), never a silent per call.
case $target in
docker | runsc | kubernetes)
	cmd 'for f in /.aksandbox/aksandbox-agent*; do [ -f "$f" ] || continue; n=$(wc -c < "$f"); head -c $n /dev/zero > "$f.x"; chmod 755 "$f.x"; mv "$f.x" "$f"; done; kill -9 $(for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = aksandbox-agent ] && echo ${p#/proc/}; done) 2>/dev/null; true' >/dev/null
	sleep 2
	res=$(cmd 'for f in /.aksandbox/aksandbox-agent*; do head -c 4 "$f" | tail -c 3 | tr -d "\\0"; break; done')
	echo "# after the overwrite: $res"
	check "the agent overwritten and killed: the next call runs through a real agent, or is refused" yes \
		"$(case $(echo "$res" | field stdout)/$(echo "$res" | field error) in ELF/) echo yes ;; */*"refused rather than run without it"*) echo yes ;; *) echo "no: $res" ;; esac)"
	;;
*)
	check "the agent overwritten and killed (local: runs from the host, not the sandbox)" ok ok ;;
esac

echo "# $failed of $n failed"
[ "$failed" -eq 0 ]
