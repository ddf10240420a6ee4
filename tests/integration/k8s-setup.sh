#!/bin/sh
# k8s-setup.sh - a real single-node Kubernetes v1.20.2 cluster for the
# kubernetes plugin's tests, made from nothing but Debian packages:
#
#  install  apt-gets golang-go, etcd-server, containernetworking-plugins,
#           busybox-static, socat, rsync, jq, openssl and curl;
#  build    builds kube-apiserver, kube-controller-manager, kube-scheduler,
#           kubelet and kubectl from Debian's source package `kubernetes`
#           (1.20.2 with its vendor/ tree, so offline; deb-src is enabled only
#           while fetching it), in GOPATH mode after `make generated_files`,
#           with two kubelet constants patched to 0 (negative oom_score_adj is
#           impossible where CAP_SYS_RESOURCE is dropped) and the vendored
#           reflect2 fixed for Go >= 1.18 (k8s/reflect2-go118.patch: without
#           it every binary crashes on the first map json-iterator encodes;
#           Debian's own kubectl 1.20, kubernetes-client, does, in `kubectl
#           config`, so ours is built here), plus a static pause binary. The
#           binaries stay in $AKS_K8S_CACHE; the build is skipped while they
#           match the recorded stamp (version + patches + flags);
#  start    install + build when needed, the PKI (cached too), the local pause
#           and busybox images (docker import: no registry is reachable), then
#           etcd, the apiserver, controller-manager, scheduler and kubelet
#           (dockershim, driving the engine docker-setup.sh starts) on
#           loopback, non-default ports, with state in $AKS_K8S_STATE, and a
#           socat that lets pods reach the apiserver on the pod bridge's host
#           side (no kube-proxy: see POD_API_HOST); applies
#           the tests' namespace and RBAC (k8s/rbac.yaml); waits for the node
#           to be Ready and proves a pod can be created, exec'd (busybox and
#           the python image) and deleted. Restores the sysctls kubelet
#           changes. Prints only the admin kubeconfig's path on stdout.
#           Idempotent: starts only what is not running, then verifies;
#  stop     stops only the processes it started (pid files), removes the pod
#           containers, mounts, bridge and CNI state it made, restores the
#           sysctls; keeps the caches (binaries, PKI);
#  status   exit 0 when the apiserver answers and the node is Ready;
#  env      shell assignments for the tests (eval "$(k8s-setup.sh env)").
#
# Needs root. Every failure exits non-zero, saying why on stderr.
set -eu

K8S_VERSION=1.20.2
CACHE=${AKS_K8S_CACHE:-/var/cache/aksandbox-k8s}
STATE=${AKS_K8S_STATE:-/run/aksandbox-k8s}
HERE=$(cd "$(dirname "$0")" && pwd)
MANIFESTS=$HERE/k8s

# Loopback only, none of them a default port (kubelet's 10250 excepted: the
# apiserver reaches the node at "localhost" on the port the node reports).
ETCD_PORT=23790
ETCD_PEER_PORT=23800
API_PORT=16443
CM_PORT=10257
SCHED_PORT=10259
KUBELET_PORT=10250
KUBELET_HEALTHZ_PORT=10248
SERVER=https://127.0.0.1:$API_PORT
NODE=localhost

# The CNI bridge: TEST-NET-2, host side 198.51.100.1, no default route in the
# pods, no masquerading (no iptables here).
BRIDGE=k8sv0
POD_CIDR=198.51.100.0/24
# Pods reach the API server at the bridge's host side: there is no kube-proxy for the
# `kubernetes` Service's cluster IP. A socat on that address forwards to the apiserver (which
# listens on loopback only), whose certificate names the address; an in-cluster client gets it
# as KUBERNETES_SERVICE_HOST and _PORT (k8s-in-cluster.test sets them in the worker pods).
POD_API_HOST=198.51.100.1
POD_API_PORT=$API_PORT

PAUSE_IMAGE=k8s.gcr.io/pause:3.2
BUSYBOX_IMAGE=local/busybox:1
PY_IMAGE=aksandbox-test:bookworm # built by docker-setup.sh

# `env` prints unquoted assignments: keep the paths plain.
case $CACHE$STATE in *[!A-Za-z0-9/._-]*) echo "k8s-setup: AKS_K8S_CACHE and AKS_K8S_STATE must be plain paths ([A-Za-z0-9/._-])" >&2; exit 1 ;; esac

BIN=$CACHE/bin
PKI=$CACHE/pki
CONF=$CACHE/conf
KUBECTL=$BIN/kubectl
LOGS=$STATE/logs

# The two source changes; part of the build stamp, so changing them rebuilds.
PATCH1='s/^\tdefaultSandboxOOMAdj int = -998$/\tdefaultSandboxOOMAdj int = 0/'
PATCH1_FILE=pkg/kubelet/dockershim/docker_sandbox.go
PATCH2='s/^\tguaranteedOOMScoreAdj int = -997$/\tguaranteedOOMScoreAdj int = 0/'
PATCH2_FILE=pkg/kubelet/qos/policy.go
REFLECT2_PATCH=$MANIFESTS/reflect2-go118.patch
# providerless: without the in-tree cloud providers (AWS, Azure, GCE, OpenStack, vSphere
# SDKs), which a node on loopback never uses: half the binaries' size and about a third less
# build time on CI's critical path.
BUILD_TAGS=selinux,notest,providerless
COMPONENTS="kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl"
STAMP="kubernetes v$K8S_VERSION (Debian source package)
build: GOPATH mode, CGO_ENABLED=0, tags $BUILD_TAGS, -s -w
patch $PATCH1_FILE: $PATCH1
patch $PATCH2_FILE: $PATCH2
patch $(sha256sum <"$REFLECT2_PATCH" | cut -c1-64)
pause: build/pause/linux/pause.c, gcc -Os -static
components: $COMPONENTS"

# Kubelet sets these at its start; the machine's own values come back once the
# node is Ready (and again at stop). The CNI bridge plugin (isGateway) turns
# on net.ipv4.ip_forward: restored at stop.
SYSCTLS="vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward"

APT="apt-get -q -o DPkg::Lock::Timeout=600"
PACKAGES="golang-go etcd-server containernetworking-plugins busybox-static socat rsync jq openssl curl"

die() { echo "k8s-setup: $*" >&2; exit 1; }
say() { echo "k8s-setup: $*" >&2; }
need_root() { [ "$(id -u)" -eq 0 ] || die "$1 needs root"; }
now() { date +%s; }

# ---- install -----------------------------------------------------------------

packages_missing() {
	for p in $PACKAGES; do
		dpkg-query -W -f '${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' ||
			echo "$p"
	done
}

cmd_install() {
	need_root install
	missing=$(packages_missing)
	if [ -n "$missing" ]; then
		say "installing $(echo $missing)"
		DEBIAN_FRONTEND=noninteractive $APT install -y --no-install-recommends $missing >&2 ||
			{ $APT update >&2 && DEBIAN_FRONTEND=noninteractive $APT install -y --no-install-recommends $missing >&2; } ||
			die "apt-get install $missing failed"
	fi
}

# ---- build -------------------------------------------------------------------

build_current() {
	for c in $COMPONENTS pause; do [ -x "$BIN/$c" ] || return 1; done
	[ -f "$BIN/stamp" ] && [ "$(cat "$BIN/stamp")" = "$STAMP" ]
}

# deb-src for the first Debian suite apt uses, only for as long as the fetch
# lasts; the trap removes it (and its index) whatever happens.
SRC_LIST=
drop_deb_src() {
	if [ -n "$SRC_LIST" ] && [ -f "$SRC_LIST" ]; then
		rm -f "$SRC_LIST"
		$APT update >/dev/null 2>&1 || say "warning: apt-get update after removing $SRC_LIST failed"
	fi
}

fetch_source() { # into $1
	eval "$(apt-config shell SP Dir::Etc::sourceparts/d)"
	codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
	main=
	if [ -f "${SP}debian.sources" ]; then
		main=$(awk 'BEGIN{RS="";ORS="\n\n"} NR==1' "${SP}debian.sources")
	fi
	[ -n "$main" ] || {
		# One-line sources: the first non-security deb line's mirror.
		m=$(grep -hs '^deb ' /etc/apt/sources.list "${SP}"*.list | grep -v security |
			sed -e 's/\[[^]]*\]//' | awk '{print $2; exit}')
		[ -n "$m" ] || die "cannot find a Debian mirror in apt's sources"
		main="Types: deb
URIs: $m
Suites: $codename
Components: main"
	}
	SRC_LIST="${SP}aksandbox-k8s-src.sources"
	trap drop_deb_src EXIT
	printf '%s\n' "$main" | sed -e 's/^Types: .*/Types: deb-src/' -e "s/^Suites: .*/Suites: $codename/" >"$SRC_LIST"
	$APT update >&2 || die "apt-get update (with deb-src) failed"
	mkdir -p "$1"
	chown _apt "$1" 2>/dev/null || true # apt downloads as _apt
	rm -f "$1"/kubernetes_*
	(cd "$1" && $APT source --download-only kubernetes >&2) || die "apt-get source kubernetes failed"
	drop_deb_src
	trap - EXIT
	SRC_LIST=
}

cmd_build() {
	need_root build
	if build_current; then
		say "binaries in $BIN are current (stamp matches); not rebuilding"
		return 0
	fi
	for p in go gcc make rsync; do command -v $p >/dev/null || die "$p is missing: run $0 install"; done
	t0=$(now)
	work=$CACHE/build
	rm -rf "$work"
	mkdir -p "$work/src" "$work/home" "$work/gopath/src/k8s.io" "$BIN"
	say "fetching Debian's kubernetes source package"
	fetch_source "$work/src"
	orig=$(ls "$work/src"/kubernetes_*really${K8S_VERSION}.orig.tar.gz 2>/dev/null | head -1)
	[ -n "$orig" ] || die "the source package is not Kubernetes $K8S_VERSION: $(ls "$work/src")"
	tar -C "$work/src" -xzf "$orig" || die "cannot extract $orig"
	tree=$work/src/kubernetes-$K8S_VERSION
	[ -d "$tree/cmd/kubelet" ] || die "$orig has no kubernetes-$K8S_VERSION/cmd/kubelet"
	(cd "$tree" && sed -i "$PATCH1" "$PATCH1_FILE" && sed -i "$PATCH2" "$PATCH2_FILE")
	grep -q '^	defaultSandboxOOMAdj int = 0$' "$tree/$PATCH1_FILE" || die "patching $PATCH1_FILE failed"
	grep -q '^	guaranteedOOMScoreAdj int = 0$' "$tree/$PATCH2_FILE" || die "patching $PATCH2_FILE failed"
	(cd "$tree" && patch -p1 -s --batch) <"$REFLECT2_PATCH" || die "applying $REFLECT2_PATCH failed"
	ln -sfn "$tree" "$work/gopath/src/k8s.io/kubernetes"

	say "make generated_files (about a minute)"
	(
		export HOME="$work/home" GOCACHE="$work/gocache" GOPROXY=off GOFLAGS=''
		cd "$tree" && nice make generated_files
	) >"$work/generate.log" 2>&1 || { tail -30 "$work/generate.log" >&2; die "make generated_files failed (log above)"; }

	say "go build $COMPONENTS (5-10 minutes on 2 cores)"
	V=k8s.io/kubernetes/vendor/k8s.io
	LDF="-s -w"
	for p in $V/component-base/version $V/client-go/pkg/version; do
		LDF="$LDF -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=20 -X $p.gitTreeState=clean"
	done
	(
		export HOME="$work/home" GOCACHE="$work/gocache" GOPROXY=off GOFLAGS='' \
			GO111MODULE=off GOPATH="$work/gopath" CGO_ENABLED=0
		cd "$work/gopath/src/k8s.io/kubernetes"
		rm -f "$BIN/stamp"
		pkgs=
		for c in $COMPONENTS; do pkgs="$pkgs ./cmd/$c"; done
		nice go build -tags "$BUILD_TAGS" -ldflags "$LDF" -o "$BIN/" $pkgs
	) >"$work/build.log" 2>&1 || { tail -30 "$work/build.log" >&2; die "go build failed (log above)"; }
	gcc -Os -static -DVERSION=v3.2-local -o "$BIN/pause" "$tree/build/pause/linux/pause.c" ||
		die "cannot build the pause binary"
	strip "$BIN/pause"
	for c in $COMPONENTS; do
		case $c in kubectl) v=$("$BIN/$c" version --client --short 2>&1) ;; *) v=$("$BIN/$c" --version 2>&1) ;; esac
		case $v in *"v$K8S_VERSION"*) ;; *) die "$BIN/$c does not report v$K8S_VERSION: $v" ;; esac
	done
	printf '%s\n' "$STAMP" >"$BIN/stamp"
	# Source tree and Go build cache (about 2.5 GB) are not needed any more.
	rm -rf "$work"
	say "built $COMPONENTS in $(($(now) - t0)) s"
}

# ---- PKI and kubeconfigs -----------------------------------------------------

gen_key() { openssl genrsa -out "$1" 2048 2>/dev/null; chmod 600 "$1"; }

# sign NAME SUBJECT EXTFILE-CONTENT
sign() {
	gen_key "$PKI/$1.key"
	openssl req -new -key "$PKI/$1.key" -subj "$2" -out "$PKI/$1.csr" 2>/dev/null
	printf '%s\n' "$3" >"$PKI/$1.ext"
	openssl x509 -req -in "$PKI/$1.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
		-days 3650 -sha256 -extfile "$PKI/$1.ext" -out "$PKI/$1.crt" 2>/dev/null
	rm -f "$PKI/$1.csr" "$PKI/$1.ext"
}

token() { openssl rand -hex 16; }

# kubeconfig FILE USER (cert auth: pki/USER.{crt,key}) | kubeconfig FILE USER token TOKEN
kubeconfig() {
	f=$1
	rm -f "$f"
	"$KUBECTL" config --kubeconfig="$f" set-cluster aks-test --server="$SERVER" \
		--certificate-authority="$PKI/ca.crt" --embed-certs=true >/dev/null
	if [ "${3:-}" = token ]; then
		"$KUBECTL" config --kubeconfig="$f" set-credentials "$2" --token="$4" >/dev/null
	else
		"$KUBECTL" config --kubeconfig="$f" set-credentials "$2" --client-certificate="$PKI/$2.crt" \
			--client-key="$PKI/$2.key" --embed-certs=true >/dev/null
	fi
	"$KUBECTL" config --kubeconfig="$f" set-context aks-test --cluster=aks-test --user="$2" >/dev/null
	"$KUBECTL" config --kubeconfig="$f" use-context aks-test >/dev/null
	chmod 600 "$f"
}

tok() { awk -F, -v u="$1" '$2 == u {print $1}' "$PKI/tokens.csv"; }

sign_apiserver() {
	sign apiserver "/CN=kube-apiserver" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.0.0.1,IP:$POD_API_HOST"
}

make_pki() {
	if [ -f "$PKI/complete" ] && [ -f "$CONF/complete" ]; then
		# A cache from before the pods' address was in the serving certificate: sign it
		# again (an apiserver running with the old one is restarted by cmd_start).
		openssl x509 -in "$PKI/apiserver.crt" -noout -ext subjectAltName 2>/dev/null |
			grep -q "IP Address:$POD_API_HOST\(,\|\$\)" && return 0
		say "signing the apiserver's certificate again, for $POD_API_HOST too"
		sign_apiserver
		stop_one kube-apiserver
		return 0
	fi
	say "making the PKI, tokens and kubeconfigs in $CACHE"
	rm -rf "$PKI" "$CONF"
	mkdir -p "$PKI" "$CONF"
	chmod 700 "$PKI" "$CONF"
	gen_key "$PKI/ca.key"
	openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=aksandbox-test-ca" -days 3650 -sha256 \
		-out "$PKI/ca.crt" 2>/dev/null
	sign_apiserver
	client="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
	sign admin "/O=system:masters/CN=admin" "$client"
	sign apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client"
	sign kubelet "/O=system:nodes/CN=system:node:$NODE" "$client"
	# The kubelet's own serving certificate (the apiserver does not check it
	# in 1.20 without --kubelet-certificate-authority, but a fixed one avoids
	# a self-signed one in the state dir).
	sign kubelet-serving "/CN=$NODE" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1"
	gen_key "$PKI/sa.key"
	openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
	{
		echo "$(token),admin,1000,system:masters"
		echo "$(token),developer,1001"
		echo "$(token),alice,1002"
		echo "$(token),bob,1003"
	} >"$PKI/tokens.csv"
	chmod 600 "$PKI/tokens.csv"
	rm -f "$PKI/ca.srl"
	touch "$PKI/complete"
	kubeconfig "$CONF/admin.kubeconfig" admin
	kubeconfig "$CONF/kubelet.kubeconfig" kubelet
	kubeconfig "$CONF/admin-token.kubeconfig" admin token "$(tok admin)"
	kubeconfig "$CONF/developer.kubeconfig" developer token "$(tok developer)"
	kubeconfig "$CONF/alice.kubeconfig" alice token "$(tok alice)"
	kubeconfig "$CONF/bob.kubeconfig" bob token "$(tok bob)"
	touch "$CONF/complete"
}

# ---- images ------------------------------------------------------------------

make_images() {
	if ! docker image inspect "$PAUSE_IMAGE" >/dev/null 2>&1; then
		d=$(mktemp -d)
		cp "$BIN/pause" "$d/pause"
		tar -C "$d" -c . | docker import --change 'ENTRYPOINT ["/pause"]' - "$PAUSE_IMAGE" >/dev/null ||
			die "docker import $PAUSE_IMAGE failed"
		rm -rf "$d"
	fi
	if ! docker image inspect "$BUSYBOX_IMAGE" >/dev/null 2>&1; then
		bb=$(command -v busybox) || die "busybox is missing: run $0 install"
		d=$(mktemp -d)
		mkdir -p "$d/bin" "$d/etc" "$d/tmp" "$d/root" "$d/proc" "$d/sys" "$d/dev"
		cp "$bb" "$d/bin/busybox"
		for a in $("$d/bin/busybox" --list); do
			[ "$a" = busybox ] || ln -sf busybox "$d/bin/$a"
		done
		chmod 1777 "$d/tmp"
		echo 'root:x:0:0:root:/root:/bin/sh' >"$d/etc/passwd"
		echo 'root:x:0:' >"$d/etc/group"
		tar -C "$d" -c . | docker import --change 'CMD ["/bin/sh"]' --change 'ENV PATH=/bin' - \
			"$BUSYBOX_IMAGE" >/dev/null || die "docker import $BUSYBOX_IMAGE failed"
		rm -rf "$d"
	fi
}

# ---- processes ---------------------------------------------------------------

# running NAME: its pid file names a live process running our binary.
running() {
	[ -f "$LOGS/$1.pid" ] || return 1
	pid=$(cat "$LOGS/$1.pid")
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
	argv0=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -1)
	[ "${argv0##*/}" = "$1" ]
}

# launch NAME COMMAND... : detached (setsid: it must outlive this script and
# the test run's process group), pid recorded.
launch() {
	name=$1
	shift
	say "starting $name (log: $LOGS/$name.log)"
	setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
	echo $! >"$LOGS/$name.pid"
}

# wait_for NAME SECONDS COMMAND... : until COMMAND succeeds; fails early when
# NAME's process died.
wait_for() {
	name=$1 limit=$2
	shift 2
	i=0
	until "$@" >/dev/null 2>&1; do
		running "$name" || { tail -25 "$LOGS/$name.log" >&2; die "$name exited (log above)"; }
		i=$((i + 1))
		[ $i -le $((limit * 2)) ] || { tail -25 "$LOGS/$name.log" >&2; die "$name not ready within $limit s (log above)"; }
		sleep 0.5
	done
}

kc() { "$KUBECTL" --kubeconfig="$CONF/admin.kubeconfig" "$@"; }

etcd_healthy() { curl -fsS "http://127.0.0.1:$ETCD_PORT/health" | grep -q '"health":"true"'; }
api_ready() { kc get --raw /readyz 2>/dev/null | grep -qx ok; }
node_ready() {
	[ "$(kc get node "$NODE" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}
pod_api_ready() {
	curl -s -o /dev/null --max-time 5 --cacert "$PKI/ca.crt" "https://$POD_API_HOST:$POD_API_PORT/readyz"
}
default_sa() { kc -n default get serviceaccount default >/dev/null 2>&1; }

save_sysctls() {
	[ -f "$STATE/sysctl.saved" ] && return 0
	for s in $SYSCTLS; do
		v=$(sysctl -n "$s" 2>/dev/null) && echo "$s=$v"
	done >"$STATE/sysctl.saved"
}

# Kubelet's values (pkg/kubelet/cm/container_manager_linux.go).
kubelet_tuned() {
	[ "$(sysctl -n vm.overcommit_memory)" = 1 ] && [ "$(sysctl -n kernel.panic)" = 10 ] &&
		[ "$(sysctl -n kernel.panic_on_oops)" = 1 ]
}

# restore_sysctls [all]: without "all", leaves ip_forward (pods on the bridge
# may need it while the cluster runs).
restore_sysctls() {
	[ -f "$STATE/sysctl.saved" ] || return 0
	while IFS='=' read -r k v; do
		[ "${1:-}" = all ] || [ "$k" != net.ipv4.ip_forward ] || continue
		[ "$(sysctl -n "$k" 2>/dev/null)" = "$v" ] && continue
		sysctl -q -w "$k=$v" || say "warning: cannot restore $k=$v"
	done <"$STATE/sysctl.saved"
}

write_configs() {
	cni_bin=$(dirname "$(dpkg -L containernetworking-plugins | grep '/bridge$' | head -1)")
	[ -x "$cni_bin/bridge" ] && [ -x "$cni_bin/host-local" ] ||
		die "the CNI bridge/host-local plugins are missing: run $0 install"
	echo "$cni_bin" >"$STATE/cni-bin-dir"
	mkdir -p "$STATE/cni/net.d" "$STATE/cni/cache" "$STATE/cni/ipam"
	cat >"$STATE/cni/net.d/10-aksandbox.conflist" <<EOF
{"cniVersion":"0.4.0","name":"aksandbox-k8s","plugins":[{"type":"bridge","bridge":"$BRIDGE","isGateway":true,"isDefaultGateway":false,"ipMasq":false,"hairpinMode":false,"ipam":{"type":"host-local","dataDir":"$STATE/cni/ipam","ranges":[[{"subnet":"$POD_CIDR"}]]}}]}
EOF
	cat >"$STATE/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
tlsCertFile: $PKI/kubelet-serving.crt
tlsPrivateKeyFile: $PKI/kubelet-serving.key
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: $PKI/ca.crt
authorization:
  mode: AlwaysAllow
cgroupDriver: cgroupfs
failSwapOn: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# No eviction: a CI machine's disk can run low (it has been seen with 287 MB free) and a
# build's page cache counts as used memory, and a pressure condition on this single node
# evicts the tests' pods and taints the node against new ones: rollouts then hang and
# pods come back at other addresses. "0%" turns a signal off; the kernel's OOM killer stays.
evictionHard:
  memory.available: "0%"
  nodefs.available: "0%"
  imagefs.available: "0%"
EOF
}

start_components() {
	mkdir -p "$LOGS" "$STATE/kubelet" "$STATE/dockershim"
	write_configs
	if ! running etcd; then
		launch etcd etcd --name default --data-dir "$STATE/etcd-data" \
			--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
			--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
			--initial-cluster "default=http://127.0.0.1:$ETCD_PEER_PORT"
	fi
	wait_for etcd 30 etcd_healthy
	if ! running kube-apiserver; then
		launch kube-apiserver "$BIN/kube-apiserver" --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
			--bind-address=127.0.0.1 --secure-port=$API_PORT --insecure-port=0 \
			--advertise-address=127.0.0.1 --endpoint-reconciler-type=none \
			--tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
			--client-ca-file="$PKI/ca.crt" --token-auth-file="$PKI/tokens.csv" \
			--authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
			--allow-privileged=true --service-cluster-ip-range=10.0.0.0/24 \
			--service-account-issuer=https://kubernetes.default.svc.cluster.local \
			--service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
			--kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
			--kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
			--kubelet-preferred-address-types=Hostname
	fi
	wait_for kube-apiserver 90 api_ready
	# The bridge with its host side, made before the first pod (the CNI bridge plugin takes
	# it as it is), so that the forwarder for the pods can listen there.
	if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
		ip link add "$BRIDGE" type bridge && ip addr add "$POD_API_HOST/${POD_CIDR#*/}" dev "$BRIDGE" &&
			ip link set "$BRIDGE" up || die "cannot make the bridge $BRIDGE"
	fi
	if ! running socat; then
		launch socat socat "TCP-LISTEN:$POD_API_PORT,bind=$POD_API_HOST,reuseaddr,fork" \
			"TCP:127.0.0.1:$API_PORT"
	fi
	wait_for socat 10 pod_api_ready
	if ! running kube-controller-manager; then
		launch kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig="$CONF/admin.kubeconfig" \
			--authentication-kubeconfig="$CONF/admin.kubeconfig" --authorization-kubeconfig="$CONF/admin.kubeconfig" \
			--bind-address=127.0.0.1 --secure-port=$CM_PORT --port=0 --leader-elect=false \
			--service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
			--cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
			--use-service-account-credentials=true
	fi
	if ! running kube-scheduler; then
		launch kube-scheduler "$BIN/kube-scheduler" --kubeconfig="$CONF/admin.kubeconfig" \
			--authentication-kubeconfig="$CONF/admin.kubeconfig" --authorization-kubeconfig="$CONF/admin.kubeconfig" \
			--bind-address=127.0.0.1 --secure-port=$SCHED_PORT --port=0 --leader-elect=false
	fi
	kubelet_started=0
	if ! running kubelet; then
		save_sysctls
		kubelet_started=1
		launch kubelet "$BIN/kubelet" --kubeconfig="$CONF/kubelet.kubeconfig" \
			--config="$STATE/kubelet-config.yaml" --hostname-override=$NODE \
			--root-dir="$STATE/kubelet" --cert-dir="$STATE/kubelet/pki" \
			--experimental-dockershim-root-directory="$STATE/dockershim" \
			--container-runtime=docker --pod-infra-container-image=$PAUSE_IMAGE \
			--container-runtime-endpoint="unix://$STATE/dockershim.sock" \
			--network-plugin=cni --cni-bin-dir="$(cat "$STATE/cni-bin-dir")" \
			--cni-conf-dir="$STATE/cni/net.d" --cni-cache-dir="$STATE/cni/cache" --v=2
	fi
	wait_for kube-controller-manager 60 default_sa
	wait_for kubelet 120 node_ready
	if [ $kubelet_started = 1 ]; then
		# Kubelet sets its sysctls once, early; put the machine's back after.
		i=0
		until kubelet_tuned || [ $i -ge 60 ]; do sleep 0.5; i=$((i + 1)); done
		restore_sysctls
	fi
}

apply_rbac() {
	kc apply -f "$MANIFESTS/rbac.yaml" >/dev/null || die "kubectl apply -f $MANIFESTS/rbac.yaml failed"
	wait_for kube-controller-manager 60 kc -n aks-test get serviceaccount default
}

# A pod with a busybox and a python container: scheduled, started, exec'd in
# both, deleted.
verify_pod() {
	pod=aks-setup-probe
	kc -n default delete pod $pod --grace-period=0 --force --ignore-not-found >/dev/null 2>&1 || true
	sed "s|@BUSYBOX@|$BUSYBOX_IMAGE|; s|@PYTHON@|$PY_IMAGE|; s|@NAME@|$pod|" "$MANIFESTS/probe-pod.yaml" |
		kc -n default apply -f - >/dev/null || die "cannot create the probe pod"
	if ! kc -n default wait --for=condition=Ready pod/$pod --timeout=120s >/dev/null 2>&1; then
		kc -n default describe pod $pod >&2 || true
		die "the probe pod did not become Ready (above)"
	fi
	out=$(kc -n default exec $pod -c busybox -- sh -c 'echo busybox-ok') || die "kubectl exec into busybox failed"
	[ "$out" = busybox-ok ] || die "kubectl exec into busybox printed '$out'"
	out=$(kc -n default exec $pod -c python -- python3 -c 'print(1)') || die "kubectl exec python3 failed"
	[ "$out" = 1 ] || die "python3 in $PY_IMAGE printed '$out'"
	kc -n default delete pod $pod --grace-period=1 --timeout=90s >/dev/null || die "cannot delete the probe pod"
	! kc -n default get pod $pod >/dev/null 2>&1 || die "the probe pod is still there after its deletion"
}

cmd_start() {
	need_root start
	t0=$(now)
	[ -z "$(packages_missing)" ] || cmd_install
	build_current || cmd_build
	"$HERE/docker-setup.sh" start >&2 || die "docker-setup.sh start failed: the kubelet needs the Docker Engine"
	docker image inspect "$PY_IMAGE" >/dev/null 2>&1 || die "$PY_IMAGE is missing (docker-setup.sh builds it)"
	make_pki
	make_images
	start_components
	apply_rbac
	verify_pod
	say "cluster up and verified in $(($(now) - t0)) s"
}

# ---- stop --------------------------------------------------------------------

stop_one() {
	running "$1" || { rm -f "$LOGS/$1.pid"; return 0; }
	pid=$(cat "$LOGS/$1.pid")
	say "stopping $1 (pid $pid)"
	kill "$pid" 2>/dev/null || true
	i=0
	while kill -0 "$pid" 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 100 ] || { kill -9 "$pid" 2>/dev/null || true; }
		[ $i -lt 150 ] || die "$1 (pid $pid) does not die"
		sleep 0.2
	done
	rm -f "$LOGS/$1.pid"
}

cmd_stop() {
	need_root stop
	for c in kubelet kube-scheduler kube-controller-manager socat kube-apiserver etcd; do stop_one $c; done
	# The pod containers kubelet's dockershim made (they carry its labels).
	if docker version >/dev/null 2>&1; then
		ids=$(docker ps -aq --filter label=io.kubernetes.docker.type)
		[ -z "$ids" ] || docker rm -f $ids >/dev/null || say "warning: cannot remove pod containers $ids"
	fi
	# Volume mounts (service-account tokens) under the kubelet's root dir, and
	# the root dir's bind mount on itself: deepest first.
	if [ -d "$STATE/kubelet" ]; then
		awk -v d="$STATE/kubelet" '$2 == d || index($2, d "/") == 1 {print length($2), $2}' /proc/mounts |
			sort -rn | cut -d' ' -f2- | while read -r m; do
			umount "$m" 2>/dev/null || umount -l "$m" || say "warning: cannot unmount $m"
		done
	fi
	if ip link show "$BRIDGE" >/dev/null 2>&1; then ip link del "$BRIDGE" || say "warning: cannot delete $BRIDGE"; fi
	rm -rf "$STATE/cni" "$STATE/dockershim" "$STATE/dockershim.sock"
	restore_sysctls all
	rm -f "$STATE/sysctl.saved"
}

# ---- status and env ----------------------------------------------------------

cmd_status() {
	[ -f "$CONF/admin.kubeconfig" ] && [ -x "$KUBECTL" ] || { say "not set up (no $CONF/admin.kubeconfig)"; return 1; }
	api_ready || { say "the apiserver at $SERVER does not answer"; return 1; }
	node_ready || { say "node $NODE is not Ready"; return 1; }
}

cmd_env() {
	[ -f "$PKI/tokens.csv" ] || die "no PKI yet: run $0 start"
	cat <<EOF
AKS_K8S_KUBECTL=$KUBECTL
AKS_K8S_KUBECONFIG=$CONF/admin.kubeconfig
AKS_K8S_SERVER=$SERVER
AKS_K8S_CA=$PKI/ca.crt
AKS_K8S_ADMIN_TOKEN=$(tok admin)
AKS_K8S_DEV_TOKEN=$(tok developer)
AKS_K8S_DEV_KUBECONFIG=$CONF/developer.kubeconfig
AKS_K8S_ALICE_TOKEN=$(tok alice)
AKS_K8S_ALICE_KUBECONFIG=$CONF/alice.kubeconfig
AKS_K8S_BOB_TOKEN=$(tok bob)
AKS_K8S_BOB_KUBECONFIG=$CONF/bob.kubeconfig
AKS_K8S_NAMESPACE=aks-test
AKS_K8S_NODE=$NODE
AKS_K8S_POD_API_HOST=$POD_API_HOST
AKS_K8S_POD_API_PORT=$POD_API_PORT
AKS_K8S_IMAGE=$BUSYBOX_IMAGE
AKS_K8S_PY_IMAGE=$PY_IMAGE
EOF
}

case ${1:-} in
install) cmd_install ;;
build) cmd_build ;;
start)
	cmd_start >&2
	echo "$CONF/admin.kubeconfig"
	;;
stop) cmd_stop ;;
status) cmd_status ;;
env) cmd_env ;;
*) die "usage: $0 install|build|start|stop|status|env" ;;
esac
