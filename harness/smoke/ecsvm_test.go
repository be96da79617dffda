package smoke

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/drover-os/drover/harness/ecsapi"
)

// TestInstanceDataDisks: each instance gets its own sparse copy of the
// image's data disks, in mapping order; the emulator's files stay as
// they were when the guest writes its copy.
func TestInstanceDataDisks(t *testing.T) {
	src := t.TempDir()
	var spec ecsapi.InstanceSpec
	var want [][]byte
	for i, name := range []string{"m-1.data2", "m-1.data3"} {
		b := make([]byte, 64<<20) // mostly zeros: the copy must not allocate them
		copy(b, "erofs")
		copy(b[len(b)-4096:], bytes.Repeat([]byte{byte('a' + i)}, 4096))
		f := filepath.Join(src, name)
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
		spec.DataDisks = append(spec.DataDisks, f)
		want = append(want, b)
	}
	spec.InstanceID, spec.ImageID = "i-1", "m-1"
	dir := filepath.Join(t.TempDir(), "i-1")
	got, err := instanceDataDisks(spec, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("data disks %q, want two", got)
	}
	for i, f := range got {
		if filepath.Dir(f) != dir {
			t.Errorf("data disk %d is %s, want a copy in the instance's directory %s", i+1, f, dir)
		}
		b, err := os.ReadFile(f)
		if err != nil || !bytes.Equal(b, want[i]) {
			t.Fatalf("data disk %d (%s): %v, or its bytes are not %s's", i+1, f, err, spec.DataDisks[i])
		}
		var st syscall.Stat_t
		if err := syscall.Stat(f, &st); err != nil {
			t.Fatal(err)
		}
		if alloc := st.Blocks * 512; alloc > 8<<20 {
			t.Errorf("data disk %d: %d bytes allocated for 64 MiB of mostly zeros, want a sparse copy", i+1, alloc)
		}
	}
	if err := os.WriteFile(got[0], []byte("guest wrote"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(spec.DataDisks[0]); !bytes.Equal(b, want[0]) {
		t.Error("writing the instance's data disk changed the emulator's file")
	}
	if none, err := instanceDataDisks(ecsapi.InstanceSpec{InstanceID: "i-2"}, filepath.Join(t.TempDir(), "i-2")); err != nil || none != nil {
		t.Errorf("an image without data disks: %q %v, want none", none, err)
	}
	spec.DataDisks = []string{filepath.Join(src, "missing")}
	if _, err := instanceDataDisks(spec, dir); err == nil {
		t.Error("a missing data disk file: no error")
	}
}
