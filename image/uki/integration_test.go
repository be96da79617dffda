//go:build integration

package uki

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/drover-os/drover/image/pe"
	"github.com/drover-os/drover/image/pe/petest"
)

// TestObjdump reads a UKI with binutils' objdump, an independent PE
// parser: every section appears with the size, address and file offset
// the assembler chose, and objdump's own view of the PE header agrees.
func TestObjdump(t *testing.T) {
	objdump, err := exec.LookPath("objdump")
	if err != nil {
		t.Fatal("objdump not found: install the Debian package binutils (scripts/host-setup.sh)")
	}
	img, err := Build(petest.Stub(9000, 120), testParts())
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "uki.efi")
	if err := os.WriteFile(p, img, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(objdump, "-h", p).CombinedOutput()
	if err != nil {
		t.Fatalf("objdump -h: %v\n%s", err, out)
	}
	t.Logf("objdump -h:\n%s", out)
	if !strings.Contains(string(out), "file format pei-x86-64") {
		t.Fatal("objdump does not read the UKI as a PE32+ x86-64 image")
	}
	// "  6 .cmdline      00000022  0000000140006000  0000000140006000  00001c00  2**2"
	seen := map[string][3]uint64{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.HasPrefix(f[1], ".") {
			continue
		}
		var v [3]uint64
		for i, field := range []string{f[2], f[3], f[5]} {
			if v[i], err = strconv.ParseUint(field, 16, 64); err != nil {
				t.Fatalf("objdump line %q: %v", line, err)
			}
		}
		seen[f[1]] = v
	}
	im, _ := pe.Parse(img)
	for _, s := range im.Sections() {
		got, ok := seen[s.Name]
		// objdump prints the smaller of the virtual and raw size (as much
		// as the file holds) and the address with the image base.
		want := [3]uint64{uint64(min(s.VirtualSize, s.Size)), im.Opt.ImageBase + uint64(s.VirtualAddress), uint64(s.Offset)}
		if !ok || got != want {
			t.Errorf("objdump shows %s as size/vma/offset %s, the assembler wrote %s", s.Name, hex3(got), hex3(want))
		}
	}
	// The layout rule, checked on objdump's numbers alone: each added
	// section starts at the next 0x1000 boundary after the previous one
	// in memory and right after its 0x200-aligned data in the file, and
	// holds exactly its part.
	parts := testParts()
	sizes := map[string]int{".osrel": len(parts.OSRelease), ".cmdline": len(parts.Cmdline), ".uname": len(parts.Uname),
		".initrd": len(parts.Initrd), ".linux": len(parts.Linux)}
	prev := seen[".sbat"]
	for _, name := range []string{".osrel", ".cmdline", ".uname", ".initrd", ".linux"} {
		got, ok := seen[name]
		if !ok {
			t.Errorf("objdump lists no %s section", name)
			continue
		}
		want := [3]uint64{uint64(align(sizes[name], 1)), uint64(align(int(prev[1]+prev[0]), 0x1000)), uint64(align(int(prev[2]+prev[0]), 0x200))}
		if name == ".linux" {
			want[0] = uint64(align(sizes[name], 0x200)) // objdump shows the raw size where it is the smaller
		}
		if got != want {
			t.Errorf("objdump shows %s as size/vma/offset %s, the ukify layout is %s", name, hex3(got), hex3(want))
		}
		prev = got
	}
	px, err := exec.Command(objdump, "-p", p).CombinedOutput()
	if err != nil {
		t.Fatalf("objdump -p: %v\n%s", err, px)
	}
	for _, want := range []string{
		fmt.Sprintf("SizeOfImage\t\t%08x", im.Opt.SizeOfImage),
		fmt.Sprintf("CheckSum\t\t%08x", pe.Checksum(img, im.CheckSumOffset())),
	} {
		if !strings.Contains(string(px), want) {
			t.Errorf("objdump -p lacks %q", want)
		}
	}
}

func align(n, a int) int { return (n + a - 1) / a * a }

func hex3(v [3]uint64) string { return fmt.Sprintf("%#x/%#x/%#x", v[0], v[1], v[2]) }

// TestObjcopySBAT reads the merged .sbat back with binutils' objcopy: the
// stub's header line, then the added entry, and nothing else.
func TestObjcopySBAT(t *testing.T) {
	objcopy, err := exec.LookPath("objcopy")
	if err != nil {
		t.Fatal("objcopy not found: install the Debian package binutils (scripts/host-setup.sh)")
	}
	p := testParts()
	p.SBAT = []SBATEntry{droverEntry(9)}
	img, err := Build(petest.Stub(9000, 120), p)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	efi, dump := filepath.Join(dir, "uki.efi"), filepath.Join(dir, "sbat.csv")
	if err := os.WriteFile(efi, img, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(objcopy, "--dump-section", ".sbat="+dump, efi, filepath.Join(dir, "copy.efi")).CombinedOutput(); err != nil {
		t.Fatalf("objcopy --dump-section: %v\n%s", err, out)
	}
	got, _ := os.ReadFile(dump)
	want := "sbat,1,SBAT Version,sbat,1,https://github.com/rhboot/shim/blob/main/SBAT.md\n" +
		"drover,9,drover,minimal,20261121.091544,https://github.com/drover-os/drover\n"
	if string(got) != want {
		t.Errorf("objcopy dumps .sbat as\n%q\nwant\n%q", got, want)
	}
}
