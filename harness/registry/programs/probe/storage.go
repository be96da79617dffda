package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// storageMount is one mount of the node as PID 1 sees it, with what the
// node's own blkid says of its device and what statfs says of its use.
type storageMount struct {
	Path   string `json:"path"`
	Source string `json:"source"` // the mount's device, e.g. /dev/vdb
	Dev    string `json:"dev"`    // major:minor
	Root   string `json:"root"`   // the directory of the filesystem mounted there ("/containerd" for a bind)
	FSType string `json:"fstype"`
	UUID   string `json:"uuid"` // blkid -p of Source
	// Size and Used are the filesystem's, in bytes (statfs).
	Size    uint64   `json:"size"`
	Used    uint64   `json:"used"`
	Entries []string `json:"entries"` // the names in the directory
	Error   string   `json:"error,omitempty"`
}

// containerStorage reports where /var/lib/containerd, the kubelet's pod
// directories and /var are on the node: the evidence that container
// storage is on the data disk comes from the node's mount table and
// filesystems, not from drover's words.
func containerStorage() map[string]any {
	mi, err := os.ReadFile("/proc/1/mountinfo")
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	var mounts []storageMount
	for _, p := range []string{"/var/lib/containerd", "/var/lib/kubelet/pods", "/var"} {
		m := storageMount{Path: p}
		for _, line := range strings.Split(string(mi), "\n") {
			pre, post, ok := strings.Cut(line, " - ")
			f, tail := strings.Fields(pre), strings.Fields(post)
			if !ok || len(f) < 5 || len(tail) < 2 || f[4] != p {
				continue
			}
			m.Dev, m.Root, m.FSType, m.Source = f[2], f[3], tail[0], tail[1]
		}
		if m.Source == "" {
			m.Error = "not a mount point"
		} else if out, err := hostCommand("/usr/sbin/blkid", "-p", "-o", "value", "-s", "UUID", m.Source); err != nil {
			m.Error = err.Error()
		} else {
			m.UUID = strings.TrimSpace(out)
		}
		dir := filepath.Join(hostRoot, p)
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err == nil {
			m.Size = st.Blocks * uint64(st.Bsize)
			m.Used = (st.Blocks - st.Bfree) * uint64(st.Bsize)
		}
		if ents, err := os.ReadDir(dir); err == nil {
			for _, e := range ents {
				if len(m.Entries) < 12 {
					m.Entries = append(m.Entries, e.Name())
				}
			}
		}
		mounts = append(mounts, m)
	}
	return map[string]any{"mounts": mounts}
}
