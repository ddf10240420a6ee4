#!/bin/sh
# contrib/format.sh [--check] - clang-format over the project's C sources, in place
# (`make format`), or with --check only list the files .clang-format would change and fail
# when there are any (`make check-format`, run by tests/run-all.sh). The files are the
# ones git tracks, or, in a tree without git (a release tarball), every .c and .h below
# the top folders.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
check=false
[ "${1:-}" = --check ] && check=true
command -v clang-format >/dev/null ||
	{ echo "format.sh: clang-format is needed (apt-get install clang-format)" >&2; exit 2; }
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	files=$(git ls-files '*.c' '*.h')
else
	files=$(find agent contrib core plugins sdk tests -name '*.[ch]' | sort)
fi
existing=$(for f in $files; do [ -f "$f" ] && echo "$f"; done)
if ! $check; then
	# shellcheck disable=SC2086 # one file name per word
	[ -z "$existing" ] || clang-format -i $existing
	exit 0
fi
# One clang-format for every file (a process per file took most of a minute): it names
# each place that differs as "FILE:LINE:COL: error: code should be clang-formatted".
# shellcheck disable=SC2086
out=$(clang-format --dry-run --Werror $existing 2>&1) && rc=0 || rc=$?
bad_files=$(printf '%s\n' "$out" | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' | sort -u)
for f in $bad_files; do
	echo "not formatted: $f (make format fixes it)"
done
bad=$(printf '%s\n' $bad_files | grep -c . || true)
if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then
	# clang-format failed for another reason (a file it cannot read or parse): say it.
	printf '%s\n' "$out" | tail -20
	bad=1
fi
n=$(printf '%s\n' $existing | grep -c .)
echo "format: $n files checked, $bad not formatted"
[ "$bad" -eq 0 ]
