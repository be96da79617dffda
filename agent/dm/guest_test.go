//go:build vmtest

// These tests need a kernel with device-mapper and dm-verity, which the
// build hosts' kernels may lack. They are built with -tags vmtest and run
// as root inside a QEMU guest booted from the minimal image's own kernel
// and initrd (e2e/guest_test.go, part of make e2e), which fails on any
// failure or skip here.
package dm

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/agent/dm/dmtest"
	"github.com/drover-os/drover/image/verity"
	"golang.org/x/sys/unix"
)

func tool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: apt-get install %s", name, pkg)
	}
	return p
}

// openTestControl opens the control node, creating it from sysfs when the
// host's /dev lacks it.
func openTestControl(t *testing.T) *Control {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("needs root for device-mapper: run in the QEMU guest (make e2e)")
	}
	sysDev := "/sys/class/misc/device-mapper/dev"
	if _, err := os.Stat(sysDev); err != nil {
		if p, err := exec.LookPath("modprobe"); err == nil {
			exec.Command(p, "dm_mod").Run()
		}
	}
	b, err := os.ReadFile(sysDev)
	if err != nil {
		t.Fatalf("the running kernel has no device-mapper (%v): run in the QEMU guest (make e2e), whose kernel has CONFIG_BLK_DEV_DM and CONFIG_DM_VERITY", err)
	}
	if _, err := os.Stat(ControlPath); errors.Is(err, os.ErrNotExist) {
		var major, minor uint32
		if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "%d:%d", &major, &minor); err != nil {
			t.Fatalf("parsing %s: %v", sysDev, err)
		}
		os.MkdirAll(filepath.Dir(ControlPath), 0o755)
		if err := unix.Mknod(ControlPath, unix.S_IFCHR|0o600, int(unix.Mkdev(major, minor))); err != nil {
			t.Fatalf("creating %s: %v", ControlPath, err)
		}
	}
	c, err := Open(ControlPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func loop(t *testing.T, path string) string {
	t.Helper()
	losetup := tool(t, "losetup", "mount")
	out, err := exec.Command(losetup, "--find", "--show", path).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup --find --show %s: %v: %s", path, err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command(losetup, "-d", dev).Run() })
	return dev
}

// veritysetupFormat builds the hash tree of data into hash with
// veritysetup and returns the parameters as a verity.Result.
func veritysetupFormat(t *testing.T, data, hash string) *verity.Result {
	t.Helper()
	vs := tool(t, "veritysetup", "cryptsetup-bin")
	out, err := exec.Command(vs, "format", data, hash).CombinedOutput()
	if err != nil {
		t.Fatalf("veritysetup format: %v: %s", err, out)
	}
	r := &verity.Result{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "Root hash":
			r.RootHash, err = hex.DecodeString(v)
		case "Salt":
			r.Salt, err = hex.DecodeString(v)
		case "Data blocks":
			r.DataBlocks, err = strconv.ParseUint(v, 10, 64)
		case "Data block size":
			var n uint64
			n, err = strconv.ParseUint(v, 10, 32)
			r.DataBlockSize = uint32(n)
		case "Hash block size":
			var n uint64
			n, err = strconv.ParseUint(v, 10, 32)
			r.HashBlockSize = uint32(n)
		}
		if err != nil {
			t.Fatalf("parsing veritysetup line %q: %v", sc.Text(), err)
		}
	}
	if len(r.RootHash) == 0 || r.DataBlocks == 0 || r.DataBlockSize == 0 {
		t.Fatalf("veritysetup output not understood:\n%s", out)
	}
	return r
}

// node waits (bounded) for devtmpfs to create /dev/dm-N, or makes it.
func node(t *testing.T, h Header) string {
	t.Helper()
	path := fmt.Sprintf("/dev/dm-%d", h.Minor())
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return path
		}
	}
	if err := unix.Mknod(path, unix.S_IFBLK|0o600, int(unix.Mkdev(h.Major(), h.Minor()))); err != nil {
		t.Fatalf("creating %s: %v", path, err)
	}
	return path
}

func removeEventually(t *testing.T, c *Control, name string) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err = c.Remove(name); err == nil || !errors.Is(err, unix.EBUSY) {
			break
		}
	}
	if err != nil {
		t.Errorf("removing %s: %v", name, err)
	}
	if _, err := c.Status(name); !errors.Is(err, unix.ENXIO) {
		t.Errorf("status of removed %s: %v, want ENXIO", name, err)
	}
}

func TestGuestVerityDevice(t *testing.T) {
	c := openTestControl(t)
	v, err := c.Version()
	if err != nil || v[0] != 4 {
		t.Fatalf("DM_VERSION = %v, %v", v, err)
	}
	t.Logf("device-mapper interface %d.%d.%d", v[0], v[1], v[2])

	dir := t.TempDir()
	dataPath, hashPath := filepath.Join(dir, "data.img"), filepath.Join(dir, "hash.img")
	data := make([]byte, 4<<20)
	rng := rand.NewChaCha8([32]byte{1})
	rng.Read(data)
	if err := os.WriteFile(dataPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hashPath, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := veritysetupFormat(t, dataPath, hashPath)
	dataDev, hashDev := loop(t, dataPath), loop(t, hashPath)

	name := fmt.Sprintf("drover-test-%d", os.Getpid())
	target := Target{Length: r.DataSectors(), Type: "verity", Params: verity.Table(dataDev, hashDev, r)}
	t.Logf("table: %s", target)
	h, err := c.CreateTable(name, "DROVER-TEST-"+name, []Target{target}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer removeEventually(t, c, name)
	st, err := c.Status(name)
	if err != nil || st.Flags&FlagReadOnly == 0 || st.Flags&FlagSuspend != 0 || st.Dev != h.Dev {
		t.Errorf("status %+v, %v: want read-only, active, dev %d", st, err, h.Dev)
	}
	dev := node(t, h)

	const block = 5
	bs := int(r.DataBlockSize)
	got, err := dmtest.ReadDirect(dev, int64(block*bs), bs)
	if err != nil {
		t.Fatalf("reading block %d through %s: %v", block, dev, err)
	}
	if !bytes.Equal(got, data[block*bs:(block+1)*bs]) {
		t.Fatalf("block %d read through verity differs from the data", block)
	}

	// Corrupt one byte of that block in the backing file: the loop device
	// reads through the file's page cache, so it sees the change at once.
	f, err := os.OpenFile(dataPath, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{data[block*bs+100] ^ 0xff}, int64(block*bs+100)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = dmtest.ReadDirect(dev, int64(block*bs), bs)
	if !errors.Is(err, unix.EIO) {
		t.Fatalf("reading the corrupted block: %v, want EIO", err)
	}
	if _, err := dmtest.ReadDirect(dev, 0, bs); err != nil {
		t.Errorf("reading an intact block after the corruption: %v", err)
	}
}

// TestGuestCreateTableCleansUp: a table the kernel refuses leaves no device.
func TestGuestCreateTableCleansUp(t *testing.T) {
	c := openTestControl(t)
	name := fmt.Sprintf("drover-bad-%d", os.Getpid())
	_, err := c.CreateTable(name, "", []Target{{Length: 8, Type: "verity", Params: "1 nonsense"}}, true)
	if err == nil {
		c.Remove(name)
		t.Fatal("a malformed verity table was accepted")
	}
	t.Logf("refused as expected: %v", err)
	if _, err := c.Status(name); !errors.Is(err, unix.ENXIO) {
		t.Errorf("status after the failed create: %v, want ENXIO (device left behind)", err)
	}
}
