package diff

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/image/build"
	"github.com/drover-os/drover/image/lock"
	"github.com/drover-os/drover/image/uki"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func hash(s string) string { return strings.Repeat(s, 64/len(s))[:64] }

// base is a small manifest shaped like a real one.
func base() *build.Manifest {
	return &build.Manifest{
		Name: "node", Version: "20261121.091544", BuildID: "21c1b6ee68286c0c", Builder: "drover v1.0.0",
		RecipeSHA256: hash("a1"), LockSHA256: hash("b2"),
		Suites:  []lock.Suite{{Name: "trixie", Date: time.Date(2026, 11, 21, 9, 15, 44, 0, time.UTC), InRelease: hash("c3")}},
		Kernel:  "6.12.117+deb13-cloud-amd64",
		Cmdline: "console=ttyS0,115200 drover.roothash=" + hash("d4"), RootHash: hash("d4"),
		Packages: []build.Package{
			{Name: "base-files", Version: "13.8+deb13u8", Arch: "amd64", SHA256: hash("01")},
			{Name: "containerd", Version: "1.7.24~ds1-6", Arch: "amd64", SHA256: hash("02")},
			{Name: "libaudit-common", Version: "1:4.0.2-2+deb13u1", Arch: "all", SHA256: hash("03")},
			{Name: "runc", Version: "1.1.15+ds1-2", Arch: "amd64", SHA256: hash("04")},
		},
		Go: []build.GoComponent{{Name: "kubelet", Module: "k8s.io/kubernetes", Version: "v1.36.2", Package: "k8s.io/kubernetes/cmd/kubelet",
			Install: "/usr/bin/kubelet", SHA256: hash("05"), GoVersion: "go1.26.7", Deps: []string{"k8s.io/api@v0.36.2", "k8s.io/klog/v2@v2.140.0"}}},
		URLs:          []lock.URL{{Name: "crictl", SHA256: hash("06"), URL: "https://example.invalid/crictl-v1.36.0.tar.gz", Size: 100}},
		Units:         []string{"containerd.service -> /usr/lib/systemd/system/containerd.service", "default.target -> /usr/lib/systemd/system/multi-user.target"},
		InitrdModules: []string{"kernel/drivers/block/virtio_blk.ko.xz", "kernel/drivers/md/dm-verity.ko.xz"},
		RootFS:        build.RootFSInfo{Size: 118624256, Files: 10, Dirs: 3},
		ESP: []build.ESPFile{
			{Path: "EFI/BOOT/BOOTX64.EFI", Size: 10, SHA256: hash("07")},
			{Path: "drover/initrd", Size: 10, SHA256: hash("08")},
			{Path: "loader/entries/drover.conf", Size: 10, SHA256: hash("09")},
		},
		Partitions: []build.Partition{
			{Index: 1, Name: "esp", Type: "esp", UUID: "0a254412-45ad-43f5-adc4-bf9d03ae00cf", Offset: 1 << 20, Size: 64 << 20, SHA256: hash("10")},
			{Index: 2, Name: "root", Type: "root-x86-64", UUID: "490930db-d6a9-2a95-fb96-d78f190a8fa5", Offset: 65 << 20, Size: 114 << 20, SHA256: hash("11")},
		},
		DiskSize: 512 << 20,
		Files: []build.FileEntry{
			{Path: "/etc/containerd/config.toml", Kind: "file", Mode: "0644", Owner: "0:0", SHA256: hash("20"), From: "containerd"},
			{Path: "/etc/libaudit.conf", Kind: "file", Mode: "0644", Owner: "0:0", SHA256: hash("21"), From: "libaudit-common"},
			{Path: "/usr/bin/containerd", Kind: "file", Mode: "0755", Owner: "0:0", SHA256: hash("22"), From: "containerd"},
			{Path: "/usr/bin/kubelet", Kind: "file", Mode: "0755", Owner: "0:0", SHA256: hash("05"), From: "go:kubelet"},
			{Path: "/usr/bin/runc", Kind: "file", Mode: "0755", Owner: "0:0", SHA256: hash("23"), From: "runc"},
			{Path: "/usr/lib/os-release", Kind: "file", Mode: "0644", Owner: "0:0", SHA256: hash("24"), From: "drover"},
			{Path: "/usr/sbin/runc", Kind: "symlink", Mode: "0777", Owner: "0:0", Target: "../bin/runc", From: "runc"},
			{Path: "/usr/share/doc/libaudit-common/copyright", Kind: "file", Mode: "0644", Owner: "0:0", SHA256: hash("25"), From: "libaudit-common"},
		},
	}
}

// changedManifest touches every kind of change once.
func changedManifest() *build.Manifest {
	m := base()
	m.BuildID = "5e0f0c2d33b1a7e4"
	m.RecipeSHA256, m.LockSHA256 = hash("a9"), hash("b9")
	m.Suites[0].Date, m.Suites[0].InRelease = time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC), hash("c9")
	m.Kernel = "6.12.118+deb13-cloud-amd64"
	m.RootHash = hash("d9")
	m.Cmdline = "console=ttyS0,115200 quiet drover.roothash=" + m.RootHash
	m.Packages = []build.Package{
		m.Packages[0],
		{Name: "containerd", Version: "1.7.25~ds1-1", Arch: "amd64", SHA256: hash("12")},
		{Name: "iptables", Version: "1.8.11-2", Arch: "amd64", SHA256: hash("13")},
		m.Packages[2],
	}
	m.Go[0].Version, m.Go[0].SHA256, m.Go[0].Deps = "v1.36.3", hash("15"), []string{"k8s.io/api@v0.36.3", "k8s.io/klog/v2@v2.140.0"}
	m.URLs[0].SHA256 = hash("16")
	m.Units = []string{"default.target -> /usr/lib/systemd/system/multi-user.target", "kubelet.service -> /usr/lib/systemd/system/kubelet.service"}
	m.InitrdModules = []string{"kernel/drivers/md/dm-verity.ko.xz", "kernel/drivers/block/virtio_blk.ko.xz"}
	m.Excluded = []build.ExcludedPackage{{Name: "initramfs-tools", Version: "0.148.4", Why: "drover-init is the initrd"}}
	m.Removed = []build.RemovedPaths{{Glob: "/usr/bin/su", Why: "no logins", Paths: []string{"/usr/bin/su"}}}
	m.Setuid = []build.SetuidFile{{Path: "/usr/bin/mount", Mode: "4755", Owner: "0:0", From: "mount"}}
	m.RootFS.Size = 120 << 20
	m.ESP[1].SHA256, m.ESP[2].SHA256 = hash("18"), hash("19")
	m.Partitions[1].SHA256, m.Partitions[1].UUID = hash("31"), "d9d9d9d9-d9d9-d9d9-d9d9-d9d9d9d9d9d9"
	m.Files = []build.FileEntry{
		{Path: "/etc/containerd/config.toml", Kind: "file", Mode: "0644", Owner: "0:0", SHA256: hash("30"), From: "containerd"},
		{Path: "/etc/drover-test", Kind: "file", Mode: "0600", Owner: "0:0", SHA256: hash("32"), From: "recipe"},
		{Path: "/etc/libaudit.conf", Kind: "file", Mode: "0640", Owner: "0:0", SHA256: hash("21"), From: "libaudit-common"},
		{Path: "/usr/bin/containerd", Kind: "file", Mode: "0755", Owner: "0:0", SHA256: hash("33"), From: "containerd"},
		{Path: "/usr/bin/containerd-shim-runc-v2", Kind: "file", Mode: "0755", Owner: "0:0", SHA256: hash("34"), From: "containerd"},
		{Path: "/usr/bin/kubelet", Kind: "file", Mode: "0755", Owner: "0:0", SHA256: hash("15"), From: "go:kubelet"},
		{Path: "/usr/lib/os-release", Kind: "file", Mode: "0644", Owner: "0:0", SHA256: hash("35"), From: "drover"},
		{Path: "/usr/sbin/iptables", Kind: "symlink", Mode: "0777", Owner: "0:0", Target: "xtables-nft-multi", From: "iptables"},
		{Path: "/usr/share/doc/libaudit-common/copyright", Kind: "file", Mode: "0644", Owner: "0:0", SHA256: hash("25"), From: "libaudit-common"},
	}
	return m
}

func TestEqualManifests(t *testing.T) {
	d := Compare(base(), base())
	if !d.Equal() {
		t.Fatalf("a manifest differs from itself: %+v", d)
	}
	if got := d.Summary(); got != "no differences" {
		t.Errorf("summary = %q", got)
	}
}

func TestCompare(t *testing.T) {
	d := Compare(base(), changedManifest())
	if d.Equal() {
		t.Fatal("Equal() = true for different manifests")
	}
	wantPkgs := []PackageChange{
		{Name: "containerd", Old: "1.7.24~ds1-6", New: "1.7.25~ds1-1", Files: FileCounts{Added: 1, Changed: 2}},
		{Name: "iptables", New: "1.8.11-2", Files: FileCounts{Added: 1}},
		{Name: "runc", Old: "1.1.15+ds1-2", Files: FileCounts{Removed: 2}},
	}
	if !reflect.DeepEqual(d.Packages, wantPkgs) {
		t.Errorf("packages:\n got %+v\nwant %+v", d.Packages, wantPkgs)
	}
	if len(d.Go) != 1 || d.Go[0].Files != (FileCounts{Changed: 1}) ||
		!reflect.DeepEqual(d.Go[0].DepsAdded, []string{"k8s.io/api@v0.36.3"}) || !reflect.DeepEqual(d.Go[0].DepsRemoved, []string{"k8s.io/api@v0.36.2"}) {
		t.Errorf("go: %+v", d.Go)
	}
	if d.Cmdline == nil || d.Cmdline.Old != "console=ttyS0,115200" || d.Cmdline.New != "console=ttyS0,115200 quiet" {
		t.Errorf("cmdline (root hash argument excluded): %+v", d.Cmdline)
	}
	if d.RootHash == nil || d.RootHash.New != hash("d9") {
		t.Errorf("root hash: %+v", d.RootHash)
	}
	if !d.InitrdModules.Reordered || len(d.InitrdModules.Added) != 0 {
		t.Errorf("initrd modules: %+v", d.InitrdModules)
	}
	// Files of unchanged components and of no component are listed; those
	// of changed components only counted.
	var listed []string
	for _, f := range d.Files {
		listed = append(listed, f.Change+" "+f.Path+" "+strings.Join(f.Details, ","))
	}
	wantListed := []string{"added /etc/drover-test ", "changed /etc/libaudit.conf mode 0644 → 0640", "changed /usr/lib/os-release content"}
	if !reflect.DeepEqual(listed, wantListed) {
		t.Errorf("listed files:\n got %q\nwant %q", listed, wantListed)
	}
}

func TestCmdlineOnlyRootHashIsNotACmdlineChange(t *testing.T) {
	a, b := base(), base()
	b.RootHash = hash("ee")
	b.Cmdline = "console=ttyS0,115200 drover.roothash=" + b.RootHash
	d := Compare(a, b)
	if d.Cmdline != nil {
		t.Errorf("cmdline reported changed: %+v", d.Cmdline)
	}
	if d.RootHash == nil || d.Summary() != "root hash changed" {
		t.Errorf("root hash change: %+v, summary %q", d.RootHash, d.Summary())
	}
}

func TestFileOwnerMoveIsListed(t *testing.T) {
	a, b := base(), base()
	b.Packages[1].Version = "1.7.25~ds1-1"
	b.Files[0].From = "runc" // config.toml moves from the changed containerd to runc
	d := Compare(a, b)
	if len(d.Files) != 1 || d.Files[0].Path != "/etc/containerd/config.toml" || d.Files[0].Details[0] != "from containerd → runc" {
		t.Errorf("files: %+v", d.Files)
	}
	if d.Packages[0].Files.total() != 0 {
		t.Errorf("the moved file was also counted under containerd: %+v", d.Packages[0])
	}
}

func TestSameVersionDifferentDeb(t *testing.T) {
	a, b := base(), base()
	b.Packages[0].SHA256 = hash("ff")
	d := Compare(a, b)
	if len(d.Packages) != 1 || !strings.HasPrefix(d.Packages[0].Note, "same version, different .deb") {
		t.Errorf("packages: %+v", d.Packages)
	}
	var out bytes.Buffer
	d.Text(&out)
	if want := "package       ~ base-files 13.8+deb13u8: same version, different .deb (sha256 010101010101… → ffffffffffff…) (no file changed)\n"; !strings.Contains(out.String(), want) {
		t.Errorf("text lacks %q:\n%s", want, out.String())
	}
}

func TestRenderersAreDeterministic(t *testing.T) {
	for i, r := range renderers {
		var first []byte
		for run := 0; run < 5; run++ {
			var buf bytes.Buffer
			if err := r.render(Compare(base(), changedManifest()), &buf); err != nil {
				t.Fatal(err)
			}
			if run == 0 {
				first = buf.Bytes()
			} else if !bytes.Equal(first, buf.Bytes()) {
				t.Fatalf("renderer %d: run %d differs from run 0", i, run)
			}
		}
	}
}

var renderers = []struct {
	ext    string
	render func(*Diff, *bytes.Buffer) error
}{
	{"txt", func(d *Diff, b *bytes.Buffer) error { return d.Text(b) }},
	{"md", func(d *Diff, b *bytes.Buffer) error { return d.Markdown(b) }},
	{"json", func(d *Diff, b *bytes.Buffer) error { return d.JSON(b) }},
}

// TestGolden renders a diff touching every section, a diff with many
// files (the <details> fold), an empty diff and one of package updates
// with recorded changelogs, in every form.
func TestGolden(t *testing.T) {
	many := base()
	for i := 0; i < 12; i++ {
		many.Files = append(many.Files, build.FileEntry{Path: fmt.Sprintf("/etc/extra/%02d.conf", i), Kind: "file", Mode: "0644", Owner: "0:0", SHA256: hash("7a"), From: "recipe"})
	}
	cases := map[string]*Diff{
		"changed": Compare(base(), changedManifest()),
		"many":    Compare(base(), many),
		"equal":   Compare(base(), base()),
		"fixes":   Compare(fixesOld(), fixesNew()), // fixes_test.go
	}
	for name, d := range cases {
		for _, r := range renderers {
			var buf bytes.Buffer
			if err := r.render(d, &buf); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", name+"."+r.ext)
			if *update {
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("%s differs from the golden file (run go test -update and review the change):\n%s", golden, buf.String())
			}
		}
	}
}

// TestSignedBuildChangesOnlyBootFiles: a Secure Boot signed build differs
// from the unsigned one in systemd-boot and the UKI only; the diff names
// those two with their signer and nothing else (the ESP partition's digest
// follows from them and is not reported again).
func TestSignedBuildChangesOnlyBootFiles(t *testing.T) {
	secs := func(cmdline string) []uki.Section {
		return []uki.Section{{Name: ".cmdline", Size: 10, SHA256: cmdline}, {Name: ".linux", Size: 99, SHA256: hash("3a")}}
	}
	unsigned := base()
	unsigned.ESP = []build.ESPFile{
		{Path: "EFI/BOOT/BOOTX64.EFI", Size: 10, SHA256: hash("07")},
		{Path: "EFI/Linux/drover.efi", Size: 99, SHA256: hash("08"), Sections: secs(hash("3b"))},
	}
	signed := base()
	signed.ESP = []build.ESPFile{
		{Path: "EFI/BOOT/BOOTX64.EFI", Size: 1800, SHA256: hash("17"), SignedBy: "CN=test (sha256 " + hash("ce") + ")"},
		{Path: "EFI/Linux/drover.efi", Size: 1900, SHA256: hash("18"), Sections: secs(hash("3b")), SignedBy: "CN=test (sha256 " + hash("ce") + ")"},
	}
	signed.Partitions[0].SHA256 = hash("1f")
	d := Compare(unsigned, signed)
	if len(d.ESP) != 2 || d.ESP[0].Path != "EFI/BOOT/BOOTX64.EFI" || d.ESP[1].Path != "EFI/Linux/drover.efi" {
		t.Fatalf("ESP changes %+v, want systemd-boot and the UKI", d.ESP)
	}
	for _, e := range d.ESP {
		if len(e.Details) != 1 || !strings.HasPrefix(e.Details[0], "signed by CN=test") {
			t.Errorf("%s: details %q, want only the signer", e.Path, e.Details)
		}
	}
	d.ESP = nil
	if !d.Equal() {
		var b strings.Builder
		d.Text(&b)
		t.Errorf("besides the boot files the diff reports:\n%s", b.String())
	}

	// A changed .cmdline is named by section.
	tampered := base()
	tampered.ESP = append([]build.ESPFile(nil), unsigned.ESP...)
	tampered.ESP[1].SHA256, tampered.ESP[1].Sections = hash("19"), secs(hash("3c"))
	d = Compare(unsigned, tampered)
	if len(d.ESP) != 1 || strings.Join(d.ESP[0].Details, ",") != "section .cmdline sha256 "+hash("3b")+" → "+hash("3c") {
		t.Errorf("ESP changes %+v, want the UKI's .cmdline section", d.ESP)
	}
}

// TestSetuidFromOlderManifest: a manifest written before the setuid list
// existed has the facts in its files; the diff reads them there.
func TestSetuidFromOlderManifest(t *testing.T) {
	old := &build.Manifest{Files: []build.FileEntry{{Path: "/usr/bin/su", Kind: "file", Mode: "4755", Owner: "0:0"}, {Path: "/usr/bin/ls", Kind: "file", Mode: "0755", Owner: "0:0"}}}
	new := &build.Manifest{Setuid: []build.SetuidFile{}}
	d := Compare(old, new)
	if len(d.Setuid.Removed) != 1 || d.Setuid.Removed[0] != "/usr/bin/su 4755 0:0" || len(d.Setuid.Added) != 0 {
		t.Errorf("setuid change: %+v", d.Setuid)
	}
}

// TestArchitectureChange: an arm64 build of the same node names the
// architecture once and counts the packages that are the same version
// rebuilt on one line; a package whose version also differs (a binNMU)
// keeps its own line, and JSON keeps every package.
func TestArchitectureChange(t *testing.T) {
	old, arm := base(), base()
	arm.Arch = "arm64"
	for i := range arm.Packages {
		if arm.Packages[i].Arch == "amd64" {
			arm.Packages[i].Arch, arm.Packages[i].SHA256 = "arm64", hash("f"+string(rune('0'+i)))
		}
	}
	arm.Packages[3].Version = "1.1.15+ds1-2+b1" // runc, rebuilt with a binNMU suffix
	d := Compare(old, arm)
	if d.Arch == nil || d.Arch.Old != "amd64" || d.Arch.New != "arm64" {
		t.Fatalf("arch change %+v, want amd64 → arm64 (a manifest without arch is amd64)", d.Arch)
	}
	if len(d.Packages) != 3 || !d.Packages[0].SameVersion || !d.Packages[1].SameVersion || d.Packages[2].SameVersion {
		t.Fatalf("packages %+v: want base-files and containerd same-version, runc not", d.Packages)
	}
	var text strings.Builder
	if err := d.Text(&text); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	for _, want := range []string{
		"arch          ~ amd64 → arm64\n",
		"package       ~ 2 packages: the same versions built for arm64\n",
		"package       ~ runc 1.1.15+ds1-2 amd64 → 1.1.15+ds1-2+b1 arm64 (no file changed)\n",
		"summary: architecture changed, 2 packages rebuilt for the other architecture, 1 package changed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "base-files") || strings.Contains(out, "containerd 1.7") {
		t.Errorf("text lists a same-version package on its own line:\n%s", out)
	}
	var md strings.Builder
	if err := d.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "2 packages are the same versions built for arm64") || strings.Contains(md.String(), "`base-files`") {
		t.Errorf("markdown does not fold the same-version packages:\n%s", md.String())
	}
	var js strings.Builder
	if err := d.JSON(&js); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"name": "base-files",`) || !strings.Contains(js.String(), `"sameVersion": true`) {
		t.Errorf("JSON must keep every package:\n%s", js.String())
	}
	// The same architecture on both sides: nothing folds.
	if d := Compare(base(), base()); d.Arch != nil || !d.Equal() {
		t.Errorf("equal manifests: arch %+v, equal %v", d.Arch, d.Equal())
	}
}
