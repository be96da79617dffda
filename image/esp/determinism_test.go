package esp

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/internal/reprotest"
)

// input is what Build is given: the files and the time stamped on their
// directory entries. The host conditions may list the files in another
// order or express the time in another zone, never change either.
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

	// go-diskfs stamps time.Now, or SOURCE_DATE_EPOCH when set, into every
	// directory entry, in 2-second steps.
	reprotest.VaryHost(t, baseDone, 2*time.Second, reprotest.Input[input]{
		New:     func(*testing.T) input { return detInput() },
		Reverse: func(in *input) { slices.Reverse(in.files) },
		Shuffle: func(in *input) { reprotest.Shuffle(in.files) },
		Time:    func(in *input) *time.Time { return &in.mtime },
	}, func(t *testing.T, in input) {
		reprotest.Same(t, "the ESP", base, buildESP(t, in), fatArea(int64(len(base))))
	})
}

// fatArea names the FAT32 region of an image of size bytes that holds a
// byte.
func fatArea(size int64) func(off int) string {
	g := geometryFor(size)
	return func(off int) string {
		switch o := int64(off); {
		case o < reservedSectors*sectorSize:
			return fmt.Sprintf("reserved sector %d (0 boot sector, 1 FSInfo, 6-7 their backups)", o/sectorSize)
		case o < g.dataStart:
			fat := (o - reservedSectors*sectorSize) / (g.sectorsPerFAT * sectorSize)
			return fmt.Sprintf("FAT %d, the entry of cluster %d", fat+1, (o-reservedSectors*sectorSize-fat*g.sectorsPerFAT*sectorSize)/4)
		default:
			c := (o - g.dataStart) / g.clusterBytes
			return fmt.Sprintf("cluster %d, byte %d in it", c+2, (o-g.dataStart)%g.clusterBytes)
		}
	}
}

// checkWithFsck runs dosfstools' fsck.fat on img: -n exits 0 only when it
// would repair nothing, -l lists the files it checks. A missing fsck.fat
// fails the test: scripts/host-setup.sh installs it.
func checkWithFsck(t *testing.T, img []byte, files []File) {
	t.Helper()
	fsck := reprotest.Tool(t, "fsck.fat", "dosfstools")
	p := reprotest.WriteTemp(t, "esp.img", img)
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
