#!/usr/bin/env bash
# make bench: prints the figures the project tracks. Needs the host tools
# (scripts/host-setup.sh) and network access to the Debian mirror and the Go
# module proxy. Work files go to $BENCH_DIR (default: a temp dir).
set -euo pipefail
cd "$(dirname "$0")/.."
DROVER=${DROVER:-bin/drover}
RECIPE=${RECIPE:-recipes/ecs-node.yaml}
work=${BENCH_DIR:-$(mktemp -d /tmp/drover-bench.XXXXXX)}
mkdir -p "$work"
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", b-a}'; }

echo "== sources: resolve + fetch $RECIPE"
name=$(basename "$RECIPE" .yaml)
cp "$RECIPE" "$work/$name.yaml"
rm -f "$work/$name.yaml.lock"
cache="$work/cache-sources"
rm -rf "$cache"
t0=$(now)
"$DROVER" -q lock "$work/$name.yaml" --cache "$cache"
"$DROVER" -q fetch "$work/$name.yaml" --cache "$cache"
t1=$(now)
"$DROVER" -q lock "$work/$name.yaml" --cache "$cache"
"$DROVER" -q fetch "$work/$name.yaml" --cache "$cache"
t2=$(now)
pkgs=$(grep -c '^deb ' "$work/$name.yaml.lock")
bytes=$(awk '$1=="deb"{s+=$5} END{print s}' "$work/$name.yaml.lock")
printf "%-44s %10s\n" "resolve+fetch cold (empty drover cache)" "$(secs "$t0" "$t1") s"
printf "%-44s %10s\n" "resolve+fetch warm (lock unchanged, cached)" "$(secs "$t1" "$t2") s"
printf "%-44s %10s\n" "closure packages" "$pkgs"
printf "%-44s %10s\n" "closure download size" "$(awk -v b="$bytes" 'BEGIN{printf "%.1f MiB", b/1048576}')"

echo "== go test benchmarks (parsers, cache, verity, formats)"
go test -run '^$' -bench . -benchtime 3x ./image/debian ./image/fetch ./image/verity ./image/formats ./image/rootfs 2>&1 | grep -E '^Benchmark|^ok' || true
