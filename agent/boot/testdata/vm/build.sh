#!/bin/bash
# Builds a test disk + initrd for drover-init under QEMU.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../../../.." && pwd)
cd "${VMDIR:?set VMDIR to a work directory holding k/ (an extracted linux-image .deb, depmod run) }"
KV=${KV:-6.1.0-57-amd64}
rm -rf rootfs initrd disk.raw root.erofs verity.img initrd.cpio
mkdir -p rootfs/usr/{sbin,bin,lib/x86_64-linux-gnu,lib/systemd} rootfs/lib64 rootfs/{dev,proc,sys,run,var,etc,tmp}
ln -s usr/lib rootfs/lib; ln -s usr/sbin rootfs/sbin; ln -s usr/bin rootfs/bin
cp /usr/sbin/mke2fs rootfs/usr/sbin/
for l in $(ldd /usr/sbin/mke2fs | grep -o '/lib[^ ]*'); do cp -L $l rootfs/usr/lib/x86_64-linux-gnu/ 2>/dev/null || true; done
cp -L /lib64/ld-linux-x86-64.so.2 rootfs/lib64/
cp /etc/mke2fs.conf rootfs/etc/
: > rootfs/etc/machine-id
echo "drover-test" > rootfs/etc/hostname
(cd "$REPO" && CGO_ENABLED=0 go build -o "$VMDIR/rootfs/usr/lib/systemd/systemd" ./agent/boot/testdata/vm/probe)
head -c 1048576 /dev/urandom > rootfs/payload.bin
mkfs.erofs --quiet root.erofs rootfs
truncate -s 0 verity.img
veritysetup format root.erofs verity.img > verity.out
ROOTHASH=$(awk -F: '/Root hash/{gsub(/[ \t]/,"",$2); print $2}' verity.out)
SALT=$(awk -F: '/^Salt/{gsub(/[ \t]/,"",$2); print $2}' verity.out)
BLOCKS=$(awk -F: '/Data blocks/{gsub(/[ \t]/,"",$2); print $2}' verity.out)
RU=$(echo $ROOTHASH | cut -c1-32 | sed -E 's/(.{8})(.{4})(.{4})(.{4})(.{12})/\1-\2-\3-\4-\5/')
VU=$(echo $ROOTHASH | cut -c33-64 | sed -E 's/(.{8})(.{4})(.{4})(.{4})(.{12})/\1-\2-\3-\4-\5/')
RS=$(( ($(stat -c %s root.erofs) + 1048575) / 1048576 ))
VS=$(( ($(stat -c %s verity.img) + 1048575) / 1048576 ))
IMG=$(( 1 + 1 + RS + VS + 1 ))
truncate -s ${IMG}M disk.raw
sfdisk -q disk.raw <<SF
label: gpt
start=2048, size=1MiB, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name=esp
size=${RS}MiB, type=4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709, uuid=$RU, name=root
size=${VS}MiB, type=2C7357ED-EBD2-46D9-AEC1-23D437EC2BF5, uuid=$VU, name=root-verity
SF
S2=$(sfdisk --json disk.raw | python3 -c 'import json,sys; p=json.load(sys.stdin)["partitiontable"]["partitions"]; print(p[1]["start"], p[2]["start"])')
set -- $S2
dd if=root.erofs of=disk.raw bs=512 seek=$1 conv=notrunc status=none
dd if=verity.img of=disk.raw bs=512 seek=$2 conv=notrunc status=none
truncate -s 512M disk.raw
# initrd
MODS="kernel/drivers/virtio/virtio_ring.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_pci_modern_dev.ko kernel/drivers/virtio/virtio_pci_legacy_dev.ko kernel/drivers/virtio/virtio_pci.ko kernel/drivers/block/virtio_blk.ko kernel/crypto/crct10dif_common.ko kernel/lib/crc64.ko kernel/crypto/crc64_rocksoft_generic.ko kernel/lib/crc64-rocksoft.ko kernel/arch/x86/crypto/crct10dif-pclmul.ko kernel/crypto/crct10dif_generic.ko kernel/lib/crc-t10dif.ko kernel/block/t10-pi.ko kernel/drivers/nvme/host/nvme-core.ko kernel/drivers/nvme/host/nvme.ko kernel/lib/reed_solomon/reed_solomon.ko kernel/drivers/md/dm-mod.ko kernel/drivers/md/dm-bufio.ko kernel/drivers/md/dm-verity.ko kernel/arch/x86/crypto/crc32c-intel.ko kernel/crypto/crc32c_generic.ko kernel/lib/libcrc32c.ko kernel/fs/erofs/erofs.ko kernel/fs/overlayfs/overlay.ko kernel/fs/jbd2/jbd2.ko kernel/fs/mbcache.ko kernel/lib/crc16.ko kernel/fs/ext4/ext4.ko"
mkdir -p initrd/etc initrd/lib/modules/$KV
JSONMODS=""
for m in $MODS; do
  mkdir -p initrd/lib/modules/$KV/$(dirname $m)
  # half of them compressed, to exercise both paths
  if [[ $m == *fs/* || $m == *md/* ]]; then xz --check=crc32 -c k/lib/modules/$KV/$m > initrd/lib/modules/$KV/$m.xz; JSONMODS="$JSONMODS\"$m.xz\","; else cp k/lib/modules/$KV/$m initrd/lib/modules/$KV/$m; JSONMODS="$JSONMODS\"$m\","; fi
done
cat > initrd/etc/drover-init.json <<J
{"kernel":"$KV","modules":[${JSONMODS%,}],"rootHash":"$ROOTHASH","verity":{"dataBlocks":$BLOCKS,"dataBlockSize":4096,"hashBlockSize":4096,"hashStartBlock":1,"salt":"$SALT","algorithm":"sha256"},"rootPartUUID":"$RU","verityPartUUID":"$VU","varPartType":"4d21b016-b534-45c2-a9fb-5c16e091fd2d","varLabel":"var","cmdline":"console=ttyS0 drover.roothash=$ROOTHASH panic=-1"}
J
(cd "$REPO" && CGO_ENABLED=0 go build -trimpath -o "$VMDIR/initrd/init" ./cmd/drover-init)
(cd initrd && find . | cpio -o -H newc --quiet > ../initrd.cpio)
echo "$ROOTHASH" > roothash
initrd/init --plan initrd/etc/drover-init.json | sed -n 1,4p
ls -la disk.raw initrd.cpio
