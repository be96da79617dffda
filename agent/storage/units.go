package storage

import (
	"fmt"

	"github.com/coreos/go-systemd/v22/unit"
)

// Where the data disk is mounted, and what is bound from it.
const (
	DataMount = "/var/lib/drover-data"
	// Label is the filesystem label drover gives the data disk.
	Label = "drover-data"
)

// Binds are the directories on the data disk (created by Format) and the
// paths they are bound over: containerd's whole root (content, snapshots,
// the images the kubelet pulls) and the kubelet's pod directories
// (emptyDir volumes, projected volumes). The kubelet's own state
// (/var/lib/kubelet/pki, its checkpoints) stays on the system disk.
var Binds = []struct{ Dir, Where string }{
	{"containerd", "/var/lib/containerd"},
	{"kubelet-pods", "/var/lib/kubelet/pods"},
}

// UnitDir is where the mount units are written: the tmpfs /etc, rebuilt
// at every boot, so a boot without the data disk decision has none.
const UnitDir = "/etc/systemd/system"

// Unit is a systemd unit file to write under UnitDir.
type Unit struct {
	Name string
	Data []byte
}

// MountUnits are the mount units of the data disk at dev (a /dev path the
// agent resolved from the filesystem UUID at this boot): the filesystem
// at DataMount, then each of Binds. They are ordered before containerd
// and the kubelet, so that at shutdown both stop before the unmount.
func MountUnits(dev, uuid string) []Unit {
	data := unit.UnitNamePathEscape(DataMount) + ".mount"
	units := []Unit{{Name: data, Data: []byte(fmt.Sprintf(`# Written by drover-agent at every boot (agent/storage): the data disk.
[Unit]
Description=drover data disk (ext4 UUID %s)
Documentation=https://github.com/drover-os/drover/blob/main/docs/node-config.md#container-storage
Before=containerd.service kubelet.service

[Mount]
What=%s
Where=%s
Type=ext4
Options=noatime
`, uuid, dev, DataMount))}}
	for _, b := range Binds {
		units = append(units, Unit{Name: unit.UnitNamePathEscape(b.Where) + ".mount", Data: []byte(fmt.Sprintf(`# Written by drover-agent at every boot (agent/storage): %s on the data disk.
[Unit]
Description=%s on the drover data disk
Documentation=https://github.com/drover-os/drover/blob/main/docs/node-config.md#container-storage
Requires=%s
After=%s
Before=containerd.service kubelet.service

[Mount]
What=%s/%s
Where=%s
Type=none
Options=bind
`, b.Where, b.Where, data, data, DataMount, b.Dir, b.Where))})
	}
	return units
}
