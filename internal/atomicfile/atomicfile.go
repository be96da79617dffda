// Package atomicfile writes a file so that readers see either the old
// content or the whole new content, never a part: a temporary file in the
// same directory, synced, then renamed over the target. Interrupted work
// therefore leaves nothing a later run would trust.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write replaces path with data (mode perm), creating its directory.
func Write(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err == nil {
		// The rename is durable only once the directory is: without this a
		// power cut seconds later can leave the old file, or none (the
		// status file that explains a failed boot among them).
		err = syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
