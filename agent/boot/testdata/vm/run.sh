#!/bin/bash
# run.sh [virtio|nvme] [extra cmdline]
cd "${VMDIR:?set VMDIR}"
BUS=${1:-virtio}; shift || true
if [ "$BUS" = nvme ]; then DRIVE="-drive file=disk.raw,if=none,id=d0,format=raw -device nvme,drive=d0,serial=drover0"; else DRIVE="-drive file=disk.raw,if=virtio,format=raw"; fi
timeout ${TMO:-300} qemu-system-x86_64 ${ACCEL:--enable-kvm -cpu host} -m 1024 -nographic -no-reboot \
  -kernel k/boot/vmlinuz-${KV:-6.1.0-57-amd64} -initrd initrd.cpio \
  -append "console=ttyS0 drover.roothash=${RH:-$(cat roothash)} panic=-1 $*" $DRIVE
