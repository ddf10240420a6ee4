#!/bin/bash
# tests/integration/egress.sh - network_egress: allowlist enforced by aksandbox-agent's egress
# proxy, end to end through the aksandbox command line on one provider (TAP). Sourced by
# egress-<provider>.test after it sets PROFILE_YAML (the profile's provider lines, given the
# policy below) and NAME. The destinations are servers of this test on the host's loopback
# (egress_servers.py), reached under allowed.test and blocked.test through the test-only name
# map AKS_TEST_EGRESS_RESOLVE; a program inside tries what users do (curl, urllib, pip, git)
# and what an attacker would (egress_probe.py). Nothing leaves the machine.
set -u

if [ -z "${AKS_TEST_BUILDDIR:-}" ] || [ -z "${AKS_TEST_SRCDIR:-}" ]; then
	echo "Bail out! AKS_TEST_BUILDDIR and AKS_TEST_SRCDIR are not set (run through make check)"
	exit 1
fi
AKS="$AKS_TEST_BUILDDIR/core/cli/aksandbox"
AGENT="$AKS_TEST_BUILDDIR/agent/aksandbox-agent"
for f in "$AKS" "$AGENT"; do [ -x "$f" ] || { echo "Bail out! $f was not built"; exit 1; }; done
for c in curl git openssl python3; do
	command -v $c >/dev/null || { echo "Bail out! $c is not installed (contrib/install-deps.sh)"; exit 1; }
done

T=$(mktemp -d "${TMPDIR:-/tmp}/aks-egress.XXXXXX") || exit 1
SERVERS_PID=
cleanup() {
	[ -z "$SERVERS_PID" ] || kill "$SERVERS_PID" 2>/dev/null
	"$AKS" -c "$T/config.yaml" tool destroy_sandbox_session '{"sandbox_session_id": "default:box"}' \
		>/dev/null 2>&1
	type egress_cleanup >/dev/null 2>&1 && egress_cleanup
	[ -n "${EGRESS_KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT
export AKS_STATE_DIR="$T/state"
unset AKSANDBOX_CONVERSATION AKSANDBOX_CONFIG

python3 "$AKS_TEST_SRCDIR/tests/integration/egress_servers.py" "$T/srv" >"$T/servers.txt" 2>"$T/servers.err" &
SERVERS_PID=$!
for _ in $(seq 100); do [ -s "$T/servers.txt" ] && break; sleep 0.1; done
read -r HTTP HTTPS CA <<<"$(sed 's/[a-z]*=//g' "$T/servers.txt")"
[ -n "${CA:-}" ] || { echo "Bail out! the test servers did not start: $(cat "$T/servers.err")"; exit 1; }
# An address of this host other than loopback: a sandbox must not reach it by itself.
HOST_ADDR=$(ip -4 -o addr show scope global 2>/dev/null | awk '{print $4}' | cut -d/ -f1 | head -1)
HOST_ADDR=${HOST_ADDR:-192.0.2.1}

export AKS_TEST_EGRESS_RESOLVE="allowed.test=127.0.0.1,blocked.test=127.0.0.1,private.test=10.255.255.1"
export AKS_LOG_LEVEL=info
cat >"$T/config.yaml" <<YAML
sandbox:
  enabled: true
  default_profile: box
  profiles:
    box:
$PROFILE_YAML
      policy:
        network_egress: allowlist
        # 127.0.0.1/32: the test's servers are on loopback, which a name may lead to only
        # through a CIDR entry inside that range (as for a mirror on this host)
        network_allow: [allowed.test, private.test, 127.0.0.1/32]
YAML
aks() { "$AKS" -c "$T/config.yaml" "$@" 2>>"$T/host.log"; }

n=0
check() { # check NAME EXPECTED ACTUAL
	n=$((n + 1))
	if [ "$2" = "$3" ]; then
		echo "ok $n - $NAME: $1"
	else
		echo "not ok $n - $NAME: $1"
		echo "#   expected: $2"
		echo "#   actual:   $3"
	fi
}
probe() { sed -n "s/^$1=//p" "$T/probe.out" | head -1; }
# What only holds where the provider removes the network (EGRESS_UNENFORCED_NETWORK says why
# it does not here): skipped, said so, never passed.
network_check() {
	if [ -n "${EGRESS_UNENFORCED_NETWORK:-}" ]; then
		n=$((n + 1))
		echo "ok $n - $NAME: $1 # SKIP $EGRESS_UNENFORCED_NETWORK"
	else
		check "$@"
	fi
}

out=$(aks check | grep -E '^    network_egress')
case $out in
*'allowlist [allowed.test, private.test, 127.0.0.1/32] enforced (host proxy)'*) r=yes ;;
*) r="$out" ;;
esac
check "aksandbox check: the allowlist is enforced by the host proxy" yes "$r"

# The probe and the CA go into the workspace through the file tool.
json() { python3 -c 'import json,sys; print(json.dumps({"path": sys.argv[1], "content": open(sys.argv[2]).read()}))' "$1" "$2"; }
aks tool write_sandbox_file "$(json probe.py "$AKS_TEST_SRCDIR/tests/integration/egress_probe.py")" >/dev/null
aks tool write_sandbox_file "$(json ca.pem "$CA")" >/dev/null
aks tool run_command "{\"command\": \"python3 probe.py $HTTP $HTTPS ca.pem $HOST_ADDR\"}" \
	>"$T/probe.json"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r.get("stdout", "")); print("exit=%s" % r.get("exit_code"), file=sys.stderr); print(r.get("stderr", "")[-2000:], file=sys.stderr)' \
	"$T/probe.json" >"$T/probe.out" 2>"$T/probe.err"
check "the probe ran to its end" "exit=0" "$(head -1 "$T/probe.err")"

check "curl over http reaches the allowed name" "hello through the proxy" "$(probe curl_http)"
check "curl over https (CONNECT) reaches it" "hello through the proxy" "$(probe curl_https)"
check "Python's urllib over https reaches it" "hello through the proxy" "$(probe urllib_https)"
check "pip downloads from the allowed index" "tinypkg-1.0-py3-none-any.whl" "$(probe pip_download)"
check "git clones over https" "cloned through the egress proxy" "$(probe git_clone)"
check "the right TLS name is served" "served" "$(probe sni_allowed)"

r=$(probe blocked_name)
check "a name no entry allows: 403 saying why" yes \
	"$(case $r in *"no network_allow entry allows blocked.test port $HTTP"*' 403') echo yes ;; *) echo "$r" ;; esac)"
r=$(probe blocked_host)
check "an allowed name with another Host: 403" yes \
	"$(case $r in *"Host 'blocked.test'"*' 403') echo yes ;; *) echo "$r" ;; esac)"
check "an allowed name with another TLS name: cut before the server sees it" \
	cut "$(probe sni_blocked)"
r=$(probe cidr_outside)
check "an address outside the CIDRs: 403" yes \
	"$(case $r in *'no network_allow entry allows 8.8.8.8 port 80'*' 403') echo yes ;; *) echo "$r" ;; esac)"
r=$(probe private_name)
check "an allowed name resolving to a private address: 403" yes \
	"$(case $r in *'private.test resolves to 10.255.255.1, a private address'*' 403') echo yes ;; *) echo "$r" ;; esac)"
r=$(probe metadata)
check "the cloud metadata address: 403" yes \
	"$(case $r in *'169.254.169.254 is a metadata address'*' 403') echo yes ;; *) echo "$r" ;; esac)"

network_check "no direct connection to the host's loopback servers" refused "$(probe direct_loopback)"
network_check "no direct connection to the host's address $HOST_ADDR" failed "$(probe direct_host)"
network_check "no direct connection to a public address" failed "$(probe direct_public)"
network_check "no IPv6" failed "$(probe direct_ipv6)"
network_check "no UDP" failed "$(probe udp)"
network_check "no DNS: names resolve only through the proxy" failed "$(probe dns)"
network_check "no raw ICMP socket" failed "$(probe icmp)"

check "a malformed CONNECT: 400" "HTTP/1.1 400 Bad Request" "$(probe malformed_connect)"
check "a request in origin form: 400" "HTTP/1.1 400 Bad Request" "$(probe origin_form)"
check "10,000 connections: bounded, the rest cut at once" bounded "$(probe storm)"
check "and the proxy still serves" "hello through the proxy" "$(probe after_storm)"

# The audit: one line per connection with the session, principal, destination and verdict.
grep -q "egress allowed sandbox=[^ ]* session=default:box conversation=cli principal=agent dest=allowed.test:$HTTPS addr=127.0.0.1 rule=\"allowed.test\" bytes_out=[1-9]" "$T/host.log"
check "the host's log has each allowed connection: session, conversation, principal, bytes" 0 "$?"
grep -q "egress refused sandbox=.* dest=blocked.test:$HTTP .*reason=\"no network_allow entry allows blocked.test" "$T/host.log"
check "and each refused one with its reason" 0 "$?"
grep -q "egress refused .* dest=allowed.test:$HTTPS .*reason=\"the TLS server name 'blocked.test' is not the destination allowed.test\"" "$T/host.log"
check "the TLS name refusal too" 0 "$?"

# Python state outlives the process that made it where the agent is resident in the sandbox
# (docker, kubernetes), and with it the proxy settings: the egress proxy keeps its port
# across hosts, and the next process decides its connections. Elsewhere (bubblewrap sets
# EGRESS_STATE_PER_PROCESS) the next process starts a new interpreter.
aks tool run_code '{"code": "import urllib.request as u"}' >/dev/null
out=$(aks tool run_code "{\"code\": \"print(u.urlopen('http://allowed.test:$HTTP/').read().decode())\"}")
case ${EGRESS_STATE_PER_PROCESS:-}/$out in
/'{"stdout": "hello through the proxy\n'*) r=yes ;;
1/*NameError*) r=yes ;;
*) r="$out" ;;
esac
check "a Python session of an earlier process still reaches what the allowlist allows" yes "$r"

# A call whose programs were refused says so in its result.
out=$(aks tool run_command "{\"command\": \"curl -s -o /dev/null http://blocked.test:$HTTP/; echo done\"}")
case $out in
*'"stdout": "done\n"'*'"notice": "'*'1 connection refused by the egress policy'*'blocked.test:'"$HTTP"*) r=yes ;;
*) r="$out" ;;
esac
check "the result's notice counts the refusals of the call and names them" yes "$r"

# The session's tally of refusals, over calls of separate processes: every refused line of
# the log, counted once (`aksandbox sessions`, egress_refused).
logged=$(grep -c "egress refused sandbox=[^ ]* session=default:box conversation=cli " "$T/host.log")
tally=$(aks sessions | python3 -c 'import json,sys
d = json.load(sys.stdin)
s = d.get("sessions", d) if isinstance(d, dict) else d
print(" ".join(str(x.get("egress_refused", 0)) for x in s if x.get("sandbox_session_id") == "default:box"))')
check "the session counts its refusals, as many as the log has (more than one call's)" yes \
	"$([ "$logged" -gt 1 ] && [ "$tally" = "$logged" ] && echo yes || echo "no: sessions says '$tally', the log has $logged")"

# The provider's own checks (egress_extra, set by the .test), then the plan.
if type egress_extra >/dev/null 2>&1; then egress_extra; fi
echo "1..$n"
