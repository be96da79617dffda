package finalize

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"

	"github.com/drover-os/drover/image/tree"
)

// staticNodes writes, at build time, what kmod-static-nodes.service writes
// at every boot: the device nodes of modules that are loaded on first open
// (/dev/fuse, /dev/net/tun, /dev/loop-control, …), as a tmpfiles.d file
// that systemd-tmpfiles-setup-dev creates them from. The list comes from
// the kernel's modules.devname, which only changes with the kernel, so
// the boot-time run (an exec of kmod, paged in through dm-verity, at the
// head of the chain before udevd and local-fs.target) is masked.
type staticNodes struct{}

// StaticNodesFile is where the list goes; kmod-static-nodes writes the
// same name under /run/tmpfiles.d.
const StaticNodesFile = "/usr/lib/tmpfiles.d/static-nodes.conf"

func (staticNodes) String() string { return "static-nodes" }
func (staticNodes) Why() string {
	return "kmod-static-nodes.service would run kmod at every boot; the tmpfiles list is written from modules.devname instead and the unit masked"
}

func (staticNodes) Run(t *tree.Tree, env *Env) error {
	if env.Kernel == "" {
		return nil
	}
	p := "/usr/lib/modules/" + env.Kernel + "/modules.devname"
	n := t.Get(p)
	if n == nil {
		// kmod-static-nodes' ConditionFileNotEmpty= skips it too.
		return nil
	}
	out, err := StaticNodes(n.Data, p)
	if err != nil {
		return err
	}
	if err := t.Set(file(StaticNodesFile, 0o644, out)); err != nil {
		return err
	}
	return t.Set(mask("kmod-static-nodes.service"))
}

// StaticNodes turns a modules.devname file ("module devname c10:229" per
// line) into the tmpfiles.d lines `kmod static-nodes --format=tmpfiles`
// prints for it: a "d" line for a node's directory, then "c!" or "b!"
// (created at boot only) with mode 0600 and the device number. name is
// the file's path, for errors.
func StaticNodes(devname []byte, name string) (string, error) {
	var b strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(devname))
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' {
			continue
		}
		f := strings.Fields(s)
		var typ byte
		var maj, min uint
		if len(f) == 3 && len(f[2]) > 1 {
			typ = f[2][0]
			if _, err := fmt.Sscanf(f[2][1:], "%d:%d", &maj, &min); err != nil {
				typ = 0
			}
		}
		if typ != 'c' && typ != 'b' {
			return "", fmt.Errorf("%s:%d: %q is not \"module devname c|bMAJOR:MINOR\": is the kernel's module index damaged?", name, line, s)
		}
		node := f[1]
		if i := strings.LastIndexByte(node, '/'); i >= 0 {
			fmt.Fprintf(&b, "d /dev/%s 0755 - - -\n", node[:i])
		}
		fmt.Fprintf(&b, "%c! /dev/%s 0600 - - - %d:%d\n", typ, node, maj, min)
	}
	return b.String(), sc.Err()
}
