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
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "host-setup: missing ${missing[*]}; run as root: sudo $0" >&2
  exit 1
fi
echo "host-setup: installing ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
