#!/usr/bin/env bash
# make bench: prints the figures the project tracks. Needs the host tools
# (scripts/host-setup.sh), root for the peer pipeline (mmdebstrap) and the
# boots, and network access to the Debian mirror and the Go module proxy.
# Work files go to $BENCH_DIR (default: a temp dir). Sections can be picked
# with BENCH="sources build agent boot arm64 go before" (default: all).
# "before" builds $RECIPE at the git ref BENCH_BEFORE (default 2eeb194, the
# tree before issue 36) with that tree's own drover, boots both images with
# this tree's harness and prints one before/after table.
set -euo pipefail
cd "$(dirname "$0")/.."
DROVER=${DROVER:-$PWD/bin/drover}
RECIPE=${RECIPE:-recipes/ecs-node.yaml}
SECTIONS=${BENCH:-sources build agent boot arm64 go before}
work=${BENCH_DIR:-$(mktemp -d /tmp/drover-bench.XXXXXX)}
mkdir -p "$work"
name=$(basename "$RECIPE" .yaml)
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", b-a}'; }
mib() { awk -v b="$1" 'BEGIN{printf "%.1f MiB", b/1048576}'; }
row() { printf "  %-52s %14s\n" "$1" "$2"; }
has() { [[ " $SECTIONS " == *" $1 "* ]]; }
# smoke runs drover smoke; with BENCH_PORT_LOCK set, under flock on that
# file, for a machine where other runs also bind the control plane's port.
smoke() {
  if [ -n "${BENCH_PORT_LOCK:-}" ]; then flock "$BENCH_PORT_LOCK" "$DROVER" smoke "$@"; else "$DROVER" smoke "$@"; fi
}
# The previous release's figures (bench/size-previous.txt: "key value" lines).
PREVIOUS=${PREVIOUS:-bench/size-previous.txt}
prev() { awk -v k="$1" '$1==k{print $2}' "$PREVIOUS" 2>/dev/null; }
# cmp_row LABEL KEY NOW [mib]: now, the previous release and the change.
cmp_row() {
  local p; p=$(prev "$2")
  if [ -z "$p" ]; then printf "  %-40s %14s %14s\n" "$1" "$( [ "${4:-}" = mib ] && mib "$3" || echo "$3")" "-"; return; fi
  if [ "${4:-}" = mib ]; then
    printf "  %-40s %14s %14s %12s\n" "$1" "$(mib "$3")" "$(mib "$p")" "$(awk -v a="$3" -v b="$p" 'BEGIN{printf "%+.1f MiB", (a-b)/1048576}')"
  else
    printf "  %-40s %14s %14s %12s\n" "$1" "$3" "$p" "$(awk -v a="$3" -v b="$p" 'BEGIN{printf "%+d", a-b}')"
  fi
}

if has sources; then
  echo "== sources: resolve + fetch $RECIPE (drover lock + drover fetch)"
  cp "$RECIPE" "$work/$name.yaml"; rm -f "$work/$name.yaml.lock"
  cache="$work/cache-sources"; rm -rf "$cache"
  t0=$(now)
  "$DROVER" -q lock "$work/$name.yaml" --cache "$cache"
  "$DROVER" -q fetch "$work/$name.yaml" --cache "$cache"
  t1=$(now)
  "$DROVER" -q lock "$work/$name.yaml" --cache "$cache"
  "$DROVER" -q fetch "$work/$name.yaml" --cache "$cache"
  t2=$(now)
  row "cold (empty drover cache)" "$(secs "$t0" "$t1") s"
  row "warm (lock unchanged, everything cached)" "$(secs "$t1" "$t2") s"
  row "closure packages" "$(grep -c '^deb ' "$work/$name.yaml.lock")"
  row "closure download size" "$(mib "$(awk '$1=="deb"{s+=$5} END{print s}' "$work/$name.yaml.lock")")"
fi

if has build; then
  echo "== build: $RECIPE"
  cache="$work/cache-build"; rm -rf "$cache" "$work/out-cold" "$work/out-warm"
  t0=$(now); "$DROVER" -q build "$RECIPE" -o "$work/out-cold" --cache "$cache" >/dev/null; t1=$(now)
  "$DROVER" -q build "$RECIPE" -o "$work/out-warm" --cache "$cache" >/dev/null; t2=$(now)
  warm=$(secs "$t1" "$t2")
  row "cold build (empty drover cache; Go build cache as found)" "$(secs "$t0" "$t1") s"
  row "warm build" "$warm s"
  m="$work/out-warm/$name.manifest.json"
  raw="$work/out-warm/$name.raw"
  row "raw image, allocated (used)" "$(mib $(( $(stat -c %b "$raw") * 512 )))"
  echo "  sizes, beside the previous release ($PREVIOUS):"
  printf "  %-40s %14s %14s %12s\n" "" "now" "previous" "change"
  cmp_row "raw image" raw "$(stat -c %s "$raw")" mib
  [ -f "$work/out-warm/$name.qcow2" ] && cmp_row "qcow2 (compressed)" qcow2 "$(stat -c %s "$work/out-warm/$name.qcow2")" mib
  cmp_row "root filesystem (erofs)" rootfs "$(jq '.rootfs.size' "$m")" mib
  cmp_row "files in the root filesystem" files "$(jq '.rootfs.files' "$m")"
  cmp_row "packages" packages "$(jq '.packages | length' "$m")"
  row "excluded packages / removed paths" "$(jq '(.excluded // []) | length' "$m") / $(jq '[(.removed // [])[].paths | length] | add // 0' "$m")"
  row "setuid/setgid files" "$(jq -r '[.setuid[]?.path] | join(" ")' "$m")"
  echo "== peer pipeline: mmdebstrap + mkfs.erofs + veritysetup format (same package set)"
  # the packages the image installs (the lock also pins the excluded ones)
  pkgs=$(jq -r '.packages[].name' "$m" | paste -sd, -)
  peer="$work/peer"; rm -rf "$peer"; mkdir -p "$peer"
  m_url=$("$DROVER" mirror)
  s_url=$("$DROVER" mirror --security)
  t0=$(now)
  # essential: dpkg and the Essential set, which maintainer scripts need, plus
  # exactly the packages of drover's lock; from the same three suites as the
  # recipe, so both install the same versions.
  mmdebstrap --variant=essential --include="$pkgs" trixie "$peer/root" \
    "deb $m_url trixie main" "deb $m_url trixie-updates main" "deb $s_url trixie-security main" >"$peer/mmdebstrap.log" 2>&1 \
    || { echo "  mmdebstrap failed (see $peer/mmdebstrap.log)"; }
  t1=$(now)
  mkfs.erofs "$peer/root.erofs" "$peer/root" >"$peer/mkfs.erofs.log" 2>&1 || echo "  mkfs.erofs failed (see $peer/mkfs.erofs.log)"
  t2=$(now)
  veritysetup format "$peer/root.erofs" "$peer/root.verity" >"$peer/veritysetup.log" 2>&1 || echo "  veritysetup failed (see $peer/veritysetup.log)"
  t3=$(now)
  peer_total=$(secs "$t0" "$t3")
  row "mmdebstrap" "$(secs "$t0" "$t1") s"
  row "mkfs.erofs" "$(secs "$t1" "$t2") s"
  row "veritysetup format" "$(secs "$t2" "$t3") s"
  row "peer pipeline total" "$peer_total s"
  row "drover warm build / peer pipeline" "$(awk -v a="$warm" -v b="$peer_total" 'BEGIN{printf "%.2fx", a/b}')"
fi

if has agent; then
  echo "== agent and init"
  CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$work/drover-agent" ./cmd/drover-agent
  CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$work/drover-init" ./cmd/drover-init
  row "drover-agent binary" "$(mib "$(stat -c %s "$work/drover-agent")")"
  row "drover-init binary" "$(mib "$(stat -c %s "$work/drover-init")")"
  go build -trimpath -o "$work/agentbench" ./scripts/agentbench
  "$work/agentbench" testdata/pki/ca.crt | sed 's/^/  /'
fi

if has boot; then
  # BENCH_BOOTS fresh instances, each booted to Ready and rebooted to Ready;
  # the medians are printed against bench/timeline-previous.txt (commit the
  # new $work/timeline.txt there when a change moves the figures on
  # purpose). BENCH_CACHE: where the control plane binaries are cached.
  # It also prints systemd-analyze security drover-agent.service from the
  # booted node (systemd's own score; worse than MEDIUM fails the section).
  boots=${BENCH_BOOTS:-3}
  echo "== boot timeline: $name under QEMU, first boot and reboot to Node Ready, median of $boots (load: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores)"
  [ -f "$work/out-warm/$name.raw" ] || "$DROVER" -q build "$RECIPE" -o "$work/out-warm" >/dev/null
  cache_args=(); [ -n "${BENCH_CACHE:-}" ] && cache_args=(--cache "$BENCH_CACHE")
  smoke "$work/out-warm/$name.raw" --bench "$boots" --work "$work/boot" "${cache_args[@]}" \
    --bench-previous bench/timeline-previous.txt --bench-record "$work/timeline.txt" 2>"$work/boot.log" | sed 's/^/  /' \
    || { echo "  boot bench failed (see $work/boot.log)"; tail -5 "$work/boot.log" | sed 's/^/  /'; }
  echo "  recorded: $work/timeline.txt"
fi

if has arm64; then
  # The arm64 recipe beside the amd64 one, both built with the shared drover
  # cache (the arm64 kubelet is a 15-minute cross-compile once), then
  # BENCH_ARM64_BOOTS emulated boots (qemu-system-aarch64 under TCG).
  arm_recipe=${ARM64_RECIPE:-recipes/ecs-node-arm64.yaml}; arm=$(basename "$arm_recipe" .yaml); out="$work/out-arch"
  echo "== arm64: $arm_recipe beside $RECIPE"
  for r in "$RECIPE" "$arm_recipe"; do "$DROVER" -q build "$r" -o "$out" >/dev/null; done
  both() { printf "  %-40s %14s %14s\n" "$1" "$2" "$3"; }
  size() { mib "$(stat -c %s "$out/$1")"; }
  both "" "$name" "$arm"
  both "raw image" "$(size "$name.raw")" "$(size "$arm.raw")"
  both "qcow2 (compressed)" "$(size "$name.qcow2")" "$(size "$arm.qcow2")"
  for f in "root filesystem (erofs):.rootfs.size" "ESP:(.partitions[] | select(.name == \"esp\") | .size)"; do
    both "${f%%:*}" "$(mib "$(jq "${f#*:}" "$out/$name.manifest.json")")" "$(mib "$(jq "${f#*:}" "$out/$arm.manifest.json")")"
  done
  both "packages" "$(jq '.packages | length' "$out/$name.manifest.json")" "$(jq '.packages | length' "$out/$arm.manifest.json")"
  echo "== boot timeline: $arm under qemu-system-aarch64 (TCG), median of ${BENCH_ARM64_BOOTS:-1} (amd64's is above)"
  cache_args=(); [ -n "${BENCH_CACHE:-}" ] && cache_args=(--cache "$BENCH_CACHE")
  smoke "$out/$arm.raw" --bench "${BENCH_ARM64_BOOTS:-1}" --work "$work/boot-arm64" "${cache_args[@]}" 2>"$work/boot-arm64.log" \
    | sed 's/^/  /' || { echo "  arm64 boot bench failed (see $work/boot-arm64.log)"; tail -5 "$work/boot-arm64.log" | sed 's/^/  /'; }
fi

if has go; then
  echo "== go benchmarks (parsers, cache, verity, formats, rootfs)"
  go test -run '^$' -bench . -benchtime 3x ./image/debian ./image/fetch ./image/verity ./image/formats ./image/rootfs 2>&1 | grep -E '^Benchmark' | sed 's/^/  /' || true
fi

if has before; then
  # One table, one machine, one run: the recipe at BENCH_BEFORE built by that
  # tree's own drover (its lock, its code), and this tree's, each built twice
  # (the second is the warm rebuild), then both booted BENCH_BOOTS times by
  # this tree's harness, so the instrument is the same for both.
  ref=${BENCH_BEFORE:-2eeb194}
  boots=${BENCH_BOOTS:-3}
  bw="$work/before"; rm -rf "$bw"; mkdir -p "$bw"
  echo "== before/after: $RECIPE at $ref beside this tree ($(git rev-parse --short HEAD)), median of $boots boots each (load: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores)"
  git worktree add --detach "$bw/src" "$ref" >/dev/null 2>&1 || { echo "  git worktree add $ref failed"; exit 1; }
  trap 'git worktree remove --force "$bw/src" >/dev/null 2>&1 || true' EXIT
  (cd "$bw/src" && go build -trimpath -o "$bw/drover" ./cmd/drover)
  # warm SIDE DROVER SRC: builds twice into $bw/SIDE, prints the second's seconds
  warm() {
    (cd "$3" && "$2" -q build "$RECIPE" -o "$bw/$1" >/dev/null && t0=$(now) && "$2" -q build "$RECIPE" -o "$bw/$1" >/dev/null && secs "$t0" "$(now)")
  }
  w_before=$(warm old "$bw/drover" "$bw/src")
  w_after=$(warm new "$DROVER" "$PWD")
  for side in old new; do
    smoke "$bw/$side/$name.raw" --bench "$boots" --work "$bw/boot-$side" --bench-record "$bw/timeline-$side.txt" \
      >"$bw/boot-$side.out" 2>"$bw/boot-$side.log" || echo "  $side boot bench failed (see $bw/boot-$side.log)"
  done
  # t SIDE ROW COLUMN: a median from the recorded timeline (2: first boot, 3: reboot)
  t() { awk -v r="$2" -v c="$3" '!/^#/ { n=$NF; f=$(NF-1); sub(/[ \t]+[^ \t]+[ \t]+[^ \t]+$/, ""); if ($0 == r) print (c == 2 ? f : n) }' "$bw/timeline-$1.txt" 2>/dev/null; }
  sz() { mib "$(stat -c %s "$bw/$1/$name.$2")"; }
  line() { printf "  %-44s %14s %14s\n" "$1" "$2" "$3"; }
  line "" "$ref" "$(git rev-parse --short HEAD)"
  line "raw image" "$(sz old raw)" "$(sz new raw)"
  line "qcow2 (compressed)" "$(sz old qcow2)" "$(sz new qcow2)"
  line "root filesystem (erofs)" "$(mib "$(jq .rootfs.size "$bw/old/$name.manifest.json")")" "$(mib "$(jq .rootfs.size "$bw/new/$name.manifest.json")")"
  for r in "MiB read until Ready" "agent start" "node Ready" "node Ready net of config"; do
    line "$r, first boot / reboot" "$(t old "$r" 2) / $(t old "$r" 3)" "$(t new "$r" 2) / $(t new "$r" 3)"
  done
  line "warm rebuild (s)" "$w_before" "$w_after"
  [ -n "${peer_total:-}" ] && line "peer pipeline: mmdebstrap + mkfs.erofs + veritysetup (s)" "$peer_total" "$peer_total"
  echo "  timelines: $bw/timeline-old.txt $bw/timeline-new.txt (\"agent start\" is the agent's main, on its own clock)"
fi
