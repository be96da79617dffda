package gpt

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-os/drover/internal/reprotest"
)

// input is what Write is given, the layout and the disk GUID, and where the
// disk file goes. The host conditions may list the layout's partitions in
// another order, their entry numbers kept, never change the table.
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

	// GPT stores no time; a second is the finest clock a planted timestamp
	// or time-seeded GUID would show at.
	reprotest.VaryHost(t, baseDone, time.Second, reprotest.Input[input]{
		New:     detInput,
		Reverse: func(in *input) { reorder(in, slices.Reverse) },
		Shuffle: func(in *input) { reorder(in, reprotest.Shuffle) },
	}, func(t *testing.T, in input) {
		reprotest.Same(t, "the disk", base, buildDisk(t, in), gptArea(len(base)))
	})
}

// reorder reorders a copy of the layout's partitions; each keeps its
// Index, so the table is the same.
func reorder(in *input, how func([]Placed)) {
	l := *in.layout
	l.Parts = slices.Clone(l.Parts)
	how(l.Parts)
	in.layout = &l
}

// gptArea names the GPT structure of a disk of size bytes that holds a
// byte.
func gptArea(size int) func(off int) string {
	return func(off int) string {
		lba, last := off/SectorSize, size/SectorSize-1
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
		return fmt.Sprintf("LBA %d, %s", lba, where)
	}
}

// checkWithSfdisk reads the table with util-linux's sfdisk: --verify finds
// no error, and --json shows the disk GUID and each partition as planned.
// A missing sfdisk fails the test: scripts/host-setup.sh installs it.
func checkWithSfdisk(t *testing.T, disk []byte, in input) {
	t.Helper()
	sfdisk := reprotest.Tool(t, "sfdisk", "fdisk")
	p := reprotest.WriteTemp(t, "disk.raw", disk)
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
