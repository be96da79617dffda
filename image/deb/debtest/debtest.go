// Package debtest builds small .deb files in memory, laid out as dpkg-deb
// lays them out (ar: debian-binary, control.tar.gz, data.tar.*), so tests of
// code that consumes packages need neither dpkg nor a mirror.
package debtest

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// Entry is one member of data.tar. Header.Size is set from Data.
type Entry struct {
	Header tar.Header
	Data   []byte
}

// File is a regular file owned by root.
func File(name string, mode int64, data string) Entry {
	return Entry{Header: tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode}, Data: []byte(data)}
}

// Dir is a directory owned by root.
func Dir(name string, mode int64) Entry {
	return Entry{Header: tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: mode}}
}

// Symlink is a symbolic link.
func Symlink(name, target string) Entry {
	return Entry{Header: tar.Header{Name: name, Typeflag: tar.TypeSymlink, Mode: 0o777, Linkname: target}}
}

// Link is a hard link to an earlier entry.
func Link(name, target string) Entry {
	return Entry{Header: tar.Header{Name: name, Typeflag: tar.TypeLink, Linkname: target}}
}

// Owned returns e with the given numeric owner.
func (e Entry) Owned(uid, gid int) Entry {
	e.Header.Uid, e.Header.Gid = uid, gid
	return e
}

// Deb describes a package to build.
type Deb struct {
	Control     map[string]string // control fields; Package is required
	Compression string            // of data.tar: "xz", "zst", "gz" or "none"
	Entries     []Entry
}

// Build returns the .deb bytes.
func Build(d Deb) ([]byte, error) {
	control, err := controlTar(d.Control)
	if err != nil {
		return nil, err
	}
	data, err := tarOf(d.Entries)
	if err != nil {
		return nil, err
	}
	name := "data.tar"
	if d.Compression != "none" {
		name += "." + d.Compression
	}
	data, err = compress(data, d.Compression)
	if err != nil {
		return nil, err
	}
	var ar bytes.Buffer
	ar.WriteString("!<arch>\n")
	for _, m := range []struct {
		name string
		data []byte
	}{{"debian-binary", []byte("2.0\n")}, {"control.tar.gz", control}, {name, data}} {
		fmt.Fprintf(&ar, "%-16s%-12d%-6d%-6d%-8s%-10d`\n", m.name, 0, 0, 0, "100644", len(m.data))
		ar.Write(m.data)
		if len(m.data)%2 == 1 {
			ar.WriteByte('\n')
		}
	}
	return ar.Bytes(), nil
}

func controlTar(fields map[string]string) ([]byte, error) {
	if fields["Package"] == "" {
		return nil, fmt.Errorf("debtest: control needs a Package field")
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		if k != "Package" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "Package: %s\n", fields["Package"])
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s\n", k, strings.ReplaceAll(fields[k], "\n", "\n "))
	}
	t, err := tarOf([]Entry{Dir("./", 0o755), File("./control", 0o644, b.String())})
	if err != nil {
		return nil, err
	}
	return compress(t, "gz")
}

func tarOf(entries []Entry) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := e.Header
		h.Size = int64(len(e.Data))
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if h.ModTime.IsZero() {
			h.ModTime = time.Unix(1700000000, 0)
		}
		if err := tw.WriteHeader(&h); err != nil {
			return nil, fmt.Errorf("debtest: tar header %s: %w", h.Name, err)
		}
		if _, err := tw.Write(e.Data[:h.Size]); err != nil {
			return nil, fmt.Errorf("debtest: tar content %s: %w", h.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func compress(data []byte, how string) ([]byte, error) {
	var buf bytes.Buffer
	var w io.WriteCloser
	var err error
	switch how {
	case "none":
		return data, nil
	case "gz":
		w = gzip.NewWriter(&buf)
	case "zst":
		w, err = zstd.NewWriter(&buf)
	case "xz":
		w, err = xz.NewWriter(&buf)
	default:
		return nil, fmt.Errorf("debtest: unknown compression %q", how)
	}
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
