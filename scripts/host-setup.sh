#!/usr/bin/env bash
# Installs the Debian packages drover's tests and smoke harness need on the
# test host (building an image needs none of them: `make image` runs with Go
# alone): the independent checkers (veritysetup, fsck.erofs, fsck.fat,
# sfdisk, qemu-img, openssl for the provenance signature, objdump for UKIs,
# sbverify and efitools for Secure Boot signatures and key enrolment files),
# QEMU + OVMF for boot tests, mmdebstrap for the
# benchmark's peer pipeline. Idempotent; run as root (CI does).
set -euo pipefail
pkgs=(ca-certificates cryptsetup-bin erofs-utils dosfstools fdisk qemu-utils
      qemu-system-x86 ovmf mmdebstrap e2fsprogs zstd xz-utils cpio iproute2
      debian-archive-keyring util-linux mount containerd runc python3 kmod jq shellcheck vagrant ruby openssl
      binutils sbsigntool efitools
      qemu-system-arm qemu-efi-aarch64 file)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "host-setup: all ${#pkgs[@]} packages present"
else
  if [ "$(id -u)" != 0 ]; then
    echo "host-setup: missing ${missing[*]}; run as root: sudo $0" >&2
    exit 1
  fi
  echo "host-setup: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# trixie's erofs-utils (1.8: LZ4 and zstd) beside bookworm's 1.5, which
# cannot decompress the zstd roots drover writes: fsck.erofs-trixie,
# dump.erofs-trixie and mkfs.erofs-trixie run trixie's binaries with
# trixie's own loader and libraries from /opt/drover-host, so the host's
# libc is not touched. Fetched by apt from the suite this host's mirror
# serves (read from its sources), verified with the archive's trixie key.
erofs_root=/opt/drover-host/erofs-utils-trixie
if ! /usr/local/bin/fsck.erofs-trixie --help >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    echo "host-setup: trixie's erofs-utils missing; run as root: sudo $0" >&2
    exit 1
  fi
  mirror=$(awk '/^URIs:/{print $2; exit} /^deb /{print $2; exit}' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | head -1)
  [ -n "$mirror" ] || { echo "host-setup: no Debian mirror in apt's sources" >&2; exit 1; }
  work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/lists/partial" "$work/debs"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main" >"$work/trixie.list"
  aptopts=(-o Dir::Etc::SourceList="$work/trixie.list" -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists="$work/lists"
           -o Dir::Cache::Archives="$work/debs" -o APT::Get::List-Cleanup=0 -o APT::Sandbox::User=root)
  echo "host-setup: fetching trixie's erofs-utils into $erofs_root"
  apt-get "${aptopts[@]}" update -qq
  # erofs-utils and the libraries its binaries load (trixie's Depends, and
  # theirs), libc's loader among them.
  (cd "$work/debs" && apt-get "${aptopts[@]}" download -qq erofs-utils libc6 libdeflate0 liblz4-1 liblzma5 libselinux1 \
    libpcre2-8-0 libuuid1 libxxhash0 libzstd1 zlib1g)
  rm -rf "$erofs_root.new"; mkdir -p "$erofs_root.new"
  for d in "$work"/debs/*.deb; do dpkg-deb -x "$d" "$erofs_root.new"; done
  rm -rf "$erofs_root"; mv "$erofs_root.new" "$erofs_root"
  for tool in fsck.erofs dump.erofs mkfs.erofs; do
    cat >"/usr/local/bin/$tool-trixie" <<WRAP
#!/bin/sh
# trixie's $tool (erofs-utils 1.8) with trixie's loader and libraries: scripts/host-setup.sh
exec $erofs_root/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 --library-path $erofs_root/usr/lib/x86_64-linux-gnu $erofs_root/usr/bin/$tool "\$@"
WRAP
    chmod 0755 "/usr/local/bin/$tool-trixie"
  done
fi
# The help text is read whole first: grep -q would stop reading at the first
# match, and pipefail would count the tool's SIGPIPE as a failure.
help=$(/usr/local/bin/mkfs.erofs-trixie --help 2>&1 || true)
grep -q zstd <<<"$help" || { echo "host-setup: $erofs_root's mkfs.erofs lists no zstd" >&2; exit 1; }
