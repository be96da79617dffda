package gpt

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
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
// around the build and re-express the input (the layout's partitions listed
// in another order, their entry numbers kept), never its content.
type input struct {
	layout *Layout
	guid   string
	dir    string // made before any condition, so a umask cannot lock the test out of it
}

const varUUID = "4e1a6c3b-2d5f-4a8e-9b7c-1d2e3f405162"

func detInput(t *testing.T) input {
	t.Helper()
	l, err := Plan(append(smallParts(t), Var(varUUID, 0)), 16<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	return input{layout: l, guid: diskGUID, dir: t.TempDir()}
}

// buildDisk writes the table the way the image builder does: into a new
// file (created under the umask in force) truncated to the disk size.
func buildDisk(t *testing.T, in input) []byte {
	t.Helper()
	p := filepath.Join(in.dir, "disk.raw")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(in.layout.DiskSize); err != nil {
		t.Fatal(err)
	}
	if err := Write(f, in.layout, in.guid); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWriteIsReproducible writes detInput's table once, checks it with
// sfdisk, then writes it again under each condition a build host varies
// (clock, umask, partition order in the layout, time zone) and once under
// all of them, and requires the baseline's bytes every time.
func TestWriteIsReproducible(t *testing.T) {
	base := buildDisk(t, detInput(t))
	baseDone := time.Now()
	checkWithSfdisk(t, base, detInput(t))

	conditions := []struct {
		name  string
		apply []func(*testing.T, *input)
	}{
		// GPT stores no time; a second is the finest clock a planted
		// timestamp or time-seeded GUID would show at.
		{"clock", []func(*testing.T, *input){otherClock(baseDone, time.Second)}},
		{"umask", []func(*testing.T, *input){otherUmask}},
		{"order reversed", []func(*testing.T, *input){reversed}},
		{"order shuffled", []func(*testing.T, *input){shuffled}},
		{"TZ", []func(*testing.T, *input){otherZone}},
		{"all at once", []func(*testing.T, *input){otherClock(baseDone, time.Second), otherUmask, shuffled, otherZone}},
	}
	for _, c := range conditions {
		t.Run(c.name, func(t *testing.T) {
			in := detInput(t)
			for _, apply := range c.apply {
				apply(t, &in)
			}
			sameDisk(t, base, buildDisk(t, in))
		})
	}
}

// otherClock moves the clock a writer could read: SOURCE_DATE_EPOCH for code
// that follows that convention, and the wall clock past the next tick after
// the baseline build ended.
func otherClock(after time.Time, tick time.Duration) func(*testing.T, *input) {
	return func(t *testing.T, _ *input) {
		t.Setenv("SOURCE_DATE_EPOCH", "4102444800") // 2100-01-01
		time.Sleep(time.Until(after.Truncate(tick).Add(tick)))
	}
}

// otherUmask sets a umask other than the process's until the subtest ends;
// 0277 also masks the owner's write bit.
func otherUmask(t *testing.T, _ *input) {
	old := syscall.Umask(0o277)
	if old == 0o277 {
		syscall.Umask(0o000)
	}
	t.Cleanup(func() { syscall.Umask(old) })
}

// reversed and shuffled reorder a copy of the layout's partitions; each
// keeps its Index, so the table is the same.
func reversed(_ *testing.T, in *input) {
	l := *in.layout
	l.Parts = append([]Placed(nil), l.Parts...)
	for i, j := 0, len(l.Parts)-1; i < j; i, j = i+1, j-1 {
		l.Parts[i], l.Parts[j] = l.Parts[j], l.Parts[i]
	}
	in.layout = &l
}

func shuffled(_ *testing.T, in *input) {
	l := *in.layout
	l.Parts = append([]Placed(nil), l.Parts...)
	r := rand.New(rand.NewPCG(24, 7))
	for l.Parts[0].Index == 1 { // not the planned order
		r.Shuffle(len(l.Parts), func(i, j int) { l.Parts[i], l.Parts[j] = l.Parts[j], l.Parts[i] })
	}
	in.layout = &l
}

// otherZone sets TZ and time.Local to a zone with an odd offset (not the
// process's) until the subtest ends.
func otherZone(t *testing.T, _ *input) {
	loc, tz := time.FixedZone("+0545", 5*3600+45*60), "<+0545>-05:45"
	if _, off := time.Now().Zone(); off == 5*3600+45*60 {
		loc, tz = time.FixedZone("-0930", -(9*3600+30*60)), "<-0930>09:30"
	}
	t.Setenv("TZ", tz)
	old := time.Local
	time.Local = loc
	t.Cleanup(func() { time.Local = old })
}

// sameDisk fails unless got is base, naming the first differing byte and
// the GPT structure that holds it.
func sameDisk(t *testing.T, base, got []byte) {
	t.Helper()
	if bytes.Equal(base, got) {
		return
	}
	msg := fmt.Sprintf("the disk differs from the baseline: sha256 %x (%d bytes), baseline %x (%d bytes)",
		sha256.Sum256(got), len(got), sha256.Sum256(base), len(base))
	if len(got) != len(base) {
		t.Fatal(msg)
	}
	off := 0
	for base[off] == got[off] {
		off++
	}
	lba, last := off/SectorSize, len(base)/SectorSize-1
	var where string
	switch {
	case lba == 0:
		where = "the protective MBR"
	case lba == 1:
		where = "the primary GPT header"
	case lba < firstUsableLBA:
		where = fmt.Sprintf("the primary entry array, entry %d", (off-2*SectorSize)/entryBytes+1)
	case lba == last:
		where = "the backup GPT header"
	case lba >= last-arraySectors:
		where = fmt.Sprintf("the backup entry array, entry %d", (off-(last-arraySectors)*SectorSize)/entryBytes+1)
	default:
		where = "the partitions' space, which Write must not touch"
	}
	t.Fatalf("%s; first difference at byte %d (LBA %d): %s", msg, off, lba, where)
}

// checkWithSfdisk reads the table with util-linux's sfdisk: --verify finds
// no error, and --json shows the disk GUID and each partition as planned.
// A missing sfdisk fails the test: scripts/host-setup.sh installs it.
func checkWithSfdisk(t *testing.T, disk []byte, in input) {
	t.Helper()
	sfdisk, err := exec.LookPath("sfdisk")
	if err != nil {
		t.Fatal("sfdisk not found: install the Debian package fdisk (scripts/host-setup.sh)")
	}
	p := filepath.Join(t.TempDir(), "disk.raw")
	if err := os.WriteFile(p, disk, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(sfdisk, "--verify", p).CombinedOutput(); err != nil || !strings.Contains(string(out), "No errors detected") {
		t.Errorf("sfdisk --verify: %v\n%s", err, out)
	}
	out, err := exec.Command(sfdisk, "--json", p).Output()
	if err != nil {
		t.Fatalf("sfdisk --json: %v", err)
	}
	var dump struct {
		PartitionTable struct {
			Label      string `json:"label"`
			ID         string `json:"id"`
			Partitions []struct {
				Start int64  `json:"start"`
				Size  int64  `json:"size"`
				UUID  string `json:"uuid"`
				Name  string `json:"name"`
			} `json:"partitions"`
		} `json:"partitiontable"`
	}
	if err := json.Unmarshal(out, &dump); err != nil {
		t.Fatalf("sfdisk --json: %v\n%s", err, out)
	}
	pt := dump.PartitionTable
	if pt.Label != "gpt" || !strings.EqualFold(pt.ID, in.guid) || len(pt.Partitions) != len(in.layout.Parts) {
		t.Fatalf("sfdisk sees label %q, id %q, %d partitions; want gpt, %s, %d:\n%s", pt.Label, pt.ID, len(pt.Partitions), in.guid, len(in.layout.Parts), out)
	}
	for i, got := range pt.Partitions {
		want := in.layout.Parts[i]
		if got.Start != int64(want.FirstLBA) || got.Size != want.Length/SectorSize || !strings.EqualFold(got.UUID, want.UUID) || got.Name != want.Name {
			t.Errorf("sfdisk partition %d = %+v, want start %d size %d uuid %s name %s", i+1, got, want.FirstLBA, want.Length/SectorSize, want.UUID, want.Name)
		}
	}
}

// TestWriteRefusesPartsWithoutGUIDs: go-diskfs would draw a random GUID for
// an empty partition UUID, so two writes of one layout would differ.
func TestWriteRefusesPartsWithoutGUIDs(t *testing.T) {
	for name, spoil := range map[string]func(p *Placed){
		"empty UUID": func(p *Placed) { p.UUID = "" },
		"nil UUID":   func(p *Placed) { p.UUID = "00000000-0000-0000-0000-000000000000" },
		"empty type": func(p *Placed) { p.Type = "" },
	} {
		t.Run(name, func(t *testing.T) {
			in := detInput(t)
			spoil(&in.layout.Parts[1])
			disk := memDisk(make([]byte, in.layout.DiskSize))
			err := Write(disk, in.layout, in.guid)
			if err == nil || !strings.Contains(err.Error(), `partition 2 ("root")`) {
				t.Errorf("err = %v, want a refusal naming partition 2", err)
			}
		})
	}
}
