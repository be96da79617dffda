package deb

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/drover-os/drover/image/deb/debtest"
	"github.com/drover-os/drover/image/tree"
)

// FuzzExtract: a .deb comes from a mirror (its hash is checked, but the
// mirror's index may be wrong or the cache damaged), so reading one must
// never panic, and a refusal names the package it was reading.
func FuzzExtract(f *testing.F) {
	for _, comp := range []string{"xz", "zst", "gz", "none"} {
		f.Add(buildDeb(f, "seed", comp, sampleEntries()))
	}
	f.Add([]byte("!<arch>\n"))
	f.Add([]byte("!<arch>\ndebian-binary   0           0     0     100644  4         `\n2.0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := Extract(bytes.NewReader(data), "fuzz", tree.New(), Options{}); err != nil && !strings.HasPrefix(err.Error(), "extracting fuzz: ") {
			t.Fatalf("error does not name the package: %v", err)
		}
		if _, err := Control(bytes.NewReader(data)); err != nil && !strings.HasPrefix(err.Error(), "reading control of .deb: ") {
			t.Fatalf("control error does not say what was read: %v", err)
		}
	})
}

// FuzzDebRoundTrip: a file packed the way dpkg-deb packs it comes out of
// Extract with the same content, mode and owner. Only plain and gz data.tar:
// creating an xz or zstd writer per input would make this target a hundred
// times slower, and their decoders are fuzzed by FuzzExtract (seeded with
// every compression).
func FuzzDebRoundTrip(f *testing.F) {
	f.Add("usr/bin/tool", []byte("#!/bin/sh\n"), int64(0o4755), 0, 0, uint8(0))
	f.Add("etc/a b/c", []byte{}, int64(0o640), 0, 42, uint8(1))
	f.Add("x", bytes.Repeat([]byte{0}, 4097), int64(0o1777), 1<<20, 7, uint8(2))
	f.Add("bin/tool", []byte("x"), int64(0o755), 0, 0, uint8(1)) // under the /bin link
	f.Add("bin", []byte("x"), int64(0o755), 0, 0, uint8(1))      // the /bin link itself
	f.Fuzz(func(t *testing.T, name string, content []byte, mode int64, uid, gid int, comp uint8) {
		name = strings.Map(func(r rune) rune {
			if r == '/' || r == '.' || r == '-' || r == '_' || r == ' ' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
				return r
			}
			return 'x'
		}, name)
		p := tree.Canonical("/" + name)
		if p == "/" || strings.Contains(p, "/.") || strings.Contains(name, "..") || uid < 0 || gid < 0 || int64(uid) > 1<<21-1 || int64(gid) > 1<<21-1 {
			return // not a file path a package ships, or an owner tar's octal field cannot hold
		}
		c := []string{"gz", "none"}[comp%2]
		e := debtest.File("."+p, mode&0o7777, string(content)).Owned(uid, gid)
		data, err := debtest.Build(debtest.Deb{Control: map[string]string{"Package": "rt", "Version": "1"}, Compression: c, Entries: []debtest.Entry{e}})
		if err != nil {
			return // archive/tar cannot write such an entry: nothing to read back
		}
		tr := tree.New()
		if base := tr.Get(p); base != nil {
			// The merged-/usr skeleton every tree starts with (/usr,
			// /usr/bin, the /bin link, …): a file there is refused,
			// naming the path.
			if _, err := Extract(bytes.NewReader(data), "rt", tr, Options{}); err == nil || !strings.Contains(err.Error(), p+" is the merged-/usr layout's") {
				t.Fatalf("a file at the tree's own %s (%s): %v", p, base.Kind, err)
			}
			return
		}
		st, err := Extract(bytes.NewReader(data), "rt", tr, Options{})
		if err != nil {
			t.Fatalf("extracting %s (%s): %v", p, c, err)
		}
		n := tr.Get(p)
		if n == nil || n.Kind != tree.Regular || !bytes.Equal(n.Data, content) || n.Mode != uint32(mode&0o7777) || n.UID != uint32(uid) || n.GID != uint32(gid) || n.Owner != "rt" {
			t.Fatalf("%s (%s) came out as %+v", p, c, n)
		}
		if st.Compression != c || st.Files != 1 || st.Bytes != int64(len(content)) || st.Control["Package"] != "rt" {
			t.Fatalf("stats %+v", st)
		}
	})
}

// FuzzArReader: any bytes walk as an ar archive without panicking, the
// members never add up to more than the input, and two members written as
// ar writes them (odd sizes padded) read back as they were.
func FuzzArReader(f *testing.F) {
	f.Add([]byte("odd"), []byte("even"), []byte(nil))
	f.Add([]byte{}, []byte("x"), []byte("!<arch>\nname/           0           0     0     100644  -1        `\n"))
	f.Fuzz(func(t *testing.T, a, b, raw []byte) {
		if ar, err := newArReader(bytes.NewReader(raw)); err == nil {
			var total int64
			for {
				_, size, err := ar.Next()
				if err != nil {
					break
				}
				body, err := io.ReadAll(ar)
				total += int64(len(body))
				if err == nil && int64(len(body)) != size {
					t.Fatalf("member body of %d bytes, header says %d", len(body), size)
				}
			}
			if total > int64(len(raw)) {
				t.Fatalf("read %d member bytes from %d input bytes", total, len(raw))
			}
		}

		var buf bytes.Buffer
		buf.WriteString(arMagic)
		for i, m := range [][]byte{a, b} {
			fmt.Fprintf(&buf, "%-16s%-12d%-6d%-6d%-8s%-10d`\n", fmt.Sprintf("m%d/", i), 0, 0, 0, "100644", len(m))
			buf.Write(m)
			if len(m)%2 == 1 {
				buf.WriteByte('\n')
			}
		}
		ar, err := newArReader(&buf)
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range [][]byte{a, b} {
			name, size, err := ar.Next()
			if err != nil || name != fmt.Sprintf("m%d", i) || size != int64(len(want)) {
				t.Fatalf("member %d: %q %d %v", i, name, size, err)
			}
			if i == 0 && len(a) > 0 {
				continue // left unread: Next must skip it and its padding
			}
			if got, err := io.ReadAll(ar); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("member %d body %q, %v; want %q", i, got, err, want)
			}
		}
		if _, _, err := ar.Next(); err != io.EOF {
			t.Fatalf("after the last member: %v, want io.EOF", err)
		}
	})
}
