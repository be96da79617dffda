#!/usr/bin/env bash
# Runs every fuzz target in the tree for a bounded budget each: `make fuzz-short`
# (5000x, part of make test) and `make fuzz` (200000x). The budget is a go test
# -fuzztime value: a count of executions ("5000x") or a duration ("20s").
# Targets are found by grepping for `func FuzzXxx(`, so a new target runs here
# without being listed. Prints each target's wall time and the total.
set -euo pipefail
cd "$(dirname "$0")/.."
budget=${1:-5000x}
start=$SECONDS
targets=0
while read -r f; do
  pkg=./$(dirname "${f#./}")
  for t in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$f" | sed 's/^func //'); do
    t0=$SECONDS
    echo "== $pkg $t ($budget)"
    go test -run '^$' -fuzz "^$t\$" -fuzztime "$budget" "$pkg" </dev/null
    echo "   $t: $((SECONDS - t0))s"
    targets=$((targets + 1))
  done
done < <(grep -rl --include='*_test.go' '^func Fuzz' . | sort)
if [ "$targets" -eq 0 ]; then
  echo "fuzz.sh: no fuzz targets found (looked for func Fuzz... in *_test.go)" >&2
  exit 1
fi
echo "fuzz.sh: $targets targets, $budget each, $((SECONDS - start))s in all"
