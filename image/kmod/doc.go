// Package kmod builds the kernel module index that depmod would write in the
// linux-image postinst, and the ordered module list the initrd loads.
//
// The builder never runs maintainer scripts or host tools on the image, so
// the files libkmod and modprobe read (modules.dep, modules.alias and their
// .bin tries, modules.symbols, modules.softdep, modules.builtin.bin, …) are
// produced here from the module files themselves. Build follows depmod's
// algorithm, tie-breaks included, so that its output is byte-identical to
// what trixie's depmod writes for the same tree and the image does not
// depend on which of the two produced it; LoadOrder follows libkmod's probe
// order, so the initrd inserts modules exactly as modprobe would.
package kmod
