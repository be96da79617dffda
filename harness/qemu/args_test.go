package qemu

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// argValues returns every value given to flag in args, in order.
func argValues(args []string, flag string) []string {
	var out []string
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag {
			out = append(out, args[i+1])
		}
	}
	return out
}

func one(t *testing.T, args []string, flag string) string {
	t.Helper()
	v := argValues(args, flag)
	if len(v) != 1 {
		t.Fatalf("%s given %d times (%q) in %q", flag, len(v), v, args)
	}
	return v[0]
}

func testConfig() *Config {
	return &Config{Image: "img.raw", StateDir: "/state", MemoryMiB: 3072, CPUs: 4, OVMFCode: "/fw/CODE.fd", OVMFVars: "/fw/VARS.fd"}
}

// TestArgsAccel: KVM runs the host CPU; without it TCG runs multi-threaded
// with the most capable emulated CPU. Either way a q35 machine with the
// configured CPUs and memory, no reboot (a guest reboot ends the run).
func TestArgsAccel(t *testing.T) {
	for _, tc := range []struct {
		kvm        bool
		accel, cpu string
	}{{true, "kvm", "host"}, {false, "tcg,thread=multi", "max"}} {
		a := testConfig().Args(tc.kvm)
		if got := one(t, a, "-accel"); got != tc.accel {
			t.Errorf("kvm=%v: -accel %s, want %s", tc.kvm, got, tc.accel)
		}
		if got := one(t, a, "-cpu"); got != tc.cpu {
			t.Errorf("kvm=%v: -cpu %s, want %s", tc.kvm, got, tc.cpu)
		}
		if one(t, a, "-machine") != "q35" || one(t, a, "-smp") != "4" || one(t, a, "-m") != "3072" || !slices.Contains(a, "-no-reboot") {
			t.Errorf("kvm=%v: machine, smp, memory or -no-reboot wrong: %q", tc.kvm, a)
		}
	}
}

// TestArgsPrealloc: the guest's memory is allocated up front only when
// asked (the bench), since it costs every other boot the whole of it.
func TestArgsPrealloc(t *testing.T) {
	if a := testConfig().Args(false); slices.Contains(a, "-mem-prealloc") {
		t.Errorf("-mem-prealloc without PreallocMemory: %q", a)
	}
	c := testConfig()
	c.PreallocMemory = true
	if a := c.Args(false); !slices.Contains(a, "-mem-prealloc") {
		t.Errorf("no -mem-prealloc with PreallocMemory: %q", a)
	}
}

// TestArgsDisk: the disk the guest sees is the overlay, never the image,
// attached as virtio-blk or, for the newer ECS instance types, as NVMe.
func TestArgsDisk(t *testing.T) {
	for _, nvme := range []bool{false, true} {
		c := testConfig()
		c.NVMe = nvme
		a := c.Args(false)
		var disk []string
		for _, d := range argValues(a, "-drive") {
			if strings.Contains(d, "id=disk0") {
				disk = append(disk, d)
			}
			if strings.Contains(d, "img.raw") {
				t.Errorf("the image itself is attached: %s", d)
			}
		}
		if len(disk) != 1 || disk[0] != "if=none,id=disk0,format=qcow2,file=/state/disk.qcow2" {
			t.Errorf("disk drive %q", disk)
		}
		devices := argValues(a, "-device")
		hasNVMe := slices.Contains(devices, "nvme,drive=disk0,serial=drover0")
		hasVirtio := slices.Contains(devices, "virtio-blk-pci,drive=disk0")
		if hasNVMe != nvme || hasVirtio == nvme {
			t.Errorf("NVMe=%v: devices %q", nvme, devices)
		}
	}
}

// TestArgsNetworkAndMetadata: the user-mode network, the fixed host and
// DHCP addresses, the metadata forward, the SMBIOS product ECS guests look
// for, fw_cfg entries, the console on stdio and QMP in the state dir.
func TestArgsNetworkAndMetadata(t *testing.T) {
	c := testConfig()
	c.Net, c.Host, c.DHCPStart = "100.64.0.0/10", "100.64.0.2", "100.64.0.15"
	c.GuestFwd = map[string]string{"100.100.100.200:80": "drover relay x"}
	c.ProductName = "Alibaba Cloud ECS"
	c.FwCfg = map[string]string{"opt/drover/userdata": "/tmp/ud.ign"}
	a := c.Args(false)
	if got, want := one(t, a, "-netdev"), "user,id=n0,net=100.64.0.0/10,host=100.64.0.2,dhcpstart=100.64.0.15,guestfwd=tcp:100.100.100.200:80-cmd:drover relay x"; got != want {
		t.Errorf("-netdev\n got %s\nwant %s", got, want)
	}
	if !slices.Contains(argValues(a, "-device"), "virtio-net-pci,netdev=n0,mac=52:54:00:12:34:56") {
		t.Errorf("no NIC on n0: %q", a)
	}
	if got := one(t, a, "-smbios"); got != "type=1,manufacturer=Alibaba Cloud,product=Alibaba Cloud ECS" {
		t.Errorf("-smbios %s", got)
	}
	if got := one(t, a, "-fw_cfg"); got != "name=opt/drover/userdata,file=/tmp/ud.ign" {
		t.Errorf("-fw_cfg %s", got)
	}
	if one(t, a, "-serial") != "stdio" || one(t, a, "-qmp") != "unix:/state/qmp.sock,server=on,wait=off" {
		t.Errorf("serial or QMP: %q", a)
	}

	// Without the options none of it appears.
	bare := testConfig().Args(false)
	if got := one(t, bare, "-netdev"); got != "user,id=n0" {
		t.Errorf("bare -netdev %s", got)
	}
	if len(argValues(bare, "-smbios"))+len(argValues(bare, "-fw_cfg")) != 0 {
		t.Errorf("bare config has SMBIOS or fw_cfg: %q", bare)
	}
}

// TestArgsSeveralForwards: every guestfwd and fw_cfg entry is passed once.
func TestArgsSeveralForwards(t *testing.T) {
	c := testConfig()
	c.GuestFwd = map[string]string{"100.100.100.200:80": "a", "100.100.100.200:443": "b"}
	c.FwCfg = map[string]string{"opt/a": "/a", "opt/b": "/b"}
	a := c.Args(true)
	nd := one(t, a, "-netdev")
	for _, want := range []string{",guestfwd=tcp:100.100.100.200:80-cmd:a", ",guestfwd=tcp:100.100.100.200:443-cmd:b"} {
		if strings.Count(nd, want) != 1 {
			t.Errorf("-netdev %s: want %s once", nd, want)
		}
	}
	fw := argValues(a, "-fw_cfg")
	slices.Sort(fw)
	if strings.Join(fw, " ") != "name=opt/a,file=/a name=opt/b,file=/b" {
		t.Errorf("-fw_cfg %q", fw)
	}
}

// TestArgsDataDisks: data disks follow the boot disk, raw and writable,
// each with its own serial, on the boot disk's bus; a comma in a path is
// escaped.
func TestArgsDataDisks(t *testing.T) {
	for _, nvme := range []bool{false, true} {
		c := testConfig()
		c.NVMe = nvme
		c.DataDisks = []string{"/tmp/empty.raw", "/tmp/a,b.raw"}
		a := c.Args(false)
		dev := "virtio-blk-pci"
		boot := "virtio-blk-pci,drive=disk0"
		if nvme {
			dev, boot = "nvme", "nvme,drive=disk0,serial=drover0"
		}
		wantDrives := []string{
			"if=none,id=data1,format=raw,file=/tmp/empty.raw",
			"if=none,id=data2,format=raw,file=/tmp/a,,b.raw",
		}
		drives := argValues(a, "-drive")
		if got := drives[len(drives)-2:]; !slices.Equal(got, wantDrives) {
			t.Errorf("nvme=%v: data drives %q, want %q", nvme, got, wantDrives)
		}
		wantDevices := []string{boot, dev + ",drive=data1,serial=drover-data1", dev + ",drive=data2,serial=drover-data2"}
		var devices []string
		for _, d := range argValues(a, "-device") {
			if strings.Contains(d, "drive=") {
				devices = append(devices, d)
			}
		}
		if !slices.Equal(devices, wantDevices) {
			t.Errorf("nvme=%v: disk devices %q, want %q (the boot disk first)", nvme, devices, wantDevices)
		}
		for _, d := range drives {
			if strings.Contains(d, "data") && strings.Contains(d, "readonly") {
				t.Errorf("a data disk is read-only: %s", d)
			}
		}
	}
	if a := testConfig().Args(false); slices.ContainsFunc(argValues(a, "-drive"), func(d string) bool { return strings.Contains(d, "id=data") }) {
		t.Errorf("data drives without DataDisks: %q", a)
	}
}

// A query-blockstats answer as QEMU 9 gives it for the boot disk (a
// qcow2 overlay: the device's own counters at the top, the file's under
// "parent"); the guest's reads are the top ones.
const blockstatsReply = `[{"device": "disk0", "parent": {"stats": {"wr_bytes": 0, "rd_bytes": 7, "rd_operations": 1, "wr_operations": 0}, "node-name": "#block009", "driver-specific": {"driver": "file"}}, "stats": {"unmap_operations": 0, "wr_highest_offset": 0, "wr_bytes": 4096, "timed_stats": [], "account_invalid": true, "rd_bytes": 123731968, "rd_merged": 0, "rd_operations": 5012, "wr_operations": 2}, "node-name": "#block132"},
 {"device": "data1", "stats": {"rd_bytes": 512, "rd_operations": 1, "wr_bytes": 0, "wr_operations": 0}}]`

func TestParseBlockStats(t *testing.T) {
	got, err := parseBlockStats(json.RawMessage(blockstatsReply), BootDisk)
	if err != nil {
		t.Fatal(err)
	}
	if want := (BlockStats{ReadBytes: 123731968, ReadOps: 5012, WriteBytes: 4096, WriteOps: 2}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if _, err := parseBlockStats(json.RawMessage(blockstatsReply), "disk9"); err == nil || !strings.Contains(err.Error(), `"data1"`) {
		t.Errorf("an unknown drive: %v, want an error naming the drives there are", err)
	}
}

// TestArgsHostForwards: each host forward reaches its guest port, in a
// stable order (the host address sorted), so two runs give equal args.
func TestArgsHostForwards(t *testing.T) {
	c := testConfig()
	c.HostFwd = map[string]int{"127.0.0.1:40002": 10250, "127.0.0.1:40001": 22}
	nd := one(t, c.Args(false), "-netdev")
	if want := "user,id=n0,hostfwd=tcp:127.0.0.1:40001-:22,hostfwd=tcp:127.0.0.1:40002-:10250"; nd != want {
		t.Errorf("-netdev\n got %s\nwant %s", nd, want)
	}
}
