package smoke

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/drover-os/drover/harness/cluster"
	"github.com/drover-os/drover/internal/filehash"
)

// The main smoke VM's data disks: an empty one, which the agent must use
// for container storage, and one the host formats before the boot, which
// it must leave alone and report.
const (
	emptyDiskSize = 2 << 30
	fullDiskSize  = 1 << 30
	// minContainerBytes is the least the data disk's filesystem must hold
	// by the time the probe runs: the images pulled (hello, probe, the
	// sandbox) are megabytes; a fresh ext4 counts some KiB.
	minContainerBytes = 4 << 20
	// storageEventReason is the agent's Event (agent.DataDiskNotUsed).
	storageEventReason = "DataDiskNotUsed"
)

// dataDisks are the host files attached as the instance's data disks.
type dataDisks struct {
	Empty, Full string
	// FullSHA256 and FullUUID are the formatted disk's before the boot.
	FullSHA256, FullUUID string
	// Cache is the image's cache disk (a copy), "" when it has none:
	// always attached last.
	Cache string
}

// order is the disks in the order attached: the empty one first, or last
// (reversed, for the reboot: device names change, UUIDs do not).
func (d *dataDisks) order(reversed bool) []string {
	o := []string{d.Empty, d.Full}
	if reversed {
		o = []string{d.Full, d.Empty}
	}
	if d.Cache != "" {
		o = append(o, d.Cache)
	}
	return o
}

// prepareDataDisks makes the two disks in dir: a sparse empty raw file and
// one holding a fresh ext4 (mkfs.ext4 -q -F), whose sha256 and UUID are
// recorded.
func prepareDataDisks(ctx context.Context, dir string) (*dataDisks, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	d := &dataDisks{Empty: filepath.Join(dir, "data-empty.raw"), Full: filepath.Join(dir, "data-ext4.raw")}
	for p, size := range map[string]int64{d.Empty: emptyDiskSize, d.Full: fullDiskSize} {
		os.Remove(p)
		f, err := os.Create(p)
		if err != nil {
			return nil, err
		}
		err = f.Truncate(size)
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	if out, err := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", d.Full).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mkfs.ext4 %s (e2fsprogs): %v: %s", d.Full, err, out)
	}
	var err error
	if d.FullUUID, err = fsUUID(ctx, d.Full); err != nil {
		return nil, err
	}
	if d.FullSHA256, err = fileSHA256(d.Full); err != nil {
		return nil, err
	}
	return d, nil
}

// blkidExport is the host's blkid -p of a file: its TYPE, UUID and PTTYPE
// ("" each when blkid finds nothing).
func blkidExport(ctx context.Context, path string) (map[string]string, error) {
	out, err := exec.CommandContext(ctx, "blkid", "-p", "-o", "export", path).Output()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 2 {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("blkid -p %s (util-linux): %w", path, err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m, nil
}

func fsUUID(ctx context.Context, path string) (string, error) {
	m, err := blkidExport(ctx, path)
	if err != nil {
		return "", err
	}
	if m["UUID"] == "" {
		return "", fmt.Errorf("blkid -p %s: no filesystem UUID (%v)", path, m)
	}
	return m["UUID"], nil
}

func fileSHA256(path string) (string, error) {
	sum, _, err := filehash.SHA256(path)
	return sum, err
}

// firstBootName is the kernel's name for the i-th data disk (0-based) on
// virtio-blk, where disks are named in the order of the command line,
// after the boot disk; "" on NVMe, where the controllers are named in the
// order the kernel probes them (seen: the boot disk nvme2n1).
func firstBootName(i int, nvme bool) string {
	if nvme {
		return ""
	}
	return "/dev/vd" + string(rune('b'+i))
}

// StorageMount is one mount as the probe's storage mode reports it.
type StorageMount struct {
	Path    string   `json:"path"`
	Source  string   `json:"source"`
	Dev     string   `json:"dev"`
	Root    string   `json:"root"`
	FSType  string   `json:"fstype"`
	UUID    string   `json:"uuid"`
	Size    uint64   `json:"size"`
	Used    uint64   `json:"used"`
	Entries []string `json:"entries"`
	Error   string   `json:"error,omitempty"`
}

// StorageReport is the probe's storage report.
type StorageReport struct {
	Mounts []StorageMount `json:"mounts"`
	Error  string         `json:"error,omitempty"`
}

func (s *StorageReport) mount(path string) StorageMount {
	for _, m := range s.Mounts {
		if m.Path == path {
			return m
		}
	}
	return StorageMount{Path: path, Error: "not reported"}
}

// probeStorage runs the probe's storage mode on the node.
func (e *Env) probeStorage(ctx context.Context, in *Instance, pod string) (*StorageReport, string, error) {
	msg, err := e.probe(ctx, in, pod, []string{"storage"})
	if err != nil {
		return nil, msg, err
	}
	var s StorageReport
	if err := json.Unmarshal([]byte(msg), &s); err != nil {
		return nil, msg, fmt.Errorf("probe storage report %q: %w", msg, err)
	}
	return &s, msg, nil
}

// JudgeContainerStorage: on the node, /var/lib/containerd is the
// directory containerd of an ext4 that is not /var's, holding what was
// pulled (used bytes), and the kubelet's pod directories are kubelet-pods
// of the same filesystem. It returns the filesystem's UUID and device.
func JudgeContainerStorage(s *StorageReport) (uuid, dev string, err error) {
	if s == nil || s.Error != "" {
		return "", "", fmt.Errorf("no storage report: %v", s)
	}
	c, k, v := s.mount("/var/lib/containerd"), s.mount("/var/lib/kubelet/pods"), s.mount("/var")
	var probs []string
	switch {
	case c.Error != "":
		probs = append(probs, "/var/lib/containerd: "+c.Error)
	case c.Dev == v.Dev || c.Source == v.Source:
		probs = append(probs, fmt.Sprintf("/var/lib/containerd is on /var's filesystem (%s %s): the system disk", c.Source, c.Dev))
	case c.FSType != "ext4" || c.Root != "/containerd" || c.UUID == "":
		probs = append(probs, fmt.Sprintf("/var/lib/containerd is %s of %s %s (UUID %q), want /containerd of the data disk's ext4", c.Root, c.FSType, c.Source, c.UUID))
	case c.Used < minContainerBytes:
		probs = append(probs, fmt.Sprintf("the data disk's filesystem holds %d bytes: the pulled images are not on it", c.Used))
	}
	if k.Error != "" || k.Dev != c.Dev || k.Root != "/kubelet-pods" {
		probs = append(probs, fmt.Sprintf("/var/lib/kubelet/pods is %q of %s %s (%s), want /kubelet-pods of %s", k.Root, k.Source, k.Dev, k.Error, c.Dev))
	}
	return c.UUID, c.Source, errIf(probs)
}

// checkStorageOnNode is the node's half of "container storage on the
// empty data disk"; it returns the filesystem's UUID.
func (e *Env) checkStorageOnNode(ctx context.Context, r *Report, in *Instance, when, pod string) string {
	s := time.Now()
	rep, msg, err := e.probeStorage(ctx, in, pod)
	uuid, dev := "", ""
	if err == nil {
		uuid, dev, err = JudgeContainerStorage(rep)
	}
	detail := msg
	if err == nil {
		c := rep.mount("/var/lib/containerd")
		detail = fmt.Sprintf("/var/lib/containerd = %s%s (ext4 UUID %s, %d MiB used of %d MiB: %s); /var/lib/kubelet/pods on it too; /var on %s",
			dev, c.Root, uuid, c.Used>>20, c.Size>>20, strings.Join(c.Entries, " "), rep.mount("/var").Source)
	}
	r.add("container storage on the empty data disk ("+when+": the node's mounts, its blkid and statfs)", s, err, detail)
	return uuid
}

// JudgeDataDiskAfter judges the empty disk's file after the VM exited:
// the host's blkid finds ext4 with the node's UUID, and debugfs lists
// containerd's directories on it.
func JudgeDataDiskAfter(blkid map[string]string, uuid, ls string) error {
	var probs []string
	if blkid["TYPE"] != "ext4" || uuid == "" || !strings.EqualFold(blkid["UUID"], uuid) {
		probs = append(probs, fmt.Sprintf("the empty disk holds %q UUID %q, want ext4 UUID %q (the node's /var/lib/containerd)", blkid["TYPE"], blkid["UUID"], uuid))
	}
	for _, d := range []string{"io.containerd.content.v1.content", "io.containerd.snapshotter.v1.overlayfs"} {
		if !strings.Contains(ls, d) {
			probs = append(probs, "debugfs finds no /containerd/"+d+" on it")
		}
	}
	return errIf(probs)
}

// checkDataDiskAfter is the host's half, once the VM has exited.
func (e *Env) checkDataDiskAfter(ctx context.Context, r *Report, d *dataDisks, uuid string) {
	s := time.Now()
	name := "container storage on the empty data disk (after the VM exited: the host's blkid -p and debugfs of the disk)"
	dir, err := os.MkdirTemp(filepath.Dir(d.Empty), "data-copy-")
	if err != nil {
		r.add(name, s, err, "")
		return
	}
	defer os.RemoveAll(dir)
	// A copy whose journal is replayed, as the kernel would on a mount:
	// the disk itself stays as the node left it.
	cp := filepath.Join(dir, "data.img")
	src, err := os.Open(d.Empty)
	if err == nil {
		err = sparseCopy(cp, src, emptyDiskSize)
		src.Close()
	}
	if err != nil {
		r.add(name, s, err, "")
		return
	}
	if out, err := exec.CommandContext(ctx, "e2fsck", "-E", "journal_only", "-y", cp).CombinedOutput(); err != nil {
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() > 1 {
			e.logf("replaying the data disk's journal: %v: %s", err, out)
		}
	}
	blkid, err := blkidExport(ctx, d.Empty)
	if err != nil {
		r.add(name, s, err, "")
		return
	}
	ls, _ := exec.CommandContext(ctx, "debugfs", "-R", "ls -l /containerd", cp).CombinedOutput()
	err = JudgeDataDiskAfter(blkid, uuid, string(ls))
	r.add(name, s, err, fmt.Sprintf("%s: ext4 UUID %s; /containerd: %s", d.Empty, blkid["UUID"], dirNames(string(ls))))
}

// dirNames is the names in debugfs's ls -l output.
func dirNames(ls string) string {
	var names []string
	for _, l := range strings.Split(ls, "\n") {
		f := strings.Fields(l)
		if len(f) > 0 && !strings.HasPrefix(f[len(f)-1], ".") && len(f) >= 8 {
			names = append(names, f[len(f)-1])
		}
	}
	return strings.Join(names, " ")
}

// JudgeUntouched: the formatted disk's bytes are as the host made them,
// and the API server holds the agent's Event naming its device and what
// it holds. device "" accepts any device name: NVMe controllers are
// named in the order the kernel probes them, not the command line's.
func JudgeUntouched(before, after, device, uuid string, evs []cluster.Event) (string, error) {
	var probs []string
	if before != after {
		probs = append(probs, fmt.Sprintf("the disk holding ext4 was written: sha256 %s before the boot, %s after", before, after))
	}
	dev := regexp.QuoteMeta(device)
	if device == "" {
		dev = `/dev/\S+`
	}
	line := regexp.MustCompile(`(^|\s)` + dev + ` holds ext4 \(UUID ` + regexp.QuoteMeta(uuid) + `\): never touched`)
	want := line.String()
	var found *cluster.Event
	for i, ev := range evs {
		if ev.Reason == storageEventReason && ev.Type == "Warning" && ev.Source == "drover-agent" && line.MatchString(ev.Message) {
			found = &evs[i]
		}
	}
	if found == nil {
		probs = append(probs, fmt.Sprintf("no %s Warning Event from drover-agent on the Node saying %q", storageEventReason, want))
		return "", errIf(probs)
	}
	return "sha256 " + after[:12] + " unchanged; Event " + storageEventReason + ": " + found.Message, errIf(probs)
}

// checkUntouched: after the VM has exited, the formatted disk is as it was
// and the node said why it did not use it.
func (e *Env) checkUntouched(ctx context.Context, r *Report, in *Instance, d *dataDisks, device string) {
	s := time.Now()
	after, err := fileSHA256(d.Full)
	if err != nil {
		r.add(untouchedCheck, s, err, "")
		return
	}
	evs, err := e.Cluster.Events(ctx, "default", "Node", in.NodeName)
	detail := ""
	if err == nil {
		detail, err = JudgeUntouched(d.FullSHA256, after, device, d.FullUUID, evs)
	}
	r.add(untouchedCheck, s, err, detail)
}

const untouchedCheck = "a disk holding a filesystem is untouched and the node says why (sha256 unchanged, DataDiskNotUsed Event)"

// JudgeSameStorage: container storage is on the data disk (as
// JudgeContainerStorage) and on the filesystem it was on before the
// reboot, uuid.
func JudgeSameStorage(s *StorageReport, uuid string) (string, error) {
	got, dev, err := JudgeContainerStorage(s)
	if err != nil {
		return "", err
	}
	if uuid == "" || !strings.EqualFold(got, uuid) {
		return "", fmt.Errorf("/var/lib/containerd is on ext4 UUID %s (%s), before the reboot on %q", got, dev, uuid)
	}
	return fmt.Sprintf("/var/lib/containerd on %s, ext4 UUID %s as before the reboot", dev, got), nil
}

// checkStorageAfterReboot: after the reboot with the disks in the reverse
// order (and on the other bus), container storage is on the same
// filesystem, found by its UUID under another device name.
func (e *Env) checkStorageAfterReboot(ctx context.Context, r *Report, in *Instance, uuid string) {
	s := time.Now()
	rep, msg, err := e.probeStorage(ctx, in, "probe-storage-2")
	detail := msg
	if err == nil {
		detail, err = JudgeSameStorage(rep, uuid)
	}
	r.add("container storage on the same data disk after the reboot (disks attached in the reverse order, by UUID)", s, err, detail)
}
