// Package cisevidence is the shape of what the smoke's probe reads on a
// booted node for the CIS checks (the probe's "cis" mode writes it,
// harness/cis judges it). It lives among the harness image programs and
// uses the standard library only because the probe is built in a
// throwaway module holding just these directories (registry.BuildPrograms).
package cisevidence

import "io/fs"

// Evidence is what the probe read on the node. Its JSON is the probe's
// termination message (at most 4 KiB: the probe keeps only the fields the
// checks read).
type Evidence struct {
	// KubeletArgs is /proc/<kubelet's MainPID>/cmdline.
	KubeletArgs []string `json:"cmdline"`
	// Unit is kubelet.service as systemd loaded it.
	Unit Unit `json:"unit"`
	// Files maps each file the checks look at (node paths) to its stat.
	Files map[string]File `json:"files"`
	// Configz is the "kubeletconfig" object of the kubelet's /configz (a
	// v1beta1 KubeletConfiguration: what it runs with, flags and defaults
	// applied), cut to the fields the checks read; nil when it could not
	// be read (ConfigzError says why).
	Configz      map[string]any `json:"configz"`
	ConfigzError string         `json:"configzError,omitempty"`
	// TLS12Accepted lists the TLS 1.2 cipher suites (Go's names) the
	// kubelet's API on 127.0.0.1:10250 completed a handshake with when
	// offered alone; TLS12Offered is every suite offered.
	TLS12Accepted []string `json:"tls12Accepted"`
	TLS12Offered  int      `json:"tls12Offered"`
	// KubeProxy lists the kube-proxy processes running on the node, with
	// the --kubeconfig each names ("" if none).
	KubeProxy []KubeProxy `json:"kubeProxy"`
	Errors    []string    `json:"errors,omitempty"`
}

// Unit is how systemd resolved kubelet.service (systemctl show).
type Unit struct {
	Fragment string   `json:"fragment"`
	DropIns  []string `json:"dropIns"`
	EnvFiles []string `json:"envFiles"`
}

// Paths is every file of the unit: fragment, drop-ins and environment
// files (which hold drover's kubelet flags).
func (u Unit) Paths() []string {
	var out []string
	if u.Fragment != "" {
		out = append(out, u.Fragment)
	}
	out = append(out, u.DropIns...)
	return append(out, u.EnvFiles...)
}

// File is a file's stat on the node, following a symbolic link.
type File struct {
	// Missing: no such file (or a dangling link).
	Missing bool `json:"missing,omitempty"`
	// Mode is the permission bits with setuid, setgid and sticky, in
	// chmod's numbering (04000, 02000, 01000).
	Mode uint32 `json:"mode"`
	UID  uint32 `json:"uid"`
	GID  uint32 `json:"gid"`
	// Link is the link's target when the path is a symbolic link.
	Link  string `json:"link,omitempty"`
	Error string `json:"error,omitempty"`
}

// ModeBits is chmod's number for m (Go keeps setuid, setgid and sticky
// apart from the permission bits).
func ModeBits(m fs.FileMode) uint32 {
	b := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		b |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		b |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
}

// KubeProxy is a kube-proxy process on the node.
type KubeProxy struct {
	PID        int    `json:"pid"`
	Kubeconfig string `json:"kubeconfig,omitempty"`
}
