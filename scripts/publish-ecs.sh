#!/usr/bin/env bash
# publish-ecs.sh uploads a drover disk image to OSS, imports it as an ECS
# custom image (UEFI boot, declaring NVMe support and the hardened metadata
# mode it needs), waits for it, tags it with the manifest's root hash and
# build ID, and optionally copies it to other regions.
#
# stdout carries only results, for pipelines: the ImageId on the first line,
# then "REGION IMAGEID" for each --copy-to region. With --dry-run, stdout
# carries every command it would run instead, one per line, quoted so that it
# can be pasted into a shell; commands that depend on an earlier answer use the
# placeholder image ID DRY-RUN-IMAGE-ID (DRY-RUN-IMAGE-ID-<region> for copies),
# and a wait shows one DescribeImages call where a real run repeats it.
# Logs and progress go to stderr. Credentials come from the aliyun CLI and
# ossutil configuration; this script never reads or prints them.
#
# See docs/ecs.md for the RAM permissions and the launch template that follows.
set -euo pipefail

prog=publish-ecs
usage() {
	# printf, not cat: the script needs nothing beyond bash, jq and sleep.
	printf '%s\n' 'usage: scripts/publish-ecs.sh --image out/ecs-node.qcow2 --region REGION --bucket BUCKET [options]

  --image FILE          disk image (.qcow2, .raw or .vhd); its manifest is the file
                        stem + .manifest.json (out/ecs-node.manifest.json)
  --region REGION       region of the bucket and of the imported image (cn-hangzhou)
  --bucket NAME         OSS bucket in that region
  --object-prefix P     object key prefix (default drover/)
  --image-name NAME     ECS image name (default <name>-<version> from the manifest)
  --copy-to R1,R2       copy the image to these regions too (CopyImage), and wait
  --architecture A      x86_64 or arm64 (default: the arch in the manifest, amd64 being
                        x86_64; an image of the other architecture is refused)
  --platform P          ECS Platform (default Debian)
  --boot-mode UEFI      the only mode drover images boot with
  --secure-boot         the image was built with --secure-boot-key: check that the
                        manifest lists systemd-boot and the UKI as signed; tag the image
                        drover:secure-boot=signed; launch it on an instance family
                        with UEFI Secure Boot (security-enhanced families such as
                        g7t, c7t, r7t: see docs/ecs.md) whose db holds your certificate
  --wait-timeout T      give up waiting for an image after T (seconds, or Ns/Nm/Nh;
                        default 1h)
  --poll-interval S     seconds between DescribeImages calls (default 15)
  --dry-run             print the commands, run nothing (needs neither aliyun nor ossutil)'
}

log() { printf '%s: %s\n' "$prog" "$*" >&2; }
die() {
	log "$*"
	exit 1
}
usage_error() {
	log "$*"
	usage >&2
	exit 2
}

# quote renders one argument so that a shell reads it back unchanged; plain
# words stay bare so the printed commands remain readable.
quote() {
	if [[ $1 =~ ^[A-Za-z0-9_./:=,@+%-]+$ ]]; then
		printf '%s' "$1"
	else
		local sq="'\\''"
		printf "'%s'" "${1//\'/$sq}"
	fi
}
cmdline() {
	local out="" a
	for a in "$@"; do
		out+="${out:+ }$(quote "$a")"
	done
	printf '%s' "$out"
}

image="" region="" bucket="" prefix="drover/" image_name="" copy_to="" arch=""
platform="Debian" boot_mode="UEFI" wait_timeout="1h" poll_interval=15 dry_run=0 dry_copy_region="" quiet=0 secure_boot=0
while [ $# -gt 0 ]; do
	opt=$1
	case $opt in
	--dry-run) dry_run=1; shift; continue ;;
	--secure-boot) secure_boot=1; shift; continue ;;
	-h | --help) usage; exit 0 ;;
	--*=*) set -- "${opt%%=*}" "${opt#*=}" "${@:2}"; continue ;;
	--image | --region | --bucket | --object-prefix | --image-name | --copy-to | --architecture | \
		--platform | --boot-mode | --wait-timeout | --poll-interval)
		[ $# -ge 2 ] || usage_error "$opt needs a value"
		val=$2
		shift 2
		;;
	*) usage_error "unknown argument $(quote "$opt")" ;;
	esac
	case $opt in
	--image) image=$val ;;
	--region) region=$val ;;
	--bucket) bucket=$val ;;
	--object-prefix) prefix=$val ;;
	--image-name) image_name=$val ;;
	--copy-to) copy_to=$val ;;
	--architecture) arch=$val ;;
	--platform) platform=$val ;;
	--boot-mode) boot_mode=$val ;;
	--wait-timeout) wait_timeout=$val ;;
	--poll-interval) poll_interval=$val ;;
	esac
done

# Validation: everything is checked before the first call so that a typo
# never leaves a half-published image behind.
[ -n "$image" ] || usage_error "--image is required (e.g. --image out/ecs-node.qcow2)"
[ -n "$region" ] || usage_error "--region is required (e.g. --region cn-hangzhou)"
[ -n "$bucket" ] || usage_error "--bucket is required: an OSS bucket in the image's region"
region_re='^[a-z]{2,}(-[a-z0-9]+)+$'
[[ $region =~ $region_re ]] || usage_error "--region $(quote "$region"): not a region ID like cn-hangzhou"
[[ $bucket =~ ^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$ ]] ||
	usage_error "--bucket $(quote "$bucket"): OSS bucket names are 3-63 lowercase letters, digits and hyphens"
[[ $prefix =~ ^([A-Za-z0-9._-]+/)*[A-Za-z0-9._-]*$ ]] ||
	usage_error "--object-prefix $(quote "$prefix"): use letters, digits, . _ - and / (no leading /)"
[ -z "$prefix" ] || [[ $prefix == */ ]] || prefix+=/
case $arch in "" | x86_64 | arm64) ;; *) usage_error "--architecture $(quote "$arch"): want x86_64 or arm64" ;; esac
[[ $platform =~ ^[A-Za-z][A-Za-z0-9\ ]*$ ]] || usage_error "--platform $(quote "$platform"): want an ECS Platform such as Debian"
[ "$boot_mode" = UEFI ] || usage_error "--boot-mode $(quote "$boot_mode"): drover images boot by UEFI only"
[[ $poll_interval =~ ^[1-9][0-9]*$|^0$ ]] || usage_error "--poll-interval $(quote "$poll_interval"): want whole seconds"
[[ $wait_timeout =~ ^([0-9]+)([smh]?)$ ]] || usage_error "--wait-timeout $(quote "$wait_timeout"): want seconds, or Ns/Nm/Nh"
timeout_s=$((10#${BASH_REMATCH[1]})) # 10#: "08" is eight, not bad octal
case ${BASH_REMATCH[2]} in
m) timeout_s=$((timeout_s * 60)) ;;
h) timeout_s=$((timeout_s * 3600)) ;;
esac
copies=()
if [ -n "$copy_to" ]; then
	IFS=, read -r -a copies <<<"$copy_to"
	for r in "${copies[@]}"; do
		[[ $r =~ $region_re ]] || usage_error "--copy-to $(quote "$r"): not a region ID like cn-shanghai"
		[ "$r" != "$region" ] || usage_error "--copy-to $r: that is the import region itself"
	done
fi

case $image in
*.qcow2) format=QCOW2 ;;
*.raw | *.img) format=RAW ;;
*.vhd) format=VHD ;;
*) usage_error "--image $(quote "$image"): want a .qcow2, .raw or .vhd file (ECS ImportImage formats)" ;;
esac
[ -f "$image" ] || die "image $(quote "$image") not found: build it first (make image)"
manifest="${image%.*}.manifest.json"
[ -f "$manifest" ] || die "manifest $(quote "$manifest") not found beside the image: publish the files drover build wrote together"

command -v jq >/dev/null 2>&1 || die "jq not found: install it (apt-get install jq); it reads the manifest and the API answers"
if [ "$dry_run" = 0 ]; then
	missing=()
	command -v aliyun >/dev/null 2>&1 ||
		missing+=("aliyun CLI not found: install it from https://github.com/aliyun/aliyun-cli/releases and run \`aliyun configure\`")
	command -v ossutil >/dev/null 2>&1 ||
		missing+=("ossutil not found: install it from https://www.alibabacloud.com/help/en/oss/developer-reference/ossutil and run \`ossutil config\`")
	if [ ${#missing[@]} -gt 0 ]; then
		for m in "${missing[@]}"; do log "$m"; done
		die "(or pass --dry-run to print the commands without running them)"
	fi
fi

field() {
	local v
	v=$(jq -er --arg f "$1" '.[$f] | select(. != null and . != "") | tostring' "$manifest") ||
		die "manifest $(quote "$manifest"): field \"$1\" missing or empty: is this a drover manifest?"
	printf '%s' "$v"
}
m_name=$(field name)
m_version=$(field version)
m_root=$(field rootHash)
m_build=$(field buildID)
m_disk=$(field diskSize)
[[ $m_root =~ ^[0-9a-f]{32,128}$ ]] || die "manifest $(quote "$manifest"): rootHash $(quote "$m_root") is not hex"
[[ $m_build =~ ^[0-9A-Za-z._-]{1,128}$ ]] || die "manifest $(quote "$manifest"): buildID $(quote "$m_build") is malformed"
[[ $m_disk =~ ^[0-9]+$ ]] || die "manifest $(quote "$manifest"): diskSize $(quote "$m_disk") is not a byte count"

# The manifest's arch is the image's (Debian names); a manifest written
# before drover built arm64 has none and is amd64. ImportImage would take
# any Architecture, and an instance of the wrong one never boots.
m_arch=$(jq -r '.arch // "amd64"' "$manifest")
case $m_arch in
amd64) image_arch=x86_64 loader=EFI/BOOT/BOOTX64.EFI ;;
arm64) image_arch=arm64 loader=EFI/BOOT/BOOTAA64.EFI ;;
*) die "manifest $(quote "$manifest"): arch $(quote "$m_arch") is neither amd64 nor arm64" ;;
esac
[ -n "$arch" ] || arch=$image_arch
[ "$arch" = "$image_arch" ] ||
	usage_error "--architecture $arch: $(quote "$manifest") is an $m_arch image ($image_arch); drop --architecture or publish the $arch build"

# DiskImageSize is the image's size in whole GiB, 1-2048; the instance's
# system disk (the launch template's, at least 20 GiB) may be larger, and the
# node's var partition grows into the rest.
gib=$(((m_disk + (1 << 30) - 1) >> 30))
[ "$gib" -ge 1 ] || gib=1
[ "$gib" -le 2048 ] || die "image disk is $gib GiB: ECS ImportImage takes a DiskImageSize of at most 2048 GiB"

secure_tags=()
if [ "$secure_boot" = 1 ]; then
	# Both boot binaries must be signed, or firmware with Secure Boot on
	# refuses the image (systemd-boot first, then the UKI).
	for f in "$loader" EFI/Linux/drover.efi; do
		jq -e --arg p "$f" '(.esp // [])[] | select(.path == $p) | .signedBy | select(. != null and . != "")' "$manifest" >/dev/null ||
			die "--secure-boot: $f is not signed in $(quote "$manifest"): build with drover build --secure-boot-key KEY --secure-boot-cert CERT"
	done
	secure_tags=(--Tag.5.Key drover:secure-boot --Tag.5.Value signed)
fi

[ -n "$image_name" ] || image_name="$m_name-$m_version"
[[ $image_name =~ ^[A-Za-z][A-Za-z0-9.:_-]{1,127}$ && ! $image_name =~ ^(aliyun|acs:) ]] ||
	usage_error "image name $(quote "$image_name"): ECS wants 2-128 letters, digits, . : _ -, starting with a letter (not aliyun/acs:); pass --image-name"
ext=${image##*.}
object="$prefix$image_name.$ext"
description="drover $m_name $m_version rootHash=$m_root buildID=$m_build"

[ "$dry_run" = 0 ] || prog="publish-ecs (dry run)"
exec 3>&1 # the real stdout: command lines (dry run) and results

# run executes a command, or in a dry run prints it. aliyun prints its answer
# as JSON on stdout; in a dry run, canned answers keep the flow identical.
run() {
	if [ "$dry_run" = 1 ]; then
		cmdline "$@" >&3
		printf '\n' >&3
		case "$1 ${2:-} ${3:-}" in
		"aliyun ecs ImportImage") printf '{"ImageId":"DRY-RUN-IMAGE-ID"}\n' ;;
		"aliyun ecs CopyImage") printf '{"ImageId":"DRY-RUN-IMAGE-ID-%s"}\n' "$dry_copy_region" ;;
		"aliyun ecs DescribeImages") printf '{"Images":{"Image":[{"Status":"Available","Progress":"100%%"}]}}\n' ;;
		esac
		return 0
	fi
	[ "$quiet" = 1 ] || log "+ $(cmdline "$@")"
	"$@"
}

# api runs one aliyun call and names it when it fails; the CLI has already
# explained the error on stderr.
api() {
	local what=$1 out
	if ! out=$(run aliyun ecs "$@"); then
		die "aliyun ecs $what failed: see the error above (RAM permissions: docs/ecs.md#permissions)"
	fi
	printf '%s' "$out"
}

# wait_image polls DescribeImages until the image is Available.
wait_image() {
	local r=$1 id=$2 start=$SECONDS out status progress
	while :; do
		out=$(api DescribeImages --region "$r" --RegionId "$r" --ImageId "$id" \
			--Status Creating,Waiting,Available,UnAvailable,CreateFailed)
		read -r status progress < <(jq -r '((.Images.Image // [])[0] // {}) | "\(.Status // "Pending") \(.Progress // "-")"' <<<"$out") ||
			die "DescribeImages $id: unreadable answer: $out"
		case $status in
		Available)
			quiet=0
			log "$id in $r: Available"
			return 0
			;;
		Creating | Waiting | Pending) ;;
		*) die "image $id in $r is $status: see its import task in the ECS console (Images > Import Image tasks) and the image's format and size" ;;
		esac
		local waited=$((SECONDS - start))
		[ "$waited" -lt "$timeout_s" ] ||
			die "image $id in $r still $status when --wait-timeout $wait_timeout ran out: it may still finish; check with aliyun ecs DescribeImages --RegionId $r --ImageId $id"
		log "$id in $r: $status $progress (${waited}s)"
		quiet=1 # one "+ DescribeImages" line per wait, not one per poll
		sleep "$poll_interval"
	done
}

tag_image() {
	local r=$1 id=$2
	api TagResources --region "$r" --RegionId "$r" --ResourceType image --ResourceId.1 "$id" \
		--Tag.1.Key drover:root-hash --Tag.1.Value "$m_root" \
		--Tag.2.Key drover:build-id --Tag.2.Value "$m_build" \
		--Tag.3.Key drover:name --Tag.3.Value "$m_name" \
		--Tag.4.Key drover:version --Tag.4.Value "$m_version" "${secure_tags[@]}" >/dev/null
}

image_id_of() {
	local id
	id=$(jq -r '.ImageId // empty' <<<"$2") || true
	[[ $id =~ ^[A-Za-z0-9_-]+$ ]] || die "$1 answered without an ImageId: $2"
	printf '%s' "$id"
}

log "publishing $image_name ($format, $arch, $gib GiB, root hash $m_root) to oss://$bucket/$object in $region"
if [ "$dry_run" = 1 ]; then
	run ossutil cp -f "$image" "oss://$bucket/$object"
else
	run ossutil cp -f "$image" "oss://$bucket/$object" >&2 ||
		die "uploading $image to oss://$bucket/$object failed: check ossutil's error above and that the bucket is in $region"
fi

# Features: the initrd drives NVMe system disks, and the agent uses the
# hardened metadata mode (token first), so instances may require tokens. The
# CLI's API metadata declares Features as an untyped struct: it takes
# Features.* only with --force.
resp=$(api ImportImage --region "$region" --RegionId "$region" --ImageName "$image_name" \
	--Architecture "$arch" --OSType linux --Platform "$platform" --BootMode "$boot_mode" \
	--DiskDeviceMapping.1.OSSBucket "$bucket" --DiskDeviceMapping.1.OSSObject "$object" \
	--DiskDeviceMapping.1.Format "$format" --DiskDeviceMapping.1.DiskImageSize "$gib" \
	--Features.NvmeSupport supported --Features.ImdsSupport v2 --force \
	--Description "$description")
image_id=$(image_id_of ImportImage "$resp")
log "importing as $image_id"
wait_image "$region" "$image_id"
tag_image "$region" "$image_id"

results=("$image_id")
for r in "${copies[@]}"; do
	dry_copy_region=$r
	resp=$(api CopyImage --region "$region" --RegionId "$region" --ImageId "$image_id" \
		--DestinationRegionId "$r" --DestinationImageName "$image_name" --DestinationDescription "$description")
	copy_id=$(image_id_of CopyImage "$resp")
	log "copying to $r as $copy_id"
	wait_image "$r" "$copy_id"
	tag_image "$r" "$copy_id"
	results+=("$r $copy_id")
done

if [ "$dry_run" = 0 ]; then
	printf '%s\n' "${results[@]}" >&3
fi
log "done: $image_name is $image_id in $region"
