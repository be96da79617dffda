package agent

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/drover-os/drover/agent/ignition"
	"github.com/drover-os/drover/agent/nodeconfig"
)

// Owner is a uid:gid pair.
type Owner struct{ UID, GID uint32 }

func (o Owner) String() string { return fmt.Sprintf("%d:%d", o.UID, o.GID) }

// CheckPKI checks the kubelet's certificate directory (nodeconfig.CertDir)
// by rules rather than against a baseline: the kubelet rotates its client
// certificate, writing a new kubelet-client-<time>.pem and moving the
// kubelet-client-current.pem link to it, so names and contents change by
// design. What may not change: the directory is a directory owned by own
// that no one else may write; each entry is a regular file or a link to
// one in the directory (no subdirectory, device or pipe; no link leading
// out of it); each file is owned by own, has no other hard link (a second
// name elsewhere would let it be rewritten unseen) and cannot be written
// by group or others; a file holding a private key (*.key,
// kubelet-client-*.pem, kubelet-server-*.pem) cannot be read by them
// either.
func CheckPKI(root string, own Owner) []Drift {
	dir := nodeconfig.CertDir
	fi, err := os.Lstat(root + dir)
	if err != nil {
		return nil // the kubelet (or the runtime phase) has not made it yet
	}
	if !fi.IsDir() {
		return []Drift{{dir, "type", "directory", typeName(fi.Mode())}}
	}
	var out []Drift
	out = append(out, checkOwned(dir, fi, own)...)
	if fi.Mode()&0o022 != 0 || fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
		out = append(out, Drift{dir, "mode", "no write by group or others", modeString(fi.Mode())})
	}
	ents, err := os.ReadDir(root + dir)
	if err != nil {
		return append(out, Drift{dir, "contents", "readable", "unreadable: " + err.Error()})
	}
	for _, e := range ents {
		p := path.Join(dir, e.Name())
		fi, err := os.Lstat(root + p)
		if err != nil {
			continue // gone since the listing (a rotation's temporary file)
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			t, _ := os.Readlink(root + p)
			r := t
			if !path.IsAbs(r) {
				r = path.Join(dir, r)
			}
			tfi, err := os.Lstat(root + r)
			if path.Dir(r) != dir || err != nil || !tfi.Mode().IsRegular() {
				out = append(out, Drift{p, "link", "-> a file in " + dir, "-> " + t})
			}
		case fi.Mode().IsRegular():
			out = append(out, checkOwned(p, fi, own)...)
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
				out = append(out, Drift{p, "link", "the only name of its file", fmt.Sprintf("%d names (a hard link elsewhere)", st.Nlink)})
			}
			switch {
			case holdsKey(e.Name()) && (fi.Mode()&0o077 != 0 || fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0):
				out = append(out, Drift{p, "mode", "0600 or stricter (a private key)", modeString(fi.Mode())})
			case fi.Mode()&0o022 != 0 || fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0:
				out = append(out, Drift{p, "mode", "no write by group or others", modeString(fi.Mode())})
			}
		default:
			out = append(out, Drift{p, "type", "file or link", typeName(fi.Mode())})
		}
	}
	return out
}

// holdsKey says whether the kubelet keeps a private key in the file named.
func holdsKey(name string) bool {
	return strings.HasSuffix(name, ".key") ||
		(strings.HasSuffix(name, ".pem") && (strings.HasPrefix(name, "kubelet-client-") || strings.HasPrefix(name, "kubelet-server-")))
}

func checkOwned(p string, fi fs.FileInfo, own Owner) []Drift {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || (st.Uid == own.UID && st.Gid == own.GID) {
		return nil
	}
	return []Drift{{p, "owner", own.String(), fmt.Sprintf("%d:%d", st.Uid, st.Gid)}}
}

func modeString(m fs.FileMode) string { return fmt.Sprintf("%04o", ignition.ModeBits(m)) }
