package lock

import (
	"bytes"
	"testing"
	"time"
)

// TestFormatExact: the whole text Format writes, byte for byte: the header
// as comment lines (its blank lines dropped), then every record kind in its
// order, each sorted by name (debs of one name by architecture), whatever
// order the lock was built in.
func TestFormatExact(t *testing.T) {
	day := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	l := &Lock{
		Inputs:    "ab12",
		Epoch:     1764000000,
		Toolchain: "go1.26.8",
		Suites: []Suite{
			{Name: "trixie-security", Date: day.Add(time.Hour), InRelease: "ee"},
			{Name: "trixie", Date: day, InRelease: "ff", Signer: "AB", Trust: "repo:k.asc"},
		},
		Debs: []Deb{
			{Name: "libc6", Version: "2", Arch: "i386", Size: 2, SHA256: "c2", Suite: "trixie", Path: "pool/l2.deb"},
			{Name: "systemd", Version: "3", Arch: "amd64", Size: 3, SHA256: "c3", Suite: "trixie-security", Path: "pool/s.deb"},
			{Name: "libc6", Version: "2", Arch: "amd64", Size: 1, SHA256: "c1", Suite: "trixie", Path: "pool/l1.deb"},
		},
		Go: []Go{
			{Name: "runc", Module: "m/runc", Version: "v1", Package: "m/runc", Toolchain: "go1.26.8", GoMod: []string{"module b", "require m/runc v1"}, Sum: []string{"z h1:z=", "a h1:a="}},
			{Name: "kubelet", Module: "m/k", Version: "v2", Package: "m/k/cmd", Toolchain: "go1.26.8"},
		},
		URLs: []URL{
			{Name: "zz", SHA256: "d2", Size: 20, URL: "https://x.invalid/zz"},
			{Name: "aa", SHA256: "d1", Size: 10, URL: "https://x.invalid/aa"},
		},
	}
	want := `# first line
# second line
lock 2
inputs ab12
epoch 1764000000 2025-11-24T16:00:00Z
toolchain go1.26.8
suite trixie 2026-11-29T08:00:00Z ff
signer trixie AB repo:k.asc
suite trixie-security 2026-11-29T09:00:00Z ee
deb libc6 2 amd64 1 c1 trixie pool/l1.deb
deb libc6 2 i386 2 c2 trixie pool/l2.deb
deb systemd 3 amd64 3 c3 trixie-security pool/s.deb
go kubelet m/k@v2 m/k/cmd go1.26.8
go runc m/runc@v1 m/runc go1.26.8
gomod runc module b
gomod runc require m/runc v1
gosum runc a h1:a=
gosum runc z h1:z=
url aa d1 10 https://x.invalid/aa
url zz d2 20 https://x.invalid/zz
`
	if got := string(l.Format("\nfirst line\n\nsecond line\n")); got != want {
		t.Errorf("Format:\n%s\nwant:\n%s", got, want)
	}
	// No header, no toolchain: neither an empty comment nor an empty
	// toolchain line.
	bare := &Lock{Inputs: "x", Epoch: 0}
	if got, want := string(bare.Format("")), "lock 2\ninputs x\nepoch 0 1970-01-01T00:00:00Z\n"; got != want {
		t.Errorf("Format of a bare lock:\n%q\nwant:\n%q", got, want)
	}
}

// TestFormatOfParseIsFixed: a lock that was formatted and read back formats
// to the same bytes, also when a hand merge left two records with the same
// sort key (two suite lines of one name, one package twice, one URL twice): re-locking an
// unchanged lock must not reorder its lines into a diff.
func TestFormatOfParseIsFixed(t *testing.T) {
	text := []byte("lock 2\ninputs ab\nepoch 0 1970-01-01T00:00:00Z\n" +
		"suite trixie 2026-11-29T08:00:00Z aa\n" +
		"suite trixie 2026-11-30T08:00:00Z bb\n" +
		"deb a 1 amd64 1 c1 trixie pool/a1.deb\n" +
		"deb a 2 amd64 2 c2 trixie pool/a2.deb\n" +
		"url tool d1 1 https://x.invalid/tool1\n" +
		"url tool d2 2 https://x.invalid/tool2\n")
	l, err := Parse("x.lock", text)
	if err != nil {
		t.Fatal(err)
	}
	once := l.Format("")
	if !bytes.Equal(once, text) {
		t.Errorf("Format of a formatted lock:\n%s\nwant:\n%s", once, text)
	}
	l2, err := Parse("x.lock", once)
	if err != nil {
		t.Fatal(err)
	}
	if twice := l2.Format(""); !bytes.Equal(twice, once) {
		t.Errorf("Format is not a fixed point:\n%s\n---\n%s", once, twice)
	}
}

// TestGoModOneWordLines: a go.mod carries one-word lines (the ")" closing
// a require block); Parse keeps them, and refuses a gomod line with no
// content.
func TestGoModOneWordLines(t *testing.T) {
	head := "lock 2\ninputs ab\nepoch 0 x\ngo k m@v p go1.26.8\n"
	l, err := Parse("x.lock", []byte(head+"gomod k require (\ngomod k \tm v1\ngomod k )\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Go[0].GoMod; len(got) != 3 || got[0] != "require (" || got[1] != "m v1" || got[2] != ")" {
		t.Errorf("gomod lines %q", got)
	}
	_, err = Parse("x.lock", []byte(head+"gomod k\n"))
	if want := "x.lock:5: \"gomod\" line is too short; the lock is damaged: run `drover lock` again"; err == nil || err.Error() != want {
		t.Errorf("gomod line without content: %v\nwant: %s", err, want)
	}
}
