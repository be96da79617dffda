package provider

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDetect(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Probes
		want Platform
	}{
		{"ecs product", Probes{ProductName: "Alibaba Cloud ECS", SysVendor: "Alibaba Cloud"}, PlatformECS},
		{"ecs vendor only", Probes{ProductName: "ECS bare metal", SysVendor: "Alibaba Cloud"}, PlatformECS},
		{"ecs case", Probes{ProductName: "alibaba cloud ecs"}, PlatformECS},
		{"qemu", Probes{ProductName: "Standard PC (Q35 + ICH9, 2009)", SysVendor: "QEMU", FwCfgUserData: true}, PlatformQEMU},
		{"plain qemu", Probes{ProductName: "Standard PC (Q35 + ICH9, 2009)", SysVendor: "QEMU"}, PlatformUnknown},
		{"file", Probes{Cmdline: "ro quiet drover.config=/var/lib/drover/config.ign"}, PlatformFile},
		{"file beats ecs", Probes{ProductName: "Alibaba Cloud ECS", Cmdline: "drover.config=/etc/x.ign"}, PlatformFile},
		{"file beats qemu", Probes{FwCfgUserData: true, Cmdline: "drover.config=/etc/x.ign"}, PlatformFile},
		{"qemu beats ecs dmi", Probes{ProductName: "Alibaba Cloud ECS", FwCfgUserData: true}, PlatformQEMU},
		{"empty config arg", Probes{Cmdline: "drover.config="}, PlatformUnknown},
		{"nothing", Probes{}, PlatformUnknown},
	} {
		if got := Detect(tc.p); got != tc.want {
			t.Errorf("%s: Detect(%+v) = %q, want %q", tc.name, tc.p, got, tc.want)
		}
	}
}

func TestKernelArg(t *testing.T) {
	for _, tc := range []struct {
		cmdline, name, want string
		found               bool
	}{
		{"ro drover.config=/a.ign quiet", "drover.config", "/a.ign", true},
		{"drover.config=/a drover.config=/b", "drover.config", "/b", true},
		{`x drover.config="/with space/c.ign" y`, "drover.config", "/with space/c.ign", true},
		{`"drover.config=/q.ign"`, "drover.config", "/q.ign", true},
		{"drover.configx=/a", "drover.config", "", false},
		{"drover.config", "drover.config", "", true},
		{"a=b=c\n", "a", "b=c", true},
		{"", "drover.config", "", false},
	} {
		got, found := KernelArg(tc.cmdline, tc.name)
		if got != tc.want || found != tc.found {
			t.Errorf("KernelArg(%q, %q) = %q, %v; want %q, %v", tc.cmdline, tc.name, got, found, tc.want, tc.found)
		}
	}
}

// writeFile creates root/rel with content.
func writeFile(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReadProbes(t *testing.T) {
	root := t.TempDir()
	writeFile(t, root, "sys/class/dmi/id/product_name", "Alibaba Cloud ECS\n")
	writeFile(t, root, "sys/class/dmi/id/sys_vendor", "Alibaba Cloud\n")
	writeFile(t, root, "proc/cmdline", "BOOT_IMAGE=/vmlinuz ro\n")
	p, err := ReadProbes(root)
	if err != nil {
		t.Fatal(err)
	}
	want := Probes{ProductName: "Alibaba Cloud ECS", SysVendor: "Alibaba Cloud", Cmdline: "BOOT_IMAGE=/vmlinuz ro"}
	if p != want {
		t.Errorf("ReadProbes = %+v, want %+v", p, want)
	}
	if Detect(p) != PlatformECS {
		t.Errorf("Detect = %q, want ecs", Detect(p))
	}

	// A VM without DMI: only fw_cfg.
	root = t.TempDir()
	writeFile(t, root, "sys/firmware/qemu_fw_cfg/by_name/opt/drover/userdata/raw", "{}")
	p, err = ReadProbes(root)
	if err != nil || !p.FwCfgUserData || p.ProductName != "" || Detect(p) != PlatformQEMU {
		t.Errorf("fw_cfg only: %+v, %v", p, err)
	}

	// An unreadable probe is reported, and the rest is still filled.
	root = t.TempDir()
	writeFile(t, root, "proc/cmdline", "drover.config=/x")
	if err := os.MkdirAll(filepath.Join(root, "sys/class/dmi/id/product_name"), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err = ReadProbes(root)
	if err == nil || !strings.Contains(err.Error(), "product_name") || Detect(p) != PlatformFile {
		t.Errorf("unreadable product_name: %+v, %v", p, err)
	}
}

func TestOpen(t *testing.T) {
	root := t.TempDir()
	probes := Probes{Cmdline: "drover.config=/etc/c.ign drover.facts=/etc/f.json"}
	for pl, name := range map[Platform]string{PlatformECS: "ecs", PlatformQEMU: "qemu", PlatformFile: "file"} {
		p, err := Open(pl, root, probes, nil)
		if err != nil || p.Name() != name {
			t.Errorf("Open(%q) = %v, %v", pl, p, err)
		}
	}
	p, _ := Open(PlatformFile, root, probes, nil)
	if f := p.(*File); f.Path != "/etc/c.ign" || f.FactsPath != "/etc/f.json" || f.Root != root {
		t.Errorf("file provider = %+v", f)
	}
	ecs := &ECSClient{BaseURL: "http://127.0.0.1:1"}
	if p, _ := Open(PlatformECS, root, probes, ecs); p != ecs {
		t.Errorf("Open(ecs) did not use the given client")
	}
	_, err := Open(PlatformUnknown, root, Probes{ProductName: "Some PC"}, nil)
	if err == nil || !strings.Contains(err.Error(), "Some PC") || !strings.Contains(err.Error(), "drover.config=/path") {
		t.Errorf("Open(unknown) error = %v, want one naming the probes and the fix", err)
	}
}
