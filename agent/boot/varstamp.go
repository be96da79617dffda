package boot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/drover-os/drover/internal/updatestamp"
)

// StampVar makes <root>/var/.updated say that /var is up to date with
// <root>/usr, as systemd-update-done would after the first boot's update
// units ran: its mtime is /usr's own (not the time of writing, so a clock
// that starts before the image was built cannot make it look older), its
// TIMESTAMP_NSEC the same instant. The var partition is new on first boot;
// without the stamp ConditionNeedsUpdate=/var (journal catalog, update-done)
// would be true on that boot. It reports whether it wrote the stamp.
func StampVar(root string) (bool, error) {
	usr, err := os.Stat(filepath.Join(root, "usr"))
	if err != nil {
		return false, fmt.Errorf("reading the mtime of the image's /usr: %w", err)
	}
	p := filepath.Join(root, "var", updatestamp.Name)
	if st, err := os.Lstat(p); err == nil && st.Mode().IsRegular() && st.ModTime().Equal(usr.ModTime()) {
		return false, nil
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("reading %s: %w", p, err)
	}
	if err := writeFileSync(p, updatestamp.Content(usr.ModTime().UnixNano()), 0o644); err != nil {
		return false, err
	}
	if err := os.Chtimes(p, usr.ModTime(), usr.ModTime()); err != nil {
		return false, fmt.Errorf("setting the mtime of %s to /usr's: %w", p, err)
	}
	return true, nil
}

// varStamp runs StampVar on the new root.
func (m *Machine) varStamp() error {
	written, err := StampVar(m.Paths.Sysroot)
	if err != nil {
		return err
	}
	if written {
		m.Log.Printf("var-stamp: /var/%s written with the mtime of /usr", updatestamp.Name)
	}
	return nil
}

func describeVarStamp(*Config) string {
	return "write /sysroot/var/" + updatestamp.Name + " with /usr's mtime unless it has it: ConditionNeedsUpdate=/var is false"
}
