package boot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStampVar(t *testing.T) {
	root := t.TempDir()
	usr := filepath.Join(root, "usr")
	for _, d := range []string{usr, filepath.Join(root, "var")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	epoch := time.Unix(1795252544, 123456789)
	if err := os.Chtimes(usr, epoch, epoch); err != nil {
		t.Fatal(err)
	}
	written, err := StampVar(root)
	if err != nil || !written {
		t.Fatalf("first boot: written %v, err %v", written, err)
	}
	p := filepath.Join(root, "var", ".updated")
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	// ConditionNeedsUpdate=/var compares /usr's mtime with the stamp's:
	// equal means no update is needed.
	if !st.ModTime().Equal(epoch) {
		t.Errorf("stamp mtime %v, want /usr's %v", st.ModTime(), epoch)
	}
	data, _ := os.ReadFile(p)
	if !strings.HasSuffix(string(data), "\nTIMESTAMP_NSEC=1795252544123456789\n") {
		t.Errorf("stamp content:\n%s", data)
	}
	if written, err := StampVar(root); err != nil || written {
		t.Errorf("second boot: written %v, err %v; want the stamp kept", written, err)
	}
	// A stamp from another /usr (an older image's) is replaced.
	old := epoch.Add(-time.Hour)
	os.Chtimes(p, old, old)
	if written, err := StampVar(root); err != nil || !written {
		t.Errorf("stale stamp: written %v, err %v", written, err)
	}
}
