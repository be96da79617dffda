//go:build vmtest

// This test needs a kernel with device-mapper and dm-verity and ends with
// the kernel restarting the machine. It is built with -tags vmtest and run
// last, alone, inside the QEMU guest of e2e/guest_test.go (make e2e), which
// checks the kernel's corruption line and restart reason on the console.
package boot

import (
	"bytes"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/agent/dm/dmtest"
	"github.com/drover-os/drover/image/verity"
	"golang.org/x/sys/unix"
)

// GuestCorruptBlock is the data block TestGuestRestartOnCorruption
// corrupts; the host looks for the kernel's line naming it.
const GuestCorruptBlock = 7

// guestLoop attaches path to a free loop device and returns it as the
// sysfs scan would: name and major:minor.
func guestLoop(t *testing.T, path string) BlockDevice {
	t.Helper()
	out, err := exec.Command("losetup", "--find", "--show", path).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup --find --show %s: %v: %s", path, err, out)
	}
	node := strings.TrimSpace(string(out))
	var st unix.Stat_t
	if err := unix.Stat(node, &st); err != nil {
		t.Fatalf("stat %s: %v", node, err)
	}
	return BlockDevice{Name: filepath.Base(node), DevName: filepath.Base(node),
		Major: unix.Major(uint64(st.Rdev)), Minor: unix.Minor(uint64(st.Rdev))}
}

// TestGuestRestartOnCorruption runs drover-init's verity step (the table
// with restart_on_corruption, through the dm ioctls) over loop devices
// holding a tree from the builder's verity writer, reads an intact block,
// then corrupts another one and reads it: the kernel must restart the
// machine. Returning from that read at all is a failure.
func TestGuestRestartOnCorruption(t *testing.T) {
	dir := t.TempDir()
	dataPath, hashPath := filepath.Join(dir, "data.img"), filepath.Join(dir, "hash.img")
	data := make([]byte, 2<<20)
	rand.NewChaCha8([32]byte{7}).Read(data)
	if err := os.WriteFile(dataPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	hf, err := os.Create(hashPath)
	if err != nil {
		t.Fatal(err)
	}
	// Salt and UUID derived from the content, as the builder does.
	digest, err := verity.ContentDigest(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	r, err := verity.Write(bytes.NewReader(data), int64(len(data)), hf, verity.DeriveParams(digest))
	if cerr := hf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	dataDev, hashDev := guestLoop(t, dataPath), guestLoop(t, hashPath)

	var console strings.Builder
	log := NewLog(time.Now())
	log.AttachWriter(&console)
	log.SetDebug(true)
	m := NewMachine(DefaultPaths, log)
	m.Config = &Config{RootHash: hex.EncodeToString(r.RootHash), Verity: VerityConfig{
		DataBlocks: r.DataBlocks, DataBlockSize: r.DataBlockSize, HashBlockSize: r.HashBlockSize,
		HashStartBlock: 1, Salt: hex.EncodeToString(r.Salt), Algorithm: verity.Algorithm}}
	m.parts = BootPartitions{Root: dataDev, Verity: hashDev}
	err = m.setupVerity()
	t.Logf("verity step:\n%s", console.String())
	if err != nil {
		t.Fatal(err)
	}
	bs := int(r.DataBlockSize)
	got, err := dmtest.ReadDirect(m.rootDev, 0, bs)
	if err != nil || !bytes.Equal(got, data[:bs]) {
		t.Fatalf("reading intact block 0 through %s: %v (equal: %v)", m.rootDev, err, bytes.Equal(got, data[:bs]))
	}

	// The loop device reads through the backing file's page cache, so it
	// sees the flipped byte at once.
	off := int64(GuestCorruptBlock*bs + 123)
	f, err := os.OpenFile(dataPath, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{data[off] ^ 0x01}, off); err != nil {
		t.Fatal(err)
	}
	f.Close()
	t.Logf("reading corrupted data block %d through %s: the kernel must restart the machine now", GuestCorruptBlock, m.rootDev)
	_, err = dmtest.ReadDirect(m.rootDev, int64(GuestCorruptBlock*bs), bs)
	t.Fatalf("the read of the corrupted block returned (%v) and the machine is still running: restart_on_corruption did not act", err)
}
