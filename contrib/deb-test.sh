#!/bin/sh
# CI for the Debian packages (contrib/debian/, docs/packaging.md): they build
# from the release tarball (`make deb`), pass lintian, each plugin package
# depends only on the libraries its .so links, and what they install works:
# the core, the CLI and only the local_subprocess plugin run a sandbox; a
# docker profile then fails naming the package aksandbox-plugin-docker; once
# that package is installed the same profile loads; libaksandbox-dev ships the
# plugin author guide, the ABI policy and the example plugin, which builds and
# passes the contract runner from the installed packages. Everything this script
# installed (the packages and any dependency apt pulled in) is purged at the
# end, so the machine is left as it was found. The worker's systemd units ship
# in aksandbox: systemd-analyze verify accepts them, installing creates their
# system user and neither enables nor starts them.
#
# usage: contrib/deb-test.sh [BUILDDIR]
#   BUILDDIR (default: _build in the source tree) is configured if it is not
#   yet; the packages are built in BUILDDIR/_deb.
# Run as root on Debian 12 with the build dependencies installed
# (contrib/install-deps.sh). Prints TAP, one line per check.
set -u
export LC_ALL=C
top=$(cd "$(dirname "$0")/.." && pwd)
builddir=${1:-$top/_build}
started=$(date +%s)
n=0
failed=0

ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); failed=1; echo "not ok $n - $*"; }
# t DESCRIPTION COMMAND...: one check; the command's output is shown on failure.
t() {
	# A name of its own: the checks it runs are shell functions sharing its variables.
	t_description=$1; shift
	if "$@" >"$tmp/t.out" 2>&1; then ok "$t_description"; else not_ok "$t_description"; sed 's/^/# /' "$tmp/t.out" | tail -30; fi
}
comment() { sed 's/^/# /'; }
finish() {
	echo "1..$n"
	echo "# deb-test took $(($(date +%s) - started)) s"
	exit $failed
}
bail() { echo "Bail out! $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || bail "contrib/deb-test.sh installs packages: run it as root"
command -v dpkg-buildpackage >/dev/null && command -v lintian >/dev/null && command -v dh >/dev/null ||
	bail "dpkg-dev, debhelper and lintian are needed: run contrib/install-deps.sh"
ours() { # the aksandbox packages dpkg knows in any state but not-installed
	dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' 'aksandbox*' 'libaksandbox*' 2>/dev/null |
		awk '$1 != "un" {print $2}'
}
[ -z "$(ours)" ] && [ ! -e /usr/bin/aksandbox ] ||
	bail "aksandbox packages or /usr/bin/aksandbox already present ($(ours | tr '\n' ' ')): purge them first"

tmp=$(mktemp -d /tmp/aks-deb-test.XXXXXX)
# The worker's system user: created by the package (sysusers.d) and, as Debian
# does for system users, left by the purge; removed here if this run made it.
user_before=$(getent passwd aksandbox)
[ -e /var/lib/aksandbox ] && bail "/var/lib/aksandbox already exists: remove it first"
installed() { dpkg-query -W -f='${db:Status-Abbrev} ${binary:Package}\n' | awk '$1 ~ /^.i/ {print $2}' | sort; }
installed >"$tmp/before"
# Whatever happens, leave the machine with exactly the packages it had.
purge_new() {
	installed >"$tmp/after"
	new=$(comm -13 "$tmp/before" "$tmp/after")
	[ -z "$new" ] || DEBIAN_FRONTEND=noninteractive dpkg --purge $new >"$tmp/purge.log" 2>&1
}
forget_user() {
	[ -n "$user_before" ] || ! getent passwd aksandbox >/dev/null || userdel aksandbox >/dev/null 2>&1
	[ -n "$user_before" ] || ! getent group aksandbox >/dev/null || groupdel aksandbox >/dev/null 2>&1
}
cleanup() { purge_new; forget_user; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
plugindir=/usr/lib/$ma/aksandbox/plugins-1
debdir=$builddir/_deb

# ---- build ----------------------------------------------------------------
# AKS_DEB_BUILT=1: BUILDDIR/_deb holds what `make deb` built there already (tests/run-all.sh
# builds it in the background, for the in-cluster test too); they are checked as built here.
mkdir -p "$builddir"
version=$(sed -n 's/^PACKAGE_VERSION = //p' "$builddir/Makefile" 2>/dev/null)
if [ "${AKS_DEB_BUILT:-}" = 1 ]; then
	if [ -n "$version" ] && ls "$debdir"/aksandbox_"$version"-*.changes >/dev/null 2>&1; then
		ok "make deb built the packages of $version from the release tarball (before this script)"
	else
		not_ok "make deb built the packages from the release tarball (AKS_DEB_BUILT=1, but $debdir has no aksandbox_${version:-?}-*.changes)"
		finish
	fi
elif (cd "$builddir" &&
    { [ -f Makefile ] || env -u AKS_PLUGIN_PATH "$top/configure" --quiet; } &&
    env -u AKS_PLUGIN_PATH -u AKS_PLUGIN_SYSTEM_DIR make deb) >"$tmp/build.log" 2>&1; then
	ok "make deb builds the packages from the release tarball ($(($(date +%s) - started)) s)"
else
	not_ok "make deb builds the packages from the release tarball"
	tail -40 "$tmp/build.log" | comment
	finish
fi
deb() { ls "$debdir/$1"_*.deb 2>/dev/null | grep -v -- -dbgsym_ | head -1; }

# The packages: the core's three, the agent's and one per plugin directory in the tree.
plugins=$(cd "$top/plugins" && for d in */; do d=${d%/}; [ -f "$d/Makefile.inc.am" ] && [ "$d" != common ] && echo "$d"; done)
pkg_of() { echo "aksandbox-plugin-$1" | tr _ -; }
expected="libaksandbox1 aksandbox libaksandbox-dev aksandbox-agent"
for p in $plugins; do expected="$expected $(pkg_of "$p")"; done
missing=""
for p in $expected; do [ -n "$(deb "$p")" ] || missing="$missing $p"; done
built=$(cd "$debdir" && ls *.deb | grep -v -- -dbgsym_ | sed 's/_.*//' | sort)
extra=$(echo "$built" | grep -vxF "$(echo "$expected" | tr ' ' '\n')")
if [ -z "$missing" ] && [ -z "$extra" ]; then
	ok "one package per plugin in the tree, plus the core's three and the agent's: $(echo $built)"
else
	not_ok "one package per plugin in the tree, plus the core's three and the agent's (missing:${missing:- none}; unexpected: ${extra:-none})"
fi

# ---- lintian ------------------------------------------------------------------
changes=$(ls "$debdir"/*.changes | head -1)
# Its own TMPDIR: lintian leaves mldbm-elf-by-member-* files in it on every run.
TMPDIR="$tmp" lintian --fail-on error --pedantic -I "$changes" >"$tmp/lintian.out" 2>&1
lrc=$?
if [ $lrc -eq 0 ] && ! grep -q '^E: ' "$tmp/lintian.out"; then
	ok "lintian reports no errors on the source and binary packages"
else
	not_ok "lintian reports no errors on the source and binary packages"
fi
grep -E '^[EWIP]: ' "$tmp/lintian.out" | comment

# ---- the library: SONAME and symbols --------------------------------------------
mkdir -p "$tmp/lib" "$tmp/libctl"
dpkg-deb -x "$(deb libaksandbox1)" "$tmp/lib"
dpkg-deb -e "$(deb libaksandbox1)" "$tmp/libctl"
t "libaksandbox1 ships libaksandbox.so.1 with that SONAME" \
	sh -c "objdump -p '$tmp/lib/usr/lib/$ma/libaksandbox.so.1' | grep -q 'SONAME *libaksandbox.so.1\$'"
sort "$top/tests/unit/exports.expected" >"$tmp/exports.expected"
upstream=$(dpkg-deb -f "$(deb libaksandbox1)" Version | sed 's/^[0-9]*://; s/-[^-]*$//')
symbols_ok() {
	names=$(awk '/^ / {sub(/@Base$/, "", $1); print $1}' "$tmp/libctl/symbols" | sort)
	printf '%s\n' "$names" | diff "$tmp/exports.expected" - || return 1
	# every symbol's minimal version is a released upstream version, not newer
	awk '/^ / {print $2}' "$tmp/libctl/symbols" | sort -u | while read -r v; do
		dpkg --compare-versions "$v" le "$upstream" || { echo "symbol version $v > $upstream"; exit 1; }
	done
}
t "libaksandbox1's symbols file lists exactly tests/unit/exports.expected, versions <= $upstream" symbols_ok
exported_ok() {
	nm -D --defined-only "$tmp/lib/usr/lib/$ma/libaksandbox.so.1" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' |
		sort | diff "$tmp/exports.expected" -
}
t "the packaged library exports exactly tests/unit/exports.expected" exported_ok
# Maintainer scripts: only aksandbox has any, and they are debhelper's own
# snippets (sysusers, systemd) and nothing else.
scripts_ok() {
	for f in "$debdir"/*.deb; do
		p=$(dpkg-deb -f "$f" Package)
		mkdir -p "$tmp/ctl-$p"
		dpkg-deb -e "$f" "$tmp/ctl-$p"
		for sc in preinst postinst prerm postrm config; do
			[ -f "$tmp/ctl-$p/$sc" ] || continue
			[ "$p" = aksandbox ] || { echo "$p has a $sc"; continue; }
			# what is left outside debhelper's "Automatically added" blocks
			awk '/^# Automatically added by dh_/ {in_dh = 1} !in_dh {print} /^# End automatically added section/ {in_dh = 0}' \
				"$tmp/ctl-$p/$sc" | grep -vxE '#!/bin/sh|set -e|[[:space:]]*' | sed "s|^|$p $sc: |"
		done
	done | { ! grep .; } || return 1
	grep -q '^ *systemd-sysusers .*aksandbox\.conf' "$tmp/ctl-aksandbox/postinst"
}
t "only aksandbox has maintainer scripts, all of them debhelper's (sysusers, systemd)" scripts_ok

# ---- the worker's systemd units and user, in the aksandbox package -------------------
mkdir -p "$tmp/cli"
dpkg-deb -x "$(deb aksandbox)" "$tmp/cli"
unitdir=/lib/systemd/system
units_shipped() {
	u=$tmp/cli$unitdir/aksandbox-worker.service
	ut=$tmp/cli$unitdir/aksandbox-worker@.service
	ls -l "$u" "$ut" || return 1
	grep -qxF 'ExecStart=/usr/bin/aksandbox worker -c /etc/aksandbox/config.yaml --grace 30' "$u" &&
		grep -qxF 'ExecStart=/usr/bin/aksandbox worker -c ${AKSANDBOX_CONFIG} --grace 30' "$ut" &&
		for f in "$u" "$ut"; do
			for l in User=aksandbox StateDirectory=aksandbox KillSignal=SIGTERM Restart=on-failure \
				NoNewPrivileges=yes ProtectSystem=strict WantedBy=multi-user.target; do
				grep -qxF "$l" "$f" || { echo "$f: no $l"; return 1; }
			done
			# the stop timeout outlasts the worker's --grace
			g=$(sed -n 's/^ExecStart=.* --grace \([0-9]*\)$/\1/p' "$f")
			to=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)$/\1/p' "$f")
			[ -n "$g" ] && [ -n "$to" ] && [ "$to" -gt "$g" ] || { echo "$f: grace $g, TimeoutStopSec $to"; return 1; }
		done
}
t "aksandbox ships aksandbox-worker.service and aksandbox-worker@.service in $unitdir (ExecStart /usr/bin/aksandbox, TimeoutStopSec > --grace)" \
	units_shipped
sysusers_shipped() {
	f=$tmp/cli/usr/lib/sysusers.d/aksandbox.conf
	cat "$f" || return 1
	grep -Eq '^u[[:space:]]+aksandbox[[:space:]]+-[[:space:]]' "$f" &&
		dpkg-deb -f "$(deb aksandbox)" Depends | grep -q 'systemd | systemd-standalone-sysusers'
}
t "aksandbox ships /usr/lib/sysusers.d/aksandbox.conf (the system user aksandbox) and depends on systemd-sysusers" \
	sysusers_shipped
identity_example_shipped() {
	ex=$tmp/cli/usr/share/doc/aksandbox/examples/identity
	ls -l "$ex" || return 1
	for f in README.md config.yaml frontend.py; do
		[ -s "$ex/$f" ] || { echo "no $ex/$f (uncompressed)"; return 1; }
	done
}
t "aksandbox ships the identity example (README.md, config.yaml, frontend.py) in /usr/share/doc/aksandbox/examples/identity" \
	identity_example_shipped

# ---- each plugin package depends only on what its .so links ------------------
# The libraries each plugin is documented to link (docs/plugins/NAME.md), as
# Debian package name prefixes; libc6 for all.
own_libs() {
	case $1 in
	local_subprocess) echo "libc6" ;;
	signed_token) echo "libc6 libssl libjson-c" ;;
	docker) echo "libc6 libcurl libarchive libjson-c" ;;
	redis) echo "libc6 libhiredis" ;;
	nats) echo "libc6 libnats" ;;
	kubernetes) echo "libc6 libcurl libwebsockets libssl libarchive libjson-c libyaml" ;;
	bubblewrap) echo "libc6 libseccomp" ;;
	e2b) echo "libc6 libcurl libjson-c" ;;
	daytona) echo "libc6 libcurl libjson-c" ;;
	ec2_ssm) echo "libc6 libcurl libjson-c libxml2" ;;
	sqs) echo "libc6 libcurl libjson-c libxml2" ;;
	dynamodb) echo "libc6 libcurl libjson-c libxml2" ;;
	*) echo "UNKNOWN" ;;
	esac
}
# The programs a plugin runs (not links), which its package depends on too.
run_deps() {
	case $1 in
	bubblewrap) echo "bubblewrap" ;;
	esac
}
lib_package() { # the package of an installed shared library of this architecture
	dpkg -S "*/$1" 2>/dev/null |
		awk -F': ' -v p="^(/usr)?/lib/$ma/$1\$" '$2 ~ p {print $1}' | sed 's/:.*//' | sort -u
}
for p in $plugins; do
	pkg=$(pkg_of "$p")
	f=$(deb "$pkg")
	[ -n "$f" ] || { not_ok "$pkg: built"; continue; }
	depends=$(dpkg-deb -f "$f" Depends | tr ',' '\n' | sed 's/(.*//; s/[[:space:]]//g' | grep . | sort -u)
	echo "# $pkg Depends: $(dpkg-deb -f "$f" Depends)"
	mkdir -p "$tmp/p-$p"
	dpkg-deb -x "$f" "$tmp/p-$p"
	so=$tmp/p-$p$plugindir/$p.so
	if [ ! -f "$so" ]; then
		not_ok "$pkg installs $plugindir/$p.so"
		continue
	fi
	needed=$(objdump -p "$so" | awk '$1 == "NEEDED" {print $2}')
	echo "# $p.so NEEDED: $(echo $needed)"
	from_needed=$( (for l in $needed; do lib_package "$l"; done; for r in $(run_deps "$p"); do echo "$r"; done) | sort -u)
	if [ "$depends" = "$from_needed" ]; then
		ok "$pkg: Depends is exactly the packages of the libraries $p.so links, and the programs it runs ($(echo $depends))"
	else
		not_ok "$pkg: Depends ($(echo $depends)) is exactly the packages of the libraries $p.so links, and the programs it runs ($(echo $from_needed))"
	fi
	allowed="$(own_libs "$p") $(run_deps "$p")"
	bad="" absent=""
	for d in $depends; do
		m=no
		for a in $allowed; do case $d in "$a"*) m=yes ;; esac; done
		[ $m = yes ] || bad="$bad $d"
	done
	for a in $allowed; do echo "$depends" | grep -q "^$a" || absent="$absent $a"; done
	if [ -z "$bad" ] && [ -z "$absent" ]; then
		ok "$pkg: depends on its own libraries only ($allowed)"
	else
		not_ok "$pkg: depends on its own libraries only ($allowed; unexpected:${bad:- none}; missing:${absent:- none})"
	fi
done
t "aksandbox-plugin-redis ships valkey.so beside redis.so (store type valkey, the same code)" \
	test -f "$tmp/p-redis$plugindir/valkey.so"

# ---- the agent: static, on its own, recommended by the providers that place it -----
agent_path=/usr/libexec/aksandbox/aksandbox-agent
agent_static() {
	mkdir -p "$tmp/agent"
	dpkg-deb -x "$(deb aksandbox-agent)" "$tmp/agent" || return 1
	a=$tmp/agent$agent_path
	[ -x "$a" ] || { echo "no $agent_path"; return 1; }
	readelf -lW "$a" | grep -q INTERP && { echo "has a program interpreter"; return 1; }
	readelf -dW "$a" | grep -q NEEDED && { readelf -dW "$a" | grep NEEDED; return 1; }
	deps=$(dpkg-deb -f "$(deb aksandbox-agent)" Depends); echo "Depends: $deps"
	[ -z "$(echo "$deps" | tr ',' '\n' | sed 's/[[:space:]]//g' | grep .)" ] || return 1
	b=$(dpkg-deb -f "$(deb aksandbox-agent)" Built-Using); echo "Built-Using: $b"
	echo "$b" | grep -q '^glibc (= '
}
t "aksandbox-agent ships $agent_path statically linked (no interpreter, no NEEDED, no Depends, Built-Using glibc)" \
	agent_static
recommended() {
	for p in local-subprocess docker kubernetes bubblewrap; do
		r=$(dpkg-deb -f "$(deb aksandbox-plugin-$p)" Recommends); echo "aksandbox-plugin-$p Recommends: $r"
		echo "$r" | grep -qw aksandbox-agent || return 1
	done
}
t "the local-subprocess, docker, kubernetes and bubblewrap plugin packages recommend aksandbox-agent" recommended

# ---- install the core, the CLI and only the local plugin ----------------------
apt_fix() { # dpkg -i, then let apt complete the dependencies from the mirror
	DEBIAN_FRONTEND=noninteractive dpkg -i "$@" >>"$tmp/install.log" 2>&1 ||
		DEBIAN_FRONTEND=noninteractive apt-get -f install -y -qq --no-install-recommends >>"$tmp/install.log" 2>&1
}
state() { dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null | cut -c1-2; }
apt_fix "$(deb libaksandbox1)" "$(deb aksandbox)" "$(deb aksandbox-plugin-local-subprocess)"
only_three() {
	for p in libaksandbox1 aksandbox aksandbox-plugin-local-subprocess; do
		[ "$(state $p)" = ii ] || { echo "$p: $(state $p)"; tail -20 "$tmp/install.log"; return 1; }
	done
	[ "$(ours | sort | tr '\n' ' ')" = "aksandbox aksandbox-plugin-local-subprocess libaksandbox1 " ] ||
		{ echo "installed: $(ours)"; return 1; }
	[ "$(ls "$plugindir")" = local_subprocess.so ] || { ls -la "$plugindir"; return 1; }
}
t "dpkg -i libaksandbox1, aksandbox and aksandbox-plugin-local-subprocess: only those, one plugin in $plugindir" \
	only_three

# ---- the installed worker units: valid, disabled, not started, their user made ----------
units_verify() {
	cp "$unitdir/aksandbox-worker@.service" "$tmp/aksandbox-worker@deb-test.service"
	if command -v systemd-analyze >/dev/null; then
		# Documentation=man:aksandbox(1) is checked when man(1) is there to look it up
		man=yes; command -v man >/dev/null || man=no
		echo "systemd-analyze verify --man=$man"
		systemd-analyze verify --man=$man "$unitdir/aksandbox-worker.service" &&
			systemd-analyze verify --man=$man "$tmp/aksandbox-worker@deb-test.service"
	else
		# No systemd-analyze: the structure systemd needs, checked by hand.
		echo "no systemd-analyze: structural check"
		for f in "$unitdir/aksandbox-worker.service" "$tmp/aksandbox-worker@deb-test.service"; do
			for sec in '[Unit]' '[Service]' '[Install]'; do grep -qxF "$sec" "$f" || { echo "$f: no $sec"; return 1; }; done
			x=$(sed -n 's/^ExecStart=\([^ ]*\) .*/\1/p' "$f")
			[ -x "$x" ] || { echo "$f: ExecStart $x is not executable"; return 1; }
			bad=$(grep -vE '^(#.*|\[(Unit|Service|Install)\]|[A-Za-z]+=.*|)$' "$f") && { echo "$f: $bad"; return 1; }
		done
	fi
}
if command -v systemd-analyze >/dev/null; then
	t "systemd-analyze verify accepts the installed aksandbox-worker.service and an aksandbox-worker@ instance" units_verify
else
	t "the installed aksandbox-worker units are well formed (structural check: no systemd-analyze here)" units_verify
fi
user_made() {
	pw=$(getent passwd aksandbox) || { echo "no user aksandbox"; return 1; }
	echo "$pw"
	uid=$(echo "$pw" | cut -d: -f3)
	[ "$uid" -ge 100 ] && [ "$uid" -lt 1000 ] && [ "$(echo "$pw" | cut -d: -f6)" = /var/lib/aksandbox ] &&
		case $(echo "$pw" | cut -d: -f7) in */nologin | */false) ;; *) return 1 ;; esac &&
		getent group aksandbox >/dev/null
}
t "installing aksandbox created the system user and group aksandbox (dynamic uid, no login shell)" user_made
not_enabled() {
	wants=$(ls /etc/systemd/system/*.wants/ 2>/dev/null | grep aksandbox)
	[ -z "$wants" ] || { echo "enabled: $wants"; return 1; }
	st=$(systemctl is-enabled aksandbox-worker.service 2>&1); echo "is-enabled: $st"
	[ "$st" = disabled ] || return 1
	! deb-systemd-helper --quiet was-enabled aksandbox-worker.service || { echo "deb-systemd-helper: was-enabled"; return 1; }
	if [ -d /run/systemd/system ]; then # systemd runs this machine
		st=$(systemctl is-active aksandbox-worker.service 2>&1); echo "is-active: $st"
		[ "$st" = inactive ] || return 1
	fi
	# never started: no worker process, no state directory (StateDirectory= makes it at start)
	! pgrep -u aksandbox >/dev/null 2>&1 || { pgrep -a -u aksandbox; return 1; }
	[ ! -e /var/lib/aksandbox ] || { ls -ld /var/lib/aksandbox; return 1; }
}
t "aksandbox-worker.service is neither enabled nor started by the install" not_enabled

# The installed CLI in a clean environment: no AKS_* variables, LD_LIBRARY_PATH
# or build-tree paths; its own HOME, state directory and working directory, and
# its own TMPDIR, where local_subprocess makes its sandboxes by default: the
# sessions the tool and MCP checks open are kept (as sessions are), and go with
# $tmp instead of staying in /tmp with no state directory left to name them.
mkdir -p "$tmp/home" "$tmp/state" "$tmp/work" "$tmp/boxes"
cli() {
	(cd "$tmp/work" && env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="$tmp/home" LANG=C.UTF-8 \
		TMPDIR="$tmp/boxes" AKS_STATE_DIR="$tmp/state" /usr/bin/aksandbox "$@")
}
printf 'sandbox:\n  enabled: true\n  type: local_subprocess\n  local_subprocess: {}\n' >"$tmp/local.yaml"
printf 'sandbox:\n  enabled: true\n  type: docker\n  docker: {}\n' >"$tmp/docker.yaml"

uses_packaged_lib() {
	lib=$(ldd /usr/bin/aksandbox | awk '$1 == "libaksandbox.so.1" {print $3}')
	echo "resolved: $lib"
	[ -n "$lib" ] && [ "$(readlink -f "$lib")" = "$(readlink -f "/usr/lib/$ma/libaksandbox.so.1")" ] &&
		dpkg -S "/usr/lib/$ma/libaksandbox.so.1" | grep -q '^libaksandbox1:'
}
t "/usr/bin/aksandbox loads the packaged libaksandbox.so.1" uses_packaged_lib
providers_ok() {
	out=$(cli providers 2>&1) || { printf '%s\n' "$out"; return 1; }
	printf '%s\n' "$out"
	printf '%s\n' "$out" | grep -q "^local_subprocess " &&
		printf '%s\n' "$out" | grep -q "file: *$plugindir/local_subprocess.so\$" &&
		[ "$(printf '%s\n' "$out" | grep -c 'file:')" -eq 1 ]
}
t "aksandbox providers finds only local_subprocess, in the packaged plugin directory" providers_ok
run_ok() {
	out=$(cli -c "$tmp/local.yaml" run -- echo hi 2>"$tmp/run.err"); rc=$?
	echo "rc=$rc stdout=[$out]"; cat "$tmp/run.err"
	[ $rc -eq 0 ] && [ "$out" = hi ]
}
t "the installed aksandbox runs a command in a local_subprocess sandbox (run -- echo hi)" run_ok
tool_ok() {
	out=$(cli -c "$tmp/local.yaml" tool run_command '{"command": "echo hi from $((6 * 7))"}' 2>"$tmp/tool.err")
	rc=$?
	printf 'rc=%s %s\n' "$rc" "$out"; cat "$tmp/tool.err"
	[ $rc -eq 0 ] && printf '%s' "$out" | python3 -c '
import json, sys
r = json.load(sys.stdin)
sys.exit(0 if r["stdout"] == "hi from 42\n" and r["exit_code"] == 0 else 1)'
}
t "the installed aksandbox serves the run_command tool" tool_ok
mcp_ok() { # an MCP client session over stdio: initialize, list the tools, call one
	(cd "$tmp/work" && env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="$tmp/home" LANG=C.UTF-8 \
		TMPDIR="$tmp/boxes" AKS_STATE_DIR="$tmp/state" timeout 60 python3 - "$tmp/local.yaml" <<'PY'
import json, subprocess, sys
srv = subprocess.Popen(["/usr/bin/aksandbox", "-c", sys.argv[1], "mcp"],
                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
def send(msg):
    srv.stdin.write(json.dumps(msg) + "\n")
    srv.stdin.flush()
def call(i, method, params):
    send({"jsonrpc": "2.0", "id": i, "method": method, "params": params})
    for line in srv.stdout:
        r = json.loads(line)
        if r.get("id") == i:
            return r
    sys.exit("the server closed stdout before answering %s" % method)
call(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "deb-test", "version": "1"}})
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
tools = sorted(t["name"] for t in call(2, "tools/list", {})["result"]["tools"])
print("tools:", " ".join(tools))
r = call(3, "tools/call", {"name": "run_command", "arguments": {"command": "echo mcp-$((40 + 2))"}})
print("run_command:", json.dumps(r))
srv.stdin.close()
rc = srv.wait()
ok = len(tools) == 8 and "run_command" in tools and "mcp-42" in json.dumps(r["result"]) and rc == 0
sys.exit(0 if ok else 1)
PY
	)
}
t "the installed aksandbox mcp lists the eight tools and runs run_command" mcp_ok
sessions_kept() { # the two sessions above (the CLI's conversation, the MCP server's) keep their sandboxes
	ls -la "$tmp/boxes"
	[ "$(find "$tmp/boxes" -mindepth 1 -maxdepth 1 -type d -name 'ak-sandbox-*' | wc -l)" -eq 2 ]
}
t "the sandboxes of the sessions the tool and MCP calls opened are kept in the CLI's TMPDIR" sessions_kept
http_ok() { # mcp --listen loads the packaged HTTP module; /usr/bin/aksandbox itself links no libmicrohttpd
	module=/usr/lib/$ma/aksandbox/aksandbox-http.so
	dpkg -S "$module" | grep -q '^aksandbox:' || { echo "$module: not aksandbox's"; return 1; }
	! readelf -d /usr/bin/aksandbox | grep -q 'NEEDED.*libmicrohttpd' || { echo "the CLI links libmicrohttpd"; return 1; }
	cli -c "$tmp/local.yaml" mcp --listen 127.0.0.1:0 2>"$tmp/listen.err" &
	lp=$!
	url= i=0
	while [ -z "$url" ] && [ $i -lt 100 ] && kill -0 $lp 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
		url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$tmp/listen.err")
	done
	code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
		-H 'Accept: application/json, text/event-stream' \
		-d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"deb-test","version":"1"}}}' \
		"$url" 2>&1)
	kill $lp 2>/dev/null
	wait $lp
	echo "url=$url initialize=$code"; cat "$tmp/listen.err"
	[ -n "$url" ] && [ "$code" = 200 ]
}
t "the installed aksandbox mcp --listen loads the packaged HTTP module (the CLI itself links no libmicrohttpd)" http_ok

# ---- with aksandbox-agent installed, local_subprocess runs through it -------------
apt_fix "$(deb aksandbox-agent)"
agent_used() {
	out=$(cli -c "$tmp/local.yaml" check 2>&1); rc=$?
	echo "rc=$rc"; printf '%s\n' "$out"
	# (not stateful: the agent, and its Python state, live as long as the host process)
	[ $rc -eq 0 ] && printf '%s\n' "$out" | grep -q "^  runs *through aksandbox-agent $agent_path" &&
		! printf '%s\n' "$out" | grep -q "^  capabilities .*stateful" || return 1
	# the command's ancestors include the agent (comm aksandbox-agent)
	out=$(cli -c "$tmp/local.yaml" run -- sh -c 'p=$$; while [ "$p" -gt 1 ]; do
		[ "$(cat /proc/$p/comm)" = aksandbox-agent ] && { echo agent-ancestor; break; }
		p=$(cut -d" " -f4 /proc/$p/stat); done' 2>&1); rc=$?
	echo "rc=$rc run: $out"
	[ $rc -eq 0 ] && [ "$out" = agent-ancestor ]
}
t "once aksandbox-agent is installed, local_subprocess runs through it (check says so; a command runs under the agent)" \
	agent_used

# ---- a docker profile without, then with, the docker plugin package ----------
docker_missing() {
	out=$(cli -c "$tmp/docker.yaml" check 2>&1); rc=$?
	echo "rc=$rc"; printf '%s\n' "$out"
	[ $rc -ne 0 ] && printf '%s\n' "$out" | grep -q "plugin 'docker' not found" &&
		printf '%s\n' "$out" | grep -q "$plugindir/docker.so" &&
		printf '%s\n' "$out" | grep -q "package 'aksandbox-plugin-docker'"
}
t "a type: docker profile fails, naming the package aksandbox-plugin-docker" docker_missing
apt_fix "$(deb aksandbox-plugin-docker)"
t "dpkg -i aksandbox-plugin-docker installs $plugindir/docker.so" \
	sh -c "[ '$(state aksandbox-plugin-docker)' = ii ] && dpkg -S '$plugindir/docker.so'"
docker_loads() {
	out=$(cli -c "$tmp/docker.yaml" check 2>&1); rc=$?
	echo "rc=$rc"; printf '%s\n' "$out"
	[ $rc -eq 0 ] && printf '%s\n' "$out" | grep -q "plugin *docker .*($plugindir/docker.so)" &&
		printf '%s\n' "$out" | grep -q "verdict *ok"
}
t "the same docker profile now loads (aksandbox check)" docker_loads

# ---- libaksandbox-dev: the SDK, its documents and the example plugin --------------
# A plugin author's view: the example, copied out of the package's doc directory,
# builds with pkg-config aksandbox-sdk alone and its make check passes the
# contract runner the pc's checker variable names (/usr/bin/aksandbox-plugin-check,
# in aksandbox, installed above).
devdoc=/usr/share/doc/libaksandbox-dev
devexample=$devdoc/examples/example-plugin
apt_fix "$(deb libaksandbox-dev)"
t "dpkg -i libaksandbox-dev installs it" sh -c "[ '$(state libaksandbox-dev)' = ii ]"
# dh_compress gzips documents over 4 kB (so either name is accepted), but never
# files under examples/ (compat >= 12): the example must stay usable as is.
dev_docs() {
	for doc in abi.md plugin-author-guide.md; do
		f=$devdoc/$doc
		[ -f "$f" ] || f=$f.gz
		[ -s "$f" ] && dpkg -S "$f" | grep -q '^libaksandbox-dev' || { echo "no $devdoc/$doc(.gz)"; return 1; }
		echo "$f"
	done
}
t "libaksandbox-dev ships the ABI policy and the plugin author guide in $devdoc" dev_docs
dev_example() {
	ls -l "$devexample" || return 1
	for f in Makefile example_shell.c example.yaml README.md; do
		[ -s "$devexample/$f" ] && dpkg -S "$devexample/$f" | grep -q '^libaksandbox-dev' ||
			{ echo "no $devexample/$f"; return 1; }
	done
	! ls "$devexample" | grep '\.gz$'
}
t "libaksandbox-dev ships the example plugin, uncompressed, in $devexample" dev_example
# In a clean environment (no PKG_CONFIG_PATH, CHECKER or AKS_* variables).
example_builds() {
	cp -R "$devexample" "$tmp/example-plugin" || return 1
	(cd "$tmp/example-plugin" && env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="$tmp/home" LANG=C.UTF-8 \
		AKS_STATE_DIR="$tmp/state" make) || return 1
	[ -f "$tmp/example-plugin/example_shell.so" ] && [ ! -e "$devexample/example_shell.so" ]
}
t "the example, copied from $devexample, builds with the installed SDK (make)" example_builds
example_checks() {
	c=$(pkg-config --variable=checker aksandbox-sdk); echo "checker: $c"
	[ "$c" = /usr/bin/aksandbox-plugin-check ] || return 1
	out=$(cd "$tmp/example-plugin" && env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="$tmp/home" \
		LANG=C.UTF-8 AKS_STATE_DIR="$tmp/state" make check 2>&1); rc=$?
	printf 'rc=%s\n%s\n' "$rc" "$out"
	[ $rc -eq 0 ] && printf '%s\n' "$out" | grep -q "^/usr/bin/aksandbox-plugin-check \./example_shell\.so " &&
		printf '%s\n' "$out" | grep -q '^ok [0-9]* - ' && ! printf '%s\n' "$out" | grep -q '^not ok '
}
t "its make check runs the pc's checker (/usr/bin/aksandbox-plugin-check) and passes" example_checks

# ---- purge: the machine as it was ----------------------------------------------
purge_new
purged() {
	cat "$tmp/purge.log"
	[ -z "$(ours)" ] || { echo "left: $(ours)"; return 1; }
	[ ! -e "/usr/lib/$ma/aksandbox" ] && [ ! -e /usr/bin/aksandbox ] && [ ! -e /usr/libexec/aksandbox ] &&
		[ ! -e /usr/include/aksandbox ] && [ ! -e "$devdoc" ] ||
		{ echo "files left"; return 1; }
	installed | diff "$tmp/before" -
}
t "purging what was installed leaves the machine's packages and files as they were" purged
units_gone() {
	ls "$unitdir"/aksandbox-worker* /usr/lib/sysusers.d/aksandbox.conf /etc/systemd/system/*.wants/aksandbox* \
		/var/lib/systemd/deb-systemd-helper-enabled/*aksandbox* /var/lib/systemd/deb-systemd-helper-masked/*aksandbox* 2>/dev/null |
		grep . && return 1
	if [ -z "$user_before" ]; then # Debian leaves system users; this test removes the one it made
		getent passwd aksandbox || { echo "the purge removed the user aksandbox"; return 1; }
		forget_user
		! getent passwd aksandbox && ! getent group aksandbox
	fi
}
t "the purge removes the units and their systemd state, and leaves the user (removed by this test)" units_gone
finish
