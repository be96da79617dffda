package publish

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/image/build"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const rootHash = "5f3c8e0d2b1a49768e6f0a1b2c3d4e5f60718293a4b5c6d7e8f90123456789ab"

func manifest() *build.Manifest {
	return &build.Manifest{Name: "ecs-node", Version: "20250301.120000", BuildID: "0123456789abcdef", RootHash: rootHash,
		DiskSize: 1<<30 + 1, Arch: "amd64"}
}

func request() Request {
	return Request{Image: "out/ecs-node.qcow2", Manifest: manifest(), Region: "cn-hangzhou", Bucket: "drover-images",
		ObjectPrefix: "drover/", WaitTimeout: time.Hour, PollInterval: 15 * time.Second}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./publish -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s:\n%s", name, path, got)
	}
}

// TestPlan: every ImportImage parameter comes from the manifest and the
// flags as ECS.md lists them.
func TestPlan(t *testing.T) {
	p, err := NewPlan(request())
	if err != nil {
		t.Fatal(err)
	}
	want := &Plan{Image: "out/ecs-node.qcow2", Format: "QCOW2", Region: "cn-hangzhou", Bucket: "drover-images",
		Object: "drover/ecs-node-20250301.120000-0123456789abcdef.qcow2", ImageName: "ecs-node-20250301.120000-0123456789abcdef",
		Description: "drover ecs-node 20250301.120000 rootHash=" + rootHash + " buildID=0123456789abcdef",
		BuildID:     "0123456789abcdef", RootHash: rootHash, Architecture: "x86_64", Platform: "Debian", OSType: "linux", BootMode: "UEFI",
		DiskImageSize: 2, NvmeSupport: "supported", ImdsSupport: "v2",
		Tags:   []Tag{{TagRootHash, rootHash}, {TagBuildID, "0123456789abcdef"}, {TagName, "ecs-node"}, {TagVersion, "20250301.120000"}},
		CopyTo: []string{}, WaitTimeout: time.Hour, PollInterval: 15 * time.Second}
	if !reflect.DeepEqual(p, want) {
		got, _ := json.MarshalIndent(p, "", "  ")
		t.Errorf("plan:\n%s", got)
	}
}

func TestPlanFromManifestAndFlags(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*Request)
		check func(*Plan) string
		want  string
	}{
		{"arm64", func(r *Request) { r.Manifest.Arch = "arm64" }, func(p *Plan) string { return p.Architecture }, "arm64"},
		{"old manifest without arch", func(r *Request) { r.Manifest.Arch = "" }, func(p *Plan) string { return p.Architecture }, "x86_64"},
		{"raw", func(r *Request) { r.Image = "out/x.raw" }, func(p *Plan) string { return p.Format + " " + p.Object }, "RAW drover/ecs-node-20250301.120000-0123456789abcdef.raw"},
		{"vhd", func(r *Request) { r.Image = "out/x.vhd" }, func(p *Plan) string { return p.Format }, "VHD"},
		{"exact GiB", func(r *Request) { r.Manifest.DiskSize = 40 << 30 }, func(p *Plan) string { return itoa(p.DiskImageSize) }, "40"},
		{"one byte over", func(r *Request) { r.Manifest.DiskSize = 40<<30 + 1 }, func(p *Plan) string { return itoa(p.DiskImageSize) }, "41"},
		{"largest disk ImportImage takes", func(r *Request) { r.Manifest.DiskSize = 2048 << 30 }, func(p *Plan) string { return itoa(p.DiskImageSize) }, "2048"},
		{"--architecture x86_64 on an amd64 manifest", func(r *Request) { r.Architecture = "x86_64" }, func(p *Plan) string { return p.Architecture }, "x86_64"},
		{"--architecture arm64 on an arm64 manifest", func(r *Request) { r.Manifest.Arch = "arm64"; r.Architecture = "arm64" }, func(p *Plan) string { return p.Architecture }, "arm64"},
		{"no wait (--wait-timeout 0: start the import, a later run waits)", func(r *Request) { r.WaitTimeout = 0 }, func(p *Plan) string { return p.WaitTimeout.String() }, "0s"},
		{"tiny disk", func(r *Request) { r.Manifest.DiskSize = 1 }, func(p *Plan) string { return itoa(p.DiskImageSize) }, "1"},
		{"prefix without slash", func(r *Request) { r.ObjectPrefix = "images/nodes" }, func(p *Plan) string { return p.Object }, "images/nodes/ecs-node-20250301.120000-0123456789abcdef.qcow2"},
		{"no prefix", func(r *Request) { r.ObjectPrefix = "" }, func(p *Plan) string { return p.Object }, "ecs-node-20250301.120000-0123456789abcdef.qcow2"},
		{"image name", func(r *Request) { r.ImageName = "nodes-1" }, func(p *Plan) string { return p.ImageName + " " + p.Object }, "nodes-1 drover/nodes-1.qcow2"},
		{"platform", func(r *Request) { r.Platform = "Others Linux" }, func(p *Plan) string { return p.Platform }, "Others Linux"},
		{"copies", func(r *Request) { r.CopyTo = []string{"cn-shanghai", "cn-beijing"} }, func(p *Plan) string { return strings.Join(p.CopyTo, ",") }, "cn-shanghai,cn-beijing"},
		{"secure boot", func(r *Request) {
			r.SecureBoot = true
			r.Manifest.ESP = []build.ESPFile{{Path: "EFI/BOOT/BOOTX64.EFI", SignedBy: "CN=k"}, {Path: "EFI/Linux/drover.efi", SignedBy: "CN=k"}}
		}, func(p *Plan) string { t := p.Tags[len(p.Tags)-1]; return t.Key + "=" + t.Value }, "drover:secure-boot=signed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := request()
			tc.edit(&r)
			p, err := NewPlan(r)
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.check(p); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestPlanRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*Request)
		usage bool
		want  string
	}{
		{"region", func(r *Request) { r.Region = "CN" }, true, `--region "CN": not a region ID`},
		{"bucket", func(r *Request) { r.Bucket = "My_Bucket" }, true, `--bucket "My_Bucket"`},
		{"prefix", func(r *Request) { r.ObjectPrefix = "/abs" }, true, "--object-prefix"},
		{"copy to itself", func(r *Request) { r.CopyTo = []string{"cn-hangzhou"} }, true, "--copy-to cn-hangzhou: that is the import region itself"},
		{"copy twice", func(r *Request) { r.CopyTo = []string{"cn-shanghai", "cn-shanghai"} }, true, "named twice"},
		{"copy region", func(r *Request) { r.CopyTo = []string{"Shanghai"} }, true, `--copy-to "Shanghai"`},
		{"format", func(r *Request) { r.Image = "out/x.vmdk" }, true, "want a .qcow2, .raw or .vhd file"},
		{"architecture", func(r *Request) { r.Architecture = "arm64" }, true, "--architecture arm64: out/ecs-node.qcow2 is an x86_64 image"},
		{"platform", func(r *Request) { r.Platform = "Debian; rm" }, true, "--platform"},
		{"image name", func(r *Request) { r.ImageName = "aliyun-x" }, true, "not aliyun or acs:"},
		{"long name", func(r *Request) { r.Manifest.Name = strings.Repeat("n", 120) }, true, "pass --image-name"},
		{"poll", func(r *Request) { r.PollInterval = 0 }, true, "--poll-interval"},
		{"negative wait", func(r *Request) { r.WaitTimeout = -time.Second }, true, "--wait-timeout -1s"},
		{"no build ID", func(r *Request) { r.Manifest.BuildID = "" }, false, `field "buildID" is missing or empty`},
		{"root hash", func(r *Request) { r.Manifest.RootHash = "xyz" }, false, `rootHash "xyz" is not hex`},
		{"build ID", func(r *Request) { r.Manifest.BuildID = "a b" }, false, `buildID "a b" is malformed`},
		{"disk size", func(r *Request) { r.Manifest.DiskSize = 0 }, false, "diskSize 0"},
		{"arch", func(r *Request) { r.Manifest.Arch = "riscv64" }, false, `arch "riscv64" is neither amd64 nor arm64`},
		{"too big", func(r *Request) { r.Manifest.DiskSize = 2049 << 30 }, false, "DiskImageSize of at most 2048 GiB"},
		{"one byte too big", func(r *Request) { r.Manifest.DiskSize = 2048<<30 + 1 }, false, "the disk is 2049 GiB"},
		{"amd64 for x86_64", func(r *Request) { r.Architecture = "amd64" }, true, "--architecture amd64"},
		{"x86_64 on arm64", func(r *Request) { r.Manifest.Arch = "arm64"; r.Architecture = "x86_64" }, true, "is an arm64 image"},
		{"unsigned", func(r *Request) {
			r.SecureBoot = true
			r.Manifest.ESP = []build.ESPFile{{Path: "EFI/BOOT/BOOTX64.EFI", SignedBy: "CN=k"}, {Path: "EFI/Linux/drover.efi"}}
		}, false, "--secure-boot: EFI/Linux/drover.efi is not signed"},
		{"unsigned arm64 loader", func(r *Request) {
			r.SecureBoot = true
			r.Manifest.Arch = "arm64"
			r.Manifest.ESP = []build.ESPFile{{Path: "EFI/BOOT/BOOTX64.EFI", SignedBy: "CN=k"}, {Path: "EFI/Linux/drover.efi", SignedBy: "CN=k"}}
		}, false, "--secure-boot: EFI/BOOT/BOOTAA64.EFI is not signed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := request()
			tc.edit(&r)
			_, err := NewPlan(r)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			var ue *UsageError
			if isUsage := errorsAs(err, &ue); isUsage != tc.usage {
				t.Errorf("usage error: %v, want %v", isUsage, tc.usage)
			}
		})
	}
}

func TestPlanText(t *testing.T) {
	r := request()
	r.CopyTo = []string{"cn-shanghai", "cn-beijing"}
	p, err := NewPlan(r)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "plan-not-looked-up", p.Text(nil))
	golden(t, "plan-looked-up", p.Text(map[string]Decision{
		"cn-hangzhou": {Action: ActionImport},
		"cn-shanghai": {ActionReuse, "m-sh", "Available"},
		"cn-beijing":  {Action: ActionImport},
	}))
	golden(t, "plan-reuse", p.Text(map[string]Decision{
		"cn-hangzhou": {ActionReuse, "m-hz", "Available"},
		"cn-shanghai": {ActionWait, "m-sh", "Creating"},
		"cn-beijing":  {Action: ActionImport},
	}))
}
