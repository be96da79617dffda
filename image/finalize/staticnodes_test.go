package finalize

import (
	"strings"
	"testing"

	"github.com/drover-os/drover/image/tree"
)

// devnameSample is trixie's 6.12 cloud kernel's modules.devname, plus a
// block device, for the "b" type kmod also accepts.
const devnameSample = `# Device nodes to trigger on-demand module loading.
loop loop-control c10:237
dm_mod mapper/control c10:236
tun net/tun c10:200
fuse fuse c10:229
floppy fd0 b2:0
`

// TestStaticNodes: the lines `kmod static-nodes --format=tmpfiles` prints
// for the sample (checked against kmod itself in the integration test).
func TestStaticNodes(t *testing.T) {
	got, err := StaticNodes([]byte(devnameSample), "modules.devname")
	if err != nil {
		t.Fatal(err)
	}
	want := `c! /dev/loop-control 0600 - - - 10:237
d /dev/mapper 0755 - - -
c! /dev/mapper/control 0600 - - - 10:236
d /dev/net 0755 - - -
c! /dev/net/tun 0600 - - - 10:200
c! /dev/fuse 0600 - - - 10:229
b! /dev/fd0 0600 - - - 2:0
`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	for _, bad := range []string{"fuse fuse x10:229\n", "fuse fuse c10\n", "fuse c10:229\n"} {
		_, err := StaticNodes([]byte("# header\n"+bad), "/usr/lib/modules/6.12/modules.devname")
		if err == nil || !strings.Contains(err.Error(), "/usr/lib/modules/6.12/modules.devname:2:") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestStaticNodesStep: the step writes the list and masks the boot-time
// unit; a tree without a module index gets neither.
func TestStaticNodesStep(t *testing.T) {
	tr := tree.New()
	if err := tr.Add(file("/usr/lib/modules/6.12.0-1-cloud-amd64/modules.devname", 0o644, devnameSample)); err != nil {
		t.Fatal(err)
	}
	if err := (staticNodes{}).Run(tr, &Env{Kernel: "6.12.0-1-cloud-amd64"}); err != nil {
		t.Fatal(err)
	}
	n := tr.Get(StaticNodesFile)
	if n == nil || !strings.Contains(string(n.Data), "c! /dev/fuse 0600 - - - 10:229\n") {
		t.Fatalf("%s: %+v", StaticNodesFile, n)
	}
	if m := tr.Get("/etc/systemd/system/kmod-static-nodes.service"); m == nil || m.Target != "/dev/null" {
		t.Errorf("kmod-static-nodes.service not masked: %+v", m)
	}
	empty := tree.New()
	if err := (staticNodes{}).Run(empty, &Env{Kernel: "6.12.0-1-cloud-amd64"}); err != nil {
		t.Fatal(err)
	}
	if empty.Get(StaticNodesFile) != nil || empty.Get("/etc/systemd/system/kmod-static-nodes.service") != nil {
		t.Error("a tree without modules.devname got a static-nodes list or mask")
	}
}
