package boot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Where the machine-id lives, relative to the new root: /var keeps it across
// boots, /etc (a tmpfs overlay rebuilt at every boot) is where systemd and
// the journal read it.
const (
	StoredMachineIDPath = "var/lib/drover/machine-id"
	EtcMachineIDPath    = "etc/machine-id"
)

// ValidMachineID reports whether s is a machine-id as systemd accepts it:
// 32 lowercase hex digits, not all zero.
func ValidMachineID(s string) bool {
	if len(s) != 32 || s == strings.Repeat("0", 32) {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// NewMachineID turns a random UUID (the contents of
// /proc/sys/kernel/random/uuid) into a machine-id.
func NewMachineID(uuid string) (string, error) {
	id := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(uuid), "-", ""))
	if !ValidMachineID(id) {
		return "", fmt.Errorf("kernel random uuid %q does not make a machine-id", strings.TrimSpace(uuid))
	}
	return id, nil
}

// ChooseMachineID returns the stored machine-id when it is valid and
// otherwise a new one made from randomUUID; generated says which. A stored
// file that exists but is damaged is replaced rather than fatal: a new
// identity is better than a node that cannot boot.
func ChooseMachineID(stored string, randomUUID func() (string, error)) (id string, generated bool, err error) {
	if s := strings.TrimSpace(stored); ValidMachineID(s) {
		return s, false, nil
	}
	u, err := randomUUID()
	if err != nil {
		return "", false, fmt.Errorf("reading a random uuid for a new machine-id: %w", err)
	}
	id, err = NewMachineID(u)
	return id, true, err
}

// KeepMachineID makes <root>/etc/machine-id hold the identity stored in
// <root>/var/lib/drover/machine-id, creating and storing one on first boot.
func KeepMachineID(root string, randomUUID func() (string, error)) (id string, generated bool, err error) {
	storedPath := filepath.Join(root, StoredMachineIDPath)
	b, err := os.ReadFile(storedPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", false, fmt.Errorf("reading the machine-id %s: %w", storedPath, err)
	}
	id, generated, err = ChooseMachineID(string(b), randomUUID)
	if err != nil {
		return "", false, err
	}
	if generated {
		if err := os.MkdirAll(filepath.Dir(storedPath), 0o755); err != nil {
			return "", false, fmt.Errorf("creating %s: %w", filepath.Dir(storedPath), err)
		}
		if err := writeFileSync(storedPath, []byte(id+"\n"), 0o444); err != nil {
			return "", false, err
		}
	}
	etc := filepath.Join(root, EtcMachineIDPath)
	if err := os.WriteFile(etc, []byte(id+"\n"), 0o444); err != nil {
		return "", false, fmt.Errorf("writing the machine-id to %s: %w", etc, err)
	}
	return id, generated, nil
}

// writeFileSync writes a file through a temporary name, syncs it and
// renames it into place, so a power loss leaves the old or the new content.
func writeFileSync(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return fmt.Errorf("creating %s: %w", tmp, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("renaming %s into place: %w", tmp, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return fmt.Errorf("syncing %s: %w", filepath.Dir(path), err)
		}
	}
	return nil
}
