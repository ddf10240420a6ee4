#!/bin/bash
# tests/integration/run-node.sh [--needs FILE] DIR SCRIPT.mjs PACKAGE... - runs one of
# the tests written in JavaScript against pinned npm packages (the official MCP SDK
# for tests/integration/mcp, the official E2B SDKs for tests/integration/e2b); the
# script prints TAP.
#
# DIR is the test's directory under tests/integration: its package.json and
# package-lock.json pin the packages. They are installed with `npm ci` into the
# BUILD tree, DIR/sdk (the source tree may be read-only, as in make distcheck),
# once, and again when the lock file changes. Each PACKAGE must then be installed
# at exactly the version package.json pins. --needs FILE: a file of the build tree
# the test cannot run without (e.g. core/cli/aksandbox). No node, no npm registry or
# no FILE is a failure, never a skip.
#
# run-node.sh --install DIR PACKAGE... only installs (as above) and prints the
# directory installed into (DIR/sdk of the build tree, its node_modules inside):
# how the shell tests' starter scripts get an emulator from the npm registry
# (tests/integration/sqs/fauxqs.sh). A failure prints why on stderr, status 1.
set -u
install_only=""
if [ "${1:-}" = "--install" ]; then
	install_only=1
	shift
fi
needs=""
if [ "${1:-}" = "--needs" ]; then
	needs=${2:?usage: run-node.sh [--needs FILE] DIR SCRIPT.mjs PACKAGE...}
	shift 2
fi
dir=${1:?usage: run-node.sh [--needs FILE] DIR SCRIPT.mjs PACKAGE...}
if [ -n "$install_only" ]; then
	script=""
	shift
else
	script=${2:?usage: run-node.sh [--needs FILE] DIR SCRIPT.mjs PACKAGE...}
	shift 2
fi
[ $# -gt 0 ] || { echo "usage: run-node.sh [--needs FILE] DIR SCRIPT.mjs PACKAGE..." >&2; exit 2; }

if [ -z "${AKS_TEST_BUILDDIR:-}" ] || [ -z "${AKS_TEST_SRCDIR:-}" ]; then
	echo "Bail out! AKS_TEST_BUILDDIR/AKS_TEST_SRCDIR are not set (run through make check)"
	exit 1
fi
fail() {
	if [ -n "$install_only" ]; then
		printf '%s\n' "$@" >&2
		exit 1
	fi
	echo "1..1"
	echo "not ok 1 - $1"
	shift
	for line in "$@"; do echo "# $line"; done
	exit 1
}
S=$AKS_TEST_SRCDIR/tests/integration/$dir
D=$AKS_TEST_BUILDDIR/tests/integration/$dir/sdk

command -v node >/dev/null || fail "node is not installed (apt-get install nodejs npm)"
command -v npm >/dev/null || fail "npm is not installed (apt-get install npm)"
[ -z "$needs" ] || [ -e "$AKS_TEST_BUILDDIR/$needs" ] || fail "$needs was not built"

# Installed already when every package is there and the lock file is the one
# installed from.
installed() {
	cmp -s "$S/package-lock.json" "$D/package-lock.json" || return 1
	for pkg in "$@"; do
		[ -f "$D/node_modules/$pkg/package.json" ] || return 1
	done
}
mkdir -p "$D" || fail "cannot create $D"
(
	flock 9
	if ! installed "$@"; then
		cp -f "$S/package.json" "$S/package-lock.json" "$D/" &&
			chmod u+w "$D/package.json" "$D/package-lock.json" &&
			(cd "$D" && npm ci --no-audit --no-fund --cache "$D/.npm-cache") >"$D/npm.log" 2>&1 ||
			{ rm -f "$D/package-lock.json"; exit 1; }
	fi
) 9>"$D/.lock" || fail "npm ci of $* failed (is the npm registry reachable?)" \
	"$(tail -5 "$D/npm.log" 2>/dev/null)"
versions=""
for pkg in "$@"; do
	want=$(node -p 'require(process.argv[1]).dependencies[process.argv[2]]' "$S/package.json" "$pkg" 2>/dev/null)
	have=$(node -p 'require(process.argv[1]).version' "$D/node_modules/$pkg/package.json" 2>/dev/null)
	[ -n "$want" ] && [ "$want" = "$have" ] || fail "$pkg installed is '$have', not the pinned '$want'"
	versions="$versions $pkg $have,"
done

if [ -n "$install_only" ]; then
	echo "$D"
	exit 0
fi

# ESM resolves packages from the script's own directory: run a copy beside
# node_modules, with tests/integration/tap.mjs, which the scripts share.
# Copied under a name of this run's own, then renamed: the tests run at once.
for f in "$S/$script" "$AKS_TEST_SRCDIR/tests/integration/tap.mjs"; do
	b=$(basename "$f")
	cp -f "$f" "$D/$b.$$" && chmod u+w "$D/$b.$$" && mv -f "$D/$b.$$" "$D/$b" ||
		fail "cannot copy $b"
done
echo "#$versions node $(node --version)"
exec node "$D/$script"
