package agent

import (
	"context"
	"crypto/rand"
	"fmt"

	"github.com/drover-os/drover/agent/nodeconfig"
	"github.com/drover-os/drover/agent/storage"
)

// DataDiskRecord is where the agent records the data disk's filesystem
// UUID (agent/storage.Record): what later boots look for, whatever the
// disk's device name then.
const DataDiskRecord = StateDir + "/data-disk.json"

// DataDiskNotUsed is the reason of the Warning Event on the Node for a
// data disk the node does not use.
const DataDiskNotUsed = "DataDiskNotUsed"

// containerStorage is the storage phase, at the start of containerd's:
// it puts containerd's root and the kubelet's pod directories on the data
// disk, or says why they stay on the system disk. Without Env.Storage
// (tests that do not judge it) there is no such phase.
func (a *Agent) containerStorage(ctx context.Context) error {
	if a.env.Storage == nil {
		return nil
	}
	return a.phase(ctx, "storage", a.dl.Runtime, a.placeStorage)
}

func (a *Agent) placeStorage(ctx context.Context) (string, error) {
	rec, err := storage.ReadRecord(a.path(DataDiskRecord))
	if err != nil {
		return "", fmt.Errorf("%w (only the agent writes it: replace the instance)", err)
	}
	disks, err := a.env.Storage.Disks()
	if err != nil {
		return "", fmt.Errorf("observing the data disks: %w", err)
	}
	d := storage.Plan(a.node.Storage, disks, rec, newUUID())
	a.reportUnused(d)
	if d.Refuse != "" {
		return "", fmt.Errorf("container storage: %s", d.Refuse)
	}
	if d.Format {
		// The record comes first: a boot that ends inside mkfs finds
		// "formatting" and formats again, never trusting a half-made
		// filesystem.
		if err := storage.WriteRecord(a.path(DataDiskRecord), *d.Record); err != nil {
			return "", err
		}
		if err := a.env.Storage.Format(d.Use.Path, d.UUID); err != nil {
			return "", err
		}
		d.Record = &storage.Record{UUID: d.UUID, State: storage.StateReady}
	}
	if d.Record != nil {
		if err := storage.WriteRecord(a.path(DataDiskRecord), *d.Record); err != nil {
			return "", err
		}
	}
	if d.Use != nil {
		if err := a.mountDataDisk(ctx, d.Use.Path, d.UUID); err != nil {
			return "", err
		}
	}
	return d.String(), nil
}

// mountDataDisk writes the data disk's mount units into the tmpfs /etc
// and has systemd mount them: the agent's own mounts are private
// (PrivateMounts=yes), containerd and the kubelet would not see them.
func (a *Agent) mountDataDisk(ctx context.Context, dev, uuid string) error {
	units := storage.MountUnits(dev, uuid)
	var files []nodeconfig.File
	for _, u := range units {
		files = append(files, nodeconfig.File{Path: storage.UnitDir + "/" + u.Name, Mode: 0o644, Data: u.Data})
	}
	if err := a.writeFiles(files); err != nil {
		return err
	}
	if err := a.env.Systemd.Reload(ctx); err != nil {
		return err
	}
	for _, u := range units {
		if err := a.env.Systemd.Start(ctx, u.Name); err != nil {
			return fmt.Errorf("mounting the data disk %s (ext4 UUID %s): %w", dev, uuid, err)
		}
	}
	return nil
}

// reportUnused says, for every data disk the node does not use, why: a
// status note now, and a Warning Event on the Node once it has joined
// (WatchHealth delivers it, with the kernel's).
func (a *Agent) reportUnused(d storage.Decision) {
	where := "the system disk"
	if d.Use != nil {
		where = d.Use.Path
	}
	for _, u := range d.Unused {
		todo := "attach exactly one empty data disk to a new instance to have it used"
		if storage.HoldsData(u.Disk) {
			todo = "drover never writes to a disk that holds anything: to have it used, wipe it elsewhere (wipefs -a) and attach it to a new instance"
		}
		msg := fmt.Sprintf("%s; container storage is on %s. %s", u.Why, where, todo)
		a.rec.Note("storage: " + msg)
		a.events = append(a.events, pendingReport{event: DataDiskNotUsed, message: msg})
	}
}

// newUUID is a random (version 4) UUID for a new filesystem.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand since Go 1.24)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
