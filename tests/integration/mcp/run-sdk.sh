#!/bin/bash
# tests/integration/mcp/run-sdk.sh SCRIPT.mjs - runs one of the tests that drive
# `aksandbox mcp` with the official MCP TypeScript SDK client (mcp_sdk.test over
# stdio, mcp_http.test over Streamable HTTP); the script prints TAP.
#
# The SDK is installed with `npm ci` from the pinned package-lock.json into
# the BUILD tree (the source tree may be read-only, as in make distcheck),
# once, and again when the lock file changes. No node or no npm registry is
# a failure, never a skip.
set -u
script=${1:?usage: run-sdk.sh SCRIPT.mjs}

if [ -z "${AKS_TEST_BUILDDIR:-}" ] || [ -z "${AKS_TEST_SRCDIR:-}" ]; then
	echo "Bail out! AKS_TEST_BUILDDIR/AKS_TEST_SRCDIR are not set (run through make check)"
	exit 1
fi
fail() {
	echo "1..1"
	echo "not ok 1 - $1"
	shift
	for line in "$@"; do echo "# $line"; done
	exit 1
}
S=$AKS_TEST_SRCDIR/tests/integration/mcp
D=$AKS_TEST_BUILDDIR/tests/integration/mcp/sdk

command -v node >/dev/null || fail "node is not installed (apt-get install nodejs npm)"
command -v npm >/dev/null || fail "npm is not installed (apt-get install npm)"
[ -x "$AKS_TEST_BUILDDIR/core/cli/aksandbox" ] || fail "aksandbox was not built"

mkdir -p "$D" || fail "cannot create $D"
(
	flock 9
	if ! cmp -s "$S/package-lock.json" "$D/package-lock.json" ||
	   [ ! -f "$D/node_modules/@modelcontextprotocol/sdk/package.json" ]; then
		cp -f "$S/package.json" "$S/package-lock.json" "$D/" &&
			chmod u+w "$D/package.json" "$D/package-lock.json" &&
			(cd "$D" && npm ci --no-audit --no-fund --cache "$D/.npm-cache") >"$D/npm.log" 2>&1 ||
			{ rm -f "$D/package-lock.json"; exit 1; }
	fi
) 9>"$D/.lock" || fail "npm ci of @modelcontextprotocol/sdk failed (is the npm registry reachable?)" \
	"$(tail -5 "$D/npm.log" 2>/dev/null)"
want=$(sed -n 's/.*"@modelcontextprotocol\/sdk": "\([0-9.]*\)".*/\1/p' "$S/package.json")
have=$(node -p 'require(process.argv[1]).version' "$D/node_modules/@modelcontextprotocol/sdk/package.json" 2>/dev/null)
[ -n "$want" ] && [ "$want" = "$have" ] || fail "the SDK installed is '$have', not the pinned '$want'"

# ESM resolves packages from the script's own directory: run a copy beside
# node_modules (with tap.mjs, which the scripts share).
# Copied under a name of this run's own, then renamed: the tests run at once.
for f in "$script" tap.mjs; do
	cp -f "$S/$f" "$D/$f.$$" && chmod u+w "$D/$f.$$" && mv -f "$D/$f.$$" "$D/$f" ||
		fail "cannot copy $f"
done
echo "# @modelcontextprotocol/sdk $have, node $(node --version)"
exec node "$D/$script"
