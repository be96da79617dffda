#!/usr/bin/env bash
# vagrant-provision.sh provisions the drover dev box (see the Vagrantfile): the
# host tools from scripts/host-setup.sh, git and make, and the Go toolchain in
# /usr/local/go (Debian 12 ships no Go >= 1.26), on PATH for every login shell.
# Runs as root; safe to run again (`vagrant provision`).
#
# Go is the official tarball, checked against a pinned sha256. For another
# version or architecture set GO_VERSION and GO_SHA256 (the sha256 published at
# https://go.dev/dl/) together.
set -euo pipefail

prog=vagrant-provision
die() {
	printf '%s: %s\n' "$prog" "$*" >&2
	exit 1
}

repo=${DROVER_REPO:-/home/vagrant/drover}
go_version=${GO_VERSION:-1.26.8}
case $(uname -m) in
x86_64) go_arch=amd64 ;;
aarch64 | arm64) go_arch=arm64 ;;
*) die "unsupported machine $(uname -m): drover's dev box is amd64 or arm64" ;;
esac
go_tarball="go$go_version.linux-$go_arch.tar.gz"

# The pin is checked before anything else so that a wrong setting fails at
# once, not after the package installs.
go_sha256=${GO_SHA256:-}
if [ -z "$go_sha256" ]; then
	case $go_tarball in
	go1.26.8.linux-amd64.tar.gz) go_sha256=d0f743b33e8d8945e6b1f432edd15785c70507121d6e2a723b21285eddf8b57b ;;
	*) die "no pinned sha256 for $go_tarball: set GO_SHA256 to the sha256 published at https://go.dev/dl/ (vagrant provision passes it through)" ;;
	esac
fi
[[ $go_sha256 =~ ^[0-9a-f]{64}$ ]] || die "GO_SHA256 $go_sha256: want 64 lowercase hex digits"
[ "$(id -u)" = 0 ] || die "run as root (Vagrant's shell provisioner does: privileged: true)"
[ -f "$repo/scripts/host-setup.sh" ] ||
	die "$repo/scripts/host-setup.sh not found: is the repository synced to $repo? (vagrant rsync)"

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
bash "$repo/scripts/host-setup.sh"
# Beyond the host tools: what `make` and this script use.
apt-get install -y -qq --no-install-recommends git make curl ca-certificates

if [ -x /usr/local/go/bin/go ] && [ "$(/usr/local/go/bin/go env GOVERSION)" = "go$go_version" ]; then
	echo "$prog: go$go_version already in /usr/local/go"
else
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	echo "$prog: fetching $go_tarball"
	curl -fsSL --retry 3 -o "$tmp/$go_tarball" "https://go.dev/dl/$go_tarball" ||
		die "downloading https://go.dev/dl/$go_tarball failed: check the box's network access"
	echo "$go_sha256  $tmp/$go_tarball" | sha256sum -c --quiet - ||
		die "$go_tarball does not match sha256 $go_sha256: not installing it"
	rm -rf /usr/local/go
	tar -C /usr/local -xzf "$tmp/$go_tarball"
fi

{
	echo '# drover dev box (scripts/vagrant-provision.sh)'
	# shellcheck disable=SC2016 # expanded by the login shell, not here
	echo 'export PATH=/usr/local/go/bin:$HOME/go/bin:$PATH'
	echo 'export GOTOOLCHAIN=local'
	if [ -n "${DROVER_MIRROR:-}" ]; then
		printf 'export DROVER_MIRROR=%q\n' "$DROVER_MIRROR"
	fi
} >/etc/profile.d/drover.sh
# sudo resets PATH: `sudo make test` must still find go.
printf 'Defaults secure_path="/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"\n' \
	>/etc/sudoers.d/drover-go
chmod 0440 /etc/sudoers.d/drover-go

if getent group kvm >/dev/null && id vagrant >/dev/null 2>&1; then
	usermod -aG kvm vagrant
fi
if [ -e /dev/kvm ]; then
	echo "$prog: /dev/kvm present: QEMU tests use KVM"
else
	echo "$prog: no /dev/kvm: QEMU tests fall back to emulation (slow); enable nested virtualisation on the host" >&2
fi
echo "$prog: ready: vagrant ssh, then cd drover && make test"
