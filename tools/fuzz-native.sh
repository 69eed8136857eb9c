#!/usr/bin/env bash
# fuzz-native.sh runs every Go native fuzz target of the repository (func FuzzXxx in a
# _test.go file) for SVC_FUZZ_NATIVE_TIME each (default 20s), one after the other, and stops
# at the first failure: `go test -fuzz` then leaves the failing input under the package's
# testdata/fuzz/FuzzXxx/, where the package's plain `go test` replays it from then on.
#
#   tools/fuzz-native.sh                 # every target
#   tools/fuzz-native.sh Cron Match      # targets whose name contains one of the words
#
# The targets are found by name, so new ones are fuzzed without editing this script.
set -euo pipefail

cd "$(dirname "$0")/.."
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
fuzztime="${SVC_FUZZ_NATIVE_TIME:-20s}"

mapfile -t found < <(grep -rlE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' libs services tools e2e 2>/dev/null | sort)
targets=()
for file in "${found[@]}"; do
	dir="./$(dirname "$file")"
	while read -r name; do
		if [ "$#" -gt 0 ]; then
			keep=0
			for w in "$@"; do [[ "$name" == *"$w"* ]] && keep=1; done
			[ "$keep" = 1 ] || continue
		fi
		targets+=("$dir $name")
	done < <(grep -oE '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]*).*/\1/')
done

if [ "${#targets[@]}" -eq 0 ]; then
	echo "fuzz-native: no fuzz targets found" >&2
	exit 1
fi
echo "fuzz-native: ${#targets[@]} targets, ${fuzztime} each"
start=$(date +%s)
for t in "${targets[@]}"; do
	read -r dir name <<<"$t"
	echo "=== $name ($dir)"
	# -run '^$' skips the package's other tests; the seed corpus still runs first.
	go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$dir"
done
echo "fuzz-native: ${#targets[@]} targets passed in $(( $(date +%s) - start ))s"
