// Package storage decides where container storage lives: on the one empty
// data disk of the instance, formatted by drover and recorded by its
// filesystem UUID, or on the system disk, saying why. Plan is pure: it
// receives the disks as observed (Disks, from sysfs and blkid) and the
// record the agent keeps across boots; the agent applies the decision
// (Format, then MountUnits through systemd). A disk that holds anything
// (a filesystem, a partition table, partitions, holders, contents blkid
// cannot name) is never written.
package storage

import (
	"fmt"
	"slices"
	"strings"

	"github.com/drover-os/drover/agent/nodeconfig"
)

// Disk is one whole disk of the instance, the boot disk left out.
type Disk struct {
	// Name is the kernel's name (vdb, nvme1n1); Path its node (/dev/vdb).
	Name, Path string
	// Size in bytes.
	Size uint64
	// Partitions are the kernel's partitions of the disk (vdb1, nvme1n1p1).
	Partitions []string
	// Holders are the devices built on it (dm-0, md0).
	Holders []string
	// Probe is what blkid -p found on the whole disk.
	Probe Probe
}

// Probe is blkid's low-level probe of a device. Found false: blkid found
// nothing (exit status 2). Err: blkid could not tell (the disk is then
// treated as holding something).
type Probe struct {
	Found                     bool
	Type, UUID, Label, PTType string
	Err                       string
}

// IsImageCache says whether d is the image cache disk (drover build's
// <name>.images.raw, nodeconfig.ImageCacheLabel): the agent imports its
// images and never writes to it, so it is neither container storage nor
// a disk the node leaves unused.
func IsImageCache(d Disk) bool {
	return d.Probe.Type == "erofs" && d.Probe.Label == nodeconfig.ImageCacheLabel
}

// Record is what the agent keeps in RecordPath across boots: the data
// disk's filesystem UUID, and whether its filesystem was completed.
type Record struct {
	UUID string `json:"uuid,omitempty"`
	// State is StateFormatting (written before mkfs), StateReady (after
	// it) or StateSystem (the first boot stayed on the system disk).
	State string `json:"state"`
}

// The states of a Record.
const (
	StateFormatting = "formatting"
	StateReady      = "ready"
	StateSystem     = "system"
)

// Decision is what Plan decided.
type Decision struct {
	// Use is the data disk container storage lives on; nil: the system
	// disk.
	Use *Disk
	// Format: Use is to be formatted with UUID first (record
	// StateFormatting before, StateReady after). Else Use holds the
	// recorded filesystem UUID.
	Format bool
	UUID   string
	// Record is what to keep for the next boot (nil: nothing changes).
	Record *Record
	// Why says why the system disk is used (Use nil).
	Why string
	// Unused are the disks not used, each with why: what an operator is
	// told (a Warning Event on the Node, a status note).
	Unused []Unused
	// Refuse is set when the node must not join: mode required and no
	// usable disk, or the recorded data disk is gone.
	Refuse string
}

// Unused is a disk Plan did not use and why, in words that stand alone
// ("/dev/vdc holds ext4 (UUID …)").
type Unused struct {
	Disk Disk
	Why  string
}

// String says what was decided, for the phase's detail.
func (d Decision) String() string {
	var s string
	switch {
	case d.Refuse != "":
		s = "refused: " + d.Refuse
	case d.Use != nil && d.Format:
		s = fmt.Sprintf("container storage on %s (%s), formatted ext4 UUID %s", d.Use.Path, size(d.Use.Size), d.UUID)
	case d.Use != nil:
		s = fmt.Sprintf("container storage on %s (%s), ext4 UUID %s", d.Use.Path, size(d.Use.Size), d.UUID)
	default:
		s = "container storage on the system disk: " + d.Why
	}
	for _, u := range d.Unused {
		s += "; " + u.Why
	}
	return s
}

func size(b uint64) string {
	if b >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	}
	return fmt.Sprintf("%d MiB", b>>20)
}

// Plan decides where container storage lives. mode is the node file's
// storage field; rec is the record from an earlier boot (nil on the
// first); newUUID is the UUID a new filesystem gets.
func Plan(mode string, disks []Disk, rec *Record, newUUID string) Decision {
	disks = slices.DeleteFunc(slices.Clone(disks), IsImageCache)
	if mode == nodeconfig.StorageSystem {
		return Decision{Why: "the node file says storage: system"}
	}
	if rec != nil && rec.State == StateSystem {
		// Moving containerd's content and the pods' directories to a disk
		// attached since would lose them: the first boot's choice stands.
		return Decision{Why: "the first boot found no data disk to use; a disk attached since is not used (replace the instance to use it)",
			Unused: unusedAll(disks, nil)}
	}
	if rec != nil && rec.UUID != "" {
		if d := byUUID(disks, rec.UUID); d != nil {
			if rec.State == StateReady {
				return Decision{Use: d, UUID: rec.UUID, Unused: unusedAll(disks, d)}
			}
			// Formatting was interrupted: the disk carries the UUID
			// drover gave it, nothing else wrote to it.
			return Decision{Use: d, Format: true, UUID: rec.UUID, Record: &Record{UUID: rec.UUID, State: StateFormatting}, Unused: unusedAll(disks, d)}
		}
		if rec.State == StateReady {
			return Decision{Refuse: fmt.Sprintf("the data disk holding this node's container storage (ext4 UUID %s, recorded at its first boot) is not attached: "+
				"containerd's content and the pods' directories would silently move back to the system disk; attach that disk again, or replace the instance", rec.UUID),
				Unused: unusedAll(disks, nil)}
		}
		// Interrupted before mkfs wrote its superblock: start over, with
		// the UUID already recorded.
		newUUID = rec.UUID
	}
	var empty []*Disk
	for i := range disks {
		if holds(disks[i]) == "" {
			empty = append(empty, &disks[i])
		}
	}
	if len(empty) == 1 {
		d := empty[0]
		return Decision{Use: d, Format: true, UUID: newUUID, Record: &Record{UUID: newUUID, State: StateFormatting}, Unused: unusedAll(disks, d)}
	}
	dec := Decision{Unused: unusedAll(disks, nil)}
	switch {
	case len(disks) == 0:
		dec.Why = "the instance has no data disk"
	case len(empty) == 0:
		dec.Why = "no data disk is empty"
	default:
		var names []string
		for _, d := range empty {
			names = append(names, d.Path)
		}
		dec.Why = fmt.Sprintf("%d empty data disks (%s): which one is meant is not clear", len(empty), strings.Join(names, " "))
		for i, u := range dec.Unused {
			if holds(u.Disk) == "" {
				dec.Unused[i].Why = u.Disk.Path + " is empty, but so is another data disk: which one is meant is not clear; attach exactly one empty data disk"
			}
		}
	}
	if mode == nodeconfig.StorageRequired {
		dec.Refuse = "storage: required, but " + dec.Why + "; attach exactly one empty, unpartitioned data disk and replace the instance"
		return dec
	}
	dec.Record = &Record{State: StateSystem}
	return dec
}

// holds says what a disk holds, as a sentence naming it; "" when it is
// empty (no filesystem, partition table, partitions or holders, and blkid
// found nothing).
func holds(d Disk) string {
	switch {
	case d.Probe.Err != "":
		return fmt.Sprintf("%s could not be probed (%s): never touched", d.Path, d.Probe.Err)
	case d.Probe.PTType != "":
		return fmt.Sprintf("%s has a partition table (%s): never touched", d.Path, d.Probe.PTType)
	case len(d.Partitions) > 0:
		return fmt.Sprintf("%s has partitions (%s): never touched", d.Path, strings.Join(d.Partitions, " "))
	case d.Probe.Type != "" && d.Probe.UUID != "":
		return fmt.Sprintf("%s holds %s (UUID %s): never touched", d.Path, d.Probe.Type, d.Probe.UUID)
	case d.Probe.Type != "":
		return fmt.Sprintf("%s holds %s: never touched", d.Path, d.Probe.Type)
	case d.Probe.Found:
		return fmt.Sprintf("%s holds something blkid names no type for: never touched", d.Path)
	case len(d.Holders) > 0:
		return fmt.Sprintf("%s is in use by %s: never touched", d.Path, strings.Join(d.Holders, " "))
	}
	return ""
}

// HoldsData says whether a disk holds anything (see holds).
func HoldsData(d Disk) bool { return holds(d) != "" }

func byUUID(disks []Disk, uuid string) *Disk {
	for i := range disks {
		if strings.EqualFold(disks[i].Probe.UUID, uuid) {
			return &disks[i]
		}
	}
	return nil
}

// unusedAll lists every disk but used, with what it holds ("is not used"
// for an empty one).
func unusedAll(disks []Disk, used *Disk) []Unused {
	var out []Unused
	for _, d := range disks {
		if used != nil && d.Path == used.Path {
			continue
		}
		why := holds(d)
		if why == "" {
			why = d.Path + " is empty and not used"
		}
		out = append(out, Unused{Disk: d, Why: why})
	}
	return out
}
