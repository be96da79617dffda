package smoke

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/drover-os/drover/agent/status"
	"github.com/drover-os/drover/harness/qemu"
	"github.com/drover-os/drover/image/gpt"
)

// ReadStatus reads the agent's persistent status file from a stopped
// instance's disk: the overlay is converted to raw, the var partition found
// in the GPT and the file read with debugfs (e2fsprogs) — no mounts.
func ReadStatus(ctx context.Context, c *qemu.Config) (*status.Status, error) {
	dir, err := os.MkdirTemp(c.StateDir, "disk-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	varImg, err := varImage(ctx, c, dir)
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	cmd := exec.CommandContext(ctx, "debugfs", "-R", "cat "+strings.TrimPrefix(status.LastBootPath, "/var"), varImg)
	cmd.Stderr = &stderr
	data, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("debugfs (Debian package e2fsprogs): %w: %s", err, stderr.String())
	}
	var st status.Status
	if err := json.Unmarshal(data, &st); err != nil {
		// debugfs says "File not found by ext2_lookup" on stderr and exits 0.
		return nil, fmt.Errorf("status file %s on the disk: %w (%q; debugfs: %s)", status.LastBootPath, err, strings.TrimSpace(string(data)), strings.TrimSpace(stderr.String()))
	}
	return &st, nil
}

// ReadVarFiles reads files (absolute paths under /var) from a stopped
// instance's var partition, as ReadStatus reads the status file. A file
// that is not there is left out of the map.
func ReadVarFiles(ctx context.Context, c *qemu.Config, paths ...string) (map[string][]byte, error) {
	dir, err := os.MkdirTemp(c.StateDir, "disk-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	varImg, err := varImage(ctx, c, dir)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, p := range paths {
		rel, ok := strings.CutPrefix(p, "/var/")
		if !ok {
			return nil, fmt.Errorf("%s is not under /var", p)
		}
		var stderr strings.Builder
		cmd := exec.CommandContext(ctx, "debugfs", "-R", "cat /"+rel, varImg)
		cmd.Stderr = &stderr
		data, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("debugfs cat %s (Debian package e2fsprogs): %w: %s", p, err, stderr.String())
		}
		// debugfs says so on stderr and exits 0.
		if strings.Contains(stderr.String(), "File not found by ext2_lookup") {
			continue
		}
		out[p] = data
	}
	return out, nil
}

// varImage copies a stopped instance's var partition out of its disk into
// dir (the overlay converted to raw, the partition found in the GPT, its
// ext4 journal replayed) and returns the copy's path.
func varImage(ctx context.Context, c *qemu.Config, dir string) (string, error) {
	raw := filepath.Join(dir, "disk.raw")
	if out, err := exec.CommandContext(ctx, "qemu-img", "convert", "-O", "raw", c.Overlay(), raw).CombinedOutput(); err != nil {
		return "", fmt.Errorf("qemu-img convert: %v: %s", err, out)
	}
	f, err := os.Open(raw)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, _ := f.Stat()
	layout, _, err := gpt.ReadLayout(f, fi.Size())
	if err != nil {
		return "", fmt.Errorf("reading the disk's GPT: %w", err)
	}
	var part *gpt.Placed
	for i := range layout.Parts {
		if strings.EqualFold(layout.Parts[i].Type, gpt.TypeVar) {
			part = &layout.Parts[i]
		}
	}
	if part == nil {
		return "", fmt.Errorf("no var partition on the disk: drover-init did not get that far")
	}
	varImg := filepath.Join(dir, "var.img")
	if err := sparseCopy(varImg, io.NewSectionReader(f, part.Offset, part.Length), part.Length); err != nil {
		return "", fmt.Errorf("copying the var partition: %w", err)
	}
	// Only the partition is needed from here on.
	f.Close()
	os.Remove(raw)
	// A VM stopped without a clean shutdown leaves its last writes in the
	// ext4 journal (fsync commits there first), and debugfs does not replay
	// it: replay it on the copy, as the kernel would when mounting.
	if out, err := exec.CommandContext(ctx, "e2fsck", "-E", "journal_only", "-y", varImg).CombinedOutput(); err != nil {
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() > 1 { // 1: the journal was replayed
			return "", fmt.Errorf("replaying the var partition's journal (e2fsck -E journal_only): %v: %s", err, out)
		}
	}
	return varImg, nil
}

// sparseCopy writes length bytes of r to a new file at dst, leaving holes
// where r has whole blocks of zeros: a var partition is mostly unused, and
// a dense copy of it can fill the host's disk.
func sparseCopy(dst string, r io.Reader, length int64) error {
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	zero := make([]byte, len(buf))
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			if bytes.Equal(buf[:n], zero[:n]) {
				_, err = out.Seek(int64(n), io.SeekCurrent)
			} else {
				_, err = out.Write(buf[:n])
			}
			if err != nil {
				out.Close()
				return err
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			out.Close()
			return rerr
		}
	}
	if err := out.Truncate(length); err != nil { // a trailing hole
		out.Close()
		return err
	}
	return out.Close()
}
