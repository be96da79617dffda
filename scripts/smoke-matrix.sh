#!/usr/bin/env bash
# make smoke-matrix: builds every per-minor ecs-node recipe and smoke-tests
# each against a local control plane of its own minor, plus one allowed
# skew case (a kubelet one minor older than the API server), then prints a
# table. Every cell comes from what the run produced, never from this
# script's inputs:
#   kubelet, containerd, api server  the Node's status.nodeInfo and the API
#                                    server's /version, as `drover smoke
#                                    --json` recorded them (check "Node
#                                    reports the image's kubelet and
#                                    containerd")
#   runtime                          the OCI runtime package the image's
#                                    manifest records (the build's record)
#   Ready, pod ran                   the smoke checks' verdicts
#   time                             the smoke run's wall time
# A cell the run did not produce is "-". Exits 1 if any case failed.
# MATRIX="ecs-node-1.34.yaml:v1.34.4 …" overrides the cases (recipe:api server
# version; an empty version means the recipe's own kubelet). SMOKE_FLAGS are
# passed to every drover smoke (e.g. "--cache /tmp/drover-cluster-cache" to
# reuse control-plane binaries built elsewhere).
set -uo pipefail
cd "$(dirname "$0")/.." || exit
out=${OUT:-out}/matrix
bin=${BIN:-bin}
mkdir -p "$out"
cases=${MATRIX:-"ecs-node-1.34.yaml: ecs-node-1.35.yaml: ecs-node-1.36.yaml: ecs-node.yaml: ecs-node-1.36.yaml:v1.37.2"}

rows=() failed=0 built=" "
for c in $cases; do
  recipe=recipes/${c%%:*} server=${c#*:}
  name=$(basename "$recipe" .yaml)
  tag=$name${server:+-api-$server}
  dir=$out/$name
  # A recipe in two cases (the skew) is built once.
  if [[ $built == *" $recipe "* ]]; then
    echo "== $tag: $recipe built above" >&2
  elif echo "== $tag: drover build $recipe" >&2 &&
    ! "$bin/drover" build "$recipe" -o "$dir" >"$out/$tag.build.log" 2>&1; then
    echo "   build failed: $out/$tag.build.log" >&2
    rows+=("$tag|-|-|-|-|-|-|-|build failed")
    failed=1
    continue
  fi
  built+="$recipe "
  image=$dir/$name.raw
  manifest=${image%.raw}.manifest.json
  echo "== $tag: drover smoke $image ${server:+--kubernetes-version $server}" >&2
  start=$(date +%s)
  # shellcheck disable=SC2086 # SMOKE_FLAGS is a list of flags
  "$bin/drover" smoke "$image" ${SMOKE_FLAGS:-} --json --work "$out/$tag.smoke" --junit "$out/$tag.xml" \
    ${server:+--kubernetes-version "$server"} >"$out/$tag.json" 2>"$out/$tag.smoke.log"
  rc=$?
  took=$(( $(date +%s) - start ))
  [ "$rc" -eq 0 ] || failed=1
  check() { local v; v=$(jq -r --arg n "$1" '[.checks[]? | select(.name == $n)][0] | if . == null then "-" elif .passed then "yes" else "NO" end' "$out/$tag.json" 2>/dev/null); echo "${v:--}"; }
  field() { jq -r --arg k "$1" '[.checks[]? | select(.name == "Node reports the image'"'"'s kubelet and containerd")][0].detail // "" | capture("(^| )" + $k + "=(?<v>[^ ]+)").v // "-"' "$out/$tag.json" 2>/dev/null || echo -; }
  kubelet=$(field kubeletVersion) runtime_v=$(field containerRuntimeVersion) api=$(field apiServer)
  kubelet=${kubelet:--} runtime_v=${runtime_v:--} api=${api:--} # no report at all: smoke failed before it
  oci=$(jq -r '[.packages[]? | select(.name == "runc" or .name == "crun")][0] | if . == null then "-" else .name + " " + .version end' "$manifest" 2>/dev/null || echo -)
  minor=-
  [[ $kubelet =~ ^v1\.([0-9]+)\. ]] && minor=1.${BASH_REMATCH[1]}
  verdict=ok
  [ "$rc" -eq 0 ] || verdict="FAILED ($(jq -r '[.checks[]? | select(.passed | not) | .name] | join("; ")' "$out/$tag.json" 2>/dev/null || echo "no report: see $out/$tag.smoke.log"))"
  rows+=("$tag|$minor|$kubelet|$api|$runtime_v|$oci|$(check "node joins and is Ready")|$(check "pod from the local registry runs to completion")|${took}s $verdict")
done

echo
echo "smoke matrix, $(date -u +%Y-%m-%d)"
printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' case minor kubelet "api server" containerd runtime Ready "pod ran" time
echo '|---|---|---|---|---|---|---|---|---|'
for r in "${rows[@]}"; do
  IFS='|' read -r a b c d e f g h i <<<"$r"
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$a" "$b" "$c" "$d" "$e" "$f" "$g" "$h" "$i"
done
exit "$failed"
