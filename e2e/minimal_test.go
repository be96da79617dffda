//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/erofs/go-erofs"

	"github.com/drover-os/drover/internal/erofsutils"
)

// reportUnit prints what the test checks on the serial console at every
// boot: the mounts, whether / is writable, whether an /etc edit from the
// previous boot survived, and the boots recorded in /var.
const reportUnit = `
files:
  - path: /usr/lib/systemd/system/drover-e2e-report.service
    content: |
      [Unit]
      Description=drover e2e report
      After=local-fs.target
      [Service]
      Type=oneshot
      StandardOutput=journal+console
      ExecStart=/bin/sh -c 'echo E2E-REPORT-BEGIN; while read -r l; do echo "E2E-MOUNT $l"; done < /proc/mounts; if [ -e /etc/e2e-edit ]; then echo E2E-ETC-EDIT-PRESENT; else echo E2E-ETC-EDIT-ABSENT; fi; echo edited > /etc/e2e-edit; mkdir -p /var/lib/e2e; if [ -e /var/lib/e2e/boots ]; then while read -r l; do echo "E2E-VAR-RECORD $l"; done < /var/lib/e2e/boots; fi; echo boot >> /var/lib/e2e/boots; if ( : > /e2e-rw ) 2>/dev/null; then echo E2E-ROOT-WRITABLE; else echo E2E-ROOT-READONLY; fi; if ( : > /usr/e2e-rw ) 2>/dev/null; then echo E2E-USR-WRITABLE; else echo E2E-USR-READONLY; fi; sync; echo E2E-REPORT-END'
      [Install]
      WantedBy=multi-user.target
units:
  enable: [drover-e2e-report.service]
`

// testRecipe writes minimal.yaml plus the report unit into dir, with the
// shipped lock (files and units do not change the lock's inputs).
func testRecipe(t *testing.T, dir string) string {
	src, err := os.ReadFile(filepath.Join(repo, "recipes", "minimal.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	lock, err := os.ReadFile(filepath.Join(repo, "recipes", "minimal.yaml.lock"))
	if err != nil {
		t.Fatal(err)
	}
	// The report unit must be enabled; minimal.yaml has a units: section.
	text := strings.Replace(string(src), "units:\n", "units:\n  enable: [drover-e2e-report.service]\n", 1)
	text += strings.SplitN(reportUnit, "units:", 2)[0]
	p := filepath.Join(dir, "minimal.yaml")
	os.WriteFile(p, []byte(text), 0o644)
	os.WriteFile(p+".lock", lock, 0o644)
	return p
}

func buildAs(t *testing.T, user, recipe, cache, out string) {
	t.Helper()
	args := []string{"build", recipe, "-o", out, "--cache", cache, "--agent", bin("drover-agent"), "--init", bin("drover-init")}
	if user == "" {
		run(t, bin("drover"), args...)
		return
	}
	run(t, "runuser", append([]string{"-u", user, "--", bin("drover")}, args...)...)
}

func TestMinimalImage(t *testing.T) {
	// Not t.TempDir: its parent is private to root, and the rootless
	// build runs as nobody.
	work, err := os.MkdirTemp("", "drover-e2e-minimal-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	os.Chmod(work, 0o777)
	recipe := testRecipe(t, work)

	// Rootless: an unprivileged user with its own cache and output dir.
	nobodyCache, nobodyOut := filepath.Join(work, "nobody-cache"), filepath.Join(work, "nobody-out")
	for _, d := range []string{nobodyCache, nobodyOut} {
		os.MkdirAll(d, 0o777)
		os.Chmod(d, 0o777)
	}
	buildAs(t, "nobody", recipe, nobodyCache, nobodyOut)

	// Reproducible: a second clean build, separate cache and output.
	out := filepath.Join(work, "out")
	buildAs(t, "", recipe, filepath.Join(work, "cache"), out)
	raw := filepath.Join(out, "minimal.raw")
	a, b := fileSHA(t, filepath.Join(nobodyOut, "minimal.raw")), fileSHA(t, raw)
	if a != b {
		t.Fatalf("two clean builds differ: %s vs %s", a, b)
	}
	t.Logf("reproducible: minimal.raw sha256 %s", a)

	t.Run("independent checks", func(t *testing.T) { independentChecks(t, out, raw, "minimal") })
	t.Run("dm tests on the image kernel", func(t *testing.T) {
		guestTests(t, raw, readManifest(t, filepath.Join(out, "minimal.manifest.json")))
	})

	t.Run("boot virtio twice", func(t *testing.T) {
		state := filepath.Join(work, "vm-virtio")
		first := bootAndReport(t, raw, state, false)
		for _, want := range []string{"E2E-ETC-EDIT-ABSENT", "E2E-ROOT-READONLY", "E2E-USR-READONLY"} {
			if !strings.Contains(first, want) {
				t.Errorf("first boot: console lacks %s", want)
			}
		}
		checkMounts(t, first, "vda")
		if !systemdBanner.MatchString(first) {
			t.Errorf("first boot: no systemd banner (%s) on the console: the tamper test's \"systemd never started\" would prove nothing", systemdBanner)
		}
		second := bootAndReport(t, raw, state, false)
		if !strings.Contains(second, "E2E-VAR-RECORD boot") {
			t.Error("second boot: the file written to /var on the first boot is gone")
		}
		if !strings.Contains(second, "E2E-ETC-EDIT-ABSENT") {
			t.Error("second boot: the edit made to /etc on the first boot survived")
		}
	})
	t.Run("boot nvme", func(t *testing.T) {
		log := bootAndReport(t, raw, filepath.Join(work, "vm-nvme"), true)
		checkMounts(t, log, "nvme0n1")
	})
	t.Run("tamper", func(t *testing.T) { tamper(t, work, raw) })
}

// bootAndReport boots until the report is complete and returns the console.
func bootAndReport(t *testing.T, raw, state string, nvme bool) string {
	t.Helper()
	start := time.Now()
	vm, _ := boot(t, raw, state, nvme, 12*time.Minute, "E2E-REPORT-END")
	defer vm.Stop()
	if _, err := vm.WaitFor(t.Context(), "Reached target multi-user.target"); err != nil {
		t.Fatalf("multi-user.target: %v", err)
	}
	t.Logf("booted and reported in %s", time.Since(start).Round(time.Second))
	return vm.Log()
}

func checkMounts(t *testing.T, console, disk string) {
	t.Helper()
	var root, varm, etc string
	for _, line := range strings.Split(console, "\n") {
		i := strings.Index(line, "E2E-MOUNT ")
		if i < 0 {
			continue
		}
		f := strings.Fields(line[i+len("E2E-MOUNT "):])
		if len(f) < 4 {
			continue
		}
		switch f[1] {
		case "/":
			root = strings.Join(f[:4], " ")
		case "/var":
			varm = strings.Join(f[:4], " ")
		case "/etc":
			etc = strings.Join(f[:4], " ")
		}
	}
	if !strings.Contains(root, " / erofs ro") || !(strings.Contains(root, "dm-") || strings.Contains(root, "mapper")) {
		t.Errorf("/ is not the read-only erofs on the verity device: %q", root)
	}
	if !strings.HasPrefix(varm, "/dev/"+disk) || !strings.Contains(varm, " /var ext4 rw") {
		t.Errorf("/var is not the ext4 var partition of %s: %q", disk, varm)
	}
	if !strings.Contains(etc, " /etc overlay rw") {
		t.Errorf("/etc is not an overlay: %q", etc)
	}
}

// independentChecks checks the image out/name.raw with the tools of its
// formats (sfdisk, fsck.fat, fsck.erofs that reads the root's compression,
// veritysetup, qemu-img) and
// returns the root file system it extracted, in a directory of t's.
func independentChecks(t *testing.T, out, raw, name string) (rootImg string) {
	mf := readManifest(t, filepath.Join(out, name+".manifest.json"))
	sf := run(t, "sfdisk", "--json", raw)
	for _, want := range []string{"C12A7328-F81F-11D2-BA4B-00A0C93EC93B", "4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709", "2C7357ED-EBD2-46D9-AEC1-23D437EC2BF5"} {
		if !strings.Contains(strings.ToUpper(sf), want) {
			t.Errorf("sfdisk --json lacks partition type %s:\n%s", want, sf)
		}
	}
	t.Logf("sfdisk --json:\n%s", sf)
	dir := t.TempDir()
	parts := map[string][2]int64{}
	for _, p := range mf.Partitions {
		parts[p.Name] = [2]int64{p.Offset, p.Size}
	}
	extract(t, raw, parts["esp"][0], parts["esp"][1], filepath.Join(dir, "esp.img"))
	t.Log(run(t, "fsck.fat", "-n", filepath.Join(dir, "esp.img")))
	extract(t, raw, parts["root"][0], parts["root"][1], filepath.Join(dir, "root.img"))
	fsck, err := erofsutils.Tool("fsck.erofs", mf.RootFS.Compression)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(run(t, fsck, filepath.Join(dir, "root.img")))
	extract(t, raw, parts["root-verity"][0], parts["root-verity"][1], filepath.Join(dir, "verity.img"))
	t.Log(run(t, "veritysetup", "verify", filepath.Join(dir, "root.img"), filepath.Join(dir, "verity.img"), mf.RootHash))
	t.Log(run(t, "qemu-img", "check", filepath.Join(out, name+".qcow2")))
	return filepath.Join(dir, "root.img")
}

// systemdBanner is systemd's first line as PID 1 on the console
// ("systemd 257.9-1~deb13u1 running in system mode (+PAM …)"); the good
// boots require it, so its absence after a tampered boot means something.
var systemdBanner = regexp.MustCompile(`systemd \S+ running in system mode`)

// tamper boots two copies of the image, each with one byte flipped in the
// root partition — in the erofs superblock, and in the first data block of
// systemd's binary as the erofs inode maps it — and requires dm-verity to
// name exactly that block, the kernel to restart for it, and systemd never
// to start.
func tamper(t *testing.T, work, raw string) {
	mf := readManifest(t, strings.TrimSuffix(raw, ".raw")+".manifest.json")
	root := partition(t, mf, "root")
	rfs := rootFS(t, raw, mf)
	const blockSize = 4096

	// The superblock lies at byte 1024 of block 0; byte 48 of it starts
	// the filesystem UUID, which nothing but verity would notice changing.
	superblock := int64(1024 + 48)
	if sb := readAt(t, raw, root.Offset+1024, 4); !bytes.Equal(sb, []byte{0xe2, 0xe1, 0xf5, 0xe0}) {
		t.Fatalf("no erofs superblock magic at byte 1024 of the root partition: % x", sb)
	}

	const sd = "usr/lib/systemd/systemd"
	fi, err := fs.Stat(rfs, sd)
	if err != nil {
		t.Fatalf("stat %s in the image's erofs: %v", sd, err)
	}
	dr, ok := fi.(interface{ DataRange() []erofs.DataRange })
	if !ok || len(dr.DataRange()) == 0 || dr.DataRange()[0].Offset < 0 {
		t.Fatalf("%s: the erofs inode gives no data range", sd)
	}
	first := dr.DataRange()[0]
	content, err := fs.ReadFile(rfs, sd)
	if err != nil {
		t.Fatal(err)
	}
	if first.Size < blockSize || !bytes.Equal(readAt(t, raw, root.Offset+first.Offset, blockSize), content[:blockSize]) {
		t.Fatalf("%s: the data range %+v does not hold the file's first block", sd, first)
	}
	systemdByte := first.Offset + 100 // inside the ELF header, read by execve

	for i, c := range []struct {
		name string
		off  int64 // in the root partition
	}{
		{"erofs superblock", superblock},
		{"first block of systemd", systemdByte},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := filepath.Join(work, "tampered.raw")
			run(t, "cp", "--sparse=always", raw, bad)
			defer os.Remove(bad)
			flipByte(t, bad, root.Offset+c.off)
			block := c.off / blockSize
			start := time.Now()
			restart := "Restarting system with command 'dm-verity device corrupted'"
			vm, got := boot(t, bad, filepath.Join(work, fmt.Sprintf("vm-tamper-%d", i)), false, 12*time.Minute,
				restart, "Reached target multi-user.target")
			defer vm.Stop()
			if got != restart {
				t.Fatalf("tampered image booted to multi-user.target:\n%s", tail(vm.Log(), 40))
			}
			vm.Wait()
			log := vm.Log()
			corrupted := regexp.MustCompile(fmt.Sprintf(`device-mapper: verity: \d+:\d+: data block %d is corrupted`, block))
			if !corrupted.MatchString(log) {
				t.Errorf("no kernel line %q on the console", corrupted)
			}
			if systemdBanner.MatchString(log) || strings.Contains(log, "Welcome to") {
				t.Errorf("systemd started on the tampered image")
			}
			t.Logf("byte %d of the root partition (data block %d) flipped; the boot stopped in %s:\n%s",
				c.off, block, time.Since(start).Round(time.Second), tail(log, 8))
		})
	}
}
