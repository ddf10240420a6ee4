#!/bin/sh
# The README's first command: install dependencies, build, and run the demo
# (a sandbox session on the embedded default, the local_subprocess provider).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/contrib/install-deps.sh"
cd "$top"
[ -x configure ] || autoreconf -fi >/dev/null
mkdir -p _build
cd _build
[ -f Makefile ] || ../configure --quiet
make -j"$(nproc)" >/dev/null
make --no-print-directory demo
