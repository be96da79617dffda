package initrd

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/internal/reprotest"
)

// input is what Write is given: the archive's entries and the mtime every
// header carries. The host conditions may list the entries in another order
// or express the mtime in another zone, never change either.
type input struct {
	files []File
	mtime time.Time
}

func detInput() input {
	return input{
		mtime: time.Date(2025, 11, 24, 16, 0, 1, 0, time.UTC),
		files: []File{
			{Path: "/init", Mode: 0o755, Data: bytes.Repeat([]byte("\x7fELF drover-init "), 4096)},
			{Path: "/etc/drover-init.json", Mode: 0o644, Data: []byte(`{"modules":["kernel/fs/erofs/erofs.ko.xz"]}`)},
			{Path: "/etc/private", Mode: 0o600, Data: []byte("only root reads this")},
			// An explicit directory that is also an implicit parent, and a
			// mode no umask-derived default would give.
			{Path: "/lib/modules/6.12.0/kernel", Dir: true, Mode: 0o750},
			{Path: "/lib/modules/6.12.0/kernel/fs/erofs/erofs.ko.xz", Mode: 0o644, Data: []byte("erofs")},
			{Path: "/lib/modules/6.12.0/kernel/drivers/md/dm-verity.ko.xz", Mode: 0o644, Data: []byte("dm-verity")},
			{Path: "/lib/modules/6.12.0/kernel/drivers/md/dm-mod.ko.xz", Mode: 0o644},
			{Path: "/sbin/init", Target: "/init"},
			{Path: "/dev", Dir: true, Mode: 0o755},
			{Path: "/proc", Dir: true, Mode: 0o555},
			{Path: "/usr/bin/tool", Mode: 0o4755, Data: []byte("setuid")},
		},
	}
}

// detNames is what cpio -t lists for detInput, in archive order.
const detNames = "dev etc etc/drover-init.json etc/private init lib lib/modules lib/modules/6.12.0 lib/modules/6.12.0/kernel " +
	"lib/modules/6.12.0/kernel/drivers lib/modules/6.12.0/kernel/drivers/md lib/modules/6.12.0/kernel/drivers/md/dm-mod.ko.xz " +
	"lib/modules/6.12.0/kernel/drivers/md/dm-verity.ko.xz lib/modules/6.12.0/kernel/fs lib/modules/6.12.0/kernel/fs/erofs " +
	"lib/modules/6.12.0/kernel/fs/erofs/erofs.ko.xz proc sbin sbin/init usr usr/bin usr/bin/tool"

func buildInitrd(t *testing.T, in input) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, in.files, in.mtime); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestWriteIsReproducible builds detInput once, checks it with gzip and
// cpio, then builds it again under each condition a build host varies
// (wall clock, umask, input order, time zone) and once under all of them,
// and requires the baseline's bytes every time.
func TestWriteIsReproducible(t *testing.T) {
	base := buildInitrd(t, detInput())
	baseDone := time.Now()
	checkWithCpio(t, base)

	// cpio and gzip store whole seconds.
	reprotest.VaryHost(t, baseDone, time.Second, reprotest.Input[input]{
		New:     func(*testing.T) input { return detInput() },
		Reverse: func(in *input) { slices.Reverse(in.files) },
		Shuffle: func(in *input) { reprotest.Shuffle(in.files) },
		Time:    func(in *input) *time.Time { return &in.mtime },
	}, func(t *testing.T, in input) {
		got := buildInitrd(t, in)
		reprotest.Same(t, "the initrd's gzip stream", base, got, func(int) string { return cpioDiff(base, got) })
	})
}

// cpioDiff names, when the gzip streams base and got differ, the first
// differing byte of the cpio archives they hold and its entry.
func cpioDiff(base, got []byte) string {
	ub, errB := gunzip(base)
	ug, errG := gunzip(got)
	switch {
	case errB != nil || errG != nil:
		return fmt.Sprintf("gunzip: %v, %v", errB, errG)
	case bytes.Equal(ub, ug):
		return "the cpio archives are identical, only the gzip wrapper differs"
	default:
		off := reprotest.FirstDiff(ub, ug)
		return fmt.Sprintf("cpio byte %d, in %s", off, entryAt(ub, off))
	}
}

// gunzip uses the standard library's decoder, not the writer's.
func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	_, err = out.ReadFrom(zr)
	return out.Bytes(), err
}

// entryAt names the newc entry of archive that holds byte off: 110-byte
// header of hex fields, NUL-terminated name, data, each padded to 4 bytes.
func entryAt(archive []byte, off int) string {
	pad := func(n int) int { return (n + 3) &^ 3 }
	for pos := 0; pos+110 <= len(archive); {
		field := func(i int) int {
			n, _ := strconv.ParseUint(string(archive[pos+6+8*i:pos+14+8*i]), 16, 32)
			return int(n)
		}
		size, nameSize := field(6), field(11)
		if string(archive[pos:pos+6]) != "070701" || nameSize < 1 || pos+110+nameSize > len(archive) {
			return fmt.Sprintf("unparsable data at byte %d", pos)
		}
		name := string(archive[pos+110 : pos+110+nameSize-1])
		end := pad(pad(pos+110+nameSize) + size)
		if off < end {
			return fmt.Sprintf("entry %q (header at byte %d)", name, pos)
		}
		pos = end
	}
	return "the archive's end"
}

// checkWithCpio lists the archive with gzip and GNU cpio, tools independent
// of the writer's libraries. A missing tool fails the test:
// scripts/host-setup.sh installs both.
func checkWithCpio(t *testing.T, archive []byte) {
	t.Helper()
	gzipPath, cpioPath := reprotest.Tool(t, "gzip", "gzip"), reprotest.Tool(t, "cpio", "cpio")
	gz := exec.Command(gzipPath, "-dc")
	gz.Stdin = bytes.NewReader(archive)
	raw, err := gz.Output()
	if err != nil {
		t.Fatalf("gzip -dc: %v", err)
	}
	list := exec.Command(cpioPath, "-i", "-t", "--quiet")
	list.Stdin = bytes.NewReader(raw)
	var stderr bytes.Buffer
	list.Stderr = &stderr
	out, err := list.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("cpio -t: %v\n%s", err, stderr.Bytes())
	}
	if got := strings.Join(strings.Fields(string(out)), " "); got != detNames {
		t.Errorf("cpio -t lists\n%s\nwant\n%s", got, detNames)
	}
}

// TestWriteAcceptsAndRejectsInAnyOrder: whether a list is valid, and what an
// explicit directory's entry is, must not depend on the order it is given in.
func TestWriteAcceptsAndRejectsInAnyOrder(t *testing.T) {
	dir := File{Path: "/a", Dir: true, Mode: 0o700}
	child := File{Path: "/a/b", Mode: 0o644, Data: []byte("b")}
	for _, files := range [][]File{{dir, child}, {child, dir}} {
		var b bytes.Buffer
		if err := Write(&b, files, time.Unix(0, 0)); err != nil {
			t.Fatalf("explicit directory /a with /a/b, %s first: %v", files[0].Path, err)
		}
		raw, err := gunzip(b.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		// The first entry is "a": its mode field is the 2nd hex field.
		if mode := string(raw[14:22]); mode != "000041C0" {
			t.Errorf("%s first: /a has mode %s, want 000041C0 (a directory, 0700)", files[0].Path, mode)
		}
	}
	file := File{Path: "/a", Mode: 0o644}
	link := File{Path: "/a", Target: "/x"}
	for name, files := range map[string][]File{
		"file then child":    {file, child},
		"child then file":    {child, file},
		"symlink then child": {link, child},
		"child then symlink": {child, link},
		"duplicate":          {child, dir, child},
	} {
		if err := Write(io.Discard, files, time.Unix(0, 0)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
