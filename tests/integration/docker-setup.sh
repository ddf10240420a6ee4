#!/bin/sh
# docker-setup.sh - makes the Docker Engine and the test image the docker
# plugin's tests need. Installs nothing (contrib/install-deps.sh does):
#
#  1. when no Docker Engine answers on the socket, starts dockerd
#     (--iptables=false --bridge=none: the only form that works on machines
#     without iptables or bridge support) and records its pid in
#     $AKS_DOCKER_STATE/dockerd.pid so `docker-setup.sh stop` stops it, and
#     only it;
#  2. registers gVisor's runsc as a runtime in /etc/docker/daemon.json when it
#     is installed and not registered (a running dockerd re-reads it on
#     SIGHUP), and checks that runsc really runs a container (see probe_runsc);
#  3. builds the test image, aksandbox-test:bookworm, when it is missing or
#     older than IMAGE_REVISION: a debootstrap --variant=minbase bookworm with
#     python3 and the clients the egress tests drive through the proxy (curl,
#     git, pip, CA certificates) from the mirror apt is configured with (no
#     registry is needed), imported with `docker import`. The image stays in the
#     engine, so later runs reuse it.
#
# Usage: docker-setup.sh [start|stop|image-name]. Exits non-zero, saying why,
# when anything fails. Needs root (dockerd, debootstrap).
set -eu

IMAGE=aksandbox-test:bookworm # the name the tests use
# Raised when the image's content changes: an engine holding an older one builds it again.
IMAGE_REVISION=2
IMAGE_PACKAGES=python3,python3-pip,curl,git,ca-certificates
SUITE=bookworm
STATE=${AKS_DOCKER_STATE:-/run/aksandbox-docker-test}
SOCK=/var/run/docker.sock
DAEMON_JSON=/etc/docker/daemon.json

die() { echo "docker-setup: $*" >&2; exit 1; }
say() { echo "docker-setup: $*" >&2; }

engine_up() { docker version --format '{{.Server.APIVersion}}' >/dev/null 2>&1; }

# The first deb URI apt uses (one-line or deb822 sources), never a fixed host.
apt_mirror() {
	m=$(grep -rhs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
		grep -v security | sed -e 's/\[[^]]*\]//' | awk '{print $2; exit}')
	if [ -z "$m" ]; then
		m=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null |
			grep -v security | awk '{print $2; exit}')
	fi
	[ -n "$m" ] || die "cannot find a Debian mirror in apt's sources (/etc/apt/sources.list*)"
	echo "$m"
}

register_runsc() {
	runsc=$(command -v runsc 2>/dev/null) || return 0
	if [ -f "$DAEMON_JSON" ] && grep -q '"runsc"' "$DAEMON_JSON"; then
		return 0
	fi
	if [ -f "$DAEMON_JSON" ] && [ -s "$DAEMON_JSON" ]; then
		python3 - "$DAEMON_JSON" "$runsc" <<'EOF' || die "cannot add runsc to $DAEMON_JSON"
import json, sys
path, runsc = sys.argv[1], sys.argv[2]
with open(path) as f:
    cfg = json.load(f)
cfg.setdefault("runtimes", {})["runsc"] = {"path": runsc}
with open(path, "w") as f:
    json.dump(cfg, f, indent=1)
EOF
	else
		mkdir -p "$(dirname "$DAEMON_JSON")"
		printf '{ "runtimes": { "runsc": { "path": "%s" } } }\n' "$runsc" >"$DAEMON_JSON"
	fi
	say "registered runsc in $DAEMON_JSON"
	registered_now=1
}

# SIGHUP makes a running dockerd re-read the runtimes of daemon.json.
reload_engine() {
	pid=$(cat /var/run/docker.pid 2>/dev/null || pidof dockerd) ||
		die "cannot find dockerd's pid to make it re-read $DAEMON_JSON"
	kill -HUP "$pid"
	sleep 1
}

# One container under runsc; when it fails, its runsc processes can outlive
# it (the shim, gofer and sandbox of a failed start stay behind): kill those,
# found by the container's id in their command lines.
try_runsc() {
	cid=$(docker create --network none --runtime="${1:-runsc}" "$IMAGE" true 2>&1) || { echo "$cid"; return 1; }
	if out=$(docker start -a "$cid" 2>&1); then
		docker rm -f "$cid" >/dev/null 2>&1
		return 0
	fi
	docker rm -f "$cid" >/dev/null 2>&1
	for p in /proc/[0-9]*; do
		grep -qs "$cid" "$p/cmdline" && kill -9 "${p#/proc/}" 2>/dev/null
	done
	echo "$out"
	return 1
}

# gVisor's own network stack cannot start on some machines (nested VMs): runsc
# then fails every container with "cannot run with network enabled in root
# network namespace". There, register runsc with --network=host: gVisor hands
# network syscalls to the host kernel, inside the container's own network
# namespace, so Docker's NetworkMode (none for egress deny) still decides what
# the sandbox can reach.
probe_runsc() {
	command -v runsc >/dev/null || return 0
	out=$(try_runsc) && return 0
	case $out in
	*"root network namespace"*) ;;
	*) die "runsc cannot run containers here: $out" ;;
	esac
	say "runsc's netstack cannot start on this machine; registering runsc with --network=host"
	python3 - "$DAEMON_JSON" "$(command -v runsc)" <<'EOF' || die "cannot update $DAEMON_JSON"
import json, sys
path, runsc = sys.argv[1], sys.argv[2]
with open(path) as f:
    cfg = json.load(f)
rt = cfg.setdefault("runtimes", {}).setdefault("runsc", {"path": runsc})
rt["runtimeArgs"] = ["--network=host"]
with open(path, "w") as f:
    json.dump(cfg, f, indent=1)
EOF
	reload_engine
	out=$(try_runsc) || die "runsc still cannot run containers: $out"
}

start_engine() {
	command -v dockerd >/dev/null || die "dockerd is not installed (apt-get install docker.io; contrib/install-deps.sh does it)"
	[ "$(id -u)" -eq 0 ] || die "starting dockerd needs root; start it yourself: dockerd --iptables=false --bridge=none &"
	mkdir -p "$STATE"
	say "starting dockerd --iptables=false --bridge=none (log: $STATE/dockerd.log)"
	# setsid: the engine must outlive this script and its test run's process group.
	setsid dockerd --iptables=false --bridge=none >"$STATE/dockerd.log" 2>&1 </dev/null &
	echo $! >"$STATE/dockerd.pid"
	i=0
	while ! engine_up; do
		i=$((i + 1))
		if [ $i -gt 60 ]; then
			tail -20 "$STATE/dockerd.log" >&2 || true
			die "dockerd did not answer on $SOCK within 30 s (log above)"
		fi
		if ! kill -0 "$(cat "$STATE/dockerd.pid")" 2>/dev/null; then
			tail -20 "$STATE/dockerd.log" >&2 || true
			die "dockerd exited at start (log above)"
		fi
		sleep 0.5
	done
}

build_image() {
	command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
	mirror=$(apt_mirror)
	root=$(mktemp -d /var/tmp/aks-docker-rootfs.XXXXXX)
	trap 'rm -rf "$root"' EXIT
	say "building $IMAGE: debootstrap --variant=minbase $SUITE from $mirror (a few minutes, once)"
	debootstrap --variant=minbase --include="$IMAGE_PACKAGES" "$SUITE" "$root" "$mirror" \
		>"$root.log" 2>&1 || { tail -30 "$root.log" >&2; die "debootstrap failed (log above)"; }
	rm -f "$root.log"
	# Smaller, and no stale apt lists baked in.
	rm -rf "$root/var/cache/apt/archives/"*.deb "$root/var/lib/apt/lists/"* || true
	tar -C "$root" -c . | docker import \
		-c 'CMD ["/bin/sh"]' -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		-c 'ENV LANG=C.UTF-8' -c "LABEL io.aksandbox.test-image=$IMAGE_REVISION" \
		- "$IMAGE" >/dev/null || die "docker import failed"
	rm -rf "$root"
	trap - EXIT
	say "built $IMAGE"
}

case ${1:-start} in
image-name)
	echo "$IMAGE"
	;;
start)
	command -v docker >/dev/null || die "the docker CLI is not installed (apt-get install docker.io)"
	registered_now=0
	register_runsc
	if ! engine_up; then
		start_engine
	elif [ "$registered_now" = 1 ]; then
		reload_engine
	fi
	revision=$(docker image inspect -f '{{index .Config.Labels "io.aksandbox.test-image"}}' \
		"$IMAGE" 2>/dev/null || true)
	[ "$revision" = "$IMAGE_REVISION" ] || build_image
	probe_runsc
	;;
stop)
	if [ -f "$STATE/dockerd.pid" ]; then
		pid=$(cat "$STATE/dockerd.pid")
		if kill -0 "$pid" 2>/dev/null; then
			say "stopping the dockerd we started (pid $pid)"
			kill "$pid"
			i=0
			while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.2; i=$((i + 1)); done
		fi
		rm -f "$STATE/dockerd.pid"
	fi
	;;
*)
	die "usage: $0 [start|stop|image-name]"
	;;
esac
