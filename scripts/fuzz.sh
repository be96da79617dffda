#!/usr/bin/env bash
# Runs every fuzz target for a short time (default 20s each): make fuzz.
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${1:-20s}
grep -rl --include='*_test.go' '^func Fuzz' . | while read -r f; do
  pkg=./$(dirname "${f#./}")
  for t in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$f" | sed 's/^func //'); do
    echo "== $pkg $t ($dur)"
    go test -run '^$' -fuzz "^$t\$" -fuzztime "$dur" "$pkg"
  done
done
