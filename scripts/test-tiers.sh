#!/usr/bin/env bash
# Runs the named make targets (the tiers of `make test`) in order and prints
# each one's wall time at the end, also when a tier fails, so a run that
# outgrows CI's budget shows where the time went. Stops at the first failing
# tier, like make would, and exits with its status.
set -uo pipefail
cd "$(dirname "$0")/.."
make=${MAKE:-make}
names=() secs=() results=()
summary() {
  total=0
  echo
  echo "== make test: wall time per tier"
  for i in "${!names[@]}"; do
    printf '  %-12s %6ss  %s\n' "${names[$i]}" "${secs[$i]}" "${results[$i]}"
    total=$((total + secs[i]))
  done
  printf '  %-12s %6ss  (%dm%02ds)\n' total "$total" $((total / 60)) $((total % 60))
}
for tier in "$@"; do
  start=$(date +%s)
  "$make" --no-print-directory "$tier"
  rc=$?
  names+=("$tier") secs+=($(( $(date +%s) - start )))
  if [ "$rc" -ne 0 ]; then
    results+=("FAILED (exit $rc)")
    summary
    exit "$rc"
  fi
  results+=(ok)
done
summary
