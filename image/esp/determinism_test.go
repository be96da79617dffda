package esp

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// input is what a build is given; a condition may change the environment
// around the build and re-express the input (another order, another zone),
// never its content.
type input struct {
	files []File
	mtime time.Time
}

func detInput() input {
	uki := make([]byte, 1<<20+77)
	for i := range uki {
		uki[i] = byte(i*7 + i>>11)
	}
	// LoaderFiles ranges over the key map: its order differs run to run.
	files := LoaderFiles("EFI/BOOT/BOOTX64.EFI", uki, []byte("MZ systemd-boot"), map[string][]byte{
		"PK.auth": []byte("pk"), "KEK.auth": []byte("kek"), "db.auth": []byte("db"),
	})
	return input{
		// An odd second: FAT stores 2-second steps.
		mtime: time.Date(2025, 11, 24, 23, 30, 1, 0, time.UTC),
		files: append(files,
			// Long names whose 8.3 aliases collide: the ~1/~2 tails go by
			// creation order.
			File{Path: "EFI/Linux/drover-6.12.0-1.efi.extra", Data: []byte("one")},
			File{Path: "EFI/Linux/drover-6.12.0-2.efi.extra", Data: []byte("two")},
			File{Path: "EFI/Linux/Drover-6.12.0-3.efi.extra", Data: []byte("three")},
			File{Path: "empty"},
		),
	}
}

func buildESP(t *testing.T, in input) []byte {
	t.Helper()
	img, err := Build(MinSize(in.files), in.files, "DROVER-ESP", 0x5EED1234, in.mtime)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestBuildIsReproducible builds detInput once, checks it with fsck.fat,
// then builds it again under each condition a build host varies (clock,
// umask, input order, time zone) and once under all of them, and requires
// the baseline's bytes every time.
func TestBuildIsReproducible(t *testing.T) {
	base := buildESP(t, detInput())
	baseDone := time.Now()
	checkWithFsck(t, base, detInput().files)

	conditions := []struct {
		name  string
		apply []func(*testing.T, *input)
	}{
		// go-diskfs stamps time.Now, or SOURCE_DATE_EPOCH when set, into
		// every directory entry, in 2-second steps.
		{"clock", []func(*testing.T, *input){otherClock(baseDone, 2*time.Second)}},
		{"umask", []func(*testing.T, *input){otherUmask}},
		{"order reversed", []func(*testing.T, *input){reversed}},
		{"order shuffled", []func(*testing.T, *input){shuffled}},
		{"TZ", []func(*testing.T, *input){otherZone}},
		{"all at once", []func(*testing.T, *input){otherClock(baseDone, 2*time.Second), otherUmask, shuffled, otherZone}},
	}
	for _, c := range conditions {
		t.Run(c.name, func(t *testing.T) {
			in := detInput()
			for _, apply := range c.apply {
				apply(t, &in)
			}
			sameESP(t, base, buildESP(t, in))
		})
	}
}

// otherClock moves the clock a writer could read: SOURCE_DATE_EPOCH, which
// go-diskfs honours, and the wall clock past the next tick of the format's
// resolution after the baseline build ended.
func otherClock(after time.Time, tick time.Duration) func(*testing.T, *input) {
	return func(t *testing.T, _ *input) {
		t.Setenv("SOURCE_DATE_EPOCH", "4102444800") // 2100-01-01
		time.Sleep(time.Until(after.Truncate(tick).Add(tick)))
	}
}

// otherUmask sets a umask other than the process's until the subtest ends;
// 0277 also masks the owner's write bit, which a read-only flag could be
// derived from.
func otherUmask(t *testing.T, _ *input) {
	old := syscall.Umask(0o277)
	if old == 0o277 {
		syscall.Umask(0o000)
	}
	t.Cleanup(func() { syscall.Umask(old) })
}

func reversed(_ *testing.T, in *input) {
	for i, j := 0, len(in.files)-1; i < j; i, j = i+1, j-1 {
		in.files[i], in.files[j] = in.files[j], in.files[i]
	}
}

func shuffled(_ *testing.T, in *input) {
	r := rand.New(rand.NewPCG(24, 7))
	r.Shuffle(len(in.files), func(i, j int) { in.files[i], in.files[j] = in.files[j], in.files[i] })
}

// otherZone sets TZ and time.Local to a zone with an odd offset (not the
// process's) until the subtest ends, and hands the writer the same instant
// expressed in it.
func otherZone(t *testing.T, in *input) {
	loc, tz := time.FixedZone("+0545", 5*3600+45*60), "<+0545>-05:45"
	if _, off := in.mtime.In(time.Local).Zone(); off == 5*3600+45*60 {
		loc, tz = time.FixedZone("-0930", -(9*3600+30*60)), "<-0930>09:30"
	}
	t.Setenv("TZ", tz)
	old := time.Local
	time.Local = loc
	t.Cleanup(func() { time.Local = old })
	in.mtime = in.mtime.In(loc)
}

// sameESP fails unless got is base, naming the first differing byte and
// the FAT32 region that holds it.
func sameESP(t *testing.T, base, got []byte) {
	t.Helper()
	if bytes.Equal(base, got) {
		return
	}
	msg := fmt.Sprintf("the ESP differs from the baseline: sha256 %x (%d bytes), baseline %x (%d bytes)",
		sha256.Sum256(got), len(got), sha256.Sum256(base), len(base))
	if len(got) != len(base) {
		t.Fatal(msg)
	}
	off := 0
	for base[off] == got[off] {
		off++
	}
	g := geometryFor(int64(len(base)))
	var where string
	switch o := int64(off); {
	case o < reservedSectors*sectorSize:
		where = fmt.Sprintf("reserved sector %d (0 boot sector, 1 FSInfo, 6-7 their backups)", o/sectorSize)
	case o < g.dataStart:
		fat := (o - reservedSectors*sectorSize) / (g.sectorsPerFAT * sectorSize)
		where = fmt.Sprintf("FAT %d, the entry of cluster %d", fat+1, (o-reservedSectors*sectorSize-fat*g.sectorsPerFAT*sectorSize)/4)
	default:
		c := (o - g.dataStart) / g.clusterBytes
		where = fmt.Sprintf("cluster %d, byte %d in it", c+2, (o-g.dataStart)%g.clusterBytes)
	}
	t.Fatalf("%s; first difference at byte %d: %s", msg, off, where)
}

// checkWithFsck runs dosfstools' fsck.fat on img: -n exits 0 only when it
// would repair nothing, -l lists the files it checks. A missing fsck.fat
// fails the test: scripts/host-setup.sh installs it.
func checkWithFsck(t *testing.T, img []byte, files []File) {
	t.Helper()
	fsck, err := exec.LookPath("fsck.fat")
	if err != nil {
		t.Fatal("fsck.fat not found: install the Debian package dosfstools (scripts/host-setup.sh)")
	}
	p := filepath.Join(t.TempDir(), "esp.img")
	if err := os.WriteFile(p, img, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(fsck, "-n", "-l", p).CombinedOutput()
	if err != nil {
		t.Fatalf("fsck.fat -n -l: %v\n%s", err, out)
	}
	for _, f := range files {
		line := "Checking file /" + f.Path
		if !strings.Contains(string(out), line+"\n") && !strings.Contains(string(out), line+" (") {
			t.Errorf("fsck.fat -l does not list /%s:\n%s", f.Path, out)
		}
	}
}
