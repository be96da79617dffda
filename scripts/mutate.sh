#!/usr/bin/env bash
# make mutate: mutation testing of the packages that judge (what a node
# accepts, what a build trusts, what the smoke test passes). gremlins plants
# one small bug at a time (a flipped condition, a moved boundary, + for -)
# in a covered line and runs the package's tests; a mutant the tests still
# pass "lived". Efficacy is killed / (killed + lived): timed-out mutants (an
# infinite loop, say) and lines no test covers are counted apart.
#
#   make mutate                              every package below, 2 workers
#   PKGS="./image/lock ./image/verity" make mutate
#   WORKERS=1 make mutate                    leave a core free
#   PKGS="./publish ./cloud/aliyun ./internal/retry ./rollout" make mutate
#                                            the cloud packages, not in the
#                                            default list (it takes 2 hours
#                                            already; rollout alone did
#                                            not finish in 37 minutes)
#   PKGS=./harness/smoke EXCLUDE='^(vm|boot)\.go$' make mutate
#                                            gremlins -E: skip files (a regexp on
#                                            the path inside the package) while
#                                            working on others
#   OUTDIR=/tmp/m make mutate                another report directory
#
# A package given as PKG:FILE,FILE is judged by those files alone (the
# others of the package are excluded): agent/agent is measured on its
# guard and health reporters, what decides what the API server is told.
#
# Runs in a copy of the tracked files (with their working-tree content), so
# a large out/ is not copied once per worker and an interrupted run never
# leaves a mutated file in the checkout. Writes out/mutate/<pkg>.json
# (gremlins' report) and out/mutate/report.txt (the table and every
# survivor, marked when docs/mutation.md lists it as equivalent). Exits 1
# when a package is under the target.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
GREMLINS_VERSION=v0.6.0
TARGET=${TARGET:-85}
WORKERS=${WORKERS:-2}
PKGS=${PKGS:-"./agent/ignition ./agent/nodeconfig ./agent/health ./agent/agent:guard.go,health.go ./image/debian ./image/lock ./image/verity ./image/sources ./harness/smoke ./harness/conformance ./internal/secretscan"}
# A package measured by some of its files runs only the tests that reach
# them for each mutant (agent/agent's whole suite takes 30 s a mutant on
# 2 cores, these 10 s). They cover the same lines of those files as the
# whole suite: docs/mutation.md says how that was checked.
declare -A run=(
  [./agent/agent]='^(TestGuard|TestCheck|TestHealth|TestKernel|TestWatch|TestEventRate|TestBaselines|TestRestartsAndLinks|TestDriftIsReported|TestGuaranteeBroken|TestTokenRedactedAfterJoin|TestEditedStoredConfigIsDrift|TestStorageOnTheEmptyDataDisk)'
)
out=${OUTDIR:-$repo/out/mutate}
exclude=()
if [ -n "${EXCLUDE:-}" ]; then exclude=(-E "$EXCLUDE"); fi
mkdir -p "$out"

tools=${XDG_CACHE_HOME:-$HOME/.cache}/drover/tools/gremlins-$GREMLINS_VERSION
if [ ! -x "$tools/gremlins" ]; then
  echo "mutate: installing gremlins $GREMLINS_VERSION into $tools"
  GOBIN=$tools go install "github.com/go-gremlins/gremlins/cmd/gremlins@$GREMLINS_VERSION"
fi

src=$(mktemp -d "${TMPDIR:-/tmp}/drover-mutate-XXXXXX")
trap 'rm -rf "$src"' EXIT
git ls-files -z --cached --others --exclude-standard | rsync -a --from0 --files-from=- ./ "$src/"

# equivalent FILE:LINE:COL MUTATOR -> listed in docs/mutation.md's table
# as "| `pkg/file.go:L:C` | MUTATOR | why |".
equivalents=$(grep -oE '^\| `[^`]+` \| [A-Z_]+ ' "$repo/docs/mutation.md" 2>/dev/null | sed -E 's/^\| `([^`]+)` \| ([A-Z_]+) /\1 \2/' || true)

report=$out/report.txt
: >"$report.new"
printf '%-22s %7s %6s %6s %9s %11s %9s %8s\n' package mutants killed lived timed-out not-covered efficacy time | tee -a "$report.new"
failed=0
start=$SECONDS
for spec in $PKGS; do
  pkg=${spec%%:*}
  name=${pkg#./}
  ex=("${exclude[@]}")
  if [ "$spec" != "$pkg" ]; then
    # Every other non-test file of the package, as one -E regexp.
    others=$(cd "$src/$pkg" && ls -- *.go | grep -v '_test\.go$' | grep -vxF -f <(tr , '\n' <<<"${spec#*:}") | sed 's/\.go$//' | paste -sd'|' || true)
    if [ -n "$others" ]; then ex+=(-E "(^|/)($others)\.go\$"); fi
  fi
  goflags=-count=1
  if [ "$spec" != "$pkg" ] && [ -n "${run[$pkg]:-}" ]; then goflags="$goflags -run=${run[$pkg]}"; fi
  json=$out/$(echo "$name" | tr / _).json
  t0=$SECONDS
  # -count=1: gremlins times the coverage run and allows each mutant a
  # multiple of it; a cached (instant) coverage run would time every
  # mutant out. The coefficient covers the mutant's compile and link.
  if ! (cd "$src" && GOFLAGS=$goflags "$tools/gremlins" unleash --silent --workers "$WORKERS" --timeout-coefficient 10 "${ex[@]}" \
    -o "$json.new" "$pkg") >"$out/$(echo "$name" | tr / _).log" 2>&1; then
    echo "mutate: gremlins failed on $pkg; see $out/$(echo "$name" | tr / _).log" >&2
    failed=1
    continue
  fi
  mv "$json.new" "$json"
  read -r killed lived timed notcov < <(jq -r '[.mutants_killed, .mutants_lived,
      ([.files[].mutations[] | select(.status == "TIMED OUT")] | length), .mutants_not_covered] | @tsv' "$json")
  total=$((killed + lived + timed + notcov))
  if [ $((killed + lived)) -eq 0 ]; then
    eff=0
  else
    eff=$(awk -v k="$killed" -v l="$lived" 'BEGIN{printf "%.1f", 100*k/(k+l)}')
  fi
  mark=""
  if awk -v e="$eff" -v t="$TARGET" 'BEGIN{exit !(e < t)}'; then
    mark="  < ${TARGET}%"
    failed=1
  fi
  printf '%-22s %7d %6d %6d %9d %11d %8s%% %7ss%s\n' "$name" "$total" "$killed" "$lived" "$timed" "$notcov" "$eff" $((SECONDS - t0)) "$mark" | tee -a "$report.new"
  jq -r --arg p "$name" '.files[] | .file_name as $f | .mutations[] | select(.status == "LIVED")
      | "\($p)/\($f | split("/") | last):\(.line):\(.column) \(.type)"' "$json" >>"$out/survivors.new"
done
echo "mutate: $((SECONDS - start))s in all; target ${TARGET}% killed of the mutants that did not time out" | tee -a "$report.new"
{
  echo
  echo "Survivors (an equivalent mutant changes no behaviour a test could see; docs/mutation.md says why):"
  sort -u "$out/survivors.new" 2>/dev/null | while read -r where mut; do
    if grep -qxF "$where $mut" <<<"$equivalents"; then
      echo "  $where $mut   equivalent (docs/mutation.md)"
    else
      echo "  $where $mut"
    fi
  done
} >>"$report.new"
rm -f "$out/survivors.new"
mv "$report.new" "$report"
echo "mutate: the table and every survivor are in $report"
exit "$failed"
