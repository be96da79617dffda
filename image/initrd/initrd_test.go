package initrd

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/cavaliergopher/cpio"
	"github.com/klauspost/compress/gzip"
)

func TestWriteIsDeterministicAndReadable(t *testing.T) {
	files := []File{
		{Path: "/lib/modules/6.12/kernel/fs/erofs/erofs.ko.xz", Mode: 0o644, Data: []byte("mod")},
		{Path: "/init", Mode: 0o755, Data: []byte("\x7fELF")},
		{Path: "/etc/drover-init.json", Mode: 0o644, Data: []byte("{}")},
		{Path: "/sbin/init", Target: "/init"},
		{Path: "/dev", Dir: true, Mode: 0o755},
	}
	mtime := time.Unix(1764000000, 0)
	var a, b bytes.Buffer
	if err := Write(&a, files, mtime); err != nil {
		t.Fatal(err)
	}
	// Reversed input order must not matter.
	rev := append([]File(nil), files...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	if err := Write(&b, rev, mtime); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("output depends on input order")
	}
	zr, err := gzip.NewReader(&a)
	if err != nil {
		t.Fatal(err)
	}
	r := cpio.NewReader(zr)
	var names []string
	for {
		h, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Name == "init" {
			data, _ := io.ReadAll(r)
			if string(data) != "\x7fELF" || h.Mode.Perm() != 0o755 || !h.ModTime.Equal(mtime) {
				t.Errorf("init entry wrong: %+v", h)
			}
		}
		if h.Name == "sbin/init" && h.Linkname != "/init" {
			t.Errorf("symlink target %q", h.Linkname)
		}
	}
	want := "dev etc etc/drover-init.json init lib lib/modules lib/modules/6.12 lib/modules/6.12/kernel lib/modules/6.12/kernel/fs lib/modules/6.12/kernel/fs/erofs lib/modules/6.12/kernel/fs/erofs/erofs.ko.xz sbin sbin/init"
	if got := join(names); got != want {
		t.Errorf("entries:\n got %s\nwant %s", got, want)
	}
	if err := Write(io.Discard, append(files, File{Path: "/init"}), mtime); err == nil {
		t.Error("duplicate path accepted")
	}
}

func join(s []string) string {
	var b bytes.Buffer
	for i, x := range s {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(x)
	}
	return b.String()
}
