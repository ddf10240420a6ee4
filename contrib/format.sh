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
bad=0
for f in $files; do
	[ -f "$f" ] || continue
	if $check; then
		if clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then :; else
			echo "not formatted: $f (make format fixes it)"
			bad=$((bad + 1))
		fi
	else
		clang-format -i "$f"
	fi
done
if $check; then
	n=$(printf '%s\n' $files | grep -c .)
	echo "format: $n files checked, $bad not formatted"
	[ "$bad" -eq 0 ]
fi
